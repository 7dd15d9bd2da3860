/* Boxes that follow the image, to look at: a small detection set made from
 * the photograph the tests use (tests/ref/crop/src.jpg), packed into a tar
 * shard with a boxes file per image, loaded with RandomResizedCrop and the
 * flip, and written as a PNG contact sheet with the boxes drawn.
 *
 * Each scene is the photograph, dimmed, as a background, with one to four
 * patches of it pasted on top at other places and sizes: a patch's box is
 * where it was pasted, and its class the quarter of the photograph it came
 * from. Scenes are JPEGs, so a crop decodes at a reduced DCT scale. Every
 * sample carries KEY.jpg, KEY.boxes.npy (f32 [K, 4], x0 y0 x1 y1 in pixels)
 * and KEY.labels.npy (i64 [K]).
 *
 * The shard is read back as fields (ferry_dataset_shards_fields: jpg,
 * boxes.npy, labels.npy) with boxes_follow set: each crop and flip moves the
 * boxes and their labels with the pixels, clips them, and drops those with
 * nothing left.
 *
 * The sheet has one row per scene: the whole scene, then the same scene in
 * three epochs of the loader (each a new crop and flip), each with its boxes
 * as the loader delivered them, outlined in the class's colour.
 *   build/samples/detect OUT_DIR   (writes OUT_DIR/detect-000.tar and
 *                                   OUT_DIR/detect_sheet.png) */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jpeglib.h>

#include <ferry.h>

#define SCENES 24
#define SHEET_ROWS 6
#define EPOCHS 3
#define SW 320 /* scene size */
#define SH 240
#define OUT 192 /* the crops' size */
#define MAXK 4

static const uint8_t colours[4][3] = {{255, 64, 64}, {64, 255, 64}, {80, 160, 255}, {255, 230, 0}};

typedef struct scene {
    uint8_t px[SH][SW][3];
    float boxes[MAXK][4];
    int64_t labels[MAXK];
    size_t k;
} scene;

/* ---- making the scenes ---- */

/* Patches of photo (pw x ph) pasted on the dimmed photo, never overlapping. */
static void make_scene(const uint8_t *photo, size_t pw, size_t ph, uint64_t seed, scene *s)
{
    ferry_rng r;
    ferry_rng_init(&r, seed, 0, 0);
    /* The background: the photo stretched to the scene (nearest), dimmed. */
    for (size_t y = 0; y < SH; y++)
        for (size_t x = 0; x < SW; x++)
            for (size_t c = 0; c < 3; c++)
                s->px[y][x][c] = (uint8_t)(photo[((y * ph / SH) * pw + x * pw / SW) * 3 + c] / 3);
    size_t want = 1 + (size_t)ferry_rng_below(&r, MAXK);
    s->k = 0;
    for (int tries = 0; tries < 50 && s->k < want; tries++) {
        size_t cw = 24 + (size_t)ferry_rng_below(&r, pw / 2 - 24);
        size_t ch = 24 + (size_t)ferry_rng_below(&r, ph / 2 - 24);
        size_t cx = (size_t)ferry_rng_below(&r, pw - cw + 1);
        size_t cy = (size_t)ferry_rng_below(&r, ph - ch + 1);
        double scale = 0.8 + 0.9 * ferry_rng_uniform(&r);
        size_t bw = (size_t)((double)cw * scale), bh = (size_t)((double)ch * scale);
        if (bw >= SW || bh >= SH)
            continue;
        size_t x0 = (size_t)ferry_rng_below(&r, SW - bw + 1);
        size_t y0 = (size_t)ferry_rng_below(&r, SH - bh + 1);
        int clash = 0;
        for (size_t i = 0; i < s->k; i++)
            clash |= x0 < s->boxes[i][2] + 4 && s->boxes[i][0] < x0 + bw + 4 &&
                     y0 < s->boxes[i][3] + 4 && s->boxes[i][1] < y0 + bh + 4;
        if (clash)
            continue;
        for (size_t y = 0; y < bh; y++)
            for (size_t x = 0; x < bw; x++)
                memcpy(s->px[y0 + y][x0 + x],
                       photo + ((cy + y * ch / bh) * pw + cx + x * cw / bw) * 3, 3);
        /* Pixel edges: the patch covers pixels x0 .. x0 + bw - 1. */
        float *b = s->boxes[s->k];
        b[0] = (float)x0;
        b[1] = (float)y0;
        b[2] = (float)(x0 + bw);
        b[3] = (float)(y0 + bh);
        /* Its class: the quarter of the photo the patch's centre is in. */
        s->labels[s->k] = (cx + cw / 2 >= pw / 2) + 2 * (cy + ch / 2 >= ph / 2);
        s->k++;
    }
}

/* The scene as a JPEG (quality 92), in memory from malloc. */
static unsigned char *scene_jpeg(const scene *s, unsigned long *n)
{
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr err;
    c.err = jpeg_std_error(&err); /* in-memory, fixed-size input: no error expected */
    jpeg_create_compress(&c);
    unsigned char *out = NULL;
    *n = 0;
    jpeg_mem_dest(&c, &out, n);
    c.image_width = SW;
    c.image_height = SH;
    c.input_components = 3;
    c.in_color_space = JCS_RGB;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, 92, TRUE);
    jpeg_start_compress(&c, TRUE);
    for (size_t y = 0; y < SH; y++) {
        JSAMPROW row = (JSAMPROW)s->px[y];
        jpeg_write_scanlines(&c, &row, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    return out;
}

/* An NPY 1.0 file of a little-endian array: descr "<f4" or "<i8", shape
 * (k, 4) or (k,). The header is padded so the data starts at 128 bytes (NPY
 * wants a multiple of 64). */
static size_t npy(char *dst, const char *descr, size_t k, int two_d, const void *data,
                  size_t bytes)
{
    char dict[118];
    int len = two_d ? snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, "
                               "'shape': (%zu, 4), }", descr, k)
                    : snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, "
                               "'shape': (%zu,), }", descr, k);
    memcpy(dst, "\x93NUMPY\x01\x00\x76\x00", 10); /* version 1.0, 118 header bytes */
    memset(dst + 10, ' ', 118);
    memcpy(dst + 10, dict, len > 0 && len < 117 ? (size_t)len : 0);
    dst[127] = '\n';
    memcpy(dst + 128, data, bytes);
    return 128 + bytes;
}

/* ---- a tar shard (ustar) ---- */

static int tar_member(FILE *f, const char *name, const void *data, size_t n)
{
    char h[512] = {0};
    snprintf(h, 100, "%s", name);
    memcpy(h + 100, "0000644", 8);
    memcpy(h + 108, "0000000", 8);
    memcpy(h + 116, "0000000", 8);
    snprintf(h + 124, 12, "%011zo", n);
    memcpy(h + 136, "00000000000", 12);
    h[156] = '0';
    memcpy(h + 257, "ustar", 6);
    memcpy(h + 263, "00", 2);
    memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (size_t i = 0; i < 512; i++)
        sum += (unsigned char)h[i];
    snprintf(h + 148, 8, "%06o", sum);
    static const char zeros[512];
    size_t pad = (512 - n % 512) % 512;
    return fwrite(h, 1, 512, f) == 512 && fwrite(data, 1, n, f) == n &&
           fwrite(zeros, 1, pad, f) == pad ? 0 : -1;
}

static int write_shard(const char *path, const scene *scenes, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    int bad = 0;
    static char buf[128 + MAXK * 16];
    for (size_t i = 0; i < n && !bad; i++) {
        const scene *s = &scenes[i];
        char name[64];
        unsigned long jn;
        unsigned char *jpg = scene_jpeg(s, &jn);
        snprintf(name, sizeof name, "scene%04zu.jpg", i);
        bad |= !jpg || tar_member(f, name, jpg, jn);
        free(jpg);
        snprintf(name, sizeof name, "scene%04zu.boxes.npy", i);
        bad |= tar_member(f, name, buf, npy(buf, "<f4", s->k, 1, s->boxes, s->k * 16));
        snprintf(name, sizeof name, "scene%04zu.labels.npy", i);
        bad |= tar_member(f, name, buf, npy(buf, "<i8", s->k, 0, s->labels, s->k * 8));
    }
    static const char end[1024];
    bad |= fwrite(end, 1, sizeof end, f) != sizeof end;
    return fclose(f) || bad ? -1 : 0;
}

/* ---- the contact sheet ---- */

/* Box b's outline (pixel edges: the pixels it covers), two pixels wide, on
 * an RGB HWC image. */
static void outline(uint8_t *img, size_t w, size_t h, const float *b, const uint8_t *rgb)
{
    long x0 = (long)b[0], y0 = (long)b[1], x1 = (long)(b[2] + 0.999f) - 1,
         y1 = (long)(b[3] + 0.999f) - 1;
    for (long y = y0; y <= y1; y++)
        for (long x = x0; x <= x1; x++) {
            int edge = x - x0 < 2 || x1 - x < 2 || y - y0 < 2 || y1 - y < 2;
            if (edge && x >= 0 && y >= 0 && (size_t)x < w && (size_t)y < h)
                memcpy(img + ((size_t)y * w + (size_t)x) * 3, rgb, 3);
        }
}

/* Tile (row, col) of the sheet gets the w x h image img (HWC). */
static void put_tile(uint8_t *sheet, size_t sheet_w, size_t row, size_t col, const uint8_t *img,
                     size_t w, size_t h)
{
    size_t gap = 4;
    for (size_t y = 0; y < h; y++)
        memcpy(sheet + ((row * (OUT + gap) + gap + y) * sheet_w + col * (OUT + gap) + gap) * 3,
               img + y * w * 3, w * 3);
}

/* The photo, decoded at its own size (RGB, HWC); NULL after saying why. */
static uint8_t *load_photo(const char *path, size_t *w, size_t *h)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "detect: cannot open %s\n", path);
        return NULL;
    }
    static uint8_t file[1 << 20];
    size_t n = fread(file, 1, sizeof file, f);
    fclose(f);
    ferry_image_config cfg = ferry_image_config_default();
    cfg.channels = 3;
    cfg.layout = FERRY_LAYOUT_HWC;
    ferry_image_info info;
    ferry_sample_format fmt;
    uint8_t *px = NULL;
    ferry_status st = ferry_image_probe(file, n, &info);
    if (st == FERRY_OK)
        st = ferry_image_format(&cfg, &info, &fmt);
    if (st == FERRY_OK && !(px = malloc(ferry_sample_format_bytes(&fmt))))
        st = FERRY_ERR_NO_MEMORY;
    if (st == FERRY_OK)
        st = ferry_image_decode(file, n, &cfg, NULL, path, px, ferry_sample_format_bytes(&fmt));
    if (st != FERRY_OK) {
        fprintf(stderr, "detect: %s\n", ferry_last_error());
        free(px);
        return NULL;
    }
    *w = fmt.width;
    *h = fmt.height;
    return px;
}

/* Tiles 1..EPOCHS of each row: the loader's crops and flips, boxes drawn. */
static ferry_status sheet_epochs(const char *shard, uint8_t *sheet, size_t sheet_w)
{
    /* The shard as fields, in this order: the image, its boxes, their labels.
     * boxes_follow makes the boxes and the labels after them move with the
     * image's crop and flip. */
    const char *members[] = {"jpg", "boxes.npy", "labels.npy"};
    ferry_image_config cfg = ferry_image_config_default();
    cfg.crop = FERRY_CROP_RANDOM_RESIZED;
    cfg.crop_scale[0] = 0.2;
    cfg.crop_scale[1] = 1.0;
    cfg.width = cfg.height = OUT;
    cfg.channels = 3;
    cfg.random_hflip = true;
    cfg.boxes_follow = true;
    ferry_dataset *ds = NULL;
    ferry_loader *l = NULL;
    ferry_status st = ferry_dataset_shards_fields(&shard, 1, &cfg, members, 3, &ds);
    if (st == FERRY_OK) {
        ferry_loader_config lc = {.dataset = ds, .batch_size = SHEET_ROWS, .seed = 7,
                                  .out_dtype = FERRY_DTYPE_U8, .layout = FERRY_LAYOUT_HWC};
        st = ferry_loader_create(&lc, &l);
        ferry_dataset_release(ds);
    }
    static uint8_t img[SHEET_ROWS][OUT][OUT][3];
    static float boxes[SHEET_ROWS][MAXK][4];
    static int64_t labels[SHEET_ROWS][MAXK], lengths[SHEET_ROWS];
    for (uint64_t e = 0; e < EPOCHS && st == FERRY_OK; e++) {
        ferry_batch b;
        if ((st = ferry_loader_reset(l, e)) != FERRY_OK ||
            (st = ferry_loader_next(l, NULL, &b)) != FERRY_OK)
            break;
        /* Only the first batch of each epoch goes on the sheet. */
        size_t B = b.size;
        if ((st = ferry_tensor_copy_to_host(b.images, img, B * sizeof img[0])) != FERRY_OK ||
            (st = ferry_tensor_copy_to_host(ferry_batch_field(&b, "boxes.npy"), boxes,
                                            B * sizeof boxes[0])) != FERRY_OK ||
            (st = ferry_tensor_copy_to_host(ferry_batch_field(&b, "labels.npy"), labels,
                                            B * sizeof labels[0])) != FERRY_OK ||
            (st = ferry_tensor_copy_to_host(ferry_batch_lengths(&b, "boxes.npy"), lengths,
                                            B * sizeof lengths[0])) != FERRY_OK)
            break;
        for (size_t i = 0; i < B; i++) {
            for (int64_t j = 0; j < lengths[i]; j++)
                outline(&img[i][0][0][0], OUT, OUT, boxes[i][j], colours[labels[i][j] & 3]);
            put_tile(sheet, sheet_w, i, 1 + e, &img[i][0][0][0], OUT, OUT);
            printf("epoch %llu, scene %zu: %lld of its boxes left after the crop\n",
                   (unsigned long long)e, b.indices[i], (long long)lengths[i]);
        }
    }
    ferry_loader_destroy(l);
    return st;
}

int main(int argc, char **argv)
{
    /* --help or -h: the usage on stdout; anything but one folder: on stderr, status 2. */
    int help = argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"));
    if (argc != 2 || help || argv[1][0] == '-') {
        if (argc == 2 && !help && argv[1][0] == '-')
            fprintf(stderr, "detect: unknown option '%s'\n", argv[1]);
        fprintf(help ? stdout : stderr,
                "usage: %s OUT_DIR   (writes OUT_DIR/detect-000.tar and "
                "OUT_DIR/detect_sheet.png)\n", argv[0]);
        return help ? 0 : 2;
    }
    size_t pw, ph;
    uint8_t *photo = load_photo(FERRY_SOURCE_DIR "/tests/ref/crop/src.jpg", &pw, &ph);
    if (!photo)
        return 1;
    scene *scenes = malloc(SCENES * sizeof *scenes);
    char shard[4096], png[4096];
    snprintf(shard, sizeof shard, "%s/detect-000.tar", argv[1]);
    snprintf(png, sizeof png, "%s/detect_sheet.png", argv[1]);
    if (!scenes)
        return 1;
    for (size_t i = 0; i < SCENES; i++)
        make_scene(photo, pw, ph, i, &scenes[i]);
    free(photo);
    if (write_shard(shard, scenes, SCENES)) {
        fprintf(stderr, "detect: cannot write %s\n", shard);
        return 1;
    }
    printf("wrote %s: %d scenes with their boxes\n", shard, SCENES);

    /* Column 0: each scene as made, shrunk to fit (nearest), boxes scaled. */
    size_t sheet_w = (1 + EPOCHS) * (OUT + 4) + 4, sheet_h = SHEET_ROWS * (OUT + 4) + 4;
    uint8_t *sheet = calloc(sheet_w * sheet_h, 3);
    static uint8_t tile[OUT][OUT][3];
    for (size_t r = 0; r < SHEET_ROWS && sheet; r++) {
        const scene *s = &scenes[r];
        memset(tile, 0, sizeof tile);
        size_t th = SH * OUT / SW; /* the scene's aspect */
        for (size_t y = 0; y < th; y++)
            for (size_t x = 0; x < OUT; x++)
                memcpy(tile[y][x], s->px[y * SH / th][x * SW / OUT], 3);
        for (size_t j = 0; j < s->k; j++) {
            float b[4];
            for (int c = 0; c < 4; c++)
                b[c] = s->boxes[j][c] * (float)OUT / SW;
            outline(&tile[0][0][0], OUT, OUT, b, colours[s->labels[j] & 3]);
        }
        put_tile(sheet, sheet_w, r, 0, &tile[0][0][0], OUT, OUT);
    }
    ferry_status st = sheet ? sheet_epochs(shard, sheet, sheet_w) : FERRY_ERR_NO_MEMORY;
    if (st == FERRY_OK)
        st = ferry_png_save(png, sheet, sheet_w, sheet_h, 3);
    if (st == FERRY_OK)
        printf("wrote %s: each row a scene, then %d epochs of RandomResizedCrop + flip\n", png,
               EPOCHS);
    else
        fprintf(stderr, "detect: %s\n", ferry_last_error());
    free(sheet);
    free(scenes);
    return st == FERRY_OK ? 0 : 1;
}

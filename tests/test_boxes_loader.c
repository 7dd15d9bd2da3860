/* Boxes through the loader: a dataset of its own by fields (an image, ragged
 * boxes, per-box labels and scores following them) whose get() makes each
 * sample with ferry_image_decode_boxes, loaded with RandomResizedCrop and
 * the flip. Every batch place must hold what a direct call gives for that
 * sample, seed and epoch (image, boxes, labels, scores, lengths, zeros past
 * them), for no worker threads and for three; and the boxes must sit on the
 * painted rectangles in the loader's images (each box painted in its own
 * channel; its label says which), within the tolerance tests/test_boxes.c
 * states (1.5 output pixels, plus half a source pixel when enlarging: kept
 * below 1.5 here by the crop scale). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "dataset/fields/follow_boxes.h"

#define N 24
#define W 40
#define H 32
#define MAXK 3
#define TRACE 48

typedef struct painted_set {
    uint8_t *file[N];
    size_t bytes[N];
    size_t k[N];
    float boxes[N][MAXK][4];
    ferry_image_config cfg;
} painted_set;

static ferry_status ps_get(void *user, size_t i, void *const *dst, size_t *lengths,
                           const ferry_sample_ctx *ctx)
{
    const painted_set *p = user;
    float *boxes = dst[1];
    int64_t *labels = dst[2];
    float *scores = dst[3];
    memcpy(boxes, p->boxes[i], p->k[i] * sizeof p->boxes[i][0]);
    for (size_t j = 0; j < p->k[i]; j++) {
        labels[j] = 100 + (int64_t)j; /* box j is painted in channel j */
        scores[j] = (float)j + 0.5f;
    }
    void *const follow[2] = {labels, scores};
    const size_t rows[2] = {sizeof *labels, sizeof *scores};
    ferry_boxes b = {.xyxy = boxes, .count = p->k[i], .follow = follow, .follow_row_bytes = rows,
                     .num_follow = 2};
    ferry_status st = ferry_image_decode_boxes(p->file[i], p->bytes[i], &p->cfg,
                                               ctx ? ctx->scratch : NULL, ctx, i, NULL, dst[0],
                                               3 * H * W, &b);
    lengths[1] = lengths[2] = lengths[3] = b.count;
    return st;
}

/* Sample i: a black w x h RGB image with k boxes, box j filled in channel j. */
static void make_sample(painted_set *p, size_t i)
{
    ferry_rng r;
    ferry_rng_init(&r, 4, 4, i);
    size_t w = 64 + ferry_rng_below(&r, 64), h = 56 + ferry_rng_below(&r, 64);
    uint8_t *px = calloc(w * h, 3);
    ASSERT(px);
    p->k[i] = 1 + i % MAXK;
    size_t strip = w / MAXK;
    for (size_t j = 0; j < p->k[i]; j++) {
        size_t x0 = j * strip + 2 + ferry_rng_below(&r, strip / 4);
        size_t x1 = x0 + 6 + ferry_rng_below(&r, strip - 8 - (x0 - j * strip));
        size_t y0 = ferry_rng_below(&r, h / 2), y1 = y0 + 6 + ferry_rng_below(&r, h - y0 - 6);
        for (size_t y = y0; y < y1; y++)
            for (size_t x = x0; x < x1; x++)
                px[(y * w + x) * 3 + j] = 255;
        float *b = p->boxes[i][j];
        b[0] = (float)x0;
        b[1] = (float)y0;
        b[2] = (float)x1;
        b[3] = (float)y1;
    }
    const char *path = ft_tmp("boxes_loader.png");
    ASSERT_OK(ferry_png_save(path, px, w, h, 3));
    p->file[i] = ft_read_file(path, &p->bytes[i]);
    free(px);
}

static ferry_dataset *painted_dataset(painted_set *p)
{
    ferry_field f[4] = {
        {.name = "image", .dtype = FERRY_DTYPE_U8, .ndim = 3, .shape = {3, H, W},
         .role = FERRY_FIELD_IMAGE},
        {.name = "boxes", .dtype = FERRY_DTYPE_F32, .ndim = 2, .shape = {MAXK, 4}, .ragged = true,
         .role = FERRY_FIELD_BOXES_XYXY},
        {.name = "labels", .dtype = FERRY_DTYPE_I64, .ndim = 1, .shape = {MAXK}, .ragged = true,
         .role = FERRY_FIELD_FOLLOWS_BOXES},
        {.name = "scores", .dtype = FERRY_DTYPE_F32, .ndim = 1, .shape = {MAXK}, .ragged = true,
         .role = FERRY_FIELD_FOLLOWS_BOXES},
    };
    ferry_dataset_field_callbacks cb = {.len = N, .fields = f, .num_fields = 4, .get = ps_get};
    ferry_dataset *ds;
    ASSERT_OK(ferry_dataset_custom_fields(&cb, p, &ds));
    return ds;
}

typedef struct host_batch {
    size_t size, idx[8];
    uint8_t img[8][3 * H * W];
    float boxes[8][MAXK][4];
    int64_t labels[8][MAXK], len[8];
    float scores[8][MAXK];
} host_batch;

static void copy_field(ferry_tensor *t, void *dst, size_t bytes)
{
    ASSERT(t);
    ASSERT_EQ_SIZE(ferry_tensor_nbytes(t), bytes);
    ASSERT_OK(ferry_tensor_copy_to_host(t, dst, bytes));
}

/* The painted rectangle of box j (channel ch) spans the box in img (CHW). */
static void check_on_paint(const uint8_t *img, const float *b, int ch, size_t i)
{
    double lo[2] = {1e9, 1e9}, hi[2] = {-1e9, -1e9};
    for (size_t y = 0; y < H; y++)
        for (size_t x = 0; x < W; x++)
            if (img[(size_t)ch * H * W + y * W + x] >= TRACE) {
                lo[0] = fmin(lo[0], (double)x);
                hi[0] = fmax(hi[0], (double)x + 1);
                lo[1] = fmin(lo[1], (double)y);
                hi[1] = fmax(hi[1], (double)y + 1);
            }
    double bl[2] = {b[0], b[1]}, bh[2] = {b[2], b[3]};
    if (lo[0] > hi[0]) { /* no pixel at TRACE: a sliver */
        ASSERT_MSG(bh[0] - bl[0] < 3 || bh[1] - bl[1] < 3, "sample %zu box %d has no pixels", i, ch);
        return;
    }
    for (int a = 0; a < 2; a++)
        ASSERT_MSG(fabs(lo[a] - bl[a]) <= 2.5 && fabs(hi[a] - bh[a]) <= 2.5,
                   "sample %zu box %d axis %d: box [%g, %g), painted [%g, %g)", i, ch, a, bl[a],
                   bh[a], lo[a], hi[a]);
}

static void run(painted_set *p, size_t workers, uint64_t epochs, size_t *kept, size_t *dropped)
{
    ferry_dataset *ds = painted_dataset(p);
    ferry_loader_config c = {.dataset = ds, .batch_size = 8, .shuffle = true, .seed = 9,
                             .num_workers = workers ? workers : FERRY_LOADER_NO_WORKERS,
                             .out_dtype = FERRY_DTYPE_U8};
    ferry_loader *l;
    ASSERT_OK(ferry_loader_create(&c, &l));
    ferry_dataset_release(ds);
    ferry_scratch *s;
    ASSERT_OK(ferry_scratch_create(&s));
    static host_batch h;
    for (uint64_t e = 0; e < epochs; e++) {
        ASSERT_OK(ferry_loader_reset(l, e));
        ferry_batch b;
        ferry_status st;
        while ((st = ferry_loader_next(l, NULL, &b)) == FERRY_OK) {
            memset(&h, 0, sizeof h);
            h.size = b.size;
            copy_field(b.images, h.img, b.size * sizeof h.img[0]);
            copy_field(ferry_batch_field(&b, "boxes"), h.boxes, b.size * sizeof h.boxes[0]);
            copy_field(ferry_batch_field(&b, "labels"), h.labels, b.size * sizeof h.labels[0]);
            copy_field(ferry_batch_field(&b, "scores"), h.scores, b.size * sizeof h.scores[0]);
            copy_field(ferry_batch_lengths(&b, "boxes"), h.len, b.size * sizeof h.len[0]);
            int64_t llen[8];
            copy_field(ferry_batch_lengths(&b, "labels"), llen, b.size * sizeof llen[0]);
            for (size_t q = 0; q < b.size; q++) {
                size_t i = b.indices[q];
                /* What the sample is, made directly for this seed and epoch. */
                uint8_t img[3 * H * W];
                float boxes[MAXK][4] = {{0}};
                int64_t labels[MAXK] = {0};
                float scores[MAXK] = {0};
                void *dst[4] = {img, boxes, labels, scores};
                size_t len[4];
                ferry_sample_ctx ctx = {.seed = 9, .epoch = e, .train = true, .scratch = s};
                ASSERT_OK(ps_get(p, i, dst, len, &ctx));
                ASSERT_EQ_INT(h.len[q], (int64_t)len[1]);
                ASSERT_EQ_INT(llen[q], (int64_t)len[1]);
                ASSERT_MEM_EQ(h.img[q], img, sizeof img);
                ASSERT_MEM_EQ(h.boxes[q], boxes, len[1] * sizeof boxes[0]);
                ASSERT_MEM_EQ(h.labels[q], labels, len[1] * sizeof labels[0]);
                ASSERT_MEM_EQ(h.scores[q], scores, len[1] * sizeof scores[0]);
                for (size_t j = len[1]; j < MAXK; j++) /* zeros past the length */
                    ASSERT(h.labels[q][j] == 0 && h.scores[q][j] == 0 && h.boxes[q][j][0] == 0 &&
                           h.boxes[q][j][3] == 0);
                for (size_t j = 0; j < len[1]; j++) {
                    int ch = (int)(h.labels[q][j] - 100);
                    ASSERT(ch >= 0 && (size_t)ch < p->k[i]);
                    ASSERT(h.scores[q][j] == (float)ch + 0.5f);
                    check_on_paint(h.img[q], h.boxes[q][j], ch, i);
                }
                *kept += len[1];
                *dropped += p->k[i] - len[1];
            }
        }
        ASSERT_STATUS(st, FERRY_END);
    }
    ferry_scratch_destroy(s);
    ferry_loader_destroy(l);
}

TEST(boxes_follow_through_the_loader)
{
    static painted_set p;
    memset(&p, 0, sizeof p);
    p.cfg = ferry_image_config_default();
    p.cfg.width = W;
    p.cfg.height = H;
    p.cfg.channels = 3;
    p.cfg.crop = FERRY_CROP_RANDOM_RESIZED;
    p.cfg.crop_scale[0] = 0.3; /* crops of at most ~2x enlargement */
    p.cfg.crop_scale[1] = 1.0;
    p.cfg.random_hflip = true;
    for (size_t i = 0; i < N; i++)
        make_sample(&p, i);
    size_t kept = 0, dropped = 0;
    run(&p, 0, 3, &kept, &dropped);
    run(&p, 3, 3, &kept, &dropped);
    ASSERT_MSG(kept > dropped && dropped > 0, "kept %zu, dropped %zu", kept, dropped);
    for (size_t i = 0; i < N; i++)
        free(p.file[i]);
}

/* ---- shards read as fields: KEY.png, KEY.boxes.npy, KEY.labels.npy ---- */

/* An NPY 1.0 file: descr, shape text, data; the data at byte 128. */
static size_t npy_file(uint8_t *out, const char *descr, const char *shape, const void *data,
                       size_t bytes)
{
    char dict[118];
    int len = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
                       descr, shape);
    ASSERT(len > 0 && len < 117);
    memcpy(out, "\x93NUMPY\x01\x00\x76\x00", 10);
    memset(out + 10, ' ', 118);
    memcpy(out + 10, dict, (size_t)len);
    out[127] = '\n';
    memcpy(out + 128, data, bytes);
    return 128 + bytes;
}

TEST(boxes_follow_in_shards_read_as_fields)
{
    static painted_set p;
    memset(&p, 0, sizeof p);
    p.cfg = ferry_image_config_default();
    p.cfg.width = W;
    p.cfg.height = H;
    p.cfg.channels = 3;
    p.cfg.crop = FERRY_CROP_RANDOM_RESIZED;
    p.cfg.random_hflip = true;
    p.cfg.boxes_follow = true;
    ft_tar t = {0};
    for (size_t i = 0; i < N; i++) {
        make_sample(&p, i);
        char name[64], shape[32];
        uint8_t npy[128 + MAXK * 16];
        int64_t labels[MAXK];
        for (size_t j = 0; j < p.k[i]; j++)
            labels[j] = 100 + (int64_t)j;
        snprintf(name, sizeof name, "s%03zu.png", i);
        ft_tar_file(&t, name, p.file[i], p.bytes[i]);
        snprintf(name, sizeof name, "s%03zu.boxes.npy", i);
        snprintf(shape, sizeof shape, "(%zu, 4)", p.k[i]);
        ft_tar_file(&t, name, npy, npy_file(npy, "<f4", shape, p.boxes[i], p.k[i] * 16));
        snprintf(name, sizeof name, "s%03zu.labels.npy", i);
        snprintf(shape, sizeof shape, "(%zu,)", p.k[i]);
        ft_tar_file(&t, name, npy, npy_file(npy, "<i8", shape, labels, p.k[i] * 8));
    }
    ft_tar_end(&t);
    const char *path = ft_tar_save(&t, "boxes_fields.tar");
    const char *members[3] = {"png", "boxes.npy", "labels.npy"};
    ferry_dataset *ds;
    ASSERT_OK(ferry_dataset_shards_fields(&path, 1, &p.cfg, members, 3, &ds));
    const ferry_field *f;
    size_t nf;
    ASSERT_OK(ferry_dataset_fields(ds, &f, &nf));
    ASSERT_EQ_SIZE(nf, (size_t)3);
    ASSERT(f[1].role == FERRY_FIELD_BOXES_XYXY && f[1].ragged && f[1].shape[0] == MAXK);
    ASSERT(f[2].role == FERRY_FIELD_FOLLOWS_BOXES && f[2].ragged);
    /* Without boxes_follow, arrays as stored. */
    ferry_image_config plain = p.cfg;
    plain.boxes_follow = false;
    ferry_dataset *ds2;
    ASSERT_OK(ferry_dataset_shards_fields(&path, 1, &plain, members, 3, &ds2));
    const ferry_field *f2;
    ASSERT_OK(ferry_dataset_fields(ds2, &f2, &nf));
    ASSERT(f2[1].role == FERRY_FIELD_PLAIN && f2[2].role == FERRY_FIELD_PLAIN);
    ferry_dataset_release(ds2);
    ferry_scratch *s;
    ASSERT_OK(ferry_scratch_create(&s));
    size_t kept = 0, dropped = 0;
    for (uint64_t e = 0; e < 2; e++)
        for (size_t i = 0; i < N; i++) {
            ferry_sample_ctx ctx = {.seed = 3, .epoch = e, .train = true, .scratch = s};
            uint8_t img[3 * H * W], want_img[3 * H * W];
            float boxes[MAXK][4], want[MAXK][4];
            int64_t labels[MAXK], want_l[MAXK];
            memset(boxes, 0x55, sizeof boxes);
            memset(labels, 0x55, sizeof labels);
            void *dst[3] = {img, boxes, labels};
            size_t len[3];
            ASSERT_OK(ferry_dataset_get_fields(ds, i, dst, len, &ctx));
            /* The same sample made directly. */
            memcpy(want, p.boxes[i], sizeof want);
            for (size_t j = 0; j < MAXK; j++)
                want_l[j] = 100 + (int64_t)j;
            void *const follow[1] = {want_l};
            const size_t row[1] = {sizeof want_l[0]};
            ferry_boxes b = {.xyxy = &want[0][0], .count = p.k[i], .follow = follow,
                             .follow_row_bytes = row, .num_follow = 1};
            ASSERT_OK(ferry_image_decode_boxes(p.file[i], p.bytes[i], &p.cfg, s, &ctx, i, NULL,
                                               want_img, sizeof want_img, &b));
            ASSERT_MEM_EQ(img, want_img, sizeof img);
            ASSERT_EQ_SIZE(len[1], b.count);
            ASSERT_EQ_SIZE(len[2], b.count);
            ASSERT_MEM_EQ(boxes, want, b.count * sizeof want[0]);
            ASSERT_MEM_EQ(labels, want_l, b.count * sizeof want_l[0]);
            for (size_t j = b.count; j < MAXK; j++)
                ASSERT(labels[j] == 0 && boxes[j][0] == 0 && boxes[j][2] == 0);
            kept += b.count;
            dropped += p.k[i] - b.count;
        }
    ASSERT_MSG(kept > dropped && dropped > 0, "kept %zu, dropped %zu", kept, dropped);
    ferry_scratch_destroy(s);
    ferry_dataset_release(ds);
    for (size_t i = 0; i < N; i++)
        free(p.file[i]);
}

TEST(following_fields_need_one_row_per_box)
{
    ferry_field f[3] = {
        {.name = "img", .dtype = FERRY_DTYPE_U8, .ndim = 3, .shape = {3, 4, 4},
         .role = FERRY_FIELD_IMAGE},
        {.name = "b", .dtype = FERRY_DTYPE_F32, .ndim = 2, .shape = {2, 4}, .ragged = true,
         .role = FERRY_FIELD_BOXES_XYXY},
        {.name = "lab", .dtype = FERRY_DTYPE_I64, .ndim = 1, .shape = {2}, .ragged = true,
         .role = FERRY_FIELD_FOLLOWS_BOXES},
    };
    uint8_t img[48] = {0};
    float b[2][4] = {{-4, 0, -1, 2}, {1, 1, 3, 3}}; /* the first is off the image */
    int64_t lab[2] = {7, 8};
    void *dst[3] = {img, b, lab};
    size_t len[3] = {1, 2, 1};
    ferry_image_geom g;
    ferry__geom_start(&g, 4, 4, 1);
    ASSERT_STATUS(ferry__fields_follow_boxes(f, 3, dst, len, &g, 0), FERRY_ERR_FORMAT);
    ASSERT_STR_CONTAINS(ferry_last_error(), "'lab' has 1 rows, the boxes ('b') 2");
    len[2] = 2;
    ASSERT_OK(ferry__fields_follow_boxes(f, 3, dst, len, &g, 0));
    ASSERT(len[1] == 1 && len[2] == 1 && lab[0] == 8 && lab[1] == 0);
    ASSERT(b[0][0] == 1 && b[0][3] == 3 && b[1][0] == 0 && b[1][3] == 0);
}

/* Boxes that follow the image (src/dataset/image/boxes.c, geom.c).
 *
 * Against an independent NumPy reference (tests/ref/make_boxes_ref.py: each
 * transform's definition as transforms.v2 moves and clamps boxes, then the
 * area-fraction sanitising): 600 seeded cases of EXIF orientation, crop or
 * resize mode, padded shift and flip, with labels (int64), scores (float) and a
 * 3-byte field travelling with the boxes.
 *
 * Painted rectangles through the real sample path (ferry__image_sample_geom:
 * decode, crop, resize, augment), many seeds: each box painted as a filled
 * rectangle in its own channel (red, green, blue) on black, so a channel's
 * value is that box's coverage. After the augmentation the pixels with at
 * least TRACE of a box's channel must span the transformed box, every edge
 * within a tolerance: one output pixel for the resample's reach (PIL's
 * triangle filter spans one output pixel either side when shrinking) plus half
 * a pixel for the coverage threshold, plus half a source pixel in output pixels
 * when enlarging (the filter then reaches a source pixel's centre), plus one
 * for a JPEG decoded at a reduced DCT scale (its own averaging, one scaled
 * pixel, which is at most one output pixel). A dropped box leaves no trace
 * but within that tolerance of the output's border (Resize + CenterCrop
 * resamples from the whole image, so a box just outside the crop bleeds in). */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jpeglib.h>

#include "harness.h"
#include "common/error.h"
#include "dataset/image/image.h"
#include "dataset/image/boxes.h"
#include "dataset/image/geom.h"
#include "ferry/rng.h"

#define REF FERRY_SOURCE_DIR "/tests/ref/boxes/"
#define MAXK 16
#define TRACE 48 /* of 255: about a fifth of a pixel covered */

/* ---- the NumPy reference ---- */

typedef struct ref_case {
    char kind[16];
    int o, flip, pad, sy, sx;
    size_t sw, sh, W, H, a, b, c, d, k, kept;
    double frac;
    float in[MAXK][4];
    size_t idx[MAXK];
    float out[MAXK][4];
} ref_case;

static bool read_case(FILE *f, ref_case *rc)
{
    if (fscanf(f, " case %15s %d %zu %zu %zu %zu %zu %zu %zu %zu %d %d %d %d %lf %zu", rc->kind,
               &rc->o, &rc->sw, &rc->sh, &rc->W, &rc->H, &rc->a, &rc->b, &rc->c, &rc->d, &rc->pad,
               &rc->sy, &rc->sx, &rc->flip, &rc->frac, &rc->k) != 16)
        return false;
    ASSERT(rc->k <= MAXK);
    for (size_t i = 0; i < rc->k; i++)
        ASSERT(fscanf(f, "%f %f %f %f", &rc->in[i][0], &rc->in[i][1], &rc->in[i][2],
                      &rc->in[i][3]) == 4);
    ASSERT(fscanf(f, " kept %zu", &rc->kept) == 1 && rc->kept <= rc->k);
    for (size_t i = 0; i < rc->kept; i++)
        ASSERT(fscanf(f, "%zu %f %f %f %f", &rc->idx[i], &rc->out[i][0], &rc->out[i][1],
                      &rc->out[i][2], &rc->out[i][3]) == 5);
    return true;
}

/* The case's geometry, through the recorders the transforms call. */
static void case_geom(const ref_case *rc, ferry_image_geom *g)
{
    ferry__geom_start(g, rc->sw, rc->sh, rc->o);
    ferry_image_config cfg = ferry_image_config_default();
    ferry_sample_format fmt = {.channels = 3, .height = rc->H, .width = rc->W};
    if (!strcmp(rc->kind, "rrc")) {
        ferry__geom_box(g, (double)rc->a, (double)rc->b, (double)(rc->a + rc->c),
                        (double)(rc->b + rc->d), rc->W, rc->H);
    } else if (!strcmp(rc->kind, "center")) {
        cfg.resize_shorter = rc->a;
        ferry_crop_box box;
        ferry__crop_center(&cfg, g->w, g->h, rc->W, rc->H, &box);
        ferry__geom_box(g, box.x0, box.y0, box.x1, box.y1, rc->W, rc->H);
    } else {
        cfg.resize = !strcmp(rc->kind, "place") ? FERRY_RESIZE_CENTER_CROP : FERRY_RESIZE_BILINEAR;
        ferry__image_place_geom(&cfg, g->w, g->h, &fmt, g);
    }
    if (rc->pad)
        ferry__geom_shift(g, rc->sy, rc->sx);
    if (rc->flip)
        ferry__geom_flip(g);
}

TEST(boxes_match_the_numpy_reference)
{
    FILE *f = fopen(REF "cases.txt", "r");
    ASSERT(f);
    ref_case rc;
    size_t cases = 0, kept = 0, dropped = 0;
    while (read_case(f, &rc)) {
        ferry_image_geom g;
        case_geom(&rc, &g);
        float boxes[MAXK][4];
        int64_t labels[MAXK];
        float scores[MAXK];
        uint8_t odd[MAXK][3];
        for (size_t i = 0; i < rc.k; i++) {
            memcpy(boxes[i], rc.in[i], sizeof boxes[i]);
            labels[i] = 1000 + (int64_t)i;
            scores[i] = 0.5f + (float)i;
            odd[i][0] = (uint8_t)i;
            odd[i][1] = (uint8_t)(i * 7);
            odd[i][2] = (uint8_t)(255 - i);
        }
        ferry_box_follower fol[3] = {
            {labels, sizeof labels[0]}, {scores, sizeof scores[0]}, {odd, sizeof odd[0]}};
        size_t n = ferry__boxes_apply(&g, &boxes[0][0], rc.k, rc.frac, fol, 3);
        ASSERT_MSG(n == rc.kept, "case %zu (%s, o %d): kept %zu boxes, the reference %zu", cases,
                   rc.kind, rc.o, n, rc.kept);
        for (size_t i = 0; i < n; i++) {
            size_t j = rc.idx[i];
            ASSERT_EQ_INT(labels[i], 1000 + (int64_t)j);
            ASSERT(scores[i] == 0.5f + (float)j);
            ASSERT(odd[i][0] == (uint8_t)j && odd[i][1] == (uint8_t)(j * 7) &&
                   odd[i][2] == (uint8_t)(255 - j));
            for (int c = 0; c < 4; c++)
                ASSERT_MSG(fabsf(boxes[i][c] - rc.out[i][c]) <= 1e-3f * (1 + fabsf(rc.out[i][c])),
                           "case %zu (%s, o %d) box %zu coordinate %d: %.6f, the reference %.6f",
                           cases, rc.kind, rc.o, j, c, boxes[i][c], rc.out[i][c]);
        }
        cases++;
        kept += n;
        dropped += rc.k - n;
    }
    fclose(f);
    ASSERT_EQ_SIZE(cases, (size_t)600);
    /* The fixture exercises both outcomes. */
    ASSERT(kept > 300 && dropped > 300);
}

TEST(area_fraction_threshold_and_followers)
{
    /* A 100 x 100 image cropped to its left half at the same scale. */
    ferry_image_geom g;
    ferry__geom_start(&g, 100, 100, 1);
    ferry__geom_box(&g, 0, 0, 50, 100, 50, 100);
    float b[4][4] = {
        {40, 0, 60, 10},  /* half inside */
        {45, 0, 65, 10},  /* a quarter inside */
        {60, 0, 70, 10},  /* outside */
        {10, 10, 20, 20}, /* inside */
    };
    int32_t lab[4] = {0, 1, 2, 3};
    ferry_box_follower f = {lab, sizeof lab[0]};
    float c[4][4];
    memcpy(c, b, sizeof b);
    ASSERT_EQ_SIZE(ferry__boxes_apply(&g, &c[0][0], 4, 0, &f, 1), (size_t)3);
    ASSERT(lab[0] == 0 && lab[1] == 1 && lab[2] == 3);
    ASSERT(c[0][2] == 50 && c[1][0] == 45 && c[1][2] == 50 && c[2][0] == 10);
    memcpy(c, b, sizeof b);
    int32_t lab2[4] = {0, 1, 2, 3};
    f.data = lab2;
    ASSERT_EQ_SIZE(ferry__boxes_apply(&g, &c[0][0], 4, 0.5, &f, 1), (size_t)2);
    ASSERT(lab2[0] == 0 && lab2[1] == 3);
    memcpy(c, b, sizeof b);
    ASSERT_EQ_SIZE(ferry__boxes_apply(&g, &c[0][0], 4, 1.0, NULL, 0), (size_t)1);
    ASSERT(c[0][0] == 10);
}

/* ---- painted rectangles through the sample path ---- */

typedef struct mem_src {
    const uint8_t *p;
    size_t n;
} mem_src;

static ferry_status read_mem(const void *src, size_t index, ferry_scratch *s, size_t *n)
{
    const mem_src *m = src;
    (void)index;
    ferry_status st = ferry__scratch_grow(&s->file, &s->file_cap, m->n);
    if (st != FERRY_OK)
        return st;
    memcpy(s->file, m->p, m->n);
    *n = m->n;
    return FERRY_OK;
}

/* Three boxes in three strips of a w x h black RGB image, box i painted in
 * channel i; integer corners, so the painted pixels are exactly the box. */
static void paint(ferry_rng *r, size_t w, size_t h, uint8_t *px, float boxes[3][4])
{
    memset(px, 0, w * h * 3);
    size_t strip = w / 3;
    for (int i = 0; i < 3; i++) {
        size_t x0 = (size_t)i * strip + 1 + ferry_rng_below(r, strip / 3);
        size_t x1 = x0 + 2 + ferry_rng_below(r, strip - 3 - (x0 - (size_t)i * strip));
        size_t y0 = ferry_rng_below(r, h / 2), y1 = y0 + 2 + ferry_rng_below(r, h - y0 - 2);
        for (size_t y = y0; y < y1; y++)
            for (size_t x = x0; x < x1; x++)
                px[(y * w + x) * 3 + (size_t)i] = 255;
        boxes[i][0] = (float)x0;
        boxes[i][1] = (float)y0;
        boxes[i][2] = (float)x1;
        boxes[i][3] = (float)y1;
    }
}

static uint8_t *encode_png(const uint8_t *px, size_t w, size_t h, size_t *n)
{
    const char *path = ft_tmp("painted.png");
    ASSERT_OK(ferry_png_save(path, px, w, h, 3));
    return ft_read_file(path, n);
}

/* Quality 100, no chroma subsampling (colours stay in their channel but for
 * a level or two), with an EXIF orientation o when o != 1. */
static uint8_t *encode_jpeg(const uint8_t *px, size_t w, size_t h, int o, size_t *n)
{
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr err;
    c.err = jpeg_std_error(&err);
    jpeg_create_compress(&c);
    unsigned char *out = NULL;
    unsigned long size = 0;
    jpeg_mem_dest(&c, &out, &size);
    c.image_width = (JDIMENSION)w;
    c.image_height = (JDIMENSION)h;
    c.input_components = 3;
    c.in_color_space = JCS_RGB;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, 100, TRUE);
    for (int i = 0; i < 3; i++)
        c.comp_info[i].h_samp_factor = c.comp_info[i].v_samp_factor = 1;
    jpeg_start_compress(&c, TRUE);
    if (o != 1) {
        /* "Exif\0\0", a little-endian TIFF header, one IFD entry: 0x0112
         * (Orientation), SHORT, count 1, the value. */
        uint8_t app1[6 + 8 + 2 + 12 + 4] = {'E', 'x', 'i', 'f', 0, 0, 'I', 'I', 42, 0, 8, 0, 0, 0,
                                            1, 0, 0x12, 0x01, 3, 0, 1, 0, 0, 0, (uint8_t)o, 0};
        jpeg_write_marker(&c, JPEG_APP0 + 1, app1, sizeof app1);
    }
    for (size_t y = 0; y < h; y++) {
        JSAMPROW row = (JSAMPROW)(px + y * w * 3);
        jpeg_write_scanlines(&c, &row, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    *n = size;
    return out;
}

typedef struct span {
    double lo[2], hi[2];
    bool any;
} span;

/* The pixels of channel ch (HWC) at TRACE or more, as pixel edges. */
static span trace(const uint8_t *img, size_t W, size_t H, int ch)
{
    span s = {{1e9, 1e9}, {-1e9, -1e9}, false};
    for (size_t y = 0; y < H; y++)
        for (size_t x = 0; x < W; x++)
            if (img[(y * W + x) * 3 + (size_t)ch] >= TRACE) {
                s.any = true;
                s.lo[0] = fmin(s.lo[0], (double)x);
                s.hi[0] = fmax(s.hi[0], (double)x + 1);
                s.lo[1] = fmin(s.lo[1], (double)y);
                s.hi[1] = fmax(s.hi[1], (double)y + 1);
            }
    return s;
}

/* One sample of a painted image through the sample path; checks every box. */
static void check_painted(const ferry_image_config *cfg_in, const uint8_t *file, size_t n,
                          float boxes[3][4], uint64_t seed, double extra_tol, size_t *kept_total,
                          size_t *dropped_total)
{
    ferry_image_config cfg;
    ASSERT_OK(ferry__image_config_check(cfg_in, &cfg));
    ferry_image_info info;
    ASSERT_OK(ferry_image_probe(file, n, &info));
    ferry_sample_format fmt;
    ASSERT_OK(ferry_image_format(&cfg, &info, &fmt));
    static ferry_dataset ds;
    memset(&ds, 0, sizeof ds);
    ds.format = fmt;
    size_t W = fmt.width, H = fmt.height;
    uint8_t *img = malloc(W * H * 3);
    ASSERT(img);
    mem_src m = {file, n};
    ferry_sample_ctx ctx = {.seed = seed, .epoch = 0, .train = true};
    ferry_image_geom g;
    ASSERT_OK(ferry__image_sample_geom(&ds, &cfg, 7, read_mem, &m, "painted", img, &ctx, &g));
    /* The pixels alone (no geometry asked for) are the same: recording the
     * geometry draws nothing from the stream. */
    uint8_t *again = malloc(W * H * 3);
    ASSERT(again);
    ASSERT_OK(ferry__image_sample(&ds, &cfg, 7, read_mem, &m, "painted", again, &ctx));
    ASSERT_MEM_EQ(img, again, W * H * 3);
    free(again);

    float b[3][4];
    int32_t which[3] = {0, 1, 2};
    memcpy(b, boxes, sizeof b);
    ferry_box_follower f = {which, sizeof which[0]};
    size_t k = ferry__boxes_apply(&g, &b[0][0], 3, 0, &f, 1);
    /* Half a source pixel in output pixels when enlarging. */
    double ex = g.ax > 1 ? 0.5 * g.ax : 0, ey = g.ay > 1 ? 0.5 * g.ay : 0;
    double tol[2] = {1.5 + ex + extra_tol, 1.5 + ey + extra_tol};
    bool kept[3] = {false, false, false};
    for (size_t i = 0; i < k; i++) {
        int ch = which[i];
        kept[ch] = true;
        span s = trace(img, W, H, ch);
        double lo[2] = {b[i][0], b[i][1]}, hi[2] = {b[i][2], b[i][3]};
        if (!s.any) {
            /* Too thin to reach TRACE anywhere: a sliver. */
            ASSERT_MSG(hi[0] - lo[0] < 2 * tol[0] || hi[1] - lo[1] < 2 * tol[1],
                       "seed %llu box %d [%g %g %g %g] has no pixels", (unsigned long long)seed,
                       ch, lo[0], lo[1], hi[0], hi[1]);
            continue;
        }
        for (int a = 0; a < 2; a++)
            ASSERT_MSG(fabs(s.lo[a] - lo[a]) <= tol[a] && fabs(s.hi[a] - hi[a]) <= tol[a],
                       "seed %llu box %d axis %d: box [%g, %g), painted pixels [%g, %g), "
                       "tolerance %g (flip %d, orientation %d)", (unsigned long long)seed, ch, a,
                       lo[a], hi[a], s.lo[a], s.hi[a], tol[a], (int)g.hflip, g.orientation);
    }
    for (int ch = 0; ch < 3; ch++) {
        if (kept[ch])
            continue;
        span s = trace(img, W, H, ch);
        ASSERT_MSG(!s.any || s.hi[0] <= tol[0] || s.lo[0] >= (double)W - tol[0] ||
                       s.hi[1] <= tol[1] || s.lo[1] >= (double)H - tol[1],
                   "seed %llu: box %d was dropped but its pixels show at [%g %g %g %g]",
                   (unsigned long long)seed, ch, s.lo[0], s.lo[1], s.hi[0], s.hi[1]);
    }
    *kept_total += k;
    *dropped_total += 3 - k;
    free(img);
}

typedef enum { PNG, JPEG } file_kind;

/* seeds samples of random painted images (sizes from lo to hi) under cfg. */
static void painted_run(ferry_image_config cfg, file_kind kind, int orientation, size_t lo,
                        size_t hi, int seeds, double extra_tol)
{
    size_t kept = 0, dropped = 0;
    for (int s = 0; s < seeds; s++) {
        ferry_rng r;
        ferry_rng_init(&r, 99, 1, (uint64_t)s);
        size_t w = lo + ferry_rng_below(&r, hi - lo + 1), h = lo + ferry_rng_below(&r, hi - lo + 1);
        uint8_t *px = malloc(w * h * 3);
        ASSERT(px);
        float boxes[3][4];
        paint(&r, w, h, px, boxes);
        size_t n;
        uint8_t *file = kind == PNG ? encode_png(px, w, h, &n) : encode_jpeg(px, w, h, orientation, &n);
        check_painted(&cfg, file, n, boxes, (uint64_t)s, extra_tol, &kept, &dropped);
        free(file);
        free(px);
    }
    /* Both outcomes happen (not every box survives, most do). */
    ASSERT_MSG(kept > dropped && (cfg.crop != FERRY_CROP_RANDOM_RESIZED || dropped > 0),
               "kept %zu, dropped %zu", kept, dropped);
}

static ferry_image_config base(size_t w, size_t h)
{
    ferry_image_config c = ferry_image_config_default();
    c.width = w;
    c.height = h;
    c.channels = 3;
    c.layout = FERRY_LAYOUT_HWC;
    return c;
}

TEST(painted_random_resized_crop_and_flip_png)
{
    ferry_image_config c = base(40, 32);
    c.crop = FERRY_CROP_RANDOM_RESIZED;
    c.random_hflip = true;
    painted_run(c, PNG, 1, 48, 120, 150, 0);
}

TEST(painted_random_resized_crop_jpeg_dct_scaled)
{
    /* Big images and a small output: the crop decodes at 1/8 to 6/8 scale. */
    ferry_image_config c = base(32, 32);
    c.crop = FERRY_CROP_RANDOM_RESIZED;
    c.random_hflip = true;
    painted_run(c, JPEG, 1, 200, 400, 60, 1.0);
}

TEST(painted_exif_orientations_with_crop_and_flip)
{
    for (int o = 2; o <= 8; o++) {
        ferry_image_config c = base(36, 28);
        c.exif_orientation = true;
        c.crop = FERRY_CROP_RANDOM_RESIZED;
        c.random_hflip = true;
        painted_run(c, JPEG, o, 48, 100, 20, 1.0);
        /* And the whole-image path: turned, then resized. */
        c.crop = FERRY_CROP_NONE;
        c.random_crop_pad = 3;
        painted_run(c, JPEG, o, 48, 100, 10, 1.0);
    }
}

TEST(painted_padded_crop_and_flip_after_each_resize_mode)
{
    ferry_image_config c = base(48, 40);
    c.random_crop_pad = 6;
    c.random_hflip = true;
    painted_run(c, PNG, 1, 30, 90, 60, 0); /* bilinear, both ways */
    c.resize = FERRY_RESIZE_CENTER_CROP;
    painted_run(c, PNG, 1, 30, 90, 60, 0); /* cropped or bordered */
    ferry_image_config same = base(0, 0);
    same.random_crop_pad = 5;
    same.random_hflip = true;
    painted_run(same, PNG, 1, 30, 60, 40, 0);
}

TEST(painted_resize_then_center_crop)
{
    ferry_image_config c = base(40, 40);
    c.crop = FERRY_CROP_CENTER; /* train: still the centre box (no draws) */
    c.random_hflip = true;
    painted_run(c, PNG, 1, 40, 120, 60, 0);
    painted_run(c, JPEG, 1, 200, 300, 20, 1.0);
}

TEST(geometry_identity_without_transforms)
{
    ferry_image_geom g;
    ferry__geom_start(&g, 30, 20, 1);
    float b[4] = {-5, 3, 10.5f, 25};
    ASSERT_EQ_SIZE(ferry__boxes_apply(&g, b, 1, 0, NULL, 0), (size_t)1);
    ASSERT(b[0] == 0 && b[1] == 3 && b[2] == 10.5f && b[3] == 20);
    /* Not finite, inverted or empty: dropped. */
    float bad[3][4] = {{NAN, 0, 1, 1}, {5, 5, 4, 6}, {1, 1, 1, 9}};
    ASSERT_EQ_SIZE(ferry__boxes_apply(&g, &bad[0][0], 3, 0, NULL, 0), (size_t)0);
}


/* ---- the public entry for datasets of one's own ---- */

TEST(public_decode_boxes_matches_the_sample_path)
{
    ferry_image_config c = base(40, 36);
    c.crop = FERRY_CROP_RANDOM_RESIZED;
    c.random_hflip = true;
    c.box_min_area_frac = 0.3;
    ferry_image_config checked;
    ASSERT_OK(ferry__image_config_check(&c, &checked));
    ferry_scratch *s;
    ASSERT_OK(ferry_scratch_create(&s));
    size_t kept = 0, dropped = 0;
    for (int seed = 0; seed < 40; seed++) {
        ferry_rng r;
        ferry_rng_init(&r, 5, 2, (uint64_t)seed);
        size_t w = 60 + ferry_rng_below(&r, 60), h = 60 + ferry_rng_below(&r, 60);
        uint8_t *px = malloc(w * h * 3);
        ASSERT(px);
        float painted[3][4];
        paint(&r, w, h, px, painted);
        size_t n;
        uint8_t *file = seed % 2 ? encode_jpeg(px, w, h, 1, &n) : encode_png(px, w, h, &n);
        ferry_sample_ctx ctx = {.seed = 11, .epoch = (uint64_t)seed % 3, .train = true,
                                .scratch = s};
        size_t index = (size_t)seed * 13;

        /* What the sample path gives, and the boxes through its geometry. */
        uint8_t want[40 * 36 * 3], got[40 * 36 * 3];
        static ferry_dataset ds;
        memset(&ds, 0, sizeof ds);
        ds.format = (ferry_sample_format){.channels = 3, .height = 36, .width = 40,
                                          .layout = FERRY_LAYOUT_HWC};
        mem_src m = {file, n};
        ferry_image_geom g;
        ASSERT_OK(ferry__image_sample_geom(&ds, &checked, index, read_mem, &m, "p", want, &ctx, &g));
        float wb[3][4];
        memcpy(wb, painted, sizeof wb);
        int64_t wl[3] = {10, 11, 12};
        ferry_box_follower wf = {wl, sizeof wl[0]};
        size_t wk = ferry__boxes_apply(&g, &wb[0][0], 3, 0.3, &wf, 1);

        float gb[3][4];
        memcpy(gb, painted, sizeof gb);
        int64_t gl[3] = {10, 11, 12};
        double score[3] = {0.1, 0.2, 0.3};
        void *const follow[2] = {gl, score};
        const size_t rows[2] = {sizeof gl[0], sizeof score[0]};
        ferry_boxes b = {.xyxy = &gb[0][0], .count = 3, .follow = follow,
                         .follow_row_bytes = rows, .num_follow = 2};
        ASSERT_OK(ferry_image_decode_boxes(file, n, &c, s, &ctx, index, "p", got, sizeof got, &b));
        ASSERT_MEM_EQ(got, want, sizeof got);
        ASSERT_EQ_SIZE(b.count, wk);
        ASSERT_MEM_EQ(gb, wb, wk * sizeof gb[0]);
        for (size_t i = 0; i < wk; i++) {
            ASSERT_EQ_INT(gl[i], wl[i]);
            static const double score0[3] = {0.1, 0.2, 0.3};
            ASSERT(score[i] == score0[wl[i] - 10]);
        }
        kept += wk;
        dropped += 3 - wk;
        free(file);
        free(px);
    }
    ferry_scratch_destroy(s);
    ASSERT(kept > 0 && dropped > 0);
}

TEST(public_decode_boxes_without_augmentation_and_errors)
{
    /* Evaluation (ctx NULL): Resize + CenterCrop, the boxes scaled and cut. */
    uint8_t px[100 * 50 * 3] = {0};
    const char *path = ft_tmp("evalbox.png");
    ASSERT_OK(ferry_png_save(path, px, 100, 50, 3));
    size_t n;
    uint8_t *file = ft_read_file(path, &n);
    ferry_image_config c = base(40, 40);
    c.crop = FERRY_CROP_CENTER;
    c.resize_shorter = 40; /* 100 x 50 -> 80 x 40, then x from 20 to 60 */
    uint8_t out[40 * 40 * 3];
    float xyxy[2][4] = {{50, 10, 60, 20}, {0, 0, 10, 50}};
    ferry_boxes b = {.xyxy = &xyxy[0][0], .count = 2};
    ASSERT_OK(ferry_image_decode_boxes(file, n, &c, NULL, NULL, 0, NULL, out, sizeof out, &b));
    ASSERT_EQ_SIZE(b.count, (size_t)1);
    ASSERT(xyxy[0][0] == 20 && xyxy[0][1] == 8 && xyxy[0][2] == 28 && xyxy[0][3] == 16);

    c.box_min_area_frac = 1.5;
    ASSERT_STATUS(ferry_image_decode_boxes(file, n, &c, NULL, NULL, 0, NULL, out, sizeof out, &b),
                  FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "box_min_area_frac");
    c.box_min_area_frac = 0;
    ferry_boxes nul = {.xyxy = NULL, .count = 3};
    ASSERT_STATUS(ferry_image_decode_boxes(file, n, &c, NULL, NULL, 0, NULL, out, sizeof out, &nul),
                  FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "xyxy NULL");
    size_t zero = 0;
    void *const follow[1] = {xyxy};
    ferry_boxes z = {.xyxy = &xyxy[0][0], .count = 1, .follow = follow, .follow_row_bytes = &zero,
                     .num_follow = 1};
    ASSERT_STATUS(ferry_image_decode_boxes(file, n, &c, NULL, NULL, 0, NULL, out, sizeof out, &z),
                  FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "rows of 0 bytes");
    ASSERT_STATUS(ferry_image_decode_boxes(file, n, &c, NULL, NULL, 0, NULL, out, 10, NULL),
                  FERRY_ERR_INVALID_ARG);
    free(file);
}

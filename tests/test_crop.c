/* The ImageNet recipe's crop: RandomResizedCrop boxes distributed as
 * torchvision's (two-sample Kolmogorov-Smirnov on binned area fraction and
 * log aspect ratio, against tests/ref/crop/rrc.txt); full-scale crops within one
 * level of PIL's crop + BILINEAR resize and of torchvision's Resize +
 * CenterCrop (tests/ref/crop/resize.bin), for JPEG and PNG; the reduced DCT
 * scale's PSNR against full scale; one digest for any worker count; a warm
 * scratch crops without allocating; config errors that name the field. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"
#include "common/error.h"
#include "dataset/image/image.h"
#include "ferry/rng.h"

#define REF FERRY_SOURCE_DIR "/tests/ref/crop/"
#define BINS 50
#define NDRAW 10000

static ferry_image_config recipe(size_t w, size_t h)
{
    ferry_image_config c = ferry_image_config_default();
    c.crop = FERRY_CROP_RANDOM_RESIZED;
    c.width = w;
    c.height = h;
    c.channels = 3;
    c.layout = FERRY_LAYOUT_HWC;
    ferry_image_config out;
    ASSERT_OK(ferry__image_config_check(&c, &out));
    return out;
}

static void read_counts(FILE *f, const char *tag, unsigned *v)
{
    char word[32];
    ASSERT(fscanf(f, "%31s", word) == 1);
    ASSERT_STR_EQ(word, tag);
    for (int i = 0; i < BINS; i++)
        ASSERT(fscanf(f, "%u", &v[i]) == 1);
}

/* The largest gap between the two binned empirical CDFs. */
static double ks(const unsigned *a, const unsigned *b)
{
    double ca = 0, cb = 0, d = 0;
    for (int i = 0; i < BINS; i++) {
        ca += a[i] / (double)NDRAW;
        cb += b[i] / (double)NDRAW;
        if (fabs(ca - cb) > d)
            d = fabs(ca - cb);
    }
    return d;
}

TEST(random_boxes_are_distributed_as_torchvisions)
{
    FILE *f = fopen(REF "rrc.txt", "r");
    ASSERT(f);
    char line[512];
    ASSERT(fgets(line, sizeof line, f) && fgets(line, sizeof line, f)); /* comments */
    ferry_image_config cfg = recipe(224, 224);
    /* KS critical value for two samples of 10,000 at alpha = 0.01. */
    double crit = 1.628 * sqrt(2.0 / NDRAW);
    char word[32];
    int sizes = 0;
    while (fscanf(f, "%31s", word) == 1) {
        ASSERT_STR_EQ(word, "size");
        unsigned w, h, fb;
        ASSERT(fscanf(f, "%u %u %u", &w, &h, &fb) == 3);
        unsigned ref_area[BINS], ref_ratio[BINS], area[BINS] = {0}, ratio[BINS] = {0};
        read_counts(f, "area", ref_area);
        read_counts(f, "logratio", ref_ratio);
        double lo = log(3.0 / 4.0), hi = log(4.0 / 3.0);
        for (size_t i = 0; i < NDRAW; i++) {
            ferry_rng r;
            ferry_rng_init(&r, 0, FERRY_RNG_AUGMENT | 0, i);
            ferry_crop_box b;
            ferry__crop_random(&cfg, w, h, &r, &b);
            ASSERT(b.x0 >= 0 && b.y0 >= 0 && b.x1 <= w && b.y1 <= h && b.x1 > b.x0 && b.y1 > b.y0);
            double cw = b.x1 - b.x0, ch = b.y1 - b.y0;
            int ai = (int)(cw * ch / ((double)w * h) * BINS);
            area[ai > BINS - 1 ? BINS - 1 : ai]++;
            int ri = (int)((log(cw / ch) - lo) / (hi - lo) * BINS);
            ratio[ri < 0 ? 0 : ri > BINS - 1 ? BINS - 1 : ri]++;
        }
        double da = ks(area, ref_area), dr = ks(ratio, ref_ratio);
        printf("  %ux%u: KS area %.4f, log ratio %.4f (critical %.4f)\n", w, h, da, dr, crit);
        ASSERT_MSG(da < crit && dr < crit, "%ux%u: KS %.4f / %.4f over %.4f", w, h, da, dr, crit);
        sizes++;
    }
    fclose(f);
    ASSERT(sizes >= 4);
}

TEST(the_fallback_is_torchvisions_centre_crop)
{
    ferry_image_config cfg = recipe(224, 224);
    /* 1000 x 10: no try fits; the ratio clamps to 4/3: 13 x 10 in the centre. */
    ferry_rng r;
    ferry_rng_init(&r, 5, FERRY_RNG_AUGMENT, 3);
    ferry_crop_box b;
    ferry__crop_random(&cfg, 1000, 10, &r, &b);
    ASSERT_NEAR(b.x0, (1000 - 13) / 2, 0);
    ASSERT_NEAR(b.x1 - b.x0, 13, 0);
    ASSERT_NEAR(b.y0, 0, 0);
    ASSERT_NEAR(b.y1, 10, 0);
    /* 10 x 1000: width 10, height round(10 / (3/4)) = 13. */
    ferry__crop_random(&cfg, 10, 1000, &r, &b);
    ASSERT_NEAR(b.x1 - b.x0, 10, 0);
    ASSERT_NEAR(b.y1 - b.y0, 13, 0);
    ASSERT_NEAR(b.y0, (1000 - 13) / 2, 0);
    /* The same stream gives the same box. */
    ferry_crop_box b1, b2;
    ferry_rng_init(&r, 9, FERRY_RNG_AUGMENT | 2, 77);
    ferry__crop_random(&cfg, 500, 375, &r, &b1);
    ferry_rng_init(&r, 9, FERRY_RNG_AUGMENT | 2, 77);
    ferry__crop_random(&cfg, 500, 375, &r, &b2);
    ASSERT(memcmp(&b1, &b2, sizeof b1) == 0);
}

typedef struct ref_case {
    char kind[8];
    unsigned a, b, c, d, W, H;
    size_t off;
} ref_case;

static size_t read_cases(ref_case *v, size_t max)
{
    FILE *f = fopen(REF "resize.txt", "r");
    ASSERT(f);
    size_t n = 0;
    while (n < max && fscanf(f, "%7s %u %u %u %u %u %u %zu", v[n].kind, &v[n].a, &v[n].b, &v[n].c,
                             &v[n].d, &v[n].W, &v[n].H, &v[n].off) == 8)
        n++;
    fclose(f);
    return n;
}

/* Decodes case k of data (PNG or JPEG) through the crop path at full scale. */
static void decode_case(const ref_case *k, const uint8_t *data, size_t n, uint8_t *out,
                        ferry_scratch *s, bool full)
{
    ferry_image_config cfg = recipe(k->W, k->H);
    cfg.crop_full_scale = full;
    ferry_sample_format fmt = {.channels = 3, .height = k->H, .width = k->W,
                               .layout = FERRY_LAYOUT_HWC, .dtype = FERRY_DTYPE_U8};
    if (!strcmp(k->kind, "box")) {
        ferry_crop_box b = {.x0 = k->a, .y0 = k->b, .x1 = k->a + k->c, .y1 = k->b + k->d,
                            .cx0 = k->a, .cy0 = k->b, .cx1 = k->a + k->c, .cy1 = k->b + k->d};
        ASSERT_OK(ferry__image_decode_box(data, n, &cfg, &fmt, s, "src", out, &b, NULL));
    } else {
        /* The evaluation crop through the public decoder. */
        cfg.crop = FERRY_CROP_CENTER;
        cfg.resize_shorter = k->a;
        ASSERT_OK(ferry_image_decode(data, n, &cfg, s, "src", out, k->W * k->H * 3));
    }
}

static void check_parity(const char *what, const uint8_t *data, size_t n)
{
    ref_case cases[16];
    size_t nc = read_cases(cases, 16);
    ASSERT(nc >= 5);
    size_t rn;
    uint8_t *ref = ft_read_file(REF "resize.bin", &rn);
    ferry_scratch *s;
    ASSERT_OK(ferry_scratch_create(&s));
    static uint8_t out[64 * 64 * 3];
    for (size_t i = 0; i < nc; i++) {
        const ref_case *k = &cases[i];
        size_t px = (size_t)k->W * k->H * 3;
        ASSERT(k->off + px <= rn);
        decode_case(k, data, n, out, s, true);
        size_t within = 0, maxd = 0;
        for (size_t j = 0; j < px; j++) {
            size_t d = (size_t)abs((int)out[j] - (int)ref[k->off + j]);
            within += d <= 1;
            maxd = d > maxd ? d : maxd;
        }
        printf("  %s %s %u %u %u %u -> %ux%u: %.2f%% within 1 level, max %zu\n", what, k->kind,
               k->a, k->b, k->c, k->d, k->W, k->H, 100.0 * (double)within / (double)px, maxd);
        ASSERT_MSG(within * 100 >= px * 99, "%s case %zu: only %zu of %zu within 1", what, i, within, px);
    }
    ferry_scratch_destroy(s);
    free(ref);
}

TEST(full_scale_jpeg_crops_match_pils_resize)
{
    size_t n;
    uint8_t *data = ft_read_file(REF "src.jpg", &n);
    check_parity("jpeg", data, n);
    free(data);
}

TEST(png_crops_match_pils_resize)
{
    /* The PNG of the pixels ferry (and PIL) decode from src.jpg. */
    size_t n;
    uint8_t *data = ft_read_file(REF "src.jpg", &n);
    static uint8_t px[160 * 120 * 3];
    ferry_image_config c = ferry_image_config_default();
    c.channels = 3;
    c.layout = FERRY_LAYOUT_HWC;
    ASSERT_OK(ferry_jpeg_decode(data, n, &c, NULL, "src.jpg", px, sizeof px));
    free(data);
    ASSERT_OK(ferry_png_save(ft_tmp("src.png"), px, 160, 120, 3));
    data = ft_read_file(ft_tmp("src.png"), &n);
    check_parity("png", data, n);
    free(data);
}

static double psnr(const uint8_t *a, const uint8_t *b, size_t n)
{
    double se = 0;
    for (size_t i = 0; i < n; i++)
        se += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    return se == 0 ? 99 : 10 * log10(255.0 * 255.0 * (double)n / se);
}

/* The figure docs/DESIGN.md states: reduced-scale crops against full-scale
 * ones, over random boxes of the fixture (output 24 x 24: scales 1/2 and 1/4
 * come up). */
TEST(reduced_scale_stays_close_to_full_scale)
{
    size_t n;
    uint8_t *data = ft_read_file(REF "src.jpg", &n);
    ferry_image_config cfg = recipe(24, 24);
    ferry_sample_format fmt = {.channels = 3, .height = 24, .width = 24,
                               .layout = FERRY_LAYOUT_HWC, .dtype = FERRY_DTYPE_U8};
    ferry_scratch *s;
    ASSERT_OK(ferry_scratch_create(&s));
    uint8_t a[24 * 24 * 3], b[24 * 24 * 3];
    double sum = 0, worst = 99;
    size_t reduced = 0, N = 300;
    for (size_t i = 0; i < N; i++) {
        ferry_rng r;
        ferry_rng_init(&r, 1, FERRY_RNG_AUGMENT, i);
        ferry_crop_box box;
        ferry__crop_random(&cfg, 160, 120, &r, &box);
        cfg.crop_full_scale = true;
        ASSERT_OK(ferry__image_decode_box(data, n, &cfg, &fmt, s, "src", a, &box, NULL));
        cfg.crop_full_scale = false;
        ASSERT_OK(ferry__image_decode_box(data, n, &cfg, &fmt, s, "src", b, &box, NULL));
        if (box.x1 - box.x0 < 32 || box.y1 - box.y0 < 32)
            continue; /* under 24 * 8/6: full scale both ways */
        double p = psnr(a, b, sizeof a);
        sum += p;
        worst = p < worst ? p : worst;
        reduced++;
    }
    printf("  reduced-scale crops: %zu, mean PSNR %.1f dB, worst %.1f dB\n", reduced,
           sum / (double)reduced, worst);
    ASSERT(reduced > 50);
    ASSERT_MSG(sum / (double)reduced >= 30 && worst >= 25, "PSNR mean %.1f worst %.1f",
               sum / (double)reduced, worst);
    ferry_scratch_destroy(s);
    free(data);
}

TEST(a_warm_scratch_crops_without_allocating)
{
    size_t n;
    uint8_t *data = ft_read_file(REF "src.jpg", &n);
    ferry_image_config cfg = recipe(32, 32);
    ferry_sample_format fmt = {.channels = 3, .height = 32, .width = 32,
                               .layout = FERRY_LAYOUT_CHW, .dtype = FERRY_DTYPE_U8};
    ferry_scratch *s;
    ASSERT_OK(ferry_scratch_create(&s));
    uint8_t out[32 * 32 * 3];
    for (size_t i = 0; i < 400; i++) {
        ferry_rng r;
        ferry_rng_init(&r, 3, FERRY_RNG_AUGMENT, i);
        int64_t before = ferry_debug_alloc_count();
        ASSERT_OK(ferry__image_decode_crop(data, n, &cfg, &fmt, s, "src", out, &r, NULL));
        if (i >= 1)
            ASSERT_MSG(ferry_debug_alloc_count() == before, "sample %zu allocated", i);
    }
    ferry_scratch_destroy(s);
    free(data);
}

/* check_allocs: none after warm-up (a folder of one kind: a mixed one may
 * allocate a worker's first decoder of the other kind, as without crops). */
static uint64_t epoch_digest(ferry_dataset *ds, size_t workers, bool train, bool check_allocs)
{
    ferry_loader_config c = ferry_loader_config_default();
    c.dataset = ds;
    c.batch_size = 4;
    c.num_workers = workers ? workers : FERRY_LOADER_NO_WORKERS;
    c.shuffle = true;
    c.seed = 11;
    c.device = ferry_cpu();
    c.pin_memory = FERRY_PIN_MEMORY_OFF;
    c.out_dtype = FERRY_DTYPE_U8;
    c.eval = !train;
    ferry_loader *l;
    ASSERT_OK(ferry_loader_create(&c, &l));
    uint64_t h = FT_DIGEST_SEED;
    ferry_batch b;
    ferry_status st;
    for (int epoch = 0; epoch < 2; epoch++) {
        while ((st = ferry_loader_next(l, NULL, &b)) == FERRY_OK)
            h = ft_batch_digest(h, &b);
        ASSERT_STATUS(st, FERRY_END);
    }
    ferry_loader_stats s;
    ASSERT_OK(ferry_loader_stats_get(l, &s));
    if (check_allocs)
        ASSERT_EQ_INT(s.allocs_after_warmup, 0);
    ferry_loader_destroy(l);
    return h;
}

TEST(one_digest_for_any_worker_count)
{
    size_t n;
    uint8_t *jpg = ft_read_file(REF "src.jpg", &n);
    static uint8_t px[160 * 120 * 3];
    ferry_image_config c = ferry_image_config_default();
    c.channels = 3;
    c.layout = FERRY_LAYOUT_HWC;
    ASSERT_OK(ferry_jpeg_decode(jpg, n, &c, NULL, "src.jpg", px, sizeof px));
    for (int i = 0; i < 12; i++) {
        char p[64], q[64];
        snprintf(p, sizeof p, "rrc/%c/%02d.%s", 'a' + i % 2, i, i % 3 ? "jpg" : "png");
        snprintf(q, sizeof q, "rrcj/%c/%02d.jpg", 'a' + i % 2, i);
        ft_write_file(ft_tmp(q), jpg, n);
        if (i % 3) {
            ft_write_file(ft_tmp(p), jpg, n);
        } else {
            ft_write_file(ft_tmp(p), "", 0);
            ASSERT_OK(ferry_png_save(ft_tmp(p), px, 160, 120, 3));
        }
    }
    free(jpg);
    ferry_image_config cfg = ferry_image_config_default();
    cfg.crop = FERRY_CROP_RANDOM_RESIZED;
    cfg.width = cfg.height = 40;
    cfg.random_hflip = true;
    ferry_dataset *ds, *dj;
    ASSERT_OK(ferry_dataset_image_folder(ft_tmp("rrc"), &cfg, &ds));
    ASSERT_OK(ferry_dataset_image_folder(ft_tmp("rrcj"), &cfg, &dj));
    for (int train = 1; train >= 0; train--) {
        uint64_t d0 = epoch_digest(ds, 0, train, false), d1 = epoch_digest(ds, 1, train, false),
                 d3 = epoch_digest(ds, 3, train, false);
        ASSERT(d0 == d1 && d1 == d3);
        d0 = epoch_digest(dj, 0, train, true);
        d3 = epoch_digest(dj, 3, train, true);
        ASSERT(d0 == d3);
    }
    ferry_dataset_release(dj);
    /* Two samples of one image differ in training (different boxes). */
    static uint8_t x[40 * 40 * 3], y[40 * 40 * 3];
    ferry_sample_ctx ctx = {.seed = 1, .train = true};
    int64_t label;
    ASSERT_OK(ferry_dataset_get(ds, 1, x, sizeof x, &ctx, &label));
    ASSERT_OK(ferry_dataset_get(ds, 2, y, sizeof y, &ctx, &label));
    ASSERT(memcmp(x, y, sizeof x) != 0);
    ferry_dataset_release(ds);
}

TEST(bad_recipe_settings_name_the_field)
{
    ferry_image_config c = ferry_image_config_default(), out;
    c.crop = FERRY_CROP_RANDOM_RESIZED;
    ASSERT_STATUS(ferry__image_config_check(&c, &out), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "crop needs the output height and width");
    c.width = c.height = 224;
    c.crop_scale[0] = 0.5;
    c.crop_scale[1] = 0.2;
    ASSERT_STATUS(ferry__image_config_check(&c, &out), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "crop_scale");
    c.crop_scale[1] = 1;
    c.crop_ratio[0] = -1;
    ASSERT_STATUS(ferry__image_config_check(&c, &out), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "crop_ratio");
    c.crop_ratio[0] = c.crop_ratio[1] = 0;
    c.resize_shorter = 100;
    ASSERT_STATUS(ferry__image_config_check(&c, &out), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "resize_shorter 100");
    c.resize_shorter = 0;
    ASSERT_OK(ferry__image_config_check(&c, &out));
    ASSERT_EQ_SIZE(out.resize_shorter, 256);
    ASSERT_NEAR(out.crop_ratio[1], 4.0 / 3.0, 1e-12);
    c.crop = (ferry_crop)7;
    ASSERT_STATUS(ferry__image_config_check(&c, &out), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "crop mode 7");
}

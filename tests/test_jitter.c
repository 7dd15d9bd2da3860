/* ColorJitter: each adjustment and orders of them against torchvision's
 * functional adjust_* on PIL images (tests/ref/jitter, made by
 * tests/ref/make_jitter_ref.py), in both layouts; the loader-facing config:
 * zero is off, bad values are refused, the draws are seeded per sample. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "dataset/image/image.h"

#define REF FERRY_SOURCE_DIR "/tests/ref/jitter/"
enum { W = 32, H = 24 };

/* The fixture's source, as make_jitter_ref.py makes it (HWC). */
static void source(uint8_t *rgb, uint8_t *gray)
{
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            uint8_t *p = rgb + (y * W + x) * 3;
            p[0] = (uint8_t)((x * 37 + y * 11) % 256);
            p[1] = (uint8_t)((x * 5 + y * 23 + 40) % 256);
            p[2] = (uint8_t)((x * y * 3 + 90) % 256);
            gray[y * W + x] = ferry__luma(p[0], p[1], p[2]); /* PIL's convert('L') */
        }
}

TEST(matches_torchvision_functional)
{
    static uint8_t rgb[W * H * 3], gray[W * H], img[W * H * 3], chw[W * H * 3];
    source(rgb, gray);
    FILE *txt = fopen(REF "cases.txt", "r");
    size_t nbin = 0;
    uint8_t *bin = ft_read_file(REF "cases.bin", &nbin);
    ASSERT(txt && bin);
    size_t off = 0, cases = 0;
    int ch;
    char ord[8];
    double f[4];
    while (fscanf(txt, "%d %7s %lf %lf %lf %lf", &ch, ord, &f[0], &f[1], &f[2], &f[3]) == 6) {
        int order[4];
        for (int k = 0; k < 4; k++)
            order[k] = ord[k] == '9' ? -1 : ord[k] - '0';
        size_t n = (size_t)W * H * (size_t)ch;
        ASSERT(off + n <= nbin);
        const uint8_t *want = bin + off;
        /* HWC */
        memcpy(img, ch == 3 ? rgb : gray, n);
        ferry_sample_format fmt = {.channels = (size_t)ch, .height = H, .width = W,
                                   .layout = FERRY_LAYOUT_HWC, .dtype = FERRY_DTYPE_U8};
        ferry__jitter_apply(img, &fmt, order, f);
        size_t bad = 0;
        for (size_t i = 0; i < n; i++)
            bad += img[i] != want[i];
        ASSERT_MSG(bad == 0, "case %zu (%s): %zu of %zu bytes differ from torchvision", cases,
                   ord, bad, n);
        /* CHW: the same bytes, planar */
        for (size_t i = 0; i < (size_t)W * H; i++)
            for (int c = 0; c < ch; c++)
                chw[(size_t)c * W * H + i] = (ch == 3 ? rgb : gray)[i * (size_t)ch + (size_t)c];
        fmt.layout = FERRY_LAYOUT_CHW;
        ferry__jitter_apply(chw, &fmt, order, f);
        for (size_t i = 0; i < (size_t)W * H; i++)
            for (int c = 0; c < ch; c++)
                ASSERT_EQ_INT(chw[(size_t)c * W * H + i], want[i * (size_t)ch + (size_t)c]);
        off += n;
        cases++;
    }
    ASSERT_EQ_SIZE(cases, 12);
    ASSERT_EQ_SIZE(off, nbin);
    fclose(txt);
    free(bin);
}

/* A folder of four copies of the fixture's source as RGB PNGs. */
static ferry_dataset *folder(const ferry_image_config *cfg, const uint8_t *rgb)
{
    char path[256];
    for (int k = 0; k < 4; k++) {
        snprintf(path, sizeof path, "%s/jit/a/%d.png", ft_tmpdir(), k);
        ft_write_file(path, "", 0);
        ASSERT_OK(ferry_png_save(path, rgb, W, H, 3));
    }
    ferry_dataset *ds;
    ASSERT_OK(ferry_dataset_image_folder(ft_tmp("jit"), cfg, &ds));
    return ds;
}

TEST(config_zero_is_off_and_draws_are_seeded)
{
    static uint8_t rgb[W * H * 3], gray[W * H], plain[W * H * 3], a[W * H * 3], b[W * H * 3];
    source(rgb, gray);
    ferry_image_config cfg = ferry_image_config_default();
    cfg.layout = FERRY_LAYOUT_HWC;
    ferry_dataset *ds = folder(&cfg, rgb);
    ferry_sample_ctx ctx = {.seed = 5, .epoch = 0, .train = true};
    ASSERT_OK(ferry_dataset_get(ds, 1, plain, sizeof plain, &ctx, NULL));
    ASSERT_MEM_EQ(plain, rgb, sizeof rgb); /* all zero: untouched */
    ferry_dataset_release(ds);

    cfg.color_jitter[0] = 0.4;
    cfg.color_jitter[1] = 0.4;
    cfg.color_jitter[2] = 0.4;
    cfg.color_jitter[3] = 0.1;
    ds = folder(&cfg, rgb);
    int changed = 0;
    for (uint64_t e = 0; e < 8; e++) {
        ctx.epoch = e;
        ASSERT_OK(ferry_dataset_get(ds, 2, a, sizeof a, &ctx, NULL));
        ASSERT_OK(ferry_dataset_get(ds, 2, b, sizeof b, &ctx, NULL));
        ASSERT_MEM_EQ(a, b, sizeof a); /* same (seed, epoch, index): same bytes */
        changed += memcmp(a, rgb, sizeof a) != 0;
        /* The same order and factors, redrawn from the sample's stream
         * outside the dataset, give the same bytes. */
        ferry_rng r;
        ferry_rng_init(&r, ctx.seed, FERRY_RNG_AUGMENT | e, 2);
        memcpy(b, rgb, sizeof b);
        ferry_sample_format fmt = {.channels = 3, .height = H, .width = W,
                                   .layout = FERRY_LAYOUT_HWC, .dtype = FERRY_DTYPE_U8};
        ferry__jitter_rng(&cfg, &fmt, b, &r);
        ASSERT_MEM_EQ(a, b, sizeof a);
    }
    ASSERT_EQ_INT(changed, 8);
    ctx.train = false; /* evaluation: no jitter */
    ASSERT_OK(ferry_dataset_get(ds, 2, a, sizeof a, &ctx, NULL));
    ASSERT_MEM_EQ(a, rgb, sizeof rgb);
    ferry_dataset_release(ds);
}

TEST(bad_values_are_refused)
{
    static const double bad[][4] = {{-0.1, 0, 0, 0}, {0, 0, 0, 0.51}, {0, 0, 0, -0.2},
                                    {0, 1e7, 0, 0}};
    uint8_t px[4] = {0};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ferry_image_config cfg = ferry_image_config_default();
        memcpy(cfg.color_jitter, bad[i], sizeof cfg.color_jitter);
        ferry_sample_format f;
        ferry_image_info info = {.width = 2, .height = 2, .channels = 1};
        ASSERT_STATUS(ferry_image_format(&cfg, &info, &f), FERRY_ERR_INVALID_ARG);
        ASSERT_STR_CONTAINS(ferry_last_error(), "color_jitter");
    }
    ferry_image_config nan_cfg = ferry_image_config_default();
    nan_cfg.color_jitter[2] = 0.0 / 0.0;
    ferry_sample_format f;
    ferry_image_info info = {.width = 2, .height = 2, .channels = 1};
    ASSERT_STATUS(ferry_image_format(&nan_cfg, &info, &f), FERRY_ERR_INVALID_ARG);
    (void)px;
}

/* Resize, centre crop, gray<->RGB and the random augmentations on small images
 * whose answers are known. */
#include <stdlib.h>

#include "harness.h"

/* Writes a gray or RGB image and returns its PNG bytes. */
static uint8_t *png_of(const char *name, const uint8_t *px, size_t w, size_t h, size_t c, size_t *n)
{
    ASSERT_OK(ferry_png_save(ft_tmp(name), px, w, h, c));
    return ft_read_file(ft_tmp(name), n);
}

TEST(bilinear_upsample_matches_pil)
{
    /* PIL: Image.frombytes('L', (2, 1), bytes([0, 255])).resize((4, 1), BILINEAR)
     * gives 0, 64, 191, 255 (triangle filter, pixel centres at +0.5). */
    uint8_t px[2] = {0, 255}, out[4];
    size_t n;
    uint8_t *data = png_of("up.png", px, 2, 1, 1, &n);
    ferry_image_config cfg = ferry_image_config_default();
    cfg.width = 4;
    cfg.height = 1;
    ASSERT_OK(ferry_png_decode(data, n, &cfg, NULL, "up.png", out, sizeof out));
    ASSERT_EQ_INT(out[0], 0);
    ASSERT_EQ_INT(out[1], 64);
    ASSERT_EQ_INT(out[2], 191);
    ASSERT_EQ_INT(out[3], 255);
    free(data);
}

TEST(bilinear_downsample_averages)
{
    /* Shrinking 8x8 -> 2x2 widens the filter (area-aware): a checkerboard
     * averages to mid-gray instead of aliasing. A constant stays constant. */
    uint8_t px[64], out[4];
    for (int i = 0; i < 64; i++)
        px[i] = ((i / 8 + i % 8) & 1) ? 255 : 0;
    size_t n;
    uint8_t *data = png_of("down.png", px, 8, 8, 1, &n);
    ferry_image_config cfg = ferry_image_config_default();
    cfg.width = cfg.height = 2;
    ASSERT_OK(ferry_png_decode(data, n, &cfg, NULL, "down.png", out, sizeof out));
    for (int i = 0; i < 4; i++)
        ASSERT_NEAR(out[i], 127.5, 8);
    free(data);
    memset(px, 77, sizeof px);
    data = png_of("flat.png", px, 8, 8, 1, &n);
    cfg.width = 5;
    cfg.height = 3;
    uint8_t o2[15];
    ASSERT_OK(ferry_png_decode(data, n, &cfg, NULL, "flat.png", o2, sizeof o2));
    for (int i = 0; i < 15; i++)
        ASSERT_EQ_INT(o2[i], 77);
    free(data);
}

TEST(center_crop_and_pad)
{
    uint8_t px[25], out[9];
    for (int i = 0; i < 25; i++)
        px[i] = (uint8_t)(i + 1);
    size_t n;
    uint8_t *data = png_of("c5.png", px, 5, 5, 1, &n);
    ferry_image_config cfg = ferry_image_config_default();
    cfg.resize = FERRY_RESIZE_CENTER_CROP;
    cfg.width = cfg.height = 3;
    ASSERT_OK(ferry_png_decode(data, n, &cfg, NULL, "c5.png", out, sizeof out));
    static const uint8_t want[9] = {7, 8, 9, 12, 13, 14, 17, 18, 19};
    ASSERT_MEM_EQ(out, want, 9);
    free(data);
    /* 2x2 into 4x4: centred, zeros around. */
    uint8_t small[4] = {1, 2, 3, 4}, big[16];
    data = png_of("c2.png", small, 2, 2, 1, &n);
    cfg.width = cfg.height = 4;
    ASSERT_OK(ferry_png_decode(data, n, &cfg, NULL, "c2.png", big, sizeof big));
    static const uint8_t want2[16] = {0, 0, 0, 0, 0, 1, 2, 0, 0, 3, 4, 0, 0, 0, 0, 0};
    ASSERT_MEM_EQ(big, want2, 16);
    /* The size error mode names both sizes. */
    cfg.resize = FERRY_RESIZE_ERROR;
    ASSERT_STATUS(ferry_png_decode(data, n, &cfg, NULL, "c2.png", big, sizeof big), FERRY_ERR_FORMAT);
    ASSERT_STR_CONTAINS(ferry_last_error(), "c2.png: image is 2x2, samples are 4x4");
    free(data);
}

TEST(gray_to_rgb_replicates)
{
    uint8_t px[6] = {0, 50, 100, 150, 200, 250}, out[18];
    size_t n;
    uint8_t *data = png_of("g.png", px, 3, 2, 1, &n);
    ferry_image_config cfg = ferry_image_config_default();
    cfg.channels = 3;
    cfg.layout = FERRY_LAYOUT_HWC;
    ASSERT_OK(ferry_png_decode(data, n, &cfg, NULL, "g.png", out, sizeof out));
    for (int i = 0; i < 6; i++)
        for (int c = 0; c < 3; c++)
            ASSERT_EQ_INT(out[i * 3 + c], px[i]);
    free(data);
}

/* A memory-free way to get augmented samples: an image folder of one class. */
static ferry_dataset *folder(const ferry_image_config *cfg, uint8_t *px, size_t w, size_t h)
{
    for (size_t i = 0; i < w * h; i++)
        px[i] = (uint8_t)(i % 251 + 1); /* never 0: padding is visible */
    char path[256];
    for (int k = 0; k < 4; k++) {
        snprintf(path, sizeof path, "%s/aug/a/%d.png", ft_tmpdir(), k);
        ft_write_file(path, "", 0);
        ASSERT_OK(ferry_png_save(path, px, w, h, 1));
    }
    ferry_dataset *ds;
    ASSERT_OK(ferry_dataset_image_folder(ft_tmp("aug"), cfg, &ds));
    return ds;
}

TEST(random_crop_is_a_shift_with_zero_fill)
{
    enum { W = 12, H = 10, P = 3 };
    static uint8_t px[W * H], out[W * H];
    ferry_image_config cfg = ferry_image_config_default();
    cfg.random_crop_pad = P;
    ferry_dataset *ds = folder(&cfg, px, W, H);
    int shifted = 0;
    for (uint64_t epoch = 0; epoch < 20; epoch++) {
        ferry_sample_ctx ctx = {.seed = 7, .epoch = epoch, .train = true};
        ASSERT_OK(ferry_dataset_get(ds, 1, out, sizeof out, &ctx, NULL));
        int found = 0;
        for (int sy = -P; sy <= P && !found; sy++)
            for (int sx = -P; sx <= P && !found; sx++) {
                int ok = 1;
                for (int y = 0; y < H && ok; y++)
                    for (int x = 0; x < W && ok; x++) {
                        int ys = y + sy, xs = x + sx;
                        uint8_t want = (ys < 0 || xs < 0 || ys >= H || xs >= W) ? 0 : px[ys * W + xs];
                        ok = out[y * W + x] == want;
                    }
                if (ok) {
                    found = 1;
                    shifted += sy != 0 || sx != 0;
                }
            }
        ASSERT_MSG(found, "epoch %llu: output is not a shift of the input", (unsigned long long)epoch);
    }
    ASSERT(shifted > 10);
    /* Evaluation and NULL ctx: no randomness. */
    ferry_sample_ctx eval = {.seed = 7, .epoch = 3, .train = false};
    ASSERT_OK(ferry_dataset_get(ds, 1, out, sizeof out, &eval, NULL));
    ASSERT_MEM_EQ(out, px, sizeof px);
    ASSERT_OK(ferry_dataset_get(ds, 1, out, sizeof out, NULL, NULL));
    ASSERT_MEM_EQ(out, px, sizeof px);
    ferry_dataset_release(ds);
}

TEST(hflip_and_determinism)
{
    enum { W = 7, H = 5 };
    static uint8_t px[W * H], a[W * H], b[W * H];
    ferry_image_config cfg = ferry_image_config_default();
    cfg.random_hflip = true;
    ferry_dataset *ds = folder(&cfg, px, W, H);
    int flips = 0;
    for (uint64_t e = 0; e < 64; e++) {
        ferry_sample_ctx ctx = {.seed = 99, .epoch = e, .train = true};
        ASSERT_OK(ferry_dataset_get(ds, 2, a, sizeof a, &ctx, NULL));
        ASSERT_OK(ferry_dataset_get(ds, 2, b, sizeof b, &ctx, NULL));
        ASSERT_MEM_EQ(a, b, sizeof a); /* same (seed, epoch, index): same bytes */
        if (memcmp(a, px, sizeof px) != 0) {
            flips++;
            for (int y = 0; y < H; y++)
                for (int x = 0; x < W; x++)
                    ASSERT_EQ_INT(a[y * W + x], px[y * W + (W - 1 - x)]);
        }
    }
    ASSERT(flips > 16 && flips < 48);
    ferry_dataset_release(ds);
}

/* IDX files: round trips plain and gzip, truncation and trailing bytes with both
 * sizes in the message, bad headers, and the real Fashion-MNIST when installed. */
#include <stdlib.h>
#include <zlib.h>

#include "harness.h"

static size_t idx_bytes(uint8_t *buf, int type, size_t nd, const uint32_t *dims, const uint8_t *data,
                        size_t n)
{
    buf[0] = 0; buf[1] = 0; buf[2] = (uint8_t)type; buf[3] = (uint8_t)nd;
    for (size_t i = 0; i < nd; i++) {
        buf[4 + 4 * i] = (uint8_t)(dims[i] >> 24);
        buf[5 + 4 * i] = (uint8_t)(dims[i] >> 16);
        buf[6 + 4 * i] = (uint8_t)(dims[i] >> 8);
        buf[7 + 4 * i] = (uint8_t)dims[i];
    }
    memcpy(buf + 4 + 4 * nd, data, n);
    return 4 + 4 * nd + n;
}

static void write_gz(const char *path, const uint8_t *p, size_t n)
{
    gzFile g = gzopen(path, "wb");
    ASSERT(g);
    ASSERT_EQ_INT(gzwrite(g, p, (unsigned)n), (int)n);
    ASSERT_EQ_INT(gzclose(g), Z_OK);
}

enum { N = 5, H = 4, W = 3 };
static uint8_t pixels[N * H * W], labels[N];
static uint8_t img_file[16 + N * H * W + 64], lab_file[8 + N + 64];
static size_t img_n, lab_n;

static void make_files(void)
{
    for (size_t i = 0; i < sizeof pixels; i++)
        pixels[i] = (uint8_t)(i * 37 + 5);
    for (size_t i = 0; i < N; i++)
        labels[i] = (uint8_t)(i % 3);
    uint32_t d3[3] = {N, H, W}, d1[1] = {N};
    img_n = idx_bytes(img_file, 0x08, 3, d3, pixels, sizeof pixels);
    lab_n = idx_bytes(lab_file, 0x08, 1, d1, labels, N);
}

static void check_round_trip(const char *ip, const char *lp)
{
    ferry_dataset *ds;
    ASSERT_OK(ferry_dataset_idx(ip, lp, NULL, &ds));
    ASSERT_EQ_SIZE(ferry_dataset_len(ds), N);
    const ferry_sample_format *f = ferry_dataset_format(ds);
    ASSERT_EQ_SIZE(f->channels, 1);
    ASSERT_EQ_SIZE(f->height, H);
    ASSERT_EQ_SIZE(f->width, W);
    ASSERT_EQ_SIZE(ferry_dataset_class_count(ds), 3);
    uint8_t out[H * W];
    for (size_t i = 0; i < N; i++) {
        int64_t label = -1;
        ASSERT_OK(ferry_dataset_get(ds, i, out, sizeof out, NULL, &label));
        ASSERT_MEM_EQ(out, pixels + i * H * W, sizeof out);
        ASSERT_EQ_INT(label, labels[i]);
    }
    ferry_dataset_release(ds);
}

TEST(idx_round_trip_plain_and_gz)
{
    make_files();
    ft_write_file(ft_tmp("i.idx"), img_file, img_n);
    ft_write_file(ft_tmp("l.idx"), lab_file, lab_n);
    check_round_trip(ft_tmp("i.idx"), ft_tmp("l.idx"));
    write_gz(ft_tmp("i.idx.gz"), img_file, img_n);
    write_gz(ft_tmp("l.idx.gz"), lab_file, lab_n);
    check_round_trip(ft_tmp("i.idx.gz"), ft_tmp("l.idx.gz"));
}

TEST(idx_truncated_and_trailing_say_which)
{
    make_files();
    ft_write_file(ft_tmp("l.idx"), lab_file, lab_n);
    ferry_dataset *ds = NULL;
    for (int gz = 0; gz < 2; gz++) {
        const char *p = ft_tmp(gz ? "t.idx.gz" : "t.idx");
        /* Truncated by one byte. */
        if (gz)
            write_gz(p, img_file, img_n - 1);
        else
            ft_write_file(p, img_file, img_n - 1);
        ASSERT_STATUS(ferry_dataset_idx(p, ft_tmp("l.idx"), NULL, &ds), FERRY_ERR_FORMAT);
        ASSERT_STR_CONTAINS(ferry_last_error(), "truncated");
        ASSERT_STR_CONTAINS(ferry_last_error(), "promises 60 data bytes, the file has 59");
        ASSERT_STR_CONTAINS(ferry_last_error(), p);
        /* Two bytes of trailing garbage. */
        img_file[img_n] = 1;
        img_file[img_n + 1] = 2;
        if (gz)
            write_gz(p, img_file, img_n + 2);
        else
            ft_write_file(p, img_file, img_n + 2);
        ASSERT_STATUS(ferry_dataset_idx(p, ft_tmp("l.idx"), NULL, &ds), FERRY_ERR_FORMAT);
        ASSERT_STR_CONTAINS(ferry_last_error(), "2 bytes of trailing garbage");
        ASSERT_STR_CONTAINS(ferry_last_error(), "76 expected in all, 78 found");
        /* Truncated inside the header. */
        if (gz)
            write_gz(p, img_file, 6);
        else
            ft_write_file(p, img_file, 6);
        ASSERT_STATUS(ferry_dataset_idx(p, ft_tmp("l.idx"), NULL, &ds), FERRY_ERR_FORMAT);
        ASSERT_STR_CONTAINS(ferry_last_error(), "truncated IDX header");
    }
    /* A gzip stream cut short. */
    write_gz(ft_tmp("full.gz"), img_file, img_n);
    size_t gn;
    uint8_t *g = ft_read_file(ft_tmp("full.gz"), &gn);
    ft_write_file(ft_tmp("cut.gz"), g, gn - 12);
    ASSERT_STATUS(ferry_dataset_idx(ft_tmp("cut.gz"), ft_tmp("l.idx"), NULL, &ds), FERRY_ERR_FORMAT);
    ASSERT_STR_CONTAINS(ferry_last_error(), "cut.gz");
    free(g);
    ASSERT(ds == NULL);
}

TEST(idx_bad_headers)
{
    make_files();
    ferry_dataset *ds = NULL;
    ft_write_file(ft_tmp("l.idx"), lab_file, lab_n);
    uint8_t bad[128];
    uint32_t d3[3] = {N, H, W}, d1[1] = {N + 1};
    /* f32 elements: unsupported, said clearly. */
    size_t n = idx_bytes(bad, 0x0D, 3, d3, pixels, sizeof pixels);
    ft_write_file(ft_tmp("f.idx"), bad, n);
    ASSERT_STATUS(ferry_dataset_idx(ft_tmp("f.idx"), ft_tmp("l.idx"), NULL, &ds), FERRY_ERR_UNSUPPORTED);
    ASSERT_STR_CONTAINS(ferry_last_error(), "0x0d (f32) is not supported; only u8");
    /* Bad magic. */
    memcpy(bad, "\x12\x34\x08\x03", 4);
    ft_write_file(ft_tmp("m.idx"), bad, n);
    ASSERT_STATUS(ferry_dataset_idx(ft_tmp("m.idx"), ft_tmp("l.idx"), NULL, &ds), FERRY_ERR_FORMAT);
    ASSERT_STR_CONTAINS(ferry_last_error(), "not an IDX file");
    /* Label count differs. */
    ft_write_file(ft_tmp("i.idx"), img_file, img_n);
    uint8_t l6[6] = {0, 1, 2, 0, 1, 2};
    n = idx_bytes(bad, 0x08, 1, d1, l6, 6);
    ft_write_file(ft_tmp("l6.idx"), bad, n);
    ASSERT_STATUS(ferry_dataset_idx(ft_tmp("i.idx"), ft_tmp("l6.idx"), NULL, &ds), FERRY_ERR_FORMAT);
    ASSERT_STR_CONTAINS(ferry_last_error(), "5 images but");
    /* Labels given as images. */
    ASSERT_STATUS(ferry_dataset_idx(ft_tmp("l.idx"), ft_tmp("l.idx"), NULL, &ds), FERRY_ERR_FORMAT);
    /* A missing file. */
    ASSERT_STATUS(ferry_dataset_idx(ft_tmp("nope.idx"), ft_tmp("l.idx"), NULL, &ds), FERRY_ERR_IO);
    ASSERT_STR_CONTAINS(ferry_last_error(), "nope.idx");
    /* A header promising 4 GB in a tiny file: truncated, without a huge allocation. */
    uint32_t big[3] = {60000, 1000, 1000};
    n = idx_bytes(bad, 0x08, 3, big, pixels, 10);
    ft_write_file(ft_tmp("big.idx"), bad, n);
    ASSERT_STATUS(ferry_dataset_idx(ft_tmp("big.idx"), ft_tmp("l.idx"), NULL, &ds), FERRY_ERR_FORMAT);
    ASSERT_STR_CONTAINS(ferry_last_error(), "truncated");
    ASSERT(ds == NULL);
}

/* Output i of a 2x bilinear upscale sits at source position (i + 0.5) / 2 - 0.5
 * (pixel centres, as PIL and torch's align_corners=False), clamped to the
 * image: a 3:1 blend of its two nearest sources, the edges copying the edge. */
static void up2_taps(size_t i, size_t n, size_t *k0, size_t *k1, double *w0)
{
    double pos = ((double)i + 0.5) / 2 - 0.5;
    pos = pos < 0 ? 0 : pos > (double)(n - 1) ? (double)(n - 1) : pos;
    *k0 = (size_t)pos;
    *k1 = *k0 + 1 < n ? *k0 + 1 : *k0;
    *w0 = 1.0 - (pos - (double)*k0);
}

/* got [2h, 2w] against src [h, w] upscaled. The blends are exact sixteenths,
 * rounded to nearest; an exact half may go either way (ferry rounds it to even,
 * PIL up), which leaves 72 of these 96 pixels with one right answer. */
static void check_upscale2(const uint8_t *src, size_t h, size_t w, const uint8_t *got)
{
    for (size_t y = 0; y < 2 * h; y++)
        for (size_t x = 0; x < 2 * w; x++) {
            size_t y0, y1, x0, x1;
            double wy, wx;
            up2_taps(y, h, &y0, &y1, &wy);
            up2_taps(x, w, &x0, &x1, &wx);
            double top = wx * src[y0 * w + x0] + (1 - wx) * src[y0 * w + x1];
            double bottom = wx * src[y1 * w + x0] + (1 - wx) * src[y1 * w + x1];
            double want = wy * top + (1 - wy) * bottom;
            ASSERT_MSG(fabs(got[y * 2 * w + x] - want) <= 0.5, "resized pixel (%zu, %zu): %u, want %g", y, x,
                       got[y * 2 * w + x], want);
        }
}

TEST(idx_resize_and_rgb_output)
{
    make_files();
    ft_write_file(ft_tmp("i.idx"), img_file, img_n);
    ft_write_file(ft_tmp("l.idx"), lab_file, lab_n);
    ferry_image_config cfg = ferry_image_config_default();
    cfg.channels = 3;
    cfg.layout = FERRY_LAYOUT_CHW;
    ferry_dataset *ds;
    ASSERT_OK(ferry_dataset_idx(ft_tmp("i.idx"), ft_tmp("l.idx"), &cfg, &ds));
    uint8_t out[3 * H * W];
    ASSERT_OK(ferry_dataset_get(ds, 2, out, sizeof out, NULL, NULL));
    for (int c = 0; c < 3; c++)
        ASSERT_MEM_EQ(out + c * H * W, pixels + 2 * H * W, H * W);
    ferry_dataset_release(ds);
    cfg.channels = 1;
    cfg.height = 8;
    cfg.width = 6;
    ASSERT_OK(ferry_dataset_idx(ft_tmp("i.idx"), ft_tmp("l.idx"), &cfg, &ds));
    ASSERT_EQ_SIZE(ferry_dataset_sample_bytes(ds), 48);
    uint8_t big[48];
    for (size_t i = 0; i < N; i += 3) {
        ASSERT_OK(ferry_dataset_get(ds, i, big, sizeof big, NULL, NULL));
        check_upscale2(pixels + i * H * W, H, W, big);
    }
    ferry_dataset_release(ds);
}

TEST(fashion_mnist_loads)
{
    const char *dir = "/usr/share/datasets/fashion-mnist";
    char ip[256], lp[256];
    snprintf(ip, sizeof ip, "%s/train-images-idx3-ubyte.gz", dir);
    snprintf(lp, sizeof lp, "%s/train-labels-idx1-ubyte.gz", dir);
    FILE *f = fopen(ip, "rb");
    if (!f)
        ft_skip_missing("data", "Fashion-MNIST not installed (Debian package dataset-fashion-mnist)");
    fclose(f);
    ferry_dataset *ds;
    ASSERT_OK(ferry_dataset_idx(ip, lp, NULL, &ds));
    ASSERT_EQ_SIZE(ferry_dataset_len(ds), 60000);
    ASSERT_EQ_SIZE(ferry_dataset_sample_bytes(ds), 28 * 28);
    ASSERT_EQ_SIZE(ferry_dataset_class_count(ds), 10);
    int64_t label;
    ASSERT_OK(ferry_dataset_label(ds, 0, &label));
    ASSERT_EQ_INT(label, 9); /* the first training image is an ankle boot */
    ferry_dataset_release(ds);
}

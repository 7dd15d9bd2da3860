/* PNG decoding: every PngSuite file against libpng's simplified API, the corrupt
 * ones rejected with a reason, and files written here (truncated, flipped bytes,
 * empty, not a PNG, a huge header) failing cleanly. */
#include <dirent.h>
#include <png.h>
#include <stdlib.h>
#include <zlib.h>

#include "harness.h"
#include "common/error.h" /* the allocation counters and fault injection */

/* A copy of a PNG without its colour-space chunks, so the simplified API does no
 * gamma conversion: ferry returns stored sample values, as PIL does. */
static uint8_t *strip_colorspace(const uint8_t *p, size_t n, size_t *out_n)
{
    uint8_t *q = malloc(n);
    ASSERT(q && n >= 8);
    memcpy(q, p, 8);
    size_t o = 8, w = 8;
    while (o + 12 <= n) {
        size_t len = (size_t)p[o] << 24 | (size_t)p[o + 1] << 16 | (size_t)p[o + 2] << 8 | p[o + 3];
        if (len > n - o - 12)
            break;
        const uint8_t *t = p + o + 4;
        int drop = !memcmp(t, "gAMA", 4) || !memcmp(t, "cHRM", 4) || !memcmp(t, "sRGB", 4) ||
                   !memcmp(t, "iCCP", 4);
        if (!drop) {
            memcpy(q + w, p + o, len + 12);
            w += len + 12;
        }
        o += len + 12;
    }
    *out_n = w;
    return q;
}

typedef struct mem_reader { const uint8_t *p; size_t n, pos; } mem_reader;
static void mem_read(png_structp png, png_bytep out, size_t n)
{
    mem_reader *r = png_get_io_ptr(png);
    if (r->n - r->pos < n)
        png_error(png, "truncated");
    memcpy(out, r->p + r->pos, n);
    r->pos += n;
}

/* Interlaced 16-bit files: libpng 1.6.39's simplified API returns wrong 8-bit
 * values for these (basi0g16 pixel 0 is stored as 0 and comes back as 60), so the
 * reference is the raw 16-bit samples from libpng's low-level API, reduced to 8
 * bits with rounding (v * 255 + 32895) >> 16, which is what the simplified API
 * does for the non-interlaced twins. */
static uint8_t *reference_rgba16(const uint8_t *data, size_t n, size_t *w, size_t *h)
{
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(png);
    ASSERT(png && info);
    mem_reader r = {data, n, 0};
    png_set_read_fn(png, &r, mem_read);
    png_read_png(png, info, PNG_TRANSFORM_EXPAND | PNG_TRANSFORM_GRAY_TO_RGB, NULL);
    *w = png_get_image_width(png, info);
    *h = png_get_image_height(png, info);
    size_t ch = png_get_channels(png, info);
    ASSERT(png_get_bit_depth(png, info) == 16 && (ch == 3 || ch == 4));
    png_bytepp rows = png_get_rows(png, info);
    uint8_t *buf = malloc(*w * *h * 4);
    for (size_t y = 0; y < *h; y++)
        for (size_t x = 0; x < *w; x++)
            for (size_t c = 0; c < 4; c++) {
                unsigned v = c < ch ? (unsigned)rows[y][(x * ch + c) * 2] << 8 | rows[y][(x * ch + c) * 2 + 1] : 65535;
                buf[(y * *w + x) * 4 + c] = (uint8_t)((v * 255u + 32895u) >> 16);
            }
    png_destroy_read_struct(&png, &info, NULL);
    return buf;
}

/* libpng's simplified API: RGBA, 8 bits. */
static uint8_t *reference_rgba(const uint8_t *data, size_t n, size_t *w, size_t *h)
{
    if (data[24] == 16 && data[28] == 1)
        return reference_rgba16(data, n, w, h);
    size_t sn;
    uint8_t *s = strip_colorspace(data, n, &sn);
    png_image img;
    memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
    ASSERT_MSG(png_image_begin_read_from_memory(&img, s, sn), "simplified API: %s", img.message);
    img.flags |= PNG_IMAGE_FLAG_16BIT_sRGB; /* 16-bit files hold sRGB values, not linear */
    img.format = PNG_FORMAT_RGBA;
    uint8_t *buf = malloc(PNG_IMAGE_SIZE(img));
    ASSERT(buf);
    ASSERT_MSG(png_image_finish_read(&img, NULL, buf, 0, NULL), "simplified API: %s", img.message);
    *w = img.width;
    *h = img.height;
    png_image_free(&img);
    free(s);
    return buf;
}

static uint8_t blend(unsigned c, unsigned a, unsigned bg) { return (uint8_t)((c * a + bg * (255 - a) + 127) / 255); }

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The first mismatch in a PngSuite file, reported after the whole suite ran. */
static char mismatches[8192];
#define EXPECT_PIXEL(cond, ...)                                                \
    do {                                                                       \
        if (!(cond)) {                                                         \
            size_t l_ = strlen(mismatches);                                    \
            snprintf(mismatches + l_, sizeof mismatches - l_, __VA_ARGS__);    \
            l_ = strlen(mismatches);                                           \
            snprintf(mismatches + l_, sizeof mismatches - l_, "\n");           \
            goto done;                                                         \
        }                                                                      \
    } while (0)

/* Compares one valid PngSuite file every way ferry can decode it. */
static void check_valid(const char *path)
{
    size_t n;
    uint8_t *data = ft_read_file(path, &n);
    size_t w, h;
    uint8_t *ref = reference_rgba(data, n, &w, &h);
    ferry_image_info info;
    ASSERT_OK(ferry_png_info(data, n, &info));
    ASSERT_EQ_SIZE(info.width, w);
    ASSERT_EQ_SIZE(info.height, h);
    int gray = info.channels <= 2;

    ferry_scratch *s;
    ASSERT_OK(ferry_scratch_create(&s));
    ferry_image_config cfg = ferry_image_config_default();
    uint8_t *out = malloc(w * h * 3), *chw = malloc(w * h * 3);

    /* RGB, alpha dropped, HWC. */
    cfg.channels = 3;
    cfg.layout = FERRY_LAYOUT_HWC;
    ASSERT_OK(ferry_png_decode(data, n, &cfg, s, path, out, w * h * 3));
    for (size_t i = 0; i < w * h; i++)
        for (int c = 0; c < 3; c++)
            EXPECT_PIXEL(out[i * 3 + c] == ref[i * 4 + c], "%s: pixel %zu channel %d: %u != %u",
                       path, i, c, out[i * 3 + c], ref[i * 4 + c]);
    /* The same in CHW. */
    cfg.layout = FERRY_LAYOUT_CHW;
    ASSERT_OK(ferry_png_decode(data, n, &cfg, s, path, chw, w * h * 3));
    for (size_t i = 0; i < w * h; i++)
        for (int c = 0; c < 3; c++)
            EXPECT_PIXEL(chw[c * w * h + i] == out[i * 3 + c], "%s: CHW differs at %zu", path, i);
    /* Gray: the stored value for gray files, PIL's luma for colour ones. */
    cfg.channels = 1;
    ASSERT_OK(ferry_png_decode(data, n, &cfg, s, path, out, w * h));
    for (size_t i = 0; i < w * h; i++) {
        const uint8_t *p = ref + i * 4;
        unsigned want = gray ? p[0] : (p[0] * 19595u + p[1] * 38470u + p[2] * 7471u + 0x8000u) >> 16;
        EXPECT_PIXEL(out[i] == want, "%s: gray pixel %zu: %u != %u", path, i, out[i], want);
    }
    /* Composited on a background. */
    cfg.channels = 3;
    cfg.layout = FERRY_LAYOUT_HWC;
    cfg.alpha_composite = true;
    cfg.background[0] = 10; cfg.background[1] = 200; cfg.background[2] = 77;
    ASSERT_OK(ferry_png_decode(data, n, &cfg, s, path, out, w * h * 3));
    for (size_t i = 0; i < w * h; i++)
        for (int c = 0; c < 3; c++) {
            unsigned want = blend(ref[i * 4 + c], ref[i * 4 + 3], cfg.background[c]);
            EXPECT_PIXEL(out[i * 3 + c] == want, "%s: composite pixel %zu channel %d: %u != %u",
                       path, i, c, out[i * 3 + c], want);
        }
    /* Native format: channels from the file. */
    ferry_sample_format fmt;
    ASSERT_OK(ferry_image_format(NULL, &info, &fmt));
    ASSERT_EQ_SIZE(fmt.channels, gray ? 1 : 3);
done:
    ferry_scratch_destroy(s);
    free(out);
    free(chw);
    free(ref);
    free(data);
}

TEST(pngsuite_matches_libpng_simplified_api)
{
    const char *dir = ft_pngsuite_dir();
    if (!dir)
        ft_skip_missing("data", "PngSuite not found (set FERRY_PNGSUITE)");
    DIR *d = opendir(dir);
    ASSERT(d);
    char *names[512];
    size_t nn = 0;
    struct dirent *e;
    while ((e = readdir(d)) && nn < 512) {
        size_t l = strlen(e->d_name);
        if (l > 4 && !strcmp(e->d_name + l - 4, ".png"))
            names[nn++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, nn, sizeof *names, cmp_names);
    size_t valid = 0, corrupt = 0;
    for (size_t i = 0; i < nn; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        if (names[i][0] == 'x') {
            size_t n;
            uint8_t *data = ft_read_file(path, &n);
            uint8_t buf[64 * 64 * 3];
            ferry_image_config cfg = ferry_image_config_default();
            cfg.channels = 3;
            cfg.width = cfg.height = 32; /* every x file claims 32x32 or fails earlier */
            ferry_status st = ferry_png_decode(data, n, &cfg, NULL, names[i], buf, sizeof buf);
            ASSERT_MSG(st == FERRY_ERR_FORMAT, "%s: got %s (%s)", names[i], ferry_status_str(st),
                       ferry_last_error());
            ASSERT_STR_CONTAINS(ferry_last_error(), names[i]);
            ASSERT_MSG(strlen(ferry_last_error()) > strlen(names[i]) + 4, "%s: no reason given",
                       names[i]);
            free(data);
            corrupt++;
        } else {
            check_valid(path);
            valid++;
        }
        free(names[i]);
    }
    ASSERT_MSG(!mismatches[0], "mismatches:\n%s", mismatches);
    ASSERT_EQ_SIZE(valid, 161);
    ASSERT_EQ_SIZE(corrupt, 14);
}

/* A 37x23 RGB fixture with some structure, as PNG bytes. */
static uint8_t *fixture(size_t *n, uint8_t *pixels)
{
    for (size_t y = 0; y < 23; y++)
        for (size_t x = 0; x < 37; x++) {
            uint8_t *p = pixels + (y * 37 + x) * 3;
            p[0] = (uint8_t)(x * 7);
            p[1] = (uint8_t)(y * 11);
            p[2] = (uint8_t)((x * y * 13) ^ 0x5a);
        }
    const char *path = ft_tmp("fixture.png");
    ASSERT_OK(ferry_png_save(path, pixels, 37, 23, 3));
    return ft_read_file(path, n);
}

TEST(write_then_decode_round_trip)
{
    uint8_t px[37 * 23 * 3], out[37 * 23 * 3];
    size_t n;
    uint8_t *data = fixture(&n, px);
    ferry_image_config cfg = ferry_image_config_default();
    cfg.layout = FERRY_LAYOUT_HWC;
    ASSERT_OK(ferry_png_decode(data, n, &cfg, NULL, "fixture.png", out, sizeof out));
    ASSERT_MEM_EQ(out, px, sizeof px);
    ferry_image_info info;
    ASSERT_OK(ferry_png_info(data, n, &info));
    ASSERT_EQ_SIZE(info.width, 37);
    ASSERT_EQ_SIZE(info.height, 23);
    ASSERT_EQ_SIZE(info.channels, 3);
    ASSERT_EQ_INT(info.bit_depth, 8);
    ASSERT(!info.interlaced && !info.has_alpha && !info.palette);
    /* Gray and gray+alpha write and read back too. */
    uint8_t ga[4 * 3 * 2], g[12];
    for (int i = 0; i < 12; i++) {
        ga[2 * i] = (uint8_t)(i * 20);
        ga[2 * i + 1] = 255;
    }
    ASSERT_OK(ferry_png_save(ft_tmp("ga.png"), ga, 4, 3, 2));
    size_t gn;
    uint8_t *gd = ft_read_file(ft_tmp("ga.png"), &gn);
    ASSERT_OK(ferry_png_decode(gd, gn, NULL, NULL, "ga.png", g, sizeof g));
    for (int i = 0; i < 12; i++)
        ASSERT_EQ_INT(g[i], i * 20);
    free(gd);
    free(data);
}

TEST(gray_conversion_follows_itu601)
{
    enum { W = 64, H = 16 };
    static uint8_t px[W * H * 3], out[W * H];
    uint32_t x = 12345;
    for (size_t i = 0; i < sizeof px; i++) {
        x = x * 1664525u + 1013904223u;
        px[i] = (uint8_t)(x >> 24);
    }
    px[0] = px[1] = px[2] = 255; /* white stays white */
    ASSERT_OK(ferry_png_save(ft_tmp("rgb.png"), px, W, H, 3));
    size_t n;
    uint8_t *data = ft_read_file(ft_tmp("rgb.png"), &n);
    ferry_image_config cfg = ferry_image_config_default();
    cfg.channels = 1;
    ASSERT_OK(ferry_png_decode(data, n, &cfg, NULL, "rgb.png", out, sizeof out));
    ASSERT_EQ_INT(out[0], 255);
    for (size_t i = 0; i < W * H; i++) {
        const uint8_t *p = px + i * 3;
        double l = p[0] * 299 / 1000.0 + p[1] * 587 / 1000.0 + p[2] * 114 / 1000.0;
        ASSERT_MSG(fabs(out[i] - l) <= 1.0, "pixel %zu: %u vs %.2f", i, out[i], l);
    }
    free(data);
}

TEST(truncated_at_every_offset_fails_cleanly)
{
    uint8_t px[37 * 23 * 3], out[37 * 23 * 3];
    size_t n;
    uint8_t *data = fixture(&n, px);
    ferry_scratch *s;
    ASSERT_OK(ferry_scratch_create(&s));
    ferry_image_config cfg = ferry_image_config_default();
    cfg.channels = 3;
    cfg.width = 37;
    cfg.height = 23;
    for (size_t k = 0; k < n; k++) {
        uint8_t *cut = malloc(k ? k : 1); /* exact size, so ASan sees any over-read */
        memcpy(cut, data, k);
        ferry_status st = ferry_png_decode(cut, k, &cfg, s, "cut.png", out, sizeof out);
        ASSERT_MSG(st == FERRY_ERR_FORMAT, "cut at %zu of %zu: %s (%s)", k, n,
                   ferry_status_str(st), ferry_last_error());
        ASSERT_STR_CONTAINS(ferry_last_error(), "cut.png: ");
        free(cut);
    }
    ferry_scratch_destroy(s);
    free(data);
}

TEST(flipped_bytes_fail_cleanly)
{
    uint8_t px[37 * 23 * 3], out[37 * 23 * 3];
    size_t n;
    uint8_t *data = fixture(&n, px);
    ferry_scratch *s;
    ASSERT_OK(ferry_scratch_create(&s));
    ferry_image_config cfg = ferry_image_config_default();
    cfg.channels = 3;
    cfg.width = 37;
    cfg.height = 23;
    size_t failed = 0;
    for (size_t k = 0; k < n; k++) {
        data[k] ^= 0x41;
        ferry_status st = ferry_png_decode(data, n, &cfg, s, "flip.png", out, sizeof out);
        data[k] ^= 0x41;
        /* Every byte is covered by the signature, a CRC or a length: all must fail,
         * except flips in IHDR's width/height that the CRC would catch too. */
        ASSERT_MSG(st == FERRY_ERR_FORMAT || st == FERRY_ERR_LIMIT, "flip at %zu: %s (%s)", k,
                   ferry_status_str(st), ferry_last_error());
        failed++;
    }
    ASSERT_EQ_SIZE(failed, n);
    /* A CRC error in IDAT says so in libpng's words. */
    size_t idat = 8;
    while (memcmp(data + idat + 4, "IDAT", 4))
        idat += 12 + ((size_t)data[idat] << 24 | (size_t)data[idat + 1] << 16 |
                      (size_t)data[idat + 2] << 8 | data[idat + 3]);
    /* A flip in the data trips zlib first; a flip in the CRC itself is the CRC error. */
    size_t idat_len = (size_t)data[idat] << 24 | (size_t)data[idat + 1] << 16 | (size_t)data[idat + 2] << 8 | data[idat + 3];
    data[idat + 8 + idat_len] ^= 1;
    ASSERT_STATUS(ferry_png_decode(data, n, &cfg, s, "bad.png", out, sizeof out), FERRY_ERR_FORMAT);
    ASSERT_STR_EQ(ferry_last_error(), "bad.png: IDAT: CRC error");
    ferry_scratch_destroy(s);
    free(data);
}

TEST(empty_and_not_png)
{
    uint8_t out[16];
    ASSERT_STATUS(ferry_png_decode("", 0, NULL, NULL, "empty.png", out, sizeof out), FERRY_ERR_FORMAT);
    ASSERT_STR_CONTAINS(ferry_last_error(), "empty.png: not a PNG file");
    const char *text = "hello, this is a text file named .png\n";
    ASSERT_STATUS(ferry_png_decode(text, strlen(text), NULL, NULL, "text.png", out, sizeof out),
                  FERRY_ERR_FORMAT);
    ASSERT_STR_CONTAINS(ferry_last_error(), "text.png: not a PNG file (bad signature)");
    ferry_image_info info;
    ASSERT_STATUS(ferry_png_info(text, 3, &info), FERRY_ERR_FORMAT);
}

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24); p[1] = (uint8_t)(v >> 16); p[2] = (uint8_t)(v >> 8); p[3] = (uint8_t)v;
}

TEST(huge_header_is_a_limit_before_allocating)
{
    uint8_t f[8 + 25 + 12 + 12];
    static const uint8_t sig[8] = {137, 80, 78, 71, 13, 10, 26, 10};
    memcpy(f, sig, 8);
    put32(f + 8, 13);
    memcpy(f + 12, "IHDR", 4);
    put32(f + 16, 100000);
    put32(f + 20, 100000);
    f[24] = 8; f[25] = 2; f[26] = 0; f[27] = 0; f[28] = 0;
    put32(f + 29, (uint32_t)crc32(0, f + 12, 17));
    put32(f + 33, 0);
    memcpy(f + 37, "IDAT", 4);
    put32(f + 41, (uint32_t)crc32(0, f + 37, 4));
    put32(f + 45, 0);
    memcpy(f + 49, "IEND", 4);
    put32(f + 53, (uint32_t)crc32(0, f + 49, 4));
    uint8_t out[16];
    int64_t before = ferry_debug_alloc_count();
    ASSERT_STATUS(ferry_png_decode(f, sizeof f, NULL, NULL, "huge.png", out, sizeof out),
                  FERRY_ERR_LIMIT);
    ASSERT_EQ_INT(ferry_debug_alloc_count(), before);
    ASSERT_STR_CONTAINS(ferry_last_error(), "huge.png: image is 100000x100000");
    /* With the size asked for explicitly, still a limit error. */
    ferry_image_config cfg = ferry_image_config_default();
    cfg.channels = 1;
    cfg.width = cfg.height = 4;
    ASSERT_STATUS(ferry_png_decode(f, sizeof f, &cfg, NULL, "huge.png", out, sizeof out),
                  FERRY_ERR_LIMIT);
    ASSERT_EQ_INT(ferry_debug_alloc_count(), before);
    /* Configured limits apply too. */
    uint8_t px[37 * 23 * 3];
    size_t n;
    uint8_t *data = fixture(&n, px);
    cfg = ferry_image_config_default();
    cfg.limits.max_width = 16;
    ASSERT_STATUS(ferry_png_decode(data, n, &cfg, NULL, "wide.png", px, sizeof px), FERRY_ERR_LIMIT);
    ASSERT_STR_CONTAINS(ferry_last_error(), "37x23");
    cfg = ferry_image_config_default();
    cfg.limits.max_pixels = 37 * 23 - 1;
    ASSERT_STATUS(ferry_png_decode(data, n, &cfg, NULL, "wide.png", px, sizeof px), FERRY_ERR_LIMIT);
    free(data);
}

TEST(dst_too_small_is_an_error)
{
    uint8_t px[37 * 23 * 3];
    size_t n;
    uint8_t *data = fixture(&n, px);
    ASSERT_STATUS(ferry_png_decode(data, n, NULL, NULL, "f.png", px, sizeof px - 1),
                  FERRY_ERR_INVALID_ARG);
    free(data);
}

TEST(warm_scratch_decodes_without_allocating)
{
    uint8_t px[37 * 23 * 3], out[64 * 64 * 3];
    size_t n;
    uint8_t *data = fixture(&n, px);
    ferry_scratch *s;
    ASSERT_OK(ferry_scratch_create(&s));
    ferry_image_config cfg = ferry_image_config_default();
    for (int resize = 0; resize < 2; resize++) {
        cfg.channels = 1;
        cfg.width = resize ? 50 : 37;
        cfg.height = resize ? 31 : 23;
        for (int i = 0; i < 3; i++)
            ASSERT_OK(ferry_png_decode(data, n, &cfg, s, "f.png", out, sizeof out));
        int64_t before = ferry_debug_alloc_count();
        for (int i = 0; i < 10; i++)
            ASSERT_OK(ferry_png_decode(data, n, &cfg, s, "f.png", out, sizeof out));
        ASSERT_EQ_INT(ferry_debug_alloc_count() - before, 0);
    }
    ferry_scratch_destroy(s);
    free(data);
}

TEST(allocation_failures_leak_nothing)
{
    uint8_t px[37 * 23 * 3], out[50 * 31 * 3];
    size_t n;
    uint8_t *data = fixture(&n, px);
    ferry_image_config cfg = ferry_image_config_default();
    cfg.width = 50;
    cfg.height = 31;
    int64_t live = ferry_debug_alloc_live();
    for (int k = 1; k < 40; k++) {
        ferry_debug_fail_alloc_after(k);
        ferry_status st = ferry_png_decode(data, n, &cfg, NULL, "f.png", out, sizeof out);
        ferry_debug_fail_alloc_after(0);
        ASSERT_MSG(st == FERRY_OK || st == FERRY_ERR_NO_MEMORY, "k=%d: %s (%s)", k,
                   ferry_status_str(st), ferry_last_error());
        ASSERT_EQ_INT(ferry_debug_alloc_live(), live);
    }
    free(data);
}

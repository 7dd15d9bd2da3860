/* JPEG decoding: PIL's pixels for the fixtures tests/ref/make_jpeg_ref.py wrote
 * with PIL (digests in tests/ref/jpeg/expected.txt), libjpeg's own default decode
 * (PIL's settings) for the kinds PIL cannot write (4:4:0, 4:1:1, restart markers,
 * arithmetic coding, YCCK), generated here with libjpeg's compressor; the crop
 * path's regions exactly libjpeg's pixels at every DCT scale and sampling;
 * every truncation and many corruptions failing cleanly; limits before
 * allocation; the warm scratch; allocation failures; PNG and JPEG mixed in one
 * data set. */
#include <stdio.h>
#include <stdlib.h>

#include <jpeglib.h>

#include "harness.h"
#include "common/error.h" /* the allocation counters and fault injection */
#include "dataset/image/jpeg.h" /* the crop path's plan and region decode */
#include "ferry/rng.h"

#define REF FERRY_SOURCE_DIR "/tests/ref/jpeg/"
#if defined(__has_include)
#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#define FT_MAKE_DEFINED(p, n) (void)VALGRIND_MAKE_MEM_DEFINED(p, n)
#endif
#endif
#ifndef FT_MAKE_DEFINED
#define FT_MAKE_DEFINED(p, n) (void)(p)
#endif

static uint64_t fnv(const uint8_t *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* ---- JPEGs made here with libjpeg's compressor ---- */
typedef struct enc_opts {
    size_t w, h;
    int comps;             /* 1, 3 (YCbCr) or 4 */
    bool ycck;             /* 4 components stored as YCCK (else CMYK) */
    int hs, vs;            /* luma sampling factors (chroma 1x1) */
    bool progressive, arith;
    unsigned restart_interval, restart_rows;
    const jpeg_scan_info *scans;
    int nscans;
} enc_opts;

static uint8_t *enc(const enc_opts *o, size_t *n)
{
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr err;
    c.err = jpeg_std_error(&err);
    jpeg_create_compress(&c);
    unsigned char *out = NULL;
    unsigned long size = 0;
    jpeg_mem_dest(&c, &out, &size);
    c.image_width = (JDIMENSION)o->w;
    c.image_height = (JDIMENSION)o->h;
    c.input_components = o->comps;
    c.in_color_space = o->comps == 1 ? JCS_GRAYSCALE : o->comps == 3 ? JCS_RGB : JCS_CMYK;
    jpeg_set_defaults(&c);
    if (o->comps == 4)
        jpeg_set_colorspace(&c, o->ycck ? JCS_YCCK : JCS_CMYK);
    jpeg_set_quality(&c, 85, TRUE);
    if (o->comps >= 3) {
        c.comp_info[0].h_samp_factor = o->hs ? o->hs : 1;
        c.comp_info[0].v_samp_factor = o->vs ? o->vs : 1;
        for (int k = 1; k < c.num_components; k++)
            c.comp_info[k].h_samp_factor = c.comp_info[k].v_samp_factor = 1;
    }
    if (o->progressive)
        jpeg_simple_progression(&c);
    if (o->scans) {
        c.scan_info = o->scans;
        c.num_scans = o->nscans;
    }
    c.arith_code = o->arith;
    c.restart_interval = o->restart_interval;
    c.restart_in_rows = (int)o->restart_rows;
    jpeg_start_compress(&c, TRUE);
    size_t stride = o->w * (size_t)o->comps;
    uint8_t *row = malloc(stride);
    ASSERT(row);
    for (size_t y = 0; y < o->h; y++) {
        for (size_t x = 0; x < o->w; x++)
            for (int k = 0; k < o->comps; k++)
                row[x * (size_t)o->comps + (size_t)k] =
                    (uint8_t)(k == 0 ? x * 255 / o->w : k == 1 ? y * 255 / o->h
                              : (size_t)(((x / 3 + y / 5) % 2 ? 220 : 40) + 7 * k));
        JSAMPROW r = row;
        jpeg_write_scanlines(&c, &r, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    free(row);
    *n = size;
    return out;
}

/* PIL's CMYK to RGB (libjpeg's CMYK taken as Adobe-inverted). */
static void pil_cmyk(uint8_t *p, size_t npx)
{
    for (size_t i = 0; i < npx; i++) {
        int nk = p[4 * i + 3];
        for (int k = 0; k < 3; k++) {
            int c = 255 - p[4 * i + k], t = c * nk + 128;
            int v = nk - (((t >> 8) + t) >> 8);
            p[3 * i + k] = (uint8_t)(v < 0 ? 0 : v);
        }
    }
}

/* A plain libjpeg decompressor on data, its header read. */
static void ref_open(struct jpeg_decompress_struct *d, struct jpeg_error_mgr *err,
                     const uint8_t *data, size_t n)
{
    d->err = jpeg_std_error(err);
    jpeg_create_decompress(d);
    jpeg_mem_src(d, data, (unsigned long)n);
    ASSERT(jpeg_read_header(d, TRUE) == JPEG_HEADER_OK);
}

/* libjpeg's own decode with its defaults (PIL's), at DCT scale num/8: RGB
 * (gray for 1 component). */
static uint8_t *ref_decode(const uint8_t *data, size_t n, unsigned num, size_t *w, size_t *h,
                           size_t *ch)
{
    struct jpeg_decompress_struct d;
    struct jpeg_error_mgr err;
    ref_open(&d, &err, data, n);
    d.out_color_space = d.num_components == 1 ? JCS_GRAYSCALE
                        : d.num_components == 4 ? JCS_CMYK : JCS_RGB;
    d.scale_num = num;
    d.scale_denom = 8;
    jpeg_start_decompress(&d);
    size_t oc = (size_t)d.output_components;
    *w = d.output_width;
    *h = d.output_height;
    uint8_t *px = malloc(*w * *h * oc);
    ASSERT(px);
    while (d.output_scanline < d.output_height) {
        JSAMPROW r = px + d.output_scanline * *w * oc;
        jpeg_read_scanlines(&d, &r, 1);
    }
    jpeg_finish_decompress(&d);
    jpeg_destroy_decompress(&d);
    /* libjpeg-turbo's SIMD upsamplers read the padding past each row of its
     * own (malloc'd, uninitialised) buffers and valgrind tracks their shuffles
     * coarsely, so it would call these pixels uninitialised. ferry's decoder
     * zeroes its arena for the same reason (scratch.c). */
    FT_MAKE_DEFINED(px, *w * *h * oc);
    if (oc == 4)
        pil_cmyk(px, *w * *h);
    *ch = oc == 4 ? 3 : oc;
    return px;
}

static uint8_t luma(const uint8_t *p)
{
    return (uint8_t)((p[0] * 19595u + p[1] * 38470u + p[2] * 7471u + 0x8000u) >> 16);
}

static ferry_image_config hwc(size_t channels)
{
    ferry_image_config c = ferry_image_config_default();
    c.channels = channels;
    c.layout = FERRY_LAYOUT_HWC;
    return c;
}

/* ---- PIL's pixels ---- */

TEST(pil_fixtures_decode_to_pils_pixels)
{
    FILE *f = fopen(REF "expected.txt", "r");
    ASSERT_MSG(f, "%sexpected.txt missing (tests/ref/make_jpeg_ref.py writes it)", REF);
    char line[256], name[64], mode[8];
    int orient, checked = 0;
    size_t w, h;
    unsigned long long want;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#')
            continue;
        ASSERT(sscanf(line, "%63s %7s %d %zu %zu %llx", name, mode, &orient, &w, &h, &want) == 6);
        char path[512];
        snprintf(path, sizeof path, REF "%s", name);
        size_t n;
        uint8_t *data = ft_read_file(path, &n);
        if (orient) { /* patch the Orientation value (SHORT, little-endian) */
            static const uint8_t tag[8] = {0x12, 0x01, 3, 0, 1, 0, 0, 0};
            size_t at = 0;
            while (at + 10 <= n && memcmp(data + at, tag, 8))
                at++;
            ASSERT(at + 10 <= n);
            data[at + 8] = (uint8_t)orient;
            data[at + 9] = 0;
        }
        ferry_image_config cfg = hwc(!strcmp(mode, "L") ? 1 : 3);
        cfg.exif_orientation = orient != 0;
        ferry_image_info info;
        ASSERT_OK(ferry_image_probe(data, n, &info));
        ASSERT(info.kind == FERRY_IMAGE_JPEG);
        ferry_sample_format fmt;
        ASSERT_OK(ferry_image_format(&cfg, &info, &fmt));
        ASSERT_MSG(fmt.width == w && fmt.height == h, "%s o=%d: %zux%zu, PIL %zux%zu", name,
                   orient, fmt.width, fmt.height, w, h);
        size_t bytes = ferry_sample_format_bytes(&fmt);
        uint8_t *px = malloc(bytes);
        ASSERT_OK(ferry_jpeg_decode(data, n, &cfg, NULL, name, px, bytes));
        ASSERT_MSG(fnv(px, bytes) == want, "%s %s orientation %d: pixels differ from PIL's", name,
                   mode, orient);
        /* ferry_image_decode tells it by its bytes too. */
        memset(px, 0, bytes);
        ASSERT_OK(ferry_image_decode(data, n, &cfg, NULL, name, px, bytes));
        ASSERT(fnv(px, bytes) == want);
        free(px);
        free(data);
        checked++;
    }
    fclose(f);
    ASSERT_MSG(checked >= 30, "only %d fixture lines", checked);
}

TEST(info_reads_the_frame_and_exif_orientation)
{
    size_t n;
    uint8_t *data = ft_read_file(REF "exif.jpg", &n);
    ferry_image_info info;
    ASSERT_OK(ferry_jpeg_info(data, n, &info));
    ASSERT_EQ_INT(info.width, 37);
    ASSERT_EQ_INT(info.height, 23);
    ASSERT_EQ_INT(info.channels, 3);
    ASSERT_EQ_INT(info.orientation, 6);
    ASSERT(!info.interlaced && info.kind == FERRY_IMAGE_JPEG);
    /* Ignored by default (as PIL's Image.open): the stored size. */
    ferry_sample_format fmt;
    ASSERT_OK(ferry_image_format(NULL, &info, &fmt));
    ASSERT(fmt.width == 37 && fmt.height == 23);
    ferry_image_config cfg = ferry_image_config_default();
    cfg.exif_orientation = true;
    ASSERT_OK(ferry_image_format(&cfg, &info, &fmt));
    ASSERT(fmt.width == 23 && fmt.height == 37);
    free(data);
    data = ft_read_file(REF "progressive.jpg", &n);
    ASSERT_OK(ferry_jpeg_info(data, n, &info));
    ASSERT(info.interlaced && info.orientation == 1);
    free(data);
    data = ft_read_file(REF "gray.jpg", &n);
    ASSERT_OK(ferry_image_probe(data, n, &info));
    ASSERT_EQ_INT(info.channels, 1);
    ASSERT_OK(ferry_image_format(NULL, &info, &fmt));
    ASSERT_EQ_INT(fmt.channels, 1);
    free(data);
    ASSERT_STATUS(ferry_jpeg_info(NULL, 0, &info), FERRY_ERR_FORMAT);
    ASSERT_STATUS(ferry_jpeg_info(NULL, 1, &info), FERRY_ERR_INVALID_ARG);
    static const uint8_t png_sig[8] = {137, 80, 78, 71, 13, 10, 26, 10};
    ASSERT_STATUS(ferry_jpeg_info(png_sig, 8, &info), FERRY_ERR_FORMAT);
    ASSERT_STR_CONTAINS(ferry_last_error(), "not a JPEG file");
}

/* ---- every kind libjpeg-turbo decodes, against its own default decode ---- */

static void check_against_libjpeg(const char *what, const uint8_t *data, size_t n)
{
    size_t w, h, ch;
    uint8_t *ref = ref_decode(data, n, 8, &w, &h, &ch);
    /* RGB HWC (direct for 3-component files), gray (luma of the RGB, as
     * PIL's convert("L")), and RGB CHW (row by row through the sink). */
    for (int pass = 0; pass < 3; pass++) {
        size_t C = pass == 1 ? 1 : 3;
        ferry_image_config cfg = hwc(C);
        if (pass == 2)
            cfg.layout = FERRY_LAYOUT_CHW;
        uint8_t *px = malloc(w * h * C);
        ASSERT_OK(ferry_jpeg_decode(data, n, &cfg, NULL, what, px, w * h * C));
        for (size_t i = 0; i < w * h; i++)
            for (size_t k = 0; k < C; k++) {
                uint8_t want = ch == 1 ? ref[i] : C == 1 ? luma(ref + 3 * i) : ref[3 * i + k];
                uint8_t got = pass == 2 ? px[k * w * h + i] : px[i * C + k];
                ASSERT_MSG(got == want, "%s pass %d: pixel %zu channel %zu is %u, libjpeg %u",
                           what, pass, i, k, got, want);
            }
        free(px);
    }
    free(ref);
}

TEST(every_sampling_and_coding_matches_libjpeg)
{
    static const struct { const char *name; enc_opts o; } cases[] = {
        {"444", {.comps = 3, .hs = 1, .vs = 1}},
        {"422", {.comps = 3, .hs = 2, .vs = 1}},
        {"440", {.comps = 3, .hs = 1, .vs = 2}},
        {"420", {.comps = 3, .hs = 2, .vs = 2}},
        {"411", {.comps = 3, .hs = 4, .vs = 1}},
        {"gray", {.comps = 1}},
        {"progressive420", {.comps = 3, .hs = 2, .vs = 2, .progressive = true}},
        {"progressive_gray", {.comps = 1, .progressive = true}},
        {"arith420", {.comps = 3, .hs = 2, .vs = 2, .arith = true}},
        {"arith_progressive", {.comps = 3, .hs = 2, .vs = 1, .progressive = true, .arith = true}},
        {"restart_every_mcu", {.comps = 3, .hs = 2, .vs = 2, .restart_interval = 1}},
        {"restart_every_row", {.comps = 3, .hs = 1, .vs = 1, .restart_rows = 1}},
        {"cmyk", {.comps = 4}},
        {"ycck", {.comps = 4, .ycck = true}},
    };
    static const size_t sizes[][2] = {{1, 1}, {37, 23}, {64, 48}, {17, 129}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
            enc_opts o = cases[i].o;
            o.w = sizes[s][0];
            o.h = sizes[s][1];
            size_t n;
            uint8_t *data = enc(&o, &n);
            char what[64];
            snprintf(what, sizeof what, "%s_%zux%zu.jpg", cases[i].name, o.w, o.h);
            check_against_libjpeg(what, data, n);
            free(data);
        }
}

/* The crop path's region (the rows and columns its resize reads) is exactly
 * libjpeg's whole-image decode at the scale the plan picks, for every
 * sampling. Luma sampled 4x2 and 2x4 included: libjpeg-turbo before
 * 3.0.0 upsamples their cropped rows only in part at reduced scales, so the
 * colour conversion read stale bytes of the scratch (which decodes the other
 * samplings in between, so that they are not zeros). */
TEST(crop_regions_match_libjpeg_at_every_scale_and_sampling)
{
    static const int samp[][2] = {{1, 1}, {2, 1}, {1, 2}, {2, 2}, {4, 1}, {1, 4}, {4, 2}, {2, 4}};
    static const size_t outs[] = {12, 24, 56, 120};
    ferry_scratch *s;
    ASSERT_OK(ferry_scratch_create(&s));
    for (size_t i = 0; i < sizeof samp / sizeof *samp; i++) {
        enc_opts o = {.w = 232, .h = 168, .comps = 3, .hs = samp[i][0], .vs = samp[i][1]};
        size_t n;
        uint8_t *data = enc(&o, &n);
        size_t reduced = 0, cropped = 0;
        for (size_t oi = 0; oi < sizeof outs / sizeof *outs; oi++) {
            ferry_image_config cfg = hwc(3);
            cfg.crop = FERRY_CROP_RANDOM_RESIZED;
            cfg.width = cfg.height = outs[oi];
            ASSERT_OK(ferry__image_config_check(&cfg, &cfg));
            ferry_sample_format fmt = {.channels = 3, .height = outs[oi], .width = outs[oi],
                                       .layout = FERRY_LAYOUT_HWC, .dtype = FERRY_DTYPE_U8};
            for (uint64_t t = 0; t < 6; t++) {
                ferry_rng r;
                ferry_rng_init(&r, 7, FERRY_RNG_AUGMENT, i * 100 + oi * 10 + t);
                ferry_crop_box box;
                ferry__crop_random(&cfg, o.w, o.h, &r, &box);
                const uint8_t *px;
                size_t rw, rh;
                ferry_crop_box rb;
                ASSERT_OK(ferry__jpeg_decode_region(data, n, &cfg, &fmt, s, "x.jpg", &box, &px, &rw,
                                                    &rh, &rb));
                /* The plan the region was decoded with, on a decompressor of our own. */
                struct jpeg_decompress_struct d;
                struct jpeg_error_mgr err;
                ref_open(&d, &err, data, n);
                ferry_jpeg_crop_plan p;
                ASSERT(ferry__jpeg_crop_plan(&d, false, &fmt, &box, &p));
                jpeg_destroy_decompress(&d);
                size_t W, H, ch;
                uint8_t *ref = ref_decode(data, n, p.num, &W, &H, &ch);
                size_t xoff = p.col0 - rb.cx0;
                ASSERT(rb.cx1 - rb.cx0 == p.col1 - p.col0 && rh == p.row1 - p.row0);
                ASSERT(xoff + rb.cx1 <= W && p.row1 <= H && rb.cx1 <= rw);
                for (size_t y = 0; y < rh; y++) {
                    const uint8_t *a = px + (y * rw + rb.cx0) * 3;
                    const uint8_t *b = ref + ((p.row0 + y) * W + p.col0) * 3;
                    if (memcmp(a, b, (rb.cx1 - rb.cx0) * 3)) {
                        size_t x = 0;
                        while (a[x] == b[x])
                            x++;
                        ASSERT_MSG(0, "%dx%d sampling, scale %u/8, output %zu, box %zu: row %zu, "
                                   "byte %zu is %d, libjpeg's %d", samp[i][0], samp[i][1], p.num,
                                   outs[oi], (size_t)t, y, x, a[x], b[x]);
                    }
                }
                reduced += p.num < 8;
                cropped += p.num < 8 && rw < W;
                free(ref);
            }
        }
        ASSERT_MSG(reduced > 0, "%dx%d: no box decoded at a reduced scale", samp[i][0], samp[i][1]);
        /* Columns cropped at reduced scales but where libjpeg cannot. */
        bool whole_rows = samp[i][0] * samp[i][1] == 8;
        ASSERT_MSG(whole_rows ? cropped == 0 : cropped > 0, "%dx%d: %zu of %zu reduced-scale "
                   "regions had their columns cropped", samp[i][0], samp[i][1], cropped, reduced);
        free(data);
    }
    ferry_scratch_destroy(s);
}

TEST(resize_crop_and_orientation_paths_agree)
{
    enc_opts o = {.w = 40, .h = 30, .comps = 3, .hs = 2, .vs = 2, .progressive = true};
    size_t n;
    uint8_t *data = enc(&o, &n);
    /* Centre crop to a smaller size: the middle of the full decode. */
    uint8_t full[40 * 30 * 3], crop[20 * 10 * 3];
    ferry_image_config cfg = hwc(3);
    ASSERT_OK(ferry_jpeg_decode(data, n, &cfg, NULL, "p.jpg", full, sizeof full));
    cfg.width = 20;
    cfg.height = 10;
    cfg.resize = FERRY_RESIZE_CENTER_CROP;
    ASSERT_OK(ferry_jpeg_decode(data, n, &cfg, NULL, "p.jpg", crop, sizeof crop));
    for (size_t y = 0; y < 10; y++)
        ASSERT_MEM_EQ(crop + y * 20 * 3, full + ((y + 10) * 40 + 10) * 3, 20 * 3);
    /* Resize through the whole-image path: same result as PNG's resize of the
     * same pixels, which ferry_png_decode gives from a PNG of the full decode. */
    const char *png = ft_tmp("full.png");
    ASSERT_OK(ferry_png_save(png, full, 40, 30, 3));
    size_t pn;
    uint8_t *pdata = ft_read_file(png, &pn);
    uint8_t a[13 * 11 * 3], b[13 * 11 * 3];
    cfg.width = 13;
    cfg.height = 11;
    cfg.resize = FERRY_RESIZE_BILINEAR;
    ASSERT_OK(ferry_jpeg_decode(data, n, &cfg, NULL, "p.jpg", a, sizeof a));
    ASSERT_OK(ferry_png_decode(pdata, pn, &cfg, NULL, "p.png", b, sizeof b));
    ASSERT_MEM_EQ(a, b, sizeof a);
    /* RESIZE_ERROR names both sizes. */
    cfg.resize = FERRY_RESIZE_ERROR;
    ASSERT_STATUS(ferry_jpeg_decode(data, n, &cfg, NULL, "p.jpg", a, sizeof a), FERRY_ERR_FORMAT);
    ASSERT_STR_CONTAINS(ferry_last_error(), "p.jpg: image is 40x30, samples are 13x11");
    free(pdata);
    free(data);
}

/* ---- bad input ---- */

TEST(every_truncation_is_a_format_error_naming_the_file)
{
    enc_opts kinds[] = {
        {.w = 24, .h = 16, .comps = 3, .hs = 2, .vs = 2},
        {.w = 24, .h = 16, .comps = 3, .hs = 2, .vs = 2, .progressive = true},
        {.w = 24, .h = 16, .comps = 1, .restart_interval = 1},
    };
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
        size_t n;
        uint8_t *data = enc(&kinds[k], &n);
        uint8_t out[24 * 16 * 3];
        ferry_image_config cfg = hwc(3);
        cfg.width = 24;
        cfg.height = 16;
        ferry_scratch *s;
        ASSERT_OK(ferry_scratch_create(&s));
        for (size_t cut = 0; cut < n; cut++) {
            ferry_status st = ferry_jpeg_decode(data, cut, &cfg, s, "cut.jpg", out, sizeof out);
            ASSERT_MSG(st == FERRY_ERR_FORMAT, "kind %zu cut at %zu of %zu: %s (%s)", k, cut, n,
                       ferry_status_str(st), ferry_last_error());
            ASSERT_STR_CONTAINS(ferry_last_error(), "cut.jpg: ");
        }
        /* The scratch still decodes a whole file after all those errors. */
        ASSERT_OK(ferry_jpeg_decode(data, n, &cfg, s, "whole.jpg", out, sizeof out));
        ferry_scratch_destroy(s);
        free(data);
    }
    size_t n;
    uint8_t *data = enc(&kinds[0], &n);
    uint8_t out[24 * 16 * 3];
    ferry_image_config cfg = hwc(3);
    ASSERT_STATUS(ferry_jpeg_decode(data, n - 2, &cfg, NULL, "noeoi.jpg", out, sizeof out),
                  FERRY_ERR_FORMAT);
    ASSERT_STR_CONTAINS(ferry_last_error(), "noeoi.jpg: premature end of JPEG data");
    free(data);
}

TEST(corrupt_bytes_fail_cleanly)
{
    enc_opts kinds[] = {
        {.w = 20, .h = 12, .comps = 3, .hs = 2, .vs = 1},
        {.w = 20, .h = 12, .comps = 3, .hs = 2, .vs = 2, .progressive = true},
        {.w = 20, .h = 12, .comps = 3, .arith = true},
    };
    size_t formats = 0;
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
        size_t n;
        uint8_t *data = enc(&kinds[k], &n);
        uint8_t *bad = malloc(n);
        uint8_t out[20 * 12 * 3];
        ferry_image_config cfg = hwc(3);
        cfg.width = 20;
        cfg.height = 12;
        ferry_scratch *s;
        ASSERT_OK(ferry_scratch_create(&s));
        for (size_t i = 2; i < n; i++)
            for (int v = 0; v < 3; v++) {
                memcpy(bad, data, n);
                bad[i] = v == 0 ? (uint8_t)(bad[i] ^ 0x55) : v == 1 ? 0xff : 0x00;
                ferry_status st = ferry_jpeg_decode(bad, n, &cfg, s, "bad.jpg", out, sizeof out);
                ASSERT_MSG(st == FERRY_OK || st == FERRY_ERR_FORMAT || st == FERRY_ERR_UNSUPPORTED ||
                           st == FERRY_ERR_LIMIT, "byte %zu: %s", i, ferry_status_str(st));
                if (st != FERRY_OK)
                    ASSERT_STR_CONTAINS(ferry_last_error(), "bad.jpg: ");
                formats += st == FERRY_ERR_FORMAT;
            }
        ferry_scratch_destroy(s);
        free(bad);
        free(data);
    }
    ASSERT(formats > 100);
}

/* The byte offset of data's first SOFn marker segment. */
static size_t sof_at(const uint8_t *d, size_t n)
{
    for (size_t i = 2; i + 10 < n; i++)
        if (d[i] == 0xff && (d[i + 1] == 0xc0 || d[i + 1] == 0xc1 || d[i + 1] == 0xc2))
            return i;
    ASSERT_MSG(0, "no SOF");
    return 0;
}

TEST(limits_are_checked_before_allocating)
{
    enc_opts o = {.w = 37, .h = 23, .comps = 3, .hs = 2, .vs = 2};
    size_t n;
    uint8_t *data = enc(&o, &n);
    uint8_t *big = malloc(n);
    memcpy(big, data, n);
    size_t at = sof_at(big, n);
    big[at + 5] = big[at + 7] = 0xea; /* 60000 x 60000 */
    big[at + 6] = big[at + 8] = 0x60;
    uint8_t out[64];
    int64_t before = ferry_debug_alloc_count();
    ASSERT_STATUS(ferry_jpeg_decode(big, n, NULL, NULL, "bomb.jpg", out, sizeof out), FERRY_ERR_LIMIT);
    ASSERT_EQ_INT(ferry_debug_alloc_count(), before);
    ASSERT_STR_CONTAINS(ferry_last_error(), "bomb.jpg: image is 60000x60000, over the limits");
    ferry_image_config cfg = hwc(1);
    cfg.width = cfg.height = 4;
    ASSERT_STATUS(ferry_jpeg_decode(big, n, &cfg, NULL, "bomb.jpg", out, sizeof out), FERRY_ERR_LIMIT);
    ASSERT_EQ_INT(ferry_debug_alloc_count(), before);
    uint8_t px[37 * 23 * 3];
    cfg = ferry_image_config_default();
    cfg.limits.max_pixels = 37 * 23 - 1;
    ASSERT_STATUS(ferry_jpeg_decode(data, n, &cfg, NULL, "f.jpg", px, sizeof px), FERRY_ERR_LIMIT);
    cfg = ferry_image_config_default();
    cfg.limits.max_height = 22;
    ASSERT_STATUS(ferry_jpeg_decode(data, n, &cfg, NULL, "f.jpg", px, sizeof px), FERRY_ERR_LIMIT);
    cfg = ferry_image_config_default();
    cfg.limits.max_file_bytes = n - 1;
    ASSERT_STATUS(ferry_jpeg_decode(data, n, &cfg, NULL, "f.jpg", px, sizeof px), FERRY_ERR_LIMIT);
    ASSERT_STR_CONTAINS(ferry_last_error(), "f.jpg: file is");
    /* A zero height (DNL, which libjpeg-turbo lacks) and 12-bit or lossless frames. */
    memcpy(big, data, n);
    big[at + 5] = big[at + 6] = 0;
    ASSERT_STATUS(ferry_jpeg_decode(big, n, NULL, NULL, "z.jpg", px, sizeof px), FERRY_ERR_FORMAT);
    memcpy(big, data, n);
    big[at + 4] = 12;
    ASSERT_STATUS(ferry_jpeg_decode(big, n, NULL, NULL, "12.jpg", px, sizeof px),
                  FERRY_ERR_UNSUPPORTED);
    ASSERT_STR_CONTAINS(ferry_last_error(), "12.jpg: 12-bit JPEG samples are not supported");
    memcpy(big, data, n);
    big[at + 1] = 0xc3;
    ASSERT_STATUS(ferry_jpeg_decode(big, n, NULL, NULL, "ll.jpg", px, sizeof px),
                  FERRY_ERR_UNSUPPORTED);
    ASSERT_STR_CONTAINS(ferry_last_error(), "ll.jpg: lossless JPEG (SOF3) is not supported");
    ASSERT_STATUS(ferry_jpeg_decode(data, n, NULL, NULL, "f.jpg", px, sizeof px - 1),
                  FERRY_ERR_INVALID_ARG);
    free(big);
    free(data);
}

TEST(a_progressive_scan_bomb_is_refused)
{
    /* Valid progression, one coefficient band and one bit at a time: 757 scans. */
    static jpeg_scan_info scans[800];
    int k = 0;
    scans[k++] = (jpeg_scan_info){.comps_in_scan = 3, .component_index = {0, 1, 2}, .Ss = 0,
                                  .Se = 0, .Ah = 0, .Al = 0};
    for (int c = 0; c < 3; c++)
        for (int band = 1; band < 64; band++) {
            scans[k++] = (jpeg_scan_info){.comps_in_scan = 1, .component_index = {c},
                                          .Ss = band, .Se = band, .Ah = 0, .Al = 3};
            for (int al = 3; al > 0; al--)
                scans[k++] = (jpeg_scan_info){.comps_in_scan = 1, .component_index = {c},
                                              .Ss = band, .Se = band, .Ah = al, .Al = al - 1};
        }
    enc_opts o = {.w = 16, .h = 16, .comps = 3, .hs = 1, .vs = 1, .scans = scans, .nscans = k};
    size_t n;
    uint8_t *data = enc(&o, &n);
    uint8_t px[16 * 16 * 3];
    ASSERT_STATUS(ferry_jpeg_decode(data, n, NULL, NULL, "scans.jpg", px, sizeof px),
                  FERRY_ERR_FORMAT);
    ASSERT_STR_CONTAINS(ferry_last_error(), "scans.jpg: more than 500 scans");
    free(data);
    /* The same progression over one component (253 scans) decodes. */
    o.comps = 1;
    o.nscans = 1 + 63 * 4;
    scans[0] = (jpeg_scan_info){.comps_in_scan = 1, .component_index = {0}};
    data = enc(&o, &n);
    check_against_libjpeg("scans_gray.jpg", data, n);
    free(data);
}

/* ---- a decoder kept in the scratch starts every file afresh ---- */

/* A copy of data without its segments of marker `code` (before the scan). */
static uint8_t *without_segments(const uint8_t *data, size_t n, uint8_t code, size_t *out_n)
{
    uint8_t *o = malloc(n);
    ASSERT(o && n > 4);
    size_t at = 2, k = 2;
    memcpy(o, data, 2); /* SOI */
    while (at + 4 <= n && data[at] == 0xFF && data[at + 1] != 0xDA) {
        size_t len = 2 + ((size_t)data[at + 2] << 8 | data[at + 3]);
        ASSERT(at + len <= n);
        if (data[at + 1] != code) {
            memcpy(o + k, data + at, len);
            k += len;
        }
        at += len;
    }
    memcpy(o + k, data + at, n - at); /* the scan and the rest */
    *out_n = k + n - at;
    ASSERT(*out_n < n);
    return o;
}

TEST(tables_never_carry_over_from_the_previous_file)
{
    size_t na, nb;
    uint8_t *a = ft_read_file(REF "optimized.jpg", &na), *b = ft_read_file(REF "rgb444.jpg", &nb);
    size_t nq, nh;
    uint8_t *noq = without_segments(b, nb, 0xDB, &nq), *noh = without_segments(b, nb, 0xC4, &nh);
    ferry_image_config cfg = hwc(3);
    ferry_image_info info;
    ASSERT_OK(ferry_image_probe(b, nb, &info));
    size_t bytes = info.width * info.height * 3, abytes;
    ASSERT_OK(ferry_image_probe(a, na, &info));
    abytes = info.width * info.height * 3;
    uint8_t *fresh = malloc(bytes), *warm = malloc(bytes), *pa = malloc(abytes);
    /* Without its Huffman tables a file decodes with libjpeg's defaults (the
     * tables PIL writes), fresh or after a file with optimised tables. */
    ASSERT_OK(ferry_jpeg_decode(noh, nh, &cfg, NULL, "noDHT.jpg", fresh, bytes));
    ferry_scratch *s;
    ASSERT_OK(ferry_scratch_create(&s));
    ASSERT_OK(ferry_jpeg_decode(a, na, &cfg, s, "optimized.jpg", pa, abytes));
    ASSERT_OK(ferry_jpeg_decode(noh, nh, &cfg, s, "noDHT.jpg", warm, bytes));
    ASSERT_MEM_EQ(warm, fresh, bytes);
    /* Without its quantization tables it cannot be decoded, whatever came before. */
    ASSERT_STATUS(ferry_jpeg_decode(noq, nq, &cfg, NULL, "noDQT.jpg", fresh, bytes), FERRY_ERR_FORMAT);
    ASSERT_OK(ferry_jpeg_decode(a, na, &cfg, s, "optimized.jpg", pa, abytes));
    ASSERT_STATUS(ferry_jpeg_decode(noq, nq, &cfg, s, "noDQT.jpg", warm, bytes), FERRY_ERR_FORMAT);
    ASSERT_STR_CONTAINS(ferry_last_error(), "noDQT.jpg");
    ferry_scratch_destroy(s);
    free(fresh);
    free(warm);
    free(pa);
    free(noq);
    free(noh);
    free(a);
    free(b);
}

/* A PNG named .jpg (ImageNet has one) is a PNG: told by its bytes. */
TEST(a_png_named_jpg_is_read_as_png)
{
    uint8_t px[4 * 3 * 3];
    for (size_t i = 0; i < sizeof px; i++)
        px[i] = (uint8_t)(i * 7);
    const char *p = ft_tmp("pngjpg/c0/x.jpg");
    ft_write_file(p, "", 0);
    ASSERT_OK(ferry_png_save(p, px, 4, 3, 3));
    size_t n;
    uint8_t *data = ft_read_file(p, &n);
    ferry_image_info info;
    ASSERT_OK(ferry_image_probe(data, n, &info));
    ASSERT(info.kind != FERRY_IMAGE_JPEG);
    ferry_image_config cfg = hwc(3);
    uint8_t out[sizeof px];
    ASSERT_OK(ferry_image_decode(data, n, &cfg, NULL, "x.jpg", out, sizeof out));
    ASSERT_MEM_EQ(out, px, sizeof px);
    ferry_dataset *ds = NULL;
    ASSERT_OK(ferry_dataset_image_folder(ft_tmp("pngjpg"), &cfg, &ds));
    ASSERT_EQ_SIZE(ferry_dataset_len(ds), 1);
    ferry_sample_ctx ctx = {0};
    int64_t lab;
    ASSERT_OK(ferry_dataset_get(ds, 0, out, sizeof out, &ctx, &lab));
    ASSERT_MEM_EQ(out, px, sizeof px);
    ferry_dataset_release(ds);
    /* Neither signature, named .jpg: the JPEG error. */
    static const uint8_t junk[16] = "not an image....";
    ASSERT_STATUS(ferry_image_decode(junk, sizeof junk, &cfg, NULL, "y.jpg", out, sizeof out), FERRY_ERR_FORMAT);
    ASSERT_STR_CONTAINS(ferry_last_error(), "JPEG");
    free(data);
}

/* ---- memory ---- */

TEST(warm_scratch_decodes_without_allocating)
{
    enc_opts kinds[] = {
        {.w = 64, .h = 48, .comps = 3, .hs = 2, .vs = 2},
        {.w = 64, .h = 48, .comps = 3, .hs = 2, .vs = 1, .progressive = true},
        {.w = 64, .h = 48, .comps = 4},
        {.w = 64, .h = 48, .comps = 1, .arith = true},
    };
    uint8_t *files[4];
    size_t sizes[4];
    for (int i = 0; i < 4; i++)
        files[i] = enc(&kinds[i], &sizes[i]);
    size_t en;
    uint8_t *exif = ft_read_file(REF "exif.jpg", &en);
    ferry_scratch *s;
    ASSERT_OK(ferry_scratch_create(&s));
    static uint8_t out[64 * 64 * 3];
    for (int mode = 0; mode < 3; mode++) {
        ferry_image_config cfg = hwc(mode == 1 ? 1 : 3);
        cfg.width = mode == 2 ? 50 : 64;
        cfg.height = mode == 2 ? 31 : 48;
        cfg.exif_orientation = true;
        for (int round = 0; round < 13; round++) {
            int64_t before = ferry_debug_alloc_count();
            for (int i = 0; i < 4; i++)
                ASSERT_OK(ferry_jpeg_decode(files[i], sizes[i], &cfg, s, "w.jpg", out, sizeof out));
            ASSERT_OK(ferry_jpeg_decode(exif, en, &cfg, s, "exif.jpg", out, sizeof out));
            if (round >= 3)
                ASSERT_EQ_INT(ferry_debug_alloc_count() - before, 0);
        }
    }
    ferry_scratch_destroy(s);
    for (int i = 0; i < 4; i++)
        free(files[i]);
    free(exif);
}

TEST(allocation_failures_leak_nothing)
{
    enc_opts o = {.w = 37, .h = 23, .comps = 3, .hs = 2, .vs = 2, .progressive = true};
    size_t n;
    uint8_t *data = enc(&o, &n);
    size_t en;
    uint8_t *exif = ft_read_file(REF "exif.jpg", &en);
    uint8_t out[50 * 31 * 3];
    ferry_image_config cfg = ferry_image_config_default();
    cfg.width = 50;
    cfg.height = 31;
    cfg.exif_orientation = true;
    int64_t live = ferry_debug_alloc_live();
    for (int with_scratch = 0; with_scratch < 2; with_scratch++)
        for (int k = 1; k < 40; k++) {
            ferry_scratch *s = NULL;
            if (with_scratch)
                ASSERT_OK(ferry_scratch_create(&s));
            ferry_debug_fail_alloc_after(k);
            ferry_status st = ferry_jpeg_decode(data, n, &cfg, s, "f.jpg", out, sizeof out);
            ferry_status st2 = ferry_jpeg_decode(exif, en, &cfg, s, "e.jpg", out, sizeof out);
            ferry_debug_fail_alloc_after(0);
            ASSERT_MSG(st == FERRY_OK || st == FERRY_ERR_NO_MEMORY, "k=%d: %s (%s)", k,
                       ferry_status_str(st), ferry_last_error());
            ASSERT_MSG(st2 == FERRY_OK || st2 == FERRY_ERR_NO_MEMORY, "k=%d: %s (%s)", k,
                       ferry_status_str(st2), ferry_last_error());
            /* After the failures the same scratch decodes. */
            ASSERT_OK(ferry_jpeg_decode(data, n, &cfg, s, "f.jpg", out, sizeof out));
            ferry_scratch_destroy(s);
            ASSERT_EQ_INT(ferry_debug_alloc_live(), live);
        }
    free(exif);
    free(data);
}

/* ---- data sets ---- */

static uint64_t epoch_digest(ferry_dataset *ds, size_t workers)
{
    ferry_loader_config c = ferry_loader_config_default();
    c.dataset = ds;
    c.batch_size = 3;
    c.num_workers = workers ? workers : FERRY_LOADER_NO_WORKERS;
    c.shuffle = true;
    c.seed = 7;
    c.device = ferry_cpu();
    c.pin_memory = FERRY_PIN_MEMORY_OFF;
    c.out_dtype = FERRY_DTYPE_U8;
    ferry_loader *l;
    ASSERT_OK(ferry_loader_create(&c, &l));
    uint64_t h = ft_epoch_digest(l);
    /* The warm-up decodes one sample (here a PNG or a JPEG); a worker whose
     * first sample of the other format comes after the first batch grows its
     * buffers then, once per format (the loader's documented promise is no
     * allocation after warm-up for images of one format and size). How many
     * do so depends on the workers' timing: bound it, do not pin it to 0. */
    ferry_loader_stats s;
    ASSERT_OK(ferry_loader_stats_get(l, &s));
    size_t nw = workers ? workers : 1;
    ASSERT_MSG(s.allocs_after_warmup <= 8 * nw, "%llu allocations after warm-up, %zu workers",
               (unsigned long long)s.allocs_after_warmup, nw);
    ferry_loader_destroy(l);
    return h;
}

TEST(png_and_jpeg_mix_in_folders_lists_and_shards)
{
    /* Samples 0..5: class a: 0.png 1.JPG 2.jpeg; class b: 3.jpg 4.png 5.Jpeg. */
    static const char *names[6] = {"a/0.png", "a/1.JPG", "a/2.jpeg", "b/3.jpg", "b/4.png", "b/5.Jpeg"};
    static const char *keys[6] = {"0.png", "1.JPG", "2.jpeg", "3.jpg", "4.png", "5.Jpeg"};
    ft_tar t = {0};
    ft_tar_text(&t, "__classes__.txt", "a\nb\n");
    char list[512] = "";
    for (int i = 0; i < 6; i++) {
        char path[256];
        snprintf(path, sizeof path, "%s", ft_tmp("mix"));
        strcat(path, "/");
        strcat(path, names[i]);
        size_t n;
        uint8_t *data;
        if (strstr(names[i], ".png")) {
            uint8_t px[30 * 20 * 3];
            for (size_t j = 0; j < sizeof px; j++)
                px[j] = (uint8_t)(j * 7 + (size_t)i * 31);
            ASSERT_OK(ferry_png_save(ft_tmp("tmp.png"), px, 30, 20, 3));
            data = ft_read_file(ft_tmp("tmp.png"), &n);
        } else {
            enc_opts o = {.w = 30, .h = 20, .comps = i == 3 ? 1 : 3, .hs = 2, .vs = 2,
                          .progressive = i == 2};
            data = enc(&o, &n);
        }
        ft_write_file(path, data, n);
        ft_tar_file(&t, keys[i], data, n);
        char cls[16];
        snprintf(cls, sizeof cls, "%d", i / 3);
        char key[16];
        snprintf(key, sizeof key, "%d.cls", i);
        ft_tar_text(&t, key, cls);
        char line[64];
        snprintf(line, sizeof line, "mix/%s,%d\n", names[i], i / 3);
        strcat(list, line);
        free(data);
    }
    ft_tar_end(&t);
    const char *shard = ft_tar_save(&t, "mix.tar");
    ft_write_file(ft_tmp("mix.txt"), list, strlen(list));

    ferry_image_config cfg = ferry_image_config_default();
    cfg.channels = 3;
    ferry_dataset *folder, *listed, *sharded;
    ASSERT_OK(ferry_dataset_image_folder(ft_tmp("mix"), &cfg, &folder));
    ASSERT_OK(ferry_dataset_list_file(ft_tmp("mix.txt"), &cfg, &listed));
    ASSERT_OK(ferry_dataset_shards(&shard, 1, &cfg, &sharded));
    ASSERT_EQ_INT(ferry_dataset_len(folder), 6);
    ASSERT_EQ_INT(ferry_dataset_len(listed), 6);
    ASSERT_EQ_INT(ferry_dataset_len(sharded), 6);
    size_t bytes = ferry_dataset_sample_bytes(folder);
    ASSERT_EQ_INT(bytes, 30 * 20 * 3);
    uint8_t a[30 * 20 * 3], b[30 * 20 * 3], c[30 * 20 * 3];
    for (size_t i = 0; i < 6; i++) {
        int64_t la, lb, lc;
        ASSERT_OK(ferry_dataset_get(folder, i, a, bytes, NULL, &la));
        ASSERT_OK(ferry_dataset_get(listed, i, b, bytes, NULL, &lb));
        ASSERT_OK(ferry_dataset_get(sharded, i, c, bytes, NULL, &lc));
        ASSERT_MEM_EQ(a, b, bytes);
        ASSERT_MEM_EQ(a, c, bytes);
        ASSERT_EQ_INT(la, (int64_t)i / 3);
        ASSERT(la == lb && la == lc);
    }
    uint64_t want = epoch_digest(folder, 0);
    ASSERT(epoch_digest(folder, 3) == want);
    ASSERT(epoch_digest(listed, 2) == want);
    ASSERT(epoch_digest(sharded, 3) == want);
    ferry_dataset_release(folder);
    ferry_dataset_release(listed);
    ferry_dataset_release(sharded);

    /* A truncated JPEG in a folder fails by name when loaded. */
    size_t n;
    char p[256];
    snprintf(p, sizeof p, "%s/a/1.JPG", ft_tmp("mix"));
    uint8_t *data = ft_read_file(p, &n);
    ft_write_file(p, data, n - 10); /* into the entropy-coded data */
    free(data);
    ASSERT_OK(ferry_dataset_image_folder(ft_tmp("mix"), &cfg, &folder));
    ASSERT_STATUS(ferry_dataset_get(folder, 1, a, bytes, NULL, NULL), FERRY_ERR_FORMAT);
    ASSERT_STR_CONTAINS(ferry_last_error(), "a/1.JPG: premature end of JPEG data");
    ferry_dataset_release(folder);
}

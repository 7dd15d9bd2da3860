/* PNG decoding through libpng, from bytes already in memory, straight into the
 * caller's buffer. libpng's errors longjmp back into decode_rows() only and become
 * FERRY_ERR_FORMAT with libpng's own words; its allocations come from the scratch
 * arena; the header is checked against the limits before libpng sees the file. */
#include <png.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>

#include "common/error.h"
#include "dataset/image/image.h"
#include "dataset/image/geom.h"

static const uint8_t png_signature[8] = {137, 80, 78, 71, 13, 10, 26, 10};

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* The IHDR fields and whether a tRNS comes before the first IDAT. */
ferry_status ferry__png_header(const uint8_t *p, size_t n, const char *name, ferry_image_info *out)
{
    if (!name)
        name = "PNG";
    if (n < 8 || memcmp(p, png_signature, 8) != 0)
        return ferry_fail_at(FERRY_ERR_FORMAT, name, "not a PNG file (%s)",
                             n == 0 ? "empty" : n < 8 ? "too short" : "bad signature");
    if (n < 33)
        return ferry_fail_at(FERRY_ERR_FORMAT, name, "truncated IHDR (%zu bytes)", n);
    if (be32(p + 8) != 13 || memcmp(p + 12, "IHDR", 4) != 0)
        return ferry_fail_at(FERRY_ERR_FORMAT, name, "IHDR: missing or wrong length");
    uint32_t w = be32(p + 16), h = be32(p + 20);
    int bd = p[24], ct = p[25], il = p[28];
    if (w == 0 || h == 0 || w > 0x7fffffffu || h > 0x7fffffffu)
        return ferry_fail_at(FERRY_ERR_FORMAT, name, "IHDR: invalid size %ux%u", w, h);
    int ok_depth;
    switch (ct) {
    case 0: ok_depth = bd == 1 || bd == 2 || bd == 4 || bd == 8 || bd == 16; break;
    case 3: ok_depth = bd == 1 || bd == 2 || bd == 4 || bd == 8; break;
    case 2: case 4: case 6: ok_depth = bd == 8 || bd == 16; break;
    default:
        return ferry_fail_at(FERRY_ERR_FORMAT, name, "IHDR: invalid color type %d", ct);
    }
    if (!ok_depth)
        return ferry_fail_at(FERRY_ERR_FORMAT, name, "IHDR: invalid bit depth %d for color type %d",
                             bd, ct);
    if (il > 1)
        return ferry_fail_at(FERRY_ERR_FORMAT, name, "IHDR: invalid interlace method %d", il);
    memset(out, 0, sizeof *out);
    out->width = w;
    out->height = h;
    out->bit_depth = bd;
    out->palette = ct == 3;
    out->interlaced = il == 1;
    out->has_alpha = ct == 4 || ct == 6;
    out->kind = FERRY_IMAGE_PNG;
    out->orientation = 1;
    /* Walk chunk headers (not their data) up to the first IDAT, looking for tRNS. */
    size_t off = 33;
    while (!out->has_alpha && off + 8 <= n) {
        uint32_t len = be32(p + off);
        if (!memcmp(p + off + 4, "IDAT", 4))
            break;
        if (!memcmp(p + off + 4, "tRNS", 4))
            out->has_alpha = ct != 4 && ct != 6;
        if (len > n - off - 8 || n - off - 8 - len < 4)
            break; /* libpng reports the truncation with its own words */
        off += 12 + (size_t)len;
    }
    size_t base = (ct == 0 || ct == 4) ? 1 : 3;
    out->channels = base + (out->has_alpha ? 1 : 0);
    return FERRY_OK;
}

ferry_status ferry_png_info(const void *data, size_t n, ferry_image_info *out)
{
    if ((!data && n) || !out)
        return FERRY_ARG_ERROR("NULL argument");
    return ferry__png_header(data, n, NULL, out);
}

static ferry_status check_limits(const ferry_image_info *info, const ferry_image_limits *lim,
                                 const char *name)
{
    size_t px = 0;
    if (info->width > lim->max_width || info->height > lim->max_height ||
        !ferry_mul_size(info->width, info->height, &px) || px > lim->max_pixels)
        return ferry_fail_at(FERRY_ERR_LIMIT, name ? name : "PNG",
                             "image is %zux%zu, over the limits (%zux%zu, %zu pixels)",
                             info->width, info->height, lim->max_width, lim->max_height,
                             lim->max_pixels);
    return FERRY_OK;
}

typedef struct decoder {
    ferry_scratch *s;
    const uint8_t *data;
    size_t n, pos;
    const ferry_image_config *cfg;
    const ferry_sample_format *fmt;
    const ferry_image_info *info;
    const char *name;
    uint8_t *dst;
    png_structp png;
    png_infop pinfo;
    int oom;        /* an allocation for libpng failed */
    char msg[256];  /* libpng's error message */
} decoder;

static void on_error(png_structp png, png_const_charp msg)
{
    decoder *d = png_get_error_ptr(png);
    snprintf(d->msg, sizeof d->msg, "%s", msg ? msg : "unknown libpng error");
    png_longjmp(png, 1);
}

static void on_warning(png_structp png, png_const_charp msg)
{
    (void)png;
    (void)msg; /* warnings (bad ancillary chunks, profiles) do not stop a decode */
}

static png_voidp on_malloc(png_structp png, png_alloc_size_t n)
{
    decoder *d = png_get_mem_ptr(png);
    void *p = ferry__arena_alloc(d->s, n);
    if (!p)
        d->oom = 1;
    return p;
}

static void on_free(png_structp png, png_voidp p)
{
    decoder *d = png_get_mem_ptr(png);
    ferry__arena_free(d->s, p);
}

static void on_read(png_structp png, png_bytep out, size_t n)
{
    decoder *d = png_get_io_ptr(png);
    if (d->n - d->pos < n)
        png_error(png, "file truncated");
    memcpy(out, d->data + d->pos, n);
    d->pos += n;
}

/* Chunks ferry never uses: skipping them saves time and keeps zTXt/iCCP bombs out.
 * Colour-space chunks are ignored on purpose: samples are the stored values, as
 * PIL and torchvision give them. */
static const png_byte ignored_chunks[] =
    "bKGD\0cHRM\0eXIf\0gAMA\0hIST\0iCCP\0iTXt\0oFFs\0pCAL\0pHYs\0sBIT\0sCAL\0sPLT\0sRGB\0"
    "tEXt\0tIME\0zTXt\0";

/* Everything between setjmp and the end of libpng's work. Locals changed after
 * setjmp are not read after a longjmp: all state lives in *d. */
static ferry_status decode_rows(decoder *d)
{
    png_structp png = d->png;
    png_infop pinfo = d->pinfo;
    if (setjmp(png_jmpbuf(png)))
        return d->oom ? FERRY_ERR_NO_MEMORY : FERRY_ERR_FORMAT;

    const ferry_image_limits *lim = &d->cfg->limits;
    png_set_user_limits(png, (png_uint_32)(lim->max_width < 0x7fffffff ? lim->max_width : 0x7fffffff),
                        (png_uint_32)(lim->max_height < 0x7fffffff ? lim->max_height : 0x7fffffff));
    png_set_chunk_malloc_max(png, lim->max_chunk_bytes);
    png_set_chunk_cache_max(png, 128);
    png_set_keep_unknown_chunks(png, PNG_HANDLE_CHUNK_NEVER, ignored_chunks,
                                (int)(sizeof ignored_chunks / 5));
    png_set_read_fn(png, d, on_read);
    png_read_info(png, pinfo);

    int ct = png_get_color_type(png, pinfo), bd = png_get_bit_depth(png, pinfo);
    int composite = d->cfg->alpha_composite;
    size_t C = d->fmt->channels, W = d->fmt->width, H = d->fmt->height;
    size_t sw = png_get_image_width(png, pinfo), sh = png_get_image_height(png, pinfo);
    if (ct == PNG_COLOR_TYPE_PALETTE)
        png_set_palette_to_rgb(png);
    if (ct == PNG_COLOR_TYPE_GRAY && bd < 8)
        png_set_expand_gray_1_2_4_to_8(png);
    if (composite && png_get_valid(png, pinfo, PNG_INFO_tRNS))
        png_set_tRNS_to_alpha(png);
    if (bd == 16)
        png_set_scale_16(png); /* rounds, as libpng's simplified API does */
    /* png_set_palette_to_rgb expands tRNS to alpha as well: strip that too. */
    if (!composite && ((ct & PNG_COLOR_MASK_ALPHA) || png_get_valid(png, pinfo, PNG_INFO_tRNS)))
        png_set_strip_alpha(png);
    int gray_src = !(ct & PNG_COLOR_MASK_COLOR);
    int has_alpha = composite && ((ct & PNG_COLOR_MASK_ALPHA) || png_get_valid(png, pinfo, PNG_INFO_tRNS));
    /* Rows go straight into dst when libpng can produce the output format itself. */
    int direct = sw == W && sh == H && !has_alpha &&
                 ((C == 1 && gray_src) || (C == 3 && d->fmt->layout == FERRY_LAYOUT_HWC));
    if (direct && C == 3 && gray_src)
        png_set_gray_to_rgb(png);
    int passes = png_set_interlace_handling(png);
    png_read_update_info(png, pinfo);

    size_t sc = png_get_channels(png, pinfo);
    size_t rowbytes = png_get_rowbytes(png, pinfo);
    if (png_get_bit_depth(png, pinfo) != 8 || rowbytes != sw * sc || (direct && sc != C)) {
        snprintf(d->msg, sizeof d->msg, "unexpected row format after transforms (depth %d, %zu channels, %zu bytes per row)", png_get_bit_depth(png, pinfo), sc, rowbytes);
        return FERRY_ERR_FORMAT;
    }
    if (direct) {
        for (int pass = 0; pass < passes; pass++)
            for (size_t y = 0; y < sh; y++)
                png_read_row(png, d->dst + y * W * C, NULL);
    } else if (passes > 1 || ((sw != W || sh != H) && d->cfg->resize == FERRY_RESIZE_BILINEAR)) {
        /* Interlaced rows arrive in several passes, and resizing needs the whole
         * image: keep libpng's output in scratch, then place it. */
        if (ferry__scratch_grow(&d->s->row, &d->s->row_cap, rowbytes * sh) != FERRY_OK) {
            d->oom = 1;
            snprintf(d->msg, sizeof d->msg, "%s", ferry_last_error());
            return FERRY_ERR_NO_MEMORY;
        }
        for (int pass = 0; pass < passes; pass++)
            for (size_t y = 0; y < sh; y++)
                png_read_row(png, d->s->row + y * rowbytes, NULL);
        png_read_end(png, NULL);
        return ferry__image_place(d->s->row, sw, sh, sc, d->cfg, d->fmt, d->dst, d->s, d->name);
    } else {
        /* Same size or centre crop: row by row through one row buffer. */
        if (sw < W || sh < H)
            memset(d->dst, 0, C * H * W);
        if (ferry__scratch_grow(&d->s->row, &d->s->row_cap, rowbytes) != FERRY_OK) {
            d->oom = 1;
            snprintf(d->msg, sizeof d->msg, "%s", ferry_last_error());
            return FERRY_ERR_NO_MEMORY;
        }
        ferry_row_sink k = {
            .dst = d->dst, .C = C, .H = H, .W = W, .layout = d->fmt->layout,
            .oy = ferry__center_offset(H, sh), .ox = ferry__center_offset(W, sw),
            .src_w = sw, .sc = sc, .composite = has_alpha,
            .bg = {d->cfg->background[0], d->cfg->background[1], d->cfg->background[2]},
            .bg_gray = ferry__luma(d->cfg->background[0], d->cfg->background[1],
                                   d->cfg->background[2]),
        };
        for (size_t y = 0; y < sh; y++) {
            png_read_row(png, d->s->row, NULL);
            ferry__sink_row(&k, y, d->s->row);
        }
    }
    png_read_end(png, NULL);
    return FERRY_OK;
}

ferry_status ferry__png_decode(const void *data, size_t n, const ferry_image_config *cfg,
                               const ferry_sample_format *fmt, ferry_scratch *scratch,
                               const char *name, void *dst)
{
    ferry_image_info info = {0};
    ferry_status st = ferry__png_header(data, n, name, &info);
    if (st != FERRY_OK)
        return st;
    if ((st = check_limits(&info, &cfg->limits, name)) != FERRY_OK)
        return st;
    if ((info.width != fmt->width || info.height != fmt->height) &&
        cfg->resize == FERRY_RESIZE_ERROR)
        return ferry_fail_at(FERRY_ERR_FORMAT, name ? name : "PNG",
                             "image is %zux%zu, samples are %zux%zu", info.width, info.height,
                             fmt->width, fmt->height);

    ferry_scratch *own = NULL;
    if (!scratch) {
        if ((st = ferry_scratch_create(&own)) != FERRY_OK)
            return st;
        scratch = own;
    }
    ferry__arena_reset(scratch);
    decoder d = {
        .s = scratch, .data = data, .n = n, .cfg = cfg, .fmt = fmt, .info = &info,
        .name = name, .dst = dst,
    };
    d.png = png_create_read_struct_2(PNG_LIBPNG_VER_STRING, &d, on_error, on_warning, &d,
                                     on_malloc, on_free);
    if (d.png)
        d.pinfo = png_create_info_struct(d.png);
    if (!d.png || !d.pinfo) {
        st = ferry_fail_at(FERRY_ERR_NO_MEMORY, name ? name : "PNG",
                           "cannot create the libpng reader");
    } else {
        st = decode_rows(&d);
        if (st != FERRY_OK && d.msg[0])
            st = ferry_fail_at(d.oom ? FERRY_ERR_NO_MEMORY : st, name ? name : "PNG", "%s", d.msg);
    }
    png_destroy_read_struct(d.png ? &d.png : NULL, d.pinfo ? &d.pinfo : NULL, NULL);
    /* Grows the arena to this decode's peak now, not at the start of the next
     * one: a scratch warmed by one decode then decodes the next allocation-free. */
    if (!own)
        ferry__arena_reset(scratch);
    ferry_scratch_destroy(own);
    return st;
}

ferry_status ferry_png_decode(const void *data, size_t n, const ferry_image_config *cfg,
                              ferry_scratch *scratch, const char *name, void *dst,
                              size_t dst_bytes)
{
    if ((!data && n) || !dst)
        return FERRY_ARG_ERROR("NULL argument");
    ferry_image_config c;
    ferry_status st = ferry__image_config_check(cfg, &c);
    if (st != FERRY_OK)
        return st;
    ferry_image_info info = {0};
    if ((st = ferry__png_header(data, n, name, &info)) != FERRY_OK)
        return st;
    if ((st = check_limits(&info, &c.limits, name)) != FERRY_OK)
        return st;
    ferry_sample_format fmt;
    ferry__image_resolve(&c, info.width, info.height, info.channels, &fmt);
    size_t need = ferry_sample_format_bytes(&fmt);
    if (!need || dst_bytes < need)
        return ferry_fail_at(need ? FERRY_ERR_INVALID_ARG : FERRY_ERR_LIMIT, name ? name : "PNG",
                             "the output (%zux%zux%zu) needs %zu bytes, dst has %zu",
                             fmt.channels, fmt.height, fmt.width, need, dst_bytes);
    return ferry__png_decode(data, n, &c, &fmt, scratch, name, dst);
}

/* Any image file: PNG or JPEG, told by its first bytes (never by its name, so a
 * JPEG named x.png decodes too), the limits both share, the public decode
 * entry points, and one sample of a file-backed dataset (read, decode, augment,
 * timed). */
#include <string.h>
#include <strings.h>

#include "common/error.h"
#include "ferry/rng.h"
#include "dataset/image/image.h"
#include "dataset/image/geom.h"

bool ferry__is_jpeg(const uint8_t *p, size_t n)
{
    return n >= 2 && p[0] == 0xff && p[1] == 0xd8;
}

bool ferry__is_image_name(const char *s)
{
    size_t n = strlen(s);
    return (n > 4 && (!strcasecmp(s + n - 4, ".png") || !strcasecmp(s + n - 4, ".jpg"))) ||
           (n > 5 && !strcasecmp(s + n - 5, ".jpeg"));
}

/* JPEG by its bytes; with neither signature, by its name (for the error). */
static bool decodes_as_jpeg(const uint8_t *p, size_t n, const char *name)
{
    if (ferry__is_jpeg(p, n))
        return true;
    if (n >= 8 && !memcmp(p, "\x89PNG\r\n\x1a\n", 8))
        return false;
    size_t len = name ? strlen(name) : 0;
    return (len > 4 && !strcasecmp(name + len - 4, ".jpg")) || (len > 5 && !strcasecmp(name + len - 5, ".jpeg"));
}

ferry_status ferry__image_header(const uint8_t *p, size_t n, const char *name, ferry_image_info *out)
{
    /* By the bytes first: a PNG named .jpg (ImageNet has one) is a PNG. With
     * neither signature, the error of the kind the name says, PNG by default. */
    return decodes_as_jpeg(p, n, name) ? ferry__jpeg_header(p, n, name, out) : ferry__png_header(p, n, name, out);
}

ferry_status ferry_image_probe(const void *data, size_t n, ferry_image_info *out)
{
    if ((!data && n) || !out)
        return FERRY_ARG_ERROR("NULL argument");
    return ferry__image_header(data, n, NULL, out);
}

ferry_status ferry__image_check_limits(const ferry_image_info *info, size_t file_bytes,
                                       const ferry_image_limits *lim, const char *name)
{
    size_t px = 0;
    if (info->width > lim->max_width || info->height > lim->max_height ||
        !ferry_mul_size(info->width, info->height, &px) || px > lim->max_pixels)
        return ferry_fail_at(FERRY_ERR_LIMIT, name, "image is %zux%zu, over the limits (%zux%zu, %zu pixels)",
                             info->width, info->height, lim->max_width, lim->max_height,
                             lim->max_pixels);
    if (lim->max_file_bytes && file_bytes > lim->max_file_bytes)
        return ferry_fail_at(FERRY_ERR_LIMIT, name, "file is %zu bytes, over the limit of %zu",
                             file_bytes, lim->max_file_bytes);
    return FERRY_OK;
}

ferry_status ferry__image_decode(const void *data, size_t n, const ferry_image_config *cfg,
                                 const ferry_sample_format *fmt, ferry_scratch *scratch,
                                 const char *name, void *dst)
{
    if (cfg->crop != FERRY_CROP_NONE) /* no sample index: the evaluation crop */
        return ferry__image_decode_crop(data, n, cfg, fmt, scratch, name, dst, NULL, NULL);
    if (decodes_as_jpeg(data, n, name))
        return ferry__jpeg_decode(data, n, cfg, fmt, scratch, name, dst);
    return ferry__png_decode(data, n, cfg, fmt, scratch, name, dst);
}

ferry_status ferry__image_plan(int kind, const void *data, size_t n, const ferry_image_config *cfg,
                               const char *name, size_t dst_bytes, ferry_image_config *c,
                               ferry_sample_format *fmt)
{
    ferry_status st = ferry__image_config_check(cfg, c);
    if (st != FERRY_OK)
        return st;
    ferry_image_info info = {0};
    if (kind == FERRY_IMAGE_JPEG)
        st = ferry__jpeg_header(data, n, name, &info);
    else
        st = ferry__image_header(data, n, name, &info);
    if (st != FERRY_OK)
        return st;
    const char *who = name ? name : info.kind == FERRY_IMAGE_JPEG ? "JPEG" : "PNG";
    if ((st = ferry__image_check_limits(&info, n, &c->limits, who)) != FERRY_OK)
        return st;
    size_t w, h;
    ferry__image_oriented_size(c, &info, &w, &h);
    ferry__image_resolve(c, w, h, info.channels, fmt);
    size_t need = ferry_sample_format_bytes(fmt);
    if (!need || dst_bytes < need)
        return ferry_fail_at(need ? FERRY_ERR_INVALID_ARG : FERRY_ERR_LIMIT, who,
                             "the output (%zux%zux%zu) needs %zu bytes, dst has %zu",
                             fmt->channels, fmt->height, fmt->width, need, dst_bytes);
    return FERRY_OK;
}

/* The public decoders: the plan checked, then the decode. kind < 0: either. */
static ferry_status decode_public(int kind, const char *fn, const void *data, size_t n,
                                  const ferry_image_config *cfg, ferry_scratch *scratch,
                                  const char *name, void *dst, size_t dst_bytes)
{
    if ((!data && n) || !dst)
        return ferry_fail_at(FERRY_ERR_INVALID_ARG, fn, "NULL argument");
    ferry_image_config c;
    ferry_sample_format fmt;
    ferry_status st = ferry__image_plan(kind, data, n, cfg, name, dst_bytes, &c, &fmt);
    if (st != FERRY_OK)
        return st;
    return ferry__image_decode(data, n, &c, &fmt, scratch, name, dst);
}

ferry_status ferry_jpeg_decode(const void *data, size_t n, const ferry_image_config *cfg,
                               ferry_scratch *scratch, const char *name, void *dst,
                               size_t dst_bytes)
{
    return decode_public(FERRY_IMAGE_JPEG, "ferry_jpeg_decode", data, n, cfg, scratch, name, dst,
                         dst_bytes);
}

ferry_status ferry_image_decode(const void *data, size_t n, const ferry_image_config *cfg,
                                ferry_scratch *scratch, const char *name, void *dst,
                                size_t dst_bytes)
{
    return decode_public(-1, "ferry_image_decode", data, n, cfg, scratch, name, dst, dst_bytes);
}

/* A dataset whose size came from its images (ds->size_from) takes no image of
 * another size (nor, shards, of another kind): resizing or converting it would
 * be a choice the user did not make. */
static ferry_status check_picked_size(const ferry_dataset *ds, const ferry_image_config *cfg,
                                      const uint8_t *p, size_t n, const char *name)
{
    ferry_image_info info = {0};
    if (!ds->size_from[0] || cfg->height || ferry__image_header(p, n, name, &info) != FERRY_OK) {
        ferry_clear_error(); /* a bad header: the decode says why */
        return FERRY_OK;
    }
    size_t w, h, c = info.channels <= 2 ? 1 : 3;
    ferry__image_oriented_size(cfg, &info, &w, &h);
    if (w != ds->format.width || h != ds->format.height)
        return ferry_fail_at(FERRY_ERR_FORMAT, name ? name : "image",
                             "image is %zux%zu, the dataset's samples are %zux%zu (the size of "
                             "%s); set height and width in ferry_image_config to resize images "
                             "of another size", w, h, ds->format.width, ds->format.height,
                             ds->size_from);
    if (ds->channels_from && c != ds->channels_from)
        return ferry_fail_at(FERRY_ERR_FORMAT, name ? name : "image",
                             "image is %s, the dataset's samples are %s (as %s is); set channels "
                             "in ferry_image_config (3: RGB, 1: gray) to convert images of the "
                             "other kind", c == 1 ? "gray" : "colour",
                             ds->channels_from == 1 ? "gray" : "colour", ds->size_from);
    return FERRY_OK;
}

/* The decode of one sample, its geometry recorded in g (may be NULL). */
static ferry_status sample_decode(const ferry_image_config *cfg, const ferry_sample_format *fmt,
                                  ferry_scratch *s, const uint8_t *data, size_t n,
                                  const char *name, void *dst, ferry_rng *r, ferry_image_geom *g,
                                  double *resize_s)
{
    if (cfg->crop != FERRY_CROP_NONE)
        return ferry__image_decode_crop_geom(data, n, cfg, fmt, s, name, dst, r, g, resize_s);
    ferry_status st = ferry__image_decode(data, n, cfg, fmt, s, name, dst);
    ferry_image_info info = {0};
    if (st != FERRY_OK || !g || (st = ferry__image_header(data, n, name, &info)) != FERRY_OK)
        return st;
    size_t w, h;
    ferry__image_oriented_size(cfg, &info, &w, &h);
    ferry__geom_start(g, info.width, info.height, cfg->exif_orientation ? info.orientation : 1);
    ferry__image_place_geom(cfg, w, h, fmt, g);
    return FERRY_OK;
}

ferry_status ferry__image_sample_bytes(const ferry_image_config *cfg,
                                       const ferry_sample_format *fmt, ferry_scratch *s,
                                       const uint8_t *data, size_t n, size_t index,
                                       const char *name, void *dst, const ferry_sample_ctx *ctx,
                                       ferry_image_geom *g)
{
    double t1 = ferry__clock(ctx), resize_s = 0;
    /* One augmentation stream per sample: the crop's draws first, then the
     * flip's (without a crop, the flip's draws are those of before crops). */
    bool aug = ctx && ctx->train;
    ferry_rng r;
    if (aug)
        ferry_rng_init(&r, ctx->seed, FERRY_RNG_AUGMENT | ctx->epoch, (uint64_t)index);
    ferry_status st = sample_decode(cfg, fmt, s, data, n, name, dst, aug ? &r : NULL, g,
                                    ctx && ctx->timing ? &resize_s : NULL);
    double t2 = ferry__clock(ctx);
    if (st == FERRY_OK && aug)
        ferry__augment_geom(cfg, fmt, dst, &r, g);
    if (ctx && ctx->timing) {
        /* Channel conversion happens inside the decode, row by row; the crop's
         * resize is timed apart and counted as transform. */
        ctx->timing->decode_s += t2 - t1 - resize_s;
        ctx->timing->transform_s += ferry__clock(ctx) - t2 + resize_s;
    }
    return st;
}

ferry_status ferry__image_sample_geom(const ferry_dataset *ds, const ferry_image_config *cfg,
                                      size_t index, ferry_image_read_fn read, const void *src,
                                      const char *name, void *dst, const ferry_sample_ctx *ctx,
                                      ferry_image_geom *g)
{
    ferry_scratch *s, *own;
    ferry_status st = ferry__sample_scratch(ctx, &s, &own);
    if (st != FERRY_OK)
        return st;
    size_t n = 0;
    double t0 = ferry__clock(ctx);
    st = read(src, index, s, &n);
    if (st == FERRY_OK)
        st = check_picked_size(ds, cfg, s->file, n, name);
    if (ctx && ctx->timing)
        ctx->timing->read_s += ferry__clock(ctx) - t0;
    if (st == FERRY_OK)
        st = ferry__image_sample_bytes(cfg, &ds->format, s, s->file, n, index, name, dst, ctx,
                                       g);
    ferry_scratch_destroy(own);
    return st;
}

ferry_status ferry__image_sample(const ferry_dataset *ds, const ferry_image_config *cfg, size_t index,
                                 ferry_image_read_fn read, const void *src, const char *name,
                                 void *dst, const ferry_sample_ctx *ctx)
{
    return ferry__image_sample_geom(ds, cfg, index, read, src, name, dst, ctx, NULL);
}

/* Pixels: image config defaults, channel conversion (gray <-> RGB, alpha dropped or
 * composited), placement with centre crop or bilinear resize, and the random
 * augmentations (crop with padding, horizontal flip) applied in place. */
#include <math.h>
#include <string.h>

#include "common/error.h"
#include "ferry/rng.h"
#include "dataset/image/image.h"
#include "dataset/image/geom.h"

ferry_image_config ferry_image_config_default(void)
{
    ferry_image_config c;
    memset(&c, 0, sizeof c);
    c.layout = FERRY_LAYOUT_CHW;
    c.resize = FERRY_RESIZE_BILINEAR;
    /* background: black, the zero a {0} config has */
    c.limits.max_width = 16384;
    c.limits.max_height = 16384;
    c.limits.max_pixels = (size_t)64 << 20;
    c.limits.max_file_bytes = (size_t)256 << 20;
    c.limits.max_chunk_bytes = (size_t)8 << 20;
    c.shard_cache_bytes = (size_t)256 << 20;
    return c;
}

/* The recipe's settings, defaults filled in (into out). */
static ferry_status crop_config_check(const ferry_image_config *cfg, ferry_image_config *out)
{
    if (cfg->crop != FERRY_CROP_RANDOM_RESIZED && cfg->crop != FERRY_CROP_CENTER)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "image config: unknown crop mode %d", (int)cfg->crop);
    if (!cfg->height || !cfg->width)
        return ferry_fail(FERRY_ERR_INVALID_ARG,
                          "image config: crop needs the output height and width (%zux%zu)",
                          cfg->height, cfg->width);
    if (cfg->crop_scale[0] == 0 && cfg->crop_scale[1] == 0) {
        out->crop_scale[0] = 0.08;
        out->crop_scale[1] = 1.0;
    } else if (!(cfg->crop_scale[0] > 0 && cfg->crop_scale[0] <= cfg->crop_scale[1] &&
                 cfg->crop_scale[1] <= 1)) {
        return ferry_fail(FERRY_ERR_INVALID_ARG,
                          "image config: crop_scale (%g, %g) must satisfy 0 < min <= max <= 1",
                          cfg->crop_scale[0], cfg->crop_scale[1]);
    }
    if (cfg->crop_ratio[0] == 0 && cfg->crop_ratio[1] == 0) {
        out->crop_ratio[0] = 3.0 / 4.0;
        out->crop_ratio[1] = 4.0 / 3.0;
    } else if (!(cfg->crop_ratio[0] > 0 && cfg->crop_ratio[0] <= cfg->crop_ratio[1] &&
                 cfg->crop_ratio[1] < 1e6)) {
        return ferry_fail(FERRY_ERR_INVALID_ARG,
                          "image config: crop_ratio (%g, %g) must satisfy 0 < min <= max < 1e6",
                          cfg->crop_ratio[0], cfg->crop_ratio[1]);
    }
    size_t big = cfg->height > cfg->width ? cfg->height : cfg->width;
    if (!cfg->resize_shorter)
        out->resize_shorter = (size_t)lrint((double)big * 256.0 / 224.0);
    else if (cfg->resize_shorter < big || cfg->resize_shorter > 65536)
        return ferry_fail(FERRY_ERR_INVALID_ARG,
                          "image config: resize_shorter %zu must be from %zu (the larger output "
                          "side) to 65536",
                          cfg->resize_shorter, big);
    return FERRY_OK;
}

ferry_status ferry__image_config_check(const ferry_image_config *cfg, ferry_image_config *out)
{
    ferry_image_config d = ferry_image_config_default();
    if (!cfg) {
        *out = d;
        return FERRY_OK;
    }
    *out = *cfg;
    if (cfg->channels != 0 && cfg->channels != 1 && cfg->channels != 3)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "image config: channels must be 0, 1 or 3, not %zu",
                          cfg->channels);
    if ((cfg->height == 0) != (cfg->width == 0))
        return ferry_fail(FERRY_ERR_INVALID_ARG,
                          "image config: height and width must both be set or both be 0 (%zux%zu)",
                          cfg->height, cfg->width);
    if (cfg->layout != FERRY_LAYOUT_CHW && cfg->layout != FERRY_LAYOUT_HWC)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "image config: unknown layout %d", (int)cfg->layout);
    if (cfg->resize != FERRY_RESIZE_BILINEAR && cfg->resize != FERRY_RESIZE_CENTER_CROP &&
        cfg->resize != FERRY_RESIZE_ERROR)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "image config: unknown resize mode %d",
                          (int)cfg->resize);
    if (cfg->random_crop_pad > 4096)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "image config: random_crop_pad %zu is too large",
                          cfg->random_crop_pad);
    static const char *const jname[4] = {"brightness", "contrast", "saturation", "hue"};
    for (int i = 0; i < 4; i++) {
        double v = cfg->color_jitter[i], top = i == 3 ? 0.5 : 1e6;
        if (!(v >= 0 && v <= top))
            return ferry_fail(FERRY_ERR_INVALID_ARG,
                              "image config: color_jitter[%d] (%s) %g must be from 0 to %g", i,
                              jname[i], v, top);
    }
    if (!(cfg->box_min_area_frac >= 0 && cfg->box_min_area_frac <= 1))
        return ferry_fail(FERRY_ERR_INVALID_ARG,
                          "image config: box_min_area_frac %g must be from 0 to 1",
                          cfg->box_min_area_frac);
    if (cfg->crop != FERRY_CROP_NONE) {
        ferry_status st = crop_config_check(cfg, out);
        if (st != FERRY_OK)
            return st;
    }
    /* 0 limits mean "the default", so a zeroed config is usable. */
    if (!out->limits.max_width) out->limits.max_width = d.limits.max_width;
    if (!out->limits.max_height) out->limits.max_height = d.limits.max_height;
    if (!out->limits.max_pixels) out->limits.max_pixels = d.limits.max_pixels;
    if (!out->limits.max_file_bytes) out->limits.max_file_bytes = d.limits.max_file_bytes;
    if (!out->limits.max_chunk_bytes) out->limits.max_chunk_bytes = d.limits.max_chunk_bytes;
    if (!out->shard_cache_bytes) out->shard_cache_bytes = d.shard_cache_bytes;
    return FERRY_OK;
}

void ferry__image_resolve(const ferry_image_config *cfg, size_t w, size_t h, size_t src_channels,
                          ferry_sample_format *out)
{
    out->channels = cfg->channels ? cfg->channels : (src_channels <= 2 ? 1 : 3);
    out->height = cfg->height ? cfg->height : h;
    out->width = cfg->width ? cfg->width : w;
    out->layout = cfg->layout;
    out->dtype = FERRY_DTYPE_U8;
}

void ferry__image_dataset_format(const ferry_image_config *cfg, size_t w, size_t h, bool gray,
                                 ferry_sample_format *out)
{
    /* Never the first file's channels alone: which file sorts first must not
     * change the format. With a size given nothing is read at create, so the
     * default is torchvision's ImageFolder's: RGB. */
    ferry__image_resolve(cfg, w, h, !cfg->height && gray ? 1 : 3, out);
}

void ferry__warn_gray_as_rgb(const char *what, const char *gray)
{
    ferry_log(FERRY_LOG_WARN, "%s: %s; decoded as RGB, 3 equal channels (channels 0 in "
              "ferry_image_config means RGB; set channels = 1 for gray)", what, gray);
}

ferry_status ferry_image_format(const ferry_image_config *cfg, const ferry_image_info *info,
                                ferry_sample_format *out)
{
    if (!info || !out)
        return FERRY_ARG_ERROR("NULL argument");
    if (info->width == 0 || info->height == 0 || info->channels == 0 || info->channels > 4)
        return FERRY_ARG_ERROR("an image of %zux%zu with %zu channels is not valid", info->width,
                               info->height, info->channels);
    ferry_image_config c;
    ferry_status st = ferry__image_config_check(cfg, &c);
    if (st != FERRY_OK)
        return st;
    size_t w, h;
    ferry__image_oriented_size(&c, info, &w, &h);
    ferry__image_resolve(&c, w, h, info->channels, out);
    return FERRY_OK;
}

static inline uint8_t blend(unsigned c, unsigned a, unsigned bg)
{
    return (uint8_t)((c * a + bg * (255u - a) + 127u) / 255u);
}

void ferry__sink_row(const ferry_row_sink *k, size_t y, const uint8_t *row)
{
    ptrdiff_t oy = (ptrdiff_t)y + k->oy;
    if (oy < 0 || oy >= (ptrdiff_t)k->H)
        return;
    ptrdiff_t x0 = k->ox < 0 ? -k->ox : 0;                     /* first source column */
    ptrdiff_t x1 = (ptrdiff_t)k->W - k->ox;                      /* one past the last */
    if (x1 > (ptrdiff_t)k->src_w)
        x1 = (ptrdiff_t)k->src_w;
    if (x1 <= x0)
        return;
    size_t n = (size_t)(x1 - x0);
    size_t C = k->C, sc = k->sc;
    const uint8_t *s = row + (size_t)x0 * sc;
    size_t ps, cs; /* pixel stride and channel stride in the output */
    uint8_t *d;
    if (k->layout == FERRY_LAYOUT_HWC) {
        ps = C;
        cs = 1;
        d = k->dst + ((size_t)oy * k->W + (size_t)(x0 + k->ox)) * C;
    } else {
        ps = 1;
        cs = k->H * k->W;
        d = k->dst + (size_t)oy * k->W + (size_t)(x0 + k->ox);
    }
    int alpha = k->composite && (sc == 2 || sc == 4);
    if (C == sc && ps == C && !alpha && (sc == 1 || sc == 3)) {
        memcpy(d, s, n * sc);
        return;
    }
    for (size_t x = 0; x < n; x++, s += sc, d += ps) {
        unsigned r, g, b;
        if (sc <= 2) {
            r = g = b = s[0];
        } else {
            r = s[0];
            g = s[1];
            b = s[2];
        }
        if (C == 1) {
            unsigned l = sc <= 2 ? r : ferry__luma(r, g, b);
            if (alpha)
                l = blend(l, s[sc - 1], k->bg_gray);
            d[0] = (uint8_t)l;
        } else {
            if (alpha) {
                unsigned a = s[sc - 1];
                r = blend(r, a, k->bg[0]);
                g = blend(g, a, k->bg[1]);
                b = blend(b, a, k->bg[2]);
            }
            d[0] = (uint8_t)r;
            d[cs] = (uint8_t)g;
            d[2 * cs] = (uint8_t)b;
        }
    }
}

ferry_status ferry__image_place(const uint8_t *src, size_t sw, size_t sh, size_t sc,
                                const ferry_image_config *cfg, const ferry_sample_format *fmt,
                                uint8_t *dst, ferry_scratch *scratch, const char *name)
{
    ferry_row_sink k = {
        .dst = dst, .C = fmt->channels, .H = fmt->height, .W = fmt->width,
        .layout = fmt->layout, .src_w = sw, .sc = sc, .composite = cfg->alpha_composite,
        .bg = {cfg->background[0], cfg->background[1], cfg->background[2]},
        .bg_gray = ferry__luma(cfg->background[0], cfg->background[1], cfg->background[2]),
    };
    int same = sw == fmt->width && sh == fmt->height;
    if (!same && cfg->resize == FERRY_RESIZE_ERROR)
        return ferry_fail_at(FERRY_ERR_FORMAT, name ? name : "image",
                             "image is %zux%zu, samples are %zux%zu", sw, sh, fmt->width,
                             fmt->height);
    if (!same && cfg->resize == FERRY_RESIZE_BILINEAR) {
        /* Convert channels at the native size first, then resample once. */
        size_t bytes;
        if (!ferry_mul_size(sw * sh, fmt->channels, &bytes))
            return ferry_fail_at(FERRY_ERR_LIMIT, name ? name : "image", "%zux%zu is too large", sw,
                                 sh);
        ferry_status st = ferry__scratch_grow(&scratch->image, &scratch->image_cap, bytes);
        if (st != FERRY_OK)
            return st;
        k.dst = scratch->image;
        k.H = sh;
        k.W = sw;
        k.layout = FERRY_LAYOUT_HWC;
        for (size_t y = 0; y < sh; y++)
            ferry__sink_row(&k, y, src + y * sw * sc);
        return ferry__resize_bilinear(scratch->image, sw, sh, fmt->channels, dst, fmt->width,
                                      fmt->height, fmt->layout, scratch);
    }
    if (!same) {
        k.oy = ferry__center_offset(fmt->height, sh);
        k.ox = ferry__center_offset(fmt->width, sw);
        if (sw < fmt->width || sh < fmt->height)
            memset(dst, 0, fmt->channels * fmt->height * fmt->width);
    }
    for (size_t y = 0; y < sh; y++)
        ferry__sink_row(&k, y, src + y * sw * sc);
    return FERRY_OK;
}

/* out(y, x) = in(y + sy, x + sx), zero outside; rows of w elements of e bytes. */
static void shift_plane(uint8_t *p, size_t h, size_t w, size_t e, ptrdiff_t sy, ptrdiff_t sx)
{
    size_t rb = w * e;
    for (size_t i = 0; i < h; i++) {
        /* Walk rows so each source row is read before it is overwritten. */
        size_t y = sy >= 0 ? i : h - 1 - i;
        ptrdiff_t ys = (ptrdiff_t)y + sy;
        uint8_t *d = p + y * rb;
        if (ys < 0 || ys >= (ptrdiff_t)h) {
            memset(d, 0, rb);
            continue;
        }
        const uint8_t *s = p + (size_t)ys * rb;
        size_t a = (size_t)(sx < 0 ? -sx : sx);
        if (a >= w) {
            memset(d, 0, rb);
        } else if (sx >= 0) {
            memmove(d, s + a * e, (w - a) * e);
            memset(d + (w - a) * e, 0, a * e);
        } else {
            memmove(d + a * e, s, (w - a) * e);
            memset(d, 0, a * e);
        }
    }
}

static void flip_plane(uint8_t *p, size_t h, size_t w, size_t e)
{
    for (size_t y = 0; y < h; y++) {
        uint8_t *row = p + y * w * e;
        for (size_t a = 0, b = w - 1; a < b; a++, b--)
            for (size_t c = 0; c < e; c++) {
                uint8_t t = row[a * e + c];
                row[a * e + c] = row[b * e + c];
                row[b * e + c] = t;
            }
    }
}

void ferry__image_place_geom(const ferry_image_config *cfg, size_t w, size_t h,
                             const ferry_sample_format *fmt, ferry_image_geom *g)
{
    size_t W = fmt->width, H = fmt->height;
    if (w == W && h == H)
        return; /* placed as it is, whatever the mode */
    if (cfg->resize == FERRY_RESIZE_BILINEAR) {
        ferry__geom_box(g, 0, 0, (double)w, (double)h, W, H);
        return;
    }
    /* Centred (FERRY_RESIZE_CENTER_CROP; FERRY_RESIZE_ERROR fails before). */
    g->out_w = W;
    g->out_h = H;
    ferry__geom_shift(g, -ferry__center_offset(H, h), -ferry__center_offset(W, w));
    ferry__geom_canvas(g);
}

void ferry__augment_geom(const ferry_image_config *cfg, const ferry_sample_format *fmt,
                         uint8_t *img, ferry_rng *r, ferry_image_geom *g)
{
    if (!fmt->width || !fmt->height)
        return;
    size_t C = fmt->channels, H = fmt->height, W = fmt->width;
    size_t planes = fmt->layout == FERRY_LAYOUT_HWC ? 1 : C;
    size_t e = fmt->layout == FERRY_LAYOUT_HWC ? C : 1;
    if (cfg->random_crop_pad) {
        size_t p = cfg->random_crop_pad;
        ptrdiff_t sy = (ptrdiff_t)ferry_rng_below(r, 2 * p + 1) - (ptrdiff_t)p;
        ptrdiff_t sx = (ptrdiff_t)ferry_rng_below(r, 2 * p + 1) - (ptrdiff_t)p;
        for (size_t c = 0; c < planes; c++)
            shift_plane(img + c * H * W, H, W, e, sy, sx);
        if (g)
            ferry__geom_shift(g, sy, sx);
    }
    if (cfg->random_hflip && (ferry_rng_u32(r) & 1)) {
        for (size_t c = 0; c < planes; c++)
            flip_plane(img + c * H * W, H, W, e);
        if (g)
            ferry__geom_flip(g);
    }
    ferry__jitter_rng(cfg, fmt, img, r);
}

void ferry__augment_rng(const ferry_image_config *cfg, const ferry_sample_format *fmt,
                        uint8_t *img, ferry_rng *r)
{
    ferry__augment_geom(cfg, fmt, img, r, NULL);
}

void ferry__augment(const ferry_image_config *cfg, const ferry_sample_format *fmt, uint8_t *img,
                    size_t index, const ferry_sample_ctx *ctx)
{
    const double *j = cfg->color_jitter;
    if (!ctx || !ctx->train ||
        (!cfg->random_crop_pad && !cfg->random_hflip && !(j[0] > 0 || j[1] > 0 || j[2] > 0 || j[3] > 0)))
        return;
    ferry_rng r;
    ferry_rng_init(&r, ctx->seed, FERRY_RNG_AUGMENT | ctx->epoch, (uint64_t)index);
    ferry__augment_rng(cfg, fmt, img, &r);
}

/* The ImageNet recipe's crop: torchvision's RandomResizedCrop box drawn from the
 * sample's augmentation stream, or the box Resize(shorter side) + CenterCrop
 * takes from the original image; then the decode of just that part (JPEG) or
 * of the whole image (PNG, or a JPEG to be turned first) and PIL's resample of
 * the box to the output size. */
#include <math.h>

#include "common/error.h"
#include "ferry/rng.h"
#include "dataset/image/image.h"
#include "dataset/image/geom.h"

/* Uniform in [a, b), as torch's uniform_ (53 random bits). */
static double uniform(ferry_rng *r, double a, double b)
{
    return a + (b - a) * ((double)(ferry_rng_u64(r) >> 11) * 0x1p-53);
}

/* torchvision 0.14 RandomResizedCrop.get_params, line for line. rint rounds
 * half to even, as Python's round does. */
void ferry__crop_random(const ferry_image_config *cfg, size_t w, size_t h, ferry_rng *r,
                        ferry_crop_box *out)
{
    double area = (double)w * (double)h;
    double lr0 = log(cfg->crop_ratio[0]), lr1 = log(cfg->crop_ratio[1]);
    size_t cw = 0, ch = 0, top = 0, left = 0;
    int found = 0;
    for (int attempt = 0; attempt < 10 && !found; attempt++) {
        double target = area * uniform(r, cfg->crop_scale[0], cfg->crop_scale[1]);
        double aspect = exp(uniform(r, lr0, lr1));
        double tw = rint(sqrt(target * aspect)), th = rint(sqrt(target / aspect));
        if (tw > 0 && tw <= (double)w && th > 0 && th <= (double)h) {
            cw = (size_t)tw;
            ch = (size_t)th;
            top = (size_t)ferry_rng_below(r, h - ch + 1);
            left = (size_t)ferry_rng_below(r, w - cw + 1);
            found = 1;
        }
    }
    if (!found) {
        /* The centre crop of the image's ratio clamped to the range. */
        double in_ratio = (double)w / (double)h;
        if (in_ratio < cfg->crop_ratio[0]) {
            cw = w;
            ch = (size_t)rint((double)w / cfg->crop_ratio[0]);
        } else if (in_ratio > cfg->crop_ratio[1]) {
            ch = h;
            cw = (size_t)rint((double)h * cfg->crop_ratio[1]);
        } else {
            cw = w;
            ch = h;
        }
        /* A ratio far outside the range can round to 0 or past the image. */
        cw = cw < 1 ? 1 : cw > w ? w : cw;
        ch = ch < 1 ? 1 : ch > h ? h : ch;
        top = (h - ch) / 2;
        left = (w - cw) / 2;
    }
    *out = (ferry_crop_box){
        .x0 = (double)left, .y0 = (double)top, .x1 = (double)(left + cw), .y1 = (double)(top + ch),
        .cx0 = left, .cy0 = top, .cx1 = left + cw, .cy1 = top + ch,
    };
}

void ferry__crop_center(const ferry_image_config *cfg, size_t w, size_t h, size_t W, size_t H,
                        ferry_crop_box *out)
{
    /* torchvision's Resize(S): the shorter side to S, the longer to
     * int(S * long / short); then CenterCrop's int(round((size - crop) / 2)). */
    size_t S = cfg->resize_shorter, nw, nh;
    if (w <= h) {
        nw = S;
        nh = (size_t)((double)S * (double)h / (double)w);
    } else {
        nh = S;
        nw = (size_t)((double)S * (double)w / (double)h);
    }
    double top = nh > H ? rint((double)(nh - H) / 2.0) : 0;
    double left = nw > W ? rint((double)(nw - W) / 2.0) : 0;
    double fx = (double)w / (double)nw, fy = (double)h / (double)nh;
    *out = (ferry_crop_box){
        .x0 = left * fx, .y0 = top * fy, .x1 = (left + (double)W) * fx, .y1 = (top + (double)H) * fy,
        .cx0 = 0, .cy0 = 0, .cx1 = w, .cy1 = h,
    };
}

ferry_status ferry__image_decode_box(const void *data, size_t n, const ferry_image_config *cfg,
                                     const ferry_sample_format *fmt, ferry_scratch *scratch,
                                     const char *name, void *dst, const ferry_crop_box *box,
                                     double *resize_s)
{
    ferry_image_info info = {0};
    ferry_status st = ferry__image_header(data, n, name, &info);
    if (st != FERRY_OK)
        return st;
    const char *who = name ? name : info.kind == FERRY_IMAGE_JPEG ? "JPEG" : "PNG";
    if ((st = ferry__image_check_limits(&info, n, &cfg->limits, who)) != FERRY_OK)
        return st;
    ferry_scratch *own = NULL;
    if (!scratch) {
        if ((st = ferry_scratch_create(&own)) != FERRY_OK)
            return st;
        scratch = own;
    }
    size_t w, h, C = fmt->channels;
    ferry__image_oriented_size(cfg, &info, &w, &h);
    /* The resize's work for the largest box this image can give, up front. */
    ferry_crop_box whole = {.x0 = 0, .y0 = 0, .x1 = (double)w, .y1 = (double)h, .cx1 = w, .cy1 = h};
    size_t work = ferry__resize_work_bytes(h, C, &whole, fmt->width, fmt->height);
    uint8_t *wb = (uint8_t *)scratch->work;
    if (!work)
        st = ferry_fail_at(FERRY_ERR_LIMIT, who, "resize %zux%zu -> %zux%zu is too large", w, h,
                           fmt->width, fmt->height);
    else if ((st = ferry__scratch_grow(&wb, &scratch->work_cap, work)) != FERRY_OK)
        st = ferry_fail_at(st, who, "out of memory for the resize");
    scratch->work = (float *)wb;

    const uint8_t *px = NULL;
    size_t rw = w, rh = h;
    ferry_crop_box rb = *box;
    if (st == FERRY_OK && info.kind == FERRY_IMAGE_JPEG)
        st = ferry__jpeg_decode_region(data, n, cfg, fmt, scratch, name, box, &px, &rw, &rh, &rb);
    else if (st == FERRY_OK)
        st = FERRY_ERR_UNSUPPORTED;
    if (st == FERRY_ERR_UNSUPPORTED) {
        /* The whole image at its own size, in the output's channels. */
        ferry_image_config whole_cfg = *cfg;
        whole_cfg.crop = FERRY_CROP_NONE;
        whole_cfg.resize = FERRY_RESIZE_ERROR;
        ferry_sample_format f = {.channels = C, .height = h, .width = w,
                                 .layout = FERRY_LAYOUT_HWC, .dtype = FERRY_DTYPE_U8};
        st = ferry__scratch_grow(&scratch->crop, &scratch->crop_cap, w * h * C);
        if (st != FERRY_OK)
            st = ferry_fail_at(st, who, "out of memory for the decoded image");
        else
            st = ferry__image_decode(data, n, &whole_cfg, &f, scratch, name, scratch->crop);
        px = scratch->crop;
        rw = w;
        rh = h;
        rb = *box;
    }
    if (st == FERRY_OK) {
        double t0 = resize_s ? ferry_thread_cpu_now() : 0;
        st = ferry__resize_box(px, rw, rh, C, &rb, dst, fmt->width, fmt->height, fmt->layout,
                               scratch);
        if (resize_s)
            *resize_s = ferry_thread_cpu_now() - t0;
    }
    ferry_scratch_destroy(own);
    return st;
}

ferry_status ferry__image_decode_crop_geom(const void *data, size_t n,
                                           const ferry_image_config *cfg,
                                           const ferry_sample_format *fmt,
                                           ferry_scratch *scratch, const char *name, void *dst,
                                           ferry_rng *r, ferry_image_geom *g, double *resize_s)
{
    ferry_image_info info = {0};
    ferry_status st = ferry__image_header(data, n, name, &info);
    if (st != FERRY_OK)
        return st;
    size_t w, h;
    ferry__image_oriented_size(cfg, &info, &w, &h);
    ferry_crop_box box;
    if (r && cfg->crop == FERRY_CROP_RANDOM_RESIZED)
        ferry__crop_random(cfg, w, h, r, &box);
    else
        ferry__crop_center(cfg, w, h, fmt->width, fmt->height, &box);
    st = ferry__image_decode_box(data, n, cfg, fmt, scratch, name, dst, &box, resize_s);
    if (st == FERRY_OK && g) {
        /* The box resampled, in the oriented image's pixels, whatever DCT
         * scale decoded it: the region decode maps it with the scale. */
        ferry__geom_start(g, info.width, info.height,
                          cfg->exif_orientation ? info.orientation : 1);
        ferry__geom_box(g, box.x0, box.y0, box.x1, box.y1, fmt->width, fmt->height);
    }
    return st;
}

ferry_status ferry__image_decode_crop(const void *data, size_t n, const ferry_image_config *cfg,
                                      const ferry_sample_format *fmt, ferry_scratch *scratch,
                                      const char *name, void *dst, ferry_rng *r, double *resize_s)
{
    return ferry__image_decode_crop_geom(data, n, cfg, fmt, scratch, name, dst, r, NULL,
                                         resize_s);
}

/* Internal to src/dataset/image and the dataset kinds that hold images (files/,
 * shards/): decoding PNG and JPEG, the transforms (resize, crop, jitter, flip),
 * the pixel routines and the scratch arena libpng and libjpeg allocate from.
 * Nothing here is public API. */
#ifndef FERRY_DATASET_IMAGE_IMAGE_H
#define FERRY_DATASET_IMAGE_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dataset/core/internal.h"
#include "ferry/dataset.h"

/* ---- the scratch arena (scratch.c): libpng's and libjpeg's allocations ---- */
void *ferry__arena_alloc(ferry_scratch *s, size_t n);
void ferry__arena_free(ferry_scratch *s, void *p);
void ferry__arena_reset(ferry_scratch *s);
/* Makes the next reset grow the arena to at least bytes. */
void ferry__arena_reserve(ferry_scratch *s, size_t bytes);

/* ---- pixels (transform.c) ---- */

/* The output format of an image of size (w, h) with src_channels (1..4) under cfg
 * (0 fields of cfg take the image's). */
void ferry__image_resolve(const ferry_image_config *cfg, size_t w, size_t h, size_t src_channels,
                          ferry_sample_format *out);

/* Where decoded rows go: the output image and where the source sits in it. */
typedef struct ferry_row_sink {
    uint8_t *dst;
    size_t C, H, W;        /* output channels (1 or 3), size */
    ferry_layout layout;
    ptrdiff_t oy, ox;      /* output (y, x) = source (y + oy, x + ox) */
    size_t src_w;          /* source row width in pixels */
    size_t sc;             /* source channels: 1 gray, 2 GA, 3 RGB, 4 RGBA */
    int composite;         /* composite alpha on bg (else it is ignored) */
    uint8_t bg[3], bg_gray;
} ferry_row_sink;

/* Converts source row y (8-bit, sc channels) into the sink, clipped to the output. */
void ferry__sink_row(const ferry_row_sink *k, size_t y, const uint8_t *row);

/* Puts a whole source image (8-bit HWC, sc channels, sw x sh) into dst in format
 * fmt, resizing or cropping per cfg->resize. name is for messages. */
ferry_status ferry__image_place(const uint8_t *src, size_t sw, size_t sh, size_t sc,
                                const ferry_image_config *cfg, const ferry_sample_format *fmt,
                                uint8_t *dst, ferry_scratch *scratch, const char *name);

/* Bilinear (triangle filter, support widened when shrinking) resize of an 8-bit HWC
 * image with C channels into dst (layout given). */
ferry_status ferry__resize_bilinear(const uint8_t *src, size_t sw, size_t sh, size_t C,
                                    uint8_t *dst, size_t dw, size_t dh, ferry_layout layout,
                                    ferry_scratch *scratch);

/* The random augmentations of cfg applied in place; nothing when ctx is NULL or
 * !ctx->train. */
void ferry__augment(const ferry_image_config *cfg, const ferry_sample_format *fmt, uint8_t *img,
                    size_t index, const ferry_sample_ctx *ctx);
/* The same, drawing from r (the sample's augmentation stream, maybe already
 * drawn from by the crop). */
struct ferry_rng;
void ferry__augment_rng(const ferry_image_config *cfg, const ferry_sample_format *fmt,
                        uint8_t *img, struct ferry_rng *r);

/* ---- the ImageNet recipe's crop (crop.c) and PIL's resample (resize.c) ----
 * A source box in pixels of the (oriented) image, fractional for Resize +
 * CenterCrop, and the rectangle the filter's taps are kept in: the box itself
 * for RandomResizedCrop (torchvision crops, then resizes), the whole image for
 * Resize + CenterCrop (PIL resizes the whole image, then it is cropped). */
typedef struct ferry_crop_box {
    double x0, y0, x1, y1;
    size_t cx0, cy0, cx1, cy1;
} ferry_crop_box;
/* torchvision's RandomResizedCrop.get_params on a w x h image, from r. */
void ferry__crop_random(const ferry_image_config *cfg, size_t w, size_t h, struct ferry_rng *r,
                        ferry_crop_box *out);
/* Resize(cfg->resize_shorter) + CenterCrop(H x W) as one box on a w x h image. */
void ferry__crop_center(const ferry_image_config *cfg, size_t w, size_t h, size_t W, size_t H,
                        ferry_crop_box *out);
/* Resamples box of src (sw x sh, C channels, HWC) into dst (dw x dh, layout). */
ferry_status ferry__resize_box(const uint8_t *src, size_t sw, size_t sh, size_t C,
                               const ferry_crop_box *box, uint8_t *dst, size_t dw, size_t dh,
                               ferry_layout layout, ferry_scratch *scratch);
/* The work floats ferry__resize_box needs with at most sh source rows; 0 on overflow. */
size_t ferry__resize_work_bytes(size_t sh, size_t C, const ferry_crop_box *box, size_t dw,
                                size_t dh);
/* Decodes the part of an image (PNG or JPEG) that box needs and resizes it into
 * dst (format fmt). *resize_s (may be NULL) gets the seconds spent resizing. */
ferry_status ferry__image_decode_box(const void *data, size_t n, const ferry_image_config *cfg,
                                     const ferry_sample_format *fmt, ferry_scratch *scratch,
                                     const char *name, void *dst, const ferry_crop_box *box,
                                     double *resize_s);
/* cfg->crop's box for this image (RandomResizedCrop from r when r is not NULL,
 * else the centre box), then ferry__image_decode_box. */
ferry_status ferry__image_decode_crop(const void *data, size_t n, const ferry_image_config *cfg,
                                      const ferry_sample_format *fmt, ferry_scratch *scratch,
                                      const char *name, void *dst, struct ferry_rng *r,
                                      double *resize_s);

/* ---- the geometry a sample's transforms applied (dataset/image/geom.h) ----
 * The variants below record it (g may be NULL) on the path that moves the
 * pixels, with the draws that move them: boxes follow through boxes.h. */
struct ferry_image_geom;
/* ferry__image_decode_crop, recording the orientation and the box resampled. */
ferry_status ferry__image_decode_crop_geom(const void *data, size_t n,
                                           const ferry_image_config *cfg,
                                           const ferry_sample_format *fmt,
                                           ferry_scratch *scratch, const char *name, void *dst,
                                           struct ferry_rng *r, struct ferry_image_geom *g,
                                           double *resize_s);
/* ferry__augment_rng, recording the shift of the padded crop and the flip. */
void ferry__augment_geom(const ferry_image_config *cfg, const ferry_sample_format *fmt,
                         uint8_t *img, struct ferry_rng *r, struct ferry_image_geom *g);
/* What ferry__image_place (and the decoders' row-by-row placement) does to an
 * oriented w x h image under cfg->resize, on top of g's orientation. */
void ferry__image_place_geom(const ferry_image_config *cfg, size_t w, size_t h,
                             const ferry_sample_format *fmt, struct ferry_image_geom *g);

/* ColorJitter (jitter.c): the adjustments order[0..3] (0 brightness, 1
 * contrast, 2 saturation, 3 hue; -1 ends the list early) with factor[] (hue:
 * the shift in [-0.5, 0.5]), in place, as PIL computes them. */
void ferry__jitter_apply(uint8_t *img, const ferry_sample_format *fmt, const int order[4],
                         const double factor[4]);
/* cfg->color_jitter's order and factors drawn from r, then applied. */
void ferry__jitter_rng(const ferry_image_config *cfg, const ferry_sample_format *fmt, uint8_t *img,
                       struct ferry_rng *r);

/* ITU-R 601 luma as PIL computes it ((19595 R + 38470 G + 7471 B + 2^15) >> 16). */
static inline uint8_t ferry__luma(unsigned r, unsigned g, unsigned b)
{
    return (uint8_t)((r * 19595u + g * 38470u + b * 7471u + 0x8000u) >> 16);
}

/* ---- PNG (png_decode.c) ---- */
/* ferry_png_info with errors prefixed by name ("PNG" when NULL). */
ferry_status ferry__png_header(const uint8_t *data, size_t n, const char *name, ferry_image_info *out);
/* Checks header limits first; then decodes. Errors name `name`. */
ferry_status ferry__png_decode(const void *data, size_t n, const ferry_image_config *cfg,
                               const ferry_sample_format *fmt, ferry_scratch *scratch,
                               const char *name, void *dst);
/* One image sample of a file-backed dataset: read() puts the image's bytes in
 * s->file (*n of them), then they are decoded into dst and augmented, and the
 * stage times go to ctx->timing. With no scratch in ctx, one is made for the
 * call. The image folders and the shards differ only in read(). */
typedef ferry_status (*ferry_image_read_fn)(const void *src, size_t index, ferry_scratch *s, size_t *n);
ferry_status ferry__image_sample(const ferry_dataset *ds, const ferry_image_config *cfg, size_t index,
                                 ferry_image_read_fn read, const void *src, const char *name,
                                 void *dst, const ferry_sample_ctx *ctx);
/* The decode and augmentation of ferry__image_sample, of the n bytes at data,
 * into dst (format fmt), timed into ctx->timing; the geometry in *g (may be
 * NULL). s is the scratch (not NULL). */
ferry_status ferry__image_sample_bytes(const ferry_image_config *cfg,
                                       const ferry_sample_format *fmt, ferry_scratch *s,
                                       const uint8_t *data, size_t n, size_t index,
                                       const char *name, void *dst, const ferry_sample_ctx *ctx,
                                       struct ferry_image_geom *g);
/* The same as ferry__image_sample, recording in *g (may be NULL) the geometry
 * the pixels went through. */
ferry_status ferry__image_sample_geom(const ferry_dataset *ds, const ferry_image_config *cfg,
                                      size_t index, ferry_image_read_fn read, const void *src,
                                      const char *name, void *dst, const ferry_sample_ctx *ctx,
                                      struct ferry_image_geom *g);

/* ---- JPEG (jpeg_header.c, jpeg_decode.c) ---- */
struct ferry_jpeg_state;
void ferry__jpeg_state_free(struct ferry_jpeg_state *st);
/* ferry_jpeg_info with errors prefixed by name ("JPEG" when NULL). */
ferry_status ferry__jpeg_header(const uint8_t *data, size_t n, const char *name, ferry_image_info *out);
/* As ferry__png_decode, for a JPEG. */
ferry_status ferry__jpeg_decode(const void *data, size_t n, const ferry_image_config *cfg,
                                const ferry_sample_format *fmt, ferry_scratch *scratch,
                                const char *name, void *dst);
/* Decodes the region box needs, at the smallest DCT scale that keeps the box at
 * least fmt's size (unless cfg->crop_full_scale), as fmt->channels HWC in one
 * of s's buffers: *px, *rw x *rh pixels, and *rbox the box in its pixels. Returns
 * FERRY_ERR_UNSUPPORTED (no message) when the image needs the whole-image path
 * (an EXIF orientation to apply). */
ferry_status ferry__jpeg_decode_region(const void *data, size_t n, const ferry_image_config *cfg,
                                       const ferry_sample_format *fmt, ferry_scratch *s,
                                       const char *name, const ferry_crop_box *box,
                                       const uint8_t **px, size_t *rw, size_t *rh,
                                       ferry_crop_box *rbox);

/* ---- any image (image_decode.c): PNG or JPEG, told by the first bytes ---- */
bool ferry__is_jpeg(const uint8_t *data, size_t n);
/* ferry_image_probe with errors prefixed by name ("image" when NULL). */
ferry_status ferry__image_header(const uint8_t *data, size_t n, const char *name, ferry_image_info *out);
ferry_status ferry__image_decode(const void *data, size_t n, const ferry_image_config *cfg,
                                 const ferry_sample_format *fmt, ferry_scratch *scratch,
                                 const char *name, void *dst);
/* What a public decode of data checks before it decodes (image_decode.c):
 * the config (into *c), the header (kind FERRY_IMAGE_JPEG: a JPEG's only;
 * < 0: either), the limits, and that dst_bytes holds the output, whose
 * format goes to *fmt. Errors name `name` (or the kind). */
ferry_status ferry__image_plan(int kind, const void *data, size_t n, const ferry_image_config *cfg,
                               const char *name, size_t dst_bytes, ferry_image_config *c,
                               ferry_sample_format *fmt);
/* The size info's image has once cfg's EXIF handling is applied. */
static inline void ferry__image_oriented_size(const ferry_image_config *cfg,
                                              const ferry_image_info *info, size_t *w, size_t *h)
{
    bool swap = cfg->exif_orientation && info->orientation >= 5;
    *w = swap ? info->height : info->width;
    *h = swap ? info->width : info->height;
}
/* The size and file-size limits, before anything large is allocated: FERRY_ERR_LIMIT. */
ferry_status ferry__image_check_limits(const ferry_image_info *info, size_t file_bytes,
                                       const ferry_image_limits *lim, const char *name);
/* Whether a file name is an image's by its extension: .png, .jpg, .jpeg, any case. */
bool ferry__is_image_name(const char *name);

/* The output format of a dataset of image files (folders, list files, shards)
 * under cfg, the rule ferry_image_config states: height and width 0 take (w, h),
 * the images' one size, and then channels 0 is 1 when they are all gray (gray),
 * else 3; with the size set, channels 0 is 3 (RGB) whatever the files hold. */
void ferry__image_dataset_format(const ferry_image_config *cfg, size_t w, size_t h, bool gray,
                                 ferry_sample_format *out);
/* Logs once that channels 0 decodes gray images as RGB (what says "gray" is
 * the caller's: a count, or the image it saw). */
void ferry__warn_gray_as_rgb(const char *what, const char *gray);

/* Validates a user's config (NULL: defaults). */
ferry_status ferry__image_config_check(const ferry_image_config *cfg, ferry_image_config *out);


#endif

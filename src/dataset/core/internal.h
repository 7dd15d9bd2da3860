/* Internal to src/dataset: the scratch buffers, the dataset vtable every kind of
 * dataset implements, and the pixel routines shared by the PNG, IDX and transform
 * code. Nothing here is public API. */
#ifndef FERRY_DATASET_INTERNAL_H
#define FERRY_DATASET_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "common/error.h" /* ferry_now */
#include "dataset/core/caps.h"
#include "ferry/dataset.h"

/* Seconds on a monotonic clock, for ctx->timing; 0 when timing is off. */
static inline double ferry__clock(const ferry_sample_ctx *ctx)
{
    return ctx && ctx->timing ? ferry_now() : 0;
}

/* ---- scratch: per-thread buffers that grow and are reused ---- */
typedef struct ferry_arena_block ferry_arena_block;

struct ferry_scratch {
    uint8_t *file;      size_t file_cap;  /* the bytes of the file being decoded */
    uint8_t *image;     size_t image_cap; /* a whole decoded image (interlaced, resize source) */
    uint8_t *row;       size_t row_cap;   /* one row as libpng hands it out */
    float *work;        size_t work_cap;  /* resize intermediate and filter weights (floats) */
    uint8_t *decoded;   size_t decoded_cap; /* a whole JPEG as libjpeg gives it (turn, resize) */
    uint8_t *coef;      size_t coef_cap;  /* libjpeg's virtual arrays (progressive coefficients) */
    uint8_t *crop;      size_t crop_cap;  /* the source region a crop is resized from */
    struct ferry_jpeg_state *jpeg;        /* the JPEG decompressor, made at the first JPEG */
    /* libpng's own allocations come from this arena, reset per decode, so that a
     * warm scratch makes decoding allocation-free. Past the arena they go to the
     * host allocator (overflow list) and the arena grows to the peak next time. */
    uint8_t *arena;     size_t arena_cap, arena_used, arena_over, arena_peak;
    ferry_arena_block *overflow;
};

/* Makes buf hold at least n bytes (contents not kept). */
ferry_status ferry__scratch_grow(uint8_t **buf, size_t *cap, size_t n);
/* ctx's scratch in *s, or one made for the call (also in *own, for
 * ferry_scratch_destroy after; NULL when ctx had one). */
static inline ferry_status ferry__sample_scratch(const ferry_sample_ctx *ctx, ferry_scratch **s,
                                                 ferry_scratch **own)
{
    *own = NULL;
    *s = ctx ? ctx->scratch : NULL;
    if (*s)
        return FERRY_OK;
    ferry_status st = ferry_scratch_create(own);
    *s = *own;
    return st;
}
/* Reads a whole file into s->file. Over max_bytes is FERRY_ERR_LIMIT; a file that
 * cannot be read (missing, a dangling link, no permission, not a regular file) is
 * FERRY_ERR_IO "path: reason". Never blocks on a FIFO. */
ferry_status ferry__scratch_read_file(ferry_scratch *s, const char *path, size_t max_bytes,
                                      size_t *n);

/* The same, reading at most head bytes (*n of them); *file_bytes (may be NULL)
 * gets the file's size. For reading headers without the whole file. */
ferry_status ferry__scratch_read_head(ferry_scratch *s, const char *path, size_t max_bytes,
                                      size_t head, size_t *n, size_t *file_bytes);

/* Why a file cannot be read, in words for "path: reason" messages (scratch.c). */
/* mode is not a regular file's: "is a directory, not a file", "is a FIFO ...". */
const char *ferry__not_regular_reason(mode_t mode);
/* open() or stat() of path failed with err: strerror, or "dangling symbolic link". */
const char *ferry__open_error_reason(const char *path, int err);
/* NULL when path (links followed) is a regular file, else the reason it is not
 * readable as one. One stat; a permission problem shows only when it is opened. */
const char *ferry__path_problem(const char *path);
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
/* The same, recording in *g (may be NULL) the geometry the pixels went through. */
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

/* ---- datasets (dataset.c) ---- */
typedef struct ferry_dataset_vtable {
    ferry_status (*get)(const ferry_dataset *ds, size_t index, void *dst,
                        const ferry_sample_ctx *ctx, int64_t *label);
    ferry_status (*label)(const ferry_dataset *ds, size_t index, int64_t *label);
    const char *(*name)(const ferry_dataset *ds, size_t index);
    void (*destroy)(ferry_dataset *ds);
    /* Optional capabilities (dataset/core/caps.h says what each means): NULL or
     * false where a kind has none. Views forward each to their base. */
    bool uses_scratch;
    size_t (*shard_ends)(const ferry_dataset *ds, const size_t **ends, const size_t **seq);
    void (*set_readahead)(ferry_dataset *ds, size_t bytes);
    ferry_status (*plan_reads)(ferry_dataset *ds, const size_t *idx, size_t n, size_t head);
    size_t (*gzip_shards)(const ferry_dataset *ds);
} ferry_dataset_vtable;

struct ferry_dataset {
    atomic_size_t refs;
    const ferry_dataset_vtable *vt;
    size_t len;
    ferry_sample_format format;
    size_t sample_bytes;
    size_t num_classes;
    char **class_names;    /* num_classes entries or NULL; owned */
    void *impl;            /* the kind's own state, freed by vt->destroy */
    size_t unreadable;     /* entries found unreadable at create (ferry_dataset_unreadable_count) */
    char unreadable_first[1024]; /* the first of them: "path: reason" */
    /* Image datasets whose size the config left 0: the image it was taken
     * from. Every image loaded must then have that size (no silent resize). */
    char size_from[512];
    /* Shards only, with channels also 0: the channels that image's kind gave
     * (1 gray, 3 colour), which every image loaded must then give too; 0: any. */
    size_t channels_from;
};

/* A new dataset with one reference; impl is owned from here on (vt->destroy is
 * called on it even when this fails). */
/* Puts the sample's name (vt->name, or "sample N" without one) in front of
 * the current message unless it is already its subject (ferry_fail_named);
 * returns st. ferry_dataset_get calls it on every failure, so its message
 * names the sample exactly once (docs/API_ERRORS.md, "Messages"). */
ferry_status ferry__name_sample(const ferry_dataset *ds, size_t index, ferry_status st);

ferry_status ferry__dataset_new(const ferry_dataset_vtable *vt, void *impl, size_t len,
                                const ferry_sample_format *fmt, size_t num_classes,
                                ferry_dataset **out);

/* Image files (image_files.c): the shared core of image-folder and list-file. Takes
 * ownership of paths (each ferry_host_strdup'd), labels and class_names, even on failure.
 * bad_count entries of the caller's listing (bad_first: the first, "path: reason")
 * cannot be read: kept in the dataset and logged once it exists (listing names
 * what was listed, for the message). Without any, the files passed over while
 * taking the image size from the first readable file are. */
ferry_status ferry__image_files_create(char **paths, int64_t *labels, size_t n,
                                       char **class_names, size_t num_classes,
                                       const ferry_image_config *cfg, const char *listing,
                                       size_t bad_count, const char *bad_first,
                                       ferry_dataset **out);

/* A growing list of owned strings (str_list.c): folder and shard listings. */
typedef struct ferry_str_list {
    char **v;
    size_t n, cap;
} ferry_str_list;
void ferry__str_list_free(ferry_str_list *l);
/* Takes s (ferry_host_malloc'd); NULL s means its allocation failed. */
ferry_status ferry__str_list_push(ferry_str_list *l, char *s);

/* The capabilities the loader asks about (shards, read plans, read-ahead,
 * scratch use): dataset/caps.h. */
/* The gzip cache's counters; false when ds has no gzip shards. */
struct ferry_gz_cache_stats;
bool ferry__dataset_gz_stats(const ferry_dataset *ds, struct ferry_gz_cache_stats *out);

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

/* Library: libferry (pkg-config ferry); <ferry.h> includes this header. */
/* Datasets: a length, a sample format, labels, and "decode sample i into this
 * buffer", safe to call from many threads at once. Images are PNG (through libpng),
 * JPEG (through libjpeg-turbo) or IDX (MNIST / Fashion-MNIST); memory datasets use the caller's arrays. */
#ifndef FERRY_DATASET_H
#define FERRY_DATASET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ferry/export.h"
#include "ferry/fields.h"
#include "ferry/status.h"
#include "ferry/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ferry_layout {
    FERRY_LAYOUT_CHW = 0, /* planar: all of channel 0, then channel 1, ... */
    FERRY_LAYOUT_HWC = 1  /* interleaved */
} ferry_layout;

/* What one sample looks like once decoded: dtype u8 for images. */
typedef struct ferry_sample_format {
    size_t channels, height, width;
    ferry_layout layout;
    ferry_dtype dtype;
} ferry_sample_format;

/* channels * height * width * dtype size; 0 on overflow. */
FERRY_API size_t ferry_sample_format_bytes(const ferry_sample_format *f);

/* Per-thread reusable buffers (the file's bytes, a resize source image). One per
 * worker: after warm-up, decoding allocates nothing. NULL scratch means the call
 * allocates and frees its own. */
typedef struct ferry_scratch ferry_scratch;
FERRY_API ferry_status ferry_scratch_create(ferry_scratch **out);
FERRY_API void ferry_scratch_destroy(ferry_scratch *s);

/* CPU seconds per stage (the calling thread's CPU clock,
 * CLOCK_THREAD_CPUTIME_ID: time waiting on a disk, the network or a busy
 * core is not counted), added to by get() when ctx->timing is set. */
typedef struct ferry_sample_timing {
    double read_s;      /* reading the file into memory */
    double decode_s;    /* PNG/JPEG/IDX decoding into the output format */
    double transform_s; /* resize, crop, flip, channel conversion */
} ferry_sample_timing;

/* Everything a get() call needs besides the index. Random augmentation of sample
 * i draws from ferry_rng keyed by (seed, FERRY_RNG_AUGMENT | epoch, i). */
typedef struct ferry_sample_ctx {
    uint64_t seed;
    uint64_t epoch;
    bool train;                   /* false: no random augmentation (evaluation) */
    ferry_scratch *scratch;       /* may be NULL */
    ferry_sample_timing *timing;  /* may be NULL; if set, get() adds its stage times */
} ferry_sample_ctx;

/* ---- image decoding options, shared by every image dataset ---- */
typedef enum ferry_resize {
    FERRY_RESIZE_BILINEAR = 0, /* images of another size are resized (bilinear, area-aware when shrinking) */
    FERRY_RESIZE_CENTER_CROP,  /* cropped at the centre (and padded with 0 where smaller) */
    FERRY_RESIZE_ERROR         /* another size is FERRY_ERR_FORMAT naming both sizes */
} ferry_resize;

/* How the ImageNet recipe crops (ferry_image_config.crop). */
typedef enum ferry_crop {
    FERRY_CROP_NONE = 0,       /* the whole image, per cfg->resize */
    FERRY_CROP_RANDOM_RESIZED, /* RandomResizedCrop when training, else Resize + CenterCrop */
    FERRY_CROP_CENTER          /* Resize(resize_shorter) + CenterCrop, always */
} ferry_crop;

/* Limits on every image file, PNG and JPEG alike. */
typedef struct ferry_image_limits {
    size_t max_width, max_height; /* default 16384 each */
    size_t max_pixels;            /* default 64 Mpixel */
    size_t max_file_bytes;        /* default 256 MiB */
    size_t max_chunk_bytes;       /* PNG ancillary chunks; default 8 MiB */
} ferry_image_limits;

/* Every field's zero is its default: `(ferry_image_config){0}` (or a NULL
 * cfg) decodes at the images' own size and kind, with no augmentation.
 *
 * The format of a dataset of image files (folder, list file, shards) never
 * depends on which file sorts first:
 *   - height and width set: channels 0 is 3 (RGB, as torchvision's
 *     ImageFolder); every image is resized (cfg->resize) or cropped to the size.
 *   - height and width 0: every image must have one size, and channels 0 is 1
 *     when every image is gray, else 3. A folder or list file reads every
 *     image's header at create (its first 16 KiB): two sizes are FERRY_ERR_FORMAT
 *     naming a file of each; gray and colour mixed decode as RGB, said once
 *     (a warning through ferry_set_log's function). Shards are not read whole
 *     at create: the first image sets the size and kind, and an image of
 *     another size or kind fails by name when loaded (FERRY_ERR_FORMAT).
 * Nothing is ever resized or converted to a format ferry picked without
 * saying so. IDX files have one format, in their header: theirs. */
typedef struct ferry_image_config {
    /* Output format; 0: by the rule above. */
    size_t channels;          /* 1 (gray: ITU-R 601 luma, as PIL's convert('L')) or 3 */
    size_t height, width;
    ferry_layout layout;      /* default CHW */
    ferry_resize resize;
    bool alpha_composite;     /* false: drop alpha; true: composite on background */
    uint8_t background[3];    /* RGB, for alpha_composite; default black (zero) */
    /* Augmentation, applied in place in the caller's buffer when ctx->train. */
    size_t random_crop_pad;   /* > 0: pad by this much (zeros), then crop back at random */
    bool random_hflip;        /* flip left-right with probability 1/2 */
    /* torchvision's ColorJitter(brightness, contrast, saturation, hue), after
     * the flip: the four in a random order per sample, each factor drawn
     * from the sample's augmentation stream (brightness, contrast, saturation:
     * uniform in [max(0, 1 - x), 1 + x]; hue: in [-x, x], x at most 0.5), each
     * computed as PIL does. 0: that adjustment off. Saturation and hue leave
     * gray images unchanged, as in PIL. */
    double color_jitter[4];
    /* JPEG: turn the image as its EXIF Orientation tag says before anything
     * else (PIL's ImageOps.exif_transpose). Default false: the tag is ignored,
     * as PIL's Image.open and torchvision's ImageFolder ignore it. */
    bool exif_orientation;
    /* The ImageNet recipe, to height x width (both must be set; cfg->resize is
     * then unused). FERRY_CROP_RANDOM_RESIZED: with ctx->train, torchvision's
     * RandomResizedCrop(scale, ratio) drawn from the sample's augmentation
     * stream; without, Resize(resize_shorter) + CenterCrop as for evaluation.
     * FERRY_CROP_CENTER: always Resize + CenterCrop. The crop is resized with
     * PIL's antialiased bilinear filter. JPEGs decode only the crop's rows and
     * columns, at the smallest DCT scale (1/8 to 1) that keeps the crop at
     * least the output size (docs/DESIGN.md states the cost in PSNR). */
    ferry_crop crop;
    double crop_scale[2];   /* area fraction range; {0, 0}: {0.08, 1} */
    double crop_ratio[2];   /* aspect ratio (width / height) range; {0, 0}: {3/4, 4/3} */
    size_t resize_shorter;  /* the shorter side before the centre crop; 0: 256/224 of
                             * the larger of height and width, rounded */
    bool crop_full_scale;   /* JPEG: never decode at a reduced DCT scale */
    /* Shards read as fields (ferry_dataset_shards_fields) with an image
     * member: true declares the member .boxes.npy (f32 [K, 4], x0 y0 x1 y1 in
     * the stored image's pixels) the image's boxes, and each npy member listed
     * after it with one or two dimensions and as many rows at most as
     * following them (per-box labels, scores): all move with the image's
     * crop, resize, flip and turn (docs/BOXES.md). Default false: arrays as
     * stored. */
    bool boxes_follow;
    /* Boxes that follow the image (ferry_image_decode_boxes, docs/BOXES.md):
     * a box left with less than this fraction of its area once clipped to the
     * output is dropped with its per-box fields. 0 to 1; default (0): only
     * boxes with no area left. */
    double box_min_area_frac;
    ferry_image_limits limits;
    /* Compressed shards (.tar.gz) only: bytes of decompressed images held for
     * a later read, so that a shard is decompressed once however its samples
     * are ordered (in streaming mode: the shuffle buffer's images). The most
     * held at once, allocated at create (and no more than all the gzip
     * shards' images take); default (0) 256 MiB. */
    size_t shard_cache_bytes;
    /* Shards: keep each shard's index beside it (SHARD.ferry-index), used while
     * the shard's size and modification time are unchanged, so that create
     * need not read every header (or decompress a gzip shard) again. A folder
     * that cannot be written is a warning, not an error. Default false. */
    bool shard_index_cache;
    /* Shards named by URL (http://, https://, s3://BUCKET/KEY; builds with
     * libcurl). Create takes each shard's index from URL.ferry-index beside it
     * (the file shard_index_cache writes beside a local shard) when there is
     * one, else fetches the shard whole to index it (and keeps the index in
     * the cache folder for the next create, counted in remote_cache_bytes and
     * deleted when its shard is evicted); an index file larger than a
     * shard of that size can need (a record and a 256-byte name per 512
     * bytes of shard, and the class names) or than 64 MiB is not fetched
     * (a warning; the shard is read instead). In the streaming order
     * (stream_shuffle_buffer) a plain shard is read front to back over one
     * connection, a few MiB ahead of the reads, past the cache; in random
     * order (and for a gzip shard) it is fetched whole into a local cache
     * folder and kept there while the budget allows, and a shard larger than
     * the budget is read one member at a time by Range. Folder: NULL means
     * $FERRY_CACHE_DIR, else $XDG_CACHE_HOME/ferry, else ~/.cache/ferry
     * (made 0700); any folder must be a real folder (not a symbolic link),
     * the user's own and not writable by group or others, else create fails
     * naming it and the fix. Its files are mode 0600, and a shard kept there
     * is used again only when the record written with it (URL, ETag, size,
     * checksum) matches it. Budget: bytes of shards
     * held at once, default (0) 4 GiB; a shard that must be held whole (to be
     * indexed, or gzip) and is larger is an error at create. Timeout: for a
     * connection, and for a body that stalls; default (0) 10 s. Each request
     * also has a total deadline of 2 x the timeout plus its bytes at 64 KiB/s
     * (the time a streaming read-ahead waits for its reader not counted): a
     * slower body is a transient failure, and a try that ran out of time does
     * not count as progress, so a server trickling bytes ends in an error.
     * Only http:// and https:// are requested, an https URL is never
     * redirected to http, and a signed s3:// request follows no redirect (its
     * credentials stay with the endpoint); a user:password@ in a URL is never
     * printed (messages and sample names show ***@). Retries of a
     * transient failure in a row (with backoff, resuming from the last byte
     * received): default (0) 5. A shard that failed (its stream, a Range read
     * or its download) fails its later reads at once, and is tried again: at
     * the next epoch when streamed, else 3 x the timeout later. A server whose
     * fetches of two shards failed in a row is taken for down for 3 x the
     * timeout (or as long as the failing fetch took; doubled at each failed
     * try after it, up to 32 x; forgotten at each streamed epoch's start):
     * every fetch from it fails at once meanwhile, so that on_error = SKIP
     * ends the epoch instead of paying the retries for each sample. */
    const char *remote_cache_dir;
    size_t remote_cache_bytes;
    double remote_timeout_s;
    size_t remote_retries;
} ferry_image_config;
FERRY_API ferry_image_config ferry_image_config_default(void);

/* ---- single images (PNG, JPEG) ----
 * What a file's header says, read without decoding anything (PNG: the chunks
 * before IDAT are walked only to see a tRNS; JPEG: the markers before the first
 * scan, for the frame and an EXIF orientation). */
typedef enum ferry_image_kind {
    FERRY_IMAGE_PNG = 0,
    FERRY_IMAGE_JPEG = 1
} ferry_image_kind;

typedef struct ferry_image_info {
    size_t width, height;  /* as stored (before any EXIF orientation) */
    size_t channels;  /* PNG after palette expansion: 1 gray, 2 gray+alpha, 3 RGB, 4 RGBA;
                       * JPEG: 1 gray, 3 colour (YCbCr or RGB), 4 CMYK or YCCK */
    int bit_depth;    /* 1, 2, 4, 8 or 16 (JPEG: 8) */
    bool palette;     /* colour type 3 */
    bool interlaced;  /* Adam7 (PNG), progressive (JPEG) */
    bool has_alpha;   /* an alpha channel or a tRNS chunk */
    ferry_image_kind kind;
    int orientation;  /* JPEG's EXIF Orientation, 1 to 8; 1 when absent (and for PNG) */
} ferry_image_info;
FERRY_API ferry_status ferry_png_info(const void *data, size_t n, ferry_image_info *out);
/* A JPEG's frame header: baseline, extended or progressive, Huffman or
 * arithmetic, 8-bit; lossless and 12-bit JPEGs are FERRY_ERR_UNSUPPORTED. */
FERRY_API ferry_status ferry_jpeg_info(const void *data, size_t n, ferry_image_info *out);
/* PNG or JPEG, told by the first bytes (not the name). Anything else is
 * FERRY_ERR_FORMAT. */
FERRY_API ferry_status ferry_image_probe(const void *data, size_t n, ferry_image_info *out);

/* The format cfg makes of an image described by info: 0 height/width take the
 * image's (swapped for EXIF orientations 5 to 8 when cfg->exif_orientation),
 * channels 0 gives 1 for gray files and 3 otherwise. cfg NULL: defaults. */
FERRY_API ferry_status ferry_image_format(const ferry_image_config *cfg,
                                          const ferry_image_info *info, ferry_sample_format *out);

/* Decodes one PNG held in memory into dst, in the format ferry_image_format gives
 * (resized or cropped per cfg->resize, alpha dropped or composited). The random
 * augmentations of cfg are not applied here (they need a sample index). The limits
 * are checked before anything large is allocated (FERRY_ERR_LIMIT); a corrupt file
 * is FERRY_ERR_FORMAT with libpng's words, prefixed by name when given. */
FERRY_API ferry_status ferry_png_decode(const void *data, size_t n, const ferry_image_config *cfg,
                                        ferry_scratch *scratch, const char *name, void *dst,
                                        size_t dst_bytes);

/* Decodes one JPEG held in memory, as ferry_png_decode does a PNG. Pixels are
 * PIL's: libjpeg-turbo's default (islow) IDCT and fancy upsampling, gray output
 * from colour files through PIL's luma of the RGB pixels. CMYK and YCCK files
 * are converted to RGB as PIL's convert("RGB") does (no colour management).
 * Any corrupt, truncated or hostile file is FERRY_ERR_FORMAT naming it: the
 * data ending before the end-of-image marker, corrupt entropy-coded data and
 * more than 500 scans included (libjpeg itself would only warn). Extraneous
 * bytes before a marker are accepted, as PIL and libjpeg accept them. */
FERRY_API ferry_status ferry_jpeg_decode(const void *data, size_t n, const ferry_image_config *cfg,
                                         ferry_scratch *scratch, const char *name, void *dst,
                                         size_t dst_bytes);
/* PNG or JPEG, told by the first bytes. */
FERRY_API ferry_status ferry_image_decode(const void *data, size_t n, const ferry_image_config *cfg,
                                          ferry_scratch *scratch, const char *name, void *dst,
                                          size_t dst_bytes);

/* Boxes that travel with an image (docs/BOXES.md): count boxes, 4 floats each,
 * x0 y0 x1 y1 in pixels of the image as stored (pixel edges: a box around
 * pixels 3..7 is [3, 8)), and num_follow per-box fields (labels, scores)
 * moved with them: follow[i] holds count rows of follow_row_bytes[i] bytes
 * (num_follow at most 32). */
typedef struct ferry_boxes {
    float *xyxy;
    size_t count;                  /* in: the boxes; out: those kept */
    void *const *follow;
    const size_t *follow_row_bytes;
    size_t num_follow;
} ferry_boxes;

/* One image sample as the image datasets make it, for a dataset of your own:
 * decoded as ferry_image_decode does, and with ctx->train (ctx may be NULL:
 * no augmentation) cropped and augmented from sample index's stream of
 * ctx->seed and ctx->epoch, the same draws an image dataset makes for that
 * index. The boxes (may be NULL when there are none) go through every
 * geometric step the pixels did (EXIF orientation, resize, crop, padded crop,
 * flip), are clipped to the output and those cfg->box_min_area_frac drops
 * are removed, the rest (and their follow rows) moved to the front in order;
 * boxes->count says how many are left. A box that is not finite or not
 * x0 < x1, y0 < y1 is dropped too. */
FERRY_API ferry_status ferry_image_decode_boxes(const void *data, size_t n,
                                                const ferry_image_config *cfg,
                                                ferry_scratch *scratch,
                                                const ferry_sample_ctx *ctx, size_t index,
                                                const char *name, void *dst, size_t dst_bytes,
                                                ferry_boxes *boxes);

/* Writes 8-bit interleaved pixels (channels 1 gray, 2 gray+alpha, 3 RGB, 4 RGBA)
 * to a PNG file. For fixtures and `ferry export`. */
FERRY_API ferry_status ferry_png_save(const char *path, const void *pixels, size_t width,
                                            size_t height, size_t channels);

/* ---- datasets ---- */
typedef struct ferry_dataset ferry_dataset;

/* What ferry_dataset_open takes a path for. */
typedef enum ferry_dataset_kind {
    FERRY_DATASET_UNKNOWN = 0,
    FERRY_DATASET_IMAGE_FOLDER, /* ferry_dataset_image_folder */
    FERRY_DATASET_LIST_FILE,    /* ferry_dataset_list_file */
    FERRY_DATASET_SHARDS,       /* ferry_dataset_shards, the path alone */
    FERRY_DATASET_IDX           /* ferry_dataset_idx, the labels found beside the images */
} ferry_dataset_kind;

/* Opens whatever dataset path names, told apart in this order:
 *   - a name ending in .tar, .tar.gz or .tgz (any case), local or a URL
 *     (http://, https://, s3://): one tar shard;
 *   - a folder: tar shards when it holds a shard and no sub-folder, an image
 *     folder (ROOT/<class>/<file>) when it holds no shard; both is
 *     FERRY_ERR_INVALID_ARG naming one of each (hidden entries are ignored);
 *   - a file starting 00 00 08 03 (or 04), or a gzip file whose name holds
 *     "idx3": IDX images, with the labels X-labels-idx1-ubyte[.gz] beside
 *     X-images-idx3-ubyte[.gz] (MNIST's names; plain or gzip either way);
 *   - a text file whose first entry (blank lines and '#' comments skipped)
 *     is a shard path: a list of shards; one with a ',' or a tab in it: a list
 *     file of "path,label" lines.
 * Anything else fails naming the path and what it looks like: a missing path
 * is FERRY_ERR_INVALID_ARG, a file of another kind (an image, other binary or
 * gzip data, text of another shape, an IDX labels file, a URL not naming a
 * shard) FERRY_ERR_FORMAT or FERRY_ERR_INVALID_ARG. cfg: as the kind's own
 * create takes it (NULL: defaults). */
FERRY_API ferry_status ferry_dataset_open(const char *path, const ferry_image_config *cfg,
                                          ferry_dataset **out);
/* The kind ferry_dataset_open would open path as, read as it reads it, and
 * the same errors; nothing is opened. */
FERRY_API ferry_status ferry_dataset_probe(const char *path, ferry_dataset_kind *kind);


/* ROOT/<class>/.../<file>.png (or .jpg, .jpeg, any case; PNG and JPEG may mix,
 * each file told by its bytes): each class folder walked recursively (links
 * followed; a link back to a folder above is logged and not followed), classes
 * and each class's paths below its folder sorted by name (bytewise), class
 * names kept; hidden entries and other extensions ignored. An empty root or class
 * is FERRY_ERR_INVALID_ARG naming the path. Every other image entry is a sample,
 * even one that cannot be read (a dangling link, a folder or FIFO named x.png):
 * create logs one warning naming the first such entry and the count, and
 * loading it fails with FERRY_ERR_IO "path: reason" (a loader with
 * on_error = SKIP skips it and names it in its stats). The format, when cfg
 * leaves it 0, is by the rule above ferry_image_config (every header read). */
FERRY_API ferry_status ferry_dataset_image_folder(const char *root, const ferry_image_config *cfg,
                                                  ferry_dataset **out);
/* Lines "path,label" or "path<TAB>label" relative to the list file's folder; '#'
 * comments and blank lines allowed. Errors give the line number. With height
 * and width set the paths are not checked at create (no stat per line); one that
 * cannot be read fails when loaded, as in an image folder. With them 0 every
 * header is read (the rule above ferry_image_config). */
FERRY_API ferry_status ferry_dataset_list_file(const char *list_path, const ferry_image_config *cfg,
                                               ferry_dataset **out);
/* WebDataset-style shards: tar files (ustar, pax and GNU headers, as GNU tar
 * and Python's tarfile write them), uncompressed or gzip-compressed, whose
 * members share a key per sample, the name up to the first '.' of its last
 * component: KEY.png, KEY.jpg or KEY.jpeg is the image, KEY.cls its label (a decimal integer as
 * text); other members are ignored. Each of the n paths is a shard (a name
 * ending in .tar, .tar.gz or .tgz), a folder (its entries with those endings,
 * sorted bytewise) or a list file (any other file: one shard path a line,
 * relative to the list's folder; '#' comments and blank lines allowed). A
 * path or line may be in WebDataset's brace notation, local or by URL:
 * "shard-{000000..000099}.tar" (zero padding kept; a range may count down),
 * "{train,val}-{0..3}.tar" (groups left to right, the rightmost fastest); a
 * local file whose name holds braces is taken as it is. Malformed braces are
 * FERRY_ERR_INVALID_ARG and more than 100000 names from one pattern
 * FERRY_ERR_LIMIT, naming the pattern. A URL of a folder (ending in '/') is
 * FERRY_ERR_INVALID_ARG saying what to pass instead (HTTP lists no files).
 * Samples: shards in that order, keys sorted bytewise within a shard; named
 * "SHARD:KEY.png". Class names: the lines of a member __classes__.txt (or
 * classes.txt) at the top of a shard, the same in every shard that has one;
 * without it num_classes is the largest label + 1. Create reads every header
 * once and keeps each shard open (one descriptor each); get() is one pread.
 * A gzip shard (known by its first bytes, whatever its name) is decompressed
 * through at create to index it (offsets in messages are in the decompressed
 * tar); get() decompresses it from the last point reached, keeping the images
 * it passes that are still to be read (all of them without a loader, those of
 * the epoch with one) in a ring of cfg->shard_cache_bytes, so that streaming
 * mode, or any order while the ring holds, decompresses each shard once an
 * epoch; a sample behind the stream and not kept costs decompressing its shard
 * again up to it. Other compressions are FERRY_ERR_UNSUPPORTED.
 * Create fails, naming the shard, the member and its byte offset, when the index
 * cannot be trusted: a bad header checksum or number (FERRY_ERR_FORMAT), a shard
 * that ends early or lacks the end-of-archive blocks, a link, device or FIFO
 * member, the same KEY.ext twice in a shard, class names that differ between
 * shards, gzip data that is corrupt or cut short; the same shard given
 * twice FERRY_ERR_INVALID_ARG. Folder members are ignored. A key that is only
 * incomplete (no .png, no .cls, a .cls that is not a label or not below the
 * number of class names), an image over limits.max_file_bytes (FERRY_ERR_LIMIT)
 * or one that does not decode fails when loaded, by name (a loader with
 * on_error = SKIP skips it); create logs one warning counting the incomplete keys. */
FERRY_API ferry_status ferry_dataset_shards(const char *const *paths, size_t n,
                                            const ferry_image_config *cfg, ferry_dataset **out);
/* The same shards read as fields (ferry/fields.h): members names the
 * members to load, in order, as extensions after the key (as WebDataset's
 * to_tuple("jpg", "cls", "boxes.npy")); "png;jpg" takes either. Each is a field
 * named as given, decoded by its last extension: png, jpg, jpeg the IMAGE
 * field (at most one; decoded, resized and augmented per cfg as
 * ferry_dataset_shards does); cls, index, id an i64 (decimal text); npy an
 * array (NPY 1.0 to 3.0, little-endian f32, f16, u8, bool, i32, i64, C
 * order): every sample's header is read at create, and the field is fixed
 * when all shapes agree, ragged (padded to the largest first dimension) when
 * they differ only there, else FERRY_ERR_FORMAT naming two samples; any other
 * extension its raw bytes, a ragged u8 field up to the largest member. A
 * sample is a key with any member asked for, named "SHARD:KEY"; one missing a
 * member fails by name when loaded (the loader's on_error decides), as does a
 * member that does not decode. A shard by URL is fetched whole into the
 * remote cache (cfg's remote_* settings) to be walked, and read from there; a
 * gzip shard is decompressed whole at create and held, all of them within
 * cfg->shard_cache_bytes (FERRY_ERR_LIMIT past it). num_classes is 0. */
FERRY_API ferry_status ferry_dataset_shards_fields(const char *const *paths, size_t n,
                                                   const ferry_image_config *cfg,
                                                   const char *const *members, size_t num_members,
                                                   ferry_dataset **out);
/* Whether a path is named as a shard: it ends in .tar, .tar.gz or .tgz (any
 * case). The rule ferry_dataset_shards lists folders and tells a shard from a
 * list file by. false for NULL. */
FERRY_API bool ferry_dataset_is_shard_path(const char *path);
/* An IDX pair (images u8 [N,H,W] or [N,H,W,C]; labels u8 [N]), plain or .gz, read
 * into memory. cfg may be NULL (native size, 1 channel, no augmentation). */
FERRY_API ferry_status ferry_dataset_idx(const char *images_path, const char *labels_path,
                                         const ferry_image_config *cfg, ferry_dataset **out);
/* The caller's arrays, used without copying: n samples of fmt each (u8 or f32),
 * and n labels. Both must outlive the dataset. */
FERRY_API ferry_status ferry_dataset_memory(const void *data, const ferry_sample_format *fmt,
                                            size_t n, const int64_t *labels, ferry_dataset **out);
/* Views. A view keeps its base alive (datasets are reference counted). */
FERRY_API ferry_status ferry_dataset_subset(ferry_dataset *base, size_t begin, size_t end,
                                            ferry_dataset **out);
FERRY_API ferry_status ferry_dataset_indices(ferry_dataset *base, const size_t *indices, size_t n,
                                             ferry_dataset **out);
/* A seeded random split: round(len * val_fraction) samples go to val. */
FERRY_API ferry_status ferry_dataset_split(ferry_dataset *base, double val_fraction, uint64_t seed,
                                           ferry_dataset **train, ferry_dataset **val);

/* A dataset of your own: fill in the callbacks. get() must be thread-safe.
 * A failing get() says why with ferry_set_error ("IDAT: CRC error"); the
 * library puts the sample's name in front (name(), or "sample N"), so the
 * message should not start with it. */
typedef struct ferry_dataset_callbacks {
    size_t len;
    ferry_sample_format format;
    size_t num_classes;
    ferry_status (*get)(void *user, size_t index, void *dst, size_t dst_bytes,
                        const ferry_sample_ctx *ctx, int64_t *label);
    const char *(*name)(void *user, size_t index); /* optional: a path for messages */
    void (*destroy)(void *user);                   /* optional */
    /* Optional: the samples come in num_shards consecutive runs (shard k is
     * [shard_ends[k-1], shard_ends[k]), the last end len), read best front to
     * back: the loader's streaming mode (stream_shuffle_buffer) then takes
     * them shard by shard. Copied at create. */
    const size_t *shard_ends;
    size_t num_shards;
} ferry_dataset_callbacks;
FERRY_API ferry_status ferry_dataset_custom(const ferry_dataset_callbacks *cb, void *user,
                                            ferry_dataset **out);

FERRY_API ferry_dataset *ferry_dataset_retain(ferry_dataset *ds);
FERRY_API void ferry_dataset_release(ferry_dataset *ds); /* drops a reference; NULL is a no-op */

FERRY_API size_t ferry_dataset_len(const ferry_dataset *ds);
FERRY_API const ferry_sample_format *ferry_dataset_format(const ferry_dataset *ds);
FERRY_API size_t ferry_dataset_sample_bytes(const ferry_dataset *ds);
FERRY_API size_t ferry_dataset_class_count(const ferry_dataset *ds);
/* NULL if none */
FERRY_API const char *ferry_dataset_class_name(const ferry_dataset *ds, size_t cls);
/* The label without decoding. */
FERRY_API ferry_status ferry_dataset_label(const ferry_dataset *ds, size_t index, int64_t *label);
/* Entries found at create that cannot be read (a dangling link, a folder or FIFO
 * named x.png, a file without read permission where that shows): they stay
 * samples and fail by name when loaded. first (may be NULL) gets the first,
 * "path: reason", or NULL when there are none. A loader with on_error = FAIL
 * refuses such a dataset at create; with SKIP it skips and counts them. */
FERRY_API size_t ferry_dataset_unreadable_count(const ferry_dataset *ds, const char **first);

/* A file path or other name for messages; NULL when the dataset has none. */
FERRY_API const char *ferry_dataset_sample_name(const ferry_dataset *ds, size_t index);

/* Decodes sample index into dst (dst_bytes >= ferry_dataset_sample_bytes) and
 * applies the configured transforms in place. A dataset of other fields
 * (ferry/fields.h) gives its IMAGE field here and its label field in *label,
 * decoding the rest into a buffer allocated for the call and dropping them:
 * ferry_dataset_get_fields reads every field; without an IMAGE field this is
 * FERRY_ERR_INVALID_ARG. Thread-safe. On failure returns the
 * status with ferry_last_error() naming the file and the reason
 * ("train/3/17.png: IDAT: CRC error"), and dst holds no promise. */
FERRY_API ferry_status ferry_dataset_get(const ferry_dataset *ds, size_t index, void *dst,
                                         size_t dst_bytes, const ferry_sample_ctx *ctx,
                                         int64_t *label);

#ifdef __cplusplus
}
#endif
#endif

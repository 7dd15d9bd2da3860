/* Internal to src/dataset: the dataset core every kind builds on (the vtable
 * and the dataset struct), the per-thread scratch with its file reads, and the
 * string list of listings. Each concern's own declarations live in its folder's
 * header: image/image.h, shards/shards.h, remote/remote.h, files/internal.h.
 * Nothing here is public API. */
#ifndef FERRY_DATASET_INTERNAL_H
#define FERRY_DATASET_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "common/error.h" /* ferry_thread_cpu_now */
#include "dataset/core/caps.h"
#include "ferry/dataset.h"

/* The calling thread's CPU seconds, for ctx->timing (its stages are CPU
 * time: a read waiting on the disk or network adds little); 0 when timing
 * is off. */
static inline double ferry__clock(const ferry_sample_ctx *ctx)
{
    return ctx && ctx->timing ? ferry_thread_cpu_now() : 0;
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

/* ---- datasets (dataset.c) ---- */
typedef struct ferry_dataset_vtable {
    /* An image dataset's: the image into dst, its label. NULL for a dataset of
     * other fields, which has get_fields. */
    ferry_status (*get)(const ferry_dataset *ds, size_t index, void *dst,
                        const ferry_sample_ctx *ctx, int64_t *label);
    /* Every field (ferry_dataset_get_fields, before the checks of lengths and
     * the zero padding); NULL: the fields are {image, label} and get() fills them. */
    ferry_status (*get_fields)(const ferry_dataset *ds, size_t index, void *const *dst,
                               size_t *lengths, const ferry_sample_ctx *ctx);
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
    /* The fields (names in field_names); image_field and label_field index the
     * IMAGE field and the label field (the first i64 scalar), SIZE_MAX: none. */
    size_t num_fields;
    ferry_field fields[FERRY_FIELD_MAX];
    char field_names[FERRY_FIELD_MAX][FERRY_FIELD_NAME_MAX + 1];
    size_t image_field, label_field;
};

/* Custom datasets' shard_ends: not decreasing, the last len (FERRY_ERR_INVALID_ARG). */
ferry_status ferry__check_shard_ends(const size_t *ends, size_t num_shards, size_t len);

/* ---- fields (dataset/fields/fields.c) ---- */
/* Checks n fields a caller declared (what: "custom dataset" for messages). */
ferry_status ferry__fields_check(const ferry_field *f, size_t n, const char *what);
/* Copies n checked fields into ds (names included) and finds the image and
 * label fields; the format is the IMAGE field's (zero without one). */
void ferry__fields_set(ferry_dataset *ds, const ferry_field *f, size_t n);
/* The fields of an image dataset of format ds->format: image and label. */
void ferry__fields_set_image(ferry_dataset *ds);
/* get_fields without the argument checks and the naming of the sample: the
 * kind's own, or get() into the image and label fields. */
ferry_status ferry__dataset_get_fields_raw(const ferry_dataset *ds, size_t index, void *const *dst,
                                           size_t *lengths, const ferry_sample_ctx *ctx);
/* get() without the argument checks: the kind's own, or every field decoded
 * into a temporary buffer and the image and label taken from it. */
ferry_status ferry__dataset_get_raw(const ferry_dataset *ds, size_t index, void *dst,
                                    const ferry_sample_ctx *ctx, int64_t *label);
/* A new dataset of fields with one reference; impl owned as for
 * ferry__dataset_new. The fields must have passed ferry__fields_check. */
ferry_status ferry__dataset_new_fields(const ferry_dataset_vtable *vt, void *impl, size_t len,
                                       const ferry_field *fields, size_t num_fields,
                                       size_t num_classes, ferry_dataset **out);

/* Puts the sample's name (vt->name, or "sample N" without one) in front of
 * the current message unless it is already its subject (ferry_fail_named);
 * returns st. ferry_dataset_get calls it on every failure, so its message
 * names the sample exactly once (docs/API_ERRORS.md, "Messages"). */
ferry_status ferry__name_sample(const ferry_dataset *ds, size_t index, ferry_status st);

/* A new dataset with one reference; impl is owned from here on (vt->destroy is
 * called on it even when this fails). */
ferry_status ferry__dataset_new(const ferry_dataset_vtable *vt, void *impl, size_t len,
                                const ferry_sample_format *fmt, size_t num_classes,
                                ferry_dataset **out);


/* A growing list of owned strings (str_list.c): folder and shard listings. */
typedef struct ferry_str_list {
    char **v;
    size_t n, cap;
} ferry_str_list;
void ferry__str_list_free(ferry_str_list *l);
/* Takes s (ferry_host_malloc'd); NULL s means its allocation failed. */
ferry_status ferry__str_list_push(ferry_str_list *l, char *s);

#endif

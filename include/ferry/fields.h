/* Library: libferry (pkg-config ferry); <ferry/dataset.h> includes this header. */
/* Fields: a sample is a short list of named fields, each a dtype and a shape.
 * Image + class is the two-field case ("image", "label"); a detector's sample
 * adds ragged boxes, a regression target a float vector, a language model's
 * sample token windows. docs/FIELDS.md shows programs; docs/DESIGN.md the
 * layout of a batch in a slot. */
#ifndef FERRY_FIELDS_H
#define FERRY_FIELDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ferry/export.h"
#include "ferry/status.h"
#include "ferry/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ferry_dataset ferry_dataset;
struct ferry_sample_ctx;

/* The most dimensions a field has per sample (the batch adds one). */
#define FERRY_FIELD_MAX_DIMS 4
/* The longest field name, terminator excluded. */
#define FERRY_FIELD_NAME_MAX 63
/* The most fields a sample has. */
#define FERRY_FIELD_MAX 32

typedef enum ferry_field_role {
    FERRY_FIELD_PLAIN = 0,     /* bytes as stored; nothing moves them */
    FERRY_FIELD_IMAGE,         /* u8 or f32 [C, H, W]: the batch's `images`, converted
                                * (wire, out_dtype, mean/std, layout) as images are */
    FERRY_FIELD_BOXES_XYXY,    /* ragged f32 [K, 4], x0 y0 x1 y1 in pixels of the image */
    FERRY_FIELD_FOLLOWS_BOXES  /* ragged, its K the boxes' K (per-box labels, scores) */
} ferry_field_role;

/* One field of a sample. shape is per sample (the batch puts B in front); a
 * ragged field's first dimension varies per sample, shape[0] being its
 * maximum, and it arrives padded with zeros to that maximum, its lengths
 * beside it. ndim 0 is a scalar (a class). */
typedef struct ferry_field {
    const char *name;
    ferry_dtype dtype;
    /* The dtype the loader delivers the field (and its views) in, converted
     * on the device after the batch's one copy (by the workers on the CPU):
     * u16 token ids cross as stored and arrive as i32. field_dtypes
     * overrides it. 0 (FERRY_DTYPE_F32) means the field's own dtype; a field
     * stored otherwise that should arrive as f32 says so in field_dtypes. */
    ferry_dtype batch_dtype;
    size_t ndim;
    size_t shape[FERRY_FIELD_MAX_DIMS];
    bool ragged;
    ferry_field_role role;
    /* A view: no bytes of its own, but entries [view_start, view_start +
     * shape[0]) along the first dimension of the earlier field named view_of
     * (a fixed field with ndim >= 1 that is no view), with its dtype and
     * trailing shape. A token window's inputs and targets are two views of
     * its T + 1 tokens, so the batch carries the window once. get() writes no
     * view (its dst is NULL); the batch's view is a strided tensor (row
     * stride the parent's), which the layers make contiguous on the device
     * as they need. NULL: a field of its own. */
    const char *view_of;
    size_t view_start;
} ferry_field;

/* Bytes of one sample of f at its full (maximum) shape; 0 for an invalid
 * field or on overflow. */
FERRY_API size_t ferry_field_bytes(const ferry_field *f);
/* Bytes of one entry along the first dimension (a ragged field's row: a
 * box's 4 floats); for a scalar, the element. 0 when invalid. */
FERRY_API size_t ferry_field_row_bytes(const ferry_field *f);

/* The dataset's fields, valid while it lives. Every dataset has them: image
 * datasets {"image" (role IMAGE; [H, W, C] for an HWC dataset), "label"
 * (i64 scalar)}. */
FERRY_API ferry_status ferry_dataset_fields(const ferry_dataset *ds, const ferry_field **out,
                                            size_t *n);
/* The index of the field called name, or FERRY_ERR_INVALID_ARG naming it and
 * the fields there are. */
FERRY_API ferry_status ferry_dataset_field_index(const ferry_dataset *ds, const char *name,
                                                 size_t *index);

/* Decodes every field of sample index: dst[k] receives field k
 * (ferry_field_bytes of it, aligned for its dtype; NULL for a view, which
 * is not written), lengths[k] (may be NULL
 * when no field is ragged) a ragged field's entries; other entries of
 * lengths are set to shape[0] (1 for a scalar). A ragged field is zero past
 * its length, so equal samples give equal bytes. Thread-safe; errors name
 * the sample as ferry_dataset_get's do. */
FERRY_API ferry_status ferry_dataset_get_fields(const ferry_dataset *ds, size_t index,
                                                void *const *dst, size_t *lengths,
                                                const struct ferry_sample_ctx *ctx);

/* A dataset of your own, by fields. get() fills dst[k] for each field k
 * (dst[k] is NULL for a view: nothing to write) and,
 * for each ragged one, lengths[k] (at most its shape[0]; unset or larger is
 * FERRY_ERR_FORMAT naming the field). It need not clear a ragged field past
 * its length. Thread-safe, as for ferry_dataset_custom; an IMAGE field is
 * [C, H, W] (planar), u8 or f32, and at most one. The label field (what
 * batch.labels shows, and ferry_dataset_label reads) is the first i64 scalar
 * one, if any. */
typedef struct ferry_dataset_field_callbacks {
    size_t len;
    const ferry_field *fields;   /* copied at create, names too */
    size_t num_fields;           /* 1 to FERRY_FIELD_MAX */
    size_t num_classes;          /* optional */
    ferry_status (*get)(void *user, size_t index, void *const *dst, size_t *lengths,
                        const struct ferry_sample_ctx *ctx);
    const char *(*name)(void *user, size_t index); /* optional: a path for messages */
    void (*destroy)(void *user);                   /* optional */
    const size_t *shard_ends;    /* optional, as in ferry_dataset_callbacks */
    size_t num_shards;
} ferry_dataset_field_callbacks;
FERRY_API ferry_status ferry_dataset_custom_fields(const ferry_dataset_field_callbacks *cb,
                                                   void *user, ferry_dataset **out);

/* One column of a memory dataset: n samples of field, in the caller's
 * memory, used without copying (it must outlive the dataset). A view: no
 * data (NULL). A fixed field:
 * data holds n * ferry_field_bytes(&field) bytes. A ragged field: data holds
 * the rows packed, sample i's rows [offsets[i], offsets[i + 1]) (offsets: n + 1
 * entries, not decreasing, from 0; no sample more than shape[0] rows). */
typedef struct ferry_memory_field {
    ferry_field field;
    const void *data;
    const size_t *offsets;       /* ragged only; NULL otherwise */
} ferry_memory_field;
FERRY_API ferry_status ferry_dataset_memory_fields(const ferry_memory_field *cols, size_t num_cols,
                                                   size_t n, ferry_dataset **out);

#ifdef __cplusplus
}
#endif
#endif

/* Fields: checking what a caller declares, the fields every dataset reports
 * (image datasets: image and label), and get_fields with the promises it
 * keeps for every kind (a ragged field's length checked, its padding zero). */
#include <stdio.h>
#include <string.h>

#include "common/error.h"
#include "dataset/core/internal.h"

/* Per-sample bytes a field may take: a sample that large is a mistake (and a
 * slot holds batch_size of them). */
#define FIELD_MAX_BYTES ((size_t)1 << 30)

size_t ferry_field_row_bytes(const ferry_field *f)
{
    if (!f || f->ndim > FERRY_FIELD_MAX_DIMS)
        return 0;
    size_t n = ferry_dtype_size(f->dtype);
    for (size_t d = 0; d < f->ndim; d++)
        if (f->shape[d] == 0)
            return 0;
    for (size_t d = 1; d < f->ndim; d++)
        if (!ferry_mul_size(n, f->shape[d], &n))
            return 0;
    return n;
}

size_t ferry_field_bytes(const ferry_field *f)
{
    size_t row = ferry_field_row_bytes(f), n;
    if (!row || !ferry_mul_size(row, f->ndim ? f->shape[0] : 1, &n))
        return 0;
    return n;
}

static ferry_status check_name(const ferry_field *f, size_t k, const char *what)
{
    if (!f[k].name || !f[k].name[0])
        return ferry_fail(FERRY_ERR_INVALID_ARG, "%s: fields[%zu] has no name", what, k);
    size_t len = strnlen(f[k].name, FERRY_FIELD_NAME_MAX + 1);
    if (len > FERRY_FIELD_NAME_MAX)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "%s: fields[%zu]'s name is longer than %d bytes",
                          what, k, FERRY_FIELD_NAME_MAX);
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)f[k].name[i] < 0x20 || f[k].name[i] == 0x7f)
            return ferry_fail(FERRY_ERR_INVALID_ARG, "%s: fields[%zu]'s name has a control "
                              "character", what, k);
    for (size_t j = 0; j < k; j++)
        if (strcmp(f[j].name, f[k].name) == 0)
            return ferry_fail(FERRY_ERR_INVALID_ARG, "%s: two fields are called '%s'", what,
                              f[k].name);
    return FERRY_OK;
}

/* The role's own demands on field k. */
static ferry_status check_role(const ferry_field *f, size_t n, size_t k, const char *what)
{
    const ferry_field *x = &f[k];
    switch (x->role) {
    case FERRY_FIELD_PLAIN:
        return FERRY_OK;
    case FERRY_FIELD_IMAGE:
        if (x->ragged || x->ndim != 3 || (x->dtype != FERRY_DTYPE_U8 && x->dtype != FERRY_DTYPE_F32))
            return ferry_fail(FERRY_ERR_INVALID_ARG, "%s: field '%s': an IMAGE field is a fixed "
                              "u8 or f32 [C, H, W]", what, x->name);
        for (size_t j = 0; j < k; j++)
            if (f[j].role == FERRY_FIELD_IMAGE)
                return ferry_fail(FERRY_ERR_INVALID_ARG, "%s: fields '%s' and '%s' are both "
                                  "IMAGE (at most one)", what, f[j].name, x->name);
        return FERRY_OK;
    case FERRY_FIELD_BOXES_XYXY:
        if (!x->ragged || x->ndim != 2 || x->shape[1] != 4 || x->dtype != FERRY_DTYPE_F32)
            return ferry_fail(FERRY_ERR_INVALID_ARG, "%s: field '%s': boxes are a ragged f32 "
                              "[K, 4]", what, x->name);
        return FERRY_OK;
    case FERRY_FIELD_FOLLOWS_BOXES:
        for (size_t j = 0; j < n; j++)
            if (f[j].role == FERRY_FIELD_BOXES_XYXY) {
                if (x->ragged && x->shape[0] == f[j].shape[0])
                    return FERRY_OK;
                break;
            }
        return ferry_fail(FERRY_ERR_INVALID_ARG, "%s: field '%s' follows boxes: it must be "
                          "ragged with the boxes field's maximum, and there must be one", what,
                          x->name);
    }
    return ferry_fail(FERRY_ERR_INVALID_ARG, "%s: field '%s': unknown role %d", what, x->name,
                      (int)x->role);
}

/* A view's demands: an earlier fixed field of its own, the same dtype and
 * trailing shape, entries inside it; and a batch dtype that is a dtype. */
static ferry_status check_view(const ferry_field *f, size_t k, const char *what)
{
    const ferry_field *x = &f[k];
    if (x->batch_dtype != FERRY_DTYPE_F32 && !ferry_dtype_size(x->batch_dtype))
        return ferry_fail(FERRY_ERR_INVALID_ARG, "%s: field '%s': batch_dtype %d", what, x->name,
                          (int)x->batch_dtype);
    if (!x->view_of)
        return FERRY_OK;
    const ferry_field *p = NULL;
    for (size_t j = 0; j < k && !p; j++)
        if (f[j].name && strcmp(f[j].name, x->view_of) == 0)
            p = &f[j];
    if (!p || p->view_of || p->ragged || p->ndim == 0)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "%s: field '%s' is a view of '%.*s', which is %s",
                          what, x->name, FERRY_FIELD_NAME_MAX, x->view_of,
                          !p ? "no earlier field" : p->view_of ? "a view itself"
                          : p->ragged ? "ragged" : "a scalar");
    bool same = x->dtype == p->dtype && x->ndim == p->ndim && !x->ragged &&
                x->role == FERRY_FIELD_PLAIN && x->batch_dtype == FERRY_DTYPE_F32;
    for (size_t d = 1; d < x->ndim && same; d++)
        same = x->shape[d] == p->shape[d];
    if (!same)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "%s: field '%s', a view of '%s', must have its "
                          "dtype and trailing shape and no role, raggedness or batch_dtype of its "
                          "own", what, x->name, p->name);
    if (x->view_start > p->shape[0] || x->shape[0] > p->shape[0] - x->view_start)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "%s: field '%s': entries [%zu, %zu + %zu) of "
                          "'%s', which has %zu", what, x->name, x->view_start, x->view_start,
                          x->shape[0], p->name, p->shape[0]);
    return FERRY_OK;
}

ferry_status ferry__fields_check(const ferry_field *f, size_t n, const char *what)
{
    if (!f || n == 0 || n > FERRY_FIELD_MAX)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "%s: %zu fields (1 to %d)", what, f ? n : 0,
                          FERRY_FIELD_MAX);
    for (size_t k = 0; k < n; k++) {
        ferry_status st = check_name(f, k, what);
        if (st != FERRY_OK)
            return st;
        const ferry_field *x = &f[k];
        if (!ferry_dtype_size(x->dtype) || x->ndim > FERRY_FIELD_MAX_DIMS)
            return ferry_fail(FERRY_ERR_INVALID_ARG, "%s: field '%s': dtype %d, %zu dimensions "
                              "(at most %d)", what, x->name, (int)x->dtype, x->ndim,
                              FERRY_FIELD_MAX_DIMS);
        size_t bytes = ferry_field_bytes(x);
        if (!bytes || bytes > FIELD_MAX_BYTES)
            return ferry_fail(FERRY_ERR_INVALID_ARG, "%s: field '%s': a shape with a 0 "
                              "dimension, or over %zu bytes a sample", what, x->name,
                              FIELD_MAX_BYTES);
        if (x->ragged && x->ndim == 0)
            return ferry_fail(FERRY_ERR_INVALID_ARG, "%s: field '%s': a scalar cannot be ragged",
                              what, x->name);
        if ((st = check_role(f, n, k, what)) != FERRY_OK || (st = check_view(f, k, what)) != FERRY_OK)
            return st;
    }
    return FERRY_OK;
}

void ferry__fields_set(ferry_dataset *ds, const ferry_field *f, size_t n)
{
    ds->num_fields = n;
    ds->image_field = ds->label_field = SIZE_MAX;
    for (size_t k = 0; k < n; k++) {
        ds->fields[k] = f[k];
        snprintf(ds->field_names[k], sizeof ds->field_names[k], "%s", f[k].name);
        ds->fields[k].name = ds->field_names[k];
        for (size_t j = 0; j < k && f[k].view_of; j++) /* checked: an earlier field's name */
            if (strcmp(f[j].name, f[k].view_of) == 0)
                ds->fields[k].view_of = ds->field_names[j];
        if (f[k].role == FERRY_FIELD_IMAGE && ds->image_field == SIZE_MAX)
            ds->image_field = k;
        if (f[k].dtype == FERRY_DTYPE_I64 && f[k].ndim == 0 && ds->label_field == SIZE_MAX)
            ds->label_field = k;
    }
    memset(&ds->format, 0, sizeof ds->format);
    ds->sample_bytes = 0;
    if (ds->image_field != SIZE_MAX) {
        const ferry_field *im = &ds->fields[ds->image_field];
        ds->format = (ferry_sample_format){.channels = im->shape[0], .height = im->shape[1],
                                           .width = im->shape[2], .layout = FERRY_LAYOUT_CHW,
                                           .dtype = im->dtype};
        ds->sample_bytes = ferry_field_bytes(im);
    }
}

void ferry__fields_set_image(ferry_dataset *ds)
{
    const ferry_sample_format *f = &ds->format;
    bool hwc = f->layout == FERRY_LAYOUT_HWC;
    ferry_field two[2] = {
        {.name = "image", .dtype = f->dtype, .ndim = 3, .role = FERRY_FIELD_IMAGE,
         .shape = {hwc ? f->height : f->channels, hwc ? f->width : f->height,
                   hwc ? f->channels : f->width}},
        {.name = "label", .dtype = FERRY_DTYPE_I64, .ndim = 0},
    };
    ferry_sample_format keep = ds->format;
    size_t bytes = ds->sample_bytes;
    ferry__fields_set(ds, two, 2);
    ds->format = keep; /* an HWC dataset's format is not the planar one set derives */
    ds->sample_bytes = bytes;
}

ferry_status ferry_dataset_fields(const ferry_dataset *ds, const ferry_field **out, size_t *n)
{
    if (!ds || !out || !n)
        return FERRY_ARG_ERROR("%s is NULL", !ds ? "ds" : !out ? "out" : "n");
    *out = ds->fields;
    *n = ds->num_fields;
    return FERRY_OK;
}

ferry_status ferry_dataset_field_index(const ferry_dataset *ds, const char *name, size_t *index)
{
    if (!ds || !name || !index)
        return FERRY_ARG_ERROR("%s is NULL", !ds ? "ds" : !name ? "name" : "index");
    for (size_t k = 0; k < ds->num_fields; k++)
        if (strcmp(ds->fields[k].name, name) == 0) {
            *index = k;
            return FERRY_OK;
        }
    char list[FERRY_FIELD_MAX * 16] = "";
    size_t used = 0;
    for (size_t k = 0; k < ds->num_fields && used < sizeof list; k++) {
        int w = snprintf(list + used, sizeof list - used, "%s'%s'", k ? ", " : "",
                         ds->fields[k].name);
        used += w > 0 ? (size_t)w : 0;
    }
    return ferry_fail(FERRY_ERR_INVALID_ARG, "no field '%s' (the dataset's fields: %s)", name, list);
}

ferry_status ferry__dataset_get_fields_raw(const ferry_dataset *ds, size_t index, void *const *dst,
                                           size_t *lengths, const ferry_sample_ctx *ctx)
{
    if (ds->vt->get_fields)
        return ds->vt->get_fields(ds, index, dst, lengths, ctx);
    if (!ds->vt->get)
        return ferry_fail(FERRY_ERR_UNSUPPORTED, "the dataset's kind reads no samples");
    int64_t label = -1;
    ferry_status st = ds->vt->get(ds, index, dst[ds->image_field], ctx, &label);
    if (st == FERRY_OK)
        memcpy(dst[ds->label_field], &label, sizeof label);
    return st;
}

/* A ragged field's length is what the kind says, at most its maximum; the
 * rows past it are zeroed (a slot is reused: stale rows would differ by
 * worker count). */
static ferry_status finish_lengths(const ferry_dataset *ds, void *const *dst, size_t *lengths)
{
    for (size_t k = 0; k < ds->num_fields; k++) {
        const ferry_field *f = &ds->fields[k];
        if (!f->ragged)
            continue;
        if (lengths[k] == SIZE_MAX)
            return ferry_fail(FERRY_ERR_FORMAT, "field '%s': get gave no length", f->name);
        if (lengths[k] > f->shape[0])
            return ferry_fail(FERRY_ERR_FORMAT, "field '%s': %zu entries, more than its "
                              "maximum %zu", f->name, lengths[k], f->shape[0]);
        size_t row = ferry_field_row_bytes(f);
        memset((uint8_t *)dst[k] + lengths[k] * row, 0, (f->shape[0] - lengths[k]) * row);
    }
    return FERRY_OK;
}

ferry_status ferry_dataset_get_fields(const ferry_dataset *ds, size_t index, void *const *dst,
                                      size_t *lengths, const ferry_sample_ctx *ctx)
{
    if (!ds || !dst)
        return FERRY_ARG_ERROR("%s is NULL", !ds ? "ds" : "dst");
    if (index >= ds->len)
        return FERRY_ARG_ERROR("sample %zu is out of range (dataset has %zu)", index, ds->len);
    size_t own[FERRY_FIELD_MAX];
    bool ragged = false;
    for (size_t k = 0; k < ds->num_fields; k++) {
        if (!dst[k] && !ds->fields[k].view_of)
            return FERRY_ARG_ERROR("dst[%zu] (field '%s') is NULL", k, ds->fields[k].name);
        ragged |= ds->fields[k].ragged;
    }
    if (!lengths) {
        if (ragged)
            return FERRY_ARG_ERROR("lengths is NULL and the dataset has ragged fields");
        lengths = own;
    }
    for (size_t k = 0; k < ds->num_fields; k++) {
        const ferry_field *f = &ds->fields[k];
        lengths[k] = f->ragged ? SIZE_MAX : f->ndim ? f->shape[0] : 1;
    }
    ferry_clear_error();
    ferry_status st = ferry__dataset_get_fields_raw(ds, index, dst, lengths, ctx);
    if (st == FERRY_OK)
        st = finish_lengths(ds, dst, lengths);
    else if (!ferry_last_error()[0])
        ferry_fail(st, "the get callback failed (%s)", ferry_status_str(st));
    return st == FERRY_OK ? st : ferry__name_sample(ds, index, st);
}

ferry_status ferry__dataset_get_raw(const ferry_dataset *ds, size_t index, void *dst,
                                    const ferry_sample_ctx *ctx, int64_t *label)
{
    if (ds->vt->get)
        return ds->vt->get(ds, index, dst, ctx, label);
    if (ds->image_field == SIZE_MAX)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "the dataset has no IMAGE field: read its "
                          "fields with ferry_dataset_get_fields");
    /* The other fields go to a buffer of the call's own: this entry serves
     * tools and image code, the loader reads every field in place. */
    size_t total = 0, off[FERRY_FIELD_MAX], lengths[FERRY_FIELD_MAX];
    for (size_t k = 0; k < ds->num_fields; k++) {
        off[k] = total;
        total += (ferry_field_bytes(&ds->fields[k]) + 63) / 64 * 64;
    }
    uint8_t *buf = ferry_host_aligned(64, total ? total : 64);
    if (!buf)
        return FERRY_ERR_NO_MEMORY;
    void *d[FERRY_FIELD_MAX];
    for (size_t k = 0; k < ds->num_fields; k++)
        d[k] = k == ds->image_field ? dst : ds->fields[k].view_of ? NULL : buf + off[k];
    for (size_t k = 0; k < ds->num_fields; k++)
        lengths[k] = ds->fields[k].ragged ? SIZE_MAX : 1;
    ferry_status st = ferry__dataset_get_fields_raw(ds, index, d, lengths, ctx);
    if (st == FERRY_OK)
        st = finish_lengths(ds, d, lengths);
    if (st == FERRY_OK && label) {
        *label = -1;
        if (ds->label_field != SIZE_MAX)
            memcpy(label, d[ds->label_field], sizeof *label);
    }
    ferry_host_free(buf);
    return st;
}

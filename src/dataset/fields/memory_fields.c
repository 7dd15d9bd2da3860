/* A memory dataset of fields: the caller's columns, read in place
 * (ferry_dataset_memory_fields). A ragged column is packed, with offsets. */
#include <string.h>

#include "common/error.h"
#include "dataset/core/internal.h"

typedef struct memory_fields {
    size_t n;
    ferry_memory_field cols[FERRY_FIELD_MAX];
} memory_fields;

static ferry_status mf_get_fields(const ferry_dataset *ds, size_t index, void *const *dst,
                                  size_t *lengths, const ferry_sample_ctx *ctx)
{
    (void)ctx;
    const memory_fields *m = ds->impl;
    for (size_t k = 0; k < m->n; k++) {
        const ferry_memory_field *c = &m->cols[k];
        const uint8_t *src = c->data;
        if (c->field.view_of)
            continue;
        if (c->field.ragged) {
            size_t row = ferry_field_row_bytes(&ds->fields[k]);
            size_t a = c->offsets[index], b = c->offsets[index + 1];
            memcpy(dst[k], src + a * row, (b - a) * row);
            lengths[k] = b - a;
        } else {
            size_t bytes = ferry_field_bytes(&ds->fields[k]);
            memcpy(dst[k], src + index * bytes, bytes);
        }
    }
    return FERRY_OK;
}

static ferry_status mf_label(const ferry_dataset *ds, size_t index, int64_t *label)
{
    const memory_fields *m = ds->impl;
    if (ds->label_field == SIZE_MAX)
        return ferry_fail(FERRY_ERR_UNSUPPORTED, "the dataset has no label field (an i64 scalar)");
    memcpy(label, (const int64_t *)m->cols[ds->label_field].data + index, sizeof *label);
    return FERRY_OK;
}

static void mf_destroy(ferry_dataset *ds) { ferry_host_free(ds->impl); }

static const ferry_dataset_vtable memory_fields_vt = {
    .get_fields = mf_get_fields, .label = mf_label, .destroy = mf_destroy};

/* A ragged column's offsets: from 0, not decreasing, no sample over the maximum. */
static ferry_status check_offsets(const ferry_memory_field *c, size_t n)
{
    if (!c->offsets)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "memory dataset: field '%s' is ragged and "
                          "its offsets are NULL", c->field.name);
    if (c->offsets[0] != 0)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "memory dataset: field '%s': offsets[0] is "
                          "%zu, not 0", c->field.name, c->offsets[0]);
    for (size_t i = 0; i < n; i++)
        if (c->offsets[i + 1] < c->offsets[i] ||
            c->offsets[i + 1] - c->offsets[i] > c->field.shape[0])
            return ferry_fail(FERRY_ERR_INVALID_ARG, "memory dataset: field '%s': sample %zu "
                              "has rows [%zu, %zu): decreasing, or more than its maximum %zu",
                              c->field.name, i, c->offsets[i], c->offsets[i + 1],
                              c->field.shape[0]);
    return FERRY_OK;
}

/* Classes: the largest label + 1 of the label column (none negative). */
static ferry_status count_classes(const ferry_dataset *ds, const memory_fields *m, size_t *out)
{
    *out = 0;
    if (ds->label_field == SIZE_MAX)
        return FERRY_OK;
    const int64_t *lab = m->cols[ds->label_field].data;
    for (size_t i = 0; i < ds->len; i++) {
        if (lab[i] < 0)
            return ferry_fail(FERRY_ERR_INVALID_ARG, "memory dataset: field '%s': sample %zu's "
                              "label %lld is negative", ds->fields[ds->label_field].name, i,
                              (long long)lab[i]);
        if ((size_t)lab[i] + 1 > *out)
            *out = (size_t)lab[i] + 1;
    }
    return FERRY_OK;
}

ferry_status ferry_dataset_memory_fields(const ferry_memory_field *cols, size_t num_cols, size_t n,
                                         ferry_dataset **out)
{
    if (!out)
        return FERRY_ARG_ERROR("out is NULL");
    *out = NULL;
    if (!cols || num_cols == 0 || num_cols > FERRY_FIELD_MAX)
        return FERRY_ARG_ERROR("%zu columns (1 to %d)", cols ? num_cols : 0, FERRY_FIELD_MAX);
    ferry_field f[FERRY_FIELD_MAX];
    for (size_t k = 0; k < num_cols; k++)
        f[k] = cols[k].field;
    ferry_status st = ferry__fields_check(f, num_cols, "memory dataset");
    for (size_t k = 0; st == FERRY_OK && k < num_cols; k++) {
        size_t total;
        if (f[k].view_of)
            continue;
        if (!cols[k].data && n)
            st = ferry_fail(FERRY_ERR_INVALID_ARG, "memory dataset: field '%s' has no data",
                            f[k].name);
        else if (cols[k].field.ragged)
            st = check_offsets(&cols[k], n);
        else if (!ferry_mul_size(ferry_field_bytes(&f[k]), n, &total))
            st = ferry_fail(FERRY_ERR_INVALID_ARG, "memory dataset: field '%s': %zu samples "
                            "overflow", f[k].name, n);
    }
    if (st != FERRY_OK)
        return FERRY_ARG_CONTEXT(st);
    memory_fields *m = ferry_host_calloc(1, sizeof *m);
    if (!m)
        return FERRY_ERR_NO_MEMORY;
    m->n = num_cols;
    memcpy(m->cols, cols, num_cols * sizeof *cols);
    if ((st = ferry__dataset_new_fields(&memory_fields_vt, m, n, f, num_cols, 0, out)) != FERRY_OK)
        return st;
    size_t classes;
    if ((st = count_classes(*out, m, &classes)) != FERRY_OK) {
        ferry_dataset_release(*out);
        *out = NULL;
        return FERRY_ARG_CONTEXT(st);
    }
    (*out)->num_classes = classes;
    return FERRY_OK;
}

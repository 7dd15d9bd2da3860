/* The loader's fields past the image and the label: each a region of the slot
 * after the labels (a ragged one with its i64 lengths after it), so that the
 * whole batch, every field, still crosses in the slot's one copy; their views
 * and the batch's lookup by name. */
#include <string.h>

#include "common/error.h"
#include "loader/internal.h"

static size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

/* offset + n * bytes, aligned; SIZE_MAX on overflow. */
static size_t region(size_t *at, size_t n, size_t bytes)
{
    size_t start = align_up(*at, 256), len;
    if (start < *at || !ferry_mul_size(n, bytes, &len) || len > SIZE_MAX - start)
        return SIZE_MAX;
    *at = start + len;
    return start;
}

size_t ferry_loader_layout_fields_(ferry_loader *l, size_t start)
{
    const ferry_field *f;
    size_t n, at = start;
    (void)ferry_dataset_fields(l->ds, &f, &n);
    l->nxf = 0;
    for (size_t k = 0; k < n; k++) {
        if (k == l->image_field || k == l->label_field)
            continue;
        ferry_loader_field *x = &l->xf[l->nxf++];
        *x = (ferry_loader_field){.index = k, .bytes = ferry_field_bytes(&f[k]),
                                  .ragged = f[k].ragged};
        if ((x->offset = region(&at, l->batch, x->bytes)) == SIZE_MAX)
            return SIZE_MAX;
        if (x->ragged && (x->lengths_offset = region(&at, l->batch, sizeof(int64_t))) == SIZE_MAX)
            return SIZE_MAX;
    }
    return at;
}

void ferry_loader_field_views_release_(ferry_slot *s)
{
    for (int v = 0; v < 3; v++) {
        struct ferry_batch_fields *b = &s->fields[v];
        for (size_t k = 0; k < b->n; k++) {
            if (b->tensors[k] != s->images[v] && b->tensors[k] != s->labels[v])
                ferry_tensor_release(b->tensors[k]);
            ferry_tensor_release(b->lengths[k]);
            b->tensors[k] = b->lengths[k] = NULL;
        }
    }
}

static ferry_status view_field(ferry_loader *l, ferry_slot *s, const ferry_field *f,
                               const ferry_loader_field *x, size_t size,
                               struct ferry_batch_fields *b)
{
    int64_t shape[FERRY_FIELD_MAX_DIMS + 1] = {(int64_t)size};
    for (size_t d = 0; d < f->ndim; d++)
        shape[d + 1] = (int64_t)f->shape[d];
    uint8_t *dev = s->dev;
    ferry_status st = ferry_tensor_from_blob(dev + x->offset, shape, f->ndim + 1, f->dtype, l->dev,
                                             &b->tensors[x->index]);
    if (st == FERRY_OK && x->ragged)
        st = ferry_tensor_from_blob(dev + x->lengths_offset, shape, 1, FERRY_DTYPE_I64, l->dev,
                                    &b->lengths[x->index]);
    return st;
}

ferry_status ferry_loader_field_views_(ferry_loader *l, ferry_slot *s, int v, size_t size)
{
    const ferry_field *f;
    size_t n;
    (void)ferry_dataset_fields(l->ds, &f, &n);
    struct ferry_batch_fields *b = &s->fields[v];
    for (size_t k = 0; k < b->n; k++) {
        if (b->tensors[k] != s->images[v] && b->tensors[k] != s->labels[v])
            ferry_tensor_release(b->tensors[k]);
        ferry_tensor_release(b->lengths[k]);
        b->tensors[k] = b->lengths[k] = NULL;
    }
    b->n = n;
    b->fields = f;
    if (l->image_field != SIZE_MAX)
        b->tensors[l->image_field] = s->images[v];
    if (l->label_field != SIZE_MAX)
        b->tensors[l->label_field] = s->labels[v];
    for (size_t j = 0; j < l->nxf; j++) {
        ferry_status st = view_field(l, s, &f[l->xf[j].index], &l->xf[j], size, b);
        if (st != FERRY_OK)
            return st;
    }
    return FERRY_OK;
}

void ferry_loader_field_dsts_(const ferry_loader *l, uint8_t *host, size_t pos, void *image,
                              int64_t *label, void **dst)
{
    if (l->image_field != SIZE_MAX)
        dst[l->image_field] = image;
    if (l->label_field != SIZE_MAX)
        dst[l->label_field] = label;
    for (size_t j = 0; j < l->nxf; j++)
        dst[l->xf[j].index] = host + l->xf[j].offset + pos * l->xf[j].bytes;
}

void ferry_loader_store_lengths_(const ferry_loader *l, uint8_t *host, size_t pos,
                                 const size_t *lengths)
{
    for (size_t j = 0; j < l->nxf; j++)
        if (l->xf[j].ragged) {
            int64_t v = (int64_t)lengths[l->xf[j].index];
            memcpy(host + l->xf[j].lengths_offset + pos * sizeof v, &v, sizeof v);
        }
}

/* ---- the batch's lookups ---- */
static size_t find(const ferry_batch *b, const char *name)
{
    if (!b || !b->fields || !name)
        return SIZE_MAX;
    for (size_t k = 0; k < b->fields->n; k++)
        if (strcmp(b->fields->fields[k].name, name) == 0)
            return k;
    return SIZE_MAX;
}

ferry_tensor *ferry_batch_field(const ferry_batch *b, const char *name)
{
    size_t k = find(b, name);
    return k == SIZE_MAX ? NULL : b->fields->tensors[k];
}

ferry_tensor *ferry_batch_lengths(const ferry_batch *b, const char *name)
{
    size_t k = find(b, name);
    return k == SIZE_MAX ? NULL : b->fields->lengths[k];
}

size_t ferry_batch_field_count(const ferry_batch *b)
{
    return b && b->fields ? b->fields->n : 0;
}

ferry_tensor *ferry_batch_field_at(const ferry_batch *b, size_t i, const ferry_field **info)
{
    if (info)
        *info = NULL;
    if (!b || !b->fields || i >= b->fields->n)
        return NULL;
    if (info)
        *info = &b->fields->fields[i];
    return b->fields->tensors[i];
}

/* The loader's fields past the image and the label: each a region of the slot
 * after the labels (a ragged one with its i64 lengths after it), so that the
 * whole batch, every field, still crosses in the slot's one copy; a field's
 * conversion to its batch dtype (on the device after the copy, by the workers
 * on the CPU); views of a field (a token window's inputs and targets) as
 * strided tensors over its region; and the batch's lookup by name. */
#include <string.h>

#include "common/error.h"
#include "loader/internal.h"
#include "tensor/internal.h"

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
                                  .ragged = f[k].ragged, .dtype = f[k].dtype,
                                  .out_dtype = f[k].dtype, .parent = SIZE_MAX};
        if (f[k].view_of) { /* no bytes of its own; the parent is checked in field_casts */
            for (size_t j = 0; j + 1 < l->nxf; j++)
                if (strcmp(f[l->xf[j].index].name, f[k].view_of) == 0)
                    x->parent = j;
            continue;
        }
        if ((x->offset = region(&at, l->batch, x->bytes)) == SIZE_MAX)
            return SIZE_MAX;
        if (x->ragged && (x->lengths_offset = region(&at, l->batch, sizeof(int64_t))) == SIZE_MAX)
            return SIZE_MAX;
    }
    return at;
}

/* Each view's parent is a field of the loader's own (not the image or label,
 * which go their own ways). */
static ferry_status check_views(const ferry_loader *l, const ferry_field *f)
{
    for (size_t j = 0; j < l->nxf; j++) {
        const ferry_field *x = &f[l->xf[j].index];
        if (x->view_of && l->xf[j].parent == SIZE_MAX)
            return ferry_fail(FERRY_ERR_UNSUPPORTED, "loader: field '%s' is a view of '%s', the "
                              "dataset's image or label field: the loader views other fields "
                              "only", x->name, x->view_of);
    }
    return FERRY_OK;
}

/* Field x is delivered as dt: a region of its own in field_out when dt differs. */
static ferry_status set_cast(ferry_loader *l, ferry_loader_field *x, const char *name,
                             ferry_dtype dt)
{
    x->cast = false;
    x->out_dtype = x->dtype;
    if (dt == x->dtype)
        return FERRY_OK;
    size_t elems = x->bytes / ferry_dtype_size(x->dtype), bytes;
    if (!ferry_mul_size(elems * ferry_dtype_size(dt), l->batch, &bytes) || bytes > SIZE_MAX / 4)
        return ferry_fail(FERRY_ERR_LIMIT, "field '%s' as %s: too large", name, ferry_dtype_name(dt));
    x->cast = true;
    x->out_dtype = dt;
    return FERRY_OK;
}

ferry_status ferry_loader_field_casts_(ferry_loader *l, const ferry_loader_config *cfg)
{
    const ferry_field *f;
    size_t n;
    (void)ferry_dataset_fields(l->ds, &f, &n);
    l->field_out_bytes = 0;
    ferry_status st = check_views(l, f);
    if (st != FERRY_OK)
        return st;
    if (cfg->num_field_dtypes && !cfg->field_dtypes)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "num_field_dtypes is %zu but field_dtypes is NULL",
                          cfg->num_field_dtypes);
    for (size_t j = 0; j < l->nxf; j++) { /* the dataset's own choice first */
        ferry_loader_field *x = &l->xf[j];
        ferry_dtype want = f[x->index].batch_dtype;
        if (!f[x->index].view_of && want != FERRY_DTYPE_F32 &&
            (st = set_cast(l, x, f[x->index].name, want)) != FERRY_OK)
            return st;
    }
    bool named[FERRY_FIELD_MAX] = {false};
    for (size_t c = 0; c < cfg->num_field_dtypes; c++) {
        const ferry_field_dtype *fd = &cfg->field_dtypes[c];
        size_t k;
        if (!fd->name || ferry_dataset_field_index(l->ds, fd->name, &k) != FERRY_OK)
            return ferry_fail(FERRY_ERR_INVALID_ARG, "field_dtypes[%zu]: %s", c,
                              fd->name ? ferry_last_error() : "the name is NULL");
        if (!ferry_dtype_size(fd->dtype))
            return ferry_fail(FERRY_ERR_INVALID_ARG, "field_dtypes[%zu] ('%s'): dtype %d", c,
                              fd->name, (int)fd->dtype);
        ferry_loader_field *x = NULL;
        for (size_t j = 0; j < l->nxf; j++)
            if (l->xf[j].index == k)
                x = &l->xf[j];
        if (!x)
            return ferry_fail(FERRY_ERR_INVALID_ARG, "field_dtypes[%zu]: '%s' is the dataset's %s "
                              "field (%s)", c, fd->name, k == l->image_field ? "image" : "label",
                              k == l->image_field ? "its dtype is out_dtype" : "labels are i64");
        if (x->parent != SIZE_MAX)
            return ferry_fail(FERRY_ERR_INVALID_ARG, "field_dtypes[%zu]: '%s' is a view of '%s': "
                              "name '%s', and its views follow", c, fd->name, f[k].view_of,
                              f[k].view_of);
        if (named[k]) /* the first entry for a field wins */
            continue;
        named[k] = true;
        if ((st = set_cast(l, x, fd->name, fd->dtype)) != FERRY_OK)
            return st;
    }
    for (size_t j = 0; j < l->nxf; j++) { /* the regions, in field order */
        ferry_loader_field *x = &l->xf[j];
        if (!x->cast)
            continue;
        x->out_offset = l->field_out_bytes;
        l->field_out_bytes += align_up(x->bytes / ferry_dtype_size(x->dtype) *
                                       ferry_dtype_size(x->out_dtype) * l->batch, 256);
    }
    return FERRY_OK;
}

ferry_status ferry_loader_convert_fields_(const ferry_loader *l, const ferry_slot *s, size_t count,
                                          ferry_stream *stream)
{
    for (size_t j = 0; j < l->nxf; j++) {
        const ferry_loader_field *x = &l->xf[j];
        if (!x->cast)
            continue;
        int64_t n = (int64_t)(count * (x->bytes / ferry_dtype_size(x->dtype)));
        ferry_status st = ferry_tensor_cast_(l->dev, stream, x->dtype, (uint8_t *)s->dev + x->offset,
                                             x->out_dtype, s->field_out + x->out_offset, n);
        if (st != FERRY_OK)
            return st;
    }
    return FERRY_OK;
}

void ferry_loader_convert_sample_fields_(const ferry_loader *l, const ferry_slot *s, size_t pos)
{
    for (size_t j = 0; j < l->nxf; j++) {
        const ferry_loader_field *x = &l->xf[j];
        if (!x->cast)
            continue;
        size_t elems = x->bytes / ferry_dtype_size(x->dtype);
        ferry_convert_host_(s->host + x->offset + pos * x->bytes, x->dtype,
                            s->field_out + x->out_offset + pos * elems * ferry_dtype_size(x->out_dtype),
                            x->out_dtype, (int64_t)elems);
    }
}

/* Drops view v's own tensors (the image's and label's belong to images[v],
 * labels[v], which make_view may already have replaced). */
static void release_table(struct ferry_batch_fields *b)
{
    for (size_t k = 0; k < b->n; k++) {
        if (b->owned[k])
            ferry_tensor_release(b->tensors[k]);
        ferry_tensor_release(b->lengths[k]);
        b->tensors[k] = b->lengths[k] = NULL;
        b->owned[k] = false;
    }
}

void ferry_loader_field_views_release_(ferry_slot *s)
{
    for (int v = 0; v < 3; v++)
        release_table(&s->fields[v]);
}

static ferry_status view_field(ferry_loader *l, ferry_slot *s, const ferry_field *f,
                               const ferry_loader_field *x, size_t size,
                               struct ferry_batch_fields *b)
{
    int64_t shape[FERRY_FIELD_MAX_DIMS + 1] = {(int64_t)size};
    for (size_t d = 0; d < f->ndim; d++)
        shape[d + 1] = (int64_t)f->shape[d];
    uint8_t *dev = s->dev;
    if (x->parent != SIZE_MAX) { /* the parent's rows, entries [view_start, ...) of each */
        const ferry_tensor *p = b->tensors[l->xf[x->parent].index];
        return ferry_tensor_view_(p, shape, p->strides, f->ndim + 1,
                                  p->offset + (int64_t)f->view_start * p->strides[1],
                                  &b->tensors[x->index]);
    }
    ferry_status st = x->cast ? ferry_tensor_from_blob(s->field_out + x->out_offset, shape,
                                                       f->ndim + 1, x->out_dtype, l->dev,
                                                       &b->tensors[x->index])
                              : ferry_tensor_from_blob(dev + x->offset, shape, f->ndim + 1,
                                                       f->dtype, l->dev, &b->tensors[x->index]);
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
    release_table(b);
    b->n = n;
    b->fields = f;
    if (l->image_field != SIZE_MAX)
        b->tensors[l->image_field] = s->images[v];
    if (l->label_field != SIZE_MAX)
        b->tensors[l->label_field] = s->labels[v];
    for (size_t j = 0; j < l->nxf; j++) {
        ferry_status st = view_field(l, s, &f[l->xf[j].index], &l->xf[j], size, b);
        b->owned[l->xf[j].index] = b->tensors[l->xf[j].index] != NULL;
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
        dst[l->xf[j].index] = l->xf[j].parent != SIZE_MAX ? NULL
                              : host + l->xf[j].offset + pos * l->xf[j].bytes;
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

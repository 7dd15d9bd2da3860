/* The dataset core: reference counting, the accessors every kind shares, and the
 * kinds that own no files: views (subset, indices, split), memory and custom. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/assert.h"
#include "common/error.h"
#include "common/mutex.h"
#include "ferry/rng.h"
#include "dataset/core/internal.h"

size_t ferry_sample_format_bytes(const ferry_sample_format *f)
{
    if (!f)
        return 0;
    size_t n, es = ferry_dtype_size(f->dtype);
    if (!ferry_mul_size(f->channels, f->height, &n) || !ferry_mul_size(n, f->width, &n) ||
        !ferry_mul_size(n, es, &n))
        return 0;
    return n;
}

ferry_status ferry__dataset_new(const ferry_dataset_vtable *vt, void *impl, size_t len,
                                const ferry_sample_format *fmt, size_t num_classes,
                                ferry_dataset **out)
{
    size_t bytes = ferry_sample_format_bytes(fmt);
    if (!bytes) {
        ferry_dataset tmp = {.impl = impl};
        vt->destroy(&tmp);
        return ferry_fail(FERRY_ERR_INVALID_ARG,
                          "dataset: invalid sample format %zux%zux%zu (%s)", fmt->channels,
                          fmt->height, fmt->width, ferry_dtype_name(fmt->dtype));
    }
    ferry_dataset *ds = ferry_host_calloc(1, sizeof *ds);
    if (!ds) {
        ferry_dataset tmp = {.impl = impl};
        vt->destroy(&tmp);
        return FERRY_ERR_NO_MEMORY;
    }
    atomic_init(&ds->refs, 1);
    ds->vt = vt;
    ds->impl = impl;
    ds->len = len;
    ds->format = *fmt;
    ds->sample_bytes = bytes;
    ds->num_classes = num_classes;
    ferry__fields_set_image(ds);
    *out = ds;
    return FERRY_OK;
}

ferry_status ferry__dataset_new_fields(const ferry_dataset_vtable *vt, void *impl, size_t len,
                                       const ferry_field *fields, size_t num_fields,
                                       size_t num_classes, ferry_dataset **out)
{
    ferry_dataset *ds = ferry_host_calloc(1, sizeof *ds);
    if (!ds) {
        ferry_dataset tmp = {.impl = impl};
        vt->destroy(&tmp);
        return FERRY_ERR_NO_MEMORY;
    }
    atomic_init(&ds->refs, 1);
    ds->vt = vt;
    ds->impl = impl;
    ds->len = len;
    ds->num_classes = num_classes;
    ferry__fields_set(ds, fields, num_fields);
    *out = ds;
    return FERRY_OK;
}

ferry_dataset *ferry_dataset_retain(ferry_dataset *ds)
{
    if (ds)
        atomic_fetch_add_explicit(&ds->refs, 1, memory_order_relaxed);
    return ds;
}

void ferry_dataset_release(ferry_dataset *ds)
{
    if (!ds || atomic_fetch_sub_explicit(&ds->refs, 1, memory_order_acq_rel) != 1)
        return;
    ds->vt->destroy(ds);
    if (ds->class_names) {
        for (size_t i = 0; i < ds->num_classes; i++)
            ferry_host_free(ds->class_names[i]);
        ferry_host_free(ds->class_names);
    }
    ferry_host_free(ds);
}

size_t ferry_dataset_len(const ferry_dataset *ds) { return ds ? ds->len : 0; }
const ferry_sample_format *ferry_dataset_format(const ferry_dataset *ds)
{
    return ds ? &ds->format : NULL;
}
size_t ferry_dataset_sample_bytes(const ferry_dataset *ds) { return ds ? ds->sample_bytes : 0; }
size_t ferry_dataset_class_count(const ferry_dataset *ds) { return ds ? ds->num_classes : 0; }

const char *ferry_dataset_class_name(const ferry_dataset *ds, size_t cls)
{
    if (!ds || !ds->class_names || cls >= ds->num_classes)
        return NULL;
    return ds->class_names[cls];
}

ferry_status ferry_dataset_label(const ferry_dataset *ds, size_t index, int64_t *label)
{
    if (!ds || !label)
        return FERRY_ARG_ERROR("%s is NULL", !ds ? "ds" : "label");
    if (index >= ds->len)
        return FERRY_ARG_ERROR("sample %zu is out of range (dataset has %zu)", index, ds->len);
    ferry_status st = ds->vt->label(ds, index, label);
    return st == FERRY_OK ? st : ferry__name_sample(ds, index, st);
}

const char *ferry_dataset_sample_name(const ferry_dataset *ds, size_t index)
{
    if (!ds || index >= ds->len || !ds->vt->name)
        return NULL;
    return ds->vt->name(ds, index);
}

ferry_status ferry_dataset_get(const ferry_dataset *ds, size_t index, void *dst,
                               size_t dst_bytes, const ferry_sample_ctx *ctx, int64_t *label)
{
    if (!ds || !dst)
        return FERRY_ARG_ERROR("%s is NULL", !ds ? "ds" : "dst");
    if (index >= ds->len)
        return FERRY_ARG_ERROR("sample %zu is out of range (dataset has %zu)", index, ds->len);
    if (dst_bytes < ds->sample_bytes)
        return FERRY_ARG_ERROR("sample %zu needs %zu bytes, dst has %zu", index, ds->sample_bytes,
                                    dst_bytes);
    int64_t ignored;
    ferry_status st = ferry__dataset_get_raw(ds, index, dst, ctx, label ? label : &ignored);
    return st == FERRY_OK ? st : ferry__name_sample(ds, index, st);
}

ferry_status ferry__name_sample(const ferry_dataset *ds, size_t index, ferry_status st)
{
    const char *name = ds->vt->name ? ds->vt->name(ds, index) : NULL;
    if (name)
        return ferry_fail_named(st, name);
    char nr[40];
    snprintf(nr, sizeof nr, "sample %zu", index);
    return ferry_fail_named(st, nr);
}

/* ---- views ---- */
typedef struct view {
    ferry_dataset *base;  /* one reference held */
    size_t begin;         /* subset: base index of view index 0 */
    size_t *indices;      /* or an explicit map (owned), NULL for a subset */
    /* The base's shards seen through the view, made at create when the base
     * has shards: the view's samples in the base's stored order, and each
     * shard's end in that order (owned). */
    size_t nshards;
    size_t *seq, *ends;
    /* A read plan's indices mapped to the base's, grown to the largest plan
     * (the same each epoch, so no allocation after the first). */
    ferry_mutex plan_lock;
    size_t *plan, plan_cap; /* guarded by plan_lock */
} view;

static size_t view_map(const ferry_dataset *ds, size_t i)
{
    const view *v = ds->impl;
    return v->indices ? v->indices[i] : v->begin + i;
}

static ferry_status view_get(const ferry_dataset *ds, size_t index, void *dst,
                             const ferry_sample_ctx *ctx, int64_t *label)
{
    const view *v = ds->impl;
    return ferry__dataset_get_raw(v->base, view_map(ds, index), dst, ctx, label);
}

static ferry_status view_get_fields(const ferry_dataset *ds, size_t index, void *const *dst,
                                    size_t *lengths, const ferry_sample_ctx *ctx)
{
    const view *v = ds->impl;
    return ferry__dataset_get_fields_raw(v->base, view_map(ds, index), dst, lengths, ctx);
}

static ferry_status view_label(const ferry_dataset *ds, size_t index, int64_t *label)
{
    const view *v = ds->impl;
    return v->base->vt->label(v->base, view_map(ds, index), label);
}

static const char *view_name(const ferry_dataset *ds, size_t index)
{
    const view *v = ds->impl;
    return ferry_dataset_sample_name(v->base, view_map(ds, index));
}

static void view_destroy(ferry_dataset *ds)
{
    view *v = ds->impl;
    if (!v)
        return;
    ferry_dataset_release(v->base);
    ferry_host_free(v->indices);
    ferry_host_free(v->seq);
    ferry_host_free(v->ends);
    ferry_host_free(v->plan);
    ferry_mutex_destroy(&v->plan_lock);
    ferry_host_free(v);
}

static size_t view_shard_ends(const ferry_dataset *ds, const size_t **ends, const size_t **seq)
{
    const view *v = ds->impl;
    *ends = v->nshards ? v->ends : NULL;
    if (seq)
        *seq = v->nshards ? v->seq : NULL;
    return v->nshards;
}

static void view_set_readahead(ferry_dataset *ds, size_t bytes)
{
    ferry__dataset_set_readahead(((view *)ds->impl)->base, bytes);
}

static ferry_status view_plan_reads(ferry_dataset *ds, const size_t *idx, size_t n, size_t head)
{
    view *v = ds->impl;
    if (!v->base->vt->plan_reads)
        return FERRY_OK;
    ferry_mutex_lock(&v->plan_lock);
    ferry_status st = FERRY_OK;
    if (idx && n > v->plan_cap) {
        size_t *p = ferry_host_realloc(v->plan, n * sizeof *p);
        if (p) {
            v->plan = p;
            v->plan_cap = n;
        } else {
            st = FERRY_ERR_NO_MEMORY;
        }
    }
    if (st == FERRY_OK) {
        for (size_t i = 0; idx && i < n; i++)
            v->plan[i] = view_map(ds, idx[i]);
        st = ferry__dataset_plan_reads(v->base, idx ? v->plan : NULL, idx ? n : 0,
                                       idx && head != SIZE_MAX ? view_map(ds, head) : SIZE_MAX);
    }
    ferry_mutex_unlock(&v->plan_lock);
    return st;
}

static size_t view_gzip_shards(const ferry_dataset *ds)
{
    return ferry__dataset_gzip_shards(((const view *)ds->impl)->base);
}

static const ferry_dataset_vtable view_vt = {
    .get = view_get, .get_fields = view_get_fields, .label = view_label, .name = view_name, .destroy = view_destroy,
    .shard_ends = view_shard_ends, .set_readahead = view_set_readahead, .plan_reads = view_plan_reads,
    .gzip_shards = view_gzip_shards};

/* A (stored position, view index) pair, ordered by position then index. */
typedef struct placed {
    size_t pos, i;
} placed;

static int placed_cmp(const void *a, const void *b)
{
    const placed *x = a, *y = b;
    if (x->pos != y->pos)
        return x->pos < y->pos ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

/* The base's shards seen through view ds (n samples): its samples sorted by
 * where the base stores them, and per shard the count so far. A sample the
 * view repeats appears as often. */
static ferry_status view_layout(ferry_dataset *ds)
{
    view *v = ds->impl;
    const size_t *bends, *bseq;
    size_t k = ferry__dataset_shard_ends(v->base, &bends, &bseq);
    if (!k)
        return FERRY_OK;
    size_t blen = v->base->len, n = ds->len;
    size_t *pos = NULL; /* base index -> stored position; NULL: the same */
    placed *pl = ferry_host_malloc((n ? n : 1) * sizeof *pl);
    v->seq = ferry_host_malloc((n ? n : 1) * sizeof *v->seq);
    v->ends = ferry_host_malloc(k * sizeof *v->ends);
    if (bseq)
        pos = ferry_host_malloc((blen ? blen : 1) * sizeof *pos);
    if (!pl || !v->seq || !v->ends || (bseq && !pos)) {
        ferry_host_free(pl);
        ferry_host_free(pos);
        return FERRY_ERR_NO_MEMORY;
    }
    for (size_t p = 0; bseq && p < blen; p++)
        pos[bseq[p]] = p;
    for (size_t i = 0; i < n; i++) {
        size_t b = view_map(ds, i);
        pl[i] = (placed){pos ? pos[b] : b, i};
    }
    qsort(pl, n, sizeof *pl, placed_cmp);
    size_t j = 0;
    for (size_t s = 0; s < k; s++) {
        while (j < n && pl[j].pos < bends[s]) {
            v->seq[j] = pl[j].i;
            j++;
        }
        v->ends[s] = j;
    }
    FERRY_ASSERT(j == n);
    v->nshards = k;
    ferry_host_free(pl);
    ferry_host_free(pos);
    return FERRY_OK;
}

/* Takes ownership of indices (may be NULL for a subset). */
static ferry_status view_new(ferry_dataset *base, size_t begin, size_t *indices, size_t n,
                             ferry_dataset **out)
{
    view *v = ferry_host_calloc(1, sizeof *v);
    if (!v) {
        ferry_host_free(indices);
        return FERRY_ERR_NO_MEMORY;
    }
    v->base = ferry_dataset_retain(base);
    v->begin = begin;
    v->indices = indices;
    ferry_mutex_init(&v->plan_lock);
    /* The base's fields, and its format as it is (an HWC image's is not the
     * planar one a field list gives). */
    ferry_status st = ferry__dataset_new_fields(&view_vt, v, n, base->fields, base->num_fields,
                                                base->num_classes, out);
    if (st != FERRY_OK)
        return st;
    (*out)->format = base->format;
    (*out)->sample_bytes = base->sample_bytes;
    if ((st = view_layout(*out)) != FERRY_OK) {
        ferry_dataset_release(*out);
        *out = NULL;
        return st;
    }
    /* Views share the base's class names by copying them: names outlive nothing. */
    if (base->class_names) {
        ferry_dataset *ds = *out;
        ds->class_names = ferry_host_calloc(base->num_classes, sizeof(char *));
        for (size_t i = 0; ds->class_names && i < base->num_classes; i++)
            if (!(ds->class_names[i] = ferry_host_strdup(base->class_names[i]))) {
                ferry_dataset_release(ds);
                *out = NULL;
                return FERRY_ERR_NO_MEMORY;
            }
        if (!ds->class_names) {
            ferry_dataset_release(ds);
            *out = NULL;
            return FERRY_ERR_NO_MEMORY;
        }
    }
    return FERRY_OK;
}

ferry_status ferry_dataset_subset(ferry_dataset *base, size_t begin, size_t end,
                                  ferry_dataset **out)
{
    if (!base || !out)
        return FERRY_ARG_ERROR("NULL argument");
    if (begin > end || end > base->len)
        return ferry_fail(FERRY_ERR_INVALID_ARG,
                          "subset [%zu, %zu) does not fit a dataset of %zu samples", begin, end,
                          base->len);
    return view_new(base, begin, NULL, end - begin, out);
}

ferry_status ferry_dataset_indices(ferry_dataset *base, const size_t *indices, size_t n,
                                   ferry_dataset **out)
{
    if (!base || !out || (!indices && n))
        return FERRY_ARG_ERROR("NULL argument");
    for (size_t i = 0; i < n; i++)
        if (indices[i] >= base->len)
            return ferry_fail(FERRY_ERR_INVALID_ARG,
                              "indices[%zu] = %zu is out of range (dataset has %zu)", i,
                              indices[i], base->len);
    size_t *copy = ferry_host_calloc(n ? n : 1, sizeof *copy);
    if (!copy)
        return FERRY_ERR_NO_MEMORY;
    if (n)
        memcpy(copy, indices, n * sizeof *copy);
    return view_new(base, 0, copy, n, out);
}

ferry_status ferry_dataset_split(ferry_dataset *base, double val_fraction, uint64_t seed,
                                 ferry_dataset **train, ferry_dataset **val)
{
    if (!base || !train || !val)
        return FERRY_ARG_ERROR("NULL argument");
    if (!(val_fraction >= 0.0 && val_fraction <= 1.0))
        return ferry_fail(FERRY_ERR_INVALID_ARG, "split: val_fraction %g is not in [0, 1]",
                          val_fraction);
    size_t n = base->len;
    size_t nval = (size_t)llround((double)n * val_fraction);
    if (nval > n)
        nval = n;
    size_t *perm = ferry_host_calloc(n ? n : 1, sizeof *perm);
    if (!perm)
        return FERRY_ERR_NO_MEMORY;
    for (size_t i = 0; i < n; i++)
        perm[i] = i;
    /* Fisher-Yates from the split stream: the same seed gives the same split anywhere. */
    ferry_rng r;
    ferry_rng_init(&r, seed, FERRY_RNG_SPLIT, 0);
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)ferry_rng_below(&r, i);
        size_t t = perm[i - 1];
        perm[i - 1] = perm[j];
        perm[j] = t;
    }
    /* Each side keeps base order, which reads files in a friendlier order. */
    ferry_dataset *tr = NULL, *va = NULL;
    ferry_status st = ferry_dataset_indices(base, perm, n - nval, &tr);
    if (st == FERRY_OK)
        st = ferry_dataset_indices(base, perm + (n - nval), nval, &va);
    ferry_host_free(perm);
    if (st != FERRY_OK) {
        ferry_dataset_release(tr);
        return st;
    }
    *train = tr;
    *val = va;
    return FERRY_OK;
}

/* ---- memory ---- */
typedef struct memory_ds {
    const uint8_t *data;
    const int64_t *labels;
} memory_ds;

static ferry_status memory_get(const ferry_dataset *ds, size_t index, void *dst,
                               const ferry_sample_ctx *ctx, int64_t *label)
{
    (void)ctx;
    const memory_ds *m = ds->impl;
    memcpy(dst, m->data + index * ds->sample_bytes, ds->sample_bytes);
    *label = m->labels ? m->labels[index] : -1;
    return FERRY_OK;
}

static ferry_status memory_label(const ferry_dataset *ds, size_t index, int64_t *label)
{
    const memory_ds *m = ds->impl;
    *label = m->labels ? m->labels[index] : -1;
    return FERRY_OK;
}

static void memory_destroy(ferry_dataset *ds) { ferry_host_free(ds->impl); }

static const ferry_dataset_vtable memory_vt = {.get = memory_get, .label = memory_label, .destroy = memory_destroy};

ferry_status ferry_dataset_memory(const void *data, const ferry_sample_format *fmt, size_t n,
                                  const int64_t *labels, ferry_dataset **out)
{
    if (!fmt || !out || (!data && n))
        return FERRY_ARG_ERROR("NULL argument");
    if (fmt->dtype != FERRY_DTYPE_U8 && fmt->dtype != FERRY_DTYPE_F32)
        return ferry_fail(FERRY_ERR_DTYPE, "memory dataset: dtype %s is not u8 or f32",
                          ferry_dtype_name(fmt->dtype));
    size_t bytes = ferry_sample_format_bytes(fmt), total;
    if (!bytes || !ferry_mul_size(bytes, n, &total))
        return ferry_fail(FERRY_ERR_INVALID_ARG, "memory dataset: invalid format %zux%zux%zu x %zu",
                          fmt->channels, fmt->height, fmt->width, n);
    size_t classes = 0;
    for (size_t i = 0; labels && i < n; i++) {
        if (labels[i] < 0)
            return ferry_fail(FERRY_ERR_INVALID_ARG, "memory dataset: labels[%zu] = %lld is negative",
                              i, (long long)labels[i]);
        if ((size_t)labels[i] + 1 > classes)
            classes = (size_t)labels[i] + 1;
    }
    memory_ds *m = ferry_host_calloc(1, sizeof *m);
    if (!m)
        return FERRY_ERR_NO_MEMORY;
    m->data = data;
    m->labels = labels;
    return ferry__dataset_new(&memory_vt, m, n, fmt, classes, out);
}

/* ---- custom ---- */
typedef struct custom_ds {
    ferry_dataset_callbacks cb;
    void *user;
    int owned;     /* user is ours to destroy: set once creation has succeeded */
    size_t *ends;  /* cb.shard_ends copied (owned), or NULL */
} custom_ds;

static ferry_status custom_get(const ferry_dataset *ds, size_t index, void *dst,
                               const ferry_sample_ctx *ctx, int64_t *label)
{
    const custom_ds *c = ds->impl;
    ferry_clear_error();
    ferry_status st = c->cb.get(c->user, index, dst, ds->sample_bytes, ctx, label);
    if (st != FERRY_OK) {
        /* The callback says why; ferry_dataset_get and ferry_dataset_label
         * put the sample's name in front. */
        if (!ferry_last_error()[0])
            ferry_fail(st, "the get callback failed (%s)", ferry_status_str(st));
    }
    return st;
}

static ferry_status custom_label(const ferry_dataset *ds, size_t index, int64_t *label)
{
    /* Callbacks have no label-only entry: this decodes into a temporary buffer. */
    void *tmp = ferry_host_malloc(ds->sample_bytes);
    if (!tmp)
        return FERRY_ERR_NO_MEMORY;
    ferry_status st = custom_get(ds, index, tmp, NULL, label);
    ferry_host_free(tmp);
    return st;
}

static const char *custom_name(const ferry_dataset *ds, size_t index)
{
    const custom_ds *c = ds->impl;
    return c->cb.name ? c->cb.name(c->user, index) : NULL;
}

static void custom_destroy(ferry_dataset *ds)
{
    custom_ds *c = ds->impl;
    if (!c)
        return;
    if (c->owned && c->cb.destroy)
        c->cb.destroy(c->user);
    ferry_host_free(c->ends);
    ferry_host_free(c);
}

static size_t custom_shard_ends(const ferry_dataset *ds, const size_t **ends, const size_t **seq)
{
    const custom_ds *c = ds->impl;
    *ends = c->ends;
    if (seq)
        *seq = NULL; /* stored in index order */
    return c->ends ? c->cb.num_shards : 0;
}

static const ferry_dataset_vtable custom_vt = {.get = custom_get, .label = custom_label, .name = custom_name,
                                               .destroy = custom_destroy, .shard_ends = custom_shard_ends};

ferry_status ferry__check_shard_ends(const size_t *ends, size_t num_shards, size_t len)
{
    if ((num_shards > 0) != (ends != NULL))
        return ferry_fail(FERRY_ERR_INVALID_ARG, "custom dataset: num_shards is %zu but shard_ends is %s",
                          num_shards, ends ? "set" : "NULL");
    for (size_t k = 0; k < num_shards; k++)
        if ((k && ends[k] < ends[k - 1]) || ends[k] > len ||
            (k + 1 == num_shards && ends[k] != len))
            return ferry_fail(FERRY_ERR_INVALID_ARG,
                              "custom dataset: shard_ends[%zu] = %zu: the ends must not decrease and the "
                              "last must be len (%zu)", k, ends[k], len);
    return FERRY_OK;
}

ferry_status ferry_dataset_custom(const ferry_dataset_callbacks *cb, void *user,
                                  ferry_dataset **out)
{
    if (!cb || !out || !cb->get)
        return FERRY_ARG_ERROR("NULL callbacks or get");
    if (!ferry_sample_format_bytes(&cb->format) ||
        (cb->format.layout != FERRY_LAYOUT_CHW && cb->format.layout != FERRY_LAYOUT_HWC))
        return ferry_fail(FERRY_ERR_INVALID_ARG,
                          "custom dataset: invalid sample format (%zux%zux%zu, layout %d, dtype %d)",
                          cb->format.channels, cb->format.height, cb->format.width,
                          (int)cb->format.layout, (int)cb->format.dtype);
    ferry_status st = ferry__check_shard_ends(cb->shard_ends, cb->num_shards, cb->len);
    if (st != FERRY_OK)
        return st;
    custom_ds *c = ferry_host_calloc(1, sizeof *c);
    if (!c)
        return FERRY_ERR_NO_MEMORY;
    if (cb->num_shards && !(c->ends = ferry_host_malloc(cb->num_shards * sizeof *c->ends))) {
        ferry_host_free(c);
        return FERRY_ERR_NO_MEMORY;
    }
    for (size_t k = 0; k < cb->num_shards; k++)
        c->ends[k] = cb->shard_ends[k];
    c->cb = *cb;
    c->cb.shard_ends = NULL; /* the caller's array need not outlive create */
    c->user = user;
    st = ferry__dataset_new(&custom_vt, c, cb->len, &cb->format, cb->num_classes, out);
    if (st == FERRY_OK)
        c->owned = 1;
    return st;
}

size_t ferry_dataset_unreadable_count(const ferry_dataset *ds, const char **first)
{
    if (first)
        *first = ds && ds->unreadable ? ds->unreadable_first : NULL;
    return ds ? ds->unreadable : 0;
}

/* ---- capabilities (dataset/core/caps.h): what the kind's vtable declares ---- */
bool ferry__dataset_uses_scratch(const ferry_dataset *ds)
{
    while (ds && ds->vt == &view_vt)
        ds = ((const view *)ds->impl)->base;
    return ds && ds->vt->uses_scratch;
}

size_t ferry__dataset_shard_ends(const ferry_dataset *ds, const size_t **ends, const size_t **seq)
{
    *ends = NULL;
    if (seq)
        *seq = NULL;
    return ds && ds->vt->shard_ends ? ds->vt->shard_ends(ds, ends, seq) : 0;
}

void ferry__dataset_set_readahead(ferry_dataset *ds, size_t bytes)
{
    if (ds && ds->vt->set_readahead)
        ds->vt->set_readahead(ds, bytes);
}

ferry_status ferry__dataset_plan_reads(ferry_dataset *ds, const size_t *idx, size_t n, size_t head)
{
    return ds && ds->vt->plan_reads ? ds->vt->plan_reads(ds, idx, n, head) : FERRY_OK;
}

size_t ferry__dataset_gzip_shards(const ferry_dataset *ds)
{
    return ds && ds->vt->gzip_shards ? ds->vt->gzip_shards(ds) : 0;
}

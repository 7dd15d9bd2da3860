/* A custom dataset declared by fields: the caller's get fills one destination
 * per field (ferry_dataset_custom_fields). */
#include <string.h>

#include "common/error.h"
#include "dataset/core/internal.h"

typedef struct custom_fields {
    ferry_dataset_field_callbacks cb;
    void *user;
    bool owned;    /* user is ours to destroy: set once creation has succeeded */
    size_t *ends;  /* cb.shard_ends copied (owned), or NULL */
} custom_fields;

static ferry_status cf_get_fields(const ferry_dataset *ds, size_t index, void *const *dst,
                                  size_t *lengths, const ferry_sample_ctx *ctx)
{
    const custom_fields *c = ds->impl;
    return c->cb.get(c->user, index, dst, lengths, ctx);
}

/* Callbacks have no label-only entry: the sample is decoded into a buffer of
 * the call's own (ferry__dataset_get_raw does without an image field too). */
static ferry_status cf_label(const ferry_dataset *ds, size_t index, int64_t *label)
{
    if (ds->label_field == SIZE_MAX)
        return ferry_fail(FERRY_ERR_UNSUPPORTED, "the dataset has no label field (an i64 scalar)");
    size_t total = 0, off[FERRY_FIELD_MAX], lengths[FERRY_FIELD_MAX];
    for (size_t k = 0; k < ds->num_fields; k++) {
        off[k] = total;
        total += (ferry_field_bytes(&ds->fields[k]) + 63) / 64 * 64;
        lengths[k] = ds->fields[k].ragged ? SIZE_MAX : 1;
    }
    uint8_t *buf = ferry_host_aligned(64, total);
    if (!buf)
        return FERRY_ERR_NO_MEMORY;
    void *d[FERRY_FIELD_MAX];
    for (size_t k = 0; k < ds->num_fields; k++)
        d[k] = ds->fields[k].view_of ? NULL : buf + off[k];
    ferry_status st = cf_get_fields(ds, index, d, lengths, NULL);
    if (st == FERRY_OK)
        memcpy(label, d[ds->label_field], sizeof *label);
    ferry_host_free(buf);
    return st;
}

static const char *cf_name(const ferry_dataset *ds, size_t index)
{
    const custom_fields *c = ds->impl;
    return c->cb.name ? c->cb.name(c->user, index) : NULL;
}

static void cf_destroy(ferry_dataset *ds)
{
    custom_fields *c = ds->impl;
    if (!c)
        return;
    if (c->owned && c->cb.destroy)
        c->cb.destroy(c->user);
    ferry_host_free(c->ends);
    ferry_host_free(c);
}

static size_t cf_shard_ends(const ferry_dataset *ds, const size_t **ends, const size_t **seq)
{
    const custom_fields *c = ds->impl;
    *ends = c->ends;
    if (seq)
        *seq = NULL; /* stored in index order */
    return c->ends ? c->cb.num_shards : 0;
}

static const ferry_dataset_vtable custom_fields_vt = {
    .get_fields = cf_get_fields, .label = cf_label, .name = cf_name, .destroy = cf_destroy,
    .shard_ends = cf_shard_ends};

ferry_status ferry_dataset_custom_fields(const ferry_dataset_field_callbacks *cb, void *user,
                                         ferry_dataset **out)
{
    if (!out)
        return FERRY_ARG_ERROR("out is NULL");
    *out = NULL;
    if (!cb || !cb->get)
        return FERRY_ARG_ERROR("NULL callbacks or get");
    ferry_status st = ferry__fields_check(cb->fields, cb->num_fields, "custom dataset");
    if (st == FERRY_OK)
        st = ferry__check_shard_ends(cb->shard_ends, cb->num_shards, cb->len);
    if (st != FERRY_OK)
        return FERRY_ARG_CONTEXT(st);
    custom_fields *c = ferry_host_calloc(1, sizeof *c);
    if (!c)
        return FERRY_ERR_NO_MEMORY;
    if (cb->num_shards && !(c->ends = ferry_host_malloc(cb->num_shards * sizeof *c->ends))) {
        ferry_host_free(c);
        return FERRY_ERR_NO_MEMORY;
    }
    if (cb->num_shards)
        memcpy(c->ends, cb->shard_ends, cb->num_shards * sizeof *c->ends);
    c->cb = *cb;
    c->cb.shard_ends = NULL; /* the caller's arrays need not outlive create */
    c->cb.fields = NULL;
    c->user = user;
    st = ferry__dataset_new_fields(&custom_fields_vt, c, cb->len, cb->fields, cb->num_fields,
                                   cb->num_classes, out);
    if (st == FERRY_OK)
        c->owned = true;
    return st;
}

/* The token dataset's samples as fields: "tokens", the row's T + 1 tokens as
 * stored (u16 or u32, read straight into the slot: no host copy, no widening
 * on the host), delivered as token_dtype (the loader widens them on the
 * device after the batch's one copy); "inputs" and "targets", views of its
 * first T and last T; for documents "offsets" (ragged i32 [T + 1]:
 * cu_seqlens, its length ndocs + 1) and "positions" (i32 [T]). */
#include <string.h>

#include "common/error.h"
#include "dataset/core/internal.h"
#include "dataset/tokens/tokens.h"

static ferry_status fields_get(void *user, size_t index, void *const *dst, size_t *lengths,
                               const struct ferry_sample_ctx *ctx)
{
    (void)ctx;
    ferry_tokens *t = user;
    ferry_status st = ferry_tokens_read(t, index, dst[0]);
    if (st != FERRY_OK || t->cut != FERRY_TOKENS_DOCUMENTS)
        return st;
    size_t nd = 0;
    st = ferry_tokens_row_docs(t, index, dst[3], t->T + 1, &nd, dst[4]);
    lengths[3] = nd + 1;
    return st;
}

static const char *fields_name(void *user, size_t index)
{
    ferry_tokens *t = user;
    return ferry__tokens_sample_name(t, index);
}

static void fields_destroy(void *user)
{
    ferry__tokens_unref(user);
}

ferry_status ferry__tokens_make_dataset(ferry_tokens *t)
{
    size_t T = t->T, n = 0;
    ferry_dtype stored = t->src.token_bytes == 2 ? FERRY_DTYPE_U16 : FERRY_DTYPE_U32;
    ferry_field f[5];
    f[n++] = (ferry_field){.name = "tokens", .dtype = stored, .ndim = 1, .shape = {T + 1},
                           .batch_dtype = t->dtype};
    f[n++] = (ferry_field){.name = "inputs", .dtype = stored, .ndim = 1, .shape = {T},
                           .view_of = "tokens", .view_start = 0};
    f[n++] = (ferry_field){.name = "targets", .dtype = stored, .ndim = 1, .shape = {T},
                           .view_of = "tokens", .view_start = 1};
    if (t->cut == FERRY_TOKENS_DOCUMENTS) {
        f[n++] = (ferry_field){.name = "offsets", .dtype = FERRY_DTYPE_I32, .ndim = 1,
                               .shape = {T + 1}, .ragged = true};
        f[n++] = (ferry_field){.name = "positions", .dtype = FERRY_DTYPE_I32, .ndim = 1,
                               .shape = {T}};
    }
    ferry_dataset_field_callbacks cb = {.len = t->len, .fields = f, .num_fields = n,
                                        .get = fields_get, .name = fields_name,
                                        .destroy = fields_destroy};
    if (t->cut == FERRY_TOKENS_WINDOWS) {
        cb.shard_ends = t->win_ends; /* windows come in shard runs: streaming reads them so */
        cb.num_shards = t->src.n;
    }
    ferry_status st = ferry_dataset_custom_fields(&cb, t, &t->ds);
    if (st == FERRY_OK)
        atomic_fetch_add(&t->refs, 1);
    return st;
}

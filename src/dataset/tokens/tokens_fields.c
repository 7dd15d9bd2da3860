/* The token dataset's samples as fields (fields.h): "inputs" and "targets"
 * ([T], i32 or i64: the row's first T tokens and its last T), and for
 * documents "offsets" (ragged i32 [T + 1]: cu_seqlens, its length ndocs + 1)
 * and "positions" (i32 [T]); with token_dtype U8, "tokens" (the row's T + 1
 * tokens as stored) in place of inputs and targets. The row is read once into the worker's
 * scratch and widened from there into the slot. */
#include <string.h>

#include "common/error.h"
#include "dataset/core/internal.h"
#include "dataset/tokens/tokens.h"

static uint32_t tok(const uint8_t *row, size_t j, size_t width)
{
    const uint8_t *p = row + j * width; /* little-endian, as the files */
    uint32_t v = (uint32_t)p[0] | (uint32_t)p[1] << 8;
    return width == 2 ? v : v | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Tokens 0..T-1 into inputs, 1..T into targets: one pass per width and
 * dtype, so that the compiler vectorises each. */
static void widen(const uint8_t *row, size_t width, size_t T, ferry_dtype dt, void *in, void *tg)
{
    if (dt == FERRY_DTYPE_I64) {
        int64_t *x = in, *y = tg;
        if (width == 2)
            for (size_t j = 0; j < T; j++)
                x[j] = tok(row, j, 2);
        else
            for (size_t j = 0; j < T; j++)
                x[j] = tok(row, j, 4);
        memcpy(y, x + 1, (T - 1) * sizeof *y);
        y[T - 1] = tok(row, T, width);
        return;
    }
    int32_t *x = in, *y = tg;
    if (width == 2)
        for (size_t j = 0; j < T; j++)
            x[j] = (int32_t)tok(row, j, 2);
    else
        for (size_t j = 0; j < T; j++)
            x[j] = (int32_t)tok(row, j, 4);
    memcpy(y, x + 1, (T - 1) * sizeof *y);
    y[T - 1] = (int32_t)tok(row, T, width);
}

static ferry_status fields_get(void *user, size_t index, void *const *dst, size_t *lengths,
                               const struct ferry_sample_ctx *ctx)
{
    ferry_tokens *t = user;
    size_t base = 1; /* the first field after the tokens' */
    ferry_status st;
    if (t->dtype == FERRY_DTYPE_U8) {
        st = ferry_tokens_read(t, index, dst[0]);
    } else {
        ferry_scratch *s = NULL, *own = NULL;
        size_t w = t->src.token_bytes;
        st = ferry__sample_scratch(ctx, &s, &own);
        if (st == FERRY_OK)
            st = ferry__scratch_grow(&s->file, &s->file_cap, (t->T + 1) * w);
        if (st == FERRY_OK)
            st = ferry_tokens_read(t, index, s->file);
        if (st == FERRY_OK)
            widen(s->file, w, t->T, t->dtype, dst[0], dst[1]);
        ferry_scratch_destroy(own);
        base = 2;
    }
    if (st != FERRY_OK || t->cut != FERRY_TOKENS_DOCUMENTS)
        return st;
    size_t nd = 0;
    st = ferry_tokens_row_docs(t, index, dst[base], t->T + 1, &nd, dst[base + 1]);
    lengths[base] = nd + 1;
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
    ferry_field f[4];
    if (t->dtype == FERRY_DTYPE_U8) {
        f[n++] = (ferry_field){.name = "tokens", .dtype = FERRY_DTYPE_U8, .ndim = 1,
                               .shape = {(T + 1) * t->src.token_bytes}};
    } else {
        f[n++] = (ferry_field){.name = "inputs", .dtype = t->dtype, .ndim = 1, .shape = {T}};
        f[n++] = (ferry_field){.name = "targets", .dtype = t->dtype, .ndim = 1, .shape = {T}};
    }
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

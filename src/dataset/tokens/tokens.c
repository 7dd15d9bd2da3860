/* The token dataset's samples: the shards (tokens_source.c) cut into windows
 * or packed document rows (tokens_pack.c) when opened (tokens_open.c), each
 * row's T + 1 tokens and its document boundaries; tokens_fields.c serves
 * them as fields. The handle and its dataset share the state: it is freed
 * when both are gone. */
#include <stdatomic.h>
#include <string.h>

#include "common/error.h"
#include "dataset/tokens/tokens.h"


void ferry__tokens_unref(ferry_tokens *t)
{
    if (atomic_fetch_sub(&t->refs, 1) != 1)
        return;
    ferry__tok_source_close(&t->src);
    ferry_host_free(t->win_ends);
    ferry__tok_rows_free(&t->rows);
    ferry_host_free(t);
}

static size_t shard_of_window(const ferry_tokens *t, size_t i)
{
    size_t lo = 0, hi = t->src.n; /* the first k with win_ends[k] > i */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->win_ends[mid] > i)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

static void fill_pad(void *dst, size_t from, size_t to, size_t width, uint32_t pad)
{
    for (size_t j = from; j < to; j++) {
        uint8_t *p = (uint8_t *)dst + j * width;
        for (size_t b = 0; b < width; b++)
            p[b] = (uint8_t)(pad >> (8 * b));
    }
}

const char *ferry__tokens_sample_name(const ferry_tokens *t, size_t i)
{
    if (t->cut != FERRY_TOKENS_WINDOWS || i >= t->len)
        return NULL;
    return t->src.shards[shard_of_window(t, i)].path;
}

ferry_status ferry_tokens_read(const ferry_tokens *t, size_t i, void *dst)
{
    if (!t || !dst)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "ferry_tokens_read: %s is NULL", t ? "dst" : "t");
    if (i >= t->len)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "ferry_tokens_read: sample %zu of %zu", i, t->len);
    ferry_tok_source *src = (ferry_tok_source *)&t->src; /* reads change only its counters */
    if (t->cut == FERRY_TOKENS_WINDOWS) {
        size_t k = shard_of_window(t, i);
        uint64_t w = i - (k ? t->win_ends[k - 1] : 0);
        return ferry__tok_read(src, k, w * t->T, t->T + 1, dst);
    }
    size_t at = 0;
    for (size_t p = t->rows.first[i]; p < t->rows.first[i + 1]; p++) {
        const ferry_tok_piece *pc = &t->rows.pieces[p];
        ferry_status st = ferry__tok_read(src, pc->shard, pc->off, pc->len,
                                          (uint8_t *)dst + at * src->token_bytes);
        if (st != FERRY_OK)
            return st;
        at += pc->len;
    }
    fill_pad(dst, at, t->T + 1, src->token_bytes, t->pad);
    return FERRY_OK;
}

ferry_status ferry_tokens_row_docs(const ferry_tokens *t, size_t i, int32_t *offsets, size_t cap,
                                   size_t *ndocs, int32_t *positions)
{
    if (!t || !offsets || !ndocs)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "ferry_tokens_row_docs: t, offsets and ndocs "
                          "are required");
    if (i >= t->len)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "ferry_tokens_row_docs: row %zu of %zu", i, t->len);
    size_t first = 0, end = 1, n = 0, T = t->T;
    if (t->cut == FERRY_TOKENS_DOCUMENTS) {
        first = t->rows.first[i];
        end = t->rows.first[i + 1];
    }
    size_t at = 0;
    for (size_t p = first; p < end && at < T; p++) {
        size_t len = t->cut == FERRY_TOKENS_DOCUMENTS ? t->rows.pieces[p].len : T + 1;
        if (n + 1 >= cap)
            return ferry_fail(FERRY_ERR_INVALID_ARG, "ferry_tokens_row_docs: room for %zu "
                              "offsets is too little (T + 1 = %zu always suffices)", cap, T + 1);
        offsets[n++] = (int32_t)at;
        for (size_t j = at; positions && j < T && j < at + len; j++)
            positions[j] = (int32_t)(j - at);
        at += len;
    }
    size_t valid = at < T ? at : T;
    offsets[n] = (int32_t)valid;
    for (size_t j = valid; positions && j < T; j++) /* padding counts on */
        positions[j] = n ? positions[valid - 1] + (int32_t)(j - valid + 1) : (int32_t)j;
    *ndocs = n;
    return FERRY_OK;
}

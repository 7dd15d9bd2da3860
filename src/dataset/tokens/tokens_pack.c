/* Documents into rows: a seeded order of the documents, then nanochat's best
 * fit over a buffer of candidates. Each row takes the longest candidate that
 * fits what is left of it (the earliest taken among equal lengths); when none
 * fits, the shortest is cropped to fill the row (its start kept: every
 * document in a row starts at its own first token). So rows are full and
 * start at a document's start; only the last row can be padded. The
 * candidates wait in bins by length (tokens_bins.c), so a pick costs a few
 * word operations. tests/ref/make_tokens_ref.py does the same independently. */
#include <string.h>

#include "common/error.h"
#include "dataset/tokens/tokens.h"

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void ferry__tok_order(uint64_t seed, size_t *perm, size_t n)
{
    uint64_t s = seed ^ FERRY_TOK_ORDER_SALT;
    for (size_t i = 0; i < n; i++)
        perm[i] = i;
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)(splitmix64(&s) % (uint64_t)i);
        size_t t = perm[i - 1];
        perm[i - 1] = perm[j];
        perm[j] = t;
    }
}

typedef struct packer {
    const ferry_tok_doc *docs;
    const size_t *order;
    size_t n, next, buffer;
    ferry_tok_bins *bins;
    ferry_tok_rows *out;
    size_t pieces_cap;
} packer;

static void refill(packer *p)
{
    while (ferry__tok_bins_count(p->bins) < p->buffer && p->next < p->n) {
        ferry__tok_bins_add(p->bins, p->docs[p->order[p->next]].len, p->next);
        p->next++;
    }
}

static ferry_status push_piece(packer *p, ferry_tok_piece pc)
{
    ferry_tok_rows *r = p->out;
    if (r->npieces == p->pieces_cap) {
        size_t cap = p->pieces_cap ? p->pieces_cap * 2 : 1024;
        ferry_tok_piece *v = ferry_host_realloc(r->pieces, cap * sizeof *v);
        if (!v)
            return FERRY_ERR_NO_MEMORY;
        r->pieces = v;
        p->pieces_cap = cap;
    }
    r->pieces[r->npieces++] = pc;
    return FERRY_OK;
}

static ferry_status fill_row(packer *p, size_t cap)
{
    uint64_t left = cap;
    while (left) {
        refill(p);
        if (!ferry__tok_bins_count(p->bins)) {
            p->out->padded += left;
            return FERRY_OK;
        }
        uint64_t len;
        size_t seq;
        ferry__tok_bins_take(p->bins, left, &len, &seq);
        const ferry_tok_doc *d = &p->docs[p->order[seq]];
        uint64_t take = len <= left ? len : left;
        p->out->cropped += len - take;
        ferry_status st = push_piece(p, (ferry_tok_piece){d->off, (uint32_t)take, d->shard});
        if (st != FERRY_OK)
            return st;
        left -= take;
    }
    return FERRY_OK;
}

static ferry_status pack_rows(packer *p, size_t cap)
{
    ferry_tok_rows *r = p->out;
    size_t rows_cap = 0;
    refill(p);
    while (ferry__tok_bins_count(p->bins)) {
        if (r->nrows + 1 >= rows_cap) {
            size_t c = rows_cap ? rows_cap * 2 : 1024;
            size_t *v = ferry_host_realloc(r->first, c * sizeof *v);
            if (!v)
                return FERRY_ERR_NO_MEMORY;
            r->first = v;
            rows_cap = c;
        }
        r->first[r->nrows] = r->npieces;
        ferry_status st = fill_row(p, cap);
        if (st != FERRY_OK)
            return st;
        r->nrows++;
        r->first[r->nrows] = r->npieces;
        refill(p);
    }
    return FERRY_OK;
}

ferry_status ferry__tok_pack(const ferry_tok_doc *docs, const size_t *order, size_t n, size_t cap,
                             size_t buffer, ferry_tok_rows *out)
{
    memset(out, 0, sizeof *out);
    if (!cap || cap > UINT32_MAX || !buffer)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "rows of %zu tokens from a buffer of %zu", cap,
                          buffer);
    packer p = {.docs = docs, .order = order, .n = n, .buffer = buffer, .out = out};
    ferry_status st = ferry__tok_bins_create(cap, buffer, &p.bins);
    out->first = ferry_host_calloc(1, sizeof *out->first);
    if (st == FERRY_OK)
        st = out->first ? pack_rows(&p, cap) : FERRY_ERR_NO_MEMORY;
    ferry__tok_bins_destroy(p.bins);
    if (st != FERRY_OK)
        ferry__tok_rows_free(out);
    return st;
}

void ferry__tok_rows_free(ferry_tok_rows *r)
{
    ferry_host_free(r->pieces);
    ferry_host_free(r->first);
    memset(r, 0, sizeof *r);
}

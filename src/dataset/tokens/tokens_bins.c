/* The candidates of best-fit packing (tokens_pack.c): documents binned by
 * length, so that each pick costs a few word operations instead of a pass
 * over the buffer. A bin per length from 1 to the row's capacity holds its
 * documents first in, first out (they arrive in the order taken, so its head
 * is its earliest); a two-level bitmap says which bins hold any; documents
 * longer than a row (which never fit, and are cropped when they are the
 * shortest left) wait in a heap ordered by (length, order taken). */
#include <string.h>

#include "common/error.h"
#include "dataset/tokens/tokens.h"

#define NIL UINT32_MAX
#define NONE SIZE_MAX

typedef struct bin_node {
    uint64_t len;
    size_t seq;
    uint32_t next;
} bin_node;

struct ferry_tok_bins {
    size_t cap, count;
    uint32_t *head, *tail;   /* per length 0..cap */
    uint64_t *bits, *sum;    /* bin L holds any: bits bit L; bits word w nonzero: sum bit w */
    size_t nbits, nsum;      /* words */
    bin_node *nodes;         /* the buffer's documents */
    uint32_t free_list;
    bin_node *heap;          /* longer than cap: a min-heap by (len, seq) */
    size_t nheap;
};

static int clz64(uint64_t v) { return __builtin_clzll(v); }
static int ctz64(uint64_t v) { return __builtin_ctzll(v); }
static uint64_t upto(size_t b) { return b == 63 ? ~0ull : (1ull << (b + 1)) - 1; }

ferry_status ferry__tok_bins_create(size_t cap, size_t buffer, ferry_tok_bins **out)
{
    *out = NULL;
    if (!cap || cap > (size_t)1 << 26 || !buffer || buffer >= NIL)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "bins for rows of %zu from %zu documents", cap,
                          buffer);
    ferry_tok_bins *b = ferry_host_calloc(1, sizeof *b);
    if (!b)
        return FERRY_ERR_NO_MEMORY;
    b->cap = cap;
    b->nbits = cap / 64 + 1;
    b->nsum = b->nbits / 64 + 1;
    b->head = ferry_host_malloc((cap + 1) * sizeof *b->head);
    b->tail = ferry_host_malloc((cap + 1) * sizeof *b->tail);
    b->bits = ferry_host_calloc(b->nbits, sizeof *b->bits);
    b->sum = ferry_host_calloc(b->nsum, sizeof *b->sum);
    b->nodes = ferry_host_malloc(buffer * sizeof *b->nodes);
    b->heap = ferry_host_malloc(buffer * sizeof *b->heap);
    if (!b->head || !b->tail || !b->bits || !b->sum || !b->nodes || !b->heap) {
        ferry__tok_bins_destroy(b);
        return FERRY_ERR_NO_MEMORY;
    }
    for (size_t L = 0; L <= cap; L++)
        b->head[L] = b->tail[L] = NIL;
    for (size_t i = 0; i < buffer; i++)
        b->nodes[i].next = i + 1 < buffer ? (uint32_t)(i + 1) : NIL;
    b->free_list = 0;
    *out = b;
    return FERRY_OK;
}

void ferry__tok_bins_destroy(ferry_tok_bins *b)
{
    if (!b)
        return;
    ferry_host_free(b->head);
    ferry_host_free(b->tail);
    ferry_host_free(b->bits);
    ferry_host_free(b->sum);
    ferry_host_free(b->nodes);
    ferry_host_free(b->heap);
    ferry_host_free(b);
}

size_t ferry__tok_bins_count(const ferry_tok_bins *b) { return b->count; }

static bool heap_before(const bin_node *a, const bin_node *c)
{
    return a->len < c->len || (a->len == c->len && a->seq < c->seq);
}

static void heap_push(ferry_tok_bins *b, bin_node x)
{
    size_t i = b->nheap++;
    while (i && heap_before(&x, &b->heap[(i - 1) / 2])) {
        b->heap[i] = b->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    b->heap[i] = x;
}

static bin_node heap_pop(ferry_tok_bins *b)
{
    bin_node top = b->heap[0], x = b->heap[--b->nheap];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= b->nheap)
            break;
        if (c + 1 < b->nheap && heap_before(&b->heap[c + 1], &b->heap[c]))
            c++;
        if (!heap_before(&b->heap[c], &x))
            break;
        b->heap[i] = b->heap[c];
        i = c;
    }
    if (b->nheap)
        b->heap[i] = x;
    return top;
}

static void mark(ferry_tok_bins *b, size_t L, bool on)
{
    size_t w = L / 64;
    if (on) {
        b->bits[w] |= 1ull << (L % 64);
        b->sum[w / 64] |= 1ull << (w % 64);
        return;
    }
    b->bits[w] &= ~(1ull << (L % 64));
    if (!b->bits[w])
        b->sum[w / 64] &= ~(1ull << (w % 64));
}

void ferry__tok_bins_add(ferry_tok_bins *b, uint64_t len, size_t seq)
{
    b->count++;
    if (len > b->cap) {
        heap_push(b, (bin_node){len, seq, NIL});
        return;
    }
    uint32_t k = b->free_list;
    b->free_list = b->nodes[k].next;
    b->nodes[k] = (bin_node){len, seq, NIL};
    if (b->tail[len] == NIL) {
        b->head[len] = k;
        mark(b, (size_t)len, true);
    } else {
        b->nodes[b->tail[len]].next = k;
    }
    b->tail[len] = k;
}

/* The highest bin at most x that holds any, or NONE. */
static size_t highest_at_most(const ferry_tok_bins *b, size_t x)
{
    size_t w = x / 64;
    uint64_t m = b->bits[w] & upto(x % 64);
    if (m)
        return w * 64 + 63 - (size_t)clz64(m);
    if (!w)
        return NONE;
    size_t s = (w - 1) / 64;
    uint64_t ms = b->sum[s] & upto((w - 1) % 64);
    while (!ms) {
        if (!s)
            return NONE;
        ms = b->sum[--s];
    }
    size_t ww = s * 64 + 63 - (size_t)clz64(ms);
    return ww * 64 + 63 - (size_t)clz64(b->bits[ww]);
}

/* The lowest bin that holds any, or NONE. */
static size_t lowest(const ferry_tok_bins *b)
{
    for (size_t s = 0; s < b->nsum; s++)
        if (b->sum[s]) {
            size_t w = s * 64 + (size_t)ctz64(b->sum[s]);
            return w * 64 + (size_t)ctz64(b->bits[w]);
        }
    return NONE;
}

static bin_node pop_bin(ferry_tok_bins *b, size_t L)
{
    uint32_t k = b->head[L];
    bin_node x = b->nodes[k];
    b->head[L] = x.next;
    if (x.next == NIL) {
        b->tail[L] = NIL;
        mark(b, L, false);
    }
    b->nodes[k].next = b->free_list;
    b->free_list = k;
    return x;
}

void ferry__tok_bins_take(ferry_tok_bins *b, uint64_t left, uint64_t *len, size_t *seq)
{
    size_t L = highest_at_most(b, left < b->cap ? (size_t)left : b->cap);
    if (L == NONE || L == 0)
        L = lowest(b); /* nothing fits: the shortest, to crop */
    bin_node x = L != NONE ? pop_bin(b, L) : heap_pop(b);
    b->count--;
    *len = x.len;
    *seq = x.seq;
}

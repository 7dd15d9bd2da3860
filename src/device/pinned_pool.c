/* The pinned host pool: page-locked memory taken from the system in large blocks
 * (cudaHostAlloc is slow, often milliseconds, and page-locks whole ranges), then
 * handed out in exact-size aligned pieces from a first-fit list of segments per
 * block. Freed pieces coalesce with free neighbours and are reused; segment
 * records are recycled too, so steady-state alloc/free makes no allocation at all.
 * Without a GPU (or want_pinned false) blocks are aligned pageable memory. */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "common/assert.h"
#include "common/error.h"
#include "common/mutex.h"
#include "device/backend.h"

#define DEFAULT_BLOCK_BYTES ((size_t)64 << 20)
#define DEFAULT_ALIGN 256
#define PAGE 4096

/* A run of bytes in a block, in address order; free or handed out. */
typedef struct seg {
    struct seg *prev, *next;
    size_t off, size;
    bool free;
} seg;

typedef struct block {
    struct block *next;
    char *base;
    size_t size;
    seg *segs; /* address order, covering [0, size) exactly */
} block;

struct ferry_pinned_pool {
    ferry_mutex lock;
    const ferry_backend *be; /* cuda (pinned) or cpu (pageable); fixed at create */
    size_t block_bytes;      /* fixed at create */
    block *blocks;           /* guarded by lock */
    seg *spare;              /* recycled seg records, linked by next; guarded by lock */
    ferry_pinned_pool_stats stats; /* guarded by lock */
};

ferry_status ferry_pinned_pool_create(size_t block_bytes, bool want_pinned, ferry_pinned_pool **out)
{
    if (!out)
        return FERRY_ARG_ERROR("out is NULL");
    *out = NULL;
    ferry_pinned_pool *p = ferry_host_calloc(1, sizeof *p);
    if (!p)
        return FERRY_ERR_NO_MEMORY;
    if (ferry_mutex_init(&p->lock) != 0) {
        ferry_host_free(p);
        return ferry_fail(FERRY_ERR_NO_MEMORY, "%s: cannot create a mutex", __func__);
    }
    const ferry_backend *gpu = want_pinned ? ferry_backend_gpu() : NULL;
    p->be = gpu ? gpu : ferry_backend_cpu();
    p->stats.pinned = gpu != NULL;
    size_t bb = block_bytes ? block_bytes : DEFAULT_BLOCK_BYTES;
    p->block_bytes = (bb + PAGE - 1) / PAGE * PAGE;
    if (p->block_bytes < bb) /* rounding overflowed */
        p->block_bytes = bb;
    *out = p;
    return FERRY_OK;
}

void ferry_pinned_pool_destroy(ferry_pinned_pool *p)
{
    if (!p)
        return;
    for (block *b = p->blocks, *bn; b; b = bn) {
        bn = b->next;
        for (seg *s = b->segs, *sn; s; s = sn) {
            sn = s->next;
            ferry_host_free(s);
        }
        p->be->host_free(b->base);
        ferry_host_free(b);
    }
    for (seg *s = p->spare, *sn; s; s = sn) {
        sn = s->next;
        ferry_host_free(s);
    }
    ferry_mutex_destroy(&p->lock);
    ferry_host_free(p);
}

static seg *seg_new(ferry_pinned_pool *p)
{
    seg *s = p->spare;
    if (s) {
        p->spare = s->next;
        memset(s, 0, sizeof *s);
        return s;
    }
    return ferry_host_calloc(1, sizeof(seg));
}

static void seg_recycle(ferry_pinned_pool *p, seg *s)
{
    s->next = p->spare;
    p->spare = s;
}

/* The pool's invariants, checked on entry to and after every change in debug
 * and sanitizer builds (FERRY_ASSERT): each block's segments cover [0, size)
 * exactly, in address order, linked both ways; no two free segments are
 * neighbours (freeing coalesces); the counters match the lists. Lock held. */
static void check_pool(ferry_pinned_pool *p)
{
#if FERRY_DEBUG
    FERRY_ASSERT_HELD(&p->lock);
    size_t blocks = 0, reserved = 0, pieces = 0, live = 0;
    for (const block *b = p->blocks; b; b = b->next) {
        blocks++;
        reserved += b->size;
        size_t at = 0;
        const seg *prev = NULL;
        for (const seg *s = b->segs; s; prev = s, s = s->next) {
            FERRY_ASSERT(s->prev == prev);
            FERRY_ASSERT(s->off == at && s->size > 0 && s->size <= b->size - at);
            FERRY_ASSERT(!(s->free && prev && prev->free));
            at += s->size;
            if (!s->free) {
                pieces++;
                live += s->size;
            }
        }
        FERRY_ASSERT(at == b->size);
    }
    FERRY_ASSERT(blocks == p->stats.blocks && reserved == p->stats.reserved_bytes);
    FERRY_ASSERT(pieces == p->stats.live_pieces && live == p->stats.live_bytes);
#else
    (void)p;
#endif
}

/* Inserts a new segment after `after` (or at the head when NULL). */
static seg *seg_insert_after(ferry_pinned_pool *p, block *b, seg *after, size_t off, size_t size,
                             bool free_)
{
    seg *s = seg_new(p);
    if (!s)
        return NULL;
    s->off = off;
    s->size = size;
    s->free = free_;
    s->prev = after;
    s->next = after ? after->next : b->segs;
    if (s->next)
        s->next->prev = s;
    if (after)
        after->next = s;
    else
        b->segs = s;
    return s;
}

/* Carves [start, start+bytes) out of free segment s. Records for the leading and
 * trailing remainders are made first, so a failure leaves the list unchanged. */
static void *carve(ferry_pinned_pool *p, block *b, seg *s, size_t start, size_t bytes, ferry_status *st)
{
    size_t lead = start - s->off, tail = s->off + s->size - (start + bytes);
    seg *ls = NULL, *ts = NULL;
    if (lead && !(ls = seg_new(p)))
        goto oom;
    if (tail && !(ts = seg_new(p)))
        goto oom;
    if (ls) {
        /* the leading gap keeps s's place; the piece becomes a new record after it */
        ls->off = s->off;
        ls->size = lead;
        ls->free = true;
        ls->prev = s->prev;
        ls->next = s;
        if (s->prev)
            s->prev->next = ls;
        else
            b->segs = ls;
        s->prev = ls;
    }
    s->off = start;
    s->size = bytes;
    s->free = false;
    if (ts) {
        ts->off = start + bytes;
        ts->size = tail;
        ts->free = true;
        ts->prev = s;
        ts->next = s->next;
        if (s->next)
            s->next->prev = ts;
        s->next = ts;
    }
    p->stats.live_pieces++;
    p->stats.live_bytes += bytes;
    *st = FERRY_OK;
    return b->base + start;
oom:
    if (ls)
        seg_recycle(p, ls);
    *st = FERRY_ERR_NO_MEMORY;
    return NULL;
}

/* First fit over every block; NULL with *st == FERRY_OK when nothing fits. */
static void *first_fit(ferry_pinned_pool *p, size_t bytes, size_t align, ferry_status *st)
{
    *st = FERRY_OK;
    for (block *b = p->blocks; b; b = b->next) {
        uintptr_t base = (uintptr_t)b->base;
        for (seg *s = b->segs; s; s = s->next) {
            if (!s->free || s->size < bytes)
                continue;
            size_t start = (size_t)(((base + s->off + align - 1) & ~(uintptr_t)(align - 1)) - base);
            if (start - s->off <= s->size - bytes)
                return carve(p, b, s, start, bytes, st);
        }
    }
    return NULL;
}

static ferry_status add_block(ferry_pinned_pool *p, size_t need)
{
    size_t size = need > p->block_bytes ? (need + PAGE - 1) / PAGE * PAGE : p->block_bytes;
    if (size < need)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "pinned pool: %zu bytes is too large", need);
    block *b = ferry_host_calloc(1, sizeof *b);
    if (!b)
        return FERRY_ERR_NO_MEMORY;
    void *mem = NULL;
    ferry_status st = p->be->host_alloc(size, &mem);
    if (st != FERRY_OK) {
        ferry_host_free(b);
        return ferry_fail_prefix(FERRY_ERR_NO_MEMORY, "pinned pool: cannot allocate %s %zu bytes: ",
                                 p->stats.pinned ? "page-locked" : "host", size);
    }
    b->base = mem;
    b->size = size;
    if (!seg_insert_after(p, b, NULL, 0, size, true)) {
        p->be->host_free(mem);
        ferry_host_free(b);
        return FERRY_ERR_NO_MEMORY;
    }
    b->next = p->blocks;
    p->blocks = b;
    p->stats.blocks++;
    p->stats.reserved_bytes += size;
    p->stats.system_allocs++;
    return FERRY_OK;
}

ferry_status ferry_pinned_pool_alloc(ferry_pinned_pool *p, size_t bytes, size_t align, void **out)
{
    if (!p || !out)
        return FERRY_ARG_ERROR("pool or out is NULL");
    *out = NULL;
    if (align == 0)
        align = DEFAULT_ALIGN;
    if ((align & (align - 1)) != 0 || align > ((size_t)1 << 30))
        return FERRY_ARG_ERROR("alignment %zu is not a power of two up to 1 GiB", align);
    if (bytes == 0)
        return FERRY_ARG_ERROR("size 0");
    if (bytes > SIZE_MAX - align)
        return FERRY_ARG_ERROR("%zu bytes is too large", bytes);

    ferry_mutex_lock(&p->lock);
    check_pool(p);
    ferry_status st;
    void *ptr = first_fit(p, bytes, align, &st);
    if (!ptr && st == FERRY_OK) {
        /* cudaHostAlloc promises no page alignment (under Open MPI on an
         * H200, a fresh 400 KB block could not hold a page-aligned 400 KB
         * piece): bytes + align - 1 fits whatever the base, for one page. */
        st = add_block(p, bytes + align - 1);
        if (st == FERRY_OK)
            ptr = first_fit(p, bytes, align, &st);
    }
    check_pool(p);
    ferry_mutex_unlock(&p->lock);
    if (!ptr)
        return st != FERRY_OK ? st : ferry_fail(FERRY_ERR_NO_MEMORY, "pinned pool: no room for %zu bytes", bytes);
    *out = ptr;
    return FERRY_OK;
}

void ferry_pinned_pool_free(ferry_pinned_pool *p, void *ptr)
{
    if (!p || !ptr)
        return;
    ferry_mutex_lock(&p->lock);
    check_pool(p);
    char *c = ptr;
    for (block *b = p->blocks; b; b = b->next) {
        if (c < b->base || c >= b->base + b->size)
            continue;
        size_t off = (size_t)(c - b->base);
        for (seg *s = b->segs; s; s = s->next) {
            if (s->off != off || s->free)
                continue;
            s->free = true;
            p->stats.live_pieces--;
            p->stats.live_bytes -= s->size;
            seg *n = s->next;
            if (n && n->free) {
                s->size += n->size;
                s->next = n->next;
                if (n->next)
                    n->next->prev = s;
                seg_recycle(p, n);
            }
            seg *pr = s->prev;
            if (pr && pr->free) {
                pr->size += s->size;
                pr->next = s->next;
                if (s->next)
                    s->next->prev = pr;
                seg_recycle(p, s);
            }
            check_pool(p);
            ferry_mutex_unlock(&p->lock);
            return;
        }
        break;
    }
    ferry_mutex_unlock(&p->lock);
    ferry_log(FERRY_LOG_WARN, "%s: %p is not a live piece of this pool; ignored", __func__, ptr);
}

ferry_status ferry_pinned_pool_stats_get(const ferry_pinned_pool *p, ferry_pinned_pool_stats *out)
{
    if (out)
        memset(out, 0, sizeof *out);
    if (!p || !out)
        return FERRY_ARG_ERROR("%s is NULL", p ? "out" : "pool");
    /* The lock is logically mutable state; stats are read under it. */
    ferry_pinned_pool *mp = (ferry_pinned_pool *)p;
    ferry_mutex_lock(&mp->lock);
    *out = mp->stats;
    ferry_mutex_unlock(&mp->lock);
    return FERRY_OK;
}

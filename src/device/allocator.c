/* The caching device allocator. One per device for the whole process, created on
 * first use: device memory and the CUDA context are process-wide, so a cache per
 * loader or per model would hide freed blocks from the others and make every
 * part pay for cudaMalloc again. Freed blocks go to free lists bucketed by size
 * class and keyed by the stream they were allocated on (a block is only safe to
 * hand to work on the same stream without extra synchronisation), so steady-state
 * training makes no cudaMalloc calls. The CPU device uses the same code with
 * aligned host memory underneath, so its statistics mean the same thing. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "common/assert.h"
#include "common/countdown.h"
#include "common/error.h"
#include "common/mutex.h"
#include "device/backend.h"
#include "device/device_internal.h"

#define MAX_CUDA_DEVICES 64
#define SMALL_LIMIT ((size_t)1 << 20)  /* below this, round to SMALL_ROUND */
#define SMALL_ROUND ((size_t)512)
#define LARGE_ROUND ((size_t)2 << 20)  /* at or above, round to 2 MiB */
#define NCLASS 64                      /* free lists by floor(log2(size)) */
#define NLIVE 1024                     /* hash buckets for live blocks */
/* The key of a cached block whose stream is gone: no work of it is pending,
 * so the block is safe for any stream. Without it, every loader's blocks
 * (allocated on its own copy streams) stayed cached under dead keys, and each
 * new loader allocated afresh: the cache grew by a loader's device memory
 * per loader made. */
#define IDLE UINT64_MAX

typedef struct ablock {
    struct ablock *next;
    void *ptr;
    size_t size;                /* rounded: what the block really holds */
    /* The stream it belongs to, by its never-reused id (0: the default stream),
     * and the stream itself while it lives, for queueing the poison. A block is
     * handed out again only to work on the same stream: stream order then makes
     * the reuse safe. ferry_stream_destroy, once the dying stream's work is
     * done, re-keys its cached blocks to IDLE (any stream may take them) and
     * its live ones to 0. */
    uint64_t stream_id;
    ferry_stream *stream;
} ablock;

typedef struct dev_alloc {
    ferry_mutex lock;
    ferry_device dev;        /* fixed at creation */
    const ferry_backend *be; /* fixed at creation */
    ablock *live[NLIVE];     /* handed out, hashed by pointer; guarded by lock */
    ablock *cached[NCLASS];  /* free, by size class; guarded by lock */
    ablock *spare;           /* recycled records; guarded by lock */
    ferry_memory_stats st;   /* guarded by lock */
} dev_alloc;

/* Slot 0 is the CPU, slot 1 + i is cuda:i. Written once each under
 * registry_lock, read lock-free afterwards (acquire/release). */
static _Atomic(dev_alloc *) allocators[1 + MAX_CUDA_DEVICES];
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;

/* ferry_memory_add_empty_cache_hook_'s hooks: a slot is written once, under
 * registry_lock, and read lock-free afterwards. */
static _Atomic(ferry_empty_cache_hook) empty_hooks[FERRY_EMPTY_CACHE_HOOKS];

ferry_status ferry_memory_add_empty_cache_hook_(ferry_empty_cache_hook fn)
{
    ferry_status st = FERRY_ERR_UNSUPPORTED;
    pthread_mutex_lock(&registry_lock);
    for (size_t i = 0; i < FERRY_EMPTY_CACHE_HOOKS; i++) {
        ferry_empty_cache_hook h = atomic_load_explicit(&empty_hooks[i], memory_order_relaxed);
        if (h == fn || !h) {
            if (!h)
                atomic_store_explicit(&empty_hooks[i], fn, memory_order_release);
            st = FERRY_OK;
            break;
        }
    }
    pthread_mutex_unlock(&registry_lock);
    if (st != FERRY_OK)
        return ferry_fail(st, "%s: more than %d hooks", __func__, FERRY_EMPTY_CACHE_HOOKS);
    return FERRY_OK;
}

/* The test hook's countdown (ferry_debug_fail_device_alloc_after): 0 = off,
 * 1 = the next allocation fails as if the device were full. */
static atomic_llong oom_countdown;

int64_t ferry_debug_fail_device_alloc_after(int64_t k) { return atomic_exchange(&oom_countdown, (long long)k); }

/* True when this allocation must fail on purpose. */
static bool injected_oom(void) { return ferry_countdown_fires(&oom_countdown); }

static const char *devname(ferry_device d, char *buf)
{
    return ferry_device_format(d, buf, FERRY_DEVICE_NAME_MAX);
}

/* The allocator for d, created on first use; NULL with the error set. */
static dev_alloc *get_alloc(ferry_device d, ferry_status *st)
{
    d = ferry_device_resolve(d);
    const ferry_backend *be = ferry_backend_for(d, st);
    if (!be)
        return NULL;
    size_t slot = d.type == FERRY_DEVICE_CPU ? 0 : 1 + (size_t)d.index;
    if (slot > MAX_CUDA_DEVICES) {
        *st = ferry_fail(FERRY_ERR_UNSUPPORTED, "cuda:%d: ferry supports at most %d GPUs", d.index,
                         MAX_CUDA_DEVICES);
        return NULL;
    }
    dev_alloc *a = atomic_load_explicit(&allocators[slot], memory_order_acquire);
    if (a)
        return a;
    pthread_mutex_lock(&registry_lock);
    a = atomic_load_explicit(&allocators[slot], memory_order_relaxed);
    if (!a) {
        a = ferry_host_calloc(1, sizeof *a);
        if (a && ferry_mutex_init(&a->lock) != 0) {
            ferry_host_free(a);
            a = NULL;
            ferry_fail(FERRY_ERR_NO_MEMORY, "caching allocator: cannot create a mutex");
        }
        if (a) {
            a->dev = d;
            a->be = be;
            atomic_store_explicit(&allocators[slot], a, memory_order_release);
        }
    }
    pthread_mutex_unlock(&registry_lock);
    *st = a ? FERRY_OK : FERRY_ERR_NO_MEMORY;
    return a;
}

/* Rounding makes nearby sizes share cached blocks; 2 MiB for large blocks also
 * matches the GPU's large page, so nothing is gained by finer steps. */
static int round_size(size_t bytes, size_t *out)
{
    size_t r = bytes < SMALL_LIMIT ? SMALL_ROUND : LARGE_ROUND;
    if (bytes > SIZE_MAX - (r - 1))
        return 0;
    *out = (bytes + r - 1) / r * r;
    return 1;
}

static unsigned size_class(size_t size)
{
    return (unsigned)(63 - __builtin_clzll((unsigned long long)size));
}

static size_t live_hash(const void *p)
{
    uint64_t x = (uint64_t)(uintptr_t)p >> 8;
    x *= UINT64_C(0x9e3779b97f4a7c15);
    return (size_t)(x >> 54) % NLIVE;
}

/* The allocator's invariants, checked on entry to and after every change in
 * debug and sanitizer builds (FERRY_ASSERT): a live block sits in its
 * pointer's bucket, a cached one in its size class; every block is in exactly
 * one list (the byte counts add up only then: allocated is the live blocks,
 * reserved the live and cached ones); the peak is never below the current. */
static void check_alloc(dev_alloc *a)
{
#if FERRY_DEBUG
    FERRY_ASSERT_HELD(&a->lock);
    size_t live = 0, cached = 0;
    for (size_t h = 0; h < NLIVE; h++)
        for (const ablock *b = a->live[h]; b; b = b->next) {
            FERRY_ASSERT(live_hash(b->ptr) == h && b->size > 0);
            live += b->size;
        }
    for (unsigned c = 0; c < NCLASS; c++)
        for (const ablock *b = a->cached[c]; b; b = b->next) {
            FERRY_ASSERT(size_class(b->size) == c);
            cached += b->size;
        }
    FERRY_ASSERT(live == a->st.allocated_bytes);
    FERRY_ASSERT(live + cached == a->st.reserved_bytes);
    FERRY_ASSERT(a->st.peak_allocated_bytes >= a->st.allocated_bytes);
#else
    (void)a;
#endif
}

/* Takes the best-fitting cached block of stream s, else an idle one (then
 * made s's, so that idle blocks stay for streams that have none of their
 * own): at least `size`, and at most a quarter larger, so a small request
 * never pins down a huge block. */
static ablock *take_cached(dev_alloc *a, size_t size, ferry_stream *s)
{
    unsigned c = size_class(size);
    uint64_t sid = ferry_stream_id(s);
    ablock **best[2] = {NULL, NULL}; /* its own; idle */
    for (ablock **pp = &a->cached[c]; *pp; pp = &(*pp)->next) {
        ablock *b = *pp;
        int k = b->stream_id == sid ? 0 : b->stream_id == IDLE ? 1 : -1;
        if (k < 0 || b->size < size || b->size - size > size / 4)
            continue;
        if (!best[k] || b->size < (*best[k])->size)
            best[k] = pp;
        if (k == 0 && b->size == size)
            break;
    }
    ablock **pick = best[0] ? best[0] : best[1];
    if (!pick)
        return NULL;
    ablock *b = *pick;
    *pick = b->next;
    b->stream_id = sid;
    b->stream = s;
    return b;
}

/* Frees every cached block back to the driver; lock held. */
static void flush_cache(dev_alloc *a)
{
    FERRY_ASSERT_HELD(&a->lock);
    for (unsigned c = 0; c < NCLASS; c++) {
        for (ablock *b = a->cached[c], *n; b; b = n) {
            n = b->next;
            a->be->free(a->dev.index, b->ptr);
            a->st.reserved_bytes -= b->size;
            b->next = a->spare;
            a->spare = b;
        }
        a->cached[c] = NULL;
    }
}

static ferry_status oom_message(dev_alloc *a, size_t bytes)
{
    size_t free_b = 0, total_b = 0;
    char dn[FERRY_DEVICE_NAME_MAX], req[32], fr[32], tot[32], held[32];
    a->be->mem_info(a->dev.index, &free_b, &total_b);
    return ferry_fail(FERRY_ERR_DEVICE_OOM,
                      "out of memory on %s allocating %s: %s free of %s total "
                      "(ferry holds %s in live blocks; its cache was emptied and the allocation "
                      "retried); try a smaller batch or half precision",
                      devname(a->dev, dn), ferry_format_bytes(bytes, req, sizeof req),
                      ferry_format_bytes(free_b, fr, sizeof fr),
                      ferry_format_bytes(total_b, tot, sizeof tot),
                      ferry_format_bytes(a->st.allocated_bytes, held, sizeof held));
}

ferry_status ferry_device_alloc(ferry_device d, size_t bytes, ferry_stream *s, void **out)
{
    d = ferry_device_resolve(d);
    if (!out)
        return FERRY_ARG_ERROR("out is NULL");
    *out = NULL;
    ferry_status st;
    dev_alloc *a = get_alloc(d, &st);
    if (!a)
        return st;
    if (s && !ferry_device_eq(ferry_stream_device(s), d)) {
        char x[FERRY_DEVICE_NAME_MAX], y[FERRY_DEVICE_NAME_MAX];
        return ferry_fail(FERRY_ERR_DEVICE_MISMATCH, "%s: memory on %s, stream on %s", __func__,
                          devname(d, x), devname(ferry_stream_device(s), y));
    }
    if (bytes && d.type != FERRY_DEVICE_CPU && ferry_capture_stream_()) {
        char dn[FERRY_DEVICE_NAME_MAX], why[FERRY_ERROR_MAX];
        ferry_format_cut(why, sizeof why, "%zu bytes of %s asked of the caching allocator", bytes,
                         devname(d, dn));
        ferry_capture_misuse_(why);
        return ferry_fail(FERRY_ERR_BAD_STATE, "%s: %s during a CUDA graph capture by this thread "
                          "(a replay would write to the block after it went to someone else)",
                          __func__, why);
    }
    size_t size;
    if (bytes && !round_size(bytes, &size)) {
        char dn[FERRY_DEVICE_NAME_MAX];
        return ferry_fail(FERRY_ERR_DEVICE_OOM, "out of memory on %s allocating %zu bytes: too large",
                          devname(d, dn), bytes);
    }

    ferry_mutex_lock(&a->lock);
    check_alloc(a);
    a->st.alloc_calls++;
    if (bytes == 0) { /* like malloc(0) in spirit: nothing to hand out, not an error */
        ferry_mutex_unlock(&a->lock);
        return FERRY_OK;
    }
    /* An injected failure plays a full device: no cached block fits and both
     * backend attempts fail, so the cache is emptied and the message is the real one. */
    bool full = injected_oom();
    ablock *b = full ? NULL : take_cached(a, size, s);
    if (b) {
        a->st.cache_hits++;
    } else {
        b = a->spare;
        if (b)
            a->spare = b->next;
        else if (!(b = ferry_host_calloc(1, sizeof *b))) {
            ferry_mutex_unlock(&a->lock);
            return FERRY_ERR_NO_MEMORY;
        }
        void *ptr = NULL;
        st = full ? FERRY_ERR_DEVICE_OOM : a->be->malloc(d.index, size, &ptr);
        if (st == FERRY_ERR_DEVICE_OOM) {
            a->st.oom_retries++;
            flush_cache(a);
            st = full ? FERRY_ERR_DEVICE_OOM : a->be->malloc(d.index, size, &ptr);
        }
        if (st != FERRY_OK) {
            b->next = a->spare;
            a->spare = b;
            if (st == FERRY_ERR_DEVICE_OOM)
                st = oom_message(a, bytes);
            check_alloc(a);
            ferry_mutex_unlock(&a->lock);
            return st;
        }
        b->ptr = ptr;
        b->size = size;
        b->stream_id = ferry_stream_id(s);
        b->stream = s;
        a->st.system_mallocs++;
        a->st.reserved_bytes += size;
    }
    size_t h = live_hash(b->ptr);
    b->next = a->live[h];
    a->live[h] = b;
    a->st.allocated_bytes += b->size;
    if (a->st.allocated_bytes > a->st.peak_allocated_bytes)
        a->st.peak_allocated_bytes = a->st.allocated_bytes;
    *out = b->ptr;
    check_alloc(a);
    ferry_mutex_unlock(&a->lock);
    return FERRY_OK;
}

void ferry_device_free(ferry_device d, void *ptr)
{
    if (!ptr)
        return;
    ferry_status st;
    dev_alloc *a = get_alloc(d, &st);
    char dn[FERRY_DEVICE_NAME_MAX];
    if (!a) {
        ferry_log(FERRY_LOG_WARN, "ferry_device_free(%s, %p): %s; ignored", devname(d, dn), ptr,
                  ferry_last_error());
        return;
    }
    if (d.type != FERRY_DEVICE_CPU && ferry_capture_stream_()) /* void: capture_end reports it */
        ferry_capture_misuse_("a block given back to the caching allocator (ferry_device_free)");
    ferry_mutex_lock(&a->lock);
    check_alloc(a);
    for (ablock **pp = &a->live[live_hash(ptr)]; *pp; pp = &(*pp)->next) {
        ablock *b = *pp;
        if (b->ptr != ptr)
            continue;
        *pp = b->next;
        a->st.allocated_bytes -= b->size;
        /* On the simulated GPU the block turns to NaN bytes where its stream
         * gets to this point: unordered readers on other streams see garbage. */
        if (a->be->poison)
            (void)a->be->poison(a->dev.index, b->ptr, b->size, ferry_stream_native(b->stream));
        unsigned c = size_class(b->size);
        b->next = a->cached[c];
        a->cached[c] = b;
        check_alloc(a);
        ferry_mutex_unlock(&a->lock);
        return;
    }
    ferry_mutex_unlock(&a->lock);
    ferry_log(FERRY_LOG_WARN,
              "ferry_device_free(%s, %p): not a live allocation of this device; ignored "
              "(freed twice, or from another device or allocator?)", devname(d, dn), ptr);
}

ferry_status ferry_memory_stats_get(ferry_device d, ferry_memory_stats *out)
{
    if (!out)
        return FERRY_ARG_ERROR("out is NULL");
    memset(out, 0, sizeof *out);
    ferry_status st;
    dev_alloc *a = get_alloc(d, &st);
    if (!a)
        return st;
    ferry_mutex_lock(&a->lock);
    *out = a->st;
    ferry_mutex_unlock(&a->lock);
    return FERRY_OK;
}

ferry_status ferry_memory_empty_cache(ferry_device d)
{
    d = ferry_device_resolve(d); /* the default device may be a GPU: its hooks too */
    ferry_status st;
    dev_alloc *a = get_alloc(d, &st);
    if (!a)
        return st;
    if (d.type == FERRY_DEVICE_CUDA)
        for (size_t i = 0; i < FERRY_EMPTY_CACHE_HOOKS; i++) {
            ferry_empty_cache_hook h = atomic_load_explicit(&empty_hooks[i], memory_order_acquire);
            if (h)
                h(d.index);
        }
    ferry_mutex_lock(&a->lock);
    flush_cache(a);
    check_alloc(a);
    ferry_mutex_unlock(&a->lock);
    return FERRY_OK;
}

void ferry_memory_reset_peak(ferry_device d)
{
    ferry_status st;
    dev_alloc *a = get_alloc(d, &st);
    if (!a)
        return;
    ferry_mutex_lock(&a->lock);
    a->st.peak_allocated_bytes = a->st.allocated_bytes;
    ferry_mutex_unlock(&a->lock);
}

static void rekey(ablock *list, uint64_t stream_id, uint64_t to)
{
    for (ablock *b = list; b; b = b->next)
        if (b->stream_id == stream_id) {
            b->stream_id = to;
            b->stream = NULL;
        }
}

void ferry_allocator_stream_gone_(ferry_device d, uint64_t stream_id, bool done)
{
    if (stream_id == 0)
        return;
    size_t slot = d.type == FERRY_DEVICE_CPU ? 0 : 1 + (size_t)d.index;
    if (slot > MAX_CUDA_DEVICES)
        return;
    dev_alloc *a = atomic_load(&allocators[slot]);
    if (!a)
        return;
    ferry_mutex_lock(&a->lock);
    for (unsigned c = 0; c < NCLASS; c++)
        rekey(a->cached[c], stream_id, done ? IDLE : 0);
    for (size_t h = 0; h < NLIVE; h++)
        rekey(a->live[h], stream_id, 0);
    ferry_mutex_unlock(&a->lock);
}

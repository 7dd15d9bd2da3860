/* The simulated GPU's backend table: the current device per host thread, device
 * memory with a per-device limit, copies with CUDA's documented timing, streams
 * and events (stream_sim.c), and page-locked host memory, remembered so that a
 * copy knows whether its host side is pinned. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "device/sim/sim.h"
#include "device/sim/sim_internal.h"

/* cudaSetDevice is per host thread; a new thread starts on device 0. */
static _Thread_local int current_dev;

int ferry_sim_current(void) { return current_dev; }

static int sim_count(void) { return ferry_sim_device_count(); }

static ferry_status bad_device(int index)
{
    return ferry_fail(FERRY_ERR_NO_DEVICE, "cuda:%d does not exist (simulated: FERRY_SIM_GPUS=%d)",
                      index, sim_count());
}

static ferry_status sim_set_device(int index)
{
    if (index < 0 || index >= sim_count())
        return bad_device(index);
    current_dev = index;
    return FERRY_OK;
}

static ferry_status sim_get_device(int *index)
{
    *index = current_dev;
    return FERRY_OK;
}

static ferry_status sim_props(int index, ferry_device_props *out)
{
    sim_device *d = &ferry_sim_devices[index];
    snprintf(out->name, sizeof out->name, "ferry simulated GPU %d (FERRY_SIM_GPUS)", index);
    ferry_mutex_lock(&d->lock);
    out->total_memory = d->limit;
    out->free_memory = d->limit - d->used;
    ferry_mutex_unlock(&d->lock);
    out->cc_major = 9;
    out->cc_minor = 0;
    out->multiprocessors = 2;
    return FERRY_OK;
}

static ferry_status sim_mem_info(int index, size_t *free_bytes, size_t *total_bytes)
{
    sim_device *d = &ferry_sim_devices[index];
    ferry_mutex_lock(&d->lock);
    *free_bytes = d->limit - d->used;
    *total_bytes = d->limit;
    ferry_mutex_unlock(&d->lock);
    return FERRY_OK;
}

static ferry_status sim_synchronize(int index) { return ferry_sim_device_sync(index); }

/* ---- device memory: host memory with a 256-byte header holding the size ---- */

#define HEADER 256

static ferry_status sim_malloc(int index, size_t bytes, void **out)
{
    sim_device *d = &ferry_sim_devices[index];
    ferry_status st = ferry_sim_sticky(index);
    if (st != FERRY_OK)
        return st;
    if (ferry_sim_thread_capture())
        return ferry_sim_capture_violation(NULL, "cudaMalloc by the capturing thread",
                                           "cudaErrorStreamCaptureUnsupported");
    ferry_mutex_lock(&d->lock);
    ferry_sim_check_device(d);
    bool fits = bytes <= d->limit - d->used;
    if (fits)
        d->used += bytes;
    ferry_sim_check_device(d);
    ferry_mutex_unlock(&d->lock);
    if (!fits)
        return FERRY_ERR_DEVICE_OOM;
    ferry_sim_count_(index, SIM_COUNT_MALLOC);
    unsigned char *p = aligned_alloc(HEADER, HEADER + ((bytes + HEADER - 1) / HEADER) * HEADER);
    if (!p) {
        ferry_mutex_lock(&d->lock);
        d->used -= bytes;
        ferry_mutex_unlock(&d->lock);
        return FERRY_ERR_DEVICE_OOM;
    }
    memcpy(p, &bytes, sizeof bytes);
    /* Fresh device memory holds garbage, not zeros: make it NaN-like, so code
     * that reads before writing shows up. */
    memset(p + HEADER, 0xFF, bytes);
    *out = p + HEADER; /* sim_free steps back to p */
    // cppcheck-suppress memleak
    return FERRY_OK;
}

/* cudaFree waits for the whole device first; so does this. */
static void sim_free(int index, void *ptr)
{
    if (!ptr)
        return;
    ferry_sim_count_(index, SIM_COUNT_FREE);
    if (ferry_sim_thread_capture()) /* void, as cudaFree's error would be lost here too */
        (void)ferry_sim_capture_violation(NULL, "cudaFree by the capturing thread",
                                          "cudaErrorStreamCaptureUnsupported");
    (void)ferry_sim_device_sync(index);
    unsigned char *p = (unsigned char *)ptr - HEADER;
    size_t bytes;
    memcpy(&bytes, p, sizeof bytes);
    sim_device *d = &ferry_sim_devices[index];
    ferry_mutex_lock(&d->lock);
    FERRY_ASSERT(bytes <= d->used); /* a block this device handed out */
    d->used -= bytes;
    ferry_sim_check_device(d);
    ferry_mutex_unlock(&d->lock);
    free(p);
}

/* ---- pinned host memory, remembered by range ---- */

typedef struct pinned_range {
    struct pinned_range *next;
    void *raw; /* what aligned_alloc gave */
    const unsigned char *p;
    size_t n;
} pinned_range;

static pthread_mutex_t pinned_lock = PTHREAD_MUTEX_INITIALIZER;
static pinned_range *pinned; /* guarded by pinned_lock */

/* Page-locked memory is handed out 256 bytes past a page boundary: CUDA
 * documents no page alignment for cudaHostAlloc (256 bytes is what cudaMalloc
 * promises), and on an H200 under Open MPI a block was not page aligned, so
 * code that assumes it fails here first. */
#define SIM_HOST_SKEW 256

static ferry_status sim_host_alloc(size_t bytes, void **out)
{
    if (bytes > SIZE_MAX - 2 * 4096)
        return FERRY_ERR_NO_MEMORY;
    pinned_range *r = malloc(sizeof *r);
    char *raw = aligned_alloc(4096, ((bytes ? bytes : 1) + SIM_HOST_SKEW + 4095) / 4096 * 4096);
    if (!r || !raw) {
        free(r);
        free(raw);
        return FERRY_ERR_NO_MEMORY;
    }
    void *p = raw + SIM_HOST_SKEW;
    r->raw = raw;
    r->p = p;
    r->n = bytes;
    pthread_mutex_lock(&pinned_lock);
    r->next = pinned;
    pinned = r;
    pthread_mutex_unlock(&pinned_lock);
    *out = p;
    return FERRY_OK;
}

static void sim_host_free(void *ptr)
{
    if (!ptr)
        return;
    pinned_range *found = NULL;
    pthread_mutex_lock(&pinned_lock);
    for (pinned_range **r = &pinned; *r; r = &(*r)->next) {
        if ((*r)->p == ptr) {
            found = *r;
            *r = found->next;
            break;
        }
    }
    pthread_mutex_unlock(&pinned_lock);
    if (found)
        free(found->raw);
    free(found);
}

static bool is_pinned(const void *ptr, size_t bytes)
{
    const unsigned char *p = ptr;
    bool yes = false;
    pthread_mutex_lock(&pinned_lock);
    for (pinned_range *r = pinned; r && !yes; r = r->next)
        yes = p >= r->p && bytes <= r->n && (size_t)(p - r->p) <= r->n - bytes;
    pthread_mutex_unlock(&pinned_lock);
    return yes;
}

/* ---- copies and memsets as stream operations ---- */

typedef struct copy_op {
    sim_op op;
    void *dst;
    const void *src;
    size_t bytes;
    int fill;          /* >= 0: memset with this byte instead of a copy */
    void *staging;     /* owned: a pageable source copied at call time */
} copy_op;

static ferry_status run_copy(sim_op *op)
{
    copy_op *c = (copy_op *)op;
    if (c->fill >= 0)
        memset(c->dst, c->fill, c->bytes);
    else
        memmove(c->dst, c->src, c->bytes);
    return FERRY_OK;
}

static void free_staging(sim_op *op) { free(((copy_op *)op)->staging); }

/* The stream a call on device index names (NULL: index's legacy default
 * stream; the backend's entry points stand for calls made with index current). */
static sim_stream *resolve_on(int index, void *stream, ferry_status *st)
{
    *st = FERRY_OK;
    if (stream)
        return stream;
    return ferry_sim_default_stream(index, st);
}

static ferry_status queue_copy(sim_stream *s, void *dst, const void *src, size_t bytes, int fill,
                               bool stage, const char *what, uint64_t *ticket)
{
    copy_op *c = calloc(1, sizeof *c);
    if (!c)
        return ferry_fail(FERRY_ERR_NO_MEMORY, "%s: no memory", what);
    c->op.run = run_copy;
    c->op.done = free_staging;
    c->op.what = what;
    c->dst = dst;
    c->src = src;
    c->bytes = bytes;
    c->fill = fill;
    if (stage) {
        if (!(c->staging = malloc(bytes))) {
            free(c);
            return ferry_fail(FERRY_ERR_NO_MEMORY, "%s: no memory to stage %zu bytes", what, bytes);
        }
        memcpy(c->staging, src, bytes);
        c->src = c->staging;
    }
    return ferry_sim_enqueue(s, &c->op, ticket);
}

static ferry_status sim_memcpy(int index, void *dst, const void *src, size_t bytes,
                               ferry_copy_kind kind, void *stream)
{
    ferry_status st;
    sim_stream *s = resolve_on(index, stream, &st);
    if (!s)
        return st;
    if ((st = ferry_sim_sticky(s->dev)) != FERRY_OK)
        return st;
    if (kind == FERRY_COPY_H2H && !stream) {
        memmove(dst, src, bytes);
        return FERRY_OK;
    }
    bool host_src = kind == FERRY_COPY_H2D || kind == FERRY_COPY_H2H;
    bool host_dst = kind == FERRY_COPY_D2H || kind == FERRY_COPY_H2H;
    bool pinned_src = host_src && is_pinned(src, bytes);
    bool pinned_dst = host_dst && is_pinned(dst, bytes);
    /* CUDA's rules (cudaMemcpy and cudaMemcpyAsync API sync behaviour):
     * - from pageable host memory the source is staged before the call returns
     *   (the synchronous form first waits for the default stream);
     * - into pageable host memory the call returns once the copy is done;
     * - from or into pinned memory an async copy touches the host buffer only when
     *   it runs, and the synchronous form waits for it;
     * - device to device never blocks the host. */
    bool wait = (host_dst && !pinned_dst) || (!stream && (host_dst || pinned_src));
    if (ferry_sim_stream_capturing(s)) {
        if (host_src && !pinned_src)
            return ferry_sim_capture_violation(s, "a copy from pageable host memory",
                                               "cudaErrorStreamCaptureUnsupported");
        if (wait || !stream)
            return ferry_sim_capture_violation(s, "a copy that waits for the device",
                                               "cudaErrorStreamCaptureUnsupported");
    }
    if (host_src && !pinned_src && !stream)
        (void)ferry_sim_stream_sync(s); /* its sticky error was checked above */
    if (kind == FERRY_COPY_D2H)
        ferry_sim_count_(s->dev, SIM_COUNT_D2H);
    uint64_t ticket = 0;
    st = queue_copy(s, dst, src, bytes, -1, host_src && !pinned_src,
                    host_src ? "host-to-device copy" : host_dst ? "device-to-host copy"
                                                               : "device-to-device copy",
                    &ticket);
    if (st != FERRY_OK)
        return st;
    if (wait) {
        ferry_sim_count_(s->dev, SIM_COUNT_SYNC);
        ferry_sim_stream_wait_ticket(s, ticket);
        return ferry_sim_sticky(s->dev);
    }
    return FERRY_OK;
}


static ferry_status do_memset(int index, void *ptr, size_t bytes, int byte, void *stream,
                              const char *what)
{
    ferry_status st;
    sim_stream *s = resolve_on(index, stream, &st);
    if (!s)
        return st;
    if ((st = ferry_sim_sticky(s->dev)) != FERRY_OK)
        return st;
    uint64_t ticket;
    return queue_copy(s, ptr, NULL, bytes, byte, false, what, &ticket);
}

/* cudaMemset and cudaMemsetAsync are both asynchronous to the host for device
 * memory: the NULL stream form is queued on the default stream, not run now. */
static ferry_status sim_memset_zero(int index, void *ptr, size_t bytes, void *stream)
{
    return do_memset(index, ptr, bytes, 0, stream, "memset");
}

/* Freed device memory becomes NaN bytes once the stream that last used it gets
 * there: work that still reads it from another, unordered stream sees garbage. */
static ferry_status sim_poison(int index, void *ptr, size_t bytes, void *stream)
{
    return do_memset(index, ptr, bytes, 0xFF, stream, "poison freed memory");
}

/* ---- streams and events ---- */

static ferry_status sim_stream_create(int index, void **out)
{
    sim_stream *s;
    ferry_status st = ferry_sim_stream_new(index, &s);
    if (st == FERRY_OK)
        *out = s;
    return st;
}

static void sim_stream_destroy(int index, void *stream)
{
    (void)index;
    ferry_sim_stream_free(stream);
}

static ferry_status sim_stream_sync(int index, void *stream)
{
    ferry_status st;
    sim_stream *s = resolve_on(index, stream, &st);
    return s ? ferry_sim_stream_sync(s) : st;
}

static ferry_status sim_stream_query(int index, void *stream, bool *done)
{
    ferry_status st;
    sim_stream *s = resolve_on(index, stream, &st);
    *done = false;
    if (!s)
        return st;
    st = ferry_sim_stream_query(s, done);
    if (st != FERRY_OK)
        *done = false;
    return st;
}

static ferry_status sim_stream_wait_event(int index, void *stream, void *event)
{
    ferry_status st;
    sim_stream *s = resolve_on(index, stream, &st);
    return s ? ferry_sim_stream_wait_event(s, event) : st;
}

static ferry_status sim_event_create(int index, bool timing, void **out)
{
    sim_event *e;
    ferry_status st = ferry_sim_event_new(index, timing, &e);
    if (st == FERRY_OK)
        *out = e;
    return st;
}

static void sim_event_destroy(int index, void *event)
{
    (void)index;
    ferry_sim_event_unref(event);
}

static ferry_status sim_event_record(int index, void *event, void *stream)
{
    ferry_status st;
    sim_stream *s = resolve_on(index, stream, &st);
    return s ? ferry_sim_event_record(event, s) : st;
}

static ferry_status sim_event_sync(int index, void *event)
{
    (void)index;
    return ferry_sim_event_sync(event);
}

static ferry_status sim_event_query(int index, void *event, bool *done)
{
    (void)index;
    ferry_status st = ferry_sim_event_query(event, done);
    if (st != FERRY_OK)
        *done = false;
    return st;
}

static ferry_status sim_event_elapsed_ms(int index, void *start, void *end, float *ms)
{
    (void)index;
    return ferry_sim_event_elapsed(start, end, ms);
}

static ferry_status sim_capture_begin(int index, void *stream)
{
    if (!stream)
        return ferry_fail(FERRY_ERR_CUDA, "cuda:%d (simulated): the legacy default stream cannot be "
                          "captured (CUDA: cudaErrorStreamCaptureUnsupported)", index);
    return ferry_sim_capture_begin(stream);
}

static ferry_status sim_capture_end(int index, void *stream, void **graph)
{
    (void)index;
    sim_graph *g = NULL;
    ferry_status st = stream ? ferry_sim_capture_end(stream, &g)
                             : ferry_fail(FERRY_ERR_CUDA, "end of stream capture: the legacy "
                                          "default stream never captures (simulated)");
    *graph = g;
    return st;
}

static ferry_status sim_graph_launch(int index, void *graph, void *stream)
{
    ferry_status st;
    sim_stream *s = resolve_on(index, stream, &st);
    return s ? ferry_sim_graph_launch(graph, s) : st;
}

static void sim_graph_destroy(int index, void *graph)
{
    (void)index;
    ferry_sim_graph_unref(graph);
}

ferry_status ferry_sim_launch_stream(int dev, void *native, const char *what, sim_stream **out)
{
    ferry_status st = ferry_sim_sticky(dev);
    if (st != FERRY_OK)
        return st;
    sim_stream *s = native;
    if (!s) {
        if (!(s = ferry_sim_default_stream(dev, &st)))
            return st;
    } else if (s->dev != dev) {
        return ferry_fail(FERRY_ERR_CUDA, "%s: launched on cuda:%d into a stream of cuda:%d "
                          "(simulated; CUDA: invalid resource handle: a stream belongs to the "
                          "device it was created on)", what, dev, s->dev);
    }
    *out = s;
    return FERRY_OK;
}

static const ferry_backend sim_backend = {
    .name = "cuda (simulated)",
    .kind = FERRY_BACKEND_SIM,
    .simulated = true,
    .device_count = sim_count,
    .set_device = sim_set_device,
    .get_device = sim_get_device,
    .props = sim_props,
    .mem_info = sim_mem_info,
    .synchronize = sim_synchronize,
    .malloc = sim_malloc,
    .free = sim_free,
    .memset_zero = sim_memset_zero,
    .poison = sim_poison,
    .memcpy = sim_memcpy,
    .stream_create = sim_stream_create,
    .stream_destroy = sim_stream_destroy,
    .stream_sync = sim_stream_sync,
    .stream_query = sim_stream_query,
    .stream_wait_event = sim_stream_wait_event,
    .event_create = sim_event_create,
    .event_destroy = sim_event_destroy,
    .event_record = sim_event_record,
    .event_sync = sim_event_sync,
    .event_query = sim_event_query,
    .event_elapsed_ms = sim_event_elapsed_ms,
    .capture_begin = sim_capture_begin,
    .capture_end = sim_capture_end,
    .graph_launch = sim_graph_launch,
    .graph_destroy = sim_graph_destroy,
    .host_alloc = sim_host_alloc,
    .host_free = sim_host_free,
};

const ferry_backend *ferry_backend_sim(void) { return &sim_backend; }

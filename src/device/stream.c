/* Streams, events and ferry_memcpy: thin handles that remember their device and
 * backend, so every later call goes to the right place without asking again. */
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "device/backend.h"
#include "device/device_internal.h"
#include "common/error.h"

struct ferry_stream {
    ferry_device dev;
    const ferry_backend *be;
    void *native;
    uint64_t id; /* unique for the process, never reused: the allocator's key */
};

static atomic_ullong next_stream_id;

uint64_t ferry_stream_id(const ferry_stream *s) { return s ? s->id : 0; }

struct ferry_event {
    ferry_device dev;
    const ferry_backend *be;
    void *native;
};

void *ferry_stream_native(const ferry_stream *s) { return s ? s->native : NULL; }

void *ferry_stream_cuda_handle(const ferry_stream *s)
{
    return s && s->be->kind == FERRY_BACKEND_CUDA ? s->native : NULL;
}

ferry_status ferry_stream_create(ferry_device d, ferry_stream **out)
{
    d = ferry_device_resolve(d);
    if (!out)
        return FERRY_ARG_ERROR("out is NULL");
    *out = NULL;
    ferry_status st;
    const ferry_backend *be = ferry_backend_for(d, &st);
    if (!be)
        return st;
    ferry_stream *s = ferry_host_calloc(1, sizeof *s);
    if (!s)
        return FERRY_ERR_NO_MEMORY;
    s->dev = d;
    s->be = be;
    s->id = atomic_fetch_add(&next_stream_id, 1) + 1;
    if ((st = be->stream_create(d.index, &s->native)) != FERRY_OK) {
        ferry_host_free(s);
        return st;
    }
    *out = s;
    return FERRY_OK;
}

void ferry_stream_destroy(ferry_stream *s)
{
    if (!s)
        return;
    /* The allocator's cached blocks of this stream go to any stream once the
     * stream's work is done (a later stream must not inherit them unordered). */
    bool done = s->be->stream_sync(s->dev.index, s->native) == FERRY_OK;
    ferry_allocator_stream_gone_(s->dev, s->id, done);
    s->be->stream_destroy(s->dev.index, s->native);
    ferry_host_free(s);
}

ferry_device ferry_stream_device(const ferry_stream *s) { return s ? s->dev : ferry_cpu(); }

ferry_status ferry_stream_synchronize(ferry_stream *s)
{
    if (!s)
        return FERRY_ARG_ERROR("stream is NULL");
    return s->be->stream_sync(s->dev.index, s->native);
}

ferry_status ferry_stream_query_status(ferry_stream *s, bool *done)
{
    if (done)
        *done = false;
    if (!s || !done)
        return FERRY_ARG_ERROR("%s is NULL", s ? "done" : "stream");
    return s->be->stream_query(s->dev.index, s->native, done);
}

bool ferry_stream_query(ferry_stream *s)
{
    bool done = false;
    return !s || (ferry_stream_query_status(s, &done) == FERRY_OK && done);
}

ferry_status ferry_stream_wait_event(ferry_stream *s, ferry_event *ev)
{
    if (!ev)
        return FERRY_ARG_ERROR("event is NULL");
    if (!s) /* the default stream of ev's device (a CPU event: nothing to wait for) */
        return ev->be == ferry_backend_cpu()
                   ? FERRY_OK
                   : ev->be->stream_wait_event(ev->dev.index, NULL, ev->native);
    if (s->be != ev->be) {
        /* A CPU event is complete the moment it is recorded; nothing to wait for.
         * A CUDA event waited on by a CPU stream: the CPU has no queue, so wait now. */
        if (ev->be == ferry_backend_cpu())
            return FERRY_OK;
        return ev->be->event_sync(ev->dev.index, ev->native);
    }
    return s->be->stream_wait_event(s->dev.index, s->native, ev->native);
}

ferry_status ferry_event_create(ferry_device d, bool timing, ferry_event **out)
{
    d = ferry_device_resolve(d);
    if (!out)
        return FERRY_ARG_ERROR("out is NULL");
    *out = NULL;
    ferry_status st;
    const ferry_backend *be = ferry_backend_for(d, &st);
    if (!be)
        return st;
    ferry_event *e = ferry_host_calloc(1, sizeof *e);
    if (!e)
        return FERRY_ERR_NO_MEMORY;
    e->dev = d;
    e->be = be;
    if ((st = be->event_create(d.index, timing, &e->native)) != FERRY_OK) {
        ferry_host_free(e);
        return st;
    }
    *out = e;
    return FERRY_OK;
}

void ferry_event_destroy(ferry_event *e)
{
    if (!e)
        return;
    e->be->event_destroy(e->dev.index, e->native);
    ferry_host_free(e);
}

ferry_status ferry_event_record(ferry_event *e, ferry_stream *s)
{
    if (!e)
        return FERRY_ARG_ERROR("event is NULL");
    if (s && !ferry_device_eq(s->dev, e->dev)) {
        char a[FERRY_DEVICE_NAME_MAX], b[FERRY_DEVICE_NAME_MAX];
        return ferry_fail(FERRY_ERR_DEVICE_MISMATCH,
                          "%s: event on %s, stream on %s", __func__,
                          ferry_device_format(e->dev, a, sizeof a),
                          ferry_device_format(s->dev, b, sizeof b));
    }
    return e->be->event_record(e->dev.index, e->native, s ? s->native : NULL);
}

ferry_status ferry_event_synchronize(ferry_event *e)
{
    if (!e)
        return FERRY_ARG_ERROR("event is NULL");
    return e->be->event_sync(e->dev.index, e->native);
}

ferry_status ferry_event_query_status(ferry_event *e, bool *done)
{
    if (done)
        *done = false;
    if (!e || !done)
        return FERRY_ARG_ERROR("%s is NULL", e ? "done" : "event");
    return e->be->event_query(e->dev.index, e->native, done);
}

bool ferry_event_query(ferry_event *e)
{
    bool done = false;
    return !e || (ferry_event_query_status(e, &done) == FERRY_OK && done);
}

ferry_status ferry_event_elapsed_ms(ferry_event *start, ferry_event *end, float *ms)
{
    if (!start || !end || !ms)
        return FERRY_ARG_ERROR("NULL argument");
    if (start->be != end->be || !ferry_device_eq(start->dev, end->dev)) {
        char a[FERRY_DEVICE_NAME_MAX], b[FERRY_DEVICE_NAME_MAX];
        return ferry_fail(FERRY_ERR_DEVICE_MISMATCH,
                          "%s: start on %s, end on %s (timing needs one device)", __func__,
                          ferry_device_format(start->dev, a, sizeof a),
                          ferry_device_format(end->dev, b, sizeof b));
    }
    /* The backend gives the reason; the caller's events are named here. */
    ferry_status st = start->be->event_elapsed_ms(start->dev.index, start->native, end->native, ms);
    return st == FERRY_OK ? st : ferry_fail_prefix(st, "%s: ", __func__);
}

ferry_status ferry_memcpy(void *dst, const void *src, size_t bytes, ferry_copy_kind kind,
                          ferry_device d, ferry_stream *s)
{
    d = ferry_device_resolve(d);
    if (bytes == 0)
        return FERRY_OK;
    if (!dst || !src)
        return FERRY_ARG_ERROR("NULL pointer for %zu bytes", bytes);
    if ((unsigned)kind > FERRY_COPY_H2H)
        return FERRY_ARG_ERROR("invalid copy kind %d", (int)kind);
    ferry_status st;
    const ferry_backend *be = ferry_backend_for(d, &st);
    if (!be)
        return st;
    if (s && !ferry_device_eq(s->dev, d)) {
        char a[FERRY_DEVICE_NAME_MAX], b[FERRY_DEVICE_NAME_MAX];
        return ferry_fail(FERRY_ERR_DEVICE_MISMATCH, "%s: copy on %s, stream on %s", __func__,
                          ferry_device_format(d, a, sizeof a), ferry_device_format(s->dev, b, sizeof b));
    }
    return be->memcpy(d.index, dst, src, bytes, kind, s ? s->native : NULL);
}

ferry_status ferry_device_memset_zero(ferry_device d, void *ptr, size_t bytes, ferry_stream *s)
{
    d = ferry_device_resolve(d);
    if (bytes == 0)
        return FERRY_OK;
    if (!ptr)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "memset: NULL pointer for %zu bytes", bytes);
    ferry_status st;
    const ferry_backend *be = ferry_backend_for(d, &st);
    if (!be)
        return st;
    return be->memset_zero(d.index, ptr, bytes, s && ferry_device_eq(s->dev, d) ? s->native : NULL);
}

ferry_status ferry_device_sync_default_(ferry_device d)
{
    d = ferry_device_resolve(d);
    ferry_status st;
    const ferry_backend *be = ferry_backend_for(d, &st);
    if (!be)
        return st;
    return be->stream_sync(d.index, NULL);
}

ferry_status ferry_device_copy_(ferry_device dd, void *dst, ferry_device sd, const void *src,
                                size_t bytes, ferry_stream *s)
{
    bool dh = dd.type == FERRY_DEVICE_CPU, sh = sd.type == FERRY_DEVICE_CPU;
    ferry_copy_kind kind = dh ? (sh ? FERRY_COPY_H2H : FERRY_COPY_D2H) : (sh ? FERRY_COPY_H2D : FERRY_COPY_D2D);
    return ferry_memcpy(dst, src, bytes, kind, dh ? sd : dd, s);
}

/* ---- CUDA graphs by stream capture (device_internal.h) ---- */

struct ferry_graph_ {
    ferry_device dev;
    const ferry_backend *be;
    void *native;
};

/* One capture per thread (thread-local mode binds the thread that began it);
 * misuse keeps the first thing the allocator refused, for capture_end. */
static _Thread_local ferry_stream *capture_stream;
static _Thread_local char capture_misuse[FERRY_ERROR_MAX];

ferry_stream *ferry_capture_stream_(void) { return capture_stream; }

void ferry_capture_misuse_(const char *what)
{
    if (capture_stream && !capture_misuse[0])
        ferry_format_cut(capture_misuse, sizeof capture_misuse, "%s", what);
}

ferry_status ferry_stream_capture_begin_(ferry_stream *s)
{
    if (!s)
        return FERRY_ARG_ERROR("stream is NULL (the legacy default stream cannot be captured)");
    if (!s->be->capture_begin)
        return ferry_fail(FERRY_ERR_UNSUPPORTED, "stream capture: %s streams have no graphs",
                          s->be->name);
    if (capture_stream)
        return ferry_fail(FERRY_ERR_BAD_STATE, "stream capture: this thread is already capturing");
    ferry_status st = s->be->capture_begin(s->dev.index, s->native);
    if (st == FERRY_OK) {
        capture_stream = s;
        capture_misuse[0] = 0;
    }
    return st;
}

ferry_status ferry_stream_capture_end_(ferry_stream *s, ferry_graph_ **out)
{
    if (!s || !out)
        return FERRY_ARG_ERROR("%s is NULL", s ? "out" : "stream");
    *out = NULL;
    if (capture_stream != s)
        return ferry_fail(FERRY_ERR_BAD_STATE, "end of stream capture: this thread is not "
                          "capturing that stream");
    capture_stream = NULL;
    void *native = NULL;
    ferry_status st = s->be->capture_end(s->dev.index, s->native, &native);
    if (capture_misuse[0]) {
        if (st == FERRY_OK)
            s->be->graph_destroy(s->dev.index, native);
        return ferry_fail(FERRY_ERR_BAD_STATE, "stream capture: %s; a captured step must take "
                          "and give back no device memory (run it once eagerly first, so its "
                          "buffers exist)", capture_misuse);
    }
    if (st != FERRY_OK)
        return st;
    ferry_graph_ *g = ferry_host_calloc(1, sizeof *g);
    if (!g) {
        s->be->graph_destroy(s->dev.index, native);
        return FERRY_ERR_NO_MEMORY;
    }
    g->dev = s->dev;
    g->be = s->be;
    g->native = native;
    *out = g;
    return FERRY_OK;
}

ferry_status ferry_graph_launch_(ferry_graph_ *g, ferry_stream *s)
{
    if (!g)
        return FERRY_ARG_ERROR("graph is NULL");
    if (s && (s->be != g->be || s->dev.index != g->dev.index))
        return ferry_fail(FERRY_ERR_DEVICE_MISMATCH, "graph launch: the graph belongs to another "
                          "device than the stream");
    return g->be->graph_launch(g->dev.index, g->native, ferry_stream_native(s));
}

void ferry_graph_destroy_(ferry_graph_ *g)
{
    if (!g)
        return;
    g->be->graph_destroy(g->dev.index, g->native);
    ferry_host_free(g);
}

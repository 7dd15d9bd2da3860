/* The simulated GPU's devices, streams and events (see sim.h). A stream is a
 * thread draining a queue of operations in order; before each it sleeps for a
 * seeded random while, so work on two streams, or on a stream and the host,
 * interleaves differently from run to run unless something orders it. Events
 * count records and completions; a wait is an operation that blocks its stream's
 * thread until the event has completed the record it was issued after.
 *
 * The simulation's own bookkeeping (operations, staging buffers, device memory)
 * uses malloc, not ferry_host_*: it plays the driver and the GPU, whose memory
 * is not the library's, so it must not move the library's allocation counts or
 * fail under the library's allocation fault injection. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/error.h"
#include "common/thread.h"
#include "device/sim/sim.h"
#include "device/sim/sim_internal.h"

sim_device ferry_sim_devices[FERRY_SIM_MAX_DEVICES];

static pthread_once_t config_once = PTHREAD_ONCE_INIT;
static int sim_count;
static uint64_t sim_seed;
static atomic_ullong next_stream_id;

/* "512M", "2G", "65536": bytes; 0 when malformed. */
static size_t parse_bytes(const char *s)
{
    char *end = NULL;
    if (*s < '0' || *s > '9') /* strtoull takes "-5" as 2^64 - 5: 16 EiB */
        return 0;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s)
        return 0;
    unsigned shift = 0;
    switch (*end) {
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    default: break;
    }
    if (*end == 'i' || *end == 'I')
        end++;
    if (*end == 'b' || *end == 'B')
        end++;
    if (*end || v == 0 || v > (SIZE_MAX >> shift))
        return 0;
    return (size_t)v << shift;
}

static void read_config(void)
{
    const char *n = getenv("FERRY_SIM_GPUS");
    if (n && *n) {
        char *end = NULL;
        long v = strtol(n, &end, 10);
        if (*end || v < 0 || v > FERRY_SIM_MAX_DEVICES)
            ferry_log(FERRY_LOG_WARN, "FERRY_SIM_GPUS=%s: expected 1 to %d simulated GPUs; "
                      "the simulation is off", n, FERRY_SIM_MAX_DEVICES);
        else
            sim_count = (int)v;
    }
    size_t limit = (size_t)512 << 20;
    const char *m = getenv("FERRY_SIM_GPU_MEM");
    if (m && *m) {
        size_t v = parse_bytes(m);
        if (v)
            limit = v;
        else
            ferry_log(FERRY_LOG_WARN, "FERRY_SIM_GPU_MEM=%s: expected a size such as 512M or 2G; "
                      "using 512 MiB", m);
    }
    const char *sd = getenv("FERRY_SIM_SEED");
    sim_seed = 0x5eed;
    if (sd && *sd) {
        char *end = NULL;
        errno = 0;
        unsigned long long v = strtoull(sd, &end, 0);
        if (*sd < '0' || *sd > '9' || errno || *end)
            ferry_log(FERRY_LOG_WARN, "FERRY_SIM_SEED=%s: expected an unsigned integer (decimal, "
                      "or hex with 0x); using the default seed 0x5eed", sd);
        else
            sim_seed = v;
    }
    for (int i = 0; i < FERRY_SIM_MAX_DEVICES; i++) {
        sim_device *d = &ferry_sim_devices[i];
        ferry_mutex_init(&d->lock);
        pthread_mutex_init(&d->err_lock, NULL);
        d->limit = limit;
    }
}

int ferry_sim_device_count(void)
{
    pthread_once(&config_once, read_config);
    return sim_count;
}

uint64_t ferry_sim_seed(void)
{
    pthread_once(&config_once, read_config);
    return sim_seed;
}

/* ---- invariants (FERRY_ASSERT: on in debug and sanitizer builds) ----
 *
 * A device's stream list holds streams of that device only, the default stream
 * among them once made, and its memory in use never passes its limit. A
 * stream's queue: head and tail are both NULL or both set, the tail ends the
 * list, nothing finishes that was not queued, and every operation queued and
 * not finished is in the list or is the one the thread has taken and is
 * running: length + running == queued - done. Checked on entry to the functions
 * that change them and after each change, with the lock held. */

/* The walk that counts a queue is skipped when it is longer than this, so a
 * debug build that queues thousands of kernels does not go quadratic. */
#define CHECK_WALK_MAX 256

static void check_stream(sim_stream *s)
{
    FERRY_ASSERT_HELD(&s->lock);
    FERRY_ASSERT((s->head == NULL) == (s->tail == NULL));
    FERRY_ASSERT(s->tail == NULL || s->tail->next == NULL);
    FERRY_ASSERT(s->done <= s->queued);
    FERRY_ASSERT(s->queued - s->done >= (uint64_t)s->running);
#if FERRY_DEBUG
    uint64_t pending = s->queued - s->done - (uint64_t)s->running, n = 0;
    const sim_op *last = NULL;
    if (pending <= CHECK_WALK_MAX) {
        for (const sim_op *op = s->head; op && n <= pending; op = op->next) {
            last = op;
            n++;
        }
        FERRY_ASSERT(n == pending);
        FERRY_ASSERT(last == s->tail);
    }
#endif
}

void ferry_sim_check_device(sim_device *d)
{
    FERRY_ASSERT_HELD(&d->lock);
    FERRY_ASSERT(d->used <= d->limit);
#if FERRY_DEBUG
    int dev = (int)(d - ferry_sim_devices);
    bool dflt_listed = d->dflt == NULL;
    for (const sim_stream *s = d->streams; s; s = s->next_in_dev) {
        FERRY_ASSERT(s->dev == dev);
        dflt_listed = dflt_listed || s == d->dflt;
    }
    FERRY_ASSERT(dflt_listed);
#endif
}

/* ---- sticky errors ---- */

ferry_status ferry_sim_sticky(int dev)
{
    sim_device *d = &ferry_sim_devices[dev];
    if (atomic_load(&d->sticky) == FERRY_OK)
        return FERRY_OK;
    pthread_mutex_lock(&d->err_lock);
    ferry_status st = atomic_load(&d->sticky);
    char msg[sizeof d->sticky_msg];
    memcpy(msg, d->sticky_msg, sizeof msg);
    pthread_mutex_unlock(&d->err_lock);
    if (st == FERRY_OK)
        return FERRY_OK;
    return ferry_fail(st, "%s", msg);
}

static void set_sticky(int dev, ferry_status st, const char *what, const char *why)
{
    sim_device *d = &ferry_sim_devices[dev];
    pthread_mutex_lock(&d->err_lock);
    if (atomic_load(&d->sticky) == FERRY_OK) {
        ferry_format_cut(d->sticky_msg, sizeof d->sticky_msg,
                         "cuda:%d (simulated): %s failed on the device: %s (errors on a device "
                         "are sticky, as on CUDA: every later call on it fails)", dev, what, why);
        atomic_store(&d->sticky, st);
    }
    pthread_mutex_unlock(&d->err_lock);
}

void ferry_sim_debug_fault_after(int dev, int64_t k)
{
    if (dev >= 0 && dev < FERRY_SIM_MAX_DEVICES)
        atomic_store(&ferry_sim_devices[dev].fault_countdown, (long long)k);
}

void ferry_sim_count_(int dev, int which)
{
    if (dev < 0 || dev >= FERRY_SIM_MAX_DEVICES)
        return;
    sim_device *d = &ferry_sim_devices[dev];
    atomic_llong *c[] = {&d->n_syncs, &d->n_d2h, &d->n_launches, &d->n_mallocs, &d->n_frees};
    if (which >= 0 && (size_t)which < sizeof c / sizeof c[0])
        atomic_fetch_add(c[which], 1);
}

void ferry_sim_debug_counts(int dev, ferry_sim_counts *out)
{
    memset(out, 0, sizeof *out);
    if (dev < 0 || dev >= FERRY_SIM_MAX_DEVICES)
        return;
    sim_device *d = &ferry_sim_devices[dev];
    out->host_syncs = atomic_load(&d->n_syncs);
    out->d2h_copies = atomic_load(&d->n_d2h);
    out->launches = atomic_load(&d->n_launches);
    out->device_mallocs = atomic_load(&d->n_mallocs);
    out->device_frees = atomic_load(&d->n_frees);
}

bool ferry_sim_take_fault(int dev)
{
    ferry_sim_count_(dev, SIM_COUNT_LAUNCH);
    atomic_llong *c = &ferry_sim_devices[dev].fault_countdown;
    long long v = atomic_load(c);
    while (v > 0) {
        if (atomic_compare_exchange_weak(c, &v, v - 1))
            return v == 1;
    }
    return false;
}

void ferry_sim_debug_reset(int dev)
{
    if (dev < 0 || dev >= ferry_sim_device_count())
        return;
    (void)ferry_sim_device_sync(dev);
    sim_device *d = &ferry_sim_devices[dev];
    pthread_mutex_lock(&d->err_lock);
    atomic_store(&d->sticky, FERRY_OK);
    d->sticky_msg[0] = 0;
    pthread_mutex_unlock(&d->err_lock);
}

/* ---- streams ---- */

/* splitmix64: the delays only need to differ between seeds and streams. */
static uint64_t next_random(uint64_t *x)
{
    uint64_t z = (*x += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* Most operations start at once; one in four waits up to 200 us, and one in
 * sixty-four up to 2 ms, long enough for a missing wait to be overtaken. */
static void random_delay(sim_stream *s)
{
    uint64_t r = next_random(&s->rng);
    long us = 0;
    if ((r & 63) == 0)
        us = (long)((r >> 8) % 2000);
    else if ((r & 3) == 0)
        us = (long)((r >> 8) % 200);
    if (us > 0) {
        struct timespec ts = {0, us * 1000L};
        nanosleep(&ts, NULL);
    } else if (r & 4) {
        sched_yield();
    }
}

static void *stream_main(void *arg)
{
    sim_stream *s = arg;
    for (;;) {
        ferry_mutex_lock(&s->lock);
        while (!s->head && !s->stop)
            ferry_cond_wait(&s->cv, &s->lock);
        check_stream(s);
        sim_op *op = s->head;
        if (!op) {
            ferry_mutex_unlock(&s->lock);
            return NULL;
        }
        s->head = op->next;
        if (!s->head)
            s->tail = NULL;
        s->running = true;
        check_stream(s);
        ferry_mutex_unlock(&s->lock);

        random_delay(s);
        /* After a fault the device runs no more kernels or copies; waits and
         * event records still complete so that no host call hangs on them. */
        bool dead = atomic_load(&ferry_sim_devices[s->dev].sticky) != FERRY_OK;
        if (op->run && (!dead || op->control)) {
            ferry_status st = op->run(op);
            if (st != FERRY_OK)
                set_sticky(s->dev, st, op->what, ferry_last_error());
        }
        /* Counted and finished (an event completed) under the stream's lock, so
         * that the host sees both or neither: a host woken by an event recorded
         * last here finds the stream complete, and one woken by the stream finds
         * the event complete. (Lock order: stream, then event; nothing takes
         * them the other way round.) */
        ferry_mutex_lock(&s->lock);
        s->done++;
        s->running = false;
        check_stream(s);
        if (op->done)
            op->done(op);
        pthread_cond_broadcast(&s->cv);
        ferry_mutex_unlock(&s->lock);
        free(op);
    }
}

ferry_status ferry_sim_stream_new(int dev, sim_stream **out)
{
    sim_stream *s = calloc(1, sizeof *s);
    if (!s)
        return ferry_fail(FERRY_ERR_NO_MEMORY, "cuda:%d (simulated): no memory for a stream", dev);
    s->dev = dev;
    s->id = atomic_fetch_add(&next_stream_id, 1) + 1;
    s->rng = ferry_sim_seed() ^ (s->id * UINT64_C(0x2545F4914F6CDD1D));
    ferry_mutex_init(&s->lock);
    pthread_cond_init(&s->cv, NULL);
    if (ferry_thread_create(&s->thread, stream_main, s) != 0) {
        pthread_cond_destroy(&s->cv);
        ferry_mutex_destroy(&s->lock);
        free(s);
        return ferry_fail(FERRY_ERR_CUDA, "cuda:%d (simulated): cannot start a stream thread", dev);
    }
    sim_device *d = &ferry_sim_devices[dev];
    ferry_mutex_lock(&d->lock);
    ferry_sim_check_device(d);
    s->next_in_dev = d->streams;
    d->streams = s;
    ferry_sim_check_device(d);
    ferry_mutex_unlock(&d->lock);
    *out = s;
    return FERRY_OK;
}

/* Lets the queued work finish, then ends the thread. CUDA returns at once and
 * releases the stream later; waiting here only makes the host slower, never a
 * result different. */
void ferry_sim_stream_free(sim_stream *s)
{
    if (!s)
        return;
    sim_device *d = &ferry_sim_devices[s->dev];
    ferry_mutex_lock(&d->lock);
    ferry_sim_check_device(d);
    FERRY_ASSERT(s != d->dflt); /* the default stream lives as long as the process */
    for (sim_stream **p = &d->streams; *p; p = &(*p)->next_in_dev) {
        if (*p == s) {
            *p = s->next_in_dev;
            break;
        }
    }
    ferry_sim_check_device(d);
    ferry_mutex_unlock(&d->lock);
    ferry_mutex_lock(&s->lock);
    check_stream(s);
    s->stop = true;
    pthread_cond_broadcast(&s->cv);
    ferry_mutex_unlock(&s->lock);
    pthread_join(s->thread, NULL);
    FERRY_ASSERT(s->queued == s->done && !s->head); /* the thread drained the queue */
    pthread_cond_destroy(&s->cv);
    ferry_mutex_destroy(&s->lock);
    free(s);
}

sim_stream *ferry_sim_default_stream(int dev, ferry_status *st)
{
    /* CUDA fails the legacy stream's implicit join with a capturing blocking
     * stream; ferry's streams are non-blocking, but work put there by the
     * capturing thread would escape the graph, so the simulation refuses it. */
    if (ferry_sim_thread_capture()) {
        *st = ferry_sim_capture_violation(NULL, "the legacy default stream used by the capturing "
                                          "thread", "cudaErrorStreamCaptureImplicit");
        return NULL;
    }
    sim_device *d = &ferry_sim_devices[dev];
    ferry_mutex_lock(&d->lock);
    sim_stream *s = d->dflt;
    ferry_mutex_unlock(&d->lock);
    if (s)
        return s;
    /* Made outside the device lock (stream_new takes it); a lost race frees its copy. */
    sim_stream *n = NULL;
    if ((*st = ferry_sim_stream_new(dev, &n)) != FERRY_OK)
        return NULL;
    ferry_mutex_lock(&d->lock);
    if (!d->dflt) {
        d->dflt = n;
        n = NULL;
    }
    s = d->dflt;
    ferry_sim_check_device(d);
    ferry_mutex_unlock(&d->lock);
    ferry_sim_stream_free(n);
    *st = FERRY_OK;
    return s;
}

ferry_status ferry_sim_enqueue(sim_stream *s, sim_op *op, uint64_t *ticket)
{
    op->next = NULL;
    ferry_mutex_lock(&s->lock);
    check_stream(s);
    if (ferry_sim_capture_take_(s, op)) { /* recorded, not run: nothing to wait for */
        ferry_mutex_unlock(&s->lock);
        if (ticket)
            *ticket = 0;
        return FERRY_OK;
    }
    if (s->tail)
        s->tail->next = op;
    else
        s->head = op;
    s->tail = op;
    s->queued++;
    if (ticket)
        *ticket = s->queued; /* read here: once unlocked, op may already be run and freed */
    check_stream(s);
    pthread_cond_broadcast(&s->cv);
    ferry_mutex_unlock(&s->lock);
    return FERRY_OK;
}

/* Waits until the stream has run its ticket-th operation. */
void ferry_sim_stream_wait_ticket(sim_stream *s, uint64_t ticket)
{
    ferry_mutex_lock(&s->lock);
    FERRY_ASSERT(ticket <= s->queued); /* a ticket this stream has given out */
    while (s->done < ticket)
        ferry_cond_wait(&s->cv, &s->lock);
    ferry_mutex_unlock(&s->lock);
}

ferry_status ferry_sim_stream_sync(sim_stream *s)
{
    ferry_sim_count_(s->dev, SIM_COUNT_SYNC);
    if (ferry_sim_stream_capturing(s))
        return ferry_sim_capture_violation(s, "a wait for a capturing stream",
                                           "cudaErrorStreamCaptureUnsupported");
    ferry_mutex_lock(&s->lock);
    uint64_t t = s->queued;
    ferry_mutex_unlock(&s->lock);
    ferry_sim_stream_wait_ticket(s, t);
    return ferry_sim_sticky(s->dev);
}

ferry_status ferry_sim_stream_query(sim_stream *s, bool *done)
{
    if (ferry_sim_stream_capturing(s)) {
        *done = false;
        return ferry_sim_capture_violation(s, "a query of a capturing stream",
                                           "cudaErrorStreamCaptureUnsupported");
    }
    ferry_mutex_lock(&s->lock);
    *done = s->done == s->queued;
    ferry_mutex_unlock(&s->lock);
    return ferry_sim_sticky(s->dev);
}

ferry_status ferry_sim_device_sync(int dev)
{
    ferry_sim_count_(dev, SIM_COUNT_SYNC);
    if (ferry_sim_thread_capture() || ferry_sim_device_capturing(dev))
        return ferry_sim_capture_violation(NULL, "a wait for the whole device",
                                           "cudaErrorStreamCaptureUnsupported");
    sim_device *d = &ferry_sim_devices[dev];
    /* Collect the tickets under the device lock, wait outside it. */
    for (;;) {
        sim_stream *busy = NULL;
        uint64_t t = 0;
        ferry_mutex_lock(&d->lock);
        ferry_sim_check_device(d);
        for (sim_stream *s = d->streams; s && !busy; s = s->next_in_dev) {
            ferry_mutex_lock(&s->lock);
            if (s->done < s->queued) {
                busy = s;
                t = s->queued;
            }
            ferry_mutex_unlock(&s->lock);
        }
        if (busy) {
            /* Held across the wait so the stream cannot be freed meanwhile;
             * stream threads never take the device lock (only err_lock), so
             * this cannot deadlock. */
            ferry_sim_stream_wait_ticket(busy, t);
            ferry_mutex_unlock(&d->lock);
            continue;
        }
        ferry_mutex_unlock(&d->lock);
        return ferry_sim_sticky(dev);
    }
}

/* ---- events ---- */

ferry_status ferry_sim_event_new(int dev, bool timing, sim_event **out)
{
    sim_event *e = calloc(1, sizeof *e);
    if (!e)
        return ferry_fail(FERRY_ERR_NO_MEMORY, "cuda:%d (simulated): no memory for an event", dev);
    e->dev = dev;
    e->timing = timing;
    atomic_init(&e->refs, 1);
    pthread_mutex_init(&e->lock, NULL);
    pthread_cond_init(&e->cv, NULL);
    *out = e;
    return FERRY_OK;
}

void ferry_sim_event_unref(sim_event *e)
{
    if (e && atomic_fetch_sub(&e->refs, 1) == 1) {
        pthread_cond_destroy(&e->cv);
        pthread_mutex_destroy(&e->lock);
        free(e);
    }
}

typedef struct record_op {
    sim_op op;
    sim_event *ev;
    uint64_t gen;
} record_op;

/* Runs as the operation's `done` step, after the stream has counted it. */
static void complete_record(sim_op *op)
{
    record_op *r = (record_op *)op;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    pthread_mutex_lock(&r->ev->lock);
    FERRY_ASSERT(r->gen <= r->ev->recorded); /* an event completes only what was recorded */
    if (r->gen > r->ev->completed) {
        r->ev->completed = r->gen;
        r->ev->ms = (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
    }
    pthread_cond_broadcast(&r->ev->cv);
    pthread_mutex_unlock(&r->ev->lock);
    ferry_sim_event_unref(r->ev);
}

static void drop_event(sim_op *op) { ferry_sim_event_unref(((record_op *)op)->ev); }

/* Queues an operation on event e: a record (a new generation of e) or a wait
 * (for the generation recorded last). The op holds a reference to e. */
static ferry_status queue_event_op(sim_stream *s, sim_event *e, bool record,
                                   ferry_status (*run)(sim_op *), void (*done)(sim_op *),
                                   const char *what)
{
    record_op *r = calloc(1, sizeof *r);
    if (!r)
        return ferry_fail(FERRY_ERR_NO_MEMORY, "%s: no memory", what);
    r->op.run = run;
    r->op.done = done;
    r->op.what = what;
    r->op.control = true;
    atomic_fetch_add(&e->refs, 1);
    r->ev = e;
    pthread_mutex_lock(&e->lock);
    r->gen = record ? ++e->recorded : e->recorded;
    pthread_mutex_unlock(&e->lock);
    return ferry_sim_enqueue(s, &r->op, NULL);
}

static ferry_status run_wait(sim_op *op);

ferry_status ferry_sim_event_record(sim_event *e, sim_stream *s)
{
    if (s->dev != e->dev)
        return ferry_fail(FERRY_ERR_CUDA, "event record: the event belongs to cuda:%d and the stream "
                          "to cuda:%d (simulated; CUDA requires both on one device: "
                          "invalid resource handle)", e->dev, s->dev);
    ferry_status st = ferry_sim_sticky(s->dev);
    if (st != FERRY_OK)
        return st;
    if (ferry_sim_stream_capturing(s))
        return ferry_sim_capture_violation(s, "an event recorded in a capturing stream",
                                           "legal on CUDA (a fork to another stream), but the "
                                           "simulation captures one stream only");
    return queue_event_op(s, e, true, NULL, complete_record, "event record");
}

static ferry_status run_wait(sim_op *op)
{
    record_op *r = (record_op *)op;
    pthread_mutex_lock(&r->ev->lock);
    while (r->ev->completed < r->gen)
        pthread_cond_wait(&r->ev->cv, &r->ev->lock);
    pthread_mutex_unlock(&r->ev->lock);
    return FERRY_OK;
}

/* Waits for the record made before this call; an event never recorded is
 * complete (cudaStreamWaitEvent then returns at once). */
ferry_status ferry_sim_stream_wait_event(sim_stream *s, sim_event *e)
{
    ferry_status st = ferry_sim_sticky(s->dev);
    if (st != FERRY_OK)
        return st;
    if (ferry_sim_stream_capturing(s))
        return ferry_sim_capture_violation(s, "a capturing stream waiting for an event recorded "
                                           "outside the capture", "cudaErrorStreamCaptureIsolation");
    return queue_event_op(s, e, false, run_wait, drop_event, "stream wait event");
}

ferry_status ferry_sim_event_sync(sim_event *e)
{
    ferry_sim_count_(e->dev, SIM_COUNT_SYNC);
    pthread_mutex_lock(&e->lock);
    uint64_t want = e->recorded;
    while (e->completed < want)
        pthread_cond_wait(&e->cv, &e->lock);
    pthread_mutex_unlock(&e->lock);
    return ferry_sim_sticky(e->dev);
}

ferry_status ferry_sim_event_query(sim_event *e, bool *done)
{
    pthread_mutex_lock(&e->lock);
    FERRY_ASSERT(e->completed <= e->recorded);
    *done = e->completed >= e->recorded;
    pthread_mutex_unlock(&e->lock);
    return ferry_sim_sticky(e->dev);
}

ferry_status ferry_sim_event_elapsed(sim_event *a, sim_event *b, float *ms)
{
    if (!a->timing || !b->timing)
        return ferry_fail(FERRY_ERR_CUDA, "event elapsed time: an event was created without timing "
                          "(simulated; CUDA: invalid resource handle)");
    double x, y;
    bool ready;
    pthread_mutex_lock(&a->lock);
    ready = a->recorded > 0 && a->completed >= a->recorded;
    x = a->ms;
    pthread_mutex_unlock(&a->lock);
    pthread_mutex_lock(&b->lock);
    ready = ready && b->recorded > 0 && b->completed >= b->recorded;
    y = b->ms;
    pthread_mutex_unlock(&b->lock);
    if (!ready)
        return ferry_fail(FERRY_ERR_CUDA, "event elapsed time: both events must be recorded and "
                          "complete (simulated; CUDA: device not ready)");
    *ms = (float)(y - x);
    return FERRY_OK;
}

/* The simulated GPU's stream capture and graphs (cudaStreamBeginCapture,
 * cudaStreamEndCapture + cudaGraphInstantiate, cudaGraphLaunch). A capturing
 * stream hands every operation queued on it to its graph instead of its
 * thread; a launch queues one operation that runs the recorded ones in order,
 * every time with the arguments they were recorded with, as a CUDA graph
 * replays its nodes' parameters. Recorded operations are kept by the graph and
 * their `done` step runs once, when the graph is freed (it releases what the
 * operation owns: a kernel's argument copy).
 *
 * What the simulation does not model, it refuses with a message rather than
 * run differently from CUDA: a capture spans one stream (no fork and join
 * through events), and a thread captures one stream at a time. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "device/sim/sim.h"
#include "device/sim/sim_internal.h"

struct sim_graph {
    int dev;
    atomic_int refs;           /* the handle and every queued launch */
    sim_op *head, *tail;       /* the recorded operations, in order */
    size_t n;
    ferry_status invalid;      /* FERRY_OK, or why the capture is void */
    char why[FERRY_ERROR_MAX]; /* the first violation */
};

/* The stream this host thread captures into (thread-local capture mode: the
 * rules bind the thread that began the capture). */
static _Thread_local sim_stream *thread_capture;

sim_stream *ferry_sim_thread_capture(void) { return thread_capture; }

static void drop_nodes(sim_graph *g)
{
    sim_op *op = g->head;
    while (op) {
        sim_op *next = op->next;
        if (op->done)
            op->done(op);
        free(op);
        op = next;
    }
    g->head = g->tail = NULL;
    g->n = 0;
}

void ferry_sim_graph_unref(sim_graph *g)
{
    if (g && atomic_fetch_sub(&g->refs, 1) == 1) {
        drop_nodes(g);
        free(g);
    }
}

bool ferry_sim_stream_capturing(sim_stream *s)
{
    ferry_mutex_lock(&s->lock);
    bool yes = s->capture != NULL;
    ferry_mutex_unlock(&s->lock);
    return yes;
}

bool ferry_sim_device_capturing(int dev)
{
    sim_device *d = &ferry_sim_devices[dev];
    bool yes = false;
    ferry_mutex_lock(&d->lock);
    for (sim_stream *s = d->streams; s && !yes; s = s->next_in_dev)
        yes = ferry_sim_stream_capturing(s);
    ferry_mutex_unlock(&d->lock);
    return yes;
}

bool ferry_sim_capture_take_(sim_stream *s, sim_op *op)
{
    FERRY_ASSERT_HELD(&s->lock);
    sim_graph *g = s->capture;
    if (!g)
        return false;
    op->next = NULL;
    if (g->tail)
        g->tail->next = op;
    else
        g->head = op;
    g->tail = op;
    g->n++;
    return true;
}

ferry_status ferry_sim_capture_violation(sim_stream *s, const char *what, const char *cuda_err)
{
    if (!s)
        s = thread_capture;
    char msg[FERRY_ERROR_MAX];
    ferry_format_cut(msg, sizeof msg, "%s during stream capture (simulated; CUDA: %s)", what,
                     cuda_err);
    if (s) {
        ferry_mutex_lock(&s->lock);
        sim_graph *g = s->capture;
        if (g && g->invalid == FERRY_OK) {
            g->invalid = FERRY_ERR_CUDA;
            memcpy(g->why, msg, sizeof g->why);
        }
        ferry_mutex_unlock(&s->lock);
    }
    return ferry_fail(FERRY_ERR_CUDA, "%s; the capture is invalidated", msg);
}

ferry_status ferry_sim_capture_begin(sim_stream *s)
{
    ferry_status st = ferry_sim_sticky(s->dev);
    if (st != FERRY_OK)
        return st;
    if (thread_capture)
        return ferry_fail(FERRY_ERR_CUDA, "stream capture: this thread already captures another "
                          "stream (the simulation captures one stream per thread)");
    sim_graph *g = calloc(1, sizeof *g);
    if (!g)
        return ferry_fail(FERRY_ERR_NO_MEMORY, "stream capture: no memory for a graph");
    g->dev = s->dev;
    atomic_init(&g->refs, 1);
    ferry_mutex_lock(&s->lock);
    bool busy = s->capture != NULL;
    if (!busy)
        s->capture = g;
    ferry_mutex_unlock(&s->lock);
    if (busy) {
        free(g);
        return ferry_fail(FERRY_ERR_CUDA, "stream capture: the stream is already capturing "
                          "(simulated; CUDA: cudaErrorIllegalState)");
    }
    thread_capture = s;
    return FERRY_OK;
}

ferry_status ferry_sim_capture_end(sim_stream *s, sim_graph **out)
{
    *out = NULL;
    ferry_mutex_lock(&s->lock);
    sim_graph *g = s->capture;
    ferry_mutex_unlock(&s->lock);
    if (!g)
        return ferry_fail(FERRY_ERR_CUDA, "end of stream capture: the stream is not capturing "
                          "(simulated; CUDA: cudaErrorIllegalState)");
    if (thread_capture != s)
        return ferry_sim_capture_violation(s, "cudaStreamEndCapture from another thread than "
                                           "the one that began it", "cudaErrorStreamCaptureWrongThread");
    ferry_mutex_lock(&s->lock);
    s->capture = NULL;
    ferry_mutex_unlock(&s->lock);
    thread_capture = NULL;
    if (g->invalid != FERRY_OK) {
        ferry_status st = ferry_fail(g->invalid, "stream capture was invalidated "
                                     "(cudaErrorStreamCaptureInvalidated) by: %s", g->why);
        ferry_sim_graph_unref(g);
        return st;
    }
    *out = g;
    return FERRY_OK;
}

typedef struct graph_op {
    sim_op op;
    sim_graph *g;
    bool fault;
} graph_op;

/* Runs on the stream's thread: the recorded operations in their order. A
 * failing one ends the launch; the device's sticky error names it. */
static ferry_status graph_run(sim_op *op)
{
    graph_op *l = (graph_op *)op;
    if (l->fault)
        return ferry_fail(FERRY_ERR_CUDA, "graph launch: injected fault (an illegal memory access)");
    size_t i = 0;
    for (sim_op *n = l->g->head; n; n = n->next, i++) {
        if (!n->run)
            continue;
        ferry_status st = n->run(n);
        if (st != FERRY_OK) {
            char why[FERRY_ERROR_MAX]; /* ferry_fail writes where ferry_last_error reads */
            snprintf(why, sizeof why, "%s", ferry_last_error());
            return ferry_fail(st, "node %zu of %zu (%s): %s", i, l->g->n, n->what, why);
        }
    }
    return FERRY_OK;
}

static void graph_done(sim_op *op) { ferry_sim_graph_unref(((graph_op *)op)->g); }

ferry_status ferry_sim_graph_launch(sim_graph *g, sim_stream *s)
{
    if (s->dev != g->dev)
        return ferry_fail(FERRY_ERR_CUDA, "graph launch: the graph was captured on cuda:%d and "
                          "the stream belongs to cuda:%d (simulated; CUDA: invalid resource handle)",
                          g->dev, s->dev);
    ferry_status st = ferry_sim_sticky(s->dev);
    if (st != FERRY_OK)
        return st;
    if (ferry_sim_stream_capturing(s))
        return ferry_fail(FERRY_ERR_CUDA, "graph launch into a capturing stream: the simulation "
                          "does not record child graphs");
    graph_op *l = calloc(1, sizeof *l);
    if (!l)
        return ferry_fail(FERRY_ERR_NO_MEMORY, "graph launch: no memory");
    l->op.run = graph_run;
    l->op.done = graph_done;
    l->op.what = "graph launch";
    atomic_fetch_add(&g->refs, 1);
    l->g = g;
    l->fault = ferry_sim_take_fault(s->dev); /* one launch, however many nodes */
    return ferry_sim_enqueue(s, &l->op, NULL);
}

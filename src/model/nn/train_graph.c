/* ferry_train_step as one CUDA graph (nn.h, "one CUDA graph per training
 * step"). The step is capturable because it never waits on the host, allocates
 * nothing after its first run and decides nothing on the host from device
 * values (test_step_gpu holds it to that); what a replay cannot see is host
 * state, so a graph is kept only while the host state it was captured under
 * holds: the batch's shape and dtypes, the stream, the learning rate (a
 * kernel argument), the module's buffers (module->calls) and the optimiser's
 * device state (fm_optim_version). Anything else re-captures, after one eager
 * step that lets the buffers settle for the new state. */
#include <string.h>

#include "common/error.h"
#include "device/device_internal.h"
#include "ferry/ops.h"
#include "model/nn/internal.h"
#include "tensor/internal.h"

typedef struct graph_key {
    int64_t xshape[FERRY_MAX_DIMS], yshape[FERRY_MAX_DIMS];
    size_t xdims, ydims;
    ferry_dtype xdt, ydt;
    uint64_t stream;
    double lr;
    uint64_t module_calls, optim_version;
} graph_key;

struct ferry_train_graph {
    ferry_module *m;
    ferry_optim *o;
    ferry_amp *amp;
    ferry_metrics *metrics;
    ferry_tensor *x, *y;  /* the graph's inputs: each step's batch is copied here */
    ferry_graph_ *graph;  /* NULL until captured */
    graph_key key;        /* what the graph (or the eager step before it) ran under */
    bool warm;            /* an eager step ran under key: the next one captures */
    int64_t captures;
};

/* A Dropout draws its mask from a counter on the host: a replay would apply
 * the captured mask again, every step. */
static const ferry_module *host_state_layer(const ferry_module *m)
{
    if (fm_dropout_calls((ferry_module *)m))
        return m;
    for (size_t i = 0; i < m->nchildren; i++) {
        const ferry_module *f = host_state_layer(m->children[i]);
        if (f)
            return f;
    }
    return NULL;
}

ferry_status ferry_train_graph_create(ferry_module *m, ferry_optim *o, ferry_amp *amp,
                                      ferry_metrics *metrics, ferry_train_graph **out)
{
    if (!m || !o || !metrics || !out)
        return FERRY_ARG_ERROR("%s is NULL%s", !m ? "module" : !o ? "optimiser" : !metrics ? "metrics" : "out",
                               !metrics ? " (a captured step reports bad labels through metrics: "
                                          "it cannot wait on the host to check them)" : "");
    const ferry_module *bad = host_state_layer(m);
    if (bad)
        return ferry_fail(FERRY_ERR_UNSUPPORTED, "ferry_train_graph_create: %s draws a new mask "
                          "each step from a counter on the host, which a captured step would "
                          "replay unchanged; train this model with ferry_train_step", bad->name);
    ferry_train_graph *g = ferry_host_calloc(1, sizeof *g);
    if (!g)
        return FERRY_ERR_NO_MEMORY;
    g->m = m;
    g->o = o;
    g->amp = amp;
    g->metrics = metrics;
    *out = g;
    return FERRY_OK;
}

static void drop_graph(ferry_train_graph *g)
{
    ferry_graph_destroy_(g->graph);
    g->graph = NULL;
    g->warm = false;
}

void ferry_train_graph_destroy(ferry_train_graph *g)
{
    if (!g)
        return;
    drop_graph(g);
    ferry_tensor_release(g->x);
    ferry_tensor_release(g->y);
    ferry_host_free(g);
}

int64_t ferry_train_graph_captures(const ferry_train_graph *g) { return g ? g->captures : 0; }

static bool key_eq(const graph_key *a, const graph_key *b)
{
    return a->xdims == b->xdims && a->ydims == b->ydims &&
           memcmp(a->xshape, b->xshape, a->xdims * sizeof(int64_t)) == 0 &&
           memcmp(a->yshape, b->yshape, a->ydims * sizeof(int64_t)) == 0 && a->xdt == b->xdt &&
           a->ydt == b->ydt && a->stream == b->stream && a->lr == b->lr &&
           a->module_calls == b->module_calls && a->optim_version == b->optim_version;
}

static graph_key key_of(const ferry_train_graph *g, const ferry_tensor *x, const ferry_tensor *y,
                        const ferry_stream *s)
{
    graph_key k;
    memset(&k, 0, sizeof k);
    k.xdims = ferry_tensor_ndim(x);
    k.ydims = ferry_tensor_ndim(y);
    memcpy(k.xshape, ferry_tensor_shape(x), k.xdims * sizeof(int64_t));
    memcpy(k.yshape, ferry_tensor_shape(y), k.ydims * sizeof(int64_t));
    k.xdt = ferry_tensor_dtype(x);
    k.ydt = ferry_tensor_dtype(y);
    k.stream = ferry_stream_id(s);
    k.lr = ferry_optim_lr(g->o);
    k.module_calls = g->m->calls;
    k.optim_version = fm_optim_version(g->o);
    return k;
}

/* The graph's input buffers in the batch's shape, made outside any capture. */
static ferry_status inputs_for(ferry_train_graph *g, const ferry_tensor *x, const ferry_tensor *y,
                               ferry_stream *s)
{
    ferry_tensor_release(g->x);
    ferry_tensor_release(g->y);
    g->x = g->y = NULL;
    ferry_device d = ferry_tensor_device(x);
    ferry_status st = ferry_tensor_empty_on_(ferry_tensor_shape(x), ferry_tensor_ndim(x),
                                             ferry_tensor_dtype(x), d, s, &g->x);
    if (st == FERRY_OK)
        st = ferry_tensor_empty_on_(ferry_tensor_shape(y), ferry_tensor_ndim(y),
                                    ferry_tensor_dtype(y), d, s, &g->y);
    return st;
}

static ferry_status load_inputs(ferry_train_graph *g, ferry_tensor *x, ferry_tensor *y,
                                ferry_stream *s)
{
    ferry_status st = ferry_tensor_copy(g->x, x, s);
    return st == FERRY_OK ? ferry_tensor_copy(g->y, y, s) : st;
}

/* Records one step on s into g->graph. The capture always ends, so a failed
 * step leaves the stream usable; its error is the one returned. */
static ferry_status capture(ferry_train_graph *g, ferry_stream *s)
{
    ferry_status st = ferry_stream_capture_begin_(s);
    if (st != FERRY_OK)
        return st;
    ferry_status step = ferry_train_step(g->m, g->o, g->amp, g->x, g->y, g->metrics, s);
    char why[FERRY_ERROR_MAX] = "";
    if (step != FERRY_OK) /* ending the capture may overwrite the message */
        ferry_format_cut(why, sizeof why, "%s", ferry_last_error());
    ferry_graph_ *graph = NULL;
    st = ferry_stream_capture_end_(s, &graph);
    if (step != FERRY_OK) {
        ferry_graph_destroy_(graph);
        return ferry_fail(step, "capturing the training step: %s", why);
    }
    if (st != FERRY_OK)
        return st;
    g->graph = graph;
    g->captures++;
    return FERRY_OK;
}

ferry_status ferry_train_graph_step(ferry_train_graph *g, ferry_tensor *x, ferry_tensor *labels,
                                    ferry_stream *s)
{
    if (!g || !x || !labels)
        return FERRY_ARG_ERROR("%s is NULL", !g ? "graph" : !x ? "x" : "labels");
    ferry_device d = ferry_tensor_device(x);
    bool graphable = s && d.type == FERRY_DEVICE_CUDA && ferry_device_eq(d, g->m->device) &&
                     ferry_device_eq(ferry_tensor_device(labels), d) &&
                     ferry_device_eq(ferry_stream_device(s), d);
    if (!graphable) {
        drop_graph(g);
        return ferry_train_step(g->m, g->o, g->amp, x, labels, g->metrics, s);
    }
    graph_key k = key_of(g, x, labels, s);
    if ((g->graph || g->warm) && !key_eq(&k, &g->key))
        drop_graph(g);
    ferry_status st;
    if (!g->graph && !g->warm) {
        /* The eager step that settles the buffers for this state. */
        st = ferry_train_step(g->m, g->o, g->amp, x, labels, g->metrics, s);
        if (st == FERRY_OK) {
            g->key = key_of(g, x, labels, s);
            g->warm = true;
        }
        return st;
    }
    bool captured = !g->graph;
    if (captured) {
        st = inputs_for(g, x, labels, s);
        if (st == FERRY_OK)
            st = load_inputs(g, x, labels, s);
        if (st == FERRY_OK)
            st = capture(g, s);
        if (st != FERRY_OK) {
            drop_graph(g);
            return st;
        }
        g->key = key_of(g, x, labels, s); /* the capture's own forward and backward counted */
    } else {
        st = load_inputs(g, x, labels, s);
        if (st != FERRY_OK)
            return st;
    }
    st = ferry_graph_launch_(g->graph, s);
    /* The captured step's host code counted its rows once already. */
    if (st == FERRY_OK && !captured)
        fm_metrics_add_rows(g->metrics, ferry_tensor_numel(labels));
    return st;
}

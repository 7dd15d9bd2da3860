/* One CUDA graph per training step, on the simulated GPU (FERRY_SIM_GPUS):
 * stream capture records instead of running, a replay runs what was recorded
 * with the pointers it was recorded with, CUDA's capture rules are errors
 * that invalidate the capture, and ferry_train_graph_step gives the very bits
 * of ferry_train_step (parameters and metrics) over several steps and seeds,
 * for the samples' MLP and CNN, with and without mixed precision, re-capturing
 * when the batch's shape changes. Skips without the simulation. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "device/backend.h"
#include "device/device_internal.h"
#include "device/sim/sim.h"
#include "ferry/device.h"
#include "ferry/nn.h"
#include "ferry/ops.h"
#include "ferry/tensor.h"
#include "harness.h"
#include "harness_step.h"

static void require_sim(void)
{
    if (!ferry_cuda_is_simulated())
        SKIP("not on the simulated GPU (set FERRY_SIM_GPUS)");
    ferry_sim_debug_fault_after(0, 0);
    ferry_sim_debug_reset(0);
}

/* ---- the device layer: capture and replay ---- */

/* On s: a copy on the legacy stream would not be ordered with s's work. */
static void fill_host(ferry_tensor *t, float v, ferry_stream *s)
{
    float buf[64];
    ASSERT(ferry_tensor_numel(t) <= 64);
    for (int i = 0; i < 64; i++)
        buf[i] = v + (float)i;
    ASSERT_OK(ferry_memcpy(ferry_tensor_data(t), buf, ferry_tensor_nbytes(t), FERRY_COPY_H2D,
                           ferry_tensor_device(t), s));
    ASSERT_OK(ferry_stream_synchronize(s));
}

static float read_at(ferry_tensor *t, int i)
{
    float buf[64];
    ASSERT_OK(ferry_tensor_copy_to_host(t, buf, ferry_tensor_nbytes(t)));
    return buf[i];
}

/* A captured memset and copy do not run at capture; each launch runs them
 * again, on what the buffers hold by then. */
TEST(capture_records_and_replays)
{
    require_sim();
    ferry_device dev = ferry_cuda(0);
    int64_t n = 16;
    ferry_tensor *a = NULL, *b = NULL;
    ASSERT_OK(ferry_tensor_empty(&n, 1, FERRY_DTYPE_F32, dev, &a));
    ASSERT_OK(ferry_tensor_empty(&n, 1, FERRY_DTYPE_F32, dev, &b));
    ferry_stream *s = NULL;
    ASSERT_OK(ferry_stream_create(dev, &s));
    fill_host(a, 100, s);
    fill_host(b, 0, s);
    ferry_sim_counts c0, c1;
    ASSERT_OK(ferry_stream_capture_begin_(s));
    ASSERT_OK(ferry_tensor_copy(b, a, s));                        /* b = a */
    ASSERT_OK(ferry_tensor_fill(a, 7.0, s));                      /* a = 7 */
    ferry_graph_ *g = NULL;
    ASSERT_OK(ferry_stream_capture_end_(s, &g));
    ASSERT_OK(ferry_stream_synchronize(s));
    ASSERT_MSG(read_at(a, 3) == 103 && read_at(b, 3) == 3, "the capture ran its work: a %g b %g",
               read_at(a, 3), read_at(b, 3));
    ferry_sim_debug_counts(0, &c0);
    ASSERT_OK(ferry_graph_launch_(g, s));
    ferry_sim_debug_counts(0, &c1);
    ASSERT_EQ_INT(c1.launches - c0.launches, 1); /* one launch, however many nodes */
    ASSERT_OK(ferry_stream_synchronize(s));
    ASSERT_MSG(read_at(a, 3) == 7 && read_at(b, 3) == 103, "first replay: a %g b %g", read_at(a, 3),
               read_at(b, 3));
    fill_host(a, 200, s);
    ASSERT_OK(ferry_graph_launch_(g, s));
    ASSERT_OK(ferry_stream_synchronize(s));
    ASSERT_MSG(read_at(a, 5) == 7 && read_at(b, 5) == 205, "second replay: a %g b %g", read_at(a, 5),
               read_at(b, 5));
    ferry_graph_destroy_(g);
    ferry_stream_destroy(s);
    ferry_tensor_release(a);
    ferry_tensor_release(b);
}

/* A graph freed while its launches are still queued stays alive for them
 * (cudaGraphExecDestroy does not wait); a fault in a replay is the device's
 * sticky error, named as a graph launch. */
TEST(graph_destroy_while_queued_and_fault)
{
    require_sim();
    ferry_device dev = ferry_cuda(0);
    int64_t n = 16;
    ferry_tensor *a = NULL;
    ASSERT_OK(ferry_tensor_empty(&n, 1, FERRY_DTYPE_F32, dev, &a));
    ferry_stream *s = NULL;
    ASSERT_OK(ferry_stream_create(dev, &s));
    ASSERT_OK(ferry_stream_capture_begin_(s));
    ASSERT_OK(ferry_tensor_fill(a, 5.0, s));
    ferry_graph_ *g = NULL;
    ASSERT_OK(ferry_stream_capture_end_(s, &g));
    fill_host(a, 0, s);
    for (int i = 0; i < 4; i++)
        ASSERT_OK(ferry_graph_launch_(g, s));
    ferry_graph_destroy_(g);
    ASSERT_OK(ferry_stream_synchronize(s));
    ASSERT_MSG(read_at(a, 2) == 5.0f, "after the replays: %g", read_at(a, 2));

    ASSERT_OK(ferry_stream_capture_begin_(s));
    ASSERT_OK(ferry_tensor_fill(a, 6.0, s));
    ASSERT_OK(ferry_stream_capture_end_(s, &g));
    ferry_sim_debug_fault_after(0, 1);
    ASSERT_OK(ferry_graph_launch_(g, s)); /* the fault shows when it runs */
    ASSERT_STATUS(ferry_stream_synchronize(s), FERRY_ERR_CUDA);
    ASSERT_STR_CONTAINS(ferry_last_error(), "graph launch");
    ferry_graph_destroy_(g);
    ferry_stream_destroy(s);
    ferry_tensor_release(a);
    ferry_sim_debug_reset(0);
}

/* Each forbidden call fails naming CUDA's error, and the capture's end then
 * fails saying the capture was invalidated by it; the stream works after. */
typedef enum { BAD_SYNC, BAD_QUERY, BAD_DEVICE_SYNC, BAD_LEGACY, BAD_CUDA_MALLOC, BAD_ALLOC,
               BAD_EVENT_WAIT, BAD_D2H_PAGEABLE } bad_call;

static void check_forbidden(bad_call what, const char *want_err, const char *want_end)
{
    require_sim();
    ferry_device dev = ferry_cuda(0);
    int64_t n = 16;
    ferry_tensor *a = NULL;
    ASSERT_OK(ferry_tensor_empty(&n, 1, FERRY_DTYPE_F32, dev, &a));
    ferry_stream *s = NULL;
    ASSERT_OK(ferry_stream_create(dev, &s));
    ferry_event *ev = NULL;
    ASSERT_OK(ferry_event_create(dev, false, &ev));
    ASSERT_OK(ferry_event_record(ev, s));
    ASSERT_OK(ferry_stream_capture_begin_(s));
    ASSERT_OK(ferry_tensor_fill(a, 1.0, s));
    ferry_status st = FERRY_OK;
    bool done = false;
    void *p = NULL;
    float host[16];
    ferry_status dummy;
    switch (what) {
    case BAD_SYNC: st = ferry_stream_synchronize(s); break;
    case BAD_QUERY: st = ferry_stream_query_status(s, &done); break;
    case BAD_DEVICE_SYNC: st = ferry_device_synchronize(dev); break;
    case BAD_LEGACY: st = ferry_tensor_fill(a, 2.0, NULL); break;
    case BAD_CUDA_MALLOC: st = ferry_backend_for(dev, &dummy)->malloc(0, 256, &p); break;
    case BAD_ALLOC: st = ferry_device_alloc(dev, 256, s, &p); break;
    case BAD_EVENT_WAIT: st = ferry_stream_wait_event(s, ev); break;
    case BAD_D2H_PAGEABLE:
        st = ferry_memcpy(host, ferry_tensor_data(a), sizeof host, FERRY_COPY_D2H, dev, s);
        break;
    }
    ASSERT_MSG(st != FERRY_OK, "forbidden call %d succeeded during capture", (int)what);
    ASSERT_STR_CONTAINS(ferry_last_error(), want_err);
    ASSERT(p == NULL);
    ferry_graph_ *g = NULL;
    ASSERT_MSG(ferry_stream_capture_end_(s, &g) != FERRY_OK, "capture end succeeded after call %d",
               (int)what);
    ASSERT_STR_CONTAINS(ferry_last_error(), want_end);
    ASSERT(g == NULL);
    /* Outside the capture the same stream runs work again. */
    ASSERT_OK(ferry_tensor_fill(a, 3.0, s));
    ASSERT_OK(ferry_stream_synchronize(s));
    ASSERT_MSG(read_at(a, 0) == 3.0f, "after the capture: %g", read_at(a, 0));
    ferry_event_destroy(ev);
    ferry_stream_destroy(s);
    ferry_tensor_release(a);
}

TEST(capture_forbids_stream_sync)
{
    check_forbidden(BAD_SYNC, "cudaErrorStreamCaptureUnsupported", "cudaErrorStreamCaptureInvalidated");
}
TEST(capture_forbids_stream_query)
{
    check_forbidden(BAD_QUERY, "cudaErrorStreamCaptureUnsupported", "a query of a capturing stream");
}
TEST(capture_forbids_device_sync)
{
    check_forbidden(BAD_DEVICE_SYNC, "a wait for the whole device", "cudaErrorStreamCaptureInvalidated");
}
TEST(capture_forbids_legacy_stream)
{
    check_forbidden(BAD_LEGACY, "cudaErrorStreamCaptureImplicit", "legacy default stream");
}
TEST(capture_forbids_cuda_malloc)
{
    check_forbidden(BAD_CUDA_MALLOC, "cudaMalloc by the capturing thread", "cudaErrorStreamCaptureInvalidated");
}
TEST(capture_forbids_caching_allocator)
{
    check_forbidden(BAD_ALLOC, "during a CUDA graph capture", "must take and give back no device memory");
}
TEST(capture_forbids_outside_event_wait)
{
    check_forbidden(BAD_EVENT_WAIT, "cudaErrorStreamCaptureIsolation", "cudaErrorStreamCaptureInvalidated");
}
TEST(capture_forbids_pageable_copy)
{
    check_forbidden(BAD_D2H_PAGEABLE, "a copy that waits for the device", "cudaErrorStreamCaptureInvalidated");
}

/* ---- the training step as a graph ---- */

static ferry_module *make_model(bool cnn)
{
    return ft_step_model(cnn, 1);
}

typedef struct run_cfg {
    bool cnn, amp, adam, graph;
    uint64_t seed;
    int steps;
    int64_t batch, last_batch; /* the last step's batch (a shape change) */
} run_cfg;

typedef struct run_out {
    unsigned char params[1 << 20];
    size_t bytes;
    double loss, acc;
    int64_t seen, captures, launches_last;
} run_out;

/* Trains cfg->steps steps on batches drawn from the seed (the same batches for
 * the eager and the graph run) and keeps every parameter's bytes. */
static void train(const run_cfg *cfg, run_out *out)
{
    ferry_device dev = ferry_cuda(0);
    ferry_module *net = make_model(cfg->cnn);
    ASSERT_OK(ferry_module_init(net, cfg->seed));
    ASSERT_OK(ferry_module_to(net, dev));
    ferry_optim *opt = NULL;
    if (cfg->adam)
        ASSERT_OK(ferry_adam_create(net, 1e-3, 0.9, 0.999, 1e-8, 1e-4, &opt));
    else
        ASSERT_OK(ferry_sgd_create(net, 0.05, 0.9, 5e-4, &opt));
    ferry_amp *amp = NULL;
    if (cfg->amp) {
        ferry_amp_config ac = ferry_amp_config_default(FERRY_DTYPE_BF16);
        ASSERT_OK(ferry_amp_create(net, &ac, &amp));
    }
    ferry_metrics *met = NULL;
    ASSERT_OK(ferry_metrics_create(dev, &met));
    ferry_stream *s = NULL;
    ASSERT_OK(ferry_stream_create(dev, &s));
    ASSERT_OK(ferry_metrics_reset(met, s));
    ferry_train_graph *g = NULL;
    if (cfg->graph)
        ASSERT_OK(ferry_train_graph_create(net, opt, amp, met, &g));
    ferry_tensor *xk[16] = {NULL}, *yk[16] = {NULL};
    ASSERT(cfg->steps <= 16);
    for (int i = 0; i < cfg->steps; i++) {
        int64_t b = i == cfg->steps - 1 ? cfg->last_batch : cfg->batch;
        int64_t xs[4] = {b, 1, 28, 28};
        ferry_tensor *x = NULL, *y = NULL;
        ASSERT_OK(ferry_tensor_randn(xs, 4, FERRY_DTYPE_F32, dev, cfg->seed * 1000 + (uint64_t)i, &x));
        int64_t labels[64];
        ASSERT(b <= 64);
        for (int64_t j = 0; j < b; j++)
            labels[j] = (int64_t)((j * 7 + (int64_t)cfg->seed + i * 3) % 10);
        ASSERT_OK(ferry_tensor_from_host(labels, &b, 1, FERRY_DTYPE_I64, dev, &y));
        ferry_sim_counts c0, c1;
        ferry_sim_debug_counts(0, &c0);
        if (g)
            ASSERT_OK(ferry_train_graph_step(g, x, y, s));
        else
            ASSERT_OK(ferry_train_step(net, opt, amp, x, y, met, s));
        ferry_sim_debug_counts(0, &c1);
        out->launches_last = c1.launches - c0.launches;
        /* Kept until s is done: a tensor freed goes back to its own stream's
         * cache, unordered with s (the loader's batches live by its ring). */
        xk[i] = x;
        yk[i] = y;
    }
    ASSERT_OK(ferry_stream_synchronize(s));
    for (int i = 0; i < cfg->steps; i++) {
        ferry_tensor_release(xk[i]);
        ferry_tensor_release(yk[i]);
    }
    ASSERT_OK(ferry_metrics_get(met, &out->loss, &out->acc, &out->seen));
    out->bytes = 0;
    for (size_t i = 0; i < ferry_module_param_count(net); i++) {
        ferry_param p;
        ASSERT_OK(ferry_module_param(net, i, &p));
        size_t nb = ferry_tensor_nbytes(p.value);
        ASSERT(nb <= sizeof out->params - out->bytes);
        ASSERT_OK(ferry_tensor_copy_to_host(p.value, out->params + out->bytes, nb));
        out->bytes += nb;
    }
    out->captures = ferry_train_graph_captures(g);
    ferry_train_graph_destroy(g);
    ferry_stream_destroy(s);
    ferry_metrics_destroy(met);
    ferry_amp_destroy(amp);
    ferry_optim_destroy(opt);
    ferry_module_destroy(net);
}

static run_out eager_out, graph_out;

static void check_same_bits(run_cfg cfg)
{
    require_sim();
    cfg.graph = false;
    train(&cfg, &eager_out);
    cfg.graph = true;
    train(&cfg, &graph_out);
    ASSERT_EQ_SIZE(graph_out.bytes, eager_out.bytes);
    ASSERT_MEM_EQ(graph_out.params, eager_out.params, eager_out.bytes);
    ASSERT_EQ_INT(graph_out.seen, eager_out.seen);
    ASSERT_MSG(memcmp(&graph_out.loss, &eager_out.loss, sizeof(double)) == 0 &&
                   graph_out.acc == eager_out.acc,
               "metrics differ: loss %.9g vs %.9g, accuracy %g vs %g", graph_out.loss, eager_out.loss,
               graph_out.acc, eager_out.acc);
    ASSERT_EQ_INT(eager_out.captures, 0);
    /* One eager step, one capture; a changed last batch: eager again. */
    ASSERT_EQ_INT(graph_out.captures, 1);
}

static void check_seeds(bool cnn, bool amp, bool adam)
{
    for (uint64_t seed = 1; seed <= 3; seed++) {
        run_cfg cfg = {.cnn = cnn, .amp = amp, .adam = adam, .seed = seed, .steps = 5, .batch = 8,
                       .last_batch = 8};
        check_same_bits(cfg);
        /* The replays are single launches (plus the two input copies). */
        ASSERT_MSG(graph_out.launches_last <= 3, "%lld launches in a replayed step",
                   (long long)graph_out.launches_last);
        ASSERT_MSG(eager_out.launches_last > 3, "%lld launches in an eager step",
                   (long long)eager_out.launches_last);
    }
}

TEST(graph_step_same_bits_mlp) { check_seeds(false, false, false); }
TEST(graph_step_same_bits_mlp_adam) { check_seeds(false, false, true); }
TEST(graph_step_same_bits_mlp_amp) { check_seeds(false, true, false); }
TEST(graph_step_same_bits_cnn) { check_seeds(true, false, false); }
TEST(graph_step_same_bits_cnn_amp_adam) { check_seeds(true, true, true); }

/* A batch of another shape (an epoch's last) runs eagerly, and the graph is
 * dropped: still the eager run's bits. */
TEST(graph_step_shape_change_runs_eager)
{
    run_cfg cfg = {.cnn = false, .seed = 5, .steps = 5, .batch = 8, .last_batch = 5};
    check_same_bits(cfg);
    ASSERT_EQ_INT(graph_out.seen, 4 * 8 + 5);
}

/* Anything that may move the module's buffers between steps (an evaluation
 * forward at another batch) makes the next step eager and the one after
 * capture again; the bits stay the eager run's. */
TEST(graph_step_recaptures_after_eval)
{
    require_sim();
    ferry_device dev = ferry_cuda(0);
    run_out *outs[2] = {&eager_out, &graph_out};
    for (int k = 0; k < 2; k++) {
        ferry_module *net = make_model(false);
        ASSERT_OK(ferry_module_init(net, 9));
        ASSERT_OK(ferry_module_to(net, dev));
        ferry_optim *opt = NULL;
        ASSERT_OK(ferry_sgd_create(net, 0.05, 0.9, 0.0, &opt));
        ferry_metrics *met = NULL, *evm = NULL;
        ASSERT_OK(ferry_metrics_create(dev, &met));
        ASSERT_OK(ferry_metrics_create(dev, &evm));
        ferry_stream *s = NULL;
        ASSERT_OK(ferry_stream_create(dev, &s));
        ferry_train_graph *g = NULL;
        if (k)
            ASSERT_OK(ferry_train_graph_create(net, opt, NULL, met, &g));
        for (int i = 0; i < 8; i++) {
            int64_t b = i == 4 ? 3 : 8, xs[4] = {b, 1, 28, 28};
            ferry_tensor *x = NULL, *y = NULL;
            ASSERT_OK(ferry_tensor_randn(xs, 4, FERRY_DTYPE_F32, dev, 50 + (uint64_t)i, &x));
            int64_t labels[8];
            for (int64_t j = 0; j < b; j++)
                labels[j] = (j + i) % 10;
            ASSERT_OK(ferry_tensor_from_host(labels, &b, 1, FERRY_DTYPE_I64, dev, &y));
            if (i == 4) /* an evaluation at another batch */
                ASSERT_OK(ferry_eval_step(net, x, y, evm, s));
            else if (g)
                ASSERT_OK(ferry_train_graph_step(g, x, y, s));
            else
                ASSERT_OK(ferry_train_step(net, opt, NULL, x, y, met, s));
            if (i == 6) /* the lr is a kernel argument: a change re-captures */
                ferry_optim_set_lr(opt, 0.02);
            ASSERT_OK(ferry_stream_synchronize(s)); /* before x and y go */
            ferry_tensor_release(x);
            ferry_tensor_release(y);
        }
        ASSERT_OK(ferry_metrics_get(met, &outs[k]->loss, &outs[k]->acc, &outs[k]->seen));
        outs[k]->bytes = 0;
        for (size_t i = 0; i < ferry_module_param_count(net); i++) {
            ferry_param p;
            ASSERT_OK(ferry_module_param(net, i, &p));
            size_t nb = ferry_tensor_nbytes(p.value);
            ASSERT_OK(ferry_tensor_copy_to_host(p.value, outs[k]->params + outs[k]->bytes, nb));
            outs[k]->bytes += nb;
        }
        outs[k]->captures = ferry_train_graph_captures(g);
        ferry_train_graph_destroy(g);
        ferry_stream_destroy(s);
        ferry_metrics_destroy(met);
        ferry_metrics_destroy(evm);
        ferry_optim_destroy(opt);
        ferry_module_destroy(net);
    }
    ASSERT_MEM_EQ(graph_out.params, eager_out.params, eager_out.bytes);
    ASSERT_EQ_INT(graph_out.seen, eager_out.seen);
    ASSERT_EQ_INT(graph_out.seen, 7 * 8);
    /* steps 0 eager, 1 capture, 2-3 replay; 5 eager (after eval), 6 capture;
     * 7 eager (lr changed). */
    ASSERT_EQ_INT(graph_out.captures, 2);
}

TEST(graph_needs_metrics)
{
    ferry_module *net = make_model(false);
    ferry_optim *opt = NULL;
    ASSERT_OK(ferry_sgd_create(net, 0.05, 0.0, 0.0, &opt));
    ferry_train_graph *g = NULL;
    ASSERT_STATUS(ferry_train_graph_create(net, opt, NULL, NULL, &g), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "metrics is NULL");
    ferry_optim_destroy(opt);
    ferry_module_destroy(net);
}

/* A Dropout's mask comes from a host counter a replay would not advance. */
TEST(graph_refuses_dropout)
{
    ferry_module *net = make_model(false), *m = NULL;
    ASSERT_OK(ferry_dropout_create(0.5, 1, &m));
    ASSERT_OK(ferry_sequential_add(net, m));
    ferry_optim *opt = NULL;
    ASSERT_OK(ferry_sgd_create(net, 0.05, 0.0, 0.0, &opt));
    ferry_metrics *met = NULL;
    ASSERT_OK(ferry_metrics_create(ferry_cpu(), &met));
    ferry_train_graph *g = NULL;
    ASSERT_STATUS(ferry_train_graph_create(net, opt, NULL, met, &g), FERRY_ERR_UNSUPPORTED);
    ASSERT_STR_CONTAINS(ferry_last_error(), "mask");
    ASSERT(g == NULL);
    ferry_metrics_destroy(met);
    ferry_optim_destroy(opt);
    ferry_module_destroy(net);
}

/* On the CPU every step is eager: same results as ferry_train_step. */
TEST(graph_step_on_cpu_is_eager)
{
    ferry_device dev = ferry_cpu();
    ferry_module *net = make_model(false);
    ASSERT_OK(ferry_module_init(net, 4));
    ferry_optim *opt = NULL;
    ASSERT_OK(ferry_sgd_create(net, 0.05, 0.9, 0.0, &opt));
    ferry_metrics *met = NULL;
    ASSERT_OK(ferry_metrics_create(dev, &met));
    ferry_train_graph *g = NULL;
    ASSERT_OK(ferry_train_graph_create(net, opt, NULL, met, &g));
    int64_t xs[4] = {4, 1, 28, 28}, b = 4, labels[4] = {1, 2, 3, 4};
    ferry_tensor *x = NULL, *y = NULL;
    ASSERT_OK(ferry_tensor_randn(xs, 4, FERRY_DTYPE_F32, dev, 3, &x));
    ASSERT_OK(ferry_tensor_from_host(labels, &b, 1, FERRY_DTYPE_I64, dev, &y));
    for (int i = 0; i < 3; i++)
        ASSERT_OK(ferry_train_graph_step(g, x, y, NULL));
    int64_t seen = 0;
    ASSERT_OK(ferry_metrics_get(met, NULL, NULL, &seen));
    ASSERT_EQ_INT(seen, 12);
    ASSERT_EQ_INT(ferry_train_graph_captures(g), 0);
    ferry_tensor_release(x);
    ferry_tensor_release(y);
    ferry_train_graph_destroy(g);
    ferry_metrics_destroy(met);
    ferry_optim_destroy(opt);
    ferry_module_destroy(net);
}

/* Without metrics a step checks its labels on the host: one wait per step
 * (the copy of the count into pageable memory returns once done), not a
 * copy and then a stream synchronisation. */
TEST(train_step_without_metrics_waits_once)
{
    require_sim();
    ferry_device dev = ferry_cuda(0);
    ferry_module *net = make_model(false);
    ASSERT_OK(ferry_module_init(net, 2));
    ASSERT_OK(ferry_module_to(net, dev));
    ferry_optim *opt = NULL;
    ASSERT_OK(ferry_sgd_create(net, 0.05, 0.9, 0.0, &opt));
    ferry_stream *s = NULL;
    ASSERT_OK(ferry_stream_create(dev, &s));
    int64_t xs[4] = {4, 1, 28, 28}, b = 4, labels[4] = {1, 2, 3, 4};
    ferry_tensor *x = NULL, *y = NULL;
    ASSERT_OK(ferry_tensor_randn(xs, 4, FERRY_DTYPE_F32, dev, 3, &x));
    ASSERT_OK(ferry_tensor_from_host(labels, &b, 1, FERRY_DTYPE_I64, dev, &y));
    ASSERT_OK(ferry_train_step(net, opt, NULL, x, y, NULL, s));
    ferry_sim_counts c0, c1;
    ferry_sim_debug_counts(0, &c0);
    for (int i = 0; i < 3; i++)
        ASSERT_OK(ferry_train_step(net, opt, NULL, x, y, NULL, s));
    ferry_sim_debug_counts(0, &c1);
    ASSERT_EQ_INT(c1.host_syncs - c0.host_syncs, 3);
    ASSERT_EQ_INT(c1.d2h_copies - c0.d2h_copies, 3);
    ASSERT_OK(ferry_stream_synchronize(s));
    ferry_tensor_release(x);
    ferry_tensor_release(y);
    ferry_stream_destroy(s);
    ferry_optim_destroy(opt);
    ferry_module_destroy(net);
}

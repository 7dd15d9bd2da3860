/* Adam's bias corrections are computed once per step (issue 41): an Adam or
 * AdamW training step on the simulated GPU makes exactly one launch more than
 * the same step with SGD (the one-thread adam_consts; both updates are one
 * multi-tensor launch), and, like SGD's, no host synchronisation and no
 * allocation after the first step (the constants' buffer is made once). With
 * and without mixed precision, whose skipped steps leave the count on the
 * device. Runs under FERRY_SIM_GPUS; skips otherwise. */
#include <stdio.h>

#include "device/sim/sim.h"
#include "ferry/device.h"
#include "ferry/nn.h"
#include "ferry/ops.h"
#include "ferry/tensor.h"
#include "harness.h"
#include "harness_step.h"

enum { K_SGD, K_ADAM, K_ADAMW };

static ferry_module *mlp(void)
{
    ferry_module *seq = NULL, *m = NULL;
    ASSERT_OK(ferry_sequential_create(&seq));
    ASSERT_OK(ferry_flatten_create(&m));
    ASSERT_OK(ferry_sequential_add(seq, m));
    ASSERT_OK(ferry_linear_create(784, 64, true, &m));
    ASSERT_OK(ferry_sequential_add(seq, m));
    ASSERT_OK(ferry_relu_create(&m));
    ASSERT_OK(ferry_sequential_add(seq, m));
    ASSERT_OK(ferry_linear_create(64, 10, true, &m));
    ASSERT_OK(ferry_sequential_add(seq, m));
    return seq;
}

typedef struct per_step {
    int64_t launches, host_syncs, d2h_copies;
    uint64_t alloc_calls;
} per_step;

static per_step snapshot(ferry_device dev)
{
    ferry_sim_counts sc;
    ferry_sim_debug_counts(dev.index, &sc);
    ferry_memory_stats ms;
    ASSERT_OK(ferry_memory_stats_get(dev, &ms));
    return (per_step){.launches = sc.launches, .host_syncs = sc.host_syncs, .d2h_copies = sc.d2h_copies,
                      .alloc_calls = ms.alloc_calls};
}

/* Counts per step over `steps` steps after two of warm-up. */
static per_step measure(int kind, bool amp_on, int steps)
{
    ferry_device dev = ferry_cuda(0);
    ferry_module *net = mlp();
    ASSERT_OK(ferry_module_init(net, 7));
    ASSERT_OK(ferry_module_to(net, dev));
    ferry_optim *opt = NULL;
    if (kind == K_SGD)
        ASSERT_OK(ferry_sgd_create(net, 0.05, 0.9, 5e-4, &opt));
    else if (kind == K_ADAM)
        ASSERT_OK(ferry_adam_create(net, 1e-3, 0.9, 0.999, 1e-8, 5e-4, &opt));
    else
        ASSERT_OK(ferry_adamw_create(net, 1e-3, 0.9, 0.999, 1e-8, 5e-4, &opt));
    ft_step_rig r = ft_step_rig_open(dev, net, opt, amp_on, 16);
    ft_step_rig_steps(&r, 2);
    ASSERT_OK(ferry_stream_synchronize(r.s));
    per_step a = snapshot(dev);
    ft_step_rig_steps(&r, steps);
    per_step b = snapshot(dev);
    ASSERT_OK(ferry_stream_synchronize(r.s));
    ASSERT_EQ_INT(ferry_optim_step_count(opt), 2 + steps); /* no step skipped: each counted */
    per_step d = {.launches = (b.launches - a.launches) / steps,
                  .host_syncs = b.host_syncs - a.host_syncs,
                  .d2h_copies = b.d2h_copies - a.d2h_copies,
                  .alloc_calls = b.alloc_calls - a.alloc_calls};
    ASSERT_EQ_INT((b.launches - a.launches) % steps, 0);
    ft_step_rig_close(&r);
    return d;
}

static void check(bool amp)
{
    if (!ferry_cuda_is_simulated())
        SKIP("not on the simulated GPU (set FERRY_SIM_GPUS)");
    ferry_sim_debug_fault_after(0, 0);
    ferry_sim_debug_reset(0);
    per_step sgd = measure(K_SGD, amp, 3);
    for (int kind = K_ADAM; kind <= K_ADAMW; kind++) {
        per_step d = measure(kind, amp, 3);
        fprintf(stderr, "  %s%s: %lld launches per step (SGD %lld)\n", kind == K_ADAM ? "Adam" : "AdamW",
                amp ? " amp" : "", (long long)d.launches, (long long)sgd.launches);
        ASSERT_EQ_INT(d.launches, sgd.launches + 1);
        ASSERT_EQ_INT(d.host_syncs, 0);
        ASSERT_EQ_INT(d.d2h_copies, 0);
        ASSERT_EQ_INT(d.alloc_calls, 0);
    }
}

TEST(adam_constants_once_per_step) { check(false); }
TEST(adam_constants_once_per_step_amp) { check(true); }

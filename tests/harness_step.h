/* A model, its optimiser and what a train step needs on a device (stream,
 * metrics, optional bf16 AMP, a batch of randn images 1x28x28 with labels),
 * for the tests that count what a step does after a warm-up (test_adam_step,
 * test_step_gpu). Header only: static functions, one copy per test program. */
#ifndef FERRY_TESTS_HARNESS_STEP_H
#define FERRY_TESTS_HARNESS_STEP_H

#include "ferry/nn.h"
#include "ferry/ops.h"
#include "ferry/tensor.h"
#include "harness.h"

/* The child is made first, then added: a macro, as C leaves the order in which
 * a function's arguments are evaluated open. */
#define FT_STEP_ADD(seq, make)                                                 \
    do {                                                                       \
        ASSERT_OK(make);                                                       \
        ASSERT_OK(ferry_sequential_add(seq, m));                               \
    } while (0)

/* samples/common.h's model_mlp and model_cnn for 1 x 28 x 28 images at
 * width w = 4; a smaller w narrows every layer (w = 1: a quick test's). */
static inline ferry_module *ft_step_model(bool cnn, int64_t w)
{
    ferry_module *seq = NULL, *m = NULL;
    ASSERT_OK(ferry_sequential_create(&seq));
    if (cnn) {
        FT_STEP_ADD(seq, ferry_conv2d_create(1, 8 * w, 3, 1, 1, true, &m));
        FT_STEP_ADD(seq, ferry_relu_create(&m));
        FT_STEP_ADD(seq, ferry_maxpool2d_create(2, 0, 0, &m));
        FT_STEP_ADD(seq, ferry_conv2d_create(8 * w, 16 * w, 3, 1, 1, true, &m));
        FT_STEP_ADD(seq, ferry_relu_create(&m));
        FT_STEP_ADD(seq, ferry_maxpool2d_create(2, 0, 0, &m));
        FT_STEP_ADD(seq, ferry_flatten_create(&m));
        FT_STEP_ADD(seq, ferry_linear_create(16 * w * 7 * 7, 32 * w, true, &m));
        FT_STEP_ADD(seq, ferry_relu_create(&m));
        FT_STEP_ADD(seq, ferry_linear_create(32 * w, 10, true, &m));
    } else {
        FT_STEP_ADD(seq, ferry_flatten_create(&m));
        FT_STEP_ADD(seq, ferry_linear_create(784, 64 * w, true, &m));
        FT_STEP_ADD(seq, ferry_relu_create(&m));
        FT_STEP_ADD(seq, ferry_linear_create(64 * w, 32 * w, true, &m));
        FT_STEP_ADD(seq, ferry_relu_create(&m));
        FT_STEP_ADD(seq, ferry_linear_create(32 * w, 10, true, &m));
    }
    return seq;
}

typedef struct ft_step_rig {
    ferry_module *net;
    ferry_optim *opt;
    ferry_amp *amp; /* NULL without AMP */
    ferry_metrics *met;
    ferry_stream *s;
    ferry_tensor *x, *y;
} ft_step_rig;

/* Takes net and opt (on dev already); batch at most 256. Metrics reset. */
static inline ft_step_rig ft_step_rig_open(ferry_device dev, ferry_module *net, ferry_optim *opt,
                                           bool amp_on, int64_t batch)
{
    ft_step_rig r = {.net = net, .opt = opt};
    if (amp_on) {
        ferry_amp_config ac = ferry_amp_config_default(FERRY_DTYPE_BF16);
        ASSERT_OK(ferry_amp_create(net, &ac, &r.amp));
    }
    /* With metrics, where the bad-label count goes (without, the step reports
     * it at once, which waits for the device). */
    ASSERT_OK(ferry_metrics_create(dev, &r.met));
    ASSERT_OK(ferry_stream_create(dev, &r.s));
    int64_t xs[4] = {batch, 1, 28, 28}, labels[256];
    ASSERT(batch > 0 && batch <= 256);
    for (int64_t i = 0; i < batch; i++)
        labels[i] = (i * 7 + 3) % 10;
    ASSERT_OK(ferry_tensor_randn(xs, 4, FERRY_DTYPE_F32, dev, 11, &r.x));
    ASSERT_OK(ferry_tensor_from_host(labels, &batch, 1, FERRY_DTYPE_I64, dev, &r.y));
    ASSERT_OK(ferry_metrics_reset(r.met, r.s));
    return r;
}

/* n train steps on the rig's batch, queued on its stream (not waited for). */
static inline void ft_step_rig_steps(ft_step_rig *r, int n)
{
    for (int i = 0; i < n; i++)
        ASSERT_OK(ferry_train_step(r->net, r->opt, r->amp, r->x, r->y, r->met, r->s));
}

static inline void ft_step_rig_close(ft_step_rig *r)
{
    ferry_tensor_release(r->x);
    ferry_tensor_release(r->y);
    ferry_stream_destroy(r->s);
    ferry_metrics_destroy(r->met);
    ferry_amp_destroy(r->amp);
    ferry_optim_destroy(r->opt);
    ferry_module_destroy(r->net);
}

#endif

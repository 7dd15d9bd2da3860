/* Modules, optimisers, mixed precision and training: an MLP overfits one batch,
 * the optimisers follow PyTorch's formulas, AMP skips bad steps and adapts its
 * scale, to() round trips, a failed step leaves the model usable. */
#include <stdlib.h>

#include "harness.h"
#include "ferry/nn.h"
#include "common/error.h"
#include "tensor/internal.h"

#define CPU ferry_cpu()

static ferry_module *mlp(int64_t in, int64_t hidden, int64_t out)
{
    ferry_module *seq = NULL, *l = NULL;
    ASSERT_OK(ferry_sequential_create(&seq));
    ASSERT_OK(ferry_flatten_create(&l)); ASSERT_OK(ferry_sequential_add(seq, l));
    ASSERT_OK(ferry_linear_create(in, hidden, true, &l)); ASSERT_OK(ferry_sequential_add(seq, l));
    ASSERT_OK(ferry_relu_create(&l)); ASSERT_OK(ferry_sequential_add(seq, l));
    ASSERT_OK(ferry_linear_create(hidden, out, true, &l)); ASSERT_OK(ferry_sequential_add(seq, l));
    ASSERT_OK(ferry_module_init(seq, 1));
    return seq;
}

static void overfit(ferry_device dev)
{
    ferry_module *net = mlp(32, 64, 10);
    ASSERT_OK(ferry_module_to(net, dev));
    int64_t xs[3] = {64, 4, 8}, n = 64;
    ferry_tensor *x = NULL, *y = NULL, *yf = NULL;
    ASSERT_OK(ferry_tensor_randn(xs, 3, FERRY_DTYPE_F32, dev, 5, &x));
    ASSERT_OK(ferry_tensor_rand(&n, 1, FERRY_DTYPE_F32, dev, 6, &yf));
    ferry_tensor *y10 = NULL;
    ASSERT_OK(ferry_mul_scalar(yf, 10.0, NULL, &y10));
    ASSERT_OK(ferry_affine(y10, 1.0, 0.0, FERRY_DTYPE_I64, NULL, &y));
    ferry_optim *opt = NULL;
    ASSERT_OK(ferry_sgd_create(net, 0.1, 0.9, 0.0, &opt));
    ferry_metrics *mt = NULL;
    ASSERT_OK(ferry_metrics_create(dev, &mt));
    double loss = 0, acc = 0, first = 0;
    for (int step = 0; step < 300; step++) {
        ASSERT_OK(ferry_metrics_reset(mt, NULL));
        ASSERT_OK(ferry_train_step(net, opt, NULL, x, y, mt, NULL));
        ASSERT_OK(ferry_metrics_get(mt, &loss, &acc, NULL));
        if (step == 0)
            first = loss;
        if (loss < 0.01)
            break;
    }
    ASSERT_MSG(loss < 0.01, "loss %g after 300 steps (first %g)", loss, first);
    ASSERT_NEAR(acc, 1.0, 0);
    ASSERT_OK(ferry_metrics_reset(mt, NULL));
    ASSERT_OK(ferry_eval_step(net, x, y, mt, NULL));
    ASSERT_OK(ferry_metrics_get(mt, &loss, &acc, NULL));
    ASSERT(loss < 0.02 && acc == 1.0);
    ASSERT(ferry_module_is_training(net));
    ferry_metrics_destroy(mt);
    ferry_optim_destroy(opt);
    ferry_tensor_release(x); ferry_tensor_release(y); ferry_tensor_release(yf); ferry_tensor_release(y10);
    ferry_module_destroy(net);
}

TEST(mlp_overfits_one_batch_cpu) { overfit(CPU); }

TEST(mlp_overfits_one_batch_cuda)
{
    ft_require_cuda();
    overfit(ferry_cuda(0));
}

TEST(module_parameters_names_and_count)
{
    ferry_module *net = mlp(784, 256, 10), *bn = NULL;
    ASSERT_EQ_INT(ferry_module_trainable_numel(net), 784 * 256 + 256 + 256 * 10 + 10);
    ASSERT_EQ_SIZE(ferry_module_param_count(net), 4);
    ferry_param p;
    ASSERT_OK(ferry_module_param(net, 2, &p));
    ASSERT_STR_EQ(p.name, "3.weight");
    ASSERT_EQ_INT(ferry_tensor_dim(p.value, 0), 10);
    ASSERT_STATUS(ferry_module_param(net, 4, &p), FERRY_ERR_INVALID_ARG);
    ASSERT_OK(ferry_batchnorm2d_create(8, 1e-5, 0.1, &bn));
    ASSERT_OK(ferry_sequential_add(net, bn));
    ASSERT_OK(ferry_module_param(net, 6, &p));
    ASSERT_STR_EQ(p.name, "4.running_mean");
    ASSERT(p.buffer && !p.grad);
    ASSERT_EQ_INT(ferry_module_trainable_numel(net), 784 * 256 + 256 + 256 * 10 + 10 + 16);
    ASSERT_STR_EQ(ferry_module_name(net), "Sequential(5)");
    /* Same seed, same model. */
    ferry_module *b = mlp(784, 256, 10);
    ferry_param q;
    ASSERT_OK(ferry_module_param(net, 0, &p));
    ASSERT_OK(ferry_module_param(b, 0, &q));
    ASSERT_MEM_EQ(ferry_tensor_data(p.value), ferry_tensor_data(q.value), ferry_tensor_nbytes(p.value));
    ferry_module_destroy(b);
    ferry_module_destroy(net);
}

TEST(forward_checks_input)
{
    ferry_module *l = NULL;
    ASSERT_OK(ferry_linear_create(4, 3, true, &l));
    int64_t s[2] = {2, 5};
    ferry_tensor *x = NULL, *y = NULL, *dx = NULL;
    ASSERT_OK(ferry_tensor_zeros(s, 2, FERRY_DTYPE_F32, CPU, &x));
    ASSERT_STATUS(ferry_module_forward(l, x, NULL, &y), FERRY_ERR_SHAPE);
    ASSERT_STR_CONTAINS(ferry_last_error(), "Linear(4, 3) expects input [..., 4], got [2, 5]");
    ferry_tensor fake = *x;
    fake.device = ferry_cuda(0);
    fake.shape[1] = 4;
    ASSERT_STATUS(ferry_module_forward(l, &fake, NULL, &y), FERRY_ERR_DEVICE_MISMATCH);
    ASSERT_STR_CONTAINS(ferry_last_error(), "expected all tensors to be on the same device, but found cuda:0 and cpu");
    ASSERT_STATUS(ferry_module_backward(l, x, NULL, &dx), FERRY_ERR_BAD_STATE);
    ferry_tensor_release(x);
    ferry_module_destroy(l);
}

/* One parameter, hand-set gradient: the optimisers against PyTorch's formulas. */
static ferry_module *one_param(float w0, ferry_param *p)
{
    ferry_module *l = NULL;
    ASSERT_OK(ferry_linear_create(1, 1, false, &l));
    ASSERT_OK(ferry_module_param(l, 0, p));
    *(float *)ferry_tensor_data(p->value) = w0;
    return l;
}

TEST(sgd_momentum_weight_decay_formula)
{
    ferry_param p;
    ferry_module *l = one_param(1.0f, &p);
    ferry_optim *o = NULL;
    ASSERT_OK(ferry_sgd_create(l, 0.1, 0.9, 0.01, &o));
    double w = 1.0, buf = 0;
    for (int t = 0; t < 5; t++) {
        double g = 0.5 + t;
        *(float *)ferry_tensor_data(p.grad) = (float)g;
        ASSERT_OK(ferry_optim_step(o, NULL));
        double d = g + 0.01 * w;
        buf = t == 0 ? d : 0.9 * buf + d;
        w -= 0.1 * buf;
        ASSERT_NEAR(*(float *)ferry_tensor_data(p.value), w, 1e-5);
    }
    ASSERT_EQ_INT(ferry_optim_step_count(o), 5);
    ferry_optim_destroy(o);
    ferry_module_destroy(l);
}

/* Nesterov (lookahead: p -= lr (d + momentum buf)) and dampening (buf = momentum
 * buf + (1 - dampening) d after the first step), each alone, as torch.optim.SGD. */
static void sgd_variant_check(double dampening, bool nesterov)
{
    ferry_param p;
    ferry_module *l = one_param(1.0f, &p);
    ferry_optim *o = NULL;
    ASSERT_OK(ferry_sgd_create_ex(l, 0.1, 0.9, dampening, 0.01, nesterov, &o));
    double w = 1.0, buf = 0;
    for (int t = 0; t < 5; t++) {
        double g = 0.5 - 0.4 * t;
        *(float *)ferry_tensor_data(p.grad) = (float)g;
        ASSERT_OK(ferry_optim_step(o, NULL));
        double d = g + 0.01 * w;
        buf = t == 0 ? d : 0.9 * buf + (1 - dampening) * d;
        w -= 0.1 * (nesterov ? d + 0.9 * buf : buf);
        ASSERT_NEAR(*(float *)ferry_tensor_data(p.value), w, 1e-6);
    }
    ferry_optim_destroy(o);
    ferry_module_destroy(l);
}

TEST(sgd_nesterov_formula) { sgd_variant_check(0.0, true); }
TEST(sgd_dampening_formula) { sgd_variant_check(0.5, false); }

/* After set_lr the next step moves the parameter by the new rate times the
 * gradient (plain SGD: p -= lr g), and ferry_optim_lr reports it. */
TEST(set_lr_changes_the_next_step)
{
    ferry_param p;
    ferry_module *l = one_param(1.0f, &p);
    ferry_optim *o = NULL;
    ASSERT_OK(ferry_sgd_create(l, 0.5, 0.0, 0.0, &o));
    float *w = ferry_tensor_data(p.value), *g = ferry_tensor_data(p.grad);
    *g = 0.25f;
    ASSERT_OK(ferry_optim_step(o, NULL));
    ASSERT_NEAR(*w, 1.0 - 0.5 * 0.25, 1e-7);
    ferry_optim_set_lr(o, 0.125);
    ASSERT_NEAR(ferry_optim_lr(o), 0.125, 0);
    ASSERT_OK(ferry_optim_step(o, NULL));
    ASSERT_NEAR(*w, 1.0 - 0.5 * 0.25 - 0.125 * 0.25, 1e-7);
    ferry_optim_destroy(o);
    ferry_module_destroy(l);
}

static void adam_check(bool decoupled)
{
    ferry_param p;
    ferry_module *l = one_param(0.5f, &p);
    ferry_optim *o = NULL;
    if (decoupled)
        ASSERT_OK(ferry_adamw_create(l, 0.01, 0.9, 0.999, 1e-8, 0.1, &o));
    else
        ASSERT_OK(ferry_adam_create(l, 0.01, 0.9, 0.999, 1e-8, 0.1, &o));
    double w = 0.5, m = 0, v = 0;
    for (int t = 1; t <= 5; t++) {
        double g = 1.0 - 0.3 * t;
        *(float *)ferry_tensor_data(p.grad) = (float)g;
        ASSERT_OK(ferry_optim_step(o, NULL));
        if (decoupled)
            w *= 1 - 0.01 * 0.1;
        else
            g += 0.1 * w;
        m = 0.9 * m + 0.1 * g;
        v = 0.999 * v + 0.001 * g * g;
        double mh = m / (1 - pow(0.9, t)), vh = v / (1 - pow(0.999, t));
        w -= 0.01 * mh / (sqrt(vh) + 1e-8);
        ASSERT_NEAR(*(float *)ferry_tensor_data(p.value), w, 1e-5);
    }
    ferry_optim_destroy(o);
    ferry_module_destroy(l);
}

TEST(adam_formula) { adam_check(false); }
TEST(adamw_formula) { adam_check(true); }

TEST(amp_skips_nonfinite_steps_and_adapts_scale)
{
    /* The loss-scale logic runs on any device: gradients are set by hand. */
    ferry_param p;
    ferry_module *l = one_param(1.0f, &p);
    ferry_amp_config cfg = ferry_amp_config_default(FERRY_DTYPE_F16);
    cfg.init_scale = 1024;
    cfg.growth_interval = 2;
    ferry_amp *amp = NULL;
    ferry_optim *o = NULL;
    ASSERT_OK(ferry_sgd_create(l, 0.5, 0.0, 0.0, &o));
    ASSERT_OK(ferry_amp_create(l, &cfg, &amp));
    ASSERT_EQ_INT(ferry_module_dtype(l), FERRY_DTYPE_F16);
    ASSERT_OK(ferry_module_param(l, 0, &p));
    ASSERT_EQ_INT(ferry_tensor_dtype(p.value), FERRY_DTYPE_F16);
    ASSERT_EQ_INT(ferry_tensor_dtype(p.grad), FERRY_DTYPE_F16);
    uint16_t *g = ferry_tensor_data(p.grad);
    bool skipped = true;
    *g = ferry_f32_to_f16(0.25f * 1024); /* unscaled gradient 0.25 */
    ASSERT_OK(ferry_amp_step(amp, o, NULL, &skipped));
    ASSERT(!skipped);
    ASSERT_NEAR(ferry_f16_to_f32(*(uint16_t *)ferry_tensor_data(p.value)), 1.0 - 0.5 * 0.25, 1e-3);
    *g = 0x7c00; /* +inf */
    ASSERT_OK(ferry_amp_step(amp, o, NULL, &skipped));
    ASSERT(skipped);
    ASSERT_NEAR(ferry_amp_scale(amp), 512, 0);
    ASSERT_NEAR(ferry_f16_to_f32(*(uint16_t *)ferry_tensor_data(p.value)), 0.875, 1e-3);
    *g = 0x7e00; /* nan */
    ASSERT_OK(ferry_amp_step(amp, o, NULL, &skipped));
    ASSERT(skipped);
    ASSERT_NEAR(ferry_amp_scale(amp), 256, 0);
    *g = ferry_f32_to_f16(0.0f);
    ASSERT_OK(ferry_amp_step(amp, o, NULL, &skipped));
    ASSERT_NEAR(ferry_amp_scale(amp), 256, 0);
    ASSERT_OK(ferry_amp_step(amp, o, NULL, &skipped));
    ASSERT_NEAR(ferry_amp_scale(amp), 512, 0); /* two good steps in a row */
    ASSERT_EQ_INT(ferry_optim_step_count(o), 3);
    ASSERT_STATUS(ferry_module_to_dtype(l, FERRY_DTYPE_F32), FERRY_ERR_BAD_STATE);
    ferry_amp_destroy(amp);
    ferry_optim_destroy(o);
    ferry_module_destroy(l);
}

static void amp_train(ferry_device dev)
{
    for (int d = 0; d < 2; d++) {
        ferry_module *net = mlp(32, 64, 10);
        ASSERT_OK(ferry_module_to(net, dev));
        ferry_optim *opt = NULL;
        ferry_amp *amp = NULL;
        ASSERT_OK(ferry_sgd_create(net, 0.1, 0.9, 0.0, &opt));
        ferry_amp_config cfg = ferry_amp_config_default(d ? FERRY_DTYPE_BF16 : FERRY_DTYPE_F16);
        ASSERT_OK(ferry_amp_create(net, &cfg, &amp));
        int64_t xs[2] = {64, 32}, n = 64;
        ferry_tensor *x = NULL, *yf = NULL, *y = NULL;
        ASSERT_OK(ferry_tensor_randn(xs, 2, FERRY_DTYPE_F32, dev, 5, &x));
        ASSERT_OK(ferry_tensor_rand(&n, 1, FERRY_DTYPE_F32, dev, 6, &yf));
        ferry_tensor *y10 = NULL;
        ASSERT_OK(ferry_mul_scalar(yf, 10.0, NULL, &y10));
        ASSERT_OK(ferry_affine(y10, 1.0, 0.0, FERRY_DTYPE_I64, NULL, &y));
        ferry_metrics *mt = NULL;
        ASSERT_OK(ferry_metrics_create(dev, &mt));
        double loss = 0;
        for (int step = 0; step < 400; step++) {
            ASSERT_OK(ferry_metrics_reset(mt, NULL));
            ASSERT_OK(ferry_train_step(net, opt, amp, x, y, mt, NULL));
            ASSERT_OK(ferry_metrics_get(mt, &loss, NULL, NULL));
        }
        ASSERT_MSG(loss < 0.05, "%s: loss %g", ferry_dtype_name(cfg.dtype), loss);
        ferry_metrics_destroy(mt);
        ferry_amp_destroy(amp);
        ferry_optim_destroy(opt);
        ferry_tensor_release(x); ferry_tensor_release(y); ferry_tensor_release(yf); ferry_tensor_release(y10);
        ferry_module_destroy(net);
    }
}

TEST(amp_trains_on_cpu) { amp_train(CPU); }

TEST(amp_trains_on_cuda)
{
    ft_require_cuda();
    amp_train(ferry_cuda(0));
}

TEST(to_device_round_trip)
{
    ft_require_cuda();
    ferry_module *net = mlp(8, 16, 4);
    ferry_param a, b;
    ASSERT_OK(ferry_module_param(net, 0, &a));
    float before[128];
    ASSERT_OK(ferry_tensor_copy_to_host(a.value, before, sizeof before));
    ASSERT_OK(ferry_module_to(net, ferry_cuda(0)));
    ASSERT_OK(ferry_module_param(net, 0, &b));
    ASSERT(ferry_tensor_device(b.value).type == FERRY_DEVICE_CUDA);
    ASSERT(ferry_tensor_device(b.grad).type == FERRY_DEVICE_CUDA);
    ASSERT_OK(ferry_module_to(net, CPU));
    ASSERT_OK(ferry_module_param(net, 0, &b));
    ASSERT_MEM_EQ(before, ferry_tensor_data(b.value), sizeof before);
    ferry_module_destroy(net);
}

TEST(to_dtype_and_eval_mode)
{
    ferry_module *net = mlp(8, 16, 4);
    ASSERT_OK(ferry_module_to_dtype(net, FERRY_DTYPE_BF16));
    ferry_param p;
    ASSERT_OK(ferry_module_param(net, 1, &p));
    ASSERT_EQ_INT(ferry_tensor_dtype(p.value), FERRY_DTYPE_BF16);
    ASSERT_OK(ferry_module_to_dtype(net, FERRY_DTYPE_F32));
    ferry_module_train(net, false);
    ASSERT(!ferry_module_is_training(net));
    int64_t s[2] = {3, 8};
    ferry_tensor *x = NULL, *y = NULL, *dx = NULL;
    ASSERT_OK(ferry_tensor_randn(s, 2, FERRY_DTYPE_F32, CPU, 1, &x));
    ASSERT_OK(ferry_module_forward(net, x, NULL, &y));
    ASSERT_STATUS(ferry_module_backward(net, y, NULL, &dx), FERRY_ERR_BAD_STATE); /* nothing saved in eval */
    ferry_tensor_release(x); ferry_tensor_release(y);
    ferry_module_destroy(net);
}

TEST(failed_step_leaves_model_usable)
{
    ferry_module *net = mlp(16, 32, 4);
    ferry_optim *opt = NULL;
    ASSERT_OK(ferry_sgd_create(net, 0.1, 0.9, 0.0, &opt));
    int64_t xs[2] = {8, 16}, n = 8;
    int64_t lab[8] = {0, 1, 2, 3, 0, 1, 2, 3};
    ferry_tensor *x = NULL, *y = NULL;
    ASSERT_OK(ferry_tensor_randn(xs, 2, FERRY_DTYPE_F32, CPU, 2, &x));
    ASSERT_OK(ferry_tensor_from_host(lab, &n, 1, FERRY_DTYPE_I64, CPU, &y));
    ferry_param p;
    ASSERT_OK(ferry_module_param(net, 0, &p));
    float before[16 * 32], after[16 * 32];
    memcpy(before, ferry_tensor_data(p.value), sizeof before);
    /* Fail each allocation in turn: every failure is clean and changes nothing. */
    int failures = 0;
    for (int k = 1; k < 60; k++) {
        ferry_debug_fail_alloc_after(k);
        ferry_status st = ferry_train_step(net, opt, NULL, x, y, NULL, NULL);
        ferry_debug_fail_alloc_after(0);
        if (st == FERRY_OK)
            break;
        failures++;
        ASSERT_MSG(st == FERRY_ERR_NO_MEMORY || st == FERRY_ERR_DEVICE_OOM, "k=%d: %s (%s)", k, ferry_status_str(st),
                   ferry_last_error());
        ASSERT_MEM_EQ(before, ferry_tensor_data(p.value), sizeof before);
    }
    ASSERT(failures > 0);
    ASSERT_OK(ferry_train_step(net, opt, NULL, x, y, NULL, NULL));
    memcpy(after, ferry_tensor_data(p.value), sizeof after);
    ASSERT(memcmp(before, after, sizeof before) != 0);
    /* A bad label is an error, not a crash. */
    int64_t badlab[8] = {0, 1, 2, 3, 0, 1, 2, 9};
    ferry_tensor *yb = NULL;
    ASSERT_OK(ferry_tensor_from_host(badlab, &n, 1, FERRY_DTYPE_I64, CPU, &yb));
    ASSERT_STATUS(ferry_train_step(net, opt, NULL, x, yb, NULL, NULL), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "1 of 8 labels are outside [0, 4)");
    ASSERT_OK(ferry_train_step(net, opt, NULL, x, y, NULL, NULL));
    ferry_tensor_release(x); ferry_tensor_release(y); ferry_tensor_release(yb);
    ferry_optim_destroy(opt);
    ferry_module_destroy(net);
}

TEST(cuda_oom_step_returns_device_oom)
{
    ft_require_cuda();
    ferry_module *net = mlp(1024, 1024, 10);
    ASSERT_OK(ferry_module_to(net, ferry_cuda(0)));
    ferry_optim *opt = NULL;
    ASSERT_OK(ferry_sgd_create(net, 0.01, 0.9, 0.0, &opt));
    /* A batch that fills about 55 % of the free memory: its hidden activations
     * (as large again) cannot fit. */
    ferry_device_props props;
    ASSERT_OK(ferry_device_properties(ferry_cuda(0), &props));
    int64_t rows = (int64_t)((double)props.free_memory * 0.55 / (1024.0 * 4.0));
    int64_t xs[2] = {rows, 1024}, n = rows;
    ferry_tensor *x = NULL, *y = NULL;
    ASSERT_OK(ferry_tensor_zeros(xs, 2, FERRY_DTYPE_F32, ferry_cuda(0), &x));
    ASSERT_OK(ferry_tensor_zeros(&n, 1, FERRY_DTYPE_I64, ferry_cuda(0), &y));
    ferry_param p;
    ASSERT_OK(ferry_module_param(net, 0, &p));
    size_t pbytes = ferry_tensor_nbytes(p.value);
    float *before = malloc(pbytes), *after = malloc(pbytes);
    ASSERT(before && after);
    ASSERT_OK(ferry_tensor_copy_to_host(p.value, before, pbytes));
    ASSERT_STATUS(ferry_train_step(net, opt, NULL, x, y, NULL, NULL), FERRY_ERR_DEVICE_OOM);
    ASSERT_OK(ferry_tensor_copy_to_host(p.value, after, pbytes));
    ASSERT_MEM_EQ(before, after, pbytes);
    free(before);
    free(after);
    ferry_tensor_release(x);
    ferry_tensor_release(y);
    /* Still usable with a small batch. */
    int64_t small[2] = {4, 1024}, sn = 4;
    ASSERT_OK(ferry_tensor_zeros(small, 2, FERRY_DTYPE_F32, ferry_cuda(0), &x));
    ASSERT_OK(ferry_tensor_zeros(&sn, 1, FERRY_DTYPE_I64, ferry_cuda(0), &y));
    ASSERT_OK(ferry_train_step(net, opt, NULL, x, y, NULL, NULL));
    ferry_tensor_release(x);
    ferry_tensor_release(y);
    ferry_optim_destroy(opt);
    ferry_module_destroy(net);
}

/* ---- layers on CUDA against the CPU ---- */
static ferry_module *cnn(void)
{
    ferry_module *seq = NULL, *l = NULL;
    ASSERT_OK(ferry_sequential_create(&seq));
    ASSERT_OK(ferry_conv2d_create(3, 8, 3, 1, 1, true, &l)); ASSERT_OK(ferry_sequential_add(seq, l));
    ASSERT_OK(ferry_batchnorm2d_create(8, 1e-5, 0.1, &l)); ASSERT_OK(ferry_sequential_add(seq, l));
    ASSERT_OK(ferry_relu_create(&l)); ASSERT_OK(ferry_sequential_add(seq, l));
    ASSERT_OK(ferry_maxpool2d_create(2, 0, 0, &l)); ASSERT_OK(ferry_sequential_add(seq, l));
    ASSERT_OK(ferry_conv2d_create(8, 4, 3, 2, 1, false, &l)); ASSERT_OK(ferry_sequential_add(seq, l));
    ASSERT_OK(ferry_avgpool2d_create(2, 1, 0, &l)); ASSERT_OK(ferry_sequential_add(seq, l));
    ASSERT_OK(ferry_flatten_create(&l)); ASSERT_OK(ferry_sequential_add(seq, l));
    ASSERT_OK(ferry_linear_create(4 * 2 * 2, 10, true, &l)); /* 12 -> 12 -> 6 -> 3 -> 2 */ ASSERT_OK(ferry_sequential_add(seq, l));
    ASSERT_OK(ferry_module_init(seq, 3));
    return seq;
}

/* sqrt(sum (a - b)^2 / max(sum b^2, floor^2)): b's relative error, not its
 * square, measured against at least `floor` (0: none). */
static double rel_err_floor(ferry_tensor *a, ferry_tensor *b, double floor)
{
    ferry_tensor *ha = NULL, *hb = NULL, *fa = NULL, *fb = NULL;
    ASSERT_OK(ferry_tensor_cpu(a, &ha));
    ASSERT_OK(ferry_tensor_cpu(b, &hb));
    ASSERT_OK(ferry_tensor_to_dtype(ha, FERRY_DTYPE_F32, &fa));
    ASSERT_OK(ferry_tensor_to_dtype(hb, FERRY_DTYPE_F32, &fb));
    ASSERT_EQ_INT(ferry_tensor_numel(fa), ferry_tensor_numel(fb));
    const float *x = ferry_tensor_data(fa), *y = ferry_tensor_data(fb);
    double num = 0, den = 0;
    for (int64_t i = 0; i < ferry_tensor_numel(fa); i++) {
        num += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
        den += (double)y[i] * y[i];
    }
    ferry_tensor_release(ha); ferry_tensor_release(hb); ferry_tensor_release(fa); ferry_tensor_release(fb);
    den = den > floor * floor ? den : floor * floor;
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static double rel_err(ferry_tensor *a, ferry_tensor *b) { return rel_err_floor(a, b, 0); }

/* sqrt(sum t^2) */
static double norm2(ferry_tensor *t)
{
    ferry_tensor *z = NULL;
    ASSERT_OK(ferry_tensor_zeros(ferry_tensor_shape(t), ferry_tensor_ndim(t), ferry_tensor_dtype(t),
                                 ferry_tensor_device(t), &z));
    double n = rel_err(t, z); /* an all-zero reference gives the plain norm */
    ferry_tensor_release(z);
    return n;
}

/* The simulated GPU runs the CPU kernels (error 0); a real one sums in other
 * orders (cuBLAS, atomics), which moves f32 results by about 1e-7, so 1e-5
 * leaves room for that and for nothing like a different formula. */
#define CUDA_CPU_TOL 1e-5

TEST(cuda_layers_match_cpu)
{
    ft_require_cuda();
    ferry_module *c = cnn(), *g = cnn();
    ASSERT_OK(ferry_module_to(g, ferry_cuda(0)));
    int64_t xs[4] = {4, 3, 12, 12}, n = 4;
    int64_t lab[4] = {1, 7, 3, 9};
    ferry_tensor *x = NULL, *gx = NULL, *y = NULL, *gy = NULL;
    ASSERT_OK(ferry_tensor_randn(xs, 4, FERRY_DTYPE_F32, CPU, 8, &x));
    ASSERT_OK(ferry_tensor_to(x, ferry_cuda(0), false, &gx));
    ASSERT_OK(ferry_tensor_from_host(lab, &n, 1, FERRY_DTYPE_I64, CPU, &y));
    ASSERT_OK(ferry_tensor_to(y, ferry_cuda(0), false, &gy));
    ferry_tensor *lc = NULL, *lg = NULL, *dc = NULL, *dg = NULL, *dxc = NULL, *dxg = NULL;
    ASSERT_OK(ferry_module_forward(c, x, NULL, &lc));
    ASSERT_OK(ferry_module_forward(g, gx, NULL, &lg));
    ASSERT_MSG(rel_err(lg, lc) < CUDA_CPU_TOL, "logits: %g", rel_err(lg, lc));
    ASSERT_OK(ferry_cross_entropy(lc, y, 1.0f, NULL, NULL, &dc));
    ASSERT_OK(ferry_cross_entropy(lg, gy, 1.0f, NULL, NULL, &dg));
    ASSERT_MSG(rel_err(dg, dc) < CUDA_CPU_TOL, "dlogits: %g", rel_err(dg, dc));
    ASSERT_OK(ferry_module_backward(c, dc, NULL, &dxc));
    ASSERT_OK(ferry_module_backward(g, dg, NULL, &dxg));
    ASSERT_MSG(rel_err(dxg, dxc) < CUDA_CPU_TOL, "dx: %g", rel_err(dxg, dxc));
    /* A gradient is compared at no less than 1 % of the largest one's size: the
     * first convolution's bias feeds BatchNorm, which removes the mean, so its
     * gradient is 0 in exact arithmetic and only rounding is left of it (about
     * 1e-9 here), which a real GPU's summation order changes entirely. */
    double gmax = 0;
    for (size_t i = 0; i < ferry_module_param_count(c); i++) {
        ferry_param p;
        ASSERT_OK(ferry_module_param(c, i, &p));
        if (p.grad && norm2(p.grad) > gmax)
            gmax = norm2(p.grad);
    }
    ASSERT(gmax > 0);
    for (size_t i = 0; i < ferry_module_param_count(c); i++) {
        ferry_param p, q;
        ASSERT_OK(ferry_module_param(c, i, &p));
        ASSERT_OK(ferry_module_param(g, i, &q));
        ASSERT_MSG(rel_err(q.value, p.value) < CUDA_CPU_TOL, "%s", p.name); /* running stats too */
        if (p.grad)
            ASSERT_MSG(rel_err_floor(q.grad, p.grad, 0.01 * gmax) < CUDA_CPU_TOL, "%s.grad: %g", p.name,
                       rel_err_floor(q.grad, p.grad, 0.01 * gmax));
    }
    /* Dropout draws the same mask on both and scales by the same formula: exact. */
    ferry_module *dc_ = NULL, *dg_ = NULL;
    ASSERT_OK(ferry_dropout_create(0.5, 9, &dc_));
    ASSERT_OK(ferry_dropout_create(0.5, 9, &dg_));
    ASSERT_OK(ferry_module_to(dg_, ferry_cuda(0)));
    ferry_tensor *oc = NULL, *og = NULL;
    ASSERT_OK(ferry_module_forward(dc_, x, NULL, &oc));
    ASSERT_OK(ferry_module_forward(dg_, gx, NULL, &og));
    ASSERT_MSG(rel_err(og, oc) == 0, "dropout: %g", rel_err(og, oc));
    ferry_tensor *all[] = {x, gx, y, gy, lc, lg, dc, dg, dxc, dxg, oc, og};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        ferry_tensor_release(all[i]);
    ferry_module_destroy(dc_); ferry_module_destroy(dg_);
    ferry_module_destroy(c); ferry_module_destroy(g);
}

/* The bounds are about 2.5 times the errors seen: f16 5.5e-4 forward and 6.5e-4
 * backward, bf16 2.9e-3 and 2.3e-2 (its 8 bits, rounded again after each of the
 * CNN's layers, forward and back). */
TEST(half_layers_on_cpu_match_f32)
{
    static const ferry_dtype dts[2] = {FERRY_DTYPE_F16, FERRY_DTYPE_BF16};
    static const double fwd_tol[2] = {1.4e-3, 7.5e-3}, bwd_tol[2] = {1.6e-3, 5.5e-2};
    for (int d = 0; d < 2; d++) {
        ferry_module *a = cnn(), *h = cnn();
        ASSERT_OK(ferry_module_to_dtype(h, dts[d]));
        int64_t xs[4] = {3, 3, 12, 12};
        ferry_tensor *x = NULL, *ya = NULL, *yh = NULL, *dy = NULL, *dxa = NULL, *dxh = NULL;
        ASSERT_OK(ferry_tensor_randn(xs, 4, FERRY_DTYPE_F32, CPU, 4, &x));
        ASSERT_OK(ferry_module_forward(a, x, NULL, &ya));
        ASSERT_OK(ferry_module_forward(h, x, NULL, &yh)); /* x converted to the module's dtype */
        ASSERT_EQ_INT(ferry_tensor_dtype(yh), dts[d]);
        ASSERT_MSG(rel_err(yh, ya) < fwd_tol[d], "%s forward: %g", ferry_dtype_name(dts[d]), rel_err(yh, ya));
        ASSERT_OK(ferry_tensor_randn(ferry_tensor_shape(ya), 2, FERRY_DTYPE_F32, CPU, 5, &dy));
        ASSERT_OK(ferry_module_backward(a, dy, NULL, &dxa));
        ASSERT_OK(ferry_module_backward(h, dy, NULL, &dxh));
        ASSERT_MSG(rel_err(dxh, dxa) < bwd_tol[d], "%s backward: %g", ferry_dtype_name(dts[d]), rel_err(dxh, dxa));
        ferry_tensor *all[] = {x, ya, yh, dy, dxa, dxh};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            ferry_tensor_release(all[i]);
        ferry_module_destroy(a);
        ferry_module_destroy(h);
    }
}

/* A label outside [0, classes) gets the same answer on every device present (cpu,
 * cuda:0..N-1, real or simulated): INVALID_ARG with the CPU's message, with and
 * without metrics, on a stream and on the default one, i64 and i32 labels. A good
 * batch right after is fine; the metrics remember the bad labels until a reset. */
TEST(cross_entropy_bad_label_on_every_device)
{
    char want[256] = "";
    int count = ferry_cuda_device_count();
    for (int i = -1; i < count; i++) {
        ferry_device dev = i < 0 ? CPU : ferry_cuda(i);
        char name[FERRY_DEVICE_NAME_MAX];
        ferry_device_format(dev, name, sizeof name);
        int64_t xs[2] = {4, 3}, n = 4;
        const int64_t bad64[4] = {0, 3, 1, -1}, good64[4] = {0, 2, 1, 1};
        const int32_t bad32[4] = {2, -7, 1, 3};
        ferry_tensor *x = NULL, *y[3] = {NULL, NULL, NULL};
        ASSERT_OK(ferry_tensor_randn(xs, 2, FERRY_DTYPE_F32, dev, 3, &x));
        ASSERT_OK(ferry_tensor_from_host(bad64, &n, 1, FERRY_DTYPE_I64, dev, &y[0]));
        ASSERT_OK(ferry_tensor_from_host(bad32, &n, 1, FERRY_DTYPE_I32, dev, &y[1]));
        ASSERT_OK(ferry_tensor_from_host(good64, &n, 1, FERRY_DTYPE_I64, dev, &y[2]));
        ferry_stream *s = NULL;
        ferry_metrics *m = NULL;
        ASSERT_OK(ferry_stream_create(dev, &s));
        ASSERT_OK(ferry_metrics_create(dev, &m));
        for (int k = 0; k < 8; k++) {
            ferry_stream *sk = k & 1 ? s : NULL;
            ferry_metrics *mk = k & 2 ? m : NULL;
            ferry_tensor *d = NULL;
            ferry_status st = ferry_cross_entropy(x, y[k >> 2], 1.0f, mk, sk, &d);
            ASSERT_MSG(st == FERRY_ERR_INVALID_ARG, "%s, case %d: got %s (%s)", name, k, ferry_status_str(st),
                       ferry_last_error());
            ASSERT(d == NULL);
            if (!want[0])
                snprintf(want, sizeof want, "%s", ferry_last_error());
            ASSERT_STR_EQ(ferry_last_error(), want);
            ASSERT_OK(ferry_cross_entropy(x, y[2], 1.0f, mk, sk, &d));
            ASSERT(d != NULL);
            ferry_tensor_release(d);
        }
        ASSERT_STR_EQ(want, "ferry_cross_entropy: 2 of 4 labels are outside [0, 3)");
        ASSERT_STATUS(ferry_metrics_get(m, NULL, NULL, NULL), FERRY_ERR_INVALID_ARG);
        ASSERT_STR_CONTAINS(ferry_last_error(), "8 labels were outside [0, classes)");
        ASSERT_OK(ferry_metrics_reset(m, s));
        ASSERT_OK(ferry_cross_entropy(x, y[2], 1.0f, m, s, NULL));
        int64_t seen = 0;
        ASSERT_OK(ferry_metrics_get(m, NULL, NULL, &seen));
        ASSERT_EQ_INT(seen, 4);
        ferry_metrics_destroy(m);
        ferry_stream_destroy(s);
        ferry_tensor_release(x);
        for (int k = 0; k < 3; k++)
            ferry_tensor_release(y[k]);
    }
}

/* ferry against PyTorch: layers (Linear, Conv2d, MaxPool2d, AvgPool2d, ReLU,
 * BatchNorm2d over three training steps and in eval, Dropout), the losses, SGD in
 * each configuration, Adam and AdamW over five steps, and one training step of
 * samples/train_gray's MLP and CNN. The expected values were computed by torch
 * 1.13 and committed as safetensors in tests/ref/ (tests/ref/make_ref.py says how
 * and in which layouts), so a convention that differs from PyTorch's (a flipped
 * kernel, padding that takes part in a maximum, another average-pooling divisor,
 * the other running-statistics momentum) fails here even when ferry's backward
 * and CUDA kernels agree with its own forward.
 *
 * Every case runs on the CPU and on cuda:0 when a device is present (real or
 * FERRY_SIM_GPUS), layers and losses also in f16 and bf16. The measure is the
 * normalised error sqrt(sum (got - want)^2 / sum want^2); each case states its
 * bound per dtype, a few times what holds on the CPU. Set FERRY_REF_VERBOSE=1 to
 * print every error next to its bound. */
#include <stdlib.h>

#include "harness.h"
#include "ferry/nn.h"

#include "../samples/common.h" /* model_mlp, model_cnn: the sample's own models */

#define REF_DIR FERRY_SOURCE_DIR "/tests/ref/"

/* Largest normalised error allowed per dtype, per case, from the largest error
 * the case's tensors show on the CPU (the simulated GPU runs the same kernels
 * and shows the same). f32: about 3 times that, with a floor of 1e-7 (another
 * summation order, as cuBLAS's, moves last bits), and 0 where the result is a
 * selection any correct kernel gets exactly (max pooling, ReLU, Dropout in
 * eval). f16 and bf16: about 2 times, because their error is mostly the
 * rounding of inputs, parameters and outputs to 11 and 8 significant bits,
 * the same on every backend; rounding toward zero instead of to nearest even
 * makes it 2 to 3.5 times larger, and fails (checked by mutating
 * ferry_f32_to_f16_ and ferry_f32_to_bf16_). */
typedef struct bounds {
    double f32, f16, bf16;
} bounds;

/* What is being compared, for messages. */
typedef struct where {
    const char *case_;
    ferry_device dev;
    ferry_dtype dt;
} where;

static const ferry_dtype all_dtypes[3] = {FERRY_DTYPE_F32, FERRY_DTYPE_F16, FERRY_DTYPE_BF16};

/* cpu, then cuda:0 when there is one. */
static int device_count(void) { return ferry_cuda_device_count() > 0 ? 2 : 1; }
static ferry_device device_at(int i) { return i == 0 ? ferry_cpu() : ferry_cuda(0); }

static double bound_for(bounds b, ferry_dtype dt)
{
    return dt == FERRY_DTYPE_F16 ? b.f16 : dt == FERRY_DTYPE_BF16 ? b.bf16 : b.f32;
}

/* ---- fixtures ---- */
static ferry_safetensors *ref_open(const char *group)
{
    char path[1024];
    snprintf(path, sizeof path, "%s%s.safetensors", REF_DIR, group);
    ferry_safetensors *f = NULL;
    ferry_status st = ferry_safetensors_open(path, &f);
    ASSERT_MSG(st == FERRY_OK, "fixture %s: %s (%s); it is committed, regenerate it with "
               "/usr/bin/python3 tests/ref/make_ref.py", path, ferry_status_str(st), ferry_last_error());
    return f;
}

/* The script writes each case's configuration; the test's must be the same. */
static void ref_check_config(const ferry_safetensors *f, const char *case_, const char *want)
{
    const char *got = ferry_safetensors_metadata(f, case_);
    ASSERT_MSG(got && !strcmp(got, want), "%s: fixture configuration \"%s\", the test builds \"%s\"", case_,
               got ? got : "(missing)", want);
}

/* "<case>.<what>" on dev, converted to dt when it is a float tensor. */
static ferry_tensor *ref_get(const ferry_safetensors *f, const char *case_, const char *what, ferry_device dev,
                             ferry_dtype dt)
{
    char name[256];
    snprintf(name, sizeof name, "%s.%s", case_, what);
    ferry_tensor *t = NULL, *c = NULL;
    ferry_status st = ferry_safetensors_get(f, name, dev, &t);
    ASSERT_MSG(st == FERRY_OK, "%s: reading fixture tensor %s: %s (%s)", case_, name, ferry_status_str(st),
               ferry_last_error());
    if (ferry_tensor_dtype(t) != FERRY_DTYPE_F32 || dt == FERRY_DTYPE_F32)
        return t;
    ASSERT_OK(ferry_tensor_to_dtype(t, dt, &c));
    ferry_tensor_release(t);
    return c;
}

static const char *shape_str(const ferry_tensor *t, char *buf, size_t size)
{
    size_t used = (size_t)snprintf(buf, size, "[");
    for (size_t i = 0; i < ferry_tensor_ndim(t) && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%lld", i ? ", " : "", (long long)ferry_tensor_dim(t, i));
    if (used < size)
        snprintf(buf + used, size - used, "]");
    return buf;
}

static bool same_shape(const ferry_tensor *a, const ferry_tensor *b)
{
    size_t n = ferry_tensor_ndim(a);
    return n == ferry_tensor_ndim(b) && !memcmp(ferry_tensor_shape(a), ferry_tensor_shape(b), n * sizeof(int64_t));
}

/* A host f32 copy of t's values (malloc). */
static float *host_f32(ferry_tensor *t)
{
    ferry_tensor *h = NULL, *f = NULL;
    ASSERT_OK(ferry_tensor_cpu(t, &h));
    ASSERT_OK(ferry_tensor_to_dtype(h, FERRY_DTYPE_F32, &f));
    size_t bytes = (size_t)ferry_tensor_numel(f) * sizeof(float);
    float *v = malloc(bytes ? bytes : 1);
    ASSERT(v);
    ASSERT_OK(ferry_tensor_copy_to_host(f, v, bytes));
    ferry_tensor_release(h);
    ferry_tensor_release(f);
    return v;
}

/* sqrt(sum (a - s b)^2 / sum (s b)^2): the error relative to the reference's size,
 * so one bound fits tensors of any scale. An all-zero reference gives the plain
 * root-sum-square. */
static double norm_err(const float *a, const float *b, int64_t n, double s)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)a[i] - s * b[i];
        num += d * d;
        den += s * b[i] * s * b[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static void check_err(const where *w, const char *what, double err, double bound)
{
    char dn[FERRY_DEVICE_NAME_MAX];
    ferry_device_format(w->dev, dn, sizeof dn);
    if (getenv("FERRY_REF_VERBOSE"))
        printf("  %-18s %-22s %-7s %-5s err %.3g (bound %.3g)\n", w->case_, what, dn, ferry_dtype_name(w->dt), err,
               bound);
    ASSERT_MSG(err <= bound, "%s: %s on %s in %s: normalised error %.3g > bound %.3g", w->case_, what, dn,
               ferry_dtype_name(w->dt), err, bound);
}

/* got against fixture tensor "<case>.<what>" times scale. */
static void expect_scaled(const where *w, const ferry_safetensors *f, const char *what, ferry_tensor *got,
                          double scale, bounds b)
{
    ferry_tensor *want = ref_get(f, w->case_, what, ferry_cpu(), FERRY_DTYPE_F32);
    char gs[128], ws[128];
    ASSERT_MSG(same_shape(got, want), "%s: %s has shape %s, PyTorch's %s", w->case_, what,
               shape_str(got, gs, sizeof gs), shape_str(want, ws, sizeof ws));
    float *a = host_f32(got), *e = host_f32(want);
    double err = norm_err(a, e, ferry_tensor_numel(want), scale);
    free(a);
    free(e);
    ferry_tensor_release(want);
    check_err(w, what, err, bound_for(b, w->dt));
}

static void expect(const where *w, const ferry_safetensors *f, const char *what, ferry_tensor *got, bounds b)
{
    expect_scaled(w, f, what, got, 1.0, b);
}

/* Loads every parameter and buffer of m from "<case>.<name>" (same shape). */
static void set_params(const ferry_safetensors *f, const char *case_, ferry_module *m, ferry_device dev)
{
    for (size_t i = 0; i < ferry_module_param_count(m); i++) {
        ferry_param p;
        ASSERT_OK(ferry_module_param(m, i, &p));
        ferry_tensor *v = ref_get(f, case_, p.name, dev, FERRY_DTYPE_F32);
        ASSERT_MSG(same_shape(v, p.value), "%s: parameter %s has another shape in the fixture", case_, p.name);
        ASSERT_OK(ferry_tensor_copy(p.value, v, NULL)); /* converts to the module's dtype */
        ferry_tensor_release(v);
    }
}

/* Every trainable parameter's gradient against "<case>.<prefix>grad.<name>". */
static void expect_grads(const where *w, const ferry_safetensors *f, const char *prefix, ferry_module *m,
                         bounds b)
{
    for (size_t i = 0; i < ferry_module_param_count(m); i++) {
        ferry_param p;
        ASSERT_OK(ferry_module_param(m, i, &p));
        if (p.buffer)
            continue;
        char what[160];
        snprintf(what, sizeof what, "%sgrad.%s", prefix, p.name);
        expect(w, f, what, p.grad, b);
    }
}

static ferry_module *on(ferry_module *m, ferry_device dev, ferry_dtype dt)
{
    ASSERT_OK(ferry_module_to(m, dev));
    if (dt != FERRY_DTYPE_F32)
        ASSERT_OK(ferry_module_to_dtype(m, dt));
    return m;
}

/* ---- single layers: forward y, backward dx and parameter gradients ---- */
typedef struct layer_case {
    const char *name, *config;
    ferry_status (*make)(ferry_module **out);
    bounds b;
} layer_case;

static ferry_status make_linear(ferry_module **m) { return ferry_linear_create(5, 3, true, m); }
static ferry_status make_conv_s2p1(ferry_module **m) { return ferry_conv2d_create(3, 4, 3, 2, 1, true, m); }
static ferry_status make_conv_s1p2(ferry_module **m) { return ferry_conv2d_create(2, 3, 3, 1, 2, false, m); }
static ferry_status make_conv_k2(ferry_module **m) { return ferry_conv2d_create(2, 5, 2, 1, 0, true, m); }
static ferry_status make_max_k3(ferry_module **m) { return ferry_maxpool2d_create(3, 2, 1, m); }
static ferry_status make_max_k2(ferry_module **m) { return ferry_maxpool2d_create(2, 2, 1, m); }
static ferry_status make_avg_k3(ferry_module **m) { return ferry_avgpool2d_create(3, 2, 1, m); }
static ferry_status make_avg_k2(ferry_module **m) { return ferry_avgpool2d_create(2, 1, 1, m); }
static ferry_status make_relu(ferry_module **m) { return ferry_relu_create(m); }

static void run_layer(const ferry_safetensors *f, const layer_case *lc, ferry_device dev, ferry_dtype dt)
{
    where w = {lc->name, dev, dt};
    ferry_module *m = NULL;
    ASSERT_OK(lc->make(&m));
    on(m, dev, dt);
    set_params(f, lc->name, m, dev);
    ferry_tensor *x = ref_get(f, lc->name, "x", dev, dt), *dy = ref_get(f, lc->name, "dy", dev, dt);
    ferry_tensor *y = NULL, *dx = NULL;
    ASSERT_OK(ferry_module_forward(m, x, NULL, &y));
    ASSERT_EQ_INT(ferry_tensor_dtype(y), dt);
    expect(&w, f, "y", y, lc->b);
    ASSERT_OK(ferry_module_zero_grad(m, NULL));
    ASSERT_OK(ferry_module_backward(m, dy, NULL, &dx));
    expect(&w, f, "dx", dx, lc->b);
    expect_grads(&w, f, "", m, lc->b);
    ferry_tensor *all[] = {x, dy, y, dx};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        ferry_tensor_release(all[i]);
    ferry_module_destroy(m);
}

static void run_layers(const layer_case *cases, size_t n)
{
    ferry_safetensors *f = ref_open("layers");
    for (size_t c = 0; c < n; c++) {
        ref_check_config(f, cases[c].name, cases[c].config);
        for (int d = 0; d < device_count(); d++)
            for (int t = 0; t < 3; t++)
                run_layer(f, &cases[c], device_at(d), all_dtypes[t]);
    }
    ferry_safetensors_destroy(f);
}

TEST(linear_matches_pytorch)
{
    static const layer_case cases[] = {
        {"linear", "Linear(5, 3, bias)", make_linear, {1e-7, 1.2e-3, 7.5e-3}},
    };
    run_layers(cases, sizeof cases / sizeof cases[0]);
}

TEST(conv2d_matches_pytorch)
{
    static const layer_case cases[] = {
        {"conv_s2p1", "Conv2d(3, 4, k=3, s=2, p=1, bias)", make_conv_s2p1, {4e-7, 1e-3, 7e-3}},
        {"conv_s1p2_nobias", "Conv2d(2, 3, k=3, s=1, p=2, no bias)", make_conv_s1p2, {4e-7, 1e-3, 7e-3}},
        {"conv_k2s1p0", "Conv2d(2, 5, k=2, s=1, p=0, bias)", make_conv_k2, {4e-7, 1e-3, 7e-3}},
    };
    run_layers(cases, sizeof cases / sizeof cases[0]);
}

TEST(maxpool2d_with_padding_matches_pytorch)
{
    static const layer_case cases[] = {
        {"maxpool_k3s2p1", "MaxPool2d(k=3, s=2, p=1)", make_max_k3, {0, 5e-4, 4.5e-3}},
        {"maxpool_k2s2p1", "MaxPool2d(k=2, s=2, p=1)", make_max_k2, {0, 5e-4, 4.5e-3}},
    };
    run_layers(cases, sizeof cases / sizeof cases[0]);
}

/* ferry has only PyTorch's default divisor rule, count_include_pad=True. */
TEST(avgpool2d_with_padding_matches_pytorch)
{
    static const layer_case cases[] = {
        {"avgpool_k3s2p1", "AvgPool2d(k=3, s=2, p=1, count_include_pad=True)", make_avg_k3, {1e-7, 6.5e-4, 5e-3}},
        {"avgpool_k2s1p1", "AvgPool2d(k=2, s=1, p=1, count_include_pad=True)", make_avg_k2, {1e-7, 6.5e-4, 5e-3}},
    };
    run_layers(cases, sizeof cases / sizeof cases[0]);
}

TEST(relu_matches_pytorch)
{
    static const layer_case cases[] = {{"relu", "ReLU()", make_relu, {0, 5e-4, 2.5e-3}}};
    run_layers(cases, sizeof cases / sizeof cases[0]);
}

/* ---- BatchNorm2d: three training steps (output, gradients, running
 * statistics after each), then eval with the running statistics ---- */
static void bn_step(const ferry_safetensors *f, const where *w, ferry_module *bn, int step, bounds b)
{
    char pre[32], what[64];
    snprintf(pre, sizeof pre, "step%d.", step);
    ferry_tensor *x = NULL, *dy = NULL, *y = NULL, *dx = NULL;
    snprintf(what, sizeof what, "%sx", pre);
    x = ref_get(f, w->case_, what, w->dev, w->dt);
    snprintf(what, sizeof what, "%sdy", pre);
    dy = ref_get(f, w->case_, what, w->dev, w->dt);
    ASSERT_OK(ferry_module_forward(bn, x, NULL, &y));
    snprintf(what, sizeof what, "%sy", pre);
    expect(w, f, what, y, b);
    ASSERT_OK(ferry_module_zero_grad(bn, NULL));
    ASSERT_OK(ferry_module_backward(bn, dy, NULL, &dx));
    snprintf(what, sizeof what, "%sdx", pre);
    expect(w, f, what, dx, b);
    expect_grads(w, f, pre, bn, b);
    ferry_param p;
    for (size_t i = 2; i < 4; i++) { /* running_mean, running_var: f32 in every dtype */
        ASSERT_OK(ferry_module_param(bn, i, &p));
        snprintf(what, sizeof what, "%s%s", pre, p.name);
        expect(w, f, what, p.value, b);
    }
    ferry_tensor *all[] = {x, dy, y, dx};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        ferry_tensor_release(all[i]);
}

TEST(batchnorm2d_train_and_eval_match_pytorch)
{
    ferry_safetensors *f = ref_open("layers");
    ref_check_config(f, "batchnorm", "BatchNorm2d(3, eps=1e-05, momentum=0.1), 3 training steps then eval");
    const bounds b = {4e-7, 1e-3, 1.4e-2};
    for (int d = 0; d < device_count(); d++)
        for (int t = 0; t < 3; t++) {
            where w = {"batchnorm", device_at(d), all_dtypes[t]};
            ferry_module *bn = NULL;
            ASSERT_OK(ferry_batchnorm2d_create(3, 1e-5, 0.1, &bn));
            on(bn, w.dev, w.dt);
            set_params(f, w.case_, bn, w.dev);
            for (int step = 0; step < 3; step++)
                bn_step(f, &w, bn, step, b);
            ferry_module_train(bn, false);
            ferry_tensor *x = ref_get(f, w.case_, "eval.x", w.dev, w.dt), *y = NULL;
            ASSERT_OK(ferry_module_forward(bn, x, NULL, &y));
            expect(&w, f, "eval.y", y, b);
            ferry_tensor_release(x);
            ferry_tensor_release(y);
            ferry_module_destroy(bn);
        }
    ferry_safetensors_destroy(f);
}

/* Dropout: the identity in eval (PyTorch's fixture); in training every element
 * is 0 or x / (1 - p), PyTorch's inverted scaling. */
static void dropout_train_values(ferry_module *m, ferry_tensor *x)
{
    ferry_module_train(m, true);
    ferry_tensor *y = NULL;
    ASSERT_OK(ferry_module_forward(m, x, NULL, &y));
    float *xv = host_f32(x), *yv = host_f32(y);
    int64_t n = ferry_tensor_numel(x), zeros = 0;
    for (int64_t i = 0; i < n; i++) {
        zeros += yv[i] == 0.0f;
        ASSERT_MSG(yv[i] == 0.0f || fabs(yv[i] - xv[i] / 0.7) <= 1e-6 * fabs(xv[i] / 0.7),
                   "dropout (training): element %lld is %g, neither 0 nor x / (1 - p) = %g", (long long)i, yv[i],
                   xv[i] / 0.7);
    }
    ASSERT_MSG(zeros > 0 && zeros < n, "dropout (training): %lld of %lld elements dropped", (long long)zeros,
               (long long)n);
    free(xv);
    free(yv);
    ferry_tensor_release(y);
}

TEST(dropout_eval_is_identity_as_in_pytorch)
{
    ferry_safetensors *f = ref_open("layers");
    ref_check_config(f, "dropout", "Dropout(p=0.3), eval");
    for (int d = 0; d < device_count(); d++) {
        where w = {"dropout", device_at(d), FERRY_DTYPE_F32};
        ferry_module *m = NULL;
        ASSERT_OK(ferry_dropout_create(0.3, 7, &m));
        on(m, w.dev, w.dt);
        ferry_module_train(m, false);
        ferry_tensor *x = ref_get(f, w.case_, "x", w.dev, w.dt), *y = NULL;
        ASSERT_OK(ferry_module_forward(m, x, NULL, &y));
        expect(&w, f, "y", y, (bounds){0, 0, 0});
        dropout_train_values(m, x);
        ferry_tensor_release(x);
        ferry_tensor_release(y);
        ferry_module_destroy(m);
    }
    ferry_safetensors_destroy(f);
}

/* ---- losses: the mean loss (read through metrics) and the input gradient,
 * once with grad_scale 1 and once with 4 (ferry's gradient is PyTorch's times
 * grad_scale) ---- */
static void expect_loss(const where *w, const ferry_safetensors *f, ferry_metrics *met, bounds b)
{
    double loss = 0;
    ASSERT_OK(ferry_metrics_get(met, &loss, NULL, NULL));
    ferry_tensor *want = ref_get(f, w->case_, "loss", ferry_cpu(), FERRY_DTYPE_F32);
    float got = (float)loss, ref = *(const float *)ferry_tensor_data(want);
    check_err(w, "loss", norm_err(&got, &ref, 1, 1.0), bound_for(b, w->dt));
    ferry_tensor_release(want);
}

static void run_cross_entropy(const ferry_safetensors *f, const where *w, bounds b)
{
    ferry_tensor *x = ref_get(f, w->case_, "logits", w->dev, w->dt);
    ferry_tensor *y = ref_get(f, w->case_, "labels", w->dev, w->dt);
    ferry_metrics *met = NULL;
    ASSERT_OK(ferry_metrics_create(w->dev, &met));
    for (int k = 0; k < 2; k++) {
        float scale = k ? 4.0f : 1.0f;
        ferry_tensor *d = NULL;
        ASSERT_OK(ferry_metrics_reset(met, NULL));
        ASSERT_OK(ferry_cross_entropy(x, y, scale, met, NULL, &d));
        expect_loss(w, f, met, b);
        expect_scaled(w, f, "dlogits", d, scale, b);
        ferry_tensor_release(d);
    }
    ferry_metrics_destroy(met);
    ferry_tensor_release(x);
    ferry_tensor_release(y);
}

static void run_mse(const ferry_safetensors *f, const where *w, bounds b)
{
    ferry_tensor *p = ref_get(f, w->case_, "pred", w->dev, w->dt);
    ferry_tensor *t = ref_get(f, w->case_, "target", w->dev, w->dt);
    ferry_metrics *met = NULL;
    ASSERT_OK(ferry_metrics_create(w->dev, &met));
    for (int k = 0; k < 2; k++) {
        float scale = k ? 4.0f : 1.0f;
        ferry_tensor *d = NULL;
        ASSERT_OK(ferry_metrics_reset(met, NULL));
        ASSERT_OK(ferry_mse_loss(p, t, scale, met, NULL, &d));
        expect_loss(w, f, met, b);
        expect_scaled(w, f, "dpred", d, scale, b);
        ferry_tensor_release(d);
    }
    ferry_metrics_destroy(met);
    ferry_tensor_release(p);
    ferry_tensor_release(t);
}

TEST(losses_match_pytorch)
{
    ferry_safetensors *f = ref_open("losses");
    ref_check_config(f, "cross_entropy", "cross_entropy(logits [5, 7], labels [5]), reduction=mean");
    ref_check_config(f, "mse", "mse_loss(pred [4, 6], target [4, 6]), reduction=mean");
    for (int d = 0; d < device_count(); d++)
        for (int t = 0; t < 3; t++) {
            where ce = {"cross_entropy", device_at(d), all_dtypes[t]};
            run_cross_entropy(f, &ce, (bounds){2.5e-7, 5e-4, 4e-3});
            where mse = {"mse", device_at(d), all_dtypes[t]};
            run_mse(f, &mse, (bounds){1e-7, 6e-4, 5e-3});
        }
    ferry_safetensors_destroy(f);
}

/* ---- optimisers: a Linear(4, 3)'s parameters after each of five steps from
 * the fixture's gradients ---- */
typedef struct optim_case {
    const char *name, *config;
    int kind; /* 0 SGD, 1 Adam, 2 AdamW */
    double lr, momentum, dampening, wd, b1, b2, eps;
    bool nesterov;
} optim_case;

static ferry_optim *make_optim(const optim_case *oc, ferry_module *m)
{
    ferry_optim *o = NULL;
    if (oc->kind == 0)
        ASSERT_OK(ferry_sgd_create_ex(m, oc->lr, oc->momentum, oc->dampening, oc->wd, oc->nesterov, &o));
    else if (oc->kind == 1)
        ASSERT_OK(ferry_adam_create(m, oc->lr, oc->b1, oc->b2, oc->eps, oc->wd, &o));
    else
        ASSERT_OK(ferry_adamw_create(m, oc->lr, oc->b1, oc->b2, oc->eps, oc->wd, &o));
    return o;
}

static void run_optim(const ferry_safetensors *f, const optim_case *oc, ferry_device dev, bounds b)
{
    where w = {oc->name, dev, FERRY_DTYPE_F32};
    ferry_module *m = NULL;
    ASSERT_OK(ferry_linear_create(4, 3, true, &m));
    on(m, dev, FERRY_DTYPE_F32);
    set_params(f, oc->name, m, dev);
    ferry_optim *o = make_optim(oc, m);
    for (int step = 0; step < 5; step++) {
        char what[64];
        ferry_param p;
        for (size_t i = 0; i < 2; i++) {
            ASSERT_OK(ferry_module_param(m, i, &p));
            snprintf(what, sizeof what, "step%d.grad.%s", step, p.name);
            ferry_tensor *g = ref_get(f, oc->name, what, dev, FERRY_DTYPE_F32);
            ASSERT_OK(ferry_tensor_copy(p.grad, g, NULL));
            ferry_tensor_release(g);
        }
        ASSERT_OK(ferry_optim_step(o, NULL));
        for (size_t i = 0; i < 2; i++) {
            ASSERT_OK(ferry_module_param(m, i, &p));
            snprintf(what, sizeof what, "step%d.%s", step, p.name);
            expect(&w, f, what, p.value, b);
        }
    }
    ASSERT_EQ_INT(ferry_optim_step_count(o), 5);
    ferry_optim_destroy(o);
    ferry_module_destroy(m);
}

static void run_optims(const optim_case *cases, size_t n, bounds b)
{
    ferry_safetensors *f = ref_open("optim");
    for (size_t c = 0; c < n; c++) {
        char config[256];
        snprintf(config, sizeof config, "%s, 5 steps", cases[c].config);
        ref_check_config(f, cases[c].name, config);
        for (int d = 0; d < device_count(); d++)
            run_optim(f, &cases[c], device_at(d), b);
    }
    ferry_safetensors_destroy(f);
}

TEST(sgd_configurations_match_pytorch)
{
    static const optim_case cases[] = {
        {"sgd", "SGD(lr=0.1)", 0, 0.1, 0, 0, 0, 0, 0, 0, false},
        {"sgd_momentum", "SGD(lr=0.1, momentum=0.9)", 0, 0.1, 0.9, 0, 0, 0, 0, 0, false},
        {"sgd_nesterov", "SGD(lr=0.1, momentum=0.9, nesterov=True)", 0, 0.1, 0.9, 0, 0, 0, 0, 0, true},
        {"sgd_dampening", "SGD(lr=0.1, momentum=0.9, dampening=0.5)", 0, 0.1, 0.9, 0.5, 0, 0, 0, 0, false},
        {"sgd_weight_decay", "SGD(lr=0.1, momentum=0.9, weight_decay=0.05)", 0, 0.1, 0.9, 0, 0.05, 0, 0, 0,
         false},
    };
    run_optims(cases, sizeof cases / sizeof cases[0], (bounds){3e-7, 0, 0});
}

TEST(adam_and_adamw_match_pytorch)
{
    static const optim_case cases[] = {
        {"adam", "Adam(lr=0.01, betas=(0.9, 0.999), eps=1e-08)", 1, 0.01, 0, 0, 0, 0.9, 0.999, 1e-8, false},
        {"adam_weight_decay", "Adam(lr=0.01, betas=(0.8, 0.99), eps=1e-06, weight_decay=0.1)", 1, 0.01, 0, 0, 0.1,
         0.8, 0.99, 1e-6, false},
        {"adamw", "AdamW(lr=0.01, betas=(0.9, 0.999), eps=1e-08, weight_decay=0.1)", 2, 0.01, 0, 0, 0.1, 0.9,
         0.999, 1e-8, false},
    };
    run_optims(cases, sizeof cases / sizeof cases[0], (bounds){7e-7, 0, 0});
}

/* ---- one training step of samples/train_gray's models ---- */
#define TRAIN_LR 0.05
#define TRAIN_WD 5e-4

/* The parameters after the step, from the fixture's parameters and PyTorch's
 * gradients by SGD's first-step rule (the momentum buffer starts as the
 * gradient): p - lr (g + wd p). The sgd_* cases hold that rule to PyTorch. */
static void expect_sgd_first_step(const where *w, const ferry_safetensors *f, ferry_module *m, bounds b)
{
    for (size_t i = 0; i < ferry_module_param_count(m); i++) {
        ferry_param p;
        ASSERT_OK(ferry_module_param(m, i, &p));
        char what[160];
        snprintf(what, sizeof what, "grad.%s", p.name);
        ferry_tensor *p0 = ref_get(f, w->case_, p.name, ferry_cpu(), FERRY_DTYPE_F32);
        ferry_tensor *g = ref_get(f, w->case_, what, ferry_cpu(), FERRY_DTYPE_F32);
        float *pv = ferry_tensor_data(p0), *gv = ferry_tensor_data(g), *got = host_f32(p.value);
        int64_t n = ferry_tensor_numel(p0);
        double num = 0, den = 0;
        for (int64_t k = 0; k < n; k++) {
            double want = pv[k] - TRAIN_LR * (gv[k] + TRAIN_WD * pv[k]);
            num += (got[k] - want) * (got[k] - want);
            den += want * want;
        }
        snprintf(what, sizeof what, "%s after the step", p.name);
        check_err(w, what, sqrt(num / den), bound_for(b, w->dt));
        free(got);
        ferry_tensor_release(p0);
        ferry_tensor_release(g);
    }
}

/* By hand: zero_grad, forward, cross-entropy, backward, step, each result
 * checked; then the logits under the new parameters. */
static void train_by_hand(const ferry_safetensors *f, const where *w, ferry_module *net, bounds b)
{
    ferry_tensor *x = ref_get(f, w->case_, "x", w->dev, w->dt), *y = ref_get(f, w->case_, "labels", w->dev, w->dt);
    ferry_tensor *logits = NULL, *dl = NULL, *dx = NULL, *after = NULL;
    ferry_optim *o = NULL;
    ferry_metrics *met = NULL;
    ASSERT_OK(ferry_sgd_create(net, TRAIN_LR, 0.9, TRAIN_WD, &o));
    ASSERT_OK(ferry_metrics_create(w->dev, &met));
    ASSERT_OK(ferry_module_zero_grad(net, NULL));
    ASSERT_OK(ferry_module_forward(net, x, NULL, &logits));
    expect(w, f, "logits", logits, b);
    ASSERT_OK(ferry_cross_entropy(logits, y, 1.0f, met, NULL, &dl));
    expect_loss(w, f, met, b);
    ASSERT_OK(ferry_module_backward(net, dl, NULL, &dx));
    expect(w, f, "dx", dx, b);
    expect_grads(w, f, "", net, b);
    ASSERT_OK(ferry_optim_step(o, NULL));
    expect_sgd_first_step(w, f, net, b);
    ASSERT_OK(ferry_module_forward(net, x, NULL, &after));
    expect(w, f, "logits_after", after, b);
    ferry_tensor *all[] = {x, y, logits, dl, dx, after};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        ferry_tensor_release(all[i]);
    ferry_metrics_destroy(met);
    ferry_optim_destroy(o);
}

/* The same step through ferry_train_step. */
static void train_one_call(const ferry_safetensors *f, const where *w, ferry_module *net, bounds b)
{
    ferry_tensor *x = ref_get(f, w->case_, "x", w->dev, w->dt), *y = ref_get(f, w->case_, "labels", w->dev, w->dt);
    ferry_tensor *after = NULL;
    ferry_optim *o = NULL;
    ASSERT_OK(ferry_sgd_create(net, TRAIN_LR, 0.9, TRAIN_WD, &o));
    ASSERT_OK(ferry_train_step(net, o, NULL, x, y, NULL, NULL));
    expect_sgd_first_step(w, f, net, b);
    ASSERT_OK(ferry_module_forward(net, x, NULL, &after));
    expect(w, f, "logits_after", after, b);
    ferry_tensor_release(x);
    ferry_tensor_release(y);
    ferry_tensor_release(after);
    ferry_optim_destroy(o);
}

static void run_train(const char *case_, const char *config, bool cnn, bounds b)
{
    ferry_safetensors *f = ref_open("train");
    ref_check_config(f, case_, config);
    for (int d = 0; d < device_count(); d++)
        for (int k = 0; k < 2; k++) {
            where w = {case_, device_at(d), FERRY_DTYPE_F32};
            ferry_module *net = NULL;
            ASSERT_OK(cnn ? model_cnn(1, 4, 4, 10, &net) : model_mlp(16, 10, &net));
            on(net, w.dev, w.dt);
            set_params(f, case_, net, w.dev);
            if (k == 0)
                train_by_hand(f, &w, net, b);
            else
                train_one_call(f, &w, net, b);
            ferry_module_destroy(net);
        }
    ferry_safetensors_destroy(f);
}

TEST(train_step_mlp_matches_pytorch)
{
    run_train("mlp", "model_mlp(16, 10), x [4, 1, 4, 4], SGD(lr=0.05, momentum=0.9, weight_decay=0.0005)", false,
              (bounds){5e-7, 0, 0});
}

TEST(train_step_cnn_matches_pytorch)
{
    run_train("cnn", "model_cnn(1, 4, 4, 10), x [4, 1, 4, 4], SGD(lr=0.05, momentum=0.9, weight_decay=0.0005)", true,
              (bounds){7e-7, 0, 0});
}

/* Finite-difference gradient checks for every layer and loss: the analytic
 * gradients of L = sum(y * r) (r fixed and random) with respect to the input and
 * every parameter against central differences, in f32 with eps 1e-3 and a
 * relative tolerance. */
#include <stdlib.h>

#include "harness.h"
#include "ferry/nn.h"

#define CPU ferry_cpu()

static ferry_tensor *randn(const int64_t *shape, size_t nd, uint64_t seed)
{
    ferry_tensor *t = NULL;
    ASSERT_OK(ferry_tensor_randn(shape, nd, FERRY_DTYPE_F32, CPU, seed, &t));
    return t;
}

/* L = sum(m(x) * r), in double. */
static double objective(ferry_module *m, ferry_tensor *x, ferry_tensor *r)
{
    ferry_tensor *y = NULL;
    ASSERT_OK(ferry_module_forward(m, x, NULL, &y));
    ASSERT_EQ_INT(ferry_tensor_numel(y), ferry_tensor_numel(r));
    const float *a = ferry_tensor_data(y), *b = ferry_tensor_data(r);
    double s = 0;
    for (int64_t i = 0; i < ferry_tensor_numel(y); i++)
        s += (double)a[i] * b[i];
    ferry_tensor_release(y);
    return s;
}

static void check_entries(const char *what, float *v, const float *grad, int64_t n, ferry_module *m, ferry_tensor *x,
                          ferry_tensor *r, double tol)
{
    const float eps = 1e-3f;
    int64_t step = n > 40 ? n / 40 : 1; /* about 40 entries per tensor */
    for (int64_t i = 0; i < n; i += step) {
        float keep = v[i];
        v[i] = keep + eps;
        double lp = objective(m, x, r);
        v[i] = keep - eps;
        double lm = objective(m, x, r);
        v[i] = keep;
        double num = (lp - lm) / (2.0 * eps), ana = grad[i];
        double scale = fabs(num) > fabs(ana) ? fabs(num) : fabs(ana);
        ASSERT_MSG(fabs(num - ana) <= tol * (scale > 1 ? scale : 1), "%s: %s[%lld]: numeric %.6g vs analytic %.6g",
                   ferry_module_name(m), what, (long long)i, num, ana);
    }
}

static void gradcheck(ferry_module *m, const int64_t *xshape, size_t xnd, double tol)
{
    ferry_tensor *x = randn(xshape, xnd, 1), *y = NULL, *dx = NULL;
    ASSERT_OK(ferry_module_forward(m, x, NULL, &y));
    ferry_tensor *r = randn(ferry_tensor_shape(y), ferry_tensor_ndim(y), 2);
    ferry_tensor_release(y);
    /* Analytic. */
    ASSERT_OK(ferry_module_zero_grad(m, NULL));
    ASSERT_OK(ferry_module_forward(m, x, NULL, &y));
    ASSERT_OK(ferry_module_backward(m, r, NULL, &dx));
    ferry_tensor_release(y);
    size_t np = ferry_module_param_count(m);
    float **grads = calloc(np + 1, sizeof *grads);
    for (size_t i = 0; i < np; i++) {
        ferry_param p;
        ASSERT_OK(ferry_module_param(m, i, &p));
        if (p.buffer)
            continue;
        size_t bytes = ferry_tensor_nbytes(p.grad);
        grads[i] = malloc(bytes);
        memcpy(grads[i], ferry_tensor_data(p.grad), bytes);
    }
    /* Numeric, input first, then every parameter. */
    check_entries("input", ferry_tensor_data(x), ferry_tensor_data(dx), ferry_tensor_numel(x), m, x, r, tol);
    for (size_t i = 0; i < np; i++) {
        ferry_param p;
        ASSERT_OK(ferry_module_param(m, i, &p));
        if (!p.buffer)
            check_entries(p.name, ferry_tensor_data(p.value), grads[i], ferry_tensor_numel(p.value), m, x, r, tol);
        free(grads[i]);
    }
    free(grads);
    ferry_tensor_release(x);
    ferry_tensor_release(dx);
    ferry_tensor_release(r);
}

TEST(grad_linear)
{
    ferry_module *m = NULL;
    ASSERT_OK(ferry_linear_create(7, 5, true, &m));
    ASSERT_OK(ferry_module_init(m, 3));
    int64_t xs[2] = {4, 7};
    gradcheck(m, xs, 2, 2e-2);
    int64_t x3[3] = {2, 3, 7}; /* leading dims */
    gradcheck(m, x3, 3, 2e-2);
    ferry_module_destroy(m);
}

TEST(grad_relu)
{
    ferry_module *m = NULL;
    ASSERT_OK(ferry_relu_create(&m));
    int64_t xs[2] = {5, 6};
    gradcheck(m, xs, 2, 2e-2);
    ferry_module_destroy(m);
}

TEST(grad_conv2d)
{
    ferry_module *m = NULL;
    ASSERT_OK(ferry_conv2d_create(2, 3, 3, 2, 1, true, &m));
    ASSERT_OK(ferry_module_init(m, 5));
    int64_t xs[4] = {2, 2, 7, 6};
    gradcheck(m, xs, 4, 2e-2);
    ferry_module_destroy(m);
    ASSERT_OK(ferry_conv2d_create(3, 2, 2, 1, 0, false, &m));
    int64_t xs2[4] = {1, 3, 4, 5};
    gradcheck(m, xs2, 4, 2e-2);
    ferry_module_destroy(m);
    /* A column matrix of 16*3*3 x 13*13 f32 (97 KiB) per image: the CPU's
     * 256 KiB chunks take two images, so three run as chunks of 2 and 1. */
    ASSERT_OK(ferry_conv2d_create(16, 2, 3, 1, 1, true, &m));
    ASSERT_OK(ferry_module_init(m, 6));
    int64_t xs3[4] = {3, 16, 13, 13};
    gradcheck(m, xs3, 4, 2e-2);
    ferry_module_destroy(m);
}

TEST(grad_pools)
{
    ferry_module *m = NULL;
    ASSERT_OK(ferry_maxpool2d_create(2, 0, 0, &m));
    int64_t xs[4] = {2, 3, 6, 6};
    gradcheck(m, xs, 4, 2e-2);
    ferry_module_destroy(m);
    ASSERT_OK(ferry_maxpool2d_create(3, 2, 1, &m));
    int64_t xs2[4] = {1, 2, 7, 5};
    gradcheck(m, xs2, 4, 2e-2);
    ferry_module_destroy(m);
    ASSERT_OK(ferry_avgpool2d_create(3, 2, 1, &m));
    gradcheck(m, xs2, 4, 2e-2);
    ferry_module_destroy(m);
}

TEST(grad_batchnorm2d)
{
    ferry_module *m = NULL;
    ASSERT_OK(ferry_batchnorm2d_create(3, 1e-5, 0.1, &m));
    /* Non-trivial affine parameters. */
    for (size_t i = 0; i < 2; i++) {
        ferry_param p;
        ASSERT_OK(ferry_module_param(m, i, &p));
        float *v = ferry_tensor_data(p.value);
        for (int k = 0; k < 3; k++)
            v[k] = 0.5f + 0.3f * (float)k * (i ? -1.0f : 1.0f);
    }
    int64_t xs[4] = {4, 3, 3, 2};
    gradcheck(m, xs, 4, 3e-2);
    ferry_module_destroy(m);
}

TEST(grad_flatten_and_sequential_cnn)
{
    ferry_module *seq = NULL, *l = NULL;
    ASSERT_OK(ferry_sequential_create(&seq));
    ASSERT_OK(ferry_conv2d_create(1, 2, 3, 1, 1, true, &l)); ASSERT_OK(ferry_sequential_add(seq, l));
    ASSERT_OK(ferry_batchnorm2d_create(2, 1e-5, 0.1, &l)); ASSERT_OK(ferry_sequential_add(seq, l));
    ASSERT_OK(ferry_relu_create(&l)); ASSERT_OK(ferry_sequential_add(seq, l));
    ASSERT_OK(ferry_maxpool2d_create(2, 2, 0, &l)); ASSERT_OK(ferry_sequential_add(seq, l));
    ASSERT_OK(ferry_flatten_create(&l)); ASSERT_OK(ferry_sequential_add(seq, l));
    ASSERT_OK(ferry_linear_create(2 * 3 * 3, 4, true, &l)); ASSERT_OK(ferry_sequential_add(seq, l));
    ASSERT_OK(ferry_module_init(seq, 9));
    int64_t xs[4] = {3, 1, 6, 6};
    gradcheck(seq, xs, 4, 3e-2);
    ferry_module_destroy(seq);
}

TEST(dropout_backward_uses_the_forward_mask)
{
    ferry_module *m = NULL;
    ASSERT_OK(ferry_dropout_create(0.3, 17, &m));
    int64_t n = 1000;
    ferry_tensor *x = NULL, *y = NULL, *dy = randn(&n, 1, 4), *dx = NULL;
    ASSERT_OK(ferry_tensor_full(&n, 1, 1.0, FERRY_DTYPE_F32, CPU, &x));
    ASSERT_OK(ferry_module_forward(m, x, NULL, &y));
    ASSERT_OK(ferry_module_backward(m, dy, NULL, &dx));
    const float *vy = ferry_tensor_data(y), *vdy = ferry_tensor_data(dy), *vdx = ferry_tensor_data(dx);
    int dropped = 0;
    for (int64_t i = 0; i < n; i++) {
        ASSERT(vy[i] == 0.0f || fabsf(vy[i] - 1 / 0.7f) < 1e-6f);
        dropped += vy[i] == 0.0f;
        ASSERT_NEAR(vdx[i], vy[i] * vdy[i], 1e-6);
    }
    ASSERT(dropped > 240 && dropped < 360);
    ferry_tensor_release(y);
    /* Eval mode: identity. */
    ferry_module_train(m, false);
    ASSERT_OK(ferry_module_forward(m, x, NULL, &y));
    ASSERT_NEAR(((float *)ferry_tensor_data(y))[5], 1.0, 0);
    ferry_tensor_release(x); ferry_tensor_release(y); ferry_tensor_release(dy); ferry_tensor_release(dx);
    ferry_module_destroy(m);
}

/* Loss gradients: metrics give the mean loss, dlogits its gradient. */
static double ce_loss(ferry_tensor *logits, ferry_tensor *labels)
{
    ferry_metrics *mt = NULL;
    double l = 0;
    ASSERT_OK(ferry_metrics_create(CPU, &mt));
    ASSERT_OK(ferry_cross_entropy(logits, labels, 1.0f, mt, NULL, NULL));
    ASSERT_OK(ferry_metrics_get(mt, &l, NULL, NULL));
    ferry_metrics_destroy(mt);
    return l;
}

static double mse(ferry_tensor *p, ferry_tensor *t)
{
    ferry_metrics *mt = NULL;
    double l = 0;
    ASSERT_OK(ferry_metrics_create(CPU, &mt));
    ASSERT_OK(ferry_mse_loss(p, t, 1.0f, mt, NULL, NULL));
    ASSERT_OK(ferry_metrics_get(mt, &l, NULL, NULL));
    ferry_metrics_destroy(mt);
    return l;
}

TEST(grad_cross_entropy_and_mse)
{
    int64_t s[2] = {6, 5};
    ferry_tensor *x = randn(s, 2, 1), *labels = NULL, *d = NULL, *t = randn(s, 2, 2);
    int64_t lab[6] = {0, 4, 2, 2, 1, 3}, n = 6;
    ASSERT_OK(ferry_tensor_from_host(lab, &n, 1, FERRY_DTYPE_I64, CPU, &labels));
    ASSERT_OK(ferry_cross_entropy(x, labels, 1.0f, NULL, NULL, &d));
    float *v = ferry_tensor_data(x), *g = ferry_tensor_data(d);
    for (int i = 0; i < 30; i++) {
        float keep = v[i];
        v[i] = keep + 1e-3f;
        double lp = ce_loss(x, labels);
        v[i] = keep - 1e-3f;
        double lm = ce_loss(x, labels);
        v[i] = keep;
        ASSERT_NEAR((lp - lm) / 2e-3, g[i], 2e-3);
    }
    ferry_tensor_release(d);
    /* Reference value: PyTorch's F.cross_entropy of the same logits. */
    double ref = 0;
    for (int r = 0; r < 6; r++) {
        double z = 0;
        for (int k = 0; k < 5; k++)
            z += exp(v[r * 5 + k]);
        ref += log(z) - v[r * 5 + lab[r]];
    }
    ASSERT_NEAR(ce_loss(x, labels), ref / 6, 1e-5);
    ASSERT_OK(ferry_mse_loss(x, t, 1.0f, NULL, NULL, &d));
    g = ferry_tensor_data(d);
    for (int i = 0; i < 30; i++) {
        float keep = v[i];
        v[i] = keep + 1e-3f;
        double lp = mse(x, t);
        v[i] = keep - 1e-3f;
        double lm = mse(x, t);
        v[i] = keep;
        ASSERT_NEAR((lp - lm) / 2e-3, g[i], 2e-3);
    }
    ferry_tensor_release(d);
    ferry_tensor_release(x); ferry_tensor_release(labels); ferry_tensor_release(t);
}

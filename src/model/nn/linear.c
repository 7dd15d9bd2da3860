/* Linear: y = x W^T + b over the last dim, any leading dims. Forward saves x;
 * backward accumulates dW = dy^T x and db = sum(dy), and returns dx = dy W. */
#include <math.h>
#include <stdio.h>

#include "common/error.h"
#include "model/nn/internal.h"
#include "model/ops/common.h"

typedef struct fm_linear {
    ferry_module base;
    int64_t in, out;
    bool has_bias;
    ferry_tensor *x; /* saved input (contiguous, module dtype) */
} fm_linear;

static void linear_drop(ferry_module *m)
{
    fm_linear *l = (fm_linear *)m;
    ferry_tensor_release(l->x);
    l->x = NULL;
}

static ferry_status linear_forward(ferry_module *m, ferry_tensor *x, ferry_stream *s, ferry_tensor **y)
{
    fm_linear *l = (fm_linear *)m;
    char where[192];
    snprintf(where, sizeof where, "%s.forward", m->name);
    if (!x || x->ndim < 1 || x->shape[x->ndim - 1] != l->in) {
        char sb[128];
        return ferry_fail(FERRY_ERR_SHAPE, "%s expects input [..., %lld], got %s", m->name,
                          (long long)l->in, x ? fm_shape_str(x, sb, sizeof sb) : "NULL");
    }
    ferry_tensor *xi = NULL, *yt = NULL;
    ferry_status st = fm_input(m, x, s, where, &xi);
    if (st != FERRY_OK)
        return st;
    int64_t shape[FERRY_MAX_DIMS];
    for (size_t i = 0; i < xi->ndim; i++)
        shape[i] = xi->shape[i];
    shape[xi->ndim - 1] = l->out;
    int64_t rows = l->in ? xi->numel / l->in : 0;
    st = fm_buffer(&m->out, shape, xi->ndim, m->dtype, m->device, s, &yt);
    fk_ctx c = fm_ctx(xi, s);
    fm_param *w = &m->params[0];
    /* y [rows, out] = x [rows, in] W^T */
    fk_gemm g = {.dt = m->dtype, .tb = true, .m = rows, .n = l->out, .k = l->in, .alpha = 1.0f,
                 .a = ferry_tensor_data(xi), .lda = l->in, .b = ferry_tensor_data(w->value), .ldb = l->in,
                 .c = ferry_tensor_data(yt), .ldc = l->out, .batch = 1};
    if (st == FERRY_OK)
        st = FK(&c, gemm, &g);
    if (st == FERRY_OK && l->has_bias)
        st = FK(&c, bias_add, m->dtype, ferry_tensor_data(yt), ferry_tensor_data(m->params[1].value), rows,
                l->out, 1, m->act_relu);
    if (st != FERRY_OK) {
        ferry_tensor_release(xi);
        ferry_tensor_release(yt);
        return st;
    }
    ferry_tensor_release(l->x);
    l->x = m->training ? xi : NULL;
    if (!m->training)
        ferry_tensor_release(xi);
    *y = yt;
    return FERRY_OK;
}

static ferry_status linear_backward(ferry_module *m, ferry_tensor *dy, ferry_stream *s, ferry_tensor **dx)
{
    fm_linear *l = (fm_linear *)m;
    char where[192];
    snprintf(where, sizeof where, "%s.backward", m->name);
    if (!l->x)
        return ferry_fail(FERRY_ERR_BAD_STATE, "%s: backward needs a training-mode forward first", where);
    ferry_tensor *x = l->x;
    int64_t shape[FERRY_MAX_DIMS];
    for (size_t i = 0; i < x->ndim; i++)
        shape[i] = x->shape[i];
    shape[x->ndim - 1] = l->out;
    ferry_tensor *g = NULL, *dxt = NULL;
    ferry_status st = fm_grad_input(m, dy, shape, x->ndim, s, where, &g);
    if (st != FERRY_OK)
        return st;
    int64_t rows = l->in ? x->numel / l->in : 0;
    fk_ctx c = fm_ctx(x, s);
    fm_param *w = &m->params[0];
    /* dW [out, in] += dy^T x */
    fk_gemm gw = {.dt = m->dtype, .ta = true, .m = l->out, .n = l->in, .k = rows, .alpha = 1.0f,
                  .a = ferry_tensor_data(g), .lda = l->out, .b = ferry_tensor_data(x), .ldb = l->in, .beta = 1.0f,
                  .c = ferry_tensor_data(w->grad), .ldc = l->in, .batch = 1};
    st = FK(&c, gemm, &gw);
    if (st == FERRY_OK && l->has_bias)
        st = FK(&c, bias_grad, m->dtype, ferry_tensor_data(m->params[1].grad), ferry_tensor_data(g), rows,
                l->out, 1);
    if (st == FERRY_OK && dx) {
        st = fm_buffer(&m->dxbuf, x->shape, x->ndim, m->dtype, m->device, s, &dxt);
        /* dx [rows, in] = dy W */
        fk_gemm gx = {.dt = m->dtype, .m = rows, .n = l->in, .k = l->out, .alpha = 1.0f, .a = ferry_tensor_data(g),
                      .lda = l->out, .b = ferry_tensor_data(w->value), .ldb = l->in, .c = ferry_tensor_data(dxt),
                      .ldc = l->in, .batch = 1};
        if (st == FERRY_OK)
            st = FK(&c, gemm, &gx);
    }
    ferry_tensor_release(g);
    linear_drop(m);
    if (st != FERRY_OK) {
        ferry_tensor_release(dxt);
        return st;
    }
    if (dx)
        *dx = dxt;
    return FERRY_OK;
}

static const fm_ops linear_ops = {linear_forward, linear_backward, linear_drop, NULL};

ferry_status ferry_linear_create(int64_t in_features, int64_t out_features, bool bias, ferry_module **out)
{
    if (!out || in_features <= 0 || out_features <= 0)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "Linear(%lld, %lld): sizes must be positive",
                          (long long)in_features, (long long)out_features);
    char name[160];
    snprintf(name, sizeof name, "Linear(%lld, %lld)", (long long)in_features, (long long)out_features);
    ferry_module *m = NULL;
    ferry_status st = fm_module_new(sizeof(fm_linear), &linear_ops, name, bias ? 2 : 1, &m);
    if (st != FERRY_OK)
        return st;
    fm_linear *l = (fm_linear *)m;
    l->in = in_features;
    l->out = out_features;
    l->has_bias = bias;
    l->base.bias_relu = bias;
    double bound = 1.0 / sqrt((double)in_features);
    int64_t wshape[2] = {out_features, in_features};
    return fm_weight_bias_finish(m, wshape, 2, bias, bound, out);
}

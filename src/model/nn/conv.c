/* Conv2d as im2col + gemm, one image at a time (the column buffer is reused):
 * y[n] = W [C_out, C_in*k*k] @ col(x[n]) [C_in*k*k, OH*OW] + b. Backward
 * accumulates dW += dy[n] @ col^T and returns dx through col2im(W^T @ dy[n]). */
#include <math.h>
#include <stdio.h>

#include "common/error.h"
#include "model/nn/internal.h"
#include "model/ops/common.h"

typedef struct fm_conv2d {
    ferry_module base;
    int64_t cin, cout, k, stride, pad;
    bool has_bias;
    ferry_tensor *x;   /* saved input */
    ferry_tensor *col; /* scratch [C_in*k*k, OH*OW], kept between calls */
} fm_conv2d;

static void conv_drop(ferry_module *m)
{
    fm_conv2d *c = (fm_conv2d *)m;
    ferry_tensor_release(c->x);
    c->x = NULL;
}

static void conv_destroy(ferry_module *m) { ferry_tensor_release(((fm_conv2d *)m)->col); }

static ferry_status conv_geom(fm_conv2d *c, const ferry_tensor *x, fk_conv *g)
{
    /* Defined on every path: a caller's error path must not compute with garbage. */
    *g = (fk_conv){0};
    char sb[128];
    if (x->ndim != 4 || x->shape[1] != c->cin)
        return ferry_fail(FERRY_ERR_SHAPE, "%s expects input [N, %lld, H, W], got %s", c->base.name,
                          (long long)c->cin, fm_shape_str(x, sb, sizeof sb));
    g->n = x->shape[0];
    g->c = c->cin;
    g->h = x->shape[2];
    g->w = x->shape[3];
    g->kh = g->kw = c->k;
    g->sh = g->sw = c->stride;
    g->ph = g->pw = c->pad;
    g->oh = (g->h + 2 * c->pad - c->k) / c->stride + 1;
    g->ow = (g->w + 2 * c->pad - c->k) / c->stride + 1;
    if (g->h + 2 * c->pad < c->k || g->w + 2 * c->pad < c->k)
        return ferry_fail(FERRY_ERR_SHAPE, "%s: input %s is smaller than the kernel", c->base.name,
                          fm_shape_str(x, sb, sizeof sb));
    return FERRY_OK;
}

static ferry_status col_buffer(fm_conv2d *c, const fk_conv *g, ferry_stream *s, ferry_tensor **col)
{
    int64_t shape[2] = {g->c * g->kh * g->kw, g->oh * g->ow};
    return fm_buffer(&c->col, shape, 2, c->base.dtype, c->base.device, s, col);
}

static ferry_status conv_forward(ferry_module *m, ferry_tensor *x, ferry_stream *s, ferry_tensor **y)
{
    fm_conv2d *c = (fm_conv2d *)m;
    char where[192];
    snprintf(where, sizeof where, "%s.forward", m->name);
    if (!x) /* fm_input words the NULL-input error as every layer does */
        return fm_input(m, x, s, where, NULL);
    fk_conv g;
    ferry_status st = conv_geom(c, x, &g);
    if (st != FERRY_OK)
        return st;
    ferry_tensor *xi = NULL, *yt = NULL, *col = NULL;
    st = fm_input(m, x, s, where, &xi);
    if (st != FERRY_OK)
        return st;
    int64_t shape[4] = {g.n, c->cout, g.oh, g.ow};
    int64_t ckk = g.c * g.kh * g.kw, ohw = g.oh * g.ow;
    size_t es = ferry_dtype_size(m->dtype);
    st = fm_buffer(&m->out, shape, 4, m->dtype, m->device, s, &yt);
    if (st == FERRY_OK)
        st = col_buffer(c, &g, s, &col);
    fk_ctx k = fm_ctx(xi, s);
    for (int64_t n = 0; n < g.n && st == FERRY_OK; n++) {
        const char *xn = (const char *)ferry_tensor_data(xi) + (size_t)(n * g.c * g.h * g.w) * es;
        char *yn = (char *)ferry_tensor_data(yt) + (size_t)(n * c->cout * ohw) * es;
        st = FK(&k, im2col, m->dtype, &g, xn, ferry_tensor_data(col));
        if (st == FERRY_OK)
            st = FK(&k, gemm, m->dtype, false, false, c->cout, ohw, ckk, 1.0f, ferry_tensor_data(m->params[0].value),
                    ckk, 0, ferry_tensor_data(col), ohw, 0, 0.0f, yn, ohw, 0, 1);
    }
    if (st == FERRY_OK && c->has_bias)
        st = FK(&k, bias_add, m->dtype, ferry_tensor_data(yt), ferry_tensor_data(m->params[1].value), g.n, c->cout,
                ohw);
    ferry_tensor_release(col);
    if (st != FERRY_OK) {
        ferry_tensor_release(xi);
        ferry_tensor_release(yt);
        return st;
    }
    conv_drop(m);
    if (m->training)
        c->x = xi;
    else
        ferry_tensor_release(xi);
    *y = yt;
    return FERRY_OK;
}

static ferry_status conv_backward(ferry_module *m, ferry_tensor *dy, ferry_stream *s, ferry_tensor **dx)
{
    fm_conv2d *c = (fm_conv2d *)m;
    char where[192];
    snprintf(where, sizeof where, "%s.backward", m->name);
    if (!c->x)
        return ferry_fail(FERRY_ERR_BAD_STATE, "%s: backward needs a training-mode forward first", where);
    fk_conv g;
    ferry_status st = conv_geom(c, c->x, &g);
    if (st != FERRY_OK)
        return st;
    int64_t shape[4] = {g.n, c->cout, g.oh, g.ow};
    int64_t ckk = g.c * g.kh * g.kw, ohw = g.oh * g.ow;
    size_t es = ferry_dtype_size(m->dtype);
    ferry_tensor *gy = NULL, *col = NULL, *dxt = NULL;
    st = fm_grad_input(m, dy, shape, 4, s, where, &gy);
    if (st == FERRY_OK)
        st = col_buffer(c, &g, s, &col);
    if (st == FERRY_OK && dx)
        st = fm_buffer(&m->dxbuf, c->x->shape, 4, m->dtype, m->device, s, &dxt);
    if (st == FERRY_OK && dx)
        st = ferry_tensor_fill(dxt, 0.0, s);
    fk_ctx k = fm_ctx(c->x, s);
    if (st == FERRY_OK && c->has_bias)
        st = FK(&k, bias_grad, m->dtype, ferry_tensor_data(m->params[1].grad), ferry_tensor_data(gy), g.n, c->cout,
                ohw);
    for (int64_t n = 0; n < g.n && st == FERRY_OK; n++) {
        const char *xn = (const char *)ferry_tensor_data(c->x) + (size_t)(n * g.c * g.h * g.w) * es;
        const char *gn = (const char *)ferry_tensor_data(gy) + (size_t)(n * c->cout * ohw) * es;
        st = FK(&k, im2col, m->dtype, &g, xn, ferry_tensor_data(col));
        if (st == FERRY_OK)
            st = FK(&k, gemm, m->dtype, false, true, c->cout, ckk, ohw, 1.0f, gn, ohw, 0, ferry_tensor_data(col), ohw,
                    0, 1.0f, ferry_tensor_data(m->params[0].grad), ckk, 0, 1);
        if (st == FERRY_OK && dx) {
            char *dxn = (char *)ferry_tensor_data(dxt) + (size_t)(n * g.c * g.h * g.w) * es;
            st = FK(&k, gemm, m->dtype, true, false, ckk, ohw, c->cout, 1.0f, ferry_tensor_data(m->params[0].value),
                    ckk, 0, gn, ohw, 0, 0.0f, ferry_tensor_data(col), ohw, 0, 1);
            if (st == FERRY_OK)
                st = FK(&k, col2im, m->dtype, &g, ferry_tensor_data(col), dxn);
        }
    }
    ferry_tensor_release(gy);
    ferry_tensor_release(col);
    conv_drop(m);
    if (st != FERRY_OK) {
        ferry_tensor_release(dxt);
        return st;
    }
    if (dx)
        *dx = dxt;
    return FERRY_OK;
}

static const fm_ops conv_ops = {conv_forward, conv_backward, conv_drop, conv_destroy};

ferry_status ferry_conv2d_create(int64_t in_channels, int64_t out_channels, int64_t kernel, int64_t stride,
                                 int64_t padding, bool bias, ferry_module **out)
{
    if (!out || in_channels <= 0 || out_channels <= 0 || kernel <= 0 || stride <= 0 || padding < 0)
        return ferry_fail(FERRY_ERR_INVALID_ARG,
                          "Conv2d(%lld, %lld, kernel=%lld, stride=%lld, padding=%lld): sizes must be positive",
                          (long long)in_channels, (long long)out_channels, (long long)kernel, (long long)stride,
                          (long long)padding);
    char name[160];
    snprintf(name, sizeof name, "Conv2d(%lld, %lld, k=%lld, s=%lld, p=%lld)", (long long)in_channels,
             (long long)out_channels, (long long)kernel, (long long)stride, (long long)padding);
    ferry_module *m = NULL;
    ferry_status st = fm_module_new(sizeof(fm_conv2d), &conv_ops, name, bias ? 2 : 1, &m);
    if (st != FERRY_OK)
        return st;
    fm_conv2d *c = (fm_conv2d *)m;
    c->cin = in_channels;
    c->cout = out_channels;
    c->k = kernel;
    c->stride = stride;
    c->pad = padding;
    c->has_bias = bias;
    double bound = 1.0 / sqrt((double)(in_channels * kernel * kernel));
    int64_t wshape[4] = {out_channels, in_channels, kernel, kernel};
    return fm_weight_bias_finish(m, wshape, 4, bias, bound, out);
}

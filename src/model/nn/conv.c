/* Conv2d as im2col + gemm over the batch, a chunk of images at a time: im2col
 * lays a chunk of nb images out as one column matrix col [C_in*k*k, nb*OH*OW]
 * (image i's columns at i*OH*OW), and one strided-batched gemm gives every
 * image's y[i] = W [C_out, C_in*k*k] @ col_i + b. Backward permutes the chunk's
 * dy to dyp [C_out, nb*OH*OW], so dW += dyp @ col^T and dcol = W^T @ dyp are one
 * gemm each, and col2im writes dx (a chunk's own images, so no fill first).
 * The chunk is as many images as keep the column matrix under CONV_COL_BYTES
 * (at least one), so a large batch or image never needs the whole batch's
 * columns at once. */
#include <math.h>
#include <stdio.h>

#include "common/error.h"
#include "model/nn/internal.h"
#include "model/ops/common.h"

/* The column matrix's budget. On a GPU, 64 MiB keeps a typical CNN's whole
 * batch in one chunk (one launch per kernel per pass) while bounding the
 * scratch of large images. The CPU pays nothing per call but a lot for a
 * column matrix that leaves the cache: there a chunk is kept cache-sized. */
#define CONV_COL_BYTES ((size_t)64 << 20)
#define CONV_COL_BYTES_CPU ((size_t)256 << 10)

typedef struct fm_conv2d {
    ferry_module base;
    int64_t cin, cout, k, stride, pad;
    bool has_bias;
    ferry_tensor *x;   /* saved input */
    ferry_tensor *col; /* scratch [C_in*k*k, nb*OH*OW], kept between calls */
    ferry_tensor *dyp; /* backward's scratch [C_out, nb*OH*OW], kept between calls */
    /* Set by a training forward that did the whole batch in one chunk: col
     * (at col_data) still holds x's columns, so backward need not redo them. */
    const void *col_data;
} fm_conv2d;

static void conv_drop(ferry_module *m)
{
    fm_conv2d *c = (fm_conv2d *)m;
    ferry_tensor_release(c->x);
    c->x = NULL;
    c->col_data = NULL;
}

static void conv_destroy(ferry_module *m)
{
    ferry_tensor_release(((fm_conv2d *)m)->col);
    ferry_tensor_release(((fm_conv2d *)m)->dyp);
}

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

/* Images per chunk: as many as keep the column matrix under the budget. */
static int64_t chunk_images(const fk_conv *g, size_t es, ferry_device d)
{
    size_t per = (size_t)(g->c * g->kh * g->kw * g->oh * g->ow) * es;
    size_t budget = d.type == FERRY_DEVICE_CPU ? CONV_COL_BYTES_CPU : CONV_COL_BYTES;
    int64_t nb = per > 0 ? (int64_t)(budget / per) : g->n;
    if (nb < 1)
        nb = 1;
    return nb < g->n ? nb : g->n;
}

/* A chunk's geometry: nb images starting at image i0. */
static fk_conv chunk_geom(const fk_conv *g, int64_t i0, int64_t nb)
{
    fk_conv q = *g;
    q.n = g->n - i0 < nb ? g->n - i0 : nb;
    return q;
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
    int64_t ckk = g.c * g.kh * g.kw, ohw = g.oh * g.ow, chw = g.c * g.h * g.w;
    size_t es = ferry_dtype_size(m->dtype);
    int64_t nb = chunk_images(&g, es, m->device);
    int64_t cshape[2] = {ckk, nb * ohw};
    st = fm_buffer(&m->out, shape, 4, m->dtype, m->device, s, &yt);
    if (st == FERRY_OK && g.n > 0)
        st = fm_buffer(&c->col, cshape, 2, m->dtype, m->device, s, &col);
    fk_ctx k = fm_ctx(xi, s);
    for (int64_t i0 = 0; i0 < g.n && st == FERRY_OK; i0 += nb) {
        fk_conv q = chunk_geom(&g, i0, nb);
        st = FK(&k, im2col, m->dtype, &q, (const char *)ferry_tensor_data(xi) + (size_t)(i0 * chw) * es,
                ferry_tensor_data(col));
        /* y[i] [C_out, OH*OW] = W @ col_i, col_i being columns i*OH*OW.. of col */
        fk_gemm gm = {.dt = m->dtype, .m = c->cout, .n = ohw, .k = ckk, .alpha = 1.0f,
                      .a = ferry_tensor_data(m->params[0].value), .lda = ckk, .stride_a = 0,
                      .b = ferry_tensor_data(col), .ldb = q.n * ohw, .stride_b = ohw,
                      .c = (char *)ferry_tensor_data(yt) + (size_t)(i0 * c->cout * ohw) * es, .ldc = ohw,
                      .stride_c = c->cout * ohw, .batch = q.n};
        if (st == FERRY_OK)
            st = FK(&k, gemm, &gm);
    }
    if (st == FERRY_OK && c->has_bias)
        st = FK(&k, bias_add, m->dtype, ferry_tensor_data(yt), ferry_tensor_data(m->params[1].value), g.n, c->cout,
                ohw, m->act_relu);
    ferry_tensor_release(col);
    if (st != FERRY_OK) {
        ferry_tensor_release(xi);
        ferry_tensor_release(yt);
        return st;
    }
    conv_drop(m);
    if (m->training) {
        c->x = xi;
        c->col_data = g.n > 0 && nb >= g.n ? ferry_tensor_data(c->col) : NULL;
    } else {
        ferry_tensor_release(xi);
    }
    *y = yt;
    return FERRY_OK;
}

/* dy's images i0 .. i0 + q->n as dyp [C_out, q->n * OH*OW] (a copy of rows of OH*OW). */
static ferry_status permute_dy(const fk_ctx *k, ferry_dtype dt, int64_t cout, const fk_conv *q, const void *dy,
                               void *dyp)
{
    int64_t ohw = q->oh * q->ow;
    fk_nd nd = {.ndim = 3, .shape = {cout, q->n, ohw}, .so = {q->n * ohw, ohw, 1}, .sa = {ohw, cout * ohw, 1},
                .numel = cout * q->n * ohw};
    return FK(k, convert, dt, dyp, dt, dy, &nd, 1.0, 0.0);
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
    int64_t ckk = g.c * g.kh * g.kw, ohw = g.oh * g.ow, chw = g.c * g.h * g.w;
    size_t es = ferry_dtype_size(m->dtype);
    int64_t nb = chunk_images(&g, es, m->device);
    int64_t cshape[2] = {ckk, nb * ohw}, pshape[2] = {c->cout, nb * ohw};
    ferry_tensor *gy = NULL, *col = NULL, *dyp = NULL, *dxt = NULL;
    st = fm_grad_input(m, dy, shape, 4, s, where, &gy);
    if (st == FERRY_OK && g.n > 0)
        st = fm_buffer(&c->col, cshape, 2, m->dtype, m->device, s, &col);
    if (st == FERRY_OK && g.n > 0)
        st = fm_buffer(&c->dyp, pshape, 2, m->dtype, m->device, s, &dyp);
    if (st == FERRY_OK && dx)
        st = fm_buffer(&m->dxbuf, c->x->shape, 4, m->dtype, m->device, s, &dxt);
    fk_ctx k = fm_ctx(c->x, s);
    if (st == FERRY_OK && c->has_bias)
        st = FK(&k, bias_grad, m->dtype, ferry_tensor_data(m->params[1].grad), ferry_tensor_data(gy), g.n, c->cout,
                ohw);
    for (int64_t i0 = 0; i0 < g.n && st == FERRY_OK; i0 += nb) {
        fk_conv q = chunk_geom(&g, i0, nb);
        int64_t cols = q.n * ohw;
        st = permute_dy(&k, m->dtype, c->cout, &q,
                        (const char *)ferry_tensor_data(gy) + (size_t)(i0 * c->cout * ohw) * es,
                        ferry_tensor_data(dyp));
        bool have_cols = q.n == g.n && c->col_data && c->col_data == ferry_tensor_data(col);
        if (st == FERRY_OK && !have_cols)
            st = FK(&k, im2col, m->dtype, &q, (const char *)ferry_tensor_data(c->x) + (size_t)(i0 * chw) * es,
                    ferry_tensor_data(col));
        /* dW [C_out, C_in*k*k] += dyp @ col^T, summed over the chunk's images */
        fk_gemm gw = {.dt = m->dtype, .tb = true, .m = c->cout, .n = ckk, .k = cols, .alpha = 1.0f,
                      .a = ferry_tensor_data(dyp), .lda = cols, .b = ferry_tensor_data(col), .ldb = cols,
                      .beta = 1.0f, .c = ferry_tensor_data(m->params[0].grad), .ldc = ckk, .batch = 1};
        if (st == FERRY_OK)
            st = FK(&k, gemm, &gw);
        if (st != FERRY_OK || !dx)
            continue;
        /* dcol [C_in*k*k, cols] = W^T @ dyp, into col (the dW gemm before it has read col) */
        fk_gemm gx = {.dt = m->dtype, .ta = true, .m = ckk, .n = cols, .k = c->cout, .alpha = 1.0f,
                      .a = ferry_tensor_data(m->params[0].value), .lda = ckk, .b = ferry_tensor_data(dyp),
                      .ldb = cols, .c = ferry_tensor_data(col), .ldc = cols, .batch = 1};
        st = FK(&k, gemm, &gx);
        if (st == FERRY_OK)
            st = FK(&k, col2im, m->dtype, &q, ferry_tensor_data(col),
                    (char *)ferry_tensor_data(dxt) + (size_t)(i0 * chw) * es);
    }
    ferry_tensor_release(gy);
    ferry_tensor_release(col);
    ferry_tensor_release(dyp);
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
    c->base.bias_relu = bias;
    double bound = 1.0 / sqrt((double)(in_channels * kernel * kernel));
    int64_t wshape[4] = {out_channels, in_channels, kernel, kernel};
    return fm_weight_bias_finish(m, wshape, 4, bias, bound, out);
}

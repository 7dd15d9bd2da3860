/* MaxPool2d (saves the argmax index of each output) and AvgPool2d (padding
 * counted in the divisor, PyTorch's default), over [N, C, H, W]. */
#include <stdio.h>
#include <string.h>

#include "common/error.h"
#include "model/nn/internal.h"
#include "model/ops/common.h"

typedef struct fm_pool {
    ferry_module base;
    bool max;
    int64_t k, stride, pad;
    ferry_tensor *idx;              /* max: i32 [N, C, OH, OW] */
    ferry_tensor *idxbuf;           /* idx's memory, reused by the next forward */
    int64_t xshape[4];
    bool saved;
} fm_pool;

static void pool_drop(ferry_module *m)
{
    fm_pool *p = (fm_pool *)m;
    ferry_tensor_release(p->idx);
    p->idx = NULL;
    p->saved = false;
}

static ferry_status pool_geom(fm_pool *p, const int64_t *xs, size_t nd, fk_conv *g)
{
    if (nd != 4 || xs[2] + 2 * p->pad < p->k || xs[3] + 2 * p->pad < p->k) {
        char sb[128];
        return ferry_fail(FERRY_ERR_SHAPE, "%s expects input [N, C, H, W] with H, W + 2*padding >= %lld, got %s",
                          p->base.name, (long long)p->k, fm_dims_str(xs, nd, sb, sizeof sb));
    }
    g->n = xs[0];
    g->c = xs[1];
    g->h = xs[2];
    g->w = xs[3];
    g->kh = g->kw = p->k;
    g->sh = g->sw = p->stride;
    g->ph = g->pw = p->pad;
    g->oh = (g->h + 2 * p->pad - p->k) / p->stride + 1;
    g->ow = (g->w + 2 * p->pad - p->k) / p->stride + 1;
    return FERRY_OK;
}

static ferry_status pool_forward(ferry_module *m, ferry_tensor *x, ferry_stream *s, ferry_tensor **y)
{
    fm_pool *p = (fm_pool *)m;
    char where[192];
    snprintf(where, sizeof where, "%s.forward", m->name);
    ferry_tensor *xi = NULL, *yt = NULL, *idx = NULL;
    ferry_status st = fm_input(m, x, s, where, &xi);
    if (st != FERRY_OK)
        return st;
    fk_conv g;
    st = pool_geom(p, xi->shape, xi->ndim, &g);
    int64_t shape[4] = {g.n, g.c, g.oh, g.ow};
    if (st == FERRY_OK)
        st = fm_buffer(&m->out, shape, 4, m->dtype, m->device, s, &yt);
    if (st == FERRY_OK && p->max)
        st = fm_buffer(&p->idxbuf, shape, 4, FERRY_DTYPE_I32, m->device, s, &idx);
    if (st == FERRY_OK) {
        fk_ctx c = fm_ctx(xi, s);
        st = p->max ? FK(&c, maxpool_fwd, m->dtype, &g, ferry_tensor_data(xi), ferry_tensor_data(yt),
                         ferry_tensor_data(idx))
                    : FK(&c, avgpool_fwd, m->dtype, &g, ferry_tensor_data(xi), ferry_tensor_data(yt));
    }
    if (st == FERRY_OK) {
        pool_drop(m);
        if (m->training) {
            p->idx = idx;
            idx = NULL;
            memcpy(p->xshape, xi->shape, sizeof p->xshape);
            p->saved = true;
        }
        *y = yt;
        yt = NULL;
    }
    ferry_tensor_release(idx);
    ferry_tensor_release(yt);
    ferry_tensor_release(xi);
    return st;
}

static ferry_status pool_backward(ferry_module *m, ferry_tensor *dy, ferry_stream *s, ferry_tensor **dx)
{
    fm_pool *p = (fm_pool *)m;
    char where[192];
    snprintf(where, sizeof where, "%s.backward", m->name);
    if (!p->saved)
        return ferry_fail(FERRY_ERR_BAD_STATE, "%s: backward needs a training-mode forward first", where);
    fk_conv g;
    ferry_status st = pool_geom(p, p->xshape, 4, &g);
    if (st == FERRY_OK && dx) {
        int64_t shape[4] = {g.n, g.c, g.oh, g.ow};
        ferry_tensor *gy = NULL, *dxt = NULL;
        st = fm_grad_input(m, dy, shape, 4, s, where, &gy);
        if (st == FERRY_OK)
            st = fm_buffer(&m->dxbuf, p->xshape, 4, m->dtype, m->device, s, &dxt);
        if (st == FERRY_OK) {
            fk_ctx c = fm_ctx(gy, s);
            st = p->max ? FK(&c, maxpool_bwd, m->dtype, &g, ferry_tensor_data(gy), ferry_tensor_data(p->idx),
                             ferry_tensor_data(dxt))
                        : FK(&c, avgpool_bwd, m->dtype, &g, ferry_tensor_data(gy), ferry_tensor_data(dxt));
        }
        ferry_tensor_release(gy);
        if (st == FERRY_OK)
            *dx = dxt;
        else
            ferry_tensor_release(dxt);
    }
    pool_drop(m);
    return st;
}

static void pool_destroy(ferry_module *m) { ferry_tensor_release(((fm_pool *)m)->idxbuf); }

static const fm_ops pool_ops = {pool_forward, pool_backward, pool_drop, pool_destroy};

static ferry_status pool_create(bool max, int64_t kernel, int64_t stride, int64_t padding, ferry_module **out)
{
    const char *kind = max ? "MaxPool2d" : "AvgPool2d";
    if (stride == 0)
        stride = kernel;
    if (!out || kernel <= 0 || stride <= 0 || padding < 0 || padding * 2 > kernel)
        return ferry_fail(FERRY_ERR_INVALID_ARG,
                          "%s(kernel=%lld, stride=%lld, padding=%lld): sizes must be positive, padding <= kernel/2",
                          kind, (long long)kernel, (long long)stride, (long long)padding);
    char name[160];
    snprintf(name, sizeof name, "%s(k=%lld, s=%lld, p=%lld)", kind, (long long)kernel, (long long)stride,
             (long long)padding);
    ferry_status st = fm_module_new(sizeof(fm_pool), &pool_ops, name, 0, out);
    if (st != FERRY_OK)
        return st;
    fm_pool *p = (fm_pool *)*out;
    p->max = max;
    p->k = kernel;
    p->stride = stride;
    p->pad = padding;
    return FERRY_OK;
}

ferry_status ferry_maxpool2d_create(int64_t kernel, int64_t stride, int64_t padding, ferry_module **out)
{
    return pool_create(true, kernel, stride, padding, out);
}

ferry_status ferry_avgpool2d_create(int64_t kernel, int64_t stride, int64_t padding, ferry_module **out)
{
    return pool_create(false, kernel, stride, padding, out);
}

/* BatchNorm2d: batch statistics in training (running mean and unbiased running
 * variance updated with momentum), running statistics in eval. Affine parameters
 * and statistics stay f32 under half precision, as in PyTorch's AMP. */
#include <stdio.h>
#include <string.h>

#include "common/error.h"
#include "model/nn/internal.h"
#include "model/ops/common.h"

typedef struct fm_bn {
    ferry_module base;
    int64_t c;
    float eps, momentum;
    ferry_tensor *x;     /* saved input */
    ferry_tensor *stats; /* f32 [2, C]: batch mean, inverse std */
} fm_bn;

static void bn_drop(ferry_module *m)
{
    fm_bn *b = (fm_bn *)m;
    ferry_tensor_release(b->x);
    b->x = NULL;
}

static void bn_destroy(ferry_module *m) { ferry_tensor_release(((fm_bn *)m)->stats); }

static ferry_status bn_forward(ferry_module *m, ferry_tensor *x, ferry_stream *s, ferry_tensor **y)
{
    fm_bn *b = (fm_bn *)m;
    char where[192];
    snprintf(where, sizeof where, "%s.forward", m->name);
    ferry_tensor *xi = NULL, *yt = NULL;
    ferry_status st = fm_input(m, x, s, where, &xi);
    if (st != FERRY_OK)
        return st;
    if (xi->ndim != 4 || xi->shape[1] != b->c) {
        char sb[128];
        st = ferry_fail(FERRY_ERR_SHAPE, "%s expects input [N, %lld, H, W], got %s", m->name, (long long)b->c,
                        fm_shape_str(xi, sb, sizeof sb));
    }
    int64_t n = st == FERRY_OK ? xi->shape[0] : 0, hw = st == FERRY_OK ? xi->shape[2] * xi->shape[3] : 0;
    if (st == FERRY_OK && m->training && n * hw < 2)
        st = ferry_fail(FERRY_ERR_SHAPE, "%s: training needs more than one value per channel", m->name);
    int64_t sshape[2] = {2, b->c};
    if (st == FERRY_OK && (!b->stats || !ferry_device_eq(b->stats->device, m->device))) {
        ferry_tensor_release(b->stats);
        b->stats = NULL;
        st = ferry_tensor_zeros(sshape, 2, FERRY_DTYPE_F32, m->device, &b->stats);
    }
    if (st == FERRY_OK)
        st = fm_buffer(&m->out, xi->shape, 4, m->dtype, m->device, s, &yt);
    if (st == FERRY_OK) {
        fk_ctx c = fm_ctx(xi, s);
        float *stats = ferry_tensor_data(b->stats);
        fk_bn p = {.n = n,
                   .ch = b->c,
                   .hw = hw,
                   .gamma = ferry_tensor_data(m->params[0].value),
                   .beta = ferry_tensor_data(m->params[1].value),
                   .rmean = ferry_tensor_data(m->params[2].value),
                   .rvar = ferry_tensor_data(m->params[3].value),
                   .smean = stats,
                   .sinvstd = stats + b->c,
                   .training = m->training,
                   .momentum = b->momentum,
                   .eps = b->eps};
        st = FK(&c, bn_fwd, m->dtype, ferry_tensor_data(xi), ferry_tensor_data(yt), &p);
    }
    if (st != FERRY_OK) {
        ferry_tensor_release(xi);
        ferry_tensor_release(yt);
        return st;
    }
    bn_drop(m);
    if (m->training)
        b->x = xi;
    else
        ferry_tensor_release(xi);
    *y = yt;
    return FERRY_OK;
}

static ferry_status bn_backward(ferry_module *m, ferry_tensor *dy, ferry_stream *s, ferry_tensor **dx)
{
    fm_bn *b = (fm_bn *)m;
    char where[192];
    snprintf(where, sizeof where, "%s.backward", m->name);
    if (!b->x)
        return ferry_fail(FERRY_ERR_BAD_STATE, "%s: backward needs a training-mode forward first", where);
    ferry_tensor *gy = NULL, *dxt = NULL;
    ferry_status st = fm_grad_input(m, dy, b->x->shape, 4, s, where, &gy);
    if (st == FERRY_OK && dx)
        st = fm_buffer(&m->dxbuf, b->x->shape, 4, m->dtype, m->device, s, &dxt);
    if (st == FERRY_OK) {
        fk_ctx c = fm_ctx(gy, s);
        float *stats = ferry_tensor_data(b->stats);
        fk_bn p = {.n = b->x->shape[0],
                   .ch = b->c,
                   .hw = b->x->shape[2] * b->x->shape[3],
                   .gamma = ferry_tensor_data(m->params[0].value),
                   .smean = stats,
                   .sinvstd = stats + b->c};
        st = FK(&c, bn_bwd, m->dtype, ferry_tensor_data(b->x), ferry_tensor_data(gy), dxt ? ferry_tensor_data(dxt) : NULL,
                &p, ferry_tensor_data(m->params[0].grad), ferry_tensor_data(m->params[1].grad));
    }
    ferry_tensor_release(gy);
    bn_drop(m);
    if (st != FERRY_OK) {
        ferry_tensor_release(dxt);
        return st;
    }
    if (dx)
        *dx = dxt;
    return FERRY_OK;
}

static const fm_ops bn_ops = {bn_forward, bn_backward, bn_drop, bn_destroy};

ferry_status ferry_batchnorm2d_create(int64_t channels, double eps, double momentum, ferry_module **out)
{
    if (!out || channels <= 0 || !(eps > 0) || !(momentum >= 0 && momentum <= 1))
        return ferry_fail(FERRY_ERR_INVALID_ARG, "BatchNorm2d(%lld, eps=%g, momentum=%g): bad arguments",
                          (long long)channels, eps, momentum);
    char name[160];
    snprintf(name, sizeof name, "BatchNorm2d(%lld)", (long long)channels);
    ferry_module *m = NULL;
    ferry_status st = fm_module_new(sizeof(fm_bn), &bn_ops, name, 4, &m);
    if (st != FERRY_OK)
        return st;
    fm_bn *b = (fm_bn *)m;
    b->c = channels;
    b->eps = (float)eps;
    b->momentum = (float)momentum;
    st = fm_param_alloc(m, 0, "weight", &channels, 1, false, 1, 1);
    if (st == FERRY_OK)
        st = fm_param_alloc(m, 1, "bias", &channels, 1, false, 0, 0);
    if (st == FERRY_OK)
        st = fm_param_alloc(m, 2, "running_mean", &channels, 1, true, 0, 0);
    if (st == FERRY_OK)
        st = fm_param_alloc(m, 3, "running_var", &channels, 1, true, 1, 1);
    for (int i = 0; i < 4; i++)
        m->params[i].keep_f32 = true;
    if (st == FERRY_OK)
        st = fm_flat_rebuild(m);
    if (st == FERRY_OK)
        st = ferry_module_init(m, 0);
    if (st != FERRY_OK) {
        ferry_module_destroy(m);
        return st;
    }
    *out = m;
    return FERRY_OK;
}

/* The parameter-free layers: ReLU (saves its output), Flatten (a view), Dropout
 * (recomputes its Philox mask in backward instead of storing it) and Sequential. */
#include <stdio.h>
#include <string.h>

#include "common/error.h"
#include "ferry/rng.h"
#include "model/nn/internal.h"
#include "model/ops/common.h"

/* ---- ReLU ---- */
typedef struct fm_relu {
    ferry_module base;
    ferry_tensor *y;
} fm_relu;

static void relu_drop(ferry_module *m)
{
    fm_relu *r = (fm_relu *)m;
    ferry_tensor_release(r->y);
    r->y = NULL;
}

static ferry_status relu_forward(ferry_module *m, ferry_tensor *x, ferry_stream *s, ferry_tensor **y)
{
    fm_relu *r = (fm_relu *)m;
    char where[192];
    snprintf(where, sizeof where, "%s.forward", m->name);
    ferry_tensor *xi = NULL, *yt = NULL;
    ferry_status st = fm_input(m, x, s, where, &xi);
    if (st != FERRY_OK)
        return st;
    if (m->input_relu) { /* the layer before applied it: keep its output for backward */
        relu_drop(m);
        if (m->training)
            r->y = ferry_tensor_retain(xi);
        *y = xi;
        return FERRY_OK;
    }
    if (!fm_is_float(xi->dtype))
        st = fm_check_float(xi, where);
    if (st == FERRY_OK)
        st = fm_buffer(&m->out, xi->shape, xi->ndim, xi->dtype, m->device, s, &yt);
    if (st == FERRY_OK) {
        fk_nd nd;
        fm_nd_make(&nd, yt, xi, NULL);
        fk_ctx c = fm_ctx(xi, s);
        st = FK(&c, unary, FK_RELU, xi->dtype, ferry_tensor_data(yt), ferry_tensor_data(xi), &nd, 0.0);
    }
    ferry_tensor_release(xi);
    if (st != FERRY_OK) {
        ferry_tensor_release(yt);
        return st;
    }
    relu_drop(m);
    if (m->training)
        r->y = ferry_tensor_retain(yt);
    *y = yt;
    return FERRY_OK;
}

static ferry_status relu_backward(ferry_module *m, ferry_tensor *dy, ferry_stream *s, ferry_tensor **dx)
{
    fm_relu *r = (fm_relu *)m;
    char where[192];
    snprintf(where, sizeof where, "%s.backward", m->name);
    if (!r->y)
        return ferry_fail(FERRY_ERR_BAD_STATE, "%s: backward needs a training-mode forward first", where);
    ferry_status st = FERRY_OK;
    if (dx) {
        ferry_tensor *g = NULL, *dxt = NULL;
        st = fm_grad_input(m, dy, r->y->shape, r->y->ndim, s, where, &g);
        if (st == FERRY_OK)
            st = fm_buffer(&m->dxbuf, r->y->shape, r->y->ndim, r->y->dtype, m->device, s, &dxt);
        if (st == FERRY_OK) {
            fk_ctx c = fm_ctx(g, s);
            st = FK(&c, relu_bwd, r->y->dtype, ferry_tensor_data(dxt), ferry_tensor_data(r->y),
                    ferry_tensor_data(g), r->y->numel);
        }
        ferry_tensor_release(g);
        if (st == FERRY_OK)
            *dx = dxt;
        else
            ferry_tensor_release(dxt);
    }
    relu_drop(m);
    return st;
}

static const fm_ops relu_ops = {relu_forward, relu_backward, relu_drop, NULL};

ferry_status ferry_relu_create(ferry_module **out)
{
    if (!out)
        return FERRY_ARG_ERROR("out is NULL");
    return fm_module_new(sizeof(fm_relu), &relu_ops, "ReLU", 0, out);
}

/* ---- Flatten ---- */
typedef struct fm_flatten {
    ferry_module base;
    int64_t shape[FERRY_MAX_DIMS];
    size_t ndim; /* 0: nothing saved */
} fm_flatten;

static void flatten_drop(ferry_module *m) { ((fm_flatten *)m)->ndim = 0; }

static ferry_status flatten_forward(ferry_module *m, ferry_tensor *x, ferry_stream *s, ferry_tensor **y)
{
    fm_flatten *f = (fm_flatten *)m;
    char where[192];
    snprintf(where, sizeof where, "%s.forward", m->name);
    ferry_tensor *xi = NULL;
    ferry_status st = fm_input(m, x, s, where, &xi);
    if (st != FERRY_OK)
        return st;
    st = ferry_tensor_flatten(xi, y);
    if (st == FERRY_OK && m->training) {
        memcpy(f->shape, xi->shape, sizeof f->shape);
        f->ndim = xi->ndim;
    }
    ferry_tensor_release(xi);
    return st;
}

static ferry_status flatten_backward(ferry_module *m, ferry_tensor *dy, ferry_stream *s, ferry_tensor **dx)
{
    fm_flatten *f = (fm_flatten *)m;
    char where[192];
    snprintf(where, sizeof where, "%s.backward", m->name);
    if (!f->ndim)
        return ferry_fail(FERRY_ERR_BAD_STATE, "%s: backward needs a training-mode forward first", where);
    ferry_status st = FERRY_OK;
    if (dx) {
        ferry_tensor *g = NULL;
        int64_t fshape[2] = {f->shape[0], 1};
        for (size_t i = 1; i < f->ndim; i++)
            fshape[1] *= f->shape[i];
        st = fm_grad_input(m, dy, fshape, 2, s, where, &g);
        if (st == FERRY_OK)
            st = ferry_tensor_reshape(g, f->shape, f->ndim, dx);
        ferry_tensor_release(g);
    }
    f->ndim = 0;
    return st;
}

static const fm_ops flatten_ops = {flatten_forward, flatten_backward, flatten_drop, NULL};

ferry_status ferry_flatten_create(ferry_module **out)
{
    if (!out)
        return FERRY_ARG_ERROR("out is NULL");
    return fm_module_new(sizeof(fm_flatten), &flatten_ops, "Flatten", 0, out);
}

/* ---- Dropout ---- */
typedef struct fm_dropout {
    ferry_module base;
    float p;
    uint64_t seed, calls;
    bool saved;         /* a training forward ran and backward has not */
    uint64_t saved_key; /* the mask's stream */
    int64_t shape[FERRY_MAX_DIMS];
    size_t ndim;
} fm_dropout;

static void dropout_drop(ferry_module *m) { ((fm_dropout *)m)->saved = false; }

static ferry_status dropout_forward(ferry_module *m, ferry_tensor *x, ferry_stream *s, ferry_tensor **y)
{
    fm_dropout *d = (fm_dropout *)m;
    char where[192];
    snprintf(where, sizeof where, "%s.forward", m->name);
    ferry_tensor *xi = NULL, *yt = NULL;
    ferry_status st = fm_input(m, x, s, where, &xi);
    if (st != FERRY_OK)
        return st;
    if (!m->training || d->p == 0.0f) {
        d->saved = m->training;
        d->saved_key = UINT64_MAX; /* identity */
        memcpy(d->shape, xi->shape, sizeof d->shape);
        d->ndim = xi->ndim;
        *y = xi;
        return FERRY_OK;
    }
    uint64_t key = FERRY_RNG_DROPOUT | (d->calls & ((UINT64_C(1) << 56) - 1));
    st = fm_buffer(&m->out, xi->shape, xi->ndim, xi->dtype, m->device, s, &yt);
    if (st == FERRY_OK) {
        fk_ctx c = fm_ctx(xi, s);
        st = FK(&c, dropout, xi->dtype, ferry_tensor_data(yt), ferry_tensor_data(xi), xi->numel, d->p,
                d->seed, key);
    }
    if (st == FERRY_OK) {
        d->calls++;
        d->saved = true;
        d->saved_key = key;
        memcpy(d->shape, xi->shape, sizeof d->shape);
        d->ndim = xi->ndim;
        *y = yt;
    } else {
        ferry_tensor_release(yt);
    }
    ferry_tensor_release(xi);
    return st;
}

static ferry_status dropout_backward(ferry_module *m, ferry_tensor *dy, ferry_stream *s, ferry_tensor **dx)
{
    fm_dropout *d = (fm_dropout *)m;
    char where[192];
    snprintf(where, sizeof where, "%s.backward", m->name);
    if (!d->saved)
        return ferry_fail(FERRY_ERR_BAD_STATE, "%s: backward needs a training-mode forward first", where);
    ferry_status st = FERRY_OK;
    if (dx) {
        ferry_tensor *g = NULL, *dxt = NULL;
        st = fm_grad_input(m, dy, d->shape, d->ndim, s, where, &g);
        if (st == FERRY_OK && d->saved_key == UINT64_MAX) {
            *dx = g;
            g = NULL;
        } else if (st == FERRY_OK) {
            st = fm_buffer(&m->dxbuf, d->shape, d->ndim, m->dtype, m->device, s, &dxt);
            if (st == FERRY_OK) {
                fk_ctx c = fm_ctx(g, s);
                /* The same key gives the same mask: dx = dy * mask / (1 - p). */
                st = FK(&c, dropout, m->dtype, ferry_tensor_data(dxt), ferry_tensor_data(g), g->numel, d->p,
                        d->seed, d->saved_key);
            }
            if (st == FERRY_OK)
                *dx = dxt;
            else
                ferry_tensor_release(dxt);
        }
        ferry_tensor_release(g);
    }
    d->saved = false;
    return st;
}

static const fm_ops dropout_ops = {dropout_forward, dropout_backward, dropout_drop, NULL};

uint64_t *fm_dropout_calls(ferry_module *m)
{
    return m && m->ops == &dropout_ops ? &((fm_dropout *)m)->calls : NULL;
}

ferry_status ferry_dropout_create(double p, uint64_t seed, ferry_module **out)
{
    if (!out || !(p >= 0.0 && p <= 1.0))
        return ferry_fail(FERRY_ERR_INVALID_ARG, "Dropout(p=%g): p must be in [0, 1]", p);
    char name[160];
    snprintf(name, sizeof name, "Dropout(p=%g)", p);
    ferry_status st = fm_module_new(sizeof(fm_dropout), &dropout_ops, name, 0, out);
    if (st != FERRY_OK)
        return st;
    fm_dropout *d = (fm_dropout *)*out;
    d->p = (float)p;
    d->seed = seed;
    return FERRY_OK;
}

/* ---- Sequential ---- */
static ferry_status seq_forward(ferry_module *m, ferry_tensor *x, ferry_stream *s, ferry_tensor **y)
{
    ferry_tensor *cur = ferry_tensor_retain(x);
    bool fused = false; /* the child before applied this child's ReLU */
    for (size_t i = 0; i < m->nchildren; i++) {
        ferry_tensor *next = NULL;
        ferry_module *c = m->children[i];
        /* Layer and ReLU in one pass: the ReLU then only keeps its input. The
         * flags hold for this call only. */
        c->input_relu = fused && c->ops == &relu_ops;
        c->act_relu = c->bias_relu && i + 1 < m->nchildren && m->children[i + 1]->ops == &relu_ops;
        ferry_status st = c->ops->forward(c, cur, s, &next);
        fused = c->act_relu;
        c->act_relu = c->input_relu = false;
        ferry_tensor_release(cur);
        if (st != FERRY_OK)
            return ferry_fail_prefix(st, "%s[%zu]: ", m->name, i);
        cur = next;
    }
    *y = cur;
    return FERRY_OK;
}

static ferry_status seq_backward(ferry_module *m, ferry_tensor *dy, ferry_stream *s, ferry_tensor **dx)
{
    ferry_tensor *cur = ferry_tensor_retain(dy);
    size_t end = m->nflat; /* children's parameters are consecutive in m->flat */
    for (size_t i = m->nchildren; i-- > 0;) {
        ferry_tensor *next = NULL;
        bool want = i > 0 || dx;
        ferry_module *c = m->children[i];
        ferry_status st = c->ops->backward(c, cur, s, want ? &next : NULL);
        ferry_tensor_release(cur);
        /* Child i's gradients are final now: tell the hook (data-parallel
         * training starts reducing them while the children before it run). */
        end -= c->nflat;
        if (st == FERRY_OK && m->grad_ready)
            st = m->grad_ready(m->grad_ready_ctx, m, end, c->nflat, s);
        if (st != FERRY_OK) {
            ferry_tensor_release(next);
            return ferry_fail_prefix(st, "%s[%zu]: ", m->name, i);
        }
        cur = next;
    }
    if (dx)
        *dx = cur;
    else
        ferry_tensor_release(cur);
    return FERRY_OK;
}

static const fm_ops seq_ops = {seq_forward, seq_backward, NULL, NULL};

ferry_status ferry_sequential_create(ferry_module **out)
{
    if (!out)
        return FERRY_ARG_ERROR("out is NULL");
    return fm_module_new(sizeof(ferry_module), &seq_ops, "Sequential(0)", 0, out);
}

ferry_status ferry_sequential_add(ferry_module *seq, ferry_module *child)
{
    if (!seq || !child || seq->ops != &seq_ops || child == seq) {
        ferry_module_destroy(child == seq ? NULL : child);
        return ferry_fail(FERRY_ERR_INVALID_ARG, "ferry_sequential_add needs a Sequential and a child");
    }
    if (seq->nchildren == 0 && seq->nflat == 0) {
        /* An empty Sequential takes its first child's device and dtype. */
        seq->device = child->device;
        seq->dtype = child->dtype;
    }
    if (seq->nchildren == 0)
        seq->index_input = child->index_input;
    if (!ferry_device_eq(child->device, seq->device) || child->dtype != seq->dtype) {
        char a[FERRY_DEVICE_NAME_MAX], b[FERRY_DEVICE_NAME_MAX];
        /* A dtype that does not fit on the right device is a dtype error. */
        bool same_dev = ferry_device_eq(child->device, seq->device);
        ferry_status st = ferry_fail(same_dev ? FERRY_ERR_DTYPE : FERRY_ERR_DEVICE_MISMATCH,
                                     "%s is on %s (%s) but the Sequential is on %s (%s); build on one "
                                     "device, then move the whole model",
                                     child->name, ferry_device_format(child->device, a, sizeof a),
                                     ferry_dtype_name(child->dtype), ferry_device_format(seq->device, b, sizeof b),
                                     ferry_dtype_name(seq->dtype));
        ferry_module_destroy(child);
        return st;
    }
    if (seq->nchildren == seq->cap) {
        size_t cap = seq->cap ? seq->cap * 2 : 8;
        ferry_module **c = ferry_host_realloc(seq->children, cap * sizeof(ferry_module *));
        if (!c) {
            ferry_module_destroy(child);
            return FERRY_ERR_NO_MEMORY;
        }
        seq->children = c;
        seq->cap = cap;
    }
    seq->children[seq->nchildren++] = child;
    child->training = seq->training;
    ferry_status st = fm_flat_rebuild(seq);
    if (st != FERRY_OK) {
        seq->nchildren--;
        ferry_module_destroy(child);
        return st;
    }
    snprintf(seq->name, sizeof seq->name, "Sequential(%zu)", seq->nchildren);
    return FERRY_OK;
}

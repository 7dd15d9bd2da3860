/* What every module shares: creation, parameters and their names, init from a
 * seed, forward/backward dispatch, zero_grad, moving between devices and dtypes,
 * train/eval, printing. The layers (conv.c, linear.c ... in this folder) fill in fm_ops. */
#include <stdio.h>
#include <string.h>

#include "common/error.h"
#include "device/device_internal.h"
#include "ferry/rng.h"
#include "model/nn/internal.h"
#include "model/ops/common.h"
#include "tensor/internal.h"

ferry_status fm_module_new(size_t size, const fm_ops *ops, const char *name, size_t nparams,
                           ferry_module **out)
{
    ferry_module *m = ferry_host_calloc(1, size);
    if (!m)
        return FERRY_ERR_NO_MEMORY;
    m->ops = ops;
    snprintf(m->name, sizeof m->name, "%s", name);
    m->device = ferry_cpu();
    m->dtype = FERRY_DTYPE_F32;
    m->training = true;
    if (nparams) {
        m->params = ferry_host_calloc(nparams, sizeof *m->params);
        if (!m->params) {
            ferry_host_free(m);
            return FERRY_ERR_NO_MEMORY;
        }
        m->nparams = nparams;
    }
    *out = m;
    return FERRY_OK;
}

ferry_status fm_param_alloc(ferry_module *m, size_t i, const char *name, const int64_t *shape,
                            size_t ndim, bool buffer, double lo, double hi)
{
    fm_param *p = &m->params[i];
    snprintf(p->name, sizeof p->name, "%s", name);
    p->buffer = buffer;
    p->init_lo = lo;
    p->init_hi = hi;
    ferry_status st = ferry_tensor_zeros(shape, ndim, FERRY_DTYPE_F32, m->device, &p->value);
    if (st == FERRY_OK && !buffer)
        st = ferry_tensor_zeros(shape, ndim, FERRY_DTYPE_F32, m->device, &p->grad);
    return st;
}

ferry_status fm_weight_bias_finish(ferry_module *m, const int64_t *wshape, size_t wdims, bool bias,
                                   double bound, ferry_module **out)
{
    ferry_status st = fm_param_alloc(m, 0, "weight", wshape, wdims, false, -bound, bound);
    if (st == FERRY_OK && bias)
        st = fm_param_alloc(m, 1, "bias", &wshape[0], 1, false, -bound, bound);
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

ferry_status fm_flat_rebuild(ferry_module *m)
{
    size_t n = m->nparams;
    for (size_t i = 0; i < m->nchildren; i++)
        n += m->children[i]->nflat;
    if (n == 0) {
        /* No parameters anywhere below (ReLU, Flatten): an empty list, and the
         * loops below may assume flat exists. */
        ferry_host_free(m->flat);
        m->flat = NULL;
        m->nflat = 0;
        return FERRY_OK;
    }
    fm_ref *flat = ferry_host_calloc(n, sizeof *flat);
    if (!flat)
        return FERRY_ERR_NO_MEMORY;
    size_t k = 0;
    for (size_t i = 0; i < m->nparams; i++, k++) {
        snprintf(flat[k].name, sizeof flat[k].name, "%s", m->params[i].name);
        flat[k].p = &m->params[i];
    }
    for (size_t c = 0; c < m->nchildren; c++)
        for (size_t i = 0; i < m->children[c]->nflat; i++, k++) {
            snprintf(flat[k].name, sizeof flat[k].name, "%zu.%.100s", c, m->children[c]->flat[i].name);
            flat[k].p = m->children[c]->flat[i].p;
        }
    ferry_host_free(m->flat);
    m->flat = flat;
    m->nflat = n;
    return FERRY_OK;
}

ferry_status fm_buffer(ferry_tensor **slot, const int64_t *shape, size_t ndim, ferry_dtype dt,
                       ferry_device d, ferry_stream *s, ferry_tensor **out)
{
    ferry_tensor *t = *slot;
    if (t && __atomic_load_n(&t->refs, __ATOMIC_ACQUIRE) == 1 &&
        __atomic_load_n(&t->storage->refs, __ATOMIC_ACQUIRE) == 1 && t->dtype == dt &&
        ferry_device_eq(t->device, d) && t->ndim == ndim &&
        memcmp(t->shape, shape, ndim * sizeof(int64_t)) == 0) {
        *out = ferry_tensor_retain(t);
        return FERRY_OK;
    }
    ferry_tensor_release(t);
    *slot = NULL;
    ferry_status st = ferry_tensor_empty_on_(shape, ndim, dt, d, s, slot);
    if (st != FERRY_OK)
        return st;
    *out = ferry_tensor_retain(*slot);
    return FERRY_OK;
}

static ferry_status device_mismatch(ferry_device have, ferry_device want, const char *what,
                                    const char *where)
{
    char a[FERRY_DEVICE_NAME_MAX], b[FERRY_DEVICE_NAME_MAX];
    return ferry_fail(FERRY_ERR_DEVICE_MISMATCH,
                      "expected all tensors to be on the same device, but found %s and %s (%s in %s)",
                      ferry_device_format(have, a, sizeof a), ferry_device_format(want, b, sizeof b),
                      what, where);
}

ferry_status fm_input(ferry_module *m, ferry_tensor *x, ferry_stream *s, const char *where,
                      ferry_tensor **out)
{
    if (!x)
        return ferry_arg_error_(where, "input is NULL");
    if (!ferry_device_eq(x->device, m->device))
        return device_mismatch(x->device, m->device, "input and parameters", where);
    if (x->dtype != m->dtype)
        return ferry_affine(x, 1.0, 0.0, m->dtype, s, out);
    return ferry_tensor_contiguous(x, s, out);
}

ferry_status fm_grad_input(ferry_module *m, ferry_tensor *dy, const int64_t *shape, size_t ndim,
                           ferry_stream *s, const char *where, ferry_tensor **out)
{
    if (!dy)
        return ferry_arg_error_(where, "gradient is NULL");
    if (!ferry_device_eq(dy->device, m->device))
        return device_mismatch(dy->device, m->device, "gradient and parameters", where);
    if (dy->ndim != ndim || memcmp(dy->shape, shape, ndim * sizeof(int64_t)) != 0) {
        char a[128], b[128];
        return ferry_fail(FERRY_ERR_SHAPE, "%s: gradient has shape %s but the output had shape %s", where,
                          fm_shape_str(dy, a, sizeof a), fm_dims_str(shape, ndim, b, sizeof b));
    }
    if (dy->dtype != m->dtype)
        return ferry_affine(dy, 1.0, 0.0, m->dtype, s, out);
    return ferry_tensor_contiguous(dy, s, out);
}

void fm_drop_saved_all(ferry_module *m)
{
    if (!m)
        return;
    if (m->ops->drop_saved)
        m->ops->drop_saved(m);
    for (size_t i = 0; i < m->nchildren; i++)
        fm_drop_saved_all(m->children[i]);
}

static void drop_buffers_all(ferry_module *m)
{
    m->calls++;
    ferry_tensor_release(m->out);
    ferry_tensor_release(m->dxbuf);
    ferry_tensor_release(m->lossbuf);
    ferry_tensor_release(m->inbuf);
    m->out = m->dxbuf = m->lossbuf = m->inbuf = NULL;
    for (size_t i = 0; i < m->nchildren; i++)
        drop_buffers_all(m->children[i]);
}

void ferry_module_destroy(ferry_module *m)
{
    if (!m)
        return;
    if (m->ops->drop_saved)
        m->ops->drop_saved(m);
    if (m->ops->destroy)
        m->ops->destroy(m);
    for (size_t i = 0; i < m->nchildren; i++)
        ferry_module_destroy(m->children[i]);
    for (size_t i = 0; i < m->nparams; i++) {
        fm_param *p = &m->params[i];
        if (p->master != p->value)
            ferry_tensor_release(p->master);
        ferry_tensor_release(p->master_grad);
        ferry_tensor_release(p->value);
        ferry_tensor_release(p->grad);
    }
    ferry_tensor_release(m->out);
    ferry_tensor_release(m->dxbuf);
    ferry_tensor_release(m->lossbuf);
    ferry_tensor_release(m->inbuf);
    ferry_host_free(m->children);
    ferry_host_free(m->params);
    ferry_host_free(m->flat);
    ferry_host_free(m);
}

const char *ferry_module_name(const ferry_module *m) { return m ? m->name : "(null)"; }

static void print_tree(const ferry_module *m, FILE *f, int depth, const char *label)
{
    int64_t n = ferry_module_trainable_numel(m);
    fprintf(f, "%*s%s%s", depth * 2, "", label, m->name);
    if (n)
        fprintf(f, "  [%lld parameters]", (long long)n);
    fputc('\n', f);
    for (size_t i = 0; i < m->nchildren; i++) {
        char lab[32];
        snprintf(lab, sizeof lab, "(%zu) ", i);
        print_tree(m->children[i], f, depth + 1, lab);
    }
}

void ferry_module_print(const ferry_module *m, FILE *f)
{
    if (m && f)
        print_tree(m, f, 0, "");
}

ferry_status ferry_module_init(ferry_module *m, uint64_t seed)
{
    if (!m)
        return FERRY_ARG_ERROR("module is NULL");
    for (size_t i = 0; i < m->nflat; i++) {
        fm_param *p = m->flat[i].p;
        ferry_tensor *t = fm_param_target(p);
        fk_ctx c = fm_ctx(t, NULL);
        ferry_status st;
        if (p->init_lo == p->init_hi) {
            st = ferry_tensor_fill(t, p->init_lo, NULL);
        } else {
            st = FK(&c, rand, t->dtype, ferry_tensor_data(t), t->numel, seed, FERRY_RNG_INIT | i, p->init_normal);
            if (st == FERRY_OK) {
                fk_nd nd;
                fm_nd_make(&nd, t, t, NULL);
                st = FK(&c, convert, t->dtype, ferry_tensor_data(t), t->dtype, ferry_tensor_data(t), &nd,
                        p->init_hi - p->init_lo, p->init_lo);
            }
        }
        if (st == FERRY_OK && t != p->value)
            st = ferry_tensor_copy(p->value, t, NULL);
        if (st == FERRY_OK)
            st = ferry_device_sync_default_(t->device); /* ready for any stream */
        if (st != FERRY_OK)
            return st;
    }
    return FERRY_OK;
}

ferry_status ferry_module_forward(ferry_module *m, ferry_tensor *x, ferry_stream *s, ferry_tensor **y)
{
    if (!m || !x || !y)
        return FERRY_ARG_ERROR("%s is NULL", !m ? "module" : !x ? "x" : "y");
    m->calls++;
    ferry_status st = m->ops->forward(m, x, s, y);
    if (st != FERRY_OK || !m->training)
        fm_drop_saved_all(m);
    return st;
}

ferry_status ferry_module_backward(ferry_module *m, ferry_tensor *dy, ferry_stream *s, ferry_tensor **dx)
{
    if (!m || !dy)
        return FERRY_ARG_ERROR("%s is NULL", !m ? "module" : "dy");
    if (dx)
        *dx = NULL;
    m->calls++;
    ferry_status st = m->ops->backward(m, dy, s, dx);
    /* A Sequential reports child by child (seq_backward); a single layer here. */
    if (st == FERRY_OK && m->grad_ready && m->nchildren == 0 && m->nflat > 0)
        st = m->grad_ready(m->grad_ready_ctx, m, 0, m->nflat, s);
    if (st != FERRY_OK) {
        fm_drop_saved_all(m);
        if (dx) {
            ferry_tensor_release(*dx);
            *dx = NULL;
        }
    }
    return st;
}

ferry_status ferry_module_set_grad_hook(ferry_module *m, ferry_grad_ready_fn fn, void *ctx)
{
    if (!m)
        return FERRY_ARG_ERROR("module is NULL");
    m->grad_ready = fn;
    m->grad_ready_ctx = fn ? ctx : NULL;
    return FERRY_OK;
}

ferry_status ferry_module_zero_grad(ferry_module *m, ferry_stream *s)
{
    if (!m)
        return FERRY_ARG_ERROR("module is NULL");
    /* One launch per FK_PLIST_MAX gradients (a fill each cost a launch: 8 of
     * a CNN step's 60); a gradient that is not contiguous gets its own fill. */
    fk_zlist l = {0};
    fk_ctx c = {0};
    ferry_status st = FERRY_OK;
    for (size_t i = 0; i < m->nflat && st == FERRY_OK; i++) {
        ferry_tensor *g = m->flat[i].p->grad;
        if (!g)
            continue;
        if (!ferry_tensor_is_contiguous(g) || (l.n && !ferry_device_eq(g->device, c.dev))) {
            st = ferry_tensor_fill(g, 0.0, s);
            continue;
        }
        if (!l.n)
            c = fm_ctx(g, s);
        l.p[l.n] = ferry_tensor_data(g);
        l.bytes[l.n++] = g->numel * (int64_t)ferry_dtype_size(g->dtype);
        if (l.n == FK_PLIST_MAX) {
            st = FK(&c, zero_multi, &l);
            l.n = 0;
        }
    }
    if (st == FERRY_OK && l.n)
        st = FK(&c, zero_multi, &l);
    return st;
}

ferry_status fm_tensor_move(ferry_tensor **t, ferry_device d)
{
    if (!*t)
        return FERRY_OK;
    ferry_tensor *n = NULL;
    ferry_status st = ferry_tensor_to(*t, d, false, &n);
    if (st != FERRY_OK)
        return st;
    ferry_tensor_release(*t);
    *t = n;
    return FERRY_OK;
}

static void set_device_all(ferry_module *m, ferry_device d, ferry_dtype dt, bool set_dtype)
{
    m->device = d;
    if (set_dtype)
        m->dtype = dt;
    for (size_t i = 0; i < m->nchildren; i++)
        set_device_all(m->children[i], d, dt, set_dtype);
}

/* Converts every tensor of every parameter with conv(), all or nothing: the new
 * tensors are made first and swapped in only when all exist. */
typedef ferry_status (*conv_fn)(fm_param *p, int which, ferry_tensor *t, void *ctx, ferry_tensor **out);

static ferry_status convert_params(ferry_module *m, conv_fn fn, void *ctx)
{
    if (m->nflat == 0)
        return FERRY_OK;
    /* Four slots per parameter (value, grad, master, master_grad); calloc checks
     * the product, so n below cannot have wrapped once tmp exists. */
    ferry_tensor **tmp = ferry_host_calloc(m->nflat, 4 * sizeof(ferry_tensor *));
    if (!tmp)
        return FERRY_ERR_NO_MEMORY;
    size_t n = m->nflat * 4;
    ferry_status st = FERRY_OK;
    for (size_t i = 0; i < m->nflat && st == FERRY_OK; i++) {
        fm_param *p = m->flat[i].p;
        ferry_tensor *src[4] = {p->value, p->grad, p->master == p->value ? NULL : p->master,
                                p->master_grad};
        for (int w = 0; w < 4 && st == FERRY_OK; w++)
            if (src[w])
                st = fn(p, w, src[w], ctx, &tmp[i * 4 + w]);
    }
    if (st != FERRY_OK) {
        for (size_t i = 0; i < n; i++)
            ferry_tensor_release(tmp[i]);
        ferry_host_free(tmp);
        return st;
    }
    for (size_t i = 0; i < m->nflat; i++) {
        fm_param *p = m->flat[i].p;
        bool alias = p->master == p->value;
        ferry_tensor **dst[4] = {&p->value, &p->grad, &p->master, &p->master_grad};
        for (int w = 0; w < 4; w++) {
            if (!tmp[i * 4 + w])
                continue;
            ferry_tensor_release(*dst[w]);
            *dst[w] = tmp[i * 4 + w];
        }
        if (alias)
            p->master = p->value;
    }
    ferry_host_free(tmp);
    return FERRY_OK;
}

static ferry_status to_device_fn(fm_param *p, int which, ferry_tensor *t, void *ctx, ferry_tensor **out)
{
    (void)p; (void)which;
    return ferry_tensor_to(t, *(ferry_device *)ctx, false, out);
}

ferry_status ferry_module_to(ferry_module *m, ferry_device d)
{
    d = ferry_device_resolve(d);
    if (!m)
        return FERRY_ARG_ERROR("module is NULL");
    fm_drop_saved_all(m);
    drop_buffers_all(m);
    ferry_status st = convert_params(m, to_device_fn, &d);
    if (st != FERRY_OK)
        return st;
    set_device_all(m, d, m->dtype, false);
    return FERRY_OK;
}

static ferry_status to_dtype_fn(fm_param *p, int which, ferry_tensor *t, void *ctx, ferry_tensor **out)
{
    ferry_dtype dt = *(ferry_dtype *)ctx;
    if (p->buffer || p->keep_f32 || which >= 2)
        return (*out = NULL, FERRY_OK);
    return ferry_tensor_to_dtype(t, dt, out);
}

ferry_status ferry_module_to_dtype(ferry_module *m, ferry_dtype dt)
{
    if (!m)
        return FERRY_ARG_ERROR("module is NULL");
    if (!fm_is_float(dt))
        return ferry_fail(FERRY_ERR_DTYPE, "a module's dtype must be f32, f16 or bf16, not %s",
                          ferry_dtype_name(dt));
    for (size_t i = 0; i < m->nflat; i++)
        if (m->flat[i].p->master && !m->flat[i].p->keep_f32)
            return ferry_fail(FERRY_ERR_BAD_STATE,
                              "the module is under mixed precision (an ferry_amp owns its dtype)");
    fm_drop_saved_all(m);
    drop_buffers_all(m);
    ferry_status st = convert_params(m, to_dtype_fn, &dt);
    if (st != FERRY_OK)
        return st;
    set_device_all(m, m->device, dt, true);
    return FERRY_OK;
}

void ferry_module_train(ferry_module *m, bool training)
{
    if (!m)
        return;
    m->training = training;
    if (!training)
        fm_drop_saved_all(m);
    for (size_t i = 0; i < m->nchildren; i++)
        ferry_module_train(m->children[i], training);
}

bool ferry_module_is_training(const ferry_module *m) { return m && m->training; }
ferry_device ferry_module_device(const ferry_module *m) { return m ? m->device : ferry_cpu(); }
ferry_dtype ferry_module_dtype(const ferry_module *m) { return m ? m->dtype : FERRY_DTYPE_F32; }

int64_t ferry_module_trainable_numel(const ferry_module *m)
{
    int64_t n = 0;
    if (!m)
        return 0;
    for (size_t i = 0; i < m->nflat; i++)
        if (!m->flat[i].p->buffer)
            n += m->flat[i].p->value->numel;
    return n;
}

size_t ferry_module_param_count(const ferry_module *m) { return m ? m->nflat : 0; }

ferry_status ferry_module_param(const ferry_module *m, size_t i, ferry_param *out)
{
    if (!m || !out || i >= m->nflat)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "parameter %zu out of range (module has %zu)", i,
                          m ? m->nflat : 0);
    fm_param *p = m->flat[i].p;
    out->name = m->flat[i].name;
    out->value = p->value;
    out->grad = p->grad;
    out->buffer = p->buffer;
    return FERRY_OK;
}

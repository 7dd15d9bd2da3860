/* Mixed precision: half weights for compute, f32 master weights for the
 * optimiser, and a dynamic loss scale (torch.cuda.amp.GradScaler's policy).
 *
 * The whole step runs on the device, in stream order: the unscale writes the
 * inf/nan flag, the optimiser's kernels and its step count read it and leave
 * everything as it was when it is set, and the loss scale and its count of good
 * steps are updated by a kernel too. So a step never waits on the host; only a
 * caller who asks (skipped, ferry_amp_scale) does. */
#include <math.h>
#include <string.h>

#include "common/error.h"
#include "model/nn/internal.h"
#include "model/ops/common.h"

struct ferry_amp {
    ferry_module *m;
    ferry_amp_config cfg;
    /* On the module's device (moved with it at the next step): */
    ferry_tensor *found;   /* f32 [1]: this step's gradients hold inf or nan */
    ferry_tensor *scale;   /* f32 [1]: the loss scale */
    ferry_tensor *tracker; /* i64 [1]: good steps in a row since the scale last changed */
};

ferry_amp_config ferry_amp_config_default(ferry_dtype dt)
{
    ferry_amp_config c = {dt, 65536.0f, 2.0f, 0.5f, 2000};
    return c;
}

/* Reads the device's value, so it waits for the device's streams. */
float ferry_amp_scale(const ferry_amp *a)
{
    if (!a)
        return 1.0f;
    float v = NAN;
    if (ferry_tensor_copy_to_host(a->scale, &v, sizeof v) != FERRY_OK)
        return NAN;
    return v;
}

/* Moves the device state to the module's device (after ferry_module_to). A
 * failed move leaves what is not there yet for the next call. */
static ferry_status follow_module(ferry_amp *a)
{
    ferry_device d = a->m->device;
    ferry_tensor **ts[3] = {&a->found, &a->scale, &a->tracker};
    for (size_t i = 0; i < 3; i++)
        if (!ferry_device_eq((*ts[i])->device, d)) {
            ferry_status st = fm_tensor_move(ts[i], d);
            if (st != FERRY_OK)
                return st;
        }
    return FERRY_OK;
}

ferry_status fm_amp_loss_scale(ferry_amp *a, ferry_tensor **out)
{
    ferry_status st = follow_module(a);
    *out = st == FERRY_OK ? a->scale : NULL;
    return st;
}

/* The flag and the two halves of the scale's state, made ready on return. */
ferry_status fm_amp_state(ferry_amp *a, ferry_module **m, ferry_tensor **scale, ferry_tensor **tracker)
{
    ferry_status st = follow_module(a);
    *m = a->m;
    *scale = st == FERRY_OK ? a->scale : NULL;
    *tracker = st == FERRY_OK ? a->tracker : NULL;
    return st;
}

static ferry_status make_state(ferry_amp *a, ferry_device d)
{
    int64_t one = 1;
    ferry_status st = ferry_tensor_zeros(&one, 1, FERRY_DTYPE_F32, d, &a->found);
    if (st == FERRY_OK)
        st = ferry_tensor_full(&one, 1, a->cfg.init_scale, FERRY_DTYPE_F32, d, &a->scale);
    if (st == FERRY_OK)
        st = ferry_tensor_zeros(&one, 1, FERRY_DTYPE_I64, d, &a->tracker);
    return st;
}

static void free_state(ferry_amp *a)
{
    ferry_tensor_release(a->found);
    ferry_tensor_release(a->scale);
    ferry_tensor_release(a->tracker);
}


ferry_status ferry_amp_create(ferry_module *m, const ferry_amp_config *cfg, ferry_amp **out)
{
    if (!m || !cfg || !out)
        return FERRY_ARG_ERROR("%s is NULL", !m ? "module" : !cfg ? "config" : "out");
    if (cfg->dtype != FERRY_DTYPE_F16 && cfg->dtype != FERRY_DTYPE_BF16)
        return ferry_fail(FERRY_ERR_DTYPE, "mixed precision computes in f16 or bf16, not %s",
                          ferry_dtype_name(cfg->dtype));
    if (!(cfg->init_scale > 0) || !(cfg->growth_factor >= 1) || !(cfg->backoff_factor > 0 && cfg->backoff_factor < 1) ||
        cfg->growth_interval < 1)
        return ferry_fail(FERRY_ERR_INVALID_ARG,
                          "amp config: init_scale > 0, growth_factor >= 1, backoff in (0, 1), growth_interval >= 1");
    if (m->dtype != FERRY_DTYPE_F32)
        return ferry_fail(FERRY_ERR_BAD_STATE, "mixed precision starts from an f32 module, this one is %s",
                          ferry_dtype_name(m->dtype));
    for (size_t i = 0; i < m->nflat; i++)
        if (m->flat[i].p->master)
            return ferry_fail(FERRY_ERR_BAD_STATE, "the module already has an ferry_amp");
    ferry_amp *a = ferry_host_calloc(1, sizeof *a);
    size_t n = m->nflat;
    ferry_tensor **nv = n ? ferry_host_calloc(n, 2 * sizeof(ferry_tensor *)) : NULL;
    if (!a || (n && !nv)) {
        ferry_host_free(a);
        ferry_host_free(nv);
        return FERRY_ERR_NO_MEMORY;
    }
    a->cfg = *cfg;
    ferry_status st = make_state(a, m->device);
    /* New half value and grad (or, for f32-kept parameters, a second f32 grad). */
    for (size_t i = 0; i < n && st == FERRY_OK; i++) {
        fm_param *p = m->flat[i].p;
        if (p->buffer)
            continue;
        ferry_dtype dt = p->keep_f32 ? FERRY_DTYPE_F32 : cfg->dtype;
        if (!p->keep_f32)
            st = ferry_tensor_to_dtype(p->value, dt, &nv[i * 2]);
        if (st == FERRY_OK)
            st = ferry_tensor_zeros(p->value->shape, p->value->ndim, dt, m->device, &nv[i * 2 + 1]);
    }
    if (st != FERRY_OK) {
        for (size_t i = 0; i < n * 2; i++)
            ferry_tensor_release(nv[i]);
        ferry_host_free(nv);
        free_state(a);
        ferry_host_free(a);
        return st;
    }
    fm_drop_saved_all(m);
    for (size_t i = 0; i < n; i++) {
        fm_param *p = m->flat[i].p;
        if (p->buffer)
            continue;
        p->master = p->value;    /* the f32 weights become the masters */
        p->master_grad = p->grad; /* and their f32 gradient the unscaled one */
        if (!p->keep_f32)
            p->value = nv[i * 2];
        p->grad = nv[i * 2 + 1];
    }
    ferry_host_free(nv);
    fm_set_dtype_all(m, cfg->dtype);
    a->m = m;
    *out = a;
    return FERRY_OK;
}

void ferry_amp_destroy(ferry_amp *a)
{
    if (!a)
        return;
    ferry_module *m = a->m;
    for (size_t i = 0; i < m->nflat; i++) {
        fm_param *p = m->flat[i].p;
        if (p->master != p->value)
            ferry_tensor_release(p->master);
        ferry_tensor_release(p->master_grad);
        p->master = p->master_grad = NULL;
    }
    free_state(a);
    ferry_host_free(a);
}

/* Unscales every gradient into its master, setting found on inf or nan. */
static ferry_status unscale_all(ferry_amp *a, ferry_stream *s)
{
    ferry_module *m = a->m;
    ferry_status st = ferry_tensor_fill(a->found, 0.0, s);
    for (size_t i = 0; i < m->nflat && st == FERRY_OK; i++) {
        fm_param *p = m->flat[i].p;
        if (p->buffer)
            continue;
        fk_ctx c = fm_ctx(p->grad, s);
        st = FK(&c, unscale, p->grad->dtype, ferry_tensor_data(p->grad), ferry_tensor_data(p->master_grad),
                p->grad->numel, ferry_tensor_data(a->scale), ferry_tensor_data(a->found));
    }
    return st;
}

/* The answer to `skipped`: the only host wait, and only when asked. */
static ferry_status read_found(ferry_amp *a, ferry_stream *s, bool *skipped)
{
    float found = 0;
    ferry_status st = ferry_memcpy(&found, ferry_tensor_data(a->found), sizeof found, FERRY_COPY_D2H,
                                   a->found->device, s);
    if (st == FERRY_OK && s)
        st = ferry_stream_synchronize(s);
    if (st == FERRY_OK)
        *skipped = found != 0;
    return st;
}

ferry_status ferry_amp_step(ferry_amp *a, ferry_optim *o, ferry_stream *s, bool *skipped)
{
    if (!a || !o)
        return FERRY_ARG_ERROR("%s is NULL", !a ? "amp" : "optimiser");
    if (fm_optim_module(o) != a->m)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "the optimiser and the amp belong to different modules");
    ferry_module *m = a->m;
    ferry_status st = follow_module(a);
    if (st == FERRY_OK)
        st = unscale_all(a, s);
    /* Skipped on the device when found is set: params, state and step count. */
    if (st == FERRY_OK)
        st = fm_optim_step_(o, s, a->found);
    /* On a skipped step the masters are unchanged, so this rewrites the half
     * weights with the values they already hold. */
    for (size_t i = 0; i < m->nflat && st == FERRY_OK; i++) {
        fm_param *p = m->flat[i].p;
        if (!p->buffer && p->master != p->value)
            st = ferry_tensor_copy(p->value, p->master, s);
    }
    if (st == FERRY_OK) {
        fk_ctx c = fm_ctx(a->scale, s);
        st = FK(&c, amp_update, ferry_tensor_data(a->scale), ferry_tensor_data(a->tracker),
                ferry_tensor_data(a->found), a->cfg.growth_factor, a->cfg.backoff_factor, a->cfg.growth_interval);
    }
    if (st == FERRY_OK && skipped)
        st = read_found(a, s, skipped);
    return st;
}

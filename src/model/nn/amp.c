/* Mixed precision: half weights for compute, f32 master weights for the
 * optimiser, and a dynamic loss scale (torch.cuda.amp.GradScaler's policy). */
#include <math.h>
#include <string.h>

#include "common/error.h"
#include "model/nn/internal.h"
#include "model/ops/common.h"

struct ferry_amp {
    ferry_module *m;
    ferry_amp_config cfg;
    float scale;
    int64_t good_steps;
    ferry_tensor *found; /* f32 [1] on the module's device */
};

ferry_amp_config ferry_amp_config_default(ferry_dtype dt)
{
    ferry_amp_config c = {dt, 65536.0f, 2.0f, 0.5f, 2000};
    return c;
}

float ferry_amp_scale(const ferry_amp *a) { return a ? a->scale : 1.0f; }


ferry_status ferry_amp_create(ferry_module *m, const ferry_amp_config *cfg, ferry_amp **out)
{
    if (!m || !cfg || !out)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "module, config and out must not be NULL (in ferry_amp_create)");
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
    int64_t one = 1;
    ferry_status st = ferry_tensor_zeros(&one, 1, FERRY_DTYPE_F32, m->device, &a->found);
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
        ferry_tensor_release(a->found);
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
    a->cfg = *cfg;
    a->scale = cfg->init_scale;
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
    ferry_tensor_release(a->found);
    ferry_host_free(a);
}

ferry_status ferry_amp_step(ferry_amp *a, ferry_optim *o, ferry_stream *s, bool *skipped)
{
    if (!a || !o)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "amp and optimiser must not be NULL (in ferry_amp_step)");
    if (fm_optim_module(o) != a->m)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "the optimiser and the amp belong to different modules");
    ferry_module *m = a->m;
    if (!ferry_device_eq(a->found->device, m->device)) {
        ferry_status st = fm_tensor_move(&a->found, m->device);
        if (st != FERRY_OK)
            return st;
    }
    ferry_status st = ferry_tensor_fill(a->found, 0.0, s);
    float inv = 1.0f / a->scale;
    for (size_t i = 0; i < m->nflat && st == FERRY_OK; i++) {
        fm_param *p = m->flat[i].p;
        if (p->buffer)
            continue;
        fk_ctx c = fm_ctx(p->grad, s);
        st = FK(&c, unscale, p->grad->dtype, ferry_tensor_data(p->grad), ferry_tensor_data(p->master_grad),
                p->grad->numel, inv, ferry_tensor_data(a->found));
    }
    double found = 0;
    if (st == FERRY_OK) {
        if (s)
            st = ferry_stream_synchronize(s);
        if (st == FERRY_OK)
            st = ferry_tensor_item(a->found, &found);
    }
    if (st != FERRY_OK)
        return st;
    if (found != 0) {
        a->scale *= a->cfg.backoff_factor;
        a->good_steps = 0;
        if (skipped)
            *skipped = true;
        return FERRY_OK;
    }
    st = ferry_optim_step(o, s);
    for (size_t i = 0; i < m->nflat && st == FERRY_OK; i++) {
        fm_param *p = m->flat[i].p;
        if (!p->buffer && p->master != p->value)
            st = ferry_tensor_copy(p->value, p->master, s);
    }
    if (st != FERRY_OK)
        return st;
    if (++a->good_steps >= a->cfg.growth_interval) {
        a->scale *= a->cfg.growth_factor;
        a->good_steps = 0;
    }
    if (skipped)
        *skipped = false;
    return FERRY_OK;
}

/* Checkpoints: a module's parameters and buffers (f32 masters under mixed
 * precision) and an optimiser's state, as one safetensors file. Loading checks
 * everything before it changes anything. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "model/nn/internal.h"
#include "model/ops/common.h"

typedef struct ck_item {
    char name[192];
    ferry_tensor *t; /* the tensor saved or loaded into */
    fm_param *p;     /* its parameter (to refresh the half copy after load), or NULL */
} ck_item;

/* Everything a checkpoint holds, in order. */
static ferry_status collect(ferry_module *m, ferry_optim *o, ck_item **out, size_t *n)
{
    size_t per = 0, cap = m->nflat;
    if (o) {
        if (fm_optim_module(o) != m)
            return ferry_fail(FERRY_ERR_INVALID_ARG, "the optimiser belongs to another module");
        ferry_status st = fm_optim_prepare(o);
        if (st != FERRY_OK)
            return st;
        cap += fm_optim_state_count(o, &per) * per;
    }
    ck_item *it = ferry_host_calloc(cap ? cap : 1, sizeof *it);
    if (!it)
        return FERRY_ERR_NO_MEMORY;
    size_t k = 0;
    for (size_t i = 0; i < m->nflat; i++, k++) {
        snprintf(it[k].name, sizeof it[k].name, "%s", m->flat[i].name);
        it[k].t = fm_param_target(m->flat[i].p);
        it[k].p = m->flat[i].p;
    }
    for (size_t i = 0; o && i < m->nflat; i++)
        for (size_t j = 0; j < per; j++) {
            const char *suffix = NULL;
            ferry_tensor *t = fm_optim_state(o, i, j, &suffix);
            if (!t)
                continue;
            snprintf(it[k].name, sizeof it[k].name, "optim.%.120s.%s", m->flat[i].name, suffix);
            it[k].t = t;
            k++;
        }
    *out = it;
    *n = k;
    return FERRY_OK;
}

ferry_status ferry_checkpoint_save(const char *path, ferry_module *m, ferry_optim *o)
{
    if (!path || !m)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "path and module must not be NULL (in ferry_checkpoint_save)");
    ck_item *it = NULL;
    size_t n = 0;
    ferry_status st = collect(m, o, &it, &n);
    if (st != FERRY_OK)
        return st;
    const char **names = ferry_host_calloc(n + 1, sizeof *names);
    ferry_tensor **ts = ferry_host_calloc(n + 1, sizeof(ferry_tensor *));
    if (!names || !ts)
        st = FERRY_ERR_NO_MEMORY;
    for (size_t i = 0; st == FERRY_OK && i < n; i++) {
        names[i] = it[i].name;
        ts[i] = it[i].t;
    }
    char hp[512] = "", steps[32] = "";
    const char *meta[6] = {"format", "ferry", "optim", hp, "optim.steps", steps};
    if (o) {
        fm_optim_get_hparams(o, hp, sizeof hp);
        snprintf(steps, sizeof steps, "%lld", (long long)ferry_optim_steps(o));
    }
    if (st == FERRY_OK)
        st = ferry_safetensors_save(path, names, ts, n, meta, o ? 3 : 1);
    ferry_host_free(names);
    ferry_host_free(ts);
    ferry_host_free(it);
    return st;
}

ferry_status ferry_checkpoint_load(const char *path, ferry_module *m, ferry_optim *o)
{
    if (!path || !m)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "path and module must not be NULL (in ferry_checkpoint_load)");
    ferry_safetensors *f = NULL;
    ferry_status st = ferry_safetensors_open(path, &f);
    if (st != FERRY_OK)
        return st;
    ck_item *it = NULL;
    size_t n = 0;
    st = collect(m, o, &it, &n);
    /* Check every name, shape and dtype first. */
    for (size_t i = 0; st == FERRY_OK && i < n; i++) {
        ferry_dtype dt;
        int64_t shape[FERRY_MAX_DIMS];
        size_t nd = 0;
        if (ferry_safetensors_info(f, it[i].name, &dt, shape, &nd) != FERRY_OK) {
            st = ferry_fail(FERRY_ERR_FORMAT, "%s: the checkpoint has no tensor \"%s\"", path, it[i].name);
            break;
        }
        char a[128], b[128];
        if (nd != ferry_tensor_ndim(it[i].t) || memcmp(shape, ferry_tensor_shape(it[i].t), nd * sizeof(int64_t)) != 0)
            st = ferry_fail(FERRY_ERR_SHAPE, "%s: tensor \"%s\" has shape %s in the checkpoint but %s in the model", path,
                            it[i].name, fm_dims_str(shape, nd, a, sizeof a), fm_shape_str(it[i].t, b, sizeof b));
        else if (dt != ferry_tensor_dtype(it[i].t))
            st = ferry_fail(FERRY_ERR_DTYPE, "%s: tensor \"%s\" is %s in the checkpoint but %s in the model", path,
                            it[i].name, ferry_dtype_name(dt), ferry_dtype_name(ferry_tensor_dtype(it[i].t)));
    }
    int64_t steps = 0;
    if (st == FERRY_OK && o) {
        const char *s = ferry_safetensors_metadata(f, "optim.steps");
        char *end = NULL;
        steps = s ? strtoll(s, &end, 10) : -1;
        if (!s || *end || steps < 0)
            st = ferry_fail(FERRY_ERR_FORMAT, "%s: no valid optim.steps in the metadata", path);
    }
    /* Then copy. */
    for (size_t i = 0; st == FERRY_OK && i < n; i++) {
        ferry_tensor *src = NULL;
        st = ferry_safetensors_get(f, it[i].name, ferry_cpu(), &src);
        if (st == FERRY_OK)
            st = ferry_tensor_copy(it[i].t, src, NULL);
        if (st == FERRY_OK && it[i].p && it[i].p->value != it[i].t)
            st = ferry_tensor_copy(it[i].p->value, it[i].t, NULL);
        ferry_tensor_release(src);
    }
    if (st == FERRY_OK && o)
        st = fm_optim_set_steps(o, steps);
    ferry_host_free(it);
    ferry_safetensors_close(f);
    return st;
}

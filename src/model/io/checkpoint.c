/* Checkpoints: a module's parameters and buffers (f32 masters under mixed
 * precision), an optimiser's state, the loss scaler, Dropout's draw counters and
 * the loader's state and the metrics' running sums, as one safetensors file
 * written atomically. Loading checks
 * everything before it changes anything. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/atomic_file.h"
#include "common/error.h"
#include "ferry/loader.h"
#include "model/nn/internal.h"
#include "model/ops/common.h"

typedef struct ck_item {
    char name[192];
    ferry_tensor *t; /* the tensor saved or loaded into */
    fm_param *p;     /* its parameter (to refresh the half copy after load), or NULL */
} ck_item;

/* Everything a checkpoint holds as tensors, in order. */
static ferry_status collect(ferry_module *m, ferry_optim *o, ferry_amp *amp, ck_item **out,
                            size_t *n)
{
    size_t per = 0, cap = m->nflat + 2;
    ferry_tensor *scale = NULL, *tracker = NULL;
    if (amp) {
        ferry_module *am = NULL;
        ferry_status st = fm_amp_state(amp, &am, &scale, &tracker);
        if (st != FERRY_OK)
            return st;
        if (am != m)
            return ferry_fail(FERRY_ERR_INVALID_ARG, "the ferry_amp belongs to another module");
    }
    if (o) {
        if (fm_optim_module(o) != m)
            return ferry_fail(FERRY_ERR_INVALID_ARG, "the optimiser belongs to another module");
        ferry_status st = fm_optim_prepare(o);
        if (st != FERRY_OK)
            return st;
        cap += fm_optim_state_count(o, &per) * per;
    }
    ck_item *it = ferry_host_calloc(cap, sizeof *it);
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
    if (amp) {
        snprintf(it[k].name, sizeof it[k].name, "amp.scale");
        it[k++].t = scale;
        snprintf(it[k].name, sizeof it[k].name, "amp.growth_tracker");
        it[k++].t = tracker;
    }
    *out = it;
    *n = k;
    return FERRY_OK;
}

/* Dropout's draw counters, in module order, into out (up to cap); returns how many. */
static size_t dropout_counters(ferry_module *m, uint64_t **out, size_t cap, size_t n)
{
    uint64_t *c = fm_dropout_calls(m);
    if (c) {
        if (n < cap)
            out[n] = c;
        return n + 1;
    }
    for (size_t i = 0; i < m->nchildren; i++)
        n = dropout_counters(m->children[i], out, cap, n);
    return n;
}

#define MAX_DROPOUTS 64

/* "c0,c1,..." for the metadata. */
static ferry_status format_counters(ferry_module *m, char *buf, size_t size)
{
    uint64_t *c[MAX_DROPOUTS];
    size_t n = dropout_counters(m, c, MAX_DROPOUTS, 0), used = 0;
    if (n > MAX_DROPOUTS)
        return ferry_fail(FERRY_ERR_LIMIT, "checkpoint: %zu Dropout layers, at most %d", n, MAX_DROPOUTS);
    buf[0] = '\0';
    for (size_t i = 0; i < n; i++)
        used += (size_t)snprintf(buf + used, size - used, i ? ",%" PRIu64 : "%" PRIu64, *c[i]);
    return FERRY_OK;
}

/* Parses the metadata's counters against the module's Dropout layers. */
static ferry_status parse_counters(const char *path, ferry_module *m, const char *text,
                                   uint64_t *vals, uint64_t **where, size_t *n)
{
    *n = dropout_counters(m, where, MAX_DROPOUTS, 0);
    if (*n > MAX_DROPOUTS)
        return ferry_fail(FERRY_ERR_LIMIT, "checkpoint: %zu Dropout layers, at most %d", *n, MAX_DROPOUTS);
    if (!text) { /* written before the counters were saved: they stay as they are */
        *n = 0;
        return FERRY_OK;
    }
    const char *p = text;
    size_t k = 0;
    while (*p && k <= *n) {
        char *end = NULL;
        if (*p < '0' || *p > '9')
            break;
        uint64_t v = strtoull(p, &end, 10);
        if (k < *n)
            vals[k] = v;
        k++;
        p = *end == ',' ? end + 1 : end;
        if (*end != ',' && *end != '\0')
            break;
    }
    if (*p || k != *n)
        return ferry_fail(FERRY_ERR_FORMAT, "%s: rng.dropout \"%.60s\" does not hold %zu counters "
                          "(one per Dropout layer of the module)", path, text, *n);
    return FERRY_OK;
}

typedef struct ck_meta {
    char hp[512], steps[32], rng[MAX_DROPOUTS * 21 + 1], loader[FERRY_LOADER_STATE_TEXT_MAX];
    char metrics[FM_METRICS_TEXT_MAX];
    const char *kv[14]; /* up to 7 key, value pairs */
    size_t n;
} ck_meta;

static ferry_status build_meta(const ferry_checkpoint *c, ck_meta *meta)
{
    meta->n = 0;
    meta->kv[meta->n * 2] = "format";
    meta->kv[meta->n++ * 2 + 1] = "ferry";
    if (c->optim) {
        fm_optim_get_hparams(c->optim, meta->hp, sizeof meta->hp);
        int64_t steps = ferry_optim_step_count(c->optim);
        if (steps < 0)
            return ferry_fail(FERRY_ERR_BAD_STATE, "checkpoint: cannot read the optimiser's step count (%s)",
                              ferry_last_error());
        snprintf(meta->steps, sizeof meta->steps, "%" PRId64, steps);
        meta->kv[meta->n * 2] = "optim";
        meta->kv[meta->n++ * 2 + 1] = meta->hp;
        meta->kv[meta->n * 2] = "optim.steps";
        meta->kv[meta->n++ * 2 + 1] = meta->steps;
    }
    ferry_status st = format_counters(c->module, meta->rng, sizeof meta->rng);
    if (st != FERRY_OK)
        return st;
    meta->kv[meta->n * 2] = "rng.dropout";
    meta->kv[meta->n++ * 2 + 1] = meta->rng;
    if (c->loader) {
        ferry_loader_state ls;
        if ((st = ferry_loader_state_get(c->loader, &ls)) != FERRY_OK ||
            (st = ferry_loader_state_format(&ls, meta->loader, sizeof meta->loader)) != FERRY_OK)
            return st;
        meta->kv[meta->n * 2] = "loader.state";
        meta->kv[meta->n++ * 2 + 1] = meta->loader;
    }
    if (c->metrics) {
        if ((st = fm_metrics_format(c->metrics, meta->metrics, sizeof meta->metrics)) != FERRY_OK)
            return st;
        meta->kv[meta->n * 2] = "metrics";
        meta->kv[meta->n++ * 2 + 1] = meta->metrics;
    }
    return FERRY_OK;
}

ferry_status ferry_checkpoint_save(const char *path, const ferry_checkpoint *c)
{
    if (!path || !c || !c->module)
        return FERRY_ARG_ERROR("%s is NULL", !path ? "path" : !c ? "checkpoint" : "checkpoint.module");
    ck_item *it = NULL;
    size_t n = 0;
    ferry_status st = collect(c->module, c->optim, c->amp, &it, &n);
    if (st != FERRY_OK)
        return st;
    ck_meta meta;
    st = build_meta(c, &meta);
    const char **names = ferry_host_calloc(n + 1, sizeof *names);
    ferry_tensor **ts = ferry_host_calloc(n + 1, sizeof(ferry_tensor *));
    if (st == FERRY_OK && (!names || !ts))
        st = FERRY_ERR_NO_MEMORY;
    for (size_t i = 0; st == FERRY_OK && i < n; i++) {
        names[i] = it[i].name;
        ts[i] = it[i].t;
    }
    if (st == FERRY_OK)
        st = ferry_safetensors_save(path, names, ts, n, meta.kv, meta.n);
    ferry_host_free(names);
    ferry_host_free(ts);
    ferry_host_free(it);
    return st;
}

/* Every tensor the module (and optimiser, scaler) needs is in f, with its shape and dtype. */
static ferry_status check_tensors(const char *path, ferry_safetensors *f, const ck_item *it, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        ferry_dtype dt;
        int64_t shape[FERRY_MAX_DIMS];
        size_t nd = 0;
        if (ferry_safetensors_info(f, it[i].name, &dt, shape, &nd) != FERRY_OK)
            return ferry_fail(FERRY_ERR_FORMAT, "%s: the checkpoint was saved from another model "
                              "(another kind, such as --model, or size): it has no tensor \"%s\", "
                              "which this model has", path, it[i].name);
        char a[128], b[128];
        if (nd != ferry_tensor_ndim(it[i].t) || memcmp(shape, ferry_tensor_shape(it[i].t), nd * sizeof(int64_t)) != 0)
            return ferry_fail(FERRY_ERR_SHAPE, "%s: tensor \"%s\" has shape %s in the checkpoint but %s "
                              "in the model: it was saved from another model (another size or class "
                              "count)", path,
                              it[i].name, fm_dims_str(shape, nd, a, sizeof a), fm_shape_str(it[i].t, b, sizeof b));
        if (dt != ferry_tensor_dtype(it[i].t))
            return ferry_fail(FERRY_ERR_DTYPE, "%s: tensor \"%s\" is %s in the checkpoint but %s in the model", path,
                              it[i].name, ferry_dtype_name(dt), ferry_dtype_name(ferry_tensor_dtype(it[i].t)));
    }
    return FERRY_OK;
}

/* What the metadata says, checked before anything changes. */
typedef struct ck_read {
    int64_t steps;
    uint64_t drop[MAX_DROPOUTS];
    uint64_t *drop_at[MAX_DROPOUTS];
    size_t ndrop;
    ferry_loader_state ls;
    const char *metrics; /* the metadata's text, checked; NULL: none to restore */
} ck_read;

static ferry_status check_meta(const char *path, ferry_safetensors *f, const ferry_checkpoint *c,
                               ck_read *r)
{
    if (c->optim) {
        const char *s = ferry_safetensors_metadata(f, "optim.steps");
        char *end = NULL;
        r->steps = s ? strtoll(s, &end, 10) : -1;
        if (!s || !*s || *end || r->steps < 0)
            return ferry_fail(FERRY_ERR_FORMAT, "%s: no valid optim.steps in the metadata", path);
        /* Another kind of optimiser would take what state tensors it finds
         * and drop the rest (Adam's moments into plain SGD): refused. The
         * hyper-parameters may change on resume; the kind may not. */
        const char *saved = ferry_safetensors_metadata(f, "optim");
        char mine[512];
        fm_optim_get_hparams(c->optim, mine, sizeof mine);
        size_t ks = saved ? strcspn(saved, " ") : 0, km = strcspn(mine, " ");
        if (saved && (ks != km || memcmp(saved, mine, km) != 0))
            return ferry_fail(FERRY_ERR_INVALID_ARG, "%s: the checkpoint's optimiser is %.*s, this one "
                              "is %.*s", path, (int)ks, saved, (int)km, mine);
    }
    ferry_status st = parse_counters(path, c->module, ferry_safetensors_metadata(f, "rng.dropout"),
                                     r->drop, r->drop_at, &r->ndrop);
    if (st == FERRY_OK && c->metrics) {
        /* A checkpoint saved without them (or by ferry 0.2) still loads: the
         * metrics stay as they are, and the caller is told its figures for
         * the epoch under way count only what follows. */
        r->metrics = ferry_safetensors_metadata(f, "metrics");
        if (!r->metrics)
            ferry_log(FERRY_LOG_WARN, "%s: the checkpoint holds no metrics (saved without "
                      "checkpoint.metrics): the resumed epoch's loss and accuracy count only the "
                      "batches after the resume", path);
        else if ((st = fm_metrics_parse(c->metrics, r->metrics, false)) != FERRY_OK)
            ferry_fail_prefix(st, "%s: ", path);
    }
    if (st != FERRY_OK || !c->loader)
        return st;
    const char *text = ferry_safetensors_metadata(f, "loader.state");
    if (!text)
        return ferry_fail(FERRY_ERR_FORMAT, "%s: the checkpoint has no loader state (it was saved "
                          "without a loader)", path);
    if ((st = ferry_loader_state_parse(text, &r->ls)) != FERRY_OK ||
        (st = ferry_loader_state_check(c->loader, &r->ls)) != FERRY_OK)
        ferry_fail_prefix(st, "%s: ", path);
    return st;
}

/* Copies the checked contents in. */
static ferry_status apply(ferry_safetensors *f, const ferry_checkpoint *c, const ck_item *it,
                          size_t n, const ck_read *r)
{
    ferry_status st = FERRY_OK;
    for (size_t i = 0; st == FERRY_OK && i < n; i++) {
        ferry_tensor *src = NULL;
        st = ferry_safetensors_get(f, it[i].name, ferry_cpu(), &src);
        if (st == FERRY_OK)
            st = ferry_tensor_copy(it[i].t, src, NULL);
        if (st == FERRY_OK && it[i].p && it[i].p->value != it[i].t)
            st = ferry_tensor_copy(it[i].p->value, it[i].t, NULL);
        ferry_tensor_release(src);
    }
    if (st == FERRY_OK && c->optim)
        st = fm_optim_set_steps(c->optim, r->steps);
    for (size_t i = 0; st == FERRY_OK && i < r->ndrop; i++)
        *r->drop_at[i] = r->drop[i];
    if (st == FERRY_OK && c->loader)
        st = ferry_loader_restore(c->loader, &r->ls);
    if (st == FERRY_OK && c->metrics && r->metrics)
        st = fm_metrics_parse(c->metrics, r->metrics, true);
    return st;
}

ferry_status ferry_checkpoint_load(const char *path, const ferry_checkpoint *c)
{
    if (!path || !c || !c->module)
        return FERRY_ARG_ERROR("%s is NULL", !path ? "path" : !c ? "checkpoint" : "checkpoint.module");
    ferry_safetensors *f = NULL;
    ferry_status st = ferry_safetensors_open(path, &f);
    if (st != FERRY_OK)
        return st;
    ferry_atomic_clean_stale(path); /* a resume after a kill mid-save */
    ck_item *it = NULL;
    size_t n = 0;
    ck_read r;
    memset(&r, 0, sizeof r);
    st = collect(c->module, c->optim, c->amp, &it, &n);
    if (st == FERRY_OK)
        st = check_tensors(path, f, it, n);
    if (st == FERRY_OK)
        st = check_meta(path, f, c, &r);
    if (st == FERRY_OK)
        st = apply(f, c, it, n, &r);
    ferry_host_free(it);
    ferry_safetensors_destroy(f);
    return st;
}

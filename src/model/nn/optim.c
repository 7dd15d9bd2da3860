/* Optimisers: SGD (momentum, dampening, Nesterov, weight decay), Adam (L2
 * decay) and AdamW (decoupled decay), with PyTorch's update formulas. State is
 * created for every parameter before the first update, so a step that runs out
 * of memory changes nothing.
 *
 * The step count lives on the device (`taken`): under mixed precision the device
 * alone decides whether a step counts (its inf/nan check), and the kernels read
 * the count from there (SGD's first step; Adam's bias corrections, which one
 * small launch computes from it once per step for the update to read), so no
 * step waits on the host. */
#include <stdio.h>
#include <string.h>

#include "common/error.h"
#include "model/nn/internal.h"
#include "model/ops/common.h"

typedef enum { OPT_SGD, OPT_ADAM, OPT_ADAMW } opt_kind;

struct ferry_optim {
    opt_kind kind;
    ferry_module *m;
    double lr, momentum, dampening, wd, b1, b2, eps;
    bool nesterov;
    ferry_tensor *taken;  /* i64 [1] on the module's device: steps taken */
    ferry_tensor *consts; /* f32 [2] beside taken: Adam's bias corrections for this step */
    size_t nparams;       /* m->nflat when the state was made */
    ferry_tensor **state; /* nparams * 2, NULL where unused */
    uint64_t version;     /* fm_optim_version: bumped when taken is replaced */
};

uint64_t fm_optim_version(const ferry_optim *o) { return o ? o->version : 0; }

/* where: the entry point's __func__, for the argument errors. */
static ferry_status create(ferry_module *m, opt_kind kind, ferry_optim **out, const char *where)
{
    if (!m)
        return ferry_arg_error_(where, "module is NULL");
    if (!out)
        return ferry_arg_error_(where, "out is NULL");
    ferry_optim *o = ferry_host_calloc(1, sizeof *o);
    if (!o)
        return FERRY_ERR_NO_MEMORY;
    int64_t one = 1;
    ferry_status st = ferry_tensor_zeros(&one, 1, FERRY_DTYPE_I64, m->device, &o->taken);
    if (st != FERRY_OK) {
        ferry_host_free(o);
        return st;
    }
    o->kind = kind;
    o->m = m;
    *out = o;
    return FERRY_OK;
}

static ferry_status check_hp(double lr, double wd, const char *what)
{
    if (!(lr >= 0) || !(wd >= 0))
        return ferry_fail(FERRY_ERR_INVALID_ARG, "%s: lr (%g) and weight_decay (%g) must be >= 0", what, lr, wd);
    return FERRY_OK;
}

ferry_status ferry_sgd_create_ex(ferry_module *m, double lr, double momentum, double dampening,
                                 double weight_decay, bool nesterov, ferry_optim **out)
{
    ferry_status st = check_hp(lr, weight_decay, "SGD");
    if (st != FERRY_OK)
        return st;
    if (!(momentum >= 0) || (nesterov && (momentum <= 0 || dampening != 0)))
        return ferry_fail(FERRY_ERR_INVALID_ARG,
                          "SGD: momentum must be >= 0; Nesterov needs momentum > 0 and dampening 0");
    st = create(m, OPT_SGD, out, __func__);
    if (st != FERRY_OK)
        return st;
    (*out)->lr = lr;
    (*out)->momentum = momentum;
    (*out)->dampening = dampening;
    (*out)->wd = weight_decay;
    (*out)->nesterov = nesterov;
    return FERRY_OK;
}

ferry_status ferry_sgd_create(ferry_module *m, double lr, double momentum, double weight_decay,
                              ferry_optim **out)
{
    return ferry_sgd_create_ex(m, lr, momentum, 0.0, weight_decay, false, out);
}

static ferry_status adam_create(ferry_module *m, opt_kind kind, double lr, double b1, double b2, double eps,
                                double wd, ferry_optim **out, const char *where)
{
    ferry_status st = check_hp(lr, wd, kind == OPT_ADAM ? "Adam" : "AdamW");
    if (st != FERRY_OK)
        return st;
    if (!(b1 >= 0 && b1 < 1) || !(b2 >= 0 && b2 < 1) || !(eps >= 0))
        return ferry_fail(FERRY_ERR_INVALID_ARG, "Adam: betas (%g, %g) must be in [0, 1) and eps (%g) >= 0", b1,
                          b2, eps);
    st = create(m, kind, out, where);
    if (st != FERRY_OK)
        return st;
    (*out)->lr = lr;
    (*out)->b1 = b1;
    (*out)->b2 = b2;
    (*out)->eps = eps;
    (*out)->wd = wd;
    return FERRY_OK;
}

ferry_status ferry_adam_create(ferry_module *m, double lr, double beta1, double beta2, double eps,
                               double weight_decay, ferry_optim **out)
{
    return adam_create(m, OPT_ADAM, lr, beta1, beta2, eps, weight_decay, out, __func__);
}

ferry_status ferry_adamw_create(ferry_module *m, double lr, double beta1, double beta2, double eps,
                                double weight_decay, ferry_optim **out)
{
    return adam_create(m, OPT_ADAMW, lr, beta1, beta2, eps, weight_decay, out, __func__);
}

static void free_state(ferry_optim *o)
{
    for (size_t i = 0; i < o->nparams * 2; i++)
        ferry_tensor_release(o->state[i]);
    ferry_host_free(o->state);
    o->state = NULL;
    o->nparams = 0;
}

void ferry_optim_destroy(ferry_optim *o)
{
    if (!o)
        return;
    free_state(o);
    ferry_tensor_release(o->taken);
    ferry_tensor_release(o->consts);
    ferry_host_free(o);
}

void ferry_optim_set_lr(ferry_optim *o, double lr)
{
    if (o && lr >= 0)
        o->lr = lr;
}
double ferry_optim_lr(const ferry_optim *o) { return o ? o->lr : 0.0; }
/* Reads the device's count, so it waits for the device's streams. */
int64_t ferry_optim_step_count(const ferry_optim *o)
{
    if (!o)
        return 0;
    int64_t n = 0;
    return ferry_tensor_copy_to_host(o->taken, &n, sizeof n) == FERRY_OK ? n : -1;
}

static size_t per_param(const ferry_optim *o)
{
    if (o->kind == OPT_SGD)
        return o->momentum != 0 ? 1 : 0;
    return 2;
}

/* Makes (or moves) every state tensor before any update. */
ferry_status fm_optim_prepare(ferry_optim *o)
{
    ferry_module *m = o->m;
    if (o->state && o->nparams != m->nflat)
        return ferry_fail(FERRY_ERR_BAD_STATE,
                          "the module's parameters changed since the optimiser's first step (%zu then, %zu now)",
                          o->nparams, m->nflat);
    if (!o->state) {
        o->state = m->nflat ? ferry_host_calloc(m->nflat, 2 * sizeof(ferry_tensor *)) : NULL;
        if (m->nflat && !o->state)
            return FERRY_ERR_NO_MEMORY;
        o->nparams = m->nflat;
    }
    if (!ferry_device_eq(o->taken->device, m->device)) {
        ferry_status st = fm_tensor_move(&o->taken, m->device);
        if (st != FERRY_OK)
            return st;
    }
    /* Adam's per-step constants: made at the first step, not per step (their
     * values are rewritten each step, so a move need not carry them). */
    if (o->kind != OPT_SGD && (!o->consts || !ferry_device_eq(o->consts->device, o->taken->device))) {
        int64_t two = 2;
        ferry_tensor *t = NULL;
        ferry_status st = ferry_tensor_zeros(&two, 1, FERRY_DTYPE_F32, o->taken->device, &t);
        if (st != FERRY_OK)
            return st;
        ferry_tensor_release(o->consts);
        o->consts = t;
    }
    size_t per = per_param(o);
    for (size_t i = 0; i < o->nparams; i++) {
        fm_param *p = m->flat[i].p;
        if (p->buffer)
            continue;
        ferry_tensor *t = fm_param_target(p);
        if (t->dtype != FERRY_DTYPE_F32)
            return ferry_fail(FERRY_ERR_DTYPE,
                              "%s is %s: optimisers update f32 parameters (use an ferry_amp for half precision)",
                              m->flat[i].name, ferry_dtype_name(t->dtype));
        for (size_t j = 0; j < per; j++) {
            ferry_tensor **s = &o->state[i * 2 + j];
            if (*s && !ferry_device_eq((*s)->device, t->device)) {
                ferry_status st = fm_tensor_move(s, t->device);
                if (st != FERRY_OK)
                    return st;
            }
            if (!*s) {
                ferry_status st = ferry_tensor_zeros(t->shape, t->ndim, FERRY_DTYPE_F32, t->device, s);
                if (st != FERRY_OK)
                    return st;
            }
        }
    }
    return FERRY_OK;
}

ferry_status ferry_optim_step(ferry_optim *o, ferry_stream *s)
{
    if (!o)
        return FERRY_ARG_ERROR("optimiser is NULL");
    return fm_optim_step_(o, s, NULL);
}

static fk_adam adam_hyper(const ferry_optim *o)
{
    return (fk_adam){.lr = (float)o->lr,
                     .b1 = (float)o->b1,
                     .b2 = (float)o->b2,
                     .eps = (float)o->eps,
                     .wd = (float)o->wd,
                     .decoupled = o->kind == OPT_ADAMW};
}

/* One launch for a list of parameter tensors (all on c's device). Adam reads
 * the step's constants (o->consts), SGD the count. */
static ferry_status step_list(const ferry_optim *o, const fk_ctx *c, const fk_plist *l, const int64_t *taken,
                              const float *sk)
{
    if (l->n == 0)
        return FERRY_OK;
    if (o->kind == OPT_SGD) {
        fk_sgd h = {.lr = (float)o->lr,
                    .momentum = (float)o->momentum,
                    .dampening = (float)o->dampening,
                    .wd = (float)o->wd,
                    .nesterov = o->nesterov};
        return FK(c, sgd_multi, l, &h, taken, sk);
    }
    fk_adam h = adam_hyper(o);
    return FK(c, adam_multi, l, &h, ferry_tensor_data(o->consts), sk);
}

/* Queues the update of every parameter (one launch per FK_PLIST_MAX tensors of
 * a device, not one per tensor), then the count's advance: all read the count
 * and the skip flag on the device, in stream order. */
ferry_status fm_optim_step_(ferry_optim *o, ferry_stream *s, const ferry_tensor *skip)
{
    ferry_status st = fm_optim_prepare(o);
    if (st != FERRY_OK)
        return st;
    const int64_t *taken = ferry_tensor_data(o->taken);
    const float *sk = skip ? ferry_tensor_data(skip) : NULL;
    if (o->kind != OPT_SGD) {
        /* Adam's bias corrections once per step, on the device where the count is
         * (a skipped step leaves the count, so the next one recomputes the same). */
        fk_ctx c = fm_ctx(o->taken, s);
        fk_adam h = adam_hyper(o);
        st = FK(&c, adam_consts, &h, taken, ferry_tensor_data(o->consts));
        if (st != FERRY_OK)
            return st;
    }
    fk_plist l;
    l.n = 0;
    fk_ctx lc = {0};
    for (size_t i = 0; i < o->nparams && st == FERRY_OK; i++) {
        fm_param *p = o->m->flat[i].p;
        if (p->buffer)
            continue;
        ferry_tensor *t = fm_param_target(p), *g = fm_param_tgrad(p);
        fk_ctx c = fm_ctx(t, s);
        if (l.n == FK_PLIST_MAX || (l.n > 0 && (c.dev.type != lc.dev.type || c.dev.index != lc.dev.index))) {
            st = step_list(o, &lc, &l, taken, sk);
            l.n = 0;
            if (st != FERRY_OK)
                break;
        }
        if (l.n == 0)
            lc = c;
        l.p[l.n] = ferry_tensor_data(t);
        l.g[l.n] = ferry_tensor_data(g);
        l.s0[l.n] = o->state[i * 2] ? ferry_tensor_data(o->state[i * 2]) : NULL;
        l.s1[l.n] = o->state[i * 2 + 1] ? ferry_tensor_data(o->state[i * 2 + 1]) : NULL;
        l.numel[l.n] = t->numel;
        l.n++;
    }
    if (st == FERRY_OK)
        st = step_list(o, &lc, &l, taken, sk);
    if (st == FERRY_OK) {
        fk_ctx c = fm_ctx(o->taken, s);
        st = FK(&c, step_count, ferry_tensor_data(o->taken), sk);
    }
    return st;
}

size_t fm_optim_state_count(const ferry_optim *o, size_t *per)
{
    *per = per_param(o);
    return o->nparams;
}

ferry_tensor *fm_optim_state(ferry_optim *o, size_t i, size_t j, const char **suffix)
{
    static const char *const sgd_names[] = {"momentum_buffer", ""};
    static const char *const adam_names[] = {"exp_avg", "exp_avg_sq"};
    *suffix = o->kind == OPT_SGD ? sgd_names[j] : adam_names[j];
    if (i >= o->nparams || j >= per_param(o) || !o->state)
        return NULL;
    return o->state[i * 2 + j];
}

ferry_module *fm_optim_module(ferry_optim *o) { return o->m; }

void fm_optim_get_hparams(const ferry_optim *o, char *buf, size_t size)
{
    static const char *const kinds[] = {"SGD", "Adam", "AdamW"};
    _Static_assert(sizeof kinds / sizeof kinds[0] == OPT_ADAMW + 1, "a name per optimiser kind");
    snprintf(buf, size, "%s lr=%.9g momentum=%.9g dampening=%.9g weight_decay=%.9g nesterov=%d betas=%.9g,%.9g eps=%.9g",
             kinds[o->kind], o->lr, o->momentum, o->dampening, o->wd, (int)o->nesterov, o->b1, o->b2, o->eps);
}

/* A new count, ready on return (a creation call); the old one is released only
 * once nothing queued on the device can still read it. */
ferry_status fm_optim_set_steps(ferry_optim *o, int64_t steps)
{
    int64_t one = 1;
    ferry_tensor *n = NULL;
    ferry_status st = ferry_device_synchronize(o->taken->device);
    if (st == FERRY_OK)
        st = ferry_tensor_from_host(&steps, &one, 1, FERRY_DTYPE_I64, o->taken->device, &n);
    if (st != FERRY_OK)
        return st;
    ferry_tensor_release(o->taken);
    o->taken = n;
    o->version++;
    return FERRY_OK;
}

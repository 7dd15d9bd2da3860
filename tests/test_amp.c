/* Mixed precision decided on the device: a sequence of steps with inf and nan
 * gradients gives exactly what the host-side policy gives (params, optimiser
 * state, step count, loss scale), on the CPU and on cuda:0 (real, or simulated
 * with FERRY_SIM_GPUS); ferry_train_step's device-side loss scale matches the
 * loop written out with the host's scale; and, on the simulated GPU, an
 * ferry_amp_step with skipped == NULL returns while its stream is still held
 * back, so it cannot have waited on the host. */
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "device/device_internal.h"
#include "device/sim/sim.h"
#include "harness.h"
#include "ferry/nn.h"
#include "ferry/rng.h"
#include "model/nn/internal.h"

#define MAXP 4   /* parameters of the test layer: weight, bias */
#define MAXN 64  /* elements of the largest */

enum { OPT_SGD, OPT_ADAM, OPT_ADAMW };
static const char *const opt_names[] = {"SGD with momentum", "Adam", "AdamW"};

static ferry_module *layer(ferry_device dev)
{
    ferry_module *l = NULL;
    ASSERT_OK(ferry_linear_create(6, 5, true, &l));
    ASSERT_OK(ferry_module_init(l, 7));
    ASSERT_OK(ferry_module_to(l, dev));
    return l;
}

static ferry_optim *optimiser(ferry_module *m, int kind)
{
    ferry_optim *o = NULL;
    if (kind == OPT_SGD)
        ASSERT_OK(ferry_sgd_create(m, 0.1, 0.9, 0.01, &o));
    else if (kind == OPT_ADAM)
        ASSERT_OK(ferry_adam_create(m, 0.01, 0.9, 0.999, 1e-8, 0.01, &o));
    else
        ASSERT_OK(ferry_adamw_create(m, 0.01, 0.9, 0.999, 1e-8, 0.01, &o));
    return o;
}

/* host -> t (any device), queued on s behind nothing else the test cares about. */
static void put(ferry_tensor *t, const void *host, ferry_stream *s)
{
    ferry_tensor *tmp = NULL;
    ASSERT_OK(ferry_tensor_from_host(host, ferry_tensor_shape(t), ferry_tensor_ndim(t), ferry_tensor_dtype(t),
                                     ferry_tensor_device(t), &tmp));
    ASSERT_OK(ferry_tensor_copy(t, tmp, s));
    /* tmp's last use, before it is released */
    ASSERT_OK(s ? ferry_stream_synchronize(s) : ferry_device_synchronize(ferry_tensor_device(t)));
    ferry_tensor_release(tmp);
}

static void get(const ferry_tensor *t, void *host)
{
    ASSERT_OK(ferry_tensor_copy_to_host(t, host, ferry_tensor_nbytes(t)));
}

static void assert_same_tensor(const ferry_tensor *got, const ferry_tensor *want, const char *what, int step)
{
    static unsigned char a[MAXN * 8], b[MAXN * 8];
    ASSERT(ferry_tensor_nbytes(got) == ferry_tensor_nbytes(want) && ferry_tensor_nbytes(got) <= sizeof a);
    get(got, a);
    get(want, b);
    ASSERT_MSG(memcmp(a, b, ferry_tensor_nbytes(got)) == 0, "step %d: %s differs from the reference", step, what);
}

/* The host-side policy the device must reproduce (GradScaler's). */
typedef struct policy {
    float scale;
    int64_t good, interval, steps;
} policy;

/* One step's gradients: per parameter, unscaled values g, the half values the
 * amp model holds (g * scale, with an inf or nan planted when bad) and the f32
 * unscaled values the reference steps on. Returns whether they are all finite. */
static bool make_grads(ferry_module *m, ferry_rng *r, float scale, int bad, uint16_t h[MAXP][MAXN],
                       float u[MAXP][MAXN])
{
    bool finite = true;
    float inv = 1.0f / scale;
    for (size_t i = 0; i < m->nflat; i++) {
        int64_t n = ferry_tensor_numel(m->flat[i].p->grad);
        ASSERT(n <= MAXN);
        for (int64_t k = 0; k < n; k++) {
            h[i][k] = ferry_f32_to_f16((ferry_rng_uniform(r) * 2.0f - 1.0f) * scale);
            if (bad && i == 0 && k == 3)
                h[i][k] = bad == 1 ? 0x7c00 : 0x7e00; /* +inf, nan */
            u[i][k] = ferry_f16_to_f32(h[i][k]) * inv; /* what unscale computes */
            finite &= isfinite(u[i][k]) != 0;
        }
    }
    return finite;
}

/* Steps an amp model and an f32 reference side by side; the reference steps
 * only when the policy says so. Bad steps: 0 (inf: the very first step, which
 * must leave SGD's first-step rule for the next one) and 3 (nan). */
static void sequence(ferry_device dev, int kind)
{
    ferry_module *m = layer(dev), *ref = layer(dev);
    ferry_optim *o = optimiser(m, kind), *ro = optimiser(ref, kind);
    ferry_amp_config cfg = ferry_amp_config_default(FERRY_DTYPE_F16);
    cfg.init_scale = 1024;
    cfg.growth_interval = 2;
    ferry_amp *amp = NULL;
    ASSERT_OK(ferry_amp_create(m, &cfg, &amp));
    ferry_stream *s = NULL;
    if (dev.type == FERRY_DEVICE_CUDA)
        ASSERT_OK(ferry_stream_create(dev, &s));
    policy pol = {cfg.init_scale, 0, cfg.growth_interval, 0};
    ferry_rng r;
    ferry_rng_init(&r, 11, (uint64_t)kind, 0);
    static uint16_t h[MAXP][MAXN], before[MAXP][MAXN], after[MAXP][MAXN];
    static float u[MAXP][MAXN];
    for (int step = 0; step < 8; step++) {
        int bad = step == 0 ? 1 : step == 3 ? 2 : 0;
        bool finite = make_grads(m, &r, pol.scale, bad, h, u);
        ASSERT(finite == !bad);
        for (size_t i = 0; i < m->nflat; i++) {
            put(m->flat[i].p->grad, h[i], s);
            get(m->flat[i].p->value, before[i]);
        }
        /* Odd steps ask whether the step was skipped (a host wait); even ones do not. */
        bool skipped = !finite;
        ASSERT_OK(ferry_amp_step(amp, o, s, step % 2 ? &skipped : NULL));
        ASSERT_MSG(skipped == !finite, "step %d: skipped %d, the gradients are %s", step, (int)skipped,
                   finite ? "finite" : "not finite");
        if (finite) {
            for (size_t i = 0; i < ref->nflat; i++)
                put(ref->flat[i].p->grad, u[i], NULL);
            ASSERT_OK(ferry_optim_step(ro, NULL));
            pol.steps++;
            if (++pol.good >= pol.interval) {
                pol.scale *= cfg.growth_factor;
                pol.good = 0;
            }
        } else {
            pol.scale *= cfg.backoff_factor;
            pol.good = 0;
        }
        ASSERT_OK(ferry_device_synchronize(dev));
        for (size_t i = 0; i < m->nflat; i++) {
            fm_param *p = m->flat[i].p, *q = ref->flat[i].p;
            assert_same_tensor(p->master, q->value, "a master weight", step);
            /* The half weights: unchanged when skipped, the master's rounding otherwise. */
            get(p->value, after[i]);
            int64_t n = ferry_tensor_numel(p->value);
            static float rv[MAXN];
            get(q->value, rv);
            for (int64_t k = 0; k < n; k++)
                ASSERT_MSG(after[i][k] == (finite ? ferry_f32_to_f16(rv[k]) : before[i][k]),
                           "step %d: half weight %s[%lld] is %#x", step, m->flat[i].name, (long long)k,
                           after[i][k]);
            size_t per = 0;
            fm_optim_state_count(o, &per);
            for (size_t j = 0; j < per; j++) {
                const char *suf = NULL;
                ferry_tensor *a = fm_optim_state(o, i, j, &suf), *b = fm_optim_state(ro, i, j, &suf);
                if (a && b) {
                    assert_same_tensor(a, b, suf, step);
                } else if (a) {
                    /* The reference has not stepped yet; the amp's state exists
                     * (made before its first, skipped, update) and must be untouched. */
                    static float z[MAXN];
                    get(a, z);
                    for (int64_t k = 0; k < ferry_tensor_numel(a); k++)
                        ASSERT_MSG(z[k] == 0.0f, "step %d: %s[%lld] is %g before any update", step, suf,
                                   (long long)k, z[k]);
                }
            }
        }
        ASSERT_MSG(ferry_amp_scale(amp) == pol.scale, "step %d: scale %g, want %g", step, ferry_amp_scale(amp),
                   pol.scale);
        ASSERT_EQ_INT(ferry_optim_step_count(o), pol.steps);
        ASSERT_EQ_INT(ferry_optim_step_count(ro), pol.steps);
    }
    /* 8 steps, 2 skipped: the scale backed off twice (steps 0 and 3) and grew
     * three times (after steps 2, 5 and 7), so the sequence covered both. */
    ASSERT_EQ_INT(pol.steps, 6);
    ASSERT_NEAR(pol.scale, 1024 * 0.5 * 0.5 * 8, 0);
    ferry_stream_destroy(s);
    ferry_amp_destroy(amp);
    ferry_optim_destroy(o);
    ferry_optim_destroy(ro);
    ferry_module_destroy(m);
    ferry_module_destroy(ref);
}

static void sequences_on(ferry_device dev)
{
    for (int kind = OPT_SGD; kind <= OPT_ADAMW; kind++) {
        sequence(dev, kind);
        char name[FERRY_DEVICE_NAME_MAX];
        printf("  %s, %s: matches the host-side policy\n", ferry_device_format(dev, name, sizeof name),
               opt_names[kind]);
    }
}

TEST(amp_skips_on_the_device_like_the_host_policy_cpu) { sequences_on(ferry_cpu()); }

TEST(amp_skips_on_the_device_like_the_host_policy_cuda)
{
    if (ferry_cuda_device_count() < 1)
        SKIP("no CUDA device (FERRY_SIM_GPUS=2 simulates two)");
    sequences_on(ferry_cuda(0));
}

/* ferry_train_step reads the loss scale on the device; the same step written
 * out with the host's scale (ferry_amp_scale, a host read) gives the same bits.
 * init_scale 1000 is not a power of two, so scale / rows rounds. */
static void train_matches(ferry_device dev)
{
    ferry_module *a = NULL, *b = NULL;
    ferry_optim *oa = NULL, *ob = NULL;
    ferry_amp *ampa = NULL, *ampb = NULL;
    ferry_amp_config cfg = ferry_amp_config_default(FERRY_DTYPE_BF16);
    cfg.init_scale = 1000;
    cfg.growth_interval = 3;
    a = layer(dev);
    b = layer(dev);
    oa = optimiser(a, OPT_ADAM);
    ob = optimiser(b, OPT_ADAM);
    ASSERT_OK(ferry_amp_create(a, &cfg, &ampa));
    ASSERT_OK(ferry_amp_create(b, &cfg, &ampb));
    int64_t xs[2] = {12, 6}, n = 12;
    ferry_tensor *x = NULL, *y = NULL;
    ASSERT_OK(ferry_tensor_randn(xs, 2, FERRY_DTYPE_F32, dev, 3, &x));
    int64_t labels[12];
    for (int i = 0; i < 12; i++)
        labels[i] = (i * 7) % 5;
    ASSERT_OK(ferry_tensor_from_host(labels, &n, 1, FERRY_DTYPE_I64, dev, &y));
    ferry_tensor *xh = NULL;
    ASSERT_OK(ferry_tensor_to_dtype(x, FERRY_DTYPE_BF16, &xh));
    for (int step = 0; step < 5; step++) {
        ASSERT_OK(ferry_train_step(a, oa, ampa, x, y, NULL, NULL));
        ferry_tensor *logits = NULL, *dlogits = NULL;
        ASSERT_OK(ferry_module_zero_grad(b, NULL));
        ASSERT_OK(ferry_module_forward(b, xh, NULL, &logits));
        ASSERT_OK(ferry_cross_entropy(logits, y, ferry_amp_scale(ampb), NULL, NULL, &dlogits));
        ASSERT_OK(ferry_module_backward(b, dlogits, NULL, NULL));
        ASSERT_OK(ferry_amp_step(ampb, ob, NULL, NULL));
        ferry_tensor_release(logits);
        ferry_tensor_release(dlogits);
        for (size_t i = 0; i < a->nflat; i++)
            assert_same_tensor(a->flat[i].p->master, b->flat[i].p->master, a->flat[i].name, step);
        ASSERT_MSG(ferry_amp_scale(ampa) == ferry_amp_scale(ampb), "step %d: scales %g and %g", step,
                   ferry_amp_scale(ampa), ferry_amp_scale(ampb));
    }
    ASSERT_NEAR(ferry_amp_scale(ampa), 2000, 0); /* grew once, after 3 good steps */
    ASSERT_EQ_INT(ferry_optim_step_count(oa), 5);
    ferry_tensor_release(x);
    ferry_tensor_release(xh);
    ferry_tensor_release(y);
    ferry_amp_destroy(ampa);
    ferry_amp_destroy(ampb);
    ferry_optim_destroy(oa);
    ferry_optim_destroy(ob);
    ferry_module_destroy(a);
    ferry_module_destroy(b);
}

TEST(train_step_scales_the_loss_on_the_device_cpu) { train_matches(ferry_cpu()); }

TEST(train_step_scales_the_loss_on_the_device_cuda)
{
    if (ferry_cuda_device_count() < 1)
        SKIP("no CUDA device (FERRY_SIM_GPUS=2 simulates two)");
    train_matches(ferry_cuda(0));
}

/* ---- no host sync: a gate holds the stream back while ferry_amp_step runs ---- */

/* The gate is an operation on the simulated stream that blocks its thread until
 * the test opens it. If the call under test waited for the stream, it would
 * wait for the gate; the gate then opens itself after GATE_LIMIT_S and says so,
 * and the test fails instead of hanging. */
#define GATE_LIMIT_S 20

typedef struct gate {
    pthread_mutex_t lock;
    pthread_cond_t cv;
    bool open, ran, timed_out;
} gate;

typedef struct gate_op {
    sim_op op; /* first: the stream frees the op through it */
    gate *g;
} gate_op;

static ferry_status gate_run(sim_op *op)
{
    gate *g = ((gate_op *)op)->g;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += GATE_LIMIT_S;
    pthread_mutex_lock(&g->lock);
    g->ran = true;
    while (!g->open && !g->timed_out)
        if (pthread_cond_timedwait(&g->cv, &g->lock, &until) != 0)
            g->timed_out = true;
    pthread_mutex_unlock(&g->lock);
    return FERRY_OK;
}

static void gate_close(gate *g, ferry_stream *s)
{
    pthread_mutex_lock(&g->lock);
    g->open = g->ran = g->timed_out = false;
    pthread_mutex_unlock(&g->lock);
    gate_op *op = calloc(1, sizeof *op); /* malloc: the simulator frees it with free() */
    ASSERT(op);
    op->op.run = gate_run;
    op->op.what = "test gate";
    op->g = g;
    sim_stream *ss = NULL;
    ferry_device d = ferry_stream_device(s);
    ASSERT_OK(ferry_sim_launch_stream(d.index, ferry_stream_native(s), "test gate", &ss));
    ASSERT_OK(ferry_sim_enqueue(ss, &op->op, NULL));
}

/* Opens the gate; true when it was still closed, i.e. nobody waited it out. */
static bool gate_open(gate *g)
{
    pthread_mutex_lock(&g->lock);
    bool held = !g->timed_out;
    g->open = true;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->lock);
    return held;
}

/* Reads device memory through a copy on another stream: it sees what the
 * gated stream has (not) done yet, without waiting for it. */
static void peek(const ferry_tensor *t, ferry_stream *side, void *host)
{
    ASSERT_OK(ferry_memcpy(host, ferry_tensor_data(t), ferry_tensor_nbytes(t), FERRY_COPY_D2H, ferry_tensor_device(t),
                           side));
    ASSERT_OK(ferry_stream_synchronize(side));
}

/* One gated step: returns with the stream still held, nothing changed yet;
 * after the gate opens the step's effect is there. */
static void gated_step(ferry_amp *amp, ferry_optim *o, ferry_module *m, ferry_stream *s, ferry_stream *side,
                       gate *g, bool bad, float scale_before)
{
    ferry_tensor *master = m->flat[0].p->master, *scale = NULL;
    ASSERT_OK(fm_amp_loss_scale(amp, &scale));
    static uint16_t h[MAXN];
    int64_t n = ferry_tensor_numel(master);
    for (int64_t k = 0; k < n; k++)
        h[k] = ferry_f32_to_f16(0.5f * scale_before);
    if (bad)
        h[1] = 0x7c00;
    put(m->flat[0].p->grad, h, s);
    float w0[MAXN], w1[MAXN], sc = 0;
    peek(master, side, w0);
    int64_t steps0 = ferry_optim_step_count(o);

    gate_close(g, s);
    ASSERT_OK(ferry_amp_step(amp, o, s, NULL));
    /* Back on the host with the stream held: the step is queued, not run. */
    ASSERT_MSG(!ferry_stream_query(s), "the stream finished while the gate was closed");
    peek(master, side, w1);
    ASSERT_MSG(memcmp(w0, w1, (size_t)n * sizeof(float)) == 0, "the update ran before the gate opened");
    peek(scale, side, &sc);
    ASSERT_NEAR(sc, scale_before, 0);
    ASSERT_MSG(gate_open(g), "ferry_amp_step waited for its stream (the gate opened after %d s)", GATE_LIMIT_S);

    ASSERT_OK(ferry_stream_synchronize(s));
    peek(master, side, w1);
    peek(scale, side, &sc);
    if (bad) {
        ASSERT_MSG(memcmp(w0, w1, (size_t)n * sizeof(float)) == 0, "a skipped step changed the weights");
        ASSERT_NEAR(sc, scale_before * 0.5f, 0);
        ASSERT_EQ_INT(ferry_optim_step_count(o), steps0);
    } else {
        for (int64_t k = 0; k < n; k++)
            ASSERT_MSG(w1[k] != w0[k], "weight %lld did not move", (long long)k);
        ASSERT_NEAR(sc, scale_before, 0);
        ASSERT_EQ_INT(ferry_optim_step_count(o), steps0 + 1);
    }
}

TEST(amp_step_without_skipped_never_waits_for_the_stream)
{
    if (!ferry_cuda_is_simulated())
        SKIP("needs the simulated GPU's stream hooks (set FERRY_SIM_GPUS)");
    ferry_device dev = ferry_cuda(0);
    ferry_module *m = layer(dev);
    ferry_optim *o = optimiser(m, OPT_ADAM);
    ferry_amp_config cfg = ferry_amp_config_default(FERRY_DTYPE_F16);
    cfg.init_scale = 256;
    ferry_amp *amp = NULL;
    ASSERT_OK(ferry_amp_create(m, &cfg, &amp));
    ferry_stream *s = NULL, *side = NULL;
    ASSERT_OK(ferry_stream_create(dev, &s));
    ASSERT_OK(ferry_stream_create(dev, &side));
    /* A first step makes the optimiser's state (creation calls, which do wait). */
    ASSERT_OK(ferry_amp_step(amp, o, s, NULL));
    ASSERT_OK(ferry_stream_synchronize(s));
    ASSERT_EQ_INT(ferry_optim_step_count(o), 1);
    static gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, false, false};
    gated_step(amp, o, m, s, side, &g, false, 256);
    gated_step(amp, o, m, s, side, &g, true, 256);
    gated_step(amp, o, m, s, side, &g, false, 128);
    ASSERT_EQ_INT(ferry_optim_step_count(o), 3);
    ferry_stream_destroy(side);
    ferry_stream_destroy(s);
    ferry_amp_destroy(amp);
    ferry_optim_destroy(o);
    ferry_module_destroy(m);
}

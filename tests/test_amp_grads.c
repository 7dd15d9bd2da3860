/* What keeping bf16 gradients under AMP costs (issue 41, item 4): one step's
 * parameter gradients of samples/common.h's MLP and CNN (width 1, batch 256 of
 * randn 1x28x28 images), from the same f32 weights, four ways:
 *   (a) the plain f32 model: the reference;
 *   (b) AMP bf16 as ferry keeps them: bf16 gradients of the scaled loss,
 *       unscaled by ferry_amp_step into the f32 masters' gradients;
 *   (c) (a) rounded once to bf16: the least any bf16 storage costs;
 *   (d) the same bf16 activations and output gradients as (b), with the
 *       parameter gradient summed on the host in double and never rounded:
 *       what f32 gradients under AMP would give.
 * Printed per tensor and overall as ||g - g_ref|| / ||g_ref||. (d) against (b)
 * says whether AMP's gradient error comes from the bf16 activations (then f32
 * gradient storage buys little) or from storing the gradient in bf16. The
 * figures and the conclusion are in docs/GRAPH.md. Then a short training run,
 * f32 against AMP. CPU always; the GPU (or the simulated one) when there. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ferry/dataset.h"
#include "ferry/device.h"
#include "ferry/nn.h"
#include "ferry/ops.h"
#include "ferry/tensor.h"
#include "harness.h"
#include "model/nn/internal.h"

#define BATCH 256
#define MAXCH 12
#define MAXP 8

/* The model and its children, kept to run them one by one for (d). */
typedef struct net {
    ferry_module *seq;
    ferry_module *ch[MAXCH];
    char kind[MAXCH]; /* 'c' conv, 'l' linear, '-' no parameters */
    size_t n;
} net;

static void add_child(net *t, ferry_module *m, char kind)
{
    ASSERT(t->n < MAXCH);
    ASSERT_OK(ferry_sequential_add(t->seq, m));
    t->kind[t->n] = kind;
    t->ch[t->n++] = m;
}

/* The child is made before it is read: C leaves the order in which a call's
 * arguments are evaluated open. */
#define ADD(t, make, kind)                                                     \
    do {                                                                       \
        ASSERT_OK(make);                                                       \
        add_child(t, m, kind);                                                 \
    } while (0)

/* tests/harness_step.h's ft_step_model at width 1, its children kept. */
static net build(bool cnn, ferry_device dev)
{
    net t = {0};
    ferry_module *m = NULL;
    ASSERT_OK(ferry_sequential_create(&t.seq));
    if (cnn) {
        ADD(&t, ferry_conv2d_create(1, 8, 3, 1, 1, true, &m), 'c');
        ADD(&t, ferry_relu_create(&m), '-');
        ADD(&t, ferry_maxpool2d_create(2, 0, 0, &m), '-');
        ADD(&t, ferry_conv2d_create(8, 16, 3, 1, 1, true, &m), 'c');
        ADD(&t, ferry_relu_create(&m), '-');
        ADD(&t, ferry_maxpool2d_create(2, 0, 0, &m), '-');
        ADD(&t, ferry_flatten_create(&m), '-');
        ADD(&t, ferry_linear_create(16 * 7 * 7, 32, true, &m), 'l');
        ADD(&t, ferry_relu_create(&m), '-');
        ADD(&t, ferry_linear_create(32, 10, true, &m), 'l');
    } else {
        ADD(&t, ferry_flatten_create(&m), '-');
        ADD(&t, ferry_linear_create(784, 64, true, &m), 'l');
        ADD(&t, ferry_relu_create(&m), '-');
        ADD(&t, ferry_linear_create(64, 32, true, &m), 'l');
        ADD(&t, ferry_relu_create(&m), '-');
        ADD(&t, ferry_linear_create(32, 10, true, &m), 'l');
    }
    ASSERT_OK(ferry_module_init(t.seq, 5));
    ASSERT_OK(ferry_module_to(t.seq, dev));
    return t;
}

/* A tensor's values as f32 on the host (caller frees). */
static float *host_f32(ferry_tensor *t)
{
    ferry_tensor *c = NULL;
    ASSERT_OK(ferry_tensor_to_dtype(t, FERRY_DTYPE_F32, &c));
    size_t n = (size_t)ferry_tensor_numel(c);
    float *h = malloc(n * sizeof *h + 1);
    ASSERT(h);
    ASSERT_OK(ferry_tensor_copy_to_host(c, h, n * sizeof *h));
    ferry_tensor_release(c);
    return h;
}

/* Round to nearest even at bf16's 8 significant bits, as the kernels do. */
static float round_bf16(float v)
{
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    memcpy(&v, &u, sizeof v);
    return v;
}

/* One gradient set: per parameter tensor, numel and host values. */
typedef struct grads {
    size_t np;
    size_t n[MAXP];
    float *g[MAXP];
} grads;

static void grads_free(grads *g)
{
    for (size_t i = 0; i < g->np; i++)
        free(g->g[i]);
}

/* ||g - h|| / ||ref|| of tensor i, or overall when i == np; in double. */
static double rel_diff(const grads *g, const grads *h, const grads *ref, size_t i)
{
    double d2 = 0, r2 = 0;
    for (size_t p = i == ref->np ? 0 : i; p < (i == ref->np ? ref->np : i + 1); p++)
        for (size_t k = 0; k < ref->n[p]; k++) {
            double d = (double)g->g[p][k] - h->g[p][k];
            d2 += d * d;
            r2 += (double)ref->g[p][k] * ref->g[p][k];
        }
    return r2 > 0 ? sqrt(d2 / r2) : 0;
}

static double rel_err(const grads *g, const grads *ref, size_t i)
{
    return rel_diff(g, ref, ref, i);
}

static ferry_tensor *images(ferry_device dev)
{
    int64_t xs[4] = {BATCH, 1, 28, 28};
    ferry_tensor *x = NULL;
    ASSERT_OK(ferry_tensor_randn(xs, 4, FERRY_DTYPE_F32, dev, 11, &x));
    return x;
}

static ferry_tensor *labels(ferry_device dev)
{
    int64_t y[BATCH], n = BATCH;
    for (int64_t i = 0; i < n; i++)
        y[i] = (i * 7 + 3) % 10;
    ferry_tensor *t = NULL;
    ASSERT_OK(ferry_tensor_from_host(y, &n, 1, FERRY_DTYPE_I64, dev, &t));
    return t;
}

/* (a): the f32 model's gradients of the mean cross-entropy. */
static grads grads_f32(bool cnn, ferry_device dev, ferry_tensor *x, ferry_tensor *y, ferry_stream *s)
{
    net t = build(cnn, dev);
    ferry_tensor *logits = NULL, *dl = NULL;
    ASSERT_OK(ferry_module_zero_grad(t.seq, s));
    ASSERT_OK(ferry_module_forward(t.seq, x, s, &logits));
    ASSERT_OK(ferry_cross_entropy(logits, y, 1.0f, NULL, s, &dl));
    ASSERT_OK(ferry_module_backward(t.seq, dl, s, NULL));
    ferry_tensor_release(logits);
    ferry_tensor_release(dl);
    grads g = {0};
    for (size_t i = 0; i < ferry_module_param_count(t.seq); i++) {
        ferry_param p;
        ASSERT_OK(ferry_module_param(t.seq, i, &p));
        if (p.buffer)
            continue;
        ASSERT(g.np < MAXP);
        g.n[g.np] = (size_t)ferry_tensor_numel(p.grad);
        g.g[g.np++] = host_f32(p.grad);
    }
    ferry_module_destroy(t.seq);
    return g;
}

/* (c): the reference rounded once to bf16. */
static grads grads_rounded(const grads *ref)
{
    grads g = *ref;
    for (size_t i = 0; i < g.np; i++) {
        g.g[i] = malloc(g.n[i] * sizeof(float) + 1);
        ASSERT(g.g[i]);
        for (size_t k = 0; k < g.n[i]; k++)
            g.g[i][k] = round_bf16(ref->g[i][k]);
    }
    return g;
}

/* dW += dy^T x of a Linear for batch rows, in double: w [o, i], b [o]. */
static void linear_grad(const float *x, const float *dy, int64_t rows, int64_t in, int64_t out, double inv,
                        float *w, float *b)
{
    for (int64_t o = 0; o < out; o++) {
        double bs = 0;
        for (int64_t r = 0; r < rows; r++)
            bs += dy[r * out + o];
        b[o] = (float)(bs * inv);
        for (int64_t i = 0; i < in; i++) {
            double acc = 0;
            for (int64_t r = 0; r < rows; r++)
                acc += (double)dy[r * out + o] * x[r * in + i];
            w[o * in + i] = (float)(acc * inv);
        }
    }
}

/* A 3x3, stride 1, padding 1 convolution's dW and db in double from its input
 * x [n, ci, h, w] and dy [n, co, h, w]. */
static void conv_grad(const float *x, const float *dy, const int64_t *xs, int64_t co, double inv, float *w,
                      float *b)
{
    int64_t n = xs[0], ci = xs[1], h = xs[2], wd = xs[3], hw = h * wd;
    for (int64_t o = 0; o < co; o++) {
        double bs = 0;
        for (int64_t s = 0; s < n; s++)
            for (int64_t p = 0; p < hw; p++)
                bs += dy[(s * co + o) * hw + p];
        b[o] = (float)(bs * inv);
        for (int64_t c = 0; c < ci; c++)
            for (int64_t kh = 0; kh < 3; kh++)
                for (int64_t kw = 0; kw < 3; kw++) {
                    double acc = 0;
                    for (int64_t s = 0; s < n; s++) {
                        const float *dp = dy + (s * co + o) * hw, *xp = x + (s * ci + c) * hw;
                        for (int64_t r = 0; r < h; r++) {
                            int64_t xr = r + kh - 1;
                            if (xr < 0 || xr >= h)
                                continue;
                            for (int64_t q = 0; q < wd; q++) {
                                int64_t xq = q + kw - 1;
                                if (xq >= 0 && xq < wd)
                                    acc += (double)dp[r * wd + q] * xp[xr * wd + xq];
                            }
                        }
                    }
                    w[((o * ci + c) * 3 + kh) * 3 + kw] = (float)(acc * inv);
                }
    }
}

/* (d): the AMP model run child by child, keeping each parameter layer's bf16
 * input and output gradient; its gradients summed from them on the host. */
static grads grads_f32_accumulated(net *t, ferry_tensor *xh, ferry_tensor *y, float scale, ferry_stream *s)
{
    ferry_tensor *in[MAXCH] = {0}, *dys[MAXCH] = {0}, *cur = ferry_tensor_retain(xh), *dl = NULL;
    for (size_t i = 0; i < t->n; i++) {
        ferry_tensor *out = NULL;
        ASSERT_OK(ferry_module_forward(t->ch[i], cur, s, &out));
        in[i] = cur;
        cur = out;
    }
    ASSERT_OK(ferry_cross_entropy(cur, y, scale, NULL, s, &dl));
    ferry_tensor_release(cur);
    for (size_t i = t->n; i-- > 0;) {
        ferry_tensor *dx = NULL;
        dys[i] = dl;
        ASSERT_OK(ferry_module_backward(t->ch[i], dl, s, i ? &dx : NULL));
        dl = dx;
    }
    grads g = {0};
    for (size_t i = 0; i < t->n; i++) {
        if (t->kind[i] != '-') {
            ferry_param pw, pb;
            ASSERT_OK(ferry_module_param(t->ch[i], 0, &pw));
            ASSERT_OK(ferry_module_param(t->ch[i], 1, &pb));
            const int64_t *ws = ferry_tensor_shape(pw.value), *xs = ferry_tensor_shape(in[i]);
            float *x = host_f32(in[i]), *dy = host_f32(dys[i]);
            ASSERT(g.np + 2 <= MAXP);
            size_t nw = (size_t)ferry_tensor_numel(pw.value), nb = (size_t)ws[0];
            float *w = malloc(nw * sizeof *w), *b = malloc(nb * sizeof *b);
            ASSERT(w && b);
            if (t->kind[i] == 'l')
                linear_grad(x, dy, xs[0], ws[1], ws[0], 1.0 / scale, w, b);
            else
                conv_grad(x, dy, xs, ws[0], 1.0 / scale, w, b);
            g.n[g.np] = nw;
            g.g[g.np++] = w;
            g.n[g.np] = nb;
            g.g[g.np++] = b;
            free(x);
            free(dy);
        }
        ferry_tensor_release(in[i]);
        ferry_tensor_release(dys[i]);
    }
    return g;
}

typedef struct errs {
    double b, c, d, bd; /* bd: ||(b) - (d)|| / ||(a)||, what bf16 storage adds */
    double bd_max;      /* the largest bd of one tensor */
} errs;

/* (b) and (d) from one AMP model; (b) also checked against the bf16 gradients
 * unscaled on the host (the scale is a power of two: exact). */
static errs measure(bool cnn, ferry_device dev, const char *where)
{
    ferry_stream *s = NULL;
    ASSERT_OK(ferry_stream_create(dev, &s));
    ferry_tensor *x = images(dev), *y = labels(dev), *xh = NULL;
    grads ref = grads_f32(cnn, dev, x, y, s);
    grads rnd = grads_rounded(&ref);

    net t = build(cnn, dev);
    ferry_amp_config ac = ferry_amp_config_default(FERRY_DTYPE_BF16);
    ferry_amp *amp = NULL;
    ferry_optim *sgd = NULL;
    ASSERT_OK(ferry_amp_create(t.seq, &ac, &amp));
    ASSERT_OK(ferry_sgd_create(t.seq, 0.0, 0.0, 0.0, &sgd)); /* lr 0: the step only unscales */
    float scale = ferry_amp_scale(amp);
    ASSERT(scale == 65536.0f);
    ASSERT_OK(ferry_tensor_to_dtype(x, FERRY_DTYPE_BF16, &xh));

    ferry_tensor *logits = NULL, *dl = NULL;
    ASSERT_OK(ferry_module_zero_grad(t.seq, s));
    ASSERT_OK(ferry_module_forward(t.seq, xh, s, &logits));
    ASSERT_OK(ferry_cross_entropy(logits, y, scale, NULL, s, &dl));
    ASSERT_OK(ferry_module_backward(t.seq, dl, s, NULL));
    ferry_tensor_release(logits);
    ferry_tensor_release(dl);
    bool skipped = true;
    ASSERT_OK(ferry_amp_step(amp, sgd, s, &skipped));
    ASSERT(!skipped);
    grads amp_g = {0};
    ASSERT_EQ_SIZE(t.seq->nflat, ref.np);
    for (size_t i = 0; i < ref.np; i++) {
        fm_param *p = t.seq->flat[i].p;
        ASSERT(p->master_grad && ferry_tensor_dtype(p->master_grad) == FERRY_DTYPE_F32);
        ASSERT(ferry_tensor_dtype(p->grad) == FERRY_DTYPE_BF16);
        amp_g.n[i] = ref.n[i];
        amp_g.g[i] = host_f32(p->master_grad);
        float *kept = host_f32(p->grad);
        for (size_t k = 0; k < ref.n[i]; k++)
            ASSERT(amp_g.g[i][k] == kept[k] / scale);
        free(kept);
    }
    amp_g.np = ref.np;

    ASSERT_OK(ferry_module_zero_grad(t.seq, s));
    grads acc = grads_f32_accumulated(&t, xh, y, scale, s);
    ASSERT_EQ_SIZE(acc.np, ref.np);

    printf("  %s %s, batch %d: ||g - g_f32|| / ||g_f32||\n", where, cnn ? "CNN" : "MLP", BATCH);
    printf("    %-10s %8s %12s %12s %12s %12s\n", "tensor", "numel", "(b) AMP", "(c) round", "(d) f32 acc",
           "(b) - (d)");
    for (size_t i = 0; i <= ref.np; i++) {
        size_t numel = 0;
        for (size_t k = i < ref.np ? i : 0; k < (i < ref.np ? i + 1 : ref.np); k++)
            numel += ref.n[k];
        printf("    %-10s %8zu %12.3e %12.3e %12.3e %12.3e\n", i < ref.np ? t.seq->flat[i].name : "overall",
               numel, rel_err(&amp_g, &ref, i), rel_err(&rnd, &ref, i), rel_err(&acc, &ref, i),
               rel_diff(&amp_g, &acc, &ref, i));
    }
    errs e = {rel_err(&amp_g, &ref, ref.np), rel_err(&rnd, &ref, ref.np), rel_err(&acc, &ref, ref.np),
              rel_diff(&amp_g, &acc, &ref, ref.np), 0};
    for (size_t i = 0; i < ref.np; i++)
        e.bd_max = fmax(e.bd_max, rel_diff(&amp_g, &acc, &ref, i));
    grads_free(&ref);
    grads_free(&rnd);
    grads_free(&amp_g);
    grads_free(&acc);
    ferry_tensor_release(xh);
    ferry_tensor_release(x);
    ferry_tensor_release(y);
    ferry_optim_destroy(sgd);
    ferry_amp_destroy(amp);
    ferry_module_destroy(t.seq);
    ferry_stream_destroy(s);
    return e;
}

/* Bounds, from the figures in docs/GRAPH.md (CPU and simulated GPU, both
 * models): one bf16 rounding (c) is 1.66e-3 overall (a quarter of bf16's
 * 2^-8 spacing, as expected); AMP's error (b) is about 5e-2 and (d) the same
 * to 1e-4: the bf16 activations dominate. What storing the gradient in bf16
 * adds, (b) - (d), is one rounding overall (1.0-1.3x (c)) and at most 3.7x (c)
 * in a tensor (the CPU's convolution adds its weight gradient into the bf16
 * gradient once per chunk of images: 15 and 29 chunks at batch 256). The
 * bounds leave about 3x: (b) and (d) under 0.15; (b) - (d) under 2x (c)
 * overall, under 8x (c) in every tensor (a gradient summed in bf16 would go
 * past), and under a fifth of (d) (0.035-0.044 seen): if it grew to that, f32
 * gradients would start to matter. */
static void check(errs e)
{
    ASSERT_MSG(e.c > 1e-3 && e.c < 2.5e-3, "one bf16 rounding: %.3e", e.c);
    ASSERT_MSG(e.b > e.c && e.b < 0.15, "AMP's gradient error %.3e", e.b);
    ASSERT_MSG(e.d < 0.15, "AMP with f32 accumulation: %.3e", e.d);
    ASSERT_MSG(e.bd < 2 * e.c, "bf16 gradient storage adds %.3e (one rounding is %.3e)", e.bd, e.c);
    ASSERT_MSG(e.bd_max < 8 * e.c, "bf16 gradient storage adds %.3e in one tensor", e.bd_max);
    ASSERT_MSG(e.bd < 0.2 * e.d, "storage %.3e against activations %.3e", e.bd, e.d);
}

TEST(mlp_cpu)
{
    check(measure(false, ferry_cpu(), "CPU"));
}

TEST(cnn_cpu)
{
    check(measure(true, ferry_cpu(), "CPU"));
}

TEST(mlp_gpu)
{
    ft_require_cuda();
    check(measure(false, ferry_cuda(0), "GPU"));
}

TEST(cnn_gpu)
{
    ft_require_cuda();
    check(measure(true, ferry_cuda(0), "GPU"));
}

/* ---- a short training run, f32 against AMP ----
 * Fashion-MNIST's test set (10,000 images: the smaller file) where the
 * machine has it: 32 batches of 64 to train on (200 steps, about 6 epochs),
 * the next 4 held out. Normalised with the training set's mean and std. */
#define TB 64
#define TNB 32
#define THELD 4
#define FMNIST "/usr/share/datasets/fashion-mnist/"

typedef struct tdata {
    ferry_tensor *x[TNB + THELD], *y[TNB + THELD];
} tdata;

static tdata fmnist_data(ferry_device dev)
{
    ferry_dataset *ds = NULL;
    FILE *f = fopen(FMNIST "t10k-images-idx3-ubyte.gz", "rb");
    if (!f)
        SKIP("no Fashion-MNIST at " FMNIST);
    fclose(f);
    ASSERT_OK(ferry_dataset_idx(FMNIST "t10k-images-idx3-ubyte.gz", FMNIST "t10k-labels-idx1-ubyte.gz", NULL,
                                &ds));
    ASSERT(ferry_dataset_len(ds) >= (TNB + THELD) * TB);
    ASSERT_EQ_SIZE(ferry_dataset_sample_bytes(ds), 784);
    tdata d;
    int64_t xs[4] = {TB, 1, 28, 28}, n = TB;
    static float x[TB * 784];
    for (int b = 0; b < TNB + THELD; b++) {
        int64_t y[TB];
        for (int64_t r = 0; r < TB; r++) {
            uint8_t px[784];
            ASSERT_OK(ferry_dataset_get(ds, (size_t)(b * TB + r), px, sizeof px, NULL, &y[r]));
            for (int i = 0; i < 784; i++)
                x[r * 784 + i] = (px[i] / 255.0f - 0.2860f) / 0.3530f;
        }
        ASSERT_OK(ferry_tensor_from_host(x, xs, 4, FERRY_DTYPE_F32, dev, &d.x[b]));
        ASSERT_OK(ferry_tensor_from_host(y, &n, 1, FERRY_DTYPE_I64, dev, &d.y[b]));
    }
    ferry_dataset_release(ds);
    return d;
}

typedef struct losses {
    double train; /* mean over the last 20 steps */
    double held;  /* on the held-out batches after training */
} losses;

/* `steps` SGD steps from the same initial weights, f32 or AMP bf16. */
static losses train_loss(const tdata *d, ferry_device dev, bool amp_on, int steps)
{
    net t = build(false, dev);
    ferry_optim *o = NULL;
    ferry_amp *amp = NULL;
    ferry_metrics *met = NULL;
    ferry_stream *s = NULL;
    ASSERT_OK(ferry_sgd_create(t.seq, 0.02, 0.9, 0.0, &o));
    if (amp_on) {
        ferry_amp_config ac = ferry_amp_config_default(FERRY_DTYPE_BF16);
        ASSERT_OK(ferry_amp_create(t.seq, &ac, &amp));
    }
    ASSERT_OK(ferry_metrics_create(dev, &met));
    ASSERT_OK(ferry_stream_create(dev, &s));
    for (int i = 0; i < steps; i++) {
        if (i == steps - 20)
            ASSERT_OK(ferry_metrics_reset(met, s));
        ASSERT_OK(ferry_train_step(t.seq, o, amp, d->x[i % TNB], d->y[i % TNB], met, s));
    }
    losses l = {0};
    double acc = 0;
    int64_t count = 0;
    ASSERT_OK(ferry_metrics_get(met, &l.train, &acc, &count));
    ASSERT_EQ_INT(count, 20 * TB);
    ASSERT_OK(ferry_metrics_reset(met, s));
    for (int b = TNB; b < TNB + THELD; b++)
        ASSERT_OK(ferry_eval_step(t.seq, d->x[b], d->y[b], met, s));
    ASSERT_OK(ferry_metrics_get(met, &l.held, &acc, &count));
    ASSERT_EQ_INT(count, THELD * TB);
    ferry_stream_destroy(s);
    ferry_metrics_destroy(met);
    ferry_amp_destroy(amp);
    ferry_optim_destroy(o);
    ferry_module_destroy(t.seq);
    return l;
}

/* Both learn (from ln 10 = 2.30) and end within 0.05 + 10 % of each other,
 * on the training batches and on the held-out ones. */
static void train_compare(ferry_device dev, const char *where)
{
    tdata d = fmnist_data(dev);
    losses f = train_loss(&d, dev, false, 200), h = train_loss(&d, dev, true, 200);
    printf("  %s MLP, 200 SGD steps of 64: loss (last 20 steps / held out) f32 %.4f / %.4f, AMP bf16 %.4f / %.4f\n",
           where, f.train, f.held, h.train, h.held);
    for (int b = 0; b < TNB + THELD; b++) {
        ferry_tensor_release(d.x[b]);
        ferry_tensor_release(d.y[b]);
    }
    ASSERT_MSG(f.held < 2.0 && h.held < 2.0, "did not learn: f32 %.4f, AMP %.4f", f.held, h.held);
    ASSERT_MSG(fabs(f.train - h.train) < 0.05 + 0.1 * f.train, "f32 %.4f against AMP %.4f", f.train, h.train);
    ASSERT_MSG(fabs(f.held - h.held) < 0.05 + 0.1 * f.held, "f32 %.4f against AMP %.4f", f.held, h.held);
}

TEST(train_cpu)
{
    train_compare(ferry_cpu(), "CPU");
}

/* The simulated GPU takes 20 s for the two runs; the CPU's is the same step. */
TEST(train_gpu)
{
    ft_require_cuda();
    if (ferry_cuda_is_simulated())
        SKIP("20 s on the simulated GPU; train_cpu runs the same steps");
    train_compare(ferry_cuda(0), "GPU");
}

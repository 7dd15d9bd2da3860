/* The Embedding layer: against PyTorch (tests/ref/embedding.safetensors, written
 * by tests/ref/make_embedding_ref.py with torch 1.13) in f32, f16 and bf16, on
 * the CPU and on cuda:0 when there is one (real or FERRY_SIM_GPUS); the GPU's
 * gradient against the CPU's bit for bit with many repeated indices (its sort
 * keeps position order) and the same bits on a second run; out-of-range indices
 * as an error naming the index; the makemore MLP's loss and gradients; and
 * mixed-precision training steps. */
#include <stdlib.h>

#include "harness.h"
#include "ferry/nn.h"

#define REF_PATH FERRY_SOURCE_DIR "/tests/ref/embedding.safetensors"

static const ferry_dtype all_dtypes[3] = {FERRY_DTYPE_F32, FERRY_DTYPE_F16, FERRY_DTYPE_BF16};

static int device_count(void) { return ferry_cuda_device_count() > 0 ? 2 : 1; }
static ferry_device device_at(int i) { return i == 0 ? ferry_cpu() : ferry_cuda(0); }

static ferry_safetensors *ref_open(void)
{
    ferry_safetensors *f = NULL;
    ferry_status st = ferry_safetensors_open(REF_PATH, &f);
    ASSERT_MSG(st == FERRY_OK, "fixture %s: %s (%s); it is committed, regenerate it with "
               "/usr/bin/python3 tests/ref/make_embedding_ref.py", REF_PATH, ferry_status_str(st), ferry_last_error());
    return f;
}

static void check_config(const ferry_safetensors *f, const char *case_, const char *want)
{
    const char *got = ferry_safetensors_metadata(f, case_);
    ASSERT_MSG(got && !strcmp(got, want), "%s: fixture configuration \"%s\", the test builds \"%s\"", case_,
               got ? got : "(missing)", want);
}

/* "<case>.<what>" on dev, float tensors converted to dt. */
static ferry_tensor *ref_get(const ferry_safetensors *f, const char *case_, const char *what, ferry_device dev,
                             ferry_dtype dt)
{
    char name[256];
    snprintf(name, sizeof name, "%s.%s", case_, what);
    ferry_tensor *t = NULL, *c = NULL;
    ferry_status st = ferry_safetensors_get(f, name, dev, &t);
    ASSERT_MSG(st == FERRY_OK, "reading fixture tensor %s: %s (%s)", name, ferry_status_str(st), ferry_last_error());
    if (ferry_tensor_dtype(t) != FERRY_DTYPE_F32 || dt == FERRY_DTYPE_F32)
        return t;
    ASSERT_OK(ferry_tensor_to_dtype(t, dt, &c));
    ferry_tensor_release(t);
    return c;
}

/* A host f32 copy of t's values (malloc). */
static float *host_f32(ferry_tensor *t)
{
    ferry_tensor *h = NULL, *f = NULL;
    ASSERT_OK(ferry_tensor_cpu(t, &h));
    ASSERT_OK(ferry_tensor_to_dtype(h, FERRY_DTYPE_F32, &f));
    size_t bytes = (size_t)ferry_tensor_numel(f) * sizeof(float);
    float *v = malloc(bytes ? bytes : 1);
    ASSERT(v);
    ASSERT_OK(ferry_tensor_copy_to_host(f, v, bytes));
    ferry_tensor_release(h);
    ferry_tensor_release(f);
    return v;
}

/* The raw bytes of t (malloc), for bit-for-bit comparisons. */
static void *host_bytes(ferry_tensor *t, size_t *bytes)
{
    ferry_tensor *h = NULL;
    ASSERT_OK(ferry_tensor_cpu(t, &h));
    *bytes = (size_t)ferry_tensor_numel(h) * ferry_dtype_size(ferry_tensor_dtype(h));
    void *v = malloc(*bytes ? *bytes : 1);
    ASSERT(v);
    ASSERT_OK(ferry_tensor_copy_to_host(h, v, *bytes));
    ferry_tensor_release(h);
    return v;
}

/* got against fixture "<case>.<what>": sqrt(sum (got - want)^2 / sum want^2) <= bound. */
static void expect(const ferry_safetensors *f, const char *case_, const char *what, ferry_tensor *got,
                   ferry_device dev, ferry_dtype dt, double bound)
{
    ferry_tensor *want = ref_get(f, case_, what, ferry_cpu(), FERRY_DTYPE_F32);
    int64_t n = ferry_tensor_numel(want);
    ASSERT_MSG(ferry_tensor_numel(got) == n, "%s: %s has %lld elements, PyTorch's %lld", case_, what,
               (long long)ferry_tensor_numel(got), (long long)n);
    ASSERT_EQ_SIZE(ferry_tensor_ndim(got), ferry_tensor_ndim(want));
    float *a = host_f32(got), *e = host_f32(want);
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)a[i] - e[i];
        num += d * d;
        den += (double)e[i] * e[i];
    }
    double err = den > 0 ? sqrt(num / den) : sqrt(num);
    free(a);
    free(e);
    ferry_tensor_release(want);
    char dn[FERRY_DEVICE_NAME_MAX];
    ferry_device_format(dev, dn, sizeof dn);
    if (getenv("FERRY_REF_VERBOSE"))
        printf("  %-10s %-12s %-7s %-5s err %.3g (bound %.3g)\n", case_, what, dn, ferry_dtype_name(dt), err, bound);
    ASSERT_MSG(err <= bound, "%s: %s on %s in %s: normalised error %.3g > bound %.3g", case_, what, dn,
               ferry_dtype_name(dt), err, bound);
}

static double grad_bound(ferry_dtype dt)
{
    return dt == FERRY_DTYPE_F16 ? 1e-3 : dt == FERRY_DTYPE_BF16 ? 6.5e-3 : 1e-6;
}

static void run_embed_case(const ferry_safetensors *f, const char *case_, int64_t num, int64_t dim, ferry_device dev,
                           ferry_dtype dt)
{
    ferry_module *m = NULL;
    ASSERT_OK(ferry_embedding_create(num, dim, &m));
    ASSERT_OK(ferry_module_to(m, dev));
    if (dt != FERRY_DTYPE_F32)
        ASSERT_OK(ferry_module_to_dtype(m, dt));
    ferry_param p;
    ASSERT_OK(ferry_module_param(m, 0, &p));
    ASSERT_STR_EQ(p.name, "weight");
    ferry_tensor *w = ref_get(f, case_, "weight", dev, FERRY_DTYPE_F32);
    ASSERT_OK(ferry_tensor_copy(p.value, w, NULL));
    ferry_tensor *x = ref_get(f, case_, "x", dev, dt), *dy = ref_get(f, case_, "dy", dev, dt), *y = NULL;
    ASSERT_OK(ferry_module_forward(m, x, NULL, &y));
    ASSERT_EQ_INT(ferry_tensor_dtype(y), dt);
    /* A gather copies values: exact in every dtype (against the fixture's
     * table rounded to dt, which is what the module holds). */
    expect(f, case_, "y", y, dev, dt, dt == FERRY_DTYPE_F32 ? 0 : dt == FERRY_DTYPE_F16 ? 5e-4 : 4.5e-3);
    ASSERT_OK(ferry_module_zero_grad(m, NULL));
    ferry_tensor *dx = NULL;
    ASSERT_OK(ferry_module_backward(m, dy, NULL, &dx));
    ASSERT(dx == NULL); /* indices have no gradient */
    expect(f, case_, "grad.weight", p.grad, dev, dt, grad_bound(dt));
    ferry_tensor *all[] = {w, x, dy, y};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        ferry_tensor_release(all[i]);
    ferry_module_destroy(m);
}

TEST(embedding_matches_pytorch)
{
    ferry_safetensors *f = ref_open();
    check_config(f, "embed_i64", "Embedding(11, 5), indices [3, 7] int64");
    check_config(f, "embed_i32", "Embedding(300, 3), indices [64] int32");
    for (int d = 0; d < device_count(); d++)
        for (int t = 0; t < 3; t++) {
            run_embed_case(f, "embed_i64", 11, 5, device_at(d), all_dtypes[t]);
            run_embed_case(f, "embed_i32", 300, 3, device_at(d), all_dtypes[t]);
        }
    ferry_safetensors_destroy(f);
}

/* Indices with many repeats, [n] i64 on the host: a few hot rows and a spread. */
static int64_t *repeated_indices(int64_t n, int64_t vocab)
{
    int64_t *v = malloc((size_t)n * sizeof *v);
    ASSERT(v);
    uint64_t r = 12345;
    for (int64_t i = 0; i < n; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        uint64_t u = r >> 33;
        v[i] = (u & 3) == 0 ? (int64_t)(u % 3) : (int64_t)(u % (uint64_t)vocab);
    }
    return v;
}

/* weight.grad after one forward and backward of m (on dev, dtype dt, table
 * from seed 5) on idx with a fixed dy; returns its raw bytes. */
static void *grad_after(ferry_device dev, ferry_dtype dt, ferry_dtype idt, const int64_t *idx, int64_t n, int64_t vocab,
                        int64_t dim, size_t *bytes)
{
    ferry_module *m = NULL;
    ASSERT_OK(ferry_embedding_create(vocab, dim, &m));
    ASSERT_OK(ferry_module_init(m, 5));
    ASSERT_OK(ferry_module_to(m, dev));
    if (dt != FERRY_DTYPE_F32)
        ASSERT_OK(ferry_module_to_dtype(m, dt));
    ferry_tensor *xi = NULL, *x = NULL, *dy = NULL, *dyt = NULL, *y = NULL;
    ASSERT_OK(ferry_tensor_from_host(idx, &n, 1, FERRY_DTYPE_I64, dev, &xi));
    ASSERT_OK(ferry_tensor_to_dtype(xi, idt, &x));
    int64_t shape[2] = {n, dim};
    /* drawn on the CPU: the GPU's normal transform may round its last bit otherwise */
    ferry_tensor *dyc = NULL;
    ASSERT_OK(ferry_tensor_randn(shape, 2, FERRY_DTYPE_F32, ferry_cpu(), 9, &dyc));
    ASSERT_OK(ferry_tensor_to(dyc, dev, false, &dy));
    ferry_tensor_release(dyc);
    ASSERT_OK(ferry_tensor_to_dtype(dy, dt, &dyt));
    ASSERT_OK(ferry_module_zero_grad(m, NULL));
    /* twice: a gradient already there is added to, in the same order */
    ASSERT_OK(ferry_module_forward(m, x, NULL, &y));
    ASSERT_OK(ferry_module_backward(m, dyt, NULL, NULL));
    ferry_tensor_release(y);
    ASSERT_OK(ferry_module_forward(m, x, NULL, &y));
    ASSERT_OK(ferry_module_backward(m, dyt, NULL, NULL));
    ferry_param p;
    ASSERT_OK(ferry_module_param(m, 0, &p));
    void *g = host_bytes(p.grad, bytes);
    ferry_tensor *all[] = {xi, x, dy, dyt, y};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        ferry_tensor_release(all[i]);
    ferry_module_destroy(m);
    return g;
}

TEST(gpu_gradient_of_repeated_indices_is_the_cpus_bit_for_bit)
{
    ft_require_cuda();
    /* 70000 rows: three sort passes; 3000 positions: 12 tiles of the sort. */
    static const int64_t vocabs[] = {40, 300, 70000};
    int64_t n = 3000, dim = 7;
    for (size_t v = 0; v < sizeof vocabs / sizeof vocabs[0]; v++) {
        int64_t *idx = repeated_indices(n, vocabs[v]);
        for (int t = 0; t < 3; t++)
            for (int k = 0; k < 2; k++) {
                ferry_dtype dt = all_dtypes[t], idt = k ? FERRY_DTYPE_I32 : FERRY_DTYPE_I64;
                size_t bc = 0, bg = 0, bg2 = 0;
                void *cpu = grad_after(ferry_cpu(), dt, idt, idx, n, vocabs[v], dim, &bc);
                void *gpu = grad_after(ferry_cuda(0), dt, idt, idx, n, vocabs[v], dim, &bg);
                void *gpu2 = grad_after(ferry_cuda(0), dt, idt, idx, n, vocabs[v], dim, &bg2);
                ASSERT_EQ_SIZE(bc, bg);
                ASSERT_MSG(!memcmp(cpu, gpu, bc), "vocab %lld, %s, %s indices: the GPU's gradient differs from the CPU's",
                           (long long)vocabs[v], ferry_dtype_name(dt), ferry_dtype_name(idt));
                ASSERT_MSG(!memcmp(gpu, gpu2, bc), "vocab %lld, %s: two GPU runs differ", (long long)vocabs[v],
                           ferry_dtype_name(dt));
                free(cpu);
                free(gpu);
                free(gpu2);
            }
        free(idx);
    }
}

/* The gradient of a row is the sum of its positions' rows: checked without
 * PyTorch, in double, on every device. */
TEST(repeated_indices_sum_their_gradients)
{
    int64_t n = 600, vocab = 50, dim = 3;
    int64_t *idx = repeated_indices(n, vocab);
    for (int d = 0; d < device_count(); d++) {
        ferry_module *m = NULL;
        ASSERT_OK(ferry_embedding_create(vocab, dim, &m));
        ASSERT_OK(ferry_module_to(m, device_at(d)));
        ferry_tensor *x = NULL, *dy = NULL, *y = NULL;
        ASSERT_OK(ferry_tensor_from_host(idx, &n, 1, FERRY_DTYPE_I64, device_at(d), &x));
        int64_t shape[2] = {n, dim};
        ASSERT_OK(ferry_tensor_randn(shape, 2, FERRY_DTYPE_F32, device_at(d), 3, &dy));
        ASSERT_OK(ferry_module_zero_grad(m, NULL));
        ASSERT_OK(ferry_module_forward(m, x, NULL, &y));
        ASSERT_OK(ferry_module_backward(m, dy, NULL, NULL));
        ferry_param p;
        ASSERT_OK(ferry_module_param(m, 0, &p));
        float *g = host_f32(p.grad), *dyh = host_f32(dy), *w = host_f32(p.value), *yh = host_f32(y);
        double *want = calloc((size_t)(vocab * dim), sizeof *want);
        ASSERT(want);
        for (int64_t i = 0; i < n; i++)
            for (int64_t k = 0; k < dim; k++) {
                want[idx[i] * dim + k] += dyh[i * dim + k];
                ASSERT_MSG(yh[i * dim + k] == w[idx[i] * dim + k], "y[%lld] is not row %lld", (long long)i,
                           (long long)idx[i]);
            }
        for (int64_t j = 0; j < vocab * dim; j++)
            ASSERT_NEAR(g[j], want[j], 1e-4);
        free(want);
        free(g);
        free(dyh);
        free(w);
        free(yh);
        ferry_tensor_release(x);
        ferry_tensor_release(dy);
        ferry_tensor_release(y);
        ferry_module_destroy(m);
    }
    free(idx);
}

static void expect_bad_index(ferry_device dev, ferry_dtype idt, const int64_t *v, int64_t n, const char *want)
{
    ferry_module *m = NULL;
    ASSERT_OK(ferry_embedding_create(11, 4, &m));
    ASSERT_OK(ferry_module_to(m, dev));
    ferry_tensor *xi = NULL, *x = NULL, *y = NULL;
    ASSERT_OK(ferry_tensor_from_host(v, &n, 1, FERRY_DTYPE_I64, dev, &xi));
    ASSERT_OK(ferry_tensor_to_dtype(xi, idt, &x));
    ASSERT_STATUS(ferry_module_forward(m, x, NULL, &y), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), want);
    ASSERT(y == NULL);
    /* the module is still usable: a good batch after a bad one */
    int64_t good[3] = {0, 10, 3}, three = 3;
    ferry_tensor *g = NULL;
    ASSERT_OK(ferry_tensor_from_host(good, &three, 1, FERRY_DTYPE_I64, dev, &g));
    ASSERT_OK(ferry_module_forward(m, g, NULL, &y));
    ferry_tensor_release(y);
    ferry_tensor_release(g);
    ferry_tensor_release(xi);
    ferry_tensor_release(x);
    ferry_module_destroy(m);
}

TEST(an_index_outside_the_table_is_an_error_naming_it)
{
    int64_t over[8] = {1, 2, 3, 4, 5, 11, 0, 40};
    int64_t under[4] = {0, 10, -1, -7};
    /* i32 of a value past INT32_MAX would wrap in the conversion: -5 stands in */
    for (int d = 0; d < device_count(); d++)
        for (int k = 0; k < 2; k++) {
            ferry_dtype idt = k ? FERRY_DTYPE_I32 : FERRY_DTYPE_I64;
            expect_bad_index(device_at(d), idt, over, 8, "index 11 at position 5 is outside [0, 11)");
            expect_bad_index(device_at(d), idt, under, 4, "index -1 at position 2 is outside [0, 11)");
        }
}

TEST(float_input_and_bad_sizes_are_rejected)
{
    ferry_module *m = NULL;
    ASSERT_STATUS(ferry_embedding_create(0, 4, &m), FERRY_ERR_INVALID_ARG);
    ASSERT_STATUS(ferry_embedding_create(4, -1, &m), FERRY_ERR_INVALID_ARG);
    ASSERT_STATUS(ferry_embedding_create(4, 2, NULL), FERRY_ERR_INVALID_ARG);
    ASSERT_STATUS(ferry_embedding_create(INT64_MAX, INT64_MAX, &m), FERRY_ERR_LIMIT);
    ASSERT(m == NULL);
    ASSERT_OK(ferry_embedding_create(4, 2, &m));
    ASSERT_STR_EQ(ferry_module_name(m), "Embedding(4, 2)");
    int64_t shape[1] = {3};
    ferry_tensor *x = NULL, *y = NULL;
    ASSERT_OK(ferry_tensor_zeros(shape, 1, FERRY_DTYPE_F32, ferry_cpu(), &x));
    ASSERT_STATUS(ferry_module_forward(m, x, NULL, &y), FERRY_ERR_DTYPE);
    ASSERT_STR_CONTAINS(ferry_last_error(), "indices must be i32 or i64");
    ferry_tensor_release(x);
    if (ferry_cuda_device_count() > 0) { /* indices on another device than the table */
        ASSERT_OK(ferry_tensor_zeros(shape, 1, FERRY_DTYPE_I64, ferry_cuda(0), &x));
        ASSERT_STATUS(ferry_module_forward(m, x, NULL, &y), FERRY_ERR_DEVICE_MISMATCH);
        ASSERT_STR_CONTAINS(ferry_last_error(), "indices on cuda:0 but the table on cpu");
        ferry_tensor_release(x);
    }
    /* backward before forward */
    ASSERT_OK(ferry_tensor_zeros((int64_t[]){3, 2}, 2, FERRY_DTYPE_F32, ferry_cpu(), &x));
    ASSERT_STATUS(ferry_module_backward(m, x, NULL, NULL), FERRY_ERR_BAD_STATE);
    ferry_tensor_release(x);
    ferry_module_destroy(m);
}

/* N(0, 1), as PyTorch's init: mean near 0, variance near 1 over 20000 draws. */
TEST(the_table_starts_standard_normal)
{
    ferry_module *m = NULL;
    ASSERT_OK(ferry_embedding_create(1000, 20, &m));
    ferry_param p;
    ASSERT_OK(ferry_module_param(m, 0, &p));
    float *w = host_f32(p.value);
    double s = 0, s2 = 0;
    for (int i = 0; i < 20000; i++) {
        s += w[i];
        s2 += (double)w[i] * w[i];
    }
    double mean = s / 20000, var = s2 / 20000 - mean * mean;
    ASSERT_NEAR(mean, 0.0, 0.03);
    ASSERT_NEAR(var, 1.0, 0.05);
    free(w);
    ferry_module_destroy(m);
}

static ferry_module *make_mlp(void)
{
    ferry_module *net = NULL, *l = NULL;
    ASSERT_OK(ferry_sequential_create(&net));
    ASSERT_OK(ferry_embedding_create(27, 4, &l));
    ASSERT_OK(ferry_sequential_add(net, l));
    ASSERT_OK(ferry_flatten_create(&l));
    ASSERT_OK(ferry_sequential_add(net, l));
    ASSERT_OK(ferry_linear_create(12, 16, true, &l));
    ASSERT_OK(ferry_sequential_add(net, l));
    ASSERT_OK(ferry_relu_create(&l));
    ASSERT_OK(ferry_sequential_add(net, l));
    ASSERT_OK(ferry_linear_create(16, 27, true, &l));
    ASSERT_OK(ferry_sequential_add(net, l));
    return net;
}

TEST(makemore_mlp_loss_and_gradients_match_pytorch)
{
    ferry_safetensors *f = ref_open();
    check_config(f, "mlp", "Embedding(27, 4), Flatten, Linear(12, 16), ReLU, Linear(16, 27); x [10, 3]; cross-entropy");
    for (int d = 0; d < device_count(); d++) {
        ferry_device dev = device_at(d);
        ferry_module *net = make_mlp();
        ASSERT_OK(ferry_module_to(net, dev));
        for (size_t i = 0; i < ferry_module_param_count(net); i++) {
            ferry_param p;
            ASSERT_OK(ferry_module_param(net, i, &p));
            ferry_tensor *v = ref_get(f, "mlp", p.name, dev, FERRY_DTYPE_F32);
            ASSERT_OK(ferry_tensor_copy(p.value, v, NULL));
            ferry_tensor_release(v);
        }
        ferry_tensor *x = ref_get(f, "mlp", "x", dev, FERRY_DTYPE_F32);
        ferry_tensor *labels = ref_get(f, "mlp", "labels", dev, FERRY_DTYPE_F32);
        ferry_metrics *met = NULL;
        ASSERT_OK(ferry_metrics_create(dev, &met));
        /* ferry_train_step with a zero learning rate: the loss and gradients of
         * one step, and the indices pass through unconverted */
        ferry_optim *o = NULL;
        ASSERT_OK(ferry_sgd_create(net, 0.0, 0.0, 0.0, &o));
        ASSERT_OK(ferry_train_step(net, o, NULL, x, labels, met, NULL));
        double loss = 0;
        ASSERT_OK(ferry_metrics_get(met, &loss, NULL, NULL));
        ferry_tensor *want = ref_get(f, "mlp", "loss", ferry_cpu(), FERRY_DTYPE_F32);
        ASSERT_NEAR(loss, *(const float *)ferry_tensor_data(want), 1e-5);
        ferry_tensor_release(want);
        for (size_t i = 0; i < ferry_module_param_count(net); i++) {
            ferry_param p;
            ASSERT_OK(ferry_module_param(net, i, &p));
            char what[160];
            snprintf(what, sizeof what, "grad.%s", p.name);
            expect(f, "mlp", what, p.grad, dev, FERRY_DTYPE_F32, 1e-5);
        }
        ferry_optim_destroy(o);
        ferry_metrics_destroy(met);
        ferry_tensor_release(x);
        ferry_tensor_release(labels);
        ferry_module_destroy(net);
    }
    ferry_safetensors_destroy(f);
}

/* Mixed precision: the table goes to f16 with an f32 master, indices pass
 * through ferry_train_step unconverted, and a few steps on one batch lower
 * its loss, on every device. */
TEST(mixed_precision_steps_train_the_table)
{
    int64_t shape[2] = {32, 3}, n = 32;
    int64_t x[96], y[32];
    for (int i = 0; i < 96; i++)
        x[i] = (i * 7 + i / 3) % 27;
    for (int i = 0; i < 32; i++)
        y[i] = (x[3 * i] + x[3 * i + 2]) % 27;
    for (int d = 0; d < device_count(); d++) {
        ferry_device dev = device_at(d);
        ferry_module *net = make_mlp();
        ASSERT_OK(ferry_module_to(net, dev));
        ferry_amp_config cfg = ferry_amp_config_default(FERRY_DTYPE_F16);
        cfg.init_scale = 256;
        ferry_amp *amp = NULL;
        ASSERT_OK(ferry_amp_create(net, &cfg, &amp));
        ASSERT_EQ_INT(ferry_module_dtype(net), FERRY_DTYPE_F16);
        ferry_optim *o = NULL;
        ASSERT_OK(ferry_adam_create(net, 1e-2, 0.9, 0.999, 1e-8, 0.0, &o));
        ferry_tensor *xt = NULL, *yt = NULL;
        ASSERT_OK(ferry_tensor_from_host(x, shape, 2, FERRY_DTYPE_I64, dev, &xt));
        ASSERT_OK(ferry_tensor_from_host(y, &n, 1, FERRY_DTYPE_I64, dev, &yt));
        ferry_metrics *met = NULL;
        ASSERT_OK(ferry_metrics_create(dev, &met));
        double first = 0, last = 0;
        for (int step = 0; step < 30; step++) {
            ASSERT_OK(ferry_metrics_reset(met, NULL));
            ASSERT_OK(ferry_train_step(net, o, amp, xt, yt, met, NULL));
            ASSERT_OK(ferry_metrics_get(met, step ? &last : &first, NULL, NULL));
        }
        ASSERT_MSG(last < first * 0.5, "loss %.4f after 30 steps, %.4f at the first", last, first);
        ferry_metrics_destroy(met);
        ferry_tensor_release(xt);
        ferry_tensor_release(yt);
        ferry_optim_destroy(o);
        ferry_amp_destroy(amp);
        ferry_module_destroy(net);
    }
}

/* With the check off an out-of-range index is a zero row and adds no gradient
 * (no error, no crash); on again, the error is back. */
TEST(unchecked_indices_give_zero_rows)
{
    int64_t v[6] = {2, 11, 0, -3, 2, 10}, n = 6;
    for (int d = 0; d < device_count(); d++) {
        ferry_device dev = device_at(d);
        ferry_module *m = NULL, *relu = NULL;
        ASSERT_OK(ferry_embedding_create(11, 3, &m));
        ASSERT_OK(ferry_relu_create(&relu));
        ASSERT_STATUS(ferry_embedding_check_indices(relu, false), FERRY_ERR_INVALID_ARG);
        ASSERT_STATUS(ferry_embedding_check_indices(NULL, false), FERRY_ERR_INVALID_ARG);
        ferry_module_destroy(relu);
        ASSERT_OK(ferry_module_to(m, dev));
        ASSERT_OK(ferry_embedding_check_indices(m, false));
        ferry_tensor *x = NULL, *y = NULL, *dy = NULL;
        ASSERT_OK(ferry_tensor_from_host(v, &n, 1, FERRY_DTYPE_I64, dev, &x));
        ASSERT_OK(ferry_module_zero_grad(m, NULL));
        ASSERT_OK(ferry_module_forward(m, x, NULL, &y));
        ASSERT_OK(ferry_tensor_ones((int64_t[]){6, 3}, 2, FERRY_DTYPE_F32, dev, &dy));
        ASSERT_OK(ferry_module_backward(m, dy, NULL, NULL));
        ferry_param p;
        ASSERT_OK(ferry_module_param(m, 0, &p));
        float *yh = host_f32(y), *w = host_f32(p.value), *g = host_f32(p.grad);
        for (int64_t i = 0; i < n; i++)
            for (int k = 0; k < 3; k++) {
                bool in = v[i] >= 0 && v[i] < 11;
                ASSERT_MSG(yh[i * 3 + k] == (in ? w[v[i] * 3 + k] : 0.0f), "y[%lld, %d]", (long long)i, k);
            }
        for (int64_t r = 0; r < 11; r++)
            for (int k = 0; k < 3; k++)
                ASSERT_NEAR(g[r * 3 + k], r == 2 ? 2.0 : r == 0 || r == 10 ? 1.0 : 0.0, 0);
        free(yh);
        free(w);
        free(g);
        ferry_tensor_release(y);
        ASSERT_OK(ferry_embedding_check_indices(m, true));
        ASSERT_STATUS(ferry_module_forward(m, x, NULL, &y), FERRY_ERR_INVALID_ARG);
        ASSERT_STR_CONTAINS(ferry_last_error(), "index 11 at position 1");
        ferry_tensor_release(x);
        ferry_tensor_release(dy);
        ferry_module_destroy(m);
    }
}

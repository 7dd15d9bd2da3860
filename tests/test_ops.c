/* Tensor ops against naive reference loops on the CPU, the error messages of
 * mismatched inputs, and every op on CUDA against the CPU (skipped without a GPU). */
#include <pthread.h>
#include <stdlib.h>

#include "harness.h"
#include "ferry/ops.h"
#include "ferry/rng.h"
#include "tensor/internal.h"

#define CPU ferry_cpu()

static ferry_tensor *mk(const int64_t *shape, size_t nd, uint64_t seed)
{
    ferry_tensor *t = NULL;
    ASSERT_OK(ferry_tensor_randn(shape, nd, FERRY_DTYPE_F32, CPU, seed, &t));
    return t;
}

static float *host(const ferry_tensor *t)
{
    size_t n = (size_t)ferry_tensor_numel(t);
    float *v = malloc((n ? n : 1) * sizeof(float));
    ASSERT(v);
    ASSERT_EQ_INT(ferry_tensor_dtype(t), FERRY_DTYPE_F32);
    ASSERT_OK(ferry_tensor_copy_to_host(t, v, n * sizeof(float)));
    return v;
}

static void assert_close(const float *a, const double *b, size_t n, double tol)
{
    for (size_t i = 0; i < n; i++)
        ASSERT_MSG(fabs(a[i] - b[i]) <= tol * (1 + fabs(b[i])), "element %zu: %.9g vs %.9g", i, a[i], b[i]);
}

TEST(creation_ones_full_arange)
{
    int64_t shape[2] = {3, 4};
    ferry_tensor *t = NULL;
    ASSERT_OK(ferry_tensor_ones(shape, 2, FERRY_DTYPE_F32, CPU, &t));
    float *v = host(t);
    for (int i = 0; i < 12; i++)
        ASSERT_NEAR(v[i], 1.0, 0);
    free(v);
    ferry_tensor_release(t);
    ASSERT_OK(ferry_tensor_full(shape, 2, -2.5, FERRY_DTYPE_F32, CPU, &t));
    v = host(t);
    ASSERT_NEAR(v[11], -2.5, 0);
    free(v);
    ferry_tensor_release(t);
    ASSERT_OK(ferry_tensor_arange(0, 5, 0.5, FERRY_DTYPE_F32, CPU, &t));
    ASSERT_EQ_INT(ferry_tensor_numel(t), 10);
    v = host(t);
    ASSERT_NEAR(v[9], 4.5, 0);
    free(v);
    ferry_tensor_release(t);
    ASSERT_OK(ferry_tensor_arange(5, 0, -1, FERRY_DTYPE_I64, CPU, &t));
    int64_t iv[5];
    ASSERT_OK(ferry_tensor_copy_to_host(t, iv, sizeof iv));
    ASSERT_EQ_INT(iv[0], 5);
    ASSERT_EQ_INT(iv[4], 1);
    ferry_tensor_release(t);
    ASSERT_STATUS(ferry_tensor_arange(0, 1, 0, FERRY_DTYPE_F32, CPU, &t), FERRY_ERR_INVALID_ARG);
}

TEST(rand_is_seeded_philox)
{
    int64_t n = 100000;
    ferry_tensor *a = NULL, *b = NULL, *c = NULL;
    ASSERT_OK(ferry_tensor_rand(&n, 1, FERRY_DTYPE_F32, CPU, 7, &a));
    ASSERT_OK(ferry_tensor_rand(&n, 1, FERRY_DTYPE_F32, CPU, 7, &b));
    ASSERT_OK(ferry_tensor_rand(&n, 1, FERRY_DTYPE_F32, CPU, 8, &c));
    float *va = host(a), *vb = host(b), *vc = host(c);
    ASSERT_MEM_EQ(va, vb, (size_t)n * sizeof(float));
    double sum = 0;
    int same = 0;
    for (int64_t i = 0; i < n; i++) {
        ASSERT(va[i] >= 0 && va[i] < 1);
        sum += va[i];
        same += va[i] == vc[i];
    }
    ASSERT_NEAR(sum / (double)n, 0.5, 0.01);
    ASSERT(same < 100);
    /* Element 3 is word 0 of Philox block (3, FERRY_RNG_INIT) keyed by the seed. */
    uint32_t ctr[4] = {3, 0, (uint32_t)FERRY_RNG_INIT, (uint32_t)(FERRY_RNG_INIT >> 32)}, key[2] = {7, 0}, w[4];
    ferry_philox4x32_10(ctr, key, w);
    ASSERT_NEAR(va[3], (double)(w[0] >> 8) / 16777216.0, 0);
    free(va); free(vb); free(vc);
    ferry_tensor_release(a); ferry_tensor_release(b); ferry_tensor_release(c);
    ASSERT_OK(ferry_tensor_randn(&n, 1, FERRY_DTYPE_F32, CPU, 1, &a));
    va = host(a);
    double s = 0, sq = 0;
    for (int64_t i = 0; i < n; i++) {
        s += va[i];
        sq += va[i] * va[i];
    }
    ASSERT_NEAR(s / (double)n, 0, 0.02);
    ASSERT_NEAR(sq / (double)n, 1, 0.02);
    free(va);
    ferry_tensor_release(a);
}

TEST(views_reshape_slice_transpose)
{
    ferry_tensor *t = NULL, *r = NULL, *s = NULL, *tr = NULL, *c = NULL;
    ASSERT_OK(ferry_tensor_arange(0, 24, 1, FERRY_DTYPE_F32, CPU, &t));
    int64_t shape[3] = {2, 3, 4};
    ASSERT_OK(ferry_tensor_reshape(t, shape, 3, &r));
    ASSERT(ferry_tensor_data(r) == ferry_tensor_data(t)); /* a view */
    int64_t bad[2] = {5, -1};
    ASSERT_STATUS(ferry_tensor_reshape(t, bad, 2, &s), FERRY_ERR_SHAPE);
    ASSERT_STR_CONTAINS(ferry_last_error(), "[5, -1]");
    ASSERT_OK(ferry_tensor_slice(r, 2, 1, 3, 1, &s)); /* [2,3,2] */
    ASSERT_EQ_INT(ferry_tensor_dim(s, 2), 2);
    ASSERT(!ferry_tensor_is_contiguous(s));
    ASSERT_OK(ferry_tensor_contiguous(s, NULL, &c));
    float *v = host(c);
    ASSERT_NEAR(v[0], 1, 0);
    ASSERT_NEAR(v[1], 2, 0);
    ASSERT_NEAR(v[2], 5, 0);
    ASSERT_NEAR(v[11], 22, 0);
    free(v);
    ferry_tensor_release(c);
    ASSERT_OK(ferry_tensor_transpose(r, 0, 2, &tr)); /* [4,3,2] */
    ASSERT_OK(ferry_tensor_contiguous(tr, NULL, &c));
    v = host(c);
    /* tr[i][j][k] = r[k][j][i] = 12k + 4j + i */
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 2; k++)
                ASSERT_NEAR(v[(i * 3 + j) * 2 + k], 12 * k + 4 * j + i, 0);
    free(v);
    ferry_tensor_release(c);
    /* Reshaping a non-contiguous view copies. */
    int64_t flat = -1;
    ASSERT_OK(ferry_tensor_reshape(tr, &flat, 1, &c));
    v = host(c);
    ASSERT_NEAR(v[1], 12, 0);
    free(v);
    ferry_tensor_release(c);
    /* Step slicing and negative indices. */
    ASSERT_OK(ferry_tensor_slice(t, 0, -5, 100, 2, &c));
    ASSERT_EQ_INT(ferry_tensor_numel(c), 3);
    v = host(c);
    ASSERT_NEAR(v[0], 19, 0);
    ASSERT_NEAR(v[2], 23, 0);
    free(v);
    ferry_tensor_release(c);
    ferry_tensor_release(t); ferry_tensor_release(r); ferry_tensor_release(s); ferry_tensor_release(tr);
}

/* Naive broadcast index of a (shape as) in out coordinates. */
static int64_t bidx(const int64_t *out, size_t nd, const int64_t *sh, size_t snd, int64_t flat)
{
    int64_t idx = 0, mul = 1;
    for (size_t i = 0; i < nd; i++) {
        size_t d = nd - 1 - i;
        int64_t coord = flat % out[d];
        flat /= out[d];
        if (i < snd) {
            int64_t sz = sh[snd - 1 - i];
            idx += (sz == 1 ? 0 : coord) * mul;
            mul *= sz;
        }
    }
    return idx;
}

TEST(binary_broadcast_against_naive)
{
    int64_t sa[3] = {4, 1, 5}, sb[2] = {3, 1}, so[3] = {4, 3, 5};
    ferry_tensor *a = mk(sa, 3, 1), *b = mk(sb, 2, 2);
    float *va = host(a), *vb = host(b);
    for (int op = FERRY_OP_ADD; op <= FERRY_OP_MINIMUM; op++) {
        ferry_tensor *y = NULL;
        ASSERT_OK(ferry_binary((ferry_binary_op)op, a, b, NULL, &y));
        ASSERT_EQ_INT(ferry_tensor_ndim(y), 3);
        ASSERT_EQ_INT(ferry_tensor_dim(y, 1), 3);
        float *vy = host(y);
        double ref[60];
        for (int64_t i = 0; i < 60; i++) {
            double x = va[bidx(so, 3, sa, 3, i)], z = vb[bidx(so, 3, sb, 2, i)];
            ref[i] = op == FERRY_OP_ADD ? x + z : op == FERRY_OP_SUB ? x - z : op == FERRY_OP_MUL ? x * z
                   : op == FERRY_OP_DIV ? x / z : op == FERRY_OP_MAXIMUM ? fmax(x, z) : fmin(x, z);
        }
        assert_close(vy, ref, 60, 1e-6);
        free(vy);
        ferry_tensor_release(y);
    }
    /* Strided (transposed) operands go through the same path. */
    ferry_tensor *m = NULL, *mt = NULL, *y = NULL;
    int64_t sm[2] = {3, 5};
    m = mk(sm, 2, 3);
    ASSERT_OK(ferry_tensor_transpose(m, 0, 1, &mt));
    ASSERT_OK(ferry_add(mt, mt, NULL, &y));
    float *vm = host(m), *vy = host(y);
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 3; j++)
            ASSERT_NEAR(vy[i * 3 + j], 2 * vm[j * 5 + i], 1e-6);
    free(vm); free(vy);
    ferry_tensor_release(m); ferry_tensor_release(mt); ferry_tensor_release(y);
    free(va); free(vb);
    ferry_tensor_release(a); ferry_tensor_release(b);
}

TEST(unary_and_scalar_against_naive)
{
    int64_t n = 257;
    ferry_tensor *a = mk(&n, 1, 5), *pos = NULL;
    ASSERT_OK(ferry_tensor_rand(&n, 1, FERRY_DTYPE_F32, CPU, 6, &pos));
    float *va = host(a), *vp = host(pos);
    double ref[257];
    for (int op = FERRY_OP_NEG; op <= FERRY_OP_ABS; op++) {
        bool needs_pos = op == FERRY_OP_LOG || op == FERRY_OP_SQRT;
        ferry_tensor *y = NULL;
        ASSERT_OK(ferry_unary((ferry_unary_op)op, needs_pos ? pos : a, NULL, &y));
        float *vy = host(y);
        for (int i = 0; i < n; i++) {
            double x = needs_pos ? vp[i] + 0.0 : va[i];
            ref[i] = op == FERRY_OP_NEG ? -x : op == FERRY_OP_RELU ? (x > 0 ? x : 0)
                   : op == FERRY_OP_GELU ? x * 0.5 * (1 + erf(x / sqrt(2.0))) : op == FERRY_OP_EXP ? exp(x)
                   : op == FERRY_OP_LOG ? log(x) : op == FERRY_OP_SQRT ? sqrt(x) : op == FERRY_OP_TANH ? tanh(x)
                   : op == FERRY_OP_SIGMOID ? 1 / (1 + exp(-x)) : fabs(x);
        }
        assert_close(vy, ref, (size_t)n, 1e-6);
        free(vy);
        ferry_tensor_release(y);
    }
    for (int op = FERRY_OP_ADD_SCALAR; op <= FERRY_OP_MIN_SCALAR; op++) {
        ferry_tensor *y = NULL;
        double c = 1.5;
        ASSERT_OK(ferry_scalar((ferry_scalar_op)op, op == FERRY_OP_POW_SCALAR ? pos : a, c, NULL, &y));
        float *vy = host(y);
        for (int i = 0; i < n; i++) {
            double x = op == FERRY_OP_POW_SCALAR ? vp[i] : va[i];
            ref[i] = op == FERRY_OP_ADD_SCALAR ? x + c : op == FERRY_OP_MUL_SCALAR ? x * c
                   : op == FERRY_OP_RSUB_SCALAR ? c - x : op == FERRY_OP_RDIV_SCALAR ? c / x
                   : op == FERRY_OP_POW_SCALAR ? pow(x, c) : op == FERRY_OP_MAX_SCALAR ? fmax(x, c) : fmin(x, c);
        }
        assert_close(vy, ref, (size_t)n, 1e-6);
        free(vy);
        ferry_tensor_release(y);
    }
    free(va); free(vp);
    ferry_tensor_release(a); ferry_tensor_release(pos);
}

TEST(affine_converts_u8_images)
{
    uint8_t px[4] = {0, 51, 255, 128};
    int64_t n = 4;
    ferry_tensor *u = NULL, *f = NULL, *back = NULL;
    ASSERT_OK(ferry_tensor_from_host(px, &n, 1, FERRY_DTYPE_U8, CPU, &u));
    ASSERT_OK(ferry_affine(u, 1 / 255.0, -0.5, FERRY_DTYPE_F32, NULL, &f));
    float *v = host(f);
    ASSERT_NEAR(v[1], 0.2 - 0.5, 1e-6);
    ASSERT_NEAR(v[2], 0.5, 1e-6);
    free(v);
    ASSERT_OK(ferry_affine(f, 1000, 0, FERRY_DTYPE_U8, NULL, &back)); /* saturates */
    uint8_t b[4];
    ASSERT_OK(ferry_tensor_copy_to_host(back, b, 4));
    ASSERT_EQ_INT(b[0], 0);
    ASSERT_EQ_INT(b[2], 255);
    ferry_tensor_release(u); ferry_tensor_release(f); ferry_tensor_release(back);
}

TEST(reductions_against_naive)
{
    int64_t sh[3] = {3, 4, 5};
    ferry_tensor *a = mk(sh, 3, 9);
    float *va = host(a);
    for (int dim = 0; dim < 3; dim++) {
        ferry_tensor *y[5] = {NULL};
        ASSERT_OK(ferry_sum(a, dim, false, NULL, &y[0]));
        ASSERT_OK(ferry_mean(a, dim - 3, true, NULL, &y[1])); /* negative dim, keepdim */
        ASSERT_OK(ferry_max(a, dim, false, NULL, &y[2]));
        ASSERT_OK(ferry_argmax(a, dim, false, NULL, &y[3]));
        ASSERT_OK(ferry_softmax(a, dim, NULL, &y[4]));
        ASSERT_EQ_INT(ferry_tensor_ndim(y[1]), 3);
        ASSERT_EQ_INT(ferry_tensor_dim(y[1], (size_t)dim), 1);
        ASSERT_EQ_INT(ferry_tensor_dtype(y[3]), FERRY_DTYPE_I64);
        float *s = host(y[0]), *m = host(y[1]), *mx = host(y[2]), *sm = host(y[4]);
        int64_t am[60];
        ASSERT_OK(ferry_tensor_copy_to_host(y[3], am, (size_t)ferry_tensor_numel(y[3]) * 8));
        int64_t st[3] = {20, 5, 1};
        int64_t k = 0;
        for (int64_t i0 = 0; i0 < (dim == 0 ? 1 : 3); i0++)
            for (int64_t i1 = 0; i1 < (dim == 1 ? 1 : 4); i1++)
                for (int64_t i2 = 0; i2 < (dim == 2 ? 1 : 5); i2++, k++) {
                    double sum = 0, best = -INFINITY;
                    int64_t arg = 0;
                    int64_t base = i0 * 20 + i1 * 5 + i2;
                    for (int64_t j = 0; j < sh[dim]; j++) {
                        double v = va[base + j * st[dim]];
                        sum += v;
                        if (v > best) { best = v; arg = j; }
                    }
                    ASSERT_NEAR(s[k], sum, 1e-5);
                    ASSERT_NEAR(m[k], sum / (double)sh[dim], 1e-5);
                    ASSERT_NEAR(mx[k], best, 0);
                    ASSERT_EQ_INT(am[k], arg);
                    double z = 0;
                    for (int64_t j = 0; j < sh[dim]; j++)
                        z += exp(va[base + j * st[dim]] - best);
                    for (int64_t j = 0; j < sh[dim]; j++)
                        ASSERT_NEAR(sm[base + j * st[dim]], exp(va[base + j * st[dim]] - best) / z, 1e-6);
                }
        free(s); free(m); free(mx); free(sm);
        for (int i = 0; i < 5; i++)
            ferry_tensor_release(y[i]);
    }
    ferry_tensor *ls = NULL;
    ASSERT_OK(ferry_log_softmax(a, -1, NULL, &ls));
    float *vl = host(ls);
    double z = 0;
    for (int j = 0; j < 5; j++)
        z += exp(va[j]);
    ASSERT_NEAR(vl[2], va[2] - log(z), 1e-5);
    free(vl);
    ferry_tensor_release(ls);
    ferry_tensor *bad = NULL;
    ASSERT_STATUS(ferry_sum(a, 3, false, NULL, &bad), FERRY_ERR_SHAPE);
    ASSERT_STR_CONTAINS(ferry_last_error(), "dim 3 is out of range for a tensor of shape [3, 4, 5]");
    free(va);
    ferry_tensor_release(a);
}

static void naive_mm(const float *a, const float *b, double *c, int64_t m, int64_t n, int64_t k)
{
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0;
            for (int64_t q = 0; q < k; q++)
                s += (double)a[i * k + q] * b[q * n + j];
            c[i * n + j] = s;
        }
}

TEST(matmul_against_naive)
{
    int64_t sa[3] = {2, 7, 5}, sb[3] = {2, 5, 3}, sb2[2] = {5, 3};
    ferry_tensor *a = mk(sa, 3, 1), *b = mk(sb, 3, 2), *b2 = mk(sb2, 2, 3), *y = NULL;
    float *va = host(a), *vb = host(b), *vb2 = host(b2);
    double ref[42];
    ASSERT_OK(ferry_bmm(a, b, NULL, &y));
    float *vy = host(y);
    for (int i = 0; i < 2; i++) {
        naive_mm(va + i * 35, vb + i * 15, ref, 7, 3, 5);
        assert_close(vy + i * 21, ref, 21, 1e-5);
    }
    free(vy);
    ferry_tensor_release(y);
    ASSERT_OK(ferry_matmul(a, b2, NULL, &y)); /* shared right matrix */
    vy = host(y);
    naive_mm(va + 35, vb2, ref, 7, 3, 5);
    assert_close(vy + 21, ref, 21, 1e-5);
    free(vy);
    ferry_tensor_release(y);
    /* 2-D with a transposed view on each side: (b2^T)^T = b2. */
    ferry_tensor *a2 = NULL, *bt = NULL, *btt = NULL, *aslice = NULL;
    ASSERT_OK(ferry_tensor_slice(a, 0, 0, 1, 1, &aslice));
    int64_t s2[2] = {7, 5};
    ASSERT_OK(ferry_tensor_reshape(aslice, s2, 2, &a2));
    ASSERT_OK(ferry_tensor_transpose(b2, 0, 1, &bt));
    ASSERT_OK(ferry_tensor_transpose(bt, 0, 1, &btt));
    ASSERT_OK(ferry_matmul(a2, btt, NULL, &y));
    vy = host(y);
    naive_mm(va, vb2, ref, 7, 3, 5);
    assert_close(vy, ref, 21, 1e-5);
    free(vy);
    ferry_tensor_release(y);
    ferry_tensor *at = NULL, *att = NULL;
    ASSERT_OK(ferry_tensor_transpose(a2, 0, 1, &at)); /* [5,7] view */
    ASSERT_OK(ferry_tensor_contiguous(at, NULL, &att));
    ferry_tensor *at2 = NULL;
    ASSERT_OK(ferry_tensor_transpose(att, 0, 1, &at2)); /* [7,5], column-major */
    ASSERT_OK(ferry_matmul(at2, b2, NULL, &y));
    vy = host(y);
    assert_close(vy, ref, 21, 1e-5);
    free(vy);
    ferry_tensor_release(y);
    ASSERT_STATUS(ferry_matmul(a2, a2, NULL, &y), FERRY_ERR_SHAPE);
    ASSERT_STR_EQ(ferry_last_error(), "ferry_matmul: shapes [7, 5] and [7, 5] cannot be multiplied");
    free(va); free(vb); free(vb2);
    ferry_tensor_release(a); ferry_tensor_release(b); ferry_tensor_release(b2); ferry_tensor_release(a2);
    ferry_tensor_release(bt); ferry_tensor_release(btt); ferry_tensor_release(aslice);
    ferry_tensor_release(at); ferry_tensor_release(att); ferry_tensor_release(at2);
}

TEST(mismatch_errors_name_both_operands)
{
    int64_t s1[2] = {2, 3}, s2[2] = {3, 4}, s3[1] = {4};
    ferry_tensor *a = mk(s1, 2, 1), *b = mk(s2, 2, 2), *c = mk(s3, 1, 3), *h = NULL, *y = NULL;
    /* A tensor that claims to live on cuda:0: the device check comes before any
     * access, so this needs no GPU. */
    ferry_tensor fake = *b;
    fake.device = ferry_cuda(0);
    ASSERT_STATUS(ferry_matmul(&fake, a, NULL, &y), FERRY_ERR_DEVICE_MISMATCH);
    ASSERT_STR_EQ(ferry_last_error(),
                  "ferry_matmul: expected all tensors to be on the same device, but found cuda:0 and cpu");
    ASSERT_STATUS(ferry_add(a, &fake, NULL, &y), FERRY_ERR_DEVICE_MISMATCH);
    ASSERT_STR_EQ(ferry_last_error(),
                  "ferry_add: expected all tensors to be on the same device, but found cpu and cuda:0");
    ASSERT_STATUS(ferry_add(a, c, NULL, &y), FERRY_ERR_SHAPE);
    ASSERT_STR_EQ(ferry_last_error(), "ferry_add: shapes [2, 3] and [4] cannot be broadcast together");
    ASSERT_OK(ferry_tensor_to_dtype(b, FERRY_DTYPE_F16, &h));
    ASSERT_STATUS(ferry_matmul(a, h, NULL, &y), FERRY_ERR_DTYPE);
    ASSERT_STR_EQ(ferry_last_error(),
                  "ferry_matmul: expected both tensors to have the same dtype, but found f32 and f16");
    ferry_tensor *idx = NULL;
    ASSERT_OK(ferry_tensor_arange(0, 4, 1, FERRY_DTYPE_I64, CPU, &idx));
    ASSERT_STATUS(ferry_exp(idx, NULL, &y), FERRY_ERR_DTYPE);
    ASSERT_STR_EQ(ferry_last_error(), "ferry_exp: expected a floating tensor (f32, f16, bf16), but found i64");
    ASSERT_STATUS(ferry_add(NULL, a, NULL, &y), FERRY_ERR_INVALID_ARG);
    ferry_tensor_release(a); ferry_tensor_release(b); ferry_tensor_release(c);
    ferry_tensor_release(h); ferry_tensor_release(idx);
}

/* One bf16 ulp at x: 8 significant bits. */
static double bf16_ulp(double x)
{
    int e = 0;
    frexp(x, &e); /* |x| in [2^(e-1), 2^e) */
    return ldexp(1.0, e - 8);
}

/* y = a b in bf16: each element within half a bf16 ulp of the exact product of
 * the bf16 inputs (round to nearest), plus f32 accumulation's slack. */
static void check_bf16_matmul(ferry_tensor *a, ferry_tensor *b, ferry_tensor *y, int m, int k, int n)
{
    ferry_tensor *af = NULL, *bf = NULL, *yf = NULL;
    ASSERT_OK(ferry_tensor_to_dtype(a, FERRY_DTYPE_F32, &af)); /* widening: exact */
    ASSERT_OK(ferry_tensor_to_dtype(b, FERRY_DTYPE_F32, &bf));
    ASSERT_OK(ferry_tensor_to_dtype(y, FERRY_DTYPE_F32, &yf));
    float *av = host(af), *bv = host(bf), *yv = host(yf);
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double exact = 0;
            for (int l = 0; l < k; l++)
                exact += (double)av[i * k + l] * bv[l * n + j];
            double err = fabs(yv[i * n + j] - exact), allowed = 0.5 * bf16_ulp(exact) + 1e-6 * fabs(exact);
            ASSERT_MSG(err <= allowed, "bf16 matmul [%d, %d]: %.9g, exact %.9g (off by %.3g, allowed %.3g)", i, j,
                       yv[i * n + j], exact, err, allowed);
        }
    free(av); free(bv); free(yv);
    ferry_tensor_release(af); ferry_tensor_release(bf); ferry_tensor_release(yf);
}

TEST(half_ops_on_cpu_round_f32_results)
{
    int64_t s[2] = {4, 6};
    ferry_tensor *a = mk(s, 2, 4), *h = NULL, *y = NULL, *y32 = NULL, *r = NULL;
    ASSERT_OK(ferry_tensor_to_dtype(a, FERRY_DTYPE_BF16, &h));
    ASSERT_OK(ferry_softmax(h, 1, NULL, &y));
    ASSERT_EQ_INT(ferry_tensor_dtype(y), FERRY_DTYPE_BF16);
    ASSERT_OK(ferry_tensor_to_dtype(y, FERRY_DTYPE_F32, &y32));
    ASSERT_OK(ferry_softmax(a, 1, NULL, &r));
    float *v = host(y32), *w = host(r);
    for (int i = 0; i < 24; i++)
        ASSERT_NEAR(v[i], w[i], 0.01);
    free(v); free(w);
    ferry_tensor_release(y); ferry_tensor_release(y32); ferry_tensor_release(r);
    int64_t s2[2] = {6, 3};
    ferry_tensor *b = mk(s2, 2, 5), *bh = NULL;
    ASSERT_OK(ferry_tensor_to_dtype(b, FERRY_DTYPE_BF16, &bh));
    ASSERT_OK(ferry_matmul(h, bh, NULL, &y));
    ASSERT_EQ_INT(ferry_tensor_dtype(y), FERRY_DTYPE_BF16);
    check_bf16_matmul(h, bh, y, 4, 6, 3);
    ferry_tensor_release(y);
    ferry_tensor_release(a); ferry_tensor_release(h); ferry_tensor_release(b); ferry_tensor_release(bh);
}

/* dst = src broadcasts src over dst's shape and converts its values. */
TEST(copy_broadcasts_and_converts_values)
{
    int64_t s23[2] = {2, 3}, s3 = 3, s21[2] = {2, 1};
    const uint8_t row[3] = {7, 200, 0};
    const float col[2] = {-1.5f, 4.25f};
    ferry_tensor *dst = NULL, *r = NULL, *c = NULL;
    ASSERT_OK(ferry_tensor_zeros(s23, 2, FERRY_DTYPE_F32, CPU, &dst));
    ASSERT_OK(ferry_tensor_from_host(row, &s3, 1, FERRY_DTYPE_U8, CPU, &r));
    ASSERT_OK(ferry_tensor_from_host(col, s21, 2, FERRY_DTYPE_F32, CPU, &c));
    ASSERT_OK(ferry_tensor_copy(dst, r, NULL)); /* [3] u8 over the rows of [2, 3] f32 */
    float *v = host(dst);
    for (int i = 0; i < 6; i++)
        ASSERT_NEAR(v[i], row[i % 3], 0);
    free(v);
    ASSERT_OK(ferry_tensor_copy(dst, c, NULL)); /* [2, 1] over the columns */
    v = host(dst);
    for (int i = 0; i < 6; i++)
        ASSERT_NEAR(v[i], col[i / 3], 0);
    free(v);
    ferry_tensor_release(dst); ferry_tensor_release(r); ferry_tensor_release(c);
}

/* item reads the one element of a view where it lies (offset included) and
 * keeps integers exact. */
TEST(item_reads_the_value)
{
    int64_t n = 5, one = 1;
    const float f[5] = {0.5f, -1.25f, 3.0f, 1e-3f, -7.0f};
    const int64_t big = ((int64_t)1 << 40) + 3;
    ferry_tensor *t = NULL, *e = NULL, *i = NULL, *h = NULL;
    double v = 0;
    ASSERT_OK(ferry_tensor_from_host(f, &n, 1, FERRY_DTYPE_F32, CPU, &t));
    ASSERT_OK(ferry_tensor_slice(t, 0, 3, 4, 1, &e));
    ASSERT_OK(ferry_tensor_item(e, &v));
    ASSERT_NEAR(v, (double)1e-3f, 0);
    ASSERT_OK(ferry_tensor_from_host(&big, &one, 1, FERRY_DTYPE_I64, CPU, &i));
    ASSERT_OK(ferry_tensor_item(i, &v));
    ASSERT_NEAR(v, (double)big, 0);
    ASSERT_OK(ferry_tensor_to_dtype(e, FERRY_DTYPE_BF16, &h));
    ASSERT_OK(ferry_tensor_item(h, &v));
    ASSERT_NEAR(v, 0.00099945068359375, 0); /* 1e-3 to the nearest bf16 (torch says the same) */
    ferry_tensor_release(t); ferry_tensor_release(e); ferry_tensor_release(i); ferry_tensor_release(h);
}

TEST(ops_run_on_an_explicit_stream)
{
    ferry_stream *s = NULL;
    ASSERT_OK(ferry_stream_create(CPU, &s));
    int64_t sh[2] = {8, 16};
    ferry_tensor *a = mk(sh, 2, 1), *b = NULL, *c = NULL, *d = NULL;
    ASSERT_OK(ferry_add(a, a, s, &b));
    ASSERT_OK(ferry_softmax(b, 1, s, &c));
    ASSERT_OK(ferry_sum(c, 1, false, s, &d));
    ASSERT_OK(ferry_stream_synchronize(s));
    float *v = host(d);
    for (int i = 0; i < 8; i++)
        ASSERT_NEAR(v[i], 1.0, 1e-5);
    free(v);
    ferry_tensor_release(a); ferry_tensor_release(b); ferry_tensor_release(c); ferry_tensor_release(d);
    ferry_stream_destroy(s);
}

/* ---- CUDA against the CPU ----
 * Normalised error sum((x - ref)^2) / sum(ref^2), like ggml's test-backend-ops,
 * bounded per dtype. */
static double nerr(ferry_tensor *gpu, ferry_tensor *cpu_ref)
{
    ferry_tensor *g = NULL, *g32 = NULL, *r32 = NULL;
    ASSERT_OK(ferry_tensor_cpu(gpu, &g));
    ASSERT_OK(ferry_tensor_to_dtype(g, FERRY_DTYPE_F32, &g32));
    ASSERT_OK(ferry_tensor_to_dtype(cpu_ref, FERRY_DTYPE_F32, &r32));
    ASSERT_EQ_INT(ferry_tensor_numel(g32), ferry_tensor_numel(r32));
    float *a = host(g32), *b = host(r32);
    double num = 0, den = 0;
    for (int64_t i = 0; i < ferry_tensor_numel(r32); i++) {
        num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        den += (double)b[i] * b[i];
    }
    free(a); free(b);
    ferry_tensor_release(g); ferry_tensor_release(g32); ferry_tensor_release(r32);
    return den > 0 ? num / den : num;
}

static double bound(ferry_dtype dt) { return dt == FERRY_DTYPE_F32 ? 1e-10 : dt == FERRY_DTYPE_F16 ? 1e-5 : 1e-4; }

/* Runs the op on the CPU in f32 (from the dtype-rounded inputs) and on CUDA in dt. */
typedef ferry_status (*op2_fn)(ferry_tensor *a, ferry_tensor *b, ferry_tensor **out);

static void check_cuda(const char *what, op2_fn fn, const int64_t *sa, size_t na, const int64_t *sb, size_t nb,
                       bool positive)
{
    static const ferry_dtype dts[3] = {FERRY_DTYPE_F32, FERRY_DTYPE_F16, FERRY_DTYPE_BF16};
    for (int d = 0; d < 3; d++) {
        ferry_tensor *a = NULL, *b = NULL, *ah = NULL, *bh = NULL, *a32 = NULL, *b32 = NULL;
        ferry_tensor *ga = NULL, *gb = NULL, *gy = NULL, *ry = NULL;
        if (positive) { /* in [0.1, 1.1): safe for log and division */
            ferry_tensor *u = NULL;
            ASSERT_OK(ferry_tensor_rand(sa, na, FERRY_DTYPE_F32, CPU, 11, &u));
            ASSERT_OK(ferry_add_scalar(u, 0.1, NULL, &a));
            ferry_tensor_release(u);
        } else
            ASSERT_OK(ferry_tensor_randn(sa, na, FERRY_DTYPE_F32, CPU, 11, &a));
        ASSERT_OK(ferry_tensor_randn(sb ? sb : sa, sb ? nb : na, FERRY_DTYPE_F32, CPU, 12, &b));
        ASSERT_OK(ferry_tensor_to_dtype(a, dts[d], &ah));
        ASSERT_OK(ferry_tensor_to_dtype(b, dts[d], &bh));
        ASSERT_OK(ferry_tensor_to_dtype(ah, FERRY_DTYPE_F32, &a32));
        ASSERT_OK(ferry_tensor_to_dtype(bh, FERRY_DTYPE_F32, &b32));
        ASSERT_OK(ferry_tensor_to(ah, ferry_cuda(0), false, &ga));
        ASSERT_OK(ferry_tensor_to(bh, ferry_cuda(0), false, &gb));
        ASSERT_OK(fn(a32, b32, &ry));
        ASSERT_OK(fn(ga, gb, &gy));
        double e = nerr(gy, ry);
        ASSERT_MSG(e <= bound(dts[d]), "%s in %s: normalised error %g > %g", what, ferry_dtype_name(dts[d]), e,
                   bound(dts[d]));
        ferry_tensor *all[] = {a, b, ah, bh, a32, b32, ga, gb, gy, ry};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            ferry_tensor_release(all[i]);
    }
}

static ferry_status op_add(ferry_tensor *a, ferry_tensor *b, ferry_tensor **o) { return ferry_add(a, b, NULL, o); }
static ferry_status op_sub(ferry_tensor *a, ferry_tensor *b, ferry_tensor **o) { return ferry_sub(a, b, NULL, o); }
static ferry_status op_mul(ferry_tensor *a, ferry_tensor *b, ferry_tensor **o) { return ferry_mul(a, b, NULL, o); }
static ferry_status op_div(ferry_tensor *a, ferry_tensor *b, ferry_tensor **o) { return ferry_div(b, a, NULL, o); }
static ferry_status op_relu(ferry_tensor *a, ferry_tensor *b, ferry_tensor **o) { (void)b; return ferry_relu(a, NULL, o); }
static ferry_status op_gelu(ferry_tensor *a, ferry_tensor *b, ferry_tensor **o) { (void)b; return ferry_gelu(a, NULL, o); }
static ferry_status op_exp(ferry_tensor *a, ferry_tensor *b, ferry_tensor **o) { (void)b; return ferry_exp(a, NULL, o); }
static ferry_status op_log(ferry_tensor *a, ferry_tensor *b, ferry_tensor **o) { (void)b; return ferry_ln(a, NULL, o); }
static ferry_status op_smul(ferry_tensor *a, ferry_tensor *b, ferry_tensor **o) { (void)b; return ferry_mul_scalar(a, -3.0, NULL, o); }
static ferry_status op_sum(ferry_tensor *a, ferry_tensor *b, ferry_tensor **o) { (void)b; return ferry_sum(a, 1, false, NULL, o); }
static ferry_status op_mean(ferry_tensor *a, ferry_tensor *b, ferry_tensor **o) { (void)b; return ferry_mean(a, 0, false, NULL, o); }
static ferry_status op_max(ferry_tensor *a, ferry_tensor *b, ferry_tensor **o) { (void)b; return ferry_max(a, -1, true, NULL, o); }
static ferry_status op_argmax(ferry_tensor *a, ferry_tensor *b, ferry_tensor **o)
{
    (void)b;
    ferry_tensor *i = NULL;
    ferry_status st = ferry_argmax(a, 1, false, NULL, &i);
    if (st == FERRY_OK)
        st = ferry_tensor_to_dtype(i, FERRY_DTYPE_F32, o);
    ferry_tensor_release(i);
    return st;
}
static ferry_status op_softmax(ferry_tensor *a, ferry_tensor *b, ferry_tensor **o) { (void)b; return ferry_softmax(a, 1, NULL, o); }
static ferry_status op_lsm(ferry_tensor *a, ferry_tensor *b, ferry_tensor **o) { (void)b; return ferry_log_softmax(a, 0, NULL, o); }
static ferry_status op_mm(ferry_tensor *a, ferry_tensor *b, ferry_tensor **o) { return ferry_matmul(a, b, NULL, o); }
static ferry_status op_mmt(ferry_tensor *a, ferry_tensor *b, ferry_tensor **o)
{
    ferry_tensor *t = NULL;
    ferry_status st = ferry_tensor_transpose(b, 0, 1, &t);
    if (st == FERRY_OK)
        st = ferry_matmul(a, t, NULL, o);
    ferry_tensor_release(t);
    return st;
}
static ferry_status op_transpose_copy(ferry_tensor *a, ferry_tensor *b, ferry_tensor **o)
{
    (void)b;
    ferry_tensor *t = NULL;
    ferry_status st = ferry_tensor_transpose(a, 0, 1, &t);
    if (st == FERRY_OK)
        st = ferry_tensor_contiguous(t, NULL, o);
    ferry_tensor_release(t);
    return st;
}

TEST(cuda_elementwise_matches_cpu)
{
    ft_require_cuda();
    int64_t s[2] = {33, 65}, row[1] = {65};
    check_cuda("add", op_add, s, 2, row, 1, false);
    check_cuda("sub", op_sub, s, 2, s, 2, false);
    check_cuda("mul", op_mul, s, 2, row, 1, false);
    check_cuda("div", op_div, s, 2, s, 2, true);
    check_cuda("relu", op_relu, s, 2, NULL, 0, false);
    check_cuda("gelu", op_gelu, s, 2, NULL, 0, false);
    check_cuda("exp", op_exp, s, 2, NULL, 0, false);
    check_cuda("log", op_log, s, 2, NULL, 0, true);
    check_cuda("mul_scalar", op_smul, s, 2, NULL, 0, false);
    check_cuda("transpose+contiguous", op_transpose_copy, s, 2, NULL, 0, false);
}

TEST(cuda_reductions_match_cpu)
{
    ft_require_cuda();
    int64_t s[2] = {37, 1000};
    check_cuda("sum", op_sum, s, 2, NULL, 0, false);
    check_cuda("mean", op_mean, s, 2, NULL, 0, false);
    check_cuda("max", op_max, s, 2, NULL, 0, false);
    check_cuda("argmax", op_argmax, s, 2, NULL, 0, false);
    check_cuda("softmax", op_softmax, s, 2, NULL, 0, false);
    check_cuda("log_softmax", op_lsm, s, 2, NULL, 0, false);
}

TEST(cuda_matmul_matches_cpu)
{
    ft_require_cuda();
    int64_t a[2] = {64, 96}, b[2] = {96, 48}, bt[2] = {48, 96}, a3[3] = {3, 17, 40}, b3[3] = {3, 40, 9};
    check_cuda("matmul", op_mm, a, 2, b, 2, false);
    check_cuda("matmul (transposed view)", op_mmt, a, 2, bt, 2, false);
    check_cuda("bmm", op_mm, a3, 3, b3, 3, false);
}

TEST(cuda_rand_matches_cpu)
{
    ft_require_cuda();
    int64_t n = 4099;
    for (int normal = 0; normal < 2; normal++) {
        ferry_tensor *c = NULL, *g = NULL;
        if (normal) {
            ASSERT_OK(ferry_tensor_randn(&n, 1, FERRY_DTYPE_F32, CPU, 3, &c));
            ASSERT_OK(ferry_tensor_randn(&n, 1, FERRY_DTYPE_F32, ferry_cuda(0), 3, &g));
        } else {
            ASSERT_OK(ferry_tensor_rand(&n, 1, FERRY_DTYPE_F32, CPU, 3, &c));
            ASSERT_OK(ferry_tensor_rand(&n, 1, FERRY_DTYPE_F32, ferry_cuda(0), 3, &g));
        }
        ASSERT(nerr(g, c) < 1e-10);
        ferry_tensor_release(c);
        ferry_tensor_release(g);
    }
}

TEST(cuda_copy_round_trip_and_mismatch)
{
    ft_require_cuda();
    int64_t s[2] = {5, 7};
    ferry_tensor *a = mk(s, 2, 1), *g = NULL, *back = NULL, *y = NULL;
    ASSERT_OK(ferry_tensor_to(a, ferry_cuda(0), false, &g));
    ASSERT_OK(ferry_tensor_cpu(g, &back));
    float *x = host(a), *z = host(back);
    ASSERT_MEM_EQ(x, z, 35 * sizeof(float));
    free(x); free(z);
    ASSERT_STATUS(ferry_matmul(g, a, NULL, &y), FERRY_ERR_DEVICE_MISMATCH);
    ASSERT_STR_EQ(ferry_last_error(),
                  "ferry_matmul: expected all tensors to be on the same device, but found cuda:0 and cpu");
    ferry_tensor_release(a); ferry_tensor_release(g); ferry_tensor_release(back);
}

/* Threads that come and go, each running a matmul on cuda:0, leave nothing
 * behind: cuBLAS handles come from a pool (reused across threads), workspaces
 * from the caching allocator, so device memory stays bounded by what ran at
 * once and, on the simulated GPU, so do the live handles. */
#if FERRY_SIM_KERNELS
long ferry_simblas_live(void); /* model/kernels/sim/cublas_sim.c */
#endif
#define GEMM_THREADS_AT_ONCE 8

static void *matmul_thread(void *arg)
{
    ferry_status *st = arg;
    int64_t shape[2] = {8, 8};
    ferry_tensor *a = NULL, *c = NULL;
    *st = ferry_tensor_ones(shape, 2, FERRY_DTYPE_F32, ferry_cuda(0), &a);
    if (*st == FERRY_OK)
        *st = ferry_matmul(a, a, NULL, &c);
    if (*st == FERRY_OK)
        *st = ferry_device_synchronize(ferry_cuda(0));
    ferry_tensor_release(c);
    ferry_tensor_release(a);
    return NULL;
}

static void run_matmul_threads(int rounds)
{
    for (int r = 0; r < rounds; r++) {
        pthread_t th[GEMM_THREADS_AT_ONCE];
        ferry_status st[GEMM_THREADS_AT_ONCE];
        for (int i = 0; i < GEMM_THREADS_AT_ONCE; i++)
            ASSERT(pthread_create(&th[i], NULL, matmul_thread, &st[i]) == 0);
        for (int i = 0; i < GEMM_THREADS_AT_ONCE; i++) {
            pthread_join(th[i], NULL);
            ASSERT_OK(st[i]);
        }
    }
}

TEST(cuda_matmul_threads_leak_no_handles_or_memory)
{
    ft_require_cuda();
    run_matmul_threads(1);
    ferry_memory_stats before, after;
    ASSERT_OK(ferry_memory_stats_get(ferry_cuda(0), &before));
    run_matmul_threads(1000 / GEMM_THREADS_AT_ONCE);
    ASSERT_OK(ferry_memory_stats_get(ferry_cuda(0), &after));
    /* At most a workspace (each pooled cuBLAS handle keeps one: 32 MiB on the
     * simulated GPU's sm_90, issue 41) and the tensors of each thread that ran
     * at once, whatever the number of threads: the cache plateaus. */
    size_t bound = before.reserved_bytes + GEMM_THREADS_AT_ONCE * ((size_t)34 << 20);
    ASSERT_MSG(after.reserved_bytes <= bound, "device memory grew from %zu to %zu bytes",
               before.reserved_bytes, after.reserved_bytes);
#if FERRY_SIM_KERNELS
    if (getenv("FERRY_SIM_GPUS"))
        ASSERT_MSG(ferry_simblas_live() <= GEMM_THREADS_AT_ONCE, "%ld cuBLAS handles live after 1000 threads",
                   ferry_simblas_live());
#endif
    ASSERT_OK(ferry_memory_empty_cache(ferry_cuda(0)));
#if FERRY_SIM_KERNELS
    /* Emptying the cache destroys the idle pooled handles too. */
    if (getenv("FERRY_SIM_GPUS"))
        ASSERT_MSG(ferry_simblas_live() == 0, "%ld cuBLAS handles live after ferry_memory_empty_cache",
                   ferry_simblas_live());
#endif
    /* and the next matmul makes a new one. */
    run_matmul_threads(1);
    ASSERT_OK(ferry_memory_empty_cache(ferry_cuda(0)));
}

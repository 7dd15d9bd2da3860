/* CPU kernels for the tensor ops: fill, convert, elementwise maps with
 * broadcasting, reductions, softmax, gemm (CBLAS) and Philox random numbers.
 * These are also the reference the CUDA kernels are tested against, so they
 * favour plain, obviously-right loops (in double where it is cheap) over speed;
 * the layers' hot paths use the f32 kernels in kernels/cpu/nn.c and sgemm. The
 * per-element formulas are in kernels/formulas.h, shared with the CUDA kernels. */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "common/blas.h"
#include "common/error.h"
#include "model/kernels/formulas.h"
#include "model/kernels/kernels.h"

void fk_std(ferry_dtype dt, void *p, int64_t i, double v)
{
    switch (dt) {
    case FERRY_DTYPE_F32: ((float *)p)[i] = (float)v; break;
    case FERRY_DTYPE_F16: ((uint16_t *)p)[i] = ferry_f32_to_f16((float)v); break;
    case FERRY_DTYPE_BF16: ((uint16_t *)p)[i] = ferry_f32_to_bf16((float)v); break;
    /* Saturate: images converted back to bytes should clamp, not wrap. */
    case FERRY_DTYPE_U8: ((uint8_t *)p)[i] = (uint8_t)fk_sat(v, 0, UINT8_MAX); break;
    case FERRY_DTYPE_I32: ((int32_t *)p)[i] = (int32_t)fk_sat(v, INT32_MIN, INT32_MAX); break;
    case FERRY_DTYPE_I64: ((int64_t *)p)[i] = fk_sat(v, INT64_MIN, INT64_MAX); break;
    case FERRY_DTYPE_U16: ((uint16_t *)p)[i] = (uint16_t)fk_sat(v, 0, UINT16_MAX); break;
    case FERRY_DTYPE_U32: ((uint32_t *)p)[i] = (uint32_t)fk_sat(v, 0, UINT32_MAX); break;
    default: break;
    }
}

ferry_status fk_no_backend(const fk_ctx *c)
{
    char name[FERRY_DEVICE_NAME_MAX], sname[FERRY_DEVICE_NAME_MAX];
    if (c->stream && !ferry_device_eq(ferry_stream_device(c->stream), c->dev))
        return ferry_fail(FERRY_ERR_DEVICE_MISMATCH, "the tensors are on %s but the stream is on %s",
                          ferry_device_format(c->dev, name, sizeof name),
                          ferry_device_format(ferry_stream_device(c->stream), sname, sizeof sname));
    return ferry_fail(FERRY_ERR_NO_DEVICE, "no kernels for device %s",
                      ferry_device_format(c->dev, name, sizeof name));
}

/* Calls fn once per innermost row of the iteration space with the row's
 * starting offsets; the row has shape[ndim-1] elements. */
typedef void (*nd_row_fn)(void *ctx, int64_t o, int64_t a, int64_t b, int64_t n, int64_t so,
                          int64_t sa, int64_t sb);

static void nd_rows(const fk_nd *nd, nd_row_fn fn, void *ctx)
{
    if (nd->numel == 0)
        return;
    if (nd->ndim == 0) {
        fn(ctx, 0, 0, 0, 1, 0, 0, 0);
        return;
    }
    int last = nd->ndim - 1;
    int64_t idx[FERRY_MAX_DIMS] = {0};
    int64_t o = 0, a = 0, b = 0;
    for (;;) {
        fn(ctx, o, a, b, nd->shape[last], nd->so[last], nd->sa[last], nd->sb[last]);
        int d = last - 1;
        for (; d >= 0; d--) {
            idx[d]++;
            o += nd->so[d];
            a += nd->sa[d];
            b += nd->sb[d];
            if (idx[d] < nd->shape[d])
                break;
            o -= nd->so[d] * nd->shape[d];
            a -= nd->sa[d] * nd->shape[d];
            b -= nd->sb[d] * nd->shape[d];
            idx[d] = 0;
        }
        if (d < 0)
            return;
    }
}

struct fill_ctx { ferry_dtype dt; void *y; double v; };

/* Zero is all-zero bits in every ferry dtype. */
static bool fm_bits_zero(ferry_dtype dt) { return ferry_dtype_size(dt) != 0; }

static void fill_row(void *vc, int64_t o, int64_t a, int64_t b, int64_t n, int64_t so,
                     int64_t sa, int64_t sb)
{
    (void)a; (void)b; (void)sa; (void)sb;
    struct fill_ctx *c = vc;
    if (so == 1 && c->v == 0.0 && fm_bits_zero(c->dt)) {
        size_t es = ferry_dtype_size(c->dt);
        memset((char *)c->y + (size_t)o * es, 0, (size_t)n * es);
        return;
    }
    if (so == 1 && c->dt == FERRY_DTYPE_F32) {
        float *y = (float *)c->y + o, v = (float)c->v;
        for (int64_t i = 0; i < n; i++)
            y[i] = v;
        return;
    }
    for (int64_t i = 0; i < n; i++)
        fk_std(c->dt, c->y, o + i * so, c->v);
}

ferry_status fk_cpu_fill(const fk_ctx *c, ferry_dtype dt, void *y, const fk_nd *nd, double v)
{
    (void)c;
    struct fill_ctx fc = {dt, y, v};
    nd_rows(nd, fill_row, &fc);
    return FERRY_OK;
}

struct conv_ctx { ferry_dtype ydt, xdt; void *y; const void *x; double mul, add; };

static void convert_row(void *vc, int64_t o, int64_t a, int64_t b, int64_t n, int64_t so,
                        int64_t sa, int64_t sb)
{
    (void)b; (void)sb;
    struct conv_ctx *c = vc;
    if (c->ydt == c->xdt && c->mul == 1.0 && c->add == 0.0 && so == 1 && sa == 1) {
        size_t es = ferry_dtype_size(c->ydt);
        memcpy((char *)c->y + (size_t)o * es, (const char *)c->x + (size_t)a * es, (size_t)n * es);
        return;
    }
    /* The hot conversions of a training loop: u8 images and f32 to f32. */
    if (c->ydt == FERRY_DTYPE_F32 && so == 1 && sa == 1 &&
        (c->xdt == FERRY_DTYPE_U8 || c->xdt == FERRY_DTYPE_F32)) {
        float *y = (float *)c->y + o, mul = (float)c->mul, add = (float)c->add;
        if (c->xdt == FERRY_DTYPE_U8) {
            const uint8_t *x = (const uint8_t *)c->x + a;
            for (int64_t i = 0; i < n; i++)
                y[i] = (float)x[i] * mul + add;
        } else {
            const float *x = (const float *)c->x + a;
            for (int64_t i = 0; i < n; i++)
                y[i] = x[i] * mul + add;
        }
        return;
    }
    if (c->ydt == FERRY_DTYPE_I64 && c->xdt == FERRY_DTYPE_I64 && c->mul == 1.0 && c->add == 0.0) {
        for (int64_t i = 0; i < n; i++) /* exact: no trip through double */
            ((int64_t *)c->y)[o + i * so] = ((const int64_t *)c->x)[a + i * sa];
        return;
    }
    for (int64_t i = 0; i < n; i++)
        fk_std(c->ydt, c->y, o + i * so, fk_affine(fk_ldd(c->xdt, c->x, a + i * sa), c->mul, c->add));
}

ferry_status fk_cpu_convert(const fk_ctx *c, ferry_dtype ydt, void *y, ferry_dtype xdt,
                            const void *x, const fk_nd *nd, double mul, double add)
{
    (void)c;
    struct conv_ctx cc = {ydt, xdt, y, x, mul, add};
    nd_rows(nd, convert_row, &cc);
    return FERRY_OK;
}

struct map_ctx { int op; ferry_dtype dt; void *y; const void *a, *b; double s; };

static void unary_row(void *vc, int64_t o, int64_t a, int64_t b, int64_t n, int64_t so,
                      int64_t sa, int64_t sb)
{
    (void)b; (void)sb;
    struct map_ctx *c = vc;
    /* The f32 fast path rounds the scalar to f32 first, so for a scalar that is
     * not an f32 (0.1) it can differ from fk_uop_apply by an ulp; kept as it was. */
    if (c->dt == FERRY_DTYPE_F32 && so == 1 && sa == 1 &&
        (c->op == FK_RELU || c->op == FK_ADD_S || c->op == FK_MUL_S)) {
        float *y = (float *)c->y + o, s = (float)c->s;
        const float *x = (const float *)c->a + a;
        if (c->op == FK_RELU)
            for (int64_t i = 0; i < n; i++)
                y[i] = x[i] > 0.0f ? x[i] : 0.0f;
        else if (c->op == FK_ADD_S)
            for (int64_t i = 0; i < n; i++)
                y[i] = x[i] + s;
        else
            for (int64_t i = 0; i < n; i++)
                y[i] = x[i] * s;
        return;
    }
    for (int64_t i = 0; i < n; i++)
        fk_std(c->dt, c->y, o + i * so, fk_uop_apply(c->op, fk_ldd(c->dt, c->a, a + i * sa), c->s));
}

static void binary_row(void *vc, int64_t o, int64_t a, int64_t b, int64_t n, int64_t so,
                       int64_t sa, int64_t sb)
{
    struct map_ctx *c = vc;
    /* f32 + - * / round exactly as fk_bop_apply's double op rounded to f32. */
    if (c->dt == FERRY_DTYPE_F32 && so == 1 && (sa == 1 || sa == 0) && (sb == 1 || sb == 0) &&
        c->op <= FK_DIV) {
        float *y = (float *)c->y + o;
        const float *x = (const float *)c->a + a, *z = (const float *)c->b + b;
        for (int64_t i = 0; i < n; i++) {
            float u = x[i * sa], v = z[i * sb];
            y[i] = c->op == FK_ADD ? u + v : c->op == FK_SUB ? u - v : c->op == FK_MUL ? u * v : u / v;
        }
        return;
    }
    for (int64_t i = 0; i < n; i++)
        fk_std(c->dt, c->y, o + i * so,
               fk_bop_apply(c->op, fk_ldd(c->dt, c->a, a + i * sa), fk_ldd(c->dt, c->b, b + i * sb)));
}

ferry_status fk_cpu_unary(const fk_ctx *c, fk_uop op, ferry_dtype dt, void *y, const void *x,
                          const fk_nd *nd, double alpha)
{
    (void)c;
    struct map_ctx mc = {(int)op, dt, y, x, NULL, alpha};
    nd_rows(nd, unary_row, &mc);
    return FERRY_OK;
}

ferry_status fk_cpu_binary(const fk_ctx *c, fk_bop op, ferry_dtype dt, void *y, const void *a,
                           const void *b, const fk_nd *nd)
{
    (void)c;
    struct map_ctx mc = {(int)op, dt, y, a, b, 0};
    nd_rows(nd, binary_row, &mc);
    return FERRY_OK;
}

ferry_status fk_cpu_reduce(const fk_ctx *c, fk_rop op, ferry_dtype dt, void *y, const void *x,
                           int64_t outer, int64_t n, int64_t inner)
{
    (void)c;
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t i = 0; i < inner; i++) {
            int64_t base = o * n * inner + i;
            double acc = fk_reduce_init(op);
            int64_t arg = 0;
            for (int64_t j = 0; j < n; j++)
                fk_reduce_step(op, &acc, &arg, fk_ldd(dt, x, base + j * inner), j);
            acc = fk_reduce_final(op, acc, n);
            if (op == FK_ARGMAX)
                ((int64_t *)y)[o * inner + i] = arg;
            else
                fk_std(dt, y, o * inner + i, acc);
        }
    }
    return FERRY_OK;
}

ferry_status fk_cpu_softmax(const fk_ctx *c, bool log_, ferry_dtype dt, void *y, const void *x,
                            int64_t outer, int64_t n, int64_t inner)
{
    (void)c;
    if (n < 1) /* an empty axis: y has no elements */
        return FERRY_OK;
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t i = 0; i < inner; i++) {
            int64_t base = o * n * inner + i;
            double mx = -INFINITY;
            for (int64_t j = 0; j < n; j++) {
                double v = fk_ldd(dt, x, base + j * inner);
                mx = v > mx ? v : mx;
            }
            /* The sum starts from its first term (n >= 1), so it is never the 0 that
             * log would turn into -inf; the max's own term makes it >= 1. */
            double sum = exp(fk_ldd(dt, x, base) - mx);
            for (int64_t j = 1; j < n; j++)
                sum += exp(fk_ldd(dt, x, base + j * inner) - mx);
            /* (x - mx) - log(sum), as the CUDA kernel: mx + log(sum) would round at
             * mx's magnitude. */
            double ls = log(sum);
            for (int64_t j = 0; j < n; j++) {
                double v = (fk_ldd(dt, x, base + j * inner) - mx) - ls;
                fk_std(dt, y, base + j * inner, log_ ? v : exp(v));
            }
        }
    }
    return FERRY_OK;
}

ferry_status fk_f32_gemm(const fk_ctx *c, const fk_gemm *g)
{
    (void)c;
    int64_t m = g->m, n = g->n, k = g->k, ldc = g->ldc;
    if (m == 0 || n == 0)
        return FERRY_OK;
    if (m > FERRY_BLAS_INT_MAX || n > FERRY_BLAS_INT_MAX || k > FERRY_BLAS_INT_MAX ||
        g->lda > FERRY_BLAS_INT_MAX || g->ldb > FERRY_BLAS_INT_MAX || ldc > FERRY_BLAS_INT_MAX)
        return ferry_fail(FERRY_ERR_LIMIT,
                          "gemm dimensions (m %" PRId64 ", n %" PRId64 ", k %" PRId64
                          ", leading dimensions %" PRId64 ", %" PRId64 ", %" PRId64
                          ") exceed CBLAS's int (at most %d)",
                          m, n, k, g->lda, g->ldb, ldc, FERRY_BLAS_INT_MAX);
    float beta = g->beta;
    for (int64_t i = 0; i < g->batch; i++) {
        float *cp = (float *)g->c + i * g->stride_c;
        if (k == 0) { /* sgemm with k = 0 is legal but some BLAS reject lda = 0 */
            for (int64_t r = 0; r < m; r++)
                for (int64_t q = 0; q < n; q++)
                    cp[r * ldc + q] = beta == 0 ? 0 : beta * cp[r * ldc + q];
            continue;
        }
        cblas_sgemm(CblasRowMajor, g->ta ? CblasTrans : CblasNoTrans, g->tb ? CblasTrans : CblasNoTrans,
                    (int)m, (int)n, (int)k, g->alpha, (const float *)g->a + i * g->stride_a, (int)g->lda,
                    (const float *)g->b + i * g->stride_b, (int)g->ldb, beta, cp, (int)ldc);
    }
    return FERRY_OK;
}

/* Element i of a random tensor draws from one Philox block whose counter is
 * (i, stream) and key the seed (fk_rand_elem), so any backend and any split of
 * the work gives the same numbers. */
ferry_status fk_cpu_rand(const fk_ctx *c, ferry_dtype dt, void *y, int64_t n, uint64_t seed,
                         uint64_t stream, bool normal)
{
    (void)c;
    for (int64_t i = 0; i < n; i++)
        fk_std(dt, y, i, fk_rand_elem(i, seed, stream, normal));
    return FERRY_OK;
}

/* f16/bf16 on the CPU: each layer kernel converts its half operands to f32
 * scratch, runs the f32 kernel and rounds the results back. Slower than f32
 * (the CPU has no half arithmetic to win), but it makes mixed precision and
 * half models run, and be tested, on any machine. f32 goes straight through. */
#include <string.h>

#include "common/error.h"
#include "model/kernels/kernels.h"
#include "tensor/internal.h"

/* Up to 4 scratch buffers per call, freed together. */
typedef struct scratch {
    float *p[4];
    int n;
} scratch;

static float *in32(scratch *s, ferry_dtype dt, const void *src, int64_t n)
{
    float *f = ferry_host_malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    if (!f)
        return NULL;
    s->p[s->n++] = f;
    if (src && n > 0)
        ferry_convert_host_(src, dt, f, FERRY_DTYPE_F32, n);
    else if (n > 0)
        memset(f, 0, (size_t)n * sizeof(float));
    return f;
}

static void out16(ferry_dtype dt, void *dst, const float *f, int64_t n)
{
    if (dst && n > 0)
        ferry_convert_host_(f, FERRY_DTYPE_F32, dst, dt, n);
}

static ferry_status done(scratch *s, ferry_status st)
{
    for (int i = 0; i < s->n; i++)
        ferry_host_free(s->p[i]);
    return st;
}

static ferry_status half_only(ferry_dtype dt, const char *what)
{
    if (dt == FERRY_DTYPE_F16 || dt == FERRY_DTYPE_BF16)
        return FERRY_OK;
    return ferry_fail(FERRY_ERR_DTYPE, "%s on the CPU supports f32, f16 and bf16, not %s", what, ferry_dtype_name(dt));
}

#define PASS_F32(name, ...)                                                                        \
    do {                                                                                           \
        if (dt == FERRY_DTYPE_F32)                                                                 \
            return fk_f32_##name(c, __VA_ARGS__);                                                  \
        ferry_status hs_ = half_only(dt, #name);                                                   \
        if (hs_ != FERRY_OK)                                                                       \
            return hs_;                                                                            \
    } while (0)

#define NEED(ptr)                                                                                  \
    do {                                                                                           \
        if (!(ptr))                                                                                \
            return done(&s, FERRY_ERR_NO_MEMORY);                                                  \
    } while (0)

/* Elements spanned by `batch` row-major matrices of rows x cols with leading
 * dimension ld, `stride` apart. */
static int64_t extent(int64_t batch, int64_t stride, int64_t rows, int64_t cols, int64_t ld)
{
    if (batch == 0 || rows == 0 || cols == 0)
        return 0;
    return (batch - 1) * stride + (rows - 1) * ld + cols;
}

ferry_status fk_cpu_gemm(const fk_ctx *c, const fk_gemm *g)
{
    ferry_dtype dt = g->dt;
    PASS_F32(gemm, g);
    scratch s = {{0}, 0};
    int64_t ea = extent(g->batch, g->stride_a, g->ta ? g->k : g->m, g->ta ? g->m : g->k, g->lda);
    int64_t eb = extent(g->batch, g->stride_b, g->tb ? g->n : g->k, g->tb ? g->k : g->n, g->ldb);
    int64_t ec = extent(g->batch, g->stride_c, g->m, g->n, g->ldc);
    float *fa = in32(&s, dt, g->a, ea), *fb = in32(&s, dt, g->b, eb);
    float *fc = in32(&s, dt, g->beta != 0.0f ? g->c : NULL, ec);
    NEED(fa && fb && fc);
    fk_gemm f = *g;
    f.dt = FERRY_DTYPE_F32;
    f.a = fa;
    f.b = fb;
    f.c = fc;
    ferry_status st = fk_f32_gemm(c, &f);
    /* Only C's m x n elements go back: the gaps of ldc > n and stride_c > m ldc
     * are not C's (with beta = 0 the scratch holds zeros there). */
    size_t es = ferry_dtype_size(dt);
    for (int64_t i = 0; st == FERRY_OK && i < g->batch; i++)
        for (int64_t r = 0; r < g->m && g->n > 0; r++) {
            int64_t off = i * g->stride_c + r * g->ldc;
            out16(dt, (char *)g->c + (size_t)off * es, fc + off, g->n);
        }
    return done(&s, st);
}

ferry_status fk_cpu_bias_add(const fk_ctx *c, ferry_dtype dt, void *y, const void *b, int64_t outer, int64_t ch,
                             int64_t inner, bool relu)
{
    PASS_F32(bias_add, dt, y, b, outer, ch, inner, relu);
    scratch s = {{0}, 0};
    int64_t n = outer * ch * inner;
    float *fy = in32(&s, dt, y, n), *fb = in32(&s, dt, b, ch);
    NEED(fy && fb);
    /* The add rounds to dt first: the ReLU then sees what an unfused ReLU would. */
    ferry_status st = fk_f32_bias_add(c, FERRY_DTYPE_F32, fy, fb, outer, ch, inner, false);
    out16(dt, y, fy, n);
    if (st == FERRY_OK && relu) {
        uint16_t *yp = y;
        for (int64_t i = 0; i < n; i++)
            if (!(fk_ldf(dt, y, i) > 0))
                yp[i] = 0;
    }
    return done(&s, st);
}

ferry_status fk_cpu_bias_grad(const fk_ctx *c, ferry_dtype dt, void *db, const void *dy, int64_t outer, int64_t ch,
                              int64_t inner)
{
    PASS_F32(bias_grad, dt, db, dy, outer, ch, inner);
    scratch s = {{0}, 0};
    float *fdb = in32(&s, dt, db, ch), *fdy = in32(&s, dt, dy, outer * ch * inner);
    NEED(fdb && fdy);
    ferry_status st = fk_f32_bias_grad(c, FERRY_DTYPE_F32, fdb, fdy, outer, ch, inner);
    out16(dt, db, fdb, ch);
    return done(&s, st);
}

ferry_status fk_cpu_relu_bwd(const fk_ctx *c, ferry_dtype dt, void *dx, const void *y, const void *dy, int64_t n)
{
    PASS_F32(relu_bwd, dt, dx, y, dy, n);
    scratch s = {{0}, 0};
    float *fy = in32(&s, dt, y, n), *fdy = in32(&s, dt, dy, n), *fdx = in32(&s, dt, NULL, n);
    NEED(fy && fdy && fdx);
    ferry_status st = fk_f32_relu_bwd(c, FERRY_DTYPE_F32, fdx, fy, fdy, n);
    out16(dt, dx, fdx, n);
    return done(&s, st);
}

ferry_status fk_cpu_cross_entropy(const fk_ctx *c, ferry_dtype dt, const void *logits, ferry_dtype ldt,
                                  const void *labels, void *dlogits, const fk_xent *r)
{
    PASS_F32(cross_entropy, dt, logits, ldt, labels, dlogits, r);
    scratch s = {{0}, 0};
    int64_t n = r->rows * r->classes;
    float *fx = in32(&s, dt, logits, n), *fd = dlogits ? in32(&s, dt, NULL, n) : NULL;
    NEED(fx && (fd || !dlogits));
    ferry_status st = fk_f32_cross_entropy(c, FERRY_DTYPE_F32, fx, ldt, labels, fd, r);
    if (fd)
        out16(dt, dlogits, fd, n);
    return done(&s, st);
}

ferry_status fk_cpu_mse(const fk_ctx *c, ferry_dtype dt, const void *p, const void *t, int64_t n, float *loss,
                        float lscale, void *dp, float gscale)
{
    PASS_F32(mse, dt, p, t, n, loss, lscale, dp, gscale);
    scratch s = {{0}, 0};
    float *fp = in32(&s, dt, p, n), *ft = in32(&s, dt, t, n), *fd = dp ? in32(&s, dt, NULL, n) : NULL;
    NEED(fp && ft && (fd || !dp));
    ferry_status st = fk_f32_mse(c, FERRY_DTYPE_F32, fp, ft, n, loss, lscale, fd, gscale);
    if (fd)
        out16(dt, dp, fd, n);
    return done(&s, st);
}

ferry_status fk_cpu_im2col(const fk_ctx *c, ferry_dtype dt, const fk_conv *g, const void *x, void *col)
{
    PASS_F32(im2col, dt, g, x, col);
    scratch s = {{0}, 0};
    int64_t nx = g->n * g->c * g->h * g->w, nc = g->c * g->kh * g->kw * g->n * g->oh * g->ow;
    float *fx = in32(&s, dt, x, nx), *fc = in32(&s, dt, NULL, nc);
    NEED(fx && fc);
    ferry_status st = fk_f32_im2col(c, FERRY_DTYPE_F32, g, fx, fc);
    out16(dt, col, fc, nc);
    return done(&s, st);
}

ferry_status fk_cpu_col2im(const fk_ctx *c, ferry_dtype dt, const fk_conv *g, const void *col, void *x)
{
    PASS_F32(col2im, dt, g, col, x);
    scratch s = {{0}, 0};
    int64_t nx = g->n * g->c * g->h * g->w, nc = g->c * g->kh * g->kw * g->n * g->oh * g->ow;
    float *fc = in32(&s, dt, col, nc), *fx = in32(&s, dt, NULL, nx);
    NEED(fx && fc);
    ferry_status st = fk_f32_col2im(c, FERRY_DTYPE_F32, g, fc, fx);
    out16(dt, x, fx, nx);
    return done(&s, st);
}

ferry_status fk_cpu_maxpool_fwd(const fk_ctx *c, ferry_dtype dt, const fk_conv *g, const void *x, void *y,
                                int32_t *idx)
{
    PASS_F32(maxpool_fwd, dt, g, x, y, idx);
    scratch s = {{0}, 0};
    int64_t nx = g->n * g->c * g->h * g->w, ny = g->n * g->c * g->oh * g->ow;
    float *fx = in32(&s, dt, x, nx), *fy = in32(&s, dt, NULL, ny);
    NEED(fx && fy);
    ferry_status st = fk_f32_maxpool_fwd(c, FERRY_DTYPE_F32, g, fx, fy, idx);
    out16(dt, y, fy, ny);
    return done(&s, st);
}

ferry_status fk_cpu_maxpool_bwd(const fk_ctx *c, ferry_dtype dt, const fk_conv *g, const void *dy,
                                const int32_t *idx, void *dx)
{
    PASS_F32(maxpool_bwd, dt, g, dy, idx, dx);
    scratch s = {{0}, 0};
    int64_t nx = g->n * g->c * g->h * g->w, ny = g->n * g->c * g->oh * g->ow;
    float *fdy = in32(&s, dt, dy, ny), *fdx = in32(&s, dt, NULL, nx);
    NEED(fdy && fdx);
    ferry_status st = fk_f32_maxpool_bwd(c, FERRY_DTYPE_F32, g, fdy, idx, fdx);
    out16(dt, dx, fdx, nx);
    return done(&s, st);
}

ferry_status fk_cpu_avgpool_fwd(const fk_ctx *c, ferry_dtype dt, const fk_conv *g, const void *x, void *y)
{
    PASS_F32(avgpool_fwd, dt, g, x, y);
    scratch s = {{0}, 0};
    int64_t nx = g->n * g->c * g->h * g->w, ny = g->n * g->c * g->oh * g->ow;
    float *fx = in32(&s, dt, x, nx), *fy = in32(&s, dt, NULL, ny);
    NEED(fx && fy);
    ferry_status st = fk_f32_avgpool_fwd(c, FERRY_DTYPE_F32, g, fx, fy);
    out16(dt, y, fy, ny);
    return done(&s, st);
}

ferry_status fk_cpu_avgpool_bwd(const fk_ctx *c, ferry_dtype dt, const fk_conv *g, const void *dy, void *dx)
{
    PASS_F32(avgpool_bwd, dt, g, dy, dx);
    scratch s = {{0}, 0};
    int64_t nx = g->n * g->c * g->h * g->w, ny = g->n * g->c * g->oh * g->ow;
    float *fdy = in32(&s, dt, dy, ny), *fdx = in32(&s, dt, NULL, nx);
    NEED(fdy && fdx);
    ferry_status st = fk_f32_avgpool_bwd(c, FERRY_DTYPE_F32, g, fdy, fdx);
    out16(dt, dx, fdx, nx);
    return done(&s, st);
}

ferry_status fk_cpu_bn_fwd(const fk_ctx *c, ferry_dtype dt, const void *x, void *y, const fk_bn *b)
{
    PASS_F32(bn_fwd, dt, x, y, b);
    scratch s = {{0}, 0};
    int64_t total = b->n * b->ch * b->hw;
    float *fx = in32(&s, dt, x, total), *fy = in32(&s, dt, NULL, total);
    NEED(fx && fy);
    ferry_status st = fk_f32_bn_fwd(c, FERRY_DTYPE_F32, fx, fy, b);
    out16(dt, y, fy, total);
    return done(&s, st);
}

ferry_status fk_cpu_bn_bwd(const fk_ctx *c, ferry_dtype dt, const void *x, const void *dy, void *dx, const fk_bn *b,
                           float *dgamma, float *dbeta)
{
    PASS_F32(bn_bwd, dt, x, dy, dx, b, dgamma, dbeta);
    scratch s = {{0}, 0};
    int64_t total = b->n * b->ch * b->hw;
    float *fx = in32(&s, dt, x, total), *fdy = in32(&s, dt, dy, total), *fdx = dx ? in32(&s, dt, NULL, total) : NULL;
    NEED(fx && fdy && (fdx || !dx));
    ferry_status st = fk_f32_bn_bwd(c, FERRY_DTYPE_F32, fx, fdy, fdx, b, dgamma, dbeta);
    if (fdx)
        out16(dt, dx, fdx, total);
    return done(&s, st);
}

ferry_status fk_cpu_dropout(const fk_ctx *c, ferry_dtype dt, void *y, const void *x, int64_t n, float p,
                            uint64_t seed, uint64_t stream)
{
    PASS_F32(dropout, dt, y, x, n, p, seed, stream);
    scratch s = {{0}, 0};
    float *fx = in32(&s, dt, x, n), *fy = in32(&s, dt, NULL, n);
    NEED(fx && fy);
    ferry_status st = fk_f32_dropout(c, FERRY_DTYPE_F32, fy, fx, n, p, seed, stream);
    out16(dt, y, fy, n);
    return done(&s, st);
}

/* Backend conformance, in the shape of ggml's test-backend-ops. Every kernel of
 * FK_KERNELS has a table of cases (shapes with broadcasting, non-contiguous
 * strides, empty tensors, k = 0 for gemm; every dtype the kernel takes). Each case
 * builds seeded random inputs, runs through the CPU table (fk_cpu_table, the
 * reference) and through every device present: cpu, and cuda:0..N-1, which are
 * real GPUs or the simulated ones of FERRY_SIM_GPUS=N. Device memory is made with
 * tensors, results come back with ferry_memcpy on the case's stream, which is then
 * synchronised. Without a GPU every case still has teeth: the CPU results are
 * checked against naive double loops written here.
 *
 * Comparison: exact kernels (fill, integer outputs of convert and reduce, argmax,
 * max-pool indices, uniform rand, the metric counters) must match bit for bit,
 * and so must the float maps that round one exact operation (binary, most unary
 * ops: BO_BITWISE), but for NaN payloads.
 * The rest must satisfy NMSE = sum (a - b)^2 / sum b^2 <= a bound per dtype
 * (NaN and inf must sit at the same places):
 *   f32 1e-10: reassociated f32 sums and 1-ulp math-library differences give
 *       ~1e-14; TF32 in a gemm or an f32 intermediate where f64 belongs gives
 *       ~1e-7 and fails.
 *   f16 1e-8, bf16 1e-6, and at most 2 + n/10 elements one unit in the last
 *       place apart (those are left out of the NMSE). Two backends that round
 *       nearly equal f32 values to nearest even disagree by one unit only where
 *       the values straddle a rounding boundary: a fraction of a percent of the
 *       elements for random data, a few percent where the exact result lands on
 *       ties (averages of half values by 6, say); one that rounds toward zero
 *       disagrees in about half of them (NMSE ~2e-7 for f16, ~1.3e-5 for bf16)
 *       and fails; anything off by more than a unit is held to the NMSE bound.
 * The naive references are held to the same rules, after their double results
 * are rounded to the output dtype the way the kernels store (f32, then half).
 *
 * FERRY_TEST_SEED=N picks the seed (printed); FERRY_BACKEND_OPS_DIGEST=1 prints a
 * digest of each case's CPU results, to show that a refactor left them alone. */
#include <stdarg.h>
#include <time.h>
#include <stdlib.h>
#include <unistd.h>

#include "harness.h"
#include "ferry/rng.h"
#include "loader/convert.h"
#include "model/kernels/kernels.h"
#include "tensor/internal.h"

/* ---- the kernel list ---- */
#define BO_NAME(name, ...) #name,
/* libferry's data kernels (the tensor core's cast, the loader's batch
 * conversion) are outside FK_KERNELS but are held to the same cases. */
#define BO_DATA_KERNELS(X) X(cast, 0) X(batch_convert, 0)
static const char *const kernel_names[] = {FK_KERNELS(BO_NAME) BO_DATA_KERNELS(BO_NAME)};
#define NKERNELS (sizeof kernel_names / sizeof kernel_names[0])

/* ---- cases ---- */
enum { BI_UNIFORM, BI_CONST, BI_NAN }; /* how a buffer starts */
enum { BC_IN, BC_CLOSE, BC_EXACT };    /* how it is compared afterwards */

#define BO_MAXBUF 16

typedef struct bo_buf {
    const char *name;
    ferry_dtype dt;
    int64_t n;
    int init;
    double lo, hi; /* BI_UNIFORM: range (integers inclusive); BI_CONST: lo */
    int cmp;
    bool null;     /* passed to the kernel as NULL */
    double tol;    /* NMSE bound for this buffer; 0: the dtype's */
} bo_buf;

/* A bound only equal values meet: float results that must match bit for bit,
 * but for NaN payloads (a GPU gives the canonical NaN) and the few one-unit
 * f16/bf16 flips that compare() leaves out of every NMSE. */
#define BO_BITWISE 1e-300

/* Each kernel's parameters, by name, as the case sets them (scales and rates in
 * double; the run casts them to the kernel's f32, the reference reads the same
 * rounded values). */
typedef struct bo_rows {
    int64_t outer, n, inner;
} bo_rows; /* reduce over the middle axis of [outer, n, inner] */

typedef struct bo_softmax {
    int64_t outer, n, inner;
    bool log_softmax;
    bool big_logits; /* logits + 1000: only a max-shifted exp stays finite */
    bool neg_inf;    /* some -inf logits (never a whole row) */
} bo_softmax;

typedef struct bo_gemm {
    bool ta, tb;
    int64_t m, n, k, lda, ldb, ldc, stride_a, stride_b, stride_c, batch;
    double alpha, beta;
} bo_gemm;

typedef struct bo_n {
    int64_t n;
} bo_n; /* cast, relu_bwd */

typedef struct bo_rand {
    int64_t n;
    uint64_t seed, stream;
    bool normal;
} bo_rand;

typedef struct bo_bias {
    int64_t outer, ch, inner;
    bool relu; /* bias_add */
} bo_bias;

typedef struct bo_xent {
    int64_t rows, classes;
    double gscale;
    bool bad_labels; /* rows 1 and 3 labelled outside [0, classes) */
} bo_xent;

typedef struct bo_mse {
    int64_t n;
    double lscale, gscale;
} bo_mse;

typedef struct bo_embed {
    int64_t n, vocab, dim;
    bool bad; /* positions 3 and 5 outside the table */
} bo_embed;

typedef struct bo_bn {
    int64_t n, ch, hw;
    bool training;
    double momentum, eps;
} bo_bn;

typedef struct bo_dropout {
    int64_t n;
    double p;
    uint64_t seed, stream;
} bo_dropout;

typedef struct bo_sgd {
    int64_t n; /* sgd_multi: set per tensor by the reference */
    double lr, momentum, dampening, wd;
    bool nesterov;
} bo_sgd;

typedef struct bo_adam {
    int64_t n;    /* adam_multi: set per tensor by the reference */
    int64_t step; /* adam, adam_multi: the step the consts buffer holds (prep_adam) */
    double lr, b1, b2, eps, wd;
    bool decoupled;
} bo_adam;

typedef struct bo_unscale {
    int64_t n;
    bool with_inf, with_nan; /* an inf at element 7, a NaN at element 3 */
} bo_unscale;

typedef struct bo_amp {
    int64_t interval;
    double growth, backoff;
} bo_amp;

struct bo_case;
typedef ferry_status (*bo_run_fn)(const struct bo_case *t, const fk_ctx *c, void *const *p);
/* Computes the expected outputs in place, from the inputs in the same buffers. */
typedef void (*bo_naive_fn)(const struct bo_case *t, void *const *p);
/* Adjusts the random inputs (labels, ties, specials, indices from a forward). */
typedef void (*bo_prep_fn)(const struct bo_case *t, void *const *p, ferry_rng *r);

typedef struct bo_case {
    const char *kernel;
    char desc[192];
    int nbuf;
    bo_buf buf[BO_MAXBUF];
    ferry_dtype dt, dt2;
    int op;        /* unary, binary, reduce: the fk_uop, fk_bop or fk_rop */
    bool specials; /* inputs with NaN, inf and -0 (convert, cast, binary, reduce, pooling) */
    fk_nd nd;      /* fill, convert, unary, binary */
    fk_conv g;     /* im2col, col2im, pooling */
    ferry_convert_spec bs; /* batch_convert */
    union {        /* the member named after the case's kernel */
        struct {
            double v;
        } fill;
        struct {
            double mul, add;
        } convert;
        struct {
            double alpha;
        } unary;
        bo_rows reduce;
        bo_softmax softmax;
        bo_gemm gemm;
        bo_n cast, relu;
        bo_rand rand;
        bo_bias bias;
        bo_xent xent;
        bo_mse mse;
        bo_bn bn;
        bo_dropout dropout;
        bo_sgd sgd;   /* sgd, sgd_multi */
        bo_adam adam; /* adam_consts, adam, adam_multi */
        bo_unscale unscale;
        bo_amp amp;
        bo_embed embed; /* embed_fwd, embed_bwd (indices dt2) */
    };
    bo_run_fn run;
    bo_naive_fn naive;
    bo_prep_fn prep;
    bool time_only; /* training-size: timed on the GPUs, no reference (cases_timing) */
} bo_case;

static bo_case *cases;
static size_t ncases, cap_cases;
static uint64_t seed;

static bo_case *add_case(const char *kernel, bo_run_fn run, bo_naive_fn naive, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static bo_case *add_case(const char *kernel, bo_run_fn run, bo_naive_fn naive, const char *fmt, ...)
{
    if (ncases == cap_cases) {
        cap_cases = cap_cases ? cap_cases * 2 : 256;
        cases = realloc(cases, cap_cases * sizeof *cases);
        ASSERT(cases);
    }
    bo_case *t = &cases[ncases++];
    memset(t, 0, sizeof *t);
    t->kernel = kernel;
    t->run = run;
    t->naive = naive;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->desc, sizeof t->desc, fmt, ap);
    va_end(ap);
    return t;
}

static bo_buf *add_buf(bo_case *t, const char *name, ferry_dtype dt, int64_t n, int init, double lo, double hi,
                       int cmp)
{
    ASSERT(t->nbuf < BO_MAXBUF);
    bo_buf *b = &t->buf[t->nbuf++];
    b->name = name;
    b->dt = dt;
    b->n = n;
    b->init = init;
    b->lo = lo;
    b->hi = hi;
    b->cmp = cmp;
    return b;
}

/* ---- scalar helpers (the test's own, not the library's) ---- */
static bool is_float(ferry_dtype dt)
{
    return dt == FERRY_DTYPE_F32 || dt == FERRY_DTYPE_F16 || dt == FERRY_DTYPE_BF16;
}

static double ld(ferry_dtype dt, const void *p, int64_t i)
{
    switch (dt) {
    case FERRY_DTYPE_F32: return ((const float *)p)[i];
    case FERRY_DTYPE_F16: return ferry_f16_to_f32(((const uint16_t *)p)[i]);
    case FERRY_DTYPE_BF16: return ferry_bf16_to_f32(((const uint16_t *)p)[i]);
    case FERRY_DTYPE_U8: return ((const uint8_t *)p)[i];
    case FERRY_DTYPE_I32: return ((const int32_t *)p)[i];
    case FERRY_DTYPE_I64: return (double)((const int64_t *)p)[i];
    case FERRY_DTYPE_U16: return ((const uint16_t *)p)[i];
    case FERRY_DTYPE_U32: return ((const uint32_t *)p)[i];
    default: return 0;
    }
}

/* Stores as the kernels document: f32 first, then f16/bf16 to nearest even;
 * integers truncated and saturated, NaN to 0. */
static void st(ferry_dtype dt, void *p, int64_t i, double v)
{
    switch (dt) {
    case FERRY_DTYPE_F32: ((float *)p)[i] = (float)v; break;
    case FERRY_DTYPE_F16: ((uint16_t *)p)[i] = ferry_f32_to_f16((float)v); break;
    case FERRY_DTYPE_BF16: ((uint16_t *)p)[i] = ferry_f32_to_bf16((float)v); break;
    case FERRY_DTYPE_U8: ((uint8_t *)p)[i] = isnan(v) ? 0 : v <= 0 ? 0 : v >= 255 ? 255 : (uint8_t)v; break;
    case FERRY_DTYPE_I32:
        ((int32_t *)p)[i] = isnan(v) ? 0 : v <= -2147483648.0 ? INT32_MIN : v >= 2147483647.0 ? INT32_MAX : (int32_t)v;
        break;
    case FERRY_DTYPE_I64:
        ((int64_t *)p)[i] = isnan(v) ? 0 : v <= -9223372036854775808.0 ? INT64_MIN
                          : v >= 9223372036854775808.0 ? INT64_MAX : (int64_t)v;
        break;
    case FERRY_DTYPE_U16: ((uint16_t *)p)[i] = isnan(v) ? 0 : v <= 0 ? 0 : v >= 65535 ? 65535 : (uint16_t)v; break;
    case FERRY_DTYPE_U32:
        ((uint32_t *)p)[i] = isnan(v) ? 0 : v <= 0 ? 0 : v >= 4294967295.0 ? UINT32_MAX : (uint32_t)v;
        break;
    default: break;
    }
}

static double unif(ferry_rng *r, double lo, double hi)
{
    return lo + (hi - lo) * ((double)ferry_rng_u32(r) / 4294967296.0);
}

static const char *dtn(ferry_dtype dt) { return ferry_dtype_name(dt); }

static const ferry_dtype float_types[] = {FERRY_DTYPE_F32, FERRY_DTYPE_F16, FERRY_DTYPE_BF16};
static const ferry_dtype all_types[] = {FERRY_DTYPE_F32, FERRY_DTYPE_F16, FERRY_DTYPE_BF16,
                                        FERRY_DTYPE_U8,  FERRY_DTYPE_I32, FERRY_DTYPE_I64,
                                        FERRY_DTYPE_U16, FERRY_DTYPE_U32};
#define FOR_FLOAT(dt) for (size_t dt##_i = 0; dt##_i < 3 && ((dt = float_types[dt##_i]), 1); dt##_i++)
#define FOR_ALL(dt) for (size_t dt##_i = 0; dt##_i < 8 && ((dt = all_types[dt##_i]), 1); dt##_i++)

/* NaN, +inf, -inf, -0 and 0 at fixed places of a float buffer. */
static void put_specials(ferry_dtype dt, void *p, int64_t n)
{
    static const int64_t at[] = {1, 4, 6, 9, 11};
    const double v[] = {NAN, INFINITY, -INFINITY, -0.0, 0.0};
    for (int k = 0; k < 5; k++)
        if (at[k] < n)
            st(dt, p, at[k], v[k]);
}

/* Rounds every element to a coarse grid so that maxima tie often. */
static void make_ties(ferry_dtype dt, void *p, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        st(dt, p, i, is_float(dt) ? floor(ld(dt, p, i) * 2.0) / 2.0 : (double)((int64_t)ld(dt, p, i) % 4));
}

/* ---- iteration spaces ---- */
static int64_t nd_off(const fk_nd *nd, const int64_t *str, int64_t flat)
{
    int64_t off = 0;
    for (int d = nd->ndim - 1; d >= 0; d--) {
        off += (flat % nd->shape[d]) * str[d];
        flat /= nd->shape[d];
    }
    return off;
}

/* Elements an operand with strides str spans (strides are >= 0 here). */
static int64_t nd_extent(const fk_nd *nd, const int64_t *str)
{
    if (nd->numel == 0)
        return 0;
    int64_t e = 1;
    for (int d = 0; d < nd->ndim; d++)
        e += (nd->shape[d] - 1) * str[d];
    return e;
}

static fk_nd mk_nd(int ndim, const int64_t *shape, const int64_t *so, const int64_t *sa, const int64_t *sb)
{
    fk_nd nd;
    memset(&nd, 0, sizeof nd);
    nd.ndim = ndim;
    nd.numel = 1;
    for (int d = 0; d < ndim; d++) {
        nd.shape[d] = shape[d];
        nd.so[d] = so[d];
        nd.sa[d] = sa ? sa[d] : 0;
        nd.sb[d] = sb ? sb[d] : 0;
        nd.numel *= shape[d];
    }
    return nd;
}

static const char *nd_str(const fk_nd *nd, char *buf, size_t size)
{
    size_t k = (size_t)snprintf(buf, size, "[");
    for (int d = 0; d < nd->ndim && k < size; d++)
        k += (size_t)snprintf(buf + k, size - k, "%s%lld", d ? "," : "", (long long)nd->shape[d]);
    if (k < size)
        k += (size_t)snprintf(buf + k, size - k, "] so");
    for (int d = 0; d < nd->ndim && k < size; d++)
        k += (size_t)snprintf(buf + k, size - k, "%s%lld", d ? "," : " ", (long long)nd->so[d]);
    if (k < size)
        k += (size_t)snprintf(buf + k, size - k, " sa");
    for (int d = 0; d < nd->ndim && k < size; d++)
        k += (size_t)snprintf(buf + k, size - k, "%s%lld", d ? "," : " ", (long long)nd->sa[d]);
    if (k < size)
        k += (size_t)snprintf(buf + k, size - k, " sb");
    for (int d = 0; d < nd->ndim && k < size; d++)
        k += (size_t)snprintf(buf + k, size - k, "%s%lld", d ? "," : " ", (long long)nd->sb[d]);
    return buf;
}

/* A few iteration spaces for the strided kernels: contiguous, 0-d, transposed
 * input, gaps in the output, broadcast input, empty. */
typedef struct { fk_nd nd; const char *what; } nd_shape;

static int nd_shapes(nd_shape *out)
{
    int n = 0;
    out[n++] = (nd_shape){mk_nd(1, (int64_t[]){67}, (int64_t[]){1}, (int64_t[]){1}, (int64_t[]){1}), "contiguous"};
    out[n++] = (nd_shape){mk_nd(0, NULL, NULL, NULL, NULL), "0-d"};
    out[n++] = (nd_shape){mk_nd(2, (int64_t[]){5, 6}, (int64_t[]){6, 1}, (int64_t[]){1, 5}, (int64_t[]){1, 5}),
                          "transposed input"};
    out[n++] = (nd_shape){mk_nd(2, (int64_t[]){4, 3}, (int64_t[]){1, 9}, (int64_t[]){3, 1}, (int64_t[]){3, 1}),
                          "strided output"};
    out[n++] = (nd_shape){mk_nd(3, (int64_t[]){2, 3, 4}, (int64_t[]){12, 4, 1}, (int64_t[]){0, 4, 1},
                                (int64_t[]){4, 0, 1}),
                          "broadcast"};
    out[n++] = (nd_shape){mk_nd(2, (int64_t[]){3, 0}, (int64_t[]){0, 1}, (int64_t[]){0, 1}, (int64_t[]){0, 1}),
                          "empty"};
    return n;
}

/* ================= the kernels: run, naive reference, cases ================= */

/* ---- fill ---- */
static ferry_status run_fill(const bo_case *t, const fk_ctx *c, void *const *p)
{
    return FK(c, fill, t->dt, p[0], &t->nd, t->fill.v);
}

static void naive_fill(const bo_case *t, void *const *p)
{
    for (int64_t i = 0; i < t->nd.numel; i++)
        st(t->dt, p[0], nd_off(&t->nd, t->nd.so, i), t->fill.v);
}

static void cases_fill(void)
{
    nd_shape sh[8];
    int ns = nd_shapes(sh);
    const double vals[] = {0.0, 2.75, -3.5, 300.0, NAN};
    ferry_dtype dt;
    FOR_ALL(dt)
    for (int s = 0; s < ns; s++)
        for (size_t v = 0; v < sizeof vals / sizeof vals[0]; v++) {
            char nb[160];
            bo_case *t = add_case("fill", run_fill, naive_fill, "%s %s %s value %g", dtn(dt), sh[s].what,
                                  nd_str(&sh[s].nd, nb, sizeof nb), vals[v]);
            t->dt = dt;
            t->nd = sh[s].nd;
            t->fill.v = vals[v];
            add_buf(t, "y", dt, nd_extent(&t->nd, t->nd.so), BI_UNIFORM, -5, 5, BC_EXACT);
        }
}

/* ---- convert ---- */
static ferry_status run_convert(const bo_case *t, const fk_ctx *c, void *const *p)
{
    return FK(c, convert, t->dt, p[0], t->dt2, p[1], &t->nd, t->convert.mul, t->convert.add);
}

static void naive_convert(const bo_case *t, void *const *p)
{
    for (int64_t i = 0; i < t->nd.numel; i++) {
        int64_t o = nd_off(&t->nd, t->nd.so, i), a = nd_off(&t->nd, t->nd.sa, i);
        if (t->dt == FERRY_DTYPE_I64 && t->dt2 == FERRY_DTYPE_I64 && t->convert.mul == 1.0 && t->convert.add == 0.0)
            ((int64_t *)p[0])[o] = ((const int64_t *)p[1])[a];
        else
            st(t->dt, p[0], o, ld(t->dt2, p[1], a) * t->convert.mul + t->convert.add);
    }
}

static void prep_convert(const bo_case *t, void *const *p, ferry_rng *r)
{
    (void)r;
    int64_t n = t->buf[1].n;
    if (is_float(t->dt2) && t->specials)
        put_specials(t->dt2, p[1], n);
    if (t->dt2 == FERRY_DTYPE_I64 && n > 3) { /* values a trip through double would change */
        int64_t *x = p[1];
        x[0] = INT64_MAX - 5;
        x[1] = INT64_MIN + 3;
        x[2] = ((int64_t)1 << 53) + 1;
        x[3] = -(((int64_t)1 << 60) + 7);
    }
}

static void source_range(ferry_dtype dt, double *lo, double *hi)
{
    switch (dt) {
    case FERRY_DTYPE_U8: *lo = 0; *hi = 255; break;
    case FERRY_DTYPE_I32: *lo = -100000; *hi = 100000; break;
    case FERRY_DTYPE_I64: *lo = -1e12; *hi = 1e12; break;
    case FERRY_DTYPE_U16: *lo = 0; *hi = 65535; break;
    case FERRY_DTYPE_U32: *lo = 0; *hi = 4e9; break;
    default: *lo = -300; *hi = 300; break;
    }
}

static void cases_convert(void)
{
    nd_shape sh[8];
    int ns = nd_shapes(sh);
    const double aff[][2] = {{1.0, 0.0}, {0.5, -3.0}, {1.0 / 255.0, 0.25}};
    ferry_dtype y, x;
    FOR_ALL(y)
    FOR_ALL(x)
    for (int s = 0; s < ns; s++)
        for (int a = 0; a < 3; a++) {
            if (a > 0 && s != 0 && s != 2)
                continue; /* scale and shift: contiguous and strided are enough */
            for (int spec = 0; spec < (is_float(x) && s == 0 && a == 0 ? 2 : 1); spec++) {
                char nb[160];
                bo_case *t = add_case("convert", run_convert, naive_convert, "%s <- %s %s %s mul %g add %g%s",
                                      dtn(y), dtn(x), sh[s].what, nd_str(&sh[s].nd, nb, sizeof nb), aff[a][0],
                                      aff[a][1], spec ? " with NaN/inf/-0" : "");
                t->dt = y;
                t->dt2 = x;
                t->nd = sh[s].nd;
                t->convert.mul = aff[a][0];
                t->convert.add = aff[a][1];
                t->specials = spec;
                t->prep = prep_convert;
                double lo, hi;
                source_range(x, &lo, &hi);
                add_buf(t, "y", y, nd_extent(&t->nd, t->nd.so), BI_UNIFORM, 0, 100,
                        is_float(y) ? BC_CLOSE : BC_EXACT);
                add_buf(t, "x", x, nd_extent(&t->nd, t->nd.sa), BI_UNIFORM, lo, hi, BC_IN);
            }
        }
}

/* ---- unary ---- */
static const char *const uop_names[] = {"neg",   "relu", "gelu",  "exp",   "log",   "sqrt",  "tanh",  "sigmoid",
                                        "abs",   "add_s", "mul_s", "rsub_s", "rdiv_s", "pow_s", "max_s", "min_s"};

static ferry_status run_unary(const bo_case *t, const fk_ctx *c, void *const *p)
{
    return FK(c, unary, (fk_uop)t->op, t->dt, p[0], p[1], &t->nd, t->unary.alpha);
}

static double naive_uop(int op, double x, double s)
{
    switch (op) {
    case FK_NEG: return -x;
    case FK_RELU: return x > 0 ? x : 0;
    case FK_GELU: return 0.5 * x * erfc(-x / sqrt(2.0)); /* x Phi(x) */
    case FK_EXP: return exp(x);
    case FK_LOG: return log(x);
    case FK_SQRT: return sqrt(x);
    case FK_TANH: return tanh(x);
    case FK_SIGMOID: return 1.0 / (1.0 + exp(-x));
    case FK_ABS: return fabs(x);
    case FK_ADD_S: return x + s;
    case FK_MUL_S: return x * s;
    case FK_RSUB_S: return s - x;
    case FK_RDIV_S: return s / x;
    case FK_POW_S: return pow(x, s);
    case FK_MAX_S: return isnan(x) ? x : x > s ? x : s;
    case FK_MIN_S: return isnan(x) ? x : x < s ? x : s;
    default: return NAN;
    }
}

static void naive_unary(const bo_case *t, void *const *p)
{
    for (int64_t i = 0; i < t->nd.numel; i++)
        st(t->dt, p[0], nd_off(&t->nd, t->nd.so, i),
           naive_uop(t->op, ld(t->dt, p[1], nd_off(&t->nd, t->nd.sa, i)), t->unary.alpha));
}

static void prep_specials_in1(const bo_case *t, void *const *p, ferry_rng *r)
{
    (void)r;
    put_specials(t->buf[1].dt, p[1], t->buf[1].n);
}

/* The maps that the GPU's f32 arithmetic gives bit for bit as the CPU's double
 * result rounded to the dtype (kernels/cuda/ops.cu, fk_uop_f32): one rounding of
 * an exact operation either way (53 >= 2 * 24 + 2 bits), or a choice between
 * operands. Not the scalar arithmetic with a scalar that is no f32 value (0.3:
 * the CPU's f32 fast path and the GPU round it to f32 first), nor the maps that
 * use the math library; those are held to the dtype's bound. */
static bool uop_bitwise(int op, double alpha)
{
    if (op == FK_ADD_S || op == FK_MUL_S || op == FK_RSUB_S || op == FK_RDIV_S)
        return (double)(float)alpha == alpha;
    return op != FK_GELU && op != FK_EXP && op != FK_LOG && op != FK_TANH && op != FK_SIGMOID && op != FK_POW_S;
}

static void cases_unary(void)
{
    nd_shape sh[8];
    int ns = nd_shapes(sh);
    const double alpha[FK_UOP_COUNT] = {[FK_ADD_S] = 0.3,  [FK_MUL_S] = -1.7, [FK_RSUB_S] = 2.5, [FK_RDIV_S] = 1.5,
                                        [FK_POW_S] = 1.7,  [FK_MAX_S] = 0.1,  [FK_MIN_S] = -0.2};
    ferry_dtype dt;
    FOR_FLOAT(dt)
    for (int op = 0; op < FK_UOP_COUNT; op++)
        for (int s = 0; s <= ns; s++) {
            bool spec = s == ns; /* one more: contiguous with NaN, inf, -0 */
            const nd_shape *h = &sh[spec ? 0 : s];
            if (spec && dt != FERRY_DTYPE_F32)
                continue;
            bool pos = op == FK_LOG || op == FK_SQRT || op == FK_POW_S || op == FK_RDIV_S;
            char nb[160];
            bo_case *t = add_case("unary", run_unary, naive_unary, "%s %s alpha %g %s %s%s", dtn(dt), uop_names[op],
                                  alpha[op], h->what, nd_str(&h->nd, nb, sizeof nb), spec ? " with NaN/inf/-0" : "");
            t->dt = dt;
            t->op = op;
            t->nd = h->nd;
            t->unary.alpha = alpha[op];
            if (spec)
                t->prep = prep_specials_in1;
            bo_buf *y = add_buf(t, "y", dt, nd_extent(&t->nd, t->nd.so), BI_UNIFORM, -1, 1, BC_CLOSE);
            if (uop_bitwise(op, alpha[op]))
                y->tol = BO_BITWISE;
            add_buf(t, "x", dt, nd_extent(&t->nd, t->nd.sa), BI_UNIFORM, pos ? 0.2 : -3, 3, BC_IN);
        }
}

/* ---- binary ---- */
static const char *const bop_names[] = {"add", "sub", "mul", "div", "maximum", "minimum"};

static ferry_status run_binary(const bo_case *t, const fk_ctx *c, void *const *p)
{
    return FK(c, binary, (fk_bop)t->op, t->dt, p[0], p[1], p[2], &t->nd);
}

static void naive_binary(const bo_case *t, void *const *p)
{
    for (int64_t i = 0; i < t->nd.numel; i++) {
        double a = ld(t->dt, p[1], nd_off(&t->nd, t->nd.sa, i)), b = ld(t->dt, p[2], nd_off(&t->nd, t->nd.sb, i));
        double v;
        switch (t->op) {
        case FK_ADD: v = a + b; break;
        case FK_SUB: v = a - b; break;
        case FK_MUL: v = a * b; break;
        case FK_DIV: v = a / b; break;
        case FK_MAXIMUM: v = isnan(a) || isnan(b) ? NAN : a > b ? a : b; break;
        default: v = isnan(a) || isnan(b) ? NAN : a < b ? a : b; break;
        }
        st(t->dt, p[0], nd_off(&t->nd, t->nd.so, i), v);
    }
}

static void prep_binary(const bo_case *t, void *const *p, ferry_rng *r)
{
    if (t->op == FK_DIV) /* divisors in +-[0.5, 2] */
        for (int64_t i = 0; i < t->buf[2].n; i++)
            if (ferry_rng_u32(r) & 1)
                st(t->dt, p[2], i, -ld(t->dt, p[2], i));
    if (t->specials) {
        put_specials(t->dt, p[1], t->buf[1].n);
        put_specials(t->dt, (char *)p[2] + 3 * ferry_dtype_size(t->dt), t->buf[2].n - 3);
    }
}

static void cases_binary(void)
{
    nd_shape sh[8];
    int ns = nd_shapes(sh);
    ferry_dtype dt;
    FOR_FLOAT(dt)
    for (int op = 0; op < FK_BOP_COUNT; op++)
        for (int s = 0; s <= ns; s++) {
            bool spec = s == ns;
            const nd_shape *h = &sh[spec ? 0 : s];
            if (spec && dt != FERRY_DTYPE_F32)
                continue;
            char nb[160];
            bo_case *t = add_case("binary", run_binary, naive_binary, "%s %s %s %s%s", dtn(dt), bop_names[op],
                                  h->what, nd_str(&h->nd, nb, sizeof nb), spec ? " with NaN/inf/-0" : "");
            t->dt = dt;
            t->op = op;
            t->nd = h->nd;
            t->specials = spec;
            t->prep = prep_binary;
            add_buf(t, "y", dt, nd_extent(&t->nd, t->nd.so), BI_UNIFORM, -1, 1, BC_CLOSE)->tol = BO_BITWISE;
            add_buf(t, "a", dt, nd_extent(&t->nd, t->nd.sa), BI_UNIFORM, -3, 3, BC_IN);
            add_buf(t, "b", dt, nd_extent(&t->nd, t->nd.sb), BI_UNIFORM, op == FK_DIV ? 0.5 : -3,
                    op == FK_DIV ? 2 : 3, BC_IN);
        }
    /* A scalar broadcast against a row. */
    FOR_FLOAT(dt)
    for (int op = 0; op < FK_BOP_COUNT; op++) {
        bo_case *t = add_case("binary", run_binary, naive_binary, "%s %s [20] by a broadcast scalar", dtn(dt),
                              bop_names[op]);
        t->dt = dt;
        t->op = op;
        t->nd = mk_nd(1, (int64_t[]){20}, (int64_t[]){1}, (int64_t[]){1}, (int64_t[]){0});
        t->prep = prep_binary;
        add_buf(t, "y", dt, 20, BI_UNIFORM, -1, 1, BC_CLOSE)->tol = BO_BITWISE;
        add_buf(t, "a", dt, 20, BI_UNIFORM, -3, 3, BC_IN);
        add_buf(t, "b", dt, 1, BI_UNIFORM, op == FK_DIV ? 0.5 : -3, op == FK_DIV ? 2 : 3, BC_IN);
    }
}

/* ---- reduce ---- */
static const char *const rop_names[] = {"sum", "mean", "max", "argmax"};

static ferry_status run_reduce(const bo_case *t, const fk_ctx *c, void *const *p)
{
    return FK(c, reduce, (fk_rop)t->op, t->dt, p[0], p[1], t->reduce.outer, t->reduce.n, t->reduce.inner);
}

static void naive_reduce(const bo_case *t, void *const *p)
{
    int64_t outer = t->reduce.outer, n = t->reduce.n, inner = t->reduce.inner;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t k = 0; k < inner; k++) {
            double sum = 0, best = -INFINITY;
            int64_t arg = 0;
            bool nan = false;
            for (int64_t j = 0; j < n; j++) {
                double v = ld(t->dt, p[1], (o * n + j) * inner + k);
                sum += v;
                if (nan)
                    continue;
                if (isnan(v)) { /* the first NaN is the maximum */
                    nan = true;
                    best = v;
                    arg = j;
                } else if (v > best) {
                    best = v;
                    arg = j;
                }
            }
            int64_t y = o * inner + k;
            if (t->op == FK_ARGMAX)
                ((int64_t *)p[0])[y] = arg;
            else
                st(t->dt, p[0], y, t->op == FK_SUM ? sum : t->op == FK_MEAN ? (n ? sum / (double)n : NAN) : best);
        }
}

static void prep_reduce(const bo_case *t, void *const *p, ferry_rng *r)
{
    (void)r;
    if (t->op == FK_ARGMAX || t->op == FK_MAX)
        make_ties(t->dt, p[1], t->buf[1].n);
    if (t->specials)
        put_specials(t->dt, p[1], t->buf[1].n);
}

static void cases_reduce(void)
{
    /* Shapes 5 and 6 are few long rows: the GPU splits each over many blocks and
     * combines the blocks' partials (a full reduction is outer 1, inner 1). The
     * rest of the axes are not the last: a block takes up to 32 columns and
     * splits the axis over its threads; 7 and 8, few column tiles over a long
     * axis, split it over blocks too (with a partial tile of 41 = 32 + 9
     * columns); 9 has tiles enough not to. */
    const int64_t shapes[][3] = {{3, 50, 1},     {1, 300, 1},   {2, 7, 5},     {4, 0, 3},   {0, 5, 2},
                                 {1, 100003, 1}, {3, 20000, 1}, {2, 30001, 3}, {1, 5003, 41}, {130, 301, 2}};
    ferry_dtype dt;
    FOR_ALL(dt)
    for (int op = 0; op < 4; op++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int spec = 0; spec < (dt == FERRY_DTYPE_F32 && ((s != 1 && s < 3) || s >= 5) ? 2 : 1); spec++) {
                int64_t outer = shapes[s][0], n = shapes[s][1], inner = shapes[s][2];
                bo_case *t = add_case("reduce", run_reduce, naive_reduce, "%s %s [outer %lld, n %lld, inner %lld]%s",
                                      dtn(dt), rop_names[op], (long long)outer, (long long)n, (long long)inner,
                                      spec ? " with NaN/inf/-0" : "");
                t->dt = dt;
                t->op = op;
                t->reduce.outer = outer;
                t->reduce.n = n;
                t->reduce.inner = inner;
                t->specials = spec;
                t->prep = prep_reduce;
                double lo = -2, hi = 2;
                if (dt == FERRY_DTYPE_U8)
                    lo = 0, hi = 255;
                else if (dt == FERRY_DTYPE_I32)
                    lo = -1000, hi = 1000;
                else if (dt == FERRY_DTYPE_I64)
                    lo = -1e12, hi = 1e12;
                else if (dt == FERRY_DTYPE_U16 || dt == FERRY_DTYPE_U32)
                    lo = 0, hi = 1000;
                ferry_dtype ydt = op == FK_ARGMAX ? FERRY_DTYPE_I64 : dt;
                add_buf(t, "y", ydt, outer * inner, BI_UNIFORM, 0, 9,
                        op == FK_ARGMAX || !is_float(dt) ? BC_EXACT : BC_CLOSE);
                add_buf(t, "x", dt, outer * n * inner, BI_UNIFORM, lo, hi, BC_IN);
            }
    /* A long axis that is not the last: a million rows of 0.1 summed in f32 one
     * at a time come out 1 % off (ferry_mean over dim 0 of [1000000, 2]). */
    for (int op = 0; op < 4; op++) {
        bo_case *t = add_case("reduce", run_reduce, naive_reduce, "f32 %s [outer 1, n 1000000, inner 2] of 0.1%s",
                              rop_names[op], op >= FK_MAX ? " and noise" : "");
        t->dt = FERRY_DTYPE_F32;
        t->op = op;
        t->reduce.outer = 1;
        t->reduce.n = 1000000;
        t->reduce.inner = 2;
        add_buf(t, "y", op == FK_ARGMAX ? FERRY_DTYPE_I64 : FERRY_DTYPE_F32, 2, BI_UNIFORM, 0, 9,
                op == FK_ARGMAX ? BC_EXACT : BC_CLOSE);
        if (op >= FK_MAX)
            add_buf(t, "x", FERRY_DTYPE_F32, 2000000, BI_UNIFORM, -2, 2, BC_IN);
        else
            add_buf(t, "x", FERRY_DTYPE_F32, 2000000, BI_CONST, 0.1, 0, BC_IN);
    }
}

/* ---- softmax ---- */
static ferry_status run_softmax(const bo_case *t, const fk_ctx *c, void *const *p)
{
    return FK(c, softmax, t->softmax.log_softmax, t->dt, p[0], p[1], t->softmax.outer, t->softmax.n, t->softmax.inner);
}

static void naive_softmax(const bo_case *t, void *const *p)
{
    int64_t outer = t->softmax.outer, n = t->softmax.n, inner = t->softmax.inner;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t k = 0; k < inner; k++) {
            double mx = -INFINITY, sum = 0;
            for (int64_t j = 0; j < n; j++)
                mx = fmax(mx, ld(t->dt, p[1], (o * n + j) * inner + k));
            for (int64_t j = 0; j < n; j++)
                sum += exp(ld(t->dt, p[1], (o * n + j) * inner + k) - mx);
            for (int64_t j = 0; j < n; j++) {
                int64_t i = (o * n + j) * inner + k;
                double z = ld(t->dt, p[1], i) - mx;
                st(t->dt, p[0], i, t->softmax.log_softmax ? z - log(sum) : exp(z) / sum);
            }
        }
}

static void prep_softmax(const bo_case *t, void *const *p, ferry_rng *r)
{
    (void)r;
    if (t->softmax.big_logits) /* large logits: only a max-shifted exp stays finite */
        for (int64_t i = 0; i < t->buf[1].n; i++)
            st(t->dt, p[1], i, ld(t->dt, p[1], i) + 1000.0);
    if (t->softmax.neg_inf) /* some -inf logits (never a whole row) */
        for (int64_t i = 2; i < t->buf[1].n; i += 5)
            st(t->dt, p[1], i, -INFINITY);
}

static void cases_softmax(void)
{
    /* After the empty ones (3, 4), axes that are not the last: 5 and 6 are few
     * column tiles over a long axis, which the GPU splits over blocks too (with a
     * partial tile of 41 = 32 + 9 columns); 7 has tiles enough not to. */
    const int64_t shapes[][3] = {{4, 10, 1},    {1, 300, 1},   {2, 6, 3},    {3, 0, 2},
                                 {0, 5, 1},     {2, 30001, 3}, {1, 5003, 41}, {130, 301, 2}};
    ferry_dtype dt;
    FOR_FLOAT(dt)
    for (int lg = 0; lg < 2; lg++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int var = 0; var < (s < 3 || s >= 5 ? 3 : 1); var++) {
                int64_t outer = shapes[s][0], n = shapes[s][1], inner = shapes[s][2];
                bo_case *t = add_case("softmax", run_softmax, naive_softmax, "%s %s [outer %lld, n %lld, inner %lld]%s",
                                      dtn(dt), lg ? "log_softmax" : "softmax", (long long)outer, (long long)n,
                                      (long long)inner, var == 1 ? " logits + 1000" : var == 2 ? " some -inf" : "");
                t->dt = dt;
                t->softmax.log_softmax = lg;
                t->softmax.big_logits = var == 1;
                t->softmax.neg_inf = var == 2;
                t->softmax.outer = outer;
                t->softmax.n = n;
                t->softmax.inner = inner;
                t->prep = prep_softmax;
                add_buf(t, "y", dt, outer * n * inner, BI_UNIFORM, 0, 1, BC_CLOSE);
                add_buf(t, "x", dt, outer * n * inner, BI_UNIFORM, -5, 5, BC_IN);
            }
    /* A long axis that is not the last, summed in f32 one term at a time, drifts. */
    for (int lg = 0; lg < 2; lg++) {
        bo_case *t = add_case("softmax", run_softmax, naive_softmax, "f32 %s [outer 1, n 200000, inner 2]",
                              lg ? "log_softmax" : "softmax");
        t->dt = FERRY_DTYPE_F32;
        t->softmax.log_softmax = lg;
        t->softmax.outer = 1;
        t->softmax.n = 200000;
        t->softmax.inner = 2;
        add_buf(t, "y", FERRY_DTYPE_F32, 400000, BI_UNIFORM, 0, 1, BC_CLOSE);
        add_buf(t, "x", FERRY_DTYPE_F32, 400000, BI_UNIFORM, -5, 5, BC_IN);
    }
}

/* ---- gemm: t->gemm; bufs a, b, c ---- */
static ferry_status run_gemm(const bo_case *t, const fk_ctx *c, void *const *p)
{
    const bo_gemm *h = &t->gemm;
    fk_gemm g = {.dt = t->dt, .ta = h->ta, .tb = h->tb, .m = h->m, .n = h->n, .k = h->k,
                 .alpha = (float)h->alpha, .beta = (float)h->beta, .a = p[0], .b = p[1], .c = p[2], .lda = h->lda,
                 .ldb = h->ldb, .ldc = h->ldc, .stride_a = h->stride_a, .stride_b = h->stride_b,
                 .stride_c = h->stride_c, .batch = h->batch};
    return FK(c, gemm, &g);
}

static void naive_gemm(const bo_case *t, void *const *p)
{
    const bo_gemm *h = &t->gemm;
    int64_t m = h->m, n = h->n, k = h->k, lda = h->lda, ldb = h->ldb, ldc = h->ldc;
    bool ta = h->ta, tb = h->tb;
    for (int64_t b = 0; b < h->batch; b++)
        for (int64_t r = 0; r < m; r++)
            for (int64_t q = 0; q < n; q++) {
                double s = 0;
                for (int64_t j = 0; j < k; j++) {
                    double x = ld(t->dt, p[0], b * h->stride_a + (ta ? j * lda + r : r * lda + j));
                    double y = ld(t->dt, p[1], b * h->stride_b + (tb ? q * ldb + j : j * ldb + q));
                    s += x * y;
                }
                int64_t o = b * h->stride_c + r * ldc + q;
                double beta = (float)h->beta;
                st(t->dt, p[2], o, (float)h->alpha * s + (beta == 0 ? 0 : beta * ld(t->dt, p[2], o)));
            }
}

static int64_t mat_extent(int64_t batch, int64_t stride, int64_t rows, int64_t cols, int64_t ld)
{
    if (batch == 0 || rows == 0 || cols == 0)
        return 0;
    return (batch - 1) * stride + (rows - 1) * ld + cols;
}

static void add_gemm(ferry_dtype dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k, int64_t batch, int64_t pad,
                     double alpha, double beta, bool c_nan)
{
    int64_t ra = ta ? k : m, ca = ta ? m : k, rb = tb ? n : k, cb = tb ? k : n;
    int64_t lda = ca + pad, ldb = cb + pad, ldc = n + pad;
    lda = lda < 1 ? 1 : lda;
    ldb = ldb < 1 ? 1 : ldb;
    ldc = ldc < 1 ? 1 : ldc;
    int64_t sa = ra * lda + 3 * pad, sb = rb * ldb + 2 * pad, sc = m * ldc + 5 * pad;
    bo_case *t = add_case("gemm", run_gemm, naive_gemm,
                          "%s ta %d tb %d m %lld n %lld k %lld batch %lld ld pad %lld alpha %g beta %g%s", dtn(dt), ta,
                          tb, (long long)m, (long long)n, (long long)k, (long long)batch, (long long)pad, alpha, beta,
                          c_nan ? " C = NaN" : "");
    t->dt = dt;
    t->gemm = (bo_gemm){.ta = ta, .tb = tb, .m = m, .n = n, .k = k, .lda = lda, .ldb = ldb, .ldc = ldc,
                        .stride_a = sa, .stride_b = sb, .stride_c = sc, .batch = batch, .alpha = alpha, .beta = beta};
    add_buf(t, "a", dt, mat_extent(batch, sa, ra, ca, lda), BI_UNIFORM, -1, 1, BC_IN);
    add_buf(t, "b", dt, mat_extent(batch, sb, rb, cb, ldb), BI_UNIFORM, -1, 1, BC_IN);
    /* C with a tail past its last element: nothing outside C's m x n may change. */
    add_buf(t, "c", dt, mat_extent(batch, sc, m, n, ldc) + 4, c_nan ? BI_NAN : BI_UNIFORM, -1, 1, BC_CLOSE);
}

/* Convolution's forward gemm: one A for every batch entry (stride 0), B's
 * entries interleaved as column blocks of one matrix (ldb = batch * n, stride n):
 * entry i's last row ends short of the buffer's end, and nothing past it may be
 * read. */
static void add_gemm_conv(ferry_dtype dt, int64_t m, int64_t n, int64_t k, int64_t batch)
{
    bo_case *t = add_case("gemm", run_gemm, naive_gemm, "%s conv-shaped m %lld n %lld k %lld batch %lld", dtn(dt),
                          (long long)m, (long long)n, (long long)k, (long long)batch);
    t->dt = dt;
    t->gemm = (bo_gemm){.m = m, .n = n, .k = k, .lda = k, .ldb = batch * n, .ldc = n, .stride_a = 0,
                        .stride_b = n, .stride_c = m * n, .batch = batch, .alpha = 1.0, .beta = 0.0};
    add_buf(t, "a", dt, m * k, BI_UNIFORM, -1, 1, BC_IN);
    add_buf(t, "b", dt, k * batch * n, BI_UNIFORM, -1, 1, BC_IN);
    add_buf(t, "c", dt, batch * m * n + 4, BI_UNIFORM, -1, 1, BC_CLOSE);
}

static void cases_gemm(void)
{
    ferry_dtype dt;
    FOR_FLOAT(dt)
    {
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                add_gemm(dt, ta, tb, 5, 7, 9, 1, 0, 1.0, 0.0, false);
                add_gemm(dt, ta, tb, 4, 6, 11, 3, 2, 0.7, 0.5, false); /* batched, padded, accumulating */
            }
        add_gemm(dt, false, false, 33, 17, 64, 1, 0, 1.0, 0.0, false);
        add_gemm(dt, false, true, 6, 5, 8, 2, 3, 1.0, 0.0, false); /* beta 0: padding stays */
        add_gemm(dt, false, false, 6, 5, 8, 2, 3, 1.0, 0.0, true);  /* beta 0 over NaN */
        add_gemm(dt, false, false, 4, 5, 0, 2, 3, 1.0, 0.0, true);  /* k = 0, beta 0 over NaN: zeros */
        add_gemm(dt, true, false, 4, 5, 0, 2, 3, 1.0, 0.0, true);
        add_gemm(dt, false, false, 4, 5, 0, 3, 1, 1.0, 0.5, false); /* k = 0: C = beta C */
        add_gemm(dt, false, false, 0, 5, 3, 2, 1, 1.0, 0.0, false); /* empty: C untouched */
        add_gemm(dt, false, false, 4, 0, 3, 2, 1, 1.0, 0.0, false);
        add_gemm(dt, false, false, 4, 5, 3, 0, 1, 1.0, 0.0, false);
        /* past 2^16 multiply-adds: the simulated cuBLAS's CBLAS path */
        add_gemm(dt, true, true, 130, 260, 520, 2, 1, 0.7, 0.5, false);
        add_gemm_conv(dt, 4, 6, 5, 3);
        add_gemm_conv(dt, 16, 50, 27, 4); /* the CBLAS path */
    }
}

/* ---- cast: n contiguous elements, x (dt2) to y (dt) ---- */
static ferry_status run_cast(const bo_case *t, const fk_ctx *c, void *const *p)
{
    return ferry_tensor_cast_(c->dev, c->stream, t->dt2, p[1], t->dt, p[0], t->cast.n);
}

/* Integers convert without a trip through double: to a float dtype through f32,
 * to an integer dtype saturated. */
static void naive_cast(const bo_case *t, void *const *p)
{
    for (int64_t i = 0; i < t->cast.n; i++) {
        if (is_float(t->dt2)) {
            st(t->dt, p[0], i, ld(t->dt2, p[1], i));
            continue;
        }
        int64_t v = t->dt2 == FERRY_DTYPE_U8    ? ((const uint8_t *)p[1])[i]
                  : t->dt2 == FERRY_DTYPE_I32   ? ((const int32_t *)p[1])[i]
                  : t->dt2 == FERRY_DTYPE_U16   ? ((const uint16_t *)p[1])[i]
                  : t->dt2 == FERRY_DTYPE_U32   ? ((const uint32_t *)p[1])[i]
                                                : ((const int64_t *)p[1])[i];
        if (is_float(t->dt))
            st(t->dt, p[0], i, (double)(float)v);
        else if (t->dt == FERRY_DTYPE_I64)
            ((int64_t *)p[0])[i] = v;
        else if (t->dt == FERRY_DTYPE_I32)
            ((int32_t *)p[0])[i] = (int32_t)(v < INT32_MIN ? INT32_MIN : v > INT32_MAX ? INT32_MAX : v);
        else if (t->dt == FERRY_DTYPE_U16)
            ((uint16_t *)p[0])[i] = (uint16_t)(v < 0 ? 0 : v > UINT16_MAX ? UINT16_MAX : v);
        else if (t->dt == FERRY_DTYPE_U32)
            ((uint32_t *)p[0])[i] = (uint32_t)(v < 0 ? 0 : v > UINT32_MAX ? UINT32_MAX : v);
        else
            ((uint8_t *)p[0])[i] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
    }
}

static void cases_cast(void)
{
    ferry_dtype y, x;
    FOR_ALL(y)
    FOR_ALL(x)
    for (int64_t n = 0; n <= 50; n += 50) {
        bo_case *t = add_case("cast", run_cast, naive_cast, "%s <- %s n %lld%s", dtn(y), dtn(x), (long long)n,
                              n && is_float(x) ? " with NaN/inf/-0" : "");
        t->dt = y;
        t->dt2 = x;
        t->cast.n = n;
        t->specials = true;
        t->prep = prep_convert;
        double lo, hi;
        source_range(x, &lo, &hi);
        add_buf(t, "y", y, n, BI_UNIFORM, 0, 100, BC_EXACT);
        add_buf(t, "x", x, n, BI_UNIFORM, lo, hi, BC_IN);
    }
}

/* ---- batch_convert: t->bs ---- */
static ferry_status run_batch_convert(const bo_case *t, const fk_ctx *c, void *const *p)
{
    return ferry_convert_batch(c->dev, c->stream, &t->bs, p[0], p[1]);
}

/* y = x * scale[c] + shift[c] in f32, rounded after each step; u8 out saturates
 * and rounds to nearest even. */
static void naive_batch_convert(const bo_case *t, void *const *p)
{
    const ferry_convert_spec *b = &t->bs;
    size_t C = b->channels, HW = b->height * b->width;
    for (size_t s = 0; s < b->count; s++)
        for (size_t c = 0; c < C; c++)
            for (size_t q = 0; q < HW; q++) {
                size_t si = s * C * HW + (b->src_layout == FERRY_LAYOUT_CHW ? c * HW + q : q * C + c);
                size_t di = s * C * HW + (b->dst_layout == FERRY_LAYOUT_CHW ? c * HW + q : q * C + c);
                /* f32 read as f32, not through double, which would quiet a signalling NaN */
                float x = b->src_dtype == FERRY_DTYPE_F32 ? ((const float *)p[0])[si]
                                                          : (float)ld(b->src_dtype, p[0], (int64_t)si);
                if (b->affine) {
                    float m = x * b->scale[c];
                    x = m + b->shift[c];
                }
                if (b->dst_dtype == FERRY_DTYPE_U8)
                    ((uint8_t *)p[1])[di] = (uint8_t)nearbyint(x < 0 ? 0 : x > 255 ? 255 : x);
                else if (b->dst_dtype == FERRY_DTYPE_F32)
                    ((float *)p[1])[di] = x;
                else
                    st(b->dst_dtype, p[1], (int64_t)di, x);
            }
}

/* f32 wire data with NaN payloads (quiet, signalling, negative): the loader's
 * conversion keeps a payload's top bits on every device (tensor/half.h), where
 * cuda_fp16's __float2half_rn would give the canonical NaN. Plain casts only:
 * an affine step is arithmetic, which may canonicalise. */
static void prep_batch_nan(const bo_case *t, void *const *p, ferry_rng *r)
{
    (void)r;
    static const uint32_t nans[] = {0x7fc12345u, 0xffa00001u, 0x7f800001u, 0xfff0f0f0u};
    float *src = p[0];
    for (int k = 0; k < 4 && 2 * k + 1 < t->buf[0].n; k++)
        memcpy(&src[2 * k + 1], &nans[k], sizeof nans[k]);
}

static void cases_batch_convert(void)
{
    const ferry_dtype srcs[] = {FERRY_DTYPE_U8, FERRY_DTYPE_F32};
    const ferry_dtype dsts[] = {FERRY_DTYPE_F32, FERRY_DTYPE_F16, FERRY_DTYPE_BF16, FERRY_DTYPE_U8};
    const size_t geo[][4] = {{2, 3, 4, 5}, {3, 1, 3, 7}, {1, 4, 2, 3}, {0, 3, 4, 5}};
    for (size_t si = 0; si < 2; si++)
        for (size_t di = 0; di < 4; di++)
            for (int lay = 0; lay < 4; lay++)
                for (int aff = 0; aff < 2; aff++)
                    for (size_t gi = 0; gi < 4; gi++) {
                        if (gi > 0 && (lay != 1 || !aff))
                            continue; /* other geometries: one layout pair, affine */
                        ferry_convert_spec b;
                        memset(&b, 0, sizeof b);
                        b.count = geo[gi][0];
                        b.channels = geo[gi][1];
                        b.height = geo[gi][2];
                        b.width = geo[gi][3];
                        b.src_dtype = srcs[si];
                        b.dst_dtype = dsts[di];
                        b.src_layout = lay & 1 ? FERRY_LAYOUT_HWC : FERRY_LAYOUT_CHW;
                        b.dst_layout = lay & 2 ? FERRY_LAYOUT_HWC : FERRY_LAYOUT_CHW;
                        b.affine = aff;
                        for (int c = 0; c < FERRY_CONVERT_MAX_CHANNELS; c++) {
                            b.scale[c] = (float)(1.0 / (58.0 + 3 * c)); /* 1 / (255 std) */
                            b.shift[c] = (float)(-0.485 - 0.1 * c) * 4.0f;
                        }
                        bo_case *t = add_case("batch_convert", run_batch_convert, naive_batch_convert,
                                              "%s %s -> %s %s, %zu x %zux%zux%zu%s", dtn(b.src_dtype),
                                              lay & 1 ? "HWC" : "CHW", dtn(b.dst_dtype), lay & 2 ? "HWC" : "CHW",
                                              b.count, b.channels, b.height, b.width, aff ? " affine" : "");
                        t->bs = b;
                        int64_t n = (int64_t)(b.count * b.channels * b.height * b.width);
                        add_buf(t, "src", b.src_dtype, n, BI_UNIFORM, b.src_dtype == FERRY_DTYPE_U8 ? 0 : -10,
                                b.src_dtype == FERRY_DTYPE_U8 ? 255 : 300, BC_IN);
                        add_buf(t, "dst", b.dst_dtype, n, BI_UNIFORM, 0, 9, BC_EXACT);
                        if (b.src_dtype == FERRY_DTYPE_F32 && b.dst_dtype != FERRY_DTYPE_U8 && !aff && gi == 0) {
                            char desc[sizeof t->desc];
                            snprintf(desc, sizeof desc, "%s", t->desc); /* add_case may move t */
                            bo_case *u = add_case("batch_convert", run_batch_convert, naive_batch_convert,
                                                  "%s with NaN payloads", desc);
                            u->bs = b;
                            u->nbuf = 0;
                            add_buf(u, "src", b.src_dtype, n, BI_UNIFORM, -10, 300, BC_IN);
                            add_buf(u, "dst", b.dst_dtype, n, BI_UNIFORM, 0, 9, BC_EXACT);
                            u->prep = prep_batch_nan;
                        }
                    }
}

/* ---- rand: t->rand ---- */
static ferry_status run_rand(const bo_case *t, const fk_ctx *c, void *const *p)
{
    return FK(c, rand, t->dt, p[0], t->rand.n, t->rand.seed, t->rand.stream, t->rand.normal);
}

static void naive_rand(const bo_case *t, void *const *p)
{
    for (int64_t i = 0; i < t->rand.n; i++) {
        uint64_t sm = t->rand.stream;
        uint32_t ctr[4] = {(uint32_t)i, (uint32_t)((uint64_t)i >> 32), (uint32_t)sm, (uint32_t)(sm >> 32)};
        uint32_t key[2] = {(uint32_t)t->rand.seed, (uint32_t)(t->rand.seed >> 32)}, w[4];
        ferry_philox4x32_10(ctr, key, w);
        double u1 = (double)(w[0] >> 8) / 16777216.0, u2 = (double)(w[1] >> 8) / 16777216.0;
        double v = t->rand.normal ? sqrt(-2.0 * log(u1 + 1.0 / 16777216.0)) * cos(2.0 * M_PI * u2) : u1;
        st(t->dt, p[0], i, v);
    }
}

static void cases_rand(void)
{
    const int64_t sizes[] = {1000, 7, 0};
    ferry_dtype dt;
    FOR_FLOAT(dt)
    for (int normal = 0; normal < 2; normal++)
        for (size_t s = 0; s < 3; s++) {
            bo_case *t = add_case("rand", run_rand, naive_rand, "%s %s n %lld", dtn(dt), normal ? "normal" : "uniform",
                                  (long long)sizes[s]);
            t->dt = dt;
            t->rand.normal = normal;
            t->rand.n = sizes[s];
            t->rand.seed = seed * 0x9E3779B97F4A7C15ull + ncases;
            t->rand.stream = s == 1 ? 0xFEDCBA9876543210ull : FERRY_RNG_INIT;
            add_buf(t, "y", dt, sizes[s], BI_UNIFORM, -1, 1, normal ? BC_CLOSE : BC_EXACT);
        }
}

/* ---- bias_add, bias_grad: t->bias ---- */
static ferry_status run_bias_add(const bo_case *t, const fk_ctx *c, void *const *p)
{
    return FK(c, bias_add, t->dt, p[0], p[1], t->bias.outer, t->bias.ch, t->bias.inner, t->bias.relu);
}

static void naive_bias_add(const bo_case *t, void *const *p)
{
    for (int64_t i = 0; i < t->bias.outer * t->bias.ch * t->bias.inner; i++) {
        st(t->dt, p[0], i, ld(t->dt, p[0], i) + ld(t->dt, p[1], (i / t->bias.inner) % t->bias.ch));
        if (t->bias.relu && !(ld(t->dt, p[0], i) > 0))
            st(t->dt, p[0], i, 0.0);
    }
}

static ferry_status run_bias_grad(const bo_case *t, const fk_ctx *c, void *const *p)
{
    return FK(c, bias_grad, t->dt, p[0], p[1], t->bias.outer, t->bias.ch, t->bias.inner);
}

static void naive_bias_grad(const bo_case *t, void *const *p)
{
    for (int64_t k = 0; k < t->bias.ch; k++) {
        double s = ld(t->dt, p[0], k);
        for (int64_t o = 0; o < t->bias.outer; o++)
            for (int64_t j = 0; j < t->bias.inner; j++)
                s += ld(t->dt, p[1], (o * t->bias.ch + k) * t->bias.inner + j);
        st(t->dt, p[0], k, s);
    }
}

static void cases_bias(void)
{
    /* The last two take several blocks per channel (partials combined in order):
     * a Linear layer's [rows, features] (32 features a tile) and a long plane. */
    const int64_t shapes[][3] = {{3, 4, 5}, {6, 5, 1}, {2, 3, 70}, {0, 4, 3}, {2, 0, 3}, {5000, 40, 1}, {3, 3, 3000}};
    ferry_dtype dt;
    FOR_FLOAT(dt)
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int64_t outer = shapes[s][0], ch = shapes[s][1], inner = shapes[s][2];
        for (int relu = 0; relu < 2; relu++) {
            bo_case *r = add_case("bias_add", run_bias_add, naive_bias_add,
                                  "%s [outer %lld, ch %lld, inner %lld]%s", dtn(dt), (long long)outer, (long long)ch,
                                  (long long)inner, relu ? " relu" : "");
            r->dt = dt;
            r->bias = (bo_bias){.outer = outer, .ch = ch, .inner = inner, .relu = relu};
            add_buf(r, "y", dt, outer * ch * inner, BI_UNIFORM, -2, 2, BC_CLOSE);
            add_buf(r, "b", dt, ch, BI_UNIFORM, -2, 2, BC_IN);
        }
        bo_case *t;
        t = add_case("bias_grad", run_bias_grad, naive_bias_grad, "%s [outer %lld, ch %lld, inner %lld]", dtn(dt),
                     (long long)outer, (long long)ch, (long long)inner);
        t->dt = dt;
        t->bias = (bo_bias){.outer = outer, .ch = ch, .inner = inner};
        add_buf(t, "db", dt, ch, BI_UNIFORM, -2, 2, BC_CLOSE);
        add_buf(t, "dy", dt, outer * ch * inner, BI_UNIFORM, -2, 2, BC_IN);
    }
}

/* ---- relu_bwd ---- */
static ferry_status run_relu_bwd(const bo_case *t, const fk_ctx *c, void *const *p)
{
    return FK(c, relu_bwd, t->dt, p[0], p[1], p[2], t->relu.n);
}

static void naive_relu_bwd(const bo_case *t, void *const *p)
{
    for (int64_t i = 0; i < t->relu.n; i++)
        st(t->dt, p[0], i, ld(t->dt, p[1], i) > 0 ? ld(t->dt, p[2], i) : 0.0);
}

static void prep_relu_bwd(const bo_case *t, void *const *p, ferry_rng *r)
{
    (void)r;
    for (int64_t i = 0; i < t->relu.n; i += 5) /* exact zeros: y = 0 passes nothing */
        st(t->dt, p[1], i, i % 10 ? -0.0 : 0.0);
}

static void cases_relu_bwd(void)
{
    const int64_t sizes[] = {100, 1, 0};
    ferry_dtype dt;
    FOR_FLOAT(dt)
    for (size_t s = 0; s < 3; s++) {
        bo_case *t = add_case("relu_bwd", run_relu_bwd, naive_relu_bwd, "%s n %lld", dtn(dt), (long long)sizes[s]);
        t->dt = dt;
        t->relu.n = sizes[s];
        t->prep = prep_relu_bwd;
        add_buf(t, "dx", dt, sizes[s], BI_UNIFORM, -1, 1, BC_CLOSE);
        add_buf(t, "y", dt, sizes[s], BI_UNIFORM, -1, 1, BC_IN);
        add_buf(t, "dy", dt, sizes[s], BI_UNIFORM, -1, 1, BC_IN);
    }
}

/* ---- embed_fwd: bufs y, w, idx, bad; embed_bwd: dw, dy, idx. A gather, and
 * sums in position order (the documented order: f32 adds from the stored
 * value, one rounding to dt), so every backend matches bit for bit. ---- */
static fk_embed bo_embed_args(const bo_case *t, void *bad)
{
    return (fk_embed){.n = t->embed.n, .vocab = t->embed.vocab, .dim = t->embed.dim, .idt = t->dt2, .bad = bad};
}

static ferry_status run_embed_fwd(const bo_case *t, const fk_ctx *c, void *const *p)
{
    fk_embed e = bo_embed_args(t, p[3]);
    return FK(c, embed_fwd, t->dt, p[0], p[1], p[2], &e);
}

static ferry_status run_embed_bwd(const bo_case *t, const fk_ctx *c, void *const *p)
{
    fk_embed e = bo_embed_args(t, NULL);
    return FK(c, embed_bwd, t->dt, p[0], p[1], p[2], &e);
}

static void naive_embed_fwd(const bo_case *t, void *const *p)
{
    int64_t dim = t->embed.dim;
    for (int64_t i = 0; i < t->embed.n; i++) {
        int64_t v = (int64_t)ld(t->dt2, p[2], i);
        bool in = v >= 0 && v < t->embed.vocab;
        for (int64_t d = 0; d < dim; d++)
            st(t->dt, p[0], i * dim + d, in ? ld(t->dt, p[1], v * dim + d) : 0.0);
        if (!in && p[3] && i < ((int64_t *)p[3])[0])
            ((int64_t *)p[3])[0] = i;
    }
}

static void naive_embed_bwd(const bo_case *t, void *const *p)
{
    int64_t dim = t->embed.dim;
    for (int64_t v = 0; v < t->embed.vocab; v++)
        for (int64_t d = 0; d < dim; d++) {
            float acc = (float)ld(t->dt, p[0], v * dim + d);
            for (int64_t i = 0; i < t->embed.n; i++)
                if ((int64_t)ld(t->dt2, p[2], i) == v)
                    acc = (float)((double)acc + ld(t->dt, p[1], i * dim + d)); /* one f32 add */
            st(t->dt, p[0], v * dim + d, acc);
        }
}

/* Indices with repeats (a third of them index 1), and the bad ones. */
static void prep_embed(const bo_case *t, void *const *p, ferry_rng *r)
{
    for (int64_t i = 0; i < t->embed.n; i++) {
        int64_t v = (int64_t)ferry_rng_below(r, (uint64_t)t->embed.vocab);
        if (ferry_rng_below(r, 3) == 0)
            v = t->embed.vocab > 1 ? 1 : 0;
        if (t->embed.bad && i == 3)
            v = t->embed.vocab;
        if (t->embed.bad && i == 5)
            v = -1;
        st(t->dt2, p[2], i, (double)v);
    }
}

static void add_embed(ferry_dtype dt, ferry_dtype idt, int64_t n, int64_t vocab, int64_t dim, bool bad)
{
    for (int k = 0; k < 2; k++) {
        bool fwd = k == 0;
        bo_case *t = add_case(fwd ? "embed_fwd" : "embed_bwd", fwd ? run_embed_fwd : run_embed_bwd,
                              fwd ? naive_embed_fwd : naive_embed_bwd, "%s indices %s n %lld vocab %lld dim %lld%s",
                              dtn(dt), dtn(idt), (long long)n, (long long)vocab, (long long)dim,
                              bad ? " with bad indices" : "");
        t->dt = dt;
        t->dt2 = idt;
        t->embed = (bo_embed){n, vocab, dim, bad};
        t->prep = prep_embed;
        if (fwd) {
            add_buf(t, "y", dt, n * dim, BI_UNIFORM, -1, 1, BC_CLOSE)->tol = BO_BITWISE;
            add_buf(t, "w", dt, vocab * dim, BI_UNIFORM, -2, 2, BC_IN);
            add_buf(t, "idx", idt, n, BI_CONST, 0, 0, BC_IN);
            add_buf(t, "bad", FERRY_DTYPE_I64, 1, BI_CONST, (double)n, 0, BC_EXACT);
        } else {
            add_buf(t, "dw", dt, vocab * dim, BI_UNIFORM, -1, 1, BC_CLOSE)->tol = BO_BITWISE;
            add_buf(t, "dy", dt, n * dim, BI_UNIFORM, -1, 1, BC_IN);
            add_buf(t, "idx", idt, n, BI_CONST, 0, 0, BC_IN);
        }
    }
}

static void cases_embed(void)
{
    ferry_dtype dt;
    FOR_FLOAT(dt)
    for (int l = 0; l < 2; l++) {
        ferry_dtype idt = l ? FERRY_DTYPE_I64 : FERRY_DTYPE_I32;
        add_embed(dt, idt, 37, 5, 3, false);
        add_embed(dt, idt, 37, 5, 3, true);
        add_embed(dt, idt, 600, 300, 4, false); /* two sort passes, three tiles */
        add_embed(dt, idt, 40, 10, 300, true);  /* rows wider than a block */
        add_embed(dt, idt, 1, 1, 1, false);
        add_embed(dt, idt, 0, 4, 2, false);
    }
}

/* ---- cross_entropy: t->xent; bufs logits, labels, loss, correct, bad, dlogits,
 * gnum (a loss scale on the device: the factor is gnum[0] / rows instead of gscale) ---- */
static ferry_status run_cross_entropy(const bo_case *t, const fk_ctx *c, void *const *p)
{
    fk_xent r = {.rows = t->xent.rows,
                 .classes = t->xent.classes,
                 .loss = p[2],
                 .correct = p[3],
                 .bad = p[4],
                 .gscale = (float)t->xent.gscale,
                 .gnum = p[6]};
    return FK(c, cross_entropy, t->dt, p[0], t->dt2, p[1], p[5], &r);
}

static int64_t label_at(const bo_case *t, const void *labels, int64_t r)
{
    return t->dt2 == FERRY_DTYPE_I32 ? ((const int32_t *)labels)[r] : ((const int64_t *)labels)[r];
}

static void naive_cross_entropy(const bo_case *t, void *const *p)
{
    int64_t rows = t->xent.rows, classes = t->xent.classes, ok = 0, bad = 0;
    /* The device's factor is one f32 division, as the host's gscale was. */
    double loss = 0, g = p[6] && rows ? (float)(((const float *)p[6])[0] / (float)rows) : (float)t->xent.gscale;
    for (int64_t r = 0; r < rows; r++) {
        double mx = -INFINITY, sum = 0;
        int64_t arg = 0, label = label_at(t, p[1], r);
        for (int64_t k = 0; k < classes; k++) {
            double v = ld(t->dt, p[0], r * classes + k);
            if (v > mx) {
                mx = v;
                arg = k;
            }
        }
        for (int64_t k = 0; k < classes; k++)
            sum += exp(ld(t->dt, p[0], r * classes + k) - mx);
        bool in = label >= 0 && label < classes;
        bad += !in;
        if (in) {
            loss += mx + log(sum) - ld(t->dt, p[0], r * classes + label);
            ok += arg == label;
        }
        for (int64_t k = 0; k < classes && p[5]; k++) {
            double pk = exp(ld(t->dt, p[0], r * classes + k) - mx) / sum;
            st(t->dt, p[5], r * classes + k, in ? (pk - (k == label)) * g : 0.0);
        }
    }
    if (p[2])
        ((float *)p[2])[0] = (float)(((float *)p[2])[0] + loss);
    if (p[3])
        ((int64_t *)p[3])[0] += ok;
    if (p[4])
        ((int64_t *)p[4])[0] += bad;
}

/* Half the rows get the row's argmax as label (so `correct` counts something);
 * rows 1 and 3 get labels just outside [0, classes). */
static void prep_cross_entropy(const bo_case *t, void *const *p, ferry_rng *r)
{
    int64_t rows = t->xent.rows, classes = t->xent.classes;
    for (int64_t row = 0; row < rows; row++) {
        int64_t label = (int64_t)ferry_rng_below(r, (uint64_t)classes);
        if (row % 2 == 0) {
            double mx = -INFINITY;
            for (int64_t k = 0; k < classes; k++)
                if (ld(t->dt, p[0], row * classes + k) > mx) {
                    mx = ld(t->dt, p[0], row * classes + k);
                    label = k;
                }
        }
        if (t->xent.bad_labels && row == 1)
            label = classes;
        if (t->xent.bad_labels && row == 3)
            label = -1;
        st(t->dt2, p[1], row, (double)label);
    }
}

static void add_ce(ferry_dtype dt, ferry_dtype ldt, int64_t rows, int64_t classes, bool bad, bool metrics, bool grad,
                   bool dev_scale)
{
    bo_case *t = add_case("cross_entropy", run_cross_entropy, naive_cross_entropy,
                          "%s labels %s rows %lld classes %lld%s%s%s%s", dtn(dt), dtn(ldt), (long long)rows,
                          (long long)classes, bad ? " with bad labels" : "", metrics ? "" : " no metrics",
                          grad ? "" : " no gradient", dev_scale ? " scale on the device" : "");
    t->dt = dt;
    t->dt2 = ldt;
    t->xent.rows = rows;
    t->xent.classes = classes;
    t->xent.gscale = 0.25;
    t->xent.bad_labels = bad;
    t->prep = prep_cross_entropy;
    add_buf(t, "logits", dt, rows * classes, BI_UNIFORM, -4, 4, BC_IN);
    add_buf(t, "labels", ldt, rows, BI_CONST, 0, 0, BC_IN);
    add_buf(t, "loss", FERRY_DTYPE_F32, 1, BI_CONST, 1.25, 0, BC_CLOSE)->null = !metrics;
    add_buf(t, "correct", FERRY_DTYPE_I64, 1, BI_CONST, 3, 0, BC_EXACT)->null = !metrics;
    add_buf(t, "bad", FERRY_DTYPE_I64, 1, BI_CONST, 2, 0, BC_EXACT)->null = !metrics;
    add_buf(t, "dlogits", dt, rows * classes, BI_UNIFORM, -1, 1, BC_CLOSE)->null = !grad;
    /* 1000: not a power of two, so the division's rounding shows. */
    add_buf(t, "gnum", FERRY_DTYPE_F32, 1, BI_CONST, 1000, 0, BC_IN)->null = !dev_scale;
}

static void cases_cross_entropy(void)
{
    ferry_dtype dt;
    FOR_FLOAT(dt)
    for (int l = 0; l < 2; l++) {
        ferry_dtype ldt = l ? FERRY_DTYPE_I64 : FERRY_DTYPE_I32;
        add_ce(dt, ldt, 6, 5, false, true, true, false);
        add_ce(dt, ldt, 6, 5, true, true, true, false);
        add_ce(dt, ldt, 4, 300, true, true, true, false);
        add_ce(dt, ldt, 5, 1, false, true, true, false);
        add_ce(dt, ldt, 0, 5, false, true, true, false);
        add_ce(dt, ldt, 6, 5, true, false, true, false);
        add_ce(dt, ldt, 6, 5, true, true, false, false);
        add_ce(dt, ldt, 6, 5, true, true, true, true);
        add_ce(dt, ldt, 3, 300, false, false, true, true);
        add_ce(dt, ldt, 0, 5, false, true, true, true);
    }
}

/* ---- mse: t->mse; bufs p, t, loss, dp ---- */
static ferry_status run_mse(const bo_case *t, const fk_ctx *c, void *const *p)
{
    return FK(c, mse, t->dt, p[0], p[1], t->mse.n, (float *)p[2], (float)t->mse.lscale, p[3], (float)t->mse.gscale);
}

static void naive_mse(const bo_case *t, void *const *p)
{
    double s = 0;
    for (int64_t i = 0; i < t->mse.n; i++) {
        double e = ld(t->dt, p[0], i) - ld(t->dt, p[1], i);
        s += e * e;
        if (p[3])
            st(t->dt, p[3], i, 2 * e * (float)t->mse.gscale);
    }
    if (p[2])
        ((float *)p[2])[0] = (float)(((float *)p[2])[0] + s * (float)t->mse.lscale);
}

static void cases_mse(void)
{
    const int64_t sizes[] = {100, 1000, 0};
    ferry_dtype dt;
    FOR_FLOAT(dt)
    for (size_t s = 0; s < 3; s++)
        for (int v = 0; v < 3; v++) {
            bo_case *t = add_case("mse", run_mse, naive_mse, "%s n %lld%s", dtn(dt), (long long)sizes[s],
                                  v == 1 ? " no gradient" : v == 2 ? " no loss" : "");
            t->dt = dt;
            t->mse.n = sizes[s];
            t->mse.lscale = 0.1;
            t->mse.gscale = 0.02;
            add_buf(t, "p", dt, sizes[s], BI_UNIFORM, -2, 2, BC_IN);
            add_buf(t, "t", dt, sizes[s], BI_UNIFORM, -2, 2, BC_IN);
            add_buf(t, "loss", FERRY_DTYPE_F32, 1, BI_CONST, 0.5, 0, BC_CLOSE)->null = v == 2;
            add_buf(t, "dp", dt, sizes[s], BI_UNIFORM, -1, 1, BC_CLOSE)->null = v == 1;
        }
}

/* ---- convolution geometry ---- */
static fk_conv mk_conv(int64_t n, int64_t c, int64_t h, int64_t w, int64_t kh, int64_t kw, int64_t sh, int64_t sw,
                       int64_t ph, int64_t pw)
{
    fk_conv g = {n, c, h, w, kh, kw, sh, sw, ph, pw, 0, 0};
    g.oh = (h + 2 * ph - kh) / sh + 1;
    g.ow = (w + 2 * pw - kw) / sw + 1;
    return g;
}

static const char *conv_str(const fk_conv *g, char *buf, size_t size)
{
    snprintf(buf, size, "n %lld c %lld %lldx%lld kernel %lldx%lld stride %lldx%lld pad %lldx%lld -> %lldx%lld",
             (long long)g->n, (long long)g->c, (long long)g->h, (long long)g->w, (long long)g->kh, (long long)g->kw,
             (long long)g->sh, (long long)g->sw, (long long)g->ph, (long long)g->pw, (long long)g->oh,
             (long long)g->ow);
    return buf;
}

static int conv_shapes(fk_conv *g)
{
    int n = 0;
    g[n++] = mk_conv(2, 2, 5, 6, 3, 2, 2, 1, 1, 0);
    g[n++] = mk_conv(1, 3, 4, 4, 1, 1, 1, 1, 0, 0);
    g[n++] = mk_conv(2, 1, 3, 3, 3, 3, 1, 1, 2, 2);
    g[n++] = mk_conv(2, 3, 6, 5, 2, 2, 2, 2, 0, 0);
    g[n++] = mk_conv(0, 0, 4, 4, 2, 2, 2, 2, 0, 0); /* empty */
    return n;
}

/* The flat (iy, ix) of each window's input pixel (iy, ix), -1 outside. */
static int64_t win_at(const fk_conv *g, int64_t oy, int64_t ox, int64_t ki, int64_t kj)
{
    int64_t iy = oy * g->sh - g->ph + ki, ix = ox * g->sw - g->pw + kj;
    return iy < 0 || iy >= g->h || ix < 0 || ix >= g->w ? -1 : iy * g->w + ix;
}

/* ---- im2col, col2im: g.n images, col [C*kh*kw, n*oh*ow] with image i's columns at i*oh*ow ---- */
static ferry_status run_im2col(const bo_case *t, const fk_ctx *c, void *const *p)
{
    return FK(c, im2col, t->dt, &t->g, p[0], p[1]);
}

/* col's flat index of (row (ch, ki, kj), image img, output pixel (oy, ox)). */
static int64_t col_at(const fk_conv *g, int64_t ch, int64_t ki, int64_t kj, int64_t img, int64_t oy, int64_t ox)
{
    return ((ch * g->kh + ki) * g->kw + kj) * g->n * g->oh * g->ow + (img * g->oh + oy) * g->ow + ox;
}

static void naive_im2col(const bo_case *t, void *const *p)
{
    const fk_conv *g = &t->g;
    for (int64_t img = 0; img < g->n; img++)
        for (int64_t ch = 0; ch < g->c; ch++)
            for (int64_t ki = 0; ki < g->kh; ki++)
                for (int64_t kj = 0; kj < g->kw; kj++)
                    for (int64_t oy = 0; oy < g->oh; oy++)
                        for (int64_t ox = 0; ox < g->ow; ox++) {
                            int64_t at = win_at(g, oy, ox, ki, kj);
                            double v = at < 0 ? 0.0 : ld(t->dt, p[0], (img * g->c + ch) * g->h * g->w + at);
                            st(t->dt, p[1], col_at(g, ch, ki, kj, img, oy, ox), v);
                        }
}

static ferry_status run_col2im(const bo_case *t, const fk_ctx *c, void *const *p)
{
    return FK(c, col2im, t->dt, &t->g, p[0], p[1]);
}

static void naive_col2im(const bo_case *t, void *const *p)
{
    const fk_conv *g = &t->g;
    int64_t hw = g->h * g->w, nx = g->n * g->c * hw;
    double *acc = calloc((size_t)(nx + 1), sizeof(double));
    ASSERT(acc);
    for (int64_t img = 0; img < g->n; img++)
        for (int64_t ch = 0; ch < g->c; ch++)
            for (int64_t ki = 0; ki < g->kh; ki++)
                for (int64_t kj = 0; kj < g->kw; kj++)
                    for (int64_t oy = 0; oy < g->oh; oy++)
                        for (int64_t ox = 0; ox < g->ow; ox++) {
                            int64_t at = win_at(g, oy, ox, ki, kj);
                            if (at >= 0)
                                acc[(img * g->c + ch) * hw + at] +=
                                    ld(t->dt, p[0], col_at(g, ch, ki, kj, img, oy, ox));
                        }
    for (int64_t i = 0; i < nx; i++)
        st(t->dt, p[1], i, acc[i]);
    free(acc);
}

static void cases_im2col(void)
{
    fk_conv gs[8];
    int ng = conv_shapes(gs);
    ferry_dtype dt;
    FOR_FLOAT(dt)
    for (int k = 0; k < ng; k++) {
        fk_conv g = gs[k];
        char cb[160];
        int64_t nx = g.n * g.c * g.h * g.w, nc = g.c * g.kh * g.kw * g.n * g.oh * g.ow;
        bo_case *t = add_case("im2col", run_im2col, naive_im2col, "%s %s", dtn(dt), conv_str(&g, cb, sizeof cb));
        t->dt = dt;
        t->g = g;
        add_buf(t, "x", dt, nx, BI_UNIFORM, -2, 2, BC_IN);
        add_buf(t, "col", dt, nc, BI_UNIFORM, -2, 2, BC_CLOSE);
        t = add_case("col2im", run_col2im, naive_col2im, "%s %s", dtn(dt), cb);
        t->dt = dt;
        t->g = g;
        add_buf(t, "col", dt, nc, BI_UNIFORM, -2, 2, BC_IN);
        add_buf(t, "x", dt, nx, BI_UNIFORM, -2, 2, BC_CLOSE);
    }
}

/* ---- pooling ---- */
/* Max pooling as the kernels define it: the first maximum of the window in
 * row-major order, except that a NaN always takes over (so the last NaN wins). */
static void naive_maxpool(const fk_conv *g, ferry_dtype dt, const void *x, double *y, int32_t *idx)
{
    int64_t hw = g->h * g->w;
    for (int64_t pl = 0; pl < g->n * g->c; pl++)
        for (int64_t oy = 0; oy < g->oh; oy++)
            for (int64_t ox = 0; ox < g->ow; ox++) {
                double best = -INFINITY;
                int32_t bi = -1;
                for (int64_t ki = 0; ki < g->kh; ki++)
                    for (int64_t kj = 0; kj < g->kw; kj++) {
                        int64_t at = win_at(g, oy, ox, ki, kj);
                        if (at < 0)
                            continue;
                        double v = ld(dt, x, pl * hw + at);
                        if (bi < 0 || isnan(v) || v > best) {
                            best = v;
                            bi = (int32_t)at;
                        }
                    }
                int64_t o = (pl * g->oh + oy) * g->ow + ox;
                y[o] = best;
                idx[o] = bi;
            }
}

static ferry_status run_maxpool_fwd(const bo_case *t, const fk_ctx *c, void *const *p)
{
    return FK(c, maxpool_fwd, t->dt, &t->g, p[0], p[1], (int32_t *)p[2]);
}

static void naive_maxpool_fwd(const bo_case *t, void *const *p)
{
    int64_t ny = t->g.n * t->g.c * t->g.oh * t->g.ow;
    double *y = calloc((size_t)ny + 1, sizeof(double));
    ASSERT(y);
    naive_maxpool(&t->g, t->dt, p[0], y, p[2]);
    for (int64_t i = 0; i < ny; i++)
        st(t->dt, p[1], i, y[i]);
    free(y);
}

static void prep_pool(const bo_case *t, void *const *p, ferry_rng *r)
{
    (void)r;
    make_ties(t->dt, p[0], t->buf[0].n);
    if (t->specials)
        put_specials(t->dt, p[0], t->buf[0].n);
}

static ferry_status run_maxpool_bwd(const bo_case *t, const fk_ctx *c, void *const *p)
{
    return FK(c, maxpool_bwd, t->dt, &t->g, p[0], (const int32_t *)p[1], p[2]);
}

static void naive_maxpool_bwd(const bo_case *t, void *const *p)
{
    const fk_conv *g = &t->g;
    int64_t hw = g->h * g->w, ohw = g->oh * g->ow;
    double *dx = calloc((size_t)(g->n * g->c * hw) + 1, sizeof(double));
    ASSERT(dx);
    for (int64_t pl = 0; pl < g->n * g->c; pl++)
        for (int64_t o = 0; o < ohw; o++) {
            int32_t at = ((const int32_t *)p[1])[pl * ohw + o];
            if (at >= 0)
                dx[pl * hw + at] += ld(t->dt, p[0], pl * ohw + o);
        }
    for (int64_t i = 0; i < g->n * g->c * hw; i++)
        st(t->dt, p[2], i, dx[i]);
    free(dx);
}

/* The indices of a real forward pass over random (tied) input. */
static void prep_maxpool_bwd(const bo_case *t, void *const *p, ferry_rng *r)
{
    const fk_conv *g = &t->g;
    int64_t nx = g->n * g->c * g->h * g->w, ny = g->n * g->c * g->oh * g->ow;
    float *x = malloc((size_t)nx * sizeof(float) + 1);
    double *y = malloc((size_t)ny * sizeof(double) + 1);
    ASSERT(x && y);
    for (int64_t i = 0; i < nx; i++)
        x[i] = (float)floor(unif(r, -4, 4));
    naive_maxpool(g, FERRY_DTYPE_F32, x, y, p[1]);
    free(x);
    free(y);
}

static ferry_status run_avgpool_fwd(const bo_case *t, const fk_ctx *c, void *const *p)
{
    return FK(c, avgpool_fwd, t->dt, &t->g, p[0], p[1]);
}

/* Divides by the whole window, padding included (count_include_pad). */
static void naive_avgpool_fwd(const bo_case *t, void *const *p)
{
    const fk_conv *g = &t->g;
    int64_t hw = g->h * g->w;
    for (int64_t pl = 0; pl < g->n * g->c; pl++)
        for (int64_t oy = 0; oy < g->oh; oy++)
            for (int64_t ox = 0; ox < g->ow; ox++) {
                double s = 0;
                for (int64_t ki = 0; ki < g->kh; ki++)
                    for (int64_t kj = 0; kj < g->kw; kj++) {
                        int64_t at = win_at(g, oy, ox, ki, kj);
                        s += at < 0 ? 0.0 : ld(t->dt, p[0], pl * hw + at);
                    }
                st(t->dt, p[1], (pl * g->oh + oy) * g->ow + ox, s / (double)(g->kh * g->kw));
            }
}

static ferry_status run_avgpool_bwd(const bo_case *t, const fk_ctx *c, void *const *p)
{
    return FK(c, avgpool_bwd, t->dt, &t->g, p[0], p[1]);
}

static void naive_avgpool_bwd(const bo_case *t, void *const *p)
{
    const fk_conv *g = &t->g;
    int64_t hw = g->h * g->w;
    double *dx = calloc((size_t)(g->n * g->c * hw) + 1, sizeof(double));
    ASSERT(dx);
    for (int64_t pl = 0; pl < g->n * g->c; pl++)
        for (int64_t oy = 0; oy < g->oh; oy++)
            for (int64_t ox = 0; ox < g->ow; ox++) {
                double v = ld(t->dt, p[0], (pl * g->oh + oy) * g->ow + ox) / (double)(g->kh * g->kw);
                for (int64_t ki = 0; ki < g->kh; ki++)
                    for (int64_t kj = 0; kj < g->kw; kj++) {
                        int64_t at = win_at(g, oy, ox, ki, kj);
                        if (at >= 0)
                            dx[pl * hw + at] += v;
                    }
            }
    for (int64_t i = 0; i < g->n * g->c * hw; i++)
        st(t->dt, p[1], i, dx[i]);
    free(dx);
}

static void cases_pool(void)
{
    fk_conv gs[8];
    int ng = conv_shapes(gs);
    ferry_dtype dt;
    FOR_FLOAT(dt)
    for (int k = 0; k < ng; k++) {
        fk_conv g = gs[k];
        if (g.ph * 2 >= g.kh && g.kh > 1)
            continue; /* a window entirely in the padding is not a pooling shape */
        char cb[160];
        conv_str(&g, cb, sizeof cb);
        int64_t nx = g.n * g.c * g.h * g.w, ny = g.n * g.c * g.oh * g.ow;
        for (int spec = 0; spec < (dt == FERRY_DTYPE_F32 && k == 0 ? 2 : 1); spec++) {
            bo_case *t = add_case("maxpool_fwd", run_maxpool_fwd, naive_maxpool_fwd, "%s %s%s", dtn(dt), cb,
                                  spec ? " with NaN/inf/-0" : "");
            t->dt = dt;
            t->g = g;
            t->specials = spec;
            t->prep = prep_pool;
            add_buf(t, "x", dt, nx, BI_UNIFORM, -3, 3, BC_IN);
            add_buf(t, "y", dt, ny, BI_UNIFORM, -1, 1, BC_CLOSE);
            add_buf(t, "idx", FERRY_DTYPE_I32, ny, BI_UNIFORM, 0, 9, BC_EXACT);
        }
        bo_case *t = add_case("maxpool_bwd", run_maxpool_bwd, naive_maxpool_bwd, "%s %s", dtn(dt), cb);
        t->dt = dt;
        t->g = g;
        t->prep = prep_maxpool_bwd;
        add_buf(t, "dy", dt, ny, BI_UNIFORM, -2, 2, BC_IN);
        add_buf(t, "idx", FERRY_DTYPE_I32, ny, BI_CONST, 0, 0, BC_IN);
        add_buf(t, "dx", dt, nx, BI_UNIFORM, -1, 1, BC_CLOSE);
        t = add_case("avgpool_fwd", run_avgpool_fwd, naive_avgpool_fwd, "%s %s", dtn(dt), cb);
        t->dt = dt;
        t->g = g;
        add_buf(t, "x", dt, nx, BI_UNIFORM, -3, 3, BC_IN);
        add_buf(t, "y", dt, ny, BI_UNIFORM, -1, 1, BC_CLOSE);
        t = add_case("avgpool_bwd", run_avgpool_bwd, naive_avgpool_bwd, "%s %s", dtn(dt), cb);
        t->dt = dt;
        t->g = g;
        add_buf(t, "dy", dt, ny, BI_UNIFORM, -2, 2, BC_IN);
        add_buf(t, "dx", dt, nx, BI_UNIFORM, -1, 1, BC_CLOSE);
    }
}

/* ---- batch norm: t->bn ---- */
static ferry_status run_bn_fwd(const bo_case *t, const fk_ctx *c, void *const *p)
{
    fk_bn b = {.n = t->bn.n,
               .ch = t->bn.ch,
               .hw = t->bn.hw,
               .gamma = p[2],
               .beta = p[3],
               .rmean = p[4],
               .rvar = p[5],
               .smean = p[6],
               .sinvstd = p[7],
               .training = t->bn.training,
               .momentum = (float)t->bn.momentum,
               .eps = (float)t->bn.eps};
    return FK(c, bn_fwd, t->dt, p[0], p[1], &b);
}

static void naive_bn_fwd(const bo_case *t, void *const *p)
{
    int64_t n = t->bn.n, ch = t->bn.ch, hw = t->bn.hw, cnt = n * hw;
    float *rmean = p[4], *rvar = p[5], *smean = p[6], *sinv = p[7];
    double mom = (float)t->bn.momentum, eps = (float)t->bn.eps;
    for (int64_t k = 0; k < ch; k++) {
        double mean, inv;
        if (t->bn.training) {
            double s = 0, q = 0;
            for (int64_t b = 0; b < n; b++)
                for (int64_t i = 0; i < hw; i++)
                    s += ld(t->dt, p[0], (b * ch + k) * hw + i);
            mean = s / (double)cnt;
            for (int64_t b = 0; b < n; b++)
                for (int64_t i = 0; i < hw; i++) {
                    double e = ld(t->dt, p[0], (b * ch + k) * hw + i) - mean;
                    q += e * e;
                }
            inv = 1.0 / sqrt(q / (double)cnt + eps);
            smean[k] = (float)mean;
            sinv[k] = (float)inv;
            rmean[k] = (float)((1 - mom) * rmean[k] + mom * mean);
            rvar[k] = (float)((1 - mom) * rvar[k] + mom * (cnt > 1 ? q / (double)(cnt - 1) : q / (double)cnt));
        } else {
            mean = rmean[k];
            inv = 1.0 / sqrt(rvar[k] + eps);
        }
        for (int64_t b = 0; b < n; b++)
            for (int64_t i = 0; i < hw; i++) {
                int64_t at = (b * ch + k) * hw + i;
                st(t->dt, p[1], at,
                   (ld(t->dt, p[0], at) - mean) * inv * ((const float *)p[2])[k] + ((const float *)p[3])[k]);
            }
    }
}

static ferry_status run_bn_bwd(const bo_case *t, const fk_ctx *c, void *const *p)
{
    fk_bn b = {.n = t->bn.n, .ch = t->bn.ch, .hw = t->bn.hw, .gamma = p[3], .smean = p[4], .sinvstd = p[5]};
    return FK(c, bn_bwd, t->dt, p[0], p[1], p[2], &b, p[6], p[7]);
}

static void naive_bn_bwd(const bo_case *t, void *const *p)
{
    int64_t n = t->bn.n, ch = t->bn.ch, hw = t->bn.hw;
    double cnt = (double)(n * hw);
    for (int64_t k = 0; k < ch; k++) {
        double m = ((const float *)p[4])[k], is = ((const float *)p[5])[k], gm = ((const float *)p[3])[k];
        double sd = 0, sdx = 0;
        for (int64_t b = 0; b < n; b++)
            for (int64_t i = 0; i < hw; i++) {
                int64_t at = (b * ch + k) * hw + i;
                double g = ld(t->dt, p[1], at);
                sd += g;
                sdx += g * (ld(t->dt, p[0], at) - m) * is;
            }
        ((float *)p[6])[k] = (float)(((float *)p[6])[k] + sdx);
        ((float *)p[7])[k] = (float)(((float *)p[7])[k] + sd);
        for (int64_t b = 0; b < n && p[2]; b++)
            for (int64_t i = 0; i < hw; i++) {
                int64_t at = (b * ch + k) * hw + i;
                double xh = (ld(t->dt, p[0], at) - m) * is;
                st(t->dt, p[2], at, gm * is * (ld(t->dt, p[1], at) - sd / cnt - xh * sdx / cnt));
            }
    }
}

/* smean and sinvstd of the batch, as a forward pass would have saved them. */
static void prep_bn_bwd(const bo_case *t, void *const *p, ferry_rng *r)
{
    (void)r;
    int64_t n = t->bn.n, ch = t->bn.ch, hw = t->bn.hw;
    for (int64_t k = 0; k < ch; k++) {
        double s = 0, q = 0;
        for (int64_t b = 0; b < n; b++)
            for (int64_t i = 0; i < hw; i++)
                s += ld(t->dt, p[0], (b * ch + k) * hw + i);
        double mean = s / (double)(n * hw);
        for (int64_t b = 0; b < n; b++)
            for (int64_t i = 0; i < hw; i++)
                q += pow(ld(t->dt, p[0], (b * ch + k) * hw + i) - mean, 2);
        ((float *)p[4])[k] = (float)mean;
        ((float *)p[5])[k] = (float)(1.0 / sqrt(q / (double)(n * hw) + 1e-5));
    }
}

static void cases_bn(void)
{
    /* The last two take several blocks per channel (partials combined in order). */
    const int64_t shapes[][3] = {{4, 3, 5}, {6, 2, 1}, {1, 2, 1}, {3, 2, 40}, {2, 0, 3}, {8, 3, 1000}, {5000, 3, 1}};
    ferry_dtype dt;
    FOR_FLOAT(dt)
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int64_t n = shapes[s][0], ch = shapes[s][1], hw = shapes[s][2], tot = n * ch * hw;
        for (int tr = 0; tr < 2; tr++) {
            bo_case *t = add_case("bn_fwd", run_bn_fwd, naive_bn_fwd, "%s [n %lld, ch %lld, hw %lld] %s", dtn(dt),
                                  (long long)n, (long long)ch, (long long)hw, tr ? "training" : "eval");
            t->dt = dt;
            t->bn = (bo_bn){.n = n, .ch = ch, .hw = hw, .training = tr, .momentum = 0.1, .eps = 1e-5};
            add_buf(t, "x", dt, tot, BI_UNIFORM, -2, 3, BC_IN);
            /* One value per channel: y = beta + (x - mean) * 316 gamma cancels to
             * ~1e-4 relative in f32, whatever the backend; the statistics stay tight. */
            add_buf(t, "y", dt, tot, BI_UNIFORM, -1, 1, BC_CLOSE)->tol = n * hw == 1 && tr ? 1e-3 : 0;
            add_buf(t, "gamma", FERRY_DTYPE_F32, ch, BI_UNIFORM, 0.5, 1.5, BC_IN);
            add_buf(t, "beta", FERRY_DTYPE_F32, ch, BI_UNIFORM, 0.25, 1, BC_IN);
            add_buf(t, "rmean", FERRY_DTYPE_F32, ch, BI_UNIFORM, -0.5, 0.5, BC_CLOSE);
            add_buf(t, "rvar", FERRY_DTYPE_F32, ch, BI_UNIFORM, 0.5, 2, BC_CLOSE);
            add_buf(t, "smean", FERRY_DTYPE_F32, ch, BI_UNIFORM, -1, 1, BC_CLOSE);
            add_buf(t, "sinvstd", FERRY_DTYPE_F32, ch, BI_UNIFORM, 0.5, 2, BC_CLOSE);
        }
        if (n * hw == 1)
            continue; /* backward needs a batch */
        for (int with_dx = 0; with_dx < 2; with_dx++) {
            bo_case *t = add_case("bn_bwd", run_bn_bwd, naive_bn_bwd, "%s [n %lld, ch %lld, hw %lld]%s", dtn(dt),
                                  (long long)n, (long long)ch, (long long)hw, with_dx ? "" : " no dx");
            t->dt = dt;
            t->bn = (bo_bn){.n = n, .ch = ch, .hw = hw};
            t->prep = prep_bn_bwd;
            add_buf(t, "x", dt, tot, BI_UNIFORM, -2, 3, BC_IN);
            add_buf(t, "dy", dt, tot, BI_UNIFORM, -1, 1, BC_IN);
            add_buf(t, "dx", dt, tot, BI_UNIFORM, -1, 1, BC_CLOSE)->null = !with_dx;
            add_buf(t, "gamma", FERRY_DTYPE_F32, ch, BI_UNIFORM, 0.5, 1.5, BC_IN);
            add_buf(t, "smean", FERRY_DTYPE_F32, ch, BI_CONST, 0, 0, BC_IN);
            add_buf(t, "sinvstd", FERRY_DTYPE_F32, ch, BI_CONST, 1, 0, BC_IN);
            add_buf(t, "dgamma", FERRY_DTYPE_F32, ch, BI_UNIFORM, -1, 1, BC_CLOSE);
            add_buf(t, "dbeta", FERRY_DTYPE_F32, ch, BI_UNIFORM, -1, 1, BC_CLOSE);
        }
    }
}

/* ---- dropout: t->dropout ---- */
static ferry_status run_dropout(const bo_case *t, const fk_ctx *c, void *const *p)
{
    return FK(c, dropout, t->dt, p[0], p[1], t->dropout.n, (float)t->dropout.p, t->dropout.seed, t->dropout.stream);
}

static void naive_dropout(const bo_case *t, void *const *p)
{
    double prob = (float)t->dropout.p;
    for (int64_t i = 0; i < t->dropout.n; i++) {
        uint64_t blk = (uint64_t)i / 4;
        uint64_t sm = t->dropout.stream;
        uint32_t ctr[4] = {(uint32_t)blk, (uint32_t)(blk >> 32), (uint32_t)sm, (uint32_t)(sm >> 32)};
        uint32_t key[2] = {(uint32_t)t->dropout.seed, (uint32_t)(t->dropout.seed >> 32)}, w[4];
        ferry_philox4x32_10(ctr, key, w);
        double u = (double)(w[i % 4] >> 8) / 16777216.0;
        st(t->dt, p[0], i, u >= prob ? ld(t->dt, p[1], i) / (1.0 - prob) : 0.0);
    }
}

static void cases_dropout(void)
{
    const int64_t sizes[] = {1001, 3, 0};
    const double probs[] = {0.3, 0.0, 1.0};
    ferry_dtype dt;
    FOR_FLOAT(dt)
    for (size_t s = 0; s < 3; s++)
        for (size_t k = 0; k < 3; k++) {
            if (s > 0 && k > 0)
                continue;
            bo_case *t = add_case("dropout", run_dropout, naive_dropout, "%s n %lld p %g", dtn(dt), (long long)sizes[s],
                                  probs[k]);
            t->dt = dt;
            t->dropout.n = sizes[s];
            t->dropout.p = probs[k];
            t->dropout.seed = seed + 77 * ncases;
            t->dropout.stream = FERRY_RNG_DROPOUT | 12345;
            add_buf(t, "y", dt, sizes[s], BI_UNIFORM, -1, 1, BC_CLOSE);
            add_buf(t, "x", dt, sizes[s], BI_UNIFORM, -2, 2, BC_IN);
        }
}

/* The optimiser kernels' skip flag (device memory; NULL: never skip). */
enum { SKIP_NULL, SKIP_CLEAR, SKIP_SET };
static const char *const skip_names[] = {"", " skip flag clear", " skip flag set"};

static bool naive_skipped(const void *skip) { return skip && ((const float *)skip)[0] != 0.0f; }

static void add_skip_buf(bo_case *t, int skip)
{
    add_buf(t, "skip", FERRY_DTYPE_F32, 1, BI_CONST, skip == SKIP_SET ? 1 : 0, 0, BC_IN)->null = skip == SKIP_NULL;
}

/* The kernels' f32 hyper-parameters. */
static fk_sgd sgd_hyper(const bo_sgd *o)
{
    return (fk_sgd){.lr = (float)o->lr,
                    .momentum = (float)o->momentum,
                    .dampening = (float)o->dampening,
                    .wd = (float)o->wd,
                    .nesterov = o->nesterov};
}

static fk_adam adam_hyper(const bo_adam *o)
{
    return (fk_adam){.lr = (float)o->lr,
                     .b1 = (float)o->b1,
                     .b2 = (float)o->b2,
                     .eps = (float)o->eps,
                     .wd = (float)o->wd,
                     .decoupled = o->decoupled};
}

/* ---- sgd: t->sgd; bufs p, g, buf, taken, skip ---- */
static ferry_status run_sgd(const bo_case *t, const fk_ctx *c, void *const *p)
{
    fk_sgd h = sgd_hyper(&t->sgd);
    return FK(c, sgd, p[0], p[1], p[2], t->sgd.n, &h, p[3], p[4]);
}

static void naive_sgd(const bo_case *t, void *const *p)
{
    if (naive_skipped(p[4]))
        return;
    float *w = p[0], *buf = p[2];
    const float *g = p[1];
    bool first = ((const int64_t *)p[3])[0] == 0;
    double lr = (float)t->sgd.lr, mom = (float)t->sgd.momentum, damp = (float)t->sgd.dampening, wd = (float)t->sgd.wd;
    for (int64_t i = 0; i < t->sgd.n; i++) {
        double d = g[i] + wd * w[i];
        if (mom != 0) {
            double b = first ? d : mom * buf[i] + (1 - damp) * d;
            buf[i] = (float)b;
            d = t->sgd.nesterov ? d + mom * b : b;
        }
        w[i] = (float)(w[i] - lr * d);
    }
}

static void cases_sgd(void)
{
    const struct { double mom, damp, wd; bool nesterov, first; } v[] = {
        {0, 0, 0.01, false, false}, {0.9, 0, 0.01, false, true}, {0.9, 0, 0.01, true, true},
        {0.9, 0, 0.01, true, false}, {0.9, 0.1, 0, false, false},
    };
    for (size_t k = 0; k < sizeof v / sizeof v[0]; k++)
        for (int64_t n = 0; n <= 100; n += 100)
            for (int skip = SKIP_NULL; skip <= SKIP_SET; skip++) {
                if (skip != SKIP_NULL && n == 0)
                    continue;
                bo_case *t = add_case("sgd", run_sgd, naive_sgd, "f32 n %lld momentum %g dampening %g wd %g%s%s%s",
                                      (long long)n, v[k].mom, v[k].damp, v[k].wd, v[k].nesterov ? " nesterov" : "",
                                      v[k].first ? " first step" : "", skip_names[skip]);
                t->sgd.n = n;
                t->sgd.lr = 0.05;
                t->sgd.momentum = v[k].mom;
                t->sgd.dampening = v[k].damp;
                t->sgd.wd = v[k].wd;
                t->sgd.nesterov = v[k].nesterov;
                add_buf(t, "p", FERRY_DTYPE_F32, n, BI_UNIFORM, -2, 2, BC_CLOSE);
                add_buf(t, "g", FERRY_DTYPE_F32, n, BI_UNIFORM, -1, 1, BC_IN);
                add_buf(t, "buf", FERRY_DTYPE_F32, n, BI_UNIFORM, -1, 1, BC_CLOSE)->null = v[k].mom == 0;
                add_buf(t, "taken", FERRY_DTYPE_I64, 1, BI_CONST, v[k].first ? 0 : 4, 0, BC_IN);
                add_skip_buf(t, skip);
            }
}

/* ---- sgd_multi, adam_multi: the single-tensor cases' parameters over three
 * tensors of mt_sizes (one of them empty) in one launch; bufs per tensor (p, g,
 * buf) or (p, g, m, v), then taken, skip. The reference is the single-tensor
 * one, tensor by tensor. ---- */
#define MT_TENSORS 3
static const int64_t mt_sizes[MT_TENSORS] = {300, 0, 1000};

static fk_plist mt_list(void *const *p, int per)
{
    fk_plist l;
    memset(&l, 0, sizeof l);
    l.n = MT_TENSORS;
    for (int k = 0; k < MT_TENSORS; k++) {
        l.p[k] = p[k * per];
        l.g[k] = p[k * per + 1];
        l.s0[k] = p[k * per + 2];
        l.s1[k] = per > 3 ? p[k * per + 3] : NULL;
        l.numel[k] = mt_sizes[k];
    }
    return l;
}

static ferry_status run_sgd_multi(const bo_case *t, const fk_ctx *c, void *const *p)
{
    fk_plist l = mt_list(p, 3);
    fk_sgd h = sgd_hyper(&t->sgd);
    return FK(c, sgd_multi, &l, &h, p[3 * MT_TENSORS], p[3 * MT_TENSORS + 1]);
}

static void naive_sgd(const bo_case *t, void *const *p);
static void naive_sgd_multi(const bo_case *t, void *const *p)
{
    for (int k = 0; k < MT_TENSORS; k++) {
        bo_case one = *t;
        one.sgd.n = mt_sizes[k];
        void *q[5] = {p[3 * k], p[3 * k + 1], p[3 * k + 2], p[3 * MT_TENSORS], p[3 * MT_TENSORS + 1]};
        naive_sgd(&one, q);
    }
}

static ferry_status run_adam_multi(const bo_case *t, const fk_ctx *c, void *const *p)
{
    fk_plist l = mt_list(p, 4);
    fk_adam h = adam_hyper(&t->adam);
    return FK(c, adam_multi, &l, &h, p[4 * MT_TENSORS], p[4 * MT_TENSORS + 1]);
}

/* The consts buffer (the adam_consts kernel's output) for step t->adam.step: the
 * f32 parameters widened to double, as PyTorch's Python floats. */
static void adam_consts_ref(const bo_adam *h, int64_t step, float *consts)
{
    double lr = (float)h->lr, b1 = (float)h->b1, b2 = (float)h->b2;
    consts[0] = (float)(lr / (1 - pow(b1, (double)step)));
    consts[1] = (float)sqrt(1 - pow(b2, (double)step));
}

static void prep_adam_multi(const bo_case *t, void *const *p, ferry_rng *r)
{
    (void)r;
    adam_consts_ref(&t->adam, t->adam.step, p[4 * MT_TENSORS]);
}

static void naive_adam(const bo_case *t, void *const *p);
static void naive_adam_multi(const bo_case *t, void *const *p)
{
    for (int k = 0; k < MT_TENSORS; k++) {
        bo_case one = *t;
        one.adam.n = mt_sizes[k];
        void *q[6] = {p[4 * k], p[4 * k + 1], p[4 * k + 2], p[4 * k + 3], p[4 * MT_TENSORS], p[4 * MT_TENSORS + 1]};
        naive_adam(&one, q);
    }
}

/* The Adam cases' hyper-parameters (PyTorch's betas and eps; lr 1e-2, wd 0.01). */
static bo_adam adam_defaults(int64_t n, bool decoupled)
{
    return (bo_adam){.n = n, .lr = 1e-2, .b1 = 0.9, .b2 = 0.999, .eps = 1e-8, .wd = 0.01, .decoupled = decoupled};
}

static void cases_optim_multi(void)
{
    for (int skip = SKIP_NULL; skip <= SKIP_SET; skip++)
        for (int v = 0; v < 3; v++) { /* plain, momentum (first step), Nesterov */
            bo_case *t = add_case("sgd_multi", run_sgd_multi, naive_sgd_multi, "f32 3 tensors %s%s",
                                  v == 0 ? "plain" : v == 1 ? "momentum first step" : "nesterov", skip_names[skip]);
            t->sgd = (bo_sgd){.lr = 0.05, .momentum = v ? 0.9 : 0, .wd = 0.01, .nesterov = v == 2};
            for (int k = 0; k < MT_TENSORS; k++) {
                add_buf(t, "p", FERRY_DTYPE_F32, mt_sizes[k], BI_UNIFORM, -2, 2, BC_CLOSE);
                add_buf(t, "g", FERRY_DTYPE_F32, mt_sizes[k], BI_UNIFORM, -1, 1, BC_IN);
                add_buf(t, "buf", FERRY_DTYPE_F32, mt_sizes[k], BI_UNIFORM, -1, 1, BC_CLOSE)->null = v == 0;
            }
            add_buf(t, "taken", FERRY_DTYPE_I64, 1, BI_CONST, v == 1 ? 0 : 4, 0, BC_IN);
            add_skip_buf(t, skip);
        }
    for (int skip = SKIP_NULL; skip <= SKIP_SET; skip++)
        for (int dec = 0; dec < 2; dec++) {
            bo_case *t = add_case("adam_multi", run_adam_multi, naive_adam_multi, "f32 3 tensors step 7%s%s",
                                  dec ? " decoupled (AdamW)" : "", skip_names[skip]);
            t->adam = adam_defaults(0, dec);
            t->adam.step = 7;
            t->prep = prep_adam_multi;
            for (int k = 0; k < MT_TENSORS; k++) {
                add_buf(t, "p", FERRY_DTYPE_F32, mt_sizes[k], BI_UNIFORM, -2, 2, BC_CLOSE);
                add_buf(t, "g", FERRY_DTYPE_F32, mt_sizes[k], BI_UNIFORM, -1, 1, BC_IN);
                add_buf(t, "m", FERRY_DTYPE_F32, mt_sizes[k], BI_UNIFORM, -0.1, 0.1, BC_CLOSE);
                add_buf(t, "v", FERRY_DTYPE_F32, mt_sizes[k], BI_UNIFORM, 0, 0.01, BC_CLOSE);
            }
            add_buf(t, "consts", FERRY_DTYPE_F32, 2, BI_CONST, 0, 0, BC_IN);
            add_skip_buf(t, skip);
        }
}

/* ---- adam_consts: t->adam; bufs taken, consts ---- */
static ferry_status run_adam_consts(const bo_case *t, const fk_ctx *c, void *const *p)
{
    fk_adam h = adam_hyper(&t->adam);
    return FK(c, adam_consts, &h, p[0], p[1]);
}

static void naive_adam_consts(const bo_case *t, void *const *p)
{
    adam_consts_ref(&t->adam, ((const int64_t *)p[0])[0] + 1, p[1]);
}

/* Step 1 (1 - b1^t cancels most), a later step, and random counts. */
static void cases_adam_consts(void)
{
    for (int v = 0; v < 3; v++) {
        bo_case *t = add_case("adam_consts", run_adam_consts, naive_adam_consts, "%s",
                              v == 0 ? "step 1" : v == 1 ? "step 7" : "taken in [0, 1000]");
        t->adam = adam_defaults(0, false);
        add_buf(t, "taken", FERRY_DTYPE_I64, 1, v == 2 ? BI_UNIFORM : BI_CONST, v == 1 ? 6 : 0, v == 2 ? 1000 : 0,
                BC_IN);
        add_buf(t, "consts", FERRY_DTYPE_F32, 2, BI_UNIFORM, -1, 1, BC_CLOSE);
    }
}

/* ---- adam: t->adam; bufs p, g, m, v, consts (for t->adam.step), skip ---- */
static ferry_status run_adam(const bo_case *t, const fk_ctx *c, void *const *p)
{
    fk_adam h = adam_hyper(&t->adam);
    return FK(c, adam, p[0], p[1], p[2], p[3], t->adam.n, &h, p[4], p[5]);
}

static void naive_adam(const bo_case *t, void *const *p)
{
    if (naive_skipped(p[5]))
        return;
    float *w = p[0], *m = p[2], *v = p[3];
    const float *g = p[1];
    double step = (double)t->adam.step;
    const bo_adam *h = &t->adam;
    double lr = (float)h->lr, b1 = (float)h->b1, b2 = (float)h->b2, eps = (float)h->eps, wd = (float)h->wd;
    double bc1 = 1 - pow(b1, step), bc2 = 1 - pow(b2, step);
    for (int64_t i = 0; i < t->adam.n; i++) {
        double d = g[i], x = w[i];
        if (t->adam.decoupled)
            x *= 1 - lr * wd;
        else
            d += wd * x;
        double mm = b1 * m[i] + (1 - b1) * d, vv = b2 * v[i] + (1 - b2) * d * d;
        m[i] = (float)mm;
        v[i] = (float)vv;
        w[i] = (float)(x - lr / bc1 * mm / (sqrt(vv) / sqrt(bc2) + eps));
    }
}

static void prep_adam(const bo_case *t, void *const *p, ferry_rng *r)
{
    (void)r;
    adam_consts_ref(&t->adam, t->adam.step, p[4]);
}

static void cases_adam(void)
{
    for (int dec = 0; dec < 2; dec++)
        for (int64_t step = 1; step <= 7; step += 6)
            for (int64_t n = 0; n <= 100; n += 100)
                for (int skip = SKIP_NULL; skip <= SKIP_SET; skip++) {
                    if (skip != SKIP_NULL && n == 0)
                        continue;
                    bo_case *t = add_case("adam", run_adam, naive_adam, "f32 n %lld step %lld%s%s", (long long)n,
                                          (long long)step, dec ? " decoupled (AdamW)" : "", skip_names[skip]);
                    t->adam = adam_defaults(n, dec);
                    t->adam.step = step;
                    t->prep = prep_adam;
                    add_buf(t, "p", FERRY_DTYPE_F32, n, BI_UNIFORM, -2, 2, BC_CLOSE);
                    add_buf(t, "g", FERRY_DTYPE_F32, n, BI_UNIFORM, -1, 1, BC_IN);
                    add_buf(t, "m", FERRY_DTYPE_F32, n, BI_UNIFORM, -0.1, 0.1, BC_CLOSE);
                    add_buf(t, "v", FERRY_DTYPE_F32, n, BI_UNIFORM, 0, 0.01, BC_CLOSE);
                    add_buf(t, "consts", FERRY_DTYPE_F32, 2, BI_CONST, 0, 0, BC_IN);
                    add_skip_buf(t, skip);
                }
}

/* ---- zero_multi: three buffers (f32 300, empty, f16 1001: a tail of two bytes)
 * set to zero in one launch ---- */
static const int64_t zm_sizes[3] = {300, 0, 1001};
static const ferry_dtype zm_dts[3] = {FERRY_DTYPE_F32, FERRY_DTYPE_BF16, FERRY_DTYPE_F16};

static ferry_status run_zero_multi(const bo_case *t, const fk_ctx *c, void *const *p)
{
    (void)t;
    fk_zlist l;
    memset(&l, 0, sizeof l);
    l.n = 3;
    for (int k = 0; k < 3; k++) {
        l.p[k] = p[k];
        l.bytes[k] = zm_sizes[k] * (int64_t)ferry_dtype_size(zm_dts[k]);
    }
    return FK(c, zero_multi, &l);
}

static void naive_zero_multi(const bo_case *t, void *const *p)
{
    (void)t;
    for (int k = 0; k < 3; k++)
        memset(p[k], 0, (size_t)zm_sizes[k] * ferry_dtype_size(zm_dts[k]));
}

static void cases_zero_multi(void)
{
    bo_case *t = add_case("zero_multi", run_zero_multi, naive_zero_multi, "f32 300, bf16 0, f16 1001");
    for (int k = 0; k < 3; k++)
        add_buf(t, "buf", zm_dts[k], zm_sizes[k], BI_UNIFORM, -1, 1, BC_EXACT);
}

/* ---- step_count: bufs taken, skip ---- */
static ferry_status run_step_count(const bo_case *t, const fk_ctx *c, void *const *p)
{
    (void)t;
    return FK(c, step_count, (int64_t *)p[0], (const float *)p[1]);
}

static void naive_step_count(const bo_case *t, void *const *p)
{
    (void)t;
    if (!naive_skipped(p[1]))
        ((int64_t *)p[0])[0] += 1;
}

static void cases_step_count(void)
{
    for (int skip = SKIP_NULL; skip <= SKIP_SET; skip++) {
        bo_case *t = add_case("step_count", run_step_count, naive_step_count, "taken in [0, 1000]%s", skip_names[skip]);
        add_buf(t, "taken", FERRY_DTYPE_I64, 1, BI_UNIFORM, 0, 1000, BC_EXACT);
        add_skip_buf(t, skip);
    }
}

/* ---- unscale: t->unscale; bufs g, master, found, scale ---- */
static ferry_status run_unscale(const bo_case *t, const fk_ctx *c, void *const *p)
{
    return FK(c, unscale, t->dt, p[0], (float *)p[1], t->unscale.n, (const float *)p[3], (float *)p[2]);
}

static void naive_unscale(const bo_case *t, void *const *p)
{
    bool bad = false;
    float inv = 1.0f / ((const float *)p[3])[0];
    for (int64_t i = 0; i < t->unscale.n; i++) {
        float v = (float)(ld(t->dt, p[0], i) * inv);
        bad |= !isfinite(v);
        ((float *)p[1])[i] = v;
    }
    if (bad)
        ((float *)p[2])[0] = 1.0f;
}

static void prep_unscale(const bo_case *t, void *const *p, ferry_rng *r)
{
    (void)r;
    if (t->unscale.with_inf && t->unscale.n > 7)
        st(t->dt, p[0], 7, INFINITY);
    if (t->unscale.with_nan && t->unscale.n > 3)
        st(t->dt, p[0], 3, NAN);
}

static void cases_unscale(void)
{
    ferry_dtype dt;
    FOR_FLOAT(dt)
    for (int k = 0; k < 5; k++) {
        int64_t n = k == 3 ? 0 : 200;
        double scale = k == 4 ? 1000.0 : 1024.0; /* 1000: 1 / scale rounds */
        bo_case *t = add_case("unscale", run_unscale, naive_unscale, "%s n %lld scale %g%s", dtn(dt), (long long)n,
                              scale, k == 1 ? " with inf" : k == 2 ? " with NaN" : "");
        t->dt = dt;
        t->unscale.n = n;
        t->unscale.with_inf = k == 1;
        t->unscale.with_nan = k == 2;
        t->prep = prep_unscale;
        add_buf(t, "g", dt, n, BI_UNIFORM, -3000, 3000, BC_IN);
        add_buf(t, "master", FERRY_DTYPE_F32, n, BI_UNIFORM, -1, 1, BC_CLOSE);
        add_buf(t, "found", FERRY_DTYPE_F32, 1, BI_CONST, 0, 0, BC_EXACT);
        add_buf(t, "scale", FERRY_DTYPE_F32, 1, BI_CONST, scale, 0, BC_IN);
    }
}

/* ---- amp_update: t->amp; bufs scale, tracker, found ---- */
static ferry_status run_amp_update(const bo_case *t, const fk_ctx *c, void *const *p)
{
    return FK(c, amp_update, (float *)p[0], (int64_t *)p[1], (const float *)p[2], (float)t->amp.growth,
              (float)t->amp.backoff, t->amp.interval);
}

static void naive_amp_update(const bo_case *t, void *const *p)
{
    float *scale = p[0];
    int64_t *tracker = p[1];
    /* A product of two floats is exact in double: one rounding, as in f32. */
    if (((const float *)p[2])[0] != 0.0f) {
        scale[0] = (float)((double)scale[0] * (float)t->amp.backoff);
        tracker[0] = 0;
    } else if (tracker[0] + 1 >= t->amp.interval) {
        scale[0] = (float)((double)scale[0] * (float)t->amp.growth);
        tracker[0] = 0;
    } else {
        tracker[0] += 1;
    }
}

static void cases_amp_update(void)
{
    const struct { double scale, growth, backoff, found; int64_t tracker, interval; const char *what; } v[] = {
        {65536, 2, 0.5, 1, 5, 2000, "inf found: back off"},
        {65536, 2, 0.5, 0, 5, 2000, "good step: count"},
        {65536, 2, 0.5, 0, 1999, 2000, "good step at the interval: grow"},
        {1000, 1.5, 0.3, 1, 0, 3, "inf found, scale and factors that round"},
        {1000, 1.5, 0.3, 0, 2, 3, "growth that rounds"},
        {3, 2, 0.5, 0, 0, 1, "interval 1: grow every good step"},
    };
    for (size_t k = 0; k < sizeof v / sizeof v[0]; k++) {
        bo_case *t = add_case("amp_update", run_amp_update, naive_amp_update, "%s", v[k].what);
        t->amp.interval = v[k].interval;
        t->amp.growth = v[k].growth;
        t->amp.backoff = v[k].backoff;
        add_buf(t, "scale", FERRY_DTYPE_F32, 1, BI_CONST, v[k].scale, 0, BC_EXACT);
        add_buf(t, "tracker", FERRY_DTYPE_I64, 1, BI_CONST, (double)v[k].tracker, 0, BC_EXACT);
        add_buf(t, "found", FERRY_DTYPE_F32, 1, BI_CONST, v[k].found, 0, BC_IN);
    }
}

/* ================= the runner ================= */

/* Training-size cases, added only in timing mode (FERRY_BACKEND_OPS_TIME) so that
 * a real GPU's run reports GB/s or FLOP/s where they mean something; they run on
 * the GPUs only, without the CPU reference (the CPU would take minutes). */
static int time_runs(void);
static void time_only_last(void) { cases[ncases - 1].time_only = true; }

static void cases_timing(void)
{
    if (!time_runs())
        return;
    add_gemm(FERRY_DTYPE_F32, false, false, 4096, 4096, 4096, 1, 0, 1.0, 0.0, false);
    time_only_last();
    add_gemm(FERRY_DTYPE_F16, false, false, 4096, 4096, 4096, 1, 0, 1.0, 0.0, false);
    time_only_last();
    const int64_t big = (int64_t)64 << 20;
    bo_case *t = add_case("binary", run_binary, naive_binary, "f32 add [64M] contiguous (timing)");
    t->dt = FERRY_DTYPE_F32;
    t->op = FK_ADD;
    t->nd = mk_nd(1, (int64_t[]){big}, (int64_t[]){1}, (int64_t[]){1}, (int64_t[]){1});
    add_buf(t, "y", FERRY_DTYPE_F32, big, BI_UNIFORM, -1, 1, BC_CLOSE);
    add_buf(t, "a", FERRY_DTYPE_F32, big, BI_UNIFORM, -3, 3, BC_IN);
    add_buf(t, "b", FERRY_DTYPE_F32, big, BI_UNIFORM, -3, 3, BC_IN);
    time_only_last();
    /* Axes that are not the last, at training size: a mean over the batch of
     * [16384, 4096] (few column tiles over a long axis: split over blocks), and a
     * sum and a softmax over the channels of [256, 64, 56, 56]. */
    const int64_t rshape[][3] = {{1, 16384, 4096}, {256, 64, 3136}};
    for (int k = 0; k < 2; k++) {
        int64_t outer = rshape[k][0], n = rshape[k][1], inner = rshape[k][2];
        t = add_case("reduce", run_reduce, naive_reduce, "f32 %s [outer %lld, n %lld, inner %lld] (timing)",
                     k ? "sum" : "mean", (long long)outer, (long long)n, (long long)inner);
        t->dt = FERRY_DTYPE_F32;
        t->op = k ? FK_SUM : FK_MEAN;
        t->reduce = (bo_rows){.outer = outer, .n = n, .inner = inner};
        add_buf(t, "y", FERRY_DTYPE_F32, outer * inner, BI_UNIFORM, 0, 9, BC_CLOSE);
        add_buf(t, "x", FERRY_DTYPE_F32, outer * n * inner, BI_UNIFORM, -2, 2, BC_IN);
        time_only_last();
    }
    t = add_case("softmax", run_softmax, naive_softmax, "f32 softmax [outer 256, n 64, inner 3136] (timing)");
    t->dt = FERRY_DTYPE_F32;
    t->softmax = (bo_softmax){.outer = 256, .n = 64, .inner = 3136};
    add_buf(t, "y", FERRY_DTYPE_F32, (int64_t)256 * 64 * 3136, BI_UNIFORM, 0, 1, BC_CLOSE);
    add_buf(t, "x", FERRY_DTYPE_F32, (int64_t)256 * 64 * 3136, BI_UNIFORM, -5, 5, BC_IN);
    time_only_last();
    for (int tr = 0; tr < 2; tr++) { /* ResNet's first stage: [256, 64, 56, 56] */
        const int64_t n = 256, ch = 64, hw = 56 * 56, tot = n * ch * hw;
        t = tr ? add_case("bn_fwd", run_bn_fwd, naive_bn_fwd, "f32 [n 256, ch 64, hw 3136] training (timing)")
               : add_case("bn_bwd", run_bn_bwd, naive_bn_bwd, "f32 [n 256, ch 64, hw 3136] (timing)");
        t->dt = FERRY_DTYPE_F32;
        t->bn = (bo_bn){.n = n, .ch = ch, .hw = hw};
        if (tr) {
            t->bn.training = true;
            t->bn.momentum = 0.1;
            t->bn.eps = 1e-5;
            add_buf(t, "x", FERRY_DTYPE_F32, tot, BI_UNIFORM, -2, 3, BC_IN);
            add_buf(t, "y", FERRY_DTYPE_F32, tot, BI_UNIFORM, -1, 1, BC_CLOSE);
            add_buf(t, "gamma", FERRY_DTYPE_F32, ch, BI_UNIFORM, 0.5, 1.5, BC_IN);
            add_buf(t, "beta", FERRY_DTYPE_F32, ch, BI_UNIFORM, 0.25, 1, BC_IN);
            add_buf(t, "rmean", FERRY_DTYPE_F32, ch, BI_UNIFORM, -0.5, 0.5, BC_CLOSE);
            add_buf(t, "rvar", FERRY_DTYPE_F32, ch, BI_UNIFORM, 0.5, 2, BC_CLOSE);
            add_buf(t, "smean", FERRY_DTYPE_F32, ch, BI_UNIFORM, -1, 1, BC_CLOSE);
            add_buf(t, "sinvstd", FERRY_DTYPE_F32, ch, BI_UNIFORM, 0.5, 2, BC_CLOSE);
        } else {
            add_buf(t, "x", FERRY_DTYPE_F32, tot, BI_UNIFORM, -2, 3, BC_IN);
            add_buf(t, "dy", FERRY_DTYPE_F32, tot, BI_UNIFORM, -1, 1, BC_IN);
            add_buf(t, "dx", FERRY_DTYPE_F32, tot, BI_UNIFORM, -1, 1, BC_CLOSE);
            add_buf(t, "gamma", FERRY_DTYPE_F32, ch, BI_UNIFORM, 0.5, 1.5, BC_IN);
            add_buf(t, "smean", FERRY_DTYPE_F32, ch, BI_CONST, 0, 0, BC_IN);
            add_buf(t, "sinvstd", FERRY_DTYPE_F32, ch, BI_CONST, 1, 0, BC_IN);
            add_buf(t, "dgamma", FERRY_DTYPE_F32, ch, BI_UNIFORM, -1, 1, BC_CLOSE);
            add_buf(t, "dbeta", FERRY_DTYPE_F32, ch, BI_UNIFORM, -1, 1, BC_CLOSE);
        }
        time_only_last();
    }
}

static void build_cases(void)
{
    if (cases)
        return;
    const char *env = getenv("FERRY_TEST_SEED");
    seed = env && *env ? strtoull(env, NULL, 0) : 20240611;
    printf("  seed %llu (FERRY_TEST_SEED=N to change it)\n", (unsigned long long)seed);
    cases_fill();
    cases_convert();
    cases_unary();
    cases_binary();
    cases_reduce();
    cases_softmax();
    cases_gemm();
    cases_cast();
    cases_batch_convert();
    cases_rand();
    cases_bias();
    cases_relu_bwd();
    cases_cross_entropy();
    cases_mse();
    cases_im2col();
    cases_pool();
    cases_bn();
    cases_dropout();
    cases_sgd();
    cases_adam_consts();
    cases_adam();
    cases_optim_multi();
    cases_step_count();
    cases_zero_multi();
    cases_unscale();
    cases_amp_update();
    cases_embed();
    cases_timing();
}

static double bound_for(const bo_buf *b)
{
    if (b->tol > 0)
        return b->tol;
    switch (b->dt) {
    case FERRY_DTYPE_F32: return 1e-10;
    case FERRY_DTYPE_F16: return 1e-8;
    case FERRY_DTYPE_BF16: return 1e-6;
    default: return 0;
    }
}

/* One unit in the last place of an f16 or bf16 value of magnitude a; 0 for
 * other dtypes (their differences all count in the NMSE). */
static double half_ulp(ferry_dtype dt, double a)
{
    if (dt != FERRY_DTYPE_F16 && dt != FERRY_DTYPE_BF16)
        return 0;
    int e = 0;
    frexp(a, &e); /* a = m 2^e, m in [0.5, 1): the binade's exponent is e - 1 */
    return dt == FERRY_DTYPE_F16 ? ldexp(1.0, (e - 1 < -14 ? -14 : e - 1) - 10)
                                 : ldexp(1.0, (e - 1 < -126 ? -126 : e - 1) - 7);
}

/* True when got matches want under b's rule; otherwise says why in `why`. */
static bool compare(const bo_buf *b, const void *got, const void *want, char *why, size_t size)
{
    size_t es = ferry_dtype_size(b->dt);
    if (b->cmp == BC_EXACT || !is_float(b->dt)) {
        for (int64_t i = 0; i < b->n; i++)
            if (memcmp((const char *)got + i * es, (const char *)want + i * es, es) != 0) {
                snprintf(why, size, "element %lld: %.9g, want %.9g (must match bit for bit)", (long long)i,
                         ld(b->dt, got, i), ld(b->dt, want, i));
                return false;
            }
        return true;
    }
    double num = 0, den = 0, worst = -1;
    int64_t worst_at = 0, flips = 0, max_flips = 2 + b->n / 10;
    for (int64_t i = 0; i < b->n; i++) {
        double x = ld(b->dt, got, i), y = ld(b->dt, want, i);
        if (isnan(x) || isnan(y) || isinf(x) || isinf(y)) {
            if (!(isnan(x) && isnan(y)) && x != y) {
                snprintf(why, size, "element %lld: %.9g, want %.9g", (long long)i, x, y);
                return false;
            }
            continue;
        }
        den += y * y;
        if (x != y && fabs(x - y) <= half_ulp(b->dt, fmax(fabs(x), fabs(y)))) {
            flips++;
            continue;
        }
        num += (x - y) * (x - y);
        if (fabs(x - y) > worst) {
            worst = fabs(x - y);
            worst_at = i;
        }
    }
    if (flips > max_flips) {
        snprintf(why, size, "%lld of %lld elements are one unit in the last place off (at most %lld may be: a "
                 "rounding mode other than to nearest even?)", (long long)flips, (long long)b->n,
                 (long long)max_flips);
        return false;
    }
    double nmse = den > 0 ? num / den : num > 0 ? INFINITY : 0;
    if (nmse <= bound_for(b))
        return true;
    snprintf(why, size, "NMSE %.3g > %.3g (worst: element %lld, %.9g, want %.9g)", nmse, bound_for(b),
             (long long)worst_at, ld(b->dt, got, worst_at), ld(b->dt, want, worst_at));
    return false;
}

static size_t buf_bytes(const bo_buf *b) { return (size_t)b->n * ferry_dtype_size(b->dt); }

static void *dup_bytes(const void *p, size_t n)
{
    void *q = malloc(n ? n : 1);
    ASSERT(q);
    if (n)
        memcpy(q, p, n);
    return q;
}

static void init_buf(const bo_buf *b, void *p, ferry_rng *r)
{
    for (int64_t i = 0; i < b->n; i++) {
        if (b->init == BI_NAN)
            st(b->dt, p, i, NAN);
        else if (b->init == BI_CONST)
            st(b->dt, p, i, b->lo);
        else if (b->dt == FERRY_DTYPE_I64)
            ((int64_t *)p)[i] = (int64_t)b->lo + (int64_t)ferry_rng_below(r, (uint64_t)(b->hi - b->lo) + 1);
        else if (!is_float(b->dt))
            st(b->dt, p, i, b->lo + (double)ferry_rng_below(r, (uint64_t)(b->hi - b->lo) + 1));
        else
            st(b->dt, p, i, unif(r, b->lo, b->hi));
    }
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ c[i]) * 0x100000001b3ull;
    return h;
}

typedef struct bo_dev {
    ferry_device dev;
    ferry_stream *stream; /* the kernels and the copies back run here */
    ferry_event *uploaded; /* recorded on the default stream after the uploads */
    char name[FERRY_DEVICE_NAME_MAX];
} bo_dev;

static int ndevs;
static bo_dev devs[1 + 64];

static void open_devices(void)
{
    ndevs = 0;
    int count = ferry_cuda_device_count();
    for (int i = -1; i < count && ndevs < (int)(sizeof devs / sizeof devs[0]); i++) {
        bo_dev *d = &devs[ndevs++];
        d->dev = i < 0 ? ferry_cpu() : ferry_cuda(i);
        ferry_device_format(d->dev, d->name, sizeof d->name);
        ASSERT_OK(ferry_stream_create(d->dev, &d->stream));
        ASSERT_OK(ferry_event_create(d->dev, false, &d->uploaded));
    }
}

static void close_devices(void)
{
    for (int i = 0; i < ndevs; i++) {
        ferry_event_destroy(devs[i].uploaded);
        ferry_stream_destroy(devs[i].stream);
    }
    ndevs = 0;
}

static void report(const bo_case *t, const char *where, const char *what)
{
    printf("  FAIL %s [%s] %s: %s\n", t->kernel, t->desc, where, what);
}

/* Runs one case on one device against the reference; true when it matches. */
/* FERRY_BACKEND_OPS_TIME=N: after a case passes on a device, runs it N more
 * times there and prints the mean time per run with the bytes its buffers hold
 * over that time (GB/s; each buffer counted once, a lower bound on the traffic),
 * and FLOP/s for gemm. scripts/gpu-check.sh sets it on a real GPU; on the
 * simulated one the numbers mean nothing. */
static int time_runs(void)
{
    const char *v = getenv("FERRY_BACKEND_OPS_TIME");
    return v && atoi(v) > 0 ? atoi(v) : 0;
}

/* FERRY_BACKEND_OPS_TIME_DEVICE=NAME (cuda:0, ...): times on that device only,
 * so that the GPU check's timing is not spent on the CPU. */
static bool timed_device(const bo_dev *d)
{
    const char *only = getenv("FERRY_BACKEND_OPS_TIME_DEVICE");
    return !only || !*only || strcmp(only, d->name) == 0;
}

static void time_case(const bo_case *t, const bo_dev *d, const fk_ctx *c, void *const *dp)
{
    int runs = time_runs();
    double bytes = 0, flops = 0;
    for (int b = 0; b < t->nbuf; b++)
        bytes += t->buf[b].null ? 0 : (double)buf_bytes(&t->buf[b]);
    if (strcmp(t->kernel, "gemm") == 0)
        flops = 2.0 * (double)t->gemm.m * (double)t->gemm.n * (double)t->gemm.k * (double)t->gemm.batch;
    struct timespec a, z;
    clock_gettime(CLOCK_MONOTONIC, &a);
    ferry_status st_ = FERRY_OK;
    for (int r = 0; r < runs && st_ == FERRY_OK; r++)
        st_ = t->run(t, c, dp);
    if (st_ == FERRY_OK)
        st_ = ferry_stream_synchronize(d->stream);
    clock_gettime(CLOCK_MONOTONIC, &z);
    double s = ((double)(z.tv_sec - a.tv_sec) + (double)(z.tv_nsec - a.tv_nsec) * 1e-9) / runs;
    if (st_ != FERRY_OK)
        printf("  time %s [%s] on %s: %s\n", t->kernel, t->desc, d->name, ferry_last_error());
    else if (flops > 0)
        printf("  time %s [%s] on %s: %.1f us, %.2f GB/s, %.2f GFLOP/s\n", t->kernel, t->desc, d->name, s * 1e6,
               bytes / s * 1e-9, flops / s * 1e-9);
    else
        printf("  time %s [%s] on %s: %.1f us, %.2f GB/s\n", t->kernel, t->desc, d->name, s * 1e6,
               bytes / s * 1e-9);
}

static bool run_on_device(const bo_case *t, const bo_dev *d, void *const *host, void *const *ref)
{
    ferry_tensor *tens[BO_MAXBUF] = {0};
    void *dp[BO_MAXBUF] = {0}, *back[BO_MAXBUF] = {0};
    char where[64], why[256];
    snprintf(where, sizeof where, "on %s", d->name);
    bool ok = true;
    ferry_status st_ = FERRY_OK;
    for (int b = 0; b < t->nbuf && st_ == FERRY_OK; b++) {
        if (t->buf[b].null)
            continue;
        int64_t n = t->buf[b].n;
        st_ = ferry_tensor_from_host(host[b], &n, 1, t->buf[b].dt, d->dev, &tens[b]);
        if (st_ == FERRY_OK)
            dp[b] = ferry_tensor_data(tens[b]);
    }
    /* ferry_tensor_from_host copies on the default stream (and from pageable
     * memory may return before the copy lands): the case's stream waits for it. */
    if (st_ == FERRY_OK)
        st_ = ferry_event_record(d->uploaded, NULL);
    if (st_ == FERRY_OK)
        st_ = ferry_stream_wait_event(d->stream, d->uploaded);
    fk_ctx c = fk_ctx_make(d->dev, d->stream);
    if (st_ == FERRY_OK)
        st_ = t->run(t, &c, dp);
    for (int b = 0; b < t->nbuf && st_ == FERRY_OK && ref; b++) {
        if (t->buf[b].null || t->buf[b].cmp == BC_IN)
            continue;
        back[b] = malloc(buf_bytes(&t->buf[b]) + 1);
        ASSERT(back[b]);
        st_ = ferry_memcpy(back[b], dp[b], buf_bytes(&t->buf[b]), FERRY_COPY_D2H, d->dev, d->stream);
    }
    if (st_ == FERRY_OK)
        st_ = ferry_stream_synchronize(d->stream);
    if (st_ != FERRY_OK) {
        snprintf(why, sizeof why, "%s (%s)", ferry_status_str(st_), ferry_last_error());
        report(t, where, why);
        ok = false;
    }
    for (int b = 0; b < t->nbuf && ok && ref; b++) {
        if (t->buf[b].null || t->buf[b].cmp == BC_IN)
            continue;
        if (!compare(&t->buf[b], back[b], ref[b], why, sizeof why)) {
            char w2[96];
            snprintf(w2, sizeof w2, "%s, buffer %s", where, t->buf[b].name);
            report(t, w2, why);
            ok = false;
        }
    }
    if (ok && time_runs() && timed_device(d))
        time_case(t, d, &c, dp);
    for (int b = 0; b < t->nbuf; b++) {
        free(back[b]);
        ferry_tensor_release(tens[b]);
    }
    return ok;
}

/* Runs every case of `kernel`: reference, naive check, each device. Returns the
 * number of failures. */
static int run_kernel(const char *kernel)
{
    build_cases();
    open_devices();
    static bool said;
    if (!said) {
        printf("  devices:");
        for (int i = 0; i < ndevs; i++)
            printf(" %s", devs[i].name);
        printf("\n");
        said = true;
    }
    bool digest = getenv("FERRY_BACKEND_OPS_DIGEST") != NULL;
    int fails = 0, ran = 0;
    fk_ctx refc;
    memset(&refc, 0, sizeof refc);
    refc.dev = ferry_cpu();
    refc.k = &fk_cpu_table;
    for (size_t ci = 0; ci < ncases; ci++) {
        const bo_case *t = &cases[ci];
        if (strcmp(t->kernel, kernel) != 0)
            continue;
        ran++;
        void *host[BO_MAXBUF] = {0}, *ref[BO_MAXBUF] = {0}, *want[BO_MAXBUF] = {0}, *rp[BO_MAXBUF] = {0};
        ferry_rng r;
        for (int b = 0; b < t->nbuf; b++) {
            host[b] = malloc(buf_bytes(&t->buf[b]) + 1);
            ASSERT(host[b]);
            ferry_rng_init(&r, seed, ci, (uint64_t)b);
            init_buf(&t->buf[b], host[b], &r);
        }
        ferry_rng_init(&r, seed, ci, 100);
        if (t->prep)
            t->prep(t, host, &r);
        if (t->time_only) { /* real GPUs only (the simulated one would take hours), timed, no reference */
            const char *sim = getenv("FERRY_SIM_GPUS");
            for (int i = 0; i < ndevs && !(sim && atoi(sim) > 0); i++)
                if (devs[i].dev.type != FERRY_DEVICE_CPU)
                    fails += !run_on_device(t, &devs[i], host, NULL);
            for (int b = 0; b < t->nbuf; b++)
                free(host[b]);
            continue;
        }
        for (int b = 0; b < t->nbuf; b++) {
            ref[b] = dup_bytes(host[b], buf_bytes(&t->buf[b]));
            want[b] = dup_bytes(host[b], buf_bytes(&t->buf[b]));
            rp[b] = t->buf[b].null ? NULL : ref[b];
        }
        bool ok = true;
        ferry_status st_ = t->run(t, &refc, rp);
        if (st_ != FERRY_OK) {
            char why[256];
            snprintf(why, sizeof why, "%s (%s)", ferry_status_str(st_), ferry_last_error());
            report(t, "on the CPU reference", why);
            ok = false;
        }
        if (ok && t->naive) {
            void *wp[BO_MAXBUF];
            for (int b = 0; b < t->nbuf; b++)
                wp[b] = t->buf[b].null ? NULL : want[b];
            t->naive(t, wp);
            for (int b = 0; b < t->nbuf; b++) {
                char why[256], where[96];
                if (t->buf[b].null || t->buf[b].cmp == BC_IN || compare(&t->buf[b], ref[b], want[b], why, sizeof why))
                    continue;
                snprintf(where, sizeof where, "CPU against the naive loops, buffer %s", t->buf[b].name);
                report(t, where, why);
                ok = false;
            }
        }
        if (digest) {
            uint64_t h = 0xcbf29ce484222325ull;
            for (int b = 0; b < t->nbuf; b++)
                h = fnv(h, ref[b], buf_bytes(&t->buf[b]));
            printf("  digest %s [%s] %016llx\n", t->kernel, t->desc, (unsigned long long)h);
        }
        for (int i = 0; ok && i < ndevs; i++)
            ok = run_on_device(t, &devs[i], host, ref);
        fails += !ok;
        for (int b = 0; b < t->nbuf; b++) {
            free(host[b]);
            free(ref[b]);
            free(want[b]);
        }
    }
    printf("  %s: %d cases on %d device%s, %d failed\n", kernel, ran, ndevs, ndevs == 1 ? "" : "s", fails);
    close_devices();
    return fails;
}

#define KERNEL_TEST(name)                                                                                   \
    TEST(backend_ops_##name)                                                                                \
    {                                                                                                       \
        int fails_ = run_kernel(#name);                                                                     \
        ASSERT_MSG(fails_ == 0, "%d %s case%s failed (seed %llu)", fails_, #name, fails_ == 1 ? "" : "s", \
                   (unsigned long long)seed);                                                               \
    }

/* Every kernel of FK_KERNELS has cases, and every case names a kernel. */
TEST(backend_ops_every_kernel_has_cases)
{
    build_cases();
    int missing = 0;
    for (size_t k = 0; k < NKERNELS; k++) {
        size_t n = 0;
        for (size_t i = 0; i < ncases; i++)
            n += strcmp(cases[i].kernel, kernel_names[k]) == 0;
        if (!n) {
            printf("  kernel %s has no case\n", kernel_names[k]);
            missing++;
        }
    }
    for (size_t i = 0; i < ncases; i++) {
        bool known = false;
        for (size_t k = 0; k < NKERNELS; k++)
            known |= strcmp(cases[i].kernel, kernel_names[k]) == 0;
        ASSERT_MSG(known, "case [%s] names kernel %s, which FK_KERNELS does not list", cases[i].desc,
                   cases[i].kernel);
    }
    ASSERT_MSG(missing == 0, "%d of %zu kernels have no case", missing, NKERNELS);
    printf("  %zu kernels, %zu cases\n", NKERNELS, ncases);
}

/* One test per kernel, so one can be run alone (build/tests/test_backend_ops backend_ops_gemm).
 * The list is FK_KERNELS itself: a kernel added there gets its test here. */
#define BO_KERNEL_TEST(name, ...) KERNEL_TEST(name)
FK_KERNELS(BO_KERNEL_TEST)
BO_DATA_KERNELS(BO_KERNEL_TEST)

/* ---- the same bits every run ---- */
/* The sums a GPU splits over blocks (the MSE and cross-entropy losses, a full
 * reduction, column reductions and softmax split over blocks), on one device:
 * a digest of their results. with_math adds the ones that use the device math
 * library (cross-entropy, softmax), whose last bits the simulated GPU draws from
 * FERRY_SIM_SEED (as two GPUs' libraries may differ), so they are compared only
 * within a run. */
static uint64_t sums_digest(ferry_device dev, ferry_stream *s, bool with_math)
{
    enum { NX = 2000000, ROWS = 3000, CLASSES = 10 };
    ferry_rng r;
    ferry_rng_init(&r, 20240611, 7, 0);
    float *x = malloc(NX * sizeof *x), *t = malloc(NX * sizeof *t), *out = malloc(NX * sizeof *out);
    int32_t *labels = malloc(ROWS * sizeof *labels);
    ASSERT(x && t && out && labels);
    for (int64_t i = 0; i < NX; i++) {
        x[i] = (float)unif(&r, -2, 2);
        t[i] = (float)unif(&r, -2, 2);
    }
    for (int64_t i = 0; i < ROWS; i++)
        labels[i] = (int32_t)ferry_rng_below(&r, CLASSES);
    int64_t nx = NX, nl = ROWS, one = 1;
    ferry_tensor *tx = NULL, *tt = NULL, *tl = NULL, *ty = NULL, *tloss = NULL;
    ASSERT_OK(ferry_tensor_from_host(x, &nx, 1, FERRY_DTYPE_F32, dev, &tx));
    ASSERT_OK(ferry_tensor_from_host(t, &nx, 1, FERRY_DTYPE_F32, dev, &tt));
    ASSERT_OK(ferry_tensor_from_host(labels, &nl, 1, FERRY_DTYPE_I32, dev, &tl));
    ASSERT_OK(ferry_tensor_zeros(&nx, 1, FERRY_DTYPE_F32, dev, &ty));
    ASSERT_OK(ferry_tensor_zeros(&one, 1, FERRY_DTYPE_F32, dev, &tloss));
    ASSERT_OK(ferry_device_synchronize(dev)); /* the uploads ran on the default stream */
    fk_ctx c = fk_ctx_make(dev, s);
    void *dx = ferry_tensor_data(tx), *dt = ferry_tensor_data(tt), *dy = ferry_tensor_data(ty);
    float *dloss = ferry_tensor_data(tloss);
    uint64_t h = 0xcbf29ce484222325ull;
    /* step k: the kernel, then `bytes` of dy (or the loss) folded into h */
    for (int k = 0; k < (with_math ? 6 : 4); k++) {
        size_t bytes = 0;
        void *res = dy;
        static const float zero = 0.0f; /* the losses add to *loss */
        ASSERT_OK(ferry_memcpy(dloss, &zero, sizeof zero, FERRY_COPY_H2D, dev, s));
        switch (k) {
        case 0: /* MSE over 2M elements: many blocks' partials */
            ASSERT_OK(FK(&c, mse, FERRY_DTYPE_F32, dx, dt, (int64_t)NX, dloss, 1.0f / NX, NULL, 0.0f));
            res = dloss, bytes = sizeof(float);
            break;
        case 1: /* a full reduction: one long row split over blocks */
            ASSERT_OK(FK(&c, reduce, FK_SUM, FERRY_DTYPE_F32, dy, dx, (int64_t)1, (int64_t)NX, (int64_t)1));
            bytes = sizeof(float);
            break;
        case 2: /* ferry_mean over dim 0 of [1000000, 2]: columns split over blocks */
            ASSERT_OK(FK(&c, reduce, FK_MEAN, FERRY_DTYPE_F32, dy, dx, (int64_t)1, (int64_t)(NX / 2), (int64_t)2));
            bytes = 2 * sizeof(float);
            break;
        case 3: /* columns with tiles enough: split over threads only */
            ASSERT_OK(FK(&c, reduce, FK_SUM, FERRY_DTYPE_F32, dy, dx, (int64_t)200, (int64_t)(NX / 200 / 50),
                         (int64_t)50));
            bytes = 200 * 50 * sizeof(float);
            break;
        case 4: { /* cross-entropy's loss over ROWS rows */
            fk_xent xr = {.rows = ROWS, .classes = CLASSES, .loss = dloss, .gscale = 1.0f};
            ASSERT_OK(FK(&c, cross_entropy, FERRY_DTYPE_F32, dx, FERRY_DTYPE_I32, ferry_tensor_data(tl), NULL, &xr));
            res = dloss, bytes = sizeof(float);
            break;
        }
        default: /* softmax over dim 0 of [200000, 2]: three passes over split columns */
            ASSERT_OK(FK(&c, softmax, false, FERRY_DTYPE_F32, dy, dx, (int64_t)1, (int64_t)200000, (int64_t)2));
            bytes = 400000 * sizeof(float);
            break;
        }
        ASSERT_OK(ferry_memcpy(out, res, bytes, FERRY_COPY_D2H, dev, s));
        ASSERT_OK(ferry_stream_synchronize(s));
        h = fnv(h, out, bytes);
    }
    ferry_tensor_release(tx);
    ferry_tensor_release(tt);
    ferry_tensor_release(tl);
    ferry_tensor_release(ty);
    ferry_tensor_release(tloss);
    free(x);
    free(t);
    free(out);
    free(labels);
    return h;
}

/* Run to run: the split sums three times on cuda:0 (the simulated GPU runs each
 * launch's blocks and threads in another seeded order), the same bits each
 * time. On the simulated GPU, a copy of this program with another
 * FERRY_SIM_SEED (another order again, another ulp choice for the device math)
 * must give the same bits for the sums without device math. */
TEST(backend_ops_sums_same_bits_every_run)
{
    if (ferry_cuda_device_count() < 1)
        SKIP("no GPU (FERRY_SIM_GPUS=1 simulates one)");
    ferry_device dev = ferry_cuda(0);
    ferry_stream *s = NULL;
    ASSERT_OK(ferry_stream_create(dev, &s));
    const char *child = getenv("FERRY_BO_SUMS_CHILD");
    if (child && *child) { /* the copy: print the digest for the parent */
        printf("  sums digest %016llx\n", (unsigned long long)sums_digest(dev, s, false));
        ferry_stream_destroy(s);
        return;
    }
    uint64_t all = sums_digest(dev, s, true);
    for (int run = 1; run < 3; run++)
        ASSERT_MSG(sums_digest(dev, s, true) == all, "run %d of the split sums gave other bits", run + 1);
    uint64_t plain = sums_digest(dev, s, false);
    ferry_stream_destroy(s);
    const char *sim = getenv("FERRY_SIM_GPUS");
    if (!sim || atoi(sim) < 1)
        return;
    const char *sd = getenv("FERRY_SIM_SEED");
    unsigned long long other = (sd && *sd ? strtoull(sd, NULL, 0) : 0x5eed) + 1;
    char self[1024], cmd[1200];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1); /* the shell's own would be sh */
    ASSERT(len > 0 && (size_t)len < sizeof self - 1);
    self[len] = 0;
    snprintf(cmd, sizeof cmd, "FERRY_SIM_SEED=%llu FERRY_BO_SUMS_CHILD=1 '%s' sums_same_bits 2>&1", other, self);
    fflush(stdout);
    FILE *p = popen(cmd, "r");
    ASSERT(p);
    char line[256];
    unsigned long long got = 0;
    bool found = false;
    while (fgets(line, sizeof line, p))
        if (sscanf(line, "  sums digest %llx", &got) == 1)
            found = true;
    int rc = pclose(p);
    ASSERT_MSG(found && rc == 0, "the copy with FERRY_SIM_SEED=%llu printed no digest (exit %d)", other, rc);
    ASSERT_MSG(got == plain, "FERRY_SIM_SEED=%llu gave other bits: %016llx, here %016llx", other, got,
               (unsigned long long)plain);
    printf("  same bits with FERRY_SIM_SEED=%llu\n", other);
}

/* scale and shift hold FERRY_CONVERT_MAX_CHANNELS values: an affine conversion of
 * more channels is refused by every device's kernel, before anything is read. */
TEST(backend_ops_batch_convert_refuses_too_many_channels)
{
    ferry_convert_spec b;
    memset(&b, 0, sizeof b);
    b.count = 1;
    b.channels = FERRY_CONVERT_MAX_CHANNELS + 1;
    b.height = b.width = 2;
    b.src_dtype = FERRY_DTYPE_U8;
    b.dst_dtype = FERRY_DTYPE_F32;
    b.affine = true;
    uint8_t src[20] = {0};
    float dst[20];
    ASSERT_STATUS(ferry_convert_batch(ferry_cpu(), NULL, &b, src, dst), FERRY_ERR_LIMIT);
    ASSERT_STR_CONTAINS(ferry_last_error(), "5 channels");
    /* Every GPU entry (CUDA, the simulated GPU with either kernels) refuses
     * before the launch, with nothing queued. */
    if (!ferry_cuda_is_available())
        return;
    ASSERT_STATUS(ferry_convert_batch(ferry_cuda(0), NULL, &b, NULL, NULL), FERRY_ERR_LIMIT);
    ASSERT_STR_CONTAINS(ferry_last_error(), "5 channels");
}

/* Sizes past every CBLAS's int (the CPU's gemm passes them as int, whatever
 * integer the installed cblas.h declares) are refused before any memory is read,
 * never truncated. CPU only: on the simulated GPU a failed kernel is a sticky
 * device fault. */
TEST(backend_ops_cpu_gemm_refuses_sizes_past_int)
{
    fk_ctx c = fk_ctx_make(ferry_cpu(), NULL);
    float a = 1, b = 1, out = 0;
    const int64_t big = (int64_t)INT32_MAX + 1;
    fk_gemm g = {.dt = FERRY_DTYPE_F32, .m = big, .n = 1, .k = 1, .alpha = 1.0f, .a = &a, .lda = 1, .b = &b,
                 .ldb = 1, .c = &out, .ldc = 1, .batch = 1};
    ASSERT_STATUS(FK(&c, gemm, &g), FERRY_ERR_LIMIT);
    ASSERT_STR_CONTAINS(ferry_last_error(), "exceed CBLAS's int");
    g.m = 1;
    g.lda = big;
    ASSERT_STATUS(FK(&c, gemm, &g), FERRY_ERR_LIMIT);
    g.lda = 1;
    ASSERT_STATUS(FK(&c, gemm, &g), FERRY_OK);
    ASSERT_NEAR(out, 1.0, 0);
}

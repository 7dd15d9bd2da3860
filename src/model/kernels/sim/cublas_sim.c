/* The simulated GPU's cuBLAS (cublas_sim.h). Argument rules, from the cuBLAS
 * documentation of cublasGemmStridedBatchedEx and cublasGemmEx: m, n, k >= 0;
 * transa/transb one of N, T, C; lda >= max(1, transa == N ? m : k), ldb >=
 * max(1, transb == N ? k : n), ldc >= max(1, m); batchCount >= 0; alpha and beta
 * not NULL (host pointer mode, read at call time); the (Atype, Btype, Ctype,
 * computeType) combination one of the table's; algo a defined cublasGemmAlgo_t.
 * The output of one batch entry must not overlap another's (the entries run in
 * parallel). A handle belongs to the device current at cublasCreate and must be
 * used with that device current. */
#if FERRY_SIM_KERNELS /* the build found cublas_api.h (Makefile, SIM_KERNELS) */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/blas.h"
#include "common/error.h"
#include "model/kernels/sim/cublas_sim.h"
#include "device/sim/kernel_exec.h"
#include "device/sim/sim.h"
#include "device/sim/sim_internal.h"
#include "tensor/half.h"

struct cublasContext {
    int dev;
    void *stream;
    void *workspace;
    size_t workspace_bytes;
    cublasMath_t math;
};

static atomic_long live_handles;
static _Thread_local cublasStatus_t last_status;
static _Thread_local char last_msg[320];

long ferry_simblas_live(void) { return atomic_load(&live_handles); }

static const char *status_name(cublasStatus_t s)
{
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    default: return "cuBLAS status (simulated)";
    }
}

const char *ferry_simblas_status_string(cublasStatus_t s)
{
    return s == last_status && last_msg[0] ? last_msg : status_name(s);
}

/* Fails the call with s and a message naming the argument. */
static cublasStatus_t reject(cublasStatus_t s, const char *fn, const char *fmt, long long v1, long long v2)
{
    char why[200];
    snprintf(why, sizeof why, fmt, v1, v2);
    last_status = s;
    snprintf(last_msg, sizeof last_msg, "%s (simulated): %s (%s)", fn, why, status_name(s));
    return s;
}

cublasStatus_t ferry_simblas_create(cublasHandle_t *handle)
{
    if (!handle)
        return reject(CUBLAS_STATUS_INVALID_VALUE, "cublasCreate", "handle is NULL%.0lld%.0lld", 0, 0);
    struct cublasContext *h = calloc(1, sizeof *h);
    if (!h)
        return reject(CUBLAS_STATUS_ALLOC_FAILED, "cublasCreate", "no memory for a handle%.0lld%.0lld", 0, 0);
    h->dev = ferry_simk_device();
    atomic_fetch_add(&live_handles, 1);
    *handle = h;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t ferry_simblas_destroy(cublasHandle_t h)
{
    if (!h)
        return reject(CUBLAS_STATUS_NOT_INITIALIZED, "cublasDestroy", "handle is NULL%.0lld%.0lld", 0, 0);
    atomic_fetch_sub(&live_handles, 1);
    free(h);
    return CUBLAS_STATUS_SUCCESS;
}

/* cublasSetStream also resets the workspace to cuBLAS's own default. */
cublasStatus_t ferry_simblas_set_stream(cublasHandle_t h, cudaStream_t stream)
{
    if (!h)
        return reject(CUBLAS_STATUS_NOT_INITIALIZED, "cublasSetStream", "handle is NULL%.0lld%.0lld", 0, 0);
    h->stream = (void *)stream;
    h->workspace = NULL;
    h->workspace_bytes = 0;
    return CUBLAS_STATUS_SUCCESS;
}

/* cuBLAS: the workspace must be aligned to 256 bytes, its size a multiple of 256. */
cublasStatus_t ferry_simblas_set_workspace(cublasHandle_t h, void *ws, size_t bytes)
{
    if (!h)
        return reject(CUBLAS_STATUS_NOT_INITIALIZED, "cublasSetWorkspace", "handle is NULL%.0lld%.0lld", 0, 0);
    if (((uintptr_t)ws % 256) || bytes % 256)
        return reject(CUBLAS_STATUS_INVALID_VALUE, "cublasSetWorkspace",
                      "workspace at offset %lld mod 256, size %lld: both must be multiples of 256",
                      (long long)((uintptr_t)ws % 256), (long long)bytes);
    h->workspace = ws;
    h->workspace_bytes = bytes;
    return CUBLAS_STATUS_SUCCESS;
}

/* A mode is one of cublasMath_t's base values, optionally with
 * CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION. */
cublasStatus_t ferry_simblas_set_math_mode(cublasHandle_t h, cublasMath_t mode)
{
    if (!h)
        return reject(CUBLAS_STATUS_NOT_INITIALIZED, "cublasSetMathMode", "handle is NULL%.0lld%.0lld", 0, 0);
    unsigned base = (unsigned)mode & ~(unsigned)CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION;
    if (base != CUBLAS_DEFAULT_MATH && base != CUBLAS_TENSOR_OP_MATH && base != CUBLAS_PEDANTIC_MATH &&
        base != CUBLAS_TF32_TENSOR_OP_MATH)
        return reject(CUBLAS_STATUS_INVALID_VALUE, "cublasSetMathMode", "mode %lld is not a cublasMath_t%.0lld",
                      (long long)mode, 0);
    h->math = mode;
    return CUBLAS_STATUS_SUCCESS;
}

static const char GEMM[] = "cublasGemmStridedBatchedEx";

typedef struct gemm_op {
    sim_op op;
    bool ta, tb;
    int m, n, k, lda, ldb, ldc, batch;
    long long sa, sb, sc;
    const void *a, *b;
    void *c;
    cudaDataType_t at, ct;
    float alpha, beta;
    uint64_t seed;
    bool fault;
} gemm_op;

static float load(cudaDataType_t t, const void *p, long long i)
{
    switch (t) {
    case CUDA_R_16F: return ferry_f16_to_f32_(((const uint16_t *)p)[i]);
    case CUDA_R_16BF: return ferry_bf16_to_f32_(((const uint16_t *)p)[i]);
    default: return ((const float *)p)[i];
    }
}

static void store(cudaDataType_t t, void *p, long long i, float v)
{
    switch (t) {
    case CUDA_R_16F: ((uint16_t *)p)[i] = ferry_f32_to_f16_(v); break;
    case CUDA_R_16BF: ((uint16_t *)p)[i] = ferry_f32_to_bf16_(v); break;
    default: ((float *)p)[i] = v; break;
    }
}

static uint64_t mix(uint64_t z)
{
    z += UINT64_C(0x9E3779B97F4A7C15);
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* One dot product of op(A) row i and op(B) column j over k, in f32 with fused
 * multiply-adds: split into `parts` runs, each summed forwards or backwards,
 * the partial sums then added: one of the orders a blocked GPU gemm may take. */
static float dot(const gemm_op *g, const char *a, const char *b, int i, int j, int parts, bool rev)
{
    float part[4] = {0, 0, 0, 0};
    int chunk = (g->k + parts - 1) / parts;
    for (int p = 0; p < parts; p++) {
        int lo = p * chunk, hi = lo + chunk < g->k ? lo + chunk : g->k;
        for (int q = lo; q < hi; q++) {
            int l = rev ? lo + hi - 1 - q : q;
            float x = load(g->at, a, g->ta ? l + (long long)i * g->lda : i + (long long)l * g->lda);
            float y = load(g->at, b, g->tb ? j + (long long)l * g->ldb : l + (long long)j * g->ldb);
            part[p] = fmaf(x, y, part[p]);
        }
    }
    float s = 0.0f;
    for (int p = 0; p < parts; p++)
        s += part[rev ? parts - 1 - p : p];
    return s;
}

/* A column-major operand of rows x cols (leading dimension ld) as f32 (f16 and
 * bf16 widen exactly). Only the operand's own elements are read: past the last
 * column's last row may be another batch entry's, or past the allocation. */
static float *widen(cudaDataType_t t, const void *p, long long ld, long long rows, long long cols)
{
    float *w = calloc((size_t)(ld * cols), sizeof *w);
    for (long long j = 0; w && j < cols; j++)
        for (long long i = 0; i < rows; i++)
            w[i + j * ld] = load(t, p, i + j * ld);
    return w;
}

/* Products past the reference's reach (2^16 multiply-adds: the samples' many
 * convolution gemms, or one of 2048^3, take minutes there, under ASan more) go
 * to the host's CBLAS on f32 copies, then alpha, beta and the output rounding as
 * above: one more order cuBLAS may take, the same for every seed. The argument
 * checks are the same for both. */
#define FK_SIMBLAS_REFERENCE_MAX (1 << 16)
static ferry_status gemm_run_blas(const gemm_op *g)
{
    size_t as = g->at == CUDA_R_32F ? 4 : 2, cs = g->ct == CUDA_R_32F ? 4 : 2;
    long long acols = g->ta ? g->m : g->k, bcols = g->tb ? g->k : g->n;
    long long arows = g->ta ? g->k : g->m, brows = g->tb ? g->n : g->k;
    float *prod = malloc((size_t)g->m * (size_t)g->n * sizeof *prod);
    if (!prod)
        return ferry_fail(FERRY_ERR_NO_MEMORY, "%s (simulated): no host memory for the product", GEMM);
    for (int e = 0; e < g->batch; e++) {
        const char *a = (const char *)g->a + (long long)e * g->sa * (long long)as;
        const char *b = (const char *)g->b + (long long)e * g->sb * (long long)as;
        char *c = (char *)g->c + (long long)e * g->sc * (long long)cs;
        float *wa = g->at == CUDA_R_32F ? (float *)a : widen(g->at, a, g->lda, arows, acols);
        float *wb = g->at == CUDA_R_32F ? (float *)b : widen(g->at, b, g->ldb, brows, bcols);
        if (wa && wb)
            cblas_sgemm(CblasColMajor, g->ta ? CblasTrans : CblasNoTrans, g->tb ? CblasTrans : CblasNoTrans, g->m,
                        g->n, g->k, 1.0f, wa, g->lda, wb, g->ldb, 0.0f, prod, g->m);
        for (int j = 0; wa && wb && j < g->n; j++) {
            for (int i = 0; i < g->m; i++) {
                long long ci = i + (long long)j * g->ldc;
                float v = g->alpha * prod[i + (long long)j * g->m];
                if (g->beta != 0.0f)
                    v = fmaf(g->beta, load(g->ct, c, ci), v);
                store(g->ct, c, ci, v);
            }
        }
        bool ok = wa && wb;
        if (wa != (const float *)a)
            free(wa);
        if (wb != (const float *)b)
            free(wb);
        if (!ok) {
            free(prod);
            return ferry_fail(FERRY_ERR_NO_MEMORY, "%s (simulated): no host memory for f32 operands", GEMM);
        }
    }
    free(prod);
    return FERRY_OK;
}

static ferry_status gemm_run(sim_op *op)
{
    gemm_op *g = (gemm_op *)op;
    if (g->fault)
        return ferry_fail(FERRY_ERR_CUDA, "%s: injected fault (an illegal memory access)", GEMM);
    if ((double)g->m * g->n * g->k * g->batch > (double)FK_SIMBLAS_REFERENCE_MAX)
        return gemm_run_blas(g);
    size_t as = g->at == CUDA_R_32F ? 4 : 2, cs = g->ct == CUDA_R_32F ? 4 : 2;
    uint64_t r = mix(g->seed);
    int parts = g->k >= 4 ? 1 + (int)(r % 4) : 1;
    bool rev = (r >> 8) & 1;
    for (int e = 0; e < g->batch; e++) {
        const char *a = (const char *)g->a + (long long)e * g->sa * (long long)as;
        const char *b = (const char *)g->b + (long long)e * g->sb * (long long)as;
        char *c = (char *)g->c + (long long)e * g->sc * (long long)cs;
        for (int j = 0; j < g->n; j++) {
            for (int i = 0; i < g->m; i++) {
                long long ci = i + (long long)j * g->ldc;
                float v = g->alpha * dot(g, a, b, i, j, parts, rev);
                if (g->beta != 0.0f) /* beta = 0: C is not read (it may hold NaN) */
                    v = fmaf(g->beta, load(g->ct, c, ci), v);
                store(g->ct, c, ci, v);
            }
        }
    }
    return FERRY_OK;
}

static bool op_ok(cublasOperation_t t) { return t == CUBLAS_OP_N || t == CUBLAS_OP_T || t == CUBLAS_OP_C; }

static bool algo_ok(cublasGemmAlgo_t a)
{
    return a == CUBLAS_GEMM_DEFAULT || (a >= CUBLAS_GEMM_ALGO0 && a <= CUBLAS_GEMM_ALGO23) ||
           a == CUBLAS_GEMM_DEFAULT_TENSOR_OP || (a >= CUBLAS_GEMM_ALGO0_TENSOR_OP && a <= CUBLAS_GEMM_ALGO15_TENSOR_OP);
}

/* The CUBLAS_COMPUTE_32F rows of cublasGemmEx's table that ferry's dtypes reach:
 * A and B alike, C alike or f32. */
static bool types_ok(cudaDataType_t at, cudaDataType_t bt, cudaDataType_t ct, cublasComputeType_t compute)
{
    if (compute != CUBLAS_COMPUTE_32F || at != bt)
        return false;
    if (at == CUDA_R_32F)
        return ct == CUDA_R_32F;
    return (at == CUDA_R_16F || at == CUDA_R_16BF) && (ct == at || ct == CUDA_R_32F);
}

static long long max1(long long v) { return v > 1 ? v : 1; }

cublasStatus_t ferry_simblas_gemm_sbex(cublasHandle_t h, cublasOperation_t transa, cublasOperation_t transb, int m,
                                       int n, int k, const void *alpha, const void *a, cudaDataType_t atype, int lda,
                                       long long stride_a, const void *b, cudaDataType_t btype, int ldb,
                                       long long stride_b, const void *beta, void *c, cudaDataType_t ctype, int ldc,
                                       long long stride_c, int batch, cublasComputeType_t compute,
                                       cublasGemmAlgo_t algo)
{
    last_msg[0] = 0;
    if (!h)
        return reject(CUBLAS_STATUS_NOT_INITIALIZED, GEMM, "handle is NULL%.0lld%.0lld", 0, 0);
    if (h->dev != ferry_simk_device())
        return reject(CUBLAS_STATUS_INVALID_VALUE, GEMM,
                      "the handle was created on cuda:%lld but cuda:%lld is current", h->dev, ferry_simk_device());
    if (!op_ok(transa) || !op_ok(transb))
        return reject(CUBLAS_STATUS_INVALID_VALUE, GEMM, "transa = %lld / transb = %lld: not N, T or C", transa,
                      transb);
    if (m < 0 || n < 0 || k < 0)
        return reject(CUBLAS_STATUS_INVALID_VALUE, GEMM, "m, n or k negative (m = %lld, n = %lld)", m, n);
    long long arows = transa == CUBLAS_OP_N ? m : k, brows = transb == CUBLAS_OP_N ? k : n;
    if (lda < max1(arows))
        return reject(CUBLAS_STATUS_INVALID_VALUE, GEMM, "lda = %lld is less than max(1, rows of A = %lld)", lda,
                      arows);
    if (ldb < max1(brows))
        return reject(CUBLAS_STATUS_INVALID_VALUE, GEMM, "ldb = %lld is less than max(1, rows of B = %lld)", ldb,
                      brows);
    if (ldc < max1(m))
        return reject(CUBLAS_STATUS_INVALID_VALUE, GEMM, "ldc = %lld is less than max(1, m = %lld)", ldc, m);
    if (batch < 0)
        return reject(CUBLAS_STATUS_INVALID_VALUE, GEMM, "batchCount = %lld is negative%.0lld", batch, 0);
    if (!alpha || !beta)
        return reject(CUBLAS_STATUS_INVALID_VALUE, GEMM, "alpha or beta is NULL%.0lld%.0lld", 0, 0);
    if (!types_ok(atype, btype, ctype, compute))
        return reject(CUBLAS_STATUS_NOT_SUPPORTED, GEMM,
                      "Atype %lld, Btype %lld and this Ctype and computeType are not a supported combination",
                      atype, btype);
    if (!algo_ok(algo))
        return reject(CUBLAS_STATUS_INVALID_VALUE, GEMM, "algo = %lld is not a cublasGemmAlgo_t%.0lld", algo, 0);
    if (batch > 1 && m > 0 && n > 0 && llabs(stride_c) < (long long)ldc * (n - 1) + m)
        return reject(CUBLAS_STATUS_INVALID_VALUE, GEMM,
                      "strideC = %lld makes the batch entries' outputs overlap (each spans %lld elements)", stride_c,
                      (long long)ldc * (n - 1) + m);
    if (m == 0 || n == 0 || batch == 0)
        return CUBLAS_STATUS_SUCCESS;
    sim_stream *s;
    if (ferry_sim_launch_stream(h->dev, h->stream, GEMM, &s) != FERRY_OK)
        return reject(CUBLAS_STATUS_EXECUTION_FAILED, GEMM, "the device or stream failed (cuda:%lld)%.0lld", h->dev, 0);
    gemm_op *g = calloc(1, sizeof *g);
    if (!g)
        return reject(CUBLAS_STATUS_ALLOC_FAILED, GEMM, "no memory to queue the call%.0lld%.0lld", 0, 0);
    g->op.run = gemm_run;
    g->op.what = GEMM;
    g->ta = transa != CUBLAS_OP_N;
    g->tb = transb != CUBLAS_OP_N;
    g->m = m, g->n = n, g->k = k, g->lda = lda, g->ldb = ldb, g->ldc = ldc, g->batch = batch;
    g->sa = stride_a, g->sb = stride_b, g->sc = stride_c;
    g->a = a, g->b = b, g->c = c;
    g->at = atype, g->ct = ctype;
    g->alpha = *(const float *)alpha;
    g->beta = *(const float *)beta;
    g->fault = ferry_sim_take_fault(h->dev);
    /* The order depends on the seed and the call's shape, never on how many
     * calls came before: cuBLAS gives bitwise the same result for the same
     * call on the same GPU, run after run (its documentation, "Results
     * reproducibility"), which checkpoint-resume tests rely on. */
    g->seed = mix(ferry_sim_seed() ^ mix(((uint64_t)(uint32_t)m << 32 | (uint32_t)n) ^
                                         ((uint64_t)(uint32_t)k << 20) ^ ((uint64_t)transa << 8) ^
                                         ((uint64_t)transb << 4) ^ (uint64_t)atype ^ ((uint64_t)batch << 40)));
    (void)ferry_sim_enqueue(s, &g->op, NULL);
    return CUBLAS_STATUS_SUCCESS;
}
#else
typedef int ferry_no_simblas; /* no CUDA headers: the simulated GPU runs the CPU kernels */
#endif

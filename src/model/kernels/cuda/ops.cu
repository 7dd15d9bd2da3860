// CUDA kernels for the tensor ops: fill, convert, elementwise maps with
// broadcasting over strided operands, reductions, softmax, Philox random numbers,
// and gemm through cuBLAS (tensor-op math with f32 accumulation for f16/bf16).
// Per-element formulas are the CPU's (kernels/formulas.h); convert evaluates
// them in the same precision (double) and rounding, the elementwise maps in f32
// (k_unary's comment gives the bound).
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "device/device_internal.h"
#include "model/kernels/cuda/common.cuh"

FK_SOURCE_BEGIN

// Element offset of flat index i in an operand with strides st.
__device__ __forceinline__ int64_t nd_off(const fk_nd &nd, const int64_t *st, int64_t i)
{
    if (nd.ndim == 1) // nd_flat's contiguous case: no 64-bit division per element
        return i * st[0];
    int64_t off = 0;
    for (int d = nd.ndim - 1; d >= 0; d--) {
        int64_t s = nd.shape[d];
        off += (i % s) * st[d];
        i /= s;
    }
    return off;
}

// The operands (y, then x or a, then b: nops of them) all row-major contiguous:
// one flat dimension instead of a division and a modulo per dimension and element.
static fk_nd nd_flat(const fk_nd *nd, int nops)
{
    int64_t expect = 1;
    for (int d = nd->ndim - 1; d >= 0; d--) {
        if (nd->shape[d] != 1 && (nd->so[d] != expect || (nops > 1 && nd->sa[d] != expect) ||
                                  (nops > 2 && nd->sb[d] != expect)))
            return *nd;
        expect *= nd->shape[d];
    }
    fk_nd f = *nd;
    f.ndim = 1;
    f.shape[0] = nd->numel;
    f.so[0] = f.sa[0] = f.sb[0] = 1;
    return f;
}

template <typename T> __global__ void k_fill(T *y, fk_nd nd, T v)
{
    FK_GRID_STRIDE(i, nd.numel) y[nd_off(nd, nd.so, i)] = v;
}

extern "C" ferry_status FK_CU(fk_cuda_fill)(const fk_ctx *c, ferry_dtype dt, void *y, const fk_nd *nd, double v)
{
    fk_guard guard;
    ferry_status st = fk_enter(c, &guard);
    if (st != FERRY_OK || nd->numel == 0)
        return st;
    FK_ALL_TYPES(dt, T, "fill", {
        T tv;
        unsigned char bytes[8];
        fk_std(dt, bytes, 0, v); // converted on the host: one kernel per type
        memcpy((void *)&tv, bytes, sizeof tv);
        FK_LAUNCH(fk_blocks(nd->numel), FK_THREADS, fk_stream(c), k_fill<T>)((T *)y, nd_flat(nd, 1), tv);
    });
    return fk_launched("fill kernel");
}

template <typename Y, typename X> __global__ void k_convert(Y *y, const X *x, fk_nd nd, double mul, double add)
{
    FK_GRID_STRIDE(i, nd.numel)
    {
        y[nd_off(nd, nd.so, i)] = fk_to<Y>(fk_affine(fk_d(x[nd_off(nd, nd.sa, i)]), mul, add));
    }
}

template <> __global__ void k_convert<int64_t, int64_t>(int64_t *y, const int64_t *x, fk_nd nd, double mul, double add)
{
    FK_GRID_STRIDE(i, nd.numel)
    {
        int64_t v = x[nd_off(nd, nd.sa, i)];
        y[nd_off(nd, nd.so, i)] = (mul == 1.0 && add == 0.0) ? v : fk_to<int64_t>(fk_affine((double)v, mul, add));
    }
}

extern "C" ferry_status FK_CU(fk_cuda_convert)(const fk_ctx *c, ferry_dtype ydt, void *y, ferry_dtype xdt, const void *x,
                                        const fk_nd *nd, double mul, double add)
{
    fk_guard guard;
    ferry_status st = fk_enter(c, &guard);
    if (st != FERRY_OK || nd->numel == 0)
        return st;
    FK_ALL_TYPES(ydt, Y, "convert", {
        FK_ALL_TYPES(xdt, X, "convert", {
            FK_LAUNCH(fk_blocks(nd->numel), FK_THREADS, fk_stream(c), k_convert<Y, X>)((Y *)y, (const X *)x, nd_flat(nd, 2), mul,
                                                                                   add);
        });
    });
    return fk_launched("convert kernel");
}

// The elementwise maps compute in f32 (double runs at 1/64 the f32 rate on the
// consumer GPUs the build targets); the CPU reference computes in double and
// rounds once. Where the two agree:
// - bit for bit: neg, relu, abs, max_s, min_s, the binary ops (+ - * / of two
//   floats rounded once in f32 equal the double result rounded to f32, as 53 >=
//   2 * 24 + 2), and add_s, mul_s, rsub_s, rdiv_s when the scalar is an f32
//   value (any other is rounded to f32 first, as the CPU's own f32 fast path
//   does: an ulp from the double result at most); sqrt too (correctly
//   rounded: nvcc's -prec-sqrt=true default);
// - within the f32 math library's documented error (CUDA Programming Guide,
//   maximum ulp error): exp 2, log 1, tanh 2, pow 4 (at the scalar rounded to
//   f32), sigmoid 1 / (1 + expf(-x)) about 3, gelu x/2 (1 + erff(x / sqrt 2))
//   about 3 relative where x >= 0, and an absolute 2 ulp of 1 times |x| / 2
//   where x < 0 (1 + erf cancels there), i.e. 1.2e-7 |x|.
// So an f32 result is at most a few ulp (about 5e-7 relative) from the CPU's,
// well inside test_backend_ops' f32 bound (NMSE 1e-10, an RMS relative error
// of 1e-5); f16 and bf16 results are the f32 one rounded once more, so they
// differ only where it straddles a rounding boundary (one unit, counted there).
__device__ __forceinline__ float fk_uop_f32(int op, float x, float s)
{
    switch (op) {
    case FK_NEG: return -x;
    case FK_RELU: return x > 0.0f ? x : 0.0f;
    case FK_GELU: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752440f));
    case FK_EXP: return expf(x);
    case FK_LOG: return logf(x);
    case FK_SQRT: return sqrtf(x);
    case FK_TANH: return tanhf(x);
    case FK_SIGMOID: return 1.0f / (1.0f + expf(-x));
    case FK_ABS: return fabsf(x);
    case FK_ADD_S: return x + s;
    case FK_MUL_S: return x * s;
    case FK_RSUB_S: return s - x;
    case FK_RDIV_S: return s / x;
    case FK_POW_S: return powf(x, s);
    case FK_MAX_S: return x > s || x != x ? x : s;
    case FK_MIN_S: return x < s || x != x ? x : s;
    default: return 0.0f;
    }
}

template <typename T> __global__ void k_unary(int op, T *y, const T *x, fk_nd nd, float s)
{
    FK_GRID_STRIDE(i, nd.numel)
    y[nd_off(nd, nd.so, i)] = fk_to_f32<T>(fk_uop_f32(op, fk_f(x[nd_off(nd, nd.sa, i)]), s));
}

extern "C" ferry_status FK_CU(fk_cuda_unary)(const fk_ctx *c, fk_uop op, ferry_dtype dt, void *y, const void *x,
                                      const fk_nd *nd, double alpha)
{
    fk_guard guard;
    ferry_status st = fk_enter(c, &guard);
    if (st != FERRY_OK || nd->numel == 0)
        return st;
    FK_FLOAT_TYPES(dt, T, "elementwise op", {
        FK_LAUNCH(fk_blocks(nd->numel), FK_THREADS, fk_stream(c), k_unary<T>)((int)op, (T *)y, (const T *)x, nd_flat(nd, 2),
                                                                          (float)alpha);
    });
    return fk_launched("unary kernel");
}

// In f32: the CPU's double result rounded to f32, bit for bit (see fk_uop_f32).
__device__ __forceinline__ float fk_bop_f32(int op, float a, float b)
{
    switch (op) {
    case FK_ADD: return a + b;
    case FK_SUB: return a - b;
    case FK_MUL: return a * b;
    case FK_DIV: return a / b;
    case FK_MAXIMUM: return a != a || b != b ? NAN : a > b ? a : b;
    case FK_MINIMUM: return a != a || b != b ? NAN : a < b ? a : b;
    default: return 0.0f;
    }
}

template <typename T> __global__ void k_binary(int op, T *y, const T *a, const T *b, fk_nd nd)
{
    FK_GRID_STRIDE(i, nd.numel)
    y[nd_off(nd, nd.so, i)] = fk_to_f32<T>(fk_bop_f32(op, fk_f(a[nd_off(nd, nd.sa, i)]), fk_f(b[nd_off(nd, nd.sb, i)])));
}

extern "C" ferry_status FK_CU(fk_cuda_binary)(const fk_ctx *c, fk_bop op, ferry_dtype dt, void *y, const void *a,
                                       const void *b, const fk_nd *nd)
{
    fk_guard guard;
    ferry_status st = fk_enter(c, &guard);
    if (st != FERRY_OK || nd->numel == 0)
        return st;
    FK_FLOAT_TYPES(dt, T, "elementwise op", {
        FK_LAUNCH(fk_blocks(nd->numel), FK_THREADS, fk_stream(c), k_binary<T>)((int)op, (T *)y, (const T *)a,
                                                                           (const T *)b, nd_flat(nd, 3));
    });
    return fk_launched("binary kernel");
}

// One block per output when the reduced axis is contiguous (inner == 1), one
// thread per output otherwise (then neighbouring threads read neighbouring memory).
template <typename T> __global__ void k_reduce_rows(int op, void *y, const T *x, int64_t outer, int64_t n)
{
    __shared__ double shd[32];
    __shared__ float shv[32];
    __shared__ int64_t shi[32];
    for (int64_t o = blockIdx.x; o < outer; o += gridDim.x) {
        const T *row = x + o * n;
        if (op == FK_SUM || op == FK_MEAN) {
            double s = 0.0; // in double, as the CPU does
            for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
                s += fk_d(row[j]);
            s = fk_block_sum_d(s, shd);
            if (threadIdx.x == 0)
                ((T *)y)[o] = fk_to<T>(fk_reduce_final(op, s, n));
        } else {
            float v = -INFINITY;
            int64_t arg = INT64_MAX;
            for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
                fk_argmax_merge(v, arg, fk_f(row[j]), j);
            fk_block_argmax(v, arg, shv, shi);
            if (threadIdx.x == 0) {
                if (op == FK_ARGMAX)
                    ((int64_t *)y)[o] = arg == INT64_MAX ? 0 : arg;
                else
                    ((T *)y)[o] = fk_to<T>(v);
            }
        }
        __syncthreads();
    }
}

// Few long rows (a full reduction is one): block b reduces chunk b % chunks of
// row b / chunks into partial b, sums in double; k_reduce_combine then merges
// each row's partials in chunk order. No atomics: the same result every run.
template <typename T>
__global__ void k_reduce_split(int op, const T *x, int64_t outer, int64_t n, int64_t chunks, int64_t len,
                               double *pacc, int64_t *parg)
{
    __shared__ double shd[32];
    __shared__ float shv[32];
    __shared__ int64_t shi[32];
    for (int64_t b = blockIdx.x; b < outer * chunks; b += gridDim.x) {
        const T *row = x + (b / chunks) * n;
        int64_t j0 = (b % chunks) * len, j1 = j0 + len < n ? j0 + len : n;
        if (op == FK_SUM || op == FK_MEAN) {
            double s = 0.0;
            for (int64_t j = j0 + threadIdx.x; j < j1; j += blockDim.x)
                s += fk_d(row[j]);
            s = fk_block_sum_d(s, shd);
            if (threadIdx.x == 0)
                pacc[b] = s;
        } else {
            float v = -INFINITY;
            int64_t arg = INT64_MAX;
            for (int64_t j = j0 + threadIdx.x; j < j1; j += blockDim.x)
                fk_argmax_merge(v, arg, fk_f(row[j]), j);
            fk_block_argmax(v, arg, shv, shi);
            if (threadIdx.x == 0) {
                pacc[b] = v;
                parg[b] = arg;
            }
        }
        __syncthreads();
    }
}

// One thread per row: its partials in chunk order (every chunk holds elements).
template <typename T>
__global__ void k_reduce_combine(int op, void *y, int64_t outer, int64_t n, int64_t chunks, const double *pacc,
                                 const int64_t *parg)
{
    FK_GRID_STRIDE(o, outer)
    {
        double acc = pacc[o * chunks];
        int64_t arg = parg[o * chunks];
        for (int64_t k = 1; k < chunks; k++) {
            if (op == FK_SUM || op == FK_MEAN)
                acc += pacc[o * chunks + k];
            else
                fk_reduce_merge(&acc, &arg, pacc[o * chunks + k], parg[o * chunks + k]);
        }
        if (op == FK_ARGMAX)
            ((int64_t *)y)[o] = arg;
        else
            ((T *)y)[o] = fk_to<T>(fk_reduce_final(op, acc, n));
    }
}

// Chunks per row for k_reduce_split: 0 when one block per row already fills
// the GPU or a row is short; else enough that about FK_SPLIT_BLOCKS blocks run,
// each at least FK_SPLIT_MIN elements.
#define FK_SPLIT_BLOCKS 1024
#define FK_SPLIT_MIN 4096
static int64_t reduce_split_chunks(int64_t outer, int64_t n)
{
    if (outer >= FK_SPLIT_BLOCKS / 8 || n < 2 * FK_SPLIT_MIN)
        return 0;
    int64_t chunks = FK_SPLIT_BLOCKS / outer, most = n / FK_SPLIT_MIN;
    return chunks < most ? chunks : most;
}

// The split reduction: partials in scratch memory kept between calls (scratch.c),
// freed (stream-ordered) once the combine is queued.
template <typename T>
static ferry_status reduce_split(const fk_ctx *c, int op, void *y, const T *x, int64_t outer, int64_t n,
                                 int64_t chunks)
{
    int64_t len = (n + chunks - 1) / chunks;
    chunks = (n + len - 1) / len; // every chunk non-empty
    int64_t parts = outer * chunks;
    fk_scratch scratch;
    ferry_status st = fk_scratch_take(c, (size_t)parts * (sizeof(double) + sizeof(int64_t)), &scratch);
    if (st != FERRY_OK)
        return st;
    double *pacc = (double *)scratch.p;
    int64_t *parg = (int64_t *)(pacc + parts);
    FK_LAUNCH_COOP((unsigned)(parts < 65535 ? parts : 65535), FK_THREADS, fk_stream(c), k_reduce_split<T>)(
        op, x, outer, n, chunks, len, pacc, parg);
    st = fk_launched("reduce kernel");
    if (st == FERRY_OK) {
        FK_LAUNCH(fk_blocks(outer), FK_THREADS, fk_stream(c), k_reduce_combine<T>)(op, y, outer, n, chunks, pacc,
                                                                                 parg);
        st = fk_launched("reduce combine kernel");
    }
    fk_scratch_give(c, &scratch);
    return st;
}

// A reduced axis that is not the last: a block takes `cols` neighbouring columns
// (coalesced reads) of one outer index and FK_THREADS / cols lanes of rows each;
// every thread accumulates in double, as the CPU does (an f32 running sum of a
// million rows is 1 % off), and lane 0 merges the lanes' partials in a fixed order.
// Few such tiles over a long axis (ferry_mean over dim 0 of [1000000, 2] is one
// tile) also split the axis over blocks: block b then takes rows [k len, (k + 1)
// len) of its tile, k = b % chunks, and writes each column's partial to
// pacc/parg[(o inner + i) chunks + k], which k_reduce_combine merges in chunk
// order. No atomics: the same bits every run.
template <typename T>
__global__ void k_reduce_cols(int op, void *y, const T *x, int64_t outer, int64_t n, int64_t inner, int cols,
                              int64_t chunks, int64_t len, double *pacc, int64_t *parg)
{
    __shared__ double sha[FK_THREADS];
    __shared__ int64_t shi[FK_THREADS];
    int64_t tiles = (inner + cols - 1) / cols, lanes = FK_THREADS / cols;
    int c = (int)threadIdx.x % cols, lane = (int)threadIdx.x / cols;
    for (int64_t b = blockIdx.x; b < outer * tiles * chunks; b += gridDim.x) {
        int64_t k = b % chunks, tile = b / chunks;
        int64_t o = tile / tiles, i = (tile % tiles) * cols + c;
        int64_t j0 = k * len, j1 = j0 + len < n ? j0 + len : n;
        double acc = fk_reduce_init(op);
        int64_t arg = 0;
        if (i < inner)
            for (int64_t j = j0 + lane; j < j1; j += lanes)
                fk_reduce_step(op, &acc, &arg, fk_d(x[(o * n + j) * inner + i]), j);
        sha[threadIdx.x] = acc;
        shi[threadIdx.x] = arg;
        __syncthreads(); // every lane's partial is in sha/shi
        if (lane == 0 && i < inner) {
            for (int64_t l = 1; l < lanes && l < j1 - j0; l++) { // lanes that saw a row
                if (op == FK_SUM || op == FK_MEAN)
                    acc += sha[l * cols + c];
                else
                    fk_reduce_merge(&acc, &arg, sha[l * cols + c], shi[l * cols + c]);
            }
            if (chunks > 1) {
                pacc[(o * inner + i) * chunks + k] = acc;
                parg[(o * inner + i) * chunks + k] = arg;
            } else if (op == FK_ARGMAX) {
                ((int64_t *)y)[o * inner + i] = arg;
            } else {
                ((T *)y)[o * inner + i] = fk_to<T>(fk_reduce_final(op, acc, n));
            }
        }
        __syncthreads();
    }
}

// Columns per block for k_reduce_cols and k_softmax_cols: all of inner, rounded
// up to a power of two, up to a warp's 32.
static int reduce_cols_width(int64_t inner)
{
    int cols = 1;
    while (cols < 32 && cols < inner)
        cols *= 2;
    return cols;
}

// Chunks of the axis for k_reduce_cols and k_softmax_cols: 1 when the tiles
// (blocks of `cols` columns) already fill the GPU or the axis is short; else
// enough that about FK_SPLIT_BLOCKS blocks run, each over at least FK_SPLIT_MIN
// elements. Depends on the shape only, so the summation order (and the result's
// bits) does too. *len: rows per chunk, every chunk non-empty.
static int64_t cols_chunks(int64_t tiles, int64_t n, int cols, int64_t *len)
{
    int64_t chunks = 1;
    if (tiles < FK_SPLIT_BLOCKS / 8) {
        int64_t most = n / (FK_SPLIT_MIN / cols), want = FK_SPLIT_BLOCKS / tiles;
        chunks = want < most ? want : most;
        if (chunks < 2)
            chunks = 1;
    }
    *len = (n + chunks - 1) / chunks;
    if (*len > 0)
        chunks = (n + *len - 1) / *len;
    return chunks;
}

// The launch both column kernels (reduce_cols, softmax_cols) share: tiles of
// cols columns, each split in chunks of len rows when the tiles alone are too
// few to fill the GPU; parts: the partial results a split leaves in scratch.
struct cols_plan {
    int cols;
    int64_t len, chunks, parts;
    unsigned grid;
};

static cols_plan plan_cols(int64_t outer, int64_t n, int64_t inner)
{
    cols_plan p;
    p.cols = reduce_cols_width(inner);
    int64_t tiles = outer * ((inner + p.cols - 1) / p.cols);
    p.len = 0;
    p.chunks = cols_chunks(tiles, n, p.cols, &p.len);
    int64_t blocks = tiles * p.chunks;
    p.grid = (unsigned)(blocks < 65535 ? blocks : 65535);
    p.parts = outer * inner * p.chunks;
    return p;
}

// A column reduction: one launch, or (chunks > 1) k_reduce_cols's partials in
// scratch memory kept between calls (scratch.c), merged by k_reduce_combine and
// freed (stream-ordered) once it is queued.
template <typename T>
static ferry_status reduce_cols(const fk_ctx *c, int op, void *y, const T *x, int64_t outer, int64_t n,
                                int64_t inner)
{
    cols_plan p = plan_cols(outer, n, inner);
    if (p.chunks == 1) {
        FK_LAUNCH_COOP(p.grid, FK_THREADS, fk_stream(c), k_reduce_cols<T>)(
            op, y, x, outer, n, inner, p.cols, (int64_t)1, p.len, (double *)nullptr, (int64_t *)nullptr);
        return fk_launched("reduce kernel");
    }
    fk_scratch scratch;
    ferry_status st = fk_scratch_take(c, (size_t)p.parts * (sizeof(double) + sizeof(int64_t)), &scratch);
    if (st != FERRY_OK)
        return st;
    double *pacc = (double *)scratch.p;
    int64_t *parg = (int64_t *)(pacc + p.parts);
    FK_LAUNCH_COOP(p.grid, FK_THREADS, fk_stream(c), k_reduce_cols<T>)(
        op, y, x, outer, n, inner, p.cols, p.chunks, p.len, pacc, parg);
    st = fk_launched("reduce kernel");
    if (st == FERRY_OK) { // each output's partials, as the rows of a split reduction
        FK_LAUNCH(fk_blocks(outer * inner), FK_THREADS, fk_stream(c), k_reduce_combine<T>)(op, y, outer * inner, n,
                                                                                         p.chunks, pacc, parg);
        st = fk_launched("reduce combine kernel");
    }
    fk_scratch_give(c, &scratch);
    return st;
}

// Integer dtypes: the CPU's loop itself (double accumulator, fk_reduce_step), one
// thread per output, so sums, means and argmax ties come out exactly as on the CPU.
template <typename T>
__global__ void k_reduce_exact(int op, void *y, const T *x, int64_t outer, int64_t n, int64_t inner)
{
    FK_GRID_STRIDE(t, outer * inner)
    {
        const T *p = x + (t / inner) * n * inner + t % inner;
        double acc = fk_reduce_init(op);
        int64_t arg = 0;
        for (int64_t j = 0; j < n; j++)
            fk_reduce_step(op, &acc, &arg, fk_d(p[j * inner]), j);
        if (op == FK_ARGMAX)
            ((int64_t *)y)[t] = arg;
        else
            ((T *)y)[t] = fk_to<T>(fk_reduce_final(op, acc, n));
    }
}

extern "C" ferry_status FK_CU(fk_cuda_reduce)(const fk_ctx *c, fk_rop op, ferry_dtype dt, void *y, const void *x,
                                       int64_t outer, int64_t n, int64_t inner)
{
    fk_guard guard;
    ferry_status st = fk_enter(c, &guard);
    if (st != FERRY_OK || outer * inner == 0)
        return st;
    if (dt == FERRY_DTYPE_U8 || dt == FERRY_DTYPE_I32 || dt == FERRY_DTYPE_I64 || dt == FERRY_DTYPE_U16 ||
        dt == FERRY_DTYPE_U32) {
        FK_ALL_TYPES(dt, T, "reduction", {
            FK_LAUNCH(fk_blocks(outer * inner), FK_THREADS, fk_stream(c), k_reduce_exact<T>)((int)op, y, (const T *)x,
                                                                                         outer, n, inner);
        });
        return fk_launched("reduce kernel");
    }
    int64_t chunks = inner == 1 ? reduce_split_chunks(outer, n) : 0;
    FK_FLOAT_TYPES(dt, T, "reduction", {
        if (chunks > 1)
            return reduce_split<T>(c, (int)op, y, (const T *)x, outer, n, chunks);
        if (inner == 1)
            FK_LAUNCH_COOP((unsigned)(outer < 65535 ? outer : 65535), FK_THREADS, fk_stream(c), k_reduce_rows<T>)(
                (int)op, y, (const T *)x, outer, n);
        else
            return reduce_cols<T>(c, (int)op, y, (const T *)x, outer, n, inner);
    });
    return fk_launched("reduce kernel");
}

template <typename T> __global__ void k_softmax_rows(bool lg, T *y, const T *x, int64_t outer, int64_t n)
{
    __shared__ float shv[32];
    __shared__ int64_t shi[32];
    for (int64_t o = blockIdx.x; o < outer; o += gridDim.x) {
        const T *row = x + o * n;
        float mx = -INFINITY;
        int64_t arg = INT64_MAX;
        for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
            fk_argmax_merge(mx, arg, fk_f(row[j]), j);
        fk_block_argmax(mx, arg, shv, shi);
        float s = 0.0f;
        for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
            s += expf(fk_f(row[j]) - mx);
        s = fk_block_sum(s, shv);
        // (x - mx) - log(s), never x - (mx + log(s)): that sum rounds at the
        // magnitude of mx, an error every output then carries (logits + 1000).
        float ls = logf(s);
        for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
            float v = (fk_f(row[j]) - mx) - ls;
            y[o * n + j] = fk_to<T>(lg ? v : expf(v));
        }
        __syncthreads();
    }
}

// Softmax over an axis that is not the last, laid out as k_reduce_cols: a block
// takes `cols` neighbouring columns and FK_THREADS / cols lanes of rows each;
// lane 0 of a column merges the lanes' maxima, then their sums of exponentials
// (in double, as the CPU sums), in a fixed order and shares them through shared
// memory. With chunks > 1 the axis is split over blocks too (len rows each) and
// the kernel runs three times, the partials in scratch memory: phase 0 writes
// each chunk's maximum to pmax; phase 1 merges a column's maxima in chunk order
// and writes each chunk's sum to psum; phase 2 merges both and writes the
// chunk's outputs. No atomics: the same bits every run.
template <typename T>
__global__ void k_softmax_cols(bool lg, T *y, const T *x, int64_t outer, int64_t n, int64_t inner, int cols,
                               int64_t chunks, int64_t len, int phase, float *pmax, double *psum)
{
    __shared__ float shm[FK_THREADS];
    __shared__ double shs[FK_THREADS];
    __shared__ float colmx[32], colls[32]; // a column's max and log of its sum
    int64_t tiles = (inner + cols - 1) / cols, lanes = FK_THREADS / cols;
    int c = (int)threadIdx.x % cols, lane = (int)threadIdx.x / cols;
    bool split = chunks > 1;
    for (int64_t b = blockIdx.x; b < outer * tiles * chunks; b += gridDim.x) {
        int64_t k = b % chunks, tile = b / chunks;
        int64_t o = tile / tiles, i = (tile % tiles) * cols + c;
        int64_t j0 = k * len, j1 = j0 + len < n ? j0 + len : n;
        bool live = i < inner;
        const T *px = x + o * n * inner + i;
        T *py = y + o * n * inner + i;
        int64_t part = (o * inner + i) * chunks; // this column's first partial
        if (!split || phase == 0) {
            float mx = -INFINITY;
            if (live)
                for (int64_t j = j0 + lane; j < j1; j += lanes)
                    mx = fmaxf(mx, fk_f(px[j * inner]));
            shm[threadIdx.x] = mx;
            __syncthreads(); // every lane's max is in shm
            if (lane == 0 && live) {
                for (int64_t l = 1; l < lanes; l++)
                    mx = fmaxf(mx, shm[l * cols + c]);
                if (split)
                    pmax[part + k] = mx;
                else
                    colmx[c] = mx;
            }
            __syncthreads(); // colmx is set; shm may be written again
            if (split)
                continue;
        } else {
            if (lane == 0 && live) {
                float mx = pmax[part];
                for (int64_t kk = 1; kk < chunks; kk++)
                    mx = fmaxf(mx, pmax[part + kk]);
                colmx[c] = mx;
            }
            __syncthreads(); // colmx is set
        }
        float mx = colmx[c];
        if (!split || phase == 1) {
            double s = 0.0; // a long axis summed in f32 one term at a time drifts
            if (live)
                for (int64_t j = j0 + lane; j < j1; j += lanes)
                    s += expf(fk_f(px[j * inner]) - mx);
            shs[threadIdx.x] = s;
            __syncthreads(); // every lane's sum is in shs
            if (lane == 0 && live) {
                for (int64_t l = 1; l < lanes; l++)
                    s += shs[l * cols + c];
                if (split)
                    psum[part + k] = s;
                else
                    colls[c] = logf((float)s);
            }
            __syncthreads(); // colls is set; shs may be written again
            if (split)
                continue;
        } else {
            if (lane == 0 && live) {
                double s = psum[part];
                for (int64_t kk = 1; kk < chunks; kk++)
                    s += psum[part + kk];
                colls[c] = logf((float)s);
            }
            __syncthreads(); // colls is set
        }
        // (x - mx) - log(s), as in k_softmax_rows.
        float ls = colls[c];
        if (live)
            for (int64_t j = j0 + lane; j < j1; j += lanes) {
                float v = (fk_f(px[j * inner]) - mx) - ls;
                py[j * inner] = fk_to<T>(lg ? v : expf(v));
            }
        __syncthreads(); // colmx and colls are read before the next tile sets them
    }
}

// A softmax over columns: one launch, or three over the chunks (k_softmax_cols),
// the partials in scratch memory from the caching allocator, freed
// (stream-ordered) once the last is queued.
template <typename T>
static ferry_status softmax_cols(const fk_ctx *c, bool lg, T *y, const T *x, int64_t outer, int64_t n,
                                 int64_t inner)
{
    cols_plan p = plan_cols(outer, n, inner);
    if (p.chunks == 1) {
        FK_LAUNCH_COOP(p.grid, FK_THREADS, fk_stream(c), k_softmax_cols<T>)(lg, y, x, outer, n, inner, p.cols,
                                                                           (int64_t)1, p.len, 0, (float *)nullptr,
                                                                           (double *)nullptr);
        return fk_launched("softmax kernel");
    }
    fk_scratch scratch;
    ferry_status st = fk_scratch_take(c, (size_t)p.parts * (sizeof(double) + sizeof(float)), &scratch);
    if (st != FERRY_OK)
        return st;
    double *psum = (double *)scratch.p;
    float *pmax = (float *)(psum + p.parts);
    for (int phase = 0; phase < 3 && st == FERRY_OK; phase++) {
        FK_LAUNCH_COOP(p.grid, FK_THREADS, fk_stream(c), k_softmax_cols<T>)(lg, y, x, outer, n, inner, p.cols,
                                                                           p.chunks, p.len, phase, pmax, psum);
        st = fk_launched("softmax kernel");
    }
    fk_scratch_give(c, &scratch);
    return st;
}

extern "C" ferry_status FK_CU(fk_cuda_softmax)(const fk_ctx *c, bool lg, ferry_dtype dt, void *y, const void *x,
                                        int64_t outer, int64_t n, int64_t inner)
{
    fk_guard guard;
    ferry_status st = fk_enter(c, &guard);
    if (st != FERRY_OK || outer * inner * n == 0)
        return st;
    FK_FLOAT_TYPES(dt, T, "softmax", {
        if (inner == 1)
            FK_LAUNCH_COOP((unsigned)(outer < 65535 ? outer : 65535), FK_THREADS, fk_stream(c), k_softmax_rows<T>)(
                lg, (T *)y, (const T *)x, outer, n);
        else
            return softmax_cols<T>(c, lg, (T *)y, (const T *)x, outer, n, inner);
    });
    return fk_launched("softmax kernel");
}

template <typename T> __global__ void k_rand(T *y, int64_t n, uint64_t seed, uint64_t stream, bool normal)
{
    FK_GRID_STRIDE(i, n) y[i] = fk_to<T>(fk_rand_elem(i, seed, stream, normal));
}

extern "C" ferry_status FK_CU(fk_cuda_rand)(const fk_ctx *c, ferry_dtype dt, void *y, int64_t n, uint64_t seed,
                                     uint64_t stream, bool normal)
{
    fk_guard guard;
    ferry_status st = fk_enter(c, &guard);
    if (st != FERRY_OK || n == 0)
        return st;
    FK_FLOAT_TYPES(dt, T, "rand", {
        FK_LAUNCH(fk_blocks(n), FK_THREADS, fk_stream(c), k_rand<T>)((T *)y, n, seed, stream, normal);
    });
    return fk_launched("rand kernel");
}

// ---- gemm ----
// cuBLAS handles: a pool per device, a handle taken by one call at a time (a
// handle's stream and workspace are its configuration, which another thread
// must not change under a call) and given back once the call is queued. A pool
// holds at most as many as ever ran at once, so threads that come and go leak
// nothing; only a successfully created handle enters it.
//
// Each handle keeps one workspace for the stream it last served, from the
// caching allocator on that stream (PyTorch's pattern: one per handle and
// stream), so a training step's gemms take no allocation: a call on the same
// stream finds the handle ready (no set stream, no set workspace); a call on
// another stream frees the old workspace (stream-ordered: reused only behind
// the old stream's calls) and takes a new one. The size is NVIDIA's
// recommendation per architecture: 32 MiB on Hopper and later, 4 MiB before.
// ferry_memory_empty_cache destroys the idle handles and frees their workspaces.
#define FK_BLAS_DEVICES 16
#define FK_BLAS_POOL 64
static pthread_mutex_t blas_lock = PTHREAD_MUTEX_INITIALIZER;

struct blas_slot {
    cublasHandle_t h;
    void *ws;         // the workspace, on stream sid (NULL: none yet)
    size_t ws_bytes;
    uint64_t sid;     // ferry_stream_id of the stream h is set to (0: the default one)
    bool set;         // h's stream and workspace are set for sid
};
static blas_slot blas_idle[FK_BLAS_DEVICES][FK_BLAS_POOL]; // guarded by blas_lock
static int blas_nidle[FK_BLAS_DEVICES];                    // guarded by blas_lock
static int blas_cc[FK_BLAS_DEVICES];                       // compute capability * 10, 0: not read yet; blas_lock

static ferry_status cublas_status(cublasStatus_t s, const char *what)
{
    if (s == CUBLAS_STATUS_SUCCESS)
        return FERRY_OK;
    if (s == CUBLAS_STATUS_ALLOC_FAILED)
        return ferry_fail(FERRY_ERR_DEVICE_OOM, "cuBLAS %s: out of device memory", what);
    return ferry_fail(FERRY_ERR_CUDA, "cuBLAS %s: %s", what, cublasGetStatusString(s));
}

// cuBLAS takes a handle's state from the driver itself, outside ferry's
// caching allocator: when that fails, empty the device's cache and call once
// more, as every other device allocation does, and fail with the allocator's
// words (free and total bytes) if it fails again.
template <typename Call> static ferry_status cublas_call(const fk_ctx *c, const char *what, Call call)
{
    cublasStatus_t s = call();
    if (s == CUBLAS_STATUS_ALLOC_FAILED) {
        ferry_status st = ferry_memory_empty_cache(c->dev);
        if (st != FERRY_OK)
            return st;
        s = call();
        if (s == CUBLAS_STATUS_ALLOC_FAILED) {
            char buf[64];
            snprintf(buf, sizeof buf, "cuBLAS workspace (%s)", what);
            return ferry_cuda_oom(c->dev.index, buf);
        }
    }
    return cublas_status(s, what);
}

static void slot_free(int dev, blas_slot *sl)
{
    if (sl->h)
        cublasDestroy(sl->h);
    if (sl->ws)
        ferry_device_free(ferry_cuda(dev), sl->ws); // stream-ordered behind its last call
    *sl = blas_slot{};
}

// Destroys the idle handles of device dev (all devices: dev < 0) and frees
// their workspaces. Handles in use are not in the pool and go back to it once
// their call is queued.
static void blas_free_idle(int dev, bool at_exit)
{
    for (int d = dev < 0 ? 0 : dev; d < (dev < 0 ? FK_BLAS_DEVICES : dev + 1) && d < FK_BLAS_DEVICES; d++) {
        blas_slot idle[FK_BLAS_POOL];
        pthread_mutex_lock(&blas_lock);
        int n = blas_nidle[d];
        memcpy(idle, blas_idle[d], (size_t)n * sizeof idle[0]);
        blas_nidle[d] = 0;
        pthread_mutex_unlock(&blas_lock);
        for (int i = 0; i < n; i++) {
            if (at_exit) // the allocator may be gone: the process returns the memory
                idle[i].ws = nullptr;
            slot_free(d, &idle[i]);
        }
    }
}

// ferry_memory_empty_cache's hook for this source's pool (it runs before the
// allocator takes its lock, so the workspaces' frees reach the cache it empties).
static void blas_empty_cache(int dev) { blas_free_idle(dev, false); }

// At exit, the idle handles go. Registered once a handle has been created: the
// CUDA runtime registered its own teardown when it started (before any handle
// could exist), and exit handlers run in the reverse order of registration, so
// this runs while the runtime is still up.
static void blas_at_exit(void) { blas_free_idle(-1, true); }

static pthread_once_t blas_hooks_once = PTHREAD_ONCE_INIT;
static void blas_hooks_register(void)
{
    (void)ferry_memory_add_empty_cache_hook_(blas_empty_cache); // fails only past its fixed table
    (void)atexit(blas_at_exit);
}

// An idle slot of dev, the one last set for stream sid if there is one.
static blas_slot blas_take(int dev, uint64_t sid)
{
    blas_slot sl = {};
    pthread_mutex_lock(&blas_lock);
    int n = blas_nidle[dev], pick = n - 1;
    for (int i = n - 1; i >= 0; i--)
        if (blas_idle[dev][i].set && blas_idle[dev][i].sid == sid) {
            pick = i;
            break;
        }
    if (pick >= 0) {
        sl = blas_idle[dev][pick];
        blas_idle[dev][pick] = blas_idle[dev][n - 1];
        blas_nidle[dev] = n - 1;
    }
    pthread_mutex_unlock(&blas_lock);
    return sl;
}

static void blas_give_back(int dev, blas_slot sl)
{
    pthread_mutex_lock(&blas_lock);
    bool kept = blas_nidle[dev] < FK_BLAS_POOL;
    if (kept)
        blas_idle[dev][blas_nidle[dev]++] = sl;
    pthread_mutex_unlock(&blas_lock);
    if (!kept)
        slot_free(dev, &sl); // more at once than the pool keeps
}

// Compute capability * 10 of dev, read once (0 when unknown).
static int blas_arch(const fk_ctx *c)
{
    int dev = c->dev.index;
    pthread_mutex_lock(&blas_lock);
    int cc = blas_cc[dev];
    pthread_mutex_unlock(&blas_lock);
    if (cc)
        return cc;
    ferry_device_props p;
    if (ferry_device_properties(c->dev, &p) != FERRY_OK)
        return 0;
    cc = p.cc_major * 10 + p.cc_minor;
    pthread_mutex_lock(&blas_lock);
    blas_cc[dev] = cc;
    pthread_mutex_unlock(&blas_lock);
    return cc;
}

// NVIDIA's recommended cuBLAS workspace: 32 MiB from Hopper (sm_90) on, 4 MiB before.
static size_t blas_workspace_bytes(int cc) { return cc >= 90 ? (size_t)32 << 20 : (size_t)4 << 20; }

// Makes sl's handle ready for c's stream: created on first use, with f32
// reductions (no reduced-precision split-K for f16/bf16 outputs: conv1's weight
// gradient reduces K = 200,704 products), and a workspace on the stream.
static ferry_status blas_ready(const fk_ctx *c, blas_slot *sl, int cc)
{
    uint64_t sid = ferry_stream_id(c->stream);
    if (sl->h && sl->set && sl->sid == sid)
        return FERRY_OK;
    ferry_status st = FERRY_OK;
    if (!sl->h) {
        if ((st = cublas_call(c, "create", [&] { return cublasCreate(&sl->h); })) != FERRY_OK)
            return st;
        pthread_once(&blas_hooks_once, blas_hooks_register);
        st = cublas_call(c, "set math mode", [&] {
            return cublasSetMathMode(sl->h, (cublasMath_t)(CUBLAS_DEFAULT_MATH |
                                                           CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION));
        });
        if (st != FERRY_OK)
            return st;
    }
    sl->set = false;
    if (sl->ws) { // it belongs to the old stream: freed behind that stream's calls
        ferry_device_free(c->dev, sl->ws);
        sl->ws = nullptr;
    }
    if ((st = cublas_call(c, "set stream", [&] { return cublasSetStream(sl->h, fk_stream(c)); })) != FERRY_OK)
        return st;
    size_t bytes = blas_workspace_bytes(cc);
    if ((st = ferry_device_alloc(c->dev, bytes, c->stream, &sl->ws)) != FERRY_OK)
        return st;
    sl->ws_bytes = bytes;
    st = cublas_call(c, "set workspace", [&] { return cublasSetWorkspace(sl->h, sl->ws, sl->ws_bytes); });
    if (st == FERRY_OK) {
        sl->sid = sid;
        sl->set = true;
    }
    return st;
}

static ferry_status gemm_call(const fk_ctx *c, cublasHandle_t h, const fk_gemm *g, cudaDataType_t type, int cc);

extern "C" ferry_status FK_CU(fk_cuda_gemm)(const fk_ctx *c, const fk_gemm *g)
{
    fk_guard guard;
    ferry_status st = fk_enter(c, &guard);
    int64_t m = g->m, n = g->n, k = g->k, batch = g->batch;
    if (st != FERRY_OK || m == 0 || n == 0 || batch == 0)
        return st;
    if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX || g->lda > INT32_MAX || g->ldb > INT32_MAX ||
        g->ldc > INT32_MAX || batch > INT32_MAX)
        return ferry_fail(FERRY_ERR_LIMIT, "gemm dimensions exceed cuBLAS's 32-bit limits");
    int dev = c->dev.index;
    if (dev < 0 || dev >= 16)
        return ferry_fail(FERRY_ERR_UNSUPPORTED, "cuda:%d: ferry's gemm supports 16 devices", dev);
    cudaDataType_t type;
    switch (g->dt) {
    case FERRY_DTYPE_F32: type = CUDA_R_32F; break;
    case FERRY_DTYPE_F16: type = CUDA_R_16F; break;
    case FERRY_DTYPE_BF16: type = CUDA_R_16BF; break;
    default: return fk_bad_dtype(g->dt, "gemm");
    }
    if (k == 0) { // C = beta C; cuBLAS rejects some k = 0 layouts
        // C's m x n elements of each batch (not the gaps between rows or batches).
        // With beta = 0, C is written with zeros, never multiplied: uninitialised
        // memory may hold NaN, and 0 x NaN is NaN (the CPU and cuBLAS write zeros).
        fk_nd nd = {};
        nd.ndim = 3;
        nd.shape[0] = batch;
        nd.shape[1] = m;
        nd.shape[2] = n;
        nd.so[0] = nd.sa[0] = g->stride_c;
        nd.so[1] = nd.sa[1] = g->ldc;
        nd.so[2] = nd.sa[2] = 1;
        nd.numel = batch * m * n;
        if (g->beta == 0.0f)
            return FK_CU(fk_cuda_fill)(c, g->dt, g->c, &nd, 0.0);
        return FK_CU(fk_cuda_unary)(c, FK_MUL_S, g->dt, g->c, g->c, &nd, g->beta);
    }
    int cc = blas_arch(c);
    blas_slot sl = blas_take(dev, ferry_stream_id(c->stream));
    st = blas_ready(c, &sl, cc);
    if (st == FERRY_OK)
        st = gemm_call(c, sl.h, g, type, cc);
    if (sl.h)
        blas_give_back(dev, sl);
    else if (sl.ws)
        ferry_device_free(c->dev, sl.ws);
    return st;
}

// Strided-batched gemm with more than 65,535 batches fails on sm_7x (PyTorch
// splits there by 63 x 1024): at most this many per call on those GPUs.
#define FK_BLAS_SM7X_BATCH (63 * 1024)

static ferry_status gemm_call(const fk_ctx *c, cublasHandle_t h, const fk_gemm *g, cudaDataType_t type, int cc)
{
    // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands.
    // f16/bf16 use tensor cores with f32 accumulation (CUBLAS_COMPUTE_32F).
    // alpha and beta are read at the call (host pointer mode).
    int64_t most = cc >= 70 && cc < 80 ? FK_BLAS_SM7X_BATCH : g->batch;
    size_t es = ferry_dtype_size(g->dt);
    ferry_status st = FERRY_OK;
    for (int64_t b0 = 0; b0 < g->batch && st == FERRY_OK; b0 += most) {
        int64_t nb = g->batch - b0 < most ? g->batch - b0 : most;
        const char *a = (const char *)g->a + (size_t)(b0 * g->stride_a) * es;
        const char *b = (const char *)g->b + (size_t)(b0 * g->stride_b) * es;
        char *cp = (char *)g->c + (size_t)(b0 * g->stride_c) * es;
        st = cublas_call(c, "gemm", [&] {
            return cublasGemmStridedBatchedEx(
                h, g->tb ? CUBLAS_OP_T : CUBLAS_OP_N, g->ta ? CUBLAS_OP_T : CUBLAS_OP_N, (int)g->n, (int)g->m,
                (int)g->k, &g->alpha, b, type, (int)g->ldb, (long long)g->stride_b, a, type, (int)g->lda,
                (long long)g->stride_a, &g->beta, cp, type, (int)g->ldc, (long long)g->stride_c, (int)nb,
                CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        });
    }
    return st;
}

FK_SOURCE_END

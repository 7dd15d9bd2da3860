/* Internal, CUDA kernel files only: the helpers the model's .cu files share —
 * dtype dispatch, float/double loads and stores for every dtype, launch sizes,
 * block reductions. The per-element formulas (and Philox) are the CPU's own, from
 * kernels/formulas.h and common/philox.h. */
#ifndef FERRY_MODEL_KERN_CUDA_CUH
#define FERRY_MODEL_KERN_CUDA_CUH

#include <stdint.h>

#include "device/cuda_src.cuh"
/* cuBLAS is the training library's: libferry's CUDA sources never see it. */
#if defined(__CUDACC__)
#include <cublas_v2.h>
#else
#include "model/kernels/sim/cublas_sim.h"
#endif
#include "common/error.h"
#include "model/kernels/formulas.h"
#include "model/kernels/kernels.h"

#define FK_THREADS 256

static inline cudaStream_t fk_stream(const fk_ctx *c) { return (cudaStream_t)c->native; }

/* Every kernel entry point starts with
 *     fk_guard guard;
 *     ferry_status st = fk_enter(c, &guard);
 * which makes c's device current (kernels launch on the current device, and
 * c's stream belongs to it) until guard goes out of scope: every return path,
 * the early ones in FK_FLOAT_TYPES / FK_ALL_TYPES included, then gives the
 * caller its own current device back. */
typedef ferry_cuda_guard fk_guard;

static inline ferry_status fk_enter(const fk_ctx *c, fk_guard *g) { return g->enter(c->dev.index); }

static inline unsigned fk_blocks(int64_t n)
{
    int64_t b = (n + FK_THREADS - 1) / FK_THREADS;
    if (b < 1)
        b = 1;
    return (unsigned)(b > (1 << 20) ? (1 << 20) : b); /* grid-stride loops cover the rest */
}

static inline ferry_status fk_launched(const char *what) { return fk_launch_status(what); }

static inline ferry_status fk_bad_dtype(ferry_dtype dt, const char *what)
{
    return ferry_fail(FERRY_ERR_DTYPE, "%s on CUDA does not support %s", what, ferry_dtype_name(dt));
}

#define FK_GRID_STRIDE(i, n)                                                                      \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);                     \
         i += (int64_t)blockDim.x * gridDim.x)

/* ---- loads and stores ---- */
__device__ __forceinline__ float fk_f(float x) { return x; }
__device__ __forceinline__ float fk_f(__half x) { return __half2float(x); }
__device__ __forceinline__ float fk_f(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float fk_f(uint8_t x) { return (float)x; }
__device__ __forceinline__ float fk_f(int32_t x) { return (float)x; }
__device__ __forceinline__ float fk_f(int64_t x) { return (float)x; }
__device__ __forceinline__ float fk_f(uint16_t x) { return (float)x; }
__device__ __forceinline__ float fk_f(uint32_t x) { return (float)x; }

__device__ __forceinline__ double fk_d(float x) { return x; }
__device__ __forceinline__ double fk_d(__half x) { return __half2float(x); }
__device__ __forceinline__ double fk_d(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ double fk_d(uint8_t x) { return x; }
__device__ __forceinline__ double fk_d(int32_t x) { return x; }
__device__ __forceinline__ double fk_d(int64_t x) { return (double)x; }
__device__ __forceinline__ double fk_d(uint16_t x) { return x; }
__device__ __forceinline__ double fk_d(uint32_t x) { return x; }

/* Stores round as the CPU's fk_std does: double to f32, then f32 to f16/bf16 with
 * tensor/half.h's bit code (NaN payloads included), integers saturated. */
template <typename T> __device__ __forceinline__ T fk_to(double v);
template <> __device__ __forceinline__ float fk_to<float>(double v) { return (float)v; }
template <> __device__ __forceinline__ __half fk_to<__half>(double v)
{
    return __ushort_as_half(ferry_f32_to_f16_((float)v));
}
template <> __device__ __forceinline__ __nv_bfloat16 fk_to<__nv_bfloat16>(double v)
{
    return __ushort_as_bfloat16(ferry_f32_to_bf16_((float)v));
}
template <> __device__ __forceinline__ uint8_t fk_to<uint8_t>(double v) { return (uint8_t)fk_sat(v, 0, UINT8_MAX); }
template <> __device__ __forceinline__ int32_t fk_to<int32_t>(double v)
{
    return (int32_t)fk_sat(v, INT32_MIN, INT32_MAX);
}
template <> __device__ __forceinline__ int64_t fk_to<int64_t>(double v) { return fk_sat(v, INT64_MIN, INT64_MAX); }
template <> __device__ __forceinline__ uint16_t fk_to<uint16_t>(double v) { return (uint16_t)fk_sat(v, 0, UINT16_MAX); }
template <> __device__ __forceinline__ uint32_t fk_to<uint32_t>(double v) { return (uint32_t)fk_sat(v, 0, UINT32_MAX); }

/* An f32 result stored into a float dtype: the same bits as fk_to<T>((double)v),
 * without a conversion through double (which runs at the double rate). */
template <typename T> __device__ __forceinline__ T fk_to_f32(float v);
template <> __device__ __forceinline__ float fk_to_f32<float>(float v) { return v; }
template <> __device__ __forceinline__ __half fk_to_f32<__half>(float v) { return __ushort_as_half(ferry_f32_to_f16_(v)); }
template <> __device__ __forceinline__ __nv_bfloat16 fk_to_f32<__nv_bfloat16>(float v)
{
    return __ushort_as_bfloat16(ferry_f32_to_bf16_(v));
}

/* Float dtypes only / every dtype: runs BODY with T bound to the C type. */
#define FK_FLOAT_TYPES(dt, T, what, ...)                                                          \
    switch (dt) {                                                                                 \
    case FERRY_DTYPE_F32: { typedef float T; __VA_ARGS__; } break;                                \
    case FERRY_DTYPE_F16: { typedef __half T; __VA_ARGS__; } break;                               \
    case FERRY_DTYPE_BF16: { typedef __nv_bfloat16 T; __VA_ARGS__; } break;                       \
    default: return fk_bad_dtype(dt, what);                                                       \
    }

#define FK_ALL_TYPES(dt, T, what, ...)                                                            \
    switch (dt) {                                                                                 \
    case FERRY_DTYPE_F32: { typedef float T; __VA_ARGS__; } break;                                \
    case FERRY_DTYPE_F16: { typedef __half T; __VA_ARGS__; } break;                               \
    case FERRY_DTYPE_BF16: { typedef __nv_bfloat16 T; __VA_ARGS__; } break;                       \
    case FERRY_DTYPE_U8: { typedef uint8_t T; __VA_ARGS__; } break;                               \
    case FERRY_DTYPE_I32: { typedef int32_t T; __VA_ARGS__; } break;                              \
    case FERRY_DTYPE_I64: { typedef int64_t T; __VA_ARGS__; } break;                              \
    case FERRY_DTYPE_U16: { typedef uint16_t T; __VA_ARGS__; } break;                             \
    case FERRY_DTYPE_U32: { typedef uint32_t T; __VA_ARGS__; } break;                             \
    default: return fk_bad_dtype(dt, what);                                                       \
    }

/* ---- block reductions (blockDim.x == FK_THREADS) ---- */
/* Lane 0 of each warp ends with its warp's sum. */
template <typename T> __device__ __forceinline__ T fk_warp_sum(T v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_down_sync(0xffffffffu, v, o);
    return v;
}

/* Every thread gets the block's sum; sh holds 32 values. */
template <typename T> __device__ __forceinline__ T fk_block_sum_t(T v, T *sh)
{
    v = fk_warp_sum(v);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads(); // sh may still be read from the last call
    if (lane == 0)
        sh[warp] = v;
    __syncthreads(); // every warp's sum is in sh
    if (warp == 0) {
        v = fk_warp_sum(lane < (int)(blockDim.x >> 5) ? sh[lane] : (T)0);
        if (lane == 0)
            sh[0] = v;
    }
    __syncthreads(); // the total is in sh[0]
    return sh[0];
}

__device__ __forceinline__ float fk_block_sum(float v, float *sh) { return fk_block_sum_t(v, sh); }

/* The same in double: the BatchNorm statistics and gradients accumulate in
 * double, as the CPU kernels do, so the two agree to f32 rounding. */
__device__ __forceinline__ double fk_block_sum_d(double v, double *sh) { return fk_block_sum_t(v, sh); }

/* Max with the smallest index on ties; NaN wins. */
__device__ __forceinline__ void fk_argmax_merge(float &v, int64_t &i, float v2, int64_t i2)
{
    bool take = (v2 != v2 && v == v) || v2 > v || (v2 == v && i2 < i) ||
                (v2 != v2 && v != v && i2 < i);
    if (take) {
        v = v2;
        i = i2;
    }
}

__device__ __forceinline__ void fk_block_argmax(float &v, int64_t &i, float *shv, int64_t *shi)
{
    for (int o = 16; o > 0; o >>= 1) {
        float v2 = __shfl_down_sync(0xffffffffu, v, o);
        int64_t i2 = __shfl_down_sync(0xffffffffu, i, o);
        fk_argmax_merge(v, i, v2, i2);
    }
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0) {
        shv[warp] = v;
        shi[warp] = i;
    }
    __syncthreads();
    if (warp == 0) {
        v = lane < (int)(blockDim.x >> 5) ? shv[lane] : -INFINITY;
        i = lane < (int)(blockDim.x >> 5) ? shi[lane] : INT64_MAX;
        for (int o = 16; o > 0; o >>= 1) {
            float v2 = __shfl_down_sync(0xffffffffu, v, o);
            int64_t i2 = __shfl_down_sync(0xffffffffu, i, o);
            fk_argmax_merge(v, i, v2, i2);
        }
        if (lane == 0) {
            shv[0] = v;
            shi[0] = i;
        }
    }
    __syncthreads();
    v = shv[0];
    i = shi[0];
}

#endif

// The batch conversion on the GPU: one thread per output pixel, reading the
// wire batch (u8 or f32, dataset layout) and writing out dtype in the requested
// layout. An unfused multiply then add, here and in convert.c, gives
// bit-identical f32 results.
#include <stdint.h>

#include "device/cuda_src.cuh"
#include "common/error.h"

extern "C" {
#include "loader/convert.h"
}
#include "tensor/half.h"

FK_SOURCE_BEGIN

struct convert_params {
    unsigned long long count; // images
    unsigned long long hw;    // pixels per image
    unsigned int channels;
    int src_u8, src_chw, dst_chw, dst_dtype, affine;
    float scale[FERRY_CONVERT_MAX_CHANNELS];
    float shift[FERRY_CONVERT_MAX_CHANNELS];
};

__device__ __forceinline__ void convert_store(void *dst, unsigned long long i, float y, int dst_dtype)
{
    switch (dst_dtype) {
    case FERRY_DTYPE_F32: ((float *)dst)[i] = y; break;
    // half.h's bit code, as convert.c: NaN payloads kept, where __float2half_rn
    // and __float2bfloat16_rn give the canonical NaN.
    case FERRY_DTYPE_F16: ((uint16_t *)dst)[i] = ferry_f32_to_f16_(y); break;
    case FERRY_DTYPE_BF16: ((uint16_t *)dst)[i] = ferry_f32_to_bf16_(y); break;
    default: ((uint8_t *)dst)[i] = (uint8_t)rintf(fminf(fmaxf(y, 0.0f), 255.0f)); break;
    }
}

__device__ __forceinline__ float convert_load(const void *src, unsigned long long i, int src_u8)
{
    return src_u8 ? (float)((const uint8_t *)src)[i] : ((const float *)src)[i];
}

// nvcc's unroll pragma (the host compiler of the simulated GPU knows none).
#ifdef __CUDA_ARCH__
#define CONVERT_UNROLL _Pragma("unroll")
#else
#define CONVERT_UNROLL
#endif

// A 2-D grid: y over the images, x over an image's pixels; a thread converts
// its pixel's every channel, so no index divides. With scale and shift (at most
// FERRY_CONVERT_MAX_CHANNELS channels) the channel loop is unrolled to that
// bound: p.scale[k] and p.shift[k] have constant indices and are read from the
// parameters into registers, where an index computed per element made the
// compiler copy both arrays to local memory.
__global__ void convert_kernel(const void *src, void *dst, convert_params p)
{
    const unsigned long long chw = p.hw * p.channels;
    const unsigned long long cs = p.src_chw ? p.hw : 1, cd = p.dst_chw ? p.hw : 1; // channel strides
    for (unsigned long long n = blockIdx.y; n < p.count; n += gridDim.y)
        for (unsigned long long px = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; px < p.hw;
             px += (unsigned long long)gridDim.x * blockDim.x) {
            unsigned long long si = n * chw + (p.src_chw ? px : px * p.channels);
            unsigned long long di = n * chw + (p.dst_chw ? px : px * p.channels);
            if (p.affine) {
                CONVERT_UNROLL
                for (unsigned int k = 0; k < FERRY_CONVERT_MAX_CHANNELS; k++) {
                    if (k >= p.channels)
                        break;
                    float x = convert_load(src, si + k * cs, p.src_u8);
                    convert_store(dst, di + k * cd, __fadd_rn(__fmul_rn(x, p.scale[k]), p.shift[k]), p.dst_dtype);
                }
            } else {
                for (unsigned int k = 0; k < p.channels; k++)
                    convert_store(dst, di + k * cd, convert_load(src, si + k * cs, p.src_u8), p.dst_dtype);
            }
        }
}

// Launches on `device`, which must be the stream's and dst's: the loader may
// deliver to cuda:N from a thread whose current device is another. The guard
// restores the caller's device on return.
extern "C" ferry_status FK_CU(ferry_convert_cuda)(int device, const ferry_convert_spec *sp,
                                                 const void *src, void *dst, void *stream)
{
    convert_params p;
    p.hw = (unsigned long long)sp->height * sp->width;
    p.channels = (unsigned int)sp->channels;
    p.count = (unsigned long long)sp->count;
    p.src_u8 = sp->src_dtype == FERRY_DTYPE_U8;
    p.src_chw = sp->src_layout == FERRY_LAYOUT_CHW;
    p.dst_chw = sp->dst_layout == FERRY_LAYOUT_CHW;
    p.dst_dtype = (int)sp->dst_dtype;
    p.affine = sp->affine;
    for (int c = 0; c < FERRY_CONVERT_MAX_CHANNELS; c++) {
        p.scale[c] = sp->scale[c];
        p.shift[c] = sp->shift[c];
    }
    if (p.hw * p.channels * p.count == 0)
        return FERRY_OK;
    ferry_cuda_guard guard;
    ferry_status st = guard.enter(device);
    if (st != FERRY_OK)
        return st;
    const unsigned int threads = 256;
    unsigned long long bx = (p.hw + threads - 1) / threads;
    dim3 grid((unsigned int)(bx < 4096 ? bx : 4096), (unsigned int)(p.count < 65535 ? p.count : 65535));
    FK_LAUNCH(grid, threads, (cudaStream_t)stream, convert_kernel)(src, dst, p);
    return fk_launch_status("batch conversion kernel");
}

FK_SOURCE_END

// The batch conversion on the GPU: one thread per output element, reading the
// wire batch (u8 or f32, dataset layout) and writing out dtype in the requested
// layout. An unfused multiply then add, here and in convert.c, gives
// bit-identical f32 results.
#include <stdint.h>

#include "device/cuda_src.cuh"
#include "common/error.h"

extern "C" {
#include "loader/convert.h"
}
#include "model/tensor/half.h"

FK_SOURCE_BEGIN

struct convert_params {
    unsigned long long total; // elements
    unsigned long long hw;
    unsigned int channels;
    int src_u8, src_chw, dst_chw, dst_dtype, affine;
    float scale[FERRY_CONVERT_MAX_CHANNELS];
    float shift[FERRY_CONVERT_MAX_CHANNELS];
};

__global__ void convert_kernel(const void *src, void *dst, convert_params p)
{
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    const unsigned long long chw = p.hw * p.channels;
    for (; i < p.total; i += stride) {
        // i indexes the output; find (n, c, pixel) and the matching input.
        unsigned long long n = i / chw, r = i % chw, c, px;
        if (p.dst_chw) { c = r / p.hw; px = r % p.hw; }
        else { px = r / p.channels; c = r % p.channels; }
        unsigned long long si = n * chw + (p.src_chw ? c * p.hw + px : px * p.channels + c);
        float x = p.src_u8 ? (float)((const uint8_t *)src)[si] : ((const float *)src)[si];
        float y = p.affine ? __fadd_rn(__fmul_rn(x, p.scale[c]), p.shift[c]) : x;
        switch (p.dst_dtype) {
        case FERRY_DTYPE_F32: ((float *)dst)[i] = y; break;
        // half.h's bit code, as convert.c: NaN payloads kept, where __float2half_rn
        // and __float2bfloat16_rn give the canonical NaN.
        case FERRY_DTYPE_F16: ((uint16_t *)dst)[i] = ferry_f32_to_f16_(y); break;
        case FERRY_DTYPE_BF16: ((uint16_t *)dst)[i] = ferry_f32_to_bf16_(y); break;
        default: ((uint8_t *)dst)[i] = (uint8_t)rintf(fminf(fmaxf(y, 0.0f), 255.0f)); break;
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
    p.total = p.hw * p.channels * sp->count;
    p.src_u8 = sp->src_dtype == FERRY_DTYPE_U8;
    p.src_chw = sp->src_layout == FERRY_LAYOUT_CHW;
    p.dst_chw = sp->dst_layout == FERRY_LAYOUT_CHW;
    p.dst_dtype = (int)sp->dst_dtype;
    p.affine = sp->affine;
    for (int c = 0; c < FERRY_CONVERT_MAX_CHANNELS; c++) {
        p.scale[c] = sp->scale[c];
        p.shift[c] = sp->shift[c];
    }
    if (p.total == 0)
        return FERRY_OK;
    ferry_cuda_guard guard;
    ferry_status st = guard.enter(device);
    if (st != FERRY_OK)
        return st;
    const unsigned int threads = 256;
    unsigned long long blocks = (p.total + threads - 1) / threads;
    if (blocks > 65535ull * 8)
        blocks = 65535ull * 8; // grid-stride loop covers the rest
    FK_LAUNCH((unsigned int)blocks, threads, (cudaStream_t)stream, convert_kernel)(src, dst, p);
    return fk_launch_status("batch conversion kernel");
}

FK_SOURCE_END

/* The dtype conversion kernel: one grid-stride loop over contiguous elements,
 * using the same scalar code as the host (tensor/half.h), so CPU and GPU agree
 * bit for bit. */
#include "device/cuda_src.cuh"
#include "tensor/half.h"
#include "tensor/internal.h"

FK_SOURCE_BEGIN

__global__ void ferry_convert_kernel(const void *src, int sdt, void *dst, int ddt, int64_t n)
{
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < n; k += stride)
        ferry_convert_elem_(src, sdt, dst, ddt, k);
}

extern "C" ferry_status FK_CU(ferry_convert_cuda_)(const void *src, ferry_dtype sdt, void *dst,
                                            ferry_dtype ddt, int64_t n, int device, void *stream)
{
    if (n <= 0)
        return FERRY_OK;
    ferry_cuda_guard guard; /* the caller's device comes back on return */
    ferry_status st = guard.enter(device);
    if (st != FERRY_OK)
        return st;
    const int threads = 256;
    int64_t want = (n + threads - 1) / threads;
    int blocks = want > 65535 ? 65535 : (int)want;
    FK_LAUNCH(blocks, threads, (cudaStream_t)stream, ferry_convert_kernel)(src, (int)sdt, dst, (int)ddt, n);
    return fk_launch_status("dtype conversion kernel");
}

FK_SOURCE_END

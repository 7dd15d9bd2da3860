/* The CUDA error mapping behind FERRY_CUDA_CHECK (src/device/cuda_check.h). */
#include "device/cuda_check.h"
#include "common/error.h"

const char *ferry_cuda_error_text(cudaError_t e)
{
    if (e == cudaErrorInsufficientDriver || e == cudaErrorNoDevice) {
        int v = 0;
        /* 0 with cudaSuccess is the documented "no driver installed". */
        if (cudaDriverGetVersion(&v) != cudaSuccess)
            (void)cudaGetLastError();
        if (v == 0)
            return "no CUDA driver installed (no GPU)";
    }
    return cudaGetErrorString(e);
}

ferry_status ferry_cuda_status(cudaError_t e, const char *file, int line, const char *call)
{
    ferry_status s;
    switch (e) {
    case cudaSuccess:
        return FERRY_OK;
    case cudaErrorMemoryAllocation:
        s = FERRY_ERR_DEVICE_OOM;
        break;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice:
    case cudaErrorDevicesUnavailable:
    case cudaErrorStubLibrary:
    case cudaErrorCallRequiresNewerDriver:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
        s = FERRY_ERR_NO_DEVICE;
        break;
    default:
        s = FERRY_ERR_CUDA;
        break;
    }
    /* Non-sticky errors stay in the runtime's last-error slot until read; read it
     * so the next cudaGetLastError / kernel-launch check does not see it. */
    (void)cudaGetLastError();
    return ferry_fail(s, "%s:%d: %s: %s (%s)", file, line, call, ferry_cuda_error_text(e),
                      cudaGetErrorName(e));
}

ferry_status ferry_cuda_enter(int index, int *prev)
{
    *prev = -1;
    int cur = 0;
    FERRY_CUDA_CHECK(cudaGetDevice(&cur));
    if (cur != index) {
        FERRY_CUDA_CHECK(cudaSetDevice(index));
        *prev = cur;
    }
    return FERRY_OK;
}

void ferry_cuda_leave(int prev)
{
    if (prev < 0)
        return;
    cudaError_t e = cudaSetDevice(prev);
    if (e != cudaSuccess) {
        /* Only a failed restore is read here: an error a kernel launch left in
         * the last-error slot must still reach the caller's own check. */
        (void)cudaGetLastError();
        ferry_log(FERRY_LOG_WARN, "could not make cuda:%d current again: %s", prev,
                  cudaGetErrorString(e));
    }
}

ferry_status ferry_cuda_oom(int index, const char *what)
{
    size_t free_b = 0, total_b = 0;
    int prev;
    if (ferry_cuda_enter(index, &prev) == FERRY_OK) {
        if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess)
            (void)cudaGetLastError();
        ferry_cuda_leave(prev);
    }
    char fr[32], tot[32];
    return ferry_fail(FERRY_ERR_DEVICE_OOM,
                      "out of memory on cuda:%d allocating %s: %s free of %s total "
                      "(ferry's cache was emptied and the allocation retried); try a smaller "
                      "batch or half precision",
                      index, what, ferry_format_bytes(free_b, fr, sizeof fr),
                      ferry_format_bytes(total_b, tot, sizeof tot));
}

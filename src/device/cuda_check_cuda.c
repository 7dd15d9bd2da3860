/* The CUDA error mapping behind FERRY_CUDA_CHECK (src/device/cuda_check.h). */
#include "device/cuda_check.h"
#include "common/error.h"

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
    return ferry_fail(s, "%s:%d: %s: %s (%s)", file, line, call, cudaGetErrorString(e),
                      cudaGetErrorName(e));
}

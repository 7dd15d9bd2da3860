/* Internal, CUDA builds only: the one checking macro that turns a cudaError_t
 * into a ferry_status with file, line, the call and cudaGetErrorString.
 * Included only by *_cuda.c and .cu files; the rest of the library never sees
 * cuda_runtime.h. */
#ifndef FERRY_INTERNAL_CUDA_CHECK_H
#define FERRY_INTERNAL_CUDA_CHECK_H

#include <cuda_runtime.h>

#include "ferry/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Sets ferry_last_error() to "file:line: call: message (cudaErrorName)" and maps
 * the error: cudaErrorMemoryAllocation -> FERRY_ERR_DEVICE_OOM; no device, no or
 * too old a driver -> FERRY_ERR_NO_DEVICE; anything else -> FERRY_ERR_CUDA. It
 * also clears the runtime's last-error slot, so a handled, non-sticky failure
 * (an OOM, a bad argument) is not reported again by the next unrelated call. */
ferry_status ferry_cuda_status(cudaError_t e, const char *file, int line, const char *call);

#ifdef __cplusplus
}
#endif

/* Returns from the enclosing function (which returns ferry_status) on failure. */
#define FERRY_CUDA_CHECK(call)                                                    \
    do {                                                                          \
        cudaError_t ferry_e_ = (call);                                            \
        if (ferry_e_ != cudaSuccess)                                              \
            return ferry_cuda_status(ferry_e_, __FILE__, __LINE__, #call);        \
    } while (0)

/* Evaluates to the ferry_status of the call, for code that must clean up. */
#define FERRY_CUDA_STATUS(call)                                                   \
    ferry_cuda_status_ok_((call), __FILE__, __LINE__, #call)

static inline ferry_status ferry_cuda_status_ok_(cudaError_t e, const char *file, int line,
                                                  const char *call)
{
    return e == cudaSuccess ? FERRY_OK : ferry_cuda_status(e, file, line, call);
}

#endif

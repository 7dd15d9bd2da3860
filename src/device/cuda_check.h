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

/* cudaGetErrorString(e), except where the runtime's words mislead: with no
 * driver installed at all (cudaDriverGetVersion gives 0: no libcuda, so no
 * GPU either) the runtime says "CUDA driver version is insufficient for CUDA
 * runtime version", which sends a user off to upgrade a driver that is not
 * there; this says "no CUDA driver installed (no GPU)". */
const char *ferry_cuda_error_text(cudaError_t e);

/* The current device is per host thread, and kernel launches, allocations,
 * stream and event creation and the default (NULL) stream all use it. Every
 * call that issues work for device `index` brackets it with this pair: enter
 * makes index current and sets *prev to what leave must restore (-1: nothing,
 * it was current already); leave puts the caller's device back, so nothing
 * changes behind the caller's back. On failure enter sets *prev = -1. */
ferry_status ferry_cuda_enter(int index, int *prev);
void ferry_cuda_leave(int prev);

/* FERRY_ERR_DEVICE_OOM with the message the caching allocator gives, for device
 * memory taken outside it (cuBLAS's workspace): what could not be allocated,
 * free and total bytes on cuda:index, and that the cache was emptied and the
 * call retried. Call it only after doing exactly that. */
ferry_status ferry_cuda_oom(int index, const char *what);

#ifdef __cplusplus
}

/* C++ (.cu files): the same pair as a scope guard, so every return path, the
 * early ones in the dtype-dispatch macros included, restores the device. */
struct ferry_cuda_guard {
    int prev = -1;
    ferry_cuda_guard() = default;
    ferry_cuda_guard(const ferry_cuda_guard &) = delete;
    ferry_cuda_guard &operator=(const ferry_cuda_guard &) = delete;
    ferry_status enter(int index) { return ferry_cuda_enter(index, &prev); }
    ~ferry_cuda_guard() { ferry_cuda_leave(prev); }
};
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

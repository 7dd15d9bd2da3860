/* Internal: what the device layer's handles look like inside, for the tensor core
 * and CUDA kernel files that need the native (cudaStream_t) handle of a stream. */
#ifndef FERRY_INTERNAL_DEVICE_H
#define FERRY_INTERNAL_DEVICE_H

#include "ferry/device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The backend's native stream (a cudaStream_t on CUDA); NULL for s == NULL,
 * which means the device's default stream. */
void *ferry_stream_native(const ferry_stream *s);

/* FERRY_OK when d names this process's CPU or an existing GPU; otherwise the
 * same error (and message) every other call on d would give. */
ferry_status ferry_device_check(ferry_device d);

/* Sets bytes of memory on d to zero, on stream s (NULL: synchronously). */
ferry_status ferry_device_memset_zero(ferry_device d, void *ptr, size_t bytes, ferry_stream *s);

#ifdef __cplusplus
}
#endif
#endif

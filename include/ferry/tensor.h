/* Library: libferry (pkg-config ferry); <ferry.h> includes this header. */
/* Tensors: the currency every part of ferry passes around.
 *
 * A tensor is a reference-counted handle onto a view (shape, strides, offset) of a
 * reference-counted storage. Storage comes from the device's caching allocator,
 * the pinned pool, or memory the caller lends (ferry_tensor_from_blob). Handles are
 * released with ferry_tensor_release; ferry_tensor_release(NULL) is a no-op. */
#ifndef FERRY_TENSOR_H
#define FERRY_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ferry/device.h"
#include "ferry/export.h"
#include "ferry/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FERRY_MAX_DIMS 8

typedef enum ferry_dtype {
    FERRY_DTYPE_F32 = 0,
    FERRY_DTYPE_F16,
    FERRY_DTYPE_BF16,
    FERRY_DTYPE_U8,
    FERRY_DTYPE_I32,
    FERRY_DTYPE_I64,
    FERRY_DTYPE_U16, /* token ids as llm.c stores them; integer conversions saturate */
    FERRY_DTYPE_U32,
    FERRY_DTYPE_COUNT /* the number of dtypes, not a dtype (grows as dtypes are added) */
} ferry_dtype;

FERRY_API size_t ferry_dtype_size(ferry_dtype dt);      /* bytes per element; 0 for invalid */
FERRY_API const char *ferry_dtype_name(ferry_dtype dt); /* "f32", "f16", ...; "invalid" */

typedef struct ferry_tensor ferry_tensor;

/* ---- creation; each lands straight on the chosen device ---- */
FERRY_API ferry_status ferry_tensor_empty(const int64_t *shape, size_t ndim, ferry_dtype dt,
                                          ferry_device d, ferry_tensor **out);
FERRY_API ferry_status ferry_tensor_zeros(const int64_t *shape, size_t ndim, ferry_dtype dt,
                                          ferry_device d, ferry_tensor **out);
/* Copies numel * dtype size bytes of contiguous host data onto device d. */
FERRY_API ferry_status ferry_tensor_from_host(const void *data, const int64_t *shape, size_t ndim,
                                              ferry_dtype dt, ferry_device d, ferry_tensor **out);
/* Wraps memory the caller owns (host, pinned or device) without copying. The
 * memory must outlive the tensor and every view of it. */
FERRY_API ferry_status ferry_tensor_from_blob(void *data, const int64_t *shape, size_t ndim,
                                              ferry_dtype dt, ferry_device d, ferry_tensor **out);

FERRY_API ferry_tensor *ferry_tensor_retain(ferry_tensor *t); /* returns t */
FERRY_API void ferry_tensor_release(ferry_tensor *t);

/* ---- inspection ---- */
FERRY_API size_t ferry_tensor_ndim(const ferry_tensor *t);
FERRY_API int64_t ferry_tensor_dim(const ferry_tensor *t, size_t i);     /* size of dim i */
FERRY_API const int64_t *ferry_tensor_shape(const ferry_tensor *t);
FERRY_API const int64_t *ferry_tensor_strides(const ferry_tensor *t);   /* in elements */
FERRY_API int64_t ferry_tensor_numel(const ferry_tensor *t);
FERRY_API size_t ferry_tensor_nbytes(const ferry_tensor *t);             /* numel * element size */
FERRY_API ferry_dtype ferry_tensor_dtype(const ferry_tensor *t);
FERRY_API ferry_device ferry_tensor_device(const ferry_tensor *t);
FERRY_API bool ferry_tensor_is_contiguous(const ferry_tensor *t);
/* Pointer to element 0 of the view (a device pointer for CUDA tensors: for
 * kernels and libraries of the device, never for host code to read). */
FERRY_API void *ferry_tensor_data(const ferry_tensor *t);
/* The same for host code, checked: *out is element 0 of a CPU tensor. A
 * tensor on a GPU (a batch of a loader on cuda:N, say) is FERRY_ERR_INVALID_ARG
 * naming its device, *out NULL: copy it first, ferry_tensor_to(t, ferry_cpu(),
 * false, &host) or ferry_tensor_copy_to_host. */
FERRY_API ferry_status ferry_tensor_host_data(const ferry_tensor *t, void **out);

/* ---- moving and converting ----
 * ferry_tensor_to returns a new reference to t itself when it is already on d (as
 * PyTorch does). non_blocking copies are queued on the device's default stream and
 * are only truly asynchronous from pinned host memory. */
FERRY_API ferry_status ferry_tensor_to(ferry_tensor *t, ferry_device d, bool non_blocking,
                                       ferry_tensor **out);
/* Same, queued on stream s. */
FERRY_API ferry_status ferry_tensor_to_stream(ferry_tensor *t, ferry_device d, ferry_stream *s,
                                              ferry_tensor **out);
FERRY_API ferry_status ferry_tensor_cpu(ferry_tensor *t, ferry_tensor **out);
/* Returns a new reference to t when it already has dtype dt. */
FERRY_API ferry_status ferry_tensor_to_dtype(ferry_tensor *t, ferry_dtype dt, ferry_tensor **out);
/* Copies the tensor's elements, in row-major order, into host memory of bytes size. */
FERRY_API ferry_status ferry_tensor_copy_to_host(const ferry_tensor *t, void *dst, size_t bytes);

/* Prints like PyTorch: tensor([[...]], device='cuda:0', dtype=f32). Long
 * dimensions are summarised with "...". */
FERRY_API ferry_status ferry_tensor_print(const ferry_tensor *t, FILE *f);

/* Half-precision scalar conversions (round to nearest even). */
FERRY_API uint16_t ferry_f32_to_f16(float x);
FERRY_API float ferry_f16_to_f32(uint16_t h);
FERRY_API uint16_t ferry_f32_to_bf16(float x);
FERRY_API float ferry_bf16_to_f32(uint16_t h);

#ifdef __cplusplus
}
#endif
#endif

/* Internal: the tensor and storage structs, for the files that implement tensors
 * and ops in src/model. Ops read shape, strides and data directly; they create
 * results with ferry_tensor_empty and views with ferry_tensor_view_. Reference
 * counts are changed only with __atomic builtins (so this header also compiles
 * as C++ in .cu files, where C11 _Atomic is not available). */
#ifndef FERRY_MODEL_TENSOR_INTERNAL_H
#define FERRY_MODEL_TENSOR_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ferry/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A block of memory that one or more tensors view. */
typedef struct ferry_storage {
    long refs;           /* atomic (__atomic builtins) */
    void *data;          /* device pointer for CUDA storage */
    size_t bytes;
    ferry_device device;
    bool owned;          /* true: from ferry_device_alloc, freed with the storage;
                            false: borrowed (ferry_tensor_from_blob) */
} ferry_storage;

struct ferry_tensor {
    long refs;                          /* atomic (__atomic builtins) */
    ferry_storage *storage;             /* one reference held */
    int64_t offset;                     /* elements from storage->data to element 0 */
    size_t ndim;
    int64_t shape[FERRY_MAX_DIMS];
    int64_t strides[FERRY_MAX_DIMS];    /* in elements */
    int64_t numel;
    ferry_dtype dtype;
    ferry_device device;
};

/* Element 0 of the view as bytes (a device pointer for CUDA tensors). */
static inline char *ferry_tensor_ptr_(const ferry_tensor *t)
{
    return t->storage && t->storage->data
               ? (char *)t->storage->data + t->offset * (int64_t)ferry_dtype_size(t->dtype)
               : (char *)0;
}

/* Checks a shape (ndim <= FERRY_MAX_DIMS, no negative sizes, numel * element size
 * fits in size_t and int64_t); the error message names the shape. */
ferry_status ferry_shape_check_(const int64_t *shape, size_t ndim, ferry_dtype dt,
                                int64_t *numel, size_t *nbytes);
/* "[2, 3, 4]" into buf; returns buf. */
const char *ferry_shape_format_(const int64_t *shape, size_t ndim, char *buf, size_t size);
/* Row-major strides for shape. */
void ferry_contiguous_strides_(const int64_t *shape, size_t ndim, int64_t *strides);

/* A new tensor viewing base's storage with the given shape, strides and offset
 * (elements from the storage start). The caller guarantees the view stays
 * inside the storage. */
ferry_status ferry_tensor_view_(const ferry_tensor *base, const int64_t *shape,
                                const int64_t *strides, size_t ndim, int64_t offset,
                                ferry_tensor **out);

/* An empty tensor whose memory belongs to stream s (NULL: the default stream) in
 * the caching allocator: ops allocate their outputs on the stream their kernels
 * run on, so a block freed while those kernels run is reused only behind them. */
ferry_status ferry_tensor_empty_on_(const int64_t *shape, size_t ndim, ferry_dtype dt, ferry_device d,
                                    ferry_stream *s, ferry_tensor **out);

/* Converts n contiguous elements between dtypes on the host. Float to integer
 * truncates toward zero and saturates (NaN becomes 0); integer to integer
 * saturates; half types round to nearest even. */
void ferry_convert_host_(const void *src, ferry_dtype sdt, void *dst, ferry_dtype ddt, int64_t n);

#if FERRY_HAVE_CUDA
/* The same conversion on the GPU (src/tensor/tensor_cuda.cu), queued on stream
 * (a cudaStream_t; NULL: the default stream) of cuda:device. */
ferry_status ferry_convert_cuda_(const void *src, ferry_dtype sdt, void *dst, ferry_dtype ddt,
                                 int64_t n, int device, void *stream);
#endif
#if FERRY_SIM_KERNELS
/* The same source compiled for the host, run by the simulated GPU. */
ferry_status ferry_convert_cuda__sim(const void *src, ferry_dtype sdt, void *dst, ferry_dtype ddt,
                                     int64_t n, int device, void *stream);
#endif

/* The tensor core's data kernel: converts n contiguous elements of device d's
 * memory from xdt to ydt (as ferry_convert_host_) on stream s (NULL: d's default
 * stream; the CPU converts now), picked by d's backend (tensor/cast.c). */
ferry_status ferry_tensor_cast_(ferry_device d, ferry_stream *s, ferry_dtype xdt, const void *x,
                                ferry_dtype ydt, void *y, int64_t n);

#ifdef __cplusplus
}
#endif
#endif

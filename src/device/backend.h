/* Internal: the one interface between the device layer and a backend (CPU or
 * CUDA). Only backend_cuda.c (and .cu kernel files) see cuda_runtime.h; the rest
 * of the library reaches the GPU through this table. Native handles (streams,
 * events) are opaque void pointers owned by the backend that made them. */
#ifndef FERRY_INTERNAL_BACKEND_H
#define FERRY_INTERNAL_BACKEND_H

#include <stdbool.h>
#include <stddef.h>

#include "ferry/device.h"

typedef struct ferry_backend {
    const char *name;                                   /* "cpu", "cuda" */
    int (*device_count)(void);
    ferry_status (*set_device)(int index);
    ferry_status (*get_device)(int *index);
    ferry_status (*props)(int index, ferry_device_props *out);
    ferry_status (*mem_info)(int index, size_t *free_bytes, size_t *total_bytes);
    ferry_status (*synchronize)(int index);

    /* Raw device memory, no caching: the caching allocator sits on top. An
     * out-of-memory failure returns FERRY_ERR_DEVICE_OOM with nothing else done. */
    ferry_status (*malloc)(int index, size_t bytes, void **out);
    void (*free)(int index, void *ptr);
    ferry_status (*memset_zero)(int index, void *ptr, size_t bytes, void *stream);
    /* stream NULL: synchronous. */
    ferry_status (*memcpy)(int index, void *dst, const void *src, size_t bytes,
                           ferry_copy_kind kind, void *stream);

    ferry_status (*stream_create)(int index, void **out);
    void (*stream_destroy)(int index, void *stream);
    ferry_status (*stream_sync)(void *stream);
    bool (*stream_query)(void *stream);
    ferry_status (*stream_wait_event)(void *stream, void *event);

    ferry_status (*event_create)(int index, bool timing, void **out);
    void (*event_destroy)(int index, void *event);
    ferry_status (*event_record)(void *event, void *stream);
    ferry_status (*event_sync)(void *event);
    bool (*event_query)(void *event);
    ferry_status (*event_elapsed_ms)(void *start, void *end, float *ms);

    /* The model's kernels for this backend's devices (model/kernels/kernels.h):
     * the device layer only hands the table out. */
    const struct fk_table *kernels;

    /* Page-locked host memory (pinned) or, for the CPU backend, aligned pageable. */
    ferry_status (*host_alloc)(size_t bytes, void **out);
    void (*host_free)(void *ptr);
} ferry_backend;

struct fk_table;
extern const struct fk_table fk_cpu_table;
const ferry_backend *ferry_backend_cpu(void);
#if FERRY_HAVE_CUDA
extern const struct fk_table fk_cuda_table;
const ferry_backend *ferry_backend_cuda(void);
/* Runtime version as major*1000 + minor*10 (cudaRuntimeGetVersion), 0 if unknown. */
int ferry_cuda_runtime_version(void);
int ferry_cuda_driver_version(void);
#endif

/* The backend serving d, or NULL with FERRY_ERR_NO_DEVICE set (a CUDA device
 * that does not exist, or a build or machine without CUDA). */
const ferry_backend *ferry_backend_for(ferry_device d, ferry_status *st);

/* The CUDA backend when a GPU is usable, else NULL (no error set). */
const ferry_backend *ferry_backend_gpu(void);

#endif

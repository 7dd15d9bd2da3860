/* Internal: the one interface between the device layer and a backend (CPU or
 * CUDA). Only backend_cuda.c, cuda_check_cuda.c, nccl_cuda.c and the .cu kernel
 * files see cuda_runtime.h; the rest of the library reaches the GPU through this
 * table. Native handles (streams,
 * events) are opaque void pointers owned by the backend that made them. */
#ifndef FERRY_INTERNAL_BACKEND_H
#define FERRY_INTERNAL_BACKEND_H

#include <stdbool.h>
#include <stddef.h>

#include "ferry/device.h"

/* Which backend a table is: the data kernels (loader/convert.h, tensor/cast.c)
 * and the training library's kernel tables (model/kernels/lookup.c) pick their
 * entry by it, so the device layer carries no kernels of either. */
typedef enum ferry_backend_kind {
    FERRY_BACKEND_CPU,
    FERRY_BACKEND_CUDA,
    FERRY_BACKEND_SIM, /* the simulated GPU (FERRY_SIM_GPUS) */
} ferry_backend_kind;

typedef struct ferry_backend {
    const char *name;                                   /* "cpu", "cuda", "cuda (simulated)" */
    ferry_backend_kind kind;
    bool simulated;                                     /* FERRY_SIM_GPUS: timings mean nothing */
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
    /* Optional (NULL: nothing to do): freed memory handed back to the caching
     * allocator is overwritten, in stream order, with bytes that read as NaN. */
    ferry_status (*poison)(int index, void *ptr, size_t bytes, void *stream);
    /* stream NULL: synchronous. */
    ferry_status (*memcpy)(int index, void *dst, const void *src, size_t bytes,
                           ferry_copy_kind kind, void *stream);

    /* Streams and events. index is the device the stream or event belongs to
     * (for stream_wait_event: the stream's; the event may be on another device;
     * for event_elapsed_ms: start's). A backend makes index current for the call
     * and restores the caller's current device, so a NULL stream always means
     * index's default stream, never the default stream of whatever device the
     * calling thread happens to be on. */
    ferry_status (*stream_create)(int index, void **out);
    void (*stream_destroy)(int index, void *stream);
    ferry_status (*stream_sync)(int index, void *stream);
    /* FERRY_OK with *done = true when all work queued so far has finished,
     * FERRY_OK with *done = false while some is still running, and an error
     * (with *done = false and ferry_last_error() set) when the query fails or
     * earlier asynchronous work faulted: a failure never reads as "done". */
    ferry_status (*stream_query)(int index, void *stream, bool *done);
    ferry_status (*stream_wait_event)(int index, void *stream, void *event);

    /* Host waits on an event (event_sync) sleep the thread rather than spin:
     * the loader's workers wait on copy events and need the core to decode. */
    ferry_status (*event_create)(int index, bool timing, void **out);
    void (*event_destroy)(int index, void *event);
    ferry_status (*event_record)(int index, void *event, void *stream);
    ferry_status (*event_sync)(int index, void *event);
    /* As stream_query, for the work the event captured when it was recorded. */
    ferry_status (*event_query)(int index, void *event, bool *done);
    ferry_status (*event_elapsed_ms)(int index, void *start, void *end, float *ms);

    /* CUDA graphs by stream capture (NULL on the CPU: no graphs). capture_begin
     * starts recording stream's work in thread-local mode (the calling thread
     * may not allocate, free or wait for the device until the capture ends);
     * capture_end ends it and instantiates the recording into *graph, or fails
     * (an operation CUDA forbids was tried meanwhile: the capture is dropped);
     * graph_launch replays it on a stream of the same device; graph_destroy
     * frees it (launches already queued still run). */
    ferry_status (*capture_begin)(int index, void *stream);
    ferry_status (*capture_end)(int index, void *stream, void **graph);
    ferry_status (*graph_launch)(int index, void *graph, void *stream);
    void (*graph_destroy)(int index, void *graph);

    /* Page-locked host memory (pinned) or, for the CPU backend, aligned pageable. */
    ferry_status (*host_alloc)(size_t bytes, void **out);
    void (*host_free)(void *ptr);
} ferry_backend;

const ferry_backend *ferry_backend_cpu(void);
#if FERRY_HAVE_CUDA
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

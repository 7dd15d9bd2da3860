/* Internal: what the device layer's handles look like inside, for the tensor core
 * and CUDA kernel files that need the native (cudaStream_t) handle of a stream. */
#ifndef FERRY_INTERNAL_DEVICE_H
#define FERRY_INTERNAL_DEVICE_H

#include <stdint.h>

#include "ferry/device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The backend's native stream (a cudaStream_t on CUDA); NULL for s == NULL,
 * which means the device's default stream. */
void *ferry_stream_native(const ferry_stream *s);

/* A process-unique number for s (0 for NULL, the default stream): unlike the
 * handle's address it is never reused by a later stream. */
uint64_t ferry_stream_id(const ferry_stream *s);

/* Waits for d's default stream (nothing for the CPU). Calls that take no stream
 * queue their work there and wait with this, so their results are ready on
 * return whatever streams the caller uses next (ferry's streams do not
 * synchronise with the default stream). */
ferry_status ferry_device_sync_default_(ferry_device d);

/* Copies bytes from src on device sd to dst on device dd, on stream s (NULL: as
 * ferry_memcpy with NULL), picking the copy's kind and the GPU side that runs it:
 * so that code above the device layer never asks which kind of device it has. */
ferry_status ferry_device_copy_(ferry_device dd, void *dst, ferry_device sd, const void *src,
                                size_t bytes, ferry_stream *s);

/* Called by ferry_stream_destroy after waiting for the stream's work: its
 * live blocks are re-keyed to the device's default stream, and its cached
 * ones made idle (any stream's to take) when done says the wait succeeded,
 * else re-keyed to the default stream as well. */
void ferry_allocator_stream_gone_(ferry_device d, uint64_t stream_id, bool done);

/* What a layer above the device keeps idle on a GPU outside the caching
 * allocator (the cuBLAS handle pool) and lets go of when ferry_memory_empty_cache
 * runs on that GPU: the hook is called with the GPU's index, outside the
 * allocator's locks. Registering the same hook again is a no-op; at most
 * FERRY_EMPTY_CACHE_HOOKS (one per compiled kernel source, CUDA and simulated). */
#define FERRY_EMPTY_CACHE_HOOKS 4
typedef void (*ferry_empty_cache_hook)(int index);
ferry_status ferry_memory_add_empty_cache_hook_(ferry_empty_cache_hook fn);

/* FERRY_OK when d names this process's CPU or an existing GPU; otherwise the
 * same error (and message) every other call on d would give. */
ferry_status ferry_device_check(ferry_device d);

/* Sets bytes of memory on d to zero, on stream s (NULL: synchronously). */
ferry_status ferry_device_memset_zero(ferry_device d, void *ptr, size_t bytes, ferry_stream *s);

/* ---- CUDA graphs (stream capture) ----
 * Between capture_begin and capture_end the work queued on s is recorded, not
 * run; capture_end instantiates it into a graph that graph_launch replays, on
 * any stream of s's device, with the pointers and arguments it was recorded
 * with. The rules are CUDA's thread-local mode: the calling thread may not
 * wait for the device, allocate or free device memory, or use the legacy
 * stream until the capture ends (each is an error, and capture_end then fails
 * naming it). The caching allocator holds the thread to the same rule for its
 * cached blocks: a block handed out or freed during a capture would be written
 * by every replay after it belonged to someone else. FERRY_ERR_UNSUPPORTED on
 * the CPU. */
typedef struct ferry_graph_ ferry_graph_;
ferry_status ferry_stream_capture_begin_(ferry_stream *s);
ferry_status ferry_stream_capture_end_(ferry_stream *s, ferry_graph_ **out);
ferry_status ferry_graph_launch_(ferry_graph_ *g, ferry_stream *s);
void ferry_graph_destroy_(ferry_graph_ *g);
/* The calling thread's capture under way, or NULL; the allocator reports a
 * block taken or given back during it with ferry_capture_misuse_. */
ferry_stream *ferry_capture_stream_(void);
void ferry_capture_misuse_(const char *what);

#ifdef __cplusplus
}
#endif
#endif

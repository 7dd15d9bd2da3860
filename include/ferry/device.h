/* Library: libferry (pkg-config ferry); <ferry.h> includes this header. */
/* Devices ("cpu", "cuda", "cuda:N"), streams, events, the pinned host pool and the
 * caching device allocator. Everything here works without a GPU: on the CPU
 * backend streams and events are valid and complete at once. */
#ifndef FERRY_DEVICE_H
#define FERRY_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ferry/export.h"
#include "ferry/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ferry_device_type {
    FERRY_DEVICE_INVALID = -1, /* what a failed ferry_device_parse leaves: every call refuses it */
    FERRY_DEVICE_DEFAULT = 0, /* whichever ferry_device_default() names */
    FERRY_DEVICE_CPU = 1,
    FERRY_DEVICE_CUDA = 2
} ferry_device_type;

/* A device value. index is 0 for the CPU. Zero ({0}, FERRY_DEVICE_DEFAULT) is
 * the default device wherever a function or config takes a device: cuda:0 when
 * there is a GPU, else the CPU. What a function stores or returns (a tensor's
 * device, a stream's, the loader's) is always resolved, never the default. */
typedef struct ferry_device {
    ferry_device_type type;
    int index;
} ferry_device;

#define FERRY_DEVICE_NAME_MAX 16 /* "cuda:2147483647" + NUL */

static inline ferry_device ferry_cpu(void) { ferry_device d = {FERRY_DEVICE_CPU, 0}; return d; }
static inline ferry_device ferry_cuda(int index) { ferry_device d = {FERRY_DEVICE_CUDA, index}; return d; }
static inline bool ferry_device_eq(ferry_device a, ferry_device b)
{
    return a.type == b.type && a.index == b.index;
}

/* Parses "cpu", "cuda" (the current CUDA device), "cuda:N", and "default": the
 * zero device (FERRY_DEVICE_DEFAULT), the device ferry picks when a config
 * leaves it zero, which every call resolves to ferry_device_default() (cuda:0
 * when a GPU is available, else the CPU); ferry_device_format writes it back
 * as "default". Malformed strings are
 * FERRY_ERR_INVALID_ARG, a CUDA device that does not exist is FERRY_ERR_NO_DEVICE;
 * both quote the string in ferry_last_error(), and leave *out the invalid device
 * ({FERRY_DEVICE_INVALID, -1}), which every call taking a device refuses
 * (FERRY_ERR_INVALID_ARG): a program that forgets the status does not run on
 * the default device instead. */
FERRY_API ferry_status ferry_device_parse(const char *s, ferry_device *out);

/* Writes "cpu", "cuda:N" or "default" (the zero device) into buf (at least FERRY_DEVICE_NAME_MAX bytes) and returns buf. */
FERRY_API const char *ferry_device_format(ferry_device d, char *buf, size_t size);

FERRY_API bool ferry_cuda_is_available(void);
/* True when FERRY_SIM_GPUS serves cuda:0..N-1 from the simulated GPU (docs/DESIGN.md):
 * results follow CUDA's rules, timings mean nothing. */
FERRY_API bool ferry_cuda_is_simulated(void);
FERRY_API int ferry_cuda_device_count(void); /* 0 without a GPU, driver or CUDA build */

/* cuda:0 when a GPU is available, else cpu. */
FERRY_API ferry_device ferry_device_default(void);
/* d itself, or ferry_device_default() for the zero (FERRY_DEVICE_DEFAULT) device. */
FERRY_API ferry_device ferry_device_resolve(ferry_device d);

/* The calling thread's current CUDA device (like cudaGetDevice / cudaSetDevice). */
FERRY_API ferry_status ferry_cuda_current_device(int *index);
FERRY_API ferry_status ferry_cuda_set_device(int index);

/* Switches the current CUDA device and restores the previous one on exit, like
 * `with torch.cuda.device(i)`. Entering with a CPU device does nothing. */
typedef struct ferry_device_guard {
    int prev_index; /* -1 when nothing to restore */
} ferry_device_guard;
FERRY_API ferry_status ferry_device_guard_enter(ferry_device_guard *g, ferry_device d);
FERRY_API void ferry_device_guard_exit(ferry_device_guard *g);

typedef struct ferry_device_props {
    char name[256];
    size_t total_memory; /* bytes */
    size_t free_memory;  /* bytes, at the time of the call */
    int cc_major, cc_minor;
    int multiprocessors;
} ferry_device_props;
FERRY_API ferry_status ferry_device_properties(ferry_device d, ferry_device_props *out);

/* Waits for all work on the device. No-op for the CPU. */
FERRY_API ferry_status ferry_device_synchronize(ferry_device d);

/* ---- streams and events ---- */
typedef struct ferry_stream ferry_stream;
typedef struct ferry_event ferry_event;

FERRY_API ferry_status ferry_stream_create(ferry_device d, ferry_stream **out);
FERRY_API void ferry_stream_destroy(ferry_stream *s);
FERRY_API ferry_device ferry_stream_device(const ferry_stream *s);
FERRY_API ferry_status ferry_stream_synchronize(ferry_stream *s);
/* The cudaStream_t behind s, for code that launches its own kernels in the
 * order of ferry's work on s (a batch from ferry_loader_next, say): NULL for a
 * CPU stream, for the simulated GPU's streams (there is no CUDA stream to give)
 * and for s == NULL (the device's default stream, CUDA's stream 0). */
FERRY_API void *ferry_stream_cuda_handle(const ferry_stream *s);
/* True when all work queued on s has completed; false while some is still
 * running, and also false, with ferry_last_error() set, when the query fails
 * (a kernel on the device faulted, say): a failure never reads as complete.
 * NULL: true. ferry_stream_query_status tells "not yet" from "failed". */
FERRY_API bool ferry_stream_query(ferry_stream *s);
/* *done: all work queued on s has completed. FERRY_OK with *done false while
 * work is pending; an error (*done false) when the query fails, e.g. earlier
 * asynchronous work on the device faulted. s or done NULL: INVALID_ARG. */
FERRY_API ferry_status ferry_stream_query_status(ferry_stream *s, bool *done);
/* Makes future work on s wait until ev has completed; never blocks the host.
 * s NULL: the default stream of ev's device (as ferry_event_record's NULL). */
FERRY_API ferry_status ferry_stream_wait_event(ferry_stream *s, ferry_event *ev);

/* Timing events record timestamps; plain events are cheaper (no timing).
 * ferry_event_synchronize on either sleeps the calling thread until the event
 * completes rather than spinning a core (cudaEventBlockingSync on CUDA). */
FERRY_API ferry_status ferry_event_create(ferry_device d, bool timing, ferry_event **out);
FERRY_API void ferry_event_destroy(ferry_event *e);
/* Records ev at the current end of s (s NULL: the device's default stream). */
FERRY_API ferry_status ferry_event_record(ferry_event *e, ferry_stream *s);
FERRY_API ferry_status ferry_event_synchronize(ferry_event *e);
/* As ferry_stream_query, for the work e captured when it was recorded (an event
 * never recorded is complete). */
FERRY_API bool ferry_event_query(ferry_event *e);
FERRY_API ferry_status ferry_event_query_status(ferry_event *e, bool *done);
/* Milliseconds between two completed timing events. */
FERRY_API ferry_status ferry_event_elapsed_ms(ferry_event *start, ferry_event *end, float *ms);

/* Copies between host and device memory, or host to host, on stream s
 * (NULL: synchronous). Async copies from pageable memory are legal but not async. */
typedef enum ferry_copy_kind {
    FERRY_COPY_H2D,
    FERRY_COPY_D2H,
    FERRY_COPY_D2D,
    FERRY_COPY_H2H
} ferry_copy_kind;
FERRY_API ferry_status ferry_memcpy(void *dst, const void *src, size_t bytes, ferry_copy_kind kind,
                                    ferry_device d, ferry_stream *s);

/* ---- pinned host pool ----
 * Page-locked memory taken in large blocks and handed out in exact-size, aligned
 * pieces that are reused without new allocations. Without a GPU the pool hands
 * out aligned pageable memory and reports pinned = false. */
typedef struct ferry_pinned_pool ferry_pinned_pool;

typedef struct ferry_pinned_pool_stats {
    bool pinned;              /* the memory is page-locked */
    size_t blocks;            /* blocks taken from the system */
    size_t reserved_bytes;    /* bytes in those blocks */
    size_t live_pieces;       /* pieces handed out and not yet freed */
    size_t live_bytes;        /* bytes in those pieces */
    size_t system_allocs;     /* cudaHostAlloc / aligned allocations made, ever */
} ferry_pinned_pool_stats;

/* block_bytes: minimum size of each block taken from the system (0: 64 MiB).
 * want_pinned false gives pageable memory even with a GPU. */
FERRY_API ferry_status ferry_pinned_pool_create(size_t block_bytes, bool want_pinned,
                                                ferry_pinned_pool **out);
FERRY_API void ferry_pinned_pool_destroy(ferry_pinned_pool *p); /* frees every piece */
/* align: a power of two (0: 256). */
FERRY_API ferry_status ferry_pinned_pool_alloc(ferry_pinned_pool *p, size_t bytes, size_t align,
                                          void **out);
FERRY_API void ferry_pinned_pool_free(ferry_pinned_pool *p, void *ptr);
/* pool or out NULL: FERRY_ERR_INVALID_ARG (out, when given, zeroed). */
FERRY_API ferry_status ferry_pinned_pool_stats_get(const ferry_pinned_pool *p, ferry_pinned_pool_stats *out);

/* ---- device memory: the caching allocator ----
 * One caching allocator per device for the process (the CUDA context is per
 * process too). Size-bucketed free lists per stream, so steady-state work makes no
 * cudaMalloc calls. On cudaErrorMemoryAllocation it empties the cache, retries
 * once, then fails with FERRY_ERR_DEVICE_OOM naming requested, free and total
 * bytes. For the CPU device this is aligned host memory, counted the same way. */
FERRY_API ferry_status ferry_device_alloc(ferry_device d, size_t bytes, ferry_stream *s,
                                           void **out);
/* Returns the block to the cache of the stream it was allocated on. */
FERRY_API void ferry_device_free(ferry_device d, void *ptr);

typedef struct ferry_memory_stats {
    size_t allocated_bytes;      /* in blocks handed out now */
    size_t reserved_bytes;       /* held from the driver (allocated + cached) */
    size_t peak_allocated_bytes;
    uint64_t alloc_calls;        /* ferry_device_alloc calls */
    uint64_t system_mallocs;     /* cudaMalloc (or host) calls made */
    uint64_t cache_hits;         /* allocations served from the cache */
    uint64_t oom_retries;        /* cache flushes forced by an OOM */
} ferry_memory_stats;
FERRY_API ferry_status ferry_memory_stats_get(ferry_device d, ferry_memory_stats *out);
FERRY_API ferry_status ferry_memory_empty_cache(ferry_device d);
FERRY_API void ferry_memory_reset_peak(ferry_device d);

/* Build features: a bit set and a one-line description ("CUDA 13.0, cuBLAS, OpenBLAS"). */
FERRY_API bool ferry_cuda_is_built(void);
/* FERRY_VERSION of the library that runs ("0.2.0"): compare with the FERRY_VERSION
 * a program was compiled with. */
FERRY_API const char *ferry_version(void);
/* "CUDA 13.0, cuBLAS, OpenBLAS" ("CBLAS" for another BLAS) or "CPU only ..." */
FERRY_API const char *ferry_build_features(void);

/* The GPU code this build carries, in nvcc's names: machine code per architecture,
 * then PTX of the newest ("sm_75 sm_80 sm_86 sm_89 sm_90 sm_100 sm_120 compute_120";
 * the Makefile's CUDA_ARCH chooses). "" without CUDA. Never NULL. */
FERRY_API const char *ferry_cuda_archs(void);

/* How GPU code runs on a device, as the CUDA driver decides when it loads a kernel. */
typedef enum ferry_arch_fit {
    FERRY_ARCH_FIT_NONE = 0, /* nothing that runs there: launches fail with "no kernel image" */
    FERRY_ARCH_FIT_SASS,     /* machine code for the device's generation */
    FERRY_ARCH_FIT_PTX       /* PTX of an older architecture, JIT-compiled at the first launch */
} ferry_arch_fit;

/* Which of `archs` (in ferry_cuda_archs()'s form; spaces or commas between words)
 * runs on a GPU of compute capability cc_major.cc_minor: machine code sm_XY runs on
 * major X at minor >= Y; PTX compute_XY on any capability >= X.Y, machine code
 * preferred. *arch (may be NULL): the one chosen (86 for sm_86), 0 with NONE.
 * Pure: NULL archs, unknown words or an impossible capability count as no code. */
FERRY_API ferry_arch_fit ferry_cuda_arch_fit(const char *archs, int cc_major, int cc_minor,
                                             int *arch);

#ifdef __cplusplus
}
#endif
#endif

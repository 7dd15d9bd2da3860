/* The CUDA backend: the only C file that talks to the CUDA runtime. Every call
 * goes through FERRY_CUDA_CHECK; calls that name a device switch to it for the
 * duration and switch back, so the caller's current device never changes
 * behind its back. */
#include <string.h>

#include "device/backend.h"
#include "device/cuda_check.h"
#include "common/error.h"

int ferry_cuda_runtime_version(void)
{
    int v = 0;
    if (cudaRuntimeGetVersion(&v) != cudaSuccess) {
        (void)cudaGetLastError();
        return CUDART_VERSION;
    }
    return v;
}

int ferry_cuda_driver_version(void)
{
    int v = 0;
    if (cudaDriverGetVersion(&v) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return v;
}

/* Without a driver or GPU cudaGetDeviceCount fails; that is "0 devices", not
 * an error the user has to handle. */
static int cu_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return n;
}

static ferry_status cu_set_device(int index)
{
    FERRY_CUDA_CHECK(cudaSetDevice(index));
    return FERRY_OK;
}

static ferry_status cu_get_device(int *index)
{
    FERRY_CUDA_CHECK(cudaGetDevice(index));
    return FERRY_OK;
}

/* Makes index current; *prev gets what to restore (-1: nothing). */
static ferry_status enter(int index, int *prev) { return ferry_cuda_enter(index, prev); }

static void leave(int prev) { ferry_cuda_leave(prev); }

/* A query's answer: done, not yet (cudaErrorNotReady is not an error and sets
 * no last error), or the failure, which is never "done". */
static ferry_status query_result(cudaError_t e, bool *done, const char *call)
{
    *done = e == cudaSuccess;
    if (e == cudaSuccess || e == cudaErrorNotReady)
        return FERRY_OK;
    return ferry_cuda_status(e, __FILE__, __LINE__, call);
}

static ferry_status cu_mem_info(int index, size_t *free_bytes, size_t *total_bytes)
{
    int prev;
    ferry_status st = enter(index, &prev);
    if (st != FERRY_OK)
        return st;
    st = FERRY_CUDA_STATUS(cudaMemGetInfo(free_bytes, total_bytes));
    leave(prev);
    return st;
}

static ferry_status cu_props(int index, ferry_device_props *out)
{
    struct cudaDeviceProp p;
    FERRY_CUDA_CHECK(cudaGetDeviceProperties(&p, index));
    snprintf(out->name, sizeof out->name, "%s", p.name);
    out->total_memory = p.totalGlobalMem;
    out->cc_major = p.major;
    out->cc_minor = p.minor;
    out->multiprocessors = p.multiProcessorCount;
    size_t free_b = 0, total_b = 0;
    ferry_status st = cu_mem_info(index, &free_b, &total_b);
    if (st != FERRY_OK)
        return st;
    out->free_memory = free_b;
    return FERRY_OK;
}

static ferry_status cu_synchronize(int index)
{
    int prev;
    ferry_status st = enter(index, &prev);
    if (st != FERRY_OK)
        return st;
    st = FERRY_CUDA_STATUS(cudaDeviceSynchronize());
    leave(prev);
    return st;
}

static ferry_status cu_malloc(int index, size_t bytes, void **out)
{
    int prev;
    ferry_status st = enter(index, &prev);
    if (st != FERRY_OK)
        return st;
    st = FERRY_CUDA_STATUS(cudaMalloc(out, bytes));
    leave(prev);
    return st;
}

static void cu_free(int index, void *ptr)
{
    int prev;
    if (enter(index, &prev) != FERRY_OK)
        return;
    ferry_status st = FERRY_CUDA_STATUS(cudaFree(ptr));
    if (st != FERRY_OK)
        ferry_log(FERRY_LOG_WARN, "cudaFree on cuda:%d failed: %s", index, ferry_last_error());
    leave(prev);
}

static ferry_status cu_memset_zero(int index, void *ptr, size_t bytes, void *stream)
{
    int prev;
    ferry_status st = enter(index, &prev);
    if (st != FERRY_OK)
        return st;
    if (stream)
        st = FERRY_CUDA_STATUS(cudaMemsetAsync(ptr, 0, bytes, (cudaStream_t)stream));
    else
        st = FERRY_CUDA_STATUS(cudaMemset(ptr, 0, bytes));
    leave(prev);
    return st;
}

static ferry_status cu_memcpy(int index, void *dst, const void *src, size_t bytes,
                              ferry_copy_kind kind, void *stream)
{
    /* D2D uses cudaMemcpyDefault: with unified addressing the runtime finds the
     * devices of both pointers, which makes copies between two GPUs work too. */
    enum cudaMemcpyKind k = cudaMemcpyDefault;
    switch (kind) {
    case FERRY_COPY_H2D: k = cudaMemcpyHostToDevice; break;
    case FERRY_COPY_D2H: k = cudaMemcpyDeviceToHost; break;
    case FERRY_COPY_D2D: k = cudaMemcpyDefault; break;
    case FERRY_COPY_H2H: k = cudaMemcpyHostToHost; break;
    }
    int prev;
    ferry_status st = enter(index, &prev);
    if (st != FERRY_OK)
        return st;
    if (stream)
        st = FERRY_CUDA_STATUS(cudaMemcpyAsync(dst, src, bytes, k, (cudaStream_t)stream));
    else
        st = FERRY_CUDA_STATUS(cudaMemcpy(dst, src, bytes, k));
    leave(prev);
    return st;
}

static ferry_status cu_stream_create(int index, void **out)
{
    int prev;
    ferry_status st = enter(index, &prev);
    if (st != FERRY_OK)
        return st;
    /* Non-blocking: our streams must not serialise with the legacy default
     * stream, or a copy stream would wait for every default-stream kernel. */
    cudaStream_t s = NULL;
    st = FERRY_CUDA_STATUS(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    leave(prev);
    if (st == FERRY_OK)
        *out = s;
    return st;
}

static void cu_stream_destroy(int index, void *stream)
{
    if (!stream)
        return;
    int prev;
    (void)enter(index, &prev); /* failed: prev is -1; destroy it from where we are */
    if (cudaStreamDestroy((cudaStream_t)stream) != cudaSuccess)
        (void)cudaGetLastError();
    leave(prev);
}

static ferry_status cu_stream_sync(int index, void *stream)
{
    int prev;
    ferry_status st = enter(index, &prev);
    if (st != FERRY_OK)
        return st;
    st = FERRY_CUDA_STATUS(cudaStreamSynchronize((cudaStream_t)stream));
    leave(prev);
    return st;
}

static ferry_status cu_stream_query(int index, void *stream, bool *done)
{
    *done = false;
    int prev;
    ferry_status st = enter(index, &prev);
    if (st != FERRY_OK)
        return st;
    st = query_result(cudaStreamQuery((cudaStream_t)stream), done, "cudaStreamQuery");
    leave(prev);
    return st;
}

/* The stream's device is current; the event may belong to another device
 * (that is how devices are ordered). */
static ferry_status cu_stream_wait_event(int index, void *stream, void *event)
{
    int prev;
    ferry_status st = enter(index, &prev);
    if (st != FERRY_OK)
        return st;
    st = FERRY_CUDA_STATUS(cudaStreamWaitEvent((cudaStream_t)stream, (cudaEvent_t)event, 0));
    leave(prev);
    return st;
}

static ferry_status cu_event_create(int index, bool timing, void **out)
{
    int prev;
    ferry_status st = enter(index, &prev);
    if (st != FERRY_OK)
        return st;
    /* Blocking sync: a thread in ferry_event_synchronize sleeps until the
     * event completes instead of spinning a core (the loader's workers wait on
     * copy events, and the core is what decodes the next batch). The wake-up
     * costs some microseconds, nothing next to a batch. */
    unsigned flags = cudaEventBlockingSync | (timing ? 0u : (unsigned)cudaEventDisableTiming);
    cudaEvent_t e = NULL;
    st = FERRY_CUDA_STATUS(cudaEventCreateWithFlags(&e, flags));
    leave(prev);
    if (st == FERRY_OK)
        *out = e;
    return st;
}

static void cu_event_destroy(int index, void *event)
{
    if (!event)
        return;
    int prev;
    (void)enter(index, &prev); /* failed: prev is -1; destroy it from where we are */
    if (cudaEventDestroy((cudaEvent_t)event) != cudaSuccess)
        (void)cudaGetLastError();
    leave(prev);
}

/* With stream NULL this is index's legacy default stream: the device must be
 * current, or the record lands on another device's stream (and fails). */
static ferry_status cu_event_record(int index, void *event, void *stream)
{
    int prev;
    ferry_status st = enter(index, &prev);
    if (st != FERRY_OK)
        return st;
    st = FERRY_CUDA_STATUS(cudaEventRecord((cudaEvent_t)event, (cudaStream_t)stream));
    leave(prev);
    return st;
}

static ferry_status cu_event_sync(int index, void *event)
{
    int prev;
    ferry_status st = enter(index, &prev);
    if (st != FERRY_OK)
        return st;
    st = FERRY_CUDA_STATUS(cudaEventSynchronize((cudaEvent_t)event));
    leave(prev);
    return st;
}

static ferry_status cu_event_query(int index, void *event, bool *done)
{
    *done = false;
    int prev;
    ferry_status st = enter(index, &prev);
    if (st != FERRY_OK)
        return st;
    st = query_result(cudaEventQuery((cudaEvent_t)event), done, "cudaEventQuery");
    leave(prev);
    return st;
}

static ferry_status cu_event_elapsed_ms(int index, void *start, void *end, float *ms)
{
    int prev;
    ferry_status st = enter(index, &prev);
    if (st != FERRY_OK)
        return st;
    st = FERRY_CUDA_STATUS(cudaEventElapsedTime(ms, (cudaEvent_t)start, (cudaEvent_t)end));
    leave(prev);
    return st;
}

static ferry_status cu_host_alloc(size_t bytes, void **out)
{
    /* Portable: the pages count as pinned for every device's context, so one
     * pool serves copies to any GPU. */
    FERRY_CUDA_CHECK(cudaHostAlloc(out, bytes, cudaHostAllocPortable));
    return FERRY_OK;
}

static void cu_host_free(void *ptr)
{
    if (ptr && cudaFreeHost(ptr) != cudaSuccess)
        (void)cudaGetLastError();
}

/* Thread-local capture mode: only the capturing thread is held to the rules,
 * so the loader's workers may go on allocating and waiting on their own
 * streams while the training thread captures its step. */
static ferry_status cu_capture_begin(int index, void *stream)
{
    int prev;
    ferry_status st = enter(index, &prev);
    if (st != FERRY_OK)
        return st;
    st = FERRY_CUDA_STATUS(cudaStreamBeginCapture((cudaStream_t)stream,
                                                  cudaStreamCaptureModeThreadLocal));
    leave(prev);
    return st;
}

static ferry_status cu_capture_end(int index, void *stream, void **graph)
{
    *graph = NULL;
    int prev;
    ferry_status st = enter(index, &prev);
    if (st != FERRY_OK)
        return st;
    cudaGraph_t g = NULL;
    st = FERRY_CUDA_STATUS(cudaStreamEndCapture((cudaStream_t)stream, &g));
    cudaGraphExec_t exec = NULL;
    if (st == FERRY_OK)
        st = FERRY_CUDA_STATUS(cudaGraphInstantiateWithFlags(&exec, g, 0));
    if (g && cudaGraphDestroy(g) != cudaSuccess) /* the executable keeps what it needs */
        (void)cudaGetLastError();
    leave(prev);
    if (st == FERRY_OK)
        *graph = exec;
    return st;
}

static ferry_status cu_graph_launch(int index, void *graph, void *stream)
{
    int prev;
    ferry_status st = enter(index, &prev);
    if (st != FERRY_OK)
        return st;
    st = FERRY_CUDA_STATUS(cudaGraphLaunch((cudaGraphExec_t)graph, (cudaStream_t)stream));
    leave(prev);
    return st;
}

static void cu_graph_destroy(int index, void *graph)
{
    if (!graph)
        return;
    int prev;
    (void)enter(index, &prev);
    if (cudaGraphExecDestroy((cudaGraphExec_t)graph) != cudaSuccess)
        (void)cudaGetLastError();
    leave(prev);
}

static const ferry_backend cuda_backend = {
    .name = "cuda",
    .kind = FERRY_BACKEND_CUDA,
    .device_count = cu_count,
    .set_device = cu_set_device,
    .get_device = cu_get_device,
    .props = cu_props,
    .mem_info = cu_mem_info,
    .synchronize = cu_synchronize,
    .malloc = cu_malloc,
    .free = cu_free,
    .memset_zero = cu_memset_zero,
    .memcpy = cu_memcpy,
    .stream_create = cu_stream_create,
    .stream_destroy = cu_stream_destroy,
    .stream_sync = cu_stream_sync,
    .capture_begin = cu_capture_begin,
    .capture_end = cu_capture_end,
    .graph_launch = cu_graph_launch,
    .graph_destroy = cu_graph_destroy,
    .stream_query = cu_stream_query,
    .stream_wait_event = cu_stream_wait_event,
    .event_create = cu_event_create,
    .event_destroy = cu_event_destroy,
    .event_record = cu_event_record,
    .event_sync = cu_event_sync,
    .event_query = cu_event_query,
    .event_elapsed_ms = cu_event_elapsed_ms,
    .host_alloc = cu_host_alloc,
    .host_free = cu_host_free,
};

const ferry_backend *ferry_backend_cuda(void) { return &cuda_backend; }

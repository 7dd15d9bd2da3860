/* The simulated GPU keeps CUDA's rules: sticky errors after a kernel fault (a
 * query never reads "done"), streams and events bound to their device, the
 * current device per host thread, fresh and freed memory that reads as NaN.
 * Runs under FERRY_SIM_GPUS (make test sets it); skips otherwise. */
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "device/sim/sim.h"
#include "ferry/device.h"
#include "ferry/ops.h"
#include "ferry/tensor.h"
#include "harness.h"

/* Also clears a fault an earlier failed test may have left on the devices. */
static void require_sim(void)
{
    if (!ferry_cuda_is_simulated())
        SKIP("not on the simulated GPU (set FERRY_SIM_GPUS)");
    for (int d = 0; d < ferry_cuda_device_count(); d++) {
        ferry_sim_debug_fault_after(d, 0);
        ferry_sim_debug_reset(d);
    }
}

static ferry_tensor *ones(ferry_device d, int64_t n)
{
    ferry_tensor *t = NULL;
    ASSERT_OK(ferry_tensor_full(&n, 1, 1.0, FERRY_DTYPE_F32, d, &t));
    return t;
}

TEST(kernel_fault_is_sticky_and_never_reads_done)
{
    require_sim();
    ferry_device d = ferry_cuda(0);
    ferry_stream *s;
    ASSERT_OK(ferry_stream_create(d, &s));
    ferry_tensor *a = ones(d, 1000), *y = NULL;
    ferry_sim_debug_fault_after(0, 1);
    /* The launch itself succeeds, as on CUDA: the fault shows up later. */
    ASSERT_OK(ferry_add(a, a, s, &y));
    ASSERT_STATUS(ferry_stream_synchronize(s), FERRY_ERR_CUDA);
    ASSERT_STR_CONTAINS(ferry_last_error(), "injected fault");
    ASSERT_STR_CONTAINS(ferry_last_error(), "sticky");
    bool done = true;
    ASSERT_STATUS(ferry_stream_query_status(s, &done), FERRY_ERR_CUDA);
    ASSERT(!done);
    /* Every later call on the device fails too, until the (test-only) reset. */
    ferry_tensor *z = NULL;
    ASSERT_STATUS(ferry_add(a, a, s, &z), FERRY_ERR_CUDA);
    ASSERT_STATUS(ferry_device_synchronize(d), FERRY_ERR_CUDA);
    /* Another device is not affected. */
    if (ferry_cuda_device_count() > 1)
        ASSERT_OK(ferry_device_synchronize(ferry_cuda(1)));
    ferry_sim_debug_reset(0);
    ASSERT_OK(ferry_device_synchronize(d));
    ferry_tensor_release(y);
    ASSERT_OK(ferry_add(a, a, s, &y));
    float v[1000];
    ASSERT_OK(ferry_tensor_copy_to_host(y, v, sizeof v));
    for (int i = 0; i < 1000; i++)
        ASSERT_NEAR(v[i], 2.0, 0.0);
    ferry_tensor_release(y);
    ferry_tensor_release(a);
    ferry_stream_destroy(s);
}

TEST(event_fault_is_reported_by_event_calls)
{
    require_sim();
    ferry_device d = ferry_cuda(0);
    ferry_stream *s;
    ferry_event *e;
    ASSERT_OK(ferry_stream_create(d, &s));
    ASSERT_OK(ferry_event_create(d, false, &e));
    ferry_tensor *a = ones(d, 64), *y = NULL;
    ferry_sim_debug_fault_after(0, 1);
    ASSERT_OK(ferry_add(a, a, s, &y));
    /* The record may already see the fault (it is sticky, as on CUDA). */
    ferry_status rec = ferry_event_record(e, s);
    ASSERT(rec == FERRY_OK || rec == FERRY_ERR_CUDA);
    /* Either way every event call on the faulted device reports the fault. */
    ASSERT_STATUS(ferry_event_synchronize(e), FERRY_ERR_CUDA);
    bool done = true;
    ASSERT_STATUS(ferry_event_query_status(e, &done), FERRY_ERR_CUDA);
    ASSERT(!done);
    ferry_sim_debug_reset(0);
    ferry_tensor_release(y);
    ferry_tensor_release(a);
    ferry_event_destroy(e);
    ferry_stream_destroy(s);
}

/* After a stream synchronises, an event recorded on it is complete, and after
 * an event synchronises, a stream whose last work it was is complete. */
TEST(stream_and_event_completion_agree)
{
    require_sim();
    ferry_device d = ferry_cuda(0);
    ferry_stream *s;
    ferry_event *e;
    ASSERT_OK(ferry_stream_create(d, &s));
    ASSERT_OK(ferry_event_create(d, false, &e));
    ferry_tensor *a = ones(d, 256);
    for (int i = 0; i < 200; i++) {
        ferry_tensor *y = NULL;
        ASSERT_OK(ferry_add(a, a, s, &y));
        ASSERT_OK(ferry_event_record(e, s));
        bool done = false;
        if (i % 2) {
            ASSERT_OK(ferry_stream_synchronize(s));
            ASSERT_OK(ferry_event_query_status(e, &done));
        } else {
            ASSERT_OK(ferry_event_synchronize(e));
            ASSERT_OK(ferry_stream_query_status(s, &done));
        }
        ASSERT_MSG(done, "round %d: %s", i, i % 2 ? "stream synchronised, event not complete"
                                                 : "event synchronised, stream not complete");
        ferry_tensor_release(y);
    }
    ferry_tensor_release(a);
    ferry_event_destroy(e);
    ferry_stream_destroy(s);
}

TEST(streams_and_events_belong_to_their_device)
{
    require_sim();
    if (ferry_cuda_device_count() < 2)
        SKIP("needs two simulated GPUs (FERRY_SIM_GPUS=2)");
    ferry_stream *s1;
    ferry_event *e0;
    ASSERT_OK(ferry_stream_create(ferry_cuda(1), &s1));
    ASSERT_OK(ferry_event_create(ferry_cuda(0), false, &e0));
    /* Recording an event of cuda:0 on a stream of cuda:1 is refused. */
    ASSERT_STATUS(ferry_event_record(e0, s1), FERRY_ERR_DEVICE_MISMATCH);
    /* An op on cuda:0 tensors with a stream of cuda:1 is refused, not run. */
    ferry_tensor *a = ones(ferry_cuda(0), 8), *y = NULL;
    ASSERT_STATUS(ferry_add(a, a, s1, &y), FERRY_ERR_DEVICE_MISMATCH);
    ASSERT_STR_CONTAINS(ferry_last_error(), "the tensors are on cuda:0 but the stream is on cuda:1");
    ASSERT(y == NULL);
    /* Waiting on another device's event is allowed (cudaStreamWaitEvent). */
    ASSERT_OK(ferry_event_record(e0, NULL));
    ASSERT_OK(ferry_stream_wait_event(s1, e0));
    ASSERT_OK(ferry_stream_synchronize(s1));
    ferry_tensor_release(a);
    ferry_event_destroy(e0);
    ferry_stream_destroy(s1);
}

static void *other_thread(void *arg)
{
    int *seen = arg;
    (void)ferry_cuda_current_device(seen);
    return NULL;
}

TEST(current_device_is_per_host_thread)
{
    require_sim();
    if (ferry_cuda_device_count() < 2)
        SKIP("needs two simulated GPUs (FERRY_SIM_GPUS=2)");
    int cur = -1, seen = -1;
    ASSERT_OK(ferry_cuda_set_device(1));
    pthread_t t;
    ASSERT(pthread_create(&t, NULL, other_thread, &seen) == 0);
    pthread_join(t, NULL);
    ASSERT_EQ_INT(seen, 0); /* a new thread starts on device 0, as with CUDA */
    ASSERT_OK(ferry_cuda_current_device(&cur));
    ASSERT_EQ_INT(cur, 1);
    ASSERT_STATUS(ferry_cuda_set_device(ferry_cuda_device_count()), FERRY_ERR_NO_DEVICE);
    ASSERT_OK(ferry_cuda_set_device(0));
}

TEST(fresh_device_memory_reads_as_nan)
{
    require_sim();
    int64_t n = 256;
    ferry_tensor *t = NULL;
    ASSERT_OK(ferry_memory_empty_cache(ferry_cuda(0)));
    ASSERT_OK(ferry_tensor_empty(&n, 1, FERRY_DTYPE_F32, ferry_cuda(0), &t));
    float v[256];
    ASSERT_OK(ferry_tensor_copy_to_host(t, v, sizeof v));
    for (int i = 0; i < 256; i++)
        ASSERT(isnan(v[i]));
    ferry_tensor_release(t);
}

TEST(freed_memory_is_poisoned_in_stream_order)
{
    require_sim();
    ferry_device d = ferry_cuda(0);
    ferry_stream *s;
    ASSERT_OK(ferry_stream_create(d, &s));
    int64_t n = 4096;
    ferry_tensor *a = ones(d, n), *y = NULL;
    ASSERT_OK(ferry_add(a, a, s, &y));
    void *p = ferry_tensor_data(y);
    ferry_tensor_release(y); /* back to the cache; poisoned once s gets there */
    ASSERT_OK(ferry_stream_synchronize(s));
    float v[16];
    ASSERT_OK(ferry_memcpy(v, p, sizeof v, FERRY_COPY_D2H, d, s));
    for (int i = 0; i < 16; i++)
        ASSERT(isnan(v[i]));
    /* The same stream gets the block back, behind the poison, and sees its own result. */
    ASSERT_OK(ferry_add(a, a, s, &y));
    ASSERT_OK(ferry_stream_synchronize(s));
    ASSERT_OK(ferry_memcpy(v, ferry_tensor_data(y), sizeof v, FERRY_COPY_D2H, d, s));
    for (int i = 0; i < 16; i++)
        ASSERT_NEAR(v[i], 2.0, 0.0);
    ferry_tensor_release(y);
    ferry_tensor_release(a);
    ferry_stream_destroy(s);
}

TEST(device_memory_limit_gives_device_oom)
{
    require_sim();
    ferry_device_props p;
    ASSERT_OK(ferry_device_properties(ferry_cuda(0), &p));
    ASSERT_STR_CONTAINS(p.name, "simulated");
    int64_t n = (int64_t)(p.total_memory / 4) + 1024;
    ferry_tensor *t = NULL;
    ASSERT_STATUS(ferry_tensor_empty(&n, 1, FERRY_DTYPE_F32, ferry_cuda(0), &t), FERRY_ERR_DEVICE_OOM);
    ASSERT_STR_CONTAINS(ferry_last_error(), "out of memory on cuda:0");
}



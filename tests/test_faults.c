/* Fault injection: fail the k-th host allocation (or thread start), for every
 * k, while a loader is created, runs one epoch and is destroyed. Each attempt
 * must fail cleanly (an error, not a crash), leave nothing allocated, and the
 * next attempt succeed. */
#include "harness.h"
#include "common/error.h"
#include "common/thread.h"

enum { N = 37, SAMPLE = 2 * 3 * 5 };

static ferry_status one_epoch(ferry_dataset *ds, size_t workers, ferry_dtype wire, ferry_dtype out,
                              size_t *batches)
{
    ferry_loader_config c = ferry_loader_config_default();
    c.dataset = ds;
    c.batch_size = 8;
    c.num_workers = workers ? workers : FERRY_LOADER_NO_WORKERS;
    c.device = ferry_cpu();
    c.pin_memory = FERRY_PIN_MEMORY_OFF;
    c.shuffle = true;
    c.wire_dtype = wire == FERRY_DTYPE_F32 ? FERRY_WIRE_F32 : FERRY_WIRE_U8;
    c.out_dtype = out;
    ferry_loader *l;
    ferry_status st = ferry_loader_create(&c, &l);
    if (st != FERRY_OK)
        return st;
    ferry_batch b;
    *batches = 0;
    while ((st = ferry_loader_next(l, NULL, &b)) == FERRY_OK)
        (*batches)++;
    ferry_loader_destroy(l);
    return st == FERRY_END ? FERRY_OK : st;
}

static void sweep(size_t workers, ferry_dtype wire, ferry_dtype out)
{
    static uint8_t data[N * SAMPLE];
    static int64_t labels[N];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (uint8_t)(i * 31);
    ferry_sample_format fmt = {2, 3, 5, FERRY_LAYOUT_CHW, FERRY_DTYPE_U8};

    /* One run first: the process-wide allocators are created on first use and live on. */
    size_t failures = 0, batches = 0;
    ferry_dataset *warm;
    ASSERT_OK(ferry_dataset_memory(data, &fmt, N, labels, &warm));
    ASSERT_OK(one_epoch(warm, workers, wire, out, &batches));
    ferry_dataset_release(warm);
    int64_t live0 = ferry_debug_alloc_live();
    for (int64_t k = 1; k < 10000; k++) {
        ferry_dataset *ds = NULL;
        ferry_debug_fail_alloc_after(k);
        ferry_status st = ferry_dataset_memory(data, &fmt, N, labels, &ds);
        if (st == FERRY_OK)
            st = one_epoch(ds, workers, wire, out, &batches);
        ferry_dataset_release(ds);
        bool never_failed = ferry_debug_fail_alloc_after(0) > 0;
        ASSERT_MSG(ferry_debug_alloc_live() == live0,
                   "failing allocation %lld leaked %lld allocation(s)", (long long)k,
                   (long long)(ferry_debug_alloc_live() - live0));
        ASSERT_MSG(never_failed || st != FERRY_OK,
                   "allocation %lld failed but the run reported success", (long long)k);
        if (never_failed) {
            /* Every allocation succeeded: k is past the last one. */
            ASSERT_EQ_SIZE(batches, (N + 7) / 8);
            ASSERT_MSG(failures > 3, "only %zu allocations were failed", failures);
            return;
        }
        failures++;
        ASSERT_MSG(st == FERRY_ERR_NO_MEMORY, "failing allocation %lld gave %s (%s)", (long long)k,
                   ferry_status_str(st), ferry_last_error());
        /* The next attempt, with no failure injected, works. */
        ASSERT_OK(ferry_dataset_memory(data, &fmt, N, labels, &ds));
        ASSERT_OK(one_epoch(ds, workers, wire, out, &batches));
        ferry_dataset_release(ds);
    }
    ASSERT_MSG(0, "the sweep did not end");
}

TEST(loader_survives_every_failed_allocation_inline)
{
    sweep(0, FERRY_DTYPE_U8, FERRY_DTYPE_F32);
}

TEST(loader_survives_every_failed_allocation_with_workers)
{
    sweep(2, FERRY_DTYPE_U8, FERRY_DTYPE_F32);
}

TEST(loader_survives_every_failed_allocation_wire_f32)
{
    sweep(1, FERRY_DTYPE_F32, FERRY_DTYPE_F16);
}

/* One run of the sweep below: create, one epoch, destroy; batches counted. */
static ferry_status thread_run(ferry_device dev, size_t *batches)
{
    static uint8_t data[N * SAMPLE];
    static int64_t labels[N];
    ferry_sample_format fmt = {2, 3, 5, FERRY_LAYOUT_CHW, FERRY_DTYPE_U8};
    ferry_dataset *ds = NULL;
    ASSERT_OK(ferry_dataset_memory(data, &fmt, N, labels, &ds));
    ferry_loader_config c = ferry_loader_config_default();
    c.dataset = ds;
    c.batch_size = 8;
    c.num_workers = 2;
    c.device = dev;
    c.out_dtype = FERRY_DTYPE_F32;
    ferry_loader *l;
    ferry_status st = ferry_loader_create(&c, &l);
    *batches = 0;
    if (st == FERRY_OK) {
        ferry_batch b;
        while ((st = ferry_loader_next(l, NULL, &b)) == FERRY_OK)
            (*batches)++;
        ferry_loader_destroy(l);
        st = st == FERRY_END ? FERRY_OK : st;
    }
    ferry_dataset_release(ds);
    return st;
}

/* The k-th thread a loader starts cannot be started (a process out of
 * threads), for every k until one run starts them all: its workers, and on
 * a GPU (the simulated one: FERRY_SIM_GPUS) the streams' threads. Each run
 * either delivers every batch or fails with an error saying a thread could
 * not be started; nothing leaks (on a GPU it did: every loader's device
 * block stayed cached under its dead copy stream), and the next run works. */
static void thread_sweep(ferry_device dev)
{
    /* One run first: the process-wide pools are made on first use and live on. */
    size_t batches;
    ASSERT_OK(thread_run(dev, &batches));
    int64_t live0 = ferry_debug_alloc_live(), k = 1, stopped = 0;
    for (int64_t left = 0; left == 0; k++) {
        ferry_debug_fail_thread_after(k);
        ferry_status st = thread_run(dev, &batches);
        left = ferry_debug_fail_thread_after(0);
        ASSERT_MSG(ferry_debug_alloc_live() == live0, "failing thread %lld leaked %lld allocation(s)",
                   (long long)k, (long long)(ferry_debug_alloc_live() - live0));
        if (st != FERRY_OK) {
            stopped++;
            ASSERT_MSG(left == 0, "thread %lld: %s with every thread started", (long long)k,
                       ferry_last_error());
            ASSERT_STR_CONTAINS(ferry_last_error(), "thread");
        } else {
            ASSERT_EQ_SIZE(batches, (N + 7) / 8);
        }
    }
    printf("  %lld threads, %lld of whose failures stopped the run\n", (long long)(k - 2),
           (long long)stopped);
    ASSERT_MSG(k - 2 >= 2, "only %lld threads: the sweep tests little", (long long)(k - 2));
}

TEST(loader_survives_every_thread_that_cannot_start)
{
    thread_sweep(ferry_cpu());
}

TEST(gpu_loader_survives_every_thread_that_cannot_start)
{
    if (ferry_cuda_device_count() < 1)
        SKIP("no CUDA device (FERRY_SIM_GPUS=1 runs it on the simulated GPU)");
    thread_sweep(ft_device("cuda:0"));
}

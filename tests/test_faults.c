/* Fault injection: fail the k-th host allocation, for every k, while a loader is
 * created, runs one epoch and is destroyed. Each attempt must fail cleanly (an
 * error, not a crash), leave nothing allocated, and the next attempt succeed. */
#include "harness.h"
#include "common/error.h"

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

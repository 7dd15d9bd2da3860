/* The caching device allocator: statistics, reuse from the cache (a second
 * identical step makes no new system allocation), streams keep their own
 * blocks, empty_cache, bad frees; and on a GPU the same with cudaMalloc plus the
 * out-of-memory path. */
#include <pthread.h>
#include <stdlib.h>

#include "harness.h"
#include "common/error.h" /* the allocation test hooks */
#include "device/device_internal.h" /* ferry_memory_add_empty_cache_hook_ */

static ferry_memory_stats stats(ferry_device d)
{
    ferry_memory_stats s;
    ferry_status st = ferry_memory_stats_get(d, &s);
    if (st != FERRY_OK)
        ft_fail(__FILE__, __LINE__, "stats: %s", ferry_last_error());
    return s;
}

/* One "training step": a handful of differently sized buffers, freed at the end. */
static void step(ferry_device d, ferry_stream *s)
{
    static const size_t sizes[] = {1, 100, 4096, 70000, 1 << 20, (3 << 20) + 17, 513};
    void *p[sizeof sizes / sizeof sizes[0]];
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        ferry_status st = ferry_device_alloc(d, sizes[i], s, &p[i]);
        if (st != FERRY_OK)
            ft_fail(__FILE__, __LINE__, "malloc %zu: %s", sizes[i], ferry_last_error());
        if (!p[i] || (uintptr_t)p[i] % 256 != 0)
            ft_fail(__FILE__, __LINE__, "bad pointer %p", p[i]);
    }
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        ferry_device_free(d, p[i]);
}

static void check_steady_state(ferry_device d)
{
    ASSERT_OK(ferry_memory_empty_cache(d));
    ferry_memory_stats s0 = stats(d);
    step(d, NULL);
    ferry_memory_stats s1 = stats(d);
    ASSERT_EQ_INT(s1.alloc_calls - s0.alloc_calls, 7);
    ASSERT(s1.system_mallocs > s0.system_mallocs);
    ASSERT_EQ_SIZE(s1.allocated_bytes, s0.allocated_bytes);
    ASSERT(s1.reserved_bytes > s0.reserved_bytes);
    ASSERT(s1.peak_allocated_bytes >= s0.allocated_bytes + (3 << 20) + (1 << 20));
    step(d, NULL);
    ferry_memory_stats s2 = stats(d);
    ASSERT_EQ_INT(s2.system_mallocs, s1.system_mallocs); /* all from the cache */
    ASSERT_EQ_INT(s2.cache_hits - s1.cache_hits, 7);
    ASSERT_EQ_SIZE(s2.reserved_bytes, s1.reserved_bytes);
    ASSERT_OK(ferry_memory_empty_cache(d));
    ferry_memory_stats s3 = stats(d);
    ASSERT_EQ_SIZE(s3.reserved_bytes, s3.allocated_bytes);
}

TEST(cpu_allocator_reuses_cache)
{
    check_steady_state(ferry_cpu());
}

TEST(cpu_allocator_second_step_no_host_allocations)
{
    step(ferry_cpu(), NULL);
    int64_t before = ferry_debug_alloc_count();
    step(ferry_cpu(), NULL);
    ASSERT_EQ_INT(ferry_debug_alloc_count(), before);
}

TEST(cpu_allocator_stats_are_true)
{
    ferry_device d = ferry_cpu();
    ASSERT_OK(ferry_memory_empty_cache(d));
    ferry_memory_stats s0 = stats(d);
    void *a, *b;
    ASSERT_OK(ferry_device_alloc(d, 1000, NULL, &a));  /* rounds to 1024 */
    ASSERT_OK(ferry_device_alloc(d, 5 << 20, NULL, &b)); /* rounds to 6 MiB */
    ferry_memory_stats s1 = stats(d);
    ASSERT_EQ_SIZE(s1.allocated_bytes - s0.allocated_bytes, 1024 + (6 << 20));
    ASSERT_EQ_SIZE(s1.reserved_bytes - s0.reserved_bytes, 1024 + (6 << 20));
    ASSERT_EQ_INT(s1.system_mallocs - s0.system_mallocs, 2);
    memset(a, 1, 1000);
    memset(b, 2, 5 << 20);
    ferry_device_free(d, b);
    ferry_memory_stats s2 = stats(d);
    ASSERT_EQ_SIZE(s2.allocated_bytes - s0.allocated_bytes, 1024);
    ASSERT_EQ_SIZE(s2.reserved_bytes, s1.reserved_bytes); /* b is cached */
    ASSERT(s2.peak_allocated_bytes >= s1.allocated_bytes);
    ferry_memory_reset_peak(d);
    ASSERT_EQ_SIZE(stats(d).peak_allocated_bytes, s2.allocated_bytes);
    ferry_device_free(d, a);
}

TEST(allocator_blocks_stay_with_their_stream)
{
    ferry_device d = ferry_cpu();
    ferry_stream *s1, *s2;
    ASSERT_OK(ferry_stream_create(d, &s1));
    ASSERT_OK(ferry_stream_create(d, &s2));
    void *a, *b;
    ASSERT_OK(ferry_device_alloc(d, 77777, s1, &a));
    ferry_device_free(d, a);
    ferry_memory_stats before = stats(d);
    ASSERT_OK(ferry_device_alloc(d, 77777, s2, &b)); /* s1's block is not handed to s2 */
    ASSERT_EQ_INT(stats(d).system_mallocs, before.system_mallocs + 1);
    ferry_device_free(d, b);
    ASSERT_OK(ferry_device_alloc(d, 77777, s1, &a)); /* but s1 gets it back */
    ASSERT_EQ_INT(stats(d).system_mallocs, before.system_mallocs + 1);
    ferry_device_free(d, a);
    ferry_stream_destroy(s1);
    ferry_stream_destroy(s2);
}

/* A destroyed stream's cached blocks (its work done) serve any later stream,
 * its own stream's blocks first; a block freed on the default stream still
 * goes to no other. Before, each loader's blocks stayed cached under its dead
 * copy streams' keys and the next loader allocated afresh. */
static void dead_stream_blocks_are_reused(ferry_device d)
{
    void *a, *b;
    ASSERT_OK(ferry_memory_empty_cache(d)); /* no idle blocks of earlier tests */
    ASSERT_OK(ferry_device_alloc(d, 77777, NULL, &a));
    ferry_device_free(d, a); /* the default stream's */
    ferry_memory_stats s0 = stats(d);
    for (int round = 0; round < 3; round++) {
        ferry_stream *s;
        ASSERT_OK(ferry_stream_create(d, &s));
        ASSERT_OK(ferry_device_alloc(d, 77777, s, &b));
        ferry_device_free(d, b);
        ferry_stream_destroy(s);
    }
    /* Round 0 allocated (the default stream's block is not s's); rounds 1
     * and 2 took the dead stream's block. */
    ferry_memory_stats s1 = stats(d);
    ASSERT_EQ_INT(s1.system_mallocs, s0.system_mallocs + 1);
    ASSERT_EQ_SIZE(s1.allocated_bytes, s0.allocated_bytes);
    ASSERT_EQ_INT(s1.cache_hits - s0.cache_hits, 2);
    /* The default stream takes its own block back, not the idle one. */
    ASSERT_OK(ferry_device_alloc(d, 77777, NULL, &a));
    ASSERT(a != b);
    ferry_device_free(d, a);
    ASSERT_OK(ferry_memory_empty_cache(d));
}

TEST(cpu_allocator_gives_a_dead_streams_blocks_to_new_streams)
{
    dead_stream_blocks_are_reused(ferry_cpu());
}

TEST(cuda_allocator_gives_a_dead_streams_blocks_to_new_streams)
{
    ft_require_cuda();
    dead_stream_blocks_are_reused(ferry_cuda(0));
}

TEST(allocator_edge_cases)
{
    ferry_device d = ferry_cpu();
    void *p = (void *)1;
    ASSERT_OK(ferry_device_alloc(d, 0, NULL, &p));
    ASSERT(p == NULL);
    ferry_device_free(d, NULL);
    int on_stack;
    ferry_device_free(d, &on_stack); /* unknown: warning, no crash */
    ASSERT_STATUS(ferry_device_alloc(d, 10, NULL, NULL), FERRY_ERR_INVALID_ARG);
    ASSERT_STATUS(ferry_device_alloc(ferry_cuda(ferry_cuda_device_count()), 10, NULL, &p),
                  FERRY_ERR_NO_DEVICE);
    ASSERT_STATUS(ferry_device_alloc(d, SIZE_MAX - 3, NULL, &p), FERRY_ERR_DEVICE_OOM);
    ASSERT_STR_CONTAINS(ferry_last_error(), "out of memory on cpu");
    ferry_memory_stats s;
    ASSERT_STATUS(ferry_memory_stats_get(ferry_cuda(ferry_cuda_device_count()), &s), FERRY_ERR_NO_DEVICE);
    ASSERT_STATUS(ferry_memory_empty_cache(ferry_cuda(ferry_cuda_device_count())), FERRY_ERR_NO_DEVICE);
    ferry_memory_reset_peak(ferry_cuda(ferry_cuda_device_count()));
}

/* A failed system allocation empties the cache and retries once. */
TEST(cpu_allocator_retries_after_out_of_memory)
{
    ferry_device d = ferry_cpu();
    void *p;
    /* leave a recycled block record behind, so the next host allocation the
     * allocator makes is the memory itself */
    ASSERT_OK(ferry_device_alloc(d, 4242, NULL, &p));
    ferry_device_free(d, p);
    ASSERT_OK(ferry_memory_empty_cache(d));
    ferry_memory_stats s0 = stats(d);
    ferry_debug_fail_alloc_after(1);
    ferry_status st = ferry_device_alloc(d, 123456, NULL, &p);
    ferry_debug_fail_alloc_after(0);
    ASSERT_OK(st);
    ferry_memory_stats s1 = stats(d);
    ASSERT_EQ_INT(s1.oom_retries, s0.oom_retries + 1);
    ASSERT_EQ_INT(s1.system_mallocs, s0.system_mallocs + 1);
    ferry_device_free(d, p);
}

TEST(cuda_allocator_reuses_cache)
{
    ft_require_cuda();
    check_steady_state(ferry_cuda(0));
}

/* empty_cache on the default device (the zero value) is empty_cache on the
 * device it names, the hooks that free memory outside the allocator
 * (cuBLAS's idle handles) included. */
static int hook_calls[2];
static void count_hook(int index)
{
    if (index >= 0 && index < 2)
        hook_calls[index]++;
}

TEST(empty_cache_of_the_default_device_runs_its_hooks)
{
    ft_require_cuda();
    ASSERT_OK(ferry_memory_add_empty_cache_hook_(count_hook));
    ASSERT_OK(ferry_cuda_set_device(0));
    hook_calls[0] = hook_calls[1] = 0;
    ASSERT_OK(ferry_memory_empty_cache(ferry_cuda(0)));
    ASSERT_EQ_INT(hook_calls[0], 1);
    ASSERT_OK(ferry_memory_empty_cache((ferry_device){0}));
    ASSERT_EQ_INT(hook_calls[0], 2);
    ASSERT_EQ_INT(hook_calls[1], 0);
    ASSERT_OK(ferry_memory_empty_cache(ferry_cpu()));
    ASSERT_EQ_INT(hook_calls[0] + hook_calls[1], 2);
}

TEST(cuda_allocator_out_of_memory_then_recovers)
{
    ft_require_cuda();
    ferry_device d = ferry_cuda(0);
    ferry_device_props props;
    ASSERT_OK(ferry_device_properties(d, &props));
    void *p = NULL;
    ferry_memory_stats s0 = stats(d);
    ASSERT_STATUS(ferry_device_alloc(d, props.total_memory + ((size_t)1 << 30), NULL, &p),
                  FERRY_ERR_DEVICE_OOM);
    ASSERT_STR_CONTAINS(ferry_last_error(), "out of memory on cuda:0 allocating");
    ASSERT_STR_CONTAINS(ferry_last_error(), "free of");
    ASSERT_STR_CONTAINS(ferry_last_error(), "try a smaller batch");
    ASSERT_EQ_INT(stats(d).oom_retries, s0.oom_retries + 1);
    /* the failure is handled: the next allocation and kernel-free work succeed */
    ASSERT_OK(ferry_device_alloc(d, 1 << 20, NULL, &p));
    ASSERT(p != NULL);
    ASSERT_OK(ferry_device_synchronize(d));
    ferry_device_free(d, p);
}

/* Many threads allocating and freeing on the CPU device at once (run this
 * program under TSan too): the counters must balance. */
static void *alloc_worker(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    void *held[4] = {0};
    for (int r = 0; r < 3000; r++) {
        int k = (int)(rand_r(&seed) % 4);
        if (held[k]) {
            ferry_device_free(ferry_cpu(), held[k]);
            held[k] = NULL;
        } else if (ferry_device_alloc(ferry_cpu(), 1 + rand_r(&seed) % 100000, NULL, &held[k]) != FERRY_OK) {
            return (void *)1;
        } else {
            memset(held[k], k, 1);
        }
    }
    for (int k = 0; k < 4; k++)
        ferry_device_free(ferry_cpu(), held[k]);
    return NULL;
}

TEST(allocator_many_threads)
{
    ferry_memory_stats s0 = stats(ferry_cpu());
    pthread_t th[6];
    for (uintptr_t i = 0; i < 6; i++)
        ASSERT(pthread_create(&th[i], NULL, alloc_worker, (void *)(i + 1)) == 0);
    int bad = 0;
    for (int i = 0; i < 6; i++) {
        void *r;
        pthread_join(th[i], &r);
        bad |= r != NULL;
    }
    ASSERT(!bad);
    ferry_memory_stats s1 = stats(ferry_cpu());
    ASSERT_EQ_SIZE(s1.allocated_bytes, s0.allocated_bytes);
    ASSERT(s1.alloc_calls > s0.alloc_calls);
    ASSERT_EQ_INT(s1.alloc_calls - s0.alloc_calls, (s1.cache_hits - s0.cache_hits) + (s1.system_mallocs - s0.system_mallocs));
}

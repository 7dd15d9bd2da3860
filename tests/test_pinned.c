/* The pinned host pool: exact-size aligned pieces, reuse without new system
 * allocations, statistics, oversized pieces, many threads at once (this
 * program also runs under TSan), and real page-locking on a GPU machine. */
#include <pthread.h>
#include <stdlib.h>

#include "harness.h"
#include "common/error.h" /* the allocation test hooks */

TEST(pool_pieces_are_aligned_and_exact)
{
    ferry_pinned_pool *p;
    ASSERT_OK(ferry_pinned_pool_create(1 << 20, false, &p));
    size_t aligns[] = {0, 8, 64, 256, 4096, 65536};
    void *ptrs[6];
    for (size_t i = 0; i < 6; i++) {
        ASSERT_OK(ferry_pinned_pool_alloc(p, 1000 + i, aligns[i], &ptrs[i]));
        size_t a = aligns[i] ? aligns[i] : 256;
        ASSERT_MSG((uintptr_t)ptrs[i] % a == 0, "piece %zu at %p not aligned to %zu", i, ptrs[i], a);
        memset(ptrs[i], (int)i + 1, 1000 + i); /* every byte is ours */
    }
    for (size_t i = 0; i < 6; i++) /* no piece was overwritten by another */
        for (size_t k = 0; k < 1000 + i; k++)
            ASSERT_EQ_INT(((unsigned char *)ptrs[i])[k], i + 1);
    ferry_pinned_pool_stats st;
    ferry_pinned_pool_stats_get(p, &st);
    ASSERT(!st.pinned);
    ASSERT_EQ_SIZE(st.live_pieces, 6);
    ASSERT_EQ_SIZE(st.live_bytes, 1000 + 1001 + 1002 + 1003 + 1004 + 1005);
    ASSERT_EQ_SIZE(st.blocks, 1);
    ASSERT_EQ_SIZE(st.system_allocs, 1);
    ASSERT_EQ_SIZE(st.reserved_bytes, 1 << 20);
    for (size_t i = 0; i < 6; i++)
        ferry_pinned_pool_free(p, ptrs[i]);
    ferry_pinned_pool_stats_get(p, &st);
    ASSERT_EQ_SIZE(st.live_pieces, 0);
    ASSERT_EQ_SIZE(st.live_bytes, 0);
    ferry_pinned_pool_destroy(p);
}

TEST(pool_reuses_without_system_allocations)
{
    ferry_pinned_pool *p;
    ASSERT_OK(ferry_pinned_pool_create(4 << 20, true, &p));
    void *a[4];
    for (int i = 0; i < 4; i++)
        ASSERT_OK(ferry_pinned_pool_alloc(p, 512 << 10, 0, &a[i]));
    for (int i = 0; i < 4; i++)
        ferry_pinned_pool_free(p, a[i]);
    ferry_pinned_pool_stats before;
    ferry_pinned_pool_stats_get(p, &before);
    int64_t host_allocs = ferry_debug_alloc_count();
    for (int round = 0; round < 100; round++) {
        for (int i = 0; i < 4; i++)
            ASSERT_OK(ferry_pinned_pool_alloc(p, 512 << 10, 0, &a[i]));
        for (int i = 3; i >= 0; i--)
            ferry_pinned_pool_free(p, a[i]);
    }
    ferry_pinned_pool_stats after;
    ferry_pinned_pool_stats_get(p, &after);
    ASSERT_EQ_SIZE(after.system_allocs, before.system_allocs);
    ASSERT_EQ_SIZE(after.blocks, 1);
    /* not even bookkeeping allocations in steady state */
    ASSERT_EQ_INT(ferry_debug_alloc_count(), host_allocs);
    ferry_pinned_pool_destroy(p);
}

TEST(pool_freed_pieces_coalesce)
{
    ferry_pinned_pool *p;
    ASSERT_OK(ferry_pinned_pool_create(1 << 20, false, &p));
    void *a, *b, *c, *big;
    ASSERT_OK(ferry_pinned_pool_alloc(p, 300 << 10, 0, &a));
    ASSERT_OK(ferry_pinned_pool_alloc(p, 300 << 10, 0, &b));
    ASSERT_OK(ferry_pinned_pool_alloc(p, 300 << 10, 0, &c));
    ferry_pinned_pool_free(p, b);
    ferry_pinned_pool_free(p, a);
    ferry_pinned_pool_free(p, c);
    /* only fits if all three (and the tail) merged back into one segment */
    ASSERT_OK(ferry_pinned_pool_alloc(p, 1 << 20, 0, &big));
    ferry_pinned_pool_stats st;
    ferry_pinned_pool_stats_get(p, &st);
    ASSERT_EQ_SIZE(st.blocks, 1);
    ferry_pinned_pool_free(p, big);
    ferry_pinned_pool_destroy(p);
}

TEST(pool_oversized_piece_gets_its_own_block)
{
    ferry_pinned_pool *p;
    ASSERT_OK(ferry_pinned_pool_create(64 << 10, false, &p));
    void *small, *huge;
    ASSERT_OK(ferry_pinned_pool_alloc(p, 1024, 0, &small));
    ASSERT_OK(ferry_pinned_pool_alloc(p, 1 << 20, 0, &huge));
    memset(huge, 0xab, 1 << 20);
    ferry_pinned_pool_stats st;
    ferry_pinned_pool_stats_get(p, &st);
    ASSERT_EQ_SIZE(st.blocks, 2);
    ASSERT(st.reserved_bytes >= (64 << 10) + (1 << 20));
    ferry_pinned_pool_free(p, huge);
    ASSERT_OK(ferry_pinned_pool_alloc(p, 1 << 20, 0, &huge)); /* reused */
    ferry_pinned_pool_stats_get(p, &st);
    ASSERT_EQ_SIZE(st.system_allocs, 2);
    ferry_pinned_pool_destroy(p); /* frees live pieces too */
}

TEST(pool_bad_arguments)
{
    ferry_pinned_pool *p;
    void *x = NULL;
    ASSERT_STATUS(ferry_pinned_pool_create(0, false, NULL), FERRY_ERR_INVALID_ARG);
    ASSERT_OK(ferry_pinned_pool_create(0, false, &p));
    ASSERT_STATUS(ferry_pinned_pool_alloc(p, 0, 0, &x), FERRY_ERR_INVALID_ARG);
    ASSERT_STATUS(ferry_pinned_pool_alloc(p, 16, 3, &x), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "power of two");
    ASSERT_STATUS(ferry_pinned_pool_alloc(NULL, 16, 0, &x), FERRY_ERR_INVALID_ARG);
    ASSERT_STATUS(ferry_pinned_pool_alloc(p, SIZE_MAX - 8, 0, &x), FERRY_ERR_INVALID_ARG);
    ferry_pinned_pool_free(p, NULL);
    int on_stack;
    ferry_pinned_pool_free(p, &on_stack); /* not ours: a warning, no crash */
    ferry_pinned_pool_free(NULL, &on_stack);
    ferry_pinned_pool_destroy(p);
    ferry_pinned_pool_destroy(NULL);
    ferry_pinned_pool_stats st;
    ASSERT_STATUS(ferry_pinned_pool_stats_get(NULL, &st), FERRY_ERR_INVALID_ARG);
    ASSERT_EQ_SIZE(st.blocks, 0);
}

TEST(pool_fails_cleanly_when_allocation_fails)
{
    ferry_pinned_pool *p;
    ASSERT_OK(ferry_pinned_pool_create(1 << 16, false, &p));
    void *x;
    for (int k = 1; k <= 3; k++) {
        ferry_debug_fail_alloc_after(k);
        ferry_status st = ferry_pinned_pool_alloc(p, 100, 0, &x);
        ferry_debug_fail_alloc_after(0);
        if (st == FERRY_OK)
            ferry_pinned_pool_free(p, x);
        else
            ASSERT_STATUS(st, FERRY_ERR_NO_MEMORY);
    }
    ASSERT_OK(ferry_pinned_pool_alloc(p, 100, 0, &x));
    ferry_pinned_pool_free(p, x);
    ferry_pinned_pool_destroy(p);
}

#define THREADS 8
#define ROUNDS 2000

typedef struct {
    ferry_pinned_pool *p;
    unsigned seed;
    int bad;
} worker_arg;

static void *worker(void *v)
{
    worker_arg *w = v;
    void *held[8] = {0};
    size_t sizes[8] = {0};
    for (int r = 0; r < ROUNDS; r++) {
        int slot = (int)(rand_r(&w->seed) % 8);
        if (held[slot]) {
            for (size_t k = 0; k < sizes[slot]; k++)
                if (((unsigned char *)held[slot])[k] != (unsigned char)(slot + 1))
                    w->bad = 1;
            ferry_pinned_pool_free(w->p, held[slot]);
            held[slot] = NULL;
        } else {
            sizes[slot] = 1 + rand_r(&w->seed) % 20000;
            if (ferry_pinned_pool_alloc(w->p, sizes[slot], 64, &held[slot]) != FERRY_OK) {
                w->bad = 1;
                held[slot] = NULL;
                continue;
            }
            memset(held[slot], slot + 1, sizes[slot]);
        }
    }
    for (int i = 0; i < 8; i++)
        ferry_pinned_pool_free(w->p, held[i]);
    return NULL;
}

TEST(pool_many_threads)
{
    ferry_pinned_pool *p;
    ASSERT_OK(ferry_pinned_pool_create(1 << 20, true, &p));
    pthread_t th[THREADS];
    worker_arg args[THREADS];
    for (int i = 0; i < THREADS; i++) {
        args[i] = (worker_arg){p, (unsigned)i * 7919u + 1, 0};
        ASSERT(pthread_create(&th[i], NULL, worker, &args[i]) == 0);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < THREADS; i++)
        ASSERT_MSG(!args[i].bad, "thread %d saw a bad piece", i);
    ferry_pinned_pool_stats st;
    ferry_pinned_pool_stats_get(p, &st);
    ASSERT_EQ_SIZE(st.live_pieces, 0);
    ASSERT_EQ_SIZE(st.live_bytes, 0);
    ferry_pinned_pool_destroy(p);
}

TEST(pool_is_really_pinned_on_gpu)
{
    ft_require_cuda();
    ferry_pinned_pool *p;
    ASSERT_OK(ferry_pinned_pool_create(8 << 20, true, &p));
    void *x, *dev;
    ASSERT_OK(ferry_pinned_pool_alloc(p, 4 << 20, 0, &x));
    ferry_pinned_pool_stats st;
    ferry_pinned_pool_stats_get(p, &st);
    ASSERT(st.pinned);
    /* an async copy from the piece works and round-trips */
    memset(x, 0x5a, 4 << 20);
    ferry_stream *s;
    ASSERT_OK(ferry_stream_create(ferry_cuda(0), &s));
    ASSERT_OK(ferry_device_alloc(ferry_cuda(0), 4 << 20, s, &dev));
    ASSERT_OK(ferry_memcpy(dev, x, 4 << 20, FERRY_COPY_H2D, ferry_cuda(0), s));
    /* The copy from pinned memory runs later, on the stream: the host must not
     * write x until the stream has passed it. */
    ASSERT_OK(ferry_stream_synchronize(s));
    memset(x, 0, 4 << 20);
    ASSERT_OK(ferry_memcpy(x, dev, 4 << 20, FERRY_COPY_D2H, ferry_cuda(0), s));
    ASSERT_OK(ferry_stream_synchronize(s));
    ASSERT_EQ_INT(((unsigned char *)x)[12345], 0x5a);
    ferry_device_free(ferry_cuda(0), dev);
    ferry_stream_destroy(s);
    ferry_pinned_pool_free(p, x);
    ferry_pinned_pool_destroy(p);
    /* want_pinned false gives pageable memory even with a GPU */
    ASSERT_OK(ferry_pinned_pool_create(1 << 20, false, &p));
    ASSERT_OK(ferry_pinned_pool_alloc(p, 100, 0, &x));
    ferry_pinned_pool_stats_get(p, &st);
    ASSERT(!st.pinned);
    ferry_pinned_pool_destroy(p);
}

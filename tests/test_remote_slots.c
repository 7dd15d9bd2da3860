/* Remote streaming's fetch threads (src/dataset/remote/remote_stream.c):
 * each of the 8 stream slots starts one thread at its first stream and keeps
 * it for every later shard, instead of a thread started and joined for every
 * shard's stream (a pthread_create under the streams' lock at each shard's
 * first read, up to a millisecond of every reader's time on a busy 2-core
 * machine). More shards than slots, over several epochs and worker counts:
 * the batches stay those of the same shards on disk, and the threads stay 8.
 * A shard's stream starts at the first read of the shard two before it in
 * the plan, and the next epoch's head stream at the last but one shard's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/error.h" /* ferry_now */
#include "dataset/core/caps.h"
#include "dataset/remote/remote.h"
#include "harness.h"
#include "harness_http.h"

enum { NSH = 12, PER = 9, IW = 7, IH = 5, SLOTS = 8 };

static char paths[NSH][600];

/* The shards in ft_tmp("slots/www"), made once. */
static const char *www(void)
{
    static bool made;
    ft_require_curl();
    if (!made)
        ft_indexed_png_shards("slots/www", NSH, PER, IW, IH, paths);
    made = true;
    return ft_tmp("slots/www");
}

static ferry_dataset *open_local(void)
{
    www();
    return ft_local_shards_dataset(paths, NSH);
}

static uint64_t epoch(ferry_loader *l, uint64_t e)
{
    ASSERT_OK(ferry_loader_reset(l, e));
    return ft_epoch_digest(l);
}

static ferry_remote_stats stats_of(const ferry_dataset *ds)
{
    ferry_remote_stats s;
    ASSERT(ferry__dataset_remote_stats(ds, &s));
    return s;
}

/* 12 shards, 8 slots, 4 epochs, 2 workers: a stream for every shard in every
 * epoch, all on the 8 slots' threads; the batches those of disk. */
TEST(stream_slots_keep_their_threads)
{
    ft_http *srv = ft_http_start(www(), NULL);
    ferry_dataset *local = open_local(), *remote = ft_http_shards_dataset(srv, NSH, "slots/cache-keep");
    ferry_loader *a = ft_streaming_loader(local, 2, 5), *b = ft_streaming_loader(remote, 2, 5);
    ferry_remote_stats s0 = stats_of(remote);
    for (uint64_t e = 0; e < 4; e++) {
        uint64_t x = epoch(a, e), y = epoch(b, e);
        ASSERT_MSG(x == y, "epoch %llu: %llx from the URLs, %llx from disk",
                   (unsigned long long)e, (unsigned long long)y, (unsigned long long)x);
    }
    ferry_remote_stats s = stats_of(remote);
    ferry__remote_stats_since(&s, &s0);
    ASSERT_MSG(s.streams >= 3 * NSH, "%llu streams for %d shards in 4 epochs",
               (unsigned long long)s.streams, NSH);
    ASSERT_MSG(s.stream_threads >= 1 && s.stream_threads <= SLOTS,
               "%llu fetch threads started for %llu streams (at most one per slot: %d)",
               (unsigned long long)s.stream_threads, (unsigned long long)s.streams, SLOTS);
    ASSERT_EQ_INT(s.range_reads, 0);
    ferry_loader_destroy(a);
    ferry_loader_destroy(b);
    ferry_dataset_release(remote);
    ferry_dataset_release(local);
    ft_http_stop(srv);
}

/* The same epochs with 1 and 3 workers, from the URLs, give the batches of
 * 2 workers from disk: a stream's thread serving shard after shard changes
 * no byte and no order. */
TEST(stream_slots_same_batches_for_any_worker_count)
{
    ft_http *srv = ft_http_start(www(), NULL);
    ferry_dataset *local = open_local();
    ferry_loader *ref = ft_streaming_loader(local, 2, 5);
    uint64_t want[3];
    for (uint64_t e = 0; e < 3; e++)
        want[e] = epoch(ref, e);
    ferry_loader_destroy(ref);
    static const size_t workers[] = {1, 3};
    for (size_t w = 0; w < 2; w++) {
        char cache[64];
        snprintf(cache, sizeof cache, "slots/cache-w%zu", workers[w]);
        ferry_dataset *remote = ft_http_shards_dataset(srv, NSH, cache);
        ferry_loader *l = ft_streaming_loader(remote, workers[w], 5);
        for (uint64_t e = 0; e < 3; e++) {
            uint64_t got = epoch(l, e);
            ASSERT_MSG(got == want[e], "%zu workers, epoch %llu: %llx, disk %llx", workers[w],
                       (unsigned long long)e, (unsigned long long)got,
                       (unsigned long long)want[e]);
        }
        ferry_remote_stats s = stats_of(remote);
        ASSERT_MSG(s.stream_threads <= SLOTS, "%zu workers: %llu fetch threads", workers[w],
                   (unsigned long long)s.stream_threads);
        ferry_loader_destroy(l);
        ferry_dataset_release(remote);
    }
    ferry_dataset_release(local);
    ft_http_stop(srv);
}

/* How many GETs of shard k's body (not its index) the server has had, once
 * that is at least want or 5 s have passed: the streams fetch in threads. */
static unsigned gets_of(ft_http *srv, size_t k, unsigned want)
{
    char needle[64];
    snprintf(needle, sizeof needle, "GET /sh%02zu.tar HTTP", k);
    double until = ferry_now() + 5;
    unsigned n;
    while ((n = ft_http_count(srv, needle)) < want && ferry_now() < until) {
        struct timespec ts = {0, 5000000};
        nanosleep(&ts, NULL);
    }
    return n;
}

/* The plan reads the shards in order: the first read of shard k starts the
 * streams of k + 1 and k + 2 (k + 1's already started, at k - 1's), and the
 * first read of the last but one starts the next epoch's head stream. */
TEST(stream_starts_two_shards_ahead_and_the_head_one_shard_early)
{
    ft_http *srv = ft_http_start(www(), NULL);
    ferry_dataset *remote = ft_http_shards_dataset(srv, NSH, "slots/cache-ahead");
    size_t idx[NSH * PER], n = ferry_dataset_sample_bytes(remote);
    for (size_t i = 0; i < NSH * PER; i++)
        idx[i] = i;
    uint8_t *buf = malloc(n);
    ASSERT(buf != NULL);
    enum { HEAD = 5 };
    ferry__dataset_set_readahead(remote, (size_t)4 << 20);
    ASSERT_OK(ferry__dataset_plan_reads(remote, idx, NSH * PER, HEAD * PER));
    for (size_t k = 0; k + 1 < NSH; k++) {
        int64_t label;
        ASSERT_OK(ferry_dataset_get(remote, k * PER, buf, n, NULL, &label));
        ASSERT_EQ_INT(label, (int64_t)((k * PER) % 4));
        ASSERT_MSG(gets_of(srv, k + 1, 1) == 1, "shard %zu's first read: shard %zu requested "
                   "%u times", k, k + 1, gets_of(srv, k + 1, 1));
        if (k + 2 < NSH)
            ASSERT_MSG(gets_of(srv, k + 2, 1) == 1, "shard %zu's first read did not start shard "
                       "%zu's stream", k, k + 2);
        /* Shard HEAD: its stream this epoch from shard HEAD - 2's first
         * read on, the head stream from the last but one's. */
        unsigned want = (k + 2 >= HEAD) + (k + 2 >= NSH), head = gets_of(srv, HEAD, want);
        ASSERT_MSG(head == want, "shard %zu's first read: the head shard requested %u times, "
                   "not %u", k, head, want);
    }
    ferry__dataset_set_readahead(remote, 0);
    free(buf);
    ferry_dataset_release(remote);
    ft_http_stop(srv);
}

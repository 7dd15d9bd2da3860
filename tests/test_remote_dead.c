/* Shards by URL whose server dies mid-epoch (tests/harness_http.h's die_after
 * and ft_http_die: its port refuses every connection from then on, a body in
 * flight is cut) or freezes (freeze_after: connections accepted, never
 * answered), in random and streaming order, under FAIL and SKIP: every
 * combination ends in bounded time. FAIL: an error naming the URL. SKIP: the
 * epoch ends; each sample that could not be read is counted skipped once and
 * its place is filled by a sample that was read (the skip policy), or, when
 * nothing readable is left, next() fails saying so; never a wait without end.
 * Each test runs under a watchdog (alarm) that fails the program if the
 * bug returns, instead of hanging the test run. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/error.h" /* ferry_now */
#include "harness.h"
#include "harness_http.h"

/* More shards than a dataset keeps streams (remote_stream.c's NSTREAMS, 8),
 * so that some shards' streams are replaced in the epoch. */
enum { NSH = 12, PER = 40, IW = 8, IH = 6 };
#define WATCHDOG_S 120u  /* the whole test, hang or not */
#define BOUND_S 30.0     /* what each epoch must take at most */

/* ---- the watchdog ---- */

static char watched[128];

static void on_alarm(int sig)
{
    (void)sig;
    static const char m[] = "\n  FAIL (watchdog): the test did not end: a hang in ";
    ssize_t w = write(2, m, sizeof m - 1);
    w = write(2, watched, strlen(watched));
    w = write(2, "\n", 1);
    (void)w;
    _exit(1);
}

static void watchdog(const char *what)
{
    snprintf(watched, sizeof watched, "%s", what);
    signal(SIGALRM, on_alarm);
    alarm(WATCHDOG_S);
}

/* ---- the shards ---- */

static void add_sample(ft_tar *t, size_t i)
{
    uint8_t px[IW * IH];
    for (size_t j = 0; j < sizeof px; j++)
        px[j] = (uint8_t)(i * 29 + j * 5 + (j * j) % 11);
    char key[32];
    snprintf(key, sizeof key, "k%04zu", i);
    ft_tar_png_sample(t, key, px, IW, IH, i % 7, "dead/tmp.png");
}

/* NSH plain shards, each with its index beside it (SHARD.ferry-index), so
 * that create reads only the indexes: the shards' bytes come in the epoch. */
static const char *www(void)
{
    static bool made;
    static char dir[600];
    ft_require_curl();
    snprintf(dir, sizeof dir, "%s", ft_tmp("dead/www"));
    if (made)
        return dir;
    static char keep[NSH][700];
    const char *p[NSH];
    for (size_t s = 0; s < NSH; s++) {
        ft_tar t = {0};
        for (size_t k = 0; k < PER; k++)
            add_sample(&t, s * PER + k);
        ft_tar_end(&t);
        snprintf(keep[s], sizeof keep[s], "%s/s%02zu.tar", dir, s);
        ft_write_file(keep[s], t.d, t.n);
        free(t.d);
        p[s] = keep[s];
    }
    ferry_image_config c = ferry_image_config_default();
    c.shard_index_cache = true;
    ferry_dataset *ds;
    ASSERT_OK(ferry_dataset_shards(p, NSH, &c, &ds));
    ferry_dataset_release(ds);
    made = true;
    return dir;
}

/* A dataset over the shards served at base; budget 0: the default (every
 * shard fits the cache), else a budget below a shard (random reads by Range). */
static ferry_status open_urls(const char *base, ferry_dataset **ds, size_t retries, size_t budget)
{
    static char urls[NSH][256], cache[256];
    static unsigned n;
    const char *p[NSH];
    for (size_t s = 0; s < NSH; s++) {
        snprintf(urls[s], sizeof urls[s], "%s/s%02zu.tar", base, s);
        p[s] = urls[s];
    }
    char rel[64];
    snprintf(rel, sizeof rel, "dead/cache-%u", n++);
    snprintf(cache, sizeof cache, "%s", ft_tmp(rel));
    ferry_image_config c = ferry_image_config_default();
    c.remote_cache_dir = cache;
    c.remote_cache_bytes = budget;
    c.remote_timeout_s = 1;
    c.remote_retries = retries;
    return ferry_dataset_shards(p, NSH, &c, ds);
}

static ferry_loader_config loader_cfg(ferry_dataset *ds, bool stream, ferry_on_error on_error)
{
    ferry_loader_config c = ferry_loader_config_default();
    c.dataset = ds;
    c.batch_size = 5;
    c.shuffle = true;
    c.seed = 3;
    c.num_workers = 2;
    c.device = ferry_cpu();
    c.pin_memory = FERRY_PIN_MEMORY_OFF;
    c.out_dtype = FERRY_DTYPE_U8;
    c.on_error = on_error;
    c.stream_shuffle_buffer = stream ? 8 : 0;
    return c;
}

typedef struct outcome {
    ferry_status st;        /* FERRY_OK: the epoch ended */
    char err[1024];
    size_t delivered;       /* samples in the batches next() gave */
    size_t replaced;        /* of them, places that got another sample than their own */
    uint64_t skipped;
    char first_skipped[256];
    double took;
} outcome;

/* Each place's sample in epoch 0 of the shards on disk: what each place of
 * the remote epoch holds when nothing failed. */
static size_t *epoch_order(ferry_dataset *local, bool stream)
{
    ferry_loader_config c = loader_cfg(local, stream, FERRY_ON_ERROR_FAIL);
    ferry_loader *l;
    ASSERT_OK(ferry_loader_create(&c, &l));
    size_t *order = malloc(NSH * PER * sizeof *order), n = 0;
    ferry_batch b;
    ferry_status st;
    while ((st = ferry_loader_next(l, NULL, &b)) == FERRY_OK)
        for (size_t j = 0; j < b.size; j++) {
            ASSERT(n < NSH * PER);
            order[n++] = b.indices[j];
        }
    ASSERT_STATUS(st, FERRY_END);
    ASSERT_EQ_SIZE(n, NSH * PER);
    ferry_loader_destroy(l);
    return order;
}

/* One epoch over URLs from a server that dies at its die_after-th request
 * after create (freeze: stops answering instead, its port still open; cut:
 * every body is cut after a few bytes, so that no shard comes whole); every
 * delivered sample checked against the disk's, and each place against the
 * sample it holds when nothing fails. */
static outcome server_epoch(bool stream, ferry_on_error on_error, unsigned die_after,
                            size_t retries, size_t budget, bool freeze, bool cut)
{
    ft_http *srv = ft_http_start(www(), NULL);
    ferry_dataset *remote, *local;
    char lp[NSH][700];
    const char *l[NSH];
    for (size_t s = 0; s < NSH; s++) {
        snprintf(lp[s], sizeof lp[s], "%s/s%02zu.tar", www(), s);
        l[s] = lp[s];
    }
    ASSERT_OK(ferry_dataset_shards(l, NSH, NULL, &local));
    size_t *order = epoch_order(local, stream);
    ASSERT_OK(open_urls(ft_http_base(srv), &remote, retries, budget));
    if (freeze)
        ft_http_set_faults(srv, &(ft_http_faults){.freeze_after = die_after});
    else
        ft_http_set_faults(srv, &(ft_http_faults){.die_after = die_after,
                                                   .drop_every = cut, .drop_after = 512});
    ferry_loader_config c = loader_cfg(remote, stream, on_error);
    ferry_loader *ld;
    outcome o = {0};
    double t0 = ferry_now();
    ASSERT_OK(ferry_loader_create(&c, &ld));
    size_t sb = ferry_dataset_sample_bytes(local);
    uint8_t *want = malloc(sb);
    ferry_batch b;
    while ((o.st = ferry_loader_next(ld, NULL, &b)) == FERRY_OK)
        for (size_t j = 0; j < b.size; j++, o.delivered++) {
            int64_t lab;
            ASSERT_OK(ferry_dataset_get(local, b.indices[j], want, sb, NULL, &lab));
            ASSERT_MEM_EQ((const uint8_t *)ferry_tensor_data(b.images) + j * sb, want, sb);
            ASSERT(o.delivered < NSH * PER);
            o.replaced += b.indices[j] != order[o.delivered];
        }
    o.took = ferry_now() - t0;
    snprintf(o.err, sizeof o.err, "%s", o.st == FERRY_END ? "" : ferry_last_error());
    if (o.st == FERRY_END)
        o.st = FERRY_OK;
    ferry_loader_stats ls;
    ASSERT_OK(ferry_loader_stats_get(ld, &ls));
    o.skipped = ls.skipped;
    if (ls.num_skipped_names)
        snprintf(o.first_skipped, sizeof o.first_skipped, "%s", ls.skipped_names[0]);
    free(want);
    free(order);
    ASSERT_MSG(freeze ? ft_http_requests(srv) > die_after : ft_http_dead(srv),
               "the server never %s (%u requests)", freeze ? "froze" : "died",
               ft_http_requests(srv));
    ferry_loader_destroy(ld);
    ferry_dataset_release(remote);
    ferry_dataset_release(local);
    ft_http_stop(srv);
    printf("  %s after %.1f s: %zu delivered, %zu replaced, %llu skipped%s%s\n",
           o.st == FERRY_OK ? "ended" : "failed", o.took, o.delivered, o.replaced,
           (unsigned long long)o.skipped, o.err[0] ? ": " : "", o.err);
    return o;
}

static outcome dead_epoch(bool stream, ferry_on_error on_error, unsigned die_after, size_t retries,
                          size_t budget)
{
    return server_epoch(stream, on_error, die_after, retries, budget, false, false);
}

/* Budgets: the default, where each shard is fetched whole into the cache,
 * and one below a shard's size, where each random read is a Range request. */
#define WHOLE 0
#define BY_RANGE 4096

/* FAIL: the epoch stops with an error naming a shard's URL, in bounded time. */
static void fails_with_url(const char *what, bool stream, size_t budget)
{
    watchdog(what);
    outcome o = dead_epoch(stream, FERRY_ON_ERROR_FAIL, 3, 0, budget);
    ASSERT_MSG(o.st != FERRY_OK, "the epoch ended (%zu samples) though the server died",
               o.delivered);
    ASSERT_STR_CONTAINS(o.err, "http://127.0.0.1:");
    ASSERT_STR_CONTAINS(o.err, ".tar");
    ASSERT_MSG(o.took < BOUND_S, "the error took %.1f s", o.took);
    alarm(0);
}

TEST(dead_server_random_fail_names_the_url) { fails_with_url("random, FAIL", false, WHOLE); }
TEST(dead_server_random_by_range_fail_names_the_url)
{
    fails_with_url("random by Range, FAIL", false, BY_RANGE);
}
TEST(dead_server_streaming_fail_names_the_url) { fails_with_url("streaming, FAIL", true, WHOLE); }

/* SKIP: the epoch ends in bounded time with every place filled by a sample
 * equal to the disk's; each place whose own sample could not be read is
 * counted skipped exactly once (skipped == places that got another sample),
 * and the first skipped sample is named by its shard's URL. die_after leaves
 * some shards read before the server dies, whose samples replace the rest. */
static void skip_ends(const char *what, bool stream, size_t budget, unsigned die_after,
                      size_t retries)
{
    watchdog(what);
    outcome o = dead_epoch(stream, FERRY_ON_ERROR_SKIP, die_after, retries, budget);
    ASSERT_MSG(o.took < BOUND_S, "%s: the epoch took %.1f s", what, o.took);
    ASSERT_MSG(o.st == FERRY_OK, "%s: %s", what, o.err);
    ASSERT_EQ_SIZE(o.delivered, NSH * PER);
    ASSERT_MSG(o.skipped > 0 && o.skipped < NSH * PER, "%s: %llu skipped", what,
               (unsigned long long)o.skipped);
    ASSERT_EQ_INT(o.skipped, o.replaced);
    ASSERT_STR_CONTAINS(o.first_skipped, "http://127.0.0.1:");
    alarm(0);
}

/* The default retries (5, with backoff): the case that took N times the
 * retries before (a skip's replacement candidates each a Range request of
 * their own to a dead server). */
TEST(dead_server_streaming_skip_ends) { skip_ends("streaming, SKIP", true, WHOLE, 9, 0); }
/* The options: remote_timeout_s = 1, remote_retries = 1. */
TEST(dead_server_streaming_skip_ends_one_retry) { skip_ends("streaming, SKIP, 1 retry", true, WHOLE, 6, 1); }
TEST(dead_server_random_skip_ends) { skip_ends("random, SKIP", false, WHOLE, 6, 0); }
/* Nothing readable left: the server dies before any shard came whole (the
 * warm-up's stream of the epoch's first shard, its first request, is cut
 * short, and the server dies at the next), or random reads by Range keep
 * nothing. SKIP then has nothing to replace the failed samples with, and
 * next() says so, naming a sample and its URL, in bounded time (each read
 * paid the retries before). */
static void skip_has_nothing_left(const char *what, bool stream, size_t budget, unsigned die_after)
{
    watchdog(what);
    outcome o = server_epoch(stream, FERRY_ON_ERROR_SKIP, die_after, 0, budget, false, stream);
    ASSERT_MSG(o.took < BOUND_S, "%s: the epoch took %.1f s", what, o.took);
    ASSERT_MSG(o.st != FERRY_OK, "%s: the epoch ended (%zu samples) with nothing readable", what,
               o.delivered);
    ASSERT_STR_CONTAINS(o.err, "nothing to replace it with");
    ASSERT_STR_CONTAINS(o.err, "http://127.0.0.1:");
    alarm(0);
}

TEST(dead_server_streaming_skip_before_any_shard_has_nothing_left)
{
    skip_has_nothing_left("streaming, SKIP, nothing read", true, WHOLE, 1);
}
TEST(dead_server_random_by_range_skip_has_nothing_left)
{
    skip_has_nothing_left("random by Range, SKIP", false, BY_RANGE, 40);
}

/* A server that stops answering with its port open (a stopped process, a
 * host gone quiet): each request waits out the timeout instead of being
 * refused. The options, remote_timeout_s = 1 and remote_retries = 1:
 * FAIL names the URL, SKIP ends with replacements, both in bounded time. */
TEST(frozen_server_streaming_fail_names_the_url)
{
    watchdog("frozen, streaming, FAIL");
    outcome o = server_epoch(true, FERRY_ON_ERROR_FAIL, 9, 1, WHOLE, true, false);
    ASSERT_MSG(o.st != FERRY_OK, "the epoch ended (%zu samples) though the server froze",
               o.delivered);
    ASSERT_STR_CONTAINS(o.err, "http://127.0.0.1:");
    ASSERT_MSG(o.took < BOUND_S, "the error took %.1f s", o.took);
    alarm(0);
}

static void frozen_skip_ends(const char *what, bool stream)
{
    watchdog(what);
    outcome o = server_epoch(stream, FERRY_ON_ERROR_SKIP, 9, 1, WHOLE, true, false);
    ASSERT_MSG(o.took < BOUND_S, "%s: the epoch took %.1f s", what, o.took);
    ASSERT_MSG(o.st == FERRY_OK, "%s: %s", what, o.err);
    ASSERT_EQ_SIZE(o.delivered, NSH * PER);
    ASSERT_MSG(o.skipped > 0, "%s: nothing skipped", what);
    ASSERT_EQ_INT(o.skipped, o.replaced);
    alarm(0);
}

TEST(frozen_server_streaming_skip_ends) { frozen_skip_ends("frozen, streaming, SKIP", true); }
TEST(frozen_server_random_skip_ends) { frozen_skip_ends("frozen, random, SKIP", false); }

/* Shards by URL, against the tests' own HTTP server on 127.0.0.1 (and, when
 * scripts/remote-test.sh sets FERRY_TEST_URL / FERRY_TEST_S3_URL, nginx and an
 * S3 server): samples and loader digests equal to the same shards read
 * locally (plain and gzip, random and streaming order, 2 workers); the cache
 * stays in its budget, never deletes what it did not write, reuses whole
 * files and never a partial one; faults (error bursts, Retry-After, dropped
 * connections, stalls) are retried to the same digest; lies (Content-Length,
 * a changed object, 404) are errors naming the URL, in bounded time; a read
 * across the byte where a stream failed is an error, never partial; every
 * rank gets the same batch count, streaming ranks fetch only their own
 * shards, more shards than streams still fetch each shard once an epoch,
 * and a loader state resumes mid-epoch over URLs bit for bit. */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/error.h" /* ferry_now */
#include "common/thread.h"  /* ferry_debug_fail_thread_after */
#include "dataset/remote/remote.h"
#include "harness.h"
#include "harness_http.h"

enum { NSHARDS = 4, PER = 12, IW = 8, IH = 6 };
static const char *names[NSHARDS] = {"a.tar", "b.tar", "c.tar.gz", "d.tar"};

/* Sample i: a small gray PNG made from i, labelled i % 5. */
static void add_sample(ft_tar *t, size_t i)
{
    uint8_t px[IW * IH];
    for (size_t j = 0; j < sizeof px; j++)
        px[j] = (uint8_t)(i * 31 + j * 7 + (j * j) % 13);
    char key[32];
    snprintf(key, sizeof key, "k%03zu", i);
    ft_tar_png_sample(t, key, px, IW, IH, i % 5, "remote/tmp.png");
}

static void need_curl(void)
{
#ifndef FERRY_HAVE_CURL
    SKIP("built without libcurl (CURL=0): build_without_curl_refuses_urls tests that");
#endif
}

/* The shards in ft_tmp("remote/www"), made once. */
static const char *www(void)
{
    static bool made;
    need_curl();
    if (!made) {
        for (size_t s = 0; s < NSHARDS; s++) {
            ft_tar t = {0};
            for (size_t k = 0; k < PER; k++)
                add_sample(&t, s * PER + k);
            ft_tar_end(&t);
            char rel[64];
            snprintf(rel, sizeof rel, "remote/www/%s", names[s]);
            if (strstr(names[s], ".gz"))
                ft_tar_save_gz(&t, rel, 1);
            else
                ft_tar_save(&t, rel);
        }
        made = true;
    }
    return ft_tmp("remote/www");
}

static size_t shard_bytes(size_t s)
{
    char rel[64];
    snprintf(rel, sizeof rel, "remote/www/%s", names[s]);
    size_t n;
    free(ft_read_file(ft_tmp(rel), &n));
    return n;
}

static ferry_status open_urls(const char *base, const ferry_image_config *cfg, ferry_dataset **ds)
{
    static char urls[NSHARDS][256];
    const char *p[NSHARDS];
    for (size_t s = 0; s < NSHARDS; s++) {
        snprintf(urls[s], sizeof urls[s], "%s/%s", base, names[s]);
        p[s] = urls[s];
    }
    return ferry_dataset_shards(p, NSHARDS, cfg, ds);
}

static ferry_dataset *open_local(void)
{
    const char *dir = www();
    ferry_dataset *ds;
    ASSERT_OK(ferry_dataset_shards(&dir, 1, NULL, &ds));
    return ds;
}

/* A config with a fresh cache folder of its own and short timeouts. */
static ferry_image_config remote_cfg(const char *cache, size_t budget)
{
    static unsigned n;
    static char dir[8][256];
    char *d = dir[n % 8], rel[128];
    snprintf(rel, sizeof rel, "%s-%u", cache, n++);
    snprintf(d, sizeof dir[0], "%s", ft_tmp(rel));
    ft_write_file(ft_tmp("remote/.made"), "", 0); /* the parent folder */
    ferry_image_config c = ferry_image_config_default();
    c.remote_cache_dir = d;
    c.remote_cache_bytes = budget;
    c.remote_timeout_s = 1;
    c.remote_retries = 6;
    return c;
}

/* Every sample of a and b equal, by ferry_dataset_get. */
static void assert_same_samples(ferry_dataset *a, ferry_dataset *b)
{
    ASSERT_EQ_SIZE(ferry_dataset_len(a), ferry_dataset_len(b));
    size_t n = ferry_dataset_sample_bytes(a);
    ASSERT_EQ_SIZE(n, ferry_dataset_sample_bytes(b));
    uint8_t *x = malloc(n), *y = malloc(n);
    for (size_t i = 0; i < ferry_dataset_len(a); i++) {
        int64_t la, lb;
        ASSERT_OK(ferry_dataset_get(a, i, x, n, NULL, &la));
        ASSERT_OK(ferry_dataset_get(b, i, y, n, NULL, &lb));
        ASSERT_MEM_EQ(x, y, n);
        ASSERT_EQ_INT(la, lb);
    }
    free(x);
    free(y);
}

/* One epoch's digest: random order, or streaming with a shuffle buffer. */
/* Shuffled with seed, 2 workers, batch 5, u8 on the CPU; buffer > 0 is the
 * streaming order with that shuffle buffer. */
static ferry_loader_config shuffled_cfg(ferry_dataset *ds, uint64_t seed, size_t buffer)
{
    ferry_loader_config c = ferry_loader_config_default();
    c.dataset = ds;
    c.batch_size = 5;
    c.shuffle = true;
    c.seed = seed;
    c.num_workers = 2;
    c.device = ferry_cpu();
    c.pin_memory = FERRY_PIN_MEMORY_OFF;
    c.out_dtype = FERRY_DTYPE_U8;
    c.stream_shuffle_buffer = buffer;
    return c;
}

/* shuffled_cfg as rank `rank` of `world` (the distributed sampler; world
 * 1: the plain one). */
static ferry_loader_config rank_cfg(ferry_dataset *ds, uint64_t seed, size_t buffer, size_t world,
                                    size_t rank)
{
    ferry_loader_config c = shuffled_cfg(ds, seed, buffer);
    if (world > 1) {
        c.sampler = FERRY_SAMPLER_DISTRIBUTED;
        c.rank = rank;
        c.world_size = world;
    }
    return c;
}

/* Epoch e of loader l, run to its end: the digest of its batches. */
static uint64_t run_epoch(ferry_loader *l, uint64_t e)
{
    ASSERT_OK(ferry_loader_reset(l, e));
    return ft_epoch_digest(l);
}

/* One epoch's digest (seed 7). */
static ferry_status epoch_digest_buf(ferry_dataset *ds, size_t buffer, ferry_on_error on_error,
                                     uint64_t *digest, uint64_t *skipped)
{
    ferry_loader_config c = shuffled_cfg(ds, 7, buffer);
    c.on_error = on_error;
    ferry_loader *l;
    ferry_status st = ferry_loader_create(&c, &l);
    if (st != FERRY_OK)
        return st;
    uint64_t h = FT_DIGEST_SEED;
    ferry_batch b;
    while ((st = ferry_loader_next(l, NULL, &b)) == FERRY_OK)
        h = ft_batch_digest(h, &b);
    ferry_loader_stats s;
    ASSERT_OK(ferry_loader_stats_get(l, &s));
    if (skipped)
        *skipped = s.skipped;
    ferry_loader_destroy(l);
    *digest = h;
    return st == FERRY_END ? FERRY_OK : st;
}

static ferry_status epoch_digest(ferry_dataset *ds, bool stream, ferry_on_error on_error,
                                 uint64_t *digest, uint64_t *skipped)
{
    return epoch_digest_buf(ds, stream ? 8 : 0, on_error, digest, skipped);
}

static void assert_same_epochs(ferry_dataset *local, ferry_dataset *remote)
{
    for (int stream = 0; stream < 2; stream++) {
        uint64_t a, b;
        ASSERT_OK(epoch_digest(local, stream, FERRY_ON_ERROR_FAIL, &a, NULL));
        ASSERT_OK(epoch_digest(remote, stream, FERRY_ON_ERROR_FAIL, &b, NULL));
        ASSERT_MSG(a == b, "%s epoch: digest %llx from the URLs, %llx from disk",
                   stream ? "streaming" : "random", (unsigned long long)b, (unsigned long long)a);
    }
}

static ferry_remote_stats stats_of(const ferry_dataset *ds)
{
    ferry_remote_stats s;
    ASSERT(ferry__dataset_remote_stats(ds, &s));
    return s;
}

/* The shards where scripts/remote-test.sh's nginx serves them (FERRY_TEST_WWW). */
static void copy_to_www(const char *dir)
{
    for (size_t s = 0; s < NSHARDS; s++) {
        char rel[64], to[600];
        size_t n;
        snprintf(rel, sizeof rel, "remote/www/%s", names[s]);
        snprintf(to, sizeof to, "%s/%s", dir, names[s]);
        uint8_t *b = ft_read_file(ft_tmp(rel), &n);
        ft_write_file(to, b, n);
        free(b);
    }
}

#ifdef FERRY_HAVE_CURL
#include <curl/curl.h>

typedef struct up { const uint8_t *b; size_t n, at; } up;

static size_t up_read(char *dst, size_t size, size_t nitems, void *p)
{
    up *u = p;
    size_t k = size * nitems < u->n - u->at ? size * nitems : u->n - u->at;
    memcpy(dst, u->b + u->at, k);
    u->at += k;
    return k;
}

/* PUT each shard to base (s3://BUCKET), signed as the cache signs a GET. */
static void upload_s3(const char *base)
{
    for (size_t s = 0; s < NSHARDS; s++) {
        char rel[64], url[300];
        snprintf(rel, sizeof rel, "remote/www/%s", names[s]);
        snprintf(url, sizeof url, "%s/%s", base, names[s]);
        ferry_remote_target t;
        ASSERT_OK(ferry__remote_target(url, &t));
        up u = {0};
        u.b = ft_read_file(ft_tmp(rel), &u.n);
        CURL *h = curl_easy_init();
        curl_easy_setopt(h, CURLOPT_URL, t.url);
        curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(h, CURLOPT_READFUNCTION, up_read);
        curl_easy_setopt(h, CURLOPT_READDATA, &u);
        curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)u.n);
        curl_easy_setopt(h, CURLOPT_AWS_SIGV4, t.sigv4);
        curl_easy_setopt(h, CURLOPT_USERPWD, t.userpwd);
        curl_easy_setopt(h, CURLOPT_TIMEOUT, 20L);
        struct curl_slist *hd = curl_slist_append(NULL, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
        CURLcode rc = curl_easy_perform(h);
        long code = 0;
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
        curl_easy_cleanup(h);
        curl_slist_free_all(hd);
        free((void *)u.b);
        ASSERT_MSG(rc == CURLE_OK && code == 200, "PUT %s: %s, HTTP %ld", url,
                   curl_easy_strerror(rc), code);
    }
}
#else
static void upload_s3(const char *base) { (void)base; }
#endif

/* Against a server named by the environment (scripts/remote-test.sh), or ours. */
static void digest_test(const char *env_url)
{
    ft_http *srv = NULL;
    const char *base = getenv(env_url);
    if (!base && strcmp(env_url, "FERRY_TEST_URL_OWN") != 0)
        SKIP("set by scripts/remote-test.sh, which starts the server");
    if (!base) {
        srv = ft_http_start(www(), NULL);
        base = ft_http_base(srv);
    } else if (!strcmp(env_url, "FERRY_TEST_URL")) {
        const char *dir = getenv("FERRY_TEST_WWW");
        if (!dir)
            SKIP("FERRY_TEST_WWW (nginx's root) is not set");
        www();
        copy_to_www(dir);
    } else {
        www();
        upload_s3(base);
    }
    ferry_image_config c = remote_cfg("remote/cache-digest", 0);
    ferry_dataset *local = open_local(), *remote;
    ASSERT_OK(open_urls(base, &c, &remote));
    assert_same_samples(local, remote);
    assert_same_epochs(local, remote);
    ferry_remote_stats s = stats_of(remote);
    ASSERT_EQ_INT(s.downloads, NSHARDS);
    ASSERT_EQ_INT(s.failures, 0);
    ferry_dataset_release(remote);
    ferry_dataset_release(local);
    ft_http_stop(srv);
}

TEST(http_digests_equal_local_reads) { digest_test("FERRY_TEST_URL_OWN"); }
TEST(nginx_digests_equal_local_reads) { digest_test("FERRY_TEST_URL"); }
TEST(s3_digests_equal_local_reads) { digest_test("FERRY_TEST_S3_URL"); }

/* s3rver checks the access key but not a Signature V4 itself (its
 * authentication.js: "unimplemented"), so wrong credentials are a wrong key
 * and secret here; against AWS or MinIO a wrong secret alone gives the same
 * 403 and the same message. */
TEST(s3_wrong_credentials_are_an_auth_error)
{
    const char *base = getenv("FERRY_TEST_S3_URL");
    if (!base)
        SKIP("set by scripts/remote-test.sh, which starts the S3 server");
    www();
    upload_s3(base);
    char keep[2][256];
    const char *var[2] = {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"};
    for (int i = 0; i < 2; i++) {
        snprintf(keep[i], sizeof keep[i], "%s", getenv(var[i]) ? getenv(var[i]) : "");
        setenv(var[i], "wrong", 1);
    }
    ferry_image_config c = remote_cfg("remote/cache-s3auth", 0);
    ferry_dataset *ds = NULL;
    ferry_status st = open_urls(base, &c, &ds);
    for (int i = 0; i < 2; i++)
        setenv(var[i], keep[i], 1);
    ASSERT_STATUS(st, FERRY_ERR_IO);
    ASSERT_STR_CONTAINS(ferry_last_error(), base);
    ASSERT_STR_CONTAINS(ferry_last_error(), "HTTP 403");
    ASSERT_STR_CONTAINS(ferry_last_error(), "credentials");
}

TEST(budget_below_a_shard_is_an_error_at_create)
{
    ft_http *srv = ft_http_start(www(), NULL);
    ferry_image_config c = remote_cfg("remote/cache-small", 1000);
    ferry_dataset *ds = NULL;
    ASSERT_STATUS(open_urls(ft_http_base(srv), &c, &ds), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), ft_http_base(srv));
    ASSERT_STR_CONTAINS(ferry_last_error(), "budget of 1000 bytes");
    ft_http_stop(srv);
}

static size_t largest_shard(void)
{
    size_t big = 0;
    for (size_t s = 0; s < NSHARDS; s++)
        big = shard_bytes(s) > big ? shard_bytes(s) : big;
    return big;
}

TEST(cache_stays_in_budget_and_evicts)
{
    ft_http *srv = ft_http_start(www(), NULL);
    size_t budget = largest_shard() + largest_shard() / 2; /* one shard at a time */
    ferry_image_config c = remote_cfg("remote/cache-lru", budget);
    ferry_dataset *local = open_local(), *remote;
    ASSERT_OK(open_urls(ft_http_base(srv), &c, &remote));
    assert_same_epochs(local, remote);
    assert_same_samples(local, remote);
    ferry_remote_stats s = stats_of(remote);
    ASSERT_MSG(s.held_peak <= budget, "held %zu bytes, budget %zu", s.held_peak, budget);
    ASSERT(s.evictions > 0);
    ASSERT(s.downloads > NSHARDS);
    ferry_dataset_release(remote);
    ferry_dataset_release(local);
    ft_http_stop(srv);
}

static size_t count_files(const char *dir, const char *suffix)
{
    DIR *d = opendir(dir);
    size_t n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name), k = strlen(suffix);
        n += l >= k && !strcmp(e->d_name + l - k, suffix);
    }
    if (d)
        closedir(d);
    return n;
}

TEST(cache_reuses_whole_files_never_partial_or_foreign)
{
    ft_http *srv = ft_http_start(www(), NULL);
    ferry_image_config c = remote_cfg("remote/cache-keep", 0);
    char p[600];
    /* Not ours, or ours from a process that died mid-download (pid 1 lives:
     * a long-dead pid is taken from a reaped child). */
    pid_t dead = fork();
    if (dead == 0)
        _exit(0);
    ASSERT(dead > 0);
    waitpid(dead, NULL, 0);
    ASSERT_EQ_INT(mkdir(c.remote_cache_dir, 0700), 0);
    snprintf(p, sizeof p, "%s/mine.tar", c.remote_cache_dir);
    ft_write_file(p, "x", 1);
    snprintf(p, sizeof p, "%s/ferry-0123456789abcdef.%ld-0.part", c.remote_cache_dir, (long)dead);
    ft_write_file(p, "partial", 7);
    ferry_dataset *local = open_local(), *a, *b;
    ASSERT_OK(open_urls(ft_http_base(srv), &c, &a));
    ferry_dataset_release(a); /* (its fetches renamed and joined) */
    ASSERT_EQ_SIZE(count_files(c.remote_cache_dir, ".part"), 0);
    ASSERT_EQ_SIZE(count_files(c.remote_cache_dir, "mine.tar"), 1);
    ASSERT_EQ_SIZE(count_files(c.remote_cache_dir, ".shard"), NSHARDS);
    /* A whole file is reused; one cut short (as a crash never leaves one
     * named .shard, but a user might) is fetched again. */
    DIR *d = opendir(c.remote_cache_dir);
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strstr(e->d_name, ".shard")) {
            snprintf(p, sizeof p, "%s/%s", c.remote_cache_dir, e->d_name);
            break;
        }
    closedir(d);
    ASSERT_EQ_INT(truncate(p, 100), 0);
    ASSERT_OK(open_urls(ft_http_base(srv), &c, &b));
    assert_same_samples(local, b);
    ferry_remote_stats s = stats_of(b);
    ASSERT_EQ_INT(s.downloads, 1);
    ferry_dataset_release(b);
    ferry_dataset_release(local);
    ft_http_stop(srv);
}

/* Without an index beside the shards, the first create downloads each to
 * index it and keeps the index in the cache folder: a later create of the
 * same objects downloads no plain shard, even with the shards evicted. */
TEST(index_built_from_a_download_is_kept)
{
    ft_http *srv = ft_http_start(www(), NULL);
    ferry_image_config c = remote_cfg("remote/cache-ix", 0);
    ferry_dataset *local = open_local(), *a, *b;
    ASSERT_OK(open_urls(ft_http_base(srv), &c, &a));
    ASSERT_EQ_INT(stats_of(a).downloads, NSHARDS);
    ferry_dataset_release(a);
    ASSERT_EQ_SIZE(count_files(c.remote_cache_dir, ".ferry-index"), NSHARDS);
    DIR *d = opendir(c.remote_cache_dir);
    struct dirent *e;
    char p[600];
    while ((e = readdir(d)) != NULL) /* as if evicted */
        if (strstr(e->d_name, ".shard")) {
            snprintf(p, sizeof p, "%s/%s", c.remote_cache_dir, e->d_name);
            ASSERT_EQ_INT(unlink(p), 0);
        }
    closedir(d);
    ASSERT_OK(open_urls(ft_http_base(srv), &c, &b));
    /* c.tar.gz only: the gzip cache starts its stream at create. */
    ASSERT_EQ_INT(stats_of(b).downloads, 1);
    assert_same_epochs(local, b);
    ferry_dataset_release(b);
    ferry_dataset_release(local);
    ft_http_stop(srv);
}

/* ---- faults ---- */

static void survives(const ft_http_faults *f, const char *what)
{
    ft_http *srv = ft_http_start(www(), f);
    ferry_image_config c = remote_cfg("remote/cache-fault", 0);
    ferry_dataset *local = open_local(), *remote;
    double t0 = ferry_now();
    ASSERT_OK(open_urls(ft_http_base(srv), &c, &remote));
    assert_same_samples(local, remote);
    assert_same_epochs(local, remote);
    ferry_remote_stats s = stats_of(remote);
    ASSERT_MSG(s.retries > 0, "%s: no retries", what);
    ASSERT_EQ_INT(s.failures, 0);
    ASSERT_MSG(ferry_now() - t0 < 60, "%s took %.1f s", what, ferry_now() - t0);
    ferry_dataset_release(remote);
    ferry_dataset_release(local);
    ft_http_stop(srv);
}

TEST(fault_503_burst_retried) { survives(&(ft_http_faults){.fail_first = 3, .fail_status = 503}, "503"); }
TEST(fault_429_retry_after_retried)
{
    survives(&(ft_http_faults){.fail_first = 2, .fail_status = 429, .retry_after = 1}, "429");
}
TEST(fault_dropped_mid_body_resumed)
{
    survives(&(ft_http_faults){.drop_every = 2, .drop_after = 3000}, "drops");
}
TEST(fault_stall_times_out_and_resumes)
{
    survives(&(ft_http_faults){.stall_every = 3, .stall_s = 2.5}, "stall");
}

static void fails_naming_url(const ft_http_faults *f, const char *want)
{
    ft_http *srv = ft_http_start(www(), f);
    ferry_image_config c = remote_cfg("remote/cache-lie", 0);
    c.remote_retries = 2;
    ferry_dataset *ds = NULL;
    double t0 = ferry_now();
    ferry_status st = open_urls(ft_http_base(srv), &c, &ds);
    ASSERT_MSG(st != FERRY_OK, "no error for %s", want);
    ASSERT_STR_CONTAINS(ferry_last_error(), ft_http_base(srv));
    ASSERT_STR_CONTAINS(ferry_last_error(), want);
    ASSERT_MSG(ferry_now() - t0 < 20, "%s took %.1f s", want, ferry_now() - t0);
    ft_http_stop(srv);
}

TEST(lie_content_length_longer) { fails_naming_url(&(ft_http_faults){.clen_lie = 100}, "Content-Length"); }
TEST(lie_content_length_shorter) { fails_naming_url(&(ft_http_faults){.clen_lie = -100}, "Content-Length"); }
TEST(not_found_names_url) { fails_naming_url(&(ft_http_faults){.fail_first = 99, .fail_status = 404}, "HTTP 404"); }
TEST(retries_run_out) { fails_naming_url(&(ft_http_faults){.fail_first = 99, .fail_status = 503}, "gave up after 3 tries"); }
TEST(object_changed_mid_read) { fails_naming_url(&(ft_http_faults){.etag_change_after = 2}, "changed"); }

/* A shard that becomes unreachable after create: SKIP skips and counts its
 * samples; FAIL stops with the URL. */
TEST(unreachable_shard_skip_or_fail)
{
    ft_http *srv = ft_http_start(www(), NULL);
    ferry_image_config c = remote_cfg("remote/cache-gone", largest_shard() * 3 / 2);
    c.remote_retries = 1;
    ferry_dataset *remote;
    ASSERT_OK(open_urls(ft_http_base(srv), &c, &remote));
    ft_http_set_faults(srv, &(ft_http_faults){.fail_first = 100000, .fail_status = 503,
                                              .fail_path = "/b.tar"});
    uint64_t d, skipped = 0;
    ASSERT_OK(epoch_digest(remote, false, FERRY_ON_ERROR_SKIP, &d, &skipped));
    ASSERT_MSG(skipped >= PER, "skipped %llu",
               (unsigned long long)skipped);
    ferry_status st = epoch_digest(remote, false, FERRY_ON_ERROR_FAIL, &d, NULL);
    ASSERT_STATUS(st, FERRY_ERR_IO);
    ASSERT_STR_CONTAINS(ferry_last_error(), ft_http_base(srv));
    ferry_dataset_release(remote);
    ft_http_stop(srv);
}

/* A create that fails at a URL's first request closes no descriptor it did
 * not open. The shard table was the malloc's leftovers until after that
 * request, and shards_free closed them: here a freed block of the table's
 * size, full of one of this process's descriptors, stands for the leftovers. */
TEST(failed_create_closes_no_descriptor_of_the_process)
{
    enum { N = 16 };
    ft_http *srv = ft_http_start(www(), NULL);
    ft_http_set_faults(srv, &(ft_http_faults){.fail_first = 100000, .fail_status = 404});
    ferry_image_config c = remote_cfg("remote/cache-headfail", 0);
    c.remote_retries = 1;
    char local[PATH_MAX], url[512];
    snprintf(local, sizeof local, "%s/%s", www(), names[0]);
    snprintf(url, sizeof url, "%s/%s", ft_http_base(srv), names[0]);
    const char *paths[N];
    for (size_t i = 0; i + 1 < N; i++)
        paths[i] = local;
    paths[N - 1] = url;
    int mine = open("/dev/null", O_RDONLY | O_CLOEXEC);
    ASSERT(mine >= 0);
    int *junk = malloc(N * sizeof *junk);
    ASSERT(junk);
    for (size_t i = 0; i < N; i++)
        junk[i] = mine;
    free(junk);
    ferry_dataset *ds = NULL;
    ferry_status st = ferry_dataset_shards(paths, N, &c, &ds);
    ASSERT_MSG(st != FERRY_OK, "create succeeded with %s failing", url);
    ASSERT_STR_CONTAINS(ferry_last_error(), url);
    ASSERT_MSG(fcntl(mine, F_GETFD) != -1, "the failed create closed fd %d, which it never opened",
               mine);
    for (int fd = 0; fd < 3; fd++)
        ASSERT_MSG(fcntl(fd, F_GETFD) != -1, "the failed create closed fd %d", fd);
    close(mine);
    ft_http_stop(srv);
}

TEST(s3_without_credentials_names_url)
{
    const char *id = getenv("AWS_ACCESS_KEY_ID");
    if (id && *id)
        SKIP("AWS_ACCESS_KEY_ID is set");
    need_curl();
    const char *u = "s3://bucket/x.tar";
    ferry_dataset *ds = NULL;
    ferry_image_config c = remote_cfg("remote/cache-nocred", 0);
    ASSERT_STATUS(ferry_dataset_shards(&u, 1, &c, &ds), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), u);
    ASSERT_STR_CONTAINS(ferry_last_error(), "AWS_ACCESS_KEY_ID");
}

TEST(build_without_curl_refuses_urls)
{
#ifdef FERRY_HAVE_CURL
    SKIP("built with libcurl");
#else
    const char *u[2] = {"/nonexistent/local.tar", "https://127.0.0.1:9/x.tar"};
    ferry_dataset *ds = NULL;
    ASSERT_STATUS(ferry_dataset_shards(&u[1], 1, NULL, &ds), FERRY_ERR_UNSUPPORTED);
    ASSERT_STR_CONTAINS(ferry_last_error(), u[1]);
    ASSERT_STR_CONTAINS(ferry_last_error(), "libcurl4-openssl-dev");
    (void)u[0];
#endif
}

/* ---- streaming ---- */

/* The plain shards (a, b, d) and each one's index beside it
 * (SHARD.ferry-index, as shard_index_cache writes it), in their own folder:
 * served there, a shard's index is at URL.ferry-index. */
enum { NPLAIN = 3 };
static const char *plain[NPLAIN] = {"a.tar", "b.tar", "d.tar"};

static const char *www_ix(void)
{
    static bool made;
    static char dir[600];
    snprintf(dir, sizeof dir, "%s", ft_tmp("remote/www-ix"));
    if (made)
        return dir;
    www();
    const char *p[NPLAIN];
    static char keep[NPLAIN][600];
    for (size_t s = 0; s < NPLAIN; s++) {
        char rel[64];
        size_t n;
        snprintf(rel, sizeof rel, "remote/www/%s", plain[s]);
        uint8_t *b = ft_read_file(ft_tmp(rel), &n);
        snprintf(keep[s], sizeof keep[s], "%s/%s", ft_tmp("remote/www-ix"), plain[s]);
        ft_write_file(keep[s], b, n);
        free(b);
        p[s] = keep[s];
    }
    ferry_image_config c = ferry_image_config_default();
    c.shard_index_cache = true;
    ferry_dataset *ds;
    ASSERT_OK(ferry_dataset_shards(p, NPLAIN, &c, &ds));
    ferry_dataset_release(ds);
    ASSERT_EQ_SIZE(count_files(dir, ".ferry-index"), NPLAIN);
    made = true;
    return dir;
}

static ferry_dataset *open_plain_local(void)
{
    char dir[600];
    snprintf(dir, sizeof dir, "%s", www_ix());
    const char *p[NPLAIN];
    static char v[NPLAIN][700];
    for (size_t s = 0; s < NPLAIN; s++) {
        snprintf(v[s], sizeof v[s], "%s/%s", dir, plain[s]);
        p[s] = v[s];
    }
    ferry_dataset *ds;
    ASSERT_OK(ferry_dataset_shards(p, NPLAIN, NULL, &ds));
    return ds;
}

static ferry_status open_plain_urls(const char *base, const ferry_image_config *cfg,
                                    ferry_dataset **ds)
{
    static char v[NPLAIN][256];
    const char *p[NPLAIN];
    for (size_t s = 0; s < NPLAIN; s++) {
        snprintf(v[s], sizeof v[s], "%s/%s", base, plain[s]);
        p[s] = v[s];
    }
    return ferry_dataset_shards(p, NPLAIN, cfg, ds);
}

static size_t smallest_plain(void)
{
    size_t small = SIZE_MAX;
    for (size_t s = 0; s < NSHARDS; s++)
        if (!strstr(names[s], ".gz") && shard_bytes(s) < small)
            small = shard_bytes(s);
    return small;
}

/* Every shard is larger than the cache's budget (the dataset three times
 * larger): with the indexes beside the shards, create downloads nothing,
 * the streaming order streams each shard and random access reads members by
 * Range, both to the digests of the same shards on disk. */
TEST(streaming_beyond_the_cache_budget_equals_local)
{
    ft_http *srv = ft_http_start(www_ix(), NULL);
    size_t budget = smallest_plain() / 2;
    ferry_image_config c = remote_cfg("remote/cache-stream", budget);
    ferry_dataset *local = open_plain_local(), *remote;
    ASSERT_OK(open_plain_urls(ft_http_base(srv), &c, &remote));
    ferry_remote_stats s = stats_of(remote);
    ASSERT_EQ_INT(s.downloads, 0);
    ASSERT_MSG(s.bytes_fetched < smallest_plain(), "create fetched %llu bytes",
               (unsigned long long)s.bytes_fetched);
    uint64_t created = s.bytes_fetched, total = 0;
    for (size_t k = 0; k < NSHARDS; k++)
        total += strstr(names[k], ".gz") ? 0 : shard_bytes(k);
    for (int epoch = 0; epoch < 2; epoch++) { /* the second starts every stream over */
        uint64_t a, b;
        ASSERT_OK(epoch_digest(local, true, FERRY_ON_ERROR_FAIL, &a, NULL));
        ASSERT_OK(epoch_digest(remote, true, FERRY_ON_ERROR_FAIL, &b, NULL));
        ASSERT_MSG(a == b, "streaming: %llx from the URLs, %llx from disk",
                   (unsigned long long)b, (unsigned long long)a);
    }
    s = stats_of(remote);
    /* Each shard streamed once an epoch; a straggler of the shuffle buffer
     * whose stream was replaced is one member by Range, not a new stream
     * fetching on to the shard's end. Each loader (one an epoch here) also
     * opens the next epoch's head stream near its end: a shard at most. */
    uint64_t biggest = 0;
    for (size_t k = 0; k < NSHARDS; k++)
        biggest = !strstr(names[k], ".gz") && shard_bytes(k) > biggest ? shard_bytes(k) : biggest;
    ASSERT_MSG(s.bytes_fetched - created <= 2 * total + total / 4 + 2 * biggest,
               "2 epochs fetched %llu bytes of shards of %llu (%llu streams, %llu Range reads)",
               (unsigned long long)(s.bytes_fetched - created), (unsigned long long)total,
               (unsigned long long)s.streams, (unsigned long long)s.range_reads);
    ASSERT_EQ_INT(s.downloads, 0);
    ASSERT_EQ_INT(s.held_peak, 0);
    ASSERT_MSG(s.streams >= 2 * NPLAIN, "%llu streams", (unsigned long long)s.streams);
    /* Each epoch's shards after the first: started at the previous one's
     * first read (the loader's plan), before their own; and each loader's
     * head stream for an epoch it does not reach. */
    ASSERT_MSG(s.streams_ahead == 2 * (NPLAIN - 1) + 2, "%llu streams started ahead",
               (unsigned long long)s.streams_ahead);
    ASSERT_MSG(s.stream_reads > s.range_reads, "%llu reads streamed, %llu by Range",
               (unsigned long long)s.stream_reads, (unsigned long long)s.range_reads);
    uint64_t a, b;
    ASSERT_OK(epoch_digest(local, false, FERRY_ON_ERROR_FAIL, &a, NULL));
    ASSERT_OK(epoch_digest(remote, false, FERRY_ON_ERROR_FAIL, &b, NULL));
    ASSERT_MSG(a == b, "random: %llx from the URLs, %llx from disk", (unsigned long long)b,
               (unsigned long long)a);
    ASSERT(stats_of(remote).range_reads > s.range_reads);
    ferry_dataset_release(remote);
    ferry_dataset_release(local);
    ft_http_stop(srv);
}

/* The head-stream tests' rig: the plain shards from the server and from disk
 * (cache: the cache folder's name) and a streaming loader on each (seed 11,
 * buffer 4). *before (may be NULL): the remote counters before the loaders,
 * whose workers start reading at create. */
typedef struct head_rig {
    ft_http *srv;
    ferry_dataset *local, *remote;
    ferry_loader *l[2]; /* on local, on remote */
} head_rig;

static head_rig head_rig_open(const char *cache, ferry_remote_stats *before)
{
    head_rig r;
    r.srv = ft_http_start(www_ix(), NULL);
    ferry_image_config ic = remote_cfg(cache, 0);
    r.local = open_plain_local();
    ASSERT_OK(open_plain_urls(ft_http_base(r.srv), &ic, &r.remote));
    if (before)
        *before = stats_of(r.remote);
    ferry_dataset *ds[2] = {r.local, r.remote};
    for (int k = 0; k < 2; k++) {
        ferry_loader_config c = shuffled_cfg(ds[k], 11, 4);
        ASSERT_OK(ferry_loader_create(&c, &r.l[k]));
    }
    return r;
}

static void head_rig_close(head_rig *r)
{
    for (int k = 0; k < 2; k++)
        ferry_loader_destroy(r->l[k]);
    ferry_dataset_release(r->remote);
    ferry_dataset_release(r->local);
    ft_http_stop(r->srv);
}

/* Epoch e's digests from disk (h[0]) and the URLs (h[1]) are one. */
static void same_epoch(uint64_t e, const uint64_t h[2])
{
    ASSERT_MSG(h[0] == h[1], "epoch %llu: %llx from the URLs, %llx from disk", (unsigned long long)e,
               (unsigned long long)h[1], (unsigned long long)h[0]);
}

/* One loader, three epochs: each epoch's first shard is streamed from near
 * the previous epoch's end (its head stream, opened at the last shard's
 * first read and kept through the reset), so no epoch after the first starts
 * with every worker waiting for a request; the digests are those of disk. */
TEST(next_epoch_head_stream_opens_before_the_epoch)
{
    ferry_remote_stats s0;
    head_rig r = head_rig_open("remote/cache-head", &s0);
    enum { EPOCHS = 3 };
    for (uint64_t e = 0; e < EPOCHS; e++) {
        uint64_t h[2];
        for (int k = 0; k < 2; k++)
            h[k] = run_epoch(r.l[k], e);
        same_epoch(e, h);
    }
    ferry_remote_stats s = stats_of(r.remote);
    /* Per epoch NPLAIN - 1 streams opened at the previous shard's first
     * read and one head stream at the last's; every epoch but the first
     * begins on the head stream the one before opened, so it opens no
     * stream of its own at its first read. */
    ASSERT_MSG(s.streams - s0.streams == NPLAIN + (EPOCHS - 1) * (NPLAIN - 1) + EPOCHS,
               "%llu streams in %d epochs of %d shards (%llu ahead, %llu reads streamed, %llu by "
               "Range)", (unsigned long long)(s.streams - s0.streams), EPOCHS, NPLAIN,
               (unsigned long long)(s.streams_ahead - s0.streams_ahead),
               (unsigned long long)(s.stream_reads - s0.stream_reads),
               (unsigned long long)(s.range_reads - s0.range_reads));
    ASSERT_MSG(s.streams_ahead - s0.streams_ahead == EPOCHS * NPLAIN,
               "%llu streams started ahead", (unsigned long long)(s.streams_ahead - s0.streams_ahead));
    /* The warm-up's sample, the epoch's first, read through its stream: no
     * Range read and no download. */
    ASSERT_EQ_INT(s.range_reads - s0.range_reads, 0);
    ASSERT_EQ_INT(s.downloads - s0.downloads, 0);
    head_rig_close(&r);
}

/* The head stream's thread cannot be started (the process is out of
 * threads: a stream slot starts its thread at its first stream and keeps it,
 * so the head stream of epoch 0, opened at the last but one shard's first
 * read, is the (NPLAIN + 1)-th stream thread, after the first shard's and
 * the NPLAIN - 1 started ahead; the last shard's first read opens it again):
 * that epoch and the next still deliver the digests of disk, and the slot
 * keeps no trace of it (a failed head once wrote a byte before the shard
 * table at the reset, which ASan reports). */
TEST(head_stream_without_a_thread_leaves_no_trace)
{
    ft_http *srv = ft_http_start(www_ix(), NULL);
    ferry_image_config ic = remote_cfg("remote/cache-head-nothread", 0);
    ferry_dataset *local = open_plain_local(), *remote;
    ASSERT_OK(open_plain_urls(ft_http_base(srv), &ic, &remote));
    ferry_loader *l[2];
    ferry_dataset *ds[2] = {local, remote};
    ferry_remote_stats s0 = stats_of(remote);
    for (int k = 0; k < 2; k++) {
        ferry_loader_config c = shuffled_cfg(ds[k], 11, 4);
        /* The remote loader's 2 workers' threads, then the streams': its
         * workers start epoch 0 at once. */
        if (k == 1)
            ferry_debug_fail_thread_after(2 + NPLAIN + 1);
        ASSERT_OK(ferry_loader_create(&c, &l[k]));
    }
    for (uint64_t e = 0; e < 3; e++) {
        uint64_t h[2];
        for (int k = 0; k < 2; k++)
            h[k] = run_epoch(l[k], e);
        ASSERT_MSG(h[0] == h[1], "epoch %llu: %llx from the URLs, %llx from disk",
                   (unsigned long long)e, (unsigned long long)h[1], (unsigned long long)h[0]);
        if (e != 0)
            continue;
        ASSERT_MSG(ferry_debug_fail_thread_after(0) == 0, "the head's thread never started");
        ferry_remote_stats s = stats_of(remote);
        /* Not an ahead stream's (then NPLAIN - 1 ahead) nor a reader's (a
         * read by Range: the warm-up reads through the streams too). */
        ASSERT_MSG(s.streams - s0.streams == NPLAIN + 1 &&
                       s.streams_ahead - s0.streams_ahead == NPLAIN &&
                       s.range_reads - s0.range_reads == 0,
                   "epoch 0: %llu streams, %llu ahead, %llu by Range: the failed thread was "
                   "not the head's", (unsigned long long)(s.streams - s0.streams),
                   (unsigned long long)(s.streams_ahead - s0.streams_ahead),
                   (unsigned long long)(s.range_reads - s0.range_reads));
    }
    for (int k = 0; k < 2; k++)
        ferry_loader_destroy(l[k]);
    ferry_dataset_release(remote);
    ferry_dataset_release(local);
    ft_http_stop(srv);
}

/* The k-th thread the dataset and its loader start cannot be started (a
 * process out of threads), for every k until one epoch starts them all: the
 * dataset's index threads, the loader's workers, the cache's fetches and the
 * shard streams, in random and streaming order. Each run either delivers the
 * digest of disk (a stream without a thread reads by Range; the index is
 * built by fewer threads) or fails with an error that says a thread could not
 * be started; none leaks or hangs. */
TEST(every_thread_that_cannot_start_fails_cleanly)
{
    ft_http *srv = ft_http_start(www_ix(), NULL);
    ferry_dataset *local = open_plain_local();
    for (int stream = 0; stream < 2; stream++) {
        uint64_t want;
        ASSERT_OK(epoch_digest(local, stream, FERRY_ON_ERROR_FAIL, &want, NULL));
        int64_t left = 0, k = 1, failed = 0;
        for (; left == 0; k++) {
            int64_t live0 = ferry_debug_alloc_live();
            ferry_image_config ic = remote_cfg("remote/cache-thread", largest_shard() * 2);
            ferry_dataset *remote;
            ferry_debug_fail_thread_after(k);
            ferry_status st = open_plain_urls(ft_http_base(srv), &ic, &remote);
            uint64_t got = 0;
            if (st == FERRY_OK) {
                st = epoch_digest(remote, stream, FERRY_ON_ERROR_FAIL, &got, NULL);
                ferry_dataset_release(remote);
            }
            left = ferry_debug_fail_thread_after(0);
            if (st != FERRY_OK) {
                failed++;
                ASSERT_MSG(left == 0, "thread %lld: %s with every thread started",
                           (long long)k, ferry_last_error());
                ASSERT_STR_CONTAINS(ferry_last_error(), "thread");
            } else {
                ASSERT_MSG(got == want, "%s, thread %lld failed: %llx from the URLs, %llx from disk",
                           stream ? "streaming" : "random", (long long)k,
                           (unsigned long long)got, (unsigned long long)want);
            }
            ASSERT_EQ_INT(ferry_debug_alloc_live(), live0);
        }
        printf("  %s order: %lld threads, %lld of whose failures stopped the epoch\n",
               stream ? "streaming" : "random", (long long)(k - 2), (long long)failed);
        ASSERT_MSG(k - 2 >= 3, "only %lld threads: the sweep tests little", (long long)(k - 2));
    }
    ferry_dataset_release(local);
    ft_http_stop(srv);
}

/* The shard loader c reads first in epoch e, and the one it reads last (the
 * plan's last shard: the one whose first sample comes latest, as each shard
 * holds PER > the buffer's samples, stored in index order). */
static void shards_first_last(ferry_loader_config c, uint64_t epoch, size_t *first, size_t *last)
{
    ferry_loader *l;
    ASSERT_OK(ferry_loader_create(&c, &l));
    ASSERT_OK(ferry_loader_reset(l, epoch));
    size_t first_at[NPLAIN], pos = 0;
    for (size_t k = 0; k < NPLAIN; k++)
        first_at[k] = SIZE_MAX;
    ferry_batch b;
    ferry_status st;
    while ((st = ferry_loader_next(l, NULL, &b)) == FERRY_OK)
        for (size_t j = 0; j < b.size; j++, pos++)
            if (first_at[b.indices[j] / PER] == SIZE_MAX)
                first_at[b.indices[j] / PER] = pos;
    ASSERT_STATUS(st, FERRY_END);
    ferry_loader_destroy(l);
    *first = *last = 0;
    for (size_t k = 0; k < NPLAIN; k++) {
        *first = first_at[k] < first_at[*first] ? k : *first;
        *last = first_at[k] != SIZE_MAX && first_at[k] > first_at[*last] ? k : *last;
    }
}

/* A seed whose epoch 1 starts in the shard its epoch 0 reads last: epoch 0
 * then always reaches the read that opens epoch 1's head stream, whatever
 * the threads' timing, before the failing shard stops it. */
static uint64_t seed_head_is_last(ferry_dataset *local, size_t *head)
{
    for (uint64_t seed = 1; seed < 64; seed++) {
        size_t first0, last0, first1, last1;
        shards_first_last(shuffled_cfg(local, seed, 4), 0, &first0, &last0);
        shards_first_last(shuffled_cfg(local, seed, 4), 1, &first1, &last1);
        if (first1 == last0) {
            *head = first1;
            return seed;
        }
    }
    ASSERT_MSG(0, "no seed below 64 starts epoch 1 in epoch 0's last shard");
    return 0;
}

/* Epoch 1's first shard, which epoch 0 reads last, answers 503 through
 * epoch 0, which stops with the error naming it; epoch 1's head stream,
 * opened at epoch 0's first read of that shard, failed too. The server well
 * again, epoch 1 of the same loader delivers every sample, with the digest
 * of disk: the failed head stream is not carried into epoch 1 (a kept one
 * failed this test then); the shard is tried afresh. */
TEST(failed_head_stream_is_tried_afresh)
{
    ft_http *srv = ft_http_start(www_ix(), NULL);
    ferry_image_config ic = remote_cfg("remote/cache-head-fail", 0);
    ic.remote_retries = 1;
    ferry_dataset *local = open_plain_local(), *remote;
    ASSERT_OK(open_plain_urls(ft_http_base(srv), &ic, &remote));
    size_t hk;
    uint64_t seed = seed_head_is_last(local, &hk);
    const char *head = plain[hk];
    ferry_loader_config c = shuffled_cfg(local, seed, 4);
    ferry_loader *l;
    ASSERT_OK(ferry_loader_create(&c, &l));
    uint64_t want = run_epoch(l, 1), got;
    ferry_loader_destroy(l);
    ferry_batch b;
    ferry_status st;

    c = shuffled_cfg(remote, seed, 4);
    ft_http_set_faults(srv, &(ft_http_faults){.fail_first = 100000, .fail_status = 503,
                                              .fail_path = head});
    ferry_remote_stats s0 = stats_of(remote);
    ASSERT_OK(ferry_loader_create(&c, &l));
    while ((st = ferry_loader_next(l, NULL, &b)) == FERRY_OK)
        ;
    ASSERT_MSG(st != FERRY_END, "epoch 0 ended without the error for %s", head);
    ASSERT_STR_CONTAINS(ferry_last_error(), head);
    /* Every fetch of epoch 0, the head stream's included, has given up. */
    sleep(3 * (unsigned)ic.remote_timeout_s + 1);
    /* Each shard's stream opened ahead of its first read but the first
     * shard's, and the head stream: NPLAIN. */
    ferry_remote_stats s = stats_of(remote);
    ASSERT_MSG(s.streams_ahead - s0.streams_ahead == NPLAIN,
               "%llu streams ahead in epoch 0: the head stream was not opened",
               (unsigned long long)(s.streams_ahead - s0.streams_ahead));
    ft_http_set_faults(srv, &(ft_http_faults){0});
    ASSERT_OK(ferry_loader_reset(l, 1));
    got = FT_DIGEST_SEED;
    while ((st = ferry_loader_next(l, NULL, &b)) == FERRY_OK)
        got = ft_batch_digest(got, &b);
    ASSERT_MSG(st == FERRY_END, "epoch 1 (head shard %s): %s", head, ferry_last_error());
    ASSERT_MSG(got == want, "epoch 1: %llx from the URLs, %llx from disk", (unsigned long long)got,
               (unsigned long long)want);
    ferry_loader_destroy(l);
    ferry_dataset_release(remote);
    ferry_dataset_release(local);
    ft_http_stop(srv);
}

/* The head stream's fetch fails inside the reset that would carry it into
 * the next epoch, after the reset passed over it, while it joins the other
 * streams (ferry_debug_fail_head_stream_after puts the failure exactly
 * there, every run): the reset closes it all the same, and the epoch reads
 * its shard afresh, to the digest of disk. Carried, the failed stream failed
 * the epoch's reads of that shard (a failure there was reached only by
 * chance before the hook). */
TEST(head_stream_failing_inside_the_reset_is_not_carried)
{
    head_rig r = head_rig_open("remote/cache-head-join", NULL);
    for (uint64_t e = 0; e < 3; e++) {
        uint64_t h[2];
        ferry_remote_stats s0 = stats_of(r.remote);
        for (int k = 0; k < 2; k++) {
            if (k == 1 && e > 0)
                ferry_debug_fail_head_stream_after(1);
            h[k] = run_epoch(r.l[k], e);
            if (k == 1 && e > 0)
                ASSERT_MSG(ferry_debug_fail_head_stream_after(0) == 0,
                           "epoch %llu: its reset kept no head stream", (unsigned long long)e);
        }
        same_epoch(e, h);
        if (e == 0)
            continue;
        /* The failed head replaced by a stream of its own: NPLAIN streams,
         * NPLAIN - 1 of them started ahead, and the next epoch's head. */
        ferry_remote_stats s = stats_of(r.remote);
        ASSERT_MSG(s.streams - s0.streams == NPLAIN + 1,
                   "epoch %llu: %llu streams: the failed head was carried",
                   (unsigned long long)e, (unsigned long long)(s.streams - s0.streams));
    }
    head_rig_close(&r);
}

/* More shards than a dataset keeps streams (remote_stream.c's NSTREAMS, 8),
 * each smaller than the shuffle buffer, so that stragglers of the buffer
 * come long after their shard's stream was replaced: each is one member by
 * Range, never a new stream fetching on to its shard's end (which fetched
 * twice the bytes), and the digests are those of disk. */
enum { NMANY = 12, PER_MANY = 6 };

static void many_paths(const char *base, char v[NMANY][700], const char *p[NMANY])
{
    for (size_t s = 0; s < NMANY; s++) {
        snprintf(v[s], 700, "%s/m%02zu.tar", base, s);
        p[s] = v[s];
    }
}

static const char *www_many(uint64_t *total)
{
    static bool made;
    static uint64_t bytes;
    static char dir[600];
    snprintf(dir, sizeof dir, "%s", ft_tmp("remote/www-many"));
    if (!made) {
        static char v[NMANY][700];
        const char *p[NMANY];
        many_paths(dir, v, p);
        for (size_t s = 0; s < NMANY; s++) {
            ft_tar t = {0};
            for (size_t k = 0; k < PER_MANY; k++)
                add_sample(&t, s * PER_MANY + k);
            ft_tar_end(&t);
            ft_write_file(p[s], t.d, t.n);
            bytes += t.n;
            free(t.d);
        }
        ferry_image_config c = ferry_image_config_default();
        c.shard_index_cache = true; /* SHARD.ferry-index beside each */
        ferry_dataset *ds;
        ASSERT_OK(ferry_dataset_shards(p, NMANY, &c, &ds));
        ferry_dataset_release(ds);
        made = true;
    }
    *total = bytes;
    return dir;
}

TEST(more_shards_than_streams_fetch_each_once)
{
    uint64_t total;
    const char *dir = www_many(&total);
    ft_http *srv = ft_http_start(dir, NULL);
    static char lv[NMANY][700], uv[NMANY][700];
    const char *lp[NMANY], *up[NMANY];
    many_paths(dir, lv, lp);
    many_paths(ft_http_base(srv), uv, up);
    ferry_image_config c = remote_cfg("remote/cache-many", 0);
    ferry_dataset *local, *remote;
    ASSERT_OK(ferry_dataset_shards(lp, NMANY, NULL, &local));
    ASSERT_OK(ferry_dataset_shards(up, NMANY, &c, &remote));
    uint64_t before = stats_of(remote).bytes_fetched;
    const size_t buffer = 4 * PER_MANY * NMANY / 3; /* 24 shards' worth */
    for (int epoch = 0; epoch < 2; epoch++) {
        uint64_t a, b;
        ASSERT_OK(epoch_digest_buf(local, buffer, FERRY_ON_ERROR_FAIL, &a, NULL));
        ASSERT_OK(epoch_digest_buf(remote, buffer, FERRY_ON_ERROR_FAIL, &b, NULL));
        ASSERT_MSG(a == b, "epoch %d: %llx from the URLs, %llx from disk", epoch,
                   (unsigned long long)b, (unsigned long long)a);
    }
    ferry_remote_stats s = stats_of(remote);
    uint64_t got = s.bytes_fetched - before;
    /* Two epochs: each shard's stream once (a stream replaced before it
     * fetched its shard's end may be opened again for the rest), and the
     * stragglers' members by Range, which are at most the shards again. */
    ASSERT_MSG(s.range_reads > 0, "no straggler outlived its stream (%llu streams)",
               (unsigned long long)s.streams);
    ASSERT_MSG(got <= 2 * total + total / 2,
               "2 epochs fetched %llu bytes of shards of %llu (%llu streams, %llu Range reads)",
               (unsigned long long)got, (unsigned long long)total, (unsigned long long)s.streams,
               (unsigned long long)s.range_reads);
    ASSERT_MSG(s.streams <= 2 * NMANY + NMANY / 2, "%llu streams for %d shards in 2 epochs",
               (unsigned long long)s.streams, NMANY);
    ASSERT_EQ_INT(s.downloads, 0); /* the warm-up's sample too is read by its stream */
    ferry_dataset_release(remote);
    ferry_dataset_release(local);
    ft_http_stop(srv);
}

/* Connections dropped or stalled mid-body while streaming are resumed with
 * Range: the same digest as from disk. */
static void stream_survives(const ft_http_faults *f, const char *what)
{
    ft_http *srv = ft_http_start(www_ix(), NULL);
    ferry_image_config c = remote_cfg("remote/cache-sfault", smallest_plain() / 2);
    ferry_dataset *local = open_plain_local(), *remote;
    ASSERT_OK(open_plain_urls(ft_http_base(srv), &c, &remote));
    ft_http_set_faults(srv, f);
    double t0 = ferry_now();
    uint64_t a, b;
    ASSERT_OK(epoch_digest(local, true, FERRY_ON_ERROR_FAIL, &a, NULL));
    ASSERT_OK(epoch_digest(remote, true, FERRY_ON_ERROR_FAIL, &b, NULL));
    ASSERT_MSG(a == b, "%s: %llx from the URLs, %llx from disk", what, (unsigned long long)b,
               (unsigned long long)a);
    ferry_remote_stats s = stats_of(remote);
    ASSERT_MSG(s.retries > 0, "%s: no retries", what);
    ASSERT_MSG(ferry_now() - t0 < 60, "%s took %.1f s", what, ferry_now() - t0);
    ferry_dataset_release(remote);
    ferry_dataset_release(local);
    ft_http_stop(srv);
}

TEST(stream_dropped_mid_body_resumed)
{
    stream_survives(&(ft_http_faults){.drop_every = 2, .drop_after = 3000}, "drops");
}
TEST(stream_stall_times_out_and_resumes)
{
    stream_survives(&(ft_http_faults){.stall_every = 2, .stall_s = 2.5}, "stall");
}

/* A server that ignores Range, answering 200 with the whole file as python3
 * -m http.server does: random reads of members by Range (shards past the
 * cache's budget), the streaming order (the warm-up's and the stragglers'
 * Range reads), and, with bodies cut mid-way, every resume (a stream's, a
 * whole shard's into the cache) take from the whole body only the bytes
 * asked for: the digests are the disk's. (A resume that appended the whole
 * body after the bytes already had would fail or differ here.) */
static void range_ignored(const ft_http_faults *f, size_t budget, const char *what)
{
    ft_http *srv = ft_http_start(www_ix(), NULL);
    ferry_image_config c = remote_cfg("remote/cache-norange", budget);
    ferry_dataset *local = open_plain_local(), *remote;
    ASSERT_OK(open_plain_urls(ft_http_base(srv), &c, &remote));
    ft_http_set_faults(srv, f);
    for (int stream = 0; stream < 2; stream++) {
        uint64_t a, b;
        ASSERT_OK(epoch_digest(local, stream, FERRY_ON_ERROR_FAIL, &a, NULL));
        ASSERT_OK(epoch_digest(remote, stream, FERRY_ON_ERROR_FAIL, &b, NULL));
        ASSERT_MSG(a == b, "%s, %s: %llx from the URLs, %llx from disk", what,
                   stream ? "streaming" : "random", (unsigned long long)b, (unsigned long long)a);
    }
    ferry_remote_stats s = stats_of(remote);
    ASSERT_MSG(budget == 0 || s.range_reads > 0, "%s: no Range request was made", what);
    ASSERT_MSG(!f->drop_every || s.retries > 0, "%s: no body was cut and resumed", what);
    ASSERT_EQ_INT(s.failures, 0);
    ferry_dataset_release(remote);
    ferry_dataset_release(local);
    ft_http_stop(srv);
}

TEST(range_ignored_digests_equal_local)
{
    www_ix();
    range_ignored(&(ft_http_faults){.no_range = true}, smallest_plain() / 2, "Range ignored");
}
TEST(range_ignored_and_bodies_cut_resume_to_the_same_digest)
{
    const ft_http_faults f = {.no_range = true, .drop_every = 2, .drop_after = 3000};
    www_ix();
    range_ignored(&f, smallest_plain() / 2, "Range ignored, cut, by Range");
    range_ignored(&f, 0, "Range ignored, cut, whole shards");
}

/* A stream that cannot resume (the object changed when it reconnects) stops
 * the epoch with the URL and the byte offset under FAIL; under SKIP its
 * shard's remaining samples are skipped and counted, and every sample
 * delivered is whole: the batches hold exactly the samples not skipped. */
TEST(stream_failure_names_url_and_offset_never_partial)
{
    ft_http *srv = ft_http_start(www_ix(), NULL);
    ferry_image_config c = remote_cfg("remote/cache-sfail", smallest_plain() / 2);
    c.remote_retries = 1;
    ferry_dataset *remote;
    ASSERT_OK(open_plain_urls(ft_http_base(srv), &c, &remote));
    ft_http_set_faults(srv, &(ft_http_faults){.drop_every = 1, .drop_after = 3000,
                                              .etag_change_after = 1});
    uint64_t d;
    double t0 = ferry_now();
    ferry_status st = epoch_digest(remote, true, FERRY_ON_ERROR_FAIL, &d, NULL);
    ASSERT_STATUS(st, FERRY_ERR_IO);
    ASSERT_STR_CONTAINS(ferry_last_error(), ft_http_base(srv));
    ASSERT_STR_CONTAINS(ferry_last_error(), "at byte ");
    ASSERT_STR_CONTAINS(ferry_last_error(), "changed");
    /* Only b.tar changes: its first request delivers 12000 bytes (samples
     * the shuffle buffer asks for first) and every later one fails, so the
     * other shards' samples replace its skipped ones. (When every shard
     * changed, whether any replacement was left depended on timing.) The
     * other shards' streams are cut too, and resume. */
    ft_http_set_faults(srv, &(ft_http_faults){.drop_every = 1, .drop_after = 12000,
                                              .etag_change_after = 1, .etag_path = "/b.tar"});
    ferry_loader_config lc = ferry_loader_config_default();
    lc.dataset = remote;
    lc.batch_size = 5;
    lc.num_workers = 2;
    lc.device = ferry_cpu();
    lc.pin_memory = FERRY_PIN_MEMORY_OFF;
    lc.out_dtype = FERRY_DTYPE_U8;
    lc.on_error = FERRY_ON_ERROR_SKIP;
    lc.shuffle = true;
    lc.stream_shuffle_buffer = 8;
    ferry_loader *l;
    ASSERT_OK(ferry_loader_create(&lc, &l));
    /* Each delivered sample is the one on disk (skipped ones are replaced
     * by others, whole too). */
    ferry_dataset *local = open_plain_local();
    size_t sb = ferry_dataset_sample_bytes(local), got = 0;
    uint8_t *want = malloc(sb);
    ferry_batch b;
    while ((st = ferry_loader_next(l, NULL, &b)) == FERRY_OK)
        for (size_t j = 0; j < b.size; j++, got++) {
            int64_t lab;
            ASSERT_OK(ferry_dataset_get(local, b.indices[j], want, sb, NULL, &lab));
            ASSERT_MEM_EQ((const uint8_t *)ferry_tensor_data(b.images) + j * sb, want, sb);
        }
    free(want);
    ferry_dataset_release(local);
    ASSERT_STATUS(st, FERRY_END);
    ferry_loader_stats ls;
    ASSERT_OK(ferry_loader_stats_get(l, &ls));
    ASSERT_MSG(ls.skipped > 0 && got == NPLAIN * PER, "%zu delivered, %llu skipped", got,
               (unsigned long long)ls.skipped);
    ferry_loader_destroy(l);
    ASSERT_MSG(ferry_now() - t0 < 30, "took %.1f s", ferry_now() - t0);
    ferry_dataset_release(remote);
    ft_http_stop(srv);
}

/* The stream itself, below the loader (a PNG's CRC would catch stale bytes
 * there): a read that straddles the byte where the stream failed is an error
 * naming the URL, never the bytes that came and whatever the ring holds past
 * them; bytes before the failure are still read. The object's first request
 * is cut after 20000 bytes and it has changed when the stream resumes. */
TEST(stream_read_across_the_failure_is_an_error)
{
    need_curl();
    enum { SIZE = 65536, CUT = 20000 };
    static uint8_t obj[SIZE];
    for (size_t i = 0; i < SIZE; i++)
        obj[i] = (uint8_t)(i * 2654435761u >> 13);
    char dir[600], path[700], url[300];
    snprintf(dir, sizeof dir, "%s", ft_tmp("remote/raw"));
    snprintf(path, sizeof path, "%s/obj.bin", dir);
    ft_write_file(path, obj, SIZE);
    ft_http *srv = ft_http_start(dir, NULL);
    snprintf(url, sizeof url, "%s/obj.bin", ft_http_base(srv));
    char *paths[1] = {url};
    ferry_remote_setup su = {.paths = paths, .n = 1, .dir = ft_tmp("remote/cache-raw"),
                             .budget = SIZE, .opts = {.timeout_s = 5, .retries = 1,
                                                      .backoff_s = 0.01}};
    ferry_remote_cache *cache;
    ferry_remote_streams *rs;
    ASSERT_OK(ferry__remote_cache_create(&su, &cache));
    ASSERT_OK(ferry__remote_streams_create(paths, 1, cache, &su.opts, &rs));
    ft_http_set_faults(srv, &(ft_http_faults){.drop_every = 1, .drop_after = CUT,
                                              .etag_change_after = 1});
    ferry__remote_streams_reset(rs, true);
    const size_t seq[1] = {0};
    ferry__remote_streams_plan(rs, seq, 1, SIZE_MAX);
    uint8_t buf[1000];
    ASSERT_OK(ferry__remote_stream_read(rs, 0, 0, sizeof buf, buf));
    ASSERT_MEM_EQ(buf, obj, sizeof buf);
    ASSERT_STATUS(ferry__remote_stream_read(rs, 0, CUT - 500, sizeof buf, buf), FERRY_ERR_IO);
    ASSERT_STR_CONTAINS(ferry_last_error(), url);
    ASSERT_STR_CONTAINS(ferry_last_error(), "changed");
    ASSERT_OK(ferry__remote_stream_read(rs, 0, CUT - 2000, sizeof buf, buf));
    ASSERT_MEM_EQ(buf, obj + CUT - 2000, sizeof buf);
    ASSERT_STATUS(ferry__remote_stream_read(rs, 0, CUT + 1000, sizeof buf, buf), FERRY_ERR_IO);
    ferry__remote_streams_destroy(rs);
    ferry__remote_cache_destroy(cache);
    ft_http_stop(srv);
}

/* A stream closed while it waits to retry (a 503 with Retry-After: 3) stops
 * there: no request begun after the close (it began one more, which curl's
 * progress check then cut short, so only the counter showed it), and the
 * close does not wait out the backoff. */
TEST(stream_closed_in_its_backoff_asks_no_more)
{
    need_curl();
    enum { SIZE = 4096 };
    static uint8_t obj[SIZE];
    char dir[600], path[700], url[2][300];
    snprintf(dir, sizeof dir, "%s", ft_tmp("remote/raw2"));
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/obj%d.bin", dir, i);
        ft_write_file(path, obj, SIZE);
    }
    ft_http *srv = ft_http_start(dir, NULL);
    for (int i = 0; i < 2; i++)
        snprintf(url[i], sizeof url[i], "%s/obj%d.bin", ft_http_base(srv), i);
    char *paths[2] = {url[0], url[1]};
    ferry_remote_setup su = {.paths = paths, .n = 2, .dir = ft_tmp("remote/cache-raw2"),
                             .budget = SIZE, .opts = {.timeout_s = 5, .retries = 5,
                                                      .backoff_s = 0.01}};
    ferry_remote_cache *cache;
    ferry_remote_streams *rs;
    ASSERT_OK(ferry__remote_cache_create(&su, &cache));
    ASSERT_OK(ferry__remote_streams_create(paths, 2, cache, &su.opts, &rs));
    ft_http_set_faults(srv, &(ft_http_faults){.fail_first = 100000, .fail_status = 503,
                                              .retry_after = 3, .fail_path = "/obj1.bin"});
    ferry__remote_streams_reset(rs, true);
    const size_t seq[2] = {0, 1};
    ferry__remote_streams_plan(rs, seq, 2, SIZE_MAX);
    uint8_t buf[100];
    /* obj0's first read starts obj1's stream ahead: it meets the 503. */
    ASSERT_OK(ferry__remote_stream_read(rs, 0, 0, sizeof buf, buf));
    usleep(500000);
    ferry_remote_stats a = {0}, b = {0};
    ferry__remote_cache_stats(cache, &a);
    unsigned before = ft_http_requests(srv);
    double t0 = ferry_now();
    ferry__remote_streams_reset(rs, false);
    double took = ferry_now() - t0;
    usleep(300000);
    ferry__remote_cache_stats(cache, &b);
    ASSERT_MSG(a.retries > 0, "obj1's stream was not retrying");
    ASSERT_MSG(b.requests == a.requests && ft_http_requests(srv) == before,
               "%llu requests begun after the close (%u reached the server)",
               (unsigned long long)(b.requests - a.requests), ft_http_requests(srv) - before);
    ASSERT_MSG(took < 1.5, "the close took %.2f s", took);
    ferry__remote_streams_destroy(rs);
    ferry__remote_cache_destroy(cache);
    ft_http_stop(srv);
}

/* A shard that failed is tried again later: in the streaming order at the
 * next epoch; through the cache once 3 x timeout_s have passed. */
TEST(failed_shard_is_retried_later)
{
    ft_http *srv = ft_http_start(www(), NULL);
    ferry_image_config c = remote_cfg("remote/cache-retry", largest_shard() * 3 / 2);
    c.remote_retries = 1;
    ferry_dataset *local = open_local(), *remote;
    ASSERT_OK(open_urls(ft_http_base(srv), &c, &remote));
    for (int stream = 0; stream < 2; stream++) {
        ft_http_set_faults(srv, &(ft_http_faults){.fail_first = 100000, .fail_status = 503,
                                                  .fail_path = "/b.tar"});
        uint64_t a, d, skipped = 0;
        ASSERT_OK(epoch_digest(remote, stream, FERRY_ON_ERROR_SKIP, &d, &skipped));
        ASSERT_MSG(skipped >= PER, "skipped %llu", (unsigned long long)skipped);
        ft_http_set_faults(srv, &(ft_http_faults){0});
        if (!stream)
            sleep(3 * (unsigned)c.remote_timeout_s + 1);
        ASSERT_OK(epoch_digest(local, stream, FERRY_ON_ERROR_FAIL, &a, NULL));
        ASSERT_OK(epoch_digest(remote, stream, FERRY_ON_ERROR_FAIL, &d, &skipped));
        ASSERT_MSG(a == d, "%s: %llx after the retry, %llx from disk",
                   stream ? "streaming" : "random", (unsigned long long)d, (unsigned long long)a);
    }
    ferry_dataset_release(remote);
    ferry_dataset_release(local);
    ft_http_stop(srv);
}

/* More ranks than shards: every rank gets the same number of batches (and
 * samples) per epoch, in random and streaming order, so no rank waits at the
 * epoch's end for a batch another never gets. */
TEST(ranks_get_equal_batches_with_fewer_shards_than_ranks)
{
    ft_http *srv = ft_http_start(www(), NULL);
    ferry_image_config ic = remote_cfg("remote/cache-ranks", 0);
    ferry_dataset *ds;
    ASSERT_OK(open_urls(ft_http_base(srv), &ic, &ds));
    for (int stream = 0; stream < 2; stream++) {
        size_t want = 0;
        for (size_t rank = 0; rank < 6; rank++) {
            ferry_loader_config c = rank_cfg(ds, 3, stream ? 4 : 0, 6, rank);
            c.batch_size = 3;
            ferry_loader *l;
            ASSERT_OK(ferry_loader_create(&c, &l));
            size_t batches = 0;
            ferry_batch b;
            ferry_status st;
            while ((st = ferry_loader_next(l, NULL, &b)) == FERRY_OK)
                batches++;
            ASSERT_STATUS(st, FERRY_END);
            ferry_loader_destroy(l);
            if (rank == 0)
                want = batches;
            ASSERT_MSG(batches == want && want > 0, "%s: rank %zu got %zu batches, rank 0 %zu",
                       stream ? "streaming" : "random", rank, batches, want);
        }
    }
    ferry_dataset_release(ds);
    ft_http_stop(srv);
}

static ferry_loader_config resume_cfg(ferry_dataset *ds, bool stream, size_t world, size_t rank)
{
    return rank_cfg(ds, 9, stream ? 6 : 0, world, rank);
}

/* A batch's digest: its indices, image bytes and labels. */
static uint64_t batch_digest(const ferry_batch *b)
{
    uint64_t h = ft_batch_digest(FT_DIGEST_SEED, b);
    for (size_t i = 0; i < b->size; i++)
        h = (h ^ (uint64_t)b->indices[i]) * 1099511628211ull;
    return h;
}

/* Resume across remote shards: a loader stopped after 3 batches, its state
 * through its text form, restored in a new loader over a new dataset (its own
 * cache, as a restarted process has) gives the uninterrupted run's remaining
 * batches bit for bit, in random and streaming order, on one process and on
 * rank 1 of 2. */
TEST(resume_mid_epoch_gives_the_same_remaining_batches)
{
    ft_http *srv = ft_http_start(www(), NULL);
    for (int stream = 0; stream < 2; stream++)
        for (size_t world = 1; world <= 2; world++) {
            size_t rank = world - 1;
            ferry_image_config ic = remote_cfg("remote/cache-resume", 0);
            ferry_dataset *ds;
            ASSERT_OK(open_urls(ft_http_base(srv), &ic, &ds));
            ferry_loader_config c = resume_cfg(ds, stream, world, rank);
            ferry_loader *l;
            ASSERT_OK(ferry_loader_create(&c, &l));
            ASSERT_OK(ferry_loader_reset(l, 2));
            uint64_t whole[64];
            size_t n = 0;
            ferry_batch b;
            ferry_status st;
            while ((st = ferry_loader_next(l, NULL, &b)) == FERRY_OK)
                whole[n++] = batch_digest(&b);
            ASSERT_STATUS(st, FERRY_END);
            ASSERT(n > 3);
            /* Interrupted: 3 batches, then the state as a checkpoint keeps it. */
            ASSERT_OK(ferry_loader_reset(l, 2));
            for (size_t k = 0; k < 3; k++) {
                ASSERT_OK(ferry_loader_next(l, NULL, &b));
                ASSERT_MSG(batch_digest(&b) == whole[k], "batch %zu differs before the stop", k);
            }
            ferry_loader_state s, back;
            char text[FERRY_LOADER_STATE_TEXT_MAX];
            ASSERT_OK(ferry_loader_state_get(l, &s));
            ASSERT_OK(ferry_loader_state_format(&s, text, sizeof text));
            ferry_loader_destroy(l);
            ferry_dataset_release(ds);
            ASSERT_OK(ferry_loader_state_parse(text, &back));

            ferry_image_config ic2 = remote_cfg("remote/cache-resume", 0);
            ASSERT_OK(open_urls(ft_http_base(srv), &ic2, &ds));
            c = resume_cfg(ds, stream, world, rank);
            ASSERT_OK(ferry_loader_create(&c, &l));
            ASSERT_OK(ferry_loader_restore(l, &back));
            size_t k = 3;
            while ((st = ferry_loader_next(l, NULL, &b)) == FERRY_OK) {
                ASSERT_MSG(k < n && batch_digest(&b) == whole[k], "%s, world %zu: batch %zu "
                           "after the resume differs from the uninterrupted run's",
                           stream ? "streaming" : "random", world, k);
                k++;
            }
            ASSERT_STATUS(st, FERRY_END);
            ASSERT_EQ_SIZE(k, n);
            ferry_loader_destroy(l);
            ferry_dataset_release(ds);
        }
    ft_http_stop(srv);
}

/* The stats once no transfer moves (bytes_fetched the same over 200 ms, 5 s
 * at most): a fetch that create's indexing started may still be finishing
 * when create returns, and its bytes are not the epoch's. */
static ferry_remote_stats settled_stats(const ferry_dataset *ds)
{
    ferry_remote_stats s = stats_of(ds);
    for (int i = 0; i < 25; i++) {
        usleep(200000);
        ferry_remote_stats t = stats_of(ds);
        if (t.bytes_fetched == s.bytes_fetched)
            return t;
        s = t;
    }
    return s;
}

/* Streaming over 2 ranks with a read-ahead of one sample (buffer 1): each
 * rank's samples are 2 whole shards of the 4, and what it fetches in the
 * epoch is never more than those 2 shards' bytes and the next epoch's head
 * (an interleaved split had each rank read all 4; a warm-up through the
 * cache fetched shard 0 whole on every rank, a warm-up by Range a member of
 * it).
 * Each rank has a cache of its own, room for 2. */
TEST(streaming_ranks_fetch_only_their_own_shards)
{
    ft_http *srv = ft_http_start(www(), NULL);
    size_t biggest = largest_shard();
    bool mine[2][NSHARDS] = {{0}};
    for (size_t rank = 0; rank < 2; rank++) {
        ferry_image_config ic = remote_cfg("remote/cache-ranks-bytes", 2 * biggest);
        ferry_dataset *ds;
        ASSERT_OK(open_urls(ft_http_base(srv), &ic, &ds));
        ferry_remote_stats before = settled_stats(ds);
        ferry_loader_config c = resume_cfg(ds, true, 2, rank);
        c.stream_shuffle_buffer = 1;
        c.num_workers = 1;
        ferry_loader *l;
        ASSERT_OK(ferry_loader_create(&c, &l));
        ferry_batch b;
        ferry_status st;
        while ((st = ferry_loader_next(l, NULL, &b)) == FERRY_OK)
            for (size_t i = 0; i < b.size; i++)
                mine[rank][b.indices[i] / PER] = true; /* shard s holds s * PER .. */
        ASSERT_STATUS(st, FERRY_END);
        ferry_loader_destroy(l);
        ferry_remote_stats after = stats_of(ds);
        size_t count = 0;
        uint64_t own_bytes = 0;
        for (size_t s = 0; s < NSHARDS; s++)
            if (mine[rank][s]) {
                count++;
                own_bytes += shard_bytes(s);
            }
        ASSERT_MSG(count == 2, "rank %zu read samples of %zu shards, want 2", rank, count);
        /* Its own shards only, and the head stream of its first shard of
         * the next epoch (which this loader never reaches), one shard at
         * most. Create's warm-up (each worker decodes a sample to size its
         * buffers) reads the rank's first sample through its stream: no
         * byte of shard 0 unless the rank owns it. */
        own_bytes += biggest;
        ASSERT_MSG(after.bytes_fetched - before.bytes_fetched <= own_bytes,
                   "rank %zu fetched %llu bytes in the epoch, its shards and the next epoch's "
                   "head have %llu "
                   "(%llu downloads, %llu evictions, %llu requests)", rank,
                   (unsigned long long)(after.bytes_fetched - before.bytes_fetched),
                   (unsigned long long)own_bytes,
                   (unsigned long long)(after.downloads - before.downloads),
                   (unsigned long long)(after.evictions - before.evictions),
                   (unsigned long long)(after.requests - before.requests));
        ASSERT_EQ_INT(after.downloads - before.downloads, 0);
        ferry_dataset_release(ds);
    }
    for (size_t s = 0; s < NSHARDS; s++)
        ASSERT_MSG(mine[0][s] != mine[1][s], "shard %zu read by %s", s,
                   mine[0][s] ? "both ranks" : "no rank");
    ft_http_stop(srv);
}

/* ferry__remote_put (ferry pack --upload): the file arrives whole through a
 * 503 burst; a server that resets every PUT, or answers 403, is an error
 * naming the URL, after the retries (reset) or at once (403). */
TEST(put_uploads_through_transient_failures_and_names_refusals)
{
    need_curl();
    const char *src = ft_tmp("remote/www/a.tar");
    www();
    ft_write_file(ft_tmp("remote/up/.made"), "", 0);
    ft_http *srv = ft_http_start(ft_tmp("remote/up"), &(ft_http_faults){.fail_first = 2,
                                                                          .fail_status = 503});
    char url[300];
    snprintf(url, sizeof url, "%s/a-copy.tar", ft_http_base(srv));
    ferry_remote_opts o = {.timeout_s = 1, .retries = 3, .backoff_s = 0.01};
    ASSERT_OK(ferry__remote_put(url, src, &o));
    ASSERT_EQ_INT(ft_http_requests(srv), 3);
    size_t n, m;
    uint8_t *a = ft_read_file(src, &n), *b = ft_read_file(ft_tmp("remote/up/a-copy.tar"), &m);
    ASSERT_EQ_SIZE(m, n);
    ASSERT_MEM_EQ(b, a, n);
    free(a);
    free(b);

    ft_http_set_faults(srv, &(ft_http_faults){.drop_every = 1});
    unsigned before = ft_http_requests(srv);
    snprintf(url, sizeof url, "%s/reset.tar", ft_http_base(srv));
    ASSERT_STATUS(ferry__remote_put(url, src, &o), FERRY_ERR_IO);
    ASSERT_STR_CONTAINS(ferry_last_error(), url);
    ASSERT_STR_CONTAINS(ferry_last_error(), "gave up after 4 tries");
    ASSERT_EQ_INT(ft_http_requests(srv) - before, 4);

    ft_http_set_faults(srv, &(ft_http_faults){.fail_first = 99, .fail_status = 403});
    before = ft_http_requests(srv);
    snprintf(url, sizeof url, "%s/refused.tar", ft_http_base(srv));
    ASSERT_STATUS(ferry__remote_put(url, src, &o), FERRY_ERR_IO);
    ASSERT_STR_CONTAINS(ferry_last_error(), url);
    ASSERT_STR_CONTAINS(ferry_last_error(), "HTTP 403");
    ASSERT_EQ_INT(ft_http_requests(srv) - before, 1);
    struct stat sb;
    ASSERT(stat(ft_tmp("remote/up/refused.tar"), &sb) != 0 && stat(ft_tmp("remote/up/reset.tar"), &sb) != 0);
    ft_http_stop(srv);
}

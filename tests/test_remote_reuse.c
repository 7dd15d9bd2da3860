/* Kept-alive connections (ferry_remote_conn, src/dataset/remote/remote_fetch.c):
 * a stream slot's thread and the pool of Range reads keep one libcurl handle
 * each, reset between requests, so that shard after shard goes over one
 * connection instead of a new one per shard. Checked against the loopback
 * server's own count of the connections it accepted (harness_http.c's
 * keep_alive mode): fewer connections than requests; ferry's count (the
 * `connections` counter) the same as the server's; a request after an error
 * status, after the server closed the connection unannounced, or after a body
 * cut short still succeeds, byte for byte; and nothing of one request (an S3
 * session token, a Range) reaches the next on the same handle. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dataset/remote/remote.h"
#include "harness.h"
#include "harness_http.h"

enum { NSH = 12, PER = 9, IW = 7, IH = 5, SLOTS = 8 };

static char paths[NSH][600];

/* The shards in ft_tmp("reuse/www"), made once. */
static const char *www(void)
{
    static bool made;
    ft_require_curl();
    if (!made)
        ft_indexed_png_shards("reuse/www", NSH, PER, IW, IH, paths);
    made = true;
    return ft_tmp("reuse/www");
}

static const ferry_remote_opts opts = {.timeout_s = 2, .retries = 3, .backoff_s = 0.01};

static void url_of(const ft_http *srv, size_t s, char *out, size_t cap)
{
    snprintf(out, cap, "%s/sh%02zu.tar", ft_http_base(srv), s);
}

static int to_buf(void *arg, const uint8_t *b, size_t n)
{
    uint8_t **at = arg;
    memcpy(*at, b, n);
    *at += n;
    return 0;
}

/* Shard s whole over c (stat on a handle of its own first), checked against
 * the file. */
static void get_shard(ferry_remote_conn *c, const ft_http *srv, size_t s,
                      ferry_remote_counters *cnt)
{
    char url[300];
    url_of(srv, s, url, sizeof url);
    ferry_remote_obj obj;
    ASSERT_OK(ferry__remote_stat(url, &opts, cnt, &obj));
    size_t n;
    uint8_t *want = ft_read_file(paths[s], &n);
    ASSERT_EQ_SIZE(obj.size, n);
    uint8_t *got = malloc(n), *at = got;
    ASSERT(got);
    ASSERT_OK(ferry__remote_conn_get(c, url, &opts, &obj, 0, obj.size, to_buf, NULL, &at, cnt));
    ASSERT_EQ_SIZE((size_t)(at - got), n);
    ASSERT_MEM_EQ(got, want, n);
    free(got);
    free(want);
}

/* N shards through one conn: one connection for the N GETs (the stats'
 * HEADs each have their own), and ferry counts what the server counts. */
TEST(one_conn_fetches_every_shard_on_one_connection)
{
    ft_http *srv = ft_http_start(www(), &(ft_http_faults){.keep_alive = true});
    ferry_remote_conn *c;
    ASSERT_OK(ferry__remote_conn_create(&c));
    ferry_remote_counters cnt = {0};
    for (size_t s = 0; s < NSH; s++)
        get_shard(c, srv, s, &cnt);
    ferry__remote_conn_destroy(c);
    ASSERT_EQ_INT(ft_http_count(srv, "GET /sh"), NSH);
    ASSERT_EQ_INT(ft_http_connections(srv), NSH + 1); /* NSH stats, one for the GETs */
    ASSERT_EQ_INT(atomic_load(&cnt.connects), NSH + 1);
    ASSERT_EQ_INT(atomic_load(&cnt.requests), 2 * NSH);
    ft_http_stop(srv);
}

/* A server that closes each connection after k answers without saying so
 * (an idle timeout): every request still succeeds, on a new connection
 * when the kept one is gone. */
TEST(a_connection_the_server_closed_is_replaced)
{
    ft_http *srv = ft_http_start(www(), &(ft_http_faults){.keep_alive = true, .keep_max = 2});
    ferry_remote_conn *c;
    ASSERT_OK(ferry__remote_conn_create(&c));
    ferry_remote_counters cnt = {0};
    char url[300];
    url_of(srv, 0, url, sizeof url);
    ferry_remote_obj obj;
    ASSERT_OK(ferry__remote_stat(url, &opts, &cnt, &obj));
    size_t n;
    uint8_t *want = ft_read_file(paths[0], &n), *got = malloc(n);
    ASSERT(got);
    unsigned c0 = ft_http_connections(srv);
    for (int i = 0; i < 6; i++) {
        uint64_t off = (uint64_t)i * 100;
        memset(got, 0, n);
        ASSERT_OK(ferry__remote_conn_read(c, url, &opts, &obj, off, 700, got, &cnt));
        ASSERT_MEM_EQ(got, want + off, 700);
    }
    /* Two answers per connection: 3 connections for 6 reads, none of them retried. */
    ASSERT_EQ_INT(ft_http_connections(srv) - c0, 3);
    ASSERT_EQ_INT(atomic_load(&cnt.retries), 0);
    ferry__remote_conn_destroy(c);
    free(got);
    free(want);
    ft_http_stop(srv);
}

/* Error statuses on a kept-alive connection: a 503 tried again, a 404 that
 * fails, then a read that comes whole, all on the one connection (an HTTP
 * error is an answer on a sound connection, not a broken one). */
TEST(error_statuses_keep_the_connection_and_the_next_request_succeeds)
{
    ft_http *srv = ft_http_start(www(), &(ft_http_faults){.keep_alive = true});
    ferry_remote_conn *c;
    ASSERT_OK(ferry__remote_conn_create(&c));
    ferry_remote_counters cnt = {0};
    char url[300], missing[300];
    url_of(srv, 1, url, sizeof url);
    snprintf(missing, sizeof missing, "%s/none.tar", ft_http_base(srv));
    ferry_remote_obj obj;
    ASSERT_OK(ferry__remote_stat(url, &opts, &cnt, &obj));
    size_t n;
    uint8_t *want = ft_read_file(paths[1], &n), got[700];
    ft_http_set_faults(srv, &(ft_http_faults){.keep_alive = true, .fail_first = 1,
                                              .fail_status = 503});
    unsigned c0 = ft_http_connections(srv);
    ASSERT_OK(ferry__remote_conn_read(c, url, &opts, &obj, 0, sizeof got, got, &cnt));
    ASSERT_MEM_EQ(got, want, sizeof got);
    ASSERT_EQ_INT(atomic_load(&cnt.retries), 1);
    ASSERT_STATUS(ferry__remote_conn_read(c, missing, &opts, &obj, 0, sizeof got, got, &cnt),
                  FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "404");
    ASSERT_OK(ferry__remote_conn_read(c, url, &opts, &obj, 700, sizeof got, got, &cnt));
    ASSERT_MEM_EQ(got, want + 700, sizeof got);
    ASSERT_EQ_INT(ft_http_count(srv, "GET /"), 4);
    ASSERT_EQ_INT(ft_http_connections(srv) - c0, 1);
    ferry__remote_conn_destroy(c);
    free(want);
    ft_http_stop(srv);
}

/* A body cut short mid-shard: the request fails below HTTP, so its
 * connection is not used again; the retry connects afresh and resumes with
 * a Range from the last good byte, and the next shard comes whole too. */
TEST(a_body_cut_short_is_retried_on_a_fresh_connection)
{
    ft_http *srv = ft_http_start(www(), &(ft_http_faults){.keep_alive = true});
    ferry_remote_conn *c;
    ASSERT_OK(ferry__remote_conn_create(&c));
    ferry_remote_counters cnt = {0};
    char url[300];
    url_of(srv, 3, url, sizeof url);
    ferry_remote_obj obj;
    ASSERT_OK(ferry__remote_stat(url, &opts, &cnt, &obj));
    ASSERT(obj.size > 3000);
    /* Of get_shard's requests, the stat (0) passes, the GET (1) is cut
     * after 1000 bytes, and its retry (2) passes. */
    ft_http_set_faults(srv, &(ft_http_faults){.keep_alive = true, .drop_every = 2,
                                              .drop_after = 1000});
    unsigned c0 = ft_http_connections(srv);
    get_shard(c, srv, 3, &cnt);
    ASSERT_EQ_INT(atomic_load(&cnt.retries), 1);
    ASSERT_EQ_INT(ft_http_count(srv, "Range: bytes=1000-"), 1);
    /* The stat's own connection, the GET's, and the retry's new one. */
    ASSERT_EQ_INT(ft_http_connections(srv) - c0, 3);
    ASSERT_EQ_INT(atomic_load(&cnt.connects), 1 + 3);
    ft_http_set_faults(srv, &(ft_http_faults){.keep_alive = true});
    get_shard(c, srv, 4, &cnt); /* on the retry's connection, kept */
    ASSERT_EQ_INT(ft_http_connections(srv) - c0, 3 + 1);
    ferry__remote_conn_destroy(c);
    ft_http_stop(srv);
}

/* The handle is reset between requests: an s3:// request's signature and
 * session token go with it alone, not with the plain request after it on the
 * same connection; nor does one read's Range reach a whole-object GET. */
TEST(nothing_of_one_request_reaches_the_next)
{
    www();
    size_t n;
    uint8_t *want = ft_read_file(paths[5], &n);
    ft_write_file(ft_tmp("reuse/www/bucket/a.tar"), want, n);
    ft_http *srv = ft_http_start(ft_tmp("reuse/www"), &(ft_http_faults){.keep_alive = true});
    setenv("AWS_ACCESS_KEY_ID", "AKIDTEST", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "secret-key", 1);
    setenv("AWS_SESSION_TOKEN", "tok-REUSE-456", 1);
    setenv("AWS_REGION", "us-east-1", 1);
    setenv("AWS_ENDPOINT_URL", ft_http_base(srv), 1);
    ferry_remote_conn *c;
    ASSERT_OK(ferry__remote_conn_create(&c));
    ferry_remote_counters cnt = {0};
    ferry_remote_obj obj;
    ASSERT_OK(ferry__remote_stat("s3://bucket/a.tar", &opts, &cnt, &obj));
    ASSERT_EQ_SIZE(obj.size, n);
    uint8_t part[100];
    ferry_status st = ferry__remote_conn_read(c, "s3://bucket/a.tar", &opts, &obj, 512,
                                              sizeof part, part, &cnt);
    unsetenv("AWS_ACCESS_KEY_ID");
    unsetenv("AWS_SECRET_ACCESS_KEY");
    unsetenv("AWS_SESSION_TOKEN");
    unsetenv("AWS_REGION");
    unsetenv("AWS_ENDPOINT_URL");
    ASSERT_OK(st);
    ASSERT_MEM_EQ(part, want + 512, sizeof part);
    unsigned c0 = ft_http_connections(srv);
    char url[300];
    snprintf(url, sizeof url, "%s/bucket/a.tar", ft_http_base(srv));
    uint8_t *got = malloc(n), *at = got;
    ASSERT(got);
    ASSERT_OK(ferry__remote_conn_get(c, url, &opts, &obj, 0, n, to_buf, NULL, &at, &cnt));
    ASSERT_EQ_SIZE((size_t)(at - got), n);
    ASSERT_MEM_EQ(got, want, n);
    ASSERT_EQ_INT(ft_http_connections(srv), c0); /* the s3 read's connection, reused */
    ASSERT_EQ_INT(ft_http_count(srv, "x-amz-security-token: tok-REUSE-456"), 2); /* HEAD, GET */
    ASSERT_EQ_INT(ft_http_count(srv, "Authorization"), 2);
    ASSERT_EQ_INT(ft_http_count(srv, "Range:"), 1);
    ferry__remote_conn_destroy(c);
    free(got);
    free(want);
    ft_http_stop(srv);
}

/* ---- through the loader: the stream slots' connections ---- */

static ferry_dataset *open_local(void)
{
    www();
    return ft_local_shards_dataset(paths, NSH);
}

static ferry_remote_stats stats_of(const ferry_dataset *ds)
{
    ferry_remote_stats s;
    ASSERT(ferry__dataset_remote_stats(ds, &s));
    return s;
}

/* 12 shards in 3 epochs over 8 slots: 30-odd streams, on about one
 * connection per slot instead of one per stream; the batches those of disk.
 * Without keep-alive, as before: one connection per request, and ferry's
 * count agrees with the server's both times. */
static void streams_over(bool keep, size_t workers)
{
    ft_http *srv = ft_http_start(www(), &(ft_http_faults){.keep_alive = keep});
    ferry_dataset *local = open_local();
    ferry_dataset *remote = ft_http_shards_dataset(srv, NSH, keep ? "reuse/cache-keep" : "reuse/cache-close");
    /* From here on (the dataset's create has asked and ended its requests),
     * both counts include the loader's warm-up read. */
    ferry_remote_stats s0 = stats_of(remote);
    unsigned c0 = ft_http_connections(srv);
    ferry_loader *a = ft_streaming_loader(local, workers, 9), *b = ft_streaming_loader(remote, workers, 9);
    for (uint64_t e = 0; e < 3; e++) {
        ASSERT_OK(ferry_loader_reset(a, e));
        ASSERT_OK(ferry_loader_reset(b, e));
        uint64_t x = ft_epoch_digest(a), y = ft_epoch_digest(b);
        ASSERT_MSG(x == y, "epoch %llu: %llx from the URLs, %llx from disk",
                   (unsigned long long)e, (unsigned long long)y, (unsigned long long)x);
    }
    /* The next epoch's head stream may be connecting still (counted by
     * ferry at its socket, by the server at its accept, 50 ms polls apart):
     * the two counts are compared once they have settled, within seconds. */
    ferry_remote_stats s;
    unsigned conns = 0;
    for (int i = 0; i < 100; i++) {
        s = stats_of(remote);
        ferry__remote_stats_since(&s, &s0);
        conns = ft_http_connections(srv) - c0;
        if (s.connections == conns && (keep || conns == s.requests))
            break;
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    ASSERT_MSG(s.streams >= 2 * NSH, "%llu streams for %d shards in 3 epochs",
               (unsigned long long)s.streams, NSH);
    ASSERT_EQ_INT(s.connections, conns);
    /* One per slot as a rule (8 for 37 requests); a stream closed mid-body
     * (replaced, or at a reset) drops its connection, so a few more. */
    if (keep)
        ASSERT_MSG(conns < s.requests / 2,
                   "%u connections for %llu requests (%llu streams, %llu Range reads) on %d "
                   "slots", conns, (unsigned long long)s.requests, (unsigned long long)s.streams,
                   (unsigned long long)s.range_reads, SLOTS);
    else
        ASSERT_EQ_INT(conns, s.requests);
    ferry_loader_destroy(a);
    ferry_loader_destroy(b);
    ferry_dataset_release(local);
    ferry_dataset_release(remote);
    ft_http_stop(srv);
}

TEST(stream_slots_keep_their_connections)
{
    streams_over(true, 2);
}

TEST(stream_slots_keep_their_connections_one_worker)
{
    streams_over(true, 1);
}

TEST(a_server_that_closes_every_connection_is_counted_as_such)
{
    streams_over(false, 2);
}

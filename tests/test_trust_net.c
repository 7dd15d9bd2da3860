/* What a server, an object store or a crafted file may not do to ferry
 * (SECURITY.md): an index whose offsets wrap is not trusted; an index larger
 * than its shard can need is not fetched; the session token never follows a
 * redirect; a server trickling bytes meets a deadline; a URL's password is
 * never printed; uploads go over HTTP only, and a permanent error is not
 * retried; a gzip IDX file is inflated no further than its header promises.
 * Servers are the tests' own, on 127.0.0.1. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "common/error.h" /* ferry_now */
#include "common/redact.h"
#include "dataset/remote/remote.h"
#include "dataset/shards/shards.h"
#include "harness.h"
#include "harness_http.h"

enum { IW = 8, IH = 6, PER = 5, INDEX_HEAD = 112 };

static void need_curl(void)
{
#ifndef FERRY_HAVE_CURL
    SKIP("built without libcurl (CURL=0): no URL is fetched");
#endif
}

static void add_sample(ft_tar *t, size_t i)
{
    uint8_t px[IW * IH];
    for (size_t j = 0; j < sizeof px; j++)
        px[j] = (uint8_t)(i * 29 + j * 5);
    char key[32];
    snprintf(key, sizeof key, "k%03zu", i);
    ft_tar_png_sample(t, key, px, IW, IH, i % 3, "trust/tmp.png");
}

/* A shard of PER samples at ft_tmp(rel); its path (a copy). */
static char *make_shard(const char *rel)
{
    ft_tar t = {0};
    for (size_t k = 0; k < PER; k++)
        add_sample(&t, k);
    ft_tar_end(&t);
    return strdup(ft_tar_save(&t, rel));
}

static size_t file_size(const char *path)
{
    struct stat sb;
    ASSERT(stat(path, &sb) == 0);
    return (size_t)sb.st_size;
}

static void assert_same_samples(ferry_dataset *a, ferry_dataset *b)
{
    ASSERT_EQ_SIZE(ferry_dataset_len(a), ferry_dataset_len(b));
    size_t n = ferry_dataset_sample_bytes(a);
    uint8_t *x = malloc(n), *y = malloc(n);
    for (size_t i = 0; i < ferry_dataset_len(a); i++) {
        int64_t la = -1, lb = -2;
        ASSERT_OK(ferry_dataset_get(a, i, x, n, NULL, &la));
        ASSERT_OK(ferry_dataset_get(b, i, y, n, NULL, &lb));
        ASSERT_MEM_EQ(x, y, n);
        ASSERT_EQ_INT(la, lb);
    }
    free(x);
    free(y);
}

/* Every log line, kept for the checks. */
static char logged[64][FERRY_ERROR_MAX];
static size_t nlogged;
static void keep_log(ferry_log_level level, const char *msg, void *user)
{
    (void)level, (void)user;
    if (nlogged < 64)
        snprintf(logged[nlogged++], sizeof logged[0], "%s", msg);
}
static bool logged_has(const char *needle)
{
    for (size_t i = 0; i < nlogged; i++)
        if (strstr(logged[i], needle))
            return true;
    return false;
}

/* ---- item 2: a shard index whose offset wraps past 2^64 ---- */

TEST(index_with_a_wrapped_offset_is_not_trusted)
{
    char *shard = make_shard("trust/ix/a.tar");
    ferry_image_config c = ferry_image_config_default();
    c.shard_index_cache = true; /* writes a.tar.ferry-index beside it */
    ferry_dataset *ref, *ds;
    ASSERT_OK(ferry_dataset_shards((const char *const *)&shard, 1, NULL, &ref));
    ASSERT_OK(ferry_dataset_shards((const char *const *)&shard, 1, &c, &ds));
    ferry_dataset_release(ds);
    char ip[4200];
    snprintf(ip, sizeof ip, "%s.ferry-index", shard);
    size_t n;
    uint8_t *d = ft_read_file(ip, &n);
    ASSERT(n > INDEX_HEAD + sizeof(ferry_shard_sample) && !memcmp(d, "FERRYIX1", 8));
    /* The first record's image: 64 MiB at 2^64 - 64 MiB + 1000, which wraps
     * to an end of byte 1000, inside the shard; the CRC made right again, as
     * anyone who writes the file can. */
    ferry_shard_sample rec;
    memcpy(&rec, d + INDEX_HEAD, sizeof rec);
    ASSERT_EQ_INT(rec.problem, FERRY_SHARD_OK);
    rec.img_size = (uint64_t)64 << 20;
    rec.img_off = 0 - rec.img_size + 1000;
    memcpy(d + INDEX_HEAD, &rec, sizeof rec);
    uint32_t crc = (uint32_t)crc32(crc32(0, NULL, 0), d, (uInt)(n - 4));
    memcpy(d + n - 4, &crc, 4);

    ferry_shard_part p;
    bool found = true;
    ASSERT_OK(ferry__shard_index_parse(d, n, shard, file_size(shard), 0, &p, &found));
    ASSERT_MSG(!found, "an index with an image at byte %llu of a %zu-byte shard was accepted",
               (unsigned long long)rec.img_off, file_size(shard));

    /* Kept beside the shard, it is not used: the shard is indexed again and
     * every sample reads as the reference does. */
    ft_write_file(ip, d, n);
    free(d);
    ASSERT_OK(ferry_dataset_shards((const char *const *)&shard, 1, &c, &ds));
    assert_same_samples(ref, ds);
    ferry_dataset_release(ds);
    ferry_dataset_release(ref);
    free(shard);
}

/* ---- item 4: an index fetch is bounded by the shard it describes ---- */

TEST(index_larger_than_its_shard_can_need_is_not_fetched)
{
    need_curl();
    char *shard = make_shard("trust/www4/a.tar");
    ferry_image_config c = ferry_image_config_default();
    c.shard_index_cache = true;
    ferry_dataset *ref, *ds;
    ASSERT_OK(ferry_dataset_shards((const char *const *)&shard, 1, &c, &ref));
    char ip[4200];
    snprintf(ip, sizeof ip, "%s.ferry-index", shard);
    /* A real index fits the limit, with room; 16 MiB does not. */
    size_t real = file_size(ip), cap = ferry__shard_index_max_bytes(file_size(shard));
    ASSERT_MSG(real <= cap / 2, "the index of a %zu-byte shard is %zu bytes, the limit %zu",
               file_size(shard), real, cap);
    ASSERT(cap < ((size_t)16 << 20));
    ASSERT_EQ_SIZE(ferry__shard_index_max_bytes((uint64_t)1 << 40), (size_t)64 << 20);
    int fd = open(ip, O_WRONLY | O_TRUNC);
    ASSERT(fd >= 0 && ftruncate(fd, (off_t)16 << 20) == 0); /* sparse: no bytes on disk */
    close(fd);

    ft_http *srv = ft_http_start(ft_tmp("trust/www4"), NULL);
    char url[300], cache[300];
    snprintf(url, sizeof url, "%s/a.tar", ft_http_base(srv));
    snprintf(cache, sizeof cache, "%s", ft_tmp("trust/cache4"));
    ferry_image_config rc = ferry_image_config_default();
    rc.remote_cache_dir = cache;
    rc.remote_timeout_s = 2;
    const char *u = url;
    nlogged = 0;
    ferry_set_log(keep_log, NULL);
    ferry_status st = ferry_dataset_shards(&u, 1, &rc, &ds);
    ferry_set_log(NULL, NULL);
    ASSERT_OK(st);
    ASSERT_EQ_INT(ft_http_count(srv, "GET /a.tar.ferry-index"), 0);
    ASSERT_MSG(logged_has("a.tar.ferry-index") && logged_has("-byte limit"),
               "no warning names the index and its limit (%zu lines logged)", nlogged);
    assert_same_samples(ref, ds);
    ferry_dataset_release(ds);
    ferry_dataset_release(ref);
    ft_http_stop(srv);
    free(shard);
}

/* ---- item 3: credentials never follow a redirect ---- */

static void set_aws(const char *endpoint)
{
    setenv("AWS_ACCESS_KEY_ID", "AKIDTEST", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "secret-key", 1);
    setenv("AWS_SESSION_TOKEN", "tok-S3SSION-123", 1);
    setenv("AWS_REGION", "us-east-1", 1);
    setenv("AWS_ENDPOINT_URL", endpoint, 1);
}

static void unset_aws(void)
{
    unsetenv("AWS_ACCESS_KEY_ID");
    unsetenv("AWS_SECRET_ACCESS_KEY");
    unsetenv("AWS_SESSION_TOKEN");
    unsetenv("AWS_REGION");
    unsetenv("AWS_ENDPOINT_URL");
}

TEST(s3_session_token_never_follows_a_redirect)
{
    need_curl();
    char *shard = make_shard("trust/www3/bucket/a.tar");
    ft_http *other = ft_http_start(ft_tmp("trust/www3"), NULL); /* another host */
    ft_http *ep = ft_http_start(ft_tmp("trust/www3"), &(ft_http_faults){
                                    .redirect_to = ft_http_base(other)});
    set_aws(ft_http_base(ep));
    ferry_remote_opts o = {.timeout_s = 2, .retries = 2, .backoff_s = 0.01};
    ferry_remote_counters cnt = {0};
    ferry_remote_obj obj;
    ferry_status st = ferry__remote_stat("s3://bucket/a.tar", &o, &cnt, &obj);
    unset_aws();
    ASSERT_EQ_INT(ft_http_count(other, "x-amz-security-token"), 0);
    ASSERT_EQ_INT(ft_http_count(other, "Authorization"), 0);
    ASSERT_EQ_INT(ft_http_count(ep, "x-amz-security-token: tok-S3SSION-123"), 1); /* its own host */
    ASSERT_STATUS(st, FERRY_ERR_IO);
    ASSERT_STR_CONTAINS(ferry_last_error(), "s3://bucket/a.tar");
    ASSERT_STR_CONTAINS(ferry_last_error(), "redirect");

    /* A plain http:// URL (no credentials of ferry's) still follows it. */
    char url[300];
    snprintf(url, sizeof url, "%s/bucket/a.tar", ft_http_base(ep));
    ASSERT_OK(ferry__remote_stat(url, &o, &cnt, &obj));
    ASSERT_EQ_SIZE(obj.size, file_size(shard));
    ft_http_stop(ep);
    ft_http_stop(other);
    free(shard);
}

/* No redirect from https:// goes to http:// (the loopback servers speak no
 * TLS, so the rule libcurl is given is what is checked here), and an s3://
 * URL signed for https keeps it. */
TEST(https_is_never_redirected_to_http)
{
    ASSERT_STR_EQ(ferry__redirect_protocols("https://host/a.tar"), "https");
    ASSERT_STR_EQ(ferry__redirect_protocols("HTTPS://host/a.tar"), "https");
    ASSERT_STR_EQ(ferry__redirect_protocols("http://host/a.tar"), "http,https");
    ferry_remote_target t;
    unsetenv("AWS_ENDPOINT_URL");
    setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "secret", 1);
    setenv("AWS_REGION", "us-east-1", 1);
    ferry_status st = ferry__remote_target("s3://bucket/a.tar", &t);
    unset_aws();
    ASSERT_OK(st);
    ASSERT_STR_EQ(ferry__redirect_protocols(t.url), "https");
}

/* ---- item 5: a total deadline per request ---- */

static int count_sink(void *arg, const uint8_t *b, size_t n)
{
    (void)b;
    *(size_t *)arg += n;
    return 0;
}

TEST(a_trickling_server_meets_the_deadline)
{
    need_curl();
    uint8_t body[4096];
    for (size_t i = 0; i < sizeof body; i++)
        body[i] = (uint8_t)(i * 7);
    ft_write_file(ft_tmp("trust/www5/slow.bin"), body, sizeof body);
    /* 32 bytes every 0.1 s: never a stall of 0.5 s, and over 1 byte/s, but
     * 4 KiB would take 13 s; the deadline is 2 x 0.5 s + 4 KiB at 4 KiB/s. */
    ft_http *srv = ft_http_start(ft_tmp("trust/www5"), NULL);
    char url[300];
    snprintf(url, sizeof url, "%s/slow.bin", ft_http_base(srv));
    ferry_remote_opts o = {.timeout_s = 0.5, .retries = 1, .backoff_s = 0.01, .min_rate = 4096};
    ferry_remote_counters cnt = {0};
    ferry_remote_obj obj;
    ASSERT_OK(ferry__remote_stat(url, &o, &cnt, &obj));
    ASSERT_NEAR(ferry__remote_deadline_s(&o, sizeof body), 2.0, 1e-9);
    ft_http_set_faults(srv, &(ft_http_faults){.trickle_bytes = 32, .trickle_s = 0.1});
    size_t got = 0;
    double t0 = ferry_now();
    ferry_status st = ferry__remote_get(url, &o, &obj, 0, obj.size, count_sink, NULL, &got, &cnt);
    double took = ferry_now() - t0;
    ASSERT_STATUS(st, FERRY_ERR_IO);
    ASSERT_STR_CONTAINS(ferry_last_error(), "too slow");
    ASSERT_STR_CONTAINS(ferry_last_error(), "gave up after 2 tries");
    ASSERT_MSG(took < 7, "%.1f s for two tries of a 2 s deadline", took);
    ASSERT(got < sizeof body);
    ASSERT_EQ_INT(ft_http_count(srv, "GET /slow.bin"), 2);
    ft_http_stop(srv);
}

/* ---- item 6: a URL's password is never printed ---- */

TEST(passwords_in_urls_are_never_printed)
{
    need_curl();
    char *shard = make_shard("trust/www6/a.tar");
    ft_http *srv = ft_http_start(ft_tmp("trust/www6"), NULL);
    const char *port = strrchr(ft_http_base(srv), ':') + 1;
    char url[300], missing[300], cache[300];
    snprintf(url, sizeof url, "http://alice:S3cr3tPW@127.0.0.1:%s/a.tar", port);
    snprintf(missing, sizeof missing, "http://alice:S3cr3tPW@127.0.0.1:%s/none.tar", port);
    snprintf(cache, sizeof cache, "%s", ft_tmp("trust/cache6"));
    ferry_image_config c = ferry_image_config_default();
    c.remote_cache_dir = cache;
    c.remote_timeout_s = 2;
    c.remote_retries = 1;
    const char *u = url;
    /* Twice: the index is built from the download, then read from the cache. */
    for (int pass = 0; pass < 2; pass++) {
        ferry_dataset *ds;
        ASSERT_OK(ferry_dataset_shards(&u, 1, &c, &ds));
        ASSERT_EQ_SIZE(ferry_dataset_len(ds), PER);
        const char *name = ferry_dataset_sample_name(ds, 0);
        ASSERT_MSG(!strstr(name, "S3cr3tPW"), "pass %d: sample name %s", pass, name);
        ASSERT_STR_CONTAINS(name, "http://***@127.0.0.1:");
        ASSERT_STR_CONTAINS(name, "/a.tar:k000.png");
        ferry_dataset_release(ds);
    }
    /* An error, its subject, and every log line on the way. */
    nlogged = 0;
    ferry_set_log(keep_log, NULL);
    ferry_dataset *ds = NULL;
    u = missing;
    ferry_status st = ferry_dataset_shards(&u, 1, &c, &ds);
    ferry_set_log(NULL, NULL);
    ASSERT(st != FERRY_OK);
    ASSERT_MSG(!strstr(ferry_last_error(), "S3cr3tPW"), "%s", ferry_last_error());
    ASSERT_STR_CONTAINS(ferry_last_error(), "http://***@127.0.0.1:");
    ASSERT_STR_CONTAINS(ferry_last_error(), "none.tar");
    ASSERT(!ferry_error_subject() || !strstr(ferry_error_subject(), "S3cr3tPW"));
    for (size_t i = 0; i < nlogged; i++)
        ASSERT_MSG(!strstr(logged[i], "S3cr3tPW"), "logged: %s", logged[i]);
    /* The helper itself: only a URL's userinfo goes. */
    char out[128];
    ASSERT_EQ_SIZE(ferry_redact_urls("a https://u:p@h/x?y=1 and s3://b/k and x@y", out, sizeof out),
                   strlen("a https://***@h/x?y=1 and s3://b/k and x@y"));
    ASSERT_STR_EQ(out, "a https://***@h/x?y=1 and s3://b/k and x@y");
    ft_http_stop(srv);
    free(shard);
}

/* ---- item 8 and issue 37 item 11: uploads ---- */

TEST(uploads_refuse_schemes_other_than_http)
{
    need_curl();
    char *src = make_shard("trust/up8/src.tar");
    char dir[300];
    snprintf(dir, sizeof dir, "%s", ft_tmp("trust/up8/dst"));
    char ep[400], put[400], written[400];
    snprintf(ep, sizeof ep, "file://%s", dir);
    snprintf(written, sizeof written, "%s/b/p.tar", dir);
    ft_write_file(ft_tmp("trust/up8/dst/b/.made"), "", 0); /* the folder a file:// PUT needs */
    set_aws(ep);
    ferry_remote_opts o = {.timeout_s = 1, .retries = 1, .backoff_s = 0.01};
    ferry_status st = ferry__remote_put("s3://b/p.tar", src, &o);
    unset_aws();
    ASSERT_STATUS(st, FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "AWS_ENDPOINT_URL");
    ASSERT_MSG(access(written, F_OK) != 0, "%s was written", written);
    /* A file:// URL given as the target itself: the same. */
    snprintf(put, sizeof put, "file://%s/direct.tar", dir);
    ASSERT_STATUS(ferry__remote_put(put, src, &o), FERRY_ERR_INVALID_ARG);
    snprintf(written, sizeof written, "%s/direct.tar", dir);
    ASSERT_MSG(access(written, F_OK) != 0, "%s was written", written);
    free(src);
}

TEST(a_permanent_http_error_is_tried_once)
{
    need_curl();
    char *src = make_shard("trust/up11/src.tar");
    ft_http *srv = ft_http_start(ft_tmp("trust/up11"), &(ft_http_faults){.fail_first = 99,
                                                                          .fail_status = 501});
    char url[300];
    snprintf(url, sizeof url, "%s/copy.tar", ft_http_base(srv));
    ferry_remote_opts o = {.timeout_s = 1, .retries = 5, .backoff_s = 0.01};
    ASSERT_STATUS(ferry__remote_put(url, src, &o), FERRY_ERR_IO);
    ASSERT_STR_CONTAINS(ferry_last_error(), "HTTP 501");
    ASSERT_EQ_INT(ft_http_requests(srv), 1);
    /* A fetch the same. */
    ferry_remote_counters cnt = {0};
    ferry_remote_obj obj;
    snprintf(url, sizeof url, "%s/src.tar", ft_http_base(srv));
    ASSERT_STATUS(ferry__remote_stat(url, &o, &cnt, &obj), FERRY_ERR_IO);
    ASSERT_EQ_INT(ft_http_requests(srv), 2);
    /* While 503, 502, 504, 429, 425, 408 and 500 are worth another try. */
    long again[] = {408, 425, 429, 500, 502, 503, 504}, never[] = {400, 403, 404, 501, 505, 301};
    for (size_t i = 0; i < sizeof again / sizeof *again; i++)
        ASSERT_MSG(ferry__http_transient(again[i]), "%ld", again[i]);
    for (size_t i = 0; i < sizeof never / sizeof *never; i++)
        ASSERT_MSG(!ferry__http_transient(never[i]), "%ld", never[i]);
    ft_http_stop(srv);
    free(src);
}

/* ---- issue 36: an IDX .gz inflated no further than its header says ---- */

/* An IDX header of u8 [n, h, w] then data bytes, then `zeros` zero bytes,
 * gzip-compressed to path. */
static void write_idx_gz(const char *path, uint32_t n, uint32_t h, uint32_t w, size_t data,
                         size_t zeros)
{
    gzFile g = gzopen(path, "wb9");
    ASSERT(g);
    uint8_t hdr[16] = {0, 0, 8, 3};
    uint32_t dims[3] = {n, h, w};
    for (int i = 0; i < 3; i++)
        for (int b = 0; b < 4; b++)
            hdr[4 + 4 * i + b] = (uint8_t)(dims[i] >> (24 - 8 * b));
    ASSERT_EQ_INT(gzwrite(g, hdr, sizeof hdr), (int)sizeof hdr);
    static uint8_t buf[1 << 20];
    for (size_t left = data + zeros; left;) {
        size_t k = left < sizeof buf ? left : sizeof buf;
        ASSERT_EQ_INT(gzwrite(g, buf, (unsigned)k), (int)k);
        left -= k;
    }
    ASSERT_EQ_INT(gzclose(g), Z_OK);
}

TEST(idx_gzip_bomb_is_not_inflated_past_its_header)
{
    const char *lab = ft_tmp("trust/idx/l.idx");
    uint8_t l[10] = {0, 0, 8, 1, 0, 0, 0, 2, 0, 1};
    ft_write_file(lab, l, sizeof l);
    ferry_dataset *ds = NULL;
    /* Two 4x4 images and 64 MiB of zeros after them. */
    const char *bomb = ft_tmp("trust/idx/bomb.idx.gz");
    write_idx_gz(bomb, 2, 4, 4, 32, (size_t)64 << 20);
    ASSERT(file_size(bomb) < ((size_t)1 << 20));
    ASSERT_STATUS(ferry_dataset_idx(bomb, lab, NULL, &ds), FERRY_ERR_FORMAT);
    ASSERT_STR_CONTAINS(ferry_last_error(), "bomb.idx.gz");
    ASSERT_STR_CONTAINS(ferry_last_error(), "inflating stopped");
    ASSERT(ds == NULL);
    /* A header promising more than a gzip file that small can inflate to
     * (2^20 images of 1000x1000 in a few KiB): refused before inflating. */
    const char *big = ft_tmp("trust/idx/big.idx.gz");
    write_idx_gz(big, 1u << 20, 1000, 1000, 4096, 0);
    ASSERT_STATUS(ferry_dataset_idx(big, lab, NULL, &ds), FERRY_ERR_FORMAT);
    ASSERT_STR_CONTAINS(ferry_last_error(), "more than a gzip file");
    /* Images over the image limits: refused by them. */
    const char *wide = ft_tmp("trust/idx/wide.idx.gz");
    write_idx_gz(wide, 2, 4, 40, 320, 0);
    ferry_image_config c = ferry_image_config_default();
    c.limits.max_width = 32;
    ASSERT_STATUS(ferry_dataset_idx(wide, lab, &c, &ds), FERRY_ERR_LIMIT);
    ASSERT_STR_CONTAINS(ferry_last_error(), "limits");
    c.limits.max_width = 40; /* within them, it loads */
    ASSERT_OK(ferry_dataset_idx(wide, lab, &c, &ds));
    ASSERT_EQ_SIZE(ferry_dataset_len(ds), 2);
    ferry_dataset_release(ds);
}

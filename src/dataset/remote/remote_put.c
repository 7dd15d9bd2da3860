/* Uploading a finished file to a URL (`ferry pack --upload`): one HTTP PUT
 * of the whole file, signed for s3:// as remote_url.c's target says, with the
 * fetcher's timeouts and deadline; a transient failure (no connection, a
 * stall, 408, 425, 429, 500, 502, 503, 504) is tried again from the file's
 * start after a capped, jittered backoff, and any other status (or the
 * retries running out) is an error naming the URL. Without
 * libcurl every URL is refused by name, as the fetcher refuses it. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/error.h"
#include "dataset/remote/remote.h"

#ifdef FERRY_HAVE_CURL
#include <curl/curl.h>

typedef struct put_src {
    FILE *f;
    uint64_t sent;
} put_src;

static size_t put_read(char *dst, size_t size, size_t nitems, void *arg)
{
    put_src *s = arg;
    size_t n = fread(dst, 1, size * nitems, s->f);
    if (n == 0 && ferror(s->f))
        return CURL_READFUNC_ABORT;
    s->sent += n;
    return n;
}

/* The response body: kept up to its first 511 bytes, for an error's code
 * (S3 answers <Code>AccessDenied</Code>); never written to stdout. */
typedef struct put_reply {
    char b[512];
    size_t n;
} put_reply;

static size_t put_write(char *src, size_t size, size_t nitems, void *arg)
{
    put_reply *r = arg;
    size_t n = size * nitems, room = sizeof r->b - 1 - r->n;
    memcpy(r->b + r->n, src, n < room ? n : room);
    r->n += n < room ? n : room;
    r->b[r->n] = '\0';
    return n;
}

/* S3's error code in the reply, or "". */
static void s3_code(const put_reply *r, char *out, size_t cap)
{
    const char *a = strstr(r->b, "<Code>"), *z = a ? strstr(a, "</Code>") : NULL;
    out[0] = '\0';
    if (a && z && (size_t)(z - a - 6) < cap)
        snprintf(out, cap, " (%.*s)", (int)(z - a - 6), a + 6);
}

/* The backoff before try k (1, 2, ...): base * 2^(k-1), capped at 30 s, with
 * up to half of it drawn away so that many uploaders do not retry together. */
static void backoff(const ferry_remote_opts *o, unsigned k)
{
    double base = o->backoff_s > 0 ? o->backoff_s : 0.5, w = base;
    for (unsigned i = 1; i < k && w < 30; i++)
        w *= 2;
    w = w > 30 ? 30 : w;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    w -= w * 0.5 * (double)(now.tv_nsec % 1000) / 1000.0;
    struct timespec ts = {.tv_sec = (time_t)w, .tv_nsec = (long)((w - (double)(time_t)w) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* One try: FERRY_OK, or *transient set when another may succeed. */
static ferry_status put_once(const char *url, const ferry_remote_target *t, const char *path,
                             uint64_t size, const ferry_remote_opts *o, bool *transient)
{
    *transient = false;
    put_src s = {.f = fopen(path, "rb")};
    if (!s.f)
        return ferry_fail_at(FERRY_ERR_IO, path, "cannot open it to upload: %s", strerror(errno));
    CURL *h = curl_easy_init();
    struct curl_slist *hd = NULL;
    if (!h) {
        fclose(s.f);
        return ferry_fail_at(FERRY_ERR_NO_MEMORY, url, "curl_easy_init failed");
    }
    double to = o->timeout_s > 0 ? o->timeout_s : 10.0;
    char err[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(h, CURLOPT_URL, t->url);
    /* As for reads: HTTP only (file:// would write a local file), and no
     * redirect (a signed request's credentials stay with its host). */
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "https");
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(h, CURLOPT_READFUNCTION, put_read);
    curl_easy_setopt(h, CURLOPT_READDATA, &s);
    curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)size);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)(to * 1000));
    /* A stall: under 1 byte/s for the timeout (the same bound as a fetch's). */
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, (long)(to < 1 ? 1 : to));
    /* And a deadline for the whole request, as a fetch has. */
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(ferry__remote_deadline_s(o, size) * 1000));
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, err);
    put_reply reply = {.n = 0};
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, put_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &reply);
    /* No "Expect: 100-continue" round trip: the body goes at once. */
    hd = curl_slist_append(hd, "Expect:");
    if (t->s3) {
        curl_easy_setopt(h, CURLOPT_AWS_SIGV4, t->sigv4);
        curl_easy_setopt(h, CURLOPT_USERPWD, t->userpwd);
        /* The body is not hashed into the signature: it is streamed once. */
        hd = curl_slist_append(hd, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
        if (t->token[0])
            hd = curl_slist_append(hd, t->token);
    }
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
    CURLcode rc = curl_easy_perform(h);
    long code = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_cleanup(h);
    curl_slist_free_all(hd);
    bool read_failed = ferror(s.f) != 0;
    fclose(s.f);
    if (read_failed)
        return ferry_fail_at(FERRY_ERR_IO, path, "reading it to upload failed");
    if (rc != CURLE_OK) {
        *transient = rc != CURLE_UNSUPPORTED_PROTOCOL && rc != CURLE_URL_MALFORMAT;
        return ferry_fail_at(FERRY_ERR_IO, url, "PUT failed after %llu of %llu bytes: %s",
                             (unsigned long long)s.sent, (unsigned long long)size,
                             err[0] ? err : curl_easy_strerror(rc));
    }
    if (code >= 200 && code < 300)
        return FERRY_OK;
    *transient = ferry__http_transient(code);
    char why[96];
    s3_code(&reply, why, sizeof why - 2);
    return ferry_fail_at(FERRY_ERR_IO, url, "PUT answered HTTP %ld%s%s", code, why,
                         code == 403 ? ": the credentials, or no right to write there" : "");
}

ferry_status ferry__remote_put(const char *url, const char *path, const ferry_remote_opts *o)
{
    ferry_remote_target t;
    ferry_status st = ferry__remote_target(url, &t);
    if (st != FERRY_OK)
        return st;
    FILE *f = fopen(path, "rb");
    if (!f)
        return ferry_fail_at(FERRY_ERR_IO, path, "cannot open it to upload: %s", strerror(errno));
    int sk = fseeko(f, 0, SEEK_END);
    off_t end = sk == 0 ? ftello(f) : -1;
    fclose(f);
    if (end < 0)
        return ferry_fail_at(FERRY_ERR_IO, path, "cannot tell its size: %s", strerror(errno));
    unsigned tries = (o->retries ? o->retries : 5) + 1;
    for (unsigned k = 0;; k++) {
        bool transient;
        st = put_once(url, &t, path, (uint64_t)end, o, &transient);
        if (st == FERRY_OK || !transient)
            return st;
        if (k + 1 >= tries) {
            char last[FERRY_ERROR_MAX]; /* the message names url already */
            snprintf(last, sizeof last, "%s", ferry_last_error());
            return ferry_fail(st, "%s (gave up after %u tries)", last, tries);
        }
        backoff(o, k + 1);
    }
}

#else

ferry_status ferry__remote_put(const char *url, const char *path, const ferry_remote_opts *o)
{
    (void)path, (void)o;
    return ferry_fail_at(FERRY_ERR_UNSUPPORTED, url, "this build of ferry has no libcurl, so it "
                         "cannot upload to a URL (install libcurl4-openssl-dev and rebuild)");
}

#endif

/* Fetching a remote object with libcurl, dependably: every request has a
 * connect timeout, a stall timeout and a total deadline that grows with its
 * bytes (ferry__remote_deadline_s); transient failures (refused or reset
 * connections, timeouts, 408, 425, 429, 500, 502, 503, 504, a body cut short)
 * are retried with capped exponential backoff and jitter (or the server's
 * Retry-After), resuming with a Range request from the last good byte; a
 * signed s3:// request follows no redirect, and none goes from https to http;
 * every response is checked against
 * the object as first seen (size, ETag, Content-Range, Content-Length), so
 * that a changed object or a lying server is an error naming the URL and the
 * byte offset, never bytes of two versions handed on as one. A request may
 * go on a ferry_remote_conn (remote.h): its handle, reset after each request,
 * keeps the connection alive for the next one to the same server, unless the
 * request failed below HTTP. */
#include <curl/curl.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "common/error.h"
#include "dataset/remote/remote.h"

#define BACKOFF_CAP_S 8.0
#define RETRY_AFTER_CAP_S 30.0

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

/* curl_global_init is not thread-safe: once per process. */
static void init_curl(void) { curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

/* One request's state: what the headers said and how far the body got. */
typedef struct xfer {
    const char *url;                 /* the user's, for messages */
    const ferry_remote_obj *obj;     /* NULL for a stat */
    uint64_t at, end;                /* the next byte wanted, and the end */
    uint64_t skip;                   /* body bytes to drop (a 200 to a Range request) */
    ferry_remote_sink sink;
    ferry_remote_cancelled cancelled;
    void *arg;
    ferry_remote_counters *cnt;
    long status;
    bool has_len, has_range, checked;
    uint64_t len, range_start, range_last, range_total;
    char etag[128];
    double retry_after;
    double stall_s, seen_at;         /* the stall timeout; when the byte count last moved */
    curl_off_t seen_bytes;
    bool stalled;
    double deadline, limit_s;        /* this try's end (ferry_now), and its length */
    bool too_slow;                   /* the deadline passed */
    ferry_status fatal;              /* set: stop retrying, with this status */
    char msg[768];
} xfer;

static bool header_is(const char *line, size_t n, const char *name, const char **val)
{
    size_t k = strlen(name);
    if (n <= k || strncasecmp(line, name, k) != 0 || line[k] != ':')
        return false;
    *val = line + k + 1;
    while (**val == ' ' || **val == '\t')
        (*val)++;
    return true;
}

static void parse_etag(xfer *x, const char *v, size_t n)
{
    size_t i = 0;
    while (i < n && v[i] != '\r' && v[i] != '\n' && i + 1 < sizeof x->etag) {
        x->etag[i] = v[i];
        i++;
    }
    x->etag[i] = '\0';
}

static size_t on_header(char *line, size_t size, size_t nitems, void *p)
{
    xfer *x = p;
    size_t n = size * nitems;
    const char *v;
    char buf[256];
    size_t c = n < sizeof buf - 1 ? n : sizeof buf - 1;
    memcpy(buf, line, c);
    buf[c] = '\0';
    if (!strncmp(buf, "HTTP/", 5)) { /* a new response (after a redirect): forget the last */
        if (sscanf(buf, "HTTP/%*s %ld", &x->status) != 1)
            x->status = 0;
        x->has_len = x->has_range = false;
        x->etag[0] = '\0';
        x->retry_after = -1;
    } else if (header_is(buf, c, "content-length", &v)) {
        x->has_len = sscanf(v, "%" SCNu64, &x->len) == 1;
    } else if (header_is(buf, c, "content-range", &v)) {
        x->has_range = sscanf(v, "bytes %" SCNu64 "-%" SCNu64 "/%" SCNu64, &x->range_start,
                              &x->range_last, &x->range_total) == 3;
    } else if (header_is(buf, c, "etag", &v)) {
        parse_etag(x, v, c - (size_t)(v - buf));
    } else if (header_is(buf, c, "retry-after", &v)) {
        x->retry_after = atof(v); /* seconds; an HTTP date reads as 0: our own backoff */
    }
    return n;
}

static ferry_status fail_x(xfer *x, ferry_status st, const char *fmt, ...) FERRY_PRINTF(3, 4);
static ferry_status fail_x(xfer *x, ferry_status st, const char *fmt, ...)
{
    char m[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    snprintf(x->msg, sizeof x->msg, "%s: at byte %llu: %s", x->url, (unsigned long long)x->at, m);
    x->fatal = st;
    return st;
}

/* The first body bytes of a 2xx: does the response fit what was asked? */
static bool check_response(xfer *x)
{
    const ferry_remote_obj *o = x->obj;
    x->checked = true;
    if (o->etag[0] && x->etag[0] && strcmp(o->etag, x->etag) != 0)
        return !fail_x(x, FERRY_ERR_IO, "the object changed (ETag %s, was %s); it must not "
                       "change while it is read", x->etag, o->etag);
    if (x->status == 206) {
        /* A range longer than asked for (to the object's end) is taken up to
         * the end asked for. */
        if (!x->has_range || x->range_start != x->at || x->range_total != o->size ||
            x->range_last < x->end - 1 || x->range_last >= o->size)
            return !fail_x(x, FERRY_ERR_IO, "the server answered Range with a wrong Content-Range "
                           "(start %llu, total %llu; the object had %llu bytes)",
                           (unsigned long long)x->range_start, (unsigned long long)x->range_total,
                           (unsigned long long)o->size);
        if (x->has_len && x->len != x->range_last + 1 - x->at)
            return !fail_x(x, FERRY_ERR_IO, "wrong Content-Length: %llu for a range of %llu bytes",
                           (unsigned long long)x->len,
                           (unsigned long long)(x->range_last + 1 - x->at));
        return true;
    }
    if (x->has_len && x->len != o->size)
        return !fail_x(x, FERRY_ERR_IO, "wrong Content-Length: %llu, the object has %llu bytes "
                       "(or it changed)", (unsigned long long)x->len, (unsigned long long)o->size);
    x->skip = x->at; /* a server that ignores Range sends it all: drop what we have */
    return true;
}

static size_t on_body(char *b, size_t size, size_t nitems, void *p)
{
    xfer *x = p;
    size_t n = size * nitems;
    if (x->status < 200 || x->status >= 300 || !x->obj)
        return n; /* an error's body: not data (its status says what happened) */
    if (!x->checked && !check_response(x))
        return 0;
    if (x->skip) {
        size_t d = x->skip < n ? (size_t)x->skip : n;
        x->skip -= d;
        b += d;
        n -= d;
        if (!n)
            return size * nitems;
    }
    bool last = false;
    if (n > x->end - x->at) {
        /* A 200 or a longer range to a Range that ends before the object
         * does: the bytes past the end were not asked for. Past the
         * object's end: a lie (the length checks catch it first). */
        if (x->end == x->obj->size) {
            fail_x(x, FERRY_ERR_IO, "the server sent more bytes than the object has (%llu past "
                   "byte %llu)", (unsigned long long)(n - (x->end - x->at)),
                   (unsigned long long)x->end);
            return 0;
        }
        n = (size_t)(x->end - x->at);
        last = true;
    }
    double t0 = ferry_now();
    if (n && x->sink(x->arg, (const uint8_t *)b, n) != 0) {
        snprintf(x->msg, sizeof x->msg, "%s", ferry_last_error());
        x->fatal = FERRY_ERR_IO;
        return 0;
    }
    x->deadline += ferry_now() - t0; /* the reader's time, not the server's */
    x->at += n;
    atomic_fetch_add(&x->cnt->bytes, n);
    return last ? 0 : size * nitems; /* 0: stop, all that was asked for came (classify) */
}

/* Also the stall timeout: curl's own low-speed check averages over seconds
 * of history, so a body that stops after a fast start would pass it. */
static int on_progress(void *p, curl_off_t a, curl_off_t now, curl_off_t c, curl_off_t d)
{
    (void)a, (void)c, (void)d;
    xfer *x = p;
    double t = ferry_now();
    if (now != x->seen_bytes || x->seen_at == 0) {
        x->seen_bytes = now;
        x->seen_at = t;
    } else if (t - x->seen_at > x->stall_s) {
        x->stalled = true;
        return 1;
    }
    if (t > x->deadline) {
        x->too_slow = true;
        return 1;
    }
    return x->cancelled && x->cancelled(x->arg);
}

struct ferry_remote_conn {
    CURL *h; /* NULL until the first request, and after one that failed below HTTP */
};

ferry_status ferry__remote_conn_create(ferry_remote_conn **out)
{
    *out = ferry_host_calloc(1, sizeof **out);
    return *out ? FERRY_OK : FERRY_ERR_NO_MEMORY;
}

void ferry__remote_conn_destroy(ferry_remote_conn *c)
{
    if (!c)
        return;
    if (c->h)
        curl_easy_cleanup(c->h);
    ferry_host_free(c);
}

/* Each new connection's socket (not a kept one reused): counted. */
static int on_socket(void *p, curl_socket_t fd, curlsocktype purpose)
{
    (void)fd;
    if (purpose == CURLSOCKTYPE_IPCXN)
        atomic_fetch_add(&((xfer *)p)->cnt->connects, 1);
    return CURL_SOCKOPT_OK;
}

/* c's handle for the next request: as conn_done left it, every option at
 * libcurl's default. NULL when none can be made. */
static CURL *conn_handle(ferry_remote_conn *c)
{
    if (!c->h)
        c->h = curl_easy_init();
    return c->h;
}

/* After a request on c: what curl_easy_perform returned. A failure below
 * HTTP may have left the connection in any state (a body cut short, a stall,
 * a cancel mid-body); the handle goes, with its connection cache, so that the
 * next request (a retry, or the next shard's) connects afresh. An HTTP error
 * status is an answer on a sound connection: curl keeps it when the server
 * does. A handle kept is reset at once: every option back at libcurl's
 * default (curl_easy_reset keeps only its connections and its DNS and TLS
 * session caches), so that nothing of this request (its headers, an S3
 * session token among them, Range, credentials) reaches the next, and the
 * handle keeps no pointer to this request's buffers and callbacks' data. */
static void conn_done(ferry_remote_conn *c, CURLcode rc)
{
    if (rc != CURLE_OK) {
        curl_easy_cleanup(c->h);
        c->h = NULL;
    } else {
        curl_easy_reset(c->h);
    }
}

static CURL *make_handle(ferry_remote_conn *c, const ferry_remote_target *t,
                         const ferry_remote_opts *o, xfer *x, struct curl_slist **hdrs,
                         char *errbuf)
{
    CURL *h = conn_handle(c);
    if (!h)
        return NULL;
    long tmo = (long)ceil(o->timeout_s);
    curl_easy_setopt(h, CURLOPT_URL, t->url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    /* Credentials stay with the host they are for: a signed s3:// request
     * follows no redirect (libcurl would carry the session token, a plain
     * header, to any host), and no redirect goes from https to http. */
    curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, ferry__redirect_protocols(t->url));
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, t->s3 ? 0L : 1L);
    curl_easy_setopt(h, CURLOPT_MAXREDIRS, 5L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)(o->timeout_s * 1000));
    /* A stall: under 1 byte a second for the timeout is a failure, retried.
     * A paced fetch's sink waits for its reader, which curl would count as a
     * stall: on_progress's check (bytes moved since the last call) is enough. */
    if (!o->paced) {
        curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
        curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, tmo < 1 ? 1L : tmo);
    } else { /* a long body: fewer, larger hand-overs to the sink and its lock */
        curl_easy_setopt(h, CURLOPT_BUFFERSIZE, 256L << 10);
    }
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, x);
    curl_easy_setopt(h, CURLOPT_SOCKOPTFUNCTION, on_socket);
    curl_easy_setopt(h, CURLOPT_SOCKOPTDATA, x);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "ferry");
    if (t->s3) {
        curl_easy_setopt(h, CURLOPT_AWS_SIGV4, t->sigv4);
        curl_easy_setopt(h, CURLOPT_USERPWD, t->userpwd);
        /* S3 wants the payload's hash; libcurl signs with this value when given. */
        *hdrs = curl_slist_append(*hdrs, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
        if (t->token[0])
            *hdrs = curl_slist_append(*hdrs, t->token);
    }
    if (*hdrs)
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, *hdrs);
    return h;
}

static bool transient_curl(CURLcode rc)
{
    switch (rc) {
    case CURLE_COULDNT_CONNECT: case CURLE_OPERATION_TIMEDOUT: case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR: case CURLE_PARTIAL_FILE: case CURLE_GOT_NOTHING:
    case CURLE_HTTP2: case CURLE_HTTP2_STREAM: case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_SSL_CONNECT_ERROR:
        return true;
    default:
        return false;
    }
}

static const char *status_words(long s)
{
    switch (s) {
    case 401: case 403: return "access denied: check the credentials (AWS_ACCESS_KEY_ID, "
                               "AWS_SECRET_ACCESS_KEY) and the bucket's policy";
    case 404: return "not found";
    case 416: return "range not satisfiable: the object is shorter than when first seen";
    case 301: case 302: case 303: case 307: case 308:
        return "a redirect, which a signed s3:// request does not follow (another region? set "
               "AWS_REGION, or AWS_ENDPOINT_URL to the endpoint itself)";
    default: return "the server refused the request";
    }
}

/* One request's outcome: FERRY_OK, a fatal error (x->fatal set), or transient
 * (x->msg says what, to report if the retries run out). */
static ferry_status classify(xfer *x, CURLcode rc, const char *errbuf, bool head)
{
    unsigned long long at = (unsigned long long)x->at;
    if (x->fatal)
        return x->fatal;
    /* Every byte came, each checked: what happened after (a cancel, a reset
     * before the close) does not matter. */
    if (!head && x->checked && x->at == x->end)
        return FERRY_OK;
    if (rc == CURLE_ABORTED_BY_CALLBACK && x->stalled) {
        snprintf(x->msg, sizeof x->msg, "%s: no bytes for %.1f s at byte %llu (a stalled "
                 "connection)", x->url, x->stall_s, at);
        return FERRY_ERR_TIMEOUT;
    }
    if (rc == CURLE_ABORTED_BY_CALLBACK && x->too_slow) {
        snprintf(x->msg, sizeof x->msg, "%s: too slow: at byte %llu after %.1f s, the request's "
                 "deadline (2 x the timeout, and its bytes at the slowest rate allowed)",
                 x->url, at, x->limit_s);
        return FERRY_ERR_TIMEOUT;
    }
    if (rc == CURLE_ABORTED_BY_CALLBACK) {
        snprintf(x->msg, sizeof x->msg, "%s: cancelled at byte %llu", x->url, at);
        return x->fatal = FERRY_ERR_BAD_STATE;
    }
    if (rc == CURLE_OK && x->status >= 200 && x->status < 300 && (head || x->at == x->end))
        return FERRY_OK;
    if (rc == CURLE_OK && x->status >= 200 && x->status < 300)
        snprintf(x->msg, sizeof x->msg, "%s: the body ended at byte %llu of %llu", x->url, at,
                 (unsigned long long)x->end);
    else if (rc == CURLE_OK && !ferry__http_transient(x->status)) {
        snprintf(x->msg, sizeof x->msg, "%s: HTTP %ld at byte %llu: %s", x->url, x->status, at,
                 status_words(x->status));
        return x->fatal = x->status == 404 ? FERRY_ERR_INVALID_ARG : FERRY_ERR_IO;
    } else if (rc == CURLE_OK)
        snprintf(x->msg, sizeof x->msg, "%s: HTTP %ld at byte %llu", x->url, x->status, at);
    else {
        snprintf(x->msg, sizeof x->msg, "%s: at byte %llu: %s", x->url, at,
                 errbuf[0] ? errbuf : curl_easy_strerror(rc));
        if (!transient_curl(rc))
            return x->fatal = FERRY_ERR_IO;
    }
    return FERRY_ERR_TIMEOUT; /* transient */
}

/* Sleeps s seconds in short steps, so that a cancel is seen. */
static void backoff_sleep(double s, const xfer *x)
{
    double until = ferry_now() + s;
    for (double now; (now = ferry_now()) < until;) {
        if (x->cancelled && x->cancelled(x->arg))
            return;
        double d = until - now < 0.05 ? until - now : 0.05;
        struct timespec ts = {0, (long)(d * 1e9)};
        nanosleep(&ts, NULL);
    }
}

static double backoff(const ferry_remote_opts *o, unsigned try, uint64_t *rng, double retry_after)
{
    if (retry_after > 0)
        return retry_after < RETRY_AFTER_CAP_S ? retry_after : RETRY_AFTER_CAP_S;
    double b = o->backoff_s * (double)(1u << (try < 16 ? try : 16));
    b = b < BACKOFF_CAP_S ? b : BACKOFF_CAP_S;
    *rng ^= *rng << 13, *rng ^= *rng >> 7, *rng ^= *rng << 17;
    return b * (0.5 + 0.5 * (double)(*rng >> 11) / 9007199254740992.0); /* "equal jitter" */
}

static ferry_status run_on(ferry_remote_conn *c, const char *url, const ferry_remote_opts *o,
                           xfer *x, bool head)
{
    ferry_remote_target t;
    ferry_status st = ferry__remote_target(url, &t);
    uint64_t rng = (uint64_t)(ferry_now() * 1e9) ^ (uint64_t)(uintptr_t)x ^ 0x9e3779b97f4a7c15ull;
    for (unsigned try = 0; st == FERRY_OK; try++) {
        struct curl_slist *hdrs = NULL;
        char errbuf[CURL_ERROR_SIZE] = "", range[64];
        x->status = 0, x->checked = false, x->skip = 0, x->retry_after = -1;
        x->stall_s = o->timeout_s, x->seen_at = 0, x->seen_bytes = 0, x->stalled = false;
        x->limit_s = ferry__remote_deadline_s(o, head ? 0 : x->end - x->at);
        x->deadline = ferry_now() + x->limit_s, x->too_slow = false;
        CURL *h = make_handle(c, &t, o, x, &hdrs, errbuf);
        if (!h) {
            curl_slist_free_all(hdrs);
            return ferry_fail_at(FERRY_ERR_NO_MEMORY, url, "curl_easy_init failed");
        }
        if (head)
            curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
        else if (x->at || x->end < x->obj->size) {
            if (x->end < x->obj->size)
                snprintf(range, sizeof range, "%llu-%llu", (unsigned long long)x->at,
                         (unsigned long long)x->end - 1);
            else
                snprintf(range, sizeof range, "%llu-", (unsigned long long)x->at);
            curl_easy_setopt(h, CURLOPT_RANGE, range);
        }
        uint64_t at0 = x->at;
        atomic_fetch_add(&x->cnt->requests, 1);
        CURLcode rc = curl_easy_perform(h);
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &x->status);
        conn_done(c, rc);
        curl_slist_free_all(hdrs);
        st = classify(x, rc, errbuf, head);
        if (st == FERRY_OK || x->fatal)
            break;
        /* The retries bound failures in a row: a try that moved the body on
         * starts the count again (a long stream meets many brief faults). */
        if (x->at > at0 && !x->too_slow) /* a trickle does not buy more tries */
            try = 0;
        if (try >= o->retries)
            return ferry_fail(FERRY_ERR_IO, "%s (gave up after %u tries)", x->msg, try + 1);
        atomic_fetch_add(&x->cnt->retries, 1);
        ferry_log(FERRY_LOG_DEBUG, "%s; retrying", x->msg);
        backoff_sleep(backoff(o, try, &rng, x->retry_after), x);
        /* Stopped while it waited: no request more (its closer joins it). */
        if (x->cancelled && x->cancelled(x->arg))
            return ferry_fail_at(FERRY_ERR_BAD_STATE, url, "stopped while waiting to retry");
        st = FERRY_OK;
    }
    if (st != FERRY_OK && x->fatal)
        return ferry_fail(st, "%s", x->msg);
    return st;
}

/* A request on c, or (c NULL) on a handle of its own, closed after. */
static ferry_status run(ferry_remote_conn *c, const char *url, const ferry_remote_opts *o, xfer *x,
                        bool head)
{
    pthread_once(&curl_once, init_curl);
    if (curl_init_rc != CURLE_OK)
        return ferry_fail_at(FERRY_ERR_IO, url, "libcurl failed to start: %s",
                             curl_easy_strerror(curl_init_rc));
    if (c)
        return run_on(c, url, o, x, head);
    ferry_remote_conn own = {0};
    ferry_status st = run_on(&own, url, o, x, head);
    if (own.h)
        curl_easy_cleanup(own.h);
    return st;
}

ferry_status ferry__remote_stat(const char *url, const ferry_remote_opts *o,
                                ferry_remote_counters *cnt, ferry_remote_obj *out)
{
    xfer x = {.url = url, .cnt = cnt};
    ferry_status st = run(NULL, url, o, &x, true);
    if (st != FERRY_OK)
        return st;
    if (!x.has_len)
        return ferry_fail_at(FERRY_ERR_IO, url, "the server gives no Content-Length for the object");
    out->size = x.len;
    memcpy(out->etag, x.etag, sizeof out->etag);
    return FERRY_OK;
}

ferry_status ferry__remote_conn_get(ferry_remote_conn *c, const char *url,
                                    const ferry_remote_opts *o, const ferry_remote_obj *obj,
                                    uint64_t from, uint64_t end, ferry_remote_sink sink,
                                    ferry_remote_cancelled cancelled, void *arg,
                                    ferry_remote_counters *cnt)
{
    if (end > obj->size)
        end = obj->size;
    xfer x = {.url = url, .obj = obj, .at = from, .end = end, .sink = sink,
              .cancelled = cancelled, .arg = arg, .cnt = cnt};
    return from >= end ? FERRY_OK : run(c, url, o, &x, false);
}

ferry_status ferry__remote_get(const char *url, const ferry_remote_opts *o,
                               const ferry_remote_obj *obj, uint64_t from, uint64_t end,
                               ferry_remote_sink sink, ferry_remote_cancelled cancelled, void *arg,
                               ferry_remote_counters *cnt)
{
    return ferry__remote_conn_get(NULL, url, o, obj, from, end, sink, cancelled, arg, cnt);
}

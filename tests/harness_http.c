/* The tests' fault-injecting HTTP server (harness_http.h). One thread accepts;
 * each connection gets a thread that answers one request and closes, or with
 * keep_alive, one request after the other until it may not go on. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "harness_http.h"

struct ft_http {
    char root[512];
    char base[64];
    int lfd;
    pthread_t th;
    pthread_mutex_t lock;
    ft_http_faults f;         /* guarded by lock */
    unsigned since_faults;    /* requests since the faults were set; guarded by lock */
    unsigned etag_nth;        /* of those, requests for f.etag_path; guarded by lock */
    char **heads;             /* every request's head; guarded by lock */
    size_t nheads, heads_cap; /* guarded by lock */
    atomic_uint requests;
    atomic_uint accepted;     /* connections */
    atomic_int live;          /* connection threads running */
    atomic_bool stop;
    atomic_bool dead;         /* ft_http_die: the port closes, answers stop */
    atomic_bool frozen;       /* ft_http_freeze: nothing more is sent */
};

typedef struct conn {
    ft_http *s;
    int fd;
} conn;

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* A frozen server sends nothing more: wait for ft_http_stop. */
static void hold_if_frozen(ft_http *s)
{
    while (atomic_load(&s->frozen) && !atomic_load(&s->stop))
        sleep_s(0.02);
}

static bool send_all(int fd, const void *p, size_t n)
{
    const char *b = p;
    while (n) {
        ssize_t w = send(fd, b, n, MSG_NOSIGNAL);
        if (w <= 0)
            return false;
        b += w;
        n -= (size_t)w;
    }
    return true;
}

/* The request's head into req (NUL-terminated); *got: all bytes read, which
 * may run past the head into a PUT's body. False when the client closes, or
 * sends nothing for 5 s, or the server stops: a kept-alive connection waits
 * here between requests, and must not hold ft_http_stop up. */
static bool read_request(ft_http *s, int fd, char *req, size_t cap, size_t *got)
{
    size_t n = 0;
    int quiet_ms = 0;
    while (n + 1 < cap) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int ready = poll(&p, 1, 50);
        if (atomic_load(&s->stop) || ready < 0 || (ready == 0 && (quiet_ms += 50) >= 5000))
            return false;
        if (ready == 0)
            continue;
        ssize_t r = recv(fd, req + n, cap - 1 - n, 0);
        if (r <= 0)
            return false;
        n += (size_t)r;
        req[n] = '\0';
        *got = n;
        if (strstr(req, "\r\n\r\n"))
            return true;
    }
    return false;
}

static void keep_head(ft_http *s, const char *req)
{
    const char *end = strstr(req, "\r\n\r\n");
    size_t n = end ? (size_t)(end - req) : strlen(req);
    char *h = malloc(n + 1);
    if (!h)
        return;
    memcpy(h, req, n);
    h[n] = '\0';
    pthread_mutex_lock(&s->lock);
    if (s->nheads == s->heads_cap) {
        size_t c = s->heads_cap ? 2 * s->heads_cap : 64;
        char **v = realloc(s->heads, c * sizeof *v);
        if (v) {
            s->heads = v;
            s->heads_cap = c;
        }
    }
    if (s->nheads < s->heads_cap)
        s->heads[s->nheads++] = h;
    else
        free(h);
    pthread_mutex_unlock(&s->lock);
}

unsigned ft_http_count(ft_http *s, const char *needle)
{
    unsigned c = 0;
    pthread_mutex_lock(&s->lock);
    for (size_t i = 0; i < s->nheads; i++)
        c += strcasestr(s->heads[i], needle) != NULL;
    pthread_mutex_unlock(&s->lock);
    return c;
}

/* An error's answer; keep: on a connection kept open after it. */
static bool reply_status(int fd, int status, unsigned retry_after, bool keep)
{
    char h[256];
    int n = snprintf(h, sizeof h, "HTTP/1.1 %d Oops\r\nContent-Length: 5\r\n%s%.0u%s%s\r\n"
                     "oops!", status, retry_after ? "Retry-After: " : "", retry_after,
                     retry_after ? "\r\n" : "", keep ? "" : "Connection: close\r\n");
    return send_all(fd, h, (size_t)n) && keep;
}

/* PUT: the body (Content-Length bytes, the first of them already in req)
 * written to path through path.part, then 200; a short body is no file. */
static void put_file(int fd, const char *req, size_t got, const char *path)
{
    const char *cl = strcasestr(req, "\r\nContent-Length:");
    const char *body = strstr(req, "\r\n\r\n") + 4;
    long want = cl ? strtol(cl + 17, NULL, 10) : -1;
    char part[1700], buf[16384];
    snprintf(part, sizeof part, "%s.part", path);
    FILE *f = want >= 0 ? fopen(part, "wb") : NULL;
    if (!f) {
        reply_status(fd, want < 0 ? 411 : 500, 0, false);
        return;
    }
    long have = (long)(got - (size_t)(body - req));
    bool ok = fwrite(body, 1, (size_t)have, f) == (size_t)have;
    while (ok && have < want) {
        ssize_t r = recv(fd, buf, sizeof buf, 0);
        ok = r > 0 && fwrite(buf, 1, (size_t)r, f) == (size_t)r;
        have += r > 0 ? r : 0;
    }
    ok = fclose(f) == 0 && ok && have == want && rename(part, path) == 0;
    if (!ok) {
        remove(part);
        return; /* the connection just closes: the client sees no answer */
    }
    static const char h[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    send_all(fd, h, sizeof h - 1);
}

/* The body [a, b) of file f, with this request's faults: true when all of
 * it went out. */
static bool send_body(ft_http *s, int fd, FILE *f, long a, long b, const ft_http_faults *x,
                      unsigned nth)
{
    char buf[16384];
    long at = a, cut = -1;
    if (x->drop_every && nth % x->drop_every == x->drop_every - 1)
        cut = a + (long)x->drop_after;
    bool stall = x->stall_every && nth % x->stall_every == x->stall_every - 1;
    fseek(f, at, SEEK_SET);
    while (at < b) {
        long want = b - at < (long)sizeof buf ? b - at : (long)sizeof buf;
        if (x->trickle_bytes && want > (long)x->trickle_bytes) {
            want = (long)x->trickle_bytes;
            sleep_s(x->trickle_s);
        }
        if (cut >= 0 && at + want > cut)
            want = cut - at;
        if (stall && at < a + (b - a) / 2 && at + want > a + (b - a) / 2)
            want = a + (b - a) / 2 - at; /* the stall comes before the body's end */
        hold_if_frozen(s);
        if (want <= 0 || atomic_load(&s->dead) || atomic_load(&s->stop))
            return false; /* dropped mid-body, or the server died or stopped */
        size_t got = fread(buf, 1, (size_t)want, f);
        if (!got || !send_all(fd, buf, got))
            return false;
        at += (long)got;
        if (stall && at - a >= (b - a) / 2) {
            sleep_s(x->stall_s);
            stall = false;
        }
    }
    return true;
}

/* One request on fd: true when the connection may answer another (keep_alive,
 * and the answer went out whole as it said). */
static bool answer(ft_http *s, int fd)
{
    char req[4096], path[1600], method[16], target[900];
    size_t got = 0;
    if (!read_request(s, fd, req, sizeof req, &got) ||
        sscanf(req, "%15s %899s", method, target) != 2)
        return false;
    keep_head(s, req);
    pthread_mutex_lock(&s->lock);
    ft_http_faults x = s->f;
    unsigned nth = s->since_faults++;
    bool etag_path = !x.etag_path || strstr(target, x.etag_path);
    unsigned etag_nth = x.etag_path ? (etag_path ? s->etag_nth++ : 0) : nth;
    pthread_mutex_unlock(&s->lock);
    if (x.die_after && nth >= x.die_after)
        ft_http_die(s);
    if (x.freeze_after && nth >= x.freeze_after)
        atomic_store(&s->frozen, true);
    if (atomic_load(&s->frozen)) { /* accepted, never answered */
        hold_if_frozen(s);
        return false;
    }
    if (atomic_fetch_add(&s->requests, 1) >= FT_HTTP_MAX_REQUESTS || atomic_load(&s->dead))
        return false;
    if (x.delay_s > 0)
        sleep_s(x.delay_s);
    if (nth < x.fail_first && (!x.fail_path || strstr(target, x.fail_path)))
        return reply_status(fd, x.fail_status, x.retry_after, x.keep_alive);
    if (x.redirect_to) {
        char h[1200];
        int n = snprintf(h, sizeof h, "HTTP/1.1 307 Temporary Redirect\r\nLocation: %s%s\r\n"
                         "Content-Length: 0\r\nConnection: close\r\n\r\n", x.redirect_to, target);
        send_all(fd, h, (size_t)n);
        return false;
    }
    snprintf(path, sizeof path, "%s%s", s->root, target);
    if (!strcmp(method, "PUT")) {
        if (x.drop_every && nth % x.drop_every == x.drop_every - 1)
            return false; /* closed with the body unread, no answer: a reset */
        if (strstr(target, ".."))
            reply_status(fd, 403, 0, false);
        else
            put_file(fd, req, got, path);
        return false;
    }
    struct stat sb;
    FILE *f = strstr(target, "..") ? NULL : fopen(path, "rb");
    if (!f || fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        if (f)
            fclose(f);
        return reply_status(fd, 404, 0, x.keep_alive);
    }
    long size = (long)sb.st_size, a = 0, b = size;
    const char *r = strcasestr(req, "\r\nRange: bytes=");
    long last = -1;
    int nr = r && !x.no_range ? sscanf(r + 15, "%ld-%ld", &a, &last) : 0;
    bool ranged = nr >= 1 && a < size;
    if (!ranged)
        a = 0;
    else if (nr == 2 && last >= a && last < size - 1)
        b = last + 1;
    bool get = strcmp(method, "GET") == 0;
    bool changed = x.etag_change_after && etag_path && etag_nth >= x.etag_change_after;
    char h[512];
    int n = snprintf(h, sizeof h, "HTTP/1.1 %s\r\nContent-Length: %ld\r\nETag: \"%lx-%lx%s\"\r\n"
                     "Accept-Ranges: bytes\r\n", ranged ? "206 Partial Content" : "200 OK",
                     b - a + (get ? x.clen_lie : 0), (unsigned long)size, (unsigned long)sb.st_mtime,
                     changed ? "-new" : "");
    if (ranged)
        n += snprintf(h + n, sizeof h - (size_t)n, "Content-Range: bytes %ld-%ld/%ld\r\n", a,
                      b - 1, size);
    n += snprintf(h + n, sizeof h - (size_t)n, "%s\r\n",
                  x.keep_alive ? "" : "Connection: close\r\n");
    bool whole = send_all(fd, h, (size_t)n) &&
                 (!get || send_body(s, fd, f, a, x.clen_lie < 0 ? b + x.clen_lie : b, &x, nth));
    fclose(f);
    return x.keep_alive && whole && !(get && x.clen_lie);
}

/* keep_max of the faults now in force (0: none). */
static unsigned keep_max(ft_http *s)
{
    pthread_mutex_lock(&s->lock);
    unsigned m = s->f.keep_max;
    pthread_mutex_unlock(&s->lock);
    return m;
}

static void *conn_main(void *arg)
{
    conn *c = arg;
    for (unsigned done = 1; answer(c->s, c->fd); done++) {
        unsigned m = keep_max(c->s);
        if (m && done >= m)
            break; /* closed without a word, as an idle timeout does */
    }
    shutdown(c->fd, SHUT_RDWR);
    close(c->fd);
    atomic_fetch_sub(&c->s->live, 1);
    free(c);
    return NULL;
}

static void *accept_main(void *arg)
{
    ft_http *s = arg;
    while (!atomic_load(&s->stop)) {
        if (atomic_load(&s->dead)) { /* the port refuses connections from now on */
            pthread_mutex_lock(&s->lock);
            close(s->lfd);
            s->lfd = -1;
            pthread_mutex_unlock(&s->lock);
            break;
        }
        struct pollfd p = {.fd = s->lfd, .events = POLLIN};
        if (poll(&p, 1, 50) <= 0)
            continue;
        int fd = accept(s->lfd, NULL, NULL);
        if (fd < 0)
            continue;
        atomic_fetch_add(&s->accepted, 1);
        struct timeval tv = {5, 0}; /* a stuck peer cannot hold a thread longer */
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        conn *c = malloc(sizeof *c);
        pthread_t th;
        atomic_fetch_add(&s->live, 1);
        if (!c || (c->s = s, c->fd = fd, pthread_create(&th, NULL, conn_main, c) != 0)) {
            atomic_fetch_sub(&s->live, 1);
            close(fd);
            free(c);
            continue;
        }
        pthread_detach(th);
    }
    return NULL;
}

ft_http *ft_http_start(const char *root, const ft_http_faults *f)
{
    ft_http *s = calloc(1, sizeof *s);
    ASSERT(s);
    snprintf(s->root, sizeof s->root, "%s", root);
    if (f)
        s->f = *f;
    pthread_mutex_init(&s->lock, NULL);
    s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    ASSERT_MSG(s->lfd >= 0 && bind(s->lfd, (struct sockaddr *)&a, sizeof a) == 0 &&
               listen(s->lfd, 64) == 0 && getsockname(s->lfd, (struct sockaddr *)&a, &len) == 0,
               "test HTTP server: %s", strerror(errno));
    snprintf(s->base, sizeof s->base, "http://127.0.0.1:%u", (unsigned)ntohs(a.sin_port));
    ASSERT(pthread_create(&s->th, NULL, accept_main, s) == 0);
    return s;
}

const char *ft_http_base(const ft_http *s) { return s->base; }

void ft_http_set_faults(ft_http *s, const ft_http_faults *f)
{
    pthread_mutex_lock(&s->lock);
    s->f = *f;
    s->since_faults = 0;
    s->etag_nth = 0;
    pthread_mutex_unlock(&s->lock);
}

unsigned ft_http_requests(const ft_http *s) { return atomic_load(&s->requests); }

unsigned ft_http_connections(const ft_http *s) { return atomic_load(&s->accepted); }

void ft_http_die(ft_http *s)
{
    atomic_store(&s->dead, true);
    /* The accept thread closes the port within its 50 ms poll; wait for it,
     * so that the caller's next connection is refused. */
    for (int i = 0; i < 200 && !atomic_load(&s->stop); i++) {
        pthread_mutex_lock(&s->lock);
        bool closed = s->lfd < 0;
        pthread_mutex_unlock(&s->lock);
        if (closed)
            break;
        sleep_s(0.01);
    }
}

bool ft_http_dead(const ft_http *s) { return atomic_load(&s->dead); }

void ft_http_freeze(ft_http *s) { atomic_store(&s->frozen, true); }

void ft_http_stop(ft_http *s)
{
    if (!s)
        return;
    atomic_store(&s->stop, true);
    pthread_join(s->th, NULL);
    if (s->lfd >= 0)
        close(s->lfd);
    /* Connection threads end within their socket timeouts and stalls. */
    for (int i = 0; i < 400 && atomic_load(&s->live) > 0; i++)
        sleep_s(0.025);
    if (atomic_load(&s->live) == 0) {
        for (size_t i = 0; i < s->nheads; i++)
            free(s->heads[i]);
        free(s->heads);
        pthread_mutex_destroy(&s->lock);
        free(s);
    } /* else leaked on purpose: a thread still uses it (the test then fails elsewhere) */
}

struct ferry_dataset *ft_http_shards_dataset(const ft_http *srv, size_t nsh, const char *cache_rel)
{
    static char v[64][256];
    const char *p[64];
    ASSERT(nsh <= 64);
    for (size_t k = 0; k < nsh; k++) {
        snprintf(v[k], sizeof v[k], "%s/sh%02zu.tar", ft_http_base(srv), k);
        p[k] = v[k];
    }
    char parent[256];
    snprintf(parent, sizeof parent, "%s", cache_rel);
    char *slash = strrchr(parent, '/');
    if (slash) { /* the cache folder's parent must exist */
        snprintf(slash, sizeof parent - (size_t)(slash - parent), "/.made");
        ft_write_file(ft_tmp(parent), "", 0);
    }
    static char dir[600];
    snprintf(dir, sizeof dir, "%s", ft_tmp(cache_rel));
    ferry_image_config c = ferry_image_config_default();
    c.remote_cache_dir = dir;
    c.remote_timeout_s = 2;
    ferry_dataset *ds;
    ASSERT_OK(ferry_dataset_shards(p, nsh, &c, &ds));
    return ds;
}

void ft_require_curl(void)
{
#ifndef FERRY_HAVE_CURL
    SKIP("built without libcurl (CURL=0): test_remote's build_without_curl_refuses_urls");
#endif
}

struct ferry_dataset *ft_local_shards_dataset(char (*paths)[600], size_t nsh)
{
    const char *p[64];
    ASSERT(nsh <= 64);
    for (size_t k = 0; k < nsh; k++)
        p[k] = paths[k];
    ferry_dataset *ds;
    ASSERT_OK(ferry_dataset_shards(p, nsh, NULL, &ds));
    return ds;
}

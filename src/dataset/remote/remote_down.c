/* A server that stopped answering (remote.h): after fetches of two objects
 * from it failed in a row (each after its own retries; no byte from it in
 * between, and one object failing again is not a second), it is taken for down for a
 * while, and every fetch from it in that time fails at once with the last
 * failure, instead of each shard, and each straggler's Range read, paying the
 * retries again. Under on_error = SKIP a dead server otherwise made an epoch
 * take about (its shards + its Range reads) x the retries' backoff, which
 * looked like a hang. The first fetch after the while is a probe: a success
 * forgets the failures; another failure doubles the while (at most 32 x).
 * The while: 3 x the timeout, or as long as the failing fetch took if longer,
 * so that probing costs at most about half of the time. The streaming
 * order forgets it all at each epoch's start, as it tries failed shards again.
 *
 * One per dataset (its cache owns it), keyed by the URL's scheme and host, so
 * that one server's death does not fail fast the shards of another. No
 * libcurl here: it only counts outcomes. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "common/error.h"
#include "dataset/remote/remote.h"

#define MAX_HOSTS 16
#define HOST_CAP 256

typedef struct host {
    char name[HOST_CAP];        /* "http://example.org:8080" */
    unsigned fails;             /* objects whose fetch failed, in a row */
    uint64_t last;              /* the last failing URL, hashed */
    unsigned opens;             /* times taken for down since the last success */
    double until;               /* down until this ferry_now() */
    ferry_status st;
    char err[768];
} host;

struct ferry_remote_down {
    pthread_mutex_t lock;
    double timeout_s;
    host h[MAX_HOSTS];
    size_t n;
};

/* The scheme and authority of url ("http://h:p"), or false. */
static bool host_of(const char *url, char *out, size_t cap)
{
    const char *p = strstr(url, "://");
    if (!p)
        return false;
    size_t n = strcspn(p + 3, "/?#") + (size_t)(p + 3 - url);
    if (n >= cap)
        return false;
    memcpy(out, url, n);
    out[n] = '\0';
    return true;
}

/* url's entry (lock held), or NULL: a host past MAX_HOSTS is never taken for down. */
static host *find(ferry_remote_down *d, const char *url)
{
    char name[HOST_CAP];
    if (!host_of(url, name, sizeof name))
        return NULL;
    for (size_t i = 0; i < d->n; i++)
        if (!strcmp(d->h[i].name, name))
            return &d->h[i];
    if (d->n == MAX_HOSTS)
        return NULL;
    host *h = &d->h[d->n++];
    memset(h, 0, sizeof *h);
    memcpy(h->name, name, sizeof name);
    return h;
}

ferry_status ferry__remote_down_create(double timeout_s, ferry_remote_down **out)
{
    ferry_remote_down *d = ferry_host_calloc(1, sizeof *d);
    if (!d)
        return FERRY_ERR_NO_MEMORY;
    pthread_mutex_init(&d->lock, NULL);
    d->timeout_s = timeout_s;
    *out = d;
    return FERRY_OK;
}

void ferry__remote_down_destroy(ferry_remote_down *d)
{
    if (!d)
        return;
    pthread_mutex_destroy(&d->lock);
    ferry_host_free(d);
}

ferry_status ferry__remote_down_check(ferry_remote_down *d, const char *url)
{
    if (!d)
        return FERRY_OK;
    ferry_status st = FERRY_OK;
    pthread_mutex_lock(&d->lock);
    host *h = find(d, url);
    double now = ferry_now();
    if (h && now < h->until)
        st = ferry_fail_at(h->st, url, "not asked: %u fetches from its server failed in a row, "
                           "so it is taken for down for %.0f s more (on_error = SKIP skips its "
                           "samples meanwhile); the last failure: %s", h->fails, h->until - now,
                           h->err);
    pthread_mutex_unlock(&d->lock);
    return st;
}

void ferry__remote_down_forget(ferry_remote_down *d)
{
    if (!d)
        return;
    pthread_mutex_lock(&d->lock);
    d->n = 0;
    pthread_mutex_unlock(&d->lock);
}

void ferry__remote_down_note(ferry_remote_down *d, const char *url, ferry_status st, double took)
{
    /* A fetch stopped by its closer, or an object that is not there (404),
     * says nothing about the server. */
    if (!d || st == FERRY_ERR_BAD_STATE || st == FERRY_ERR_INVALID_ARG)
        return;
    const char *err = st == FERRY_OK ? "" : ferry_last_error();
    pthread_mutex_lock(&d->lock);
    host *h = find(d, url);
    uint64_t id = 1469598103934665603ull;
    for (const char *p = url; *p; p++)
        id = (id ^ (uint8_t)*p) * 1099511628211ull;
    if (h && st == FERRY_OK) {
        h->fails = h->opens = 0;
        h->until = 0;
        h->last = 0;
    } else if (h) {
        h->fails += h->fails == 0 || id != h->last;
        h->last = id;
        h->st = st;
        snprintf(h->err, sizeof h->err, "%s", err);
        if (h->fails >= 2) {
            double w = 3 * d->timeout_s > took ? 3 * d->timeout_s : took;
            h->until = ferry_now() + w * (double)(1u << (h->opens < 5 ? h->opens : 5));
            h->opens++;
        }
    }
    pthread_mutex_unlock(&d->lock);
}

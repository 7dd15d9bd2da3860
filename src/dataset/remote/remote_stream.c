/* Remote shards in the streaming order (remote.h): each shard is fetched front
 * to back by a stream slot's thread over one connection (resumed with Range
 * after a fault, by ferry__remote_get) into a ring in memory. The fetch runs up to
 * AHEAD bytes past the furthest byte a reader has asked for, then waits: that
 * is the read-ahead, and it bounds the memory (RING bytes per stream, at most
 * NSTREAMS streams, least recently used replaced). The ring keeps RING - AHEAD
 * bytes behind the furthest read for the shuffle buffer's stragglers; a read
 * further behind (or with no stream free) is one Range request of its own, and
 * so is a straggler whose stream was closed (replaced by a later shard's): a
 * new stream is opened for a shard this epoch only to read bytes no stream of
 * it has fetched yet, since a stream fetches on to the shard's end.
 *
 * A shard's stream starts at the first read of the shard two before it in
 * the plan (start_next). Near an epoch's end (at the first read of the
 * plan's last but one shard) the next epoch's first shard gets a head
 * stream: it fetches GRAIN bytes and waits, passed over by readers, until
 * the next epoch's reset makes it that shard's stream; so the request's
 * latency passes while this epoch ends instead of every worker waiting for
 * it at the next one's start.
 *
 * A reader copies only bytes the fetch has checked and written, under the
 * lock, so a sample is whole or not delivered at all. A stream or a Range read
 * that fails marks its shard failed: while streaming until the next reset (the
 * next epoch), else for 3 x the timeout (as the cache does), so that under
 * on_error = SKIP its samples fail at once instead of each paying the retries.
 * Without that, a server that died left every skip's replacement candidate in
 * a shard whose stream was gone to a Range read of its own with the retries'
 * backoff: an epoch of N samples took N times the retries, which looked like
 * a hang.
 *
 * Each of the NSTREAMS slots has one fetch thread, started at its first
 * stream and kept: a stream hands it a job (slot_main). The thread keeps one
 * connection (ferry_remote_conn) for its streams, one shard after the other,
 * and Range reads take one from a pool of idle ones: a kept-alive connection
 * instead of a new one, and a new libcurl handle, for every shard.
 *
 * Locking: one mutex for every stream's state and the ring's bytes; a fetch
 * thread copies into the ring without it (a curl buffer at a time; wend
 * keeps readers off the bytes being overwritten). Each stream has its own
 * conditions, signalled only when someone waits on them: `data`
 * for readers waiting on bytes, `room` for its fetch waiting on readers, and
 * the fetch wakes only once GRAIN bytes of room are free. With one shared
 * condition every chunk woke every waiting thread, and the context switches
 * cost more CPU than the bytes (2 cores, small images: 0.70 x disk). Waits
 * are bounded by the fetch's own timeouts: a fetch always ends, and its end
 * is broadcast. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/countdown.h"
#include "common/error.h"
#include "common/thread.h"
#include "dataset/remote/remote.h"

#define RING ((size_t)8 << 20)
#define AHEAD (RING / 2)
#define NSTREAMS 8          /* a shuffle buffer's stragglers find their shard's stream */
#define GRAIN ((size_t)256 << 10)
#define NONE SIZE_MAX

typedef struct rstream {
    struct ferry_remote_streams *o;
    size_t shard;              /* NONE: free */
    size_t fetching;           /* the shard its thread fetches (shard goes NONE at a close) */
    uint64_t base;             /* the first byte fetched */
    uint64_t have;             /* bytes [base, have) arrived; the ring holds the last RING */
    uint64_t wend;             /* have, or the end of the bytes being copied in (lock let go) */
    uint64_t want;             /* the furthest end a reader asked for */
    uint8_t *ring;             /* RING bytes, allocated on first use */
    unsigned users;            /* readers inside read() on it */
    uint64_t used;             /* LRU tick */
    bool thread;               /* the slot's fetch thread runs (joined at destroy) */
    bool job;                  /* a fetch given to it, not yet taken up */
    bool active;               /* a fetch given to it and not ended */
    bool ended;                /* the fetch given last has returned */
    bool quit;                 /* destroy: the thread returns */
    bool busy;                 /* being closed or opened by a reader: no one else's */
    bool head;                 /* opened for the next epoch: no reader's until the reset */
    atomic_bool inject;        /* the test hook fails its fetch (ferry_debug_fail_head_stream_after) */
    unsigned data_waiters;     /* readers waiting in take() */
    bool room_waiter;          /* the fetch waits for room */
    pthread_cond_t data, room, go; /* go: the thread waits for a job */
    atomic_bool stop;
    ferry_status st;           /* the fetch's failure (ended) */
    char err[1024];
    pthread_t th;
    ferry_remote_conn *conn;   /* the thread's, for all its fetches (NULL: one per request) */
} rstream;

struct ferry_remote_streams {
    pthread_mutex_t lock;
    pthread_cond_t cv;         /* a stream freed, ended its close, or lost its last user */
    rstream s[NSTREAMS];
    size_t n;
    char *const *paths;
    ferry_remote_cache *cache;
    ferry_remote_opts opts;    /* paced: the fetch waits for its readers */
    ferry_remote_opts once;    /* for Range reads of one member */
    bool on;
    char **failed;             /* per shard: its stream's or a Range read's error, or NULL */
    double *failed_at;         /* per shard: when (ferry_now) it failed */
    uint8_t *opened;           /* per shard: streamed this epoch already */
    uint64_t *reach;           /* per shard: the furthest byte its closed streams fetched */
    size_t *next;              /* per shard: the one the plan reads after it, or NONE */
    size_t last, head;         /* the plan's last shard; the next epoch's first (or NONE) */
    bool planned;              /* a plan was given: without one, reads go by Range */
    uint8_t *led;              /* per shard: its next one has been started */
    ferry_status *failed_st;
    uint64_t tick;
    ferry_remote_pool pool;    /* connections for Range reads, not in use */
    uint64_t hits, misses, started, ahead, streamed, ranged, threads;
    double wait_s;
};

/* The first byte still in the ring: bytes being copied in (up to wend)
 * overwrite the oldest ones already. */
static uint64_t ring_start(const rstream *r)
{
    return r->wend - r->base > RING ? r->wend - RING : r->base;
}

static void ring_put(rstream *r, uint64_t pos, const uint8_t *b, size_t n)
{
    size_t at = (size_t)(pos % RING), first = n < RING - at ? n : RING - at;
    memcpy(r->ring + at, b, first);
    memcpy(r->ring, b + first, n - first);
}

static void ring_get(const rstream *r, uint64_t off, size_t n, uint8_t *dst)
{
    size_t at = (size_t)(off % RING), first = n < RING - at ? n : RING - at;
    memcpy(dst, r->ring + at, first);
    memcpy(dst + first, r->ring, n - first);
}

/* ---- the fetch thread ---- */

/* How far past the furthest read the fetch may run. */
static uint64_t limit(const rstream *r)
{
    return r->head ? GRAIN : AHEAD;
}

static int sink(void *arg, const uint8_t *b, size_t n)
{
    rstream *r = arg;
    struct ferry_remote_streams *o = r->o;
    pthread_mutex_lock(&o->lock);
    while (n) {
        /* Room: within limit() of the furthest read (a chunk larger than
         * that goes in parts). */
        if (!atomic_load(&r->stop) && r->have >= r->want + limit(r)) {
            r->room_waiter = true;
            while (!atomic_load(&r->stop) && !atomic_load(&r->inject) &&
                   r->have + GRAIN > r->want + limit(r))
                pthread_cond_wait(&r->room, &o->lock);
            r->room_waiter = false;
        }
        if (atomic_load(&r->inject)) {
            pthread_mutex_unlock(&o->lock);
            ferry_fail_at(FERRY_ERR_IO, o->paths[r->fetching], "at byte %llu: a failure injected "
                          "by ferry_debug_fail_head_stream_after", (unsigned long long)r->have);
            return 1;
        }
        if (atomic_load(&r->stop)) {
            pthread_mutex_unlock(&o->lock);
            ferry_fail_at(FERRY_ERR_BAD_STATE, o->paths[r->fetching], "stream stopped");
            return 1;
        }
        if (r->have == r->base) /* the server answers: not down */
            ferry__remote_down_note(ferry__remote_cache_down(o->cache), o->paths[r->fetching],
                                    FERRY_OK, 0);
        uint64_t room = r->want + limit(r) - r->have, at = r->have;
        size_t k = room < n ? (size_t)room : n;
        /* The copy without the lock, so that readers are not held up by it:
         * wend first moves ring_start past the bytes it overwrites, and no
         * reader copies bytes past have. Only this thread writes r->ring. */
        r->wend = at + k;
        pthread_mutex_unlock(&o->lock);
        ring_put(r, at, b, k);
        pthread_mutex_lock(&o->lock);
        r->have = r->wend;
        b += k;
        n -= k;
        if (r->data_waiters)
            pthread_cond_broadcast(&r->data);
    }
    pthread_mutex_unlock(&o->lock);
    return 0;
}

static bool stopped(void *arg)
{
    return atomic_load(&((rstream *)arg)->stop) || atomic_load(&((rstream *)arg)->inject);
}

/* One fetch: shard `fetching` from byte base on. Lock not held; fetching
 * and base do not change until it has ended. */
static void fetch(rstream *r)
{
    struct ferry_remote_streams *o = r->o;
    const char *url = o->paths[r->fetching];
    double t0 = ferry_now();
    ferry_status st = ferry__remote_conn_get(r->conn, url, &o->opts,
                                             ferry__remote_cache_obj(o->cache, r->fetching),
                                             r->base, UINT64_MAX, sink, stopped, r,
                                             ferry__remote_cache_counters(o->cache));
    if (!atomic_load(&r->stop)) /* a stream closed by a reader or a reset says nothing */
        ferry__remote_down_note(ferry__remote_cache_down(o->cache), url, st, ferry_now() - t0);
    pthread_mutex_lock(&o->lock);
    r->ended = true;
    r->active = false;
    r->st = st;
    if (st != FERRY_OK)
        snprintf(r->err, sizeof r->err, "%s", ferry_last_error());
    pthread_cond_broadcast(&r->data); /* readers, and close_stream waiting for the end */
    pthread_mutex_unlock(&o->lock);
}

/* A slot's thread: one fetch after the other, for as long as the streams
 * live. A thread started and joined for every shard cost a reader up to a
 * millisecond at each shard's first read (pthread_create under the lock,
 * which held up every other reader too): 4 MiB shards change every few
 * dozen milliseconds. */
static void *slot_main(void *arg)
{
    rstream *r = arg;
    struct ferry_remote_streams *o = r->o;
    if (ferry__remote_conn_create(&r->conn) != FERRY_OK) /* then a handle per request */
        ferry_clear_error();
    pthread_mutex_lock(&o->lock);
    for (;;) {
        while (!r->job && !r->quit)
            pthread_cond_wait(&r->go, &o->lock);
        if (!r->job)
            break;
        r->job = false;
        pthread_mutex_unlock(&o->lock);
        fetch(r);
        pthread_mutex_lock(&o->lock);
    }
    pthread_mutex_unlock(&o->lock);
    ferry__remote_conn_destroy(r->conn);
    r->conn = NULL;
    return NULL;
}

/* ---- streams (lock held) ---- */

/* Stops r's fetch and waits for its users to leave and the fetch to end;
 * r is free after (its thread waits for the next fetch). The caller has
 * marked r busy, so that no one else picks it while the lock is let go. */
static void close_stream(struct ferry_remote_streams *o, rstream *r)
{
    atomic_store(&r->stop, true); /* find() passes it over from now on */
    pthread_cond_broadcast(&r->data);
    pthread_cond_signal(&r->room);
    while (r->users)
        pthread_cond_wait(&o->cv, &o->lock);
    if (r->shard != NONE && r->have > o->reach[r->shard])
        o->reach[r->shard] = r->have;
    r->shard = NONE;
    r->head = false;
    if (r->job) /* given but not taken up yet: it never starts */
        r->job = r->active = false;
    while (r->active)
        pthread_cond_wait(&r->data, &o->lock);
}

static rstream *find(struct ferry_remote_streams *o, size_t k)
{
    for (size_t i = 0; i < NSTREAMS; i++)
        if (o->s[i].shard == k && !o->s[i].busy && !o->s[i].head && !atomic_load(&o->s[i].stop))
            return &o->s[i];
    return NULL;
}

/* r's thread, started at its first stream (lock held): false when it cannot
 * be (the read then goes by Range). */
static bool slot_thread(struct ferry_remote_streams *o, rstream *r)
{
    if (r->thread) /* kept from the slot's first stream on */
        return true;
    r->job = r->quit = false;
    if (ferry_thread_create(&r->th, slot_main, r) != 0)
        return false;
    r->thread = true;
    o->threads++;
    return true;
}

/* Why a stream opens: a reader's read; ahead of its shard's first read; the
 * next epoch's head. */
enum { OPEN_READ, OPEN_AHEAD, OPEN_HEAD };

/* Which slot a new stream takes first: a free one, then one whose fetch
 * failed (its shard's reads fail at once now: its ring is of no use), then
 * the least recently used. So when a server dies, the streams that fail one
 * after the other do not push out the rings of shards that came whole, whose
 * samples are what on_error = SKIP still has to replace the rest with. */
static int slot_rank(const rstream *x)
{
    return x->shard == NONE ? 0 : x->ended && x->st != FERRY_OK ? 1 : 2;
}

/* A stream of shard k from byte off (a head: from 0, for the next epoch): a
 * free slot, else a failed one, else the least recently used one no reader
 * is in (slot_rank). NULL when
 * none can be had (every one in use, no memory, no thread): the read then
 * goes by Range. */
static rstream *open_stream(struct ferry_remote_streams *o, size_t k, uint64_t off, int why)
{
    const bool head = why == OPEN_HEAD;
    /* Its server taken for down: no stream (a reader's read goes by Range,
     * which fails at once with the reason). */
    if (ferry__remote_down_check(ferry__remote_cache_down(o->cache), o->paths[k]) != FERRY_OK) {
        ferry_clear_error();
        return NULL;
    }
    rstream *r = NULL;
    for (size_t i = 0; i < NSTREAMS; i++) {
        rstream *x = &o->s[i];
        if (x->users || x->busy)
            continue;
        int xr = slot_rank(x), rr = r ? slot_rank(r) : 3;
        if (xr < rr || (xr == rr && xr > 0 && x->used < r->used))
            r = x;
    }
    if (!r)
        return NULL;
    r->busy = true;
    if (r->shard != NONE || r->active)
        close_stream(o, r);
    rstream *other = head ? NULL : find(o, k); /* another reader may have opened one meanwhile */
    if (other || (!r->ring && !(r->ring = ferry_host_malloc(RING))) || !slot_thread(o, r)) {
        r->busy = false;
        pthread_cond_broadcast(&o->cv);
        return other;
    }
    /* An epoch's first stream of a shard starts at its first byte: the
     * shuffle buffer's first reads of it are not all at its start. */
    if (head || !o->opened[k])
        off = 0;
    if (!head)
        o->opened[k] = 1;
    r->head = head;
    r->shard = r->fetching = k;
    r->used = ++o->tick;
    r->base = r->have = r->wend = r->want = off;
    r->ended = false;
    r->st = FERRY_OK;
    r->err[0] = '\0';
    atomic_store(&r->stop, false);
    atomic_store(&r->inject, false);
    r->job = r->active = true;
    pthread_cond_signal(&r->go);
    r->busy = false;
    pthread_cond_broadcast(&o->cv);
    o->started++;
    o->ahead += why != OPEN_READ; /* here, not by the caller: other may be returned */
    return r;
}

/* Shard j's stream ahead of its first read, unless it has one. */
static void start_ahead(struct ferry_remote_streams *o, size_t j)
{
    if (j != NONE && !o->opened[j] && !o->failed[j] && !find(o, j))
        open_stream(o, j, 0, OPEN_AHEAD);
}

static bool has_head(const struct ferry_remote_streams *o)
{
    for (size_t i = 0; i < NSTREAMS; i++)
        if (o->s[i].head && o->s[i].shard != NONE)
            return true;
    return false;
}

/* At shard k's first read this epoch: the streams of the two shards the plan
 * reads next, so that their requests' latency passes while k and the next
 * are read; at the last but one shard's (or the last's, with fewer), the next
 * epoch's head stream. One shard ahead was not enough with small shards (4
 * MiB of 28x28 images: a few dozen milliseconds) on a busy machine: a fetch
 * thread woken at the previous shard's first read was not always run before
 * its shard's first read, and both workers waited for it. */
static void start_next(struct ferry_remote_streams *o, size_t k)
{
    if (o->led[k])
        return;
    o->led[k] = 1;
    size_t j = o->next[k];
    start_ahead(o, j);
    if (j != NONE)
        start_ahead(o, o->next[j]);
    if ((k == o->last || j == o->last) && o->head != NONE && !has_head(o))
        open_stream(o, o->head, 0, OPEN_HEAD);
}

/* ---- reads ---- */

static ferry_status read_range(struct ferry_remote_streams *o, size_t k, uint64_t off, size_t n,
                               uint8_t *dst)
{
    ferry_remote_down *down = ferry__remote_cache_down(o->cache);
    ferry_status st = ferry__remote_down_check(down, o->paths[k]);
    if (st != FERRY_OK)
        return st;
    double t0 = ferry_now();
    st = ferry__remote_pool_read(&o->pool, o->paths[k], &o->once,
                                 ferry__remote_cache_obj(o->cache, k), off, n, dst,
                                 ferry__remote_cache_counters(o->cache));
    ferry__remote_down_note(down, o->paths[k], st, ferry_now() - t0);
    return st;
}

/* Shard k fails its reads from now on (see the top): false when there is no
 * memory to keep the message (the read then goes by Range). Lock held. */
static bool mark_failed(struct ferry_remote_streams *o, size_t k, ferry_status st, const char *err)
{
    if (!o->failed[k] && (o->failed[k] = ferry_host_strdup(err))) {
        o->failed_st[k] = st;
        o->failed_at[k] = ferry_now();
    }
    return o->failed[k] != NULL;
}

/* Whether shard k failed and its reads fail at once: while streaming, until
 * the next reset; else for 3 x the timeout, after which it is tried again.
 * Lock held. */
static bool shard_failed(struct ferry_remote_streams *o, size_t k)
{
    if (!o->failed[k])
        return false;
    if (o->on || ferry_now() - o->failed_at[k] < 3 * o->once.timeout_s)
        return true;
    ferry_host_free(o->failed[k]);
    o->failed[k] = NULL;
    return false;
}

/* What a reader got from the stream r (lock held). */
enum { GOT = 0, BY_RANGE, FAILED };

static int take(struct ferry_remote_streams *o, rstream *r, uint64_t off, size_t n, uint8_t *dst,
                bool *waited)
{
    r->used = ++o->tick;
    if (off + n > r->want) {
        r->want = off + n;
        if (r->room_waiter && r->have + GRAIN <= r->want + AHEAD)
            pthread_cond_signal(&r->room);
    }
    while (r->have < off + n && !r->ended && !atomic_load(&r->stop)) {
        *waited = true;
        r->data_waiters++;
        pthread_cond_wait(&r->data, &o->lock);
        r->data_waiters--;
    }
    if (r->have >= off + n && off >= ring_start(r)) {
        ring_get(r, off, n, dst);
        return GOT;
    }
    if (r->ended && r->st != FERRY_OK && !atomic_load(&r->stop) && r->have < off + n)
        return mark_failed(o, r->shard, r->st, r->err) ? FAILED : BY_RANGE;
    return BY_RANGE; /* overwritten while waiting, or the stream was closed */
}

ferry_status ferry__remote_stream_read(ferry_remote_streams *o, size_t k, uint64_t off, size_t n,
                                       uint8_t *dst)
{
    double t0 = ferry_now();
    bool waited = false;
    int got = BY_RANGE;
    pthread_mutex_lock(&o->lock);
    rstream *r = o->on ? find(o, k) : NULL;
    /* Bytes that came before the failure are still good. */
    if (shard_failed(o, k) && !(r && off >= ring_start(r) && r->have >= off + n)) {
        ferry_status st = ferry_fail(o->failed_st[k], "%s", o->failed[k]);
        pthread_mutex_unlock(&o->lock);
        return st;
    }
    if (o->on && o->planned && !r && !(o->opened[k] && off + n <= o->reach[k]))
        r = open_stream(o, k, off, OPEN_READ);
    if (r) {
        r->users++; /* also keeps it from being taken for the next shard */
        r->used = ++o->tick;
        start_next(o, k);
        if (off >= ring_start(r))
            got = take(o, r, off, n, dst, &waited);
        if (--r->users == 0 && atomic_load(&r->stop))
            pthread_cond_broadcast(&o->cv); /* close_stream waits for it */
    }
    ferry_status st = FERRY_OK;
    if (got == FAILED)
        st = ferry_fail(o->failed_st[k], "%s", o->failed[k]);
    if (got == GOT) {
        o->streamed++;
        o->hits += !waited;
        o->misses += waited;
        o->wait_s += waited ? ferry_now() - t0 : 0;
    }
    pthread_mutex_unlock(&o->lock);
    if (got != BY_RANGE)
        return st;
    st = read_range(o, k, off, n, dst);
    pthread_mutex_lock(&o->lock);
    if (st != FERRY_OK)
        (void)mark_failed(o, k, st, ferry_last_error());
    o->ranged++;
    o->misses++;
    o->wait_s += ferry_now() - t0;
    pthread_mutex_unlock(&o->lock);
    return st;
}

static atomic_llong head_fail_countdown; /* 0 = off; 1 = the next reset that keeps a head */

int64_t ferry_debug_fail_head_stream_after(int64_t k)
{
    return atomic_exchange(&head_fail_countdown, (long long)k);
}

/* The test hook: at the k-th reset that keeps a head stream, its fetch fails
 * just after the reset passed over it, as if while the reset joined the
 * other streams, and the reset waits for that failure before going on. A
 * fetch that had already ended well fails as one that failed at its first
 * byte. Lock held (let go while waiting). */
static void fail_head_for_test(struct ferry_remote_streams *o, rstream *r)
{
    if (!ferry_countdown_fires(&head_fail_countdown))
        return;
    atomic_store(&r->inject, true);
    pthread_cond_signal(&r->room);
    while (!r->ended)
        pthread_cond_wait(&r->data, &o->lock);
    if (r->st == FERRY_OK) {
        r->st = FERRY_ERR_IO;
        r->have = r->wend = r->base;
        snprintf(r->err, sizeof r->err, "%s: at byte %llu: a failure injected by "
                 "ferry_debug_fail_head_stream_after", o->paths[r->shard],
                 (unsigned long long)r->base);
    }
}

void ferry__remote_streams_reset(ferry_remote_streams *o, bool on)
{
    if (!o)
        return;
    pthread_mutex_lock(&o->lock);
    for (size_t i = 0; i < NSTREAMS; i++) {
        rstream *r = &o->s[i];
        while (r->busy)
            pthread_cond_wait(&o->cv, &o->lock);
        /* The new epoch's first shard: kept, made its stream below unless
         * its fetch has failed by then (checked there, once, after every
         * join of this loop: a check here alone missed a failure while the
         * lock was let go for a join after it). */
        if (on && r->head && r->shard != NONE && !atomic_load(&r->stop)) {
            fail_head_for_test(o, r);
            continue;
        }
        if (r->shard != NONE || r->active) {
            r->busy = true;
            close_stream(o, r);
            r->busy = false;
        }
    }
    for (size_t k = 0; k < o->n; k++) {
        ferry_host_free(o->failed[k]);
        o->failed[k] = NULL;
        o->opened[k] = 0;
        o->reach[k] = 0;
        o->led[k] = 0;
    }
    for (size_t i = 0; i < NSTREAMS; i++) {
        rstream *r = &o->s[i];
        if (!r->head)
            continue;
        /* No failure of the last epoch is carried into this one: the shard
         * is tried afresh. Here, after the loop above let the lock go for
         * its joins, during which the fetch may have failed. (The lock is
         * held from here to the end: a failure after this check is this
         * epoch's.) */
        if (r->ended && r->st != FERRY_OK) {
            size_t k = r->shard;
            r->busy = true;
            close_stream(o, r);
            r->busy = false;
            o->reach[k] = 0; /* its bytes were the last epoch's */
            continue;
        }
        r->head = false;
        o->opened[r->shard] = 1;
        pthread_cond_signal(&r->room); /* its limit is AHEAD now */
    }
    o->on = on;
    pthread_mutex_unlock(&o->lock);
    /* As failed shards are, their servers are tried again at an epoch's start. */
    ferry__remote_down_forget(ferry__remote_cache_down(o->cache));
}

void ferry__remote_streams_plan(ferry_remote_streams *o, const size_t *seq, size_t m, size_t head)
{
    if (!o)
        return;
    pthread_mutex_lock(&o->lock);
    for (size_t k = 0; k < o->n; k++)
        o->next[k] = NONE;
    for (size_t i = 0; seq && i + 1 < m; i++)
        o->next[seq[i]] = seq[i + 1];
    o->planned = seq != NULL;
    o->last = seq && m ? seq[m - 1] : NONE;
    o->head = seq && head < o->n ? head : NONE;
    pthread_mutex_unlock(&o->lock);
}

bool ferry__remote_streams_on(ferry_remote_streams *o)
{
    if (!o)
        return false;
    pthread_mutex_lock(&o->lock);
    bool on = o->on;
    pthread_mutex_unlock(&o->lock);
    return on;
}

void ferry__remote_streams_stats(ferry_remote_streams *o, ferry_remote_stats *out)
{
    if (!o)
        return;
    pthread_mutex_lock(&o->lock);
    out->hits += o->hits;
    out->misses += o->misses;
    out->wait_s += o->wait_s;
    out->streams += o->started;
    out->streams_ahead += o->ahead;
    out->stream_reads += o->streamed;
    out->range_reads += o->ranged;
    out->stream_threads += o->threads;
    pthread_mutex_unlock(&o->lock);
}

ferry_status ferry__remote_streams_create(char *const *paths, size_t n, ferry_remote_cache *cache,
                                          const ferry_remote_opts *opts, ferry_remote_streams **out)
{
    *out = NULL;
    if (!cache)
        return FERRY_OK;
    ferry_remote_streams *o = ferry_host_calloc(1, sizeof *o);
    if (!o)
        return FERRY_ERR_NO_MEMORY;
    if (!(o->failed = ferry_host_calloc(n, sizeof *o->failed)) ||
        !(o->failed_at = ferry_host_calloc(n, sizeof *o->failed_at)) ||
        !(o->failed_st = ferry_host_calloc(n, sizeof *o->failed_st)) ||
        !(o->opened = ferry_host_calloc(n, 1)) || !(o->led = ferry_host_calloc(n, 1)) ||
        !(o->reach = ferry_host_calloc(n, sizeof *o->reach)) ||
        !(o->next = ferry_host_malloc(n * sizeof *o->next))) {
        ferry_host_free(o->failed);
        ferry_host_free(o->failed_at);
        ferry_host_free(o->failed_st);
        ferry_host_free(o->opened);
        ferry_host_free(o->led);
        ferry_host_free(o->reach);
        ferry_host_free(o);
        return FERRY_ERR_NO_MEMORY;
    }
    pthread_mutex_init(&o->lock, NULL);
    ferry__remote_pool_init(&o->pool);
    pthread_cond_init(&o->cv, NULL);
    for (size_t i = 0; i < NSTREAMS; i++) {
        pthread_cond_init(&o->s[i].data, NULL);
        pthread_cond_init(&o->s[i].room, NULL);
        pthread_cond_init(&o->s[i].go, NULL);
    }
    o->n = n;
    for (size_t k = 0; k < n; k++)
        o->next[k] = NONE;
    o->last = o->head = NONE;
    o->paths = paths;
    o->cache = cache;
    o->once = *opts;
    o->opts = *opts;
    o->opts.paced = true;
    for (size_t i = 0; i < NSTREAMS; i++) {
        o->s[i].o = o;
        o->s[i].shard = NONE;
        atomic_init(&o->s[i].stop, false);
        atomic_init(&o->s[i].inject, false);
    }
    *out = o;
    return FERRY_OK;
}

void ferry__remote_streams_destroy(ferry_remote_streams *o)
{
    if (!o)
        return;
    ferry__remote_streams_reset(o, false);
    for (size_t i = 0; i < NSTREAMS; i++) {
        rstream *r = &o->s[i];
        pthread_mutex_lock(&o->lock);
        r->quit = true;
        pthread_cond_signal(&r->go);
        pthread_mutex_unlock(&o->lock);
        if (r->thread)
            pthread_join(r->th, NULL);
        ferry_host_free(r->ring);
    }
    ferry__remote_pool_fini(&o->pool);
    ferry_host_free(o->failed);
    ferry_host_free(o->failed_at);
    ferry_host_free(o->failed_st);
    ferry_host_free(o->opened);
    ferry_host_free(o->led);
    ferry_host_free(o->reach);
    ferry_host_free(o->next);
    for (size_t i = 0; i < NSTREAMS; i++) {
        pthread_cond_destroy(&o->s[i].data);
        pthread_cond_destroy(&o->s[i].room);
        pthread_cond_destroy(&o->s[i].go);
    }
    pthread_cond_destroy(&o->cv);
    pthread_mutex_destroy(&o->lock);
    ferry_host_free(o);
}

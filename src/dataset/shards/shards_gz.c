/* Loading samples of gzip-compressed shards. A gzip stream has no random
 * access: a member is reached by decompressing the shard up to it. So each
 * shard is read by one stream at a time, front to back, and the images it
 * passes on the way that will be read later are kept in a bounded ring, from
 * which those reads are then served. With the loader's plan (which samples
 * this epoch reads, ferry__gz_cache_plan), streaming mode decompresses each
 * shard once per epoch, and the ring holds about the shuffle buffer's images.
 *
 * Locking: one mutex for the ring, the per-sample tables and the streams'
 * assignment; a shard's stream is advanced outside it by the one thread that
 * marked the shard busy. Readers of images already kept never wait for a
 * stream. Memory, all allocated at create: the ring (cap bytes, touched as
 * images are kept; no more than the images of all gzip shards), up to
 * MAX_STREAMS streams of about 350 KiB each, 2.5 MiB of ring entries, 10
 * bytes per sample. */
#include <pthread.h>
#include <string.h>

#include "common/assert.h"
#include "common/error.h"
#include "common/mutex.h"
#include "dataset/shards/gz.h"
#include "dataset/core/internal.h"
#include "dataset/shards/shards.h"

#define MAX_STREAMS 8
#define QCAP ((size_t)1 << 16)   /* images held at once, at most */
#define SKIP_BUF ((size_t)64 << 10)

enum { E_FREE = 0, E_WRITING, E_KEPT };

/* One image in the ring, at pos (a byte count since the ring's start that
 * only grows; the bytes are at pos % cap). */
typedef struct entry {
    uint64_t seq, pos;
    size_t sample, len;
    uint8_t state;
} entry;

typedef struct stream {
    ferry_gz gz;
    uint8_t *skip;        /* owned: where skipped bytes go */
    size_t shard;         /* the shard it reads */
    size_t next;          /* the next position in the shard's by_off list */
    uint64_t used;        /* when last used, for least-recently-used reuse */
    bool bad;             /* an error left it mid-member: rewind before use */
} stream;

struct ferry_gz_cache {
    ferry_mutex lock;
    pthread_cond_t cv;
    ferry_gz_cache_setup su;
    /* the ring */
    uint8_t *ring;
    size_t cap;
    uint64_t head;        /* where the next image goes */
    entry *q;             /* QCAP entries, seq [front, back) in use */
    uint64_t front, back;
    uint64_t *kept;       /* per sample: 1 + the seq of its entry, 0 none */
    uint16_t *pending;    /* per sample: reads planned (NULL: no plan) */
    bool planned;
    /* the streams */
    stream streams[MAX_STREAMS];
    size_t nstreams;      /* opened at create: one a gzip shard, MAX_STREAMS at most */
    int8_t *stream_of;    /* per shard: its stream, or -1 */
    uint8_t *busy;        /* per shard: a thread is advancing its stream */
    uint64_t tick;
    ferry_gz_cache_stats stats;
};

/* ---- the ring (lock held) ---- */

/* The ring's invariants, checked on entry to and after every change in debug
 * and sanitizer builds (FERRY_ASSERT): front <= back, at most QCAP entries;
 * the entries in use are in seq order, each at its slot, none wrapping the
 * ring's end, each after the one before and before head, all within cap bytes
 * of the front's start; a kept entry is its sample's (kept[]) and the kept
 * counters add up. */
static void check_ring(ferry_gz_cache *c)
{
#if FERRY_DEBUG
    FERRY_ASSERT_HELD(&c->lock);
    FERRY_ASSERT(c->front <= c->back && c->back - c->front <= QCAP);
    uint64_t kept = 0, bytes = 0, end = 0;
    for (uint64_t q = c->front; q < c->back; q++) {
        const entry *e = &c->q[q % QCAP];
        FERRY_ASSERT(e->seq == q && e->len > 0 && e->pos % c->cap + e->len <= c->cap);
        FERRY_ASSERT((q == c->front || e->pos >= end) && e->pos + e->len <= c->head);
        end = e->pos + e->len;
        if (e->state == E_KEPT) {
            FERRY_ASSERT(c->kept[e->sample] == q + 1);
            kept++;
            bytes += e->len;
        }
    }
    FERRY_ASSERT(c->front == c->back || c->head - c->q[c->front % QCAP].pos <= c->cap);
    FERRY_ASSERT(kept == c->stats.kept && bytes == c->stats.kept_bytes);
#else
    (void)c;
#endif
}


static entry *entry_of(ferry_gz_cache *c, size_t i)
{
    uint64_t k = c->kept[i];
    if (!k)
        return NULL;
    entry *e = &c->q[(k - 1) % QCAP];
    return e->seq == k - 1 && e->sample == i && e->state == E_KEPT ? e : NULL;
}

static void drop(ferry_gz_cache *c, entry *e)
{
    if (e->state == E_KEPT) {
        c->kept[e->sample] = 0;
        c->stats.kept_bytes -= e->len;
        c->stats.kept--;
    }
    e->state = E_FREE;
}

/* Pops free entries off the front; with evict, a kept one too (counted). */
static bool pop_front(ferry_gz_cache *c, bool evict)
{
    if (c->front == c->back)
        return false;
    entry *e = &c->q[c->front % QCAP];
    if (e->state == E_WRITING || (e->state == E_KEPT && !evict))
        return false;
    if (e->state == E_KEPT) {
        c->stats.evicted++;
        drop(c, e);
    }
    c->front++;
    return true;
}

/* Room for len bytes for sample i: 1 + the entry's seq, or 0 when there is
 * none (the image is bigger than the ring, or the front is being written). */
static uint64_t reserve(ferry_gz_cache *c, size_t i, size_t len)
{
    if (!len)
        len = 1;
    if (len > c->cap)
        return 0;
    for (;;) {
        while (pop_front(c, false))
            ;
        /* An image never wraps: it starts over at the ring's start instead. */
        uint64_t start = c->head;
        if (start % c->cap + len > c->cap)
            start += c->cap - start % c->cap;
        uint64_t tail = c->front == c->back ? start : c->q[c->front % QCAP].pos;
        if (c->back - c->front < QCAP && start + len - tail <= c->cap) {
            entry *e = &c->q[c->back % QCAP];
            *e = (entry){.seq = c->back, .pos = start, .sample = i, .len = len,
                         .state = E_WRITING};
            c->head = start + len;
            return ++c->back;
        }
        if (!pop_front(c, true))
            return 0;
    }
}

static uint8_t *entry_bytes(const ferry_gz_cache *c, const entry *e)
{
    return c->ring + e->pos % c->cap;
}

/* Sample i's image into dst when the ring has it; a planned read uses up one. */
static bool take_kept(ferry_gz_cache *c, size_t i, uint8_t *dst)
{
    entry *e = entry_of(c, i);
    if (!e)
        return false;
    memcpy(dst, entry_bytes(c, e), c->su.samples[i].img_size);
    if (c->planned && c->pending[i] > 1) {
        c->pending[i]--;
    } else {
        if (c->planned)
            c->pending[i] = 0;
        drop(c, e); /* read: its room is free again */
    }
    c->stats.from_ring++;
    return true;
}

/* Whether an image the stream passes is worth keeping. */
static bool want(const ferry_gz_cache *c, size_t j)
{
    const ferry_shard_sample *s = &c->su.samples[j];
    return !s->problem && !c->kept[j] && (!c->planned || c->pending[j]) && s->img_size <= c->cap;
}

/* ---- streams ---- */

/* Opens the next stream on gzip shard k and decompresses its first byte:
 * zlib allocates its window at the first output, and that should be at
 * create, not in a worker. */
static ferry_status stream_open(ferry_gz_cache *c, size_t k)
{
    stream *s = &c->streams[c->nstreams];
    memset(s, 0, sizeof *s);
    ferry_status st = ferry__gz_open(&s->gz, c->su.fds[k], c->su.paths[k]);
    size_t got;
    if (st == FERRY_OK && !(s->skip = ferry_host_malloc(SKIP_BUF)))
        st = FERRY_ERR_NO_MEMORY;
    if (st == FERRY_OK && c->su.pin)
        st = c->su.pin(c->su.pin_arg, k, true);
    if (st == FERRY_OK)
        st = ferry__gz_read(&s->gz, s->skip, 1, &got);
    if (c->su.pin)
        (void)c->su.pin(c->su.pin_arg, k, false);
    if (st != FERRY_OK) {
        ferry__gz_close(&s->gz);
        ferry_host_free(s->skip);
        return st;
    }
    s->shard = k;
    s->next = k ? c->su.by_off_ends[k - 1] : 0;
    c->stream_of[k] = (int8_t)c->nstreams++;
    return FERRY_OK;
}

/* Whether stream x is the one to move: idle, and its shard's last image
 * passed (what a stream in streaming order is once its shard is done). */
static bool spent(const ferry_gz_cache *c, const stream *x)
{
    return !c->busy[x->shard] && (x->bad || x->next >= c->su.by_off_ends[x->shard]);
}

/* The stream for shard k (lock held, k not busy): its own, a spent one, or
 * the least recently used idle one; NULL when all are busy (wait). */
static stream *stream_for(ferry_gz_cache *c, size_t k)
{
    if (c->stream_of[k] >= 0)
        return &c->streams[c->stream_of[k]];
    stream *pick = NULL;
    for (size_t t = 0; t < c->nstreams && !pick; t++)
        if (spent(c, &c->streams[t]))
            pick = &c->streams[t];
    bool any_spent = pick != NULL;
    for (size_t t = 0; t < c->nstreams && !any_spent; t++) {
        stream *x = &c->streams[t];
        if (!c->busy[x->shard] && (!pick || x->used < pick->used))
            pick = x;
    }
    if (!pick)
        return NULL;
    c->stream_of[pick->shard] = -1;
    pick->shard = k;
    pick->gz.fd = c->su.fds[k];
    pick->gz.name = c->su.paths[k];
    pick->bad = true; /* starts at the shard's first byte */
    c->stream_of[k] = (int8_t)(pick - c->streams);
    return pick;
}

static ferry_status skip_to(stream *s, uint64_t off)
{
    if (off < s->gz.out) /* images overlap: not an index of this shard */
        return ferry_fail_at(FERRY_ERR_FORMAT, s->gz.name, "an image at byte %llu overlaps the one before "
                             "it (the index does not fit the shard)",
                             (unsigned long long)off);
    return ferry__gz_take(&s->gz, NULL, off - s->gz.out, s->skip, SKIP_BUF);
}

/* Keeps image j, which the stream is at, if the ring has room for it. */
static ferry_status pass_image(ferry_gz_cache *c, stream *s, size_t j)
{
    const ferry_shard_sample *sp = &c->su.samples[j];
    ferry_mutex_lock(&c->lock);
    check_ring(c);
    uint64_t k = want(c, j) ? reserve(c, j, (size_t)sp->img_size) : 0;
    entry *e = k ? &c->q[(k - 1) % QCAP] : NULL;
    check_ring(c);
    ferry_mutex_unlock(&c->lock);
    if (!e)
        return FERRY_OK; /* skipped with what comes next */
    ferry_status st = skip_to(s, sp->img_off);
    if (st == FERRY_OK)
        st = ferry__gz_take(&s->gz, entry_bytes(c, e), sp->img_size, NULL, 0);
    ferry_mutex_lock(&c->lock);
    check_ring(c);
    if (st == FERRY_OK) {
        e->state = E_KEPT;
        c->kept[j] = k;
        c->stats.kept_bytes += e->len;
        c->stats.kept++;
        if (c->stats.kept_bytes > c->stats.kept_bytes_peak)
            c->stats.kept_bytes_peak = c->stats.kept_bytes;
        if (c->stats.kept > c->stats.kept_peak)
            c->stats.kept_peak = c->stats.kept;
        pthread_cond_broadcast(&c->cv);
    } else {
        e->state = E_FREE;
    }
    check_ring(c);
    ferry_mutex_unlock(&c->lock);
    return st;
}

/* A sample the plan reads more than once (the loader's warm-up reads the
 * epoch's first sample once per worker): its image is kept as it is read, so
 * that the later reads come from the ring, not from a rewind. *done: it is in
 * dst; else it is not planned again or the ring had no room, and the stream
 * has not moved (the caller reads it). The shard is busy (ours). */
static ferry_status take_again(ferry_gz_cache *c, stream *s, size_t i, uint8_t *dst, bool *done)
{
    *done = false;
    ferry_mutex_lock(&c->lock);
    bool again = c->planned && c->pending[i] > 1;
    ferry_mutex_unlock(&c->lock);
    ferry_status st = again ? pass_image(c, s, i) : FERRY_OK;
    if (!again || st != FERRY_OK)
        return st;
    ferry_mutex_lock(&c->lock);
    entry *e = entry_of(c, i);
    if (e)
        memcpy(dst, entry_bytes(c, e), c->su.samples[i].img_size);
    ferry_mutex_unlock(&c->lock);
    *done = e != NULL;
    return FERRY_OK;
}

/* Moves shard k's stream to sample i and reads its image into dst, keeping
 * the wanted images on the way. The shard is busy (ours); lock not held. */
static ferry_status advance(ferry_gz_cache *c, stream *s, size_t i, uint8_t *dst)
{
    const ferry_shard_sample *sp = &c->su.samples[i];
    size_t k = sp->shard, first = k ? c->su.by_off_ends[k - 1] : 0;
    ferry_status st = FERRY_OK;
    bool pass = false, rewound = false;
    if (s->bad || s->gz.out > sp->img_off) {
        pass = true;
        /* A reset or failed stream starts over by design; without a plan
         * nothing says what to keep, so only a planned restart is a rewind. */
        rewound = !s->bad;
        if ((st = ferry__gz_rewind(&s->gz)) != FERRY_OK)
            return st;
        s->next = first;
        s->bad = false;
    }
    uint64_t from = s->gz.out;
    while (st == FERRY_OK && s->next < c->su.by_off_ends[k]) {
        size_t j = c->su.by_off[s->next];
        if (c->su.samples[j].img_off >= sp->img_off)
            break;
        s->next++;
        st = pass_image(c, s, j);
    }
    bool done = false;
    if (st == FERRY_OK)
        st = take_again(c, s, i, dst, &done);
    if (st == FERRY_OK && !done && (st = skip_to(s, sp->img_off)) == FERRY_OK)
        st = ferry__gz_take(&s->gz, dst, sp->img_size, NULL, 0);
    if (st == FERRY_OK && s->next < c->su.by_off_ends[k] && c->su.by_off[s->next] == i)
        s->next++;
    s->bad = st != FERRY_OK;
    ferry_mutex_lock(&c->lock);
    check_ring(c);
    c->stats.decompressed += s->gz.out - from;
    c->stats.rewinds += rewound && c->planned;
    c->stats.passes += pass;
    check_ring(c);
    ferry_mutex_unlock(&c->lock);
    return st;
}

/* ---- the interface ---- */

ferry_status ferry__gz_cache_read(ferry_gz_cache *c, size_t i, uint8_t *dst)
{
    size_t k = c->su.samples[i].shard;
    stream *s = NULL;
    ferry_mutex_lock(&c->lock);
    check_ring(c);
    for (;;) {
        if (take_kept(c, i, dst)) {
            check_ring(c);
            ferry_mutex_unlock(&c->lock);
            return FERRY_OK;
        }
        if (!c->busy[k] && (s = stream_for(c, k)) != NULL)
            break;
        ferry_cond_wait(&c->cv, &c->lock);
    }
    c->busy[k] = 1;
    check_ring(c);
    ferry_mutex_unlock(&c->lock);
    ferry_status st = advance(c, s, i, dst);
    ferry_mutex_lock(&c->lock);
    check_ring(c);
    c->busy[k] = 0;
    s->used = ++c->tick;
    if (st == FERRY_OK && c->planned && c->pending[i])
        c->pending[i]--;
    c->stats.from_stream += st == FERRY_OK;
    pthread_cond_broadcast(&c->cv);
    check_ring(c);
    ferry_mutex_unlock(&c->lock);
    return st; /* its messages name the shard and the byte */
}

ferry_status ferry__gz_cache_plan(ferry_gz_cache *c, const size_t *idx, size_t n)
{
    ferry_mutex_lock(&c->lock);
    check_ring(c);
    /* A new plan starts every shard over: what a stream passed for the last
     * one and did not keep is behind it. */
    for (size_t t = 0; t < c->nstreams; t++)
        if (!c->busy[c->streams[t].shard])
            c->streams[t].bad = true;
    ferry_status st = FERRY_OK;
    if (idx && !c->pending && !(c->pending = ferry_host_malloc(c->su.n * sizeof *c->pending)))
        st = FERRY_ERR_NO_MEMORY;
    c->planned = idx && st == FERRY_OK;
    if (c->planned) {
        memset(c->pending, 0, c->su.n * sizeof *c->pending);
        for (size_t k = 0; k < n; k++)
            if (idx[k] < c->su.n && c->pending[idx[k]] < UINT16_MAX)
                c->pending[idx[k]]++;
    }
    check_ring(c);
    ferry_mutex_unlock(&c->lock);
    return st;
}

void ferry__gz_cache_stats(ferry_gz_cache *c, ferry_gz_cache_stats *out)
{
    ferry_mutex_lock(&c->lock);
    check_ring(c);
    *out = c->stats;
    ferry_mutex_unlock(&c->lock);
}

ferry_status ferry__gz_cache_create(const ferry_gz_cache_setup *su, ferry_gz_cache **out)
{
    ferry_gz_cache *c = ferry_host_calloc(1, sizeof *c);
    if (!c)
        return FERRY_ERR_NO_MEMORY;
    c->su = *su;
    c->cap = su->cap_bytes;
    if (!c->cap)
        c->cap = 1; /* no image: nothing is ever kept */
    ferry_mutex_init(&c->lock);
    pthread_cond_init(&c->cv, NULL);
    /* Everything now, so that loading allocates nothing: the ring is address
     * space until images are kept in it. */
    c->kept = ferry_host_calloc(su->n, sizeof *c->kept);
    c->stream_of = ferry_host_malloc(su->nshards);
    c->busy = ferry_host_calloc(su->nshards, 1);
    c->ring = ferry_host_malloc(c->cap);
    c->q = ferry_host_calloc(QCAP, sizeof *c->q);
    ferry_status st = c->kept && c->stream_of && c->busy && c->ring && c->q ? FERRY_OK :
                      FERRY_ERR_NO_MEMORY;
    if (st == FERRY_OK)
        memset(c->stream_of, -1, su->nshards);
    for (size_t k = 0; st == FERRY_OK && k < su->nshards && c->nstreams < MAX_STREAMS; k++)
        if (su->gzip[k])
            st = stream_open(c, k);
    if (st != FERRY_OK) {
        ferry__gz_cache_destroy(c);
        return st;
    }
    *out = c;
    return FERRY_OK;
}

void ferry__gz_cache_destroy(ferry_gz_cache *c)
{
    if (!c)
        return;
    for (size_t t = 0; t < c->nstreams; t++) {
        ferry__gz_close(&c->streams[t].gz);
        ferry_host_free(c->streams[t].skip);
    }
    ferry_mutex_destroy(&c->lock);
    pthread_cond_destroy(&c->cv);
    ferry_host_free(c->ring);
    ferry_host_free(c->q);
    ferry_host_free(c->kept);
    ferry_host_free(c->pending);
    ferry_host_free(c->stream_of);
    ferry_host_free(c->busy);
    ferry_host_free(c);
}

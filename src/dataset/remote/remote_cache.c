/* The local cache of remote shards: whole shards in files of one folder, at
 * most a byte budget of them at once. A shard is fetched front to back by a
 * thread of its own, over one connection, into NAME.PID-RANDOM.part, and
 * readers take its bytes as they arrive (streaming reads overlap the download:
 * the read-ahead); once whole and synced its record is written (what it is
 * and its checksum: remote_record.c) and it is renamed to NAME.shard, so a
 * crash leaves a .part file, never one taken for whole. A NAME.shard found in
 * the folder is used only when its record matches it (the fetch thread checks
 * that before it downloads anything).
 *
 * The folder is the user's alone (common/private_dir.h: a real folder, theirs,
 * not writable by others; by default $XDG_CACHE_HOME/ferry or ~/.cache/ferry,
 * made 0700), and every file in it is created relative to its descriptor,
 * O_EXCL|O_NOFOLLOW, mode 0600. Shards no one is reading are
 * evicted least recently used first; a shard being read or fetched never is:
 * a reader that needs room waits for it instead, and a budget below the
 * largest shard is refused at create, so the wait always ends.
 *
 * Each shard has a descriptor that stays the same for the cache's life (the
 * dataset and its gzip streams keep it): the file is dup3'd onto it when
 * fetched and /dev/null when evicted. Only files named as this cache names
 * them (ferry-HEX.shard, .record, ferry-HEX.PID-RANDOM.part) are ever deleted.
 *
 * Locking: one mutex for every entry's state, the held bytes and the stats;
 * a fetch thread writes its file outside it and then advances `have` under it.
 * Every wait is bounded: a reader gives up when nothing has moved for longer
 * than a fetch can take to fail on its own. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/error.h"
#include "common/hash64.h"
#include "common/private_dir.h"
#include "common/thread.h"
#include "dataset/remote/remote.h"

/* A file name of ours in the folder (or a readdir one). */
#define NAME_CAP 320

enum { ABSENT = 0, FETCHING, DONE, FAILED };

typedef struct rentry {
    struct ferry_remote_cache *c;
    char *url;                  /* a copy of the dataset's string (a fetch thread may outlive
                                 * it until destroy joins it); NULL for a local shard */
    ferry_remote_obj obj;
    uint64_t id;                /* names its files: the URL, ETag and size hashed */
    int fd;                     /* stable: the file while held, else /dev/null */
    /* guarded by c->lock */
    int state;
    uint64_t have;              /* bytes in the file (all of them when DONE) */
    unsigned pins;              /* readers between acquire and release */
    uint64_t used;              /* c->tick at the last release: LRU order */
    char part[NAME_CAP];        /* its .part file's name ("" before one is made) */
    bool renamed;               /* the file is NAME.shard (else still the .part) */
    uint64_t index_bytes;       /* its kept index's (ferry__remote_cache_keep_index); 0: none */
    bool thread;                /* a fetch thread to join */
    ferry_hash64 sum;           /* of the bytes downloaded (the fetch thread's) */
    pthread_t th;
    double failed_at;           /* ferry_now() when it last FAILED */
    ferry_status err_st;
    char err[1024];
} rentry;

struct ferry_remote_cache {
    pthread_mutex_t lock;
    pthread_cond_t cv;          /* any entry's state or have changed, or a release */
    rentry *e;
    size_t n;
    char dir[PATH_MAX];
    int dfd;                    /* the folder, checked private; every file is made in it */
    size_t budget;
    ferry_remote_opts opts;
    ferry_remote_counters cnt;
    ferry_remote_down *down;    /* servers taken for down (remote_down.c) */
    atomic_bool closing;
    int devnull;
    /* guarded by lock */
    uint64_t tick;
    size_t held, held_peak;
    uint64_t hits, misses, downloads, evictions, failures;
    double wait_s;
};

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* The name of the entry's file (its .part, else NAME.shard), or of its record. */
static void file_name(const rentry *e, bool part, char *out, size_t cap)
{
    if (part)
        snprintf(out, cap, "%s", e->part);
    else
        snprintf(out, cap, "ferry-%016llx.shard", (unsigned long long)e->id);
}

static void record_name(const rentry *e, char *out, size_t cap)
{
    snprintf(out, cap, "ferry-%016llx.record", (unsigned long long)e->id);
}

/* The descriptor now refers to nothing (/dev/null): the file may go. */
static void detach(rentry *e)
{
    (void)dup3(e->c->devnull, e->fd, O_CLOEXEC);
}

/* ---- the fetch thread ---- */

static int sink(void *arg, const uint8_t *b, size_t n)
{
    rentry *e = arg;
    uint64_t at = e->have; /* only this thread advances it */
    if (at == 0) /* the server answers: not down */
        ferry__remote_down_note(e->c->down, e->url, FERRY_OK, 0);
    for (size_t done = 0; done < n;) {
        ssize_t w = pwrite(e->fd, b + done, n - done, (off_t)(at + done));
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0) {
            ferry_fail_at(FERRY_ERR_IO, e->url, "at byte %llu: writing the cache folder %s: %s",
                          (unsigned long long)at + done, e->c->dir, strerror(errno));
            return 1;
        }
        done += (size_t)w;
    }
    ferry_hash64_update(&e->sum, b, n);
    pthread_mutex_lock(&e->c->lock);
    e->have = at + n;
    pthread_cond_broadcast(&e->c->cv);
    pthread_mutex_unlock(&e->c->lock);
    return 0;
}

static bool cancelled(void *arg)
{
    const rentry *e = arg;
    return atomic_load(&e->c->closing);
}

/* A whole file of this object from an earlier run (or another process of
 * the user's), used only when its record matches it (remote_record.c). */
static bool adopt(rentry *e)
{
    struct ferry_remote_cache *c = e->c;
    char p[NAME_CAP], r[NAME_CAP];
    file_name(e, false, p, sizeof p);
    record_name(e, r, sizeof r);
    int fd = openat(c->dfd, p, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    bool ok = fd >= 0 && ferry__remote_record_matches(c->dfd, r, e->url, &e->obj, fd) &&
              dup3(fd, e->fd, O_CLOEXEC) >= 0;
    if (fd >= 0)
        close(fd);
    return ok;
}

/* A new .part file under a name no one could have made first. */
static ferry_status open_part(rentry *e)
{
    struct ferry_remote_cache *c = e->c;
    char prefix[96];
    snprintf(prefix, sizeof prefix, "ferry-%016llx.%ld-", (unsigned long long)e->id,
             (long)getpid());
    int fd = ferry_private_create(c->dfd, prefix, ".part", 0600, e->part, sizeof e->part);
    if (fd < 0 || dup3(fd, e->fd, O_CLOEXEC) < 0) {
        int err = errno;
        if (fd >= 0) {
            close(fd);
            (void)unlinkat(c->dfd, e->part, 0);
        }
        e->part[0] = '\0';
        return ferry_fail_at(FERRY_ERR_IO, e->url, "cannot write the cache folder %s: %s", c->dir,
                             strerror(err));
    }
    close(fd);
    return FERRY_OK;
}

/* The download, whole and synced, recorded and named NAME.shard; false when
 * any step fails (the file is still whole: this run uses it, the next one
 * fetches it again). */
static bool keep(rentry *e)
{
    struct ferry_remote_cache *c = e->c;
    char whole[NAME_CAP], r[NAME_CAP];
    file_name(e, false, whole, sizeof whole);
    record_name(e, r, sizeof r);
    /* Synced before it is named whole: after a crash a .shard file is whole.
     * The record first: a .shard never appears without the record that
     * describes it. */
    bool ok = fsync(e->fd) == 0 &&
              ferry__remote_record_write(c->dfd, c->dir, r, e->url, &e->obj,
                                         ferry_hash64_final(&e->sum)) == FERRY_OK &&
              renameat(c->dfd, e->part, c->dfd, whole) == 0;
    if (!ok)
        ferry_clear_error(); /* no worse than a cache that could not keep it */
    return ok;
}

static void *fetch_main(void *arg)
{
    rentry *e = arg;
    struct ferry_remote_cache *c = e->c;
    if (adopt(e)) {
        pthread_mutex_lock(&c->lock);
        e->state = DONE;
        e->have = e->obj.size;
        e->renamed = true;
        pthread_cond_broadcast(&c->cv);
        pthread_mutex_unlock(&c->lock);
        return NULL;
    }
    ferry_status st = open_part(e);
    if (st == FERRY_OK) {
        pthread_mutex_lock(&c->lock);
        c->downloads++;
        pthread_mutex_unlock(&c->lock);
        ferry_hash64_init(&e->sum);
        double t0 = ferry_now();
        st = ferry__remote_get(e->url, &c->opts, &e->obj, 0, UINT64_MAX, sink, cancelled, e,
                               &c->cnt);
        ferry__remote_down_note(c->down, e->url, st, ferry_now() - t0);
    }
    bool named = st == FERRY_OK && keep(e);
    pthread_mutex_lock(&c->lock);
    if (st == FERRY_OK) {
        e->state = DONE;
        e->renamed = named;
    } else {
        e->state = FAILED;
        e->failed_at = ferry_now();
        e->err_st = st;
        snprintf(e->err, sizeof e->err, "%s", ferry_last_error());
        c->failures++;
        c->held -= (size_t)e->obj.size;
        if (e->part[0])
            (void)unlinkat(c->dfd, e->part, 0);
        detach(e);
    }
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->lock);
    return NULL;
}

/* ---- making room and starting fetches (lock held) ---- */

static void join_fetch(rentry *e)
{
    if (e->thread) {
        pthread_join(e->th, NULL); /* it has ended: its entry is no longer FETCHING */
        e->thread = false;
    }
}

static void index_file_name(const rentry *e, char *out, size_t cap)
{
    snprintf(out, cap, "ferry-%016llx.ferry-index", (unsigned long long)e->id);
}

/* The shard's kept index goes with it: its bytes count against the budget,
 * and without the shard it would only help a create that downloads the
 * shard again anyway. */
static void drop_index(struct ferry_remote_cache *c, rentry *e)
{
    if (!e->index_bytes)
        return;
    char name[NAME_CAP];
    index_file_name(e, name, sizeof name);
    (void)unlinkat(c->dfd, name, 0);
    c->held -= (size_t)e->index_bytes;
    e->index_bytes = 0;
}

static void evict(struct ferry_remote_cache *c, rentry *e)
{
    if (e->state != DONE) { /* an index kept without its shard (found at create) */
        drop_index(c, e);
        return;
    }
    char p[NAME_CAP], r[NAME_CAP];
    join_fetch(e);
    file_name(e, !e->renamed, p, sizeof p);
    record_name(e, r, sizeof r);
    (void)unlinkat(c->dfd, p, 0);
    if (e->renamed)
        (void)unlinkat(c->dfd, r, 0);
    detach(e);
    e->state = ABSENT;
    e->have = 0;
    c->held -= (size_t)e->obj.size;
    c->evictions++;
    drop_index(c, e);
}

/* Whether e's bytes may go to make room: a whole shard no one reads, or an
 * index whose shard is not held. */
static bool evictable(const rentry *e)
{
    return !e->pins && (e->state == DONE || (e->state == ABSENT && e->index_bytes));
}

/* Evicts until `need` more bytes fit; false when what is held is all in use. */
static bool make_room(struct ferry_remote_cache *c, uint64_t need)
{
    while (c->held + need > c->budget) {
        rentry *lru = NULL;
        for (size_t i = 0; i < c->n; i++) {
            rentry *e = &c->e[i];
            if (evictable(e) && (!lru || e->used < lru->used))
                lru = e;
        }
        if (!lru)
            return false;
        evict(c, lru);
    }
    return true;
}

static void hold(struct ferry_remote_cache *c, rentry *e)
{
    c->held += (size_t)e->obj.size;
    if (c->held > c->held_peak)
        c->held_peak = c->held;
}

/* The fetch thread adopts a whole file of the object when there is one it
 * can trust, else downloads it; either way the entry is FETCHING (have 0)
 * until it is DONE, so no reader sees a byte before it is checked. */
static ferry_status start_fetch(struct ferry_remote_cache *c, rentry *e)
{
    join_fetch(e);
    e->state = FETCHING;
    e->have = 0;
    e->renamed = false;
    e->part[0] = '\0';
    hold(c, e);
    if (ferry_thread_create(&e->th, fetch_main, e) != 0) {
        c->held -= (size_t)e->obj.size;
        e->state = ABSENT;
        return ferry_fail_at(FERRY_ERR_IO, e->url, "cannot start a thread to fetch it");
    }
    e->thread = true;
    return FERRY_OK;
}

/* ---- acquire / release ---- */

/* How long a reader waits with nothing moving: longer than a fetch takes to
 * fail by itself (every try timed out, every backoff at its cap). */
static double stall_limit(const struct ferry_remote_cache *c)
{
    return (c->opts.retries + 1.0) * (2 * c->opts.timeout_s + 30.0) + 10.0;
}

/* One step of a wait: false when nothing has moved for too long. */
static bool wait_step(struct ferry_remote_cache *c, double *last, uint64_t *seen)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 1;
    pthread_cond_timedwait(&c->cv, &c->lock, &ts);
    uint64_t now_seen = c->held ^ (c->tick << 20) ^ c->downloads ^ (c->evictions << 40);
    for (size_t i = 0; i < c->n; i++)
        now_seen += c->e[i].have;
    double now = ferry_now();
    if (now_seen != *seen) {
        *seen = now_seen;
        *last = now;
    }
    return now - *last < stall_limit(c);
}

/* A shard that failed answers with its error for this long, so that each of
 * its samples (skipped under on_error = SKIP) does not pay the retries again;
 * the first read after it tries the shard again (a later epoch, usually). */
static double failed_cooldown(const struct ferry_remote_cache *c)
{
    return 3 * c->opts.timeout_s;
}

static ferry_status acquire_locked(struct ferry_remote_cache *c, rentry *e, uint64_t end,
                                   bool *waited)
{
    double last = ferry_now();
    uint64_t seen = 0;
    for (;;) {
        if (atomic_load(&c->closing))
            return ferry_fail_at(FERRY_ERR_BAD_STATE, e->url, "the dataset is being destroyed");
        if (e->state == FAILED && ferry_now() - e->failed_at >= failed_cooldown(c)) {
            join_fetch(e);
            e->state = ABSENT;
        }
        if (e->state == FAILED)
            return ferry_fail(e->err_st, "%s", e->err);
        if (e->state == DONE || (e->state == FETCHING && e->have >= end))
            return FERRY_OK;
        /* Its server taken for down: its error at once, not the retries again. */
        ferry_status down = e->state == ABSENT ? ferry__remote_down_check(c->down, e->url) : FERRY_OK;
        if (down != FERRY_OK)
            return down;
        if (e->state == ABSENT && make_room(c, e->obj.size)) {
            ferry_status st = start_fetch(c, e);
            if (st != FERRY_OK)
                return st;
            continue;
        }
        *waited = true;
        if (!wait_step(c, &last, &seen))
            return ferry_fail_at(FERRY_ERR_TIMEOUT, e->url, "waited %.0f s for %s with nothing moving",
                                 stall_limit(c), e->state == ABSENT ?
                                 "room in the cache (every shard held is being read)" :
                                 "its bytes to arrive");
    }
}

ferry_status ferry__remote_cache_fits(const ferry_remote_cache *c, size_t k)
{
    if (!c || !c->e[k].url || c->e[k].obj.size <= c->budget)
        return FERRY_OK;
    return ferry_fail(FERRY_ERR_INVALID_ARG, "%s is %llu bytes, more than the remote shard "
                      "cache's budget of %zu bytes (remote_cache_bytes): it could never be held; "
                      "raise the budget to at least the largest shard, or keep each shard's index "
                      "beside it (URL.ferry-index) and read in streaming order", c->e[k].url,
                      (unsigned long long)c->e[k].obj.size, c->budget);
}

bool ferry__remote_cache_index_name(const ferry_remote_cache *c, size_t k, char *out, size_t cap)
{
    if (!c || !c->e[k].url)
        return false;
    int w = snprintf(out, cap, "ferry-%016llx.ferry-index", (unsigned long long)c->e[k].id);
    return w > 0 && (size_t)w < cap;
}

bool ferry__remote_cache_keep_index(ferry_remote_cache *c, size_t k)
{
    char name[NAME_CAP];
    struct stat sb;
    if (!ferry__remote_cache_index_name(c, k, name, sizeof name) ||
        fstatat(c->dfd, name, &sb, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(sb.st_mode))
        return false;
    uint64_t bytes = sb.st_size > 0 ? (uint64_t)sb.st_size : 1;
    pthread_mutex_lock(&c->lock);
    rentry *e = &c->e[k];
    bool kept = e->index_bytes == bytes;
    if (!kept) {
        drop_index(c, e); /* a size known before is replaced, not added to */
        e->pins++;        /* not the room it makes */
        kept = bytes <= c->budget && make_room(c, bytes);
        e->pins--;
    }
    if (kept && !e->index_bytes) {
        e->index_bytes = bytes;
        c->held += (size_t)bytes;
        if (c->held > c->held_peak)
            c->held_peak = c->held;
        e->used = ++c->tick;
    }
    pthread_mutex_unlock(&c->lock);
    if (!kept)
        (void)unlinkat(c->dfd, name, 0);
    return kept;
}

int ferry__remote_cache_dirfd(const ferry_remote_cache *c)
{
    return c ? c->dfd : -1;
}

const char *ferry__remote_cache_dir(const ferry_remote_cache *c)
{
    return c ? c->dir : "";
}

const ferry_remote_obj *ferry__remote_cache_obj(const ferry_remote_cache *c, size_t k)
{
    return c && c->e[k].url ? &c->e[k].obj : NULL;
}

ferry_remote_counters *ferry__remote_cache_counters(ferry_remote_cache *c)
{
    return &c->cnt;
}

ferry_remote_down *ferry__remote_cache_down(ferry_remote_cache *c)
{
    return c ? c->down : NULL;
}

ferry_status ferry__remote_cache_acquire(ferry_remote_cache *c, size_t k, uint64_t end)
{
    if (!c || !c->e[k].url)
        return FERRY_OK;
    rentry *e = &c->e[k];
    if (e->obj.size > c->budget) /* it could never fit: no wait, the reason */
        return ferry__remote_cache_fits(c, k);
    if (end > e->obj.size)
        end = e->obj.size;
    double t0 = ferry_now();
    bool waited = false;
    pthread_mutex_lock(&c->lock);
    e->pins++;
    ferry_status st = acquire_locked(c, e, end, &waited);
    if (waited) {
        c->misses++;
        c->wait_s += ferry_now() - t0;
    } else {
        c->hits++;
    }
    pthread_mutex_unlock(&c->lock);
    return st;
}

void ferry__remote_cache_release(ferry_remote_cache *c, size_t k)
{
    if (!c || !c->e[k].url)
        return;
    pthread_mutex_lock(&c->lock);
    c->e[k].pins--;
    c->e[k].used = ++c->tick;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->lock);
}

int ferry__remote_cache_fd(const ferry_remote_cache *c, size_t k)
{
    return c && c->e[k].url ? c->e[k].fd : -1;
}

void ferry__remote_cache_stats(ferry_remote_cache *c, ferry_remote_stats *out)
{
    memset(out, 0, sizeof *out);
    if (!c)
        return;
    pthread_mutex_lock(&c->lock);
    out->hits = c->hits;
    out->misses = c->misses;
    out->downloads = c->downloads;
    out->evictions = c->evictions;
    out->failures = c->failures;
    out->wait_s = c->wait_s;
    out->held_bytes = c->held;
    out->held_peak = c->held_peak;
    pthread_mutex_unlock(&c->lock);
    out->bytes_fetched = atomic_load(&c->cnt.bytes);
    out->requests = atomic_load(&c->cnt.requests);
    out->retries = atomic_load(&c->cnt.retries);
    out->connections = atomic_load(&c->cnt.connects);
}

/* ---- create / destroy ---- */

/* Partial downloads left by processes that died: ours by name, their pid gone. */
static void remove_stale(const struct ferry_remote_cache *c)
{
    int fd = openat(c->dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d && fd >= 0)
        close(fd);
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL) {
        unsigned long long id;
        long pid;
        char rnd[17], tail[8] = "";
        if (sscanf(de->d_name, "ferry-%16llx.%ld-%16[0-9a-f].%5s", &id, &pid, rnd, tail) != 4 ||
            strcmp(tail, "part") != 0 || pid <= 0 || pid == (long)getpid() ||
            kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;
        (void)unlinkat(c->dfd, de->d_name, 0);
    }
    if (d)
        closedir(d);
}

/* The folder given, else $FERRY_CACHE_DIR, else the user's cache folder (made
 * with its parents); checked private either way. */
static ferry_status open_dir(struct ferry_remote_cache *c, const char *dir)
{
    const char *env = getenv("FERRY_CACHE_DIR");
    bool fallback = !(dir && *dir) && !(env && *env);
    if (fallback) {
        ferry_status st = ferry_private_dir_default(c->dir, sizeof c->dir);
        if (st != FERRY_OK)
            return st;
    } else if (snprintf(c->dir, sizeof c->dir, "%s", dir && *dir ? dir : env) >= (int)sizeof c->dir) {
        return ferry_fail(FERRY_ERR_INVALID_ARG, "remote shard cache: the folder name is too long");
    }
    ferry_status st = ferry_private_dir_open(c->dir, fallback, "remote shard cache", &c->dfd);
    if (st == FERRY_OK && faccessat(c->dfd, ".", W_OK | X_OK, 0) != 0)
        return ferry_fail(FERRY_ERR_IO, "remote shard cache %s: cannot write there: %s", c->dir,
                          strerror(errno));
    return st;
}

static ferry_status stat_all(struct ferry_remote_cache *c, const ferry_remote_setup *su)
{
    for (size_t i = 0; i < su->n; i++) {
        rentry *e = &c->e[i];
        e->c = c;
        e->fd = -1;
        if (!ferry__is_url(su->paths[i]))
            continue;
        if (!(e->url = ferry_host_strdup(su->paths[i])))
            return FERRY_ERR_NO_MEMORY;
        ferry_status st = ferry__remote_stat(e->url, &c->opts, &c->cnt, &e->obj);
        if (st != FERRY_OK)
            return st;
        e->id = fnv(fnv(fnv(1469598103934665603ull, e->url, strlen(e->url) + 1), e->obj.etag,
                        strlen(e->obj.etag) + 1), &e->obj.size, sizeof e->obj.size);
        if ((e->fd = fcntl(c->devnull, F_DUPFD_CLOEXEC, 0)) < 0)
            return ferry_fail_at(FERRY_ERR_IO, e->url, "no descriptor for it: %s", strerror(errno));
    }
    return FERRY_OK;
}

ferry_status ferry__remote_cache_create(const ferry_remote_setup *su, ferry_remote_cache **out)
{
    *out = NULL;
    size_t urls = 0;
    for (size_t i = 0; i < su->n; i++)
        urls += ferry__is_url(su->paths[i]);
    if (!urls)
        return FERRY_OK;
    ferry_remote_cache *c = ferry_host_calloc(1, sizeof *c);
    if (!c || !(c->e = ferry_host_calloc(su->n, sizeof *c->e))) {
        ferry_host_free(c);
        return FERRY_ERR_NO_MEMORY;
    }
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->cv, NULL);
    atomic_init(&c->closing, false);
    c->n = su->n;
    c->budget = su->budget;
    c->opts = su->opts;
    c->dfd = -1;
    for (size_t i = 0; i < su->n; i++) /* destroy closes only what was opened */
        c->e[i].fd = -1;
    c->devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    ferry_status st = c->devnull < 0 ? ferry_fail(FERRY_ERR_IO, "/dev/null: %s", strerror(errno))
                                     : open_dir(c, su->dir);
    if (st == FERRY_OK)
        st = ferry__remote_down_create(c->opts.timeout_s, &c->down);
    if (st == FERRY_OK)
        st = stat_all(c, su);
    if (st != FERRY_OK) {
        ferry__remote_cache_destroy(c);
        return st;
    }
    remove_stale(c);
    *out = c;
    return FERRY_OK;
}

void ferry__remote_cache_destroy(ferry_remote_cache *c)
{
    if (!c)
        return;
    atomic_store(&c->closing, true); /* fetches stop within a progress callback */
    for (size_t i = 0; i < c->n; i++) {
        rentry *e = &c->e[i];
        join_fetch(e);
        if (e->state == FETCHING && e->part[0]) /* cannot be: its thread has ended */
            (void)unlinkat(c->dfd, e->part, 0);
        if (e->fd >= 0)
            close(e->fd);
        ferry_host_free(e->url);
    }
    if (c->devnull >= 0)
        close(c->devnull);
    if (c->dfd >= 0)
        close(c->dfd);
    ferry__remote_down_destroy(c->down);
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->lock);
    ferry_host_free(c->e);
    ferry_host_free(c);
}

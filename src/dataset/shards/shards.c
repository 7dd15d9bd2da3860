/* The shard dataset: samples of WebDataset-style tar shards. Create opens every
 * shard once and indexes it (shards_index.c); get() reads the image member with
 * one pread into the worker's scratch and decodes it like a PNG file, so the
 * loader's samplers, skip policy and determinism apply unchanged. The shards
 * stay open (one descriptor each) for the dataset's life: a pread needs no path
 * lookup, which is most of what reading a small image file costs. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.h"
#include "common/thread.h"
#include "dataset/image/image.h"
#include "dataset/remote/remote.h"
#include "dataset/shards/shards.h"
#include "dataset/shards/tar.h"

typedef struct shards {
    char **paths;                /* owned, nshards */
    int *fds;                    /* owned, nshards; -1 when not open */
    size_t nshards;
    ferry_shard_sample *samples; /* owned, n */
    size_t n;
    size_t *ends;                /* owned, nshards: each shard's end in samples */
    atomic_size_t readahead;     /* bytes to advise ahead of a read; 0: off */
    atomic_uint_least64_t *ahead; /* owned, nshards: 1 + the furthest chunk read ahead */
    char *names;                 /* owned: every sample's name */
    size_t nclasses;             /* from a class-names member; 0 without one */
    size_t classes_shard;        /* which shard's member gave the names, and its name */
    char classes_member[32];
    ferry_image_config cfg;
    size_t *stored;              /* owned, n: each shard's samples in stored order */
    /* gzip-compressed shards (shards_gz.c); all NULL without one */
    uint8_t *gzip;               /* owned, nshards: 1 for a .tar.gz */
    size_t *by_off, *by_off_ends; /* owned: see ferry_gz_cache_setup */
    ferry_gz_cache *gz;          /* owned */
    /* shards named by URL: their bytes come through this cache (remote_cache.c),
     * which owns their descriptors; NULL without one */
    ferry_remote_cache *remote;
    ferry_remote_streams *streams; /* their streaming-order reads (remote_stream.c) */
} shards;

ferry_status ferry__scratch_pread(ferry_scratch *s, int fd, uint64_t off, size_t n, const char *name)
{
    ferry_status st = ferry__scratch_grow(&s->file, &s->file_cap, n + 1);
    if (st != FERRY_OK)
        return ferry_fail_named(st, name);
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, s->file + got, n - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return ferry_fail_at(FERRY_ERR_IO, name, "read at byte %llu: %s",
                                 (unsigned long long)off + got, strerror(errno));
        if (r == 0)
            return ferry_fail_at(FERRY_ERR_IO, name, "the shard ends at byte %llu, inside this member "
                                 "(it shrank after the index was built)",
                                 (unsigned long long)off + got);
        got += (size_t)r;
    }
    return FERRY_OK;
}

static ferry_status sample_problem(const shards *h, const ferry_shard_sample *s)
{
    const char *name = h->names + s->name;
    unsigned long long cls = s->cls_off, img = s->hdr_off;
    switch ((ferry_shard_problem)s->problem) {
    case FERRY_SHARD_NO_IMAGE:
        return ferry_fail_at(FERRY_ERR_FORMAT, name, "the key has a .cls label (member at byte %llu) "
                             "but no image (.png, .jpg or .jpeg)", cls);
    case FERRY_SHARD_NO_LABEL:
        return ferry_fail_at(FERRY_ERR_FORMAT, name, "the image (member at byte %llu) has no .cls "
                             "label", img);
    case FERRY_SHARD_BAD_LABEL:
        return ferry_fail_at(FERRY_ERR_FORMAT, name, "its .cls member at byte %llu is not a label "
                             "(a decimal integer from 0 to 2147483647)", cls);
    case FERRY_SHARD_LABEL_RANGE:
        return ferry_fail_at(FERRY_ERR_FORMAT, name, "label %lld (.cls member at byte %llu) is not "
                             "below the %zu class names of %s:%s", (long long)s->label, cls,
                             h->nclasses, h->paths[h->classes_shard], h->classes_member);
    default:
        return FERRY_OK;
    }
}

/* Streaming reads a shard mostly front to back: when a read ends in a chunk
 * of `readahead` bytes past the furthest one seen in this shard, ask for the
 * chunk after it, so that the kernel reads it while this one is decoded. The
 * shuffle buffer sends some reads back over earlier chunks: those ask for
 * nothing (the furthest only grows, until set_readahead starts a new epoch).
 * One advice per chunk per shard, whichever worker gets there first. */
static void read_ahead(const shards *h, const ferry_shard_sample *sp)
{
    size_t r = atomic_load_explicit(&h->readahead, memory_order_relaxed);
    if (!r || (h->gzip && h->gzip[sp->shard])) /* a gzip stream reads sequentially anyway */
        return;
    uint64_t chunk = (sp->img_off + sp->img_size) / r + 1;
    atomic_uint_least64_t *far = &h->ahead[sp->shard];
    uint64_t seen = atomic_load_explicit(far, memory_order_relaxed);
    while (chunk > seen)
        if (atomic_compare_exchange_weak_explicit(far, &seen, chunk, memory_order_relaxed,
                                                  memory_order_relaxed)) {
            /* Advice only: a failure costs speed, never data. */
            (void)posix_fadvise(h->fds[sp->shard], (off_t)(chunk * r), (off_t)r,
                                POSIX_FADV_WILLNEED);
            return;
        }
}

/* The remote shard cache's byte budget: the config's, else 4 GiB. */
static size_t cache_budget(const shards *h)
{
    return h->cfg.remote_cache_bytes ? h->cfg.remote_cache_bytes : (size_t)4 << 30;
}

/* A remote plain shard's member, past the cache: in the streaming order from
 * the shard's stream, else (one_off: create's probe; a shard larger than the
 * cache's budget) by a Range request. */
static bool past_cache(const shards *h, const ferry_shard_sample *sp, bool gz, bool one_off)
{
    const ferry_remote_obj *obj = ferry__remote_cache_obj(h->remote, sp->shard);
    return obj && !gz && (one_off || ferry__remote_streams_on(h->streams) ||
                          obj->size > cache_budget(h));
}

/* The image member's bytes into s->file, within the size limit. */
static ferry_status read_image(const shards *h, const ferry_shard_sample *sp, ferry_scratch *s,
                               bool one_off)
{
    const char *name = h->names + sp->name;
    size_t max = h->cfg.limits.max_file_bytes;
    if (max && sp->img_size > max)
        return ferry_fail_at(FERRY_ERR_LIMIT, name, "member at byte %llu is %llu bytes, over the limit "
                             "of %zu", (unsigned long long)sp->hdr_off,
                             (unsigned long long)sp->img_size, max);
    bool gz = h->gzip && h->gzip[sp->shard];
    if (past_cache(h, sp, gz, one_off)) {
        ferry_status st = ferry__scratch_grow(&s->file, &s->file_cap, (size_t)sp->img_size + 1);
        if (st != FERRY_OK)
            return ferry_fail_named(st, name);
        return ferry__remote_stream_read(h->streams, sp->shard, sp->img_off, (size_t)sp->img_size,
                                         s->file);
    }
    /* A remote shard's bytes must be in the cache first: all of a gzip one
     * (its stream reads ahead), up to the member's end of a plain one. */
    ferry_status st = ferry__remote_cache_acquire(h->remote, sp->shard,
                                                  gz ? UINT64_MAX : sp->img_off + sp->img_size);
    if (st == FERRY_OK && gz) {
        st = ferry__scratch_grow(&s->file, &s->file_cap, (size_t)sp->img_size + 1);
        st = st != FERRY_OK ? ferry_fail_named(st, name) :
             ferry__gz_cache_read(h->gz, (size_t)(sp - h->samples), s->file);
    } else if (st == FERRY_OK) {
        read_ahead(h, sp);
        st = ferry__scratch_pread(s, h->fds[sp->shard], sp->img_off, (size_t)sp->img_size, name);
    }
    ferry__remote_cache_release(h->remote, sp->shard);
    return st;
}

static ferry_status read_member(const void *src, size_t index, ferry_scratch *s, size_t *n)
{
    const shards *h = src;
    *n = (size_t)h->samples[index].img_size;
    return read_image(h, &h->samples[index], s, false);
}

static ferry_status shards_get(const ferry_dataset *ds, size_t index, void *dst,
                               const ferry_sample_ctx *ctx, int64_t *label)
{
    const shards *h = ds->impl;
    const ferry_shard_sample *sp = &h->samples[index];
    *label = sp->label;
    if (sp->problem)
        return sample_problem(h, sp);
    return ferry__image_sample(ds, &h->cfg, index, read_member, h, h->names + sp->name, dst, ctx);
}

static ferry_status shards_label(const ferry_dataset *ds, size_t index, int64_t *label)
{
    const shards *h = ds->impl;
    const ferry_shard_sample *sp = &h->samples[index];
    /* A key without an image still has its label. */
    if (sp->problem && sp->problem != FERRY_SHARD_NO_IMAGE)
        return sample_problem(h, sp);
    *label = sp->label;
    return FERRY_OK;
}

static const char *shards_name(const ferry_dataset *ds, size_t index)
{
    const shards *h = ds->impl;
    return h->names + h->samples[index].name;
}

static void shards_free(shards *h)
{
    /* First: its fetch threads read the paths, and it uses the cache's objects. */
    ferry__remote_streams_destroy(h->streams);
    ferry__gz_cache_destroy(h->gz);
    for (size_t i = 0; h->fds && i < h->nshards; i++)
        if (h->fds[i] >= 0 && ferry__remote_cache_fd(h->remote, i) < 0)
            close(h->fds[i]);
    /* Before the paths too: its fetch threads name their URLs (a fetch of a
     * dataset released mid-epoch read a freed path). */
    ferry__remote_cache_destroy(h->remote);
    for (size_t i = 0; i < h->nshards; i++)
        ferry_host_free(h->paths[i]);
    ferry_host_free(h->paths);
    ferry_host_free(h->fds);
    ferry_host_free(h->samples);
    ferry_host_free(h->ends);
    ferry_host_free(h->ahead);
    ferry_host_free(h->names);
    ferry_host_free(h->gzip);
    ferry_host_free(h->by_off);
    ferry_host_free(h->by_off_ends);
    ferry_host_free(h->stored);
    ferry_host_free(h);
}

static void shards_destroy(ferry_dataset *ds)
{
    if (ds->impl)
        shards_free(ds->impl);
}

/* The loader's capabilities (dataset/core/caps.h). */
static size_t shards_ends(const ferry_dataset *ds, const size_t **ends, const size_t **seq)
{
    const shards *h = ds->impl;
    *ends = h->ends;
    if (seq)
        *seq = h->stored;
    return h->nshards;
}

/* Whether shard k's bytes come through a stream. */
static bool streamed(const shards *h, size_t k)
{
    return ferry__remote_cache_obj(h->remote, k) && !(h->gzip && h->gzip[k]);
}

/* Remote shards: the order in which the plan first reads each shard, so that
 * the next one's stream starts before its first read, and the shard the next
 * epoch starts in. */
static ferry_status plan_streams(shards *h, const size_t *idx, size_t n, size_t head)
{
    if (!idx) {
        ferry__remote_streams_plan(h->streams, NULL, 0, SIZE_MAX);
        return FERRY_OK;
    }
    size_t *seq = ferry_host_malloc(h->nshards * sizeof *seq), m = 0;
    uint8_t *seen = ferry_host_calloc(h->nshards, 1);
    ferry_status st = seq && seen ? FERRY_OK : FERRY_ERR_NO_MEMORY;
    for (size_t i = 0; st == FERRY_OK && i < n && m < h->nshards; i++) {
        uint32_t k = h->samples[idx[i]].shard;
        if (seen[k])
            continue;
        seen[k] = 1;
        if (streamed(h, k))
            seq[m++] = k;
    }
    size_t hk = head < h->n ? h->samples[head].shard : SIZE_MAX;
    if (st == FERRY_OK)
        ferry__remote_streams_plan(h->streams, seq, m, hk != SIZE_MAX && streamed(h, hk) ? hk : SIZE_MAX);
    ferry_host_free(seq);
    ferry_host_free(seen);
    return st;
}

static ferry_status shards_plan_reads(ferry_dataset *ds, const size_t *idx, size_t n, size_t head)
{
    shards *h = ds->impl;
    ferry_status st = h->streams ? plan_streams(h, idx, n, head) : FERRY_OK;
    return h->gz && st == FERRY_OK ? ferry__gz_cache_plan(h->gz, idx, n) : st;
}

static size_t shards_gzip(const ferry_dataset *ds)
{
    const shards *h = ds->impl;
    size_t k = 0;
    for (size_t i = 0; h->gzip && i < h->nshards; i++)
        k += h->gzip[i];
    return k;
}

static void shards_readahead(ferry_dataset *ds, size_t bytes)
{
    shards *h = ds->impl;
    for (size_t i = 0; i < h->nshards; i++) {
        atomic_store(&h->ahead[i], 0);
        /* SEQUENTIAL doubles the kernel's own read-ahead window; NORMAL undoes it. */
        (void)posix_fadvise(h->fds[i], 0, 0, bytes ? POSIX_FADV_SEQUENTIAL : POSIX_FADV_NORMAL);
    }
    atomic_store(&h->readahead, bytes);
    ferry__remote_streams_reset(h->streams, bytes > 0);
}

static const ferry_dataset_vtable shards_vt = {
    .get = shards_get, .label = shards_label, .name = shards_name, .destroy = shards_destroy,
    .uses_scratch = true, .shard_ends = shards_ends, .set_readahead = shards_readahead,
    .plan_reads = shards_plan_reads, .gzip_shards = shards_gzip};

bool ferry__dataset_remote_stats(const ferry_dataset *ds, ferry_remote_stats *out)
{
    if (!ds || ds->vt != &shards_vt || !((shards *)ds->impl)->remote)
        return false;
    ferry__remote_cache_stats(((shards *)ds->impl)->remote, out);
    ferry__remote_streams_stats(((shards *)ds->impl)->streams, out);
    return true;
}

bool ferry__dataset_gz_stats(const ferry_dataset *ds, ferry_gz_cache_stats *out)
{
    if (!ds || ds->vt != &shards_vt || !((shards *)ds->impl)->gz)
        return false;
    ferry__gz_cache_stats(((shards *)ds->impl)->gz, out);
    return true;
}

/* ---- create ---- */

static int cmp_id(const void *pa, const void *pb)
{
    const uint64_t *a = pa, *b = pb;
    return a[0] != b[0] ? (a[0] < b[0] ? -1 : 1) : a[1] != b[1] ? (a[1] < b[1] ? -1 : 1) : 0;
}

/* The same file twice would double its samples silently. ids: (dev, ino, index). */
static ferry_status check_distinct(const shards *h, uint64_t (*ids)[3])
{
    qsort(ids, h->nshards, sizeof *ids, cmp_id);
    for (size_t i = 1; i < h->nshards; i++)
        if (ids[i][0] == ids[i - 1][0] && ids[i][1] == ids[i - 1][1]) {
            size_t a = (size_t)ids[i - 1][2], b = (size_t)ids[i][2];
            return ferry_fail(FERRY_ERR_INVALID_ARG, "%s and %s are the same shard (given twice)",
                              h->paths[a < b ? a : b], h->paths[a < b ? b : a]);
        }
    return FERRY_OK;
}

/* The cache's settings: the config's, 0 fields from the defaults. */
static ferry_remote_setup remote_setup(const shards *h)
{
    const ferry_image_config *c = &h->cfg;
    return (ferry_remote_setup){
        .paths = h->paths, .n = h->nshards, .dir = c->remote_cache_dir,
        .budget = cache_budget(h),
        .opts = {.timeout_s = c->remote_timeout_s > 0 ? c->remote_timeout_s : 10.0,
                 .retries = c->remote_retries ? (unsigned)c->remote_retries : 5,
                 .backoff_s = 0.1}};
}

/* A URL's descriptor is the cache's; (dev, ino) for a URL: all ones and its hash. */
static int open_remote(const shards *h, size_t i, uint64_t id[3])
{
    uint64_t x = 1469598103934665603ull;
    for (const char *p = h->paths[i]; *p; p++)
        x = (x ^ (uint8_t)*p) * 1099511628211ull;
    id[0] = UINT64_MAX;
    id[1] = x;
    id[2] = i;
    return ferry__remote_cache_fd(h->remote, i);
}

static ferry_status open_shards(shards *h)
{
    if (!(h->fds = ferry_host_malloc(h->nshards * sizeof *h->fds)))
        return FERRY_ERR_NO_MEMORY;
    /* Before anything can fail: shards_free closes what is not -1. */
    for (size_t i = 0; i < h->nshards; i++)
        h->fds[i] = -1;
    ferry_remote_setup rs = remote_setup(h);
    ferry_status rst = ferry__remote_cache_create(&rs, &h->remote);
    if (rst == FERRY_OK)
        rst = ferry__remote_streams_create(h->paths, h->nshards, h->remote, &rs.opts, &h->streams);
    if (rst != FERRY_OK)
        return rst;
    uint64_t (*ids)[3] = ferry_host_malloc(h->nshards * sizeof *ids);
    if (!ids)
        return FERRY_ERR_NO_MEMORY;
    ferry_status st = FERRY_OK;
    for (size_t i = 0; i < h->nshards && st == FERRY_OK; i++) {
        const char *p = h->paths[i];
        if (h->remote && ferry__is_url(p)) {
            h->fds[i] = open_remote(h, i, ids[i]);
            continue;
        }
        /* O_NONBLOCK: a FIFO named x.tar must not hang create. */
        int fd = open(p, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        struct stat sb;
        if (fd < 0 && (errno == EMFILE || errno == ENFILE)) {
            struct rlimit rl = {0};
            (void)getrlimit(RLIMIT_NOFILE, &rl);
            st = ferry_fail_at(FERRY_ERR_IO, p, "%s: the dataset keeps each of its %zu shards open, "
                               "and the process may have %llu files open (ulimit -n): raise that, "
                               "or pack into fewer, larger shards", strerror(errno), h->nshards,
                               (unsigned long long)rl.rlim_cur);
        } else if (fd < 0 || fstat(fd, &sb) != 0) {
            int e = errno;
            st = ferry_fail_at(e == ENOENT ? FERRY_ERR_INVALID_ARG : FERRY_ERR_IO, p, "%s",
                               ferry__open_error_reason(p, e));
        } else if (!S_ISREG(sb.st_mode)) {
            st = ferry_fail_at(FERRY_ERR_INVALID_ARG, p, "%s", ferry__not_regular_reason(sb.st_mode));
        } else {
            ids[i][0] = (uint64_t)sb.st_dev;
            ids[i][1] = (uint64_t)sb.st_ino;
            ids[i][2] = i;
        }
        h->fds[i] = fd;
    }
    if (st == FERRY_OK)
        st = check_distinct(h, ids);
    ferry_host_free(ids);
    return st;
}

static bool same_classes(const ferry_shard_part *a, const ferry_shard_part *b, size_t *line)
{
    size_t n = a->nclasses < b->nclasses ? a->nclasses : b->nclasses;
    for (*line = 0; *line < n; (*line)++)
        if (strcmp(a->classes[*line], b->classes[*line]) != 0)
            return false;
    return a->nclasses == b->nclasses;
}

/* The parts into one index, in shard order. The first class-names member found
 * gives the names; every other one must say the same. */
static ferry_status merge_parts(shards *h, ferry_shard_part *parts, char ***classes)
{
    size_t n = 0, names = 0, with_classes = h->nshards;
    for (size_t i = 0; i < h->nshards; i++) {
        n += parts[i].n;
        names += parts[i].names_len;
        if (!parts[i].classes)
            continue;
        size_t line;
        if (with_classes == h->nshards)
            with_classes = i;
        else if (!same_classes(&parts[with_classes], &parts[i], &line))
            return ferry_fail(FERRY_ERR_FORMAT, "%s:%s differs from %s:%s (line %zu): every "
                              "shard's class names must be the same", h->paths[i],
                              parts[i].classes_member, h->paths[with_classes],
                              parts[with_classes].classes_member, line + 1);
    }
    if (!n)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "%s%s: no samples (KEY.png or KEY.jpg and KEY.cls members) "
                          "in the %zu shard(s)", h->paths[0], h->nshards > 1 ? " ..." : "",
                          h->nshards);
    h->samples = ferry_host_malloc(n * sizeof *h->samples);
    h->names = ferry_host_malloc(names);
    h->ends = ferry_host_malloc(h->nshards * sizeof *h->ends);
    h->ahead = ferry_host_calloc(h->nshards, sizeof *h->ahead);
    if (!h->samples || !h->names || !h->ends || !h->ahead)
        return FERRY_ERR_NO_MEMORY;
    size_t ngz = 0;
    for (size_t i = 0; i < h->nshards; i++)
        ngz += parts[i].gzip;
    if (ngz && !(h->gzip = ferry_host_calloc(h->nshards, 1)))
        return FERRY_ERR_NO_MEMORY;
    for (size_t i = 0, at = 0, nat = 0; i < h->nshards; i++) {
        if (ngz)
            h->gzip[i] = parts[i].gzip;
        for (size_t j = 0; j < parts[i].n; j++) {
            h->samples[at + j] = parts[i].samples[j];
            h->samples[at + j].name += nat;
        }
        if (parts[i].names_len) /* an empty shard has no names (NULL) */
            memcpy(h->names + nat, parts[i].names, parts[i].names_len);
        at += parts[i].n;
        nat += parts[i].names_len;
        h->ends[i] = at;
    }
    h->n = n;
    if (with_classes < h->nshards) {
        ferry_shard_part *p = &parts[with_classes];
        h->nclasses = p->nclasses;
        h->classes_shard = with_classes;
        memcpy(h->classes_member, p->classes_member, sizeof h->classes_member);
        *classes = p->classes; /* moved */
        p->classes = NULL;
        p->nclasses = 0;
    }
    return FERRY_OK;
}

/* Shards are indexed by up to INDEX_THREADS threads, each taking the next
 * shard; the parts are merged in shard order, so the result does not depend on
 * which thread indexed what. Each thread's error message is its own
 * (thread-local): the first failing shard's is kept in its part. */
#define INDEX_THREADS 4

typedef struct index_job {
    const shards *h;
    ferry_shard_part *parts;
    ferry_status *st;      /* per shard */
    char (*msg)[FERRY_ERROR_MAX];     /* per shard: the message of a failure */
    atomic_size_t next;
    atomic_bool warned;    /* an index could not be saved (said once) */
} index_job;

/* Remote shard i's index: the file beside it (URL.ferry-index) when there is
 * one and it fits the shard, else the one kept in the cache folder from an
 * earlier download of the same object, else read from the cache's copy of
 * the whole shard (and kept there), which must then fit the cache's budget.
 * A gzip shard is read through the cache, so it must fit either way. */
static ferry_status index_remote(index_job *j, size_t i)
{
    const shards *h = j->h;
    const char *path = h->paths[i];
    char url[4096];
    uint8_t *d = NULL;
    size_t n = 0;
    bool found = false;
    ferry_remote_setup rs = remote_setup(h);
    ferry_status st = FERRY_OK;
    uint64_t size = ferry__remote_cache_obj(h->remote, i)->size;
    ferry_status got = FERRY_ERR_IO;
    if ((size_t)snprintf(url, sizeof url, "%s%s", path, FERRY_SHARD_INDEX_SUFFIX) < sizeof url &&
        (got = ferry__remote_fetch_small(url, &rs.opts, ferry__shard_index_max_bytes(size),
                                         ferry__remote_cache_counters(h->remote), &d, &n)) == FERRY_OK)
        st = ferry__shard_index_parse(d, n, path, size, (uint32_t)i, &j->parts[i], &found);
    if (got == FERRY_ERR_LIMIT) /* larger than any index of this shard: not fetched */
        ferry_log(FERRY_LOG_WARN, "shards: %s; the shard is read to index it instead",
                  ferry_last_error());
    ferry_clear_error(); /* no index beside it: not an error, read the shard */
    ferry_host_free(d);
    char kept[128];
    int dfd = ferry__remote_cache_dirfd(h->remote);
    bool keep = ferry__remote_cache_index_name(h->remote, i, kept, sizeof kept);
    if (st == FERRY_OK && !found && keep &&
        (st = ferry__shard_index_load_at(dfd, kept, path,
                                         ferry__remote_cache_obj(h->remote, i)->size, (uint32_t)i,
                                         &j->parts[i], &found)) == FERRY_OK && found)
        (void)ferry__remote_cache_keep_index(h->remote, i); /* in the budget, or deleted */
    if (st == FERRY_OK && found && j->parts[i].gzip &&
        (st = ferry__remote_cache_fits(h->remote, i)) != FERRY_OK)
        ferry__shard_part_free(&j->parts[i]);
    if (st != FERRY_OK || found)
        return st;
    struct stat before;
    if ((st = ferry__remote_cache_acquire(h->remote, i, UINT64_MAX)) == FERRY_OK &&
        (st = ferry__shard_index(path, h->fds[i], (uint32_t)i, &j->parts[i])) == FERRY_OK &&
        keep && fstat(h->fds[i], &before) == 0) {
        if (ferry__shard_index_save_at(dfd, ferry__remote_cache_dir(h->remote), kept, path,
                                       h->fds[i], &before, &j->parts[i]) == FERRY_OK)
            (void)ferry__remote_cache_keep_index(h->remote, i); /* in the budget, or deleted */
        else
            ferry_clear_error(); /* the next create downloads the shard again: no worse */
    }
    ferry__remote_cache_release(h->remote, i);
    return st;
}

/* Shard i's index: from the file beside it when asked and it matches, else
 * read from the shard (and saved when asked). */
static ferry_status index_one(index_job *j, size_t i)
{
    const char *path = j->h->paths[i];
    int fd = j->h->fds[i];
    if (ferry__remote_cache_fd(j->h->remote, i) >= 0)
        return index_remote(j, i);
    bool cache = j->h->cfg.shard_index_cache, found = false;
    ferry_status st = cache ? ferry__shard_index_load(path, fd, (uint32_t)i, &j->parts[i], &found)
                            : FERRY_OK;
    if (st != FERRY_OK || found)
        return st;
    struct stat before; /* a shard changed while indexed must not get an index that fits it */
    bool stat_ok = cache && fstat(fd, &before) == 0;
    st = ferry__shard_index(path, fd, (uint32_t)i, &j->parts[i]);
    if (st == FERRY_OK && stat_ok &&
        ferry__shard_index_save(path, fd, &before, &j->parts[i]) != FERRY_OK) {
        if (!atomic_exchange(&j->warned, true))
            ferry_log(FERRY_LOG_WARN, "shards: cannot keep the index beside the shard (%s); "
                      "create reads the shards again next time", ferry_last_error());
        ferry_clear_error();
    }
    return st;
}

static void *index_worker(void *arg)
{
    index_job *j = arg;
    for (size_t i; (i = atomic_fetch_add(&j->next, 1)) < j->h->nshards;) {
        j->st[i] = index_one(j, i);
        if (j->st[i] != FERRY_OK) {
            snprintf(j->msg[i], sizeof j->msg[i], "%s", ferry_last_error());
            atomic_store(&j->next, j->h->nshards); /* the rest is not needed */
        }
    }
    return NULL;
}

static ferry_status run_index_threads(index_job *j)
{
    pthread_t th[INDEX_THREADS - 1] = {0};
    size_t started = 0, want = j->h->nshards < INDEX_THREADS ? j->h->nshards : INDEX_THREADS;
    for (size_t t = 1; t < want; t++)
        if (ferry_thread_create(&th[started], index_worker, j) == 0)
            started++;
    index_worker(j); /* this thread too, so none started is still correct */
    for (size_t t = 0; t < started; t++)
        pthread_join(th[t], NULL);
    for (size_t i = 0; i < j->h->nshards; i++)
        if (j->st[i] != FERRY_OK)
            return ferry_fail(j->st[i], "%s", j->msg[i]);
    return FERRY_OK;
}

static ferry_status index_all(shards *h, char ***classes)
{
    index_job j = {.h = h};
    atomic_init(&j.next, 0);
    atomic_init(&j.warned, false);
    j.parts = ferry_host_calloc(h->nshards, sizeof *j.parts);
    j.st = ferry_host_calloc(h->nshards, sizeof *j.st);
    j.msg = ferry_host_calloc(h->nshards, sizeof *j.msg);
    ferry_status st = j.parts && j.st && j.msg ? run_index_threads(&j) : FERRY_ERR_NO_MEMORY;
    if (st == FERRY_OK)
        st = merge_parts(h, j.parts, classes);
    for (size_t i = 0; j.parts && i < h->nshards; i++)
        ferry__shard_part_free(&j.parts[i]);
    ferry_host_free(j.parts);
    ferry_host_free(j.st);
    ferry_host_free(j.msg);
    return st;
}

typedef struct off_index {
    uint64_t off;
    size_t i;
} off_index;

static int cmp_off(const void *pa, const void *pb)
{
    const off_index *a = pa, *b = pb;
    return a->off < b->off ? -1 : a->off > b->off;
}

/* Each shard's samples in the order their first member is stored (the
 * index is in key order), for streaming; and for gzip shards, the images in
 * that order and the cache that loads them. */
static ferry_status order_stored(shards *h)
{
    off_index *v = ferry_host_malloc(h->n * sizeof *v);
    h->stored = ferry_host_malloc(h->n * sizeof *h->stored);
    if (!v || !h->stored) {
        ferry_host_free(v);
        return FERRY_ERR_NO_MEMORY;
    }
    for (size_t k = 0, a = 0; k < h->nshards; a = h->ends[k++]) {
        for (size_t i = a; i < h->ends[k]; i++)
            v[i] = (off_index){h->samples[i].hdr_off, i};
        qsort(v + a, h->ends[k] - a, sizeof *v, cmp_off);
    }
    for (size_t i = 0; i < h->n; i++)
        h->stored[i] = v[i].i;
    ferry_host_free(v);
    return FERRY_OK;
}

static ferry_status pin_remote(void *arg, size_t k, bool on)
{
    shards *h = arg;
    if (!on) {
        ferry__remote_cache_release(h->remote, k);
        return FERRY_OK;
    }
    return ferry__remote_cache_acquire(h->remote, k, UINT64_MAX);
}

static ferry_status setup_reading(shards *h)
{
    ferry_status st = order_stored(h);
    if (st != FERRY_OK || !h->gzip)
        return st;
    h->by_off = ferry_host_malloc(h->n * sizeof *h->by_off);
    h->by_off_ends = ferry_host_malloc(h->nshards * sizeof *h->by_off_ends);
    if (!h->by_off || !h->by_off_ends)
        return FERRY_ERR_NO_MEMORY;
    /* An image's header comes right before it: stored order is image order. */
    size_t at = 0;
    for (size_t k = 0; k < h->nshards; k++) {
        for (size_t i = k ? h->ends[k - 1] : 0; h->gzip[k] && i < h->ends[k]; i++)
            if (h->samples[h->stored[i]].problem != FERRY_SHARD_NO_IMAGE)
                h->by_off[at++] = h->stored[i];
        h->by_off_ends[k] = at;
    }
    /* No bigger than every image at once, plus the room an image that does
     * not fit before the ring's end leaves there. */
    uint64_t all = 0, big = 0;
    for (size_t x = 0; x < at; x++) {
        uint64_t b = h->samples[h->by_off[x]].img_size + 1;
        all += b;
        big = b > big ? b : big;
    }
    size_t cap = h->cfg.shard_cache_bytes;
    if (all + big < cap)
        cap = (size_t)(all + big);
    ferry_gz_cache_setup su = {.samples = h->samples, .n = h->n, .nshards = h->nshards,
                               .fds = h->fds, .gzip = h->gzip, .paths = h->paths,
                               .by_off = h->by_off, .by_off_ends = h->by_off_ends,
                               .cap_bytes = cap, .pin = h->remote ? pin_remote : NULL,
                               .pin_arg = h};
    return ferry__gz_cache_create(&su, &h->gz);
}

/* Marks labels past the class names, counts the samples that will fail, and
 * gives num_classes: the class names' count, else the largest label + 1. */
static size_t settle_labels(shards *h, size_t *bad, size_t *first_bad)
{
    int64_t most = -1;
    *bad = 0;
    for (size_t i = 0; i < h->n; i++) {
        ferry_shard_sample *s = &h->samples[i];
        if (h->nclasses && s->label >= (int64_t)h->nclasses && !s->problem)
            s->problem = FERRY_SHARD_LABEL_RANGE;
        if (s->problem && (*bad)++ == 0)
            *first_bad = i;
        if (s->problem != FERRY_SHARD_LABEL_RANGE && s->label > most)
            most = s->label;
    }
    return h->nclasses ? h->nclasses : (size_t)(most + 1);
}

/* The output format: cfg's; with height and width 0, the first loadable
 * image's size, and with channels 0 too, its kind's channels (1 gray, else 3);
 * *pick: that image (SIZE_MAX when the size was given; channels 0 is then 3).
 * Shards are not read whole at create (they may be remote), so an image of
 * another size or kind is found when loaded: it fails by name
 * (ferry__image_sample) and is never resized or converted. */
static ferry_status probe_format(const shards *h, ferry_sample_format *fmt, size_t *pick)
{
    const ferry_image_config *cfg = &h->cfg;
    *pick = SIZE_MAX;
    if (cfg->height && cfg->width) {
        ferry__image_dataset_format(cfg, cfg->width, cfg->height, false, fmt);
        return FERRY_OK;
    }
    size_t i = 0;
    while (i < h->n && h->samples[i].problem)
        i++;
    if (i == h->n)
        return sample_problem(h, &h->samples[0]);
    ferry_scratch *s = NULL;
    ferry_status st = ferry_scratch_create(&s);
    if (st == FERRY_OK)
        st = read_image(h, &h->samples[i], s, true);
    ferry_image_info info;
    if (st == FERRY_OK)
        st = ferry__image_header(s->file, (size_t)h->samples[i].img_size, h->names + h->samples[i].name, &info);
    if (st == FERRY_OK) {
        size_t w, h2;
        ferry__image_oriented_size(cfg, &info, &w, &h2);
        ferry__image_dataset_format(cfg, w, h2, info.channels <= 2, fmt);
        *pick = i;
    }
    ferry_scratch_destroy(s);
    return st;
}

static void warn_bad(const shards *h, size_t bad, size_t first)
{
    if (!bad)
        return;
    char why[1024];
    sample_problem(h, &h->samples[first]);
    snprintf(why, sizeof why, "%s", ferry_last_error());
    ferry_clear_error();
    ferry_log(FERRY_LOG_WARN, "%zu of %zu samples in the shards cannot be loaded, the first: %s; "
              "each fails by name when loaded (with on_error = SKIP it is skipped and named in "
              "the loader's stats)", bad, h->n, why);
}

static void free_names(char **v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        ferry_host_free(v[i]);
    ferry_host_free(v);
}

ferry_status ferry_dataset_shards(const char *const *paths, size_t n, const ferry_image_config *cfg,
                                  ferry_dataset **out)
{
    if (!paths || !n || !out)
        return FERRY_ARG_ERROR("%s", !out ? "out is NULL" :
                               !paths ? "paths is NULL" : "no paths (n is 0)");
    for (size_t i = 0; i < n; i++)
        if (!paths[i])
            return FERRY_ARG_ERROR("paths[%zu] is NULL", i);
    shards *h = ferry_host_calloc(1, sizeof *h);
    if (!h)
        return FERRY_ERR_NO_MEMORY;
    atomic_init(&h->readahead, 0);
    ferry_status st = ferry__image_config_check(cfg, &h->cfg);
    if (st == FERRY_OK)
        st = ferry__shard_paths(paths, n, &h->paths, &h->nshards);
    char **classes = NULL;
    if (st == FERRY_OK && (st = open_shards(h)) == FERRY_OK)
        st = index_all(h, &classes);
    size_t bad = 0, first_bad = 0, num_classes = 0, pick = SIZE_MAX;
    ferry_sample_format fmt;
    if (st == FERRY_OK) {
        num_classes = settle_labels(h, &bad, &first_bad);
        if ((st = setup_reading(h)) == FERRY_OK)
            st = probe_format(h, &fmt, &pick);
        if (st == FERRY_OK && h->gz) /* the probe's read is not the user's */
            st = ferry__gz_cache_plan(h->gz, NULL, 0);
    }
    if (st != FERRY_OK) {
        free_names(classes, h->nclasses);
        shards_free(h);
        return st;
    }
    st = ferry__dataset_new(&shards_vt, h, h->n, &fmt, num_classes, out);
    if (st != FERRY_OK) {
        free_names(classes, num_classes);
        return st;
    }
    (*out)->class_names = classes;
    if (pick != SIZE_MAX) {
        snprintf((*out)->size_from, sizeof (*out)->size_from, "%s", h->names + h->samples[pick].name);
        (*out)->channels_from = h->cfg.channels ? 0 : fmt.channels;
    }
    warn_bad(h, bad, first_bad);
    return FERRY_OK;
}

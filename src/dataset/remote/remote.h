/* Internal to src/dataset: shards named by URL (http://, https://, s3://).
 * remote_url.c turns a URL into what to request (s3:// through the AWS_*
 * variables); remote_fetch.c (libcurl) or remote_nocurl.c (builds without it)
 * fetches; remote_read.c reads a byte range or a small object (a shard's
 * index, URL.ferry-index) into memory; remote_stream.c streams shards in the
 * streaming order; remote_cache.c keeps whole shards in a bounded local cache
 * that the shard dataset reads with pread in random order, as it reads a
 * local shard. */
#ifndef FERRY_DATASET_REMOTE_H
#define FERRY_DATASET_REMOTE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdint.h>

#include "ferry/dataset.h"

/* Whether path names a remote object: http://, https:// or s3:// (any case). */
bool ferry__is_url(const char *path);

/* ---- what to request (remote_url.c) ---- */
typedef struct ferry_remote_target {
    char url[2048];      /* the http(s) URL to request */
    bool s3;             /* sign with AWS Signature Version 4 */
    char sigv4[160];     /* "aws:amz:REGION:s3" */
    char userpwd[512];   /* "KEY:SECRET" */
    char token[1200];    /* "x-amz-security-token: ..." or empty */
} ferry_remote_target;

/* The request for url (as the user gave it: named in every message). An s3://
 * URL without AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or a URL too long,
 * is FERRY_ERR_INVALID_ARG naming it. */
ferry_status ferry__remote_target(const char *url, ferry_remote_target *out);

/* ---- fetching (remote_fetch.c) ---- */
typedef struct ferry_remote_opts {
    double timeout_s;    /* connect timeout, and the longest stall in a body */
    unsigned retries;    /* tries after the first, per fetch, for transient failures */
    double backoff_s;    /* the first retry's wait; doubles, capped, with jitter */
    bool paced;          /* the sink may wait (for its reader): no curl low-speed limit */
    double min_rate;     /* bytes/s a request's deadline allows; 0: FERRY_REMOTE_MIN_RATE */
} ferry_remote_opts;

/* Each request's total deadline: connect and stall (2 x timeout_s) plus its
 * bytes at this rate, so that a server trickling bytes fast enough to pass
 * the stall check still ends. Time a paced sink waits does not count. */
#define FERRY_REMOTE_MIN_RATE (64.0 * 1024)
double ferry__remote_deadline_s(const ferry_remote_opts *o, uint64_t bytes);

/* The schemes a request to url may be redirected to: "https" from https://
 * (never a downgrade that would send the request, and what it carries, in
 * clear), "http,https" from http://. */
const char *ferry__redirect_protocols(const char *url);

/* Whether an HTTP status is worth another try: 408, 425, 429, 500, 502, 503,
 * 504. Everything else (501 among them) answers the same again. */
bool ferry__http_transient(long status);

/* The object as first seen: each later response must match it. */
typedef struct ferry_remote_obj {
    uint64_t size;
    char etag[128];      /* empty when the server sends none */
} ferry_remote_obj;

/* Counters, added to atomically by the fetcher (one struct per cache).
 * connects: TCP connections opened (a request on a kept-alive one opens none). */
typedef struct ferry_remote_counters {
    _Atomic uint64_t bytes, requests, retries, connects;
} ferry_remote_counters;

/* Where fetched bytes go, in order from the first one asked for. Nonzero
 * return: stop (the fetch then fails with the sink's own error set). */
typedef int (*ferry_remote_sink)(void *arg, const uint8_t *b, size_t n);
/* Stop a fetch in progress: checked while it runs and between retries. */
typedef bool (*ferry_remote_cancelled)(void *arg);

/* The size and ETag of url (HEAD, with retries). */
ferry_status ferry__remote_stat(const char *url, const ferry_remote_opts *o,
                                ferry_remote_counters *cnt, ferry_remote_obj *out);

/* Bytes [from, end) of url (end past the object: to its end) into sink,
 * retried from the last good byte with a Range request. A 4xx, a wrong
 * Content-Length or Content-Range, or an object whose size or ETag is no
 * longer obj's is an error naming url and the byte offset; so is a transient
 * failure that outlasts the retries (o->retries failures in a row: a try
 * that moved the body on starts the count again). */
ferry_status ferry__remote_get(const char *url, const ferry_remote_opts *o,
                               const ferry_remote_obj *obj, uint64_t from, uint64_t end,
                               ferry_remote_sink sink, ferry_remote_cancelled cancelled, void *arg,
                               ferry_remote_counters *cnt);

/* A connection kept for the next request: one libcurl handle, reset between
 * requests (no option or header of one request reaches the next) but keeping
 * its connection cache, so that requests one after the other to one server
 * (a stream slot's shards, a worker's Range reads) reuse a kept-alive
 * connection instead of opening one each (connect, accept, slow start, the
 * handle's setup: per shard, on both sides). A request that failed below HTTP
 * (reset, timeout, cut body, cancel) drops the handle and its connections:
 * the next request, a retry among them, connects afresh. Used by one thread
 * at a time. NULL where a conn is taken: a handle for that call alone. */
typedef struct ferry_remote_conn ferry_remote_conn;
/* *out NULL without libcurl (every request is refused there anyway). */
ferry_status ferry__remote_conn_create(ferry_remote_conn **out);
void ferry__remote_conn_destroy(ferry_remote_conn *c);
/* ferry__remote_get and ferry__remote_read on conn c (NULL: their own). */
ferry_status ferry__remote_conn_get(ferry_remote_conn *c, const char *url,
                                    const ferry_remote_opts *o, const ferry_remote_obj *obj,
                                    uint64_t from, uint64_t end, ferry_remote_sink sink,
                                    ferry_remote_cancelled cancelled, void *arg,
                                    ferry_remote_counters *cnt);
ferry_status ferry__remote_conn_read(ferry_remote_conn *c, const char *url,
                                     const ferry_remote_opts *o, const ferry_remote_obj *obj,
                                     uint64_t off, size_t n, uint8_t *dst,
                                     ferry_remote_counters *cnt);

/* Idle connections shared by threads that make Range reads (remote_read.c):
 * take one (a new one when none is idle; NULL when none could be made, and
 * the read then gets a handle of its own), give it back after the read
 * (closed when the pool is full). Zeroed, it is not in use: fini is a no-op. */
#define FERRY_REMOTE_POOL_MAX 8
typedef struct ferry_remote_pool {
    pthread_mutex_t lock;
    ferry_remote_conn *idle[FERRY_REMOTE_POOL_MAX];
    size_t nidle;
    bool on;
} ferry_remote_pool;
void ferry__remote_pool_init(ferry_remote_pool *p);
void ferry__remote_pool_fini(ferry_remote_pool *p);
ferry_remote_conn *ferry__remote_pool_take(ferry_remote_pool *p);
void ferry__remote_pool_give(ferry_remote_pool *p, ferry_remote_conn *c);
/* ferry__remote_conn_read on a connection of pool p. */
ferry_status ferry__remote_pool_read(ferry_remote_pool *p, const char *url,
                                     const ferry_remote_opts *o, const ferry_remote_obj *obj,
                                     uint64_t off, size_t n, uint8_t *dst,
                                     ferry_remote_counters *cnt);

/* ---- uploading (remote_put.c) ---- */
/* PUTs the file at path to url (http(s)://, or s3:// signed), whole; transient
 * failures tried again from the start, o->retries times (0: 5), with backoff.
 * A 4xx, or failures past the retries, is an error naming url. */
ferry_status ferry__remote_put(const char *url, const char *path, const ferry_remote_opts *o);

/* ---- into memory, past the cache (remote_read.c) ---- */
/* Bytes [off, off + n) of url into dst, with the checks and retries of
 * ferry__remote_get; never fewer. */
ferry_status ferry__remote_read(const char *url, const ferry_remote_opts *o,
                                const ferry_remote_obj *obj, uint64_t off, size_t n, uint8_t *dst,
                                ferry_remote_counters *cnt);
/* All of url (at most max bytes) into *out (ferry_host_malloc'd, *n bytes). */
ferry_status ferry__remote_fetch_small(const char *url, const ferry_remote_opts *o, size_t max,
                                       ferry_remote_counters *cnt, uint8_t **out, size_t *n);

/* ---- a server that stopped answering (remote_down.c) ---- */
/* After the fetches of two objects from one server (scheme and host) failed
 * in a row, each after its retries, it is taken for down for a while (3 x timeout_s, or as
 * long as the failing fetch took; doubled at each failed probe after it),
 * and fetches from it fail at once meanwhile. One per dataset: its cache's. */
typedef struct ferry_remote_down ferry_remote_down;
ferry_status ferry__remote_down_create(double timeout_s, ferry_remote_down **out);
void ferry__remote_down_destroy(ferry_remote_down *d);
/* FERRY_OK when url may be fetched now; else its server's last failure, as
 * an error naming url. NULL d: FERRY_OK. Thread-safe. */
ferry_status ferry__remote_down_check(ferry_remote_down *d, const char *url);
/* Every server may be asked again (an epoch starts). */
void ferry__remote_down_forget(ferry_remote_down *d);
/* A fetch from url ended with st after took seconds (its error, if any, is
 * the thread's last), or, FERRY_OK, its first bytes came. Thread-safe. */
void ferry__remote_down_note(ferry_remote_down *d, const char *url, ferry_status st, double took);

/* ---- the cache (remote_cache.c) ---- */
typedef struct ferry_remote_cache ferry_remote_cache;

typedef struct ferry_remote_setup {
    char *const *paths;  /* the dataset's shards; only the URLs among them are the cache's */
    size_t n;
    const char *dir;     /* NULL: $FERRY_CACHE_DIR, else $XDG_CACHE_HOME/ferry, else
                          * ~/.cache/ferry (common/private_dir.h); checked private */
    size_t budget;       /* bytes of shards kept at once */
    ferry_remote_opts opts;
} ferry_remote_setup;

typedef struct ferry_remote_stats {
    uint64_t bytes_fetched, requests, retries;
    uint64_t connections; /* TCP connections the requests opened (kept-alive ones reused) */
    uint64_t hits;       /* reads whose bytes were already there (cache or stream) */
    uint64_t misses;     /* reads that waited for the network */
    uint64_t downloads, evictions, failures;
    uint64_t streams;    /* shard streams started (remote_stream.c) */
    uint64_t streams_ahead; /* of them, started before their shard's first read */
    uint64_t stream_reads, range_reads; /* reads served by a stream, by a Range request */
    uint64_t stream_threads; /* fetch threads started for streams (one per slot, kept) */
    double wait_s;       /* time reads spent waiting for bytes or room */
    size_t held_bytes, held_peak;
} ferry_remote_stats;

/* The counters' change from before to *now, into *now (held_bytes and
 * held_peak are levels, not counts: left as now has them). */
static inline void ferry__remote_stats_since(ferry_remote_stats *now, const ferry_remote_stats *before)
{
    now->bytes_fetched -= before->bytes_fetched;
    now->requests -= before->requests;
    now->retries -= before->retries;
    now->connections -= before->connections;
    now->hits -= before->hits;
    now->misses -= before->misses;
    now->downloads -= before->downloads;
    now->evictions -= before->evictions;
    now->failures -= before->failures;
    now->streams -= before->streams;
    now->streams_ahead -= before->streams_ahead;
    now->stream_threads -= before->stream_threads;
    now->stream_reads -= before->stream_reads;
    now->range_reads -= before->range_reads;
    now->wait_s -= before->wait_s;
}

/* ---- a cached shard's record (remote_record.c) ---- */
/* Writes the record `name` in the cache folder (open at dfd, shown as dir):
 * url, obj's ETag and size, and hash, the checksum (common/hash64.h) of the
 * bytes downloaded. Atomic, mode 0600, no link followed. */
ferry_status ferry__remote_record_write(int dfd, const char *dir, const char *name,
                                        const char *url, const ferry_remote_obj *obj,
                                        uint64_t hash);
/* Whether the record `name` says the file at fd is url's object as obj
 * describes it (ETag, size) and fd's bytes hash to the recorded sum: only then
 * is a file found in the cache folder used. Reads the whole file. */
bool ferry__remote_record_matches(int dfd, const char *name, const char *url,
                                  const ferry_remote_obj *obj, int fd);

/* ---- the cache ---- */
/* Asks each URL's size and ETag. Stale partial downloads of dead processes
 * in the folder are removed (only files named as this cache names its own).
 * A shard larger than the budget is no error here: streaming and reads of
 * byte ranges do not hold it (ferry__remote_cache_fits says whether it can be). */
ferry_status ferry__remote_cache_create(const ferry_remote_setup *su, ferry_remote_cache **out);
void ferry__remote_cache_destroy(ferry_remote_cache *c);
/* Shard k's descriptor (stable for the cache's life; read it only between
 * acquire and release), or -1 for a local shard. */
int ferry__remote_cache_fd(const ferry_remote_cache *c, size_t k);
/* FERRY_OK when shard k (a URL) fits the budget, else FERRY_ERR_INVALID_ARG
 * naming it, its size and the budget. */
ferry_status ferry__remote_cache_fits(const ferry_remote_cache *c, size_t k);
/* The name in the cache folder (relative to its descriptor) under which
 * shard k's index is kept once it has been built from a download
 * (ferry-HEX.ferry-index: named by URL, ETag and size, like the shard's
 * file); false for a local shard. */
bool ferry__remote_cache_index_name(const ferry_remote_cache *c, size_t k, char *out, size_t cap);
/* Shard k's index file, written or found under that name, is kept: its bytes
 * count against the budget (held_bytes) and it is deleted when its shard is
 * evicted (alone, least recently used, when its shard is not held). False,
 * and the file deleted, when no room can be made for it. Thread-safe. */
bool ferry__remote_cache_keep_index(ferry_remote_cache *c, size_t k);
/* The cache folder's descriptor (files are made relative to it) and name. */
int ferry__remote_cache_dirfd(const ferry_remote_cache *c);
const char *ferry__remote_cache_dir(const ferry_remote_cache *c);
/* Shard k's size and ETag as first seen; NULL for a local shard. */
const ferry_remote_obj *ferry__remote_cache_obj(const ferry_remote_cache *c, size_t k);
/* The request counters every fetch of this dataset adds to. */
ferry_remote_counters *ferry__remote_cache_counters(ferry_remote_cache *c);
/* Which of this dataset's servers are taken for down (every fetch notes its
 * outcome there and asks first). */
ferry_remote_down *ferry__remote_cache_down(ferry_remote_cache *c);
/* Pins shard k and waits until its bytes [0, end) are in the cache (end past
 * the shard: all of it). Fetches it when absent, first making room by evicting
 * the least recently used shards no one is reading. Pair with release, also
 * after an error. A no-op for a local shard. A shard that failed gives its
 * error until 3 x timeout_s have passed; the next acquire fetches it again. */
ferry_status ferry__remote_cache_acquire(ferry_remote_cache *c, size_t k, uint64_t end);
void ferry__remote_cache_release(ferry_remote_cache *c, size_t k);
void ferry__remote_cache_stats(ferry_remote_cache *c, ferry_remote_stats *out);

/* ---- streaming (remote_stream.c) ---- */
/* In the streaming order each remote shard is read front to back over one
 * connection, into a ring in memory that stays ahead of the readers (the
 * read-ahead), so the network's latency hides behind decoding; nothing goes
 * to the cache, and a shard need not fit its budget. */
typedef struct ferry_remote_streams ferry_remote_streams;

/* For the URLs among paths (the cache knows which: their objects and
 * counters). NULL cache: *out NULL, nothing to stream. */
ferry_status ferry__remote_streams_create(char *const *paths, size_t n, ferry_remote_cache *cache,
                                          const ferry_remote_opts *o, ferry_remote_streams **out);
void ferry__remote_streams_destroy(ferry_remote_streams *s);
/* on: the reads that follow are in streaming order (an epoch starts: every
 * stream starts over but the head stream the last plan opened, which becomes
 * its shard's, and shards that failed are tried again); off: reads are one
 * Range request each. No read may be in progress. */
void ferry__remote_streams_reset(ferry_remote_streams *s, bool on);
bool ferry__remote_streams_on(ferry_remote_streams *s);
/* The order in which this epoch first reads the shards (m shard numbers):
 * when a shard's stream is first read, the next one's starts, so that its
 * first bytes are there when its reads begin; at the last one's, a head
 * stream of shard `head` (the next epoch's first; NONE: none) fetches its
 * first bytes for the next epoch. NULL: no order (none started ahead). */
void ferry__remote_streams_plan(ferry_remote_streams *s, const size_t *seq, size_t m, size_t head);
/* Bytes [off, off + n) of remote shard k into dst: from its stream (started
 * at off when it has none), or by a Range request when the bytes are behind
 * the stream's ring, streaming is off or no plan was given (the loader's
 * warm-up: one member, not a stream). Never a partial read. A stream that
 * fails fails every later read of its shard until the next reset, with the
 * error naming the URL and byte offset. Thread-safe. */
ferry_status ferry__remote_stream_read(ferry_remote_streams *s, size_t k, uint64_t off, size_t n,
                                       uint8_t *dst);
/* Test hook: at the k-th reset from now that keeps a head stream (1 = the
 * next; 0 = never), that stream's fetch fails just after the reset passed
 * over it, while it joins the others; the reset waits for the failure.
 * Process-wide, atomic. Returns the countdown it replaces: > 0 means the
 * planned failure never came. */
int64_t ferry_debug_fail_head_stream_after(int64_t k);
/* Adds the streams' counters to out (the cache's). */
void ferry__remote_streams_stats(ferry_remote_streams *s, ferry_remote_stats *out);

/* The remote counters of a shard dataset; false for any other dataset (shards.c). */
bool ferry__dataset_remote_stats(const ferry_dataset *ds, ferry_remote_stats *out);

#endif

/* Internal to the shard dataset (shards.c, shards_index.c, shards_paths.c): the
 * index of samples over a set of tar shards. */
#ifndef FERRY_DATASET_SHARDS_H
#define FERRY_DATASET_SHARDS_H

#include <stddef.h>
#include <stdint.h>

#include "ferry/dataset.h"

/* Why a key cannot be loaded. Found at create, reported by name when the sample
 * is loaded, so the loader's on_error policy decides (as for an unreadable file
 * in an image folder). */
typedef enum ferry_shard_problem {
    FERRY_SHARD_OK = 0,
    FERRY_SHARD_NO_IMAGE,    /* a KEY.cls without KEY.png */
    FERRY_SHARD_NO_LABEL,    /* a KEY.png without KEY.cls */
    FERRY_SHARD_BAD_LABEL,   /* KEY.cls is not a decimal integer from 0 to 2^31 - 1 */
    FERRY_SHARD_LABEL_RANGE  /* not below the number of class names */
} ferry_shard_problem;

typedef struct ferry_shard_sample {
    uint64_t img_off, img_size; /* the image member's data */
    uint64_t hdr_off;           /* the image's header (its .cls header without an image) */
    uint64_t cls_off;           /* the .cls member's header, for messages */
    int64_t label;              /* -1 without a good label */
    size_t name;                /* offset of "SHARD:KEY.png" (or "SHARD:KEY") in the names */
    uint32_t shard;
    uint8_t problem;            /* ferry_shard_problem */
} ferry_shard_sample;

/* One shard's part of the index, built independently of the others. */
typedef struct ferry_shard_part {
    ferry_shard_sample *samples; /* owned */
    size_t n, cap;
    char *names;                 /* owned: NUL-separated names */
    size_t names_len, names_cap;
    char **classes;              /* owned: the class-names member's lines, or NULL */
    size_t nclasses;
    char classes_member[32];     /* its member name, for messages */
    bool gzip;                   /* the shard is a gzip-compressed tar */
} ferry_shard_part;

/* Whether the file on fd starts with the gzip magic. */
ferry_status ferry__shard_is_gzip(int fd, const char *path, bool *gz);

/* Indexes shard number k (path, open as fd): samples sorted by key. Errors that
 * make the index untrustworthy (a corrupt header, a truncated shard, links, a
 * duplicate KEY.ext) are returned naming the shard, member and byte offset. */
ferry_status ferry__shard_index(const char *path, int fd, uint32_t k, ferry_shard_part *out);
void ferry__shard_part_free(ferry_shard_part *p);

/* The index of a shard saved beside it as SHARD.ferry-index (shards_cache.c).
 * load: *found when that file exists and matches the shard on fd (size,
 * modification time, its own CRC-32), *out then as ferry__shard_index would
 * give it; otherwise nothing to free. Only running out of memory is an error.
 * save: written atomically, unless the shard's size or time differ from
 * `before` (its fstat taken before indexing it). */
struct stat;
ferry_status ferry__shard_index_load(const char *path, int fd, uint32_t k, ferry_shard_part *out,
                                     bool *found);
ferry_status ferry__shard_index_save(const char *path, int fd, const struct stat *before,
                                     const ferry_shard_part *p);
/* The same file's bytes (d, n), fetched from beside a remote shard: *found
 * when they are an index of a shard of shard_size bytes (its time cannot be
 * checked from afar; its CRC and every record are), *out then as load gives
 * it. Only running out of memory is an error. */
ferry_status ferry__shard_index_parse(const uint8_t *d, size_t n, const char *path,
                                      uint64_t shard_size, uint32_t k, ferry_shard_part *out,
                                      bool *found);
#define FERRY_SHARD_INDEX_SUFFIX ".ferry-index"
/* The most bytes fetched for the index beside a remote shard of shard_size
 * bytes: what the most samples such a shard can hold need (one 512-byte
 * header each, names up to 256 bytes, the class names), and never over
 * FERRY_SHARD_INDEX_MAX_FETCH; a larger one is refused before it is fetched
 * (the shard is then read to index it). */
#define FERRY_SHARD_INDEX_MAX_FETCH ((uint64_t)64 << 20)
size_t ferry__shard_index_max_bytes(uint64_t shard_size);
/* The same, kept as `name` in another folder (a remote shard's, in its cache
 * folder, open at dfd and shown as dir): save as ferry__shard_index_save with
 * fd the shard's local copy, mode 0600, created relative to dfd; load as
 * parse, from the file. A symbolic link at name is never followed: saving
 * replaces it, loading takes it for no index. */
ferry_status ferry__shard_index_save_at(int dfd, const char *dir, const char *name,
                                        const char *path, int fd, const struct stat *before,
                                        const ferry_shard_part *p);
ferry_status ferry__shard_index_load_at(int dfd, const char *name, const char *path,
                                        uint64_t shard_size, uint32_t k, ferry_shard_part *out,
                                        bool *found);


/* The class-names members' names. */
#define FERRY_SHARD_CLASSES_A "__classes__.txt"
#define FERRY_SHARD_CLASSES_B "classes.txt"

/* The shard files named by the user's paths: a .tar file, a folder (its *.tar
 * entries, sorted), or a list file (one shard path a line). *out holds *n
 * ferry_host_strdup'd paths. */
ferry_status ferry__shard_paths(const char *const *paths, size_t n, char ***out, size_t *nout);

/* ---- brace notation in shard paths and URLs (shards_braces.c) ---- */
#define FERRY__BRACE_MAX 100000 /* names one pattern may give */
struct ferry_str_list;
/* Whether s[0, n) holds a brace: a pattern to expand. */
bool ferry__has_braces(const char *s, size_t n);
/* Pushes onto l, in order, the names pattern p[0, n) gives ("a-{00..02}.tar":
 * a-00.tar, a-01.tar, a-02.tar; "{x,y}": x, y; groups left to right, the
 * rightmost fastest). Malformed braces, or more than FERRY__BRACE_MAX names,
 * are an error naming the pattern. */
ferry_status ferry__brace_expand(const char *p, size_t n, struct ferry_str_list *l);
/* The error for a URL of a folder (ending in '/'), saying what to pass instead. */
ferry_status ferry__url_folder_error(const char *url);

/* ---- loading samples of gzip-compressed shards (shards_gz.c) ---- */
typedef struct ferry_gz_cache ferry_gz_cache;

typedef struct ferry_gz_cache_setup {
    const ferry_shard_sample *samples; /* the dataset's index, n samples */
    size_t n, nshards;
    const int *fds;                    /* per shard */
    const uint8_t *gzip;               /* per shard: 1 for a gzip one (the others are not read) */
    char *const *paths;                /* per shard */
    /* Each shard's samples with an image, in the order of their image in the
     * shard: shard k's are by_off[by_off_ends[k - 1] .. by_off_ends[k]). */
    const size_t *by_off, *by_off_ends;
    size_t cap_bytes;                  /* the ring: ferry_image_config.shard_cache_bytes */
    /* Optional: makes shard k's bytes readable (on) until called again (off),
     * around create's first read of a stream; NULL when fds are always readable
     * (remote shards: their cache's acquire and release). */
    ferry_status (*pin)(void *arg, size_t k, bool on);
    void *pin_arg;
} ferry_gz_cache_setup;

/* What the cache did, for tests and `ferry bench`. */
typedef struct ferry_gz_cache_stats {
    size_t kept, kept_peak;             /* images held now, and the most at once */
    size_t kept_bytes, kept_bytes_peak; /* their bytes (each image rounded up to 1) */
    uint64_t decompressed;              /* tar bytes decompressed in all */
    uint64_t passes;                    /* times a shard's stream started from its first byte */
    uint64_t rewinds;                   /* of them, restarts under a plan that it did not
                                         * cause: a sample behind its stream, not kept */
    uint64_t evicted;                   /* images dropped unread to make room */
    uint64_t from_ring, from_stream;    /* reads served by each */
} ferry_gz_cache_stats;

ferry_status ferry__gz_cache_create(const ferry_gz_cache_setup *su, ferry_gz_cache **out);
void ferry__gz_cache_destroy(ferry_gz_cache *c);
/* Sample i's image bytes (img_size of them) into dst. Thread-safe. */
ferry_status ferry__gz_cache_read(ferry_gz_cache *c, size_t i, uint8_t *dst);
/* Which samples the next reads will be (n indices, repeats counted); images
 * passed that are not among them are not kept. idx NULL: no plan, every image
 * passed is kept while there is room. Either way every shard's stream starts
 * over at its next use. Reads may be in progress. */
ferry_status ferry__gz_cache_plan(ferry_gz_cache *c, const size_t *idx, size_t n);
void ferry__gz_cache_stats(ferry_gz_cache *c, ferry_gz_cache_stats *out);
/* A dataset's gzip cache counters (shards.c); false when ds has no gzip shards. */
bool ferry__dataset_gz_stats(const ferry_dataset *ds, ferry_gz_cache_stats *out);

#endif

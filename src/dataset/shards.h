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
} ferry_shard_part;

/* Indexes shard number k (path, open as fd): samples sorted by key. Errors that
 * make the index untrustworthy (a corrupt header, a truncated shard, links, a
 * duplicate KEY.ext) are returned naming the shard, member and byte offset. */
ferry_status ferry__shard_index(const char *path, int fd, uint32_t k, ferry_shard_part *out);
void ferry__shard_part_free(ferry_shard_part *p);

/* The class-names members' names. */
#define FERRY_SHARD_CLASSES_A "__classes__.txt"
#define FERRY_SHARD_CLASSES_B "classes.txt"

/* The shard files named by the user's paths: a .tar file, a folder (its *.tar
 * entries, sorted), or a list file (one shard path a line). *out holds *n
 * ferry_host_strdup'd paths. */
ferry_status ferry__shard_paths(const char *const *paths, size_t n, char ***out, size_t *nout);

#endif

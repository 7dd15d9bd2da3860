/* Internal to src/dataset: a gzip file read front to back through zlib, by
 * pread from a descriptor the caller owns (gz_stream.c). What the compressed
 * shards (.tar.gz) are read with, at index time and when a sample is loaded.
 * Multi-member files (as pigz and bgzip write them) are one stream. */
#ifndef FERRY_DATASET_GZ_H
#define FERRY_DATASET_GZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <zlib.h>

#include "ferry/status.h"

typedef struct ferry_gz {
    z_stream z;
    bool z_ready;         /* inflateInit2 done */
    int fd;               /* not owned */
    const char *name;     /* for messages; not owned */
    uint64_t in_off;      /* the next compressed byte to read from the file */
    uint64_t out;         /* decompressed bytes produced so far */
    bool end;             /* the last member ended and the file has no more bytes */
    uint8_t *in;          /* owned: compressed input */
    size_t in_cap;
} ferry_gz;

/* True when the 2 bytes are the gzip magic. */
static inline bool ferry__gz_magic(const uint8_t *b) { return b[0] == 0x1f && b[1] == 0x8b; }

/* zlib's allocator, through ferry_host_* (counted like every allocation). */
void *ferry__z_alloc(void *opaque, unsigned items, unsigned size);
void ferry__z_free(void *opaque, void *p);

/* Starts reading the gzip file on fd from its first byte. */
ferry_status ferry__gz_open(ferry_gz *g, int fd, const char *name);
void ferry__gz_close(ferry_gz *g);
/* Back to the first byte (no allocation). */
ferry_status ferry__gz_rewind(ferry_gz *g);

/* Up to n decompressed bytes into dst; *got < n only at the end of the stream.
 * Errors: FERRY_ERR_FORMAT for corrupt data or a file that ends inside a
 * member ("NAME: gzip: ... at compressed byte N"), FERRY_ERR_IO for a read. */
ferry_status ferry__gz_read(ferry_gz *g, uint8_t *dst, size_t n, size_t *got);

/* Reads exactly n bytes into dst; dst NULL discards them (through tmp, tmp_n
 * bytes). Ending early is FERRY_ERR_FORMAT naming where. */
ferry_status ferry__gz_take(ferry_gz *g, uint8_t *dst, uint64_t n, uint8_t *tmp, size_t tmp_n);

#endif

/* Internal to src/dataset: reading uncompressed tar files (the shards of
 * ferry_dataset_shards). tar_header.c parses one 512-byte header block and pax
 * records; tar_walk.c walks a shard's members through a read window; shards*.c
 * build the dataset on top. Written from the POSIX pax/ustar description
 * (IEEE Std 1003.1, "pax - Interchange Format"), plus the two GNU extensions
 * GNU tar writes by default: ././@LongLink names and base-256 numbers. */
#ifndef FERRY_DATASET_TAR_H
#define FERRY_DATASET_TAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ferry/status.h"

#define FERRY_TAR_BLOCK 512

/* ---- one header block (tar_header.c) ---- */

/* What a member is, from its type flag. */
typedef enum ferry_tar_kind {
    FERRY_TAR_FILE = 0,   /* '0', NUL (old tar), '7' (contiguous file) */
    FERRY_TAR_DIR,        /* '5' */
    FERRY_TAR_HARDLINK,   /* '1' */
    FERRY_TAR_SYMLINK,    /* '2' */
    FERRY_TAR_DEVICE,     /* '3', '4' */
    FERRY_TAR_FIFO,       /* '6' */
    FERRY_TAR_PAX,        /* 'x': pax records for the next member */
    FERRY_TAR_PAX_GLOBAL, /* 'g': pax records for the rest of the archive */
    FERRY_TAR_LONGNAME,   /* 'L': GNU, the next member's name */
    FERRY_TAR_LONGLINK,   /* 'K': GNU, the next member's link target */
    FERRY_TAR_OTHER       /* anything else (GNU sparse 'S', volume 'V', ...) */
} ferry_tar_kind;

typedef struct ferry_tar_header {
    ferry_tar_kind kind;
    char type;            /* the type flag as written */
    uint64_t size;        /* bytes of data after the header */
    /* The name: prefix "/" name for POSIX ustar, name alone otherwise; NUL-terminated. */
    char name[256 + 2];
} ferry_tar_header;

/* True when all 512 bytes are zero: the end-of-archive marker. */
bool ferry__tar_is_zero_block(const uint8_t *b);

/* Parses block b. A checksum that matches neither the unsigned nor the signed
 * sum, or a size field that is not a number, is FERRY_ERR_FORMAT with
 * ferry_last_error() saying which field and why (the caller adds the shard and
 * the offset in front). */
ferry_status ferry__tar_header_parse(const uint8_t *b, ferry_tar_header *out);

/* What a pax extended header says about the next member. */
typedef struct ferry_tar_pax {
    const char *path; size_t path_len; /* NULL when absent; points into the records */
    bool has_size;
    uint64_t size;
} ferry_tar_pax;

/* Parses n bytes of pax records ("LEN key=value\n" each). A malformed record is
 * FERRY_ERR_FORMAT naming its offset within the records. */
ferry_status ferry__tar_pax_parse(const uint8_t *rec, size_t n, ferry_tar_pax *out);

/* ---- walking a shard's members (tar_walk.c) ---- */

typedef struct ferry_tar_member {
    const char *name;     /* the full name after pax/GNU overrides; valid until the next call */
    ferry_tar_kind kind;
    char type;
    uint64_t header_off;  /* the first header block of this member (its pax or 'L' header if any) */
    uint64_t data_off, size;
} ferry_tar_member;

/* A window onto the shard: headers, labels and pax records are served from one
 * buffer that is refilled by pread, so building the index reads the shard
 * front to back in large requests and skips over large members. */
struct ferry_gz;
typedef struct ferry_tar_walk {
    int fd;
    struct ferry_gz *gz;  /* not owned; set: the tar is this gzip stream's output */
    const char *shard;    /* for messages; not owned */
    uint64_t file_size;   /* of the tar; UINT64_MAX for gzip until its end is read */
    uint64_t pos;         /* the next header */
    uint8_t *buf;         /* owned */
    size_t cap, len;
    uint64_t start;       /* file offset of buf[0] */
    char *name;           /* owned: the current member's name */
    size_t name_cap;
    bool has_prev;        /* name is still the last member returned, at prev_hdr, of prev_size */
    uint64_t prev_hdr, prev_size;
} ferry_tar_walk;

/* Starts a walk at offset 0. The fd stays the caller's. */
ferry_status ferry__tar_walk_init(ferry_tar_walk *w, int fd, const char *shard, uint64_t file_size);
/* A walk of the tar inside a gzip stream (at its start; the caller's). The
 * walk only moves forward: reads behind the window are not possible. Offsets
 * are in the decompressed tar. */
ferry_status ferry__tar_walk_init_gz(ferry_tar_walk *w, struct ferry_gz *gz, const char *shard);
void ferry__tar_walk_free(ferry_tar_walk *w);

/* The next member, skipping pax and GNU name headers (their contents applied).
 * *end is set at the end-of-archive marker. Errors are FERRY_ERR_FORMAT
 * "SHARD: ... at byte N: reason" for a bad header or a shard that ends early
 * (including one without the end-of-archive marker), FERRY_ERR_IO for a read
 * that fails. */
ferry_status ferry__tar_next(ferry_tar_walk *w, ferry_tar_member *m, bool *end);

/* n bytes at offset off (n <= the window), valid until the next call. Past the
 * end of the shard is FERRY_ERR_FORMAT. */
ferry_status ferry__tar_read(ferry_tar_walk *w, uint64_t off, size_t n, const uint8_t **out);

/* ---- per-thread member reads (shards.c) ---- */
/* Reads n bytes at off of fd into s->file (grown as needed); name for messages. A
 * short read (the shard shrank since create) is FERRY_ERR_IO. */
struct ferry_scratch;
ferry_status ferry__scratch_pread(struct ferry_scratch *s, int fd, uint64_t off, size_t n,
                                  const char *name);

#endif

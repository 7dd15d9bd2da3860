/* A plain POSIX ustar writer for `ferry pack`: regular files only, names of at
 * most 100 bytes (pack's keys are short), reproducible output (mtime 0, owner
 * 0, mode 0644), and the end-of-archive blocks padded to GNU tar's 10240-byte
 * record, so that `tar tf` and Python's tarfile read the shards quietly. */
#ifndef FERRY_TOOLS_TAR_WRITE_H
#define FERRY_TOOLS_TAR_WRITE_H

#include <stdint.h>
#include <stdio.h>

typedef struct tar_out {
    FILE *f;
    uint64_t bytes; /* written so far */
} tar_out;

/* The bytes a member of n data bytes adds to the archive. */
uint64_t tar_member_bytes(uint64_t n);
/* The end-of-archive blocks and record padding after `bytes`. */
uint64_t tar_end_bytes(uint64_t bytes);

/* 0, or -1 with errno. */
int tar_out_open(tar_out *t, const char *path);
/* A regular file member. -1 with errno (EINVAL: name over 100 bytes). */
int tar_out_add(tar_out *t, const char *name, const void *data, size_t n);
/* Ends the archive and closes it (also after a failure: then returns -1). */
int tar_out_close(tar_out *t);

#endif

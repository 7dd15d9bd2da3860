/* Files written so that a crash at any instant leaves the old file or the new
 * one, never a torn one: a temporary file in the same folder, fsync, rename over
 * the target, fsync of the folder. Every step can be made to fail in tests.
 *
 * The temporary file is NAME.tmpPID-RANDOM (16 random hex digits), created
 * O_CREAT|O_EXCL|O_NOFOLLOW relative to a descriptor of the target's folder,
 * and renamed within it: in a folder others can write, a name they could
 * guess and plant a symbolic link at (NAME.tmpPID, opened O_TRUNC, was one)
 * would make the write go wherever the link points. */
#ifndef FERRY_COMMON_ATOMIC_FILE_H
#define FERRY_COMMON_ATOMIC_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "ferry/status.h"

typedef struct ferry_atomic_file {
    char path[4096];     /* the target (for messages) */
    char tmp[4096 + 48]; /* the temporary file beside it (for messages) */
    size_t base;         /* where the names inside the folder begin in path and tmp */
    int dfd;             /* the target's folder */
    int fd;
} ferry_atomic_file;

/* Creates the temporary file. Symbolic links in path's last part are followed
 * (the file they name is replaced, the link stays); a path that names anything
 * but a regular file (a folder, a device, a FIFO) is refused, since the rename
 * would replace it. On failure nothing is left behind. */
ferry_status ferry_atomic_open(ferry_atomic_file *f, const char *path);
/* The same for the file `name` in the folder open at dfd (shown as dir in
 * messages), created with the given mode: a symbolic link at name is not
 * followed (the rename replaces the link itself). dfd stays the caller's. */
ferry_status ferry_atomic_open_at(ferry_atomic_file *f, int dfd, const char *dir, const char *name,
                                  unsigned mode);
/* Removes PATH.tmpPID and PATH.tmpPID-RANDOM files beside path whose process
 * is gone (a kill during a save leaves one, as large as the file):
 * ferry_atomic_open does it, and a reader of the file may. Another live
 * process's temporary file is kept. Returns how many were removed. */
size_t ferry_atomic_clean_stale(const char *path);
/* Appends n bytes. */
ferry_status ferry_atomic_write(ferry_atomic_file *f, const void *p, size_t n);
/* Overwrites n bytes at offset (already written). */
ferry_status ferry_atomic_pwrite(ferry_atomic_file *f, const void *p, size_t n, uint64_t offset);
/* fsync, close, rename over the target, fsync the folder. On failure before the
 * rename the temporary file is removed and the target is untouched. */
ferry_status ferry_atomic_commit(ferry_atomic_file *f);
/* Removes the temporary file (after a failure of the caller's own). */
void ferry_atomic_abort(ferry_atomic_file *f);

/* Test hook: the k-th file operation from now (open, each write, fsync, close,
 * rename, folder fsync; 1 = the next) fails with EIO. 0 = never. Returns the
 * countdown it replaces: > 0 means the planned failure never came. */
int64_t ferry_debug_fail_io_after(int64_t k);

#endif

/* Internal: reading a folder through one place. readdir returns NULL both at
 * the end and on an error (EIO on a network or FUSE file system, say); a loop
 * that stops at NULL takes a failed read for the end and silently drops the
 * entries after it: shards of a shard folder, or whole classes of an image
 * folder (relabelling every class after them). ferry_dir_next tells the two
 * apart, and a test hook fails the k-th read as such a file system does. */
#ifndef FERRY_COMMON_DIR_H
#define FERRY_COMMON_DIR_H

#include <dirent.h>
#include <stdint.h>

/* The next entry of d; NULL at the end (*err 0) or on an error (*err its
 * errno, never 0). */
struct dirent *ferry_dir_next(DIR *d, int *err);
/* Test hook: the k-th ferry_dir_next from now fails with EIO (1 = the next
 * one; 0 = never). Process-wide, atomic. Returns the countdown it replaces:
 * > 0 means the planned failure never came. */
int64_t ferry_debug_fail_dir_read_after(int64_t k);

#endif

/* Internal: a folder only this user can write, and files created in it that
 * no one else can have planted. ferry keeps its caches (remote shards and
 * their indexes) in such a folder; a folder anyone could have made first
 * (a predictable name under /tmp) let another local user read the cached
 * shards, swap in their own, or plant a symbolic link that the next run
 * writes through (issue 36).
 *
 * The checks are made on the open descriptor (fstat), and every file is then
 * created relative to it (openat), so replacing the folder after the check
 * changes nothing. */
#ifndef FERRY_COMMON_PRIVATE_DIR_H
#define FERRY_COMMON_PRIVATE_DIR_H

#include <stdbool.h>
#include <stddef.h>

#include "ferry/status.h"

/* The user's cache folder for ferry: $XDG_CACHE_HOME/ferry when that is set
 * and absolute, else $HOME/.cache/ferry (HOME from the password database when
 * unset). Not created here. Fails only when no home is known or the name is
 * longer than cap. */
ferry_status ferry_private_dir_default(char *out, size_t cap);

/* Opens dir (creating it, mode 0700, when missing; with make_parents its
 * missing parents too, also 0700) and checks it: a real folder, not a
 * symbolic link; owned by the effective user; not writable by group or
 * others. *dfd is then its descriptor (O_CLOEXEC; the caller closes it).
 * Anything else is an error naming the folder and the fix. `what` names the
 * folder's use in messages ("remote shard cache"). */
ferry_status ferry_private_dir_open(const char *dir, bool make_parents, const char *what, int *dfd);

/* Creates a new file in dfd named PREFIX, 16 random hex digits, SUFFIX,
 * O_CREAT|O_EXCL|O_NOFOLLOW with the given mode and
 * O_RDWR|O_CLOEXEC, trying another name if one exists. Its name goes into
 * name (cap bytes). Returns the descriptor, or -1 with errno set. */
int ferry_private_create(int dfd, const char *prefix, const char *suffix, unsigned mode, char *name,
                         size_t cap);

/* 64 unpredictable bits (getrandom; a time and counter mix if that fails:
 * the names it makes are then guessable but still created O_EXCL). */
unsigned long long ferry_random64(void);
/* Test hook: the next k calls of ferry_random64 return value (so that a test
 * can plant something at the name a file is about to get); 0 = off. Returns
 * the calls that were left. */
long long ferry_debug_fix_random(unsigned long long value, long long k);

#endif

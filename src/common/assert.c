/* What a failed FERRY_ASSERT does, and the per-thread tag ferry_mutex records
 * as its owner. Both exist for debug and sanitizer builds (FERRY_DEBUG). */
#include <stdio.h>
#include <stdlib.h>

#include "common/assert.h"
#include "common/mutex.h"

/* The one abort() in the library. "Never abort" is about what callers can cause
 * (bad input, a failed syscall, a full device); a failed assertion means the
 * library broke its own invariant, only debug builds check it, and going on
 * would corrupt state that the error would not explain. */
void ferry_assert_fail(const char *file, int line, const char *cond)
{
    fprintf(stderr, "ferry: %s:%d: internal assertion failed: %s\n", file, line, cond);
    fflush(stderr);
    abort();
}

/* Its address is unique among the threads alive at once. */
static _Thread_local char thread_tag;

const void *ferry_thread_tag(void) { return &thread_tag; }

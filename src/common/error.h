/* Internal: setting the thread-local error, logging, and the host allocation hook.
 * Every host allocation in the library goes through ferry_host_*, so tests can fail
 * the k-th one and count what is live. */
#ifndef FERRY_INTERNAL_ERROR_H
#define FERRY_INTERNAL_ERROR_H

#include <stddef.h>
#include <stdint.h>
#include "ferry/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define FERRY_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define FERRY_PRINTF(a, b)
#endif

/* Sets the thread-local message and returns s, so callers write
 * `return ferry_fail(FERRY_ERR_IO, "%s: %s", path, strerror(errno));` */
ferry_status ferry_fail(ferry_status s, const char *fmt, ...) FERRY_PRINTF(2, 3);

/* Prefixes the current message with more context ("sample 17: " + old). */
ferry_status ferry_fail_prefix(ferry_status s, const char *fmt, ...) FERRY_PRINTF(2, 3);

void ferry_log(ferry_log_level level, const char *fmt, ...) FERRY_PRINTF(2, 3);

/* Host allocations. Failures set the error message (with the size) and return NULL. */
void *ferry_host_malloc(size_t n);
void *ferry_host_calloc(size_t count, size_t size);
void *ferry_host_realloc(void *p, size_t n);
void *ferry_host_aligned(size_t align, size_t n); /* free with ferry_host_free */
char *ferry_host_strdup(const char *s);
void ferry_host_free(void *p);

/* Test hooks: fail the k-th allocation from now (1 = the next one; 0 = never),
 * and count allocations made / currently live. Process-wide, atomic. */
/* Returns the countdown it replaces: > 0 means the planned failure never came. */
int64_t ferry_debug_fail_alloc_after(int64_t k);
int64_t ferry_debug_alloc_count(void);
int64_t ferry_debug_alloc_live(void);
/* Allocations made by the calling thread, ever (for per-thread accounting). */
int64_t ferry_debug_thread_alloc_count(void);
/* The same for device memory: the k-th ferry_device_malloc from now (of a
 * non-zero size, any device) fails as a full device does: the cache is emptied
 * and FERRY_ERR_DEVICE_OOM comes back with the usual message. 0 = never; returns
 * the countdown it replaces. Lives in allocator.c. */
int64_t ferry_debug_fail_device_alloc_after(int64_t k);

/* Overflow-checked size arithmetic: returns 0 on overflow. */
static inline int ferry_mul_size(size_t a, size_t b, size_t *out)
{
    return !__builtin_mul_overflow(a, b, out);
}

/* Seconds on the monotonic clock. */
double ferry_now(void);

/* "3.00 GiB", "12.50 MiB", "512 bytes" into buf; returns buf. */
const char *ferry_format_bytes(size_t n, char *buf, size_t size);

#ifdef __cplusplus
}
#endif

#endif

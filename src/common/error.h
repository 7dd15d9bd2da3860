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

/* The thread's error message; the rules are in docs/API_ERRORS.md ("Messages").
 *
 * FERRY_ERROR_MAX is the one limit on a message, its NUL included. Every
 * buffer that carries one (a loader slot's, a worker's) is this size, and a
 * message cut to fit ends in "..." so the cut shows.
 *
 * The name of the file or sample a message is about is a field of the error,
 * not something to find by reading the text: ferry_fail_at and ferry_fail_named
 * put "name: " in front and record the name; ferry_error_subject returns it. */
#define FERRY_ERROR_MAX 1024

/* Sets the thread-local message (no name in front) and returns s, so callers
 * write `return ferry_fail(FERRY_ERR_FORMAT, "bad header");`. The public
 * ferry_set_error is the same function; this is its name inside the library. */
#define ferry_fail ferry_set_error

/* An argument error naming the function it comes from:
 * `return FERRY_ARG_ERROR("out is NULL");` in ferry_loader_create sets
 * "ferry_loader_create: out is NULL" and returns FERRY_ERR_INVALID_ARG. For the
 * public entry points, where the caller's argument is checked. */
#define FERRY_ARG_ERROR(...) ferry_arg_error_(__func__, __VA_ARGS__)
ferry_status ferry_arg_error_(const char *func, const char *fmt, ...) FERRY_PRINTF(2, 3);
/* The same name in front of an argument error a helper returned as a bare
 * reason: `if (st != FERRY_OK) return FERRY_ARG_CONTEXT(st);`. */
#define FERRY_ARG_CONTEXT(st) ferry_fail_prefix((st), "%s: ", __func__)
/* A helper shared by several entry points (the tensor operations' argument
 * checks) is given the entry point's __func__ and calls ferry_arg_error_ with
 * it. No message types a function's name by hand. */

/* "name: " + the formatted reason, with name recorded as the message's
 * subject: the file or sample the message is about. */
ferry_status ferry_fail_at(ferry_status s, const char *name, const char *fmt, ...)
    FERRY_PRINTF(3, 4);

/* Names the file or sample the current message is about: puts "name: " in
 * front and records it, unless name is already the subject (added closer to
 * the file), so a name appears once. An empty message becomes the status's
 * name. Another subject (a shard named under its sample) stays in the text
 * after the new one. Returns s. */
ferry_status ferry_fail_named(ferry_status s, const char *name);

/* The current message's subject, or NULL when it names none. */
const char *ferry_error_subject(void);

/* The message without "name: " in front when name is its subject; otherwise
 * the whole message. For a caller that writes the name its own way ("sample
 * 17 (a.png): " + reason). */
const char *ferry_error_reason(const char *name);

/* Adds context to the current message, after its subject if it has one
 * ("a.png: " + "IDAT: " + old reason), before it otherwise. */
ferry_status ferry_fail_prefix(ferry_status s, const char *fmt, ...) FERRY_PRINTF(2, 3);

/* vsnprintf that shows a cut: when the text does not fit in size bytes it ends
 * in "..." (cut at a UTF-8 character boundary). size >= 4. Control characters
 * are escaped (ferry_escape_controls), as in every message: the library's
 * messages (errors, log lines) all pass through here. */
void ferry_format_cut(char *buf, size_t size, const char *fmt, ...) FERRY_PRINTF(3, 4);

/* Control characters (bytes below 0x20, and 0x7f) in buf written as \xHH, in
 * place: names in messages come from others (a tar member, a file name, a
 * URL), and "ESC[2K\r" in one would erase the terminal line it is printed on,
 * hiding the real error. Escaping twice changes nothing. A text that no
 * longer fits in size bytes (size >= 4) is cut and ends in "...". */
void ferry_escape_controls(char *buf, size_t size);

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
/* The same for device memory: the k-th ferry_device_alloc from now (of a
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
/* CPU seconds the calling thread has run (CLOCK_THREAD_CPUTIME_ID): the
 * per-stage times, which a busy machine (other threads on the cores, waits
 * on I/O or the network) does not inflate as it does wall time. */
double ferry_thread_cpu_now(void);

/* "3.00 GiB", "12.50 MiB", "512 bytes" into buf; returns buf. */
const char *ferry_format_bytes(size_t n, char *buf, size_t size);

#ifdef __cplusplus
}
#endif

#endif

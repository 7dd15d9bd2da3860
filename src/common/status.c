/* Status names, the thread-local error message and the log callback. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <pthread.h>
#include <time.h>

#include "common/error.h"

static _Thread_local char last_error[1024];

/* The log hook is the one piece of process-wide mutable state besides the
 * allocators: set once at start-up by the application. */
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static ferry_log_fn log_fn;   /* guarded by log_lock */
static void *log_user;        /* guarded by log_lock */

const char *ferry_status_str(ferry_status s)
{
    static const char *const names[FERRY_STATUS_COUNT_] = {
        [FERRY_OK] = "FERRY_OK",
        [FERRY_ERR_INVALID_ARG] = "FERRY_ERR_INVALID_ARG",
        [FERRY_ERR_NO_MEMORY] = "FERRY_ERR_NO_MEMORY",
        [FERRY_ERR_IO] = "FERRY_ERR_IO",
        [FERRY_ERR_FORMAT] = "FERRY_ERR_FORMAT",
        [FERRY_ERR_LIMIT] = "FERRY_ERR_LIMIT",
        [FERRY_ERR_UNSUPPORTED] = "FERRY_ERR_UNSUPPORTED",
        [FERRY_ERR_NO_DEVICE] = "FERRY_ERR_NO_DEVICE",
        [FERRY_ERR_DEVICE_MISMATCH] = "FERRY_ERR_DEVICE_MISMATCH",
        [FERRY_ERR_DEVICE_OOM] = "FERRY_ERR_DEVICE_OOM",
        [FERRY_ERR_CUDA] = "FERRY_ERR_CUDA",
        [FERRY_ERR_TIMEOUT] = "FERRY_ERR_TIMEOUT",
        [FERRY_END] = "FERRY_END",
        [FERRY_ERR_BAD_STATE] = "FERRY_ERR_BAD_STATE",
        [FERRY_ERR_SHAPE] = "FERRY_ERR_SHAPE",
        [FERRY_ERR_DTYPE] = "FERRY_ERR_DTYPE",
        [FERRY_ERR_DIST] = "FERRY_ERR_DIST",
    };
    if ((unsigned)s >= FERRY_STATUS_COUNT_ || !names[s])
        return "FERRY_ERR_UNKNOWN";
    return names[s];
}

const char *ferry_last_error(void) { return last_error; }

double ferry_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void ferry_clear_error(void) { last_error[0] = '\0'; }

ferry_status ferry_fail(ferry_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return s;
}

ferry_status ferry_set_error(ferry_status s, const char *fmt, ...)
{
    if (!fmt) {
        snprintf(last_error, sizeof last_error, "%s", ferry_status_str(s));
        return s;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return s;
}

ferry_status ferry_fail_prefix(ferry_status s, const char *fmt, ...)
{
    char old[sizeof last_error];
    memcpy(old, last_error, sizeof old);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < sizeof last_error)
        snprintf(last_error + n, sizeof last_error - (size_t)n, "%s", old);
    return s;
}

void ferry_set_log(ferry_log_fn fn, void *user)
{
    pthread_mutex_lock(&log_lock);
    log_fn = fn;
    log_user = user;
    pthread_mutex_unlock(&log_lock);
}

void ferry_log(ferry_log_level level, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);

    pthread_mutex_lock(&log_lock);
    ferry_log_fn fn = log_fn;
    void *user = log_user;
    pthread_mutex_unlock(&log_lock);

    if (fn) {
        fn(level, msg, user);
    } else if (level >= FERRY_LOG_WARN) {
        fprintf(stderr, "ferry: %s: %s\n", level == FERRY_LOG_WARN ? "warning" : "error", msg);
    }
}

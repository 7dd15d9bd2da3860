/* Status names, the thread-local error message and the log callback. */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <pthread.h>
#include <time.h>

#include "common/error.h"
#include "common/redact.h"

/* The thread's error: the message, and the subject (the file or sample it is
 * about) when "subject: " leads the message. lead is that prefix's length
 * (0: no subject). */
typedef struct error_state {
    char msg[FERRY_ERROR_MAX];
    char subject[FERRY_ERROR_MAX];
    size_t lead;
} error_state;

static _Thread_local error_state err;

/* The log hook is the one piece of process-wide mutable state besides the
 * allocators: set once at start-up by the application. */
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static ferry_log_fn log_fn;   /* guarded by log_lock */
static void *log_user;        /* guarded by log_lock */

const char *ferry_status_str(ferry_status s)
{
    static const char *const names[FERRY_STATUS_COUNT] = {
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
    if ((unsigned)s >= FERRY_STATUS_COUNT || !names[s])
        return "FERRY_ERR_UNKNOWN";
    return names[s];
}

const char *ferry_last_error(void) { return err.msg; }

double ferry_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double ferry_thread_cpu_now(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
        return ferry_now(); /* no thread clock: wall time, as before it */
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void ferry_clear_error(void)
{
    err.msg[0] = '\0';
    err.subject[0] = '\0';
    err.lead = 0;
}

/* A text cut to fit size bytes ends in "...": the cut is at a UTF-8 character
 * boundary, so no half character sits before the dots. */
static void mark_cut(char *buf, size_t size)
{
    size_t end = size - 4;
    while (end > 0 && ((unsigned char)buf[end] & 0xC0) == 0x80)
        end--;
    memcpy(buf + end, "...", 4);
}

static bool is_control(unsigned char c) { return c < 0x20 || c == 0x7f; }

void ferry_escape_controls(char *buf, size_t size)
{
    size_t len = strlen(buf), out = 0, k = 0;
    bool any = false;
    for (; k < len; k++) {
        size_t w = is_control((unsigned char)buf[k]) ? 4 : 1;
        if (out + w > size - 1)
            break;
        any |= w == 4;
        out += w;
    }
    if (k == len && !any)
        return;
    bool cut = k < len;
    if (cut) { /* room for "...", and not inside a UTF-8 character */
        while (k > 0 && out > size - 4)
            out -= is_control((unsigned char)buf[--k]) ? 4 : 1;
        while (k > 0 && ((unsigned char)buf[k] & 0xC0) == 0x80)
            out -= is_control((unsigned char)buf[--k]) ? 4 : 1;
        memcpy(buf + out, "...", 4);
    } else {
        buf[out] = '\0';
    }
    /* Back to front: byte i lands at or after i, so what is still to be read
     * (before i) is never overwritten. */
    static const char hex[] = "0123456789abcdef";
    for (size_t i = k, o = out; i-- > 0;) {
        unsigned char c = (unsigned char)buf[i];
        if (!is_control(c)) {
            buf[--o] = (char)c;
            continue;
        }
        o -= 4;
        buf[o] = '\\';
        buf[o + 1] = 'x';
        buf[o + 2] = hex[c >> 4];
        buf[o + 3] = hex[c & 15];
    }
}

/* Every message and log line passes here: a URL's password is cut out of it
 * (common/redact.h), whichever argument carried it, and its control
 * characters are escaped. */
static void vformat_cut(char *buf, size_t size, const char *fmt, va_list ap)
{
    char raw[FERRY_ERROR_MAX * 2];
    int n = vsnprintf(raw, sizeof raw, fmt, ap);
    if (n < 0)
        snprintf(raw, sizeof raw, "(a message that could not be formatted: \"%.64s\")", fmt);
    size_t len = ferry_redact_urls(raw, buf, size);
    if ((n >= 0 && (size_t)n >= sizeof raw) || len >= size)
        mark_cut(buf, size);
    ferry_escape_controls(buf, size);
}

void ferry_format_cut(char *buf, size_t size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vformat_cut(buf, size, fmt, ap);
    va_end(ap);
}

/* err.msg = head (n bytes) + mid + tail, cut to fit. The parts may point into
 * err.msg: they are joined in a copy first. */
static void set_joined(const char *head, size_t n, const char *mid, const char *tail)
{
    char tmp[FERRY_ERROR_MAX];
    ferry_format_cut(tmp, sizeof tmp, "%.*s%s%s", (int)n, head, mid, tail);
    memcpy(err.msg, tmp, sizeof tmp);
}

/* Formats into a copy first: an argument may be ferry_last_error() itself. */
static ferry_status vset(ferry_status s, const char *fmt, va_list ap)
{
    char tmp[FERRY_ERROR_MAX];
    if (fmt)
        vformat_cut(tmp, sizeof tmp, fmt, ap);
    else
        snprintf(tmp, sizeof tmp, "%s", ferry_status_str(s));
    memcpy(err.msg, tmp, sizeof tmp);
    err.subject[0] = '\0';
    err.lead = 0;
    return s;
}

ferry_status ferry_set_error(ferry_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vset(s, fmt, ap);
    va_end(ap);
    return s;
}

ferry_status ferry_arg_error_(const char *func, const char *fmt, ...)
{
    char reason[FERRY_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vformat_cut(reason, sizeof reason, fmt, ap);
    va_end(ap);
    return ferry_set_error(FERRY_ERR_INVALID_ARG, "%s: %s", func, reason);
}

ferry_status ferry_fail_named(ferry_status s, const char *raw_name)
{
    char name[FERRY_ERROR_MAX];
    if (!raw_name)
        return s;
    ferry_redact_urls(raw_name, name, sizeof name); /* the subject is printed too */
    if (err.subject[0] && strcmp(err.subject, name) == 0)
        return s;
    char tmp[FERRY_ERROR_MAX], shown[FERRY_ERROR_MAX];
    snprintf(tmp, sizeof tmp, "%s", err.msg[0] ? err.msg : ferry_status_str(s));
    /* The subject is kept as given (callers compare it with their names);
     * the message shows it escaped. */
    ferry_format_cut(shown, sizeof shown, "%s", name);
    set_joined(shown, strlen(shown), ": ", tmp);
    snprintf(err.subject, sizeof err.subject, "%s", name);
    size_t lead = strlen(shown) + 2, len = strlen(err.msg);
    err.lead = lead < len ? lead : len;
    return s;
}

ferry_status ferry_fail_at(ferry_status s, const char *name, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vset(s, fmt, ap);
    va_end(ap);
    return ferry_fail_named(s, name);
}

const char *ferry_error_subject(void) { return err.subject[0] ? err.subject : NULL; }

const char *ferry_error_reason(const char *raw_name)
{
    char name[FERRY_ERROR_MAX];
    if (raw_name)
        ferry_redact_urls(raw_name, name, sizeof name);
    if (raw_name && err.subject[0] && strcmp(err.subject, name) == 0)
        return err.msg + err.lead;
    return err.msg;
}

ferry_status ferry_fail_prefix(ferry_status s, const char *fmt, ...)
{
    char ctx[FERRY_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vformat_cut(ctx, sizeof ctx, fmt, ap);
    va_end(ap);
    char old[FERRY_ERROR_MAX];
    memcpy(old, err.msg, sizeof old);
    set_joined(old, err.lead, ctx, old + err.lead);
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
    char msg[FERRY_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vformat_cut(msg, sizeof msg, fmt, ap);
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

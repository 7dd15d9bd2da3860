/* Library: libferry (pkg-config ferry); <ferry.h> includes this header. */
/* Status codes, the thread-local error message, and the log callback. */
#ifndef FERRY_STATUS_H
#define FERRY_STATUS_H

#include "ferry/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ferry_status {
    FERRY_OK = 0,
    FERRY_ERR_INVALID_ARG,     /* a bad argument: NULL, zero size, malformed string */
    FERRY_ERR_NO_MEMORY,       /* out of host memory */
    FERRY_ERR_IO,              /* open/read/write failed */
    FERRY_ERR_FORMAT,          /* a file is corrupt or not what it claims */
    FERRY_ERR_LIMIT,           /* input exceeds a configured limit */
    FERRY_ERR_UNSUPPORTED,     /* valid, but not supported by this build or device */
    FERRY_ERR_NO_DEVICE,       /* the requested device does not exist */
    FERRY_ERR_DEVICE_MISMATCH, /* tensors or handles on different devices */
    FERRY_ERR_DEVICE_OOM,      /* out of device memory */
    FERRY_ERR_CUDA,            /* any other CUDA runtime or library error */
    FERRY_ERR_TIMEOUT,         /* an operation took longer than allowed */
    FERRY_END,                 /* end of an epoch or a sequence: not a failure */
    FERRY_ERR_BAD_STATE,       /* the handle cannot do this now (failed, busy, destroyed) */
    FERRY_ERR_SHAPE,           /* tensor shapes do not fit */
    FERRY_ERR_DTYPE,           /* tensor dtypes do not fit */
    FERRY_ERR_DIST,            /* MPI or NCCL failed, or another rank did */
    FERRY_STATUS_COUNT        /* the number of codes, not a code (grows as codes are added) */
} ferry_status;

/* "FERRY_ERR_FORMAT" etc.; never NULL. */
FERRY_API const char *ferry_status_str(ferry_status s);

/* The message of the last failed call on this thread, in words a user can act on
 * ("train/3/17.png: IDAT: CRC error"). Empty string when none. At most 1023
 * characters; a longer message is cut and ends in "...". */
FERRY_API const char *ferry_last_error(void);

/* Forget the last error on this thread. */
FERRY_API void ferry_clear_error(void);

/* Sets this thread's error message and returns s: for callbacks of your own (a
 * user dataset's get) to say what went wrong in the same words the library uses.
 * Say why only: the library puts the sample's name in front. */
FERRY_API ferry_status ferry_set_error(ferry_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

typedef enum ferry_log_level {
    FERRY_LOG_DEBUG = 0,
    FERRY_LOG_INFO,
    FERRY_LOG_WARN,
    FERRY_LOG_ERROR
} ferry_log_level;

typedef void (*ferry_log_fn)(ferry_log_level level, const char *msg, void *user);

/* Route library warnings (such as "pin_memory requested but no CUDA device is
 * available; using pageable memory") to fn. NULL restores the default, which
 * prints warnings and errors to stderr as "ferry: warning: ...". */
FERRY_API void ferry_set_log(ferry_log_fn fn, void *user);

#ifdef __cplusplus
}
#endif
#endif

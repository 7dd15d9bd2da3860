/* Library: libferry (pkg-config ferry); <ferry.h> includes this header. */
/* The library's version and FERRY_API, the mark on every public function.
 * Included by every public header.
 *
 * The library is compiled with -fvisibility=hidden: only functions declared
 * FERRY_API are exported from libferry.so, everything else (the fd_, fk_, fm_
 * internals and internal ferry_ helpers) stays inside it. The version here is the
 * only place it is written: the Makefile reads it for the shared library's
 * name (libferry.so.MAJOR, libferry.so.MAJOR.MINOR.PATCH) and ferry.pc, and
 * ferry_version() returns FERRY_VERSION. */
#ifndef FERRY_EXPORT_H
#define FERRY_EXPORT_H

#define FERRY_VERSION_MAJOR 0
#define FERRY_VERSION_MINOR 2
#define FERRY_VERSION_PATCH 0

#define FERRY_STRINGIFY_(x) #x
#define FERRY_STRINGIFY(x) FERRY_STRINGIFY_(x)
/* "0.2.0" */
#define FERRY_VERSION                                                             \
    FERRY_STRINGIFY(FERRY_VERSION_MAJOR) "." FERRY_STRINGIFY(FERRY_VERSION_MINOR) "." \
    FERRY_STRINGIFY(FERRY_VERSION_PATCH)
/* 200 for 0.2.0: for #if FERRY_VERSION_NUMBER >= ... */
#define FERRY_VERSION_NUMBER \
    (FERRY_VERSION_MAJOR * 10000 + FERRY_VERSION_MINOR * 100 + FERRY_VERSION_PATCH)

#ifndef FERRY_API
#if defined(__GNUC__) || defined(__clang__)
#define FERRY_API __attribute__((visibility("default")))
#else
#define FERRY_API
#endif
#endif

#endif

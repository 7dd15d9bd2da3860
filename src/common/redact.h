/* Internal: credentials out of what ferry prints. A URL's user:password@ is
 * the user's secret; messages, logs, traces and sample names go to terminals,
 * files and other people, so every one of them shows the userinfo as "***"
 * instead. */
#ifndef FERRY_INTERNAL_REDACT_H
#define FERRY_INTERNAL_REDACT_H

#include <stddef.h>

/* in into out (cap bytes, NUL-terminated, cut to fit), each URL's userinfo
 * ("scheme://USERINFO@host") replaced by "***". Returns the length of the
 * whole result, as snprintf does (>= cap: it was cut). in and out must not
 * overlap. */
size_t ferry_redact_urls(const char *in, char *out, size_t cap);

#endif

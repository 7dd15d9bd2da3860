/* A small HTTP/1.1 file server for the tests (harness_http.c), on 127.0.0.1
 * only, that serves a folder with Range and ETag and misbehaves on request:
 * error bursts, connections dropped mid-body, stalls, lying Content-Length,
 * delays, Range ignored (200 and the whole file, as python3 -m http.server
 * answers), a server that dies mid-epoch. A PUT writes its body to the folder
 * (faults: the error bursts, and drop_every closes it unanswered). Every
 * request's head is kept, to count what clients sent (ft_http_count).
 * Bounded: each connection has socket timeouts, stop() waits a few
 * seconds at most, and it answers at most FT_HTTP_MAX_REQUESTS requests.
 * Connections are counted (ft_http_connections); keep_alive keeps them open. */
#ifndef FERRY_TEST_HARNESS_HTTP_H
#define FERRY_TEST_HARNESS_HTTP_H

#include <stdbool.h>
#include <stddef.h>

#define FT_HTTP_MAX_REQUESTS 20000

typedef struct ft_http_faults {
    unsigned fail_first;    /* the first N requests get fail_status (503, 429, 404, ...) */
    int fail_status;
    unsigned retry_after;   /* seconds, in a Retry-After header with fail_status */
    const char *fail_path;  /* non-NULL: only requests for paths containing it fail */
    unsigned drop_every;    /* every Nth GET with a body is cut after drop_after bytes */
    size_t drop_after;
    unsigned stall_every;   /* every Nth GET stops sending for stall_s mid-body */
    double stall_s;
    long clen_lie;          /* added to every Content-Length (and no more bytes sent) */
    double delay_s;         /* before every response */
    bool no_range;          /* answer Range requests with 200 and the whole file */
    unsigned etag_change_after; /* from this request on, another ETag (0: never) */
    const char *etag_path;  /* non-NULL: only paths containing it change, counted alone */
    const char *redirect_to; /* non-NULL: every request answered 307 to this base + its path */
    size_t trickle_bytes;   /* nonzero: a body goes out this many bytes at a time, */
    double trickle_s;       /* ... one piece every trickle_s seconds */
    unsigned die_after;     /* the server dies at this request (0: never): see ft_http_die */
    unsigned freeze_after;  /* the server freezes at this request (0: never): ft_http_freeze */
    /* HTTP/1.1 persistent connections (opt-in; without it every answer says
     * "Connection: close" and closes): a connection answers request after
     * request, error statuses too, until the client closes it, a fault cuts
     * it, or it has answered keep_max requests (0: no limit): then it closes
     * after the last answer without a word, as a server whose keep-alive
     * timeout ran out does. */
    bool keep_alive;
    unsigned keep_max;
} ft_http_faults;

typedef struct ft_http ft_http;

/* Serves root on an ephemeral port of 127.0.0.1; fails the test on error. */
ft_http *ft_http_start(const char *root, const ft_http_faults *f);
/* "http://127.0.0.1:PORT" */
const char *ft_http_base(const ft_http *s);
/* New faults from the next request on; counts restart at zero. */
void ft_http_set_faults(ft_http *s, const ft_http_faults *f);
unsigned ft_http_requests(const ft_http *s);
/* TCP connections accepted so far (with keep_alive, fewer than requests). */
unsigned ft_http_connections(const ft_http *s);
/* How many requests so far had needle in their head (request line and
 * headers; case-insensitive): what a client sent, e.g. "x-amz-security-token"
 * or "GET /a.tar.ferry-index". */
unsigned ft_http_count(ft_http *s, const char *needle);
/* The server dies now, as a killed process does: its port refuses every
 * connection from here on, a body being sent is cut at its next chunk, and a
 * request read but not yet answered gets no answer. ft_http_stop still frees it. */
void ft_http_die(ft_http *s);
bool ft_http_dead(const ft_http *s);
/* The server freezes now, as a stopped process (SIGSTOP) or a host that no
 * longer answers does: connections are accepted but never answered, and a
 * body being sent stops at its next chunk, until ft_http_stop. */
void ft_http_freeze(ft_http *s);
void ft_http_stop(ft_http *s);

/* Skips the test in a build without libcurl (CURL=0). */
void ft_require_curl(void);
/* The same shards from disk: paths as ft_indexed_png_shards wrote them. */
struct ferry_dataset *ft_local_shards_dataset(char (*paths)[600], size_t nsh);
/* A dataset over srv's shards sh00.tar .. (as ft_indexed_png_shards names
 * them, nsh <= 64) by URL, its remote cache in ft_tmp(cache_rel) (the folder
 * above it made), a 2 s timeout. */
struct ferry_dataset *ft_http_shards_dataset(const ft_http *srv, size_t nsh, const char *cache_rel);

#endif

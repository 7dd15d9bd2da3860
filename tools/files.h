/* Shared by the dataset tools (check, export, bench decode): collecting .png
 * paths under a folder, reading a file into a reusable buffer, making folders. */
#ifndef FERRY_TOOLS_FILES_H
#define FERRY_TOOLS_FILES_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

typedef struct tool_paths {
    char **v;
    char **why; /* per path: why it cannot be read, found while listing; NULL: nothing known */
    size_t n, cap;
} tool_paths;

/* Appends every .png under path (recursively; a file is taken as is), sorted
 * bytewise per folder; a link back up the tree is not followed. keep_bad (for
 * `ferry check`): an entry named *.png that is not a readable regular file (a
 * dangling link, a folder or FIFO named x.png), a folder that cannot be opened,
 * and a path that does not exist are appended too, with the reason in why;
 * returns 0, or -1 with errno on running out of memory. Without keep_bad such
 * entries are passed over (the benchmarks want files they can time), and -1 with
 * errno means path itself cannot be read. */
int tool_collect_png(const char *path, int keep_bad, tool_paths *out);
void tool_paths_free(tool_paths *p);
/* Appends s (why: NULL, or what is known against it); -1 when out of memory. */
int tool_paths_push(tool_paths *p, const char *s, const char *why);

/* Why a path cannot be read, in words, as the datasets say it:
 * ferry__not_regular_reason(mode) and ferry__open_error_reason(path, err)
 * (src/dataset/core/internal.h; the tools link libferry.a). */
#include "dataset/image/image.h" /* includes the dataset core */
#include "ferry.h"

/* Reads a regular file into *buf (grown as needed), never blocking on a FIFO.
 * Returns 0, -1 with errno, -2 when the file is larger than max_bytes, or -3
 * when it is not a regular file. */
int tool_read_file(const char *path, uint8_t **buf, size_t *cap, size_t *n, size_t max_bytes);

/* Decodes the image file[0..n) (PNG or JPEG, as `ferry check` does: the
 * library's default limits, the file's own channels and size) into *pix,
 * grown as needed. FERRY_OK, or the decoder's status with the message naming
 * path once. file may be used as scratch output when *pix cannot grow. */
ferry_status tool_decode_check(uint8_t *file, size_t n, const char *path, ferry_scratch *s,
                               uint8_t **pix, size_t *pix_cap);

/* fputs with control characters (below 0x20, and 0x7f) written as \xHH, as
 * the library's messages show them: for a name that came from elsewhere. */
void tool_fputs_escaped(const char *s, FILE *f);

/* mkdir -p. Returns 0 or -1 with errno. */
int tool_mkdirs(const char *path);

/* Seconds on a monotonic clock. */
double tool_now(void);

#endif

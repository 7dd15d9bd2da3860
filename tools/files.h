/* Shared by the dataset tools (check, export, bench decode): collecting .png
 * paths under a folder, reading a file into a reusable buffer, making folders. */
#ifndef FERRY_TOOLS_FILES_H
#define FERRY_TOOLS_FILES_H

#include <stddef.h>
#include <stdint.h>

typedef struct tool_paths {
    char **v;
    size_t n, cap;
} tool_paths;

/* Appends every .png under path (recursively; a file is taken as is), sorted
 * bytewise per call. Returns 0, or -1 with errno when path cannot be read. */
int tool_collect_png(const char *path, tool_paths *out);
void tool_paths_free(tool_paths *p);

/* Reads a file into *buf (grown as needed). Returns 0, -1 with errno, or -2 when
 * the file is larger than max_bytes. */
int tool_read_file(const char *path, uint8_t **buf, size_t *cap, size_t *n, size_t max_bytes);

/* mkdir -p. Returns 0 or -1 with errno. */
int tool_mkdirs(const char *path);

/* Seconds on a monotonic clock. */
double tool_now(void);

#endif

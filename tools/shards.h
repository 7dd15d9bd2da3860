/* Tools on tar shards: telling them from other paths, and `ferry check` on them. */
#ifndef FERRY_TOOLS_SHARDS_H
#define FERRY_TOOLS_SHARDS_H

#include <stdbool.h>
#include <stddef.h>

#include "ferry.h"

/* True when ferry_dataset_probe says path is tar shards (a shard, a folder
 * of them, a list of them). */
bool tool_is_shards(const char *path);

/* Decodes every sample of the shards at path with `workers` threads; prints
 * "name: reason" per bad sample (or the shard's own error when it cannot be
 * indexed) and adds to *total and *bad. 0, or -1 when out of memory. */
int tool_check_shards(const char *path, size_t workers, size_t *total, size_t *bad);

#endif

/* Tools on tar shards: telling a folder of shards from an image folder, opening
 * either as a dataset, and `ferry check` on shards. */
#ifndef FERRY_TOOLS_SHARDS_H
#define FERRY_TOOLS_SHARDS_H

#include <stdbool.h>
#include <stddef.h>

#include "ferry.h"

/* True for a path ending in .tar, .tar.gz or .tgz, a folder with such an
 * entry and no sub-folder (an image folder has class sub-folders), or a list
 * of shard paths (a file whose first line names one). */
bool tool_is_shards(const char *path);

/* ferry_dataset_shards when tool_is_shards(path), else ferry_dataset_image_folder. */
ferry_status tool_open_images(const char *path, const ferry_image_config *cfg, ferry_dataset **out);

/* Decodes every sample of the shards at path with `workers` threads; prints
 * "name: reason" per bad sample (or the shard's own error when it cannot be
 * indexed) and adds to *total and *bad. 0, or -1 when out of memory. */
int tool_check_shards(const char *path, size_t workers, size_t *total, size_t *bad);

#endif

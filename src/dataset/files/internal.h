/* Internal to src/dataset/files: the shared core of the image-folder and
 * list-file datasets. Nothing here is public API. */
#ifndef FERRY_DATASET_FILES_INTERNAL_H
#define FERRY_DATASET_FILES_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "ferry/dataset.h"

/* Image files (image_files.c): the shared core of image-folder and list-file. Takes
 * ownership of paths (each ferry_host_strdup'd), labels and class_names, even on failure.
 * bad_count entries of the caller's listing (bad_first: the first, "path: reason")
 * cannot be read: kept in the dataset and logged once it exists (listing names
 * what was listed, for the message). Without any, the files passed over while
 * taking the image size from the first readable file are. */
ferry_status ferry__image_files_create(char **paths, int64_t *labels, size_t n,
                                       char **class_names, size_t num_classes,
                                       const ferry_image_config *cfg, const char *listing,
                                       size_t bad_count, const char *bad_first,
                                       ferry_dataset **out);

#endif

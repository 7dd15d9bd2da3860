/* `ferry pack`'s side files: the files beside each image with its stem
 * (x.jpg + x.boxes.npy + x.labels.npy), carried into the shard as
 * KEY.boxes.npy, KEY.labels.npy (pack_side.c). */
#ifndef FERRY_TOOLS_PACK_SIDE_H
#define FERRY_TOOLS_PACK_SIDE_H

#include <stddef.h>

#include "ferry.h"

typedef struct pack_side {
    char **paths;   /* every non-image file with a '.' in the images' folders, sorted */
    size_t n;
} pack_side;

/* Lists the folders of ds's samples (each once). -1 with a message printed. */
int pack_side_init(pack_side *s, const ferry_dataset *ds);
void pack_side_free(pack_side *s);
/* The side files of image `path`: [*first, *first + count) of s->paths; the
 * extension of each (after the stem's '.') is path + strlen of the stem's
 * folder and stem + 1, given by *stem_len. */
size_t pack_side_find(const pack_side *s, const char *path, size_t *first, size_t *stem_len);

#endif

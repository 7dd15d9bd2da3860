/* What a dataset can do beyond get(): the capabilities the loader asks about.
 * Each kind declares them as optional entries of its vtable (dataset/core/internal.h);
 * views forward them with their indices remapped, and a custom dataset can
 * declare shards (ferry_dataset_callbacks.shard_ends). The loader includes this
 * header and ferry/dataset.h, nothing else of the dataset module: it never tests
 * which kind a dataset is. */
#ifndef FERRY_DATASET_CAPS_H
#define FERRY_DATASET_CAPS_H

#include <stdbool.h>
#include <stddef.h>

#include "ferry/dataset.h"

/* Whether get() decodes through ctx->scratch (file-backed datasets, through any
 * view): the loader warms each worker's scratch only then. */
bool ferry__dataset_uses_scratch(const ferry_dataset *ds);

/* The shard layout, for the loader's streaming order: the number of shards,
 * and in *ends each shard's end in the stored order (shard k holds stored
 * positions [ends[k-1], ends[k]), ends[-1] = 0; a shard may hold none). *seq
 * (seq may be NULL) lists the sample indices in stored order, or is NULL when
 * that order is the index order. 0, and *ends NULL, for a dataset without
 * shards. Valid while ds lives. */
size_t ferry__dataset_shard_ends(const ferry_dataset *ds, const size_t **ends, const size_t **seq);

/* Asks get() to advise the kernel to read `bytes` of each shard ahead of the
 * furthest member read, for a mostly sequential order; 0 turns it off. Called
 * again at each epoch's start: the furthest point is forgotten. No-op where the
 * dataset has no use for it. */
void ferry__dataset_set_readahead(ferry_dataset *ds, size_t bytes);

/* The samples the next reads will be (n indices, in read order, repeats
 * counted), so that a dataset that streams (gzip shards) keeps exactly the
 * images still to come, and one that streams remote shards opens the next
 * shard's stream before its first read; `head` (SIZE_MAX: none) is the
 * sample the next epoch's reads start at, whose shard's stream opens near
 * this epoch's end. idx NULL: no plan. A hint: an error costs speed, never
 * data. No-op where the dataset has no use for it. */
ferry_status ferry__dataset_plan_reads(ferry_dataset *ds, const size_t *idx, size_t n, size_t head);

/* How many of the dataset's shards are gzip-compressed (0 without shards). */
size_t ferry__dataset_gzip_shards(const ferry_dataset *ds);

#endif

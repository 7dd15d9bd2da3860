/* Internal: the order of an epoch's samples, from (sampler, seed, epoch). */
#ifndef FERRY_LOADER_SAMPLER_H
#define FERRY_LOADER_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

#include "ferry/loader.h"

typedef struct ferry_sampler_plan {
    ferry_sampler kind;     /* resolved: never DEFAULT */
    bool shuffle;
    uint64_t seed;
    size_t dataset_len;
    const size_t *indices;  /* FERRY_SAMPLER_INDICES (owned by the loader) */
    size_t num_indices;
    size_t rank, world_size;
    /* Streaming (stream_buffer > 0, shard datasets): the shards in a seeded
     * order, their samples through a shuffle buffer of stream_buffer entries.
     * shard_ends and shard_seq as ferry__dataset_shard_ends gives them (seq NULL:
     * stored in index order);
     * shard_perm: nshards entries of the loader's, rewritten by each order. */
    size_t stream_buffer;
    const size_t *shard_ends, *shard_seq;
    size_t nshards;
    size_t *shard_perm;
} ferry_sampler_plan;

/* Validates cfg's sampler fields against the dataset length and fills plan
 * (indices are borrowed from cfg). */
ferry_status ferry_sampler_plan_init(ferry_sampler_plan *plan, const ferry_loader_config *cfg,
                                     size_t dataset_len);

/* Streaming mode for a shard dataset (cfg->stream_shuffle_buffer > 0, checked
 * by plan_init): the shard boundaries, the samples in stored order, and perm
 * (nshards entries) to work in. */
void ferry_sampler_plan_stream(ferry_sampler_plan *plan, const size_t *shard_ends,
                               const size_t *shard_seq, size_t nshards, size_t *perm);

/* Where this rank's reads of epoch `epoch` start in the streaming order: the
 * sample at the head of its range, before the shuffle buffer (whose first
 * picks come from the entries after it, in the same shard or the next), so
 * that the dataset can open that shard's stream before the epoch starts.
 * SIZE_MAX when the order is not streamed. perm: nshards entries to work in. */
size_t ferry_sampler_stream_head(const ferry_sampler_plan *plan, uint64_t epoch, size_t *perm);

/* Whether the distributed sampler splits the streaming order into contiguous
 * ranges (one per rank) instead of interleaving it: world_size > 1, streaming. */
bool ferry_sampler_block_split(const ferry_sampler_plan *plan);

/* Samples per epoch. */
size_t ferry_sampler_len(const ferry_sampler_plan *plan);

/* Writes the epoch's order into out[ferry_sampler_len]. scratch holds
 * dataset_len entries (used by the distributed sampler); no allocation. */
void ferry_sampler_order(const ferry_sampler_plan *plan, uint64_t epoch, size_t *out,
                         size_t *scratch);

/* The rest of epoch `epoch` after the first `consumed` entries of its global
 * order (all ranks together) were delivered, re-split over this plan's world
 * size: into out, returning this rank's count (ceil(rest / world_size), padded
 * by repeating the rest from its start). For resuming with another world size.
 * scratch: dataset_len entries. A streaming split into ranges
 * (ferry_sampler_block_split) resumes only on its own world size: the rest of
 * this rank's range after consumed / world_size entries. */
size_t ferry_sampler_order_rest(const ferry_sampler_plan *plan, uint64_t epoch, uint64_t consumed,
                                size_t *out, size_t *scratch);

#endif

/* Samplers: sequential, random, the caller's indices, and distributed (each
 * rank a disjoint, equal share, padded the way PyTorch's DistributedSampler
 * pads; streaming, a contiguous range of the order, so ranks read disjoint
 * shards). */
#include <string.h>

#include "common/error.h"
#include "ferry/rng.h"
#include "loader/sampler.h"

ferry_status ferry_sampler_plan_init(ferry_sampler_plan *plan, const ferry_loader_config *cfg,
                                     size_t dataset_len)
{
    memset(plan, 0, sizeof *plan);
    plan->kind = cfg->sampler;
    if (plan->kind == FERRY_SAMPLER_DEFAULT)
        plan->kind = cfg->shuffle ? FERRY_SAMPLER_RANDOM : FERRY_SAMPLER_SEQUENTIAL;
    plan->shuffle = cfg->shuffle || plan->kind == FERRY_SAMPLER_RANDOM;
    plan->seed = cfg->seed;
    plan->dataset_len = dataset_len;

    switch (plan->kind) {
    case FERRY_SAMPLER_SEQUENTIAL:
        plan->shuffle = false;
        break;
    case FERRY_SAMPLER_RANDOM:
        break;
    case FERRY_SAMPLER_INDICES:
        if (!cfg->indices || cfg->num_indices == 0)
            return ferry_fail(FERRY_ERR_INVALID_ARG,
                              "sampler: FERRY_SAMPLER_INDICES needs indices and num_indices > 0");
        for (size_t i = 0; i < cfg->num_indices; i++)
            if (cfg->indices[i] >= dataset_len)
                return ferry_fail(FERRY_ERR_INVALID_ARG,
                                  "sampler: indices[%zu] = %zu is out of range for a dataset of %zu samples",
                                  i, cfg->indices[i], dataset_len);
        plan->indices = cfg->indices;
        plan->num_indices = cfg->num_indices;
        break;
    case FERRY_SAMPLER_DISTRIBUTED:
        if (cfg->world_size == 0 || cfg->rank >= cfg->world_size)
            return ferry_fail(FERRY_ERR_INVALID_ARG,
                              "sampler: rank %zu is not in [0, world_size %zu)", cfg->rank,
                              cfg->world_size);
        plan->rank = cfg->rank;
        plan->world_size = cfg->world_size;
        break;
    default:
        return ferry_fail(FERRY_ERR_INVALID_ARG, "sampler: unknown sampler kind %d", (int)cfg->sampler);
    }
    plan->stream_buffer = cfg->stream_shuffle_buffer;
    /* Streaming replaces the full shuffle of the random order (over all ranks
     * for the distributed sampler); a fixed order has nothing to stream. */
    if (plan->stream_buffer && (!plan->shuffle || plan->kind == FERRY_SAMPLER_INDICES))
        return ferry_fail(FERRY_ERR_INVALID_ARG, "sampler: stream_shuffle_buffer %zu needs a "
                          "shuffled order (shuffle = true with the default, random or distributed "
                          "sampler)", plan->stream_buffer);
    return FERRY_OK;
}

void ferry_sampler_plan_stream(ferry_sampler_plan *plan, const size_t *shard_ends,
                               const size_t *shard_seq, size_t nshards, size_t *perm)
{
    plan->shard_ends = shard_ends;
    plan->shard_seq = shard_seq;
    plan->nshards = nshards;
    plan->shard_perm = perm;
}

size_t ferry_sampler_len(const ferry_sampler_plan *plan)
{
    switch (plan->kind) {
    case FERRY_SAMPLER_INDICES:
        return plan->num_indices;
    case FERRY_SAMPLER_DISTRIBUTED:
        /* ceil(len / world): short ranks are padded, as DistributedSampler does. */
        return (plan->dataset_len + plan->world_size - 1) / plan->world_size;
    default:
        return plan->dataset_len;
    }
}

/* Fisher-Yates, keyed by (seed, epoch): the same permutation on every run. */
static void shuffle(size_t *a, size_t n, uint64_t seed, uint64_t epoch)
{
    ferry_rng r;
    ferry_rng_init(&r, seed, FERRY_RNG_SHUFFLE | epoch, 0);
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)ferry_rng_below(&r, i);
        size_t t = a[i - 1];
        a[i - 1] = a[j];
        a[j] = t;
    }
}

/* The streaming order of all n samples: the shards in a seeded order, each
 * one's samples in the order they are stored in it (the "sequential stream";
 * index order when the shard was written in key order, as ferry pack does),
 * so that a shard is read front to back, and a gzip one decompressed once,
 * whatever wrote it; through a shuffle
 * buffer of B entries. The buffer works in place: before output i is chosen,
 * a[i, i + B) holds the buffer (what is left of it, and the next stream
 * sample, already in place at a[i + B - 1]); output i is a seeded pick among
 * them, swapped to a[i]. So a sample comes at most B - 1 places before its
 * place in the stream, and the shards are read nearly front to back. The
 * shard order and the picks draw from two Philox streams of (seed, epoch), so
 * B = 1 shows the stream itself. */
/* The epoch's order of the shards, into perm (nshards entries). */
static void draw_shards(const ferry_sampler_plan *plan, size_t *perm, uint64_t epoch)
{
    for (size_t s = 0; s < plan->nshards; s++)
        perm[s] = s;
    shuffle(perm, plan->nshards, plan->seed, epoch);
}

static void stream_order(const ferry_sampler_plan *plan, size_t *a, uint64_t epoch)
{
    size_t k = plan->nshards, n = plan->dataset_len, B = plan->stream_buffer, at = 0;
    draw_shards(plan, plan->shard_perm, epoch);
    for (size_t s = 0; s < k; s++) {
        size_t sh = plan->shard_perm[s], first = sh ? plan->shard_ends[sh - 1] : 0;
        for (size_t i = first; i < plan->shard_ends[sh]; i++)
            a[at++] = plan->shard_seq ? plan->shard_seq[i] : i; /* NULL: stored in index order */
    }
    ferry_rng r;
    ferry_rng_init(&r, plan->seed, FERRY_RNG_SHUFFLE | epoch, 1);
    for (size_t i = 0; i + 1 < n; i++) {
        size_t w = n - i < B ? n - i : B;
        size_t j = i + (size_t)ferry_rng_below(&r, w), t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}

/* This rank's range of a streaming order split over ranks (n > 0 entries):
 * [lo, lo + count); count 0 when n < world_size (block_share pads it). */
static void block_range(const ferry_sampler_plan *plan, size_t *lo, size_t *count)
{
    size_t n = plan->dataset_len, w = plan->world_size, r = plan->rank;
    size_t q = n / w, m = n % w;
    *lo = r * q + (r < m ? r : m);
    *count = q + (r < m);
}

size_t ferry_sampler_stream_head(const ferry_sampler_plan *plan, uint64_t epoch, size_t *perm)
{
    size_t k = plan->nshards, n = plan->dataset_len, pos = 0;
    if (!plan->stream_buffer || !plan->shard_perm || !plan->shuffle || !n ||
        (plan->kind != FERRY_SAMPLER_RANDOM && plan->kind != FERRY_SAMPLER_DISTRIBUTED))
        return SIZE_MAX;
    if (ferry_sampler_block_split(plan)) { /* where block_share's entries start */
        size_t lo, count;
        block_range(plan, &lo, &count);
        pos = count ? lo : plan->rank % n;
    }
    draw_shards(plan, perm, epoch);
    for (size_t s = 0; s < k; s++) {
        size_t sh = perm[s], first = sh ? plan->shard_ends[sh - 1] : 0;
        size_t len = plan->shard_ends[sh] - first;
        if (pos < len)
            return plan->shard_seq ? plan->shard_seq[first + pos] : first + pos;
        pos -= len;
    }
    return SIZE_MAX;
}

/* The epoch's shuffled order of a[0, n) (a holds 0..n-1): a full shuffle, or
 * the streaming order. */
static void permute(const ferry_sampler_plan *plan, size_t *a, size_t n, uint64_t epoch)
{
    if (plan->stream_buffer && plan->shard_perm)
        stream_order(plan, a, epoch);
    else
        shuffle(a, n, plan->seed, epoch);
}

bool ferry_sampler_block_split(const ferry_sampler_plan *plan)
{
    return plan->kind == FERRY_SAMPLER_DISTRIBUTED && plan->world_size > 1 && plan->shuffle &&
           plan->stream_buffer && plan->shard_perm;
}

/* Streaming over ranks: rank r takes the r-th of world_size contiguous ranges
 * of the streaming order g (n entries), so that it reads its own run of shards
 * front to back and no other rank reads them (but the one or two it shares at
 * the ranges' ends), where an interleaved split would have every rank read
 * every shard. The ranges differ in length by at most one (the first n % W
 * are one longer); a short one is padded with its own first entry, which is
 * in a shard the rank reads anyway, and an empty one (n < W) with entry
 * r % n. So every rank has ceil(n / W) entries (ferry_sampler_len), into out. */
static void block_share(const ferry_sampler_plan *plan, const size_t *g, size_t *out)
{
    size_t n = plan->dataset_len, r = plan->rank;
    if (n == 0)
        return;
    size_t lo, count;
    block_range(plan, &lo, &count);
    size_t per = ferry_sampler_len(plan);
    for (size_t k = 0; k < count; k++)
        out[k] = g[lo + k];
    if (count < per) /* one entry at most: per - count <= 1 */
        out[count] = count ? g[lo] : g[r % n];
}

void ferry_sampler_order(const ferry_sampler_plan *plan, uint64_t epoch, size_t *out,
                         size_t *scratch)
{
    size_t n = plan->dataset_len;
    switch (plan->kind) {
    case FERRY_SAMPLER_SEQUENTIAL:
        for (size_t i = 0; i < n; i++)
            out[i] = i;
        break;
    case FERRY_SAMPLER_RANDOM:
        for (size_t i = 0; i < n; i++)
            out[i] = i;
        permute(plan, out, n, epoch);
        break;
    case FERRY_SAMPLER_INDICES:
        memcpy(out, plan->indices, plan->num_indices * sizeof *out);
        if (plan->shuffle)
            shuffle(out, plan->num_indices, plan->seed, epoch);
        break;
    case FERRY_SAMPLER_DISTRIBUTED: {
        /* Every rank computes the same global order, pads it to a multiple of
         * world_size by repeating it from the start, and takes every world_size-th
         * entry from its rank on; streaming, a contiguous range of it. */
        for (size_t i = 0; i < n; i++)
            scratch[i] = i;
        if (plan->shuffle)
            permute(plan, scratch, n, epoch);
        if (ferry_sampler_block_split(plan)) {
            block_share(plan, scratch, out);
            break;
        }
        size_t per_rank = n ? ferry_sampler_len(plan) : 0; /* an empty dataset has no share */
        for (size_t k = 0; k < per_rank; k++) {
            size_t pos = k * plan->world_size + plan->rank;
            out[k] = scratch[pos % n];
        }
        break;
    }
    default:
        break;
    }
}

/* The epoch's order over all ranks, unpadded: what every rank of a distributed
 * run derives its share from. */
static size_t global_order(const ferry_sampler_plan *plan, uint64_t epoch, size_t *g)
{
    if (plan->kind != FERRY_SAMPLER_DISTRIBUTED) {
        ferry_sampler_order(plan, epoch, g, NULL);
        return ferry_sampler_len(plan);
    }
    for (size_t i = 0; i < plan->dataset_len; i++)
        g[i] = i;
    if (plan->shuffle)
        permute(plan, g, plan->dataset_len, epoch);
    return plan->dataset_len;
}

size_t ferry_sampler_order_rest(const ferry_sampler_plan *plan, uint64_t epoch, uint64_t consumed,
                                size_t *out, size_t *scratch)
{
    if (ferry_sampler_block_split(plan)) {
        /* Only with the world size the epoch ran on (the state's fingerprint
         * refuses another, see state.c): consumed = k entries of every rank's
         * range, the rest is this rank's range from its k-th entry on. */
        size_t per = ferry_sampler_len(plan), k = (size_t)(consumed / plan->world_size);
        if (k >= per)
            return 0;
        ferry_sampler_order(plan, epoch, out, scratch);
        memmove(out, out + k, (per - k) * sizeof *out);
        return per - k;
    }
    size_t world = plan->kind == FERRY_SAMPLER_DISTRIBUTED ? plan->world_size : 1;
    size_t rank = plan->kind == FERRY_SAMPLER_DISTRIBUTED ? plan->rank : 0;
    size_t *g = plan->kind == FERRY_SAMPLER_DISTRIBUTED ? scratch : out;
    size_t len = global_order(plan, epoch, g);
    if (consumed >= len)
        return 0;
    size_t rest = len - (size_t)consumed;
    const size_t *r = g + consumed;
    /* This rank's share of the rest, padded as a fresh epoch of `rest` samples
     * would be: ceil(rest / world), repeating the rest from its start. out may
     * alias g (world 1): k-th entry from index k >= k, read before written. */
    size_t mine = (rest + world - 1) / world;
    for (size_t k = 0; k < mine; k++)
        out[k] = r[(k * world + rank) % rest];
    return mine;
}

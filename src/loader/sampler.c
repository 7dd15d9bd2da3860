/* Samplers: sequential, random, the caller's indices, and distributed (each
 * rank a disjoint, equal share, padded the way PyTorch's DistributedSampler pads). */
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
    return FERRY_OK;
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
        shuffle(out, n, plan->seed, epoch);
        break;
    case FERRY_SAMPLER_INDICES:
        memcpy(out, plan->indices, plan->num_indices * sizeof *out);
        if (plan->shuffle)
            shuffle(out, plan->num_indices, plan->seed, epoch);
        break;
    case FERRY_SAMPLER_DISTRIBUTED: {
        /* Every rank computes the same global order, pads it to a multiple of
         * world_size by repeating it from the start, and takes every world_size-th
         * entry from its rank on. */
        for (size_t i = 0; i < n; i++)
            scratch[i] = i;
        if (plan->shuffle)
            shuffle(scratch, n, plan->seed, epoch);
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
        shuffle(g, plan->dataset_len, plan->seed, epoch);
    return plan->dataset_len;
}

size_t ferry_sampler_order_rest(const ferry_sampler_plan *plan, uint64_t epoch, uint64_t consumed,
                                size_t *out, size_t *scratch)
{
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

/* The loader's state for resuming: what it is, its text form for checkpoint
 * metadata, and restoring it (with the same world size: the epoch's order from
 * the next batch on; with another: the rest of the epoch split again). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/assert.h"
#include "common/error.h"
#include "loader/internal.h"
#include "loader/sampler.h"

#define STATE_MAGIC "ferry-loader-state/1"

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

static uint64_t fnv_u64(uint64_t h, uint64_t v) { return fnv(h, &v, sizeof v); }

/* Where the last two components of a path start ("class/file.png"): the
 * dataset's folder may move between a run and its resumption. */
static size_t tail_start(const char *name)
{
    size_t n = strlen(name), slashes = 0;
    while (n > 0) {
        if (name[n - 1] == '/' && ++slashes == 2)
            return n;
        n--;
    }
    return 0;
}

/* The fields, beyond an image dataset's own two (whose id predates fields:
 * saved states of image datasets stay valid). */
static uint64_t hash_fields(uint64_t h, const ferry_dataset *ds)
{
    const ferry_field *f;
    size_t n;
    if (ferry_dataset_fields(ds, &f, &n) != FERRY_OK ||
        (n == 2 && f[0].role == FERRY_FIELD_IMAGE && strcmp(f[0].name, "image") == 0 &&
         strcmp(f[1].name, "label") == 0))
        return h;
    for (size_t k = 0; k < n; k++) {
        h = fnv(h, f[k].name, strlen(f[k].name) + 1);
        h = fnv_u64(h, (uint64_t)f[k].dtype);
        h = fnv_u64(h, (uint64_t)f[k].role);
        h = fnv_u64(h, f[k].ragged);
        h = fnv_u64(h, f[k].ndim);
        for (size_t d = 0; d < f[k].ndim; d++)
            h = fnv_u64(h, f[k].shape[d]);
        if (f[k].view_of) /* (only then: earlier states stay valid) */
            h = fnv_u64(fnv(h, f[k].view_of, strlen(f[k].view_of) + 1), f[k].view_start);
        if (f[k].batch_dtype != FERRY_DTYPE_F32)
            h = fnv_u64(h, 0x100u + (uint64_t)f[k].batch_dtype);
    }
    return h;
}

uint64_t ferry_loader_dataset_id_(const ferry_dataset *ds)
{
    const ferry_sample_format *f = ferry_dataset_format(ds);
    size_t len = ferry_dataset_len(ds);
    uint64_t h = 0xcbf29ce484222325ull;
    h = fnv_u64(h, len);
    h = fnv_u64(h, f->channels);
    h = fnv_u64(h, f->height);
    h = fnv_u64(h, f->width);
    h = fnv_u64(h, (uint64_t)f->layout);
    h = fnv_u64(h, (uint64_t)f->dtype);
    h = fnv_u64(h, ferry_dataset_class_count(ds));
    h = hash_fields(h, ds);
    /* Names at 64 spread-out indices and the last: a renamed, added or removed
     * file changes them, at no cost worth measuring. */
    for (size_t k = 0; len && k <= 64; k++) {
        size_t i = k == 64 ? len - 1 : (size_t)((uint64_t)len * k / 64);
        const char *name = ferry_dataset_sample_name(ds, i);
        if (name)
            h = fnv(h, name + tail_start(name), strlen(name + tail_start(name)) + 1);
    }
    return h;
}

/* The streaming order's id: the shuffle buffer's size and, when ranks take
 * contiguous ranges of it (ferry_sampler_block_split), the world size, which
 * then decides which samples each rank has read. */
static uint64_t stream_id(size_t buffer, uint64_t ranges_world)
{
    uint64_t h = fnv_u64(0x53545245414d0000ull, (uint64_t)buffer);
    return ranges_world > 1 ? fnv_u64(h, ranges_world) : h;
}

/* The index list's hash; in streaming mode (no list) the shuffle buffer's
 * size, which changes the order as a list would. */
static uint64_t indices_id(const ferry_loader *l)
{
    if (l->plan.stream_buffer)
        return stream_id(l->plan.stream_buffer,
                         ferry_sampler_block_split(&l->plan) ? l->plan.world_size : 1);
    if (l->plan.kind != FERRY_SAMPLER_INDICES)
        return 0;
    return fnv(0xcbf29ce484222325ull, l->plan.indices, l->plan.num_indices * sizeof(size_t));
}

static size_t world_of(const ferry_loader *l)
{
    return l->plan.kind == FERRY_SAMPLER_DISTRIBUTED ? l->plan.world_size : 1;
}

/* The fingerprint and seed this loader would write. */
static void fill_identity(const ferry_loader *l, ferry_loader_state *s)
{
    s->seed = l->cfg.seed;
    s->dataset_len = ferry_dataset_len(l->ds);
    s->dataset_id = ferry_loader_dataset_id_(l->ds);
    s->batch_size = l->cfg.batch_size;
    /* The order over all ranks is what matters: the distributed sampler's is the
     * random (or sequential) sampler's, so a run may move between them when it
     * changes world size (1 process to 2 ranks and back). */
    ferry_sampler k = l->plan.kind;
    if (k == FERRY_SAMPLER_DISTRIBUTED)
        k = l->plan.shuffle ? FERRY_SAMPLER_RANDOM : FERRY_SAMPLER_SEQUENTIAL;
    s->sampler = (uint64_t)k;
    s->shuffle = l->plan.shuffle;
    s->drop_last = l->cfg.drop_last;
    s->world_size = world_of(l);
    s->indices_id = indices_id(l);
}

ferry_status ferry_loader_state_get(ferry_loader *l, ferry_loader_state *out)
{
    if (!l || !out)
        return FERRY_ARG_ERROR("NULL argument");
    memset(out, 0, sizeof *out);
    fill_identity(l, out);
    ferry_mutex_lock(&l->lock);
    /* A state says "the epoch's first k batches are done". Out of order, a
     * batch before the k-th may still be loading: a state taken now would
     * skip it on restore (and deliver a later one twice), so it is refused. */
    for (size_t k = 0; l->cfg.out_of_order && k < l->nslots; k++) {
        const ferry_slot *s = &l->slots[k];
        if ((s->state == SLOT_FILLING || s->state == SLOT_READY) && s->batch < l->delivered) {
            size_t b = s->batch;
            ferry_mutex_unlock(&l->lock);
            memset(out, 0, sizeof *out);
            return ferry_fail(FERRY_ERR_BAD_STATE,
                              "loader state: batch %zu of the epoch is not delivered yet, while "
                              "%zu batches are (out_of_order): no state resumes this point; "
                              "take it when the batches so far are the epoch's first ones, as "
                              "at an epoch's start or end", b, l->delivered);
        }
    }
    out->epoch = l->epoch;
    out->batches = l->delivered;
    out->done = l->delivered == l->num_batches;
    out->resumed_from = l->resumed_from;
    /* Ranks deliver in lockstep: after k batches each, the first k * batch entries
     * of every rank's share are done, which interleave into the global order. */
    uint64_t mine = (uint64_t)l->delivered * l->batch;
    if (mine > l->epoch_len)
        mine = l->epoch_len;
    out->position = l->resumed_from + mine * world_of(l);
    ferry_mutex_unlock(&l->lock);
    return FERRY_OK;
}

/* FERRY_OK when the state's fingerprint is this loader's; otherwise the first
 * field that differs, in words: numbers where they mean something to the
 * user, never the fingerprints' raw hashes. The seed comes first: a split or
 * shuffle made with another seed changes the dataset's fingerprint too, and
 * "dataset" would then blame the wrong thing. */
static ferry_status check_identity(const ferry_loader *l, const ferry_loader_state *st)
{
    ferry_loader_state me;
    memset(&me, 0, sizeof me);
    fill_identity(l, &me);
    /* Streaming over ranks, each rank read a range of the order of its own:
     * what is left is not a prefix another world size could split again. */
    bool streamed_here = l->plan.stream_buffer && st->world_size != me.world_size &&
                         st->seed == me.seed &&
                         st->indices_id == stream_id(l->plan.stream_buffer, st->world_size);
    if (streamed_here && st->done)
        me.indices_id = st->indices_id; /* an ended epoch: the next starts on any world size */
    else if (streamed_here)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "loader state does not fit this loader: a "
                          "streaming epoch (stream_shuffle_buffer) over ranks resumes only on the "
                          "world size it was saved with (%" PRIu64 " in the state, %" PRIu64
                          " here): each rank streams its own range of the shards; resume at the "
                          "epoch's end (a state saved after its last batch) to change it",
                          st->world_size, me.world_size);
    static const char *const samplers[] = {"default", "sequential", "random", "indices", "distributed"};
    static const char *const yes_no[] = {"off", "on"};
    struct { const char *name; uint64_t saved, here; const char *const *words; size_t nwords;
             const char *hash_why; } f[] = {
        {"the seed", st->seed, me.seed, NULL, 0, NULL},
        {"the dataset's length", st->dataset_len, me.dataset_len, NULL, 0, NULL},
        {"the dataset", st->dataset_id, me.dataset_id, NULL, 0,
         "its format, classes, file names, or the split or subset taken of it"},
        /* Another world size resumes by sample position: each rank's batch may
         * change with it (the same global batch over fewer or more ranks). */
        {"the batch size", st->batch_size, st->world_size == me.world_size ? me.batch_size : st->batch_size,
         NULL, 0, NULL},
        {"the sampler", st->sampler, me.sampler, samplers, 5, NULL},
        {"shuffle", st->shuffle, me.shuffle, yes_no, 2, NULL},
        {"drop_last", st->drop_last, me.drop_last, yes_no, 2, NULL},
        {"the index list or the streaming shuffle buffer (stream_shuffle_buffer)", st->indices_id,
         me.indices_id, NULL, 0, "another list of indices, or another buffer size"},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        if (f[i].saved == f[i].here)
            continue;
        if (f[i].hash_why)
            return ferry_fail(FERRY_ERR_INVALID_ARG, "loader state does not fit this loader: %s "
                              "differs from the one it was saved with (%s)", f[i].name, f[i].hash_why);
        if (f[i].words && f[i].saved < f[i].nwords && f[i].here < f[i].nwords)
            return ferry_fail(FERRY_ERR_INVALID_ARG, "loader state does not fit this loader: %s is %s "
                              "in the state, %s here", f[i].name, f[i].words[f[i].saved],
                              f[i].words[f[i].here]);
        return ferry_fail(FERRY_ERR_INVALID_ARG,
                          "loader state does not fit this loader: %s is %" PRIu64
                          " in the state, %" PRIu64 " here",
                          f[i].name, f[i].saved, f[i].here);
    }
    if (st->world_size == 0)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "loader state: world_size is 0");
    return FERRY_OK;
}

/* The checks of restore that need no rewrite of the order: a state that
 * passes them and check_identity restores (the resumed-epoch bound aside). */
static ferry_status check_bounds(const ferry_loader *l, const ferry_loader_state *st)
{
    if (st->epoch >= FERRY_LOADER_EPOCH_LIMIT_)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "loader state: epoch %" PRIu64 " is past 2^56 - 1, "
                          "the last the random streams tell apart", st->epoch);
    if (!st->done && st->world_size == world_of(l) && st->resumed_from == 0 &&
        st->batches > l->full_num_batches)
        return ferry_fail(FERRY_ERR_INVALID_ARG,
                          "loader state: %" PRIu64 " batches delivered, but an epoch has %zu",
                          st->batches, l->full_num_batches);
    return FERRY_OK;
}

ferry_status ferry_loader_state_check(const ferry_loader *l, const ferry_loader_state *st)
{
    if (!l || !st)
        return FERRY_ARG_ERROR("NULL argument");
    ferry_status s = check_identity(l, st);
    return s != FERRY_OK ? s : check_bounds(l, st);
}

ferry_status ferry_loader_restore(ferry_loader *l, const ferry_loader_state *st)
{
    if (!l || !st)
        return FERRY_ARG_ERROR("NULL argument");
    ferry_status s = ferry_loader_state_check(l, st);
    if (s != FERRY_OK)
        return s;
    if (st->done)
        return ferry_loader_restart_(l, st->epoch, l->full_num_batches, 0, false);
    if (st->world_size == world_of(l) && st->resumed_from == 0)
        return ferry_loader_restart_(l, st->epoch, (size_t)st->batches, 0, false);
    /* Another world size: the rest of the global order from the state's
     * position, split over this loader's world. The same world size in an
     * epoch that was itself resumed from another: the order that resume made
     * (the rest from its resumed_from, split the same way, so padding and
     * SKIP's replacements are the same), at the state's batch. First an epoch
     * with no batch left, so that no worker reads l->order while it is
     * rewritten. */
    bool same = st->world_size == world_of(l);
    uint64_t from = same ? st->resumed_from : st->position;
    s = ferry_loader_restart_(l, st->epoch, l->full_num_batches, 0, false); /* an empty epoch */
    if (s != FERRY_OK)
        return s;
    ferry_mutex_lock(&l->lock);
    size_t rest = ferry_sampler_order_rest(&l->plan, st->epoch, from, l->order, l->order_scratch);
    ferry_mutex_unlock(&l->lock);
    size_t rest_batches = rest / l->batch + (!l->cfg.drop_last && rest % l->batch != 0);
    if (same && st->batches > rest_batches)
        return ferry_fail(FERRY_ERR_INVALID_ARG,
                          "loader state: %" PRIu64 " batches delivered, but its resumed epoch has %zu",
                          st->batches, rest_batches);
    if (rest % l->batch && rest % l->batch != l->full_epoch_len % l->batch &&
        (s = ferry_loader_views_for_rest_(l, rest % l->batch)) != FERRY_OK)
        return s;
    s = ferry_loader_restart_(l, st->epoch, same ? (size_t)st->batches : 0, rest, true);
    ferry_mutex_lock(&l->lock);
    l->resumed_from = from;
    ferry_mutex_unlock(&l->lock);
    return s;
}

ferry_status ferry_loader_state_format(const ferry_loader_state *st, char *buf, size_t size)
{
    if (!st || !buf)
        return FERRY_ARG_ERROR("NULL argument");
    int n = snprintf(buf, size,
                     STATE_MAGIC " seed=%" PRIu64 " epoch=%" PRIu64 " batches=%" PRIu64
                     " position=%" PRIu64 " resumed_from=%" PRIu64 " done=%d dataset_len=%" PRIu64
                     " dataset_id=%016" PRIx64 " batch_size=%" PRIu64 " sampler=%" PRIu64
                     " shuffle=%d drop_last=%d world_size=%" PRIu64 " indices_id=%016" PRIx64,
                     st->seed, st->epoch, st->batches, st->position, st->resumed_from,
                     (int)st->done, st->dataset_len, st->dataset_id, st->batch_size, st->sampler,
                     (int)st->shuffle, (int)st->drop_last, st->world_size, st->indices_id);
    if (n < 0 || (size_t)n >= size)
        return FERRY_ARG_ERROR("buffer of %zu bytes is too small", size);
    return FERRY_OK;
}

/* "key=value" at *p: the value as a number in base (10 or 16); advances *p. */
static bool take(const char **p, const char *key, int base, uint64_t *v)
{
    size_t n = strlen(key);
    if (strncmp(*p, key, n) != 0 || (*p)[n] != '=')
        return false;
    const char *q = *p + n + 1;
    char *end = NULL;
    if (*q < '0' || *q > (base == 16 ? 'f' : '9'))
        return false;
    *v = strtoull(q, &end, base);
    if (end == q || (*end != ' ' && *end != '\0'))
        return false;
    *p = *end == ' ' ? end + 1 : end;
    return true;
}

ferry_status ferry_loader_state_parse(const char *text, ferry_loader_state *out)
{
    if (!text || !out)
        return FERRY_ARG_ERROR("NULL argument");
    memset(out, 0, sizeof *out);
    const char *p = text;
    size_t m = strlen(STATE_MAGIC);
    if (strncmp(p, STATE_MAGIC, m) != 0 || p[m] != ' ')
        return ferry_fail(FERRY_ERR_FORMAT, "loader state: does not start with \"" STATE_MAGIC "\": \"%.60s\"",
                          text);
    p += m + 1;
    uint64_t done = 0, shuffle = 0, drop_last = 0;
    struct { const char *key; int base; uint64_t *v; } f[] = {
        {"seed", 10, &out->seed}, {"epoch", 10, &out->epoch}, {"batches", 10, &out->batches},
        {"position", 10, &out->position}, {"resumed_from", 10, &out->resumed_from},
        {"done", 10, &done}, {"dataset_len", 10, &out->dataset_len},
        {"dataset_id", 16, &out->dataset_id}, {"batch_size", 10, &out->batch_size},
        {"sampler", 10, &out->sampler}, {"shuffle", 10, &shuffle}, {"drop_last", 10, &drop_last},
        {"world_size", 10, &out->world_size}, {"indices_id", 16, &out->indices_id},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (!take(&p, f[i].key, f[i].base, f[i].v))
            return ferry_fail(FERRY_ERR_FORMAT, "loader state: expected %s=<number> at \"%.40s\"",
                              f[i].key, p);
    if (*p || done > 1 || shuffle > 1 || drop_last > 1)
        return ferry_fail(FERRY_ERR_FORMAT, "loader state: unexpected \"%.40s\"", p);
    out->done = done;
    out->shuffle = shuffle;
    out->drop_last = drop_last;
    return FERRY_OK;
}

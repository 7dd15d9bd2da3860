/* Streaming mode (stream_shuffle_buffer) over tar shards: the same batches for
 * any worker count, each equal to the dataset's own samples; every sample once
 * an epoch, in an order that changes with the epoch and the seed; with a
 * buffer of 1 the order is the shards in a seeded order, each shard's samples
 * in index order (the stream); with a buffer of B no sample comes more than
 * B - 1 places before its place in that stream; two ranks split the
 * one-process order into halves; wrong uses fail by name. */
#include <stdlib.h>

#include "harness.h"

/* ---- the dataset: 6 shards of 5, 9, 1, 0, 7 and 8 samples ---- */
enum { NSHARDS = 6, N = 30, IW = 3, IH = 2 };
static const size_t shard_len[NSHARDS] = {5, 9, 1, 0, 7, 8};
static ferry_dataset *ds;

/* Sample i: a small gray PNG made from i, labelled i % 7. */
static void add_sample(ft_tar *t, size_t shard, size_t i)
{
    uint8_t px[IW * IH];
    for (size_t j = 0; j < sizeof px; j++)
        px[j] = (uint8_t)(i * 29 + j * 13);
    const char *p = ft_tmp("stream/tmp.png");
    ft_write_file(p, "", 0);
    ASSERT_OK(ferry_png_save(p, px, IW, IH, 1));
    size_t n;
    uint8_t *bytes = ft_read_file(p, &n);
    char name[64], lab[16];
    snprintf(name, sizeof name, "s%zu_%03zu.png", shard, i);
    ft_tar_file(t, name, bytes, n);
    free(bytes);
    snprintf(name, sizeof name, "s%zu_%03zu.cls", shard, i);
    snprintf(lab, sizeof lab, "%zu", i % 7);
    ft_tar_file(t, name, lab, strlen(lab));
}

static ferry_dataset *shards(void)
{
    if (ds)
        return ds;
    size_t i = 0;
    for (size_t s = 0; s < NSHARDS; s++) {
        ft_tar t = {0};
        for (size_t k = 0; k < shard_len[s]; k++, i++)
            add_sample(&t, s, i);
        static const uint8_t end[1024];
        ft_tar_put(&t, end, sizeof end);
        char rel[64];
        snprintf(rel, sizeof rel, "stream/shards/%02zu.tar", s);
        ft_write_file(ft_tmp(rel), t.d, t.n);
        free(t.d);
    }
    const char *dir = ft_tmp("stream/shards");
    ASSERT_OK(ferry_dataset_shards(&dir, 1, NULL, &ds));
    ASSERT_EQ_SIZE(ferry_dataset_len(ds), N);
    return ds;
}

/* Which shard sample i belongs to. */
static size_t shard_of(size_t i)
{
    for (size_t s = 0, end = 0; s < NSHARDS; s++)
        if (i < (end += shard_len[s]))
            return s;
    ASSERT_MSG(0, "sample %zu is past the shards", i);
    return 0;
}

typedef struct run_opts {
    uint64_t seed, epoch;
    size_t buffer, workers, rank, world;
} run_opts;

static ferry_loader_config stream_config(const run_opts *o)
{
    ferry_loader_config c = ferry_loader_config_default();
    c.dataset = shards();
    c.batch_size = 4;
    c.shuffle = true;
    c.seed = o->seed;
    c.num_workers = o->workers ? o->workers : FERRY_LOADER_NO_WORKERS;
    c.device = ferry_cpu();
    c.pin_memory = FERRY_PIN_MEMORY_OFF;
    c.out_dtype = FERRY_DTYPE_U8;
    c.stream_shuffle_buffer = o->buffer;
    if (o->world) {
        c.sampler = FERRY_SAMPLER_DISTRIBUTED;
        c.rank = o->rank;
        c.world_size = o->world;
    }
    return c;
}

/* One epoch: the dataset indices in delivery order into idx (returns their
 * count), each batch checked against ferry_dataset_get of its indices (the
 * reference), and a digest of every image and label byte. */
static size_t run_epoch(const run_opts *o, size_t *idx, uint64_t *digest)
{
    ferry_loader_config c = stream_config(o);
    ferry_loader *l;
    ASSERT_OK(ferry_loader_create(&c, &l));
    if (o->epoch)
        ASSERT_OK(ferry_loader_reset(l, o->epoch));
    uint64_t h = 1469598103934665603ull;
    size_t n = 0;
    ferry_batch b;
    ferry_status st;
    while ((st = ferry_loader_next(l, NULL, &b)) == FERRY_OK) {
        const uint8_t *img = ferry_tensor_data(b.images);
        const int64_t *lab = ferry_tensor_data(b.labels);
        for (size_t i = 0; i < b.size; i++) {
            uint8_t want[IW * IH];
            int64_t wl = -1;
            ASSERT_OK(ferry_dataset_get(c.dataset, b.indices[i], want, sizeof want, NULL, &wl));
            ASSERT_MEM_EQ(img + i * IW * IH, want, sizeof want);
            ASSERT_EQ_INT(lab[i], wl);
            for (size_t j = 0; j < IW * IH; j++)
                h = (h ^ img[i * IW * IH + j]) * 1099511628211ull;
            h = (h ^ (uint64_t)lab[i]) * 1099511628211ull;
            idx[n++] = b.indices[i];
        }
    }
    ASSERT_STATUS(st, FERRY_END);
    ferry_loader_stats s;
    ASSERT_OK(ferry_loader_stats_get(l, &s));
    ASSERT_EQ_INT(s.allocs_after_warmup, 0);
    ferry_loader_destroy(l);
    if (digest)
        *digest = h;
    return n;
}

static void assert_permutation(const size_t *idx, size_t n)
{
    ASSERT_EQ_SIZE(n, N);
    bool seen[N] = {0};
    for (size_t i = 0; i < n; i++) {
        ASSERT_MSG(idx[i] < N && !seen[idx[i]], "sample %zu twice or out of range", idx[i]);
        seen[idx[i]] = true;
    }
}

TEST(the_same_batches_for_any_worker_count)
{
    size_t want[N], got[N];
    uint64_t dwant, dgot;
    run_opts o = {.seed = 5, .epoch = 2, .buffer = 4};
    ASSERT_EQ_SIZE(run_epoch(&o, want, &dwant), N);
    assert_permutation(want, N);
    size_t counts[] = {1, 2, 4};
    for (size_t k = 0; k < 3; k++) {
        o.workers = counts[k];
        ASSERT_EQ_SIZE(run_epoch(&o, got, &dgot), N);
        ASSERT_MSG(!memcmp(got, want, sizeof want) && dgot == dwant,
                   "%zu workers give another order or other bytes than 0 workers", counts[k]);
    }
}

TEST(every_sample_once_in_an_order_of_the_seed_and_epoch)
{
    size_t a[N], b[N], c[N];
    run_opts o = {.seed = 1, .epoch = 0, .buffer = 3, .workers = 2};
    run_epoch(&o, a, NULL);
    assert_permutation(a, N);
    o.epoch = 1;
    run_epoch(&o, b, NULL);
    assert_permutation(b, N);
    o.epoch = 0;
    o.seed = 2;
    run_epoch(&o, c, NULL);
    assert_permutation(c, N);
    ASSERT_MSG(memcmp(a, b, sizeof a) != 0, "epochs 0 and 1 have the same order");
    ASSERT_MSG(memcmp(a, c, sizeof a) != 0, "seeds 1 and 2 have the same order");
    /* The same (seed, epoch) again: the same order. */
    o.seed = 1;
    run_epoch(&o, c, NULL);
    ASSERT_MEM_EQ(a, c, sizeof a);
}

/* A buffer of 1 emits the stream itself: whole shards one after another, each
 * in index order; the shards' order changes with the epoch. Writes the shard
 * order into order[] and returns how many non-empty shards it has. */
static size_t assert_stream(const size_t *idx, size_t *order)
{
    size_t runs = 0;
    for (size_t i = 0; i < N; i++) {
        size_t s = shard_of(idx[i]);
        if (i && shard_of(idx[i - 1]) == s) {
            ASSERT_MSG(idx[i] == idx[i - 1] + 1, "inside shard %zu, %zu follows %zu", s, idx[i],
                       idx[i - 1]);
            continue;
        }
        for (size_t r = 0; r < runs; r++)
            ASSERT_MSG(order[r] != s, "shard %zu is read twice", s);
        order[runs++] = s;
    }
    ASSERT_EQ_SIZE(runs, NSHARDS - 1); /* every shard but the empty one */
    return runs;
}

TEST(a_buffer_of_one_reads_whole_shards_in_a_seeded_order)
{
    size_t idx[N], order[4][NSHARDS];
    bool differ = false;
    for (uint64_t e = 0; e < 4; e++) {
        run_opts o = {.seed = 7, .epoch = e, .buffer = 1, .workers = 2};
        run_epoch(&o, idx, NULL);
        assert_permutation(idx, N);
        assert_stream(idx, order[e]);
        differ |= memcmp(order[e], order[0], (NSHARDS - 1) * sizeof(size_t)) != 0;
    }
    ASSERT_MSG(differ, "four epochs read the shards in one order");
}

/* The property of the shuffle buffer: a sample's place in the output is at
 * least its place in the stream (buffer 1, same seed and epoch) minus B - 1,
 * and a buffer of more than 1 does shuffle. */
TEST(no_sample_comes_more_than_the_buffer_before_its_place_in_the_stream)
{
    size_t stream[N], idx[N], at[N], order[NSHARDS];
    size_t sizes[] = {2, 4, 8, 64};
    for (uint64_t e = 0; e < 3; e++) {
        run_opts o = {.seed = 11, .epoch = e, .buffer = 1};
        run_epoch(&o, stream, NULL);
        assert_stream(stream, order);
        for (size_t i = 0; i < N; i++)
            at[stream[i]] = i;
        for (size_t k = 0; k < 4; k++) {
            o.buffer = sizes[k];
            o.workers = 2;
            run_epoch(&o, idx, NULL);
            assert_permutation(idx, N);
            size_t early = 0;
            for (size_t i = 0; i < N; i++) {
                ASSERT_MSG(i + sizes[k] - 1 >= at[idx[i]], "buffer %zu: sample %zu is at %zu, "
                           "its place in the stream is %zu", sizes[k], idx[i], i, at[idx[i]]);
                early += i < at[idx[i]];
            }
            ASSERT_MSG(early > 0, "buffer %zu, epoch %llu: the stream, unshuffled", sizes[k],
                       (unsigned long long)e);
        }
    }
}

TEST(two_ranks_split_the_one_process_order)
{
    size_t one[N], r0[N], r1[N];
    run_opts o = {.seed = 3, .epoch = 1, .buffer = 5, .workers = 2};
    run_epoch(&o, one, NULL);
    o.world = 2;
    o.rank = 0;
    ASSERT_EQ_SIZE(run_epoch(&o, r0, NULL), N / 2);
    o.rank = 1;
    o.workers = 1;
    ASSERT_EQ_SIZE(run_epoch(&o, r1, NULL), N / 2);
    /* Rank r takes the r-th half of the global order, so that it streams its
     * own shards: together they cover the dataset, each sample once. */
    for (size_t k = 0; k < N / 2; k++) {
        ASSERT_EQ_SIZE(r0[k], one[k]);
        ASSERT_EQ_SIZE(r1[k], one[N / 2 + k]);
    }
    /* World size 1 through the distributed sampler is the random sampler's. */
    o.world = 1;
    o.rank = 0;
    ASSERT_EQ_SIZE(run_epoch(&o, r0, NULL), N);
    ASSERT_MEM_EQ(r0, one, sizeof one);
}

TEST(a_saved_state_resumes_the_streaming_order_and_fits_only_it)
{
    size_t whole[N] = {0};
    run_opts o = {.seed = 4, .epoch = 0, .buffer = 6, .workers = 2};
    run_epoch(&o, whole, NULL);
    ferry_loader_config c = stream_config(&o);
    ferry_loader *l, *m;
    ferry_batch b;
    ASSERT_OK(ferry_loader_create(&c, &l));
    ASSERT_OK(ferry_loader_next(l, NULL, &b));
    ASSERT_OK(ferry_loader_next(l, NULL, &b));
    ferry_loader_state s;
    ASSERT_OK(ferry_loader_state_get(l, &s));
    ferry_loader_destroy(l);
    ASSERT_OK(ferry_loader_create(&c, &m));
    ASSERT_OK(ferry_loader_restore(m, &s));
    size_t at = 8, rest[N] = {0};
    while (ferry_loader_next(m, NULL, &b) == FERRY_OK)
        for (size_t i = 0; i < b.size; i++, at++)
            if (at < N)
                rest[at] = b.indices[i];
    ASSERT_EQ_SIZE(at, N);
    ASSERT_MEM_EQ(rest + 8, whole + 8, (N - 8) * sizeof(size_t));
    ferry_loader_destroy(m);
    /* Another buffer size, or none, is another order: the state does not fit. */
    c.stream_shuffle_buffer = 7;
    ASSERT_OK(ferry_loader_create(&c, &m));
    ASSERT_STATUS(ferry_loader_restore(m, &s), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "stream_shuffle_buffer");
    ferry_loader_destroy(m);
    c.stream_shuffle_buffer = 0;
    ASSERT_OK(ferry_loader_create(&c, &m));
    ASSERT_STATUS(ferry_loader_restore(m, &s), FERRY_ERR_INVALID_ARG);
    ferry_loader_destroy(m);
}

TEST(streaming_without_shards_or_without_shuffle_fails_by_name)
{
    run_opts o = {.buffer = 4};
    ferry_loader_config c = stream_config(&o);
    ferry_loader *l = NULL;
    c.shuffle = false;
    ASSERT_STATUS(ferry_loader_create(&c, &l), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "stream_shuffle_buffer 4 needs a shuffled order");
    c.shuffle = true;
    c.sampler = FERRY_SAMPLER_SEQUENTIAL;
    ASSERT_STATUS(ferry_loader_create(&c, &l), FERRY_ERR_INVALID_ARG);
    /* A dataset without shards. */
    uint8_t px[IW * IH] = {0};
    ferry_sample_format f = {.channels = 1, .height = IH, .width = IW, .dtype = FERRY_DTYPE_U8};
    ferry_dataset *mem = NULL;
    ASSERT_OK(ferry_dataset_memory(px, &f, 1, NULL, &mem));
    c = stream_config(&o);
    c.dataset = mem;
    ASSERT_STATUS(ferry_loader_create(&c, &l), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "needs a dataset with shards");
    ASSERT(l == NULL);
    ferry_dataset_release(mem);
}

/* ---- streaming through views and custom datasets (their shard capability) ---- */

/* Which sample of the shards an image is: its first pixel is (i * 29) mod 256,
 * distinct for the N samples. */
static size_t sample_of(const uint8_t *img)
{
    for (size_t i = 0; i < N; i++)
        if ((uint8_t)(i * 29) == img[0])
            return i;
    ASSERT_MSG(0, "an image that is no sample of the shards (first pixel %u)", img[0]);
    return 0;
}

/* One epoch of ds in streaming mode: each delivered sample as `id` makes it. */
static size_t stream_ids(ferry_dataset *ds, size_t buffer, size_t workers, size_t (*id)(const uint8_t *),
                         size_t *out, size_t cap)
{
    run_opts o = {.seed = 3, .buffer = buffer, .workers = workers};
    ferry_loader_config c = stream_config(&o);
    c.dataset = ds;
    ferry_loader *l = NULL;
    ASSERT_OK(ferry_loader_create(&c, &l));
    ferry_batch b;
    size_t n = 0, bytes = ferry_dataset_sample_bytes(ds);
    while (ferry_loader_next(l, NULL, &b) == FERRY_OK)
        for (size_t i = 0; i < b.size; i++, n++) {
            ASSERT(n < cap);
            out[n] = id((const uint8_t *)ferry_tensor_data(b.images) + i * bytes);
        }
    ferry_loader_destroy(l);
    return n;
}

/* With a buffer of 1 the order is the stream itself: each shard (shard_of)
 * one run, its samples in stored order (ascending here). */
static void assert_shard_runs(const char *what, const size_t *ids, size_t n, size_t (*shard)(size_t))
{
    bool done[64] = {false};
    for (size_t i = 0; i < n; i++) {
        size_t s = shard(ids[i]);
        ASSERT(s < 64);
        if (i && shard(ids[i - 1]) == s) {
            ASSERT_MSG(ids[i - 1] < ids[i], "%s: shard %zu's samples out of stored order", what, s);
            continue;
        }
        ASSERT_MSG(!done[s], "%s: shard %zu read in two runs", what, s);
        done[s] = true;
    }
}

TEST(views_of_shards_stream_shard_by_shard)
{
    /* An index view: every sample but 3 and 17, in reverse. */
    size_t idx[N], m = 0;
    for (size_t i = N; i-- > 0;)
        if (i != 3 && i != 17)
            idx[m++] = i;
    ferry_dataset *iv = NULL, *train = NULL, *val = NULL;
    ASSERT_OK(ferry_dataset_indices(shards(), idx, m, &iv));
    ASSERT_OK(ferry_dataset_split(shards(), 0.3, 5, &train, &val));
    ferry_dataset *views[2] = {iv, train};
    for (int v = 0; v < 2; v++) {
        size_t len = ferry_dataset_len(views[v]), ids[N], again[N];
        size_t n = stream_ids(views[v], 1, 0, sample_of, ids, N);
        ASSERT_EQ_SIZE(n, len);
        assert_shard_runs(v ? "split" : "index view", ids, n, shard_of);
        /* Every sample of the view once, with a real buffer too, for any workers. */
        n = stream_ids(views[v], 4, 2, sample_of, ids, N);
        ASSERT_EQ_SIZE(n, len);
        ASSERT_EQ_SIZE(stream_ids(views[v], 4, 0, sample_of, again, N), len);
        ASSERT_MEM_EQ(ids, again, n * sizeof *ids);
        bool seen[N] = {false};
        for (size_t i = 0; i < n; i++) {
            ASSERT_MSG(!seen[ids[i]], "sample %zu delivered twice", ids[i]);
            seen[ids[i]] = true;
        }
        if (v == 0)
            ASSERT(!seen[3] && !seen[17]);
    }
    ferry_dataset_release(iv);
    ferry_dataset_release(train);
    ferry_dataset_release(val);
}

/* A custom dataset of 12 samples in shards ending at 4, 4 (an empty one), 9
 * and 12: sample i is IW x IH pixels of value i. */
static const size_t custom_ends[4] = {4, 4, 9, 12};

static ferry_status custom_sample(void *user, size_t index, void *dst, size_t dst_bytes,
                                  const ferry_sample_ctx *ctx, int64_t *label)
{
    (void)user;
    (void)ctx;
    memset(dst, (int)index, dst_bytes);
    *label = (int64_t)(index % 3);
    return FERRY_OK;
}

static size_t custom_id(const uint8_t *img) { return img[0]; }

static size_t custom_shard(size_t i)
{
    size_t s = 0;
    while (i >= custom_ends[s])
        s++;
    return s;
}

TEST(a_custom_dataset_that_declares_shards_streams)
{
    ferry_dataset_callbacks cb = {.len = 12, .format = {.channels = 1, .height = IH, .width = IW,
                                                        .dtype = FERRY_DTYPE_U8},
                                  .num_classes = 3, .get = custom_sample, .shard_ends = custom_ends,
                                  .num_shards = 4};
    ferry_dataset *ds = NULL;
    ASSERT_OK(ferry_dataset_custom(&cb, NULL, &ds));
    size_t ids[12], n = stream_ids(ds, 1, 2, custom_id, ids, 12);
    ASSERT_EQ_SIZE(n, 12);
    assert_shard_runs("custom", ids, n, custom_shard);
    ferry_dataset_release(ds);
    /* Bad layouts are refused by name. */
    static const size_t decreasing[3] = {5, 4, 12}, short_[2] = {4, 11};
    ferry_dataset *bad = NULL;
    cb.shard_ends = decreasing;
    cb.num_shards = 3;
    ASSERT_STATUS(ferry_dataset_custom(&cb, NULL, &bad), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "shard_ends[1]");
    cb.shard_ends = short_;
    cb.num_shards = 2;
    ASSERT_STATUS(ferry_dataset_custom(&cb, NULL, &bad), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "shard_ends[1]");
    cb.shard_ends = NULL;
    ASSERT_STATUS(ferry_dataset_custom(&cb, NULL, &bad), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "num_shards");
    ASSERT(bad == NULL);
}

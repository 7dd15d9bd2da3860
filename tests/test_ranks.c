/* Every rank the same number of batches, whatever the shards: 3 shards of 1, 7
 * and 50 samples over 1, 2, 4 and 8 ranks (fewer shards than ranks included),
 * in random and streaming order, with and without drop_last. Each rank's
 * batches hold the dataset's own samples (checked against ferry_dataset_get);
 * together the ranks cover the dataset and see no sample twice but the
 * padding (ceil(N / W) * W - N repeats); streaming, each rank's samples are a
 * contiguous range of the one-process order, so each shard is read by the
 * ranks whose range crosses it (at most S + W - 1 shard reads over all ranks
 * with a buffer of 1, against S * W for an interleaved split). */
#include <stdlib.h>

#include "harness.h"

enum { NSHARDS = 3, N = 58, IW = 2, IH = 2, BATCH = 4 };
static const size_t shard_len[NSHARDS] = {1, 7, 50};
static ferry_dataset *ds;

static void add_sample(ft_tar *t, size_t i)
{
    uint8_t px[IW * IH];
    for (size_t j = 0; j < sizeof px; j++)
        px[j] = (uint8_t)(i * 37 + j * 11 + 1);
    const char *p = ft_tmp("ranks/tmp.png");
    ft_write_file(p, "", 0);
    ASSERT_OK(ferry_png_save(p, px, IW, IH, 1));
    size_t n;
    uint8_t *bytes = ft_read_file(p, &n);
    char name[64], lab[16];
    snprintf(name, sizeof name, "k%03zu.png", i);
    ft_tar_file(t, name, bytes, n);
    free(bytes);
    snprintf(name, sizeof name, "k%03zu.cls", i);
    snprintf(lab, sizeof lab, "%zu", i % 3);
    ft_tar_file(t, name, lab, strlen(lab));
}

static ferry_dataset *shards(void)
{
    if (ds)
        return ds;
    size_t i = 0;
    for (size_t s = 0; s < NSHARDS; s++) {
        ft_tar t = {0};
        for (size_t k = 0; k < shard_len[s]; k++)
            add_sample(&t, i++);
        ft_tar_end(&t);
        char rel[64];
        snprintf(rel, sizeof rel, "ranks/shards/%zu.tar", s);
        ft_tar_save(&t, rel);
    }
    const char *dir = ft_tmp("ranks/shards");
    ASSERT_OK(ferry_dataset_shards(&dir, 1, NULL, &ds));
    ASSERT_EQ_SIZE(ferry_dataset_len(ds), N);
    return ds;
}

/* Sample i's shard: the shards hold 0, 1-7 and 8-57 (key order is index order). */
static size_t shard_of(size_t i) { return i < 1 ? 0 : i < 8 ? 1 : 2; }

typedef struct opts {
    size_t world, rank, buffer, workers;
    bool drop_last;
} opts;

/* One epoch of one rank: its indices into idx (returns their count), its
 * batch count into *batches, each sample checked against the dataset's. */
static size_t run_rank(const opts *o, size_t *idx, size_t *batches)
{
    ferry_loader_config c = ferry_loader_config_default();
    c.dataset = shards();
    c.batch_size = BATCH;
    c.shuffle = true;
    c.seed = 11;
    c.drop_last = o->drop_last;
    c.num_workers = o->workers ? o->workers : FERRY_LOADER_NO_WORKERS;
    c.device = ferry_cpu();
    c.pin_memory = FERRY_PIN_MEMORY_OFF;
    c.out_dtype = FERRY_DTYPE_U8;
    c.stream_shuffle_buffer = o->buffer;
    c.sampler = FERRY_SAMPLER_DISTRIBUTED;
    c.rank = o->rank;
    c.world_size = o->world;
    ferry_loader *l;
    ASSERT_OK(ferry_loader_create(&c, &l));
    size_t n = 0, nb = 0;
    ferry_batch b;
    ferry_status st;
    while ((st = ferry_loader_next(l, NULL, &b)) == FERRY_OK) {
        const uint8_t *img = ferry_tensor_data(b.images);
        const int64_t *lab = ferry_tensor_data(b.labels);
        ASSERT_MSG(b.size == BATCH || (!o->drop_last && b.size < BATCH),
                   "rank %zu: a batch of %zu", o->rank, b.size);
        for (size_t i = 0; i < b.size; i++) {
            uint8_t want[IW * IH];
            int64_t wl = -1;
            ASSERT_OK(ferry_dataset_get(c.dataset, b.indices[i], want, sizeof want, NULL, &wl));
            ASSERT_MEM_EQ(img + i * IW * IH, want, sizeof want);
            ASSERT_EQ_INT(lab[i], wl);
            idx[n++] = b.indices[i];
        }
        nb++;
    }
    ASSERT_STATUS(st, FERRY_END);
    ferry_loader_destroy(l);
    *batches = nb;
    return n;
}

static void check_world(size_t world, size_t buffer, bool drop_last)
{
    size_t per = (N + world - 1) / world;
    size_t want_batches = drop_last ? per / BATCH : (per + BATCH - 1) / BATCH;
    size_t one[N], one_batches;
    opts o1 = {.world = 1, .buffer = buffer, .workers = 2};
    ASSERT_EQ_SIZE(run_rank(&o1, one, &one_batches), N);
    size_t seen[N] = {0}, total = 0, shard_reads = 0;
    for (size_t r = 0; r < world; r++) {
        size_t idx[N], nb;
        opts o = {.world = world, .rank = r, .buffer = buffer, .workers = r % 3,
                  .drop_last = drop_last};
        size_t n = run_rank(&o, idx, &nb);
        ASSERT_MSG(nb == want_batches && want_batches > 0,
                   "world %zu, %s, rank %zu: %zu batches, want %zu", world,
                   buffer ? "streaming" : "random", r, nb, want_batches);
        ASSERT_EQ_SIZE(n, drop_last ? want_batches * BATCH : per);
        bool touched[NSHARDS] = {0};
        for (size_t k = 0; k < n; k++) {
            seen[idx[k]]++;
            touched[shard_of(idx[k])] = true;
        }
        total += n;
        for (size_t s = 0; s < NSHARDS; s++)
            shard_reads += touched[s];
        if (!buffer || drop_last)
            continue;
        /* Streaming: the rank's range of the one-process order, the first
         * N % W ranks one longer, a short one padded with its own first. */
        size_t q = N / world, m = N % world, lo = r * q + (r < m ? r : m), cnt = q + (r < m);
        for (size_t k = 0; k < cnt; k++)
            ASSERT_MSG(idx[k] == one[lo + k], "world %zu rank %zu: entry %zu is %zu, the "
                       "one-process order has %zu", world, r, k, idx[k], one[lo + k]);
        if (cnt < per)
            ASSERT_EQ_SIZE(idx[cnt], cnt ? one[lo] : one[r % N]);
    }
    if (drop_last)
        return;
    /* The union is the dataset; repeats are the padding only. */
    size_t repeats = 0;
    for (size_t i = 0; i < N; i++) {
        ASSERT_MSG(seen[i] > 0, "world %zu, %s: sample %zu on no rank", world,
                   buffer ? "streaming" : "random", i);
        repeats += seen[i] - 1;
    }
    ASSERT_EQ_SIZE(total, per * world);
    ASSERT_EQ_SIZE(repeats, per * world - N);
    if (buffer == 1)
        ASSERT_MSG(shard_reads <= NSHARDS + world - 1 + (per * world > N),
                   "world %zu: %zu shard reads over all ranks, want at most %zu", world,
                   shard_reads, (size_t)NSHARDS + world - 1);
}

TEST(equal_batches_on_every_rank_in_random_order)
{
    for (size_t w = 1; w <= 8; w *= 2) {
        check_world(w, 0, false);
        check_world(w, 0, true);
    }
}

TEST(equal_batches_on_every_rank_in_streaming_order)
{
    for (size_t w = 1; w <= 8; w *= 2)
        for (size_t b = 1; b <= 5; b += 4) {
            check_world(w, b, false);
            check_world(w, b, true);
        }
}

/* With more shards than ranks, an interleaved split would have every rank
 * read nearly every shard; the streaming split gives each rank its own run. */
TEST(streaming_ranks_read_their_own_shards)
{
    size_t idx[N], nb;
    bool touched[2][NSHARDS] = {{0}};
    for (size_t r = 0; r < 2; r++) {
        opts o = {.world = 2, .rank = r, .buffer = 1, .workers = 1};
        size_t n = run_rank(&o, idx, &nb);
        for (size_t k = 0; k < n; k++)
            touched[r][shard_of(idx[k])] = true;
    }
    /* 29 samples each: one rank has the 50-sample shard's first part (or all
     * of the small two and a part of it), the other only the rest of it. */
    size_t both = 0;
    for (size_t s = 0; s < NSHARDS; s++)
        both += touched[0][s] && touched[1][s];
    ASSERT_MSG(both <= 1, "%zu shards read by both ranks", both);
}

static ferry_loader *rank_loader(size_t world, size_t rank)
{
    ferry_loader_config c = ferry_loader_config_default();
    c.dataset = shards();
    c.batch_size = BATCH;
    c.shuffle = true;
    c.seed = 11;
    c.num_workers = 2;
    c.device = ferry_cpu();
    c.pin_memory = FERRY_PIN_MEMORY_OFF;
    c.out_dtype = FERRY_DTYPE_U8;
    c.stream_shuffle_buffer = 5;
    c.sampler = FERRY_SAMPLER_DISTRIBUTED;
    c.rank = rank;
    c.world_size = world;
    ferry_loader *l;
    ASSERT_OK(ferry_loader_create(&c, &l));
    return l;
}

/* Streaming over ranks: a state resumes the rank's own range on the same
 * world size; another world size is refused by name mid-epoch (the rest is no
 * prefix to split again), and fits once the epoch has ended. */
TEST(streaming_ranks_resume_their_own_range)
{
    size_t whole[N], nb;
    opts o = {.world = 4, .rank = 2, .buffer = 5, .workers = 2};
    size_t n = run_rank(&o, whole, &nb);
    ferry_loader *l = rank_loader(4, 2), *m;
    ferry_batch b;
    ASSERT_OK(ferry_loader_next(l, NULL, &b));
    ASSERT_OK(ferry_loader_next(l, NULL, &b));
    ferry_loader_state s;
    ASSERT_OK(ferry_loader_state_get(l, &s));
    m = rank_loader(4, 2);
    ASSERT_OK(ferry_loader_restore(m, &s));
    size_t at = 2 * BATCH;
    while (ferry_loader_next(m, NULL, &b) == FERRY_OK)
        for (size_t i = 0; i < b.size; i++, at++)
            ASSERT_EQ_SIZE(b.indices[i], whole[at]);
    ASSERT_EQ_SIZE(at, n);
    ferry_loader_state end;
    ASSERT_OK(ferry_loader_state_get(m, &end));
    ASSERT(end.done);
    ferry_loader_destroy(m);
    m = rank_loader(2, 1);
    ASSERT_STATUS(ferry_loader_restore(m, &s), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "world size it was saved with (4 in the state, 2 here)");
    ASSERT_OK(ferry_loader_restore(m, &end)); /* ended: the next epoch on 2 ranks */
    ASSERT_STATUS(ferry_loader_next(m, NULL, &b), FERRY_END);
    ASSERT_OK(ferry_loader_reset(m, end.epoch + 1));
    ASSERT_OK(ferry_loader_next(m, NULL, &b));
    ferry_loader_destroy(m);
    ferry_loader_destroy(l);
}

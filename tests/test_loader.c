/* The loader: every sample once per epoch, order, determinism across worker
 * counts, error policies, timeouts, early destroy, conversion, allocations. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "common/error.h"

enum { C = 1, H = 4, W = 3 };
#define SAMPLE (C * H * W)

/* n samples whose bytes encode their index, labels = index % 10. */
typedef struct fixture {
    uint8_t *data;
    int64_t *labels;
    size_t n;
    ferry_dataset *ds;
} fixture;

static void fixture_make(fixture *f, size_t n)
{
    f->n = n;
    f->data = malloc(n * SAMPLE);
    f->labels = malloc(n * sizeof *f->labels);
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < SAMPLE; j++)
            f->data[i * SAMPLE + j] = (uint8_t)(i * 7 + j * 13);
        f->data[i * SAMPLE] = (uint8_t)i;
        f->data[i * SAMPLE + 1] = (uint8_t)(i >> 8);
        f->labels[i] = (int64_t)(i % 10);
    }
    ferry_sample_format fmt = {C, H, W, FERRY_LAYOUT_CHW, FERRY_DTYPE_U8};
    ASSERT_OK(ferry_dataset_memory(f->data, &fmt, n, f->labels, &f->ds));
}

static void fixture_free(fixture *f)
{
    ferry_dataset_release(f->ds);
    free(f->data);
    free(f->labels);
}

static ferry_loader_config raw_config(ferry_dataset *ds, size_t batch, size_t workers)
{
    ferry_loader_config c = ferry_loader_config_default();
    c.dataset = ds;
    c.batch_size = batch;
    c.num_workers = workers ? workers : FERRY_LOADER_NO_WORKERS;
    c.device = ferry_cpu();
    c.pin_memory = FERRY_PIN_MEMORY_OFF;
    c.out_dtype = FERRY_DTYPE_U8; /* raw bytes out: easy to check */
    return c;
}

/* Runs one epoch and checks each delivered sample's bytes and label against the
 * dataset; counts how often each index was seen; returns a digest of the epoch. */
static uint64_t run_epoch(ferry_loader *l, const fixture *f, size_t *seen, size_t *nbatches)
{
    uint64_t digest = 1469598103934665603ull;
    ferry_batch b;
    ferry_status st;
    size_t batches = 0;
    while ((st = ferry_loader_next(l, NULL, &b)) == FERRY_OK) {
        const uint8_t *img = ferry_tensor_data(b.images);
        const int64_t *lab = ferry_tensor_data(b.labels);
        ASSERT_EQ_INT(ferry_tensor_dim(b.images, 0), b.size);
        ASSERT_EQ_INT(ferry_tensor_dim(b.labels, 0), b.size);
        for (size_t i = 0; i < b.size; i++) {
            size_t idx = b.indices[i];
            ASSERT(idx < f->n);
            ASSERT_MEM_EQ(img + i * SAMPLE, f->data + idx * SAMPLE, SAMPLE);
            ASSERT_EQ_INT(lab[i], f->labels[idx]);
            if (seen)
                seen[idx]++;
            for (size_t j = 0; j < SAMPLE; j++)
                digest = (digest ^ img[i * SAMPLE + j]) * 1099511628211ull;
            digest = (digest ^ (uint64_t)lab[i]) * 1099511628211ull;
        }
        batches++;
    }
    ASSERT_STATUS(st, FERRY_END);
    if (nbatches)
        *nbatches = batches;
    return digest;
}

TEST(every_sample_once_sequential_and_shuffled)
{
    fixture f;
    fixture_make(&f, 103);
    for (int shuffle = 0; shuffle <= 1; shuffle++) {
        for (size_t workers = 0; workers <= 3; workers++) {
            ferry_loader_config c = raw_config(f.ds, 10, workers);
            c.shuffle = shuffle;
            c.seed = 5;
            ferry_loader *l;
            ASSERT_OK(ferry_loader_create(&c, &l));
            ASSERT_EQ_SIZE(ferry_loader_len(l), 11);
            size_t seen[103] = {0}, nb;
            run_epoch(l, &f, seen, &nb);
            ASSERT_EQ_SIZE(nb, 11);
            for (size_t i = 0; i < f.n; i++)
                ASSERT_MSG(seen[i] == 1, "sample %zu seen %zu times (shuffle %d, workers %zu)", i,
                           seen[i], shuffle, workers);
            ferry_loader_destroy(l);
        }
    }
    fixture_free(&f);
}

TEST(sequential_order_and_uneven_last_batch)
{
    fixture f;
    fixture_make(&f, 25);
    ferry_loader_config c = raw_config(f.ds, 8, 2);
    ferry_loader *l;
    ASSERT_OK(ferry_loader_create(&c, &l));
    ferry_batch b;
    size_t next = 0, sizes[4];
    for (int k = 0; k < 4; k++) {
        ASSERT_OK(ferry_loader_next(l, NULL, &b));
        ASSERT_EQ_SIZE(b.index, k);
        sizes[k] = b.size;
        for (size_t i = 0; i < b.size; i++)
            ASSERT_EQ_SIZE(b.indices[i], next++);
    }
    ASSERT_EQ_SIZE(sizes[0], 8);
    ASSERT_EQ_SIZE(sizes[3], 1);
    ASSERT_STATUS(ferry_loader_next(l, NULL, &b), FERRY_END);
    ASSERT_STATUS(ferry_loader_next(l, NULL, &b), FERRY_END);
    ferry_loader_destroy(l);
    fixture_free(&f);
}

TEST(drop_last_drops_the_short_batch)
{
    fixture f;
    fixture_make(&f, 25);
    ferry_loader_config c = raw_config(f.ds, 8, 2);
    c.drop_last = true;
    c.shuffle = true;
    ferry_loader *l;
    ASSERT_OK(ferry_loader_create(&c, &l));
    ASSERT_EQ_SIZE(ferry_loader_len(l), 3);
    ASSERT_EQ_SIZE(ferry_loader_sample_count(l), 24);
    size_t seen[25] = {0}, nb, total = 0;
    run_epoch(l, &f, seen, &nb);
    ASSERT_EQ_SIZE(nb, 3);
    for (size_t i = 0; i < 25; i++) {
        ASSERT(seen[i] <= 1);
        total += seen[i];
    }
    ASSERT_EQ_SIZE(total, 24);
    ferry_loader_destroy(l);

    c.batch_size = 30;
    ASSERT_STATUS(ferry_loader_create(&c, &l), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "drop_last with batch_size 30 leaves no batch of 25 samples");
    /* Epochs the random streams cannot tell apart from earlier ones. */
    c.batch_size = 8;
    ASSERT_OK(ferry_loader_create(&c, &l));
    ASSERT_OK(ferry_loader_reset(l, (UINT64_C(1) << 56) - 1));
    ASSERT_STATUS(ferry_loader_reset(l, UINT64_C(1) << 56), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "epoch 72057594037927936 is past 2^56 - 1");
    ferry_loader_state st;
    ASSERT_OK(ferry_loader_state_get(l, &st));
    st.epoch = UINT64_MAX;
    ASSERT_STATUS(ferry_loader_restore(l, &st), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "past 2^56 - 1");
    ferry_loader_destroy(l);
    fixture_free(&f);
}

TEST(bytes_identical_across_worker_counts_and_runs)
{
    fixture f;
    fixture_make(&f, 200);
    uint64_t ref = 0;
    size_t counts[] = {0, 1, 2, 8, 2, 3};
    for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
        ferry_loader_config c = raw_config(f.ds, 16, counts[k]);
        c.shuffle = true;
        c.seed = 1234;
        c.prefetch = k == 5 ? 1 : 3;
        ferry_loader *l;
        ASSERT_OK(ferry_loader_create(&c, &l));
        uint64_t d = run_epoch(l, &f, NULL, NULL);
        if (k == 0)
            ref = d;
        ASSERT_MSG(d == ref, "digest with %zu workers differs", counts[k]);
        ferry_loader_destroy(l);
    }
    fixture_free(&f);
}

/* The first index of each of the first batches, for comparing orders. */
static void first_indices(ferry_dataset *ds, uint64_t seed, uint64_t epoch, size_t *out, size_t n)
{
    ferry_loader_config c = raw_config(ds, 1, 1);
    c.shuffle = true;
    c.seed = seed;
    ferry_loader *l;
    ASSERT_OK(ferry_loader_create(&c, &l));
    ASSERT_OK(ferry_loader_reset(l, epoch));
    ferry_batch b;
    for (size_t i = 0; i < n; i++) {
        ASSERT_OK(ferry_loader_next(l, NULL, &b));
        out[i] = b.indices[0];
    }
    ferry_loader_destroy(l);
}

TEST(seed_and_epoch_change_the_order)
{
    fixture f;
    fixture_make(&f, 64);
    size_t a[16], b[16], c[16], d[16];
    first_indices(f.ds, 1, 0, a, 16);
    first_indices(f.ds, 1, 0, b, 16);
    first_indices(f.ds, 2, 0, c, 16);
    first_indices(f.ds, 1, 1, d, 16);
    ASSERT_MEM_EQ(a, b, sizeof a);
    ASSERT(memcmp(a, c, sizeof a) != 0);
    ASSERT(memcmp(a, d, sizeof a) != 0);
    int sequential = 1;
    for (size_t i = 0; i < 16; i++)
        sequential &= a[i] == i;
    ASSERT(!sequential);
    fixture_free(&f);
}

TEST(distributed_ranks_cover_the_dataset)
{
    /* 40 samples over 4 ranks: disjoint, together exactly the dataset. 42 over 4:
     * 11 each, the first two of the global order repeated, as DistributedSampler
     * pads; 41 over 4: 11 each too, three repeated. */
    size_t sizes[] = {40, 42, 41};
    static const size_t dups[] = {0, 2, 3};
    for (int t = 0; t < 3; t++) {
        fixture f;
        fixture_make(&f, sizes[t]);
        size_t seen[42] = {0}, total = 0;
        for (size_t rank = 0; rank < 4; rank++) {
            ferry_loader_config c = raw_config(f.ds, 3, 1);
            c.sampler = FERRY_SAMPLER_DISTRIBUTED;
            c.rank = rank;
            c.world_size = 4;
            c.shuffle = true;
            c.seed = 9;
            ferry_loader *l;
            ASSERT_OK(ferry_loader_create(&c, &l));
            ASSERT_EQ_SIZE(ferry_loader_sample_count(l), (sizes[t] + 3) / 4);
            size_t nb;
            run_epoch(l, &f, seen, &nb);
            total += ferry_loader_sample_count(l);
            ferry_loader_destroy(l);
        }
        size_t dup = 0;
        for (size_t i = 0; i < sizes[t]; i++) {
            ASSERT_MSG(seen[i] >= 1 && seen[i] <= 2, "sample %zu seen %zu times", i, seen[i]);
            dup += seen[i] - 1;
        }
        ASSERT_EQ_SIZE(total, sizes[t] + dup);
        ASSERT_EQ_SIZE(dup, dups[t]);
        fixture_free(&f);
    }
    ferry_loader *l;
    fixture f;
    fixture_make(&f, 10);
    ferry_loader_config c = raw_config(f.ds, 3, 1);
    c.sampler = FERRY_SAMPLER_DISTRIBUTED;
    c.rank = 4;
    c.world_size = 4;
    ASSERT_STATUS(ferry_loader_create(&c, &l), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "rank 4");
    fixture_free(&f);
}

TEST(index_sampler_uses_the_callers_list)
{
    fixture f;
    fixture_make(&f, 50);
    size_t idx[] = {7, 3, 3, 49, 0};
    ferry_loader_config c = raw_config(f.ds, 2, 2);
    c.sampler = FERRY_SAMPLER_INDICES;
    c.indices = idx;
    c.num_indices = 5;
    ferry_loader *l;
    ASSERT_OK(ferry_loader_create(&c, &l));
    idx[0] = 1; /* the loader copied the list */
    size_t got[5], n = 0;
    ferry_batch b;
    while (ferry_loader_next(l, NULL, &b) == FERRY_OK)
        for (size_t i = 0; i < b.size; i++)
            got[n++] = b.indices[i];
    ASSERT_EQ_SIZE(n, 5);
    size_t want[] = {7, 3, 3, 49, 0};
    ASSERT_MEM_EQ(got, want, sizeof want);
    ferry_loader_destroy(l);
    size_t bad[] = {50};
    c.indices = bad;
    c.num_indices = 1;
    ASSERT_STATUS(ferry_loader_create(&c, &l), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "indices[0] = 50");
    fixture_free(&f);
}

TEST(as_ready_delivers_every_batch)
{
    fixture f;
    fixture_make(&f, 97);
    ferry_loader_config c = raw_config(f.ds, 4, 3);
    c.out_of_order = true;
    ferry_loader *l;
    ASSERT_OK(ferry_loader_create(&c, &l));
    size_t seen[97] = {0}, nb;
    run_epoch(l, &f, seen, &nb);
    ASSERT_EQ_SIZE(nb, 25);
    for (size_t i = 0; i < 97; i++)
        ASSERT_EQ_SIZE(seen[i], 1);
    ferry_loader_destroy(l);
    fixture_free(&f);
}

TEST(epochs_reset_and_non_persistent_workers)
{
    fixture f;
    fixture_make(&f, 40);
    for (int persistent = 0; persistent <= 1; persistent++) {
        ferry_loader_config c = raw_config(f.ds, 6, 2);
        c.restart_workers = !persistent;
        c.shuffle = true;
        ferry_loader *l;
        ASSERT_OK(ferry_loader_create(&c, &l));
        for (uint64_t e = 0; e < 4; e++) {
            if (e)
                ASSERT_OK(ferry_loader_reset(l, e));
            /* Reset in the middle of the epoch too. */
            ferry_batch b;
            ASSERT_OK(ferry_loader_next(l, NULL, &b));
            ASSERT_EQ_INT(b.epoch, e);
            ASSERT_OK(ferry_loader_reset(l, e));
            size_t seen[40] = {0};
            run_epoch(l, &f, seen, NULL);
            for (size_t i = 0; i < 40; i++)
                ASSERT_EQ_SIZE(seen[i], 1);
        }
        ferry_loader_destroy(l);
    }
    fixture_free(&f);
}

/* ---- a dataset of callbacks: failing, slow ---- */
typedef struct cb_data {
    fixture *f;
    size_t bad_a, bad_b;      /* these indices fail */
    size_t slow;              /* this index sleeps slow_ms */
    unsigned slow_ms;
    bool bare;                /* error messages without the file name */
} cb_data;

/* Samples [bad_run_from, bad_run_to) fail too; cb_calls counts get() calls. */
static size_t bad_run_from, bad_run_to;
static atomic_size_t cb_calls;

static ferry_status cb_get(void *user, size_t index, void *dst, size_t bytes,
                           const ferry_sample_ctx *ctx, int64_t *label)
{
    (void)ctx;
    cb_data *d = user;
    atomic_fetch_add(&cb_calls, 1);
    if (index >= bad_run_from && index < bad_run_to)
        return ferry_set_error(FERRY_ERR_FORMAT, "empty file");
    if (index == d->slow)
        usleep(d->slow_ms * 1000u);
    if ((index == d->bad_a || index == d->bad_b) && d->bare)
        return ferry_set_error(FERRY_ERR_FORMAT, "unexpected end of data");
    if (index == d->bad_a || index == d->bad_b)
        return ferry_set_error(FERRY_ERR_FORMAT, "IDAT: CRC error");
    if (bytes < SAMPLE)
        return FERRY_ERR_INVALID_ARG;
    memcpy(dst, d->f->data + index * SAMPLE, SAMPLE);
    *label = d->f->labels[index];
    return FERRY_OK;
}

static const char *cb_name(void *user, size_t index)
{
    (void)user;
    static const char *names[] = {"file0.png", "file1.png", "file2.png", "file3.png",
                                  "file4.png", "file5.png", "file6.png", "file7.png"};
    return index < 8 ? names[index] : NULL;
}

static ferry_dataset *cb_dataset(cb_data *d, size_t n)
{
    ferry_dataset_callbacks cb = {0};
    cb.len = n;
    cb.format = (ferry_sample_format){C, H, W, FERRY_LAYOUT_CHW, FERRY_DTYPE_U8};
    cb.num_classes = 10;
    cb.get = cb_get;
    cb.name = cb_name;
    ferry_dataset *ds;
    ASSERT_OK(ferry_dataset_custom(&cb, d, &ds));
    return ds;
}

TEST(policy_fail_names_the_sample_then_reset_recovers)
{
    fixture f;
    fixture_make(&f, 30);
    cb_data d = {&f, 5, 5, (size_t)-1, 0, false};
    ferry_dataset *ds = cb_dataset(&d, 30);
    for (size_t workers = 0; workers <= 2; workers += 2) {
        ferry_loader_config c = raw_config(ds, 4, workers);
        ferry_loader *l;
        ASSERT_OK(ferry_loader_create(&c, &l));
        ferry_batch b;
        ASSERT_OK(ferry_loader_next(l, NULL, &b)); /* samples 0..3 */
        ASSERT_STATUS(ferry_loader_next(l, NULL, &b), FERRY_ERR_FORMAT);
        /* The callback says why; the dataset names the sample, the loader
         * writes index and name: the name appears once. */
        ASSERT_STR_EQ(ferry_last_error(), "sample 5 (file5.png): IDAT: CRC error");
        ASSERT_STATUS(ferry_loader_next(l, NULL, &b), FERRY_ERR_BAD_STATE);
        ASSERT_STR_CONTAINS(ferry_last_error(), "file5.png");
        /* Reset: the epoch runs again up to the bad sample. */
        ASSERT_OK(ferry_loader_reset(l, 1));
        ASSERT_OK(ferry_loader_next(l, NULL, &b));
        ASSERT_EQ_SIZE(b.indices[0], 0);
        ferry_loader_destroy(l);
    }
    ferry_dataset_release(ds);
    fixture_free(&f);
}

/* A dataset whose messages do not mention the file: the loader names it, under
 * either policy, with any number of workers. */
TEST(errors_name_the_file_the_dataset_did_not)
{
    fixture f;
    fixture_make(&f, 12);
    cb_data d = {&f, 5, 5, (size_t)-1, 0, true};
    ferry_dataset *ds = cb_dataset(&d, 12);
    for (size_t workers = 0; workers <= 2; workers++) {
        ferry_loader_config c = raw_config(ds, 4, workers);
        ferry_loader *l;
        ASSERT_OK(ferry_loader_create(&c, &l));
        ferry_batch b;
        ASSERT_OK(ferry_loader_next(l, NULL, &b));
        ASSERT_STATUS(ferry_loader_next(l, NULL, &b), FERRY_ERR_FORMAT);
        ASSERT_STR_EQ(ferry_last_error(), "sample 5 (file5.png): unexpected end of data");
        ferry_loader_destroy(l);

        c.on_error = FERRY_ON_ERROR_SKIP;
        ASSERT_OK(ferry_loader_create(&c, &l));
        ferry_status st;
        while ((st = ferry_loader_next(l, NULL, &b)) == FERRY_OK) {
        }
        ASSERT_STATUS(st, FERRY_END);
        ferry_loader_stats s;
        ASSERT_OK(ferry_loader_stats_get(l, &s));
        ASSERT_EQ_INT(s.skipped, 1);
        ASSERT_EQ_SIZE(s.num_skipped_names, 1);
        ASSERT_STR_EQ(s.skipped_names[0], "file5.png");
        ferry_loader_destroy(l);
    }
    ferry_dataset_release(ds);
    fixture_free(&f);
}

TEST(policy_skip_keeps_batches_full_and_counts)
{
    fixture f;
    fixture_make(&f, 30);
    cb_data d = {&f, 5, 6, (size_t)-1, 0, false};
    ferry_dataset *ds = cb_dataset(&d, 30);
    uint64_t ref = 0;
    for (size_t workers = 0; workers <= 3; workers++) {
        ferry_loader_config c = raw_config(ds, 4, workers);
        c.on_error = FERRY_ON_ERROR_SKIP;
        ferry_loader *l;
        ASSERT_OK(ferry_loader_create(&c, &l));
        size_t seen[30] = {0}, nb;
        uint64_t dg = run_epoch(l, &f, seen, &nb);
        if (workers == 0)
            ref = dg;
        ASSERT(dg == ref);
        ASSERT_EQ_SIZE(nb, 8);
        ASSERT_EQ_SIZE(seen[5], 0);
        ASSERT_EQ_SIZE(seen[6], 0);
        ferry_loader_stats s;
        ASSERT_OK(ferry_loader_stats_get(l, &s));
        ASSERT_EQ_INT(s.samples, 30);
        ASSERT_EQ_INT(s.skipped, 2); /* 5 and 6, once each */
        ASSERT(s.num_skipped_names >= 2);
        ASSERT_STR_EQ(s.skipped_names[0], s.skipped_names[0][4] == '5' ? "file5.png" : "file6.png");
        ferry_loader_destroy(l);
    }
    ferry_dataset_release(ds);
    fixture_free(&f);
}

/* A run of bad files (the 2,000 empty ones, here 400 of 420, no
 * shuffle): each is skipped, counted and named once, decoded about once, and
 * the replacements are drawn across the good ones, not the one after the run
 * delivered 401 times; the same with any number of workers. */
TEST(policy_skip_a_run_of_bad_files_costs_each_once)
{
    fixture f;
    fixture_make(&f, 420);
    cb_data d = {&f, (size_t)-1, (size_t)-1, (size_t)-1, 0, false};
    bad_run_from = 10;
    bad_run_to = 410;
    ferry_dataset *ds = cb_dataset(&d, 420);
    uint64_t ref = 0;
    for (size_t workers = 0; workers <= 3; workers++) {
        ferry_loader_config c = raw_config(ds, 16, workers);
        c.on_error = FERRY_ON_ERROR_SKIP;
        ferry_loader *l;
        atomic_store(&cb_calls, 0);
        ASSERT_OK(ferry_loader_create(&c, &l));
        size_t seen[420] = {0}, nb, most = 0;
        uint64_t dg = run_epoch(l, &f, seen, &nb);
        if (workers == 0)
            ref = dg;
        ASSERT(dg == ref);
        for (size_t i = 0; i < 420; i++)
            most = seen[i] > most ? seen[i] : most;
        ASSERT_MSG(most <= 60, "a good sample delivered %zu times", most);
        ferry_loader_stats s;
        ASSERT_OK(ferry_loader_stats_get(l, &s));
        ASSERT_EQ_INT(s.samples, 420);
        ASSERT_EQ_INT(s.skipped, 400);
        /* Each bad file decoded about once (a race may try one twice), plus the
         * good ones and the good replacements. */
        ASSERT_MSG(atomic_load(&cb_calls) < 3 * 420, "%zu get() calls", atomic_load(&cb_calls));
        ferry_loader_destroy(l);
    }
    bad_run_from = bad_run_to = 0;
    ferry_dataset_release(ds);
    fixture_free(&f);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

TEST(timeout_names_the_slow_sample)
{
    fixture f;
    fixture_make(&f, 12);
    /* The other samples are memcpys; 0.5 s leaves room for valgrind and TSan. */
    cb_data d = {&f, (size_t)-1, (size_t)-1, 3, 1500, false};
    ferry_dataset *ds = cb_dataset(&d, 12);
    for (size_t workers = 0; workers <= 2; workers += 2) {
        ferry_loader_config c = raw_config(ds, 4, workers);
        c.sample_timeout_s = 0.5;
        ferry_loader *l;
        ASSERT_OK(ferry_loader_create(&c, &l));
        ferry_batch b;
        ASSERT_STATUS(ferry_loader_next(l, NULL, &b), FERRY_ERR_TIMEOUT);
        ASSERT_STR_CONTAINS(ferry_last_error(), "file3.png");
        ASSERT_STR_CONTAINS(ferry_last_error(), "timeout");
        ferry_loader_destroy(l);
    }
    ferry_dataset_release(ds);
    fixture_free(&f);
}

TEST(destroy_while_a_worker_sits_on_a_slow_file)
{
    fixture f;
    fixture_make(&f, 12);
    cb_data d = {&f, (size_t)-1, (size_t)-1, 0, 300, false};
    ferry_dataset *ds = cb_dataset(&d, 12);
    ferry_loader_config c = raw_config(ds, 4, 2);
    ferry_loader *l;
    ASSERT_OK(ferry_loader_create(&c, &l));
    usleep(20000);
    double t = now_s();
    ferry_loader_destroy(l); /* waits for the slow sample, starts no new one */
    ASSERT_MSG(now_s() - t < 2.0, "destroy took %.2f s", now_s() - t);
    ferry_dataset_release(ds);
    fixture_free(&f);
}

TEST(early_destroy_under_load_many_times)
{
    fixture f;
    fixture_make(&f, 500);
    for (int rep = 0; rep < 60; rep++) {
        ferry_loader_config c = raw_config(f.ds, 7, (size_t)(rep % 5));
        c.shuffle = rep & 1;
        c.prefetch = 1 + (size_t)(rep % 3);
        ferry_loader *l;
        ASSERT_OK(ferry_loader_create(&c, &l));
        ferry_batch b;
        for (int k = 0; k < rep % 4; k++)
            ASSERT_OK(ferry_loader_next(l, NULL, &b));
        if (rep % 3 == 0)
            ASSERT_OK(ferry_loader_reset(l, (uint64_t)rep));
        ferry_loader_destroy(l);
    }
    fixture_free(&f);
}

TEST(normalised_float_output_and_layouts)
{
    /* 2 channels, 2x3: y = (x/255 - mean[c]) / std[c]. */
    enum { C2 = 2, N = 5 };
    uint8_t data[N * C2 * 6];
    int64_t labels[N] = {0, 1, 2, 3, 4};
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (uint8_t)(i * 37);
    ferry_sample_format fmt = {C2, 2, 3, FERRY_LAYOUT_CHW, FERRY_DTYPE_U8};
    ferry_dataset *ds;
    ASSERT_OK(ferry_dataset_memory(data, &fmt, N, labels, &ds));
    const float mean[2] = {0.5f, 0.25f}, stdv[2] = {0.2f, 0.5f};
    float ref_chw[N * 12], got[N * 12];
    for (int wire = 0; wire < 2; wire++) {
        for (int layout = 0; layout < 2; layout++) {
            for (int workers = 0; workers <= 1; workers++) {
            ferry_loader_config c = raw_config(ds, N, (size_t)workers);
            c.out_dtype = FERRY_DTYPE_F32;
            c.wire_dtype = wire ? FERRY_WIRE_F32 : FERRY_WIRE_U8;
            c.layout = layout ? FERRY_LAYOUT_HWC : FERRY_LAYOUT_CHW;
            memcpy(c.mean, mean, sizeof mean);
            memcpy(c.std, stdv, sizeof stdv);
            ferry_loader *l;
            ASSERT_OK(ferry_loader_create(&c, &l));
            ferry_batch b;
            ASSERT_OK(ferry_loader_next(l, NULL, &b));
            ASSERT_EQ_INT(ferry_tensor_dtype(b.images), FERRY_DTYPE_F32);
            ASSERT_EQ_INT(ferry_tensor_dim(b.images, 1), layout ? 2 : C2);
            ASSERT_EQ_INT(ferry_tensor_dim(b.images, 3), layout ? C2 : 3);
            memcpy(got, ferry_tensor_data(b.images), sizeof got);
            for (size_t n = 0; n < N; n++)
                for (size_t ch = 0; ch < C2; ch++)
                    for (size_t p = 0; p < 6; p++) {
                        float x = data[n * 12 + ch * 6 + p];
                        float want = (x / 255.0f - mean[ch]) / stdv[ch];
                        float g = layout ? got[n * 12 + p * C2 + ch] : got[n * 12 + ch * 6 + p];
                        ASSERT_NEAR(g, want, 1e-5);
                        if (!wire && !layout)
                            ref_chw[n * 12 + ch * 6 + p] = g;
                        else /* wire f32 and u8 give the same bits */
                            ASSERT_MSG(memcmp(&g, &ref_chw[n * 12 + ch * 6 + p], 4) == 0,
                                       "wire %d layout %d differs at %zu,%zu,%zu", wire, layout, n, ch, p);
                    }
            ferry_loader_destroy(l);
            }
        }
    }
    /* f16 and bf16 out: the f32 value, rounded. */
    ferry_dtype halves[] = {FERRY_DTYPE_F16, FERRY_DTYPE_BF16};
    for (int h = 0; h < 2; h++) {
        ferry_loader_config c = raw_config(ds, N, 1);
        c.out_dtype = halves[h];
        memcpy(c.mean, mean, sizeof mean);
        memcpy(c.std, stdv, sizeof stdv);
        ferry_loader *l;
        ASSERT_OK(ferry_loader_create(&c, &l));
        ferry_batch b;
        ASSERT_OK(ferry_loader_next(l, NULL, &b));
        const uint16_t *p = ferry_tensor_data(b.images);
        for (size_t i = 0; i < N * 12; i++) {
            uint16_t want = h ? ferry_f32_to_bf16(ref_chw[i]) : ferry_f32_to_f16(ref_chw[i]);
            ASSERT_EQ_INT(p[i], want);
        }
        ferry_loader_destroy(l);
    }
    ferry_dataset_release(ds);
}

/* PNG files of one size whose compressed sizes, and so zlib windows, differ
 * (flat, striped and noisy images): with 1 to 4 workers nothing is allocated after
 * the first batch, over three epochs, whichever worker meets which file first. */
TEST(no_allocations_after_warmup_png_folder)
{
    enum { NPNG = 240, SIDE = 28 };
    uint8_t px[SIDE * SIDE];
    uint32_t x = 12345;
    char path[512];
    for (size_t i = 0; i < NPNG; i++) {
        for (size_t j = 0; j < sizeof px; j++) {
            x = x * 1664525u + 1013904223u;
            px[j] = i % 3 == 0 ? (uint8_t)i : i % 3 == 1 ? (uint8_t)(j / SIDE * 9) : (uint8_t)(x >> 24);
        }
        snprintf(path, sizeof path, "%s/c%zu/%03zu.png", ft_tmp("allocs"), i % 2, i);
        ft_write_file(path, "", 0);
        ASSERT_OK(ferry_png_save(path, px, SIDE, SIDE, 1));
    }
    ferry_dataset *ds = NULL;
    ASSERT_OK(ferry_dataset_image_folder(ft_tmp("allocs"), NULL, &ds));
    for (size_t workers = 1; workers <= 4; workers++) {
        ferry_loader_config c = raw_config(ds, 8, workers);
        c.shuffle = true;
        c.seed = workers;
        ferry_loader *l;
        ASSERT_OK(ferry_loader_create(&c, &l));
        for (uint64_t e = 0; e < 3; e++) {
            ferry_batch b;
            ferry_status st;
            if (e)
                ASSERT_OK(ferry_loader_reset(l, e));
            while ((st = ferry_loader_next(l, NULL, &b)) == FERRY_OK) {
            }
            ASSERT_STATUS(st, FERRY_END);
        }
        ferry_loader_stats s;
        ASSERT_OK(ferry_loader_stats_get(l, &s));
        ASSERT_EQ_INT(s.samples, 3 * NPNG);
        ASSERT_MSG(s.allocs_after_warmup == 0, "%zu workers: %llu allocations after the first batch",
                   workers, (unsigned long long)s.allocs_after_warmup);
        ferry_loader_destroy(l);
    }
    ferry_dataset_release(ds);
}

TEST(no_allocations_after_warmup)
{
    fixture f;
    fixture_make(&f, 300);
    ferry_loader_config c = raw_config(f.ds, 10, 2);
    c.out_dtype = FERRY_DTYPE_F32;
    c.shuffle = true;
    ferry_loader *l;
    ASSERT_OK(ferry_loader_create(&c, &l));
    {
        ferry_batch b;
        int64_t live0 = 0;
        for (int e = 0; e < 2; e++) {
            if (e)
                ASSERT_OK(ferry_loader_reset(l, 1));
            while (ferry_loader_next(l, NULL, &b) == FERRY_OK)
                if (!live0)
                    live0 = ferry_debug_alloc_live();
        }
        ASSERT_EQ_INT(ferry_debug_alloc_live(), live0);
    }
    ferry_loader_stats s;
    ASSERT_OK(ferry_loader_stats_get(l, &s));
    ASSERT_EQ_INT(s.allocs_after_warmup, 0);
    ASSERT_EQ_INT(s.batches, 60);
    ASSERT_EQ_INT(s.samples, 600);
    ASSERT(!s.pinned);
    /* Host memory: the slots, whatever the dataset's size. */
    ASSERT(s.host_bytes >= 4 * 10 * SAMPLE);
    ASSERT(s.host_bytes <= 4 * (4096 + 10 * SAMPLE + 256 + 80));
    ferry_loader_destroy(l);
    fixture_free(&f);
}

static int warnings;
static char last_warning[512];
static void count_log(ferry_log_level lv, const char *msg, void *user)
{
    (void)user;
    if (lv == FERRY_LOG_WARN) {
        warnings++;
        snprintf(last_warning, sizeof last_warning, "%s", msg);
    }
}

TEST(devices_and_pinned_fallback)
{
    fixture f;
    fixture_make(&f, 20);
    ferry_loader_config c = raw_config(f.ds, 4, 1);
    ferry_loader *l;
    if (!ferry_cuda_is_available()) {
        c.device = ferry_cuda(0);
        ASSERT_STATUS(ferry_loader_create(&c, &l), FERRY_ERR_NO_DEVICE);
        ASSERT_STR_CONTAINS(ferry_last_error(), "no CUDA device");
        ASSERT_STR_CONTAINS(ferry_last_error(), "cuda:0");
    }
    c.device = (ferry_device){FERRY_DEVICE_CUDA, -1};
    ASSERT_STATUS(ferry_loader_create(&c, &l), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "loader: invalid device");
    c.device = (ferry_device){FERRY_DEVICE_DEFAULT, 3}; /* only {0} is the default */
    ASSERT_STATUS(ferry_loader_create(&c, &l), FERRY_ERR_INVALID_ARG);

    /* Asked for explicitly, pinning on the CPU warns once and falls back. */
    c.device = ferry_cpu();
    c.pin_memory = FERRY_PIN_MEMORY_ON;
    warnings = 0;
    ferry_set_log(count_log, NULL);
    ASSERT_OK(ferry_loader_create(&c, &l));
    ferry_set_log(NULL, NULL);
    ASSERT_EQ_INT(warnings, 1);
    ASSERT_STR_CONTAINS(last_warning, "pin_memory requested");
    ferry_loader_stats s;
    ASSERT_OK(ferry_loader_stats_get(l, &s));
    ASSERT(!s.pinned);
    size_t seen[20] = {0};
    run_epoch(l, &f, seen, NULL);
    ferry_loader_destroy(l);
    fixture_free(&f);
}

/* The default, AUTO, pins for a GPU and is silent on the CPU: the shortest
 * program needs no pin_memory line on a machine without a GPU. */
TEST(pin_default_is_silent_without_a_gpu)
{
    fixture f;
    fixture_make(&f, 20);
    ferry_loader_config c = {.dataset = f.ds, .batch_size = 4, .out_dtype = FERRY_DTYPE_U8};
    for (int explicit_cpu = 0; explicit_cpu <= 1; explicit_cpu++) {
        c.device = explicit_cpu ? ferry_cpu() : (ferry_device){0};
        warnings = 0;
        ferry_set_log(count_log, NULL);
        ferry_loader *l;
        ASSERT_OK(ferry_loader_create(&c, &l));
        ferry_set_log(NULL, NULL);
        ASSERT_MSG(warnings == 0, "%d warnings, the last: %s", warnings, last_warning);
        bool gpu = ferry_loader_device(l).type == FERRY_DEVICE_CUDA;
        ASSERT(gpu == (!explicit_cpu && ferry_cuda_is_available()));
        ferry_loader_stats s;
        ASSERT_OK(ferry_loader_stats_get(l, &s));
        if (!gpu)
            ASSERT(!s.pinned);
        ferry_loader_destroy(l);
    }
    /* OFF keeps a GPU loader's slots pageable. */
    if (ferry_cuda_is_available()) {
        c.device = ferry_cuda(0);
        c.pin_memory = FERRY_PIN_MEMORY_OFF;
        ferry_loader *l;
        ASSERT_OK(ferry_loader_create(&c, &l));
        ferry_loader_stats s;
        ASSERT_OK(ferry_loader_stats_get(l, &s));
        ASSERT(!s.pinned);
        ferry_loader_destroy(l);
    }
    fixture_free(&f);
}

/* {0} with a dataset is a whole config: batches of 64 on the default device,
 * f32 normalised by the default mean 0 and std 1 (x / 255), in order. */
TEST(zero_config_is_valid)
{
    fixture f;
    fixture_make(&f, 150);
    ferry_loader_config c = {.dataset = f.ds};
    ferry_loader *l;
    ASSERT_OK(ferry_loader_create(&c, &l));
    ASSERT(ferry_device_eq(ferry_loader_device(l), ferry_device_default()));
    ASSERT_EQ_SIZE(ferry_loader_len(l), 3); /* 64 + 64 + 22 */
    ferry_batch b;
    size_t next = 0;
    float *host = malloc(64 * SAMPLE * sizeof(float));
    int64_t lab[64];
    while (ferry_loader_next(l, NULL, &b) == FERRY_OK) {
        ASSERT_EQ_INT(ferry_tensor_dtype(b.images), FERRY_DTYPE_F32);
        ASSERT_OK(ferry_device_synchronize(ferry_loader_device(l)));
        ASSERT_OK(ferry_tensor_copy_to_host(b.images, host, b.size * SAMPLE * sizeof(float)));
        ASSERT_OK(ferry_tensor_copy_to_host(b.labels, lab, b.size * sizeof(int64_t)));
        for (size_t i = 0; i < b.size; i++, next++) {
            ASSERT_EQ_SIZE(b.indices[i], next); /* no shuffle by default */
            ASSERT_EQ_INT(lab[i], f.labels[next]);
            for (size_t j = 0; j < SAMPLE; j++)
                ASSERT_MSG(fabsf(host[i * SAMPLE + j] - f.data[next * SAMPLE + j] / 255.0f) < 1e-6f,
                           "sample %zu byte %zu: %g", next, j, (double)host[i * SAMPLE + j]);
        }
    }
    ASSERT_EQ_SIZE(next, 150);
    free(host);
    ferry_loader_destroy(l);

    /* The batch size too: 64. */
    c.batch_size = 0;
    c.device = ferry_cpu();
    ASSERT_OK(ferry_loader_create(&c, &l));
    ASSERT_OK(ferry_loader_next(l, NULL, &b));
    ASSERT_EQ_SIZE(b.size, 64);
    ferry_loader_destroy(l);
    ferry_loader_config d = ferry_loader_config_default(), z;
    memset(&z, 0, sizeof z);
    ASSERT(!memcmp(&d, &z, sizeof d));
    fixture_free(&f);
}

/* Counts get() calls: how much decoding a loader did. */
typedef struct counted {
    const fixture *f;
    atomic_size_t gets;
} counted;

static ferry_status counted_get(void *user, size_t i, void *dst, size_t n,
                                const ferry_sample_ctx *ctx, int64_t *label)
{
    (void)ctx;
    counted *c = user;
    atomic_fetch_add(&c->gets, 1);
    memcpy(dst, c->f->data + i * SAMPLE, n);
    *label = c->f->labels[i];
    return FERRY_OK;
}

/* reset(l, 0) before the first next() keeps the batches the workers decoded
 * ahead: every sample is decoded once, and the epoch is the fresh one. */
TEST(reset_zero_before_next_keeps_prefetched)
{
    fixture f;
    fixture_make(&f, 40);
    counted cnt = {.f = &f};
    atomic_init(&cnt.gets, 0);
    ferry_dataset_callbacks cb = {.len = f.n, .format = {C, H, W, FERRY_LAYOUT_CHW, FERRY_DTYPE_U8},
                                  .num_classes = 10, .get = counted_get};
    ferry_dataset *ds;
    ASSERT_OK(ferry_dataset_custom(&cb, &cnt, &ds));
    ferry_loader_config c = raw_config(ds, 4, 2);
    c.prefetch = 3;
    c.shuffle = true;
    c.seed = 9;
    ferry_loader *ref;
    ASSERT_OK(ferry_loader_create(&c, &ref));
    uint64_t want = run_epoch(ref, &f, NULL, NULL);
    ferry_loader_destroy(ref);

    atomic_store(&cnt.gets, 0);
    ferry_loader *l;
    ASSERT_OK(ferry_loader_create(&c, &l));
    /* The three slots' 12 samples are decoded ahead, then the workers wait. */
    for (int i = 0; i < 2000 && atomic_load(&cnt.gets) < 12; i++)
        usleep(1000);
    ASSERT_EQ_SIZE(atomic_load(&cnt.gets), 12);
    ASSERT_OK(ferry_loader_reset(l, 0));
    ASSERT_OK(ferry_loader_reset(l, 0)); /* twice is still nothing to redo */
    usleep(20000);
    ASSERT_EQ_SIZE(atomic_load(&cnt.gets), 12);
    size_t seen[40] = {0};
    ASSERT(run_epoch(l, &f, seen, NULL) == want);
    ASSERT_EQ_SIZE(atomic_load(&cnt.gets), 40);
    for (size_t i = 0; i < f.n; i++)
        ASSERT_EQ_SIZE(seen[i], 1);
    /* After a batch was delivered, reset(0) starts the epoch again. */
    ASSERT_OK(ferry_loader_reset(l, 0));
    ASSERT(run_epoch(l, &f, NULL, NULL) == want);
    ferry_loader_destroy(l);
    ferry_dataset_release(ds);
    fixture_free(&f);
}

TEST(bad_configs_are_named)
{
    fixture f;
    fixture_make(&f, 5);
    ferry_loader *l = (ferry_loader *)1;
    ferry_loader_config c = raw_config(NULL, 2, 1);
    ASSERT_STATUS(ferry_loader_create(&c, &l), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "dataset");
    ASSERT(l == NULL);
    c = raw_config(f.ds, 2, 1);
    c.std[0] = NAN;
    ASSERT_STATUS(ferry_loader_create(&c, &l), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "std[0]");
    c = raw_config(f.ds, 2, 1);
    c.prefetch = 1025;
    ASSERT_STATUS(ferry_loader_create(&c, &l), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "prefetch");
    c = raw_config(f.ds, 2, 1);
    c.wire_dtype = (ferry_wire_dtype)7;
    ASSERT_STATUS(ferry_loader_create(&c, &l), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "wire_dtype");
    c = raw_config(f.ds, 2, 1);
    c.pin_memory = (ferry_pin_memory)7;
    ASSERT_STATUS(ferry_loader_create(&c, &l), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "pin_memory");
    ASSERT_STATUS(ferry_loader_create(NULL, &l), FERRY_ERR_INVALID_ARG);
    ASSERT_STATUS(ferry_loader_next(NULL, NULL, NULL), FERRY_ERR_INVALID_ARG);
    ferry_loader_destroy(NULL);
    fixture_free(&f);
}

TEST(trace_writes_chrome_events)
{
    fixture f;
    fixture_make(&f, 20);
    const char *path = ft_tmp("trace.json");
    setenv("FERRY_TRACE", path, 1);
    ferry_loader_config c = raw_config(f.ds, 5, 2);
    ferry_loader *l;
    ASSERT_OK(ferry_loader_create(&c, &l));
    unsetenv("FERRY_TRACE");
    run_epoch(l, &f, NULL, NULL);
    ferry_loader_destroy(l);
    size_t n;
    char *text = ft_read_file(path, &n);
    text = realloc(text, n + 1);
    text[n] = '\0';
    ASSERT(text[0] == '[');
    ASSERT_STR_CONTAINS(text, "\"name\":\"decode\",\"ph\":\"X\"");
    ASSERT_STR_CONTAINS(text, "\"name\":\"next");
    size_t decodes = 0;
    for (const char *p = text; (p = strstr(p, "\"decode\"")); p++)
        decodes++;
    ASSERT_EQ_SIZE(decodes, 20);
    ASSERT(strstr(text, "]\n") != NULL);
    free(text);
    fixture_free(&f);
}

/* ---- GPU ---- */
TEST(cuda_f32_output_equals_cpu_bit_for_bit)
{
    ft_require_cuda();
    fixture f;
    fixture_make(&f, 64);
    ferry_loader_config c = raw_config(f.ds, 16, 2);
    c.out_dtype = FERRY_DTYPE_F32;
    c.mean[0] = 0.3f;
    c.std[0] = 0.7f;
    ferry_loader *lc, *lg;
    ASSERT_OK(ferry_loader_create(&c, &lc));
    c.device = ferry_cuda(0);
    c.pin_memory = FERRY_PIN_MEMORY_AUTO; /* pinned: the device is a GPU */
    ASSERT_OK(ferry_loader_create(&c, &lg));
    ferry_loader_stats s;
    ASSERT_OK(ferry_loader_stats_get(lg, &s));
    ASSERT(s.pinned);
    ferry_stream *st;
    ASSERT_OK(ferry_stream_create(ferry_cuda(0), &st));
    ferry_batch bc, bg;
    float host[16 * SAMPLE];
    int64_t lab[16];
    while (ferry_loader_next(lc, NULL, &bc) == FERRY_OK) {
        ASSERT_OK(ferry_loader_next(lg, st, &bg));
        ASSERT_OK(ferry_stream_synchronize(st));
        ASSERT_OK(ferry_tensor_copy_to_host(bg.images, host, sizeof host));
        ASSERT_OK(ferry_tensor_copy_to_host(bg.labels, lab, sizeof lab));
        ASSERT_MEM_EQ(host, ferry_tensor_data(bc.images), bc.size * SAMPLE * sizeof(float));
        ASSERT_MEM_EQ(lab, ferry_tensor_data(bc.labels), bc.size * sizeof(int64_t));
    }
    ASSERT_OK(ferry_loader_stats_get(lg, &s));
    ASSERT(s.h2d_bytes > 0);
    ASSERT_EQ_INT(s.allocs_after_warmup, 0);
    ferry_loader_destroy(lg);
    ferry_loader_destroy(lc);
    ferry_stream_destroy(st);
    fixture_free(&f);
}

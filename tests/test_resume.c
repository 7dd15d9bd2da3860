/* Resuming a loader: a state taken between next() calls and restored into a new
 * loader (other workers, prefetch, device) gives the rest of the run bit for bit;
 * with another world size every sample of the interrupted epoch is delivered
 * once (plus the stated padding) and later epochs are a fresh run's; a state
 * that does not fit is refused naming the field. */
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "harness.h"

enum { N = 30, H = 8, W = 9, C = 3, BATCH = 4 };
#define SAMPLE ((size_t)C * H * W)

static const char *make_folder_named(const char *name, size_t n, const char *prefix)
{
    const char *root = ft_tmp(name);
    uint8_t px[H * W * C];
    char path[512];
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < sizeof px; j++)
            px[j] = (uint8_t)(i * 29 + j * 7 + (j % W) * 13);
        snprintf(path, sizeof path, "%s/c%zu/%s%03zu.png", root, i % 2, prefix, i);
        ft_write_file(path, "", 0);
        ASSERT_OK(ferry_png_save(path, px, W, H, C));
    }
    return root;
}

static const char *make_folder(const char *name, size_t n) { return make_folder_named(name, n, "img"); }

static ferry_dataset *open_folder(const char *root)
{
    ferry_image_config cfg = ferry_image_config_default();
    cfg.channels = C;
    cfg.height = H;
    cfg.width = W;
    cfg.random_crop_pad = 2;
    cfg.random_hflip = true;
    ferry_dataset *ds = NULL;
    ASSERT_OK(ferry_dataset_image_folder(root, &cfg, &ds));
    return ds;
}

typedef struct loader_opts {
    size_t workers, prefetch, rank, world, batch;
    const char *device;
} loader_opts;

static ferry_loader *make_loader(ferry_dataset *ds, loader_opts o)
{
    ferry_loader_config c = ferry_loader_config_default();
    c.dataset = ds;
    c.batch_size = o.batch ? o.batch : BATCH;
    c.shuffle = true;
    c.seed = 17;
    c.num_workers = o.workers ? o.workers : FERRY_LOADER_NO_WORKERS;
    c.prefetch = o.prefetch ? o.prefetch : 2;
    c.device = o.device ? ft_device(o.device) : ferry_cpu();
    c.pin_memory = FERRY_PIN_MEMORY_OFF;
    c.out_dtype = FERRY_DTYPE_U8;
    if (o.world) {
        c.sampler = FERRY_SAMPLER_DISTRIBUTED;
        c.rank = o.rank;
        c.world_size = o.world;
    }
    ferry_loader *l = NULL;
    ASSERT_OK(ferry_loader_create(&c, &l));
    return l;
}

/* A run of batches: indices and image bytes, in delivery order. */
typedef struct trace {
    size_t n;
    size_t idx[4 * N];
    uint8_t *img;
} trace;

static void trace_init(trace *t)
{
    t->n = 0;
    t->img = malloc(4 * N * SAMPLE);
    ASSERT(t->img);
}

/* Appends up to max_batches of the epoch (all when SIZE_MAX); true at its end. */
static bool take(ferry_loader *l, size_t max_batches, trace *t)
{
    ferry_batch b;
    for (size_t k = 0; k < max_batches; k++) {
        ferry_status st = ferry_loader_next(l, NULL, &b);
        if (st == FERRY_END)
            return true;
        ASSERT_OK(st);
        ASSERT(t->n + b.size <= 4 * N);
        ferry_tensor *h = NULL;
        ASSERT_OK(ferry_tensor_cpu(b.images, &h));
        memcpy(t->img + t->n * SAMPLE, ferry_tensor_data(h), b.size * SAMPLE);
        ferry_tensor_release(h);
        memcpy(t->idx + t->n, b.indices, b.size * sizeof *b.indices);
        t->n += b.size;
    }
    return false;
}

/* State through its text form, as a checkpoint carries it. */
static ferry_loader_state round_trip(ferry_loader *l)
{
    ferry_loader_state s, back;
    char text[FERRY_LOADER_STATE_TEXT_MAX];
    ASSERT_OK(ferry_loader_state_get(l, &s));
    ASSERT_OK(ferry_loader_state_format(&s, text, sizeof text));
    ASSERT_OK(ferry_loader_state_parse(text, &back));
    ASSERT_EQ_INT(back.seed, s.seed);
    ASSERT_EQ_INT(back.epoch, s.epoch);
    ASSERT_EQ_INT(back.position, s.position);
    ASSERT_EQ_INT(back.resumed_from, s.resumed_from);
    ASSERT_EQ_INT(back.world_size, s.world_size);
    ASSERT_EQ_INT(back.batches, s.batches);
    ASSERT_EQ_INT(back.dataset_id, s.dataset_id);
    ASSERT_EQ_INT(back.done, s.done);
    return back;
}

TEST(restore_continues_bit_for_bit_with_other_workers)
{
    ferry_dataset *ds = open_folder(make_folder("same", N));
    const char *devs[2] = {"cpu", "cuda:0"};
    size_t ndev = ferry_cuda_device_count() > 0 ? 2 : 1;
    /* The uninterrupted run: epochs 0 and 1. */
    trace ref;
    trace_init(&ref);
    ferry_loader *l = make_loader(ds, (loader_opts){.workers = 2});
    ASSERT(take(l, SIZE_MAX, &ref));
    size_t epoch0 = ref.n;
    ASSERT_OK(ferry_loader_reset(l, 1));
    ASSERT(take(l, SIZE_MAX, &ref));
    ferry_loader_destroy(l);
    size_t nb = (N + BATCH - 1) / BATCH;

    static const size_t cuts[] = {0, 1, 3, 7, 8}; /* 8: after the epoch's last batch */
    for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
        for (size_t w = 0; w <= 2; w++) {
            trace t;
            trace_init(&t);
            l = make_loader(ds, (loader_opts){.workers = w});
            take(l, cuts[c], &t);
            ferry_loader_state s = round_trip(l);
            ASSERT_EQ_INT(s.batches, cuts[c] < nb ? cuts[c] : nb);
            ASSERT_EQ_INT(s.done, cuts[c] >= nb);
            ferry_loader_destroy(l);

            const char *dev = devs[(c + w) % ndev];
            l = make_loader(ds, (loader_opts){.workers = 2 - w + 1, .prefetch = 1 + w, .device = dev});
            ASSERT_OK(ferry_loader_restore(l, &s));
            ASSERT(take(l, SIZE_MAX, &t));
            ASSERT_OK(ferry_loader_reset(l, 1));
            ASSERT(take(l, SIZE_MAX, &t));
            ferry_loader_destroy(l);
            ASSERT_EQ_SIZE(t.n, ref.n);
            ASSERT_MSG(!memcmp(t.idx, ref.idx, ref.n * sizeof *ref.idx) &&
                       !memcmp(t.img, ref.img, ref.n * SAMPLE),
                       "cut after %zu batches, %zu then %zu workers (%s): not the uninterrupted run",
                       cuts[c], w, 2 - w + 1, dev);
            free(t.img);
        }
    }
    ASSERT_EQ_SIZE(epoch0, N);
    free(ref.img);
    ferry_dataset_release(ds);
}

/* Ranks of world w over the dataset, each delivering k batches; returns the
 * indices delivered by all, and rank 0's state. */
static size_t run_ranks(ferry_dataset *ds, size_t world, size_t k, size_t *out,
                        ferry_loader_state *state, const ferry_loader_state *from, uint64_t epoch)
{
    size_t n = 0;
    for (size_t r = 0; r < world; r++) {
        ferry_loader *l = make_loader(ds, (loader_opts){.workers = r % 3, .rank = r, .world = world});
        if (from)
            ASSERT_OK(ferry_loader_restore(l, from));
        else if (epoch)
            ASSERT_OK(ferry_loader_reset(l, epoch));
        trace t;
        trace_init(&t);
        take(l, k, &t);
        memcpy(out + n, t.idx, t.n * sizeof *t.idx);
        n += t.n;
        free(t.img);
        if (r == 0 && state)
            *state = round_trip(l);
        ferry_loader_destroy(l);
    }
    return n;
}

static void elastic(size_t w1, size_t w2, size_t k)
{
    ferry_dataset *ds = open_folder(make_folder(w1 == 2 ? "el2" : "el1", N));
    size_t got[8 * N];
    ferry_loader_state s;
    size_t n1 = run_ranks(ds, w1, k, got, &s, NULL, 0);
    ASSERT_EQ_SIZE(n1, k * BATCH * w1);
    ASSERT_EQ_INT(s.position, k * BATCH * w1);
    size_t n2 = run_ranks(ds, w2, SIZE_MAX, got + n1, NULL, &s, 0);
    /* Every sample once; the only repeats are the padding of the rest. */
    size_t rest = N - n1, pad = (rest + w2 - 1) / w2 * w2 - rest;
    ASSERT_EQ_SIZE(n2, rest + pad);
    size_t seen[N] = {0};
    for (size_t i = 0; i < n1 + n2; i++) {
        ASSERT(got[i] < N);
        seen[got[i]]++;
    }
    size_t twice = 0;
    for (size_t i = 0; i < N; i++) {
        ASSERT_MSG(seen[i] >= 1 && seen[i] <= 2, "%zu -> %zu ranks: sample %zu seen %zu times",
                   w1, w2, i, seen[i]);
        twice += seen[i] == 2;
    }
    ASSERT_EQ_SIZE(twice, pad);
    /* The next epoch is what a fresh run on w2 ranks gives. */
    size_t a[2 * N], b[2 * N];
    ferry_loader_state next = s;
    next.epoch = s.epoch + 1;
    next.batches = next.position = next.resumed_from = 0;
    next.done = false;
    size_t na = run_ranks(ds, w2, SIZE_MAX, a, NULL, &next, 0);
    size_t nb = run_ranks(ds, w2, SIZE_MAX, b, NULL, NULL, s.epoch + 1);
    ASSERT_EQ_SIZE(na, nb);
    ASSERT(!memcmp(a, b, na * sizeof *a));
    ferry_dataset_release(ds);
}

/* A state saved in an epoch that was itself resumed on another world size
 * resumes exactly on the same world size: each rank's batches (indices and
 * pixels, the padding of the rest included) are those of the run that was
 * never stopped. */
TEST(a_resumed_epoch_saved_again_resumes_exactly)
{
    ferry_dataset *ds = open_folder(make_folder("rr", N));
    enum { W2 = 3 }; /* 30 - 2 * 4 = 22 samples left over 3 ranks: 2 of padding */
    ferry_loader *l = make_loader(ds, (loader_opts){.workers = 1});
    trace t;
    trace_init(&t);
    take(l, 2, &t);
    ferry_loader_state s1 = round_trip(l);
    ferry_loader_destroy(l);
    free(t.img);
    for (size_t r = 0; r < W2; r++) {
        trace full, part;
        trace_init(&full);
        trace_init(&part);
        ferry_loader *a = make_loader(ds, (loader_opts){.workers = r % 3, .rank = r, .world = W2});
        ASSERT_OK(ferry_loader_restore(a, &s1));
        take(a, SIZE_MAX, &full);
        ferry_loader_destroy(a);
        ferry_loader *b = make_loader(ds, (loader_opts){.workers = r % 3, .rank = r, .world = W2});
        ASSERT_OK(ferry_loader_restore(b, &s1));
        take(b, 1, &part);
        ferry_loader_state s2 = round_trip(b);
        ASSERT_EQ_INT(s2.resumed_from, s1.position);
        ferry_loader_destroy(b);
        ferry_loader *c = make_loader(ds, (loader_opts){.workers = (r + 1) % 3, .rank = r, .world = W2});
        ASSERT_OK(ferry_loader_restore(c, &s2));
        ferry_batch first;
        ASSERT_OK(ferry_loader_next(c, NULL, &first));
        ASSERT_EQ_SIZE(first.index, 1); /* the epoch's second batch, as it was */
        ASSERT_OK(ferry_loader_restore(c, &s2));
        take(c, SIZE_MAX, &part);
        ferry_loader_destroy(c);
        ASSERT_EQ_SIZE(part.n, full.n);
        for (size_t i = 0; i < full.n; i++)
            ASSERT_MSG(part.idx[i] == full.idx[i], "rank %zu, sample %zu of the resumed epoch: %zu, "
                       "not %zu", r, i, part.idx[i], full.idx[i]);
        ASSERT_MEM_EQ(part.img, full.img, full.n * SAMPLE);
        free(full.img);
        free(part.img);
    }
    ferry_dataset_release(ds);
}

/* Sample 2 of an 8-sample dataset holds its worker until released. */
static atomic_bool sample2_free;
static ferry_status held_get(void *user, size_t i, void *dst, size_t n, const ferry_sample_ctx *ctx,
                             int64_t *label)
{
    (void)user;
    (void)ctx;
    while (i == 2 && !atomic_load(&sample2_free))
        usleep(1000);
    memset(dst, (int)i, n);
    *label = (int64_t)i;
    return FERRY_OK;
}

/* Out of order, a state is refused while a batch before the last delivered
 * one is still loading (restore would skip it and repeat a later one), and
 * taken as usual at the epoch's start and end. */
TEST(out_of_order_state_only_where_it_resumes_exactly)
{
    ferry_dataset_callbacks cb = {.len = 8, .num_classes = 8, .get = held_get,
                                  .format = {1, 1, 1, FERRY_LAYOUT_CHW, FERRY_DTYPE_U8}};
    ferry_dataset *ds;
    ASSERT_OK(ferry_dataset_custom(&cb, NULL, &ds));
    ferry_loader_config c = ferry_loader_config_default();
    c.dataset = ds;
    c.batch_size = 2;
    c.num_workers = 2;
    c.prefetch = 4;
    c.out_of_order = true;
    c.device = ferry_cpu();
    c.pin_memory = FERRY_PIN_MEMORY_OFF;
    c.out_dtype = FERRY_DTYPE_U8;
    atomic_store(&sample2_free, false);
    ferry_loader *l;
    ASSERT_OK(ferry_loader_create(&c, &l));
    ferry_loader_state st;
    ASSERT_OK(ferry_loader_state_get(l, &st)); /* nothing delivered yet */
    ferry_batch b;
    for (int k = 0; k < 2; k++) { /* two of batches 0, 2, 3: batch 1 waits for sample 2 */
        ASSERT_OK(ferry_loader_next(l, NULL, &b));
        ASSERT(b.index != 1);
    }
    ASSERT_STATUS(ferry_loader_state_get(l, &st), FERRY_ERR_BAD_STATE);
    ASSERT_STR_CONTAINS(ferry_last_error(), "batch 1 of the epoch is not delivered yet");
    atomic_store(&sample2_free, true);
    while (ferry_loader_next(l, NULL, &b) == FERRY_OK)
        ;
    ASSERT_OK(ferry_loader_state_get(l, &st));
    ASSERT(st.done && st.batches == 4);
    ferry_loader_destroy(l);
    ferry_dataset_release(ds);
}

TEST(elastic_two_ranks_to_one) { elastic(2, 1, 2); }
TEST(elastic_one_rank_to_two) { elastic(1, 2, 3); }
TEST(elastic_two_ranks_to_three) { elastic(2, 3, 1); }


/* A refusal names the field in words: no 64-bit fingerprint in it. */
static void assert_no_hash(const char *msg)
{
    size_t run = 0;
    for (const char *p = msg; *p; p++) {
        run = (*p >= '0' && *p <= '9') ? run + 1 : 0;
        ASSERT_MSG(run < 10, "a raw number in: %s", msg);
    }
}
TEST(a_state_that_does_not_fit_is_refused_naming_the_field)
{
    ferry_dataset *ds = open_folder(make_folder("fit", N));
    ferry_loader *l = make_loader(ds, (loader_opts){.workers = 1});
    trace t;
    trace_init(&t);
    take(l, 2, &t);
    free(t.img);
    ferry_loader_state s;
    ASSERT_OK(ferry_loader_state_get(l, &s));
    ferry_loader_destroy(l);

    ferry_loader_config c = ferry_loader_config_default();
    c.dataset = ds;
    c.batch_size = BATCH + 1;
    c.shuffle = true;
    c.seed = 17;
    c.device = ferry_cpu();
    ASSERT_OK(ferry_loader_create(&c, &l));
    ASSERT_STATUS(ferry_loader_restore(l, &s), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "the batch size is 4 in the state, 5 here");
    ferry_loader_destroy(l);

    /* One more file: another dataset. */
    ferry_dataset *more = open_folder(make_folder("fit_more", N + 1));
    l = make_loader(more, (loader_opts){.workers = 1});
    ASSERT_STATUS(ferry_loader_restore(l, &s), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "the dataset's length is 30 in the state, 31 here");
    ferry_loader_destroy(l);
    ferry_dataset_release(more);

    /* The same files in another folder: the same dataset (it may move). */
    ferry_dataset *moved = open_folder(make_folder("fit_moved", N));
    l = make_loader(moved, (loader_opts){.workers = 1});
    ASSERT_OK(ferry_loader_restore(l, &s));
    ferry_loader_destroy(l);
    ferry_dataset_release(moved);

    /* Same length, other names. */
    ferry_dataset *other = open_folder(make_folder_named("fit_other", N, "pic"));
    l = make_loader(other, (loader_opts){.workers = 1});
    ASSERT_STATUS(ferry_loader_restore(l, &s), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "the dataset differs from the one it was saved with");
    assert_no_hash(ferry_last_error());
    ferry_loader_destroy(l);
    ferry_dataset_release(other);

    /* Another seed, with a split made by it (as the samples' --seed does): the
     * seed is named, in numbers the user gave, not the split's fingerprint. */
    ferry_dataset *tr17, *va17, *tr18, *va18;
    ASSERT_OK(ferry_dataset_split(ds, 0.2, 17, &tr17, &va17));
    ASSERT_OK(ferry_dataset_split(ds, 0.2, 18, &tr18, &va18));
    c.dataset = tr17;
    c.batch_size = BATCH;
    ASSERT_OK(ferry_loader_create(&c, &l));
    ASSERT_OK(ferry_loader_state_get(l, &s));
    ferry_loader_destroy(l);
    c.dataset = tr18;
    c.seed = 18;
    ASSERT_OK(ferry_loader_create(&c, &l));
    ASSERT_STATUS(ferry_loader_restore(l, &s), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "the seed is 17 in the state, 18 here");
    ferry_loader_destroy(l);
    c.seed = 17;
    c.shuffle = false;
    ASSERT_OK(ferry_loader_create(&c, &l));
    ASSERT_STATUS(ferry_loader_restore(l, &s), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "the split or subset");
    assert_no_hash(ferry_last_error());
    ferry_loader_destroy(l);
    /* Bounds restore would refuse, refused by state_check too (a checkpoint
     * checks with it before it changes anything). */
    c.dataset = tr17;
    c.shuffle = true;
    ASSERT_OK(ferry_loader_create(&c, &l));
    ferry_loader_state far = s;
    far.batches = 99;
    ASSERT_STATUS(ferry_loader_state_check(l, &far), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "99 batches delivered, but an epoch has");
    far = s;
    far.epoch = UINT64_C(1) << 56;
    ASSERT_STATUS(ferry_loader_state_check(l, &far), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "past 2^56 - 1");
    ASSERT_OK(ferry_loader_state_check(l, &s));
    ferry_loader_destroy(l);
    ferry_dataset_release(tr17);
    ferry_dataset_release(va17);
    ferry_dataset_release(tr18);
    ferry_dataset_release(va18);

    ferry_loader_state bad;
    ASSERT_STATUS(ferry_loader_state_parse("ferry-loader-state/1 seed=x", &bad), FERRY_ERR_FORMAT);
    ASSERT_STR_CONTAINS(ferry_last_error(), "seed");
    ASSERT_STATUS(ferry_loader_state_parse("something else", &bad), FERRY_ERR_FORMAT);
    char text[FERRY_LOADER_STATE_TEXT_MAX];
    ASSERT_OK(ferry_loader_state_format(&s, text, sizeof text));
    strcat(text, " extra=1");
    ASSERT_STATUS(ferry_loader_state_parse(text, &bad), FERRY_ERR_FORMAT);
    ASSERT_STATUS(ferry_loader_state_format(&s, text, 20), FERRY_ERR_INVALID_ARG);
    ferry_dataset_release(ds);
}

/* One process (the random sampler, batch 8) resumed on two ranks (the
 * distributed sampler, batch 4 each: the same global batch), and back: the
 * samples of each global step are the same set as in the one-process run. */
TEST(elastic_between_one_process_and_two_ranks_keeps_the_global_batches)
{
    ferry_dataset *ds = open_folder(make_folder("el_batch", 32));
    /* The one-process run: 4 batches of 8. */
    ferry_loader *one = make_loader(ds, (loader_opts){.workers = 1, .batch = 8});
    trace ref;
    trace_init(&ref);
    ASSERT(take(one, SIZE_MAX, &ref));
    ferry_loader_destroy(one);
    one = make_loader(ds, (loader_opts){.workers = 1, .batch = 8});
    trace t;
    trace_init(&t);
    take(one, 1, &t);
    ferry_loader_state s = round_trip(one);
    ferry_loader_destroy(one);
    /* Steps 2 to 4 on two ranks of 4. */
    ferry_loader *r[2];
    trace part[2];
    for (size_t k = 0; k < 2; k++) {
        r[k] = make_loader(ds, (loader_opts){.workers = k, .rank = k, .world = 2, .batch = 4});
        ASSERT_OK(ferry_loader_restore(r[k], &s));
        trace_init(&part[k]);
        ASSERT(take(r[k], SIZE_MAX, &part[k]));
        ASSERT_EQ_SIZE(part[k].n, 12);
    }
    for (size_t step = 0; step < 3; step++) {
        size_t got[8], want[8];
        for (size_t k = 0; k < 2; k++)
            memcpy(got + 4 * k, part[k].idx + 4 * step, 4 * sizeof *got);
        memcpy(want, ref.idx + 8 * (step + 1), sizeof want);
        for (size_t i = 0; i < 8; i++) {
            bool found = false;
            for (size_t j = 0; j < 8; j++)
                found |= got[j] == want[i];
            ASSERT_MSG(found, "step %zu: sample %zu of the one-process batch is not on either rank",
                       step + 2, want[i]);
        }
    }
    /* And back to one process from the two ranks' state after their first step
     * there (two global steps in all). */
    ferry_loader_destroy(r[0]);
    ferry_loader_destroy(r[1]);
    r[0] = make_loader(ds, (loader_opts){.workers = 0, .rank = 0, .world = 2, .batch = 4});
    ASSERT_OK(ferry_loader_restore(r[0], &s));
    free(part[0].img);
    trace_init(&part[0]);
    take(r[0], 1, &part[0]);
    ferry_loader_state s2 = round_trip(r[0]);
    ASSERT_EQ_INT(s2.position, 16);
    one = make_loader(ds, (loader_opts){.workers = 2, .batch = 8});
    ASSERT_OK(ferry_loader_restore(one, &s2));
    free(t.img);
    trace_init(&t);
    ASSERT(take(one, SIZE_MAX, &t));
    ASSERT_EQ_SIZE(t.n, 16);
    ASSERT(!memcmp(t.idx, ref.idx + 16, 16 * sizeof *t.idx));
    ferry_loader_destroy(one);
    ferry_loader_destroy(r[0]);
    free(ref.img);
    free(t.img);
    free(part[0].img);
    free(part[1].img);
    ferry_dataset_release(ds);
}

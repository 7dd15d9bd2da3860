/* Random augmentation through the loader. The random crop and flip of sample i
 * depend only on (seed, epoch, i) and the train switch: the same batches for 0, 1,
 * 2 and 8 workers, on the CPU and on a GPU; other batches in another epoch or with
 * another seed; none at all with train = false; and the same under the skip
 * policy with corrupt files mixed in. Every delivered image is checked against
 * ferry_dataset_get for its index, with the loader's seed and epoch. */
#include <stdlib.h>

#include "harness.h"

enum { N = 40, H = 10, W = 12, C = 3, BATCH = 7, PAD = 3 };
#define SAMPLE ((size_t)C * H * W)

/* Folder positions (class c, file k) of the corrupt files in the "bad" tree. */
static bool is_bad_file(size_t i) { return i == 4 || i == 17 || i == 31; }

/* ROOT/c<i%3>/img<i>.png, N images whose pixels differ left to right (so a flip
 * shows) and from image to image. */
static const char *make_folder(const char *name, bool with_bad)
{
    const char *root = ft_tmp(name);
    uint8_t px[H * W * C];
    char path[512];
    for (size_t i = 0; i < N; i++) {
        snprintf(path, sizeof path, "%s/c%zu/img%03zu.png", root, i % 3, i);
        if (with_bad && is_bad_file(i)) {
            static const uint8_t junk[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13,
                                           'I', 'H', 'D', 'R', 1, 2, 3};
            ft_write_file(path, junk, sizeof junk);
            continue;
        }
        for (size_t y = 0; y < H; y++)
            for (size_t x = 0; x < W; x++)
                for (size_t c = 0; c < C; c++)
                    px[(y * W + x) * C + c] = (uint8_t)(1 + i * 37 + y * 11 + x * 19 + c * 71);
        ft_write_file(path, "", 0); /* creates the class folder */
        ASSERT_OK(ferry_png_save(path, px, W, H, C));
    }
    return root;
}

static ferry_dataset *open_folder(const char *root)
{
    ferry_image_config cfg = ferry_image_config_default();
    cfg.channels = C;
    cfg.height = H;
    cfg.width = W;
    cfg.random_crop_pad = PAD;
    cfg.random_hflip = true;
    ferry_dataset *ds = NULL;
    ASSERT_OK(ferry_dataset_image_folder(root, &cfg, &ds));
    ASSERT_EQ_SIZE(ferry_dataset_len(ds), N);
    return ds;
}

typedef struct run_opts {
    size_t workers;
    uint64_t seed, epoch;
    bool train, shuffle, skip;
    const char *device;
} run_opts;

typedef struct epoch_out {
    uint8_t *images;    /* delivered samples in order, SAMPLE bytes each */
    size_t indices[N];  /* dataset index of each */
    size_t n;
    uint64_t skipped;
} epoch_out;

/* The batch's images on the host (from a GPU they are copied back). */
static void batch_bytes(const ferry_batch *b, uint8_t *dst)
{
    ferry_tensor *h = NULL;
    ASSERT_OK(ferry_tensor_cpu(b->images, &h));
    ASSERT_EQ_INT(ferry_tensor_dtype(h), FERRY_DTYPE_U8);
    memcpy(dst, ferry_tensor_data(h), b->size * SAMPLE);
    ferry_tensor_release(h);
}

/* One epoch of the loader with these options. */
static epoch_out run(ferry_dataset *ds, run_opts o)
{
    ferry_loader_config c = ferry_loader_config_default();
    c.dataset = ds;
    c.batch_size = BATCH;
    c.num_workers = o.workers ? o.workers : FERRY_LOADER_NO_WORKERS;
    c.seed = o.seed;
    c.shuffle = o.shuffle;
    c.eval = !o.train;
    c.on_error = o.skip ? FERRY_ON_ERROR_SKIP : FERRY_ON_ERROR_FAIL;
    c.device = ft_device(o.device);
    c.out_dtype = FERRY_DTYPE_U8;
    ferry_loader *l = NULL;
    ASSERT_OK(ferry_loader_create(&c, &l));
    /* Workers start on epoch 0 at create and may have skipped files there: the
     * stats count only what next() delivers. */
    if (o.epoch)
        ASSERT_OK(ferry_loader_reset(l, o.epoch));
    epoch_out e = {.images = malloc(N * SAMPLE)};
    ASSERT(e.images);
    ferry_batch b;
    ferry_status st;
    while ((st = ferry_loader_next(l, NULL, &b)) == FERRY_OK) {
        ASSERT(e.n + b.size <= N);
        ASSERT_EQ_INT(b.epoch, o.epoch);
        batch_bytes(&b, e.images + e.n * SAMPLE);
        memcpy(e.indices + e.n, b.indices, b.size * sizeof *b.indices);
        e.n += b.size;
    }
    ASSERT_STATUS(st, FERRY_END);
    ferry_loader_stats s;
    ASSERT_OK(ferry_loader_stats_get(l, &s));
    e.skipped = s.skipped;
    ferry_loader_destroy(l);
    return e;
}

/* Each delivered image is what ferry_dataset_get gives for its index with the
 * loader's (seed, epoch, train). */
static void check_against_get(ferry_dataset *ds, const epoch_out *e, run_opts o)
{
    uint8_t want[SAMPLE];
    ferry_sample_ctx ctx = {.seed = o.seed, .epoch = o.epoch, .train = o.train};
    for (size_t k = 0; k < e->n; k++) {
        int64_t label = -1;
        ASSERT_OK(ferry_dataset_get(ds, e->indices[k], want, sizeof want, &ctx, &label));
        ASSERT_MSG(memcmp(want, e->images + k * SAMPLE, SAMPLE) == 0,
                   "sample %zu (index %zu, %s, %zu workers, seed %llu, epoch %llu) differs "
                   "from ferry_dataset_get", k, e->indices[k], o.device, o.workers,
                   (unsigned long long)o.seed, (unsigned long long)o.epoch);
    }
}

static bool same_epoch(const epoch_out *a, const epoch_out *b)
{
    return a->n == b->n && !memcmp(a->indices, b->indices, a->n * sizeof a->indices[0]) &&
           !memcmp(a->images, b->images, a->n * SAMPLE);
}

/* Samples at the same position whose images differ. */
static size_t count_differing(const epoch_out *a, const epoch_out *b)
{
    size_t d = 0;
    for (size_t k = 0; k < a->n && k < b->n; k++)
        d += memcmp(a->images + k * SAMPLE, b->images + k * SAMPLE, SAMPLE) != 0;
    return d;
}

/* The devices to run on: the CPU, and cuda:0 when there is one (simulated too). */
static size_t devices(const char **out)
{
    out[0] = "cpu";
    if (ferry_cuda_device_count() > 0) {
        out[1] = "cuda:0";
        return 2;
    }
    return 1;
}

TEST(augmented_batches_do_not_depend_on_workers_or_device)
{
    ferry_dataset *ds = open_folder(make_folder("clean", false));
    static const size_t workers[] = {0, 1, 2, 8};
    const char *dev[2];
    size_t ndev = devices(dev);
    for (int shuffle = 0; shuffle <= 1; shuffle++) {
        run_opts o = {.seed = 11, .epoch = 2, .train = true, .shuffle = shuffle, .device = "cpu"};
        epoch_out ref = run(ds, o);
        ASSERT_EQ_SIZE(ref.n, N);
        check_against_get(ds, &ref, o);
        for (size_t d = 0; d < ndev; d++) {
            for (size_t w = 0; w < sizeof workers / sizeof workers[0]; w++) {
                o.workers = workers[w];
                o.device = dev[d];
                epoch_out e = run(ds, o);
                ASSERT_MSG(same_epoch(&e, &ref), "%s, %zu workers, shuffle %d: not the batches "
                           "of 0 workers on the CPU", dev[d], workers[w], shuffle);
                free(e.images);
            }
        }
        free(ref.images);
    }
    ferry_dataset_release(ds);
}

TEST(augmentation_changes_with_epoch_and_seed_and_stops_when_not_training)
{
    ferry_dataset *ds = open_folder(make_folder("clean2", false));
    /* Sequential order, so only the augmentation can make two epochs differ. */
    run_opts o = {.workers = 2, .seed = 5, .epoch = 0, .train = true, .device = "cpu"};
    epoch_out e0 = run(ds, o);
    check_against_get(ds, &e0, o);
    o.epoch = 1;
    epoch_out e1 = run(ds, o);
    check_against_get(ds, &e1, o);
    o.epoch = 0;
    o.seed = 6;
    epoch_out s6 = run(ds, o);
    check_against_get(ds, &s6, o);
    /* Crop offsets (7 x 7 choices) and flips (2): nearly every sample changes. */
    ASSERT_MSG(count_differing(&e0, &e1) > N / 2, "epochs 0 and 1 differ in %zu of %d samples",
               count_differing(&e0, &e1), N);
    ASSERT_MSG(count_differing(&e0, &s6) > N / 2, "seeds 5 and 6 differ in %zu of %d samples",
               count_differing(&e0, &s6), N);

    /* train = false: the plain decoded images, the same in every epoch. */
    o = (run_opts){.workers = 2, .seed = 5, .epoch = 0, .train = false, .device = "cpu"};
    epoch_out p0 = run(ds, o);
    check_against_get(ds, &p0, o);
    o.epoch = 3;
    epoch_out p3 = run(ds, o);
    ASSERT(same_epoch(&p0, &p3));
    ferry_image_config plain = ferry_image_config_default();
    plain.channels = C;
    plain.height = H;
    plain.width = W;
    ferry_dataset *pds = NULL;
    ASSERT_OK(ferry_dataset_image_folder(ft_tmp("clean2"), &plain, &pds));
    o.epoch = 0;
    o.train = true; /* a dataset without augmentation: train changes nothing */
    epoch_out q = run(pds, o);
    ASSERT_MSG(same_epoch(&p0, &q), "train = false is not the un-augmented image");
    ASSERT_EQ_SIZE(count_differing(&p0, &e0) > N / 2, 1);

    epoch_out *all[] = {&e0, &e1, &s6, &p0, &p3, &q};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free(all[i]->images);
    ferry_dataset_release(pds);
    ferry_dataset_release(ds);
}

TEST(augmentation_under_the_skip_policy_does_not_depend_on_workers)
{
    ferry_dataset *ds = open_folder(make_folder("bad", true));
    static const size_t workers[] = {0, 1, 2, 8};
    const char *dev[2];
    size_t ndev = devices(dev);
    run_opts o = {.seed = 3, .epoch = 1, .train = true, .shuffle = true, .skip = true,
                  .device = "cpu"};
    epoch_out ref = run(ds, o);
    ASSERT_EQ_SIZE(ref.n, N); /* batches stay full: the next good sample stands in */
    ASSERT(ref.skipped >= 3);
    check_against_get(ds, &ref, o);
    for (size_t k = 0; k < ref.n; k++) {
        const char *name = ferry_dataset_sample_name(ds, ref.indices[k]);
        ASSERT_MSG(name && !strstr(name, "img004") && !strstr(name, "img017") &&
                   !strstr(name, "img031"), "a corrupt file was delivered: %s", name);
    }
    for (size_t d = 0; d < ndev; d++) {
        for (size_t w = 0; w < sizeof workers / sizeof workers[0]; w++) {
            o.workers = workers[w];
            o.device = dev[d];
            epoch_out e = run(ds, o);
            ASSERT_MSG(same_epoch(&e, &ref), "%s, %zu workers: not the batches of 0 workers",
                       dev[d], workers[w]);
            ASSERT_MSG(e.skipped == ref.skipped, "%s %zu workers: skipped %llu vs %llu", dev[d], workers[w], (unsigned long long)e.skipped, (unsigned long long)ref.skipped);
            free(e.images);
        }
    }
    free(ref.images);
    ferry_dataset_release(ds);
}

/* Golden values: the random streams of a given seed are a promise. A resumed
 * run, and anyone comparing two runs, depends on the same seed giving the same
 * epoch order, split and augmentation draws in every version. A change that
 * keeps the streams' statistics (a generator that skips a block, a flip read
 * from another bit) passes every statistical test; it fails here. The values
 * were written from the code of FERRY_RNG_STREAMS_VERSION 1, and the streaming
 * order over ranks again for version 2 (0.2.0): a change must be deliberate,
 * bump that version and say so in the README.
 * FERRY_GOLDEN_PRINT=1 prints the values the code gives now. */
#include <stdlib.h>

#include "harness.h"

static bool printing(void) { return getenv("FERRY_GOLDEN_PRINT") != NULL; }

/* Compares got[0..n) with want, or prints got as a C initialiser. */
static void golden_u64(const char *what, const uint64_t *got, const uint64_t *want, size_t n)
{
    if (printing()) {
        printf("  %s: {", what);
        for (size_t i = 0; i < n; i++)
            printf("%s%llu", i ? ", " : "", (unsigned long long)got[i]);
        printf("}\n");
        return;
    }
    for (size_t i = 0; i < n; i++)
        ASSERT_MSG(got[i] == want[i],
                   "%s: value %zu is %llu, the golden value %llu: the random streams changed "
                   "(deliberately? bump FERRY_RNG_STREAMS_VERSION and rewrite the golden values)",
                   what, i, (unsigned long long)got[i], (unsigned long long)want[i]);
}

TEST(rng_streams_version_is_the_one_pinned)
{
    ASSERT_EQ_INT(FERRY_RNG_STREAMS_VERSION, 2);
}

/* The first words of each purpose's stream, and of ferry_rng_below/uniform. */
TEST(philox_words_of_every_purpose)
{
    static const uint64_t purposes[] = {FERRY_RNG_SHUFFLE, FERRY_RNG_AUGMENT, FERRY_RNG_SPLIT, FERRY_RNG_INIT,
                                        FERRY_RNG_DROPOUT};
    static const uint64_t want[5][6] = {
        {3739898963, 537348329, 2367738767, 29982035, 2885559049, 1135083913},
        {2258689109, 3549192591, 1846020557, 255166830, 4181846636, 338778058},
        {856546522, 3797145619, 4069525157, 3501717325, 2066253183, 1884345362},
        {3059415541, 2777071852, 285848907, 3954669071, 3436875598, 4288076914},
        {3845567510, 3191557996, 3075949873, 2187820202, 784899426, 2698730304},
    };
    for (size_t p = 0; p < 5; p++) {
        ferry_rng r;
        ferry_rng_init(&r, 42, purposes[p] | 3, 7);
        uint64_t got[6];
        for (size_t i = 0; i < 6; i++) /* six words: across a block boundary */
            got[i] = ferry_rng_u32(&r);
        char what[64];
        snprintf(what, sizeof what, "purpose %zu, seed 42, epoch 3, sample 7", p + 1);
        golden_u64(what, got, want[p], 6);
    }
    ferry_rng r;
    ferry_rng_init(&r, 9, FERRY_RNG_AUGMENT, 0);
    uint64_t got[4] = {ferry_rng_below(&r, 1000), ferry_rng_below(&r, 3), ferry_rng_u64(&r), 0};
    float u = ferry_rng_uniform(&r);
    memcpy(&got[3], &u, sizeof u);
    got[3] &= 0xffffffffu;
    static const uint64_t want_mixed[4] = {326, 1, 18366291607256104320u, 1062836107};
    golden_u64("below(1000), below(3), u64, uniform bits", got, want_mixed, 4);
}

/* ---- epoch orders through the loader, over samples labelled by their index ---- */
enum { N = 50 };
static uint8_t pixels[N];
static int64_t labels[N];

static ferry_dataset *indexed(void)
{
    for (size_t i = 0; i < N; i++) {
        pixels[i] = (uint8_t)i;
        labels[i] = (int64_t)i;
    }
    ferry_sample_format f = {.dtype = FERRY_DTYPE_U8, .channels = 1, .height = 1, .width = 1};
    ferry_dataset *ds = NULL;
    ASSERT_OK(ferry_dataset_memory(pixels, &f, N, labels, &ds));
    return ds;
}

/* The first `want` sample indices the loader delivers in `epoch`. */
static void epoch_order(ferry_loader_config c, uint64_t epoch, uint64_t *out, size_t want)
{
    c.batch_size = 4;
    c.num_workers = FERRY_LOADER_NO_WORKERS;
    c.device = ferry_cpu();
    c.pin_memory = FERRY_PIN_MEMORY_OFF;
    c.out_dtype = FERRY_DTYPE_U8;
    ferry_loader *l = NULL;
    ASSERT_OK(ferry_loader_create(&c, &l));
    if (epoch)
        ASSERT_OK(ferry_loader_reset(l, epoch));
    size_t n = 0;
    ferry_batch b;
    while (n < want && ferry_loader_next(l, NULL, &b) == FERRY_OK)
        for (size_t i = 0; i < b.size && n < want; i++)
            out[n++] = b.indices[i];
    ASSERT_EQ_SIZE(n, want);
    ferry_loader_destroy(l);
}

TEST(shuffled_and_distributed_epoch_orders)
{
    ferry_dataset *ds = indexed();
    ferry_loader_config c = ferry_loader_config_default();
    c.dataset = ds;
    c.shuffle = true;
    c.seed = 42;
    static const uint64_t want[3][12] = {
        {34, 16, 38, 21, 40, 22, 39, 0, 44, 32, 48, 45},
        {22, 20, 19, 44, 5, 35, 32, 1, 37, 8, 18, 17},
        {41, 23, 49, 28, 18, 31, 29, 24, 5, 13, 27, 16},
    };
    uint64_t got[12];
    epoch_order(c, 0, got, 12);
    golden_u64("shuffle, seed 42, epoch 0", got, want[0], 12);
    epoch_order(c, 5, got, 12);
    golden_u64("shuffle, seed 42, epoch 5", got, want[1], 12);
    c.sampler = FERRY_SAMPLER_DISTRIBUTED;
    c.rank = 1;
    c.world_size = 3;
    epoch_order(c, 2, got, 12);
    golden_u64("distributed, rank 1 of 3, seed 42, epoch 2", got, want[2], 12);
    ferry_dataset_release(ds);
}

TEST(split_membership)
{
    ferry_dataset *ds = indexed(), *train = NULL, *val = NULL;
    ASSERT_OK(ferry_dataset_split(ds, 0.2, 42, &train, &val));
    ASSERT_EQ_SIZE(ferry_dataset_len(val), 10);
    uint64_t got[10];
    for (size_t i = 0; i < 10; i++) {
        uint8_t px;
        int64_t lab;
        ferry_sample_ctx ctx = {0};
        ASSERT_OK(ferry_dataset_get(val, i, &px, 1, &ctx, &lab));
        got[i] = (uint64_t)lab;
    }
    static const uint64_t want[10] = {49, 24, 8, 46, 47, 5, 25, 35, 45, 10};
    golden_u64("split 0.2, seed 42: val's samples", got, want, 10);
    ferry_dataset_release(train);
    ferry_dataset_release(val);
    ferry_dataset_release(ds);
}

/* Streaming: 4 shards of 3, 5, 0 and 4 samples, a shuffle buffer of 3. */
TEST(streaming_order)
{
    static const size_t len[4] = {3, 5, 0, 4};
    size_t i = 0;
    for (size_t s = 0; s < 4; s++) {
        ft_tar t = {0};
        for (size_t k = 0; k < len[s]; k++, i++) {
            uint8_t px[2] = {(uint8_t)i, (uint8_t)(i * 7)};
            const char *p = ft_tmp("golden/tmp.png");
            ft_write_file(p, "", 0);
            ASSERT_OK(ferry_png_save(p, px, 2, 1, 1));
            size_t n;
            uint8_t *bytes = ft_read_file(p, &n);
            char name[64], lab[16];
            snprintf(name, sizeof name, "s%zu_%03zu.png", s, i);
            ft_tar_file(&t, name, bytes, n);
            free(bytes);
            snprintf(name, sizeof name, "s%zu_%03zu.cls", s, i);
            snprintf(lab, sizeof lab, "%zu", i % 3);
            ft_tar_file(&t, name, lab, strlen(lab));
        }
        static const uint8_t end[1024];
        ft_tar_put(&t, end, sizeof end);
        char rel[64];
        snprintf(rel, sizeof rel, "golden/shards/%02zu.tar", s);
        ft_write_file(ft_tmp(rel), t.d, t.n);
        free(t.d);
    }
    const char *dir = ft_tmp("golden/shards");
    ferry_dataset *ds = NULL;
    ASSERT_OK(ferry_dataset_shards(&dir, 1, NULL, &ds));
    ferry_loader_config c = ferry_loader_config_default();
    c.dataset = ds;
    c.shuffle = true;
    c.seed = 42;
    c.stream_shuffle_buffer = 3;
    uint64_t got[12];
    static const uint64_t want[2][12] = {
        {5, 6, 7, 3, 8, 10, 9, 11, 0, 2, 4, 1},
        {3, 4, 7, 5, 9, 8, 10, 0, 11, 6, 1, 2},
    };
    epoch_order(c, 0, got, 12);
    golden_u64("streaming, buffer 3, seed 42, epoch 0", got, want[0], 12);
    epoch_order(c, 1, got, 12);
    golden_u64("streaming, buffer 3, seed 42, epoch 1", got, want[1], 12);
    /* Over 3 ranks: rank r the r-th third of that order. */
    static const uint64_t ranks[2][4] = {{8, 10, 9, 11}, {0, 2, 4, 1}};
    c.sampler = FERRY_SAMPLER_DISTRIBUTED;
    c.world_size = 3;
    for (size_t r = 1; r < 3; r++) {
        c.rank = r;
        epoch_order(c, 0, got, 4);
        golden_u64(r == 1 ? "streaming, 3 ranks, rank 1, epoch 0" : "streaming, 3 ranks, rank 2, epoch 0",
                   got, ranks[r - 1], 4);
    }
    ferry_dataset_release(ds);
}

/* Random crop (pad 2) and flip: a digest of each augmented image, from images
 * whose pixels name their own position, so another window or flip changes it. */
TEST(crop_and_flip_draws)
{
    enum { W = 6, H = 5 };
    uint8_t px[W * H];
    for (size_t k = 0; k < sizeof px; k++)
        px[k] = (uint8_t)(k + 1); /* never 0, the padding */
    for (size_t k = 0; k < 3; k++) {
        char rel[64];
        snprintf(rel, sizeof rel, "golden/folder/c0/img%zu.png", k);
        const char *p = ft_tmp(rel);
        ft_write_file(p, "", 0);
        ASSERT_OK(ferry_png_save(p, px, W, H, 1));
    }
    ferry_image_config cfg = ferry_image_config_default();
    cfg.random_crop_pad = 2;
    cfg.random_hflip = true;
    ferry_dataset *ds = NULL;
    ASSERT_OK(ferry_dataset_image_folder(ft_tmp("golden/folder"), &cfg, &ds));
    uint64_t got[6];
    size_t at = 0;
    for (uint64_t epoch = 0; epoch < 2; epoch++)
        for (size_t k = 0; k < 3; k++) {
            uint8_t out[W * H];
            int64_t lab;
            ferry_sample_ctx ctx = {.seed = 42, .epoch = epoch, .train = true};
            ASSERT_OK(ferry_dataset_get(ds, k, out, sizeof out, &ctx, &lab));
            uint64_t h = 1469598103934665603ull; /* FNV-1a of the whole output */
            for (size_t j = 0; j < sizeof out; j++)
                h = (h ^ out[j]) * 1099511628211ull;
            got[at++] = h;
        }
    static const uint64_t want[6] = {15932792932489512419u, 7586680922647623755u, 18106406564131420701u,
                                     18106406564131420701u, 6170230750177328116u, 9938930117887198395u};
    golden_u64("crop pad 2 + flip, seed 42, epochs 0-1, samples 0-2 (output digests)", got, want, 6);
    ferry_dataset_release(ds);
}

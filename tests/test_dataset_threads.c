/* get() from many threads at once: every thread decoding the same indices, in its
 * own order, with augmentation on, must produce the bytes a single thread does.
 * Runs under TSan in `make test`. */
#include <pthread.h>
#include <stdlib.h>

#include "harness.h"

enum { N = 24, W = 20, H = 16, THREADS = 8, SAMPLE = 3 * W * H };

static ferry_dataset *ds;
static uint8_t reference[N][SAMPLE];
static int64_t ref_labels[N];

typedef struct worker { int id; int use_scratch; int mismatches; } worker;

static void *run(void *arg)
{
    worker *w = arg;
    ferry_scratch *s = NULL;
    if (w->use_scratch)
        ferry_scratch_create(&s);
    ferry_sample_ctx ctx = {.seed = 1234, .epoch = 5, .train = true, .scratch = s};
    uint8_t out[SAMPLE];
    for (int round = 0; round < 3; round++)
        for (int k = 0; k < N; k++) {
            int i = (k * 7 + w->id * 5 + round) % N; /* a different order per thread */
            int64_t label;
            if (ferry_dataset_get(ds, (size_t)i, out, sizeof out, &ctx, &label) != FERRY_OK ||
                memcmp(out, reference[i], SAMPLE) != 0 || label != ref_labels[i])
                w->mismatches++;
        }
    ferry_scratch_destroy(s);
    return NULL;
}

TEST(threads_give_identical_bytes)
{
    static uint8_t px[(W + 5) * H * 3];
    for (int i = 0; i < N; i++) {
        for (size_t p = 0; p < sizeof px; p++)
            px[p] = (uint8_t)(p * 31 + (size_t)i * 17);
        char path[256];
        snprintf(path, sizeof path, "%s/t/c%d/%02d.png", ft_tmpdir(), i % 3, i);
        ft_write_file(path, "", 0);
        /* Every third image has another size, so resizing runs concurrently too. */
        ASSERT_OK(ferry_png_save(path, px, i % 3 == 2 ? W + 5 : W, H, 3));
    }
    ferry_image_config cfg = ferry_image_config_default();
    cfg.channels = 3;
    cfg.width = W;
    cfg.height = H;
    cfg.random_crop_pad = 4;
    cfg.random_hflip = true;
    ASSERT_OK(ferry_dataset_image_folder(ft_tmp("t"), &cfg, &ds));
    ASSERT_EQ_SIZE(ferry_dataset_len(ds), N);
    /* The folder sorts c0/00, c0/03, ...: index i is not file i, so relabel. */
    ferry_sample_ctx ctx = {.seed = 1234, .epoch = 5, .train = true};
    for (int i = 0; i < N; i++)
        ASSERT_OK(ferry_dataset_get(ds, (size_t)i, reference[i], SAMPLE, &ctx, &ref_labels[i]));
    for (int i = 0; i < N; i++)
        ASSERT_EQ_INT(ref_labels[i], i / (N / 3)); /* 8 per class, in class order */

    pthread_t th[THREADS];
    worker ws[THREADS];
    for (int t = 0; t < THREADS; t++) {
        ws[t] = (worker){.id = t, .use_scratch = t % 2};
        ASSERT_EQ_INT(pthread_create(&th[t], NULL, run, &ws[t]), 0);
    }
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    for (int t = 0; t < THREADS; t++)
        ASSERT_MSG(ws[t].mismatches == 0, "thread %d: %d samples differ from the single-thread run",
                   t, ws[t].mismatches);
    /* Another epoch changes the augmentation of at least some samples. */
    ctx.epoch = 6;
    int differ = 0;
    uint8_t out[SAMPLE];
    for (int i = 0; i < N; i++) {
        ASSERT_OK(ferry_dataset_get(ds, (size_t)i, out, SAMPLE, &ctx, NULL));
        differ += memcmp(out, reference[i], SAMPLE) != 0;
    }
    ASSERT(differ > N / 2);
    ferry_dataset_release(ds);
}

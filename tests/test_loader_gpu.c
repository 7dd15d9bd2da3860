/* The loader's GPU path against the CPU loader, bit for bit, on every CUDA
 * device present (real or simulated with FERRY_SIM_GPUS=N; without one every
 * test skips with "no CUDA device").
 *
 * A table of small cases (10-30 samples of at most 8x8) covers: the caller's
 * stream NULL and a stream of its own; prefetch 1, 2, 4, 8; workers 0, 1, 2, 8;
 * out dtypes f32, f16, bf16, u8; layouts NCHW and NHWC; wire u8 and f32; a short
 * last batch; a reset in the middle of an epoch; batches as ready; workers
 * that stop between epochs; and a slow consumer, which queues matmuls,
 * elementwise ops and a copy of the batch on its stream after each next() and
 * only looks at its copies at the end of the case (across epoch ends and
 * resets), so that a slot refilled before the consumer's stream got past it
 * shows up as wrong bytes. Each case is its own test (matches_cpu_NN; run one
 * with `test_loader_gpu NAME`) and names itself in its failure message.
 *
 * Then: loaders made one right after another; a slow consumer that releases
 * its intermediate tensors at once; a loader and a model on cuda:1 driven from
 * a thread whose current device is cuda:0; and the README's first example
 * (samples/embed.c) on cuda:0 with the NULL stream. */
#include <stdlib.h>
#include <time.h>

#include "harness.h"
#include "ferry/nn.h"
#include "loader/internal.h" /* the slot a batch came from, for the copy-stream test */

/* ---- datasets, built once per process ---- */

enum { DS_MEM_RGB, DS_PNG_RGB, DS_MEM_F32, DS_COUNT };
static const char *const ds_names[DS_COUNT] = {"mem u8 3x8x8 chw", "png rgb 8x8 hwc +flip/crop",
                                               "mem f32 2x5x7 chw"};

enum { MEM_N = 27, PNG_N = 22, F32_N = 13 };

static struct {
    bool made;
    uint8_t rgb[MEM_N * 3 * 8 * 8];
    int64_t rgb_labels[MEM_N];
    float f32[F32_N * 2 * 5 * 7];
    int64_t f32_labels[F32_N];
    ferry_dataset *ds[DS_COUNT];
} fx;

static void free_fixtures(void)
{
    for (int i = 0; i < DS_COUNT; i++)
        ferry_dataset_release(fx.ds[i]);
    fx.made = false;
}

/* A PNG folder of three classes: RGB 8x8 files, one 10x9 (resized), written
 * into the test's temporary folder. */
static void write_png_folder(const char *root)
{
    static const char *classes[3] = {"ant", "bee", "cat"};
    uint8_t px[10 * 9 * 3];
    for (size_t i = 0; i < PNG_N; i++) {
        size_t w = i == 5 ? 10 : 8, h = i == 5 ? 9 : 8;
        for (size_t p = 0; p < w * h * 3; p++)
            px[p] = (uint8_t)(i * 41 + p * 7 + (p % 3) * 60 + (p / 3 % w) * 11);
        char rel[256];
        snprintf(rel, sizeof rel, "%s/%s/%03zu.png", root, classes[i % 3], i);
        const char *path = ft_tmp(rel);
        ft_write_file(path, "", 0); /* creates the class folder; ferry_png_save does not */
        ASSERT_OK(ferry_png_save(path, px, w, h, 3));
    }
}

static void make_fixtures(void)
{
    if (fx.made)
        return;
    for (size_t i = 0; i < sizeof fx.rgb; i++)
        fx.rgb[i] = (uint8_t)(i * 37 + (i >> 6) * 11 + (i >> 9));
    for (size_t i = 0; i < MEM_N; i++)
        fx.rgb_labels[i] = (int64_t)(i % 5);
    ferry_sample_format rgb = {3, 8, 8, FERRY_LAYOUT_CHW, FERRY_DTYPE_U8};
    ASSERT_OK(ferry_dataset_memory(fx.rgb, &rgb, MEM_N, fx.rgb_labels, &fx.ds[DS_MEM_RGB]));

    write_png_folder("png");
    ferry_image_config img = ferry_image_config_default();
    img.channels = 3;
    img.height = 8;
    img.width = 8;
    img.layout = FERRY_LAYOUT_HWC;
    img.random_hflip = true;  /* keyed by (seed, epoch, index): the same on both loaders */
    img.random_crop_pad = 2;
    ASSERT_OK(ferry_dataset_image_folder(ft_tmp("png"), &img, &fx.ds[DS_PNG_RGB]));
    ASSERT_EQ_SIZE(ferry_dataset_len(fx.ds[DS_PNG_RGB]), PNG_N);

    for (size_t i = 0; i < sizeof fx.f32 / sizeof fx.f32[0]; i++)
        fx.f32[i] = (float)((double)((i * 7919) % 1000) / 999.0 * 1.5 - 0.25) + (float)i * 1e-7f;
    for (size_t i = 0; i < F32_N; i++)
        fx.f32_labels[i] = (int64_t)(i % 4);
    ferry_sample_format f32 = {2, 5, 7, FERRY_LAYOUT_CHW, FERRY_DTYPE_F32};
    ASSERT_OK(ferry_dataset_memory(fx.f32, &f32, F32_N, fx.f32_labels, &fx.ds[DS_MEM_F32]));
    fx.made = true;
    atexit(free_fixtures);
}

/* ---- the cases ---- */

typedef struct gcase {
    int ds;
    size_t batch, workers, prefetch;
    ferry_dtype out;
    ferry_dtype wire;      /* u8 (the default) or f32 */
    ferry_layout layout;
    bool own_stream;       /* false: the NULL stream (the device's default stream) */
    bool shuffle;
    int reset_after;       /* > 0: epoch 1 is cut after this many batches, then epoch 2 runs */
    bool slow;             /* slow consumer, deferred reads */
    bool as_ready;         /* out_of_order */
    bool stop_workers;     /* restart_workers */
    bool drop_last;
} gcase;

#define U8 FERRY_DTYPE_U8
#define F32 FERRY_DTYPE_F32
#define F16 FERRY_DTYPE_F16
#define BF16 FERRY_DTYPE_BF16
#define CHW FERRY_LAYOUT_CHW
#define HWC FERRY_LAYOUT_HWC

static const gcase cases[] = {
    /* every prefetch x a spread of workers, dtypes and layouts */
    {DS_MEM_RGB, 4, 0, 1, F32, U8, CHW, true, true, 0, false, false, false, false},
    {DS_MEM_RGB, 4, 1, 2, F16, U8, HWC, false, true, 0, false, false, false, false},
    {DS_MEM_RGB, 5, 2, 4, BF16, U8, CHW, true, true, 0, false, false, false, false},
    {DS_MEM_RGB, 8, 8, 8, U8, U8, HWC, true, true, 0, false, false, false, false},
    {DS_MEM_RGB, 8, 2, 2, U8, U8, CHW, false, false, 0, false, false, false, false},
    /* images from PNG files, HWC in the dataset, with seeded augmentation */
    {DS_PNG_RGB, 4, 2, 4, F32, U8, CHW, true, true, 0, true, false, false, false},
    {DS_PNG_RGB, 6, 1, 1, F16, U8, HWC, false, true, 0, true, false, false, false},
    {DS_PNG_RGB, 4, 8, 8, BF16, U8, CHW, true, true, 2, false, false, false, false},
    {DS_PNG_RGB, 8, 0, 2, U8, U8, CHW, true, false, 1, false, false, false, false},
    {DS_PNG_RGB, 3, 2, 2, U8, U8, HWC, false, true, 0, true, false, false, false},
    /* reset mid-epoch with a slow consumer; NULL stream */
    {DS_MEM_RGB, 4, 2, 4, F32, U8, HWC, false, true, 3, true, false, false, false},
    /* prefetch 1: every batch reuses the one slot right after its consumer */
    {DS_MEM_RGB, 4, 2, 1, F32, U8, CHW, false, true, 0, true, false, false, false},
    {DS_MEM_RGB, 4, 1, 1, BF16, U8, HWC, true, true, 2, true, false, false, false},
    /* wire f32: normalised on the host, narrowed (or not) on the device */
    {DS_MEM_F32, 4, 2, 2, F16, F32, CHW, true, true, 0, false, false, false, false},
    {DS_MEM_F32, 3, 1, 4, BF16, F32, HWC, false, true, 0, true, false, false, false},
    {DS_MEM_F32, 5, 8, 8, F32, F32, HWC, true, true, 1, false, false, false, false},
    {DS_MEM_RGB, 6, 2, 2, BF16, F32, CHW, true, true, 0, true, false, false, false},
    /* batches as ready; workers stopped between epochs; drop_last */
    {DS_MEM_RGB, 3, 8, 4, F32, U8, CHW, true, true, 0, true, true, false, false},
    {DS_PNG_RGB, 4, 2, 2, F16, U8, HWC, true, true, 2, false, false, true, false},
    {DS_MEM_RGB, 4, 2, 4, F32, U8, CHW, false, true, 2, true, false, true, true},
};
#define NCASES (sizeof cases / sizeof cases[0])

static const float MEAN[4] = {0.485f, 0.456f, 0.406f, 0.5f};
static const float STDV[4] = {0.229f, 0.224f, 0.225f, 0.25f};

static ferry_loader_config case_config(const gcase *c, const char *device)
{
    ferry_loader_config cfg = ferry_loader_config_default();
    cfg.dataset = fx.ds[c->ds];
    cfg.batch_size = c->batch;
    cfg.num_workers = c->workers ? c->workers : FERRY_LOADER_NO_WORKERS;
    cfg.prefetch = c->prefetch;
    cfg.out_dtype = c->out;
    cfg.wire_dtype = c->wire == FERRY_DTYPE_F32 ? FERRY_WIRE_F32 : FERRY_WIRE_U8;
    cfg.layout = c->layout;
    cfg.shuffle = c->shuffle;
    cfg.seed = 1234 + (uint64_t)c->batch;
    cfg.out_of_order = c->as_ready;
    cfg.restart_workers = c->stop_workers;
    cfg.drop_last = c->drop_last;
    memcpy(cfg.mean, MEAN, sizeof MEAN);
    memcpy(cfg.std, STDV, sizeof STDV);
    cfg.device = ft_device(device);
    return cfg;
}

static void describe(const gcase *c, int dev, char *buf, size_t size)
{
    snprintf(buf, size,
             "[case: %s, batch %zu, workers %zu, prefetch %zu, out %s %s, wire %s, %s stream%s%s%s%s%s] on cuda:%d",
             ds_names[c->ds], c->batch, c->workers, c->prefetch, ferry_dtype_name(c->out),
             c->layout == HWC ? "NHWC" : "NCHW", ferry_dtype_name(c->wire),
             c->own_stream ? "own" : "NULL", c->shuffle ? ", shuffled" : "",
             c->reset_after > 0 ? ", reset mid-epoch" : "", c->slow ? ", slow consumer" : "",
             c->as_ready ? ", as ready" : "", c->stop_workers ? ", workers stop per epoch" : "",
             dev);
}

/* ---- the CPU loader's batches of one epoch ---- */

enum { MAX_BATCHES = 32, MAX_BATCH = 8 };

typedef struct epoch_ref {
    size_t nbatches;
    size_t batch;               /* batch_size */
    size_t sample_bytes;        /* out bytes of one sample */
    size_t sizes[MAX_BATCHES];
    size_t indices[MAX_BATCHES][MAX_BATCH];
    uint8_t *images;            /* batch k at k * batch * sample_bytes */
    int64_t labels[MAX_BATCHES][MAX_BATCH];
} epoch_ref;

static void cpu_reference(const gcase *c, uint64_t epoch, epoch_ref *r)
{
    ferry_loader_config cfg = case_config(c, "cpu");
    ferry_loader *l;
    ASSERT_OK(ferry_loader_create(&cfg, &l));
    if (epoch)
        ASSERT_OK(ferry_loader_reset(l, epoch));
    memset(r, 0, sizeof *r);
    r->batch = c->batch;
    r->nbatches = ferry_loader_len(l);
    ASSERT(r->nbatches <= MAX_BATCHES && c->batch <= MAX_BATCH);
    ferry_batch b;
    ferry_status st;
    while ((st = ferry_loader_next(l, NULL, &b)) == FERRY_OK) {
        if (!r->images) {
            r->sample_bytes = ferry_tensor_nbytes(b.images) / b.size;
            r->images = calloc(r->nbatches * r->batch, r->sample_bytes);
            ASSERT(r->images);
        }
        ASSERT(b.index < r->nbatches && b.size <= r->batch);
        r->sizes[b.index] = b.size;
        memcpy(r->indices[b.index], b.indices, b.size * sizeof(size_t));
        memcpy(r->images + b.index * r->batch * r->sample_bytes, ferry_tensor_data(b.images),
               b.size * r->sample_bytes);
        memcpy(r->labels[b.index], ferry_tensor_data(b.labels), b.size * sizeof(int64_t));
    }
    ASSERT_STATUS(st, FERRY_END);
    ferry_loader_destroy(l);
}

/* ---- checking a GPU batch ---- */

/* The first byte where two ranges differ, or n. */
static size_t first_diff(const void *a, const void *b, size_t n)
{
    const uint8_t *x = a, *y = b;
    for (size_t i = 0; i < n; i++)
        if (x[i] != y[i])
            return i;
    return n;
}

/* What the consumer saw of one batch, on the host. */
typedef struct seen_batch {
    uint64_t epoch;
    size_t index, size;
    size_t indices[MAX_BATCH];
} seen_batch;

static void check_batch(const char *desc, const epoch_ref *r, const seen_batch *sb,
                        const void *images, const int64_t *labels)
{
    ASSERT_MSG(sb->index < r->nbatches, "%s: epoch %llu: batch index %zu, but the epoch has %zu",
               desc, (unsigned long long)sb->epoch, sb->index, r->nbatches);
    size_t k = sb->index;
    ASSERT_MSG(sb->size == r->sizes[k], "%s: epoch %llu batch %zu: %zu samples, the CPU loader's %zu",
               desc, (unsigned long long)sb->epoch, k, sb->size, r->sizes[k]);
    for (size_t i = 0; i < sb->size; i++)
        ASSERT_MSG(sb->indices[i] == r->indices[k][i],
                   "%s: epoch %llu batch %zu: sample %zu is dataset index %zu, the CPU loader's %zu",
                   desc, (unsigned long long)sb->epoch, k, i, sb->indices[i], r->indices[k][i]);
    size_t n = sb->size * r->sample_bytes;
    const uint8_t *want = r->images + k * r->batch * r->sample_bytes;
    size_t d = first_diff(images, want, n);
    ASSERT_MSG(d == n,
               "%s: epoch %llu batch %zu: images differ from the CPU loader's at byte %zu of %zu "
               "(sample %zu, byte %zu in it): 0x%02x, want 0x%02x",
               desc, (unsigned long long)sb->epoch, k, d, n, d / r->sample_bytes,
               d % r->sample_bytes, ((const uint8_t *)images)[d < n ? d : 0], want[d < n ? d : 0]);
    for (size_t i = 0; i < sb->size; i++)
        ASSERT_MSG(labels[i] == r->labels[k][i],
                   "%s: epoch %llu batch %zu: label %zu is %lld, the CPU loader's %lld", desc,
                   (unsigned long long)sb->epoch, k, i, (long long)labels[i],
                   (long long)r->labels[k][i]);
}

/* Waits for the consumer's stream: its own, or the device's default stream. */
static void sync_consumer(ferry_stream *s, ferry_device dev)
{
    if (s)
        ASSERT_OK(ferry_stream_synchronize(s));
    else
        ASSERT_OK(ferry_device_synchronize(dev));
}

/* ---- the slow consumer ---- */

/* Matmuls small enough that OpenBLAS runs them in the calling (stream) thread:
 * its own thread pool synchronises in ways ThreadSanitizer cannot see. The
 * elementwise ops on a larger tensor make up the time. */
enum { SLOW_N = 40, BIG_N = 256 };

/* The slow consumer's copies of the epoch's batches go into buffers allocated
 * before the loader starts and kept to the end of the case: these cases are
 * about the loader's slots, and tensors allocated and freed while streams run
 * are another matter (slow_consumer_releasing_intermediates_early). */
typedef struct consumer {
    ferry_device dev;
    ferry_stream *s;           /* NULL: the default stream */
    ferry_tensor *a, *b;       /* [SLOW_N, SLOW_N] f32 for the matmuls */
    ferry_tensor *big;         /* [BIG_N, BIG_N] f32 for elementwise ops */
    ferry_tensor *img[MAX_BATCHES], *lab[MAX_BATCHES]; /* [batch, ...] each */
    seen_batch seen[MAX_BATCHES];
    size_t n;
} consumer;

static void consumer_init(consumer *k, const gcase *c, ferry_device dev, ferry_stream *s)
{
    memset(k, 0, sizeof *k);
    k->dev = dev;
    k->s = s;
    if (!c->slow)
        return;
    int64_t shape[2] = {SLOW_N, SLOW_N};
    ASSERT_OK(ferry_tensor_randn(shape, 2, F32, dev, 1, &k->a));
    ASSERT_OK(ferry_tensor_randn(shape, 2, F32, dev, 2, &k->b));
    int64_t bshape[2] = {BIG_N, BIG_N};
    ASSERT_OK(ferry_tensor_randn(bshape, 2, F32, dev, 3, &k->big));
    const ferry_sample_format *f = ferry_dataset_format(fx.ds[c->ds]);
    int64_t is[4] = {(int64_t)c->batch, (int64_t)f->channels, (int64_t)f->height, (int64_t)f->width};
    if (c->layout == HWC) {
        is[1] = (int64_t)f->height;
        is[2] = (int64_t)f->width;
        is[3] = (int64_t)f->channels;
    }
    for (size_t i = 0; i < MAX_BATCHES; i++) {
        /* zeros, not empty: check_deferred copies all of a buffer a short last
         * batch filled only in part (compute-sanitizer's initcheck flags that). */
        ASSERT_OK(ferry_tensor_zeros(is, 4, c->out, dev, &k->img[i]));
        ASSERT_OK(ferry_tensor_zeros(is, 1, FERRY_DTYPE_I64, dev, &k->lab[i]));
    }
    /* Whatever the allocator still had queued for these blocks is done. */
    ASSERT_OK(ferry_device_synchronize(dev));
}

static void consumer_free(consumer *k)
{
    for (size_t i = 0; i < MAX_BATCHES; i++) {
        ferry_tensor_release(k->img[i]);
        ferry_tensor_release(k->lab[i]);
    }
    ferry_tensor_release(k->a);
    ferry_tensor_release(k->b);
    ferry_tensor_release(k->big);
}

/* The first n rows of t, as a view. */
static ferry_tensor *rows(ferry_tensor *t, size_t n)
{
    ferry_tensor *v = NULL;
    ASSERT_OK(ferry_tensor_slice(t, 0, 0, (int64_t)n, 1, &v));
    return v;
}

/* Work the stream must finish before it reads the batch: matmuls, elementwise
 * ops on a larger tensor and an affine map of the batch into a new tensor (all
 * thrown away), then the copies of
 * the batch that are checked at the end of the epoch. No host wait anywhere:
 * the next next() releases this batch's slot while the stream is still busy. */
static void consume_slowly(consumer *k, const char *desc, const ferry_batch *b)
{
    ASSERT_MSG(k->n < MAX_BATCHES, "%s: more batches than expected", desc);
    for (int i = 0; i < 3; i++) {
        ferry_tensor *y = NULL;
        ASSERT_OK(ferry_matmul(k->a, k->b, k->s, &y));
        ferry_tensor_release(y);
    }
    for (int i = 0; i < 2; i++) {
        ferry_tensor *y = NULL;
        ASSERT_OK(ferry_gelu(k->big, k->s, &y));
        ferry_tensor_release(y);
    }
    ferry_tensor *t = NULL;
    ASSERT_OK(ferry_affine(b->images, 2.0, -1.0, F32, k->s, &t));
    ferry_tensor_release(t);
    ferry_tensor *img = rows(k->img[k->n], b->size), *lab = rows(k->lab[k->n], b->size);
    ASSERT_OK(ferry_tensor_copy(img, b->images, k->s));
    ASSERT_OK(ferry_tensor_copy(lab, b->labels, k->s));
    ferry_tensor_release(img);
    ferry_tensor_release(lab);
    seen_batch *sb = &k->seen[k->n++];
    sb->epoch = b->epoch;
    sb->index = b->index;
    sb->size = b->size;
    memcpy(sb->indices, b->indices, b->size * sizeof(size_t));
}

/* The deferred batches, once the stream has got there; refs by epoch. */
static void check_deferred(consumer *k, const char *desc, const epoch_ref *refs, size_t nrefs)
{
    sync_consumer(k->s, k->dev);
    int64_t labels[MAX_BATCH];
    for (size_t i = 0; i < k->n; i++) {
        const seen_batch *sb = &k->seen[i];
        ASSERT(sb->epoch < nrefs);
        const epoch_ref *r = &refs[sb->epoch];
        size_t host_bytes = r->batch * r->sample_bytes;
        ASSERT(host_bytes > 0);
        void *host = malloc(host_bytes);
        ASSERT(host);
        ASSERT_OK(ferry_tensor_copy_to_host(k->img[i], host, host_bytes));
        ASSERT_OK(ferry_tensor_copy_to_host(k->lab[i], labels, sizeof labels));
        check_batch(desc, r, sb, host, labels);
        free(host);
    }
    k->n = 0;
}

/* Up to `limit` batches of the loader's epoch, each checked against r (a slow
 * consumer's later, by check_deferred); with limit >= the epoch's length, also
 * that the epoch ends there. */
static void gpu_epoch(const gcase *c, const char *desc, ferry_loader *l, consumer *k,
                      const epoch_ref *r, uint64_t epoch, size_t limit)
{
    size_t host_bytes = r->batch * r->sample_bytes;
    ASSERT(host_bytes > 0);
    void *host = malloc(host_bytes);
    ASSERT(host);
    int64_t labels[MAX_BATCH];
    bool got[MAX_BATCHES] = {false};
    size_t n = 0;
    ferry_batch b;
    while (n < limit) {
        ferry_status st = ferry_loader_next(l, k->s, &b);
        if (st == FERRY_END)
            break;
        ASSERT_MSG(st == FERRY_OK, "%s: epoch %llu: next() after %zu batches: %s (%s)", desc,
                   (unsigned long long)epoch, n, ferry_status_str(st), ferry_last_error());
        ASSERT_MSG(b.epoch == epoch, "%s: batch of epoch %llu, want %llu", desc,
                   (unsigned long long)b.epoch, (unsigned long long)epoch);
        ASSERT_MSG(c->as_ready || b.index == n, "%s: epoch %llu: batch %zu arrived as number %zu",
                   desc, (unsigned long long)epoch, b.index, n);
        ASSERT_MSG(b.index < r->nbatches && !got[b.index], "%s: epoch %llu: batch %zu twice or out of range",
                   desc, (unsigned long long)epoch, b.index);
        got[b.index] = true;
        ASSERT(ferry_device_eq(ferry_tensor_device(b.images), k->dev));
        ASSERT(ferry_device_eq(ferry_tensor_device(b.labels), k->dev));
        ASSERT_EQ_INT(ferry_tensor_dtype(b.images), c->out);
        ASSERT_EQ_INT(ferry_tensor_dim(b.images, 0), (int64_t)b.size);
        ASSERT_EQ_INT(ferry_tensor_dim(b.labels, 0), (int64_t)b.size);
        const ferry_sample_format *f = ferry_dataset_format(fx.ds[c->ds]);
        ASSERT_EQ_INT(ferry_tensor_dim(b.images, c->layout == HWC ? 3 : 1), (int64_t)f->channels);
        if (c->slow) {
            consume_slowly(k, desc, &b);
        } else {
            sync_consumer(k->s, k->dev);
            ASSERT_OK(ferry_tensor_copy_to_host(b.images, host, host_bytes));
            ASSERT_OK(ferry_tensor_copy_to_host(b.labels, labels, sizeof labels));
            seen_batch sb = {.epoch = b.epoch, .index = b.index, .size = b.size};
            memcpy(sb.indices, b.indices, b.size * sizeof(size_t));
            check_batch(desc, r, &sb, host, labels);
        }
        n++;
    }
    if (limit >= r->nbatches) {
        ASSERT_MSG(n == r->nbatches, "%s: epoch %llu ended after %zu batches, the CPU loader's after %zu",
                   desc, (unsigned long long)epoch, n, r->nbatches);
        ASSERT_STATUS(ferry_loader_next(l, k->s, &b), FERRY_END);
    }
    free(host);
}

static void run_case(size_t i)
{
    ft_require_cuda();
    make_fixtures();
    const gcase *c = &cases[i];
    epoch_ref ref[3];
    for (uint64_t e = 0; e < 3; e++)
        cpu_reference(c, e, &ref[e]);
    int ndev = ferry_cuda_device_count();
    for (int d = 0; d < ndev; d++) {
        char desc[512], name[FERRY_DEVICE_NAME_MAX];
        describe(c, d, desc, sizeof desc);
        ferry_device dev = ferry_cuda(d);
        ferry_device_format(dev, name, sizeof name);
        ferry_stream *s = NULL;
        if (c->own_stream)
            ASSERT_OK(ferry_stream_create(dev, &s));
        consumer k;
        consumer_init(&k, c, dev, s);
        ferry_loader_config cfg = case_config(c, name);
        ferry_loader *l;
        ASSERT_MSG(ferry_loader_create(&cfg, &l) == FERRY_OK, "%s: create: %s", desc, ferry_last_error());
        ASSERT(ferry_device_eq(ferry_loader_device(l), dev));
        ASSERT_EQ_SIZE(ferry_loader_len(l), ref[0].nbatches);

        gpu_epoch(c, desc, l, &k, &ref[0], 0, SIZE_MAX);
        ASSERT_OK(ferry_loader_reset(l, 1));
        if (c->reset_after > 0) {
            gpu_epoch(c, desc, l, &k, &ref[1], 1, (size_t)c->reset_after);
            ASSERT_OK(ferry_loader_reset(l, 2));
            gpu_epoch(c, desc, l, &k, &ref[2], 2, SIZE_MAX);
        } else {
            gpu_epoch(c, desc, l, &k, &ref[1], 1, SIZE_MAX);
        }
        /* A slow consumer's copies are read only now: the stream may still have
         * been busy with them across the epochs' ends and the reset, while the
         * loader refilled its slots. */
        check_deferred(&k, desc, ref, 3);

        ferry_loader_stats st;
        ASSERT_OK(ferry_loader_stats_get(l, &st));
        ASSERT_MSG(st.pinned, "%s: the slots are not page-locked", desc);
        ASSERT_MSG(st.h2d_bytes > 0, "%s: no bytes crossed to the device", desc);
        /* Memory datasets only: a PNG dataset's workers grow their decode scratch
         * on their own first file (or a larger one), which may come after the
         * first batch, on the CPU loader just the same. */
        if (c->ds != DS_PNG_RGB)
            ASSERT_MSG(st.allocs_after_warmup == 0, "%s: %llu allocations after warm-up", desc,
                       (unsigned long long)st.allocs_after_warmup);
        ferry_loader_destroy(l);
        consumer_free(&k);
        ferry_stream_destroy(s);
    }
    for (int e = 0; e < 3; e++)
        free(ref[e].images);
}

#define CASE_TEST(n)                                                           \
    TEST(matches_cpu_##n) { run_case(1##n - 100); }
CASE_TEST(00)
CASE_TEST(01)
CASE_TEST(02)
CASE_TEST(03)
CASE_TEST(04)
CASE_TEST(05)
CASE_TEST(06)
CASE_TEST(07)
CASE_TEST(08)
CASE_TEST(09)
CASE_TEST(10)
CASE_TEST(11)
CASE_TEST(12)
CASE_TEST(13)
CASE_TEST(14)
CASE_TEST(15)
CASE_TEST(16)
CASE_TEST(17)
CASE_TEST(18)
CASE_TEST(19)
_Static_assert(NCASES == 20, "one CASE_TEST per row of cases[]");

/* ---- loaders made and destroyed one after another (as `ferry bench` does) ---- */

/* The device memory of a destroyed loader goes back to the allocator's cache,
 * and the next loader may get it: its batches must not see anything of the old
 * loader's life (late writes to that memory, on any stream). */
TEST(loader_created_right_after_another_is_destroyed)
{
    ft_require_cuda();
    make_fixtures();
    static const gcase cs[2] = {
        {DS_MEM_RGB, 8, 0, 1, U8, U8, CHW, true, false, 0, false, false, false, false},
        {DS_MEM_RGB, 8, 1, 2, F32, U8, HWC, false, true, 0, false, false, false, false},
    };
    for (int d = 0; d < ferry_cuda_device_count(); d++) {
        ferry_device dev = ferry_cuda(d);
        char name[FERRY_DEVICE_NAME_MAX];
        ferry_device_format(dev, name, sizeof name);
        for (int v = 0; v < 2; v++) {
            const gcase *c = &cs[v];
            char desc[512];
            describe(c, d, desc, sizeof desc);
            epoch_ref ref;
            cpu_reference(c, 0, &ref);
            ferry_stream *s = NULL;
            if (c->own_stream)
                ASSERT_OK(ferry_stream_create(dev, &s));
            consumer k;
            consumer_init(&k, c, dev, s);
            for (int rep = 0; rep < 25; rep++) {
                ferry_loader_config cfg = case_config(c, name);
                ferry_loader *l;
                ASSERT_OK(ferry_loader_create(&cfg, &l));
                char what[600];
                snprintf(what, sizeof what, "%s, loader %d of 25 made at once after the last", desc,
                         rep + 1);
                gpu_epoch(c, what, l, &k, &ref, 0, 1);
                ferry_loader_destroy(l);
            }
            consumer_free(&k);
            ferry_stream_destroy(s);
            free(ref.images);
        }
    }
}

/* ---- a slow consumer stream holds up only its own slot's copy ---- */

/* Batch 0 is used on stream s1, which then runs long work; batches 1.. go to s2.
 * Slot 0's next copy must wait for s1; slot 1's copy must not: with one copy
 * stream for every slot it would queue behind slot 0's. So batch 3's copy has to
 * finish while s1 is still busy. */
TEST(copies_are_not_serialised_behind_another_slots_release)
{
    ft_require_cuda();
    make_fixtures();
    gcase c = {DS_MEM_RGB, 4, 1, 2, F32, U8, CHW, false, true, 0, false, false, false, false};
    ferry_device dev = ferry_cuda(0);
    char name[FERRY_DEVICE_NAME_MAX];
    ferry_device_format(dev, name, sizeof name);
    ferry_loader_config cfg = case_config(&c, name);
    ferry_stream *s1, *s2;
    ASSERT_OK(ferry_stream_create(dev, &s1));
    ASSERT_OK(ferry_stream_create(dev, &s2));
    int64_t n = 1200, shape[2] = {n, n};
    ferry_tensor *a = NULL;
    ASSERT_OK(ferry_tensor_full(shape, 2, 1.0 / 1200, FERRY_DTYPE_F32, dev, &a));
    ferry_loader *l;
    ASSERT_OK(ferry_loader_create(&cfg, &l));
    ferry_batch b;
    ASSERT_OK(ferry_loader_next(l, s1, &b));
    /* Long work on s1, on the batch's stream: about a second on the simulation. */
    ferry_tensor *x = ferry_tensor_retain(a);
    for (int i = 0; i < 6; i++) {
        ferry_tensor *y = NULL;
        ASSERT_OK(ferry_matmul(x, a, s1, &y));
        ferry_tensor_release(x);
        x = y;
    }
    ASSERT_OK(ferry_loader_next(l, s2, &b)); /* batch 1; slot 0 released on s1 */
    ASSERT_OK(ferry_loader_next(l, s2, &b)); /* batch 2, in slot 0: its copy waits for s1 */
    ASSERT_OK(ferry_loader_next(l, s2, &b)); /* batch 3, in slot 1: released on s2 */
    ferry_slot *slot = l->current;
    ASSERT(slot != NULL);
    bool copied = false, s1_busy = true;
    for (int i = 0; i < 2000 && !copied; i++) {
        copied = ferry_event_query(slot->copy_done);
        s1_busy = !ferry_stream_query(s1);
        if (!copied) {
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
    }
    ASSERT_MSG(copied && s1_busy,
               "batch 3's copy %s while stream s1 was %s: copies are serialised behind slot 0's release",
               copied ? "finished" : "did not finish", s1_busy ? "busy" : "already done");
    ASSERT_OK(ferry_stream_synchronize(s1));
    ASSERT_OK(ferry_stream_synchronize(s2));
    ferry_loader_destroy(l);
    ferry_tensor_release(x);
    ferry_tensor_release(a);
    ferry_stream_destroy(s1);
    ferry_stream_destroy(s2);
}

/* ---- a slow consumer that frees what it no longer needs, as training loops do ---- */

/* Per batch on the consumer's own stream: y = 2x, z = y / 2 (exact in f32), y
 * released at once (legal: the stream still orders its read of y). The z of
 * the epoch are read at its end and must equal the CPU loader's batches. */
TEST(slow_consumer_releasing_intermediates_early)
{
    ft_require_cuda();
    make_fixtures();
    gcase c = {DS_MEM_RGB, 4, 2, 2, F32, U8, CHW, true, true, 0, true, false, false, false};
    for (int d = 0; d < ferry_cuda_device_count(); d++) {
        char desc[512], name[FERRY_DEVICE_NAME_MAX];
        describe(&c, d, desc, sizeof desc);
        ferry_device dev = ferry_cuda(d);
        ferry_device_format(dev, name, sizeof name);
        epoch_ref ref;
        cpu_reference(&c, 0, &ref);
        ferry_stream *s;
        ASSERT_OK(ferry_stream_create(dev, &s));
        ferry_loader_config cfg = case_config(&c, name);
        ferry_loader *l;
        ASSERT_OK(ferry_loader_create(&cfg, &l));
        ferry_tensor *z[MAX_BATCHES] = {NULL};
        seen_batch seen[MAX_BATCHES];
        size_t n = 0;
        ferry_batch b;
        while (ferry_loader_next(l, s, &b) == FERRY_OK) {
            ASSERT(n < MAX_BATCHES);
            ferry_tensor *y = NULL;
            ASSERT_OK(ferry_affine(b.images, 2.0, 0.0, F32, s, &y));
            ASSERT_OK(ferry_affine(y, 0.5, 0.0, F32, s, &z[n]));
            ferry_tensor_release(y);
            seen[n] = (seen_batch){.epoch = 0, .index = b.index, .size = b.size};
            memcpy(seen[n].indices, b.indices, b.size * sizeof(size_t));
            n++;
        }
        ASSERT_EQ_SIZE(n, ref.nbatches);
        ASSERT_OK(ferry_stream_synchronize(s));
        size_t host_bytes = ref.batch * ref.sample_bytes;
        ASSERT(host_bytes > 0);
        void *host = malloc(host_bytes);
        ASSERT(host);
        for (size_t i = 0; i < n; i++) {
            /* Labels are not part of this test: take the reference's. */
            ASSERT_OK(ferry_tensor_copy_to_host(z[i], host, host_bytes));
            check_batch(desc, &ref, &seen[i], host, ref.labels[seen[i].index]);
            ferry_tensor_release(z[i]);
        }
        free(host);
        free(ref.images);
        ferry_loader_destroy(l);
        ferry_stream_destroy(s);
    }
}

/* ---- a loader and a model on cuda:1, from a thread on cuda:0 ---- */

static ferry_module *small_mlp(void)
{
    ferry_module *net, *m;
    ASSERT_OK(ferry_sequential_create(&net));
    ASSERT_OK(ferry_flatten_create(&m));
    ASSERT_OK(ferry_sequential_add(net, m));
    ASSERT_OK(ferry_linear_create(3 * 8 * 8, 16, true, &m));
    ASSERT_OK(ferry_sequential_add(net, m));
    ASSERT_OK(ferry_relu_create(&m));
    ASSERT_OK(ferry_sequential_add(net, m));
    ASSERT_OK(ferry_linear_create(16, 5, true, &m));
    ASSERT_OK(ferry_sequential_add(net, m));
    ASSERT_OK(ferry_module_init(net, 42));
    return net;
}

/* One SGD step on (x, y); *logits gets the forward's output (a new reference). */
static void train_step(ferry_module *net, ferry_optim *opt, ferry_metrics *met, ferry_tensor *x,
                       ferry_tensor *y, ferry_stream *s, ferry_tensor **logits)
{
    ferry_tensor *dl = NULL;
    ASSERT_OK(ferry_module_zero_grad(net, s));
    ASSERT_OK(ferry_module_forward(net, x, s, logits));
    ASSERT_OK(ferry_cross_entropy(*logits, y, 1.0f, met, s, &dl));
    ASSERT_OK(ferry_module_backward(net, dl, s, NULL));
    ASSERT_OK(ferry_optim_step(opt, s));
    /* Released while s may not have run the backward yet: legal (the work
     * queued on s keeps its order), as a training loop does it. */
    ferry_tensor_release(dl);
}

static void assert_close(const char *what, const float *got, const float *want, size_t n)
{
    for (size_t i = 0; i < n; i++)
        ASSERT_MSG(fabsf(got[i] - want[i]) <= 1e-4f + 1e-3f * fabsf(want[i]),
                   "%s: element %zu: %.9g on cuda:1, %.9g on the CPU", what, i, (double)got[i],
                   (double)want[i]);
}

TEST(loader_and_model_on_cuda1_from_a_thread_on_cuda0)
{
    ft_require_cuda();
    if (ferry_cuda_device_count() < 2)
        SKIP("needs 2 CUDA devices (FERRY_SIM_GPUS=2)");
    make_fixtures();
    ASSERT_OK(ferry_cuda_set_device(0));
    const ferry_device d1 = ferry_cuda(1);
    gcase c = {DS_MEM_RGB, 4, 2, 2, F32, U8, CHW, true, true, 0, false, false, false, false};
    ferry_loader_config gcfg = case_config(&c, "cuda:1"), ccfg = case_config(&c, "cpu");
    ferry_loader *lg, *lc;
    ASSERT_OK(ferry_loader_create(&gcfg, &lg));
    ASSERT_OK(ferry_loader_create(&ccfg, &lc));
    ASSERT(ferry_device_eq(ferry_loader_device(lg), d1));

    ferry_module *ng = small_mlp(), *nc = small_mlp();
    ASSERT_OK(ferry_module_to(ng, d1));
    ASSERT(ferry_device_eq(ferry_module_device(ng), d1));
    ferry_optim *og, *oc;
    ASSERT_OK(ferry_sgd_create(ng, 0.05, 0.9, 0.0, &og));
    ASSERT_OK(ferry_sgd_create(nc, 0.05, 0.9, 0.0, &oc));
    ferry_metrics *mg, *mc;
    ASSERT_OK(ferry_metrics_create(d1, &mg));
    ASSERT_OK(ferry_metrics_create(ferry_cpu(), &mc));

    /* A stream of cuda:0 is refused by a loader on cuda:1. */
    ferry_stream *s0, *s1;
    ASSERT_OK(ferry_stream_create(ferry_cuda(0), &s0));
    ASSERT_OK(ferry_stream_create(d1, &s1));
    ferry_batch bg, bc;
    ASSERT_STATUS(ferry_loader_next(lg, s0, &bg), FERRY_ERR_DEVICE_MISMATCH);
    ferry_stream_destroy(s0);

    float lgot[MAX_BATCH * 5], lwant[MAX_BATCH * 5];
    for (int pass = 0; pass < 2; pass++) {
        ferry_stream *s = pass == 0 ? s1 : NULL; /* NULL: cuda:1's default stream */
        const char *sname = pass == 0 ? "a stream of cuda:1" : "the NULL stream";
        if (pass) {
            ASSERT_OK(ferry_loader_reset(lg, 1));
            ASSERT_OK(ferry_loader_reset(lc, 1));
        }
        size_t nb = 0;
        ferry_status st;
        while ((st = ferry_loader_next(lc, NULL, &bc)) == FERRY_OK) {
            ASSERT_MSG(ferry_loader_next(lg, s, &bg) == FERRY_OK, "next on cuda:1 with %s: %s",
                       sname, ferry_last_error());
            ASSERT_EQ_SIZE(bg.size, bc.size);
            ASSERT(ferry_device_eq(ferry_tensor_device(bg.images), d1));
            ferry_tensor *yg = NULL, *yc = NULL;
            train_step(ng, og, mg, bg.images, bg.labels, s, &yg);
            train_step(nc, oc, mc, bc.images, bc.labels, NULL, &yc);
            ASSERT(ferry_device_eq(ferry_tensor_device(yg), d1));
            sync_consumer(s, d1);
            size_t n = bc.size * 5;
            ASSERT_OK(ferry_tensor_copy_to_host(yg, lgot, sizeof lgot));
            ASSERT_OK(ferry_tensor_copy_to_host(yc, lwant, sizeof lwant));
            int cur = -1;
            ASSERT_OK(ferry_cuda_current_device(&cur));
            ASSERT_MSG(cur == 0, "after a step on cuda:1 with %s the thread's device is cuda:%d",
                       sname, cur);
            char what[128];
            snprintf(what, sizeof what, "logits of batch %zu, pass %d (%s)", bc.index, pass, sname);
            assert_close(what, lgot, lwant, n);
            ferry_tensor_release(yg);
            ferry_tensor_release(yc);
            nb++;
        }
        ASSERT_STATUS(st, FERRY_END);
        ASSERT_STATUS(ferry_loader_next(lg, s, &bg), FERRY_END);
        ASSERT_EQ_SIZE(nb, ferry_loader_len(lc));
    }

    /* The trained weights and the running metrics agree too. */
    ASSERT_OK(ferry_device_synchronize(d1));
    for (size_t i = 0; i < ferry_module_param_count(nc); i++) {
        ferry_param pg, pc;
        ASSERT_OK(ferry_module_param(ng, i, &pg));
        ASSERT_OK(ferry_module_param(nc, i, &pc));
        size_t n = (size_t)ferry_tensor_numel(pc.value);
        float *g = malloc(n * sizeof *g);
        ASSERT(g);
        ASSERT_OK(ferry_tensor_copy_to_host(pg.value, g, n * sizeof *g));
        char what[128];
        snprintf(what, sizeof what, "parameter %s after training", pc.name);
        assert_close(what, g, ferry_tensor_data(pc.value), n);
        free(g);
    }
    double lossg, lossc, accg, accc;
    int64_t cntg, cntc;
    ASSERT_OK(ferry_metrics_get(mg, &lossg, &accg, &cntg));
    ASSERT_OK(ferry_metrics_get(mc, &lossc, &accc, &cntc));
    ASSERT_EQ_INT(cntg, cntc);
    ASSERT_EQ_INT(cntg, 2 * MEM_N);
    ASSERT_NEAR(lossg, lossc, 1e-4 + 1e-3 * fabs(lossc));
    ASSERT_NEAR(accg, accc, 1e-9);

    int cur = -1;
    ASSERT_OK(ferry_cuda_current_device(&cur));
    ASSERT_EQ_INT(cur, 0);

    ferry_metrics_destroy(mg);
    ferry_metrics_destroy(mc);
    ferry_optim_destroy(og);
    ferry_optim_destroy(oc);
    ferry_module_destroy(ng);
    ferry_module_destroy(nc);
    ferry_loader_destroy(lg);
    ferry_loader_destroy(lc);
    ferry_stream_destroy(s1);
    ASSERT_OK(ferry_cuda_current_device(&cur));
    ASSERT_EQ_INT(cur, 0);
}

/* ---- the README's first example (samples/embed.c) on cuda:0 ---- */

TEST(readme_first_example_on_cuda0_with_the_null_stream)
{
    ft_require_cuda();
    make_fixtures();
    ASSERT_OK(ferry_cuda_set_device(0));
    /* As the README: an image folder with the default image config, batch 256,
     * shuffled, pinned when a GPU is there, the default device (cuda:0), and
     * next() with the NULL stream. 22 files: one short batch. One of them is
     * 10x9, so the size is given (a dataset of two sizes is refused, not
     * resized to the first file's). */
    ferry_image_config img = ferry_image_config_default();
    img.height = img.width = 8;
    ferry_dataset *ds;
    ASSERT_OK(ferry_dataset_image_folder(ft_tmp("png"), &img, &ds));
    ferry_loader_config cfg = {.dataset = ds, .batch_size = 256, .shuffle = true};
    ferry_loader *loader;
    ASSERT_OK(ferry_loader_create(&cfg, &loader));
    char dev[FERRY_DEVICE_NAME_MAX];
    ASSERT_STR_EQ(ferry_device_format(ferry_loader_device(loader), dev, sizeof dev), "cuda:0");

    ferry_loader_config ccfg = cfg;
    ccfg.device = ferry_cpu();
    ccfg.pin_memory = FERRY_PIN_MEMORY_OFF;
    ferry_loader *cpu;
    ASSERT_OK(ferry_loader_create(&ccfg, &cpu));

    size_t nbatches = 0, nsamples = 0;
    float *host = malloc((size_t)PNG_N * 3 * 8 * 8 * sizeof(float));
    int64_t labels[PNG_N];
    ASSERT(host);
    ferry_batch b, bc;
    ferry_status st;
    while ((st = ferry_loader_next(loader, NULL, &b)) == FERRY_OK) {
        const int64_t *s = ferry_tensor_shape(b.images);
        ASSERT_EQ_SIZE(b.index, nbatches);
        ASSERT_EQ_INT(s[0], (int64_t)b.size);
        ASSERT_EQ_INT(s[1], 3);
        ASSERT_EQ_INT(s[2], 8);
        ASSERT_EQ_INT(s[3], 8);
        ASSERT_STR_EQ(ferry_dtype_name(ferry_tensor_dtype(b.images)), "f32");
        ASSERT_EQ_INT(ferry_tensor_dim(b.labels, 0), (int64_t)b.size);
        ASSERT(ferry_device_eq(ferry_tensor_device(b.images), ferry_cuda(0)));
        ASSERT_OK(ferry_loader_next(cpu, NULL, &bc));
        ASSERT_EQ_SIZE(bc.size, b.size);
        ASSERT_MEM_EQ(b.indices, bc.indices, b.size * sizeof(size_t));
        ASSERT_OK(ferry_device_synchronize(ferry_cuda(0)));
        ASSERT_OK(ferry_tensor_copy_to_host(b.images, host, ferry_tensor_nbytes(b.images)));
        ASSERT_OK(ferry_tensor_copy_to_host(b.labels, labels, sizeof labels));
        ASSERT_MEM_EQ(host, ferry_tensor_data(bc.images), ferry_tensor_nbytes(bc.images));
        ASSERT_MEM_EQ(labels, ferry_tensor_data(bc.labels), b.size * sizeof(int64_t));
        nbatches++;
        nsamples += b.size;
    }
    ASSERT_STATUS(st, FERRY_END);
    ASSERT_EQ_SIZE(nbatches, 1);
    ASSERT_EQ_SIZE(nsamples, PNG_N);
    ASSERT_STATUS(ferry_loader_next(cpu, NULL, &bc), FERRY_END);
    free(host);
    ferry_loader_destroy(loader);
    ferry_loader_destroy(cpu);
    ferry_dataset_release(ds);
}

/* A caller that stops an epoch early may destroy the stream its last batch
 * went to before resetting (the stream need only live to the next next()):
 * the reset must not touch it (ASan: a use after free), and the next epochs
 * are the CPU loader's, batch for batch, on a new stream. */
TEST(reset_after_the_batch_stream_is_destroyed)
{
    ft_require_cuda();
    make_fixtures();
    ferry_dataset *ds;
    ferry_image_config img = ferry_image_config_default();
    img.height = img.width = 8; /* one file is 10x9 */
    ASSERT_OK(ferry_dataset_image_folder(ft_tmp("png"), &img, &ds));
    ferry_loader_config cfg = {.dataset = ds, .batch_size = 4, .shuffle = true,
                               .device = ferry_cuda(0), .num_workers = 2};
    ferry_loader_config ccfg = cfg;
    ccfg.device = ferry_cpu();
    ccfg.pin_memory = FERRY_PIN_MEMORY_OFF;
    ferry_loader *l, *cpu;
    ASSERT_OK(ferry_loader_create(&cfg, &l));
    ASSERT_OK(ferry_loader_create(&ccfg, &cpu));
    size_t n = 4 * 3 * 8 * 8;
    float *host = malloc(n * sizeof(float));
    ASSERT(host);
    ferry_batch b, bc;
    for (uint64_t epoch = 1; epoch <= 3; epoch++) {
        ferry_stream *s;
        ASSERT_OK(ferry_stream_create(ferry_cuda(0), &s));
        for (int k = 0; k < 2; k++) { /* two batches of the epoch, then stop */
            ASSERT_OK(ferry_loader_next(l, s, &b));
            ASSERT_OK(ferry_loader_next(cpu, NULL, &bc));
            ASSERT_OK(ferry_stream_synchronize(s));
            ASSERT_OK(ferry_tensor_copy_to_host(b.images, host, ferry_tensor_nbytes(b.images)));
            ASSERT_MEM_EQ(host, ferry_tensor_data(bc.images), ferry_tensor_nbytes(bc.images));
        }
        ferry_stream_destroy(s);
        ASSERT_OK(ferry_loader_reset(l, epoch));
        ASSERT_OK(ferry_loader_reset(cpu, epoch));
    }
    free(host);
    ferry_loader_destroy(l);
    ferry_loader_destroy(cpu);
    ferry_dataset_release(ds);
}

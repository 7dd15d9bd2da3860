/* Benchmark: one epoch of the Fashion-MNIST MLP (784-256-128-10, batch 256, SGD
 * with momentum) on the CPU, timed per epoch; compare with bench/mlp_torch.py.
 *
 *   build/samples/bench_mlp [idx-folder] [epochs]
 *
 * The IDX files (gzip or plain) are read here directly, so the figure is the
 * model's time: gathering the batch, u8 -> f32 scaling, forward, loss, backward,
 * update. docs/BENCHMARKS.md ("Model (CPU)") has the measured numbers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

#include "ferry/train.h"
#include "ferry/rng.h"
#include "../tools/cli_args.h"

static unsigned char *read_idx(const char *dir, const char *name, int want_dims, int64_t *dims)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.gz", dir, name);
    gzFile f = gzopen(path, "rb");
    if (!f) {
        snprintf(path, sizeof path, "%s/%s", dir, name);
        f = gzopen(path, "rb");
    }
    if (!f) {
        fprintf(stderr, "bench_mlp: cannot open %s/%s[.gz]\n", dir, name);
        return NULL;
    }
    unsigned char hdr[16];
    int hl = 4 + 4 * want_dims;
    if (gzread(f, hdr, (unsigned)hl) != hl || hdr[2] != 0x08 || hdr[3] != want_dims) {
        fprintf(stderr, "bench_mlp: %s is not a u8 IDX file with %d dims\n", path, want_dims);
        gzclose(f);
        return NULL;
    }
    size_t total = 1;
    for (int i = 0; i < want_dims; i++) {
        dims[i] = (int64_t)hdr[4 + 4 * i] << 24 | hdr[5 + 4 * i] << 16 | hdr[6 + 4 * i] << 8 | hdr[7 + 4 * i];
        total *= (size_t)dims[i];
    }
    unsigned char *buf = malloc(total);
    if (!buf || gzread(f, buf, (unsigned)total) != (int)total) {
        fprintf(stderr, "bench_mlp: %s is truncated\n", path);
        free(buf);
        buf = NULL;
    }
    gzclose(f);
    return buf;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        ferry_status st_ = (x);                                                                    \
        if (st_ != FERRY_OK) {                                                                     \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, ferry_status_str(st_),          \
                    ferry_last_error());                                                           \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

static void usage(FILE *f)
{
    fprintf(f, "usage: bench_mlp [IDX-FOLDER] [EPOCHS]\n"
               "  IDX-FOLDER: the Fashion-MNIST IDX files (default /usr/share/datasets/fashion-mnist);\n"
               "  EPOCHS: 1 to 1000000 (default 3)\n");
}

/* The folder and epoch count: 0, CLI_USAGE after saying why, or -1 after --help. */
static int parse_args(int argc, char **argv, const char **dir, int *epochs)
{
    size_t n = 0;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            usage(stdout);
            return -1;
        }
        /* EPOCHS may look like "-2": a bad number, reported as one below. */
        bool option = argv[i][0] == '-' && argv[i][1] && (i == 1 || argv[i][1] == '-');
        if (option || i > 2)
            return cli_unknown("bench_mlp", argv[i], usage);
    }
    if (argc > 1)
        *dir = argv[1];
    if (argc > 2 && cli_size("bench_mlp", "EPOCHS", argv[2], 1, 1000000, &n) != 0)
        return CLI_USAGE;
    if (argc > 2)
        *epochs = (int)n;
    return 0;
}

int main(int argc, char **argv)
{
    const char *dir = "/usr/share/datasets/fashion-mnist";
    int epochs = 3;
    int rc = parse_args(argc, argv, &dir, &epochs);
    if (rc != 0)
        return rc < 0 ? 0 : rc;
    int64_t xd[3], yd[1], txd[3], tyd[1];
    unsigned char *images = read_idx(dir, "train-images-idx3-ubyte", 3, xd);
    unsigned char *labels = read_idx(dir, "train-labels-idx1-ubyte", 1, yd);
    unsigned char *timages = read_idx(dir, "t10k-images-idx3-ubyte", 3, txd);
    unsigned char *tlabels = read_idx(dir, "t10k-labels-idx1-ubyte", 1, tyd);
    if (!images || !labels || !timages || !tlabels)
        return 1;
    const int64_t n = xd[0], batch = 256, px = 784;

    ferry_module *net = NULL, *l = NULL;
    CHECK(ferry_sequential_create(&net));
    CHECK(ferry_flatten_create(&l)); CHECK(ferry_sequential_add(net, l));
    CHECK(ferry_linear_create(784, 256, true, &l)); CHECK(ferry_sequential_add(net, l));
    CHECK(ferry_relu_create(&l)); CHECK(ferry_sequential_add(net, l));
    CHECK(ferry_linear_create(256, 128, true, &l)); CHECK(ferry_sequential_add(net, l));
    CHECK(ferry_relu_create(&l)); CHECK(ferry_sequential_add(net, l));
    CHECK(ferry_linear_create(128, 10, true, &l)); CHECK(ferry_sequential_add(net, l));
    CHECK(ferry_module_init(net, 0));
    ferry_optim *opt = NULL;
    CHECK(ferry_sgd_create(net, 0.01, 0.9, 0.0, &opt));
    ferry_metrics *mt = NULL;
    CHECK(ferry_metrics_create(ferry_cpu(), &mt));

    unsigned char *xb = malloc((size_t)(batch * px));
    int64_t *yb = malloc((size_t)batch * sizeof(int64_t));
    int64_t *order = malloc((size_t)n * sizeof(int64_t));
    printf("ferry %s, MLP 784-256-128-10, batch %lld, SGD lr 0.01 momentum 0.9, %lld samples\n", ferry_version(),
           (long long)batch, (long long)n);
    double best = 1e9;
    for (int e = 0; e < epochs; e++) {
        /* Shuffle (Fisher-Yates from the epoch's Philox stream). */
        ferry_rng r;
        ferry_rng_init(&r, 0, FERRY_RNG_SHUFFLE, (uint64_t)e);
        for (int64_t i = 0; i < n; i++)
            order[i] = i;
        for (int64_t i = n - 1; i > 0; i--) {
            int64_t j = (int64_t)ferry_rng_below(&r, (uint64_t)i + 1), t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
        CHECK(ferry_metrics_reset(mt, NULL));
        double t0 = now();
        for (int64_t b = 0; b < n; b += batch) {
            int64_t bs = n - b < batch ? n - b : batch;
            for (int64_t i = 0; i < bs; i++) {
                memcpy(xb + i * px, images + order[b + i] * px, (size_t)px);
                yb[i] = labels[order[b + i]];
            }
            int64_t xs[3] = {bs, 28, 28};
            ferry_tensor *x8 = NULL, *x = NULL, *y = NULL;
            CHECK(ferry_tensor_from_blob(xb, xs, 3, FERRY_DTYPE_U8, ferry_cpu(), &x8));
            CHECK(ferry_tensor_from_blob(yb, &bs, 1, FERRY_DTYPE_I64, ferry_cpu(), &y));
            CHECK(ferry_affine(x8, 1.0 / 255.0, 0.0, FERRY_DTYPE_F32, NULL, &x));
            CHECK(ferry_train_step(net, opt, NULL, x, y, mt, NULL));
            ferry_tensor_release(x8);
            ferry_tensor_release(x);
            ferry_tensor_release(y);
        }
        double dt = now() - t0;
        double loss = 0, acc = 0;
        CHECK(ferry_metrics_get(mt, &loss, &acc, NULL));
        best = dt < best ? dt : best;
        printf("epoch %d: %.3f s  train loss %.4f  acc %.4f\n", e + 1, dt, loss, acc);
    }
    /* Test accuracy, to show the run trained. */
    CHECK(ferry_metrics_reset(mt, NULL));
    for (int64_t b = 0; b < txd[0]; b += 1000) {
        int64_t bs = txd[0] - b < 1000 ? txd[0] - b : 1000, xs[3] = {bs, 28, 28};
        int64_t *ty = malloc((size_t)bs * sizeof(int64_t));
        for (int64_t i = 0; i < bs; i++)
            ty[i] = tlabels[b + i];
        ferry_tensor *x8 = NULL, *x = NULL, *y = NULL;
        CHECK(ferry_tensor_from_blob(timages + b * px, xs, 3, FERRY_DTYPE_U8, ferry_cpu(), &x8));
        CHECK(ferry_tensor_from_blob(ty, &bs, 1, FERRY_DTYPE_I64, ferry_cpu(), &y));
        CHECK(ferry_affine(x8, 1.0 / 255.0, 0.0, FERRY_DTYPE_F32, NULL, &x));
        CHECK(ferry_eval_step(net, x, y, mt, NULL));
        ferry_tensor_release(x8);
        ferry_tensor_release(x);
        ferry_tensor_release(y);
        free(ty);
    }
    double tl = 0, ta = 0;
    CHECK(ferry_metrics_get(mt, &tl, &ta, NULL));
    printf("best epoch %.3f s; test loss %.4f acc %.4f\n", best, tl, ta);
    ferry_metrics_destroy(mt);
    ferry_optim_destroy(opt);
    ferry_module_destroy(net);
    free(images); free(labels); free(timages); free(tlabels); free(xb); free(yb); free(order);
    return 0;
}

/* A dataset where color carries the label and nothing else does, trained twice
 * through the same pipeline: with 3 input channels and with 1 (gray).
 *   build/samples/train_color --make-data DIR [--train N] [--test N]
 *   build/samples/train_color [--data DIR] [--epochs N] [--batch N] [--lr X]
 *       [--device D] [--workers N] [--seed S] [--channels 3|1] [--out DIR]
 * Each image is a shape (disc, square or bar, random place and size) on a gray
 * background; the class is the shape's hue. Every class color has exactly the
 * background's ITU-R 601 luma (R*299 + G*587 + B*114 = 128000), and the noise
 * adds the same amount to R, G and B, so the grayscale images of all classes
 * have the same distribution: a gray model can only guess, a color model reads
 * the hue. The last two lines are the color and gray test accuracies. */
#include <math.h>
#include <stdlib.h>

#include "common.h"

#define CLASSES 4
#define SIZE 32
#define LUMA 128000 /* 1000 x 128: the background's luma, exactly */

static const char *const class_names[CLASSES] = {"red", "green", "blue", "yellow"};
static const double class_hues[CLASSES] = {0.0, 120.0, 240.0, 60.0}; /* degrees */

/* The most saturated integer color of the given hue with luma exactly LUMA. */
static void class_color(double hue, uint8_t rgb[3])
{
    double best = -1;
    for (int r = 0; r < 256; r++)
        for (int g = 0; g < 256; g++) {
            int rest = LUMA - 299 * r - 587 * g;
            if (rest < 0 || rest % 114 != 0 || rest / 114 > 255)
                continue;
            int b = rest / 114;
            int mx = r > g ? (r > b ? r : b) : (g > b ? g : b);
            int mn = r < g ? (r < b ? r : b) : (g < b ? g : b);
            if (mx == mn)
                continue;
            double d = mx - mn, h;
            if (mx == r) h = fmod((g - b) / d, 6.0);
            else if (mx == g) h = (b - r) / d + 2.0;
            else h = (r - g) / d + 4.0;
            h = h * 60.0 < 0 ? h * 60.0 + 360.0 : h * 60.0;
            double dh = fabs(h - hue);
            dh = dh > 180 ? 360 - dh : dh;
            double score = d - 20.0 * dh; /* saturated, and close to the hue */
            if (score > best) {
                best = score;
                rgb[0] = (uint8_t)r;
                rgb[1] = (uint8_t)g;
                rgb[2] = (uint8_t)b;
            }
        }
}

static ferry_status make_image(ferry_rng *r, const uint8_t color[3], uint8_t *px)
{
    int kind = (int)ferry_rng_below(r, 3);
    double cx = 8 + ferry_rng_uniform(r) * 16, cy = 8 + ferry_rng_uniform(r) * 16;
    double rad = 4 + ferry_rng_uniform(r) * 5;
    for (int y = 0; y < SIZE; y++)
        for (int x = 0; x < SIZE; x++) {
            double dx = x - cx, dy = y - cy;
            bool in = kind == 0 ? dx * dx + dy * dy <= rad * rad
                    : kind == 1 ? fabs(dx) <= rad && fabs(dy) <= rad
                                : fabs(dx) <= rad * 1.4 && fabs(dy) <= rad * 0.4;
            /* The same noise on R, G and B moves the luma by exactly that much. */
            int noise = (int)ferry_rng_below(r, 17) - 8;
            for (int c = 0; c < 3; c++) {
                int v = (in ? color[c] : 128) + noise;
                px[(y * SIZE + x) * 3 + c] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
            }
        }
    return FERRY_OK;
}

static int make_data(const char *dir, size_t ntrain, size_t ntest)
{
    uint8_t colors[CLASSES][3];
    for (int k = 0; k < CLASSES; k++) {
        class_color(class_hues[k], colors[k]);
        printf("class %-6s rgb(%3u, %3u, %3u), luma %d\n", class_names[k], colors[k][0], colors[k][1],
               colors[k][2], (299 * colors[k][0] + 587 * colors[k][1] + 114 * colors[k][2]));
    }
    const char *splits[2] = {"train", "test"};
    size_t counts[2] = {ntrain, ntest};
    uint8_t px[SIZE * SIZE * 3];
    for (int sp = 0; sp < 2; sp++)
        for (int k = 0; k < CLASSES; k++) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s/%s", dir, splits[sp], class_names[k]);
            if (make_dirs(path) != 0) {
                fprintf(stderr, "train_color: cannot create %s: %s\n", path, strerror(errno));
                return 1;
            }
            for (size_t i = 0; i < counts[sp]; i++) {
                ferry_rng r;
                ferry_rng_init(&r, 2026, (uint64_t)(sp * CLASSES + k), i);
                make_image(&r, colors[k], px);
                snprintf(path, sizeof path, "%s/%s/%s/%05zu.png", dir, splits[sp], class_names[k], i);
                if (ferry_png_write_file(path, px, SIZE, SIZE, 3) != FERRY_OK) {
                    fprintf(stderr, "train_color: %s\n", ferry_last_error());
                    return 1;
                }
            }
        }
    printf("wrote %zu train and %zu test images per class to %s\n", ntrain, ntest, dir);
    return 0;
}

typedef struct opts {
    const char *data, *device, *out;
    size_t epochs, batch, workers, channels;
    double lr;
    uint64_t seed;
} opts;

/* Trains the CNN on `channels` input channels; returns the test accuracy. */
static ferry_status run(const opts *o, size_t channels, ferry_device dev, double *test_acc)
{
    ferry_image_config img = ferry_image_config_default();
    img.channels = channels; /* 1: the loader's workers convert to gray (601 luma) */
    img.height = img.width = SIZE;
    char path[4096];
    ferry_dataset *all, *test, *tr, *val;
    snprintf(path, sizeof path, "%s/train", o->data);
    CHECK(ferry_dataset_image_folder(path, &img, &all));
    snprintf(path, sizeof path, "%s/test", o->data);
    CHECK(ferry_dataset_image_folder(path, &img, &test));
    CHECK(ferry_dataset_split(all, 0.1, o->seed, &tr, &val));
    ferry_dataset_destroy(all);

    ferry_loader *l[3];
    ferry_dataset *sets[3] = {tr, val, test};
    for (int i = 0; i < 3; i++) {
        ferry_loader_config c = ferry_loader_config_default();
        c.dataset = sets[i];
        c.batch_size = o->batch;
        c.shuffle = i == 0;
        c.seed = o->seed;
        c.num_workers = o->workers;
        c.device = o->device;
        c.pin_memory = dev.type == FERRY_DEVICE_CUDA;
        for (int ch = 0; ch < 3; ch++) {
            c.mean[ch] = 0.5f;
            c.std[ch] = 0.25f;
        }
        CHECK(ferry_loader_create(&c, &l[i]));
    }
    ferry_module *net;
    CHECK(model_cnn((int64_t)channels, SIZE, SIZE, CLASSES, &net));
    CHECK(ferry_module_init(net, o->seed));
    CHECK(ferry_module_to(net, dev));
    ferry_optim *opt;
    CHECK(ferry_sgd_create(net, o->lr, 0.9, 5e-4, &opt));
    ferry_metrics *met;
    CHECK(ferry_metrics_create(dev, &met));
    ferry_stream *s;
    CHECK(ferry_stream_create(dev, &s));

    static curves c;
    c.n = 0;
    printf("-- %zu channel(s)\n", channels);
    curves_header();
    for (size_t e = 0; e < o->epochs && e < MAX_EPOCHS; e++) {
        epoch_result rt, rv;
        CHECK(run_epoch(l[0], e, net, opt, NULL, met, s, &rt));
        CHECK(run_epoch(l[1], 0, net, NULL, NULL, met, s, &rv));
        curves_add(&c, &rt, &rv);
    }
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/%s", o->out, channels == 3 ? "color" : "gray");
    if (make_dirs(dir) == 0 &&
        curves_write(&c, dir, channels == 3 ? "color shapes, 3 channels" : "color shapes, gray") == 0)
        printf("curves: %s/curves.csv, %s/curves.svg\n", dir, dir);
    epoch_result rtest;
    CHECK(run_epoch(l[2], 0, net, NULL, NULL, met, s, &rtest));
    *test_acc = rtest.accuracy;

    ferry_stream_destroy(s);
    ferry_metrics_destroy(met);
    ferry_optim_destroy(opt);
    ferry_module_destroy(net);
    for (int i = 0; i < 3; i++) {
        ferry_loader_destroy(l[i]);
        ferry_dataset_destroy(sets[i]);
    }
    return FERRY_OK;
}

int main(int argc, char **argv)
{
    opts o = {.data = "build/data/color-shapes", .out = "build/run/color", .epochs = 4, .batch = 64,
              .workers = 2, .lr = 0.02, .seed = 0};
    const char *make = NULL;
    size_t ntrain = 1000, ntest = 250;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            fprintf(stderr, "train_color: %s needs a value\n", a);
            return 2;
        }
        i++;
        if (!strcmp(a, "--make-data")) make = v;
        else if (!strcmp(a, "--train")) ntrain = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--test")) ntest = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--data")) o.data = v;
        else if (!strcmp(a, "--device")) o.device = v;
        else if (!strcmp(a, "--out")) o.out = v;
        else if (!strcmp(a, "--epochs")) o.epochs = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--batch")) o.batch = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--workers")) o.workers = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--channels")) o.channels = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--lr")) o.lr = atof(v);
        else if (!strcmp(a, "--seed")) o.seed = strtoull(v, NULL, 10);
        else {
            fprintf(stderr, "train_color: unknown option %s\n", a);
            return 2;
        }
    }
    if (make)
        return make_data(make, ntrain, ntest);
    if (o.channels != 0 && o.channels != 1 && o.channels != 3) {
        fprintf(stderr, "train_color: --channels must be 3 or 1\n");
        return 2;
    }
    ferry_device dev;
    if (pick_device(o.device, &dev) != FERRY_OK)
        return 1;
    double acc[2] = {0, 0};
    size_t which[2] = {3, 1};
    for (int k = 0; k < 2; k++) {
        if (o.channels && o.channels != which[k])
            continue;
        if (run(&o, which[k], dev, &acc[k]) != FERRY_OK)
            return 1;
    }
    if (!o.channels || o.channels == 3)
        printf("color test accuracy: %.4f\n", acc[0]);
    if (!o.channels || o.channels == 1)
        printf("gray test accuracy: %.4f\n", acc[1]);
    return 0;
}

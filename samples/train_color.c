/* A dataset where color carries the label and nothing else does, trained twice
 * through the same pipeline: with 3 input channels and with 1 (gray).
 *   build/samples/train_color --make-data DIR [--train N] [--test N] [--format png|jpeg]
 *   build/samples/train_color [--data DIR] [--epochs N] [--batch N] [--lr X]
 *       [--device D] [--workers N] [--seed S] [--channels 3|1] [--out DIR]
 * Each image is a shape (disc, square or bar, random place and size) on a gray
 * background; the class is the shape's hue. Every class color has exactly the
 * background's ITU-R 601 luma (R*299 + G*587 + B*114 = 128000), and the noise
 * adds the same amount to R, G and B, so the grayscale images of all classes
 * have the same distribution: a gray model can only guess, a color model reads
 * the hue. The last two lines are the color and gray test accuracies. */
#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>

#include <jpeglib.h>

#include "common.h"
#include "../tools/cli_args.h"

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

/* libjpeg's default error handler exits: jump back and report instead. */
typedef struct jpeg_err {
    struct jpeg_error_mgr mgr;
    jmp_buf jump;
} jpeg_err;

static void jpeg_err_exit(j_common_ptr c)
{
    longjmp(((jpeg_err *)c->err)->jump, 1);
}

/* An RGB image as a baseline JPEG, quality 90 (libjpeg's default 4:2:0), as
 * the usual photo data sets are stored. 0, or -1 after saying why. */
static int write_jpeg(const char *path, const uint8_t *px, int w, int h)
{
    FILE *f = fopen(path, "wb");
    if (!f) {
        fprintf(stderr, "train_color: cannot create %s: %s\n", path, strerror(errno));
        return -1;
    }
    struct jpeg_compress_struct c;
    jpeg_err e;
    c.err = jpeg_std_error(&e.mgr);
    e.mgr.error_exit = jpeg_err_exit;
    if (setjmp(e.jump)) {
        char msg[JMSG_LENGTH_MAX];
        e.mgr.format_message((j_common_ptr)&c, msg);
        fprintf(stderr, "train_color: %s: %s\n", path, msg);
        jpeg_destroy_compress(&c);
        fclose(f);
        return -1;
    }
    jpeg_create_compress(&c);
    jpeg_stdio_dest(&c, f);
    c.image_width = (JDIMENSION)w;
    c.image_height = (JDIMENSION)h;
    c.input_components = 3;
    c.in_color_space = JCS_RGB;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, 90, TRUE);
    jpeg_start_compress(&c, TRUE);
    while (c.next_scanline < c.image_height) {
        JSAMPROW row = (JSAMPROW)(px + (size_t)c.next_scanline * (size_t)w * 3);
        jpeg_write_scanlines(&c, &row, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    if (fclose(f) != 0) {
        fprintf(stderr, "train_color: %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

static int make_data(const char *dir, size_t ntrain, size_t ntest, bool jpeg)
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
                snprintf(path, sizeof path, "%s/%s/%s/%05zu.%s", dir, splits[sp], class_names[k], i,
                         jpeg ? "jpg" : "png");
                if (jpeg) {
                    if (write_jpeg(path, px, SIZE, SIZE) != 0)
                        return 1;
                } else if (ferry_png_save(path, px, SIZE, SIZE, 3) != FERRY_OK) {
                    fprintf(stderr, "train_color: %s\n", ferry_last_error());
                    return 1;
                }
            }
        }
    printf("wrote %zu train and %zu test images per class to %s\n", ntrain, ntest, dir);
    return 0;
}

typedef struct opts {
    const char *data, *device, *out, *save, *resume;
    size_t epochs, batch, workers, channels, save_every;
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
    char hint[4400];
    snprintf(hint, sizeof hint, "make the synthetic colour shapes with `train_color --make-data %s`, "
             "or pass --data DIR holding DIR/train and DIR/test (a folder per class)", o->data);
    CHECK(sample_need_data(path, hint));
    CHECK(ferry_dataset_open(path, &img, &all));
    snprintf(path, sizeof path, "%s/test", o->data);
    CHECK(ferry_dataset_open(path, &img, &test));
    CHECK(ferry_dataset_split(all, 0.1, o->seed, &tr, &val));
    ferry_dataset_release(all);

    ferry_loader *l[3];
    ferry_dataset *sets[3] = {tr, val, test};
    for (int i = 0; i < 3; i++) {
        ferry_loader_config c = {
            .dataset = sets[i], .batch_size = o->batch, .shuffle = i == 0, .seed = o->seed,
            .num_workers = o->workers ? o->workers : FERRY_LOADER_NO_WORKERS, .device = dev,
        };
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
    /* met: the training epoch's sums, which the checkpoint keeps; evaluation
     * has its own, so every save holds the training figures. */
    ferry_metrics *met, *met_eval;
    CHECK(ferry_metrics_create(dev, &met));
    CHECK(ferry_metrics_create(dev, &met_eval));
    ferry_stream *s;
    CHECK(ferry_stream_create(dev, &s));

    sample_ckpt ck = {o->save, o->save_every, 0, 0, false, false, true, {net, opt, NULL, l[0], met}, false, false};
    size_t first = 0;
    CHECK(sample_resume(&ck, o->resume, &first));
    static curves c;
    c.n = 0;
    printf("-- %zu channel(s)\n", channels);
    curves_header();
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/%s", o->out, channels == 3 ? "color" : "gray");
    curves_resume(&c, dir, first);
    sample_nothing_left(&ck, o->resume, first, o->epochs);
    for (size_t e = first; e < o->epochs && e < MAX_EPOCHS; e++) {
        epoch_result rt, rv;
        CHECK(run_epoch(l[0], e, net, opt, NULL, NULL, met, s, &rt, &ck));
        if (ck.stopped)
            break; /* SIGTERM: saved */
        CHECK(run_epoch(l[1], 0, net, NULL, NULL, NULL, met_eval, s, &rv, NULL));
        curves_add(&c, &rt, &rv);
        if (make_dirs(dir) == 0) /* each epoch, so that a killed run's rows are there to resume */
            curves_write(&c, dir, channels == 3 ? "color shapes, 3 channels" : "color shapes, gray");
    }
    if (ck.terminated)
        printf("terminated (SIGTERM), saved: %s\n", o->save);
    else if (o->save) {
        CHECK(sample_save(&ck));
        printf("saved: %s\n", o->save);
    }
    bool curves_lost = make_dirs(dir) != 0 ||
        curves_write(&c, dir, channels == 3 ? "color shapes, 3 channels" : "color shapes, gray") != 0;
    if (curves_lost)
        fprintf(stderr, "train_color: cannot write the curves to %s: %s\n", dir, strerror(errno));
    else
        printf("curves: %s/curves.csv, %s/curves.svg\n", dir, dir);
    epoch_result rtest = {0};
    if (!ck.terminated) /* a preempted run has seconds left: it saved, it goes */
        CHECK(run_epoch(l[2], 0, net, NULL, NULL, NULL, met_eval, s, &rtest, NULL));
    *test_acc = rtest.accuracy;

    ferry_stream_destroy(s);
    ferry_metrics_destroy(met);
    ferry_metrics_destroy(met_eval);
    ferry_optim_destroy(opt);
    ferry_module_destroy(net);
    for (int i = 0; i < 3; i++) {
        ferry_loader_destroy(l[i]);
        ferry_dataset_release(sets[i]);
    }
    return curves_lost ? FERRY_ERR_IO : FERRY_OK;
}

#define PROG "train_color"

static void usage(FILE *f)
{
    fprintf(f, "usage: train_color --make-data DIR [--train N] [--test N] [--format png|jpeg]\n"
               "       train_color [--data DIR] [--epochs N] [--batch N] [--lr X] [--device D]\n"
               "                   [--workers N] [--seed S] [--channels 3|1] [--out DIR]\n"
               "                   [--save FILE] [--save-every N] [--resume FILE]\n"
               "  --train, --test: images per class, 1 to 1000000 (1000, 250); --format: the\n"
               "  files --make-data writes, PNG (default) or JPEG quality 90; --data reads a\n"
               "  folder of either (or both);\n"
               "  --epochs 1 to %d (4), --batch 1 to 65536 (64), --workers 0 to 256 (2),\n"
               "  --lr > 0 and at most 100 (0.02), --seed any unsigned 64-bit integer (0);\n"
               "  --channels: train only the color (3) or the gray (1) model (default both);\n"
               "  --save, --resume: a checkpoint of one model's run (with --channels), at the\n"
               "  end and every --save-every 1 to 1000000000 steps; resumed bit for bit\n",
            MAX_EPOCHS);
}

/* What the command line asks for: make the data, or train on it. */
typedef struct args {
    opts o;
    const char *make;
    size_t ntrain, ntest;
    bool jpeg; /* --format jpeg */
} args;

static const char *const value_opts[] = {"--make-data", "--train", "--test", "--data",
                                         "--device", "--out", "--epochs", "--batch",
                                         "--workers", "--channels", "--lr", "--seed", "--save",
                                         "--save-every", "--resume", "--format", NULL};

/* Option a with its value v into r: 0, or CLI_USAGE after the one-line message. */
static int parse_value(args *r, const char *a, const char *v)
{
    static const char *const channels[] = {"1", "3", NULL};
    static const char *const formats[] = {"png", "jpeg", NULL};
    int k = 0;
    if (!strcmp(a, "--train")) return cli_size(PROG, a, v, 1, 1000000, &r->ntrain);
    if (!strcmp(a, "--test")) return cli_size(PROG, a, v, 1, 1000000, &r->ntest);
    if (!strcmp(a, "--epochs")) return cli_size(PROG, a, v, 1, MAX_EPOCHS, &r->o.epochs);
    if (!strcmp(a, "--batch")) return cli_size(PROG, a, v, 1, 65536, &r->o.batch);
    if (!strcmp(a, "--workers")) return cli_size(PROG, a, v, 0, 256, &r->o.workers);
    if (!strcmp(a, "--lr")) return cli_double(PROG, a, v, 0, true, 100, &r->o.lr);
    if (!strcmp(a, "--seed")) return cli_u64(PROG, a, v, &r->o.seed);
    if (!strcmp(a, "--save-every")) return cli_size(PROG, a, v, 1, 1000000000, &r->o.save_every);
    if (!strcmp(a, "--channels")) {
        if (cli_choice(PROG, a, v, channels, &k) != 0)
            return CLI_USAGE;
        r->o.channels = k ? 3 : 1;
    }
    else if (!strcmp(a, "--format")) {
        if (cli_choice(PROG, a, v, formats, &k) != 0)
            return CLI_USAGE;
        r->jpeg = k == 1;
    }
    else if (!strcmp(a, "--make-data")) r->make = v;
    else if (!strcmp(a, "--data")) r->o.data = v;
    else if (!strcmp(a, "--device")) r->o.device = v;
    else if (!strcmp(a, "--save")) r->o.save = v;
    else if (!strcmp(a, "--resume")) r->o.resume = v;
    else r->o.out = v; /* --out, the one left */
    return 0;
}

/* The command line into r: 0, CLI_USAGE after saying why, or -1 after --help. */
static int parse_args(int argc, char **argv, args *r)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cli_is_help(a)) {
            usage(stdout);
            return -1;
        }
        if (!cli_in(a, value_opts))
            return cli_unknown(PROG, a, usage);
        const char *v = cli_value(PROG, argc, argv, &i);
        if (!v || parse_value(r, a, v) != 0)
            return CLI_USAGE;
    }
    return 0;
}

int main(int argc, char **argv)
{
    args r = {.o = {.data = "build/data/color-shapes", .out = "build/run/color", .epochs = 4,
                    .batch = 64, .workers = 2, .lr = 0.02, .seed = 0},
              .ntrain = 1000, .ntest = 250};
    int rc = parse_args(argc, argv, &r);
    if (rc != 0)
        return rc < 0 ? 0 : rc;
    if (r.make)
        return make_data(r.make, r.ntrain, r.ntest, r.jpeg);
    const opts o = r.o;
    if ((o.save || o.resume) && !o.channels) {
        fprintf(stderr, "train_color: --save and --resume need --channels 3 or 1 (a checkpoint holds one model)\n");
        usage(stderr);
        return 2;
    }
    if (check_outputs("train_color", o.save, o.out) != 0)
        return 1;
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
        if (sample_sigterm)
            return 128 + SIGTERM;
    }
    if (!o.channels || o.channels == 3)
        printf("color test accuracy: %.4f\n", acc[0]);
    if (!o.channels || o.channels == 1)
        printf("gray test accuracy: %.4f\n", acc[1]);
    return 0;
}

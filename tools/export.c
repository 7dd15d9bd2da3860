/* `ferry export`: writes an IDX pair (Fashion-MNIST or any other) as an image
 * folder, OUT/<split>/<class>/<index>.png, with the index zero-padded so that
 * name order is index order. Class folders start with the label, zero-padded
 * to one width (00 .. 11, 0_T-shirt_top .. 9_Ankle_boot): an image folder
 * numbers its classes in name order, so that order must be label order for the
 * export to read back with the labels it came from. Two threads write in
 * parallel. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_args.h"
#include "commands.h"
#include "ferry.h"
#include "files.h"

static const char *const fashion_classes[10] = {
    "T-shirt_top", "Trouser", "Pullover", "Dress", "Coat",
    "Sandal", "Shirt", "Sneaker", "Bag", "Ankle_boot",
};

typedef struct export_job {
    ferry_dataset *ds;
    const char *out_dir;
    const char *const *class_names; /* NULL: class folders named by label number */
    int class_digits;               /* width of the label in a class folder's name */
    int digits;
    size_t stride, first;
    int failed;
    char err[1200];
} export_job;

static void class_dir(const export_job *j, int64_t label, char *buf, size_t n)
{
    if (j->class_names && label >= 0 && label < 10)
        snprintf(buf, n, "%s/%0*lld_%s", j->out_dir, j->class_digits, (long long)label,
                 j->class_names[label]);
    else
        snprintf(buf, n, "%s/%0*lld", j->out_dir, j->class_digits, (long long)label);
}

static void *export_worker(void *arg)
{
    export_job *j = arg;
    const ferry_sample_format *f = ferry_dataset_format(j->ds);
    size_t bytes = ferry_dataset_sample_bytes(j->ds);
    uint8_t *buf = malloc(bytes);
    if (!buf) {
        j->failed = 1;
        snprintf(j->err, sizeof j->err, "out of memory");
        return NULL;
    }
    ferry_scratch *s = NULL;
    ferry_scratch_create(&s);
    ferry_sample_ctx ctx = {.scratch = s};
    size_t len = ferry_dataset_len(j->ds);
    for (size_t i = j->first; i < len && !j->failed; i += j->stride) {
        int64_t label;
        ferry_status st = ferry_dataset_get(j->ds, i, buf, bytes, &ctx, &label);
        char path[4096], dir[4000];
        class_dir(j, label, dir, sizeof dir);
        snprintf(path, sizeof path, "%s/%0*zu.png", dir, j->digits, i);
        if (st == FERRY_OK)
            st = ferry_png_save(path, buf, f->width, f->height, f->channels);
        if (st != FERRY_OK) {
            j->failed = 1;
            snprintf(j->err, sizeof j->err, "%s", ferry_last_error());
        }
    }
    ferry_scratch_destroy(s);
    free(buf);
    return NULL;
}

/* Exports one IDX pair into out_dir. Returns 0, or 1 after printing why. */
static int export_pair(const char *images, const char *labels, const char *out_dir,
                       const char *const *class_names)
{
    ferry_image_config cfg = ferry_image_config_default();
    cfg.layout = FERRY_LAYOUT_HWC; /* what PNG rows are */
    ferry_dataset *ds;
    if (ferry_dataset_idx(images, labels, &cfg, &ds) != FERRY_OK) {
        fprintf(stderr, "ferry export: %s\n", ferry_last_error());
        return 1;
    }
    size_t len = ferry_dataset_len(ds);
    export_job jobs[2];
    int digits = 5;
    for (size_t m = 100000; m <= len - (len > 0); m *= 10)
        digits++;
    size_t classes = ferry_dataset_class_count(ds);
    int class_digits = 1;
    for (size_t m = 10; m <= classes - (classes > 0); m *= 10)
        class_digits++;
    /* Class folders first, so the workers only write files. */
    for (size_t c = 0; c < classes; c++) {
        char dir[4096];
        export_job tmp = {.out_dir = out_dir, .class_names = class_names,
                          .class_digits = class_digits};
        class_dir(&tmp, (int64_t)c, dir, sizeof dir);
        if (tool_mkdirs(dir) != 0) {
            fprintf(stderr, "ferry export: %s: %s\n", dir, strerror(errno));
            ferry_dataset_release(ds);
            return 1;
        }
    }
    double t0 = tool_now();
    pthread_t th;
    for (int k = 0; k < 2; k++)
        jobs[k] = (export_job){.ds = ds, .out_dir = out_dir, .class_names = class_names,
                               .class_digits = class_digits, .digits = digits, .stride = 2, .first = (size_t)k};
    int threaded = pthread_create(&th, NULL, export_worker, &jobs[1]) == 0;
    if (!threaded)
        jobs[0].stride = 1;
    export_worker(&jobs[0]);
    if (threaded)
        pthread_join(th, NULL);
    ferry_dataset_release(ds);
    for (int k = 0; k < 2; k++)
        if (jobs[k].failed) {
            fprintf(stderr, "ferry export: %s\n", jobs[k].err);
            return 1;
        }
    printf("%s: %zu images in %.1f s\n", out_dir, len, tool_now() - t0);
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: ferry export fashion-mnist OUT [--source DIR]\n"
               "       ferry export idx IMAGES LABELS OUT\n"
               "writes an IDX pair (Fashion-MNIST's two, from --source, default\n"
               "/usr/share/datasets/fashion-mnist) as a PNG image folder OUT/<class>/<n>.png\n");
}

/* The first of names that exists in dir, written into buf. */
static int find_file(const char *dir, const char *const *names, char *buf, size_t n)
{
    for (; *names; names++) {
        snprintf(buf, n, "%s/%s", dir, *names);
        FILE *f = fopen(buf, "rb");
        if (f) {
            fclose(f);
            return 0;
        }
    }
    return -1;
}

/* The arguments: 0 with *out (and *src for fashion-mnist) set, CLI_USAGE after
 * saying why, or -1 after --help. argv[1] is fashion-mnist or idx. */
static int parse_args(int argc, char **argv, const char **out, const char **src)
{
    for (int i = 1; i < argc; i++)
        if (cli_is_help(argv[i])) {
            usage(stdout);
            return -1;
        }
    if (argc < 2) {
        usage(stderr);
        return CLI_USAGE;
    }
    if (strcmp(argv[1], "idx") != 0 && strcmp(argv[1], "fashion-mnist") != 0)
        return cli_unknown("ferry export", argv[1], usage);
    if (!strcmp(argv[1], "idx")) {
        for (int i = 2; i < argc; i++)
            if (argv[i][0] == '-' || i > 4)
                return cli_unknown("ferry export", argv[i], usage);
        if (argc != 5) {
            usage(stderr);
            return CLI_USAGE;
        }
        return 0;
    }
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--source")) {
            if (!(*src = cli_value("ferry export", argc, argv, &i)))
                return CLI_USAGE;
        } else if (argv[i][0] == '-' || *out) {
            return cli_unknown("ferry export", argv[i], usage);
        } else {
            *out = argv[i];
        }
    }
    if (!*out) {
        usage(stderr);
        return CLI_USAGE;
    }
    return 0;
}

int cmd_export(int argc, char **argv)
{
    const char *out = NULL, *src = "/usr/share/datasets/fashion-mnist";
    int rc = parse_args(argc, argv, &out, &src);
    if (rc != 0)
        return rc < 0 ? 0 : rc;
    if (!strcmp(argv[1], "idx"))
        return export_pair(argv[2], argv[3], argv[4], NULL);
    static const char *const names[4][3] = {
        {"train-images-idx3-ubyte.gz", "train-images-idx3-ubyte", NULL},
        {"train-labels-idx1-ubyte.gz", "train-labels-idx1-ubyte", NULL},
        {"t10k-images-idx3-ubyte.gz", "t10k-images-idx3-ubyte", NULL},
        {"t10k-labels-idx1-ubyte.gz", "t10k-labels-idx1-ubyte", NULL},
    };
    char paths[4][4096];
    for (int k = 0; k < 4; k++)
        if (find_file(src, names[k], paths[k], sizeof paths[k]) != 0) {
            fprintf(stderr, "ferry export: %s/%s not found (install dataset-fashion-mnist or "
                            "give --source DIR)\n", src, names[k][0]);
            return 1;
        }
    char train[4096], test[4096];
    snprintf(train, sizeof train, "%s/train", out);
    snprintf(test, sizeof test, "%s/test", out);
    if (export_pair(paths[0], paths[1], train, fashion_classes) != 0)
        return 1;
    return export_pair(paths[2], paths[3], test, fashion_classes);
}

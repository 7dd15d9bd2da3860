/* Fashion-MNIST, 1 x 28 x 28 grayscale, through the loader, trained in C.
 *   build/samples/train_gray [--data DIR | --idx DIR] [--model mlp|cnn] [--epochs N]
 *       [--batch N] [--lr X] [--device D] [--amp] [--workers N] [--seed S] [--out DIR]
 * --data: a folder with train/ and test/ as `ferry export fashion-mnist` writes it
 * (default build/data/fashion-mnist); --idx: a folder with the four IDX files.
 * 10% of train (seeded) is held out for validation. The last line printed is
 * "test accuracy: 0.XXXX" on the 10,000 test images. */
#include <stdlib.h>

#include "common.h"

static const float MEAN = 0.2860f, STD = 0.3530f; /* Fashion-MNIST's train set */

typedef struct opts {
    const char *data, *idx, *model, *device, *out;
    size_t epochs, batch, workers;
    double lr;
    bool amp;
    uint64_t seed;
} opts;

static int usage(void)
{
    fprintf(stderr, "usage: train_gray [--data DIR | --idx DIR] [--model mlp|cnn] [--epochs N] [--batch N]\n"
                    "                  [--lr X] [--device D] [--amp] [--workers N] [--seed S] [--out DIR]\n");
    return 2;
}

static ferry_status open_datasets(const opts *o, ferry_dataset **train, ferry_dataset **test)
{
    if (o->idx) {
        char a[4096], b[4096];
        snprintf(a, sizeof a, "%s/train-images-idx3-ubyte.gz", o->idx);
        snprintf(b, sizeof b, "%s/train-labels-idx1-ubyte.gz", o->idx);
        CHECK(ferry_dataset_idx(a, b, NULL, train));
        snprintf(a, sizeof a, "%s/t10k-images-idx3-ubyte.gz", o->idx);
        snprintf(b, sizeof b, "%s/t10k-labels-idx1-ubyte.gz", o->idx);
        return ferry_dataset_idx(a, b, NULL, test);
    }
    ferry_image_config img = ferry_image_config_default();
    img.channels = 1;
    img.height = img.width = 28;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/train", o->data);
    CHECK(ferry_dataset_image_folder(dir, &img, train));
    snprintf(dir, sizeof dir, "%s/test", o->data);
    return ferry_dataset_image_folder(dir, &img, test);
}

static ferry_status make_loader(ferry_dataset *ds, const opts *o, size_t batch, bool train,
                                ferry_loader **out)
{
    ferry_loader_config c = ferry_loader_config_default();
    c.dataset = ds;
    c.batch_size = batch;
    c.shuffle = train;
    c.train = train;
    c.seed = o->seed;
    c.num_workers = o->workers;
    c.device = o->device;
    c.pin_memory = ferry_cuda_is_available();
    c.mean[0] = MEAN;
    c.std[0] = STD;
    return ferry_loader_create(&c, out);
}

static ferry_status train(const opts *o)
{
    ferry_device dev;
    CHECK(pick_device(o->device, &dev));
    ferry_dataset *all, *test, *tr, *val;
    ferry_status st = open_datasets(o, &all, &test);
    if (st != FERRY_OK) {
        fprintf(stderr, "%s\n", ferry_last_error());
        return st;
    }
    CHECK(ferry_dataset_split(all, 0.1, o->seed, &tr, &val));
    ferry_dataset_destroy(all);
    printf("data: %zu train, %zu validation, %zu test images\n", ferry_dataset_len(tr),
           ferry_dataset_len(val), ferry_dataset_len(test));

    ferry_loader *ltr, *lval, *ltest;
    size_t batch = o->batch;
    CHECK(make_loader(tr, o, batch, true, &ltr));
    CHECK(make_loader(val, o, batch, false, &lval));
    CHECK(make_loader(test, o, batch, false, &ltest));

    ferry_module *net;
    bool cnn = !strcmp(o->model, "cnn");
    CHECK(cnn ? model_cnn(1, 28, 28, 10, &net) : model_mlp(784, 10, &net));
    CHECK(ferry_module_init(net, o->seed));
    CHECK(ferry_module_to(net, dev));
    printf("model: %s, %lld parameters\n", o->model, (long long)ferry_module_num_parameters(net));
    ferry_optim *opt;
    CHECK(ferry_sgd_create(net, o->lr, 0.9, 5e-4, &opt));
    ferry_amp *amp = NULL;
    if (o->amp) {
        ferry_amp_config ac = ferry_amp_config_default(FERRY_DTYPE_BF16);
        CHECK(ferry_amp_create(net, &ac, &amp));
    }
    ferry_metrics *met;
    CHECK(ferry_metrics_create(dev, &met));
    ferry_stream *s;
    CHECK(ferry_stream_create(dev, &s));

    static curves c;
    curves_header();
    for (size_t e = 0; e < o->epochs && e < MAX_EPOCHS; e++) {
        /* Step the learning rate down for the last third. */
        if (e == o->epochs - o->epochs / 3 && o->epochs >= 3)
            ferry_optim_set_lr(opt, o->lr * 0.1);
        epoch_result rt, rv;
        ferry_status st;
        /* A step that does not fit leaves the model usable: halve the batch and
         * run the epoch again. */
        while ((st = run_epoch(ltr, e, net, opt, amp, met, s, &rt)) == FERRY_ERR_DEVICE_OOM && batch > 1) {
            batch /= 2;
            printf("out of device memory: running epoch %zu again with batch %zu\n", e + 1, batch);
            ferry_loader_destroy(ltr);
            CHECK(make_loader(tr, o, batch, true, &ltr));
        }
        CHECK(st);
        CHECK(run_epoch(lval, 0, net, NULL, NULL, met, s, &rv));
        curves_add(&c, &rt, &rv);
    }
    if (make_dirs(o->out) != 0 || curves_write(&c, o->out, "Fashion-MNIST, grayscale") != 0)
        fprintf(stderr, "train_gray: cannot write the curves to %s\n", o->out);
    else
        printf("curves: %s/curves.csv, %s/curves.svg\n", o->out, o->out);

    epoch_result rtest;
    CHECK(run_epoch(ltest, 0, net, NULL, NULL, met, s, &rtest));
    printf("test accuracy: %.4f\n", rtest.accuracy);

    ferry_stream_destroy(s);
    ferry_metrics_destroy(met);
    ferry_amp_destroy(amp);
    ferry_optim_destroy(opt);
    ferry_module_destroy(net);
    ferry_loader_destroy(ltest);
    ferry_loader_destroy(lval);
    ferry_loader_destroy(ltr);
    ferry_dataset_destroy(test);
    ferry_dataset_destroy(val);
    ferry_dataset_destroy(tr);
    return FERRY_OK;
}

int main(int argc, char **argv)
{
    opts o = {.data = "build/data/fashion-mnist", .model = "mlp", .out = "build/run",
              .epochs = 10, .batch = 128, .workers = 2, .lr = 0.05, .seed = 0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--amp")) { o.amp = true; continue; }
        if (!v)
            return usage();
        i++;
        if (!strcmp(a, "--data")) o.data = v;
        else if (!strcmp(a, "--idx")) o.idx = v;
        else if (!strcmp(a, "--model")) o.model = v;
        else if (!strcmp(a, "--device")) o.device = v;
        else if (!strcmp(a, "--out")) o.out = v;
        else if (!strcmp(a, "--epochs")) o.epochs = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--batch")) o.batch = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--workers")) o.workers = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--lr")) o.lr = atof(v);
        else if (!strcmp(a, "--seed")) o.seed = strtoull(v, NULL, 10);
        else return usage();
    }
    if (strcmp(o.model, "mlp") && strcmp(o.model, "cnn")) {
        fprintf(stderr, "train_gray: --model must be mlp or cnn (got \"%s\")\n", o.model);
        return 2;
    }
    if (o.epochs == 0 || o.batch == 0 || !(o.lr > 0)) {
        fprintf(stderr, "train_gray: --epochs, --batch and --lr must be positive\n");
        return 2;
    }
    return train(&o) == FERRY_OK ? 0 : 1;
}

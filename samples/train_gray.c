/* Fashion-MNIST, 1 x 28 x 28 grayscale, through the loader, trained in C.
 *   build/samples/train_gray [--data DIR | --idx DIR] [--model mlp|cnn] [--epochs N]
 *       [--batch N] [--lr X] [--device D] [--amp] [--graph] [--workers N] [--seed S] [--out DIR]
 *       [--limit N] [--save FILE] [--save-every N] [--resume FILE] [--dist]
 * --data: a folder with train/ and test/ as `ferry export fashion-mnist` writes it
 * (default build/data/fashion-mnist); --idx: a folder with the four IDX files.
 * 10% of train (seeded) is held out for validation; --limit trains on the first N
 * of the rest (validation and test stay whole, and the data line says so). The last line printed is "test accuracy: 0.XXXX" on the 10,000
 * test images. --save FILE writes the whole run (model, optimiser, loss scaler,
 * the training loader's place) as a safetensors checkpoint at the end, and every
 * --save-every N steps; --resume FILE, with otherwise the same arguments, goes on
 * from such a checkpoint and ends as the uninterrupted run would, bit for bit.
 *
 * --dist: data-parallel, one process per rank under mpirun (docs/DISTRIBUTED.md):
 *   mpirun -np 2 build/samples/train_gray --dist
 * Each rank trains on its share of every epoch with --batch images per step, so
 * a step sees ranks x batch images, as one process with that batch would; rank 0
 * prints (its own share's training loss) and saves. */
#include <stdio.h>
#include <stdlib.h>

#include "common.h"
#include "../tools/cli_args.h"

static const float MEAN = 0.2860f, STD = 0.3530f; /* Fashion-MNIST's train set */

typedef struct opts {
    const char *data, *idx, *model, *device, *out, *save, *resume;
    size_t epochs, batch, workers, limit, save_every, stop_after;
    double lr;
    bool amp, dist, graph;
    uint64_t seed;
} opts;

#define PROG "train_gray"
/* Where Debian's dataset-fashion-mnist package puts the IDX files. */
#define DEBIAN_FMNIST "/usr/share/datasets/fashion-mnist"

static void usage(FILE *f)
{
    fprintf(f, "usage: train_gray [--data DIR | --idx DIR] [--model mlp|cnn] [--epochs N] [--batch N]\n"
               "                  [--lr X] [--device D] [--amp] [--graph] [--workers N] [--seed S]\n"
               "                  [--out DIR]\n"
               "                  [--limit N] [--save FILE] [--save-every N] [--resume FILE]\n"
               "                  [--stop-after N] [--dist]\n"
               "  --epochs 1 to %d (default 10), --batch 1 to 65536 (128), --workers 0 to 256 (2),\n"
               "  --lr > 0 and at most 100 (0.05), --limit 1 to 1000000000 (all): train on the first\n"
               "  N training images (validation and test stay whole), --seed any\n"
               "  unsigned 64-bit integer (0); --data default build/data/fashion-mnist;\n"
               "  --save-every 1 to 1000000000 steps (only at the end); --stop-after N: save and\n"
               "  stop after N steps in all, as a preempted run would (resume with --resume);\n"
               "  --graph: each training step replays one captured CUDA graph (not with --dist)\n",
            MAX_EPOCHS);
}

static const char *const value_opts[] = {"--data", "--idx", "--model", "--device", "--out",
                                         "--save", "--limit", "--epochs", "--batch",
                                         "--workers", "--lr", "--seed", "--save-every",
                                         "--resume", "--stop-after", NULL};

/* Option a with its value v into o: 0, or CLI_USAGE after the one-line message. */
static int parse_value(opts *o, const char *a, const char *v)
{
    static const char *const models[] = {"mlp", "cnn", NULL};
    int k = 0;
    if (!strcmp(a, "--limit")) return cli_size(PROG, a, v, 1, 1000000000, &o->limit);
    if (!strcmp(a, "--epochs")) return cli_size(PROG, a, v, 1, MAX_EPOCHS, &o->epochs);
    if (!strcmp(a, "--batch")) return cli_size(PROG, a, v, 1, 65536, &o->batch);
    if (!strcmp(a, "--workers")) return cli_size(PROG, a, v, 0, 256, &o->workers);
    if (!strcmp(a, "--lr")) return cli_double(PROG, a, v, 0, true, 100, &o->lr);
    if (!strcmp(a, "--seed")) return cli_u64(PROG, a, v, &o->seed);
    if (!strcmp(a, "--save-every")) return cli_size(PROG, a, v, 1, 1000000000, &o->save_every);
    if (!strcmp(a, "--stop-after")) return cli_size(PROG, a, v, 1, 1000000000, &o->stop_after);
    if (!strcmp(a, "--model")) {
        if (cli_choice(PROG, a, v, models, &k) != 0)
            return CLI_USAGE;
        o->model = models[k];
    }
    else if (!strcmp(a, "--data")) o->data = v;
    else if (!strcmp(a, "--idx")) o->idx = v;
    else if (!strcmp(a, "--device")) o->device = v;
    else if (!strcmp(a, "--out")) o->out = v;
    else if (!strcmp(a, "--resume")) o->resume = v;
    else o->save = v; /* --save, the one left */
    return 0;
}

/* The command line into o: 0, CLI_USAGE after saying why, or -1 after --help. */
static int parse_args(int argc, char **argv, opts *o)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cli_is_help(a)) {
            usage(stdout);
            return -1;
        }
        if (!strcmp(a, "--amp")) {
            o->amp = true;
        } else if (!strcmp(a, "--graph")) {
            o->graph = true;
        } else if (!strcmp(a, "--dist")) {
            o->dist = true;
        } else if (cli_in(a, value_opts)) {
            const char *v = cli_value(PROG, argc, argv, &i);
            if (!v || parse_value(o, a, v) != 0)
                return CLI_USAGE;
        } else {
            return cli_unknown(PROG, a, usage);
        }
    }
    /* The data-parallel step talks to NCCL from a gradient hook, which the
     * captured step does not hold. */
    if (o->graph && o->dist) {
        fprintf(stderr, PROG ": --graph does not combine with --dist\n");
        return CLI_USAGE;
    }
    return 0;
}

/* A --data folder holds what this sample trains on: 1 x 28 x 28 grayscale
 * images (a colour or other-size folder would otherwise be converted
 * quietly, and train a model on something else). Its classes are taken as they
 * are, the same names in train/ and test/. */
static ferry_status check_folder(const char *dir, const ferry_dataset *train_ds)
{
    ferry_dataset *ds;
    ferry_status st = ferry_dataset_open(dir, NULL, &ds);
    if (st != FERRY_OK)
        return st;
    const ferry_sample_format *f = ferry_dataset_format(ds);
    if (f->channels != 1 || f->height != 28 || f->width != 28)
        st = ferry_set_error(FERRY_ERR_INVALID_ARG, "%s: train_gray trains on 1 x 28 x 28 grayscale "
                             "images, and these are %zu x %zu x %zu (channels x height x width, "
                             "from %s): use train_color, or a folder `ferry export fashion-mnist` "
                             "wrote", dir, f->channels, f->height, f->width,
                             ferry_dataset_sample_name(ds, 0));
    size_t k = ferry_dataset_class_count(ds);
    for (size_t c = 0; st == FERRY_OK && train_ds && c < k; c++)
        if (k != ferry_dataset_class_count(train_ds) ||
            strcmp(ferry_dataset_class_name(ds, c), ferry_dataset_class_name(train_ds, c)) != 0)
            st = ferry_set_error(FERRY_ERR_INVALID_ARG, "%s: its %zu classes are not the %zu of "
                                 "train/ (the same names, in the same order)", dir, k,
                                 ferry_dataset_class_count(train_ds));
    ferry_dataset_release(ds);
    return st;
}

/* How to get Fashion-MNIST, for a --data or --idx folder that is not there. */
static const char *fashion_mnist_hint(const char *data)
{
    static char hint[1024];
    struct stat sb;
    bool here = stat(DEBIAN_FMNIST "/train-images-idx3-ubyte.gz", &sb) == 0;
    snprintf(hint, sizeof hint, "get Fashion-MNIST: --idx " DEBIAN_FMNIST " (Debian's "
             "dataset-fashion-mnist%s), `ferry export fashion-mnist %s` (then --data %s), or "
             "`make run` (exports it to build/data/fashion-mnist, the default --data, and trains)",
             here ? ", installed here" : ": apt install dataset-fashion-mnist", data, data);
    return hint;
}

static ferry_status open_datasets(const opts *o, ferry_dataset **train, ferry_dataset **test)
{
    if (o->idx) {
        char a[4096]; /* the labels file beside each is found by ferry_dataset_open */
        snprintf(a, sizeof a, "%s/train-images-idx3-ubyte.gz", o->idx);
        CHECK(sample_need_data(o->idx, fashion_mnist_hint(o->data)));
        CHECK(ferry_dataset_open(a, NULL, train));
        snprintf(a, sizeof a, "%s/t10k-images-idx3-ubyte.gz", o->idx);
        return ferry_dataset_open(a, NULL, test);
    }
    ferry_image_config img = ferry_image_config_default();
    img.channels = 1;
    img.height = img.width = 28;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/train", o->data);
    ferry_status st = sample_need_data(dir, fashion_mnist_hint(o->data));
    if (st == FERRY_OK)
        st = check_folder(dir, NULL);
    if (st == FERRY_OK)
        st = ferry_dataset_open(dir, &img, train);
    if (st != FERRY_OK)
        return st;
    snprintf(dir, sizeof dir, "%s/test", o->data);
    if ((st = check_folder(dir, *train)) == FERRY_OK &&
        (st = ferry_dataset_open(dir, &img, test)) == FERRY_OK)
        return FERRY_OK;
    ferry_dataset_release(*train);
    return st;
}

/* The loader delivers on dev, the model's device (under --dist the rank's own,
 * which "cuda" or no --device would not name); dist (may be NULL) gives the
 * training loader its rank's share. */
static ferry_status make_loader(ferry_dataset *ds, const opts *o, size_t batch, bool train,
                                ferry_device dev, ferry_dist *dist, ferry_loader **out)
{
    ferry_loader_config c = {
        .dataset = ds, .batch_size = batch, .shuffle = train, .eval = !train, .seed = o->seed,
        .num_workers = o->workers ? o->workers : FERRY_LOADER_NO_WORKERS, .device = dev,
    };
    if (dist && train) {
        c.sampler = FERRY_SAMPLER_DISTRIBUTED;
        c.rank = (size_t)ferry_dist_rank(dist);
        c.world_size = (size_t)ferry_dist_world_size(dist);
    }
    c.mean[0] = MEAN;
    c.std[0] = STD;
    return ferry_loader_create(&c, out);
}

static ferry_status train(const opts *o, ferry_dist *dist)
{
    ferry_device dev;
    if (dist) {
        dev = ferry_dist_device(dist);
        char dn[FERRY_DEVICE_NAME_MAX];
        printf("distributed: %d ranks over %s; rank 0 on %s\n", ferry_dist_world_size(dist),
               ferry_dist_backend(dist), ferry_device_format(dev, dn, sizeof dn));
    } else {
        CHECK(pick_device(o->device, &dev));
    }
    if (ferry_dist_rank(dist) == 0 && check_outputs(PROG, o->save, o->out) != 0)
        return FERRY_ERR_INVALID_ARG;
    ferry_dataset *all, *test, *tr, *val;
    ferry_status st = open_datasets(o, &all, &test);
    if (st != FERRY_OK) {
        sample_report();
        return st;
    }
    CHECK(ferry_dataset_split(all, 0.1, o->seed, &tr, &val));
    ferry_dataset_release(all);
    /* --limit shortens training only: validation and test stay whole, so
     * their figures compare with a run without it. Said on the line. */
    char limited[128] = "";
    if (o->limit && o->limit < ferry_dataset_len(tr)) {
        ferry_dataset *first;
        snprintf(limited, sizeof limited, " (--limit %zu: the first of %zu; validation and test "
                 "stay whole)", o->limit, ferry_dataset_len(tr));
        CHECK(ferry_dataset_subset(tr, 0, o->limit, &first));
        ferry_dataset_release(tr);
        tr = first;
    }
    size_t classes = ferry_dataset_class_count(test);
    printf("data: %zu train%s, %zu validation, %zu test images, %zu classes\n",
           ferry_dataset_len(tr), limited, ferry_dataset_len(val), ferry_dataset_len(test), classes);

    ferry_loader *ltr, *lval, *ltest;
    size_t batch = o->batch;
    CHECK(make_loader(tr, o, batch, true, dev, dist, &ltr));
    CHECK(make_loader(val, o, batch, false, dev, dist, &lval));
    CHECK(make_loader(test, o, batch, false, dev, dist, &ltest));

    ferry_module *net;
    bool cnn = !strcmp(o->model, "cnn");
    CHECK(cnn ? model_cnn(1, 28, 28, (int64_t)classes, &net) : model_mlp(784, (int64_t)classes, &net));
    CHECK(ferry_module_init(net, o->seed));
    CHECK(ferry_module_to(net, dev));
    printf("model: %s, %lld parameters\n", o->model, (long long)ferry_module_trainable_numel(net));
    ferry_optim *opt;
    CHECK(ferry_sgd_create(net, o->lr, 0.9, 5e-4, &opt));
    ferry_amp *amp = NULL;
    if (o->amp) {
        ferry_amp_config ac = ferry_amp_config_default(FERRY_DTYPE_BF16);
        CHECK(ferry_amp_create(net, &ac, &amp));
    }
    /* Every rank starts from rank 0's weights; backward averages the gradients. */
    ferry_ddp *ddp = NULL;
    if (dist)
        CHECK(ferry_ddp_create(dist, net, 0, &ddp));
    /* met: the training epoch's sums, which the checkpoint keeps; evaluation
     * has its own, so every save holds the training figures. */
    ferry_metrics *met, *met_eval;
    CHECK(ferry_metrics_create(dev, &met));
    CHECK(ferry_metrics_create(dev, &met_eval));
    ferry_stream *s;
    CHECK(ferry_stream_create(dev, &s));
    ferry_train_graph *graph = NULL;
    if (o->graph)
        CHECK(ferry_train_graph_create(net, opt, amp, met, &graph));

    bool rank0 = ferry_dist_rank(dist) == 0;
    sample_ckpt ck = {o->save, o->save_every, 0, o->stop_after, false, false, rank0, {net, opt, amp, ltr, met}, false, false};
    size_t first = 0;
    CHECK(sample_resume(&ck, o->resume, &first));
    static curves c;
    curves_header();
    if (rank0)
        curves_resume(&c, o->out, first);
    sample_nothing_left(&ck, o->resume, first, o->epochs);
    for (size_t e = first; e < o->epochs && e < MAX_EPOCHS; e++) {
        /* The learning rate steps down for the last third (set every epoch, so
         * that a resumed run has it too). */
        ferry_optim_set_lr(opt, o->epochs >= 3 && e >= o->epochs - o->epochs / 3 ? o->lr * 0.1 : o->lr);
        epoch_result rt, rv;
        ferry_status st;
        /* A step that does not fit leaves the model usable: halve the batch and
         * run the epoch again. */
        while ((st = run_epoch(ltr, e, net, opt, amp, graph, met, s, &rt, &ck)) == FERRY_ERR_DEVICE_OOM &&
               batch > 1 && !dist) {
            batch /= 2;
            printf("out of device memory: running epoch %zu again with batch %zu\n", e + 1, batch);
            ferry_loader_destroy(ltr);
            CHECK(make_loader(tr, o, batch, true, dev, dist, &ltr));
            ck.parts.loader = ltr;
        }
        CHECK(st);
        if (ck.stopped) {
            printf("%s after %zu steps%s%s\n", ck.terminated ? "terminated (SIGTERM), saved" : "stopped",
                   ck.steps, o->save ? ": " : "", o->save ? o->save : "");
            break;
        }
        if (ddp)
            CHECK(ferry_ddp_sync_buffers(ddp, s));
        CHECK(run_epoch(lval, 0, net, NULL, NULL, NULL, met_eval, s, &rv, NULL));
        curves_add(&c, &rt, &rv);
        if (rank0) /* each epoch, so that a killed run's rows are there to resume */
            curves_write(&c, o->out, "Fashion-MNIST, grayscale");
    }
    bool curves_lost = rank0 && (make_dirs(o->out) != 0 ||
                                 curves_write(&c, o->out, "Fashion-MNIST, grayscale") != 0);
    if (curves_lost)
        fprintf(stderr, "train_gray: cannot write the curves to %s: %s\n", o->out, strerror(errno));
    else if (rank0)
        printf("curves: %s/curves.csv, %s/curves.svg\n", o->out, o->out);
    if (o->save && rank0 && !ck.terminated) {
        CHECK(sample_save(&ck));
        printf("saved: %s\n", o->save);
    }

    epoch_result rtest;
    if (!ck.terminated) { /* a preempted run has seconds left: it saved, it goes */
        CHECK(run_epoch(ltest, 0, net, NULL, NULL, NULL, met_eval, s, &rtest, NULL));
        printf("test accuracy: %.4f\n", rtest.accuracy);
    }

    ferry_train_graph_destroy(graph);
    ferry_stream_destroy(s);
    ferry_ddp_destroy(ddp);
    ferry_metrics_destroy(met);
    ferry_metrics_destroy(met_eval);
    ferry_amp_destroy(amp);
    ferry_optim_destroy(opt);
    ferry_module_destroy(net);
    ferry_loader_destroy(ltest);
    ferry_loader_destroy(lval);
    ferry_loader_destroy(ltr);
    ferry_dataset_release(test);
    ferry_dataset_release(val);
    ferry_dataset_release(tr);
    return curves_lost ? FERRY_ERR_IO : FERRY_OK;
}

int main(int argc, char **argv)
{
    opts o = {.data = "build/data/fashion-mnist", .model = "mlp", .out = "build/run",
              .epochs = 10, .batch = 128, .workers = 2, .lr = 0.05, .seed = 0};
    int rc = parse_args(argc, argv, &o);
    if (rc != 0)
        return rc < 0 ? 0 : rc;
    if (o.stop_after && !o.save) {
        fprintf(stderr, PROG ": --stop-after needs --save FILE (a stopped run is resumed from it)\n");
        return CLI_USAGE;
    }
    if (!o.dist) {
        ferry_status st = train(&o, NULL);
        return st != FERRY_OK ? 1 : sample_sigterm ? 128 + SIGTERM : 0;
    }

    ferry_dist *dist;
    ferry_dist_config dc = ferry_dist_config_default();
    /* "cuda" (or no --device, with GPUs): each rank its own GPU. */
    if (o.device && !strcmp(o.device, "cuda"))
        dc.device = ferry_dist_local_cuda();
    else if (o.device && ferry_device_parse(o.device, &dc.device) != FERRY_OK) {
        fprintf(stderr, "train_gray: %s\n", ferry_last_error());
        return CLI_USAGE;
    }
    ferry_status st = ferry_dist_create(&dc, &dist);
    if (st != FERRY_OK) {
        fprintf(stderr, "train_gray: %s\n", ferry_last_error());
        return 1;
    }
    /* Rank 0 speaks for all; the others' errors still reach stderr. */
    if (ferry_dist_rank(dist) != 0 && !freopen("/dev/null", "w", stdout))
        fprintf(stderr, "train_gray: rank %d: cannot silence stdout\n", ferry_dist_rank(dist));
    st = train(&o, dist);
    if (st != FERRY_OK) /* tell the other ranks, so they stop instead of waiting */
        ferry_dist_abort(dist, st);
    ferry_dist_destroy(dist);
    return st == FERRY_OK ? 0 : 1;
}

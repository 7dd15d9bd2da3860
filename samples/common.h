/* What the training samples share: the models, one epoch of training or
 * evaluation through the loader, and the curves (CSV and SVG). */
#ifndef FERRY_SAMPLES_COMMON_H
#define FERRY_SAMPLES_COMMON_H

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <ferry/train.h>

#include "../tools/cli_args.h"
#include "../tools/svg_plot.h"
#include "save_lock.h" /* lock_save: --save FILE takes FILE.lock */

/* A failure, said once: helpers and their callers both CHECK, and the same
 * message used to be printed at each level. In the program's name and the
 * command line's words (cli_words), not the API's status names. */
static inline void sample_report(void)
{
    static char last[1024];
    const char *m = ferry_last_error();
    if (!strncmp(last, m, sizeof last - 1))
        return;
    snprintf(last, sizeof last, "%s", m);
    char buf[2048];
    fprintf(stderr, "%s: %s\n", program_invocation_short_name, cli_words(m, buf, sizeof buf));
}

#define CHECK(call)                                                                    \
    do {                                                                               \
        ferry_status st_ = (call);                                                     \
        if (st_ != FERRY_OK) {                                                         \
            sample_report();                                                           \
            return st_;                                                                \
        }                                                                              \
    } while (0)

static inline double sample_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Appends layers made by the create calls in `made` to a new Sequential. */
static inline ferry_status sequential(ferry_module **layers, const ferry_status *made, size_t n,
                                      ferry_module **out)
{
    ferry_module *net = NULL;
    ferry_status st = ferry_sequential_create(&net);
    for (size_t i = 0; i < n; i++) {
        if (st == FERRY_OK && made[i] != FERRY_OK)
            st = made[i];
        if (st == FERRY_OK)
            st = ferry_sequential_add(net, layers[i]); /* net owns it from here */
        else
            ferry_module_destroy(layers[i]);
    }
    if (st != FERRY_OK) {
        sample_report();
        ferry_module_destroy(net);
        return st;
    }
    *out = net;
    return FERRY_OK;
}

/* 784-256-128-10 (any input size, flattened). */
static inline ferry_status model_mlp(int64_t inputs, int64_t classes, ferry_module **out)
{
    ferry_module *m[6] = {0};
    ferry_status st[6];
    st[0] = ferry_flatten_create(&m[0]);
    st[1] = ferry_linear_create(inputs, 256, true, &m[1]);
    st[2] = ferry_relu_create(&m[2]);
    st[3] = ferry_linear_create(256, 128, true, &m[3]);
    st[4] = ferry_relu_create(&m[4]);
    st[5] = ferry_linear_create(128, classes, true, &m[5]);
    return sequential(m, st, 6, out);
}

/* Two conv layers: conv3x3(32)-relu-pool2, conv3x3(64)-relu-pool2, fc 128, fc classes. */
static inline ferry_status model_cnn(int64_t channels, int64_t height, int64_t width,
                                     int64_t classes, ferry_module **out)
{
    ferry_module *m[10] = {0};
    ferry_status st[10];
    st[0] = ferry_conv2d_create(channels, 32, 3, 1, 1, true, &m[0]);
    st[1] = ferry_relu_create(&m[1]);
    st[2] = ferry_maxpool2d_create(2, 0, 0, &m[2]);
    st[3] = ferry_conv2d_create(32, 64, 3, 1, 1, true, &m[3]);
    st[4] = ferry_relu_create(&m[4]);
    st[5] = ferry_maxpool2d_create(2, 0, 0, &m[5]);
    st[6] = ferry_flatten_create(&m[6]);
    st[7] = ferry_linear_create(64 * (height / 4) * (width / 4), 128, true, &m[7]);
    st[8] = ferry_relu_create(&m[8]);
    st[9] = ferry_linear_create(128, classes, true, &m[9]);
    return sequential(m, st, 10, out);
}

typedef struct epoch_result {
    double loss, accuracy;
    double seconds, images_per_s, stall_pct;
    int64_t samples;
} epoch_result;

/* One pass over the loader: training steps when opt is set, else evaluation. */
/* --save FILE, --save-every N, --resume FILE: a checkpoint of the whole run
 * (model, optimiser, loss scaler, Dropout's draws, the training loader's place)
 * every N optimiser steps and at the end; a run started with --resume FILE and
 * otherwise the same arguments goes on from there and ends as the uninterrupted
 * run would have, bit for bit. */
typedef struct sample_ckpt {
    const char *path;       /* --save; NULL: none */
    size_t every;           /* --save-every: steps between saves; 0: only at the end */
    size_t steps;           /* training steps taken by this process */
    size_t stop_after;      /* --stop-after: save and stop after this many; 0: never */
    bool stopped;           /* it did */
    bool resumed;           /* the loader was restored mid-epoch: go on, do not reset */
    bool writer;            /* this process writes (rank 0) */
    ferry_checkpoint parts; /* its metrics: the training epoch's running sums */
    bool terminated;        /* stopped by SIGTERM, after saving */
    bool replay;            /* the restored epoch had ended: its row is made again */
} sample_ckpt;

/* SIGTERM (a preemption's notice) with --save: the step under way ends, the
 * run is saved and the process exits with 128 + SIGTERM. */
static volatile sig_atomic_t sample_sigterm;

static inline void sample_on_sigterm(int sig)
{
    (void)sig;
    sample_sigterm = 1;
}

static inline void sample_catch_sigterm(const sample_ckpt *ck)
{
    if (ck->path && ck->writer)
        signal(SIGTERM, sample_on_sigterm);
}

/* Restores the run from ck's --resume file; *first_epoch: the epoch to go on
 * with. A file that does not exist yet starts a new run (a preemptible job's
 * script passes --resume from its first start). */
static inline ferry_status sample_resume(sample_ckpt *ck, const char *from, size_t *first_epoch)
{
    *first_epoch = 0;
    sample_catch_sigterm(ck);
    struct stat sb;
    if (from && stat(from, &sb) != 0 && errno == ENOENT) {
        printf("resume: %s does not exist yet: starting a new run\n", from);
        return FERRY_OK;
    }
    if (!from)
        return FERRY_OK;
    CHECK(ferry_checkpoint_load(from, &ck->parts));
    ferry_loader_state ls;
    CHECK(ferry_loader_state_get(ck->parts.loader, &ls));
    /* An epoch the checkpoint ended (saved at its last step, or at the end of
     * the run) is taken up again too: its loader has no batch left and the
     * metrics hold its sums, so its row (train figures, validation) is made
     * again rather than lost when the run was killed before writing it.
     * Without metrics in the file (an older checkpoint) it is passed over. */
    int64_t seen = 0;
    if (ls.done && ck->parts.metrics)
        CHECK(ferry_metrics_get(ck->parts.metrics, NULL, NULL, &seen));
    ck->replay = ls.done && seen > 0;
    ck->resumed = !ls.done || ck->replay;
    *first_epoch = (size_t)ls.epoch + (ls.done && !ck->replay ? 1 : 0);
    printf("resumed: %s, epoch %llu after batch %llu\n", from, (unsigned long long)ls.epoch + 1,
           (unsigned long long)ls.batches);
    return FERRY_OK;
}

/* A resumed run that had finished all its epochs: said, rather than an empty
 * table. */
static inline void sample_nothing_left(const sample_ckpt *ck, const char *from, size_t first_epoch,
                                       size_t epochs)
{
    if (from && first_epoch + (ck->replay ? 1 : 0) >= epochs)
        printf("resume: %s has finished all %zu epochs: nothing left to train%s (a larger --epochs "
               "goes on from it)\n", from, epochs,
               ck->replay ? "; the last epoch's row is made again from the checkpoint" : "");
}

static inline ferry_status sample_save(const sample_ckpt *ck)
{
    if (!ck || !ck->path || !ck->writer)
        return FERRY_OK;
    CHECK(ferry_checkpoint_save(ck->path, &ck->parts));
    return FERRY_OK;
}

/* One epoch of training (opt given) or evaluation. ck (training only, may be
 * NULL): go on from a restored loader, and save every ck->every steps. graph
 * (training only, may be NULL; made for net, opt, amp and met): each step
 * replays one captured CUDA graph (--graph) instead of launching its kernels. */
static inline ferry_status run_epoch(ferry_loader *l, uint64_t epoch, ferry_module *net,
                                     ferry_optim *opt, ferry_amp *amp, ferry_train_graph *graph,
                                     ferry_metrics *met, ferry_stream *s, epoch_result *r,
                                     sample_ckpt *ck)
{
    /* A restored loader is in epoch `epoch` (mid-way, or with no batch left),
     * and the checkpoint restored the metrics' sums of what it had done: the
     * row counts the whole epoch. */
    if (ck && ck->resumed) {
        ck->resumed = false;
    } else {
        CHECK(ferry_loader_reset(l, epoch));
        CHECK(ferry_metrics_reset(met, s));
    }
    ferry_loader_stats_reset(l);
    double t0 = sample_now();
    ferry_batch b;
    ferry_status st;
    while ((st = ferry_loader_next(l, s, &b)) == FERRY_OK) {
        st = opt && graph ? ferry_train_graph_step(graph, b.images, b.labels, s)
             : opt        ? ferry_train_step(net, opt, amp, b.images, b.labels, met, s)
                          : ferry_eval_step(net, b.images, b.labels, met, s);
        if (st == FERRY_OK && ck) {
            ck->steps++;
            if (ck->every && ck->steps % ck->every == 0)
                st = sample_save(ck);
            if (st == FERRY_OK && (ck->steps == ck->stop_after || (sample_sigterm && ck->path))) {
                st = sample_save(ck);
                ck->stopped = true;
                ck->terminated = sample_sigterm && ck->path;
                if (st == FERRY_OK)
                    st = FERRY_END; /* as if the epoch ended here */
            }
        }
        if (st != FERRY_OK)
            break;
    }
    if (st != FERRY_END) {
        sample_report();
        return st;
    }
    CHECK(ferry_metrics_get(met, &r->loss, &r->accuracy, &r->samples));
    r->seconds = sample_now() - t0;
    ferry_loader_stats ls;
    CHECK(ferry_loader_stats_get(l, &ls));
    r->images_per_s = (double)ls.samples / r->seconds;
    r->stall_pct = 100.0 * ls.wait_s / r->seconds;
    return FERRY_OK;
}

/* A data folder that is not there says how to get one (hint) instead of a
 * bare "No such file or directory": FERRY_OK when dir exists (whatever it
 * holds: the dataset says what is wrong with it), else FERRY_ERR_IO. */
static inline ferry_status sample_need_data(const char *dir, const char *hint)
{
    struct stat sb;
    if (stat(dir, &sb) == 0 || errno != ENOENT)
        return FERRY_OK;
    return ferry_set_error(FERRY_ERR_IO, "%s: no such folder; %s", dir, hint);
}

/* mkdir -p */
static inline int make_dirs(const char *path)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            if (mkdir(buf, 0777) != 0 && errno != EEXIST)
                return -1;
            if (!c)
                return 0;
            *p = c;
        }
    }
}

/* --save FILE and --out DIR, checked before the first batch rather than when
 * first written (after the whole run, the model lost): FILE's folder must
 * exist and take new files, and FILE must not be a folder or other non-file;
 * DIR is created now. 0, or -1 after one line on stderr naming the option. */
static inline int check_outputs(const char *prog, const char *save, const char *out)
{
    struct stat sb;
    if (save) {
        char dir[4096];
        const char *slash = strrchr(save, '/');
        snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - save) + (slash == save) : 1,
                 slash ? save : ".");
        if (stat(save, &sb) == 0 && !S_ISREG(sb.st_mode)) {
            fprintf(stderr, "%s: --save %s: %s, not a file\n", prog, save,
                    S_ISDIR(sb.st_mode) ? "is a folder" : "is a device, FIFO or socket");
            return -1;
        }
        if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
            fprintf(stderr, "%s: --save %s: the folder %s does not exist\n", prog, save, dir);
            return -1;
        }
        if (access(dir, W_OK | X_OK) != 0) {
            fprintf(stderr, "%s: --save %s: cannot write in %s: %s\n", prog, save, dir, strerror(errno));
            return -1;
        }
        if (lock_save(prog, save) != 0)
            return -1;
    }
    if (!out)
        return 0;
    const char *why = NULL;
    if (make_dirs(out) != 0 || stat(out, &sb) != 0)
        why = strerror(errno);
    else if (!S_ISDIR(sb.st_mode))
        why = "is not a folder";
    else if (access(out, W_OK | X_OK) != 0)
        why = strerror(errno);
    if (why) {
        fprintf(stderr, "%s: --out %s: %s\n", prog, out, why);
        return -1;
    }
    return 0;
}

#define MAX_EPOCHS 1000

typedef struct curves {
    size_t n;
    double train_loss[MAX_EPOCHS], train_acc[MAX_EPOCHS];
    double val_loss[MAX_EPOCHS], val_acc[MAX_EPOCHS];
    double images_per_s[MAX_EPOCHS], stall_pct[MAX_EPOCHS];
} curves;

static inline void curves_header(void)
{
    printf("%5s %10s %9s %8s %7s %8s %10s\n", "epoch", "train loss", "train acc", "val loss",
           "val acc", "stall", "images/s");
}

/* An epoch whose row is not known (trained before a resume whose --out did
 * not have it): NAN, shown as "-" and written as empty fields. */
static inline bool curves_missing(const curves *c, size_t e) { return isnan(c->train_loss[e]); }

static inline void curves_print(const curves *c, size_t e)
{
    if (curves_missing(c, e))
        printf("%5zu %10s %9s %8s %7s %8s %10s\n", e + 1, "-", "-", "-", "-", "-", "-");
    else
        printf("%5zu %10.4f %9.4f %8.4f %7.4f %7.1f%% %10.0f\n", e + 1, c->train_loss[e],
               c->train_acc[e], c->val_loss[e], c->val_acc[e], c->stall_pct[e], c->images_per_s[e]);
}

/* A resumed run's earlier epochs, from DIR/curves.csv (written after every
 * epoch): kept and printed, so the table and the file go on with the real
 * epoch numbers. Rows it lacks (a run killed before writing them, or another
 * --out) are not known: "-", with a note, never zeros that read as results. */
static inline void curves_resume(curves *c, const char *dir, size_t first_epoch)
{
    char path[4200], line[512];
    snprintf(path, sizeof path, "%.4096s/curves.csv", dir);
    FILE *f = first_epoch ? fopen(path, "r") : NULL;
    size_t found = 0;
    for (size_t e = 0; e < first_epoch && e < MAX_EPOCHS; e++)
        c->train_loss[e] = c->train_acc[e] = c->val_loss[e] = c->val_acc[e] = c->images_per_s[e] =
            c->stall_pct[e] = NAN;
    while (f && fgets(line, sizeof line, f)) {
        size_t e;
        double v[6];
        if (sscanf(line, "%zu,%lf,%lf,%lf,%lf,%lf,%lf", &e, &v[0], &v[1], &v[2], &v[3], &v[4],
                   &v[5]) != 7 || e < 1 || e > first_epoch || e > MAX_EPOCHS)
            continue;
        e--;
        c->train_loss[e] = v[0], c->train_acc[e] = v[1], c->val_loss[e] = v[2];
        c->val_acc[e] = v[3], c->images_per_s[e] = v[4], c->stall_pct[e] = v[5];
        found++;
    }
    if (f)
        fclose(f);
    c->n = first_epoch < MAX_EPOCHS ? first_epoch : MAX_EPOCHS;
    for (size_t e = 0; e < c->n; e++)
        curves_print(c, e);
    if (found < c->n)
        printf("note: %s holds %zu of the %zu earlier epochs' rows; the others (\"-\") are in the "
               "--out of the run that trained them\n", path, found, c->n);
}

/* Prints one epoch's line and keeps it for the plot. */
static inline void curves_add(curves *c, const epoch_result *train, const epoch_result *val)
{
    size_t e = c->n;
    printf("%5zu %10.4f %9.4f %8.4f %7.4f %7.1f%% %10.0f\n", e + 1, train->loss, train->accuracy,
           val->loss, val->accuracy, train->stall_pct, train->images_per_s);
    fflush(stdout);
    if (e == MAX_EPOCHS)
        return;
    c->train_loss[e] = train->loss;
    c->train_acc[e] = train->accuracy;
    c->val_loss[e] = val->loss;
    c->val_acc[e] = val->accuracy;
    c->images_per_s[e] = train->images_per_s;
    c->stall_pct[e] = train->stall_pct;
    c->n = e + 1;
}

/* OUT/curves.csv and OUT/curves.svg: loss and accuracy, train beside validation. */
static inline int curves_write(const curves *c, const char *dir, const char *title)
{
    char path[4096];
    if (snprintf(path, sizeof path, "%s/curves.csv", dir) >= (int)sizeof path)
        return -1;
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fprintf(f, "epoch,train_loss,train_accuracy,val_loss,val_accuracy,images_per_s,stall_pct\n");
    for (size_t i = 0; i < c->n; i++)
        if (curves_missing(c, i))
            fprintf(f, "%zu,,,,,,\n", i + 1);
        else
            fprintf(f, "%zu,%.6f,%.6f,%.6f,%.6f,%.1f,%.2f\n", i + 1, c->train_loss[i], c->train_acc[i],
                    c->val_loss[i], c->val_acc[i], c->images_per_s[i], c->stall_pct[i]);
    if (fclose(f) != 0)
        return -1;

    if (snprintf(path, sizeof path, "%s/curves.svg", dir) >= (int)sizeof path || !(f = fopen(path, "w")))
        return -1;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"900\" height=\"380\" "
               "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    fprintf(f, "<text x=\"60\" y=\"24\" font-size=\"16\">");
    svg_escape(f, title);
    fprintf(f, "</text>\n");
    svg_series loss[2] = {{"train (in-sample)", c->train_loss}, {"validation (out-of-sample)", c->val_loss}};
    svg_series acc[2] = {{"train (in-sample)", c->train_acc}, {"validation (out-of-sample)", c->val_acc}};
    svg_line_panel(f, 60, 60, 360, 260, "loss", loss, 2, c->n);
    svg_line_panel(f, 500, 60, 360, 260, "accuracy", acc, 2, c->n);
    fprintf(f, "</svg>\n");
    return fclose(f);
}

/* The device named on the command line, or the default; says which in one line. */
static inline ferry_status pick_device(const char *name, ferry_device *d)
{
    if (name)
        CHECK(ferry_device_parse(name, d));
    *d = ferry_device_resolve(name ? *d : ferry_device_default());
    char buf[FERRY_DEVICE_NAME_MAX];
    ferry_device_props p;
    if (ferry_device_properties(*d, &p) != FERRY_OK)
        snprintf(p.name, sizeof p.name, "?");
    printf("device: %s (%s)%s\n", ferry_device_format(*d, buf, sizeof buf), p.name,
           d->type == FERRY_DEVICE_CPU && !ferry_cuda_is_available() ? ", no CUDA device found" : "");
    return FERRY_OK;
}

#endif

/* `ferry bench DIR`: epochs over an image folder for a grid of loader
 * configurations, with an optional synthetic compute stage, to show where the
 * time goes: images/s, the consumer's stall %, H2D GB/s, and a digest of every
 * delivered batch that must not change with the worker count. A row measured on
 * the simulated GPU (FERRY_SIM_GPUS) is marked simulated: its digest is real, its
 * timings mean nothing. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fields_tool.h"
#include "common/private_dir.h" /* the user's cache folder */
#include "dataset/remote/remote.h" /* the network counters of shards read by URL */
#include "ferry.h"
#include "ferry/ops.h"
#include "cli_args.h"
#include "shards.h"
#include "commands.h"
#include "files.h"
#include "shards.h"
#include "svg_plot.h"

#ifndef FERRY_SOURCE_DIR /* set by the Makefile: where bench/compare_torch.py lives */
#define FERRY_SOURCE_DIR "."
#endif
#define MAX_LIST 16
/* --pin: the loader's pin_memory. AUTO pins when the device is a GPU and says
 * nothing on a CPU, so a bench without --pin warns of nothing it was not asked. */
enum { PIN_OFF = 0, PIN_ON = 1, PIN_AUTO = 2 };

typedef struct bench_opts {
    const char *dir;
    size_t workers[MAX_LIST], nworkers;
    size_t batch;
    int pin[2], npin;         /* PIN_ON, PIN_OFF or PIN_AUTO (the default) */
    int overlap[2], noverlap;
    ferry_dtype wire[2];
    size_t nwire;
    const char *device;
    size_t epochs;
    uint64_t seed;
    double compute_ms;
    bool json, digest;
    size_t prefetch;
    size_t limit;             /* > 0: a seeded random subset of this many images */
    size_t stream;            /* > 0: tar shards in streaming mode, this shuffle buffer */
    size_t size;              /* > 0: images center-cropped (or padded) to size x size */
    size_t crop_pad;          /* > 0: random crop after padding by this much */
    size_t rrc;               /* > 0: the ImageNet recipe, RandomResizedCrop(rrc) + normalise */
    bool flip;                /* random left-right flip */
    double jitter[4];         /* ColorJitter(brightness, contrast, saturation, hue); 0: off */
    const char *plot;         /* SVG of images/s per configuration */
    bool baseline;            /* also time the plain single-thread libpng loop */
    bool compare_torch;       /* add PyTorch's DataLoader as a row */
    bool progress;            /* a progress bar on stderr (a terminal) */
    tool_fields fields;       /* --fields: shards read as these members */
} bench_opts;

typedef struct bench_row {
    size_t workers, batch;
    int pin, overlap;
    ferry_dtype wire;
    char device[FERRY_DEVICE_NAME_MAX];
    uint64_t images;
    double seconds, images_per_s, mb_per_s, stall_pct, h2d_gbps;
    uint64_t digest;
    bool pinned;
    bool simulated;           /* measured on a simulated GPU: the timings mean nothing */
    ferry_loader_stats stats;
    bool has_net;             /* shards by URL: what this run did on the network */
    ferry_remote_stats net;
} bench_row;

/* The synthetic compute: an n x n matmul repeated `reps` times on the device. */
typedef struct compute {
    ferry_tensor *a, *b;
    size_t reps;
} compute;

static ferry_status compute_run(compute *c, ferry_stream *s)
{
    for (size_t i = 0; i < c->reps; i++) {
        ferry_tensor *out = NULL;
        ferry_status st = ferry_matmul(c->a, c->b, s, &out);
        ferry_tensor_release(out);
        if (st != FERRY_OK)
            return st;
    }
    return FERRY_OK;
}

/* Sizes the compute stage to take about ms milliseconds per batch. */
static ferry_status compute_init(compute *c, ferry_device d, ferry_stream *s, double ms)
{
    memset(c, 0, sizeof *c);
    if (ms <= 0)
        return FERRY_OK;
    int64_t n = d.type == FERRY_DEVICE_CUDA ? 2048 : 256;
    int64_t shape[2] = {n, n};
    ferry_status st = ferry_tensor_randn(shape, 2, FERRY_DTYPE_F32, d, 1, &c->a);
    if (st == FERRY_OK)
        st = ferry_tensor_randn(shape, 2, FERRY_DTYPE_F32, d, 2, &c->b);
    if (st != FERRY_OK)
        return st;
    c->reps = 1;
    double t = 0;
    for (int k = 0; k < 3; k++) { /* warm up, then time */
        double t0 = tool_now();
        if ((st = compute_run(c, s)) != FERRY_OK || (st = ferry_stream_synchronize(s)) != FERRY_OK)
            return st;
        t = tool_now() - t0;
    }
    c->reps = (size_t)fmax(1.0, round(ms * 1e-3 / fmax(t, 1e-6)));
    return FERRY_OK;
}

static void compute_free(compute *c)
{
    ferry_tensor_release(c->a);
    ferry_tensor_release(c->b);
}

/* Each distinct warning once: the bench creates a loader per configuration. */
static void log_once(ferry_log_level level, const char *msg, void *user)
{
    (void)user;
    static char seen[8][256];
    static size_t nseen;
    if (level < FERRY_LOG_WARN)
        return;
    for (size_t i = 0; i < nseen; i++)
        if (!strncmp(seen[i], msg, sizeof seen[i] - 1))
            return;
    if (nseen < 8)
        snprintf(seen[nseen++], sizeof seen[0], "%s", msg);
    char buf[2048];
    fprintf(stderr, "ferry: warning: %s\n", cli_words(msg, buf, sizeof buf));
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* --fields: the fields past images and labels, and the ragged ones'
 * lengths, into the digest (images and labels are already in it). */
static ferry_status digest_fields(const ferry_batch *b, void *hostbuf, size_t bytes, uint64_t *digest)
{
    for (size_t k = 0; k < ferry_batch_field_count(b); k++) {
        const ferry_field *info;
        ferry_tensor *t = ferry_batch_field_at(b, k, &info);
        ferry_tensor *parts[2] = {t, ferry_batch_lengths(b, info->name)};
        for (int p = 0; p < 2; p++) {
            if (!parts[p] || parts[p] == b->images || parts[p] == b->labels ||
                ferry_tensor_nbytes(parts[p]) > bytes)
                continue;
            ferry_status st = ferry_tensor_copy_to_host(parts[p], hostbuf, ferry_tensor_nbytes(parts[p]));
            if (st != FERRY_OK)
                return st;
            *digest = fnv(*digest, hostbuf, ferry_tensor_nbytes(parts[p]));
        }
    }
    return FERRY_OK;
}

static ferry_status run_config(const bench_opts *o, ferry_dataset *ds, size_t workers, int pin,
                               int overlap, ferry_dtype wire, bench_row *row, void *hostbuf,
                               size_t hostbuf_bytes)
{
    ferry_device dev = ferry_device_default();
    ferry_status st = o->device ? ferry_device_parse(o->device, &dev) : FERRY_OK;
    ferry_loader_config c = {
        .dataset = ds, .batch_size = o->batch, .shuffle = true, .seed = o->seed, .device = dev,
        .num_workers = workers ? workers : FERRY_LOADER_NO_WORKERS, /* 0: the caller's thread */
        .pin_memory = pin == PIN_ON ? FERRY_PIN_MEMORY_ON
                      : pin == PIN_OFF ? FERRY_PIN_MEMORY_OFF : FERRY_PIN_MEMORY_AUTO,
        .wire_dtype = wire == FERRY_DTYPE_F32 ? FERRY_WIRE_F32 : FERRY_WIRE_U8,
        /* Augmentation runs only in training: any of --rrc, --crop-pad, --flip
         * asks for it, so the bench measures the augmentation it was given. */
        .eval = !(o->rrc > 0 || o->crop_pad > 0 || o->flip || o->jitter[0] > 0 ||
                  o->jitter[1] > 0 || o->jitter[2] > 0 || o->jitter[3] > 0),
        .prefetch = overlap ? o->prefetch : 1, /* overlap off: nothing is read ahead */
        .stream_shuffle_buffer = o->stream,
    };
    if (o->rrc) {
        static const float mean[3] = {0.485f, 0.456f, 0.406f}, sd[3] = {0.229f, 0.224f, 0.225f};
        memcpy(c.mean, mean, sizeof mean);
        memcpy(c.std, sd, sizeof sd);
    }
    /* The device, stream and compute stage first: the clock starts at create,
     * so read-ahead done by the workers is not free. */
    ferry_stream *s = NULL;
    compute comp;
    memset(&comp, 0, sizeof comp);
    if (st == FERRY_OK && (st = ferry_stream_create(dev, &s)) == FERRY_OK)
        st = compute_init(&comp, dev, s, o->compute_ms);
    if (st != FERRY_OK) {
        compute_free(&comp);
        ferry_stream_destroy(s);
        return st;
    }
    ferry_remote_stats net0;
    row->has_net = ferry__dataset_remote_stats(ds, &net0);
    double t0 = tool_now();
    ferry_loader *l;
    if ((st = ferry_loader_create(&c, &l)) != FERRY_OK) {
        compute_free(&comp);
        ferry_stream_destroy(s);
        return st;
    }

    uint64_t digest = 1469598103934665603ull, images = 0;
    double excluded = 0;
    for (size_t e = 0; e < o->epochs && st == FERRY_OK; e++) {
        if (e && (st = ferry_loader_reset(l, e)) != FERRY_OK)
            break;
        ferry_batch b;
        size_t nb = ferry_loader_len(l), total = nb * o->epochs;
        while ((st = ferry_loader_next(l, s, &b)) == FERRY_OK) {
            images += b.size;
            size_t done = e * nb + b.index + 1;
            if (o->progress && (done % 8 == 0 || done == total)) {
                int bar = (int)(40 * done / total);
                fprintf(stderr, "\r  workers %zu [%.*s%*s] %3d%%", workers, bar,
                        "########################################", 40 - bar, "",
                        (int)(100 * done / total));
                if (done == total)
                    fprintf(stderr, "\r%*s\r", 60, "");
            }
            if ((st = compute_run(&comp, s)) != FERRY_OK)
                break;
            if (!overlap && (st = ferry_stream_synchronize(s)) != FERRY_OK)
                break;
            if (o->digest && e == 0) {
                /* Not part of the pipeline: taken off the clock. */
                double d0 = tool_now();
                size_t ib = ferry_tensor_nbytes(b.images), lb = ferry_tensor_nbytes(b.labels);
                if (ib + lb <= hostbuf_bytes &&
                    (st = ferry_stream_synchronize(s)) == FERRY_OK &&
                    (st = ferry_tensor_copy_to_host(b.images, hostbuf, ib)) == FERRY_OK &&
                    (st = ferry_tensor_copy_to_host(b.labels, (uint8_t *)hostbuf + ib, lb)) == FERRY_OK)
                    digest = fnv(digest, hostbuf, ib + lb);
                if (st == FERRY_OK && o->fields.n)
                    st = digest_fields(&b, hostbuf, hostbuf_bytes, &digest);
                excluded += tool_now() - d0;
                if (st != FERRY_OK)
                    break;
            }
        }
        if (st == FERRY_END)
            st = FERRY_OK;
    }
    if (st == FERRY_OK)
        st = ferry_stream_synchronize(s);
    double secs = tool_now() - t0 - excluded;

    if (st == FERRY_OK && row->has_net) { /* this run's share: the counters are the dataset's */
        ferry_remote_stats *n = &row->net;
        ferry__dataset_remote_stats(ds, n);
        ferry__remote_stats_since(n, &net0);
    }
    if (st == FERRY_OK) {
        ferry_loader_stats_get(l, &row->stats);
        row->workers = workers;
        row->batch = o->batch;
        row->pin = pin;
        row->overlap = overlap;
        row->wire = wire;
        ferry_device_format(dev, row->device, sizeof row->device);
        row->images = images;
        row->seconds = secs;
        row->images_per_s = images / secs;
        const ferry_sample_format *f = ferry_dataset_format(ds);
        double bytes = (double)images * (double)(f->channels * f->height * f->width * ferry_dtype_size(wire));
        row->mb_per_s = bytes / secs / 1e6;
        row->stall_pct = 100.0 * row->stats.wait_s / secs;
        row->h2d_gbps = row->stats.h2d_s > 0 ? row->stats.h2d_bytes / row->stats.h2d_s / 1e9 : 0;
        row->digest = digest;
        row->pinned = row->stats.pinned;
        row->simulated = dev.type == FERRY_DEVICE_CUDA && ferry_cuda_is_simulated();
    }
    compute_free(&comp);
    ferry_stream_destroy(s);
    ferry_loader_destroy(l);
    return st;
}

/* Where the default dataset lives: a cache folder of the user's, never the
 * current folder (ferry bench run anywhere wrote 276 MB into ./build/data):
 * $FERRY_CACHE_DIR, else the folder the remote shard cache uses by default
 * ($XDG_CACHE_HOME/ferry, else $HOME/.cache/ferry: common/private_dir.h). */
static int cache_dir(char *buf, size_t n)
{
    const char *c = getenv("FERRY_CACHE_DIR");
    char dflt[3700];
    if (c && *c) {
        snprintf(buf, n, "%s/fashion-mnist", c);
        return 0;
    }
    /* Made (0700) and checked as the remote cache would: it shares the folder. */
    int fd = -1;
    if (ferry_private_dir_default(dflt, sizeof dflt) != FERRY_OK ||
        ferry_private_dir_open(dflt, true, "ferry's cache folder", &fd) != FERRY_OK) {
        fprintf(stderr, "ferry bench: no folder given, and %s\n", ferry_last_error());
        return -1;
    }
    close(fd);
    snprintf(buf, n, "%s/fashion-mnist", dflt);
    return 0;
}

/* The default dataset: Fashion-MNIST's train split as a PNG folder, exported
 * once into the cache (the marker names the export's layout: class folders
 * in label order). */
static int prepare_default(const char **dir)
{
    static char path[3900];
    char data[3800];
    if (cache_dir(data, sizeof data) != 0)
        return -1;
    snprintf(path, sizeof path, "%s/.complete-2", data);
    if (access(path, F_OK) != 0) {
        fprintf(stderr, "ferry bench: no folder given: exporting Fashion-MNIST to %s (once, about "
                "280 MB; FERRY_CACHE_DIR moves it)\n", data);
        char *args[] = {"export", "fashion-mnist", data, NULL};
        if (cmd_export(3, args) != 0)
            return -1;
        FILE *f = fopen(path, "w");
        if (f)
            fclose(f);
    } else {
        fprintf(stderr, "ferry bench: no folder given: Fashion-MNIST from %s\n", data);
    }
    snprintf(path, sizeof path, "%s/train", data);
    *dir = path;
    return 0;
}

/* compare_torch.py's JSON line: its images/s and PyTorch's version. */
static void read_torch_output(FILE *p, double *images_per_s, char *version, size_t vsize)
{
    char line[4096] = "";
    while (fgets(line, sizeof line, p)) {
        const char *k = strstr(line, "\"images_per_s\":");
        const char *v = strstr(line, "\"torch\": \"");
        if (k)
            *images_per_s = atof(k + strlen("\"images_per_s\":"));
        if (v) {
            v += strlen("\"torch\": \"");
            size_t n = strcspn(v, "\"");
            snprintf(version, vsize, "%.*s", (int)(n < vsize ? n : vsize - 1), v);
        }
    }
}

/* PyTorch's DataLoader on the same folder, through bench/compare_torch.py.
 * python3 (found on PATH) is started with an argument vector, never through
 * a shell: the folder's name, whatever it holds (quotes, ;, $), arrives as
 * one argument and is never run. Its stdout comes back through a pipe. */
static int torch_row(const bench_opts *o, size_t workers, double *images_per_s, char *version,
                     size_t vsize)
{
    char script[4200], w[32], b[32], e[32];
    snprintf(script, sizeof script, "%s/bench/compare_torch.py", FERRY_SOURCE_DIR);
    snprintf(w, sizeof w, "%zu", workers);
    snprintf(b, sizeof b, "%zu", o->batch);
    snprintf(e, sizeof e, "%zu", o->epochs);
    /* auto pins on a GPU, as PyTorch's pin_memory=True does (its own rule
     * leaves a CPU device pageable). */
    char *args[] = {"python3", script, (char *)o->dir, "--torch-only", "--json",
                    "--workers", w, "--batch", b, "--epochs", e,
                    "--pin", o->pin[0] != PIN_OFF ? "on" : "off",
                    "--device", o->device && !strncmp(o->device, "cuda", 4) ? "cuda" : "cpu", NULL};
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
        fprintf(stderr, "ferry bench: --compare-torch: pipe: %s\n", strerror(errno));
        return -1;
    }
    posix_spawn_file_actions_t fa;
    int rc = posix_spawn_file_actions_init(&fa);
    if (rc == 0) {
        /* The child's stdout is the pipe; dup2 leaves the copy open across exec. */
        rc = posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
        pid_t pid;
        if (rc == 0)
            rc = posix_spawnp(&pid, "python3", &fa, NULL, args, environ);
        posix_spawn_file_actions_destroy(&fa);
        close(fds[1]);
        if (rc == 0) {
            FILE *p = fdopen(fds[0], "r");
            if (p)
                read_torch_output(p, images_per_s, version, vsize);
            if (p)
                fclose(p);
            else
                close(fds[0]);
            int status = 0;
            while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
            return WIFEXITED(status) && WEXITSTATUS(status) == 0 && *images_per_s > 0 ? 0 : -1;
        }
    } else {
        close(fds[1]);
    }
    close(fds[0]);
    fprintf(stderr, "ferry bench: --compare-torch: cannot run python3: %s\n", strerror(rc));
    return -1;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ferry bench DIR [--workers 0,1,2] [--batch N] [--pin auto|on|off|both]\n"
            "                       [--overlap on|off|both] [--wire u8|f32|both] [--device D]\n"
            "                       [--epochs N] [--seed S] [--compute-ms X] [--prefetch N]\n"
            "                       [--limit N] [--plot FILE.svg] [--baseline] [--no-digest]\n"
            "                       [--format table|json] [--size N] [--crop-pad N] [--flip]\n"
            "                       [--stream B] [--rrc N] [--jitter B[,C,S,H]]\n"
            "       ferry bench h2d [--help]       host-to-device copy bandwidth\n"
            "       ferry bench decode [--help]    ferry's PNG or JPEG decoder beside plain libpng or\n"
            "                                      libjpeg-turbo\n"
            "  --workers: up to 16 counts from 0 to 256; --batch 1 to 65536; --epochs 1 to 1000000;\n"
            "  --prefetch 1 to 1024; --compute-ms 0 to 1000000; --limit 1 to 1000000000\n"
            "  --pin: pinned host memory for the copies: auto (the default: pinned when the\n"
            "         device is a GPU), on, off, or both (a row each)\n"
            "  --size N: center-crop every image to N x N (1 to 16384)\n"
            "  --rrc N: the ImageNet training recipe: RandomResizedCrop(N) (1 to 4096), RGB,\n"
            "           normalised with ImageNet's mean and std (add --flip for the flip)\n"
            "  --crop-pad N (1 to 1024), --flip: seeded random crop (pad by N, crop back) and\n"
            "            left-right flip, as in training\n"
            "  --jitter B[,C,S,H]: torchvision's ColorJitter(brightness B, contrast C,\n"
            "            saturation S, hue H) after the flip; one value sets B, C and S\n"
            "  --baseline: time the plain single-thread libpng loop on the same folder first, and\n"
            "              show each row against workers x that rate (image folders only)\n"
            "  --stream B: tar shards in streaming mode (shards in a seeded order, a shuffle\n"
            "              buffer of B samples, 1 to 1000000000) instead of a random order\n"
            "  --compare-torch: add a row for PyTorch's DataLoader (bench/compare_torch.py)\n"
            "  --format json: JSON Lines, one object a line for each row\n"
            "  --fields LIST: DIR's shards read as these members, e.g. png,cls,boxes.npy\n"
            "            (ferry_dataset_shards_fields; an image member among them): each field is\n"
            "            shown, crosses in the batch and goes into the digest\n"
            "  per image read, decode and transform (read_s, decode_s, transform_s in JSON) are\n"
            "  CPU time of the worker threads (CLOCK_THREAD_CPUTIME_ID), summed over workers\n"
            "  DIR defaults to Fashion-MNIST's train split, exported once to a cache folder\n"
            "  ($FERRY_CACHE_DIR, else $XDG_CACHE_HOME/ferry, else ~/.cache/ferry);\n"
            "  it may also be tar shards: a .tar, .tar.gz or .tgz file, a folder of them\n"
            "  (ferry pack), or a list file naming them one a line\n");
}

#define BENCH "ferry bench"

/* --pin/--overlap on|off|both into the list of settings to run; --pin also
 * takes auto. */
static int parse_onoff(const char *opt, const char *v, int *out, int *n)
{
    static const char *const words[] = {"on", "off", "both", NULL};
    static const char *const pin_words[] = {"on", "off", "both", "auto", NULL};
    bool pin = !strcmp(opt, "--pin");
    int k = 0;
    if (cli_choice(BENCH, opt, v, pin ? pin_words : words, &k) != 0)
        return CLI_USAGE;
    if (k == 3) {
        out[0] = PIN_AUTO;
        *n = 1;
        return 0;
    }
    out[0] = k != 1; /* on, or both: on first */
    out[1] = 0;
    *n = k == 2 ? 2 : 1;
    return 0;
}

static int parse_wire(const char *opt, const char *v, bench_opts *o)
{
    static const char *const words[] = {"u8", "f32", "both", NULL};
    int k = 0;
    if (cli_choice(BENCH, opt, v, words, &k) != 0)
        return CLI_USAGE;
    o->wire[0] = k == 1 ? FERRY_DTYPE_F32 : FERRY_DTYPE_U8;
    o->wire[1] = FERRY_DTYPE_F32;
    o->nwire = k == 2 ? 2 : 1;
    return 0;
}

static int parse_format(const char *opt, const char *v, bench_opts *o)
{
    static const char *const words[] = {"table", "json", NULL};
    int k = 0;
    if (cli_choice(BENCH, opt, v, words, &k) != 0)
        return CLI_USAGE;
    o->json = k == 1;
    return 0;
}

/* --jitter B[,C,S,H]: one value for brightness, contrast and saturation, or
 * all four; the ranges are the image config's (checked again there). */
static int parse_jitter(const char *a, const char *v, bench_opts *o)
{
    double f[4] = {0, 0, 0, 0};
    char tail;
    int n = sscanf(v, "%lf,%lf,%lf,%lf%c", &f[0], &f[1], &f[2], &f[3], &tail);
    if (n == 1)
        f[1] = f[2] = f[0];
    if ((n != 1 && n != 4) || !(f[0] >= 0 && f[1] >= 0 && f[2] >= 0 && f[3] >= 0 && f[3] <= 0.5 &&
                                f[0] <= 1e6 && f[1] <= 1e6 && f[2] <= 1e6)) {
        return cli_bad_value(BENCH, a, v, "B or B,C,S,H (each at least 0, H at most 0.5)");
    }
    memcpy(o->jitter, f, sizeof f);
    return 0;
}

/* The options that take a value, and their ranges. */
static const char *const value_opts[] = {"--workers", "--batch", "--pin", "--overlap", "--wire",
                                         "--device", "--epochs", "--seed", "--prefetch",
                                         "--compute-ms", "--limit", "--size", "--crop-pad",
                                         "--plot", "--format", "--stream", "--rrc", "--jitter",
                                         "--fields", NULL};

static int parse_value(bench_opts *o, const char *a, const char *v)
{
    if (!strcmp(a, "--workers"))
        return cli_size_list(BENCH, a, v, 0, 256, o->workers, MAX_LIST, &o->nworkers);
    if (!strcmp(a, "--batch")) return cli_size(BENCH, a, v, 1, 65536, &o->batch);
    if (!strcmp(a, "--epochs")) return cli_size(BENCH, a, v, 1, 1000000, &o->epochs);
    if (!strcmp(a, "--seed")) return cli_u64(BENCH, a, v, &o->seed);
    if (!strcmp(a, "--prefetch")) return cli_size(BENCH, a, v, 1, 1024, &o->prefetch);
    if (!strcmp(a, "--compute-ms")) return cli_double(BENCH, a, v, 0, false, 1e6, &o->compute_ms);
    if (!strcmp(a, "--limit")) return cli_size(BENCH, a, v, 1, 1000000000, &o->limit);
    if (!strcmp(a, "--stream")) return cli_size(BENCH, a, v, 1, 1000000000, &o->stream);
    if (!strcmp(a, "--size")) return cli_size(BENCH, a, v, 1, 16384, &o->size);
    if (!strcmp(a, "--crop-pad")) return cli_size(BENCH, a, v, 1, 1024, &o->crop_pad);
    if (!strcmp(a, "--rrc")) return cli_size(BENCH, a, v, 1, 4096, &o->rrc);
    if (!strcmp(a, "--jitter")) return parse_jitter(a, v, o);
    if (!strcmp(a, "--fields")) return tool_fields_parse(BENCH, v, &o->fields) ? CLI_USAGE : 0;
    if (!strcmp(a, "--pin")) return parse_onoff(a, v, o->pin, &o->npin);
    if (!strcmp(a, "--overlap")) return parse_onoff(a, v, o->overlap, &o->noverlap);
    if (!strcmp(a, "--wire")) return parse_wire(a, v, o);
    if (!strcmp(a, "--format")) return parse_format(a, v, o);
    if (!strcmp(a, "--device")) o->device = v;
    else o->plot = v; /* --plot, the one left */
    return 0;
}

/* A flag (an option without a value); false when a is none. */
static bool parse_flag(bench_opts *o, const char *a)
{
    if (!strcmp(a, "--no-digest")) o->digest = false;
    else if (!strcmp(a, "--flip")) o->flip = true;
    else if (!strcmp(a, "--baseline")) o->baseline = true;
    else if (!strcmp(a, "--compare-torch")) o->compare_torch = true;
    else return false;
    return true;
}

/* Whether the row asked for pinned memory: on, or auto on a GPU. */
static bool pin_used(const bench_row *r)
{
    return r->pin == PIN_ON || (r->pin == PIN_AUTO && r->pinned);
}

static const char *pin_mode(int pin)
{
    return pin == PIN_ON ? "on" : pin == PIN_OFF ? "off" : "auto";
}

static void print_row(const bench_opts *o, const bench_row *r)
{
    if (o->json) {
        printf("{\"workers\":%zu,\"batch\":%zu,\"pin\":%s,\"pin_mode\":\"%s\",\"pinned\":%s,\"overlap\":%s,\"wire\":\"%s\","
               "\"device\":\"%s\",\"images\":%llu,\"seconds\":%.4f,\"images_per_s\":%.1f,"
               "\"mb_per_s\":%.2f,\"stall_pct\":%.2f,\"h2d_gbps\":%.3f,\"digest\":\"%016llx\","
               "\"read_s\":%.4f,\"decode_s\":%.4f,\"transform_s\":%.4f,\"wait_s\":%.4f,"
               "\"allocs_after_warmup\":%llu,\"simulated\":%s",
               r->workers, r->batch, pin_used(r) ? "true" : "false", pin_mode(r->pin), r->pinned ? "true" : "false",
               r->overlap ? "true" : "false", ferry_dtype_name(r->wire), r->device,
               (unsigned long long)r->images, r->seconds, r->images_per_s, r->mb_per_s,
               r->stall_pct, r->h2d_gbps, (unsigned long long)r->digest, r->stats.read_s,
               r->stats.decode_s, r->stats.transform_s, r->stats.wait_s,
               (unsigned long long)r->stats.allocs_after_warmup, r->simulated ? "true" : "false");
        const ferry_remote_stats *n = &r->net;
        if (r->has_net)
            printf(",\"net_bytes\":%llu,\"net_requests\":%llu,\"net_retries\":%llu,"
                   "\"net_hits\":%llu,\"net_misses\":%llu,\"net_wait_s\":%.4f,"
                   "\"net_streamed\":%llu,\"net_ranged\":%llu,\"net_downloads\":%llu,"
                   "\"net_connections\":%llu",
                   (unsigned long long)n->bytes_fetched, (unsigned long long)n->requests,
                   (unsigned long long)n->retries, (unsigned long long)n->hits,
                   (unsigned long long)n->misses, n->wait_s, (unsigned long long)n->stream_reads,
                   (unsigned long long)n->range_reads, (unsigned long long)n->downloads,
                   (unsigned long long)n->connections);
        printf("}\n");
    } else {
        printf("%7zu %6zu %4s %7s %4s %-7s %10.0f %8.1f %7.1f%% %8.2f  %016llx%s\n", r->workers,
               r->batch, r->pin == PIN_ON ? (r->pinned ? "on" : "on*") : r->pinned ? "on" : "off",
               r->overlap ? "on" : "off",
               ferry_dtype_name(r->wire), r->device, r->images_per_s, r->mb_per_s, r->stall_pct,
               r->h2d_gbps, (unsigned long long)r->digest, r->simulated ? "  (simulated)" : "");
        /* Where a worker's CPU goes, PNG or JPEG alike (a crop's resize,
         * flip and normalise count as transform); summed over the workers.
         * CPU time, so a loaded machine does not inflate it as wall time. */
        double per = r->images ? 1e3 / (double)r->images : 0;
        printf("        per image: read %.3f ms, decode %.3f ms, transform %.3f ms (worker CPU "
               "time, thread CPU clock)\n",
               r->stats.read_s * per, r->stats.decode_s * per, r->stats.transform_s * per);
        const ferry_remote_stats *n = &r->net;
        if (r->has_net) /* waited: reads' time waiting on the network, summed over workers */
            printf("        network: %.2f MB fetched, %llu requests, %llu retries; hits %llu, "
                   "misses %llu, waited %.3f s; %llu reads streamed, %llu by Range, "
                   "%llu whole-shard downloads; %llu connections opened\n",
                   (double)n->bytes_fetched / 1e6,
                   (unsigned long long)n->requests, (unsigned long long)n->retries,
                   (unsigned long long)n->hits, (unsigned long long)n->misses, n->wait_s,
                   (unsigned long long)n->stream_reads, (unsigned long long)n->range_reads,
                   (unsigned long long)n->downloads, (unsigned long long)n->connections);
    }
    fflush(stdout);
}

/* Options into o (defaults first): 0, CLI_USAGE after saying why, or -1 after
 * printing the usage for --help (exit 0). */
static int parse_args(int argc, char **argv, bench_opts *o)
{
    memset(o, 0, sizeof *o);
    o->workers[0] = 0; o->workers[1] = 1; o->workers[2] = 2; o->nworkers = 3;
    o->batch = 256;
    o->pin[0] = PIN_AUTO; o->npin = 1;
    o->overlap[0] = 1; o->noverlap = 1;
    o->wire[0] = FERRY_DTYPE_U8; o->nwire = 1;
    o->epochs = 1;
    o->seed = 0;
    o->digest = true;
    o->prefetch = 4;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cli_is_help(a)) {
            usage(stdout);
            return -1;
        }
        if (cli_in(a, value_opts)) {
            const char *v = cli_value(BENCH, argc, argv, &i);
            int rc = v ? parse_value(o, a, v) : CLI_USAGE;
            if (rc != 0)
                return rc;
        } else if (!parse_flag(o, a)) {
            if (a[0] == '-' || o->dir)
                return cli_unknown(BENCH, a, usage);
            o->dir = a;
        }
    }
    if (o->stream && o->limit) { /* a subset's indices are not the shards' */
        fprintf(stderr, BENCH ": --stream reads whole shards; it does not go with --limit\n");
        return CLI_USAGE;
    }
    if (o->baseline && o->dir && tool_is_shards(o->dir)) {
        fprintf(stderr, BENCH ": --baseline times libpng on image files; %s is tar shards "
                "(run it on the image folder they were packed from)\n", o->dir);
        return CLI_USAGE;
    }
    o->progress = isatty(2) && !o->json;
    return 0;
}

/* The image folder, or with --limit a seeded random subset of it (so every
 * class is in it); NULL after printing why. */
static ferry_dataset *open_dataset(const bench_opts *o)
{
    char wbuf[2048]; /* a library message in the command line's words */
    ferry_image_config icfg = ferry_image_config_default();
    if (o->size) {
        icfg.height = icfg.width = o->size;
        icfg.resize = FERRY_RESIZE_CENTER_CROP;
    }
    if (o->rrc) {
        icfg.height = icfg.width = o->rrc;
        icfg.channels = 3;
        icfg.crop = FERRY_CROP_RANDOM_RESIZED;
    }
    icfg.random_crop_pad = o->crop_pad;
    icfg.random_hflip = o->flip;
    memcpy(icfg.color_jitter, o->jitter, sizeof icfg.color_jitter);
    ferry_dataset *ds;
    ferry_status st0 = o->fields.n ? ferry_dataset_shards_fields(&o->dir, 1, &icfg, o->fields.names,
                                                                 o->fields.n, &ds)
                                   : ferry_dataset_open(o->dir, &icfg, &ds); /* a folder, shards, a list, IDX */
    if (st0 != FERRY_OK) {
        fprintf(stderr, "ferry bench: %s\n", cli_words(ferry_last_error(), wbuf, sizeof wbuf));
        return NULL;
    }
    if (o->limit && o->limit < ferry_dataset_len(ds)) {
        ferry_dataset *rest, *sub;
        double frac = (double)o->limit / (double)ferry_dataset_len(ds);
        ferry_status st = ferry_dataset_split(ds, frac, 1, &rest, &sub);
        ferry_dataset_release(ds);
        if (st != FERRY_OK) {
            fprintf(stderr, "ferry bench: %s\n", cli_words(ferry_last_error(), wbuf, sizeof wbuf));
            return NULL;
        }
        ferry_dataset_release(rest);
        ds = sub;
    }
    return ds;
}

/* One untimed epoch first, so the first row does not pay for a cold page cache. */
static int warm_up(const bench_opts *o, ferry_dataset *ds, void *hostbuf, size_t hostbuf_bytes)
{
    char wbuf[2048]; /* a library message in the command line's words */
    bench_opts warm = *o;
    warm.epochs = 1;
    warm.digest = false;
    warm.compute_ms = 0;
    bench_row ignored;
    size_t most = 0;
    for (size_t k = 0; k < o->nworkers; k++)
        most = o->workers[k] > most ? o->workers[k] : most;
    if (run_config(&warm, ds, most, o->pin[0], 1, o->wire[0], &ignored, hostbuf, hostbuf_bytes) != FERRY_OK) {
        fprintf(stderr, "ferry bench: %s\n", cli_words(ferry_last_error(), wbuf, sizeof wbuf));
        return 1;
    }
    return 0;
}

/* The bars of --plot: one per row, at most 64. */
typedef struct chart {
    char labels[64][96];
    const char *label_ptrs[64];
    double rates[64];
    size_t n;
} chart;

static void chart_add(chart *c, const char *label, double rate)
{
    if (c->n >= 64)
        return;
    snprintf(c->labels[c->n], sizeof c->labels[c->n], "%s", label);
    c->label_ptrs[c->n] = c->labels[c->n];
    c->rates[c->n++] = rate;
}

/* Every configuration of the grid, a row each; 1 when one failed or the digest
 * changed with the configuration. plain: the libpng rate (0: none). */
static int run_grid(const bench_opts *o, ferry_dataset *ds, void *hostbuf, size_t hostbuf_bytes,
                    double plain, chart *ch, bool *any_simulated)
{
    char wbuf[2048]; /* a library message in the command line's words */
    int rc = 0;
    uint64_t first_digest = 0;
    bool have_digest = false;
    for (size_t wi = 0; wi < o->nwire; wi++)
        for (int pi = 0; pi < o->npin; pi++)
            for (int oi = 0; oi < o->noverlap; oi++)
                for (size_t k = 0; k < o->nworkers; k++) {
                    bench_row row;
                    memset(&row, 0, sizeof row);
                    ferry_status st = run_config(o, ds, o->workers[k], o->pin[pi], o->overlap[oi],
                                                 o->wire[wi], &row, hostbuf, hostbuf_bytes);
                    if (st != FERRY_OK) {
                        fprintf(stderr, "ferry bench: workers %zu: %s\n", o->workers[k],
                                cli_words(ferry_last_error(), wbuf, sizeof wbuf));
                        rc = 1;
                        continue;
                    }
                    print_row(o, &row);
                    *any_simulated |= row.simulated;
                    if (plain > 0 && !o->json && row.workers > 0)
                        printf("        %.2f x (%zu x the plain libpng rate)\n",
                               row.images_per_s / (plain * (double)row.workers), row.workers);
                    char label[96];
                    snprintf(label, sizeof label, "workers %zu, pin %s, overlap %s, %s%s", row.workers,
                             pin_mode(row.pin), row.overlap ? "on" : "off",
                             ferry_dtype_name(row.wire), row.simulated ? " (simulated)" : "");
                    chart_add(ch, label, row.images_per_s);
                    if (o->digest && row.wire == FERRY_DTYPE_U8) {
                        if (have_digest && row.digest != first_digest) {
                            fprintf(stderr, "ferry bench: digest changed with the configuration!\n");
                            rc = 1;
                        }
                        first_digest = row.digest;
                        have_digest = true;
                    }
                }
    return rc;
}

/* --compare-torch: PyTorch's DataLoader with the most workers asked for, as one more row. */
static int compare_torch(const bench_opts *o, chart *ch)
{
    size_t w = o->workers[o->nworkers - 1];
    double ips = 0;
    char version[64] = "?";
    if (torch_row(o, w, &ips, version, sizeof version) != 0) {
        fprintf(stderr, "ferry bench: bench/compare_torch.py failed (see its message above)\n");
        return 1;
    }
    if (o->json)
        printf("{\"loader\":\"torch %s\",\"workers\":%zu,\"batch\":%zu,\"images_per_s\":%.1f}\n",
               version, w, o->batch, ips);
    else
        printf("%7zu %6zu %4s %7s %4s %-7s %10.0f  (PyTorch %s DataLoader)\n", w, o->batch,
               pin_mode(o->pin[0]), "-", "f32", o->device ? o->device : "cpu", ips, version);
    char label[96];
    snprintf(label, sizeof label, "PyTorch DataLoader, workers %zu", w);
    chart_add(ch, label, ips);
    return 0;
}

int bench_pipeline(int argc, char **argv)
{
    bench_opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc != 0)
        return rc < 0 ? 0 : rc;
    if (!o.dir) {
        if (prepare_default(&o.dir) != 0)
            return 1;
    }

    ferry_set_log(log_once, NULL);
    ferry_dataset *ds = open_dataset(&o);
    if (!ds)
        return 1;
    size_t hostbuf_bytes = o.batch * ferry_dataset_sample_bytes(ds) * 4 + o.batch * 8;
    const ferry_field *fl;
    size_t nfl;
    if (o.fields.n && ferry_dataset_fields(ds, &fl, &nfl) == FERRY_OK)
        for (size_t k = 0; k < nfl; k++) /* each field's batch, for digest_fields */
            if (o.batch * (ferry_field_bytes(&fl[k]) + 8) > hostbuf_bytes)
                hostbuf_bytes = o.batch * (ferry_field_bytes(&fl[k]) + 8);
    void *hostbuf = malloc(hostbuf_bytes);
    if (!hostbuf) {
        ferry_dataset_release(ds);
        fprintf(stderr, "ferry bench: out of memory\n");
        return 1;
    }
    if (!o.json) {
        const ferry_sample_format *f = ferry_dataset_format(ds);
        printf("ferry bench: %s: %zu images of %zux%zux%zu, %zu epoch(s), compute %.1f ms/batch\n",
               o.dir, ferry_dataset_len(ds), f->channels, f->height, f->width, o.epochs, o.compute_ms);
        if (o.fields.n)
            tool_fields_print(stdout, ds);
        printf("%7s %6s %4s %7s %4s %-7s %10s %8s %8s %8s  %s\n", "workers", "batch", "pin",
               "overlap", "wire", "device", "images/s", "MB/s", "stall", "H2D GB/s", "digest");
    }
    double plain = 0;
    if (o.baseline) {
        plain = bench_plain_libpng_rate(o.dir, o.limit ? o.limit : 20000);
        if (plain <= 0) {
            fprintf(stderr, "ferry bench: the plain libpng loop failed on %s\n", o.dir);
            free(hostbuf);
            ferry_dataset_release(ds);
            return 1;
        }
        if (o.json)
            printf("{\"baseline\":\"plain libpng, 1 thread\",\"images_per_s\":%.1f}\n", plain);
        else
            printf("plain libpng loop, 1 thread: %.0f images/s\n", plain);
    }
    if (warm_up(&o, ds, hostbuf, hostbuf_bytes) != 0) {
        free(hostbuf);
        ferry_dataset_release(ds);
        return 1;
    }
    chart ch = {0};
    bool simulated = false;
    rc = run_grid(&o, ds, hostbuf, hostbuf_bytes, plain, &ch, &simulated);
    if (o.compare_torch && compare_torch(&o, &ch) != 0)
        rc = 1;
    if (!o.json)
        printf("stall = the caller's time waiting in next() (the GPU starving); pin on* = asked for, "
               "but no GPU: pageable memory\n");
    if (!o.json && simulated)
        printf("(simulated) = measured on a simulated GPU (FERRY_SIM_GPUS=%d): batches and digests "
               "follow CUDA's rules, images/s, stall and GB/s mean nothing\n", ferry_cuda_device_count());
    if (o.plot && ch.n) {
        char title[256];
        snprintf(title, sizeof title, "ferry bench: %zu images, batch %zu, device %s%s", ferry_dataset_len(ds),
                 o.batch, o.device ? o.device : "default",
                 simulated ? " (simulated GPU: timings mean nothing)" : "");
        if (svg_bar_chart(o.plot, title, "images/s", ch.label_ptrs, ch.rates, ch.n) != 0) {
            fprintf(stderr, "ferry bench: cannot write %s\n", o.plot);
            rc = 1;
        } else if (!o.json) {
            printf("plot: %s\n", o.plot);
        }
    }
    free(hostbuf);
    ferry_dataset_release(ds);
    return rc;
}

/* `ferry bench tokens PATH...`: reads batches of B windows of T + 1 tokens
 * through the loader (shuffled, N workers, read-ahead) and, in the same run
 * over the same files, through a plain synchronous loop that does what
 * llm.c's loader does (fseek + fread of B*T + 1 tokens per batch in the
 * training thread, then the widening copy into int32 inputs and targets).
 * Prints tokens/s and the training thread's time per next() for both, and
 * their ratio. --make N writes N random uint16 tokens as llm.c shards into
 * the first path (a new folder) first, so the command stands alone. The
 * files should be in the page cache: both runs read them once first. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli_args.h"
#include "commands.h"
#include "common/error.h" /* ferry_now */
#include "dataset/tokens/tokens.h"
#include "ferry.h"
#include "files.h"

#define PROG "ferry bench tokens"

typedef struct bopts {
    const char **paths;
    size_t npaths, batch, T, workers, batches, prefetch;
    uint64_t make;
    const char *device;
    ferry_dtype dtype;
    size_t step_us;
} bopts;

static void usage(FILE *f)
{
    fprintf(f, "usage: ferry bench tokens [--batch B] [--seq-len T] [--workers N] [--batches K]\n"
               "                          [--device DEV] [--step-us U] [--make TOKENS] PATH...\n"
               "tokens/s and time per next() of the loader over token files (windows of T + 1,\n"
               "shuffled) against a synchronous fread loop as llm.c's loader does, in one run.\n"
               "  --batch B (16), --seq-len T (1024), --workers N (2), --batches K (2000),\n"
               "  --prefetch P (4), --device cpu|cuda:N (the default device)\n"
               "  --dtype i32|i64|u16|u32: the dtype inputs and targets arrive in (i32); the\n"
               "                rows cross as stored and are widened on the device\n"
               "  --step-us U: the training step's time between two next() calls (0): the\n"
               "                training thread sleeps, as it waits for the GPU, and both loops\n"
               "                get the same; next()'s time excludes it (tokens/s does not)\n"
               "  --make TOKENS: first write that many random uint16 tokens as llm.c shards of\n"
               "                100M tokens into PATH (a folder that must not exist)\n");
}

static int parse(int argc, char **argv, bopts *o)
{
    static const char *const valued[] = {"--batch", "--seq-len", "--workers", "--batches",
                                         "--device", "--make", "--prefetch", "--dtype",
                                         "--step-us", NULL};
    *o = (bopts){.batch = 16, .T = 1024, .workers = 2, .batches = 2000, .prefetch = 4,
                 .dtype = FERRY_DTYPE_I32};
    o->paths = calloc((size_t)argc, sizeof *o->paths);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (cli_is_help(a)) {
            usage(stdout);
            return -1;
        }
        if (!cli_in(a, valued)) {
            if (a[0] == '-' && a[1])
                return cli_unknown(PROG, a, usage);
            o->paths[o->npaths++] = a;
            continue;
        }
        if (!(v = cli_value(PROG, argc, argv, &i)))
            return CLI_USAGE;
        int bad = !strcmp(a, "--batch") ? cli_size(PROG, a, v, 1, 65536, &o->batch)
                : !strcmp(a, "--seq-len") ? cli_size(PROG, a, v, 1, 1 << 20, &o->T)
                : !strcmp(a, "--workers") ? cli_size(PROG, a, v, 0, 64, &o->workers)
                : !strcmp(a, "--batches") ? cli_size(PROG, a, v, 2, 1 << 30, &o->batches)
                : !strcmp(a, "--prefetch") ? cli_size(PROG, a, v, 1, 64, &o->prefetch)
                : !strcmp(a, "--step-us") ? cli_size(PROG, a, v, 0, 10000000, &o->step_us)
                : !strcmp(a, "--make") ? cli_u64(PROG, a, v, &o->make) : 0;
        if (!strcmp(a, "--device"))
            o->device = v;
        if (!strcmp(a, "--dtype")) {
            o->dtype = !strcmp(v, "i32") ? FERRY_DTYPE_I32 : !strcmp(v, "i64") ? FERRY_DTYPE_I64
                     : !strcmp(v, "u16") ? FERRY_DTYPE_U16 : !strcmp(v, "u32") ? FERRY_DTYPE_U32
                     : FERRY_DTYPE_COUNT;
            if (o->dtype == FERRY_DTYPE_COUNT)
                return cli_bad_value(PROG, a, v, "i32, i64, u16 or u32");
        }
        if (bad)
            return CLI_USAGE;
    }
    if (!o->npaths) {
        usage(stderr);
        return CLI_USAGE;
    }
    return 0;
}

static int make_shards(const char *dir, uint64_t tokens)
{
    if (tool_mkdirs(dir) != 0) {
        fprintf(stderr, PROG ": %s: %s\n", dir, strerror(errno));
        return 1;
    }
    uint64_t s = 0x1234567;
    uint16_t *buf = malloc(sizeof(uint16_t) << 20);
    for (size_t k = 0; tokens && buf; k++) {
        uint64_t n = tokens < 100000000 ? tokens : 100000000;
        char p[4096];
        snprintf(p, sizeof p, "%s/bench_%06zu.bin", dir, k);
        FILE *f = fopen(p, "wbx");
        int32_t h[256] = {FERRY_TOKENS_LLMC_MAGIC_U16, 1, (int32_t)n};
        int bad = !f || fwrite(h, sizeof h, 1, f) != 1;
        for (uint64_t left = n; !bad && left;) {
            size_t m = left < (1u << 20) ? (size_t)left : (1u << 20);
            for (size_t j = 0; j < m; j++) {
                s = s * 6364136223846793005ull + 1442695040888963407ull;
                buf[j] = (uint16_t)((s >> 33) % 50257);
            }
            bad = fwrite(buf, 2, m, f) != m;
            left -= m;
        }
        if (f && fclose(f) != 0)
            bad = 1;
        if (bad) {
            fprintf(stderr, PROG ": %s: %s\n", p, strerror(errno));
            free(buf);
            return 1;
        }
        tokens -= n;
    }
    free(buf);
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct result {
    double wall, mean, p50, p99;
} result;

static result summarize(double *t, size_t n, double wall)
{
    result r = {.wall = wall};
    for (size_t i = 0; i < n; i++)
        r.mean += t[i] / (double)n;
    qsort(t, n, sizeof *t, cmp_double);
    r.p50 = t[n / 2];
    r.p99 = t[(size_t)((double)n * 0.99)];
    return r;
}

/* The training step's time: the training thread waits (for the GPU, say). */
static void step(size_t us)
{
    struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};
    while (us && nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* llm.c's loader: the next B*T + 1 tokens of the current shard (the next
 * shard when they do not fit), one fseek and one fread, widened into int32
 * inputs and targets in the training thread. */
static int sync_loop(const ferry_tok_source *src, const bopts *o, double *t, result *out)
{
    size_t B = o->batch, T = o->T, w = src->token_bytes, need = B * T + 1;
    uint8_t *raw = malloc(need * w);
    int32_t *in = malloc(B * T * sizeof *in), *tg = malloc(B * T * sizeof *tg);
    FILE **f = calloc(src->n, sizeof(FILE *));
    for (size_t k = 0; f && k < src->n; k++)
        f[k] = fopen(src->shards[k].path, "rb");
    size_t k = 0;
    uint64_t pos = 0;
    int bad = !raw || !in || !tg || !f;
    double t0 = ferry_now();
    for (size_t b = 0; b < o->batches && !bad; b++) {
        double a = ferry_now();
        for (size_t tries = 0; pos + need > src->shards[k].h.count && tries <= src->n; tries++) {
            k = (k + 1) % src->n;
            pos = 0;
        }
        bad = !f[k] || pos + need > src->shards[k].h.count ||
              fseek(f[k], (long)(src->shards[k].h.data_off + pos * w), SEEK_SET) != 0 ||
              fread(raw, w, need, f[k]) != need;
        if (!bad && w == 2) { /* llm.c's loop: a cast per token */
            const uint16_t *r = (const uint16_t *)(const void *)raw;
            for (size_t j = 0; j < B * T; j++) {
                in[j] = r[j];
                tg[j] = r[j + 1];
            }
        }
        for (size_t j = 0; j < B * T && !bad && w == 4; j++) {
            uint32_t x, y;
            memcpy(&x, raw + j * 4, 4);
            memcpy(&y, raw + (j + 1) * 4, 4);
            in[j] = (int32_t)x;
            tg[j] = (int32_t)y;
        }
        pos += B * T;
        t[b] = ferry_now() - a;
        step(o->step_us);
    }
    *out = summarize(t, o->batches, ferry_now() - t0);
    if (bad)
        fprintf(stderr, PROG ": the fread loop failed (files of fewer than B*T+1 tokens?)\n");
    for (size_t j = 0; f && j < src->n; j++)
        if (f[j])
            fclose(f[j]);
    free(f);
    free(raw);
    free(in);
    free(tg);
    return bad;
}

static int loader_loop(ferry_tokens *tk, const bopts *o, double *t, result *out)
{
    ferry_loader_config c = {.dataset = ferry_tokens_dataset(tk), .batch_size = o->batch,
                             .shuffle = true, .num_workers = o->workers ? o->workers :
                             FERRY_LOADER_NO_WORKERS, .prefetch = o->prefetch,
                             .drop_last = true};
    if (o->device && ferry_device_parse(o->device, &c.device) != FERRY_OK) {
        fprintf(stderr, PROG ": %s\n", ferry_last_error());
        return 1;
    }
    ferry_loader *l = NULL;
    if (ferry_loader_create(&c, &l) != FERRY_OK) {
        fprintf(stderr, PROG ": %s\n", ferry_last_error());
        return 1;
    }
    ferry_batch b;
    ferry_status st = ferry_loader_next(l, NULL, &b); /* warm-up: the slots fill */
    double t0 = ferry_now();
    for (size_t i = 0; i < o->batches && st == FERRY_OK; i++) {
        double a = ferry_now();
        st = ferry_loader_next(l, NULL, &b);
        if (st == FERRY_END)
            st = ferry_loader_reset(l, b.epoch + 1) == FERRY_OK ? ferry_loader_next(l, NULL, &b) : st;
        t[i] = ferry_now() - a;
        step(o->step_us);
    }
    if (st == FERRY_OK)
        st = ferry_device_synchronize(ferry_loader_device(l));
    *out = summarize(t, o->batches, ferry_now() - t0);
    if (st != FERRY_OK)
        fprintf(stderr, PROG ": %s\n", ferry_last_error());
    ferry_loader_destroy(l);
    return st != FERRY_OK;
}

static void warm(const ferry_tok_source *src)
{
    uint8_t *buf = malloc((size_t)1 << 22);
    for (size_t k = 0; buf && k < src->n; k++) {
        FILE *f = fopen(src->shards[k].path, "rb");
        while (f && fread(buf, 1, (size_t)1 << 22, f) > 0) {
        }
        if (f)
            fclose(f);
    }
    free(buf);
}

static void print_row(const char *name, const result *r, const bopts *o)
{
    double tokens = (double)o->batches * (double)o->batch * (double)o->T;
    printf("%-22s %12.3g %12.2f %12.2f %12.2f\n", name, tokens / r->wall, r->mean * 1e6,
           r->p50 * 1e6, r->p99 * 1e6);
}

int bench_tokens(int argc, char **argv)
{
    bopts o;
    int rc = parse(argc, argv, &o);
    if (rc != 0 || (o.make && make_shards(o.paths[0], o.make))) {
        free(o.paths);
        return rc < 0 ? 0 : rc ? rc : 1;
    }
    ferry_tokens *tk = NULL;
    ferry_tokens_config tc = {.seq_len = o.T, .token_dtype = o.dtype};
    if (ferry_tokens_open(o.paths, o.npaths, &tc, &tk) != FERRY_OK) {
        fprintf(stderr, PROG ": %s\n", ferry_last_error());
        free(o.paths);
        return 1;
    }
    ferry_tok_source *src = &tk->src;
    warm(src);
    ferry_tokens_info in;
    ferry_tokens_info_get(tk, &in);
    printf("%zu files, %.3g tokens, T=%zu, B=%zu, %zu workers, prefetch %zu, %zu batches, "
           "inputs and targets %s, step %zu us\n", in.shards, (double)in.tokens, o.T, o.batch,
           o.workers, o.prefetch, o.batches, ferry_dtype_name(o.dtype), o.step_us);
    double *t = calloc(o.batches, sizeof *t);
    result rl = {0}, rs = {0};
    rc = !t || loader_loop(tk, &o, t, &rl) || sync_loop(src, &o, t, &rs);
    if (rc == 0) {
        printf("%-22s %12s %12s %12s %12s\n", "", "tokens/s", "next() us", "p50 us", "p99 us");
        print_row("ferry loader", &rl, &o);
        print_row("sync fread (llm.c)", &rs, &o);
        printf("next() time, loader / fread loop: mean %.3f, p50 %.3f (goal <= 0.1); loader "
               "tokens/s %.3g (goal >= 1e8)\n", rl.mean / rs.mean, rl.p50 / rs.p50,
               (double)o.batches * o.batch * o.T / rl.wall);
    }
    free(t);
    ferry_tokens_destroy(tk);
    free(o.paths);
    return rc;
}

/* `ferry bench h2d`: host-to-device and device-to-host copy bandwidth for
 * pageable and pinned memory, synchronous and asynchronous, 4 KiB to 256 MiB,
 * median of several repetitions timed with events. Without a GPU it says so and
 * measures host memcpy from pageable and pinned-pool memory as the CPU reference.
 * On the simulated GPU (FERRY_SIM_GPUS) every row is marked simulated: the copies
 * follow CUDA's rules, their timings mean nothing. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ferry.h"
#include "cli_args.h"
#include "commands.h"

enum fmt { FMT_TABLE, FMT_CSV, FMT_JSON };

typedef struct row {
    const char *direction; /* "H2D", "D2H", "H2H (cpu reference)" */
    const char *memory;    /* "pageable", "pinned" */
    const char *mode;      /* "sync", "async" */
    size_t bytes;
    double ms;             /* median */
} row;

typedef struct bench {
    enum fmt fmt;
    int reps;
    size_t max_bytes;
    ferry_device dev;
    bool gpu;
    bool simulated;        /* dev is a simulated GPU: every row is marked */
    row *rows;
    size_t nrows, cap;
} bench;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int add_row(bench *b, row r)
{
    if (b->nrows == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 64;
        row *n = realloc(b->rows, cap * sizeof *n);
        if (!n)
            return -1;
        b->rows = n;
        b->cap = cap;
    }
    b->rows[b->nrows++] = r;
    return 0;
}

/* Times reps copies (after one warm-up) with events on stream s (NULL: the
 * default stream, which synchronous copies use); returns the median in ms. */
static ferry_status time_copy(bench *b, void *dst, const void *src, size_t bytes, ferry_copy_kind kind,
                              ferry_stream *s, double *median)
{
    ferry_event *e0 = NULL, *e1 = NULL;
    ferry_status st;
    double *ms = calloc((size_t)b->reps, sizeof *ms);
    if (!ms)
        return FERRY_ERR_NO_MEMORY;
    if ((st = ferry_event_create(b->dev, true, &e0)) != FERRY_OK ||
        (st = ferry_event_create(b->dev, true, &e1)) != FERRY_OK)
        goto out;
    if ((st = ferry_memcpy(dst, src, bytes, kind, b->dev, s)) != FERRY_OK)
        goto out;
    for (int r = 0; r < b->reps; r++) {
        float m = 0;
        if ((st = ferry_event_record(e0, s)) != FERRY_OK ||
            (st = ferry_memcpy(dst, src, bytes, kind, b->dev, s)) != FERRY_OK ||
            (st = ferry_event_record(e1, s)) != FERRY_OK ||
            (st = ferry_event_synchronize(e1)) != FERRY_OK ||
            (st = ferry_event_elapsed_ms(e0, e1, &m)) != FERRY_OK)
            goto out;
        ms[r] = m;
    }
    qsort(ms, (size_t)b->reps, sizeof *ms, cmp_double);
    *median = b->reps % 2 ? ms[b->reps / 2] : (ms[b->reps / 2 - 1] + ms[b->reps / 2]) / 2;
out:
    ferry_event_destroy(e0);
    ferry_event_destroy(e1);
    free(ms);
    return st;
}

static int run_gpu(bench *b, ferry_pinned_pool *pool)
{
    ferry_stream *s = NULL;
    void *dev = NULL, *pin = NULL;
    char *page = malloc(b->max_bytes);
    ferry_status st = FERRY_OK;
    if (!page) {
        fprintf(stderr, "ferry bench h2d: out of host memory\n");
        return 1;
    }
    memset(page, 1, b->max_bytes); /* fault the pages in before timing */
    if ((st = ferry_stream_create(b->dev, &s)) != FERRY_OK ||
        (st = ferry_device_alloc(b->dev, b->max_bytes, s, &dev)) != FERRY_OK ||
        (st = ferry_pinned_pool_alloc(pool, b->max_bytes, 0, &pin)) != FERRY_OK)
        goto fail;
    memset(pin, 1, b->max_bytes);
    for (size_t n = 4096; n <= b->max_bytes; n *= 4) {
        static const struct { ferry_copy_kind kind; const char *dir; } dirs[] = {
            {FERRY_COPY_H2D, "H2D"}, {FERRY_COPY_D2H, "D2H"}};
        for (int d = 0; d < 2; d++) {
            for (int pinned = 0; pinned < 2; pinned++) {
                for (int async = 0; async < 2; async++) {
                    void *host = pinned ? pin : page;
                    void *dst = dirs[d].kind == FERRY_COPY_H2D ? dev : host;
                    const void *src = dirs[d].kind == FERRY_COPY_H2D ? host : dev;
                    row r = {dirs[d].dir, pinned ? "pinned" : "pageable", async ? "async" : "sync", n, 0};
                    if ((st = time_copy(b, dst, src, n, dirs[d].kind, async ? s : NULL, &r.ms)) != FERRY_OK)
                        goto fail;
                    if (add_row(b, r))
                        goto fail;
                }
            }
        }
    }
    ferry_device_free(b->dev, dev);
    ferry_stream_destroy(s);
    free(page);
    return 0;
fail:
    fprintf(stderr, "ferry bench h2d: %s\n", st != FERRY_OK ? ferry_last_error() : "out of memory");
    ferry_device_free(b->dev, dev);
    ferry_stream_destroy(s);
    free(page);
    return 1;
}

/* No GPU: host memcpy between two pageable buffers, and between two pieces of
 * the pinned pool (pageable too on this machine, but the pool's memory). */
static int run_cpu_reference(bench *b, ferry_pinned_pool *pool)
{
    char *a = malloc(b->max_bytes), *c = malloc(b->max_bytes);
    void *pa = NULL, *pc = NULL;
    ferry_status st = FERRY_OK;
    int rc = 1;
    if (!a || !c)
        goto out;
    if ((st = ferry_pinned_pool_alloc(pool, b->max_bytes, 0, &pa)) != FERRY_OK ||
        (st = ferry_pinned_pool_alloc(pool, b->max_bytes, 0, &pc)) != FERRY_OK)
        goto out;
    memset(a, 1, b->max_bytes);
    memset(c, 2, b->max_bytes);
    memset(pa, 1, b->max_bytes);
    memset(pc, 2, b->max_bytes);
    for (size_t n = 4096; n <= b->max_bytes; n *= 4) {
        for (int pool_mem = 0; pool_mem < 2; pool_mem++) {
            row r = {"H2H (cpu reference)", pool_mem ? "pinned-pool" : "pageable", "sync", n, 0};
            if ((st = time_copy(b, pool_mem ? pc : c, pool_mem ? pa : a, n, FERRY_COPY_H2H, NULL, &r.ms)) !=
                FERRY_OK)
                goto out;
            if (add_row(b, r))
                goto out;
        }
    }
    rc = 0;
out:
    if (rc)
        fprintf(stderr, "ferry bench h2d: %s\n", st != FERRY_OK ? ferry_last_error() : "out of memory");
    free(a);
    free(c);
    return rc;
}

static void size_name(size_t n, char *buf, size_t size)
{
    if (n >= (size_t)1 << 20)
        snprintf(buf, size, "%zu MiB", n >> 20);
    else
        snprintf(buf, size, "%zu KiB", n >> 10);
}

static double gbps(const row *r) { return r->ms > 0 ? (double)r->bytes / (r->ms * 1e6) : 0; }

static void print_rows(const bench *b)
{
    char dn[FERRY_DEVICE_NAME_MAX], sz[32];
    ferry_device_format(b->dev, dn, sizeof dn);
    if (b->fmt == FMT_CSV) {
        printf("device,direction,memory,mode,bytes,median_ms,gb_per_s,simulated\n");
        for (size_t i = 0; i < b->nrows; i++) {
            const row *r = &b->rows[i];
            printf("%s,%s,%s,%s,%zu,%.6f,%.3f,%s\n", dn, r->direction, r->memory, r->mode, r->bytes,
                   r->ms, gbps(r), b->simulated ? "true" : "false");
        }
        return;
    }
    if (b->fmt == FMT_JSON) {
        printf("{\n  \"device\": \"%s\",\n  \"gpu\": %s,\n  \"simulated\": %s,\n  \"reps\": %d,\n"
               "  \"rows\": [\n", dn, b->gpu ? "true" : "false", b->simulated ? "true" : "false", b->reps);
        for (size_t i = 0; i < b->nrows; i++) {
            const row *r = &b->rows[i];
            printf("    {\"direction\": \"%s\", \"memory\": \"%s\", \"mode\": \"%s\", \"bytes\": %zu, "
                   "\"median_ms\": %.6f, \"gb_per_s\": %.3f, \"simulated\": %s}%s\n",
                   r->direction, r->memory, r->mode, r->bytes, r->ms, gbps(r),
                   b->simulated ? "true" : "false", i + 1 < b->nrows ? "," : "");
        }
        printf("  ]\n}\n");
        return;
    }
    printf("%-20s %-12s %-6s %10s %12s %10s\n", "direction", "memory", "mode", "size", "median ms", "GB/s");
    for (size_t i = 0; i < b->nrows; i++) {
        const row *r = &b->rows[i];
        size_name(r->bytes, sz, sizeof sz);
        printf("%-20s %-12s %-6s %10s %12.4f %10.2f%s\n", r->direction, r->memory, r->mode, sz, r->ms,
               gbps(r), b->simulated ? "  (simulated)" : "");
    }
    if (b->simulated)
        printf("(simulated) = measured on %s, a simulated GPU (FERRY_SIM_GPUS): the copies follow "
               "CUDA's rules, the timings mean nothing\n", dn);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: ferry bench h2d [--format table|csv|json] [--reps N] [--max-mib N]\n"
               "  host-to-device copies, pageable against pinned, sync against async, 4 KiB up to\n"
               "  --max-mib (1 to 4096, default 256); --reps: timed repetitions (1 to 1000, default 7)\n");
}

#define H2D "ferry bench h2d"

/* Options into b: 0, CLI_USAGE after saying why, or -1 after --help. */
static int parse_args(int argc, char **argv, bench *b)
{
    static const char *const formats[] = {"table", "csv", "json", NULL};
    static const enum fmt kinds[] = {FMT_TABLE, FMT_CSV, FMT_JSON};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        int k = 0, rc = 0;
        size_t n = 0;
        if (cli_is_help(a)) {
            usage(stdout);
            return -1;
        }
        static const char *const value_opts[] = {"--format", "--reps", "--max-mib", NULL};
        if (!cli_in(a, value_opts))
            return cli_unknown(H2D, a, usage);
        if (!(v = cli_value(H2D, argc, argv, &i)))
            return CLI_USAGE;
        if (!strcmp(a, "--format") && (rc = cli_choice(H2D, a, v, formats, &k)) == 0)
            b->fmt = kinds[k];
        else if (!strcmp(a, "--reps") && (rc = cli_size(H2D, a, v, 1, 1000, &n)) == 0)
            b->reps = (int)n;
        else if (!strcmp(a, "--max-mib") && (rc = cli_size(H2D, a, v, 1, 4096, &n)) == 0)
            b->max_bytes = n << 20;
        if (rc != 0)
            return rc;
    }
    return 0;
}

int bench_h2d(int argc, char **argv)
{
    bench b = {.fmt = FMT_TABLE, .reps = 7, .max_bytes = (size_t)256 << 20};
    int rc = parse_args(argc, argv, &b);
    if (rc != 0)
        return rc < 0 ? 0 : rc;
    b.gpu = ferry_cuda_is_available();
    b.dev = b.gpu ? ferry_cuda(0) : ferry_cpu();
    b.simulated = b.gpu && ferry_cuda_is_simulated();
    /* Messages go to stderr so csv/json output stays parseable. */
    if (b.simulated)
        fprintf(stderr, "ferry bench h2d: cuda:0 is a simulated GPU (FERRY_SIM_GPUS): every row is "
                        "marked simulated; its timings mean nothing\n");
    if (!b.gpu)
        fprintf(stderr, "ferry bench h2d: no CUDA device, so GPU copy bandwidth cannot be measured; "
                        "showing host memcpy (pageable vs pinned-pool memory) as the CPU reference\n");
    ferry_pinned_pool *pool = NULL;
    if (ferry_pinned_pool_create((b.gpu ? 1 : 2) * b.max_bytes + ((size_t)1 << 20), true, &pool) != FERRY_OK) {
        fprintf(stderr, "ferry bench h2d: %s\n", ferry_last_error());
        return 1;
    }
    rc = b.gpu ? run_gpu(&b, pool) : run_cpu_reference(&b, pool);
    if (rc == 0)
        print_rows(&b);
    ferry_pinned_pool_destroy(pool);
    free(b.rows);
    return rc;
}

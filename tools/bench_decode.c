/* `ferry bench decode DIR`: ferry's PNG decode beside a plain single-thread libpng
 * loop (png_image_begin_read_from_memory + png_image_finish_read), same files,
 * same output format, same run; a folder whose first image is a JPEG gets the
 * JPEG rows instead (tools/bench_jpeg.c), over its JPEG files. `--generate DIR N` writes N 256x256 RGB images
 * with real structure for the large-image case. */
#include <errno.h>
#include <math.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli_args.h"
#include "commands.h"
#include "ferry.h"
#include "ferry/rng.h"
#include "files.h"

/* Smooth gradients, a few shapes and a little noise: compresses like a photo-ish
 * image rather than like flat colour or pure noise. Deterministic in i. */
static int generate(const char *dir, long n)
{
    enum { S = 256 };
    static uint8_t px[S * S * 3];
    if (tool_mkdirs(dir) != 0) {
        fprintf(stderr, "ferry bench decode: %s: %s\n", dir, strerror(errno));
        return 1;
    }
    for (long i = 0; i < n; i++) {
        ferry_rng r;
        ferry_rng_init(&r, 20261123, 0, (uint64_t)i);
        float fx = ferry_rng_uniform(&r) * 2 + 0.5f, fy = ferry_rng_uniform(&r) * 2 + 0.5f;
        int base[3] = {(int)ferry_rng_below(&r, 256), (int)ferry_rng_below(&r, 256),
                       (int)ferry_rng_below(&r, 256)};
        for (int y = 0; y < S; y++)
            for (int x = 0; x < S; x++)
                for (int c = 0; c < 3; c++) {
                    float v = (float)base[c] + 60.0f * sinf((float)x * fx * 0.02f + (float)c) +
                              60.0f * cosf((float)y * fy * 0.02f - (float)c);
                    px[(y * S + x) * 3 + c] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
                }
        for (int k = 0; k < 6; k++) {
            int cx = (int)ferry_rng_below(&r, S), cy = (int)ferry_rng_below(&r, S);
            int rad = 8 + (int)ferry_rng_below(&r, 48), rect = (int)ferry_rng_below(&r, 2);
            uint8_t col[3] = {(uint8_t)ferry_rng_u32(&r), (uint8_t)ferry_rng_u32(&r),
                              (uint8_t)ferry_rng_u32(&r)};
            for (int y = cy - rad; y <= cy + rad; y++)
                for (int x = cx - rad; x <= cx + rad; x++) {
                    if (x < 0 || y < 0 || x >= S || y >= S)
                        continue;
                    if (!rect && (x - cx) * (x - cx) + (y - cy) * (y - cy) > rad * rad)
                        continue;
                    memcpy(px + (y * S + x) * 3, col, 3);
                }
        }
        for (size_t p = 0; p < sizeof px; p++) {
            int v = px[p] + (int)ferry_rng_below(&r, 9) - 4;
            px[p] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
        }
        char path[4096];
        snprintf(path, sizeof path, "%s/%06ld.png", dir, i);
        if (ferry_png_save(path, px, S, S, 3) != FERRY_OK) {
            fprintf(stderr, "ferry bench decode: %s\n", ferry_last_error());
            return 1;
        }
    }
    printf("wrote %ld 256x256 RGB images to %s\n", n, dir);
    return 0;
}

typedef struct bench_state {
    tool_paths *files;
    int gray;
    uint8_t *file, *out;
    size_t file_cap, out_cap;
    ferry_scratch *scratch;
    ferry_image_config cfg;
} bench_state;

/* -1, with ferry_last_error() saying which file and why (libpng's message):
 * the caller prints it, and an empty reason read as "()". */
static long plain_fail(const char *path, const char *why)
{
    ferry_set_error(FERRY_ERR_FORMAT, "%s: %s (plain libpng)", path, why && *why ? why : "failed");
    return -1;
}

/* One pass of the plain libpng loop; returns images decoded (or -1). */
static long pass_plain(bench_state *b)
{
    for (size_t i = 0; i < b->files->n; i++) {
        size_t n;
        const char *path = b->files->v[i];
        if (tool_read_file(path, &b->file, &b->file_cap, &n, 0) != 0)
            return plain_fail(path, strerror(errno));
        png_image img;
        memset(&img, 0, sizeof img);
        img.version = PNG_IMAGE_VERSION;
        if (!png_image_begin_read_from_memory(&img, b->file, n))
            return plain_fail(path, img.message);
        img.format = b->gray ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
        if (PNG_IMAGE_SIZE(img) > b->out_cap) {
            png_image_free(&img);
            return plain_fail(path, "larger than the first image");
        }
        if (!png_image_finish_read(&img, NULL, b->out, 0, NULL))
            return plain_fail(path, img.message);
    }
    return (long)b->files->n;
}

static long pass_ferry(bench_state *b)
{
    for (size_t i = 0; i < b->files->n; i++) {
        size_t n;
        if (tool_read_file(b->files->v[i], &b->file, &b->file_cap, &n, 0) != 0)
            return plain_fail(b->files->v[i], strerror(errno));
        if (ferry_png_decode(b->file, n, &b->cfg, b->scratch, b->files->v[i], b->out,
                             b->out_cap) != FERRY_OK)
            return -1;
    }
    return (long)b->files->n;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: ferry bench decode DIR [--limit N] [--crop N] [--format table|json]\n"
               "       ferry bench decode --generate DIR N\n"
               "  times ferry's PNG decoder beside a plain libpng loop on the .png files under DIR,\n"
               "  or, when its first image is a JPEG, ferry's JPEG decoder beside a plain\n"
               "  libjpeg-turbo loop on its JPEG files; --crop N (JPEG, 1 to 4096) adds\n"
               "  RandomResizedCrop(N) after a full decode and with ferry's crop-and-scale decode\n"
               "  (and that decode without its resize, the entropy decoding through each box\n"
               "  alone, and from them the floor of any crop path and its ratio's ceiling)\n"
               "  (--limit: the first N, 1 to 1000000000); --generate writes N (1 to 10000000)\n"
               "  256x256 RGB test images into DIR\n");
}

#define DECODE "ferry bench decode"

typedef struct decode_args {
    const char *dir, *gen_dir; /* gen_dir: --generate's folder */
    size_t limit, gen_n, crop;
    bool json;
} decode_args;

/* The options into d: 0, CLI_USAGE after saying why, or -1 after --help. */
static int parse_args(int argc, char **argv, decode_args *d)
{
    static const char *const formats[] = {"table", "json", NULL};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        int k = 0, rc = 0;
        if (cli_is_help(a)) {
            usage(stdout);
            return -1;
        }
        if (!strcmp(a, "--generate")) {
            if (i + 2 >= argc) {
                fprintf(stderr, DECODE ": --generate needs a folder and a count\n");
                return CLI_USAGE;
            }
            d->gen_dir = argv[i + 1];
            return cli_size(DECODE, "--generate DIR", argv[i + 2], 1, 10000000, &d->gen_n);
        }
        if (strcmp(a, "--limit") != 0 && strcmp(a, "--format") != 0 && strcmp(a, "--crop") != 0) {
            if (a[0] == '-' || d->dir)
                return cli_unknown(DECODE, a, usage);
            d->dir = a;
            continue;
        }
        if (!(v = cli_value(DECODE, argc, argv, &i)))
            return CLI_USAGE;
        if (!strcmp(a, "--limit"))
            rc = cli_size(DECODE, a, v, 1, 1000000000, &d->limit);
        else if (!strcmp(a, "--crop"))
            rc = cli_size(DECODE, a, v, 1, 4096, &d->crop);
        else if ((rc = cli_choice(DECODE, a, v, formats, &k)) == 0)
            d->json = k == 1;
        if (rc != 0)
            return rc;
    }
    if (!d->dir) {
        usage(stderr);
        return CLI_USAGE;
    }
    return 0;
}

/* Keeps the files of one kind (JPEG: by the name), in order. */
static void keep_kind(tool_paths *files, int jpeg)
{
    size_t k = 0;
    for (size_t i = 0; i < files->n; i++) {
        size_t len = strlen(files->v[i]);
        int is_png = len > 4 && !strcasecmp(files->v[i] + len - 4, ".png");
        if (is_png != jpeg) {
            files->v[k] = files->v[i];
            files->why[k++] = files->why[i];
        } else {
            free(files->v[i]);
            free(files->why[i]);
        }
    }
    files->n = k;
}

int bench_decode(int argc, char **argv)
{
    decode_args d = {0};
    int rc = parse_args(argc, argv, &d);
    if (rc != 0)
        return rc < 0 ? 0 : rc;
    if (d.gen_dir)
        return generate(d.gen_dir, (long)d.gen_n);
    const char *dir = d.dir;
    size_t limit = d.limit;
    tool_paths files = {0};
    if (tool_collect_png(dir, 0, &files) != 0 || files.n == 0) {
        fprintf(stderr, "ferry bench decode: %s: no .png, .jpg or .jpeg files\n", dir);
        tool_paths_free(&files);
        return 1;
    }
    if (limit > 0 && limit < files.n) {
        for (size_t i = limit; i < files.n; i++) { /* tool_paths_free frees only n */
            free(files.v[i]);
            free(files.why[i]);
        }
        files.n = limit;
    }

    bench_state b = {.files = &files, .cfg = ferry_image_config_default()};
    size_t n0 = 0;
    if (tool_read_file(files.v[0], &b.file, &b.file_cap, &n0, 0) != 0) {
        fprintf(stderr, "ferry bench decode: %s: %s\n", files.v[0], strerror(errno));
        return 1;
    }
    if (n0 >= 2 && b.file[0] == 0xff && b.file[1] == 0xd8) {
        free(b.file);
        keep_kind(&files, 1);
        rc = bench_decode_jpeg(dir, &files, d.crop, d.json);
        tool_paths_free(&files);
        return rc;
    }
    ferry_image_info info;
    if (ferry_png_info(b.file, n0, &info) != FERRY_OK) {
        fprintf(stderr, "ferry bench decode: %s: %s\n", files.v[0], ferry_last_error());
        return 1;
    }
    keep_kind(&files, 0); /* the first file is a PNG: it stays first */
    /* Same output for both: 8-bit gray for gray files, else 8-bit RGB, interleaved;
     * each file decoded at its own size. */
    b.gray = info.channels <= 2;
    b.cfg.channels = b.gray ? 1 : 3;
    b.cfg.layout = FERRY_LAYOUT_HWC;
    b.out_cap = (size_t)16384 * 16384 * 3 / 16; /* 48 MiB: any file under 16 Mpixel */
    b.out = malloc(b.out_cap);
    ferry_scratch_create(&b.scratch);
    if (!b.out || !b.scratch) {
        fprintf(stderr, "ferry bench decode: out of memory\n");
        return 1;
    }
    /* Warm the page cache and both decoders, then alternate timed passes and keep
     * the best of each, so drift on a shared machine hits both alike. */
    if (pass_plain(&b) < 0 || pass_ferry(&b) < 0) {
        fprintf(stderr, "ferry bench decode: a file failed to decode (%s); run `ferry check %s`\n",
                ferry_last_error(), dir);
        return 1;
    }
    double best_plain = 1e30, best_ferry = 1e30, budget = tool_now() + 20.0;
    for (int round = 0; round < 5 || (round < 3 && tool_now() < budget); round++) {
        double t0 = tool_now();
        pass_plain(&b);
        double t1 = tool_now();
        pass_ferry(&b);
        double t2 = tool_now();
        if (t1 - t0 < best_plain) best_plain = t1 - t0;
        if (t2 - t1 < best_ferry) best_ferry = t2 - t1;
        if (tool_now() > budget && round >= 2)
            break;
    }
    double ips_plain = (double)files.n / best_plain, ips_ferry = (double)files.n / best_ferry;
    const char *fmt_name = b.gray ? "gray u8" : "rgb u8";
    if (d.json) {
        printf("{\"bench\": \"decode\", \"dir\": \"%s\", \"files\": %zu, \"format\": \"%s\", "
               "\"size\": \"%zux%zu\", \"libpng_simplified_ips\": %.1f, \"ferry_ips\": %.1f, "
               "\"ratio\": %.3f}\n", dir, files.n, fmt_name, info.width, info.height, ips_plain,
               ips_ferry, ips_ferry / ips_plain);
    } else {
        printf("decode %s: %zu files, first %zux%zu, output %s, single thread, best of rounds\n",
               dir, files.n, info.width, info.height, fmt_name);
        printf("  %-28s %12s\n", "decoder", "images/s");
        printf("  %-28s %12.1f\n", "libpng simplified API", ips_plain);
        printf("  %-28s %12.1f\n", "ferry_png_decode", ips_ferry);
        printf("  ratio ferry / libpng: %.3f\n", ips_ferry / ips_plain);
    }
    ferry_scratch_destroy(b.scratch);
    free(b.out);
    free(b.file);
    tool_paths_free(&files);
    return 0;
}

double bench_plain_libpng_rate(const char *dir, size_t max_files)
{
    tool_paths files = {0};
    if (tool_collect_png(dir, 0, &files) != 0 || files.n == 0) {
        tool_paths_free(&files);
        return -1;
    }
    /* An evenly spread subset, so every class folder is in it. */
    size_t n = max_files && max_files < files.n ? max_files : files.n;
    tool_paths sub = files;
    char **keep = malloc(n * sizeof *keep);
    if (!keep) {
        tool_paths_free(&files);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        keep[i] = files.v[i * (files.n / n)];
    sub.v = keep;
    sub.n = n;
    bench_state b = {.files = &sub};
    double rate = -1;
    size_t n0 = 0;
    ferry_image_info info;
    if (tool_read_file(keep[0], &b.file, &b.file_cap, &n0, 0) == 0 &&
        ferry_png_info(b.file, n0, &info) == FERRY_OK) {
        b.gray = info.channels <= 2;
        b.out_cap = info.width * info.height * 3;
        b.out = malloc(b.out_cap);
        double best = 1e30;
        if (b.out && pass_plain(&b) >= 0) {
            for (int round = 0; round < 3; round++) {
                double t0 = tool_now();
                pass_plain(&b);
                double t = tool_now() - t0;
                best = t < best ? t : best;
            }
            rate = (double)n / best;
        }
    }
    free(b.out);
    free(b.file);
    free(keep);
    tool_paths_free(&files);
    return rate;
}

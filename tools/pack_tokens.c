/* `ferry pack --tokens SRC... OUT`: text files into llm.c token shards with a
 * byte-level tokenizer (tokens 0-255 are the bytes, 256 is end-of-text and
 * starts every document, as llm.c's shards do), uint16 (magic 20240520,
 * version 1), OUT/tokens_000000.bin, ... A document is a file, or with
 * --split LINE each part between lines equal to LINE (fortune files: %). A
 * document is never split across shards unless it alone is larger than one.
 * With --from-tokens the sources are token files (any format ferry reads):
 * re-sharded, widths kept (uint32 as magic 20240801, version 7). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli_args.h"
#include "commands.h"
#include "common/error.h" /* ferry_host_free: the paths are the library's */
#include "dataset/shards/shards.h"
#include "dataset/tokens/tokens.h"
#include "ferry.h"
#include "files.h"

#define PROG "ferry pack --tokens"
#define EOT 256
#define MAX_SHARD_TOKENS ((size_t)INT32_MAX) /* llm.c's count is an int32 */

typedef struct tok_opts {
    const char **src;
    size_t nsrc;
    const char *out, *split;
    size_t shard_tokens;
    bool from_tokens;
    ferry_token_format format;
    size_t raw_bytes;
} tok_opts;

typedef struct writer {
    const tok_opts *o;
    FILE *f;
    char path[4096];
    size_t width, in_shard, shards;
    uint64_t total, docs;
} writer;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ferry pack --tokens TEXT... OUT [--split LINE] [--shard-tokens N]\n"
            "       ferry pack --tokens --from-tokens SHARDS... OUT [--format raw16|raw32]\n"
            "writes llm.c token shards OUT/tokens_000000.bin, ...: from text files (a file,\n"
            "or a folder's files, sorted) with a byte-level tokenizer (each byte one token,\n"
            "256 = end-of-text at the start of every document; uint16), or (--from-tokens)\n"
            "from token files (llm.c shards, .npy, headerless with --format) re-sharded.\n"
            "  --split LINE:       a line equal to LINE ends a document (fortune files: %%);\n"
            "                      default: one document a file\n"
            "  --shard-tokens N:   tokens per shard, at most; default 100000000 (llm.c's)\n"
            "Read them with ferry_tokens_open; check them with `ferry check OUT`.\n");
}

static int parse(int argc, char **argv, tok_opts *o)
{
    static const char *const valued[] = {"--split", "--shard-tokens", "--format", NULL};
    *o = (tok_opts){.shard_tokens = 100000000};
    o->src = calloc((size_t)argc, sizeof *o->src);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cli_is_help(a)) {
            usage(stdout);
            return -1;
        }
        if (!strcmp(a, "--tokens"))
            continue;
        if (!strcmp(a, "--from-tokens")) {
            o->from_tokens = true;
            continue;
        }
        if (cli_in(a, valued)) {
            const char *v = cli_value(PROG, argc, argv, &i);
            if (!v)
                return CLI_USAGE;
            if (!strcmp(a, "--split"))
                o->split = v;
            else if (!strcmp(a, "--shard-tokens")) {
                if (cli_size(PROG, a, v, 1, MAX_SHARD_TOKENS, &o->shard_tokens))
                    return CLI_USAGE;
            } else if (!strcmp(v, "raw16") || !strcmp(v, "raw32")) {
                o->format = FERRY_TOKENS_RAW;
                o->raw_bytes = v[3] == '1' ? 2 : 4;
            } else {
                return cli_bad_value(PROG, a, v, "raw16 or raw32");
            }
            continue;
        }
        if (a[0] == '-' && a[1])
            return cli_unknown(PROG, a, usage);
        o->src[o->nsrc++] = a;
    }
    if (o->nsrc < 2) {
        usage(stderr);
        return CLI_USAGE;
    }
    o->out = o->src[--o->nsrc];
    return 0;
}

static int finish_shard(writer *w)
{
    if (!w->f)
        return 0;
    int32_t h[256] = {w->width == 2 ? FERRY_TOKENS_LLMC_MAGIC_U16 : FERRY_TOKENS_LLMC_MAGIC_U32,
                      w->width == 2 ? 1 : 7, (int32_t)w->in_shard};
    int bad = fseek(w->f, 0, SEEK_SET) != 0 || fwrite(h, sizeof h, 1, w->f) != 1;
    bad |= fclose(w->f) != 0;
    w->f = NULL;
    if (bad) {
        fprintf(stderr, PROG ": %s: %s\n", w->path, strerror(errno));
        return 1;
    }
    w->shards++;
    return 0;
}

static int new_shard(writer *w)
{
    if (finish_shard(w))
        return 1;
    snprintf(w->path, sizeof w->path, "%s/tokens_%06zu.bin", w->o->out, w->shards);
    w->f = fopen(w->path, "wbx");
    int32_t zero[256] = {0};
    if (!w->f || fwrite(zero, sizeof zero, 1, w->f) != 1) {
        fprintf(stderr, PROG ": %s: %s\n", w->path, strerror(errno));
        return 1;
    }
    w->in_shard = 0;
    return 0;
}

/* n tokens of w->width bytes each; a new shard first when they do not fit
 * (and the shard holds something), and across shards when larger than one. */
static int put(writer *w, const uint8_t *toks, size_t n, bool keep_whole)
{
    if (keep_whole && w->f && n > w->o->shard_tokens - w->in_shard && w->in_shard &&
        new_shard(w))
        return 1;
    while (n) {
        if ((!w->f || w->in_shard == w->o->shard_tokens) && new_shard(w))
            return 1;
        size_t m = w->o->shard_tokens - w->in_shard < n ? w->o->shard_tokens - w->in_shard : n;
        if (fwrite(toks, w->width, m, w->f) != m) {
            fprintf(stderr, PROG ": %s: %s\n", w->path, strerror(errno));
            return 1;
        }
        toks += m * w->width;
        n -= m;
        w->in_shard += m;
        w->total += m;
    }
    return 0;
}

/* One document: EOT, then its bytes as tokens. */
static int put_doc(writer *w, const uint8_t *d, size_t n, uint16_t **buf, size_t *cap)
{
    if (!*buf || n + 1 > *cap) {
        uint16_t *b = realloc(*buf, (n + 1) * sizeof *b);
        if (!b) {
            fprintf(stderr, PROG ": out of memory\n");
            return 1;
        }
        *buf = b;
        *cap = n + 1;
    }
    (*buf)[0] = EOT;
    for (size_t i = 0; i < n; i++)
        (*buf)[i + 1] = d[i];
    w->docs++;
    return put(w, (const uint8_t *)*buf, n + 1, true);
}

/* The text's documents: all of it, or the parts between --split lines. */
static int put_text(writer *w, const uint8_t *d, size_t n, uint16_t **buf, size_t *cap)
{
    if (!w->o->split)
        return n ? put_doc(w, d, n, buf, cap) : 0;
    size_t sl = strlen(w->o->split), start = 0;
    for (size_t at = 0; at <= n;) {
        const uint8_t *nl = at < n ? memchr(d + at, '\n', n - at) : NULL;
        size_t end = nl ? (size_t)(nl - d) : n;
        bool sep = end - at == sl && !memcmp(d + at, w->o->split, sl);
        if (sep || end == n) {
            size_t stop = sep ? at : n;
            if (stop > start && put_doc(w, d + start, stop - start, buf, cap))
                return 1;
            start = end + 1;
        }
        at = end + 1;
    }
    return 0;
}

static int pack_text_file(writer *w, const char *path, uint16_t **buf, size_t *cap)
{
    uint8_t *d = NULL;
    size_t dcap = 0, n = 0;
    int r = tool_read_file(path, &d, &dcap, &n, (size_t)1 << 31);
    if (r != 0) {
        fprintf(stderr, PROG ": %s: %s\n", path, r == -2 ? "over 2 GiB" : r == -3 ?
                "not a regular file" : strerror(errno));
        free(d);
        return 1;
    }
    r = put_text(w, d, n, buf, cap);
    free(d);
    return r;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A file, or a folder's regular files (not hidden), sorted. */
static int pack_text_path(writer *w, const char *path, uint16_t **buf, size_t *cap)
{
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return pack_text_file(w, path, buf, cap);
    tool_paths files = {0};
    DIR *dir = opendir(path);
    struct dirent *e;
    char p[4096];
    while (dir && (e = readdir(dir)) != NULL) {
        snprintf(p, sizeof p, "%s/%s", path, e->d_name);
        if (e->d_name[0] != '.' && stat(p, &sb) == 0 && S_ISREG(sb.st_mode) &&
            tool_paths_push(&files, p, NULL) != 0)
            break;
    }
    if (dir)
        closedir(dir);
    if (files.n)
        qsort(files.v, files.n, sizeof *files.v, cmp_str);
    int rc = 0;
    for (size_t i = 0; i < files.n && rc == 0; i++)
        rc = pack_text_file(w, files.v[i], buf, cap);
    tool_paths_free(&files);
    return rc;
}

/* Token files re-sharded: read through a token dataset, one window of the
 * whole file at a time (T = the file's count - 1 gives one window). */
static int pack_token_file(writer *w, const char *path)
{
    uint64_t count = 0;
    size_t width = 0;
    if (ferry_tokens_probe(path, w->o->format, w->o->raw_bytes, &count, &width) != FERRY_OK) {
        fprintf(stderr, PROG ": %s\n", ferry_last_error());
        return 1;
    }
    if (w->width && width != w->width) {
        fprintf(stderr, PROG ": %s: %zu-byte tokens after %zu-byte ones\n", path, width, w->width);
        return 1;
    }
    w->width = width;
    FILE *f = fopen(path, "rb");
    long skip = 0;
    struct stat sb;
    if (f && fstat(fileno(f), &sb) == 0)
        skip = (long)((uint64_t)sb.st_size - count * width); /* every format's tokens end it */
    uint8_t *buf = malloc((size_t)1 << 20);
    int rc = !f || !buf || fseek(f, skip, SEEK_SET) != 0;
    for (uint64_t left = count; !rc && left;) {
        size_t m = left < ((size_t)1 << 20) / width ? (size_t)left : ((size_t)1 << 20) / width;
        rc = fread(buf, width, m, f) != m || put(w, buf, m, false);
        left -= m;
    }
    if (rc && f)
        fprintf(stderr, PROG ": %s: reading its tokens failed\n", path);
    free(buf);
    if (f)
        fclose(f);
    return rc;
}

/* Each token file a source names (a file, a folder of .bin/.npy, a list file). */
static int pack_token_path(writer *w, const char *path)
{
    static const ferry_path_kind kind = {ferry__tok_is_token_path, "token files (.bin, .npy)"};
    char **files = NULL;
    size_t n = 0;
    if (ferry__paths_of_kind(&path, 1, &kind, &files, &n) != FERRY_OK) {
        fprintf(stderr, PROG ": %s\n", ferry_last_error());
        return 1;
    }
    int rc = 0;
    for (size_t k = 0; k < n; k++) {
        if (rc == 0)
            rc = pack_token_file(w, files[k]);
        ferry_host_free(files[k]);
    }
    ferry_host_free(files);
    return rc;
}

int pack_tokens(int argc, char **argv)
{
    tok_opts o;
    int rc = parse(argc, argv, &o);
    if (rc != 0) {
        free(o.src);
        return rc < 0 ? 0 : rc;
    }
    if (tool_mkdirs(o.out) != 0) {
        fprintf(stderr, PROG ": %s: %s\n", o.out, strerror(errno));
        free(o.src);
        return 1;
    }
    writer w = {.o = &o, .width = o.from_tokens ? 0 : 2};
    uint16_t *buf = NULL;
    size_t cap = 0;
    for (size_t i = 0; i < o.nsrc && rc == 0; i++)
        rc = o.from_tokens ? pack_token_path(&w, o.src[i]) : pack_text_path(&w, o.src[i], &buf, &cap);
    if (finish_shard(&w))
        rc = 1;
    free(buf);
    free(o.src);
    if (rc == 0)
        printf("%s: %llu tokens in %zu shard(s) of %zu-byte tokens (%llu documents)\n", o.out,
               (unsigned long long)w.total, w.shards, w.width, (unsigned long long)w.docs);
    return rc;
}

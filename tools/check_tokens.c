/* `ferry check --tokens PATH...` (or paths ending in .bin or .npy): every
 * token file's header checked as ferry_tokens_open checks it (llm.c's magic,
 * version and count against the file's size; .npy's header), one line per
 * file: its count and width, or what is wrong; with --vocab V every token is
 * read and one at or over V is reported with its place. Exit 1 if any is bad. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli_args.h"
#include "commands.h"
#include "common/error.h" /* ferry_host_free: the paths are the library's */
#include "dataset/shards/shards.h"
#include "dataset/tokens/tokens.h"
#include "ferry.h"

#define PROG "ferry check --tokens"

static void usage(FILE *f)
{
    fprintf(f, "usage: ferry check --tokens [--vocab V] [--format raw16|raw32] PATH...\n"
               "checks token files (llm.c shards, .npy, headerless with --format): a file, a\n"
               "folder of .bin/.npy files, a list file; prints each file's count and token\n"
               "width or what is wrong, and exits 1 if any is bad.\n"
               "  --vocab V: also read every token; one >= V is an error (GPT-2: 50257)\n");
}

/* The first token >= vocab, reading the file in chunks. */
static int check_vocab(const char *path, ferry_token_format fmt, size_t raw, uint64_t vocab)
{
    ferry_tokens_config c = {.format = fmt, .raw_token_bytes = raw};
    ferry_tok_source s;
    if (ferry__tok_source_open(&path, 1, &c, &s) != FERRY_OK) {
        printf("%s\n", ferry_last_error());
        return 1;
    }
    const size_t chunk = (size_t)1 << 18;
    size_t w = s.token_bytes;
    uint8_t *buf = malloc(chunk * w);
    int bad = !buf;
    for (uint64_t at = 0, count = s.shards[0].h.count; at < count && !bad;) {
        size_t m = count - at < chunk ? (size_t)(count - at) : chunk;
        if (ferry__tok_read(&s, 0, at, m, buf) != FERRY_OK) {
            printf("%s\n", ferry_last_error());
            bad = 1;
        }
        for (size_t j = 0; j < m && !bad; j++) {
            uint32_t v = 0;
            memcpy(&v, buf + j * w, w); /* little-endian host, as the tools assume */
            if (v >= vocab) {
                printf("%s: token %llu is %u, not below the vocabulary's %llu\n", path,
                       (unsigned long long)at + j, v, (unsigned long long)vocab);
                bad = 1;
            }
        }
        at += m;
    }
    free(buf);
    ferry__tok_source_close(&s);
    return bad;
}

static int check_one(const char *path, ferry_token_format fmt, size_t raw, uint64_t vocab)
{
    uint64_t count = 0;
    size_t width = 0;
    if (ferry_tokens_probe(path, fmt, raw, &count, &width) != FERRY_OK) {
        printf("%s\n", ferry_last_error());
        return 1;
    }
    if (vocab && check_vocab(path, fmt, raw, vocab))
        return 1;
    printf("%s: %llu tokens of %zu bytes\n", path, (unsigned long long)count, width);
    return 0;
}

int check_tokens(int argc, char **argv)
{
    uint64_t vocab = 0;
    ferry_token_format fmt = FERRY_TOKENS_AUTO;
    size_t raw = 0, bad = 0, nfiles = 0;
    const char **paths = calloc((size_t)argc, sizeof *paths);
    size_t np = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (cli_is_help(a)) {
            usage(stdout);
            free(paths);
            return 0;
        } else if (!strcmp(a, "--tokens")) {
            continue;
        } else if (!strcmp(a, "--vocab") || !strcmp(a, "--format")) {
            if (!(v = cli_value(PROG, argc, argv, &i))) {
                free(paths);
                return CLI_USAGE;
            }
            if (!strcmp(a, "--vocab") ? cli_u64(PROG, a, v, &vocab) != 0
                : strcmp(v, "raw16") != 0 && strcmp(v, "raw32") != 0) {
                free(paths);
                return a[2] == 'v' ? CLI_USAGE : cli_bad_value(PROG, a, v, "raw16 or raw32");
            }
            if (a[2] == 'f') {
                fmt = FERRY_TOKENS_RAW;
                raw = v[3] == '1' ? 2 : 4;
            }
        } else if (a[0] == '-' && a[1]) {
            free(paths);
            return cli_unknown(PROG, a, usage);
        } else {
            paths[np++] = a;
        }
    }
    static const ferry_path_kind kind = {ferry__tok_is_token_path, "token files (.bin, .npy)"};
    for (size_t i = 0; i < np; i++) {
        char **files = NULL;
        size_t n = 0;
        if (ferry__paths_of_kind(&paths[i], 1, &kind, &files, &n) != FERRY_OK) {
            printf("%s\n", ferry_last_error());
            bad++;
            continue;
        }
        for (size_t k = 0; k < n; k++) {
            bad += (size_t)check_one(files[k], fmt, raw, vocab);
            ferry_host_free(files[k]);
        }
        nfiles += n;
        ferry_host_free(files);
    }
    free(paths);
    if (!np) {
        usage(stderr);
        return CLI_USAGE;
    }
    printf("%zu token files, %zu ok, %zu bad\n", nfiles, nfiles - bad, bad);
    return bad ? 1 : 0;
}

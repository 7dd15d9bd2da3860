/* What a reader needs to read shards that `ferry pack --upload` put at a base
 * URL: a list file, one shard URL a line (OUT/urls.txt, also uploaded as
 * URL/urls.txt), and the brace pattern naming them all
 * (URL/shard-{000000..000041}.tar). A URL of the folder cannot be read: HTTP
 * lists no files. Header-only, so that tests/test_shard_urls.c checks what
 * pack writes against the library's reader. */
#ifndef FERRY_TOOLS_URL_LIST_H
#define FERRY_TOOLS_URL_LIST_H

#include <stdio.h>
#include <string.h>

/* The base URL without its trailing slashes: its first *bn characters. */
static inline size_t url_list_base_len(const char *base)
{
    size_t bn = strlen(base);
    while (bn > 0 && base[bn - 1] == '/')
        bn--;
    return bn;
}

/* The brace pattern of shards 0 to n - 1 under base (n >= 1) into out: 0, or
 * -1 when it does not fit. The names are shard-%06zu.tar, so the range's ends
 * keep six digits up to 999999 shards. */
static inline int url_list_pattern(char *out, size_t cap, const char *base, size_t n)
{
    int bn = (int)url_list_base_len(base), w;
    if (n <= 1)
        w = snprintf(out, cap, "%.*s/shard-000000.tar", bn, base);
    else
        w = snprintf(out, cap, "%.*s/shard-{000000..%06zu}.tar", bn, base, n - 1);
    return w > 0 && (size_t)w < cap && n <= 1000000 ? 0 : -1;
}

/* Writes the list file path: a comment line, then base/shard-%06zu.tar for
 * shards 0 to n - 1, one a line. 0, or -1 (errno set). */
static inline int url_list_write(const char *path, const char *base, size_t n)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    int bn = (int)url_list_base_len(base);
    fprintf(f, "# the shards ferry pack uploaded: pass this file as the dataset's path\n");
    for (size_t k = 0; k < n; k++)
        fprintf(f, "%.*s/shard-%06zu.tar\n", bn, base, k);
    return fclose(f) == 0 ? 0 : -1;
}

#endif

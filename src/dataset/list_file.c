/* List files: one "path,label" or "path<TAB>label" per line, paths relative to the
 * list's folder, '#' comments and blank lines allowed. Errors name the line. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "dataset/internal.h"

static char *path_join(const char *dir, size_t dn, const char *rel)
{
    size_t rn = strlen(rel);
    if (rel[0] == '/' || dn == 0)
        return ferry_host_strdup(rel);
    char *p = ferry_host_malloc(dn + 1 + rn + 1);
    if (!p)
        return NULL;
    memcpy(p, dir, dn);
    p[dn] = '/';
    memcpy(p + dn + 1, rel, rn + 1);
    return p;
}

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

ferry_status ferry_dataset_list_file(const char *list_path, const ferry_image_config *cfg,
                                     ferry_dataset **out)
{
    if (!list_path || !out)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "ferry_dataset_list_file: NULL argument");
    ferry_image_config c;
    ferry_status st = ferry__image_config_check(cfg, &c);
    if (st != FERRY_OK)
        return st;
    /* The whole list in memory (a scratch buffer), parsed in place. */
    ferry_scratch *buf = NULL;
    size_t total = 0;
    if ((st = ferry_scratch_create(&buf)) != FERRY_OK)
        return st;
    if ((st = ferry__scratch_read_file(buf, list_path, 0, &total)) != FERRY_OK) {
        ferry_scratch_destroy(buf);
        return st;
    }
    char *text = (char *)buf->file, *text_end = text + total;
    *text_end = '\0';
    const char *slash = strrchr(list_path, '/');
    size_t dn = slash ? (size_t)(slash - list_path) : 0;
    if (slash && dn == 0)
        dn = 1; /* a list in "/" */

    char **paths = NULL;
    int64_t *labels = NULL;
    size_t n = 0, cap = 0, lineno = 0, classes = 0;
    char *next = text;
    while (st == FERRY_OK && next < text_end) {
        char *line = next, *nl = memchr(line, '\n', (size_t)(text_end - line));
        char *e = nl ? nl : text_end;
        next = nl ? nl + 1 : text_end;
        *e = '\0';
        lineno++;
        if (memchr(line, '\0', (size_t)(e - line))) {
            st = ferry_fail(FERRY_ERR_FORMAT, "%s:%zu: NUL byte in line", list_path, lineno);
            break;
        }
        char *s = line;
        while (s < e && is_space(*s))
            s++;
        while (e > s && is_space(e[-1]))
            e--;
        *e = '\0';
        if (s == e || *s == '#')
            continue;
        /* The last separator splits, so paths may contain commas. */
        char *sep = strrchr(s, '\t');
        char *comma = strrchr(s, ',');
        if (!sep || (comma && comma > sep))
            sep = comma;
        if (!sep) {
            st = ferry_fail(FERRY_ERR_FORMAT, "%s:%zu: expected \"path,label\", got \"%s\"",
                            list_path, lineno, s);
            break;
        }
        char *pe = sep, *lab = sep + 1;
        while (pe > s && is_space(pe[-1]))
            pe--;
        *pe = '\0';
        while (*lab && is_space(*lab))
            lab++;
        if (!*s) {
            st = ferry_fail(FERRY_ERR_FORMAT, "%s:%zu: empty path", list_path, lineno);
            break;
        }
        char *end;
        errno = 0;
        long long v = strtoll(lab, &end, 10);
        if (!*lab || *end || errno || v < 0 || v > INT32_MAX) {
            st = ferry_fail(FERRY_ERR_FORMAT, "%s:%zu: label \"%s\" is not a non-negative integer",
                            list_path, lineno, lab);
            break;
        }
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 256;
            char **p2 = ferry_host_realloc(paths, nc * sizeof *p2);
            if (!p2) {
                st = FERRY_ERR_NO_MEMORY;
                break;
            }
            paths = p2;
            int64_t *l2 = ferry_host_realloc(labels, nc * sizeof *l2);
            if (!l2) {
                st = FERRY_ERR_NO_MEMORY;
                break;
            }
            labels = l2;
            cap = nc;
        }
        if (!(paths[n] = path_join(list_path, dn, s))) {
            st = FERRY_ERR_NO_MEMORY;
            break;
        }
        labels[n++] = v;
        if ((size_t)v + 1 > classes)
            classes = (size_t)v + 1;
    }
    ferry_scratch_destroy(buf);
    if (st == FERRY_OK && n == 0)
        st = ferry_fail(FERRY_ERR_INVALID_ARG, "%s: the list has no entries", list_path);
    if (st != FERRY_OK) {
        for (size_t i = 0; i < n; i++)
            ferry_host_free(paths[i]);
        ferry_host_free(paths);
        ferry_host_free(labels);
        return st;
    }
    return ferry__image_files_create(paths, labels, n, NULL, classes, &c, out);
}

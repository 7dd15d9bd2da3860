/* List files: one "path,label" or "path<TAB>label" per line, paths relative to the
 * list's folder, '#' comments and blank lines allowed. Errors name the line. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "dataset/files/internal.h"
#include "dataset/image/image.h"

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

/* The entries read so far: paths (owned) and labels, grown together. */
typedef struct entries {
    char **paths;
    int64_t *labels;
    size_t n, cap;
} entries;

static void entries_free(entries *en)
{
    for (size_t i = 0; i < en->n; i++)
        ferry_host_free(en->paths[i]);
    ferry_host_free(en->paths);
    ferry_host_free(en->labels);
}

/* Appends dir/rel with its label. */
static ferry_status entries_add(entries *en, const char *dir, size_t dn, const char *rel,
                                int64_t label)
{
    if (en->n == en->cap) {
        size_t nc = en->cap ? en->cap * 2 : 256;
        char **p2 = ferry_host_realloc(en->paths, nc * sizeof *p2);
        if (!p2)
            return FERRY_ERR_NO_MEMORY;
        en->paths = p2;
        int64_t *l2 = ferry_host_realloc(en->labels, nc * sizeof *l2);
        if (!l2)
            return FERRY_ERR_NO_MEMORY;
        en->labels = l2;
        en->cap = nc;
    }
    if (!(en->paths[en->n] = path_join(dir, dn, rel)))
        return FERRY_ERR_NO_MEMORY;
    en->labels[en->n++] = label;
    return FERRY_OK;
}

/* Strips the white space around [s, e) in place; returns the new start. */
static char *trim(char *s, char *e)
{
    while (s < e && is_space(*s))
        s++;
    while (e > s && is_space(e[-1]))
        e--;
    *e = '\0';
    return s;
}

/* Splits the non-empty line s in place into its path (s, NUL-terminated) and
 * *label. The last separator splits, so paths may contain commas. */
static ferry_status parse_entry(const char *list_path, size_t lineno, char *s, int64_t *label)
{
    char *sep = strrchr(s, '\t');
    char *comma = strrchr(s, ',');
    if (!sep || (comma && comma > sep))
        sep = comma;
    if (!sep)
        return ferry_fail(FERRY_ERR_FORMAT, "%s:%zu: expected \"path,label\", got \"%s\"",
                          list_path, lineno, s);
    char *pe = sep, *lab = sep + 1;
    while (pe > s && is_space(pe[-1]))
        pe--;
    *pe = '\0';
    while (*lab && is_space(*lab))
        lab++;
    if (!*s)
        return ferry_fail(FERRY_ERR_FORMAT, "%s:%zu: empty path", list_path, lineno);
    char *end;
    errno = 0;
    long long v = strtoll(lab, &end, 10);
    if (!*lab || *end || errno || v < 0 || v > INT32_MAX)
        return ferry_fail(FERRY_ERR_FORMAT, "%s:%zu: label \"%s\" is not a non-negative integer",
                          list_path, lineno, lab);
    *label = v;
    return FERRY_OK;
}

ferry_status ferry_dataset_list_file(const char *list_path, const ferry_image_config *cfg,
                                     ferry_dataset **out)
{
    if (!list_path || !out)
        return FERRY_ARG_ERROR("NULL argument");
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

    entries en = {0};
    size_t lineno = 0, classes = 0;
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
        char *s = trim(line, e);
        if (!*s || *s == '#')
            continue;
        int64_t label = 0;
        if ((st = parse_entry(list_path, lineno, s, &label)) != FERRY_OK ||
            (st = entries_add(&en, list_path, dn, s, label)) != FERRY_OK)
            break;
        if ((size_t)label + 1 > classes)
            classes = (size_t)label + 1;
    }
    ferry_scratch_destroy(buf);
    if (st == FERRY_OK && en.n == 0)
        st = ferry_fail_at(FERRY_ERR_INVALID_ARG, list_path, "the list has no entries");
    if (st != FERRY_OK) {
        entries_free(&en);
        return st;
    }
    /* The entries are not checked here: a list may name millions of files on
     * network storage, and one stat each would cost more than the listing it
     * replaces. One that cannot be read fails by name when its sample is loaded. */
    return ferry__image_files_create(en.paths, en.labels, en.n, NULL, classes, &c, list_path, 0,
                                     NULL, out);
}

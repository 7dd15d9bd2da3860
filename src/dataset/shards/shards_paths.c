/* Which files are the shards: the user names .tar files, folders of them, or
 * list files, in any mix, and URLs of shards; any of these names (and a list
 * file's lines) may use WebDataset's brace notation (shards_braces.c); the
 * result is the ordered list of shard paths. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "common/dir.h"
#include "common/error.h"
#include "dataset/core/internal.h"
#include "dataset/remote/remote.h"
#include "dataset/shards/shards.h"

/* dir "/" name; dir of length dn (a prefix of a longer string is fine). */
static char *join(const char *dir, size_t dn, const char *name, size_t nn)
{
    int slash = dn && dir[dn - 1] != '/';
    char *p = ferry_host_malloc(dn + slash + nn + 1);
    if (!p)
        return NULL;
    memcpy(p, dir, dn);
    if (slash)
        p[dn] = '/';
    memcpy(p + dn + slash, name, nn);
    p[dn + slash + nn] = '\0';
    return p;
}

static bool ends_with(const char *s, size_t n, const char *tail)
{
    size_t t = strlen(tail);
    return n > t && !strcasecmp(s + n - t, tail);
}

bool ferry_dataset_is_shard_path(const char *path)
{
    size_t n = path ? strlen(path) : 0;
    return path && (ends_with(path, n, ".tar") || ends_with(path, n, ".tar.gz") ||
                    ends_with(path, n, ".tgz"));
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The folder's shards (*.tar, *.tar.gz, *.tgz; hidden ones left out), sorted
 * bytewise. */
static ferry_status add_folder(const char *dir, const ferry_path_kind *kind, ferry_str_list *l)
{
    DIR *d = opendir(dir);
    if (!d)
        return ferry_fail_at(FERRY_ERR_IO, dir, "%s", strerror(errno));
    size_t first = l->n;
    ferry_status st = FERRY_OK;
    struct dirent *e;
    int err = 0;
    while (st == FERRY_OK && (e = ferry_dir_next(d, &err)) != NULL)
        if (e->d_name[0] != '.' && kind->match(e->d_name))
            st = ferry__str_list_push(l, join(dir, strlen(dir), e->d_name, strlen(e->d_name)));
    closedir(d);
    if (st == FERRY_OK && err)
        st = ferry_fail_at(FERRY_ERR_IO, dir, "reading the folder: %s", strerror(err));
    if (st != FERRY_OK)
        return st;
    if (l->n == first)
        return ferry_fail_at(FERRY_ERR_INVALID_ARG, dir, "no %s in the folder", kind->none);
    qsort(l->v + first, l->n - first, sizeof *l->v, cmp_str);
    return FERRY_OK;
}

static bool is_url_line(const char *line, size_t len)
{
    char head[9] = "";
    memcpy(head, line, len < 8 ? len : 8);
    return ferry__is_url(head);
}

/* A list file's line: an absolute path or a URL as it is; a relative path
 * from the list's folder (its first dn characters). */
static ferry_status add_list_line(const char *path, size_t dn, const char *line, size_t len,
                                  ferry_str_list *l)
{
    if (is_url_line(line, len) && line[len - 1] == '/') {
        char url[2048];
        snprintf(url, sizeof url, "%.*s", (int)(len < 2000 ? len : 2000), line);
        ferry_status st = ferry__url_folder_error(url);
        return ferry_fail_at(st, path, "%s", ferry_last_error());
    }
    return ferry__str_list_push(l, line[0] == '/' || is_url_line(line, len) ?
                                   join("", 0, line, len) : join(path, dn, line, len));
}

/* A line in brace notation: each name it gives, as a line of its own. */
static ferry_status add_list_pattern(const char *path, size_t dn, const char *line, size_t len,
                                     ferry_str_list *l)
{
    ferry_str_list names = {0};
    ferry_status st = ferry__brace_expand(line, len, &names);
    if (st != FERRY_OK)
        st = ferry_fail_at(st, path, "%s", ferry_last_error());
    for (size_t i = 0; st == FERRY_OK && i < names.n; i++)
        st = add_list_line(path, dn, names.v[i], strlen(names.v[i]), l);
    ferry__str_list_free(&names);
    return st;
}

/* One shard path a line, relative to the list file's folder; blank lines and
 * '#' comments skipped. */
static ferry_status add_list_file(const char *path, ferry_str_list *l)
{
    ferry_scratch *s = NULL;
    size_t n = 0, first = l->n;
    ferry_status st = ferry_scratch_create(&s);
    if (st == FERRY_OK)
        st = ferry__scratch_read_file(s, path, (size_t)64 << 20, &n);
    const char *slash = strrchr(path, '/');
    size_t dn = slash ? (size_t)(slash - path) + 1 : 0;
    for (size_t at = 0; st == FERRY_OK && at < n;) {
        const char *line = (const char *)s->file + at;
        const char *nl = memchr(line, '\n', n - at);
        size_t len = nl ? (size_t)(nl - line) : n - at;
        at += len + 1;
        while (len && (line[len - 1] == '\r' || line[len - 1] == ' ' || line[len - 1] == '\t'))
            len--;
        while (len && (line[0] == ' ' || line[0] == '\t')) {
            line++;
            len--;
        }
        if (!len || line[0] == '#')
            continue;
        if (memchr(line, '\0', len))
            st = ferry_fail_at(FERRY_ERR_FORMAT, path, "a line holds a NUL byte (not a list of "
                               "shard paths)");
        else if (ferry__has_braces(line, len))
            st = add_list_pattern(path, dn, line, len, l);
        else
            st = add_list_line(path, dn, line, len, l);
    }
    ferry_scratch_destroy(s);
    if (st == FERRY_OK && l->n == first)
        st = ferry_fail_at(FERRY_ERR_INVALID_ARG, path, "the list file names no shards");
    return st;
}

ferry_status ferry__url_folder_error(const char *url)
{
    return ferry_fail(FERRY_ERR_INVALID_ARG, "%s: a folder by URL cannot be read (HTTP gives no "
                      "list of its files): name the shards instead, in brace notation "
                      "(%sshard-{000000..000099}.tar), in a list file with one shard URL a line "
                      "(ferry pack --upload writes OUT/urls.txt), or one by one", url, url);
}

static ferry_status add_one(const char *p, const ferry_path_kind *kind, ferry_str_list *l);

/* p, or the names its braces give (a local file whose name holds braces is
 * taken as it is). */
static ferry_status add_path(const char *p, const ferry_path_kind *kind, ferry_str_list *l)
{
    struct stat sb;
    if (!ferry__has_braces(p, strlen(p)) || (!ferry__is_url(p) && stat(p, &sb) == 0))
        return add_one(p, kind, l);
    ferry_str_list names = {0};
    ferry_status st = ferry__brace_expand(p, strlen(p), &names);
    for (size_t i = 0; st == FERRY_OK && i < names.n; i++)
        st = add_one(names.v[i], kind, l);
    ferry__str_list_free(&names);
    return st;
}

static ferry_status add_one(const char *p, const ferry_path_kind *kind, ferry_str_list *l)
{
    size_t pn = strlen(p);
    if (ferry__is_url(p) && pn && p[pn - 1] == '/')
        return ferry__url_folder_error(p);
    if (ferry__is_url(p)) /* a remote shard: its cache asks the server about it */
        return ferry__str_list_push(l, ferry_host_strdup(p));
    struct stat sb;
    if (stat(p, &sb) != 0)
        return ferry_fail_at(errno == ENOENT || errno == ENOTDIR ? FERRY_ERR_INVALID_ARG : FERRY_ERR_IO, p,
                             "%s", strerror(errno));
    if (S_ISDIR(sb.st_mode))
        return add_folder(p, kind, l);
    if (kind->match(p))
        return ferry__str_list_push(l, ferry_host_strdup(p));
    if (S_ISREG(sb.st_mode))
        return add_list_file(p, l);
    return ferry_fail_at(FERRY_ERR_INVALID_ARG, p, "%s", ferry__not_regular_reason(sb.st_mode));
}

ferry_status ferry__shard_paths(const char *const *paths, size_t n, char ***out, size_t *nout)
{
    static const ferry_path_kind tar = {ferry_dataset_is_shard_path,
                                        "shards (.tar, .tar.gz or .tgz files)"};
    return ferry__paths_of_kind(paths, n, &tar, out, nout);
}

ferry_status ferry__paths_of_kind(const char *const *paths, size_t n, const ferry_path_kind *kind,
                                  char ***out, size_t *nout)
{
    ferry_str_list l = {0};
    ferry_status st = FERRY_OK;
    for (size_t i = 0; i < n && st == FERRY_OK; i++)
        st = paths[i] ? add_path(paths[i], kind, &l)
                      : ferry_fail(FERRY_ERR_INVALID_ARG, "paths[%zu] is NULL", i);
    if (st != FERRY_OK) {
        ferry__str_list_free(&l);
        return st;
    }
    *out = l.v;
    *nout = l.n;
    return FERRY_OK;
}

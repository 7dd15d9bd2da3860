/* ROOT/<class>/<file>.png: the folder walk. Classes and files are sorted bytewise
 * so the same tree gives the same indices everywhere; hidden entries and files
 * not ending in .png are ignored. Every other .png entry is a sample, even one
 * that cannot be read: it is reported, never silently dropped. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "common/error.h"
#include "dataset/internal.h"

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static char *join(const char *a, const char *b)
{
    size_t na = strlen(a), nb = strlen(b);
    int slash = na && a[na - 1] != '/';
    char *p = ferry_host_malloc(na + slash + nb + 1);
    if (!p)
        return NULL;
    memcpy(p, a, na);
    if (slash)
        p[na] = '/';
    memcpy(p + na + slash, b, nb);
    p[na + slash + nb] = '\0';
    return p;
}

/* Entries with an image name that cannot be read as one: counted while listing,
 * the first in path order kept ("path: reason") for the warning at create. */
typedef struct unreadable {
    size_t count;
    char first[1024];
} unreadable;

/* Whether entry e of dir is a folder, links followed. A stat only when d_type
 * cannot tell (links, file systems without d_type). */
static ferry_status entry_is_dir(const char *dir, const struct dirent *e, int *is_dir)
{
    if (e->d_type != DT_UNKNOWN && e->d_type != DT_LNK) {
        *is_dir = e->d_type == DT_DIR;
        return FERRY_OK;
    }
    char *p = join(dir, e->d_name);
    if (!p)
        return FERRY_ERR_NO_MEMORY;
    struct stat sb;
    *is_dir = stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
    ferry_host_free(p);
    return FERRY_OK;
}

/* *why: NULL when entry e of dir is a regular file (links followed), else why it
 * cannot be read as an image. Same stat rule as entry_is_dir. */
static ferry_status entry_problem(const char *dir, const struct dirent *e, const char **why)
{
    *why = NULL;
    if (e->d_type != DT_UNKNOWN && e->d_type != DT_LNK) {
        if (e->d_type != DT_REG)
            *why = ferry__not_regular_reason(DTTOIF(e->d_type));
        return FERRY_OK;
    }
    char *p = join(dir, e->d_name);
    if (!p)
        return FERRY_ERR_NO_MEMORY;
    *why = ferry__path_problem(p);
    ferry_host_free(p);
    return FERRY_OK;
}

/* The names in dir: want_dirs selects sub-folders; else every entry with a .png
 * name, readable or not. One that is not a readable regular file (a dangling
 * link, a folder or FIFO named x.png) stays in the list, so that it fails by
 * name when its sample is loaded (or is skipped and counted under the skip
 * policy) instead of vanishing; it is counted in *bad. */
static ferry_status list_dir(const char *dir, int want_dirs, ferry_str_list *out, unreadable *bad)
{
    DIR *d = opendir(dir);
    if (!d)
        return ferry_fail(errno == ENOENT || errno == ENOTDIR ? FERRY_ERR_INVALID_ARG : FERRY_ERR_IO,
                          "%s: %s", dir, strerror(errno));
    ferry_status st = FERRY_OK;
    const char *first = NULL; /* this folder's first unreadable name, and why */
    char first_why[256] = "";
    size_t nbad = 0;
    struct dirent *e;
    while (st == FERRY_OK && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        if (want_dirs) {
            int is_dir = 0;
            if ((st = entry_is_dir(dir, e, &is_dir)) == FERRY_OK && is_dir)
                st = ferry__str_list_push(out, ferry_host_strdup(e->d_name));
            continue;
        }
        if (!ferry__is_image_name(e->d_name))
            continue;
        const char *why = NULL;
        if ((st = entry_problem(dir, e, &why)) == FERRY_OK)
            st = ferry__str_list_push(out, ferry_host_strdup(e->d_name));
        if (st != FERRY_OK || !why)
            continue;
        nbad++;
        if (!first || strcmp(e->d_name, first) < 0) {
            first = out->v[out->n - 1]; /* the copy: stable through qsort below */
            snprintf(first_why, sizeof first_why, "%s", why);
        }
    }
    closedir(d);
    if (st != FERRY_OK) {
        ferry__str_list_free(out);
        return st;
    }
    /* Folders are listed in path order, so the first folder with any holds the first. */
    if (nbad && bad->count == 0)
        snprintf(bad->first, sizeof bad->first, "%s%s%s: %s", dir,
                 dir[0] && dir[strlen(dir) - 1] == '/' ? "" : "/", first, first_why);
    bad->count += nbad;
    if (out->n)
        qsort(out->v, out->n, sizeof *out->v, cmp_str);
    return FERRY_OK;
}

ferry_status ferry_dataset_image_folder(const char *root, const ferry_image_config *cfg,
                                        ferry_dataset **out)
{
    if (!root || !out)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "ferry_dataset_image_folder: NULL argument");
    ferry_image_config c;
    ferry_status st = ferry__image_config_check(cfg, &c);
    if (st != FERRY_OK)
        return st;
    ferry_str_list classes = {0}, paths = {0};
    int64_t *labels = NULL;
    size_t labels_cap = 0;
    unreadable bad = {0};
    if ((st = list_dir(root, 1, &classes, &bad)) != FERRY_OK)
        return st;
    if (classes.n == 0) {
        ferry__str_list_free(&classes);
        return ferry_fail(FERRY_ERR_INVALID_ARG, "%s: no class folders in the image folder", root);
    }
    for (size_t k = 0; k < classes.n && st == FERRY_OK; k++) {
        char *dir = join(root, classes.v[k]);
        ferry_str_list files = {0};
        if (!dir) {
            st = FERRY_ERR_NO_MEMORY;
            break;
        }
        st = list_dir(dir, 0, &files, &bad);
        if (st == FERRY_OK && files.n == 0)
            st = ferry_fail(FERRY_ERR_INVALID_ARG, "%s: class folder has no image files (.png, .jpg, .jpeg)", dir);
        if (st == FERRY_OK && paths.n + files.n > labels_cap) {
            size_t cap = (paths.n + files.n) * 2;
            int64_t *l = ferry_host_realloc(labels, cap * sizeof *l);
            if (!l)
                st = FERRY_ERR_NO_MEMORY;
            else {
                labels = l;
                labels_cap = cap;
            }
        }
        for (size_t i = 0; st == FERRY_OK && i < files.n; i++) {
            labels[paths.n] = (int64_t)k;
            st = ferry__str_list_push(&paths, join(dir, files.v[i]));
        }
        ferry__str_list_free(&files);
        ferry_host_free(dir);
    }
    if (st != FERRY_OK) {
        ferry__str_list_free(&classes);
        ferry__str_list_free(&paths);
        ferry_host_free(labels);
        return st;
    }
    /* Ownership of every list moves to the dataset, which keeps and logs what
     * could not be read. */
    return ferry__image_files_create(paths.v, labels, paths.n, classes.v, classes.n, &c, root,
                                     bad.count, bad.first, out);
}

/* ROOT/<class>/.../<file>.png: the folder walk. A class folder is walked
 * recursively, links followed (as torchvision's ImageFolder does), a link back
 * to a folder above it logged and not followed. Classes, and each class's
 * paths below its folder, are sorted bytewise so the same tree gives the same
 * indices everywhere; hidden entries and files not ending in .png are
 * ignored. Every other .png entry is a sample, even one that cannot be read:
 * it is reported, never silently dropped. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/dir.h"
#include "common/error.h"
#include "dataset/files/internal.h"
#include "dataset/image/image.h"

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
    char first_path[1024];
} unreadable;

/* The folders above the one being walked (dev, inode), to stop at a link loop. */
typedef struct folder_up {
    dev_t dev;
    ino_t ino;
    const struct folder_up *up;
} folder_up;

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

/* *why: NULL when entry e of dir (open as dfd) is a regular file this process
 * may read (links followed), else why it cannot be read as an image. Same stat
 * rule as entry_is_dir; d_type says nothing of permissions, so a regular file
 * is asked about them too (faccessat, no allocation). */
static ferry_status entry_problem(const char *dir, int dfd, const struct dirent *e, const char **why)
{
    *why = NULL;
    if (e->d_type != DT_UNKNOWN && e->d_type != DT_LNK) {
        if (e->d_type != DT_REG)
            *why = ferry__not_regular_reason(DTTOIF(e->d_type));
        else if (faccessat(dfd, e->d_name, R_OK, 0) != 0)
            *why = ferry__open_error_reason(e->d_name, errno);
        return FERRY_OK;
    }
    char *p = join(dir, e->d_name);
    if (!p)
        return FERRY_ERR_NO_MEMORY;
    *why = ferry__path_problem(p);
    ferry_host_free(p);
    return FERRY_OK;
}

/* Notes a .png entry that cannot be read (path: why), keeping the first by path. */
static void note_bad(unreadable *bad, const char *path, const char *why)
{
    if (bad->count++ == 0 || strcmp(path, bad->first_path) < 0) {
        snprintf(bad->first_path, sizeof bad->first_path, "%s", path);
        snprintf(bad->first, sizeof bad->first, "%s: %s", path, why);
    }
}

static ferry_status walk_class(const char *dir, const char *rel, const folder_up *up,
                               ferry_str_list *out, unreadable *bad);

/* Sub-folder name of dir (at rel below the class folder): walked unless it
 * leads back to a folder above it. */
static ferry_status walk_sub(const char *dir, const char *rel, const char *name,
                             const folder_up *up, ferry_str_list *out, unreadable *bad)
{
    char *p = join(dir, name), *r = rel[0] ? join(rel, name) : ferry_host_strdup(name);
    ferry_status st = p && r ? FERRY_OK : FERRY_ERR_NO_MEMORY;
    struct stat sb;
    if (st == FERRY_OK && stat(p, &sb) != 0)
        st = ferry_fail_at(FERRY_ERR_IO, p, "%s", strerror(errno));
    const folder_up *a = up;
    while (st == FERRY_OK && a && !(a->dev == sb.st_dev && a->ino == sb.st_ino))
        a = a->up;
    if (st == FERRY_OK && a)
        ferry_log(FERRY_LOG_WARN, "%s: a symbolic link loop (leads back to a folder above "
                  "it), not followed", p);
    folder_up here = {st == FERRY_OK ? sb.st_dev : 0, st == FERRY_OK ? sb.st_ino : 0, up};
    if (st == FERRY_OK && !a)
        st = walk_class(p, r, &here, out, bad);
    ferry_host_free(p);
    ferry_host_free(r);
    return st;
}

/* Every image entry (.png, .jpg, .jpeg) below the class folder dir, as paths relative to it
 * (rel: dir's own, "" at the top), sub-folders walked too. */
static ferry_status walk_class(const char *dir, const char *rel, const folder_up *up,
                               ferry_str_list *out, unreadable *bad)
{
    ferry_str_list subs = {0};
    DIR *d = opendir(dir);
    if (!d)
        return ferry_fail_at(errno == ENOENT || errno == ENOTDIR ? FERRY_ERR_INVALID_ARG : FERRY_ERR_IO, dir,
                             "%s", strerror(errno));
    ferry_status st = FERRY_OK;
    struct dirent *e;
    int err = 0;
    while (st == FERRY_OK && (e = ferry_dir_next(d, &err)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        const char *why = NULL;
        int is_dir = 0;
        if (!ferry__is_image_name(e->d_name)) {
            if ((st = entry_is_dir(dir, e, &is_dir)) == FERRY_OK && is_dir)
                st = ferry__str_list_push(&subs, ferry_host_strdup(e->d_name));
            continue;
        }
        if ((st = entry_problem(dir, dirfd(d), e, &why)) != FERRY_OK)
            break;
        char *r = rel[0] ? join(rel, e->d_name) : ferry_host_strdup(e->d_name);
        if (r && why) {
            char *full = join(dir, e->d_name);
            if (full)
                note_bad(bad, full, why);
            ferry_host_free(full);
        }
        st = ferry__str_list_push(out, r);
    }
    closedir(d);
    if (st == FERRY_OK && err)
        st = ferry_fail_at(FERRY_ERR_IO, dir, "reading the folder: %s", strerror(err));
    for (size_t i = 0; st == FERRY_OK && i < subs.n; i++)
        st = walk_sub(dir, rel, subs.v[i], up, out, bad);
    ferry__str_list_free(&subs);
    return st;
}

/* One class folder's samples: paths below it, sorted bytewise. */
static ferry_status list_class(const char *root, const char *dir, ferry_str_list *out,
                               unreadable *bad)
{
    struct stat a, b;
    if (stat(root, &a) != 0 || stat(dir, &b) != 0)
        return ferry_fail_at(FERRY_ERR_IO, dir, "%s", strerror(errno));
    folder_up top = {a.st_dev, a.st_ino, NULL}, cls = {b.st_dev, b.st_ino, &top};
    ferry_status st = walk_class(dir, "", &cls, out, bad);
    if (st != FERRY_OK)
        ferry__str_list_free(out);
    else if (out->n)
        qsort(out->v, out->n, sizeof *out->v, cmp_str);
    return st;
}

/* The sub-folders of root (links followed, hidden ones ignored), sorted. */
static ferry_status list_classes(const char *root, ferry_str_list *out)
{
    DIR *d = opendir(root);
    if (!d)
        return ferry_fail_at(errno == ENOENT || errno == ENOTDIR ? FERRY_ERR_INVALID_ARG : FERRY_ERR_IO, root,
                             "%s", strerror(errno));
    ferry_status st = FERRY_OK;
    struct dirent *e;
    int err = 0;
    while (st == FERRY_OK && (e = ferry_dir_next(d, &err)) != NULL) {
        int is_dir = 0;
        if (e->d_name[0] != '.' && (st = entry_is_dir(root, e, &is_dir)) == FERRY_OK && is_dir)
            st = ferry__str_list_push(out, ferry_host_strdup(e->d_name));
    }
    closedir(d);
    if (st == FERRY_OK && err)
        st = ferry_fail_at(FERRY_ERR_IO, root, "reading the folder: %s", strerror(err));
    if (st != FERRY_OK)
        ferry__str_list_free(out);
    else if (out->n)
        qsort(out->v, out->n, sizeof *out->v, cmp_str);
    return st;
}

ferry_status ferry_dataset_image_folder(const char *root, const ferry_image_config *cfg,
                                        ferry_dataset **out)
{
    if (!root || !out)
        return FERRY_ARG_ERROR("NULL argument");
    ferry_image_config c;
    ferry_status st = ferry__image_config_check(cfg, &c);
    if (st != FERRY_OK)
        return st;
    ferry_str_list classes = {0}, paths = {0};
    int64_t *labels = NULL;
    size_t labels_cap = 0;
    unreadable bad = {0};
    if ((st = list_classes(root, &classes)) != FERRY_OK)
        return st;
    if (classes.n == 0) {
        ferry__str_list_free(&classes);
        return ferry_fail_at(FERRY_ERR_INVALID_ARG, root, "no class folders in the image folder");
    }
    for (size_t k = 0; k < classes.n && st == FERRY_OK; k++) {
        char *dir = join(root, classes.v[k]);
        ferry_str_list files = {0};
        if (!dir) {
            st = FERRY_ERR_NO_MEMORY;
            break;
        }
        st = list_class(root, dir, &files, &bad);
        if (st == FERRY_OK && files.n == 0)
            st = ferry_fail_at(FERRY_ERR_INVALID_ARG, dir,
                               "class folder has no image files (.png, .jpg, .jpeg)");
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

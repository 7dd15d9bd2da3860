/* ROOT/<class>/<file>.png: the folder walk. Classes and files are sorted bytewise
 * so the same tree gives the same indices everywhere; hidden entries and files
 * not ending in .png are ignored. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "common/error.h"
#include "dataset/internal.h"

typedef struct name_list {
    char **v;
    size_t n, cap;
} name_list;

static void names_free(name_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        ferry_host_free(l->v[i]);
    ferry_host_free(l->v);
    memset(l, 0, sizeof *l);
}

static ferry_status names_push(name_list *l, char *s)
{
    if (!s)
        return FERRY_ERR_NO_MEMORY;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        char **v = ferry_host_realloc(l->v, cap * sizeof *v);
        if (!v) {
            ferry_host_free(s);
            return FERRY_ERR_NO_MEMORY;
        }
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = s;
    return FERRY_OK;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int is_png_name(const char *s)
{
    size_t n = strlen(s);
    return n > 4 && strcasecmp(s + n - 4, ".png") == 0;
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

/* The names in dir: want_dirs selects sub-folders, else .png regular files. */
static ferry_status list_dir(const char *dir, int want_dirs, name_list *out)
{
    DIR *d = opendir(dir);
    if (!d)
        return ferry_fail(errno == ENOENT || errno == ENOTDIR ? FERRY_ERR_INVALID_ARG : FERRY_ERR_IO,
                          "%s: %s", dir, strerror(errno));
    ferry_status st = FERRY_OK;
    struct dirent *e;
    while (st == FERRY_OK && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        if (!want_dirs && !is_png_name(e->d_name))
            continue;
        int is_dir, is_reg;
        if (e->d_type != DT_UNKNOWN && e->d_type != DT_LNK) {
            is_dir = e->d_type == DT_DIR;
            is_reg = e->d_type == DT_REG;
        } else {
            char *p = join(dir, e->d_name);
            struct stat sb;
            if (!p) {
                st = FERRY_ERR_NO_MEMORY;
                break;
            }
            int ok = stat(p, &sb) == 0;
            ferry_host_free(p);
            is_dir = ok && S_ISDIR(sb.st_mode);
            is_reg = ok && S_ISREG(sb.st_mode);
        }
        if (want_dirs ? is_dir : is_reg)
            st = names_push(out, ferry_host_strdup(e->d_name));
    }
    closedir(d);
    if (st != FERRY_OK) {
        names_free(out);
        return st;
    }
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
    name_list classes = {0}, paths = {0};
    int64_t *labels = NULL;
    size_t labels_cap = 0;
    if ((st = list_dir(root, 1, &classes)) != FERRY_OK)
        return st;
    if (classes.n == 0) {
        names_free(&classes);
        return ferry_fail(FERRY_ERR_INVALID_ARG, "%s: no class folders in the image folder", root);
    }
    for (size_t k = 0; k < classes.n && st == FERRY_OK; k++) {
        char *dir = join(root, classes.v[k]);
        name_list files = {0};
        if (!dir) {
            st = FERRY_ERR_NO_MEMORY;
            break;
        }
        st = list_dir(dir, 0, &files);
        if (st == FERRY_OK && files.n == 0)
            st = ferry_fail(FERRY_ERR_INVALID_ARG, "%s: class folder has no .png files", dir);
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
            st = names_push(&paths, join(dir, files.v[i]));
        }
        names_free(&files);
        ferry_host_free(dir);
    }
    if (st != FERRY_OK) {
        names_free(&classes);
        names_free(&paths);
        ferry_host_free(labels);
        return st;
    }
    /* Ownership of every list moves to the dataset. */
    return ferry__image_files_create(paths.v, labels, paths.n, classes.v, classes.n, &c, out);
}

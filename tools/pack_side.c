/* `ferry pack`'s side files: each folder of the source's images listed once,
 * its non-image files kept sorted, so that each image's side files are a
 * binary search away however the pack orders the images. */
#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "pack_side.h"

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static size_t dir_len(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? (size_t)(slash - path) : 0;
}

static bool is_image(const char *name)
{
    const char *dot = strrchr(name, '.');
    return dot && (!strcasecmp(dot, ".png") || !strcasecmp(dot, ".jpg") ||
                   !strcasecmp(dot, ".jpeg"));
}

static int push(pack_side *s, size_t *cap, char *p)
{
    if (!p)
        return -1;
    if (s->n == *cap) {
        size_t c = *cap ? *cap * 2 : 64;
        char **v = realloc(s->paths, c * sizeof *v);
        if (!v) {
            free(p);
            return -1;
        }
        s->paths = v;
        *cap = c;
    }
    s->paths[s->n++] = p;
    return 0;
}

/* The folder's files with a '.' that are not images (hidden ones skipped). */
static int list_dir(pack_side *s, size_t *cap, const char *dir, size_t dl)
{
    char path[4096];
    snprintf(path, sizeof path, "%.*s", (int)dl, dir);
    DIR *d = opendir(dl ? path : ".");
    if (!d)
        return 0; /* an image's folder that cannot be listed has no side files */
    struct dirent *e;
    int rc = 0;
    while (rc == 0 && (e = readdir(d))) {
        if (e->d_name[0] == '.' || !strchr(e->d_name, '.') || is_image(e->d_name))
            continue;
        size_t n = dl + 1 + strlen(e->d_name) + 1;
        char *p = malloc(n);
        if (p)
            snprintf(p, n, "%.*s/%s", (int)dl, dir, e->d_name);
        rc = push(s, cap, p);
    }
    closedir(d);
    return rc;
}

int pack_side_init(pack_side *s, const ferry_dataset *ds)
{
    *s = (pack_side){0};
    size_t len = ferry_dataset_len(ds), cap = 0;
    /* The folders, each once: sample names are sorted within each class, so
     * most repeats are neighbours; a small ring of recent ones catches them. */
    char **dirs = malloc((len ? len : 1) * sizeof *dirs);
    size_t nd = 0;
    if (!dirs)
        return -1;
    for (size_t i = 0; i < len; i++) {
        const char *name = ferry_dataset_sample_name(ds, i);
        if (!name)
            continue;
        size_t dl = dir_len(name);
        if (nd && strlen(dirs[nd - 1]) == dl && !strncmp(dirs[nd - 1], name, dl))
            continue;
        if (!(dirs[nd] = malloc(dl + 1)))
            break;
        memcpy(dirs[nd], name, dl);
        dirs[nd++][dl] = '\0';
    }
    qsort(dirs, nd, sizeof *dirs, cmp_str);
    int rc = 0;
    for (size_t k = 0; k < nd && rc == 0; k++)
        if (k == 0 || strcmp(dirs[k], dirs[k - 1]) != 0)
            rc = list_dir(s, &cap, dirs[k], strlen(dirs[k]));
    for (size_t k = 0; k < nd; k++)
        free(dirs[k]);
    free(dirs);
    if (s->n)
        qsort(s->paths, s->n, sizeof *s->paths, cmp_str);
    if (rc != 0) {
        fprintf(stderr, "ferry pack: out of memory listing side files\n");
        pack_side_free(s);
    }
    return rc;
}

void pack_side_free(pack_side *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->paths[i]);
    free(s->paths);
    *s = (pack_side){0};
}

size_t pack_side_find(const pack_side *s, const char *path, size_t *first, size_t *stem_len)
{
    /* The stem: the name up to the first '.' of its last component (WebDataset's key). */
    size_t dl = dir_len(path);
    const char *base = path + dl + (path[dl] == '/');
    const char *dot = strchr(base, '.');
    *stem_len = (size_t)((dot ? dot : base + strlen(base)) - path);
    size_t lo = 0, hi = s->n;
    while (lo < hi) { /* the first path not below "DIR/STEM." */
        size_t mid = lo + (hi - lo) / 2;
        int c = strncmp(s->paths[mid], path, *stem_len);
        if (c < 0 || (c == 0 && s->paths[mid][*stem_len] < '.'))
            lo = mid + 1;
        else
            hi = mid;
    }
    *first = lo;
    size_t n = 0;
    while (lo + n < s->n && !strncmp(s->paths[lo + n], path, *stem_len) &&
           s->paths[lo + n][*stem_len] == '.')
        n++;
    return n;
}

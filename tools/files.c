/* Helpers shared by the dataset tools: .png collection, file reading, mkdir -p. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#include "files.h"

static int push(tool_paths *p, const char *s)
{
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 1024;
        char **v = realloc(p->v, cap * sizeof *v);
        if (!v)
            return -1;
        p->v = v;
        p->cap = cap;
    }
    if (!(p->v[p->n] = strdup(s)))
        return -1;
    p->n++;
    return 0;
}

static int cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int is_png(const char *s)
{
    size_t n = strlen(s);
    return n > 4 && !strcasecmp(s + n - 4, ".png");
}

static int walk(const char *dir, tool_paths *out)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    tool_paths names = {0};
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            push(&names, e->d_name);
    closedir(d);
    if (names.n)
        qsort(names.v, names.n, sizeof *names.v, cmp);
    for (size_t i = 0; i < names.n; i++) {
        size_t len = strlen(dir) + strlen(names.v[i]) + 2;
        char *p = malloc(len);
        if (!p)
            break;
        snprintf(p, len, "%s/%s", dir, names.v[i]);
        struct stat st;
        if (stat(p, &st) == 0) {
            if (S_ISDIR(st.st_mode))
                walk(p, out);
            else if (S_ISREG(st.st_mode) && is_png(names.v[i]))
                push(out, p);
        }
        free(p);
    }
    tool_paths_free(&names);
    return 0;
}

int tool_collect_png(const char *path, tool_paths *out)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return -1;
    if (!S_ISDIR(st.st_mode))
        return push(out, path);
    return walk(path, out);
}

void tool_paths_free(tool_paths *p)
{
    for (size_t i = 0; i < p->n; i++)
        free(p->v[i]);
    free(p->v);
    memset(p, 0, sizeof *p);
}

int tool_read_file(const char *path, uint8_t **buf, size_t *cap, size_t *n, size_t max_bytes)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    struct stat st;
    if (fstat(fileno(f), &st) != 0) {
        fclose(f);
        return -1;
    }
    size_t size = (size_t)st.st_size;
    if (max_bytes && size > max_bytes) {
        fclose(f);
        return -2;
    }
    if (size + 1 > *cap) {
        uint8_t *p = realloc(*buf, size + 1);
        if (!p) {
            fclose(f);
            errno = ENOMEM;
            return -1;
        }
        *buf = p;
        *cap = size + 1;
    }
    *n = fread(*buf, 1, size, f);
    fclose(f);
    return 0;
}

int tool_mkdirs(const char *path)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            if (mkdir(buf, 0777) != 0 && errno != EEXIST)
                return -1;
            *p = '/';
        }
    }
    if (mkdir(buf, 0777) != 0 && errno != EEXIST)
        return -1;
    return 0;
}

double tool_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

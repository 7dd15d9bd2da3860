/* Helpers shared by the dataset tools: .png collection, file reading, mkdir -p. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/error.h"
#include "files.h"

/* Appends s, with why (NULL: nothing known against it) when the list keeps reasons. */
static int push_why(tool_paths *p, const char *s, const char *why)
{
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 1024;
        char **v = realloc(p->v, cap * sizeof *v);
        if (!v)
            return -1;
        p->v = v;
        char **w = realloc(p->why, cap * sizeof *w);
        if (!w)
            return -1;
        p->why = w;
        p->cap = cap;
    }
    p->why[p->n] = NULL;
    if (!(p->v[p->n] = strdup(s)) || (why && !(p->why[p->n] = strdup(why)))) {
        free(p->v[p->n]);
        return -1;
    }
    p->n++;
    return 0;
}

static int push(tool_paths *p, const char *s) { return push_why(p, s, NULL); }

int tool_paths_push(tool_paths *p, const char *s, const char *why) { return push_why(p, s, why); }

static int cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* An image file's name, as the library's folder listing takes it: .png, .jpg, .jpeg. */
static int is_png(const char *s)
{
    return ferry__is_image_name(s);
}

/* The folders above the one being walked, to stop at a link back up the tree
 * (its files are listed already; following it would not end). */
typedef struct walk_up {
    dev_t dev;
    ino_t ino;
    const struct walk_up *up;
} walk_up;

static int walk(const char *dir, const walk_up *up, int keep_bad, tool_paths *out);

/* One entry of a walk: p is its path, name its last part. */
static int walk_entry(const char *p, const char *name, const walk_up *up, int keep_bad,
                      tool_paths *out)
{
    struct stat st;
    if (stat(p, &st) != 0) {
        int e = errno;
        return keep_bad && is_png(name) ? push_why(out, p, ferry__open_error_reason(p, e)) : 0;
    }
    if (S_ISDIR(st.st_mode) && keep_bad && is_png(name))
        return push_why(out, p, ferry__not_regular_reason(st.st_mode)); /* a folder named x.png */
    if (S_ISDIR(st.st_mode)) {
        for (const walk_up *a = up; a; a = a->up)
            if (a->dev == st.st_dev && a->ino == st.st_ino)
                return 0;
        walk_up here = {st.st_dev, st.st_ino, up};
        return walk(p, &here, keep_bad, out);
    }
    if (!is_png(name))
        return 0;
    if (S_ISREG(st.st_mode))
        return push(out, p);
    return keep_bad ? push_why(out, p, ferry__not_regular_reason(st.st_mode)) : 0;
}

static int walk(const char *dir, const walk_up *up, int keep_bad, tool_paths *out)
{
    DIR *d = opendir(dir);
    if (!d) {
        int e = errno;
        return keep_bad ? push_why(out, dir, strerror(e)) : -1;
    }
    tool_paths names = {0};
    struct dirent *e;
    int rc = 0;
    while (rc == 0 && (e = readdir(d)))
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            rc = push(&names, e->d_name);
    closedir(d);
    if (names.n)
        qsort(names.v, names.n, sizeof *names.v, cmp);
    for (size_t i = 0; rc == 0 && i < names.n; i++) {
        size_t len = strlen(dir) + strlen(names.v[i]) + 2;
        char *p = malloc(len);
        if (!p) {
            rc = -1;
            break;
        }
        snprintf(p, len, "%s/%s", dir, names.v[i]);
        /* Without keep_bad a sub-folder that cannot be opened is passed over, as before. */
        if (walk_entry(p, names.v[i], up, keep_bad, out) != 0 && keep_bad)
            rc = -1;
        free(p);
    }
    tool_paths_free(&names);
    if (rc != 0)
        errno = ENOMEM;
    return rc;
}

int tool_collect_png(const char *path, int keep_bad, tool_paths *out)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        int e = errno;
        if (!keep_bad)
            return -1;
        return push_why(out, path, ferry__open_error_reason(path, e));
    }
    if (!S_ISDIR(st.st_mode))
        return S_ISREG(st.st_mode) || !keep_bad ? push(out, path)
                                                : push_why(out, path, ferry__not_regular_reason(st.st_mode));
    walk_up top = {st.st_dev, st.st_ino, NULL};
    return walk(path, &top, keep_bad, out);
}

void tool_paths_free(tool_paths *p)
{
    for (size_t i = 0; i < p->n; i++) {
        free(p->v[i]);
        free(p->why[i]);
    }
    free(p->v);
    free(p->why);
    memset(p, 0, sizeof *p);
}

int tool_read_file(const char *path, uint8_t **buf, size_t *cap, size_t *n, size_t max_bytes)
{
    /* O_NONBLOCK: a FIFO would otherwise hold open() until someone writes to it. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return -3;
    }
    size_t size = (size_t)st.st_size;
    if (max_bytes && size > max_bytes) {
        close(fd);
        return -2;
    }
    if (size + 1 > *cap) {
        uint8_t *p = realloc(*buf, size + 1);
        if (!p) {
            close(fd);
            errno = ENOMEM;
            return -1;
        }
        *buf = p;
        *cap = size + 1;
    }
    size_t got = 0;
    while (got < size) {
        ssize_t r = read(fd, *buf + got, size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            close(fd);
            errno = e;
            return -1;
        }
        if (r == 0)
            break; /* shrank meanwhile: what is there */
        got += (size_t)r;
    }
    close(fd);
    *n = got;
    return 0;
}

ferry_status tool_decode_check(uint8_t *file, size_t n, const char *path, ferry_scratch *s,
                               uint8_t **pix, size_t *pix_cap)
{
    ferry_image_config cfg = ferry_image_config_default();
    ferry_image_info info;
    ferry_sample_format fmt;
    ferry_status st = ferry_image_probe(file, n, &info);
    if (st == FERRY_OK)
        st = ferry_image_format(&cfg, &info, &fmt);
    size_t need = st == FERRY_OK ? ferry_sample_format_bytes(&fmt) : 0;
    /* The limits are checked before the output buffer is sized. */
    size_t px = info.width * info.height;
    if (st == FERRY_OK && (info.width > cfg.limits.max_width || info.height > cfg.limits.max_height ||
                           px / info.width != info.height || px > cfg.limits.max_pixels))
        need = 1; /* too big: let the decoder report the limit */
    if (st == FERRY_OK && need > *pix_cap) {
        uint8_t *p = realloc(*pix, need);
        if (p) {
            *pix = p;
            *pix_cap = need;
        }
    }
    /* A bad header is reported by the decoder too, with the path in it. */
    if (st == FERRY_OK || st == FERRY_ERR_FORMAT || st == FERRY_ERR_UNSUPPORTED)
        st = ferry_image_decode(file, n, &cfg, s, path, *pix ? *pix : file, *pix ? *pix_cap : 0);
    /* Named by the decoder when it got as far (its subject), here otherwise:
     * the path appears once. */
    if (st != FERRY_OK)
        ferry_fail_named(st, path);
    return st;
}

void tool_fputs_escaped(const char *s, FILE *f)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c < 0x20 || c == 0x7f)
            fprintf(f, "\\x%02x", c);
        else
            fputc(c, f);
    }
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

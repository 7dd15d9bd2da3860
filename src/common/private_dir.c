/* A private folder and the files created in it (see private_dir.h). */
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/error.h"
#include "common/private_dir.h"

static atomic_llong fixed_left; /* test hook: calls left that return fixed_value */
static atomic_ullong fixed_value;

long long ferry_debug_fix_random(unsigned long long value, long long k)
{
    atomic_store(&fixed_value, value);
    return atomic_exchange(&fixed_left, k);
}

unsigned long long ferry_random64(void)
{
    long long left = atomic_load(&fixed_left);
    while (left > 0)
        if (atomic_compare_exchange_weak(&fixed_left, &left, left - 1))
            return atomic_load(&fixed_value);
    unsigned long long r;
    if (getrandom(&r, sizeof r, GRND_NONBLOCK) == (ssize_t)sizeof r)
        return r;
    static atomic_ullong counter; /* only in the fallback: a different name each call */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    r = ((unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec) ^
        ((unsigned long long)getpid() << 40) ^ (atomic_fetch_add(&counter, 1) * 0x9e3779b97f4a7c15ull);
    return r;
}

ferry_status ferry_private_dir_default(char *out, size_t cap)
{
    const char *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
    int w;
    /* The XDG spec: a relative value is invalid and is to be ignored. */
    if (x && x[0] == '/') {
        w = snprintf(out, cap, "%s/ferry", x);
    } else {
        char buf[4096];
        struct passwd pw, *pp = NULL;
        if ((!h || h[0] != '/') && getpwuid_r(geteuid(), &pw, buf, sizeof buf, &pp) == 0 && pp)
            h = pp->pw_dir;
        if (!h || h[0] != '/')
            return ferry_fail(FERRY_ERR_INVALID_ARG, "no cache folder: neither XDG_CACHE_HOME nor "
                              "HOME is an absolute path, and the password database has no home "
                              "for uid %ld; set FERRY_CACHE_DIR (or the config's folder)",
                              (long)geteuid());
        w = snprintf(out, cap, "%s/.cache/ferry", h);
    }
    if (w < 0 || (size_t)w >= cap)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "the cache folder's name is too long: %.80s...", out);
    return FERRY_OK;
}

/* mkdir -p with mode 0700 for each folder made; existing ones are left as
 * they are (their owner chose their mode). */
static int make_parents_of(const char *dir)
{
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", dir) >= (int)sizeof buf) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        int rc = mkdir(buf, 0700);
        *p = '/';
        if (rc != 0 && errno != EEXIST)
            return -1;
    }
    return 0;
}

/* Why dir could not be opened as a folder, in words with the fix. */
static ferry_status open_failed(const char *dir, const char *what, int err)
{
    struct stat sb;
    if (lstat(dir, &sb) == 0 && S_ISLNK(sb.st_mode))
        return ferry_fail(FERRY_ERR_INVALID_ARG, "%s %s: is a symbolic link; ferry does not follow "
                          "one there (anyone who could make it could point it anywhere): remove it "
                          "or choose another folder", what, dir);
    if (lstat(dir, &sb) == 0 && !S_ISDIR(sb.st_mode))
        return ferry_fail(FERRY_ERR_INVALID_ARG, "%s %s: is not a folder: remove it or choose "
                          "another folder", what, dir);
    return ferry_fail(FERRY_ERR_IO, "%s %s: %s", what, dir, strerror(err));
}

/* As ssh's StrictModes: the user's own folder, which no one else may write. */
static ferry_status check_private(int fd, const char *dir, const char *what)
{
    struct stat sb;
    if (fstat(fd, &sb) != 0)
        return ferry_fail(FERRY_ERR_IO, "%s %s: %s", what, dir, strerror(errno));
    if (!S_ISDIR(sb.st_mode))
        return ferry_fail(FERRY_ERR_INVALID_ARG, "%s %s: is not a folder: remove it or choose "
                          "another folder", what, dir);
    if (sb.st_uid != geteuid())
        return ferry_fail(FERRY_ERR_INVALID_ARG, "%s %s: is owned by uid %ld, not by you (uid %ld): "
                          "another user could read or replace what ferry keeps there; remove it "
                          "or choose another folder", what, dir, (long)sb.st_uid, (long)geteuid());
    if (sb.st_mode & (S_IWGRP | S_IWOTH))
        return ferry_fail(FERRY_ERR_INVALID_ARG, "%s %s: is writable by group or others (mode "
                          "%04o): another user could replace what ferry keeps there; run "
                          "`chmod go-w %s`, or choose another folder", what, dir,
                          (unsigned)(sb.st_mode & 07777), dir);
    return FERRY_OK;
}

ferry_status ferry_private_dir_open(const char *dir, bool make_parents, const char *what, int *dfd)
{
    *dfd = -1;
    if (!dir || !*dir)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "%s: no folder given", what);
    if (make_parents && make_parents_of(dir) != 0)
        return ferry_fail(FERRY_ERR_IO, "%s %s: cannot create the folders above it: %s", what, dir,
                          strerror(errno));
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return ferry_fail(FERRY_ERR_IO, "%s %s: cannot create it: %s", what, dir, strerror(errno));
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return open_failed(dir, what, errno);
    ferry_status st = check_private(fd, dir, what);
    if (st != FERRY_OK) {
        close(fd);
        return st;
    }
    *dfd = fd;
    return FERRY_OK;
}

int ferry_private_create(int dfd, const char *prefix, const char *suffix, unsigned mode, char *name,
                         size_t cap)
{
    for (int tries = 0; tries < 100; tries++) {
        int w = snprintf(name, cap, "%s%016llx%s", prefix, ferry_random64(), suffix);
        if (w < 0 || (size_t)w >= cap) {
            errno = ENAMETOOLONG;
            return -1;
        }
        int fd = openat(dfd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, (mode_t)mode);
        if (fd >= 0 || errno != EEXIST)
            return fd;
    }
    errno = EEXIST;
    return -1;
}

/* Crash-safe file replacement (see atomic_file.h). */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/atomic_file.h"
#include "common/countdown.h"
#include "common/error.h"
#include "common/private_dir.h"

static atomic_llong io_countdown; /* 0 = off; 1 = fail the next operation */

int64_t ferry_debug_fail_io_after(int64_t k) { return atomic_exchange(&io_countdown, k); }

/* False, with errno = EIO, when the test hook says this operation fails. */
static int io_ok(void)
{
    if (!ferry_countdown_fires(&io_countdown))
        return 1;
    errno = EIO;
    return 0;
}

static const char *kind_of(mode_t m)
{
    return S_ISDIR(m) ? "a folder" : S_ISCHR(m) ? "a character device" : S_ISBLK(m) ? "a block device"
         : S_ISFIFO(m) ? "a FIFO" : S_ISSOCK(m) ? "a socket" : "not a regular file";
}

/* f->path: path with its symbolic links followed to the file they name (which
 * may not exist yet), so that the rename replaces the target and the link
 * stays a link. 40 links at most, as the kernel allows. */
static ferry_status resolve_target(ferry_atomic_file *f, const char *path)
{
    if (snprintf(f->path, sizeof f->path, "%s", path) >= (int)sizeof f->path)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "path too long: %.80s...", path);
    struct stat sb;
    for (int hops = 0; lstat(f->path, &sb) == 0 && S_ISLNK(sb.st_mode); hops++) {
        char link[4096], next[4096 + 4096];
        ssize_t n = hops < 40 ? readlink(f->path, link, sizeof link - 1) : -1;
        if (n < 0)
            return ferry_fail(FERRY_ERR_INVALID_ARG, "%s: %s", path,
                              hops < 40 ? strerror(errno) : "too many levels of symbolic links");
        link[n] = '\0';
        const char *slash = strrchr(f->path, '/');
        if (link[0] == '/' || !slash)
            snprintf(next, sizeof next, "%s", link);
        else
            snprintf(next, sizeof next, "%.*s/%s", (int)(slash - f->path), f->path, link);
        if (snprintf(f->path, sizeof f->path, "%s", next) >= (int)sizeof f->path)
            return ferry_fail(FERRY_ERR_INVALID_ARG, "%s: the link's target path is too long", path);
    }
    /* A rename replaces whatever has the name: a device (/dev/null as root), a
     * FIFO, a socket would become a regular file. Only a file is replaced. */
    if (lstat(f->path, &sb) == 0 && !S_ISREG(sb.st_mode))
        return ferry_fail(FERRY_ERR_INVALID_ARG, "%s%s%s: is %s, not a regular file; refusing to "
                          "replace it (give a file path)", path, strcmp(path, f->path) ? " -> " : "",
                          strcmp(path, f->path) ? f->path : "", kind_of(sb.st_mode));
    return FERRY_OK;
}

/* Whether process pid is gone (kill(pid, 0) says no such process). */
static int pid_gone(long pid)
{
    return pid > 0 && kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

/* The pid in a temporary name's tail after BASE.tmp: "PID" (older builds) or
 * "PID-" and 16 hex digits; -1 when the tail is not one. */
static long tmp_pid(const char *tail)
{
    if (strncmp(tail, ".tmp", 4) != 0 || tail[4] < '0' || tail[4] > '9')
        return -1;
    char *end;
    long pid = strtol(tail + 4, &end, 10);
    if (*end == '\0')
        return pid;
    if (*end != '-' || strlen(end + 1) != 16 || strspn(end + 1, "0123456789abcdef") != 16)
        return -1;
    return pid;
}

/* clean_stale in the folder open at dfd (shown as dir). */
static size_t clean_stale_at(int dfd, const char *dir, const char *base)
{
    int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return 0;
    }
    size_t nb = strlen(base), removed = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        long pid = strncmp(e->d_name, base, nb) == 0 ? tmp_pid(e->d_name + nb) : -1;
        if (pid < 0 || pid == (long)getpid() || !pid_gone(pid))
            continue;
        if (unlinkat(dfd, e->d_name, 0) == 0) {
            removed++;
            ferry_log(FERRY_LOG_INFO, "%s/%s: removed a temporary file left by process %ld, which "
                      "ended during a save", dir, e->d_name, pid);
        }
    }
    closedir(d);
    return removed;
}

/* The folder holding path, for its descriptor ("." for a bare name). */
static void folder_of(const char *path, char *dir, size_t n)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(dir, n, ".");
    else if (slash == path)
        snprintf(dir, n, "/");
    else
        snprintf(dir, n, "%.*s", (int)(slash - path), path);
}

size_t ferry_atomic_clean_stale(const char *path)
{
    char dir[4096];
    const char *slash = strrchr(path, '/');
    folder_of(path, dir, sizeof dir);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return 0;
    size_t removed = clean_stale_at(dfd, dir, slash ? slash + 1 : path);
    close(dfd);
    return removed;
}

/* The temporary file beside f's target: f->dfd and f->base already set. */
static ferry_status create_tmp(ferry_atomic_file *f, unsigned mode)
{
    const char *name = f->path + f->base;
    char prefix[4096 + 32];
    snprintf(prefix, sizeof prefix, "%s.tmp%ld-", name, (long)getpid());
    snprintf(f->tmp, sizeof f->tmp, "%.*s", (int)f->base, f->path);
    /* The pid lets clean_stale tell a dead process's file; the random part
     * keeps anyone from planting a link at the name first (O_EXCL refuses
     * one at any name anyway, and O_NOFOLLOW a link). */
    if (!io_ok() || (f->fd = ferry_private_create(f->dfd, prefix, "", mode, f->tmp + f->base,
                                                  sizeof f->tmp - f->base)) < 0) {
        ferry_status st = ferry_fail(FERRY_ERR_IO, "%s.tmp%ld-*: cannot create: %s", f->path,
                                     (long)getpid(), strerror(errno));
        close(f->dfd);
        f->dfd = -1;
        f->tmp[0] = '\0';
        return st;
    }
    return FERRY_OK;
}

ferry_status ferry_atomic_open(ferry_atomic_file *f, const char *path)
{
    f->fd = f->dfd = -1;
    f->tmp[0] = '\0';
    ferry_status st = resolve_target(f, path);
    if (st != FERRY_OK)
        return st;
    char dir[4096];
    const char *slash = strrchr(f->path, '/');
    folder_of(f->path, dir, sizeof dir);
    f->base = slash ? (size_t)(slash - f->path) + 1 : 0;
    if ((f->dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
        return ferry_fail(FERRY_ERR_IO, "%s: cannot open its folder %s: %s", f->path, dir,
                          strerror(errno));
    clean_stale_at(f->dfd, dir, f->path + f->base);
    /* Two processes writing the same checkpoint keep off each other's
     * temporary file; the last rename wins, whole. */
    return create_tmp(f, 0644);
}

ferry_status ferry_atomic_open_at(ferry_atomic_file *f, int dfd, const char *dir, const char *name,
                                  unsigned mode)
{
    f->fd = f->dfd = -1;
    f->tmp[0] = '\0';
    int w = snprintf(f->path, sizeof f->path, "%s/%s", dir, name);
    if (w < 0 || (size_t)w >= sizeof f->path || strchr(name, '/'))
        return ferry_fail(FERRY_ERR_INVALID_ARG, "%s/%s: not a name in the folder, or too long",
                          dir, name);
    f->base = strlen(dir) + 1;
    if ((f->dfd = fcntl(dfd, F_DUPFD_CLOEXEC, 0)) < 0)
        return ferry_fail(FERRY_ERR_IO, "%s: %s", f->path, strerror(errno));
    clean_stale_at(f->dfd, dir, name);
    return create_tmp(f, mode);
}

ferry_status ferry_atomic_write(ferry_atomic_file *f, const void *p, size_t n)
{
    const char *b = p;
    while (n > 0) {
        ssize_t w = io_ok() ? write(f->fd, b, n) : -1;
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return ferry_fail(FERRY_ERR_IO, "%s: write failed: %s", f->tmp,
                              w < 0 ? strerror(errno) : "no progress");
        b += w;
        n -= (size_t)w;
    }
    return FERRY_OK;
}

ferry_status ferry_atomic_pwrite(ferry_atomic_file *f, const void *p, size_t n, uint64_t offset)
{
    if (!io_ok() || pwrite(f->fd, p, n, (off_t)offset) != (ssize_t)n)
        return ferry_fail(FERRY_ERR_IO, "%s: write failed: %s", f->tmp, strerror(errno));
    return FERRY_OK;
}

/* Closes what f holds; with unlink_tmp, removes the temporary file first. */
static void release(ferry_atomic_file *f, bool unlink_tmp)
{
    if (f->fd >= 0)
        close(f->fd);
    f->fd = -1;
    if (unlink_tmp && f->tmp[0] && f->dfd >= 0)
        unlinkat(f->dfd, f->tmp + f->base, 0);
    if (f->dfd >= 0)
        close(f->dfd);
    f->dfd = -1;
}

void ferry_atomic_abort(ferry_atomic_file *f)
{
    release(f, true);
}

ferry_status ferry_atomic_commit(ferry_atomic_file *f)
{
    /* The data must be on disk before the rename makes it the file: otherwise a
     * crash could leave the new name on unwritten blocks. */
    if (!io_ok() || fsync(f->fd) != 0) {
        ferry_status st = ferry_fail(FERRY_ERR_IO, "%s: fsync failed: %s", f->tmp, strerror(errno));
        ferry_atomic_abort(f);
        return st;
    }
    int inject = !io_ok();
    int rc = close(f->fd);
    f->fd = -1;
    if (inject) {
        rc = -1;
        errno = EIO;
    }
    if (rc != 0) {
        ferry_status st = ferry_fail(FERRY_ERR_IO, "%s: close failed: %s", f->tmp, strerror(errno));
        release(f, true);
        return st;
    }
    /* Within the folder's descriptor: a link at the target's name is
     * replaced, never followed. */
    if (!io_ok() || renameat(f->dfd, f->tmp + f->base, f->dfd, f->path + f->base) != 0) {
        ferry_status st = ferry_fail(FERRY_ERR_IO, "cannot rename %s to %s: %s", f->tmp, f->path,
                                     strerror(errno));
        release(f, true);
        return st;
    }
    /* The rename itself is durable once the folder is synced. The new file is in
     * place either way; a failure here is reported, not undone. */
    int ok = io_ok() && fsync(f->dfd) == 0;
    int e = errno;
    release(f, false);
    if (!ok)
        return ferry_fail(FERRY_ERR_IO, "%s: written, but syncing its folder failed: %s", f->path,
                          strerror(e));
    return FERRY_OK;
}

/* Crash-safe file replacement (see atomic_file.h). */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
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

size_t ferry_atomic_clean_stale(const char *path)
{
    char dir[4096];
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    size_t nb = strlen(base), removed = 0;
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) + (slash == path) : 1,
             slash ? path : ".");
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *tail = e->d_name + nb;
        if (strncmp(e->d_name, base, nb) != 0 || strncmp(tail, ".tmp", 4) != 0 || !tail[4])
            continue;
        char *end;
        long pid = strtol(tail + 4, &end, 10);
        if (*end || pid == (long)getpid() || !pid_gone(pid))
            continue;
        char p[8192];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (unlink(p) == 0) {
            removed++;
            ferry_log(FERRY_LOG_INFO, "%s: removed a temporary file left by process %ld, which "
                      "ended during a save", p, pid);
        }
    }
    closedir(d);
    return removed;
}

ferry_status ferry_atomic_open(ferry_atomic_file *f, const char *path)
{
    f->fd = -1;
    f->tmp[0] = '\0';
    ferry_status st = resolve_target(f, path);
    if (st != FERRY_OK)
        return st;
    path = f->path;
    ferry_atomic_clean_stale(path);
    /* The pid keeps two processes writing the same checkpoint off each other's
     * temporary file; the last rename wins, whole. */
    snprintf(f->tmp, sizeof f->tmp, "%s.tmp%ld", path, (long)getpid());
    if (!io_ok() || (f->fd = open(f->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0)
        return ferry_fail(FERRY_ERR_IO, "%s: cannot create: %s", f->tmp, strerror(errno));
    return FERRY_OK;
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

void ferry_atomic_abort(ferry_atomic_file *f)
{
    if (f->fd >= 0)
        close(f->fd);
    f->fd = -1;
    if (f->tmp[0])
        unlink(f->tmp);
}

/* The folder holding path, for its fsync ("." for a bare name). */
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
        unlink(f->tmp);
        return st;
    }
    if (!io_ok() || rename(f->tmp, f->path) != 0) {
        ferry_status st = ferry_fail(FERRY_ERR_IO, "cannot rename %s to %s: %s", f->tmp, f->path,
                                     strerror(errno));
        unlink(f->tmp);
        return st;
    }
    /* The rename itself is durable once the folder is synced. The new file is in
     * place either way; a failure here is reported, not undone. */
    char dir[4096];
    folder_of(f->path, dir, sizeof dir);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int ok = dfd >= 0 && io_ok() && fsync(dfd) == 0;
    int e = errno;
    if (dfd >= 0)
        close(dfd);
    if (!ok)
        return ferry_fail(FERRY_ERR_IO, "%s: written, but syncing its folder %s failed: %s", f->path,
                          dir, strerror(e));
    return FERRY_OK;
}

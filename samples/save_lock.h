/* The samples' --save lock: two runs saving to one FILE would overwrite each
 * other's checkpoints in turn, so the first takes FILE.lock and the second is
 * refused, saying who holds it.
 *
 * FILE may sit in a folder others can write, so the lock file is never
 * opened through a link and never written unless this process made it:
 * - it is created O_CREAT|O_EXCL|O_NOFOLLOW beside FILE, flock'd (held until
 *   the process ends, so a killed run holds none), and the pid written in;
 * - one that exists is opened O_RDONLY|O_NOFOLLOW only to test its flock and
 *   read its pid: held, it is another run's (refused); free and naming a
 *   process that is gone (or none, or this one), it is stale, and is removed
 *   (while this process holds its flock, and only if the name is still that
 *   file) and made afresh; free but naming a live process, it is refused,
 *   since that process may be a run on a file system without flock;
 * - a symbolic link (or anything but a file) at the name is an error naming
 *   it, and is left as it is;
 * - a clean exit (return from main, exit) removes the lock it made. */
#ifndef FERRY_SAMPLES_SAVE_LOCK_H
#define FERRY_SAMPLES_SAVE_LOCK_H

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* The lock this process holds (a program saves to one FILE). */
static struct save_lock {
    int fd;
    char path[4200];
    int at_exit; /* unlock_save is registered with atexit */
} save_lock = {-1, "", 0};

/* Whether fd is the file that path names now (not replaced or removed). */
static inline int save_lock_is_named(int fd, const char *path)
{
    struct stat a, b;
    return fstat(fd, &a) == 0 && lstat(path, &b) == 0 && a.st_dev == b.st_dev &&
           a.st_ino == b.st_ino;
}

/* Removes the lock this process made, if it still has the name. At exit. */
static inline void unlock_save(void)
{
    if (save_lock.fd < 0)
        return;
    if (save_lock_is_named(save_lock.fd, save_lock.path))
        unlink(save_lock.path);
    close(save_lock.fd);
    save_lock.fd = -1;
}

/* The pid written in the lock file at fd: > 0, or 0 when it holds none. */
static inline long save_lock_pid(int fd)
{
    char b[32];
    ssize_t n = pread(fd, b, sizeof b - 1, 0);
    b[n > 0 ? n : 0] = '\0';
    char *end;
    long pid = strtol(b, &end, 10);
    return end != b && (*end == '\n' || *end == '\0') && pid > 0 ? pid : 0;
}

/* A new lock file at fd (made O_EXCL): flock'd and named, the pid written.
 * 0; 1 when another process removed it first (try again); -1 after a line. */
static inline int save_lock_take(const char *prog, const char *path, int fd)
{
    /* A process that found it in the instant before the flock took it for
     * stale and removed it: then the name is no longer this file. */
    if (flock(fd, LOCK_EX | LOCK_NB) != 0 || !save_lock_is_named(fd, path)) {
        close(fd);
        return 1;
    }
    char pid[32];
    int k = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (pwrite(fd, pid, (size_t)k, 0) != k)
        fprintf(stderr, "%s: note: cannot write the pid into %s\n", prog, path);
    if (!save_lock.at_exit && atexit(unlock_save) == 0)
        save_lock.at_exit = 1;
    save_lock.fd = fd;
    snprintf(save_lock.path, sizeof save_lock.path, "%s", path);
    return 0;
}

/* The lock file that exists at path: 1 when it was stale and is removed (or
 * went away meanwhile), -1 after a line on stderr. */
static inline int save_lock_existing(const char *prog, const char *save, const char *path)
{
    struct stat sb;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT)
        return 1;
    if ((fd < 0 && errno == ELOOP) || (lstat(path, &sb) == 0 && S_ISLNK(sb.st_mode))) {
        fprintf(stderr, "%s: --save %s: %s is a symbolic link; not following it (whoever made it "
                "could point it at any file): remove it, or save elsewhere\n", prog, save, path);
    } else if (fd < 0) {
        fprintf(stderr, "%s: --save %s: cannot open %s: %s\n", prog, save, path, strerror(errno));
    } else if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fprintf(stderr, "%s: --save %s: %s is not a file: remove it, or save elsewhere\n", prog,
                save, path);
    } else {
        long pid = save_lock_pid(fd);
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
            fprintf(stderr, "%s: --save %s: another run (pid %ld) is saving to it (it holds %s); "
                    "stop it or save elsewhere\n", prog, save, pid, path);
        } else if (pid > 0 && pid != (long)getpid() && !(kill((pid_t)pid, 0) != 0 && errno == ESRCH)) {
            fprintf(stderr, "%s: --save %s: %s names pid %ld, which is running but holds no lock "
                    "on it: if it is not a run saving to %s, remove %s\n", prog, save, path, pid,
                    save, path);
        } else {
            /* Stale: its run is gone. Removed while its flock is held here, so
             * no other process can take it in between; only if the name is
             * still this file. */
            if (save_lock_is_named(fd, path))
                unlink(path);
            close(fd);
            return 1;
        }
    }
    if (fd >= 0)
        close(fd);
    return -1;
}

/* Takes the lock on FILE.lock for --save FILE: 0, or -1 after one line on
 * stderr naming it. */
static inline int lock_save(const char *prog, const char *save)
{
    char path[4200];
    if (snprintf(path, sizeof path, "%s.lock", save) >= (int)sizeof path) {
        fprintf(stderr, "%s: --save %s: the name is too long\n", prog, save);
        return -1;
    }
    for (int tries = 0; tries < 16; tries++) {
        int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        int r;
        if (fd >= 0)
            r = save_lock_take(prog, path, fd);
        else if (errno == EEXIST)
            r = save_lock_existing(prog, save, path);
        else {
            fprintf(stderr, "%s: --save %s: cannot create %s: %s\n", prog, save, path,
                    strerror(errno));
            return -1;
        }
        if (r <= 0)
            return r;
    }
    fprintf(stderr, "%s: --save %s: %s keeps being made and removed by other processes; save "
            "elsewhere\n", prog, save, path);
    return -1;
}

#endif

/* Lock and temporary files that no one else can plant (issue 36, item 9;
 * issue 37, item 5): the samples' --save lock (FILE.lock) never follows a
 * link at its name (an error naming it; the link's target unchanged, a
 * dangling link's target never made), is refused while another run holds it,
 * replaced when its run is gone (its pid, read from it, names no process),
 * and removed by a clean exit; ferry_atomic_open's temporary file never
 * follows a link planted at the name it used to have (PATH.tmpPID), and two
 * saves of the same file get different, unguessable names beside it. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../samples/save_lock.h"
#include "common/atomic_file.h"
#include "harness.h"

static const char VICTIM[] = "another file of the user's: must stay as it is\n";

static void assert_victim_unchanged(const char *victim)
{
    size_t n;
    char *b = ft_read_file(victim, &n);
    ASSERT_EQ_SIZE(n, strlen(VICTIM));
    ASSERT_MEM_EQ(b, VICTIM, n);
    free(b);
}

/* lock_save(save) with its stderr line captured into msg. */
static int lock_captured(const char *save, char *msg, size_t cap)
{
    const char *log = ft_tmp("lock/stderr.txt");
    ft_write_file(log, "", 0);
    fflush(stderr);
    int saved = dup(STDERR_FILENO), fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ASSERT(saved >= 0 && fd >= 0);
    dup2(fd, STDERR_FILENO);
    close(fd);
    int r = lock_save("test", save);
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    size_t n;
    char *b = ft_read_file(log, &n);
    snprintf(msg, cap, "%.*s", (int)n, b);
    free(b);
    return r;
}

/* The pid of a process that has ended (a reaped child's). */
static pid_t dead_pid(void)
{
    pid_t p = fork();
    ASSERT(p >= 0);
    if (p == 0)
        _exit(0);
    ASSERT(waitpid(p, NULL, 0) == p);
    return p;
}

static long pid_in(const char *path)
{
    size_t n;
    char *b = ft_read_file(path, &n);
    long pid = strtol(b, NULL, 10);
    free(b);
    return pid;
}

TEST(symlink_at_the_lock_name_is_an_error_and_not_followed)
{
    const char *save = ft_tmp("lock/a/model.st"), *victim = ft_tmp("lock/a/victim.txt");
    const char *absent = ft_tmp("lock/a/made-through-the-link");
    char lock[PATH_MAX], msg[2048];
    ft_write_file(victim, VICTIM, strlen(VICTIM));
    snprintf(lock, sizeof lock, "%s.lock", save);
    ASSERT_EQ_INT(symlink(victim, lock), 0);
    ASSERT_EQ_INT(lock_captured(save, msg, sizeof msg), -1);
    ASSERT_STR_CONTAINS(msg, lock);
    ASSERT_STR_CONTAINS(msg, "symbolic link");
    assert_victim_unchanged(victim);
    struct stat sb;
    ASSERT_EQ_INT(lstat(lock, &sb), 0);
    ASSERT(S_ISLNK(sb.st_mode)); /* left as it was */
    /* A dangling link: its target is not created. */
    ASSERT_EQ_INT(unlink(lock), 0);
    ASSERT_EQ_INT(symlink(absent, lock), 0);
    ASSERT_EQ_INT(lock_captured(save, msg, sizeof msg), -1);
    ASSERT_STR_CONTAINS(msg, "symbolic link");
    ASSERT_MSG(access(absent, F_OK) != 0, "%s was created through the link", absent);
}

TEST(stale_lock_of_a_dead_run_is_replaced)
{
    const char *save = ft_tmp("lock/b/model.st");
    char lock[PATH_MAX], msg[2048], body[32];
    snprintf(lock, sizeof lock, "%s.lock", save);
    snprintf(body, sizeof body, "%ld\n", (long)dead_pid());
    ft_write_file(lock, body, strlen(body));
    /* Held open here, the old file's inode cannot be reused by the new one. */
    int old = open(lock, O_RDONLY);
    ASSERT(old >= 0);
    ASSERT_EQ_INT(lock_captured(save, msg, sizeof msg), 0);
    ASSERT_EQ_INT(pid_in(lock), (long)getpid());
    struct stat was, now;
    ASSERT_EQ_INT(fstat(old, &was), 0);
    ASSERT_EQ_INT(stat(lock, &now), 0);
    ASSERT_MSG(was.st_nlink == 0 && was.st_ino != now.st_ino,
               "the stale file was written in place, not replaced");
    ASSERT_EQ_INT(pread(old, body, 8, 0) > 0, 1);
    ASSERT_EQ_INT(strtol(body, NULL, 10) != getpid(), 1); /* never written */
    close(old);
    unlock_save();
    ASSERT_MSG(access(lock, F_OK) != 0, "%s stays after unlock", lock);
}

/* A lock another process holds is refused, naming its pid; once that process
 * is killed (no clean exit: the file stays) the lock is stale and is taken. */
TEST(held_lock_is_refused_then_taken_once_its_run_is_killed)
{
    const char *save = ft_tmp("lock/c/model.st");
    char lock[PATH_MAX], msg[2048];
    snprintf(lock, sizeof lock, "%s.lock", save);
    ft_write_file(ft_tmp("lock/c/.keep"), "", 0);
    int go[2];
    ASSERT_EQ_INT(pipe(go), 0);
    pid_t child = fork();
    ASSERT(child >= 0);
    if (child == 0) {
        alarm(30); /* ends even if the test fails before it kills this */
        char c = lock_save("child", save) == 0 ? 'y' : 'n';
        (void)!write(go[1], &c, 1);
        pause();
        _exit(0);
    }
    char c = 0;
    ASSERT_EQ_INT(read(go[0], &c, 1), 1);
    int refused = c == 'y' ? lock_captured(save, msg, sizeof msg) : 0;
    if (refused != -1) /* the child must not outlive the test */
        kill(child, SIGKILL);
    ASSERT_EQ_INT(c, 'y');
    ASSERT_EQ_INT(refused, -1);
    ASSERT_STR_CONTAINS(msg, "another run");
    char want[64];
    snprintf(want, sizeof want, "pid %ld", (long)child);
    ASSERT_STR_CONTAINS(msg, want);
    kill(child, SIGKILL);
    ASSERT(waitpid(child, NULL, 0) == child);
    close(go[0]);
    close(go[1]);
    ASSERT_EQ_INT(access(lock, F_OK), 0); /* a kill leaves it */
    ASSERT_EQ_INT(lock_captured(save, msg, sizeof msg), 0);
    ASSERT_EQ_INT(pid_in(lock), (long)getpid());
    unlock_save();
}

/* Free of any flock, but naming a live process: not taken for stale (that
 * process may be a run where flock does nothing), and said so. */
TEST(unheld_lock_naming_a_live_process_is_refused)
{
    const char *save = ft_tmp("lock/d/model.st");
    char lock[PATH_MAX], msg[2048], body[32];
    snprintf(lock, sizeof lock, "%s.lock", save);
    snprintf(body, sizeof body, "%ld\n", (long)getppid());
    ft_write_file(lock, body, strlen(body));
    ASSERT_EQ_INT(lock_captured(save, msg, sizeof msg), -1);
    ASSERT_STR_CONTAINS(msg, "holds no lock");
    ASSERT_EQ_INT(pid_in(lock), (long)getppid());
}

/* The child's verdict, from an exit handler registered before lock_save's
 * (so it runs after it) and after the harness's (which would remove the
 * whole test folder: _exit here skips it). */
static char exit_lock[PATH_MAX];
static void lock_gone_at_exit(void)
{
    _exit(access(exit_lock, F_OK) != 0 ? 0 : 4);
}

TEST(clean_exit_removes_its_own_lock)
{
    const char *save = ft_tmp("lock/e/model.st");
    snprintf(exit_lock, sizeof exit_lock, "%s.lock", save);
    ft_write_file(ft_tmp("lock/e/.keep"), "", 0);
    pid_t child = fork();
    ASSERT(child >= 0);
    if (child == 0) {
        atexit(lock_gone_at_exit);
        save_lock.at_exit = 0; /* an earlier test's registration runs too late for the check */
        if (lock_save("child", save) != 0 || access(exit_lock, F_OK) != 0)
            _exit(3);
        exit(0); /* a clean exit: the handlers run */
    }
    int ws;
    ASSERT(waitpid(child, &ws, 0) == child);
    ASSERT_MSG(WIFEXITED(ws) && WEXITSTATUS(ws) != 3, "the child could not take the lock");
    ASSERT_MSG(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "%s stays after a clean exit", exit_lock);
    ASSERT_MSG(access(exit_lock, F_OK) != 0, "%s stays after a clean exit", exit_lock);
}

/* ---- ferry_atomic_open's temporary file ---- */

static void atomic_save(const char *path, const char *text)
{
    ferry_atomic_file f;
    ASSERT_OK(ferry_atomic_open(&f, path));
    ASSERT_OK(ferry_atomic_write(&f, text, strlen(text)));
    ASSERT_OK(ferry_atomic_commit(&f));
}

TEST(link_at_the_old_temporary_name_is_not_followed)
{
    const char *path = ft_tmp("atomic/ck.bin"), *victim = ft_tmp("atomic/victim.txt");
    char tmp[PATH_MAX];
    ft_write_file(victim, VICTIM, strlen(VICTIM));
    snprintf(tmp, sizeof tmp, "%s.tmp%ld", path, (long)getpid());
    ASSERT_EQ_INT(symlink(victim, tmp), 0);
    atomic_save(path, "new contents");
    assert_victim_unchanged(victim);
    struct stat sb;
    ASSERT_EQ_INT(lstat(path, &sb), 0);
    ASSERT_MSG(S_ISREG(sb.st_mode), "%s is not the file written", path);
    size_t n;
    char *b = ft_read_file(path, &n);
    ASSERT_EQ_SIZE(n, strlen("new contents"));
    ASSERT_MEM_EQ(b, "new contents", n);
    free(b);
}

TEST(temporary_names_are_unguessable_and_beside_the_target)
{
    const char *path = ft_tmp("atomic/two.bin");
    ft_write_file(path, "", 0);
    ferry_atomic_file a, b;
    ASSERT_OK(ferry_atomic_open(&a, path));
    ASSERT_OK(ferry_atomic_open(&b, path)); /* a's file is kept: its process lives */
    ASSERT(strcmp(a.tmp, b.tmp) != 0);
    char want[PATH_MAX];
    snprintf(want, sizeof want, "%s.tmp%ld-", path, (long)getpid());
    ASSERT_EQ_INT(strncmp(a.tmp, want, strlen(want)), 0);
    ASSERT_EQ_SIZE(strlen(a.tmp), strlen(want) + 16);
    ASSERT_EQ_INT(access(a.tmp, F_OK), 0);
    ASSERT_EQ_INT(access(b.tmp, F_OK), 0);
    ferry_atomic_abort(&a);
    ferry_atomic_abort(&b);
    ASSERT(access(a.tmp, F_OK) != 0 && access(b.tmp, F_OK) != 0);
}

/* A kill mid-save leaves PATH.tmpPID-RANDOM: the next save removes it. */
TEST(temporary_of_a_dead_process_is_removed)
{
    const char *path = ft_tmp("atomic/stale.bin");
    char stale[PATH_MAX];
    snprintf(stale, sizeof stale, "%s.tmp%ld-0123456789abcdef", path, (long)dead_pid());
    ft_write_file(stale, "partial", 7);
    atomic_save(path, "x");
    ASSERT_MSG(access(stale, F_OK) != 0, "%s is still there", stale);
}

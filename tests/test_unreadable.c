/* Image entries that cannot be read are reported, never dropped: a dangling link,
 * a folder or a FIFO named x.png, a file without read permission, a file deleted
 * between create and load. Each is a sample of the dataset; create warns about it
 * (naming the path and the reason); loading it fails with the path and the reason,
 * or, under on_error = SKIP, it is skipped and named in the loader's stats. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

/* The warnings logged while a test runs (the library's log hook). */
static char warnings[4096];
static size_t nwarnings;

static void keep_log(ferry_log_level level, const char *msg, void *user)
{
    (void)user;
    if (level < FERRY_LOG_WARN)
        return;
    nwarnings++;
    size_t used = strlen(warnings);
    snprintf(warnings + used, sizeof warnings - used, "%s\n", msg);
}

static void log_start(void)
{
    warnings[0] = '\0';
    nwarnings = 0;
    ferry_set_log(keep_log, NULL);
}

static void log_stop(void) { ferry_set_log(NULL, NULL); }

/* A w x h gray PNG of one value; makes the folders. */
static void put_png(const char *rel, uint8_t value, size_t w, size_t h)
{
    uint8_t px[16 * 16];
    memset(px, value, w * h);
    const char *p = ft_tmp(rel);
    ft_write_file(p, "", 0);
    ASSERT_OK(ferry_png_save(p, px, w, h, 1));
}

static void make_link(const char *target, const char *rel)
{
    ASSERT_MSG(symlink(target, ft_tmp(rel)) == 0, "symlink %s: %s", rel, strerror(errno));
}

/* get(index) must fail with FERRY_ERR_IO and a message "<...rel>: <reason...>". */
static void assert_get_fails(ferry_dataset *ds, size_t index, const char *rel, const char *reason)
{
    uint8_t out[16 * 16];
    char want[512];
    snprintf(want, sizeof want, "%s: %s", rel, reason);
    ASSERT_STATUS(ferry_dataset_get(ds, index, out, sizeof out, NULL, NULL), FERRY_ERR_IO);
    ASSERT_STR_CONTAINS(ferry_last_error(), want);
    ASSERT_STR_CONTAINS(ferry_last_error(), ft_tmpdir());
}

static void assert_get_value(ferry_dataset *ds, size_t index, uint8_t value)
{
    uint8_t out[16 * 16];
    ASSERT_OK(ferry_dataset_get(ds, index, out, sizeof out, NULL, NULL));
    ASSERT_EQ_INT(out[0], value);
}

TEST(dangling_link_is_a_sample_that_fails_by_name)
{
    /* Sorted: 0.png (the dangling link) comes first, so the image size must come
     * from 1.png, the first file that can be read. */
    ft_write_file(ft_tmp("dl/a/.keep"), "", 0);
    make_link("nowhere.png", "dl/a/0.png");
    put_png("dl/a/1.png", 7, 3, 2);
    put_png("dl/b/2.png", 9, 3, 2);
    log_start();
    ferry_dataset *ds;
    ASSERT_OK(ferry_dataset_image_folder(ft_tmp("dl"), NULL, &ds));
    log_stop();
    ASSERT_EQ_SIZE(ferry_dataset_len(ds), 3);
    ASSERT_EQ_SIZE(ferry_dataset_format(ds)->width, 3);
    ASSERT_EQ_SIZE(ferry_dataset_format(ds)->height, 2);
    ASSERT_STR_CONTAINS(ferry_dataset_sample_name(ds, 0), "dl/a/0.png");
    /* One warning at create, with the path, the reason and the count. */
    ASSERT_EQ_SIZE(nwarnings, 1);
    ASSERT_STR_CONTAINS(warnings, "1 of 3 image entries cannot be read");
    ASSERT_STR_CONTAINS(warnings, "dl/a/0.png: dangling symbolic link");
    assert_get_fails(ds, 0, "dl/a/0.png", "dangling symbolic link");
    assert_get_value(ds, 1, 7);
    assert_get_value(ds, 2, 9);
    int64_t label;
    ASSERT_OK(ferry_dataset_label(ds, 0, &label));
    ASSERT_EQ_INT(label, 0);
    ferry_dataset_release(ds);
}

TEST(folder_named_png_is_a_sample_that_fails_by_name)
{
    put_png("fd/a/0.png", 3, 2, 2);
    ft_write_file(ft_tmp("fd/a/x.png/inside.png"), "", 0); /* makes the folder x.png */
    log_start();
    ferry_dataset *ds;
    ASSERT_OK(ferry_dataset_image_folder(ft_tmp("fd"), NULL, &ds));
    log_stop();
    ASSERT_EQ_SIZE(ferry_dataset_len(ds), 2);
    ASSERT_STR_CONTAINS(warnings, "fd/a/x.png: is a directory");
    assert_get_value(ds, 0, 3);
    assert_get_fails(ds, 1, "fd/a/x.png", "is a directory");
    ferry_dataset_release(ds);
}

TEST(fifo_named_png_fails_without_blocking)
{
    put_png("ff/a/0.png", 4, 2, 2);
    ASSERT_MSG(mkfifo(ft_tmp("ff/a/p.png"), 0644) == 0, "mkfifo: %s", strerror(errno));
    /* Opening a FIFO for reading waits for a writer unless told not to: a hang
     * here would be the bug, so the alarm ends the program instead. */
    alarm(20);
    log_start();
    ferry_dataset *ds;
    ASSERT_OK(ferry_dataset_image_folder(ft_tmp("ff"), NULL, &ds));
    log_stop();
    ASSERT_STR_CONTAINS(warnings, "ff/a/p.png: is a FIFO");
    assert_get_fails(ds, 1, "ff/a/p.png", "is a FIFO");
    ferry_dataset_release(ds);
    /* A list file naming it, and the FIFO first: create reads past it. */
    const char *list = "a/p.png,0\na/0.png,1\n";
    ft_write_file(ft_tmp("ff/list.txt"), list, strlen(list));
    log_start();
    ASSERT_OK(ferry_dataset_list_file(ft_tmp("ff/list.txt"), NULL, &ds));
    log_stop();
    alarm(0);
    ASSERT_EQ_SIZE(nwarnings, 1);
    ASSERT_STR_CONTAINS(warnings, "ff/a/p.png: is a FIFO");
    assert_get_fails(ds, 0, "ff/a/p.png", "is a FIFO");
    assert_get_value(ds, 1, 4);
    ferry_dataset_release(ds);
}

/* Root reads files whatever their mode, so this one case cannot be made there;
 * the others (links, folders, FIFOs, deleted files) fail for root too. */
TEST(file_without_read_permission_fails_by_name)
{
    if (geteuid() == 0)
        SKIP("running as root, which ignores file permissions");
    put_png("pm/a/0.png", 5, 2, 2);
    put_png("pm/a/1.png", 6, 2, 2);
    ASSERT(chmod(ft_tmp("pm/a/1.png"), 0) == 0);
    ferry_dataset *ds;
    ASSERT_OK(ferry_dataset_image_folder(ft_tmp("pm"), NULL, &ds));
    ASSERT_EQ_SIZE(ferry_dataset_len(ds), 2);
    assert_get_value(ds, 0, 5);
    assert_get_fails(ds, 1, "pm/a/1.png", strerror(EACCES));
    ferry_dataset_release(ds);
    chmod(ft_tmp("pm/a/1.png"), 0644);
}

/* The check create makes, as a user without the permission: create warns,
 * naming the file and "Permission denied", and the dataset lists it as
 * unreadable (a FAIL loader then refuses it at create). Run in a child; as root
 * the child becomes nobody first (root reads anything). 0 when all held. */
static int unreadable_at_create_child(void)
{
    if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0))
        return 10;
    log_start();
    ferry_dataset *ds;
    if (ferry_dataset_image_folder(ft_tmp("pc"), NULL, &ds) != FERRY_OK)
        return 11;
    int rc = 0;
    char want[512];
    snprintf(want, sizeof want, "pc/a/1.png: %s", strerror(EACCES));
    if (nwarnings != 1 || !strstr(warnings, want))
        rc = 12;
    const char *first = NULL;
    if (rc == 0 && (ferry_dataset_unreadable_count(ds, &first) != 1 || !first || !strstr(first, "pc/a/1.png")))
        rc = 13;
    ferry_loader_config c = ferry_loader_config_default();
    c.dataset = ds;
    c.batch_size = 1;
    ferry_loader *l = NULL;
    if (rc == 0 && ferry_loader_create(&c, &l) != FERRY_ERR_IO)
        rc = 14;
    ferry_loader_destroy(l);
    ferry_dataset_release(ds);
    log_stop();
    return rc;
}

TEST(file_without_read_permission_is_caught_at_create)
{
    put_png("pc/a/0.png", 5, 2, 2);
    put_png("pc/a/1.png", 6, 2, 2);
    ASSERT(chmod(ft_tmp("pc/a/1.png"), 0) == 0);
    /* The child (nobody, as root) must reach the folder. */
    ASSERT(chmod(ft_tmpdir(), 0755) == 0);
    pid_t child = fork();
    ASSERT(child >= 0);
    if (child == 0)
        _exit(unreadable_at_create_child());
    int status = 0;
    ASSERT(waitpid(child, &status, 0) == child);
    ASSERT_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0,
               "the child's check %d failed (10: setuid; 11: create; 12: the warning; "
               "13: ferry_dataset_unreadable_count; 14: the loader)", WEXITSTATUS(status));
    chmod(ft_tmp("pc/a/1.png"), 0644);
}

TEST(list_file_entries_that_cannot_be_read_fail_by_name)
{
    put_png("lf/img/ok.png", 8, 2, 2);
    ft_write_file(ft_tmp("lf/img/dir.png/.keep"), "", 0);
    make_link("gone.png", "lf/img/link.png");
    /* The missing entry first: create takes the size from ok.png and says so. */
    const char *list = "img/missing.png,0\nimg/ok.png,1\nimg/dir.png,0\nimg/link.png,2\n";
    ft_write_file(ft_tmp("lf/list.txt"), list, strlen(list));
    log_start();
    ferry_dataset *ds;
    ASSERT_OK(ferry_dataset_list_file(ft_tmp("lf/list.txt"), NULL, &ds));
    log_stop();
    ASSERT_EQ_SIZE(ferry_dataset_len(ds), 4);
    ASSERT_EQ_SIZE(nwarnings, 1);
    ASSERT_STR_CONTAINS(warnings, "lf/img/missing.png: ");
    ASSERT_STR_CONTAINS(warnings, strerror(ENOENT));
    assert_get_fails(ds, 0, "lf/img/missing.png", strerror(ENOENT));
    assert_get_value(ds, 1, 8);
    assert_get_fails(ds, 2, "lf/img/dir.png", "is a directory");
    assert_get_fails(ds, 3, "lf/img/link.png", "dangling symbolic link");
    ferry_dataset_release(ds);
}

TEST(nothing_readable_fails_create_unless_the_size_is_given)
{
    ft_write_file(ft_tmp("nr/a/.keep"), "", 0);
    make_link("x", "nr/a/0.png");
    make_link("y", "nr/a/1.png");
    ferry_dataset *ds = NULL;
    log_start();
    ASSERT_STATUS(ferry_dataset_image_folder(ft_tmp("nr"), NULL, &ds), FERRY_ERR_IO);
    ASSERT_STR_CONTAINS(ferry_last_error(), "nr/a/0.png: dangling symbolic link");
    ASSERT_STR_CONTAINS(ferry_last_error(), "none of the 2 image files could be read");
    ASSERT(ds == NULL);
    ASSERT_EQ_SIZE(nwarnings, 0); /* the error says it all */
    /* With the size given nothing is read at create: a dataset, and a warning. */
    ferry_image_config cfg = ferry_image_config_default();
    cfg.channels = 1;
    cfg.height = cfg.width = 2;
    ASSERT_OK(ferry_dataset_image_folder(ft_tmp("nr"), &cfg, &ds));
    log_stop();
    ASSERT_EQ_SIZE(ferry_dataset_len(ds), 2);
    ASSERT_EQ_SIZE(nwarnings, 1);
    ASSERT_STR_CONTAINS(warnings, "2 of 2 image entries cannot be read, the first: ");
    ASSERT_STR_CONTAINS(warnings, "nr/a/0.png: dangling symbolic link");
    assert_get_fails(ds, 1, "nr/a/1.png", "dangling symbolic link");
    ferry_dataset_release(ds);
}

/* A clean folder warns about nothing. */
TEST(readable_folder_gives_no_warning)
{
    put_png("ok/a/0.png", 1, 2, 2);
    put_png("ok/b/1.png", 2, 2, 2);
    log_start();
    ferry_dataset *ds;
    ASSERT_OK(ferry_dataset_image_folder(ft_tmp("ok"), NULL, &ds));
    log_stop();
    ASSERT_EQ_SIZE(nwarnings, 0);
    ASSERT_EQ_SIZE(ferry_dataset_len(ds), 2);
    const char *first = "x";
    ASSERT_EQ_SIZE(ferry_dataset_unreadable_count(ds, &first), 0);
    ASSERT(first == NULL);
    ferry_dataset_release(ds);
}

static ferry_loader_config cpu_config(ferry_dataset *ds, size_t workers)
{
    ferry_loader_config c = ferry_loader_config_default();
    c.dataset = ds;
    c.batch_size = 2;
    c.num_workers = workers ? workers : FERRY_LOADER_NO_WORKERS;
    c.device = ferry_cpu();
    c.pin_memory = FERRY_PIN_MEMORY_OFF;
    c.out_dtype = FERRY_DTYPE_U8;
    return c;
}

/* Every delivered sample's bytes are those of the file of its index (values[i]),
 * and the deleted index never comes; returns the samples delivered. */
static size_t run_skip_epoch(ferry_loader *l, const uint8_t *values, size_t gone)
{
    ferry_batch b;
    ferry_status st;
    size_t delivered = 0;
    uint8_t px[2 * 4];
    while ((st = ferry_loader_next(l, NULL, &b)) == FERRY_OK) {
        ASSERT_OK(ferry_tensor_copy_to_host(b.images, px, b.size * 4));
        for (size_t k = 0; k < b.size; k++) {
            ASSERT(b.indices[k] != gone);
            ASSERT_EQ_INT(px[k * 4], values[b.indices[k]]);
        }
        delivered += b.size;
    }
    ASSERT_STATUS(st, FERRY_END);
    return delivered;
}

TEST(file_deleted_after_create_is_named_at_load)
{
    static const uint8_t values[4] = {10, 20, 30, 40};
    put_png("vz/a/0.png", values[0], 2, 2);
    put_png("vz/a/1.png", values[1], 2, 2);
    put_png("vz/b/2.png", values[2], 2, 2);
    put_png("vz/b/3.png", values[3], 2, 2);
    log_start();
    ferry_dataset *ds;
    ASSERT_OK(ferry_dataset_image_folder(ft_tmp("vz"), NULL, &ds));
    ASSERT_EQ_SIZE(nwarnings, 0);
    ASSERT(unlink(ft_tmp("vz/a/1.png")) == 0);
    assert_get_fails(ds, 1, "vz/a/1.png", strerror(ENOENT));
    for (size_t workers = 0; workers <= 2; workers += 2) {
        /* on_error = FAIL: the batch holding it fails, naming the file. */
        ferry_loader_config c = cpu_config(ds, workers);
        ferry_loader *l;
        ASSERT_OK(ferry_loader_create(&c, &l));
        ferry_batch b;
        ASSERT_STATUS(ferry_loader_next(l, NULL, &b), FERRY_ERR_IO);
        ASSERT_STR_CONTAINS(ferry_last_error(), "vz/a/1.png");
        ASSERT_STR_CONTAINS(ferry_last_error(), strerror(ENOENT));
        ferry_loader_destroy(l);
        /* on_error = SKIP: counted and named in the stats; the rest arrive intact. */
        c.on_error = FERRY_ON_ERROR_SKIP;
        ASSERT_OK(ferry_loader_create(&c, &l));
        ASSERT_EQ_SIZE(run_skip_epoch(l, values, 1), 4);
        ferry_loader_stats s;
        ASSERT_OK(ferry_loader_stats_get(l, &s));
        ASSERT_EQ_INT(s.skipped, 1);
        ASSERT_EQ_SIZE(s.num_skipped_names, 1);
        ASSERT_STR_CONTAINS(s.skipped_names[0], "vz/a/1.png");
        ferry_loader_destroy(l);
    }
    log_stop();
    ferry_dataset_release(ds);
}

TEST(dangling_link_under_skip_policy_is_counted_and_named)
{
    static const uint8_t values[3] = {50, 0, 70};
    put_png("sk/a/0.png", values[0], 2, 2);
    ft_write_file(ft_tmp("sk/b/.keep"), "", 0);
    make_link("../a/none.png", "sk/b/1.png");
    put_png("sk/b/2.png", values[2], 2, 2);
    log_start();
    ferry_dataset *ds;
    ASSERT_OK(ferry_dataset_image_folder(ft_tmp("sk"), NULL, &ds));
    ASSERT_EQ_SIZE(nwarnings, 1);
    ferry_loader_config c = cpu_config(ds, 1);
    c.on_error = FERRY_ON_ERROR_SKIP;
    ferry_loader *l;
    ASSERT_OK(ferry_loader_create(&c, &l));
    ASSERT_EQ_SIZE(run_skip_epoch(l, values, 1), 3);
    ferry_loader_stats s;
    ASSERT_OK(ferry_loader_stats_get(l, &s));
    ASSERT_EQ_INT(s.skipped, 1);
    ASSERT_EQ_SIZE(s.num_skipped_names, 1);
    ASSERT_STR_CONTAINS(s.skipped_names[0], "sk/b/1.png");
    ferry_loader_destroy(l);
    log_stop();
    /* The dataset knows, and says which. */
    const char *first = NULL;
    ASSERT_EQ_SIZE(ferry_dataset_unreadable_count(ds, &first), 1);
    ASSERT_STR_CONTAINS(first, "sk/b/1.png: dangling symbolic link");
    /* Under the fail policy the loader refuses it at create, naming the file,
     * instead of stopping when its turn comes. */
    c.on_error = FERRY_ON_ERROR_FAIL;
    l = NULL;
    ASSERT_STATUS(ferry_loader_create(&c, &l), FERRY_ERR_IO);
    ASSERT(!l);
    ASSERT_STR_CONTAINS(ferry_last_error(), "1 of the dataset's 3 files cannot be read");
    ASSERT_STR_CONTAINS(ferry_last_error(), "sk/b/1.png: dangling symbolic link");
    ferry_dataset_release(ds);
}

/* The remote-shard cache folder trusts no one but its user (issue 36, item
 * 1): a folder that is a symbolic link, writable by others or owned by
 * another user is refused, naming it; files in it are mode 0600 and created
 * without following a link planted at their name (a .part file, the kept
 * index, a record: the link's target stays as it was); a file planted at a
 * cached shard's name (or one whose bytes no longer match its record) is not
 * used: the data read is the server's; the default folder is
 * $XDG_CACHE_HOME/ferry, else ~/.cache/ferry, made 0700.
 *
 * The names planted are the ones the cache used before (ferry-ID.PID-SEQ.part,
 * ID an FNV hash of URL, ETag and size that anyone could compute): each test
 * here failed on that code. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/hash64.h"
#include "common/private_dir.h"
#include "dataset/remote/remote.h"
#include "harness.h"
#include "harness_http.h"

enum { PER = 6, IW = 8, IH = 6 };
static const char VICTIM[] = "the victim's own file: must stay as it is\n";

static void need_curl(void)
{
#ifndef FERRY_HAVE_CURL
    SKIP("built without libcurl (CURL=0): no URL is read");
#endif
}

/* Sample i: a small gray PNG made from i, labelled by a .cls member. */
static void add_sample(ft_tar *t, size_t i)
{
    uint8_t px[IW * IH];
    for (size_t j = 0; j < sizeof px; j++)
        px[j] = (uint8_t)(i * 37 + j * 5 + (j * j) % 11);
    char key[32];
    snprintf(key, sizeof key, "k%03zu", i);
    ft_tar_png_sample(t, key, px, IW, IH, i % 3, "trust/tmp.png");
}

/* The served folder, with s.tar in it (made once). */
static const char *www(void)
{
    static bool made;
    need_curl();
    if (!made) {
        ft_tar t = {0};
        for (size_t k = 0; k < PER; k++)
            add_sample(&t, k);
        ft_tar_end(&t);
        ft_tar_save(&t, "trust/www/s.tar");
        made = true;
    }
    return ft_tmp("trust/www");
}

static char *url_of(const ft_http *srv)
{
    static char url[256];
    snprintf(url, sizeof url, "%s/s.tar", ft_http_base(srv));
    return url;
}

/* A config whose cache is dir (absent: made by ferry). */
static ferry_image_config cfg_at(const char *dir)
{
    ferry_image_config c = ferry_image_config_default();
    c.remote_cache_dir = dir;
    c.remote_timeout_s = 2;
    c.remote_retries = 2;
    return c;
}

static ferry_status open_url(const char *url, const ferry_image_config *c, ferry_dataset **ds)
{
    const char *p[] = {url};
    return ferry_dataset_shards(p, 1, c, ds);
}

/* The name stem the cache gives url's object (as remote_cache.c computes it). */
static unsigned long long object_id(const char *url)
{
    ferry_remote_opts o = {.timeout_s = 2, .retries = 1};
    ferry_remote_counters cnt = {0};
    ferry_remote_obj obj;
    ASSERT_OK(ferry__remote_stat(url, &o, &cnt, &obj));
    uint64_t h = 1469598103934665603ull;
    const uint8_t *parts[3] = {(const uint8_t *)url, (const uint8_t *)obj.etag,
                               (const uint8_t *)&obj.size};
    size_t lens[3] = {strlen(url) + 1, strlen(obj.etag) + 1, sizeof obj.size};
    for (int k = 0; k < 3; k++)
        for (size_t i = 0; i < lens[k]; i++)
            h = (h ^ parts[k][i]) * 1099511628211ull;
    return h;
}

/* Every sample of ds (pixels and label) equal to the served shard's. */
static void assert_server_data(ferry_dataset *ds)
{
    const char *local = ft_tmp("trust/www/s.tar");
    ferry_dataset *ref;
    ASSERT_OK(ferry_dataset_shards(&local, 1, NULL, &ref));
    ASSERT_EQ_SIZE(ferry_dataset_len(ds), ferry_dataset_len(ref));
    size_t n = ferry_dataset_sample_bytes(ref);
    uint8_t *x = malloc(n), *y = malloc(n);
    for (size_t i = 0; i < ferry_dataset_len(ref); i++) {
        int64_t la, lb;
        ASSERT_OK(ferry_dataset_get(ds, i, x, n, NULL, &la));
        ASSERT_OK(ferry_dataset_get(ref, i, y, n, NULL, &lb));
        ASSERT_MEM_EQ(x, y, n);
        ASSERT_EQ_INT(la, lb);
    }
    free(x);
    free(y);
    ferry_dataset_release(ref);
}

static void assert_victim_unchanged(const char *victim)
{
    size_t n;
    char *b = ft_read_file(victim, &n);
    ASSERT_EQ_SIZE(n, strlen(VICTIM));
    ASSERT_MEM_EQ(b, VICTIM, n);
    free(b);
}

/* ---- the folder ---- */

TEST(cache_folder_that_is_a_symlink_is_refused)
{
    ft_http *srv = ft_http_start(www(), NULL);
    const char *real = ft_tmp("trust/real-cache"), *link = ft_tmp("trust/link-cache");
    ASSERT_EQ_INT(mkdir(real, 0700), 0);
    ASSERT_EQ_INT(symlink(real, link), 0);
    ferry_image_config c = cfg_at(link);
    ferry_dataset *ds = NULL;
    ASSERT_STATUS(open_url(url_of(srv), &c, &ds), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), link);
    ASSERT_STR_CONTAINS(ferry_last_error(), "symbolic link");
    ASSERT(ds == NULL);
    DIR *d = opendir(real);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) /* nothing written through it */
        ASSERT_MSG(e->d_name[0] == '.', "%s/%s written through the link", real, e->d_name);
    closedir(d);
    ft_http_stop(srv);
}

TEST(cache_folder_writable_by_others_is_refused_naming_it)
{
    ft_http *srv = ft_http_start(www(), NULL);
    const char *dir = ft_tmp("trust/open-cache");
    ASSERT_EQ_INT(mkdir(dir, 0700), 0);
    ASSERT_EQ_INT(chmod(dir, 0777), 0);
    ferry_image_config c = cfg_at(dir);
    ferry_dataset *ds = NULL;
    ASSERT_STATUS(open_url(url_of(srv), &c, &ds), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), dir);
    ASSERT_STR_CONTAINS(ferry_last_error(), "chmod go-w");
    /* Group-writable alone is as bad; the fix makes it usable. */
    ASSERT_EQ_INT(chmod(dir, 0770), 0);
    ASSERT_STATUS(open_url(url_of(srv), &c, &ds), FERRY_ERR_INVALID_ARG);
    ASSERT_EQ_INT(chmod(dir, 0755), 0);
    ASSERT_OK(open_url(url_of(srv), &c, &ds));
    ferry_dataset_release(ds);
    ft_http_stop(srv);
}

TEST(cache_folder_of_another_user_is_refused)
{
    if (geteuid() != 0)
        SKIP("not root: cannot give a folder to another user (run the suite as root)");
    ft_http *srv = ft_http_start(www(), NULL);
    const char *dir = ft_tmp("trust/their-cache");
    ASSERT_EQ_INT(mkdir(dir, 0700), 0);
    ASSERT_EQ_INT(chown(dir, 65534, 65534), 0);
    ferry_image_config c = cfg_at(dir);
    ferry_dataset *ds = NULL;
    ASSERT_STATUS(open_url(url_of(srv), &c, &ds), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), dir);
    ASSERT_STR_CONTAINS(ferry_last_error(), "owned by uid 65534");
    ft_http_stop(srv);
}

/* The attack as it happens: another user makes the cache folder first,
 * open to all (0777), in a folder everyone may write (a 1777 /tmp), and
 * leaves a file in it. The victim's ferry refuses the folder and writes
 * nothing into it. The other user is a forked child that drops to uid 65534
 * with setresuid (the suite runs as root in CI). */
TEST(cache_folder_made_first_by_another_user_is_refused)
{
    if (geteuid() != 0)
        SKIP("not root: cannot become another user to make the folder first (run the suite as root)");
    ft_http *srv = ft_http_start(www(), NULL);
    const char *shared = ft_tmp("trust/shared-tmp");
    ASSERT_EQ_INT(mkdir(shared, 0700), 0);
    ASSERT_EQ_INT(chmod(shared, 01777), 0);
    pid_t pid = fork();
    ASSERT_MSG(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) { /* the other user: only relative names below the shared folder */
        int ok = chdir(shared) == 0 && setresgid(65534, 65534, 65534) == 0 &&
                 setresuid(65534, 65534, 65534) == 0 && geteuid() == 65534 &&
                 mkdir("ferry-cache", 0777) == 0 && chmod("ferry-cache", 0777) == 0;
        int fd = ok ? open("ferry-cache/planted", O_CREAT | O_EXCL | O_WRONLY, 0666) : -1;
        _exit(fd >= 0 ? 0 : 1);
    }
    int ws = 0;
    ASSERT_EQ_INT(waitpid(pid, &ws, 0), pid);
    ASSERT_MSG(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "the other user could not make its folder");
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/ferry-cache", shared);
    struct stat sb;
    ASSERT_EQ_INT(stat(dir, &sb), 0);
    ASSERT_EQ_INT(sb.st_uid, 65534);
    ferry_image_config c = cfg_at(dir);
    ferry_dataset *ds = NULL;
    ASSERT_STATUS(open_url(url_of(srv), &c, &ds), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), dir);
    ASSERT_STR_CONTAINS(ferry_last_error(), "owned by uid 65534");
    /* Nothing of the victim's went into it: the planted file alone. */
    DIR *d = opendir(dir);
    ASSERT_MSG(d != NULL, "opendir %s", dir);
    size_t n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            ASSERT_STR_EQ(e->d_name, "planted");
            n++;
        }
    closedir(d);
    ASSERT_EQ_SIZE(n, 1);
    ft_http_stop(srv);
}

/* ---- the files in it ---- */

TEST(links_planted_at_cache_names_are_not_followed)
{
    ft_http *srv = ft_http_start(www(), NULL);
    const char *dir = ft_tmp("trust/planted-cache"), *victim = ft_tmp("trust/victim.txt");
    ft_write_file(victim, VICTIM, strlen(VICTIM));
    ASSERT_EQ_INT(mkdir(dir, 0700), 0);
    unsigned long long id = object_id(url_of(srv));
    char p[PATH_MAX];
    /* The old .part names (sequence numbers 0..3), the kept index and the record. */
    for (int seq = 0; seq < 4; seq++) {
        snprintf(p, sizeof p, "%s/ferry-%016llx.%ld-%d.part", dir, id, (long)getpid(), seq);
        ASSERT_EQ_INT(symlink(victim, p), 0);
    }
    const char *tails[] = {"ferry-index", "record"};
    for (int k = 0; k < 2; k++) {
        snprintf(p, sizeof p, "%s/ferry-%016llx.%s", dir, id, tails[k]);
        ASSERT_EQ_INT(symlink(victim, p), 0);
    }
    ferry_image_config c = cfg_at(dir);
    ferry_dataset *ds;
    ASSERT_OK(open_url(url_of(srv), &c, &ds)); /* downloads the shard to index it */
    assert_server_data(ds);
    ferry_dataset_release(ds);
    assert_victim_unchanged(victim);
    /* The index and the record were written: in place of the links. */
    for (int k = 0; k < 2; k++) {
        struct stat sb;
        snprintf(p, sizeof p, "%s/ferry-%016llx.%s", dir, id, tails[k]);
        ASSERT_EQ_INT(lstat(p, &sb), 0);
        ASSERT_MSG(S_ISREG(sb.st_mode), "%s is not a file of the cache's", p);
    }
    ft_http_stop(srv);
}

/* A copy of the served shard with one label changed (same size). */
static void plant_forged_shard(const char *at)
{
    size_t n;
    char *b = ft_read_file(ft_tmp("trust/www/s.tar"), &n);
    /* k000.cls holds "0": its data block follows its header. */
    char *hdr = memmem(b, n, "k000.cls", 8);
    ASSERT(hdr != NULL);
    ASSERT_EQ_INT(hdr[512], '0');
    hdr[512] = '2';
    ft_write_file(at, b, n);
    free(b);
}

TEST(file_planted_at_the_shard_name_is_not_used)
{
    ft_http *srv = ft_http_start(www(), NULL);
    const char *dir = ft_tmp("trust/forged-cache");
    ASSERT_EQ_INT(mkdir(dir, 0700), 0);
    unsigned long long id = object_id(url_of(srv));
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/ferry-%016llx.shard", dir, id);
    plant_forged_shard(p);
    ASSERT_EQ_INT(chmod(p, 0600), 0);
    ferry_image_config c = cfg_at(dir);
    ferry_dataset *ds;
    ASSERT_OK(open_url(url_of(srv), &c, &ds));
    assert_server_data(ds);
    ferry_remote_stats s;
    ASSERT(ferry__dataset_remote_stats(ds, &s));
    ASSERT_EQ_INT(s.downloads, 1);
    ferry_dataset_release(ds);
    ft_http_stop(srv);
}

/* A record that names the object but whose sum the file no longer has (the
 * file damaged, or replaced, after it was kept): fetched again. And a file
 * that does match its record is used without a download. */
TEST(cached_shard_is_used_only_when_its_bytes_match_the_record)
{
    ft_http *srv = ft_http_start(www(), NULL);
    const char *dir = ft_tmp("trust/record-cache");
    ferry_image_config c = cfg_at(dir);
    ferry_dataset *ds;
    ASSERT_OK(open_url(url_of(srv), &c, &ds));
    ferry_dataset_release(ds);
    unsigned long long id = object_id(url_of(srv));
    char p[PATH_MAX], ix[PATH_MAX];
    snprintf(ix, sizeof ix, "%s/ferry-%016llx.ferry-index", dir, id);
    ASSERT_EQ_INT(unlink(ix), 0); /* so that create reads the shard again */
    ASSERT_OK(open_url(url_of(srv), &c, &ds));
    ferry_remote_stats s;
    ASSERT(ferry__dataset_remote_stats(ds, &s));
    ASSERT_EQ_INT(s.downloads, 0); /* kept, recorded, matched */
    ferry_dataset_release(ds);
    snprintf(p, sizeof p, "%s/ferry-%016llx.shard", dir, id);
    ASSERT_EQ_INT(unlink(p), 0);
    plant_forged_shard(p); /* the record stays: it no longer matches */
    ASSERT_EQ_INT(chmod(p, 0600), 0);
    ASSERT_EQ_INT(unlink(ix), 0);
    ASSERT_OK(open_url(url_of(srv), &c, &ds));
    assert_server_data(ds);
    ASSERT(ferry__dataset_remote_stats(ds, &s));
    ASSERT_EQ_INT(s.downloads, 1);
    ferry_dataset_release(ds);
    ft_http_stop(srv);
}

TEST(cached_files_are_private)
{
    ft_http *srv = ft_http_start(www(), NULL);
    const char *dir = ft_tmp("trust/modes-cache");
    mode_t old = umask(0); /* the modes are ferry's own, not the umask's */
    ferry_image_config c = cfg_at(dir);
    ferry_dataset *ds;
    ASSERT_OK(open_url(url_of(srv), &c, &ds));
    ferry_dataset_release(ds);
    umask(old);
    struct stat sb;
    ASSERT_EQ_INT(stat(dir, &sb), 0);
    ASSERT_EQ_INT(sb.st_mode & 07777, 0700);
    DIR *d = opendir(dir);
    struct dirent *e;
    size_t files = 0;
    char p[PATH_MAX];
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        ASSERT_EQ_INT(lstat(p, &sb), 0);
        ASSERT_MSG((sb.st_mode & 07777) == 0600, "%s has mode %04o", p,
                   (unsigned)(sb.st_mode & 07777));
        files++;
    }
    closedir(d);
    ASSERT_EQ_SIZE(files, 3); /* the shard, its record, its index */
    ft_http_stop(srv);
}

/* ---- the default folder ---- */

static void set_or_unset(const char *name, const char *value)
{
    if (value)
        setenv(name, value, 1);
    else
        unsetenv(name);
}

/* Whether dir holds a cached shard (ferry-*.shard). */
static bool holds_a_shard(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    bool found = false;
    while (d && (e = readdir(d)) != NULL)
        found |= strncmp(e->d_name, "ferry-", 6) == 0 && strstr(e->d_name, ".shard") != NULL;
    if (d)
        closedir(d);
    return found;
}

static void assert_mode(const char *path, unsigned mode)
{
    struct stat sb;
    ASSERT_MSG(lstat(path, &sb) == 0, "%s: %s", path, strerror(errno));
    ASSERT_MSG(S_ISDIR(sb.st_mode) && (sb.st_mode & 07777) == mode, "%s: mode %04o, not %04o",
               path, (unsigned)(sb.st_mode & 07777), mode);
}

TEST(default_folder_follows_xdg_cache_home_then_home)
{
    ft_http *srv = ft_http_start(www(), NULL);
    char *saved[3];
    const char *names[3] = {"FERRY_CACHE_DIR", "XDG_CACHE_HOME", "HOME"};
    for (int k = 0; k < 3; k++)
        saved[k] = getenv(names[k]) ? strdup(getenv(names[k])) : NULL;
    unsetenv("FERRY_CACHE_DIR");
    char xdg[PATH_MAX], home[PATH_MAX], p[PATH_MAX + 32];
    snprintf(xdg, sizeof xdg, "%s", ft_tmp("trust/xdg"));
    snprintf(home, sizeof home, "%s", ft_tmp("trust/home"));
    ASSERT_EQ_INT(mkdir(xdg, 0755), 0);
    ASSERT_EQ_INT(mkdir(home, 0755), 0);
    ferry_image_config c = cfg_at(NULL);
    ferry_dataset *ds;
    /* XDG_CACHE_HOME, absolute: XDG_CACHE_HOME/ferry. */
    setenv("XDG_CACHE_HOME", xdg, 1);
    setenv("HOME", home, 1);
    ASSERT_OK(open_url(url_of(srv), &c, &ds));
    ferry_dataset_release(ds);
    snprintf(p, sizeof p, "%s/ferry", xdg);
    assert_mode(p, 0700);
    ASSERT_MSG(holds_a_shard(p), "no shard kept in %s", p);
    char want[PATH_MAX + 32];
    snprintf(want, sizeof want, "%s/ferry", xdg);
    ASSERT_OK(ferry_private_dir_default(p, sizeof p));
    ASSERT_STR_EQ(p, want);
    /* A relative XDG_CACHE_HOME is ignored (as the spec says): HOME/.cache/ferry,
     * its missing parent made 0700 too. */
    setenv("XDG_CACHE_HOME", "relative/cache", 1);
    ASSERT_OK(open_url(url_of(srv), &c, &ds));
    ferry_dataset_release(ds);
    snprintf(p, sizeof p, "%s/.cache", home);
    assert_mode(p, 0700);
    snprintf(p, sizeof p, "%s/.cache/ferry", home);
    assert_mode(p, 0700);
    ASSERT_MSG(holds_a_shard(p), "no shard kept in %s", p);
    /* FERRY_CACHE_DIR still moves it. */
    unsetenv("XDG_CACHE_HOME");
    snprintf(p, sizeof p, "%s/env-cache", xdg);
    setenv("FERRY_CACHE_DIR", p, 1);
    ASSERT_OK(open_url(url_of(srv), &c, &ds));
    ferry_dataset_release(ds);
    assert_mode(p, 0700);
    ASSERT_MSG(holds_a_shard(p), "no shard kept in %s", p);
    for (int k = 0; k < 3; k++) {
        set_or_unset(names[k], saved[k]);
        free(saved[k]);
    }
    ft_http_stop(srv);
}

/* ---- the helpers themselves ---- */

TEST(private_create_never_reuses_or_follows_a_name)
{
    const char *dir = ft_tmp("trust/create");
    int dfd;
    ASSERT_OK(ferry_private_dir_open(dir, true, "test folder", &dfd));
    char a[64], b[64];
    int fa = ferry_private_create(dfd, "x.", ".t", 0600, a, sizeof a);
    int fb = ferry_private_create(dfd, "x.", ".t", 0600, b, sizeof b);
    ASSERT(fa >= 0 && fb >= 0);
    ASSERT(strcmp(a, b) != 0); /* unpredictable: two calls, two names */
    ASSERT_EQ_SIZE(strlen(a), strlen("x.") + 16 + strlen(".t"));
    ASSERT_EQ_SIZE(strspn(a + 2, "0123456789abcdef"), 16);
    struct stat sb;
    ASSERT_EQ_INT(fstat(fa, &sb), 0);
    ASSERT_EQ_INT(sb.st_mode & 0777, 0600);
    close(fa);
    close(fb);
    close(dfd);
}

/* A link (or a file) already at the name drawn is never opened: O_EXCL
 * refuses it, O_NOFOLLOW would too, and another name is drawn. The part
 * files, records, indexes and atomic temporaries are all made this way. */
TEST(private_create_skips_a_name_already_taken)
{
    const char *dir = ft_tmp("trust/taken"), *victim = ft_tmp("trust/taken-victim.txt");
    const char *absent = ft_tmp("trust/taken-absent");
    ft_write_file(victim, VICTIM, strlen(VICTIM));
    int dfd;
    ASSERT_OK(ferry_private_dir_open(dir, true, "test folder", &dfd));
    char p[PATH_MAX], name[64];
    snprintf(p, sizeof p, "%s/x.%016llx.t", dir, 0x1234ull);
    ASSERT_EQ_INT(symlink(victim, p), 0);
    snprintf(p, sizeof p, "%s/x.%016llx.t", dir, 0x5678ull);
    ASSERT_EQ_INT(symlink(absent, p), 0); /* dangling: O_CREAT alone would make its target */
    ferry_debug_fix_random(0x1234ull, 1);
    int fd = ferry_private_create(dfd, "x.", ".t", 0600, name, sizeof name);
    ASSERT(fd >= 0);
    ASSERT(strcmp(name, "x.0000000000001234.t") != 0);
    ASSERT_EQ_INT(write(fd, "mine", 4), 4);
    close(fd);
    ferry_debug_fix_random(0x5678ull, 1);
    fd = ferry_private_create(dfd, "x.", ".t", 0600, name, sizeof name);
    ASSERT(fd >= 0);
    ASSERT_EQ_INT(write(fd, "mine", 4), 4);
    close(fd);
    ASSERT_EQ_INT(ferry_debug_fix_random(0, 0), 0);
    assert_victim_unchanged(victim);
    ASSERT_MSG(access(absent, F_OK) != 0, "%s was made through the link", absent);
    close(dfd);
}

/* The checksum: the same over any split of the bytes, and a change in any
 * one byte (or the length) changes it. */
TEST(hash64_is_split_invariant_and_sees_every_byte)
{
    uint8_t buf[203];
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (uint8_t)(i * 7 + 3);
    ferry_hash64 h;
    ferry_hash64_init(&h);
    ferry_hash64_update(&h, buf, sizeof buf);
    uint64_t whole = ferry_hash64_final(&h);
    for (size_t cut = 0; cut <= sizeof buf; cut += 13) {
        ferry_hash64_init(&h);
        ferry_hash64_update(&h, buf, cut);
        for (size_t i = cut; i < sizeof buf; i++) /* the rest a byte at a time */
            ferry_hash64_update(&h, buf + i, 1);
        ASSERT_EQ_INT(ferry_hash64_final(&h), whole);
    }
    for (size_t i = 0; i < sizeof buf; i++) {
        buf[i] ^= 0x10;
        ferry_hash64_init(&h);
        ferry_hash64_update(&h, buf, sizeof buf);
        ASSERT(ferry_hash64_final(&h) != whole);
        buf[i] ^= 0x10;
    }
    ferry_hash64_init(&h);
    ferry_hash64_update(&h, buf, sizeof buf - 1);
    ASSERT(ferry_hash64_final(&h) != whole);
}

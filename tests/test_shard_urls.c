/* Naming shards: WebDataset's brace notation (shard-{000000..000099}.tar,
 * {train,val}) expands in the paths, in list files and by URL, keeping the
 * zero padding, with a clear error for malformed braces and absurd ranges; a
 * URL of a folder is refused saying what to pass instead; and what `ferry
 * pack --upload` writes for a reader (OUT/urls.txt and the brace pattern,
 * tools/url_list.h) reads back the uploaded shards. Shards by URL are served
 * by the tests' HTTP server on 127.0.0.1. */
#include <stdlib.h>
#include <string.h>

#include "../tools/url_list.h"
#include "dataset/core/internal.h"
#include "dataset/remote/remote.h"
#include "dataset/shards/shards.h"
#include "harness.h"
#include "harness_http.h"

enum { NSH = 4, PER = 5, IW = 6, IH = 5 };

/* ---- the expansion itself ---- */

/* The names pattern gives, joined by spaces. */
static const char *expand(const char *pattern)
{
    static char out[4096];
    ferry_str_list l = {0};
    ASSERT_OK(ferry__brace_expand(pattern, strlen(pattern), &l));
    size_t w = 0;
    out[0] = '\0';
    for (size_t i = 0; i < l.n; i++)
        w += (size_t)snprintf(out + w, sizeof out - w, "%s%s", i ? " " : "", l.v[i]);
    ferry__str_list_free(&l);
    return out;
}

TEST(braces_expand_ranges_lists_and_padding)
{
    ASSERT_STR_EQ(expand("http://h/shard-{000000..000003}.tar"),
                  "http://h/shard-000000.tar http://h/shard-000001.tar "
                  "http://h/shard-000002.tar http://h/shard-000003.tar");
    ASSERT_STR_EQ(expand("s-{8..11}.tar"), "s-8.tar s-9.tar s-10.tar s-11.tar");
    ASSERT_STR_EQ(expand("s-{08..11}.tar"), "s-08.tar s-09.tar s-10.tar s-11.tar");
    ASSERT_STR_EQ(expand("s-{98..0101}.tar"), "s-0098.tar s-0099.tar s-0100.tar s-0101.tar");
    ASSERT_STR_EQ(expand("s-{3..1}.tar"), "s-3.tar s-2.tar s-1.tar");
    ASSERT_STR_EQ(expand("s-{7..7}.tar"), "s-7.tar");
    /* Groups left to right, the leftmost slowest (as braceexpand). */
    ASSERT_STR_EQ(expand("{train,val}-{0..1}.tar"), "train-0.tar train-1.tar val-0.tar val-1.tar");
    ASSERT_STR_EQ(expand("a{,-b}.tar"), "a.tar a-b.tar");
    ASSERT_STR_EQ(expand("plain.tar"), "plain.tar");
    /* 100000 names: the limit, allowed. */
    ferry_str_list l = {0};
    const char *big = "s-{000000..099999}.tar";
    ASSERT_OK(ferry__brace_expand(big, strlen(big), &l));
    ASSERT_EQ_SIZE(l.n, FERRY__BRACE_MAX);
    ASSERT_STR_EQ(l.v[l.n - 1], "s-099999.tar");
    ferry__str_list_free(&l);
}

static void refused(const char *pattern, ferry_status want, const char *why)
{
    ferry_str_list l = {0};
    ferry_status st = ferry__brace_expand(pattern, strlen(pattern), &l);
    ASSERT_MSG(st == want, "%s: %s, want %s (%s)", pattern, ferry_status_str(st),
               ferry_status_str(want), ferry_last_error());
    ASSERT_EQ_SIZE(l.n, 0);
    ASSERT_STR_CONTAINS(ferry_last_error(), pattern);
    ASSERT_STR_CONTAINS(ferry_last_error(), why);
    ferry__str_list_free(&l);
}

TEST(braces_errors_name_the_pattern)
{
    refused("s-{0..}.tar", FERRY_ERR_INVALID_ARG, "must be numbers");
    refused("s-{a..z}.tar", FERRY_ERR_INVALID_ARG, "must be numbers");
    refused("s-{}.tar", FERRY_ERR_INVALID_ARG, "empty group");
    refused("s-{0..10..2}.tar", FERRY_ERR_INVALID_ARG, "step");
    refused("s-{00}.tar", FERRY_ERR_INVALID_ARG, "neither a range");
    refused("s-{0..3.tar", FERRY_ERR_INVALID_ARG, "without its '}'");
    refused("s-0..3}.tar", FERRY_ERR_INVALID_ARG, "without its '{'");
    refused("s-{a,{b,c}}.tar", FERRY_ERR_INVALID_ARG, "nested");
    refused("s-{0..1234567890123456789}.tar", FERRY_ERR_INVALID_ARG, "1 to 18 digits");
    /* Absurd counts: one range, and a product of ranges. */
    refused("s-{000000..999999999}.tar", FERRY_ERR_LIMIT, "more than 100000 shards");
    refused("s-{0..999}-{0..999}.tar", FERRY_ERR_LIMIT, "more than 100000 shards");
    refused("{0..1}{0..1}{0..1}{0..1}{0..1}{0..1}{0..1}{0..1}{0..1}{0..1}{0..1}{0..1}{0..1}{0..1}"
            "{0..1}{0..1}{0..1}", FERRY_ERR_INVALID_ARG, "more than 16 groups");
}

/* ---- through the dataset ---- */

static void add_sample(ft_tar *t, size_t i)
{
    uint8_t px[IW * IH];
    for (size_t j = 0; j < sizeof px; j++)
        px[j] = (uint8_t)(i * 37 + j * 3);
    char key[32];
    snprintf(key, sizeof key, "k%03zu", i);
    ft_tar_png_sample(t, key, px, IW, IH, i % 3, "urls/tmp.png");
}

/* NSH shards named as ferry pack names them, in their own folder. */
static const char *shard_dir(void)
{
    static bool made;
    static char dir[600];
    snprintf(dir, sizeof dir, "%s", ft_tmp("urls/www"));
    if (made)
        return dir;
    for (size_t s = 0; s < NSH; s++) {
        ft_tar t = {0};
        for (size_t k = 0; k < PER; k++)
            add_sample(&t, s * PER + k);
        ft_tar_end(&t);
        char p[700];
        snprintf(p, sizeof p, "%s/shard-%06zu.tar", dir, s);
        ft_write_file(p, t.d, t.n);
        free(t.d);
    }
    made = true;
    return dir;
}

static ferry_dataset *open_folder(void)
{
    const char *dir = shard_dir();
    ferry_dataset *ds;
    ASSERT_OK(ferry_dataset_shards(&dir, 1, NULL, &ds));
    return ds;
}

/* Every sample of a and b equal, labels too. */
static void assert_same_samples(ferry_dataset *a, ferry_dataset *b, const char *what)
{
    ASSERT_MSG(ferry_dataset_len(a) == ferry_dataset_len(b), "%s: %zu samples, want %zu", what,
               ferry_dataset_len(b), ferry_dataset_len(a));
    size_t n = ferry_dataset_sample_bytes(a);
    uint8_t *x = malloc(n), *y = malloc(n);
    for (size_t i = 0; i < ferry_dataset_len(a); i++) {
        int64_t la, lb;
        ASSERT_OK(ferry_dataset_get(a, i, x, n, NULL, &la));
        ASSERT_OK(ferry_dataset_get(b, i, y, n, NULL, &lb));
        ASSERT_MEM_EQ(x, y, n);
        ASSERT_EQ_INT(la, lb);
    }
    free(x);
    free(y);
}

static ferry_image_config remote_cfg(void)
{
    static unsigned n;
    static char dir[4][256];
    char rel[64];
    snprintf(rel, sizeof rel, "urls/cache-%u", n);
    char *d = dir[n++ % 4];
    snprintf(d, 256, "%s", ft_tmp(rel));
    ferry_image_config c = ferry_image_config_default();
    c.remote_cache_dir = d;
    c.remote_timeout_s = 2;
    c.remote_retries = 1;
    return c;
}

TEST(brace_paths_and_list_lines_name_local_shards)
{
    ferry_dataset *folder = open_folder(), *ds;
    char pat[700], half[2][700];
    snprintf(pat, sizeof pat, "%s/shard-{000000..000003}.tar", shard_dir());
    const char *p = pat;
    ASSERT_OK(ferry_dataset_shards(&p, 1, NULL, &ds));
    assert_same_samples(folder, ds, "a brace path");
    ferry_dataset_release(ds);
    ASSERT_OK(ferry_dataset_open(pat, NULL, &ds)); /* the one-path form */
    assert_same_samples(folder, ds, "ferry_dataset_open of a brace path");
    ferry_dataset_release(ds);
    /* Two patterns, and a list file's relative brace lines. */
    snprintf(half[0], sizeof half[0], "%s/shard-{000000..000001}.tar", shard_dir());
    snprintf(half[1], sizeof half[1], "%s/shard-00000{2,3}.tar", shard_dir());
    const char *two[2] = {half[0], half[1]};
    ASSERT_OK(ferry_dataset_shards(two, 2, NULL, &ds));
    assert_same_samples(folder, ds, "two brace paths");
    ferry_dataset_release(ds);
    char list[700];
    snprintf(list, sizeof list, "%s/list.txt", shard_dir());
    const char *text = "# two lines of braces\nshard-{000000..000002}.tar\nshard-{000003..000003}.tar\n";
    ft_write_file(list, text, strlen(text));
    p = list;
    ASSERT_OK(ferry_dataset_shards(&p, 1, NULL, &ds));
    assert_same_samples(folder, ds, "a list file's brace lines");
    ferry_dataset_release(ds);
    /* A malformed line is named with its list file. */
    text = "shard-{000000..}.tar\n";
    ft_write_file(list, text, strlen(text));
    ASSERT_STATUS(ferry_dataset_shards(&p, 1, NULL, &ds), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), list);
    ASSERT_STR_CONTAINS(ferry_last_error(), "malformed braces");
    remove(list);
    ferry_dataset_release(folder);
}

static void need_curl(void)
{
#ifndef FERRY_HAVE_CURL
    SKIP("built without libcurl (CURL=0)");
#endif
}

TEST(brace_urls_read_the_shards_on_disk)
{
    need_curl();
    ft_http *srv = ft_http_start(shard_dir(), NULL);
    ferry_dataset *folder = open_folder(), *ds;
    char pat[2][400], list[700];
    snprintf(pat[0], sizeof pat[0], "%s/shard-{000000..000003}.tar", ft_http_base(srv));
    ferry_image_config c = remote_cfg();
    ASSERT_OK(ferry_dataset_open(pat[0], &c, &ds));
    assert_same_samples(folder, ds, "a brace URL");
    ferry_dataset_release(ds);
    snprintf(pat[0], sizeof pat[0], "%s/shard-{000000..000001}.tar", ft_http_base(srv));
    snprintf(pat[1], sizeof pat[1], "%s/shard-{000002..000003}.tar", ft_http_base(srv));
    const char *two[2] = {pat[0], pat[1]};
    c = remote_cfg();
    ASSERT_OK(ferry_dataset_shards(two, 2, &c, &ds));
    assert_same_samples(folder, ds, "two brace URLs");
    ferry_dataset_release(ds);
    snprintf(list, sizeof list, "%s", ft_tmp("urls/brace-urls.txt"));
    char text[600];
    snprintf(text, sizeof text, "%s/shard-{000000..000003}.tar\n", ft_http_base(srv));
    ft_write_file(list, text, strlen(text));
    const char *p = list;
    c = remote_cfg();
    ASSERT_OK(ferry_dataset_shards(&p, 1, &c, &ds));
    assert_same_samples(folder, ds, "a list file's brace URL");
    ferry_dataset_release(ds);
    ferry_dataset_release(folder);
    ft_http_stop(srv);
}

/* Refused before any request (no server at port 1), in each form. */
TEST(folder_url_is_refused_saying_what_to_pass)
{
    const char *url = "http://127.0.0.1:1/shards/";
    ferry_dataset *ds = NULL;
    ferry_image_config c = remote_cfg();
    for (int form = 0; form < 3; form++) {
        ferry_status st;
        if (form == 0) {
            st = ferry_dataset_shards(&url, 1, &c, &ds);
        } else if (form == 1) {
            st = ferry_dataset_open(url, &c, &ds);
        } else {
            const char *list = ft_tmp("urls/folder-url.txt");
            ft_write_file(list, url, strlen(url));
            st = ferry_dataset_shards(&list, 1, &c, &ds);
        }
        ASSERT_MSG(st == FERRY_ERR_INVALID_ARG, "form %d: %s (%s)", form, ferry_status_str(st),
                   ferry_last_error());
            ASSERT_STR_CONTAINS(ferry_last_error(), url);
        ASSERT_STR_CONTAINS(ferry_last_error(), "a folder by URL cannot be read");
        ASSERT_STR_CONTAINS(ferry_last_error(), "shard-{000000..000099}.tar");
        ASSERT_STR_CONTAINS(ferry_last_error(), "list file");
        if (form == 2)
            ASSERT_STR_CONTAINS(ferry_last_error(), "folder-url.txt");
    }
}

/* ---- what ferry pack --upload writes for a reader ---- */

/* The shards PUT under BASE/up/ (as pack's upload does), then OUT/urls.txt
 * and the pattern from tools/url_list.h, for a base URL given with a
 * trailing slash: each reads back the shards on disk. */
TEST(pack_url_list_and_pattern_read_the_uploaded_shards)
{
    need_curl();
    const char *dir = shard_dir();
    ft_write_file(ft_tmp("urls/srv/up/.made"), "", 0);
    ft_http *srv = ft_http_start(ft_tmp("urls/srv"), NULL);
    char base[300], url[400], path[700];
    snprintf(base, sizeof base, "%s/up/", ft_http_base(srv));
    ferry_remote_opts o = {.timeout_s = 2, .retries = 1, .backoff_s = 0.01};
    for (size_t s = 0; s < NSH; s++) {
        snprintf(path, sizeof path, "%s/shard-%06zu.tar", dir, s);
        snprintf(url, sizeof url, "%.*sshard-%06zu.tar", (int)strlen(base), base, s);
        ASSERT_OK(ferry__remote_put(url, path, &o));
    }
    const char *list = ft_tmp("urls/out/urls.txt");
    ft_write_file(list, "", 0);
    ASSERT_EQ_INT(url_list_write(list, base, NSH), 0);
    char pattern[600], want[600];
    ASSERT_EQ_INT(url_list_pattern(pattern, sizeof pattern, base, NSH), 0);
    snprintf(want, sizeof want, "%s/up/shard-{000000..000003}.tar", ft_http_base(srv));
    ASSERT_STR_EQ(pattern, want);
    ferry_dataset *folder = open_folder(), *ds;
    ferry_image_config c = remote_cfg();
    ASSERT_OK(ferry_dataset_open(list, &c, &ds));
    assert_same_samples(folder, ds, "pack's urls.txt");
    ferry_dataset_release(ds);
    c = remote_cfg();
    ASSERT_OK(ferry_dataset_open(pattern, &c, &ds));
    assert_same_samples(folder, ds, "pack's pattern");
    ferry_dataset_release(ds);
    /* One shard: no braces. */
    ASSERT_EQ_INT(url_list_pattern(pattern, sizeof pattern, base, 1), 0);
    snprintf(want, sizeof want, "%s/up/shard-000000.tar", ft_http_base(srv));
    ASSERT_STR_EQ(pattern, want);
    ferry_dataset_release(folder);
    ft_http_stop(srv);
}

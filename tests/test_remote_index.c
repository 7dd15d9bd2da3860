/* The indexes the remote cache keeps for shards it downloaded to index them
 * (ferry-HEX.ferry-index in the cache folder): their bytes count against the
 * cache's budget (held_bytes), they are deleted with their shards when those
 * are evicted, and an index found at create counts too. Shards by URL from the
 * tests' own HTTP server on 127.0.0.1, with no index beside them. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dataset/remote/remote.h"
#include "harness.h"
#include "harness_http.h"

enum { NSHARDS = 6, PER = 10, IW = 8, IH = 6 };

static void need_curl(void)
{
#ifndef FERRY_HAVE_CURL
    SKIP("built without libcurl (CURL=0)");
#endif
}

/* NSHARDS plain shards of PER small gray PNGs in ft_tmp("rindex/www"), once. */
static const char *www(void)
{
    static bool made;
    need_curl();
    if (!made) {
        for (size_t s = 0; s < NSHARDS; s++) {
            ft_tar t = {0};
            for (size_t k = 0; k < PER; k++) {
                size_t i = s * PER + k;
                uint8_t px[IW * IH];
                for (size_t j = 0; j < sizeof px; j++)
                    px[j] = (uint8_t)(i * 29 + j * 5);
                char key[32];
                snprintf(key, sizeof key, "k%03zu", i);
                ft_tar_png_sample(&t, key, px, IW, IH, (int)(i % 3), "rindex/tmp.png");
            }
            ft_tar_end(&t);
            char rel[64];
            snprintf(rel, sizeof rel, "rindex/www/s%zu.tar", s);
            ft_tar_save(&t, rel);
        }
        made = true;
    }
    return ft_tmp("rindex/www");
}

static size_t shard_bytes(size_t s)
{
    char rel[64];
    snprintf(rel, sizeof rel, "rindex/www/s%zu.tar", s);
    size_t n;
    free(ft_read_file(ft_tmp(rel), &n));
    return n;
}

static ferry_status open_urls(const char *base, const char *cache, size_t budget,
                              ferry_dataset **ds)
{
    static char urls[NSHARDS][256];
    const char *p[NSHARDS];
    for (size_t s = 0; s < NSHARDS; s++) {
        snprintf(urls[s], sizeof urls[s], "%s/s%zu.tar", base, s);
        p[s] = urls[s];
    }
    ferry_image_config c = ferry_image_config_default();
    c.remote_cache_dir = cache;
    c.remote_cache_bytes = budget;
    c.remote_timeout_s = 1;
    return ferry_dataset_shards(p, NSHARDS, &c, ds);
}

/* The bytes and count of the cache folder's files ending in suffix; with
 * hexes, the names' ferry-HEX parts (17 characters each, n of them). */
static size_t files_of(const char *dir, const char *suffix, size_t *bytes, char hexes[][24])
{
    DIR *d = opendir(dir);
    ASSERT(d);
    size_t n = 0;
    *bytes = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name), k = strlen(suffix);
        if (l < k || strcmp(e->d_name + l - k, suffix))
            continue;
        char p[800];
        struct stat sb;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        ASSERT_EQ_INT(stat(p, &sb), 0);
        *bytes += (size_t)sb.st_size;
        if (hexes && n < NSHARDS * 2)
            snprintf(hexes[n], sizeof hexes[0], "%.22s", e->d_name);
        n++;
    }
    closedir(d);
    return n;
}

static ferry_remote_stats stats_of(const ferry_dataset *ds)
{
    ferry_remote_stats s;
    ASSERT(ferry__dataset_remote_stats(ds, &s));
    return s;
}

/* Waits (5 s at most) until the fetch threads have renamed their last
 * files: a shard is read while its record is still being written. */
static void settle(const char *dir)
{
    size_t b;
    for (int i = 0; i < 100 && files_of(dir, ".part", &b, NULL) > 0; i++)
        usleep(50000);
    ASSERT_EQ_SIZE(files_of(dir, ".part", &b, NULL), 0);
}

/* A fresh cache folder under ft_tmp. */
static const char *cache_dir(const char *name)
{
    static char d[4][512];
    static unsigned n;
    char *out = d[n++ % 4], rel[128];
    snprintf(rel, sizeof rel, "rindex/%s", name);
    snprintf(out, sizeof d[0], "%s", ft_tmp(rel));
    ft_write_file(ft_tmp("rindex/.made"), "", 0);
    return out;
}

/* A budget of two shards and a little: create downloads all six to index
 * them, so four are evicted, and their indexes with them. What the cache
 * says it holds is what its folder holds, shards and indexes, within the
 * budget; every index left has its shard beside it. */
TEST(indexes_count_against_the_budget_and_go_with_their_shards)
{
    ft_http *srv = ft_http_start(www(), NULL);
    size_t biggest = shard_bytes(0); /* all six hold PER images of one size */
    for (size_t s = 1; s < NSHARDS; s++)
        ASSERT_EQ_SIZE(shard_bytes(s), biggest);
    const char *dir = cache_dir("budget");
    size_t budget = 2 * biggest + biggest / 2;
    ferry_dataset *ds;
    ASSERT_OK(open_urls(ft_http_base(srv), dir, budget, &ds));
    settle(dir);
    ferry_remote_stats s = stats_of(ds);
    ASSERT_EQ_INT(s.downloads, NSHARDS);
    ASSERT_MSG(s.evictions >= NSHARDS - 2, "%llu evictions", (unsigned long long)s.evictions);
    size_t shard_b, index_b;
    char shard_hex[NSHARDS * 2][24], index_hex[NSHARDS * 2][24];
    size_t nshard = files_of(dir, ".shard", &shard_b, shard_hex);
    size_t nindex = files_of(dir, ".ferry-index", &index_b, index_hex);
    ASSERT(nindex > 0);
    ASSERT_MSG(nindex <= nshard, "%zu indexes kept for %zu shards", nindex, nshard);
    for (size_t i = 0; i < nindex; i++) {
        bool beside = false;
        for (size_t j = 0; j < nshard; j++)
            beside |= !strcmp(index_hex[i], shard_hex[j]);
        ASSERT_MSG(beside, "the index %s.ferry-index outlived its shard", index_hex[i]);
    }
    ASSERT_MSG(s.held_bytes == shard_b + index_b, "held %zu bytes; the folder has %zu of shards "
               "and %zu of indexes", s.held_bytes, shard_b, index_b);
    ASSERT_MSG(s.held_peak <= budget, "held %zu bytes at most, budget %zu", s.held_peak, budget);
    ferry_dataset_release(ds);
    ft_http_stop(srv);
}

/* A roomy budget keeps every shard and index; a later create of the same
 * objects finds the indexes (no download) and holds their bytes at once. */
TEST(indexes_found_at_create_count_too)
{
    ft_http *srv = ft_http_start(www(), NULL);
    const char *dir = cache_dir("found");
    ferry_dataset *a, *b;
    ASSERT_OK(open_urls(ft_http_base(srv), dir, (size_t)1 << 30, &a));
    settle(dir);
    ferry_remote_stats s = stats_of(a);
    size_t shard_b, index_b;
    ASSERT_EQ_SIZE(files_of(dir, ".ferry-index", &index_b, NULL), NSHARDS);
    ASSERT_EQ_SIZE(files_of(dir, ".shard", &shard_b, NULL), NSHARDS);
    ASSERT_EQ_SIZE(s.held_bytes, shard_b + index_b);
    ferry_dataset_release(a);
    ASSERT_OK(open_urls(ft_http_base(srv), dir, (size_t)1 << 30, &b));
    s = stats_of(b);
    ASSERT_EQ_INT(s.downloads, 0);
    ASSERT_EQ_SIZE(s.held_bytes, index_b);
    ferry_dataset_release(b);
    ft_http_stop(srv);
}

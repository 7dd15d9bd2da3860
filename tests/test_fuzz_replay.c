/* Replays the fuzz corpora (tests/fuzz/corpus/<target>/), the crashers
 * (tests/data/crashers/<target>/) and, for PNG, PngSuite through the fuzz
 * targets of tests/fuzz/, built with the ordinary compiler and sanitizers.
 * Each target's LLVMFuzzerTestOneInput is included here under its own name. */
#include <dirent.h>
#include <limits.h>
#include <stdlib.h>

#include "harness.h"

#define LLVMFuzzerTestOneInput ferry_fuzz_png
#include "fuzz/fuzz_png.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput ferry_fuzz_idx
#include "fuzz/fuzz_idx.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput ferry_fuzz_list
#include "fuzz/fuzz_list.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput ferry_fuzz_device
#include "fuzz/fuzz_device.c"
#undef LLVMFuzzerTestOneInput

typedef int (*fuzz_fn)(const uint8_t *data, size_t size);

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Runs fn over every regular file in dir (sorted, hidden files and README skipped)
 * whose name ends with suffix (NULL: any); returns how many; -1 when dir is absent. */
static long replay_dir(fuzz_fn fn, const char *dir, const char *suffix)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (e->d_name[0] == '.' || !strncmp(e->d_name, "README", 6))
            continue;
        if (suffix && (len < strlen(suffix) || strcmp(e->d_name + len - strlen(suffix), suffix)))
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            names = realloc(names, cap * sizeof *names);
            ASSERT(names);
        }
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    if (n)
        qsort(names, n, sizeof *names, by_name);
    long count = 0;
    for (size_t i = 0; i < n; i++) {
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        size_t len = 0;
        void *data = ft_read_file(path, &len);
        int rc = fn(data, len);
        free(data);
        ASSERT_MSG(rc == 0, "%s: the target returned %d", path, rc);
        count++;
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return count;
}

static void replay_corpus(fuzz_fn fn, const char *target)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/tests/fuzz/corpus/%s", FERRY_SOURCE_DIR, target);
    long n = replay_dir(fn, dir, NULL);
    ASSERT_MSG(n > 0, "%s: no seed corpus", dir);
}

/* Crashers are optional: a target with none passes. */
static void replay_crashers(fuzz_fn fn, const char *target)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/tests/data/crashers/%s", FERRY_SOURCE_DIR, target);
    (void)replay_dir(fn, dir, NULL);
}

TEST(replay_png_corpus) { replay_corpus(ferry_fuzz_png, "png"); }
TEST(replay_png_crashers) { replay_crashers(ferry_fuzz_png, "png"); }
TEST(replay_png_pngsuite)
{
    const char *dir = ft_pngsuite_dir();
    if (!dir)
        SKIP("PngSuite not found (set FERRY_PNGSUITE)");
    long n = replay_dir(ferry_fuzz_png, dir, ".png");
    ASSERT_MSG(n > 100, "%s: only %ld PNG files", dir, n);
}
TEST(replay_idx_corpus) { replay_corpus(ferry_fuzz_idx, "idx"); }
TEST(replay_idx_crashers) { replay_crashers(ferry_fuzz_idx, "idx"); }
TEST(replay_list_corpus) { replay_corpus(ferry_fuzz_list, "list"); }
TEST(replay_list_crashers) { replay_crashers(ferry_fuzz_list, "list"); }
TEST(replay_device_corpus) { replay_corpus(ferry_fuzz_device, "device"); }
TEST(replay_device_crashers) { replay_crashers(ferry_fuzz_device, "device"); }

/* Replays the fuzz corpora (tests/fuzz/corpus/<target>/), the crashers
 * (tests/data/crashers/<target>/; JPEG included) and, for PNG, PngSuite through the fuzz
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
#define LLVMFuzzerTestOneInput ferry_fuzz_tar
#include "fuzz/fuzz_tar.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput ferry_fuzz_jpeg
#include "fuzz/fuzz_jpeg.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput ferry_fuzz_index
#include "fuzz/fuzz_index.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput ferry_fuzz_npy
#include "fuzz/fuzz_npy.c"
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

/* The seed corpus must be there; crashers kept after a fix (the folder exists
 * only once one has been found) are replayed with it, so a target's test always
 * has inputs to check. */
static void replay_target(fuzz_fn fn, const char *target)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/tests/fuzz/corpus/%s", FERRY_SOURCE_DIR, target);
    long n = replay_dir(fn, dir, NULL);
    ASSERT_MSG(n > 0, "%s: no seed corpus", dir);
    snprintf(dir, sizeof dir, "%s/tests/data/crashers/%s", FERRY_SOURCE_DIR, target);
    long c = replay_dir(fn, dir, NULL);
    if (c > 0)
        printf("  %s: %ld corpus inputs, %ld crashers\n", target, n, c);
}

TEST(replay_png) { replay_target(ferry_fuzz_png, "png"); }
TEST(replay_png_pngsuite)
{
    const char *dir = ft_pngsuite_dir();
    if (!dir)
        ft_skip_missing("data", "PngSuite not found (set FERRY_PNGSUITE)");
    long n = replay_dir(ferry_fuzz_png, dir, ".png");
    ASSERT_MSG(n > 100, "%s: only %ld PNG files", dir, n);
}
TEST(replay_idx) { replay_target(ferry_fuzz_idx, "idx"); }
TEST(replay_list) { replay_target(ferry_fuzz_list, "list"); }
TEST(replay_device) { replay_target(ferry_fuzz_device, "device"); }
TEST(replay_tar) { replay_target(ferry_fuzz_tar, "tar"); }
TEST(replay_jpeg) { replay_target(ferry_fuzz_jpeg, "jpeg"); }
TEST(replay_index) { replay_target(ferry_fuzz_index, "index"); }
TEST(replay_npy) { replay_target(ferry_fuzz_npy, "npy"); }

/* The NPY parser against files NumPy wrote (tests/data/npy/, made by
 * tests/ref/gen_npy.py): each good file's dtype, shape and data bytes equal
 * what NumPy says (X.bin: arr.tobytes()), and each bad one fails with the
 * status and words its MANIFEST line gives, naming the file. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "dataset/fields/npy.h"

static uint8_t *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    ASSERT_MSG(f, "cannot open %s", path);
    uint8_t *buf = malloc(1 << 16);
    *n = fread(buf, 1, 1 << 16, f);
    fclose(f);
    return buf;
}

static ferry_dtype dtype_named(const char *s)
{
    for (int d = 0; d < FERRY_DTYPE_COUNT; d++)
        if (!strcmp(ferry_dtype_name((ferry_dtype)d), s))
            return (ferry_dtype)d;
    ft_fail(__FILE__, __LINE__, "unknown dtype %s", s);
}

static ferry_status status_named(const char *s)
{
    if (!strcmp(s, "FORMAT"))
        return FERRY_ERR_FORMAT;
    if (!strcmp(s, "UNSUPPORTED"))
        return FERRY_ERR_UNSUPPORTED;
    if (!strcmp(s, "LIMIT"))
        return FERRY_ERR_LIMIT;
    ft_fail(__FILE__, __LINE__, "unknown status %s", s);
}

static void check_good(const char *dir, char *rest, const char *name)
{
    char path[1100], *save = NULL;
    snprintf(path, sizeof path, "%s/%s.npy", dir, name);
    size_t n, nb;
    uint8_t *d = slurp(path, &n);
    snprintf(path, sizeof path, "%s/%s.bin", dir, name);
    uint8_t *want = slurp(path, &nb);
    ferry_npy a;
    ASSERT_OK(ferry__npy_parse(d, n, name, &a));
    ASSERT_EQ_INT(a.dtype, dtype_named(strtok_r(rest, " ", &save)));
    ASSERT_EQ_SIZE(a.ndim, strtoul(strtok_r(NULL, " ", &save), NULL, 10));
    for (size_t k = 0; k < a.ndim; k++)
        ASSERT_EQ_SIZE(a.shape[k], strtoul(strtok_r(NULL, " ", &save), NULL, 10));
    ASSERT_EQ_SIZE(a.data_bytes, nb);
    ASSERT_EQ_SIZE(a.data_off + a.data_bytes, n);
    ASSERT_MEM_EQ(d + a.data_off, want, nb);
    /* Every shorter prefix is refused, none read past its end (ASan). */
    for (size_t cut = 0; cut < n; cut++) {
        uint8_t *p = malloc(cut ? cut : 1);
        memcpy(p, d, cut);
        ferry_status st = ferry__npy_parse(p, cut, name, &a);
        ASSERT_MSG(st != FERRY_OK || a.data_bytes == 0, "%s cut to %zu bytes parsed", name, cut);
        free(p);
    }
    free(d);
    free(want);
}

static void check_bad(const char *dir, char *rest, const char *name)
{
    char path[1100], *save = NULL;
    snprintf(path, sizeof path, "%s/%s.npy", dir, name);
    size_t n;
    uint8_t *d = slurp(path, &n);
    ferry_status want = status_named(strtok_r(rest, " ", &save));
    const char *text = strtok_r(NULL, "", &save);
    ferry_npy a;
    ferry_status st = ferry__npy_parse(d, n, name, &a);
    ASSERT_MSG(st == want, "%s: got %s (%s), want %s", name, ferry_status_str(st),
               ferry_last_error(), ferry_status_str(want));
    ASSERT_STR_CONTAINS(ferry_last_error(), name);
    if (text)
        ASSERT_STR_CONTAINS(ferry_last_error(), text);
    free(d);
}

TEST(numpy_written_files_parse_as_numpy_says)
{
    char dir[512], path[600], line[512];
    snprintf(dir, sizeof dir, "%s/tests/data/npy", FERRY_SOURCE_DIR);
    snprintf(path, sizeof path, "%s/MANIFEST", dir);
    FILE *m = fopen(path, "r");
    ASSERT_MSG(m, "no %s", path);
    size_t good = 0, bad = 0;
    while (fgets(line, sizeof line, m)) {
        line[strcspn(line, "\n")] = '\0';
        char *save = NULL, *name = strtok_r(line, " ", &save), *kind = strtok_r(NULL, " ", &save);
        char *rest = strtok_r(NULL, "", &save);
        ASSERT(name && kind);
        if (!strcmp(kind, "good"))
            check_good(dir, rest, name), good++;
        else
            check_bad(dir, rest ? rest : (char[]){""}, name), bad++;
    }
    fclose(m);
    ASSERT(good >= 10 && bad >= 15);
}

TEST(header_limits_hold_before_anything_is_read)
{
    /* Version 2's four-byte length: 1 GiB claimed in a 64-byte file. */
    uint8_t d[64] = "\x93NUMPY\x02\x00";
    d[8] = 0, d[9] = 0, d[10] = 0, d[11] = 0x40;
    ferry_npy a;
    ASSERT_STATUS(ferry__npy_parse(d, sizeof d, "x.npy", &a), FERRY_ERR_LIMIT);
    ASSERT_STR_CONTAINS(ferry_last_error(), "x.npy: NPY header of 1073741824 bytes");
    ASSERT_STATUS(ferry__npy_parse(d, 9, NULL, &a), FERRY_ERR_FORMAT);
    ASSERT_STR_CONTAINS(ferry_last_error(), "NPY");
}

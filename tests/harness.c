/* The test harness: registration, running, reporting, temp folders. */
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

#define MAX_TESTS 1024

static struct { const char *name; ft_test_fn fn; } tests[MAX_TESTS];
static size_t ntests;
static jmp_buf test_jmp;
static char tmpdir[PATH_MAX];

enum { RESULT_PASS, RESULT_FAIL, RESULT_SKIP };

void ft_register(const char *name, ft_test_fn fn)
{
    if (ntests == MAX_TESTS) {
        fprintf(stderr, "harness: too many tests\n");
        return;
    }
    tests[ntests].name = name;
    tests[ntests].fn = fn;
    ntests++;
}

void ft_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    fprintf(stdout, "  %s:%d: ", file, line);
    va_start(ap, fmt);
    vfprintf(stdout, fmt, ap);
    va_end(ap);
    fputc('\n', stdout);
    longjmp(test_jmp, 1 + RESULT_FAIL);
}

void ft_skip(const char *reason)
{
    fprintf(stdout, "  skipped: %s\n", reason);
    longjmp(test_jmp, 1 + RESULT_SKIP);
}

void ft_assert_mem_eq(const char *file, int line, const char *an, const char *bn,
                      const void *a, const void *b, size_t n)
{
    const unsigned char *x = a, *y = b;
    for (size_t i = 0; i < n; i++)
        if (x[i] != y[i])
            ft_fail(file, line, "%s and %s differ at byte %zu of %zu: %u != %u", an, bn, i, n,
                    x[i], y[i]);
}

static bool required(const char *kind)
{
    const char *req = getenv("FERRY_REQUIRE");
    size_t n = strlen(kind);
    for (const char *p = req; p && *p; p += strcspn(p, ","), p += *p == ',') {
        if (strcspn(p, ",") == n && strncmp(p, kind, n) == 0)
            return true;
    }
    return false;
}

void ft_skip_missing(const char *kind, const char *reason)
{
    if (required(kind)) {
        fprintf(stdout, "  FERRY_REQUIRE names %s, but: %s\n", kind, reason);
        longjmp(test_jmp, 1 + RESULT_FAIL);
    }
    ft_skip(reason);
}

void ft_require_cuda(void)
{
    if (!ferry_cuda_is_available())
        ft_skip_missing("gpu", "no CUDA device");
}

void ft_require_nvidia(const char *what)
{
    char why[256];
    if (!ferry_cuda_is_available() || ferry_cuda_is_simulated()) {
        snprintf(why, sizeof why, "needs NVIDIA hardware (%s)%s", what,
                 ferry_cuda_is_simulated() ? ": the simulated GPU cannot run it" : ": no CUDA device");
        ft_skip_missing("nvidia", why);
    }
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st; (void)flag; (void)ftw;
    return remove(path);
}

static void remove_tmpdir(void)
{
    if (tmpdir[0])
        nftw(tmpdir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

ferry_device ft_device(const char *name)
{
    ferry_device d = {FERRY_DEVICE_DEFAULT, 0};
    if (name && ferry_device_parse(name, &d) != FERRY_OK)
        ft_fail(__FILE__, __LINE__, "ft_device(\"%s\"): %s", name, ferry_last_error());
    return d;
}

const char *ft_tmpdir(void)
{
    if (!tmpdir[0]) {
        snprintf(tmpdir, sizeof tmpdir, "/tmp/ferry-test-XXXXXX");
        if (!mkdtemp(tmpdir)) {
            fprintf(stderr, "harness: mkdtemp: %s\n", strerror(errno));
            exit(2);
        }
        atexit(remove_tmpdir);
    }
    return tmpdir;
}

const char *ft_tmp(const char *rel)
{
    static char bufs[8][PATH_MAX];
    static unsigned next;
    char *b = bufs[next++ % 8];
    snprintf(b, PATH_MAX, "%s/%s", ft_tmpdir(), rel);
    return b;
}

static void make_parents(const char *path)
{
    char buf[PATH_MAX];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            mkdir(buf, 0777);
            *p = '/';
        }
    }
}

void ft_write_file(const char *path, const void *data, size_t n)
{
    make_parents(path);
    FILE *f = fopen(path, "wb");
    if (!f)
        ft_fail(__FILE__, __LINE__, "cannot write %s: %s", path, strerror(errno));
    if (n && fwrite(data, 1, n, f) != n) {
        fclose(f);
        ft_fail(__FILE__, __LINE__, "short write to %s", path);
    }
    fclose(f);
}

void *ft_read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        ft_fail(__FILE__, __LINE__, "cannot read %s: %s", path, strerror(errno));
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *buf = malloc(len > 0 ? (size_t)len : 1);
    if (!buf || fread(buf, 1, (size_t)len, f) != (size_t)len) {
        fclose(f);
        free(buf);
        ft_fail(__FILE__, __LINE__, "cannot read %s", path);
    }
    fclose(f);
    *n = (size_t)len;
    return buf;
}

const char *ft_pngsuite_dir(void)
{
    static char dir[PATH_MAX];
    const char *env = getenv("FERRY_PNGSUITE");
    if (env && *env)
        snprintf(dir, sizeof dir, "%s", env);
    else
        snprintf(dir, sizeof dir, "%s/../shared/testdata/pngsuite", FERRY_SOURCE_DIR);
    char probe[PATH_MAX + 32];
    snprintf(probe, sizeof probe, "%s/basn0g08.png", dir);
    return access(probe, R_OK) == 0 ? dir : NULL;
}

/* Runs one test; its own frame keeps setjmp away from the loop's variables. */
static int run_one(ft_test_fn fn)
{
    ferry_clear_error();
    int r = setjmp(test_jmp);
    if (r == 0) {
        fn();
        return RESULT_PASS;
    }
    return r - 1;
}

/* With arguments, a test runs when its name contains any one of them. */
static bool selected(const char *name, int argc, char **argv)
{
    if (argc < 2)
        return true;
    for (int a = 1; a < argc; a++)
        if (strstr(name, argv[a]))
            return true;
    return false;
}

int main(int argc, char **argv)
{
    size_t passed = 0, failed = 0, skipped = 0;
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (size_t i = 0; i < ntests; i++) {
        if (!selected(tests[i].name, argc, argv))
            continue;
        switch (run_one(tests[i].fn)) {
        case RESULT_PASS: passed++; printf("ok    %s\n", tests[i].name); break;
        case RESULT_FAIL: failed++; printf("FAIL  %s\n", tests[i].name); break;
        default: skipped++; printf("skip  %s\n", tests[i].name); break;
        }
    }
    printf("%zu passed, %zu failed, %zu skipped\n", passed, failed, skipped);
    return failed ? 1 : 0;
}

uint64_t ft_batch_digest(uint64_t h, const ferry_batch *b)
{
    const uint8_t *img = ferry_tensor_data(b->images);
    const int64_t *lab = ferry_tensor_data(b->labels);
    for (size_t i = 0, n = ferry_tensor_nbytes(b->images); i < n; i++)
        h = (h ^ img[i]) * 1099511628211ull;
    for (size_t i = 0; i < b->size; i++)
        h = (h ^ (uint64_t)lab[i]) * 1099511628211ull;
    return h;
}

uint64_t ft_epoch_digest(ferry_loader *l)
{
    uint64_t h = FT_DIGEST_SEED;
    ferry_batch b;
    ferry_status st;
    while ((st = ferry_loader_next(l, NULL, &b)) == FERRY_OK)
        h = ft_batch_digest(h, &b);
    ASSERT_STATUS(st, FERRY_END);
    return h;
}

ferry_loader *ft_streaming_loader(ferry_dataset *ds, size_t workers, uint64_t seed)
{
    ferry_loader_config c = ferry_loader_config_default();
    c.dataset = ds;
    c.batch_size = 4;
    c.shuffle = true;
    c.seed = seed;
    c.num_workers = workers;
    c.device = ferry_cpu();
    c.pin_memory = FERRY_PIN_MEMORY_OFF;
    c.out_dtype = FERRY_DTYPE_U8;
    c.stream_shuffle_buffer = 6;
    ferry_loader *l;
    ASSERT_OK(ferry_loader_create(&c, &l));
    return l;
}

int64_t ft_at2(const ferry_tensor *t, size_t i, size_t j)
{
    const int64_t *st = ferry_tensor_strides(t);
    int64_t k = (int64_t)i * st[0] + (int64_t)j * st[1];
    const void *d = ferry_tensor_data(t);
    switch (ferry_tensor_dtype(t)) {
    case FERRY_DTYPE_U8: return ((const uint8_t *)d)[k];
    case FERRY_DTYPE_I32: return ((const int32_t *)d)[k];
    case FERRY_DTYPE_I64: return ((const int64_t *)d)[k];
    case FERRY_DTYPE_U16: return ((const uint16_t *)d)[k];
    case FERRY_DTYPE_U32: return ((const uint32_t *)d)[k];
    case FERRY_DTYPE_F32: return (int64_t)((const float *)d)[k];
    default: ASSERT_MSG(0, "ft_at2: dtype %s", ferry_dtype_name(ferry_tensor_dtype(t))); return 0;
    }
}

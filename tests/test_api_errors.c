/* The error answers of the public API (docs/API_ERRORS.md), one test per row:
 * NULL handles and outputs, zero and huge sizes, wrong devices, wrong dtypes.
 * Every call runs in a forked child, so a call that crashes fails its own row
 * (with the signal) instead of the whole program; the child also checks that a
 * failing call left a message in ferry_last_error(). */
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

enum { CHILD_STATUS = 100, CHILD_NO_MESSAGE = 90, CHILD_FALSE = 91 };

#if defined(__SANITIZE_ADDRESS__)
/* Huge allocations must reach the library as NULL (its NO_MEMORY path), not
 * stop the process as ASan does by default. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }
#endif

static void quiet(ferry_log_level level, const char *msg, void *user)
{
    (void)level; (void)msg; (void)user;
}

/* Waits for a child and fails the test on a crash or a wrong answer. */
static void reap(pid_t pid, const char *file, int line, const char *what, ferry_status want)
{
    int ws = 0;
    if (pid < 0)
        ft_fail(file, line, "fork: cannot run %s", what);
    waitpid(pid, &ws, 0);
    if (WIFSIGNALED(ws))
        ft_fail(file, line, "%s: crashed (signal %d, %s)", what, WTERMSIG(ws),
                strsignal(WTERMSIG(ws)));
    int code = WIFEXITED(ws) ? WEXITSTATUS(ws) : 255;
    if (code == 0)
        return;
    if (code == CHILD_NO_MESSAGE)
        ft_fail(file, line, "%s: returned %s with an empty ferry_last_error()", what,
                ferry_status_str(want));
    if (code == CHILD_FALSE)
        ft_fail(file, line, "%s: false", what);
    if (code >= CHILD_STATUS && code < CHILD_STATUS + FERRY_STATUS_COUNT)
        ft_fail(file, line, "%s: got %s, want %s", what,
                ferry_status_str((ferry_status)(code - CHILD_STATUS)), ferry_status_str(want));
    ft_fail(file, line, "%s: child exited with %d (a sanitizer report?)", what, code);
}

static pid_t child(void)
{
    fflush(stdout);
    fflush(stderr);
    pid_t p = fork();
    if (p == 0) {
        alarm(20); /* a hang is a failure too (SIGALRM) */
        ferry_set_log(quiet, NULL);
        ferry_clear_error();
    }
    return p;
}

/* The call returns `want`; an error comes with a message. */
#define CHK(expr, want)                                                        \
    do {                                                                       \
        ferry_status w__ = (want);                                             \
        pid_t p__ = child();                                                   \
        if (p__ == 0) {                                                        \
            ferry_status s__ = (expr);                                         \
            if (s__ != w__)                                                    \
                _exit(CHILD_STATUS + (int)s__);                                           \
            if (s__ != FERRY_OK && s__ != FERRY_END && !ferry_last_error()[0]) \
                _exit(CHILD_NO_MESSAGE);                                       \
            _exit(0);                                                          \
        }                                                                      \
        reap(p__, __FILE__, __LINE__, #expr, w__);                             \
    } while (0)

/* The condition holds (and evaluating it does not crash). */
#define CHK_TRUE(cond)                                                         \
    do {                                                                       \
        pid_t p__ = child();                                                   \
        if (p__ == 0)                                                          \
            _exit((cond) ? 0 : CHILD_FALSE);                                   \
        reap(p__, __FILE__, __LINE__, #cond, FERRY_OK);                        \
    } while (0)

/* The statement does not crash. */
#define NOCRASH(stmt)                                                          \
    do {                                                                       \
        pid_t p__ = child();                                                   \
        if (p__ == 0) {                                                        \
            stmt;                                                              \
            _exit(0);                                                          \
        }                                                                      \
        reap(p__, __FILE__, __LINE__, #stmt, FERRY_OK);                        \
    } while (0)

static const ferry_device BAD_DEVICE = {(ferry_device_type)7, 0};
static const ferry_device NEG_CUDA = {FERRY_DEVICE_CUDA, -1};
#define HUGE_SIZE ((size_t)-1 / 2)

static bool no_gpu(void) { return !ferry_cuda_is_available(); }

/* A small u8 memory dataset, 10 samples of 1x2x3. */
static uint8_t mem_data[10 * 6];
static int64_t mem_labels[10] = {0, 1, 2, 0, 1, 2, 0, 1, 2, 3};
/* One shared dataset, held by a global: a test that fails before its cleanup
 * leaves a reference on a reachable object, not a leak report. */
static ferry_dataset *mem_ds(void)
{
    static ferry_dataset *base;
    if (!base) {
        ferry_sample_format f = {1, 2, 3, FERRY_LAYOUT_CHW, FERRY_DTYPE_U8};
        ASSERT_OK(ferry_dataset_memory(mem_data, &f, 10, mem_labels, &base));
    }
    return ferry_dataset_retain(base);
}

static ferry_loader_config loader_cfg(ferry_dataset *ds)
{
    ferry_loader_config c = ferry_loader_config_default();
    c.dataset = ds;
    c.batch_size = 4;
    c.num_workers = FERRY_LOADER_NO_WORKERS; /* no threads: the forked child has none */
    c.device = ferry_cpu();
    c.pin_memory = FERRY_PIN_MEMORY_OFF;
    return c;
}

static ferry_status create_with(ferry_loader_config c)
{
    ferry_loader *l = NULL;
    ferry_status st = ferry_loader_create(&c, &l);
    ferry_loader_destroy(l);
    return st;
}

/* ================= status.h ================= */
TEST(status_str_never_null)
{
    for (int s = 0; s < FERRY_STATUS_COUNT; s++)
        CHK_TRUE(strncmp(ferry_status_str((ferry_status)s), "FERRY_", 6) == 0);
    CHK_TRUE(ferry_status_str((ferry_status)-1) != NULL);
    CHK_TRUE(ferry_status_str(FERRY_STATUS_COUNT) != NULL);
    CHK_TRUE(ferry_status_str((ferry_status)100000) != NULL);
}

TEST(last_error_and_clear)
{
    CHK_TRUE(ferry_last_error() != NULL && ferry_last_error()[0] == '\0');
    CHK_TRUE((ferry_set_error(FERRY_ERR_IO, "x %d", 1), ferry_clear_error(), ferry_last_error()[0] == '\0'));
}

static const char *volatile null_fmt;
TEST(set_error_returns_status_and_null_format)
{
    CHK(ferry_set_error(FERRY_ERR_FORMAT, "%s", "bad"), FERRY_ERR_FORMAT);
    CHK(ferry_set_error(FERRY_OK, "fine"), FERRY_OK);
    /* A NULL format is a caller bug, but must not crash: empty message. */
    CHK_TRUE(ferry_set_error(FERRY_ERR_IO, null_fmt) == FERRY_ERR_IO);
}

TEST(set_log_null_restores_default)
{
    NOCRASH(ferry_set_log(NULL, NULL));
}

/* ================= device.h ================= */
TEST(device_parse_errors)
{
    ferry_device d;
    CHK(ferry_device_parse(NULL, &d), FERRY_ERR_INVALID_ARG);
    CHK(ferry_device_parse("cpu", NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_device_parse("", &d), FERRY_ERR_INVALID_ARG);
    CHK(ferry_device_parse("gpu", &d), FERRY_ERR_INVALID_ARG);
    CHK(ferry_device_parse("cuda:", &d), FERRY_ERR_INVALID_ARG);
    CHK(ferry_device_parse("cuda:-1", &d), FERRY_ERR_INVALID_ARG);
    CHK(ferry_device_parse("cuda:99999999999999999999", &d), FERRY_ERR_INVALID_ARG);
    CHK(ferry_device_parse("cuda:1000", &d), FERRY_ERR_NO_DEVICE);
    if (no_gpu()) {
        CHK(ferry_device_parse("cuda", &d), FERRY_ERR_NO_DEVICE);
        CHK(ferry_device_parse("cuda:0", &d), FERRY_ERR_NO_DEVICE);
    }
}

TEST(device_format_small_and_null_buffers)
{
    char b[2];
    CHK_TRUE(ferry_device_format(ferry_cpu(), NULL, 0) != NULL);
    CHK_TRUE(strcmp(ferry_device_format(ferry_cpu(), b, sizeof b), "c") == 0);
    char big[FERRY_DEVICE_NAME_MAX];
    CHK_TRUE(strcmp(ferry_device_format(BAD_DEVICE, big, sizeof big), "invalid") == 0);
    CHK_TRUE(strcmp(ferry_device_format((ferry_device){0}, big, sizeof big), "default") == 0);
    CHK_TRUE(strcmp(ferry_device_format((ferry_device){FERRY_DEVICE_DEFAULT, 2}, big, sizeof big),
                    "invalid") == 0);
}

TEST(cuda_queries_without_gpu)
{
    if (!no_gpu())
        SKIP("a CUDA device is present");
    CHK_TRUE(!ferry_cuda_is_available());
    CHK_TRUE(ferry_cuda_device_count() == 0);
    CHK_TRUE(ferry_device_eq(ferry_device_default(), ferry_cpu()));
}

TEST(cuda_current_and_set_device)
{
    int i;
    CHK(ferry_cuda_current_device(NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_cuda_set_device(-1), FERRY_ERR_INVALID_ARG);
    CHK(ferry_cuda_set_device(1000), FERRY_ERR_NO_DEVICE);
    if (no_gpu())
        CHK(ferry_cuda_current_device(&i), FERRY_ERR_NO_DEVICE);
}

TEST(device_guard_errors)
{
    ferry_device_guard g;
    CHK(ferry_device_guard_enter(NULL, ferry_cpu()), FERRY_ERR_INVALID_ARG);
    CHK(ferry_device_guard_enter(&g, BAD_DEVICE), FERRY_ERR_INVALID_ARG);
    CHK(ferry_device_guard_enter(&g, ferry_cuda(1000)), FERRY_ERR_NO_DEVICE);
    CHK(ferry_device_guard_enter(&g, ferry_cpu()), FERRY_OK);
    NOCRASH(ferry_device_guard_exit(NULL));
}

TEST(device_properties_errors)
{
    ferry_device_props p;
    CHK(ferry_device_properties(ferry_cpu(), NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_device_properties(BAD_DEVICE, &p), FERRY_ERR_INVALID_ARG);
    CHK(ferry_device_properties(NEG_CUDA, &p), FERRY_ERR_INVALID_ARG);
    CHK(ferry_device_properties(ferry_cuda(1000), &p), FERRY_ERR_NO_DEVICE);
    CHK(ferry_device_properties(ferry_cpu(), &p), FERRY_OK);
}

TEST(device_synchronize_errors)
{
    CHK(ferry_device_synchronize(BAD_DEVICE), FERRY_ERR_INVALID_ARG);
    CHK(ferry_device_synchronize(ferry_cuda(1000)), FERRY_ERR_NO_DEVICE);
    CHK(ferry_device_synchronize(ferry_cpu()), FERRY_OK);
}

TEST(stream_errors)
{
    ferry_stream *s;
    ferry_event *e;
    CHK(ferry_stream_create(ferry_cpu(), NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_stream_create(BAD_DEVICE, &s), FERRY_ERR_INVALID_ARG);
    CHK(ferry_stream_create(ferry_cuda(1000), &s), FERRY_ERR_NO_DEVICE);
    NOCRASH(ferry_stream_destroy(NULL));
    CHK_TRUE(ferry_device_eq(ferry_stream_device(NULL), ferry_cpu()));
    CHK(ferry_stream_synchronize(NULL), FERRY_ERR_INVALID_ARG);
    CHK_TRUE(ferry_stream_query(NULL));
    bool done = true;
    CHK(ferry_stream_query_status(NULL, &done), FERRY_ERR_INVALID_ARG);
    CHK_TRUE(ferry_stream_query_status(NULL, &done) != FERRY_OK && !done); /* never "done" on failure */
    ASSERT_OK(ferry_stream_create(ferry_cpu(), &s));
    CHK(ferry_stream_query_status(s, NULL), FERRY_ERR_INVALID_ARG);
    CHK_TRUE(ferry_stream_query_status(s, &done) == FERRY_OK && done);
    ASSERT_OK(ferry_event_create(ferry_cpu(), false, &e));
    CHK(ferry_stream_wait_event(NULL, e), FERRY_OK); /* the default stream of e's device */
    CHK(ferry_stream_wait_event(NULL, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_stream_wait_event(s, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_stream_wait_event(s, e), FERRY_OK);
    ferry_event_destroy(e);
    ferry_stream_destroy(s);
}

TEST(event_errors)
{
    ferry_event *e, *t0, *t1;
    float ms;
    CHK(ferry_event_create(ferry_cpu(), false, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_event_create(BAD_DEVICE, false, &e), FERRY_ERR_INVALID_ARG);
    CHK(ferry_event_create(ferry_cuda(1000), true, &e), FERRY_ERR_NO_DEVICE);
    NOCRASH(ferry_event_destroy(NULL));
    CHK(ferry_event_record(NULL, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_event_synchronize(NULL), FERRY_ERR_INVALID_ARG);
    CHK_TRUE(ferry_event_query(NULL));
    bool done = true;
    CHK(ferry_event_query_status(NULL, &done), FERRY_ERR_INVALID_ARG);
    CHK_TRUE(ferry_event_query_status(NULL, &done) != FERRY_OK && !done); /* never "done" on failure */
    ASSERT_OK(ferry_event_create(ferry_cpu(), true, &t0));
    ASSERT_OK(ferry_event_create(ferry_cpu(), true, &t1));
    CHK(ferry_event_query_status(t0, NULL), FERRY_ERR_INVALID_ARG);
    CHK_TRUE(ferry_event_query_status(t0, &done) == FERRY_OK && done); /* never recorded: complete */
    CHK(ferry_event_elapsed_ms(NULL, t1, &ms), FERRY_ERR_INVALID_ARG);
    CHK(ferry_event_elapsed_ms(t0, NULL, &ms), FERRY_ERR_INVALID_ARG);
    CHK(ferry_event_elapsed_ms(t0, t1, NULL), FERRY_ERR_INVALID_ARG);
    ferry_event_destroy(t0);
    ferry_event_destroy(t1);
}

TEST(memcpy_errors)
{
    char a[8] = {0}, b[8];
    CHK(ferry_memcpy(NULL, NULL, 0, FERRY_COPY_H2H, ferry_cpu(), NULL), FERRY_OK);
    CHK(ferry_memcpy(NULL, a, 8, FERRY_COPY_H2H, ferry_cpu(), NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_memcpy(b, NULL, 8, FERRY_COPY_H2H, ferry_cpu(), NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_memcpy(b, a, 8, (ferry_copy_kind)9, ferry_cpu(), NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_memcpy(b, a, 8, FERRY_COPY_H2H, BAD_DEVICE, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_memcpy(b, a, 8, FERRY_COPY_H2D, ferry_cuda(1000), NULL), FERRY_ERR_NO_DEVICE);
}

TEST(pinned_pool_errors)
{
    ferry_pinned_pool *p;
    void *x;
    ferry_pinned_pool_stats st;
    CHK(ferry_pinned_pool_create(0, false, NULL), FERRY_ERR_INVALID_ARG);
    NOCRASH(ferry_pinned_pool_destroy(NULL));
    ASSERT_OK(ferry_pinned_pool_create(1 << 16, false, &p));
    CHK(ferry_pinned_pool_alloc(NULL, 16, 0, &x), FERRY_ERR_INVALID_ARG);
    CHK(ferry_pinned_pool_alloc(p, 16, 0, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_pinned_pool_alloc(p, 0, 0, &x), FERRY_ERR_INVALID_ARG);
    CHK(ferry_pinned_pool_alloc(p, 16, 3, &x), FERRY_ERR_INVALID_ARG);
    CHK(ferry_pinned_pool_alloc(p, (size_t)-1, 0, &x), FERRY_ERR_INVALID_ARG);
    CHK(ferry_pinned_pool_alloc(p, HUGE_SIZE, 0, &x), FERRY_ERR_NO_MEMORY);
    NOCRASH(ferry_pinned_pool_free(NULL, &x));
    NOCRASH(ferry_pinned_pool_free(p, NULL));
    NOCRASH(ferry_pinned_pool_free(p, &x)); /* not from the pool: ignored with a warning */
    CHK(ferry_pinned_pool_stats_get(NULL, &st), FERRY_ERR_INVALID_ARG);
    CHK(ferry_pinned_pool_stats_get(p, NULL), FERRY_ERR_INVALID_ARG);
    CHK_TRUE((ferry_pinned_pool_stats_get(NULL, &st), st.blocks == 0 && st.live_pieces == 0));
    ferry_pinned_pool_destroy(p);
}

TEST(device_malloc_errors)
{
    void *x;
    CHK(ferry_device_alloc(ferry_cpu(), 16, NULL, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_device_alloc(BAD_DEVICE, 16, NULL, &x), FERRY_ERR_INVALID_ARG);
    CHK(ferry_device_alloc(ferry_cuda(1000), 16, NULL, &x), FERRY_ERR_NO_DEVICE);
    CHK_TRUE(ferry_device_alloc(ferry_cpu(), 0, NULL, &x) == FERRY_OK && x == NULL);
    CHK(ferry_device_alloc(ferry_cpu(), (size_t)-1, NULL, &x), FERRY_ERR_DEVICE_OOM);
    CHK(ferry_device_alloc(ferry_cpu(), HUGE_SIZE, NULL, &x), FERRY_ERR_DEVICE_OOM);
    NOCRASH(ferry_device_free(ferry_cpu(), NULL));
    NOCRASH(ferry_device_free(BAD_DEVICE, NULL));
    NOCRASH(ferry_device_free(ferry_cuda(1000), &x));
}

TEST(memory_stats_errors)
{
    ferry_memory_stats m;
    CHK(ferry_memory_stats_get(ferry_cpu(), NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_memory_stats_get(BAD_DEVICE, &m), FERRY_ERR_INVALID_ARG);
    CHK(ferry_memory_stats_get(ferry_cuda(1000), &m), FERRY_ERR_NO_DEVICE);
    CHK(ferry_memory_empty_cache(BAD_DEVICE), FERRY_ERR_INVALID_ARG);
    CHK(ferry_memory_empty_cache(ferry_cuda(1000)), FERRY_ERR_NO_DEVICE);
    NOCRASH(ferry_memory_reset_peak(BAD_DEVICE));
    NOCRASH(ferry_memory_reset_peak(ferry_cuda(1000)));
}

TEST(build_queries_never_null)
{
    CHK_TRUE(ferry_version() && ferry_version()[0]);
    CHK_TRUE(ferry_build_features() && ferry_build_features()[0]);
    CHK_TRUE(ferry_cuda_is_built() == true || ferry_cuda_is_built() == false);
}

TEST(cuda_arch_queries)
{
    int arch = -1;
    CHK_TRUE(ferry_cuda_archs() != NULL);
    CHK_TRUE(ferry_cuda_arch_fit(NULL, 9, 0, &arch) == FERRY_ARCH_FIT_NONE && arch == 0);
    CHK_TRUE(ferry_cuda_arch_fit("sm_90", -1, 0, &arch) == FERRY_ARCH_FIT_NONE && arch == 0);
    CHK_TRUE(ferry_cuda_arch_fit("sm_90", 9, 99, NULL) == FERRY_ARCH_FIT_NONE);
    CHK_TRUE(ferry_cuda_arch_fit("sm_99999999999 compute_", 9, 0, &arch) == FERRY_ARCH_FIT_NONE);
}

/* ================= tensor.h ================= */
TEST(dtype_queries_invalid)
{
    CHK_TRUE(ferry_dtype_size(FERRY_DTYPE_COUNT) == 0);
    CHK_TRUE(ferry_dtype_size((ferry_dtype)-1) == 0);
    CHK_TRUE(strcmp(ferry_dtype_name((ferry_dtype)99), "invalid") == 0);
}

TEST(tensor_create_errors)
{
    ferry_tensor *t;
    int64_t s2[2] = {2, 3}, neg[2] = {2, -1}, big[2] = {INT64_MAX / 2, 4}, many[9] = {1,1,1,1,1,1,1,1,1};
    CHK(ferry_tensor_empty(s2, 2, FERRY_DTYPE_F32, ferry_cpu(), NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_tensor_empty(NULL, 2, FERRY_DTYPE_F32, ferry_cpu(), &t), FERRY_ERR_INVALID_ARG);
    CHK(ferry_tensor_empty(neg, 2, FERRY_DTYPE_F32, ferry_cpu(), &t), FERRY_ERR_INVALID_ARG);
    CHK(ferry_tensor_empty(many, 9, FERRY_DTYPE_F32, ferry_cpu(), &t), FERRY_ERR_INVALID_ARG);
    CHK(ferry_tensor_empty(s2, 2, FERRY_DTYPE_COUNT, ferry_cpu(), &t), FERRY_ERR_DTYPE);
    CHK(ferry_tensor_empty(big, 2, FERRY_DTYPE_F32, ferry_cpu(), &t), FERRY_ERR_LIMIT);
    CHK(ferry_tensor_empty(s2, 2, FERRY_DTYPE_F32, BAD_DEVICE, &t), FERRY_ERR_INVALID_ARG);
    CHK(ferry_tensor_empty(s2, 2, FERRY_DTYPE_F32, ferry_cuda(1000), &t), FERRY_ERR_NO_DEVICE);
    int64_t zero[2] = {0, 5};
    CHK_TRUE(ferry_tensor_empty(zero, 2, FERRY_DTYPE_F32, ferry_cpu(), &t) == FERRY_OK &&
             ferry_tensor_numel(t) == 0);
    CHK_TRUE(ferry_tensor_empty(NULL, 0, FERRY_DTYPE_F32, ferry_cpu(), &t) == FERRY_OK &&
             ferry_tensor_numel(t) == 1);
    int64_t huge[1] = {INT64_MAX / 8};
    CHK(ferry_tensor_empty(huge, 1, FERRY_DTYPE_U8, ferry_cpu(), &t), FERRY_ERR_DEVICE_OOM);
}

TEST(tensor_zeros_errors)
{
    ferry_tensor *t;
    int64_t s2[2] = {2, 3}, neg[1] = {-5};
    CHK(ferry_tensor_zeros(s2, 2, FERRY_DTYPE_F32, ferry_cpu(), NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_tensor_zeros(neg, 1, FERRY_DTYPE_F32, ferry_cpu(), &t), FERRY_ERR_INVALID_ARG);
    CHK(ferry_tensor_zeros(s2, 2, (ferry_dtype)-3, ferry_cpu(), &t), FERRY_ERR_DTYPE);
    CHK(ferry_tensor_zeros(s2, 2, FERRY_DTYPE_F32, ferry_cuda(1000), &t), FERRY_ERR_NO_DEVICE);
}

TEST(tensor_from_host_and_blob_errors)
{
    ferry_tensor *t;
    float data[6] = {0};
    int64_t s2[2] = {2, 3};
    CHK(ferry_tensor_from_host(NULL, s2, 2, FERRY_DTYPE_F32, ferry_cpu(), &t), FERRY_ERR_INVALID_ARG);
    CHK(ferry_tensor_from_host(data, s2, 2, FERRY_DTYPE_F32, ferry_cpu(), NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_tensor_from_host(data, s2, 2, FERRY_DTYPE_COUNT, ferry_cpu(), &t), FERRY_ERR_DTYPE);
    CHK(ferry_tensor_from_host(data, s2, 2, FERRY_DTYPE_F32, ferry_cuda(1000), &t), FERRY_ERR_NO_DEVICE);
    CHK(ferry_tensor_from_blob(NULL, s2, 2, FERRY_DTYPE_F32, ferry_cpu(), &t), FERRY_ERR_INVALID_ARG);
    CHK(ferry_tensor_from_blob(data, s2, 2, FERRY_DTYPE_F32, ferry_cpu(), NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_tensor_from_blob(data, NULL, 2, FERRY_DTYPE_F32, ferry_cpu(), &t), FERRY_ERR_INVALID_ARG);
    CHK(ferry_tensor_from_blob(data, s2, 2, FERRY_DTYPE_F32, BAD_DEVICE, &t), FERRY_ERR_INVALID_ARG);
}

TEST(tensor_retain_release_null)
{
    CHK_TRUE(ferry_tensor_retain(NULL) == NULL);
    NOCRASH(ferry_tensor_release(NULL));
}

TEST(tensor_inspection_null)
{
    CHK_TRUE(ferry_tensor_ndim(NULL) == 0);
    CHK_TRUE(ferry_tensor_dim(NULL, 0) == 0);
    CHK_TRUE(ferry_tensor_shape(NULL) == NULL);
    CHK_TRUE(ferry_tensor_strides(NULL) == NULL);
    CHK_TRUE(ferry_tensor_numel(NULL) == 0);
    CHK_TRUE(ferry_tensor_nbytes(NULL) == 0);
    CHK_TRUE(ferry_tensor_dtype(NULL) == FERRY_DTYPE_COUNT);
    CHK_TRUE(ferry_device_eq(ferry_tensor_device(NULL), ferry_cpu()));
    CHK_TRUE(!ferry_tensor_is_contiguous(NULL));
    CHK_TRUE(ferry_tensor_data(NULL) == NULL);
    int64_t s2[2] = {2, 3};
    ferry_tensor *t;
    ASSERT_OK(ferry_tensor_zeros(s2, 2, FERRY_DTYPE_F32, ferry_cpu(), &t));
    CHK_TRUE(ferry_tensor_dim(t, 2) == 0);
    CHK_TRUE(ferry_tensor_dim(t, (size_t)-1) == 0);
    ferry_tensor_release(t);
}

TEST(tensor_to_errors)
{
    int64_t s2[2] = {2, 3};
    ferry_tensor *t, *o;
    ASSERT_OK(ferry_tensor_zeros(s2, 2, FERRY_DTYPE_F32, ferry_cpu(), &t));
    CHK(ferry_tensor_to(NULL, ferry_cpu(), false, &o), FERRY_ERR_INVALID_ARG);
    CHK(ferry_tensor_to(t, ferry_cpu(), false, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_tensor_to(t, BAD_DEVICE, false, &o), FERRY_ERR_INVALID_ARG);
    CHK(ferry_tensor_to(t, ferry_cuda(1000), true, &o), FERRY_ERR_NO_DEVICE);
    CHK(ferry_tensor_to_stream(NULL, ferry_cpu(), NULL, &o), FERRY_ERR_INVALID_ARG);
    CHK(ferry_tensor_to_stream(t, ferry_cuda(1000), NULL, &o), FERRY_ERR_NO_DEVICE);
    CHK(ferry_tensor_cpu(NULL, &o), FERRY_ERR_INVALID_ARG);
    CHK(ferry_tensor_cpu(t, NULL), FERRY_ERR_INVALID_ARG);
    ferry_tensor_release(t);
}

TEST(tensor_to_stream_on_another_device)
{
    ft_require_cuda();
    int64_t s2[2] = {2, 3};
    ferry_tensor *t, *o;
    ferry_stream *cpu;
    ASSERT_OK(ferry_tensor_zeros(s2, 2, FERRY_DTYPE_F32, ferry_cpu(), &t));
    ASSERT_OK(ferry_stream_create(ferry_cpu(), &cpu));
    CHK(ferry_tensor_to_stream(t, ferry_cuda(0), cpu, &o), FERRY_ERR_DEVICE_MISMATCH);
    ferry_stream_destroy(cpu);
    ferry_tensor_release(t);
}

TEST(tensor_to_dtype_errors)
{
    int64_t s2[2] = {2, 3};
    ferry_tensor *t, *o;
    ASSERT_OK(ferry_tensor_zeros(s2, 2, FERRY_DTYPE_F32, ferry_cpu(), &t));
    CHK(ferry_tensor_to_dtype(NULL, FERRY_DTYPE_F16, &o), FERRY_ERR_INVALID_ARG);
    CHK(ferry_tensor_to_dtype(t, FERRY_DTYPE_F16, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_tensor_to_dtype(t, FERRY_DTYPE_COUNT, &o), FERRY_ERR_DTYPE);
    CHK(ferry_tensor_to_dtype(t, (ferry_dtype)-1, &o), FERRY_ERR_DTYPE);
    ferry_tensor_release(t);
}

TEST(tensor_copy_to_host_errors)
{
    int64_t s2[2] = {2, 3};
    ferry_tensor *t;
    float out[6];
    ASSERT_OK(ferry_tensor_zeros(s2, 2, FERRY_DTYPE_F32, ferry_cpu(), &t));
    CHK(ferry_tensor_copy_to_host(NULL, out, sizeof out), FERRY_ERR_INVALID_ARG);
    CHK(ferry_tensor_copy_to_host(t, NULL, sizeof out), FERRY_ERR_INVALID_ARG);
    CHK(ferry_tensor_copy_to_host(t, out, sizeof out - 1), FERRY_ERR_INVALID_ARG);
    CHK(ferry_tensor_copy_to_host(t, out, sizeof out), FERRY_OK);
    ferry_tensor_release(t);
}

TEST(tensor_print_errors)
{
    int64_t s2[2] = {2, 3};
    ferry_tensor *t;
    ASSERT_OK(ferry_tensor_zeros(s2, 2, FERRY_DTYPE_F32, ferry_cpu(), &t));
    CHK(ferry_tensor_print(NULL, stdout), FERRY_ERR_INVALID_ARG);
    CHK(ferry_tensor_print(t, NULL), FERRY_ERR_INVALID_ARG);
    ferry_tensor_release(t);
}

TEST(half_conversions_special_values)
{
    CHK_TRUE(ferry_f16_to_f32(ferry_f32_to_f16(NAN)) != ferry_f16_to_f32(ferry_f32_to_f16(NAN)));
    CHK_TRUE(isinf(ferry_f16_to_f32(ferry_f32_to_f16(1e30f))));
    CHK_TRUE(ferry_bf16_to_f32(ferry_f32_to_bf16(NAN)) != ferry_bf16_to_f32(ferry_f32_to_bf16(NAN)));
    CHK_TRUE(isinf(ferry_bf16_to_f32(ferry_f32_to_bf16(INFINITY))));
}

/* ================= dataset.h ================= */
TEST(sample_format_bytes_null_and_overflow)
{
    ferry_sample_format f = {3, (size_t)1 << 40, (size_t)1 << 40, FERRY_LAYOUT_CHW, FERRY_DTYPE_U8};
    ferry_sample_format bad = {1, 2, 2, FERRY_LAYOUT_CHW, FERRY_DTYPE_COUNT};
    CHK_TRUE(ferry_sample_format_bytes(NULL) == 0);
    CHK_TRUE(ferry_sample_format_bytes(&f) == 0);
    CHK_TRUE(ferry_sample_format_bytes(&bad) == 0);
}

TEST(scratch_errors)
{
    CHK(ferry_scratch_create(NULL), FERRY_ERR_INVALID_ARG);
    NOCRASH(ferry_scratch_destroy(NULL));
}

static uint8_t *tiny_png(size_t *n)
{
    uint8_t px[4] = {1, 2, 3, 4};
    const char *p = ft_tmp("tiny.png");
    ASSERT_OK(ferry_png_save(p, px, 2, 2, 1));
    return ft_read_file(p, n);
}

TEST(png_info_errors)
{
    size_t n;
    uint8_t *png = tiny_png(&n);
    ferry_image_info info;
    CHK(ferry_png_info(NULL, 10, &info), FERRY_ERR_INVALID_ARG);
    CHK(ferry_png_info(png, n, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_png_info(png, 0, &info), FERRY_ERR_FORMAT);
    CHK(ferry_png_info(NULL, 0, &info), FERRY_ERR_FORMAT);
    CHK(ferry_png_info(png, 20, &info), FERRY_ERR_FORMAT);
    free(png);
}

TEST(image_format_errors)
{
    ferry_image_info info = {.width = 4, .height = 3, .channels = 1, .bit_depth = 8};
    ferry_sample_format f;
    ferry_image_config bad = ferry_image_config_default();
    bad.channels = 2;
    CHK(ferry_image_format(NULL, NULL, &f), FERRY_ERR_INVALID_ARG);
    CHK(ferry_image_format(NULL, &info, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_image_format(&bad, &info, &f), FERRY_ERR_INVALID_ARG);
    CHK(ferry_image_format(NULL, &info, &f), FERRY_OK);
    ferry_image_info zero = {.width = 0, .height = 3, .channels = 1, .bit_depth = 8};
    CHK(ferry_image_format(NULL, &zero, &f), FERRY_ERR_INVALID_ARG);
}

TEST(png_decode_errors)
{
    size_t n;
    uint8_t *png = tiny_png(&n);
    uint8_t dst[4];
    ferry_image_config cfg = ferry_image_config_default();
    CHK(ferry_png_decode(NULL, n, &cfg, NULL, NULL, dst, sizeof dst), FERRY_ERR_INVALID_ARG);
    CHK(ferry_png_decode(png, n, &cfg, NULL, NULL, NULL, sizeof dst), FERRY_ERR_INVALID_ARG);
    CHK(ferry_png_decode(png, n, &cfg, NULL, NULL, dst, 3), FERRY_ERR_INVALID_ARG);
    CHK(ferry_png_decode(png, n - 5, &cfg, NULL, "t.png", dst, sizeof dst), FERRY_ERR_FORMAT);
    CHK(ferry_png_decode(png, 0, &cfg, NULL, NULL, dst, sizeof dst), FERRY_ERR_FORMAT);
    ferry_image_config small = cfg;
    small.limits.max_width = 1;
    CHK(ferry_png_decode(png, n, &small, NULL, NULL, dst, sizeof dst), FERRY_ERR_LIMIT);
    ferry_image_config bad = cfg;
    bad.resize = (ferry_resize)9;
    CHK(ferry_png_decode(png, n, &bad, NULL, NULL, dst, sizeof dst), FERRY_ERR_INVALID_ARG);
    CHK(ferry_png_decode(png, n, NULL, NULL, NULL, dst, sizeof dst), FERRY_OK);
    free(png);
}

/* A small gray JPEG: the fixture PIL wrote (tests/ref/make_jpeg_ref.py). */
static uint8_t *tiny_jpeg(size_t *n)
{
    return ft_read_file(FERRY_SOURCE_DIR "/tests/ref/jpeg/gray.jpg", n);
}

TEST(jpeg_info_and_decode_errors)
{
    size_t n;
    uint8_t *jpg = tiny_jpeg(&n);
    ferry_image_info info;
    CHK(ferry_jpeg_info(NULL, 10, &info), FERRY_ERR_INVALID_ARG);
    CHK(ferry_jpeg_info(jpg, n, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_jpeg_info(NULL, 0, &info), FERRY_ERR_FORMAT);
    CHK(ferry_jpeg_info(jpg, 20, &info), FERRY_ERR_FORMAT);
    CHK(ferry_image_probe(NULL, 10, &info), FERRY_ERR_INVALID_ARG);
    CHK(ferry_image_probe(jpg, n, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_image_probe(jpg, 0, &info), FERRY_ERR_FORMAT);
    ASSERT_OK(ferry_image_probe(jpg, n, &info)); /* here: CHK runs in a child */
    size_t bytes = info.width * info.height;
    uint8_t *dst = malloc(bytes);
    ferry_image_config cfg = ferry_image_config_default();
    CHK(ferry_jpeg_decode(NULL, n, &cfg, NULL, NULL, dst, bytes), FERRY_ERR_INVALID_ARG);
    CHK(ferry_jpeg_decode(jpg, n, &cfg, NULL, NULL, NULL, bytes), FERRY_ERR_INVALID_ARG);
    CHK(ferry_jpeg_decode(jpg, n, &cfg, NULL, NULL, dst, bytes - 1), FERRY_ERR_INVALID_ARG);
    CHK(ferry_jpeg_decode(jpg, n - 5, &cfg, NULL, "t.jpg", dst, bytes), FERRY_ERR_FORMAT);
    CHK(ferry_jpeg_decode(jpg, 0, &cfg, NULL, NULL, dst, bytes), FERRY_ERR_FORMAT);
    ferry_image_config small = cfg;
    small.limits.max_width = 1;
    CHK(ferry_jpeg_decode(jpg, n, &small, NULL, NULL, dst, bytes), FERRY_ERR_LIMIT);
    ferry_image_config bad = cfg;
    bad.resize = (ferry_resize)9;
    CHK(ferry_jpeg_decode(jpg, n, &bad, NULL, NULL, dst, bytes), FERRY_ERR_INVALID_ARG);
    CHK(ferry_image_decode(jpg, n - 5, &cfg, NULL, "t.jpg", dst, bytes), FERRY_ERR_FORMAT);
    CHK(ferry_image_decode(jpg, n, NULL, NULL, NULL, NULL, bytes), FERRY_ERR_INVALID_ARG);
    CHK(ferry_image_decode(jpg, n, NULL, NULL, NULL, dst, bytes), FERRY_OK);
    CHK(ferry_jpeg_decode(jpg, n, NULL, NULL, NULL, dst, bytes), FERRY_OK);
    free(dst);
    free(jpg);
}

TEST(png_write_file_errors)
{
    uint8_t px[16] = {0};
    const char *p = ft_tmp("w.png");
    CHK(ferry_png_save(NULL, px, 2, 2, 1), FERRY_ERR_INVALID_ARG);
    CHK(ferry_png_save(p, NULL, 2, 2, 1), FERRY_ERR_INVALID_ARG);
    CHK(ferry_png_save(p, px, 0, 2, 1), FERRY_ERR_INVALID_ARG);
    CHK(ferry_png_save(p, px, 2, 0, 1), FERRY_ERR_INVALID_ARG);
    CHK(ferry_png_save(p, px, 2, 2, 0), FERRY_ERR_INVALID_ARG);
    CHK(ferry_png_save(p, px, 2, 2, 5), FERRY_ERR_INVALID_ARG);
    CHK(ferry_png_save(p, px, (size_t)1 << 32, 1, 1), FERRY_ERR_INVALID_ARG);
    CHK(ferry_png_save(ft_tmp("no/such/dir/w.png"), px, 2, 2, 1), FERRY_ERR_IO);
}

TEST(dataset_image_folder_errors)
{
    ferry_dataset *ds;
    ferry_image_config bad = ferry_image_config_default();
    bad.channels = 2;
    ft_write_file(ft_tmp("emptyroot/.keep"), "", 0);
    CHK(ferry_dataset_image_folder(NULL, NULL, &ds), FERRY_ERR_INVALID_ARG);
    CHK(ferry_dataset_image_folder(ft_tmp("emptyroot"), NULL, NULL), FERRY_ERR_INVALID_ARG);
    /* A root that does not exist is a bad argument (ENOENT); one that cannot be
     * read (EACCES, EIO) is FERRY_ERR_IO. */
    CHK(ferry_dataset_image_folder(ft_tmp("nonexistent"), NULL, &ds), FERRY_ERR_INVALID_ARG);
    CHK(ferry_dataset_image_folder(ft_tmp("emptyroot"), NULL, &ds), FERRY_ERR_INVALID_ARG);
    CHK(ferry_dataset_image_folder(ft_tmp("emptyroot"), &bad, &ds), FERRY_ERR_INVALID_ARG);
}

TEST(dataset_list_file_errors)
{
    ferry_dataset *ds;
    ft_write_file(ft_tmp("empty.txt"), "# nothing\n", 10);
    ft_write_file(ft_tmp("badlabel.txt"), "a.png,x\n", 8);
    CHK(ferry_dataset_list_file(NULL, NULL, &ds), FERRY_ERR_INVALID_ARG);
    CHK(ferry_dataset_list_file(ft_tmp("empty.txt"), NULL, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_dataset_list_file(ft_tmp("missing.txt"), NULL, &ds), FERRY_ERR_IO);
    CHK(ferry_dataset_list_file(ft_tmp("empty.txt"), NULL, &ds), FERRY_ERR_INVALID_ARG);
    CHK(ferry_dataset_list_file(ft_tmp("badlabel.txt"), NULL, &ds), FERRY_ERR_FORMAT);
}

TEST(dataset_shards_errors)
{
    ferry_dataset *ds;
    const char *junk = ft_tmp("junk.tar"), *missing = ft_tmp("missing.tar"), *null_path[] = {NULL};
    ft_write_file(junk, "junk", 4);
    CHK(ferry_dataset_shards(NULL, 1, NULL, &ds), FERRY_ERR_INVALID_ARG);
    CHK(ferry_dataset_shards(&junk, 0, NULL, &ds), FERRY_ERR_INVALID_ARG);
    CHK(ferry_dataset_shards(&junk, 1, NULL, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_dataset_shards(null_path, 1, NULL, &ds), FERRY_ERR_INVALID_ARG);
    CHK(ferry_dataset_shards(&missing, 1, NULL, &ds), FERRY_ERR_INVALID_ARG);
    CHK(ferry_dataset_shards(&junk, 1, NULL, &ds), FERRY_ERR_FORMAT);
    CHK_TRUE(!ferry_dataset_is_shard_path(NULL) && !ferry_dataset_is_shard_path("") &&
             !ferry_dataset_is_shard_path(".tar") && !ferry_dataset_is_shard_path("a.tar.xz"));
    CHK_TRUE(ferry_dataset_is_shard_path("a.tar") && ferry_dataset_is_shard_path("d/A.TAR.GZ") &&
             ferry_dataset_is_shard_path("b.tgz"));
}

TEST(dataset_idx_errors)
{
    ferry_dataset *ds;
    ft_write_file(ft_tmp("junk.idx"), "junk", 4);
    CHK(ferry_dataset_idx(NULL, ft_tmp("junk.idx"), NULL, &ds), FERRY_ERR_INVALID_ARG);
    CHK(ferry_dataset_idx(ft_tmp("junk.idx"), NULL, NULL, &ds), FERRY_ERR_INVALID_ARG);
    CHK(ferry_dataset_idx(ft_tmp("junk.idx"), ft_tmp("junk.idx"), NULL, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_dataset_idx(ft_tmp("missing.idx"), ft_tmp("junk.idx"), NULL, &ds), FERRY_ERR_IO);
    CHK(ferry_dataset_idx(ft_tmp("junk.idx"), ft_tmp("junk.idx"), NULL, &ds), FERRY_ERR_FORMAT);
}

TEST(dataset_open_errors)
{
    ferry_dataset *ds = (ferry_dataset *)1;
    ferry_dataset_kind k;
    ft_write_file(ft_tmp("open/picture.png"), "\x89PNG\r\n\x1a\n", 8);
    ft_write_file(ft_tmp("open/words.txt"), "hello\n", 6);
    ft_write_file(ft_tmp("open/blob.bin"), "\x01\x00\x02", 3);
    ft_write_file(ft_tmp("open/empty.bin"), "", 0);
    ft_write_file(ft_tmp("open/data.gz"), "\x1f\x8b\x08\x00", 4);
    ft_write_file(ft_tmp("open/x-labels-idx1-ubyte"), "\x00\x00\x08\x01\x00\x00\x00\x00", 8);
    ft_write_file(ft_tmp("open/a-images-idx3-ubyte"), "\x00\x00\x08\x03", 4); /* no labels */
    CHK(ferry_dataset_open(NULL, NULL, &ds), FERRY_ERR_INVALID_ARG);
    ASSERT_STATUS(ferry_dataset_open(NULL, NULL, &ds), FERRY_ERR_INVALID_ARG);
    ASSERT(ds == NULL); /* *out cleared on failure */
    CHK(ferry_dataset_open("", NULL, &ds), FERRY_ERR_INVALID_ARG);
    CHK(ferry_dataset_open(ft_tmp("open"), NULL, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_dataset_probe(ft_tmp("open"), NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_dataset_probe(NULL, &k), FERRY_ERR_INVALID_ARG);
    CHK(ferry_dataset_open(ft_tmp("open/nonexistent"), NULL, &ds), FERRY_ERR_INVALID_ARG);
    CHK(ferry_dataset_open(ft_tmp("open/picture.png"), NULL, &ds), FERRY_ERR_FORMAT);
    CHK(ferry_dataset_open(ft_tmp("open/words.txt"), NULL, &ds), FERRY_ERR_FORMAT);
    CHK(ferry_dataset_open(ft_tmp("open/blob.bin"), NULL, &ds), FERRY_ERR_FORMAT);
    CHK(ferry_dataset_open(ft_tmp("open/empty.bin"), NULL, &ds), FERRY_ERR_FORMAT);
    CHK(ferry_dataset_open(ft_tmp("open/data.gz"), NULL, &ds), FERRY_ERR_FORMAT);
    CHK(ferry_dataset_open(ft_tmp("open/x-labels-idx1-ubyte"), NULL, &ds), FERRY_ERR_INVALID_ARG);
    CHK(ferry_dataset_open(ft_tmp("open/a-images-idx3-ubyte"), NULL, &ds), FERRY_ERR_INVALID_ARG);
    CHK(ferry_dataset_open("https://example.invalid/list.txt", NULL, &ds), FERRY_ERR_INVALID_ARG);
    CHK(ferry_dataset_open("/dev/null", NULL, &ds), FERRY_ERR_FORMAT);
}

TEST(dataset_memory_errors)
{
    ferry_dataset *ds;
    uint8_t data[12] = {0};
    int64_t labels[2] = {0, -1};
    ferry_sample_format f = {1, 2, 3, FERRY_LAYOUT_CHW, FERRY_DTYPE_U8};
    ferry_sample_format i64 = {1, 2, 3, FERRY_LAYOUT_CHW, FERRY_DTYPE_I64};
    ferry_sample_format zero = {0, 2, 3, FERRY_LAYOUT_CHW, FERRY_DTYPE_U8};
    ferry_sample_format huge = {1, (size_t)1 << 40, (size_t)1 << 40, FERRY_LAYOUT_CHW, FERRY_DTYPE_U8};
    CHK(ferry_dataset_memory(NULL, &f, 2, NULL, &ds), FERRY_ERR_INVALID_ARG);
    CHK(ferry_dataset_memory(data, NULL, 2, NULL, &ds), FERRY_ERR_INVALID_ARG);
    CHK(ferry_dataset_memory(data, &f, 2, NULL, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_dataset_memory(data, &i64, 2, NULL, &ds), FERRY_ERR_DTYPE);
    CHK(ferry_dataset_memory(data, &zero, 2, NULL, &ds), FERRY_ERR_INVALID_ARG);
    CHK(ferry_dataset_memory(data, &huge, 2, NULL, &ds), FERRY_ERR_INVALID_ARG);
    CHK(ferry_dataset_memory(data, &f, 2, labels, &ds), FERRY_ERR_INVALID_ARG);
    CHK(ferry_dataset_memory(data, &f, (size_t)-1, NULL, &ds), FERRY_ERR_INVALID_ARG);
}

TEST(dataset_views_errors)
{
    ferry_dataset *ds = mem_ds(), *v, *w;
    size_t idx[2] = {1, 10};
    CHK(ferry_dataset_subset(NULL, 0, 1, &v), FERRY_ERR_INVALID_ARG);
    CHK(ferry_dataset_subset(ds, 0, 1, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_dataset_subset(ds, 5, 4, &v), FERRY_ERR_INVALID_ARG);
    CHK(ferry_dataset_subset(ds, 0, 11, &v), FERRY_ERR_INVALID_ARG);
    CHK(ferry_dataset_subset(ds, 0, (size_t)-1, &v), FERRY_ERR_INVALID_ARG);
    CHK(ferry_dataset_indices(NULL, idx, 1, &v), FERRY_ERR_INVALID_ARG);
    CHK(ferry_dataset_indices(ds, NULL, 2, &v), FERRY_ERR_INVALID_ARG);
    CHK(ferry_dataset_indices(ds, idx, 2, &v), FERRY_ERR_INVALID_ARG);
    CHK(ferry_dataset_indices(ds, idx, 1, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_dataset_split(NULL, 0.5, 1, &v, &w), FERRY_ERR_INVALID_ARG);
    CHK(ferry_dataset_split(ds, 0.5, 1, NULL, &w), FERRY_ERR_INVALID_ARG);
    CHK(ferry_dataset_split(ds, 0.5, 1, &v, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_dataset_split(ds, -0.1, 1, &v, &w), FERRY_ERR_INVALID_ARG);
    CHK(ferry_dataset_split(ds, 1.5, 1, &v, &w), FERRY_ERR_INVALID_ARG);
    CHK(ferry_dataset_split(ds, NAN, 1, &v, &w), FERRY_ERR_INVALID_ARG);
    ferry_dataset_release(ds);
}

static ferry_status cb_get(void *user, size_t i, void *dst, size_t n, const ferry_sample_ctx *ctx,
                           int64_t *label)
{
    (void)user; (void)i; (void)ctx;
    memset(dst, 0, n);
    *label = 0;
    return FERRY_OK;
}

TEST(dataset_custom_errors)
{
    ferry_dataset *ds;
    ferry_dataset_callbacks cb = {.len = 4, .format = {1, 2, 2, FERRY_LAYOUT_CHW, FERRY_DTYPE_U8},
                                  .num_classes = 1, .get = cb_get};
    ferry_dataset_callbacks noget = cb, nofmt = cb, badlayout = cb;
    noget.get = NULL;
    nofmt.format.width = 0;
    badlayout.format.layout = (ferry_layout)5;
    CHK(ferry_dataset_custom(NULL, NULL, &ds), FERRY_ERR_INVALID_ARG);
    CHK(ferry_dataset_custom(&cb, NULL, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_dataset_custom(&noget, NULL, &ds), FERRY_ERR_INVALID_ARG);
    CHK(ferry_dataset_custom(&nofmt, NULL, &ds), FERRY_ERR_INVALID_ARG);
    CHK(ferry_dataset_custom(&badlayout, NULL, &ds), FERRY_ERR_INVALID_ARG);
    static const size_t ends[2] = {3, 2};
    ferry_dataset_callbacks noends = cb, badends = cb;
    noends.num_shards = 2;
    badends.shard_ends = ends;
    badends.num_shards = 2;
    CHK(ferry_dataset_custom(&noends, NULL, &ds), FERRY_ERR_INVALID_ARG);
    CHK(ferry_dataset_custom(&badends, NULL, &ds), FERRY_ERR_INVALID_ARG);
}

TEST(dataset_retain_destroy_null)
{
    CHK_TRUE(ferry_dataset_retain(NULL) == NULL);
    NOCRASH(ferry_dataset_release(NULL));
}

TEST(dataset_queries_null_and_out_of_range)
{
    ferry_dataset *ds = mem_ds();
    CHK_TRUE(ferry_dataset_len(NULL) == 0);
    const char *first = "x";
    CHK_TRUE(ferry_dataset_unreadable_count(NULL, &first) == 0 && first == NULL);
    CHK_TRUE(ferry_dataset_unreadable_count(NULL, NULL) == 0);
    CHK_TRUE(ferry_dataset_format(NULL) == NULL);
    CHK_TRUE(ferry_dataset_sample_bytes(NULL) == 0);
    CHK_TRUE(ferry_dataset_class_count(NULL) == 0);
    CHK_TRUE(ferry_dataset_class_name(NULL, 0) == NULL);
    CHK_TRUE(ferry_dataset_class_name(ds, 1000) == NULL);
    CHK_TRUE(ferry_dataset_sample_name(NULL, 0) == NULL);
    CHK_TRUE(ferry_dataset_sample_name(ds, 1000) == NULL);
    ferry_dataset_release(ds);
}

TEST(dataset_label_errors)
{
    ferry_dataset *ds = mem_ds();
    int64_t lab;
    CHK(ferry_dataset_label(NULL, 0, &lab), FERRY_ERR_INVALID_ARG);
    CHK(ferry_dataset_label(ds, 0, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_dataset_label(ds, 10, &lab), FERRY_ERR_INVALID_ARG);
    CHK(ferry_dataset_label(ds, (size_t)-1, &lab), FERRY_ERR_INVALID_ARG);
    ferry_dataset_release(ds);
}

TEST(dataset_get_errors)
{
    ferry_dataset *ds = mem_ds();
    uint8_t dst[6];
    int64_t lab;
    CHK(ferry_dataset_get(NULL, 0, dst, sizeof dst, NULL, &lab), FERRY_ERR_INVALID_ARG);
    CHK(ferry_dataset_get(ds, 0, NULL, sizeof dst, NULL, &lab), FERRY_ERR_INVALID_ARG);
    CHK(ferry_dataset_get(ds, 0, dst, sizeof dst, NULL, NULL), FERRY_OK); /* label optional */
    CHK(ferry_dataset_get(ds, 10, dst, sizeof dst, NULL, &lab), FERRY_ERR_INVALID_ARG);
    CHK(ferry_dataset_get(ds, 0, dst, sizeof dst - 1, NULL, &lab), FERRY_ERR_INVALID_ARG);
    CHK(ferry_dataset_get(ds, 0, dst, sizeof dst, NULL, &lab), FERRY_OK);
    ferry_dataset_release(ds);
}

/* ================= loader.h ================= */
TEST(loader_create_null_arguments)
{
    ferry_dataset *ds = mem_ds();
    ferry_loader_config c = loader_cfg(ds);
    ferry_loader *l;
    CHK(ferry_loader_create(NULL, &l), FERRY_ERR_INVALID_ARG);
    CHK(ferry_loader_create(&c, NULL), FERRY_ERR_INVALID_ARG);
    c.dataset = NULL;
    CHK(create_with(c), FERRY_ERR_INVALID_ARG);
    ferry_dataset_release(ds);
}

/* {0} with a dataset: every other field its default. */
TEST(loader_create_zero_config)
{
    ferry_dataset *ds = mem_ds();
    ferry_loader_config c = {.dataset = ds};
    CHK(create_with(c), FERRY_OK);
    c.batch_size = 3;
    CHK(create_with(c), FERRY_OK);
    ferry_dataset_release(ds);
}

TEST(loader_create_zero_and_huge_sizes)
{
    ferry_dataset *ds = mem_ds(), *empty;
    ferry_loader_config c = loader_cfg(ds);
    c.batch_size = 0; /* the default, 64: one short batch of 10 */
    CHK(create_with(c), FERRY_OK);
    c = loader_cfg(ds);
    c.batch_size = 1000; /* more than the dataset: one short batch */
    CHK(create_with(c), FERRY_OK);
    c.batch_size = (size_t)-1; /* more than any memory: a mistake (test_bad_values) */
    CHK(create_with(c), FERRY_ERR_INVALID_ARG);
    c.batch_size = HUGE_SIZE;
    c.drop_last = true; /* no batch at all */
    CHK(create_with(c), FERRY_ERR_INVALID_ARG);
    c = loader_cfg(ds);
    c.prefetch = 0; /* the default, 4 */
    CHK(create_with(c), FERRY_OK);
    c.prefetch = (size_t)-1;
    CHK(create_with(c), FERRY_ERR_INVALID_ARG);
    c = loader_cfg(ds);
    c.num_workers = (size_t)-2;
    CHK(create_with(c), FERRY_ERR_INVALID_ARG);
    c.num_workers = 1025;
    CHK(create_with(c), FERRY_ERR_INVALID_ARG);
    ASSERT_OK(ferry_dataset_subset(ds, 3, 3, &empty));
    c = loader_cfg(empty);
    CHK(create_with(c), FERRY_ERR_INVALID_ARG);
    ferry_dataset_release(empty);
    ferry_dataset_release(ds);
}

TEST(loader_create_wrong_device)
{
    ferry_dataset *ds = mem_ds();
    ferry_loader_config c = loader_cfg(ds);
    c.device = BAD_DEVICE;
    CHK(create_with(c), FERRY_ERR_INVALID_ARG);
    c.device = NEG_CUDA;
    CHK(create_with(c), FERRY_ERR_INVALID_ARG);
    c.device = (ferry_device){FERRY_DEVICE_DEFAULT, 1}; /* only the zero value is the default */
    CHK(create_with(c), FERRY_ERR_INVALID_ARG);
    c.device = ferry_cuda(1000);
    CHK(create_with(c), FERRY_ERR_NO_DEVICE);
    if (no_gpu()) {
        c.device = ferry_cuda(0);
        CHK(create_with(c), FERRY_ERR_NO_DEVICE);
        c.device = (ferry_device){0}; /* the default device: cpu here */
        c.pin_memory = FERRY_PIN_MEMORY_AUTO; /* unpinned, silently */
        CHK(create_with(c), FERRY_OK);
        c.device = ferry_cpu();
        c.pin_memory = FERRY_PIN_MEMORY_ON; /* warns once, falls back */
        CHK(create_with(c), FERRY_OK);
    }
    ferry_dataset_release(ds);
}

TEST(loader_create_wrong_dtypes)
{
    ferry_dataset *ds = mem_ds();
    ferry_loader_config c = loader_cfg(ds);
    c.out_dtype = FERRY_DTYPE_I64;
    CHK(create_with(c), FERRY_ERR_INVALID_ARG);
    c.out_dtype = FERRY_DTYPE_COUNT;
    CHK(create_with(c), FERRY_ERR_INVALID_ARG);
    c = loader_cfg(ds);
    c.wire_dtype = (ferry_wire_dtype)7;
    CHK(create_with(c), FERRY_ERR_INVALID_ARG);
    c.wire_dtype = FERRY_WIRE_F32;
    c.out_dtype = FERRY_DTYPE_U8;
    CHK(create_with(c), FERRY_ERR_INVALID_ARG);
    ferry_dataset_release(ds);
}

TEST(loader_create_bad_enums_and_numbers)
{
    ferry_dataset *ds = mem_ds();
    ferry_loader_config c = loader_cfg(ds);
    c.layout = (ferry_layout)7;
    CHK(create_with(c), FERRY_ERR_INVALID_ARG);
    c = loader_cfg(ds);
    c.on_error = (ferry_on_error)7;
    CHK(create_with(c), FERRY_ERR_INVALID_ARG);
    c = loader_cfg(ds);
    c.sampler = (ferry_sampler)42;
    CHK(create_with(c), FERRY_ERR_INVALID_ARG);
    c = loader_cfg(ds);
    c.sample_timeout_s = -1;
    CHK(create_with(c), FERRY_ERR_INVALID_ARG);
    c.sample_timeout_s = NAN;
    CHK(create_with(c), FERRY_ERR_INVALID_ARG);
    c = loader_cfg(ds);
    c.std[0] = NAN;
    CHK(create_with(c), FERRY_ERR_INVALID_ARG);
    c = loader_cfg(ds);
    c.mean[3] = NAN;
    CHK(create_with(c), FERRY_ERR_INVALID_ARG);
    c = loader_cfg(ds);
    c.pin_memory = (ferry_pin_memory)7;
    CHK(create_with(c), FERRY_ERR_INVALID_ARG);
    c = loader_cfg(ds);
    c.std[0] = 0; /* the default, 1 */
    CHK(create_with(c), FERRY_OK);
    ferry_dataset_release(ds);
}

TEST(loader_create_bad_samplers)
{
    ferry_dataset *ds = mem_ds();
    size_t idx[3] = {0, 4, 10};
    ferry_loader_config c = loader_cfg(ds);
    c.sampler = FERRY_SAMPLER_INDICES;
    c.indices = NULL;
    c.num_indices = 3;
    CHK(create_with(c), FERRY_ERR_INVALID_ARG);
    c.indices = idx;
    CHK(create_with(c), FERRY_ERR_INVALID_ARG); /* 10 is out of range */
    c.num_indices = 0;
    CHK(create_with(c), FERRY_ERR_INVALID_ARG);
    c = loader_cfg(ds);
    c.sampler = FERRY_SAMPLER_DISTRIBUTED;
    c.world_size = 0;
    CHK(create_with(c), FERRY_ERR_INVALID_ARG);
    c.world_size = 2;
    c.rank = 2;
    CHK(create_with(c), FERRY_ERR_INVALID_ARG);
    ferry_dataset_release(ds);
}

TEST(loader_create_unsupported_dataset)
{
    /* f32 samples cannot travel as u8 bytes. */
    float data[4 * 2] = {0};
    ferry_sample_format f = {1, 1, 2, FERRY_LAYOUT_CHW, FERRY_DTYPE_F32};
    ferry_dataset *ds;
    ASSERT_OK(ferry_dataset_memory(data, &f, 4, NULL, &ds));
    ferry_loader_config c = loader_cfg(ds);
    c.wire_dtype = FERRY_WIRE_U8;
    CHK(create_with(c), FERRY_ERR_INVALID_ARG);
    c.wire_dtype = FERRY_WIRE_DEFAULT; /* f32 for f32 samples */
    c.out_dtype = FERRY_DTYPE_U8;
    CHK(create_with(c), FERRY_ERR_INVALID_ARG);
    c.out_dtype = FERRY_DTYPE_F32;
    CHK(create_with(c), FERRY_OK);
    c.wire_dtype = FERRY_WIRE_F32;
    CHK(create_with(c), FERRY_OK);
    ferry_dataset_release(ds);
    /* A custom dataset of i64 samples: valid, but the loader cannot carry it. */
    ferry_dataset_callbacks cb = {.len = 4, .format = {1, 1, 2, FERRY_LAYOUT_CHW, FERRY_DTYPE_I64},
                                  .num_classes = 1, .get = cb_get};
    ASSERT_OK(ferry_dataset_custom(&cb, NULL, &ds));
    c = loader_cfg(ds);
    CHK(create_with(c), FERRY_ERR_UNSUPPORTED);
    ferry_dataset_release(ds);
}

TEST(loader_destroy_null)
{
    NOCRASH(ferry_loader_destroy(NULL));
}

TEST(loader_next_errors)
{
    ferry_dataset *ds = mem_ds();
    ferry_loader_config c = loader_cfg(ds);
    ferry_loader *l;
    ferry_batch b;
    ASSERT_OK(ferry_loader_create(&c, &l));
    CHK(ferry_loader_next(NULL, NULL, &b), FERRY_ERR_INVALID_ARG);
    CHK(ferry_loader_next(l, NULL, NULL), FERRY_ERR_INVALID_ARG);
    ferry_loader_destroy(l);
    ferry_dataset_release(ds);
}

TEST(loader_next_stream_on_another_device)
{
    ft_require_cuda();
    ferry_dataset *ds = mem_ds();
    ferry_loader_config c = loader_cfg(ds);
    ferry_loader *l;
    ferry_stream *s;
    ferry_batch b;
    ASSERT_OK(ferry_loader_create(&c, &l));
    ASSERT_OK(ferry_stream_create(ferry_cuda(0), &s));
    CHK(ferry_loader_next(l, s, &b), FERRY_ERR_DEVICE_MISMATCH);
    ferry_stream_destroy(s);
    ferry_loader_destroy(l);
    ferry_dataset_release(ds);
}

TEST(loader_reset_and_queries_null)
{
    CHK(ferry_loader_reset(NULL, 0), FERRY_ERR_INVALID_ARG);
    CHK_TRUE(ferry_loader_len(NULL) == 0);
    CHK_TRUE(ferry_loader_sample_count(NULL) == 0);
    CHK_TRUE(ferry_device_eq(ferry_loader_device(NULL), ferry_cpu()));
}

TEST(loader_state_errors)
{
    ferry_dataset *ds = mem_ds();
    ferry_loader_config c = loader_cfg(ds);
    ferry_loader *l;
    ferry_loader_state s;
    char text[FERRY_LOADER_STATE_TEXT_MAX];
    ASSERT_OK(ferry_loader_create(&c, &l));
    CHK(ferry_loader_state_get(NULL, &s), FERRY_ERR_INVALID_ARG);
    CHK(ferry_loader_state_get(l, NULL), FERRY_ERR_INVALID_ARG);
    ASSERT_OK(ferry_loader_state_get(l, &s));
    CHK(ferry_loader_restore(NULL, &s), FERRY_ERR_INVALID_ARG);
    CHK(ferry_loader_restore(l, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_loader_state_format(NULL, text, sizeof text), FERRY_ERR_INVALID_ARG);
    CHK(ferry_loader_state_format(&s, NULL, sizeof text), FERRY_ERR_INVALID_ARG);
    CHK(ferry_loader_state_format(&s, text, 8), FERRY_ERR_INVALID_ARG);
    CHK(ferry_loader_state_parse(NULL, &s), FERRY_ERR_INVALID_ARG);
    CHK(ferry_loader_state_parse("ferry-loader-state/1", NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_loader_state_parse("", &s), FERRY_ERR_FORMAT);
    ferry_loader_state other = s;
    other.drop_last = !s.drop_last;
    CHK(ferry_loader_restore(l, &other), FERRY_ERR_INVALID_ARG);
    ferry_loader_destroy(l);
    ferry_dataset_release(ds);
}

TEST(loader_stats_errors)
{
    ferry_dataset *ds = mem_ds();
    ferry_loader_config c = loader_cfg(ds);
    ferry_loader *l;
    ferry_loader_stats s;
    ASSERT_OK(ferry_loader_create(&c, &l));
    CHK(ferry_loader_stats_get(NULL, &s), FERRY_ERR_INVALID_ARG);
    CHK(ferry_loader_stats_get(l, NULL), FERRY_ERR_INVALID_ARG);
    NOCRASH(ferry_loader_stats_reset(NULL));
    ferry_loader_destroy(l);
    ferry_dataset_release(ds);
}

/* ================= ops.h ================= */
/* Shared operands, held by globals (a test that fails early leaks nothing). */
static ferry_tensor *cached(int k, const int64_t *shape, size_t ndim, ferry_dtype dt)
{
    static ferry_tensor *c[16];
    if (!c[k])
        ASSERT_OK(ferry_tensor_zeros(shape, ndim, dt, ferry_cpu(), &c[k]));
    return c[k];
}
#define T23 cached(0, (const int64_t[]){2, 3}, 2, FERRY_DTYPE_F32)
#define T34 cached(1, (const int64_t[]){3, 4}, 2, FERRY_DTYPE_F32)
#define T45 cached(2, (const int64_t[]){4, 5}, 2, FERRY_DTYPE_F32)
#define T23_F16 cached(3, (const int64_t[]){2, 3}, 2, FERRY_DTYPE_F16)
#define T23_U8 cached(4, (const int64_t[]){2, 3}, 2, FERRY_DTYPE_U8)
#define T1 cached(5, (const int64_t[]){1}, 1, FERRY_DTYPE_F32)
#define T0D cached(6, NULL, 0, FERRY_DTYPE_F32)
#define T20 cached(7, (const int64_t[]){2, 0}, 2, FERRY_DTYPE_F32)
#define T234 cached(8, (const int64_t[]){2, 3, 4}, 3, FERRY_DTYPE_F32)
#define T3 cached(9, (const int64_t[]){3}, 1, FERRY_DTYPE_F32)
#define L2_I64 cached(10, (const int64_t[]){2}, 1, FERRY_DTYPE_I64)
#define L3_I64 cached(11, (const int64_t[]){3}, 1, FERRY_DTYPE_I64)
#define L2_F32 cached(12, (const int64_t[]){2}, 1, FERRY_DTYPE_F32)

/* T23 transposed: a view that is not contiguous. */
static ferry_tensor *t32_view(void)
{
    static ferry_tensor *v;
    if (!v)
        ASSERT_OK(ferry_tensor_transpose(T23, 0, 1, &v));
    return v;
}

static const int64_t SHAPE23[] = {2, 3};
static const int64_t SHAPE_NEG[] = {2, -3};
static const int64_t SHAPE_HUGE[] = {(int64_t)1 << 62, (int64_t)1 << 62};

static ferry_status ones_with(const int64_t *shape, size_t ndim, ferry_dtype dt, ferry_device d)
{
    ferry_tensor *t = NULL;
    ferry_status st = ferry_tensor_ones(shape, ndim, dt, d, &t);
    ferry_tensor_release(t);
    return st;
}

static ferry_status full_with(const int64_t *shape, size_t ndim, ferry_dtype dt, ferry_device d)
{
    ferry_tensor *t = NULL;
    ferry_status st = ferry_tensor_full(shape, ndim, 2.5, dt, d, &t);
    ferry_tensor_release(t);
    return st;
}

static ferry_status rand_with(const int64_t *shape, size_t ndim, ferry_dtype dt, ferry_device d, bool normal)
{
    ferry_tensor *t = NULL;
    ferry_status st = normal ? ferry_tensor_randn(shape, ndim, dt, d, 1, &t)
                             : ferry_tensor_rand(shape, ndim, dt, d, 1, &t);
    ferry_tensor_release(t);
    return st;
}

static ferry_status arange_with(double a, double b, double step, ferry_dtype dt, ferry_device d)
{
    ferry_tensor *t = NULL;
    ferry_status st = ferry_tensor_arange(a, b, step, dt, d, &t);
    ferry_tensor_release(t);
    return st;
}

TEST(ops_ones_full_errors)
{
    ferry_tensor *t;
    CHK(ferry_tensor_ones(NULL, 2, FERRY_DTYPE_F32, ferry_cpu(), &t), FERRY_ERR_INVALID_ARG);
    CHK(full_with(NULL, 2, FERRY_DTYPE_F32, ferry_cpu()), FERRY_ERR_INVALID_ARG);
    CHK(ones_with(SHAPE_NEG, 2, FERRY_DTYPE_F32, ferry_cpu()), FERRY_ERR_INVALID_ARG);
    CHK(full_with(SHAPE23, FERRY_MAX_DIMS + 1, FERRY_DTYPE_F32, ferry_cpu()), FERRY_ERR_INVALID_ARG);
    CHK(ones_with(SHAPE_HUGE, 2, FERRY_DTYPE_F32, ferry_cpu()), FERRY_ERR_LIMIT);
    CHK(full_with(SHAPE_HUGE, 2, FERRY_DTYPE_F32, ferry_cpu()), FERRY_ERR_LIMIT);
    CHK(ones_with(SHAPE23, 2, FERRY_DTYPE_COUNT, ferry_cpu()), FERRY_ERR_DTYPE);
    CHK(full_with(SHAPE23, 2, (ferry_dtype)-1, ferry_cpu()), FERRY_ERR_DTYPE);
    CHK(ones_with(SHAPE23, 2, FERRY_DTYPE_F32, BAD_DEVICE), FERRY_ERR_INVALID_ARG);
    CHK(full_with(SHAPE23, 2, FERRY_DTYPE_F32, NEG_CUDA), FERRY_ERR_INVALID_ARG);
    if (no_gpu()) {
        CHK(ones_with(SHAPE23, 2, FERRY_DTYPE_F32, ferry_cuda(0)), FERRY_ERR_NO_DEVICE);
        CHK(full_with(SHAPE23, 2, FERRY_DTYPE_F32, ferry_cuda(0)), FERRY_ERR_NO_DEVICE);
    }
    CHK(ones_with(SHAPE23, 2, FERRY_DTYPE_F32, ferry_cuda(1000)), FERRY_ERR_NO_DEVICE);
}

TEST(ops_arange_errors)
{
    CHK(arange_with(0, 4, 0, FERRY_DTYPE_F32, ferry_cpu()), FERRY_ERR_INVALID_ARG);
    CHK(arange_with(0, 4, -0.0, FERRY_DTYPE_F32, ferry_cpu()), FERRY_ERR_INVALID_ARG);
    CHK(arange_with(0, NAN, 1, FERRY_DTYPE_F32, ferry_cpu()), FERRY_ERR_INVALID_ARG);
    CHK(arange_with(0, INFINITY, 1, FERRY_DTYPE_F32, ferry_cpu()), FERRY_ERR_INVALID_ARG);
    CHK(arange_with(0, 1e18, 1, FERRY_DTYPE_F32, ferry_cpu()), FERRY_ERR_LIMIT);
    CHK(arange_with(0, 4, -1, FERRY_DTYPE_F32, ferry_cpu()), FERRY_OK); /* empty */
    CHK(arange_with(0, 4, 1, FERRY_DTYPE_COUNT, ferry_cpu()), FERRY_ERR_DTYPE);
    CHK(arange_with(0, 4, 1, FERRY_DTYPE_F32, BAD_DEVICE), FERRY_ERR_INVALID_ARG);
    if (no_gpu())
        CHK(arange_with(0, 4, 1, FERRY_DTYPE_F32, ferry_cuda(0)), FERRY_ERR_NO_DEVICE);
}

TEST(ops_rand_randn_errors)
{
    for (int normal = 0; normal < 2; normal++) {
        CHK(rand_with(NULL, 2, FERRY_DTYPE_F32, ferry_cpu(), normal), FERRY_ERR_INVALID_ARG);
        CHK(rand_with(SHAPE_NEG, 2, FERRY_DTYPE_F32, ferry_cpu(), normal), FERRY_ERR_INVALID_ARG);
        CHK(rand_with(SHAPE_HUGE, 2, FERRY_DTYPE_F32, ferry_cpu(), normal), FERRY_ERR_LIMIT);
        CHK(rand_with(SHAPE23, 2, FERRY_DTYPE_I64, ferry_cpu(), normal), FERRY_ERR_DTYPE);
        CHK(rand_with(SHAPE23, 2, FERRY_DTYPE_U8, ferry_cpu(), normal), FERRY_ERR_DTYPE);
        CHK(rand_with(SHAPE23, 2, FERRY_DTYPE_COUNT, ferry_cpu(), normal), FERRY_ERR_DTYPE);
        CHK(rand_with(SHAPE23, 2, FERRY_DTYPE_F32, BAD_DEVICE, normal), FERRY_ERR_INVALID_ARG);
        if (no_gpu())
            CHK(rand_with(SHAPE23, 2, FERRY_DTYPE_F32, ferry_cuda(0), normal), FERRY_ERR_NO_DEVICE);
    }
}

TEST(ops_fill_copy_errors)
{
    CHK(ferry_tensor_fill(NULL, 1.0, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_tensor_copy(NULL, T23, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_tensor_copy(T23, NULL, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_tensor_copy(T23, T34, NULL), FERRY_ERR_SHAPE);
    CHK(ferry_tensor_copy(T3, T23, NULL), FERRY_ERR_SHAPE);   /* would need to shrink */
    CHK(ferry_tensor_copy(T23, T3, NULL), FERRY_OK);          /* broadcasts */
    CHK(ferry_tensor_copy(T23, T23_U8, NULL), FERRY_OK);      /* converts */
}

TEST(ops_clone_contiguous_item_errors)
{
    ferry_tensor *o, *tt = t32_view();
    double v;
    CHK(ferry_tensor_clone(NULL, NULL, &o), FERRY_ERR_INVALID_ARG);
    CHK(ferry_tensor_contiguous(NULL, NULL, &o), FERRY_ERR_INVALID_ARG);
    CHK(ferry_tensor_contiguous(tt, NULL, &o), FERRY_OK); /* a copy */
    CHK(ferry_tensor_item(NULL, &v), FERRY_ERR_INVALID_ARG);
    CHK(ferry_tensor_item(T23, &v), FERRY_ERR_SHAPE);
    CHK(ferry_tensor_item(T20, &v), FERRY_ERR_SHAPE);
    CHK(ferry_tensor_item(T0D, &v), FERRY_OK);
}

TEST(ops_view_errors)
{
    ferry_tensor *o;
    const int64_t s4[] = {4}, s_inf2[] = {-1, -1}, s_neg[] = {-2, -3}, s_inf0[] = {0, -1};
    const int64_t s9[FERRY_MAX_DIMS + 1] = {1, 1, 1, 1, 1, 1, 1, 1, 6};
    CHK(ferry_tensor_reshape(NULL, SHAPE23, 2, &o), FERRY_ERR_INVALID_ARG);
    CHK(ferry_tensor_reshape(T23, s4, 1, &o), FERRY_ERR_SHAPE);
    CHK(ferry_tensor_reshape(T23, s_inf2, 2, &o), FERRY_ERR_SHAPE);
    CHK(ferry_tensor_reshape(T23, s_neg, 2, &o), FERRY_ERR_SHAPE);
    CHK(ferry_tensor_reshape(T23, s_inf0, 2, &o), FERRY_ERR_SHAPE);
    CHK(ferry_tensor_reshape(T23, SHAPE_HUGE, 2, &o), FERRY_ERR_SHAPE);
    CHK(ferry_tensor_reshape(T23, s9, FERRY_MAX_DIMS + 1, &o), FERRY_ERR_SHAPE);
    CHK(ferry_tensor_slice(NULL, 0, 0, 1, 1, &o), FERRY_ERR_INVALID_ARG);
    CHK(ferry_tensor_slice(T23, 2, 0, 1, 1, &o), FERRY_ERR_SHAPE);
    CHK(ferry_tensor_slice(T23, -3, 0, 1, 1, &o), FERRY_ERR_SHAPE);
    CHK(ferry_tensor_slice(T23, 0, 0, 1, 0, &o), FERRY_ERR_INVALID_ARG);
    CHK(ferry_tensor_slice(T23, 0, 0, 1, -1, &o), FERRY_ERR_INVALID_ARG);
    CHK(ferry_tensor_slice(T23, 1, 100, INT64_MIN, 1, &o), FERRY_OK); /* clamped: empty */
    CHK(ferry_tensor_transpose(NULL, 0, 1, &o), FERRY_ERR_INVALID_ARG);
    CHK(ferry_tensor_transpose(T23, 0, 2, &o), FERRY_ERR_SHAPE);
    CHK(ferry_tensor_transpose(T23, INT64_MIN, 0, &o), FERRY_ERR_SHAPE);
    CHK(ferry_tensor_flatten(NULL, &o), FERRY_ERR_INVALID_ARG);
    CHK(ferry_tensor_flatten(T0D, &o), FERRY_ERR_SHAPE);
    CHK(ferry_tensor_reshape(T23, NULL, 2, &o), FERRY_ERR_INVALID_ARG);
}

TEST(ops_binary_errors)
{
    ferry_tensor *o;
    CHK(ferry_binary(FERRY_OP_ADD, NULL, T23, NULL, &o), FERRY_ERR_INVALID_ARG);
    CHK(ferry_add(T23, NULL, NULL, &o), FERRY_ERR_INVALID_ARG);
    CHK(ferry_mul(T23, T34, NULL, &o), FERRY_ERR_SHAPE);
    CHK(ferry_div(T23, T45, NULL, &o), FERRY_ERR_SHAPE);
    CHK(ferry_add(T23, T3, NULL, &o), FERRY_OK); /* broadcasts */
    CHK(ferry_add(T23, T23_F16, NULL, &o), FERRY_ERR_DTYPE);
    CHK(ferry_add(T23_U8, T23_U8, NULL, &o), FERRY_ERR_DTYPE);
    CHK(ferry_binary((ferry_binary_op)99, T23, T23, NULL, &o), FERRY_ERR_INVALID_ARG);
    CHK(ferry_binary((ferry_binary_op)-1, T23, T23, NULL, &o), FERRY_ERR_INVALID_ARG);
}

TEST(ops_scalar_unary_affine_errors)
{
    ferry_tensor *o;
    CHK(ferry_scalar(FERRY_OP_ADD_SCALAR, NULL, 1, NULL, &o), FERRY_ERR_INVALID_ARG);
    CHK(ferry_mul_scalar(T23_U8, 2, NULL, &o), FERRY_ERR_DTYPE);
    CHK(ferry_scalar((ferry_scalar_op)99, T23, 1, NULL, &o), FERRY_ERR_INVALID_ARG);
    CHK(ferry_unary(FERRY_OP_NEG, NULL, NULL, &o), FERRY_ERR_INVALID_ARG);
    CHK(ferry_exp(T23_U8, NULL, &o), FERRY_ERR_DTYPE);
    CHK(ferry_unary((ferry_unary_op)99, T23, NULL, &o), FERRY_ERR_INVALID_ARG);
    CHK(ferry_unary((ferry_unary_op)-1, T23, NULL, &o), FERRY_ERR_INVALID_ARG);
    CHK(ferry_affine(NULL, 1, 0, FERRY_DTYPE_F32, NULL, &o), FERRY_ERR_INVALID_ARG);
    CHK(ferry_affine(T23_U8, 1, 0, FERRY_DTYPE_COUNT, NULL, &o), FERRY_ERR_DTYPE);
    CHK(ferry_affine(T23_U8, 1, 0, FERRY_DTYPE_I64, NULL, &o), FERRY_OK); /* any to any */
}

TEST(ops_reduction_errors)
{
    ferry_tensor *o;
    ferry_status (*red[])(ferry_tensor *, int64_t, bool, ferry_stream *, ferry_tensor **) = {
        ferry_sum, ferry_mean, ferry_max, ferry_argmax};
    for (size_t i = 0; i < sizeof red / sizeof red[0]; i++) {
        CHK(red[i](NULL, 0, false, NULL, &o), FERRY_ERR_INVALID_ARG);
        CHK(red[i](T23, 2, false, NULL, &o), FERRY_ERR_SHAPE);
        CHK(red[i](T23, -3, true, NULL, &o), FERRY_ERR_SHAPE);
        CHK(red[i](T0D, 0, false, NULL, &o), FERRY_ERR_SHAPE);
        CHK(red[i](T23_U8, 0, false, NULL, &o), FERRY_ERR_DTYPE);
    }
    CHK(ferry_max(T20, 1, false, NULL, &o), FERRY_ERR_SHAPE);
    CHK(ferry_argmax(T20, 1, false, NULL, &o), FERRY_ERR_SHAPE);
    ferry_status (*sm[])(ferry_tensor *, int64_t, ferry_stream *, ferry_tensor **) = {
        ferry_softmax, ferry_log_softmax};
    for (size_t i = 0; i < 2; i++) {
        CHK(sm[i](NULL, 0, NULL, &o), FERRY_ERR_INVALID_ARG);
        CHK(sm[i](T23, 2, NULL, &o), FERRY_ERR_SHAPE);
        CHK(sm[i](T23, INT64_MIN, NULL, &o), FERRY_ERR_SHAPE);
        CHK(sm[i](T23_U8, 1, NULL, &o), FERRY_ERR_DTYPE);
    }
}

TEST(ops_matmul_errors)
{
    ferry_tensor *o;
    ferry_status (*mm[])(ferry_tensor *, ferry_tensor *, ferry_stream *, ferry_tensor **) = {
        ferry_matmul, ferry_bmm};
    for (size_t i = 0; i < 2; i++) {
        CHK(mm[i](NULL, T34, NULL, &o), FERRY_ERR_INVALID_ARG);
        CHK(mm[i](T23, NULL, NULL, &o), FERRY_ERR_INVALID_ARG);
        CHK(mm[i](T23, T23, NULL, &o), FERRY_ERR_SHAPE);
        CHK(mm[i](T23, T45, NULL, &o), FERRY_ERR_SHAPE);
        CHK(mm[i](T3, T34, NULL, &o), FERRY_ERR_SHAPE);   /* 1-d */
        CHK(mm[i](T0D, T0D, NULL, &o), FERRY_ERR_SHAPE);  /* 0-d */
        CHK(mm[i](T234, T234, NULL, &o), FERRY_ERR_SHAPE);
        CHK(mm[i](T23, T3, NULL, &o), FERRY_ERR_SHAPE);
        CHK(mm[i](T23_F16, T34, NULL, &o), FERRY_ERR_DTYPE);
        CHK(mm[i](T23_U8, T23_U8, NULL, &o), FERRY_ERR_DTYPE);
        CHK(mm[i](T234, T45, NULL, &o), FERRY_OK); /* [b,m,k] @ [k,n] */
    }
}

/* Every op with out NULL: INVALID_ARG, before any work. */
TEST(ops_out_null)
{
    ferry_tensor *tt = t32_view();
    CHK(ferry_tensor_arange(0, 4, 1, FERRY_DTYPE_F32, ferry_cpu(), NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_tensor_ones(SHAPE23, 2, FERRY_DTYPE_F32, ferry_cpu(), NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_tensor_full(SHAPE23, 2, 1.0, FERRY_DTYPE_F32, ferry_cpu(), NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_tensor_rand(SHAPE23, 2, FERRY_DTYPE_F32, ferry_cpu(), 1, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_tensor_randn(SHAPE23, 2, FERRY_DTYPE_F32, ferry_cpu(), 1, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_tensor_clone(T23, NULL, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_tensor_contiguous(T23, NULL, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_tensor_contiguous(tt, NULL, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_tensor_item(T1, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_tensor_reshape(T23, SHAPE23, 2, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_tensor_slice(T23, 0, 0, 1, 1, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_tensor_transpose(T23, 0, 1, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_tensor_flatten(T23, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_binary(FERRY_OP_MUL, T23, T23, NULL, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_sub(T23, T23, NULL, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_scalar(FERRY_OP_POW_SCALAR, T23, 2, NULL, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_add_scalar(T23, 1, NULL, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_unary(FERRY_OP_TANH, T23, NULL, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_relu(T23, NULL, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_affine(T23_U8, 1, 0, FERRY_DTYPE_F32, NULL, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_sum(T23, 0, false, NULL, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_mean(T23, 0, false, NULL, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_max(T23, 0, false, NULL, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_argmax(T23, 0, false, NULL, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_softmax(T23, 1, NULL, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_log_softmax(T23, 1, NULL, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_matmul(T23, T34, NULL, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_bmm(T23, T34, NULL, NULL), FERRY_ERR_INVALID_ARG);
}

/* ================= nn.h ================= */
/* Sequential(Linear(3, 4)), f32 on the CPU, held by a global; nothing runs a
 * forward on it outside a child. */
static ferry_module *net(void)
{
    static ferry_module *n;
    if (!n) {
        ferry_module *l;
        ASSERT_OK(ferry_sequential_create(&n));
        ASSERT_OK(ferry_linear_create(3, 4, true, &l));
        ASSERT_OK(ferry_sequential_add(n, l));
    }
    return n;
}

static ferry_optim *net_sgd(void)
{
    static ferry_optim *o;
    if (!o)
        ASSERT_OK(ferry_sgd_create(net(), 0.1, 0.0, 0.0, &o));
    return o;
}

static ferry_metrics *cpu_metrics(void)
{
    static ferry_metrics *m;
    if (!m)
        ASSERT_OK(ferry_metrics_create(ferry_cpu(), &m));
    return m;
}

/* Labels {0, 5}: 5 is out of range for 4 classes. */
static ferry_tensor *bad_labels(void)
{
    static ferry_tensor *t;
    static const int64_t v[2] = {0, 5}, n = 2;
    if (!t)
        ASSERT_OK(ferry_tensor_from_host(v, &n, 1, FERRY_DTYPE_I64, ferry_cpu(), &t));
    return t;
}

static ferry_status linear_with(int64_t in, int64_t out)
{
    ferry_module *m = NULL;
    ferry_status st = ferry_linear_create(in, out, true, &m);
    ferry_module_destroy(m);
    return st;
}

static ferry_status conv_with(int64_t ci, int64_t co, int64_t k, int64_t s, int64_t p)
{
    ferry_module *m = NULL;
    ferry_status st = ferry_conv2d_create(ci, co, k, s, p, true, &m);
    ferry_module_destroy(m);
    return st;
}

static ferry_status pool_with(bool max, int64_t k, int64_t s, int64_t p)
{
    ferry_module *m = NULL;
    ferry_status st = max ? ferry_maxpool2d_create(k, s, p, &m) : ferry_avgpool2d_create(k, s, p, &m);
    ferry_module_destroy(m);
    return st;
}

static ferry_status bn_with(int64_t c, double eps, double mom)
{
    ferry_module *m = NULL;
    ferry_status st = ferry_batchnorm2d_create(c, eps, mom, &m);
    ferry_module_destroy(m);
    return st;
}

static ferry_status dropout_with(double p)
{
    ferry_module *m = NULL;
    ferry_status st = ferry_dropout_create(p, 1, &m);
    ferry_module_destroy(m);
    return st;
}

TEST(nn_module_create_errors)
{
    CHK(ferry_linear_create(3, 4, true, NULL), FERRY_ERR_INVALID_ARG);
    CHK(linear_with(0, 4), FERRY_ERR_INVALID_ARG);
    CHK(linear_with(3, 0), FERRY_ERR_INVALID_ARG);
    CHK(linear_with(-1, 4), FERRY_ERR_INVALID_ARG);
    CHK(linear_with(INT64_MAX, INT64_MAX), FERRY_ERR_LIMIT);
    CHK(ferry_conv2d_create(1, 1, 3, 1, 0, true, NULL), FERRY_ERR_INVALID_ARG);
    CHK(conv_with(0, 1, 3, 1, 0), FERRY_ERR_INVALID_ARG);
    CHK(conv_with(1, 0, 3, 1, 0), FERRY_ERR_INVALID_ARG);
    CHK(conv_with(1, 1, 0, 1, 0), FERRY_ERR_INVALID_ARG);
    CHK(conv_with(1, 1, 3, 0, 0), FERRY_ERR_INVALID_ARG);
    CHK(conv_with(1, 1, 3, 1, -1), FERRY_ERR_INVALID_ARG);
    for (int max = 0; max < 2; max++) {
        CHK(pool_with(max, 0, 0, 0), FERRY_ERR_INVALID_ARG);
        CHK(pool_with(max, 2, -1, 0), FERRY_ERR_INVALID_ARG);
        CHK(pool_with(max, 2, 2, -1), FERRY_ERR_INVALID_ARG);
        CHK(pool_with(max, 2, 2, 2), FERRY_ERR_INVALID_ARG); /* padding > kernel / 2 */
    }
    CHK(ferry_maxpool2d_create(2, 0, 0, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_avgpool2d_create(2, 0, 0, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_batchnorm2d_create(4, 1e-5, 0.1, NULL), FERRY_ERR_INVALID_ARG);
    CHK(bn_with(0, 1e-5, 0.1), FERRY_ERR_INVALID_ARG);
    CHK(bn_with(-4, 1e-5, 0.1), FERRY_ERR_INVALID_ARG);
    CHK(bn_with(4, 0, 0.1), FERRY_ERR_INVALID_ARG);
    CHK(bn_with(4, NAN, 0.1), FERRY_ERR_INVALID_ARG);
    CHK(bn_with(4, 1e-5, 1.5), FERRY_ERR_INVALID_ARG);
    CHK(ferry_dropout_create(0.5, 1, NULL), FERRY_ERR_INVALID_ARG);
    CHK(dropout_with(-0.1), FERRY_ERR_INVALID_ARG);
    CHK(dropout_with(1.5), FERRY_ERR_INVALID_ARG);
    CHK(dropout_with(NAN), FERRY_ERR_INVALID_ARG);
    CHK(ferry_relu_create(NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_flatten_create(NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_sequential_create(NULL), FERRY_ERR_INVALID_ARG);
}

/* seq owns child from the call on, even when it fails. */
static ferry_status add_linear_to(ferry_module *seq, ferry_dtype dt)
{
    ferry_module *l = NULL;
    ferry_status st = ferry_linear_create(3, 3, false, &l);
    if (st == FERRY_OK && dt != FERRY_DTYPE_F32)
        st = ferry_module_to_dtype(l, dt);
    return st != FERRY_OK ? st : ferry_sequential_add(seq, l);
}

static ferry_status add_to_self(void)
{
    ferry_module *s = NULL;
    ferry_status st = ferry_sequential_create(&s);
    if (st == FERRY_OK)
        st = ferry_sequential_add(s, s);
    ferry_module_destroy(s);
    return st;
}

static ferry_status add_to_linear(void)
{
    ferry_module *l = NULL;
    ferry_status st = ferry_linear_create(3, 3, false, &l);
    if (st == FERRY_OK)
        st = add_linear_to(l, FERRY_DTYPE_F32);
    ferry_module_destroy(l);
    return st;
}

TEST(nn_sequential_add_errors)
{
    CHK(add_linear_to(NULL, FERRY_DTYPE_F32), FERRY_ERR_INVALID_ARG);
    CHK(ferry_sequential_add(net(), NULL), FERRY_ERR_INVALID_ARG);
    CHK(add_to_self(), FERRY_ERR_INVALID_ARG);
    CHK(add_to_linear(), FERRY_ERR_INVALID_ARG);
    CHK(add_linear_to(net(), FERRY_DTYPE_F16), FERRY_ERR_DTYPE);
}

static ferry_status forward_then_backward(ferry_module *m, const int64_t *dy_shape, size_t nd)
{
    ferry_tensor *y = NULL, *dy = NULL, *dx = NULL;
    ferry_status st = ferry_module_forward(m, T23, NULL, &y);
    if (st == FERRY_OK)
        st = ferry_tensor_zeros(dy_shape, nd, FERRY_DTYPE_F32, ferry_cpu(), &dy);
    if (st == FERRY_OK)
        st = ferry_module_backward(m, dy, NULL, &dx);
    ferry_tensor_release(y);
    ferry_tensor_release(dy);
    ferry_tensor_release(dx);
    return st;
}

TEST(nn_forward_backward_errors)
{
    ferry_tensor *y, *dx;
    const int64_t s24[] = {2, 4}, s25[] = {2, 5};
    CHK(ferry_module_forward(NULL, T23, NULL, &y), FERRY_ERR_INVALID_ARG);
    CHK(ferry_module_forward(net(), NULL, NULL, &y), FERRY_ERR_INVALID_ARG);
    CHK(ferry_module_forward(net(), T23, NULL, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_module_forward(net(), T34, NULL, &y), FERRY_ERR_SHAPE);
    CHK(ferry_module_forward(net(), T0D, NULL, &y), FERRY_ERR_SHAPE);
    CHK(ferry_module_backward(NULL, T34, NULL, &dx), FERRY_ERR_INVALID_ARG);
    CHK(ferry_module_backward(net(), NULL, NULL, &dx), FERRY_ERR_INVALID_ARG);
    CHK(ferry_module_backward(net(), T34, NULL, &dx), FERRY_ERR_BAD_STATE); /* no forward yet */
    CHK(forward_then_backward(net(), s25, 2), FERRY_ERR_SHAPE);
    CHK(forward_then_backward(net(), s24, 2), FERRY_OK);
}

TEST(nn_module_state_errors)
{
    ferry_param p;
    CHK(ferry_module_init(NULL, 1), FERRY_ERR_INVALID_ARG);
    CHK(ferry_module_zero_grad(NULL, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_module_to(NULL, ferry_cpu()), FERRY_ERR_INVALID_ARG);
    CHK(ferry_module_to(net(), BAD_DEVICE), FERRY_ERR_INVALID_ARG);
    CHK(ferry_module_to(net(), NEG_CUDA), FERRY_ERR_INVALID_ARG);
    if (no_gpu())
        CHK(ferry_module_to(net(), ferry_cuda(0)), FERRY_ERR_NO_DEVICE);
    CHK(ferry_module_to_dtype(NULL, FERRY_DTYPE_F16), FERRY_ERR_INVALID_ARG);
    CHK(ferry_module_to_dtype(net(), FERRY_DTYPE_I64), FERRY_ERR_DTYPE);
    CHK(ferry_module_to_dtype(net(), FERRY_DTYPE_COUNT), FERRY_ERR_DTYPE);
    CHK(ferry_module_param(NULL, 0, &p), FERRY_ERR_INVALID_ARG);
    CHK(ferry_module_param(net(), 0, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_module_param(net(), 2, &p), FERRY_ERR_INVALID_ARG);
    CHK(ferry_module_param(net(), SIZE_MAX, &p), FERRY_ERR_INVALID_ARG);
    CHK(ferry_module_set_grad_hook(NULL, NULL, NULL), FERRY_ERR_INVALID_ARG);
    CHK_TRUE(ferry_module_param_count(NULL) == 0);
    CHK_TRUE(ferry_module_trainable_numel(NULL) == 0);
    CHK_TRUE(ferry_module_name(NULL) != NULL);
    CHK_TRUE(!ferry_module_is_training(NULL));
    CHK_TRUE(ferry_device_eq(ferry_module_device(NULL), ferry_cpu()));
    NOCRASH(ferry_module_train(NULL, true));
    NOCRASH(ferry_module_print(NULL, stderr));
    NOCRASH(ferry_module_print(net(), NULL));
    NOCRASH(ferry_module_destroy(NULL));
}

TEST(nn_metrics_errors)
{
    ferry_metrics *m;
    double l, a;
    int64_t n;
    CHK(ferry_metrics_create(ferry_cpu(), NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_metrics_create(BAD_DEVICE, &m), FERRY_ERR_INVALID_ARG);
    if (no_gpu())
        CHK(ferry_metrics_create(ferry_cuda(0), &m), FERRY_ERR_NO_DEVICE);
    CHK(ferry_metrics_reset(NULL, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_metrics_get(NULL, &l, &a, &n), FERRY_ERR_INVALID_ARG);
    CHK(ferry_metrics_get(cpu_metrics(), NULL, NULL, NULL), FERRY_OK);
    NOCRASH(ferry_metrics_destroy(NULL));
}

static ferry_status ce_with(ferry_tensor *logits, ferry_tensor *labels)
{
    ferry_tensor *d = NULL;
    ferry_status st = ferry_cross_entropy(logits, labels, 1.0f, cpu_metrics(), NULL, &d);
    ferry_tensor_release(d);
    return st;
}

TEST(nn_loss_errors)
{
    ferry_tensor *d;
    CHK(ferry_cross_entropy(NULL, L2_I64, 1.0f, NULL, NULL, &d), FERRY_ERR_INVALID_ARG);
    CHK(ferry_cross_entropy(T23, NULL, 1.0f, NULL, NULL, &d), FERRY_ERR_INVALID_ARG);
    CHK(ferry_cross_entropy(T23, L2_I64, 1.0f, NULL, NULL, NULL), FERRY_OK); /* no gradient wanted */
    CHK(ce_with(T23, L3_I64), FERRY_ERR_SHAPE);
    CHK(ce_with(T234, L2_I64), FERRY_ERR_SHAPE);
    CHK(ce_with(T3, L3_I64), FERRY_ERR_SHAPE);
    CHK(ce_with(T20, L2_I64), FERRY_ERR_SHAPE); /* no classes */
    CHK(ce_with(T23, L2_F32), FERRY_ERR_DTYPE);
    CHK(ce_with(T23_U8, L2_I64), FERRY_ERR_DTYPE);
    CHK(ce_with(T23, bad_labels()), FERRY_ERR_INVALID_ARG);
    CHK(ferry_mse_loss(NULL, T23, 1.0f, NULL, NULL, &d), FERRY_ERR_INVALID_ARG);
    CHK(ferry_mse_loss(T23, NULL, 1.0f, NULL, NULL, &d), FERRY_ERR_INVALID_ARG);
    CHK(ferry_mse_loss(T23, T34, 1.0f, NULL, NULL, &d), FERRY_ERR_SHAPE);
    CHK(ferry_mse_loss(T23, T3, 1.0f, NULL, NULL, &d), FERRY_ERR_SHAPE); /* no broadcasting */
    CHK(ferry_mse_loss(T23, T23_F16, 1.0f, NULL, NULL, &d), FERRY_ERR_DTYPE);
    CHK(ferry_mse_loss(T23_U8, T23_U8, 1.0f, NULL, NULL, &d), FERRY_ERR_DTYPE);
}

TEST(nn_optim_errors)
{
    ferry_optim *o;
    CHK(ferry_sgd_create(NULL, 0.1, 0, 0, &o), FERRY_ERR_INVALID_ARG);
    CHK(ferry_sgd_create(net(), 0.1, 0, 0, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_sgd_create(net(), -0.1, 0, 0, &o), FERRY_ERR_INVALID_ARG);
    CHK(ferry_sgd_create(net(), NAN, 0, 0, &o), FERRY_ERR_INVALID_ARG);
    CHK(ferry_sgd_create(net(), 0.1, -0.9, 0, &o), FERRY_ERR_INVALID_ARG);
    CHK(ferry_sgd_create(net(), 0.1, 0, -1, &o), FERRY_ERR_INVALID_ARG);
    CHK(ferry_sgd_create_ex(net(), 0.1, 0, 0, 0, true, &o), FERRY_ERR_INVALID_ARG); /* Nesterov, no momentum */
    CHK(ferry_adam_create(NULL, 1e-3, 0.9, 0.999, 1e-8, 0, &o), FERRY_ERR_INVALID_ARG);
    CHK(ferry_adam_create(net(), 1e-3, 0.9, 0.999, 1e-8, 0, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_adam_create(net(), -1e-3, 0.9, 0.999, 1e-8, 0, &o), FERRY_ERR_INVALID_ARG);
    CHK(ferry_adam_create(net(), 1e-3, 1.0, 0.999, 1e-8, 0, &o), FERRY_ERR_INVALID_ARG);
    CHK(ferry_adam_create(net(), 1e-3, 0.9, -0.1, 1e-8, 0, &o), FERRY_ERR_INVALID_ARG);
    CHK(ferry_adamw_create(net(), 1e-3, NAN, 0.999, 1e-8, 0.01, &o), FERRY_ERR_INVALID_ARG);
    CHK(ferry_adamw_create(net(), 1e-3, 0.9, 0.999, -1, 0.01, &o), FERRY_ERR_INVALID_ARG);
    CHK(ferry_adamw_create(NULL, 1e-3, 0.9, 0.999, 1e-8, 0.01, &o), FERRY_ERR_INVALID_ARG);
    CHK(ferry_optim_step(NULL, NULL), FERRY_ERR_INVALID_ARG);
    NOCRASH(ferry_optim_destroy(NULL));
    NOCRASH(ferry_optim_set_lr(NULL, 0.1));
    CHK_TRUE(ferry_optim_lr(NULL) == 0.0);
    CHK_TRUE(ferry_optim_step_count(NULL) == 0);
}

static ferry_status amp_with(ferry_module *m, ferry_dtype dt)
{
    ferry_amp_config c = ferry_amp_config_default(dt);
    c.dtype = dt;
    ferry_amp *a = NULL;
    ferry_status st = ferry_amp_create(m, &c, &a);
    ferry_amp_destroy(a);
    return st;
}

TEST(nn_amp_errors)
{
    ferry_amp_config c = ferry_amp_config_default(FERRY_DTYPE_F16);
    ferry_amp *a;
    bool skipped;
    CHK(ferry_amp_create(NULL, &c, &a), FERRY_ERR_INVALID_ARG);
    CHK(ferry_amp_create(net(), NULL, &a), FERRY_ERR_INVALID_ARG);
    CHK(ferry_amp_create(net(), &c, NULL), FERRY_ERR_INVALID_ARG);
    CHK(amp_with(net(), FERRY_DTYPE_F32), FERRY_ERR_DTYPE);
    CHK(amp_with(net(), FERRY_DTYPE_U8), FERRY_ERR_DTYPE);
    CHK(amp_with(net(), FERRY_DTYPE_COUNT), FERRY_ERR_DTYPE);
    c.init_scale = 0;
    CHK(ferry_amp_create(net(), &c, &a), FERRY_ERR_INVALID_ARG);
    CHK(ferry_amp_step(NULL, net_sgd(), NULL, &skipped), FERRY_ERR_INVALID_ARG);
    NOCRASH(ferry_amp_destroy(NULL));
    CHK_TRUE(ferry_amp_scale(NULL) == 1.0f);
}

TEST(nn_train_eval_step_errors)
{
    CHK(ferry_train_step(NULL, net_sgd(), NULL, T23, L2_I64, NULL, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_train_step(net(), NULL, NULL, T23, L2_I64, NULL, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_train_step(net(), net_sgd(), NULL, NULL, L2_I64, NULL, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_train_step(net(), net_sgd(), NULL, T23, NULL, NULL, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_train_step(net(), net_sgd(), NULL, T34, L3_I64, NULL, NULL), FERRY_ERR_SHAPE);
    CHK(ferry_train_step(net(), net_sgd(), NULL, T23, L3_I64, NULL, NULL), FERRY_ERR_SHAPE);
    CHK(ferry_train_step(net(), net_sgd(), NULL, T23, L2_F32, NULL, NULL), FERRY_ERR_DTYPE);
    CHK(ferry_eval_step(NULL, T23, L2_I64, NULL, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_eval_step(net(), NULL, L2_I64, NULL, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_eval_step(net(), T23, NULL, NULL, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_eval_step(net(), T34, L3_I64, NULL, NULL), FERRY_ERR_SHAPE);
}

/* A checkpoint of net() and its optimiser, written once per run in the test
 * folder (the harness removes it at exit). Each test that reads it calls this
 * first, in the parent: a forked child leaves with _exit, so what a child
 * makes first would be made once per child and never removed. */
static char ckpt_name[PATH_MAX];
static const char *ckpt_path(void)
{
    if (!ckpt_name[0]) {
        snprintf(ckpt_name, sizeof ckpt_name, "%s", ft_tmp("api_errors.safetensors"));
        ferry_checkpoint c = {.module = net(), .optim = net_sgd()};
        ASSERT_OK(ferry_checkpoint_save(ckpt_name, &c));
    }
    return ckpt_name;
}

static ferry_status load_into(int64_t in, int64_t out, bool wrap)
{
    ferry_module *s = NULL, *l = NULL;
    ferry_status st = ferry_linear_create(in, out, true, &l);
    if (st == FERRY_OK && wrap && (st = ferry_sequential_create(&s)) == FERRY_OK) {
        st = ferry_sequential_add(s, l);
        l = s;
    }
    if (st == FERRY_OK)
        st = ferry_checkpoint_load(ckpt_path(), &(ferry_checkpoint){.module = l});
    ferry_module_destroy(l);
    return st;
}

TEST(nn_checkpoint_errors)
{
    ckpt_path();
    CHK(load_into(3, 4, true), FERRY_OK);
    CHK(load_into(4, 4, true), FERRY_ERR_SHAPE);
    CHK(load_into(3, 4, false), FERRY_ERR_FORMAT); /* wants "weight", the file has "0.weight" */
}

TEST(nn_checkpoint_write_read_errors)
{
    const char *p = ft_tmp("write_read.safetensors"); /* not ckpt_path(): others read that */
    ferry_checkpoint none = {0};
    ferry_checkpoint c = {net(), NULL, NULL, NULL, NULL};
    CHK(ferry_checkpoint_save(NULL, &c), FERRY_ERR_INVALID_ARG);
    CHK(ferry_checkpoint_save(p, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_checkpoint_save(p, &none), FERRY_ERR_INVALID_ARG);
    CHK(ferry_checkpoint_save("/nonexistent-dir/x.safetensors", &c), FERRY_ERR_IO);
    CHK(ferry_checkpoint_load(NULL, &c), FERRY_ERR_INVALID_ARG);
    CHK(ferry_checkpoint_load(p, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_checkpoint_load(p, &none), FERRY_ERR_INVALID_ARG);
    CHK(ferry_checkpoint_load("/nonexistent-dir/x.safetensors", &c), FERRY_ERR_IO);
    /* An optimiser of another module. */
    ferry_module *other = NULL;
    ferry_optim *o = NULL;
    ASSERT_OK(ferry_linear_create(3, 4, true, &other));
    ASSERT_OK(ferry_sgd_create(other, 0.1, 0.0, 0.0, &o));
    ferry_checkpoint wrong = {net(), o, NULL, NULL, NULL};
    CHK(ferry_checkpoint_save(p, &wrong), FERRY_ERR_INVALID_ARG);
    ferry_optim_destroy(o);
    ferry_module_destroy(other);
    /* A loader given, but the file was written without one. */
    ferry_dataset *ds = mem_ds();
    ferry_loader_config lc = loader_cfg(ds);
    ferry_loader *l = NULL;
    ASSERT_OK(ferry_loader_create(&lc, &l));
    ASSERT_OK(ferry_checkpoint_save(p, &c));
    ferry_checkpoint with_loader = {net(), NULL, NULL, l, NULL};
    CHK(ferry_checkpoint_load(p, &with_loader), FERRY_ERR_FORMAT);
    CHK(ferry_loader_state_check(NULL, NULL), FERRY_ERR_INVALID_ARG);
    ferry_loader_destroy(l);
    ferry_dataset_release(ds);
}

static ferry_safetensors *ckpt_file(void)
{
    static ferry_safetensors *f;
    if (!f)
        ASSERT_OK(ferry_safetensors_open(ckpt_path(), &f));
    return f;
}

static ferry_status parse_bytes(const void *data, size_t n)
{
    ferry_safetensors *f = NULL;
    ferry_status st = ferry_safetensors_parse(data, n, &f);
    ferry_safetensors_destroy(f);
    return st;
}

TEST(nn_safetensors_errors)
{
    ferry_safetensors *f;
    ferry_tensor *t;
    ferry_dtype dt;
    int64_t shape[FERRY_MAX_DIMS];
    size_t nd;
    static const char garbage[] = "\x10\0\0\0\0\0\0\0not json at all!";
    static const char huge_len[] = "\xff\xff\xff\xff\xff\xff\xff\x7f{}";
    const char *names[1] = {"x"};
    ferry_tensor *ts[1] = {NULL};
    ckpt_path();
    CHK(ferry_safetensors_open(NULL, &f), FERRY_ERR_INVALID_ARG);
    CHK(ferry_safetensors_open(ckpt_path(), NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_safetensors_open("/nonexistent-dir/x.safetensors", &f), FERRY_ERR_IO);
    CHK(ferry_safetensors_parse(NULL, 8, &f), FERRY_ERR_INVALID_ARG);
    CHK(ferry_safetensors_parse(garbage, sizeof garbage - 1, NULL), FERRY_ERR_INVALID_ARG);
    CHK(parse_bytes(NULL, 0), FERRY_ERR_FORMAT);
    CHK(parse_bytes(garbage, 5), FERRY_ERR_FORMAT);
    CHK(parse_bytes(garbage, sizeof garbage - 1), FERRY_ERR_FORMAT);
    CHK(parse_bytes(huge_len, sizeof huge_len - 1), FERRY_ERR_FORMAT);
    CHK(ferry_safetensors_get(NULL, "0.weight", ferry_cpu(), &t), FERRY_ERR_INVALID_ARG);
    CHK(ferry_safetensors_get(ckpt_file(), NULL, ferry_cpu(), &t), FERRY_ERR_INVALID_ARG);
    CHK(ferry_safetensors_get(ckpt_file(), "0.weight", ferry_cpu(), NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_safetensors_get(ckpt_file(), "nope", ferry_cpu(), &t), FERRY_ERR_INVALID_ARG);
    CHK(ferry_safetensors_get(ckpt_file(), "0.weight", BAD_DEVICE, &t), FERRY_ERR_INVALID_ARG);
    if (no_gpu())
        CHK(ferry_safetensors_get(ckpt_file(), "0.weight", ferry_cuda(0), &t), FERRY_ERR_NO_DEVICE);
    CHK(ferry_safetensors_info(NULL, "0.weight", &dt, shape, &nd), FERRY_ERR_INVALID_ARG);
    CHK(ferry_safetensors_info(ckpt_file(), NULL, &dt, shape, &nd), FERRY_ERR_INVALID_ARG);
    CHK(ferry_safetensors_info(ckpt_file(), "0.weight", NULL, shape, &nd), FERRY_ERR_INVALID_ARG);
    CHK(ferry_safetensors_info(ckpt_file(), "0.weight", &dt, NULL, &nd), FERRY_ERR_INVALID_ARG);
    CHK(ferry_safetensors_info(ckpt_file(), "0.weight", &dt, shape, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_safetensors_info(ckpt_file(), "nope", &dt, shape, &nd), FERRY_ERR_INVALID_ARG);
    CHK_TRUE(ferry_safetensors_tensor_count(NULL) == 0);
    CHK_TRUE(ferry_safetensors_name(NULL, 0) == NULL);
    CHK_TRUE(ferry_safetensors_name(ckpt_file(), SIZE_MAX) == NULL);
    CHK_TRUE(ferry_safetensors_metadata(NULL, "k") == NULL);
    CHK_TRUE(ferry_safetensors_metadata(ckpt_file(), NULL) == NULL);
    CHK_TRUE(ferry_safetensors_metadata(ckpt_file(), "nope") == NULL);
    NOCRASH(ferry_safetensors_destroy(NULL));
    CHK(ferry_safetensors_save(NULL, names, ts, 0, NULL, 0), FERRY_ERR_INVALID_ARG);
    CHK(ferry_safetensors_save("/tmp/x", NULL, ts, 1, NULL, 0), FERRY_ERR_INVALID_ARG);
    CHK(ferry_safetensors_save("/tmp/x", names, NULL, 1, NULL, 0), FERRY_ERR_INVALID_ARG);
    CHK(ferry_safetensors_save("/tmp/x", names, ts, 1, NULL, 0), FERRY_ERR_INVALID_ARG); /* NULL tensor */
    CHK(ferry_safetensors_save("/tmp/x", names, ts, 0, NULL, 1), FERRY_ERR_INVALID_ARG);
    ts[0] = T23;
    CHK(ferry_safetensors_save("/nonexistent-dir/x.safetensors", names, ts, 1, NULL, 0), FERRY_ERR_IO);
}

/* ================= dist.h (only what does not start MPI) ================= */
TEST(dist_without_a_dist)
{
    ferry_dist_config c = ferry_dist_config_default();
    /* Without MPI built, every call that needs a dist is UNSUPPORTED. */
    ferry_status arg = ferry_dist_mpi_is_built() ? FERRY_ERR_INVALID_ARG : FERRY_ERR_UNSUPPORTED;
    ferry_ddp *p = (ferry_ddp *)&c; /* not NULL: the call must clear it */
    CHK(ferry_dist_create(&c, NULL), arg);
    CHK(ferry_dist_create(NULL, NULL), arg);
    CHK(ferry_dist_all_reduce(NULL, T23, FERRY_REDUCE_SUM, NULL), arg);
    CHK(ferry_dist_broadcast(NULL, T23, 0, NULL), arg);
    CHK(ferry_dist_barrier(NULL), arg);
    CHK_TRUE(ferry_dist_abort(NULL, FERRY_ERR_IO) == FERRY_ERR_IO);
    CHK_TRUE(ferry_dist_abort(NULL, FERRY_OK) == FERRY_OK);
    NOCRASH(ferry_dist_destroy(NULL));
    CHK_TRUE(ferry_dist_rank(NULL) == 0);
    CHK_TRUE(ferry_dist_world_size(NULL) == 1);
    CHK_TRUE(ferry_dist_local_rank(NULL) == 0);
    CHK_TRUE(ferry_device_eq(ferry_dist_device(NULL), ferry_cpu()));
    CHK_TRUE(strcmp(ferry_dist_backend(NULL), "none") == 0);
    CHK_TRUE(!ferry_dist_nccl_is_built() || ferry_dist_mpi_is_built());
    CHK(ferry_ddp_create(NULL, net(), 0, &p), arg);
    CHK_TRUE(ferry_ddp_create(NULL, net(), 0, &p) != FERRY_OK && p == NULL);
    CHK(ferry_ddp_create(NULL, net(), 0, NULL), arg);
    NOCRASH(ferry_ddp_destroy(NULL));
    CHK_TRUE(ferry_ddp_bucket_count(NULL) == 0);
    CHK(ferry_ddp_sync_buffers(NULL, NULL), arg);
}

/* ================= messages (docs/API_ERRORS.md, "Messages") ================= */
static size_t occurrences(const char *s, const char *sub)
{
    size_t n = 0;
    for (const char *p = strstr(s, sub); p; p = strstr(p + 1, sub))
        n++;
    return n;
}

static ferry_status long_reason_get(void *user, size_t index, void *dst, size_t dst_bytes,
                                    const ferry_sample_ctx *ctx, int64_t *label)
{
    (void)user, (void)index, (void)dst, (void)dst_bytes, (void)ctx, (void)label;
    char reason[3000];
    memset(reason, 'r', sizeof reason - 1);
    reason[sizeof reason - 1] = '\0';
    return ferry_set_error(FERRY_ERR_FORMAT, "%s", reason);
}

static const char *long_reason_name(void *user, size_t index)
{
    (void)user, (void)index;
    return "long.png";
}

TEST(message_cut_shows_dots)
{
    char big[3000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    ASSERT_STATUS(ferry_set_error(FERRY_ERR_IO, "%s", big), FERRY_ERR_IO);
    const char *e = ferry_last_error();
    size_t n = strlen(e);
    ASSERT_MSG(n >= 512 && n < sizeof big - 1, "a cut message of %zu bytes", n);
    ASSERT_STR_EQ(e + n - 3, "...");
    /* The cut never leaves half a UTF-8 character before the dots. */
    char wide[3001];
    for (size_t i = 0; i + 1 < sizeof wide; i += 2) {
        wide[i] = (char)0xC3; /* é */
        wide[i + 1] = (char)0xA9;
    }
    wide[sizeof wide - 1] = '\0';
    ferry_set_error(FERRY_ERR_IO, "%s", wide);
    n = strlen(ferry_last_error());
    ASSERT_STR_EQ(ferry_last_error() + n - 3, "...");
    ASSERT_EQ_SIZE((n - 3) % 2, 0);
    /* A message that fits is not touched. */
    ferry_set_error(FERRY_ERR_IO, "%s", "short");
    ASSERT_STR_EQ(ferry_last_error(), "short");
    /* Through a dataset and the loader's buffers: cut once, at the end, the
     * sample's name still in front. */
    ferry_dataset_callbacks cb = {.len = 2, .format = {1, 2, 3, FERRY_LAYOUT_CHW, FERRY_DTYPE_U8},
                                  .num_classes = 2, .get = long_reason_get, .name = long_reason_name};
    ferry_dataset *ds;
    ASSERT_OK(ferry_dataset_custom(&cb, NULL, &ds));
    ferry_loader_config c = loader_cfg(ds);
    c.batch_size = 1;
    ferry_loader *l;
    ASSERT_OK(ferry_loader_create(&c, &l));
    ferry_batch b;
    ASSERT_STATUS(ferry_loader_next(l, NULL, &b), FERRY_ERR_FORMAT);
    e = ferry_last_error();
    n = strlen(e);
    ASSERT(strncmp(e, "sample 0 (long.png): rrr", 24) == 0);
    ASSERT_STR_EQ(e + n - 3, "...");
    ASSERT_EQ_SIZE(occurrences(e, "..."), 1);
    ferry_loader_destroy(l);
    ferry_dataset_release(ds);
}

TEST(sample_error_names_the_file_once)
{
    size_t n;
    uint8_t *png = tiny_png(&n);
    const char *good = ft_tmp("names_once/a/0good.png"), *bad = ft_tmp("names_once/a/1bad.png");
    ft_write_file(good, png, n);
    ft_write_file(bad, png, 40); /* the header, then cut */
    free(png);
    ferry_dataset *ds;
    ASSERT_OK(ferry_dataset_image_folder(ft_tmp("names_once"), NULL, &ds));
    ASSERT_EQ_SIZE(ferry_dataset_len(ds), 2);
    const char *name = ferry_dataset_sample_name(ds, 1);
    ASSERT(name != NULL && strstr(name, "1bad.png") != NULL);
    uint8_t dst[64];
    ASSERT_STATUS(ferry_dataset_get(ds, 1, dst, sizeof dst, NULL, NULL), FERRY_ERR_FORMAT);
    const char *e = ferry_last_error();
    ASSERT(strncmp(e, name, strlen(name)) == 0 && strncmp(e + strlen(name), ": ", 2) == 0);
    ASSERT_MSG(occurrences(e, "1bad.png") == 1, "%s", e);
    /* The loader writes the index and the name its own way, still once. */
    ferry_loader_config c = loader_cfg(ds);
    c.batch_size = 1;
    ferry_loader *l;
    ASSERT_OK(ferry_loader_create(&c, &l));
    ferry_batch b;
    ASSERT_OK(ferry_loader_next(l, NULL, &b));
    ASSERT_STATUS(ferry_loader_next(l, NULL, &b), FERRY_ERR_FORMAT);
    e = ferry_last_error();
    char head[1200];
    snprintf(head, sizeof head, "sample 1 (%s): ", name);
    ASSERT(strncmp(e, head, strlen(head)) == 0);
    ASSERT_MSG(occurrences(e, "1bad.png") == 1, "%s", e);
    ferry_loader_destroy(l);
    ferry_dataset_release(ds);
    /* A dataset without names: "sample N", once. */
    ferry_dataset_callbacks cb = {.len = 2, .format = {1, 2, 3, FERRY_LAYOUT_CHW, FERRY_DTYPE_U8},
                                  .num_classes = 2, .get = long_reason_get};
    ASSERT_OK(ferry_dataset_custom(&cb, NULL, &ds));
    ASSERT_STATUS(ferry_dataset_get(ds, 1, dst, sizeof dst, NULL, NULL), FERRY_ERR_FORMAT);
    ASSERT(strncmp(ferry_last_error(), "sample 1: rrr", 13) == 0);
    ASSERT_EQ_SIZE(occurrences(ferry_last_error(), "sample 1"), 1);
    ferry_dataset_release(ds);
}

TEST(argument_errors_name_the_function)
{
    ferry_dataset *ds = mem_ds();
    ferry_loader_config c = loader_cfg(ds);
    ferry_loader *l;
    ASSERT_STATUS(ferry_loader_create(NULL, &l), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_EQ(ferry_last_error(), "ferry_loader_create: config is NULL");
    ASSERT_STATUS(ferry_loader_create(&c, NULL), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_EQ(ferry_last_error(), "ferry_loader_create: out is NULL");
    /* A field of the configuration: the same function named in front. */
    c.prefetch = 2000;
    ASSERT_STATUS(ferry_loader_create(&c, &l), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_EQ(ferry_last_error(), "ferry_loader_create: prefetch 2000 is more than 1024");
    c = loader_cfg(NULL);
    ASSERT_STATUS(ferry_loader_create(&c, &l), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_EQ(ferry_last_error(), "ferry_loader_create: config.dataset is NULL");
    ASSERT_STATUS(ferry_loader_next(NULL, NULL, NULL), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_EQ(ferry_last_error(), "ferry_loader_next: loader is NULL");
    uint8_t dst[8];
    ASSERT_STATUS(ferry_dataset_get(NULL, 0, dst, sizeof dst, NULL, NULL), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_EQ(ferry_last_error(), "ferry_dataset_get: ds is NULL");
    ASSERT_STATUS(ferry_dataset_get(ds, 1000, dst, sizeof dst, NULL, NULL), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "ferry_dataset_get: sample 1000 is out of range");
    int64_t label;
    ASSERT_STATUS(ferry_dataset_label(ds, 1000, &label), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "ferry_dataset_label: sample 1000 is out of range");
    ferry_dataset_release(ds);
    /* The model layer: the same rule, and the first NULL argument named. */
    ferry_tensor *t;
    ASSERT_STATUS(ferry_tensor_from_blob(dst, NULL, 0, FERRY_DTYPE_U8, ferry_cpu(), NULL), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_EQ(ferry_last_error(), "ferry_tensor_from_blob: out is NULL");
    ASSERT_STATUS(ferry_tensor_empty(NULL, 0, FERRY_DTYPE_F32, ferry_cpu(), NULL), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_EQ(ferry_last_error(), "ferry_tensor_empty: out is NULL");
    ASSERT_STATUS(ferry_add(NULL, NULL, NULL, &t), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_EQ(ferry_last_error(), "ferry_add: a is NULL");
    ASSERT_STATUS(ferry_module_forward(NULL, NULL, NULL, &t), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_EQ(ferry_last_error(), "ferry_module_forward: module is NULL");
    ASSERT_STATUS(ferry_safetensors_open("x.safetensors", NULL), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_EQ(ferry_last_error(), "ferry_safetensors_open: out is NULL");
}

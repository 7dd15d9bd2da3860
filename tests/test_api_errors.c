/* The error answers of the public API (docs/API_ERRORS.md), one test per row:
 * NULL handles and outputs, zero and huge sizes, wrong devices, wrong dtypes.
 * Every call runs in a forked child, so a call that crashes fails its own row
 * (with the signal) instead of the whole program; the child also checks that a
 * failing call left a message in ferry_last_error(). */
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
    if (code >= CHILD_STATUS && code < CHILD_STATUS + FERRY_STATUS_COUNT_)
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
    c.num_workers = 0; /* no threads: the forked child has none */
    c.device = "cpu";
    c.pin_memory = false;
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
    for (int s = 0; s < FERRY_STATUS_COUNT_; s++)
        CHK_TRUE(strncmp(ferry_status_str((ferry_status)s), "FERRY_", 6) == 0);
    CHK_TRUE(ferry_status_str((ferry_status)-1) != NULL);
    CHK_TRUE(ferry_status_str(FERRY_STATUS_COUNT_) != NULL);
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
    ASSERT_OK(ferry_stream_create(ferry_cpu(), &s));
    ASSERT_OK(ferry_event_create(ferry_cpu(), false, &e));
    CHK(ferry_stream_wait_event(NULL, e), FERRY_ERR_INVALID_ARG);
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
    ASSERT_OK(ferry_event_create(ferry_cpu(), true, &t0));
    ASSERT_OK(ferry_event_create(ferry_cpu(), true, &t1));
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
    ferry_pinned_stats st;
    CHK(ferry_pinned_pool_create(0, false, NULL), FERRY_ERR_INVALID_ARG);
    NOCRASH(ferry_pinned_pool_destroy(NULL));
    ASSERT_OK(ferry_pinned_pool_create(1 << 16, false, &p));
    CHK(ferry_pinned_alloc(NULL, 16, 0, &x), FERRY_ERR_INVALID_ARG);
    CHK(ferry_pinned_alloc(p, 16, 0, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_pinned_alloc(p, 0, 0, &x), FERRY_ERR_INVALID_ARG);
    CHK(ferry_pinned_alloc(p, 16, 3, &x), FERRY_ERR_INVALID_ARG);
    CHK(ferry_pinned_alloc(p, (size_t)-1, 0, &x), FERRY_ERR_INVALID_ARG);
    CHK(ferry_pinned_alloc(p, HUGE_SIZE, 0, &x), FERRY_ERR_NO_MEMORY);
    NOCRASH(ferry_pinned_free(NULL, &x));
    NOCRASH(ferry_pinned_free(p, NULL));
    NOCRASH(ferry_pinned_free(p, &x)); /* not from the pool: ignored with a warning */
    NOCRASH(ferry_pinned_pool_stats(NULL, &st));
    NOCRASH(ferry_pinned_pool_stats(p, NULL));
    CHK_TRUE((ferry_pinned_pool_stats(NULL, &st), st.blocks == 0 && st.live_pieces == 0));
    ferry_pinned_pool_destroy(p);
}

TEST(device_malloc_errors)
{
    void *x;
    CHK(ferry_device_malloc(ferry_cpu(), 16, NULL, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_device_malloc(BAD_DEVICE, 16, NULL, &x), FERRY_ERR_INVALID_ARG);
    CHK(ferry_device_malloc(ferry_cuda(1000), 16, NULL, &x), FERRY_ERR_NO_DEVICE);
    CHK_TRUE(ferry_device_malloc(ferry_cpu(), 0, NULL, &x) == FERRY_OK && x == NULL);
    CHK(ferry_device_malloc(ferry_cpu(), (size_t)-1, NULL, &x), FERRY_ERR_DEVICE_OOM);
    CHK(ferry_device_malloc(ferry_cpu(), HUGE_SIZE, NULL, &x), FERRY_ERR_DEVICE_OOM);
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
    CHK_TRUE(ferry_built_with_cuda() == true || ferry_built_with_cuda() == false);
}

/* ================= tensor.h ================= */
TEST(dtype_queries_invalid)
{
    CHK_TRUE(ferry_dtype_size(FERRY_DTYPE_COUNT_) == 0);
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
    CHK(ferry_tensor_empty(s2, 2, FERRY_DTYPE_COUNT_, ferry_cpu(), &t), FERRY_ERR_DTYPE);
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
    CHK(ferry_tensor_from_host(data, s2, 2, FERRY_DTYPE_COUNT_, ferry_cpu(), &t), FERRY_ERR_DTYPE);
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
    CHK_TRUE(ferry_tensor_dtype(NULL) == FERRY_DTYPE_COUNT_);
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
    CHK(ferry_tensor_to_dtype(t, FERRY_DTYPE_COUNT_, &o), FERRY_ERR_DTYPE);
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
    ferry_sample_format bad = {1, 2, 2, FERRY_LAYOUT_CHW, FERRY_DTYPE_COUNT_};
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
    ASSERT_OK(ferry_png_write_file(p, px, 2, 2, 1));
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

TEST(png_write_file_errors)
{
    uint8_t px[16] = {0};
    const char *p = ft_tmp("w.png");
    CHK(ferry_png_write_file(NULL, px, 2, 2, 1), FERRY_ERR_INVALID_ARG);
    CHK(ferry_png_write_file(p, NULL, 2, 2, 1), FERRY_ERR_INVALID_ARG);
    CHK(ferry_png_write_file(p, px, 0, 2, 1), FERRY_ERR_INVALID_ARG);
    CHK(ferry_png_write_file(p, px, 2, 0, 1), FERRY_ERR_INVALID_ARG);
    CHK(ferry_png_write_file(p, px, 2, 2, 0), FERRY_ERR_INVALID_ARG);
    CHK(ferry_png_write_file(p, px, 2, 2, 5), FERRY_ERR_INVALID_ARG);
    CHK(ferry_png_write_file(p, px, (size_t)1 << 32, 1, 1), FERRY_ERR_INVALID_ARG);
    CHK(ferry_png_write_file(ft_tmp("no/such/dir/w.png"), px, 2, 2, 1), FERRY_ERR_IO);
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
    ferry_dataset_destroy(ds);
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
}

TEST(dataset_retain_destroy_null)
{
    CHK_TRUE(ferry_dataset_retain(NULL) == NULL);
    NOCRASH(ferry_dataset_destroy(NULL));
}

TEST(dataset_queries_null_and_out_of_range)
{
    ferry_dataset *ds = mem_ds();
    CHK_TRUE(ferry_dataset_len(NULL) == 0);
    CHK_TRUE(ferry_dataset_format(NULL) == NULL);
    CHK_TRUE(ferry_dataset_sample_bytes(NULL) == 0);
    CHK_TRUE(ferry_dataset_num_classes(NULL) == 0);
    CHK_TRUE(ferry_dataset_class_name(NULL, 0) == NULL);
    CHK_TRUE(ferry_dataset_class_name(ds, 1000) == NULL);
    CHK_TRUE(ferry_dataset_sample_name(NULL, 0) == NULL);
    CHK_TRUE(ferry_dataset_sample_name(ds, 1000) == NULL);
    ferry_dataset_destroy(ds);
}

TEST(dataset_label_errors)
{
    ferry_dataset *ds = mem_ds();
    int64_t lab;
    CHK(ferry_dataset_label(NULL, 0, &lab), FERRY_ERR_INVALID_ARG);
    CHK(ferry_dataset_label(ds, 0, NULL), FERRY_ERR_INVALID_ARG);
    CHK(ferry_dataset_label(ds, 10, &lab), FERRY_ERR_INVALID_ARG);
    CHK(ferry_dataset_label(ds, (size_t)-1, &lab), FERRY_ERR_INVALID_ARG);
    ferry_dataset_destroy(ds);
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
    ferry_dataset_destroy(ds);
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
    ferry_dataset_destroy(ds);
}

TEST(loader_create_zero_and_huge_sizes)
{
    ferry_dataset *ds = mem_ds(), *empty;
    ferry_loader_config c = loader_cfg(ds);
    c.batch_size = 0;
    CHK(create_with(c), FERRY_ERR_INVALID_ARG);
    c = loader_cfg(ds);
    c.batch_size = (size_t)-1; /* more than the dataset: one short batch */
    CHK(create_with(c), FERRY_OK);
    c.batch_size = HUGE_SIZE;
    c.drop_last = true; /* no batch at all */
    CHK(create_with(c), FERRY_ERR_INVALID_ARG);
    c = loader_cfg(ds);
    c.prefetch = 0;
    CHK(create_with(c), FERRY_ERR_INVALID_ARG);
    c.prefetch = (size_t)-1;
    CHK(create_with(c), FERRY_ERR_INVALID_ARG);
    c = loader_cfg(ds);
    c.num_workers = (size_t)-1;
    CHK(create_with(c), FERRY_ERR_INVALID_ARG);
    ASSERT_OK(ferry_dataset_subset(ds, 3, 3, &empty));
    c = loader_cfg(empty);
    CHK(create_with(c), FERRY_ERR_INVALID_ARG);
    ferry_dataset_destroy(empty);
    ferry_dataset_destroy(ds);
}

TEST(loader_create_wrong_device)
{
    ferry_dataset *ds = mem_ds();
    ferry_loader_config c = loader_cfg(ds);
    c.device = "tpu";
    CHK(create_with(c), FERRY_ERR_INVALID_ARG);
    c.device = "cuda:1000";
    CHK(create_with(c), FERRY_ERR_NO_DEVICE);
    if (no_gpu()) {
        c.device = "cuda";
        CHK(create_with(c), FERRY_ERR_NO_DEVICE);
        c.device = NULL; /* the default device: cpu here */
        CHK(create_with(c), FERRY_OK);
        c.device = "cpu";
        c.pin_memory = true; /* warns once, falls back */
        CHK(create_with(c), FERRY_OK);
    }
    ferry_dataset_destroy(ds);
}

TEST(loader_create_wrong_dtypes)
{
    ferry_dataset *ds = mem_ds();
    ferry_loader_config c = loader_cfg(ds);
    c.out_dtype = FERRY_DTYPE_I64;
    CHK(create_with(c), FERRY_ERR_INVALID_ARG);
    c.out_dtype = FERRY_DTYPE_COUNT_;
    CHK(create_with(c), FERRY_ERR_INVALID_ARG);
    c = loader_cfg(ds);
    c.wire_dtype = FERRY_DTYPE_F16;
    CHK(create_with(c), FERRY_ERR_INVALID_ARG);
    c.wire_dtype = FERRY_DTYPE_F32;
    c.out_dtype = FERRY_DTYPE_U8;
    CHK(create_with(c), FERRY_ERR_INVALID_ARG);
    ferry_dataset_destroy(ds);
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
    c.std[0] = 0;
    CHK(create_with(c), FERRY_ERR_INVALID_ARG);
    ferry_dataset_destroy(ds);
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
    ferry_dataset_destroy(ds);
}

TEST(loader_create_unsupported_dataset)
{
    /* f32 samples cannot travel as u8 bytes. */
    float data[4 * 2] = {0};
    ferry_sample_format f = {1, 1, 2, FERRY_LAYOUT_CHW, FERRY_DTYPE_F32};
    ferry_dataset *ds;
    ASSERT_OK(ferry_dataset_memory(data, &f, 4, NULL, &ds));
    ferry_loader_config c = loader_cfg(ds);
    CHK(create_with(c), FERRY_ERR_INVALID_ARG);
    c.out_dtype = FERRY_DTYPE_U8;
    CHK(create_with(c), FERRY_ERR_INVALID_ARG);
    c.wire_dtype = FERRY_DTYPE_F32;
    c.out_dtype = FERRY_DTYPE_F32;
    CHK(create_with(c), FERRY_OK);
    ferry_dataset_destroy(ds);
    /* A custom dataset of i64 samples: valid, but the loader cannot carry it. */
    ferry_dataset_callbacks cb = {.len = 4, .format = {1, 1, 2, FERRY_LAYOUT_CHW, FERRY_DTYPE_I64},
                                  .num_classes = 1, .get = cb_get};
    ASSERT_OK(ferry_dataset_custom(&cb, NULL, &ds));
    c = loader_cfg(ds);
    CHK(create_with(c), FERRY_ERR_UNSUPPORTED);
    ferry_dataset_destroy(ds);
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
    ferry_dataset_destroy(ds);
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
    ferry_dataset_destroy(ds);
}

TEST(loader_reset_and_queries_null)
{
    CHK(ferry_loader_reset(NULL, 0), FERRY_ERR_INVALID_ARG);
    CHK_TRUE(ferry_loader_len(NULL) == 0);
    CHK_TRUE(ferry_loader_num_samples(NULL) == 0);
    CHK_TRUE(ferry_device_eq(ferry_loader_device(NULL), ferry_cpu()));
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
    ferry_dataset_destroy(ds);
}

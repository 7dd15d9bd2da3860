/* Devices: parsing every malformed and missing device string, formatting round
 * trips, the current-device guard, properties, streams and events on the CPU,
 * ferry_memcpy, and the CUDA-only paths (skipped without a GPU). */
#include <stdlib.h>
#include <time.h>

#include "harness.h"

/* Each bad string must be FERRY_ERR_INVALID_ARG and be quoted in the message. */
static void expect_invalid(const char *s)
{
    ferry_device d = ferry_cuda(123);
    ferry_status st = ferry_device_parse(s, &d);
    ASSERT_MSG(st == FERRY_ERR_INVALID_ARG, "parse(\"%s\"): got %s (%s)", s ? s : "(null)",
               ferry_status_str(st), ferry_last_error());
    char quoted[128];
    snprintf(quoted, sizeof quoted, "\"%s\"", s ? s : "");
    if (s)
        ASSERT_STR_CONTAINS(ferry_last_error(), quoted);
    else
        ASSERT_STR_CONTAINS(ferry_last_error(), "(null)");
    ASSERT_STR_CONTAINS(ferry_last_error(), "cuda:N");
    /* Nothing usable is left behind: every call refuses the invalid device. */
    ASSERT_EQ_INT(d.type, FERRY_DEVICE_INVALID);
    ASSERT_EQ_INT(d.index, -1);
}

TEST(parse_rejects_gpu) { expect_invalid("gpu"); }
TEST(parse_rejects_cuda_colon) { expect_invalid("cuda:"); }
TEST(parse_rejects_negative_index) { expect_invalid("cuda:-1"); }
TEST(parse_rejects_trailing_garbage) { expect_invalid("cuda:1x"); }
TEST(parse_rejects_upper_case) { expect_invalid("CUDA"); }
TEST(parse_rejects_empty) { expect_invalid(""); }
TEST(parse_rejects_null) { expect_invalid(NULL); }
TEST(parse_rejects_leading_space) { expect_invalid(" cpu"); }
TEST(parse_rejects_trailing_space) { expect_invalid("cpu "); }
TEST(parse_rejects_huge_index) { expect_invalid("cuda:99999999999"); }
TEST(parse_rejects_plus_sign) { expect_invalid("cuda:+1"); }
TEST(parse_rejects_cpu_index) { expect_invalid("cpu:0"); }

TEST(parse_null_out)
{
    ASSERT_STATUS(ferry_device_parse("cpu", NULL), FERRY_ERR_INVALID_ARG);
}

TEST(parse_cpu_and_format)
{
    ferry_device d;
    char buf[FERRY_DEVICE_NAME_MAX];
    ASSERT_OK(ferry_device_parse("cpu", &d));
    ASSERT(ferry_device_eq(d, ferry_cpu()));
    ASSERT_STR_EQ(ferry_device_format(d, buf, sizeof buf), "cpu");
    ASSERT_STR_EQ(ferry_device_format(ferry_cuda(0), buf, sizeof buf), "cuda:0");
    ASSERT_STR_EQ(ferry_device_format(ferry_cuda(2147483647), buf, sizeof buf), "cuda:2147483647");
}

/* A well-formed index past the device count is "no such device", and says how
 * many there are. */
TEST(parse_missing_cuda_device)
{
    int n = ferry_cuda_device_count();
    char s[32];
    snprintf(s, sizeof s, "cuda:%d", n + 6);
    ferry_device d;
    ASSERT_STATUS(ferry_device_parse(s, &d), FERRY_ERR_NO_DEVICE);
    ASSERT_STR_CONTAINS(ferry_last_error(), s);
    if (n == 0)
        ASSERT_STR_CONTAINS(ferry_last_error(), "no CUDA device");
    else {
        char want[64];
        snprintf(want, sizeof want, "%d CUDA device", n);
        ASSERT_STR_CONTAINS(ferry_last_error(), want);
    }
}

TEST(parse_cuda_without_gpu_is_no_device)
{
    if (ferry_cuda_is_available())
        SKIP("a CUDA device is present");
    ferry_device d;
    const char *strs[] = {"cuda", "cuda:0", "cuda:7"};
    for (size_t i = 0; i < 3; i++) {
        ASSERT_STATUS(ferry_device_parse(strs[i], &d), FERRY_ERR_NO_DEVICE);
        ASSERT_STR_CONTAINS(ferry_last_error(), strs[i]);
        ASSERT_STR_CONTAINS(ferry_last_error(), "no CUDA device");
    }
}

TEST(parse_format_round_trip)
{
    char buf[FERRY_DEVICE_NAME_MAX];
    ferry_device devs[1 + 8];
    size_t n = 0;
    devs[n++] = ferry_cpu();
    for (int i = 0; i < ferry_cuda_device_count() && i < 8; i++)
        devs[n++] = ferry_cuda(i);
    for (size_t i = 0; i < n; i++) {
        ferry_device back;
        ASSERT_OK(ferry_device_parse(ferry_device_format(devs[i], buf, sizeof buf), &back));
        ASSERT(ferry_device_eq(back, devs[i]));
    }
}

TEST(count_and_default_agree)
{
    int n = ferry_cuda_device_count();
    ASSERT(n >= 0);
    ASSERT_EQ_INT(ferry_cuda_is_available(), n > 0);
    ferry_device d = ferry_device_default();
    if (n > 0)
        ASSERT(ferry_device_eq(d, ferry_cuda(0)));
    else
        ASSERT(ferry_device_eq(d, ferry_cpu()));
    if (!ferry_cuda_is_built() && !ferry_cuda_is_simulated())
        ASSERT_EQ_INT(n, 0);
    if (ferry_cuda_is_simulated())
        ASSERT_EQ_INT(n, atoi(getenv("FERRY_SIM_GPUS")));
    ASSERT(strlen(ferry_version()) > 0);
    ASSERT(strlen(ferry_build_features()) > 0);
}

TEST(cpu_properties)
{
    ferry_device_props p;
    ASSERT_OK(ferry_device_properties(ferry_cpu(), &p));
    ASSERT(strlen(p.name) > 0);
    ASSERT(p.total_memory > 0);
    ASSERT(p.free_memory <= p.total_memory);
    ASSERT(p.multiprocessors >= 1);
    ASSERT_OK(ferry_device_synchronize(ferry_cpu()));
}

TEST(properties_of_missing_device)
{
    ferry_device_props p;
    ASSERT_STATUS(ferry_device_properties(ferry_cuda(ferry_cuda_device_count()), &p), FERRY_ERR_NO_DEVICE);
    ASSERT_STATUS(ferry_device_synchronize(ferry_cuda(ferry_cuda_device_count())), FERRY_ERR_NO_DEVICE);
    ASSERT_STATUS(ferry_device_properties(ferry_cpu(), NULL), FERRY_ERR_INVALID_ARG);
}

TEST(current_device_without_gpu)
{
    if (ferry_cuda_is_available())
        SKIP("a CUDA device is present");
    int idx = 5;
    ASSERT_STATUS(ferry_cuda_current_device(&idx), FERRY_ERR_NO_DEVICE);
    ASSERT_STR_CONTAINS(ferry_last_error(), "no CUDA device");
    ASSERT_STATUS(ferry_cuda_set_device(0), FERRY_ERR_NO_DEVICE);
}

TEST(guard_cpu_is_a_no_op)
{
    ferry_device_guard g;
    ASSERT_OK(ferry_device_guard_enter(&g, ferry_cpu()));
    ASSERT_EQ_INT(g.prev_index, -1);
    ferry_device_guard_exit(&g);
    ferry_device_guard_exit(NULL);
    ASSERT_STATUS(ferry_device_guard_enter(NULL, ferry_cpu()), FERRY_ERR_INVALID_ARG);
    ASSERT_STATUS(ferry_device_guard_enter(&g, ferry_cuda(ferry_cuda_device_count())),
                  FERRY_ERR_NO_DEVICE);
    ASSERT_EQ_INT(g.prev_index, -1);
    ferry_device_guard_exit(&g); /* after a failed enter: nothing to restore */
}

TEST(cuda_guard_restores_previous)
{
    ft_require_cuda();
    int n = ferry_cuda_device_count(), cur;
    ASSERT_OK(ferry_cuda_set_device(0));
    ferry_device_guard g;
    ASSERT_OK(ferry_device_guard_enter(&g, ferry_cuda(n - 1)));
    ASSERT_OK(ferry_cuda_current_device(&cur));
    ASSERT_EQ_INT(cur, n - 1);
    ferry_device_guard inner;
    ASSERT_OK(ferry_device_guard_enter(&inner, ferry_cuda(0)));
    ASSERT_OK(ferry_cuda_current_device(&cur));
    ASSERT_EQ_INT(cur, 0);
    ferry_device_guard_exit(&inner);
    ASSERT_OK(ferry_cuda_current_device(&cur));
    ASSERT_EQ_INT(cur, n - 1);
    ferry_device_guard_exit(&g);
    ASSERT_OK(ferry_cuda_current_device(&cur));
    ASSERT_EQ_INT(cur, 0);
    ferry_device d;
    ASSERT_OK(ferry_device_parse("cuda", &d));
    ASSERT(ferry_device_eq(d, ferry_cuda(0)));
}

TEST(cuda_properties)
{
    ft_require_cuda();
    ferry_device_props p;
    ASSERT_OK(ferry_device_properties(ferry_cuda(0), &p));
    ASSERT(strlen(p.name) > 0);
    ASSERT(p.total_memory > 0 && p.free_memory <= p.total_memory);
    ASSERT(p.cc_major >= 3);
    ASSERT(p.multiprocessors > 0);
    ASSERT_OK(ferry_device_synchronize(ferry_cuda(0)));
}

TEST(cpu_streams_and_events_complete_at_once)
{
    ferry_stream *s = NULL;
    ferry_event *a = NULL, *b = NULL, *plain = NULL;
    ASSERT_OK(ferry_stream_create(ferry_cpu(), &s));
    ASSERT(ferry_device_eq(ferry_stream_device(s), ferry_cpu()));
    ASSERT(ferry_stream_cuda_handle(s) == NULL); /* no CUDA stream behind a CPU one */
    ASSERT_OK(ferry_event_create(ferry_cpu(), true, &a));
    ASSERT_OK(ferry_event_create(ferry_cpu(), true, &b));
    ASSERT_OK(ferry_event_create(ferry_cpu(), false, &plain));
    ASSERT(ferry_stream_query(s));
    float ms = -1;
    ASSERT_STATUS(ferry_event_elapsed_ms(a, b, &ms), FERRY_ERR_BAD_STATE); /* not recorded yet */
    ASSERT_OK(ferry_event_record(a, s));
    /* some work to time */
    volatile double x = 0;
    for (int i = 0; i < 2000000; i++)
        x += i * 0.5;
    ASSERT_OK(ferry_event_record(b, s));
    ASSERT(ferry_event_query(b));
    ASSERT_OK(ferry_event_synchronize(b));
    ASSERT_OK(ferry_event_elapsed_ms(a, b, &ms));
    ASSERT(ms >= 0.0f && ms < 10000.0f);
    ASSERT_OK(ferry_event_record(plain, NULL));
    ASSERT_STATUS(ferry_event_elapsed_ms(a, plain, &ms), FERRY_ERR_INVALID_ARG);
    ASSERT_OK(ferry_stream_wait_event(s, plain));
    ASSERT_OK(ferry_stream_synchronize(s));
    ferry_event_destroy(a);
    ferry_event_destroy(b);
    ferry_event_destroy(plain);
    ferry_stream_destroy(s);
    ferry_stream_destroy(NULL);
    ferry_event_destroy(NULL);
}

TEST(streams_on_missing_device_fail)
{
    ferry_stream *s = (ferry_stream *)1;
    ferry_event *e = (ferry_event *)1;
    ASSERT_STATUS(ferry_stream_create(ferry_cuda(ferry_cuda_device_count()), &s), FERRY_ERR_NO_DEVICE);
    ASSERT(s == NULL);
    ASSERT_STATUS(ferry_event_create(ferry_cuda(ferry_cuda_device_count()), true, &e), FERRY_ERR_NO_DEVICE);
    ASSERT(e == NULL);
}

TEST(memcpy_all_kinds_on_cpu)
{
    char src[64], dst[64];
    for (int i = 0; i < 64; i++)
        src[i] = (char)i;
    ferry_copy_kind kinds[] = {FERRY_COPY_H2D, FERRY_COPY_D2H, FERRY_COPY_D2D, FERRY_COPY_H2H};
    ferry_stream *s;
    ASSERT_OK(ferry_stream_create(ferry_cpu(), &s));
    for (size_t k = 0; k < 4; k++) {
        memset(dst, 0, sizeof dst);
        ASSERT_OK(ferry_memcpy(dst, src, sizeof src, kinds[k], ferry_cpu(), k % 2 ? s : NULL));
        ASSERT_MEM_EQ(dst, src, sizeof src);
    }
    ASSERT_OK(ferry_memcpy(NULL, NULL, 0, FERRY_COPY_H2H, ferry_cpu(), NULL));
    ASSERT_STATUS(ferry_memcpy(NULL, src, 4, FERRY_COPY_H2H, ferry_cpu(), NULL), FERRY_ERR_INVALID_ARG);
    ASSERT_STATUS(ferry_memcpy(dst, src, 4, FERRY_COPY_H2D, ferry_cuda(ferry_cuda_device_count()), NULL),
                  FERRY_ERR_NO_DEVICE);
    ferry_stream_destroy(s);
}

TEST(cuda_streams_events_and_copies)
{
    ft_require_cuda();
    ferry_stream *s;
    ferry_event *a, *b;
    ASSERT_OK(ferry_stream_create(ferry_cuda(0), &s));
    ASSERT_OK(ferry_event_create(ferry_cuda(0), true, &a));
    ASSERT_OK(ferry_event_create(ferry_cuda(0), true, &b));
    size_t n = 1 << 20;
    void *dev;
    char *host = malloc(n), *back = malloc(n);
    for (size_t i = 0; i < n; i++)
        host[i] = (char)(i * 7);
    ASSERT_OK(ferry_device_alloc(ferry_cuda(0), n, s, &dev));
    ASSERT_OK(ferry_event_record(a, s));
    ASSERT_OK(ferry_memcpy(dev, host, n, FERRY_COPY_H2D, ferry_cuda(0), s));
    ASSERT_OK(ferry_memcpy(back, dev, n, FERRY_COPY_D2H, ferry_cuda(0), s));
    ASSERT_OK(ferry_event_record(b, s));
    ASSERT_OK(ferry_event_synchronize(b));
    ASSERT(ferry_event_query(b));
    ASSERT(ferry_stream_query(s));
    float ms;
    ASSERT_OK(ferry_event_elapsed_ms(a, b, &ms));
    ASSERT(ms >= 0);
    ASSERT_MEM_EQ(back, host, n);
    ferry_stream *s2;
    ASSERT_OK(ferry_stream_create(ferry_cuda(0), &s2));
    ASSERT_OK(ferry_stream_wait_event(s2, b));
    ASSERT_OK(ferry_stream_synchronize(s2));
    /* Own kernels order themselves after ferry's work through the CUDA handle:
     * one per stream on a real GPU, none on the simulated one. */
    if (ferry_cuda_is_simulated()) {
        ASSERT(ferry_stream_cuda_handle(s) == NULL);
    } else {
        ASSERT(ferry_stream_cuda_handle(s) != NULL);
        ASSERT(ferry_stream_cuda_handle(s) != ferry_stream_cuda_handle(s2));
    }
    ASSERT(ferry_stream_cuda_handle(NULL) == NULL);
    ferry_device_free(ferry_cuda(0), dev);
    free(host);
    free(back);
    ferry_event_destroy(a);
    ferry_event_destroy(b);
    ferry_stream_destroy(s);
    ferry_stream_destroy(s2);
}

TEST(query_status_on_cpu)
{
    ferry_stream *s;
    ferry_event *e;
    ASSERT_OK(ferry_stream_create(ferry_cpu(), &s));
    ASSERT_OK(ferry_event_create(ferry_cpu(), false, &e));
    bool done = false;
    ASSERT_OK(ferry_stream_query_status(s, &done));
    ASSERT(done);
    done = false;
    ASSERT_OK(ferry_event_query_status(e, &done)); /* never recorded: complete */
    ASSERT(done);
    ASSERT_OK(ferry_event_record(e, s));
    done = false;
    ASSERT_OK(ferry_event_query_status(e, &done));
    ASSERT(done);
    /* bad arguments are errors, and never "done" */
    done = true;
    ASSERT_STATUS(ferry_stream_query_status(NULL, &done), FERRY_ERR_INVALID_ARG);
    ASSERT(!done);
    done = true;
    ASSERT_STATUS(ferry_event_query_status(NULL, &done), FERRY_ERR_INVALID_ARG);
    ASSERT(!done);
    ASSERT_STATUS(ferry_stream_query_status(s, NULL), FERRY_ERR_INVALID_ARG);
    ASSERT_STATUS(ferry_event_query_status(e, NULL), FERRY_ERR_INVALID_ARG);
    ferry_event_destroy(e);
    ferry_stream_destroy(s);
}

/* ---- the current CUDA device ----
 * CUDA's current device is per host thread, and kernel launches, allocations,
 * stream and event creation and the default (NULL) stream all use it. Every
 * ferry call that issues work for device d must make d current for the call and
 * give the caller its own current device back. The tests below run every such
 * call on each device d while the thread sits on each device cur, so with two or
 * more devices (real, or simulated with FERRY_SIM_GPUS=2) they also cover
 * "the work is for another device than the current one". */

static void expect_current(int want, const char *after)
{
    int cur = -1;
    ASSERT_OK(ferry_cuda_current_device(&cur));
    ASSERT_MSG(cur == want, "after %s the current device is cuda:%d, not the caller's cuda:%d", after,
               cur, want);
}

/* The call succeeds and leaves the caller on cuda:cur. */
#define KEEPS(cur, expr)                                                       \
    do {                                                                       \
        ASSERT_OK(expr);                                                       \
        expect_current((cur), #expr);                                          \
    } while (0)

static void streams_and_events_keep_current(int cur, ferry_device dev)
{
    ASSERT_OK(ferry_cuda_set_device(cur));
    ferry_stream *s;
    ferry_event *t0, *t1, *plain;
    KEEPS(cur, ferry_stream_create(dev, &s));
    KEEPS(cur, ferry_event_create(dev, true, &t0));
    KEEPS(cur, ferry_event_create(dev, true, &t1));
    KEEPS(cur, ferry_event_create(dev, false, &plain));
    enum { N = 4096 };
    static unsigned char host[N], back[N];
    for (int i = 0; i < N; i++)
        host[i] = (unsigned char)(i * 31 + cur * 7 + dev.index);
    memset(back, 0, sizeof back);
    void *p;
    KEEPS(cur, ferry_device_alloc(dev, N, s, &p));
    KEEPS(cur, ferry_event_record(t0, s));
    KEEPS(cur, ferry_memcpy(p, host, N, FERRY_COPY_H2D, dev, s));
    KEEPS(cur, ferry_event_record(t1, s));
    /* NULL: dev's default stream, whatever the current device is */
    KEEPS(cur, ferry_event_record(plain, NULL));
    KEEPS(cur, ferry_stream_wait_event(s, plain));
    KEEPS(cur, ferry_memcpy(back, p, N, FERRY_COPY_D2H, dev, s));
    KEEPS(cur, ferry_stream_synchronize(s));
    ASSERT_MEM_EQ(back, host, N);
    bool done = false;
    KEEPS(cur, ferry_stream_query_status(s, &done));
    ASSERT(done);
    KEEPS(cur, ferry_event_synchronize(plain));
    done = false;
    KEEPS(cur, ferry_event_query_status(t1, &done));
    ASSERT(done);
    ASSERT(ferry_event_query(plain));
    expect_current(cur, "ferry_event_query");
    float ms = -1;
    KEEPS(cur, ferry_event_elapsed_ms(t0, t1, &ms));
    ASSERT(ms >= 0);
    KEEPS(cur, ferry_device_synchronize(dev));
    ferry_memory_stats st;
    KEEPS(cur, ferry_memory_stats_get(dev, &st));
    ferry_device_free(dev, p);
    ferry_event_destroy(t0);
    ferry_event_destroy(t1);
    ferry_event_destroy(plain);
    ferry_stream_destroy(s);
    expect_current(cur, "the destroy calls");
}

TEST(cuda_streams_and_events_keep_the_current_device)
{
    ft_require_cuda();
    int n = ferry_cuda_device_count();
    for (int cur = 0; cur < n; cur++)
        for (int d = 0; d < n; d++)
            streams_and_events_keep_current(cur, ferry_cuda(d));
    ASSERT_OK(ferry_cuda_set_device(0));
}

/* Kernels (elementwise, dtype conversion) and cuBLAS, on dev's default stream. */
static void kernels_keep_current(int cur, ferry_device dev)
{
    ASSERT_OK(ferry_cuda_set_device(cur));
    enum { M = 8 };
    float av[M * M], bv[M * M], sum[M * M], prod[M * M];
    for (int i = 0; i < M; i++)
        for (int j = 0; j < M; j++) {
            av[i * M + j] = (float)((i + j) % 4);
            bv[i * M + j] = (float)((i * j) % 3);
        }
    for (int i = 0; i < M; i++)
        for (int j = 0; j < M; j++) {
            float acc = 0;
            for (int k = 0; k < M; k++)
                acc += av[i * M + k] * bv[k * M + j];
            prod[i * M + j] = acc; /* small integers: exact in f32 and f16 */
            sum[i * M + j] = av[i * M + j] + bv[i * M + j];
        }
    int64_t shape[2] = {M, M};
    ferry_tensor *a, *b, *z, *c, *m, *m16;
    KEEPS(cur, ferry_tensor_from_host(av, shape, 2, FERRY_DTYPE_F32, dev, &a));
    KEEPS(cur, ferry_tensor_from_host(bv, shape, 2, FERRY_DTYPE_F32, dev, &b));
    KEEPS(cur, ferry_tensor_zeros(shape, 2, FERRY_DTYPE_F32, dev, &z));
    KEEPS(cur, ferry_add(a, b, NULL, &c));
    KEEPS(cur, ferry_tensor_fill(z, 2.0, NULL));
    KEEPS(cur, ferry_matmul(a, b, NULL, &m));
    KEEPS(cur, ferry_tensor_to_dtype(m, FERRY_DTYPE_F16, &m16));
    float got[M * M];
    uint16_t got16[M * M];
    KEEPS(cur, ferry_tensor_copy_to_host(c, got, sizeof got));
    for (int i = 0; i < M * M; i++)
        ASSERT_MSG(got[i] == sum[i], "cuda:%d from cuda:%d: add[%d] = %g, want %g", dev.index, cur, i,
                   (double)got[i], (double)sum[i]);
    KEEPS(cur, ferry_tensor_copy_to_host(z, got, sizeof got));
    for (int i = 0; i < M * M; i++)
        ASSERT_MSG(got[i] == 2.0f, "cuda:%d from cuda:%d: fill[%d] = %g", dev.index, cur, i, (double)got[i]);
    KEEPS(cur, ferry_tensor_copy_to_host(m, got, sizeof got));
    KEEPS(cur, ferry_tensor_copy_to_host(m16, got16, sizeof got16));
    for (int i = 0; i < M * M; i++) {
        ASSERT_MSG(got[i] == prod[i], "cuda:%d from cuda:%d: matmul[%d] = %g, want %g", dev.index, cur, i,
                   (double)got[i], (double)prod[i]);
        ASSERT_MSG(ferry_f16_to_f32(got16[i]) == prod[i], "cuda:%d from cuda:%d: f16 matmul[%d] = %g, want %g",
                   dev.index, cur, i, (double)ferry_f16_to_f32(got16[i]), (double)prod[i]);
    }
    ferry_tensor_release(a);
    ferry_tensor_release(b);
    ferry_tensor_release(z);
    ferry_tensor_release(c);
    ferry_tensor_release(m);
    ferry_tensor_release(m16);
    expect_current(cur, "ferry_tensor_release");
}

TEST(cuda_kernels_keep_the_current_device)
{
    ft_require_cuda();
    int n = ferry_cuda_device_count();
    for (int cur = 0; cur < n; cur++)
        for (int d = 0; d < n; d++)
            kernels_keep_current(cur, ferry_cuda(d));
    ASSERT_OK(ferry_cuda_set_device(0));
}

/* The loader's copy and its on-device conversion run on the loader's device,
 * whichever device the thread that calls next() is on. */
static void loader_keeps_current(int cur, int d)
{
    enum { NS = 10, C = 1, H = 3, W = 5, SZ = C * H * W, B = 4 };
    static uint8_t data[NS * SZ];
    static int64_t labels[NS];
    for (int i = 0; i < NS * SZ; i++)
        data[i] = (uint8_t)(i * 37 + 11);
    for (int i = 0; i < NS; i++)
        labels[i] = i % 3;
    ferry_sample_format fmt = {C, H, W, FERRY_LAYOUT_CHW, FERRY_DTYPE_U8};
    ferry_dataset *ds;
    ASSERT_OK(ferry_dataset_memory(data, &fmt, NS, labels, &ds));
    ferry_loader_config cfg = ferry_loader_config_default();
    cfg.dataset = ds;
    cfg.batch_size = B;
    cfg.num_workers = 1;
    cfg.device = ferry_cuda(d);
    cfg.pin_memory = FERRY_PIN_MEMORY_ON;
    cfg.out_dtype = FERRY_DTYPE_F32; /* converted and normalised on the device */
    ASSERT_OK(ferry_cuda_set_device(cur));
    ferry_loader *l;
    KEEPS(cur, ferry_loader_create(&cfg, &l));
    ferry_stream *s;
    ASSERT_OK(ferry_stream_create(ferry_cuda(d), &s));
    ferry_batch b;
    size_t seen = 0;
    for (int k = 0; k < 2; k++) { /* the default stream, then one of the loader's device */
        ferry_status st;
        ASSERT_OK(ferry_loader_reset(l, 0));
        while ((st = ferry_loader_next(l, k ? s : NULL, &b)) == FERRY_OK) {
            expect_current(cur, "ferry_loader_next");
            ASSERT(ferry_device_eq(ferry_tensor_device(b.images), ferry_cuda(d)));
            if (k)
                ASSERT_OK(ferry_stream_synchronize(s));
            float got[B * SZ];
            int64_t lab[B];
            KEEPS(cur, ferry_tensor_copy_to_host(b.images, got, b.size * SZ * sizeof(float)));
            KEEPS(cur, ferry_tensor_copy_to_host(b.labels, lab, b.size * sizeof(int64_t)));
            for (size_t i = 0; i < b.size; i++) {
                size_t idx = b.indices[i];
                ASSERT_EQ_INT(lab[i], labels[idx]);
                for (int j = 0; j < SZ; j++)
                    ASSERT_NEAR(got[i * SZ + (size_t)j], data[idx * SZ + (size_t)j] / 255.0, 1e-6);
            }
            seen += b.size;
        }
        ASSERT_STATUS(st, FERRY_END);
        expect_current(cur, "the end of an epoch");
    }
    ASSERT_EQ_SIZE(seen, 2 * NS);
    ferry_stream_destroy(s);
    ferry_loader_destroy(l);
    ferry_dataset_release(ds);
    expect_current(cur, "ferry_loader_destroy");
}

TEST(cuda_loader_keeps_the_current_device)
{
    ft_require_cuda();
    int n = ferry_cuda_device_count();
    for (int cur = 0; cur < n; cur++)
        for (int d = 0; d < n; d++)
            loader_keeps_current(cur, d);
    ASSERT_OK(ferry_cuda_set_device(0));
}

TEST(event_elapsed_needs_one_device)
{
    ft_require_cuda();
    int n = ferry_cuda_device_count();
    ferry_event *c, *g;
    float ms;
    ASSERT_OK(ferry_event_create(ferry_cpu(), true, &c));
    ASSERT_OK(ferry_event_create(ferry_cuda(n - 1), true, &g));
    ASSERT_OK(ferry_event_record(c, NULL));
    ASSERT_OK(ferry_event_record(g, NULL));
    ASSERT_OK(ferry_event_synchronize(g));
    ASSERT_STATUS(ferry_event_elapsed_ms(c, g, &ms), FERRY_ERR_DEVICE_MISMATCH);
    if (n >= 2) {
        ferry_event *g0;
        ASSERT_OK(ferry_event_create(ferry_cuda(0), true, &g0));
        ASSERT_OK(ferry_event_record(g0, NULL));
        ASSERT_OK(ferry_event_synchronize(g0));
        ASSERT_STATUS(ferry_event_elapsed_ms(g0, g, &ms), FERRY_ERR_DEVICE_MISMATCH);
        ASSERT_STR_CONTAINS(ferry_last_error(), "cuda:0");
        ferry_event_destroy(g0);
    }
    ferry_event_destroy(c);
    ferry_event_destroy(g);
}

/* ferry_event_synchronize sleeps until the event completes: a loader worker
 * waiting for a slot's copy must leave its core to the others, not spin on it.
 * Measured as the waiting thread's CPU time against the wall time of the wait. */
static double thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

TEST(cuda_event_wait_sleeps)
{
    ft_require_cuda();
    ferry_device dev = ferry_cuda(0);
    int64_t shape[2] = {2048, 2048};
    ferry_tensor *a, *b, *c;
    ASSERT_OK(ferry_tensor_full(shape, 2, 0.5, FERRY_DTYPE_F32, dev, &a));
    ASSERT_OK(ferry_tensor_full(shape, 2, 0.25, FERRY_DTYPE_F32, dev, &b));
    ferry_event *done;
    ASSERT_OK(ferry_event_create(dev, false, &done));
    /* How long one product takes (after a first one that creates cuBLAS's
     * handle), to queue about half a second of them. */
    ASSERT_OK(ferry_matmul(a, b, NULL, &c));
    ferry_tensor_release(c);
    ASSERT_OK(ferry_device_synchronize(dev));
    double t0 = wall_s();
    ASSERT_OK(ferry_matmul(a, b, NULL, &c));
    ferry_tensor_release(c);
    ASSERT_OK(ferry_device_synchronize(dev));
    double one = wall_s() - t0;
    int count = one > 0 ? (int)(0.5 / one) : 4000;
    count = count < 1 ? 1 : count > 4000 ? 4000 : count;
    for (int i = 0; i < count; i++) {
        ASSERT_OK(ferry_matmul(a, b, NULL, &c));
        ferry_tensor_release(c); /* its block goes back to the same stream's cache */
    }
    ASSERT_OK(ferry_event_record(done, NULL));
    double w0 = wall_s(), c0 = thread_cpu_s();
    ASSERT_OK(ferry_event_synchronize(done));
    double wall = wall_s() - w0, cpu = thread_cpu_s() - c0;
    ferry_event_destroy(done);
    ferry_tensor_release(a);
    ferry_tensor_release(b);
    if (wall < 0.05)
        SKIP("the device finished the queued work too fast to tell sleeping from spinning");
    ASSERT_MSG(cpu < 0.5 * wall, "ferry_event_synchronize used %.3f s of CPU in a %.3f s wait: it spins",
               cpu, wall);
}

/* ---- which GPUs the build's code runs on (ferry_cuda_arch_fit) ---- */

/* The default fat build (Makefile, CUDA_ARCH unset, CUDA 13). */
#define FAT_ARCHS "sm_75 sm_80 sm_86 sm_89 sm_90 sm_100 sm_120 compute_120"

static void expect_fit(const char *archs, int major, int minor, ferry_arch_fit want, int want_arch)
{
    int arch = -1;
    ferry_arch_fit got = ferry_cuda_arch_fit(archs, major, minor, &arch);
    ASSERT_MSG(got == want && arch == want_arch, "fit(\"%s\", %d.%d): got fit %d arch %d, want fit %d arch %d",
               archs ? archs : "(null)", major, minor, (int)got, arch, (int)want, want_arch);
}

/* Machine code runs on its own major version at an equal or higher minor. */
TEST(arch_fit_machine_code_by_generation)
{
    expect_fit(FAT_ARCHS, 7, 5, FERRY_ARCH_FIT_SASS, 75);  /* T4, RTX 20xx */
    expect_fit(FAT_ARCHS, 8, 0, FERRY_ARCH_FIT_SASS, 80);  /* A100 */
    expect_fit(FAT_ARCHS, 8, 6, FERRY_ARCH_FIT_SASS, 86);  /* RTX 30xx, A10 */
    expect_fit(FAT_ARCHS, 8, 7, FERRY_ARCH_FIT_SASS, 86);  /* Orin: the highest minor <= 7 */
    expect_fit(FAT_ARCHS, 8, 9, FERRY_ARCH_FIT_SASS, 89);  /* L4, RTX 40xx */
    expect_fit(FAT_ARCHS, 9, 0, FERRY_ARCH_FIT_SASS, 90);  /* H100, H200 */
    expect_fit(FAT_ARCHS, 10, 0, FERRY_ARCH_FIT_SASS, 100); /* B200 */
    expect_fit(FAT_ARCHS, 10, 3, FERRY_ARCH_FIT_SASS, 100);
    expect_fit(FAT_ARCHS, 12, 0, FERRY_ARCH_FIT_SASS, 120); /* RTX 50xx */
    expect_fit(FAT_ARCHS, 12, 1, FERRY_ARCH_FIT_SASS, 120);
    /* sm_80 does not run on 9.0, nor sm_90 on 8.9 */
    expect_fit("sm_80", 9, 0, FERRY_ARCH_FIT_NONE, 0);
    expect_fit("sm_90", 8, 9, FERRY_ARCH_FIT_NONE, 0);
    expect_fit("sm_86", 8, 0, FERRY_ARCH_FIT_NONE, 0);
}

/* PTX is JIT-compiled for any equal or newer GPU; machine code wins when both fit. */
TEST(arch_fit_ptx_for_newer_gpus)
{
    expect_fit(FAT_ARCHS, 13, 0, FERRY_ARCH_FIT_PTX, 120);
    expect_fit("sm_90 compute_90", 10, 0, FERRY_ARCH_FIT_PTX, 90);
    expect_fit("sm_90 compute_90", 9, 0, FERRY_ARCH_FIT_SASS, 90);
    expect_fit("compute_80", 8, 0, FERRY_ARCH_FIT_PTX, 80);
    expect_fit("compute_75 compute_86", 8, 9, FERRY_ARCH_FIT_PTX, 86);
    expect_fit("sm_90 compute_90", 8, 6, FERRY_ARCH_FIT_NONE, 0);
    /* Thor (11.0) sits between sm_100 and compute_120: nothing runs there. */
    expect_fit(FAT_ARCHS, 11, 0, FERRY_ARCH_FIT_NONE, 0);
    expect_fit(FAT_ARCHS, 7, 0, FERRY_ARCH_FIT_NONE, 0); /* V100: CUDA 13 builds no sm_70 */
}

/* "a" code runs on exactly its architecture, even as PTX; "f" like the plain form. */
TEST(arch_fit_suffixes)
{
    expect_fit("sm_90a", 9, 0, FERRY_ARCH_FIT_SASS, 90);
    expect_fit("compute_90a", 10, 0, FERRY_ARCH_FIT_NONE, 0);
    expect_fit("compute_90a", 9, 0, FERRY_ARCH_FIT_PTX, 90);
    expect_fit("sm_100f", 10, 3, FERRY_ARCH_FIT_SASS, 100);
    expect_fit("sm_100f", 12, 0, FERRY_ARCH_FIT_NONE, 0);
}

/* Commas or spaces between words; anything else is no code, never a crash. */
TEST(arch_fit_odd_lists)
{
    expect_fit("sm_80,sm_90", 9, 0, FERRY_ARCH_FIT_SASS, 90);
    expect_fit("  sm_80 ,, sm_90  ", 8, 0, FERRY_ARCH_FIT_SASS, 80);
    expect_fit("80 90", 9, 0, FERRY_ARCH_FIT_NONE, 0);
    expect_fit("sm_ compute_ sm_9x0 sm_90ab smx_90 sm_123456 compute_90b", 9, 0, FERRY_ARCH_FIT_NONE, 0);
    expect_fit("", 9, 0, FERRY_ARCH_FIT_NONE, 0);
    expect_fit(NULL, 9, 0, FERRY_ARCH_FIT_NONE, 0);
    expect_fit(FAT_ARCHS, 0, 0, FERRY_ARCH_FIT_NONE, 0);
    expect_fit(FAT_ARCHS, -9, 0, FERRY_ARCH_FIT_NONE, 0);
    expect_fit(FAT_ARCHS, 8, 10, FERRY_ARCH_FIT_NONE, 0);
    expect_fit(FAT_ARCHS, 8, -1, FERRY_ARCH_FIT_NONE, 0);
    ASSERT(ferry_cuda_arch_fit(FAT_ARCHS, 9, 0, NULL) == FERRY_ARCH_FIT_SASS);
}

/* What the build records: nothing without CUDA; with it, machine code words and
 * one PTX word last, every one of which the fit check understands. On a real GPU
 * the build must cover the device it runs on (make test builds for all of them). */
TEST(build_records_its_gpu_code)
{
    const char *archs = ferry_cuda_archs();
    ASSERT(archs != NULL);
    if (!ferry_cuda_is_built()) {
        ASSERT_STR_EQ(archs, "");
        return;
    }
    const char *ptx = strstr(archs, "compute_");
    ASSERT_MSG(ptx && !strchr(ptx, ' ') && strncmp(archs, "sm_", 3) == 0,
               "ferry_cuda_archs() = \"%s\": want \"sm_XY ... compute_XY\"", archs);
    int arch = 0;
    ASSERT(ferry_cuda_arch_fit(ptx, 1, 0, &arch) == FERRY_ARCH_FIT_NONE);
    ASSERT(ferry_cuda_arch_fit(ptx, 99, 9, &arch) == FERRY_ARCH_FIT_PTX && arch > 0);
    if (!ferry_cuda_is_available() || ferry_cuda_is_simulated())
        return;
    ferry_device_props p;
    ASSERT_OK(ferry_device_properties(ferry_cuda(0), &p));
    ASSERT_MSG(ferry_cuda_arch_fit(archs, p.cc_major, p.cc_minor, &arch) != FERRY_ARCH_FIT_NONE,
               "this build (%s) has no code for cuda:0, compute capability %d.%d", archs, p.cc_major,
               p.cc_minor);
}

/* The zero ferry_device is the default device wherever one is taken, and what
 * comes back (a stream's device, a tensor's) is the resolved one. */
TEST(zero_device_is_the_default)
{
    ferry_device zero = {0}, def = ferry_device_default();
    ASSERT_EQ_INT(zero.type, FERRY_DEVICE_DEFAULT);
    ASSERT(ferry_device_eq(ferry_device_resolve(zero), def));
    ASSERT(ferry_device_eq(ferry_device_resolve(ferry_cpu()), ferry_cpu()));
    ferry_device odd = {FERRY_DEVICE_DEFAULT, 1}; /* not the zero value: not resolved */
    ASSERT(ferry_device_eq(ferry_device_resolve(odd), odd));
    ASSERT_STATUS(ferry_stream_create(odd, &(ferry_stream *){NULL}), FERRY_ERR_INVALID_ARG);
    ferry_stream *s;
    ASSERT_OK(ferry_stream_create(zero, &s));
    ASSERT(ferry_device_eq(ferry_stream_device(s), def));
    int64_t shape[1] = {3};
    ferry_tensor *t;
    ASSERT_OK(ferry_tensor_zeros(shape, 1, FERRY_DTYPE_F32, zero, &t));
    ASSERT(ferry_device_eq(ferry_tensor_device(t), def));
    void *p;
    ASSERT_OK(ferry_device_alloc(zero, 64, s, &p));
    ferry_device_free(zero, p);
    ASSERT_OK(ferry_device_synchronize(zero));
    ferry_tensor_release(t);
    ferry_stream_destroy(s);
}

/* Devices: parsing every malformed and missing device string, formatting round
 * trips, the current-device guard, properties, streams and events on the CPU,
 * ferry_memcpy, and the CUDA-only paths (skipped without a GPU). */
#include <stdlib.h>

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
    ASSERT_EQ_INT(d.index, 123); /* out untouched on failure */
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
    if (!ferry_built_with_cuda())
        ASSERT_EQ_INT(n, 0);
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
    ASSERT_OK(ferry_device_malloc(ferry_cuda(0), n, s, &dev));
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
    ferry_device_free(ferry_cuda(0), dev);
    free(host);
    free(back);
    ferry_event_destroy(a);
    ferry_event_destroy(b);
    ferry_stream_destroy(s);
    ferry_stream_destroy(s2);
}

/* ferry_device_parse("default"): the zero device, the one ferry picks where a
 * config leaves the device zero (cuda:0 with a GPU, else the CPU); it formats
 * back as "default" and resolves to ferry_device_default(). And
 * ferry_dist_config.device, a ferry_device like every other config's, is
 * that zero device by default. */
#include "ferry/dist.h"
#include "harness.h"

TEST(parse_default_is_the_zero_device)
{
    ferry_device d = ferry_cpu();
    ASSERT_OK(ferry_device_parse("default", &d));
    ASSERT_EQ_INT(d.type, FERRY_DEVICE_DEFAULT);
    ASSERT_EQ_INT(d.index, 0);
    char buf[FERRY_DEVICE_NAME_MAX];
    ASSERT_STR_EQ(ferry_device_format(d, buf, sizeof buf), "default");
    ferry_device again;
    ASSERT_OK(ferry_device_parse(buf, &again));
    ASSERT(ferry_device_eq(again, d));
}

TEST(parse_default_resolves_to_cuda_if_present_else_cpu)
{
    ferry_device d;
    ASSERT_OK(ferry_device_parse("default", &d));
    ferry_device r = ferry_device_resolve(d);
    ferry_device want = ferry_cuda_is_available() ? ferry_cuda(0) : ferry_cpu();
    ASSERT(ferry_device_eq(r, want));
    ASSERT(ferry_device_eq(r, ferry_device_default()));
    /* Usable wherever a device is taken: a tensor lands on the resolved one. */
    int64_t shape[1] = {3};
    ferry_tensor *t;
    ASSERT_OK(ferry_tensor_zeros(shape, 1, FERRY_DTYPE_F32, d, &t));
    ASSERT(ferry_device_eq(ferry_tensor_device(t), want));
    ferry_tensor_release(t);
}

TEST(parse_rejects_near_misses_of_default)
{
    const char *bad[] = {"Default", "default ", "defaults", "def", ""};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        ferry_device d;
        ASSERT_STATUS(ferry_device_parse(bad[i], &d), FERRY_ERR_INVALID_ARG);
        ASSERT_EQ_INT(d.type, FERRY_DEVICE_INVALID);
        ASSERT_STR_CONTAINS(ferry_last_error(), "\"default\"");
    }
}

TEST(dist_config_device_is_a_ferry_device)
{
    ferry_dist_config c = ferry_dist_config_default();
    ferry_device zero = {FERRY_DEVICE_DEFAULT, 0};
    ASSERT(ferry_device_eq(c.device, zero));
    ferry_device local = ferry_dist_local_cuda();
    ASSERT_EQ_INT(local.type, FERRY_DEVICE_CUDA);
    ASSERT_EQ_INT(local.index, -1);
}

/* Values that cannot work are refused where they are given, naming them, not
 * accepted to fail (or run somewhere else) later: a batch no memory holds, a
 * normalisation std below 0 or not finite, and the device a failed
 * ferry_device_parse leaves, which every call taking a device refuses. */
#include <math.h>

#include "harness.h"

static uint8_t pixels[10 * 784];
static int64_t labels[10];

static ferry_dataset *ds784(void)
{
    ferry_sample_format f = {1, 28, 28, FERRY_LAYOUT_CHW, FERRY_DTYPE_U8};
    ferry_dataset *ds;
    ASSERT_OK(ferry_dataset_memory(pixels, &f, 10, labels, &ds));
    return ds;
}

static ferry_status create(ferry_loader_config c)
{
    ferry_loader *l = NULL;
    ferry_status st = ferry_loader_create(&c, &l);
    ferry_loader_destroy(l);
    return st;
}

TEST(a_batch_no_memory_holds_is_refused_naming_batch_size)
{
    ferry_dataset *ds = ds784();
    ferry_loader_config c = {.dataset = ds, .device = ferry_cpu()};
    c.batch_size = (size_t)1000000000000; /* 10^12 x (784 image + 8 label bytes) */
    ASSERT_STATUS(create(c), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "batch_size 1000000000000: a batch of 792-byte samples "
                                            "needs more memory than this machine has");
    c.batch_size = (size_t)-1; /* its bytes overflow */
    ASSERT_STATUS(create(c), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "batch_size");
    c.batch_size = 1000; /* more than the dataset, fits: one batch of all 10 */
    ferry_loader *l;
    ASSERT_OK(ferry_loader_create(&c, &l));
    ferry_batch b;
    ASSERT_OK(ferry_loader_next(l, NULL, &b));
    ASSERT_EQ_SIZE(b.size, 10);
    ferry_loader_destroy(l);
    ferry_dataset_release(ds);
}

TEST(a_std_below_zero_or_not_finite_is_refused)
{
    ferry_dataset *ds = ds784();
    ferry_loader_config c = {.dataset = ds, .device = ferry_cpu()};
    c.std[0] = -1;
    ASSERT_STATUS(create(c), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "std[0] = -1");
    ASSERT_STR_CONTAINS(ferry_last_error(), "finite and > 0");
    c.std[0] = INFINITY;
    ASSERT_STATUS(create(c), FERRY_ERR_INVALID_ARG);
    c.std[0] = 0.5f;
    c.mean[2] = -INFINITY;
    ASSERT_STATUS(create(c), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "mean[2] = -inf");
    c.mean[2] = 0;
    c.std[1] = 0; /* the default, 1 */
    ASSERT_OK(create(c));
    ferry_dataset_release(ds);
}

/* "cuda:1000" fails with or without a GPU (real or simulated); "gpu" is malformed. */
TEST(a_failed_parse_leaves_a_device_every_call_refuses)
{
    static const char *const bad[] = {"cuda:1000", "gpu", "cuda:", NULL};
    for (size_t k = 0; bad[k]; k++) {
        ferry_device d = ferry_cpu();
        ASSERT(ferry_device_parse(bad[k], &d) != FERRY_OK);
        ASSERT_EQ_INT(d.type, FERRY_DEVICE_INVALID);
        ASSERT(!ferry_device_eq(d, (ferry_device){0})); /* not the default device */
        char name[FERRY_DEVICE_NAME_MAX];
        ASSERT_STR_EQ(ferry_device_format(d, name, sizeof name), "invalid");
        ferry_dataset *ds = ds784();
        ferry_loader_config c = {.dataset = ds, .device = d};
        ASSERT_STATUS(create(c), FERRY_ERR_INVALID_ARG);
        ASSERT_STR_CONTAINS(ferry_last_error(), "failed ferry_device_parse");
        ferry_dataset_release(ds);
        int64_t shape[1] = {4};
        ferry_tensor *t = NULL;
        ASSERT_STATUS(ferry_tensor_empty(shape, 1, FERRY_DTYPE_F32, d, &t), FERRY_ERR_INVALID_ARG);
        ASSERT(t == NULL);
        ferry_stream *s = NULL;
        ASSERT_STATUS(ferry_stream_create(d, &s), FERRY_ERR_INVALID_ARG);
        ASSERT_STATUS(ferry_device_synchronize(d), FERRY_ERR_INVALID_ARG);
    }
    ferry_device d;
    ASSERT_OK(ferry_device_parse("cpu", &d));
    ASSERT(ferry_device_eq(d, ferry_cpu()));
}

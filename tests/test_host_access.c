/* Reading a batch on the host: ferry_tensor_host_data gives a CPU tensor's
 * data and refuses a GPU tensor's by name (run it with FERRY_SIM_GPUS=2 for
 * the GPU half: there a device pointer read on the host gives label -1 and
 * NaN, a real GPU crashes), and the copy it asks for reads the right labels. */
#include "harness.h"

static uint8_t pixels[6 * 4];
static const int64_t labels[6] = {5, 4, 3, 2, 1, 0};

static ferry_loader *loader_on(ferry_device d)
{
    ferry_sample_format f = {1, 2, 2, FERRY_LAYOUT_CHW, FERRY_DTYPE_U8};
    ferry_dataset *ds;
    ASSERT_OK(ferry_dataset_memory(pixels, &f, 6, labels, &ds));
    ferry_loader_config c = {.dataset = ds, .batch_size = 6, .device = d,
                             .num_workers = FERRY_LOADER_NO_WORKERS};
    ferry_loader *l;
    ASSERT_OK(ferry_loader_create(&c, &l));
    ferry_dataset_release(ds);
    return l;
}

TEST(host_data_of_a_cpu_batch_is_its_data)
{
    ferry_loader *l = loader_on(ferry_cpu());
    ferry_batch b;
    ASSERT_OK(ferry_loader_next(l, NULL, &b));
    void *p = NULL;
    ASSERT_OK(ferry_tensor_host_data(b.labels, &p));
    ASSERT(p == ferry_tensor_data(b.labels));
    for (size_t i = 0; i < 6; i++)
        ASSERT_EQ_INT(((const int64_t *)p)[i], labels[i]);
    ASSERT_STATUS(ferry_tensor_host_data(NULL, &p), FERRY_ERR_INVALID_ARG);
    ASSERT(p == NULL);
    ASSERT_STATUS(ferry_tensor_host_data(b.labels, NULL), FERRY_ERR_INVALID_ARG);
    ferry_loader_destroy(l);
}

TEST(host_data_of_a_gpu_batch_is_refused_naming_the_device)
{
    if (ferry_cuda_device_count() < 1)
        SKIP("no CUDA device (FERRY_SIM_GPUS=2 simulates one)");
    ferry_loader *l = loader_on(ferry_cuda(0));
    ferry_batch b;
    ASSERT_OK(ferry_loader_next(l, NULL, &b));
    void *p = (void *)1;
    ASSERT_STATUS(ferry_tensor_host_data(b.labels, &p), FERRY_ERR_INVALID_ARG);
    ASSERT(p == NULL);
    ASSERT_STR_CONTAINS(ferry_last_error(), "the tensor is on cuda:0: its data is device memory");
    ASSERT_STR_CONTAINS(ferry_last_error(), "ferry_tensor_to(t, ferry_cpu(), false, &host)");
    ASSERT_STATUS(ferry_tensor_host_data(b.images, &p), FERRY_ERR_INVALID_ARG);
    /* The copy it asks for reads the labels the dataset holds. */
    ferry_tensor *host;
    ASSERT_OK(ferry_tensor_to(b.labels, ferry_cpu(), false, &host));
    ASSERT_OK(ferry_tensor_host_data(host, &p));
    for (size_t i = 0; i < 6; i++)
        ASSERT_EQ_INT(((const int64_t *)p)[i], labels[i]);
    ferry_tensor_release(host);
    ferry_loader_destroy(l);
}

/* A checkpoint keeps the metrics' running sums of the epoch under way, exactly:
 * a run resumed mid-epoch reports the whole epoch's loss and accuracy, as the
 * uninterrupted run does (the samples' rows; scripts/resume-test.sh). */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ferry/nn.h"
#include "ferry/ops.h"

/* Adds a batch of 5 rows x 3 classes to m, on device d (seeded logits). */
static void add_batch(ferry_metrics *m, ferry_device d, uint64_t seed)
{
    int64_t shape[2] = {5, 3}, n = 5;
    const int64_t labels[5] = {0, 2, 1, 1, 0};
    ferry_tensor *logits = NULL, *y = NULL;
    ASSERT_OK(ferry_tensor_randn(shape, 2, FERRY_DTYPE_F32, d, seed, &logits));
    ASSERT_OK(ferry_tensor_from_host(labels, &n, 1, FERRY_DTYPE_I64, d, &y));
    ASSERT_OK(ferry_cross_entropy(logits, y, 1.0f, m, NULL, NULL));
    ferry_tensor_release(logits);
    ferry_tensor_release(y);
}

static ferry_module *one_linear(ferry_device d)
{
    ferry_module *m = NULL;
    ASSERT_OK(ferry_linear_create(3, 2, true, &m));
    ASSERT_OK(ferry_module_init(m, 1));
    ASSERT_OK(ferry_module_to(m, d));
    return m;
}

/* Save after two batches, load into fresh metrics, add a third to both: the
 * same loss (to the bit), accuracy and count. */
static void round_trip(ferry_device d)
{
    ferry_module *net = one_linear(d);
    ferry_metrics *a = NULL, *b = NULL;
    ASSERT_OK(ferry_metrics_create(d, &a));
    ASSERT_OK(ferry_metrics_create(d, &b));
    add_batch(a, d, 1);
    add_batch(a, d, 2);
    const char *path = ft_tmp("metrics.safetensors");
    ASSERT_OK(ferry_checkpoint_save(path, &(ferry_checkpoint){.module = net, .metrics = a}));
    ASSERT_OK(ferry_checkpoint_load(path, &(ferry_checkpoint){.module = net, .metrics = b}));
    double la, lb, aa, ab;
    int64_t na, nb;
    ASSERT_OK(ferry_metrics_get(a, &la, &aa, &na));
    ASSERT_OK(ferry_metrics_get(b, &lb, &ab, &nb));
    ASSERT_EQ_INT(nb, 10);
    ASSERT_EQ_INT(na, nb);
    ASSERT(la == lb && aa == ab);
    add_batch(a, d, 3);
    add_batch(b, d, 3);
    ASSERT_OK(ferry_metrics_get(a, &la, &aa, &na));
    ASSERT_OK(ferry_metrics_get(b, &lb, &ab, &nb));
    ASSERT_EQ_INT(nb, 15);
    ASSERT_MSG(la == lb && aa == ab, "loss %.9g vs %.9g, accuracy %.9g vs %.9g", la, lb, aa, ab);
    ferry_metrics_destroy(a);
    ferry_metrics_destroy(b);
    ferry_module_destroy(net);
}

TEST(checkpoint_metrics_round_trip_cpu) { round_trip(ferry_cpu()); }

TEST(checkpoint_metrics_round_trip_gpu)
{
    ft_require_cuda();
    round_trip(ferry_cuda(0));
}

static int warnings;
static char warned[1024];

static void count_warning(ferry_log_level level, const char *msg, void *user)
{
    (void)user;
    if (level >= FERRY_LOG_WARN) {
        warnings++;
        snprintf(warned, sizeof warned, "%s", msg);
    }
}

/* A checkpoint saved without metrics loads: the metrics stay as they were,
 * with a warning that the resumed epoch's figures are partial. */
TEST(checkpoint_without_metrics_warns)
{
    ferry_device d = ferry_cpu();
    ferry_module *net = one_linear(d);
    ferry_metrics *m = NULL;
    ASSERT_OK(ferry_metrics_create(d, &m));
    add_batch(m, d, 4);
    const char *path = ft_tmp("nometrics.safetensors");
    ASSERT_OK(ferry_checkpoint_save(path, &(ferry_checkpoint){.module = net}));
    warnings = 0;
    ferry_set_log(count_warning, NULL);
    ferry_status st = ferry_checkpoint_load(path, &(ferry_checkpoint){.module = net, .metrics = m});
    ferry_set_log(NULL, NULL);
    ASSERT_OK(st);
    ASSERT_EQ_INT(warnings, 1);
    ASSERT_STR_CONTAINS(warned, "holds no metrics");
    int64_t n = 0;
    ASSERT_OK(ferry_metrics_get(m, NULL, NULL, &n));
    ASSERT_EQ_INT(n, 5);
    ferry_metrics_destroy(m);
    ferry_module_destroy(net);
}

/* Metrics text that does not parse is FERRY_ERR_FORMAT naming the file, and
 * nothing is changed (the module's weights included). */
TEST(checkpoint_bad_metrics_refused)
{
    ferry_device d = ferry_cpu();
    ferry_module *net = one_linear(d);
    const char *path = ft_tmp("badmetrics.safetensors");
    size_t np = ferry_module_param_count(net);
    ASSERT(np == 2);
    ferry_tensor *params[2];
    const char *names[2];
    for (size_t i = 0; i < np; i++) {
        ferry_param p;
        ASSERT_OK(ferry_module_param(net, i, &p));
        names[i] = p.name;
        params[i] = p.value;
    }
    const char *kv[2][4] = {
        {"format", "ferry", "metrics", "ferry-metrics/1 loss=zz correct=1"},
        {"format", "ferry", "metrics", "ferry-metrics/1 loss=00000000 correct=9 bad=0 count=5 "
                                       "classified=5 bad_seen=0"}, /* more correct than seen */
    };
    for (int k = 0; k < 2; k++) {
        ASSERT_OK(ferry_safetensors_save(path, names, params, np, kv[k], 2));
        ferry_metrics *m = NULL;
        ASSERT_OK(ferry_metrics_create(d, &m));
        add_batch(m, d, 5);
        ASSERT_STATUS(ferry_checkpoint_load(path, &(ferry_checkpoint){.module = net, .metrics = m}),
                      FERRY_ERR_FORMAT);
        ASSERT_STR_CONTAINS(ferry_last_error(), "badmetrics.safetensors");
        int64_t n = 0;
        ASSERT_OK(ferry_metrics_get(m, NULL, NULL, &n));
        ASSERT_EQ_INT(n, 5);
        ferry_metrics_destroy(m);
    }
    ferry_module_destroy(net);
}

/* Device out-of-memory in the middle of training. The allocator's test hook
 * (ferry_debug_fail_device_alloc_after) fails one device allocation of a step at
 * a time, for every allocation the step makes: in the forward, the loss, the
 * backward and the optimiser's first step. Each attempt must come back as
 * FERRY_ERR_DEVICE_OOM with the allocator's own message, change no parameter,
 * keep no tensor alive, and leave a model that trains on with half the batch.
 * The same runs on CUDA when a GPU is present. */
#include <stdlib.h>

#include "harness.h"
#include "ferry/nn.h"
#include "common/error.h" /* the allocation test hooks */

enum { IN = 16, HIDDEN = 32, CLASSES = 4, B = 32 };
enum { NPARAMS = IN * HIDDEN + HIDDEN + HIDDEN * CLASSES + CLASSES };

/* Counting, not failing: a countdown this long never reaches 1 in a test. */
#define COUNT_ONLY ((int64_t)1 << 40)

static ferry_memory_stats stats(ferry_device d)
{
    ferry_memory_stats s;
    ASSERT_OK(ferry_memory_stats_get(d, &s));
    return s;
}

static size_t allocated(ferry_device d) { return stats(d).allocated_bytes; }

static ferry_module *mlp(ferry_device dev)
{
    ferry_module *seq = NULL, *l = NULL;
    ASSERT_OK(ferry_sequential_create(&seq));
    ASSERT_OK(ferry_linear_create(IN, HIDDEN, true, &l)); ASSERT_OK(ferry_sequential_add(seq, l));
    ASSERT_OK(ferry_relu_create(&l)); ASSERT_OK(ferry_sequential_add(seq, l));
    ASSERT_OK(ferry_linear_create(HIDDEN, CLASSES, true, &l)); ASSERT_OK(ferry_sequential_add(seq, l));
    ASSERT_OK(ferry_module_init(seq, 7));
    ASSERT_OK(ferry_module_to(seq, dev));
    return seq;
}

/* The first `rows` samples of a fixed synthetic set: x uniform in [-1, 1), the
 * class from the signs of x[0] and x[1], so an MLP can learn it. */
static void batch(ferry_device dev, int64_t rows, ferry_tensor **x, ferry_tensor **y)
{
    static float xs[B * IN];
    static int64_t ys[B];
    uint32_t r = 12345;
    for (int i = 0; i < B * IN; i++) {
        r = r * 1664525u + 1013904223u;
        xs[i] = (float)(r >> 8) / (float)(1u << 24) * 2.0f - 1.0f;
    }
    for (int i = 0; i < B; i++)
        ys[i] = (xs[i * IN] > 0) + 2 * (xs[i * IN + 1] > 0);
    int64_t shape[2] = {rows, IN};
    ASSERT_OK(ferry_tensor_from_host(xs, shape, 2, FERRY_DTYPE_F32, dev, x));
    ASSERT_OK(ferry_tensor_from_host(ys, &rows, 1, FERRY_DTYPE_I64, dev, y));
}

/* Every parameter, in order, copied to the host (works for any device). */
static void snapshot(ferry_module *net, float *out)
{
    size_t at = 0;
    for (size_t i = 0; i < ferry_module_param_count(net); i++) {
        ferry_param p;
        ASSERT_OK(ferry_module_param(net, i, &p));
        size_t n = (size_t)ferry_tensor_numel(p.value);
        ASSERT(at + n <= NPARAMS);
        ASSERT_OK(ferry_tensor_copy_to_host(p.value, out + at, n * sizeof *out));
        at += n;
    }
    ASSERT_EQ_SIZE(at, NPARAMS);
}

static double train(ferry_module *net, ferry_optim *opt, ferry_metrics *mt, ferry_tensor *x, ferry_tensor *y)
{
    double loss = 0;
    ASSERT_OK(ferry_metrics_reset(mt, NULL));
    ASSERT_OK(ferry_train_step(net, opt, NULL, x, y, mt, NULL));
    ASSERT_OK(ferry_metrics_get(mt, &loss, NULL, NULL));
    ASSERT_MSG(isfinite(loss), "loss %g", loss);
    return loss;
}

/* The step of ferry_train_step by hand, counting the device allocations of each
 * part with the hook armed far away: zero_grad, forward, loss, backward, optimiser. */
enum { P_ZERO, P_FORWARD, P_LOSS, P_BACKWARD, P_OPTIM, NPHASE };
static const char *const phase_names[NPHASE] = {"zero_grad", "forward", "loss", "backward", "optimiser"};

static int64_t counted_since_armed(void) { return COUNT_ONLY - ferry_debug_fail_device_alloc_after(COUNT_ONLY); }

static void count_phases(ferry_module *net, ferry_optim *opt, ferry_tensor *x, ferry_tensor *y, int64_t *n)
{
    ferry_tensor *logits = NULL, *dlogits = NULL;
    ferry_debug_fail_device_alloc_after(COUNT_ONLY);
    ASSERT_OK(ferry_module_zero_grad(net, NULL));
    n[P_ZERO] = counted_since_armed();
    ASSERT_OK(ferry_module_forward(net, x, NULL, &logits));
    n[P_FORWARD] = counted_since_armed();
    ASSERT_OK(ferry_cross_entropy(logits, y, 1.0f, NULL, NULL, &dlogits));
    ferry_tensor_release(logits);
    n[P_LOSS] = counted_since_armed();
    ASSERT_OK(ferry_module_backward(net, dlogits, NULL, NULL));
    ferry_tensor_release(dlogits);
    n[P_BACKWARD] = counted_since_armed();
    ASSERT_OK(ferry_optim_step(opt, NULL));
    n[P_OPTIM] = counted_since_armed();
    ferry_debug_fail_device_alloc_after(0);
}

static void check_oom(ferry_status st, int64_t k, const char *where)
{
    ASSERT_MSG(st == FERRY_ERR_DEVICE_OOM, "%s, allocation %lld: got %s (%s)", where, (long long)k,
               ferry_status_str(st), ferry_last_error());
    /* The allocator's real message, not a stand-in. */
    ASSERT_STR_CONTAINS(ferry_last_error(), "out of memory on ");
    ASSERT_STR_CONTAINS(ferry_last_error(), "its cache was emptied and the allocation retried");
}

static void oom_during_training(ferry_device dev)
{
    size_t at_start = allocated(dev);
    ferry_module *net = mlp(dev);
    ferry_optim *opt = NULL;
    ASSERT_OK(ferry_sgd_create(net, 0.1, 0.9, 0.0, &opt));
    ferry_metrics *mt = NULL;
    ASSERT_OK(ferry_metrics_create(dev, &mt));
    ferry_tensor *x = NULL, *y = NULL, *xh = NULL, *yh = NULL;
    batch(dev, B, &x, &y);
    batch(dev, B / 2, &xh, &yh);

    /* Warm up with both sizes, so the optimiser has its state and every layer
     * its buffers; then what a successful half-batch step leaves held is fixed. */
    train(net, opt, mt, x, y);
    train(net, opt, mt, xh, yh);
    train(net, opt, mt, xh, yh);
    size_t held_half = allocated(dev);
    /* A full batch after a half one re-sizes every buffer: allocations in each part. */
    int64_t n[NPHASE], total = 0;
    count_phases(net, opt, x, y, n);
    for (int p = 0; p < NPHASE; p++)
        total += n[p];
    ASSERT_MSG(n[P_FORWARD] > 0 && n[P_LOSS] > 0 && n[P_BACKWARD] > 0,
               "device allocations: forward %lld, loss %lld, backward %lld", (long long)n[P_FORWARD],
               (long long)n[P_LOSS], (long long)n[P_BACKWARD]);
    train(net, opt, mt, xh, yh);
    ASSERT_EQ_SIZE(allocated(dev), held_half);

    float before[NPARAMS], after[NPARAMS];
    int hits[NPHASE] = {0};
    for (int64_t k = 1;; k++) {
        snapshot(net, before);
        int64_t steps = ferry_optim_step_count(opt);
        uint64_t retries = stats(dev).oom_retries;
        ASSERT_EQ_INT(ferry_debug_fail_device_alloc_after(k), 0);
        ferry_status st = ferry_train_step(net, opt, NULL, x, y, NULL, NULL);
        bool fired = ferry_debug_fail_device_alloc_after(0) == 0;
        if (k > total) {
            /* One past the last allocation: the step runs whole, so the count was
             * exact and every allocation above really was failed. */
            ASSERT_MSG(!fired, "the step made more than the %lld device allocations counted", (long long)total);
            ASSERT_OK(st);
            break;
        }
        ASSERT_MSG(fired, "allocation %lld of %lld never came", (long long)k, (long long)total);
        check_oom(st, k, "ferry_train_step");
        ASSERT_EQ_INT(stats(dev).oom_retries, retries + 1);
        snapshot(net, after);
        ASSERT_MEM_EQ(before, after, sizeof before);
        ASSERT_EQ_INT(ferry_optim_step_count(opt), steps);
        int64_t end = 0;
        for (int p = 0; p < NPHASE; p++)
            if (k <= (end += n[p])) {
                hits[p]++;
                break;
            }
        /* The same step with half the batch goes through, and leaves exactly what
         * such a step always leaves: the failed one kept no tensor alive. */
        train(net, opt, mt, xh, yh);
        ASSERT_MSG(allocated(dev) == held_half, "after failing allocation %lld: %zu bytes held, %zu expected",
                   (long long)k, allocated(dev), held_half);
    }
    for (int p = 0; p < NPHASE; p++)
        ASSERT_MSG(hits[p] == n[p], "%s: %d failures for %lld allocations", phase_names[p], hits[p],
                   (long long)n[p]);
    printf("  %s: failed each of a step's %lld device allocations (forward %lld, loss %lld, backward %lld)\n",
           dev.type == FERRY_DEVICE_CPU ? "cpu" : "cuda", (long long)total, (long long)n[P_FORWARD],
           (long long)n[P_LOSS], (long long)n[P_BACKWARD]);

    /* A new optimiser makes its state on its first step: fail each of those. */
    ferry_tensor *logits = NULL, *dlogits = NULL;
    ASSERT_OK(ferry_module_zero_grad(net, NULL));
    ASSERT_OK(ferry_module_forward(net, xh, NULL, &logits));
    ASSERT_OK(ferry_cross_entropy(logits, yh, 1.0f, NULL, NULL, &dlogits));
    ASSERT_OK(ferry_module_backward(net, dlogits, NULL, NULL));
    ferry_tensor_release(logits);
    ferry_tensor_release(dlogits);
    size_t held = allocated(dev);
    int64_t failed = 0;
    for (int64_t k = 1;; k++) {
        ferry_optim *adam = NULL;
        ASSERT_OK(ferry_adam_create(net, 1e-3, 0.9, 0.999, 1e-8, 0.0, &adam));
        snapshot(net, before);
        ASSERT_EQ_INT(ferry_debug_fail_device_alloc_after(k), 0);
        ferry_status st = ferry_optim_step(adam, NULL);
        bool fired = ferry_debug_fail_device_alloc_after(0) == 0;
        if (!fired) {
            ASSERT_OK(st);
            ASSERT_EQ_INT(ferry_optim_step_count(adam), 1);
            ferry_optim_destroy(adam);
            break;
        }
        check_oom(st, k, "ferry_optim_step");
        snapshot(net, after);
        ASSERT_MEM_EQ(before, after, sizeof before);
        ASSERT_EQ_INT(ferry_optim_step_count(adam), 0);
        ferry_optim_destroy(adam);
        ASSERT_EQ_SIZE(allocated(dev), held);
        failed++;
    }
    /* Adam keeps two moments per parameter tensor (4 tensors here), and its
     * per-step bias corrections in one small buffer, all made at the first step. */
    ASSERT_EQ_INT(failed, 2 * (int64_t)ferry_module_param_count(net) + 1);

    /* And the model still learns: the half batch's loss keeps falling. */
    double first = train(net, opt, mt, xh, yh), last = first;
    for (int i = 0; i < 30; i++)
        last = train(net, opt, mt, xh, yh);
    ASSERT_MSG(last < 0.9 * first, "loss %g after 30 more steps (was %g)", last, first);

    ferry_tensor_release(x); ferry_tensor_release(y);
    ferry_tensor_release(xh); ferry_tensor_release(yh);
    ferry_metrics_destroy(mt);
    ferry_optim_destroy(opt);
    ferry_module_destroy(net);
    /* The idle cuBLAS handles keep a workspace each (one per handle and stream,
     * issue 41), a cache as the handles are: emptying the cache returns them. */
    ASSERT_OK(ferry_memory_empty_cache(dev));
    ASSERT_EQ_SIZE(allocated(dev), at_start);
}

TEST(device_alloc_hook_fails_like_a_full_device)
{
    ferry_device d = ferry_cpu();
    void *p = NULL, *q = NULL;
    ASSERT_OK(ferry_device_alloc(d, 4096, NULL, &p));
    ferry_device_free(d, p); /* cached now */
    ferry_memory_stats s0 = stats(d);
    ASSERT_EQ_INT(ferry_debug_fail_device_alloc_after(2), 0);
    ASSERT_OK(ferry_device_alloc(d, 4096, NULL, &p)); /* the first: from the cache */
    q = &q;
    ASSERT_STATUS(ferry_device_alloc(d, 4096, NULL, &q), FERRY_ERR_DEVICE_OOM);
    ASSERT(q == NULL);
    ASSERT_STR_CONTAINS(ferry_last_error(), "out of memory on cpu allocating 4.00 KiB");
    ASSERT_STR_CONTAINS(ferry_last_error(), "its cache was emptied and the allocation retried");
    ASSERT_EQ_INT(ferry_debug_fail_device_alloc_after(0), 0); /* used up */
    ferry_memory_stats s1 = stats(d);
    ASSERT_EQ_INT(s1.oom_retries, s0.oom_retries + 1);
    ASSERT_EQ_SIZE(s1.allocated_bytes, s0.allocated_bytes + 4096);
    ASSERT_EQ_SIZE(s1.reserved_bytes, s1.allocated_bytes); /* the cache was emptied */
    ASSERT_OK(ferry_device_alloc(d, 4096, NULL, &q)); /* one failure only */
    ferry_device_free(d, p);
    ferry_device_free(d, q);
    ASSERT_EQ_SIZE(stats(d).allocated_bytes, s0.allocated_bytes);
    /* Zero bytes allocate nothing, so they do not count. */
    ferry_debug_fail_device_alloc_after(1);
    ASSERT_OK(ferry_device_alloc(d, 0, NULL, &p));
    ASSERT(p == NULL);
    ASSERT_EQ_INT(ferry_debug_fail_device_alloc_after(0), 1);
}

TEST(oom_during_training_cpu) { oom_during_training(ferry_cpu()); }

TEST(oom_during_training_cuda)
{
    ft_require_cuda();
    oom_during_training(ferry_cuda(0));
}

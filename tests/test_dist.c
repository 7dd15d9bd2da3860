/* Distributed training: the gradient hook, collectives against values every rank
 * can compute, argument errors, and data-parallel training against one process
 * on the union of the ranks' batches. Runs as a world of one when started
 * directly; scripts/dist-test.sh runs it again under mpirun -np 2. */
#include <stdlib.h>

#include "common/error.h"
#include "harness.h"

#if FERRY_HAVE_MPI
/* Open MPI keeps allocations past MPI_Finalize, from plugins it has unloaded by
 * then, which LSan can neither free nor name. Leak checking is off here; the
 * data-parallel tests count ferry's own live allocations instead. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "detect_leaks=0"; }
#endif

/* ---- the gradient hook (no MPI needed) ---- */

typedef struct hook_log {
    size_t first[16], count[16], n;
} hook_log;

static ferry_status record(void *ctx, ferry_module *m, size_t first, size_t count, ferry_stream *s)
{
    (void)m, (void)s;
    hook_log *h = ctx;
    if (h->n < 16) {
        h->first[h->n] = first;
        h->count[h->n] = count;
    }
    h->n++;
    return FERRY_OK;
}

static ferry_status refuse(void *ctx, ferry_module *m, size_t first, size_t count, ferry_stream *s)
{
    (void)ctx, (void)m, (void)first, (void)count, (void)s;
    return ferry_set_error(FERRY_ERR_DIST, "hook says no");
}

/* Linear(6, 5) ReLU Linear(5, 3): params 0.weight 0.bias 2.weight 2.bias. */
static ferry_module *small_mlp(uint64_t seed)
{
    ferry_module *net, *l;
    ASSERT_OK(ferry_sequential_create(&net));
    ASSERT_OK(ferry_linear_create(6, 5, true, &l));
    ASSERT_OK(ferry_sequential_add(net, l));
    ASSERT_OK(ferry_relu_create(&l));
    ASSERT_OK(ferry_sequential_add(net, l));
    ASSERT_OK(ferry_linear_create(5, 3, true, &l));
    ASSERT_OK(ferry_sequential_add(net, l));
    ASSERT_OK(ferry_module_init(net, seed));
    return net;
}

static void batch(int64_t rows, int64_t first_row, ferry_tensor **x, ferry_tensor **y)
{
    int64_t xs[2] = {rows, 6}, ys[1] = {rows};
    float xv[64 * 6];
    int64_t yv[64];
    ASSERT(rows <= 64);
    for (int64_t i = 0; i < rows; i++) {
        int64_t g = first_row + i; /* a pure function of the global row */
        for (int64_t j = 0; j < 6; j++)
            xv[i * 6 + j] = (float)((g * 7 + j * 3) % 11) / 11.0f - 0.4f;
        yv[i] = (g * 5) % 3;
    }
    ASSERT_OK(ferry_tensor_from_host(xv, xs, 2, FERRY_DTYPE_F32, ferry_cpu(), x));
    ASSERT_OK(ferry_tensor_from_host(yv, ys, 1, FERRY_DTYPE_I64, ferry_cpu(), y));
}

TEST(grad_hook_reports_each_layer_last_first)
{
    ferry_module *net = small_mlp(1);
    hook_log h = {0};
    ASSERT_OK(ferry_module_set_grad_hook(net, record, &h));
    ferry_tensor *x, *y, *out, *dy;
    batch(4, 0, &x, &y);
    ASSERT_OK(ferry_module_forward(net, x, NULL, &out));
    ASSERT_OK(ferry_cross_entropy(out, y, 1.0f, NULL, NULL, &dy));
    ASSERT_OK(ferry_module_backward(net, dy, NULL, NULL));
    /* Children last first: Linear(5,3) = params [2, 4), ReLU none, Linear(6,5) = [0, 2). */
    ASSERT_EQ_SIZE(h.n, 3);
    ASSERT_EQ_SIZE(h.first[0], 2);
    ASSERT_EQ_SIZE(h.count[0], 2);
    ASSERT_EQ_SIZE(h.count[1], 0);
    ASSERT_EQ_SIZE(h.first[2], 0);
    ASSERT_EQ_SIZE(h.count[2], 2);

    /* A failing hook fails backward with its status and message. */
    ferry_tensor_release(out);
    ASSERT_OK(ferry_module_set_grad_hook(net, refuse, NULL));
    ASSERT_OK(ferry_module_forward(net, x, NULL, &out));
    ASSERT_STATUS(ferry_module_backward(net, dy, NULL, NULL), FERRY_ERR_DIST);
    ASSERT_STR_CONTAINS(ferry_last_error(), "hook says no");
    /* Removed, backward works again. */
    ASSERT_OK(ferry_module_set_grad_hook(net, NULL, NULL));
    ferry_tensor_release(out);
    ASSERT_OK(ferry_module_forward(net, x, NULL, &out));
    ASSERT_OK(ferry_module_backward(net, dy, NULL, NULL));
    ASSERT_STATUS(ferry_module_set_grad_hook(NULL, record, &h), FERRY_ERR_INVALID_ARG);

    /* A single layer reports once, everything. */
    ferry_module *lin;
    ASSERT_OK(ferry_linear_create(6, 3, true, &lin));
    hook_log h1 = {0};
    ASSERT_OK(ferry_module_set_grad_hook(lin, record, &h1));
    ferry_tensor *o2, *d2;
    ASSERT_OK(ferry_module_forward(lin, x, NULL, &o2));
    ASSERT_OK(ferry_cross_entropy(o2, y, 1.0f, NULL, NULL, &d2));
    ASSERT_OK(ferry_module_backward(lin, d2, NULL, NULL));
    ASSERT_EQ_SIZE(h1.n, 1);
    ASSERT_EQ_SIZE(h1.first[0], 0);
    ASSERT_EQ_SIZE(h1.count[0], 2);
    ferry_tensor_release(o2);
    ferry_tensor_release(d2);
    ferry_module_destroy(lin);
    ferry_tensor_release(out);
    ferry_tensor_release(dy);
    ferry_tensor_release(x);
    ferry_tensor_release(y);
    ferry_module_destroy(net);
}

/* ---- MPI ---- */

/* One ferry_dist for the whole program: MPI starts once per process. */
static ferry_dist *the_dist;

static void finalize_at_exit(void) { ferry_dist_destroy(the_dist); }

static ferry_dist *dist(void)
{
    if (!ferry_dist_mpi_is_built()) {
        ferry_dist *d = (ferry_dist *)1;
        ASSERT_STATUS(ferry_dist_create(NULL, &d), FERRY_ERR_UNSUPPORTED);
        ASSERT(d == NULL);
        ASSERT_STR_CONTAINS(ferry_last_error(), "no MPI");
        SKIP("built without MPI (DIST=0)");
    }
    if (!the_dist) {
        ferry_dist_config c = ferry_dist_config_default();
        c.device = ferry_cpu();
        c.timeout_s = 60;
        ASSERT_OK(ferry_dist_create(&c, &the_dist));
        atexit(finalize_at_exit);
    }
    return the_dist;
}

TEST(init_reads_the_world)
{
    ferry_dist *d = dist();
    int r = ferry_dist_rank(d), w = ferry_dist_world_size(d);
    ASSERT(w >= 1);
    ASSERT(r >= 0 && r < w);
    ASSERT(ferry_dist_local_rank(d) >= 0 && ferry_dist_local_rank(d) < w);
    ASSERT(ferry_device_eq(ferry_dist_device(d), ferry_cpu()));
    ASSERT_STR_CONTAINS(ferry_dist_backend(d), "MPI");
    /* The launcher's own numbering agrees (Open MPI exports it under mpirun). */
    const char *env = getenv("OMPI_COMM_WORLD_RANK");
    if (env)
        ASSERT_EQ_INT(atoi(env), r);
    ASSERT_OK(ferry_dist_barrier(d));
}

TEST(all_reduce_matches_the_formula)
{
    ferry_dist *d = dist();
    int r = ferry_dist_rank(d), w = ferry_dist_world_size(d);
    enum { N = 1000 };
    static float v[N];
    for (int i = 0; i < N; i++)
        v[i] = (float)(i % 17) * 0.5f + (float)r; /* exact in f32 */
    int64_t shape[1] = {N};
    ferry_tensor *t;
    const ferry_reduce_op ops[4] = {FERRY_REDUCE_SUM, FERRY_REDUCE_AVG, FERRY_REDUCE_MIN, FERRY_REDUCE_MAX};
    for (int k = 0; k < 4; k++) {
        ASSERT_OK(ferry_tensor_from_host(v, shape, 1, FERRY_DTYPE_F32, ferry_cpu(), &t));
        ASSERT_OK(ferry_dist_all_reduce(d, t, ops[k], NULL));
        const float *o = ferry_tensor_data(t);
        for (int i = 0; i < N; i++) {
            double base = (double)(i % 17) * 0.5, want;
            switch (ops[k]) {
            case FERRY_REDUCE_SUM: want = base * w + w * (w - 1) / 2.0; break;
            case FERRY_REDUCE_AVG: want = base + (w - 1) / 2.0; break;
            case FERRY_REDUCE_MIN: want = base; break;
            default: want = base + w - 1; break;
            }
            ASSERT_NEAR(o[i], want, 1e-5);
        }
        ferry_tensor_release(t);
    }
    /* Integers. */
    int64_t iv[3] = {r, 10 * r, -r};
    int64_t s3[1] = {3};
    ASSERT_OK(ferry_tensor_from_host(iv, s3, 1, FERRY_DTYPE_I64, ferry_cpu(), &t));
    ASSERT_OK(ferry_dist_all_reduce(d, t, FERRY_REDUCE_SUM, NULL));
    const int64_t *io = ferry_tensor_data(t);
    ASSERT_EQ_INT(io[0], (int64_t)w * (w - 1) / 2);
    ASSERT_EQ_INT(io[1], (int64_t)10 * w * (w - 1) / 2);
    ASSERT_EQ_INT(io[2], -(int64_t)w * (w - 1) / 2);
    ferry_tensor_release(t);
}

TEST(broadcast_takes_the_roots_values)
{
    ferry_dist *d = dist();
    int r = ferry_dist_rank(d), w = ferry_dist_world_size(d), root = w - 1;
    uint16_t v[5];
    for (int i = 0; i < 5; i++)
        v[i] = (uint16_t)(1000 * r + i);
    int64_t shape[1] = {5};
    ferry_tensor *t;
    /* Any dtype: a broadcast moves bytes (f16 here). */
    ASSERT_OK(ferry_tensor_from_host(v, shape, 1, FERRY_DTYPE_F16, ferry_cpu(), &t));
    ASSERT_OK(ferry_dist_broadcast(d, t, root, NULL));
    const uint16_t *o = ferry_tensor_data(t);
    for (int i = 0; i < 5; i++)
        ASSERT_EQ_INT(o[i], 1000 * root + i);
    ferry_tensor_release(t);
}

TEST(collectives_refuse_bad_arguments)
{
    ferry_dist *d = dist();
    int64_t shape[2] = {4, 4};
    ferry_tensor *t, *view, *half;
    ASSERT_OK(ferry_tensor_zeros(shape, 2, FERRY_DTYPE_F32, ferry_cpu(), &t));
    ASSERT_STATUS(ferry_dist_all_reduce(NULL, t, FERRY_REDUCE_SUM, NULL), FERRY_ERR_INVALID_ARG);
    ASSERT_STATUS(ferry_dist_all_reduce(d, NULL, FERRY_REDUCE_SUM, NULL), FERRY_ERR_INVALID_ARG);
    ASSERT_STATUS(ferry_dist_all_reduce(d, t, FERRY_REDUCE_COUNT, NULL), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "rank");
    ASSERT_OK(ferry_tensor_transpose(t, 0, 1, &view));
    ASSERT_STATUS(ferry_dist_all_reduce(d, view, FERRY_REDUCE_SUM, NULL), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "contiguous");
    ASSERT_OK(ferry_tensor_zeros(shape, 2, FERRY_DTYPE_F16, ferry_cpu(), &half));
    ASSERT_STATUS(ferry_dist_all_reduce(d, half, FERRY_REDUCE_SUM, NULL), FERRY_ERR_DTYPE);
    ferry_tensor *it;
    ASSERT_OK(ferry_tensor_zeros(shape, 2, FERRY_DTYPE_I32, ferry_cpu(), &it));
    ASSERT_STATUS(ferry_dist_all_reduce(d, it, FERRY_REDUCE_AVG, NULL), FERRY_ERR_DTYPE);
    ASSERT_STATUS(ferry_dist_broadcast(d, t, ferry_dist_world_size(d), NULL), FERRY_ERR_INVALID_ARG);
    ASSERT_STATUS(ferry_dist_broadcast(d, t, -1, NULL), FERRY_ERR_INVALID_ARG);
    ASSERT_STATUS(ferry_dist_barrier(NULL), FERRY_ERR_INVALID_ARG);
    /* None of that broke the communicator. */
    ASSERT_OK(ferry_dist_all_reduce(d, t, FERRY_REDUCE_SUM, NULL));
    ferry_tensor_release(it);
    ferry_tensor_release(half);
    ferry_tensor_release(view);
    ferry_tensor_release(t);
    if (ferry_cuda_is_available() && !ferry_dist_nccl_is_built())
        return;
    if (!ferry_cuda_is_available()) {
        ferry_dist *x = (ferry_dist *)1;
        ferry_dist_config c = ferry_dist_config_default();
        c.device = ferry_dist_local_cuda();
        ASSERT_STATUS(ferry_dist_create(&c, &x), FERRY_ERR_NO_DEVICE);
        ASSERT(x == NULL);
        ASSERT_STR_CONTAINS(ferry_last_error(), "no CUDA device");
    }
}

/* Largest |a - b| over every parameter of two models of one architecture. */
static double max_param_diff(ferry_module *a, ferry_module *b)
{
    double worst = 0;
    ASSERT_EQ_SIZE(ferry_module_param_count(a), ferry_module_param_count(b));
    for (size_t i = 0; i < ferry_module_param_count(a); i++) {
        ferry_param pa, pb;
        ASSERT_OK(ferry_module_param(a, i, &pa));
        ASSERT_OK(ferry_module_param(b, i, &pb));
        const float *x = ferry_tensor_data(pa.value), *y = ferry_tensor_data(pb.value);
        for (int64_t k = 0; k < ferry_tensor_numel(pa.value); k++)
            worst = fmax(worst, fabs((double)x[k] - (double)y[k]));
    }
    return worst;
}

/* Every rank trains on its rows of each global batch; a plain model on the
 * whole global batch (computed on every rank, no communication) must end at the
 * same parameters. */
static void ddp_matches_one_process(size_t bucket_bytes, size_t want_buckets)
{
    ferry_dist *d = dist();
    int r = ferry_dist_rank(d), w = ferry_dist_world_size(d);
    const int64_t B = 8, steps = 6;
    if (B * w > 64)
        SKIP("world too large for this test's batch");
    /* Different seeds: the broadcast must make every rank start from rank 0's. */
    ferry_module *net = small_mlp(r == 0 ? 7 : 100 + (uint64_t)r), *ref = small_mlp(7);
    ferry_optim *opt, *opt_ref;
    ASSERT_OK(ferry_sgd_create(net, 0.1, 0.9, 1e-4, &opt));
    ASSERT_OK(ferry_sgd_create(ref, 0.1, 0.9, 1e-4, &opt_ref));
    ferry_ddp *ddp;
    ASSERT_OK(ferry_ddp_create(d, net, bucket_bytes, &ddp));
    ASSERT_EQ_SIZE(ferry_ddp_bucket_count(ddp), want_buckets);
    ASSERT(max_param_diff(net, ref) == 0);
    for (int64_t step = 0; step < steps; step++) {
        int64_t g0 = step * B * w;
        ferry_tensor *x, *y, *xa, *ya;
        batch(B, g0 + r * B, &x, &y);
        batch(B * w, g0, &xa, &ya);
        ASSERT_OK(ferry_train_step(net, opt, NULL, x, y, NULL, NULL));
        ASSERT_OK(ferry_train_step(ref, opt_ref, NULL, xa, ya, NULL, NULL));
        ferry_tensor_release(x);
        ferry_tensor_release(y);
        ferry_tensor_release(xa);
        ferry_tensor_release(ya);
    }
    double diff = max_param_diff(net, ref);
    ASSERT_MSG(diff < 1e-5, "rank %d: parameters differ from one process by %g", r, diff);
    /* And from the start: training moved them. */
    ferry_module *init = small_mlp(7);
    ASSERT(max_param_diff(net, init) > 1e-3);
    ferry_module_destroy(init);
    ferry_ddp_destroy(ddp);
    ferry_optim_destroy(opt);
    ferry_optim_destroy(opt_ref);
    ferry_module_destroy(net);
    ferry_module_destroy(ref);
}

/* Twice: the second run must leave exactly as many of ferry's allocations live
 * as it found (the first fills the caching allocator). */
static void ddp_matches_one_process_twice(size_t bucket_bytes, size_t want_buckets)
{
    ddp_matches_one_process(bucket_bytes, want_buckets);
    int64_t live0 = ferry_debug_alloc_live();
    ddp_matches_one_process(bucket_bytes, want_buckets);
    ASSERT_EQ_INT(ferry_debug_alloc_live(), live0);
}

TEST(ddp_one_bucket_matches_one_process) { ddp_matches_one_process_twice(0, 1); }

/* 40 bytes per bucket: each of the four parameters gets its own, so the first
 * starts while the first layer's backward has not run yet. */
TEST(ddp_bucket_per_param_matches_one_process) { ddp_matches_one_process_twice(40, 4); }

TEST(ddp_refuses_bad_setups)
{
    ferry_dist *d = dist();
    ferry_module *net = small_mlp(1);
    ferry_ddp *p = (ferry_ddp *)1;
    ASSERT_STATUS(ferry_ddp_create(d, NULL, 0, &p), FERRY_ERR_INVALID_ARG);
    ASSERT(p == NULL);
    ASSERT_STATUS(ferry_ddp_create(NULL, net, 0, &p), FERRY_ERR_INVALID_ARG);
    ASSERT_STATUS(ferry_ddp_create(d, net, 0, NULL), FERRY_ERR_INVALID_ARG);
    /* A module that already has a hook. */
    hook_log h = {0};
    ASSERT_OK(ferry_module_set_grad_hook(net, record, &h));
    ASSERT_STATUS(ferry_ddp_create(d, net, 0, &p), FERRY_ERR_BAD_STATE);
    ASSERT_OK(ferry_module_set_grad_hook(net, NULL, NULL));
    /* Destroying the ddp removes its hook. */
    ASSERT_OK(ferry_ddp_create(d, net, 0, &p));
    ferry_ddp_destroy(p);
    ASSERT_OK(ferry_ddp_create(d, net, 0, &p));
    ASSERT_OK(ferry_ddp_sync_buffers(p, NULL));
    ASSERT_STATUS(ferry_ddp_sync_buffers(NULL, NULL), FERRY_ERR_INVALID_ARG);
    ferry_ddp_destroy(p);
    ferry_ddp_destroy(NULL);
    ferry_module_destroy(net);
}

/* The NCCL path: a second ferry_dist on "cuda" (MPI is already up, so it leaves
 * MPI to the first), an all-reduce of a CUDA tensor, and data-parallel training
 * on the GPU against one process. */
TEST(nccl_all_reduce_and_ddp_on_cuda)
{
    ferry_dist *cpu = dist();
    ft_require_nvidia("NCCL");
    if (!ferry_dist_nccl_is_built())
        SKIP("built without NCCL");
    const char *ls = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    if (ls && atoi(ls) > ferry_cuda_device_count())
        SKIP("fewer GPUs than ranks on this machine");
    ferry_dist_config c = ferry_dist_config_default();
    c.device = ferry_dist_local_cuda();
    c.timeout_s = 60;
    ferry_dist *d;
    ASSERT_OK(ferry_dist_create(&c, &d));
    int r = ferry_dist_rank(d), w = ferry_dist_world_size(d);
    ASSERT_EQ_INT(r, ferry_dist_rank(cpu));
    ASSERT_EQ_INT(ferry_dist_device(d).type, FERRY_DEVICE_CUDA);
    ASSERT_STR_CONTAINS(ferry_dist_backend(d), "NCCL");
    ferry_device dev = ferry_dist_device(d);

    float v[5] = {1, 2, 3, 4, (float)r};
    int64_t s5[1] = {5};
    ferry_tensor *t, *host;
    ASSERT_OK(ferry_tensor_from_host(v, s5, 1, FERRY_DTYPE_F32, dev, &t));
    ASSERT_OK(ferry_dist_all_reduce(d, t, FERRY_REDUCE_SUM, NULL));
    ASSERT_OK(ferry_tensor_cpu(t, &host));
    const float *o = ferry_tensor_data(host);
    for (int i = 0; i < 4; i++)
        ASSERT_NEAR(o[i], (i + 1) * w, 1e-6);
    ASSERT_NEAR(o[4], w * (w - 1) / 2.0, 1e-6);
    ferry_tensor_release(host);
    /* A CPU tensor on this dist still goes through MPI. */
    ferry_tensor *ct;
    ASSERT_OK(ferry_tensor_from_host(v, s5, 1, FERRY_DTYPE_F32, ferry_cpu(), &ct));
    ASSERT_OK(ferry_dist_all_reduce(d, ct, FERRY_REDUCE_MAX, NULL));
    ASSERT_NEAR(((const float *)ferry_tensor_data(ct))[4], w - 1, 1e-6);
    ferry_tensor_release(ct);
    ferry_tensor_release(t);

    const int64_t B = 8;
    ferry_module *net = small_mlp(r == 0 ? 7 : 50), *ref = small_mlp(7);
    ASSERT_OK(ferry_module_to(net, dev));
    ASSERT_OK(ferry_module_to(ref, dev));
    ferry_optim *opt, *opt_ref;
    ASSERT_OK(ferry_sgd_create(net, 0.1, 0.9, 0.0, &opt));
    ASSERT_OK(ferry_sgd_create(ref, 0.1, 0.9, 0.0, &opt_ref));
    ferry_ddp *ddp;
    ASSERT_OK(ferry_ddp_create(d, net, 40, &ddp));
    for (int64_t step = 0; step < 4 && B * w <= 64; step++) {
        ferry_tensor *x, *y, *xa, *ya, *xd, *yd, *xad, *yad;
        batch(B, step * B * w + r * B, &x, &y);
        batch(B * w, step * B * w, &xa, &ya);
        ASSERT_OK(ferry_tensor_to(x, dev, false, &xd));
        ASSERT_OK(ferry_tensor_to(y, dev, false, &yd));
        ASSERT_OK(ferry_tensor_to(xa, dev, false, &xad));
        ASSERT_OK(ferry_tensor_to(ya, dev, false, &yad));
        ASSERT_OK(ferry_train_step(net, opt, NULL, xd, yd, NULL, NULL));
        ASSERT_OK(ferry_train_step(ref, opt_ref, NULL, xad, yad, NULL, NULL));
        ferry_tensor *all[8] = {x, y, xa, ya, xd, yd, xad, yad};
        for (int i = 0; i < 8; i++)
            ferry_tensor_release(all[i]);
    }
    ferry_ddp_destroy(ddp);
    ASSERT_OK(ferry_module_to(net, ferry_cpu()));
    ASSERT_OK(ferry_module_to(ref, ferry_cpu()));
    double diff = max_param_diff(net, ref);
    ASSERT_MSG(diff < 1e-5, "rank %d: GPU parameters differ from one process by %g", r, diff);
    ferry_optim_destroy(opt);
    ferry_optim_destroy(opt_ref);
    ferry_module_destroy(net);
    ferry_module_destroy(ref);
    ferry_dist_destroy(d);
}

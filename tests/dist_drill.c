/* Failure drills for distributed training, run by scripts/dist-test.sh under
 * mpirun -np 2 (or more). The last rank misbehaves; every rank prints what it
 * got, one line "rank R: STATUS: message" on stderr, and exits 1 when it ended
 * with an error. Nothing here may hang: the script bounds each run.
 *   dist_drill abort    the last rank fails in step 3 and calls ferry_dist_abort;
 *                       the others are in the data-parallel backward
 *   dist_drill timeout  the last rank stops taking part without a word; the
 *                       others' all-reduce times out (timeout 2 s)
 *   dist_drill init     the last rank asks for a device that does not exist;
 *                       every rank's ferry_dist_create fails */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ferry/train.h"

static int report(int rank, ferry_status st)
{
    fprintf(stderr, "rank %d: %s: %s\n", rank, ferry_status_str(st), ferry_last_error());
    return st == FERRY_OK ? 0 : 1;
}

static ferry_status train_steps(ferry_dist *d, int fail_at)
{
    ferry_module *net = NULL, *l;
    ferry_status st = ferry_sequential_create(&net);
    if (st == FERRY_OK && (st = ferry_linear_create(16, 32, true, &l)) == FERRY_OK)
        st = ferry_sequential_add(net, l);
    if (st == FERRY_OK && (st = ferry_relu_create(&l)) == FERRY_OK)
        st = ferry_sequential_add(net, l);
    if (st == FERRY_OK && (st = ferry_linear_create(32, 4, true, &l)) == FERRY_OK)
        st = ferry_sequential_add(net, l);
    ferry_optim *opt = NULL;
    ferry_ddp *ddp = NULL;
    ferry_tensor *x = NULL, *y = NULL;
    int64_t xs[2] = {8, 16}, ys[1] = {8};
    if (st == FERRY_OK)
        st = ferry_sgd_create(net, 0.1, 0.0, 0.0, &opt);
    if (st == FERRY_OK)
        st = ferry_ddp_create(d, net, 256, &ddp);
    if (st == FERRY_OK)
        st = ferry_tensor_randn(xs, 2, FERRY_DTYPE_F32, ferry_cpu(), 1, &x);
    if (st == FERRY_OK)
        st = ferry_tensor_zeros(ys, 1, FERRY_DTYPE_I64, ferry_cpu(), &y);
    for (int step = 1; st == FERRY_OK && step <= 1000; step++) {
        if (step == fail_at) {
            st = ferry_set_error(FERRY_ERR_DEVICE_OOM, "drill: out of memory in step %d", step);
            break;
        }
        st = ferry_train_step(net, opt, NULL, x, y, NULL, NULL);
    }
    ferry_tensor_release(x);
    ferry_tensor_release(y);
    ferry_ddp_destroy(ddp);
    ferry_optim_destroy(opt);
    ferry_module_destroy(net);
    return st;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (strcmp(mode, "abort") && strcmp(mode, "timeout") && strcmp(mode, "init")) {
        fprintf(stderr, "usage: dist_drill abort|timeout|init (under mpirun)\n");
        return 2;
    }
    /* The launcher tells each process its rank before MPI does: the init drill
     * needs it to pick the bad device. */
    const char *env = getenv("OMPI_COMM_WORLD_RANK"), *size = getenv("OMPI_COMM_WORLD_SIZE");
    bool last = env && size && atoi(env) == atoi(size) - 1;
    ferry_dist_config c = ferry_dist_config_default();
    c.device = !strcmp(mode, "init") && last ? ferry_cuda(99) : ferry_cpu();
    c.timeout_s = !strcmp(mode, "timeout") ? 2 : 60;
    ferry_dist *d;
    ferry_status st = ferry_dist_create(&c, &d);
    if (st != FERRY_OK)
        return report(env ? atoi(env) : -1, st);
    int rank = ferry_dist_rank(d), world = ferry_dist_world_size(d);
    last = rank == world - 1;

    if (!strcmp(mode, "abort")) {
        st = train_steps(d, last ? 3 : 0);
    } else if (last) { /* timeout: stops answering, says nothing */
        struct timespec ts = {20, 0};
        nanosleep(&ts, NULL);
        st = ferry_set_error(FERRY_ERR_BAD_STATE, "drill: stopped taking part");
    } else {
        int64_t s1[1] = {4};
        ferry_tensor *t = NULL;
        st = ferry_tensor_zeros(s1, 1, FERRY_DTYPE_F32, ferry_cpu(), &t);
        if (st == FERRY_OK)
            st = ferry_dist_all_reduce(d, t, FERRY_REDUCE_SUM, NULL);
        ferry_tensor_release(t);
    }
    if (st != FERRY_OK)
        ferry_dist_abort(d, st);
    int rc = report(rank, st);
    ferry_dist_destroy(d);
    return rc;
}

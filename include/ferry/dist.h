/* Library: libferry-train (pkg-config ferry-train); <ferry/train.h> includes this header. */
/* Data-parallel training over MPI (CPU) and NCCL (GPUs).
 *
 * One process per GPU (or per CPU share), started by mpirun:
 *
 *     mpirun -np 2 build/samples/train_gray --dist
 *     mpirun -np 16 --hostfile hosts build/samples/train_gray --dist --device cuda
 *
 * Each process calls ferry_dist_create, which reads rank, world size and local rank
 * (the rank among the processes on its machine) from MPI and, for a GPU, picks
 * cuda:<local rank> and builds an NCCL communicator over MPI. Each rank's loader
 * reads its own share of the data (FERRY_SAMPLER_DISTRIBUTED with
 * ferry_dist_rank/ferry_dist_world_size); a ferry_ddp around the model makes every
 * rank start from rank 0's parameters and averages the gradients during backward,
 * so all ranks take the same optimiser step, the one a single process would take
 * on the union of their batches.
 *
 *     ferry_dist *d;   ferry_dist_config dc = ferry_dist_config_default();
 *     ferry_dist_create(&dc, &d);                      // default: a GPU per rank if any
 *     ... build net on ferry_dist_device(d), optimiser, loader with
 *         c.sampler = FERRY_SAMPLER_DISTRIBUTED, c.rank = ferry_dist_rank(d),
 *         c.world_size = ferry_dist_world_size(d) ...
 *     ferry_ddp *ddp;  ferry_ddp_create(d, net, 0, &ddp);
 *     ferry_train_step(net, opt, NULL, x, y, metrics, s);   // unchanged
 *     ...
 *     ferry_ddp_destroy(ddp);  ferry_dist_destroy(d);
 *
 * Failures: every MPI or NCCL error becomes FERRY_ERR_DIST with the rank in the
 * message. A rank whose own step fails calls ferry_dist_abort: the others' pending
 * or next collective then fails with FERRY_ERR_DIST naming that rank and its
 * error, instead of waiting for it forever. A rank that stops answering without
 * a word is caught by the timeout (FERRY_ERR_TIMEOUT). After a failure the
 * collectives of that ferry_dist refuse to run (FERRY_ERR_BAD_STATE); finalize it
 * and end the process with an error (mpirun then ends the job).
 *
 * Built when mpicc is found (make DIST=0 leaves it out: ferry_dist_create then
 * fails with FERRY_ERR_UNSUPPORTED); the NCCL path when CUDA is built too. */
#ifndef FERRY_DIST_H
#define FERRY_DIST_H

#include <stdbool.h>
#include <stddef.h>

#include "ferry/export.h"
#include "ferry/nn.h"
#include "ferry/status.h"
#include "ferry/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ferry_dist ferry_dist;

/* For ferry_dist_config.device: the local rank's GPU, cuda:<local rank>
 * (one process per GPU). Only ferry_dist_create takes it. */
static inline ferry_device ferry_dist_local_cuda(void)
{
    ferry_device d = {FERRY_DEVICE_CUDA, -1};
    return d;
}

typedef struct ferry_dist_config {
    /* Zero (the default device): the local rank's GPU when a GPU is available,
     * else the CPU. ferry_dist_local_cuda(): the local rank's GPU (an error
     * without one). ferry_cpu(), or ferry_cuda(N) for that GPU on every rank. */
    ferry_device device;
    /* Seconds a collective may wait for the other ranks before it fails with
     * FERRY_ERR_TIMEOUT. 0: $FERRY_DIST_TIMEOUT, else 300. */
    double timeout_s;
} ferry_dist_config;
FERRY_API ferry_dist_config ferry_dist_config_default(void);

/* Initialises MPI (unless the program already did; then ferry leaves it to the
 * program to finalise) and, for a CUDA device, NCCL. Outside mpirun it runs as
 * a world of one. */
FERRY_API ferry_status ferry_dist_create(const ferry_dist_config *cfg, ferry_dist **out);
/* Frees the communicators and finalises MPI if ferry_dist_create initialised it.
 * After a failure MPI cannot be finalised safely (a collective may still be
 * pending): it is left alone, and the process should exit with an error. */
FERRY_API void ferry_dist_destroy(ferry_dist *d);

FERRY_API int ferry_dist_rank(const ferry_dist *d);
FERRY_API int ferry_dist_world_size(const ferry_dist *d);
FERRY_API int ferry_dist_local_rank(const ferry_dist *d);
FERRY_API ferry_device ferry_dist_device(const ferry_dist *d);
/* "MPI (Open MPI v4.1.4)" or "MPI (...) + NCCL 2.27.3". */
FERRY_API const char *ferry_dist_backend(const ferry_dist *d);
/* Whether this build has MPI (and NCCL). */
FERRY_API bool ferry_dist_mpi_is_built(void);
FERRY_API bool ferry_dist_nccl_is_built(void);

typedef enum ferry_reduce_op {
    FERRY_REDUCE_SUM = 0,
    FERRY_REDUCE_AVG, /* the sum divided by the world size (floating dtypes) */
    FERRY_REDUCE_MIN,
    FERRY_REDUCE_MAX,
    FERRY_REDUCE_COUNT /* the number of operations, not one */
} ferry_reduce_op;

/* In place over all ranks: every rank passes a contiguous tensor of the same
 * shape and dtype and ends with the reduction. CPU tensors go through MPI
 * (f32, u8, i32, i64), CUDA tensors through NCCL on stream s (all dtypes).
 * Returns when t holds the result. */
FERRY_API ferry_status ferry_dist_all_reduce(ferry_dist *d, ferry_tensor *t, ferry_reduce_op op,
                                             ferry_stream *s);
/* In place: every rank's t becomes root's. */
FERRY_API ferry_status ferry_dist_broadcast(ferry_dist *d, ferry_tensor *t, int root,
                                            ferry_stream *s);
FERRY_API ferry_status ferry_dist_barrier(ferry_dist *d);
/* Tells the other ranks that this one failed, with this thread's last error
 * message, and waits (a few seconds at most) until they have heard it. Returns
 * why. Call it when a step fails on this rank and it is going to stop. */
FERRY_API ferry_status ferry_dist_abort(ferry_dist *d, ferry_status why);

/* ---- data-parallel model (PyTorch's DistributedDataParallel) ----
 * Broadcasts rank 0's parameters and buffers to every rank, then installs a
 * gradient hook (ferry_module_set_grad_hook) on m: gradients are gathered into
 * buckets of about bucket_bytes (0: 25 MiB, as PyTorch), last layer first, and
 * each bucket is all-reduced as soon as backward has produced all its gradients,
 * while the earlier layers' backward still runs. After ferry_module_backward (and
 * so in ferry_train_step) every gradient is averaged over the ranks: on the CPU
 * when it returns; on GPUs in the order of backward's stream, which waits for
 * the NCCL stream on the device (the host does not wait), so work queued on that
 * stream afterwards sees the averages. m must
 * be on the dist's device, and stay there while the ferry_ddp lives. The hook
 * runs on the calling thread; use one training thread per rank. */
typedef struct ferry_ddp ferry_ddp;
FERRY_API ferry_status ferry_ddp_create(ferry_dist *d, ferry_module *m, size_t bucket_bytes,
                                        ferry_ddp **out);
/* Removes the hook. */
FERRY_API void ferry_ddp_destroy(ferry_ddp *p);
/* Buckets, as planned (for tests and logs). */
FERRY_API size_t ferry_ddp_bucket_count(const ferry_ddp *p);
/* Copies rank 0's buffers (BatchNorm running statistics) to every rank: call it
 * before evaluating, so every rank evaluates the same model. */
FERRY_API ferry_status ferry_ddp_sync_buffers(ferry_ddp *p, ferry_stream *s);

#ifdef __cplusplus
}
#endif
#endif

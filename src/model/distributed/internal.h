/* Internal: the MPI side of ferry_dist, shared by the collectives (mpi.c),
 * the data-parallel wrapper (ddp.c) and the NCCL path (nccl_cuda.c).
 * Compiled only when MPI is built (DIST=1). */
#ifndef FERRY_DISTRIBUTED_INTERNAL_H
#define FERRY_DISTRIBUTED_INTERNAL_H

#include <mpi.h>

#include "ferry/dist.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FD_MSG_MAX 512

typedef struct fd_nccl fd_nccl;

struct ferry_dist {
    MPI_Comm comm;          /* collectives (a duplicate of MPI_COMM_WORLD) */
    MPI_Comm ctl;           /* abort notices and their acknowledgements */
    int rank, world, local_rank;
    ferry_device device;
    double timeout_s;
    bool owns_mpi;          /* ferry_dist_create called MPI_Init: finalize calls MPI_Finalize */
    bool failed;            /* a collective failed or a peer aborted: no more collectives */
    bool heard_abort;       /* a peer's notice arrived (answered; not announced again) */
    MPI_Request abort_req;  /* posted receive for a peer's notice */
    char abort_in[FD_MSG_MAX];
    char abort_out[FD_MSG_MAX];
    char ack;
    fd_nccl *nccl;          /* NULL unless the device is CUDA (and NCCL is built) */
    char backend[96];
};

/* FERRY_ERR_BAD_STATE once d has failed (or FERRY_ERR_INVALID_ARG for NULL). */
ferry_status fd_usable(ferry_dist *d, const char *where);
/* An MPI error code as FERRY_ERR_DIST "rank R: what: <MPI's words>"; marks d failed. */
ferry_status fd_mpi_fail(ferry_dist *d, int rc, const char *what);
/* Polls r until it completes (FERRY_OK), a peer's abort notice arrives
 * (FERRY_ERR_DIST naming it), MPI fails, or d's timeout passes (FERRY_ERR_TIMEOUT).
 * `what` names the operation in messages. */
ferry_status fd_mpi_wait(ferry_dist *d, MPI_Request *r, const char *what);
/* One poll of r (and of the abort notices): *done tells whether it completed. */
ferry_status fd_mpi_test(ferry_dist *d, MPI_Request *r, bool *done, const char *what);
/* MPI_DATATYPE_NULL for dtypes MPI reductions do not take here (f16, bf16). */
MPI_Datatype fd_mpi_dtype(ferry_dtype dt);
/* Starts an in-place all-reduce of count elements (count <= INT_MAX). AVG is
 * started as SUM: the caller divides (fd_scale_f32). */
ferry_status fd_mpi_start_all_reduce(ferry_dist *d, void *buf, size_t count, ferry_dtype dt,
                                     ferry_reduce_op op, MPI_Request *r);
void fd_scale_f32(float *x, size_t n, float c);
/* Waits for everything queued on s (NULL: dev's default stream) so far, polling
 * for abort notices and the timeout (NCCL errors too, when d has NCCL). */
ferry_status fd_wait_stream(ferry_dist *d, ferry_device dev, ferry_stream *s, const char *what);

/* ---- NCCL (nccl_cuda.c; stubs in mpi.c when not built) ---- */
/* Builds the communicator over d->comm (rank 0's unique id broadcast by MPI). */
ferry_status fd_nccl_create(ferry_dist *d, fd_nccl **out);
/* abort: after a failure, ncclCommAbort instead of a clean destroy. */
void fd_nccl_destroy(fd_nccl *n, bool abort);
/* Queue on s; dt may be any floating or integer dtype. */
ferry_status fd_nccl_all_reduce(ferry_dist *d, void *buf, size_t count, ferry_dtype dt,
                                ferry_reduce_op op, ferry_stream *s);
ferry_status fd_nccl_broadcast(ferry_dist *d, void *buf, size_t count, ferry_dtype dt, int root,
                               ferry_stream *s);
/* FERRY_ERR_DIST when the communicator reported an asynchronous error. */
ferry_status fd_nccl_check(ferry_dist *d);
/* "2.27.3" into buf. */
const char *fd_nccl_version(char *buf, size_t size);

#ifdef __cplusplus
}
#endif
#endif

/* The NCCL path of ferry_dist: a communicator over the ranks' GPUs, bootstrapped
 * through MPI (rank 0 makes the unique id, MPI broadcasts it), and collectives
 * queued on the caller's stream. Built with CUDA and MPI when nccl.h is found. */
#include <stdio.h>

#include <nccl.h>

#include "device/cuda_check.h"
#include "device/device_internal.h"
#include "common/error.h"
#include "model/distributed/internal.h"

struct fd_nccl {
    ncclComm_t comm;
};

static ferry_status nccl_fail(ferry_dist *d, ncclResult_t r, const char *what)
{
    d->failed = true;
    return ferry_fail(FERRY_ERR_DIST, "rank %d: %s: %s (NCCL error %d)", d->rank, what,
                      ncclGetErrorString(r), (int)r);
}

const char *fd_nccl_version(char *buf, size_t size)
{
    int v = 0;
    if (ncclGetVersion(&v) != ncclSuccess)
        v = 0;
    /* NCCL >= 2.9 encodes major*10000 + minor*100 + patch. */
    snprintf(buf, size, "%d.%d.%d", v / 10000, (v / 100) % 100, v % 100);
    return buf;
}

ferry_status fd_nccl_create(ferry_dist *d, fd_nccl **out)
{
    *out = NULL;
    ncclUniqueId id;
    if (d->rank == 0) {
        ncclResult_t r = ncclGetUniqueId(&id);
        if (r != ncclSuccess)
            return nccl_fail(d, r, "ncclGetUniqueId");
    }
    /* A failure on rank 0 above leaves the others here until the timeout:
     * ferry_dist_create's agreement step cannot run before this broadcast. */
    MPI_Request req;
    int rc = MPI_Ibcast(&id, (int)sizeof id, MPI_BYTE, 0, d->comm, &req);
    if (rc != MPI_SUCCESS)
        return fd_mpi_fail(d, rc, "broadcasting the NCCL id");
    ferry_status st = fd_mpi_wait(d, &req, "broadcasting the NCCL id");
    if (st != FERRY_OK)
        return st;
    ferry_device_guard g;
    if ((st = ferry_device_guard_enter(&g, d->device)) != FERRY_OK)
        return st;
    fd_nccl *n = ferry_host_calloc(1, sizeof *n);
    if (!n) {
        ferry_device_guard_exit(&g);
        return FERRY_ERR_NO_MEMORY;
    }
    ncclResult_t r = ncclCommInitRank(&n->comm, d->world, id, d->rank);
    ferry_device_guard_exit(&g);
    if (r != ncclSuccess) {
        ferry_host_free(n);
        return nccl_fail(d, r, "ncclCommInitRank");
    }
    *out = n;
    return FERRY_OK;
}

void fd_nccl_destroy(fd_nccl *n, bool abort)
{
    if (!n)
        return;
    if (abort)
        ncclCommAbort(n->comm);
    else
        ncclCommDestroy(n->comm);
    ferry_host_free(n);
}

/* A collective runs on the rank's device whatever the calling thread's current
 * device is: s must belong to it, and a NULL s means that device's default
 * stream, which is only so while the device is current. The guard restores the
 * caller's device afterwards. */
static ferry_status enter_rank_device(ferry_dist *d, ferry_stream *s, ferry_device_guard *g,
                                      const char *what)
{
    if (s && !ferry_device_eq(ferry_stream_device(s), d->device)) {
        char a[FERRY_DEVICE_NAME_MAX], b[FERRY_DEVICE_NAME_MAX];
        return ferry_fail(FERRY_ERR_DEVICE_MISMATCH, "rank %d: %s: stream on %s, but this rank uses %s",
                          d->rank, what, ferry_device_format(ferry_stream_device(s), a, sizeof a),
                          ferry_device_format(d->device, b, sizeof b));
    }
    return ferry_device_guard_enter(g, d->device);
}

static bool nccl_type(ferry_dtype dt, ncclDataType_t *out)
{
    switch (dt) {
    case FERRY_DTYPE_F32: *out = ncclFloat32; return true;
    case FERRY_DTYPE_F16: *out = ncclFloat16; return true;
    case FERRY_DTYPE_BF16: *out = ncclBfloat16; return true;
    case FERRY_DTYPE_U8: *out = ncclUint8; return true;
    case FERRY_DTYPE_I32: *out = ncclInt32; return true;
    case FERRY_DTYPE_I64: *out = ncclInt64; return true;
    case FERRY_DTYPE_U32: *out = ncclUint32; return true;
    default: return false; /* u16: NCCL has no 16-bit integer */
    }
}

static ncclRedOp_t nccl_op(ferry_reduce_op op)
{
    switch (op) {
    case FERRY_REDUCE_AVG: return ncclAvg;
    case FERRY_REDUCE_MIN: return ncclMin;
    case FERRY_REDUCE_MAX: return ncclMax;
    default: return ncclSum;
    }
}

ferry_status fd_nccl_all_reduce(ferry_dist *d, void *buf, size_t count, ferry_dtype dt,
                                ferry_reduce_op op, ferry_stream *s)
{
    ncclDataType_t t;
    if (!nccl_type(dt, &t))
        return ferry_fail(FERRY_ERR_DTYPE, "rank %d: NCCL cannot reduce dtype %d", d->rank, (int)dt);
    ferry_device_guard g;
    ferry_status st = enter_rank_device(d, s, &g, "ncclAllReduce");
    if (st != FERRY_OK)
        return st;
    ncclResult_t r = ncclAllReduce(buf, buf, count, t, nccl_op(op), d->nccl->comm,
                                   (cudaStream_t)ferry_stream_native(s));
    ferry_device_guard_exit(&g);
    return r == ncclSuccess ? FERRY_OK : nccl_fail(d, r, "ncclAllReduce");
}

ferry_status fd_nccl_broadcast(ferry_dist *d, void *buf, size_t count, ferry_dtype dt, int root,
                               ferry_stream *s)
{
    ncclDataType_t t;
    if (!nccl_type(dt, &t))
        return ferry_fail(FERRY_ERR_DTYPE, "rank %d: NCCL cannot broadcast dtype %d", d->rank, (int)dt);
    ferry_device_guard g;
    ferry_status st = enter_rank_device(d, s, &g, "ncclBroadcast");
    if (st != FERRY_OK)
        return st;
    ncclResult_t r = ncclBroadcast(buf, buf, count, t, root, d->nccl->comm,
                                   (cudaStream_t)ferry_stream_native(s));
    ferry_device_guard_exit(&g);
    return r == ncclSuccess ? FERRY_OK : nccl_fail(d, r, "ncclBroadcast");
}

ferry_status fd_nccl_check(ferry_dist *d)
{
    ncclResult_t async = ncclSuccess;
    ncclResult_t r = ncclCommGetAsyncError(d->nccl->comm, &async);
    if (r != ncclSuccess)
        return nccl_fail(d, r, "ncclCommGetAsyncError");
    return async == ncclSuccess ? FERRY_OK : nccl_fail(d, async, "NCCL (asynchronous error)");
}

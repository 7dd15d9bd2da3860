/* ferry_dist over MPI: initialisation from the MPI environment, collectives that
 * poll instead of block (so a peer's abort notice or a timeout ends the wait),
 * and the abort protocol. CUDA tensors are handed to NCCL (nccl_cuda.c).
 *
 * Why poll: a blocking MPI_Allreduce waits forever for a rank that has failed
 * and will never call it. Every collective here is started non-blocking and
 * polled together with a receive posted for abort notices on a second
 * communicator; a rank that fails sends one to each peer (ferry_dist_abort). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/error.h"
#include "device/device_internal.h" /* ferry_device_check */
#include "model/distributed/internal.h"

enum { TAG_ABORT = 1, TAG_ACK = 2 };

ferry_dist_config ferry_dist_config_default(void)
{
    ferry_dist_config c = {.device = {FERRY_DEVICE_DEFAULT, 0}, .timeout_s = 0};
    return c;
}

bool ferry_dist_mpi_is_built(void) { return true; }

bool ferry_dist_nccl_is_built(void)
{
#if FERRY_HAVE_NCCL
    return true;
#else
    return false;
#endif
}

ferry_status fd_usable(ferry_dist *d, const char *where)
{
    if (!d)
        return ferry_arg_error_(where, "dist is NULL");
    if (d->failed)
        return ferry_fail(FERRY_ERR_BAD_STATE,
                          "rank %d: %s: an earlier collective failed, so the ranks are out of step; "
                          "finalize and stop",
                          d->rank, where);
    return FERRY_OK;
}

ferry_status fd_mpi_fail(ferry_dist *d, int rc, const char *what)
{
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS)
        snprintf(msg, sizeof msg, "MPI error %d", rc);
    d->failed = true;
    return ferry_fail(FERRY_ERR_DIST, "rank %d: %s: %s", d->rank, what, msg);
}

/* Answers a peer's abort notice, if one came: FERRY_ERR_DIST naming the peer. */
static ferry_status check_abort(ferry_dist *d)
{
    if (d->heard_abort)
        return ferry_fail(FERRY_ERR_DIST, "rank %d: another rank failed earlier: %s", d->rank,
                          d->abort_in);
    int flag = 0;
    MPI_Status status;
    int rc = MPI_Test(&d->abort_req, &flag, &status);
    if (rc != MPI_SUCCESS)
        return fd_mpi_fail(d, rc, "checking for abort notices");
    if (!flag)
        return FERRY_OK;
    d->heard_abort = true;
    d->failed = true;
    d->abort_in[sizeof d->abort_in - 1] = '\0';
    /* The acknowledgement lets the failing rank stop waiting; if it is gone,
     * nothing here depends on the send completing. */
    MPI_Request ack;
    if (MPI_Isend(&d->ack, 1, MPI_CHAR, status.MPI_SOURCE, TAG_ACK, d->ctl, &ack) == MPI_SUCCESS)
        MPI_Request_free(&ack);
    return ferry_fail(FERRY_ERR_DIST, "rank %d: stopping because rank %d failed: %s", d->rank,
                      status.MPI_SOURCE, d->abort_in);
}

static void nap(unsigned *spins)
{
    /* Spin briefly (a collective between processes on one machine completes in
     * microseconds), then sleep so a waiting rank leaves the CPU to the loader. */
    if (++*spins < 200)
        return;
    struct timespec ts = {0, 50 * 1000};
    nanosleep(&ts, NULL);
}

static ferry_status timed_out(ferry_dist *d, const char *what)
{
    d->failed = true;
    return ferry_fail(FERRY_ERR_TIMEOUT,
                      "rank %d: %s did not complete within %.0f s: another rank has stopped taking "
                      "part (failed without ferry_dist_abort, or is stuck); FERRY_DIST_TIMEOUT sets "
                      "the limit",
                      d->rank, what, d->timeout_s);
}

ferry_status fd_mpi_test(ferry_dist *d, MPI_Request *r, bool *done, const char *what)
{
    int flag = 0;
    int rc = MPI_Test(r, &flag, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS)
        return fd_mpi_fail(d, rc, what);
    *done = flag != 0;
    return *done ? FERRY_OK : check_abort(d);
}

ferry_status fd_mpi_wait(ferry_dist *d, MPI_Request *r, const char *what)
{
    double t0 = ferry_now();
    unsigned spins = 0;
    for (;;) {
        bool done = false;
        ferry_status st = fd_mpi_test(d, r, &done, what);
        if (st != FERRY_OK || done)
            return st;
        if (ferry_now() - t0 > d->timeout_s)
            return timed_out(d, what);
        nap(&spins);
    }
}

ferry_status fd_wait_stream(ferry_dist *d, ferry_device dev, ferry_stream *s, const char *what)
{
    /* The record goes to s, or with s NULL to dev's own default stream (the
     * backend makes dev current for it), never to the default stream of the
     * calling thread's current device. A failed query (a kernel faulted, NCCL
     * broke the stream) ends the wait with that error, never as "done". */
    ferry_event *ev = NULL;
    ferry_status st = ferry_event_create(dev, false, &ev);
    if (st == FERRY_OK)
        st = ferry_event_record(ev, s);
    double t0 = ferry_now();
    unsigned spins = 0;
    while (st == FERRY_OK) {
        bool done = false;
        if ((st = ferry_event_query_status(ev, &done)) != FERRY_OK) {
            /* Work queued behind the fault (a collective among it) will never
             * finish: no more collectives, and finalize aborts the communicator. */
            d->failed = true;
            st = ferry_fail_prefix(st, "rank %d: %s: ", d->rank, what);
            break;
        }
        if (done)
            break;
        if ((st = check_abort(d)) != FERRY_OK)
            break;
        if (d->nccl && (st = fd_nccl_check(d)) != FERRY_OK)
            break;
        if (ferry_now() - t0 > d->timeout_s) {
            st = timed_out(d, what);
            break;
        }
        nap(&spins);
    }
    if (ev)
        ferry_event_destroy(ev);
    return st;
}

MPI_Datatype fd_mpi_dtype(ferry_dtype dt)
{
    switch (dt) {
    case FERRY_DTYPE_F32: return MPI_FLOAT;
    case FERRY_DTYPE_U8: return MPI_UINT8_T;
    case FERRY_DTYPE_I32: return MPI_INT32_T;
    case FERRY_DTYPE_I64: return MPI_INT64_T;
    case FERRY_DTYPE_U16: return MPI_UINT16_T;
    case FERRY_DTYPE_U32: return MPI_UINT32_T;
    default: return MPI_DATATYPE_NULL;
    }
}

static MPI_Op mpi_op(ferry_reduce_op op)
{
    switch (op) {
    case FERRY_REDUCE_MIN: return MPI_MIN;
    case FERRY_REDUCE_MAX: return MPI_MAX;
    default: return MPI_SUM; /* SUM, and AVG before its division */
    }
}

ferry_status fd_mpi_start_all_reduce(ferry_dist *d, void *buf, size_t count, ferry_dtype dt,
                                     ferry_reduce_op op, MPI_Request *r)
{
    int rc = MPI_Iallreduce(MPI_IN_PLACE, buf, (int)count, fd_mpi_dtype(dt), mpi_op(op), d->comm, r);
    return rc == MPI_SUCCESS ? FERRY_OK : fd_mpi_fail(d, rc, "MPI_Iallreduce");
}

void fd_scale_f32(float *x, size_t n, float c)
{
    for (size_t i = 0; i < n; i++)
        x[i] *= c;
}

/* ---- initialisation ---- */

static double timeout_from(const ferry_dist_config *cfg)
{
    if (cfg->timeout_s > 0)
        return cfg->timeout_s;
    const char *e = getenv("FERRY_DIST_TIMEOUT");
    double t = e ? strtod(e, NULL) : 0;
    return t > 0 ? t : 300;
}

static ferry_status pick_device(ferry_dist *d, ferry_device want)
{
    if (want.type == FERRY_DEVICE_DEFAULT)
        want = ferry_cuda_is_available() ? ferry_dist_local_cuda() : ferry_cpu();
    if (want.type == FERRY_DEVICE_CUDA && want.index == -1) {
        /* One process per GPU: the local rank picks it. */
        int n = ferry_cuda_device_count();
        if (n <= 0)
            return ferry_fail(FERRY_ERR_NO_DEVICE, "rank %d: device \"cuda\": no CUDA device", d->rank);
        if (d->local_rank >= n)
            return ferry_fail(FERRY_ERR_NO_DEVICE,
                              "rank %d: local rank %d needs cuda:%d, but this machine has %d GPU%s; "
                              "start at most %d processes per machine",
                              d->rank, d->local_rank, d->local_rank, n, n == 1 ? "" : "s", n);
        d->device = ferry_cuda(d->local_rank);
        return FERRY_OK;
    }
    ferry_status st = ferry_device_check(want);
    if (st != FERRY_OK)
        return ferry_fail_prefix(st, "rank %d: ", d->rank);
    d->device = want;
    return FERRY_OK;
}

static void describe(ferry_dist *d)
{
    char lib[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int len = 0;
    MPI_Get_library_version(lib, &len);
    lib[strcspn(lib, ",\n")] = '\0'; /* "Open MPI v4.1.4, package: ..." -> "Open MPI v4.1.4" */
    int n = snprintf(d->backend, sizeof d->backend, "MPI (%s)", lib);
    if (d->nccl && n > 0 && (size_t)n < sizeof d->backend) {
        char v[32];
        snprintf(d->backend + n, sizeof d->backend - (size_t)n, " + NCCL %s",
                 fd_nccl_version(v, sizeof v));
    }
}

/* Frees what init made; MPI itself only when ferry started it and nothing failed. */
static void teardown(ferry_dist *d)
{
    bool clean = !d->failed;
    if (d->nccl)
        fd_nccl_destroy(d->nccl, !clean);
    if (clean) {
        if (d->abort_req != MPI_REQUEST_NULL) {
            MPI_Cancel(&d->abort_req);
            MPI_Wait(&d->abort_req, MPI_STATUS_IGNORE);
        }
        if (d->ctl != MPI_COMM_NULL)
            MPI_Comm_free(&d->ctl);
        if (d->comm != MPI_COMM_NULL)
            MPI_Comm_free(&d->comm);
        if (d->owns_mpi)
            MPI_Finalize();
    }
    ferry_host_free(d);
}

ferry_status ferry_dist_create(const ferry_dist_config *cfg, ferry_dist **out)
{
    if (!out)
        return FERRY_ARG_ERROR("out is NULL");
    *out = NULL;
    ferry_dist_config def = ferry_dist_config_default();
    if (!cfg)
        cfg = &def;
    int inited = 0, finalized = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (finalized)
        return ferry_fail(FERRY_ERR_BAD_STATE, "%s: MPI was already finalised in this process", __func__);

    ferry_dist *d = ferry_host_calloc(1, sizeof *d);
    if (!d)
        return FERRY_ERR_NO_MEMORY;
    d->comm = d->ctl = MPI_COMM_NULL;
    d->abort_req = MPI_REQUEST_NULL;
    d->timeout_s = timeout_from(cfg);
    if (!inited) {
        /* Only the thread that called init uses MPI (loader workers never do). */
        int provided = 0;
        int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
        if (rc != MPI_SUCCESS) {
            ferry_host_free(d);
            return ferry_fail(FERRY_ERR_DIST, "%s: MPI_Init_thread failed (error %d)", __func__, rc);
        }
        d->owns_mpi = true;
    }
    ferry_status st = FERRY_OK;
    int rc = MPI_Comm_dup(MPI_COMM_WORLD, &d->comm);
    if (rc == MPI_SUCCESS)
        rc = MPI_Comm_dup(MPI_COMM_WORLD, &d->ctl);
    if (rc == MPI_SUCCESS)
        rc = MPI_Comm_set_errhandler(d->comm, MPI_ERRORS_RETURN);
    if (rc == MPI_SUCCESS)
        rc = MPI_Comm_set_errhandler(d->ctl, MPI_ERRORS_RETURN);
    if (rc == MPI_SUCCESS)
        rc = MPI_Comm_rank(d->comm, &d->rank);
    if (rc == MPI_SUCCESS)
        rc = MPI_Comm_size(d->comm, &d->world);
    MPI_Comm node = MPI_COMM_NULL;
    if (rc == MPI_SUCCESS)
        rc = MPI_Comm_split_type(d->comm, MPI_COMM_TYPE_SHARED, d->rank, MPI_INFO_NULL, &node);
    if (rc == MPI_SUCCESS) {
        rc = MPI_Comm_rank(node, &d->local_rank);
        MPI_Comm_free(&node);
    }
    if (rc == MPI_SUCCESS)
        rc = MPI_Irecv(d->abort_in, (int)sizeof d->abort_in, MPI_CHAR, MPI_ANY_SOURCE, TAG_ABORT,
                       d->ctl, &d->abort_req);
    if (rc != MPI_SUCCESS)
        st = fd_mpi_fail(d, rc, __func__);
    if (st == FERRY_OK)
        st = pick_device(d, cfg->device);
    if (st == FERRY_OK && d->device.type == FERRY_DEVICE_CUDA && ferry_cuda_is_simulated()) {
        st = ferry_fail(FERRY_ERR_UNSUPPORTED,
                        "rank %d: NCCL needs NVIDIA hardware; the simulated GPU (FERRY_SIM_GPUS) "
                        "cannot run it: use device \"cpu\" for training across processes here",
                        d->rank);
    } else if (st == FERRY_OK && d->device.type == FERRY_DEVICE_CUDA) {
#if FERRY_HAVE_NCCL
        st = fd_nccl_create(d, &d->nccl);
#else
        st = ferry_fail(FERRY_ERR_UNSUPPORTED,
                        "rank %d: this build of ferry has no NCCL, so it cannot train on CUDA "
                        "across processes; use device \"cpu\" or build with CUDA and NCCL",
                        d->rank);
#endif
    }
    /* Every rank must agree that init worked: one rank without a GPU must not
     * leave the others waiting in their first collective. */
    if (!d->failed) {
        int ok = st == FERRY_OK, all = 0;
        rc = MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, d->comm);
        if (rc != MPI_SUCCESS)
            st = fd_mpi_fail(d, rc, __func__);
        else if (st == FERRY_OK && !all)
            st = ferry_fail(FERRY_ERR_DIST, "rank %d: ferry_dist_create failed on another rank (see its message)",
                            d->rank);
    }
    if (st != FERRY_OK) {
        char msg[FD_MSG_MAX];
        snprintf(msg, sizeof msg, "%s", ferry_last_error());
        teardown(d);
        return ferry_fail(st, "%s", msg);
    }
    describe(d);
    *out = d;
    return FERRY_OK;
}

void ferry_dist_destroy(ferry_dist *d)
{
    if (d)
        teardown(d);
}

int ferry_dist_rank(const ferry_dist *d) { return d ? d->rank : 0; }
int ferry_dist_world_size(const ferry_dist *d) { return d ? d->world : 1; }
int ferry_dist_local_rank(const ferry_dist *d) { return d ? d->local_rank : 0; }
ferry_device ferry_dist_device(const ferry_dist *d) { return d ? d->device : ferry_cpu(); }
const char *ferry_dist_backend(const ferry_dist *d) { return d ? d->backend : "none"; }

/* ---- collectives ---- */

static ferry_status check_tensor(ferry_dist *d, ferry_tensor *t, const char *where)
{
    ferry_status st = fd_usable(d, where);
    if (st != FERRY_OK)
        return st;
    if (!t)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "rank %d: %s: tensor is NULL", d->rank, where);
    if (!ferry_tensor_is_contiguous(t))
        return ferry_fail(FERRY_ERR_INVALID_ARG, "rank %d: %s: the tensor is not contiguous", d->rank,
                          where);
    ferry_device dev = ferry_tensor_device(t);
    if (dev.type == FERRY_DEVICE_CUDA) {
        if (!d->nccl)
            return ferry_fail(FERRY_ERR_UNSUPPORTED,
                              "rank %d: %s: a CUDA tensor needs NCCL, which this ferry_dist has not "
                              "started (it was initialised on %s)",
                              d->rank, where, d->device.type == FERRY_DEVICE_CPU ? "cpu" : "cuda");
        if (!ferry_device_eq(dev, d->device)) {
            char a[FERRY_DEVICE_NAME_MAX], b[FERRY_DEVICE_NAME_MAX];
            return ferry_fail(FERRY_ERR_DEVICE_MISMATCH, "rank %d: %s: tensor on %s, but this rank uses %s",
                              d->rank, where, ferry_device_format(dev, a, sizeof a),
                              ferry_device_format(d->device, b, sizeof b));
        }
    }
    return FERRY_OK;
}

/* The largest piece one MPI call takes: counts are ints. */
static const size_t CHUNK = (size_t)1 << 30;

ferry_status ferry_dist_all_reduce(ferry_dist *d, ferry_tensor *t, ferry_reduce_op op, ferry_stream *s)
{
    ferry_status st = check_tensor(d, t, __func__);
    if (st != FERRY_OK)
        return st;
    ferry_dtype dt = ferry_tensor_dtype(t);
    bool on_cpu = ferry_tensor_device(t).type == FERRY_DEVICE_CPU;
    if (on_cpu && fd_mpi_dtype(dt) == MPI_DATATYPE_NULL)
        return ferry_fail(FERRY_ERR_DTYPE,
                          "rank %d: %s: MPI cannot reduce %s tensors (f32, u8, i32, i64 can be)", d->rank,
                          __func__, ferry_dtype_name(dt));
    if ((unsigned)op >= FERRY_REDUCE_COUNT)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "rank %d: %s: unknown op %d", d->rank, __func__,
                          (int)op);
    bool floating = dt == FERRY_DTYPE_F32 || dt == FERRY_DTYPE_F16 || dt == FERRY_DTYPE_BF16;
    if (op == FERRY_REDUCE_AVG && !floating)
        return ferry_fail(FERRY_ERR_DTYPE, "rank %d: %s: AVG needs a floating dtype, not %s", d->rank,
                          __func__, ferry_dtype_name(dt));
    size_t n = (size_t)ferry_tensor_numel(t);
    char *p = ferry_tensor_data(t);
    if (!on_cpu) {
        if ((st = fd_nccl_all_reduce(d, p, n, dt, op, s)) != FERRY_OK)
            return st;
        return fd_wait_stream(d, d->device, s, "ncclAllReduce");
    }
    if (s && (st = ferry_stream_synchronize(s)) != FERRY_OK)
        return st;
    size_t es = ferry_dtype_size(dt);
    for (size_t off = 0; off < n; off += CHUNK) {
        size_t k = n - off < CHUNK ? n - off : CHUNK;
        MPI_Request r;
        if ((st = fd_mpi_start_all_reduce(d, p + off * es, k, dt, op, &r)) != FERRY_OK ||
            (st = fd_mpi_wait(d, &r, "MPI_Iallreduce")) != FERRY_OK)
            return st;
    }
    if (op == FERRY_REDUCE_AVG)
        fd_scale_f32((float *)(void *)p, n, 1.0f / (float)d->world);
    return FERRY_OK;
}

ferry_status ferry_dist_broadcast(ferry_dist *d, ferry_tensor *t, int root, ferry_stream *s)
{
    ferry_status st = check_tensor(d, t, __func__);
    if (st != FERRY_OK)
        return st;
    if (root < 0 || root >= d->world)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "rank %d: %s: root %d is not in [0, %d)", d->rank,
                          __func__, root, d->world);
    ferry_dtype dt = ferry_tensor_dtype(t);
    size_t n = (size_t)ferry_tensor_numel(t);
    char *p = ferry_tensor_data(t);
    if (ferry_tensor_device(t).type == FERRY_DEVICE_CUDA) {
        if ((st = fd_nccl_broadcast(d, p, n, dt, root, s)) != FERRY_OK)
            return st;
        return fd_wait_stream(d, d->device, s, "ncclBroadcast");
    }
    if (s && (st = ferry_stream_synchronize(s)) != FERRY_OK)
        return st;
    /* Bytes: a broadcast does no arithmetic, so any dtype goes. */
    size_t bytes = n * ferry_dtype_size(dt);
    for (size_t off = 0; off < bytes; off += CHUNK) {
        size_t k = bytes - off < CHUNK ? bytes - off : CHUNK;
        MPI_Request r;
        int rc = MPI_Ibcast(p + off, (int)k, MPI_BYTE, root, d->comm, &r);
        if (rc != MPI_SUCCESS)
            return fd_mpi_fail(d, rc, "MPI_Ibcast");
        if ((st = fd_mpi_wait(d, &r, "MPI_Ibcast")) != FERRY_OK)
            return st;
    }
    return FERRY_OK;
}

ferry_status ferry_dist_barrier(ferry_dist *d)
{
    ferry_status st = fd_usable(d, __func__);
    if (st != FERRY_OK)
        return st;
    MPI_Request r;
    int rc = MPI_Ibarrier(d->comm, &r);
    if (rc != MPI_SUCCESS)
        return fd_mpi_fail(d, rc, "MPI_Ibarrier");
    return fd_mpi_wait(d, &r, "MPI_Ibarrier");
}

ferry_status ferry_dist_abort(ferry_dist *d, ferry_status why)
{
    if (!d)
        return why;
    /* Keep the caller's message: the MPI calls below must not replace it. */
    snprintf(d->abort_out, sizeof d->abort_out, "%s", ferry_last_error());
    bool announce = !d->heard_abort && d->world > 1;
    d->failed = true;
    if (!announce)
        return ferry_fail(why, "%s", d->abort_out);
    int sent = 0;
    for (int p = 0; p < d->world; p++) {
        if (p == d->rank)
            continue;
        MPI_Request r;
        if (MPI_Isend(d->abort_out, (int)strlen(d->abort_out) + 1, MPI_CHAR, p, TAG_ABORT, d->ctl, &r) ==
            MPI_SUCCESS) {
            MPI_Request_free(&r);
            sent++;
        }
    }
    /* Wait a little for the peers to hear it, so their own messages get out
     * before mpirun ends the job. A peer that fails at the same moment sends a
     * notice instead of an acknowledgement; both count. */
    double t0 = ferry_now(), limit = d->timeout_s < 5 ? d->timeout_s : 5;
    unsigned spins = 0;
    int heard = 0;
    MPI_Request r = MPI_REQUEST_NULL;
    while (heard < sent && ferry_now() - t0 < limit) {
        int flag = 0;
        if (r == MPI_REQUEST_NULL &&
            MPI_Irecv(&d->ack, 1, MPI_CHAR, MPI_ANY_SOURCE, TAG_ACK, d->ctl, &r) != MPI_SUCCESS)
            break;
        if (MPI_Test(&r, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            break;
        if (flag) /* MPI_Test set r to MPI_REQUEST_NULL: post the next one */
            heard++;
        int notice = 0;
        if (!d->heard_abort && MPI_Test(&d->abort_req, &notice, MPI_STATUS_IGNORE) == MPI_SUCCESS &&
            notice) {
            d->heard_abort = true;
            heard++;
        }
        if (!flag && !notice)
            nap(&spins);
    }
    if (r != MPI_REQUEST_NULL) {
        MPI_Cancel(&r);
        MPI_Request_free(&r);
    }
    return ferry_fail(why, "%s", d->abort_out);
}

#if !FERRY_HAVE_NCCL
/* Unreachable without NCCL (d->nccl stays NULL); here so the callers link. */
ferry_status fd_nccl_create(ferry_dist *d, fd_nccl **out)
{
    *out = NULL;
    return ferry_fail(FERRY_ERR_UNSUPPORTED, "rank %d: built without NCCL", d->rank);
}
void fd_nccl_destroy(fd_nccl *n, bool abort) { (void)n, (void)abort; }
ferry_status fd_nccl_all_reduce(ferry_dist *d, void *buf, size_t count, ferry_dtype dt,
                                ferry_reduce_op op, ferry_stream *s)
{
    (void)buf, (void)count, (void)dt, (void)op, (void)s;
    return ferry_fail(FERRY_ERR_UNSUPPORTED, "rank %d: built without NCCL", d->rank);
}
ferry_status fd_nccl_broadcast(ferry_dist *d, void *buf, size_t count, ferry_dtype dt, int root,
                               ferry_stream *s)
{
    (void)buf, (void)count, (void)dt, (void)root, (void)s;
    return ferry_fail(FERRY_ERR_UNSUPPORTED, "rank %d: built without NCCL", d->rank);
}
ferry_status fd_nccl_check(ferry_dist *d) { (void)d; return FERRY_OK; }
const char *fd_nccl_version(char *buf, size_t size)
{
    snprintf(buf, size, "none");
    return buf;
}
#endif

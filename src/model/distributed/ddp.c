/* Data-parallel training: rank 0's parameters at the start, averaged gradients
 * during backward (PyTorch's DistributedDataParallel, without the graph).
 *
 * The module's gradient hook says when a range of parameters has its final
 * gradient. Parameters are grouped, last layer first, into buckets of about
 * bucket_bytes; a bucket whose gradients are all final is copied into its flat
 * buffer and its all-reduce started at once (MPI_Iallreduce, or ncclAllReduce on
 * a stream of its own), so the reduction of the last layers overlaps the
 * backward of the first. Buckets start in one fixed order on every rank, as
 * collectives require. When the last gradient is final, the hook finishes
 * every bucket and copies the averages back, so what is queued after backward
 * sees every rank's same gradients. With MPI the host waits for the reductions
 * (it does them); with NCCL the compute stream waits for the NCCL stream through
 * an event and the host returns at once. Buffers are allocated at create:
 * nothing is allocated per step.
 *
 * The gradients themselves are made views into the bucket buffers at create
 * (PyTorch's gradient_as_bucket_view), so backward writes them where the
 * all-reduce reads them and nothing is copied. If the model later replaces a
 * gradient (moved, converted to half), that bucket falls back to copying. */
#include <stdint.h>
#include <string.h>

#include "common/assert.h"
#include "common/error.h"
#include "model/distributed/internal.h"
#include "model/nn/internal.h"

typedef struct bucket {
    size_t lo, hi;        /* flat parameters [lo, hi); buffers in the range are skipped */
    size_t ntrain;        /* parameters with gradients */
    size_t numel;         /* their elements */
    size_t ready;         /* of ntrain, final in this backward */
    bool in_flight;       /* all-reduce started, not yet waited for */
    ferry_tensor *buf;    /* [numel], the gradients' dtype, on the model's device */
    MPI_Request req;      /* CPU: the MPI_Iallreduce */
} bucket;

struct ferry_ddp {
    ferry_dist *d;
    ferry_module *m;
    bucket *b;
    size_t nb;
    size_t *bucket_of;    /* per flat parameter; SIZE_MAX for buffers */
    bool *ready;          /* per flat parameter, in this backward */
    size_t ntrain, nready;
    size_t next;          /* the next bucket to start */
    bool cuda;
    ferry_stream *comm;   /* CUDA: NCCL runs here, beside backward */
    ferry_event *filled;  /* CUDA: the bucket's copy is done on the compute stream */
    ferry_event *reduced; /* CUDA: every bucket's all-reduce is done on comm */
    bool broken;
};

static ferry_status broken(ferry_ddp *p, ferry_status st)
{
    p->broken = true;
    return st;
}

/* The bucket's flat buffer matches its gradients' dtype (it is made again when
 * the model changed dtype, e.g. mixed precision set up after the ddp). */
static ferry_status bucket_buffer(ferry_ddp *p, bucket *b, ferry_dtype dt)
{
    if (b->buf && ferry_tensor_dtype(b->buf) == dt)
        return FERRY_OK;
    if (!p->cuda && dt != FERRY_DTYPE_F32)
        return ferry_fail(FERRY_ERR_DTYPE,
                          "rank %d: data-parallel training on the CPU all-reduces f32 gradients, not %s",
                          p->d->rank, ferry_dtype_name(dt));
    ferry_tensor_release(b->buf);
    b->buf = NULL;
    int64_t shape[1] = {(int64_t)b->numel};
    return ferry_tensor_empty(shape, 1, dt, p->d->device, &b->buf);
}

/* Whether every gradient of b is still the view into b's buffer made at create. */
static bool bucket_in_place(const ferry_ddp *p, const bucket *b)
{
    const char *flat = ferry_tensor_data(b->buf);
    size_t off = 0;
    for (size_t i = b->lo; i < b->hi; i++) {
        ferry_tensor *g = p->m->flat[i].p->grad;
        if (!g)
            continue;
        if ((const char *)ferry_tensor_data(g) != flat + off)
            return false;
        off += ferry_tensor_nbytes(g);
    }
    return true;
}

/* Copies each gradient of b into (to_buf) or out of its flat buffer, on s,
 * unless they are views into it already. */
static ferry_status bucket_copy(ferry_ddp *p, bucket *b, bool to_buf, ferry_stream *s)
{
    if (bucket_in_place(p, b))
        return FERRY_OK;
    char *flat = ferry_tensor_data(b->buf);
    size_t off = 0;
    ferry_copy_kind kind = p->cuda ? FERRY_COPY_D2D : FERRY_COPY_H2H;
    for (size_t i = b->lo; i < b->hi; i++) {
        ferry_tensor *g = p->m->flat[i].p->grad;
        if (!g)
            continue;
        size_t n = ferry_tensor_nbytes(g);
        FERRY_ASSERT(off + n <= ferry_tensor_nbytes(b->buf));
        void *gp = ferry_tensor_data(g);
        ferry_status st = to_buf ? ferry_memcpy(flat + off, gp, n, kind, p->d->device, s)
                                 : ferry_memcpy(gp, flat + off, n, kind, p->d->device, s);
        if (st != FERRY_OK)
            return st;
        off += n;
    }
    return FERRY_OK;
}

/* The dtype of b's gradients (b->lo always has one: buckets start at a parameter). */
static ferry_dtype bucket_dtype(const ferry_ddp *p, const bucket *b)
{
    return ferry_tensor_dtype(p->m->flat[b->lo].p->grad);
}

static ferry_status start(ferry_ddp *p, bucket *b, ferry_stream *s)
{
    FERRY_ASSERT(!b->in_flight && b->ready == b->ntrain);
    ferry_dtype dt = bucket_dtype(p, b);
    ferry_status st = bucket_buffer(p, b, dt);
    if (st == FERRY_OK)
        st = bucket_copy(p, b, true, s);
    if (st != FERRY_OK)
        return st;
    if (!p->cuda) {
        if ((st = fd_mpi_start_all_reduce(p->d, ferry_tensor_data(b->buf), b->numel, dt, FERRY_REDUCE_SUM,
                                          &b->req)) != FERRY_OK)
            return st;
    } else {
        /* The NCCL stream waits for the copy, then reduces beside backward. */
        if ((st = ferry_event_record(p->filled, s)) != FERRY_OK ||
            (st = ferry_stream_wait_event(p->comm, p->filled)) != FERRY_OK ||
            (st = fd_nccl_all_reduce(p->d, ferry_tensor_data(b->buf), b->numel, dt, FERRY_REDUCE_AVG,
                                     p->comm)) != FERRY_OK)
            return st;
    }
    b->in_flight = true;
    return FERRY_OK;
}

/* CUDA: s waits for every all-reduce queued on comm, on the device; the host
 * goes on. An error NCCL has already reported is caught here; a later one
 * surfaces at the next collective or synchronisation, as CUDA's do. */
static ferry_status wait_reduced(ferry_ddp *p, ferry_stream *s)
{
    ferry_status st = ferry_event_record(p->reduced, p->comm);
    if (st == FERRY_OK)
        st = ferry_stream_wait_event(s, p->reduced);
    if (st == FERRY_OK && p->d->nccl)
        st = fd_nccl_check(p->d);
    if (st == FERRY_OK)
        return FERRY_OK;
    /* The device or NCCL failed: queued collectives may never finish. */
    p->d->failed = true;
    return ferry_fail_prefix(st, "rank %d: ncclAllReduce of the gradient buckets: ", p->d->rank);
}

/* Finishes every bucket, copies the averages back (queued on s, behind the
 * reductions) and readies the next step. */
static ferry_status finish(ferry_ddp *p, ferry_stream *s)
{
    FERRY_ASSERT(p->next == p->nb); /* every gradient final: every bucket started */
    ferry_status st = FERRY_OK;
    if (p->cuda)
        st = wait_reduced(p, s);
    for (size_t k = 0; k < p->nb && st == FERRY_OK; k++) {
        bucket *b = &p->b[k];
        if (!p->cuda) {
            if ((st = fd_mpi_wait(p->d, &b->req, "MPI_Iallreduce of a gradient bucket")) != FERRY_OK)
                break;
            if (p->d->world > 1)
                fd_scale_f32(ferry_tensor_data(b->buf), b->numel, 1.0f / (float)p->d->world);
        }
        b->in_flight = false;
        st = bucket_copy(p, b, false, s);
        b->ready = 0;
    }
    if (st != FERRY_OK)
        return st;
    memset(p->ready, 0, p->m->nflat * sizeof *p->ready);
    p->nready = 0;
    p->next = 0;
    return FERRY_OK;
}

static ferry_status on_grads(void *ctx, ferry_module *m, size_t first, size_t count, ferry_stream *s)
{
    ferry_ddp *p = ctx;
    if (p->broken)
        return ferry_fail(FERRY_ERR_BAD_STATE,
                          "rank %d: an earlier backward failed part-way, so this rank's gradients are "
                          "out of step with the others; stop (ferry_dist_abort)",
                          p->d->rank);
    ferry_status st = fd_usable(p->d, "data-parallel backward");
    if (st != FERRY_OK)
        return broken(p, st);
    for (size_t i = first; i < first + count && i < m->nflat; i++) {
        size_t k = p->bucket_of[i];
        if (k == SIZE_MAX)
            continue;
        if (p->ready[i])
            return broken(p, ferry_fail(FERRY_ERR_BAD_STATE,
                                        "rank %d: gradient of %s reported twice in one backward: an "
                                        "earlier backward stopped part-way on this rank",
                                        p->d->rank, m->flat[i].name));
        p->ready[i] = true;
        p->b[k].ready++;
        p->nready++;
        FERRY_ASSERT(p->b[k].ready <= p->b[k].ntrain && p->nready <= p->ntrain);
    }
    /* Start buckets strictly in order: every rank must call the collectives
     * in the same sequence. */
    while (p->next < p->nb && p->b[p->next].ready == p->b[p->next].ntrain)
        if ((st = start(p, &p->b[p->next++], s)) != FERRY_OK)
            return broken(p, st);
    /* MPI moves non-blocking collectives forward only inside MPI calls. */
    for (size_t k = 0; !p->cuda && k < p->next; k++) {
        bool done = false;
        if (p->b[k].in_flight && p->b[k].req != MPI_REQUEST_NULL &&
            (st = fd_mpi_test(p->d, &p->b[k].req, &done, "MPI_Iallreduce of a gradient bucket")) != FERRY_OK)
            return broken(p, st);
    }
    if (p->nready == p->ntrain && (st = finish(p, s)) != FERRY_OK)
        return broken(p, st);
    return FERRY_OK;
}

/* Makes b's gradients views into its buffer, keeping their values. */
static ferry_status bucket_views(ferry_ddp *p, bucket *b)
{
    int64_t off = 0;
    for (size_t i = b->lo; i < b->hi; i++) {
        fm_param *q = p->m->flat[i].p;
        if (!q->grad)
            continue;
        int64_t n = ferry_tensor_numel(q->grad);
        ferry_tensor *piece = NULL, *view = NULL;
        ferry_status st = ferry_tensor_slice(b->buf, 0, off, off + n, 1, &piece);
        if (st == FERRY_OK)
            st = ferry_tensor_reshape(piece, ferry_tensor_shape(q->grad), ferry_tensor_ndim(q->grad), &view);
        if (st == FERRY_OK)
            st = ferry_tensor_copy(view, q->grad, NULL);
        ferry_tensor_release(piece);
        if (st != FERRY_OK) {
            ferry_tensor_release(view);
            return st;
        }
        ferry_tensor_release(q->grad);
        q->grad = view;
        off += n;
    }
    return FERRY_OK;
}

/* Buckets of about cap bytes, last parameters first (they are final first). */
static ferry_status plan(ferry_ddp *p, size_t cap)
{
    ferry_module *m = p->m;
    p->b = ferry_host_calloc(m->nflat ? m->nflat : 1, sizeof *p->b);
    p->bucket_of = ferry_host_calloc(m->nflat ? m->nflat : 1, sizeof *p->bucket_of);
    p->ready = ferry_host_calloc(m->nflat ? m->nflat : 1, sizeof *p->ready);
    if (!p->b || !p->bucket_of || !p->ready)
        return FERRY_ERR_NO_MEMORY;
    size_t bytes = 0;
    bucket *cur = NULL;
    for (size_t i = m->nflat; i-- > 0;) {
        ferry_tensor *g = m->flat[i].p->grad;
        p->bucket_of[i] = SIZE_MAX;
        if (!g)
            continue;
        size_t n = ferry_tensor_nbytes(g);
        if (!cur || (bytes > 0 && bytes + n > cap)) {
            cur = &p->b[p->nb++];
            cur->hi = i + 1;
            cur->req = MPI_REQUEST_NULL;
            bytes = 0;
        }
        cur->lo = i;
        cur->ntrain++;
        cur->numel += (size_t)ferry_tensor_numel(g);
        if (!p->cuda && cur->numel > INT32_MAX)
            return ferry_fail(FERRY_ERR_LIMIT, "rank %d: %s has more elements than one MPI call takes",
                              p->d->rank, m->flat[i].name);
        bytes += n;
        p->bucket_of[i] = (size_t)(cur - p->b);
        p->ntrain++;
    }
    for (size_t k = 0; k < p->nb; k++) {
        ferry_status st = bucket_buffer(p, &p->b[k], bucket_dtype(p, &p->b[k]));
        if (st == FERRY_OK)
            st = bucket_views(p, &p->b[k]);
        if (st != FERRY_OK)
            return st;
    }
    return FERRY_OK;
}

/* Every rank takes rank 0's values: parameters (and AMP masters), and buffers
 * unless only_buffers says buffers alone. */
static ferry_status broadcast_params(ferry_ddp *p, bool only_buffers, ferry_stream *s)
{
    for (size_t i = 0; i < p->m->nflat; i++) {
        fm_param *q = p->m->flat[i].p;
        if (only_buffers && !q->buffer)
            continue;
        ferry_status st = ferry_dist_broadcast(p->d, q->value, 0, s);
        if (st == FERRY_OK && q->master && q->master != q->value)
            st = ferry_dist_broadcast(p->d, q->master, 0, s);
        if (st != FERRY_OK)
            return ferry_fail_prefix(st, "broadcasting %s: ", p->m->flat[i].name);
    }
    return FERRY_OK;
}

void ferry_ddp_destroy(ferry_ddp *p)
{
    if (!p)
        return;
    if (p->m && p->m->grad_ready == on_grads && p->m->grad_ready_ctx == p)
        ferry_module_set_grad_hook(p->m, NULL, NULL);
    /* The last all-reduce may still be writing the buckets: nothing waited for
     * it on the host. The wait gives up on an abort notice or the timeout, and
     * is not tried once the dist failed (its collectives may never finish). */
    if (p->comm && !p->d->failed)
        (void)fd_wait_stream(p->d, p->d->device, p->comm, __func__);
    for (size_t k = 0; p->b && k < p->nb; k++)
        ferry_tensor_release(p->b[k].buf);
    ferry_event_destroy(p->filled);
    ferry_event_destroy(p->reduced);
    ferry_stream_destroy(p->comm);
    ferry_host_free(p->b);
    ferry_host_free(p->bucket_of);
    ferry_host_free(p->ready);
    ferry_host_free(p);
}

ferry_status ferry_ddp_create(ferry_dist *d, ferry_module *m, size_t bucket_bytes, ferry_ddp **out)
{
    if (!out)
        return FERRY_ARG_ERROR("out is NULL");
    *out = NULL;
    ferry_status st = fd_usable(d, __func__);
    if (st != FERRY_OK)
        return st;
    if (!m)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "rank %d: %s: module is NULL", d->rank, __func__);
    if (!ferry_device_eq(m->device, d->device)) {
        char a[FERRY_DEVICE_NAME_MAX], b[FERRY_DEVICE_NAME_MAX];
        return ferry_fail(FERRY_ERR_DEVICE_MISMATCH,
                          "rank %d: %s: the model is on %s but this rank uses %s; move it "
                          "with ferry_module_to(m, ferry_dist_device(d)) first",
                          d->rank, __func__, ferry_device_format(m->device, a, sizeof a),
                          ferry_device_format(d->device, b, sizeof b));
    }
    if (m->grad_ready)
        return ferry_fail(FERRY_ERR_BAD_STATE, "rank %d: %s: %s already has a gradient hook", d->rank,
                          __func__, m->name);
    ferry_ddp *p = ferry_host_calloc(1, sizeof *p);
    if (!p)
        return FERRY_ERR_NO_MEMORY;
    p->d = d;
    p->m = m;
    p->cuda = d->device.type == FERRY_DEVICE_CUDA;
    if (p->cuda) {
        st = ferry_stream_create(d->device, &p->comm);
        if (st == FERRY_OK)
            st = ferry_event_create(d->device, false, &p->filled);
        if (st == FERRY_OK)
            st = ferry_event_create(d->device, false, &p->reduced);
    }
    if (st == FERRY_OK)
        st = plan(p, bucket_bytes ? bucket_bytes : (size_t)25 << 20);
    if (st == FERRY_OK)
        st = broadcast_params(p, false, NULL);
    if (st == FERRY_OK)
        st = ferry_module_set_grad_hook(m, on_grads, p);
    if (st != FERRY_OK) {
        ferry_ddp_destroy(p);
        return st;
    }
    *out = p;
    return FERRY_OK;
}

size_t ferry_ddp_bucket_count(const ferry_ddp *p) { return p ? p->nb : 0; }

ferry_status ferry_ddp_sync_buffers(ferry_ddp *p, ferry_stream *s)
{
    if (!p)
        return FERRY_ARG_ERROR("ddp is NULL");
    return broadcast_params(p, true, s);
}

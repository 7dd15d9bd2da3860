/* Losses (cross-entropy from logits, MSE) and the device-side metrics they add
 * to. The cross-entropy kernel is fused: softmax, loss, argmax and the gradient
 * in one pass over the logits. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/error.h"
#include "model/nn/internal.h"
#include "model/ops/common.h"

struct ferry_metrics {
    ferry_device device;
    ferry_tensor *loss;  /* f32 [1]: sum over samples of each sample's loss */
    ferry_tensor *ints;  /* i64 [2]: correct predictions, labels out of range */
    int64_t count;       /* samples added */
    int64_t classified;  /* samples added by a classification loss */
    int64_t bad_seen;    /* ints[1] as cross-entropy last read it back */
};

ferry_status ferry_metrics_create(ferry_device d, ferry_metrics **out)
{
    d = ferry_device_resolve(d);
    if (!out)
        return FERRY_ARG_ERROR("out is NULL");
    ferry_metrics *m = ferry_host_calloc(1, sizeof *m);
    if (!m)
        return FERRY_ERR_NO_MEMORY;
    m->device = d;
    int64_t one = 1, two = 2;
    ferry_status st = ferry_tensor_zeros(&one, 1, FERRY_DTYPE_F32, d, &m->loss);
    if (st == FERRY_OK)
        st = ferry_tensor_zeros(&two, 1, FERRY_DTYPE_I64, d, &m->ints);
    if (st != FERRY_OK) {
        ferry_metrics_destroy(m);
        return st;
    }
    *out = m;
    return FERRY_OK;
}

void ferry_metrics_destroy(ferry_metrics *m)
{
    if (!m)
        return;
    ferry_tensor_release(m->loss);
    ferry_tensor_release(m->ints);
    ferry_host_free(m);
}

ferry_status ferry_metrics_reset(ferry_metrics *m, ferry_stream *s)
{
    if (!m)
        return FERRY_ARG_ERROR("metrics is NULL");
    ferry_status st = ferry_tensor_fill(m->loss, 0.0, s);
    if (st == FERRY_OK)
        st = ferry_tensor_fill(m->ints, 0.0, s);
    m->count = m->classified = m->bad_seen = 0;
    return st;
}

void fm_metrics_add_rows(ferry_metrics *m, int64_t rows)
{
    if (m) {
        m->count += rows;
        m->classified += rows;
    }
}

ferry_status ferry_metrics_get(ferry_metrics *m, double *loss, double *accuracy, int64_t *count)
{
    if (!m)
        return FERRY_ARG_ERROR("metrics is NULL");
    float l = 0;
    int64_t ints[2] = {0, 0};
    /* The losses may have been queued on any stream of the device: wait for all. */
    ferry_status st = ferry_device_synchronize(m->device);
    if (st == FERRY_OK)
        st = ferry_tensor_copy_to_host(m->loss, &l, sizeof l);
    if (st == FERRY_OK)
        st = ferry_tensor_copy_to_host(m->ints, ints, sizeof ints);
    if (st != FERRY_OK)
        return st;
    if (ints[1])
        return ferry_fail(FERRY_ERR_INVALID_ARG,
                          "%lld labels were outside [0, classes) in cross-entropy since the last reset",
                          (long long)ints[1]);
    if (loss)
        *loss = m->count ? (double)l / (double)m->count : 0.0;
    if (accuracy)
        *accuracy = m->classified ? (double)ints[0] / (double)m->classified : 0.0;
    if (count)
        *count = m->count;
    return FERRY_OK;
}

ferry_status fm_metrics_format(ferry_metrics *m, char *buf, size_t size)
{
    float l = 0;
    int64_t ints[2] = {0, 0};
    ferry_status st = ferry_device_synchronize(m->device);
    if (st == FERRY_OK)
        st = ferry_tensor_copy_to_host(m->loss, &l, sizeof l);
    if (st == FERRY_OK)
        st = ferry_tensor_copy_to_host(m->ints, ints, sizeof ints);
    if (st != FERRY_OK)
        return st;
    uint32_t bits;
    memcpy(&bits, &l, sizeof bits);
    snprintf(buf, size, "ferry-metrics/1 loss=%08" PRIx32 " correct=%" PRId64 " bad=%" PRId64
             " count=%" PRId64 " classified=%" PRId64 " bad_seen=%" PRId64, bits, ints[0], ints[1],
             m->count, m->classified, m->bad_seen);
    return FERRY_OK;
}

ferry_status fm_metrics_parse(ferry_metrics *m, const char *text, bool apply)
{
    uint32_t bits = 0;
    int64_t ints[2], count, classified, bad_seen;
    int end = 0;
    if (sscanf(text, "ferry-metrics/1 loss=%8" SCNx32 " correct=%" SCNd64 " bad=%" SCNd64
               " count=%" SCNd64 " classified=%" SCNd64 " bad_seen=%" SCNd64 "%n", &bits, &ints[0],
               &ints[1], &count, &classified, &bad_seen, &end) != 6 || text[end] != '\0' ||
        ints[0] < 0 || ints[1] < 0 || count < 0 || classified < 0 || classified > count ||
        ints[0] > classified || bad_seen < 0)
        return ferry_fail(FERRY_ERR_FORMAT, "metrics \"%.80s\" is not ferry-metrics/1 with counts "
                          "that fit together", text);
    if (!apply)
        return FERRY_OK;
    float l;
    memcpy(&l, &bits, sizeof l);
    int64_t one = 1, two = 2;
    ferry_tensor *hl = NULL, *hi = NULL;
    ferry_status st = ferry_tensor_from_host(&l, &one, 1, FERRY_DTYPE_F32, ferry_cpu(), &hl);
    if (st == FERRY_OK)
        st = ferry_tensor_from_host(ints, &two, 1, FERRY_DTYPE_I64, ferry_cpu(), &hi);
    if (st == FERRY_OK)
        st = ferry_tensor_copy(m->loss, hl, NULL);
    if (st == FERRY_OK)
        st = ferry_tensor_copy(m->ints, hi, NULL);
    ferry_tensor_release(hl);
    ferry_tensor_release(hi);
    if (st == FERRY_OK) {
        m->count = count;
        m->classified = classified;
        m->bad_seen = bad_seen;
    }
    return st;
}

static ferry_status check_metrics(ferry_metrics *mt, const ferry_tensor *t, const char *op)
{
    if (!mt || ferry_device_eq(mt->device, t->device))
        return FERRY_OK;
    char a[FERRY_DEVICE_NAME_MAX], b[FERRY_DEVICE_NAME_MAX];
    return ferry_fail(FERRY_ERR_DEVICE_MISMATCH,
                      "expected all tensors to be on the same device, but found %s and %s (metrics in %s)",
                      ferry_device_format(t->device, a, sizeof a), ferry_device_format(mt->device, b, sizeof b), op);
}

ferry_status ferry_cross_entropy(ferry_tensor *logits, ferry_tensor *labels, float grad_scale,
                                 ferry_metrics *metrics, ferry_stream *s, ferry_tensor **dlogits)
{
    return fm_cross_entropy_(logits, labels, grad_scale, NULL, true, metrics, s, NULL, dlogits);
}

ferry_status fm_cross_entropy_(ferry_tensor *logits, ferry_tensor *labels, float grad_scale,
                               const ferry_tensor *scale, bool check_now, ferry_metrics *metrics, ferry_stream *s,
                               ferry_tensor **dslot, ferry_tensor **dlogits)
{
    const char *op = "ferry_cross_entropy";
    ferry_status st = fm_check_arg(logits, "logits", op);
    if (st == FERRY_OK)
        st = fm_check_arg(labels, "labels", op);
    if (st == FERRY_OK)
        st = fm_check_device(logits, labels, op);
    if (st == FERRY_OK && scale)
        st = fm_check_device(logits, scale, op);
    if (st == FERRY_OK)
        st = fm_check_float(logits, op);
    if (st == FERRY_OK)
        st = check_metrics(metrics, logits, op);
    if (st != FERRY_OK)
        return st;
    if (labels->dtype != FERRY_DTYPE_I64 && labels->dtype != FERRY_DTYPE_I32)
        return ferry_fail(FERRY_ERR_DTYPE, "%s: labels must be i64 or i32, got %s", op,
                          ferry_dtype_name(labels->dtype));
    char a[128], b[128];
    if (logits->ndim != 2 || labels->ndim != 1 || labels->shape[0] != logits->shape[0])
        return ferry_fail(FERRY_ERR_SHAPE, "%s: expected logits [N, C] and labels [N], got %s and %s", op,
                          fm_shape_str(logits, a, sizeof a), fm_shape_str(labels, b, sizeof b));
    int64_t rows = logits->shape[0], classes = logits->shape[1];
    if (classes < 1)
        return ferry_fail(FERRY_ERR_SHAPE, "%s: logits %s have no classes", op, fm_shape_str(logits, a, sizeof a));
    ferry_tensor *x = NULL, *y = NULL, *d = NULL;
    st = ferry_tensor_contiguous(logits, s, &x);
    if (st == FERRY_OK)
        st = ferry_tensor_contiguous(labels, s, &y);
    if (st == FERRY_OK && dlogits)
        st = dslot ? fm_buffer(dslot, x->shape, 2, x->dtype, x->device, s, &d)
                   : ferry_tensor_empty_on_(x->shape, 2, x->dtype, x->device, s, &d);
    /* Out-of-range labels are counted on the device, into metrics->ints[1] (which
     * counts since the last reset) or a scratch i64. Without metrics, or when the
     * caller asks (ferry_cross_entropy), the count is read back here, on every
     * device alike: that read synchronises stream s once per call, the price of
     * rejecting a bad label when it is passed. ferry_train_step with metrics does
     * not pay it: the bad rows add nothing (no loss, no gradient) and
     * ferry_metrics_get reports them, so a step never waits on the host. */
    ferry_tensor *scratch = NULL;
    int64_t *bad = NULL;
    if (st == FERRY_OK) {
        if (metrics) {
            bad = (int64_t *)ferry_tensor_data(metrics->ints) + 1;
        } else {
            int64_t one = 1;
            st = ferry_tensor_empty_on_(&one, 1, FERRY_DTYPE_I64, x->device, s, &scratch);
            if (st == FERRY_OK)
                st = ferry_tensor_fill(scratch, 0.0, s);
            if (st == FERRY_OK)
                bad = ferry_tensor_data(scratch);
        }
    }
    int64_t bad_now = 0, bad_before = metrics ? metrics->bad_seen : 0;
    if (st == FERRY_OK) {
        /* x and y exist here: ferry_tensor_contiguous sets its out exactly on FERRY_OK. */
        fk_ctx c = fm_ctx(x, s);
        float *lp = metrics ? ferry_tensor_data(metrics->loss) : NULL;
        int64_t *ip = metrics ? ferry_tensor_data(metrics->ints) : NULL;
        float gscale = rows ? grad_scale / (float)rows : 0.0f;
        fk_xent r = {.rows = rows,
                     .classes = classes,
                     .loss = lp,
                     .correct = ip,
                     .bad = bad,
                     .gscale = gscale,
                     .gnum = scale ? (const float *)ferry_tensor_data(scale) : NULL};
        st = FK(&c, cross_entropy, x->dtype, ferry_tensor_data(x), y->dtype, ferry_tensor_data(y),
                d ? ferry_tensor_data(d) : NULL, &r);
    }
    bool read_back = check_now || !metrics;
    /* One wait: a copy into pageable memory (bad_now, on the stack) returns
     * once it has completed, the async form included (CUDA's "API
     * synchronization behavior"), with the stream's earlier errors; a stream
     * synchronisation after it would be a second wait for nothing. */
    if (st == FERRY_OK && read_back)
        st = ferry_memcpy(&bad_now, bad, sizeof bad_now, FERRY_COPY_D2H, x->device, s);
    if (st == FERRY_OK && metrics && read_back)
        metrics->bad_seen = bad_now;
    if (!read_back)
        bad_now = bad_before;
    if (st == FERRY_OK && bad_now != bad_before)
        st = ferry_arg_error_(op, "%lld of %lld labels are outside [0, %lld)", (long long)(bad_now - bad_before),
                              (long long)rows, (long long)classes);
    ferry_tensor_release(scratch);
    ferry_tensor_release(x);
    ferry_tensor_release(y);
    if (st != FERRY_OK) {
        ferry_tensor_release(d);
        return st;
    }
    if (metrics) {
        metrics->count += rows;
        metrics->classified += rows;
    }
    if (dlogits)
        *dlogits = d;
    return FERRY_OK;
}

ferry_status ferry_mse_loss(ferry_tensor *pred, ferry_tensor *target, float grad_scale,
                            ferry_metrics *metrics, ferry_stream *s, ferry_tensor **dpred)
{
    const char *op = __func__;
    ferry_status st = fm_check_arg(pred, "pred", op);
    if (st == FERRY_OK)
        st = fm_check_arg(target, "target", op);
    if (st == FERRY_OK)
        st = fm_check_device(pred, target, op);
    if (st == FERRY_OK)
        st = fm_check_dtype(pred, target, op);
    if (st == FERRY_OK)
        st = fm_check_float(pred, op);
    if (st == FERRY_OK)
        st = check_metrics(metrics, pred, op);
    if (st != FERRY_OK)
        return st;
    char a[128], b[128];
    if (pred->ndim != target->ndim || memcmp(pred->shape, target->shape, pred->ndim * sizeof(int64_t)) != 0)
        return ferry_fail(FERRY_ERR_SHAPE, "%s: pred %s and target %s must have one shape", op,
                          fm_shape_str(pred, a, sizeof a), fm_shape_str(target, b, sizeof b));
    ferry_tensor *p = NULL, *t = NULL, *d = NULL;
    st = ferry_tensor_contiguous(pred, s, &p);
    if (st == FERRY_OK)
        st = ferry_tensor_contiguous(target, s, &t);
    if (st == FERRY_OK && dpred)
        st = ferry_tensor_empty_on_(p->shape, p->ndim, p->dtype, p->device, s, &d);
    int64_t n = pred->numel, rows = pred->ndim ? pred->shape[0] : 1;
    if (st == FERRY_OK) {
        fk_ctx c = fm_ctx(p, s);
        /* Metrics count samples (rows): each adds its mean over the other dims. */
        float lscale = n ? (float)rows / (float)n : 0.0f;
        st = FK(&c, mse, p->dtype, ferry_tensor_data(p), ferry_tensor_data(t), n,
                metrics ? (float *)ferry_tensor_data(metrics->loss) : NULL, lscale,
                d ? ferry_tensor_data(d) : NULL, n ? grad_scale / (float)n : 0.0f);
    }
    ferry_tensor_release(p);
    ferry_tensor_release(t);
    if (st != FERRY_OK) {
        ferry_tensor_release(d);
        return st;
    }
    if (metrics)
        metrics->count += rows;
    if (dpred)
        *dpred = d;
    return FERRY_OK;
}

/* Reductions over one dim (sum, mean, max, argmax) and softmax/log_softmax.
 * The input is made contiguous and seen as [outer, n, inner], so one kernel
 * shape serves every dim. */
#include "common/error.h"
#include "model/ops/common.h"

static void split_dims(const ferry_tensor *t, size_t dim, int64_t *outer, int64_t *n, int64_t *inner)
{
    const int64_t *sh = ferry_tensor_shape(t);
    size_t nd = ferry_tensor_ndim(t);
    *outer = 1;
    *inner = 1;
    for (size_t i = 0; i < dim; i++)
        *outer *= sh[i];
    for (size_t i = dim + 1; i < nd; i++)
        *inner *= sh[i];
    *n = sh[dim];
}

static ferry_status reduce(fk_rop op, ferry_tensor *a, int64_t dim, bool keepdim, ferry_stream *s,
                           const char *name, ferry_tensor **out)
{
    ferry_status st = fm_check_arg(a, "a", name);
    if (st == FERRY_OK)
        st = fm_check_out(out, name);
    if (st == FERRY_OK)
        st = fm_check_float(a, name);
    size_t d = 0;
    if (st == FERRY_OK)
        st = fm_norm_dim(a, dim, name, &d);
    if (st != FERRY_OK)
        return st;
    if ((op == FK_MAX || op == FK_ARGMAX) && ferry_tensor_dim(a, d) == 0) {
        char sb[128];
        return ferry_fail(FERRY_ERR_SHAPE, "cannot take the max over dim %zu of size 0 (shape %s, in %s)",
                          d, fm_shape_str(a, sb, sizeof sb), name);
    }
    ferry_tensor *x = NULL, *y = NULL;
    st = ferry_tensor_contiguous(a, s, &x);
    if (st == FERRY_OK) {
        ferry_tensor *x32 = NULL;
        st = fm_cpu_f32(x, &x32);
        ferry_tensor_release(x);
        x = x32;
    }
    if (st != FERRY_OK)
        return st;
    int64_t shape[FERRY_MAX_DIMS];
    size_t nd = 0, an = ferry_tensor_ndim(a);
    for (size_t i = 0; i < an; i++) {
        if (i == d && !keepdim)
            continue;
        shape[nd++] = i == d ? 1 : ferry_tensor_dim(a, i);
    }
    ferry_dtype xdt = ferry_tensor_dtype(x);
    ferry_dtype ydt = op == FK_ARGMAX ? FERRY_DTYPE_I64 : xdt;
    st = fm_empty_like_shape(a, shape, nd, ydt, s, &y);
    if (st == FERRY_OK) {
        int64_t outer, n, inner;
        split_dims(x, d, &outer, &n, &inner);
        fk_ctx c = fm_ctx(a, s);
        st = FK(&c, reduce, op, xdt, ferry_tensor_data(y), ferry_tensor_data(x), outer, n, inner);
    }
    /* CPU half inputs were reduced in f32; round the result back. */
    if (st == FERRY_OK && ydt != FERRY_DTYPE_I64 && ferry_tensor_dtype(a) != xdt) {
        ferry_tensor *r = NULL;
        st = ferry_affine(y, 1.0, 0.0, ferry_tensor_dtype(a), s, &r);
        ferry_tensor_release(y);
        y = r;
    }
    ferry_tensor_release(x);
    if (st != FERRY_OK) {
        ferry_tensor_release(y);
        return st;
    }
    *out = y;
    return FERRY_OK;
}

ferry_status ferry_sum(ferry_tensor *a, int64_t dim, bool keepdim, ferry_stream *s, ferry_tensor **out)
{
    return reduce(FK_SUM, a, dim, keepdim, s, __func__, out);
}
ferry_status ferry_mean(ferry_tensor *a, int64_t dim, bool keepdim, ferry_stream *s, ferry_tensor **out)
{
    return reduce(FK_MEAN, a, dim, keepdim, s, __func__, out);
}
ferry_status ferry_max(ferry_tensor *a, int64_t dim, bool keepdim, ferry_stream *s, ferry_tensor **out)
{
    return reduce(FK_MAX, a, dim, keepdim, s, __func__, out);
}
ferry_status ferry_argmax(ferry_tensor *a, int64_t dim, bool keepdim, ferry_stream *s, ferry_tensor **out)
{
    return reduce(FK_ARGMAX, a, dim, keepdim, s, __func__, out);
}

static ferry_status softmax(bool log_, ferry_tensor *a, int64_t dim, ferry_stream *s, const char *name,
                            ferry_tensor **out)
{
    ferry_status st = fm_check_arg(a, "a", name);
    if (st == FERRY_OK)
        st = fm_check_out(out, name);
    if (st == FERRY_OK)
        st = fm_check_float(a, name);
    size_t d = 0;
    if (st == FERRY_OK)
        st = fm_norm_dim(a, dim, name, &d);
    if (st != FERRY_OK)
        return st;
    ferry_tensor *x = NULL, *y = NULL;
    st = ferry_tensor_contiguous(a, s, &x);
    if (st != FERRY_OK)
        return st;
    st = fm_empty_like_shape(a, ferry_tensor_shape(a), ferry_tensor_ndim(a), ferry_tensor_dtype(a), s, &y);
    if (st == FERRY_OK) {
        int64_t outer, n, inner;
        split_dims(x, d, &outer, &n, &inner);
        fk_ctx c = fm_ctx(a, s);
        st = FK(&c, softmax, log_, ferry_tensor_dtype(a), ferry_tensor_data(y), ferry_tensor_data(x),
                outer, n, inner);
    }
    ferry_tensor_release(x);
    if (st != FERRY_OK) {
        ferry_tensor_release(y);
        return st;
    }
    *out = y;
    return FERRY_OK;
}

ferry_status ferry_softmax(ferry_tensor *a, int64_t dim, ferry_stream *s, ferry_tensor **out)
{
    return softmax(false, a, dim, s, __func__, out);
}
ferry_status ferry_log_softmax(ferry_tensor *a, int64_t dim, ferry_stream *s, ferry_tensor **out)
{
    return softmax(true, a, dim, s, __func__, out);
}

/* Views: reshape, slice, transpose, flatten. They share the base tensor's
 * storage (ferry_tensor_view_); reshape of a non-contiguous tensor copies. */
#include "common/error.h"
#include "model/ops/common.h"
#include "tensor/internal.h"

ferry_status ferry_tensor_reshape(ferry_tensor *t, const int64_t *shape, size_t ndim,
                                  ferry_tensor **out)
{
    const char *op = __func__;
    ferry_status st = fm_check_arg(t, "t", op);
    if (st == FERRY_OK)
        st = fm_check_out(out, op);
    if (st != FERRY_OK)
        return st;
    if (ndim && !shape)
        return ferry_arg_error_(op, "shape is NULL with %zu dims", ndim);
    if (ndim > FERRY_MAX_DIMS)
        return ferry_fail(FERRY_ERR_SHAPE, "%s: %zu dims (at most %d)", op, ndim,
                          FERRY_MAX_DIMS);
    int64_t sh[FERRY_MAX_DIMS], known = 1;
    int infer = -1;
    char a[128], b[128];
    for (size_t i = 0; i < ndim; i++) {
        sh[i] = shape[i];
        if (shape[i] == -1 && infer < 0) {
            infer = (int)i;
            continue;
        }
        if (shape[i] < 0 || (shape[i] && known > INT64_MAX / shape[i]))
            return ferry_fail(FERRY_ERR_SHAPE, "%s: cannot reshape a tensor of shape %s into %s", op,
                              fm_shape_str(t, a, sizeof a), fm_dims_str(shape, ndim, b, sizeof b));
        known *= shape[i];
    }
    if (infer >= 0) {
        if (known == 0 || t->numel % known != 0)
            return ferry_fail(FERRY_ERR_SHAPE, "%s: cannot reshape a tensor of shape %s into %s", op,
                              fm_shape_str(t, a, sizeof a), fm_dims_str(shape, ndim, b, sizeof b));
        sh[infer] = t->numel / known;
        known *= sh[infer];
    }
    if (known != t->numel)
        return ferry_fail(FERRY_ERR_SHAPE, "%s: cannot reshape a tensor of shape %s (%lld elements) into %s", op,
                          fm_shape_str(t, a, sizeof a), (long long)t->numel,
                          fm_dims_str(shape, ndim, b, sizeof b));
    ferry_tensor *base = NULL;
    st = ferry_tensor_contiguous(t, NULL, &base);
    if (st != FERRY_OK)
        return st;
    int64_t strides[FERRY_MAX_DIMS];
    ferry_contiguous_strides_(sh, ndim, strides);
    st = ferry_tensor_view_(base, sh, strides, ndim, base->offset, out);
    ferry_tensor_release(base);
    return st;
}

ferry_status ferry_tensor_slice(ferry_tensor *t, int64_t dim, int64_t start, int64_t end,
                                int64_t step, ferry_tensor **out)
{
    const char *op = __func__;
    ferry_status st = fm_check_arg(t, "t", op);
    if (st == FERRY_OK)
        st = fm_check_out(out, op);
    size_t d = 0;
    if (st == FERRY_OK)
        st = fm_norm_dim(t, dim, op, &d);
    if (st != FERRY_OK)
        return st;
    if (step <= 0)
        return ferry_arg_error_(op, "slice step must be positive, got %lld", (long long)step);
    int64_t n = t->shape[d];
    if (start < 0)
        start += n;
    if (end < 0)
        end += n;
    start = start < 0 ? 0 : start > n ? n : start;
    end = end < start ? start : end > n ? n : end;
    int64_t shape[FERRY_MAX_DIMS], strides[FERRY_MAX_DIMS];
    for (size_t i = 0; i < t->ndim; i++) {
        shape[i] = t->shape[i];
        strides[i] = t->strides[i];
    }
    shape[d] = (end - start + step - 1) / step;
    strides[d] = t->strides[d] * step;
    int64_t offset = t->offset + (shape[d] ? start * t->strides[d] : 0);
    return ferry_tensor_view_(t, shape, strides, t->ndim, offset, out);
}

ferry_status ferry_tensor_transpose(ferry_tensor *t, int64_t dim0, int64_t dim1, ferry_tensor **out)
{
    const char *op = __func__;
    ferry_status st = fm_check_arg(t, "t", op);
    if (st == FERRY_OK)
        st = fm_check_out(out, op);
    size_t d0 = 0, d1 = 0;
    if (st == FERRY_OK)
        st = fm_norm_dim(t, dim0, op, &d0);
    if (st == FERRY_OK)
        st = fm_norm_dim(t, dim1, op, &d1);
    if (st != FERRY_OK)
        return st;
    int64_t shape[FERRY_MAX_DIMS], strides[FERRY_MAX_DIMS];
    for (size_t i = 0; i < t->ndim; i++) {
        shape[i] = t->shape[i];
        strides[i] = t->strides[i];
    }
    shape[d0] = t->shape[d1];
    shape[d1] = t->shape[d0];
    strides[d0] = t->strides[d1];
    strides[d1] = t->strides[d0];
    return ferry_tensor_view_(t, shape, strides, t->ndim, t->offset, out);
}

ferry_status ferry_tensor_flatten(ferry_tensor *t, ferry_tensor **out)
{
    ferry_status st = fm_check_arg(t, "t", __func__);
    if (st == FERRY_OK)
        st = fm_check_out(out, __func__);
    if (st != FERRY_OK)
        return st;
    if (t->ndim < 1)
        return ferry_fail(FERRY_ERR_SHAPE, "%s: cannot flatten a 0-d tensor", __func__);
    int64_t shape[2] = {t->shape[0], -1};
    if (t->shape[0] == 0) {
        int64_t rest = 1;
        for (size_t i = 1; i < t->ndim; i++)
            rest *= t->shape[i];
        shape[1] = rest;
    }
    return ferry_tensor_reshape(t, shape, 2, out);
}

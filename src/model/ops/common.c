/* Shared checks and helpers for the tensor ops (see ops/common.h). */
#include <stdio.h>
#include <string.h>

#include "device/backend.h"
#include "device/device_internal.h"
#include "common/error.h"
#include "model/ops/common.h"
#include "tensor/internal.h"

fk_ctx fk_ctx_make(ferry_device d, ferry_stream *s)
{
    fk_ctx c;
    ferry_status st;
    const ferry_backend *b = ferry_backend_for(d, &st);
    c.dev = d;
    /* A stream of another device gets no kernels: FK() then fails with the
     * mismatch (fk_no_backend) instead of queueing onto a foreign stream. */
    c.k = b && (!s || ferry_device_eq(ferry_stream_device(s), d)) ? fk_table_for(b) : NULL;
    c.stream = s;
    c.native = s ? ferry_stream_native(s) : NULL;
    return c;
}

fk_ctx fm_ctx(const ferry_tensor *t, ferry_stream *s)
{
    return fk_ctx_make(ferry_tensor_device(t), s);
}

const char *fm_dims_str(const int64_t *shape, size_t ndim, char *buf, size_t size)
{
    return ferry_shape_format_(shape, ndim, buf, size);
}

const char *fm_shape_str(const ferry_tensor *t, char *buf, size_t size)
{
    return fm_dims_str(ferry_tensor_shape(t), ferry_tensor_ndim(t), buf, size);
}

ferry_status fm_check_arg(const ferry_tensor *t, const char *name, const char *op)
{
    if (t)
        return FERRY_OK;
    return ferry_arg_error_(op, "%s is NULL", name);
}

ferry_status fm_check_out(const void *out, const char *op)
{
    return out ? FERRY_OK : ferry_arg_error_(op, "out is NULL");
}

ferry_status fm_check_device(const ferry_tensor *a, const ferry_tensor *b, const char *op)
{
    ferry_device da = ferry_tensor_device(a), db = ferry_tensor_device(b);
    if (ferry_device_eq(da, db))
        return FERRY_OK;
    char na[FERRY_DEVICE_NAME_MAX], nb[FERRY_DEVICE_NAME_MAX];
    return ferry_fail(FERRY_ERR_DEVICE_MISMATCH,
                      "%s: expected all tensors to be on the same device, but found %s and %s", op,
                      ferry_device_format(da, na, sizeof na), ferry_device_format(db, nb, sizeof nb));
}

ferry_status fm_check_dtype(const ferry_tensor *a, const ferry_tensor *b, const char *op)
{
    ferry_dtype x = ferry_tensor_dtype(a), y = ferry_tensor_dtype(b);
    if (x == y)
        return FERRY_OK;
    return ferry_fail(FERRY_ERR_DTYPE,
                      "%s: expected both tensors to have the same dtype, but found %s and %s", op,
                      ferry_dtype_name(x), ferry_dtype_name(y));
}

bool fm_is_float(ferry_dtype dt)
{
    return dt == FERRY_DTYPE_F32 || dt == FERRY_DTYPE_F16 || dt == FERRY_DTYPE_BF16;
}

ferry_status fm_check_float(const ferry_tensor *a, const char *op)
{
    if (fm_is_float(ferry_tensor_dtype(a)))
        return FERRY_OK;
    return ferry_fail(FERRY_ERR_DTYPE, "%s: expected a floating tensor (f32, f16, bf16), but found %s", op,
                      ferry_dtype_name(ferry_tensor_dtype(a)));
}

ferry_status fm_norm_dim(const ferry_tensor *t, int64_t dim, const char *op, size_t *out)
{
    int64_t nd = (int64_t)ferry_tensor_ndim(t);
    int64_t d = dim < 0 ? dim + nd : dim;
    if (d < 0 || d >= nd) {
        char sb[128];
        return ferry_fail(FERRY_ERR_SHAPE, "%s: dim %lld is out of range for a tensor of shape %s", op,
                          (long long)dim, fm_shape_str(t, sb, sizeof sb));
    }
    *out = (size_t)d;
    return FERRY_OK;
}

static void bcast_strides(int64_t *dst, const ferry_tensor *t, size_t ndim, const int64_t *shape)
{
    size_t tn = ferry_tensor_ndim(t);
    const int64_t *ts = ferry_tensor_shape(t), *st = ferry_tensor_strides(t);
    for (size_t i = 0; i < ndim; i++) {
        size_t off = ndim - 1 - i;
        if (i < tn) {
            size_t ti = tn - 1 - i;
            dst[off] = ts[ti] == 1 && shape[off] != 1 ? 0 : st[ti];
        } else {
            dst[off] = 0;
        }
    }
}

void fm_nd_make(fk_nd *nd, const ferry_tensor *out, const ferry_tensor *a, const ferry_tensor *b)
{
    memset(nd, 0, sizeof *nd);
    size_t n = ferry_tensor_ndim(out);
    const int64_t *shape = ferry_tensor_shape(out);
    nd->ndim = (int)n;
    for (size_t i = 0; i < n; i++)
        nd->shape[i] = shape[i];
    memcpy(nd->so, ferry_tensor_strides(out), n * sizeof(int64_t));
    if (a)
        bcast_strides(nd->sa, a, n, shape);
    if (b)
        bcast_strides(nd->sb, b, n, shape);
    nd->numel = ferry_tensor_numel(out);
    /* Merge adjacent dims that are contiguous in every operand: most ops then
     * run as one long row. */
    int w = 0;
    for (int i = 0; i < nd->ndim; i++) {
        if (nd->shape[i] == 1)
            continue;
        if (w > 0 && nd->so[w - 1] == nd->so[i] * nd->shape[i] &&
            nd->sa[w - 1] == nd->sa[i] * nd->shape[i] && nd->sb[w - 1] == nd->sb[i] * nd->shape[i]) {
            nd->shape[w - 1] *= nd->shape[i];
            nd->so[w - 1] = nd->so[i];
            nd->sa[w - 1] = nd->sa[i];
            nd->sb[w - 1] = nd->sb[i];
            continue;
        }
        nd->shape[w] = nd->shape[i];
        nd->so[w] = nd->so[i];
        nd->sa[w] = nd->sa[i];
        nd->sb[w] = nd->sb[i];
        w++;
    }
    if (w == 0 && nd->numel == 1) {
        nd->shape[0] = 1;
        nd->so[0] = nd->sa[0] = nd->sb[0] = 0;
        w = 1;
    }
    nd->ndim = w;
}

ferry_status fm_empty_like_shape(const ferry_tensor *a, const int64_t *shape, size_t ndim,
                                 ferry_dtype dt, ferry_stream *s, ferry_tensor **out)
{
    return ferry_tensor_empty_on_(shape, ndim, dt, ferry_tensor_device(a), s, out);
}

ferry_status fm_cpu_f32(ferry_tensor *t, ferry_tensor **out)
{
    ferry_dtype dt = ferry_tensor_dtype(t);
    if (ferry_tensor_device(t).type == FERRY_DEVICE_CPU && dt != FERRY_DTYPE_F32) {
        ferry_tensor *r = NULL;
        ferry_status st = fm_empty_like_shape(t, ferry_tensor_shape(t), ferry_tensor_ndim(t),
                                              FERRY_DTYPE_F32, NULL, &r);
        if (st == FERRY_OK)
            st = ferry_tensor_copy(r, t, NULL);
        if (st != FERRY_OK) {
            ferry_tensor_release(r);
            return st;
        }
        *out = r;
        return FERRY_OK;
    }
    *out = ferry_tensor_retain(t);
    return FERRY_OK;
}

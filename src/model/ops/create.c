/* Tensor creation beyond the core (ones, full, arange, rand, randn) and the
 * copy family (fill, copy, clone, contiguous, item). */
#include <math.h>
#include <string.h>

#include "common/error.h"
#include "ferry/rng.h"
#include "device/device_internal.h"
#include "model/ops/common.h"

ferry_status ferry_tensor_fill(ferry_tensor *t, double value, ferry_stream *s)
{
    ferry_status st = fm_check_arg(t, "t", __func__);
    if (st != FERRY_OK)
        return st;
    fk_nd nd;
    fm_nd_make(&nd, t, NULL, NULL);
    fk_ctx c = fm_ctx(t, s);
    return FK(&c, fill, ferry_tensor_dtype(t), ferry_tensor_data(t), &nd, value);
}

ferry_status ferry_tensor_full(const int64_t *shape, size_t ndim, double value, ferry_dtype dt,
                               ferry_device d, ferry_tensor **out)
{
    ferry_tensor *t = NULL;
    ferry_status st = fm_check_out(out, __func__);
    if (st == FERRY_OK)
        st = ferry_tensor_empty(shape, ndim, dt, d, &t);
    if (st == FERRY_OK)
        st = ferry_tensor_fill(t, value, NULL);
    if (st == FERRY_OK)
        st = ferry_device_sync_default_(d); /* ready on return */
    if (st != FERRY_OK) {
        ferry_tensor_release(t);
        return st;
    }
    *out = t;
    return FERRY_OK;
}

ferry_status ferry_tensor_ones(const int64_t *shape, size_t ndim, ferry_dtype dt, ferry_device d,
                               ferry_tensor **out)
{
    return ferry_tensor_full(shape, ndim, 1.0, dt, d, out);
}

ferry_status ferry_tensor_arange(double start, double end, double step, ferry_dtype dt,
                                 ferry_device d, ferry_tensor **out)
{
    if (!out)
        return FERRY_ARG_ERROR("out is NULL");
    if (step == 0 || !isfinite(start) || !isfinite(end) || !isfinite(step))
        return ferry_fail(FERRY_ERR_INVALID_ARG, "arange(%g, %g, %g): step must be non-zero and all finite",
                          start, end, step);
    double count = ceil((end - start) / step);
    if (count < 0)
        count = 0;
    if (count > 9e15)
        return ferry_fail(FERRY_ERR_LIMIT, "arange(%g, %g, %g) has too many elements", start, end, step);
    int64_t n = (int64_t)count;
    /* Built on the host and copied: arange is small and rarely hot. */
    size_t es = ferry_dtype_size(dt);
    if (!es)
        return ferry_fail(FERRY_ERR_DTYPE, "arange: invalid dtype %d", (int)dt);
    void *buf = ferry_host_malloc((size_t)(n ? n : 1) * es);
    if (!buf)
        return FERRY_ERR_NO_MEMORY;
    for (int64_t i = 0; i < n; i++)
        fk_std(dt, buf, i, start + (double)i * step);
    ferry_status st = ferry_tensor_from_host(buf, &n, 1, dt, d, out);
    ferry_host_free(buf);
    return st;
}

static ferry_status make_rand(const int64_t *shape, size_t ndim, ferry_dtype dt, ferry_device d,
                              uint64_t seed, bool normal, ferry_tensor **out)
{
    if (!out)
        return fm_check_out(out, normal ? "ferry_tensor_randn" : "ferry_tensor_rand");
    if (!fm_is_float(dt))
        return ferry_fail(FERRY_ERR_DTYPE, "%s needs a floating dtype, not %s",
                          normal ? "randn" : "rand", ferry_dtype_name(dt));
    ferry_tensor *t = NULL;
    ferry_status st = ferry_tensor_empty(shape, ndim, dt, d, &t);
    if (st != FERRY_OK)
        return st;
    fk_ctx c = fm_ctx(t, NULL);
    st = FK(&c, rand, dt, ferry_tensor_data(t), ferry_tensor_numel(t), seed, FERRY_RNG_INIT, normal);
    if (st == FERRY_OK)
        st = ferry_device_sync_default_(d); /* ready on return */
    if (st != FERRY_OK) {
        ferry_tensor_release(t);
        return st;
    }
    *out = t;
    return FERRY_OK;
}

ferry_status ferry_tensor_rand(const int64_t *shape, size_t ndim, ferry_dtype dt, ferry_device d,
                               uint64_t seed, ferry_tensor **out)
{
    return make_rand(shape, ndim, dt, d, seed, false, out);
}

ferry_status ferry_tensor_randn(const int64_t *shape, size_t ndim, ferry_dtype dt,
                                ferry_device d, uint64_t seed, ferry_tensor **out)
{
    return make_rand(shape, ndim, dt, d, seed, true, out);
}

/* True when src's shape broadcasts to dst's. */
static bool broadcasts_to(const ferry_tensor *src, const ferry_tensor *dst)
{
    size_t sn = ferry_tensor_ndim(src), dn = ferry_tensor_ndim(dst);
    if (sn > dn)
        return false;
    const int64_t *ss = ferry_tensor_shape(src), *ds = ferry_tensor_shape(dst);
    for (size_t i = 0; i < sn; i++) {
        int64_t a = ss[sn - 1 - i], b = ds[dn - 1 - i];
        if (a != b && a != 1)
            return false;
    }
    return true;
}

ferry_status ferry_tensor_copy(ferry_tensor *dst, const ferry_tensor *src, ferry_stream *s)
{
    const char *op = __func__;
    ferry_status st = fm_check_arg(dst, "dst", op);
    if (st == FERRY_OK)
        st = fm_check_arg(src, "src", op);
    if (st != FERRY_OK)
        return st;
    if (!broadcasts_to(src, dst)) {
        char a[128], b[128];
        return ferry_fail(FERRY_ERR_SHAPE, "%s: cannot copy a tensor of shape %s into one of shape %s", op,
                          fm_shape_str(src, a, sizeof a), fm_shape_str(dst, b, sizeof b));
    }
    ferry_device dd = ferry_tensor_device(dst), sd = ferry_tensor_device(src);
    if (!ferry_device_eq(dd, sd)) {
        if (ferry_tensor_dtype(dst) != ferry_tensor_dtype(src) || !ferry_tensor_is_contiguous(dst) ||
            !ferry_tensor_is_contiguous(src) || ferry_tensor_numel(src) != ferry_tensor_numel(dst)) {
            char a[FERRY_DEVICE_NAME_MAX], b[FERRY_DEVICE_NAME_MAX];
            return ferry_fail(FERRY_ERR_DEVICE_MISMATCH,
                              "%s: copy from %s to %s needs two contiguous tensors of one dtype and shape; "
                              "convert on one device first", op,
                              ferry_device_format(sd, a, sizeof a), ferry_device_format(dd, b, sizeof b));
        }
        return ferry_device_copy_(dd, ferry_tensor_data(dst), sd, ferry_tensor_data(src),
                                  ferry_tensor_nbytes(dst), s);
    }
    fk_nd nd;
    fm_nd_make(&nd, dst, src, NULL);
    fk_ctx c = fm_ctx(dst, s);
    return FK(&c, convert, ferry_tensor_dtype(dst), ferry_tensor_data(dst), ferry_tensor_dtype(src),
              ferry_tensor_data(src), &nd, 1.0, 0.0);
}

ferry_status ferry_affine(ferry_tensor *x, double mul, double add, ferry_dtype dt,
                          ferry_stream *s, ferry_tensor **out)
{
    ferry_status st = fm_check_arg(x, "x", __func__);
    if (st == FERRY_OK)
        st = fm_check_out(out, __func__);
    if (st != FERRY_OK)
        return st;
    if (!ferry_dtype_size(dt))
        return ferry_fail(FERRY_ERR_DTYPE, "%s: invalid dtype %d", __func__, (int)dt);
    ferry_tensor *y = NULL;
    st = fm_empty_like_shape(x, ferry_tensor_shape(x), ferry_tensor_ndim(x), dt, s, &y);
    if (st != FERRY_OK)
        return st;
    fk_nd nd;
    fm_nd_make(&nd, y, x, NULL);
    fk_ctx c = fm_ctx(x, s);
    st = FK(&c, convert, dt, ferry_tensor_data(y), ferry_tensor_dtype(x), ferry_tensor_data(x), &nd,
            mul, add);
    if (st != FERRY_OK) {
        ferry_tensor_release(y);
        return st;
    }
    *out = y;
    return FERRY_OK;
}

ferry_status ferry_tensor_clone(ferry_tensor *t, ferry_stream *s, ferry_tensor **out)
{
    ferry_status st = fm_check_arg(t, "t", __func__);
    if (st == FERRY_OK)
        st = fm_check_out(out, __func__);
    if (st != FERRY_OK)
        return st;
    return ferry_affine(t, 1.0, 0.0, ferry_tensor_dtype(t), s, out);
}

ferry_status ferry_tensor_contiguous(ferry_tensor *t, ferry_stream *s, ferry_tensor **out)
{
    ferry_status st = fm_check_arg(t, "t", __func__);
    if (st == FERRY_OK)
        st = fm_check_out(out, __func__);
    if (st != FERRY_OK)
        return st;
    if (ferry_tensor_is_contiguous(t)) {
        *out = ferry_tensor_retain(t);
        return FERRY_OK;
    }
    return ferry_tensor_clone(t, s, out);
}

ferry_status ferry_tensor_item(const ferry_tensor *t, double *out)
{
    ferry_status st = fm_check_arg(t, "t", __func__);
    if (st == FERRY_OK)
        st = fm_check_out(out, __func__);
    if (st != FERRY_OK)
        return st;
    if (ferry_tensor_numel(t) != 1) {
        char sb[128];
        return ferry_fail(FERRY_ERR_SHAPE, "item() needs a one-element tensor, got shape %s",
                          fm_shape_str(t, sb, sizeof sb));
    }
    unsigned char buf[8];
    st = ferry_tensor_copy_to_host(t, buf, ferry_dtype_size(ferry_tensor_dtype(t)));
    if (st != FERRY_OK)
        return st;
    *out = fk_ldd(ferry_tensor_dtype(t), buf, 0);
    return FERRY_OK;
}

/* The tensor core: shapes, reference-counted handles and storage, creation on
 * any device, moving between devices and dtypes, copying out to the host. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "device/device_internal.h"
#include "common/assert.h"
#include "common/error.h"
#include "tensor/internal.h"

static const struct { size_t size; const char *name; } dtypes[FERRY_DTYPE_COUNT] = {
    [FERRY_DTYPE_F32] = {4, "f32"}, [FERRY_DTYPE_F16] = {2, "f16"}, [FERRY_DTYPE_BF16] = {2, "bf16"},
    [FERRY_DTYPE_U8] = {1, "u8"},   [FERRY_DTYPE_I32] = {4, "i32"}, [FERRY_DTYPE_I64] = {8, "i64"},
    [FERRY_DTYPE_U16] = {2, "u16"}, [FERRY_DTYPE_U32] = {4, "u32"},
};

size_t ferry_dtype_size(ferry_dtype dt)
{
    return (unsigned)dt < FERRY_DTYPE_COUNT ? dtypes[dt].size : 0;
}

const char *ferry_dtype_name(ferry_dtype dt)
{
    return (unsigned)dt < FERRY_DTYPE_COUNT ? dtypes[dt].name : "invalid";
}

const char *ferry_shape_format_(const int64_t *shape, size_t ndim, char *buf, size_t size)
{
    size_t n = 0;
    buf[0] = '\0';
    n += (size_t)snprintf(buf, size, "[");
    for (size_t i = 0; i < ndim && n < size; i++)
        n += (size_t)snprintf(buf + n, size - n, "%s%" PRId64, i ? ", " : "", shape[i]);
    if (n < size)
        snprintf(buf + n, size - n, "]");
    return buf;
}

ferry_status ferry_shape_check_(const int64_t *shape, size_t ndim, ferry_dtype dt,
                                int64_t *numel, size_t *nbytes)
{
    /* Defined on every path, so a caller never reads an indeterminate size. */
    *numel = 0;
    *nbytes = 0;
    if (ferry_dtype_size(dt) == 0)
        return ferry_fail(FERRY_ERR_DTYPE, "invalid dtype %d", (int)dt);
    if (ndim > FERRY_MAX_DIMS)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "tensor with %zu dimensions: at most %d are supported",
                          ndim, FERRY_MAX_DIMS);
    if (ndim && !shape)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "tensor shape is NULL with %zu dimensions", ndim);
    char sbuf[256];
    int64_t n = 1;
    for (size_t i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return ferry_fail(FERRY_ERR_INVALID_ARG, "tensor shape %s: dimension %zu is negative",
                              ferry_shape_format_(shape, ndim, sbuf, sizeof sbuf), i);
    }
    for (size_t i = 0; i < ndim; i++) {
        if (__builtin_mul_overflow(n, shape[i], &n))
            goto too_big;
    }
    size_t bytes;
    if ((uint64_t)n > SIZE_MAX || !ferry_mul_size((size_t)n, ferry_dtype_size(dt), &bytes) ||
        bytes > (size_t)INT64_MAX)
        goto too_big;
    *numel = n;
    *nbytes = bytes;
    return FERRY_OK;
too_big:
    /* Check every dimension for zero first: [0, huge, huge] is a valid empty shape. */
    for (size_t i = 0; i < ndim; i++)
        if (shape[i] == 0) {
            *numel = 0;
            *nbytes = 0;
            return FERRY_OK;
        }
    return ferry_fail(FERRY_ERR_LIMIT, "tensor shape %s of %s: the number of bytes overflows",
                      ferry_shape_format_(shape, ndim, sbuf, sizeof sbuf), ferry_dtype_name(dt));
}

void ferry_contiguous_strides_(const int64_t *shape, size_t ndim, int64_t *strides)
{
    int64_t s = 1;
    for (size_t i = ndim; i-- > 0;) {
        strides[i] = s;
        /* overflow is possible only when another dimension is 0 (an empty
         * tensor, whose strides are never used): keep the last good value */
        int64_t next;
        if (!__builtin_mul_overflow(s, shape[i] > 0 ? shape[i] : 1, &next))
            s = next;
    }
}

static void storage_release(ferry_storage *s)
{
    if (!s || __atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    if (s->owned)
        ferry_device_free(s->device, s->data);
    ferry_host_free(s);
}

/* A tensor handle with one reference, over storage st (whose reference it takes). */
static ferry_status tensor_new(ferry_storage *st, const int64_t *shape, size_t ndim, ferry_dtype dt,
                               int64_t numel, ferry_tensor **out)
{
    ferry_tensor *t = ferry_host_calloc(1, sizeof *t);
    if (!t) {
        storage_release(st);
        return FERRY_ERR_NO_MEMORY;
    }
    t->refs = 1;
    t->storage = st;
    t->ndim = ndim;
    if (ndim)
        memcpy(t->shape, shape, ndim * sizeof *shape);
    ferry_contiguous_strides_(t->shape, ndim, t->strides);
    t->numel = numel;
    t->dtype = dt;
    t->device = st->device;
    *out = t;
    return FERRY_OK;
}

static ferry_status storage_new(ferry_device d, void *data, size_t bytes, bool owned, ferry_storage **out)
{
    d = ferry_device_resolve(d);
    ferry_storage *s = ferry_host_calloc(1, sizeof *s);
    if (!s)
        return FERRY_ERR_NO_MEMORY;
    s->refs = 1;
    s->data = data;
    s->bytes = bytes;
    s->device = d;
    s->owned = owned;
    *out = s;
    return FERRY_OK;
}

/* Allocates on d, on stream s (NULL: default). out is not NULL: the public
 * callers check it, naming themselves. */
static ferry_status tensor_alloc(const int64_t *shape, size_t ndim, ferry_dtype dt, ferry_device d,
                                 ferry_stream *s, ferry_tensor **out)
{
    *out = NULL;
    int64_t numel;
    size_t bytes;
    ferry_status st = ferry_shape_check_(shape, ndim, dt, &numel, &bytes);
    if (st != FERRY_OK)
        return st;
    void *data = NULL;
    if ((st = ferry_device_alloc(d, bytes, s, &data)) != FERRY_OK) {
        char sbuf[256];
        ferry_fail_prefix(st, "tensor %s %s: ", ferry_shape_format_(shape, ndim, sbuf, sizeof sbuf),
                          ferry_dtype_name(dt));
        /* st, not the prefix call's result: callers rely on *out != NULL exactly when
         * FERRY_OK comes back, and that must be visible within this file. */
        return st;
    }
    ferry_storage *sto;
    if ((st = storage_new(d, data, bytes, true, &sto)) != FERRY_OK) {
        ferry_device_free(d, data);
        return st;
    }
    return tensor_new(sto, shape, ndim, dt, numel, out);
}

ferry_status ferry_tensor_empty(const int64_t *shape, size_t ndim, ferry_dtype dt, ferry_device d,
                                ferry_tensor **out)
{
    if (!out)
        return FERRY_ARG_ERROR("out is NULL");
    return tensor_alloc(shape, ndim, dt, d, NULL, out);
}

ferry_status ferry_tensor_empty_on_(const int64_t *shape, size_t ndim, ferry_dtype dt, ferry_device d,
                                    ferry_stream *s, ferry_tensor **out)
{
    if (!out)
        return FERRY_ARG_ERROR("out is NULL");
    return tensor_alloc(shape, ndim, dt, d, s && ferry_device_eq(ferry_stream_device(s), d) ? s : NULL, out);
}

ferry_status ferry_tensor_zeros(const int64_t *shape, size_t ndim, ferry_dtype dt, ferry_device d,
                                ferry_tensor **out)
{
    if (!out)
        return FERRY_ARG_ERROR("out is NULL");
    ferry_status st = tensor_alloc(shape, ndim, dt, d, NULL, out);
    if (st != FERRY_OK)
        return st;
    st = ferry_device_memset_zero(d, (*out)->storage->data, (*out)->storage->bytes, NULL);
    if (st == FERRY_OK)
        st = ferry_device_sync_default_(d); /* ready on return: see device_internal.h */
    if (st != FERRY_OK) {
        ferry_tensor_release(*out);
        *out = NULL;
    }
    return st;
}

static ferry_copy_kind kind_between(ferry_device src, ferry_device dst)
{
    bool sc = src.type == FERRY_DEVICE_CUDA, dc = dst.type == FERRY_DEVICE_CUDA;
    return sc ? (dc ? FERRY_COPY_D2D : FERRY_COPY_D2H) : (dc ? FERRY_COPY_H2D : FERRY_COPY_H2H);
}

ferry_status ferry_tensor_from_host(const void *data, const int64_t *shape, size_t ndim, ferry_dtype dt,
                                    ferry_device d, ferry_tensor **out)
{
    if (!out)
        return FERRY_ARG_ERROR("out is NULL");
    ferry_status st = tensor_alloc(shape, ndim, dt, d, NULL, out);
    if (st != FERRY_OK)
        return st;
    size_t bytes = (*out)->storage->bytes;
    if (bytes && !data) {
        ferry_tensor_release(*out);
        *out = NULL;
        return FERRY_ARG_ERROR("data is NULL");
    }
    st = ferry_memcpy((*out)->storage->data, data, bytes, kind_between(ferry_cpu(), d), d, NULL);
    /* A pageable host-to-device copy may still be in flight on return. */
    if (st == FERRY_OK)
        st = ferry_device_sync_default_(d);
    if (st != FERRY_OK) {
        ferry_tensor_release(*out);
        *out = NULL;
    }
    return st;
}

ferry_status ferry_tensor_from_blob(void *data, const int64_t *shape, size_t ndim, ferry_dtype dt,
                                    ferry_device d, ferry_tensor **out)
{
    if (!out)
        return FERRY_ARG_ERROR("out is NULL");
    *out = NULL;
    int64_t numel;
    size_t bytes;
    ferry_status st = ferry_shape_check_(shape, ndim, dt, &numel, &bytes);
    if (st != FERRY_OK)
        return st;
    if (bytes && !data)
        return FERRY_ARG_ERROR("data is NULL");
    if ((st = ferry_device_check(d)) != FERRY_OK)
        return st;
    ferry_storage *sto;
    if ((st = storage_new(d, data, bytes, false, &sto)) != FERRY_OK)
        return st;
    return tensor_new(sto, shape, ndim, dt, numel, out);
}

/* A tensor's invariants, checked where a view is made, in debug and sanitizer
 * builds (FERRY_ASSERT): it holds references to itself and its storage, sits
 * on its storage's device, and every element it can address lies inside the
 * storage: view code that computes an offset or stride wrongly stops here,
 * not in a kernel reading out of bounds. */
static void check_tensor(const ferry_tensor *t)
{
#if FERRY_DEBUG
    FERRY_ASSERT(t->refs > 0 && t->storage && t->storage->refs > 0);
    FERRY_ASSERT(ferry_device_eq(t->device, t->storage->device));
    FERRY_ASSERT(t->ndim <= FERRY_MAX_DIMS);
    if (t->numel == 0)
        return;
    int64_t lo = 0, hi = 0;
    for (size_t i = 0; i < t->ndim; i++) {
        int64_t ext = (t->shape[i] - 1) * t->strides[i];
        *(ext < 0 ? &lo : &hi) += ext;
    }
    FERRY_ASSERT(t->offset + lo >= 0);
    FERRY_ASSERT((uint64_t)(t->offset + hi + 1) * ferry_dtype_size(t->dtype) <= t->storage->bytes);
#else
    (void)t;
#endif
}

ferry_status ferry_tensor_view_(const ferry_tensor *base, const int64_t *shape, const int64_t *strides,
                                size_t ndim, int64_t offset, ferry_tensor **out)
{
    int64_t numel;
    size_t bytes;
    ferry_status st = ferry_shape_check_(shape, ndim, base->dtype, &numel, &bytes);
    if (st != FERRY_OK)
        return st;
    __atomic_add_fetch(&base->storage->refs, 1, __ATOMIC_RELAXED);
    if ((st = tensor_new(base->storage, shape, ndim, base->dtype, numel, out)) != FERRY_OK)
        return st;
    if (ndim)
        memcpy((*out)->strides, strides, ndim * sizeof *strides);
    (*out)->offset = offset;
    check_tensor(*out);
    return FERRY_OK;
}

ferry_tensor *ferry_tensor_retain(ferry_tensor *t)
{
    if (t)
        __atomic_add_fetch(&t->refs, 1, __ATOMIC_RELAXED);
    return t;
}

void ferry_tensor_release(ferry_tensor *t)
{
    if (!t || __atomic_sub_fetch(&t->refs, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    storage_release(t->storage);
    ferry_host_free(t);
}

size_t ferry_tensor_ndim(const ferry_tensor *t) { return t ? t->ndim : 0; }

int64_t ferry_tensor_dim(const ferry_tensor *t, size_t i)
{
    return t && i < t->ndim ? t->shape[i] : 0;
}

const int64_t *ferry_tensor_shape(const ferry_tensor *t) { return t ? t->shape : NULL; }
const int64_t *ferry_tensor_strides(const ferry_tensor *t) { return t ? t->strides : NULL; }
int64_t ferry_tensor_numel(const ferry_tensor *t) { return t ? t->numel : 0; }

size_t ferry_tensor_nbytes(const ferry_tensor *t)
{
    return t ? (size_t)t->numel * ferry_dtype_size(t->dtype) : 0;
}

ferry_dtype ferry_tensor_dtype(const ferry_tensor *t) { return t ? t->dtype : FERRY_DTYPE_COUNT; }
ferry_device ferry_tensor_device(const ferry_tensor *t) { return t ? t->device : ferry_cpu(); }
void *ferry_tensor_data(const ferry_tensor *t) { return t ? ferry_tensor_ptr_(t) : NULL; }

ferry_status ferry_tensor_host_data(const ferry_tensor *t, void **out)
{
    if (out)
        *out = NULL;
    if (!t || !out)
        return FERRY_ARG_ERROR("%s is NULL", !t ? "t" : "out");
    if (t->device.type != FERRY_DEVICE_CPU) {
        /* Read on the host, a device pointer is garbage (the simulated GPU)
         * or a crash (a real one). */
        char name[FERRY_DEVICE_NAME_MAX];
        return ferry_fail(FERRY_ERR_INVALID_ARG, "the tensor is on %s: its data is device "
                          "memory, which host code cannot read; copy it to the CPU first "
                          "(ferry_tensor_to(t, ferry_cpu(), false, &host), or "
                          "ferry_tensor_copy_to_host)",
                          ferry_device_format(t->device, name, sizeof name));
    }
    *out = ferry_tensor_ptr_(t);
    return FERRY_OK;
}

bool ferry_tensor_is_contiguous(const ferry_tensor *t)
{
    if (!t)
        return false;
    int64_t want = 1;
    for (size_t i = t->ndim; i-- > 0;) {
        if (t->shape[i] != 1 && t->strides[i] != want)
            return false;
        want *= t->shape[i];
    }
    return true;
}

/* Copies the view's elements in row-major order from host memory at elem0
 * (element 0 of the view) into dst. */
static void gather_host(const char *elem0, const ferry_tensor *t, char *dst)
{
    size_t es = ferry_dtype_size(t->dtype);
    int64_t idx[FERRY_MAX_DIMS] = {0};
    if (t->numel == 0)
        return;
    /* The innermost dimension is copied in one go when it is contiguous. */
    size_t nd = t->ndim;
    int64_t inner = nd ? t->shape[nd - 1] : 1;
    bool inner_contig = nd == 0 || t->strides[nd - 1] == 1;
    for (int64_t done = 0; done < t->numel;) {
        int64_t off = 0;
        for (size_t i = 0; i + 1 < nd; i++)
            off += idx[i] * t->strides[i];
        if (inner_contig) {
            memcpy(dst, elem0 + off * (int64_t)es, (size_t)inner * es);
        } else {
            int64_t st = t->strides[nd - 1];
            for (int64_t k = 0; k < inner; k++)
                memcpy(dst + (size_t)k * es, elem0 + (off + k * st) * (int64_t)es, es);
        }
        dst += (size_t)inner * es;
        done += inner;
        for (size_t i = nd > 1 ? nd - 1 : 0; i-- > 0;) {
            if (++idx[i] < t->shape[i])
                break;
            idx[i] = 0;
        }
    }
}

/* The element range [lo, hi] (relative to element 0) that the view touches. */
static void view_span(const ferry_tensor *t, int64_t *lo, int64_t *hi)
{
    *lo = *hi = 0;
    for (size_t i = 0; i < t->ndim; i++) {
        int64_t ext = (t->shape[i] - 1) * t->strides[i];
        if (ext < 0)
            *lo += ext;
        else
            *hi += ext;
    }
}

ferry_status ferry_tensor_copy_to_host(const ferry_tensor *t, void *dst, size_t bytes)
{
    if (!t || (!dst && bytes))
        return FERRY_ARG_ERROR("%s is NULL", t ? "dst" : "t");
    size_t need = ferry_tensor_nbytes(t);
    if (bytes < need)
        return FERRY_ARG_ERROR("destination holds %zu bytes, the tensor needs %zu", bytes, need);
    if (need == 0)
        return FERRY_OK;
    const char *src = ferry_tensor_ptr_(t);
    ferry_copy_kind kind = kind_between(t->device, ferry_cpu());
    /* The tensor may have been written on any stream of its device. */
    ferry_status ds = ferry_device_synchronize(t->device);
    if (ds != FERRY_OK)
        return ds;
    if (ferry_tensor_is_contiguous(t))
        return ferry_memcpy(dst, src, need, kind, t->device, NULL);
    if (t->device.type == FERRY_DEVICE_CPU) {
        gather_host(src, t, dst);
        return FERRY_OK;
    }
    /* Non-contiguous on a GPU: bring the spanned range over once, gather here. */
    size_t es = ferry_dtype_size(t->dtype);
    int64_t lo, hi;
    view_span(t, &lo, &hi);
    size_t span = (size_t)(hi - lo + 1) * es;
    char *tmp = ferry_host_malloc(span);
    if (!tmp)
        return FERRY_ERR_NO_MEMORY;
    ferry_status st = ferry_memcpy(tmp, src + lo * (int64_t)es, span, kind, t->device, NULL);
    if (st == FERRY_OK)
        gather_host(tmp - lo * (int64_t)es, t, dst);
    ferry_host_free(tmp);
    return st;
}

/* A contiguous copy of t on device d, copied on stream s (NULL: synchronously). */
static ferry_status copy_to_device(ferry_tensor *t, ferry_device d, ferry_stream *s, ferry_tensor **out)
{
    /* The copy runs on the CUDA side's stream; a CPU stream has no queue. */
    ferry_device cd = d.type == FERRY_DEVICE_CUDA ? d : t->device;
    if (s && !ferry_device_eq(ferry_stream_device(s), cd)) {
        char a[FERRY_DEVICE_NAME_MAX], b[FERRY_DEVICE_NAME_MAX];
        return ferry_fail(FERRY_ERR_DEVICE_MISMATCH, "copy on %s, stream on %s",
                          ferry_device_format(cd, a, sizeof a),
                          ferry_device_format(ferry_stream_device(s), b, sizeof b));
    }
    ferry_tensor *r;
    ferry_status st = tensor_alloc(t->shape, t->ndim, t->dtype, d,
                                   d.type == FERRY_DEVICE_CUDA ? s : NULL, &r);
    if (st != FERRY_OK)
        return st;
    size_t bytes = ferry_tensor_nbytes(t);
    /* Without a stream the copy is ordered after whatever wrote t, on any of its
     * device's streams, and is complete on return. */
    if (!s && t->device.type != FERRY_DEVICE_CPU && (st = ferry_device_synchronize(t->device)) != FERRY_OK) {
        ferry_tensor_release(r);
        return st;
    }
    if (ferry_tensor_is_contiguous(t)) {
        st = ferry_memcpy(r->storage->data, ferry_tensor_ptr_(t), bytes, kind_between(t->device, d), cd, s);
    } else if (d.type == FERRY_DEVICE_CPU) {
        st = ferry_tensor_copy_to_host(t, r->storage->data, bytes);
    } else {
        /* Gather on the host, then one copy up. */
        void *tmp = ferry_host_malloc(bytes);
        st = tmp ? ferry_tensor_copy_to_host(t, tmp, bytes) : FERRY_ERR_NO_MEMORY;
        if (st == FERRY_OK)
            st = ferry_memcpy(r->storage->data, tmp, bytes, FERRY_COPY_H2D, d, NULL);
        ferry_host_free(tmp);
    }
    if (st == FERRY_OK && !s)
        st = ferry_device_sync_default_(cd);
    if (st != FERRY_OK) {
        ferry_tensor_release(r);
        return st;
    }
    *out = r;
    return FERRY_OK;
}

ferry_status ferry_tensor_to_stream(ferry_tensor *t, ferry_device d, ferry_stream *s, ferry_tensor **out)
{
    d = ferry_device_resolve(d);
    if (!t || !out)
        return FERRY_ARG_ERROR("%s is NULL", t ? "out" : "t");
    *out = NULL;
    if (ferry_device_eq(t->device, d)) {
        *out = ferry_tensor_retain(t);
        return FERRY_OK;
    }
    ferry_status st = copy_to_device(t, d, s, out);
    /* A stream on the wrong device is the caller's argument too. */
    return st == FERRY_ERR_DEVICE_MISMATCH ? FERRY_ARG_CONTEXT(st) : st;
}

ferry_status ferry_tensor_to(ferry_tensor *t, ferry_device d, bool non_blocking, ferry_tensor **out)
{
    /* Without a stream the copy is complete on return (copy_to_device), which is
     * always correct; non_blocking is a hint that only ferry_tensor_to_stream
     * with a real stream can honour. */
    (void)non_blocking;
    return ferry_tensor_to_stream(t, d, NULL, out);
}

ferry_status ferry_tensor_cpu(ferry_tensor *t, ferry_tensor **out)
{
    return ferry_tensor_to_stream(t, ferry_cpu(), NULL, out);
}

ferry_status ferry_tensor_to_dtype(ferry_tensor *t, ferry_dtype dt, ferry_tensor **out)
{
    if (!t || !out)
        return FERRY_ARG_ERROR("%s is NULL", t ? "out" : "t");
    *out = NULL;
    if (ferry_dtype_size(dt) == 0)
        return ferry_fail(FERRY_ERR_DTYPE, "%s: invalid dtype %d", __func__, (int)dt);
    if (t->dtype == dt) {
        *out = ferry_tensor_retain(t);
        return FERRY_OK;
    }
    ferry_tensor *src = NULL, *r = NULL;
    ferry_status st;
    /* Work from a contiguous source on the same device. */
    if (ferry_tensor_is_contiguous(t)) {
        src = ferry_tensor_retain(t);
    } else if (t->device.type == FERRY_DEVICE_CPU) {
        st = copy_to_device(t, ferry_cpu(), NULL, &src);
        if (st != FERRY_OK)
            return st;
    } else {
        ferry_tensor *host;
        if ((st = copy_to_device(t, ferry_cpu(), NULL, &host)) != FERRY_OK)
            return st;
        st = copy_to_device(host, t->device, NULL, &src);
        ferry_tensor_release(host);
        if (st != FERRY_OK)
            return st;
    }
    if ((st = tensor_alloc(t->shape, t->ndim, dt, t->device, NULL, &r)) != FERRY_OK)
        goto done;
    {
        st = ferry_tensor_cast_(t->device, NULL, src->dtype, ferry_tensor_ptr_(src), dt, r->storage->data,
                                src->numel);
        /* tensor results are ready on return, like every other call here */
        if (st == FERRY_OK)
            st = ferry_device_synchronize(t->device);
    }
done:
    ferry_tensor_release(src);
    if (st != FERRY_OK) {
        ferry_tensor_release(r);
        return st;
    }
    *out = r;
    return FERRY_OK;
}

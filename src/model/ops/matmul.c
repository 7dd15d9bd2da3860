/* Matrix products: 2-D, batched 3-D, and 3-D by a shared 2-D matrix. Transposed
 * views go to the gemm as a transpose flag, not a copy. */
#include "common/error.h"
#include "model/ops/common.h"

/* How a [rows, cols] matrix with the given strides reaches a row-major gemm:
 * either as is (col stride 1) or as the transpose of a row-major matrix (row
 * stride 1). Returns false when neither: the caller copies it first. */
static bool mat_layout(int64_t rows, int64_t cols, int64_t srow, int64_t scol, bool *trans, int64_t *ld)
{
    /* Strides along a size-1 dim are meaningless: normalise them. */
    if (rows == 1)
        srow = cols > 1 ? cols : 1;
    if (cols == 1)
        scol = 1;
    if (scol == 1 && srow >= (cols > 1 ? cols : 1)) {
        *trans = false;
        *ld = srow;
        return true;
    }
    if (srow == 1 && scol >= (rows > 1 ? rows : 1)) {
        *trans = true;
        *ld = scol;
        return true;
    }
    return false;
}

static ferry_status do_matmul(ferry_tensor *a, ferry_tensor *b, ferry_stream *s, const char *name,
                              ferry_tensor **out)
{
    ferry_status st = fm_check_arg(a, "a", name);
    if (st == FERRY_OK)
        st = fm_check_out(out, name);
    if (st == FERRY_OK)
        st = fm_check_arg(b, "b", name);
    if (st == FERRY_OK)
        st = fm_check_device(a, b, name);
    if (st == FERRY_OK)
        st = fm_check_dtype(a, b, name);
    if (st == FERRY_OK)
        st = fm_check_float(a, name);
    if (st != FERRY_OK)
        return st;
    size_t na = ferry_tensor_ndim(a), nb = ferry_tensor_ndim(b);
    char s1[128], s2[128];
    if (na < 2 || na > 3 || nb < 2 || nb > 3 || (na == 2 && nb == 3))
        return ferry_fail(FERRY_ERR_SHAPE,
                          "%s: matmul takes [m,k]@[k,n], [b,m,k]@[b,k,n] or [b,m,k]@[k,n], got %s and %s", name,
                          fm_shape_str(a, s1, sizeof s1), fm_shape_str(b, s2, sizeof s2));
    int64_t batch = na == 3 ? ferry_tensor_dim(a, 0) : 1;
    int64_t m = ferry_tensor_dim(a, na - 2), k = ferry_tensor_dim(a, na - 1);
    int64_t k2 = ferry_tensor_dim(b, nb - 2), n = ferry_tensor_dim(b, nb - 1);
    if (k != k2 || (nb == 3 && ferry_tensor_dim(b, 0) != batch))
        return ferry_fail(FERRY_ERR_SHAPE, "%s: shapes %s and %s cannot be multiplied", name,
                          fm_shape_str(a, s1, sizeof s1), fm_shape_str(b, s2, sizeof s2));

    /* CPU half tensors compute in f32; other layouts a gemm cannot read are copied. */
    ferry_tensor *x = NULL, *w = NULL, *y = NULL;
    st = fm_cpu_f32(a, &x);
    if (st == FERRY_OK)
        st = fm_cpu_f32(b, &w);
    bool ta = false, tb = false;
    int64_t lda = 0, ldb = 0;
    for (int pass = 0; st == FERRY_OK && pass < 2; pass++) {
        ferry_tensor **t = pass ? &w : &x;
        size_t nd = ferry_tensor_ndim(*t);
        const int64_t *sh = ferry_tensor_shape(*t), *sd = ferry_tensor_strides(*t);
        bool *tr = pass ? &tb : &ta;
        int64_t *ld = pass ? &ldb : &lda;
        if (!mat_layout(sh[nd - 2], sh[nd - 1], sd[nd - 2], sd[nd - 1], tr, ld)) {
            ferry_tensor *cpy = NULL;
            st = ferry_tensor_clone(*t, s, &cpy);
            ferry_tensor_release(*t);
            *t = cpy;
            if (st == FERRY_OK)
                mat_layout(sh[nd - 2], sh[nd - 1], sh[nd - 1], 1, tr, ld);
        }
    }
    int64_t shape[3] = {batch, m, n};
    if (st == FERRY_OK)
        st = fm_empty_like_shape(a, na == 3 ? shape : shape + 1, na, ferry_tensor_dtype(x), s, &y);
    if (st == FERRY_OK) {
        int64_t sa = na == 3 ? ferry_tensor_strides(x)[0] : 0;
        int64_t sb = nb == 3 ? ferry_tensor_strides(w)[0] : 0;
        fk_ctx c = fm_ctx(a, s);
        fk_gemm g = {.dt = ferry_tensor_dtype(x), .ta = ta, .tb = tb, .m = m, .n = n, .k = k, .alpha = 1.0f,
                     .a = ferry_tensor_data(x), .lda = lda, .stride_a = sa, .b = ferry_tensor_data(w), .ldb = ldb,
                     .stride_b = sb, .c = ferry_tensor_data(y), .ldc = n, .stride_c = m * n, .batch = batch};
        st = FK(&c, gemm, &g);
    }
    if (st == FERRY_OK && ferry_tensor_dtype(a) != ferry_tensor_dtype(x)) {
        ferry_tensor *r = NULL;
        st = ferry_affine(y, 1.0, 0.0, ferry_tensor_dtype(a), s, &r);
        ferry_tensor_release(y);
        y = r;
    }
    ferry_tensor_release(x);
    ferry_tensor_release(w);
    if (st != FERRY_OK) {
        ferry_tensor_release(y);
        return st;
    }
    *out = y;
    return FERRY_OK;
}

ferry_status ferry_matmul(ferry_tensor *a, ferry_tensor *b, ferry_stream *s, ferry_tensor **out)
{
    return do_matmul(a, b, s, __func__, out);
}

ferry_status ferry_bmm(ferry_tensor *a, ferry_tensor *b, ferry_stream *s, ferry_tensor **out)
{
    return do_matmul(a, b, s, __func__, out);
}

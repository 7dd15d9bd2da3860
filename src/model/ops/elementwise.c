/* Elementwise ops: binary with broadcasting, tensor-scalar, unary maps. */
#include "common/error.h"
#include "model/ops/common.h"

/* The public op enums reach the kernels by value: ferry_binary_op is fk_bop,
 * ferry_unary_op is fk_uop from FK_NEG and ferry_scalar_op is fk_uop from
 * FK_ADD_S. A change to either side that breaks that fails here. */
#define SAME_OP(fk, ferry) _Static_assert((int)(fk) == (int)(ferry), #fk " != " #ferry)
SAME_OP(FK_ADD, FERRY_OP_ADD);
SAME_OP(FK_SUB, FERRY_OP_SUB);
SAME_OP(FK_MUL, FERRY_OP_MUL);
SAME_OP(FK_DIV, FERRY_OP_DIV);
SAME_OP(FK_MAXIMUM, FERRY_OP_MAXIMUM);
SAME_OP(FK_MINIMUM, FERRY_OP_MINIMUM);
SAME_OP(FK_BOP_COUNT, FERRY_OP_MINIMUM + 1);
SAME_OP(FK_NEG, FK_NEG + FERRY_OP_NEG);
SAME_OP(FK_RELU, FK_NEG + FERRY_OP_RELU);
SAME_OP(FK_GELU, FK_NEG + FERRY_OP_GELU);
SAME_OP(FK_EXP, FK_NEG + FERRY_OP_EXP);
SAME_OP(FK_LOG, FK_NEG + FERRY_OP_LOG);
SAME_OP(FK_SQRT, FK_NEG + FERRY_OP_SQRT);
SAME_OP(FK_TANH, FK_NEG + FERRY_OP_TANH);
SAME_OP(FK_SIGMOID, FK_NEG + FERRY_OP_SIGMOID);
SAME_OP(FK_ABS, FK_NEG + FERRY_OP_ABS);
SAME_OP(FK_ADD_S, FK_ADD_S + FERRY_OP_ADD_SCALAR);
SAME_OP(FK_MUL_S, FK_ADD_S + FERRY_OP_MUL_SCALAR);
SAME_OP(FK_RSUB_S, FK_ADD_S + FERRY_OP_RSUB_SCALAR);
SAME_OP(FK_RDIV_S, FK_ADD_S + FERRY_OP_RDIV_SCALAR);
SAME_OP(FK_POW_S, FK_ADD_S + FERRY_OP_POW_SCALAR);
SAME_OP(FK_MAX_S, FK_ADD_S + FERRY_OP_MAX_SCALAR);
SAME_OP(FK_MIN_S, FK_ADD_S + FERRY_OP_MIN_SCALAR);
SAME_OP(FK_UOP_COUNT, FK_ADD_S + FERRY_OP_MIN_SCALAR + 1);
#undef SAME_OP

static ferry_status broadcast_shape(const ferry_tensor *a, const ferry_tensor *b, const char *op,
                                    int64_t *shape, size_t *ndim)
{
    size_t na = ferry_tensor_ndim(a), nb = ferry_tensor_ndim(b), n = na > nb ? na : nb;
    const int64_t *sa = ferry_tensor_shape(a), *sb = ferry_tensor_shape(b);
    for (size_t i = 0; i < n; i++) {
        int64_t x = i < na ? sa[na - 1 - i] : 1, y = i < nb ? sb[nb - 1 - i] : 1;
        if (x != y && x != 1 && y != 1) {
            char s1[128], s2[128];
            return ferry_fail(FERRY_ERR_SHAPE, "%s: shapes %s and %s cannot be broadcast together", op,
                              fm_shape_str(a, s1, sizeof s1), fm_shape_str(b, s2, sizeof s2));
        }
        shape[n - 1 - i] = x == 1 ? y : x;
    }
    *ndim = n;
    return FERRY_OK;
}

static const char *binary_name(ferry_binary_op op)
{
    static const char *const names[] = {"ferry_add", "ferry_sub", "ferry_mul", "ferry_div",
                                        "ferry_maximum", "ferry_minimum"};
    _Static_assert(sizeof names / sizeof names[0] == FERRY_OP_MINIMUM + 1, "a name per binary op");
    return (unsigned)op < sizeof names / sizeof names[0] ? names[op] : "ferry_binary";
}

ferry_status ferry_binary(ferry_binary_op op, ferry_tensor *a, ferry_tensor *b, ferry_stream *s,
                          ferry_tensor **out)
{
    const char *name = binary_name(op);
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
    if ((unsigned)op > FERRY_OP_MINIMUM)
        return FERRY_ARG_ERROR("unknown binary op %d", (int)op);
    int64_t shape[FERRY_MAX_DIMS];
    size_t nd_ = 0;
    st = broadcast_shape(a, b, name, shape, &nd_);
    if (st != FERRY_OK)
        return st;
    ferry_tensor *y = NULL;
    st = fm_empty_like_shape(a, shape, nd_, ferry_tensor_dtype(a), s, &y);
    if (st != FERRY_OK)
        return st;
    fk_nd nd;
    fm_nd_make(&nd, y, a, b);
    fk_ctx c = fm_ctx(a, s);
    st = FK(&c, binary, (fk_bop)op, ferry_tensor_dtype(a), ferry_tensor_data(y), ferry_tensor_data(a),
            ferry_tensor_data(b), &nd);
    if (st != FERRY_OK) {
        ferry_tensor_release(y);
        return st;
    }
    *out = y;
    return FERRY_OK;
}

ferry_status ferry_add(ferry_tensor *a, ferry_tensor *b, ferry_stream *s, ferry_tensor **out)
{
    return ferry_binary(FERRY_OP_ADD, a, b, s, out);
}
ferry_status ferry_sub(ferry_tensor *a, ferry_tensor *b, ferry_stream *s, ferry_tensor **out)
{
    return ferry_binary(FERRY_OP_SUB, a, b, s, out);
}
ferry_status ferry_mul(ferry_tensor *a, ferry_tensor *b, ferry_stream *s, ferry_tensor **out)
{
    return ferry_binary(FERRY_OP_MUL, a, b, s, out);
}
ferry_status ferry_div(ferry_tensor *a, ferry_tensor *b, ferry_stream *s, ferry_tensor **out)
{
    return ferry_binary(FERRY_OP_DIV, a, b, s, out);
}

static ferry_status map(fk_uop op, double alpha, ferry_tensor *a, ferry_stream *s, const char *name,
                        ferry_tensor **out)
{
    ferry_status st = fm_check_arg(a, "a", name);
    if (st == FERRY_OK)
        st = fm_check_out(out, name);
    if (st == FERRY_OK)
        st = fm_check_float(a, name);
    if (st != FERRY_OK)
        return st;
    ferry_tensor *y = NULL;
    st = fm_empty_like_shape(a, ferry_tensor_shape(a), ferry_tensor_ndim(a), ferry_tensor_dtype(a), s, &y);
    if (st != FERRY_OK)
        return st;
    fk_nd nd;
    fm_nd_make(&nd, y, a, NULL);
    fk_ctx c = fm_ctx(a, s);
    st = FK(&c, unary, op, ferry_tensor_dtype(a), ferry_tensor_data(y), ferry_tensor_data(a), &nd, alpha);
    if (st != FERRY_OK) {
        ferry_tensor_release(y);
        return st;
    }
    *out = y;
    return FERRY_OK;
}

ferry_status ferry_unary(ferry_unary_op op, ferry_tensor *a, ferry_stream *s, ferry_tensor **out)
{
    static const char *const names[] = {"ferry_neg", "ferry_relu", "ferry_gelu", "ferry_exp",
                                        "ferry_log", "ferry_sqrt", "ferry_tanh", "ferry_sigmoid",
                                        "ferry_abs"};
    _Static_assert(sizeof names / sizeof names[0] == FERRY_OP_ABS + 1, "a name per unary op");
    if ((unsigned)op > FERRY_OP_ABS)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "unknown unary op %d", (int)op);
    return map((fk_uop)(FK_NEG + (int)op), 0.0, a, s, names[op], out);
}

ferry_status ferry_scalar(ferry_scalar_op op, ferry_tensor *a, double c, ferry_stream *s,
                          ferry_tensor **out)
{
    static const char *const names[] = {"ferry_add_scalar", "ferry_mul_scalar", "ferry_rsub_scalar",
                                        "ferry_rdiv_scalar", "ferry_pow_scalar", "ferry_max_scalar",
                                        "ferry_min_scalar"};
    _Static_assert(sizeof names / sizeof names[0] == FERRY_OP_MIN_SCALAR + 1, "a name per scalar op");
    if ((unsigned)op > FERRY_OP_MIN_SCALAR)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "unknown scalar op %d", (int)op);
    return map((fk_uop)(FK_ADD_S + (int)op), c, a, s, names[op], out);
}

ferry_status ferry_add_scalar(ferry_tensor *a, double c, ferry_stream *s, ferry_tensor **out)
{
    return ferry_scalar(FERRY_OP_ADD_SCALAR, a, c, s, out);
}
ferry_status ferry_mul_scalar(ferry_tensor *a, double c, ferry_stream *s, ferry_tensor **out)
{
    return ferry_scalar(FERRY_OP_MUL_SCALAR, a, c, s, out);
}
ferry_status ferry_relu(ferry_tensor *a, ferry_stream *s, ferry_tensor **out)
{
    return ferry_unary(FERRY_OP_RELU, a, s, out);
}
ferry_status ferry_gelu(ferry_tensor *a, ferry_stream *s, ferry_tensor **out)
{
    return ferry_unary(FERRY_OP_GELU, a, s, out);
}
ferry_status ferry_exp(ferry_tensor *a, ferry_stream *s, ferry_tensor **out)
{
    return ferry_unary(FERRY_OP_EXP, a, s, out);
}
ferry_status ferry_ln(ferry_tensor *a, ferry_stream *s, ferry_tensor **out)
{
    return ferry_unary(FERRY_OP_LOG, a, s, out);
}

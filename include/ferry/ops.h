/* Library: libferry-train (pkg-config ferry-train); <ferry/train.h> includes this header. */
/* Tensor ops: creation beyond the core, views, elementwise maps with scalars and
 * broadcasting, reductions, softmax and matmul, on the CPU and on CUDA.
 *
 * Every op returns a new tensor in *out on the inputs' device (release it with
 * ferry_tensor_release) and takes an optional stream (NULL: the device's default
 * stream), so a model can run on the loader's compute stream. Inputs are
 * checked: tensors on two devices are FERRY_ERR_DEVICE_MISMATCH ("expected all
 * tensors to be on the same device, but found cuda:0 and cpu (in ferry_matmul)"),
 * shapes that do not fit FERRY_ERR_SHAPE and dtypes FERRY_ERR_DTYPE, each with
 * both operands printed. Arithmetic needs both operands in the same floating
 * dtype (f32, f16, bf16); there is no implicit promotion: convert explicitly
 * with ferry_tensor_to_dtype or ferry_affine. On the CPU, f16/bf16 ops compute
 * in f32 and round the result. */
#ifndef FERRY_OPS_H
#define FERRY_OPS_H

#include "ferry/export.h"
#include "ferry/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- creation ---- */
FERRY_API ferry_status ferry_tensor_ones(const int64_t *shape, size_t ndim, ferry_dtype dt,
                                         ferry_device d, ferry_tensor **out);
FERRY_API ferry_status ferry_tensor_full(const int64_t *shape, size_t ndim, double value,
                                         ferry_dtype dt, ferry_device d, ferry_tensor **out);
/* [start, end) in steps of step (non-zero), like torch.arange. */
FERRY_API ferry_status ferry_tensor_arange(double start, double end, double step, ferry_dtype dt,
                                           ferry_device d, ferry_tensor **out);
/* Uniform in [0, 1) and standard normal. Element i is a pure function of
 * (seed, i) through Philox4x32-10 keyed with FERRY_RNG_INIT, generated straight
 * on the device: the same seed gives the same tensor on the CPU and on CUDA. */
FERRY_API ferry_status ferry_tensor_rand(const int64_t *shape, size_t ndim, ferry_dtype dt,
                                         ferry_device d, uint64_t seed, ferry_tensor **out);
FERRY_API ferry_status ferry_tensor_randn(const int64_t *shape, size_t ndim, ferry_dtype dt,
                                          ferry_device d, uint64_t seed, ferry_tensor **out);

/* In place: every element of t (any view) becomes value. */
FERRY_API ferry_status ferry_tensor_fill(ferry_tensor *t, double value, ferry_stream *s);
/* In place: dst = src. Same shape (src may broadcast); dtypes may differ (values
 * convert, saturating to integer ranges). Across devices both must be contiguous
 * and of the same dtype. */
FERRY_API ferry_status ferry_tensor_copy(ferry_tensor *dst, const ferry_tensor *src,
                                         ferry_stream *s);
/* A new contiguous tensor with t's values. */
FERRY_API ferry_status ferry_tensor_clone(ferry_tensor *t, ferry_stream *s, ferry_tensor **out);
/* t itself (a new reference) when contiguous, else a contiguous copy. */
FERRY_API ferry_status ferry_tensor_contiguous(ferry_tensor *t, ferry_stream *s,
                                               ferry_tensor **out);
/* The single value of a one-element tensor, waiting for the device. */
FERRY_API ferry_status ferry_tensor_item(const ferry_tensor *t, double *out);

/* ---- views: share t's storage, no copy ----
 * reshape is a view when t is contiguous and a copy otherwise; one entry of
 * shape may be -1 (inferred). slice keeps [start, end) of dim with step > 0;
 * negative start/end/dim count from the end, and they are clamped like Python. */
FERRY_API ferry_status ferry_tensor_reshape(ferry_tensor *t, const int64_t *shape, size_t ndim,
                                            ferry_tensor **out);
FERRY_API ferry_status ferry_tensor_slice(ferry_tensor *t, int64_t dim, int64_t start, int64_t end,
                                          int64_t step, ferry_tensor **out);
FERRY_API ferry_status ferry_tensor_transpose(ferry_tensor *t, int64_t dim0, int64_t dim1,
                                              ferry_tensor **out);
/* Shape [n, rest...] -> [n, prod(rest)], like torch.flatten(t, 1). */
FERRY_API ferry_status ferry_tensor_flatten(ferry_tensor *t, ferry_tensor **out);

/* ---- elementwise ---- */
typedef enum ferry_binary_op {
    FERRY_OP_ADD, FERRY_OP_SUB, FERRY_OP_MUL, FERRY_OP_DIV, FERRY_OP_MAXIMUM, FERRY_OP_MINIMUM
} ferry_binary_op;

typedef enum ferry_unary_op {
    FERRY_OP_NEG, FERRY_OP_RELU, FERRY_OP_GELU, FERRY_OP_EXP, FERRY_OP_LOG, FERRY_OP_SQRT,
    FERRY_OP_TANH, FERRY_OP_SIGMOID, FERRY_OP_ABS
} ferry_unary_op;

typedef enum ferry_scalar_op {
    FERRY_OP_ADD_SCALAR,  /* x + c */
    FERRY_OP_MUL_SCALAR,  /* x * c */
    FERRY_OP_RSUB_SCALAR, /* c - x */
    FERRY_OP_RDIV_SCALAR, /* c / x */
    FERRY_OP_POW_SCALAR,  /* x ^ c */
    FERRY_OP_MAX_SCALAR,  /* max(x, c): clamp from below */
    FERRY_OP_MIN_SCALAR   /* min(x, c) */
} ferry_scalar_op;

/* Broadcasting as NumPy/PyTorch: shapes align from the right; a dim of 1 stretches. */
FERRY_API ferry_status ferry_binary(ferry_binary_op op, ferry_tensor *a, ferry_tensor *b,
                                    ferry_stream *s, ferry_tensor **out);
FERRY_API ferry_status ferry_add(ferry_tensor *a, ferry_tensor *b, ferry_stream *s,
                                 ferry_tensor **out);
FERRY_API ferry_status ferry_sub(ferry_tensor *a, ferry_tensor *b, ferry_stream *s,
                                 ferry_tensor **out);
FERRY_API ferry_status ferry_mul(ferry_tensor *a, ferry_tensor *b, ferry_stream *s,
                                 ferry_tensor **out);
FERRY_API ferry_status ferry_div(ferry_tensor *a, ferry_tensor *b, ferry_stream *s,
                                 ferry_tensor **out);

FERRY_API ferry_status ferry_scalar(ferry_scalar_op op, ferry_tensor *a, double c, ferry_stream *s,
                                    ferry_tensor **out);
FERRY_API ferry_status ferry_add_scalar(ferry_tensor *a, double c, ferry_stream *s,
                                        ferry_tensor **out);
FERRY_API ferry_status ferry_mul_scalar(ferry_tensor *a, double c, ferry_stream *s,
                                        ferry_tensor **out);

FERRY_API ferry_status ferry_unary(ferry_unary_op op, ferry_tensor *a, ferry_stream *s,
                                   ferry_tensor **out);
FERRY_API ferry_status ferry_relu(ferry_tensor *a, ferry_stream *s, ferry_tensor **out);
/* erf form */
FERRY_API ferry_status ferry_gelu(ferry_tensor *a, ferry_stream *s, ferry_tensor **out);
FERRY_API ferry_status ferry_exp(ferry_tensor *a, ferry_stream *s, ferry_tensor **out);
/* natural log */
FERRY_API ferry_status ferry_ln(ferry_tensor *a, ferry_stream *s, ferry_tensor **out);

/* y = x * mul + add in dtype dt (any dtype to any): the fused "uint8 batch to
 * normalised float" step, e.g. ferry_affine(x, 1/255.0, 0, FERRY_DTYPE_F32, ...). */
FERRY_API ferry_status ferry_affine(ferry_tensor *x, double mul, double add, ferry_dtype dt,
                                    ferry_stream *s, ferry_tensor **out);

/* ---- reductions over one dim (negative counts from the end) ----
 * keepdim keeps the reduced dim with size 1. argmax returns i64 indices (the
 * first maximum). */
FERRY_API ferry_status ferry_sum(ferry_tensor *a, int64_t dim, bool keepdim, ferry_stream *s,
                                 ferry_tensor **out);
FERRY_API ferry_status ferry_mean(ferry_tensor *a, int64_t dim, bool keepdim, ferry_stream *s,
                                  ferry_tensor **out);
FERRY_API ferry_status ferry_max(ferry_tensor *a, int64_t dim, bool keepdim, ferry_stream *s,
                                 ferry_tensor **out);
FERRY_API ferry_status ferry_argmax(ferry_tensor *a, int64_t dim, bool keepdim, ferry_stream *s,
                                    ferry_tensor **out);
FERRY_API ferry_status ferry_softmax(ferry_tensor *a, int64_t dim, ferry_stream *s,
                                     ferry_tensor **out);
FERRY_API ferry_status ferry_log_softmax(ferry_tensor *a, int64_t dim, ferry_stream *s,
                                         ferry_tensor **out);

/* ---- matrix products ----
 * [m,k] @ [k,n] -> [m,n]; [b,m,k] @ [b,k,n] -> [b,m,n]; [b,m,k] @ [k,n] -> [b,m,n].
 * cuBLAS on CUDA (tensor-op math with f32 accumulation for f16/bf16), CBLAS
 * sgemm on the CPU. Transposed views are used as they are, without a copy. */
FERRY_API ferry_status ferry_matmul(ferry_tensor *a, ferry_tensor *b, ferry_stream *s,
                                    ferry_tensor **out);
FERRY_API ferry_status ferry_bmm(ferry_tensor *a, ferry_tensor *b, ferry_stream *s,
                                 ferry_tensor **out);

#ifdef __cplusplus
}
#endif
#endif

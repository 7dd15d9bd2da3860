/* Internal: the checks and helpers every tensor op shares — same device, same
 * dtype, floating dtype, shape printing, broadcasting into an fk_nd, and the
 * kernel context for a tensor's device and a stream. */
#ifndef FERRY_MODEL_OPS_COMMON_H
#define FERRY_MODEL_OPS_COMMON_H

#include "ferry/ops.h"
#include "model/kernels/kernels.h"

/* "[2, 3]" into buf. */
const char *fm_shape_str(const ferry_tensor *t, char *buf, size_t size);
const char *fm_dims_str(const int64_t *shape, size_t ndim, char *buf, size_t size);

/* FERRY_ERR_INVALID_ARG naming op when t is NULL. */
ferry_status fm_check_arg(const ferry_tensor *t, const char *name, const char *op);
/* INVALID_ARG "op: out is NULL" when out is NULL: every op checks before writing *out. */
ferry_status fm_check_out(const void *out, const char *op);
/* The exact PyTorch-style message for tensors on two devices. */
ferry_status fm_check_device(const ferry_tensor *a, const ferry_tensor *b, const char *op);
ferry_status fm_check_dtype(const ferry_tensor *a, const ferry_tensor *b, const char *op);
/* f32, f16 or bf16. */
ferry_status fm_check_float(const ferry_tensor *a, const char *op);
bool fm_is_float(ferry_dtype dt);

/* A dim in [-ndim, ndim) made non-negative, or FERRY_ERR_SHAPE. */
ferry_status fm_norm_dim(const ferry_tensor *t, int64_t dim, const char *op, size_t *out);

/* The iteration space of out's shape with strides of out, a (and b), broadcast
 * where their dims are 1 or missing (aligned from the right). */
void fm_nd_make(fk_nd *nd, const ferry_tensor *out, const ferry_tensor *a, const ferry_tensor *b);

fk_ctx fm_ctx(const ferry_tensor *t, ferry_stream *s);

/* Empty tensor with a's device. */
ferry_status fm_empty_like_shape(const ferry_tensor *a, const int64_t *shape, size_t ndim,
                                 ferry_dtype dt, ferry_stream *s, ferry_tensor **out);

/* For CPU half tensors: an f32 contiguous copy (new reference), else t retained. */
ferry_status fm_cpu_f32(ferry_tensor *t, ferry_tensor **out);

#endif

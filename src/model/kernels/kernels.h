/* Internal: the training library's raw kernels: one signature per kernel
 * (FK_KERNELS), one table of them per backend (CPU: kernels/cpu/, CUDA:
 * kernels/cuda/, the simulated GPU: kernels/sim/), looked up by the device's
 * backend kind (fk_table_for): the device layer, in libferry, knows nothing of
 * them. Callers dispatch with FK(ctx, name, args...), so ops and layers are
 * written once. The data path's own kernels (the loader's batch conversion, the
 * tensor core's dtype cast) are libferry's, outside this list.
 *
 * Kernels work on raw pointers (element 0 of a view) and never allocate tensors;
 * the tensor-level code above them checks devices, shapes and dtypes first. A
 * kernel's only failure modes are a CUDA error, scratch memory, or an unsupported
 * dtype, each reported through ferry_fail. */
#ifndef FERRY_MODEL_KERN_H
#define FERRY_MODEL_KERN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ferry/dataset.h"
#include "ferry/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

struct fk_table;

typedef struct fk_ctx {
    ferry_device dev;
    const struct fk_table *k; /* the backend's kernels; NULL when d has no backend */
    ferry_stream *stream; /* NULL: the device's default stream */
    void *native;         /* the backend's stream handle (cudaStream_t), NULL = default */
} fk_ctx;

fk_ctx fk_ctx_make(ferry_device d, ferry_stream *s);

/* An N-d iteration space with per-operand strides (in elements; 0 broadcasts). */
typedef struct fk_nd {
    int ndim;
    int64_t shape[FERRY_MAX_DIMS];
    int64_t so[FERRY_MAX_DIMS]; /* output */
    int64_t sa[FERRY_MAX_DIMS];
    int64_t sb[FERRY_MAX_DIMS];
    int64_t numel;
} fk_nd;

/* Elementwise maps. Unary ops take an optional scalar `alpha`. */
typedef enum fk_uop {
    FK_NEG, FK_RELU, FK_GELU, FK_EXP, FK_LOG, FK_SQRT, FK_TANH, FK_SIGMOID, FK_ABS,
    FK_ADD_S, FK_MUL_S, FK_RSUB_S, FK_RDIV_S, FK_POW_S, FK_MAX_S, FK_MIN_S,
    FK_UOP_COUNT
} fk_uop;

typedef enum fk_bop { FK_ADD, FK_SUB, FK_MUL, FK_DIV, FK_MAXIMUM, FK_MINIMUM, FK_BOP_COUNT } fk_bop;

typedef enum fk_rop { FK_SUM, FK_MEAN, FK_MAX, FK_ARGMAX } fk_rop;

typedef struct fk_conv {
    int64_t n, c, h, w;        /* input */
    int64_t kh, kw, sh, sw, ph, pw;
    int64_t oh, ow;            /* output */
} fk_conv;

/* A row-major strided-batched gemm: C[i] = alpha op(A[i]) op(B[i]) + beta C[i] for
 * i < batch, matrix i of X at x + i * stride_x elements (stride 0: one matrix for
 * every i). op(A) is m x k, op(B) k x n, C m x n; ta / tb transpose A / B. With
 * k = 0 and beta = 0, C is written with zeros whatever it held. A struct, not 18
 * arguments: a kernel entry takes at most eight (issue 28). */
typedef struct fk_gemm {
    ferry_dtype dt;
    bool ta, tb;
    int64_t m, n, k;
    float alpha, beta;
    const void *a, *b;
    void *c;
    int64_t lda, ldb, ldc;
    int64_t stride_a, stride_b, stride_c;
    int64_t batch;
} fk_gemm;

/* Softmax cross-entropy's rows and results (cross_entropy): rows x classes
 * logits; loss[0] += sum_r -log p[label], correct[0] += (argmax == label), and
 * bad[0] counts labels outside [0, classes), which contribute nothing (loss,
 * correct and bad are device memory; any may be NULL). The gradient's scale g is
 * gscale, or, when gnum (device memory: a loss scale kept on the device) is not
 * NULL, gnum[0] / rows in f32. */
typedef struct fk_xent {
    int64_t rows, classes;
    float *loss;
    int64_t *correct, *bad;
    float gscale;
    const float *gnum;
} fk_xent;

/* One batch norm layer over [n, ch, hw] (bn_fwd, bn_bwd); f32 statistics and
 * affine parameters, ch values each. Forward in training writes the batch's
 * mean and inverse standard deviation (smean, sinvstd) and updates the running
 * ones (rmean, rvar) with momentum; otherwise it normalises with the running
 * ones. Backward reads gamma, smean and sinvstd. */
typedef struct fk_bn {
    int64_t n, ch, hw;
    const float *gamma, *beta;
    float *rmean, *rvar;
    float *smean, *sinvstd;
    bool training;
    float momentum, eps;
} fk_bn;

/* One Embedding lookup (embed_fwd, embed_bwd): n indices (idt: i32 or i64,
 * device memory) into a table of vocab rows of dim elements. Forward: row i of
 * y is row idx[i] of the table; an index outside [0, vocab) gives a zero row
 * and, when bad (device memory, may be NULL) is not NULL, bad[0] = the smallest
 * such position i if below what bad[0] holds (the caller sets bad[0] = n first,
 * then reads it back: the error names the position and the index). Backward:
 * dw[idx[i]] += dy[i] for every i in increasing i, each table element's sum
 * rounded to dt once (indices outside the table add nothing); the GPU adds in
 * that same order, so duplicates give the CPU's bits, run after run. */
typedef struct fk_embed {
    int64_t n, vocab, dim;
    ferry_dtype idt;
    int64_t *bad;
} fk_embed;

/* The optimisers' hyper-parameters (PyTorch's names), shared by the
 * single-tensor and the multi-tensor kernels. */
typedef struct fk_sgd {
    float lr, momentum, dampening, wd;
    bool nesterov;
} fk_sgd;

typedef struct fk_adam {
    float lr, b1, b2, eps, wd;
    bool decoupled; /* AdamW's weight decay */
} fk_adam;

/* Parameter tensors one optimiser launch updates (sgd_multi, adam_multi): f32
 * parameter, gradient and state (s0: SGD's momentum buffer or Adam's first
 * moment, NULL where unused; s1: Adam's second moment) of numel[i] elements
 * each. Passed by value to the GPU kernel (its 4 KiB argument limit sets the
 * size): an optimiser step with more tensors makes one launch per FK_PLIST_MAX. */
#define FK_PLIST_MAX 48
typedef struct fk_plist {
    int n;
    float *p[FK_PLIST_MAX];
    const float *g[FK_PLIST_MAX];
    float *s0[FK_PLIST_MAX];
    float *s1[FK_PLIST_MAX];
    int64_t numel[FK_PLIST_MAX];
} fk_plist;

/* Buffers one zero_multi launch clears: bytes[i] bytes at p[i] each (device
 * memory; any dtype, as every float dtype's zero is all bits zero). By value on
 * the GPU, FK_PLIST_MAX at a time, as fk_plist. */
typedef struct fk_zlist {
    int n;
    void *p[FK_PLIST_MAX];
    int64_t bytes[FK_PLIST_MAX];
} fk_zlist;

/* The kernels, as an X-macro over (type, name) pairs, so that each backend's
 * declarations, the table's slots and the simulated GPU's deferred calls all come
 * from this one list. The context is named c in every definition; so the list names
 * the channel count ch (a name at another position reads as swapped arguments).
 * A kernel takes at most eight arguments besides the context; one that needs
 * more takes a struct by pointer (fk_gemm, fk_xent, fk_bn, fk_sgd, fk_adam),
 * which the simulated GPU's launches copy. FK_MAP stops at eight: a ninth
 * argument fails to compile. */
#define FK_KERNELS(X)                                                                              \
    /* y[nd] = v */                                                                                \
    X(fill, (ferry_dtype, dt), (void *, y), (const fk_nd *, nd), (double, v))                      \
    /* every buffer of l set to zero bytes (the gradients' zero_grad: one launch) */             \
    X(zero_multi, (const fk_zlist *, l))                                                           \
    /* y = x * mul + add, converting x's dtype to y's; strided (nd.so, nd.sa) */                   \
    X(convert, (ferry_dtype, ydt), (void *, y), (ferry_dtype, xdt), (const void *, x),             \
      (const fk_nd *, nd), (double, mul), (double, add))                                           \
    X(unary, (fk_uop, op), (ferry_dtype, dt), (void *, y), (const void *, x), (const fk_nd *, nd), \
      (double, alpha))                                                                             \
    X(binary, (fk_bop, op), (ferry_dtype, dt), (void *, y), (const void *, a), (const void *, b),  \
      (const fk_nd *, nd))                                                                         \
    /* reduce the middle axis of a contiguous [outer, n, inner]; ARGMAX writes i64 */              \
    X(reduce, (fk_rop, op), (ferry_dtype, dt), (void *, y), (const void *, x), (int64_t, outer),   \
      (int64_t, n), (int64_t, inner))                                                              \
    X(softmax, (bool, log), (ferry_dtype, dt), (void *, y), (const void *, x), (int64_t, outer),   \
      (int64_t, n), (int64_t, inner))                                                              \
    /* row-major strided-batched gemm (fk_gemm) */                                                \
    X(gemm, (const fk_gemm *, g))                                                                  \
    /* uniform [0,1) or normal; element i draws from Philox block (i, key) */                     \
    X(rand, (ferry_dtype, dt), (void *, y), (int64_t, n), (uint64_t, seed), (uint64_t, stream),    \
      (bool, normal))                                                                              \
    /* y[o, c, i] += b[c] over a contiguous [outer, ch, inner]; relu: then y = max(y, 0) as      \
     * FK_RELU on the stored value (a Linear or Conv2d and the ReLU after it, one pass) */          \
    X(bias_add, (ferry_dtype, dt), (void *, y), (const void *, b), (int64_t, outer), (int64_t, ch), \
      (int64_t, inner), (bool, relu))                                                              \
    /* db[c] += sum over o, i of dy[o, c, i] */                                                    \
    X(bias_grad, (ferry_dtype, dt), (void *, db), (const void *, dy), (int64_t, outer),            \
      (int64_t, ch), (int64_t, inner))                                                             \
    /* dx = dy where y > 0, else 0 */                                                              \
    X(relu_bwd, (ferry_dtype, dt), (void *, dx), (const void *, y), (const void *, dy), (int64_t, n)) \
    /* softmax cross-entropy over rows (fk_xent); dlogits (may be NULL) = (p - onehot) * g;   \
     * labels i32 or i64 */                                                                      \
    X(cross_entropy, (ferry_dtype, dt), (const void *, logits), (ferry_dtype, ldt),                \
      (const void *, labels), (void *, dlogits), (const fk_xent *, r))                             \
    /* loss[0] += lscale * sum (p - t)^2; dp (may be NULL) = 2 (p - t) gscale */                   \
    X(mse, (ferry_dtype, dt), (const void *, p), (const void *, t), (int64_t, n), (float *, loss), \
      (float, lscale), (void *, dp), (float, gscale))                                              \
    /* g->n images [n,C,H,W] -> col [C*kh*kw, n*oh*ow] (image i's columns at i*oh*ow) and    \
     * back (col2im writes x: the sum of each element's columns) */                                                         \
    X(im2col, (ferry_dtype, dt), (const fk_conv *, g), (const void *, x), (void *, col))           \
    X(col2im, (ferry_dtype, dt), (const fk_conv *, g), (const void *, col), (void *, x))           \
    /* pools over a contiguous NCHW batch; max records the flat input index per output (i32) */  \
    X(maxpool_fwd, (ferry_dtype, dt), (const fk_conv *, g), (const void *, x), (void *, y),        \
      (int32_t *, idx))                                                                            \
    X(maxpool_bwd, (ferry_dtype, dt), (const fk_conv *, g), (const void *, dy),                    \
      (const int32_t *, idx), (void *, dx))                                                        \
    X(avgpool_fwd, (ferry_dtype, dt), (const fk_conv *, g), (const void *, x), (void *, y))        \
    X(avgpool_bwd, (ferry_dtype, dt), (const fk_conv *, g), (const void *, dy), (void *, dx))      \
    /* batch norm (fk_bn); dx may be NULL (dgamma and dbeta accumulate) */                     \
    X(bn_fwd, (ferry_dtype, dt), (const void *, x), (void *, y), (const fk_bn *, b))               \
    X(bn_bwd, (ferry_dtype, dt), (const void *, x), (const void *, dy), (void *, dx),              \
      (const fk_bn *, b), (float *, dgamma), (float *, dbeta))                                     \
    /* y = x * keep / (1 - p), keep drawn from Philox (seed, stream) at element i */              \
    X(dropout, (ferry_dtype, dt), (void *, y), (const void *, x), (int64_t, n), (float, p),        \
      (uint64_t, seed), (uint64_t, stream))                                                        \
    /* f32 parameter updates (PyTorch's formulas). taken[0] (device memory) is the steps     \
     * taken before this one: SGD's first step (taken 0) sets the momentum buffer, Adam        \
     * corrects its bias for step taken + 1 (adam_consts). When skip (device memory, may be NULL) holds a     \
     * nonzero value the kernel writes nothing: mixed precision's inf/nan check, decided on     \
     * the device. */                                                                          \
    X(sgd, (float *, p), (const float *, g), (float *, buf), (int64_t, n), (const fk_sgd *, h),    \
      (const int64_t *, taken), (const float *, skip))                                             \
    /* Adam's bias corrections for step taken[0] + 1, once per step (one thread; the update    \
     * kernels read them and so do no pow): consts[0] = lr / (1 - b1^t), consts[1] =            \
     * sqrt(1 - b2^t), in double as PyTorch's Python floats, rounded to f32 */                  \
    X(adam_consts, (const fk_adam *, h), (const int64_t *, taken), (float *, consts))              \
    X(adam, (float *, p), (const float *, g), (float *, m), (float *, v), (int64_t, n),            \
      (const fk_adam *, h), (const float *, consts), (const float *, skip))                        \
    /* the same over every tensor of l (one launch; the results of sgd / adam per tensor,   \
     * bit for bit) */                                                                         \
    X(sgd_multi, (const fk_plist *, l), (const fk_sgd *, h), (const int64_t *, taken),             \
      (const float *, skip))                                                                       \
    X(adam_multi, (const fk_plist *, l), (const fk_adam *, h), (const float *, consts),            \
      (const float *, skip))                                                                       \
    /* taken[0] += 1 unless skip (may be NULL) holds a nonzero value; runs after a step's      \
     * updates, which read taken */                                                             \
    X(step_count, (int64_t *, taken), (const float *, skip))                                       \
    /* master = g * (1 / scale[0]) in f32; found[0] = 1 when any is inf or nan */                 \
    X(unscale, (ferry_dtype, dt), (const void *, g), (float *, master), (int64_t, n),              \
      (const float *, scale), (float *, found))                                                    \
    /* the dynamic loss scale (GradScaler's update): found[0] nonzero: scale *= backoff and     \
     * tracker = 0; else tracker += 1, and on reaching interval scale *= growth, tracker = 0.   \
     * All three live in device memory. */                                                       \
    X(amp_update, (float *, scale), (int64_t *, tracker), (const float *, found),                  \
      (float, growth), (float, backoff), (int64_t, interval))                                      \
    /* Embedding (fk_embed): y[i] = w[idx[i]]; dw[idx[i]] += dy[i] in increasing i */            \
    X(embed_fwd, (ferry_dtype, dt), (void *, y), (const void *, w), (const void *, idx),          \
      (const fk_embed *, e))                                                                      \
    X(embed_bwd, (ferry_dtype, dt), (void *, dw), (const void *, dy), (const void *, idx),        \
      (const fk_embed *, e))

/* FK_MAP(m, sep, (t1, n1), (t2, n2), ...) expands to m(t1, n1) sep m(t2, n2) ...
 * for up to 8 pairs, a kernel's most arguments. sep is a function-like macro's
 * name (FK_COMMA gives a parameter or argument list, FK_NOSEP nothing), so it
 * survives being passed on. */
#define FK_COMMA() ,
#define FK_NOSEP()
#define FK_NARGS(...) FK_NARGS_(__VA_ARGS__, 8, 7, 6, 5, 4, 3, 2, 1, 0)
#define FK_NARGS_(a1, a2, a3, a4, a5, a6, a7, a8, N, ...) N
#define FK_CAT(a, b) FK_CAT_(a, b)
#define FK_CAT_(a, b) a##b
#define FK_APPLY(m, pair) m pair
#define FK_MAP(m, sep, ...) FK_CAT(FK_MAP_, FK_NARGS(__VA_ARGS__))(m, sep, __VA_ARGS__)
#define FK_MAP_1(m, s, x) FK_APPLY(m, x)
#define FK_MAP_2(m, s, x, ...) FK_APPLY(m, x) s() FK_MAP_1(m, s, __VA_ARGS__)
#define FK_MAP_3(m, s, x, ...) FK_APPLY(m, x) s() FK_MAP_2(m, s, __VA_ARGS__)
#define FK_MAP_4(m, s, x, ...) FK_APPLY(m, x) s() FK_MAP_3(m, s, __VA_ARGS__)
#define FK_MAP_5(m, s, x, ...) FK_APPLY(m, x) s() FK_MAP_4(m, s, __VA_ARGS__)
#define FK_MAP_6(m, s, x, ...) FK_APPLY(m, x) s() FK_MAP_5(m, s, __VA_ARGS__)
#define FK_MAP_7(m, s, x, ...) FK_APPLY(m, x) s() FK_MAP_6(m, s, __VA_ARGS__)
#define FK_MAP_8(m, s, x, ...) FK_APPLY(m, x) s() FK_MAP_7(m, s, __VA_ARGS__)

#define FK_PARAM(t, n) t n
#define FK_ARG(t, n) n
#define FK_PARAMS(...) FK_MAP(FK_PARAM, FK_COMMA, __VA_ARGS__)

/* One backend's kernels: fk_ctx_make looks the table up by the device's backend
 * kind, so op code never asks which device it runs on. */
typedef struct fk_table {
#define FK_SLOT(name, ...) ferry_status (*name)(const fk_ctx *c, FK_PARAMS(__VA_ARGS__));
    FK_KERNELS(FK_SLOT)
#undef FK_SLOT
} fk_table;

/* Each backend's functions are fk_<backend>_<kernel>; the table collects them. */
#define FK_DECLARE(P, name, ...) ferry_status fk_##P##_##name(const fk_ctx *c, FK_PARAMS(__VA_ARGS__));
#define FK_DECL_CPU(name, ...) FK_DECLARE(cpu, name, __VA_ARGS__)
#define FK_DECL_F32(name, ...) FK_DECLARE(f32, name, __VA_ARGS__)
#define FK_DECL_CUDA(name, ...) FK_DECLARE(cuda, name, __VA_ARGS__)
FK_KERNELS(FK_DECL_CPU)
/* The CPU's f32 implementations behind fk_cpu_* (kernels/cpu/half.c converts). */
FK_KERNELS(FK_DECL_F32)
extern const fk_table fk_cpu_table;
#if FERRY_HAVE_CUDA
FK_KERNELS(FK_DECL_CUDA)
extern const fk_table fk_cuda_table;
#endif
#if FERRY_SIM_KERNELS
/* The same CUDA sources compiled for the host, run by the simulated GPU
 * (src/device/sim/cuda_sim.cuh); the table is kernels/cuda/table_sim.c. */
#define FK_DECL_CUDA_SIM(name, ...) ferry_status fk_cuda_##name##_sim(const fk_ctx *c, FK_PARAMS(__VA_ARGS__));
FK_KERNELS(FK_DECL_CUDA_SIM)
extern const fk_table fk_cuda_sim_table;
#endif

/* The simulated GPU's table (kernels/sim/kernels_sim.c): the CUDA sources or the
 * CPU kernels, each launched in stream order. */
extern const fk_table fk_sim_table;

struct ferry_backend;
/* The table serving backend b's devices, or NULL (a CUDA backend in a build
 * without CUDA cannot happen). */
const fk_table *fk_table_for(const struct ferry_backend *b);

/* The kernel's status when c has no kernels: its stream is on another device
 * (FERRY_ERR_DEVICE_MISMATCH), or its device has no backend (cannot happen for a
 * tensor that exists: its device was checked when it was made). */
ferry_status fk_no_backend(const fk_ctx *c);

/* Calls kernel `name` of c's backend: FK(&c, relu_bwd, dt, dx, y, dy, n). */
#define FK(c, name, ...) ((c)->k ? (c)->k->name((c), __VA_ARGS__) : fk_no_backend(c))

/* Scratch device memory for one kernel call's launches on c's stream (the GPU
 * kernels' split reductions), kept between calls so that a training step
 * allocates nothing after its first (kernels/scratch.c). Take before queueing,
 * give back once the call's last kernel is queued. */
typedef struct fk_scratch {
    void *p;
    size_t bytes;
} fk_scratch;
ferry_status fk_scratch_take(const fk_ctx *c, size_t bytes, fk_scratch *out);
void fk_scratch_give(const fk_ctx *c, fk_scratch *s);

/* Scalar loads and stores in any dtype (host code). */
static inline float fk_ldf(ferry_dtype dt, const void *p, int64_t i)
{
    switch (dt) {
    case FERRY_DTYPE_F32: return ((const float *)p)[i];
    case FERRY_DTYPE_F16: return ferry_f16_to_f32(((const uint16_t *)p)[i]);
    case FERRY_DTYPE_BF16: return ferry_bf16_to_f32(((const uint16_t *)p)[i]);
    case FERRY_DTYPE_U8: return (float)((const uint8_t *)p)[i];
    case FERRY_DTYPE_I32: return (float)((const int32_t *)p)[i];
    case FERRY_DTYPE_I64: return (float)((const int64_t *)p)[i];
    case FERRY_DTYPE_U16: return (float)((const uint16_t *)p)[i];
    case FERRY_DTYPE_U32: return (float)((const uint32_t *)p)[i];
    default: return 0.0f;
    }
}

static inline double fk_ldd(ferry_dtype dt, const void *p, int64_t i)
{
    switch (dt) {
    case FERRY_DTYPE_F32: return ((const float *)p)[i];
    case FERRY_DTYPE_I32: return ((const int32_t *)p)[i];
    case FERRY_DTYPE_I64: return (double)((const int64_t *)p)[i];
    case FERRY_DTYPE_U32: return ((const uint32_t *)p)[i];
    default: return fk_ldf(dt, p, i);
    }
}

void fk_std(ferry_dtype dt, void *p, int64_t i, double v);

#ifdef __cplusplus
}
#endif
#endif

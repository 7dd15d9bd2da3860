/* Internal: the per-element formulas of the kernels, written once for the CPU
 * kernels (kernels/cpu/, the reference) and the CUDA kernels (kernels/cuda/):
 * the elementwise maps, the affine conversion and its saturating integer stores,
 * the reduction step, rand's and dropout's use of Philox, and the optimisers'
 * updates. Each is FERRY_HD: static inline in C, __host__ __device__ in .cu files.
 *
 * Exactness. The CPU is built with -ffp-contract=off; nvcc fuses a*b+c into an
 * FMA by default, which rounds once instead of twice. Wherever a formula here
 * multiplies and then adds, it says so with FK_MUL_RN/FK_ADD_RN/FK_SUB_RN, which are the
 * plain operators on the host and the _rn intrinsics (never fused) on the device,
 * so both backends round each step the same way (chosen over -fmad=false, which
 * would also slow down every other kernel of the file). What remains different
 * between backends is the math library (logf, cosf for normals; erf, exp, log,
 * pow, tanh in double for the CPU, where the CUDA elementwise maps use their f32
 * versions: kernels/cuda/ops.cu, fk_uop_f32, gives the bound);
 * tests/test_backend_ops.c compares those with a normalised error bound, not
 * bits. */
#ifndef FERRY_MODEL_KERNELS_FORMULAS_H
#define FERRY_MODEL_KERNELS_FORMULAS_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/philox.h"
#include "model/kernels/kernels.h"
#include "tensor/half.h"

#if defined(__CUDA_ARCH__) || defined(FERRY_SIM_DEVICE)
#define FK_MUL_RN(a, b) fk_mul_rn_((a), (b))
#define FK_ADD_RN(a, b) fk_add_rn_((a), (b))
#define FK_SUB_RN(a, b) fk_sub_rn_((a), (b))
__device__ __forceinline__ float fk_mul_rn_(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double fk_mul_rn_(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ float fk_add_rn_(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double fk_add_rn_(double a, double b) { return __dadd_rn(a, b); }
__device__ __forceinline__ float fk_sub_rn_(float a, float b) { return __fsub_rn(a, b); }
__device__ __forceinline__ double fk_sub_rn_(double a, double b) { return __dsub_rn(a, b); }
#else
#define FK_MUL_RN(a, b) ((a) * (b))
#define FK_ADD_RN(a, b) ((a) + (b))
#define FK_SUB_RN(a, b) ((a) - (b))
#endif

/* ---- elementwise maps, in double (the CPU's; CUDA's f32 twins are in
 * kernels/cuda/ops.cu): x and s as loaded, the result rounded by the store into
 * the output dtype ---- */
FERRY_HD double fk_uop_apply(int op, double x, double s)
{
    switch (op) {
    case FK_NEG: return -x;
    case FK_RELU: return x > 0 ? x : 0;
    case FK_GELU: return 0.5 * x * FK_ADD_RN(1.0, erf(x * 0.70710678118654752440));
    case FK_EXP: return exp(x);
    case FK_LOG: return log(x);
    case FK_SQRT: return sqrt(x);
    case FK_TANH: return tanh(x);
    case FK_SIGMOID: return 1.0 / FK_ADD_RN(1.0, exp(-x));
    case FK_ABS: return fabs(x);
    case FK_ADD_S: return x + s;
    case FK_MUL_S: return x * s;
    case FK_RSUB_S: return s - x;
    case FK_RDIV_S: return s / x;
    case FK_POW_S: return pow(x, s);
    case FK_MAX_S: return x > s || x != x ? x : s;
    case FK_MIN_S: return x < s || x != x ? x : s;
    default: return 0;
    }
}

/* maximum and minimum propagate NaN, as PyTorch's do. */
FERRY_HD double fk_bop_apply(int op, double a, double b)
{
    switch (op) {
    case FK_ADD: return a + b;
    case FK_SUB: return a - b;
    case FK_MUL: return a * b;
    case FK_DIV: return a / b;
    case FK_MAXIMUM: return a != a || b != b ? (double)NAN : a > b ? a : b;
    case FK_MINIMUM: return a != a || b != b ? (double)NAN : a < b ? a : b;
    default: return 0;
    }
}

/* convert's y = x * mul + add; the identity leaves x alone (-0 stays -0). */
FERRY_HD double fk_affine(double x, double mul, double add)
{
    return mul == 1.0 && add == 0.0 ? x : FK_ADD_RN(FK_MUL_RN(x, mul), add);
}

/* A double stored into an integer dtype: truncated toward zero, saturated, NaN
 * to 0 (tensor/half.h's rule, so ops and tensor conversions agree). */
FERRY_HD int64_t fk_sat(double v, int64_t lo, int64_t hi)
{
    ferry_scalar_ s;
    s.f = v;
    s.i = 0;
    s.is_int = 0;
    return ferry_to_int_(s, lo, hi);
}

/* ---- reductions (the CPU's loop and CUDA's exact per-output loop) ---- */
FERRY_HD double fk_reduce_init(int op) { return op == FK_MAX || op == FK_ARGMAX ? -INFINITY : 0.0; }

/* NaN wins, as in PyTorch; the first maximum is kept. */
FERRY_HD void fk_reduce_step(int op, double *acc, int64_t *arg, double v, int64_t j)
{
    if (op == FK_SUM || op == FK_MEAN) {
        *acc += v;
    } else if (v > *acc || (v != v && *acc == *acc)) {
        *acc = v;
        *arg = j;
    }
}

/* Merges two partial maxima over disjoint index sets (b into a), as if one
 * loop of fk_reduce_step had seen both: NaN wins, then the larger value, and
 * on a tie the smaller index (the first one). */
FERRY_HD void fk_reduce_merge(double *acc, int64_t *arg, double b, int64_t barg)
{
    bool an = *acc != *acc, bn = b != b;
    bool take = an && bn ? barg < *arg : an ? false : bn ? true : b > *acc || (b == *acc && barg < *arg);
    if (take) {
        *acc = b;
        *arg = barg;
    }
}

FERRY_HD double fk_reduce_final(int op, double acc, int64_t n)
{
    if (op == FK_MEAN)
        return n ? acc / (double)n : (double)NAN;
    return acc;
}

/* ---- random numbers: element i draws from Philox block (i, stream) keyed by
 * the seed; dropout's element i keeps with word i % 4 of block i / 4 ---- */
FERRY_HD float fk_rand_elem(int64_t i, uint64_t seed, uint64_t stream, bool normal)
{
    uint32_t w[4];
    ferry_philox_block_((uint64_t)i, stream, seed, w);
    return normal ? ferry_box_muller_(w[0], w[1]) : ferry_u01_(w[0]);
}

FERRY_HD float fk_dropout_scale(float p) { return p < 1.0f ? 1.0f / (1.0f - p) : 0.0f; }

FERRY_HD float fk_dropout_apply(float x, uint32_t w, float p, float scale)
{
    return ferry_u01_(w) >= p ? x * scale : 0.0f;
}

/* ---- optimisers (PyTorch's formulas), one element ---- */
/* SGD without momentum: p - lr (g + wd p). */
FERRY_HD float fk_sgd_plain(float p, float g, float lr, float wd)
{
    return FK_SUB_RN(p, FK_MUL_RN(lr, FK_ADD_RN(g, FK_MUL_RN(wd, p))));
}

/* SGD with momentum: updates *buf and returns the new p; keep = 1 - dampening.
 * The first step sets the buffer to the gradient (PyTorch's rule). */
FERRY_HD float fk_sgd_momentum(float p, float g, float *buf, float lr, float momentum, float keep, float wd,
                               bool nesterov, bool first)
{
    float d = FK_ADD_RN(g, FK_MUL_RN(wd, p));
    float b = first ? d : FK_ADD_RN(FK_MUL_RN(momentum, *buf), FK_MUL_RN(keep, d));
    *buf = b;
    return FK_SUB_RN(p, FK_MUL_RN(lr, nesterov ? FK_ADD_RN(d, FK_MUL_RN(momentum, b)) : b));
}

/* Adam's per-step constants from the step count: lr / (1 - b1^t), sqrt(1 - b2^t)
 * (once per step: the adam_consts kernel, which the update kernels read). */
/* In double, as PyTorch computes them (Python floats): 1 - b1^t cancels, and
 * CUDA's powf may be 4 ulp off, which at b1 = 0.9, t = 1 is 2.4e-6 of
 * step_size (the simulated GPU's device math found it). */
FERRY_HD void fk_adam_consts(float lr, float b1, float b2, int64_t step, float *step_size, float *sbc2)
{
    double bc1 = 1.0 - pow((double)b1, (double)step), bc2 = 1.0 - pow((double)b2, (double)step);
    *step_size = (float)((double)lr / bc1);
    *sbc2 = (float)sqrt(bc2);
}

/* The dynamic loss scale after one step (torch.cuda.amp.GradScaler's policy): a
 * step with inf or nan backs the scale off and restarts the count of good steps;
 * `interval` good steps in a row grow it. */
FERRY_HD void fk_amp_update(float *scale, int64_t *tracker, bool found, float growth, float backoff,
                            int64_t interval)
{
    if (found) {
        *scale = FK_MUL_RN(*scale, backoff);
        *tracker = 0;
    } else if (++*tracker >= interval) {
        *scale = FK_MUL_RN(*scale, growth);
        *tracker = 0;
    }
}

/* Adam (decoupled: AdamW) on one element: updates *m and *v, returns the new p. */
FERRY_HD float fk_adam_elem(float p, float g, float *m, float *v, float lr, float b1, float b2, float eps,
                            float wd, bool decoupled, float step_size, float sbc2)
{
    float d = g;
    if (decoupled)
        p = FK_MUL_RN(p, FK_SUB_RN(1.0f, FK_MUL_RN(lr, wd)));
    else
        d = FK_ADD_RN(d, FK_MUL_RN(wd, p));
    float mm = FK_ADD_RN(FK_MUL_RN(b1, *m), FK_MUL_RN(1.0f - b1, d));
    float vv = FK_ADD_RN(FK_MUL_RN(b2, *v), FK_MUL_RN(FK_MUL_RN(1.0f - b2, d), d));
    *m = mm;
    *v = vv;
    return p - step_size * mm / (sqrtf(vv) / sbc2 + eps);
}

#endif

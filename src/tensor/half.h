/* Internal: scalar conversions shared by the host (tensor/half.c) and CUDA
 * kernels (tensor_cuda.cu), written once with integer bit operations so both
 * give bit-identical results: f32 <-> f16 / bf16 with round to nearest even,
 * infinities, NaNs (kept quiet) and subnormals; and one element of any dtype to
 * any other. */
#ifndef FERRY_MODEL_TENSOR_HALF_H
#define FERRY_MODEL_TENSOR_HALF_H

#include <stdint.h>
#include <string.h>

#include "ferry/tensor.h"

#ifdef __CUDACC__
#define FERRY_HD __host__ __device__ __forceinline__
#else
#define FERRY_HD static inline
#endif

FERRY_HD uint32_t ferry_f32_bits_(float f)
{
#ifdef __CUDA_ARCH__
    return __float_as_uint(f);
#else
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
#endif
}

FERRY_HD float ferry_bits_f32_(uint32_t u)
{
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    float f;
    memcpy(&f, &u, 4);
    return f;
#endif
}

FERRY_HD uint16_t ferry_f32_to_f16_(float f)
{
    uint32_t x = ferry_f32_bits_(f);
    uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) /* inf stays inf; NaN stays a quiet NaN with its top payload */
        return (uint16_t)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u | ((ax >> 13) & 0x3ffu) : 0u));
    if (ax >= 0x477ff000u) /* 65520 and up round to infinity */
        return (uint16_t)(sign | 0x7c00u);
    if (ax < 0x38800000u) { /* below 2^-14: a half subnormal (units of 2^-24) or zero */
        uint32_t e = ax >> 23;
        if (e < 102) /* below 2^-25: rounds to zero */
            return (uint16_t)sign;
        uint32_t m = (ax & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126 - e; /* 14..24 */
        uint32_t r = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1u)))
            r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = (ax >> 13) - ((uint32_t)(127 - 15) << 10), rem = ax & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (r & 1u)))
        r++; /* a carry into the exponent is the right answer */
    return (uint16_t)(sign | r);
}

FERRY_HD float ferry_f16_to_f32_(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0) {
        float v = (float)m * 5.9604644775390625e-8f; /* m * 2^-24, exact */
        return sign ? -v : v;
    }
    if (e == 31)
        return ferry_bits_f32_(sign | 0x7f800000u | (m << 13));
    return ferry_bits_f32_(sign | ((e + 112u) << 23) | (m << 13));
}

FERRY_HD uint16_t ferry_f32_to_bf16_(float f)
{
    uint32_t x = ferry_f32_bits_(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) /* NaN: truncating could make it inf */
        return (uint16_t)((x >> 16) | 0x40u);
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

FERRY_HD float ferry_bf16_to_f32_(uint16_t h) { return ferry_bits_f32_((uint32_t)h << 16); }

/* One element, as a double (floating dtypes) or an int64 (integer dtypes). */
typedef struct ferry_scalar_ {
    double f;
    int64_t i;
    int is_int;
} ferry_scalar_;

FERRY_HD ferry_scalar_ ferry_load_(const void *p, int dt, int64_t k)
{
    ferry_scalar_ s;
    s.f = 0;
    s.i = 0;
    s.is_int = 0;
    switch (dt) {
    case FERRY_DTYPE_F32: s.f = ((const float *)p)[k]; break;
    case FERRY_DTYPE_F16: s.f = ferry_f16_to_f32_(((const uint16_t *)p)[k]); break;
    case FERRY_DTYPE_BF16: s.f = ferry_bf16_to_f32_(((const uint16_t *)p)[k]); break;
    case FERRY_DTYPE_U8: s.i = ((const uint8_t *)p)[k]; s.is_int = 1; break;
    case FERRY_DTYPE_I32: s.i = ((const int32_t *)p)[k]; s.is_int = 1; break;
    case FERRY_DTYPE_U16: s.i = ((const uint16_t *)p)[k]; s.is_int = 1; break;
    case FERRY_DTYPE_U32: s.i = ((const uint32_t *)p)[k]; s.is_int = 1; break;
    default: s.i = ((const int64_t *)p)[k]; s.is_int = 1; break;
    }
    return s;
}

/* Truncates toward zero and saturates to [lo, hi]; NaN becomes 0. */
FERRY_HD int64_t ferry_to_int_(ferry_scalar_ s, int64_t lo, int64_t hi)
{
    if (s.is_int)
        return s.i < lo ? lo : s.i > hi ? hi : s.i;
    if (!(s.f == s.f))
        return 0;
    if (s.f <= (double)lo)
        return lo;
    if (s.f >= (double)hi) /* (double)INT64_MAX rounds up to 2^63: >= catches it */
        return hi;
    return (int64_t)s.f;
}

FERRY_HD float ferry_to_float_(ferry_scalar_ s) { return s.is_int ? (float)s.i : (float)s.f; }

FERRY_HD void ferry_store_(void *p, int dt, int64_t k, ferry_scalar_ s)
{
    switch (dt) {
    case FERRY_DTYPE_F32: ((float *)p)[k] = ferry_to_float_(s); break;
    case FERRY_DTYPE_F16: ((uint16_t *)p)[k] = ferry_f32_to_f16_(ferry_to_float_(s)); break;
    case FERRY_DTYPE_BF16: ((uint16_t *)p)[k] = ferry_f32_to_bf16_(ferry_to_float_(s)); break;
    case FERRY_DTYPE_U8: ((uint8_t *)p)[k] = (uint8_t)ferry_to_int_(s, 0, 255); break;
    case FERRY_DTYPE_I32:
        ((int32_t *)p)[k] = (int32_t)ferry_to_int_(s, INT32_MIN, INT32_MAX);
        break;
    case FERRY_DTYPE_U16: ((uint16_t *)p)[k] = (uint16_t)ferry_to_int_(s, 0, UINT16_MAX); break;
    case FERRY_DTYPE_U32: ((uint32_t *)p)[k] = (uint32_t)ferry_to_int_(s, 0, UINT32_MAX); break;
    default: ((int64_t *)p)[k] = ferry_to_int_(s, INT64_MIN, INT64_MAX); break;
    }
}

FERRY_HD int ferry_is_float_dt_(int dt)
{
    return dt == FERRY_DTYPE_F32 || dt == FERRY_DTYPE_F16 || dt == FERRY_DTYPE_BF16;
}

/* One element from any dtype to any other. Between float dtypes the value stays
 * an f32 and every step is bit code: CUDA gives single-precision operations on
 * NaN the canonical NaN, so a float -> double -> float round trip on the GPU may
 * lose a payload that the CPU keeps. */
FERRY_HD void ferry_convert_elem_(const void *src, int sdt, void *dst, int ddt, int64_t k)
{
    if (!ferry_is_float_dt_(sdt) || !ferry_is_float_dt_(ddt)) {
        ferry_store_(dst, ddt, k, ferry_load_(src, sdt, k));
        return;
    }
    uint32_t bits;
    switch (sdt) {
    case FERRY_DTYPE_F32: memcpy(&bits, (const float *)src + k, 4); break;
    case FERRY_DTYPE_F16: bits = ferry_f32_bits_(ferry_f16_to_f32_(((const uint16_t *)src)[k])); break;
    default: bits = (uint32_t)((const uint16_t *)src)[k] << 16; break;
    }
    switch (ddt) {
    case FERRY_DTYPE_F32: memcpy((float *)dst + k, &bits, 4); break;
    case FERRY_DTYPE_F16: ((uint16_t *)dst)[k] = ferry_f32_to_f16_(ferry_bits_f32_(bits)); break;
    default: ((uint16_t *)dst)[k] = ferry_f32_to_bf16_(ferry_bits_f32_(bits)); break;
    }
}

#endif

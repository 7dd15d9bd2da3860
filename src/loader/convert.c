/* The batch conversion on the host (device = cpu, and wire f32). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "common/error.h"
#include "loader/convert.h"
#include "ferry/tensor.h"

static inline float load(const void *src, ferry_dtype dt, size_t i)
{
    return dt == FERRY_DTYPE_U8 ? (float)((const uint8_t *)src)[i] : ((const float *)src)[i];
}

static inline void store(void *dst, ferry_dtype dt, size_t i, float y)
{
    switch (dt) {
    case FERRY_DTYPE_F32: ((float *)dst)[i] = y; break;
    case FERRY_DTYPE_F16: ((uint16_t *)dst)[i] = ferry_f32_to_f16(y); break;
    case FERRY_DTYPE_BF16: ((uint16_t *)dst)[i] = ferry_f32_to_bf16(y); break;
    default: {
        /* U8 out: saturate, round to nearest. */
        float r = y < 0.0f ? 0.0f : y > 255.0f ? 255.0f : y;
        ((uint8_t *)dst)[i] = (uint8_t)lrintf(r);
        break;
    }
    }
}

/* Same layout, u8 -> f32: the hot case, one plane per channel, vectorised. */
static void plane_u8_f32(const uint8_t *restrict src, float *restrict dst, size_t n, float a, float b)
{
    for (size_t i = 0; i < n; i++) {
        float t = (float)src[i] * a; /* two roundings, as in convert.cu */
        dst[i] = t + b;
    }
}

void ferry_convert_sample_cpu(const ferry_convert_spec *sp, const void *src, void *dst)
{
    const size_t C = sp->channels, HW = sp->height * sp->width;
    const bool same_layout = sp->src_layout == sp->dst_layout || C == 1;
    if (same_layout && sp->affine && sp->src_dtype == FERRY_DTYPE_U8 && sp->dst_dtype == FERRY_DTYPE_F32 &&
        (sp->src_layout == FERRY_LAYOUT_CHW || C == 1)) {
        for (size_t c = 0; c < C; c++)
            plane_u8_f32((const uint8_t *)src + c * HW, (float *)dst + c * HW, HW, sp->scale[c],
                         sp->shift[c]);
        return;
    }
    for (size_t c = 0; c < C; c++) {
        const float a = sp->affine ? sp->scale[c] : 1.0f;
        const float b = sp->affine ? sp->shift[c] : 0.0f;
        for (size_t p = 0; p < HW; p++) {
            size_t si = sp->src_layout == FERRY_LAYOUT_CHW ? c * HW + p : p * C + c;
            size_t di = sp->dst_layout == FERRY_LAYOUT_CHW ? c * HW + p : p * C + c;
            float x = load(src, sp->src_dtype, si);
            if (sp->affine) {
                float t = x * a;
                x = t + b;
            }
            store(dst, sp->dst_dtype, di, x);
        }
    }
}

void ferry_convert_cpu(const ferry_convert_spec *sp, const void *src, void *dst)
{
    const size_t elems = sp->channels * sp->height * sp->width;
    const size_t in_bytes = elems * ferry_dtype_size(sp->src_dtype);
    const size_t out_bytes = elems * ferry_dtype_size(sp->dst_dtype);
    for (size_t n = 0; n < sp->count; n++)
        ferry_convert_sample_cpu(sp, (const uint8_t *)src + n * in_bytes,
                                 (uint8_t *)dst + n * out_bytes);
}

/* Half-precision scalar conversions and the host dtype conversion loop. The bit
 * manipulation lives in tensor/half.h so CUDA kernels share it exactly. */
#include <stdbool.h>

#include "tensor/half.h"
#include "tensor/internal.h"

uint16_t ferry_f32_to_f16(float x) { return ferry_f32_to_f16_(x); }
float ferry_f16_to_f32(uint16_t h) { return ferry_f16_to_f32_(h); }
uint16_t ferry_f32_to_bf16(float x) { return ferry_f32_to_bf16_(x); }
float ferry_bf16_to_f32(uint16_t h) { return ferry_bf16_to_f32_(h); }

/* One loop per pair, so that each vectorises; u32 -> i32 saturates as
 * ferry_store_ does. */
static void widen_ids(const void *src, bool u16, void *dst, bool i64, int64_t n)
{
    if (u16 && i64) {
        const uint16_t *s = src;
        int64_t *d = dst;
        for (int64_t k = 0; k < n; k++)
            d[k] = s[k];
    } else if (u16) {
        const uint16_t *s = src;
        int32_t *d = dst;
        for (int64_t k = 0; k < n; k++)
            d[k] = s[k];
    } else if (i64) {
        const uint32_t *s = src;
        int64_t *d = dst;
        for (int64_t k = 0; k < n; k++)
            d[k] = s[k];
    } else {
        const uint32_t *s = src;
        int32_t *d = dst;
        for (int64_t k = 0; k < n; k++)
            d[k] = s[k] > INT32_MAX ? INT32_MAX : (int32_t)s[k];
    }
}

void ferry_convert_host_(const void *src, ferry_dtype sdt, void *dst, ferry_dtype ddt, int64_t n)
{
    /* The common pairs get straight loops; the rest go through one scalar. */
    if (sdt == FERRY_DTYPE_U8 && ddt == FERRY_DTYPE_F32) {
        const uint8_t *s = src;
        float *d = dst;
        for (int64_t k = 0; k < n; k++)
            d[k] = (float)s[k];
        return;
    }
    if (sdt == FERRY_DTYPE_F32 && ddt == FERRY_DTYPE_F16) {
        const float *s = src;
        uint16_t *d = dst;
        for (int64_t k = 0; k < n; k++)
            d[k] = ferry_f32_to_f16_(s[k]);
        return;
    }
    if (sdt == FERRY_DTYPE_F16 && ddt == FERRY_DTYPE_F32) {
        const uint16_t *s = src;
        float *d = dst;
        for (int64_t k = 0; k < n; k++)
            d[k] = ferry_f16_to_f32_(s[k]);
        return;
    }
    /* Token ids widened for an embedding (tokens cross as stored: u16/u32). */
    if ((sdt == FERRY_DTYPE_U16 || sdt == FERRY_DTYPE_U32) &&
        (ddt == FERRY_DTYPE_I32 || ddt == FERRY_DTYPE_I64)) {
        widen_ids(src, sdt == FERRY_DTYPE_U16, dst, ddt == FERRY_DTYPE_I64, n);
        return;
    }
    for (int64_t k = 0; k < n; k++)
        ferry_convert_elem_(src, sdt, dst, ddt, k);
}

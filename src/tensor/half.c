/* Half-precision scalar conversions and the host dtype conversion loop. The bit
 * manipulation lives in tensor/half.h so CUDA kernels share it exactly. */
#include "tensor/half.h"
#include "tensor/internal.h"

uint16_t ferry_f32_to_f16(float x) { return ferry_f32_to_f16_(x); }
float ferry_f16_to_f32(uint16_t h) { return ferry_f16_to_f32_(h); }
uint16_t ferry_f32_to_bf16(float x) { return ferry_f32_to_bf16_(x); }
float ferry_bf16_to_f32(uint16_t h) { return ferry_bf16_to_f32_(h); }

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
    for (int64_t k = 0; k < n; k++)
        ferry_convert_elem_(src, sdt, dst, ddt, k);
}

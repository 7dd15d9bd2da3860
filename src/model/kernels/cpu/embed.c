/* The Embedding's CPU kernels, the reference the GPU's are tested against
 * (tests/test_embedding.c). Forward copies rows, so it is exact in any float
 * dtype; backward adds each gradient row into its table row in increasing
 * position, in f32, and rounds each table element to its dtype once. */
#include <string.h>

#include "common/error.h"
#include "model/kernels/kernels.h"
#include "tensor/internal.h"

static int64_t index_at(ferry_dtype idt, const void *idx, int64_t i)
{
    return idt == FERRY_DTYPE_I32 ? (int64_t)((const int32_t *)idx)[i] : ((const int64_t *)idx)[i];
}

static ferry_status embed_check(ferry_dtype dt, const fk_embed *e, const char *what)
{
    if (e->idt != FERRY_DTYPE_I32 && e->idt != FERRY_DTYPE_I64)
        return ferry_fail(FERRY_ERR_DTYPE, "%s: indices must be i32 or i64, not %s", what, ferry_dtype_name(e->idt));
    if (dt != FERRY_DTYPE_F32 && dt != FERRY_DTYPE_F16 && dt != FERRY_DTYPE_BF16)
        return ferry_fail(FERRY_ERR_DTYPE, "%s on the CPU supports f32, f16 and bf16, not %s", what,
                          ferry_dtype_name(dt));
    return FERRY_OK;
}

ferry_status fk_cpu_embed_fwd(const fk_ctx *c, ferry_dtype dt, void *y, const void *w, const void *idx,
                              const fk_embed *e)
{
    (void)c;
    ferry_status st = embed_check(dt, e, "embedding forward");
    if (st != FERRY_OK)
        return st;
    size_t row = (size_t)e->dim * ferry_dtype_size(dt);
    for (int64_t i = 0; i < e->n; i++) {
        int64_t v = index_at(e->idt, idx, i);
        char *dst = (char *)y + (size_t)i * row;
        if (v >= 0 && v < e->vocab) {
            memcpy(dst, (const char *)w + (size_t)v * row, row);
            continue;
        }
        memset(dst, 0, row); /* zero bits: 0.0 in every float dtype */
        if (e->bad && i < e->bad[0])
            e->bad[0] = i;
    }
    return FERRY_OK;
}

static void embed_bwd_f32(float *dw, const float *dy, const void *idx, const fk_embed *e)
{
    for (int64_t i = 0; i < e->n; i++) {
        int64_t v = index_at(e->idt, idx, i);
        if (v < 0 || v >= e->vocab)
            continue;
        float *dst = dw + v * e->dim;
        const float *src = dy + i * e->dim;
        for (int64_t d = 0; d < e->dim; d++)
            dst[d] += src[d];
    }
}

ferry_status fk_cpu_embed_bwd(const fk_ctx *c, ferry_dtype dt, void *dw, const void *dy, const void *idx,
                              const fk_embed *e)
{
    (void)c;
    ferry_status st = embed_check(dt, e, "embedding backward");
    if (st != FERRY_OK || e->n == 0 || e->dim == 0)
        return st;
    if (dt == FERRY_DTYPE_F32) {
        embed_bwd_f32(dw, dy, idx, e);
        return FERRY_OK;
    }
    /* f16/bf16: the whole table and gradient through f32 (rows no index names
     * go back unchanged: f16 -> f32 -> f16 is exact). */
    int64_t nw = e->vocab * e->dim, ny = e->n * e->dim;
    float *fw = ferry_host_malloc((size_t)nw * sizeof(float)), *fy = ferry_host_malloc((size_t)ny * sizeof(float));
    if (!fw || !fy) {
        ferry_host_free(fw);
        ferry_host_free(fy);
        return ferry_fail(FERRY_ERR_NO_MEMORY, "embedding backward: no memory for the f32 copies");
    }
    ferry_convert_host_(dw, dt, fw, FERRY_DTYPE_F32, nw);
    ferry_convert_host_(dy, dt, fy, FERRY_DTYPE_F32, ny);
    embed_bwd_f32(fw, fy, idx, e);
    ferry_convert_host_(fw, FERRY_DTYPE_F32, dw, dt, nw);
    ferry_host_free(fw);
    ferry_host_free(fy);
    return FERRY_OK;
}

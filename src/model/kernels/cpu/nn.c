/* CPU kernels for the layers, losses and optimisers, in f32, written as flat
 * loops the compiler vectorises. f16/bf16 tensors reach them through the
 * converting wrappers in kernels/cpu/half.c. Dropout's and the optimisers'
 * per-element formulas are in kernels/formulas.h, shared with CUDA. */
#include <math.h>
#include <string.h>

#include "common/error.h"
#include "model/kernels/formulas.h"
#include "model/kernels/kernels.h"

ferry_status fk_f32_bias_add(const fk_ctx *c, ferry_dtype dt, void *y, const void *b,
                             int64_t outer, int64_t ch, int64_t inner, bool relu)
{
    (void)c;
    (void)dt;
    float *yp = y;
    const float *bp = b;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t k = 0; k < ch; k++) {
            float *row = yp + (o * ch + k) * inner;
            float v = bp[k];
            if (inner == 1) {
                row[0] += v;
                continue;
            }
            for (int64_t i = 0; i < inner; i++)
                row[i] += v;
        }
    /* The ReLU after the add (as FK_RELU: NaN and -0 become 0); f16/bf16
     * callers apply it again after rounding (half.c). */
    for (int64_t i = 0; relu && i < outer * ch * inner; i++)
        yp[i] = yp[i] > 0 ? yp[i] : 0;
    return FERRY_OK;
}

ferry_status fk_f32_bias_grad(const fk_ctx *c, ferry_dtype dt, void *db, const void *dy,
                              int64_t outer, int64_t ch, int64_t inner)
{
    (void)c;
    (void)dt;
    float *g = db;
    const float *d = dy;
    if (inner == 1) {
        for (int64_t o = 0; o < outer; o++)
            for (int64_t k = 0; k < ch; k++)
                g[k] += d[o * ch + k];
        return FERRY_OK;
    }
    for (int64_t o = 0; o < outer; o++)
        for (int64_t k = 0; k < ch; k++) {
            const float *row = d + (o * ch + k) * inner;
            float s = 0;
            for (int64_t i = 0; i < inner; i++)
                s += row[i];
            g[k] += s;
        }
    return FERRY_OK;
}

ferry_status fk_f32_relu_bwd(const fk_ctx *c, ferry_dtype dt, void *dx, const void *y,
                             const void *dy, int64_t n)
{
    (void)c;
    (void)dt;
    float *o = dx;
    const float *yp = y, *g = dy;
    for (int64_t i = 0; i < n; i++)
        o[i] = yp[i] > 0 ? g[i] : 0.0f;
    return FERRY_OK;
}

ferry_status fk_f32_cross_entropy(const fk_ctx *c, ferry_dtype dt, const void *logits,
                                  ferry_dtype ldt, const void *labels, void *dlogits,
                                  const fk_xent *xr)
{
    (void)c;
    (void)dt;
    int64_t rows = xr->rows, classes = xr->classes;
    float gscale = xr->gscale;
    if (xr->gnum && rows)
        gscale = xr->gnum[0] / (float)rows;
    const float *x = logits;
    float *dx = dlogits;
    double total = 0;
    int64_t ok = 0, nbad = 0;
    for (int64_t r = 0; r < rows; r++) {
        const float *row = x + r * classes;
        int64_t label = ldt == FERRY_DTYPE_I32 ? ((const int32_t *)labels)[r]
                                               : ((const int64_t *)labels)[r];
        /* The first maximum; NaN counts as the maximum (PyTorch's argmax, and the
         * CUDA kernel's fk_argmax_merge). */
        float mx = row[0];
        int64_t arg = 0;
        for (int64_t k = 1; k < classes && mx == mx; k++)
            if (row[k] > mx || row[k] != row[k]) {
                mx = row[k];
                arg = k;
            }
        /* From the first term (classes >= 1, checked by the caller): never log(0). */
        float sum = expf(row[0] - mx);
        for (int64_t k = 1; k < classes; k++)
            sum += expf(row[k] - mx);
        float ls = logf(sum); /* loss = log(sum) - (x[label] - mx): see fk_cpu_softmax */
        if (label < 0 || label >= classes) {
            nbad++;
            if (dx)
                memset(dx + r * classes, 0, (size_t)classes * sizeof(float));
            continue;
        }
        total += (double)(ls - (row[label] - mx));
        ok += arg == label;
        if (dx) {
            float inv = 1.0f / sum;
            float *drow = dx + r * classes;
            for (int64_t k = 0; k < classes; k++)
                drow[k] = expf(row[k] - mx) * inv * gscale;
            drow[label] -= gscale;
        }
    }
    if (xr->loss)
        xr->loss[0] += (float)total;
    if (xr->correct)
        xr->correct[0] += ok;
    if (xr->bad)
        xr->bad[0] += nbad;
    return FERRY_OK;
}

ferry_status fk_f32_mse(const fk_ctx *c, ferry_dtype dt, const void *p, const void *t, int64_t n,
                        float *loss, float lscale, void *dp, float gscale)
{
    (void)c;
    (void)dt;
    const float *a = p, *b = t;
    float *d = dp;
    double s = 0;
    for (int64_t i = 0; i < n; i++) {
        float e = a[i] - b[i];
        s += (double)e * e;
        if (d)
            d[i] = 2.0f * e * gscale;
    }
    if (loss)
        loss[0] += (float)(s * lscale);
    return FERRY_OK;
}

/* g->n images [n, C, H, W] -> col [C*kh*kw, n*oh*ow], image i's columns at i*oh*ow. */
ferry_status fk_f32_im2col(const fk_ctx *c, ferry_dtype dt, const fk_conv *g, const void *x,
                           void *col)
{
    (void)c;
    (void)dt;
    const float *xp = x;
    float *cp = col;
    int64_t ohw = g->oh * g->ow, cols = g->n * ohw, chw = g->c * g->h * g->w;
    for (int64_t ch = 0; ch < g->c; ch++)
        for (int64_t ki = 0; ki < g->kh; ki++)
            for (int64_t kj = 0; kj < g->kw; kj++) {
                float *row = cp + ((ch * g->kh + ki) * g->kw + kj) * cols;
                for (int64_t img = 0; img < g->n; img++) {
                    const float *plane = xp + img * chw + ch * g->h * g->w;
                    float *dst = row + img * ohw;
                    for (int64_t oy = 0; oy < g->oh; oy++) {
                        int64_t iy = oy * g->sh - g->ph + ki;
                        float *out = dst + oy * g->ow;
                        if (iy < 0 || iy >= g->h) {
                            memset(out, 0, (size_t)g->ow * sizeof(float));
                            continue;
                        }
                        const float *in = plane + iy * g->w;
                        for (int64_t ox = 0; ox < g->ow; ox++) {
                            int64_t ix = ox * g->sw - g->pw + kj;
                            out[ox] = ix >= 0 && ix < g->w ? in[ix] : 0.0f;
                        }
                    }
                }
            }
    return FERRY_OK;
}

/* col [C*kh*kw, n*oh*ow] accumulated into g->n images [n, C, H, W]. */
ferry_status fk_f32_col2im(const fk_ctx *c, ferry_dtype dt, const fk_conv *g, const void *col,
                           void *x)
{
    (void)c;
    (void)dt;
    float *xp = x;
    const float *cp = col;
    int64_t ohw = g->oh * g->ow, cols = g->n * ohw, chw = g->c * g->h * g->w;
    /* col2im writes x (the GPU's kernel gathers into each element): the scatter
     * below adds into zeros. */
    if (g->n * chw > 0) /* x may be NULL when empty */
        memset(xp, 0, (size_t)(g->n * chw) * sizeof *xp);
    for (int64_t img = 0; img < g->n; img++)
        for (int64_t ch = 0; ch < g->c; ch++)
            for (int64_t ki = 0; ki < g->kh; ki++)
                for (int64_t kj = 0; kj < g->kw; kj++) {
                    const float *row = cp + ((ch * g->kh + ki) * g->kw + kj) * cols + img * ohw;
                    float *plane = xp + img * chw + ch * g->h * g->w;
                    for (int64_t oy = 0; oy < g->oh; oy++) {
                        int64_t iy = oy * g->sh - g->ph + ki;
                        if (iy < 0 || iy >= g->h)
                            continue;
                        float *out = plane + iy * g->w;
                        const float *in = row + oy * g->ow;
                        for (int64_t ox = 0; ox < g->ow; ox++) {
                            int64_t ix = ox * g->sw - g->pw + kj;
                            if (ix >= 0 && ix < g->w)
                                out[ix] += in[ox];
                        }
                    }
                }
    return FERRY_OK;
}

ferry_status fk_f32_maxpool_fwd(const fk_ctx *c, ferry_dtype dt, const fk_conv *g, const void *x,
                                void *y, int32_t *idx)
{
    (void)c;
    (void)dt;
    const float *xp = x;
    float *yp = y;
    for (int64_t p = 0; p < g->n * g->c; p++) {
        const float *plane = xp + p * g->h * g->w;
        for (int64_t oy = 0; oy < g->oh; oy++)
            for (int64_t ox = 0; ox < g->ow; ox++) {
                float best = -INFINITY;
                int32_t bi = -1;
                for (int64_t ki = 0; ki < g->kh; ki++) {
                    int64_t iy = oy * g->sh - g->ph + ki;
                    if (iy < 0 || iy >= g->h)
                        continue;
                    for (int64_t kj = 0; kj < g->kw; kj++) {
                        int64_t ix = ox * g->sw - g->pw + kj;
                        if (ix < 0 || ix >= g->w)
                            continue;
                        float v = plane[iy * g->w + ix];
                        if (bi < 0 || v > best || v != v) {
                            best = v;
                            bi = (int32_t)(iy * g->w + ix);
                        }
                    }
                }
                int64_t o = (p * g->oh + oy) * g->ow + ox;
                yp[o] = best;
                idx[o] = bi;
            }
    }
    return FERRY_OK;
}

ferry_status fk_f32_maxpool_bwd(const fk_ctx *c, ferry_dtype dt, const fk_conv *g, const void *dy,
                                const int32_t *idx, void *dx)
{
    (void)c;
    (void)dt;
    const float *d = dy;
    float *o = dx;
    int64_t ohw = g->oh * g->ow, hw = g->h * g->w;
    if (g->n * g->c * hw == 0) /* an empty dx may be NULL: memset(NULL, 0, 0) is undefined */
        return FERRY_OK;
    memset(o, 0, (size_t)(g->n * g->c * hw) * sizeof(float));
    for (int64_t p = 0; p < g->n * g->c; p++)
        for (int64_t i = 0; i < ohw; i++)
            if (idx[p * ohw + i] >= 0)
                o[p * hw + idx[p * ohw + i]] += d[p * ohw + i];
    return FERRY_OK;
}

/* Average pooling divides by the full window, padding included
 * (PyTorch's count_include_pad=True default). */
ferry_status fk_f32_avgpool_fwd(const fk_ctx *c, ferry_dtype dt, const fk_conv *g, const void *x,
                                void *y)
{
    (void)c;
    (void)dt;
    const float *xp = x;
    float *yp = y;
    float inv = 1.0f / (float)(g->kh * g->kw);
    for (int64_t p = 0; p < g->n * g->c; p++) {
        const float *plane = xp + p * g->h * g->w;
        for (int64_t oy = 0; oy < g->oh; oy++)
            for (int64_t ox = 0; ox < g->ow; ox++) {
                float s = 0;
                for (int64_t ki = 0; ki < g->kh; ki++) {
                    int64_t iy = oy * g->sh - g->ph + ki;
                    if (iy < 0 || iy >= g->h)
                        continue;
                    for (int64_t kj = 0; kj < g->kw; kj++) {
                        int64_t ix = ox * g->sw - g->pw + kj;
                        if (ix >= 0 && ix < g->w)
                            s += plane[iy * g->w + ix];
                    }
                }
                yp[(p * g->oh + oy) * g->ow + ox] = s * inv;
            }
    }
    return FERRY_OK;
}

ferry_status fk_f32_avgpool_bwd(const fk_ctx *c, ferry_dtype dt, const fk_conv *g, const void *dy,
                                void *dx)
{
    (void)c;
    (void)dt;
    const float *d = dy;
    float *o = dx;
    float inv = 1.0f / (float)(g->kh * g->kw);
    if (g->n * g->c * g->h * g->w == 0) /* an empty dx may be NULL */
        return FERRY_OK;
    memset(o, 0, (size_t)(g->n * g->c * g->h * g->w) * sizeof(float));
    for (int64_t p = 0; p < g->n * g->c; p++) {
        float *plane = o + p * g->h * g->w;
        for (int64_t oy = 0; oy < g->oh; oy++)
            for (int64_t ox = 0; ox < g->ow; ox++) {
                float v = d[(p * g->oh + oy) * g->ow + ox] * inv;
                for (int64_t ki = 0; ki < g->kh; ki++) {
                    int64_t iy = oy * g->sh - g->ph + ki;
                    if (iy < 0 || iy >= g->h)
                        continue;
                    for (int64_t kj = 0; kj < g->kw; kj++) {
                        int64_t ix = ox * g->sw - g->pw + kj;
                        if (ix >= 0 && ix < g->w)
                            plane[iy * g->w + ix] += v;
                    }
                }
            }
    }
    return FERRY_OK;
}

ferry_status fk_f32_bn_fwd(const fk_ctx *c, ferry_dtype dt, const void *x, void *y, const fk_bn *bn)
{
    (void)c;
    (void)dt;
    int64_t n = bn->n, ch = bn->ch, hw = bn->hw;
    const float *gamma = bn->gamma, *beta = bn->beta;
    float *rmean = bn->rmean, *rvar = bn->rvar, *smean = bn->smean, *sinvstd = bn->sinvstd;
    float momentum = bn->momentum, eps = bn->eps;
    bool training = bn->training;
    const float *xp = x;
    float *yp = y;
    int64_t count = n * hw;
    for (int64_t k = 0; k < ch; k++) {
        float mean, invstd;
        if (training) {
            double s = 0, sq = 0;
            for (int64_t b = 0; b < n; b++) {
                const float *p = xp + (b * ch + k) * hw;
                for (int64_t i = 0; i < hw; i++)
                    s += p[i];
            }
            double m = s / (double)count;
            for (int64_t b = 0; b < n; b++) {
                const float *p = xp + (b * ch + k) * hw;
                for (int64_t i = 0; i < hw; i++)
                    sq += (p[i] - m) * (p[i] - m);
            }
            double var = sq / (double)count;
            mean = (float)m;
            invstd = (float)(1.0 / sqrt(var + eps));
            smean[k] = mean;
            sinvstd[k] = invstd;
            /* Running variance is unbiased, as in PyTorch. */
            double unbiased = count > 1 ? sq / (double)(count - 1) : var;
            rmean[k] = (1 - momentum) * rmean[k] + momentum * (float)m;
            rvar[k] = (1 - momentum) * rvar[k] + momentum * (float)unbiased;
        } else {
            mean = rmean[k];
            invstd = 1.0f / sqrtf(rvar[k] + eps);
        }
        float a = gamma[k] * invstd, bb = beta[k] - mean * a;
        for (int64_t b = 0; b < n; b++) {
            const float *p = xp + (b * ch + k) * hw;
            float *q = yp + (b * ch + k) * hw;
            for (int64_t i = 0; i < hw; i++)
                q[i] = p[i] * a + bb;
        }
    }
    return FERRY_OK;
}

ferry_status fk_f32_bn_bwd(const fk_ctx *c, ferry_dtype dt, const void *x, const void *dy,
                           void *dx, const fk_bn *bn, float *dgamma, float *dbeta)
{
    (void)c;
    (void)dt;
    int64_t n = bn->n, ch = bn->ch, hw = bn->hw;
    const float *gamma = bn->gamma, *smean = bn->smean, *sinvstd = bn->sinvstd;
    const float *xp = x, *d = dy;
    float *o = dx;
    double count = (double)(n * hw);
    for (int64_t k = 0; k < ch; k++) {
        double sd = 0, sdx = 0;
        float m = smean[k], is = sinvstd[k];
        for (int64_t b = 0; b < n; b++) {
            const float *p = xp + (b * ch + k) * hw, *g = d + (b * ch + k) * hw;
            for (int64_t i = 0; i < hw; i++) {
                sd += g[i];
                sdx += g[i] * (p[i] - m) * is;
            }
        }
        dgamma[k] += (float)sdx;
        dbeta[k] += (float)sd;
        if (!o)
            continue;
        float a = gamma[k] * is, mdy = (float)(sd / count), mdyx = (float)(sdx / count);
        for (int64_t b = 0; b < n; b++) {
            const float *p = xp + (b * ch + k) * hw, *g = d + (b * ch + k) * hw;
            float *q = o + (b * ch + k) * hw;
            for (int64_t i = 0; i < hw; i++)
                q[i] = a * (g[i] - mdy - (p[i] - m) * is * mdyx);
        }
    }
    return FERRY_OK;
}

ferry_status fk_f32_dropout(const fk_ctx *c, ferry_dtype dt, void *y, const void *x, int64_t n,
                            float p, uint64_t seed, uint64_t stream)
{
    (void)c;
    (void)dt;
    const float *xp = x;
    float *yp = y;
    float scale = fk_dropout_scale(p);
    /* One Philox block gives the keep bits of 4 elements: element i uses word i % 4
     * of block i / 4 (the CUDA kernel does the same). */
    for (int64_t i = 0; i < n; i += 4) {
        uint32_t w[4];
        ferry_philox_block_((uint64_t)i / 4, stream, seed, w);
        for (int64_t j = 0; j < 4 && i + j < n; j++)
            yp[i + j] = fk_dropout_apply(xp[i + j], w[j], p, scale);
    }
    return FERRY_OK;
}

/* A step the device decided to skip (mixed precision found inf or nan). */
static bool skipped(const float *skip) { return skip && skip[0] != 0.0f; }

ferry_status fk_cpu_sgd(const fk_ctx *c, float *restrict p, const float *restrict g, float *restrict buf,
                        int64_t n, const fk_sgd *h, const int64_t *taken, const float *skip)
{
    (void)c;
    if (skipped(skip))
        return FERRY_OK;
    /* One loop per case with the flags constant, so each inlines to a
     * branch-free body that vectorises. */
    float lr = h->lr, momentum = h->momentum, dampening = h->dampening, wd = h->wd;
    bool nesterov = h->nesterov;
    float keep = 1.0f - dampening;
    if (momentum == 0.0f) {
        for (int64_t i = 0; i < n; i++)
            p[i] = fk_sgd_plain(p[i], g[i], lr, wd);
    } else if (taken[0] == 0) {
        for (int64_t i = 0; i < n; i++)
            p[i] = fk_sgd_momentum(p[i], g[i], &buf[i], lr, momentum, keep, wd, nesterov, true);
    } else if (nesterov) {
        for (int64_t i = 0; i < n; i++)
            p[i] = fk_sgd_momentum(p[i], g[i], &buf[i], lr, momentum, keep, wd, true, false);
    } else {
        for (int64_t i = 0; i < n; i++)
            p[i] = fk_sgd_momentum(p[i], g[i], &buf[i], lr, momentum, keep, wd, false, false);
    }
    return FERRY_OK;
}

ferry_status fk_cpu_adam_consts(const fk_ctx *c, const fk_adam *h, const int64_t *taken, float *consts)
{
    (void)c;
    fk_adam_consts(h->lr, h->b1, h->b2, taken[0] + 1, &consts[0], &consts[1]);
    return FERRY_OK;
}

ferry_status fk_cpu_adam(const fk_ctx *c, float *p, const float *g, float *m, float *v, int64_t n,
                         const fk_adam *h, const float *consts, const float *skip)
{
    (void)c;
    if (skipped(skip))
        return FERRY_OK;
    /* Locals, not h's fields: a store to p could alias them and stop the loop
     * from vectorising. */
    float lr = h->lr, b1 = h->b1, b2 = h->b2, eps = h->eps, wd = h->wd;
    bool decoupled = h->decoupled;
    float step_size = consts[0], sbc2 = consts[1];
    for (int64_t i = 0; i < n; i++)
        p[i] = fk_adam_elem(p[i], g[i], &m[i], &v[i], lr, b1, b2, eps, wd, decoupled, step_size, sbc2);
    return FERRY_OK;
}

/* One tensor after another, with the single-tensor loops: the same bits. */
ferry_status fk_cpu_sgd_multi(const fk_ctx *c, const fk_plist *l, const fk_sgd *h, const int64_t *taken,
                              const float *skip)
{
    for (int i = 0; i < l->n; i++)
        (void)fk_cpu_sgd(c, l->p[i], l->g[i], l->s0[i], l->numel[i], h, taken, skip); /* cannot fail */
    return FERRY_OK;
}

ferry_status fk_cpu_adam_multi(const fk_ctx *c, const fk_plist *l, const fk_adam *h, const float *consts,
                               const float *skip)
{
    for (int i = 0; i < l->n; i++)
        (void)fk_cpu_adam(c, l->p[i], l->g[i], l->s0[i], l->s1[i], l->numel[i], h, consts, skip); /* cannot fail */
    return FERRY_OK;
}

ferry_status fk_cpu_zero_multi(const fk_ctx *c, const fk_zlist *l)
{
    (void)c;
    if (!l || l->n < 0 || l->n > FK_PLIST_MAX)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "zero_multi: the list must hold 0 to %d buffers", FK_PLIST_MAX);
    for (int i = 0; i < l->n; i++)
        if (l->bytes[i] > 0)
            memset(l->p[i], 0, (size_t)l->bytes[i]);
    return FERRY_OK;
}

ferry_status fk_cpu_step_count(const fk_ctx *c, int64_t *taken, const float *skip)
{
    (void)c;
    if (!skipped(skip))
        taken[0]++;
    return FERRY_OK;
}

ferry_status fk_cpu_unscale(const fk_ctx *c, ferry_dtype dt, const void *g, float *master,
                            int64_t n, const float *scale, float *found)
{
    (void)c;
    float inv = 1.0f / scale[0];
    bool bad = false;
    for (int64_t i = 0; i < n; i++) {
        float v = fk_ldf(dt, g, i) * inv;
        bad |= !isfinite(v);
        master[i] = v;
    }
    if (bad)
        found[0] = 1.0f;
    return FERRY_OK;
}

ferry_status fk_cpu_amp_update(const fk_ctx *c, float *scale, int64_t *tracker, const float *found,
                               float growth, float backoff, int64_t interval)
{
    (void)c;
    fk_amp_update(scale, tracker, found[0] != 0.0f, growth, backoff, interval);
    return FERRY_OK;
}

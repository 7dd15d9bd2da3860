/* PIL's antialiased bilinear resample (Image.resize with BILINEAR, which is what
 * torchvision's Resize and RandomResizedCrop call on PIL images): a triangle
 * filter whose support widens with the shrink factor, taps normalised to sum to
 * 1, taken over a source box that may be fractional and clipped to a given
 * rectangle. Two separable passes in float; only the source rows the output
 * needs go through the horizontal one. */
#include <math.h>
#include <stdint.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "common/error.h"
#include "dataset/image/image.h"

/* Taps of one axis, as PIL's precompute_coeffs with a box [in0, in1) and the
 * taps kept in [lo, hi): bounds[2i], bounds[2i+1] are output i's first source
 * index and tap count; weights holds ksize per output. Returns ksize (with fill
 * 0, only that). */
static size_t filter_taps(double in0, double in1, size_t lo, size_t hi, size_t out,
                          float *weights, int32_t *bounds, int fill)
{
    double scale = (in1 - in0) / (double)out;
    double fs = scale < 1.0 ? 1.0 : scale; /* widen the filter when shrinking */
    double support = 1.0 * fs;
    size_t ksize = (size_t)ceil(support) * 2 + 1;
    if (!fill)
        return ksize;
    for (size_t i = 0; i < out; i++) {
        double center = in0 + ((double)i + 0.5) * scale;
        double l = floor(center - support + 0.5), h = floor(center + support + 0.5);
        ptrdiff_t xmin = l < (double)lo ? (ptrdiff_t)lo : (ptrdiff_t)l;
        ptrdiff_t xmax = h > (double)hi ? (ptrdiff_t)hi : (ptrdiff_t)h;
        if (xmax - xmin > (ptrdiff_t)ksize)
            xmax = xmin + (ptrdiff_t)ksize;
        if (xmax < xmin)
            xmax = xmin; /* a box outside the clip: no taps, a black pixel */
        float *w = weights + i * ksize;
        double sum = 0;
        for (ptrdiff_t x = xmin; x < xmax; x++) {
            double t = fabs(((double)x - center + 0.5) / fs);
            double v = t < 1.0 ? 1.0 - t : 0.0;
            w[x - xmin] = (float)v;
            sum += v;
        }
        for (ptrdiff_t x = xmin; x < xmax; x++)
            w[x - xmin] = sum != 0 ? (float)(w[x - xmin] / sum) : 0.0f;
        bounds[2 * i] = (int32_t)xmin;
        bounds[2 * i + 1] = (int32_t)(xmax - xmin);
    }
    return ksize;
}

/* One output row of the vertical pass: acc[i] = sum over k of w[k] * t_k[i],
 * t_k = t0 + k * stride, sixteen lanes held in registers across all the taps
 * (GCC's -O2 does not vectorise a loop of unknown length, and a row-at-a-time
 * multiply-add loads and stores the sums once per tap). Each element sums its
 * taps in order from 0, so the result is that of a per-pixel loop. */
typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));
typedef uint8_t v4u8 __attribute__((vector_size(4)));
static void taps_row(float *restrict acc, const float *restrict t0, size_t stride,
                     const float *w, size_t ntaps, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        v4f a0 = {0, 0, 0, 0}, a1 = a0, a2 = a0, a3 = a0;
        const float *t = t0 + i;
        for (size_t k = 0; k < ntaps; k++, t += stride) {
            v4f wv = {w[k], w[k], w[k], w[k]}, b0, b1, b2, b3;
            memcpy(&b0, t, sizeof b0);
            memcpy(&b1, t + 4, sizeof b1);
            memcpy(&b2, t + 8, sizeof b2);
            memcpy(&b3, t + 12, sizeof b3);
            a0 += wv * b0;
            a1 += wv * b1;
            a2 += wv * b2;
            a3 += wv * b3;
        }
        memcpy(acc + i, &a0, sizeof a0);
        memcpy(acc + i + 4, &a1, sizeof a1);
        memcpy(acc + i + 8, &a2, sizeof a2);
        memcpy(acc + i + 12, &a3, sizeof a3);
    }
    for (; i < n; i++) {
        float a = 0;
        for (size_t k = 0; k < ntaps; k++)
            a += w[k] * t0[k * stride + i];
        acc[i] = a;
    }
}

/* The source columns one row of the horizontal pass can read: the box's width
 * and the filter's reach past either end (support < ksize / 2, plus rounding). */
static size_t row_span(const ferry_crop_box *box, size_t kx)
{
    double w = box->x1 - box->x0;
    return (w > 0 && w < 1e15 ? (size_t)ceil(w) : 0) + 2 * kx + 4;
}

/* Sums to bytes, rounded half to even and clamped to 0..255: adding 2^23 +
 * 2^22 rounds to an integer held in the low mantissa bits (|f| < 2^22 here:
 * the taps are non-negative and sum to 1), and rounding then clamping equals
 * clamping then rounding. Four at a time; dst may alias src's bytes from the
 * start (byte i is written after float i is read). */
static void to_u8(const float *src, uint8_t *dst, size_t n)
{
    const v4f magic = {12582912.0f, 12582912.0f, 12582912.0f, 12582912.0f};
    const v4i bias = {0x4B400000, 0x4B400000, 0x4B400000, 0x4B400000};
    const v4i top = {255, 255, 255, 255};
    size_t i = 0;
#ifdef __SSE2__
    /* Sixteen at a time: the saturating packs (32 -> 16 signed, 16 -> 8
     * unsigned) clamp to 0..255 in two instructions, where GCC turns the
     * generic narrowing below into a byte-by-byte shuffle. */
    const __m128 mg = _mm_set1_ps(12582912.0f);
    const __m128i bi = _mm_set1_epi32(0x4B400000);
    for (; i + 16 <= n; i += 16) {
        __m128i q[4];
        for (int k = 0; k < 4; k++)
            q[k] = _mm_sub_epi32(_mm_castps_si128(_mm_add_ps(_mm_loadu_ps(src + i + 4 * k), mg)), bi);
        __m128i lo = _mm_packs_epi32(q[0], q[1]), hi = _mm_packs_epi32(q[2], q[3]);
        _mm_storeu_si128((__m128i *)(void *)(dst + i), _mm_packus_epi16(lo, hi));
    }
#endif
    for (; i + 4 <= n; i += 4) {
        v4f f;
        v4i b;
        memcpy(&f, src + i, sizeof f);
        f += magic;
        memcpy(&b, &f, sizeof b);
        b -= bias;
        b &= b > 0;                  /* below 0: 0 */
        b = (b & (b <= top)) | (top & (b > top));
        v4u8 out = __builtin_convertvector(b, v4u8);
        memcpy(dst + i, &out, 4);
    }
    for (; i < n; i++) {
        float f = src[i];
        f = f < 0 ? 0 : f > 255 ? 255 : f;
        dst[i] = (uint8_t)((f + 12582912.0f) - 12582912.0f);
    }
}

size_t ferry__resize_work_bytes(size_t sh, size_t C, const ferry_crop_box *box, size_t dw,
                                size_t dh)
{
    size_t kx = filter_taps(box->x0, box->x1, 0, 0, dw, NULL, NULL, 0);
    size_t ky = filter_taps(box->y0, box->y1, 0, 0, dh, NULL, NULL, 0);
    size_t n = 0, t;
    /* x weights, y weights, x bounds, y bounds, one source row as 4-float
     * pixels, at most sh rows of the horizontal pass, and one output row's
     * sums. */
    if (!ferry_mul_size(kx, dw, &t) || __builtin_add_overflow(n, t, &n) ||
        !ferry_mul_size(row_span(box, kx), 4, &t) || __builtin_add_overflow(n, t, &n) ||
        !ferry_mul_size(ky, dh, &t) || __builtin_add_overflow(n, t, &n) ||
        __builtin_add_overflow(n, 2 * dw + 2 * dh, &n) || !ferry_mul_size(sh + 1, dw, &t) ||
        !ferry_mul_size(t, C, &t) || __builtin_add_overflow(n, t, &n) ||
        !ferry_mul_size(n, sizeof(float), &n))
        return 0;
    return n;
}

ferry_status ferry__resize_box(const uint8_t *src, size_t sw, size_t sh, size_t C,
                               const ferry_crop_box *box, uint8_t *dst, size_t dw, size_t dh,
                               ferry_layout layout, ferry_scratch *scratch)
{
    size_t total = ferry__resize_work_bytes(sh, C, box, dw, dh);
    if (!total)
        return ferry_fail(FERRY_ERR_LIMIT, "resize %zux%zu -> %zux%zu is too large", sw, sh, dw, dh);
    uint8_t *wb = (uint8_t *)scratch->work;
    ferry_status st = ferry__scratch_grow(&wb, &scratch->work_cap, total);
    scratch->work = (float *)wb;
    if (st != FERRY_OK)
        return st;
    size_t kx = filter_taps(box->x0, box->x1, 0, 0, dw, NULL, NULL, 0);
    size_t ky = filter_taps(box->y0, box->y1, 0, 0, dh, NULL, NULL, 0);
    float *wx = scratch->work, *wy = wx + kx * dw;
    int32_t *bx = (int32_t *)(wy + ky * dh), *by = bx + 2 * dw;
    float *row4 = (float *)(by + 2 * dh), *tmp = row4 + 4 * row_span(box, kx);
    size_t cx1 = box->cx1 < sw ? box->cx1 : sw, cy1 = box->cy1 < sh ? box->cy1 : sh;
    filter_taps(box->x0, box->x1, box->cx0, cx1, dw, wx, bx, 1);
    filter_taps(box->y0, box->y1, box->cy0, cy1, dh, wy, by, 1);
    /* The columns the x taps read, [xa, xb). */
    size_t xa = SIZE_MAX, xb = 0;
    for (size_t x = 0; x < dw; x++)
        if (bx[2 * x + 1] > 0) {
            size_t a = (size_t)bx[2 * x], b = a + (size_t)bx[2 * x + 1];
            xa = a < xa ? a : xa;
            xb = b > xb ? b : xb;
        }
    /* RGB: each source row once to 4-float pixels, then one vector multiply
     * and add per tap instead of three conversions, multiplies and adds. Each
     * channel sums the same products in the same order as the scalar loop, so
     * the result is the same to the bit. */
    bool wide = C == 3 && xa < xb && xb - xa <= row_span(box, kx);

    /* The source rows any output row reads: by[] only grows with the row. */
    size_t r0 = (size_t)by[0], r1 = (size_t)by[2 * (dh - 1)] + (size_t)by[2 * (dh - 1) + 1];
    for (size_t y = r0; y < r1; y++) {
        const uint8_t *srow = src + y * sw * C;
        float *trow = tmp + (y - r0) * dw * C;
        if (wide) {
            size_t x = xa;
#ifdef __SSE2__
            /* Four bytes per pixel load (the fourth, the next pixel's red,
             * lands in a lane no output reads); the last pixel apart, as its
             * fourth byte may lie past the image. */
            const __m128i z = _mm_setzero_si128();
            for (; x + 1 < xb; x++) {
                int32_t b4;
                memcpy(&b4, srow + x * 3, 4);
                __m128i v = _mm_unpacklo_epi16(_mm_unpacklo_epi8(_mm_cvtsi32_si128(b4), z), z);
                _mm_storeu_ps(row4 + (x - xa) * 4, _mm_cvtepi32_ps(v));
            }
#endif
            for (; x < xb; x++) {
                const uint8_t *p = srow + x * 3;
                v4i iv = {p[0], p[1], p[2], 0};
                v4f v = __builtin_convertvector(iv, v4f); /* exact: small integers */
                memcpy(row4 + (x - xa) * 4, &v, sizeof v);
            }
            for (size_t x = 0; x < dw; x++) {
                const float *w = wx + x * kx;
                size_t n = (size_t)bx[2 * x + 1];
                const float *q = n ? row4 + ((size_t)bx[2 * x] - xa) * 4 : row4;
                v4f a = {0, 0, 0, 0};
                for (size_t k = 0; k < n; k++, q += 4) {
                    v4f v, wv = {w[k], w[k], w[k], w[k]};
                    memcpy(&v, q, sizeof v);
                    a += wv * v;
                }
                /* All four lanes; the fourth is overwritten by the next
                 * pixel, and the row's last pixel stores three. */
                if (x + 1 < dw) {
                    memcpy(trow + x * 3, &a, sizeof a);
                } else {
                    trow[x * 3] = a[0];
                    trow[x * 3 + 1] = a[1];
                    trow[x * 3 + 2] = a[2];
                }
            }
            continue;
        }
        for (size_t x = 0; x < dw; x++) {
            const float *w = wx + x * kx;
            const uint8_t *s = srow + (size_t)bx[2 * x] * C;
            size_t n = (size_t)bx[2 * x + 1];
            if (C == 3) {
                float a0 = 0, a1 = 0, a2 = 0;
                for (size_t k = 0; k < n; k++, s += 3) {
                    a0 += w[k] * (float)s[0];
                    a1 += w[k] * (float)s[1];
                    a2 += w[k] * (float)s[2];
                }
                trow[x * 3] = a0;
                trow[x * 3 + 1] = a1;
                trow[x * 3 + 2] = a2;
                continue;
            }
            for (size_t c = 0; c < C; c++) {
                float acc = 0;
                for (size_t k = 0; k < n; k++)
                    acc += w[k] * (float)s[k * C + c];
                trow[x * C + c] = acc;
            }
        }
    }
    size_t plane = dw * dh, rowf = dw * C;
    float *acc = tmp + (r1 - r0) * rowf; /* one output row */
    for (size_t y = 0; y < dh; y++) {
        const float *w = wy + y * ky;
        const float *t0 = tmp + ((size_t)by[2 * y] - r0) * rowf;
        size_t n = (size_t)by[2 * y + 1];
        taps_row(acc, t0, rowf, w, n, rowf);
        /* HWC: straight into dst's row; CHW: into the sums' own bytes (each
         * byte lands below the floats still to be read), then per channel. */
        uint8_t *u8 = layout == FERRY_LAYOUT_HWC ? dst + y * rowf : (uint8_t *)acc;
        to_u8(acc, u8, rowf);
        if (layout != FERRY_LAYOUT_HWC && C == 3) {
            uint8_t *d0 = dst + y * dw, *d1 = d0 + plane, *d2 = d1 + plane;
            for (size_t x = 0; x < dw; x++) {
                d0[x] = u8[3 * x];
                d1[x] = u8[3 * x + 1];
                d2[x] = u8[3 * x + 2];
            }
        } else if (layout != FERRY_LAYOUT_HWC) {
            for (size_t x = 0; x < dw; x++)
                for (size_t c = 0; c < C; c++)
                    dst[c * plane + y * dw + x] = u8[x * C + c];
        }
    }
    return FERRY_OK;
}

ferry_status ferry__resize_bilinear(const uint8_t *src, size_t sw, size_t sh, size_t C,
                                    uint8_t *dst, size_t dw, size_t dh, ferry_layout layout,
                                    ferry_scratch *scratch)
{
    ferry_crop_box b = {.x0 = 0, .y0 = 0, .x1 = (double)sw, .y1 = (double)sh,
                        .cx0 = 0, .cy0 = 0, .cx1 = sw, .cy1 = sh};
    return ferry__resize_box(src, sw, sh, C, &b, dst, dw, dh, layout, scratch);
}

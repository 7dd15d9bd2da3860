/* torchvision's ColorJitter on PIL images (torchvision 0.14, PIL 9.4): the four
 * adjustments in a random order per sample, each factor drawn uniformly, and
 * each adjustment computed as PIL computes it, so that the bytes match:
 * brightness, contrast and saturation are PIL's ImageEnhance (Image.blend with
 * black, with the mean gray of the luma, with the luma image), hue is PIL's
 * HSV conversion with the hue byte shifted (wrapping) and converted back. */
#include <math.h>

#include "ferry/rng.h"
#include "dataset/image/image.h"

/* PIL's ImagingBlend: in1 + alpha * (in2 - in1) in float, clamped to 0..255,
 * then truncated. */
static inline uint8_t blend(unsigned in1, unsigned in2, float alpha)
{
    float t = (float)(int)in1 + alpha * (float)((int)in2 - (int)in1);
    return t <= 0.0f ? 0 : t >= 255.0f ? 255 : (uint8_t)t;
}

static inline uint8_t clip8(int v)
{
    return v <= 0 ? 0 : v >= 255 ? 255 : (uint8_t)v;
}

/* PIL's rgb2hsv_row (Convert.c), its float and double steps kept. */
static void rgb2hsv(uint8_t r, uint8_t g, uint8_t b, uint8_t *hsv)
{
    uint8_t maxc = r > g ? (r > b ? r : b) : (g > b ? g : b);
    uint8_t minc = r < g ? (r < b ? r : b) : (g < b ? g : b);
    hsv[2] = maxc;
    if (minc == maxc) {
        hsv[0] = hsv[1] = 0;
        return;
    }
    float cr = (float)(maxc - minc), s = cr / (float)maxc, h;
    float rc = (float)(maxc - r) / cr, gc = (float)(maxc - g) / cr, bc = (float)(maxc - b) / cr;
    if (r == maxc)
        h = bc - gc;
    else if (g == maxc)
        h = (float)(2.0 + rc - bc);
    else
        h = (float)(4.0 + gc - rc);
    /* fmod(x, 1.0) with x = h / 6 + 1 in [2/3, 2): x - 1 is exact from 1 on. */
    double x = h / 6.0 + 1.0;
    h = (float)(x >= 1.0 ? x - 1.0 : x);
    hsv[0] = clip8((int)(h * 255.0));
    hsv[1] = clip8((int)(s * 255.0));
}

/* C's round() for 0 <= x < 2^31, inline: x minus its truncation is exact. */
static inline int round_pos(double x)
{
    int r = (int)x;
    return x - (double)r >= 0.5 ? r + 1 : r;
}

/* What PIL's hsv2rgb computes from h alone (the sextant and the remainder)
 * and from s alone, once per image rather than per pixel. */
typedef struct hsv_tabs {
    int i[256];
    float f[256], fs[256];
} hsv_tabs;

static void hsv_tabs_fill(hsv_tabs *t)
{
    for (int h = 0; h < 256; h++) {
        t->i[h] = (int)floor((float)h * 6.0 / 255.0);
        t->f[h] = (float)((float)h * 6.0 / 255.0 - (float)t->i[h]);
        t->fs[h] = (float)((float)h / 255.0);
    }
}

/* PIL's hsv2rgb (Convert.c); every value nonnegative (fs <= 1, f < 1). */
static void hsv2rgb(const hsv_tabs *tb, const uint8_t *hsv, uint8_t *rgb)
{
    uint8_t h = hsv[0], s = hsv[1], v = hsv[2];
    if (s == 0) {
        rgb[0] = rgb[1] = rgb[2] = v;
        return;
    }
    int i = tb->i[h];
    float f = tb->f[h], fs = tb->fs[s];
    uint8_t p = clip8(round_pos((float)v * (1.0 - fs)));
    uint8_t q = clip8(round_pos((float)v * (1.0 - fs * f)));
    uint8_t t = clip8(round_pos((float)v * (1.0 - fs * (1.0 - f))));
    /* PIL's switch on i % 6, as indices into {v, p, q, t}. */
    static const uint8_t pick[6][3] = {{0, 3, 1}, {2, 0, 1}, {1, 0, 3},
                                       {1, 2, 0}, {3, 1, 0}, {0, 1, 2}};
    const uint8_t vals[4] = {v, p, q, t}, *k = pick[i % 6];
    rgb[0] = vals[k[0]];
    rgb[1] = vals[k[1]];
    rgb[2] = vals[k[2]];
}

void ferry__jitter_apply(uint8_t *img, const ferry_sample_format *fmt, const int order[4],
                         const double factor[4])
{
    size_t C = fmt->channels, n = fmt->height * fmt->width;
    /* Pixel i, channel c at img[i * ps + c * cs]. */
    size_t ps = fmt->layout == FERRY_LAYOUT_HWC ? C : 1;
    size_t cs = fmt->layout == FERRY_LAYOUT_HWC ? 1 : n;
    for (int k = 0; k < 4; k++) {
        int fn = order[k];
        if (fn < 0 || fn > 3)
            break; /* the rest are off */
        float a = (float)factor[fn]; /* PIL takes the factor as a C float */
        uint8_t lut[256];
        if (fn == 0) { /* brightness: blend with black (one byte in, one out: a table) */
            for (unsigned v = 0; v < 256; v++)
                lut[v] = blend(0, v, a);
            for (size_t i = 0; i < n * C; i++)
                img[i] = lut[img[i]];
        } else if (fn == 1) { /* contrast: blend with the luma's mean, rounded */
            double sum = 0;
            for (size_t i = 0; i < n; i++) {
                const uint8_t *p = img + i * ps;
                sum += C == 3 ? ferry__luma(p[0], p[cs], p[2 * cs]) : p[0];
            }
            unsigned mean = n ? (unsigned)(int)(sum / (double)n + 0.5) : 0;
            for (unsigned v = 0; v < 256; v++)
                lut[v] = blend(mean, v, a);
            for (size_t i = 0; i < n * C; i++)
                img[i] = lut[img[i]];
        } else if (fn == 2 && C == 3) { /* saturation: blend with the luma */
            for (size_t i = 0; i < n; i++) {
                uint8_t *p = img + i * ps;
                unsigned l = ferry__luma(p[0], p[cs], p[2 * cs]);
                for (size_t c = 0; c < 3; c++)
                    p[c * cs] = blend(l, p[c * cs], a);
            }
        } else if (fn == 3 && C == 3) { /* hue: shift the HSV hue byte */
            /* numpy's uint8(hue * 255): truncated toward zero, then wrapped. */
            uint8_t shift = (uint8_t)(int)(factor[3] * 255.0);
            hsv_tabs tb;
            hsv_tabs_fill(&tb);
            for (size_t i = 0; i < n; i++) {
                uint8_t *p = img + i * ps, hsv[3], rgb[3];
                rgb2hsv(p[0], p[cs], p[2 * cs], hsv);
                hsv[0] = (uint8_t)(hsv[0] + shift);
                hsv2rgb(&tb, hsv, rgb);
                p[0] = rgb[0];
                p[cs] = rgb[1];
                p[2 * cs] = rgb[2];
            }
        }
        /* saturation and hue leave a gray image as it is, as in PIL */
    }
}

/* Uniform in [a, b), as torch's uniform_ (53 random bits). */
static double uniform(ferry_rng *r, double a, double b)
{
    return a + (b - a) * ((double)(ferry_rng_u64(r) >> 11) * 0x1p-53);
}

void ferry__jitter_rng(const ferry_image_config *cfg, const ferry_sample_format *fmt, uint8_t *img,
                       ferry_rng *r)
{
    const double *j = cfg->color_jitter;
    if (!(j[0] > 0 || j[1] > 0 || j[2] > 0 || j[3] > 0))
        return;
    /* ColorJitter.get_params: a random order of the four, then each enabled
     * factor in turn (brightness, contrast, saturation in [max(0, 1 - x),
     * 1 + x]; hue in [-x, x]). Disabled ones draw nothing and do nothing. */
    int order[4] = {0, 1, 2, 3};
    for (int i = 3; i > 0; i--) {
        int k = (int)ferry_rng_below(r, (uint64_t)i + 1);
        int t = order[i];
        order[i] = order[k];
        order[k] = t;
    }
    double f[4] = {1, 1, 1, 0};
    for (int i = 0; i < 3; i++)
        if (j[i] > 0)
            f[i] = uniform(r, j[i] < 1 ? 1 - j[i] : 0, 1 + j[i]);
    if (j[3] > 0)
        f[3] = uniform(r, -j[3], j[3]);
    /* A disabled adjustment is skipped, not applied with factor 1 (PIL's
     * blend with factor 1 is the identity anyway; hue 0 is not quite). */
    int run[4], m = 0;
    for (int i = 0; i < 4; i++)
        if (j[order[i]] > 0)
            run[m++] = order[i];
    for (int i = m; i < 4; i++)
        run[i] = -1;
    ferry__jitter_apply(img, fmt, run, f);
}

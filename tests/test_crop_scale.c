/* The JPEG crop path's DCT scale (src/dataset/image/jpeg_crop.c): the rule itself
 * (the smallest of 1/8, 2/8, 4/8, 5/8, 6/8 and 8/8 at which the crop box is at
 * least the output size, in libjpeg's own scaled dimensions), and the pixels
 * it gives against a full-scale decode of the same crop, on a fine texture,
 * bounded so that a plan one scale too small (a box decoded below the output
 * size, then upsampled) fails. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <jpeglib.h>

#include "harness.h"
#include "dataset/image/image.h"
#include "dataset/image/jpeg.h"
#include "ferry/rng.h"

#define IW 320
#define IH 240
#define WORST_DB 30.0 /* the plan: 33.4 dB here; one scale too small: 23.0 dB */

/* A gray JPEG of fine texture (noise with some structure), quality 95: what
 * a scale too small loses is the detail between its Nyquist frequency and the
 * output's. */
static uint8_t *texture_jpeg(size_t *n)
{
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr err;
    c.err = jpeg_std_error(&err);
    jpeg_create_compress(&c);
    unsigned char *out = NULL;
    unsigned long size = 0;
    jpeg_mem_dest(&c, &out, &size);
    c.image_width = IW;
    c.image_height = IH;
    c.input_components = 1;
    c.in_color_space = JCS_GRAYSCALE;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, 95, TRUE);
    jpeg_start_compress(&c, TRUE);
    uint8_t row[IW];
    ferry_rng r;
    ferry_rng_init(&r, 42, 0, 0);
    for (size_t y = 0; y < IH; y++) {
        for (size_t x = 0; x < IW; x++) {
            double v = 128 + 60 * sin((double)x * 0.9) * cos((double)y * 0.7) +
                       50 * (ferry_rng_uniform(&r) - 0.5);
            row[x] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
        }
        JSAMPROW p = row;
        jpeg_write_scanlines(&c, &p, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    *n = size;
    return out;
}

static ferry_image_config crop_cfg(size_t out)
{
    ferry_image_config c = ferry_image_config_default();
    c.crop = FERRY_CROP_RANDOM_RESIZED;
    c.width = c.height = out;
    c.channels = 1;
    c.layout = FERRY_LAYOUT_HWC;
    ferry_image_config ok;
    ASSERT_OK(ferry__image_config_check(&c, &ok));
    return ok;
}

/* libjpeg's output size of an image side at scale k/8 (jdiv_round_up). */
static double scaled(size_t side, unsigned k) { return ceil((double)side * k / 8.0); }

/* Whether box, at scale k/8, is at least W x H: the rule's test. */
static bool box_fits(const ferry_crop_box *b, unsigned k, size_t W, size_t H)
{
    return (b->x1 - b->x0) * scaled(IW, k) / IW >= (double)W &&
           (b->y1 - b->y0) * scaled(IH, k) / IH >= (double)H;
}

static const unsigned scales[] = {1, 2, 4, 5, 6, 8};
static const size_t outs[] = {16, 24, 40, 64, 100};

static void boxes(size_t out, size_t i, ferry_crop_box *box)
{
    ferry_image_config cfg = crop_cfg(out);
    ferry_rng r;
    ferry_rng_init(&r, 3, FERRY_RNG_AUGMENT, out * 1000 + i);
    ferry__crop_random(&cfg, IW, IH, &r, box);
}

TEST(the_scale_is_the_smallest_that_keeps_the_crop_the_output_size)
{
    size_t n;
    uint8_t *data = texture_jpeg(&n);
    size_t seen[9] = {0};
    for (size_t oi = 0; oi < sizeof outs / sizeof *outs; oi++) {
        size_t W = outs[oi];
        ferry_sample_format fmt = {1, W, W, FERRY_LAYOUT_HWC, FERRY_DTYPE_U8};
        for (size_t i = 0; i < 200; i++) {
            ferry_crop_box box;
            boxes(W, i, &box);
            struct jpeg_decompress_struct d;
            struct jpeg_error_mgr err;
            d.err = jpeg_std_error(&err);
            jpeg_create_decompress(&d);
            jpeg_mem_src(&d, data, (unsigned long)n);
            ASSERT(jpeg_read_header(&d, TRUE) == JPEG_HEADER_OK);
            ferry_jpeg_crop_plan p;
            ASSERT(ferry__jpeg_crop_plan(&d, false, &fmt, &box, &p));
            ASSERT_EQ_SIZE(d.output_width, (size_t)scaled(IW, p.num)); /* left at its scale */
            jpeg_destroy_decompress(&d);
            unsigned want = 8;
            for (size_t k = 0; k < sizeof scales / sizeof *scales; k++)
                if (box_fits(&box, scales[k], W, W)) {
                    want = scales[k];
                    break;
                }
            ASSERT_MSG(p.num == want, "output %zu, box %.1fx%.1f of %dx%d: scale %u/8, the "
                       "rule's %u/8", W, box.x1 - box.x0, box.y1 - box.y0, IW, IH, p.num, want);
            /* The box in the chosen scale's pixels is at least the output. */
            ASSERT(p.num == 8 || (p.sb.x1 - p.sb.x0 >= (double)W - 1e-9 &&
                                  p.sb.y1 - p.sb.y0 >= (double)W - 1e-9));
            seen[p.num]++;
        }
    }
    size_t kinds = 0;
    for (size_t k = 0; k < 9; k++)
        kinds += seen[k] > 0;
    printf("  scales chosen: 1/8 %zu, 2/8 %zu, 4/8 %zu, 5/8 %zu, 6/8 %zu, 8/8 %zu\n", seen[1],
           seen[2], seen[4], seen[5], seen[6], seen[8]);
    ASSERT_MSG(kinds >= 5, "only %zu different scales came up", kinds);
    free(data);
}

static double psnr(const uint8_t *a, const uint8_t *b, size_t n)
{
    double se = 0;
    for (size_t i = 0; i < n; i++)
        se += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    return se == 0 ? 99 : 10 * log10(255.0 * 255.0 * (double)n / se);
}

/* Every reduced-scale crop stays within a tight bound of the full-scale crop
 * of the same box. A plan one scale too small decodes the box below the
 * output size and upsamples it: the texture's detail between the two sizes
 * is lost, and some crop falls under the bound (checked by mutating the plan:
 * tests/mutations/list.txt). */
TEST(reduced_scale_crops_stay_within_a_bound_of_full_scale)
{
    size_t n;
    uint8_t *data = texture_jpeg(&n);
    ferry_scratch *s;
    ASSERT_OK(ferry_scratch_create(&s));
    static uint8_t a[100 * 100], b[100 * 100];
    double worst = 99;
    size_t reduced = 0;
    for (size_t oi = 0; oi < sizeof outs / sizeof *outs; oi++) {
        size_t W = outs[oi];
        ferry_image_config cfg = crop_cfg(W);
        ferry_sample_format fmt = {1, W, W, FERRY_LAYOUT_HWC, FERRY_DTYPE_U8};
        for (size_t i = 0; i < 200; i++) {
            ferry_crop_box box;
            boxes(W, i, &box);
            if (box_fits(&box, 8, W, W) && !box_fits(&box, 6, W, W))
                continue; /* full scale both ways */
            cfg.crop_full_scale = true;
            ASSERT_OK(ferry__image_decode_box(data, n, &cfg, &fmt, s, "t.jpg", a, &box, NULL));
            cfg.crop_full_scale = false;
            ASSERT_OK(ferry__image_decode_box(data, n, &cfg, &fmt, s, "t.jpg", b, &box, NULL));
            double p = psnr(a, b, W * W);
            worst = p < worst ? p : worst;
            reduced++;
        }
    }
    printf("  reduced-scale crops: %zu, worst PSNR against full scale %.2f dB\n", reduced, worst);
    ASSERT(reduced > 300);
    ASSERT_MSG(worst >= WORST_DB, "worst PSNR %.2f dB, under %.1f dB", worst, (double)WORST_DB);
    ferry_scratch_destroy(s);
    free(data);
}

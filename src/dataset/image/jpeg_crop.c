/* JPEG decoding of just what a crop needs: the smallest DCT scale (1/8, 1/4,
 * 1/2, 5/8, 6/8, 1) at which the crop box is still at least the output size, then only
 * the box's columns (jpeg_crop_scanline, widened by libjpeg to whole iMCUs;
 * whole rows where libjpeg cannot crop them: crop_columns_safe) and
 * rows (jpeg_skip_scanlines), with a margin of the resize filter's support. The
 * rows after the box are never decoded: the decode is aborted there, so damage
 * past the crop goes unnoticed (as it would in any decoder that stops early). */
#include <math.h>

#include "common/error.h"
#include "dataset/image/jpeg.h"

typedef struct region_job {
    const uint8_t *data;
    size_t n;
    const ferry_image_config *cfg;
    const ferry_sample_format *fmt;
    const ferry_image_info *info;
    const ferry_crop_box *box;
    /* out */
    const uint8_t *px;
    size_t rw, rh;
    ferry_crop_box rbox;
} region_job;

static size_t clampz(double v, size_t lo, size_t hi)
{
    return v <= (double)lo ? lo : v >= (double)hi ? hi : (size_t)v;
}

bool ferry__jpeg_crop_plan(j_decompress_ptr c, bool full_scale, const ferry_sample_format *fmt,
                           const ferry_crop_box *b, ferry_jpeg_crop_plan *p)
{
    size_t W = fmt->width, H = fmt->height;
    double iw = (double)c->image_width, ih = (double)c->image_height;
    unsigned num = 8;
    /* The scales tried, k/8: 1/8, 1/4, 1/2 (libjpeg-turbo's SIMD IDCTs) and
     * 5/8, 6/8, which pay on a shared 2-core x86-64 (the box's rows skipped
     * and a smaller resize outweigh their plain-C IDCTs); 7/8 and 3/8 did not
     * (measured as ratios in one run, docs/BENCHMARKS.md). */
    static const unsigned scales[] = {1, 2, 4, 5, 6};
    if (!full_scale)
        for (size_t i = 0; i < sizeof scales / sizeof scales[0]; i++) {
            unsigned k = scales[i];
            c->scale_num = k;
            c->scale_denom = 8;
            jpeg_calc_output_dimensions(c);
            if ((b->x1 - b->x0) * (double)c->output_width / iw >= (double)W &&
                (b->y1 - b->y0) * (double)c->output_height / ih >= (double)H) {
                num = k;
                break;
            }
        }
    c->scale_num = num;
    c->scale_denom = 8;
    jpeg_calc_output_dimensions(c);
    size_t ow = c->output_width, oh = c->output_height;
    double fx = (double)ow / iw, fy = (double)oh / ih;
    ferry_crop_box sb = {
        .x0 = b->x0 * fx, .y0 = b->y0 * fy, .x1 = b->x1 * fx, .y1 = b->y1 * fy,
        .cx0 = clampz(floor((double)b->cx0 * fx), 0, ow), .cy0 = clampz(floor((double)b->cy0 * fy), 0, oh),
        .cx1 = clampz(ceil((double)b->cx1 * fx), 0, ow), .cy1 = clampz(ceil((double)b->cy1 * fy), 0, oh),
    };
    /* The filter reaches its support (the shrink factor, at least 1) past the
     * box; one more pixel covers the rounding of the tap bounds. */
    double sx = (sb.x1 - sb.x0) / (double)W, sy = (sb.y1 - sb.y0) / (double)H;
    sx = (sx < 1 ? 1 : sx) + 1;
    sy = (sy < 1 ? 1 : sy) + 1;
    p->num = num;
    p->sb = sb;
    p->col0 = clampz(floor(sb.x0 - sx), sb.cx0, sb.cx1);
    p->col1 = clampz(ceil(sb.x1 + sx), sb.cx0, sb.cx1);
    p->row0 = clampz(floor(sb.y0 - sy), sb.cy0, sb.cy1);
    p->row1 = clampz(ceil(sb.y1 + sy), sb.cy0, sb.cy1);
    return p->col0 < p->col1 && p->row0 < p->row1;
}

/* Whether jpeg_crop_scanline may crop c's columns at its scale. libjpeg-turbo
 * before 3.0.0 sizes a cropped component's rows as if no IDCT scaling took
 * part in its upsampling (issue 669 there). That holds at full scale, and
 * where a reduced scale does all the upsampling in the IDCT (4:2:0 at 1/2,
 * say: the upsampler copies). Where the IDCT does part of it and the
 * upsampler the rest (luma sampled 4x2 or 2x4 against 1x1 chroma), part
 * of each row is never upsampled, and the colour conversion reads stale
 * bytes: silent garbage. Such rows are decoded whole instead. Decided on the
 * decoder's own sizes rather than its version, which the header and the
 * library loaded may disagree on. */
static bool crop_columns_safe(j_decompress_ptr c)
{
#if JPEG_LIB_VERSION >= 70
    int m = c->min_DCT_h_scaled_size;
#else
    int m = c->min_DCT_scaled_size;
#endif
    for (int i = 0; i < c->num_components; i++) {
        const jpeg_component_info *k = &c->comp_info[i];
#if JPEG_LIB_VERSION >= 70
        int s = k->DCT_h_scaled_size;
#else
        int s = k->DCT_scaled_size;
#endif
        if (s != m && (k->h_samp_factor * s != c->max_h_samp_factor * m ||
                       k->v_samp_factor * s != c->max_v_samp_factor * m))
            return false;
    }
    return true;
}

static ferry_status region_body(struct ferry_jpeg_state *st, void *arg)
{
    region_job *j = arg;
    j_decompress_ptr c = &st->cinfo;
    ferry_scratch *s = st->scratch;
    if (setjmp(st->jump))
        return st->oom ? FERRY_ERR_NO_MEMORY : FERRY_ERR_FORMAT;
    ferry__jpeg_read_header(st, j->data, j->n, j->info);
    size_t C = j->fmt->channels;
    ferry_jpeg_crop_plan p;
    if (!ferry__jpeg_crop_plan(c, j->cfg->crop_full_scale, j->fmt, j->box, &p))
        ferry__jpeg_fail(st, 0, "the crop box lies outside the image");
    jpeg_start_decompress(c);
    size_t ow = c->output_width, oc = (size_t)c->output_components;
    unsigned num = p.num;
    ferry_crop_box sb = p.sb;
    size_t col0 = p.col0, col1 = p.col1, row0 = p.row0, row1 = p.row1;
    /* libjpeg upsamples a cropped row's first and last columns without their
     * outer neighbours (chroma replicated): one more column on each side
     * keeps the columns used exactly those of a full decode. */
    size_t dc0 = col0 ? col0 - 1 : 0, dc1 = col1 < ow ? col1 + 1 : ow;
    JDIMENSION xoff = (JDIMENSION)dc0, cw = (JDIMENSION)(dc1 - dc0);
    if (cw < ow && crop_columns_safe(c)) {
        jpeg_crop_scanline(c, &xoff, &cw);
    } else {
        xoff = 0;
        cw = (JDIMENSION)ow;
    }
    if (row0 && jpeg_skip_scanlines(c, (JDIMENSION)row0) != row0)
        ferry__jpeg_fail(st, 0, "libjpeg skipped fewer rows than asked");
    size_t rows = row1 - row0, rw = cw;
    /* s->decoded and s->crop were grown for the whole image at full scale. */
    ferry__jpeg_read_rows(st, s->decoded, rw * oc, rows);
    /* libjpeg's image memory, measured at this scale, roughly scales with the
     * output width: keep room for a full-scale decode of this image, so that
     * the next crop (at any scale) finds the arena big enough. */
    size_t used = s->arena_used + s->arena_over;
    ferry__arena_reserve(s, (used * 8 + num - 1) / num);
    jpeg_abort_decompress(c); /* the rows below the box are not needed */

    size_t sc = oc;
    if (oc == 4) {
        ferry__jpeg_cmyk_to_rgb(s->decoded, rw * rows);
        sc = 3;
    }
    j->px = s->decoded;
    if (sc != C) {
        ferry_row_sink k = {.dst = s->crop, .C = C, .H = rows, .W = rw, .layout = FERRY_LAYOUT_HWC,
                            .src_w = rw, .sc = sc};
        for (size_t y = 0; y < rows; y++)
            ferry__sink_row(&k, y, s->decoded + y * rw * sc);
        j->px = s->crop;
    }
    j->rw = rw;
    j->rh = rows;
    j->rbox = (ferry_crop_box){
        .x0 = sb.x0 - (double)xoff, .x1 = sb.x1 - (double)xoff,
        .y0 = sb.y0 - (double)row0, .y1 = sb.y1 - (double)row0,
        .cx0 = col0 - xoff, .cx1 = col1 - xoff, .cy0 = 0, .cy1 = rows,
    };
    return FERRY_OK;
}

ferry_status ferry__jpeg_decode_region(const void *data, size_t n, const ferry_image_config *cfg,
                                       const ferry_sample_format *fmt, ferry_scratch *s,
                                       const char *name, const ferry_crop_box *box,
                                       const uint8_t **px, size_t *rw, size_t *rh,
                                       ferry_crop_box *rbox)
{
    const char *who = name ? name : "JPEG";
    ferry_image_info info = {0};
    ferry_status st = ferry__jpeg_header(data, n, name, &info);
    if (st != FERRY_OK)
        return st;
    if ((st = ferry__image_check_limits(&info, n, &cfg->limits, who)) != FERRY_OK)
        return st;
    if (cfg->exif_orientation && info.orientation != 1)
        return FERRY_ERR_UNSUPPORTED; /* the whole-image path turns it first */
    /* Room for the largest region any crop of this image takes, up front: a
     * warm scratch then crops this image anywhere without allocating. */
    size_t px_n = info.width * info.height; /* within max_pixels: no overflow */
    if ((st = ferry__scratch_grow(&s->decoded, &s->decoded_cap, px_n * 4)) != FERRY_OK ||
        (st = ferry__scratch_grow(&s->crop, &s->crop_cap, px_n * fmt->channels)) != FERRY_OK)
        return ferry_fail_at(st, who, "out of memory for the decoded crop");
    region_job j = {.data = data, .n = n, .cfg = cfg, .fmt = fmt, .info = &info, .box = box};
    if ((st = ferry__jpeg_run(s, true, who, region_body, &j)) != FERRY_OK)
        return st;
    *px = j.px;
    *rw = j.rw;
    *rh = j.rh;
    *rbox = j.rbox;
    return FERRY_OK;
}

/* JPEG decoding through libjpeg-turbo, from bytes in memory, straight into the
 * caller's buffer, with PIL's pixels: libjpeg's defaults (islow IDCT, fancy
 * upsampling) are PIL's. libjpeg's default error handler calls exit() and its
 * corrupt-data warnings let a broken file decode to gray: here every error and
 * every corrupt-data warning returns to the decode's setjmp and becomes
 * FERRY_ERR_FORMAT naming the file. The decompressor lives in the scratch and
 * its memory comes from the scratch (jpeg_mem.c), so a warm worker allocates
 * nothing. */
#include <string.h>

#include <jerror.h>

#include "common/error.h"
#include "dataset/image/jpeg.h"
#include "dataset/image/geom.h"

/* A progressive file may hold any number of scans, each one a pass over the
 * whole coefficient buffer: thousands of tiny scans make a small file cost
 * minutes. Real encoders write about ten; libjpeg-turbo's tools stop at 500. */
#define MAX_SCANS 500

_Noreturn void ferry__jpeg_fail(struct ferry_jpeg_state *st, int oom, const char *msg)
{
    snprintf(st->msg, sizeof st->msg, "%s", msg);
    st->oom = oom;
    longjmp(st->jump, 1);
}

static void on_error_exit(j_common_ptr c)
{
    struct ferry_jpeg_state *st = c->client_data;
    char buf[JMSG_LENGTH_MAX];
    c->err->format_message(c, buf);
    ferry__jpeg_fail(st, c->err->msg_code == JERR_OUT_OF_MEMORY, buf);
}

/* Warnings that still give the image the file holds are let through, as PIL
 * lets them through: junk bytes between segments, an unknown JFIF version or
 * Adobe transform, a broken ICC marker (ferry ignores colour profiles). Every
 * other warning means the pixels are not the file's: an error. */
static void on_message(j_common_ptr c, int level)
{
    if (level >= 0)
        return; /* trace messages */
    switch (c->err->msg_code) {
    case JWRN_EXTRANEOUS_DATA:
    case JWRN_JFIF_MAJOR:
    case JWRN_ADOBE_XFORM:
    case JWRN_BOGUS_ICC:
        return;
    default:
        on_error_exit(c);
    }
}

static void on_output(j_common_ptr c)
{
    (void)c; /* libjpeg never prints to stderr from a library */
}

static void src_init(j_decompress_ptr c)
{
    (void)c;
}

/* The whole file is in the buffer from the start: being asked for more means
 * it ended before its end-of-image marker (libjpeg's own memory source would
 * insert a fake EOI and only warn). */
static boolean src_fill(j_decompress_ptr c)
{
    ferry__jpeg_fail(c->client_data, 0, "premature end of JPEG data (the file is truncated)");
}

static void src_skip(j_decompress_ptr c, long bytes)
{
    if (bytes <= 0)
        return;
    if ((unsigned long)bytes > c->src->bytes_in_buffer)
        src_fill(c);
    c->src->next_input_byte += bytes;
    c->src->bytes_in_buffer -= (size_t)bytes;
}

static void src_term(j_decompress_ptr c)
{
    (void)c;
}

static void on_progress(j_common_ptr c)
{
    j_decompress_ptr d = (j_decompress_ptr)c;
    if (d->input_scan_number > MAX_SCANS) {
        char buf[96];
        snprintf(buf, sizeof buf, "more than %d scans (a progressive-scan bomb)", MAX_SCANS);
        ferry__jpeg_fail(c->client_data, 0, buf);
    }
}

void ferry__jpeg_state_free(struct ferry_jpeg_state *st)
{
    if (!st)
        return;
    jpeg_destroy_decompress(&st->cinfo); /* frees st->mem too (its self_destruct) */
    ferry_host_free(st);
}

static ferry_status state_get(ferry_scratch *s, struct ferry_jpeg_state **out)
{
    if (s->jpeg) {
        *out = s->jpeg;
        return FERRY_OK;
    }
    struct ferry_jpeg_state *st = ferry_host_calloc(1, sizeof *st);
    if (!st)
        return ferry_fail(FERRY_ERR_NO_MEMORY, "cannot create the JPEG decoder");
    st->scratch = s;
    st->cinfo.err = jpeg_std_error(&st->err);
    st->err.error_exit = on_error_exit;
    st->err.emit_message = on_message;
    st->err.output_message = on_output;
    st->src = (struct jpeg_source_mgr){
        .init_source = src_init, .fill_input_buffer = src_fill, .skip_input_data = src_skip,
        .resync_to_restart = jpeg_resync_to_restart, .term_source = src_term,
    };
    st->progress.progress_monitor = on_progress;
    if (setjmp(st->jump)) {
        /* libjpeg's malloc failed inside jpeg_create_decompress. */
        jpeg_destroy_decompress(&st->cinfo);
        ferry_host_free(st);
        return ferry_fail(FERRY_ERR_NO_MEMORY, "cannot create the JPEG decoder");
    }
    /* Before create: an error inside it (libjpeg's own malloc failing) reaches
     * on_error_exit, which needs st; create keeps client_data. */
    st->cinfo.client_data = st;
    jpeg_create_decompress(&st->cinfo);
    if (ferry__jpeg_mem_install(st) != FERRY_OK) {
        jpeg_destroy_decompress(&st->cinfo);
        ferry_host_free(st);
        return ferry_fail(FERRY_ERR_NO_MEMORY, "cannot create the JPEG decoder");
    }
    st->cinfo.src = &st->src;
    st->cinfo.progress = &st->progress;
    s->jpeg = st;
    *out = st;
    return FERRY_OK;
}

/* libjpeg's CMYK (inverted, as Adobe writes it and PIL assumes for every CMYK
 * JPEG) to RGB by PIL's formula (Convert.c cmyk2rgb, no colour management),
 * n pixels, in place: the output never overtakes the input. */
void ferry__jpeg_cmyk_to_rgb(uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const uint8_t *in = p + 4 * i;
        unsigned nk = in[3]; /* 255 - (255 - K) */
        uint8_t rgb[3];
        for (int k = 0; k < 3; k++) {
            unsigned t = (255u - in[k]) * nk + 128u;
            int v = (int)nk - (int)(((t >> 8) + t) >> 8);
            rgb[k] = (uint8_t)(v < 0 ? 0 : v);
        }
        memcpy(p + 3 * i, rgb, 3);
    }
}

/* EXIF orientation o applied as PIL's exif_transpose does, from src (w x h, C
 * channels, HWC) into dst ((o >= 5 ? h x w : w x h)). */
static void orient(const uint8_t *src, size_t w, size_t h, size_t C, int o, uint8_t *dst)
{
    size_t dw = o >= 5 ? h : w, dh = o >= 5 ? w : h;
    for (size_t y = 0; y < dh; y++)
        for (size_t x = 0; x < dw; x++) {
            size_t sx, sy;
            switch (o) {
            case 2: sx = w - 1 - x; sy = y; break;             /* FLIP_LEFT_RIGHT */
            case 3: sx = w - 1 - x; sy = h - 1 - y; break;     /* ROTATE_180 */
            case 4: sx = x; sy = h - 1 - y; break;             /* FLIP_TOP_BOTTOM */
            case 5: sx = y; sy = x; break;                     /* TRANSPOSE */
            case 6: sx = y; sy = h - 1 - x; break;             /* ROTATE_270 */
            case 7: sx = w - 1 - y; sy = h - 1 - x; break;     /* TRANSVERSE */
            case 8: sx = w - 1 - y; sy = x; break;             /* ROTATE_90 */
            default: sx = x; sy = y; break;
            }
            memcpy(dst + (y * dw + x) * C, src + (sy * w + sx) * C, C);
        }
}

typedef struct job {
    const uint8_t *data;
    size_t n;
    const ferry_image_config *cfg;
    const ferry_sample_format *fmt;
    const ferry_image_info *info;
    const char *name;
    uint8_t *dst;
} job;

/* rows[0..count) get the next output rows; libjpeg hands out at least one per
 * call from a source that never suspends. */
void ferry__jpeg_read_rows(struct ferry_jpeg_state *st, uint8_t *first, size_t stride, size_t count)
{
    JSAMPROW rows[16];
    size_t done = 0;
    while (done < count) {
        size_t k = count - done < 16 ? count - done : 16;
        for (size_t i = 0; i < k; i++)
            rows[i] = first + (done + i) * stride;
        JDIMENSION got = jpeg_read_scanlines(&st->cinfo, rows, (JDIMENSION)k);
        if (got == 0)
            ferry__jpeg_fail(st, 0, "libjpeg returned no rows");
        done += got;
    }
}

void ferry__jpeg_read_header(struct ferry_jpeg_state *st, const uint8_t *data, size_t n,
                             const ferry_image_info *info)
{
    j_decompress_ptr c = &st->cinfo;
    st->src.next_input_byte = data;
    st->src.bytes_in_buffer = n;
    /* libjpeg keeps quantization and Huffman tables from one image to the next
     * (for abbreviated streams) and fills in default Huffman tables only where
     * none is set: a decoder kept in the scratch would decode a file that lacks
     * them with the previous file's. Every file starts with none, as in a fresh
     * decoder (PIL's); the tables live in the per-decode arena (jpeg_mem.c). */
    memset(c->quant_tbl_ptrs, 0, sizeof c->quant_tbl_ptrs);
    memset(c->dc_huff_tbl_ptrs, 0, sizeof c->dc_huff_tbl_ptrs);
    memset(c->ac_huff_tbl_ptrs, 0, sizeof c->ac_huff_tbl_ptrs);
    jpeg_read_header(c, TRUE);
    if (c->image_width != info->width || c->image_height != info->height)
        ferry__jpeg_fail(st, 0, "libjpeg reads another size than the frame header");
    if (c->num_components == 1)
        c->out_color_space = JCS_GRAYSCALE;
    else if (c->jpeg_color_space == JCS_CMYK || c->jpeg_color_space == JCS_YCCK)
        c->out_color_space = JCS_CMYK;
    else
        c->out_color_space = JCS_RGB;
}

/* Everything between setjmp and the end of libjpeg's work. Locals changed after
 * setjmp are not read after a longjmp: all state lives in *j and *j->st. */
static ferry_status decode_body(struct ferry_jpeg_state *st, void *arg)
{
    job *j = arg;
    j_decompress_ptr c = &st->cinfo;
    ferry_scratch *s = st->scratch;
    if (setjmp(st->jump))
        return st->oom ? FERRY_ERR_NO_MEMORY : FERRY_ERR_FORMAT;
    ferry__jpeg_read_header(st, j->data, j->n, j->info);
    jpeg_start_decompress(c);

    size_t ow = c->output_width, oh = c->output_height, oc = (size_t)c->output_components;
    size_t sc = oc == 4 ? 3 : oc;
    size_t C = j->fmt->channels, W = j->fmt->width, H = j->fmt->height;
    const ferry_image_config *cfg = j->cfg;
    int o = cfg->exif_orientation ? j->info->orientation : 1;
    size_t tw = o >= 5 ? oh : ow, th = o >= 5 ? ow : oh; /* after orientation */
    if (o == 1 && ow == W && oh == H && oc != 4 &&
        ((C == 1 && oc == 1) || (C == 3 && oc == 3 && j->fmt->layout == FERRY_LAYOUT_HWC))) {
        ferry__jpeg_read_rows(st, j->dst, W * C, H);
    } else if (o != 1 || ((tw != W || th != H) && cfg->resize == FERRY_RESIZE_BILINEAR)) {
        /* Turning or resizing needs the whole image: decode it into scratch. */
        if (ferry__scratch_grow(&s->decoded, &s->decoded_cap, ow * oh * oc) != FERRY_OK ||
            (o != 1 && ferry__scratch_grow(&s->row, &s->row_cap, ow * oh * sc) != FERRY_OK))
            ferry__jpeg_fail(st, 1, "out of memory for the decoded image");
        ferry__jpeg_read_rows(st, s->decoded, ow * oc, oh);
        jpeg_finish_decompress(c);
        if (oc == 4)
            ferry__jpeg_cmyk_to_rgb(s->decoded, ow * oh);
        const uint8_t *img = s->decoded;
        if (o != 1) {
            orient(s->decoded, ow, oh, sc, o, s->row);
            img = s->row;
        }
        /* Its errors name the file already: st->msg stays empty. */
        return ferry__image_place(img, tw, th, sc, cfg, j->fmt, j->dst, s, j->name);
    } else {
        /* Same size, centre crop, or another channel count or layout: row by row. */
        if (ow < W || oh < H)
            memset(j->dst, 0, C * H * W);
        if (ferry__scratch_grow(&s->row, &s->row_cap, ow * oc) != FERRY_OK)
            ferry__jpeg_fail(st, 1, "out of memory for a row");
        ferry_row_sink k = {
            .dst = j->dst, .C = C, .H = H, .W = W, .layout = j->fmt->layout,
            .oy = ferry__center_offset(H, oh), .ox = ferry__center_offset(W, ow),
            .src_w = ow, .sc = sc,
        };
        for (size_t y = 0; y < oh; y++) {
            ferry__jpeg_read_rows(st, s->row, 0, 1);
            if (oc == 4)
                ferry__jpeg_cmyk_to_rgb(s->row, ow);
            ferry__sink_row(&k, y, s->row);
        }
    }
    jpeg_finish_decompress(c);
    return FERRY_OK;
}

ferry_status ferry__jpeg_decode(const void *data, size_t n, const ferry_image_config *cfg,
                                const ferry_sample_format *fmt, ferry_scratch *scratch,
                                const char *name, void *dst)
{
    const char *who = name ? name : "JPEG";
    ferry_image_info info = {0};
    ferry_status st = ferry__jpeg_header(data, n, name, &info);
    if (st != FERRY_OK)
        return st;
    if ((st = ferry__image_check_limits(&info, n, &cfg->limits, who)) != FERRY_OK)
        return st;
    size_t tw, th;
    ferry__image_oriented_size(cfg, &info, &tw, &th);
    if ((tw != fmt->width || th != fmt->height) && cfg->resize == FERRY_RESIZE_ERROR)
        return ferry_fail_at(FERRY_ERR_FORMAT, who, "image is %zux%zu, samples are %zux%zu", tw,
                             th, fmt->width, fmt->height);

    job j = {.data = data, .n = n, .cfg = cfg, .fmt = fmt, .info = &info, .name = name,
             .dst = dst};
    ferry_scratch *own = NULL;
    if (!scratch) {
        if ((st = ferry_scratch_create(&own)) != FERRY_OK)
            return st;
        scratch = own;
    }
    st = ferry__jpeg_run(scratch, own == NULL, who, decode_body, &j);
    ferry_scratch_destroy(own);
    return st;
}

ferry_status ferry__jpeg_run(ferry_scratch *scratch, bool kept, const char *who,
                             ferry_status (*body)(struct ferry_jpeg_state *, void *), void *arg)
{
    if (!scratch)
        return ferry_fail_at(FERRY_ERR_INVALID_ARG, who, "no scratch for the JPEG decoder");
    ferry__arena_reset(scratch);
    struct ferry_jpeg_state *js = NULL;
    ferry_status st = state_get(scratch, &js);
    if (st == FERRY_OK && js) {
        js->msg[0] = '\0';
        js->oom = 0;
        st = body(js, arg);
        if (st != FERRY_OK) {
            /* Back to a decompressor ready for the next file, whatever state
             * the error left it in (the documented way after a longjmp). */
            jpeg_abort_decompress(&js->cinfo);
            if (js->msg[0])
                st = ferry_fail_at(st, who, "%s", js->msg);
        }
        ferry__jpeg_mem_reset(js);
    } else {
        st = ferry_fail_named(st, who);
    }
    /* Grows the arena to this decode's peak now (see png_decode.c). */
    if (kept)
        ferry__arena_reset(scratch);
    return st;
}

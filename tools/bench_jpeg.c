/* The JPEG rows of `ferry bench decode`: a plain single-thread libjpeg-turbo
 * loop (jpeg_mem_src, read_header, start, read_scanlines, finish: what any
 * program that decodes JPEGs does) beside ferry_jpeg_decode, same files, same
 * RGB output. With --crop N, also the ImageNet recipe's RandomResizedCrop(N)
 * two ways on the same boxes: the whole image decoded first and then the box
 * resized, and ferry's crop-and-scale decode (only the box's rows and columns,
 * at a reduced DCT scale), with the PSNR of the latter against full scale.
 * Two more rows bound what any crop path can gain: the crop-and-scale decode
 * without its resize, and plain libjpeg entropy-decoding (Huffman only, no
 * IDCT or colour) every MCU up to the iMCU row holding the last row the crop
 * path reads, at the scale it picks (ferry__jpeg_crop_plan, shared with the
 * library). A baseline JPEG without restart markers cannot skip that work, so
 * (entropy through the box) + (resize: crop-and-scale less its decode) is a
 * floor on the crop path's time, and full-decode-first over that floor the
 * ceiling of the crop-and-scale ratio. */
#include <math.h>
#include <time.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

#include "commands.h"
#include "dataset/image/image.h" /* the crop box and resize the recipe uses */
#include "dataset/image/jpeg.h"     /* the crop path's plan: its DCT scale and rows */
#include "ferry.h"
#include "ferry/rng.h"
#include "files.h"

typedef struct jb {
    tool_paths *files;
    uint8_t *file, *out, *full;
    size_t file_cap, out_cap;
    ferry_scratch *scratch;
    ferry_image_config cfg, crop_cfg;
    size_t crop;
    struct jpeg_decompress_struct c;
    struct jpeg_error_mgr err;
    jmp_buf jump;
} jb;

static void plain_error(j_common_ptr c)
{
    jb *b = c->client_data;
    longjmp(b->jump, 1);
}

static int read_file(jb *b, size_t i, size_t *n)
{
    return tool_read_file(b->files->v[i], &b->file, &b->file_cap, n, 0);
}

/* One pass of the plain libjpeg loop; images decoded, or -1. */
static long pass_plain(jb *b)
{
    if (setjmp(b->jump)) {
        jpeg_abort_decompress(&b->c);
        return -1;
    }
    for (size_t i = 0; i < b->files->n; i++) {
        size_t n;
        if (read_file(b, i, &n) != 0)
            return -1;
        jpeg_mem_src(&b->c, b->file, (unsigned long)n);
        jpeg_read_header(&b->c, TRUE);
        b->c.out_color_space = b->c.num_components == 1 ? JCS_GRAYSCALE : JCS_RGB;
        jpeg_start_decompress(&b->c);
        size_t stride = (size_t)b->c.output_width * (size_t)b->c.output_components;
        if (stride * b->c.output_height > b->out_cap)
            longjmp(b->jump, 1);
        while (b->c.output_scanline < b->c.output_height) {
            JSAMPROW row = b->out + b->c.output_scanline * stride;
            jpeg_read_scanlines(&b->c, &row, 1);
        }
        jpeg_finish_decompress(&b->c);
    }
    return (long)b->files->n;
}

static long pass_ferry(jb *b)
{
    for (size_t i = 0; i < b->files->n; i++) {
        size_t n;
        if (read_file(b, i, &n) != 0 ||
            ferry_jpeg_decode(b->file, n, &b->cfg, b->scratch, b->files->v[i], b->out,
                              b->out_cap) != FERRY_OK)
            return -1;
    }
    return (long)b->files->n;
}

/* File i's box: the recipe's draw for sample i (seed 0, epoch 0). */
static ferry_status box_of(jb *b, size_t n, size_t i, ferry_crop_box *box, ferry_image_info *info)
{
    ferry_status st = ferry_jpeg_info(b->file, n, info);
    if (st != FERRY_OK)
        return st;
    ferry_rng r;
    ferry_rng_init(&r, 0, FERRY_RNG_AUGMENT, (uint64_t)i);
    ferry__crop_random(&b->crop_cfg, info->width, info->height, &r, box);
    return FERRY_OK;
}

enum {
    CROP_FULL_FIRST,  /* the whole image decoded, then the box resized */
    CROP_SCALE,       /* ferry's crop-and-scale decode and resize */
    CROP_FULL_SCALE,  /* the same at full scale (the PSNR's reference) */
    CROP_DECODE_ONLY, /* CROP_SCALE less the resize */
    CROP_ENTROPY,     /* entropy decoding through the box's last row */
};

/* CROP_ENTROPY on the file in b->file (n bytes): plain libjpeg at the scale the
 * crop path picks, skipping whole iMCU rows up to the one holding the last row
 * it reads. A skipped whole iMCU row is only entropy-decoded (libjpeg-turbo
 * discards its coefficients); rounding down keeps the rows around the last
 * one from being decoded in full, and plain upsampling keeps libjpeg from
 * decoding a context iMCU row in full before the skip's end, so this stays a
 * lower bound on any decoder's work for the box. */
static int entropy_through_box(jb *b, size_t n, const ferry_sample_format *fmt,
                               const ferry_crop_box *box)
{
    if (setjmp(b->jump)) {
        jpeg_abort_decompress(&b->c);
        return -1;
    }
    jpeg_mem_src(&b->c, b->file, (unsigned long)n);
    jpeg_read_header(&b->c, TRUE);
    b->c.out_color_space = b->c.num_components == 1 ? JCS_GRAYSCALE : JCS_RGB;
    b->c.do_fancy_upsampling = FALSE;
    ferry_jpeg_crop_plan p;
    if (!ferry__jpeg_crop_plan(&b->c, b->crop_cfg.crop_full_scale, fmt, box, &p))
        longjmp(b->jump, 1);
    jpeg_start_decompress(&b->c);
    size_t unit = (size_t)b->c.max_v_samp_factor * (size_t)b->c.min_DCT_scaled_size;
    size_t skip = unit ? (p.row1 - 1) / unit * unit : 0;
    if (skip && jpeg_skip_scanlines(&b->c, (JDIMENSION)skip) != skip)
        longjmp(b->jump, 1);
    jpeg_abort_decompress(&b->c);
    return 0;
}

/* CROP_DECODE_ONLY on file i (n bytes in b->file): what ferry__image_decode_box does before its
 * resize (header, limits, the region decode), with the same cfg, fmt and box. */
static ferry_status decode_only(jb *b, size_t n, size_t i, const ferry_image_config *cfg,
                                const ferry_sample_format *fmt, const ferry_crop_box *box)
{
    ferry_image_info info = {0};
    ferry_status st = ferry__image_header(b->file, n, b->files->v[i], &info);
    if (st == FERRY_OK)
        st = ferry__image_check_limits(&info, n, &cfg->limits, b->files->v[i]);
    const uint8_t *px;
    size_t rw, rh;
    ferry_crop_box rb;
    if (st == FERRY_OK)
        st = ferry__jpeg_decode_region(b->file, n, cfg, fmt, b->scratch, b->files->v[i], box, &px,
                                       &rw, &rh, &rb);
    return st;
}

/* One pass of a crop row (the modes above) over the files. dst NULL: b->out. */
static long pass_crop(jb *b, int mode, uint8_t *dst)
{
    ferry_image_config cfg = b->crop_cfg;
    cfg.crop_full_scale = mode == CROP_FULL_SCALE;
    ferry_sample_format fmt = {.channels = 3, .height = b->crop, .width = b->crop,
                               .layout = FERRY_LAYOUT_HWC, .dtype = FERRY_DTYPE_U8};
    for (size_t i = 0; i < b->files->n; i++) {
        size_t n;
        ferry_crop_box box;
        ferry_image_info info;
        if (read_file(b, i, &n) != 0 || box_of(b, n, i, &box, &info) != FERRY_OK)
            return -1;
        uint8_t *out = dst ? dst + i * b->crop * b->crop * 3 : b->out;
        ferry_status st;
        if (mode == CROP_FULL_FIRST) {
            st = ferry_jpeg_decode(b->file, n, &b->cfg, b->scratch, b->files->v[i], b->full,
                                   b->out_cap);
            if (st == FERRY_OK)
                st = ferry__resize_box(b->full, info.width, info.height, 3, &box, out, b->crop,
                                       b->crop, FERRY_LAYOUT_HWC, b->scratch);
        } else if (mode == CROP_DECODE_ONLY) {
            st = decode_only(b, n, i, &cfg, &fmt, &box);
        } else if (mode == CROP_ENTROPY) {
            st = entropy_through_box(b, n, &fmt, &box) == 0 ? FERRY_OK : FERRY_ERR_FORMAT;
        } else {
            st = ferry__image_decode_box(b->file, n, &cfg, &fmt, b->scratch, b->files->v[i], out,
                                         &box, NULL);
        }
        if (st != FERRY_OK)
            return -1;
    }
    return (long)b->files->n;
}

static double thread_cpu(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Best of rounds (alternated, so drift on a shared machine hits all alike),
 * in wall time and in this thread's CPU time: the latter leaves out the time
 * other processes hold the core, which on a shared machine is most of the
 * spread between runs. */
static void time_rows(jb *b, double *best, double *best_cpu, int rows)
{
    /* Rows 2 on: the crop modes, in the order of the table. */
    static const int mode_of[] = {CROP_FULL_FIRST, CROP_SCALE, CROP_DECODE_ONLY, CROP_ENTROPY};
    double budget = tool_now() + 30.0;
    for (int k = 0; k < rows; k++)
        best[k] = best_cpu[k] = 1e30;
    for (int round = 0; round < 5; round++) {
        for (int k = 0; k < rows; k++) {
            double t0 = tool_now(), c0 = thread_cpu();
            if (k == 0) pass_plain(b);
            else if (k == 1) pass_ferry(b);
            else pass_crop(b, mode_of[k - 2], NULL);
            double t = tool_now() - t0, c = thread_cpu() - c0;
            best[k] = t < best[k] ? t : best[k];
            best_cpu[k] = c < best_cpu[k] ? c : best_cpu[k];
        }
        if (round >= 2 && tool_now() > budget)
            break;
    }
}

int bench_decode_jpeg(const char *dir, tool_paths *files, size_t crop, bool json)
{
    jb b = {.files = files, .cfg = ferry_image_config_default(), .crop = crop};
    b.cfg.channels = 3;
    b.cfg.layout = FERRY_LAYOUT_HWC;
    b.crop_cfg = b.cfg;
    b.crop_cfg.crop = FERRY_CROP_RANDOM_RESIZED;
    b.crop_cfg.width = b.crop_cfg.height = crop ? crop : 224;
    if (ferry__image_config_check(&b.crop_cfg, &b.crop_cfg) != FERRY_OK) {
        fprintf(stderr, "ferry bench decode: %s\n", ferry_last_error());
        return 1;
    }
    b.out_cap = (size_t)16384 * 16384 * 3 / 16; /* any file under 16 Mpixel */
    b.out = malloc(b.out_cap);
    b.full = malloc(b.out_cap);
    ferry_scratch_create(&b.scratch);
    b.c.err = jpeg_std_error(&b.err);
    b.err.error_exit = plain_error;
    jpeg_create_decompress(&b.c);
    b.c.client_data = &b;
    int rc = 1;
    uint8_t *fast = NULL, *ref = NULL;
    if (!b.out || !b.full || !b.scratch) {
        fprintf(stderr, "ferry bench decode: out of memory\n");
        goto done;
    }
    int rows = crop ? 6 : 2;
    if (pass_plain(&b) < 0 || pass_ferry(&b) < 0 ||
        (crop && (pass_crop(&b, CROP_FULL_FIRST, NULL) < 0 || pass_crop(&b, CROP_SCALE, NULL) < 0 ||
                  pass_crop(&b, CROP_DECODE_ONLY, NULL) < 0 ||
                  pass_crop(&b, CROP_ENTROPY, NULL) < 0))) {
        fprintf(stderr, "ferry bench decode: a file failed to decode (%s); run `ferry check %s`\n",
                ferry_last_error(), dir);
        goto done;
    }
    double best[6], best_cpu[6];
    time_rows(&b, best, best_cpu, rows);
    /* The reduced scale's cost in pixels: PSNR of every crop against full scale. */
    double psnr = 0;
    if (crop) {
        size_t per = crop * crop * 3;
        fast = malloc(per * files->n);
        ref = malloc(per * files->n);
        if (!fast || !ref || pass_crop(&b, CROP_SCALE, fast) < 0 ||
            pass_crop(&b, CROP_FULL_SCALE, ref) < 0) {
            fprintf(stderr, "ferry bench decode: out of memory for the PSNR\n");
            goto done;
        }
        double se = 0;
        for (size_t i = 0; i < per * files->n; i++)
            se += ((double)fast[i] - ref[i]) * ((double)fast[i] - ref[i]);
        psnr = se == 0 ? 99 : 10 * log10(255.0 * 255.0 * (double)(per * files->n) / se);
    }
    static const char *names[6] = {"libjpeg-turbo (plain loop)", "ferry_jpeg_decode",
                                   "full decode, then crop", "crop-and-scale decode",
                                   "crop-and-scale, decode only",
                                   "entropy decoding through the box"};
    double ips[6], cps[6];
    for (int k = 0; k < rows; k++) {
        ips[k] = (double)files->n / best[k];
        cps[k] = (double)files->n / best_cpu[k];
    }
    /* The floor: entropy through the box plus the resize (crop-and-scale less
     * its decode, each a best of rounds; at least 0 when noise inverts them). */
    double floor_t = 0, floor_c = 0;
    if (crop) {
        double rs = best[3] - best[4], rs_c = best_cpu[3] - best_cpu[4];
        floor_t = best[5] + (rs > 0 ? rs : 0);
        floor_c = best_cpu[5] + (rs_c > 0 ? rs_c : 0);
    }
    if (json) {
        printf("{\"bench\": \"decode\", \"dir\": \"%s\", \"files\": %zu, \"kind\": \"jpeg\", "
               "\"libjpeg_ips\": %.1f, \"ferry_ips\": %.1f, \"ratio\": %.3f",
               dir, files->n, ips[0], ips[1], ips[1] / ips[0]);
        if (crop)
            printf(", \"crop\": %zu, \"full_then_crop_ips\": %.1f, \"crop_scale_ips\": %.1f, "
                   "\"crop_ratio\": %.3f, \"crop_ratio_cpu\": %.3f, \"psnr_db\": %.2f",
                   crop, ips[2], ips[3], ips[3] / ips[2], cps[3] / cps[2], psnr);
        if (crop)
            printf(", \"crop_decode_only_ips\": %.1f, \"entropy_through_box_ips\": %.1f, "
                   "\"crop_floor_ips\": %.1f, \"crop_floor_ips_cpu\": %.1f, "
                   "\"crop_ratio_ceiling\": %.3f, \"crop_ratio_ceiling_cpu\": %.3f",
                   ips[4], ips[5], (double)files->n / floor_t, (double)files->n / floor_c,
                   best[2] / floor_t, best_cpu[2] / floor_c);
        printf("}\n");
    } else {
        printf("decode %s: %zu JPEG files, output rgb u8, single thread, best of rounds\n", dir,
               files->n);
        printf("  %-34s %12s %14s\n", "decoder", "images/s", "per CPU-second");
        for (int k = 0; k < rows; k++)
            printf("  %-34s %12.1f %14.1f\n", names[k], ips[k], cps[k]);
        printf("  ratio ferry / libjpeg-turbo: %.3f\n", ips[1] / ips[0]);
        if (crop)
            printf("  RandomResizedCrop(%zu): crop-and-scale / full decode first: %.3f; "
                   "PSNR against full scale %.1f dB\n", crop, ips[3] / ips[2], psnr);
        if (crop)
            printf("  the same in thread CPU time: %.3f\n", cps[3] / cps[2]);
        if (crop) {
            printf("  floor of any crop path (entropy through the box + resize): %.1f images/s; "
                   "ceiling of crop-and-scale / full decode first: %.3f\n",
                   (double)files->n / floor_t, best[2] / floor_t);
            printf("  the same in thread CPU time: %.1f images/s; ceiling %.3f\n",
                   (double)files->n / floor_c, best_cpu[2] / floor_c);
        }
    }
    rc = 0;
done:
    free(fast);
    free(ref);
    jpeg_destroy_decompress(&b.c);
    ferry_scratch_destroy(b.scratch);
    free(b.out);
    free(b.full);
    free(b.file);
    return rc;
}

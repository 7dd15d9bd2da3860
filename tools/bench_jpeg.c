/* The JPEG rows of `ferry bench decode`: a plain single-thread libjpeg-turbo
 * loop (jpeg_mem_src, read_header, start, read_scanlines, finish: what any
 * program that decodes JPEGs does) beside ferry_jpeg_decode, same files, same
 * RGB output. With --crop N, also the ImageNet recipe's RandomResizedCrop(N)
 * two ways on the same boxes: the whole image decoded first and then the box
 * resized, and ferry's crop-and-scale decode (only the box's rows and columns,
 * at a reduced DCT scale), with the PSNR of the latter against full scale. */
#include <math.h>
#include <time.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

#include "commands.h"
#include "dataset/internal.h" /* the crop box and resize the recipe uses */
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

/* The crop after a whole-image decode (mode 0), or ferry's crop-and-scale
 * decode (1), or the same at full scale (2). dst NULL: b->out. */
static long pass_crop(jb *b, int mode, uint8_t *dst)
{
    ferry_image_config cfg = b->crop_cfg;
    cfg.crop_full_scale = mode == 2;
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
        if (mode == 0) {
            st = ferry_jpeg_decode(b->file, n, &b->cfg, b->scratch, b->files->v[i], b->full,
                                   b->out_cap);
            if (st == FERRY_OK)
                st = ferry__resize_box(b->full, info.width, info.height, 3, &box, out, b->crop,
                                       b->crop, FERRY_LAYOUT_HWC, b->scratch);
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
    double budget = tool_now() + 30.0;
    for (int k = 0; k < rows; k++)
        best[k] = best_cpu[k] = 1e30;
    for (int round = 0; round < 5; round++) {
        for (int k = 0; k < rows; k++) {
            double t0 = tool_now(), c0 = thread_cpu();
            if (k == 0) pass_plain(b);
            else if (k == 1) pass_ferry(b);
            else pass_crop(b, k - 2, NULL);
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
    int rows = crop ? 4 : 2;
    if (pass_plain(&b) < 0 || pass_ferry(&b) < 0 || (crop && pass_crop(&b, 0, NULL) < 0) ||
        (crop && pass_crop(&b, 1, NULL) < 0)) {
        fprintf(stderr, "ferry bench decode: a file failed to decode (%s); run `ferry check %s`\n",
                ferry_last_error(), dir);
        goto done;
    }
    double best[4], best_cpu[4];
    time_rows(&b, best, best_cpu, rows);
    /* The reduced scale's cost in pixels: PSNR of every crop against full scale. */
    double psnr = 0;
    if (crop) {
        size_t per = crop * crop * 3;
        fast = malloc(per * files->n);
        ref = malloc(per * files->n);
        if (!fast || !ref || pass_crop(&b, 1, fast) < 0 || pass_crop(&b, 2, ref) < 0) {
            fprintf(stderr, "ferry bench decode: out of memory for the PSNR\n");
            goto done;
        }
        double se = 0;
        for (size_t i = 0; i < per * files->n; i++)
            se += ((double)fast[i] - ref[i]) * ((double)fast[i] - ref[i]);
        psnr = se == 0 ? 99 : 10 * log10(255.0 * 255.0 * (double)(per * files->n) / se);
    }
    static const char *names[4] = {"libjpeg-turbo (plain loop)", "ferry_jpeg_decode",
                                   "full decode, then crop", "crop-and-scale decode"};
    double ips[4], cps[4];
    for (int k = 0; k < rows; k++) {
        ips[k] = (double)files->n / best[k];
        cps[k] = (double)files->n / best_cpu[k];
    }
    if (json) {
        printf("{\"bench\": \"decode\", \"dir\": \"%s\", \"files\": %zu, \"kind\": \"jpeg\", "
               "\"libjpeg_ips\": %.1f, \"ferry_ips\": %.1f, \"ratio\": %.3f",
               dir, files->n, ips[0], ips[1], ips[1] / ips[0]);
        if (crop)
            printf(", \"crop\": %zu, \"full_then_crop_ips\": %.1f, \"crop_scale_ips\": %.1f, "
                   "\"crop_ratio\": %.3f, \"crop_ratio_cpu\": %.3f, \"psnr_db\": %.2f",
                   crop, ips[2], ips[3], ips[3] / ips[2], cps[3] / cps[2], psnr);
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

/* Internal to the JPEG decoder: the libjpeg decompressor a scratch keeps between
 * decodes (jpeg_decode.c) and the memory manager that serves it from the scratch
 * (jpeg_mem.c). Nothing here is public API. */
#ifndef FERRY_DATASET_JPEG_H
#define FERRY_DATASET_JPEG_H

#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h> /* jpeglib.h needs FILE */

#include <jpeglib.h>

#include "dataset/image/image.h"

typedef struct ferry_jpeg_mem ferry_jpeg_mem;

/* One per scratch, made at its first JPEG and kept: creating a libjpeg
 * decompressor mallocs (its memory manager, its permanent pool), so a warm
 * worker reuses this one and decodes without allocating. */
struct ferry_jpeg_state {
    struct jpeg_decompress_struct cinfo; /* cinfo.client_data points back here */
    struct jpeg_error_mgr err;
    struct jpeg_source_mgr src;
    struct jpeg_progress_mgr progress;
    ferry_jpeg_mem *mem;   /* installed in cinfo.mem for the image pool */
    ferry_scratch *scratch;
    jmp_buf jump;          /* where a libjpeg error returns to (set per decode) */
    int oom;               /* an allocation failed: FERRY_ERR_NO_MEMORY */
    char msg[200];         /* what went wrong, in libjpeg's words or ours */
};

/* Puts ferry's memory manager in front of libjpeg's for st->cinfo (after
 * jpeg_create_decompress): image-pool memory comes from the scratch's arena,
 * virtual arrays (progressive and multi-scan coefficients) from s->coef; the
 * permanent pool (Huffman and quantisation tables kept between images) stays
 * libjpeg's. The memory manager struct itself comes from ferry's host allocator. */
ferry_status ferry__jpeg_mem_install(struct ferry_jpeg_state *st);
/* Forgets the image pool's virtual arrays (the arena itself is reset by the caller). */
void ferry__jpeg_mem_reset(struct ferry_jpeg_state *st);

/* Fails the decode from inside libjpeg (a callback): records msg and returns
 * to the decode's setjmp. */
_Noreturn void ferry__jpeg_fail(struct ferry_jpeg_state *st, int oom, const char *msg);

/* Runs body (which sets st->jump itself) with the scratch's decompressor:
 * arena reset before, and on failure the decompressor aborted and the error
 * prefixed with who. kept: the scratch outlives the call (grow its arena). */
ferry_status ferry__jpeg_run(ferry_scratch *scratch, bool kept, const char *who,
                             ferry_status (*body)(struct ferry_jpeg_state *, void *), void *arg);
/* Points libjpeg at the file, reads its header (checked against info) and sets
 * the output colour space: gray, RGB, or CMYK for CMYK and YCCK files. */
void ferry__jpeg_read_header(struct ferry_jpeg_state *st, const uint8_t *data, size_t n,
                             const ferry_image_info *info);
/* The next count output rows, stride bytes apart from first. */
void ferry__jpeg_read_rows(struct ferry_jpeg_state *st, uint8_t *first, size_t stride, size_t count);
/* What a crop decode (jpeg_crop.c) reads for box at fmt's size: the DCT scale
 * num/8 (the smallest that keeps the box at least fmt's size, or 8/8 with
 * full_scale), the box in that scale's pixels, and the output columns and rows
 * [col0, col1) x [row0, row1) the antialiased resize reaches. Called after
 * jpeg_read_header; leaves c at that scale with its output size calculated.
 * False when the box lies outside the image. Shared with `ferry bench decode`,
 * which times the entropy decoding through row1 on the same plan. */
typedef struct ferry_jpeg_crop_plan {
    unsigned num;
    ferry_crop_box sb;
    size_t col0, col1, row0, row1;
} ferry_jpeg_crop_plan;
bool ferry__jpeg_crop_plan(j_decompress_ptr c, bool full_scale, const ferry_sample_format *fmt,
                           const ferry_crop_box *b, ferry_jpeg_crop_plan *p);
/* libjpeg's CMYK to RGB as PIL converts it, n pixels in place (4 -> 3 bytes). */
void ferry__jpeg_cmyk_to_rgb(uint8_t *p, size_t n);

#endif

/* Internal to the JPEG decoder: the libjpeg decompressor a scratch keeps between
 * decodes (jpeg_decode.c) and the memory manager that serves it from the scratch
 * (jpeg_mem.c). Nothing here is public API. */
#ifndef FERRY_DATASET_JPEG_H
#define FERRY_DATASET_JPEG_H

#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h> /* jpeglib.h needs FILE */

#include <jpeglib.h>

#include "dataset/internal.h"

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

#endif

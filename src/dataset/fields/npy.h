/* The NPY format (NumPy's .npy), versions 1 to 3, read from memory: the header
 * is untrusted input, parsed strictly and within limits (npy.c). */
#ifndef FERRY_DATASET_NPY_H
#define FERRY_DATASET_NPY_H

#include <stddef.h>
#include <stdint.h>

#include "ferry/fields.h"

/* The longest header accepted (numpy writes 64 to a few hundred bytes). */
#define FERRY_NPY_MAX_HEADER 4096

typedef struct ferry_npy {
    ferry_dtype dtype;
    size_t ndim;                        /* 0: a scalar */
    size_t shape[FERRY_FIELD_MAX_DIMS];
    size_t data_off;                    /* the array's first byte in the file */
    size_t data_bytes;                  /* product of shape x the dtype's size */
} ferry_npy;

/* Parses the file d[0, n): little-endian numeric dtypes with a ferry dtype
 * ('<f4' f32, '<f2' f16, '|u1' and '|b1' u8, '<i4' i32, '<i8' i64; '<' or
 * '|' as numpy writes them), C order, at most FERRY_FIELD_MAX_DIMS
 * dimensions, and exactly the data the shape says after the header. Anything
 * else is FERRY_ERR_FORMAT (FERRY_ERR_UNSUPPORTED for a well-formed array
 * ferry has no dtype or order for) naming `name` and what is wrong. */
ferry_status ferry__npy_parse(const uint8_t *d, size_t n, const char *name, ferry_npy *out);
/* The same from the file's first n bytes (at least the header's; a file
 * of file_bytes in all): for reading shapes without the data. */
ferry_status ferry__npy_parse_head(const uint8_t *d, size_t n, size_t file_bytes, const char *name,
                                   ferry_npy *out);

#endif

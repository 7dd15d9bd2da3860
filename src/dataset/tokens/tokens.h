/* Internal to src/dataset/tokens: token files' headers (tokens_format.c,
 * tokens_npy.c), the shards and their byte ranges (tokens_source.c), the
 * seeded document order and best-fit packing (tokens_pack.c). */
#ifndef FERRY_DATASET_TOKENS_H
#define FERRY_DATASET_TOKENS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <stdatomic.h>

#include "dataset/remote/remote.h"
#include "ferry/tokens.h"

/* Where a file's tokens are. */
typedef struct ferry_tok_header {
    uint64_t data_off;   /* byte offset of the first token */
    uint64_t count;      /* tokens */
    size_t token_bytes;  /* 2 or 4 */
} ferry_tok_header;

/* The bytes a header needs at most: read min(file size, this) from the start. */
#define FERRY_TOK_HEAD_BYTES ((size_t)65536)

/* The header in head[0, n) (the file's first bytes; n = min(size, FERRY_TOK_HEAD_BYTES))
 * of a file of `size` bytes, named `name` in errors. Untrusted: the magic and
 * version named when wrong, the count checked against the size. */
ferry_status ferry__tok_header_parse(const uint8_t *head, size_t n, uint64_t size,
                                     ferry_token_format fmt, size_t raw_bytes, const char *name,
                                     ferry_tok_header *out);

/* ---- .npy (tokens_npy.c): a small parser of NumPy's format, versions 1-3, for the
 * header alone (a shard is not read whole) and the unsigned dtypes tokens use ---- */
typedef struct ferry_tok_npy_info {
    char kind;           /* 'u', 'i' or 'f' */
    size_t item_bytes;
    bool fortran_order;
    size_t ndim;
    uint64_t shape[8];
    uint64_t data_off;   /* bytes */
} ferry_tok_npy_info;
/* Parses the header in head[0, n) of a file of `size` bytes; little-endian
 * (or byte-sized) dtypes only; the data's size checked against `size`. */
ferry_status ferry__tok_npy_parse(const uint8_t *head, size_t n, uint64_t size,
                                  const char *name, ferry_tok_npy_info *out);

/* ---- the shards (tokens_source.c) ---- */
typedef struct ferry_tok_shard {
    char *path;
    int fd;                /* -1 for a URL */
    ferry_remote_obj obj;  /* a URL's size and ETag */
    ferry_tok_header h;
} ferry_tok_shard;

typedef struct ferry_tok_source {
    ferry_tok_shard *shards;
    size_t n;
    size_t token_bytes;    /* every shard's */
    ferry_remote_opts opts;
    ferry_remote_counters counters;
    ferry_remote_pool pool;   /* kept connections for the URL shards' Range reads */
} ferry_tok_source;

ferry_status ferry__tok_source_open(const char *const *paths, size_t n,
                                    const ferry_tokens_config *cfg, ferry_tok_source *out);
void ferry__tok_source_close(ferry_tok_source *s);
/* Tokens [first, first + count) of shard k into dst, as stored. Thread-safe. */
ferry_status ferry__tok_read(ferry_tok_source *s, size_t k, uint64_t first, size_t count,
                             void *dst);
/* Whether a name is a token file's in a folder: .bin or .npy. */
bool ferry__tok_is_token_path(const char *path);

/* ---- documents (tokens_pack.c) ---- */
typedef struct ferry_tok_doc {
    uint64_t off;          /* first token in its shard */
    uint64_t len;
    uint32_t shard;
} ferry_tok_doc;

typedef struct ferry_tok_piece {
    uint64_t off;          /* first token in its shard */
    uint32_t len;
    uint32_t shard;
} ferry_tok_piece;

typedef struct ferry_tok_rows {
    ferry_tok_piece *pieces;
    size_t npieces;
    size_t *first;         /* row r: pieces [first[r], first[r + 1]) */
    size_t nrows;
    uint64_t cropped, padded;
} ferry_tok_rows;

/* The documents of every shard (tokens_docs.c): each starts at a delimiter
 * token and runs to the next one or its shard's end; tokens before a shard's
 * first delimiter are a document too. Reads every shard once. */
ferry_status ferry__tok_find_docs(ferry_tok_source *s, uint32_t delim, ferry_tok_doc **out,
                                  size_t *n);

/* The seeded document order: a Fisher-Yates shuffle of 0..n-1 drawing
 * splitmix64(seed ^ FERRY_TOK_ORDER_SALT) modulo i + 1 (tests/ref/
 * make_tokens_ref.py does the same in Python). */
#define FERRY_TOK_ORDER_SALT 0x746f6b656e73ull /* "tokens" */
void ferry__tok_order(uint64_t seed, size_t *perm, size_t n);

/* The candidates of the packing (tokens_bins.c): add up to `buffer`
 * documents (len >= 1, seq rising); take the longest of at most `left`
 * tokens, the earliest among equals, or when none fits the shortest (the
 * earliest among equals). count > 0 to take. */
typedef struct ferry_tok_bins ferry_tok_bins;
ferry_status ferry__tok_bins_create(size_t cap, size_t buffer, ferry_tok_bins **out);
void ferry__tok_bins_destroy(ferry_tok_bins *b);
size_t ferry__tok_bins_count(const ferry_tok_bins *b);
void ferry__tok_bins_add(ferry_tok_bins *b, uint64_t len, size_t seq);
void ferry__tok_bins_take(ferry_tok_bins *b, uint64_t left, uint64_t *len, size_t *seq);

/* Rows of cap tokens from docs taken in `order`, by best fit over a buffer of
 * up to `buffer` documents: the longest that fits what is left (the earliest
 * taken among equals), else the shortest cropped to fill the row; the last
 * row padded. */
ferry_status ferry__tok_pack(const ferry_tok_doc *docs, const size_t *order, size_t n, size_t cap,
                             size_t buffer, ferry_tok_rows *out);
void ferry__tok_rows_free(ferry_tok_rows *r);

/* ---- the handle (tokens.c, tokens_open.c) ---- */
struct ferry_tokens {
    _Atomic size_t refs;         /* the handle, and its dataset */
    ferry_tok_source src;
    ferry_token_cut cut;
    size_t T, len;
    uint32_t pad;
    ferry_dtype dtype;           /* inputs and targets: I32 or I64; U8: the row as stored */
    size_t *win_ends;            /* windows: shard k's are [win_ends[k-1], win_ends[k]) */
    ferry_tok_rows rows;         /* documents */
    ferry_tokens_info info;
    ferry_dataset *ds;
};
/* Drops one of its two references (the handle's, its dataset's). */
void ferry__tokens_unref(ferry_tokens *t);
/* Sample i's shard (windows), for messages; NULL for a row of documents. */
const char *ferry__tokens_sample_name(const ferry_tokens *t, size_t i);
/* The fields dataset over t, in t->ds, holding a reference to t (tokens_fields.c). */
ferry_status ferry__tokens_make_dataset(ferry_tokens *t);

#endif

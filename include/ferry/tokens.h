/* Library: libferry (pkg-config ferry); <ferry.h> includes this header. */
/* Token datasets for language models: llm.c shards, headerless token files
 * (nanoGPT's train.bin), one-dimensional .npy arrays, named as shards are
 * (files, folders, list files, URLs, brace notation), cut into samples of
 * seq_len + 1 tokens in one of two ways:
 *
 *   windows    sample i is tokens [i*T, i*T + T + 1) of its shard: inputs are
 *              its first T, targets its last T. Windows never cross a shard's
 *              end; a shard's last (n - 1) mod T tokens are dropped (as llm.c).
 *   documents  the stream is split at `delimiter` (each document starts with
 *              it); rows of T + 1 tokens are packed by best fit from a seeded
 *              order of documents (a document longer than what is left of a
 *              row is cropped, as nanochat does); every row starts at a
 *              document's start. ferry_tokens_row_docs gives each row's
 *              boundaries (cu_seqlens) and position ids.
 *
 * The samples form a ferry_dataset (ferry_tokens_dataset) of fields that the
 * loader shuffles, splits across ranks and resumes as any other:
 *
 *   "tokens"    [T + 1] u16 or u32: the row as stored, read straight into the
 *               loader's pinned slot; it crosses to the device as stored (2 or
 *               4 bytes a token) and is widened there to token_dtype
 *   "inputs"    [T]: a view of tokens' first T (no bytes of its own)
 *   "targets"   [T]: a view of its last T (inputs shifted by one)
 *   "offsets"   documents: ragged [T + 1] i32, cu_seqlens (ndocs + 1 of them)
 *   "positions" documents: [T] i32, each input's place in its document
 *
 * In a batch, inputs and targets are [B, T] strided views (row stride T + 1)
 * of the one [B, T + 1] window: ferry_batch_field(&batch, "inputs"). Layers
 * that need them contiguous copy them on the device. docs/TOKENS.md says more. */
#ifndef FERRY_TOKENS_H
#define FERRY_TOKENS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ferry/dataset.h"
#include "ferry/export.h"
#include "ferry/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ferry_token_format {
    FERRY_TOKENS_AUTO = 0, /* .npy by its magic; otherwise an llm.c header, checked */
    FERRY_TOKENS_LLMC,     /* 256 int32: magic 20240520 v1 (u16) or 20240801 v7 (u32), count */
    FERRY_TOKENS_RAW,      /* no header: raw_token_bytes per token (nanoGPT's train.bin) */
    FERRY_TOKENS_NPY       /* a one-dimensional .npy array of <u2, <u4 or <i4 (its bits) */
} ferry_token_format;

typedef enum ferry_token_cut {
    FERRY_TOKENS_WINDOWS = 0,
    FERRY_TOKENS_DOCUMENTS
} ferry_token_cut;

/* Zero is each field's default. */
typedef struct ferry_tokens_config {
    size_t seq_len;            /* T; 0: 1024 */
    ferry_token_cut cut;
    ferry_token_format format;
    size_t raw_token_bytes;    /* FERRY_TOKENS_RAW: 2 or 4; 0: 2 */
    /* Documents: the token that starts each document (llm.c's end-of-text
     * 50256; ferry pack --tokens: 256). Required there; 0 is a token too. */
    int64_t delimiter;
    int64_t pad_token;         /* documents: fills a last short row; < 0 or 0: the delimiter */
    size_t pack_buffer;        /* documents: candidates for best fit; 0: 1000 (nanochat's) */
    uint64_t seed;             /* documents: the seeded order rows are packed from */
    /* The number of samples is cut down to a multiple of this (the tail's
     * samples dropped), so that every world size that divides it gets equal,
     * disjoint shares from the distributed sampler with no padding. 0: 1.
     * 840 suits any world size from 1 to 8. */
    size_t len_multiple;
    /* The dtype "tokens" (so inputs and targets) arrive in: FERRY_DTYPE_I32
     * (the default, 0 also meaning it), I64, or U16/U32 (as stored, or u16
     * files widened to u32). The widening runs on the device. */
    ferry_dtype token_dtype;
    double remote_timeout_s;   /* 0: 10 */
    size_t remote_retries;     /* 0: 5 */
} ferry_tokens_config;

typedef struct ferry_tokens ferry_tokens;

/* Opens the token files; documents are indexed and packed here (a remote
 * shard is then read once, whole). An unreadable or corrupt shard (a bad
 * magic or version, a count that does not fit the file's size) is an error
 * naming it. */
FERRY_API ferry_status ferry_tokens_open(const char *const *paths, size_t n,
                                         const ferry_tokens_config *cfg, ferry_tokens **out);
/* Drops the handle; its dataset stays valid while anything holds it. NULL: no-op. */
FERRY_API void ferry_tokens_destroy(ferry_tokens *t);

/* Borrowed: retain it to keep it past ferry_tokens_destroy. */
FERRY_API ferry_dataset *ferry_tokens_dataset(const ferry_tokens *t);
FERRY_API size_t ferry_tokens_len(const ferry_tokens *t);          /* samples */
FERRY_API size_t ferry_tokens_seq_len(const ferry_tokens *t);      /* T */
FERRY_API size_t ferry_tokens_token_bytes(const ferry_tokens *t);  /* 2 or 4 */

/* Sample i's T + 1 tokens, as stored, into dst ((T + 1) * token_bytes bytes). */
FERRY_API ferry_status ferry_tokens_read(const ferry_tokens *t, size_t i, void *dst);

/* Documents: row i's boundaries over its T input tokens. offsets gets
 * ndocs + 1 values (cu_seqlens: 0, the start of each later document, then
 * the row's valid length, T unless the row is padded); cap is offsets'
 * room (T + 1 always suffices). positions (T values, may be NULL): each input
 * token's place in its document (padding counts on from the last one).
 * Windows: one document, offsets {0, T}, positions 0..T-1. */
FERRY_API ferry_status ferry_tokens_row_docs(const ferry_tokens *t, size_t i, int32_t *offsets,
                                             size_t cap, size_t *ndocs, int32_t *positions);

typedef struct ferry_tokens_info {
    size_t shards;
    uint64_t tokens;           /* in all the shards */
    size_t samples;            /* windows or rows */
    uint64_t tokens_dropped;   /* windows: shard tails; both: samples dropped for len_multiple */
    size_t documents;          /* documents mode */
    uint64_t tokens_cropped;   /* documents: cut off documents that did not fit */
    uint64_t tokens_padded;    /* documents: pad tokens in a last short row */
} ferry_tokens_info;
FERRY_API void ferry_tokens_info_get(const ferry_tokens *t, ferry_tokens_info *out);

/* One token file's header checked as ferry_tokens_open checks it (local
 * files): its token count and bytes per token. */
FERRY_API ferry_status ferry_tokens_probe(const char *path, ferry_token_format format,
                                          size_t raw_token_bytes, uint64_t *count,
                                          size_t *token_bytes);

#define FERRY_TOKENS_LLMC_MAGIC_U16 20240520
#define FERRY_TOKENS_LLMC_MAGIC_U32 20240801
#define FERRY_TOKENS_LLMC_HEADER_BYTES 1024

#ifdef __cplusplus
}
#endif
#endif

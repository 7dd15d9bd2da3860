/* A tiny test harness. Each tests/test_*.c is its own program; TEST(name) registers
 * a test, the ASSERT_* macros print file:line and both values and end the test, and
 * SKIP(reason) ends it as skipped. The last line printed is
 * "N passed, N failed, N skipped". Run one test with `build/tests/test_x name`:
 * each argument is a substring of test names, and the program runs the tests
 * that contain any of them (`test_x cuda_matmul cuda_copy`; the GPU check runs
 * a subset this way under compute-sanitizer). */
#ifndef FERRY_TEST_HARNESS_H
#define FERRY_TEST_HARNESS_H

#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ferry/train.h"

typedef void (*ft_test_fn)(void);
void ft_register(const char *name, ft_test_fn fn);
_Noreturn void ft_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
_Noreturn void ft_skip(const char *reason);

#define TEST(name)                                                             \
    static void name(void);                                                    \
    __attribute__((constructor)) static void name##_register(void)             \
    {                                                                          \
        ft_register(#name, name);                                              \
    }                                                                          \
    static void name(void)

#define SKIP(reason) ft_skip(reason)

#define ASSERT(cond)                                                           \
    do {                                                                       \
        if (!(cond))                                                           \
            ft_fail(__FILE__, __LINE__, "assertion failed: %s", #cond);        \
    } while (0)

#define ASSERT_MSG(cond, ...)                                                  \
    do {                                                                       \
        if (!(cond))                                                           \
            ft_fail(__FILE__, __LINE__, __VA_ARGS__);                          \
    } while (0)

#define ASSERT_EQ_INT(a, b)                                                    \
    do {                                                                       \
        long long a_ = (long long)(a), b_ = (long long)(b);                    \
        if (a_ != b_)                                                          \
            ft_fail(__FILE__, __LINE__, "%s == %s: %lld != %lld", #a, #b, a_, b_); \
    } while (0)

#define ASSERT_EQ_SIZE(a, b)                                                   \
    do {                                                                       \
        size_t a_ = (size_t)(a), b_ = (size_t)(b);                             \
        if (a_ != b_)                                                          \
            ft_fail(__FILE__, __LINE__, "%s == %s: %zu != %zu", #a, #b, a_, b_); \
    } while (0)

#define ASSERT_NEAR(a, b, tol)                                                 \
    do {                                                                       \
        double a_ = (double)(a), b_ = (double)(b);                             \
        if (!(fabs(a_ - b_) <= (double)(tol)))                                 \
            ft_fail(__FILE__, __LINE__, "%s ~= %s: %.9g vs %.9g (tol %g)", #a, #b, a_, b_, \
                    (double)(tol));                                            \
    } while (0)

#define ASSERT_STR_EQ(a, b)                                                    \
    do {                                                                       \
        const char *a_ = (a), *b_ = (b);                                       \
        if (!a_ || !b_ || strcmp(a_, b_) != 0)                                 \
            ft_fail(__FILE__, __LINE__, "%s == %s: \"%s\" != \"%s\"", #a, #b,  \
                    a_ ? a_ : "(null)", b_ ? b_ : "(null)");                   \
    } while (0)

#define ASSERT_STR_CONTAINS(hay, needle)                                       \
    do {                                                                       \
        const char *h_ = (hay), *n_ = (needle);                                \
        if (!h_ || !strstr(h_, n_))                                            \
            ft_fail(__FILE__, __LINE__, "\"%s\" does not contain \"%s\"",      \
                    h_ ? h_ : "(null)", n_);                                   \
    } while (0)

/* Compares two byte ranges and names the first differing offset. */
#define ASSERT_MEM_EQ(a, b, n) ft_assert_mem_eq(__FILE__, __LINE__, #a, #b, (a), (b), (n))
void ft_assert_mem_eq(const char *file, int line, const char *an, const char *bn,
                      const void *a, const void *b, size_t n);

/* The call must return FERRY_OK; otherwise prints the status and ferry_last_error(). */
#define ASSERT_OK(expr)                                                        \
    do {                                                                       \
        ferry_status s_ = (expr);                                              \
        if (s_ != FERRY_OK)                                                    \
            ft_fail(__FILE__, __LINE__, "%s: %s (%s)", #expr, ferry_status_str(s_), \
                    ferry_last_error());                                       \
    } while (0)

/* The call must return the given status. */
#define ASSERT_STATUS(expr, want)                                              \
    do {                                                                       \
        ferry_status s_ = (expr), w_ = (want);                                 \
        if (s_ != w_)                                                          \
            ft_fail(__FILE__, __LINE__, "%s: got %s, want %s (%s)", #expr,     \
                    ferry_status_str(s_), ferry_status_str(w_), ferry_last_error()); \
    } while (0)

/* Skips the test because something it needs is absent: kind "gpu" (a CUDA
 * device, real or simulated), "nvidia" (NVIDIA hardware itself) or "data" (test
 * data outside the repository: PngSuite, Fashion-MNIST). When FERRY_REQUIRE
 * (comma-separated kinds, e.g. FERRY_REQUIRE=gpu,data) names the kind, the
 * absence is a failure instead: a run that must test it cannot pass without it. */
_Noreturn void ft_skip_missing(const char *kind, const char *reason);

/* Skips the test with "no CUDA device" when none is present (kind "gpu"). */
/* Element [i][j] of a 2-D tensor in host memory, by its strides (a view's
 * too), as an integer: any integer dtype, or f32 truncated. */
int64_t ft_at2(const ferry_tensor *t, size_t i, size_t j);
/* A streaming loader over ds on the CPU, as the remote tests compare them:
 * batches of 4 u8 images, shuffled with seed, a stream shuffle buffer of 6,
 * `workers` workers. */
ferry_loader *ft_streaming_loader(ferry_dataset *ds, size_t workers, uint64_t seed);
void ft_require_cuda(void);
/* Skips unless a real NVIDIA GPU is present: for what the simulated GPU cannot
 * stand in for (cuBLAS numerics, NCCL, bandwidth). */
void ft_require_nvidia(const char *what);

/* The device a test names ("cpu", "cuda:1"; NULL: the zero, default device).
 * A name that does not parse fails the test. */
ferry_device ft_device(const char *name);

/* A private temporary folder for this test program, removed at exit. */
const char *ft_tmpdir(void);
/* ft_tmpdir()/rel, in a rotating static buffer (8 live at once). */
const char *ft_tmp(const char *rel);
/* Writes bytes to a file (creating parent folders); fails the test on error. */
void ft_write_file(const char *path, const void *data, size_t n);
/* Reads a whole file into memory (malloc); fails the test on error. */
void *ft_read_file(const char *path, size_t *n);
/* The PngSuite folder (FERRY_PNGSUITE, or ../shared/testdata/pngsuite beside the
 * repository), or NULL when absent. */
const char *ft_pngsuite_dir(void);

/* FNV-1a over a host batch: every image byte, then each label. Start from
 * FT_DIGEST_SEED; equal digests mean the same bytes in the same order. */
#define FT_DIGEST_SEED 1469598103934665603ull
uint64_t ft_batch_digest(uint64_t h, const ferry_batch *b);
/* The rest of l's current epoch, next() on the NULL stream to FERRY_END
 * (any other status fails the test): the digest of its batches. */
uint64_t ft_epoch_digest(ferry_loader *l);

/* ---- tar shards (harness_tar.c): a writer of our own, independent of the
 * library's reader ---- */
typedef struct ft_tar {
    uint8_t *d;
    size_t n, cap;
} ft_tar;

typedef struct ft_tar_opts {
    const char *prefix;  /* POSIX ustar prefix field */
    bool gnu_magic;      /* "ustar  \0" instead of "ustar\0" "00" */
    bool base256;        /* size in GNU base-256 */
    bool signed_sum;     /* checksum as old tars summed (signed chars) */
    const char *uname;   /* owner name: non-ASCII bytes make the two sums differ */
} ft_tar_opts;

void ft_tar_put(ft_tar *t, const void *p, size_t n);
void ft_tar_pad(ft_tar *t);                 /* zeros to the next 512-byte block */
/* Each appends and returns the offset of the (first) header written. */
size_t ft_tar_header(ft_tar *t, const char *name, char type, uint64_t size, const ft_tar_opts *o);
size_t ft_tar_file_opts(ft_tar *t, const char *name, const void *data, size_t n, const ft_tar_opts *o);
size_t ft_tar_file(ft_tar *t, const char *name, const void *data, size_t n);
size_t ft_tar_text(ft_tar *t, const char *name, const char *text);
/* One WebDataset sample: KEY.png, the gray w x h image px (written with
 * ferry_png_save through ft_tmp(tmp_rel)), and KEY.cls holding label. */
void ft_tar_png_sample(ft_tar *t, const char *key, const uint8_t *px, size_t w, size_t h,
                       size_t label, const char *tmp_rel);
/* nsh plain shards rel/sh00.tar, sh01.tar, ... in ft_tmp, made with per
 * samples each: sample i is a gray w x h PNG made from i, labelled i % 4,
 * and each shard has its index beside it (SHARD.ferry-index, as
 * shard_index_cache writes it), so that a dataset over their URLs reads only
 * the indexes at create. paths[s] gets shard s's path. */
void ft_indexed_png_shards(const char *rel, size_t nsh, size_t per, size_t w, size_t h,
                           char (*paths)[600]);
size_t ft_tar_pax(ft_tar *t, char type, const char *const *kv, size_t nkv); /* "key=value" pairs */
size_t ft_tar_longname(ft_tar *t, const char *name);                         /* GNU ././@LongLink */
void ft_tar_end(ft_tar *t);                 /* the two zero blocks */
/* Writes the tar to ft_tmp(rel) and frees it; the path. _gz: gzip-compressed,
 * as `members` gzip members one after the other (1: as gzip writes it). */
const char *ft_tar_save(ft_tar *t, const char *rel);
const char *ft_tar_save_gz(ft_tar *t, const char *rel, size_t members);
/* ferry_dataset_shards on the shard at path must fail with want, the message
 * naming the path and n1 (and n2 when not NULL). */
void ft_assert_shard_fails(const char *path, ferry_status want, const char *n1, const char *n2);

#endif

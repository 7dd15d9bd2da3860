/* Shared helpers for the fuzz targets in tests/fuzz/. Each fuzz_<name>.c defines
 * LLVMFuzzerTestOneInput; built alone with clang -fsanitize=fuzzer it is a
 * libFuzzer binary, and tests/test_fuzz_replay.c includes all of them (renaming
 * the entry point) to replay the corpora and crashers with any compiler.
 * Targets return 0 whatever the input; a bug is a crash or a sanitizer report. */
#ifndef FERRY_FUZZ_H
#define FERRY_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ferry/train.h"

/* A private folder for the targets that need files, made once per process and
 * removed at exit (files named by the targets only). */
static char ferry_fuzz_dir_[256];
static const char *ferry_fuzz_files_[8];
static size_t ferry_fuzz_nfiles_;

static inline void ferry_fuzz_cleanup_(void)
{
    char p[320];
    for (size_t i = 0; i < ferry_fuzz_nfiles_; i++) {
        snprintf(p, sizeof p, "%s/%s", ferry_fuzz_dir_, ferry_fuzz_files_[i]);
        unlink(p);
    }
    rmdir(ferry_fuzz_dir_);
}

static inline const char *ferry_fuzz_dir(void)
{
    if (!ferry_fuzz_dir_[0]) {
        const char *t = getenv("TMPDIR");
        snprintf(ferry_fuzz_dir_, sizeof ferry_fuzz_dir_, "%s/ferry-fuzz-XXXXXX",
                 t && *t ? t : "/tmp");
        if (!mkdtemp(ferry_fuzz_dir_)) {
            perror("ferry fuzz: mkdtemp");
            abort();
        }
        atexit(ferry_fuzz_cleanup_);
    }
    return ferry_fuzz_dir_;
}

/* Writes data to dir/name (replacing it) and returns the full path in buf.
 * name must be a string literal (it is remembered for the cleanup). */
static inline const char *ferry_fuzz_write(const char *name, const void *data, size_t n, char *buf,
                                    size_t bufsize)
{
    snprintf(buf, bufsize, "%s/%s", ferry_fuzz_dir(), name);
    size_t i;
    for (i = 0; i < ferry_fuzz_nfiles_; i++)
        if (!strcmp(ferry_fuzz_files_[i], name))
            break;
    if (i == ferry_fuzz_nfiles_ && i < sizeof ferry_fuzz_files_ / sizeof *ferry_fuzz_files_)
        ferry_fuzz_files_[ferry_fuzz_nfiles_++] = name;
    FILE *f = fopen(buf, "wb");
    if (!f || (n && fwrite(data, 1, n, f) != n)) {
        perror("ferry fuzz: write");
        abort();
    }
    fclose(f);
    return buf;
}

/* Library warnings (pin_memory fallbacks and the like) are noise here. */
static inline void ferry_fuzz_quiet_log_(ferry_log_level level, const char *msg, void *user)
{
    (void)level; (void)msg; (void)user;
}

static inline void ferry_fuzz_quiet(void)
{
    ferry_set_log(ferry_fuzz_quiet_log_, NULL);
}

/* One image through its info call, ferry_image_format and its decode (the
 * file named `file`), under cfg, with or without a scratch: every output byte is
 * touched (uninitialised output shows under MSan/valgrind), any status but OK
 * must carry a message, and a too-small output buffer is always refused. The
 * image targets (fuzz_png, fuzz_jpeg) share it. */
typedef ferry_status (*ferry_fuzz_info_fn)(const void *data, size_t n, ferry_image_info *out);
typedef ferry_status (*ferry_fuzz_decode_fn)(const void *data, size_t n, const ferry_image_config *cfg,
                                             ferry_scratch *scratch, const char *name, void *dst,
                                             size_t dst_bytes);

static inline void ferry_fuzz_image_one(const char *target, ferry_fuzz_info_fn info_fn,
                                        ferry_fuzz_decode_fn decode, const char *file, const uint8_t *data,
                                        size_t n, const ferry_image_config *cfg, ferry_scratch *scratch)
{
    ferry_image_info info;
    if (info_fn(data, n, &info) != FERRY_OK)
        return;
    ferry_sample_format fmt;
    if (ferry_image_format(cfg, &info, &fmt) != FERRY_OK)
        return;
    size_t bytes = ferry_sample_format_bytes(&fmt);
    if (bytes == 0 || bytes > ((size_t)4 << 20))
        return; /* the decode would refuse it by its limits anyway */
    uint8_t *dst = malloc(bytes);
    if (!dst)
        return;
    ferry_status st = decode(data, n, cfg, scratch, file, dst, bytes);
    if (st == FERRY_OK) {
        unsigned sum = 0;
        for (size_t i = 0; i < bytes; i++)
            sum += dst[i];
        if (sum == 0xffffffffu)
            fputc('\0', stderr);
    } else if (!ferry_last_error()[0]) {
        fprintf(stderr, "%s: %s without a message\n", target, ferry_status_str(st));
        abort();
    }
    if (bytes > 1 && decode(data, n, cfg, scratch, NULL, dst, bytes - 1) == FERRY_OK) {
        fprintf(stderr, "%s: decode into %zu of %zu bytes succeeded\n", target, bytes - 1, bytes);
        abort();
    }
    free(dst);
}

#endif

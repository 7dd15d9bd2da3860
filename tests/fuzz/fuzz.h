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

#include "ferry.h"

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

#endif

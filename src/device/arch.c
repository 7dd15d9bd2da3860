/* Which GPUs this build's CUDA code runs on: the architectures compiled in
 * (ferry_cuda_archs, recorded by the Makefile from CUDA_ARCH) and the rule the
 * CUDA driver applies when it loads a kernel onto a device (ferry_cuda_arch_fit),
 * so `ferry info` can say "no kernel image" before a launch does. */
#include <stdbool.h>
#include <string.h>

#include "ferry/device.h"

/* The Makefile defines it for this file only ("sm_75 ... compute_120"); a build
 * without it (the lint, CUDA=0) carries no GPU code. */
#ifndef FERRY_CUDA_ARCHS
#define FERRY_CUDA_ARCHS ""
#endif

const char *ferry_cuda_archs(void) { return FERRY_CUDA_ARCHS; }

/* One word of an architecture list: "sm_86" is machine code, "compute_90" PTX.
 * Suffix "a" (sm_90a) is code for exactly that architecture; "f" (sm_100f) runs
 * on its family, as the plain form does. arch 0: a word of neither form. */
typedef struct arch_word {
    int arch; /* 86 for sm_86: major * 10 + minor */
    bool ptx;
    bool exact;
} arch_word;

static arch_word parse_word(const char *p, size_t len)
{
    arch_word w = {0, false, false};
    size_t skip = len > 3 && strncmp(p, "sm_", 3) == 0        ? 3
                  : len > 8 && strncmp(p, "compute_", 8) == 0 ? 8
                                                               : 0;
    if (skip == 0)
        return w;
    int v = 0;
    size_t i = skip;
    for (; i < len && i < skip + 4 && p[i] >= '0' && p[i] <= '9'; i++)
        v = v * 10 + (p[i] - '0');
    bool suffix_ok = i == len || (i + 1 == len && (p[i] == 'a' || p[i] == 'f'));
    if (i == skip || !suffix_ok)
        return w;
    w.arch = v;
    w.ptx = skip == 8;
    w.exact = i + 1 == len && p[i] == 'a';
    return w;
}

/* The driver's rule: machine code runs on its own major version at an equal or
 * higher minor (sm_80 on 8.6, not on 9.0); PTX is compiled for any equal or newer
 * GPU; "a" code only on its own architecture. */
static bool word_runs_on(arch_word w, int cc)
{
    if (w.arch == 0)
        return false;
    if (w.exact)
        return w.arch == cc;
    if (w.ptx)
        return w.arch <= cc;
    return w.arch / 10 == cc / 10 && w.arch <= cc;
}

ferry_arch_fit ferry_cuda_arch_fit(const char *archs, int cc_major, int cc_minor, int *arch)
{
    int best_sass = 0, best_ptx = 0;
    if (archs && cc_major > 0 && cc_major < 100 && cc_minor >= 0 && cc_minor < 10) {
        int cc = cc_major * 10 + cc_minor;
        for (const char *p = archs; *p;) {
            p += strspn(p, " ,");
            size_t len = strcspn(p, " ,");
            arch_word w = parse_word(p, len);
            p += len;
            int *best = w.ptx ? &best_ptx : &best_sass;
            if (word_runs_on(w, cc) && w.arch > *best)
                *best = w.arch;
        }
    }
    /* The driver prefers machine code, and JIT-compiles PTX only without it. */
    if (arch)
        *arch = best_sass ? best_sass : best_ptx;
    return best_sass ? FERRY_ARCH_FIT_SASS : best_ptx ? FERRY_ARCH_FIT_PTX : FERRY_ARCH_FIT_NONE;
}

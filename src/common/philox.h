/* Internal: Philox4x32-10 (Salmon et al., SC'11) and the two transforms of its
 * words into floats, written once for the host (common/philox.c, the CPU kernels)
 * and CUDA kernels (kernels/cuda/), so every backend draws the same numbers.
 *
 * The transforms use only exact float operations (a 24-bit integer converted to
 * float, one add of 1, a multiply by 2^-24), so they are bit-identical on every
 * backend; the normal transform's logf/cosf/sqrtf come from each platform's math
 * library (glibc or CUDA's), which may differ in the last bit. */
#ifndef FERRY_COMMON_PHILOX_H
#define FERRY_COMMON_PHILOX_H

#include <math.h>
#include <stdint.h>

/* Host and device in .cu files, static inline in C; the same text as
 * tensor/half.h's, so either header may come first. */
#ifndef FERRY_HD
#ifdef __CUDACC__
#define FERRY_HD __host__ __device__ __forceinline__
#else
#define FERRY_HD static inline
#endif
#endif

#define FERRY_PHILOX_M0 UINT32_C(0xD2511F53)
#define FERRY_PHILOX_M1 UINT32_C(0xCD9E8D57)
#define FERRY_PHILOX_W0 UINT32_C(0x9E3779B9)
#define FERRY_PHILOX_W1 UINT32_C(0xBB67AE85)

/* One block: 4 words from a 128-bit counter and a 64-bit key. The 32x32->64
 * multiplies compile to one mul.wide on the device. */
FERRY_HD void ferry_philox4x32_10_(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4])
{
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
    uint32_t k0 = key[0], k1 = key[1];
    for (int round = 0; round < 10; round++) {
        uint64_t p0 = (uint64_t)FERRY_PHILOX_M0 * c0;
        uint64_t p1 = (uint64_t)FERRY_PHILOX_M1 * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
        uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c0 = n0;
        c1 = (uint32_t)p1;
        c2 = n2;
        c3 = (uint32_t)p0;
        k0 += FERRY_PHILOX_W0;
        k1 += FERRY_PHILOX_W1;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

/* The block whose counter is (i, stream) and key the seed: element i of a random
 * tensor (rand), or group i of 4 elements (dropout). */
FERRY_HD void ferry_philox_block_(uint64_t i, uint64_t stream, uint64_t seed, uint32_t out[4])
{
    uint32_t ctr[4] = {(uint32_t)i, (uint32_t)(i >> 32), (uint32_t)stream, (uint32_t)(stream >> 32)};
    uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    ferry_philox4x32_10_(ctr, key, out);
}

/* Uniform in [0, 1) from the top 24 bits of a word: every value exact. */
FERRY_HD float ferry_u01_(uint32_t w) { return (float)(w >> 8) * (1.0f / 16777216.0f); }

/* Uniform in (0, 1]: what log may take. */
FERRY_HD float ferry_u01_open_(uint32_t w) { return ((float)(w >> 8) + 1.0f) * (1.0f / 16777216.0f); }

/* Standard normal from two words (Box-Muller, the cosine half). */
FERRY_HD float ferry_box_muller_(uint32_t w0, uint32_t w1)
{
    float u1 = ferry_u01_open_(w0), u2 = ferry_u01_(w1);
    return sqrtf(-2.0f * logf(u1)) * cosf(6.28318530717958647692f * u2);
}

#endif

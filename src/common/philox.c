/* Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11). */
#include <math.h>

#include "ferry/rng.h"

#define PHILOX_M0 UINT32_C(0xD2511F53)
#define PHILOX_M1 UINT32_C(0xCD9E8D57)
#define PHILOX_W0 UINT32_C(0x9E3779B9)
#define PHILOX_W1 UINT32_C(0xBB67AE85)

void ferry_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4])
{
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
    uint32_t k0 = key[0], k1 = key[1];
    for (int round = 0; round < 10; round++) {
        uint64_t p0 = (uint64_t)PHILOX_M0 * c0;
        uint64_t p1 = (uint64_t)PHILOX_M1 * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
        uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c0 = n0;
        c1 = (uint32_t)p1;
        c2 = n2;
        c3 = (uint32_t)p0;
        k0 += PHILOX_W0;
        k1 += PHILOX_W1;
    }
    out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

void ferry_rng_init(ferry_rng *r, uint64_t seed, uint64_t a, uint64_t b)
{
    r->key[0] = (uint32_t)seed ^ (uint32_t)(a >> 32);
    r->key[1] = (uint32_t)(seed >> 32);
    r->ctr[0] = 0;
    r->ctr[1] = (uint32_t)a;
    r->ctr[2] = (uint32_t)b;
    r->ctr[3] = (uint32_t)(b >> 32);
    r->used = 4;
}

uint32_t ferry_rng_u32(ferry_rng *r)
{
    if (r->used == 4) {
        ferry_philox4x32_10(r->ctr, r->key, r->buf);
        r->ctr[0]++;
        r->used = 0;
    }
    return r->buf[r->used++];
}

uint64_t ferry_rng_u64(ferry_rng *r)
{
    uint64_t hi = ferry_rng_u32(r);
    return hi << 32 | ferry_rng_u32(r);
}

uint64_t ferry_rng_below(ferry_rng *r, uint64_t n)
{
    if (n == 0)
        return 0;
    /* Rejection of the short top range keeps every value equally likely. */
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do
        x = ferry_rng_u64(r);
    while (x >= limit);
    return x % n;
}

float ferry_rng_uniform(ferry_rng *r)
{
    return (float)(ferry_rng_u32(r) >> 8) * (1.0f / 16777216.0f);
}

float ferry_rng_normal(ferry_rng *r)
{
    /* u1 in (0, 1] keeps log finite. */
    float u1 = ((float)(ferry_rng_u32(r) >> 8) + 1.0f) * (1.0f / 16777216.0f);
    float u2 = ferry_rng_uniform(r);
    return sqrtf(-2.0f * logf(u1)) * cosf(6.28318530717958647692f * u2);
}

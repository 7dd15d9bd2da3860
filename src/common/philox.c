/* Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11)
 * and the generator built on it. The block function and the float transforms are in
 * common/philox.h, shared with the CPU and CUDA kernels. */
#include "common/philox.h"
#include "ferry/rng.h"

void ferry_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4])
{
    ferry_philox4x32_10_(ctr, key, out);
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

float ferry_rng_uniform(ferry_rng *r) { return ferry_u01_(ferry_rng_u32(r)); }

float ferry_rng_normal(ferry_rng *r)
{
    /* The first word gives u1 in (0, 1], which keeps log finite. */
    uint32_t w0 = ferry_rng_u32(r);
    return ferry_box_muller_(w0, ferry_rng_u32(r));
}

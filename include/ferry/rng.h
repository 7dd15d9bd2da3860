/* Library: libferry (pkg-config ferry); <ferry.h> includes this header. */
/* A counter-based random generator (Philox4x32-10). A stream is named by
 * (seed, a, b), e.g. (seed, epoch, sample index): the same name gives the same
 * numbers on any thread, in any order, so augmentations and shuffles do not
 * depend on which worker ran them. */
#ifndef FERRY_RNG_H
#define FERRY_RNG_H

#include <stdint.h>

#include "ferry/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One Philox4x32-10 block: 4 random words from a 128-bit counter and 64-bit key. */
FERRY_API void ferry_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);

typedef struct ferry_rng {
    uint32_t key[2];
    uint32_t ctr[4]; /* ctr[0] counts blocks; ctr[1..3] hold the stream's name */
    uint32_t buf[4];
    unsigned used;   /* words of buf already returned */
} ferry_rng;

/* The version of every random stream the library draws (epoch orders, splits,
 * augmentation, initialisation, dropout). The same seed gives the same numbers
 * while it stands; any change to them bumps it (the test suite pins them with
 * golden values). */
#define FERRY_RNG_STREAMS_VERSION 2

/* Purposes mixed into `a` by the library so its streams never collide. */
#define FERRY_RNG_SHUFFLE   (UINT64_C(1) << 56)
#define FERRY_RNG_AUGMENT   (UINT64_C(2) << 56)
#define FERRY_RNG_SPLIT     (UINT64_C(3) << 56)
#define FERRY_RNG_INIT      (UINT64_C(4) << 56)
#define FERRY_RNG_DROPOUT   (UINT64_C(5) << 56)
#define FERRY_RNG_SKIP      (UINT64_C(6) << 56) /* a skipped sample's replacement */

FERRY_API void ferry_rng_init(ferry_rng *r, uint64_t seed, uint64_t a, uint64_t b);
FERRY_API uint32_t ferry_rng_u32(ferry_rng *r);
FERRY_API uint64_t ferry_rng_u64(ferry_rng *r);
/* Uniform in [0, n), unbiased; 0 when n is 0. */
FERRY_API uint64_t ferry_rng_below(ferry_rng *r, uint64_t n);
/* Uniform float in [0, 1). */
FERRY_API float ferry_rng_uniform(ferry_rng *r);
/* Standard normal (Box-Muller). */
FERRY_API float ferry_rng_normal(ferry_rng *r);

#ifdef __cplusplus
}
#endif
#endif

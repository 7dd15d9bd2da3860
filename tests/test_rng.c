/* Philox against the published known-answer vectors; stream independence. */
#include "harness.h"
#include "ferry/rng.h"

TEST(philox_known_answers)
{
    /* Random123's kat_vectors for philox4x32_10. */
    static const struct { uint32_t ctr[4], key[2], want[4]; } kat[] = {
        {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
        {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff},
         {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
        {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0},
         {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
    };
    for (size_t i = 0; i < sizeof kat / sizeof kat[0]; i++) {
        uint32_t out[4];
        ferry_philox4x32_10(kat[i].ctr, kat[i].key, out);
        for (int j = 0; j < 4; j++)
            ASSERT_EQ_INT(out[j], kat[i].want[j]);
    }
}

TEST(rng_streams_repeat_and_differ)
{
    ferry_rng a, b, c;
    ferry_rng_init(&a, 42, 1, 7);
    ferry_rng_init(&b, 42, 1, 7);
    ferry_rng_init(&c, 42, 1, 8);
    int same_c = 0;
    for (int i = 0; i < 100; i++) {
        uint32_t x = ferry_rng_u32(&a), y = ferry_rng_u32(&b), z = ferry_rng_u32(&c);
        ASSERT_EQ_INT(x, y);
        same_c += x == z;
    }
    ASSERT(same_c < 3);
}

TEST(rng_below_and_uniform_ranges)
{
    ferry_rng r;
    ferry_rng_init(&r, 1, 2, 3);
    size_t counts[10] = {0};
    for (int i = 0; i < 100000; i++) {
        uint64_t v = ferry_rng_below(&r, 10);
        ASSERT(v < 10);
        counts[v]++;
        float u = ferry_rng_uniform(&r);
        ASSERT(u >= 0.0f && u < 1.0f);
    }
    for (int i = 0; i < 10; i++)
        ASSERT_MSG(counts[i] > 9500 && counts[i] < 10500, "bucket %d has %zu of 100000", i, counts[i]);
    ASSERT_EQ_INT(ferry_rng_below(&r, 0), 0);
    double sum = 0, sq = 0;
    for (int i = 0; i < 100000; i++) {
        double z = ferry_rng_normal(&r);
        ASSERT(isfinite(z));
        sum += z;
        sq += z * z;
    }
    ASSERT_NEAR(sum / 100000, 0.0, 0.02);
    ASSERT_NEAR(sq / 100000, 1.0, 0.02);
}

/* The inline Philox and transforms of common/philox.h, which the CPU and CUDA
 * kernels share, are the generator's: same words, same floats, and the edges of
 * the transforms stay where log and the [0, 1) promise need them. */
#include "common/philox.h"

TEST(shared_philox_and_transforms)
{
    uint32_t ctr[4] = {7, 0, 0x89abcdefu, 0x01234567u}, key[2] = {0xdeadbeefu, 42}, a[4], b[4];
    ferry_philox4x32_10(ctr, key, a);
    ferry_philox4x32_10_(ctr, key, b);
    for (int j = 0; j < 4; j++)
        ASSERT_EQ_INT(a[j], b[j]);
    /* Block (i, stream) keyed by the seed, as the rand and dropout kernels draw. */
    ferry_philox_block_(7, 0x0123456789abcdefull, ((uint64_t)42 << 32) | 0xdeadbeefu, b);
    for (int j = 0; j < 4; j++)
        ASSERT_EQ_INT(a[j], b[j]);
    ASSERT(ferry_u01_(0) == 0.0f);
    ASSERT(ferry_u01_(0xffffffffu) == 1.0f - 1.0f / 16777216.0f);
    ASSERT(ferry_u01_open_(0) == 1.0f / 16777216.0f);
    ASSERT(ferry_u01_open_(0xffffffffu) == 1.0f);
    ASSERT(isfinite(ferry_box_muller_(0, 0)) && ferry_box_muller_(0xffffffffu, 0) == 0.0f);
    /* The generator's uniform and normal are these transforms of its words. */
    ferry_rng r1, r2;
    ferry_rng_init(&r1, 9, 8, 7);
    ferry_rng_init(&r2, 9, 8, 7);
    for (int i = 0; i < 100; i++) {
        float u = ferry_rng_uniform(&r1);
        ASSERT(u == ferry_u01_(ferry_rng_u32(&r2)));
        float z = ferry_rng_normal(&r1);
        uint32_t w0 = ferry_rng_u32(&r2), w1 = ferry_rng_u32(&r2);
        ASSERT(z == ferry_box_muller_(w0, w1));
    }
}

/* The checksum of hash64.h: one 64-bit lane over 8-byte words, each step
 * (x ^ w) * K then x ^= x >> 29. For a fixed word both halves are bijections,
 * so a change confined to one word can never be cancelled by the words after
 * it; changes in several words collide with odds near 2^-64. About one word
 * per six cycles: a few GB/s, about what reading the file costs. */
#include <string.h>

#include "common/hash64.h"

#define K 0x9e3779b97f4a7c15ull

static uint64_t step(uint64_t h, uint64_t w)
{
    h = (h ^ w) * K;
    return h ^ (h >> 29);
}

void ferry_hash64_init(ferry_hash64 *s)
{
    memset(s, 0, sizeof *s);
    s->h = 0x6a09e667f3bcc908ull;
}

void ferry_hash64_update(ferry_hash64 *s, const void *p, size_t n)
{
    const uint8_t *b = p;
    s->len += n;
    while (s->ntail && n) { /* finish the word begun last time */
        s->tail[s->ntail++] = *b++;
        n--;
        if (s->ntail == 8) {
            uint64_t w;
            memcpy(&w, s->tail, 8);
            s->h = step(s->h, w);
            s->ntail = 0;
        }
    }
    uint64_t h = s->h;
    for (; n >= 8; b += 8, n -= 8) {
        uint64_t w;
        memcpy(&w, b, 8);
        h = step(h, w);
    }
    s->h = h;
    memcpy(s->tail + s->ntail, b, n);
    s->ntail += (unsigned)n;
}

uint64_t ferry_hash64_final(const ferry_hash64 *s)
{
    uint8_t last[8] = {0};
    memcpy(last, s->tail, s->ntail);
    uint64_t w, h;
    memcpy(&w, last, 8);
    h = step(step(s->h, w), s->len); /* the length tells trailing zeros apart */
    h ^= h >> 33; /* murmur3's finaliser: every bit of h reaches every bit */
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    return h ^ (h >> 33);
}

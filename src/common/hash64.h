/* Internal: a fast 64-bit checksum of a byte stream, fed in pieces of any
 * size. It tells a file from a damaged or different one (a cached shard from
 * the bytes recorded when it was downloaded); it is no cryptographic hash and
 * guards nothing against someone who can write the file and its record, which
 * is why the remote cache keeps both in a folder only the user can write. */
#ifndef FERRY_COMMON_HASH64_H
#define FERRY_COMMON_HASH64_H

#include <stddef.h>
#include <stdint.h>

typedef struct ferry_hash64 {
    uint64_t h, len;
    uint8_t tail[8]; /* bytes of a word not yet whole */
    unsigned ntail;
} ferry_hash64;

void ferry_hash64_init(ferry_hash64 *s);
void ferry_hash64_update(ferry_hash64 *s, const void *p, size_t n);
/* The checksum of everything fed; s is left as it was. */
uint64_t ferry_hash64_final(const ferry_hash64 *s);

#endif

/* Fuzz target: a shard's index file (SHARD.ferry-index, or URL.ferry-index
 * fetched from a server), parsed by ferry__shard_index_parse. The CRC is no
 * signature (whoever writes the file can compute it), so the input's last 4
 * bytes are replaced by its right CRC and the shard's size is taken from its
 * head: the parser must be safe against everything else. Every record it
 * accepts must lie inside its shard (a plain shard's image bytes end by its
 * size), name a string inside the names, and carry a label its problem
 * allows: a record that does not is a bug even without a crash. */
#include <stdbool.h>
#include <zlib.h>

#include "dataset/shards/shards.h"
#include "fuzz.h"

enum { INDEX_HEAD = 112, INDEX_SHARD_SIZE_AT = 16 };

static void index_fuzz_fail(const char *what, size_t i, const ferry_shard_sample *s)
{
    fprintf(stderr, "fuzz_index: record %zu accepted but %s (img_off %llu, img_size %llu)\n", i,
            what, (unsigned long long)s->img_off, (unsigned long long)s->img_size);
    abort();
}

static void index_fuzz_check(const ferry_shard_part *p, uint64_t shard_size)
{
    for (size_t i = 0; i < p->n; i++) {
        const ferry_shard_sample *s = &p->samples[i];
        if (s->name >= p->names_len || strncmp(p->names + s->name, "s.tar:", 6) != 0)
            index_fuzz_fail("its name is not inside the names", i, s);
        if (s->problem == FERRY_SHARD_NO_IMAGE)
            continue;
        if (!p->gzip && (s->img_off > shard_size || s->img_size > shard_size - s->img_off))
            index_fuzz_fail("its image runs past the shard", i, s);
        if (s->img_off > ((uint64_t)1 << 62) || s->img_size > ((uint64_t)1 << 62))
            index_fuzz_fail("its image is past any real shard", i, s);
        if (s->label < -1 || (s->problem == FERRY_SHARD_OK) != (s->label >= 0))
            index_fuzz_fail("its label does not fit its problem", i, s);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ferry_fuzz_quiet();
    if (size < INDEX_HEAD + 4 || size > ((size_t)1 << 20))
        return 0;
    uint8_t *d = malloc(size);
    if (!d)
        return 0;
    memcpy(d, data, size);
    uint64_t shard_size;
    memcpy(&shard_size, d + INDEX_SHARD_SIZE_AT, sizeof shard_size);
    uint32_t crc = (uint32_t)crc32(crc32(0, NULL, 0), d, (uInt)(size - 4));
    memcpy(d + size - 4, &crc, sizeof crc);
    ferry_shard_part p;
    bool found = false;
    if (ferry__shard_index_parse(d, size, "s.tar", shard_size, 0, &p, &found) == FERRY_OK && found) {
        index_fuzz_check(&p, shard_size);
        ferry__shard_part_free(&p);
    }
    free(d);
    return 0;
}

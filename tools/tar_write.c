/* `ferry pack`'s ustar writer: one 512-byte header per member (fields as the
 * POSIX ustar format lays them out), the data, zero padding to the block. */
#include <errno.h>
#include <string.h>

#include "tar_write.h"

#define BLOCK 512
#define RECORD 10240 /* GNU tar's default blocking factor 20 */

uint64_t tar_member_bytes(uint64_t n)
{
    return BLOCK + (n + BLOCK - 1) / BLOCK * BLOCK;
}

uint64_t tar_end_bytes(uint64_t bytes)
{
    uint64_t end = bytes + 2 * BLOCK;
    return (end + RECORD - 1) / RECORD * RECORD - bytes;
}

int tar_out_open(tar_out *t, const char *path)
{
    t->bytes = 0;
    t->f = fopen(path, "wb");
    return t->f ? 0 : -1;
}

static void header(uint8_t *h, const char *name, size_t n)
{
    memset(h, 0, BLOCK);
    strncpy((char *)h, name, 100);                 /* NUL-padded, unterminated at 100 */
    memcpy(h + 100, "0000644", 8);                 /* mode */
    memcpy(h + 108, "0000000", 8);                 /* uid */
    memcpy(h + 116, "0000000", 8);                 /* gid */
    snprintf((char *)h + 124, 12, "%011llo", (unsigned long long)n);
    memcpy(h + 136, "00000000000", 12);            /* mtime: reproducible shards */
    h[156] = '0';                                  /* a regular file */
    static const uint8_t magic[8] = {'u', 's', 't', 'a', 'r', 0, '0', '0'};
    memcpy(h + 257, magic, sizeof magic);           /* POSIX magic and version */
    memset(h + 148, ' ', 8);                       /* the checksum counts itself as spaces */
    unsigned sum = 0;
    for (size_t i = 0; i < BLOCK; i++)
        sum += h[i];
    snprintf((char *)h + 148, 8, "%06o", sum);     /* six digits, NUL, then the space */
}

int tar_out_add(tar_out *t, const char *name, const void *data, size_t n)
{
    static const uint8_t zero[BLOCK];
    /* 8 GiB: the 11 octal digits of the size field; longer names need pax. */
    if (strlen(name) > 100 || (uint64_t)n >= (uint64_t)1 << 33) {
        errno = EINVAL;
        return -1;
    }
    uint8_t h[BLOCK];
    header(h, name, n);
    size_t pad = (BLOCK - n % BLOCK) % BLOCK;
    if (fwrite(h, 1, BLOCK, t->f) != BLOCK || fwrite(data, 1, n, t->f) != n ||
        fwrite(zero, 1, pad, t->f) != pad)
        return -1;
    t->bytes += tar_member_bytes(n);
    return 0;
}

int tar_out_close(tar_out *t)
{
    static const uint8_t zero[BLOCK];
    int rc = 0;
    for (uint64_t left = tar_end_bytes(t->bytes); left > 0 && rc == 0; left -= BLOCK)
        rc = fwrite(zero, 1, BLOCK, t->f) == BLOCK ? 0 : -1;
    int e = errno;
    if (fclose(t->f) != 0 && rc == 0) {
        e = errno;
        rc = -1;
    }
    t->f = NULL;
    errno = e;
    return rc;
}

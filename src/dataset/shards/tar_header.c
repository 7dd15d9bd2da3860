/* One tar header block and pax records, parsed without trusting anything: the
 * numbers are bounded, the strings are not assumed to be NUL-terminated. Field
 * offsets are those of the POSIX ustar header. */
#include <string.h>

#include "common/error.h"
#include "dataset/shards/tar.h"

enum {
    OFF_NAME = 0, LEN_NAME = 100,
    OFF_SIZE = 124, LEN_SIZE = 12,
    OFF_CHKSUM = 148, LEN_CHKSUM = 8,
    OFF_TYPE = 156,
    OFF_MAGIC = 257,
    OFF_PREFIX = 345, LEN_PREFIX = 155,
};

bool ferry__tar_is_zero_block(const uint8_t *b)
{
    for (size_t i = 0; i < FERRY_TAR_BLOCK; i++)
        if (b[i])
            return false;
    return true;
}

/* An octal field: optional leading spaces, digits, then space or NUL to the end.
 * An empty field is 0 (some writers leave unused fields blank). */
static bool parse_octal(const uint8_t *f, size_t n, uint64_t *out)
{
    size_t i = 0;
    uint64_t v = 0;
    while (i < n && f[i] == ' ')
        i++;
    for (; i < n && f[i] >= '0' && f[i] <= '7'; i++) {
        if (v >> 61)
            return false; /* the next digit would overflow 64 bits */
        v = v * 8 + (uint64_t)(f[i] - '0');
    }
    for (; i < n; i++)
        if (f[i] != ' ' && f[i] != '\0')
            return false;
    *out = v;
    return true;
}

/* A number field: octal, or GNU's base-256 (first byte 0x80, then big-endian
 * bytes) for values that do not fit; 0xff (negative) is refused. */
static bool parse_number(const uint8_t *f, size_t n, uint64_t *out)
{
    if (!(f[0] & 0x80))
        return parse_octal(f, n, out);
    if (f[0] != 0x80)
        return false;
    uint64_t v = 0;
    for (size_t i = 1; i < n; i++) {
        if (v >> 56)
            return false;
        v = (v << 8) | f[i];
    }
    *out = v;
    return true;
}

static ferry_status check_sum(const uint8_t *b)
{
    uint64_t stored;
    if (!parse_octal(b + OFF_CHKSUM, LEN_CHKSUM, &stored))
        return ferry_fail(FERRY_ERR_FORMAT, "header checksum field is not an octal number "
                          "(not a tar header)");
    /* The sum of the block with the checksum field read as spaces. Old writers
     * summed signed chars, so either sum is accepted, as GNU tar does. */
    uint64_t usum = 0;
    int64_t ssum = 0;
    for (size_t i = 0; i < FERRY_TAR_BLOCK; i++) {
        uint8_t c = i >= OFF_CHKSUM && i < OFF_CHKSUM + LEN_CHKSUM ? ' ' : b[i];
        usum += c;
        ssum += (int8_t)c;
    }
    if (stored == usum || (ssum >= 0 && stored == (uint64_t)ssum))
        return FERRY_OK;
    return ferry_fail(FERRY_ERR_FORMAT, "bad header checksum (stored %llo, computed %llo): "
                      "the shard is corrupt or not a tar file",
                      (unsigned long long)stored, (unsigned long long)usum);
}

static ferry_tar_kind kind_of(char t)
{
    switch (t) {
    case '0': case '\0': case '7': return FERRY_TAR_FILE;
    case '5': return FERRY_TAR_DIR;
    case '1': return FERRY_TAR_HARDLINK;
    case '2': return FERRY_TAR_SYMLINK;
    case '3': case '4': return FERRY_TAR_DEVICE;
    case '6': return FERRY_TAR_FIFO;
    case 'x': return FERRY_TAR_PAX;
    case 'g': return FERRY_TAR_PAX_GLOBAL;
    case 'L': return FERRY_TAR_LONGNAME;
    case 'K': return FERRY_TAR_LONGLINK;
    default: return FERRY_TAR_OTHER;
    }
}

static size_t field_len(const uint8_t *f, size_t n)
{
    const uint8_t *z = memchr(f, 0, n);
    return z ? (size_t)(z - f) : n;
}

ferry_status ferry__tar_header_parse(const uint8_t *b, ferry_tar_header *out)
{
    ferry_status st = check_sum(b);
    if (st != FERRY_OK)
        return st;
    if (!parse_number(b + OFF_SIZE, LEN_SIZE, &out->size))
        return ferry_fail(FERRY_ERR_FORMAT, "the size field is not a number");
    out->type = (char)b[OFF_TYPE];
    out->kind = kind_of(out->type);
    /* POSIX ustar ("ustar\0") splits long names into prefix "/" name. GNU's
     * own format ("ustar  \0") keeps other data in the prefix's place. */
    size_t np = 0, nn = field_len(b + OFF_NAME, LEN_NAME);
    if (!memcmp(b + OFF_MAGIC, "ustar\0", 6))
        np = field_len(b + OFF_PREFIX, LEN_PREFIX);
    size_t k = 0;
    if (np) {
        memcpy(out->name, b + OFF_PREFIX, np);
        k = np;
        out->name[k++] = '/';
    }
    memcpy(out->name + k, b + OFF_NAME, nn);
    out->name[k + nn] = '\0';
    return FERRY_OK;
}

/* A decimal number of n bytes, digits only. */
static bool parse_decimal(const uint8_t *s, size_t n, uint64_t *out)
{
    uint64_t v = 0;
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9' || v > (UINT64_MAX - 9) / 10)
            return false;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    *out = v;
    return true;
}

ferry_status ferry__tar_pax_parse(const uint8_t *rec, size_t n, ferry_tar_pax *out)
{
    memset(out, 0, sizeof *out);
    size_t at = 0;
    while (at < n) {
        /* Writers pad the records' block with NULs. */
        if (rec[at] == '\0')
            break;
        const uint8_t *sp = memchr(rec + at, ' ', n - at);
        uint64_t len = 0;
        if (!sp || !parse_decimal(rec + at, (size_t)(sp - rec - at), &len) || len == 0 || len > n - at ||
            rec[at + len - 1] != '\n' || (size_t)(sp - rec) + 1 >= at + len)
            return ferry_fail(FERRY_ERR_FORMAT, "malformed pax record at byte %zu of the "
                              "extended header", at);
        const uint8_t *key = sp + 1, *end = rec + at + len - 1; /* end: the '\n' */
        const uint8_t *eq = memchr(key, '=', (size_t)(end - key));
        if (!eq)
            return ferry_fail(FERRY_ERR_FORMAT, "pax record at byte %zu of the extended header "
                              "has no '='", at);
        size_t klen = (size_t)(eq - key), vlen = (size_t)(end - eq - 1);
        if (klen == 4 && !memcmp(key, "path", 4)) {
            out->path = (const char *)eq + 1;
            out->path_len = vlen;
        } else if (klen == 4 && !memcmp(key, "size", 4)) {
            if (!parse_decimal(eq + 1, vlen, &out->size))
                return ferry_fail(FERRY_ERR_FORMAT, "pax size record at byte %zu of the extended "
                                  "header is not a number", at);
            out->has_size = true;
        }
        at += (size_t)len;
    }
    return FERRY_OK;
}

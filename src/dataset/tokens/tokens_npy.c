/* NumPy's .npy header (format versions 1, 2 and 3): the magic, the header's
 * length, and its Python dict literal of 'descr', 'fortran_order' and
 * 'shape'. Kept to this one file: a small parser of an untrusted header
 * (bounded lengths, no evaluation), not a general reader of Python literals. */
#include <string.h>

#include "common/error.h"
#include "dataset/tokens/tokens.h"

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAX_HEADER ((size_t)60000) /* within FERRY_TOK_HEAD_BYTES */

/* The value after 'key': in the dict, or NULL. */
static const char *find_key(const char *h, size_t n, const char *key)
{
    size_t k = strlen(key);
    for (size_t i = 0; i + k + 2 <= n; i++) {
        if ((h[i] == '\'' || h[i] == '"') && !memcmp(h + i + 1, key, k) && h[i + 1 + k] == h[i]) {
            const char *p = h + i + k + 2;
            while (p < h + n && (*p == ' ' || *p == ':'))
                p++;
            return p < h + n ? p : NULL;
        }
    }
    return NULL;
}

static ferry_status parse_descr(const char *p, const char *end, const char *name,
                                ferry_tok_npy_info *out)
{
    if (p + 5 > end || (p[0] != '\'' && p[0] != '"'))
        return ferry_fail_at(FERRY_ERR_FORMAT, name, ".npy: 'descr' is not a simple dtype string");
    char order = p[1], kind = p[2];
    size_t bytes = 0;
    const char *q = p + 3;
    while (q < end && *q >= '0' && *q <= '9' && bytes < 100)
        bytes = bytes * 10 + (size_t)(*q++ - '0');
    if (q >= end || *q != p[0] || !bytes)
        return ferry_fail_at(FERRY_ERR_FORMAT, name, ".npy: 'descr' is not a simple dtype string");
    if (order == '>' && bytes > 1)
        return ferry_fail_at(FERRY_ERR_UNSUPPORTED, name, ".npy: big-endian dtype '%c%c%zu' (save "
                             "it little-endian: arr.astype('<u2'))", order, kind, bytes);
    if (order != '<' && order != '|' && order != '=')
        return ferry_fail_at(FERRY_ERR_FORMAT, name, ".npy: 'descr' byte order '%c'", order);
    out->kind = kind;
    out->item_bytes = bytes;
    return FERRY_OK;
}

static ferry_status parse_shape(const char *p, const char *end, const char *name,
                                ferry_tok_npy_info *out)
{
    if (p >= end || *p != '(')
        return ferry_fail_at(FERRY_ERR_FORMAT, name, ".npy: 'shape' is not a tuple");
    out->ndim = 0;
    for (p++; p < end && *p != ')';) {
        if (*p == ' ' || *p == ',') {
            p++;
            continue;
        }
        if (*p < '0' || *p > '9' || out->ndim == 8)
            return ferry_fail_at(FERRY_ERR_FORMAT, name, ".npy: 'shape' is not a tuple of at "
                                 "most 8 sizes");
        uint64_t v = 0;
        for (; p < end && *p >= '0' && *p <= '9'; p++) {
            if (v > (UINT64_MAX - 9) / 10)
                return ferry_fail_at(FERRY_ERR_FORMAT, name, ".npy: a size in 'shape' overflows");
            v = v * 10 + (uint64_t)(*p - '0');
        }
        out->shape[out->ndim++] = v;
    }
    if (p >= end)
        return ferry_fail_at(FERRY_ERR_FORMAT, name, ".npy: 'shape' is not closed");
    return FERRY_OK;
}

static ferry_status header_span(const uint8_t *head, size_t n, const char *name, size_t *hoff,
                                size_t *hlen)
{
    if (n < 10 || memcmp(head, NPY_MAGIC, 6) != 0)
        return ferry_fail_at(FERRY_ERR_FORMAT, name, "not a .npy file (no \\x93NUMPY magic)");
    unsigned major = head[6];
    if (major == 1) {
        *hoff = 10;
        *hlen = (size_t)head[8] | (size_t)head[9] << 8;
    } else if (major == 2 || major == 3) {
        if (n < 12)
            return ferry_fail_at(FERRY_ERR_FORMAT, name, ".npy: truncated header");
        *hoff = 12;
        *hlen = (size_t)head[8] | (size_t)head[9] << 8 | (size_t)head[10] << 16 |
                (size_t)head[11] << 24;
    } else {
        return ferry_fail_at(FERRY_ERR_UNSUPPORTED, name, ".npy: format version %u.%u (1 to 3 "
                             "are read)", major, head[7]);
    }
    if (*hlen > NPY_MAX_HEADER || *hlen > n - *hoff)
        return ferry_fail_at(FERRY_ERR_FORMAT, name, ".npy: a header of %zu bytes (the file "
                             "has %zu after the magic; at most %zu read)", *hlen, n - *hoff,
                             NPY_MAX_HEADER);
    return FERRY_OK;
}

ferry_status ferry__tok_npy_parse(const uint8_t *head, size_t n, uint64_t size,
                                  const char *name, ferry_tok_npy_info *out)
{
    memset(out, 0, sizeof *out);
    size_t hoff = 0, hlen = 0;
    ferry_status st = header_span(head, n, name, &hoff, &hlen);
    if (st != FERRY_OK)
        return st;
    const char *h = (const char *)head + hoff, *end = h + hlen;
    const char *d = find_key(h, hlen, "descr"), *f = find_key(h, hlen, "fortran_order"),
               *s = find_key(h, hlen, "shape");
    if (!d || !f || !s)
        return ferry_fail_at(FERRY_ERR_FORMAT, name, ".npy: the header lacks 'descr', "
                             "'fortran_order' or 'shape'");
    if ((st = parse_descr(d, end, name, out)) != FERRY_OK ||
        (st = parse_shape(s, end, name, out)) != FERRY_OK)
        return st;
    out->fortran_order = (size_t)(end - f) >= 4 && !memcmp(f, "True", 4);
    out->data_off = hoff + hlen;
    uint64_t items = 1;
    for (size_t i = 0; i < out->ndim; i++) {
        if (out->shape[i] && items > UINT64_MAX / out->shape[i])
            return ferry_fail_at(FERRY_ERR_FORMAT, name, ".npy: the shape's size overflows");
        items *= out->shape[i];
    }
    uint64_t room = size - out->data_off;
    if (items > room / out->item_bytes || items * out->item_bytes != room)
        return ferry_fail_at(FERRY_ERR_FORMAT, name, ".npy: the shape says %llu items of %zu "
                             "bytes, the file holds %llu bytes after its header (%s)",
                             (unsigned long long)items, out->item_bytes, (unsigned long long)room,
                             items > room / out->item_bytes ? "truncated" : "trailing bytes");
    return FERRY_OK;
}

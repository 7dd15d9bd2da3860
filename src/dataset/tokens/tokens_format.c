/* Where a token file's tokens are: llm.c's header (256 little-endian int32:
 * magic, version, token count, then zeros), a .npy array, or no header at
 * all. Every header is untrusted: the magic and version are named when they
 * are wrong, and the count must be what the file's size holds. */
#include <string.h>

#include "common/error.h"
#include "dataset/tokens/tokens.h"

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static ferry_status llmc(const uint8_t *head, size_t n, uint64_t size, const char *name,
                         ferry_tok_header *out)
{
    if (n < FERRY_TOKENS_LLMC_HEADER_BYTES)
        return ferry_fail_at(FERRY_ERR_FORMAT, name, "%llu bytes: shorter than llm.c's %d-byte "
                             "header", (unsigned long long)size, FERRY_TOKENS_LLMC_HEADER_BYTES);
    uint32_t magic = le32(head), version = le32(head + 4), count = le32(head + 8);
    if (magic == FERRY_TOKENS_LLMC_MAGIC_U16 && version == 1)
        out->token_bytes = 2;
    else if (magic == FERRY_TOKENS_LLMC_MAGIC_U32 && version == 7)
        out->token_bytes = 4;
    else if (magic == FERRY_TOKENS_LLMC_MAGIC_U16 || magic == FERRY_TOKENS_LLMC_MAGIC_U32)
        return ferry_fail_at(FERRY_ERR_FORMAT, name, "llm.c magic %u with version %u (%u goes "
                             "with version %d)", magic, version, magic,
                             magic == FERRY_TOKENS_LLMC_MAGIC_U16 ? 1 : 7);
    else
        return ferry_fail_at(FERRY_ERR_FORMAT, name, "magic %u is not llm.c's (%d for uint16 "
                             "tokens, %d for uint32); a headerless file needs format RAW",
                             magic, FERRY_TOKENS_LLMC_MAGIC_U16, FERRY_TOKENS_LLMC_MAGIC_U32);
    uint64_t room = (size - FERRY_TOKENS_LLMC_HEADER_BYTES) / out->token_bytes;
    if (count != room || (size - FERRY_TOKENS_LLMC_HEADER_BYTES) % out->token_bytes)
        return ferry_fail_at(FERRY_ERR_FORMAT, name, "the header says %u tokens of %zu bytes, "
                             "the file holds %llu bytes after it (%s)", count, out->token_bytes,
                             (unsigned long long)(size - FERRY_TOKENS_LLMC_HEADER_BYTES),
                             count > room ? "truncated" : "trailing bytes");
    out->data_off = FERRY_TOKENS_LLMC_HEADER_BYTES;
    out->count = count;
    return FERRY_OK;
}

static ferry_status npy(const uint8_t *head, size_t n, uint64_t size, const char *name,
                        ferry_tok_header *out)
{
    ferry_tok_npy_info ni;
    ferry_status st = ferry__tok_npy_parse(head, n, size, name, &ni);
    if (st != FERRY_OK)
        return st;
    if (ni.ndim != 1)
        return ferry_fail_at(FERRY_ERR_FORMAT, name, ".npy: %zu dimensions (tokens are one "
                             "dimension)", ni.ndim);
    bool ok = (ni.kind == 'u' && (ni.item_bytes == 2 || ni.item_bytes == 4)) ||
              (ni.kind == 'i' && ni.item_bytes == 4);
    if (!ok)
        return ferry_fail_at(FERRY_ERR_UNSUPPORTED, name, ".npy: dtype %c%zu (tokens are <u2, "
                             "<u4 or <i4)", ni.kind, ni.item_bytes);
    out->data_off = ni.data_off;
    out->count = ni.shape[0];
    out->token_bytes = ni.item_bytes;
    return FERRY_OK;
}

static ferry_status raw(uint64_t size, size_t raw_bytes, const char *name, ferry_tok_header *out)
{
    size_t b = raw_bytes ? raw_bytes : 2;
    if (b != 2 && b != 4)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "raw_token_bytes is %zu (2 or 4)", raw_bytes);
    if (size % b)
        return ferry_fail_at(FERRY_ERR_FORMAT, name, "%llu bytes is not a whole number of "
                             "%zu-byte tokens", (unsigned long long)size, b);
    out->data_off = 0;
    out->count = size / b;
    out->token_bytes = b;
    return FERRY_OK;
}

ferry_status ferry__tok_header_parse(const uint8_t *head, size_t n, uint64_t size,
                                     ferry_token_format fmt, size_t raw_bytes, const char *name,
                                     ferry_tok_header *out)
{
    memset(out, 0, sizeof *out);
    if (fmt == FERRY_TOKENS_AUTO)
        fmt = n >= 6 && !memcmp(head, "\x93NUMPY", 6) ? FERRY_TOKENS_NPY : FERRY_TOKENS_LLMC;
    switch (fmt) {
    case FERRY_TOKENS_LLMC: return llmc(head, n, size, name, out);
    case FERRY_TOKENS_NPY: return npy(head, n, size, name, out);
    case FERRY_TOKENS_RAW: return raw(size, raw_bytes, name, out);
    default: return ferry_fail(FERRY_ERR_INVALID_ARG, "format %d is not a ferry_token_format",
                               (int)fmt);
    }
}

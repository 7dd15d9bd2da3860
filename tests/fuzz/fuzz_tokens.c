/* Fuzz target: token files' headers (src/dataset/tokens/tokens_format.c and
 * tokens_npy.c), llm.c's and .npy's, as ferry_tokens_open reads them: the
 * input is the file's first bytes and the whole file. When a header parses,
 * its tokens must lie inside the file, and the best-fit packing of
 * documents cut from them (input bytes as lengths) must place every token. */
#include "dataset/tokens/tokens.h"
#include "fuzz.h"

static void fuzz_tokens_pack(const uint8_t *data, size_t size)
{
    size_t n = size < 64 ? size : 64, order[64];
    ferry_tok_doc docs[64];
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        docs[i] = (ferry_tok_doc){.off = 0, .len = (uint64_t)data[i] + 1, .shard = 0};
        total += docs[i].len;
    }
    ferry__tok_order(size, order, n);
    ferry_tok_rows r;
    size_t cap = size ? (size_t)data[0] % 40 + 1 : 1;
    if (ferry__tok_pack(docs, order, n, cap, (size % 7) + 1, &r) != FERRY_OK)
        return;
    uint64_t placed = 0;
    for (size_t p = 0; p < r.npieces; p++)
        placed += r.pieces[p].len;
    if (placed + r.cropped != total || placed + r.padded != (uint64_t)r.nrows * cap) {
        fprintf(stderr, "fuzz_tokens: %llu placed, %llu cropped, %llu padded of %llu in %zu "
                "rows of %zu\n", (unsigned long long)placed, (unsigned long long)r.cropped,
                (unsigned long long)r.padded, (unsigned long long)total, r.nrows, cap);
        abort();
    }
    ferry__tok_rows_free(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ferry_fuzz_quiet();
    ferry_tok_header h;
    size_t head = size < FERRY_TOK_HEAD_BYTES ? size : FERRY_TOK_HEAD_BYTES;
    if (ferry__tok_header_parse(data, head, size, FERRY_TOKENS_AUTO, 0, "fuzz.bin", &h) ==
        FERRY_OK) {
        if (h.data_off > size || h.count > (size - h.data_off) / h.token_bytes) {
            fprintf(stderr, "fuzz_tokens: %llu tokens at %llu outside %zu bytes\n",
                    (unsigned long long)h.count, (unsigned long long)h.data_off, size);
            abort();
        }
        volatile uint8_t sum = 0; /* touch every byte the header says is a token */
        for (uint64_t i = 0; i < h.count * h.token_bytes; i++)
            sum ^= data[h.data_off + i];
        (void)sum;
    }
    fuzz_tokens_pack(data, size);
    return 0;
}

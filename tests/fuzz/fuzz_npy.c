/* Fuzz target: the NPY parser (src/dataset/fields/npy.c), the header of every
 * .npy member of a shard. When a file parses, its data must lie inside it. */
#include "dataset/fields/npy.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ferry_fuzz_quiet();
    ferry_npy a;
    if (ferry__npy_parse(data, size, "fuzz.npy", &a) == FERRY_OK) {
        if (a.data_off > size || a.data_bytes != size - a.data_off) {
            fprintf(stderr, "fuzz_npy: data [%zu, +%zu) outside %zu bytes\n", a.data_off,
                    a.data_bytes, size);
            abort();
        }
        volatile uint8_t sum = 0; /* touch every byte the parser says is data */
        for (size_t i = 0; i < a.data_bytes; i++)
            sum ^= data[a.data_off + i];
        (void)sum;
    }
    return 0;
}

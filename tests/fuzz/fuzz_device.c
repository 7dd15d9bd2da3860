/* Fuzz target: device strings (ferry_device_parse), as a NUL-terminated copy of
 * the input; a parsed device must format and parse back to itself. */
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ferry_fuzz_quiet();
    char *s = malloc(size + 1);
    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    ferry_device d, d2;
    ferry_status st = ferry_device_parse(s, &d);
    if (st == FERRY_OK) {
        char buf[FERRY_DEVICE_NAME_MAX];
        const char *name = ferry_device_format(d, buf, sizeof buf);
        if (!name || ferry_device_parse(name, &d2) != FERRY_OK || !ferry_device_eq(d, d2)) {
            fprintf(stderr, "fuzz_device: \"%s\" does not round-trip (\"%s\")\n", s,
                    name ? name : "(null)");
            abort();
        }
    } else if (st != FERRY_ERR_INVALID_ARG && st != FERRY_ERR_NO_DEVICE) {
        fprintf(stderr, "fuzz_device: \"%s\": unexpected %s\n", s, ferry_status_str(st));
        abort();
    } else if (!ferry_last_error()[0]) {
        fprintf(stderr, "fuzz_device: \"%s\": %s without a message\n", s, ferry_status_str(st));
        abort();
    }
    free(s);
    return 0;
}

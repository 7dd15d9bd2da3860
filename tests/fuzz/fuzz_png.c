/* Fuzz target: PNG decoding (ferry_png_info, ferry_image_format, ferry_png_decode)
 * under small limits, with the default config and with a fixed-size RGB config
 * that resizes, composites alpha and writes HWC, with and without a scratch. */
#include "fuzz.h"

static ferry_scratch *png_fuzz_scratch;

static void png_fuzz_one(const uint8_t *data, size_t n, const ferry_image_config *cfg,
                         ferry_scratch *scratch)
{
    ferry_image_info info;
    if (ferry_png_info(data, n, &info) != FERRY_OK)
        return;
    ferry_sample_format fmt;
    if (ferry_image_format(cfg, &info, &fmt) != FERRY_OK)
        return;
    size_t bytes = ferry_sample_format_bytes(&fmt);
    if (bytes == 0 || bytes > ((size_t)4 << 20))
        return; /* the decode would refuse it by its limits anyway */
    uint8_t *dst = malloc(bytes);
    if (!dst)
        return;
    ferry_status st = ferry_png_decode(data, n, cfg, scratch, "fuzz.png", dst, bytes);
    if (st == FERRY_OK) {
        /* Touch every output byte: MSan/valgrind-style use of uninitialised output. */
        unsigned sum = 0;
        for (size_t i = 0; i < bytes; i++)
            sum += dst[i];
        if (sum == 0xffffffffu)
            fputc('\0', stderr);
    } else if (!ferry_last_error()[0]) {
        fprintf(stderr, "fuzz_png: %s without a message\n", ferry_status_str(st));
        abort();
    }
    /* A too-small output buffer is always refused. */
    if (bytes > 1 && ferry_png_decode(data, n, cfg, scratch, NULL, dst, bytes - 1) == FERRY_OK) {
        fprintf(stderr, "fuzz_png: decode into %zu of %zu bytes succeeded\n", bytes - 1, bytes);
        abort();
    }
    free(dst);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ferry_fuzz_quiet();
    if (!png_fuzz_scratch && ferry_scratch_create(&png_fuzz_scratch) != FERRY_OK)
        return 0;
    ferry_image_config cfg = ferry_image_config_default();
    cfg.limits.max_width = 1024;
    cfg.limits.max_height = 1024;
    cfg.limits.max_pixels = 256 * 1024;
    cfg.limits.max_file_bytes = 1 << 20;
    cfg.limits.max_chunk_bytes = 256 << 10;
    png_fuzz_one(data, size, &cfg, png_fuzz_scratch);

    ferry_image_config rgb = cfg;
    rgb.channels = 3;
    rgb.height = 7;
    rgb.width = 5;
    rgb.layout = FERRY_LAYOUT_HWC;
    rgb.alpha_composite = true;
    rgb.background[0] = 10;
    png_fuzz_one(data, size, &rgb, NULL);

    ferry_image_config crop = cfg;
    crop.channels = 1;
    crop.height = 9;
    crop.width = 3;
    crop.resize = FERRY_RESIZE_CENTER_CROP;
    png_fuzz_one(data, size, &crop, png_fuzz_scratch);
    return 0;
}

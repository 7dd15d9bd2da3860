/* Fuzz target: PNG decoding (ferry_png_info, ferry_image_format, ferry_png_decode)
 * under small limits, with the default config and with a fixed-size RGB config
 * that resizes, composites alpha and writes HWC, with and without a scratch. */
#include "fuzz.h"

static ferry_scratch *png_fuzz_scratch;

static void png_fuzz_one(const uint8_t *data, size_t n, const ferry_image_config *cfg,
                         ferry_scratch *scratch)
{
    ferry_fuzz_image_one("fuzz_png", ferry_png_info, ferry_png_decode, "fuzz.png", data, n, cfg, scratch);
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

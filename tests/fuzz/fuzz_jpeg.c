/* Fuzz target: JPEG decoding (ferry_jpeg_info, ferry_image_format,
 * ferry_jpeg_decode) under small limits: gray at the native size through a
 * kept scratch (the decompressor reused after every error), fixed-size RGB HWC
 * resized with the EXIF orientation applied without a scratch, and a centre
 * crop. Any status but OK must come with a message; a too-small output buffer
 * is always refused. */
#include "fuzz.h"

static ferry_scratch *jpeg_fuzz_scratch;

static void jpeg_fuzz_one(const uint8_t *data, size_t n, const ferry_image_config *cfg,
                         ferry_scratch *scratch)
{
    ferry_fuzz_image_one("fuzz_jpeg", ferry_jpeg_info, ferry_jpeg_decode, "fuzz.jpg", data, n, cfg, scratch);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ferry_fuzz_quiet();
    if (!jpeg_fuzz_scratch && ferry_scratch_create(&jpeg_fuzz_scratch) != FERRY_OK)
        return 0;
    ferry_image_config cfg = ferry_image_config_default();
    cfg.limits.max_width = 1024;
    cfg.limits.max_height = 1024;
    cfg.limits.max_pixels = 256 * 1024;
    cfg.limits.max_file_bytes = 1 << 20;
    cfg.channels = 1;
    jpeg_fuzz_one(data, size, &cfg, jpeg_fuzz_scratch);

    ferry_image_config rgb = cfg;
    rgb.channels = 3;
    rgb.height = 7;
    rgb.width = 5;
    rgb.layout = FERRY_LAYOUT_HWC;
    rgb.exif_orientation = true;
    jpeg_fuzz_one(data, size, &rgb, NULL);

    ferry_image_config crop = cfg;
    crop.channels = 3;
    crop.height = 9;
    crop.width = 3;
    crop.resize = FERRY_RESIZE_CENTER_CROP;
    jpeg_fuzz_one(data, size, &crop, jpeg_fuzz_scratch);
    return 0;
}

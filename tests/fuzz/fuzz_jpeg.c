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
    ferry_image_info info;
    if (ferry_jpeg_info(data, n, &info) != FERRY_OK)
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
    ferry_status st = ferry_jpeg_decode(data, n, cfg, scratch, "fuzz.jpg", dst, bytes);
    if (st == FERRY_OK) {
        unsigned sum = 0; /* touch every output byte */
        for (size_t i = 0; i < bytes; i++)
            sum += dst[i];
        if (sum == 0xffffffffu)
            fputc('\0', stderr);
    } else if (!ferry_last_error()[0]) {
        fprintf(stderr, "fuzz_jpeg: %s without a message\n", ferry_status_str(st));
        abort();
    }
    if (bytes > 1 && ferry_jpeg_decode(data, n, cfg, scratch, NULL, dst, bytes - 1) == FERRY_OK) {
        fprintf(stderr, "fuzz_jpeg: decode into %zu of %zu bytes succeeded\n", bytes - 1, bytes);
        abort();
    }
    free(dst);
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

/* Fuzz target: JPEG decoding (ferry_jpeg_info, ferry_image_format,
 * ferry_jpeg_decode) under small limits: gray at the native size through a
 * kept scratch (the decompressor reused after every error), fixed-size RGB HWC
 * resized with the EXIF orientation applied without a scratch, and a centre
 * crop; and RandomResizedCrop's crop path (only the box's rows and columns,
 * at a reduced DCT scale or at full scale) on boxes drawn from the input's own
 * hash, so that they land anywhere in the image. Any status but OK must come
 * with a message; a too-small output buffer is always refused. */
#include "dataset/image/image.h" /* the crop path, with a box drawn from an rng */
#include "ferry/rng.h"
#include "fuzz.h"

static ferry_scratch *jpeg_fuzz_scratch;

static void jpeg_fuzz_one(const uint8_t *data, size_t n, const ferry_image_config *cfg,
                         ferry_scratch *scratch)
{
    ferry_fuzz_image_one("fuzz_jpeg", ferry_jpeg_info, ferry_jpeg_decode, "fuzz.jpg", data, n, cfg, scratch);
}

/* The crop path with a random box into a side x side RGB output, at reduced
 * scales or (full) at full scale, through the kept scratch. */
static void jpeg_fuzz_rrc(const uint8_t *data, size_t n, const ferry_image_config *base,
                          size_t side, bool full, ferry_scratch *scratch)
{
    ferry_image_config cfg = *base, checked;
    cfg.channels = 3;
    cfg.layout = FERRY_LAYOUT_HWC;
    cfg.crop = FERRY_CROP_RANDOM_RESIZED;
    cfg.width = cfg.height = side;
    cfg.crop_full_scale = full;
    ferry_image_info info;
    ferry_sample_format fmt;
    if (ferry__image_config_check(&cfg, &checked) != FERRY_OK ||
        ferry_jpeg_info(data, n, &info) != FERRY_OK ||
        ferry_image_format(&checked, &info, &fmt) != FERRY_OK)
        return;
    uint64_t h = 1469598103934665603ull; /* FNV-1a of the input: its own box */
    for (size_t i = 0; i < n; i++)
        h = (h ^ data[i]) * 1099511628211ull;
    ferry_rng r;
    ferry_rng_init(&r, h, FERRY_RNG_AUGMENT, side);
    uint8_t dst[48 * 48 * 3];
    ferry_status st = ferry__image_decode_crop(data, n, &checked, &fmt, scratch, "fuzz.jpg", dst,
                                               &r, NULL);
    if (st != FERRY_OK && !ferry_last_error()[0]) {
        fprintf(stderr, "fuzz_jpeg: crop %zu%s: %s without a message\n", side, full ? " (full scale)" : "",
                ferry_status_str(st));
        abort();
    }
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

    /* 8: most boxes of a fuzzed image decode at 1/8 to 1/2; 48: at full scale. */
    jpeg_fuzz_rrc(data, size, &cfg, 8, false, jpeg_fuzz_scratch);
    jpeg_fuzz_rrc(data, size, &cfg, 48, false, jpeg_fuzz_scratch);
    jpeg_fuzz_rrc(data, size, &cfg, 8, true, jpeg_fuzz_scratch);
    return 0;
}

/* Fuzz target: IDX parsing (ferry_dataset_idx; there is no in-memory API, so the
 * input is written to two files). Input layout: 2 bytes little-endian L, then L
 * bytes of the labels file, then the images file. When the pair loads, a few
 * samples are decoded natively and resized to 3x6x4 HWC. */
#include "fuzz.h"

static void idx_fuzz_get_some(ferry_dataset *ds)
{
    size_t len = ferry_dataset_len(ds), bytes = ferry_dataset_sample_bytes(ds);
    if (bytes == 0 || bytes > ((size_t)4 << 20))
        return;
    uint8_t *dst = malloc(bytes);
    if (!dst)
        return;
    ferry_sample_ctx ctx = {.seed = 1, .epoch = 2, .train = true};
    for (size_t i = 0; i < len && i < 3; i++) {
        int64_t label = -1, label2 = -2;
        size_t idx = i == 2 ? len - 1 : i;
        if (ferry_dataset_get(ds, idx, dst, bytes, &ctx, &label) == FERRY_OK &&
            ferry_dataset_label(ds, idx, &label2) == FERRY_OK && label != label2) {
            fprintf(stderr, "fuzz_idx: sample %zu: label %lld from get, %lld from label\n", idx,
                    (long long)label, (long long)label2);
            abort();
        }
    }
    free(dst);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ferry_fuzz_quiet();
    if (size < 2)
        return 0;
    size_t ln = (size_t)data[0] | (size_t)data[1] << 8;
    if (ln > size - 2)
        ln = size - 2;
    char ip[320], lp[320];
    ferry_fuzz_write("labels.idx", data + 2, ln, lp, sizeof lp);
    ferry_fuzz_write("images.idx", data + 2 + ln, size - 2 - ln, ip, sizeof ip);

    ferry_dataset *ds = NULL;
    if (ferry_dataset_idx(ip, lp, NULL, &ds) == FERRY_OK) {
        idx_fuzz_get_some(ds);
        ferry_dataset_release(ds);
    }
    ferry_image_config cfg = ferry_image_config_default();
    cfg.channels = 3;
    cfg.height = 6;
    cfg.width = 4;
    cfg.layout = FERRY_LAYOUT_HWC;
    cfg.random_hflip = true;
    cfg.random_crop_pad = 2;
    if (ferry_dataset_idx(ip, lp, &cfg, &ds) == FERRY_OK) {
        idx_fuzz_get_some(ds);
        ferry_dataset_release(ds);
    }
    return 0;
}

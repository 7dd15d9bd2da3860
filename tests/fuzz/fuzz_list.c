/* Fuzz target: list-file parsing (ferry_dataset_list_file on the input written to
 * a file). Two small PNGs, a.png and b.png, lie beside the list, so lists naming
 * them load; the first few samples are read (regular files only, small limit). */
#include "fuzz.h"

static void list_fuzz_fixtures(void)
{
    static int done;
    if (done)
        return;
    done = 1;
    char p[320];
    uint8_t px[4 * 4 * 3];
    for (size_t i = 0; i < sizeof px; i++)
        px[i] = (uint8_t)(i * 37);
    ferry_fuzz_write("a.png", "", 0, p, sizeof p);
    if (ferry_png_save(p, px, 4, 4, 1) != FERRY_OK)
        abort();
    ferry_fuzz_write("b.png", "", 0, p, sizeof p);
    if (ferry_png_save(p, px, 4, 4, 3) != FERRY_OK)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ferry_fuzz_quiet();
    list_fuzz_fixtures();
    char lp[320];
    ferry_fuzz_write("list.txt", data, size, lp, sizeof lp);
    ferry_image_config cfg = ferry_image_config_default();
    cfg.channels = 1;
    cfg.height = 4;
    cfg.width = 4;
    cfg.limits.max_file_bytes = 64 << 10;
    ferry_dataset *ds = NULL;
    if (ferry_dataset_list_file(lp, &cfg, &ds) != FERRY_OK)
        return 0;
    size_t len = ferry_dataset_len(ds), bytes = ferry_dataset_sample_bytes(ds);
    uint8_t dst[16];
    if (len == 0 || bytes != sizeof dst) {
        fprintf(stderr, "fuzz_list: %zu samples of %zu bytes\n", len, bytes);
        abort();
    }
    for (size_t i = 0; i < len && i < 4; i++) {
        int64_t label = -1;
        const char *name = ferry_dataset_sample_name(ds, i);
        if (!name || ferry_dataset_label(ds, i, &label) != FERRY_OK || label < 0 ||
            (size_t)label >= ferry_dataset_class_count(ds)) {
            fprintf(stderr, "fuzz_list: sample %zu: name %s, label %lld of %zu classes\n", i,
                    name ? name : "(null)", (long long)label, ferry_dataset_class_count(ds));
            abort();
        }
        (void)ferry_dataset_get(ds, i, dst, sizeof dst, NULL, &label);
    }
    ferry_dataset_release(ds);
    return 0;
}

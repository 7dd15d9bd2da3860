/* A dataset of PNG files with labels: the shared core of image-folder and
 * list-file. get() reads the file into the caller's scratch, decodes it straight
 * into dst and applies the augmentations; it touches no shared mutable state. */
#include <stdio.h>
#include <string.h>

#include "common/error.h"
#include "dataset/internal.h"

typedef struct image_files {
    char **paths;
    int64_t *labels;
    size_t n;
    ferry_image_config cfg;
} image_files;

static ferry_status read_file(const void *src, size_t index, ferry_scratch *s, size_t *n)
{
    const image_files *f = src;
    return ferry__scratch_read_file(s, f->paths[index], f->cfg.limits.max_file_bytes, n);
}

static ferry_status files_get(const ferry_dataset *ds, size_t index, void *dst,
                              const ferry_sample_ctx *ctx, int64_t *label)
{
    const image_files *f = ds->impl;
    *label = f->labels[index];
    return ferry__image_sample(ds, &f->cfg, index, read_file, f, f->paths[index], dst, ctx);
}

static ferry_status files_label(const ferry_dataset *ds, size_t index, int64_t *label)
{
    const image_files *f = ds->impl;
    *label = f->labels[index];
    return FERRY_OK;
}

static const char *files_name(const ferry_dataset *ds, size_t index)
{
    const image_files *f = ds->impl;
    return f->paths[index];
}

static void free_files(char **paths, int64_t *labels, size_t n)
{
    for (size_t i = 0; paths && i < n; i++)
        ferry_host_free(paths[i]);
    ferry_host_free(paths);
    ferry_host_free(labels);
}

static void files_destroy(ferry_dataset *ds)
{
    image_files *f = ds->impl;
    if (!f)
        return;
    free_files(f->paths, f->labels, f->n);
    ferry_host_free(f);
}

static const ferry_dataset_vtable files_vt = {.get = files_get, .label = files_label, .name = files_name,
                                              .destroy = files_destroy, .uses_scratch = true};

static void free_names(char **names, size_t n)
{
    for (size_t i = 0; names && i < n; i++)
        ferry_host_free(names[i]);
    ferry_host_free(names);
}

/* The output format of cfg with 0 fields taken from the first file that can be
 * read. One that cannot (FERRY_ERR_IO: missing, a dangling link, a folder) is
 * passed over: it fails again, by name, when its sample is loaded, and under
 * the skip policy the dataset must still be usable. A readable file with a bad
 * header fails create, as it always did. *passed: how many were passed over;
 * first: the first one's "path: reason". */
static ferry_status probe_format(char *const *paths, size_t n, const ferry_image_config *cfg,
                                 ferry_sample_format *fmt, size_t *passed, char *first,
                                 size_t first_size)
{
    ferry_scratch *s = NULL;
    ferry_status st = ferry_scratch_create(&s);
    size_t i = 0, len = 0;
    for (; st == FERRY_OK && i < n; i++) {
        st = ferry__scratch_read_file(s, paths[i], cfg->limits.max_file_bytes, &len);
        if (st != FERRY_ERR_IO)
            break;
        if ((*passed)++ == 0)
            snprintf(first, first_size, "%s", ferry_last_error());
        st = FERRY_OK;
    }
    ferry_image_info info = {0};
    if (st == FERRY_OK && i == n)
        st = ferry_fail(FERRY_ERR_IO, "%s (none of the %zu image files could be read, so the "
                        "image size is unknown)", first, n);
    else if (st == FERRY_OK)
        st = ferry__image_header(s->file, len, paths[i], &info);
    if (st == FERRY_OK) {
        size_t w, h;
        ferry__image_oriented_size(cfg, &info, &w, &h);
        ferry__image_resolve(cfg, w, h, info.channels, fmt);
    }
    ferry_scratch_destroy(s);
    return st;
}

ferry_status ferry__image_files_create(char **paths, int64_t *labels, size_t n,
                                       char **class_names, size_t num_classes,
                                       const ferry_image_config *cfg, const char *listing,
                                       size_t bad_count, const char *bad_first,
                                       ferry_dataset **out)
{
    image_files *f = ferry_host_calloc(1, sizeof *f);
    if (!f) {
        free_files(paths, labels, n);
        free_names(class_names, num_classes);
        return FERRY_ERR_NO_MEMORY;
    }
    f->paths = paths;
    f->labels = labels;
    f->n = n;
    f->cfg = *cfg;

    /* 0 fields of the output format come from the first image's header. */
    ferry_sample_format fmt;
    ferry_status st = FERRY_OK;
    size_t passed = 0;
    char first[1024] = "";
    if (cfg->channels && cfg->height && cfg->width)
        ferry__image_resolve(cfg, cfg->width, cfg->height, cfg->channels, &fmt);
    else
        st = probe_format(paths, n, cfg, &fmt, &passed, first, sizeof first);
    if (st != FERRY_OK) {
        ferry_dataset tmp = {.impl = f};
        files_destroy(&tmp);
        free_names(class_names, num_classes);
        return st;
    }
    st = ferry__dataset_new(&files_vt, f, n, &fmt, num_classes, out);
    if (st != FERRY_OK) {
        free_names(class_names, num_classes);
        return st;
    }
    (*out)->class_names = class_names;
    /* What the caller's listing found; otherwise the files the probe passed over
     * are all that is known before loading. Said now, not only when the sample
     * comes up (perhaps hours into an epoch). */
    ferry_dataset *ds = *out;
    ds->unreadable = bad_count ? bad_count : passed;
    snprintf(ds->unreadable_first, sizeof ds->unreadable_first, "%s", bad_count ? bad_first : first);
    if (bad_count)
        ferry_log(FERRY_LOG_WARN, "%s: %zu of %zu image entries cannot be read, the first: %s; "
                  "each fails with its path and reason when its sample is loaded (with "
                  "on_error = SKIP it is skipped and named in the loader's stats)",
                  listing ? listing : "dataset", bad_count, n, bad_first);
    else if (passed)
        ferry_log(FERRY_LOG_WARN,
                  "%s (and %zu more before the first readable file); a file that cannot be "
                  "read fails with its path and reason when its sample is loaded (with "
                  "on_error = SKIP it is skipped and named in the loader's stats)",
                  first, passed - 1);
    return FERRY_OK;
}

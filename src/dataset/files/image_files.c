/* A dataset of image files with labels: the shared core of image-folder and
 * list-file, and its format (every header read when the config leaves the size
 * 0). get() reads the file into the caller's scratch, decodes it straight into
 * dst and applies the augmentations; it touches no shared mutable state. */
#include <stdio.h>
#include <string.h>

#include "common/error.h"
#include "dataset/files/internal.h"
#include "dataset/image/image.h"

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

/* Bytes read of each file for its header at create: enough for a PNG's chunks
 * before IDAT or a JPEG's markers before its frame in nearly every file; a file
 * that needs more is read whole. */
#define HEAD_BYTES 16384

static ferry_status read_header(ferry_scratch *s, const char *path, const ferry_image_config *cfg,
                                ferry_image_info *info)
{
    size_t len = 0, size = 0;
    ferry_status st = ferry__scratch_read_head(s, path, cfg->limits.max_file_bytes, HEAD_BYTES,
                                               &len, &size);
    if (st == FERRY_OK)
        st = ferry__image_header(s->file, len, path, info);
    if (st == FERRY_ERR_FORMAT && len < size) {
        ferry_clear_error();
        if ((st = ferry__scratch_read_file(s, path, cfg->limits.max_file_bytes, &len)) == FERRY_OK)
            st = ferry__image_header(s->file, len, path, info);
    }
    return st;
}

/* What create's look at every header found. */
typedef struct scan {
    size_t passed;      /* files that cannot be read (FERRY_ERR_IO), passed over */
    char first[1024];   /* the first of them: "path: reason" */
    size_t seen, gray;  /* headers read, and how many of them are gray */
    size_t gray_at;     /* the first gray one */
    size_t pick, w, h;  /* the first file with a header, and its size: the dataset's */
} scan;

/* A file this status is about stays a sample and fails by name when loaded;
 * create passes it over. */
static bool passed_over(ferry_status st)
{
    return st == FERRY_ERR_IO || st == FERRY_ERR_FORMAT || st == FERRY_ERR_LIMIT ||
           st == FERRY_ERR_UNSUPPORTED;
}

/* With height and width 0 the images' size is the dataset's only when every
 * image has it, and its channels 1 only when every image is gray: every header
 * is read (the first HEAD_BYTES of each file), so that the format never
 * depends on which file sorts first. Two sizes are FERRY_ERR_FORMAT naming a
 * file of each. */
static ferry_status scan_headers(char *const *paths, size_t n, const ferry_image_config *cfg,
                                 const char *what, scan *sc)
{
    ferry_scratch *s = NULL;
    ferry_status st = ferry_scratch_create(&s);
    for (size_t i = 0; st == FERRY_OK && i < n; i++) {
        ferry_image_info info = {0};
        st = read_header(s, paths[i], cfg, &info);
        if (st == FERRY_ERR_IO && sc->passed++ == 0)
            snprintf(sc->first, sizeof sc->first, "%s", ferry_last_error());
        if (passed_over(st)) {
            ferry_clear_error();
            st = FERRY_OK;
            continue;
        }
        if (st != FERRY_OK)
            break;
        size_t w, h;
        ferry__image_oriented_size(cfg, &info, &w, &h);
        if (info.channels <= 2 && sc->gray++ == 0)
            sc->gray_at = i;
        if (sc->seen++ == 0) {
            sc->pick = i;
            sc->w = w;
            sc->h = h;
        } else if (w != sc->w || h != sc->h) {
            st = ferry_fail_at(FERRY_ERR_FORMAT, what, "the images differ in size: %s is %zux%zu, "
                               "%s is %zux%zu; set height and width in ferry_image_config to "
                               "resize (or crop) them to one size", paths[sc->pick], sc->w,
                               sc->h, paths[i], w, h);
        }
    }
    if (st == FERRY_OK && !sc->seen && sc->passed)
        st = ferry_fail(FERRY_ERR_IO, "%s (none of the %zu image files could be read, so the "
                        "image size is unknown)", sc->first, n);
    else if (st == FERRY_OK && !sc->seen) /* say why the first one failed */
        st = read_header(s, paths[0], cfg, &(ferry_image_info){0});
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

    /* The output format: cfg's, its 0 fields by the rule ferry_image_config
     * states (never the first file's alone). */
    const char *what = listing ? listing : "dataset";
    ferry_sample_format fmt;
    ferry_status st = FERRY_OK;
    scan sc = {0};
    if (!cfg->height)
        st = scan_headers(paths, n, cfg, what, &sc);
    ferry__image_dataset_format(cfg, sc.w, sc.h, sc.seen && sc.gray == sc.seen, &fmt);
    size_t passed = sc.passed;
    const char *first = sc.first;
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
    if (!cfg->height)
        snprintf(ds->size_from, sizeof ds->size_from, "%s", paths[sc.pick]);
    if (!cfg->height && !cfg->channels && sc.gray && sc.gray < sc.seen) {
        char gray[1200];
        snprintf(gray, sizeof gray, "%zu of the %zu images are gray (%s is one)", sc.gray,
                 sc.seen, paths[sc.gray_at]);
        ferry__warn_gray_as_rgb(what, gray);
    }
    ds->unreadable = bad_count ? bad_count : passed;
    snprintf(ds->unreadable_first, sizeof ds->unreadable_first, "%s", bad_count ? bad_first : first);
    if (bad_count)
        ferry_log(FERRY_LOG_WARN, "%s: %zu of %zu image entries cannot be read, the first: %s; "
                  "each fails with its path and reason when its sample is loaded (with "
                  "on_error = SKIP it is skipped and named in the loader's stats)",
                  listing ? listing : "dataset", bad_count, n, bad_first);
    else if (passed)
        ferry_log(FERRY_LOG_WARN,
                  "%s (and %zu more); a file that cannot be read fails with its path and "
                  "reason when its sample is loaded (with "
                  "on_error = SKIP it is skipped and named in the loader's stats)",
                  first, passed - 1);
    return FERRY_OK;
}

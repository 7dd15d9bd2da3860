/* A dataset of PNG files with labels: the shared core of image-folder and
 * list-file. get() reads the file into the caller's scratch, decodes it straight
 * into dst and applies the augmentations; it touches no shared mutable state. */
#include <string.h>

#include "common/error.h"
#include "dataset/internal.h"

typedef struct image_files {
    char **paths;
    int64_t *labels;
    size_t n;
    ferry_image_config cfg;
} image_files;

static ferry_status files_get(const ferry_dataset *ds, size_t index, void *dst,
                              const ferry_sample_ctx *ctx, int64_t *label)
{
    const image_files *f = ds->impl;
    ferry_scratch *s = ctx ? ctx->scratch : NULL, *own = NULL;
    ferry_status st;
    if (!s) {
        if ((st = ferry_scratch_create(&own)) != FERRY_OK)
            return st;
        s = own;
    }
    size_t n = 0;
    const char *path = f->paths[index];
    double t0 = ferry__clock(ctx);
    st = ferry__scratch_read_file(s, path, f->cfg.limits.max_file_bytes, &n);
    double t1 = ferry__clock(ctx);
    if (st == FERRY_OK)
        st = ferry__png_decode(s->file, n, &f->cfg, &ds->format, s, path, dst);
    double t2 = ferry__clock(ctx);
    if (st == FERRY_OK)
        ferry__augment(&f->cfg, &ds->format, dst, index, ctx);
    if (ctx && ctx->timing) {
        /* Resize and channel conversion happen inside the decode, row by row. */
        ctx->timing->read_s += t1 - t0;
        ctx->timing->decode_s += t2 - t1;
        ctx->timing->transform_s += ferry__clock(ctx) - t2;
    }
    ferry_scratch_destroy(own);
    *label = f->labels[index];
    return st;
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

static const ferry_dataset_vtable files_vt = {files_get, files_label, files_name, files_destroy};

static void free_names(char **names, size_t n)
{
    for (size_t i = 0; names && i < n; i++)
        ferry_host_free(names[i]);
    ferry_host_free(names);
}

ferry_status ferry__image_files_create(char **paths, int64_t *labels, size_t n,
                                       char **class_names, size_t num_classes,
                                       const ferry_image_config *cfg, ferry_dataset **out)
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
    if (cfg->channels && cfg->height && cfg->width) {
        ferry__image_resolve(cfg, cfg->width, cfg->height, cfg->channels, &fmt);
    } else {
        ferry_scratch *s = NULL;
        size_t len = 0;
        ferry_image_info info;
        st = ferry_scratch_create(&s);
        if (st == FERRY_OK)
            st = ferry__scratch_read_file(s, paths[0], cfg->limits.max_file_bytes, &len);
        if (st == FERRY_OK)
            st = ferry__png_header(s->file, len, paths[0], &info);
        if (st == FERRY_OK)
            ferry__image_resolve(cfg, info.width, info.height, info.channels, &fmt);
        ferry_scratch_destroy(s);
    }
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
    return FERRY_OK;
}

/* IDX files (MNIST, Fashion-MNIST), plain or gzip, read whole into memory with the
 * header checked against the data: u8 elements only, and the data length must be
 * exactly what the dimensions say. Also the IDX-pair dataset built on them. */
#include <string.h>
#include <zlib.h>

#include "common/error.h"
#include "dataset/shards/gz.h"
#include "dataset/image/image.h"

/* Where an IDX file's bytes come from: the raw file or a gzip stream over it. */
typedef struct idx_source {
    const char *path;
    const uint8_t *raw;
    size_t raw_n, raw_pos;
    int gz, gz_end;
    z_stream z;
} idx_source;

/* Reads up to n bytes; *got says how many came. */
static ferry_status src_read(idx_source *s, uint8_t *buf, size_t n, size_t *got)
{
    *got = 0;
    if (!s->gz) {
        size_t k = s->raw_n - s->raw_pos < n ? s->raw_n - s->raw_pos : n;
        memcpy(buf, s->raw + s->raw_pos, k);
        s->raw_pos += k;
        *got = k;
        return FERRY_OK;
    }
    while (*got < n && !s->gz_end) {
        size_t want = n - *got;
        s->z.next_out = buf + *got;
        s->z.avail_out = want > (1u << 30) ? (1u << 30) : (uInt)want;
        uInt before = s->z.avail_out;
        int r = inflate(&s->z, Z_NO_FLUSH);
        *got += before - s->z.avail_out;
        if (r == Z_STREAM_END) {
            s->gz_end = 1;
        } else if (r == Z_BUF_ERROR || (r == Z_OK && s->z.avail_in == 0 && s->z.avail_out)) {
            if (s->z.avail_in == 0)
                return ferry_fail_at(FERRY_ERR_FORMAT, s->path, "gzip stream is truncated");
        } else if (r != Z_OK) {
            return ferry_fail_at(FERRY_ERR_FORMAT, s->path, "gzip: %s",
                                 s->z.msg ? s->z.msg : "corrupt data");
        }
    }
    return FERRY_OK;
}

typedef struct idx_array {
    uint8_t *data; /* ferry_host memory, owned */
    size_t ndims;
    size_t dims[8];
    size_t bytes;
} idx_array;

static const char *type_name(int t)
{
    switch (t) {
    case 0x08: return "u8";
    case 0x09: return "i8";
    case 0x0B: return "i16";
    case 0x0C: return "i32";
    case 0x0D: return "f32";
    case 0x0E: return "f64";
    default: return "unknown";
    }
}

/* Deflate's largest ratio is 1032:1: a gzip file of n bytes cannot inflate to
 * more, so a header promising more is truncated before a byte is inflated. */
#define DEFLATE_MAX_RATIO 1032
/* Past the data the header promises, a gzip stream is inflated only this far
 * (to count a little trailing garbage), never to its end. */
#define GZ_TRAILING_MAX ((size_t)64 << 10)

/* The most data bytes the source can hold after a header of hdr_bytes. */
static size_t src_capacity(const idx_source *s, size_t hdr_bytes)
{
    size_t cap;
    if (!s->gz)
        return s->raw_n > hdr_bytes ? s->raw_n - hdr_bytes : 0;
    return ferry_mul_size(s->raw_n, DEFLATE_MAX_RATIO, &cap) ? cap : SIZE_MAX;
}

/* An image file's dimensions [N, H, W(, C)] within the image limits, checked
 * before its data is read. */
static ferry_status check_image_dims(const char *path, const idx_array *a,
                                     const ferry_image_limits *lim)
{
    size_t px;
    if (!lim || a->ndims < 3)
        return FERRY_OK;
    if (a->dims[1] > lim->max_height || a->dims[2] > lim->max_width ||
        !ferry_mul_size(a->dims[1], a->dims[2], &px) || px > lim->max_pixels)
        return ferry_fail_at(FERRY_ERR_LIMIT, path, "IDX images of %zux%zu are over the image "
                             "limits (%zux%zu, %zu pixels)", a->dims[2], a->dims[1],
                             lim->max_width, lim->max_height, lim->max_pixels);
    return FERRY_OK;
}

/* The bytes after the data: none, or an error saying how many (a gzip stream
 * is counted up to GZ_TRAILING_MAX only: a bomb is not inflated to its end). */
static ferry_status check_trailing(idx_source *s, size_t hdr_bytes, size_t total)
{
    size_t extra = 0, got;
    ferry_status st;
    while (extra <= GZ_TRAILING_MAX) {
        uint8_t tmp[4096];
        if ((st = src_read(s, tmp, sizeof tmp, &got)) != FERRY_OK)
            return st;
        if (got == 0)
            break;
        extra += got;
    }
    if (extra > GZ_TRAILING_MAX && s->gz)
        return ferry_fail_at(FERRY_ERR_FORMAT, s->path, "over %zu bytes of trailing garbage: the "
                             "header promises %zu data bytes, the gzip stream holds more "
                             "(inflating stopped there)", GZ_TRAILING_MAX, total);
    if (extra && !s->gz)
        extra = s->raw_n - hdr_bytes - total; /* all of it, counted without reading */
    if (extra)
        return ferry_fail_at(FERRY_ERR_FORMAT, s->path,
                             "%zu bytes of trailing garbage: the header promises %zu data bytes, "
                             "the file has %zu (%zu expected in all, %zu found)", extra, total,
                             total + extra, hdr_bytes + total, hdr_bytes + total + extra);
    return FERRY_OK;
}

/* The body of idx_load once the file is in memory; lim: the image limits for
 * an images file, NULL for labels. */
static ferry_status idx_parse(idx_source *s, const ferry_image_limits *lim, idx_array *out)
{
    const char *path = s->path;
    uint8_t hdr[4 + 4 * 8];
    size_t got;
    ferry_status st = src_read(s, hdr, 4, &got);
    if (st != FERRY_OK)
        return st;
    if (got < 4)
        return ferry_fail_at(FERRY_ERR_FORMAT, path, "truncated IDX header (%zu of 4 bytes)", got);
    if (hdr[0] != 0 || hdr[1] != 0)
        return ferry_fail_at(FERRY_ERR_FORMAT, path,
                             "not an IDX file (magic %02x%02x%02x%02x, want 000008NN)",
                             hdr[0], hdr[1], hdr[2], hdr[3]);
    if (hdr[2] != 0x08)
        return ferry_fail_at(FERRY_ERR_UNSUPPORTED, path,
                             "IDX element type 0x%02x (%s) is not supported; only u8 (0x08)",
                             hdr[2], type_name(hdr[2]));
    size_t nd = hdr[3];
    if (nd < 1 || nd > 8)
        return ferry_fail_at(FERRY_ERR_FORMAT, path, "IDX header has %zu dimensions (1 to 8 allowed)",
                             nd);
    if ((st = src_read(s, hdr + 4, 4 * nd, &got)) != FERRY_OK)
        return st;
    if (got < 4 * nd)
        return ferry_fail_at(FERRY_ERR_FORMAT, path, "truncated IDX header (%zu of %zu bytes)",
                             4 + got, 4 + 4 * nd);
    size_t total = 1;
    out->ndims = nd;
    for (size_t i = 0; i < nd; i++) {
        const uint8_t *p = hdr + 4 + 4 * i;
        out->dims[i] = (size_t)p[0] << 24 | (size_t)p[1] << 16 | (size_t)p[2] << 8 | p[3];
        if (!ferry_mul_size(total, out->dims[i], &total))
            return ferry_fail_at(FERRY_ERR_LIMIT, path, "IDX dimensions overflow");
    }
    size_t hdr_bytes = 4 + 4 * nd;
    if ((st = check_image_dims(path, out, lim)) != FERRY_OK)
        return st;
    size_t room = src_capacity(s, hdr_bytes);
    if (total > room && !s->gz)
        return ferry_fail_at(FERRY_ERR_FORMAT, path, "truncated: the header promises %zu data "
                             "bytes, the file has %zu (%zu of %zu bytes in all)", total, room,
                             hdr_bytes + room, hdr_bytes + total);
    if (total > room)
        return ferry_fail_at(FERRY_ERR_FORMAT, path, "truncated: the header promises %zu data "
                             "bytes, more than a gzip file of %zu bytes can hold", total, s->raw_n);
    /* Grow while reading: a tiny file claiming a huge size never gets the huge buffer. */
    size_t cap = total < ((size_t)64 << 20) ? total : ((size_t)64 << 20), have = 0;
    out->data = ferry_host_malloc(cap ? cap : 1);
    if (!out->data)
        return FERRY_ERR_NO_MEMORY;
    while (have < total) {
        if (have == cap) {
            size_t nc = cap * 2 < total ? cap * 2 : total;
            uint8_t *p = ferry_host_realloc(out->data, nc);
            if (!p)
                return FERRY_ERR_NO_MEMORY;
            out->data = p;
            cap = nc;
        }
        if ((st = src_read(s, out->data + have, cap - have, &got)) != FERRY_OK)
            return st;
        have += got;
        if (got == 0)
            break;
    }
    if (have < total)
        return ferry_fail_at(FERRY_ERR_FORMAT, path,
                             "truncated: the header promises %zu data bytes, the file has %zu "
                             "(%zu of %zu bytes in all)", total, have, hdr_bytes + have,
                             hdr_bytes + total);
    if ((st = check_trailing(s, hdr_bytes, total)) != FERRY_OK)
        return st;
    out->bytes = total;
    return FERRY_OK;
}

static ferry_status idx_load(const char *path, const ferry_image_limits *lim, idx_array *out)
{
    memset(out, 0, sizeof *out);
    ferry_scratch *file = NULL;
    ferry_status st = ferry_scratch_create(&file);
    size_t n = 0;
    if (st == FERRY_OK)
        st = ferry__scratch_read_file(file, path, 0, &n);
    idx_source s = {.path = path};
    if (st == FERRY_OK) {
        s.raw = file->file;
        s.raw_n = n;
        s.gz = n >= 2 && file->file[0] == 0x1f && file->file[1] == 0x8b;
        if (s.gz) {
            s.z.zalloc = ferry__z_alloc;
            s.z.zfree = ferry__z_free;
            s.z.next_in = file->file;
            s.z.avail_in = n > UINT32_MAX ? UINT32_MAX : (uInt)n;
            if (inflateInit2(&s.z, 15 + 16) != Z_OK) {
                st = ferry_fail_at(FERRY_ERR_NO_MEMORY, path, "cannot start zlib");
                s.gz = 0;
            }
        }
    }
    if (st == FERRY_OK)
        st = idx_parse(&s, lim, out);
    if (s.gz)
        inflateEnd(&s.z);
    ferry_scratch_destroy(file);
    if (st != FERRY_OK) {
        ferry_host_free(out->data);
        out->data = NULL;
    }
    return st;
}

/* ---- the IDX-pair dataset ---- */
typedef struct idx_ds {
    idx_array images, labels;
    size_t h, w, c;
    ferry_image_config cfg;
    int copy_direct; /* the output is the stored layout: get() is one memcpy */
} idx_ds;

static ferry_status idx_get(const ferry_dataset *ds, size_t index, void *dst,
                            const ferry_sample_ctx *ctx, int64_t *label)
{
    const idx_ds *d = ds->impl;
    size_t one = d->h * d->w * d->c;
    const uint8_t *src = d->images.data + index * one;
    *label = d->labels.data[index];
    double t0 = ferry__clock(ctx);
    if (d->copy_direct) {
        memcpy(dst, src, one);
    } else {
        ferry_scratch *s, *own;
        ferry_status st = ferry__sample_scratch(ctx, &s, &own);
        if (st != FERRY_OK)
            return st;
        st = ferry__image_place(src, d->w, d->h, d->c, &d->cfg, &ds->format, dst, s, NULL);
        ferry_scratch_destroy(own);
        if (st != FERRY_OK)
            return st; /* ferry_dataset_get names the sample */
    }
    double t1 = ferry__clock(ctx);
    ferry__augment(&d->cfg, &ds->format, dst, index, ctx);
    if (ctx && ctx->timing) {
        ctx->timing->decode_s += t1 - t0; /* the data is in memory: no read stage */
        ctx->timing->transform_s += ferry__clock(ctx) - t1;
    }
    return FERRY_OK;
}

static ferry_status idx_label(const ferry_dataset *ds, size_t index, int64_t *label)
{
    const idx_ds *d = ds->impl;
    *label = d->labels.data[index];
    return FERRY_OK;
}

static void idx_destroy(ferry_dataset *ds)
{
    idx_ds *d = ds->impl;
    if (!d)
        return;
    ferry_host_free(d->images.data);
    ferry_host_free(d->labels.data);
    ferry_host_free(d);
}

static const ferry_dataset_vtable idx_vt = {.get = idx_get, .label = idx_label, .destroy = idx_destroy,
                                            .uses_scratch = true};

ferry_status ferry_dataset_idx(const char *images_path, const char *labels_path,
                               const ferry_image_config *cfg, ferry_dataset **out)
{
    if (!images_path || !labels_path || !out)
        return FERRY_ARG_ERROR("NULL argument");
    idx_ds *d = ferry_host_calloc(1, sizeof *d);
    if (!d)
        return FERRY_ERR_NO_MEMORY;
    ferry_status st = ferry__image_config_check(cfg, &d->cfg);
    if (st == FERRY_OK)
        st = idx_load(images_path, &d->cfg.limits, &d->images);
    if (st == FERRY_OK)
        st = idx_load(labels_path, NULL, &d->labels);
    if (st == FERRY_OK && d->images.ndims != 3 && d->images.ndims != 4)
        st = ferry_fail_at(FERRY_ERR_FORMAT, images_path,
                           "images have %zu dimensions, want 3 [N,H,W] or 4 [N,H,W,C]",
                           d->images.ndims);
    if (st == FERRY_OK && d->images.ndims == 4 && (d->images.dims[3] < 1 || d->images.dims[3] > 4))
        st = ferry_fail_at(FERRY_ERR_FORMAT, images_path, "%zu channels; 1 to 4 supported",
                           d->images.dims[3]);
    if (st == FERRY_OK && d->labels.ndims != 1)
        st = ferry_fail_at(FERRY_ERR_FORMAT, labels_path, "labels have %zu dimensions, want 1 [N]",
                           d->labels.ndims);
    if (st == FERRY_OK && d->labels.dims[0] != d->images.dims[0])
        st = ferry_fail(FERRY_ERR_FORMAT, "%s has %zu images but %s has %zu labels", images_path,
                        d->images.dims[0], labels_path, d->labels.dims[0]);
    if (st == FERRY_OK && (d->images.dims[1] == 0 || d->images.dims[2] == 0))
        st = ferry_fail_at(FERRY_ERR_FORMAT, images_path, "empty images (%zux%zu)",
                           d->images.dims[1], d->images.dims[2]);
    if (st != FERRY_OK) {
        ferry_dataset tmp = {.impl = d};
        idx_destroy(&tmp);
        return st;
    }
    size_t n = d->images.dims[0];
    d->h = d->images.dims[1];
    d->w = d->images.dims[2];
    d->c = d->images.ndims == 4 ? d->images.dims[3] : 1;
    size_t classes = 0;
    for (size_t i = 0; i < n; i++)
        if ((size_t)d->labels.data[i] + 1 > classes)
            classes = (size_t)d->labels.data[i] + 1;
    ferry_sample_format fmt;
    ferry__image_resolve(&d->cfg, d->w, d->h, d->c, &fmt);
    d->copy_direct = fmt.height == d->h && fmt.width == d->w && fmt.channels == d->c &&
                     (d->c == 1 || fmt.layout == FERRY_LAYOUT_HWC);
    return ferry__dataset_new(&idx_vt, d, n, &fmt, classes, out);
}

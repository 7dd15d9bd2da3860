/* The tests' tar writer: ustar headers (with the variants the reader must
 * accept: GNU magic, base-256 sizes, signed checksums, pax and GNU long names),
 * written from the format's description and independent of the library's
 * reader; and gzip-compressed copies through zlib. */
#include <stdlib.h>
#include <zlib.h>

#include "harness.h"

void ft_tar_put(ft_tar *t, const void *p, size_t n)
{
    if (t->n + n > t->cap) {
        t->cap = (t->n + n) * 2 + 4096;
        t->d = realloc(t->d, t->cap);
        ASSERT(t->d);
    }
    memcpy(t->d + t->n, p, n);
    t->n += n;
}

void ft_tar_pad(ft_tar *t)
{
    static const uint8_t zero[512];
    if (t->n % 512)
        ft_tar_put(t, zero, 512 - t->n % 512);
}


/* Appends a header; returns its offset. */
size_t ft_tar_header(ft_tar *t, const char *name, char type, uint64_t size, const ft_tar_opts *o)
{
    uint8_t h[512] = {0};
    ft_tar_opts none = {0};
    if (!o)
        o = &none;
    size_t at = t->n;
    memcpy(h, name, strlen(name) < 100 ? strlen(name) : 100);
    memcpy(h + 100, "0000644", 8);
    memcpy(h + 108, "0000000", 8);
    memcpy(h + 116, "0000000", 8);
    if (o->base256) {
        h[124] = 0x80;
        for (int k = 0; k < 8; k++)
            h[135 - k] = (uint8_t)(size >> (8 * k));
    } else {
        snprintf((char *)h + 124, 12, "%011llo", (unsigned long long)size);
    }
    memcpy(h + 136, "14500000000", 12);
    h[156] = (uint8_t)type;
    if (o->gnu_magic)
        memcpy(h + 257, "ustar  ", 8);
    else
        memcpy(h + 257, "ustar\0" "00", 8);
    if (o->uname)
        memcpy(h + 265, o->uname, strlen(o->uname));
    if (o->prefix)
        memcpy(h + 345, o->prefix, strlen(o->prefix));
    memset(h + 148, ' ', 8);
    long sum = 0;
    for (int i = 0; i < 512; i++)
        sum += o->signed_sum ? (long)(int8_t)h[i] : (long)h[i];
    snprintf((char *)h + 148, 8, "%06lo", sum);
    ft_tar_put(t, h, 512);
    return at;
}

size_t ft_tar_file_opts(ft_tar *t, const char *name, const void *data, size_t n, const ft_tar_opts *o)
{
    size_t at = ft_tar_header(t, name, '0', n, o);
    ft_tar_put(t, data, n);
    ft_tar_pad(t);
    return at;
}

size_t ft_tar_file(ft_tar *t, const char *name, const void *data, size_t n)
{
    return ft_tar_file_opts(t, name, data, n, NULL);
}

size_t ft_tar_text(ft_tar *t, const char *name, const char *text)
{
    return ft_tar_file(t, name, text, strlen(text));
}

/* A pax extended header holding the given "key=value" pairs. */
size_t ft_tar_pax(ft_tar *t, char type, const char *const *kv, size_t nkv)
{
    char rec[4096];
    size_t used = 0;
    for (size_t i = 0; i < nkv; i++) {
        size_t body = strlen(kv[i]) + 2; /* ' ' and '\n' */
        size_t len = body + 1;
        while (snprintf(NULL, 0, "%zu", len) + body != len)
            len++;
        used += (size_t)snprintf(rec + used, sizeof rec - used, "%zu %s\n", len, kv[i]);
    }
    size_t at = ft_tar_header(t, "PaxHeaders/x", type, used, NULL);
    ft_tar_put(t, rec, used);
    ft_tar_pad(t);
    return at;
}

size_t ft_tar_longname(ft_tar *t, const char *name)
{
    ft_tar_opts g = {.gnu_magic = true};
    size_t at = ft_tar_header(t, "././@LongLink", 'L', strlen(name) + 1, &g);
    ft_tar_put(t, name, strlen(name) + 1);
    ft_tar_pad(t);
    return at;
}

void ft_tar_end(ft_tar *t)
{
    static const uint8_t zero[1024];
    ft_tar_put(t, zero, sizeof zero);
}

const char *ft_tar_save(ft_tar *t, const char *rel)
{
    const char *p = ft_tmp(rel);
    ft_write_file(p, t->d, t->n);
    free(t->d);
    memset(t, 0, sizeof *t);
    return p;
}

const char *ft_tar_save_gz(ft_tar *t, const char *rel, size_t members)
{
    const char *p = ft_tmp(rel);
    size_t per = members > 1 ? (t->n + members - 1) / members : t->n;
    ft_write_file(p, "", 0); /* (makes the folder) */
    FILE *f = fopen(p, "wb");
    ASSERT_MSG(f, "cannot write %s", p);
    /* Each gzip member is a complete stream; several in a row are one file. */
    for (size_t at = 0; at < t->n || at == 0; at += per) {
        size_t n = t->n - at < per ? t->n - at : per;
        uLong cap = compressBound((uLong)n) + 64;
        uint8_t *z = malloc(cap);
        ASSERT(z);
        z_stream s = {0};
        ASSERT(deflateInit2(&s, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK);
        s.next_in = t->d + at;
        s.avail_in = (uInt)n;
        s.next_out = z;
        s.avail_out = (uInt)cap;
        ASSERT(deflate(&s, Z_FINISH) == Z_STREAM_END);
        ASSERT(fwrite(z, 1, s.total_out, f) == s.total_out);
        deflateEnd(&s);
        free(z);
        if (!t->n)
            break;
    }
    ASSERT(fclose(f) == 0);
    free(t->d);
    memset(t, 0, sizeof *t);
    return p;
}

void ft_assert_shard_fails(const char *path, ferry_status want, const char *n1, const char *n2)
{
    ferry_dataset *ds = NULL;
    ASSERT_STATUS(ferry_dataset_shards(&path, 1, NULL, &ds), want);
    ASSERT(ds == NULL);
    ASSERT_STR_CONTAINS(ferry_last_error(), path);
    ASSERT_STR_CONTAINS(ferry_last_error(), n1);
    if (n2)
        ASSERT_STR_CONTAINS(ferry_last_error(), n2);
}

void ft_tar_png_sample(ft_tar *t, const char *key, const uint8_t *px, size_t w, size_t h,
                       size_t label, const char *tmp_rel)
{
    const char *p = ft_tmp(tmp_rel);
    ft_write_file(p, "", 0);
    ASSERT_OK(ferry_png_save(p, px, w, h, 1));
    size_t n;
    uint8_t *bytes = ft_read_file(p, &n);
    char name[256], lab[32];
    snprintf(name, sizeof name, "%s.png", key);
    ft_tar_file(t, name, bytes, n);
    free(bytes);
    snprintf(name, sizeof name, "%s.cls", key);
    snprintf(lab, sizeof lab, "%zu", label);
    ft_tar_file(t, name, lab, strlen(lab));
}

void ft_indexed_png_shards(const char *rel, size_t nsh, size_t per, size_t w, size_t h,
                           char (*paths)[600])
{
    const char **p = calloc(nsh, sizeof *p);
    uint8_t *px = malloc(w * h);
    ASSERT(p && px);
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s/tmp.png", rel);
    for (size_t s = 0; s < nsh; s++) {
        ft_tar t = {0};
        for (size_t k = 0; k < per; k++) {
            size_t i = s * per + k;
            for (size_t j = 0; j < w * h; j++)
                px[j] = (uint8_t)(i * 29 + j * 5 + (j * j) % 11);
            char key[32];
            snprintf(key, sizeof key, "s%05zu", i);
            ft_tar_png_sample(&t, key, px, w, h, i % 4, tmp);
        }
        ft_tar_end(&t);
        char name[640];
        snprintf(name, sizeof name, "%s/sh%02zu.tar", rel, s);
        snprintf(paths[s], 600, "%s", ft_tar_save(&t, name));
        p[s] = paths[s];
    }
    ferry_image_config c = ferry_image_config_default();
    c.shard_index_cache = true; /* writes SHARD.ferry-index beside each */
    ferry_dataset *ds;
    ASSERT_OK(ferry_dataset_shards(p, nsh, &c, &ds));
    ferry_dataset_release(ds);
    free(px);
    free(p);
}

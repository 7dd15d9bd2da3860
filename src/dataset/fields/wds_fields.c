/* WebDataset shards read as fields: the caller names the members to load, in
 * order (as wds.to_tuple("jpg", "cls", "boxes.npy") does), and each is a
 * field decoded by its extension: png/jpg/jpeg an image (decoded and
 * augmented as ferry_dataset_shards does), cls/index/id an i64, npy an array
 * (npy.c), anything else its raw bytes (a ragged u8 field). Each shard is
 * walked once at create, every chosen member's place kept per key; get() is
 * one pread per member (a URL's shard from the remote cache's copy; a gzip
 * shard's tar is held decompressed, within cfg.shard_cache_bytes, and read
 * from memory). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.h"
#include "dataset/core/internal.h"
#include "dataset/image/image.h"
#include "dataset/fields/npy.h"
#include "dataset/fields/follow_boxes.h"
#include "dataset/shards/gz.h"
#include "common/redact.h"
#include "dataset/remote/remote.h"
#include "dataset/shards/shards.h"
#include "dataset/shards/tar.h"

#define MAX_ALTS 4
/* An integer member (.cls, .index, .id) is a short text. */
#define INT_MEMBER_MAX 64

typedef enum member_kind { M_IMAGE, M_INT, M_NPY, M_RAW } member_kind;

typedef struct member_spec {
    char spec[FERRY_FIELD_NAME_MAX + 1];   /* as given: the field's name */
    char alts[MAX_ALTS][FERRY_FIELD_NAME_MAX + 1]; /* "png;jpg": either extension */
    size_t nalts;
    member_kind kind;
} member_spec;

typedef struct loc {
    uint64_t off, size;  /* the member's data; size UINT64_MAX: the key has none */
    uint64_t hdr;        /* its header, for messages */
    uint8_t alt;         /* which alternative it was */
} loc;

typedef struct wds {
    char **paths;
    int *fds;
    size_t nshards;
    size_t n, samples_cap;
    uint32_t *shard;     /* per sample */
    size_t *name;        /* per sample: "SHARD:KEY" in names */
    char *names;
    size_t names_len, names_cap;
    size_t *ends;        /* per shard */
    size_t nm;
    member_spec m[FERRY_FIELD_MAX];
    size_t image_m;      /* the image member, SIZE_MAX: none */
    loc *locs;           /* n * nm */
    ferry_image_config cfg;
    /* gzip shards: each one's tar decompressed whole at create (NULL for a
     * plain shard), in all at most cfg.shard_cache_bytes */
    uint8_t **mem;
    uint64_t *mem_size;
    size_t mem_total;
    /* shards named by URL: fetched into this cache (dataset/remote), which
     * owns their descriptors; NULL without one */
    ferry_remote_cache *remote;
} wds;

/* n bytes at off of plain shard k into s->file: from the remote cache's copy
 * of a URL's shard (fetched again if it was evicted), else the file. */
static ferry_status pread_shard(const wds *h, size_t k, uint64_t off, size_t n, ferry_scratch *s,
                                const char *name)
{
    ferry_status st = ferry__remote_cache_acquire(h->remote, k, off + n);
    if (st == FERRY_OK)
        st = ferry__scratch_pread(s, h->fds[k], off, n, name);
    ferry__remote_cache_release(h->remote, k);
    return st;
}

/* ---- the members asked for ---- */
static member_kind kind_of(const char *ext)
{
    const char *last = strrchr(ext, '.');
    last = last ? last + 1 : ext;
    if (!strcasecmp(last, "png") || !strcasecmp(last, "jpg") || !strcasecmp(last, "jpeg"))
        return M_IMAGE;
    if (!strcasecmp(last, "cls") || !strcasecmp(last, "index") || !strcasecmp(last, "id"))
        return M_INT;
    if (!strcasecmp(last, "npy"))
        return M_NPY;
    return M_RAW;
}

static ferry_status parse_spec(const char *s, size_t k, member_spec *out)
{
    if (!s || !s[0] || strlen(s) > FERRY_FIELD_NAME_MAX)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "members[%zu] is %s", k,
                          !s ? "NULL" : !s[0] ? "empty" : "longer than 63 bytes");
    snprintf(out->spec, sizeof out->spec, "%s", s);
    out->nalts = 0;
    for (const char *p = s; *p;) {
        size_t len = strcspn(p, ";");
        if (!len || out->nalts == MAX_ALTS || p[0] == '.')
            return ferry_fail(FERRY_ERR_INVALID_ARG, "members[%zu] \"%s\": extensions after the "
                              "key, at most %d separated by ';' (\"jpg\", \"png;jpg\", "
                              "\"boxes.npy\")", k, s, MAX_ALTS);
        snprintf(out->alts[out->nalts], sizeof out->alts[0], "%.*s", (int)len, p);
        member_kind kind = kind_of(out->alts[out->nalts]);
        if (out->nalts && kind != out->kind)
            return ferry_fail(FERRY_ERR_INVALID_ARG, "members[%zu] \"%s\": alternatives of "
                              "different kinds", k, s);
        out->kind = kind;
        out->nalts++;
        p += len + (p[len] == ';');
    }
    return FERRY_OK;
}

static ferry_status parse_specs(wds *h, const char *const *members, size_t nm)
{
    if (!members || nm == 0 || nm > FERRY_FIELD_MAX)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "%zu members (1 to %d)", members ? nm : 0,
                          FERRY_FIELD_MAX);
    h->nm = nm;
    h->image_m = SIZE_MAX;
    for (size_t k = 0; k < nm; k++) {
        ferry_status st = parse_spec(members[k], k, &h->m[k]);
        if (st != FERRY_OK)
            return st;
        for (size_t j = 0; j < k; j++)
            if (!strcmp(h->m[j].spec, h->m[k].spec))
                return ferry_fail(FERRY_ERR_INVALID_ARG, "member \"%s\" asked for twice",
                                  h->m[k].spec);
        if (h->m[k].kind == M_IMAGE && h->image_m != SIZE_MAX)
            return ferry_fail(FERRY_ERR_INVALID_ARG, "members \"%s\" and \"%s\" are both images "
                              "(at most one; \"png;jpg\" takes either)", h->m[h->image_m].spec,
                              h->m[k].spec);
        if (h->m[k].kind == M_IMAGE)
            h->image_m = k;
    }
    return FERRY_OK;
}

/* ---- walking the shards ---- */
typedef struct entry {
    size_t key, key_len;   /* in the pool */
    size_t member;
    loc at;
} entry;

typedef struct walk {
    entry *v;
    size_t n, cap;
    char *pool;
    size_t pool_len, pool_cap;
} walk;

static ferry_status grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return FERRY_OK;
    size_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    void *q = ferry_host_realloc(*p, c * elem);
    if (!q)
        return FERRY_ERR_NO_MEMORY;
    *p = q;
    *cap = c;
    return FERRY_OK;
}

/* Which member (and alternative) ext is, or false. */
static bool match(const wds *h, const char *ext, size_t *member, uint8_t *alt)
{
    for (size_t k = 0; k < h->nm; k++)
        for (size_t a = 0; a < h->m[k].nalts; a++)
            if (!strcasecmp(ext, h->m[k].alts[a])) {
                *member = k;
                *alt = (uint8_t)a;
                return true;
            }
    return false;
}

static ferry_status take(const wds *h, const char *shard, const ferry_tar_member *m, walk *w)
{
    const char *name = m->name;
    while (name[0] == '.' && name[1] == '/')
        name += 2;
    if (m->kind == FERRY_TAR_DIR)
        return FERRY_OK;
    if (m->kind != FERRY_TAR_FILE)
        return ferry_fail_at(FERRY_ERR_FORMAT, shard, "member %s at byte %llu is not a file; a "
                             "shard must hold its files' bytes", name,
                             (unsigned long long)m->header_off);
    /* WebDataset's key: the name up to the first '.' of its last component. */
    const char *slash = strrchr(name, '/'), *base = slash ? slash + 1 : name;
    const char *dot = strchr(base, '.');
    size_t member;
    uint8_t alt;
    if (base[0] == '.' || !dot || !match(h, dot + 1, &member, &alt))
        return FERRY_OK;
    size_t key_len = (size_t)(dot - name);
    void *v = w->v, *pool = w->pool;
    ferry_status st = grow(&v, &w->cap, w->n + 1, sizeof *w->v);
    w->v = v;
    if (st == FERRY_OK)
        st = grow(&pool, &w->pool_cap, w->pool_len + key_len + 1, 1);
    w->pool = pool;
    if (st != FERRY_OK)
        return st;
    if (!w->v || !w->pool) /* grow gives room for one more at least */
        return FERRY_ERR_NO_MEMORY;
    memcpy(w->pool + w->pool_len, name, key_len);
    w->pool[w->pool_len + key_len] = '\0';
    w->v[w->n++] = (entry){.key = w->pool_len, .key_len = key_len, .member = member,
                           .at = {m->data_off, m->size, m->header_off, alt}};
    w->pool_len += key_len + 1;
    return FERRY_OK;
}

/* Sorts by (key, member, place): a merge sort, as qsort's comparison could
 * not see the key pool without a global. Stable, so a duplicate is named in
 * shard order. */
static ferry_status sort_entries(walk *w)
{
    entry *tmp = ferry_host_malloc((w->n ? w->n : 1) * sizeof *tmp);
    if (!tmp)
        return FERRY_ERR_NO_MEMORY;
    for (size_t width = 1; width < w->n; width *= 2) {
        for (size_t lo = 0; lo < w->n; lo += 2 * width) {
            size_t mid = lo + width < w->n ? lo + width : w->n;
            size_t hi = lo + 2 * width < w->n ? lo + 2 * width : w->n, i = lo, j = mid, k = lo;
            while (i < mid && j < hi) {
                const entry *a = &w->v[i], *b = &w->v[j];
                int c = strcmp(w->pool + a->key, w->pool + b->key);
                if (!c)
                    c = a->member != b->member ? (a->member < b->member ? -1 : 1)
                                               : (a->at.hdr > b->at.hdr);
                tmp[k++] = c <= 0 ? w->v[i++] : w->v[j++];
            }
            while (i < mid)
                tmp[k++] = w->v[i++];
            while (j < hi)
                tmp[k++] = w->v[j++];
        }
        memcpy(w->v, tmp, w->n * sizeof *tmp);
    }
    ferry_host_free(tmp);
    return FERRY_OK;
}

/* Room for one more sample (capacity doubling). */
static ferry_status grow_samples(wds *h)
{
    if (h->n < h->samples_cap)
        return FERRY_OK;
    size_t c = h->samples_cap ? 2 * h->samples_cap : 256, bytes;
    if (!ferry_mul_size(c, h->nm * sizeof *h->locs, &bytes))
        return FERRY_ERR_NO_MEMORY;
    void *p = ferry_host_realloc(h->locs, bytes);
    if (p)
        h->locs = p;
    void *q = p ? ferry_host_realloc(h->shard, c * sizeof *h->shard) : NULL;
    if (q)
        h->shard = q;
    void *r = q ? ferry_host_realloc(h->name, c * sizeof *h->name) : NULL;
    if (!r)
        return FERRY_ERR_NO_MEMORY;
    h->name = r;
    h->samples_cap = c;
    return FERRY_OK;
}

/* The samples of one walked shard k: one per key, each member's place. */
static ferry_status add_samples(wds *h, uint32_t k, walk *w)
{
    ferry_status st = sort_entries(w);
    for (size_t a = 0, b; st == FERRY_OK && a < w->n; a = b) {
        const char *key = w->pool + w->v[a].key;
        for (b = a + 1; b < w->n && !strcmp(w->pool + w->v[b].key, key);)
            b++;
        if ((st = grow_samples(h)) != FERRY_OK)
            return st;
        loc *l = &h->locs[h->n * h->nm];
        for (size_t m = 0; m < h->nm; m++)
            l[m] = (loc){.size = UINT64_MAX};
        for (size_t i = a; i < b; i++) {
            loc *x = &l[w->v[i].member];
            if (x->size != UINT64_MAX)
                return ferry_fail_at(FERRY_ERR_FORMAT, h->paths[k], "duplicate key: members at "
                                     "byte %llu and byte %llu are both the \"%s\" of key %s",
                                     (unsigned long long)x->hdr,
                                     (unsigned long long)w->v[i].at.hdr,
                                     h->m[w->v[i].member].spec, key);
            *x = w->v[i].at;
        }
        char disp[4096];
        size_t nl = ferry_redact_urls(h->paths[k], disp, sizeof disp), kl = strlen(key);
        nl = nl < sizeof disp ? nl : sizeof disp - 1;
        void *nm = h->names;
        if ((st = grow(&nm, &h->names_cap, h->names_len + nl + kl + 2, 1)) != FERRY_OK)
            return st;
        h->names = nm;
        h->name[h->n] = h->names_len;
        snprintf(h->names + h->names_len, nl + kl + 2, "%.*s:%s", (int)nl, disp, key);
        h->names_len += nl + kl + 2;
        h->shard[h->n++] = k;
    }
    return st;
}

/* A gzip shard's whole tar into h->mem[k], within what is left of the
 * budget (cfg.shard_cache_bytes over all gzip shards). */
static ferry_status inflate_shard(wds *h, uint32_t k, int fd, const char *path)
{
    if (!h->mem && (!(h->mem = ferry_host_calloc(h->nshards, sizeof *h->mem)) ||
                    !(h->mem_size = ferry_host_calloc(h->nshards, sizeof *h->mem_size))))
        return FERRY_ERR_NO_MEMORY;
    ferry_gz g = {.fd = -1};
    ferry_status st = ferry__gz_open(&g, fd, path);
    size_t cap = 0, len = 0, left = h->cfg.shard_cache_bytes - h->mem_total;
    uint8_t *buf = NULL;
    while (st == FERRY_OK) {
        if (len == cap) {
            size_t c = cap ? cap * 2 : (size_t)1 << 20;
            if (cap >= left) {
                st = ferry_fail_at(FERRY_ERR_LIMIT, path, "gzip shard: its tar is more than the "
                                   "%zu bytes left of image_config.shard_cache_bytes (%zu): "
                                   "fields from gzip shards are held decompressed", left,
                                   h->cfg.shard_cache_bytes);
                break;
            }
            c = c > left ? left : c;
            uint8_t *q = ferry_host_realloc(buf, c);
            if (!q) {
                st = FERRY_ERR_NO_MEMORY;
                break;
            }
            buf = q;
            cap = c;
        }
        size_t got = 0;
        st = ferry__gz_read(&g, buf + len, cap - len, &got);
        len += got;
        if (st == FERRY_OK && got == 0)
            break;
    }
    ferry__gz_close(&g);
    if (st != FERRY_OK) {
        ferry_host_free(buf);
        return st;
    }
    h->mem[k] = buf;
    h->mem_size[k] = len;
    h->mem_total += len;
    return FERRY_OK;
}

static ferry_status walk_shard(wds *h, uint32_t k)
{
    const char *path = h->paths[k];
    int fd;
    uint64_t size;
    if (h->remote && ferry__is_url(path)) {
        /* A URL's shard is fetched whole into the cache to be walked; its
         * members are then read from there (fetched again if evicted). */
        ferry_status st = ferry__remote_cache_acquire(h->remote, k, UINT64_MAX);
        const ferry_remote_obj *obj = ferry__remote_cache_obj(h->remote, k);
        ferry__remote_cache_release(h->remote, k);
        if (st != FERRY_OK)
            return st;
        fd = ferry__remote_cache_fd(h->remote, k);
        size = obj ? obj->size : 0;
    } else {
        struct stat sb;
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0 || fstat(fd, &sb) != 0) {
            int e = errno;
            if (fd >= 0)
                close(fd);
            return ferry_fail_at(FERRY_ERR_IO, path, "%s", strerror(e));
        }
        size = (uint64_t)sb.st_size;
    }
    h->fds[k] = fd;
    bool gz;
    ferry_status st = ferry__shard_is_gzip(fd, path, &gz);
    ferry_tar_walk tw = {0};
    walk w = {0};
    ferry_gz g = {.fd = -1};
    size_t first = h->n;
    if (st == FERRY_OK && gz && (st = ferry__gz_open(&g, fd, path)) == FERRY_OK)
        st = ferry__tar_walk_init_gz(&tw, &g, path); /* offsets in the decompressed tar */
    else if (st == FERRY_OK && !gz)
        st = ferry__tar_walk_init(&tw, fd, path, size);
    /* the walk reads a URL's shard from the cache: held until it is done */
    bool held = st == FERRY_OK && h->remote && ferry__is_url(path) &&
                ferry__remote_cache_acquire(h->remote, k, UINT64_MAX) == FERRY_OK;
    for (bool end = false; st == FERRY_OK && !end;) {
        ferry_tar_member m;
        st = ferry__tar_next(&tw, &m, &end);
        if (st == FERRY_OK && !end)
            st = take(h, path, &m, &w);
    }
    if (st == FERRY_OK)
        st = add_samples(h, k, &w);
    ferry__tar_walk_free(&tw);
    ferry__gz_close(&g);
    if (held)
        ferry__remote_cache_release(h->remote, k);
    if (st == FERRY_OK && gz) /* a second pass: the bytes the members are read from */
        st = inflate_shard(h, k, fd, path);
    for (size_t i = first; st == FERRY_OK && gz && i < h->n; i++) /* the same bytes both times */
        for (size_t m = 0; m < h->nm; m++) {
            const loc *l = &h->locs[i * h->nm + m];
            if (l->size != UINT64_MAX && (l->off > h->mem_size[k] || l->size > h->mem_size[k] - l->off))
                st = ferry_fail_at(FERRY_ERR_FORMAT, path, "gzip shard changed while it was read");
        }
    ferry_host_free(w.v);
    ferry_host_free(w.pool);
    return st;
}

/* ---- reading members ---- */
static const char *sample_name(const wds *h, size_t i) { return h->names + h->name[i]; }

/* Member k of sample i into s->file (its size in *n), within the file limit. */
static ferry_status read_loc(const wds *h, size_t i, size_t k, ferry_scratch *s, size_t *n)
{
    const loc *l = &h->locs[i * h->nm + k];
    *n = 0;
    if (l->size == UINT64_MAX)
        return ferry_fail(FERRY_ERR_FORMAT, "the key has no .%s member", h->m[k].spec);
    size_t max = h->cfg.limits.max_file_bytes;
    if (max && l->size > max)
        return ferry_fail(FERRY_ERR_LIMIT, "member .%s at byte %llu is %llu bytes, over the limit "
                          "of %zu", h->m[k].alts[l->alt], (unsigned long long)l->hdr,
                          (unsigned long long)l->size, max);
    *n = (size_t)l->size;
    const uint8_t *mem = h->mem ? h->mem[h->shard[i]] : NULL;
    if (!mem)
        return pread_shard(h, h->shard[i], l->off, (size_t)l->size, s, sample_name(h, i));
    /* the walk checked every member inside the tar */
    ferry_status st = ferry__scratch_grow(&s->file, &s->file_cap, (size_t)l->size + 1);
    if (st == FERRY_OK)
        memcpy(s->file, mem + l->off, (size_t)l->size);
    return st;
}

static ferry_status read_image(const void *src, size_t i, ferry_scratch *s, size_t *n)
{
    const wds *h = src;
    return read_loc(h, i, h->image_m, s, n);
}

static ferry_status parse_int(const uint8_t *d, size_t n, int64_t *v)
{
    size_t a = 0;
    while (a < n && (d[a] == ' ' || d[a] == '\t' || d[a] == '\n' || d[a] == '\r'))
        a++;
    while (n > a && (d[n - 1] == ' ' || d[n - 1] == '\t' || d[n - 1] == '\n' || d[n - 1] == '\r'))
        n--;
    bool neg = a < n && d[a] == '-';
    a += neg;
    if (a == n || n - a > 18)
        return FERRY_ERR_FORMAT;
    int64_t x = 0;
    for (; a < n; a++) {
        if (d[a] < '0' || d[a] > '9')
            return FERRY_ERR_FORMAT;
        x = x * 10 + (d[a] - '0');
    }
    *v = neg ? -x : x;
    return FERRY_OK;
}

static ferry_status get_int(const wds *h, size_t i, size_t k, ferry_scratch *s, void *dst)
{
    const loc *l = &h->locs[i * h->nm + k];
    if (l->size != UINT64_MAX && l->size > INT_MEMBER_MAX)
        return ferry_fail(FERRY_ERR_FORMAT, "its .%s member at byte %llu is %llu bytes, not an "
                          "integer", h->m[k].spec, (unsigned long long)l->hdr,
                          (unsigned long long)l->size);
    size_t n = 0;
    ferry_status st = read_loc(h, i, k, s, &n);
    int64_t v = 0;
    if (st == FERRY_OK && parse_int(s->file, n, &v) != FERRY_OK)
        st = ferry_fail(FERRY_ERR_FORMAT, "its .%s member at byte %llu is not a decimal integer",
                        h->m[k].spec, (unsigned long long)l->hdr);
    if (st == FERRY_OK)
        memcpy(dst, &v, sizeof v);
    return st;
}

/* An array as the field says: its dtype, its shape (a ragged field's first
 * dimension up to the maximum). */
static ferry_status get_npy(const wds *h, const ferry_field *f, size_t i, size_t k,
                            ferry_scratch *s, void *dst, size_t *length)
{
    size_t n = 0;
    ferry_status st = read_loc(h, i, k, s, &n);
    if (st != FERRY_OK)
        return st;
    char what[FERRY_FIELD_NAME_MAX + 16];
    snprintf(what, sizeof what, "member .%s", h->m[k].spec);
    ferry_npy a;
    if ((st = ferry__npy_parse(s->file, n, what, &a)) != FERRY_OK)
        return st;
    bool fits = a.dtype == f->dtype && a.ndim == f->ndim;
    for (size_t d = 0; fits && d < a.ndim; d++)
        fits = d == 0 && f->ragged ? a.shape[0] <= f->shape[0] : a.shape[d] == f->shape[d];
    if (!fits) {
        char got[96] = "", want[96] = "";
        for (size_t d = 0, u = 0; d < a.ndim && u < sizeof got; d++)
            u += (size_t)snprintf(got + u, sizeof got - u, "%s%zu", d ? ", " : "", a.shape[d]);
        for (size_t d = 0, u = 0; d < f->ndim && u < sizeof want; d++)
            u += (size_t)snprintf(want + u, sizeof want - u, "%s%s%zu", d ? ", " : "",
                                  d == 0 && f->ragged ? "<=" : "", f->shape[d]);
        return ferry_fail(FERRY_ERR_FORMAT, "%s: %s [%s], the field is %s [%s]", what,
                          ferry_dtype_name(a.dtype), got, ferry_dtype_name(f->dtype), want);
    }
    memcpy(dst, s->file + a.data_off, a.data_bytes);
    if (f->ragged)
        *length = a.ndim ? a.shape[0] : 1;
    return FERRY_OK;
}

static ferry_status get_raw(const wds *h, const ferry_field *f, size_t i, size_t k,
                            ferry_scratch *s, void *dst, size_t *length)
{
    size_t n = 0;
    ferry_status st = read_loc(h, i, k, s, &n);
    if (st == FERRY_OK && n > f->shape[0])
        st = ferry_fail(FERRY_ERR_FORMAT, "member .%s is %zu bytes, more than the %zu found at "
                        "create (the shard changed?)", h->m[k].spec, n, f->shape[0]);
    if (st == FERRY_OK) {
        memcpy(dst, s->file, n);
        *length = n;
    }
    return st;
}

static ferry_status wds_get_fields(const ferry_dataset *ds, size_t index, void *const *dst,
                                   size_t *lengths, const ferry_sample_ctx *ctx)
{
    const wds *h = ds->impl;
    ferry_scratch *s, *own;
    ferry_status st = ferry__sample_scratch(ctx, &s, &own);
    ferry_sample_ctx c = ctx ? *ctx : (ferry_sample_ctx){0};
    c.scratch = s;
    /* The image first: its decode reuses s->file, which the others then refill.
     * Its geometry (recorded only when asked for) moves the boxes once they
     * are read. */
    ferry_image_geom g;
    bool boxes = h->image_m != SIZE_MAX && h->cfg.boxes_follow;
    if (st == FERRY_OK && h->image_m != SIZE_MAX)
        st = ferry__image_sample_geom(ds, &h->cfg, index, read_image, h, sample_name(h, index),
                                      dst[h->image_m], &c, boxes ? &g : NULL);
    for (size_t k = 0; st == FERRY_OK && k < h->nm; k++) {
        const ferry_field *f = &ds->fields[k];
        switch (h->m[k].kind) {
        case M_IMAGE: break;
        case M_INT: st = get_int(h, index, k, s, dst[k]); break;
        case M_NPY: st = get_npy(h, f, index, k, s, dst[k], &lengths[k]); break;
        case M_RAW: st = get_raw(h, f, index, k, s, dst[k], &lengths[k]); break;
        }
    }
    if (st == FERRY_OK && boxes)
        st = ferry__fields_follow_boxes(ds->fields, h->nm, dst, lengths, &g,
                                        h->cfg.box_min_area_frac);
    ferry_scratch_destroy(own);
    return st;
}

static ferry_status wds_label(const ferry_dataset *ds, size_t index, int64_t *label)
{
    const wds *h = ds->impl;
    if (ds->label_field == SIZE_MAX)
        return ferry_fail(FERRY_ERR_UNSUPPORTED, "no member asked for is a label (.cls)");
    ferry_scratch *s;
    ferry_status st = ferry_scratch_create(&s);
    if (st == FERRY_OK)
        st = get_int(h, index, ds->label_field, s, label);
    ferry_scratch_destroy(s);
    return st;
}

static const char *wds_name(const ferry_dataset *ds, size_t index)
{
    return sample_name(ds->impl, index);
}

static void wds_free(wds *h)
{
    for (size_t k = 0; k < h->nshards; k++)
        if (h->fds && h->fds[k] >= 0 && ferry__remote_cache_fd(h->remote, k) < 0)
            close(h->fds[k]); /* a URL's descriptor is the cache's */
    ferry__remote_cache_destroy(h->remote); /* before the paths: its threads name them */
    for (size_t k = 0; k < h->nshards; k++)
        ferry_host_free(h->paths[k]);
    ferry_host_free(h->paths);
    ferry_host_free(h->fds);
    ferry_host_free(h->shard);
    ferry_host_free(h->name);
    ferry_host_free(h->names);
    ferry_host_free(h->ends);
    ferry_host_free(h->locs);
    for (size_t k = 0; h->mem && k < h->nshards; k++)
        ferry_host_free(h->mem[k]);
    ferry_host_free(h->mem);
    ferry_host_free(h->mem_size);
    ferry_host_free(h);
}

static void wds_destroy(ferry_dataset *ds)
{
    if (ds->impl)
        wds_free(ds->impl);
}

static size_t wds_shard_ends(const ferry_dataset *ds, const size_t **ends, const size_t **seq)
{
    const wds *h = ds->impl;
    *ends = h->ends;
    if (seq)
        *seq = NULL; /* keys in order, shard by shard */
    return h->nshards;
}

static const ferry_dataset_vtable wds_vt = {
    .get_fields = wds_get_fields, .label = wds_label, .name = wds_name, .destroy = wds_destroy,
    .uses_scratch = true, .shard_ends = wds_shard_ends};

/* ---- the fields, from what the shards hold ---- */
/* The image's format: cfg's size, else the first image's (as shards do). */
static ferry_status image_format(const wds *h, ferry_sample_format *fmt, size_t *pick)
{
    *pick = SIZE_MAX;
    if (h->cfg.height && h->cfg.width) {
        ferry__image_dataset_format(&h->cfg, h->cfg.width, h->cfg.height, false, fmt);
        return FERRY_OK;
    }
    size_t i = 0;
    while (i < h->n && h->locs[i * h->nm + h->image_m].size == UINT64_MAX)
        i++;
    if (i == h->n)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "no key in the shards has a .%s member",
                          h->m[h->image_m].spec);
    ferry_scratch *s;
    size_t n = 0;
    ferry_status st = ferry_scratch_create(&s);
    if (st == FERRY_OK)
        st = read_loc(h, i, h->image_m, s, &n);
    ferry_image_info info;
    if (st == FERRY_OK)
        st = ferry__image_header(s->file, n, sample_name(h, i), &info);
    if (st == FERRY_OK) {
        size_t w, hh;
        ferry__image_oriented_size(&h->cfg, &info, &w, &hh);
        ferry__image_dataset_format(&h->cfg, w, hh, info.channels <= 2, fmt);
        *pick = i;
    }
    ferry_scratch_destroy(s);
    return st;
}

/* An npy member's dtype and shape: every sample's header read (one pread of
 * its first bytes each); one shape, or shapes that differ only in the first
 * dimension (ragged, up to the largest). */
static ferry_status npy_field(const wds *h, size_t k, ferry_field *f)
{
    *f = (ferry_field){.name = h->m[k].spec};
    ferry_scratch *s;
    ferry_status st = ferry_scratch_create(&s);
    bool any = false;
    size_t first = 0;
    char what[4096 + 2 * FERRY_FIELD_NAME_MAX];
    for (size_t i = 0; st == FERRY_OK && i < h->n; i++) {
        const loc *l = &h->locs[i * h->nm + k];
        if (l->size == UINT64_MAX)
            continue;
        size_t head = l->size < 12 + FERRY_NPY_MAX_HEADER ? (size_t)l->size : 12 + FERRY_NPY_MAX_HEADER;
        ferry_npy a;
        snprintf(what, sizeof what, "%s: member .%s", sample_name(h, i), h->m[k].spec);
        const uint8_t *mem = h->mem ? h->mem[h->shard[i]] : NULL;
        if (mem && (st = ferry__scratch_grow(&s->file, &s->file_cap, head + 1)) == FERRY_OK)
            memcpy(s->file, mem + l->off, head);
        else if (!mem)
            st = pread_shard(h, h->shard[i], l->off, head, s, sample_name(h, i));
        if (st == FERRY_OK)
            st = ferry__npy_parse_head(s->file, head, l->size > SIZE_MAX ? SIZE_MAX : (size_t)l->size,
                                       what, &a);
        if (st != FERRY_OK)
            break;
        if (!any) {
            *f = (ferry_field){.name = h->m[k].spec, .dtype = a.dtype, .ndim = a.ndim};
            memcpy(f->shape, a.shape, sizeof a.shape);
            any = true;
            first = i;
            continue;
        }
        bool same_rest = a.dtype == f->dtype && a.ndim == f->ndim && a.ndim > 0;
        for (size_t d = 1; same_rest && d < a.ndim; d++)
            same_rest = a.shape[d] == f->shape[d];
        if (a.dtype == f->dtype && a.ndim == f->ndim && (a.ndim == 0 || !memcmp(a.shape, f->shape,
                                                                               a.ndim * sizeof a.shape[0])))
            continue;
        if (!same_rest) {
            st = ferry_fail(FERRY_ERR_FORMAT, ".%s members differ beyond their first dimension: "
                            "%s and %s (%s, %zu dimensions and %s, %zu)", h->m[k].spec,
                            sample_name(h, first), sample_name(h, i), ferry_dtype_name(f->dtype),
                            f->ndim, ferry_dtype_name(a.dtype), a.ndim);
            break;
        }
        f->ragged = true;
        if (a.shape[0] > f->shape[0])
            f->shape[0] = a.shape[0];
    }
    ferry_scratch_destroy(s);
    if (st == FERRY_OK && !any)
        st = ferry_fail(FERRY_ERR_INVALID_ARG, "no key in the shards has a .%s member",
                        h->m[k].spec);
    if (st == FERRY_OK && f->ragged && f->shape[0] == 0)
        f->shape[0] = 1; /* every array empty: room for one row */
    if (st == FERRY_OK && !f->ragged) /* 0-size dimensions: no field, unless ragged */
        for (size_t d = 0; d < f->ndim; d++)
            if (f->shape[d] == 0) {
                f->ragged = d == 0 && f->ndim > 0;
                f->shape[0] = f->ragged ? 1 : f->shape[0];
            }
    return st;
}

/* cfg.boxes_follow with an image member: the member .boxes.npy (f32 [K, 4])
 * is the image's boxes (FERRY_FIELD_BOXES_XYXY, made ragged), and each npy
 * member listed after it with one or two dimensions and as many rows at most
 * (per-box labels, scores) follows them: all move with the image. */
static void box_roles(const wds *h, ferry_field *f)
{
    size_t b = SIZE_MAX;
    for (size_t k = 0; k < h->nm && h->image_m != SIZE_MAX && h->cfg.boxes_follow; k++) {
        if (h->m[k].kind != M_NPY)
            continue;
        if (b == SIZE_MAX && !strcmp(h->m[k].spec, "boxes.npy") &&
            f[k].dtype == FERRY_DTYPE_F32 && f[k].ndim == 2 && f[k].shape[1] == 4) {
            b = k;
            f[k].ragged = true;
            f[k].role = FERRY_FIELD_BOXES_XYXY;
        } else if (b != SIZE_MAX && (f[k].ndim == 1 || f[k].ndim == 2) &&
                   f[k].shape[0] == f[b].shape[0]) {
            f[k].ragged = true;
            f[k].role = FERRY_FIELD_FOLLOWS_BOXES;
        }
    }
}

static ferry_status make_fields(const wds *h, const ferry_sample_format *fmt, ferry_field *f)
{
    for (size_t k = 0; k < h->nm; k++) {
        const char *name = h->m[k].spec;
        switch (h->m[k].kind) {
        case M_IMAGE: {
            bool hwc = fmt->layout == FERRY_LAYOUT_HWC;
            f[k] = (ferry_field){.name = name, .dtype = FERRY_DTYPE_U8, .ndim = 3,
                                 .role = FERRY_FIELD_IMAGE,
                                 .shape = {hwc ? fmt->height : fmt->channels,
                                           hwc ? fmt->width : fmt->height,
                                           hwc ? fmt->channels : fmt->width}};
            break;
        }
        case M_INT:
            f[k] = (ferry_field){.name = name, .dtype = FERRY_DTYPE_I64};
            break;
        case M_NPY: {
            ferry_status st = npy_field(h, k, &f[k]);
            if (st != FERRY_OK)
                return st;
            break;
        }
        case M_RAW: {
            uint64_t most = 0;
            for (size_t i = 0; i < h->n; i++) {
                uint64_t z = h->locs[i * h->nm + k].size;
                if (z != UINT64_MAX && z > most)
                    most = z;
            }
            f[k] = (ferry_field){.name = name, .dtype = FERRY_DTYPE_U8, .ndim = 1,
                                 .shape = {most ? (size_t)most : 1}, .ragged = true};
            break;
        }
        }
    }
    box_roles(h, f);
    return FERRY_OK;
}

static ferry_status open_all(wds *h, const char *const *paths, size_t n)
{
    ferry_status st = ferry__shard_paths(paths, n, &h->paths, &h->nshards);
    if (st != FERRY_OK)
        return st;
    h->fds = ferry_host_malloc(h->nshards * sizeof *h->fds);
    h->ends = ferry_host_malloc(h->nshards * sizeof *h->ends);
    if (!h->fds || !h->ends)
        return FERRY_ERR_NO_MEMORY;
    for (size_t k = 0; k < h->nshards; k++)
        h->fds[k] = -1;
    const ferry_image_config *c = &h->cfg;
    ferry_remote_setup rs = {
        .paths = h->paths, .n = h->nshards, .dir = c->remote_cache_dir,
        .budget = c->remote_cache_bytes ? c->remote_cache_bytes : (size_t)4 << 30,
        .opts = {.timeout_s = c->remote_timeout_s > 0 ? c->remote_timeout_s : 10.0,
                 .retries = c->remote_retries ? (unsigned)c->remote_retries : 5,
                 .backoff_s = 0.1}};
    if ((st = ferry__remote_cache_create(&rs, &h->remote)) != FERRY_OK)
        return st;
    for (size_t k = 0; k < h->nshards && st == FERRY_OK; k++) {
        st = walk_shard(h, (uint32_t)k);
        h->ends[k] = h->n;
    }
    if (st == FERRY_OK && h->n == 0)
        st = ferry_fail(FERRY_ERR_INVALID_ARG, "no key in the %zu shards has any member asked for",
                        h->nshards);
    return st;
}

ferry_status ferry_dataset_shards_fields(const char *const *paths, size_t n,
                                         const ferry_image_config *cfg, const char *const *members,
                                         size_t num_members, ferry_dataset **out)
{
    if (!out)
        return FERRY_ARG_ERROR("out is NULL");
    *out = NULL;
    if (!paths || !n)
        return FERRY_ARG_ERROR("%s", !paths ? "paths is NULL" : "no paths (n is 0)");
    for (size_t i = 0; i < n; i++)
        if (!paths[i])
            return FERRY_ARG_ERROR("paths[%zu] is NULL", i);
    wds *h = ferry_host_calloc(1, sizeof *h);
    if (!h)
        return FERRY_ERR_NO_MEMORY;
    ferry_status st = parse_specs(h, members, num_members);
    if (st == FERRY_OK)
        st = ferry__image_config_check(cfg, &h->cfg);
    if (st == FERRY_OK)
        st = open_all(h, paths, n);
    ferry_sample_format fmt = {0};
    size_t pick = SIZE_MAX;
    ferry_field f[FERRY_FIELD_MAX];
    if (st == FERRY_OK && h->image_m != SIZE_MAX)
        st = image_format(h, &fmt, &pick);
    if (st == FERRY_OK)
        st = make_fields(h, &fmt, f);
    if (st == FERRY_OK)
        st = ferry__fields_check(f, h->nm, "shards");
    if (st != FERRY_OK) {
        wds_free(h);
        return st == FERRY_ERR_INVALID_ARG ? FERRY_ARG_CONTEXT(st) : st;
    }
    ferry_dataset *ds;
    if ((st = ferry__dataset_new_fields(&wds_vt, h, h->n, f, h->nm, 0, &ds)) != FERRY_OK)
        return st;
    if (h->image_m != SIZE_MAX) { /* the image's own format (an HWC one included) */
        ds->format = fmt;
        ds->sample_bytes = ferry_sample_format_bytes(&fmt);
        if (pick != SIZE_MAX) {
            snprintf(ds->size_from, sizeof ds->size_from, "%s", sample_name(h, pick));
            ds->channels_from = h->cfg.channels ? 0 : fmt.channels;
        }
    }
    *out = ds;
    return FERRY_OK;
}

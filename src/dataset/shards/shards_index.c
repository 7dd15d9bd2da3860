/* One shard's index: walk its members, keep the image (.png, .jpg, .jpeg) and .cls ones by key, read
 * the labels (they are a few bytes, read with the headers), then sort by key and
 * pair each image with its label. A shard whose headers cannot be trusted fails
 * here; a key that is merely incomplete becomes a sample that fails by name
 * when loaded. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.h"
#include "common/redact.h"
#include "dataset/shards/gz.h"
#include "dataset/shards/shards.h"
#include "dataset/shards/tar.h"

/* An image or .cls member, kept until the shard is sorted. */
typedef struct entry {
    size_t name_off;      /* the member's name in the pool; becomes `name` after the walk */
    const char *name;
    size_t key_len;       /* the key is the name's first key_len bytes */
    uint8_t is_label;
    uint64_t hdr, data, size;
    int64_t label;        /* .cls: the value, or -1 when it is not a label */
} entry;

typedef struct entries {
    entry *v;
    size_t n, cap;
    char *pool;           /* member names, NUL-terminated */
    size_t pool_len, pool_cap;
} entries;

static void entries_free(entries *e)
{
    ferry_host_free(e->v);
    ferry_host_free(e->pool);
}

static ferry_status grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap && *p)
        return FERRY_OK;
    size_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    size_t bytes;
    if (!ferry_mul_size(c, elem, &bytes)) {
        ferry_fail(FERRY_ERR_NO_MEMORY, "shard index: %zu entries overflow", c);
        return FERRY_ERR_NO_MEMORY;
    }
    void *q = ferry_host_realloc(*p, bytes);
    if (!q)
        return FERRY_ERR_NO_MEMORY;
    *p = q;
    *cap = c;
    return FERRY_OK;
}

/* Appends s (n bytes) and a NUL to a pool; *off: where it starts. */
static ferry_status pool_add(char **pool, size_t *len, size_t *cap, const char *s, size_t n,
                             size_t *off)
{
    void *p = *pool;
    ferry_status st = grow(&p, cap, *len + n + 1, 1);
    *pool = p;
    if (st != FERRY_OK)
        return st;
    memcpy(*pool + *len, s, n);
    (*pool)[*len + n] = '\0';
    *off = *len;
    *len += n + 1;
    return FERRY_OK;
}

/* "./a/b" is "a/b": GNU tar run on "." writes names that way. */
static const char *strip_dot_slash(const char *name)
{
    while (name[0] == '.' && name[1] == '/')
        name += 2;
    return name;
}

/* WebDataset's rule: the key is the name up to the first '.' of its last
 * component, the extension what follows. Hidden names (macOS "._x.png"
 * resource forks among them) and names without a '.' belong to no sample. */
static bool split_member(const char *name, size_t *key_len, const char **ext)
{
    const char *slash = strrchr(name, '/'), *base = slash ? slash + 1 : name;
    const char *dot = strchr(base, '.');
    if (base[0] == '.' || !dot)
        return false;
    *key_len = (size_t)(dot - name);
    *ext = dot + 1;
    return true;
}

/* A .cls member: a decimal integer from 0 to 2^31 - 1, white space around it
 * allowed; -1 for anything else. */
static int64_t parse_label(const uint8_t *d, size_t n)
{
    size_t i = 0;
    int64_t v = 0;
    while (i < n && (d[i] == ' ' || d[i] == '\t' || d[i] == '\r' || d[i] == '\n'))
        i++;
    size_t first = i;
    for (; i < n && d[i] >= '0' && d[i] <= '9'; i++) {
        v = v * 10 + (d[i] - '0');
        if (v > INT32_MAX)
            return -1;
    }
    if (i == first)
        return -1;
    while (i < n && (d[i] == ' ' || d[i] == '\t' || d[i] == '\r' || d[i] == '\n'))
        i++;
    return i == n ? v : -1;
}

/* Labels are read with the headers; anything longer than this is not one. */
#define MAX_LABEL_BYTES 64
/* The class-names member is read through the walk's window (1 MiB). */
#define MAX_CLASSES_BYTES (512u << 10)

static ferry_status add_entry(ferry_tar_walk *w, const ferry_tar_member *m, const char *name,
                              size_t key_len, bool is_label, entries *e)
{
    void *v = e->v;
    ferry_status st = grow(&v, &e->cap, e->n + 1, sizeof *e->v);
    e->v = v;
    if (st != FERRY_OK)
        return st;
    entry *x = &e->v[e->n];
    *x = (entry){.key_len = key_len, .is_label = is_label, .hdr = m->header_off,
                 .data = m->data_off, .size = m->size, .label = -1};
    if (is_label && m->size <= MAX_LABEL_BYTES) {
        const uint8_t *d;
        if ((st = ferry__tar_read(w, m->data_off, (size_t)m->size, &d)) != FERRY_OK)
            return st;
        x->label = parse_label(d, (size_t)m->size);
    }
    if ((st = pool_add(&e->pool, &e->pool_len, &e->pool_cap, name, strlen(name), &x->name_off)) != FERRY_OK)
        return st;
    e->n++;
    return FERRY_OK;
}

/* The class names: one a line, none empty; a last line without '\n' counts. */
static ferry_status parse_classes(ferry_tar_walk *w, const ferry_tar_member *m, const char *name,
                                  ferry_shard_part *out)
{
    const uint8_t *d;
    if (out->classes)
        return ferry_fail_at(FERRY_ERR_FORMAT, w->shard, "member %s at byte %llu: a second class-names "
                             "member (the first is %s)", name,
                             (unsigned long long)m->header_off, out->classes_member);
    if (m->size > MAX_CLASSES_BYTES)
        return ferry_fail_at(FERRY_ERR_LIMIT, w->shard, "member %s at byte %llu is %llu bytes, over the "
                             "%u-byte limit for class names", name,
                             (unsigned long long)m->header_off, (unsigned long long)m->size,
                             (unsigned)MAX_CLASSES_BYTES);
    ferry_status st = ferry__tar_read(w, m->data_off, (size_t)m->size, &d);
    if (st != FERRY_OK)
        return st;
    size_t n = (size_t)m->size, lines = 0;
    for (size_t i = 0; i < n; i++)
        lines += d[i] == '\n';
    lines += n && d[n - 1] != '\n';
    if (!lines)
        return ferry_fail_at(FERRY_ERR_FORMAT, w->shard, "member %s at byte %llu holds no class names",
                             name, (unsigned long long)m->header_off);
    if (!(out->classes = ferry_host_calloc(lines, sizeof *out->classes)))
        return FERRY_ERR_NO_MEMORY;
    snprintf(out->classes_member, sizeof out->classes_member, "%s", name);
    size_t at = 0;
    for (size_t k = 0; k < lines; k++) {
        const uint8_t *nl = memchr(d + at, '\n', n - at);
        size_t len = (nl ? (size_t)(nl - d) : n) - at, next = at + len + 1;
        if (len && d[at + len - 1] == '\r')
            len--;
        if (!len)
            return ferry_fail_at(FERRY_ERR_FORMAT, w->shard, "member %s at byte %llu: line %zu is empty",
                                 name, (unsigned long long)m->header_off, k + 1);
        if (!(out->classes[k] = ferry_host_malloc(len + 1)))
            return FERRY_ERR_NO_MEMORY;
        out->nclasses = k + 1;
        memcpy(out->classes[k], d + at, len);
        out->classes[k][len] = '\0';
        at = next;
    }
    return FERRY_OK;
}

static const char *kind_words(ferry_tar_kind k)
{
    switch (k) {
    case FERRY_TAR_HARDLINK: return "a hard link";
    case FERRY_TAR_SYMLINK: return "a symbolic link";
    case FERRY_TAR_DEVICE: return "a device";
    case FERRY_TAR_FIFO: return "a FIFO";
    default: return "of an unsupported type";
    }
}

/* One member: kept, ignored, or the end of the index. */
static ferry_status take_member(ferry_tar_walk *w, const ferry_tar_member *m, entries *e,
                                ferry_shard_part *out)
{
    const char *name = strip_dot_slash(m->name);
    if (m->kind == FERRY_TAR_DIR)
        return FERRY_OK; /* no bytes: GNU tar and Python write one per folder added */
    if (m->kind != FERRY_TAR_FILE)
        return ferry_fail_at(FERRY_ERR_FORMAT, w->shard, "member %s at byte %llu is %s (type '%c'); a "
                             "shard must hold its files' bytes", name,
                             (unsigned long long)m->header_off, kind_words(m->kind),
                             m->type >= 32 && m->type < 127 ? m->type : '?');
    if (!strcmp(name, FERRY_SHARD_CLASSES_A) || !strcmp(name, FERRY_SHARD_CLASSES_B))
        return parse_classes(w, m, name, out);
    size_t key_len;
    const char *ext;
    if (!split_member(name, &key_len, &ext))
        return FERRY_OK;
    /* The image: KEY.png, KEY.jpg or KEY.jpeg (WebDataset's keys; any case). */
    bool img = !strcasecmp(ext, "png") || !strcasecmp(ext, "jpg") || !strcasecmp(ext, "jpeg");
    bool cls = !strcasecmp(ext, "cls");
    return img || cls ? add_entry(w, m, name, key_len, cls, e) : FERRY_OK;
}

static int cmp_entry(const void *pa, const void *pb)
{
    const entry *a = pa, *b = pb;
    size_t n = a->key_len < b->key_len ? a->key_len : b->key_len;
    int c = memcmp(a->name, b->name, n);
    if (c)
        return c;
    if (a->key_len != b->key_len)
        return a->key_len < b->key_len ? -1 : 1;
    if (a->is_label != b->is_label)
        return a->is_label ? 1 : -1;
    return a->hdr < b->hdr ? -1 : a->hdr > b->hdr;
}

static bool same_key(const entry *a, const entry *b)
{
    return a->key_len == b->key_len && !memcmp(a->name, b->name, a->key_len);
}

/* The sample of the key run [a, b): one image and one label at most. */
static ferry_status add_sample(const char *shard, uint32_t k, const entry *v, size_t a, size_t b,
                               ferry_shard_part *out)
{
    const entry *img = NULL, *cls = NULL;
    for (size_t i = a; i < b; i++) {
        const entry **slot = v[i].is_label ? &cls : &img;
        if (*slot)
            return ferry_fail_at(FERRY_ERR_FORMAT, shard, "duplicate key: member %s at byte %llu and "
                                 "member %s at byte %llu are both the %s of key %.*s",
                                 (*slot)->name, (unsigned long long)(*slot)->hdr, v[i].name,
                                 (unsigned long long)v[i].hdr, v[i].is_label ? "label" : "image",
                                 (int)v[i].key_len, v[i].name);
        *slot = &v[i];
    }
    void *p = out->samples;
    ferry_status st = grow(&p, &out->cap, out->n + 1, sizeof *out->samples);
    out->samples = p;
    if (st != FERRY_OK)
        return st;
    ferry_shard_sample *s = &out->samples[out->n];
    *s = (ferry_shard_sample){.shard = k, .label = cls ? cls->label : -1};
    s->problem = !img ? FERRY_SHARD_NO_IMAGE : !cls ? FERRY_SHARD_NO_LABEL :
                 cls->label < 0 ? FERRY_SHARD_BAD_LABEL : FERRY_SHARD_OK;
    /* The run is not empty: e is the image, else the label. */
    const entry *e = img ? img : &v[a];
    s->hdr_off = e->hdr;
    if (img) {
        s->img_off = img->data;
        s->img_size = img->size;
    }
    s->cls_off = cls ? cls->hdr : 0;
    /* "SHARD:KEY.png", or "SHARD:KEY" when there is no image; a URL's
     * password is not part of the name (it is printed). */
    char disp[4096];
    size_t nl = ferry_redact_urls(shard, disp, sizeof disp), ml = img ? strlen(img->name) : e->key_len;
    nl = nl < sizeof disp ? nl : sizeof disp - 1;
    void *q = out->names;
    if ((st = grow(&q, &out->names_cap, out->names_len + nl + ml + 2, 1)) != FERRY_OK)
        return st;
    out->names = q;
    s->name = out->names_len;
    char *d = out->names + out->names_len;
    memcpy(d, disp, nl);
    d[nl] = ':';
    memcpy(d + nl + 1, e->name, ml);
    d[nl + 1 + ml] = '\0';
    out->names_len += nl + ml + 2;
    out->n++;
    return FERRY_OK;
}

static ferry_status build_samples(const char *shard, uint32_t k, entries *e, ferry_shard_part *out)
{
    for (size_t i = 0; i < e->n; i++)
        e->v[i].name = e->pool + e->v[i].name_off;
    if (e->n)
        qsort(e->v, e->n, sizeof *e->v, cmp_entry);
    ferry_status st = FERRY_OK;
    for (size_t a = 0, b; a < e->n && st == FERRY_OK; a = b) {
        for (b = a + 1; b < e->n && same_key(&e->v[a], &e->v[b]);)
            b++;
        st = add_sample(shard, k, e->v, a, b, out);
    }
    return st;
}

/* A file compressed other than with gzip is not a tar: say so instead of "bad
 * checksum". */
static ferry_status explain_first_header(ferry_tar_walk *w, ferry_status st)
{
    const uint8_t *d;
    if (w->gz || w->file_size < 6 || ferry__tar_read(w, 0, 6, &d) != FERRY_OK)
        return st;
    const char *kind = !memcmp(d, "BZh", 3) ? "bzip2" :
                       d[0] == 0xfd && !memcmp(d + 1, "7zXZ", 5) ? "xz" :
                       d[0] == 0x28 && d[1] == 0xb5 && d[2] == 0x2f && d[3] == 0xfd ? "zstd" : NULL;
    if (!kind)
        return st;
    return ferry_fail_at(FERRY_ERR_UNSUPPORTED, w->shard, "is %s-compressed; ferry reads tar shards "
                         "uncompressed or gzip-compressed (.tar.gz)", kind);
}

ferry_status ferry__shard_is_gzip(int fd, const char *path, bool *gz)
{
    uint8_t b[2];
    ssize_t r;
    while ((r = pread(fd, b, 2, 0)) < 0 && errno == EINTR)
        ;
    if (r < 0)
        return ferry_fail_at(FERRY_ERR_IO, path, "%s", strerror(errno));
    *gz = r == 2 && ferry__gz_magic(b);
    return FERRY_OK;
}

/* Walks the tar (in w) front to back into out's samples. */
static ferry_status index_walk(ferry_tar_walk *w, const char *path, uint32_t k,
                               ferry_shard_part *out)
{
    entries e = {0};
    bool end = false;
    ferry_status st = FERRY_OK;
    while (st == FERRY_OK && !end) {
        ferry_tar_member m;
        uint64_t at = w->pos;
        st = ferry__tar_next(w, &m, &end);
        if (st != FERRY_OK && at == 0)
            st = explain_first_header(w, st);
        if (st == FERRY_OK && !end)
            st = take_member(w, &m, &e, out);
    }
    if (st == FERRY_OK)
        st = build_samples(path, k, &e, out);
    entries_free(&e);
    return st;
}

ferry_status ferry__shard_index(const char *path, int fd, uint32_t k, ferry_shard_part *out)
{
    memset(out, 0, sizeof *out);
    struct stat sb;
    bool gz = false;
    if (fstat(fd, &sb) != 0)
        return ferry_fail_at(FERRY_ERR_IO, path, "%s", strerror(errno));
    ferry_status st = ferry__shard_is_gzip(fd, path, &gz);
    if (st != FERRY_OK)
        return st;
    ferry_gz g = {.fd = -1};
    ferry_tar_walk w = {0};
    if (gz && (st = ferry__gz_open(&g, fd, path)) == FERRY_OK)
        st = ferry__tar_walk_init_gz(&w, &g, path);
    else if (!gz)
        st = ferry__tar_walk_init(&w, fd, path, (uint64_t)sb.st_size);
    if (st == FERRY_OK)
        st = index_walk(&w, path, k, out);
    out->gzip = gz;
    ferry__tar_walk_free(&w);
    ferry__gz_close(&g);
    if (st != FERRY_OK)
        ferry__shard_part_free(out);
    return st;
}

void ferry__shard_part_free(ferry_shard_part *p)
{
    for (size_t i = 0; p->classes && i < p->nclasses; i++)
        ferry_host_free(p->classes[i]);
    ferry_host_free(p->classes);
    ferry_host_free(p->samples);
    ferry_host_free(p->names);
    memset(p, 0, sizeof *p);
}

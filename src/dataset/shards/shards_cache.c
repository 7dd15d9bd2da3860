/* A shard's index saved beside it (SHARD.ferry-index), when the image config
 * asks for it: indexing reads every header of a shard, and decompresses the
 * whole of a gzip one, which for large datasets is minutes at every start.
 * The file is only trusted when it matches the shard's size and modification
 * time and its own CRC-32; anything else (absent, stale, damaged, from another
 * build) is ignored and the shard indexed again. It is written atomically
 * (common/atomic_file.c), so a crash leaves the old file or the new one.
 *
 * Layout (host byte order; the magic and the record size tell another build's
 * apart): head, then n ferry_shard_sample records, the sample names without
 * the "SHARD:" prefix (NUL-terminated, in sample order), the class names
 * (NUL-terminated), and the CRC-32 of all that. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "common/atomic_file.h"
#include "common/error.h"
#include "common/redact.h"
#include "dataset/shards/shards.h"

#define SUFFIX FERRY_SHARD_INDEX_SUFFIX
#define MAGIC "FERRYIX1"
#define VERSION 2 /* 2: .jpg and .jpeg members are images too */
/* An index bigger than this is not one of ours. */
#define MAX_INDEX_BYTES ((uint64_t)1 << 34)

typedef struct head {
    char magic[8];
    uint32_t version, record;   /* 1; sizeof(ferry_shard_sample) */
    uint64_t shard_size;
    int64_t mtime_s, mtime_ns;
    uint64_t n, names_len, classes_len, nclasses;
    uint8_t gzip, pad[7];
    char classes_member[32];
} head;

size_t ferry__shard_index_max_bytes(uint64_t shard_size)
{
    /* Each sample has a member, and each member a 512-byte header; its name
     * is at most the 256 bytes a ustar header holds (a shard of longer pax
     * names may exceed this, and is then indexed from its bytes). */
    uint64_t records = shard_size / 512 + 1;
    uint64_t classes = shard_size < (512u << 10) ? shard_size : (512u << 10);
    uint64_t max = sizeof(head) + 4 + records * (sizeof(ferry_shard_sample) + 256) + classes;
    return max < FERRY_SHARD_INDEX_MAX_FETCH ? (size_t)max : (size_t)FERRY_SHARD_INDEX_MAX_FETCH;
}

static bool index_path(const char *shard, char *out, size_t cap)
{
    return (size_t)snprintf(out, cap, "%s%s", shard, SUFFIX) < cap;
}

static head head_of(const struct stat *sb, const ferry_shard_part *p)
{
    head h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, MAGIC, 8);
    h.version = VERSION;
    h.record = (uint32_t)sizeof(ferry_shard_sample);
    h.shard_size = (uint64_t)sb->st_size;
    h.mtime_s = (int64_t)sb->st_mtim.tv_sec;
    h.mtime_ns = (int64_t)sb->st_mtim.tv_nsec;
    if (p) {
        h.n = p->n;
        h.nclasses = p->nclasses;
        h.gzip = p->gzip;
        memcpy(h.classes_member, p->classes_member, sizeof h.classes_member);
    }
    return h;
}

/* ---- save ---- */

typedef struct writer {
    ferry_atomic_file f;
    uLong crc;
    ferry_status st;
} writer;

static void put(writer *w, const void *p, size_t n)
{
    if (w->st != FERRY_OK || !n)
        return;
    w->crc = crc32_z(w->crc, p, n);
    w->st = ferry_atomic_write(&w->f, p, n);
}

/* Whether the shard (fd) is still as it was when indexed (before). */
static ferry_status unchanged(int fd, const struct stat *before, const char *path, const char *ip,
                              struct stat *sb)
{
    if (fstat(fd, sb) != 0)
        return ferry_fail(FERRY_ERR_IO, "%s: cannot be written", ip);
    if (sb->st_size != before->st_size || sb->st_mtim.tv_sec != before->st_mtim.tv_sec ||
        sb->st_mtim.tv_nsec != before->st_mtim.tv_nsec)
        return ferry_fail_at(FERRY_ERR_IO, path, "changed while it was indexed; %s not written",
                             ip);
    return FERRY_OK;
}

/* The index into w's file (opened), then committed; aborted on failure. */
static ferry_status write_index(writer *w, const struct stat *sb, const char *path,
                                const ferry_shard_part *p)
{
    char disp[4096]; /* the names begin "SHARD:", SHARD as unpack writes it */
    size_t prefix = ferry_redact_urls(path, disp, sizeof disp);
    prefix = (prefix < sizeof disp ? prefix : sizeof disp - 1) + 1;
    head h = head_of(sb, p);
    for (size_t i = 0; i < p->n; i++)
        h.names_len += strlen(p->names + p->samples[i].name) - prefix + 1;
    for (size_t c = 0; c < p->nclasses; c++)
        h.classes_len += strlen(p->classes[c]) + 1;
    w->crc = crc32(0, NULL, 0);
    put(w, &h, sizeof h);
    for (size_t i = 0, at = 0; i < p->n; i++) { /* name: an offset into the key names */
        ferry_shard_sample s = p->samples[i];
        s.name = at;
        at += strlen(p->names + p->samples[i].name) - prefix + 1;
        put(w, &s, sizeof s);
    }
    for (size_t i = 0; i < p->n; i++) {
        const char *key = p->names + p->samples[i].name + prefix;
        put(w, key, strlen(key) + 1);
    }
    for (size_t c = 0; c < p->nclasses; c++)
        put(w, p->classes[c], strlen(p->classes[c]) + 1);
    uint32_t crc = (uint32_t)w->crc;
    if (w->st == FERRY_OK)
        w->st = ferry_atomic_write(&w->f, &crc, sizeof crc);
    if (w->st != FERRY_OK) {
        ferry_atomic_abort(&w->f);
        return w->st;
    }
    return ferry_atomic_commit(&w->f);
}

ferry_status ferry__shard_index_save(const char *path, int fd, const struct stat *before,
                                     const ferry_shard_part *p)
{
    char ip[4096];
    struct stat sb;
    writer w = {.st = FERRY_OK};
    if (!index_path(path, ip, sizeof ip))
        return ferry_fail(FERRY_ERR_IO, "%s%s: cannot be written", path, SUFFIX);
    ferry_status st = unchanged(fd, before, path, ip, &sb);
    if (st != FERRY_OK || (st = ferry_atomic_open(&w.f, ip)) != FERRY_OK)
        return st;
    return write_index(&w, &sb, path, p);
}

ferry_status ferry__shard_index_save_at(int dfd, const char *dir, const char *name,
                                        const char *path, int fd, const struct stat *before,
                                        const ferry_shard_part *p)
{
    char ip[4096 + 256];
    struct stat sb;
    writer w = {.st = FERRY_OK};
    snprintf(ip, sizeof ip, "%s/%s", dir, name);
    ferry_status st = unchanged(fd, before, path, ip, &sb);
    /* Only the user may read it (the cache folder is theirs alone). */
    if (st != FERRY_OK || (st = ferry_atomic_open_at(&w.f, dfd, dir, name, 0600)) != FERRY_OK)
        return st;
    return write_index(&w, &sb, path, p);
}

/* ---- load ---- */

/* The file's bytes into *d (*n of them) when its head matches the shard
 * (sb) and its length what the head says; *d NULL otherwise. Running out of
 * memory is the only failure. */
static ferry_status read_index(const char *ip, const struct stat *sb, uint8_t **d, size_t *n)
{
    *d = NULL;
    FILE *f = fopen(ip, "rb");
    if (!f)
        return FERRY_OK;
    ferry_status st = FERRY_OK;
    struct stat fs;
    head h, want = head_of(sb, NULL);
    uint64_t total = 0;
    bool ok = fstat(fileno(f), &fs) == 0 && S_ISREG(fs.st_mode) &&
              fread(&h, sizeof h, 1, f) == 1 && !memcmp(h.magic, want.magic, 8) &&
              h.version == want.version && h.record == want.record &&
              h.shard_size == want.shard_size && h.mtime_s == want.mtime_s &&
              h.mtime_ns == want.mtime_ns && h.n < MAX_INDEX_BYTES / sizeof(ferry_shard_sample) &&
              h.names_len < MAX_INDEX_BYTES && h.classes_len < MAX_INDEX_BYTES;
    if (ok) {
        total = sizeof h + h.n * sizeof(ferry_shard_sample) + h.names_len + h.classes_len + 4;
        ok = total == (uint64_t)fs.st_size && total <= MAX_INDEX_BYTES;
    }
    if (ok && !(*d = ferry_host_malloc((size_t)total))) {
        st = FERRY_ERR_NO_MEMORY;
    } else if (ok) {
        memcpy(*d, &h, sizeof h);
        *n = (size_t)total;
        if (fread(*d + sizeof h, 1, *n - sizeof h, f) != *n - sizeof h) {
            ferry_host_free(*d);
            *d = NULL;
        }
    }
    fclose(f);
    return st;
}

/* Whether d (n bytes, its head and length already checked by read_index) is
 * whole and self-consistent. */
static bool valid(const uint8_t *d, size_t n)
{
    head h;
    memcpy(&h, d, sizeof h);
    if (h.nclasses > h.classes_len)
        return false;
    uint64_t body = sizeof h + h.n * sizeof(ferry_shard_sample) + h.names_len + h.classes_len;
    uint32_t crc;
    if (body + sizeof crc != n)
        return false;
    memcpy(&crc, d + body, sizeof crc);
    if (crc != (uint32_t)crc32_z(crc32(0, NULL, 0), d, (size_t)body))
        return false;
    /* The name and class blobs hold exactly the strings the counts say. */
    const char *names = (const char *)d + sizeof h + h.n * sizeof(ferry_shard_sample);
    size_t strings = 0;
    for (uint64_t i = 0; i < h.names_len; i++)
        strings += names[i] == '\0';
    if (strings != h.n || (h.names_len && names[h.names_len - 1]))
        return false;
    strings = 0;
    for (uint64_t i = 0; i < h.classes_len; i++)
        strings += names[h.names_len + i] == '\0';
    return strings == h.nclasses && (!h.classes_len || !names[h.names_len + h.classes_len - 1]);
}

/* A record as the indexer writes it: one of the problems found while
 * indexing (label ranges are settled later), a label that fits the problem,
 * an image after its header and, in a plain shard, inside it. The CRC
 * catches damage; this, a file made to fool. */
static bool record_fits(const ferry_shard_sample *s, const head *h)
{
    if (s->label < -1 || s->label > INT32_MAX)
        return false;
    switch ((ferry_shard_problem)s->problem) {
    case FERRY_SHARD_NO_IMAGE:
        return true; /* its label, if any, is all there is */
    case FERRY_SHARD_OK:
        if (s->label < 0)
            return false;
        break;
    case FERRY_SHARD_NO_LABEL:
    case FERRY_SHARD_BAD_LABEL:
        if (s->label != -1)
            return false;
        break;
    default:
        return false;
    }
    /* Every sum below stays under 2^63: a crafted offset near 2^64 must not
     * wrap into a small one (the CRC is no signature; a server recomputes it). */
    const uint64_t big = (uint64_t)1 << 62;
    if (s->hdr_off > big || s->img_off > big || s->img_size > big ||
        s->img_off < s->hdr_off + 512)
        return false;
    return h->gzip || (s->img_off <= h->shard_size && s->img_size <= h->shard_size - s->img_off);
}

static int cmp_span(const void *pa, const void *pb)
{
    const uint64_t *a = pa, *b = pb;
    return a[0] < b[0] ? -1 : a[0] > b[0];
}

/* No two images share bytes: a gzip stream passes them in order. */
static ferry_status images_apart(const ferry_shard_part *p)
{
    uint64_t (*v)[2] = ferry_host_malloc((p->n ? p->n : 1) * sizeof *v);
    if (!v)
        return FERRY_ERR_NO_MEMORY;
    size_t m = 0;
    for (size_t i = 0; i < p->n; i++)
        if (p->samples[i].problem != FERRY_SHARD_NO_IMAGE) {
            v[m][0] = p->samples[i].img_off;
            v[m++][1] = p->samples[i].img_off + p->samples[i].img_size;
        }
    qsort(v, m, sizeof *v, cmp_span);
    bool ok = true;
    for (size_t i = 1; i < m && ok; i++)
        ok = v[i][0] >= v[i - 1][1];
    ferry_host_free(v);
    return ok ? FERRY_OK : FERRY_ERR_FORMAT;
}

/* The part from a valid index: names prefixed with this path, shard k. */
static ferry_status unpack(const uint8_t *d, const char *path, uint32_t k, ferry_shard_part *out)
{
    head h;
    memcpy(&h, d, sizeof h);
    const uint8_t *rec = d + sizeof h;
    const char *keys = (const char *)rec + h.n * sizeof(ferry_shard_sample);
    const char *cls = keys + h.names_len;
    char disp[4096]; /* the names' prefix: the path, a URL's password cut out */
    size_t plen = ferry_redact_urls(path, disp, sizeof disp);
    plen = plen < sizeof disp ? plen : sizeof disp - 1;
    out->gzip = h.gzip;
    memcpy(out->classes_member, h.classes_member, sizeof out->classes_member);
    out->classes_member[sizeof out->classes_member - 1] = '\0';
    out->names_cap = h.names_len + h.n * (plen + 1);
    out->samples = ferry_host_malloc(h.n ? h.n * sizeof *out->samples : 1);
    out->names = ferry_host_malloc(out->names_cap ? out->names_cap : 1);
    if (!out->samples || !out->names)
        return FERRY_ERR_NO_MEMORY;
    out->cap = out->n = h.n;
    for (size_t i = 0; i < h.n; i++) {
        ferry_shard_sample s;
        memcpy(&s, rec + i * sizeof s, sizeof s);
        if (s.name >= h.names_len || !record_fits(&s, &h))
            return FERRY_ERR_FORMAT;
        const char *key = keys + s.name;
        size_t kl = strlen(key); /* the blob ends in a NUL (valid()) */
        if (out->names_len + plen + kl + 2 > out->names_cap)
            return FERRY_ERR_FORMAT;
        s.shard = k;
        s.name = out->names_len;
        memcpy(out->names + out->names_len, disp, plen);
        out->names[out->names_len + plen] = ':';
        memcpy(out->names + out->names_len + plen + 1, key, kl + 1);
        out->names_len += plen + kl + 2;
        out->samples[i] = s;
    }
    ferry_status st = images_apart(out);
    if (st != FERRY_OK)
        return st;
    if (h.nclasses) {
        if (!(out->classes = ferry_host_calloc(h.nclasses, sizeof *out->classes)))
            return FERRY_ERR_NO_MEMORY;
        for (size_t c = 0; c < h.nclasses; c++, cls += strlen(cls) + 1) {
            if (!(out->classes[c] = ferry_host_strdup(cls)))
                return FERRY_ERR_NO_MEMORY;
            out->nclasses = c + 1;
        }
    }
    return FERRY_OK;
}

ferry_status ferry__shard_index_load(const char *path, int fd, uint32_t k, ferry_shard_part *out,
                                     bool *found)
{
    memset(out, 0, sizeof *out);
    *found = false;
    char ip[4096];
    struct stat sb;
    size_t n = 0;
    uint8_t *d = NULL;
    bool gz;
    if (!index_path(path, ip, sizeof ip) || fstat(fd, &sb) != 0 ||
        ferry__shard_is_gzip(fd, path, &gz) != FERRY_OK) {
        ferry_clear_error();
        return FERRY_OK; /* indexing the shard will say what is wrong */
    }
    ferry_status st = read_index(ip, &sb, &d, &n);
    if (st != FERRY_OK || !d)
        return st;
    if (valid(d, n) && ((const head *)(const void *)d)->gzip == gz) {
        st = unpack(d, path, k, out);
        *found = st == FERRY_OK;
        if (st == FERRY_ERR_FORMAT) { /* crafted, not merely damaged: index the shard */
            st = FERRY_OK;
            ferry_clear_error();
        }
    }
    ferry_host_free(d);
    if (!*found)
        ferry__shard_part_free(out);
    return st;
}

ferry_status ferry__shard_index_parse(const uint8_t *d, size_t n, const char *path,
                                      uint64_t shard_size, uint32_t k, ferry_shard_part *out,
                                      bool *found)
{
    memset(out, 0, sizeof *out);
    *found = false;
    head h, want;
    memset(&want, 0, sizeof want);
    memcpy(want.magic, MAGIC, 8);
    if (n < sizeof h)
        return FERRY_OK;
    memcpy(&h, d, sizeof h);
    /* The shard's time is not known from afar: its size and the CRC decide. */
    if (memcmp(h.magic, want.magic, 8) != 0 || h.version != VERSION ||
        h.record != sizeof(ferry_shard_sample) || h.shard_size != shard_size ||
        h.n >= MAX_INDEX_BYTES / sizeof(ferry_shard_sample) || h.names_len >= MAX_INDEX_BYTES ||
        h.classes_len >= MAX_INDEX_BYTES ||
        sizeof h + h.n * sizeof(ferry_shard_sample) + h.names_len + h.classes_len + 4 != n ||
        !valid(d, n))
        return FERRY_OK;
    ferry_status st = unpack(d, path, k, out);
    *found = st == FERRY_OK;
    if (st == FERRY_ERR_FORMAT) {
        st = FERRY_OK;
        ferry_clear_error();
    }
    if (!*found)
        ferry__shard_part_free(out);
    return st;
}

ferry_status ferry__shard_index_load_at(int dfd, const char *name, const char *path,
                                        uint64_t shard_size, uint32_t k, ferry_shard_part *out,
                                        bool *found)
{
    memset(out, 0, sizeof *out);
    *found = false;
    /* No link is followed: one at the name makes it no index at all. */
    int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat fs;
    if (fd < 0)
        return FERRY_OK;
    ferry_status st = FERRY_OK;
    uint8_t *d = NULL;
    if (fstat(fd, &fs) == 0 && S_ISREG(fs.st_mode) && fs.st_size > 0 &&
        (uint64_t)fs.st_size <= MAX_INDEX_BYTES) {
        size_t n = (size_t)fs.st_size, got = 0;
        if (!(d = ferry_host_malloc(n)))
            st = FERRY_ERR_NO_MEMORY;
        while (d && got < n) {
            ssize_t r = pread(fd, d + got, n - got, (off_t)got);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0)
                break;
            got += (size_t)r;
        }
        if (d && got == n)
            st = ferry__shard_index_parse(d, n, path, shard_size, k, out, found);
    }
    close(fd);
    ferry_host_free(d);
    return st;
}

/* The safetensors format: reader (a defensive JSON header parser: every length,
 * offset and nesting level is checked, and bad input is FERRY_ERR_FORMAT, never
 * a crash) and writer. Data is little-endian, as on every machine ferry runs on. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <zlib.h>

#include "common/assert.h"
#include "common/atomic_file.h"
#include "common/error.h"
#include "model/nn/internal.h"
#include "model/ops/common.h"

#define ST_MAX_HEADER (UINT64_C(100) << 20) /* as the reference implementation */
#define ST_MAX_DEPTH 32
#define ST_MAX_STRING 4096

typedef struct st_entry {
    char *name;
    ferry_dtype dt;
    size_t ndim;
    int64_t shape[FERRY_MAX_DIMS];
    uint64_t begin, end; /* offsets into the data section */
} st_entry;

struct ferry_safetensors {
    unsigned char *buf;
    size_t size;
    size_t data_off;
    st_entry *e;
    size_t n, cap;
    char **meta; /* key, value, key, value ... */
    size_t nmeta, metacap;
};

/* ---- JSON ---- */
typedef struct jp {
    const char *p, *begin, *end;
} jp;

static ferry_status jfail(const jp *j, const char *what)
{
    ferry_fail(FERRY_ERR_FORMAT, "safetensors header: %s at byte %zu", what, (size_t)(j->p - j->begin));
    /* The constant, not ferry_fail's result: the parser's callers rely on "not OK
     * means no string was made", and that must be visible within this file. */
    return FERRY_ERR_FORMAT;
}

static void jws(jp *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
        j->p++;
}

static bool jeat(jp *j, char c)
{
    jws(j);
    if (j->p < j->end && *j->p == c) {
        j->p++;
        return true;
    }
    return false;
}

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* A JSON string into a new host string (out may be NULL to skip it). */
static ferry_status jstring(jp *j, char **out)
{
    if (!jeat(j, '"'))
        return jfail(j, "expected a string");
    char tmp[ST_MAX_STRING];
    size_t n = 0;
    for (;;) {
        if (j->p >= j->end)
            return jfail(j, "unterminated string");
        unsigned char c = (unsigned char)*j->p++;
        if (c == '"')
            break;
        if (c < 0x20)
            return jfail(j, "control character in a string");
        uint32_t cp = c;
        if (c == '\\') {
            if (j->p >= j->end)
                return jfail(j, "unterminated escape");
            char e = *j->p++;
            switch (e) {
            case '"': cp = '"'; break;
            case '\\': cp = '\\'; break;
            case '/': cp = '/'; break;
            case 'b': cp = '\b'; break;
            case 'f': cp = '\f'; break;
            case 'n': cp = '\n'; break;
            case 'r': cp = '\r'; break;
            case 't': cp = '\t'; break;
            case 'u': {
                if (j->end - j->p < 4)
                    return jfail(j, "short \\u escape");
                cp = 0;
                for (int i = 0; i < 4; i++) {
                    int h = hexval(j->p[i]);
                    if (h < 0)
                        return jfail(j, "bad \\u escape");
                    cp = cp * 16 + (uint32_t)h;
                }
                j->p += 4;
                if (cp == 0)
                    return jfail(j, "NUL in a string");
                break;
            }
            default: return jfail(j, "bad escape");
            }
        }
        /* Encode cp as UTF-8 (lone surrogates pass through as 3 bytes). */
        unsigned char enc[4];
        size_t k;
        if (cp < 0x80 || c != '\\') {
            enc[0] = (unsigned char)cp;
            k = 1;
        } else if (cp < 0x800) {
            enc[0] = (unsigned char)(0xC0 | (cp >> 6));
            enc[1] = (unsigned char)(0x80 | (cp & 0x3F));
            k = 2;
        } else {
            enc[0] = (unsigned char)(0xE0 | (cp >> 12));
            enc[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
            enc[2] = (unsigned char)(0x80 | (cp & 0x3F));
            k = 3;
        }
        if (n + k >= sizeof tmp)
            return jfail(j, "string too long");
        memcpy(tmp + n, enc, k);
        n += k;
    }
    tmp[n] = '\0';
    if (out) {
        *out = ferry_host_strdup(tmp);
        if (!*out)
            return FERRY_ERR_NO_MEMORY;
    }
    return FERRY_OK;
}

/* A non-negative integer that fits in int64 (no sign, fraction or exponent). */
static ferry_status juint(jp *j, uint64_t *out)
{
    jws(j);
    if (j->p >= j->end || *j->p < '0' || *j->p > '9')
        return jfail(j, "expected a non-negative integer");
    uint64_t v = 0;
    while (j->p < j->end && *j->p >= '0' && *j->p <= '9') {
        if (v > (UINT64_C(1) << 62) / 10)
            return jfail(j, "integer too large");
        v = v * 10 + (uint64_t)(*j->p++ - '0');
    }
    if (j->p < j->end && (*j->p == '.' || *j->p == 'e' || *j->p == 'E'))
        return jfail(j, "expected an integer");
    *out = v;
    return FERRY_OK;
}

/* Skips any JSON value, to a bounded depth. */
static ferry_status jskip(jp *j, int depth)
{
    if (depth > ST_MAX_DEPTH)
        return jfail(j, "nesting too deep");
    jws(j);
    if (j->p >= j->end)
        return jfail(j, "unexpected end");
    char c = *j->p;
    if (c == '"')
        return jstring(j, NULL);
    if (c == '{' || c == '[') {
        char close = c == '{' ? '}' : ']';
        j->p++;
        if (jeat(j, close))
            return FERRY_OK;
        do {
            ferry_status st;
            if (c == '{') {
                st = jstring(j, NULL);
                if (st == FERRY_OK && !jeat(j, ':'))
                    st = jfail(j, "expected ':'");
                if (st != FERRY_OK)
                    return st;
            }
            st = jskip(j, depth + 1);
            if (st != FERRY_OK)
                return st;
        } while (jeat(j, ','));
        return jeat(j, close) ? FERRY_OK : jfail(j, "expected ',' or a closing bracket");
    }
    const char *lits[3] = {"true", "false", "null"};
    for (int i = 0; i < 3; i++) {
        size_t l = strlen(lits[i]);
        if ((size_t)(j->end - j->p) >= l && memcmp(j->p, lits[i], l) == 0) {
            j->p += l;
            return FERRY_OK;
        }
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        j->p++;
        while (j->p < j->end && strchr("0123456789.eE+-", *j->p))
            j->p++;
        return FERRY_OK;
    }
    return jfail(j, "unexpected character");
}

static const struct { const char *name; ferry_dtype dt; } st_dtypes[] = {
    {"F32", FERRY_DTYPE_F32}, {"F16", FERRY_DTYPE_F16}, {"BF16", FERRY_DTYPE_BF16},
    {"U8", FERRY_DTYPE_U8},   {"I32", FERRY_DTYPE_I32}, {"I64", FERRY_DTYPE_I64},
    {"U16", FERRY_DTYPE_U16}, {"U32", FERRY_DTYPE_U32},
};

static const char *st_dtype_name(ferry_dtype dt)
{
    for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
        if (st_dtypes[i].dt == dt)
            return st_dtypes[i].name;
    return NULL;
}

static ferry_status parse_metadata(ferry_safetensors *f, jp *j)
{
    if (!jeat(j, '{'))
        return jfail(j, "__metadata__ must be an object");
    if (jeat(j, '}'))
        return FERRY_OK;
    do {
        char *k = NULL, *v = NULL;
        ferry_status st = jstring(j, &k);
        if (st == FERRY_OK && !jeat(j, ':'))
            st = jfail(j, "expected ':'");
        if (st == FERRY_OK)
            st = jstring(j, &v); /* the format says string to string */
        if (st == FERRY_OK && f->nmeta + 2 > f->metacap) {
            size_t cap = f->metacap ? f->metacap * 2 : 16;
            char **m = ferry_host_realloc(f->meta, cap * sizeof *m);
            if (!m)
                st = FERRY_ERR_NO_MEMORY;
            else {
                f->meta = m;
                f->metacap = cap;
            }
        }
        if (st != FERRY_OK) {
            ferry_host_free(k);
            ferry_host_free(v);
            return st;
        }
        f->meta[f->nmeta++] = k;
        f->meta[f->nmeta++] = v;
    } while (jeat(j, ','));
    return jeat(j, '}') ? FERRY_OK : jfail(j, "expected ',' or '}' in __metadata__");
}

static ferry_status parse_tensor(jp *j, st_entry *e)
{
    bool have_dt = false, have_shape = false, have_off = false;
    if (!jeat(j, '{'))
        return jfail(j, "a tensor entry must be an object");
    if (jeat(j, '}'))
        return jfail(j, "empty tensor entry");
    do {
        char *key = NULL;
        ferry_status st = jstring(j, &key);
        if (st != FERRY_OK)
            return st;
        if (!jeat(j, ':')) {
            ferry_host_free(key);
            return jfail(j, "expected ':'");
        }
        if (strcmp(key, "dtype") == 0) {
            char *v = NULL;
            st = jstring(j, &v);
            if (st == FERRY_OK) {
                have_dt = false;
                for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
                    if (strcmp(v, st_dtypes[i].name) == 0) {
                        e->dt = st_dtypes[i].dt;
                        have_dt = true;
                    }
                if (!have_dt)
                    st = ferry_fail(FERRY_ERR_UNSUPPORTED, "safetensors: tensor \"%s\" has dtype %s, which ferry does not support",
                                    e->name, v);
            }
            ferry_host_free(v);
        } else if (strcmp(key, "shape") == 0) {
            e->ndim = 0;
            if (!jeat(j, '['))
                st = jfail(j, "shape must be an array");
            else if (!jeat(j, ']')) {
                do {
                    uint64_t v = 0;
                    if (e->ndim == FERRY_MAX_DIMS)
                        st = jfail(j, "too many dims");
                    if (st == FERRY_OK)
                        st = juint(j, &v);
                    if (st != FERRY_OK)
                        break;
                    e->shape[e->ndim++] = (int64_t)v;
                } while (jeat(j, ','));
                if (st == FERRY_OK && !jeat(j, ']'))
                    st = jfail(j, "expected ']' after shape");
            }
            have_shape = st == FERRY_OK;
        } else if (strcmp(key, "data_offsets") == 0) {
            if (!jeat(j, '['))
                st = jfail(j, "data_offsets must be an array");
            if (st == FERRY_OK)
                st = juint(j, &e->begin);
            if (st == FERRY_OK && !jeat(j, ','))
                st = jfail(j, "data_offsets needs two numbers");
            if (st == FERRY_OK)
                st = juint(j, &e->end);
            if (st == FERRY_OK && !jeat(j, ']'))
                st = jfail(j, "data_offsets needs two numbers");
            have_off = st == FERRY_OK;
        } else {
            st = jskip(j, 1);
        }
        ferry_host_free(key);
        if (st != FERRY_OK)
            return st;
    } while (jeat(j, ','));
    if (!jeat(j, '}'))
        return jfail(j, "expected ',' or '}' in a tensor entry");
    if (!have_dt || !have_shape || !have_off)
        return ferry_fail(FERRY_ERR_FORMAT, "safetensors: tensor \"%s\" lacks dtype, shape or data_offsets", e->name);
    return FERRY_OK;
}

static void st_free(ferry_safetensors *f)
{
    for (size_t i = 0; i < f->n; i++)
        ferry_host_free(f->e[i].name);
    for (size_t i = 0; i < f->nmeta; i++)
        ferry_host_free(f->meta[i]);
    ferry_host_free(f->e);
    ferry_host_free(f->meta);
    ferry_host_free(f->buf);
    ferry_host_free(f);
}

void ferry_safetensors_destroy(ferry_safetensors *f)
{
    if (f)
        st_free(f);
}

/* The tensors tile the data section exactly, as the format's reference reader
 * requires: in offset order each starts where the one before ended, the first
 * at 0 and the last at the end. Overlapping tensors would alias each other's
 * bytes; a hole or a tail is data no tensor owns (a torn or doctored file). */
static int cmp_by_offset(const void *a, const void *b)
{
    const st_entry *x = *(const st_entry *const *)a, *y = *(const st_entry *const *)b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

static ferry_status check_layout(const ferry_safetensors *f, uint64_t data_size)
{
    if (f->n == 0)
        return data_size == 0 ? FERRY_OK
                              : ferry_fail(FERRY_ERR_FORMAT,
                                           "safetensors: %llu bytes of data but no tensor to hold them",
                                           (unsigned long long)data_size);
    const st_entry **by = ferry_host_malloc(f->n * sizeof(const st_entry *));
    if (!by)
        return FERRY_ERR_NO_MEMORY;
    for (size_t i = 0; i < f->n; i++)
        by[i] = &f->e[i];
    qsort(by, f->n, sizeof(const st_entry *), cmp_by_offset);
    ferry_status st = FERRY_OK;
    uint64_t at = 0;
    const st_entry *prev = NULL;
    for (size_t i = 0; i < f->n && st == FERRY_OK; i++) {
        const st_entry *e = by[i];
        if (e->begin < at)
            st = ferry_fail(FERRY_ERR_FORMAT, "safetensors: tensors \"%s\" [%llu, %llu) and \"%s\" [%llu, %llu) overlap",
                            prev->name, (unsigned long long)prev->begin, (unsigned long long)prev->end, e->name,
                            (unsigned long long)e->begin, (unsigned long long)e->end);
        else if (e->begin > at && prev)
            st = ferry_fail(FERRY_ERR_FORMAT,
                            "safetensors: bytes [%llu, %llu) between tensors \"%s\" and \"%s\" belong to no tensor",
                            (unsigned long long)at, (unsigned long long)e->begin, prev->name, e->name);
        else if (e->begin > at)
            st = ferry_fail(FERRY_ERR_FORMAT,
                            "safetensors: bytes [0, %llu) before the first tensor \"%s\" belong to no tensor",
                            (unsigned long long)e->begin, e->name);
        at = e->end;
        prev = e;
    }
    if (st == FERRY_OK && at != data_size)
        st = ferry_fail(FERRY_ERR_FORMAT,
                        "safetensors: the last tensor \"%s\" ends at byte %llu of the %llu-byte data section: "
                        "%llu bytes belong to no tensor",
                        prev->name, (unsigned long long)at, (unsigned long long)data_size,
                        (unsigned long long)(data_size - at));
    ferry_host_free(by);
    return st;
}

static ferry_status parse_header(ferry_safetensors *f)
{
    if (f->size < 8)
        return ferry_fail(FERRY_ERR_FORMAT, "safetensors: %zu bytes is too short for the 8-byte header length", f->size);
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--)
        hl = hl << 8 | f->buf[i];
    if (hl > ST_MAX_HEADER || hl > f->size - 8)
        return ferry_fail(FERRY_ERR_FORMAT, "safetensors: header length %llu does not fit in a %zu-byte file",
                          (unsigned long long)hl, f->size);
    f->data_off = 8 + (size_t)hl;
    uint64_t data_size = f->size - f->data_off;
    jp j = {(const char *)f->buf + 8, (const char *)f->buf + 8, (const char *)f->buf + 8 + hl};
    if (!jeat(&j, '{'))
        return jfail(&j, "the header must be a JSON object");
    if (!jeat(&j, '}')) {
        do {
            char *name = NULL;
            ferry_status st = jstring(&j, &name);
            if (st != FERRY_OK)
                return st;
            if (!jeat(&j, ':')) {
                ferry_host_free(name);
                return jfail(&j, "expected ':'");
            }
            if (strcmp(name, "__metadata__") == 0) {
                ferry_host_free(name);
                st = parse_metadata(f, &j);
                if (st != FERRY_OK)
                    return st;
                continue;
            }
            for (size_t i = 0; i < f->n; i++)
                if (strcmp(f->e[i].name, name) == 0) {
                    ferry_status s2 = ferry_fail(FERRY_ERR_FORMAT, "safetensors: tensor \"%s\" appears twice", name);
                    ferry_host_free(name);
                    return s2;
                }
            if (f->n == f->cap) {
                size_t cap = f->cap ? f->cap * 2 : 16;
                st_entry *e = ferry_host_realloc(f->e, cap * sizeof *e);
                if (!e) {
                    ferry_host_free(name);
                    return FERRY_ERR_NO_MEMORY;
                }
                f->e = e;
                f->cap = cap;
            }
            st_entry *e = &f->e[f->n++];
            memset(e, 0, sizeof *e);
            e->name = name;
            st = parse_tensor(&j, e);
            if (st != FERRY_OK)
                return st;
            /* The byte range must match the shape and lie inside the data. */
            /* Bytes, not elements, bounded: 2^62 elements of 8 bytes would wrap. */
            uint64_t bytes = ferry_dtype_size(e->dt);
            for (size_t d = 0; d < e->ndim; d++) {
                if (e->shape[d] && bytes > (UINT64_C(1) << 62) / (uint64_t)e->shape[d])
                    return ferry_fail(FERRY_ERR_FORMAT, "safetensors: tensor \"%s\" is impossibly large", name);
                bytes *= (uint64_t)e->shape[d];
            }
            if (e->begin > e->end || e->end > data_size || e->end - e->begin != bytes)
                return ferry_fail(FERRY_ERR_FORMAT,
                                  "safetensors: tensor \"%s\": data_offsets [%llu, %llu] do not hold %llu bytes inside "
                                  "the %llu-byte data section",
                                  name, (unsigned long long)e->begin, (unsigned long long)e->end,
                                  (unsigned long long)bytes, (unsigned long long)data_size);
        } while (jeat(&j, ','));
        if (!jeat(&j, '}'))
            return jfail(&j, "expected ',' or '}'");
    }
    jws(&j);
    if (j.p != j.end)
        return jfail(&j, "trailing bytes after the header object");
    return check_layout(f, data_size);
}

/* Files ferry writes carry the CRC-32 of their data in the metadata: a file torn
 * or changed after writing is refused, not half-loaded. */
#define CRC_KEY "ferry.crc32"

static uint32_t data_crc(const unsigned char *p, size_t n)
{
    uLong c = crc32(0L, Z_NULL, 0);
    while (n > 0) { /* zlib takes uInt lengths */
        uInt k = n > (1u << 30) ? (1u << 30) : (uInt)n;
        c = crc32(c, p, k);
        p += k;
        n -= k;
    }
    return (uint32_t)c;
}

static ferry_status check_crc(const ferry_safetensors *f)
{
    const char *want = ferry_safetensors_metadata(f, CRC_KEY);
    if (!want)
        return FERRY_OK;
    uint32_t got = data_crc(f->buf + f->data_off, f->size - f->data_off);
    char hex[16];
    snprintf(hex, sizeof hex, "%08x", got);
    if (strcmp(hex, want) != 0)
        return ferry_fail(FERRY_ERR_FORMAT, "safetensors: the data's checksum is %s, the header says %.16s: "
                          "the file is corrupt or was changed after it was written", hex, want);
    return FERRY_OK;
}

ferry_status ferry_safetensors_parse(const void *data, size_t size, ferry_safetensors **out)
{
    if (!out || (!data && size))
        return FERRY_ARG_ERROR("%s is NULL", !out ? "out" : "data");
    ferry_safetensors *f = ferry_host_calloc(1, sizeof *f);
    if (!f)
        return FERRY_ERR_NO_MEMORY;
    f->buf = ferry_host_malloc(size ? size : 1);
    if (!f->buf) {
        ferry_host_free(f);
        return FERRY_ERR_NO_MEMORY;
    }
    if (size)
        memcpy(f->buf, data, size);
    f->size = size;
    ferry_status st = parse_header(f);
    if (st == FERRY_OK)
        st = check_crc(f);
    if (st != FERRY_OK) {
        st_free(f);
        return st;
    }
    *out = f;
    return FERRY_OK;
}

ferry_status ferry_safetensors_open(const char *path, ferry_safetensors **out)
{
    if (!path || !out)
        return FERRY_ARG_ERROR("%s is NULL", !path ? "path" : "out");
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return ferry_fail(FERRY_ERR_IO, "%s: %s", path, strerror(errno));
    ferry_status st = FERRY_OK;
    long len = -1;
    struct stat sb;
    int fs = fstat(fileno(fp), &sb);
    if (fs != 0 || !S_ISREG(sb.st_mode)) { /* a folder "opens" too */
        const char *why = fs != 0 ? strerror(errno) : S_ISDIR(sb.st_mode) ? "a folder, not a file"
                                                                         : "not a regular file";
        fclose(fp);
        return ferry_fail(FERRY_ERR_IO, "%s: %s", path, why);
    }
    if (fseek(fp, 0, SEEK_END) == 0)
        len = ftell(fp);
    if (len < 0 || fseek(fp, 0, SEEK_SET) != 0)
        st = ferry_fail(FERRY_ERR_IO, "%s: cannot seek: %s", path, strerror(errno));
    void *buf = NULL;
    if (st == FERRY_OK && !(buf = ferry_host_malloc((size_t)len + 1)))
        st = FERRY_ERR_NO_MEMORY;
    if (st == FERRY_OK && fread(buf, 1, (size_t)len, fp) != (size_t)len)
        st = ferry_fail(FERRY_ERR_IO, "%s: short read", path);
    fclose(fp);
    if (st == FERRY_OK) {
        st = ferry_safetensors_parse(buf, (size_t)len, out);
        if (st != FERRY_OK)
            ferry_fail_prefix(st, "%s: ", path);
    }
    ferry_host_free(buf);
    return st;
}

size_t ferry_safetensors_tensor_count(const ferry_safetensors *f) { return f ? f->n : 0; }

const char *ferry_safetensors_name(const ferry_safetensors *f, size_t i)
{
    return f && i < f->n ? f->e[i].name : NULL;
}

const char *ferry_safetensors_metadata(const ferry_safetensors *f, const char *key)
{
    if (!f || !key)
        return NULL;
    for (size_t i = 0; i + 1 < f->nmeta; i += 2)
        if (strcmp(f->meta[i], key) == 0)
            return f->meta[i + 1];
    return NULL;
}

static const st_entry *find(const ferry_safetensors *f, const char *name)
{
    for (size_t i = 0; i < f->n; i++)
        if (strcmp(f->e[i].name, name) == 0)
            return &f->e[i];
    return NULL;
}

ferry_status ferry_safetensors_info(const ferry_safetensors *f, const char *name, ferry_dtype *dt,
                                    int64_t *shape, size_t *ndim)
{
    if (!f || !name || !dt || !shape || !ndim)
        return FERRY_ARG_ERROR("%s is NULL", !f ? "file" : !name ? "name" : !dt ? "dt" : !shape ? "shape" : "ndim");
    const st_entry *e = find(f, name);
    if (!e)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "safetensors: no tensor named \"%s\"", name);
    *dt = e->dt;
    *ndim = e->ndim;
    memcpy(shape, e->shape, e->ndim * sizeof(int64_t));
    return FERRY_OK;
}

ferry_status ferry_safetensors_get(const ferry_safetensors *f, const char *name, ferry_device d, ferry_tensor **out)
{
    if (!f || !name || !out)
        return FERRY_ARG_ERROR("%s is NULL", !f ? "file" : !name ? "name" : "out");
    const st_entry *e = find(f, name);
    if (!e)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "safetensors: no tensor named \"%s\"", name);
    return ferry_tensor_from_host(f->buf + f->data_off + e->begin, e->shape, e->ndim, e->dt, d, out);
}

/* ---- writer ---- */
typedef struct sbuf {
    char *p;
    size_t n, cap;
    bool oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 4096;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *q = ferry_host_realloc(b->p, cap);
        if (!q) {
            b->oom = true;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void sb_str(sbuf *b, const char *s)
{
    sb_put(b, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        char esc[8];
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            sb_put(b, esc, 2);
        } else if (c < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            sb_put(b, esc, 6);
        } else {
            sb_put(b, (const char *)&c, 1);
        }
    }
    sb_put(b, "\"", 1);
}

/* The JSON header: metadata, then each tensor's dtype, shape and byte range in
 * the data that follows, padded with spaces to a multiple of 8 bytes. */
static ferry_status build_header(sbuf *h, const char *const *names, ferry_tensor *const *tensors,
                                 size_t n, const char *const *meta, size_t n_meta)
{
    uint64_t off = 0;
    sb_put(h, "{", 1);
    bool first = true;
    if (n_meta) {
        sb_put(h, "\"__metadata__\":{", 16);
        for (size_t i = 0; i < n_meta; i++) {
            if (i)
                sb_put(h, ",", 1);
            sb_str(h, meta[2 * i]);
            sb_put(h, ":", 1);
            sb_str(h, meta[2 * i + 1]);
        }
        sb_put(h, "}", 1);
        first = false;
    }
    for (size_t i = 0; i < n; i++) {
        const ferry_tensor *t = tensors[i];
        const char *dn = t ? st_dtype_name(ferry_tensor_dtype(t)) : NULL;
        if (!t || !names[i] || !dn)
            return ferry_fail(FERRY_ERR_INVALID_ARG, "safetensors: tensor %zu (\"%s\") is missing or has no safetensors dtype",
                              i, names[i] ? names[i] : "(null)");
        if (!first)
            sb_put(h, ",", 1);
        first = false;
        sb_str(h, names[i]);
        char tmp[128];
        snprintf(tmp, sizeof tmp, ":{\"dtype\":\"%s\",\"shape\":[", dn);
        sb_put(h, tmp, strlen(tmp));
        for (size_t d = 0; d < ferry_tensor_ndim(t); d++) {
            snprintf(tmp, sizeof tmp, d ? ",%lld" : "%lld", (long long)ferry_tensor_dim(t, d));
            sb_put(h, tmp, strlen(tmp));
        }
        uint64_t bytes = ferry_tensor_nbytes(t), end = off + bytes;
        snprintf(tmp, sizeof tmp, "],\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}", off, end);
        sb_put(h, tmp, strlen(tmp));
        off += bytes;
    }
    sb_put(h, "}", 1);
    while (!h->oom && h->n % 8) /* pad with spaces so the data starts 8-aligned */
        sb_put(h, " ", 1);
    return h->oom ? FERRY_ERR_NO_MEMORY : FERRY_OK;
}

/* Each tensor's bytes in order, through one host buffer that grows as needed;
 * *crc accumulates their CRC-32. */
static ferry_status write_data(ferry_atomic_file *fp, ferry_tensor *const *tensors, size_t n,
                               uint32_t *crc)
{
    ferry_status st = FERRY_OK;
    void *scratch = NULL;
    size_t scap = 0;
    uLong c = crc32(0L, Z_NULL, 0);
    for (size_t i = 0; i < n && st == FERRY_OK; i++) {
        size_t bytes = ferry_tensor_nbytes(tensors[i]);
        if (bytes > scap) {
            ferry_host_free(scratch);
            scratch = ferry_host_malloc(bytes);
            scap = scratch ? bytes : 0;
            if (!scratch) {
                st = FERRY_ERR_NO_MEMORY;
                break;
            }
        }
        if (!bytes)
            continue;
        st = ferry_tensor_copy_to_host(tensors[i], scratch, bytes);
        if (st == FERRY_OK)
            st = ferry_atomic_write(fp, scratch, bytes);
        for (size_t done = 0; st == FERRY_OK && done < bytes;) {
            uInt k = bytes - done > (1u << 30) ? (1u << 30) : (uInt)(bytes - done);
            c = crc32(c, (const unsigned char *)scratch + done, k);
            done += k;
        }
    }
    ferry_host_free(scratch);
    *crc = (uint32_t)c;
    return st;
}

/* The caller's metadata and the checksum's placeholder, filled in after the
 * data is written (its place found in the header). */
static ferry_status header_with_crc(sbuf *h, const char *const *names, ferry_tensor *const *tensors,
                                    size_t n, const char *const *meta, size_t n_meta,
                                    size_t *crc_at)
{
    const char **m = ferry_host_calloc(2 * (n_meta + 1), sizeof *m);
    if (!m)
        return FERRY_ERR_NO_MEMORY;
    size_t k = 0;
    for (size_t i = 0; i < n_meta; i++)
        if (strcmp(meta[2 * i], CRC_KEY) != 0) {
            m[2 * k] = meta[2 * i];
            m[2 * k + 1] = meta[2 * i + 1];
            k++;
        }
    m[2 * k] = CRC_KEY;
    m[2 * k + 1] = "00000000";
    ferry_status st = build_header(h, names, tensors, n, m, k + 1);
    ferry_host_free(m);
    if (st != FERRY_OK)
        return st;
    static const char field[] = "\"" CRC_KEY "\":\"";
    const char *at = memmem(h->p, h->n, field, sizeof field - 1);
    FERRY_ASSERT(at);
    *crc_at = 8 + (size_t)(at - h->p) + sizeof field - 1;
    return FERRY_OK;
}

ferry_status ferry_safetensors_save(const char *path, const char *const *names, ferry_tensor *const *tensors, size_t n,
                                    const char *const *meta, size_t n_meta)
{
    if (!path || (n && (!names || !tensors)) || (n_meta && !meta))
        return FERRY_ARG_ERROR("%s is NULL", !path ? "path" : (n && !names) ? "names" : (n && !tensors) ? "tensors" : "meta");
    for (size_t i = 0; i < 2 * n_meta; i++)
        if (!meta[i])
            return ferry_fail(FERRY_ERR_INVALID_ARG, "safetensors: metadata entry %zu is NULL", i / 2);
    sbuf h = {0};
    size_t crc_at = 0;
    ferry_status st = header_with_crc(&h, names, tensors, n, meta, n_meta, &crc_at);
    if (st != FERRY_OK) {
        ferry_host_free(h.p);
        return st;
    }
    /* Written beside the file, then renamed over it: a crash leaves the old file
     * or the new one (src/common/atomic_file.c). */
    ferry_atomic_file fp;
    st = ferry_atomic_open(&fp, path);
    unsigned char len[8]; /* the header's length, little-endian */
    for (int i = 0; i < 8; i++)
        len[i] = (unsigned char)((uint64_t)h.n >> (8 * i));
    if (st == FERRY_OK)
        st = ferry_atomic_write(&fp, len, 8);
    if (st == FERRY_OK)
        st = ferry_atomic_write(&fp, h.p, h.n);
    ferry_host_free(h.p);
    uint32_t crc = 0;
    if (st == FERRY_OK)
        st = write_data(&fp, tensors, n, &crc);
    char hex[16];
    snprintf(hex, sizeof hex, "%08x", crc);
    if (st == FERRY_OK)
        st = ferry_atomic_pwrite(&fp, hex, 8, crc_at);
    if (st == FERRY_OK)
        return ferry_atomic_commit(&fp);
    ferry_atomic_abort(&fp);
    return st;
}

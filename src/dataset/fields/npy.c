/* The NPY header: magic, version, a length, then a Python dict literal
 * {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), } padded with
 * spaces and a newline. The dict is parsed as exactly that grammar (three
 * keys, each once, in any order), never evaluated. */
#include <string.h>

#include "common/error.h"
#include "dataset/fields/npy.h"

/* A dimension larger than this is a corrupt header, whatever the file's size. */
#define NPY_MAX_DIM ((size_t)1 << 40)

typedef struct cursor {
    const char *p, *end;
    const char *name;
} cursor;

static void skip_ws(cursor *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

static bool take(cursor *c, char ch)
{
    skip_ws(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return true;
    }
    return false;
}

/* A quoted string without escapes, into buf (at most cap - 1 bytes). */
static bool take_string(cursor *c, char *buf, size_t cap)
{
    skip_ws(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"'))
        return false;
    char q = *c->p++;
    size_t n = 0;
    while (c->p < c->end && *c->p != q) {
        if (*c->p == '\\' || n + 1 >= cap)
            return false;
        buf[n++] = *c->p++;
    }
    if (c->p >= c->end)
        return false;
    c->p++;
    buf[n] = '\0';
    return true;
}

static bool take_word(cursor *c, const char *w)
{
    skip_ws(c);
    size_t n = strlen(w);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, w, n) != 0)
        return false;
    c->p += n;
    return true;
}

/* A decimal dimension (Python 2's trailing L accepted), at most NPY_MAX_DIM. */
static bool take_dim(cursor *c, size_t *v)
{
    skip_ws(c);
    size_t x = 0, digits = 0;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
        x = x * 10 + (size_t)(*c->p++ - '0');
        if (x > NPY_MAX_DIM)
            return false;
        digits++;
    }
    if (c->p < c->end && *c->p == 'L')
        c->p++;
    *v = x;
    return digits > 0;
}

static ferry_status bad(const cursor *c, const char *what)
{
    return ferry_fail_at(FERRY_ERR_FORMAT, c->name, "NPY header: %s", what);
}

/* '(' [dim (',' dim)* [',']] ')' */
static ferry_status take_shape(cursor *c, ferry_npy *out)
{
    if (!take(c, '('))
        return bad(c, "'shape' is not a tuple");
    out->ndim = 0;
    if (take(c, ')'))
        return FERRY_OK;
    for (;;) {
        size_t v;
        if (!take_dim(c, &v))
            return bad(c, "a dimension of 'shape' is not a non-negative integer below 2^40");
        if (out->ndim == FERRY_FIELD_MAX_DIMS)
            return ferry_fail_at(FERRY_ERR_UNSUPPORTED, c->name, "NPY array of more than %d "
                                 "dimensions", FERRY_FIELD_MAX_DIMS);
        out->shape[out->ndim++] = v;
        bool comma = take(c, ',');
        if (take(c, ')'))
            return FERRY_OK;
        if (!comma)
            return bad(c, "'shape' is not a tuple of integers");
    }
}

static ferry_status map_descr(const cursor *c, const char *s, ferry_dtype *dt)
{
    static const struct { const char *descr; ferry_dtype dt; } known[] = {
        {"<f4", FERRY_DTYPE_F32}, {"<f2", FERRY_DTYPE_F16}, {"|u1", FERRY_DTYPE_U8},
        {"<u1", FERRY_DTYPE_U8},  {"|b1", FERRY_DTYPE_U8},  {"<i4", FERRY_DTYPE_I32},
        {"<i8", FERRY_DTYPE_I64},
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (!strcmp(s, known[i].descr)) {
            *dt = known[i].dt;
            return FERRY_OK;
        }
    if (s[0] == '>')
        return ferry_fail_at(FERRY_ERR_UNSUPPORTED, c->name, "NPY dtype '%s' is big-endian "
                             "(ferry reads little-endian arrays)", s);
    return ferry_fail_at(FERRY_ERR_UNSUPPORTED, c->name, "NPY dtype '%s' has no ferry dtype "
                         "(<f4, <f2, |u1, |b1, <i4, <i8)", s);
}

/* One "key: value" of the dict; seen[] marks the keys met. */
static ferry_status take_item(cursor *c, ferry_npy *out, bool seen[3])
{
    char key[32], descr[32];
    if (!take_string(c, key, sizeof key))
        return bad(c, "a key is not a short quoted string");
    if (!take(c, ':'))
        return bad(c, "a key is not followed by ':'");
    int k = !strcmp(key, "descr") ? 0 : !strcmp(key, "fortran_order") ? 1 :
            !strcmp(key, "shape") ? 2 : -1;
    if (k < 0)
        return bad(c, "a key other than 'descr', 'fortran_order' and 'shape'");
    if (seen[k])
        return bad(c, "a key given twice");
    seen[k] = true;
    if (k == 0) {
        if (!take_string(c, descr, sizeof descr))
            return bad(c, "'descr' is not a dtype string (a structured dtype?)");
        return map_descr(c, descr, &out->dtype);
    }
    if (k == 1) {
        if (take_word(c, "False"))
            return FERRY_OK;
        if (take_word(c, "True"))
            return ferry_fail_at(FERRY_ERR_UNSUPPORTED, c->name, "NPY array in Fortran order "
                                 "(ferry reads C order: np.ascontiguousarray before saving)");
        return bad(c, "'fortran_order' is not True or False");
    }
    return take_shape(c, out);
}

static ferry_status parse_dict(cursor *c, ferry_npy *out)
{
    for (const char *q = c->p; q < c->end; q++)
        if ((unsigned char)*q < 0x20 && *q != '\n' && *q != '\t' && *q != '\r')
            return bad(c, "a control character");
        else if ((unsigned char)*q >= 0x7f)
            return bad(c, "a byte that is not ASCII");
    if (!take(c, '{'))
        return bad(c, "not a dict");
    bool seen[3] = {false, false, false};
    while (!take(c, '}')) {
        ferry_status st = take_item(c, out, seen);
        if (st != FERRY_OK)
            return st;
        if (!take(c, ',')) {
            if (!take(c, '}'))
                return bad(c, "items not separated by ','");
            break;
        }
    }
    skip_ws(c);
    if (c->p != c->end)
        return bad(c, "bytes after the dict");
    if (!seen[0] || !seen[1] || !seen[2])
        return bad(c, !seen[0] ? "no 'descr'" : !seen[1] ? "no 'fortran_order'" : "no 'shape'");
    return FERRY_OK;
}

ferry_status ferry__npy_parse(const uint8_t *d, size_t n, const char *name, ferry_npy *out)
{
    return ferry__npy_parse_head(d, n, n, name, out);
}

ferry_status ferry__npy_parse_head(const uint8_t *d, size_t n, size_t file_bytes, const char *name,
                                   ferry_npy *out)
{
    if (n > file_bytes)
        n = file_bytes;
    memset(out, 0, sizeof *out);
    name = name ? name : "NPY";
    if (n < 10 || memcmp(d, "\x93NUMPY", 6) != 0)
        return ferry_fail_at(FERRY_ERR_FORMAT, name, "not an NPY file (no \\x93NUMPY magic)");
    unsigned major = d[6], minor = d[7];
    if (major < 1 || major > 3 || minor != 0)
        return ferry_fail_at(FERRY_ERR_UNSUPPORTED, name, "NPY version %u.%u (ferry reads 1.0 "
                             "to 3.0)", major, minor);
    size_t pre = major == 1 ? 10 : 12, hlen;
    if (n < pre)
        return ferry_fail_at(FERRY_ERR_FORMAT, name, "NPY file ends inside its preamble");
    hlen = major == 1 ? (size_t)d[8] | (size_t)d[9] << 8
                      : (size_t)d[8] | (size_t)d[9] << 8 | (size_t)d[10] << 16 | (size_t)d[11] << 24;
    if (hlen > FERRY_NPY_MAX_HEADER)
        return ferry_fail_at(FERRY_ERR_LIMIT, name, "NPY header of %zu bytes, over the limit of %d",
                             hlen, FERRY_NPY_MAX_HEADER);
    if (hlen > file_bytes - pre)
        return ferry_fail_at(FERRY_ERR_FORMAT, name, "NPY header of %zu bytes, but the file ends "
                             "after %zu", hlen, file_bytes - pre);
    if (hlen > n - pre)
        return ferry_fail_at(FERRY_ERR_FORMAT, name, "NPY header of %zu bytes: only %zu were read",
                             hlen, n - pre);
    cursor c = {(const char *)d + pre, (const char *)d + pre + hlen, name};
    ferry_status st = parse_dict(&c, out);
    if (st != FERRY_OK)
        return st;
    size_t bytes = ferry_dtype_size(out->dtype);
    for (size_t k = 0; k < out->ndim; k++)
        if (!ferry_mul_size(bytes, out->shape[k], &bytes))
            return ferry_fail_at(FERRY_ERR_FORMAT, name, "NPY shape overflows");
    out->data_off = pre + hlen;
    out->data_bytes = bytes;
    if (bytes != file_bytes - out->data_off)
        return ferry_fail_at(FERRY_ERR_FORMAT, name, "NPY shape says %zu bytes of data, the file "
                             "holds %zu", bytes, file_bytes - out->data_off);
    return FERRY_OK;
}

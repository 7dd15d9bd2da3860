/* WebDataset's brace notation in shard paths and URLs (shards.h), as Python's
 * braceexpand (which WebDataset uses) reads it: "shard-{000000..000099}.tar"
 * is shard-000000.tar to shard-000099.tar; "{train,val}-{0..3}.tar" is eight
 * names, the leftmost group varying slowest. A range keeps its ends' zero
 * padding (the wider end's width when either starts with 0) and may count
 * down. Unlike braceexpand, what would be left as it is there (a group that
 * is neither a range nor a list, an unmatched brace, a nested group, a step)
 * is an error naming the pattern: a shard name with a literal brace is far
 * rarer than a typo in one. Bounded: FERRY__BRACE_MAX names per pattern. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/error.h"
#include "dataset/core/internal.h"
#include "dataset/shards/shards.h"

#define MAX_GROUPS 16
#define MAX_DIGITS 18 /* below 2^63: the sums below cannot overflow */

typedef struct group {
    size_t at, len;          /* the "{...}" in the pattern */
    unsigned long long a, b; /* range: from a to b, either way */
    size_t count;            /* names it gives, 1 to FERRY__BRACE_MAX + 1 */
    int width;               /* range: zero-padded to this many digits (0: none) */
    bool range;
} group;

static ferry_status bad(const char *p, size_t n, const char *fmt, ...) FERRY_PRINTF(3, 4);

/* "PATTERN: malformed braces: <why> (what the notation is)". */
static ferry_status bad(const char *p, size_t n, const char *fmt, ...)
{
    char why[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return ferry_fail(FERRY_ERR_INVALID_ARG, "%.*s: malformed braces: %s (brace notation: "
                      "shard-{000000..000099}.tar, or {train,val})", (int)(n < 1000 ? n : 1000), p,
                      why);
}

static bool all_digits(const char *s, size_t n)
{
    if (!n || n > MAX_DIGITS)
        return false;
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return false;
    return true;
}

static unsigned long long number(const char *s, size_t n)
{
    unsigned long long v = 0;
    for (size_t i = 0; i < n; i++)
        v = v * 10 + (unsigned)(s[i] - '0');
    return v;
}

/* The group g->at .. g->at + g->len (its braces included) of p. */
static ferry_status parse_group(const char *p, size_t n, group *g)
{
    const char *in = p + g->at + 1;
    size_t m = g->len - 2;
    const char *dots = NULL;
    for (size_t i = 0; i + 1 < m && !dots; i++)
        dots = in[i] == '.' && in[i + 1] == '.' ? in + i : NULL;
    const int gl = (int)(g->len < 200 ? g->len : 200);
    if (!m)
        return bad(p, n, "an empty group {}");
    if (memchr(in, ',', m)) {
        g->range = false;
        g->count = 1;
        for (size_t i = 0; i < m; i++)
            g->count += in[i] == ',';
        return FERRY_OK;
    }
    if (!dots)
        return bad(p, n, "%.*s is neither a range {A..B} nor a list {a,b}", gl, p + g->at);
    size_t an = (size_t)(dots - in), bn = m - an - 2;
    const char *b = dots + 2;
    if (memchr(b, '.', bn))
        return bad(p, n, "%.*s: a range with a step is not supported", gl, p + g->at);
    if (!all_digits(in, an) || !all_digits(b, bn))
        return bad(p, n, "%.*s: a range's ends must be numbers of 1 to 18 digits", gl, p + g->at);
    g->range = true;
    g->a = number(in, an);
    g->b = number(b, bn);
    g->width = (an > 1 && in[0] == '0') || (bn > 1 && b[0] == '0') ? (int)(an > bn ? an : bn) : 0;
    unsigned long long span = g->a > g->b ? g->a - g->b : g->b - g->a;
    g->count = span >= FERRY__BRACE_MAX ? FERRY__BRACE_MAX + 1 : (size_t)span + 1;
    return FERRY_OK;
}

/* The groups of p[0, n): *ng of them. */
static ferry_status find_groups(const char *p, size_t n, group *g, size_t *ng, size_t *total)
{
    *ng = 0;
    *total = 1;
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '}')
            return bad(p, n, "a '}' without its '{' (character %zu)", i + 1);
        if (p[i] != '{')
            continue;
        const char *close = memchr(p + i + 1, '}', n - i - 1);
        const char *open = memchr(p + i + 1, '{', n - i - 1);
        if (!close)
            return bad(p, n, "a '{' without its '}' (character %zu)", i + 1);
        if (open && open < close)
            return bad(p, n, "nested groups are not supported (character %zu)",
                       (size_t)(open - p) + 1);
        if (*ng == MAX_GROUPS)
            return bad(p, n, "more than %d groups", MAX_GROUPS);
        group *x = &g[(*ng)++];
        *x = (group){.at = i, .len = (size_t)(close - p) - i + 1};
        ferry_status st = parse_group(p, n, x);
        if (st != FERRY_OK)
            return st;
        /* Each factor is at most FERRY__BRACE_MAX + 1: no overflow. */
        if ((unsigned long long)*total * x->count > FERRY__BRACE_MAX)
            return ferry_fail(FERRY_ERR_LIMIT, "%.*s: the braces name more than %d shards (the "
                              "limit of one pattern): a typo in a range?",
                              (int)(n < 1000 ? n : 1000), p, FERRY__BRACE_MAX);
        *total *= x->count;
        i = (size_t)(close - p);
    }
    return FERRY_OK;
}

/* Appends alternative k of group g (p's text) to out at *w (cap bytes). */
static void put_choice(const char *p, const group *g, size_t k, char *out, size_t *w)
{
    if (g->range) {
        unsigned long long v = g->a <= g->b ? g->a + k : g->a - k;
        *w += (size_t)sprintf(out + *w, "%0*llu", g->width, v);
        return;
    }
    const char *s = p + g->at + 1, *end = p + g->at + g->len - 1;
    for (size_t i = 0; i < k; i++)
        s = (const char *)memchr(s, ',', (size_t)(end - s)) + 1;
    const char *e = memchr(s, ',', (size_t)(end - s));
    size_t len = (size_t)((e ? e : end) - s);
    memcpy(out + *w, s, len);
    *w += len;
}

bool ferry__has_braces(const char *s, size_t n)
{
    return memchr(s, '{', n) || memchr(s, '}', n);
}

ferry_status ferry__brace_expand(const char *p, size_t n, ferry_str_list *l)
{
    group g[MAX_GROUPS];
    size_t ng, total;
    ferry_status st = find_groups(p, n, g, &ng, &total);
    if (st != FERRY_OK)
        return st;
    /* A name is never longer than the pattern plus each range's digits. */
    size_t cap = n + 1 + ng * (MAX_DIGITS + 2);
    size_t idx[MAX_GROUPS] = {0};
    for (size_t made = 0; made < total; made++) {
        char *out = ferry_host_malloc(cap);
        if (!out)
            return FERRY_ERR_NO_MEMORY;
        size_t w = 0, from = 0;
        for (size_t j = 0; j < ng; j++) {
            memcpy(out + w, p + from, g[j].at - from);
            w += g[j].at - from;
            put_choice(p, &g[j], idx[j], out, &w);
            from = g[j].at + g[j].len;
        }
        memcpy(out + w, p + from, n - from);
        out[w + n - from] = '\0';
        if ((st = ferry__str_list_push(l, out)) != FERRY_OK)
            return st;
        for (size_t j = ng; j-- > 0;) /* the odometer: the rightmost group fastest */
            if (++idx[j] < g[j].count)
                break;
            else
                idx[j] = 0;
    }
    return FERRY_OK;
}

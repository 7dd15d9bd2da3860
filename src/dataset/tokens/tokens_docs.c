/* Finding the documents: one pass over every shard in chunks, noting where
 * each delimiter token is. */
#include <string.h>

#include "common/error.h"
#include "dataset/tokens/tokens.h"

#define CHUNK ((size_t)1 << 20) /* tokens per read */

typedef struct doc_list {
    ferry_tok_doc *v;
    size_t n, cap;
} doc_list;

static ferry_status push(doc_list *l, ferry_tok_doc d)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 1024;
        ferry_tok_doc *v = ferry_host_realloc(l->v, cap * sizeof *v);
        if (!v)
            return FERRY_ERR_NO_MEMORY;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = d;
    return FERRY_OK;
}

static uint32_t token_at(const uint8_t *b, size_t i, size_t width)
{
    if (width == 2)
        return (uint32_t)b[2 * i] | (uint32_t)b[2 * i + 1] << 8;
    const uint8_t *p = b + 4 * i;
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Shard k's documents: a new one at each delimiter (and at its first token). */
static ferry_status scan_shard(ferry_tok_source *s, size_t k, uint32_t delim, uint8_t *buf,
                               doc_list *l)
{
    uint64_t count = s->shards[k].h.count, start = 0;
    for (uint64_t at = 0; at < count;) {
        size_t m = count - at < CHUNK ? (size_t)(count - at) : CHUNK;
        ferry_status st = ferry__tok_read(s, k, at, m, buf);
        if (st != FERRY_OK)
            return st;
        for (size_t i = 0; i < m; i++) {
            if (token_at(buf, i, s->token_bytes) != delim || at + i == start)
                continue;
            if ((st = push(l, (ferry_tok_doc){start, at + i - start, (uint32_t)k})) != FERRY_OK)
                return st;
            start = at + i;
        }
        at += m;
    }
    return count > start ? push(l, (ferry_tok_doc){start, count - start, (uint32_t)k}) : FERRY_OK;
}

ferry_status ferry__tok_find_docs(ferry_tok_source *s, uint32_t delim, ferry_tok_doc **out,
                                  size_t *n)
{
    doc_list l = {0};
    uint8_t *buf = ferry_host_malloc(CHUNK * s->token_bytes);
    ferry_status st = buf ? FERRY_OK : FERRY_ERR_NO_MEMORY;
    for (size_t k = 0; k < s->n && st == FERRY_OK; k++)
        st = scan_shard(s, k, delim, buf, &l);
    ferry_host_free(buf);
    if (st != FERRY_OK) {
        ferry_host_free(l.v);
        return st;
    }
    *out = l.v;
    *n = l.n;
    return FERRY_OK;
}

/* Remote bytes straight into memory, past the cache: one member's byte range
 * (a read that the cache or a stream cannot serve), and a small whole object
 * (a shard's index kept beside it); and the pool of kept connections such
 * reads share across threads. */
#include <string.h>

#include "common/error.h"
#include "dataset/remote/remote.h"

typedef struct membuf {
    uint8_t *d;
    size_t n, cap;
    const char *url;
} membuf;

static int to_mem(void *arg, const uint8_t *b, size_t n)
{
    membuf *m = arg;
    if (n > m->cap - m->n) { /* ferry__remote_get never sends more than asked */
        ferry_fail_at(FERRY_ERR_IO, m->url, "more bytes than asked for");
        return 1;
    }
    memcpy(m->d + m->n, b, n);
    m->n += n;
    return 0;
}

ferry_status ferry__remote_read(const char *url, const ferry_remote_opts *o,
                                const ferry_remote_obj *obj, uint64_t off, size_t n, uint8_t *dst,
                                ferry_remote_counters *cnt)
{
    return ferry__remote_conn_read(NULL, url, o, obj, off, n, dst, cnt);
}

ferry_status ferry__remote_conn_read(ferry_remote_conn *c, const char *url,
                                     const ferry_remote_opts *o, const ferry_remote_obj *obj,
                                     uint64_t off, size_t n, uint8_t *dst,
                                     ferry_remote_counters *cnt)
{
    if (off > obj->size || n > obj->size - off)
        return ferry_fail_at(FERRY_ERR_IO, url, "bytes %llu to %llu are past its end (%llu bytes)",
                             (unsigned long long)off, (unsigned long long)off + n,
                             (unsigned long long)obj->size);
    membuf m = {.d = dst, .cap = n, .url = url};
    ferry_status st = ferry__remote_conn_get(c, url, o, obj, off, off + n, to_mem, NULL, &m, cnt);
    if (st == FERRY_OK && m.n != n) /* cannot be: the fetch checks the length */
        return ferry_fail_at(FERRY_ERR_IO, url, "at byte %llu: %zu of %zu bytes came",
                             (unsigned long long)off, m.n, n);
    return st;
}

ferry_status ferry__remote_fetch_small(const char *url, const ferry_remote_opts *o, size_t max,
                                       ferry_remote_counters *cnt, uint8_t **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    ferry_remote_obj obj;
    ferry_status st = ferry__remote_stat(url, o, cnt, &obj);
    if (st != FERRY_OK)
        return st;
    if (obj.size > max)
        return ferry_fail_at(FERRY_ERR_LIMIT, url, "is %llu bytes, over the %zu-byte limit",
                             (unsigned long long)obj.size, max);
    membuf m = {.d = ferry_host_malloc(obj.size ? (size_t)obj.size : 1), .cap = (size_t)obj.size,
                .url = url};
    if (!m.d)
        return FERRY_ERR_NO_MEMORY;
    st = ferry__remote_get(url, o, &obj, 0, obj.size, to_mem, NULL, &m, cnt);
    if (st != FERRY_OK) {
        ferry_host_free(m.d);
        return st;
    }
    *out = m.d;
    *n = m.n;
    return FERRY_OK;
}

/* ---- the pool of idle connections ---- */
void ferry__remote_pool_init(ferry_remote_pool *p)
{
    memset(p, 0, sizeof *p);
    pthread_mutex_init(&p->lock, NULL);
    p->on = true;
}

void ferry__remote_pool_fini(ferry_remote_pool *p)
{
    if (!p->on)
        return;
    for (size_t i = 0; i < p->nidle; i++)
        ferry__remote_conn_destroy(p->idle[i]);
    pthread_mutex_destroy(&p->lock);
    memset(p, 0, sizeof *p);
}

ferry_remote_conn *ferry__remote_pool_take(ferry_remote_pool *p)
{
    ferry_remote_conn *c = NULL;
    pthread_mutex_lock(&p->lock);
    if (p->nidle)
        c = p->idle[--p->nidle];
    pthread_mutex_unlock(&p->lock);
    if (!c && ferry__remote_conn_create(&c) != FERRY_OK)
        ferry_clear_error();
    return c;
}

void ferry__remote_pool_give(ferry_remote_pool *p, ferry_remote_conn *c)
{
    pthread_mutex_lock(&p->lock);
    if (c && p->nidle < FERRY_REMOTE_POOL_MAX) {
        p->idle[p->nidle++] = c;
        c = NULL;
    }
    pthread_mutex_unlock(&p->lock);
    ferry__remote_conn_destroy(c);
}

ferry_status ferry__remote_pool_read(ferry_remote_pool *p, const char *url,
                                     const ferry_remote_opts *o, const ferry_remote_obj *obj,
                                     uint64_t off, size_t n, uint8_t *dst,
                                     ferry_remote_counters *cnt)
{
    ferry_remote_conn *c = ferry__remote_pool_take(p);
    ferry_status st = ferry__remote_conn_read(c, url, o, obj, off, n, dst, cnt);
    ferry__remote_pool_give(p, c);
    return st;
}

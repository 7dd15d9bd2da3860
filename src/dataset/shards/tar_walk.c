/* Walking a shard's members front to back. Headers, pax records and GNU long
 * names come through one window buffer refilled by pread, so the index of a
 * shard of small files costs a few large reads, and a large member is skipped
 * without reading it. Every offset is checked against the file's size first:
 * a truncated shard is an error naming where it ends, never a short member. */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "common/assert.h"
#include "common/error.h"
#include "dataset/shards/gz.h"
#include "dataset/shards/tar.h"

/* Large enough for a run of small members per read; pax records and long
 * names must fit in it. */
#define WINDOW ((size_t)1 << 20)

ferry_status ferry__tar_walk_init(ferry_tar_walk *w, int fd, const char *shard, uint64_t file_size)
{
    memset(w, 0, sizeof *w);
    w->fd = fd;
    w->shard = shard;
    w->file_size = file_size;
    w->buf = ferry_host_malloc(WINDOW);
    if (!w->buf)
        return FERRY_ERR_NO_MEMORY;
    w->cap = WINDOW;
    return FERRY_OK;
}

ferry_status ferry__tar_walk_init_gz(ferry_tar_walk *w, ferry_gz *gz, const char *shard)
{
    ferry_status st = ferry__tar_walk_init(w, -1, shard, UINT64_MAX);
    w->gz = gz;
    return st;
}

void ferry__tar_walk_free(ferry_tar_walk *w)
{
    ferry_host_free(w->buf);
    ferry_host_free(w->name);
    memset(w, 0, sizeof *w);
}

/* The walk's invariants, checked on entry to and on return from each call in
 * debug and sanitizer builds (FERRY_ASSERT): the window fits its buffer and
 * lies inside the tar (as far as its size is known); the next header is on a
 * block boundary, never behind the last member returned; the name fits. */
static void check_walk(const ferry_tar_walk *w)
{
#if FERRY_DEBUG
    FERRY_ASSERT(w->len <= w->cap && (w->buf || !w->cap));
    FERRY_ASSERT(w->start <= w->file_size && w->len <= w->file_size - w->start);
    FERRY_ASSERT(w->pos % FERRY_TAR_BLOCK == 0);
    FERRY_ASSERT(!w->has_prev || (w->prev_hdr % FERRY_TAR_BLOCK == 0 && w->prev_hdr < w->pos));
    FERRY_ASSERT(!w->name || strlen(w->name) < w->name_cap);
#else
    (void)w;
#endif
}

/* The size of a gzip-compressed tar is known once its stream has ended. */
static bool size_unknown(const ferry_tar_walk *w) { return w->file_size == UINT64_MAX; }

/* The window from off, out of the gzip stream. The stream is at the window's
 * end: what of the window is still wanted moves to the front, bytes up to off
 * are decompressed and dropped, then the window is filled. Reaching the end of
 * the stream makes the size known. */
static ferry_status refill_gz(ferry_tar_walk *w, uint64_t off)
{
    uint64_t end = w->start + w->len;
    size_t keep = 0, got = 0;
    ferry_status st = FERRY_OK;
    if (off < w->start)
        return ferry_fail_at(FERRY_ERR_BAD_STATE, w->shard, "read at byte %llu, behind the gzip stream",
                             (unsigned long long)off);
    if (off < end) {
        keep = (size_t)(end - off);
        memmove(w->buf, w->buf + (off - w->start), keep);
    }
    while (end < off && st == FERRY_OK) {
        uint64_t gap = off - end;
        size_t want = gap < w->cap ? (size_t)gap : w->cap;
        st = ferry__gz_read(w->gz, w->buf, want, &got);
        end += got;
        if (st == FERRY_OK && got < want)
            break;
    }
    /* At off (or at the window's end, what was kept before it): fill the rest. */
    if (st == FERRY_OK && end >= off)
        st = ferry__gz_read(w->gz, w->buf + keep, w->cap - keep, &got);
    else
        got = 0;
    if (st != FERRY_OK)
        return st;
    w->start = end < off ? end : off;
    w->len = keep + got;
    if (w->gz->end)
        w->file_size = w->start + w->len;
    return FERRY_OK;
}

static ferry_status refill(ferry_tar_walk *w, uint64_t off)
{
    if (w->gz)
        return refill_gz(w, off);
    uint64_t left = w->file_size - off;
    size_t want = left < w->cap ? (size_t)left : w->cap, got = 0;
    while (got < want) {
        ssize_t r = pread(w->fd, w->buf + got, want - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return ferry_fail_at(FERRY_ERR_IO, w->shard, "read at byte %llu: %s",
                                 (unsigned long long)off + got, strerror(errno));
        if (r == 0)
            return ferry_fail_at(FERRY_ERR_IO, w->shard, "shrank to %llu bytes while being read",
                                 (unsigned long long)off + got);
        got += (size_t)r;
    }
    w->start = off;
    w->len = got;
    return FERRY_OK;
}

/* Whether [off, off + n) lies in the window; no sum that could wrap. */
static bool in_window(const ferry_tar_walk *w, uint64_t off, size_t n)
{
    return w->len && off >= w->start && off - w->start <= w->len && n <= w->len - (off - w->start);
}

ferry_status ferry__tar_read(ferry_tar_walk *w, uint64_t off, size_t n, const uint8_t **out)
{
    check_walk(w);
    *out = w->buf; /* never left unset, whatever happens below */
    if (n > w->cap)
        return ferry_fail_at(FERRY_ERR_LIMIT, w->shard, "%zu bytes at byte %llu: over the %zu-byte read "
                             "window", n, (unsigned long long)off, w->cap);
    if (!in_window(w, off, n) && size_unknown(w)) {
        ferry_status st = refill(w, off);
        if (st != FERRY_OK)
            return st;
    }
    if (off > w->file_size || n > w->file_size - off)
        return ferry_fail_at(FERRY_ERR_FORMAT, w->shard, "truncated: %zu bytes at byte %llu run past its "
                             "end (%llu bytes)", n, (unsigned long long)off,
                             (unsigned long long)w->file_size);
    if (!in_window(w, off, n)) {
        ferry_status st = refill(w, off);
        if (st != FERRY_OK)
            return st;
    }
    *out = w->buf + (off - w->start);
    check_walk(w);
    return FERRY_OK;
}

static ferry_status set_name(ferry_tar_walk *w, const char *s, size_t n)
{
    w->has_prev = false;
    if (n + 1 > w->name_cap) {
        char *p = ferry_host_realloc(w->name, n + 1);
        if (!p)
            return FERRY_ERR_NO_MEMORY;
        w->name = p;
        w->name_cap = n + 1;
    }
    memcpy(w->name, s, n);
    w->name[n] = '\0';
    return FERRY_OK;
}

/* What the extended headers before a member said about it. */
typedef struct pending {
    bool name, size;
    uint64_t size_value;
    uint64_t first;       /* the first header of the member */
} pending;

/* Applies an 'x' or 'L' header's data (size bytes at data_off) to *p. */
static ferry_status take_extension(ferry_tar_walk *w, const ferry_tar_header *h, uint64_t hdr_off,
                                   uint64_t data_off, pending *p)
{
    const uint8_t *d = NULL;
    if (h->size > w->cap)
        return ferry_fail_at(FERRY_ERR_LIMIT, w->shard, "%s header at byte %llu holds %llu bytes, over "
                             "the %zu-byte limit", h->kind == FERRY_TAR_PAX ? "pax" :
                             "GNU long-name", (unsigned long long)hdr_off,
                             (unsigned long long)h->size, w->cap);
    ferry_status st = ferry__tar_read(w, data_off, (size_t)h->size, &d);
    if (st != FERRY_OK)
        return st;
    if (h->kind == FERRY_TAR_LONGNAME) {
        const uint8_t *z = memchr(d, 0, (size_t)h->size);
        p->name = true;
        return set_name(w, (const char *)d, z ? (size_t)(z - d) : (size_t)h->size);
    }
    ferry_tar_pax x;
    if ((st = ferry__tar_pax_parse(d, (size_t)h->size, &x)) != FERRY_OK)
        return ferry_fail_prefix(ferry_fail_named(st, w->shard), "pax header at byte %llu: ",
                                 (unsigned long long)hdr_off);
    if (x.path) {
        p->name = true;
        if ((st = set_name(w, x.path, x.path_len)) != FERRY_OK)
            return st;
    }
    if (x.has_size) {
        p->size = true;
        p->size_value = x.size;
    }
    return FERRY_OK;
}

/* The header block at w->pos, or the reason the shard ends there. */
static ferry_status read_header(ferry_tar_walk *w, const uint8_t **b)
{
    if (size_unknown(w)) { /* gzip: reading is how the end is found */
        ferry_status st = ferry__tar_read(w, w->pos, FERRY_TAR_BLOCK, b);
        if (st == FERRY_OK || size_unknown(w))
            return st;
        ferry_clear_error(); /* the size is known now: say why below */
    }
    if (w->pos > w->file_size && w->has_prev) /* only gzip gets here: see ferry__tar_next */
        return ferry_fail_at(FERRY_ERR_FORMAT, w->shard, "member %s at byte %llu: its %llu bytes of data "
                             "run past the end of the shard (%llu bytes): truncated",
                             w->name, (unsigned long long)w->prev_hdr,
                             (unsigned long long)w->prev_size, (unsigned long long)w->file_size);
    if (w->pos >= w->file_size)
        return ferry_fail_at(FERRY_ERR_FORMAT, w->shard, "ends at byte %llu without the end-of-archive "
                             "marker (zero blocks): truncated",
                             (unsigned long long)w->file_size);
    if (w->file_size - w->pos < FERRY_TAR_BLOCK)
        return ferry_fail_at(FERRY_ERR_FORMAT, w->shard, "truncated inside the header at byte %llu "
                             "(the shard ends at byte %llu)", (unsigned long long)w->pos,
                             (unsigned long long)w->file_size);
    return ferry__tar_read(w, w->pos, FERRY_TAR_BLOCK, b);
}

ferry_status ferry__tar_next(ferry_tar_walk *w, ferry_tar_member *m, bool *end)
{
    check_walk(w);
    pending p = {.first = w->pos};
    *end = false;
    for (;;) {
        const uint8_t *b = NULL;
        ferry_status st = read_header(w, &b);
        if (st != FERRY_OK)
            return st;
        uint64_t hdr = w->pos;
        if (ferry__tar_is_zero_block(b)) {
            if (hdr != p.first)
                return ferry_fail_at(FERRY_ERR_FORMAT, w->shard, "the extended header at byte %llu is "
                                     "followed by the end of the archive, not a member",
                                     (unsigned long long)p.first);
            *end = true;
            return FERRY_OK;
        }
        ferry_tar_header h;
        if ((st = ferry__tar_header_parse(b, &h)) != FERRY_OK)
            return ferry_fail_prefix(ferry_fail_named(st, w->shard), "header at byte %llu: ",
                                     (unsigned long long)hdr);
        /* A pax size applies to the member's data, not to the extended headers. */
        bool ext = h.kind == FERRY_TAR_PAX || h.kind == FERRY_TAR_LONGNAME ||
                   h.kind == FERRY_TAR_PAX_GLOBAL || h.kind == FERRY_TAR_LONGLINK;
        uint64_t size = !ext && p.size ? p.size_value : h.size;
        uint64_t data = hdr + FERRY_TAR_BLOCK;
        /* No tar is 2^62 bytes; the bound keeps the offsets below from wrapping
         * while a gzip tar's size is unknown. */
        if (size > ((uint64_t)1 << 62))
            return ferry_fail_at(FERRY_ERR_FORMAT, w->shard, "member %s at byte %llu: a size of %llu "
                                 "bytes is not a real one", p.name ? w->name : h.name,
                                 (unsigned long long)p.first, (unsigned long long)size);
        /* (For gzip the size is not known yet: the next read finds the end.) */
        if (size > w->file_size - data)
            return ferry_fail_at(FERRY_ERR_FORMAT, w->shard, "member %s at byte %llu: its %llu bytes of "
                                 "data run past the end of the shard (%llu bytes): truncated",
                                 p.name ? w->name : h.name, (unsigned long long)p.first,
                                 (unsigned long long)size, (unsigned long long)w->file_size);
        w->pos = data + (size + FERRY_TAR_BLOCK - 1) / FERRY_TAR_BLOCK * FERRY_TAR_BLOCK;
        if (h.kind == FERRY_TAR_PAX || h.kind == FERRY_TAR_LONGNAME) {
            if ((st = take_extension(w, &h, hdr, data, &p)) != FERRY_OK)
                return st;
            continue;
        }
        if (ext) /* global pax records and GNU link names say nothing ferry uses */
            continue;
        if (!p.name && (st = set_name(w, h.name, strlen(h.name))) != FERRY_OK)
            return st;
        *m = (ferry_tar_member){.name = w->name, .kind = h.kind, .type = h.type,
                                .header_off = p.first, .data_off = data, .size = size};
        w->has_prev = true;
        w->prev_hdr = p.first;
        w->prev_size = size;
        check_walk(w);
        return FERRY_OK;
    }
}

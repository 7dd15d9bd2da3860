/* Walking a shard's members front to back. Headers, pax records and GNU long
 * names come through one window buffer refilled by pread, so the index of a
 * shard of small files costs a few large reads, and a large member is skipped
 * without reading it. Every offset is checked against the file's size first:
 * a truncated shard is an error naming where it ends, never a short member. */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "common/error.h"
#include "dataset/tar.h"

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

void ferry__tar_walk_free(ferry_tar_walk *w)
{
    ferry_host_free(w->buf);
    ferry_host_free(w->name);
    memset(w, 0, sizeof *w);
}

static ferry_status refill(ferry_tar_walk *w, uint64_t off)
{
    uint64_t left = w->file_size - off;
    size_t want = left < w->cap ? (size_t)left : w->cap, got = 0;
    while (got < want) {
        ssize_t r = pread(w->fd, w->buf + got, want - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return ferry_fail(FERRY_ERR_IO, "%s: read at byte %llu: %s", w->shard,
                              (unsigned long long)off + got, strerror(errno));
        if (r == 0)
            return ferry_fail(FERRY_ERR_IO, "%s: shrank to %llu bytes while being read",
                              w->shard, (unsigned long long)off + got);
        got += (size_t)r;
    }
    w->start = off;
    w->len = got;
    return FERRY_OK;
}

ferry_status ferry__tar_read(ferry_tar_walk *w, uint64_t off, size_t n, const uint8_t **out)
{
    *out = w->buf; /* never left unset, whatever happens below */
    if (n > w->cap)
        return ferry_fail(FERRY_ERR_LIMIT, "%s: %zu bytes at byte %llu: over the %zu-byte read "
                          "window", w->shard, n, (unsigned long long)off, w->cap);
    if (off > w->file_size || n > w->file_size - off)
        return ferry_fail(FERRY_ERR_FORMAT, "%s: truncated: %zu bytes at byte %llu run past its "
                          "end (%llu bytes)", w->shard, n, (unsigned long long)off,
                          (unsigned long long)w->file_size);
    if (!w->len || off < w->start || off + n > w->start + w->len) {
        ferry_status st = refill(w, off);
        if (st != FERRY_OK)
            return st;
    }
    *out = w->buf + (off - w->start);
    return FERRY_OK;
}

static ferry_status set_name(ferry_tar_walk *w, const char *s, size_t n)
{
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
        return ferry_fail(FERRY_ERR_LIMIT, "%s: %s header at byte %llu holds %llu bytes, over "
                          "the %zu-byte limit", w->shard, h->kind == FERRY_TAR_PAX ? "pax" :
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
        return ferry_fail_prefix(st, "%s: pax header at byte %llu: ", w->shard,
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
    if (w->pos >= w->file_size)
        return ferry_fail(FERRY_ERR_FORMAT, "%s: ends at byte %llu without the end-of-archive "
                          "marker (zero blocks): truncated", w->shard,
                          (unsigned long long)w->file_size);
    if (w->file_size - w->pos < FERRY_TAR_BLOCK)
        return ferry_fail(FERRY_ERR_FORMAT, "%s: truncated inside the header at byte %llu "
                          "(the shard ends at byte %llu)", w->shard, (unsigned long long)w->pos,
                          (unsigned long long)w->file_size);
    return ferry__tar_read(w, w->pos, FERRY_TAR_BLOCK, b);
}

ferry_status ferry__tar_next(ferry_tar_walk *w, ferry_tar_member *m, bool *end)
{
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
                return ferry_fail(FERRY_ERR_FORMAT, "%s: the extended header at byte %llu is "
                                  "followed by the end of the archive, not a member", w->shard,
                                  (unsigned long long)p.first);
            *end = true;
            return FERRY_OK;
        }
        ferry_tar_header h;
        if ((st = ferry__tar_header_parse(b, &h)) != FERRY_OK)
            return ferry_fail_prefix(st, "%s: header at byte %llu: ", w->shard,
                                     (unsigned long long)hdr);
        /* A pax size applies to the member's data, not to the extended headers. */
        bool ext = h.kind == FERRY_TAR_PAX || h.kind == FERRY_TAR_LONGNAME ||
                   h.kind == FERRY_TAR_PAX_GLOBAL || h.kind == FERRY_TAR_LONGLINK;
        uint64_t size = !ext && p.size ? p.size_value : h.size;
        uint64_t data = hdr + FERRY_TAR_BLOCK;
        if (size > w->file_size - data)
            return ferry_fail(FERRY_ERR_FORMAT, "%s: member %s at byte %llu: its %llu bytes of "
                              "data run past the end of the shard (%llu bytes): truncated",
                              w->shard, p.name ? w->name : h.name, (unsigned long long)p.first,
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
        return FERRY_OK;
    }
}

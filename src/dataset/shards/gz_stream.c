/* A gzip file read front to back: pread of large compressed chunks, inflate
 * into the caller's buffer. Members follow one another (pigz, bgzip and `cat
 * a.gz b.gz` write several); bytes after the last member that do not start
 * another one are ignored, as gzip(1) ignores them. */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "common/error.h"
#include "dataset/shards/gz.h"

/* Compressed bytes per read: large enough that the reads are sequential and
 * few, small enough to keep many streams open. */
#define IN_CAP ((size_t)256 << 10)

void *ferry__z_alloc(void *opaque, unsigned items, unsigned size)
{
    (void)opaque;
    return ferry_host_calloc(items, size);
}

void ferry__z_free(void *opaque, void *p)
{
    (void)opaque;
    ferry_host_free(p);
}

ferry_status ferry__gz_open(ferry_gz *g, int fd, const char *name)
{
    memset(g, 0, sizeof *g);
    g->fd = fd;
    g->name = name;
    g->z.zalloc = ferry__z_alloc;
    g->z.zfree = ferry__z_free;
    if (!(g->in = ferry_host_malloc(IN_CAP)))
        return FERRY_ERR_NO_MEMORY;
    g->in_cap = IN_CAP;
    /* 15 + 16: a gzip wrapper (not zlib, not raw deflate), the largest window. */
    int r = inflateInit2(&g->z, 15 + 16);
    if (r != Z_OK) {
        ferry_host_free(g->in);
        g->in = NULL;
        return r == Z_MEM_ERROR ? FERRY_ERR_NO_MEMORY :
               ferry_fail_at(FERRY_ERR_BAD_STATE, name, "zlib inflateInit2 failed (%d)", r);
    }
    g->z_ready = true;
    return FERRY_OK;
}

void ferry__gz_close(ferry_gz *g)
{
    if (g->z_ready)
        inflateEnd(&g->z);
    ferry_host_free(g->in);
    memset(g, 0, sizeof *g);
    g->fd = -1;
}

ferry_status ferry__gz_rewind(ferry_gz *g)
{
    if (inflateReset(&g->z) != Z_OK)
        return ferry_fail_at(FERRY_ERR_BAD_STATE, g->name, "zlib inflateReset failed");
    g->z.next_in = g->in;
    g->z.avail_in = 0;
    g->in_off = 0;
    g->out = 0;
    g->end = false;
    return FERRY_OK;
}

/* More compressed input after what is left of it; *eof when the file has
 * none. */
static ferry_status fill(ferry_gz *g, bool *eof)
{
    *eof = false;
    size_t left = g->z.avail_in;
    if (left)
        memmove(g->in, g->z.next_in, left);
    for (;;) {
        ssize_t r = pread(g->fd, g->in + left, g->in_cap - left, (off_t)g->in_off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return ferry_fail_at(FERRY_ERR_IO, g->name, "read at compressed byte %llu: %s",
                                 (unsigned long long)g->in_off, strerror(errno));
        g->z.next_in = g->in;
        g->z.avail_in = (uInt)(left + (size_t)r);
        g->in_off += (uint64_t)r;
        *eof = r == 0;
        return FERRY_OK;
    }
}

/* The compressed offset of the next byte inflate would take. */
static unsigned long long at_in(const ferry_gz *g)
{
    return (unsigned long long)(g->in_off - g->z.avail_in);
}

/* After a member's end: another member follows, or the stream is over. */
static ferry_status next_member(ferry_gz *g)
{
    bool eof = false;
    while (g->z.avail_in < 2 && !eof) {
        ferry_status st = fill(g, &eof);
        if (st != FERRY_OK)
            return st;
    }
    if (g->z.avail_in < 2 || !ferry__gz_magic(g->z.next_in)) {
        g->end = true;
        return FERRY_OK;
    }
    return inflateReset(&g->z) == Z_OK ? FERRY_OK :
           ferry_fail_at(FERRY_ERR_BAD_STATE, g->name, "zlib inflateReset failed");
}

ferry_status ferry__gz_read(ferry_gz *g, uint8_t *dst, size_t n, size_t *got)
{
    *got = 0;
    while (*got < n && !g->end) {
        if (!g->z.avail_in) {
            bool eof;
            ferry_status st = fill(g, &eof);
            if (st != FERRY_OK)
                return st;
            if (eof)
                return ferry_fail_at(FERRY_ERR_FORMAT, g->name, "gzip: the file ends inside compressed "
                                     "data at byte %llu (after %llu bytes decompressed): truncated",
                                     at_in(g), (unsigned long long)g->out);
        }
        size_t want = n - *got;
        g->z.next_out = dst + *got;
        g->z.avail_out = want > (1u << 30) ? (1u << 30) : (uInt)want;
        uInt before = g->z.avail_out, in_before = g->z.avail_in;
        int r = inflate(&g->z, Z_NO_FLUSH);
        size_t made = before - g->z.avail_out;
        *got += made;
        g->out += made;
        /* Z_BUF_ERROR with input left and room for output would repeat for ever. */
        if (r == Z_BUF_ERROR && !made && g->z.avail_in == in_before && in_before)
            r = Z_DATA_ERROR;
        if (r == Z_STREAM_END) {
            ferry_status st = next_member(g);
            if (st != FERRY_OK)
                return st;
        } else if (r != Z_OK && r != Z_BUF_ERROR) {
            return ferry_fail_at(r == Z_MEM_ERROR ? FERRY_ERR_NO_MEMORY : FERRY_ERR_FORMAT, g->name,
                                 "gzip: %s near compressed byte %llu (after %llu bytes "
                                 "decompressed)", g->z.msg ? g->z.msg : "corrupt data",
                                 at_in(g), (unsigned long long)g->out);
        }
    }
    return FERRY_OK;
}

ferry_status ferry__gz_take(ferry_gz *g, uint8_t *dst, uint64_t n, uint8_t *tmp, size_t tmp_n)
{
    if (!dst && !tmp_n)
        return ferry_fail_at(FERRY_ERR_BAD_STATE, g->name, "nowhere to put skipped bytes");
    uint64_t done = 0, want_end = g->out + n;
    while (done < n) {
        uint64_t left = n - done;
        size_t step = dst ? (left > SIZE_MAX ? SIZE_MAX : (size_t)left) :
                      (left < tmp_n ? (size_t)left : tmp_n), got;
        ferry_status st = ferry__gz_read(g, dst ? dst + done : tmp, step, &got);
        if (st != FERRY_OK)
            return st;
        if (got < step)
            return ferry_fail_at(FERRY_ERR_FORMAT, g->name, "the decompressed tar ends at byte %llu, "
                                 "before byte %llu: truncated",
                                 (unsigned long long)g->out, (unsigned long long)want_end);
        done += got;
    }
    return FERRY_OK;
}

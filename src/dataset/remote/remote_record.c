/* What makes a cached shard trusted: its record. When a download completes,
 * ferry writes ferry-ID.record beside ferry-ID.shard (both mode 0600, in the
 * cache folder that only the user can write, created relative to its
 * descriptor): the URL, the ETag and size the server gave, and a 64-bit
 * checksum (common/hash64.h) of the bytes received. A later run adopts the
 * file only when the record matches what the server says now and the file's
 * bytes hash to the recorded sum; a file without a record (planted, copied in,
 * or left by an older ferry, which trusted the size alone) is downloaded again.
 *
 * Why a checksum and not a signature: the folder's checks (private_dir.h) are
 * what keep other users out; anyone who could rewrite the file could rewrite
 * its record as well, so a cryptographic hash would add nothing there. The sum
 * catches what is left: a file cut short, damaged on disk, or put there by
 * hand. Hashing reads the whole file once per run that adopts it (a few GB/s,
 * in the fetch thread, with no lock held), which is the read the run makes
 * anyway and warms the page cache for it.
 *
 * Format (text): "ferry-cache-record 1\nurl URL\netag ETAG\nsize N\nhash HEX\n".
 * The first four lines are compared byte for byte with the ones expected. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/atomic_file.h"
#include "common/error.h"
#include "common/hash64.h"
#include "dataset/remote/remote.h"

#define MAX_RECORD 16384

/* The lines that name the object; their length, or 0 when they do not fit. */
static size_t expected(const char *url, const ferry_remote_obj *obj, char *out, size_t cap)
{
    int w = snprintf(out, cap, "ferry-cache-record 1\nurl %s\netag %s\nsize %" PRIu64 "\n", url,
                     obj->etag, obj->size);
    return w > 0 && (size_t)w < cap ? (size_t)w : 0;
}

ferry_status ferry__remote_record_write(int dfd, const char *dir, const char *name,
                                        const char *url, const ferry_remote_obj *obj,
                                        uint64_t hash)
{
    char rec[MAX_RECORD];
    size_t n = expected(url, obj, rec, sizeof rec - 32);
    if (!n)
        return ferry_fail_at(FERRY_ERR_INVALID_ARG, url, "too long a URL and ETag to record");
    n += (size_t)snprintf(rec + n, sizeof rec - n, "hash %016" PRIx64 "\n", hash);
    ferry_atomic_file f;
    ferry_status st = ferry_atomic_open_at(&f, dfd, dir, name, 0600);
    if (st != FERRY_OK)
        return st;
    if ((st = ferry_atomic_write(&f, rec, n)) != FERRY_OK) {
        ferry_atomic_abort(&f);
        return st;
    }
    return ferry_atomic_commit(&f);
}

/* The file at fd, whole, hashed; false when it cannot be read to its size. */
static bool hash_file(int fd, uint64_t size, uint64_t *out)
{
    static const size_t CHUNK = (size_t)1 << 20;
    uint8_t *buf = ferry_host_malloc(CHUNK);
    if (!buf)
        return false;
    ferry_hash64 h;
    ferry_hash64_init(&h);
    uint64_t at = 0;
    while (at < size) {
        size_t want = size - at < CHUNK ? (size_t)(size - at) : CHUNK;
        ssize_t r = pread(fd, buf, want, (off_t)at);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        ferry_hash64_update(&h, buf, (size_t)r);
        at += (uint64_t)r;
    }
    ferry_host_free(buf);
    *out = ferry_hash64_final(&h);
    return at == size;
}

/* The record at name read whole into rec (NUL-terminated); false when it is
 * not a regular file of the user's, or too long. */
static bool read_record(int dfd, const char *name, char *rec, size_t cap)
{
    int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return false;
    struct stat sb;
    size_t n = 0;
    bool ok = fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_uid == geteuid() &&
              sb.st_size > 0 && (uint64_t)sb.st_size < cap;
    while (ok && n < (size_t)sb.st_size) {
        ssize_t r = read(fd, rec + n, (size_t)sb.st_size - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            ok = false;
        else
            n += (size_t)r;
    }
    close(fd);
    rec[ok ? n : 0] = '\0';
    return ok;
}

bool ferry__remote_record_matches(int dfd, const char *name, const char *url,
                                  const ferry_remote_obj *obj, int fd)
{
    char rec[MAX_RECORD], want[MAX_RECORD];
    size_t n = expected(url, obj, want, sizeof want);
    uint64_t sum, actual;
    char end;
    struct stat sb;
    return n && read_record(dfd, name, rec, sizeof rec) && strncmp(rec, want, n) == 0 &&
           strlen(rec + n) == 22 && sscanf(rec + n, "hash %16" SCNx64 "%c", &sum, &end) == 2 &&
           end == '\n' && fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) &&
           sb.st_uid == geteuid() && (uint64_t)sb.st_size == obj->size &&
           hash_file(fd, obj->size, &actual) && actual == sum;
}

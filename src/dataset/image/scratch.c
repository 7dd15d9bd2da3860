/* Per-thread scratch: buffers that grow to the largest sample seen and are then
 * reused, plus the arena that serves libpng's allocations, so a warm worker
 * decodes without touching the allocator. */
#include <errno.h>
#include <fcntl.h>
#include <stdalign.h>
#include <stddef.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/assert.h"
#include "common/error.h"
#include "dataset/image/image.h"

/* libpng's allocations past the arena: a doubly linked list so each can be freed. */
struct ferry_arena_block {
    ferry_arena_block *prev, *next;
    size_t size;
    alignas(max_align_t) unsigned char data[];
};

/* A hostile file must not make the arena huge for the rest of the run: past this
 * size libpng's allocations go to the host allocator and are freed one by one. */
#define ARENA_MAX ((size_t)8 << 20)
/* Headroom when the arena grows: zlib's window is sized by each file's header
 * (256 B to 32 KiB), so files of one image size still differ by up to this. */
#define ARENA_SLACK ((size_t)32 << 10)
#define ARENA_ALIGN 16

ferry_status ferry_scratch_create(ferry_scratch **out)
{
    if (!out)
        return FERRY_ARG_ERROR("out is NULL");
    *out = ferry_host_calloc(1, sizeof **out);
    return *out ? FERRY_OK : FERRY_ERR_NO_MEMORY;
}

void ferry_scratch_destroy(ferry_scratch *s)
{
    if (!s)
        return;
    while (s->overflow) {
        ferry_arena_block *b = s->overflow;
        s->overflow = b->next;
        ferry_host_free(b);
    }
    ferry_host_free(s->file);
    ferry_host_free(s->image);
    ferry_host_free(s->row);
    ferry_host_free(s->work);
    ferry__jpeg_state_free(s->jpeg);
    ferry_host_free(s->decoded);
    ferry_host_free(s->coef);
    ferry_host_free(s->crop);
    ferry_host_free(s->arena);
    ferry_host_free(s);
}

ferry_status ferry__scratch_grow(uint8_t **buf, size_t *cap, size_t n)
{
    if (*cap >= n && *buf)
        return FERRY_OK;
    /* Grow by half again so a run of slightly larger images does not realloc each time. */
    size_t want = n + n / 2;
    if (want < n)
        want = n;
    if (want < 4096)
        want = 4096;
    uint8_t *p = ferry_host_aligned(64, want);
    if (!p)
        return FERRY_ERR_NO_MEMORY;
    ferry_host_free(*buf);
    *buf = p;
    *cap = want;
    return FERRY_OK;
}

const char *ferry__not_regular_reason(mode_t mode)
{
    if (S_ISDIR(mode))
        return "is a directory, not a file";
    if (S_ISFIFO(mode))
        return "is a FIFO (named pipe), not a regular file";
    if (S_ISSOCK(mode))
        return "is a socket, not a regular file";
    if (S_ISCHR(mode) || S_ISBLK(mode))
        return "is a device, not a regular file";
    return "is not a regular file";
}

const char *ferry__open_error_reason(const char *path, int err)
{
    /* ENOENT alone reads as "the file is missing" while the listing showed it:
     * a link whose target is gone is the usual cause, so name it. */
    struct stat sb;
    if (err == ENOENT && lstat(path, &sb) == 0 && S_ISLNK(sb.st_mode))
        return "dangling symbolic link (its target does not exist)";
    return strerror(err);
}

const char *ferry__path_problem(const char *path)
{
    struct stat sb;
    if (stat(path, &sb) != 0) {
        int e = errno;
        return ferry__open_error_reason(path, e);
    }
    if (!S_ISREG(sb.st_mode))
        return ferry__not_regular_reason(sb.st_mode);
    /* The mode bits, ACLs and a read-only mount decide; the kernel knows. */
    if (access(path, R_OK) != 0) {
        int e = errno;
        return ferry__open_error_reason(path, e);
    }
    return NULL;
}

ferry_status ferry__scratch_read_file(ferry_scratch *s, const char *path, size_t max_bytes,
                                      size_t *n)
{
    return ferry__scratch_read_head(s, path, max_bytes, SIZE_MAX, n, NULL);
}

ferry_status ferry__scratch_read_head(ferry_scratch *s, const char *path, size_t max_bytes,
                                      size_t head, size_t *n, size_t *file_bytes)
{
    /* O_NONBLOCK: opening a FIFO named x.png would otherwise wait for a writer
     * forever; the type check below then refuses it. Reads of regular files
     * ignore the flag. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        int e = errno;
        return ferry_fail_at(FERRY_ERR_IO, path, "%s", ferry__open_error_reason(path, e));
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return ferry_fail_at(FERRY_ERR_IO, path, "%s", strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return ferry_fail_at(FERRY_ERR_IO, path, "%s", ferry__not_regular_reason(st.st_mode));
    }
    size_t size = (size_t)st.st_size;
    if (file_bytes)
        *file_bytes = size;
    if (max_bytes && size > max_bytes) {
        close(fd);
        return ferry_fail_at(FERRY_ERR_LIMIT, path, "file is %zu bytes, over the limit of %zu",
                             size, max_bytes);
    }
    if (size > head)
        size = head;
    ferry_status st2 = ferry__scratch_grow(&s->file, &s->file_cap, size + 1);
    if (st2 != FERRY_OK) {
        close(fd);
        return ferry_fail_named(st2, path);
    }
    size_t got = 0;
    while (got < size) {
        ssize_t r = read(fd, s->file + got, size - got);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            int e = errno;
            close(fd);
            return ferry_fail_at(FERRY_ERR_IO, path, "%s", strerror(e));
        }
        if (r == 0)
            break; /* shrank while reading: decode what is there */
        got += (size_t)r;
    }
    close(fd);
    *n = got;
    return FERRY_OK;
}

void *ferry__arena_alloc(ferry_scratch *s, size_t n)
{
    size_t need = (n + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
    if (need >= n && s->arena && s->arena_cap - s->arena_used >= need) {
        void *p = s->arena + s->arena_used;
        s->arena_used += need;
        FERRY_ASSERT(s->arena_used <= s->arena_cap && (uintptr_t)p % ARENA_ALIGN == 0);
        if (s->arena_used > s->arena_peak)
            s->arena_peak = s->arena_used;
        return p;
    }
    /* The arena grows to cover this decode's whole footprint at the next reset. */
    s->arena_over += need;
    if (s->arena_used + s->arena_over > s->arena_peak)
        s->arena_peak = s->arena_used + s->arena_over;
    ferry_arena_block *b = ferry_host_malloc(sizeof *b + n);
    if (!b)
        return NULL;
    memset(b->data, 0, n); /* see ferry__arena_reset */
    b->size = n;
    b->prev = NULL;
    b->next = s->overflow;
    if (s->overflow)
        s->overflow->prev = b;
    s->overflow = b;
    return b->data;
}

void ferry__arena_free(ferry_scratch *s, void *p)
{
    if (!p)
        return;
    uint8_t *q = p;
    if (s->arena && q >= s->arena && q < s->arena + s->arena_cap)
        return; /* arena memory goes back all at once at the reset */
    ferry_arena_block *b = (ferry_arena_block *)(q - offsetof(ferry_arena_block, data));
    FERRY_ASSERT(b->prev ? b->prev->next == b : s->overflow == b); /* one of ours, still live */
    if (b->prev)
        b->prev->next = b->next;
    else
        s->overflow = b->next;
    if (b->next)
        b->next->prev = b->prev;
    ferry_host_free(b);
}

void ferry__arena_reserve(ferry_scratch *s, size_t bytes)
{
    if (bytes > s->arena_peak)
        s->arena_peak = bytes;
}

void ferry__arena_reset(ferry_scratch *s)
{
    while (s->overflow) {
        ferry_arena_block *b = s->overflow;
        s->overflow = b->next;
        ferry_host_free(b);
    }
    s->arena_used = 0;
    s->arena_over = 0;
    size_t want = s->arena_peak + ARENA_SLACK < ARENA_MAX ? s->arena_peak + ARENA_SLACK : ARENA_MAX;
    if (s->arena_peak > s->arena_cap && want > s->arena_cap) {
        /* Failure here is harmless: the next decode overflows to the host allocator. */
        uint8_t *p = ferry_host_aligned(ARENA_ALIGN, want);
        if (p) {
            /* Zeroed once, when it grows: libjpeg-turbo's SIMD upsamplers read
             * the padding past a row's end (their results for it are dropped),
             * and valgrind, whose tracking through those shuffles is coarse,
             * would report the visible pixels as uninitialised. */
            memset(p, 0, want);
            ferry_host_free(s->arena);
            s->arena = p;
            s->arena_cap = want;
        }
    }
}

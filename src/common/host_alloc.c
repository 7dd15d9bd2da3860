/* The host allocation hook: every library allocation passes here, so a test can
 * fail the k-th one (fault injection) and check that nothing stays live. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/countdown.h"
#include "common/error.h"

static atomic_llong fail_countdown; /* 0 = off; 1 = fail the next allocation */
static atomic_llong alloc_count;
static atomic_llong alloc_live;
static _Thread_local int64_t thread_allocs;

int64_t ferry_debug_fail_alloc_after(int64_t k) { return atomic_exchange(&fail_countdown, (long long)k); }
int64_t ferry_debug_alloc_count(void) { return atomic_load(&alloc_count); }
int64_t ferry_debug_alloc_live(void) { return atomic_load(&alloc_live); }
int64_t ferry_debug_thread_alloc_count(void) { return thread_allocs; }

/* True when this allocation must fail on purpose. */
static int injected_failure(void) { return ferry_countdown_fires(&fail_countdown); }

static void *counted(void *p, size_t n)
{
    if (!p) {
        ferry_fail(FERRY_ERR_NO_MEMORY, "out of host memory allocating %zu bytes", n);
        return NULL;
    }
    atomic_fetch_add(&alloc_count, 1);
    atomic_fetch_add(&alloc_live, 1);
    thread_allocs++;
    return p;
}

void *ferry_host_malloc(size_t n)
{
    if (injected_failure())
        return counted(NULL, n);
    return counted(malloc(n ? n : 1), n);
}

void *ferry_host_calloc(size_t count, size_t size)
{
    size_t n;
    if (!ferry_mul_size(count, size, &n) || injected_failure())
        return counted(NULL, n);
    return counted(calloc(count ? count : 1, size ? size : 1), n);
}

void *ferry_host_realloc(void *p, size_t n)
{
    if (!p)
        return ferry_host_malloc(n);
    if (injected_failure()) {
        ferry_fail(FERRY_ERR_NO_MEMORY, "out of host memory allocating %zu bytes", n);
        return NULL;
    }
    void *q = realloc(p, n ? n : 1);
    if (!q)
        ferry_fail(FERRY_ERR_NO_MEMORY, "out of host memory allocating %zu bytes", n);
    else {
        atomic_fetch_add(&alloc_count, 1);
        thread_allocs++;
    }
    return q;
}

void *ferry_host_aligned(size_t align, size_t n)
{
    if (align < sizeof(void *))
        align = sizeof(void *);
    void *p = NULL;
    if (injected_failure() || posix_memalign(&p, align, n ? n : 1) != 0)
        p = NULL;
    return counted(p, n);
}

char *ferry_host_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = ferry_host_malloc(n);
    if (p)
        memcpy(p, s, n);
    return p;
}

void ferry_host_free(void *p)
{
    if (!p)
        return;
    atomic_fetch_sub(&alloc_live, 1);
    free(p);
}

/* The CPU backend: "device" memory is aligned host memory, copies are memcpy,
 * streams and events are valid and complete at once. Events still take a host
 * timestamp when recorded, so code timed with events measures something on a
 * machine without a GPU too. */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "device/backend.h"
#include "common/error.h"

/* Device memory alignment on the CPU: a cache line is enough for correctness;
 * 256 matches what cudaMalloc guarantees, so code tested here is not surprised
 * on a GPU. */
#define CPU_ALIGN 256

typedef struct cpu_event {
    bool timing;
    bool recorded;
    double ms; /* CLOCK_MONOTONIC at record time */
} cpu_event;

typedef struct cpu_stream {
    int unused; /* streams carry no state: every operation is complete on return */
} cpu_stream;

static double now_ms(void) { return ferry_now() * 1e3; }

static int cpu_count(void) { return 1; }

static ferry_status cpu_set_device(int index)
{
    if (index != 0)
        return ferry_fail(FERRY_ERR_NO_DEVICE, "the CPU backend has only device 0 (asked for %d)", index);
    return FERRY_OK;
}

static ferry_status cpu_get_device(int *index)
{
    *index = 0;
    return FERRY_OK;
}

/* "model name : Intel(R) Xeon(R) ..." from /proc/cpuinfo, else "cpu". */
static void cpu_model_name(char *buf, size_t size)
{
    snprintf(buf, size, "cpu");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0)
            continue;
        char *colon = strchr(line, ':');
        if (!colon)
            break;
        colon++;
        while (*colon == ' ' || *colon == '\t')
            colon++;
        colon[strcspn(colon, "\n")] = '\0';
        if (*colon)
            snprintf(buf, size, "%s", colon);
        break;
    }
    fclose(f);
}

/* MemAvailable from /proc/meminfo (what a new allocation can get without
 * swapping), else free pages from sysconf. */
static size_t cpu_free_memory(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (f) {
        char line[256];
        unsigned long long kb;
        while (fgets(line, sizeof line, f)) {
            if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) {
                fclose(f);
                return (size_t)kb * 1024;
            }
        }
        fclose(f);
    }
    long pages = sysconf(_SC_AVPHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
    return pages > 0 && psize > 0 ? (size_t)pages * (size_t)psize : 0;
}

static size_t cpu_total_memory(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
    return pages > 0 && psize > 0 ? (size_t)pages * (size_t)psize : 0;
}

static ferry_status cpu_mem_info(int index, size_t *free_bytes, size_t *total_bytes)
{
    (void)index;
    *free_bytes = cpu_free_memory();
    *total_bytes = cpu_total_memory();
    return FERRY_OK;
}

static ferry_status cpu_props(int index, ferry_device_props *out)
{
    (void)index;
    cpu_model_name(out->name, sizeof out->name);
    out->total_memory = cpu_total_memory();
    out->free_memory = cpu_free_memory();
    out->cc_major = out->cc_minor = 0;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    out->multiprocessors = n > 0 ? (int)n : 1;
    return FERRY_OK;
}

static ferry_status cpu_synchronize(int index)
{
    (void)index;
    return FERRY_OK;
}

static ferry_status cpu_malloc(int index, size_t bytes, void **out)
{
    (void)index;
    void *p = ferry_host_aligned(CPU_ALIGN, bytes);
    if (!p)
        return FERRY_ERR_DEVICE_OOM; /* the caller words the message */
    *out = p;
    return FERRY_OK;
}

static void cpu_free(int index, void *ptr)
{
    (void)index;
    ferry_host_free(ptr);
}

static ferry_status cpu_memset_zero(int index, void *ptr, size_t bytes, void *stream)
{
    (void)index;
    (void)stream;
    if (bytes)
        memset(ptr, 0, bytes);
    return FERRY_OK;
}

static ferry_status cpu_memcpy(int index, void *dst, const void *src, size_t bytes,
                               ferry_copy_kind kind, void *stream)
{
    (void)index;
    (void)kind;
    (void)stream;
    if (bytes && dst != src)
        memmove(dst, src, bytes);
    return FERRY_OK;
}

static ferry_status cpu_stream_create(int index, void **out)
{
    (void)index;
    cpu_stream *s = ferry_host_calloc(1, sizeof *s);
    if (!s)
        return FERRY_ERR_NO_MEMORY;
    *out = s;
    return FERRY_OK;
}

static void cpu_stream_destroy(int index, void *stream)
{
    (void)index;
    ferry_host_free(stream);
}

static ferry_status cpu_stream_sync(int index, void *stream)
{
    (void)index;
    (void)stream;
    return FERRY_OK;
}

static ferry_status cpu_stream_query(int index, void *stream, bool *done)
{
    (void)index;
    (void)stream;
    *done = true;
    return FERRY_OK;
}

static ferry_status cpu_stream_wait_event(int index, void *stream, void *event)
{
    (void)index;
    (void)stream;
    (void)event;
    return FERRY_OK;
}

static ferry_status cpu_event_create(int index, bool timing, void **out)
{
    (void)index;
    cpu_event *e = ferry_host_calloc(1, sizeof *e);
    if (!e)
        return FERRY_ERR_NO_MEMORY;
    e->timing = timing;
    *out = e;
    return FERRY_OK;
}

static void cpu_event_destroy(int index, void *event)
{
    (void)index;
    ferry_host_free(event);
}

static ferry_status cpu_event_record(int index, void *event, void *stream)
{
    (void)index;
    (void)stream;
    cpu_event *e = event;
    e->recorded = true;
    if (e->timing)
        e->ms = now_ms();
    return FERRY_OK;
}

static ferry_status cpu_event_sync(int index, void *event)
{
    (void)index;
    (void)event;
    return FERRY_OK;
}

static ferry_status cpu_event_query(int index, void *event, bool *done)
{
    (void)index;
    (void)event;
    *done = true;
    return FERRY_OK;
}

static ferry_status cpu_event_elapsed_ms(int index, void *start, void *end, float *ms)
{
    (void)index;
    cpu_event *a = start, *b = end;
    if (!a->timing || !b->timing)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "both events must be created with timing = true");
    if (!a->recorded || !b->recorded)
        return ferry_fail(FERRY_ERR_BAD_STATE, "both events must be recorded first");
    *ms = (float)(b->ms - a->ms);
    return FERRY_OK;
}

static ferry_status cpu_host_alloc(size_t bytes, void **out)
{
    void *p = ferry_host_aligned(4096, bytes);
    if (!p)
        return FERRY_ERR_NO_MEMORY;
    *out = p;
    return FERRY_OK;
}

static void cpu_host_free(void *ptr) { ferry_host_free(ptr); }

static const ferry_backend cpu_backend = {
    .name = "cpu",
    .kind = FERRY_BACKEND_CPU,
    .device_count = cpu_count,
    .set_device = cpu_set_device,
    .get_device = cpu_get_device,
    .props = cpu_props,
    .mem_info = cpu_mem_info,
    .synchronize = cpu_synchronize,
    .malloc = cpu_malloc,
    .free = cpu_free,
    .memset_zero = cpu_memset_zero,
    .memcpy = cpu_memcpy,
    .stream_create = cpu_stream_create,
    .stream_destroy = cpu_stream_destroy,
    .stream_sync = cpu_stream_sync,
    .stream_query = cpu_stream_query,
    .stream_wait_event = cpu_stream_wait_event,
    .event_create = cpu_event_create,
    .event_destroy = cpu_event_destroy,
    .event_record = cpu_event_record,
    .event_sync = cpu_event_sync,
    .event_query = cpu_event_query,
    .event_elapsed_ms = cpu_event_elapsed_ms,
    .host_alloc = cpu_host_alloc,
    .host_free = cpu_host_free,
};

const ferry_backend *ferry_backend_cpu(void) { return &cpu_backend; }

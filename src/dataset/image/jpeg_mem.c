/* libjpeg's memory manager, replaced for the image pool: libjpeg's own mallocs
 * every pool of every image (jmemnobs.c), so a worker would allocate per sample.
 * Here the image pool's small pieces come from the scratch's arena (reset per
 * decode, grown to the peak) and the virtual arrays (the whole-image coefficient
 * buffer of progressive and multi-scan files) from one scratch buffer, so a
 * warm scratch decodes without allocating. The permanent pool (the tables
 * libjpeg keeps between images) stays with libjpeg's manager. */
#include <string.h>

#include <jerror.h>

#include "common/error.h"
#include "dataset/image/jpeg.h"

/* libjpeg-turbo's SIMD code reads and writes whole vectors: it wants its
 * buffers 32-byte aligned and sample rows padded to 64 bytes (jmemmgr.c's
 * ALIGN_SIZE and its rounding of samplesperrow). */
#define JALIGN ((size_t)64)

/* The opaque types of jpeglib.h, defined here for this manager only. */
struct jvirt_sarray_control {
    JSAMPARRAY rows;
    JDIMENSION width, nrows; /* samples per row, rows */
    struct jvirt_sarray_control *next;
};
struct jvirt_barray_control {
    JBLOCKARRAY rows;
    JDIMENSION width, nrows; /* blocks per row, rows */
    struct jvirt_barray_control *next;
};

struct ferry_jpeg_mem {
    struct jpeg_memory_mgr pub;      /* first: cinfo.mem points here */
    struct jpeg_memory_mgr *orig;    /* libjpeg's, for the permanent pool */
    struct ferry_jpeg_state *st;
    struct jvirt_sarray_control *sarrays; /* requested this image, realized or not */
    struct jvirt_barray_control *barrays;
};

static struct ferry_jpeg_mem *mem_of(j_common_ptr c)
{
    return (struct ferry_jpeg_mem *)c->mem;
}

/* libjpeg's own methods find their state through cinfo->mem: it is theirs
 * for the length of the call. */
#define ORIG_CALL(c, ret, method, ...)                          \
    do {                                                        \
        struct ferry_jpeg_mem *m_ = mem_of(c);                  \
        (c)->mem = m_->orig;                                    \
        ret m_->orig->method(c, __VA_ARGS__);                   \
        (c)->mem = &m_->pub;                                    \
    } while (0)

static void *arena_get(j_common_ptr c, size_t n)
{
    struct ferry_jpeg_mem *m = mem_of(c);
    size_t need = n + JALIGN;
    if (need < n)
        ferry__jpeg_fail(m->st, 0, "allocation size overflows");
    uint8_t *p = ferry__arena_alloc(m->st->scratch, need);
    if (!p)
        ferry__jpeg_fail(m->st, 1, "out of memory in the JPEG decoder");
    return p + (JALIGN - (uintptr_t)p % JALIGN) % JALIGN;
}

/* After install, libjpeg asks the permanent pool only for quantization and
 * Huffman tables (jpeg_alloc_quant_table, jpeg_alloc_huff_table). They come
 * from the per-decode arena like everything else: ferry__jpeg_read_header
 * clears the table pointers before each file, so none outlives its decode,
 * and the permanent pool does not grow with every file. */
static void *alloc_small(j_common_ptr c, int pool, size_t n)
{
    (void)pool;
    return arena_get(c, n);
}

static void *alloc_large(j_common_ptr c, int pool, size_t n)
{
    if (pool == JPOOL_PERMANENT) {
        void *r;
        ORIG_CALL(c, r =, alloc_large, pool, n);
        return r;
    }
    return arena_get(c, n);
}

static size_t mul_or_fail(j_common_ptr c, size_t a, size_t b)
{
    size_t r;
    if (!ferry_mul_size(a, b, &r))
        ferry__jpeg_fail(mem_of(c)->st, 0, "allocation size overflows");
    return r;
}

/* Rows of `row_bytes` each (padded), in one piece, with their pointer array. */
static void **rows_alloc(j_common_ptr c, size_t row_bytes, size_t nrows, uint8_t *at)
{
    void **rows = arena_get(c, mul_or_fail(c, nrows ? nrows : 1, sizeof *rows));
    if (!at)
        at = arena_get(c, mul_or_fail(c, row_bytes, nrows));
    for (size_t i = 0; i < nrows; i++)
        rows[i] = at + i * row_bytes;
    return rows;
}

static size_t sample_row_bytes(JDIMENSION width)
{
    return ((size_t)width * sizeof(JSAMPLE) + JALIGN - 1) / JALIGN * JALIGN;
}

static JSAMPARRAY alloc_sarray(j_common_ptr c, int pool, JDIMENSION width, JDIMENSION nrows)
{
    if (pool == JPOOL_PERMANENT) {
        JSAMPARRAY r;
        ORIG_CALL(c, r =, alloc_sarray, pool, width, nrows);
        return r;
    }
    return (JSAMPARRAY)rows_alloc(c, sample_row_bytes(width), nrows, NULL);
}

static JBLOCKARRAY alloc_barray(j_common_ptr c, int pool, JDIMENSION width, JDIMENSION nrows)
{
    if (pool == JPOOL_PERMANENT) {
        JBLOCKARRAY r;
        ORIG_CALL(c, r =, alloc_barray, pool, width, nrows);
        return r;
    }
    return (JBLOCKARRAY)rows_alloc(c, mul_or_fail(c, width, sizeof(JBLOCK)), nrows, NULL);
}

static jvirt_sarray_ptr request_sarray(j_common_ptr c, int pool, boolean pre_zero,
                                       JDIMENSION width, JDIMENSION nrows, JDIMENSION maxaccess)
{
    (void)pre_zero; /* realized zeroed: never reads uninitialised memory */
    (void)maxaccess;
    struct ferry_jpeg_mem *m = mem_of(c);
    if (pool != JPOOL_IMAGE)
        ERREXIT1(c, JERR_BAD_POOL_ID, pool);
    struct jvirt_sarray_control *v = arena_get(c, sizeof *v);
    *v = (struct jvirt_sarray_control){.width = width, .nrows = nrows, .next = m->sarrays};
    m->sarrays = v;
    return v;
}

static jvirt_barray_ptr request_barray(j_common_ptr c, int pool, boolean pre_zero,
                                       JDIMENSION width, JDIMENSION nrows, JDIMENSION maxaccess)
{
    (void)pre_zero;
    (void)maxaccess;
    struct ferry_jpeg_mem *m = mem_of(c);
    if (pool != JPOOL_IMAGE)
        ERREXIT1(c, JERR_BAD_POOL_ID, pool);
    struct jvirt_barray_control *v = arena_get(c, sizeof *v);
    *v = (struct jvirt_barray_control){.width = width, .nrows = nrows, .next = m->barrays};
    m->barrays = v;
    return v;
}

/* All virtual arrays live in s->coef, one after another. Their total was
 * bounded by the pixel limits before libjpeg was started. */
static void realize(j_common_ptr c)
{
    struct ferry_jpeg_mem *m = mem_of(c);
    ferry_scratch *s = m->st->scratch;
    size_t total = 0;
    for (struct jvirt_sarray_control *v = m->sarrays; v; v = v->next)
        if (!v->rows)
            total += mul_or_fail(c, sample_row_bytes(v->width), v->nrows);
    for (struct jvirt_barray_control *v = m->barrays; v; v = v->next)
        if (!v->rows)
            total += mul_or_fail(c, mul_or_fail(c, v->width, sizeof(JBLOCK)), v->nrows);
    if (!total)
        return;
    if (ferry__scratch_grow(&s->coef, &s->coef_cap, total) != FERRY_OK)
        ferry__jpeg_fail(m->st, 1, "out of memory for the JPEG coefficient buffer");
    memset(s->coef, 0, total);
    uint8_t *at = s->coef;
    for (struct jvirt_sarray_control *v = m->sarrays; v; v = v->next)
        if (!v->rows) {
            v->rows = (JSAMPARRAY)rows_alloc(c, sample_row_bytes(v->width), v->nrows, at);
            at += sample_row_bytes(v->width) * v->nrows;
        }
    for (struct jvirt_barray_control *v = m->barrays; v; v = v->next)
        if (!v->rows) {
            v->rows = (JBLOCKARRAY)rows_alloc(c, v->width * sizeof(JBLOCK), v->nrows, at);
            at += v->width * sizeof(JBLOCK) * v->nrows;
        }
}

static JSAMPARRAY access_sarray(j_common_ptr c, jvirt_sarray_ptr v, JDIMENSION start,
                                JDIMENSION n, boolean writable)
{
    (void)writable;
    if (!v->rows || start > v->nrows || n > v->nrows - start)
        ERREXIT(c, JERR_BAD_VIRTUAL_ACCESS);
    return v->rows + start;
}

static JBLOCKARRAY access_barray(j_common_ptr c, jvirt_barray_ptr v, JDIMENSION start,
                                 JDIMENSION n, boolean writable)
{
    (void)writable;
    if (!v->rows || start > v->nrows || n > v->nrows - start)
        ERREXIT(c, JERR_BAD_VIRTUAL_ACCESS);
    return v->rows + start;
}

static void free_pool(j_common_ptr c, int pool)
{
    struct ferry_jpeg_mem *m = mem_of(c);
    if (pool == JPOOL_IMAGE) {
        /* The arena goes back when the decode ends (ferry__arena_reset). */
        m->sarrays = NULL;
        m->barrays = NULL;
    }
    ORIG_CALL(c, , free_pool, pool);
}

static void self_destruct(j_common_ptr c)
{
    struct ferry_jpeg_mem *m = mem_of(c);
    c->mem = m->orig;
    m->st->mem = NULL;
    ferry_host_free(m);
    c->mem->self_destruct(c);
}

ferry_status ferry__jpeg_mem_install(struct ferry_jpeg_state *st)
{
    struct ferry_jpeg_mem *m = ferry_host_calloc(1, sizeof *m);
    if (!m)
        return FERRY_ERR_NO_MEMORY;
    m->orig = st->cinfo.mem;
    m->st = st;
    m->pub = (struct jpeg_memory_mgr){
        .alloc_small = alloc_small, .alloc_large = alloc_large,
        .alloc_sarray = alloc_sarray, .alloc_barray = alloc_barray,
        .request_virt_sarray = request_sarray, .request_virt_barray = request_barray,
        .realize_virt_arrays = realize,
        .access_virt_sarray = access_sarray, .access_virt_barray = access_barray,
        .free_pool = free_pool, .self_destruct = self_destruct,
        .max_memory_to_use = m->orig->max_memory_to_use,
        .max_alloc_chunk = m->orig->max_alloc_chunk,
    };
    st->mem = m;
    st->cinfo.mem = &m->pub;
    return FERRY_OK;
}

void ferry__jpeg_mem_reset(struct ferry_jpeg_state *st)
{
    if (st->mem) {
        st->cinfo.mem = &st->mem->pub; /* an error inside ORIG_CALL left libjpeg's there */
        st->mem->sarrays = NULL;
        st->mem->barrays = NULL;
    }
}

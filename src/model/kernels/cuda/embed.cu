// The Embedding's CUDA kernels. Forward gathers rows. Backward must add the
// rows of positions that share an index into one table row, and do it the same
// way every run: float atomics would add them in whatever order the threads
// arrive, so instead the positions are sorted by index with a stable radix sort
// (8-bit digits, one pass per byte of the vocabulary size, no atomics), and one
// thread per (table row, column) adds its positions' gradients in increasing
// position, in f32 from the stored value, rounding once: the CPU kernel's
// order and rounding, so the two give the same bits.
#include "model/kernels/cuda/common.cuh"

FK_SOURCE_BEGIN

#define FK_EMBED_TILE 256 // positions per sort block (== FK_THREADS)

// bad[0] = min(bad[0], v) for v >= 0 (positions), with the CAS every target has.
static __device__ void embed_bad_min(int64_t *bad, int64_t v)
{
    unsigned long long *u = (unsigned long long *)bad;
    unsigned long long old = *(volatile unsigned long long *)u;
    while ((long long)old > v) {
        unsigned long long got = atomicCAS(u, old, (unsigned long long)v);
        if (got == old)
            break;
        old = got;
    }
}

// A 2-D grid: y over positions, x along the row.
template <typename T, typename I>
__global__ void k_embed_fwd(T *y, const T *w, const I *idx, int64_t n, int64_t vocab, int64_t dim, int64_t *bad)
{
    for (int64_t i = blockIdx.y; i < n; i += gridDim.y) {
        int64_t v = (int64_t)idx[i];
        bool ok = v >= 0 && v < vocab;
        if (!ok && bad && blockIdx.x == 0 && threadIdx.x == 0)
            embed_bad_min(bad, i);
        for (int64_t d = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; d < dim; d += (int64_t)gridDim.x * blockDim.x)
            y[i * dim + d] = ok ? w[v * dim + d] : fk_to_f32<T>(0.0f);
    }
}

static dim3 embed_grid(int64_t rows, int64_t dim, unsigned *threads)
{
    *threads = dim >= FK_THREADS ? FK_THREADS : (unsigned)((dim + 31) / 32 * 32);
    int64_t bx = (dim + *threads - 1) / *threads;
    return dim3((unsigned)(bx < 4096 ? bx : 4096), (unsigned)(rows < 65535 ? rows : 65535));
}

extern "C" ferry_status FK_CU(fk_cuda_embed_fwd)(const fk_ctx *c, ferry_dtype dt, void *y, const void *w,
                                                 const void *idx, const fk_embed *e)
{
    fk_guard guard;
    ferry_status st = fk_enter(c, &guard);
    if (st != FERRY_OK || e->n == 0 || e->dim == 0)
        return st;
    if (e->idt != FERRY_DTYPE_I32 && e->idt != FERRY_DTYPE_I64)
        return fk_bad_dtype(e->idt, "embedding indices");
    unsigned threads;
    dim3 grid = embed_grid(e->n, e->dim, &threads);
    FK_FLOAT_TYPES(dt, T, "embedding forward", {
        if (e->idt == FERRY_DTYPE_I32)
            FK_LAUNCH(grid, threads, fk_stream(c), k_embed_fwd<T, int32_t>)(
                (T *)y, (const T *)w, (const int32_t *)idx, e->n, e->vocab, e->dim, e->bad);
        else
            FK_LAUNCH(grid, threads, fk_stream(c), k_embed_fwd<T, int64_t>)(
                (T *)y, (const T *)w, (const int64_t *)idx, e->n, e->vocab, e->dim, e->bad);
    });
    return fk_launched("embedding forward kernel");
}

// ---- backward: a stable LSD radix sort of (index, position) ----
// Keys: the index, or vocab for one outside the table (sorted last, skipped).
template <typename I> __global__ void k_embed_keys(const I *idx, int64_t n, int64_t vocab, int64_t *key, int64_t *pos)
{
    FK_GRID_STRIDE(i, n)
    {
        int64_t v = (int64_t)idx[i];
        key[i] = v >= 0 && v < vocab ? v : vocab;
        pos[i] = i;
    }
}

// This tile's digit of each position (-1 past the end), in sh.
static __device__ void embed_tile_digits(const int64_t *key, int64_t n, int64_t tile, int shift, int *sh)
{
    int64_t j = tile * FK_EMBED_TILE + threadIdx.x;
    sh[threadIdx.x] = j < n ? (int)((key[j] >> shift) & 255) : -1;
    __syncthreads();
}

// hist[digit * tiles + tile] = how many of the tile's positions have that digit.
__global__ void k_embed_hist(const int64_t *key, int64_t n, int64_t tiles, int shift, int64_t *hist)
{
    __shared__ int sh[FK_EMBED_TILE];
    embed_tile_digits(key, n, blockIdx.x, shift, sh);
    int64_t count = 0;
    for (int s = 0; s < FK_EMBED_TILE; s++)
        count += sh[s] == (int)threadIdx.x;
    hist[(int64_t)threadIdx.x * tiles + blockIdx.x] = count;
}

// Exclusive prefix sum of hist[0, m) in place, one block: each thread a
// contiguous chunk, the chunk totals scanned by thread 0 (integers: the order
// of the adds does not matter, but it is fixed anyway).
__global__ void k_embed_scan(int64_t *hist, int64_t m)
{
    __shared__ int64_t sums[FK_THREADS];
    int64_t len = (m + FK_THREADS - 1) / FK_THREADS, a = threadIdx.x * len;
    int64_t b = a + len < m ? a + len : m, s = 0;
    for (int64_t i = a; i < b; i++)
        s += hist[i];
    sums[threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        int64_t run = 0;
        for (int t = 0; t < FK_THREADS; t++) {
            int64_t v = sums[t];
            sums[t] = run;
            run += v;
        }
    }
    __syncthreads();
    int64_t run = sums[threadIdx.x];
    for (int64_t i = a; i < b; i++) {
        int64_t v = hist[i];
        hist[i] = run;
        run += v;
    }
}

// Each position to its digit's place: the digit's start for this tile plus the
// number of earlier positions of the tile with the same digit (stable).
__global__ void k_embed_scatter(const int64_t *key, const int64_t *pos, int64_t n, int64_t tiles, int shift,
                                const int64_t *start, int64_t *key_out, int64_t *pos_out)
{
    __shared__ int sh[FK_EMBED_TILE];
    embed_tile_digits(key, n, blockIdx.x, shift, sh);
    int d = sh[threadIdx.x];
    if (d < 0)
        return;
    int64_t rank = 0;
    for (int s = 0; s < (int)threadIdx.x; s++)
        rank += sh[s] == d;
    int64_t j = (int64_t)blockIdx.x * FK_EMBED_TILE + threadIdx.x, to = start[(int64_t)d * tiles + blockIdx.x] + rank;
    key_out[to] = key[j];
    pos_out[to] = pos[j];
}

// The first slot of each run of one index adds the run's rows, in slot order
// (= position order), to the table row.
template <typename T>
__global__ void k_embed_sum(T *dw, const T *dy, const int64_t *key, const int64_t *pos, int64_t n, int64_t vocab,
                            int64_t dim)
{
    for (int64_t s = blockIdx.y; s < n; s += gridDim.y) {
        int64_t v = key[s];
        if (v >= vocab || (s > 0 && key[s - 1] == v))
            continue;
        for (int64_t d = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; d < dim; d += (int64_t)gridDim.x * blockDim.x) {
            float acc = fk_f(dw[v * dim + d]);
            for (int64_t t = s; t < n && key[t] == v; t++)
                acc += fk_f(dy[pos[t] * dim + d]);
            dw[v * dim + d] = fk_to_f32<T>(acc);
        }
    }
}

// The sort's passes: one per byte of vocab (the largest key).
static int embed_passes(int64_t vocab)
{
    int p = 1;
    while (p < 8 && (vocab >> (8 * p)) > 0)
        p++;
    return p;
}

static ferry_status embed_sort(const fk_ctx *c, const fk_embed *e, const void *idx, int64_t *buf, int64_t **key,
                               int64_t **pos)
{
    int64_t n = e->n, tiles = (n + FK_EMBED_TILE - 1) / FK_EMBED_TILE;
    int64_t *k0 = buf, *p0 = k0 + n, *k1 = p0 + n, *p1 = k1 + n, *hist = p1 + n;
    if (e->idt == FERRY_DTYPE_I32)
        FK_LAUNCH(fk_blocks(n), FK_THREADS, fk_stream(c), k_embed_keys<int32_t>)((const int32_t *)idx, n, e->vocab, k0, p0);
    else
        FK_LAUNCH(fk_blocks(n), FK_THREADS, fk_stream(c), k_embed_keys<int64_t>)((const int64_t *)idx, n, e->vocab, k0, p0);
    ferry_status st = fk_launched("embedding backward: sort keys");
    for (int pass = 0; st == FERRY_OK && pass < embed_passes(e->vocab); pass++) {
        int shift = 8 * pass;
        FK_LAUNCH_COOP((unsigned)tiles, FK_EMBED_TILE, fk_stream(c), k_embed_hist)(k0, n, tiles, shift, hist);
        FK_LAUNCH_COOP(1, FK_THREADS, fk_stream(c), k_embed_scan)(hist, 256 * tiles);
        FK_LAUNCH_COOP((unsigned)tiles, FK_EMBED_TILE, fk_stream(c), k_embed_scatter)(k0, p0, n, tiles, shift, hist,
                                                                                      k1, p1);
        st = fk_launched("embedding backward: sort pass");
        int64_t *t = k0;
        k0 = k1;
        k1 = t;
        t = p0;
        p0 = p1;
        p1 = t;
    }
    *key = k0;
    *pos = p0;
    return st;
}

extern "C" ferry_status FK_CU(fk_cuda_embed_bwd)(const fk_ctx *c, ferry_dtype dt, void *dw, const void *dy,
                                                 const void *idx, const fk_embed *e)
{
    fk_guard guard;
    ferry_status st = fk_enter(c, &guard);
    if (st != FERRY_OK || e->n == 0 || e->dim == 0)
        return st;
    if (e->idt != FERRY_DTYPE_I32 && e->idt != FERRY_DTYPE_I64)
        return fk_bad_dtype(e->idt, "embedding indices");
    if (dt != FERRY_DTYPE_F32 && dt != FERRY_DTYPE_F16 && dt != FERRY_DTYPE_BF16)
        return fk_bad_dtype(dt, "embedding backward");
    int64_t tiles = (e->n + FK_EMBED_TILE - 1) / FK_EMBED_TILE;
    if (tiles > INT32_MAX)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "embedding backward: %lld indices are too many for one call",
                          (long long)e->n);
    fk_scratch sc;
    size_t words = (size_t)(4 * e->n + 256 * tiles);
    if ((st = fk_scratch_take(c, words * sizeof(int64_t), &sc)) != FERRY_OK)
        return st;
    int64_t *key = nullptr, *pos = nullptr;
    st = embed_sort(c, e, idx, (int64_t *)sc.p, &key, &pos);
    if (st == FERRY_OK) {
        unsigned threads;
        dim3 grid = embed_grid(e->n, e->dim, &threads);
        FK_FLOAT_TYPES(dt, T, "embedding backward", {
            FK_LAUNCH(grid, threads, fk_stream(c), k_embed_sum<T>)((T *)dw, (const T *)dy, key, pos, e->n, e->vocab,
                                                                   e->dim);
        });
        st = fk_launched("embedding backward kernel");
    }
    fk_scratch_give(c, &sc); // reused only behind the kernels (stream order)
    return st;
}

FK_SOURCE_END

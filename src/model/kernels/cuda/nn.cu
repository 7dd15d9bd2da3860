// CUDA kernels for the layers, losses and optimisers. Activations may be f32,
// f16 or bf16 (arithmetic in f32); BatchNorm statistics, optimiser state and
// master weights are f32. Dropout and the optimisers use the CPU's per-element
// formulas (kernels/formulas.h), so they match the CPU bit for bit.
#include <math.h>

#include "model/kernels/cuda/common.cuh"

FK_SOURCE_BEGIN

// ---- per-channel sums over [outer, ch, inner] (bias gradient, BatchNorm) ----
// Spread over the GPU: block b takes a tile of `cols` channels (32 when inner
// is 1, so a warp reads a row's neighbouring channels: coalesced; else 1, and
// the block's threads read along inner) and chunk b % chunks of the channel's
// outer * inner elements. Each thread sums in double; the block merges its
// lanes in a fixed tree into partial b; a second kernel adds each channel's
// partials in chunk order. No atomics: the same result every run.
struct fk_chan {
    int64_t outer, ch, inner, count; // count = outer * inner
    int64_t tiles, chunks, len;      // channel tiles, chunks per channel, elements per chunk
    int cols;                        // channels per tile
};

#define FK_CHAN_BLOCKS 2048 // blocks to aim for
#define FK_CHAN_MIN 2048    // fewest elements a block takes (per channel)
#define FK_CHAN_ONE_PASS ((int64_t)1 << 18) // bias gradient: one block a channel up to here

static fk_chan chan_plan(int64_t outer, int64_t ch, int64_t inner)
{
    fk_chan g;
    g.outer = outer;
    g.ch = ch;
    g.inner = inner;
    g.count = outer * inner;
    g.cols = inner == 1 ? 32 : 1;
    g.tiles = (ch + g.cols - 1) / g.cols;
    int64_t want = (FK_CHAN_BLOCKS + g.tiles - 1) / g.tiles, most = (g.count + FK_CHAN_MIN - 1) / FK_CHAN_MIN;
    g.chunks = want < most ? want : most;
    if (g.chunks < 1)
        g.chunks = 1;
    g.len = (g.count + g.chunks - 1) / g.chunks;
    if (g.len < 1)
        g.len = 1;
    g.chunks = (g.count + g.len - 1) / g.len; // every chunk non-empty (0 when count is 0)
    if (g.chunks < 1)
        g.chunks = 1;
    return g;
}

// Channel k's elements t = t0, t0 + step, ... of its outer * inner, as offsets
// into [outer, ch, inner]: (o, i) carried from one to the next, so the hot
// loops divide once per thread, not per element (64-bit division is slow).
struct chan_walk {
    int64_t o, i, dq, dr, inner, ch, k;
    __device__ chan_walk(const fk_chan &g, int64_t k_, int64_t t0, int64_t step)
        : o(t0 / g.inner), i(t0 % g.inner), dq(step / g.inner), dr(step % g.inner), inner(g.inner), ch(g.ch), k(k_)
    {
    }
    __device__ int64_t off() const { return (o * ch + k) * inner + i; }
    __device__ void next()
    {
        o += dq;
        i += dr;
        if (i >= inner) {
            i -= inner;
            o++;
        }
    }
};

// What k_chan_partial sums per element: dy (bias gradient, BatchNorm's mean
// pass: x), (x - mean)^2 (BatchNorm's variance pass), or dy and
// dy (x - mean) invstd (BatchNorm backward), the CPU's per-element terms.
enum { FK_CHAN_SUM = 0, FK_CHAN_SQDEV = 1, FK_CHAN_BWD = 2 };

// Partial p0/p1[k * chunks + chunk] of channel k; with db (the bias gradient
// in one pass, chunks == 1) db[k] += the channel's sum instead of p0.
template <typename T>
__global__ void k_chan_partial(int mode, fk_chan g, const T *x, const T *dy, const double *mean, const float *smean,
                               const float *sinvstd, double *p0, double *p1, T *db)
{
    __shared__ double sh0[FK_THREADS];
    __shared__ double sh1[FK_THREADS];
    int c = (int)threadIdx.x % g.cols, lane = (int)threadIdx.x / g.cols, lanes = FK_THREADS / g.cols;
    for (int64_t b = blockIdx.x; b < g.tiles * g.chunks; b += gridDim.x) {
        int64_t k = (b / g.chunks) * g.cols + c, chunk = b % g.chunks;
        int64_t j0 = chunk * g.len, j1 = j0 + g.len < g.count ? j0 + g.len : g.count;
        double s0 = 0.0, s1 = 0.0;
        if (k < g.ch) {
            chan_walk w(g, k, j0 + lane, lanes);
            if (mode == FK_CHAN_SUM) {
                for (int64_t t = j0 + lane; t < j1; t += lanes, w.next())
                    s0 += fk_f(x[w.off()]);
            } else if (mode == FK_CHAN_SQDEV) {
                double m = mean[k];
                for (int64_t t = j0 + lane; t < j1; t += lanes, w.next()) {
                    double d = fk_f(x[w.off()]) - m;
                    s0 += d * d;
                }
            } else {
                float m = smean[k], is = sinvstd[k];
                for (int64_t t = j0 + lane; t < j1; t += lanes, w.next()) {
                    int64_t off = w.off();
                    float gv = fk_f(dy[off]);
                    s0 += gv;
                    s1 += gv * (fk_f(x[off]) - m) * is;
                }
            }
        }
        sh0[threadIdx.x] = s0;
        sh1[threadIdx.x] = s1;
        __syncthreads();
        for (int half = lanes / 2; half > 0; half /= 2) { // a fixed tree over the lanes
            if (lane < half) {
                sh0[threadIdx.x] += sh0[threadIdx.x + half * g.cols];
                sh1[threadIdx.x] += sh1[threadIdx.x + half * g.cols];
            }
            __syncthreads();
        }
        if (lane == 0 && k < g.ch && db) {
            db[k] = fk_to_f32<T>(fk_f(db[k]) + (float)sh0[threadIdx.x]);
        } else if (lane == 0 && k < g.ch) {
            p0[k * g.chunks + chunk] = sh0[threadIdx.x];
            if (p1)
                p1[k * g.chunks + chunk] = sh1[threadIdx.x];
        }
        __syncthreads();
    }
}

__device__ __forceinline__ double chan_total(const fk_chan &g, const double *p, int64_t k)
{
    double s = 0.0;
    for (int64_t i = 0; i < g.chunks; i++)
        s += p[k * g.chunks + i];
    return s;
}

static ferry_status chan_partials(const fk_ctx *c, ferry_dtype dt, int mode, const fk_chan &g, const void *x,
                                  const void *dy, const double *mean, const float *smean, const float *sinvstd,
                                  double *p0, double *p1, const char *what, void *db = nullptr)
{
    int64_t blocks = g.tiles * g.chunks;
    FK_FLOAT_TYPES(dt, T, what, {
        FK_LAUNCH_COOP((unsigned)(blocks < 65535 ? blocks : 65535), FK_THREADS, fk_stream(c), k_chan_partial<T>)(
            mode, g, (const T *)x, (const T *)dy, mean, smean, sinvstd, p0, p1, (T *)db);
    });
    return fk_launched(what);
}

// Scratch kept between calls (kernels/scratch.c), given back by the caller
// once its last kernel is queued.
static ferry_status chan_scratch(const fk_ctx *c, size_t bytes, fk_scratch *sc)
{
    return fk_scratch_take(c, bytes, sc);
}

// relu: FK_RELU applied to the value as stored in T, so the fused pass gives
// the bits of a bias add followed by a ReLU. A 2-D grid, y over rows and x
// along a row, so no element divides: rows of [outer * ch, inner] take b[row %
// ch] (once per row), or, when inner is 1, rows of [outer, ch] take b[column].
template <typename T>
__global__ void k_bias_add(T *y, const T *b, int64_t rows, int64_t len, int64_t ch, bool per_col, bool relu)
{
    for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
        T *row = y + r * len;
        float brow = per_col ? 0.0f : fk_f(b[r % ch]);
        for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < len; i += (int64_t)gridDim.x * blockDim.x) {
            T v = fk_to_f32<T>(fk_f(row[i]) + (per_col ? fk_f(b[i]) : brow));
            row[i] = relu && !(fk_f(v) > 0.0f) ? fk_to_f32<T>(0.0f) : v;
        }
    }
}

extern "C" ferry_status FK_CU(fk_cuda_bias_add)(const fk_ctx *c, ferry_dtype dt, void *y, const void *b, int64_t outer,
                                         int64_t ch, int64_t inner, bool relu)
{
    fk_guard guard;
    ferry_status st = fk_enter(c, &guard);
    int64_t total = outer * ch * inner;
    if (st != FERRY_OK || total == 0)
        return st;
    bool per_col = inner == 1;
    int64_t rows = per_col ? outer : outer * ch, len = per_col ? ch : inner;
    int64_t bx = (len + FK_THREADS - 1) / FK_THREADS;
    dim3 grid((unsigned)(bx < 4096 ? bx : 4096), (unsigned)(rows < 65535 ? rows : 65535));
    FK_FLOAT_TYPES(dt, T, "bias add", {
        FK_LAUNCH(grid, FK_THREADS, fk_stream(c), k_bias_add<T>)((T *)y, (const T *)b, rows, len, ch, per_col, relu);
    });
    return fk_launched("bias add kernel");
}

template <typename T> __global__ void k_bias_grad_add(fk_chan g, T *db, const double *p)
{
    FK_GRID_STRIDE(k, g.ch) db[k] = fk_to_f32<T>(fk_f(db[k]) + (float)chan_total(g, p, k));
}

extern "C" ferry_status FK_CU(fk_cuda_bias_grad)(const fk_ctx *c, ferry_dtype dt, void *db, const void *dy, int64_t outer,
                                          int64_t ch, int64_t inner)
{
    fk_guard guard;
    ferry_status st = fk_enter(c, &guard);
    if (st != FERRY_OK || ch == 0)
        return st;
    if (dt != FERRY_DTYPE_F32 && dt != FERRY_DTYPE_F16 && dt != FERRY_DTYPE_BF16)
        return fk_bad_dtype(dt, "bias gradient");
    fk_chan g = chan_plan(outer, ch, inner);
    // Up to FK_CHAN_ONE_PASS elements a channel, one block sums a channel and
    // adds it to db: one launch and no scratch, where the split sum costs a
    // second launch and an allocation (a training step's bias gradients: the
    // samples' CNN at batch 256 has at most 256 x 784 per channel).
    if (g.count <= FK_CHAN_ONE_PASS) {
        g.chunks = 1;
        g.len = g.count;
        return chan_partials(c, dt, FK_CHAN_SUM, g, dy, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                             "bias gradient kernel", db);
    }
    fk_scratch scratch;
    if ((st = chan_scratch(c, (size_t)(ch * g.chunks) * sizeof(double), &scratch)) != FERRY_OK)
        return st;
    double *p = (double *)scratch.p;
    st = chan_partials(c, dt, FK_CHAN_SUM, g, dy, nullptr, nullptr, nullptr, nullptr, p, nullptr,
                       "bias gradient kernel");
    if (st == FERRY_OK) {
        FK_FLOAT_TYPES(dt, T, "bias gradient", {
            FK_LAUNCH(fk_blocks(ch), FK_THREADS, fk_stream(c), k_bias_grad_add<T>)(g, (T *)db, p);
        });
        st = fk_launched("bias gradient kernel");
    }
    fk_scratch_give(c, &scratch); // reused only behind the kernels (stream order)
    return st;
}

template <typename T> __global__ void k_relu_bwd(T *dx, const T *y, const T *dy, int64_t n)
{
    FK_GRID_STRIDE(i, n) dx[i] = fk_f(y[i]) > 0.0f ? dy[i] : fk_to_f32<T>(0.0f);
}

extern "C" ferry_status FK_CU(fk_cuda_relu_bwd)(const fk_ctx *c, ferry_dtype dt, void *dx, const void *y, const void *dy,
                                         int64_t n)
{
    fk_guard guard;
    ferry_status st = fk_enter(c, &guard);
    if (st != FERRY_OK || n == 0)
        return st;
    FK_FLOAT_TYPES(dt, T, "relu backward", {
        FK_LAUNCH(fk_blocks(n), FK_THREADS, fk_stream(c), k_relu_bwd<T>)((T *)dx, (const T *)y, (const T *)dy, n);
    });
    return fk_launched("relu backward kernel");
}

// The losses are summed without float atomics, so that an epoch's loss is the
// same run to run: each block adds its rows' losses in double (as the CPU
// kernels do) into its own partial, then one block combines the partials in a
// fixed order and adds the total to *loss, rounded to f32 once, as the CPU does.
__global__ void k_loss_combine(const double *part, int64_t n, float *loss, double scale)
{
    __shared__ double sh[32];
    double s = 0.0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
        s += part[i];
    s = fk_block_sum_d(s, sh);
    if (threadIdx.x == 0)
        loss[0] += (float)(s * scale);
}

// Scratch for `blocks` partials when a loss is asked for (none otherwise),
// given back once the combine is queued.
static ferry_status loss_partials(const fk_ctx *c, ferry_dtype dt, const char *what, float *loss, unsigned blocks,
                                  fk_scratch *sc)
{
    *sc = fk_scratch{};
    if (dt != FERRY_DTYPE_F32 && dt != FERRY_DTYPE_F16 && dt != FERRY_DTYPE_BF16)
        return fk_bad_dtype(dt, what); // before the scratch, which the launch's refusal would leak
    if (!loss)
        return FERRY_OK;
    return fk_scratch_take(c, (size_t)blocks * sizeof(double), sc);
}

static ferry_status loss_combine(const fk_ctx *c, fk_scratch *sc, unsigned blocks, float *loss, double scale,
                                 const char *what)
{
    ferry_status st = fk_launched(what);
    double *part = (double *)sc->p;
    if (part) {
        if (st == FERRY_OK) {
            FK_LAUNCH_COOP(1, FK_THREADS, fk_stream(c), k_loss_combine)(part, (int64_t)blocks, loss, scale);
            st = fk_launched("loss combine kernel");
        }
        fk_scratch_give(c, sc); // reused only behind the combine (stream order)
    }
    return st;
}

// One block per row: max and argmax, log-sum-exp, loss, gradient.
template <typename T, typename L>
__global__ void k_cross_entropy(const T *x, const L *labels, int64_t rows, int64_t classes, double *part,
                                int64_t *correct, int64_t *bad, T *dx, float gscale, const float *gnum)
{
    __shared__ float shv[32];
    __shared__ int64_t shi[32];
    if (gnum)
        gscale = gnum[0] / (float)rows; // a loss scale kept on the device (rows > 0 here)
    double total = 0.0; // thread 0's: this block's rows, in row order
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const T *row = x + r * classes;
        float mx = -INFINITY;
        int64_t arg = INT64_MAX;
        for (int64_t k = threadIdx.x; k < classes; k += blockDim.x)
            fk_argmax_merge(mx, arg, fk_f(row[k]), k);
        fk_block_argmax(mx, arg, shv, shi);
        float s = 0.0f;
        for (int64_t k = threadIdx.x; k < classes; k += blockDim.x)
            s += expf(fk_f(row[k]) - mx);
        s = fk_block_sum(s, shv);
        int64_t label = (int64_t)labels[r];
        bool ok = label >= 0 && label < classes;
        if (threadIdx.x == 0) {
            if (!ok) {
                if (bad)
                    atomicAdd((unsigned long long *)bad, 1ull);
            } else {
                total += (double)(logf(s) - (fk_f(row[label]) - mx)); // no mx + log(s): see softmax
                if (correct && arg == label)
                    atomicAdd((unsigned long long *)correct, 1ull);
            }
        }
        if (dx) {
            float inv = 1.0f / s;
            for (int64_t k = threadIdx.x; k < classes; k += blockDim.x) {
                float g = ok ? (expf(fk_f(row[k]) - mx) * inv - (k == label ? 1.0f : 0.0f)) * gscale : 0.0f;
                dx[r * classes + k] = fk_to_f32<T>(g);
            }
        }
        __syncthreads();
    }
    if (part && threadIdx.x == 0)
        part[blockIdx.x] = total;
}

extern "C" ferry_status FK_CU(fk_cuda_cross_entropy)(const fk_ctx *c, ferry_dtype dt, const void *logits, ferry_dtype ldt,
                                              const void *labels, void *dlogits, const fk_xent *r)
{
    int64_t rows = r->rows, classes = r->classes, *correct = r->correct, *bad = r->bad;
    float *loss = r->loss, gscale = r->gscale;
    const float *gnum = r->gnum;
    fk_guard guard;
    ferry_status st = fk_enter(c, &guard);
    if (st != FERRY_OK || rows == 0)
        return st;
    unsigned blocks = (unsigned)(rows < 65535 ? rows : 65535);
    fk_scratch sc;
    if ((st = loss_partials(c, dt, "cross-entropy", loss, blocks, &sc)) != FERRY_OK)
        return st;
    double *part = (double *)sc.p;
    FK_FLOAT_TYPES(dt, T, "cross-entropy", {
        if (ldt == FERRY_DTYPE_I32)
            FK_LAUNCH_COOP(blocks, FK_THREADS, fk_stream(c), k_cross_entropy<T, int32_t>)(
                (const T *)logits, (const int32_t *)labels, rows, classes, part, correct, bad, (T *)dlogits, gscale, gnum);
        else
            FK_LAUNCH_COOP(blocks, FK_THREADS, fk_stream(c), k_cross_entropy<T, int64_t>)(
                (const T *)logits, (const int64_t *)labels, rows, classes, part, correct, bad, (T *)dlogits, gscale, gnum);
    });
    return loss_combine(c, &sc, blocks, loss, 1.0, "cross-entropy kernel");
}

template <typename T>
__global__ void k_mse(const T *p, const T *t, int64_t n, double *part, T *dp, float gscale)
{
    __shared__ double sh[32];
    double s = 0.0;
    FK_GRID_STRIDE(i, n)
    {
        float e = fk_f(p[i]) - fk_f(t[i]);
        s += (double)e * e;
        if (dp)
            dp[i] = fk_to_f32<T>(2.0f * e * gscale);
    }
    if (part) {
        s = fk_block_sum_d(s, sh);
        if (threadIdx.x == 0)
            part[blockIdx.x] = s;
    }
}

extern "C" ferry_status FK_CU(fk_cuda_mse)(const fk_ctx *c, ferry_dtype dt, const void *p, const void *t, int64_t n,
                                    float *loss, float lscale, void *dp, float gscale)
{
    fk_guard guard;
    ferry_status st = fk_enter(c, &guard);
    if (st != FERRY_OK || n == 0)
        return st;
    unsigned blocks = fk_blocks(n) < 1024 ? fk_blocks(n) : 1024;
    fk_scratch sc;
    if ((st = loss_partials(c, dt, "MSE loss", loss, blocks, &sc)) != FERRY_OK)
        return st;
    double *part = (double *)sc.p;
    FK_FLOAT_TYPES(dt, T, "MSE loss", {
        FK_LAUNCH_COOP(blocks, FK_THREADS, fk_stream(c), k_mse<T>)((const T *)p, (const T *)t, n, part, (T *)dp, gscale);
    });
    return loss_combine(c, &sc, blocks, loss, (double)lscale, "MSE kernel");
}

// g.n images [n, C, H, W] -> col [C*kh*kw, n*oh*ow], image i's columns at i*oh*ow.
// A thread per (image, channel, output pixel) writes that pixel's kh*kw column
// entries: the index arithmetic (64-bit divisions, slow on a GPU and on the
// simulated one) is paid once per window, and neighbouring threads still write
// neighbouring addresses of each row.
template <typename T> __global__ void k_im2col(fk_conv g, const T *x, T *col)
{
    int64_t ohw = g.oh * g.ow, cols = g.n * ohw, total = g.n * g.c * ohw;
    FK_GRID_STRIDE(t, total)
    {
        int64_t ox = t % g.ow, oy = (t / g.ow) % g.oh, ch = (t / ohw) % g.c, img = t / (ohw * g.c);
        const T *plane = x + (img * g.c + ch) * g.h * g.w;
        T *dst = col + ch * g.kh * g.kw * cols + img * ohw + oy * g.ow + ox;
        int64_t y0 = oy * g.sh - g.ph, x0 = ox * g.sw - g.pw;
        for (int64_t ki = 0; ki < g.kh; ki++) {
            int64_t iy = y0 + ki;
            for (int64_t kj = 0; kj < g.kw; kj++) {
                int64_t ix = x0 + kj;
                *dst = iy >= 0 && iy < g.h && ix >= 0 && ix < g.w ? plane[iy * g.w + ix] : fk_to_f32<T>(0.0f);
                dst += cols;
            }
        }
    }
}

// Gathers, per input pixel, every column entry that came from it: no atomics.
// The windows that cover pixel (iy, ix) are the output rows oy in [oy0, oy1)
// and columns ox in [ox0, ox1), found without a division per window.
// A 2-D grid: y over the n * c planes (image and channel once per plane), x
// over a plane's pixels, whose row and column take a 32-bit division (the
// launcher checks that a plane fits) instead of four 64-bit ones per element.
template <typename T> __global__ void k_col2im(fk_conv g, const T *col, T *x)
{
    int64_t planes = g.n * g.c, hw = g.h * g.w, ohw = g.oh * g.ow, cols = g.n * ohw;
    int32_t w32 = (int32_t)g.w;
    for (int64_t pl = blockIdx.y; pl < planes; pl += gridDim.y) {
        int64_t ch = pl % g.c, img = pl / g.c; // once per plane
        const T *base = col + ch * g.kh * g.kw * cols + img * ohw;
        for (int64_t q = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; q < hw; q += (int64_t)gridDim.x * blockDim.x) {
            int64_t t = pl * hw + q;
            int32_t q32 = (int32_t)q, iy32 = q32 / w32;
            int64_t iy = iy32, ix = q32 - iy32 * w32;
            int64_t py = iy + g.ph, px = ix + g.pw;
            int64_t oy0 = py < g.kh ? 0 : (py - g.kh) / g.sh + 1, oy1 = py / g.sh + 1;
            int64_t ox0 = px < g.kw ? 0 : (px - g.kw) / g.sw + 1, ox1 = px / g.sw + 1;
            if (oy1 > g.oh)
                oy1 = g.oh;
            if (ox1 > g.ow)
                ox1 = g.ow;
            float s = 0.0f;
            for (int64_t oy = oy0; oy < oy1; oy++) {
                int64_t ki = py - oy * g.sh;
                for (int64_t ox = ox0; ox < ox1; ox++) {
                    int64_t kj = px - ox * g.sw;
                    s += fk_f(base[(ki * g.kw + kj) * cols + oy * g.ow + ox]);
                }
            }
            x[t] = fk_to_f32<T>(s); // stores: no fill of dx before it
        }
    }
}

extern "C" ferry_status FK_CU(fk_cuda_im2col)(const fk_ctx *c, ferry_dtype dt, const fk_conv *g, const void *x, void *col)
{
    fk_guard guard;
    ferry_status st = fk_enter(c, &guard);
    int64_t total = g->n * g->c * g->oh * g->ow * (g->kh * g->kw > 0);
    if (st != FERRY_OK || total == 0)
        return st;
    FK_FLOAT_TYPES(dt, T, "im2col", {
        FK_LAUNCH(fk_blocks(total), FK_THREADS, fk_stream(c), k_im2col<T>)(*g, (const T *)x, (T *)col);
    });
    return fk_launched("im2col kernel");
}

extern "C" ferry_status FK_CU(fk_cuda_col2im)(const fk_ctx *c, ferry_dtype dt, const fk_conv *g, const void *col, void *x)
{
    fk_guard guard;
    ferry_status st = fk_enter(c, &guard);
    int64_t planes = g->n * g->c, hw = g->h * g->w;
    if (st != FERRY_OK || planes * hw == 0)
        return st;
    if (hw > INT32_MAX)
        return ferry_fail(FERRY_ERR_LIMIT, "col2im: an image plane of %lld pixels exceeds 2^31", (long long)hw);
    int64_t bx = (hw + FK_THREADS - 1) / FK_THREADS;
    dim3 grid((unsigned)(bx < 4096 ? bx : 4096), (unsigned)(planes < 65535 ? planes : 65535));
    FK_FLOAT_TYPES(dt, T, "col2im", {
        FK_LAUNCH(grid, FK_THREADS, fk_stream(c), k_col2im<T>)(*g, (const T *)col, (T *)x);
    });
    return fk_launched("col2im kernel");
}

// As k_pool_bwd: a 2-D grid, y over the n * c planes, x over a plane's output
// pixels, whose row and column take one 32-bit division (pool_grid checks a
// plane fits), so no element pays a 64-bit division.
template <typename T> __global__ void k_pool_fwd(bool max, fk_conv g, const T *x, T *y, int32_t *idx)
{
    int64_t planes = g.n * g.c, ohw = g.oh * g.ow;
    int32_t ow32 = (int32_t)g.ow;
    float inv = 1.0f / (float)(g.kh * g.kw);
    for (int64_t p = blockIdx.y; p < planes; p += gridDim.y) {
        const T *plane = x + p * g.h * g.w;
        for (int64_t q = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; q < ohw; q += (int64_t)gridDim.x * blockDim.x) {
            int32_t q32 = (int32_t)q, oy32 = q32 / ow32;
            int64_t oy = oy32, ox = q32 - oy32 * ow32, t = p * ohw + q;
            float best = -INFINITY, s = 0.0f;
            int32_t bi = -1;
            for (int64_t ki = 0; ki < g.kh; ki++) {
                int64_t iy = oy * g.sh - g.ph + ki;
                if (iy < 0 || iy >= g.h)
                    continue;
                for (int64_t kj = 0; kj < g.kw; kj++) {
                    int64_t ix = ox * g.sw - g.pw + kj;
                    if (ix < 0 || ix >= g.w)
                        continue;
                    float v = fk_f(plane[iy * g.w + ix]);
                    s += v;
                    if (bi < 0 || v > best || v != v) {
                        best = v;
                        bi = (int32_t)(iy * g.w + ix);
                    }
                }
            }
            y[t] = fk_to_f32<T>(max ? best : s * inv);
            if (max)
                idx[t] = bi;
        }
    }
}

// Per input pixel: the windows that cover it (no atomics, no zeroing pass).
// As k_col2im: a 2-D grid, y over the n * c planes, x over a plane's pixels
// (row and column by one 32-bit division); the covering windows' output rows
// [oy0, oy1) and columns [ox0, ox1) are found once per pixel, so the window
// loop divides nothing.
template <typename T> __global__ void k_pool_bwd(bool max, fk_conv g, const T *dy, const int32_t *idx, T *dx)
{
    int64_t planes = g.n * g.c, hw = g.h * g.w;
    int32_t w32 = (int32_t)g.w;
    float inv = 1.0f / (float)(g.kh * g.kw);
    for (int64_t pl = blockIdx.y; pl < planes; pl += gridDim.y) {
        const T *dyp = dy + pl * g.oh * g.ow;
        const int32_t *idxp = max ? idx + pl * g.oh * g.ow : nullptr;
        for (int64_t q = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; q < hw; q += (int64_t)gridDim.x * blockDim.x) {
            int32_t q32 = (int32_t)q, iy32 = q32 / w32;
            int64_t iy = iy32, ix = q32 - iy32 * w32;
            int64_t py = iy + g.ph, px = ix + g.pw;
            int64_t oy0 = py < g.kh ? 0 : (py - g.kh) / g.sh + 1, oy1 = py / g.sh + 1;
            int64_t ox0 = px < g.kw ? 0 : (px - g.kw) / g.sw + 1, ox1 = px / g.sw + 1;
            if (oy1 > g.oh)
                oy1 = g.oh;
            if (ox1 > g.ow)
                ox1 = g.ow;
            // Windows in the CPU's order (output rows, then columns, ascending), so
            // the sum rounds as the CPU's scatter does, bit for bit.
            float s = 0.0f;
            for (int64_t oy = oy0; oy < oy1; oy++)
                for (int64_t o = oy * g.ow + ox0; o < oy * g.ow + ox1; o++) {
                    if (!max)
                        s += fk_f(dyp[o]) * inv;
                    else if (idxp[o] == q32)
                        s += fk_f(dyp[o]);
                }
            dx[pl * hw + q] = fk_to_f32<T>(s);
        }
    }
}

// The 2-D grid of k_pool_fwd (output planes: out) and k_pool_bwd (input
// planes), or an error for a plane past 32-bit indexing.
static ferry_status pool_grid(const fk_conv *g, bool out, const char *what, dim3 *grid)
{
    int64_t planes = g->n * g->c, hw = out ? g->oh * g->ow : g->h * g->w;
    if (hw > INT32_MAX)
        return ferry_fail(FERRY_ERR_LIMIT, "%s: an image plane of %lld pixels exceeds 2^31", what, (long long)hw);
    int64_t bx = (hw + FK_THREADS - 1) / FK_THREADS;
    *grid = dim3((unsigned)(bx < 4096 ? bx : 4096), (unsigned)(planes < 65535 ? planes : 65535));
    return FERRY_OK;
}

extern "C" ferry_status FK_CU(fk_cuda_maxpool_fwd)(const fk_ctx *c, ferry_dtype dt, const fk_conv *g, const void *x, void *y,
                                            int32_t *idx)
{
    fk_guard guard;
    ferry_status st = fk_enter(c, &guard);
    int64_t total = g->n * g->c * g->oh * g->ow;
    if (st != FERRY_OK || total == 0)
        return st;
    dim3 grid;
    if ((st = pool_grid(g, true, "max pool", &grid)) != FERRY_OK)
        return st;
    FK_FLOAT_TYPES(dt, T, "max pool", {
        FK_LAUNCH(grid, FK_THREADS, fk_stream(c), k_pool_fwd<T>)(true, *g, (const T *)x, (T *)y, idx);
    });
    return fk_launched("max pool kernel");
}

extern "C" ferry_status FK_CU(fk_cuda_maxpool_bwd)(const fk_ctx *c, ferry_dtype dt, const fk_conv *g, const void *dy,
                                            const int32_t *idx, void *dx)
{
    fk_guard guard;
    ferry_status st = fk_enter(c, &guard);
    int64_t total = g->n * g->c * g->h * g->w;
    if (st != FERRY_OK || total == 0)
        return st;
    dim3 grid;
    if ((st = pool_grid(g, false, "max pool backward", &grid)) != FERRY_OK)
        return st;
    FK_FLOAT_TYPES(dt, T, "max pool backward", {
        FK_LAUNCH(grid, FK_THREADS, fk_stream(c), k_pool_bwd<T>)(true, *g, (const T *)dy, idx, (T *)dx);
    });
    return fk_launched("max pool backward kernel");
}

extern "C" ferry_status FK_CU(fk_cuda_avgpool_fwd)(const fk_ctx *c, ferry_dtype dt, const fk_conv *g, const void *x, void *y)
{
    fk_guard guard;
    ferry_status st = fk_enter(c, &guard);
    int64_t total = g->n * g->c * g->oh * g->ow;
    if (st != FERRY_OK || total == 0)
        return st;
    dim3 grid;
    if ((st = pool_grid(g, true, "average pool", &grid)) != FERRY_OK)
        return st;
    FK_FLOAT_TYPES(dt, T, "average pool", {
        FK_LAUNCH(grid, FK_THREADS, fk_stream(c), k_pool_fwd<T>)(false, *g, (const T *)x, (T *)y, nullptr);
    });
    return fk_launched("average pool kernel");
}

extern "C" ferry_status FK_CU(fk_cuda_avgpool_bwd)(const fk_ctx *c, ferry_dtype dt, const fk_conv *g, const void *dy, void *dx)
{
    fk_guard guard;
    ferry_status st = fk_enter(c, &guard);
    int64_t total = g->n * g->c * g->h * g->w;
    if (st != FERRY_OK || total == 0)
        return st;
    dim3 grid;
    if ((st = pool_grid(g, false, "average pool backward", &grid)) != FERRY_OK)
        return st;
    FK_FLOAT_TYPES(dt, T, "average pool backward", {
        FK_LAUNCH(grid, FK_THREADS, fk_stream(c), k_pool_bwd<T>)(false, *g, (const T *)dy, nullptr, (T *)dx);
    });
    return fk_launched("average pool backward kernel");
}

// BatchNorm sums in double, as the CPU kernels (fk_f32_bn_fwd / _bwd), spread
// over the GPU by k_chan_partial: the mean pass, the variance pass (around the
// mean, as the CPU's two passes), then every element.
__global__ void k_bn_mean(fk_chan g, const double *p, double *mean)
{
    FK_GRID_STRIDE(k, g.ch) mean[k] = chan_total(g, p, k) / (double)g.count;
}

__global__ void k_bn_stats(fk_chan g, const double *q, const double *meand, float *rmean, float *rvar, float *smean,
                           float *sinvstd, float momentum, float eps)
{
    FK_GRID_STRIDE(k, g.ch)
    {
        double m = meand[k], qs = chan_total(g, q, k);
        double var = qs / (double)g.count;
        smean[k] = (float)m;
        sinvstd[k] = (float)(1.0 / sqrt(var + eps));
        double unbiased = g.count > 1 ? qs / (double)(g.count - 1) : var;
        rmean[k] = (1 - momentum) * rmean[k] + momentum * (float)m;
        rvar[k] = (1 - momentum) * rvar[k] + momentum * (float)unbiased;
    }
}

// BatchNorm's elementwise passes as k_bias_add: a 2-D grid, y over rows and x
// along a row, so no element divides: rows of [outer * ch, inner] are channel
// row % ch (once per row), or, when inner is 1, rows of [outer, ch] hold
// channel i at column i.
struct bn_rows {
    int64_t rows, len, ch;
    bool per_col;
};

static bn_rows bn_rows_plan(const fk_chan &g, dim3 *grid)
{
    bn_rows r;
    r.per_col = g.inner == 1;
    r.rows = r.per_col ? g.outer : g.outer * g.ch;
    r.len = r.per_col ? g.ch : g.inner;
    r.ch = g.ch;
    int64_t bx = (r.len + FK_THREADS - 1) / FK_THREADS;
    *grid = dim3((unsigned)(bx < 4096 ? bx : 4096), (unsigned)(r.rows < 65535 ? r.rows : 65535));
    return r;
}

// Training: the batch's mean and invstd (smean, sinvstd); else the running ones.
template <typename T>
__global__ void k_bn_apply(bn_rows rw, const T *x, T *y, const float *gamma, const float *beta, const float *mean,
                           const float *invstd, const float *rvar, float eps)
{
    for (int64_t r = blockIdx.y; r < rw.rows; r += gridDim.y) {
        int64_t kr = rw.per_col ? 0 : r % rw.ch; // the row's channel
        for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < rw.len; i += (int64_t)gridDim.x * blockDim.x) {
            int64_t k = rw.per_col ? i : kr, e = r * rw.len + i;
            float is = rvar ? 1.0f / sqrtf(rvar[k] + eps) : invstd[k];
            float a = gamma[k] * is, b = beta[k] - mean[k] * a;
            y[e] = fk_to_f32<T>(fk_f(x[e]) * a + b);
        }
    }
}

extern "C" ferry_status FK_CU(fk_cuda_bn_fwd)(const fk_ctx *c, ferry_dtype dt, const void *x, void *y, const fk_bn *b)
{
    int64_t n = b->n, ch = b->ch, hw = b->hw;
    const float *gamma = b->gamma, *beta = b->beta;
    float *rmean = b->rmean, *rvar = b->rvar, *smean = b->smean, *sinvstd = b->sinvstd;
    bool training = b->training;
    float momentum = b->momentum, eps = b->eps;
    fk_guard guard;
    ferry_status st = fk_enter(c, &guard);
    if (st != FERRY_OK || ch == 0)
        return st;
    if (dt != FERRY_DTYPE_F32 && dt != FERRY_DTYPE_F16 && dt != FERRY_DTYPE_BF16)
        return fk_bad_dtype(dt, "batch norm");
    fk_chan g = chan_plan(n, ch, hw);
    int64_t total = n * ch * hw;
    fk_scratch scratch = {};
    if (training) {
        if ((st = chan_scratch(c, (size_t)(ch * (2 * g.chunks + 1)) * sizeof(double), &scratch)) != FERRY_OK)
            return st;
        double *p = (double *)scratch.p, *q = p + ch * g.chunks, *meand = q + ch * g.chunks;
        st = chan_partials(c, dt, FK_CHAN_SUM, g, x, nullptr, nullptr, nullptr, nullptr, p, nullptr,
                           "batch norm kernel");
        if (st == FERRY_OK) {
            FK_LAUNCH(fk_blocks(ch), FK_THREADS, fk_stream(c), k_bn_mean)(g, p, meand);
            st = fk_launched("batch norm kernel");
        }
        if (st == FERRY_OK)
            st = chan_partials(c, dt, FK_CHAN_SQDEV, g, x, nullptr, meand, nullptr, nullptr, q, nullptr,
                               "batch norm kernel");
        if (st == FERRY_OK) {
            FK_LAUNCH(fk_blocks(ch), FK_THREADS, fk_stream(c), k_bn_stats)(g, q, meand, rmean, rvar, smean, sinvstd,
                                                                         momentum, eps);
            st = fk_launched("batch norm kernel");
        }
    }
    if (st == FERRY_OK && total > 0) {
        dim3 grid;
        bn_rows rw = bn_rows_plan(g, &grid);
        FK_FLOAT_TYPES(dt, T, "batch norm", {
            FK_LAUNCH(grid, FK_THREADS, fk_stream(c), k_bn_apply<T>)(
                rw, (const T *)x, (T *)y, gamma, beta, training ? smean : rmean, sinvstd, training ? nullptr : rvar,
                eps);
        });
        st = fk_launched("batch norm kernel");
    }
    fk_scratch_give(c, &scratch); // reused only behind the kernels (stream order)
    return st;
}

// dgamma and dbeta, and the means dx needs (f32, as the CPU rounds them).
__global__ void k_bn_grads(fk_chan g, const double *pd, const double *pdx, float *dgamma, float *dbeta, float *mdy,
                           float *mdyx)
{
    FK_GRID_STRIDE(k, g.ch)
    {
        double sd = chan_total(g, pd, k), sdx = chan_total(g, pdx, k);
        dgamma[k] += (float)sdx;
        dbeta[k] += (float)sd;
        mdy[k] = (float)(sd / (double)g.count);
        mdyx[k] = (float)(sdx / (double)g.count);
    }
}

template <typename T>
__global__ void k_bn_dx(bn_rows rw, const T *x, const T *dy, T *dx, const float *gamma, const float *smean,
                        const float *sinvstd, const float *mdy, const float *mdyx)
{
    for (int64_t r = blockIdx.y; r < rw.rows; r += gridDim.y) {
        int64_t kr = rw.per_col ? 0 : r % rw.ch; // the row's channel
        for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < rw.len; i += (int64_t)gridDim.x * blockDim.x) {
            int64_t k = rw.per_col ? i : kr, e = r * rw.len + i;
            float m = smean[k], is = sinvstd[k], a = gamma[k] * is;
            dx[e] = fk_to_f32<T>(a * (fk_f(dy[e]) - mdy[k] - (fk_f(x[e]) - m) * is * mdyx[k]));
        }
    }
}

extern "C" ferry_status FK_CU(fk_cuda_bn_bwd)(const fk_ctx *c, ferry_dtype dt, const void *x, const void *dy, void *dx,
                                       const fk_bn *b, float *dgamma, float *dbeta)
{
    int64_t n = b->n, ch = b->ch, hw = b->hw;
    const float *gamma = b->gamma, *smean = b->smean, *sinvstd = b->sinvstd;
    fk_guard guard;
    ferry_status st = fk_enter(c, &guard);
    if (st != FERRY_OK || ch == 0)
        return st;
    if (dt != FERRY_DTYPE_F32 && dt != FERRY_DTYPE_F16 && dt != FERRY_DTYPE_BF16)
        return fk_bad_dtype(dt, "batch norm backward");
    fk_chan g = chan_plan(n, ch, hw);
    int64_t total = n * ch * hw;
    fk_scratch scratch;
    size_t bytes = (size_t)(ch * 2 * g.chunks) * sizeof(double) + (size_t)(2 * ch) * sizeof(float);
    if ((st = chan_scratch(c, bytes, &scratch)) != FERRY_OK)
        return st;
    double *pd = (double *)scratch.p, *pdx = pd + ch * g.chunks;
    float *mdy = (float *)(pdx + ch * g.chunks), *mdyx = mdy + ch;
    st = chan_partials(c, dt, FK_CHAN_BWD, g, x, dy, nullptr, smean, sinvstd, pd, pdx, "batch norm backward kernel");
    if (st == FERRY_OK) {
        FK_LAUNCH(fk_blocks(ch), FK_THREADS, fk_stream(c), k_bn_grads)(g, pd, pdx, dgamma, dbeta, mdy, mdyx);
        st = fk_launched("batch norm backward kernel");
    }
    if (st == FERRY_OK && dx && total > 0) {
        dim3 grid;
        bn_rows rw = bn_rows_plan(g, &grid);
        FK_FLOAT_TYPES(dt, T, "batch norm backward", {
            FK_LAUNCH(grid, FK_THREADS, fk_stream(c), k_bn_dx<T>)(
                rw, (const T *)x, (const T *)dy, (T *)dx, gamma, smean, sinvstd, mdy, mdyx);
        });
        st = fk_launched("batch norm backward kernel");
    }
    fk_scratch_give(c, &scratch); // reused only behind the kernels (stream order)
    return st;
}

// Element i keeps with word i % 4 of Philox block i / 4, as the CPU kernel.
template <typename T>
__global__ void k_dropout(T *y, const T *x, int64_t n, float p, float scale, uint64_t seed, uint64_t stream)
{
    int64_t groups = (n + 3) / 4;
    FK_GRID_STRIDE(g, groups)
    {
        uint32_t w[4];
        ferry_philox_block_((uint64_t)g, stream, seed, w);
        for (int j = 0; j < 4 && g * 4 + j < n; j++) {
            int64_t i = g * 4 + j;
            y[i] = fk_to_f32<T>(fk_dropout_apply(fk_f(x[i]), w[j], p, scale));
        }
    }
}

extern "C" ferry_status FK_CU(fk_cuda_dropout)(const fk_ctx *c, ferry_dtype dt, void *y, const void *x, int64_t n, float p,
                                        uint64_t seed, uint64_t stream)
{
    fk_guard guard;
    ferry_status st = fk_enter(c, &guard);
    if (st != FERRY_OK || n == 0)
        return st;
    float scale = fk_dropout_scale(p);
    FK_FLOAT_TYPES(dt, T, "dropout", {
        FK_LAUNCH(fk_blocks((n + 3) / 4), FK_THREADS, fk_stream(c), k_dropout<T>)((T *)y, (const T *)x, n, p, scale,
                                                                             seed, stream);
    });
    return fk_launched("dropout kernel");
}

// Every thread reads the device's skip flag and step count itself: the host
// never learns them (mixed precision decides on the device whether a step counts).
static __device__ bool fk_skipped(const float *skip) { return skip && skip[0] != 0.0f; }

__global__ void k_sgd(float *p, const float *g, float *buf, int64_t n, float lr, float momentum, float keep,
                      float wd, bool nesterov, const int64_t *taken, const float *skip)
{
    if (fk_skipped(skip))
        return;
    bool first = taken[0] == 0;
    FK_GRID_STRIDE(i, n)
    p[i] = momentum == 0.0f ? fk_sgd_plain(p[i], g[i], lr, wd)
                            : fk_sgd_momentum(p[i], g[i], &buf[i], lr, momentum, keep, wd, nesterov, first);
}

extern "C" ferry_status FK_CU(fk_cuda_sgd)(const fk_ctx *c, float *p, const float *g, float *buf, int64_t n,
                                    const fk_sgd *h, const int64_t *taken, const float *skip)
{
    fk_guard guard;
    ferry_status st = fk_enter(c, &guard);
    if (st != FERRY_OK || n == 0)
        return st;
    FK_LAUNCH(fk_blocks(n), FK_THREADS, fk_stream(c), k_sgd)(p, g, buf, n, h->lr, h->momentum, 1.0f - h->dampening,
                                                         h->wd, h->nesterov, taken, skip);
    return fk_launched("SGD kernel");
}

// Adam's bias corrections: two double pow, a divide and a sqrt, FP64 work that
// GPUs with 1/64-rate FP64 pay dearly for. They depend on the step alone, and
// the step count lives on the device (mixed precision skips steps there), so one
// thread computes them once per step for the update kernels to read.
__global__ void k_adam_consts(float lr, float b1, float b2, const int64_t *taken, float *consts)
{
    fk_adam_consts(lr, b1, b2, taken[0] + 1, &consts[0], &consts[1]);
}

extern "C" ferry_status FK_CU(fk_cuda_adam_consts)(const fk_ctx *c, const fk_adam *h, const int64_t *taken,
                                            float *consts)
{
    fk_guard guard;
    ferry_status st = fk_enter(c, &guard);
    if (st != FERRY_OK)
        return st;
    FK_LAUNCH(1, 1, fk_stream(c), k_adam_consts)(h->lr, h->b1, h->b2, taken, consts);
    return fk_launched("Adam constants kernel");
}

__global__ void k_adam(float *p, const float *g, float *m, float *v, int64_t n, float lr, float b1, float b2,
                       float eps, float wd, bool decoupled, const float *consts, const float *skip)
{
    if (fk_skipped(skip))
        return;
    float step_size = consts[0], sbc2 = consts[1];
    FK_GRID_STRIDE(i, n)
    p[i] = fk_adam_elem(p[i], g[i], &m[i], &v[i], lr, b1, b2, eps, wd, decoupled, step_size, sbc2);
}

extern "C" ferry_status FK_CU(fk_cuda_adam)(const fk_ctx *c, float *p, const float *g, float *m, float *v, int64_t n,
                                     const fk_adam *h, const float *consts, const float *skip)
{
    fk_guard guard;
    ferry_status st = fk_enter(c, &guard);
    if (st != FERRY_OK || n == 0)
        return st;
    FK_LAUNCH(fk_blocks(n), FK_THREADS, fk_stream(c), k_adam)(p, g, m, v, n, h->lr, h->b1, h->b2, h->eps, h->wd,
                                                         h->decoupled, consts, skip);
    return fk_launched("Adam kernel");
}

// Multi-tensor updates: tensor i of the list takes blocks [first[i], first[i+1])
// of one grid, each element updated with sgd / adam's own formula (the same
// bits). The list travels by value in the kernel's arguments.
struct fk_plist_grid {
    fk_plist l;
    unsigned first[FK_PLIST_MAX + 1];
};

// The list's blocks, or an error naming a bad list.
static ferry_status plist_grid(const fk_plist *l, fk_plist_grid *g, const char *what)
{
    if (!l || l->n < 0 || l->n > FK_PLIST_MAX)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "%s: the tensor list must hold 0 to %d tensors", what,
                          FK_PLIST_MAX);
    g->l = *l;
    g->first[0] = 0;
    for (int i = 0; i < l->n; i++)
        g->first[i + 1] = g->first[i] + (l->numel[i] > 0 ? fk_blocks(l->numel[i]) : 0);
    return FERRY_OK;
}

// Which tensor block b updates, and the block's rank within it.
__device__ __forceinline__ int plist_find(const fk_plist_grid &g, unsigned b)
{
    int i = 0;
    while (b >= g.first[i + 1])
        i++;
    return i;
}

__global__ void k_sgd_multi(fk_plist_grid g, float lr, float momentum, float keep, float wd, bool nesterov,
                            const int64_t *taken, const float *skip)
{
    if (fk_skipped(skip))
        return;
    bool first = taken[0] == 0;
    int t = plist_find(g, blockIdx.x);
    float *p = g.l.p[t], *buf = g.l.s0[t];
    const float *gr = g.l.g[t];
    int64_t stride = (int64_t)(g.first[t + 1] - g.first[t]) * blockDim.x;
    for (int64_t i = (int64_t)(blockIdx.x - g.first[t]) * blockDim.x + threadIdx.x; i < g.l.numel[t]; i += stride)
        p[i] = momentum == 0.0f ? fk_sgd_plain(p[i], gr[i], lr, wd)
                                : fk_sgd_momentum(p[i], gr[i], &buf[i], lr, momentum, keep, wd, nesterov, first);
}

extern "C" ferry_status FK_CU(fk_cuda_sgd_multi)(const fk_ctx *c, const fk_plist *l, const fk_sgd *h,
                                          const int64_t *taken, const float *skip)
{
    fk_guard guard;
    ferry_status st = fk_enter(c, &guard);
    if (st != FERRY_OK)
        return st;
    fk_plist_grid g;
    if ((st = plist_grid(l, &g, "SGD")) != FERRY_OK || g.first[l->n] == 0)
        return st;
    FK_LAUNCH(g.first[l->n], FK_THREADS, fk_stream(c), k_sgd_multi)(g, h->lr, h->momentum, 1.0f - h->dampening,
                                                                   h->wd, h->nesterov, taken, skip);
    return fk_launched("SGD kernel");
}

__global__ void k_adam_multi(fk_plist_grid g, float lr, float b1, float b2, float eps, float wd, bool decoupled,
                             const float *consts, const float *skip)
{
    if (fk_skipped(skip))
        return;
    float step_size = consts[0], sbc2 = consts[1];
    int t = plist_find(g, blockIdx.x);
    float *p = g.l.p[t], *m = g.l.s0[t], *v = g.l.s1[t];
    const float *gr = g.l.g[t];
    int64_t stride = (int64_t)(g.first[t + 1] - g.first[t]) * blockDim.x;
    for (int64_t i = (int64_t)(blockIdx.x - g.first[t]) * blockDim.x + threadIdx.x; i < g.l.numel[t]; i += stride)
        p[i] = fk_adam_elem(p[i], gr[i], &m[i], &v[i], lr, b1, b2, eps, wd, decoupled, step_size, sbc2);
}

extern "C" ferry_status FK_CU(fk_cuda_adam_multi)(const fk_ctx *c, const fk_plist *l, const fk_adam *h,
                                           const float *consts, const float *skip)
{
    fk_guard guard;
    ferry_status st = fk_enter(c, &guard);
    if (st != FERRY_OK)
        return st;
    fk_plist_grid g;
    if ((st = plist_grid(l, &g, "Adam")) != FERRY_OK || g.first[l->n] == 0)
        return st;
    FK_LAUNCH(g.first[l->n], FK_THREADS, fk_stream(c), k_adam_multi)(g, h->lr, h->b1, h->b2, h->eps, h->wd,
                                                                    h->decoupled, consts, skip);
    return fk_launched("Adam kernel");
}

// zero_multi: buffer i takes blocks [first[i], first[i+1]) of one grid, a
// 4-byte word per thread (bytes one at a time in a buffer's tail, or in a
// buffer not 4-byte aligned: a half-precision view at an odd element).
struct fk_zlist_grid {
    fk_zlist l;
    unsigned first[FK_PLIST_MAX + 1];
};

__global__ void k_zero_multi(fk_zlist_grid g)
{
    int t = 0;
    while (blockIdx.x >= g.first[t + 1])
        t++;
    unsigned char *p = (unsigned char *)g.l.p[t];
    int64_t bytes = g.l.bytes[t], words = (bytes + 3) / 4;
    bool aligned = ((uintptr_t)p & 3) == 0;
    int64_t stride = (int64_t)(g.first[t + 1] - g.first[t]) * blockDim.x;
    for (int64_t i = (int64_t)(blockIdx.x - g.first[t]) * blockDim.x + threadIdx.x; i < words; i += stride) {
        if (aligned && i * 4 + 4 <= bytes)
            ((uint32_t *)p)[i] = 0u;
        else
            for (int64_t b = i * 4; b < i * 4 + 4 && b < bytes; b++)
                p[b] = 0;
    }
}

extern "C" ferry_status FK_CU(fk_cuda_zero_multi)(const fk_ctx *c, const fk_zlist *l)
{
    fk_guard guard;
    ferry_status st = fk_enter(c, &guard);
    if (st != FERRY_OK)
        return st;
    if (!l || l->n < 0 || l->n > FK_PLIST_MAX)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "zero_multi: the list must hold 0 to %d buffers", FK_PLIST_MAX);
    fk_zlist_grid g;
    g.l = *l;
    g.first[0] = 0;
    for (int i = 0; i < l->n; i++)
        g.first[i + 1] = g.first[i] + (l->bytes[i] > 0 ? fk_blocks((l->bytes[i] + 3) / 4) : 0);
    if (g.first[l->n] == 0)
        return FERRY_OK;
    FK_LAUNCH(g.first[l->n], FK_THREADS, fk_stream(c), k_zero_multi)(g);
    return fk_launched("zero kernel");
}

__global__ void k_step_count(int64_t *taken, const float *skip)
{
    if (!fk_skipped(skip))
        taken[0]++;
}

extern "C" ferry_status FK_CU(fk_cuda_step_count)(const fk_ctx *c, int64_t *taken, const float *skip)
{
    fk_guard guard;
    ferry_status st = fk_enter(c, &guard);
    if (st != FERRY_OK)
        return st;
    FK_LAUNCH(1, 1, fk_stream(c), k_step_count)(taken, skip);
    return fk_launched("step count kernel");
}

template <typename T> __global__ void k_unscale(const T *g, float *master, int64_t n, const float *scale, float *found)
{
    float inv = 1.0f / scale[0];
    FK_GRID_STRIDE(i, n)
    {
        float v = fk_f(g[i]) * inv;
        master[i] = v;
        if (!isfinite(v))
            *found = 1.0f; // a benign race: every writer writes 1
    }
}

extern "C" ferry_status FK_CU(fk_cuda_unscale)(const fk_ctx *c, ferry_dtype dt, const void *g, float *master, int64_t n,
                                        const float *scale, float *found)
{
    fk_guard guard;
    ferry_status st = fk_enter(c, &guard);
    if (st != FERRY_OK || n == 0)
        return st;
    FK_FLOAT_TYPES(dt, T, "unscale", {
        FK_LAUNCH(fk_blocks(n), FK_THREADS, fk_stream(c), k_unscale<T>)((const T *)g, master, n, scale, found);
    });
    return fk_launched("unscale kernel");
}

__global__ void k_amp_update(float *scale, int64_t *tracker, const float *found, float growth, float backoff,
                             int64_t interval)
{
    fk_amp_update(scale, tracker, found[0] != 0.0f, growth, backoff, interval);
}

extern "C" ferry_status FK_CU(fk_cuda_amp_update)(const fk_ctx *c, float *scale, int64_t *tracker, const float *found,
                                           float growth, float backoff, int64_t interval)
{
    fk_guard guard;
    ferry_status st = fk_enter(c, &guard);
    if (st != FERRY_OK)
        return st;
    FK_LAUNCH(1, 1, fk_stream(c), k_amp_update)(scale, tracker, found, growth, backoff, interval);
    return fk_launched("loss scale update kernel");
}

FK_SOURCE_END

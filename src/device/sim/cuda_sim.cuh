// Internal: the CUDA dialect that the .cu sources see when g++ compiles them for
// the simulated GPU (src/device/cuda_src.cuh picks this or the real toolkit).
// The toolkit's own headers give the types and cuda_fp16/cuda_bf16 (their host
// implementations); this adds what a GPU compiler would: the qualifiers, the
// thread indices, __shared__, barriers and warp operations (kernel_exec.c runs
// them), atomics, device math within the documented error bounds, launches
// (FK_LAUNCH / FK_LAUNCH_COOP copy the arguments, as a CUDA launch does, and
// queue the kernel on the stream) and cuBLAS (cublas_sim.c). C++17, host only.
#ifndef FERRY_DEVICE_SIM_CUDA_SIM_CUH
#define FERRY_DEVICE_SIM_CUDA_SIM_CUH

#if defined(__CUDACC__)
#error "cuda_sim.cuh is for host compilers: nvcc uses the real CUDA headers"
#endif

// Every system header first: the math macros below must not reach them.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <math.h>
#include <new>
#include <stdint.h>
#include <string.h>
#include <tuple>
#include <type_traits>
#include <utility>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "device/sim/kernel_exec.h"
#include "ferry/status.h"

#define FERRY_SIM_DEVICE 1

#ifndef __global__
#define __global__
#endif
#ifndef __device__
#define __device__
#endif
#ifndef __host__
#define __host__
#endif
#ifndef __forceinline__
#define __forceinline__ inline
#endif
// One OS thread runs one block at a time, all its threads as fibers of it.
#undef __shared__
#define __shared__ static thread_local

#define threadIdx (ferry_simk_self->tid)
#define blockIdx (ferry_simk_self->blk->idx)
#define blockDim (ferry_simk_self->blk->dim)
#define gridDim (ferry_simk_self->blk->grid)

// The host-compiled copies of extern "C" entry points get their own names, so a
// CUDA build can hold both (the real ones and the simulated GPU's).
#define FK_CU(name) name##_sim
// And their kernels a namespace: nvcc's host stubs of k_fill<float> and the
// simulation's k_fill<float> would otherwise be one weak symbol.
#define FK_SOURCE_BEGIN namespace fk_hostsim {
#define FK_SOURCE_END }
#define ferry_cuda_oom ferry_simk_oom

static inline void __syncthreads() { ferry_simk_syncthreads(); }
static inline void __syncwarp(unsigned mask = 0xffffffffu) { (void)ferry_simk_warp(FKSIM_SYNCWARP, mask, 0, 0, 32); }

namespace fksim {
template <typename T> static inline uint64_t to_bits(T v)
{
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value, "shuffles move up to 8 bytes");
    uint64_t u = 0;
    std::memcpy(&u, &v, sizeof v);
    return u;
}
template <typename T> static inline T from_bits(uint64_t u)
{
    T v;
    std::memcpy(&v, &u, sizeof v);
    return v;
}
template <typename T> static inline T warp(int op, unsigned mask, T v, int arg, int width)
{
    return from_bits<T>(ferry_simk_warp(op, mask, to_bits(v), arg, width));
}
} // namespace fksim

template <typename T> static inline T __shfl_sync(unsigned m, T v, int src, int w = 32)
{
    return fksim::warp(FKSIM_SHFL, m, v, src, w);
}
template <typename T> static inline T __shfl_up_sync(unsigned m, T v, unsigned d, int w = 32)
{
    return fksim::warp(FKSIM_SHFL_UP, m, v, (int)d, w);
}
template <typename T> static inline T __shfl_down_sync(unsigned m, T v, unsigned d, int w = 32)
{
    return fksim::warp(FKSIM_SHFL_DOWN, m, v, (int)d, w);
}
template <typename T> static inline T __shfl_xor_sync(unsigned m, T v, int lane_mask, int w = 32)
{
    return fksim::warp(FKSIM_SHFL_XOR, m, v, lane_mask, w);
}
static inline unsigned __ballot_sync(unsigned m, int p)
{
    return (unsigned)ferry_simk_warp(FKSIM_BALLOT, m, p != 0, 0, 32);
}
static inline int __any_sync(unsigned m, int p) { return (int)ferry_simk_warp(FKSIM_ANY, m, p != 0, 0, 32); }
static inline int __all_sync(unsigned m, int p) { return (int)ferry_simk_warp(FKSIM_ALL, m, p != 0, 0, 32); }

// Atomics: the blocks of a grid run on one OS thread, but another stream's
// kernel may run at the same time, as on a GPU.
template <typename F> static inline F fksim_atomic_add_float(F *p, F v)
{
    F old, sum;
    __atomic_load(p, &old, __ATOMIC_RELAXED);
    do {
        sum = old + v;
    } while (!__atomic_compare_exchange(p, &old, &sum, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    return old;
}
static inline float atomicAdd(float *p, float v) { return fksim_atomic_add_float(p, v); }
static inline double atomicAdd(double *p, double v) { return fksim_atomic_add_float(p, v); }
static inline unsigned long long atomicAdd(unsigned long long *p, unsigned long long v)
{
    return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}
static inline int atomicAdd(int *p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }
static inline unsigned atomicAdd(unsigned *p, unsigned v) { return __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }
static inline int atomicMax(int *p, int v)
{
    int old = __atomic_load_n(p, __ATOMIC_RELAXED);
    while (old < v && !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
    return old;
}
static inline int atomicCAS(int *p, int cmp, int v)
{
    __atomic_compare_exchange_n(p, &cmp, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    return cmp;
}
static inline unsigned long long atomicCAS(unsigned long long *p, unsigned long long cmp, unsigned long long v)
{
    __atomic_compare_exchange_n(p, &cmp, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    return cmp;
}
static inline int atomicExch(int *p, int v) { return __atomic_exchange_n(p, v, __ATOMIC_RELAXED); }

#include "device/sim/math_sim.h"

// ---- launches ----
namespace fksim {
template <typename... P> struct closure {
    void (*fn)(P...);
    std::tuple<std::decay_t<P>...> args;
};
// Each simulated thread gets its own copy of the parameters, as its registers.
template <typename... P> static void run_thread(void *c)
{
    closure<P...> *k = static_cast<closure<P...> *>(c);
    std::apply(k->fn, k->args);
}
// malloc and placement new, not operator new: the objects build without
// exceptions or the C++ runtime, so libferry.so links no libstdc++.
template <typename... P> static void free_closure(void *c)
{
    static_cast<closure<P...> *>(c)->~closure();
    free(c);
}
static inline fksim_dim dim_of(dim3 d) { return fksim_dim{d.x, d.y, d.z}; }

template <typename... P> struct launcher {
    const char *name;
    bool coop;
    dim3 grid, block;
    cudaStream_t stream;
    void (*fn)(P...);
    template <typename... A> void operator()(A &&...a) const
    {
        void *mem = malloc(sizeof(closure<P...>));
        closure<P...> *k = mem ? new (mem) closure<P...>{fn, std::tuple<std::decay_t<P>...>(std::forward<A>(a)...)}
                               : nullptr;
        fksim_kernel d;
        d.name = name;
        d.coop = coop;
        d.grid = dim_of(grid);
        d.block = dim_of(block);
        d.body = run_thread<P...>;
        d.free_closure = free_closure<P...>;
        d.closure = k;
        if (!k) {
            d.grid = fksim_dim{0, 0, 0}; // reported as a failed launch, with the name
            d.free_closure = [](void *) {};
        }
        ferry_simk_launch(&d, (void *)stream);
    }
};
template <typename... P>
static inline launcher<P...> launch(bool coop, const char *name, dim3 g, dim3 b, cudaStream_t s, void (*fn)(P...))
{
    return launcher<P...>{name, coop, g, b, s, fn};
}
} // namespace fksim

#define FK_LAUNCH(g, b, s, ...) fksim::launch(false, #__VA_ARGS__, dim3(g), dim3(b), (s), &__VA_ARGS__)
#define FK_LAUNCH_COOP(g, b, s, ...) fksim::launch(true, #__VA_ARGS__, dim3(g), dim3(b), (s), &__VA_ARGS__)

// ---- the host side of the sources: devices, errors ----
// The current device for launches (ferry_cuda_guard's job under CUDA).
struct ferry_cuda_guard {
    int prev = -1;
    bool entered = false;
    ferry_cuda_guard() = default;
    ferry_cuda_guard(const ferry_cuda_guard &) = delete;
    ferry_cuda_guard &operator=(const ferry_cuda_guard &) = delete;
    ferry_status enter(int index)
    {
        prev = ferry_simk_enter(index);
        entered = true;
        return FERRY_OK;
    }
    ~ferry_cuda_guard()
    {
        if (entered)
            ferry_simk_leave(prev);
    }
};

static inline ferry_status fk_launch_status(const char *what) { return ferry_simk_launched(what); }

#endif

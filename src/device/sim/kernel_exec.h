/* Internal: the simulated GPU's execution of CUDA kernel sources compiled for the
 * host (src/device/sim/cuda_sim.cuh is the dialect those sources see). A launch
 * is a stream operation; when it runs, on the stream's thread, the grid's blocks
 * run one after another in a seeded order, and a block's threads either
 *  - one after another as plain calls (FK_LAUNCH: kernels without barriers or
 *    warp operations; reaching one is an error naming the kernel), or
 *  - as fibers (FK_LAUNCH_COOP), each with its own stack, switched only at
 *    __syncthreads and warp operations, the next one to run picked at random
 *    (seeded by FERRY_SIM_SEED), so code that relies on an order CUDA does not
 *    promise gives a wrong result on some seed.
 * A barrier or warp operation that cannot complete (a thread exited, lanes
 * disagree on the mask) is a device fault: the device's sticky error, naming
 * the kernel, the block and the threads. C, so the C++ side stays a thin layer
 * of templates. */
#ifndef FERRY_DEVICE_SIM_KERNEL_EXEC_H
#define FERRY_DEVICE_SIM_KERNEL_EXEC_H

#include <stdbool.h>
#include <stdint.h>

#include "ferry/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fksim_dim {
    unsigned x, y, z;
} fksim_dim;

typedef struct fksim_block {
    fksim_dim idx, dim, grid; /* blockIdx, blockDim, gridDim */
} fksim_block;

/* The simulated thread running now on this OS thread (threadIdx and its block). */
typedef struct fksim_thread {
    fksim_dim tid;
    const fksim_block *blk;
} fksim_thread;

extern __thread fksim_thread *ferry_simk_self;

typedef struct fksim_kernel {
    const char *name;
    bool coop;                       /* fibers (barriers, warp operations) */
    fksim_dim grid, block;
    void (*body)(void *closure);     /* one thread's run of the kernel */
    void (*free_closure)(void *closure);
    void *closure;                   /* the launch's copied arguments */
} fksim_kernel;

/* Queues k on `stream` (a simulated stream, NULL: the default one) of the device
 * made current by ferry_simk_enter. Owns k->closure from here on, failure
 * included. A failure (bad configuration, a faulted device) is also kept for
 * ferry_simk_launched, as cudaGetLastError keeps it. */
void ferry_simk_launch(const fksim_kernel *k, void *stream);
/* cudaGetLastError for the launches above: the first failure since the last
 * call (then cleared), with its message, or FERRY_OK. */
ferry_status ferry_simk_launched(const char *what);

/* The launching thread's device (cudaSetDevice for the host-compiled sources):
 * enter returns the previous one for leave. */
int ferry_simk_enter(int dev);
void ferry_simk_leave(int prev);
int ferry_simk_device(void);
/* ferry_cuda_oom for cuBLAS's workspace on a simulated device. */
ferry_status ferry_simk_oom(int dev, const char *what);

/* Device side, called from inside a running kernel. */
enum fksim_warp_op {
    FKSIM_SHFL, FKSIM_SHFL_UP, FKSIM_SHFL_DOWN, FKSIM_SHFL_XOR, FKSIM_BALLOT, FKSIM_ANY, FKSIM_ALL,
    FKSIM_SYNCWARP
};
void ferry_simk_syncthreads(void);
uint64_t ferry_simk_warp(int op, unsigned mask, uint64_t v, int arg, int width);
/* A seeded hash of (function, input bits): how far the simulated math library
 * moves a result, fixed for a given input and seed as a GPU's is. */
uint64_t ferry_simk_math_hash(unsigned fn, uint64_t bits);

#ifdef __cplusplus
}
#endif
#endif

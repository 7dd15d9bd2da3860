/* Internal: the simulated GPU (FERRY_SIM_GPUS=N). Devices cuda:0..N-1 are served
 * by a backend that keeps CUDA's contracts and nothing stronger: every stream is
 * a thread that runs its operations in order, after seeded random delays, and
 * asynchronously to the host and to other streams; kernels are the CUDA sources
 * compiled for the host and run on the stream's thread with CUDA's execution
 * model (kernel_exec.h; FERRY_SIM_KERNELS=cpu: the CPU kernels), cuBLAS a
 * checking stand-in (cublas_sim.h); errors are sticky per device. What it proves
 * is the protocol (ordering, devices, copies, errors) and the kernels' results
 * within what CUDA documents, never speed.
 *
 * The simulated hardware is process-wide, as a real GPU is: the device records
 * below are the one piece of global mutable state outside the allocator hooks. */
#ifndef FERRY_DEVICE_SIM_H
#define FERRY_DEVICE_SIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "device/backend.h"

#define FERRY_SIM_MAX_DEVICES 8

/* One queued operation. run executes it on the stream's thread and returns
 * FERRY_OK or a fault (which becomes the device's sticky error); the op is freed
 * with free() afterwards. `what` names it in that error. */
typedef struct sim_op {
    struct sim_op *next;
    ferry_status (*run)(struct sim_op *op); /* optional */
    void (*done)(struct sim_op *op); /* optional: runs after run and after the stream
                                      * counted the op, even when run was skipped */
    const char *what;
    bool control;                    /* runs even on a faulted device (waits, records) */
} sim_op;

typedef struct sim_stream sim_stream;

/* How many simulated devices FERRY_SIM_GPUS asks for (0: the simulation is off). */
int ferry_sim_device_count(void);
const ferry_backend *ferry_backend_sim(void);

/* The stream a launch on device `dev` goes to: `native` (a sim stream of that
 * device), or NULL for the device's default stream. A stream of another device is
 * CUDA's invalid-resource-handle error, named. */
ferry_status ferry_sim_launch_stream(int dev, void *native, const char *what, sim_stream **out);

/* Queues op (allocated by the caller with malloc; owned by the stream from here
 * on). *ticket (may be NULL) gets its place in the stream's order. */
ferry_status ferry_sim_enqueue(sim_stream *s, sim_op *op, uint64_t *ticket);

/* Queues fn(copy of arg) on the stream as one kernel launch (counted by the
 * fault hook below): how data kernels run on the simulated GPU when it runs CPU
 * code. `what` is a string literal naming the kernel in errors. */
typedef ferry_status (*ferry_sim_host_fn)(void *arg);
ferry_status ferry_sim_launch_host(int dev, void *native, const char *what, ferry_sim_host_fn fn,
                                   const void *arg, size_t bytes);

/* True when the simulated GPU runs the CUDA sources compiled for the host (the
 * default in a build with FERRY_SIM_KERNELS), false with FERRY_SIM_KERNELS=cpu
 * or without them: then every kernel is the CPU's, run in stream order. */
bool ferry_sim_cuda_sources(void);

/* Test hooks. The k-th kernel launched from now on device d (1 = the next) faults
 * when it runs, as an illegal memory access would on a GPU; 0 = never. Reset
 * clears a device's sticky error once its streams have drained (the simulated
 * cudaDeviceReset, for tests that go on after a fault). */
void ferry_sim_debug_fault_after(int dev, int64_t k);
void ferry_sim_debug_reset(int dev);
/* Counts a kernel launch against the fault countdown: true when this one faults.
 * Every launch (kernel, host-run kernel, cuBLAS call) passes here once, so it also
 * counts launches for ferry_sim_debug_counts. */
bool ferry_sim_take_fault(int dev);

/* Introspection for tests that hold a training step to its promises (no host
 * wait, no device-to-host copy, few launches, no cudaMalloc per step): what the
 * host has asked of device dev since the process started. Counters only grow;
 * a test reads them before and after the work it measures.
 * - host_syncs: calls that block the host on device work: stream, device and
 *   event synchronisation, copies that return only once done (into pageable
 *   memory, or the synchronous forms), and cudaFree (which waits for the device);
 * - d2h_copies: device-to-host copies of any kind;
 * - launches: kernels (CUDA sources or CPU kernels) and cuBLAS calls;
 * - device_mallocs / device_frees: cudaMalloc and cudaFree (the caching
 *   allocator's system calls, not the blocks it hands out). */
typedef struct ferry_sim_counts {
    int64_t host_syncs, d2h_copies, launches, device_mallocs, device_frees;
} ferry_sim_counts;
void ferry_sim_debug_counts(int dev, ferry_sim_counts *out);

#endif

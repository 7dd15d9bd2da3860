// Internal, .cu files only: what a CUDA source includes first. Under nvcc, the
// CUDA toolkit; under a host C++ compiler (the simulated GPU runs the same
// sources: src/device/sim/cuda_sim.cuh), the simulation's dialect. Either way a
// source writes launches as
//     FK_LAUNCH(grid, block, stream, kernel<T>)(args...);      // no barriers
//     FK_LAUNCH_COOP(grid, block, stream, kernel<T>)(args...); // __syncthreads, shuffles
// (the simulation runs the first thread by thread and refuses a barrier in it),
// names its extern "C" entry points FK_CU(name), and ends a launch with
// fk_launch_status("what") (cudaGetLastError as a ferry_status).
#ifndef FERRY_DEVICE_CUDA_SRC_CUH
#define FERRY_DEVICE_CUDA_SRC_CUH

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "device/cuda_check.h"

#define FK_CU(name) name
#define FK_SOURCE_BEGIN
#define FK_SOURCE_END
#define FK_LAUNCH(g, b, s, ...) __VA_ARGS__<<<(g), (b), 0, (s)>>>
#define FK_LAUNCH_COOP(g, b, s, ...) __VA_ARGS__<<<(g), (b), 0, (s)>>>

static inline ferry_status fk_launch_status(const char *what)
{
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? FERRY_OK : ferry_cuda_status(e, __FILE__, __LINE__, what);
}
#else
#include "device/sim/cuda_sim.cuh"
#endif

#endif

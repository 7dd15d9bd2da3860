/* Internal: the batch conversion the loader runs last, its own data kernel on
 * every backend: wire dtype (u8 or f32) in the dataset's layout -> out dtype
 * (f32/f16/bf16/u8) in the requested layout, with per-channel
 * y = x * scale[c] + shift[c], rounded after the multiply and after the add
 * (never fused: gcc does not contract in ISO C mode, and the CUDA kernel uses
 * __fmul_rn/__fadd_rn), on the same float constants, so the CPU and CUDA results
 * agree bit for bit. The host version is convert.c, the CUDA one convert.cu
 * (also compiled for the simulated GPU); convert_run.c picks by backend. */
#ifndef FERRY_LOADER_CONVERT_H
#define FERRY_LOADER_CONVERT_H

#include <stdbool.h>
#include <stddef.h>

#include "ferry/dataset.h"
#include "ferry/device.h"

#define FERRY_CONVERT_MAX_CHANNELS 4

typedef struct ferry_convert_spec {
    size_t count; /* samples */
    size_t channels, height, width;
    ferry_dtype src_dtype;
    ferry_layout src_layout;
    ferry_dtype dst_dtype;
    ferry_layout dst_layout;
    bool affine; /* apply scale/shift (false: plain cast/permute) */
    float scale[FERRY_CONVERT_MAX_CHANNELS];
    float shift[FERRY_CONVERT_MAX_CHANNELS];
} ferry_convert_spec;

/* Queues the conversion of spec->count samples from src to dst (device memory of
 * d) on stream s (NULL: d's default stream; on the CPU it runs now). An affine
 * spec with more than FERRY_CONVERT_MAX_CHANNELS channels is FERRY_ERR_LIMIT on
 * every device, before anything is read; a stream of another device is
 * FERRY_ERR_DEVICE_MISMATCH. */
ferry_status ferry_convert_batch(ferry_device d, ferry_stream *s, const ferry_convert_spec *spec,
                                 const void *src, void *dst);

/* Host version; also what the workers use for wire f32. */
void ferry_convert_cpu(const ferry_convert_spec *spec, const void *src, void *dst);

/* Converts one sample (count ignored) from src into dst on the host. */
void ferry_convert_sample_cpu(const ferry_convert_spec *spec, const void *src, void *dst);

/* Queues the conversion on the CUDA stream `stream` (a cudaStream_t, NULL: the
 * default stream) of device `device`, which it makes current for the launch. */
#if FERRY_HAVE_CUDA
ferry_status ferry_convert_cuda(int device, const ferry_convert_spec *spec, const void *src, void *dst,
                                void *stream);
#endif
#if FERRY_SIM_KERNELS
/* The same source compiled for the host, run by the simulated GPU. */
ferry_status ferry_convert_cuda_sim(int device, const ferry_convert_spec *spec, const void *src,
                                    void *dst, void *stream);
#endif

#endif

/* Internal: the batch conversion the loader runs last: wire dtype (u8 or f32) in
 * the dataset's layout -> out dtype (f32/f16/bf16/u8) in the requested layout,
 * with per-channel y = x * scale[c] + shift[c], rounded after the multiply and
 * after the add (never fused: gcc does not contract in ISO C mode, and the CUDA
 * kernel uses __fmul_rn/__fadd_rn), on the same float constants, so the CPU and
 * CUDA results agree bit for bit. */
#ifndef FERRY_LOADER_CONVERT_H
#define FERRY_LOADER_CONVERT_H

#include <stdbool.h>
#include <stddef.h>

#include "ferry/dataset.h"
#include "ferry/device.h"
#include "model/kernels/kernels.h"

/* The spec is the kernel table's: the conversion on a device is a kernel of the
 * device's backend (FK(c, batch_convert, ...)), this host version its CPU entry. */
#define FERRY_CONVERT_MAX_CHANNELS FK_BATCH_MAX_CHANNELS
typedef fk_batch_spec ferry_convert_spec;

/* Host version; also what the workers use for wire f32. */
void ferry_convert_cpu(const ferry_convert_spec *spec, const void *src, void *dst);

/* Converts one sample (count ignored) from src into dst on the host. */
void ferry_convert_sample_cpu(const ferry_convert_spec *spec, const void *src, void *dst);

#if FERRY_HAVE_CUDA
/* Queues the conversion on the CUDA stream `stream` (a cudaStream_t). */
ferry_status ferry_convert_cuda(const ferry_convert_spec *spec, const void *src, void *dst,
                                void *stream);
#endif

#endif

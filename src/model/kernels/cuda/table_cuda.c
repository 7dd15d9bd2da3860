/* The CUDA backend's kernel table (the kernels are in ops.cu and nn.cu). */
#include "model/kernels/kernels.h"

#define FK_ENTRY_CUDA(name, ...) .name = fk_cuda_##name,
const fk_table fk_cuda_table = {FK_KERNELS(FK_ENTRY_CUDA)};

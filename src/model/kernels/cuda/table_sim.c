/* The simulated GPU's kernel table: the CUDA sources of ops.cu and nn.cu
 * compiled for the host (FERRY_SIM_KERNELS, when the build found the CUDA
 * toolkit's headers). model/kernels/sim/kernels_sim.c picks it, or the CPU
 * kernels with FERRY_SIM_KERNELS=cpu. (libferry's tensor_cuda.cu and convert.cu
 * are its own data kernels, outside this table.) */
#include "model/kernels/kernels.h"

#if FERRY_SIM_KERNELS
#define FK_ENTRY_CUDA_SIM(name, ...) .name = fk_cuda_##name##_sim,
const fk_table fk_cuda_sim_table = {FK_KERNELS(FK_ENTRY_CUDA_SIM)};
#else
typedef int fk_no_sim_table; /* built without the CUDA headers: CPU kernels only */
#endif

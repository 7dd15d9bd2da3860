/* The training library's kernel table for a backend, by the backend's kind: the
 * backends (libferry) do not point at these tables, so libferry links none of
 * the kernels, BLAS or cuBLAS. */
#include "device/backend.h"
#include "model/kernels/kernels.h"

const fk_table *fk_table_for(const ferry_backend *b)
{
    switch (b->kind) {
    case FERRY_BACKEND_CPU: return &fk_cpu_table;
    case FERRY_BACKEND_SIM: return &fk_sim_table;
    case FERRY_BACKEND_CUDA:
#if FERRY_HAVE_CUDA
        return &fk_cuda_table;
#else
        break;
#endif
    }
    return NULL;
}

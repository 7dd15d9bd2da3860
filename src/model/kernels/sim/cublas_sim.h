/* Internal: the simulated GPU's cuBLAS, the entry points ferry calls, with the
 * real signatures and types (cublas_api.h). Host-compiled .cu sources reach them
 * through the macros below, so a CUDA build holds the real cuBLAS and these side
 * by side. Every argument is checked as the cuBLAS documentation states it; a
 * rejected call returns the status cuBLAS would and keeps a message naming the
 * argument, which cublasGetStatusString then gives. The product itself is a
 * column-major reference that accumulates in the compute type in a seeded order
 * (cuBLAS promises none), queued on the handle's stream. */
#ifndef FERRY_MODEL_KERNELS_SIM_CUBLAS_SIM_H
#define FERRY_MODEL_KERNELS_SIM_CUBLAS_SIM_H

#include <stddef.h>

#include <cublas_api.h>

#ifdef __cplusplus
extern "C" {
#endif

cublasStatus_t ferry_simblas_create(cublasHandle_t *handle);
cublasStatus_t ferry_simblas_destroy(cublasHandle_t handle);
cublasStatus_t ferry_simblas_set_stream(cublasHandle_t handle, cudaStream_t stream);
cublasStatus_t ferry_simblas_set_workspace(cublasHandle_t handle, void *workspace, size_t bytes);
/* Kept on the handle; the simulated product always reduces in the compute type. */
cublasStatus_t ferry_simblas_set_math_mode(cublasHandle_t handle, cublasMath_t mode);
cublasStatus_t ferry_simblas_gemm_sbex(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                       int m, int n, int k, const void *alpha, const void *a, cudaDataType_t atype,
                                       int lda, long long stride_a, const void *b, cudaDataType_t btype, int ldb,
                                       long long stride_b, const void *beta, void *c, cudaDataType_t ctype, int ldc,
                                       long long stride_c, int batch, cublasComputeType_t compute,
                                       cublasGemmAlgo_t algo);
const char *ferry_simblas_status_string(cublasStatus_t status);
/* Live handles (a test's leak check). */
long ferry_simblas_live(void);

#ifdef __cplusplus
}

#define cublasCreate(h) ferry_simblas_create(h)
#define cublasDestroy(h) ferry_simblas_destroy(h)
#define cublasSetStream(h, s) ferry_simblas_set_stream((h), (s))
#define cublasSetWorkspace(h, p, n) ferry_simblas_set_workspace((h), (p), (n))
#define cublasSetMathMode(h, m) ferry_simblas_set_math_mode((h), (m))
#define cublasGemmStridedBatchedEx ferry_simblas_gemm_sbex
#define cublasGetStatusString(s) ferry_simblas_status_string(s)
#endif
#endif

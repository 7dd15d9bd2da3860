/* Internal: the one place that includes CBLAS. Any CBLAS will do: the Makefile's
 * BLAS= picks the library, and BLAS_HEADER another header name when the
 * implementation's is not plain cblas.h (Debian's reference CBLAS is
 * cblas-netlib.h). Only the standard CBLAS interface is used, never an
 * implementation's own types (OpenBLAS's blasint) or extras. */
#ifndef FERRY_COMMON_BLAS_H
#define FERRY_COMMON_BLAS_H

#include <limits.h>

#ifdef FERRY_CBLAS_HEADER
#include FERRY_CBLAS_HEADER
#else
#include <cblas.h>
#endif

/* For the build description. OpenBLAS's cblas.h defines OPENBLAS_VERSION. */
#ifdef OPENBLAS_VERSION
#define FERRY_BLAS_NAME "OpenBLAS"
#else
#define FERRY_BLAS_NAME "CBLAS"
#endif

/* The largest size every CBLAS takes: their integer is int, or int64_t in ILP64
 * builds, so INT_MAX is safe for all and a size passed as int is exact. */
#define FERRY_BLAS_INT_MAX INT_MAX

#endif

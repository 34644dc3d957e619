/*
 * nn_blas.h - OpenBLAS's cblas_sgemm, loaded (dlopen) on first use.
 *
 * Loading OpenBLAS costs about 6 ms and starts its worker threads; a
 * `kiln compile` or `kiln info` runs no kernel and should pay for neither.
 * The aicore kernels call nn_sgemm, with cblas_sgemm's arguments, after
 * nn_blas_ready has said the library is there.
 */
#ifndef KILN_AICORE_NN_BLAS_H
#define KILN_AICORE_NN_BLAS_H

#include "cpu_util.h"

#include <cblas.h>
#include <stdbool.h>

/** Load OpenBLAS once per process; false with *why set (static text) when it
 *  cannot be loaded.  Thread-safe. */
bool nn_blas_ready(const char **why);

/** cblas_sgemm; only after nn_blas_ready returned true. */
void nn_sgemm(const enum CBLAS_ORDER order, const enum CBLAS_TRANSPOSE ta,
              const enum CBLAS_TRANSPOSE tb, const blasint m, const blasint n, const blasint k,
              const float alpha, const float *a, const blasint lda, const float *b,
              const blasint ldb, const float beta, float *c, const blasint ldc);

/** In a kernel: fail the node, quoting why, when OpenBLAS cannot be loaded. */
#define NN_BLAS_REQUIRE(a, err)                                                                    \
    do {                                                                                           \
        const char *why_ = "";                                                                     \
        if (!nn_blas_ready(&why_))                                                                 \
            return cpu_fail((a), (err), KILN_ERR_UNSUPPORTED, "%s", why_);                         \
    } while (0)

#endif

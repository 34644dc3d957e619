/*
 * nn_blas.c - OpenBLAS loaded on first use (nn_blas.h).
 *
 * The library is looked up by its soname (KILN_OPENBLAS_SONAME, found at
 * configure time; libopenblas.so.0 on Debian), then by the development
 * link name; KILN_OPENBLAS in the environment names the one library to load
 * instead (a path or a soname with cblas_sgemm).  It is never closed: its
 * worker threads live in it.
 */
#include "nn_blas.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <threads.h>

#ifndef KILN_OPENBLAS_SONAME
#define KILN_OPENBLAS_SONAME "libopenblas.so.0"
#endif

static once_flag blas_once = ONCE_FLAG_INIT;
static __typeof__(cblas_sgemm) *blas_sgemm;
static char blas_err[320];

static void blas_load(void)
{
    const char *names[] = {KILN_OPENBLAS_SONAME, "libopenblas.so"};
    size_t count = 2;
    const char *env = getenv("KILN_OPENBLAS");
    if (env && env[0]) {
        names[0] = env;
        count = 1;
    }
    char first[200] = "";
    for (size_t i = 0; i < count; i++) {
        void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            const char *e = dlerror();
            if (!first[0])
                snprintf(first, sizeof first, "%s", e ? e : names[i]);
            continue;
        }
        void *sym = dlsym(h, "cblas_sgemm");
        if (sym) {
            memcpy(&blas_sgemm, &sym, sizeof sym);
            return;
        }
        snprintf(first, sizeof first, "%s has no cblas_sgemm", names[i]);
        dlclose(h);
    }
    snprintf(blas_err, sizeof blas_err,
             "OpenBLAS cannot be loaded (%s)%s", first,
             env && env[0] ? " (KILN_OPENBLAS names it)"
                           : "; install libopenblas0 (bash tools/install-deps.sh)");
}

bool nn_blas_ready(const char **why)
{
    call_once(&blas_once, blas_load);
    if (!blas_sgemm && why)
        *why = blas_err;
    return blas_sgemm != NULL;
}

void nn_sgemm(const enum CBLAS_ORDER order, const enum CBLAS_TRANSPOSE ta,
              const enum CBLAS_TRANSPOSE tb, const blasint m, const blasint n, const blasint k,
              const float alpha, const float *a, const blasint lda, const float *b,
              const blasint ldb, const float beta, float *c, const blasint ldc)
{
    blas_sgemm(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

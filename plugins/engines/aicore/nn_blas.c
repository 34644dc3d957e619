/*
 * nn_blas.c - OpenBLAS loaded on first use (nn_blas.h).
 *
 * The library is looked up by its soname (KILN_OPENBLAS_SONAME, found at
 * configure time; libopenblas.so.0 on Debian), then by the development
 * link name; KILN_OPENBLAS in the environment names the one library to load
 * instead (a path or a soname with cblas_sgemm).  It is never closed: its
 * worker threads live in it.
 *
 * A product with one row or one column (M = 1 or N = 1: a Gemm on one
 * sample, a MatMul by a vector) goes to cblas_sgemv instead: sgemm packs
 * B (or A) into its blocked layout on every call, which for one row costs
 * more than the product itself (on CPUs where OpenBLAS has no small-matrix
 * sgemm path, e.g. its Haswell/Zen kernels, hello_deepa's three Gemms spent
 * 90% of the run packing).  sgemv reads the matrix once, in place.  With
 * beta = 0 the output is cleared first: sgemm never reads C then, and C may
 * hold anything (a planned buffer's previous tensor, NaN included), while
 * some sgemv versions compute 0 * y.
 *
 * Threads: OpenBLAS is told to use one thread (openblas_set_num_threads)
 * and a large product is cut into blocks of rows or columns that the
 * process's OpenMP pool shares out (cpu_par_for, the pool of every other
 * kernel: no second pool of spinning threads).  The blocks depend on the
 * shape alone, never on the thread count, so `-j 1` and `-j N` make the same
 * calls and write the same bytes; OpenBLAS's own threading does not (on its
 * Haswell/Zen kernels a product split over 2 threads rounds differently
 * from the same product on one).
 */
#include "nn_blas.h"

#include "cpu_par.h"

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
static __typeof__(cblas_sgemv) *blas_sgemv; /* optional: NULL = sgemm only */
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
            void *gemv = getenv("KILN_BLAS_NO_GEMV") ? NULL : dlsym(h, "cblas_sgemv");
            if (gemv)
                memcpy(&blas_sgemv, &gemv, sizeof gemv);
            void *setnt = dlsym(h, "openblas_set_num_threads");
            if (setnt) {
                void (*set_threads)(int);
                memcpy(&set_threads, &setnt, sizeof setnt);
                set_threads(1);
            }
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

/* A product of fewer multiply-adds is one call on the calling thread. */
#define BLOCK_MIN_MACS (4LL << 20)
/* At most this many blocks, each a multiple of BLOCK_ALIGN rows or columns
 * (a multiple of every OpenBLAS micro-kernel's unroll). */
#define BLOCK_MAX 8
#define BLOCK_ALIGN 64

typedef struct gemm_job {
    enum CBLAS_TRANSPOSE ta, tb;
    blasint m, n, k, lda, ldb, ldc, step;
    bool by_rows;
    float alpha, beta;
    const float *a, *b;
    float *c;
} gemm_job;

/* Blocks [lo, hi) of a row-major product: rows of A and C, or columns of B
 * and C. */
static void gemm_blocks(void *ctx, int64_t lo, int64_t hi)
{
    const gemm_job *j = ctx;
    for (int64_t blk = lo; blk < hi; blk++) {
        const blasint first = (blasint)blk * j->step;
        const blasint total = j->by_rows ? j->m : j->n;
        const blasint len = total - first < j->step ? total - first : j->step;
        if (j->by_rows) {
            /* rows first.. of op(A): row r of A, or column r of A when transposed */
            const float *a = j->a + (j->ta == CblasNoTrans ? (size_t)first * (size_t)j->lda
                                                            : (size_t)first);
            blas_sgemm(CblasRowMajor, j->ta, j->tb, len, j->n, j->k, j->alpha, a, j->lda, j->b,
                       j->ldb, j->beta, j->c + (size_t)first * (size_t)j->ldc, j->ldc);
        } else {
            /* columns first.. of op(B): column of B, or row of B when transposed */
            const float *b = j->b + (j->tb == CblasNoTrans ? (size_t)first
                                                            : (size_t)first * (size_t)j->ldb);
            blas_sgemm(CblasRowMajor, j->ta, j->tb, j->m, len, j->k, j->alpha, j->a, j->lda, b,
                       j->ldb, j->beta, j->c + first, j->ldc);
        }
    }
}

/* sgemm cut into blocks along the longer of M and N, the blocks chosen from
 * the shape alone and shared out to the OpenMP pool (see the top). */
static void blas_sgemm_blocked(const enum CBLAS_ORDER order, const enum CBLAS_TRANSPOSE ta,
                               const enum CBLAS_TRANSPOSE tb, const blasint m, const blasint n,
                               const blasint k, const float alpha, const float *a,
                               const blasint lda, const float *b, const blasint ldb,
                               const float beta, float *c, const blasint ldc)
{
    const int64_t macs = (int64_t)m * n * k;
    const bool by_rows = m >= n;
    const blasint len = by_rows ? m : n;
    if (order != CblasRowMajor || macs < BLOCK_MIN_MACS || len < 2 * BLOCK_ALIGN) {
        blas_sgemm(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        return;
    }
    blasint step = (len + BLOCK_MAX - 1) / BLOCK_MAX;
    step = (step + BLOCK_ALIGN - 1) / BLOCK_ALIGN * BLOCK_ALIGN;
    const int64_t nblk = (len + step - 1) / step;
    gemm_job j = {ta, tb, m, n, k, lda, ldb, ldc, step, by_rows, alpha, beta, a, b, c};
    /* cost per block in multiply-adds: forks when each thread gets a grain */
    cpu_par_for(nblk, macs / nblk, gemm_blocks, &j);
}

/* C (row-major, one row or one column of @p len values @p inc apart) = 0. */
static void clear_strided(float *c, blasint len, blasint inc)
{
    if (inc == 1) {
        memset(c, 0, (size_t)len * sizeof *c);
        return;
    }
    for (blasint i = 0; i < len; i++)
        c[(size_t)i * (size_t)inc] = 0.0f;
}

void nn_sgemm(const enum CBLAS_ORDER order, const enum CBLAS_TRANSPOSE ta,
              const enum CBLAS_TRANSPOSE tb, const blasint m, const blasint n, const blasint k,
              const float alpha, const float *a, const blasint lda, const float *b,
              const blasint ldb, const float beta, float *c, const blasint ldc)
{
    if (blas_sgemv && order == CblasRowMajor && k > 0 && m > 0 && n > 0 && (m == 1 || n == 1)) {
        if (m == 1) {
            /* c[0, :] = alpha * op(B)^T x + beta * c, x = row 0 of op(A) */
            const blasint incx = ta == CblasNoTrans ? 1 : lda;
            if (beta == 0.0f)
                clear_strided(c, n, 1);
            if (tb == CblasNoTrans) /* B [K, N]: y = B^T x */
                blas_sgemv(CblasRowMajor, CblasTrans, k, n, alpha, b, ldb, a, incx, beta, c, 1);
            else /* B [N, K]: y = B x */
                blas_sgemv(CblasRowMajor, CblasNoTrans, n, k, alpha, b, ldb, a, incx, beta, c, 1);
            return;
        }
        /* n == 1: c[:, 0] = alpha * op(A) x + beta * c, x = column 0 of op(B) */
        const blasint incx = tb == CblasNoTrans ? ldb : 1;
        if (beta == 0.0f)
            clear_strided(c, m, ldc);
        if (ta == CblasNoTrans) /* A [M, K] */
            blas_sgemv(CblasRowMajor, CblasNoTrans, m, k, alpha, a, lda, b, incx, beta, c, ldc);
        else /* A [K, M]: y = A^T x */
            blas_sgemv(CblasRowMajor, CblasTrans, k, m, alpha, a, lda, b, incx, beta, c, ldc);
        return;
    }
    blas_sgemm_blocked(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

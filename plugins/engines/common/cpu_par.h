/*
 * cpu_par.h - intra-op parallelism of the CPU engines' own kernels
 * (docs/threads.md).
 *
 * cpu_par_for() shares a loop over n independent items out to the process's
 * OpenMP pool (libgomp: the pool oneDNN's convolutions use, sized by
 * OMP_NUM_THREADS, which `kiln -j N` sets).  Each thread gets one contiguous
 * range of items, so a kernel that splits on outer dimensions (rows, planes,
 * blocks of elements) computes every output element with the same code and
 * the same order of operations as the serial loop: the results are
 * bit-identical for every thread count.  Reductions are never split along
 * the reduced axis.
 *
 * Small work stays on the calling thread: below CPU_PAR_GRAIN element-
 * operations per thread the fork/join (waking the pool's workers) costs more
 * than it saves.
 * Built without OpenMP (KILN_OPENMP=OFF, the ThreadSanitizer build) every
 * loop runs serially.  No thread-local state: kernels pass their context.
 */
#ifndef KILN_CPU_PAR_H
#define KILN_CPU_PAR_H

#include <stdint.h>

#ifdef _OPENMP
#include <dlfcn.h>
#include <omp.h>
#endif

/* Element-operations (elements times a cost per element, 1 for an add) one
 * thread must get for a fork to pay: waking a sleeping worker of the pool
 * (OMP_WAIT_POLICY=PASSIVE) costs tens of microseconds (docs/threads.md). */
#define CPU_PAR_GRAIN 65536

/* One thread's share: items [lo, hi) of the loop. */
typedef void (*cpu_par_fn)(void *ctx, int64_t lo, int64_t hi);

/**
 * Threads worth using for @p n items of @p cost elements each: 1 when the
 * whole is below two grains, when OpenMP is off or when called from inside a
 * parallel region (no nesting); else at most OMP's thread count, one per
 * grain and one per item.
 */
static inline int cpu_par_threads(int64_t n, int64_t cost)
{
#ifdef _OPENMP
    if (n < 2 || cost <= 0 || n * cost < 2 * (int64_t)CPU_PAR_GRAIN || omp_in_parallel())
        return 1;
    int64_t t = omp_get_max_threads();
    const int64_t by_grain = n * cost / CPU_PAR_GRAIN;
    if (t > by_grain)
        t = by_grain;
    if (t > n)
        t = n;
    return t < 1 ? 1 : (int)t;
#else
    (void)n;
    (void)cost;
    return 1;
#endif
}

/**
 * Run @p fn over items [0, @p n) of @p cost elements each: on the calling
 * thread when cpu_par_threads() says 1, else in equal contiguous ranges, one
 * per thread of an OpenMP team.  @p fn must write only what its items own.
 */
static inline void cpu_par_for(int64_t n, int64_t cost, cpu_par_fn fn, void *ctx)
{
    if (n <= 0)
        return;
    const int nt = cpu_par_threads(n, cost);
    if (nt <= 1) {
        fn(ctx, 0, n);
        return;
    }
#ifdef _OPENMP
#pragma omp parallel num_threads(nt)
    {
        const int64_t t = omp_get_thread_num(), k = omp_get_num_threads();
        const int64_t lo = n * t / k, hi = n * (t + 1) / k;
        if (lo < hi)
            fn(ctx, lo, hi);
    }
#endif
}

/*
 * CPU_PAR_KEEP_RUNTIME(): in one source file of each plugin that uses
 * cpu_par_for, a load-time constructor that marks the OpenMP runtime
 * (libgomp) never to be unloaded.  The plugin pulls the runtime in, and
 * unloading the plugin would unmap it with its pool and its parsed
 * environment still allocated (LeakSanitizer reports them) while oneDNN or
 * another plugin may still use it; it stays mapped for the process, as if
 * the executable had linked it.
 */
#ifdef _OPENMP
#define CPU_PAR_KEEP_RUNTIME()                                                                     \
    __attribute__((constructor)) static void cpu_par_keep_runtime(void)                            \
    {                                                                                              \
        Dl_info info;                                                                              \
        if (dladdr((void *)(uintptr_t)omp_get_max_threads, &info) && info.dli_fname)               \
            (void)dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);                 \
    }
#else
#define CPU_PAR_KEEP_RUNTIME()
#endif

#endif

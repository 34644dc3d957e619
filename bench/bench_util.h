/*
 * bench_util.h - timing and memory helpers shared by the benchmarks in bench/
 * (header only; each .c file there is its own program).
 */
#ifndef KILN_BENCH_UTIL_H
#define KILN_BENCH_UTIL_H

#include <sys/resource.h>
#include <time.h>

/* Monotonic wall clock, in seconds. */
static inline double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* CPU time of the calling thread (user + system), in seconds: for work that
 * waits on the kernel's write-back of other processes on a shared machine. */
static inline double thread_cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Peak resident set size of this process so far, in kB (getrusage ru_maxrss). */
static inline long peak_rss_kb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

#endif

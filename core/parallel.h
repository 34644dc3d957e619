/*
 * parallel.h - the kernel's parallel-for: run independent tasks on a pool of
 * threads (GE's multi-threaded subgraph optimisation, seed 4.4).
 *
 * kiln__parallel_run(ctx, n, threads, fn, arg, err) calls fn(arg, i, err_i)
 * once for every i in [0, n), each with an error object of its own, on at
 * most @p threads threads (0 = the session default, see kiln__parallel_threads).
 * It returns when every task has returned.  The result is deterministic:
 * KILN_OK when all tasks succeeded, else the status of the failing task with
 * the LOWEST index, whose error is copied into @p err (so the report does not
 * depend on scheduling).  Tasks with a higher index than a failed one may be
 * skipped.  Tasks must be independent: what they may touch concurrently is
 * documented in docs/threads.md.
 */
#ifndef KILN_CORE_PARALLEL_H
#define KILN_CORE_PARALLEL_H

#include "base.h"

typedef struct kiln_ctx kiln_ctx;

typedef kiln_status (*kiln_task_fn)(void *arg, uint32_t index, kiln_error *err);

kiln_status kiln__parallel_run(kiln_ctx *ctx, uint32_t n, uint32_t threads, kiln_task_fn fn,
                               void *arg, kiln_error *err);

/** The default thread count of @p ctx: option kiln.threads, else min(16, cores). */
uint32_t kiln__parallel_threads(const kiln_ctx *ctx);

#endif /* KILN_CORE_PARALLEL_H */

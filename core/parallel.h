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
 *
 * The workers are started by the call and joined before it returns (the
 * calling thread is worker 0 and runs tasks too); no thread is started when
 * n <= 1 or the thread count is 1, and the tasks then run in index order on
 * the calling thread through the same task scope, so every kernel facility
 * below behaves the same for 1 and for 16 threads.  A call made from inside a
 * task runs its tasks in order on that thread, as part of the outer task.
 *
 * Task scope (for the kernel: the pass manager buffers each task's output with
 * it and merges the buffers in task-index order):
 *   - kiln__task_local(key, ...) gives the running task an object of its own
 *     per key; at the end of the run every task's objects are finished in
 *     task-index order on the calling thread, `keep` false for tasks with a
 *     higher index than the failing one (their effects are discarded);
 *   - kiln__task_wait_turn() blocks until every lower-index task has finished,
 *     which serialises, in index order, the parts of tasks that need a global
 *     order (numbering, callbacks into one shared object);
 *   - kiln__worker_index() names the thread (0 = the calling thread or no run),
 *     for state kept per thread (pass instances).
 */
#ifndef KILN_CORE_PARALLEL_H
#define KILN_CORE_PARALLEL_H

#include "base.h"

typedef struct kiln_ctx kiln_ctx;

typedef kiln_status (*kiln_task_fn)(void *arg, uint32_t index, kiln_error *err);

/** Most threads a run uses (larger kiln.threads values are refused). */
#define KILN_MAX_THREADS 256u

kiln_status kiln__parallel_run(kiln_ctx *ctx, uint32_t n, uint32_t threads, kiln_task_fn fn,
                               void *arg, kiln_error *err);

/**
 * The default thread count of @p ctx: session option kiln.threads (1..256),
 * else (absent, 0 or not a valid count) min(16, online cores).
 * kiln__parallel_run(threads = 0) refuses an invalid kiln.threads value with
 * KILN_ERR_INVALID naming the option.
 */
uint32_t kiln__parallel_threads(const kiln_ctx *ctx);

/** Called when the run ends, per task in index order (see above). */
typedef void (*kiln_task_finish_fn)(void *key, void *obj, uint32_t index, bool keep);

/**
 * The running task's object for @p key, made with create(key) on first use in
 * this task; NULL outside a task (or when create returns NULL).
 */
void *kiln__task_local(void *key, void *(*create)(void *key), kiln_task_finish_fn finish);
/** True inside a kiln__parallel_run task; *index receives its index. */
bool kiln__task_current(uint32_t *index);
/**
 * Inside a task: wait until every task with a lower index has finished (or
 * the run failed at a lower index: then returns false at once).  Outside a
 * task: returns true.
 */
bool kiln__task_wait_turn(void);
/** The calling thread's worker number: 0 outside runs and on the calling thread. */
uint32_t kiln__worker_index(void);

#endif /* KILN_CORE_PARALLEL_H */

/*
 * parallel.c - kiln__parallel_run (parallel.h).
 *
 * This first implementation runs the tasks in index order on the calling
 * thread; the thread pool replaces it without changing the contract.
 */
#include "parallel.h"

#include <stdlib.h>

kiln_status kiln__parallel_run(kiln_ctx *ctx, uint32_t n, uint32_t threads, kiln_task_fn fn,
                               void *arg, kiln_error *err)
{
    (void)ctx;
    (void)threads;
    if (!fn)
        return kiln_errorf(err, KILN_ERR_INVALID, "kiln__parallel_run: no task function");
    for (uint32_t i = 0; i < n; i++) {
        kiln_status st = fn(arg, i, err);
        if (st != KILN_OK)
            return st;
    }
    return KILN_OK;
}

uint32_t kiln__parallel_threads(const kiln_ctx *ctx)
{
    (void)ctx;
    return 1;
}

/*
 * runprof.h - the run profile's outputs (runprof.c): the Chrome trace of
 * `kiln run --trace` and the report's "run" section.
 */
#ifndef KILN_RUNPROF_H
#define KILN_RUNPROF_H

#include <kiln/kiln.h>
#include <jansson.h>

/**
 * Write @p p as a Chrome trace-event JSON array to @p path, atomically: one
 * thread row per stream, a complete event per task (args: op, engine, graph,
 * run, depth), a flow start/finish pair per event.  Errors: I/O, memory.
 * Complexity: O(tasks + flows).
 */
kiln_status kiln__trace_write(const kiln_run_profile *p, const char *runtime, const char *path,
                              kiln_error *err);
/**
 * The report's "run" object: runs, streams, per-op and per-node count and
 * total_ms, span_ms (first root task start to last root task end over all
 * runs), memory per type (arena, own, peak).  Complexity: O(tasks).
 */
json_t *kiln__run_report(const kiln_run_profile *p, const char *runtime);

#endif /* KILN_RUNPROF_H */

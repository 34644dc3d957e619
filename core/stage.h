/*
 * stage.h - the stage driver: runs the pipeline's stages in order, fires tuner
 * hooks at GE's build steps and can stop at one, serialising the paused state
 * so that a later invocation resumes exactly where this one stopped.
 *
 * Build steps (GE tuning_utils.h) map onto stage boundaries:
 *   before_ub_match  before optimize_subgraph
 *   after_ub_match   after  optimize_subgraph
 *   after_build      after  build
 * Only core/ and the CLI include this header.
 */
#ifndef KILN_CORE_STAGE_H
#define KILN_CORE_STAGE_H

#include "pipeline.h"

typedef struct kiln_stage_run {
    const char *stop_step;   /* build step to stop at (tuning mode), NULL = run to the end */
    kiln_stage_id first;     /* first stage to run (resume) */
    const char *tuner;       /* extra tuner component (--tuner), NULL = manifest's only */
    /* out */
    const char *paused_step; /* the step the run stopped at, NULL when it ran to the end */
    kiln_stage_id next;      /* first stage still to run when paused */
    void *report;            /* passmgr statistics for --report (owned by the driver) */
} kiln_stage_run;

/**
 * Run stages [run->first, end) of @p p over @p root.  Returns KILN_PAUSED when
 * it stopped at run->stop_step (run->paused_step / run->next say where).
 */
kiln_status kiln_stage_run_pipeline(kiln_ctx *ctx, kiln_pipeline *p, kiln_graph *root,
                                    kiln_stage_run *run, kiln_error *err);
/** Write a report (JSON) of the last run: passes, times, node deltas, explanations. */
kiln_status kiln_stage_write_report(const kiln_stage_run *run, const kiln_graph *root,
                                    const char *path, kiln_error *err);
void kiln_stage_run_fini(kiln_stage_run *run);
/** Stage a build step stops before (before_ub_match) or after; false if unknown. */
bool kiln_build_step_lookup(const char *step, kiln_stage_id *stage, bool *after);

/**
 * Paused state: {"kiln_paused_state": 1, "step", "next_stage", "manifest",
 * "session_options", "graph": <graph JSON>}.  Written atomically.
 */
kiln_status kiln_paused_state_write(const char *path, const kiln_graph *root, const char *step,
                                    kiln_stage_id next, const char *manifest, const kiln_ctx *ctx,
                                    kiln_error *err);
/** Read a paused state: the graph, the stage to resume at and the manifest path (malloc'd). */
kiln_status kiln_paused_state_read(kiln_ctx *ctx, const char *path, kiln_graph **root,
                                   kiln_stage_id *next, char **manifest, kiln_error *err);

#endif

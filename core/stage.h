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

/* The model cache's part of a report, "model_cache" (docs/model_cache.md). */
typedef struct kiln_cache_report {
    const char *status;      /* "hit", "miss", "disabled", "error"; NULL = "disabled" */
    const char *key, *entry; /* NULL = none */
    double ms;               /* time spent in the cache (key, lock, lookup, copy) */
} kiln_cache_report;

typedef struct kiln_stage_run {
    const char *stop_step;   /* build step to stop at (tuning mode), NULL = run to the end */
    kiln_stage_id first;     /* first stage to run (resume) */
    const char *tuner;       /* extra tuner component (--tuner), NULL = manifest's only */
    int64_t bisect_count;    /* in: optional executions already numbered (resume);
                              * out: the count reached (--bisect-limit) */
    /* out */
    const char *paused_step; /* the step the run stopped at, NULL when it ran to the end */
    kiln_stage_id next;      /* first stage still to run when paused */
    void *report;            /* passmgr statistics for --report (owned by the driver) */
    const kiln_cache_report *cache; /* in, for --report: the model cache, NULL = disabled */
    void *run_json; /* in, for --report: the "run" section (a json_t, borrowed), NULL = null */
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

/** Whether a run resuming at stage @p first still reaches build step @p step. */
bool kiln_build_step_reachable(const char *step, kiln_stage_id first);

/* ---- paused state (docs/tuning.md) ------------------------------------------ */

#define KILN_PAUSED_STATE_VERSION 2 /* the "kiln_paused_state" value this kiln reads */

/*
 * What the command line added to a build: with the manifest files and the
 * plugin files it is everything that decides the result.  Strings are
 * borrowed.
 */
typedef struct kiln_build_inputs {
    const char *const *selectors; /* --enable-pass / --disable-pass patterns, in order */
    const bool *selector_enable;  /* true: --enable-pass */
    uint32_t nselectors;
    const char *const *pass_opts; /* --pass-opt PASS.KEY=VALUE, in order */
    uint32_t npass_opts;
    const char *const *options;   /* --option KEY=VALUE, in order */
    uint32_t noptions;
    const char *passes;           /* --passes (kiln opt) or NULL */
    const char *tuner;            /* --tuner or NULL */
    const char *build_mode;       /* --build-mode or NULL (normal) */
    const char *build_step;       /* --build-step or NULL (a manifest breakpoint stopped it) */
    bool has_bisect;              /* --bisect-limit given */
    int64_t bisect_limit;
} kiln_build_inputs;

/**
 * Write the paused state of @p run (stopped: run->paused_step set) atomically
 * to @p path: format version, the step and the next stage, @p in, what the
 * manifest resolved to (pipeline in the textual form, session options, tuners,
 * breakpoints, bisect limit and count), the real path and SHA-256 of every
 * manifest of @p p's chain and every plugin file loaded in @p ctx, and
 * @p root as a graph JSON object under "graph".
 */
kiln_status kiln_paused_state_write(const char *path, const kiln_ctx *ctx, const kiln_pipeline *p,
                                    const kiln_build_inputs *in, const kiln_stage_run *run,
                                    const kiln_graph *root, kiln_error *err);

/* A paused state read back. */
typedef struct kiln_paused_state {
    kiln_build_inputs in; /* the paused build's command line (strings owned by the state) */
    const char *manifest; /* real path of the manifest it loaded */
    const char *step;     /* the build step it stopped at */
    kiln_stage_id next;   /* first stage still to run */
    int64_t bisect_count;
    kiln_graph *graph;    /* the graph; whoever takes it sets this to NULL */
    void *priv;
} kiln_paused_state;

/**
 * Read the paused state at @p path into @p s (zeroed first).  Refuses, with an
 * error naming @p path and the JSON path or file at fault: malformed JSON, a
 * format version other than KILN_PAUSED_STATE_VERSION (KILN_ERR_VERSION),
 * missing, unknown or mistyped keys, and a manifest or plugin file whose
 * SHA-256 is no longer the recorded one (both digests in the message).  The
 * files are checked before anything is loaded, so a changed plugin is never
 * opened.  Release @p s with kiln_paused_state_fini, also on failure.
 */
kiln_status kiln_paused_state_read(kiln_ctx *ctx, const char *path, kiln_paused_state *s,
                                   kiln_error *err);

/**
 * After the manifest was loaded again with the state's command line: check
 * that it resolved to the same manifest chain, the same plugin files, the same
 * pipeline, session options, tuners, breakpoints and bisect limit as in the
 * paused build (KILN_ERR_INVALID naming what differs).
 */
kiln_status kiln_paused_state_check(const kiln_paused_state *s, const kiln_ctx *ctx,
                                    const kiln_pipeline *p, kiln_error *err);

void kiln_paused_state_fini(kiln_paused_state *s);

/**
 * The report's "fusions" section (a json_t *, new reference): "passes" maps
 * each fusion pass to its "matched" / "effected" counters (from @p pc, which
 * may be NULL), "nodes" lists every node of @p root and its subgraphs that
 * ReportFuse recorded: graph, node, op, passes (GE pass_name) and its
 * sources (names and types of the original nodes).  O(nodes).
 */
void *kiln__fusions_report(const kiln_graph *root, const kiln_pass_ctx *pc);

#endif

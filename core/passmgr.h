/*
 * passmgr.h - the pass manager: runs one stage's pass list over a root graph
 * with GE PassManager semantics (GE_SEMANTICS §1.4), node-pass groups through
 * GEPass, and the instrumentation of kiln_instrumentation (time-passes,
 * print-after/dump-dir, verify-each, bisect-limit), instrument components
 * and crash attribution.
 *
 * Lifetime: one kiln_passmgr per pipeline run (the stage driver creates it,
 * runs each stage through kiln__passmgr_run_stage and destroys it at the
 * end).  The manager owns the pass *instances*: a kiln_pass_inst is turned
 * into an instance (desc.create) lazily, the first time it is about to run,
 * and every instance is destroyed (desc.destroy) by kiln__passmgr_destroy.
 * It also owns the pass context (stats, explanations) and the per-instance
 * records the report writer reads.  The kiln_pass_inst arrays are borrowed
 * and must outlive the manager.  Only core/ and the CLI include this header.
 */
#ifndef KILN_CORE_PASSMGR_H
#define KILN_CORE_PASSMGR_H

#include "gepass.h"
#include "pipeline.h"

/** What one pass instance did during the run (for --time-passes / --report). */
typedef struct kiln_pass_record {
    const kiln_pass_inst *pi; /* borrowed from the pipeline */
    const char *name;         /* component name (borrowed) */
    const char *plugin;       /* plugin name or NULL (borrowed) */
    char *stage;              /* stage it ran in (owned) */
    void *inst;               /* instance from desc.create (NULL until created / when none) */
    bool created;
    uint64_t runs;         /* executions: one per graph-pass run, one per GEPass group run */
    uint64_t calls;        /* calls into the pass: run_graph per graph, run_node per node */
    uint64_t wall_ns;      /* wall time inside the pass (node passes: run_node only) */
    int64_t nodes_before;  /* live nodes (root + subgraphs) before its first execution */
    int64_t nodes_after;   /* ... after its last execution */
    int64_t nodes_added;   /* sum of positive live-count deltas over executions */
    int64_t nodes_removed; /* sum of negative deltas, as a positive number */
    uint32_t changed;      /* executions that reported CHANGED or mutated the graph */
    uint32_t skipped;      /* executions skipped by the bisect limit (a pass disabled by
                            * ge.disableOptimizations never gets a record) */
    kiln_pass_perf perf;   /* node passes: filled by GEPass */
} kiln_pass_record;
/* Node passes of one GEPass group share the group's live-node counts. */

typedef struct kiln_passmgr kiln_passmgr;

/**
 * Runs a fusion pass instance over @p g (kiln__fusion_run_pass unless
 * another runner is installed with kiln__passmgr_set_fusion_runner).
 * Sets *changed; returns KILN_OK or an error recorded in @p err.
 */
typedef kiln_status (*kiln_fusion_runner)(void *user, kiln_pass_ctx *pc, const kiln_component *comp,
                                          void *inst, kiln_graph *g, bool *changed,
                                          kiln_error *err);

/**
 * Create a manager for @p ctx with instrumentation @p instr (copied; the
 * strings and the log FILE are borrowed; NULL = no instrumentation, log on
 * stderr).  Compiles the print_after regex (ERR_INVALID naming the pattern
 * when it does not compile).  *out receives the manager.
 */
kiln_status kiln__passmgr_create(kiln_ctx *ctx, const kiln_instrumentation *instr,
                                 kiln_passmgr **out, kiln_error *err);
/**
 * End of the run: with instr.time_passes, print the timing table to the log
 * (kiln__passmgr_print_timing); then destroy every pass and instrument
 * instance, the records, the pass context and the manager.
 */
void kiln__passmgr_destroy(kiln_passmgr *pm);

/**
 * Run @p passes (one stage, in order) over @p root:
 *   - disabled instances (enabled = false) are skipped, as are passes
 *     disabled by ge.disableOptimizations (name suffix after the last ':');
 *   - a graph pass runs on the root, then on every subgraph of the root
 *     (kiln_graph_all_subgraph, all levels) unless KILN_PASS_NO_SUBGRAPHS;
 *     CHANGED and NOT_CHANGED continue, FAILED stops the stage;
 *   - a maximal run of consecutive node passes is one GEPass group;
 *   - fusion passes go to the installed fusion runner;
 *   - after each pass: kiln_graph_oom -> KILN_ERR_NOMEM, verify-each,
 *     print-after dumps, instrument hooks.
 * Errors name the pass: frames "pass <name>" and "stage <stage>".
 * Returns KILN_OK (GE returns SUCCESS even when nothing changed).
 *
 * May be called from kiln__parallel_run tasks at once with one manager, on
 * graphs of distinct roots: each task then runs with pass instances, a pass
 * context, records and a log buffer of its own, merged into the manager in
 * task-index order when the parallel run ends, so everything the manager
 * produces is the same for any thread count (docs/threads.md).  With a bisect
 * limit, --dump-dir or instrument components the tasks take turns in index
 * order.  The fusion runner is then called from several threads.
 */
kiln_status kiln__passmgr_run_stage(kiln_passmgr *pm, const char *stage,
                                    const kiln_pass_inst *passes, uint32_t count, kiln_graph *root,
                                    kiln_error *err);

/**
 * Call every instrument's before_stage (in registration order) or after_stage
 * (reverse order) for @p stage; the stage driver brackets each stage with it.
 */
void kiln__passmgr_stage_hook(kiln_passmgr *pm, const char *stage, const kiln_graph *g,
                              bool after);

/** The kernel's fusion executor (fusion_exec.c), installed by default. */
kiln_status kiln__fusion_run_pass(void *user, kiln_pass_ctx *pc, const kiln_component *comp,
                                  void *inst, kiln_graph *g, bool *changed, kiln_error *err);

/** Install the fusion executor (NULL to remove). */
void kiln__passmgr_set_fusion_runner(kiln_passmgr *pm, kiln_fusion_runner fn, void *user);

/** The pass context (stats, explanations: see passctx.h).  Inside a
 * kiln__parallel_run task: the task's own (merged at the end of the run). */
kiln_pass_ctx *kiln__passmgr_ctx(kiln_passmgr *pm);
/** Per-instance records, in first-run order. */
uint32_t kiln__passmgr_record_count(const kiln_passmgr *pm);
const kiln_pass_record *kiln__passmgr_record(const kiln_passmgr *pm, uint32_t i);
/**
 * The bisect counter (optional pass executions numbered so far, --bisect-limit).
 * A resumed tuning build sets it to the count its paused run reached, so the
 * numbering goes on as in an uninterrupted build.
 */
int64_t kiln__passmgr_bisect_count(const kiln_passmgr *pm);
void kiln__passmgr_set_bisect_count(kiln_passmgr *pm, int64_t count);
/** Total wall time spent in passes so far (ns). */
uint64_t kiln__passmgr_total_ns(const kiln_passmgr *pm);

/**
 * Print the --time-passes table to @p out (the instrumentation log when NULL;
 * kiln__passmgr_destroy does this by itself when time_passes is set):
 * one row per pass instance that ran (pass, stage, calls, wall ms, % of total,
 * nodes before, nodes after) and a total row.
 */
void kiln__passmgr_print_timing(const kiln_passmgr *pm, FILE *out);

#endif /* KILN_CORE_PASSMGR_H */

/*
 * gepass.h - GEPass: GE's node-pass re-traversal driver (GE_SEMANTICS.md
 * §1.1-1.3).  A group of node passes runs on every node of a root graph and
 * its subgraphs in dependency order; passes steer the walk with the
 * kiln_pass_* requests of kiln_pass.h.  The pass manager (passmgr.c) forms
 * one group from each maximal run of consecutive node passes of a stage.
 * Only core/ includes this header.
 */
#ifndef KILN_CORE_GEPASS_H
#define KILN_CORE_GEPASS_H

#include "passctx.h"

/** GE's nesting limit: root depth 1, +1 per subgraph level. */
#define KILN_GEPASS_MAX_DEPTH 25
/** Nodes with more in-nodes than this are deferred to the end of a drain. */
#define KILN_GEPASS_MAX_ONE_IN_NODES 1000
/** A walk stops (with a warning, not an error) after this many visits per direct node. */
#define KILN_GEPASS_MAX_PASS_MULTIPLE 10

/** The clock pass times are recorded in (passmgr.c): monotonic, or the
 * process's CPU time with KILN_PASS_CLOCK=cpu. */
uint64_t kiln__pass_clock_ns(void);

/** GE BaseNodePass::Perf: calls into the pass and wall time spent in them.
 * In a GEPass run, wall_ns gets the pass's share of the run's time: the run
 * is timed as a whole with the pass clock, and each call with a cheap counter
 * (the time-stamp counter on x86), whose counts split the run's time (the
 * vDSO clock around every call cost more than many passes' work on a node). */
typedef struct kiln_pass_perf {
    uint64_t calls;
    uint64_t wall_ns;
} kiln_pass_perf;

/** One entry of GE's NamesToPass: the order of the array is the order the
 * passes run on each node. */
typedef struct kiln_gepass_item {
    const kiln_component *comp; /* a node pass (KILN_PASS_KIND_NODE); NULL is an error */
    void *inst;                 /* the instance from desc.create (may be NULL) */
    kiln_pass_perf *perf;       /* optional: run_node calls/time accumulate here */
} kiln_gepass_item;

/**
 * Run the node passes @p items (in this order on each node) over @p root
 * and, recursively, over the subgraphs of every node (GE GEPass::Run with
 * with_filter = true).  Items whose descriptor has KILN_PASS_AFTER_GRAPH
 * also get on_finish_graph on the root each time its queue drains with
 * nothing suspended (GE AddPassAfterGraphOptimized).
 *
 * @p pc supplies the context (session options: ge.disableOptimizations),
 * the stage name, the log and receives the requests; pc->comp is set around
 * every call into a pass.  Every call into a pass is bracketed by
 * kiln__activity_enter/leave for crash attribution.
 *
 * Returns:
 *   KILN_OK            done, also when every pass was filtered out and when
 *                      the 10 x node-count visit limit stopped a walk (the
 *                      latter prints a warning to the log);
 *   KILN_ERR_INTERNAL  @p root NULL, @p count 0, a NULL item, or suspended
 *                      nodes leaked with nobody resuming them;
 *   KILN_ERR_PARAM     subgraphs nested deeper than KILN_GEPASS_MAX_DEPTH;
 *   KILN_ERR_NOMEM     out of memory (state arrays or requests);
 *   any status a pass returned (the walk stops at the first failure; the
 *   error gets frames "node <name>" and "pass <name>").
 * Errors are also recorded in @p err (first error wins).
 */
kiln_status kiln__gepass_run(kiln_pass_ctx *pc, kiln_graph *root, const kiln_gepass_item *items,
                             uint32_t count, kiln_error *err);

#endif /* KILN_CORE_GEPASS_H */

/*
 * analysis_cycle.h - the incremental cycle detector behind CanFuse (GE
 * GraphFuseInspectorUtils::CanFuse / FusionUtils::WillCauseCycleIfFuse) and
 * kiln_fusion_replace.  Only core/ includes this header.
 *
 * The analysis keeps an order label per node (a topological numbering with
 * gaps, uint64) and a doubly linked list of the live nodes in label order
 * (Dietz-Sleator order maintenance: a node can be inserted after another in
 * amortised O(1) relabelling).  Invariant: every data or control edge u -> v
 * has label(u) < label(v), and labels are unique.
 *
 * Query "would contracting set S create a cycle?": with hi = max label(S), a
 * path that leaves S and re-enters it only passes nodes whose labels are
 * below hi, so a search forward from S's external successors that never
 * enters a node labelled >= hi decides it.  Cost: the nodes and edges
 * reachable from S inside S's label window, not the graph.
 *
 * Update (Pearce-Kelly, as TensorFlow/XLA GraphCycles contracts edges): when
 * kiln_fusion_replace turns S into new nodes N, F = nodes reachable from S
 * with label < hi and B = nodes reaching S with label > lo (lo = min label(S))
 * are found before the edit (kiln__cycles_plan); after it
 * (kiln__cycles_commit) the labels of B, S and F are pooled and dealt out in
 * order to B (old order), then N (topological order), then F (old order).
 * Extra new nodes (|N| > |S|) are inserted after the last one in the list.
 * The analysis then stays valid without a rebuild; any other structural edit
 * makes it stale, and the next query rebuilds it in O(n + e).
 */
#ifndef KILN_CORE_ANALYSIS_CYCLE_H
#define KILN_CORE_ANALYSIS_CYCLE_H

#include "analysis.h"

struct kiln_cycles {
    uint64_t at;        /* valid when at == g->struct_mutation + 1 */
    uint32_t cap;       /* entries of the per-node arrays (>= node_limit when valid) */
    uint64_t *label;    /* order label; 0 = not in the order */
    kiln_node_id *prev; /* order list, label order */
    kiln_node_id *next;
    kiln_node_id head;
    uint32_t *mark; /* generation marks of the searches */
    uint32_t gen;
    kiln_node_id *stack; /* search stack and the S node each entry left from */
    kiln_node_id *origin;
    uint32_t stack_cap;
    /* statistics (tests, bench) */
    uint64_t builds, updates, relabels, visited;
};

/** A pending update computed before kiln_fusion_replace edits the graph. */
typedef struct kiln_cycle_plan {
    bool ok;            /* false: the analysis was stale; commit only leaves it stale */
    kiln_node_id *set;  /* S, sorted by label */
    kiln_node_id *back; /* B */
    kiln_node_id *fwd;  /* F */
    uint32_t nset, nback, nfwd;
} kiln_cycle_plan;

/** Free the analysis (graph destruction). */
void kiln__cycles_free(struct kiln_cycles *c);
/**
 * Would contracting the @p n live nodes @p s of @p g into one create a cycle?
 * On true, *exit_from is a node of S a path leaves from and *enter_at the node
 * of S it re-enters.  Builds the analysis when stale (O(n + e)); if the graph
 * has a cycle already, or memory runs out, falls back to an uncached search.
 */
bool kiln__cycles_would_form(kiln_graph *g, const kiln_node_id *s, uint32_t n,
                             kiln_node_id *exit_from, kiln_node_id *enter_at);
/** Compute B and F for contracting @p s (the analysis must be valid, which a
 * preceding kiln__cycles_would_form guarantees unless memory ran out). */
void kiln__cycles_plan(kiln_graph *g, const kiln_node_id *s, uint32_t n, kiln_cycle_plan *p);
/**
 * After the edit: S is gone, @p added (in topological order among
 * themselves) took its place.  Relabels B, N, F and marks the analysis valid
 * at the graph's current counter; when the plan was not ok or memory runs
 * out, the analysis is left stale (rebuilt by the next query).
 */
void kiln__cycles_commit(kiln_graph *g, kiln_cycle_plan *p, const kiln_node_id *added, uint32_t k);
void kiln__cycles_plan_free(kiln_cycle_plan *p);
/** The analysis of @p g if built and valid, else NULL (tests, bench). */
const struct kiln_cycles *kiln__cycles_peek(const kiln_graph *g);
/** Check the invariant over every edge (tests): true when it holds. */
bool kiln__cycles_check(const kiln_graph *g);

#endif

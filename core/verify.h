/*
 * verify.h - the IR verifier: checks every structural invariant of a graph
 * (see verify.c for the list).  Run by --verify-each after every pass, by the
 * JSON reader after loading, and at the end of every mutating test.
 * Only core/ and tests include this header.
 */
#ifndef KILN_CORE_VERIFY_H
#define KILN_CORE_VERIFY_H

#include "base.h"

/**
 * Verify @p g and every subgraph below it (for a root: all subgraphs).  Checks
 * edge symmetry, control-edge symmetry, no references to dead nodes, acyclicity
 * over data + control edges, the name index, subgraph parent links and depth,
 * subgraph Data/NetOutput rules and `_parent_node_index` ranges.  Stops at the
 * first violation: KILN_ERR_VERIFY with a message
 *   graph "<g>": node "<n>": <rule>: <detail>
 * O(nodes + edges) time, O(id_limit) temporary memory; no recursion, so it
 * handles graphs of millions of nodes.  Does not modify the graph.
 */
KILN_API kiln_status kiln_graph_verify(const kiln_graph *g, kiln_error *err);

/** Like kiln_graph_verify, for @p g alone (its subgraphs are not visited). */
KILN_API kiln_status kiln_graph_verify_one(const kiln_graph *g, kiln_error *err);

/**
 * The [memory plan] rule of --verify-each: when root @p g carries a memory
 * plan (`_kiln_memory_planner`, written by MemoryAssigner), check it with
 * kiln_memory_plan_verify (memgraph.c).  KILN_OK when there is no plan.
 * O(anchors + n log n).  Not part of kiln_graph_verify: the JSON reader does
 * not check plans.
 */
kiln_status kiln__graph_verify_plan(kiln_graph *g, kiln_error *err);

#endif /* KILN_CORE_VERIFY_H */

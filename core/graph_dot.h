/*
 * graph_dot.h - write a graph as Graphviz DOT (for `kiln convert x.dot`,
 * `--emit dot`, dumps after passes).  Only core/, the CLI and tests include
 * this header.
 */
#ifndef KILN_CORE_GRAPH_DOT_H
#define KILN_CORE_GRAPH_DOT_H

#include "base.h"

/**
 * Write @p g and its subgraphs as one `digraph` to @p f.  Each node is a box
 * labelled "name\ntype"; data edges are solid, labelled "o→i" (producer
 * output → consumer input); control edges are dashed; every subgraph is a
 * `subgraph cluster_<k>` labelled "<role>: <name>" nested inside the cluster
 * of its parent graph, with a dotted edge from the parent node to the
 * cluster.  Output is deterministic (id order).  Errors: KILN_ERR_IO.
 * O(nodes + edges).
 */
KILN_API kiln_status kiln_graph_write_dot(const kiln_graph *g, FILE *f, kiln_error *err);

/** kiln_graph_write_dot to @p path, atomically (kiln_file_write_atomic). */
KILN_API kiln_status kiln_graph_write_dot_file(const kiln_graph *g, const char *path,
                                               kiln_error *err);

#endif /* KILN_CORE_GRAPH_DOT_H */

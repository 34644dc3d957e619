/*
 * analysis.h - cached analyses over a graph: topological order, reachability
 * and the memory symbol table.  Each cache records the graph's mutation
 * counter it was built at and is rebuilt when stale.  Only core/ includes
 * this header.
 */
#ifndef KILN_CORE_ANALYSIS_H
#define KILN_CORE_ANALYSIS_H

#include "graph_int.h"

/** Free every cached analysis of @p g (called by graph destruction). */
void kiln__analyses_free(kiln_graph *g);

#endif

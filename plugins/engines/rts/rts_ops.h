/*
 * rts_ops.h - the rts engine (rts_ops.c): its op table is cpu_ops_rts[]
 * (cpu_engine.h); rts_task_fill gives its nodes their task kinds;
 * rts_optimize_subgraph (rts_opt.c) is its optimize_subgraph.
 */
#ifndef KILN_RTS_OPS_H
#define KILN_RTS_OPS_H

#include "basic_ops.h"

/** Kind and ids of the task of rts node @p n (copy, event, stream control). */
void rts_task_fill(const kiln_graph *g, kiln_node_id n, kiln_task_desc *task);

/** optimize_subgraph: back-to-back MemcpyAsync copies of a partition merged. */
kiln_status rts_optimize_subgraph(void *inst, kiln_pass_ctx *ctx, kiln_graph *g);
/** Its optimize_subgraph_wanted: false when no copy of a partition reads a copy of it. */
bool rts_optimize_subgraph_wanted(void *inst, kiln_pass_ctx *ctx, const kiln_graph *g,
                                  uint32_t rank, const kiln_node_id *nodes, uint32_t count);

#endif

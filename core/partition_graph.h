/* partition_graph.h - the optimize_subgraph stage over partitions (partition_graph.c). */
#ifndef KILN_CORE_PARTITION_GRAPH_H
#define KILN_CORE_PARTITION_GRAPH_H

#include "base.h"
#include "passmgr.h"
#include "pipeline.h"

/**
 * Run stage @p stg (optimize_subgraph) partition by partition when @p root or
 * its subgraphs carry partitions: each engine partition split into a graph of
 * its own (PlaceHolder/End at the cuts), its engine's optimize_subgraph hook
 * and the stage's passes run on it as one kiln__parallel_run task, and the
 * attribute and descriptor edits merged back.  *@p handled is false (and
 * nothing is done) when no graph is partitioned.
 */
kiln_status kiln__optimize_subgraph_stage(kiln_ctx *ctx, kiln_passmgr *pm, const kiln_stage *stg,
                                          kiln_graph *root, bool *handled, kiln_error *err);

/**
 * The name of partition @p rank of a graph whose _kiln_partition_seq is @p seq and
 * whose rank has k = @p k (_kiln_partition_sub_graphs; -1: the input-nodes
 * partition) into @p buf: kiln_graph_partition_name's text, not interned.
 */
void kiln__partition_name_format(char *buf, size_t size, int64_t seq, uint32_t rank, int64_t k);

#endif

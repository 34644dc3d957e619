/*
 * dynshape.h - internal interface of libkiln_dynamic_shape.so: the
 * DynamicShapePartitioner and StagePartitioner passes and the frame builder
 * they share (docs/dynamic_shape.md).
 */
#ifndef KILN_DYNSHAPE_H
#define KILN_DYNSHAPE_H

#include <kiln/kiln.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const kiln_pass_desc kiln_dynamic_shape_partition_pass;
extern const kiln_pass_desc kiln_stage_partition_pass;

/* Attribute names (GE spelling). */
#define DS_ATTR_IS_UNKNOWN "_is_unknown_shape"
#define DS_ATTR_FORCE_UNKNOWN "_force_unknown_shape"
#define DS_ATTR_OWNER_UNKNOWN "OwnerGraphIsUnknown"
#define DS_ATTR_DISCONTIGUOUS "_memory_discontiguous_allocation"
#define DS_ATTR_PARTITIONED "_dynamic_shape_partitioned"
#define DS_ATTR_GRAPH_UNKNOWN "_graph_unknown_flag"
#define DS_ATTR_PARENT_INDEX "_parent_node_index"
#define DS_ATTR_STAGE_LEVEL "_stage_level"

/** The role of a PartitionedCall's one subgraph. */
#define DS_CALL_ROLE "f"

/**
 * Wrap the @p n nodes @p nodes of root-or-sub graph @p g (given in the order
 * they are to appear in the subgraph, normally topological) into one
 * PartitionedCall node @p call_name owning the subgraph @p sub_name:
 *   - every producer output outside the set that feeds the set is an input
 *     of the call and a Data node "<sub>_Data_<i>" (`_parent_node_index` = i)
 *     in the subgraph, in first-use order: one per distinct producer output
 *     when @p share_inputs, else one per boundary edge (GE's StagePartitioner);
 *   - every output of the set with a consumer outside it is an output of the
 *     call, fed by the subgraph's NetOutput "<sub>_NetOutput" (input j has
 *     `_parent_node_index` = j on its descriptor);
 *   - control edges crossing the boundary move to the call node; the moved
 *     nodes keep their names, attributes, descriptors and subgraphs (a moved
 *     subgraph is copied; its name becomes "<name>_<sub>" when taken).
 * @p mark is scratch of @p mark_len entries (at least one past every id in
 * @p nodes), all zero on entry and on return.  On success *call receives the new node.
 * Complexity: O(nodes + edges of the set and its boundary).
 */
kiln_status ds_build_call(kiln_graph *g, const kiln_node_id *nodes, uint32_t n,
                          const char *sub_name, const char *call_name, bool share_inputs,
                          uint32_t *mark, uint32_t mark_len, kiln_node_id *call,
                          kiln_graph **sub, kiln_error *err);

/** True when the shape of @p d has an unknown rank or dim. */
bool ds_desc_unknown(const kiln_tensor_desc *d);

/** Set a bool attribute on node @p n. */
kiln_status ds_set_bool(kiln_graph *g, kiln_node_id n, const char *key, bool v);
/** Set a bool attribute on graph @p g. */
kiln_status ds_graph_set_bool(kiln_graph *g, const char *key, bool v);

#endif

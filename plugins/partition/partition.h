/* partition.h - the passes of libkiln_partition.so (docs/partition.md). */
#ifndef KILN_PLUGIN_PARTITION_H
#define KILN_PLUGIN_PARTITION_H

#include <kiln/kiln.h>

#define KP_ATTR_ENGINE "_kiln_engine"
#define KP_ATTR_LX_ENGINE "_lxfusion_engine_name"
#define KP_ATTR_LX_KERNEL "_lxfusion_op_kernel_lib_name"
#define KP_ATTR_STREAM_LABEL "_stream_label"
#define KP_ATTR_USER_STREAM_LABEL "_user_stream_label"
/* GE's DNN_VM_GE_LOCAL: Data, Const, NetOutput, control flow; the runtime runs them itself. */
#define KP_GE_LOCAL "ge_local"
/* GE's ENGINE_DEFAULT_DATA and the engine name of the input-nodes partition. */
#define KP_ENGINE_DEFAULT_DATA "ENGINE_DEFAULT_DATA"
#define KP_INPUT_NODES_ENGINE "inputNodesSubGraph"
/* Graph attributes of composite-then-atomic partitioning (kiln_graph.h). */
#define KP_PART_COMPOSITE_GROUPS KILN_PART_COMPOSITE_GROUPS
#define KP_PART_COMPOSITE_ENGINES KILN_PART_COMPOSITE_ENGINES
/* GE's DNN_VM_HOST_CPU: EnginePlacer writes no _lxfusion attributes on its ops. */
#define KP_HOST_CPU "hostcpu"
/* The engine the partitioner gives a node EnginePlacer left unplaced. */
#define KP_UNPLACED "unplaced"

/** GE's op types of the GE-local engine (no engine table needs to list them). */
bool kp_is_ge_local_op(const char *op);

extern const kiln_pass_desc kp_engine_placer;
extern const kiln_pass_desc kp_engine_partitioner;

#endif

/*
 * mc_passes.h - descriptors of the memory-conflict passes of
 * libkiln_mem_conflict_passes.so and the helpers they share (mc_util.c; the
 * op classes common to all memory-conflict plugins are in mc_common.h).
 *
 * Op-type classes follow GE's OpTypeUtils: Data-like = Data, RefData, AippData;
 * variable = Variable, VariableV2, VarHandleOp; var-like = variable + RefData;
 * const = Const, Constant (narrower than the layout pass's mlc_is_const).
 */
#ifndef KILN_MC_PASSES_H
#define KILN_MC_PASSES_H

#include "../common/mc_common.h"

extern const kiln_pass_desc kiln_mc_hccl_memcpy_pass;
extern const kiln_pass_desc kiln_mc_hccl_continuous_memcpy_pass;
extern const kiln_pass_desc kiln_mc_subgraph_pass;
extern const kiln_pass_desc kiln_mc_inplace_support_check_pass;
extern const kiln_pass_desc kiln_mc_atomic_addr_clean_pass;
extern const kiln_pass_desc kiln_mc_memcpy_addr_async_pass;
extern const kiln_pass_desc kiln_mc_mark_same_addr_pass;
extern const kiln_pass_desc kiln_mc_set_input_output_offset_pass;

/* ---- op-type classes ---- */
bool mc_is_const(const kiln_graph *g, kiln_node_id n);
bool mc_is_if_or_case(const kiln_graph *g, kiln_node_id n);
/** HCCL op (type starts with "Hcom"): kiln's stand-in for GE's ops-kernel isAtomic / IsHcomNode. */
bool mc_is_hcom(const kiln_graph *g, kiln_node_id n);

/* ---- attributes ---- */
bool mc_node_has(const kiln_graph *g, kiln_node_id n, const char *key);
bool mc_desc_bool(const kiln_tensor_desc *d, const char *key);
kiln_status mc_set_node_bool(kiln_graph *g, kiln_node_id n, const char *key, bool v);

/* ---- shapes ---- */
/** Any input or output descriptor of @p n has a -1 dim (GE NodeUtils::IsDynamicShape). */
bool mc_node_dynamic(kiln_graph *g, kiln_node_id n);
/**
 * GE GetGraphUnknownFlag / IsUnknownShapeGraph: graph attr
 * `_dynamic_shape_partitioned` = true, or a direct node is dynamic-shape.
 */
bool mc_graph_unknown(kiln_graph *g);
/** Same dtype, rank and dims. */
bool mc_desc_same_shape(const kiln_tensor_desc *a, const kiln_tensor_desc *b);

/* ---- ref chains ---- */
/**
 * Input that output @p o of @p n refers to (ref_input, reuse_input +
 * reuse_input_index, Reshape out 0 -> in 0), or -1.
 */
int32_t mc_output_ref_input(kiln_graph *g, kiln_node_id n, uint32_t o);

/* ---- edits ---- */
/**
 * Write into @p buf (size @p size) @p base, or base + "_<k>" with the
 * smallest k >= 1 that names no node of @p g.  False when it does not fit.
 */
bool mc_unique_name(const kiln_graph *g, const char *base, char *buf, size_t size);
/**
 * SubgraphPass-style memcpy: an Identity @p name after (src, so) feeding the
 * @p ndst listed consumers (0 = all), with reuse_input=false on its output,
 * no_need_constant_folding=false, _cannot_be_deleted=true and the producer's
 * _batch_label.  Records @p rule with kiln_pass_explain.  Returns the node or 0
 * (error recorded on the pass).
 */
kiln_node_id mc_insert_memcpy_after(kiln_pass_ctx *ctx, kiln_graph *g, kiln_node_id src,
                                    uint32_t so, const kiln_anchor *dsts, uint32_t ndst,
                                    const char *name, const char *rule);
/* ---- HcomBroadcast write-back (GE InsertAssignAfterBroadcastIfNeed) ---- */
/** @p hccl is an HcomBroadcast fed by the var-like output @p var, and no consumer of @p var is an
 * Assign. */
bool mc_broadcast_needs_assign(const kiln_graph *g, kiln_anchor var, kiln_node_id hccl);
/**
 * Wire the new write-back Assign @p a (2 inputs, 1 output): input 0 (ref) <-
 * @p var, input 1 (value) <- (@p hccl, @p in), output descriptor a copy of
 * var's referencing input 0.  Records no error; false when a step fails.
 */
bool mc_wire_write_back(kiln_graph *g, kiln_node_id a, kiln_anchor var, kiln_node_id hccl,
                        uint32_t in);
/**
 * Order @p a by control edges before every data consumer of (@p hccl, @p in)
 * and every control successor of @p hccl.  Records no error; KILN_ERR_NOMEM.
 */
kiln_status mc_order_write_back(kiln_graph *g, kiln_node_id a, kiln_node_id hccl, uint32_t in);

/** Record an out-of-memory / edit failure on the pass; returns KILN_PASS_FAILED. */
kiln_pass_result mc_fail(kiln_pass_ctx *ctx, const char *what, const char *node);

#endif

/*
 * mlc_util.h - graph predicates shared by the memory-layout-conflict pass
 * (plugins/memory_conflict/layout), the conditional checkers
 * (plugins/memory_conflict/checkers) and ProcessInplace
 * (plugins/memory_conflict/inplace): GE's MemLayoutConflictUtil and
 * OpTypeUtils helpers, written against the public kiln API only.
 *
 * mlc_util.c is compiled into each of these plugins (each .so has its own
 * copy; the functions are hidden), so it keeps no state.
 *
 * Conventions: an anchor is a kiln_mem_anchor {graph, node, index,
 * is_output}.  "Ref from input" is GE's IsRefFromInput (see mlc_ref_input).
 */
#ifndef KILN_MLC_UTIL_H
#define KILN_MLC_UTIL_H

#include "../common/mc_common.h"

#define MLC_AA(x) KILN_AA_##x

/* GE runtime memory-type codes that are "special" (MemTypeUtils::IsMemoryTypeSpecial). */
#define MLC_MEM_P2P_DDR 17
#define MLC_MEM_TS 64
#define MLC_MEM_DEFAULT 0

/* ---- op classes (GE OpTypeUtils; the common ones in mc_common.h) -------- */
/** Const, Constant, FileConstant, ConstPlaceHolder (GE IsConst). */
bool mlc_is_const(const kiln_graph *g, kiln_node_id n);
/** Identity, MemcpyAsync, MemcpyAddrAsync: a node that already isolates. */
bool mlc_is_memcpy_like(const kiln_graph *g, kiln_node_id n);
/** NetOutput. */
bool mlc_is_netoutput(const kiln_graph *g, kiln_node_id n);

/* ---- node attributes ----------------------------------------------------- */
/** continuous_input and more than one input (GE IsContinuousInput). */
bool mlc_is_continuous_input(const kiln_graph *g, kiln_node_id n);
bool mlc_is_continuous_output(const kiln_graph *g, kiln_node_id n);
bool mlc_is_nopad_input(const kiln_graph *g, kiln_node_id n);
bool mlc_is_nopad_output(const kiln_graph *g, kiln_node_id n);
/** Memory type of an input/output from _input_memory_type/_output_memory_type (0 = default). */
int64_t mlc_mem_type(const kiln_graph *g, kiln_node_id n, uint32_t index, bool is_output);
bool mlc_mem_type_special(int64_t mt);
/**
 * GE IsAddressRefreshable: false for StreamSwitch / LabelSwitchByIndex, and
 * for an HCOM node that does not support address refresh (HcomBroadcast, or
 * node attr _unsupported_address_refresh = true) while the feature map of its
 * graph is not refreshable (@p fm_refreshable).
 */
bool mlc_addr_refreshable(const kiln_graph *g, kiln_node_id n, bool fm_refreshable);
/** GE IsPhysicalAddressRefreshable: false for StreamSwitch / LabelSwitchByIndex. */
bool mlc_phys_refreshable(const kiln_graph *g, kiln_node_id n);

/* ---- references ---------------------------------------------------------- */
/**
 * GE IsRefFromInput: the input index output @p o of @p n shares memory with,
 * or -1.  Pass-through NetOutput / While / _While / StatelessWhile and
 * subgraph Data (out i -> in i), Merge and Reshape (out 0 -> in 0),
 * ref_input on the output descriptor, reuse_input + reuse_input_index,
 * _no_padding_continuous_output nodes (-> in 0).
 */
int32_t mlc_ref_input(kiln_graph *g, kiln_node_id n, uint32_t o);
/** GE GetRealOutAnchor: follow ref-from-input producers back from output (n, o). */
kiln_anchor mlc_real_out(kiln_graph *g, kiln_node_id n, uint32_t o);

/* ---- anchors ------------------------------------------------------------- */
bool mlc_anchor_eq(const kiln_mem_anchor *x, const kiln_mem_anchor *y);
/** "<node>_in_<i>" / "<node>_out_<i>" (GE NodeIndexIO::ToString); snprintf semantics. */
int mlc_anchor_key(const kiln_mem_anchor *a, char *buf, size_t size);
/** Topological position of the anchor's node in its graph. */
uint32_t mlc_topo(const kiln_mem_anchor *a);

/* ---- query helpers (checkers) -------------------------------------------- */
/** The side of @p q whose type is @p t: &q->a, &q->b, or NULL. */
const kiln_mem_anchor *mlc_side(const kiln_checker_query *q, kiln_anchor_attr t);
/** The other side. */
const kiln_mem_anchor *mlc_other(const kiln_checker_query *q, const kiln_mem_anchor *s);
/** Some output of node @p n of @p g is among @p sym[0..count) (GE IsNodeOutRefFromInput). */
bool mlc_node_out_in_symbol(const kiln_mem_anchor *sym, uint32_t count, const kiln_graph *g,
                            kiln_node_id n);
/**
 * GE AllRealInputsAreTheSameOutAnchor for the NOPADDING_CONTINUOUS_INPUT
 * side of @p q; when true, records "<checker>: all real inputs are one
 * anchor, no conflict" as the reason.
 */
bool mlc_nopad_inputs_one_anchor(const kiln_checker_query *q, kiln_checker_result *r,
                                 const char *checker);
/** GE HasNotSupportPhysicalMemoryRefreshNode. */
bool mlc_phys_problem(const kiln_checker_query *q);
bool mlc_fm_refreshable(const kiln_checker_query *q);
/**
 * GE AssignVarInsertIdentity: the side whose type is not @p var_type is the
 * ref node; each of its in-anchors in the symbol fed by an Assign-like node is
 * isolated.  Returns true when something was isolated ("insert after assign").
 */
bool mlc_assign_rule(const kiln_checker_query *q, kiln_checker_result *r, kiln_anchor_attr var_type,
                     kiln_status *st);
/** Isolate @p a and record @p rule as the reason. */
kiln_status mlc_isolate(kiln_checker_result *r, const kiln_mem_anchor *a, const char *rule);
/** Real (ref-followed) producers of every connected input of @p n, in input order. */
uint32_t mlc_real_in_peers(kiln_graph *g, kiln_node_id n, kiln_anchor *out, uint32_t cap);
/** Direct producers of every connected input of @p n, in input order. */
uint32_t mlc_in_peers(kiln_graph *g, kiln_node_id n, kiln_anchor *out, uint32_t cap);
/** All real inputs of @p n are one out anchor (GE AllRealInputsAreTheSameOutAnchor). */
bool mlc_all_real_inputs_same(kiln_graph *g, kiln_node_id n);
bool mlc_kanchor_eq(kiln_anchor x, kiln_anchor y);

#endif

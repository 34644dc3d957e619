/*
 * symtab.h - the memory symbol table of a root graph: GE's
 * GraphUtils::GetRefMapping (GE_SEMANTICS.md 3.2).  Only core/ (and core
 * tests, benchmarks) include this header.
 *
 * Every data anchor of the root and of all its subgraphs (keys
 * "<node>_in_<i>" / "<node>_out_<i>") belongs to exactly one symbol: a class
 * of anchors that share one piece of memory.  The classes are the unions of
 *   - an out anchor and every in anchor it feeds (an unconnected in anchor is
 *     alone);
 *   - Merge / StreamMerge: all connected inputs and output 0;
 *   - subgraph Data with node attr _parent_node_index k: its outputs (and
 *     inputs, if any) with the parent node's in anchor k;
 *   - subgraph NetOutput input i with the parent node's out anchor j, j = the
 *     input descriptor's _parent_node_index, default i (a While's "cond"
 *     subgraph maps none by default);
 *   - an output that refs an input (GE IsRefFromInput, first rule that
 *     applies): NetOutput / While / _While / StatelessWhile out i <-> in i;
 *     Merge and Reshape out 0 <-> in 0; ref_input k on the output descriptor
 *     (kiln's spelling of GE's "reference" op whose output name equals an
 *     input name); descriptor attrs reuse_input=true + reuse_input_index k;
 *   - nodes with _no_padding_continuous_output=true: every output <-> in 0;
 *   - an output whose descriptor has ref_var_src_var_name = V with V_out_0
 *     (node V looked up in the output's graph, then in the root).
 *
 * Walk order (defines symbol ids and names): graphs root first, then the
 * root's subgraph list in creation order; nodes of a graph in its cached
 * topological order (id order if the graph is cyclic); per node its in
 * anchors in index order, then its out anchors.  Symbol ids are numbered by
 * the first anchor of each class in this order, the symbol's name is that
 * anchor's key, and each symbol's anchors are listed in walk order.  (GE names
 * a merged class after the larger of the two merged symbols; kiln uses the
 * first anchor, which is deterministic and independent of union order.)
 *
 * Layout: anchors are numbered densely through per-graph bases into the
 * graphs' own input-record and output-slot arrays, so a lookup is O(1)
 * (plus O(log #graphs) to find a subgraph); the anchors of each symbol are
 * a contiguous CSR slice.  Build: O(A alpha(A)) for A anchor slots, about
 * 24 bytes per anchor at rest.
 *
 * Caching: the table hangs off the root's analysis cache and is rebuilt when
 * the root or any subgraph changed (g->mutation), so attribute edits count.
 * Pointers are borrowed and valid until the next kiln_symtab_get after an edit.
 */
#ifndef KILN_CORE_SYMTAB_H
#define KILN_CORE_SYMTAB_H

#include "analysis.h"

#define KILN_SYMTAB_NONE UINT32_MAX

typedef struct kiln_symtab kiln_symtab;

/** One anchor of a symbol. */
typedef struct kiln_symtab_anchor {
    uint32_t graph;         /* 0 = root, i + 1 = kiln_graph_all_subgraph(root, i) */
    kiln_node_id node;
    uint32_t index : 31;    /* anchor index */
    uint32_t is_output : 1; /* 1 = out anchor, 0 = in anchor */
} kiln_symtab_anchor;

/**
 * The symbol table of @p g's root, built or rebuilt when stale.
 * @param out receives a borrowed table, valid until the next call after an
 *            edit of the root or any subgraph.
 * Errors: KILN_ERR_NOMEM; KILN_ERR_LIMIT when the anchors do not fit 32 bits.
 */
KILN_API kiln_status kiln_symtab_get(kiln_graph *g, const kiln_symtab **out, kiln_error *err);
/** Number of symbols. */
KILN_API uint32_t kiln_symtab_count(const kiln_symtab *st);
/** Number of anchors over all symbols. */
KILN_API uint32_t kiln_symtab_anchor_total(const kiln_symtab *st);
/**
 * Symbol of an anchor of node @p n in graph @p g (the root or one of its
 * subgraphs); KILN_SYMTAB_NONE for an unknown graph, a dead node or an index
 * out of range.  O(1) for the root, O(log #subgraphs) otherwise.
 */
KILN_API uint32_t kiln_symtab_symbol(const kiln_symtab *st, const kiln_graph *g, kiln_node_id n,
                                     uint32_t index, bool is_output);
/** Anchors of symbol @p sym in walk order (borrowed); *count receives their number. */
KILN_API const kiln_symtab_anchor *kiln_symtab_anchors(const kiln_symtab *st, uint32_t sym,
                                                       uint32_t *count);
/** Graph number @p i of the table (0 = root); NULL when out of range. */
KILN_API kiln_graph *kiln_symtab_graph(const kiln_symtab *st, uint32_t i);
/**
 * Write the key of @p a ("<node>_in_<i>" / "<node>_out_<i>") into @p buf
 * (always NUL-terminated when @p size > 0).  Returns the full key length,
 * as snprintf does.
 */
KILN_API size_t kiln_symtab_anchor_key(const kiln_symtab *st, const kiln_symtab_anchor *a,
                                       char *buf, size_t size);
/** Write the name of symbol @p sym (its first anchor's key); as kiln_symtab_anchor_key. */
KILN_API size_t kiln_symtab_symbol_name(const kiln_symtab *st, uint32_t sym, char *buf,
                                        size_t size);

#endif

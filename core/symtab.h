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
 *     applies): NetOutput / While / _While / StatelessWhile out i <-> in i
 *     (a While from an ONNX Loop, `_onnx_op` "Loop": out 0 <-> in 1 (the
 *     condition), out i <-> in i + 1 for its `_onnx_loop_carried` values,
 *     scan outputs alone);
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
 * the root or any subgraph changed (g->sym_mutation: every edit but a planned
 * size, offset or memory type and attributes of keys the table does not read).
 * Pointers are borrowed and valid until the next kiln_symtab_get after an edit.
 */
#ifndef KILN_CORE_SYMTAB_H
#define KILN_CORE_SYMTAB_H

#include "analysis.h"
#include <kiln/kiln_analysis.h>

#endif

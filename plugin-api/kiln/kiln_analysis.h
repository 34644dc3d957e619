/*
 * kiln_analysis.h - analyses the kernel computes and caches for passes:
 * topological order, reachability (GE's ConnectionMatrix role, without an
 * n x n matrix) and the memory symbol table (GE GraphUtils::GetRefMapping:
 * anchors that share one address, as equivalence classes).
 *
 * Every result is cached on the graph and rebuilt when the graph's mutation
 * counter moved; returned pointers are borrowed until the next edit.
 */
#ifndef KILN_ANALYSIS_H
#define KILN_ANALYSIS_H

#include "kiln_graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- topological order and reachability -------------------------------- */

/**
 * Topological order of the live nodes of @p g over data and control edges
 * (Kahn's algorithm, FIFO seeded in id order: the same order kiln_graph_compact
 * uses).  O(n + e) when rebuilt, O(1) when cached.
 * @param order  receives a borrowed array valid until the next mutation.
 * @param n      receives its length (the live node count).
 * Errors: KILN_ERR_INVALID when the graph has a cycle (the message names a node
 * on the cycle), KILN_ERR_NOMEM.
 */
KILN_API kiln_status kiln_graph_topo_order(kiln_graph *g, const kiln_node_id **order,
                                           uint32_t *n, kiln_error *err);
/** Position of @p n in the topological order; UINT32_MAX for a dead node, a cycle or OOM. */
KILN_API uint32_t kiln_graph_topo_index(kiln_graph *g, kiln_node_id n);
/**
 * True when a path of data and/or control edges leads from @p from to @p to
 * (a node reaches itself, as GE's ConnectionMatrix::IsConnected).  False for
 * dead ids.  Uses the cached index (see analysis_reach.c for the complexity);
 * on a cyclic graph it falls back to a plain search.
 */
KILN_API bool kiln_graph_reachable(kiln_graph *g, kiln_node_id from, kiln_node_id to);
/** reachable(a, b) || reachable(b, a): whether the two nodes are ordered. */
KILN_API bool kiln_graph_ordered(kiln_graph *g, kiln_node_id a, kiln_node_id b);


/* ---- memory symbol table ------------------------------------------------ */

#define KILN_SYMTAB_NONE UINT32_MAX

typedef struct kiln_symtab kiln_symtab;

/** One anchor of a symbol. */
typedef struct kiln_symtab_anchor {
    uint32_t graph;     /* 0 = root, i + 1 = kiln_graph_all_subgraph(root, i) */
    kiln_node_id node;
    uint32_t index;     /* anchor index */
    uint32_t is_output; /* 1 = out anchor, 0 = in anchor */
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


#ifdef __cplusplus
}
#endif
#endif /* KILN_ANALYSIS_H */

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


/* ---- the build schedule: execution order, streams, events -------------- */
/*
 * The schedule every build component and runtime reads (docs/build.md): one
 * global execution order of the root graph's nodes, the stream of each node
 * and the events between streams.  It is stored on the graph, so it survives
 * a model file or JSON round trip:
 *
 *   node attr _kiln_id (JSON `id`)        position in the global order; when
 *                                         some live node lacks it, the order
 *                                         is kiln_graph_topo_order
 *   node attr _kiln_stream_id             stream, 0 .. stream_count-1; -1 or
 *                  (JSON `stream_id`)     absent = no stream (a node with no
 *                                         task: Data, Const, NetOutput, ...).
 *                                         When no node has one (no stream
 *                                         allocation ran), the schedule is
 *                                         sequential: every node on stream 0
 *   node attrs _send_event_ids /          events the node records after it
 *              _recv_event_ids (list_int) runs / waits for before it runs (GE)
 *   root attrs _kiln_stream_num,          counts (absent: derived from the
 *              _kiln_event_num            node attributes)
 *
 * Happens-before is what a multi-stream runtime enforces and nothing more:
 * a before b when a precedes b on one stream, or a chain of stream order and
 * events (a sender's record, a receiver's wait) leads from a to b.  A node
 * with no stream does no work: it counts as finished when all its producers
 * (data and control) are, and a stream-less node without producers is done
 * before everything.  An event id may be reused: a wait pairs with the
 * latest record of that id at an earlier step.  The analysis is cached like
 * the others (mutation counter of the root); O(n x streams) to build, O(1)
 * per query (O(streams) from a stream-less node).
 */

typedef struct kiln_schedule kiln_schedule;

/** One event: recorded by @c sender after it runs, waited for by @c receiver. */
typedef struct kiln_sched_event {
    uint32_t id;
    kiln_node_id sender;
    kiln_node_id receiver;
} kiln_sched_event;

/**
 * The schedule of root graph @p root, built or rebuilt when stale.
 * Errors: KILN_ERR_INVALID when the order is not a topological order of the
 * data and control edges, a wait has no record of its id at an earlier step,
 * an event joins a node without a stream, two nodes share an `_kiln_id`, or
 * a stream id is out of range (the message names the node); KILN_ERR_NOMEM.
 */
KILN_API kiln_status kiln_schedule_get(kiln_graph *root, const kiln_schedule **out,
                                       kiln_error *err);
/** Number of steps (the live node count of the root). */
KILN_API uint32_t kiln_schedule_step_count(const kiln_schedule *s);
/** Node at step @p step; 0 when out of range. */
KILN_API kiln_node_id kiln_schedule_node(const kiln_schedule *s, uint32_t step);
/** Step of node @p n; UINT32_MAX for a dead or unknown node. */
KILN_API uint32_t kiln_schedule_step(const kiln_schedule *s, kiln_node_id n);
/** Number of streams (1 for a sequential schedule, 0 for an empty graph). */
KILN_API uint32_t kiln_schedule_stream_count(const kiln_schedule *s);
/** Stream of node @p n, or -1 when it has none. */
KILN_API int32_t kiln_schedule_stream(const kiln_schedule *s, kiln_node_id n);
/** Steps of stream @p stream in order (borrowed); *count receives their number. */
KILN_API const uint32_t *kiln_schedule_stream_steps(const kiln_schedule *s, uint32_t stream,
                                                    uint32_t *count);
/** Events in id order (borrowed); *count receives their number. */
KILN_API const kiln_sched_event *kiln_schedule_events(const kiln_schedule *s, uint32_t *count);
/** Whether node @p a finishes before node @p b starts on every run (see above). */
KILN_API bool kiln_schedule_happens_before(const kiln_schedule *s, kiln_node_id a,
                                           kiln_node_id b);
/**
 * The latest step on @p stream ordered before step @p step (happens-before),
 * or UINT32_MAX when none (kiln_mem_latest_before_fn).
 */
KILN_API uint32_t kiln_schedule_latest_before(const kiln_schedule *s, uint32_t step,
                                              uint32_t stream);
/**
 * A sound end of life for a buffer whose last readers and writers are the
 * @p n nodes @p uses: the largest step that does not happen after all of
 * them.  A buffer that starts at a later step may share the memory, on any
 * stream.  On one stream it is the largest step of @p uses.
 */
KILN_API uint32_t kiln_schedule_release_step(const kiln_schedule *s, const kiln_node_id *uses,
                                             uint32_t n);
/**
 * Check that every data and control edge of the root between nodes on
 * different streams is ordered by happens-before (an event chain).  KILN_OK,
 * or KILN_ERR_INVALID naming the first unordered edge.
 */
KILN_API kiln_status kiln_schedule_check(kiln_graph *root, const kiln_schedule *s,
                                         kiln_error *err);


#ifdef __cplusplus
}
#endif
#endif /* KILN_ANALYSIS_H */

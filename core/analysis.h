/*
 * analysis.h - cached analyses over a graph: topological order, reachability
 * and the memory symbol table.  Only core/ includes this header.
 *
 * Cache rules
 *   Every graph may carry one struct kiln_analysis_cache (g->analyses),
 *   created on first use.  Each analysis records the counter it was built at:
 *   topological order and reachability use g->struct_mutation (they depend on
 *   nodes and edges only); the symbol table (symtab.c, cached on the root)
 *   uses g->sym_mutation of the root and of every subgraph: every edit but a
 *   descriptor's size, offset or memory type and an attribute whose key is not
 *   one of the seven it reads (ctx.c); the schedule (schedule.c) uses
 *   struct_mutation and sched_mutation, which counts edits of the four
 *   attribute keys it reads (`_kiln_id`, `_kiln_stream_id`, `_send_event_ids`,
 *   `_recv_event_ids`).  So writing a memory plan, weights or tasks keeps
 *   both.  A query compares one counter and rebuilds lazily when stale,
 *   so edits never pay for analyses nobody asks for.
 *
 * Lifetime
 *   Arrays returned by the query functions are borrowed from the cache and
 *   stay valid until the next mutation of the graph (precisely: until the next
 *   query after a mutation, which rebuilds and frees them).
 *
 * Threads
 *   Queries build or update the cache (and reachability writes its visited
 *   stamps), so they count as mutations for the thread rules: one thread at a
 *   time per graph.
 */
#ifndef KILN_CORE_ANALYSIS_H
#define KILN_CORE_ANALYSIS_H

#include "graph_int.h"
#include <kiln/kiln_analysis.h>

struct kiln_symtab; /* symtab.h */

/* Number of random DFS interval labels per node (GRAIL's k). */
#define KILN_REACH_K 2

/* One GRAIL label of a node for one traversal.  post is the node's DFS
 * post-order rank (1-based); low is the smallest rank among everything the
 * node reaches (itself included); tlow is the smallest rank in its DFS-tree
 * subtree, so [tlow, post] are exactly the tree descendants. */
typedef struct kreach_label {
    uint32_t post;
    uint32_t low;
    uint32_t tlow;
} kreach_label;

struct kiln_analysis_cache {
    /* topological order: valid when topo_at == struct_mutation + 1 */
    uint64_t topo_at;
    kiln_node_id *order; /* live nodes in Kahn order, norder entries */
    uint32_t norder;
    uint32_t *tidx;      /* node_limit entries: position in order, UINT32_MAX = dead */

    /* reachability: valid when reach_at == struct_mutation + 1 */
    uint64_t reach_at;
    uint32_t *succ_off;  /* node_limit + 1 entries, CSR over data + control successors */
    kiln_node_id *succ;  /* succ_off[node_limit] entries */
    kreach_label *lab;   /* KILN_REACH_K arrays of node_limit: traversal j, node n at j * limit + n */
    uint32_t *stamp;     /* node_limit entries: visited generation of the fallback search */
    kiln_node_id *stack; /* node_limit entries: fallback search stack */
    uint32_t gen;        /* current generation of stamp[] */
    uint64_t fallbacks;  /* statistics: queries that needed the search */
    uint64_t queries;

    /* root only: memory symbol table (symtab.c) */
    struct kiln_symtab *symtab;
    /* build schedule (schedule.c), valid while struct_mutation and
     * sched_mutation (edits of the four keys it reads) are what they were */
    struct kiln_schedule *sched;
    /* incremental cycle detector of CanFuse (analysis_cycle.c) */
    struct kiln_cycles *cycles;
};

/** The cache of @p g, created on first use; NULL on OOM. */
struct kiln_analysis_cache *kiln__analyses(kiln_graph *g);
/** Free every cached analysis of @p g (called by graph destruction). */
void kiln__analyses_free(kiln_graph *g);

/** Build (if stale) the topological order; analysis_topo.c. */
kiln_status kiln__topo_ensure(kiln_graph *g, kiln_error *err);
/**
 * Kahn's main loop: queue[0, tail) holds the sources, indeg[] the remaining
 * in-degree of every node (data inputs + control inputs, parallel edges
 * counted).  Drains the queue, appending each node whose in-degree reaches 0;
 * returns the final tail (the number of nodes ordered).  With @p pos, each
 * dequeued node's queue position is stored there (pos may be @p indeg: a
 * dequeued node's slot is never decremented again).  Shared by the
 * topological order and the verifier's DAG check.
 */
uint32_t kiln__kahn(const kiln_graph *g, uint32_t *indeg, kiln_node_id *queue, uint32_t tail,
                    uint32_t *pos);
/** Drop the topological order (and the reachability built on it). */
void kiln__topo_free(struct kiln_analysis_cache *c);
/** Drop the reachability index; analysis_reach.c. */
void kiln__reach_free(struct kiln_analysis_cache *c);
/**
 * Uncached depth-first search over data + control edges (for cyclic graphs):
 * O(n + e) time and O(n) memory per call; false on OOM.
 */
bool kiln__reach_plain(const kiln_graph *g, kiln_node_id from, kiln_node_id to);
/** Drop the symbol table; symtab.c. */
void kiln__symtab_free(struct kiln_symtab *st);
/** Drop a build schedule; schedule.c. */
void kiln__schedule_free(struct kiln_schedule *s);
/** Drop the cycle detector; analysis_cycle.c. */
void kiln__cycles_free(struct kiln_cycles *c);

#endif

/*
 * graph_int.h - the layout of the graph IR.  Only core/ files that implement
 * graph operations or analyses include this; everything else (and every
 * plugin) goes through the accessor functions of kiln_graph.h.
 *
 * Memory layout (a million nodes must fit comfortably):
 *   nodes[]   hot records (32 bytes), dense ids, id 0 reserved as "none":
 *             everything a whole-graph walk reads (op, slices, control heads).
 *   cold[]    name, pass scratch, attribute set (16 bytes).
 *   owners    the few nodes that own subgraphs: node id -> subgraph list, an
 *             open-addressing map, so the per-node records carry nothing for
 *             them.
 *   in[]      one kiln_use record (20 bytes) per input anchor; a node's inputs
 *             are the contiguous slice in[in_off .. in_off+nin).  The record is
 *             both the input anchor and the edge: src = producer anchor, and
 *             prev/next thread it into the producer output's consumer list.
 *   out[]     one descriptor pointer per output anchor (slice per node);
 *   out_head[] parallel to out[]: the first record of the output's consumer
 *             list, dense so whole-graph walks never touch descriptors.
 *   ctrl[]    control-edge records in a pool with a free list, threaded into
 *             the source's out-list and the destination's in-list.
 * Lists are doubly linked with a circular prev: head->prev is the tail, so
 * append and unlink are O(1) and iteration follows creation order.
 * Variable-size data (dims, attributes, descriptors) lives in the graph arena
 * and is never freed individually; compaction rebuilds the dense arrays.
 */
#ifndef KILN_CORE_GRAPH_INT_H
#define KILN_CORE_GRAPH_INT_H

#include "base.h"
#include "arena.h"
#include "intern.h"

#include <stdalign.h>
#include <stdatomic.h>

#define KILN_NODEF_DEAD 0x1u
#define KILN_NODEF_HAS_SUBGRAPH 0x2u

typedef struct knode {
    kiln_sym op;       /* 0 for a tombstone */
    uint32_t flags;    /* KILN_NODEF_* */
    uint32_t in_off;   /* first input record in g->in */
    uint32_t nin;
    uint32_t out_off;  /* first output slot in g->out */
    uint32_t nout;
    uint32_t ctrl_in;  /* head ctrl record of incoming control edges, 0 = none */
    uint32_t ctrl_out; /* head ctrl record of outgoing control edges */
} knode;

typedef struct knode_cold {
    kiln_sym name;
    uint32_t link;     /* scratch for passes (kiln_node_link) */
    kiln_attrs *attrs; /* NULL = none */
} knode_cold;

typedef struct ksubref {
    kiln_sym role;
    kiln_graph *graph;
} ksubref;

/* A node that owns subgraphs (KILN_NODEF_HAS_SUBGRAPH): slot of g->owners. */
typedef struct kowner {
    kiln_node_id node; /* 0 = empty slot */
    uint32_t nsub;
    ksubref *subs;     /* arena, nsub entries */
} kowner;

/* Input anchor + data edge (20 bytes).  Index 0 of g->in is reserved.  The
 * input index is not stored: record r is input r - nodes[dst].in_off of dst. */
typedef struct kuse {
    kiln_node_id src; /* 0 = unconnected */
    uint32_t src_idx;
    kiln_node_id dst;
    uint32_t prev; /* consumer list of (src, src_idx); prev of head = tail */
    uint32_t next;
} kuse;

typedef struct kctrl {
    kiln_node_id src, dst;
    uint32_t out_prev, out_next; /* in src's out-list */
    uint32_t in_prev, in_next;   /* in dst's in-list */
} kctrl;

/* 16 bytes: the type and a list's length share a word (a list holds fewer
 * than KILN_ATTR_COUNT_MAX entries; attrs.c refuses longer ones). */
#define KILN_ATTR_COUNT_MAX ((1u << 27) - 1)
typedef struct kattr {
    kiln_sym key;
    uint32_t type : 5;   /* kiln_attr_type */
    uint32_t count : 27; /* list length */
    union {
        int64_t i;
        double f;
        kiln_sym s;
        void *p; /* lists, tensors: arena */
    } v;
} kattr;

/* The bytes of a large tensor attribute (KILN_SHARED_MIN and up), outside
 * the arena and shared by every graph holding a copy of the attribute:
 * kiln_attrs_copy takes a reference instead of copying the bytes (splitting a
 * graph into partitions or subgraphs copies its weights otherwise).  Each
 * graph lists the references it holds and drops them when it is freed.
 * Tensor bytes are never written through a view, so sharing is safe. */
typedef struct kshared {
    atomic_uint refs;
    size_t n;
    alignas(max_align_t) unsigned char data[]; /* malloc's alignment, 16 bytes */
} kshared;
#define KILN_SHARED_MIN 16384

/* A tensor attribute's value: the public view first (kiln_attrs_get_tensor
 * copies it out); shared is NULL when the bytes are in the arena. */
typedef struct ktensor {
    kiln_tensor_value v;
    kshared *shared;
} ktensor;

/* The set itself lives in the graph's arena (its address is handed out);
 * its array is on the heap (kiln__realloc), so growing it leaves no garbage
 * (attrs.c).  The graph lists its sets to free the arrays with it. */
struct kiln_attrs {
    kiln_graph *g;    /* owner: arena + intern table */
    kattr *v;         /* sorted by key; heap */
    uint32_t n, cap;
    kiln_attrs *next; /* the graph's list of sets (attr_sets) */
};
/** A new empty set of @p g (arena), with room for @p cap entries when the
 * heap has it, NULL on OOM; attrs.c. */
kiln_attrs *kiln__attrs_new(kiln_graph *g, uint32_t cap);
/** Free the arrays of every set of @p g (the graph is being freed). */
void kiln__attrs_free_all(kiln_graph *g);

typedef struct kdesc_ext {
    int64_t size;   /* -1 = unset */
    int64_t offset; /* -1 = unset */
    kiln_sym memory_type;
    kiln_attrs *attrs;
} kdesc_ext;

/* 32 bytes: one per output (and per input that has its own descriptor). */
struct kiln_tensor_desc {
    int64_t *dims;     /* arena; NULL when rank <= 0 */
    kdesc_ext *ext;    /* lazily created: size/offset/memory type/attrs */
    kiln_sym format;   /* 0 = "ND" */
    uint32_t pad0;
    int16_t rank;      /* -1 = unknown; at most KILN_MAX_RANK */
    int16_t ref_input; /* -1 = none */
    uint8_t dtype;
    uint8_t pad[3];
};
#define KILN_MAX_RANK 4096

typedef struct ksub_slot {
    kiln_sym name;
    kiln_graph *graph;
} ksub_slot;

typedef struct kname_slot {
    kiln_node_id id; /* 0 = empty, UINT32_MAX = tombstone */
    kiln_sym name;
} kname_slot;

struct kiln_graph {
    kiln_ctx *ctx;
    kiln_sym name;
    kiln_graph *root;        /* self for a root */
    kiln_graph *parent;      /* NULL for a root */
    kiln_node_id parent_node;
    uint32_t depth;          /* root = 1 */
    kiln_arena arena;
    /* every attribute set of this graph (kiln__attrs_new), newest first:
     * their heap arrays are freed with the graph */
    kiln_attrs *attr_sets;

    knode *nodes;
    knode_cold *cold;
    uint32_t node_cap, node_limit; /* node_limit = next id */
    uint32_t live;

    kuse *in;
    uint32_t in_cap, in_len;
    kiln_tensor_desc **in_desc; /* lazily: per in record, its own descriptor (NULL = none) */

    kiln_tensor_desc **out;
    uint32_t *out_head; /* per out slot: first consumer record in in[], 0 = none */
    uint32_t out_cap, out_len;

    kctrl *ctrl;
    uint32_t ctrl_cap, ctrl_len, ctrl_free;

    /* owner node id -> subgraph list (graph_subgraph.c); load <= 1/2 */
    kowner *owners;
    uint32_t owner_cap, owner_used;

    /* name -> node id, open addressing over {id, name} slots (live nodes) */
    struct kname_slot *name_slots;
    uint32_t name_cap, name_used;

    kiln_attrs *attrs;       /* graph attributes */
    kshared **shared;        /* the references this graph holds (kshared) */
    uint32_t nshared, shared_cap;
    uint64_t mutation;       /* any edit */
    uint64_t struct_mutation; /* edges/nodes only */
    uint64_t sched_mutation;  /* edits of the attributes the schedule reads (KILN_WATCH_SCHED) */
    uint64_t sym_mutation;    /* edits the memory symbol table may depend on: every edit
                                 but a descriptor's size, offset or memory type and an
                                 attribute of a key not KILN_WATCH_SYMTAB */
    bool oom;

    /* root only: all subgraphs at every level, creation order */
    kiln_graph **subgraphs;
    uint32_t nsubgraphs, subgraphs_cap;
    /* root only: subgraph name -> graph, open addressing (NULL = empty,
     * KILN_SUB_TOMB = removed), load <= 1/2: name checks stay O(1) */
    struct ksub_slot *sub_slots;
    uint32_t sub_cap, sub_used;
    uint32_t name_counter; /* for generated names */
    uint32_t walking;      /* GEPass walks of this graph in progress (gepass.c) */

    struct kiln_analysis_cache *analyses; /* analyses.c */
};

static inline knode *kiln__node(const kiln_graph *g, kiln_node_id n)
{
    return &g->nodes[n];
}
static inline bool kiln__live(const kiln_graph *g, kiln_node_id n)
{
    return n != 0 && n < g->node_limit && !(g->nodes[n].flags & KILN_NODEF_DEAD);
}
/* Tags of the watched attribute keys (ctx.c): an edit of one bumps the
 * counter of the analysis that reads it. */
#define KILN_WATCH_SCHED 1u
#define KILN_WATCH_SYMTAB 2u

static inline void kiln__mutated(kiln_graph *g, bool structural)
{
    g->mutation++;
    g->sym_mutation++;
    if (structural)
        g->struct_mutation++;
}
/* An edit of a descriptor's planned size, offset or memory type: no
 * analysis but the memory plan's reads these. */
static inline void kiln__mutated_plan(kiln_graph *g)
{
    g->mutation++;
}

/* Home slot hash of the name index (graph.c, verify.c). */
static inline uint32_t kiln__name_hash(kiln_sym s)
{
    uint32_t h = s * 2654435761u;
    return h ^ (h >> 15);
}
#define KILN_NAME_TOMB UINT32_MAX

static inline kiln_tensor_desc *kiln__out_desc(const kiln_graph *g, kiln_node_id n, uint32_t o)
{
    return g->out[g->nodes[n].out_off + o];
}
/* Head of the consumer list of output @p o of @p n. */
static inline uint32_t *kiln__out_head(const kiln_graph *g, kiln_node_id n, uint32_t o)
{
    return &g->out_head[g->nodes[n].out_off + o];
}

/* Append input record @p idx to the consumer list headed by *@p head in
 * @p in (graph.c's edits and graph_edit.c's compaction, which fills new arrays). */
static inline void kiln__use_append(kuse *in, uint32_t *head, uint32_t idx)
{
    in[idx].next = 0;
    if (!*head) {
        *head = idx;
        in[idx].prev = idx;
    } else {
        uint32_t tail = in[*head].prev;
        in[tail].next = idx;
        in[idx].prev = tail;
        in[*head].prev = idx;
    }
}

/* Append control record @p C of pool @p POOL to the list headed by @p HEAD,
 * threaded through the fields PREV/NEXT (out_prev/out_next or in_prev/in_next). */
#define KILN_CTRL_APPEND(POOL, HEAD, C, PREV, NEXT)    \
    do {                                               \
        uint32_t c_ = (C);                             \
        (POOL)[c_].NEXT = 0;                           \
        if (!(HEAD)) {                                 \
            (HEAD) = c_;                               \
            (POOL)[c_].PREV = c_;                      \
        } else {                                       \
            uint32_t tail_ = (POOL)[HEAD].PREV;        \
            (POOL)[tail_].NEXT = c_;                   \
            (POOL)[c_].PREV = tail_;                   \
            (POOL)[HEAD].PREV = c_;                    \
        }                                              \
    } while (0)

/* Shared by graph.c, graph_desc.c and graph_subgraph.c. */
kiln_graph *kiln__graph_new(kiln_ctx *ctx, const char *name);
void kiln__graph_free_one(kiln_graph *g);
kiln_tensor_desc *kiln__desc_new(kiln_graph *g);
/** Unlink and free control record @p c (graph_ctrl.c). */
void kiln__ctrl_free_rec(kiln_graph *g, uint32_t c);

/* ---- internal graph API (core only; embedders use these too) ---------- */

/** Create an empty root graph in @p ctx.  NULL on OOM. */
KILN_API kiln_graph *kiln_graph_create(kiln_ctx *ctx, const char *name);
/** Destroy a root graph and all its subgraphs. */
KILN_API void kiln_graph_destroy(kiln_graph *g);
KILN_API kiln_ctx *kiln_graph_ctx(const kiln_graph *g);
/** Pre-size the dense arrays and the name index for @p nodes more nodes (optional;
 * avoids growth slack and rehashing). */
KILN_API bool kiln_graph_reserve(kiln_graph *g, uint32_t nodes, uint32_t inputs, uint32_t outputs);
/**
 * Drop tombstones and garbage slices.  When @p topo is true, ids are reassigned
 * in topological order (Kahn, id order tie-break; fails with ERR_INVALID on a
 * cycle).  If @p old_to_new is non-NULL it receives a malloc'd map of
 * id_limit entries (0 for dead nodes), owned by the caller (kiln__free).
 */
KILN_API kiln_status kiln_graph_compact(kiln_graph *g, bool topo, uint32_t **old_to_new,
                                        kiln_error *err);
/** Bytes held by the graph (arrays + arena), excluding subgraphs and interned strings. */
KILN_API size_t kiln_graph_memory(const kiln_graph *g);
/** Find a subgraph of the root by name (NULL if none). */
KILN_API kiln_graph *kiln_graph_find_subgraph(const kiln_graph *root, const char *name);
/** Node named by symbol @p name (no string hashing), or 0. */
kiln_node_id kiln__name_lookup(const kiln_graph *g, kiln_sym name);
/** Rebuild the name index from the live nodes (after renumbering). */
bool kiln__name_index_rebuild(kiln_graph *g);
/** Remove a node's subgraphs (recursively) from the root's list and free them. */
void kiln__graph_drop_subgraphs(kiln_graph *g, kiln_node_id n);
/** The subgraph of @p n, at any depth, that a GEPass walk is in (walking > 0);
 * NULL when none.  Removing @p n would free it under the walk. */
kiln_graph *kiln__graph_walked_below(const kiln_graph *g, kiln_node_id n);
/** The owner-map entry of node @p n, or NULL (the map only: see kiln__owner). */
static inline const kowner *kiln__owner_lookup(const kiln_graph *g, kiln_node_id n)
{
    if (!g->owner_cap)
        return NULL;
    uint32_t mask = g->owner_cap - 1;
    for (uint32_t j = kiln__name_hash(n) & mask;; j = (j + 1) & mask) {
        if (g->owners[j].node == n)
            return &g->owners[j];
        if (!g->owners[j].node)
            return NULL;
    }
}
/** The subgraph list of owner node @p n, or NULL when it owns none. */
static inline const kowner *kiln__owner(const kiln_graph *g, kiln_node_id n)
{
    return (g->nodes[n].flags & KILN_NODEF_HAS_SUBGRAPH) ? kiln__owner_lookup(g, n) : NULL;
}
/** Live nodes of @p g's root and every subgraph. */
uint64_t kiln__graph_live_total(const kiln_graph *g);
/** Renumber the owner map after compaction (@p map: old id -> new id) and
 * repoint the subgraphs' parent_node.  False on OOM (map unchanged). */
bool kiln__owners_renumber(kiln_graph *g, const uint32_t *map);
/** Generate a name "<base><N>" unused in @p g. Returns a pointer into @p buf. */
KILN_API const char *kiln_graph_unique_name(kiln_graph *g, const char *base, char *buf,
                                            size_t size);

#endif /* KILN_CORE_GRAPH_INT_H */

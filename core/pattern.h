/*
 * pattern.h - fusion-pass pattern storage and match results (GE Pattern /
 * MatchResult).  A fusion pass's patterns() hook fills a kiln_pattern through
 * the public kiln_pattern_* calls; the matcher (fusion plugin area) reads it
 * through this header.  Only core/ includes this.
 */
#ifndef KILN_CORE_PATTERN_H
#define KILN_CORE_PATTERN_H

#include "base.h"

typedef struct kpat_node {
    char *name;
    char *op;
    uint32_t alt;   /* alternative pattern index */
    uint32_t edge0; /* edges before it was added: none of them ends at it */
    /* KILN_PATTERN_CONST_VALUE: the value a Const must equal (owned copies) */
    bool has_value;
    kiln_dtype vdtype;
    uint32_t vrank;
    int64_t *vdims;
    void *vdata;
    size_t vbytes;
} kpat_node;

/* A pattern output (GE: an input of the pattern's NetOutput), in order. */
typedef struct kpat_out {
    int32_t node;
    uint32_t so;
} kpat_out;

typedef struct kpat_edge {
    int32_t src, dst;
    uint32_t so, di;
} kpat_edge;

struct kiln_pattern {
    kpat_node *nodes;
    uint32_t nnodes, nodes_cap;
    kpat_edge *edges;
    uint32_t nedges, edges_cap;
    uint32_t alt; /* current alternative */
    kpat_out *outs;
    uint32_t nouts, outs_cap;
    uint32_t *alt_flags; /* KILN_PATTERN_* per alternative */
    uint32_t alt_flags_cap;
};

/*
 * One match (GE MatchResult), filled by the matcher (fusion_match.c) or the
 * decompose driver (fusion_exec.c); the arrays are owned by whoever fills it
 * and stay valid until the next match.
 */
struct kiln_match {
    uint32_t pattern_index;
    const kiln_node_id *nodes; /* indexed by global pattern node index; 0 = none */
    uint32_t nnodes;
    const kiln_anchor *inputs; /* boundary inputs: the alternative's Data nodes in order */
    uint32_t ninputs;
    const kiln_anchor *outputs; /* pattern outputs -> target out-anchors */
    uint32_t noutputs;
    const kiln_node_id *matched; /* matched non-Data nodes, pattern-node order */
    uint32_t nmatched;
    kiln_fusion_boundary boundary;
};

/* ---- the matcher (fusion_match.c) ---- */

typedef struct kiln_matcher kiln_matcher;

/**
 * Check every alternative of @p p (GE pattern validation): at least one
 * output, no cycle, edges inside the alternative, Data nodes without inputs,
 * inputs of a node numbered 0..k-1 without holes, every node on a path to an
 * output, no Data node as an output.  ERR_INVALID naming @p pass and the
 * alternative: "pattern 0 of FooPass has no output".
 */
kiln_status kiln__pattern_validate(const kiln_pattern *p, const char *pass, kiln_error *err);
/** Number of alternatives of a validated pattern. */
uint32_t kiln__pattern_alt_count(const kiln_pattern *p);

/**
 * A matcher of (validated) @p p over @p g for one pass run: builds the
 * candidate index of the outputs' op types in one O(nodes) walk.  Nodes
 * created after this call (replacements) are never matched, and a node
 * deleted by an applied replacement is skipped, so matches of one pass run
 * do not overlap.  NULL on OOM.
 */
kiln_matcher *kiln__matcher_create(const kiln_pattern *p, kiln_graph *g);

/**
 * The live nodes of @p g grouped by op symbol, for the matchers of a fusion
 * stage: each takes its candidates from it instead of walking the graph.
 * Valid while the ops of the indexed nodes do not change: the replacements of
 * pattern and decompose passes only add nodes (the matcher reads those from
 * the graph) and delete some (skipped); a base pass may do anything, so the
 * executor drops the index after one.  NULL on OOM.
 */
typedef struct kiln_op_index kiln_op_index;
kiln_op_index *kiln__op_index_build(kiln_graph *g);
void kiln__op_index_free(kiln_op_index *ix);
/** kiln__matcher_create with the candidates from @p ix (built on @p g; NULL: a walk). */
kiln_matcher *kiln__matcher_create_ix(const kiln_pattern *p, kiln_graph *g,
                                      const kiln_op_index *ix);
void kiln__matcher_destroy(kiln_matcher *mt);
/** Start matching alternative @p alt from its first output-0 candidate. */
void kiln__matcher_begin(kiln_matcher *mt, uint32_t alt);
/** The next match of the current alternative (GE MatchNext), or NULL when
 * there is none left.  Valid until the next call. */
const kiln_match *kiln__matcher_next(kiln_matcher *mt);

/**
 * Node @p n may have changed (deleted, or its inputs rewired): the matcher
 * reads it again from the graph before matching it.  The executor calls it,
 * before a replacement, for the matched nodes and the consumers of the
 * match's outputs: what kiln_fusion_replace changes.
 */
void kiln__matcher_touch(kiln_matcher *mt, kiln_node_id n);

void kiln__pattern_init(kiln_pattern *p);
void kiln__pattern_free(kiln_pattern *p);

#endif

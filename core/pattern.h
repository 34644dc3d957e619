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
    uint32_t alt; /* alternative pattern index */
} kpat_node;

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
};

struct kiln_match {
    uint32_t pattern_index;
    const kiln_node_id *nodes; /* indexed by pattern node index */
    uint32_t nnodes;
};

void kiln__pattern_init(kiln_pattern *p);
void kiln__pattern_free(kiln_pattern *p);

#endif

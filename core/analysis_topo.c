/*
 * analysis_topo.c - cached topological order of a graph.
 *
 * Algorithm: Kahn's algorithm over data + control edges.  The ready queue is
 * a FIFO seeded with the source nodes in id order, and successors become ready
 * in the order their last incoming edge is consumed (outputs in index order,
 * consumers in edge-creation order, then control successors).  This is the
 * order kiln_graph_compact(topo=true) assigns, and it is deterministic: equal
 * graphs built the same way give equal orders.
 *
 * A data edge and a control edge between the same pair, or two data edges
 * from one producer into two inputs of one consumer, each count once in the
 * in-degree and are each consumed once, so parallel edges are harmless.
 *
 * On a cycle the error names a node that lies on a cycle: the nodes left
 * unprocessed all have a remaining in-degree, so walking backwards through
 * unprocessed predecessors must revisit a node, and the first revisited node
 * is on a cycle.
 *
 * Complexity: O(n + e) time, two node_limit-sized arrays (order, index);
 * the in-degree counts live temporarily in the index array.
 */
#include "analysis.h"

#define CYCLE_MARK 0x80000000u

void kiln__topo_free(struct kiln_analysis_cache *c)
{
    kiln__free(c->order);
    kiln__free(c->tidx);
    c->order = NULL;
    c->tidx = NULL;
    c->norder = 0;
    c->topo_at = 0;
}

/* A predecessor of @p n that is still unprocessed (indeg > 0), or 0. */
static kiln_node_id pending_pred(const kiln_graph *g, const uint32_t *indeg, kiln_node_id n)
{
    const knode *k = &g->nodes[n];
    for (uint32_t i = 0; i < k->nin; i++) {
        kiln_node_id s = g->in[k->in_off + i].src;
        if (s && indeg[s])
            return s;
    }
    for (uint32_t c = g->nodes[n].ctrl_in; c; c = g->ctrl[c].in_next)
        if (indeg[g->ctrl[c].src])
            return g->ctrl[c].src;
    return 0;
}

/* Name a node on a cycle (see the file comment).  Destroys @p indeg. */
static kiln_node_id cycle_node(const kiln_graph *g, uint32_t *indeg)
{
    kiln_node_id n = 0;
    for (kiln_node_id i = 1; i < g->node_limit && !n; i++)
        if (kiln__live(g, i) && indeg[i])
            n = i;
    while (n && !(indeg[n] & CYCLE_MARK)) {
        indeg[n] |= CYCLE_MARK;
        n = pending_pred(g, indeg, n);
    }
    return n;
}

uint32_t kiln__kahn(const kiln_graph *g, uint32_t *indeg, kiln_node_id *queue, uint32_t tail,
                    uint32_t *pos)
{
    for (uint32_t head = 0; head < tail; head++) {
        kiln_node_id n = queue[head];
        if (pos)
            pos[n] = head;
        const knode *k = &g->nodes[n];
        for (uint32_t o = 0; o < k->nout; o++)
            for (uint32_t u = g->out_head[k->out_off + o]; u; u = g->in[u].next)
                if (--indeg[g->in[u].dst] == 0)
                    queue[tail++] = g->in[u].dst;
        for (uint32_t e = k->ctrl_out; e; e = g->ctrl[e].out_next)
            if (--indeg[g->ctrl[e].dst] == 0)
                queue[tail++] = g->ctrl[e].dst;
    }
    return tail;
}

static kiln_status topo_build(kiln_graph *g, struct kiln_analysis_cache *c, kiln_error *err)
{
    uint32_t lim = g->node_limit;
    kiln_node_id *order = kiln__malloc((size_t)(g->live + 1) * sizeof(*order));
    uint32_t *indeg = kiln__calloc(lim, sizeof(*indeg));
    if (!order || !indeg) {
        kiln__free(order);
        kiln__free(indeg);
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory sorting graph %s",
                           kiln_graph_name(g));
    }
    /* In-degrees from one sequential scan of the input records and one of the
     * control pool (no per-node record reads): a connected record belongs to
     * a live node (removal disconnects, relocation clears old slices) and a
     * used control record has src != 0. */
    for (uint32_t r = 1; r < g->in_len; r++)
        if (g->in[r].src)
            indeg[g->in[r].dst]++;
    for (uint32_t e = 1; e < g->ctrl_len; e++)
        if (g->ctrl[e].src)
            indeg[g->ctrl[e].dst]++;
    /* Sources in id order.  Without tombstones (live == limit - 1) every id is
     * live and the node records need not be read; a dead id gets position
     * UINT32_MAX here, a live one its queue position from Kahn below (its
     * in-degree slot is free once it is dequeued), so the in-degree array
     * becomes the position index without another pass. */
    bool all_live = g->live == lim - 1;
    uint32_t tail = 0;
    indeg[0] = UINT32_MAX;
    for (kiln_node_id n = 1; n < lim; n++) {
        if (indeg[n])
            continue;
        if (all_live || kiln__live(g, n))
            order[tail++] = n;
        else
            indeg[n] = UINT32_MAX;
    }
    tail = kiln__kahn(g, indeg, order, tail, indeg);
    if (tail != g->live) {
        for (uint32_t i = 0; i < tail; i++)
            indeg[order[i]] = 0; /* processed: back to "no pending input" */
        kiln_node_id bad = cycle_node(g, indeg);
        kiln__free(order);
        kiln__free(indeg);
        return kiln_errorf(err, KILN_ERR_INVALID, "graph %s has a cycle through node %s",
                           kiln_graph_name(g), kiln_node_name_str(g, bad));
    }
    c->order = order;
    c->norder = tail;
    c->tidx = indeg;
    c->topo_at = g->struct_mutation + 1;
    return KILN_OK;
}

kiln_status kiln__topo_ensure(kiln_graph *g, kiln_error *err)
{
    struct kiln_analysis_cache *c = kiln__analyses(g);
    if (!c)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory sorting graph %s",
                           kiln_graph_name(g));
    if (c->topo_at == g->struct_mutation + 1)
        return KILN_OK;
    /* The reachability index is built on the order: drop both together. */
    kiln__reach_free(c);
    kiln__topo_free(c);
    return topo_build(g, c, err);
}

kiln_status kiln_graph_topo_order(kiln_graph *g, const kiln_node_id **order, uint32_t *n,
                                  kiln_error *err)
{
    kiln_status st = kiln__topo_ensure(g, err);
    if (st != KILN_OK) {
        if (order)
            *order = NULL;
        if (n)
            *n = 0;
        return st;
    }
    if (order)
        *order = g->analyses->order;
    if (n)
        *n = g->analyses->norder;
    return KILN_OK;
}

uint32_t kiln_graph_topo_index(kiln_graph *g, kiln_node_id n)
{
    if (!kiln__live(g, n) || kiln__topo_ensure(g, NULL) != KILN_OK)
        return UINT32_MAX;
    return g->analyses->tidx[n];
}

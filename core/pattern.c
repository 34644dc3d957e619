/*
 * pattern.c - building fusion patterns and reading match results.  Pattern
 * nodes are indexed globally; each belongs to the alternative that was
 * current when it was added (kiln_pattern_next starts a new one).  Edges may
 * only join nodes of the same alternative.
 */
#include "pattern.h"

void kiln__pattern_init(kiln_pattern *p)
{
    memset(p, 0, sizeof(*p));
}

void kiln__pattern_free(kiln_pattern *p)
{
    for (uint32_t i = 0; i < p->nnodes; i++) {
        kiln__free(p->nodes[i].name);
        kiln__free(p->nodes[i].op);
    }
    kiln__free(p->nodes);
    kiln__free(p->edges);
    kiln__pattern_init(p);
}

int32_t kiln_pattern_node(kiln_pattern *p, const char *name, const char *op)
{
    if (!p || !op || !op[0] || p->nnodes >= INT32_MAX)
        return -1;
    if (!KILN_GROW(p->nodes, p->nodes_cap, p->nnodes + 1))
        return -1;
    kpat_node *n = &p->nodes[p->nnodes];
    n->name = kiln__strdup(name ? name : op);
    n->op = kiln__strdup(op);
    n->alt = p->alt;
    if (!n->name || !n->op) {
        kiln__free(n->name);
        kiln__free(n->op);
        return -1;
    }
    return (int32_t)p->nnodes++;
}

kiln_status kiln_pattern_edge(kiln_pattern *p, int32_t src, uint32_t so, int32_t dst, uint32_t di)
{
    if (!p || src < 0 || dst < 0 || (uint32_t)src >= p->nnodes || (uint32_t)dst >= p->nnodes ||
        src == dst || p->nodes[src].alt != p->nodes[dst].alt)
        return KILN_ERR_INVALID;
    for (uint32_t i = 0; i < p->nedges; i++)
        if (p->edges[i].dst == dst && p->edges[i].di == di)
            return KILN_ERR_INVALID; /* an input has one producer */
    if (!KILN_GROW(p->edges, p->edges_cap, p->nedges + 1))
        return KILN_ERR_NOMEM;
    p->edges[p->nedges++] = (kpat_edge){src, dst, so, di};
    return KILN_OK;
}

kiln_status kiln_pattern_next(kiln_pattern *p)
{
    if (!p)
        return KILN_ERR_INVALID;
    bool used = false;
    for (uint32_t i = 0; i < p->nnodes; i++)
        used |= p->nodes[i].alt == p->alt;
    if (!used)
        return KILN_ERR_INVALID; /* an empty alternative */
    p->alt++;
    return KILN_OK;
}

kiln_node_id kiln_match_node(const kiln_match *m, int32_t index)
{
    if (!m || index < 0 || (uint32_t)index >= m->nnodes)
        return 0;
    return m->nodes[index];
}

uint32_t kiln_match_pattern_index(const kiln_match *m)
{
    return m ? m->pattern_index : 0;
}

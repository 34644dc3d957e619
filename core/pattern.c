/*
 * pattern.c - building fusion patterns and reading match results.  Pattern
 * nodes are indexed globally; each belongs to the alternative that was
 * current when it was added (kiln_pattern_next starts a new one).  Edges may
 * only join nodes of the same alternative.
 */
#include "pattern.h"

void kiln__pattern_init(kiln_pattern *p) { memset(p, 0, sizeof(*p)); }

void kiln__pattern_free(kiln_pattern *p)
{
    for (uint32_t i = 0; i < p->nnodes; i++) {
        kiln__free(p->nodes[i].name);
        kiln__free(p->nodes[i].op);
        kiln__free(p->nodes[i].vdims);
        kiln__free(p->nodes[i].vdata);
    }
    kiln__free(p->nodes);
    kiln__free(p->edges);
    kiln__free(p->outs);
    kiln__free(p->alt_flags);
    kiln__pattern_init(p);
}

int32_t kiln_pattern_node(kiln_pattern *p, const char *name, const char *op)
{
    if (!p || !op || !op[0] || p->nnodes >= INT32_MAX)
        return -1;
    if (!KILN_GROW(p->nodes, p->nodes_cap, p->nnodes + 1))
        return -1;
    kpat_node *n = &p->nodes[p->nnodes];
    memset(n, 0, sizeof(*n));
    n->name = kiln__strdup(name ? name : op);
    n->op = kiln__strdup(op);
    n->alt = p->alt;
    n->edge0 = p->nedges;
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
    for (uint32_t i = p->nodes[dst].edge0; i < p->nedges; i++)
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
    /* nodes are added to the current alternative, so the last one tells */
    if (!p->nnodes || p->nodes[p->nnodes - 1].alt != p->alt)
        return KILN_ERR_INVALID; /* an empty alternative */
    p->alt++;
    return KILN_OK;
}

kiln_status kiln_pattern_output(kiln_pattern *p, int32_t node, uint32_t so)
{
    if (!p || node < 0 || (uint32_t)node >= p->nnodes || p->nodes[node].alt != p->alt)
        return KILN_ERR_INVALID;
    if (!KILN_GROW(p->outs, p->outs_cap, p->nouts + 1))
        return KILN_ERR_NOMEM;
    p->outs[p->nouts++] = (kpat_out){node, so};
    return KILN_OK;
}

kiln_status kiln_pattern_set_flags(kiln_pattern *p, uint32_t flags)
{
    if (!p || (flags & ~(KILN_PATTERN_COMMUTATIVE | KILN_PATTERN_CONST_VALUE)))
        return KILN_ERR_INVALID;
    if (!KILN_GROW(p->alt_flags, p->alt_flags_cap, p->alt + 1))
        return KILN_ERR_NOMEM;
    p->alt_flags[p->alt] = flags;
    return KILN_OK;
}

kiln_status kiln_pattern_const_value(kiln_pattern *p, int32_t node, const kiln_tensor_value *value)
{
    if (!p || !value || node < 0 || (uint32_t)node >= p->nnodes ||
        strcmp(p->nodes[node].op, "Const") != 0 || (value->rank && !value->dims) ||
        (value->nbytes && !value->data))
        return KILN_ERR_INVALID;
    kpat_node *n = &p->nodes[node];
    int64_t *dims = value->rank ? kiln__malloc(value->rank * sizeof(int64_t)) : NULL;
    void *data = kiln__malloc(value->nbytes ? value->nbytes : 1);
    if ((value->rank && !dims) || !data) {
        kiln__free(dims);
        kiln__free(data);
        return KILN_ERR_NOMEM;
    }
    if (value->rank)
        memcpy(dims, value->dims, value->rank * sizeof(int64_t));
    if (value->nbytes)
        memcpy(data, value->data, value->nbytes);
    kiln__free(n->vdims);
    kiln__free(n->vdata);
    n->has_value = true;
    n->vdtype = value->dtype;
    n->vrank = value->rank;
    n->vdims = dims;
    n->vdata = data;
    n->vbytes = value->nbytes;
    return KILN_OK;
}

kiln_node_id kiln_match_node(const kiln_match *m, int32_t index)
{
    if (!m || index < 0 || (uint32_t)index >= m->nnodes)
        return 0;
    return m->nodes[index];
}

uint32_t kiln_match_pattern_index(const kiln_match *m) { return m ? m->pattern_index : 0; }

/*
 * analysis.c - the analysis cache attached to a graph (see analysis.h for the
 * staleness rules), plus the uncached reachability search used when a graph
 * is cyclic and therefore has no topological order to index.
 *
 * The cache is one struct per graph, allocated on first use and freed with
 * the graph.  Each analysis owns its arrays and frees them itself
 * (kiln__topo_free, kiln__reach_free, kiln__symtab_free), so a rebuild of one
 * analysis never touches another.
 *
 * Complexity: cache lookup O(1); kiln__reach_plain O(n + e) per query.
 */
#include "analysis.h"

struct kiln_analysis_cache *kiln__analyses(kiln_graph *g)
{
    if (!g->analyses)
        g->analyses = kiln__calloc(1, sizeof(*g->analyses));
    return g->analyses;
}

void kiln__analyses_free(kiln_graph *g)
{
    struct kiln_analysis_cache *c = g->analyses;
    if (!c)
        return;
    kiln__reach_free(c);
    kiln__topo_free(c);
    kiln__symtab_free(c->symtab);
    kiln__schedule_free(c->sched);
    kiln__cycles_free(c->cycles);
    kiln__free(c);
    g->analyses = NULL;
}

/*
 * The plain search allocates its own visited array (the cached stamps belong
 * to the acyclic index, which a cyclic graph does not have).
 */
bool kiln__reach_plain(const kiln_graph *g, kiln_node_id from, kiln_node_id to)
{
    uint32_t lim = g->node_limit;
    uint8_t *seen = kiln__calloc(lim, 1);
    kiln_node_id *stack = kiln__malloc((size_t)lim * sizeof(*stack));
    bool found = false;
    if (!seen || !stack)
        goto done;
    uint32_t sp = 0;
    stack[sp++] = from;
    seen[from] = 1;
    while (sp && !found) {
        kiln_node_id n = stack[--sp];
        const knode *k = &g->nodes[n];
        for (uint32_t o = 0; o < k->nout && !found; o++) {
            for (uint32_t u = g->out_head[k->out_off + o]; u; u = g->in[u].next) {
                kiln_node_id d = g->in[u].dst;
                if (d == to) {
                    found = true;
                    break;
                }
                if (!seen[d]) {
                    seen[d] = 1;
                    stack[sp++] = d;
                }
            }
        }
        for (uint32_t c = g->nodes[n].ctrl_out; c && !found; c = g->ctrl[c].out_next) {
            kiln_node_id d = g->ctrl[c].dst;
            if (d == to)
                found = true;
            else if (!seen[d]) {
                seen[d] = 1;
                stack[sp++] = d;
            }
        }
    }
done:
    kiln__free(seen);
    kiln__free(stack);
    return found;
}

bool kiln_graph_ordered(kiln_graph *g, kiln_node_id a, kiln_node_id b)
{
    return kiln_graph_reachable(g, a, b) || kiln_graph_reachable(g, b, a);
}

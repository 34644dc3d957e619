/*
 * analysis_reach.c - cached reachability index (the role of GE's
 * ConnectionMatrix, without its n x n bit matrix).
 *
 * Index (built lazily, valid until the next structural edit):
 *   - the topological position tidx[] (analysis_topo.c): u reaches v only if
 *     tidx[u] < tidx[v], an O(1) negative filter;
 *   - KILN_REACH_K GRAIL interval labels per node (Yildirim, Chaoji, Zaki,
 *     "GRAIL: scalable reachability index for large graphs", VLDB 2010): for
 *     traversal j a depth-first search assigns post-order ranks post_j and
 *     low_j(u) = min(post_j(u), low_j(c) for every successor c).  If u reaches
 *     v then [low_j(v), post_j(v)] lies inside [low_j(u), post_j(u)], so a label
 *     that is not contained is an O(1) *negative* certificate.  The traversals
 *     differ in the order children are visited (forward, reversed, rotated).
 *   - the DFS-tree interval [tlow_j(u), post_j(u)] holding exactly u's tree
 *     descendants: v inside it is an O(1) *positive* certificate (the tree-cover
 *     idea of FERRARI / interval labelling).
 *   - a CSR successor array over data + control edges for the fallback.
 * Query: identity, topo filter, labels; when no certificate decides, a DFS
 * from u that skips nodes whose tidx is past v or whose labels exclude v and
 * stops as soon as a visited node's tree interval certifies v.  Visited marks
 * are generation stamps, so a query never clears anything.
 *
 * Complexity: build O(K (n + e)) time; memory per node 4 (tidx) + 12 K
 * (labels) + 4 (CSR offset) + 4 (stamp) + 4 (stack) bytes, plus 4 bytes per
 * edge -- linear, 40 B/node + 4 B/edge for K = 2.  A query is O(1) when a
 * certificate decides (the common case; bench/ir_scale reports the rate) and
 * O(n + e) in the worst case, bounded by the nodes between u and v in topo
 * order whose labels admit v.
 */
#include "analysis.h"

void kiln__reach_free(struct kiln_analysis_cache *c)
{
    kiln__free(c->succ_off);
    kiln__free(c->succ);
    kiln__free(c->lab);
    kiln__free(c->stamp);
    kiln__free(c->stack);
    c->succ_off = NULL;
    c->succ = NULL;
    c->lab = NULL;
    c->stamp = NULL;
    c->stack = NULL;
    c->gen = 0;
    c->reach_at = 0;
}

/*
 * CSR of data + control successors (duplicates kept; they are harmless) in one
 * pass over the nodes: each node's consumers (output order, creation order),
 * then its control successors, appended contiguously, so no counting pass is
 * needed.  The array is sized for every input and control record, an upper
 * bound on the edges.
 */
static bool build_succ(const kiln_graph *g, struct kiln_analysis_cache *c)
{
    uint32_t lim = g->node_limit;
    uint32_t *off = kiln__malloc(((size_t)lim + 1) * sizeof(*off));
    kiln_node_id *succ = kiln__malloc(((size_t)g->in_len + g->ctrl_len + 1) * sizeof(*succ));
    if (!off || !succ) {
        kiln__free(off);
        kiln__free(succ);
        return false;
    }
    uint32_t p = 0;
    for (kiln_node_id n = 0; n < lim; n++) {
        off[n] = p;
        const knode *k = &g->nodes[n];
        if (k->flags & KILN_NODEF_DEAD)
            continue;
        for (uint32_t o = 0; o < k->nout; o++)
            for (uint32_t u = g->out_head[k->out_off + o]; u; u = g->in[u].next)
                succ[p++] = g->in[u].dst;
        for (uint32_t e = k->ctrl_out; e; e = g->ctrl[e].out_next)
            succ[p++] = g->ctrl[e].dst;
    }
    off[lim] = p;
    c->succ_off = off;
    c->succ = succ;
    return true;
}

/* The i-th child of a node of degree d in traversal j. */
static inline uint32_t child_pos(uint32_t i, uint32_t d, uint32_t j, kiln_node_id n)
{
    switch (j) {
    case 0:
        return i;
    case 1:
        return d - 1 - i;
    default: {
        uint32_t h = (n ^ (j * 0x9e3779b9u)) * 0x85ebca6bu;
        return (i + (h >> 16)) % d;
    }
    }
}

/*
 * One labelling traversal.  Roots are taken in topological order (forward
 * for even j, backward for odd j -- backward still only starts at nodes no
 * earlier root reached, so correctness never depends on root choice).
 * @p cur is scratch: the child cursor of each node on the DFS stack.
 */
static void label_pass(struct kiln_analysis_cache *c, uint32_t lim, uint32_t j, uint32_t *cur)
{
    const uint32_t *off = c->succ_off;
    kreach_label *lab = c->lab + (size_t)j * lim; /* traversal j's labels, by node */
    kiln_node_id *stack = c->stack;
    uint32_t rank = 0;
    for (uint32_t r = 0; r < c->norder; r++) {
        kiln_node_id root = c->order[(j & 1) ? c->norder - 1 - r : r];
        if (lab[root].tlow)
            continue;
        uint32_t sp = 0;
        stack[sp++] = root;
        cur[root] = 0;
        lab[root].tlow = rank + 1;
        while (sp) {
            kiln_node_id u = stack[sp - 1];
            uint32_t d = off[u + 1] - off[u];
            if (cur[u] < d) {
                kiln_node_id v = c->succ[off[u] + child_pos(cur[u]++, d, j, u)];
                kreach_label *lv = &lab[v];
                if (!lv->tlow) {
                    lv->tlow = rank + 1;
                    cur[v] = 0;
                    stack[sp++] = v;
                }
                continue;
            }
            /* Finish u: every successor is finished (the graph is a DAG). */
            kreach_label *lu = &lab[u];
            lu->post = ++rank;
            uint32_t low = lu->tlow;
            for (uint32_t p = off[u]; p < off[u + 1]; p++) {
                uint32_t l = lab[c->succ[p]].low;
                if (l < low)
                    low = l;
            }
            lu->low = low;
            sp--;
        }
    }
}

static kiln_status reach_ensure(kiln_graph *g, struct kiln_analysis_cache **out)
{
    kiln_status st = kiln__topo_ensure(g, NULL);
    if (st != KILN_OK)
        return st;
    struct kiln_analysis_cache *c = g->analyses;
    *out = c;
    if (c->reach_at == g->struct_mutation + 1)
        return KILN_OK;
    kiln__reach_free(c);
    uint32_t lim = g->node_limit;
    uint32_t *cur = kiln__malloc((size_t)lim * sizeof(*cur));
    c->lab = kiln__calloc((size_t)lim * KILN_REACH_K, sizeof(*c->lab));
    c->stamp = kiln__calloc(lim, sizeof(*c->stamp));
    c->stack = kiln__malloc((size_t)lim * sizeof(*c->stack));
    if (!cur || !c->lab || !c->stamp || !c->stack || !build_succ(g, c)) {
        kiln__free(cur);
        kiln__reach_free(c);
        return KILN_ERR_NOMEM;
    }
    for (uint32_t j = 0; j < KILN_REACH_K; j++)
        label_pass(c, lim, j, cur);
    kiln__free(cur);
    c->reach_at = g->struct_mutation + 1;
    return KILN_OK;
}

/* 1: certainly reachable, -1: certainly not, 0: undecided. */
static inline int certify(const kreach_label *lab, size_t lim, kiln_node_id u, kiln_node_id v)
{
    int res = 0;
    for (uint32_t j = 0; j < KILN_REACH_K; j++) {
        const kreach_label *lu = &lab[j * lim + u], *lv = &lab[j * lim + v];
        if (lv->post > lu->post || lv->low < lu->low)
            return -1;
        if (lv->post >= lu->tlow)
            res = 1;
    }
    return res;
}

static bool search(const kiln_graph *g, struct kiln_analysis_cache *c, kiln_node_id from,
                   kiln_node_id to)
{
    if (++c->gen == 0) { /* wrapped: clear once every 2^32 searches */
        memset(c->stamp, 0, (size_t)g->node_limit * sizeof(*c->stamp));
        c->gen = 1;
    }
    uint32_t tv = c->tidx[to];
    uint32_t gen = c->gen;
    uint32_t sp = 0;
    c->stack[sp++] = from;
    c->stamp[from] = gen;
    while (sp) {
        kiln_node_id w = c->stack[--sp];
        for (uint32_t p = c->succ_off[w]; p < c->succ_off[w + 1]; p++) {
            kiln_node_id x = c->succ[p];
            if (x == to)
                return true;
            if (c->stamp[x] == gen)
                continue;
            c->stamp[x] = gen;
            if (c->tidx[x] >= tv)
                continue;
            int cert = certify(c->lab, g->node_limit, x, to);
            if (cert > 0)
                return true;
            if (cert == 0)
                c->stack[sp++] = x;
        }
    }
    return false;
}

bool kiln_graph_reachable(kiln_graph *g, kiln_node_id from, kiln_node_id to)
{
    if (!kiln__live(g, from) || !kiln__live(g, to))
        return false;
    if (from == to)
        return true;
    struct kiln_analysis_cache *c = NULL;
    if (reach_ensure(g, &c) != KILN_OK)
        return kiln__reach_plain(g, from, to); /* cyclic (or out of memory) */
    c->queries++;
    if (c->tidx[from] >= c->tidx[to])
        return false;
    int cert = certify(c->lab, g->node_limit, from, to);
    if (cert)
        return cert > 0;
    c->fallbacks++;
    return search(g, c, from, to);
}

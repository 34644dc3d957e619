/*
 * fusion_rewrite.c - GE SubgraphRewriter::Replace (kiln_fusion_replace), the
 * replacement graphs handed to the replacement hooks, and
 * kiln_graph_copy_node.
 *
 * A replacement is a separate root graph in the same context (symbols are
 * shared): one Data node "in<i>" (attribute index = i, output descriptor of
 * boundary input i's producer) per boundary input, the new nodes, and one
 * NetOutput whose input j becomes boundary output j.
 *
 * kiln_fusion_replace runs in phases so that it is atomic:
 *   0. validation, no edits: the boundary (live nodes, input producers outside
 *      the set, outputs on the set, no output of the set used outside unless
 *      it is a boundary output, no subgraph of the set under a node-pass
 *      walk), CanFuse, the replacement's arity (Data count and indices, one
 *      NetOutput with output_count connected inputs, no subgraphs, control
 *      edges only between new nodes, acyclic), the ReportFuse arguments;
 *      the cycle detector's update is planned;
 *   1. the new nodes are copied in (local topological order), with their
 *      data edges (from each other and from the boundary inputs) and control
 *      edges: each control source of the set from outside -> every new node
 *      without a predecessor among the new ones; every new node without a
 *      successor among them -> each control destination outside (with no new
 *      node, source -> destination directly); then ReportFuse's attributes;
 *      everything here may run out of memory, and then the added nodes and
 *      edges are removed again: the graph is as before (its JSON is the same
 *      bytes; ids handed out are not reused);
 *   2. what cannot fail: the consumers outside the set of boundary output j
 *      are re-fed from the producer of NetOutput input j (a new node, or for
 *      a Data node, boundary input i directly: a pass-through), the set is
 *      removed, new nodes that took a removed node's name get it (they were
 *      added under a temporary one), the counters grow and the cycle
 *      detector is updated (analysis_cycle.c), not rebuilt.
 * A new node whose name belongs to a node outside the set is renamed
 * "<name>_<N>".  Works on any graph (root or subgraph).
 */
#include "analysis_cycle.h"
#include "fusion_int.h"
#include "passctx.h"

#include <stdarg.h>
#include <stddef.h>

/* ---- copies and replacement graphs ------------------------------------------ */

kiln_node_id kiln_graph_copy_node(kiln_graph *dst, const kiln_graph *src, kiln_node_id n,
                                  const char *name)
{
    if (!dst || !src || dst->ctx != src->ctx || !kiln__live(src, n))
        return 0;
    const knode *k = &src->nodes[n];
    uint32_t nin = k->nin, nout = k->nout;
    kiln_node_id m = kiln_graph_add_node(dst, name ? name : kiln_node_name_str(src, n),
                                         kiln_node_op_str(src, n), nin, nout);
    if (!m)
        return 0;
    bool ok = true;
    const kiln_attrs *sa = kiln_node_attrs(src, n);
    if (sa && kiln_attrs_count(sa)) {
        kiln_attrs *da = kiln_node_attrs_mut(dst, m);
        ok = da && kiln_attrs_copy(da, sa) == KILN_OK;
    }
    for (uint32_t o = 0; o < nout && ok; o++)
        ok = kiln_desc_copy(dst, kiln_node_output_desc(dst, m, o), kiln__out_desc(src, n, o)) ==
             KILN_OK;
    for (uint32_t i = 0; i < nin && ok; i++) {
        if (!kiln_node_input_has_desc(src, n, i))
            continue;
        kiln_tensor_desc *d = kiln_node_input_desc_mut(dst, m, i);
        ok = d && kiln_desc_copy(dst, d, kiln_node_input_desc(src, n, i)) == KILN_OK;
    }
    if (!ok) {
        (void)kiln_graph_remove_node(dst, m);
        return 0;
    }
    return m;
}

static bool boundary_sized(const kiln_fusion_boundary *b)
{
    return b && b->struct_size >= KILN_SIZE_THROUGH(kiln_fusion_boundary, output_count);
}

kiln_graph *kiln_fusion_replacement_new(const kiln_graph *g, const kiln_fusion_boundary *b)
{
    if (!g || !boundary_sized(b) || (b->input_count && !b->inputs))
        return NULL;
    for (uint32_t i = 0; i < b->input_count; i++) {
        kiln_anchor a = b->inputs[i];
        if (!kiln__live(g, a.node) || a.index >= g->nodes[a.node].nout)
            return NULL;
    }
    char name[320];
    kiln__fmt(name, sizeof(name), "%s_replacement", kiln_graph_name(g));
    kiln_graph *r = kiln_graph_create(g->ctx, name);
    if (!r)
        return NULL;
    for (uint32_t i = 0; i < b->input_count; i++) {
        char dn[24];
        snprintf(dn, sizeof(dn), "in%u", i);
        kiln_node_id d = kiln_graph_add_node(r, dn, "Data", 0, 1);
        kiln_attrs *a = d ? kiln_node_attrs_mut(r, d) : NULL;
        if (!a || kiln_attrs_set_int(a, "index", i) != KILN_OK ||
            kiln_desc_copy(r, kiln_node_output_desc(r, d, 0),
                           kiln__out_desc(g, b->inputs[i].node, b->inputs[i].index)) != KILN_OK) {
            kiln_graph_destroy(r);
            return NULL;
        }
    }
    return r;
}

/* Boundary input index of Data node @p n of a replacement, or -1. */
static int64_t data_index(const kiln_graph *r, kiln_node_id n)
{
    int64_t idx = -1;
    if (strcmp(kiln_node_op_str(r, n), "Data") != 0 ||
        !kiln_attrs_get_int(kiln_node_attrs(r, n), "index", &idx))
        return -1;
    return idx;
}

kiln_node_id kiln_fusion_replacement_input(const kiln_graph *repl, uint32_t i)
{
    if (!repl)
        return 0;
    for (kiln_node_id n = kiln_graph_next_node(repl, 0); n; n = kiln_graph_next_node(repl, n))
        if (data_index(repl, n) == (int64_t)i)
            return n;
    return 0;
}

void kiln_fusion_replacement_free(kiln_graph *repl)
{
    if (repl)
        kiln_graph_destroy(repl);
}

/* ---- SubgraphRewriter::Replace ---------------------------------------------- */

typedef struct rw {
    kiln_pass_ctx *ctx;
    kiln_graph *g;
    const kiln_fusion_boundary *b;
    kiln_graph *r;
    kiln_node_id *set; /* boundary nodes, sorted by id */
    uint32_t nset;
    kiln_node_id *map;   /* replacement id -> id in g (new nodes) */
    int64_t *didx;       /* replacement id -> boundary input index (Data), -1 */
    kiln_node_id netout; /* the replacement's NetOutput */
    kiln_node_id *order; /* new nodes of the replacement, topological */
    uint32_t norder;
    kiln_node_id *added; /* their ids in g, same order */
    uint32_t nadded;
    bool *rename;                  /* per order entry: takes a removed node's name later */
    kiln_node_id (*ctrl_added)[2]; /* direct control edges (no new node) */
    uint32_t nctrl, ctrl_cap;
    kiln_node_id *csrc, *cdst; /* external control sources / destinations */
    uint32_t ncsrc, ncdst, csrc_cap, cdst_cap;
} rw;

static kiln_status rw_fail(rw *w, kiln_status st, const char *fmt, ...) KILN_PRINTF(3, 4);
static kiln_status rw_fail(rw *w, kiln_status st, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    const char *first = "?";
    if (w->g && w->b && w->b->node_count && w->b->nodes && kiln__live(w->g, w->b->nodes[0]))
        first = kiln_node_name_str(w->g, w->b->nodes[0]);
    kiln_errorf(w->ctx ? kiln_pass_error(w->ctx) : NULL, st,
                "fusion pass %s: replacing %s (graph %s): %s", kiln__passctx_pass_name(w->ctx),
                first, w->g ? kiln_graph_name(w->g) : "?", msg);
    return st;
}

static int id_cmp(const void *a, const void *b)
{
    kiln_node_id x = *(const kiln_node_id *)a, y = *(const kiln_node_id *)b;
    return x < y ? -1 : x > y;
}

static bool in_set(const rw *w, kiln_node_id n)
{
    return bsearch(&n, w->set, w->nset, sizeof(n), id_cmp) != NULL;
}

static bool is_output(const rw *w, kiln_node_id n, uint32_t o)
{
    for (uint32_t j = 0; j < w->b->output_count; j++)
        if (w->b->outputs[j].node == n && w->b->outputs[j].index == o)
            return true;
    return false;
}

static bool push_unique(kiln_node_id **v, uint32_t *n, uint32_t *cap, kiln_node_id x)
{
    for (uint32_t i = 0; i < *n; i++)
        if ((*v)[i] == x)
            return true;
    if (!KILN_GROW(*v, *cap, *n + 1))
        return false;
    (*v)[(*n)++] = x;
    return true;
}

/* Phase 0a: the boundary itself. */
static kiln_status check_boundary(rw *w)
{
    kiln_graph *g = w->g;
    const kiln_fusion_boundary *b = w->b;
    if (!b->node_count || !b->nodes)
        return rw_fail(w, KILN_ERR_INVALID, "the boundary has no nodes");
    if ((b->input_count && !b->inputs) || (b->output_count && !b->outputs))
        return rw_fail(w, KILN_ERR_INVALID, "the boundary's input or output array is NULL");
    for (uint32_t k = 0; k < b->node_count; k++)
        if (!kiln__live(g, b->nodes[k]))
            return rw_fail(w, KILN_ERR_INVALID, "boundary node id %u is not a live node",
                           b->nodes[k]);
    w->set = kiln__malloc((size_t)b->node_count * sizeof(*w->set));
    if (!w->set)
        return rw_fail(w, KILN_ERR_NOMEM, "out of memory");
    memcpy(w->set, b->nodes, (size_t)b->node_count * sizeof(*w->set));
    qsort(w->set, b->node_count, sizeof(*w->set), id_cmp);
    w->nset = b->node_count;
    for (uint32_t k = 1; k < w->nset; k++)
        if (w->set[k] == w->set[k - 1])
            return rw_fail(w, KILN_ERR_INVALID, "node %s is listed twice",
                           kiln_node_name_str(g, w->set[k]));
    for (uint32_t i = 0; i < b->input_count; i++) {
        kiln_anchor a = b->inputs[i];
        if (!kiln__live(g, a.node) || a.index >= g->nodes[a.node].nout)
            return rw_fail(w, KILN_ERR_INVALID,
                           "boundary input %u (node id %u, output %u) is not "
                           "an output of a live node",
                           i, a.node, a.index);
        if (in_set(w, a.node))
            return rw_fail(w, KILN_ERR_INVALID,
                           "boundary input %u is produced by %s, a replaced node", i,
                           kiln_node_name_str(g, a.node));
    }
    for (uint32_t j = 0; j < b->output_count; j++) {
        kiln_anchor a = b->outputs[j];
        if (!kiln__live(g, a.node) || !in_set(w, a.node) || a.index >= g->nodes[a.node].nout)
            return rw_fail(w, KILN_ERR_INVALID,
                           "boundary output %u (node id %u, output %u) is not an output of a "
                           "replaced node",
                           j, a.node, a.index);
    }
    for (uint32_t k = 0; k < w->nset; k++) {
        kiln_node_id s = w->set[k];
        kiln_graph *walked = kiln__graph_walked_below(g, s);
        if (walked)
            return rw_fail(w, KILN_ERR_INVALID,
                           "node %s owns graph %s, which a node pass is walking",
                           kiln_node_name_str(g, s), kiln_graph_name(walked));
        for (uint32_t o = 0; o < g->nodes[s].nout; o++) {
            if (is_output(w, s, o))
                continue;
            for (uint32_t u = kiln_use_first(g, s, o); u; u = kiln_use_next(g, u)) {
                kiln_anchor d = kiln_use_dst(g, u);
                if (!in_set(w, d.node))
                    return rw_fail(w, KILN_ERR_INVALID,
                                   "output %u of %s feeds %s outside the boundary but is not a "
                                   "boundary output",
                                   o, kiln_node_name_str(g, s), kiln_node_name_str(g, d.node));
            }
        }
    }
    return KILN_OK;
}

/* Phase 0b: the replacement's arity and shape; fills map/didx/order. */
static kiln_status check_replacement(rw *w)
{
    kiln_graph *r = w->r;
    const kiln_fusion_boundary *b = w->b;
    if (r->ctx != w->g->ctx)
        return rw_fail(w, KILN_ERR_INVALID, "the replacement belongs to another context");
    uint32_t lim = kiln_graph_id_limit(r);
    w->map = kiln__calloc(lim, sizeof(*w->map));
    w->didx = kiln__malloc((size_t)lim * sizeof(*w->didx));
    w->order = kiln__malloc((size_t)lim * sizeof(*w->order));
    w->added = kiln__calloc(lim, sizeof(*w->added));
    w->rename = kiln__calloc(lim, sizeof(*w->rename));
    uint32_t *indeg = kiln__calloc(lim, sizeof(*indeg));
    uint8_t *seen_idx = kiln__calloc(b->input_count + 1, 1);
    kiln_status st = KILN_OK;
    if (!w->map || !w->didx || !w->order || !w->added || !w->rename || !indeg || !seen_idx) {
        st = rw_fail(w, KILN_ERR_NOMEM, "out of memory");
        goto out;
    }
    uint32_t ndata = 0, nnet = 0, nnew = 0;
    for (kiln_node_id n = kiln_graph_next_node(r, 0); n; n = kiln_graph_next_node(r, n)) {
        const char *op = kiln_node_op_str(r, n);
        w->didx[n] = -1;
        if (kiln_node_subgraph_count(r, n)) {
            st = rw_fail(w, KILN_ERR_INVALID, "replacement node %s owns subgraphs (not supported)",
                         kiln_node_name_str(r, n));
            goto out;
        }
        if (strcmp(op, "Data") == 0) {
            int64_t idx = data_index(r, n);
            ndata++;
            if (idx < 0 || idx >= (int64_t)b->input_count || seen_idx[idx]) {
                st = rw_fail(w, KILN_ERR_INVALID,
                             "replacement Data node %s has index %lld; the boundary has %u "
                             "input(s) and each needs exactly one Data node",
                             kiln_node_name_str(r, n), (long long)idx, b->input_count);
                goto out;
            }
            seen_idx[idx] = 1;
            w->didx[n] = idx;
        } else if (strcmp(op, "NetOutput") == 0) {
            nnet++;
            w->netout = n;
        } else {
            nnew++;
        }
    }
    if (ndata != b->input_count) {
        st = rw_fail(w, KILN_ERR_INVALID,
                     "the replacement has %u Data node(s), the boundary %u "
                     "input(s)",
                     ndata, b->input_count);
        goto out;
    }
    if (nnet != 1) {
        st = rw_fail(w, KILN_ERR_INVALID,
                     "the replacement has %u NetOutput nodes, it needs "
                     "exactly one",
                     nnet);
        goto out;
    }
    uint32_t nin = kiln_node_input_count(r, w->netout);
    if (nin != b->output_count) {
        st = rw_fail(w, KILN_ERR_INVALID,
                     "the replacement's NetOutput %s has %u input(s), the "
                     "boundary %u output(s)",
                     kiln_node_name_str(r, w->netout), nin, b->output_count);
        goto out;
    }
    for (uint32_t j = 0; j < nin; j++)
        if (!kiln_node_input_peer(r, w->netout, j).node) {
            st = rw_fail(w, KILN_ERR_INVALID,
                         "input %u of the replacement's NetOutput %s is not "
                         "connected",
                         j, kiln_node_name_str(r, w->netout));
            goto out;
        }
    /* Control edges only between new nodes; in-degrees among new nodes. */
    for (kiln_node_id n = kiln_graph_next_node(r, 0); n; n = kiln_graph_next_node(r, n)) {
        bool special = w->didx[n] >= 0 || n == w->netout;
        for (uint32_t c = kiln_ctrl_out_first(r, n); c; c = kiln_ctrl_out_next(r, c)) {
            kiln_node_id d = kiln_ctrl_dst(r, c);
            if (special || w->didx[d] >= 0 || d == w->netout) {
                st = rw_fail(w, KILN_ERR_INVALID,
                             "replacement control edge %s -> %s touches a "
                             "Data or NetOutput node",
                             kiln_node_name_str(r, n), kiln_node_name_str(r, d));
                goto out;
            }
            indeg[d]++;
        }
        if (special)
            continue;
        for (uint32_t i = 0; i < kiln_node_input_count(r, n); i++) {
            kiln_node_id s = kiln_node_input_peer(r, n, i).node;
            if (s == w->netout && s) {
                st = rw_fail(w, KILN_ERR_INVALID, "replacement node %s consumes the NetOutput",
                             kiln_node_name_str(r, n));
                goto out;
            }
            if (s && w->didx[s] < 0)
                indeg[n]++;
        }
    }
    /* Kahn over the new nodes, id order among the ready ones. */
    uint32_t head = 0;
    w->norder = 0;
    for (kiln_node_id n = kiln_graph_next_node(r, 0); n; n = kiln_graph_next_node(r, n))
        if (w->didx[n] < 0 && n != w->netout && !indeg[n])
            w->order[w->norder++] = n;
    for (; head < w->norder; head++) {
        kiln_node_id n = w->order[head];
        for (uint32_t o = 0; o < kiln_node_output_count(r, n); o++)
            for (uint32_t u = kiln_use_first(r, n, o); u; u = kiln_use_next(r, u)) {
                kiln_node_id d = kiln_use_dst(r, u).node;
                if (d != w->netout && --indeg[d] == 0)
                    w->order[w->norder++] = d;
            }
        for (uint32_t c = kiln_ctrl_out_first(r, n); c; c = kiln_ctrl_out_next(r, c))
            if (--indeg[kiln_ctrl_dst(r, c)] == 0)
                w->order[w->norder++] = kiln_ctrl_dst(r, c);
    }
    if (w->norder != nnew)
        st = rw_fail(w, KILN_ERR_INVALID, "the replacement has a cycle");
out:
    kiln__free(indeg);
    kiln__free(seen_idx);
    return st;
}

/* Is replacement node @p n (a new node) fed by another new node? */
static bool has_new_pred(const rw *w, kiln_node_id n)
{
    for (uint32_t i = 0; i < kiln_node_input_count(w->r, n); i++) {
        kiln_node_id s = kiln_node_input_peer(w->r, n, i).node;
        if (s && w->didx[s] < 0)
            return true;
    }
    return kiln_ctrl_in_first(w->r, n) != 0;
}

static bool has_new_succ(const rw *w, kiln_node_id n)
{
    for (uint32_t o = 0; o < kiln_node_output_count(w->r, n); o++)
        for (uint32_t u = kiln_use_first(w->r, n, o); u; u = kiln_use_next(w->r, u))
            if (kiln_use_dst(w->r, u).node != w->netout)
                return true;
    return kiln_ctrl_out_first(w->r, n) != 0;
}

/* Undo phase 1. */
static void rollback(rw *w)
{
    for (uint32_t i = 0; i < w->nctrl; i++)
        (void)kiln_ctrl_remove(w->g, w->ctrl_added[i][0], w->ctrl_added[i][1]);
    for (uint32_t i = w->nadded; i-- > 0;)
        (void)kiln_graph_remove_node(w->g, w->added[i]);
    w->nctrl = w->nadded = 0;
}

/* Phase 1: new nodes, their edges, control edges, ReportFuse attributes. */
static kiln_status add_new(rw *w)
{
    kiln_graph *g = w->g, *r = w->r;
    char buf[512];
    for (uint32_t i = 0; i < w->norder; i++) {
        kiln_node_id n = w->order[i];
        const char *want = kiln_node_name_str(r, n), *name = want;
        kiln_node_id clash = kiln_graph_find_node(g, want);
        if (clash) {
            char base[400];
            kiln__fmt(base, sizeof(base), in_set(w, clash) ? "%s_fusing" : "%s_", want);
            name = kiln_graph_unique_name(g, base, buf, sizeof(buf));
            w->rename[i] = in_set(w, clash);
        }
        kiln_node_id m = kiln_graph_copy_node(g, r, n, name);
        if (!m)
            return rw_fail(w, KILN_ERR_NOMEM, "out of memory adding node %s", want);
        w->map[n] = m;
        w->added[w->nadded++] = m;
    }
    const kiln_fusion_boundary *b = w->b;
    for (uint32_t i = 0; i < w->norder; i++) {
        kiln_node_id n = w->order[i], m = w->map[n];
        for (uint32_t k = 0; k < kiln_node_input_count(r, n); k++) {
            kiln_anchor s = kiln_node_input_peer(r, n, k);
            if (!s.node)
                continue;
            kiln_anchor src = w->didx[s.node] >= 0 ? b->inputs[w->didx[s.node]]
                                                   : (kiln_anchor){w->map[s.node], s.index};
            if (kiln_edge_add(g, src.node, src.index, m, k) != KILN_OK)
                return rw_fail(w, KILN_ERR_NOMEM, "out of memory connecting %s",
                               kiln_node_name_str(g, m));
        }
        for (uint32_t c = kiln_ctrl_out_first(r, n); c; c = kiln_ctrl_out_next(r, c))
            if (kiln_ctrl_add(g, m, w->map[kiln_ctrl_dst(r, c)]) != KILN_OK)
                return rw_fail(w, KILN_ERR_NOMEM, "out of memory adding a control edge");
    }
    /* Control edges of the set from and to outside. */
    for (uint32_t k = 0; k < w->nset; k++) {
        kiln_node_id s = w->set[k];
        for (uint32_t c = kiln_ctrl_in_first(g, s); c; c = kiln_ctrl_in_next(g, c))
            if (!in_set(w, kiln_ctrl_src(g, c)) &&
                !push_unique(&w->csrc, &w->ncsrc, &w->csrc_cap, kiln_ctrl_src(g, c)))
                return rw_fail(w, KILN_ERR_NOMEM, "out of memory");
        for (uint32_t c = kiln_ctrl_out_first(g, s); c; c = kiln_ctrl_out_next(g, c))
            if (!in_set(w, kiln_ctrl_dst(g, c)) &&
                !push_unique(&w->cdst, &w->ncdst, &w->cdst_cap, kiln_ctrl_dst(g, c)))
                return rw_fail(w, KILN_ERR_NOMEM, "out of memory");
    }
    for (uint32_t i = 0; i < w->norder; i++) {
        kiln_node_id n = w->order[i], m = w->map[n];
        if (!has_new_pred(w, n))
            for (uint32_t k = 0; k < w->ncsrc; k++)
                if (kiln_ctrl_add(g, w->csrc[k], m) != KILN_OK)
                    return rw_fail(w, KILN_ERR_NOMEM, "out of memory adding a control edge");
        if (!has_new_succ(w, n))
            for (uint32_t k = 0; k < w->ncdst; k++)
                if (kiln_ctrl_add(g, m, w->cdst[k]) != KILN_OK)
                    return rw_fail(w, KILN_ERR_NOMEM, "out of memory adding a control edge");
    }
    if (!w->norder)
        for (uint32_t a = 0; a < w->ncsrc; a++)
            for (uint32_t d = 0; d < w->ncdst; d++) {
                kiln_node_id s = w->csrc[a], t = w->cdst[d];
                if (s == t || kiln_ctrl_exists(g, s, t))
                    continue;
                if (!KILN_GROW(w->ctrl_added, w->ctrl_cap, w->nctrl + 1) ||
                    kiln_ctrl_add(g, s, t) != KILN_OK)
                    return rw_fail(w, KILN_ERR_NOMEM, "out of memory adding a control edge");
                w->ctrl_added[w->nctrl][0] = s;
                w->ctrl_added[w->nctrl][1] = t;
                w->nctrl++;
            }
    return kiln__fusion_report_attrs(w->ctx, g, w->b->nodes, w->b->node_count, w->added, w->nadded);
}

/* Phase 2: rewire the outputs, delete the set, restore names.  Cannot fail. */
static void commit(rw *w)
{
    kiln_graph *g = w->g, *r = w->r;
    const kiln_fusion_boundary *b = w->b;
    for (uint32_t j = 0; j < b->output_count; j++) {
        kiln_anchor out = b->outputs[j];
        kiln_anchor p = kiln_node_input_peer(r, w->netout, j);
        kiln_anchor to = w->didx[p.node] >= 0 ? b->inputs[w->didx[p.node]]
                                              : (kiln_anchor){w->map[p.node], p.index};
        uint32_t nx;
        for (uint32_t u = kiln_use_first(g, out.node, out.index); u; u = nx) {
            nx = kiln_use_next(g, u);
            kiln_anchor d = kiln_use_dst(g, u);
            if (in_set(w, d.node))
                continue;
            (void)kiln_edge_remove(g, d.node, d.index);
            (void)kiln_edge_add(g, to.node, to.index, d.node, d.index);
        }
    }
    for (uint32_t k = 0; k < w->nset; k++)
        (void)kiln_graph_remove_node(g, w->set[k]);
    for (uint32_t i = 0; i < w->norder; i++)
        if (w->rename[i])
            (void)kiln_node_set_name(g, w->added[i], kiln_node_name_str(r, w->order[i]));
}

kiln_status kiln_fusion_replace(kiln_pass_ctx *ctx, kiln_graph *g, const kiln_fusion_boundary *b,
                                kiln_graph *repl)
{
    rw w = {.ctx = ctx, .g = g, .b = b, .r = repl};
    kiln_cycle_plan plan = {0};
    kiln_status st;
    if (!g || !repl || !boundary_sized(b)) {
        st = rw_fail(&w, KILN_ERR_PARAM,
                     "no graph, boundary or replacement given (or a boundary "
                     "struct_size too small)");
        goto out;
    }
    w.b = b;
    if ((st = check_boundary(&w)) != KILN_OK)
        goto out;
    if ((st = kiln__fusion_report_check(ctx, g, b->nodes, b->node_count, NULL, 0)) != KILN_OK)
        goto out;
    char reason[512];
    if (!kiln_fusion_can_fuse(g, b->nodes, b->node_count, reason, sizeof(reason))) {
        st = rw_fail(&w, KILN_ERR_CONFLICT, "CanFuse refused: %s", reason);
        goto out;
    }
    if ((st = check_replacement(&w)) != KILN_OK)
        goto out;
    kiln__cycles_plan(g, w.set, w.nset, &plan);
    if ((st = add_new(&w)) != KILN_OK) {
        rollback(&w);
        goto out;
    }
    commit(&w);
    kiln__fusion_report_count(ctx);
    kiln__cycles_commit(g, &plan, w.added, w.nadded);
    st = KILN_OK;
out:
    kiln__cycles_plan_free(&plan);
    kiln__free(w.set);
    kiln__free(w.map);
    kiln__free(w.didx);
    kiln__free(w.order);
    kiln__free(w.added);
    kiln__free(w.rename);
    kiln__free(w.ctrl_added);
    kiln__free(w.csrc);
    kiln__free(w.cdst);
    if (repl)
        kiln_graph_destroy(repl);
    return st;
}

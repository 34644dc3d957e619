/*
 * graph_edit.c - GE's graph-edit operations and compaction.
 *
 *   insert_before  GE InsertNodeBefore (GE_SEMANTICS 2.6): producer -> new ->
 *                  dst; dst's in-control edges move to the new node, except
 *                  those from AtomicAddrClean / MemSet; whitelisted string
 *                  attributes are inherited from dst.
 *   insert_after   GE InsertNodeAfter: src -> new; listed consumers re-fed from
 *                  new; src's out-control edges move to new unless src is a
 *                  Switch / RefSwitch / SwitchN.
 *   isolate_node   GE IsolateNode(node, io_map): consumers of output i are
 *                  re-fed from the producer of input io_map[i] (-1: dropped);
 *                  control predecessors are linked to every control and data
 *                  successor so ordering survives; all edges are then removed.
 *   replace_node   inputs/outputs index to index, control edges moved.
 *   compact        drops tombstones and garbage slices; optionally renumbers
 *                  in topological order ("node ids reflect it when asked").
 *
 * All edits are O(degree) except compaction, O(n + e).
 */
#include "graph_int.h"
#include "analysis.h"

/* String attributes an inserted node inherits (GE's whitelist). */
static const char *const inherit_attrs[] = {
    "_user_stream_label", "_ai_core_num", "_vector_core_num", "_super_kernel_scope",
    "_super_kernel_options",
};

static void inherit(kiln_graph *g, kiln_node_id from, kiln_node_id to)
{
    const kiln_attrs *a = kiln_node_attrs(g, from);
    if (!a)
        return;
    for (unsigned i = 0; i < KILN_ARRAY_LEN(inherit_attrs); i++) {
        const char *v;
        if (kiln_attrs_get_string(a, inherit_attrs[i], &v))
            kiln_attrs_set_string(kiln_node_attrs_mut(g, to), inherit_attrs[i], v);
    }
}

static bool op_is(const kiln_graph *g, kiln_node_id n, const char *op)
{
    return strcmp(kiln_node_op_str(g, n), op) == 0;
}

/* New 1-in/1-out node whose descriptors copy @p like. */
static kiln_node_id new_passthrough(kiln_graph *g, const char *name, const char *op,
                                    const kiln_tensor_desc *like)
{
    kiln_node_id id = kiln_graph_add_node(g, name, op, 1, 1);
    if (!id)
        return 0;
    if (like) {
        kiln_tensor_desc *od = kiln_node_output_desc(g, id, 0);
        if (kiln_desc_copy(g, od, like) != KILN_OK)
            return 0;
        kiln_desc_set_ref_input(g, od, -1);
    }
    return id;
}

kiln_node_id kiln_graph_insert_before(kiln_graph *g, kiln_node_id dst, uint32_t di,
                                      const char *name, const char *op)
{
    kiln_anchor src = kiln_node_input_peer(g, dst, di);
    if (!src.node)
        return 0;
    kiln_node_id id = new_passthrough(g, name, op, kiln_node_output_desc(g, src.node, src.index));
    if (!id)
        return 0;
    kiln_edge_remove(g, dst, di);
    if (kiln_edge_add(g, src.node, src.index, id, 0) != KILN_OK ||
        kiln_edge_add(g, id, 0, dst, di) != KILN_OK)
        return 0;
    for (uint32_t c = kiln_ctrl_in_first(g, dst); c;) {
        uint32_t next = kiln_ctrl_in_next(g, c);
        kiln_node_id pred = kiln_ctrl_src(g, c);
        if (!op_is(g, pred, "AtomicAddrClean") && !op_is(g, pred, "MemSet")) {
            kiln_ctrl_remove(g, pred, dst);
            kiln_ctrl_add(g, pred, id);
        }
        c = next;
    }
    inherit(g, dst, id);
    return g->oom ? 0 : id;
}

kiln_node_id kiln_graph_insert_after(kiln_graph *g, kiln_node_id src, uint32_t so,
                                     const kiln_anchor *dsts, uint32_t ndst, const char *name,
                                     const char *op)
{
    kiln_tensor_desc *sd = kiln_node_output_desc(g, src, so);
    if (!sd)
        return 0;
    /* Snapshot the consumers to move before editing the list. */
    uint32_t count = ndst ? ndst : kiln_node_output_use_count(g, src, so);
    kiln_anchor *list = kiln__malloc((count + 1) * sizeof(*list));
    if (!list) {
        g->oom = true;
        return 0;
    }
    if (ndst) {
        memcpy(list, dsts, ndst * sizeof(*list));
    } else {
        uint32_t k = 0;
        for (uint32_t u = kiln_use_first(g, src, so); u; u = kiln_use_next(g, u))
            list[k++] = kiln_use_dst(g, u);
    }
    kiln_node_id id = new_passthrough(g, name, op, sd);
    if (!id || kiln_edge_add(g, src, so, id, 0) != KILN_OK)
        goto fail;
    for (uint32_t i = 0; i < count; i++) {
        kiln_anchor peer = kiln_node_input_peer(g, list[i].node, list[i].index);
        if (peer.node != src || peer.index != so)
            continue; /* not a consumer of (src, so): ignore, as GE does */
        kiln_edge_remove(g, list[i].node, list[i].index);
        if (kiln_edge_add(g, id, 0, list[i].node, list[i].index) != KILN_OK)
            goto fail;
    }
    if (!op_is(g, src, "Switch") && !op_is(g, src, "RefSwitch") && !op_is(g, src, "SwitchN")) {
        for (uint32_t c = kiln_ctrl_out_first(g, src); c;) {
            uint32_t next = kiln_ctrl_out_next(g, c);
            kiln_node_id succ = kiln_ctrl_dst(g, c);
            if (succ != id) {
                kiln_ctrl_remove(g, src, succ);
                kiln_ctrl_add(g, id, succ);
            }
            c = next;
        }
    }
    inherit(g, src, id);
    kiln__free(list);
    return g->oom ? 0 : id;
fail:
    kiln__free(list);
    return 0;
}

kiln_status kiln_graph_isolate_node(kiln_graph *g, kiln_node_id n, const int32_t *io_map,
                                    uint32_t nmap)
{
    if (!kiln__live(g, n))
        return KILN_ERR_INVALID;
    knode *k = &g->nodes[n];
    if (nmap > k->nout)
        return KILN_ERR_PARAM;
    for (uint32_t o = 0; o < nmap; o++)
        if (io_map[o] >= (int32_t)k->nin)
            return KILN_ERR_PARAM;
    /* Control predecessors keep ordering w.r.t. control and data successors. */
    for (uint32_t c = kiln_ctrl_in_first(g, n); c; c = kiln_ctrl_in_next(g, c)) {
        kiln_node_id pred = kiln_ctrl_src(g, c);
        for (uint32_t d = kiln_ctrl_out_first(g, n); d; d = kiln_ctrl_out_next(g, d))
            if (kiln_ctrl_dst(g, d) != pred)
                kiln_ctrl_add(g, pred, kiln_ctrl_dst(g, d));
        for (uint32_t o = 0; o < k->nout; o++)
            for (uint32_t u = kiln_use_first(g, n, o); u; u = kiln_use_next(g, u)) {
                kiln_node_id succ = kiln_use_dst(g, u).node;
                if (succ != pred)
                    kiln_ctrl_add(g, pred, succ);
            }
    }
    /* Data: output o's consumers re-fed from the producer of input io_map[o]. */
    for (uint32_t o = 0; o < k->nout; o++) {
        kiln_anchor from = {0, 0};
        if (o < nmap && io_map[o] >= 0)
            from = kiln_node_input_peer(g, n, (uint32_t)io_map[o]);
        for (uint32_t u = kiln_use_first(g, n, o); u;) {
            uint32_t next = kiln_use_next(g, u);
            kiln_anchor dst = kiln_use_dst(g, u);
            kiln_edge_remove(g, dst.node, dst.index);
            if (from.node)
                kiln_edge_add(g, from.node, from.index, dst.node, dst.index);
            u = next;
        }
    }
    for (uint32_t i = 0; i < k->nin; i++)
        kiln_edge_remove(g, n, i);
    while (kiln_ctrl_in_first(g, n))
        kiln_ctrl_remove(g, kiln_ctrl_src(g, kiln_ctrl_in_first(g, n)), n);
    while (kiln_ctrl_out_first(g, n))
        kiln_ctrl_remove(g, n, kiln_ctrl_dst(g, kiln_ctrl_out_first(g, n)));
    return g->oom ? KILN_ERR_NOMEM : KILN_OK;
}

kiln_status kiln_graph_replace_node(kiln_graph *g, kiln_node_id old, kiln_node_id repl)
{
    if (!kiln__live(g, old) || !kiln__live(g, repl) || old == repl)
        return KILN_ERR_INVALID;
    uint32_t nin = g->nodes[old].nin, nout = g->nodes[old].nout;
    if (nin > g->nodes[repl].nin || nout > g->nodes[repl].nout)
        return KILN_ERR_PARAM;
    for (uint32_t i = 0; i < nin; i++) {
        kiln_anchor p = kiln_node_input_peer(g, old, i);
        if (!p.node)
            continue;
        kiln_edge_remove(g, old, i);
        kiln_edge_remove(g, repl, i);
        kiln_edge_add(g, p.node, p.index, repl, i);
    }
    for (uint32_t o = 0; o < nout; o++) {
        for (uint32_t u = kiln_use_first(g, old, o); u;) {
            uint32_t next = kiln_use_next(g, u);
            kiln_anchor dst = kiln_use_dst(g, u);
            kiln_edge_remove(g, dst.node, dst.index);
            kiln_edge_add(g, repl, o, dst.node, dst.index);
            u = next;
        }
    }
    for (uint32_t c = kiln_ctrl_in_first(g, old); c; c = kiln_ctrl_in_next(g, c))
        if (kiln_ctrl_src(g, c) != repl)
            kiln_ctrl_add(g, kiln_ctrl_src(g, c), repl);
    for (uint32_t c = kiln_ctrl_out_first(g, old); c; c = kiln_ctrl_out_next(g, c))
        if (kiln_ctrl_dst(g, c) != repl)
            kiln_ctrl_add(g, repl, kiln_ctrl_dst(g, c));
    return kiln_graph_remove_node(g, old);
}

/* ---- compaction --------------------------------------------------------- */

kiln_status kiln_graph_compact(kiln_graph *g, bool topo, uint32_t **old_to_new, kiln_error *err)
{
    uint32_t lim = g->node_limit;
    kiln_node_id *order = kiln__malloc((size_t)(g->live + 1) * sizeof(*order));
    uint32_t *map = kiln__calloc(lim, sizeof(uint32_t));
    knode *nodes = kiln__malloc((size_t)(g->live + 1) * sizeof(knode));
    knode_cold *cold = kiln__malloc((size_t)(g->live + 1) * sizeof(knode_cold));
    uint32_t nin_total = 1, nout_total = 1;
    kuse *in = NULL;
    kiln_tensor_desc **out = NULL, **in_desc = NULL;
    kctrl *ctrl = NULL;
    uint32_t *heads = NULL; /* the new out_head[] */
    uint32_t *cmap = NULL;  /* old control record -> new */
    kiln_status st = KILN_OK;
    if (!order || !map || !nodes || !cold) {
        st = kiln_errorf(err, KILN_ERR_NOMEM, "out of memory compacting graph %s",
                         kiln_graph_name(g));
        goto done;
    }
    if (topo) {
        /* The cached analysis: Kahn's order, id-order tie-break, cycle named. */
        const kiln_node_id *t;
        uint32_t nt;
        if ((st = kiln_graph_topo_order(g, &t, &nt, err)) != KILN_OK)
            goto done;
        memcpy(order, t, (size_t)nt * sizeof(*order));
    } else {
        uint32_t k = 0;
        for (kiln_node_id n = 1; n < lim; n++)
            if (kiln__live(g, n))
                order[k++] = n;
    }
    for (uint32_t k = 0; k < g->live; k++) {
        map[order[k]] = k + 1;
        nin_total += g->nodes[order[k]].nin;
        nout_total += g->nodes[order[k]].nout;
    }
    in = kiln__calloc(nin_total, sizeof(kuse));
    out = kiln__calloc(nout_total, sizeof(*out));
    heads = kiln__calloc(nout_total, sizeof(*heads));
    if (g->in_desc)
        in_desc = kiln__calloc(nin_total, sizeof(*in_desc));
    if (!in || !out || !heads || (g->in_desc && !in_desc)) {
        st = kiln_errorf(err, KILN_ERR_NOMEM, "out of memory compacting graph %s",
                         kiln_graph_name(g));
        goto done;
    }
    uint32_t ip = 1, op = 1;
    memset(&nodes[0], 0, sizeof(knode));
    nodes[0].flags = KILN_NODEF_DEAD;
    memset(&cold[0], 0, sizeof(knode_cold));
    for (uint32_t k = 0; k < g->live; k++) {
        kiln_node_id o = order[k];
        knode nk = g->nodes[o];
        for (uint32_t i = 0; i < nk.nin; i++) {
            in[ip + i].dst = k + 1;
            if (in_desc)
                in_desc[ip + i] = g->in_desc[nk.in_off + i];
        }
        for (uint32_t j = 0; j < nk.nout; j++)
            out[op + j] = g->out[nk.out_off + j];
        nk.in_off = ip;
        nk.out_off = op;
        ip += nk.nin;
        op += nk.nout;
        nodes[k + 1] = nk;
        cold[k + 1] = g->cold[o];
        nodes[k + 1].ctrl_in = nodes[k + 1].ctrl_out = 0;
    }
    /* Rebuild consumer lists, walking each old list so creation order is kept. */
    {
        for (kiln_node_id n = 1; n < lim; n++) {
            if (!kiln__live(g, n))
                continue;
            for (uint32_t j = 0; j < g->nodes[n].nout; j++) {
                uint32_t *h = &heads[nodes[map[n]].out_off + j];
                for (uint32_t r = g->out_head[g->nodes[n].out_off + j]; r; r = g->in[r].next) {
                    kiln_node_id d = g->in[r].dst;
                    uint32_t nr = nodes[map[d]].in_off + (r - g->nodes[d].in_off);
                    in[nr].src = map[n];
                    in[nr].src_idx = j;
                    kiln__use_append(in, h, nr);
                }
            }
        }
    }
    /* Control edges: re-add in old out-list order; cmap takes an old record
     * to its new one so the in-lists are rebuilt without searching. */
    uint32_t nctrl = 1;
    for (uint32_t c = 1; c < g->ctrl_len; c++)
        if (g->ctrl[c].src)
            nctrl++;
    ctrl = kiln__calloc(nctrl, sizeof(kctrl));
    cmap = kiln__malloc(((size_t)g->ctrl_len + 1) * sizeof(*cmap));
    if (!ctrl || !cmap) {
        st = kiln_errorf(err, KILN_ERR_NOMEM, "out of memory compacting graph %s",
                         kiln_graph_name(g));
        goto done;
    }
    uint32_t cp = 1;
    for (uint32_t k = 0; k < g->live; k++) {
        kiln_node_id o = order[k];
        for (uint32_t c = g->nodes[o].ctrl_out; c; c = g->ctrl[c].out_next) {
            ctrl[cp].src = k + 1;
            ctrl[cp].dst = map[g->ctrl[c].dst];
            KILN_CTRL_APPEND(ctrl, nodes[k + 1].ctrl_out, cp, out_prev, out_next);
            cmap[c] = cp++;
        }
    }
    /* In-lists in old in-list order. */
    for (uint32_t k = 0; k < g->live; k++) {
        kiln_node_id o = order[k];
        for (uint32_t c = g->nodes[o].ctrl_in; c; c = g->ctrl[c].in_next)
            KILN_CTRL_APPEND(ctrl, nodes[k + 1].ctrl_in, cmap[c], in_prev, in_next);
    }
    /* Owner map and subgraph parent links follow the renumbering (the last
     * step that can fail before the graph is changed). */
    if (!kiln__owners_renumber(g, map)) {
        st = kiln_errorf(err, KILN_ERR_NOMEM, "out of memory compacting graph %s",
                         kiln_graph_name(g));
        goto done;
    }
    kiln__free(g->nodes);
    kiln__free(g->cold);
    kiln__free(g->in);
    kiln__free(g->out);
    kiln__free(g->out_head);
    kiln__free(g->in_desc);
    kiln__free(g->ctrl);
    g->nodes = nodes;
    g->cold = cold;
    g->node_cap = g->live + 1;
    g->node_limit = g->live + 1;
    g->in = in;
    g->in_cap = g->in_len = nin_total;
    g->in_desc = in_desc;
    g->out = out;
    g->out_head = heads;
    g->out_cap = g->out_len = nout_total;
    g->ctrl = ctrl;
    g->ctrl_cap = g->ctrl_len = nctrl;
    g->ctrl_free = 0;
    nodes = NULL;
    cold = NULL;
    in = NULL;
    out = NULL;
    heads = NULL;
    in_desc = NULL;
    ctrl = NULL;
    if (!kiln__name_index_rebuild(g)) {
        st = kiln_errorf(err, KILN_ERR_NOMEM, "out of memory compacting graph %s",
                         kiln_graph_name(g));
        goto done;
    }
    kiln__mutated(g, true);
    if (old_to_new) {
        *old_to_new = map;
        map = NULL;
    }
done:
    kiln__free(cmap);
    kiln__free(heads);
    kiln__free(order);
    kiln__free(map);
    kiln__free(nodes);
    kiln__free(cold);
    kiln__free(in);
    kiln__free(out);
    kiln__free(in_desc);
    kiln__free(ctrl);
    return st;
}

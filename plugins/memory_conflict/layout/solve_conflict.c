/*
 * solve_conflict.c - GE MemLayoutConflictOptimizer::SolveConflict and
 * MemLayoutConflictUtil::CreateIdentityOpDesc (GE_SEMANTICS.md 3.7): where
 * the isolating Identity goes and what it carries.
 *
 * Conflict anchors are handled in the order of their keys
 * ("<node>_in_<i>" / "<node>_out_<i>", strcmp).
 *   in-anchor   skipped when its shape is unknown or its producer already is
 *               an Identity / MemcpyAsync / MemcpyAddrAsync feeding only it
 *               (that makes the pass idempotent); else an Identity is
 *               inserted before it (kiln_graph_insert_before, GE
 *               InsertNodeBefore);
 *   out-anchor  skipped when its shape is unknown, it has no consumer, or its
 *               only consumer is such a copy; else one Identity is inserted
 *               after it, feeding all former consumers (kiln_graph_insert_after).
 * The Identity is named identity_<inIdx>_<dstNode>_MemLayoutConflict_<N>
 * (first destination input; N counts this run's Identities, skipping names
 * already taken); its descriptors copy the producer's output descriptor with
 * reuse_input and ref_var_src_var_name removed; attrs
 * no_need_constant_folding=false and _cannot_be_deleted=true; _stream_label and
 * _rts_label_node are copied from the destination node, a non-empty
 * _batch_label from the source node; _is_connected_to_data moves from the
 * destination to the Identity and _is_connected_to_netoutput from the source.
 * A NetOutput destination hands the data offset of its input descriptor to the
 * Identity's input (its own reset to 0) and both get is_input_const refreshed.
 * Multi-anchor Identities (CtrlNodeConflict) have inputs/outputs wired index
 * by index and take over the destination's in-control edges, as
 * InsertNodeBefore does.
 */
#include "mlc_pass.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool skip_output(kiln_graph *g, kiln_node_id n, uint32_t o)
{
    if (mlc_desc_unknown(kiln_node_output_desc(g, n, o)))
        return true;
    uint32_t uses = kiln_node_output_use_count(g, n, o);
    if (uses == 0)
        return true;
    return uses == 1 && mlc_is_memcpy_like(g, kiln_use_dst(g, kiln_use_first(g, n, o)).node);
}

/* A free name identity_<idx>_<dst>_MemLayoutConflict_<N>. */
static void identity_name(mlc_run *run, kiln_graph *g, uint32_t idx, kiln_node_id dst, char *buf,
                          size_t size)
{
    do
        snprintf(buf, size, "identity_%u_%s_MemLayoutConflict_%u", idx, kiln_node_name_str(g, dst),
                 run->counter++);
    while (kiln_graph_find_node(g, buf));
}

static void clean_desc(kiln_graph *g, kiln_tensor_desc *d)
{
    kiln_desc_set_ref_input(g, d, -1);
    if (!kiln_desc_attrs(d))
        return;
    kiln_attrs *a = kiln_desc_attrs_mut(g, d);
    kiln_attrs_remove(a, "reuse_input");
    kiln_attrs_remove(a, "reuse_input_index");
    kiln_attrs_remove(a, "ref_var_src_var_name");
}

/* Move a true bool attribute @p key from @p from to @p to (GE CopyAttr). */
static void move_flag(kiln_graph *g, kiln_node_id from, kiln_node_id to, const char *key)
{
    if (mc_node_bool(g, from, key)) {
        kiln_attrs_set_bool(kiln_node_attrs_mut(g, from), key, false);
        kiln_attrs_set_bool(kiln_node_attrs_mut(g, to), key, true);
    }
}

/* GE CopyAttr(src, dst, identity). */
static void copy_attrs(kiln_graph *g, kiln_node_id src, kiln_node_id dst, kiln_node_id id)
{
    const char *s;
    bool b;
    kiln_attrs *ia = kiln_node_attrs_mut(g, id);
    if (kiln_attrs_get_string(kiln_node_attrs(g, dst), "_stream_label", &s))
        kiln_attrs_set_string(ia, "_stream_label", s);
    if (kiln_attrs_get_bool(kiln_node_attrs(g, dst), "_rts_label_node", &b))
        kiln_attrs_set_bool(ia, "_rts_label_node", b);
    if (kiln_attrs_get_string(kiln_node_attrs(g, src), "_batch_label", &s) && s[0])
        kiln_attrs_set_string(ia, "_batch_label", s);
    move_flag(g, dst, id, "_is_connected_to_data");
    move_flag(g, src, id, "_is_connected_to_netoutput");
}

/* GE SetNotDeleteAttr. */
static void mark_keep(kiln_graph *g, kiln_node_id id)
{
    kiln_attrs *ia = kiln_node_attrs_mut(g, id);
    kiln_attrs_set_bool(ia, "no_need_constant_folding", false);
    kiln_attrs_set_bool(ia, "_cannot_be_deleted", true);
}

/* GE NodeUtils::UpdateIsInputConst: is_input_const[i] = input i fed by a constant. */
static void update_is_input_const(kiln_graph *g, kiln_node_id n)
{
    uint32_t nin = kiln_node_input_count(g, n);
    uint8_t *v = calloc(nin ? nin : 1, 1);
    if (!v)
        return;
    for (uint32_t i = 0; i < nin; i++) {
        kiln_anchor p = kiln_node_input_peer(g, n, i);
        v[i] = p.node && mlc_is_const(g, p.node);
    }
    kiln_attrs_set_list_bool(kiln_node_attrs_mut(g, n), "is_input_const", v, nin);
    free(v);
}

/* GE UpdateIsInputConstForNetoutput for input @p di of @p dst, now fed by
 * input @p ii of Identity @p id. */
static void netoutput_fix(kiln_graph *g, kiln_node_id id, uint32_t ii, kiln_node_id dst,
                          uint32_t di)
{
    if (!mlc_is_netoutput(g, dst))
        return;
    update_is_input_const(g, id);
    if (kiln_node_input_has_desc(g, dst, di)) {
        kiln_tensor_desc *nd = kiln_node_input_desc_mut(g, dst, di);
        int64_t off = kiln_desc_offset(nd);
        if (off >= 0) {
            kiln_desc_set_offset(g, kiln_node_input_desc_mut(g, id, ii), off);
            kiln_desc_set_offset(g, nd, 0);
        }
    }
    update_is_input_const(g, dst);
}

static void explain(mlc_run *run, kiln_graph *g, kiln_node_id id, const char *why)
{
    kiln_pass_explain(run->ctx, g, id, "%s", why);
    kiln_pass_stat_add(run->ctx, "identities inserted", 1);
    run->inserted++;
}

/* Move @p dst's in-control edges (except from AtomicAddrClean / MemSet) to @p id. */
static void move_ctrl_in(kiln_graph *g, kiln_node_id dst, kiln_node_id id)
{
    for (uint32_t c = kiln_ctrl_in_first(g, dst); c;) {
        uint32_t next = kiln_ctrl_in_next(g, c);
        kiln_node_id pred = kiln_ctrl_src(g, c);
        if (!mc_op_is(g, pred, "AtomicAddrClean") && !mc_op_is(g, pred, "MemSet")) {
            kiln_ctrl_remove(g, pred, dst);
            kiln_ctrl_add(g, pred, id);
        }
        c = next;
    }
}

static kiln_status insert_multi(mlc_run *run, kiln_graph *g, const kiln_anchor *dsts, uint32_t n,
                                const char *name, kiln_node_id *out)
{
    kiln_node_id id = kiln_graph_add_node(g, name, "Identity", n, n);
    if (!id)
        return kiln_errorf(run->err, KILN_ERR_NOMEM, "cannot add %s", name);
    bool one_dst = true;
    for (uint32_t i = 0; i < n; i++) {
        kiln_anchor p = kiln_node_input_peer(g, dsts[i].node, dsts[i].index);
        kiln_tensor_desc *od = kiln_node_output_desc(g, id, i);
        kiln_desc_copy(g, od, kiln_node_output_desc(g, p.node, p.index));
        clean_desc(g, od);
        kiln_edge_remove(g, dsts[i].node, dsts[i].index);
        if (kiln_edge_add(g, p.node, p.index, id, i) != KILN_OK ||
            kiln_edge_add(g, id, i, dsts[i].node, dsts[i].index) != KILN_OK)
            return kiln_errorf(run->err, KILN_ERR_NOMEM, "cannot wire %s", name);
        one_dst = one_dst && dsts[i].node == dsts[0].node;
    }
    if (one_dst)
        move_ctrl_in(g, dsts[0].node, id);
    *out = id;
    return KILN_OK;
}

kiln_status mlc_insert_before_inputs(mlc_run *run, kiln_graph *g, const kiln_anchor *dsts,
                                     uint32_t n, const char *why)
{
    char name[256];
    if (n == 0)
        return KILN_OK;
    identity_name(run, g, dsts[0].index, dsts[0].node, name, sizeof(name));
    kiln_node_id id = 0;
    for (uint32_t i = 0; i < n; i++)
        if (!kiln_node_input_peer(g, dsts[i].node, dsts[i].index).node)
            return kiln_errorf(run->err, KILN_ERR_INVALID, "input %s:%u is not connected",
                               kiln_node_name_str(g, dsts[i].node), dsts[i].index);
    if (n == 1) {
        id = kiln_graph_insert_before(g, dsts[0].node, dsts[0].index, name, "Identity");
        if (!id)
            return kiln_errorf(run->err, KILN_ERR_NOMEM, "cannot insert %s before %s:%u", name,
                               kiln_node_name_str(g, dsts[0].node), dsts[0].index);
        clean_desc(g, kiln_node_output_desc(g, id, 0));
    } else {
        kiln_status st = insert_multi(run, g, dsts, n, name, &id);
        if (st != KILN_OK)
            return st;
    }
    for (uint32_t i = 0; i < n; i++)
        copy_attrs(g, kiln_node_input_peer(g, id, i).node, dsts[i].node, id);
    mark_keep(g, id);
    for (uint32_t i = 0; i < n; i++)
        netoutput_fix(g, id, i, dsts[i].node, dsts[i].index);
    explain(run, g, id, why);
    return KILN_OK;
}

static kiln_status insert_after_output(mlc_run *run, kiln_graph *g, kiln_node_id src, uint32_t so,
                                       const char *why)
{
    char name[256];
    kiln_anchor first = kiln_use_dst(g, kiln_use_first(g, src, so));
    uint32_t cnt = kiln_node_output_use_count(g, src, so);
    kiln_anchor *peers = malloc(cnt * sizeof(*peers));
    if (!peers)
        return kiln_errorf(run->err, KILN_ERR_NOMEM, "out of memory");
    uint32_t k = 0;
    for (uint32_t u = kiln_use_first(g, src, so); u && k < cnt; u = kiln_use_next(g, u))
        peers[k++] = kiln_use_dst(g, u);
    identity_name(run, g, first.index, first.node, name, sizeof(name));
    kiln_node_id id = kiln_graph_insert_after(g, src, so, peers, k, name, "Identity");
    if (!id) {
        free(peers);
        return kiln_errorf(run->err, KILN_ERR_NOMEM, "cannot insert %s after %s:%u", name,
                           kiln_node_name_str(g, src), so);
    }
    clean_desc(g, kiln_node_output_desc(g, id, 0));
    copy_attrs(g, src, first.node, id);
    mark_keep(g, id);
    for (uint32_t i = 0; i < k; i++)
        netoutput_fix(g, id, 0, peers[i].node, peers[i].index);
    free(peers);
    explain(run, g, id, why);
    return KILN_OK;
}

/* Sort entry: the conflict and its key. */
typedef struct keyed {
    char key[200];
    const mlc_conflict *c;
} keyed;

static int cmp_keyed(const void *x, const void *y)
{
    const keyed *a = x, *b = y;
    int d = strcmp(a->key, b->key);
    if (d)
        return d;
    return strcmp(kiln_graph_name(a->c->anchor.graph), kiln_graph_name(b->c->anchor.graph));
}

kiln_status mlc_solve_conflicts(mlc_run *run, mlc_conflict *c, uint32_t n)
{
    if (n == 0)
        return KILN_OK;
    keyed *k = malloc(n * sizeof(*k));
    if (!k)
        return kiln_errorf(run->err, KILN_ERR_NOMEM, "out of memory");
    for (uint32_t i = 0; i < n; i++) {
        mlc_anchor_key(&c[i].anchor, k[i].key, sizeof(k[i].key));
        k[i].c = &c[i];
    }
    qsort(k, n, sizeof(*k), cmp_keyed);
    kiln_status st = KILN_OK;
    for (uint32_t i = 0; i < n && st == KILN_OK; i++) {
        const kiln_mem_anchor *a = &k[i].c->anchor;
        if (!kiln_node_is_live(a->graph, a->node))
            continue;
        if (a->is_output) {
            if (!skip_output(a->graph, a->node, a->index))
                st = insert_after_output(run, a->graph, a->node, a->index, k[i].c->why);
        } else if (!mlc_skip_input(a->graph, a->node, a->index)) {
            kiln_anchor d = {a->node, a->index};
            st = mlc_insert_before_inputs(run, a->graph, &d, 1, k[i].c->why);
        }
    }
    free(k);
    return st;
}

/*
 * inner_identity_delete.c - InnerIdentityDeletePass (GE's
 * InnerIdentityDeletePass), a graph pass over the root graph and every
 * subgraph.
 *
 * It deletes the Identity nodes kiln or a plugin inserted for its own needs
 * and marked `_inner_identity` (GE's marker), when they do nothing, with
 * GE's rules:
 *   - never when the Identity's input is a Const/Constant (it may be written
 *     through the copy);
 *   - the tensor memory scope rule: when the Identity's output carries
 *     `_tensor_memory_scope`, it stays unless its input comes from a Data
 *     node; when one of its consumers' outputs carries it, it stays if its
 *     input comes from a Data node;
 *   - then it is deleted when no consumer is a reference node (node attribute
 *     `reference`, or an output with `ref_input`), or when one is and the
 *     copy is not needed to order the write: the input has one consumer and
 *     the Identity one (GE's case two); the input has one consumer and every
 *     other consumer of the Identity is reachable from the reference node
 *     (case three); the Identity has one consumer and the reference node is
 *     reachable from every other consumer of the input (case four); or both
 *     (case five).  A consumer that is itself an inner Identity stands for
 *     the reference node it feeds.
 * kiln adds its common safety rules: never a `_cannot_be_deleted` node (the
 * memory-conflict passes' isolation copies are not inner identities, and
 * carry that mark), never one feeding a NetOutput.  GE's StableRDFS topo
 * sorting shortcut is not modelled (kiln's schedule is not that mode).
 * Counter: "inner identities deleted".  O(N) plus a reachability query per
 * Identity that feeds a reference node.
 */
#include "passes.h"
#include "simplify.h"

#include <string.h>

static bool bool_attr(const kiln_attrs *a, const char *key)
{
    bool v = false;
    return kiln_attrs_get_bool(a, key, &v) && v;
}

static bool is_inner_identity(const kiln_graph *g, kiln_node_id n, const simp_syms *s)
{
    return simp_op_is(g, n, s->identity) && bool_attr(kiln_node_attrs(g, n), "_inner_identity");
}

static bool has_memory_scope(kiln_graph *g, kiln_node_id n)
{
    for (uint32_t o = 0; o < kiln_node_output_count(g, n); o++)
        if (kiln_attrs_has(kiln_desc_attrs(kiln_node_output_desc(g, n, o)), "_tensor_memory_scope"))
            return true;
    return false;
}

static bool input_from_data(const kiln_graph *g, kiln_node_id n, const simp_syms *s)
{
    for (uint32_t i = 0; i < kiln_node_input_count(g, n); i++) {
        kiln_node_id p = kiln_node_input_peer(g, n, i).node;
        if (p && (simp_op_is(g, p, s->data) || simp_op_is(g, p, s->refdata)))
            return true;
    }
    return false;
}

/* GE IsCannotDelete: the tensor memory scope rule. */
static bool scope_keeps(kiln_graph *g, kiln_node_id n, const simp_syms *s)
{
    if (has_memory_scope(g, n))
        return !input_from_data(g, n, s);
    for (uint32_t u = kiln_use_first(g, n, 0); u; u = kiln_use_next(g, u))
        if (has_memory_scope(g, kiln_use_dst(g, u).node))
            return input_from_data(g, n, s);
    return false;
}

static bool is_ref_node(kiln_graph *g, kiln_node_id n)
{
    if (bool_attr(kiln_node_attrs(g, n), "reference"))
        return true;
    for (uint32_t o = 0; o < kiln_node_output_count(g, n); o++)
        if (kiln_desc_ref_input(kiln_node_output_desc(g, n, o)) >= 0)
            return true;
    return false;
}

static kiln_node_id find_ref_consumer(kiln_graph *g, kiln_node_id n)
{
    for (uint32_t u = kiln_use_first(g, n, 0); u; u = kiln_use_next(g, u))
        if (is_ref_node(g, kiln_use_dst(g, u).node))
            return kiln_use_dst(g, u).node;
    return 0;
}

/* GE FindRealOutNode: an inner Identity stands for the reference node it feeds. */
static kiln_node_id real_out(kiln_graph *g, kiln_node_id n, const simp_syms *s)
{
    return is_inner_identity(g, n, s) ? find_ref_consumer(g, n) : n;
}

/* Every consumer of output @p src other than @p skip satisfies the reachability
 * test against @p ref (from ref to it when @p from_ref, else from it to ref). */
static bool others_ordered(kiln_graph *g, kiln_anchor src, kiln_node_id skip, kiln_node_id ref,
                           bool from_ref, const simp_syms *s)
{
    for (uint32_t u = kiln_use_first(g, src.node, src.index); u; u = kiln_use_next(g, u)) {
        kiln_node_id m = kiln_use_dst(g, u).node;
        if (m == skip)
            continue;
        kiln_node_id r = real_out(g, m, s);
        if (!r || !(from_ref ? kiln_graph_reachable(g, ref, r) : kiln_graph_reachable(g, r, ref)))
            return false;
    }
    return true;
}

/* GE DeleteInnerIdentity's cases; true when the Identity can go. */
static bool deletable(kiln_graph *g, kiln_node_id n, kiln_anchor in, const simp_syms *s)
{
    if (simp_op_is(g, in.node, s->cnst) || simp_op_is(g, in.node, s->constant))
        return false;
    kiln_node_id ref = find_ref_consumer(g, n);
    if (!ref)
        return true; /* no consumer is a reference node */
    uint32_t in_uses = kiln_node_output_use_count(g, in.node, in.index);
    uint32_t out_uses = kiln_node_output_use_count(g, n, 0);
    bool others_after_ref = others_ordered(g, (kiln_anchor){n, 0}, ref, ref, true, s);
    if (in_uses == 1)
        return out_uses == 1 || others_after_ref;
    bool ref_after_others = others_ordered(g, in, n, ref, false, s);
    return out_uses == 1 ? ref_after_others : (others_after_ref && ref_after_others);
}

static kiln_status run_graph(kiln_pass_ctx *ctx, kiln_graph *g, const simp_syms *s,
                             uint32_t *removed)
{
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n)) {
        if (!is_inner_identity(g, n, s) || simp_pinned(g, n) || kiln_node_input_count(g, n) != 1 ||
            kiln_node_output_count(g, n) != 1 || simp_feeds_netoutput(g, n, 0, s))
            continue;
        kiln_anchor in = kiln_node_input_peer(g, n, 0);
        if (!in.node || scope_keeps(g, n, s) || !deletable(g, n, in, s))
            continue;
        kiln_pass_explain(ctx, g, n, "deleted: inner Identity of %s:%u does nothing",
                          kiln_node_name_str(g, in.node), in.index);
        static const int32_t io_map[] = {0};
        kiln_status st = kiln_graph_isolate_node(g, n, io_map, 1);
        if (st == KILN_OK)
            st = kiln_graph_remove_node(g, n);
        if (st != KILN_OK)
            return kiln_errorf(kiln_pass_error(ctx), st, "graph %s: cannot delete %s",
                               kiln_graph_name(g), kiln_node_name_str(g, n));
        (*removed)++;
    }
    return KILN_OK;
}

static kiln_pass_result run(void *inst, kiln_pass_ctx *ctx, kiln_graph *root)
{
    (void)inst;
    simp_syms s;
    simp_syms_init(&s, root);
    uint32_t removed = 0;
    if (run_graph(ctx, root, &s, &removed) != KILN_OK)
        return KILN_PASS_FAILED;
    for (uint32_t i = 0; i < kiln_graph_all_subgraph_count(root); i++)
        if (run_graph(ctx, kiln_graph_all_subgraph(root, i), &s, &removed) != KILN_OK)
            return KILN_PASS_FAILED;
    kiln_pass_stat_add(ctx, "inner identities deleted", removed);
    return removed ? KILN_PASS_CHANGED : KILN_PASS_NOT_CHANGED;
}

const kiln_pass_desc kiln_inner_identity_delete_pass = {
    .struct_size = sizeof(kiln_pass_desc),
    .kind = KILN_PASS_KIND_GRAPH,
    .name = "InnerIdentityDeletePass",
    .summary = "delete `_inner_identity` Identity nodes that do nothing (GE's rules)",
    .run_graph = run,
};

/*
 * handle_memory_rw_conflict.c - HandleMemoryRWConflict, GE's semantic-level
 * read/write conflict handler (GraphOptimize::HandleMemoryRWConflict,
 * GE_SEMANTICS 2; docs/memory_rw_conflict.md).
 *
 * A graph pass run on the root only (KILN_PASS_NO_SUBGRAPHS): like GE it
 * handles every node of the root and of all subgraphs itself.
 *   1. MarkRefRelations, MarkRWTypeForAllSubgraph (rw_types.c).
 *   2. For every node of the GE GetAllNodes order (pre-order: a node, then
 *      the nodes of each of its subgraphs), snapshot taken before the loop:
 *      skip nodes of While-family subgraphs, subgraph Data / NetOutput and
 *      nodes marked `_cannot_be_deleted`; an Identity / ReadVariableOp is
 *      first split and possibly removed (split_identity.c); then
 *      InsertIdentityAsNeeded: for each output, the output RW type against
 *      each consumer's input RW type in the 4x3 matrix, with GE's "skip the
 *      last link" rule and the `_skip_rw_conflict` consumer skip.
 *
 * Requires: a verified graph.  Preserves: nothing (inserts/removes Identity
 * nodes, sets `reference` on ref nodes).  Invalidates: topo order, symtab.
 * Complexity: O(N + E) type queries over all graphs; each query is
 * O(degree + #subgraphs) (rw_types.c).
 *
 * Explanations (kiln -v, --report) name the matrix cell for every Identity
 * inserted and the rule for every Identity removed.
 */
#include "rw_conflict.h"

/* GE NeedCheckSkipIdentiy: may the last scope-writeable link go without a copy? */
static bool need_check_skip(kiln_graph *g, kiln_node_id n, uint32_t o, rw_out t)
{
    if (t == RW_OUT_READ_ONLY)
        return true;
    if (t != RW_OUT_WRITEABLE)
        return false;
    /* Walk back along the ref chain while the memory has a single user. */
    for (uint32_t steps = kiln_graph_id_limit(g); steps-- > 0;) {
        if (kiln_node_output_use_count(g, n, o) > 1)
            return false;
        if (rw_is_data_like(g, n))
            return !kiln_attrs_has(kiln_node_attrs(g, n), "_parent_node_index");
        int32_t k = rw_ref_input_of_output(g, n, o);
        if (k < 0)
            return true; /* not a ref node, or not a ref output */
        kiln_anchor p = kiln_node_input_peer(g, n, (uint32_t)k);
        if (!p.node)
            return false;
        n = p.node;
        o = p.index;
    }
    return false;
}

static kiln_status insert_as_needed(rw_ctx *c, kiln_graph *g, kiln_node_id n)
{
    uint32_t total = rw_data_out_count(g, n);
    if (total == 0)
        return KILN_OK;
    kiln_anchor *uses = kiln_alloc((size_t)total * sizeof(*uses));
    if (!uses)
        return kiln_errorf(kiln_pass_error(c->pc), KILN_ERR_NOMEM, "out of memory");
    kiln_status st = KILN_OK;
    for (uint32_t o = 0; o < kiln_node_output_count(g, n) && st == KILN_OK; o++) {
        rw_out ot = rw_output_type(c, g, n, o);
        uint32_t cnt = 0;
        for (uint32_t u = kiln_use_first(g, n, o); u && cnt < total; u = kiln_use_next(g, u))
            uses[cnt++] = kiln_use_dst(g, u);
        bool skip = need_check_skip(g, n, o, ot);
        kiln_node_id linked = 0;
        for (uint32_t j = 0; j < cnt; j++) {
            kiln_anchor dst = uses[j];
            if (c->skip_rw_conflict && mc_node_bool(g, dst.node, "_skip_rw_conflict"))
                continue; /* already handled by HcclMemcpyPass */
            rw_in it = rw_input_type(c, g, dst.node, dst.index, false);
            rw_result r = rw_matrix(ot, it);
            if (skip) {
                /* Stays true only while every link goes to one scope-writeable node. */
                if (!linked)
                    linked = dst.node;
                skip = linked == dst.node && it == RW_IN_SCOPE_WRITEABLE;
            }
            if (r != RW_INSERT_IDENTITY) {
                skip = false;
                continue;
            }
            if (j == cnt - 1 && skip) {
                kiln_diag(c->pc, KILN_SEV_DEBUG,
                          "%s:%u (%s) -> %s:%u (%s): last link, every link goes to this "
                          "scope-writing node (GE skip rule): no Identity",
                          kiln_node_name_str(g, n), o, rw_out_name(ot),
                          kiln_node_name_str(g, dst.node), dst.index, rw_in_name(it));
                continue;
            }
            kiln_node_id id = rw_identity_before(c, g, dst.node, dst.index, n, o);
            if (!id) {
                st = kiln_errorf(kiln_pass_error(c->pc), KILN_ERR_NOMEM,
                                 "cannot insert an Identity between %s:%u and %s:%u",
                                 kiln_node_name_str(g, n), o, kiln_node_name_str(g, dst.node),
                                 dst.index);
                break;
            }
            kiln_pass_explain(c->pc, g, id,
                              "RW conflict: output %s:%u (%s, %s) consumed by %s:%u (%s, %s "
                              "input); matrix %s x %s = Identity -> Identity before %s:%u",
                              kiln_node_name_str(g, n), o, kiln_node_op_str(g, n), rw_out_name(ot),
                              kiln_node_name_str(g, dst.node), dst.index,
                              kiln_node_op_str(g, dst.node), rw_in_name(it), rw_out_name(ot),
                              rw_in_name(it), kiln_node_name_str(g, dst.node), dst.index);
        }
    }
    kiln_free(uses);
    return st;
}

static kiln_status handle_node(rw_ctx *c, kiln_graph *g, kiln_node_id n)
{
    if (!kiln_node_is_live(g, n))
        return KILN_OK;
    kiln_graph *pg = kiln_graph_parent(g);
    if (pg && mc_symset_has(&c->whiles, pg, kiln_graph_parent_node(g)))
        return KILN_OK;
    if (rw_is_subgraph_data(g, n) || rw_is_subgraph_netoutput(g, n))
        return KILN_OK;
    /* the Identities inserted so far carry the key even when no node did before */
    if ((c->cannot_be_deleted || c->inserted) && mc_node_bool(g, n, "_cannot_be_deleted"))
        return KILN_OK;
    kiln_status st = KILN_OK;
    if (mc_symset_has(&c->identity_like, g, n)) {
        st = rw_split_identity(c, g, n);
        if (st == KILN_OK && kiln_node_is_live(g, n))
            st = rw_remove_no_use_identity(c, g, n);
    }
    if (st == KILN_OK && kiln_node_is_live(g, n))
        st = insert_as_needed(c, g, n);
    return st;
}

static kiln_pass_result run(void *inst, kiln_pass_ctx *pc, kiln_graph *g)
{
    (void)inst;
    rw_ctx c;
    rw_list l = {0, 0, 0};
    kiln_status st = rw_ctx_init(&c, kiln_graph_root(g), pc);
    if (st == KILN_OK) {
        rw_mark_ref_relations(&c);
        st = rw_mark_all_subgraphs(&c);
    }
    if (st == KILN_OK && rw_all_nodes(&c, &l) != KILN_OK)
        st = kiln_errorf(kiln_pass_error(pc), KILN_ERR_NOMEM, "out of memory");
    for (uint32_t i = 0; i < l.count && st == KILN_OK; i++)
        st = handle_node(&c, l.v[i].g, l.v[i].n);
    kiln_pass_stat_add(pc, "identities inserted", c.inserted);
    kiln_pass_stat_add(pc, "identities removed", c.removed);
    return rw_run_finish(&c, &l, st);
}

const kiln_pass_desc kiln_handle_memory_rw_conflict_pass = {
    .struct_size = sizeof(kiln_pass_desc),
    .kind = KILN_PASS_KIND_GRAPH,
    .name = "HandleMemoryRWConflict",
    .summary = "insert Identity copies where a read-only/const output meets a writing input "
               "(GE mem_rw_conflict_optimize)",
    .flags = KILN_PASS_NO_SUBGRAPHS,
    .run_graph = run,
};

/*
 * check_rw_conflict.c - CheckRWConflict, GE GraphOptimize::CheckRWConflict
 * (GE_SEMANTICS 2.8): does the graph hold a producer/consumer pair whose RW
 * types are inconsistent ("WRONG_GRAPH": an Invalid type on either side, e.g.
 * a subgraph Data that is both written through a ref input and scope-written,
 * or a Data whose `_parent_node_index` names no parent input)?
 *
 * The answer is reported, not acted on: counter "has_conflict" (0/1) in the
 * pass statistics (--time-passes, --report) and a diagnostic naming the pair.
 * As in GE:
 *   - a graph without subgraphs is not checked (GE returns before the scan;
 *     no counter is recorded);
 *   - the preparation is HandleMemoryRWConflict's (MarkRefRelations and
 *     MarkRWTypeForAllSubgraph), so `reference` attributes and the Identities
 *     that subgraph marking inserts before a NetOutput are kept;
 *   - quirk 11.7: the scan stops at the first node without data consumers and
 *     at the first While node met as producer or consumer, so only a prefix of
 *     the GetAllNodes order is inspected.
 *
 * Requires: a verified graph.  Preserves: everything but the preparation's
 * edits.  Complexity: O(N + E) type queries.
 */
#include "rw_conflict.h"

/* Scan the GetAllNodes order; true when a WRONG_GRAPH pair was found. */
static bool scan(rw_ctx *c, const rw_list *l)
{
    for (uint32_t i = 0; i < l->count; i++) {
        kiln_graph *g = l->v[i].g;
        kiln_node_id n = l->v[i].n;
        if (!kiln_node_is_live(g, n))
            continue;
        uint32_t total = rw_data_out_count(g, n);
        if (total == 0 || mc_is_while(g, n)) {
            kiln_diag(c->pc, KILN_SEV_DEBUG, "scan stops at %s (%s)", kiln_node_name_str(g, n),
                      total == 0 ? "no data consumers" : "While node");
            return false;
        }
        for (uint32_t o = 0; o < kiln_node_output_count(g, n); o++) {
            rw_out ot = rw_output_type(c, g, n, o);
            for (uint32_t u = kiln_use_first(g, n, o); u; u = kiln_use_next(g, u)) {
                kiln_anchor dst = kiln_use_dst(g, u);
                if (mc_is_while(g, dst.node))
                    return false;
                rw_in it = rw_input_type(c, g, dst.node, dst.index, false);
                if (rw_matrix(ot, it) == RW_WRONG_GRAPH) {
                    kiln_diag(c->pc, KILN_SEV_WARNING,
                              "RW conflict check: %s:%u (%s) -> %s:%u (%s) in graph %s is a "
                              "wrong graph",
                              kiln_node_name_str(g, n), o, rw_out_name(ot),
                              kiln_node_name_str(g, dst.node), dst.index, rw_in_name(it),
                              kiln_graph_name(g));
                    return true;
                }
            }
        }
    }
    return false;
}

static kiln_pass_result run(void *inst, kiln_pass_ctx *pc, kiln_graph *g)
{
    (void)inst;
    rw_ctx c;
    rw_list l = {0, 0, 0};
    kiln_status st = rw_ctx_init(&c, kiln_graph_root(g), pc);
    if (st == KILN_OK)
        rw_mark_ref_relations(&c);
    if (st == KILN_OK && c.nsub == 0) {
        kiln_diag(pc, KILN_SEV_INFO, "no subgraphs, nothing checked");
    } else if (st == KILN_OK) {
        st = rw_mark_all_subgraphs(&c);
        if (st == KILN_OK)
            st = rw_all_nodes(&c, &l);
        if (st == KILN_OK) {
            bool conflict = scan(&c, &l);
            kiln_pass_stat_add(pc, "has_conflict", conflict ? 1 : 0);
            kiln_diag(pc, KILN_SEV_INFO, "has_conflict=%s", conflict ? "true" : "false");
        }
    }
    return rw_run_finish(&c, &l, st);
}

const kiln_pass_desc kiln_check_rw_conflict_pass = {
    .struct_size = sizeof(kiln_pass_desc),
    .kind = KILN_PASS_KIND_GRAPH,
    .name = "CheckRWConflict",
    .summary = "report (counter has_conflict) whether producer/consumer RW types are "
               "inconsistent (GE CheckRWConflict)",
    .flags = KILN_PASS_NO_SUBGRAPHS,
    .run_graph = run,
};

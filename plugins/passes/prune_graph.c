/*
 * prune_graph.c - PruneGraphPass (GE PrunePass): remove every node from which
 * no path (data or control) leads to the graph's NetOutput.
 *
 * Requires: nothing.  Preserves: nothing (deletes nodes).
 * A graph without a NetOutput is left alone (nothing defines "the outputs").
 * Data nodes are kept even when unused, as GE keeps model inputs.
 * Complexity: O(n + e): a sweep down the node ids, with a depth-first walk for
 * producers numbered after their consumers.
 */
#include "passes.h"
#include <string.h>

static kiln_pass_result run(void *inst, kiln_pass_ctx *ctx, kiln_graph *g)
{
    (void)inst;
    /* op types as symbols of the graph's context, looked up once per run */
    const kiln_sym s_out = kiln_sym_lookup(g, "NetOutput"), s_data = kiln_sym_lookup(g, "Data");
    /* the last NetOutput: searched from the end, where a graph usually has it */
    uint32_t lim = kiln_graph_id_limit(g);
    kiln_node_id out = 0;
    for (kiln_node_id n = lim; s_out && n-- > 1 && !out;)
        if (kiln_node_is_live(g, n) && kiln_node_op(g, n) == s_out)
            out = n;
    if (!out)
        return KILN_PASS_NOT_CHANGED;
    uint8_t *keep = kiln_alloc(lim);
    kiln_node_id *stack = kiln_alloc((size_t)lim * sizeof(*stack));
    if (!keep || !stack) {
        kiln_free(keep);
        kiln_free(stack);
        kiln_errorf(kiln_pass_error(ctx), KILN_ERR_NOMEM, "out of memory");
        return KILN_PASS_FAILED;
    }
    memset(keep, 0, lim);
    /* A sweep down the ids marks the producers of every kept node: graphs are
     * mostly numbered in topological order, so a node's consumers come after it
     * and it is final when the sweep reaches it, and the walk over the graph's
     * arrays is sequential (at a million nodes a depth-first walk was a cache
     * miss per step).  A producer above the sweep (numbered after a consumer)
     * is walked from at once, depth first, the same rule applying below it. */
    uint32_t sp = 0;
    keep[out] = 1;
    for (kiln_node_id n = lim; n-- > 1;) {
        if (!keep[n])
            continue;
        kiln_node_id m = n;
        for (;;) {
            for (uint32_t i = 0, nin = kiln_node_input_count(g, m); i < nin; i++) {
                kiln_node_id p = kiln_node_input_peer(g, m, i).node;
                if (p && !keep[p]) {
                    keep[p] = 1;
                    if (p > n)
                        stack[sp++] = p;
                }
            }
            for (uint32_t c = kiln_ctrl_in_first(g, m); c; c = kiln_ctrl_in_next(g, c)) {
                kiln_node_id p = kiln_ctrl_src(g, c);
                if (!keep[p]) {
                    keep[p] = 1;
                    if (p > n)
                        stack[sp++] = p;
                }
            }
            if (!sp)
                break;
            m = stack[--sp];
        }
    }
    uint32_t removed = 0;
    for (kiln_node_id n = 1; n < lim; n++) {
        if (keep[n] || !kiln_node_is_live(g, n) || (s_data && kiln_node_op(g, n) == s_data))
            continue;
        kiln_pass_explain(ctx, g, n, "pruned: no path to %s", kiln_node_name_str(g, out));
        kiln_graph_remove_node(g, n);
        removed++;
    }
    kiln_free(keep);
    kiln_free(stack);
    kiln_pass_stat_add(ctx, "nodes pruned", removed);
    return removed ? KILN_PASS_CHANGED : KILN_PASS_NOT_CHANGED;
}

const kiln_pass_desc kiln_prune_graph_pass = {
    .struct_size = sizeof(kiln_pass_desc),
    .kind = KILN_PASS_KIND_GRAPH,
    .name = "PruneGraphPass",
    .summary = "remove nodes that do not reach the graph's NetOutput",
    .run_graph = run,
};

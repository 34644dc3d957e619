/*
 * prune_graph.c - PruneGraphPass (GE PrunePass): remove every node from which
 * no path (data or control) leads to the graph's NetOutput.
 *
 * Requires: nothing.  Preserves: nothing (deletes nodes).
 * A graph without a NetOutput is left alone (nothing defines "the outputs").
 * Data nodes are kept even when unused, as GE keeps model inputs.
 * Complexity: O(n + e), one backward walk with an explicit stack.
 */
#include "passes.h"
#include <string.h>

static kiln_pass_result run(void *inst, kiln_pass_ctx *ctx, kiln_graph *g)
{
    (void)inst;
    /* op types as symbols of the graph's context, looked up once per run */
    const kiln_sym s_out = kiln_sym_lookup(g, "NetOutput"), s_data = kiln_sym_lookup(g, "Data");
    kiln_node_id out = 0;
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n))
        if (s_out && kiln_node_op(g, n) == s_out)
            out = n;
    if (!out)
        return KILN_PASS_NOT_CHANGED;
    uint32_t lim = kiln_graph_id_limit(g);
    uint8_t *keep = kiln_alloc(lim);
    kiln_node_id *stack = kiln_alloc((size_t)lim * sizeof(*stack));
    if (!keep || !stack) {
        kiln_free(keep);
        kiln_free(stack);
        kiln_errorf(kiln_pass_error(ctx), KILN_ERR_NOMEM, "out of memory");
        return KILN_PASS_FAILED;
    }
    memset(keep, 0, lim);
    uint32_t sp = 0;
    keep[out] = 1;
    stack[sp++] = out;
    while (sp) {
        kiln_node_id n = stack[--sp];
        for (uint32_t i = 0; i < kiln_node_input_count(g, n); i++) {
            kiln_node_id p = kiln_node_input_peer(g, n, i).node;
            if (p && !keep[p]) {
                keep[p] = 1;
                stack[sp++] = p;
            }
        }
        for (uint32_t c = kiln_ctrl_in_first(g, n); c; c = kiln_ctrl_in_next(g, c)) {
            kiln_node_id p = kiln_ctrl_src(g, c);
            if (!keep[p]) {
                keep[p] = 1;
                stack[sp++] = p;
            }
        }
    }
    uint32_t removed = 0;
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n)) {
        if (keep[n] || (s_data && kiln_node_op(g, n) == s_data))
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

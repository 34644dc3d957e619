/*
 * mark_same_addr_pass.c - MarkSameAddrPass (GE mark_same_addr_pass.cc;
 * GE_SEMANTICS 6.6, seed 3.1.7).  A graph pass, run on the root and on every
 * subgraph.
 *
 * In dynamic+static memory reuse, StreamSwitch and LabelSwitchByIndex read
 * their inputs through a fixed physical address.  In a known-shape graph every
 * direct node with an output consumed by such a node gets
 * `_alloc_fixed_addr` = the name of that output and `_alloc_fixed_addr_index`
 * = its index (the first such output in index order).  kiln outputs have no IR
 * names, so the name is the anchor key `<node>_out_<index>` (the memory symbol
 * table's spelling).  Unknown-shape graphs are left alone.
 *
 * GE does not wire this pass into its current pipeline (GE_SEMANTICS 11.3);
 * kiln ships it for manifests that want it.
 * Requires: nothing.  Preserves: the CFG (node attributes only).
 * Complexity: O(n + e).
 */
#include "mc_passes.h"
#include <stdio.h>
#include <string.h>

/* First output of @p n read by a StreamSwitch / LabelSwitchByIndex (@p readers), or -1. */
static int32_t fixed_output(const kiln_graph *g, kiln_node_id n, const mc_symset *readers)
{
    for (uint32_t o = 0; o < kiln_node_output_count(g, n); o++)
        for (uint32_t u = kiln_use_first(g, n, o); u; u = kiln_use_next(g, u))
            if (mc_symset_has(readers, g, kiln_use_dst(g, u).node))
                return (int32_t)o;
    return -1;
}

static kiln_pass_result run(void *inst, kiln_pass_ctx *ctx, kiln_graph *g)
{
    (void)inst;
    if (mc_graph_unknown(g))
        return KILN_PASS_NOT_CHANGED;
    bool changed = false;
    static const char *const reader_ops[] = {"StreamSwitch", "LabelSwitchByIndex", NULL};
    mc_symset readers; /* symbols of this run's context */
    if (!mc_symset_init(&readers, g, reader_ops)) {
        kiln_errorf(kiln_pass_error(ctx), KILN_ERR_NOMEM, "MarkSameAddrPass: out of memory");
        return KILN_PASS_FAILED;
    }
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n)) {
        int32_t o = fixed_output(g, n, &readers);
        if (o < 0)
            continue;
        char key[512];
        snprintf(key, sizeof key, "%s_out_%d", kiln_node_name_str(g, n), o);
        const kiln_attrs *old = kiln_node_attrs(g, n);
        const char *s = NULL;
        int64_t idx = -1;
        if (kiln_attrs_get_string(old, "_alloc_fixed_addr", &s) && strcmp(s, key) == 0 &&
            kiln_attrs_get_int(old, "_alloc_fixed_addr_index", &idx) && idx == o)
            continue;
        kiln_attrs *a = kiln_node_attrs_mut(g, n);
        if (!a || kiln_attrs_set_string(a, "_alloc_fixed_addr", key) != KILN_OK ||
            kiln_attrs_set_int(a, "_alloc_fixed_addr_index", o) != KILN_OK)
            return mc_fail(ctx, "MarkSameAddrPass: set attribute", kiln_node_name_str(g, n));
        kiln_diag(ctx, KILN_SEV_DEBUG, "%s: output %d needs a fixed address",
                  kiln_node_name_str(g, n), o);
        kiln_pass_stat_add(ctx, "nodes marked", 1);
        changed = true;
    }
    return changed ? KILN_PASS_CHANGED : KILN_PASS_NOT_CHANGED;
}

const kiln_pass_desc kiln_mc_mark_same_addr_pass = {
    .struct_size = sizeof(kiln_pass_desc),
    .kind = KILN_PASS_KIND_GRAPH,
    .name = "MarkSameAddrPass",
    .summary = "mark outputs read by StreamSwitch/LabelSwitchByIndex as fixed-address",
    .flags = KILN_PASS_PRESERVES_CFG,
    .run_graph = run,
};

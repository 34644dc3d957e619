/*
 * constant_fuse_same.c - ConstantFuseSamePass (GE's ConstantFuseSamePass), a
 * graph pass: run by the pass manager on the root graph and on every
 * subgraph.
 *
 * Const nodes (ops with the registry flag KILN_OP_CONSTANT) holding the same
 * tensor - same op type, dtype, dims and bytes of `value`, same output dtype
 * and shape, same other attributes - are merged into the first one in node
 * order: the others' consumers read it, their control successors follow it,
 * and they are removed.  Like GE, a Const with control inputs is left alone
 * (its position in the schedule matters), and so is one marked
 * `_cannot_be_deleted` or `no_need_constant_folding`, or one with more than
 * one output.  Hash-based: one probe per Const, the bytes hashed once.
 * Counters: consts_merged, bytes_saved.  Requires: nothing.
 */
#include "attr_key.h"
#include "passes.h"

#include <stdlib.h>

static bool candidate(kiln_graph *g, kiln_node_id n, kiln_tensor_value *t)
{
    if (!(kiln_node_op_flags(g, n) & KILN_OP_CONSTANT) || kiln_node_output_count(g, n) != 1 ||
        kiln_node_input_count(g, n) != 0 || kiln_node_ctrl_in_count(g, n) ||
        kiln_node_subgraph_count(g, n))
        return false;
    const kiln_attrs *a = kiln_node_attrs(g, n);
    bool keep = false;
    if (kiln_attrs_has(a, "no_need_constant_folding") ||
        (kiln_attrs_get_bool(a, "_cannot_be_deleted", &keep) && keep))
        return false;
    return kiln_attrs_get_tensor(a, "value", t);
}

static kiln_pass_result cfs_run(void *inst, kiln_pass_ctx *ctx, kiln_graph *g)
{
    (void)inst;
    kiln_error *err = kiln_pass_error(ctx);
    uint32_t cap = 16, count = kiln_graph_node_count(g);
    while (cap < 2 * count + 2)
        cap *= 2;
    kiln_node_id *slot = calloc(cap, sizeof(*slot));
    uint64_t *hash = calloc(cap, sizeof(*hash));
    if (!slot || !hash) {
        free(slot);
        free(hash);
        kiln_errorf(err, KILN_ERR_NOMEM, "ConstantFuseSamePass: out of memory");
        return KILN_PASS_FAILED;
    }
    kiln_pass_result res = KILN_PASS_NOT_CHANGED;
    int64_t merged = 0, saved = 0;
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n;) {
        kiln_node_id next = kiln_graph_next_node(g, n);
        kiln_tensor_value t;
        if (!candidate(g, n, &t)) {
            n = next;
            continue;
        }
        kiln_sym op = kiln_node_op(g, n);
        uint64_t h = ak_bytes(1469598103934665603ull, &op, sizeof(op));
        h = ak_desc_hash(h, kiln_node_output_desc(g, n, 0));
        h = ak_attrs_hash(h, kiln_node_attrs(g, n)); /* value included */
        uint32_t s = (uint32_t)h & (cap - 1);
        kiln_node_id keep = 0;
        for (; slot[s]; s = (s + 1) & (cap - 1))
            if (hash[s] == h && kiln_node_op(g, slot[s]) == op &&
                ak_desc_equal(kiln_node_output_desc(g, slot[s], 0),
                              kiln_node_output_desc(g, n, 0)) &&
                ak_attrs_equal(kiln_node_attrs(g, slot[s]), kiln_node_attrs(g, n))) {
                keep = slot[s];
                break;
            }
        if (!keep) {
            slot[s] = n;
            hash[s] = h;
            n = next;
            continue;
        }
        kiln_status st = KILN_OK;
        uint32_t u = kiln_use_first(g, n, 0);
        while (u && st == KILN_OK) {
            uint32_t un = kiln_use_next(g, u);
            kiln_anchor d = kiln_use_dst(g, u);
            kiln_edge_remove(g, d.node, d.index);
            st = kiln_edge_add(g, keep, 0, d.node, d.index);
            u = un;
        }
        for (uint32_t c = kiln_ctrl_out_first(g, n); c && st == KILN_OK;
             c = kiln_ctrl_out_next(g, c))
            st = kiln_ctrl_add(g, keep, kiln_ctrl_dst(g, c));
        if (st == KILN_OK) {
            kiln_pass_explain(ctx, g, n, "removed: same constant as %s",
                              kiln_node_name_str(g, keep));
            st = kiln_graph_remove_node(g, n);
        }
        if (st != KILN_OK) {
            kiln_errorf(err, st, "ConstantFuseSamePass: merging %s into %s failed",
                        kiln_node_name_str(g, n), kiln_node_name_str(g, keep));
            res = KILN_PASS_FAILED;
            break;
        }
        merged++;
        saved += (int64_t)t.nbytes;
        res = KILN_PASS_CHANGED;
        n = next;
    }
    kiln_pass_stat_add(ctx, "consts_merged", merged);
    kiln_pass_stat_add(ctx, "bytes_saved", saved);
    free(slot);
    free(hash);
    return res;
}

const kiln_pass_desc kiln_constant_fuse_same_pass = {
    .struct_size = sizeof(kiln_pass_desc),
    .kind = KILN_PASS_KIND_GRAPH,
    .name = "ConstantFuseSamePass",
    .summary = "merge Const nodes holding the same tensor",
    .run_graph = cfs_run,
};

/*
 * rts_opt.c - the rts engine's optimize_subgraph (GE OptimizeFusedGraph):
 * back-to-back copies in an rts partition merged into one.
 *
 * In a chain c1 -> c2 of MemcpyAsync nodes where c1's output is read by c2
 * alone, c2 copying c1's copy is the same bytes as c2 copying c1's source,
 * and c2's output is still a buffer of its own: c2 now reads c1's input and
 * c1 is removed (repeated, so a chain of k copies leaves its last one, which
 * keeps its name and its consumers).  c1 must not be marked
 * `_cannot_be_deleted`, have control edges, or write a reference output; its
 * input and output must have the same dtype and shape.  Only plain copies:
 * MemcpyAddrAsync (an address-refreshing copy of GE's MemcpyAddrAsyncPass)
 * and the copies between memory types (CopyH2D, CopyD2H, CopyD2D) are left
 * alone.  c1's one reader being c2 means no End reads it: what other
 * partitions see does not change.
 *
 * Session option rts.copy_merge: on (default) or off.  Counter "copies
 * merged"; `kiln compile -v` explains each.  O(nodes).
 */
#include "rts_ops.h"

#include <string.h>

static bool plain_copy(const kiln_graph *g, kiln_node_id n)
{
    return strcmp(kiln_node_op_str(g, n), "MemcpyAsync") == 0 &&
           kiln_node_input_count(g, n) == 1 && kiln_node_output_count(g, n) == 1;
}

static bool same_tensor(const kiln_tensor_desc *a, const kiln_tensor_desc *b)
{
    if (!a || !b)
        return false;
    int32_t r = kiln_desc_rank(a);
    if (r != kiln_desc_rank(b) || kiln_desc_dtype(a) != kiln_desc_dtype(b))
        return false;
    const int64_t *da = kiln_desc_dims(a), *db = kiln_desc_dims(b);
    for (int32_t i = 0; i < r; i++)
        if (da[i] != db[i])
            return false;
    return true;
}

/* Copy @p c1, read by copy @p c2 alone, can go. */
static bool mergeable(kiln_graph *g, kiln_node_id c1, kiln_node_id c2)
{
    if (!plain_copy(g, c1) || kiln_node_ctrl_in_count(g, c1) || kiln_node_ctrl_out_count(g, c1))
        return false;
    bool keep = false;
    if (kiln_attrs_get_bool(kiln_node_attrs(g, c1), "_cannot_be_deleted", &keep) && keep)
        return false;
    uint32_t u = kiln_use_first(g, c1, 0);
    if (!u || kiln_use_next(g, u) || kiln_use_dst(g, u).node != c2)
        return false;
    kiln_anchor src = kiln_node_input_peer(g, c1, 0);
    const kiln_tensor_desc *out = kiln_node_output_desc(g, c1, 0);
    return src.node && kiln_desc_ref_input(out) < 0 &&
           same_tensor(kiln_node_output_desc(g, src.node, src.index), out);
}

/* A merge needs a plain copy fed by a plain copy of the same partition (in the
 * split graph a producer in another partition is a PlaceHolder). */
bool rts_optimize_subgraph_wanted(void *inst, kiln_pass_ctx *ctx, const kiln_graph *g,
                                  uint32_t rank, const kiln_node_id *nodes, uint32_t count)
{
    (void)inst;
    int on = cpu_switch_value(ctx, "rts.copy_merge");
    if (on <= 0)
        return on < 0; /* off: nothing to do; a bad value: the hook says so */
    for (uint32_t i = 0; i < count; i++) {
        if (!plain_copy(g, nodes[i]))
            continue;
        kiln_node_id p = kiln_node_input_peer(g, nodes[i], 0).node;
        if (p && kiln_node_partition(g, p) == (int32_t)rank && plain_copy(g, p))
            return true;
    }
    return false;
}

kiln_status rts_optimize_subgraph(void *inst, kiln_pass_ctx *ctx, kiln_graph *g)
{
    (void)inst;
    bool on;
    kiln_status st = cpu_session_switch(ctx, "rts.copy_merge", &on);
    if (st != KILN_OK || !on)
        return st;
    uint32_t limit = kiln_graph_id_limit(g), nc = 0;
    kiln_node_id *copies = kiln_alloc((size_t)(limit ? limit : 1) * sizeof(kiln_node_id));
    uint8_t *gone = kiln_alloc((size_t)limit + 1);
    if (!copies || !gone) {
        kiln_free(copies);
        kiln_free(gone);
        return kiln_errorf(kiln_pass_error(ctx), KILN_ERR_NOMEM, "out of memory");
    }
    memset(gone, 0, (size_t)limit + 1);
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n))
        if (plain_copy(g, n))
            copies[nc++] = n;
    int64_t merged = 0;
    for (uint32_t i = 0; i < nc && st == KILN_OK; i++) {
        kiln_node_id c2 = copies[i];
        if (gone[c2])
            continue;
        kiln_anchor p;
        while (st == KILN_OK && (p = kiln_node_input_peer(g, c2, 0)).node && p.index == 0 &&
               mergeable(g, p.node, c2)) {
            kiln_anchor src = kiln_node_input_peer(g, p.node, 0);
            if (ctx) {
                /* name the producer, not the PlaceHolder standing for it */
                const char *from = kiln_node_name_str(g, src.node);
                int64_t idx = src.index;
                if (strcmp(kiln_node_op_str(g, src.node), "PlaceHolder") == 0 &&
                    kiln_attrs_get_string(kiln_node_attrs(g, src.node), "_parentNodeName", &from))
                    kiln_attrs_get_int(kiln_node_attrs(g, src.node), "anchorIndex", &idx);
                kiln_pass_explain(ctx, g, p.node,
                                  "merged by engine rts into copy %s: a copy read only by that "
                                  "copy (%s now reads %s:%lld)",
                                  kiln_node_name_str(g, c2), kiln_node_name_str(g, c2), from,
                                  (long long)idx);
            }
            st = kiln_edge_remove(g, c2, 0);
            if (st == KILN_OK)
                st = kiln_edge_add(g, src.node, src.index, c2, 0);
            if (st == KILN_OK)
                st = kiln_graph_remove_node(g, p.node);
            if (st == KILN_OK) {
                gone[p.node] = 1;
                merged++;
            }
        }
    }
    kiln_free(copies);
    kiln_free(gone);
    if (st != KILN_OK)
        return kiln_errorf(kiln_pass_error(ctx), st, "rts: merging copies in %s failed (%s)",
                           kiln_graph_name(g), kiln_status_str(st));
    if (ctx && merged)
        kiln_pass_stat_add(ctx, "copies merged", merged);
    return KILN_OK;
}

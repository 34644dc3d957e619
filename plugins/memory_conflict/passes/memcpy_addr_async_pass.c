/*
 * memcpy_addr_async_pass.c - MemcpyAddrAsyncPass (GE memcpy_addr_async_pass.cc;
 * GE_SEMANTICS 6.5, seed 3.1.6).  A graph pass over the root and all its
 * subgraphs at once (flag NO_SUBGRAPHS: GE walks GetAllNodes itself).
 *
 * Zero copy hands user buffers to the model by address.  Where an op cannot
 * take a user address directly a copy node is inserted before it:
 *   - StreamMerge inputs whose producer is a user Data (followed through
 *     subgraph Data nodes to the root): `MemcpyAddrAsync`, or `MemcpyAsync` when
 *     the Data sits in a known-shape PartitionedCall subgraph and carries no
 *     `ref_var_src_var_name`;
 *   - root NetOutput inputs from Const / Constant, or from a Data-like node when
 *     the build is offline (option ge.buildGraphMode=offline) or a single-op
 *     scene (root attr `_single_op_scene`): `MemcpyAddrAsync` (tensors with a 0
 *     dim are skipped);
 *   - HCCL ops in graphs whose feature map is not refreshable (option
 *     ge.featureBaseRefreshable != "1"): `MemcpyAddrAsync` between each RefData
 *     input and the op.
 * New nodes are `<src>_MemcpyAddrAsync_<n>` (first free n from 0); they copy the
 * consumer's `_stream_label` and `_rts_label_node` and take over its
 * `_is_connected_to_data`.  Unknown-shape root graphs are skipped; kiln assumes
 * every device supports zero copy.  GE also moves a const's data offset onto
 * the copy node; kiln has no data offsets before memory planning.
 * Idempotent: a copied input is fed by the copy node afterwards.
 * Requires: nothing.  Preserves: nothing.  Complexity: O(n + e) over all graphs.
 */
#include "mc_passes.h"
#include <stdio.h>
#include <string.h>

/* Follow a subgraph Data to its root producer; true when it is a root Data-like. */
static bool from_user_data(kiln_graph *g, kiln_node_id n, bool *in_known_call)
{
    *in_known_call = false;
    for (uint32_t depth = 0; depth < 64; depth++) {
        if (!mc_is_data_like(g, n))
            return false;
        kiln_graph *parent = kiln_graph_parent(g);
        if (!parent)
            return true;
        kiln_node_id pn = kiln_graph_parent_node(g);
        if (depth == 0 && mc_op_is(parent, pn, "PartitionedCall") && !mc_graph_unknown(g))
            *in_known_call = true;
        int64_t pidx = -1;
        if (!kiln_attrs_get_int(kiln_node_attrs(g, n), "_parent_node_index", &pidx) || pidx < 0 ||
            pidx >= (int64_t)kiln_node_input_count(parent, pn))
            return false;
        kiln_anchor p = kiln_node_input_peer(parent, pn, (uint32_t)pidx);
        if (!p.node)
            return false;
        g = parent;
        n = p.node;
    }
    return false;
}

static bool has_zero_dim(const kiln_tensor_desc *d)
{
    int32_t r = d ? kiln_desc_rank(d) : -1;
    for (int32_t i = 0; i < r; i++)
        if (kiln_desc_dims(d)[i] == 0)
            return true;
    return false;
}

static kiln_status insert_copy(kiln_pass_ctx *ctx, kiln_graph *g, kiln_node_id dst, uint32_t di,
                               const char *op, const char *why)
{
    kiln_anchor p = kiln_node_input_peer(g, dst, di);
    char name[600];
    for (uint32_t k = 0;; k++) {
        snprintf(name, sizeof name, "%s_MemcpyAddrAsync_%u", kiln_node_name_str(g, p.node), k);
        if (!kiln_graph_find_node(g, name))
            break;
    }
    kiln_node_id id = kiln_graph_insert_before(g, dst, di, name, op);
    if (!id)
        return kiln_errorf(kiln_pass_error(ctx), KILN_ERR_PASS, "cannot insert %s", name);
    static const char *const copied[] = {"_stream_label", "_rts_label_node"};
    const kiln_attrs *da = kiln_node_attrs(g, dst);
    for (size_t i = 0; i < 2; i++) {
        const char *v;
        if (kiln_attrs_get_string(da, copied[i], &v) &&
            kiln_attrs_set_string(kiln_node_attrs_mut(g, id), copied[i], v) != KILN_OK)
            return KILN_ERR_NOMEM;
    }
    if (kiln_attrs_has(da, "_is_connected_to_data")) {
        kiln_attrs *na = kiln_node_attrs_mut(g, id);
        kiln_attrs *tmp = kiln_node_attrs_mut(g, dst);
        /* copy the whole set, then keep only the moved key on the new node */
        const int64_t *v;
        uint32_t cnt;
        bool b;
        if (kiln_attrs_get_list_int(tmp, "_is_connected_to_data", &v, &cnt))
            kiln_attrs_set_list_int(na, "_is_connected_to_data", v, cnt);
        else if (kiln_attrs_get_bool(tmp, "_is_connected_to_data", &b))
            kiln_attrs_set_bool(na, "_is_connected_to_data", b);
        kiln_attrs_remove(tmp, "_is_connected_to_data");
    }
    kiln_pass_explain(ctx, g, id, "MemcpyAddrAsyncPass: %s (%s:%u -> %s:%u)", why,
                      kiln_node_name_str(g, p.node), p.index, kiln_node_name_str(g, dst), di);
    kiln_pass_stat_add(ctx, "copies inserted", 1);
    return KILN_OK;
}

static kiln_status one_graph(kiln_pass_ctx *ctx, kiln_graph *g, bool offline, bool refreshable,
                             bool *changed)
{
    bool root = kiln_graph_parent(g) == NULL;
    uint32_t lim = kiln_graph_id_limit(g);
    const kiln_sym stream_merge = mc_sym(g, "StreamMerge"), netoutput = mc_sym(g, "NetOutput");
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n && n < lim; n = kiln_graph_next_node(g, n)) {
        for (uint32_t i = 0; i < kiln_node_input_count(g, n); i++) {
            kiln_anchor p = kiln_node_input_peer(g, n, i);
            if (!p.node)
                continue;
            kiln_status st = KILN_OK;
            bool known_call = false;
            if (mc_is_sym(g, n, stream_merge) && from_user_data(g, p.node, &known_call)) {
                bool ref = kiln_attrs_has(kiln_desc_attrs(kiln_node_output_desc(g, p.node, p.index)),
                                          "ref_var_src_var_name");
                st = insert_copy(ctx, g, n, i,
                                 known_call && !ref ? "MemcpyAsync" : "MemcpyAddrAsync",
                                 "StreamMerge input from user data");
            } else if (root && mc_is_sym(g, n, netoutput) &&
                       !has_zero_dim(kiln_node_output_desc(g, p.node, p.index)) &&
                       (mc_is_const(g, p.node) || (offline && mc_is_data_like(g, p.node)))) {
                st = insert_copy(ctx, g, n, i, "MemcpyAddrAsync",
                                 mc_is_const(g, p.node) ? "model output straight from a constant"
                                                        : "model output straight from a model input");
            } else if (!refreshable && mc_is_hcom(g, n) && mc_op_is(g, p.node, "RefData")) {
                st = insert_copy(ctx, g, n, i, "MemcpyAddrAsync",
                                 "HCCL op reads a RefData with a non-refreshable feature map");
            } else {
                continue;
            }
            if (st != KILN_OK)
                return st;
            *changed = true;
        }
    }
    return KILN_OK;
}

static kiln_pass_result run(void *inst, kiln_pass_ctx *ctx, kiln_graph *g)
{
    (void)inst;
    kiln_graph *root = kiln_graph_root(g);
    if (mc_graph_unknown(root))
        return KILN_PASS_NOT_CHANGED;
    const char *mode = kiln_pass_session_option(ctx, "ge.buildGraphMode");
    const char *fbr = kiln_pass_session_option(ctx, "ge.featureBaseRefreshable");
    bool single_op = false;
    kiln_attrs_get_bool(kiln_graph_attrs(root), "_single_op_scene", &single_op);
    bool offline = (mode && strcmp(mode, "offline") == 0) || single_op;
    bool refreshable = fbr && strcmp(fbr, "1") == 0;
    bool changed = false;
    kiln_status st = one_graph(ctx, root, offline, refreshable, &changed);
    uint32_t subs = kiln_graph_all_subgraph_count(root);
    for (uint32_t i = 0; i < subs && st == KILN_OK; i++)
        st = one_graph(ctx, kiln_graph_all_subgraph(root, i), offline, refreshable, &changed);
    if (st != KILN_OK)
        return KILN_PASS_FAILED;
    return changed ? KILN_PASS_CHANGED : KILN_PASS_NOT_CHANGED;
}

const kiln_pass_desc kiln_mc_memcpy_addr_async_pass = {
    .struct_size = sizeof(kiln_pass_desc),
    .kind = KILN_PASS_KIND_GRAPH,
    .name = "MemcpyAddrAsyncPass",
    .summary = "insert MemcpyAddrAsync where zero-copy user addresses cannot be used directly",
    .flags = KILN_PASS_NO_SUBGRAPHS,
    .run_graph = run,
};

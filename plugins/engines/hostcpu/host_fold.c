/*
 * host_fold.c - the host-CPU engine's shape-dimension folding, part of its
 * optimize_original_graph (GE's host-CPU engine computes shape arithmetic on
 * the host at compile time where it can).
 *
 * A Gather taking the host-CPU engine, reading a Shape node's output with
 * constant indices (a Const int32/int64 scalar or 1-D, `axis` 0), becomes a
 * Const when every dim it picks is static, even if other dims of the shaped
 * tensor are dynamic: Gather(Shape(x [-1, 128, -1]), 1) is 128.  InferShapes
 * folds a Shape only when the whole shape is static; dynamic-length models
 * (silero_vad: Shape of [2, -1, 128] then Gather 0) keep such picks at run
 * time otherwise.  Shape's opset-15 `start` / `end` are honoured.  The Const
 * (named "<gather>_dims_<k>", int64, the Gather's output shape) feeds the
 * Gather's consumers and the Gather is removed; the Shape and the indices go
 * to PruneGraphPass when nothing else reads them, and ConstantFoldingPass
 * (round 2) folds what the new Const makes constant.
 *
 * Never a Gather marked `_cannot_be_deleted`, with control edges, feeding a
 * NetOutput (the output keeps its producer's name) or taken by another engine
 * (a vendor engine that claims Gather keeps it).  Root graph and every
 * subgraph.  Session option hostcpu.shape_fold: on (default) or off.
 * Counter "shape dims folded".  O(nodes).
 */
#include "basic_ops.h"
#include "host_opt.h"

#include <stdio.h>
#include <string.h>

#define HF_MAX_PICK 16

static bool op_is(const kiln_graph *g, kiln_node_id n, const char *op)
{
    return strcmp(kiln_node_op_str(g, n), op) == 0;
}

/* The constant indices feeding input 1 of @p n (int32/int64, rank <= 1). */
static bool const_indices(kiln_graph *g, kiln_node_id n, int64_t *idx, uint32_t *count,
                          bool *scalar)
{
    kiln_anchor p = kiln_node_input_peer(g, n, 1);
    if (!p.node || (!op_is(g, p.node, "Const") && !op_is(g, p.node, "Constant")))
        return false;
    kiln_tensor_value v;
    if (!kiln_attrs_get_tensor(kiln_node_attrs(g, p.node), "value", &v) || !v.data || v.rank > 1)
        return false;
    size_t es = v.dtype == KILN_DT_INT64 ? 8 : v.dtype == KILN_DT_INT32 ? 4 : 0;
    if (!es || v.nbytes % es || v.nbytes / es > HF_MAX_PICK ||
        (v.rank == 1 && (int64_t)(v.nbytes / es) != v.dims[0]))
        return false;
    *count = (uint32_t)(v.nbytes / es);
    *scalar = v.rank == 0;
    for (uint32_t i = 0; i < *count; i++) {
        if (es == 8) {
            memcpy(&idx[i], (const char *)v.data + 8 * i, 8);
        } else {
            int32_t t;
            memcpy(&t, (const char *)v.data + 4 * i, 4);
            idx[i] = t;
        }
    }
    return *count > 0 || !*scalar;
}

/* The static dims @p n picks out of its Shape producer; false if any is dynamic. */
static bool picked_dims(kiln_graph *g, kiln_node_id n, int64_t *out, uint32_t *count, bool *scalar)
{
    if (kiln_node_input_count(g, n) != 2 || kiln_node_output_count(g, n) != 1 ||
        cpu_attr_int(g, n, "axis", 0) != 0)
        return false;
    kiln_anchor s = kiln_node_input_peer(g, n, 0);
    if (!s.node || s.index != 0 || !op_is(g, s.node, "Shape") || kiln_node_input_count(g, s.node) < 1)
        return false;
    kiln_anchor x = kiln_node_input_peer(g, s.node, 0);
    if (!x.node)
        return false;
    const kiln_tensor_desc *d = kiln_node_output_desc(g, x.node, x.index);
    int32_t r = kiln_desc_rank(d);
    if (r < 0)
        return false;
    /* Shape's start / end (opset 15): clamped to [0, r] after adding r to negatives */
    int64_t lo = cpu_attr_int(g, s.node, "start", 0), hi = cpu_attr_int(g, s.node, "end", r);
    lo = lo < 0 ? lo + r : lo;
    hi = hi < 0 ? hi + r : hi;
    lo = lo < 0 ? 0 : lo > r ? r : lo;
    hi = hi < 0 ? 0 : hi > r ? r : hi;
    int64_t len = hi > lo ? hi - lo : 0;
    int64_t idx[HF_MAX_PICK];
    if (!const_indices(g, n, idx, count, scalar))
        return false;
    const int64_t *dims = kiln_desc_dims(d);
    for (uint32_t i = 0; i < *count; i++) {
        int64_t k = idx[i] < 0 ? idx[i] + len : idx[i];
        if (k < 0 || k >= len || dims[lo + k] < 0)
            return false;
        out[i] = dims[lo + k];
    }
    /* the Gather's own descriptor must agree: int64, [count] or a scalar */
    const kiln_tensor_desc *o = kiln_node_output_desc(g, n, 0);
    return kiln_desc_dtype(o) == KILN_DT_INT64 && kiln_desc_rank(o) == (*scalar ? 0 : 1) &&
           (*scalar || kiln_desc_dims(o)[0] == (int64_t)*count);
}

static bool foldable(kiln_graph *g, kiln_node_id n)
{
    if (!op_is(g, n, "Gather") || kiln_node_ctrl_in_count(g, n) || kiln_node_ctrl_out_count(g, n))
        return false;
    bool keep = false;
    if (kiln_attrs_get_bool(kiln_node_attrs(g, n), "_cannot_be_deleted", &keep) && keep)
        return false;
    for (uint32_t u = kiln_use_first(g, n, 0); u; u = kiln_use_next(g, u))
        if (op_is(g, kiln_use_dst(g, u).node, "NetOutput"))
            return false;
    const char *e = kiln_engine_for_node(g, n);
    return e && strcmp(e, "hostcpu") == 0;
}

/* Gather @p n replaced by a Const of @p v (@p count int64, a scalar if @p scalar). */
static kiln_status replace(kiln_pass_ctx *ctx, kiln_graph *g, kiln_node_id n, const int64_t *v,
                           uint32_t count, bool scalar, uint32_t *serial)
{
    char name[256];
    do
        snprintf(name, sizeof(name), "%.200s_dims_%u", kiln_node_name_str(g, n), (*serial)++);
    while (kiln_graph_find_node(g, name));
    kiln_node_id q = kiln_graph_add_node(g, name, "Const", 0, 1);
    if (!q)
        return KILN_ERR_NOMEM;
    int64_t dim = count;
    kiln_tensor_value tv = {KILN_DT_INT64, scalar ? 0u : 1u, &dim, v, (size_t)count * 8};
    kiln_tensor_desc *d = kiln_node_output_desc(g, q, 0);
    kiln_status st = kiln_attrs_set_tensor(kiln_node_attrs_mut(g, q), "value", &tv);
    if (st == KILN_OK)
        st = kiln_desc_set_dtype(g, d, KILN_DT_INT64);
    if (st == KILN_OK)
        st = kiln_desc_set_shape(g, d, scalar ? 0 : 1, &dim);
    if (st == KILN_OK && ctx) {
        char vals[128] = "";
        for (uint32_t i = 0, k = 0; i < count && k < sizeof(vals); i++)
            k += (size_t)snprintf(vals + k, sizeof(vals) - k, "%s%lld", i ? ", " : "",
                                  (long long)v[i]);
        kiln_pass_explain(ctx, g, n, "folded by engine hostcpu into Const %s: the picked dims of %s "
                          "are static (%s%s%s)", name,
                          kiln_node_name_str(g, kiln_node_input_peer(g, n, 0).node),
                          scalar ? "" : "[", vals, scalar ? "" : "]");
    }
    /* the consumers read the Const; the Gather goes */
    while (st == KILN_OK && kiln_use_first(g, n, 0)) {
        kiln_anchor dst = kiln_use_dst(g, kiln_use_first(g, n, 0));
        st = kiln_edge_remove(g, dst.node, dst.index);
        if (st == KILN_OK)
            st = kiln_edge_add(g, q, 0, dst.node, dst.index);
    }
    return st == KILN_OK ? kiln_graph_remove_node(g, n) : st;
}

kiln_status host_fold_shape_dims(kiln_pass_ctx *ctx, kiln_graph *root)
{
    bool on;
    kiln_status st = cpu_session_switch(ctx, "hostcpu.shape_fold", &on);
    if (st != KILN_OK || !on)
        return st;
    uint32_t folded = 0, serial = 0;
    const uint32_t nsub = kiln_graph_all_subgraph_count(root);
    for (uint32_t i = 0; i <= nsub && st == KILN_OK; i++) {
        kiln_graph *g = i ? kiln_graph_all_subgraph(root, i - 1) : root;
        kiln_node_id next;
        for (kiln_node_id n = g ? kiln_graph_next_node(g, 0) : 0; n && st == KILN_OK; n = next) {
            next = kiln_graph_next_node(g, n);
            int64_t v[HF_MAX_PICK];
            uint32_t count = 0;
            bool scalar = false;
            if (foldable(g, n) && picked_dims(g, n, v, &count, &scalar)) {
                st = replace(ctx, g, n, v, count, scalar, &serial);
                folded++;
            }
        }
    }
    if (st != KILN_OK)
        return kiln_errorf(kiln_pass_error(ctx), st, "hostcpu: folding shape dims failed (%s)",
                           kiln_status_str(st));
    if (ctx && folded)
        kiln_pass_stat_add(ctx, "shape dims folded", folded);
    return KILN_OK;
}

kiln_status host_optimize_original(void *inst, kiln_pass_ctx *ctx, kiln_graph *root)
{
    kiln_status st = cpu_host_optimize_original(inst, ctx, root);
    return st == KILN_OK ? host_fold_shape_dims(ctx, root) : st;
}

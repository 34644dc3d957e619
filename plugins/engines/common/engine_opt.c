/*
 * engine_opt.c - the built-in engines' graph optimisation (their
 * optimize_original_graph hooks, cpu_engine.h): removal of nodes that do
 * nothing on the engine that owns them.
 *
 *   vector   Cast whose output has its input's dtype and shape, and whose
 *            `to` attribute names that dtype (GE's no-op Cast removal);
 *   hostcpu  Reshape, Flatten, Squeeze and Unsqueeze whose static output
 *            shape and dtype are their input's (GE ReshapeRemovePass).
 *
 * A node is removed only when it is placed on the engine running the hook
 * (a vendor engine that claims Cast keeps it), has one output and a
 * connected input 0, is not marked `_cannot_be_deleted`, does not feed the
 * NetOutput (the model's output keeps its producer's name), and its producer
 * is no reference output (ops with `ref_input`).  Its consumers are re-fed
 * from the producer of input 0 (kiln_graph_isolate_node with io_map {0});
 * inputs it no longer reads (a Reshape's shape) are left to PruneGraphPass.
 * The root graph and every subgraph (If/Case/While bodies, PartitionedCall
 * subgraphs: GE's GetAllNodes), a node feeding a subgraph's NetOutput kept
 * like one feeding the root's.  O(nodes) plus the removals.
 */
#include "cpu_util.h"

#include <string.h>

/* ONNX TensorProto data type of `to` -> kiln dtype, or -1. */
static int onnx_dtype(int64_t to)
{
    switch (to) {
    case 1:
        return KILN_DT_FLOAT32;
    case 2:
        return KILN_DT_UINT8;
    case 3:
        return KILN_DT_INT8;
    case 4:
        return KILN_DT_UINT16;
    case 5:
        return KILN_DT_INT16;
    case 6:
        return KILN_DT_INT32;
    case 7:
        return KILN_DT_INT64;
    case 9:
        return KILN_DT_BOOL;
    case 10:
        return KILN_DT_FLOAT16;
    case 11:
        return KILN_DT_FLOAT64;
    case 12:
        return KILN_DT_UINT32;
    case 13:
        return KILN_DT_UINT64;
    case 16:
        return KILN_DT_BFLOAT16;
    default:
        return -1;
    }
}

kiln_status cpu_session_switch(kiln_pass_ctx *ctx, const char *key, bool *on)
{
    const char *v = ctx ? kiln_pass_session_option(ctx, key) : NULL;
    *on = true;
    if (!v || !*v || strcmp(v, "on") == 0)
        return KILN_OK;
    if (strcmp(v, "off") == 0) {
        *on = false;
        return KILN_OK;
    }
    return kiln_errorf(kiln_pass_error(ctx), KILN_ERR_INVALID,
                       "session option %s=%s: expected on or off", key, v);
}

int cpu_switch_value(kiln_pass_ctx *ctx, const char *key)
{
    const char *v = ctx ? kiln_pass_session_option(ctx, key) : NULL;
    if (!v || !*v || strcmp(v, "on") == 0)
        return 1;
    return strcmp(v, "off") == 0 ? 0 : -1;
}

/* Same dtype and the same static shape. */
static bool same_static(const kiln_tensor_desc *a, const kiln_tensor_desc *b)
{
    int32_t r = kiln_desc_rank(a);
    if (r < 0 || r != kiln_desc_rank(b) || kiln_desc_dtype(a) != kiln_desc_dtype(b))
        return false;
    const int64_t *da = kiln_desc_dims(a), *db = kiln_desc_dims(b);
    for (int32_t i = 0; i < r; i++)
        if (da[i] < 0 || da[i] != db[i])
            return false;
    return true;
}

static bool op_is(kiln_graph *g, kiln_node_id n, const char *op)
{
    return strcmp(kiln_node_op_str(g, n), op) == 0;
}

/* The node does nothing: its output is input 0 unchanged. */
static bool is_noop(kiln_graph *g, kiln_node_id n, kiln_anchor src, bool vector)
{
    const kiln_tensor_desc *in = kiln_node_output_desc(g, src.node, src.index);
    const kiln_tensor_desc *out = kiln_node_output_desc(g, n, 0);
    if (!same_static(in, out))
        return false;
    if (vector)
        return op_is(g, n, "Cast") &&
               onnx_dtype(cpu_attr_int(g, n, "to", -1)) == (int)kiln_desc_dtype(out);
    return op_is(g, n, "Reshape") || op_is(g, n, "Flatten") || op_is(g, n, "Squeeze") ||
           op_is(g, n, "Unsqueeze");
}

static bool removable(kiln_graph *g, kiln_node_id n, const char *engine, bool vector,
                      kiln_anchor *src)
{
    if (kiln_node_output_count(g, n) != 1 || kiln_node_input_count(g, n) < 1)
        return false;
    *src = kiln_node_input_peer(g, n, 0);
    if (!src->node || !is_noop(g, n, *src, vector))
        return false;
    bool keep = false;
    if (kiln_attrs_get_bool(kiln_node_attrs(g, n), "_cannot_be_deleted", &keep) && keep)
        return false;
    if (kiln_desc_ref_input(kiln_node_output_desc(g, src->node, src->index)) >= 0)
        return false;
    for (uint32_t u = kiln_use_first(g, n, 0); u; u = kiln_use_next(g, u))
        if (op_is(g, kiln_use_dst(g, u).node, "NetOutput"))
            return false;
    const char *e = kiln_engine_for_node(g, n);
    return e && strcmp(e, engine) == 0;
}

/* The no-ops of one graph @p g removed; *count increased by their number. */
static kiln_status remove_noops_in(kiln_pass_ctx *ctx, kiln_graph *g, const char *engine,
                                   bool vector, uint32_t *count)
{
    uint32_t limit = kiln_graph_id_limit(g), nv = 0;
    kiln_node_id *victims = kiln_alloc((size_t)(limit ? limit : 1) * sizeof(kiln_node_id));
    if (!victims)
        return KILN_ERR_NOMEM;
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n)) {
        kiln_anchor src;
        if (removable(g, n, engine, vector, &src)) {
            if (ctx)
                kiln_pass_explain(ctx, g, n, "removed by engine %s: %s of %s:%u does nothing",
                                  engine, kiln_node_op_str(g, n), kiln_node_name_str(g, src.node),
                                  src.index);
            victims[nv++] = n;
        }
    }
    static const int32_t io_map[] = {0};
    kiln_status st = KILN_OK;
    for (uint32_t i = 0; i < nv && st == KILN_OK; i++) {
        st = kiln_graph_isolate_node(g, victims[i], io_map, 1);
        if (st == KILN_OK)
            st = kiln_graph_remove_node(g, victims[i]);
    }
    kiln_free(victims);
    *count += nv;
    return st;
}

kiln_status cpu_remove_noops(kiln_pass_ctx *ctx, kiln_graph *root, const char *engine, bool vector)
{
    uint32_t count = 0;
    kiln_status st = KILN_OK;
    /* removals change no graph's subgraph list: the index stays valid */
    const uint32_t nsub = kiln_graph_all_subgraph_count(root);
    for (uint32_t i = 0; i <= nsub && st == KILN_OK; i++) {
        kiln_graph *g = i ? kiln_graph_all_subgraph(root, i - 1) : root;
        if (g)
            st = remove_noops_in(ctx, g, engine, vector, &count);
    }
    if (ctx && count)
        kiln_pass_stat_add(ctx, "no-op nodes removed", count);
    return st;
}

kiln_status cpu_vector_optimize_original(void *inst, kiln_pass_ctx *ctx, kiln_graph *root)
{
    (void)inst;
    return cpu_remove_noops(ctx, root, "vector", true);
}

kiln_status cpu_host_optimize_original(void *inst, kiln_pass_ctx *ctx, kiln_graph *root)
{
    (void)inst;
    return cpu_remove_noops(ctx, root, "hostcpu", false);
}

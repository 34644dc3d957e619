/*
 * mc_util.c - helpers shared by the memory-conflict passes: GE's op-type
 * classes (OpTypeUtils), attribute shortcuts, GE's dynamic-shape tests,
 * ref-chain following, the SubgraphPass-style memcpy insertion and the
 * HcomBroadcast write-back Assign shared by the two HCCL passes.
 *
 * Requires: nothing.  Preserves: everything except mc_insert_memcpy_after,
 * which inserts one node, and mc_wire_write_back / mc_order_write_back,
 * which add edges.
 * Complexity: classes and attributes O(1) (attribute lookups are O(log a));
 * mc_graph_unknown O(n + e); mc_unique_name O(k) lookups.
 */
#include "mc_passes.h"
#include <stdio.h>
#include <string.h>

bool mc_is_const(const kiln_graph *g, kiln_node_id n)
{
    static const char *const ops[] = {"Const", "Constant", NULL};
    return mc_op_in(g, n, ops);
}

bool mc_is_if_or_case(const kiln_graph *g, kiln_node_id n)
{
    static const char *const ops[] = {"If",    "_If",           "StatelessIf", "Case",
                                      "_Case", "StatelessCase", NULL};
    return mc_op_in(g, n, ops);
}

bool mc_is_hcom(const kiln_graph *g, kiln_node_id n)
{
    return strncmp(kiln_node_op_str(g, n), "Hcom", 4) == 0;
}

bool mc_node_has(const kiln_graph *g, kiln_node_id n, const char *key)
{
    return kiln_attrs_has(kiln_node_attrs(g, n), key);
}

bool mc_desc_bool(const kiln_tensor_desc *d, const char *key)
{
    bool v = false;
    return d && kiln_attrs_get_bool(kiln_desc_attrs(d), key, &v) && v;
}

kiln_status mc_set_node_bool(kiln_graph *g, kiln_node_id n, const char *key, bool v)
{
    kiln_attrs *a = kiln_node_attrs_mut(g, n);
    return a ? kiln_attrs_set_bool(a, key, v) : KILN_ERR_NOMEM;
}

static bool desc_dynamic(const kiln_tensor_desc *d)
{
    if (!d)
        return false;
    int32_t r = kiln_desc_rank(d);
    const int64_t *dims = kiln_desc_dims(d);
    for (int32_t i = 0; i < r; i++)
        if (dims[i] < 0)
            return true;
    return false;
}

bool mc_node_dynamic(kiln_graph *g, kiln_node_id n)
{
    for (uint32_t i = 0; i < kiln_node_input_count(g, n); i++)
        if (desc_dynamic(kiln_node_input_desc(g, n, i)))
            return true;
    for (uint32_t o = 0; o < kiln_node_output_count(g, n); o++)
        if (desc_dynamic(kiln_node_output_desc(g, n, o)))
            return true;
    return false;
}

bool mc_graph_unknown(kiln_graph *g)
{
    bool v = false;
    if (kiln_attrs_get_bool(kiln_graph_attrs(g), "_dynamic_shape_partitioned", &v) && v)
        return true;
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n))
        if (mc_node_dynamic(g, n))
            return true;
    return false;
}

bool mc_desc_same_shape(const kiln_tensor_desc *a, const kiln_tensor_desc *b)
{
    if (!a || !b)
        return a == b;
    if (kiln_desc_dtype(a) != kiln_desc_dtype(b) || kiln_desc_rank(a) != kiln_desc_rank(b))
        return false;
    int32_t r = kiln_desc_rank(a);
    return r <= 0 || memcmp(kiln_desc_dims(a), kiln_desc_dims(b), (size_t)r * sizeof(int64_t)) == 0;
}

int32_t mc_output_ref_input(kiln_graph *g, kiln_node_id n, uint32_t o)
{
    const kiln_tensor_desc *d = kiln_node_output_desc(g, n, o);
    if (!d)
        return -1;
    if (kiln_desc_ref_input(d) >= 0)
        return kiln_desc_ref_input(d);
    int64_t k = 0;
    if (mc_desc_bool(d, "reuse_input") &&
        kiln_attrs_get_int(kiln_desc_attrs(d), "reuse_input_index", &k) && k >= 0 &&
        k < (int64_t)kiln_node_input_count(g, n))
        return (int32_t)k;
    if (o == 0 && mc_op_is(g, n, "Reshape") && kiln_node_input_count(g, n) > 0)
        return 0;
    return -1;
}

bool mc_unique_name(const kiln_graph *g, const char *base, char *buf, size_t size)
{
    int len = snprintf(buf, size, "%s", base);
    if (len < 0 || (size_t)len >= size)
        return false;
    for (uint32_t k = 1; kiln_graph_find_node(g, buf); k++) {
        len = snprintf(buf, size, "%s_%u", base, k);
        if (len < 0 || (size_t)len >= size)
            return false;
    }
    return true;
}

bool mc_broadcast_needs_assign(const kiln_graph *g, kiln_anchor var, kiln_node_id hccl)
{
    if (!mc_op_is(g, hccl, "HcomBroadcast") || !mc_is_var_like(g, var.node))
        return false;
    for (uint32_t u = kiln_use_first(g, var.node, var.index); u; u = kiln_use_next(g, u))
        if (mc_op_is(g, kiln_use_dst(g, u).node, "Assign"))
            return false;
    return true;
}

bool mc_wire_write_back(kiln_graph *g, kiln_node_id a, kiln_anchor var, kiln_node_id hccl,
                        uint32_t in)
{
    kiln_tensor_desc *od = kiln_node_output_desc(g, a, 0);
    return od && kiln_desc_copy(g, od, kiln_node_output_desc(g, var.node, var.index)) == KILN_OK &&
           kiln_desc_set_ref_input(g, od, 0) == KILN_OK &&
           kiln_edge_add(g, hccl, in, a, 1) == KILN_OK &&
           kiln_edge_add(g, var.node, var.index, a, 0) == KILN_OK;
}

kiln_status mc_order_write_back(kiln_graph *g, kiln_node_id a, kiln_node_id hccl, uint32_t in)
{
    for (uint32_t u = kiln_use_first(g, hccl, in); u; u = kiln_use_next(g, u)) {
        kiln_node_id d = kiln_use_dst(g, u).node;
        if (d != a && kiln_ctrl_add(g, a, d) != KILN_OK)
            return KILN_ERR_NOMEM;
    }
    for (uint32_t c = kiln_ctrl_out_first(g, hccl); c; c = kiln_ctrl_out_next(g, c)) {
        kiln_node_id d = kiln_ctrl_dst(g, c);
        if (d != a && kiln_ctrl_add(g, a, d) != KILN_OK)
            return KILN_ERR_NOMEM;
    }
    return KILN_OK;
}

kiln_pass_result mc_fail(kiln_pass_ctx *ctx, const char *what, const char *node)
{
    kiln_errorf(kiln_pass_error(ctx), KILN_ERR_PASS, "%s failed at node %s", what, node);
    return KILN_PASS_FAILED;
}

kiln_node_id mc_insert_memcpy_after(kiln_pass_ctx *ctx, kiln_graph *g, kiln_node_id src,
                                    uint32_t so, const kiln_anchor *dsts, uint32_t ndst,
                                    const char *name, const char *rule)
{
    char buf[512];
    if (!mc_unique_name(g, name, buf, sizeof buf)) {
        kiln_errorf(kiln_pass_error(ctx), KILN_ERR_LIMIT, "node name %s too long", name);
        return 0;
    }
    kiln_node_id id = kiln_graph_insert_after(g, src, so, dsts, ndst, buf, "Identity");
    if (!id) {
        kiln_errorf(kiln_pass_error(ctx), KILN_ERR_PASS, "cannot insert %s after %s:%u", buf,
                    kiln_node_name_str(g, src), so);
        return 0;
    }
    kiln_attrs *da = kiln_desc_attrs_mut(g, kiln_node_output_desc(g, id, 0));
    kiln_attrs *na = kiln_node_attrs_mut(g, id);
    const char *label = NULL;
    if (!da || !na || kiln_attrs_set_bool(da, "reuse_input", false) != KILN_OK ||
        kiln_attrs_set_bool(na, "no_need_constant_folding", false) != KILN_OK ||
        kiln_attrs_set_bool(na, "_cannot_be_deleted", true) != KILN_OK ||
        (kiln_attrs_get_string(kiln_node_attrs(g, src), "_batch_label", &label) && *label &&
         kiln_attrs_set_string(na, "_batch_label", label) != KILN_OK)) {
        kiln_errorf(kiln_pass_error(ctx), KILN_ERR_NOMEM, "out of memory");
        return 0;
    }
    kiln_pass_explain(ctx, g, id, "%s: isolates %s:%u", rule, kiln_node_name_str(g, src), so);
    kiln_pass_stat_add(ctx, "identities inserted", 1);
    return id;
}

/*
 * hccl_continuous_memcpy_pass.c - HcclContinuousMemcpyPass (GE
 * hccl_continuous_memcpy_pass.cc; GE_SEMANTICS 6.2, seed 3.1.2).  A graph
 * pass, run on the root and on every subgraph.
 *
 * For every direct node:
 *   - `continuous_input`=true: each input whose producer is Const / Constant /
 *     Data-like / var-like, or whose producer output feeds more than one
 *     `continuous_input` node, gets an Identity before it (their addresses
 *     cannot be laid out contiguously for this op); for an HcomBroadcast fed by
 *     a var-like node with no Assign consumer an Assign `<var>_Assign[_N]`
 *     writes the broadcast result back (as HcclMemcpyPass does);
 *   - `_input_memory_type`[i] = 17 (RT_MEMORY_P2P_DDR) with a Data-like / const /
 *     var-like producer: an Identity before input i (P2P memory cannot hold
 *     user or constant data).
 * Identities are `<producer>_HcclContinuousMemcpyPass_Identity[_N]` with
 * no_need_constant_folding=false and _cannot_be_deleted=true, inserted with
 * InsertNodeBefore semantics.  Idempotent: a protected input is fed by its own
 * Identity afterwards.
 * Requires: nothing.  Preserves: nothing.  Complexity: O(n + e).
 */
#include "mc_passes.h"
#include <stdio.h>
#include <string.h>

#define RT_MEMORY_P2P_DDR 17

static bool source_node(const kiln_graph *g, kiln_node_id n)
{
    return mc_is_const(g, n) || mc_is_data_like(g, n) || mc_is_var_like(g, n);
}

static uint32_t continuous_consumers(const kiln_graph *g, kiln_anchor p)
{
    uint32_t cnt = 0;
    for (uint32_t u = kiln_use_first(g, p.node, p.index); u; u = kiln_use_next(g, u))
        if (mc_node_bool(g, kiln_use_dst(g, u).node, "continuous_input"))
            cnt++;
    return cnt;
}

static kiln_status assign_after_broadcast(kiln_pass_ctx *ctx, kiln_graph *g, kiln_anchor var,
                                          kiln_node_id hccl, uint32_t in)
{
    if (!mc_broadcast_needs_assign(g, var, hccl))
        return KILN_OK;
    if (in >= kiln_node_output_count(g, hccl))
        return kiln_errorf(kiln_pass_error(ctx), KILN_ERR_PASS, "HcomBroadcast %s has no output %u",
                           kiln_node_name_str(g, hccl), in);
    char base[512], name[520];
    snprintf(base, sizeof base, "%s_Assign", kiln_node_name_str(g, var.node));
    if (!mc_unique_name(g, base, name, sizeof name))
        return kiln_errorf(kiln_pass_error(ctx), KILN_ERR_LIMIT, "name %s too long", base);
    kiln_node_id a = kiln_graph_add_node(g, name, "Assign", 2, 1);
    if (!a || !mc_wire_write_back(g, a, var, hccl, in))
        return kiln_errorf(kiln_pass_error(ctx), KILN_ERR_NOMEM, "cannot add %s", name);
    kiln_status st = mc_order_write_back(g, a, hccl, in);
    if (st != KILN_OK)
        return st;
    kiln_pass_explain(ctx, g, a, "HcclContinuousMemcpyPass: broadcast write-back into %s",
                      kiln_node_name_str(g, var.node));
    return KILN_OK;
}

static kiln_status isolate(kiln_pass_ctx *ctx, kiln_graph *g, kiln_node_id n, uint32_t i,
                           const char *why)
{
    kiln_anchor p = kiln_node_input_peer(g, n, i);
    char base[512], name[520];
    snprintf(base, sizeof base, "%s_HcclContinuousMemcpyPass_Identity",
             kiln_node_name_str(g, p.node));
    if (!mc_unique_name(g, base, name, sizeof name))
        return kiln_errorf(kiln_pass_error(ctx), KILN_ERR_LIMIT, "name %s too long", base);
    kiln_node_id id = kiln_graph_insert_before(g, n, i, name, "Identity");
    if (!id || mc_set_node_bool(g, id, "no_need_constant_folding", false) != KILN_OK ||
        mc_set_node_bool(g, id, "_cannot_be_deleted", true) != KILN_OK)
        return kiln_errorf(kiln_pass_error(ctx), KILN_ERR_PASS, "cannot insert %s", name);
    kiln_pass_explain(ctx, g, id, "HcclContinuousMemcpyPass: %s (%s:%u -> %s:%u)", why,
                      kiln_node_name_str(g, p.node), p.index, kiln_node_name_str(g, n), i);
    kiln_pass_stat_add(ctx, "identities inserted", 1);
    return KILN_OK;
}

static kiln_status continuous_inputs(kiln_pass_ctx *ctx, kiln_graph *g, kiln_node_id n,
                                     bool *changed)
{
    for (uint32_t i = 0; i < kiln_node_input_count(g, n); i++) {
        kiln_anchor p = kiln_node_input_peer(g, n, i);
        if (!p.node)
            continue;
        const char *why = source_node(g, p.node) ? "continuous input from a source node"
                          : continuous_consumers(g, p) > 1
                              ? "output shared by several continuous-input ops"
                              : NULL;
        if (!why)
            continue;
        kiln_status st = isolate(ctx, g, n, i, why);
        if (st == KILN_OK)
            st = assign_after_broadcast(ctx, g, p, n, i);
        if (st != KILN_OK)
            return st;
        *changed = true;
    }
    return KILN_OK;
}

static kiln_status p2p_inputs(kiln_pass_ctx *ctx, kiln_graph *g, kiln_node_id n, bool *changed)
{
    const int64_t *mt;
    uint32_t cnt;
    if (!kiln_attrs_get_list_int(kiln_node_attrs(g, n), "_input_memory_type", &mt, &cnt))
        return KILN_OK;
    for (uint32_t i = 0; i < cnt && i < kiln_node_input_count(g, n); i++) {
        kiln_anchor p = kiln_node_input_peer(g, n, i);
        if (mt[i] != RT_MEMORY_P2P_DDR || !p.node || !source_node(g, p.node))
            continue;
        kiln_status st = isolate(ctx, g, n, i, "P2P input fed by a source node");
        if (st != KILN_OK)
            return st;
        *changed = true;
        /* the attribute array may have moved: re-read it */
        if (!kiln_attrs_get_list_int(kiln_node_attrs(g, n), "_input_memory_type", &mt, &cnt))
            break;
    }
    return KILN_OK;
}

static kiln_pass_result run(void *inst, kiln_pass_ctx *ctx, kiln_graph *g)
{
    (void)inst;
    bool changed = false;
    uint32_t lim = kiln_graph_id_limit(g);
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n && n < lim;
         n = kiln_graph_next_node(g, n)) {
        kiln_status st = KILN_OK;
        if (mc_node_bool(g, n, "continuous_input"))
            st = continuous_inputs(ctx, g, n, &changed);
        if (st == KILN_OK)
            st = p2p_inputs(ctx, g, n, &changed);
        if (st != KILN_OK)
            return KILN_PASS_FAILED;
    }
    return changed ? KILN_PASS_CHANGED : KILN_PASS_NOT_CHANGED;
}

const kiln_pass_desc kiln_mc_hccl_continuous_memcpy_pass = {
    .struct_size = sizeof(kiln_pass_desc),
    .kind = KILN_PASS_KIND_GRAPH,
    .name = "HcclContinuousMemcpyPass",
    .summary = "copy source-node inputs of continuous-input and P2P-input ops",
    .run_graph = run,
};

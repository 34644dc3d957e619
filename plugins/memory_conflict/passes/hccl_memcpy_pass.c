/*
 * hccl_memcpy_pass.c - HcclMemcpyPass (GE hccl_memcpy_pass.cc; GE_SEMANTICS
 * 6.1, seed ge-memory-conflict-handling 3.1.1).  A graph pass over the direct
 * nodes of each graph (the pass manager also runs it on every subgraph).
 *
 * HCCL ops marked `_input_mutable` write their inputs in place.  For every
 * input of such a node:
 *   - producer Const / Constant / variable: always insert an Identity
 *     `<hccl>_HcclMemcpyPass_Identity<i>` before the input (constant/variable
 *     protection);
 *   - producer output with one consumer: nothing;
 *   - otherwise look at the sibling consumers of the producer output, skipping
 *     siblings whose topological id equals the producer's (Identities inserted
 *     by this run inherit their producer's id: already protected) and
 *     shape-only branches (Shape, Rank, or a Reshape feeding only those): when a
 *     sibling has a larger topological id than the HCCL node (it runs after the
 *     in-place write and would read clobbered data) insert the Identity, else
 *     mark the HCCL node `_skip_rw_conflict`=true so HandleMemoryRWConflict
 *     leaves its inputs alone (GE_SEMANTICS 11.1: the code, not the design doc).
 * After an Identity, an HcomBroadcast fed by a var-like node with no Assign
 * consumer gets `<hccl>_Assign_<i>` (ref <- var, value <- hccl:i, output refs
 * input 0) writing the broadcast result back, ordered by control edges before
 * every data consumer of hccl:i and every control successor of the HCCL node.
 *
 * GE runs this pass twice (GraphPrepare and OptimizeStage1_3); both runs are
 * this same code, and the second finds nothing left to do on an unchanged
 * graph: the pass is idempotent (the golden runner's second run is that run).
 * Topological ids are taken once, when the first `_input_mutable` node is met
 * (GE topo-sorts once).  Requires: nothing.  Preserves: nothing.
 * Complexity: O(n + e) plus O(consumers) per mutable input.
 */
#include "mc_passes.h"
#include <stdio.h>
#include <string.h>

typedef struct hccl_run {
    kiln_pass_ctx *ctx;
    kiln_graph *g;
    uint32_t lim;   /* nodes >= lim were inserted by this run */
    uint32_t *topo; /* topological id of nodes < lim */
} hccl_run;

/* GE's OpDesc id: inserted nodes carry their producer's id. */
static uint32_t topo_id(const hccl_run *r, kiln_node_id n)
{
    for (uint32_t depth = 0; n >= r->lim && depth < 64; depth++) {
        kiln_anchor p = kiln_node_input_peer(r->g, n, 0);
        if (!p.node)
            return UINT32_MAX;
        n = p.node;
    }
    return n < r->lim ? r->topo[n] : UINT32_MAX;
}

static bool shape_op(const kiln_graph *g, kiln_node_id n)
{
    return mc_op_is(g, n, "Shape") || mc_op_is(g, n, "Rank");
}

/* GE IsShapeComputingBranch. */
static bool shape_branch(const kiln_graph *g, kiln_node_id n)
{
    if (shape_op(g, n))
        return true;
    if (!mc_op_is(g, n, "Reshape"))
        return false;
    for (uint32_t o = 0; o < kiln_node_output_count(g, n); o++)
        for (uint32_t u = kiln_use_first(g, n, o); u; u = kiln_use_next(g, u))
            if (!shape_op(g, kiln_use_dst(g, u).node))
                return false;
    return true;
}

/* GE NeedInsertIdentity; sets _skip_rw_conflict when it returns false. */
static bool need_identity(hccl_run *r, kiln_anchor src, kiln_node_id hccl, uint32_t in,
                          bool *changed)
{
    kiln_graph *g = r->g;
    uint32_t src_id = topo_id(r, src.node), hccl_id = topo_id(r, hccl);
    for (uint32_t u = kiln_use_first(g, src.node, src.index); u; u = kiln_use_next(g, u)) {
        kiln_anchor d = kiln_use_dst(g, u);
        if (d.node == hccl && d.index == in)
            continue;
        uint32_t id = topo_id(r, d.node);
        if (id == src_id || shape_branch(g, d.node))
            continue;
        if (id != UINT32_MAX && id > hccl_id)
            return true;
    }
    if (!mc_node_bool(g, hccl, "_skip_rw_conflict")) {
        mc_set_node_bool(g, hccl, "_skip_rw_conflict", true);
        *changed = true;
    }
    return false;
}

/* GE InsertAssignAfterBroadcastIfNeed. */
static kiln_status broadcast_assign(hccl_run *r, kiln_anchor var, kiln_node_id hccl, uint32_t in)
{
    kiln_graph *g = r->g;
    if (!mc_broadcast_needs_assign(g, var, hccl))
        return KILN_OK;
    if (in >= kiln_node_output_count(g, hccl))
        return kiln_errorf(kiln_pass_error(r->ctx), KILN_ERR_PASS,
                           "HcomBroadcast %s has no output %u to write back",
                           kiln_node_name_str(g, hccl), in);
    char base[512], name[520];
    snprintf(base, sizeof base, "%s_Assign_%u", kiln_node_name_str(g, hccl), in);
    if (!mc_unique_name(g, base, name, sizeof name))
        return kiln_errorf(kiln_pass_error(r->ctx), KILN_ERR_LIMIT, "name %s too long", base);
    kiln_node_id a = kiln_graph_add_node(g, name, "Assign", 2, 1);
    if (!a)
        return kiln_errorf(kiln_pass_error(r->ctx), KILN_ERR_NOMEM, "cannot add %s", name);
    if (!mc_wire_write_back(g, a, var, hccl, in))
        return kiln_errorf(kiln_pass_error(r->ctx), KILN_ERR_NOMEM, "cannot wire %s", name);
    kiln_status st = mc_order_write_back(g, a, hccl, in);
    if (st != KILN_OK)
        return st;
    kiln_pass_explain(r->ctx, g, a,
                      "HcclMemcpyPass: broadcast write-back of %s:%u into variable %s",
                      kiln_node_name_str(g, hccl), in, kiln_node_name_str(g, var.node));
    kiln_pass_stat_add(r->ctx, "assigns inserted", 1);
    return KILN_OK;
}

/* GE ModifyEdgeConnection: Identity before hccl:in, then the broadcast rule. */
static kiln_status protect(hccl_run *r, kiln_anchor src, kiln_node_id hccl, uint32_t in,
                           const char *why)
{
    kiln_graph *g = r->g;
    char base[512], name[520];
    snprintf(base, sizeof base, "%s_HcclMemcpyPass_Identity%u", kiln_node_name_str(g, hccl), in);
    if (!mc_unique_name(g, base, name, sizeof name))
        return kiln_errorf(kiln_pass_error(r->ctx), KILN_ERR_LIMIT, "name %s too long", base);
    kiln_node_id id = kiln_graph_insert_before(g, hccl, in, name, "Identity");
    if (!id)
        return kiln_errorf(kiln_pass_error(r->ctx), KILN_ERR_PASS, "cannot insert %s", name);
    if (mc_set_node_bool(g, id, "no_need_constant_folding", false) != KILN_OK)
        return KILN_ERR_NOMEM;
    kiln_pass_explain(r->ctx, g, id, "HcclMemcpyPass: %s (%s:%u feeds _input_mutable %s)", why,
                      kiln_node_name_str(g, src.node), src.index, kiln_node_name_str(g, hccl));
    kiln_pass_stat_add(r->ctx, "identities inserted", 1);
    return broadcast_assign(r, src, hccl, in);
}

static kiln_status mutable_inputs(hccl_run *r, kiln_node_id n, bool *changed)
{
    kiln_graph *g = r->g;
    for (uint32_t i = 0; i < kiln_node_input_count(g, n); i++) {
        kiln_anchor src = kiln_node_input_peer(g, n, i);
        if (!src.node)
            return kiln_errorf(kiln_pass_error(r->ctx), KILN_ERR_PARAM,
                               "input %u of _input_mutable node %s is not connected", i,
                               kiln_node_name_str(g, n));
        const char *why = NULL;
        if (mc_is_const(g, src.node) || mc_is_variable(g, src.node))
            why = "constant/variable protection";
        else if (kiln_node_output_use_count(g, src.node, src.index) == 1)
            continue;
        else if (need_identity(r, src, n, i, changed))
            why = "a sibling reader runs after the in-place write";
        else
            continue;
        kiln_status st = protect(r, src, n, i, why);
        if (st != KILN_OK)
            return st;
        *changed = true;
    }
    return KILN_OK;
}

static kiln_pass_result run(void *inst, kiln_pass_ctx *ctx, kiln_graph *g)
{
    (void)inst;
    if (kiln_graph_node_count(g) < 2)
        return KILN_PASS_NOT_CHANGED;
    hccl_run r = {ctx, g, kiln_graph_id_limit(g), NULL};
    bool changed = false;
    kiln_status st = KILN_OK;
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n && n < r.lim && st == KILN_OK;
         n = kiln_graph_next_node(g, n)) {
        if (!mc_node_bool(g, n, "_input_mutable"))
            continue;
        if (!r.topo) {
            const kiln_node_id *order;
            uint32_t cnt;
            r.topo = kiln_alloc((size_t)r.lim * sizeof(*r.topo));
            if (!r.topo)
                return mc_fail(ctx, "HcclMemcpyPass: allocation", kiln_node_name_str(g, n));
            if ((st = kiln_graph_topo_order(g, &order, &cnt, kiln_pass_error(ctx))) != KILN_OK)
                break;
            for (uint32_t i = 0; i < r.lim; i++)
                r.topo[i] = UINT32_MAX;
            for (uint32_t i = 0; i < cnt; i++)
                r.topo[order[i]] = i;
        }
        st = mutable_inputs(&r, n, &changed);
    }
    kiln_free(r.topo);
    if (st != KILN_OK)
        return KILN_PASS_FAILED;
    return changed ? KILN_PASS_CHANGED : KILN_PASS_NOT_CHANGED;
}

const kiln_pass_desc kiln_mc_hccl_memcpy_pass = {
    .struct_size = sizeof(kiln_pass_desc),
    .kind = KILN_PASS_KIND_GRAPH,
    .name = "HcclMemcpyPass",
    .summary = "protect inputs of _input_mutable HCCL ops with Identity nodes",
    .run_graph = run,
};

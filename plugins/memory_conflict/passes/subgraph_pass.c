/*
 * subgraph_pass.c - SubgraphPass (GE subgraph_pass.cc; GE_SEMANTICS 6.3, seed
 * ge-memory-conflict-handling 3.1.3): keeps the addresses of While / If / Case
 * subgraphs apart from what surrounds them by inserting Identity "memcpy"
 * nodes.  A graph pass: the pass manager runs it on the root and then on every
 * subgraph, and each run looks only at the direct nodes of its graph:
 *
 *   subgraph Data       a consumer (following output->input ref chains) needs
 *                       continuous input -> `<data>_output_0_Memcpy` after the
 *                       Data; a Const/Constant real producer (crossing
 *                       PartitionedCall boundaries) of a While input ->
 *                       `<while>_input_<i>_Memcpy` in the parent graph.
 *                       `_parent_node_index` is required.
 *   subgraph NetOutput  `<netoutput>_input_<i>_Memcpy` when the producer is a
 *                       const (parent graph known-shape), an atomic output, a
 *                       continuous output (ref chains backwards), a Data of a
 *                       non-While subgraph, or a While feeding a dynamic-shape
 *                       NetOutput of a known graph.
 *   While               inputs shared with other consumers (producer not
 *                       var-like) -> `<while>_input_<i>_Memcpy`; body: one
 *                       multi-I/O `<body>_input_Memcpy` after the Data nodes not
 *                       bypassed (Data -> NetOutput at the same parent index)
 *                       and one `<body>_output_Memcpy` before the non-bypassed
 *                       NetOutput inputs; a dynamic-shape While also gets
 *                       `<cond>_input_Memcpy` after the cond Data nodes.
 *   If / Case           (known-shape graph) a branch NetOutput input whose
 *                       producer node already fed an earlier input ->
 *                       `<producer>_output_<i>_Memcpy`.
 *
 * Single Identities carry reuse_input=false, no_need_constant_folding=false,
 * _cannot_be_deleted=true and the producer's _batch_label (mc_util.c).
 * Idempotence (kiln): a While body / cond that already holds its
 * `<graph>_input_Memcpy` node is not given a second one; every other rule stops
 * matching once its Identity is in place.
 * Requires: nothing.  Preserves: nothing (inserts nodes).
 * Complexity: O(n + e) per graph plus O(depth) per boundary crossing.
 */
#include "mc_passes.h"
#include <stdio.h>
#include <string.h>

#define NAME_MAX_LEN 512

/* GE MemLayoutConflictUtil::TraverseRefChain with the continuous-input judge. */
static bool continuous_input_required(kiln_graph *g, kiln_node_id n, uint32_t in, uint32_t depth)
{
    if (mc_node_bool(g, n, "continuous_input") || mc_node_bool(g, n, "_no_padding_continuous_input"))
        return true;
    if (depth > 64)
        return false;
    for (uint32_t o = 0; o < kiln_node_output_count(g, n); o++) {
        if (mc_output_ref_input(g, n, o) != (int32_t)in)
            continue;
        for (uint32_t u = kiln_use_first(g, n, o); u; u = kiln_use_next(g, u)) {
            kiln_anchor d = kiln_use_dst(g, u);
            if (continuous_input_required(g, d.node, d.index, depth + 1))
                return true;
        }
    }
    return false;
}

/* GE TraverseRefChainReverse with the continuous-output judge. */
static bool continuous_output_required(kiln_graph *g, kiln_node_id n, uint32_t out)
{
    for (uint32_t depth = 0; n && depth < 64; depth++) {
        if (mc_node_bool(g, n, "continuous_output") ||
            mc_node_bool(g, n, "_no_padding_continuous_output"))
            return true;
        int32_t k = mc_output_ref_input(g, n, out);
        if (k < 0)
            return false;
        kiln_anchor p = kiln_node_input_peer(g, n, (uint32_t)k);
        n = p.node;
        out = p.index;
    }
    return false;
}

/* GE IsAtomicRequired: is_atomic_node and @p out listed in atomic_output_index. */
static bool atomic_required(const kiln_graph *g, kiln_node_id n, uint32_t out)
{
    const int64_t *v;
    uint32_t cnt;
    if (!mc_node_bool(g, n, "is_atomic_node") ||
        !kiln_attrs_get_list_int(kiln_node_attrs(g, n), "atomic_output_index", &v, &cnt))
        return false;
    for (uint32_t i = 0; i < cnt; i++)
        if (v[i] == (int64_t)out)
            return true;
    return false;
}

static kiln_node_id find_netoutput(kiln_graph *g, uint32_t *count)
{
    kiln_node_id found = 0;
    *count = 0;
    const kiln_sym netoutput = mc_sym(g, "NetOutput");
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n))
        if (mc_is_sym(g, n, netoutput)) {
            if (!found)
                found = n;
            (*count)++;
        }
    return found;
}

/*
 * GE NodeUtils::GetInNodeCrossPartionedCallNode for a subgraph Data: the
 * producer of the parent input, entering PartitionedCall outputs and leaving
 * PartitionedCall subgraph Data nodes.  *pg receives its graph.
 */
static kiln_node_id real_producer(kiln_graph *g, kiln_node_id data, kiln_graph **pg)
{
    for (uint32_t depth = 0; depth < 64; depth++) {
        int64_t pidx = -1;
        kiln_graph *parent = kiln_graph_parent(g);
        if (!parent || !kiln_attrs_get_int(kiln_node_attrs(g, data), "_parent_node_index", &pidx) ||
            pidx < 0)
            return 0;
        kiln_node_id pn = kiln_graph_parent_node(g);
        if (pidx >= (int64_t)kiln_node_input_count(parent, pn))
            return 0;
        kiln_anchor p = kiln_node_input_peer(parent, pn, (uint32_t)pidx);
        /* descend through PartitionedCall outputs */
        while (p.node && mc_op_is(parent, p.node, "PartitionedCall") &&
               kiln_node_subgraph_count(parent, p.node) > 0 && depth++ < 64) {
            kiln_graph *sub = kiln_node_subgraph(parent, p.node, 0, NULL);
            uint32_t cnt;
            kiln_node_id no = find_netoutput(sub, &cnt);
            if (!no || p.index >= kiln_node_input_count(sub, no))
                return 0;
            parent = sub;
            p = kiln_node_input_peer(sub, no, p.index);
        }
        if (!p.node)
            return 0;
        kiln_graph *pp = kiln_graph_parent(parent);
        if (pp && mc_op_is(parent, p.node, "Data") &&
            mc_op_is(pp, kiln_graph_parent_node(parent), "PartitionedCall")) {
            g = parent;
            data = p.node;
            continue;
        }
        *pg = parent;
        return p.node;
    }
    return 0;
}

static kiln_pass_result subgraph_data(kiln_pass_ctx *ctx, kiln_graph *g, kiln_node_id data)
{
    char name[NAME_MAX_LEN];
    bool need = false;
    for (uint32_t u = kiln_use_first(g, data, 0); u && !need; u = kiln_use_next(g, u)) {
        kiln_anchor d = kiln_use_dst(g, u);
        need = continuous_input_required(g, d.node, d.index, 0);
    }
    if (need) {
        snprintf(name, sizeof name, "%s_output_0_Memcpy", kiln_node_name_str(g, data));
        if (!mc_insert_memcpy_after(ctx, g, data, 0, NULL, 0, name,
                                    "SubgraphPass: subgraph Data feeds a continuous-input op"))
            return KILN_PASS_FAILED;
    }
    if (!mc_node_has(g, data, "_parent_node_index")) {
        kiln_errorf(kiln_pass_error(ctx), KILN_ERR_PASS,
                    "subgraph Data %s of graph %s has no _parent_node_index",
                    kiln_node_name_str(g, data), kiln_graph_name(g));
        return KILN_PASS_FAILED;
    }
    kiln_graph *pg = NULL;
    kiln_node_id src = real_producer(g, data, &pg);
    if (!src || !mc_is_const(pg, src))
        return need ? KILN_PASS_CHANGED : KILN_PASS_NOT_CHANGED;
    kiln_graph *parent = kiln_graph_parent(g);
    kiln_node_id pn = kiln_graph_parent_node(g);
    if (!mc_is_while(parent, pn))
        return need ? KILN_PASS_CHANGED : KILN_PASS_NOT_CHANGED;
    int64_t pidx = 0;
    kiln_attrs_get_int(kiln_node_attrs(g, data), "_parent_node_index", &pidx);
    kiln_anchor p = kiln_node_input_peer(parent, pn, (uint32_t)pidx);
    kiln_anchor dst = {pn, (uint32_t)pidx};
    snprintf(name, sizeof name, "%s_input_%u_Memcpy", kiln_node_name_str(parent, pn), dst.index);
    if (!mc_insert_memcpy_after(ctx, parent, p.node, p.index, &dst, 1, name,
                                "SubgraphPass: constant input of a While"))
        return KILN_PASS_FAILED;
    return KILN_PASS_CHANGED;
}

static kiln_pass_result subgraph_netoutput(kiln_pass_ctx *ctx, kiln_graph *g, kiln_node_id no)
{
    kiln_graph *parent = kiln_graph_parent(g);
    kiln_node_id pn = kiln_graph_parent_node(g);
    bool parent_is_while = mc_is_while(parent, pn);
    bool changed = false;
    for (uint32_t i = 0; i < kiln_node_input_count(g, no); i++) {
        kiln_anchor p = kiln_node_input_peer(g, no, i);
        if (!p.node)
            continue;
        const char *rule = NULL;
        if (mc_is_const(g, p.node) && !mc_graph_unknown(parent))
            rule = "SubgraphPass: constant output of a subgraph in a known-shape graph";
        else if (atomic_required(g, p.node, p.index))
            rule = "SubgraphPass: atomic output reaches a subgraph NetOutput";
        else if (continuous_output_required(g, p.node, p.index))
            rule = "SubgraphPass: continuous output reaches a subgraph NetOutput";
        else if (mc_op_is(g, p.node, "Data") && !parent_is_while)
            rule = "SubgraphPass: Data passes straight through a non-While subgraph";
        else if (mc_is_while(g, p.node) && !mc_graph_unknown(g) && mc_node_dynamic(g, no))
            rule = "SubgraphPass: While feeds a dynamic-shape NetOutput of a known graph";
        if (!rule)
            continue;
        char name[NAME_MAX_LEN];
        kiln_anchor dst = {no, i};
        snprintf(name, sizeof name, "%s_input_%u_Memcpy", kiln_node_name_str(g, no), i);
        if (!mc_insert_memcpy_after(ctx, g, p.node, p.index, &dst, 1, name, rule))
            return KILN_PASS_FAILED;
        changed = true;
    }
    return changed ? KILN_PASS_CHANGED : KILN_PASS_NOT_CHANGED;
}

static kiln_pass_result while_inputs(kiln_pass_ctx *ctx, kiln_graph *g, kiln_node_id w)
{
    bool changed = false;
    for (uint32_t i = 0; i < kiln_node_input_count(g, w); i++) {
        kiln_anchor p = kiln_node_input_peer(g, w, i);
        if (!p.node || mc_is_var_like(g, p.node) ||
            kiln_node_output_use_count(g, p.node, p.index) <= 1)
            continue;
        char name[NAME_MAX_LEN];
        kiln_anchor dst = {w, i};
        snprintf(name, sizeof name, "%s_input_%u_Memcpy", kiln_node_name_str(g, w), i);
        if (!mc_insert_memcpy_after(ctx, g, p.node, p.index, &dst, 1, name,
                                    "SubgraphPass: While input shared with other consumers"))
            return KILN_PASS_FAILED;
        changed = true;
    }
    return changed ? KILN_PASS_CHANGED : KILN_PASS_NOT_CHANGED;
}

/*
 * One multi-I/O Identity @p name: input/output k stands between (src[k]) and
 * the consumers listed for it (all consumers of src[k] when @p dst is NULL,
 * else the single input dst[k]).  @p like[k] is the descriptor to copy.
 */
static kiln_pass_result multi_identity(kiln_pass_ctx *ctx, kiln_graph *g, const char *name,
                                       const kiln_anchor *src, const kiln_anchor *dst,
                                       uint32_t k, const char *rule)
{
    if (k == 0)
        return KILN_PASS_NOT_CHANGED;
    kiln_node_id id = kiln_graph_add_node(g, name, "Identity", k, k);
    if (!id)
        return mc_fail(ctx, "SubgraphPass: add node", name);
    for (uint32_t i = 0; i < k; i++) {
        const kiln_tensor_desc *like =
            dst ? kiln_node_input_desc(g, dst[i].node, dst[i].index)
                : kiln_node_output_desc(g, src[i].node, src[i].index);
        kiln_tensor_desc *od = kiln_node_output_desc(g, id, i);
        if (like && (kiln_desc_copy(g, od, like) != KILN_OK ||
                     kiln_desc_set_ref_input(g, od, -1) != KILN_OK))
            return mc_fail(ctx, "SubgraphPass: descriptor copy", name);
        if (dst) {
            kiln_edge_remove(g, dst[i].node, dst[i].index);
            if (kiln_edge_add(g, id, i, dst[i].node, dst[i].index) != KILN_OK)
                return mc_fail(ctx, "SubgraphPass: edge", name);
        } else {
            for (uint32_t u = kiln_use_first(g, src[i].node, src[i].index); u;) {
                uint32_t next = kiln_use_next(g, u);
                kiln_anchor d = kiln_use_dst(g, u);
                kiln_edge_remove(g, d.node, d.index);
                if (kiln_edge_add(g, id, i, d.node, d.index) != KILN_OK)
                    return mc_fail(ctx, "SubgraphPass: edge", name);
                u = next;
            }
        }
        if (kiln_edge_add(g, src[i].node, src[i].index, id, i) != KILN_OK)
            return mc_fail(ctx, "SubgraphPass: edge", name);
    }
    kiln_pass_explain(ctx, g, id, "%s (%u tensors)", rule, k);
    kiln_pass_stat_add(ctx, "identities inserted", 1);
    return KILN_PASS_CHANGED;
}

/* GE InsertInputMemcpy over the listed Data nodes of @p g. */
static kiln_pass_result input_memcpy(kiln_pass_ctx *ctx, kiln_graph *g, const kiln_node_id *datas,
                                     uint32_t k, const char *rule)
{
    char name[NAME_MAX_LEN];
    snprintf(name, sizeof name, "%s_input_Memcpy", kiln_graph_name(g));
    if (k == 0 || kiln_graph_find_node(g, name))
        return KILN_PASS_NOT_CHANGED;
    kiln_anchor *src = kiln_alloc((size_t)k * sizeof(*src));
    if (!src)
        return mc_fail(ctx, "SubgraphPass: allocation", name);
    for (uint32_t i = 0; i < k; i++)
        src[i] = (kiln_anchor){datas[i], 0};
    kiln_pass_result r = multi_identity(ctx, g, name, src, NULL, k, rule);
    kiln_free(src);
    return r;
}

/* GE CheckInsertInputMemcpy: false (bypass) for Data -> NetOutput at its own parent index. */
static bool body_data_needs_memcpy(kiln_graph *g, kiln_node_id data, uint8_t *bypass,
                                   uint32_t nout)
{
    int64_t in_idx = 0, out_idx = 0;
    if (!kiln_attrs_get_int(kiln_node_attrs(g, data), "_parent_node_index", &in_idx) ||
        kiln_node_output_count(g, data) < 1 || kiln_node_output_use_count(g, data, 0) != 1)
        return true;
    kiln_anchor d = kiln_use_dst(g, kiln_use_first(g, data, 0));
    if (!mc_op_is(g, d.node, "NetOutput"))
        return true;
    /* GRAPH_FORMAT: a NetOutput input without the attribute maps to output i */
    out_idx = d.index;
    if (kiln_node_input_has_desc(g, d.node, d.index))
        kiln_attrs_get_int(kiln_desc_attrs(kiln_node_input_desc(g, d.node, d.index)),
                           "_parent_node_index", &out_idx);
    if (in_idx != out_idx)
        return true;
    if (d.index < nout)
        bypass[d.index] = 1;
    return false;
}

static kiln_pass_result while_body(kiln_pass_ctx *ctx, kiln_graph *g, kiln_node_id w)
{
    kiln_graph *body = NULL, *cond = NULL;
    for (uint32_t i = 0; i < kiln_node_subgraph_count(g, w); i++) {
        const char *role = NULL;
        kiln_graph *s = kiln_node_subgraph(g, w, i, &role);
        if (role && strcmp(role, "body") == 0)
            body = s;
        else if (role && strcmp(role, "cond") == 0)
            cond = s;
    }
    if (!body) {
        kiln_errorf(kiln_pass_error(ctx), KILN_ERR_PASS, "While %s has no body subgraph",
                    kiln_node_name_str(g, w));
        return KILN_PASS_FAILED;
    }
    if (mc_graph_unknown(body))
        return KILN_PASS_NOT_CHANGED;
    bool changed = false;
    uint32_t lim = kiln_graph_id_limit(body);
    if (cond)
        lim = lim > kiln_graph_id_limit(cond) ? lim : kiln_graph_id_limit(cond);
    kiln_node_id *datas = kiln_alloc(((size_t)lim + 1) * sizeof(*datas));
    if (!datas)
        return mc_fail(ctx, "SubgraphPass: allocation", kiln_node_name_str(g, w));
    kiln_pass_result r = KILN_PASS_NOT_CHANGED;
    if (cond && mc_node_dynamic(g, w)) {
        uint32_t k = 0;
        const kiln_sym data = mc_sym(cond, "Data");
        for (kiln_node_id n = kiln_graph_next_node(cond, 0); n; n = kiln_graph_next_node(cond, n))
            if (mc_is_sym(cond, n, data))
                datas[k++] = n;
        r = input_memcpy(ctx, cond, datas, k, "SubgraphPass: cond inputs of a dynamic-shape While");
        changed = r == KILN_PASS_CHANGED;
    }
    uint32_t nno = 0;
    kiln_node_id no = find_netoutput(body, &nno);
    if (r != KILN_PASS_FAILED && nno != 1) {
        kiln_errorf(kiln_pass_error(ctx), KILN_ERR_PASS, "While body %s has %s NetOutput",
                    kiln_graph_name(body), nno ? "more than one" : "no");
        r = KILN_PASS_FAILED;
    }
    char name[NAME_MAX_LEN];
    snprintf(name, sizeof name, "%s_input_Memcpy", kiln_graph_name(body));
    if (r != KILN_PASS_FAILED && !kiln_graph_find_node(body, name)) {
        uint32_t nout = kiln_node_input_count(body, no);
        uint8_t *bypass = kiln_alloc((size_t)nout + 1);
        kiln_anchor *src = kiln_alloc(((size_t)nout + 1) * sizeof(*src));
        kiln_anchor *dst = kiln_alloc(((size_t)nout + 1) * sizeof(*dst));
        if (!bypass || !src || !dst) {
            r = mc_fail(ctx, "SubgraphPass: allocation", kiln_node_name_str(g, w));
        } else {
            memset(bypass, 0, (size_t)nout + 1);
            uint32_t k = 0, m = 0;
            const kiln_sym data = mc_sym(body, "Data");
            for (kiln_node_id n = kiln_graph_next_node(body, 0); n; n = kiln_graph_next_node(body, n))
                if (mc_is_sym(body, n, data) && body_data_needs_memcpy(body, n, bypass, nout))
                    datas[k++] = n;
            r = input_memcpy(ctx, body, datas, k, "SubgraphPass: While body inputs");
            if (r != KILN_PASS_FAILED) {
                changed = changed || r == KILN_PASS_CHANGED;
                /* producers as they are after the input memcpy */
                for (uint32_t i = 0; i < nout; i++) {
                    kiln_anchor p = kiln_node_input_peer(body, no, i);
                    if (!bypass[i] && p.node) {
                        src[m] = p;
                        dst[m++] = (kiln_anchor){no, i};
                    }
                }
                snprintf(name, sizeof name, "%s_output_Memcpy", kiln_graph_name(body));
                if (m && !kiln_graph_find_node(body, name))
                    r = multi_identity(ctx, body, name, src, dst, m,
                                       "SubgraphPass: While body outputs");
                changed = changed || r == KILN_PASS_CHANGED;
            }
        }
        kiln_free(bypass);
        kiln_free(src);
        kiln_free(dst);
    }
    kiln_free(datas);
    if (r == KILN_PASS_FAILED)
        return r;
    return changed ? KILN_PASS_CHANGED : KILN_PASS_NOT_CHANGED;
}

/* GE SeparateOutputsAddrOfCondSubgraph. */
static kiln_pass_result cond_outputs(kiln_pass_ctx *ctx, kiln_graph *g, kiln_node_id node)
{
    bool changed = false;
    for (uint32_t s = 0; s < kiln_node_subgraph_count(g, node); s++) {
        kiln_graph *sub = kiln_node_subgraph(g, node, s, NULL);
        uint32_t cnt;
        kiln_node_id no = find_netoutput(sub, &cnt);
        if (!no) {
            kiln_errorf(kiln_pass_error(ctx), KILN_ERR_PASS, "branch %s of %s has no NetOutput",
                        kiln_graph_name(sub), kiln_node_name_str(g, node));
            return KILN_PASS_FAILED;
        }
        uint32_t nin = kiln_node_input_count(sub, no);
        for (uint32_t i = 0; i < nin; i++) {
            kiln_anchor p = kiln_node_input_peer(sub, no, i);
            if (!p.node)
                continue;
            bool seen = false;
            for (uint32_t j = 0; j < i && !seen; j++)
                seen = kiln_node_input_peer(sub, no, j).node == p.node;
            if (!seen)
                continue;
            char name[NAME_MAX_LEN];
            kiln_anchor dst = {no, i};
            snprintf(name, sizeof name, "%s_output_%u_Memcpy", kiln_node_name_str(sub, p.node), i);
            if (!mc_insert_memcpy_after(ctx, sub, p.node, p.index, &dst, 1, name,
                                        "SubgraphPass: branch outputs share one producer"))
                return KILN_PASS_FAILED;
            changed = true;
        }
    }
    return changed ? KILN_PASS_CHANGED : KILN_PASS_NOT_CHANGED;
}

static kiln_pass_result run(void *inst, kiln_pass_ctx *ctx, kiln_graph *g)
{
    (void)inst;
    bool is_sub = kiln_graph_parent(g) != NULL;
    bool changed = false;
    uint32_t lim = kiln_graph_id_limit(g); /* GE walks a snapshot of the direct nodes */
    const kiln_sym data = mc_sym(g, "Data"), netoutput = mc_sym(g, "NetOutput");
    /* mc_is_while / mc_is_if_or_case as symbol sets of this run */
    static const char *const while_ops[] = {"While", "_While", "StatelessWhile", NULL};
    static const char *const cond_ops[] = {"If",    "_If",           "StatelessIf", "Case",
                                           "_Case", "StatelessCase", NULL};
    mc_symset whiles, conds;
    if (!mc_symset_init(&whiles, g, while_ops) || !mc_symset_init(&conds, g, cond_ops))
        return mc_fail(ctx, "SubgraphPass: allocation", kiln_graph_name(g));
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n && n < lim; n = kiln_graph_next_node(g, n)) {
        kiln_pass_result r = KILN_PASS_NOT_CHANGED;
        if (is_sub && mc_is_sym(g, n, data)) {
            r = subgraph_data(ctx, g, n);
        } else if (is_sub && mc_is_sym(g, n, netoutput)) {
            r = subgraph_netoutput(ctx, g, n);
        } else if (mc_symset_has(&whiles, g, n)) {
            r = while_inputs(ctx, g, n);
            if (r != KILN_PASS_FAILED) {
                kiln_pass_result r2 = while_body(ctx, g, n);
                r = r2 == KILN_PASS_NOT_CHANGED ? r : r2;
            }
        } else if (mc_symset_has(&conds, g, n) && !mc_graph_unknown(g)) {
            r = cond_outputs(ctx, g, n);
        }
        if (r == KILN_PASS_FAILED) {
            kiln_error_push(kiln_pass_error(ctx), "graph %s, node %s", kiln_graph_name(g),
                            kiln_node_name_str(g, n));
            return r;
        }
        changed = changed || r == KILN_PASS_CHANGED;
    }
    return changed ? KILN_PASS_CHANGED : KILN_PASS_NOT_CHANGED;
}

const kiln_pass_desc kiln_mc_subgraph_pass = {
    .struct_size = sizeof(kiln_pass_desc),
    .kind = KILN_PASS_KIND_GRAPH,
    .name = "SubgraphPass",
    .summary = "isolate While/If/Case subgraph addresses with Identity memcpy nodes",
    .run_graph = run,
};

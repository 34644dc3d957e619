/*
 * cond_remove.c - CondRemovePass (GE's CondRemovePass), a node pass run by
 * GEPass.
 *
 * An If or Case whose condition (input 0) is produced by a Const is replaced
 * by a PartitionedCall of the branch the condition selects, as GE does:
 *   - If: a scalar condition selects then_branch when its first element is
 *     non-zero (read in its dtype; floats truncated toward zero as GE does),
 *     else_branch otherwise; a non-scalar condition selects then_branch when
 *     it has at least one element, else_branch when a dim is 0;
 *   - Case: the int32 index selects branch i in the node's order, an index past
 *     the last branch selects the last one, a negative one changes nothing
 *     (and a condition that is not int32 changes nothing, like GE);
 *   - the PartitionedCall takes the node's name, its inputs 1.. (the condition
 *     link is dropped and the branch's Data nodes' `_parent_node_index`
 *     shifted down by one; when the branch reads the condition itself, input 0
 *     is kept and nothing is shifted), its outputs, consumers, control edges
 *     and attributes other than the branch bookkeeping; the chosen branch is
 *     copied (nested subgraphs too) as its subgraph `f`, named after the
 *     branch; the node and both branches are removed.
 * The PartitionedCall is re-passed, so the walk visits its subgraph.
 * InferShapes inlines an If whose condition it knows directly into the parent
 * graph (it needs the branch's shapes at once); CondRemovePass is the pass for
 * graphs whose condition became a Const later (after ConstantFoldingPass) and
 * for Case, and keeps GE's PartitionedCall form.
 * Counters: if_removed, case_removed.  Requires: nothing.
 */
#include "passes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool subgraph_name_taken(kiln_graph *root, const char *name)
{
    if (strcmp(kiln_graph_name(root), name) == 0)
        return true;
    uint32_t n = kiln_graph_all_subgraph_count(root);
    for (uint32_t i = 0; i < n; i++)
        if (strcmp(kiln_graph_name(kiln_graph_all_subgraph(root, i)), name) == 0)
            return true;
    return false;
}

static kiln_status copy_graph(kiln_graph *dst, kiln_graph *src, int32_t shift, kiln_sym s_data);

/* Copy @p n of @p src into @p dst (kiln_graph_copy_node: op, attributes,
 * descriptors) with its subgraphs, deep. */
static kiln_node_id copy_node(kiln_graph *dst, kiln_graph *src, kiln_node_id n)
{
    kiln_node_id c = kiln_graph_copy_node(dst, src, n, NULL);
    if (!c)
        return 0;
    kiln_graph *root = kiln_graph_root(dst);
    for (uint32_t s = 0; s < kiln_node_subgraph_count(src, n); s++) {
        const char *role = NULL;
        kiln_graph *sg = kiln_node_subgraph(src, n, s, &role);
        char name[512];
        snprintf(name, sizeof(name), "%s", kiln_graph_name(sg));
        for (uint32_t k = 1; subgraph_name_taken(root, name); k++)
            snprintf(name, sizeof(name), "%s_%u", kiln_graph_name(sg), k);
        kiln_graph *ng = kiln_node_add_subgraph(dst, c, role, name);
        if (!ng || copy_graph(ng, sg, 0, 0) != KILN_OK)
            return 0;
    }
    return c;
}

/* Copy every node and edge of @p src into the empty @p dst; Data nodes'
 * _parent_node_index lowered by @p shift. */
static kiln_status copy_graph(kiln_graph *dst, kiln_graph *src, int32_t shift, kiln_sym s_data)
{
    uint32_t lim = kiln_graph_id_limit(src);
    kiln_node_id *map = calloc(lim ? lim : 1, sizeof(*map));
    if (!map)
        return KILN_ERR_NOMEM;
    kiln_status st = KILN_OK;
    const kiln_attrs *ga = kiln_graph_attrs(src);
    if (ga && kiln_attrs_count(ga))
        kiln_attrs_copy(kiln_graph_attrs(dst), ga);
    for (kiln_node_id n = kiln_graph_next_node(src, 0); n && st == KILN_OK;
         n = kiln_graph_next_node(src, n)) {
        if (!(map[n] = copy_node(dst, src, n)))
            st = KILN_ERR_NOMEM;
        int64_t k;
        if (st == KILN_OK && shift && s_data && kiln_node_op(src, n) == s_data &&
            kiln_attrs_get_int(kiln_node_attrs(src, n), "_parent_node_index", &k))
            st = kiln_attrs_set_int(kiln_node_attrs_mut(dst, map[n]), "_parent_node_index",
                                    k - shift);
    }
    for (kiln_node_id n = kiln_graph_next_node(src, 0); n && st == KILN_OK;
         n = kiln_graph_next_node(src, n)) {
        for (uint32_t i = 0; i < kiln_node_input_count(src, n) && st == KILN_OK; i++) {
            kiln_anchor p = kiln_node_input_peer(src, n, i);
            if (p.node)
                st = kiln_edge_add(dst, map[p.node], p.index, map[n], i);
        }
        for (uint32_t c = kiln_ctrl_out_first(src, n); c && st == KILN_OK;
             c = kiln_ctrl_out_next(src, c))
            st = kiln_ctrl_add(dst, map[n], map[kiln_ctrl_dst(src, c)]);
    }
    free(map);
    return st;
}

/* GE's condition index of a Const tensor; -1 when it cannot be read. */
static int64_t cond_index(const kiln_tensor_value *t)
{
    if (t->rank > 0) {
        for (uint32_t i = 0; i < t->rank; i++)
            if (t->dims[i] == 0)
                return 0;
        return 1;
    }
    const void *p = t->data;
    size_t es = kiln_dtype_size(t->dtype);
    if (!p || es == 0 || t->nbytes < es)
        return -1;
    switch (t->dtype) {
    case KILN_DT_BOOL:
    case KILN_DT_UINT8:
        return *(const uint8_t *)p;
    case KILN_DT_INT8:
        return *(const int8_t *)p;
    case KILN_DT_INT16:
        return *(const int16_t *)p;
    case KILN_DT_UINT16:
        return *(const uint16_t *)p;
    case KILN_DT_INT32:
        return *(const int32_t *)p;
    case KILN_DT_UINT32:
        return *(const uint32_t *)p;
    case KILN_DT_INT64:
    case KILN_DT_UINT64:
        return (int32_t) * (const int64_t *)p;
    case KILN_DT_FLOAT32:
        return (int64_t) * (const float *)p;
    case KILN_DT_FLOAT64:
        return (int64_t) * (const double *)p;
    default: /* 16-bit floats: non-zero bits */
        return *(const uint16_t *)p != 0;
    }
}

static kiln_status cr_run(void *inst, kiln_pass_ctx *ctx, kiln_graph *g, kiln_node_id n)
{
    (void)inst;
    if (kiln_pass_after_subgraph(ctx))
        return KILN_OK;
    const char *op = kiln_node_op_str(g, n);
    bool is_if = strcmp(op, "If") == 0 || strcmp(op, "StatelessIf") == 0;
    bool is_case = strcmp(op, "Case") == 0 || strcmp(op, "StatelessCase") == 0;
    uint32_t nsub = kiln_node_subgraph_count(g, n);
    if ((!is_if && !is_case) || nsub == 0 || kiln_node_input_count(g, n) == 0)
        return KILN_OK;
    kiln_anchor c = kiln_node_input_peer(g, n, 0);
    kiln_tensor_value t;
    if (!c.node || c.index != 0 || !(kiln_node_op_flags(g, c.node) & KILN_OP_CONSTANT) ||
        !kiln_attrs_get_tensor(kiln_node_attrs(g, c.node), "value", &t))
        return KILN_OK;
    if (is_case && t.dtype != KILN_DT_INT32)
        return KILN_OK;
    int64_t idx = cond_index(&t);
    if (idx < 0)
        return KILN_OK;
    kiln_graph *chosen = NULL;
    kiln_error *err = kiln_pass_error(ctx);
    /* copies: interning the names of the nodes added below may move strings */
    char name[512], op_buf[64];
    snprintf(name, sizeof(name), "%s", kiln_node_name_str(g, n));
    snprintf(op_buf, sizeof(op_buf), "%s", op);
    op = op_buf;
    if (is_if) {
        const char *want = idx ? "then_branch" : "else_branch";
        for (uint32_t s = 0; s < nsub && !chosen; s++) {
            const char *role = NULL;
            kiln_graph *sg = kiln_node_subgraph(g, n, s, &role);
            if (role && strcmp(role, want) == 0)
                chosen = sg;
        }
        if (!chosen)
            return kiln_errorf(err, KILN_ERR_INVALID, "CondRemovePass: node %s (If) has no %s",
                               name, want);
    } else {
        chosen = kiln_node_subgraph(g, n, idx >= nsub ? nsub - 1 : (uint32_t)idx, NULL);
    }
    /* does the branch read the condition itself? */
    kiln_sym s_data = kiln_sym_lookup(chosen, "Data");
    bool reads_cond = false;
    for (kiln_node_id m = kiln_graph_next_node(chosen, 0); m; m = kiln_graph_next_node(chosen, m)) {
        int64_t k = -1;
        if (s_data && kiln_node_op(chosen, m) == s_data &&
            kiln_attrs_get_int(kiln_node_attrs(chosen, m), "_parent_node_index", &k) && k == 0)
            reads_cond = true;
    }
    uint32_t first = reads_cond ? 0 : 1;
    uint32_t nin = kiln_node_input_count(g, n), nout = kiln_node_output_count(g, n);
    char tmp[600];
    snprintf(tmp, sizeof(tmp), "%s_partitioned_call", name);
    for (uint32_t k = 1; kiln_graph_find_node(g, tmp); k++)
        snprintf(tmp, sizeof(tmp), "%s_partitioned_call_%u", name, k);
    kiln_node_id pc = kiln_graph_add_node(g, tmp, "PartitionedCall", nin - first, nout);
    kiln_status st = pc ? KILN_OK : KILN_ERR_NOMEM;
    /* attributes other than the branch bookkeeping */
    if (st == KILN_OK)
        st = kiln_attrs_copy(kiln_node_attrs_mut(g, pc), kiln_node_attrs(g, n));
    if (st == KILN_OK) {
        kiln_attrs *a = kiln_node_attrs_mut(g, pc);
        kiln_attrs_remove(a, "then_branch");
        kiln_attrs_remove(a, "else_branch");
        kiln_attrs_remove(a, "branches");
    }
    char sname[512];
    snprintf(sname, sizeof(sname), "%s", kiln_graph_name(chosen));
    kiln_graph *root = kiln_graph_root(g);
    for (uint32_t k = 1; st == KILN_OK && subgraph_name_taken(root, sname); k++)
        snprintf(sname, sizeof(sname), "%s_%u", kiln_graph_name(chosen), k);
    kiln_graph *f = st == KILN_OK ? kiln_node_add_subgraph(g, pc, "f", sname) : NULL;
    if (st == KILN_OK && !f)
        st = KILN_ERR_NOMEM;
    if (st == KILN_OK)
        st = copy_graph(f, chosen, (int32_t)first, s_data);
    for (uint32_t i = first; i < nin && st == KILN_OK; i++) {
        kiln_anchor p = kiln_node_input_peer(g, n, i);
        if (kiln_node_input_has_desc(g, n, i))
            st = kiln_desc_copy(g, kiln_node_input_desc_mut(g, pc, i - first),
                                kiln_node_input_desc(g, n, i));
        if (st == KILN_OK && p.node)
            st = kiln_edge_add(g, p.node, p.index, pc, i - first);
    }
    for (uint32_t o = 0; o < nout && st == KILN_OK; o++) {
        st = kiln_desc_copy(g, kiln_node_output_desc(g, pc, o), kiln_node_output_desc(g, n, o));
        uint32_t u = kiln_use_first(g, n, o);
        while (u && st == KILN_OK) {
            uint32_t next = kiln_use_next(g, u);
            kiln_anchor d = kiln_use_dst(g, u);
            kiln_edge_remove(g, d.node, d.index);
            st = kiln_edge_add(g, pc, o, d.node, d.index);
            u = next;
        }
    }
    for (uint32_t k = kiln_ctrl_in_first(g, n); k && st == KILN_OK; k = kiln_ctrl_in_next(g, k))
        st = kiln_ctrl_add(g, kiln_ctrl_src(g, k), pc);
    for (uint32_t k = kiln_ctrl_out_first(g, n); k && st == KILN_OK; k = kiln_ctrl_out_next(g, k))
        st = kiln_ctrl_add(g, pc, kiln_ctrl_dst(g, k));
    if (st != KILN_OK) {
        if (pc)
            kiln_graph_remove_node(g, pc);
        return kiln_errorf(err, st,
                           "CondRemovePass: replacing node %s (%s) by a PartitionedCall "
                           "of %s failed (%s)",
                           name, op, kiln_graph_name(chosen), kiln_status_str(st));
    }
    char keep[600];
    snprintf(keep, sizeof(keep), "%s", name);
    char branch[512];
    snprintf(branch, sizeof(branch), "%s", kiln_graph_name(chosen));
    kiln_pass_explain(ctx, g, n, "removed: condition is constant (%lld), took %s", (long long)idx,
                      branch);
    kiln_pass_stat_add(ctx, is_if ? "if_removed" : "case_removed", 1);
    kiln_node_id cond = c.node;
    kiln_pass_node_deleted(ctx, g, n);
    if ((st = kiln_graph_remove_node(g, n)) != KILN_OK)
        return kiln_errorf(err, st, "CondRemovePass: cannot remove node %s", keep);
    kiln_node_set_name(g, pc, keep);
    kiln_pass_explain(ctx, g, pc, "inserted: PartitionedCall of %s (constant condition)", branch);
    /* the condition Const, if nothing else reads it */
    if (kiln_node_is_live(g, cond) && kiln_node_output_use_count(g, cond, 0) == 0 &&
        !kiln_node_ctrl_out_count(g, cond) && !kiln_node_ctrl_in_count(g, cond)) {
        kiln_pass_node_deleted(ctx, g, cond);
        kiln_graph_remove_node(g, cond);
    }
    kiln_pass_repass(ctx, g, pc);
    return KILN_OK;
}

const kiln_pass_desc kiln_cond_remove_pass = {
    .struct_size = sizeof(kiln_pass_desc),
    .kind = KILN_PASS_KIND_NODE,
    .name = "CondRemovePass",
    .summary = "replace If/Case with a constant condition by a PartitionedCall of the taken branch",
    .run_graph = NULL,
    .run_node = cr_run,
};

/*
 * mlc_graph.c - graph predicates shared by HandleMemoryLayoutConflict and
 * ProcessInplace (both compile this file): static/dynamic graphs (GE's
 * unknown-shape flag, kiln's spelling `_graph_unknown_flag`), whether a
 * graph's feature map is refreshable and the graph info (GE_SEMANTICS 3.3),
 * subgraph nesting, session options, GE's Checker::IsSkip for an anchor pair
 * and the conditional-checker call of Checker::CheckConflict (3.5), and
 * IsSkipInsert for an input anchor (3.7).
 */
#include "mlc_pass.h"
#include <string.h>

bool mlc_option_is(const kiln_pass_ctx *ctx, const char *key, const char *value)
{
    const char *v = kiln_pass_session_option(ctx, key);
    return v && strcmp(v, value) == 0;
}

bool mlc_attrs_has(const mlc_attrs *a, kiln_anchor_attr t)
{
    for (uint8_t i = 0; i < a->n; i++)
        if (a->t[i] == t)
            return true;
    return false;
}

/* GE Checker::IsSkip. */
bool mlc_skip_pair(const kiln_mem_anchor *a, const mlc_attrs *ta, const kiln_mem_anchor *b,
                   const mlc_attrs *tb)
{
    if (a->graph == b->graph && a->node == b->node)
        return true;
    if (!a->is_output || !b->is_output || mlc_attrs_has(ta, MLC_AA(CONTINUOUS_OUTPUT)) ||
        mlc_attrs_has(tb, MLC_AA(CONTINUOUS_OUTPUT)))
        return false;
    return (ta->ref_node && ta->ref_node == b->node && ta->ref_graph == b->graph) ||
           (tb->ref_node && tb->ref_node == a->node && tb->ref_graph == a->graph);
}

bool mlc_graph_flag(kiln_graph *g, const char *key)
{
    bool v = false;
    return kiln_attrs_get_bool(kiln_graph_attrs(g), key, &v) && v;
}

bool mlc_graph_static(kiln_graph *g)
{
    return !mlc_graph_flag(g, "_dynamic_shape_partitioned") &&
           !mlc_graph_flag(g, "_graph_unknown_flag");
}

bool mlc_graph_fm_refreshable(const mlc_run *run, kiln_graph *g)
{
    return run->fm_option || (!run->root_static && mlc_graph_static(g));
}

bool mlc_graph_within(kiln_graph *g, const kiln_graph *top)
{
    for (; g; g = kiln_graph_parent(g))
        if (g == top)
            return true;
    return false;
}

uint32_t mlc_graph_info(const mlc_run *run)
{
    uint32_t gi = 0;
    if (run->root_static)
        gi |= KILN_GI_ROOT_GRAPH_STATIC;
    if (mlc_graph_fm_refreshable(run, run->target))
        gi |= KILN_GI_FEATURE_MAP_REFRESHABLE;
    if (!mlc_option_is(run->ctx, "ge.buildGraphMode", "offline") &&
        !mlc_graph_flag(run->target, "_single_op_scene"))
        gi |= KILN_GI_USER_INPUT_NOPADDING_OUTPUT_OK;
    if (mlc_option_is(run->ctx, "ge.exec.staticMemoryPolicy", "4"))
        gi |= KILN_GI_PHYSICAL_MEMORY_REFRESHABLE;
    return gi;
}

kiln_status mlc_run_checker(mlc_run *run, const kiln_mem_anchor *a, const kiln_mem_anchor *b,
                            kiln_anchor_attr ta, kiln_anchor_attr tb, const kiln_mem_anchor *sym,
                            uint32_t n, bool visit[KILN_AA_COUNT][KILN_AA_COUNT], const char **name)
{
    uint32_t flags = 0;
    *name = kiln_checker_find(run->root, ta, tb, &flags);
    if (!*name)
        return KILN_OK;
    if (flags & KILN_CHECKER_CALL_AS_SYMBOL) {
        if (visit[ta][tb]) {
            *name = NULL;
            return KILN_OK;
        }
        visit[ta][tb] = visit[tb][ta] = true;
    }
    kiln_checker_query q = {.struct_size = sizeof(q),
                            .graph_info = run->graph_info,
                            .root = run->root,
                            .a = *a,
                            .b = *b,
                            .type_a = ta,
                            .type_b = tb,
                            .symbol = sym,
                            .symbol_count = n};
    kiln_status st = kiln_checker_run(run->root, &q, run->res, run->err);
    if (st != KILN_OK)
        *name = NULL;
    return st == KILN_ERR_NOT_FOUND ? KILN_OK : st;
}

bool mlc_desc_unknown(const kiln_tensor_desc *d)
{
    if (!d || kiln_desc_rank(d) < 0)
        return true;
    const int64_t *dims = kiln_desc_dims(d);
    for (int32_t i = 0; i < kiln_desc_rank(d); i++)
        if (dims[i] < 0)
            return true;
    return false;
}

/* GE IsSkipInsert: unknown shape, or already fed by a single-consumer copy. */
bool mlc_skip_input(kiln_graph *g, kiln_node_id n, uint32_t i)
{
    kiln_anchor p = kiln_node_input_peer(g, n, i);
    if (!p.node || mlc_desc_unknown(kiln_node_input_desc(g, n, i)))
        return true;
    return mlc_is_memcpy_like(g, p.node) && kiln_node_output_use_count(g, p.node, p.index) == 1;
}

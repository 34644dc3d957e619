/*
 * mlc_graph.c - graph predicates shared by HandleMemoryLayoutConflict and
 * ProcessInplace (both compile this file): static/dynamic graphs (GE's
 * unknown-shape flag, kiln's spelling `_graph_unknown_flag`), whether a
 * graph's feature map is refreshable (GE_SEMANTICS 3.3), subgraph nesting,
 * and GE's IsSkipInsert for an input anchor (3.7).
 */
#include "mlc_pass.h"

bool mlc_graph_flag(kiln_graph *g, const char *key)
{
    bool v = false;
    return kiln_attrs_get_bool(kiln_graph_attrs(g), key, &v) && v;
}

bool mlc_graph_static(kiln_graph *g)
{
    return !mlc_graph_flag(g, "_dynamic_shape_partitioned") && !mlc_graph_flag(g, "_graph_unknown_flag");
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

/*
 * seq_lower.c - GE's runtime graph build of If/Case at load, for both
 * runtimes (seq_runtime.h, docs/control_flow_lowering.md "Running it").
 *
 * GE's RT2 builds its execute graph from the compiled model when it loads
 * it: an If/Case becomes the lowered form of graph_builder/bg_condition (the
 * control frame, branches with InnerData/InnerNetOutput, PointFromInputs and
 * IdentityAddr from the chain-conflict and guarder policies).  kiln does the
 * same on the loaded graph (kiln_bg_lower_graph, kiln_rt_common) and runs the
 * result: the condition picks the branch (GE's SwitchNotify, evaluated by the
 * If step), InnerData are the lowered node's inputs by `index`,
 * InnerNetOutput's input j is output j, PointFromInputs and IdentityAddr are
 * address views on the CPU (output k is input k's tensor).  Guarders are not
 * added (auto_guard off): kiln's runtimes own their buffers.
 *
 * A branch that MemoryAssigner planned (ma_subgraphs.c) holds nodes the
 * lowering added (InnerNetOutput, PointFromInputs, IdentityAddr) and lost
 * Data nodes nobody used; its `_kiln_sub_step` order is renumbered:
 * InnerData first, the planned nodes in their order, then IdentityAddr,
 * PointFromInputs and the InnerNetOutput.  None of these owns a buffer, so
 * the plan's lifetimes stand (every value they read was read by the
 * NetOutput before, live to the end).  A node of another kind without a step
 * leaves the order alone: the branch then runs unplanned (seq_load.c).
 */
#include "seq_runtime.h"

#include "bg_condition.h"

#include <stdlib.h>

static int rank_of(const kiln_graph *g, kiln_node_id n, int64_t *key)
{
    const char *op = kiln_node_op_str(g, n);
    *key = 0;
    if (strcmp(op, "InnerData") == 0)
        return 0;
    if (strcmp(op, "IdentityAddr") == 0)
        return 2;
    if (strcmp(op, "PointFromInputs") == 0)
        return 3;
    if (strcmp(op, "InnerNetOutput") == 0)
        return 4;
    return kiln_attrs_get_int(kiln_node_attrs(g, n), "_kiln_sub_step", key) ? 1 : -1;
}

typedef struct ranked {
    int rank;
    int64_t key;
    kiln_node_id node;
} ranked;

static int cmp_ranked(const void *a, const void *b)
{
    const ranked *x = a, *y = b;
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return x->node < y->node ? -1 : x->node > y->node;
}

/* Renumber `_kiln_sub_step` of planned, lowered branch @p g (see above). */
static kiln_status renumber(kiln_graph *g, kiln_error *err)
{
    uint32_t n = 0;
    for (kiln_node_id v = kiln_graph_next_node(g, 0); v; v = kiln_graph_next_node(g, v))
        n++;
    ranked *r = malloc(sizeof(*r) * (n + 1u));
    if (!r)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    uint32_t k = 0;
    for (kiln_node_id v = kiln_graph_next_node(g, 0); v; v = kiln_graph_next_node(g, v)) {
        r[k] = (ranked){rank_of(g, v, &r[k].key), r[k].key, v};
        if (r[k].rank < 0) { /* a node the plan does not know: run unplanned */
            free(r);
            return KILN_OK;
        }
        r[k].key = r[k].rank == 1 ? r[k].key : 0;
        k++;
    }
    qsort(r, n, sizeof(*r), cmp_ranked);
    kiln_status st = KILN_OK;
    for (uint32_t i = 0; i < n && st == KILN_OK; i++)
        st = kiln_attrs_set_int(kiln_node_attrs_mut(g, r[i].node), "_kiln_sub_step", i);
    free(r);
    return st == KILN_OK ? KILN_OK : kiln_errorf(err, st, "out of memory");
}

/* Whether @p s is a subgraph of a node the lowering made. */
static bool lowered_parent(kiln_graph *s)
{
    kiln_graph *p = kiln_graph_parent(s);
    bool low = false;
    return p &&
           kiln_attrs_get_bool(kiln_node_attrs(p, kiln_graph_parent_node(s)), "_bg_lowered",
                               &low) &&
           low;
}

kiln_status seq_lower_conditions(kiln_graph *g, kiln_error *err)
{
    uint32_t count = 0;
    kiln_status st = kiln_bg_lower_graph(g, false, &count, err);
    if (st != KILN_OK)
        return kiln_error_push(err, "the runtime graph build of If/Case (bg_condition)");
    if (!count)
        return KILN_OK;
    kiln_graph *root = kiln_graph_root(g);
    uint32_t ns = kiln_graph_all_subgraph_count(root);
    for (uint32_t i = 0; i < ns && st == KILN_OK; i++) {
        kiln_graph *s = kiln_graph_all_subgraph(root, i);
        if (s && kiln_attrs_has(kiln_graph_attrs(s), "_kiln_memory_sizes") && lowered_parent(s))
            st = renumber(s, err);
    }
    return st;
}

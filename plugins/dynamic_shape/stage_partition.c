/*
 * stage_partition.c - StagePartitioner (GE compiler/graph/partition/
 * stage_partitioner.cc; docs/dynamic_shape.md "StagePartitioner").
 *
 *   1. nodes with `_stage_level` are the seeds (input Data nodes are skipped);
 *   2. levels are grown in ascending order, each backwards over data and
 *      control inputs that have no level yet or the same level; an input gets
 *      the level attribute, and an input Data node is not traversed;
 *   3. every node left without a level, except input Data and NetOutput, goes
 *      to the tail stage, max level + 1;
 *   4. each level becomes a PartitionedCall `Subgraph_Level_<n>` with the
 *      subgraph of the same name; the call gets `_stage_level` = n and
 *      `_force_unknown_shape` = true, the subgraph `_stage_level` = n; one
 *      call input per boundary edge, as GE's FindStageIO.
 * Only the root graph is partitioned, once: a root that already holds a
 * `Subgraph_Level_<n>` call is left alone.  Levels that make the calls depend on
 * each other in a cycle are an error naming the graph.  O(nodes + edges).
 */
#include "dynshape.h"

static bool is_input_data(const kiln_graph *g, kiln_node_id n)
{
    const char *op = kiln_node_op_str(g, n);
    if (strcmp(op, "Data") && strcmp(op, "RefData") && strcmp(op, "AippData"))
        return false;
    for (uint32_t i = 0; i < kiln_node_input_count(g, n); i++)
        if (kiln_node_input_peer(g, n, i).node)
            return false;
    return kiln_node_ctrl_in_count(g, n) == 0;
}

static int cmp_pair(const void *x, const void *y)
{
    const int64_t *a = x, *b = y;
    return a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : (a[1] > b[1]) - (a[1] < b[1]);
}

static kiln_pass_result stage_run(void *inst, kiln_pass_ctx *ctx, kiln_graph *g)
{
    (void)inst;
    kiln_error *err = kiln_pass_error(ctx);
    if (kiln_graph_parent(g))
        return KILN_PASS_NOT_CHANGED;
    const kiln_node_id *ord;
    uint32_t nn;
    if (kiln_graph_topo_order(g, &ord, &nn, err) != KILN_OK) {
        kiln_error_push(err, "graph %s", kiln_graph_name(g));
        return KILN_PASS_FAILED;
    }
    /* most graphs have no stage levels: nothing to allocate for them */
    bool any = false;
    for (uint32_t i = 0; i < nn && !any; i++)
        any = kiln_attrs_has(kiln_node_attrs(g, ord[i]), DS_ATTR_STAGE_LEVEL);
    if (!any)
        return KILN_PASS_NOT_CHANGED;
    uint32_t lim = kiln_graph_id_limit(g);
    int64_t *level = kiln_alloc(sizeof(int64_t) * ((size_t)lim + 1));
    kiln_node_id *order = kiln_alloc(sizeof(kiln_node_id) * ((size_t)nn + 1));
    int64_t *seeds = kiln_alloc(sizeof(int64_t) * 2 * ((size_t)nn + 1));
    kiln_node_id *stack = kiln_alloc(sizeof(kiln_node_id) * ((size_t)lim + 1));
    uint32_t *mark = kiln_alloc(sizeof(uint32_t) * ((size_t)lim + 1));
    kiln_node_id *nodes = kiln_alloc(sizeof(kiln_node_id) * ((size_t)nn + 1));
    kiln_pass_result res = KILN_PASS_FAILED;
    if (!level || !order || !seeds || !stack || !mark || !nodes) {
        kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
        goto out;
    }
    memcpy(order, ord, sizeof(kiln_node_id) * nn);
    memset(mark, 0, sizeof(uint32_t) * ((size_t)lim + 1));
    for (uint32_t i = 0; i <= lim; i++)
        level[i] = -1;
    uint32_t ns = 0;
    int64_t max_level = -1;
    for (uint32_t i = 0; i < nn; i++) {
        kiln_node_id n = order[i];
        int64_t lv;
        if (!kiln_attrs_get_int(kiln_node_attrs(g, n), DS_ATTR_STAGE_LEVEL, &lv))
            continue;
        if (lv < 0 || lv > UINT32_MAX) {
            kiln_errorf(err, KILN_ERR_INVALID,
                        "node %s: %s = %lld is not a stage level (0..%u)",
                        kiln_node_name_str(g, n), DS_ATTR_STAGE_LEVEL, (long long)lv,
                        UINT32_MAX);
            goto out;
        }
        if (is_input_data(g, n))
            continue;
        if (strcmp(kiln_node_op_str(g, n), "PartitionedCall") == 0 &&
            strncmp(kiln_node_name_str(g, n), "Subgraph_Level_", 15) == 0) {
            kiln_diag(ctx, KILN_SEV_INFO,
                      "graph %s is stage-partitioned already (%s); not again",
                      kiln_graph_name(g), kiln_node_name_str(g, n));
            res = KILN_PASS_NOT_CHANGED;
            goto out;
        }
        seeds[2 * ns] = lv;
        seeds[2 * ns + 1] = i;
        ns++;
        level[n] = lv;
        if (lv > max_level)
            max_level = lv;
    }
    if (ns == 0) {
        res = KILN_PASS_NOT_CHANGED;
        goto out;
    }
    qsort(seeds, ns, sizeof(int64_t) * 2, cmp_pair);
    /* 2. grow each level backwards, levels in ascending order */
    for (uint32_t s = 0; s < ns;) {
        int64_t cur = seeds[2 * s];
        uint32_t sp = 0;
        while (s < ns && seeds[2 * s] == cur)
            stack[sp++] = order[seeds[2 * s++ + 1]];
        while (sp) {
            kiln_node_id v = stack[--sp];
            for (uint32_t k = 0, nin = kiln_node_input_count(g, v); k < nin; k++) {
                kiln_node_id p = kiln_node_input_peer(g, v, k).node;
                if (!p || level[p] != -1)
                    continue;
                level[p] = cur;
                kiln_attrs_set_int(kiln_node_attrs_mut(g, p), DS_ATTR_STAGE_LEVEL, cur);
                if (!is_input_data(g, p))
                    stack[sp++] = p;
            }
            for (uint32_t c = kiln_ctrl_in_first(g, v); c; c = kiln_ctrl_in_next(g, c)) {
                kiln_node_id p = kiln_ctrl_src(g, c);
                if (level[p] != -1)
                    continue;
                level[p] = cur;
                kiln_attrs_set_int(kiln_node_attrs_mut(g, p), DS_ATTR_STAGE_LEVEL, cur);
                if (!is_input_data(g, p))
                    stack[sp++] = p;
            }
        }
    }
    /* 3. the tail stage */
    int64_t tail = max_level + 1;
    bool has_tail = false;
    for (uint32_t i = 0; i < nn; i++) {
        kiln_node_id n = order[i];
        if (level[n] != -1 || is_input_data(g, n) ||
            strcmp(kiln_node_op_str(g, n), "NetOutput") == 0)
            continue;
        level[n] = tail;
        has_tail = true;
    }
    /* 4. one PartitionedCall per level */
    for (uint32_t i = 0; i < nn; i++) {
        seeds[2 * i] = level[order[i]];
        seeds[2 * i + 1] = i;
    }
    qsort(seeds, nn, sizeof(int64_t) * 2, cmp_pair);
    uint32_t calls = 0;
    for (uint32_t s = 0; s < nn;) {
        int64_t cur = seeds[2 * s];
        uint32_t n = 0;
        for (; s < nn && seeds[2 * s] == cur; s++) {
            kiln_node_id v = order[seeds[2 * s + 1]];
            if (cur < 0 || is_input_data(g, v) || strcmp(kiln_node_op_str(g, v), "NetOutput") == 0)
                continue;
            nodes[n++] = v;
        }
        if (!n)
            continue;
        char name[64];
        snprintf(name, sizeof(name), "Subgraph_Level_%lld", (long long)cur);
        kiln_node_id call = 0;
        kiln_graph *sub = NULL;
        if (ds_build_call(g, nodes, n, name, name, false, mark, lim + 1, &call, &sub, err) !=
            KILN_OK) {
            kiln_error_push(err, "graph %s, stage %lld", kiln_graph_name(g),
                            (long long)cur);
            goto out;
        }
        kiln_attrs *a = kiln_node_attrs_mut(g, call);
        kiln_attrs *ga = kiln_graph_attrs(sub);
        if (!a || !ga || kiln_attrs_set_int(a, DS_ATTR_STAGE_LEVEL, cur) != KILN_OK ||
            kiln_attrs_set_bool(a, DS_ATTR_FORCE_UNKNOWN, true) != KILN_OK ||
            kiln_attrs_set_int(ga, DS_ATTR_STAGE_LEVEL, cur) != KILN_OK) {
            kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
            goto out;
        }
        kiln_pass_explain(ctx, g, call, "stage %lld%s: %u node(s)", (long long)cur,
                          has_tail && cur == tail ? " (tail)" : "", n);
        calls++;
    }
    kiln_pass_stat_add(ctx, "stage_partitioned_calls", calls);
    if (kiln_graph_topo_order(g, &ord, &nn, err) != KILN_OK) {
        kiln_error_push(err, "graph %s: the stages depend on each other in a "
                        "cycle after partitioning; maybe _stage_level was not set consistently",
                        kiln_graph_name(g));
        goto out;
    }
    res = KILN_PASS_CHANGED;
out:
    kiln_free(level);
    kiln_free(order);
    kiln_free(seeds);
    kiln_free(stack);
    kiln_free(mark);
    kiln_free(nodes);
    return res;
}

const kiln_pass_desc kiln_stage_partition_pass = {
    .struct_size = sizeof(kiln_pass_desc),
    .kind = KILN_PASS_KIND_GRAPH,
    .name = "StagePartitioner",
    .summary = "wrap the nodes of each _stage_level into a PartitionedCall Subgraph_Level_<n> "
               "(GE StagePartitioner)",
    .flags = KILN_PASS_NO_SUBGRAPHS,
    .run_graph = stage_run,
};

/*
 * tp_engine_fake.c - test engines for placement and partitioning
 * (tests/e2e/partition.sh), with op tables that make engines interleave, in
 * the image of GE's partition unit tests (FakeOpNpu on the AI core engine,
 * FakeOpRts on the RTS engine):
 *   aicore  priority 20  FakeOpNpu (any dtype), FakeOpBoth (float32 only)
 *   rts     priority 10  FakeOpRts, FakeOpBoth (any dtype)
 *   vector  priority 30  FakeOpBoth (format NC1HWC0 only), FakeOpVec whose
 *                        supports() declines a node with attribute
 *                        tp_decline = true
 * optimize_subgraph hooks (run on each partition as a graph of its own):
 *   rts     marks every node of its partition tp_rts_optimized = true and
 *           tp_rts_placeholders = the partition's PlaceHolder count; fails when
 *           a PlaceHolder lacks _parentNodeName or an End lacks peerIndex; a
 *           node with tp_record_from = true gets tp_from_op<i> and
 *           tp_from_engine<i>, the parentOpType and pld_front_node_engine_name
 *           of the PlaceHolder on its input i; a node with string tp_retype
 *           gets that op type (an edit that is not structural)
 *   aicore  fails when a node has tp_fail_optimize = true; its
 *           optimize_subgraph_wanted declines a partition with a node marked
 *           tp_not_wanted = true (the hook is not run there)
 *   vector  structural edits: inserts FakeOpVec <n>_tp_added after a node with
 *           tp_add_node = true (taking over its output 0 consumers), removes a
 *           node with tp_remove_node = true (its input 0 producer takes over its
 *           consumers), removes every End when a node has tp_drop_ends = true,
 *           closes a cycle through a new node after a node with tp_cycle = true
 * Compile-time only: no kernels.
 */
#include <kiln/kiln.h>

#include <stdio.h>
#include <string.h>

#define F32 (1u << KILN_DT_FLOAT32)

static const kiln_op_info aicore_ops[] = {
    {sizeof(kiln_op_info), "FakeOpNpu", 0, NULL, 0},
    {sizeof(kiln_op_info), "FakeOpBoth", F32, NULL, 0},
};
static const kiln_op_info rts_ops[] = {
    {sizeof(kiln_op_info), "FakeOpRts", 0, NULL, 0},
    {sizeof(kiln_op_info), "FakeOpBoth", 0, NULL, 0},
};
static const kiln_op_info vector_ops[] = {
    {sizeof(kiln_op_info), "FakeOpBoth", 0, "NC1HWC0", 0},
    {sizeof(kiln_op_info), "FakeOpVec", 0, NULL, 0},
};

static bool vector_supports(void *inst, const kiln_graph *g, kiln_node_id n)
{
    (void)inst;
    bool decline = false;
    return !(kiln_attrs_get_bool(kiln_node_attrs(g, n), "tp_decline", &decline) && decline);
}

static kiln_status rts_optimize(void *inst, kiln_pass_ctx *ctx, kiln_graph *g)
{
    (void)inst;
    int64_t plds = 0;
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n)) {
        const char *op = kiln_node_op_str(g, n), *s;
        int64_t i;
        if (strcmp(op, "PlaceHolder") == 0) {
            plds++;
            if (!kiln_attrs_get_string(kiln_node_attrs(g, n), "_parentNodeName", &s))
                return kiln_errorf(kiln_pass_error(ctx), KILN_ERR_INVALID,
                                   "PlaceHolder %s has no _parentNodeName",
                                   kiln_node_name_str(g, n));
        } else if (strcmp(op, "End") == 0 &&
                   !kiln_attrs_get_int(kiln_node_attrs(g, n), "peerIndex", &i)) {
            return kiln_errorf(kiln_pass_error(ctx), KILN_ERR_INVALID, "End %s has no peerIndex",
                               kiln_node_name_str(g, n));
        }
    }
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n)) {
        const char *op = kiln_node_op_str(g, n);
        if (strcmp(op, "PlaceHolder") == 0 || strcmp(op, "End") == 0)
            continue;
        kiln_attrs *a = kiln_node_attrs_mut(g, n);
        kiln_attrs_set_bool(a, "tp_rts_optimized", true);
        kiln_attrs_set_int(a, "tp_rts_placeholders", plds);
        /* what the PlaceHolders feeding a node say about their producers */
        bool rec = false;
        if (kiln_attrs_get_bool(a, "tp_record_from", &rec) && rec)
            for (uint32_t i = 0; i < kiln_node_input_count(g, n); i++) {
                kiln_anchor p = kiln_node_input_peer(g, n, i);
                const char *s;
                char key[64];
                if (!p.node || strcmp(kiln_node_op_str(g, p.node), "PlaceHolder") != 0)
                    continue;
                const kiln_attrs *pa = kiln_node_attrs(g, p.node);
                if (kiln_attrs_get_string(pa, "parentOpType", &s)) {
                    snprintf(key, sizeof(key), "tp_from_op%u", i);
                    kiln_attrs_set_string(a, key, s);
                }
                if (kiln_attrs_get_string(pa, "pld_front_node_engine_name", &s)) {
                    snprintf(key, sizeof(key), "tp_from_engine%u", i);
                    kiln_attrs_set_string(a, key, s);
                }
            }
        /* an op type changed in place (no structural edit) */
        const char *op2;
        if (kiln_attrs_get_string(a, "tp_retype", &op2) && kiln_node_set_op(g, n, op2) != KILN_OK)
            return kiln_errorf(kiln_pass_error(ctx), KILN_ERR_NOMEM, "rts: retype failed");
    }
    return KILN_OK;
}

static kiln_status aicore_optimize(void *inst, kiln_pass_ctx *ctx, kiln_graph *g)
{
    (void)inst;
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n)) {
        bool fail = false;
        if (kiln_attrs_get_bool(kiln_node_attrs(g, n), "tp_fail_optimize", &fail) && fail)
            return kiln_errorf(kiln_pass_error(ctx), KILN_ERR_INVALID,
                               "aicore cannot optimise node %s", kiln_node_name_str(g, n));
    }
    return KILN_OK;
}

/* Its optimize_subgraph_wanted: no for a partition with a node marked
 * tp_not_wanted = true (its hook is then not run there). */
static bool aicore_wanted(void *inst, kiln_pass_ctx *ctx, const kiln_graph *g, uint32_t rank,
                          const kiln_node_id *nodes, uint32_t count)
{
    (void)inst, (void)ctx;
    for (uint32_t i = 0; i < count; i++) {
        bool no = false;
        if (kiln_node_partition(g, nodes[i]) != (int32_t)rank)
            return true; /* not the partition's nodes: run the hook, which fails the test */
        if (kiln_attrs_get_bool(kiln_node_attrs(g, nodes[i]), "tp_not_wanted", &no) && no)
            return false;
    }
    return true;
}

/* Insert FakeOpVec <n>_tp_added after @p n: it takes over n's output 0 consumers. */
static kiln_status insert_after(kiln_graph *g, kiln_node_id n)
{
    char name[256];
    snprintf(name, sizeof(name), "%s_tp_added", kiln_node_name_str(g, n));
    kiln_node_id m = kiln_graph_add_node(g, name, "FakeOpVec", 1, 1);
    if (!m)
        return KILN_ERR_NOMEM;
    kiln_status st = kiln_desc_copy(g, kiln_node_output_desc(g, m, 0), kiln_node_output_desc(g, n, 0));
    for (uint32_t c = kiln_use_first(g, n, 0), nc; c && st == KILN_OK; c = nc) {
        nc = kiln_use_next(g, c);
        kiln_anchor d = kiln_use_dst(g, c);
        if ((st = kiln_edge_remove(g, d.node, d.index)) == KILN_OK)
            st = kiln_edge_add(g, m, 0, d.node, d.index);
    }
    return st == KILN_OK ? kiln_edge_add(g, n, 0, m, 0) : st;
}

/* Remove @p n, its input 0 producer taking over its output 0 consumers. */
static kiln_status bypass(kiln_graph *g, kiln_node_id n)
{
    kiln_anchor p = kiln_node_input_peer(g, n, 0);
    kiln_status st = KILN_OK;
    for (uint32_t c = kiln_use_first(g, n, 0), nc; c && st == KILN_OK; c = nc) {
        nc = kiln_use_next(g, c);
        kiln_anchor d = kiln_use_dst(g, c);
        if ((st = kiln_edge_remove(g, d.node, d.index)) == KILN_OK && p.node)
            st = kiln_edge_add(g, p.node, p.index, d.node, d.index);
    }
    return st == KILN_OK ? kiln_graph_remove_node(g, n) : st;
}

static kiln_status vector_optimize(void *inst, kiln_pass_ctx *ctx, kiln_graph *g)
{
    (void)inst;
    kiln_node_id add[16], rm[16], cyc = 0;
    uint32_t na = 0, nr = 0;
    bool drop_ends = false;
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n)) {
        const kiln_attrs *a = kiln_node_attrs(g, n);
        bool v = false;
        if (kiln_attrs_get_bool(a, "tp_add_node", &v) && v && na < 16)
            add[na++] = n;
        if (kiln_attrs_get_bool(a, "tp_remove_node", &v) && v && nr < 16)
            rm[nr++] = n;
        if (kiln_attrs_get_bool(a, "tp_drop_ends", &v) && v)
            drop_ends = true;
        if (kiln_attrs_get_bool(a, "tp_cycle", &v) && v)
            cyc = n;
    }
    kiln_status st = KILN_OK;
    if (cyc) { /* n -> n_tp_cycle (data), n_tp_cycle => n (control): a cycle */
        char name[256];
        snprintf(name, sizeof(name), "%s_tp_cycle", kiln_node_name_str(g, cyc));
        kiln_node_id m = kiln_graph_add_node(g, name, "FakeOpVec", 1, 1);
        st = m ? kiln_edge_add(g, cyc, 0, m, 0) : KILN_ERR_NOMEM;
        if (st == KILN_OK)
            st = kiln_ctrl_add(g, m, cyc);
    }
    for (uint32_t i = 0; i < na && st == KILN_OK; i++)
        st = insert_after(g, add[i]);
    for (uint32_t i = 0; i < nr && st == KILN_OK; i++)
        st = bypass(g, rm[i]);
    for (kiln_node_id n = kiln_graph_next_node(g, 0), nn; drop_ends && n && st == KILN_OK; n = nn) {
        nn = kiln_graph_next_node(g, n);
        if (strcmp(kiln_node_op_str(g, n), "End") == 0)
            st = kiln_graph_remove_node(g, n);
    }
    if (st != KILN_OK)
        return kiln_errorf(kiln_pass_error(ctx), st, "vector: structural edit failed");
    return KILN_OK;
}

static kiln_status init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)h;
    (void)e;
    const kiln_engine_desc aicore = {.struct_size = sizeof(kiln_engine_desc),
                                     .name = "aicore",
                                     .summary = "test engine (FakeOpNpu)",
                                     .priority = 20,
                                     .op_count = 2,
                                     .ops = aicore_ops,
                                     .optimize_subgraph = aicore_optimize,
                                     .optimize_subgraph_wanted = aicore_wanted};
    const kiln_engine_desc rts = {.struct_size = sizeof(kiln_engine_desc),
                                  .name = "rts",
                                  .summary = "test engine (FakeOpRts)",
                                  .priority = 10,
                                  .op_count = 2,
                                  .ops = rts_ops,
                                  .optimize_subgraph = rts_optimize};
    const kiln_engine_desc vector = {.struct_size = sizeof(kiln_engine_desc),
                                     .name = "vector",
                                     .summary = "test engine (FakeOpVec, supports())",
                                     .priority = 30,
                                     .op_count = 2,
                                     .ops = vector_ops,
                                     .supports = vector_supports,
                                     .optimize_subgraph = vector_optimize};
    kiln_status st = kiln_register_engine(r, &aicore);
    if (st == KILN_OK)
        st = kiln_register_engine(r, &rts);
    if (st == KILN_OK)
        st = kiln_register_engine(r, &vector);
    return st;
}

KILN_PLUGIN_DEFINE("kiln.test.engine_fake", "0.1.0", "Apache-2.0",
                   "test engines aicore, rts and vector (partitioning tests)", init, NULL)

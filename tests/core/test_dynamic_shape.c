/*
 * test_dynamic_shape.c - DynamicShapePartitioner and StagePartitioner
 * (plugins/dynamic_shape, docs/dynamic_shape.md): GE's PT scenarios of
 * GE_SEMANTICS_BUILD.md 2.4, the ring check, the naming and attributes of the
 * frames, and bad option values.
 */
#include "kiln_test.h"
#include "passmgr.h"
#include "plugin.h"
#include "ctx.h"
#include "graph_int.h"
#include <stdio.h>
#include <string.h>

typedef struct fx {
    kiln_ctx *ctx;
    kiln_graph *g;
    kiln_passmgr *pm;
    kiln_pass_inst pi;
    kiln_error err;
} fx;

static void setup(fx *f, const char *graph)
{
    memset(f, 0, sizeof(*f));
    f->ctx = kiln_ctx_create();
    CU_ASSERT_PTR_NOT_NULL_FATAL(f->ctx);
    CU_ASSERT_EQUAL_FATAL(kiln_test_load_plugin(f->ctx, "libkiln_dynamic_shape.so", &f->err),
                          KILN_OK);
    f->g = kiln_graph_create(f->ctx, graph);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f->g);
}

static kiln_status run(fx *f, const char *pass)
{
    memset(&f->pi, 0, sizeof(f->pi));
    f->pi.comp = kiln_registry_find(f->ctx, KILN_COMP_PASS, pass);
    f->pi.enabled = true;
    CU_ASSERT_PTR_NOT_NULL_FATAL(f->pi.comp);
    kiln_error_clear(&f->err);
    if (f->pm)
        kiln__passmgr_destroy(f->pm);
    CU_ASSERT_EQUAL_FATAL(kiln__passmgr_create(f->ctx, NULL, &f->pm, &f->err), KILN_OK);
    kiln_status st = kiln__passmgr_run_stage(f->pm, "partition", &f->pi, 1, f->g, &f->err);
    if (st != KILN_OK)
        fprintf(stderr, "  (%s: %s)\n", pass, kiln_error_message(&f->err));
    else
        kiln_test_verify_ok(f->g);
    return st;
}

static void teardown(fx *f)
{
    if (f->pm)
        kiln__passmgr_destroy(f->pm);
    kiln_graph_destroy(f->g);
    kiln_ctx_destroy(f->ctx);
}

/* A node whose outputs are int32 ND with @p rank dims @p dims. */
static kiln_node_id node(kiln_graph *g, const char *name, const char *op, uint32_t nin,
                         uint32_t nout, int32_t rank, const int64_t *dims)
{
    kiln_node_id n = kiln_test_node(g, name, op, nin, nout);
    for (uint32_t o = 0; o < nout; o++) {
        kiln_tensor_desc *d = kiln_node_output_desc(g, n, o);
        kiln_desc_set_dtype(g, d, KILN_DT_INT32);
        kiln_desc_set_shape(g, d, rank, dims);
    }
    return n;
}

static void set_in_shape(kiln_graph *g, kiln_node_id n, uint32_t i, int32_t rank,
                         const int64_t *dims)
{
    kiln_desc_set_shape(g, kiln_node_input_desc_mut(g, n, i), rank, dims);
}

static bool battr(const kiln_attrs *a, const char *k)
{
    bool v = false;
    return kiln_attrs_get_bool(a, k, &v) && v;
}

static bool has_battr(const kiln_attrs *a, const char *k, bool want)
{
    bool v = !want;
    return kiln_attrs_get_bool(a, k, &v) && v == want;
}

static uint32_t nsubs(kiln_graph *g)
{
    return kiln_graph_all_subgraph_count(g);
}

/* The subgraph named @p name, or NULL. */
static kiln_graph *sub_named(kiln_graph *g, const char *name)
{
    for (uint32_t i = 0; i < nsubs(g); i++)
        if (strcmp(kiln_graph_name(kiln_graph_all_subgraph(g, i)), name) == 0)
            return kiln_graph_all_subgraph(g, i);
    return NULL;
}

/* The names of @p sg's nodes other than Data and NetOutput, in topological order, joined by ','. */
static const char *members(kiln_graph *sg, char *buf, size_t size)
{
    const kiln_node_id *ord;
    uint32_t n;
    kiln_error e;
    kiln_error_clear(&e);
    buf[0] = 0;
    if (!sg || kiln_graph_topo_order(sg, &ord, &n, &e) != KILN_OK)
        return buf;
    size_t k = 0;
    for (uint32_t i = 0; i < n; i++) {
        const char *op = kiln_node_op_str(sg, ord[i]);
        if (!strcmp(op, "Data") || !strcmp(op, "NetOutput"))
            continue;
        k += (size_t)snprintf(buf + k, size - k, "%s%s", k ? "," : "",
                              kiln_node_name_str(sg, ord[i]));
    }
    if (getenv("DS_TEST_SHOW"))
        fprintf(stderr, "  %s: %s\n", kiln_graph_name(sg), buf);
    return buf;
}

/* Like members(), in node id order: the order the partitioner moved them in (its cluster order). */
static const char *members_ids(kiln_graph *sg, char *buf, size_t size)
{
    size_t k = 0;
    buf[0] = 0;
    for (kiln_node_id n = sg ? kiln_graph_next_node(sg, 0) : 0; n; n = kiln_graph_next_node(sg, n)) {
        const char *op = kiln_node_op_str(sg, n);
        if (!strcmp(op, "Data") || !strcmp(op, "NetOutput"))
            continue;
        k += (size_t)snprintf(buf + k, size - k, "%s%s", k ? "," : "", kiln_node_name_str(sg, n));
    }
    if (getenv("DS_TEST_SHOW"))
        fprintf(stderr, "  %s: %s\n", sg ? kiln_graph_name(sg) : "?", buf);
    return buf;
}

static const int64_t d16[1] = {16}, dm1[1] = {-1};
static const int64_t dyn4[4] = {1, -1, 2, 2}, st4[4] = {1, 1, 2, 2};

/* The PT7 graph in @p f (mode: ge.topoSortingMode or NULL). */
static void pt7_graph(fx *f, const char *mode)
{
    setup(f, "g1");
    if (mode)
        kiln_ctx_set_option(f->ctx, "ge.topoSortingMode", mode);
    kiln_graph *g = f->g;
    kiln_node_id data0 = node(g, "data0", "Data", 0, 1, 4, dyn4);
    kiln_node_id data1 = node(g, "data1", "Data", 0, 1, 4, dyn4);
    kiln_attrs_set_int(kiln_node_attrs_mut(g, data0), "index", 0);
    kiln_attrs_set_int(kiln_node_attrs_mut(g, data1), "index", 1);
    const char *dyn_chain[2][4] = {{"cast1", "relu1", "relu2", "relu3"},
                                   {"cast2", "relu4", "relu5", "relu6"}};
    const char *st_chain[2][4] = {{"cast3", "relu7", "relu8", "relu9"},
                                  {"cast4", "relu10", "relu11", "relu12"}};
    kiln_node_id dend[2], send[2];
    kiln_node_id c2 = node(g, "const2", "Const", 0, 1, 4, st4);
    kiln_node_id c3 = node(g, "const3", "Const", 0, 1, 4, st4);
    for (int c = 0; c < 2; c++) {
        kiln_node_id prev = c ? data1 : data0;
        for (int i = 0; i < 4; i++) {
            kiln_node_id n = node(g, dyn_chain[c][i], i ? "Relu" : "Cast", 1, 1, 4, dyn4);
            kiln_test_edge(g, prev, 0, n, 0);
            prev = n;
        }
        dend[c] = prev;
        prev = c ? c3 : c2;
        for (int i = 0; i < 4; i++) {
            kiln_node_id n = node(g, st_chain[c][i], i ? "Relu" : "Cast", 1, 1, 4, st4);
            kiln_test_edge(g, prev, 0, n, 0);
            prev = n;
        }
        send[c] = prev;
    }
    kiln_node_id add1 = node(g, "add1", "Add", 2, 1, 4, dyn4);
    kiln_test_edge(g, dend[1], 0, add1, 0);
    kiln_test_edge(g, dend[0], 0, add1, 1);
    kiln_node_id add2 = node(g, "add2", "Add", 2, 1, 4, st4);
    kiln_test_edge(g, send[1], 0, add2, 0);
    kiln_test_edge(g, send[0], 0, add2, 1);
    kiln_node_id add3 = node(g, "add3", "Add", 2, 1, 4, dyn4);
    kiln_test_edge(g, add1, 0, add3, 0);
    kiln_test_edge(g, add2, 0, add3, 1);
    kiln_node_id var = node(g, "variable1", "Variable", 0, 1, 4, st4);
    kiln_node_id ref = node(g, "ref_data", "RefData", 1, 1, 4, st4);
    kiln_attrs_set_string(kiln_node_attrs_mut(g, ref), "ref_var_src_var_name", "variable1");
    kiln_test_edge(g, var, 0, ref, 0);
    kiln_node_id add4 = node(g, "add4", "Add", 2, 1, 4, dyn4);
    kiln_test_edge(g, ref, 0, add4, 0);
    kiln_test_edge(g, add3, 0, add4, 1);
    kiln_node_id out = node(g, "out", "NetOutput", 1, 0, 4, dyn4);
    kiln_test_edge(g, add4, 0, out, 0);
}

/* PT7 graph, kiln's default (normal) merge order. */
static void test_pt7_normal_merge(void)
{
    fx f;
    pt7_graph(&f, NULL);
    kiln_graph *g = f.g;
    CU_ASSERT_EQUAL_FATAL(run(&f, "DynamicShapePartitioner"), KILN_OK);
    char buf[1024];
    /* unknown: both dynamic chains, add1, add3, add4 and the small known
     * cluster {variable1, ref_data} (2 nodes < the lower limit 4) */
    CU_ASSERT_EQUAL(nsubs(g), 3);
    CU_ASSERT_STRING_EQUAL(members(sub_named(g, "g1_sub_0_input"), buf, sizeof(buf)),
                           "const2,const3");
    CU_ASSERT_STRING_EQUAL(members(sub_named(g, "g1_sub_1_know"), buf, sizeof(buf)),
                           "cast3,cast4,relu7,relu10,relu8,relu11,relu9,relu12,add2");
    CU_ASSERT_STRING_EQUAL(members(sub_named(g, "g1_sub_2_unknow"), buf, sizeof(buf)),
                           "variable1,cast1,cast2,ref_data,relu1,relu4,relu2,relu5,relu3,relu6,"
                           "add1,add3,add4");
    /* root: 2 Data, 3 calls, NetOutput */
    CU_ASSERT_EQUAL(kiln_graph_node_count(g), 6);
    kiln_node_id cu = kiln_graph_find_node(g, "g1_sub_2_unknow_PartitionedCall_2");
    kiln_node_id ck = kiln_graph_find_node(g, "g1_sub_1_know_PartitionedCall_1");
    CU_ASSERT_FATAL(cu && ck);
    CU_ASSERT(has_battr(kiln_node_attrs(g, cu), "_is_unknown_shape", true));
    CU_ASSERT(has_battr(kiln_node_attrs(g, ck), "_is_unknown_shape", false));
    CU_ASSERT(has_battr(kiln_node_attrs(g, ck), "OwnerGraphIsUnknown", false));
    kiln_graph *su = sub_named(g, "g1_sub_2_unknow");
    CU_ASSERT(battr(kiln_graph_attrs(su), "_memory_discontiguous_allocation"));
    CU_ASSERT(battr(kiln_graph_attrs(su), "_graph_unknown_flag"));
    CU_ASSERT(!kiln_attrs_has(kiln_graph_attrs(sub_named(g, "g1_sub_1_know")),
                              "_memory_discontiguous_allocation"));
    CU_ASSERT(battr(kiln_node_attrs(su, kiln_graph_find_node(su, "add4")), "OwnerGraphIsUnknown"));
    CU_ASSERT(battr(kiln_graph_attrs(g), "_dynamic_shape_partitioned"));
    CU_ASSERT(battr(kiln_node_attrs(g, kiln_graph_find_node(g, "data0")), "OwnerGraphIsUnknown"));
    CU_ASSERT(battr(kiln_node_attrs(g, kiln_graph_find_node(g, "out")), "OwnerGraphIsUnknown"));
    /* a second run leaves a partitioned graph alone */
    CU_ASSERT_EQUAL_FATAL(run(&f, "DynamicShapePartitioner"), KILN_OK);
    CU_ASSERT_EQUAL(nsubs(g), 3);
    CU_ASSERT_EQUAL(kiln_graph_node_count(g), 6);
    /* the known call feeds add3 inside the unknown one: Data i <-> call input i */
    kiln_node_id d0 = kiln_graph_find_node(su, "g1_sub_2_unknow_Data_0");
    int64_t pi = -1;
    CU_ASSERT_FATAL(d0 != 0);
    CU_ASSERT(kiln_attrs_get_int(kiln_node_attrs(su, d0), "_parent_node_index", &pi) && pi == 0);
    teardown(&f);
}

/* PT7: ge.topoSortingMode = 3, GE's expected four subgraphs. */
static void test_pt7_stable_rdfs(void)
{
    fx f;
    pt7_graph(&f, "3");
    kiln_graph *g = f.g;
    CU_ASSERT_EQUAL_FATAL(run(&f, "DynamicShapePartitioner"), KILN_OK);
    char buf[1024];
    CU_ASSERT_EQUAL(nsubs(g), 4);
    CU_ASSERT_STRING_EQUAL(members_ids(sub_named(g, "g1_sub_0_unknow"), buf, sizeof(buf)),
                           "cast1,relu1,relu2,relu3,cast2,relu4,relu5,relu6,add1");
    CU_ASSERT_STRING_EQUAL(members_ids(sub_named(g, "g1_sub_1_input"), buf, sizeof(buf)),
                           "const2,const3");
    CU_ASSERT_STRING_EQUAL(members_ids(sub_named(g, "g1_sub_2_know"), buf, sizeof(buf)),
                           "cast3,relu7,relu8,relu9,cast4,relu10,relu11,relu12,add2");
    CU_ASSERT_STRING_EQUAL(members_ids(sub_named(g, "g1_sub_3_unknow"), buf, sizeof(buf)),
                           "add3,variable1,ref_data,add4");
    teardown(&f);
}

/* PT8 (mode 3) and PT9: three Data -> Cast -> Relu chains into AddN. */
static void addn_graph(fx *f, const char *const *order, const bool *dyn)
{
    setup(f, "g1");
    kiln_ctx_set_option(f->ctx, "ge.topoSortingMode", "3");
    kiln_graph *g = f->g;
    /* nodes are created in @p order (the order a previous sort left them in) */
    kiln_node_id id[10];
    static const char *const names[10] = {"data0", "data1", "data2", "cast1", "cast2", "cast3",
                                          "relu1", "relu2", "relu3", "addn"};
    for (int k = 0; k < 10; k++) {
        int j = 0;
        while (strcmp(names[j], order[k]))
            j++;
        const char *op = j < 3 ? "Data" : j < 6 ? "Cast" : j < 9 ? "Relu" : "AddN";
        id[j] = node(g, names[j], op, j < 3 ? 0 : j < 9 ? 1 : 3, 1, 4, dyn[j] ? dyn4 : st4);
        if (j < 3)
            kiln_attrs_set_int(kiln_node_attrs_mut(g, id[j]), "index", j);
    }
    for (int i = 0; i < 3; i++) {
        kiln_test_edge(g, id[i], 0, id[3 + i], 0);
        kiln_test_edge(g, id[3 + i], 0, id[6 + i], 0);
        kiln_test_edge(g, id[6 + i], 0, id[9], (uint32_t)i);
    }
    /* a static node's input descriptors are static too (GE's op desc) */
    for (int j = 3; j < 10; j++)
        if (!dyn[j])
            for (uint32_t i = 0; i < kiln_node_input_count(g, id[j]); i++)
                set_in_shape(g, id[j], i, 4, st4);
    kiln_node_id out = node(g, "out", "NetOutput", 1, 0, 4, dyn4);
    kiln_test_edge(g, id[9], 0, out, 0);
}

static void test_pt8_stable_rdfs(void)
{
    static const char *const order[10] = {"data0", "data1", "data2", "cast1", "cast2", "cast3",
                                          "relu1", "relu2", "relu3", "addn"};
    static const bool dyn[10] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    fx f;
    addn_graph(&f, order, dyn);
    CU_ASSERT_EQUAL_FATAL(run(&f, "DynamicShapePartitioner"), KILN_OK);
    char buf[256];
    CU_ASSERT_EQUAL(nsubs(f.g), 1);
    CU_ASSERT_STRING_EQUAL(members_ids(sub_named(f.g, "g1_sub_0_unknow"), buf, sizeof(buf)),
                           "cast1,relu1,cast2,relu2,cast3,relu3,addn");
    teardown(&f);
}

/* PT9: the nodes in the order GE's mode-2 sort leaves them; static cast1, cast2, relu2, addn. */
static void test_pt9_stable_rdfs_center_static(void)
{
    static const char *const order[10] = {"data0", "cast1", "relu1", "data2", "cast3", "relu3",
                                          "data1", "cast2", "relu2", "addn"};
    static const bool dyn[10] = {1, 1, 1, 0, 0, 1, 1, 0, 1, 0};
    fx f;
    addn_graph(&f, order, dyn);
    CU_ASSERT_EQUAL_FATAL(run(&f, "DynamicShapePartitioner"), KILN_OK);
    char buf[256];
    CU_ASSERT_EQUAL(nsubs(f.g), 1);
    CU_ASSERT_STRING_EQUAL(members_ids(sub_named(f.g, "g1_sub_0_unknow"), buf, sizeof(buf)),
                           "cast1,relu1,cast3,relu3,cast2,relu2,addn");
    teardown(&f);
}

/* PT8 (normal order): everything dynamic -> one unknown subgraph with every compute node. */
static void test_pt8_all_unknown_one_subgraph(void)
{
    fx f;
    setup(&f, "g1");
    kiln_graph *g = f.g;
    kiln_node_id addn = node(g, "addn", "AddN", 3, 1, 4, dyn4);
    for (int i = 0; i < 3; i++) {
        char nm[16];
        snprintf(nm, sizeof(nm), "data%d", i);
        kiln_node_id d = node(g, nm, "Data", 0, 1, 4, dyn4);
        kiln_attrs_set_int(kiln_node_attrs_mut(g, d), "index", i);
        snprintf(nm, sizeof(nm), "cast%d", i + 1);
        kiln_node_id c = node(g, nm, "Cast", 1, 1, 4, dyn4);
        snprintf(nm, sizeof(nm), "relu%d", i + 1);
        kiln_node_id r = node(g, nm, "Relu", 1, 1, 4, dyn4);
        kiln_test_edge(g, d, 0, c, 0);
        kiln_test_edge(g, c, 0, r, 0);
        kiln_test_edge(g, r, 0, addn, (uint32_t)i);
    }
    kiln_node_id out = node(g, "out", "NetOutput", 1, 0, 4, dyn4);
    kiln_test_edge(g, addn, 0, out, 0);
    CU_ASSERT_EQUAL_FATAL(run(&f, "DynamicShapePartitioner"), KILN_OK);
    char buf[512];
    CU_ASSERT_EQUAL(nsubs(g), 1);
    CU_ASSERT_STRING_EQUAL(members(sub_named(g, "g1_sub_0_unknow"), buf, sizeof(buf)),
                           "cast1,cast2,cast3,relu1,relu2,relu3,addn");
    kiln_graph *s = sub_named(g, "g1_sub_0_unknow");
    CU_ASSERT_PTR_NOT_NULL(s);
    /* 3 inputs, one Data each, numbered by first use */
    CU_ASSERT_EQUAL(kiln_node_input_count(g, kiln_graph_find_node(g, "g1_sub_0_unknow_PartitionedCall_0")), 3);
    CU_ASSERT(kiln_graph_find_node(s, "g1_sub_0_unknow_Data_2") != 0);
    CU_ASSERT(kiln_graph_find_node(s, "g1_sub_0_unknow_NetOutput") != 0);
    teardown(&f);
}

/* PT11: small known clusters around unknown nodes are merged into one unknown cluster. */
static void test_pt11_merge_small_known_to_unknown(void)
{
    fx f;
    setup(&f, "g1");
    kiln_graph *g = f.g;
    static const int64_t st[4] = {1, 1, 224, 224}, dy[4] = {-1, -1, 224, 224};
    kiln_node_id s1 = node(g, "static_1", "Relu", 1, 1, 4, st);
    kiln_node_id d1 = node(g, "dyn_1", "Pack", 1, 1, 4, dy);
    kiln_node_id d2 = node(g, "dyn_2", "Add", 2, 1, 4, st);
    kiln_node_id s2 = node(g, "static_2", "Relu", 1, 1, 4, st);
    kiln_test_edge(g, s1, 0, d1, 0);
    kiln_test_edge(g, d1, 0, d2, 0);
    kiln_test_edge(g, d1, 0, d2, 1);
    kiln_test_edge(g, d2, 0, s2, 0);
    set_in_shape(g, d2, 0, 4, st);
    set_in_shape(g, d2, 1, 4, dy);
    set_in_shape(g, s1, 0, 4, st);
    set_in_shape(g, s2, 0, 4, st);
    CU_ASSERT_EQUAL_FATAL(run(&f, "DynamicShapePartitioner"), KILN_OK);
    CU_ASSERT_EQUAL(nsubs(g), 1);
    CU_ASSERT_EQUAL(kiln_graph_node_count(g), 1);
    kiln_node_id only = kiln_graph_next_node(g, 0);
    CU_ASSERT(battr(kiln_node_attrs(g, only), "_is_unknown_shape"));
    teardown(&f);
}

/* PT12: only Data and NetOutput, one unknown shape: the whole graph is unknown. */
static void test_pt12_only_data_netoutput(void)
{
    fx f;
    setup(&f, "g1");
    kiln_graph *g = f.g;
    kiln_node_id a = node(g, "data1", "Data", 0, 1, 1, dm1);
    kiln_node_id b = node(g, "data2", "Data", 0, 1, 1, d16);
    kiln_attrs_set_int(kiln_node_attrs_mut(g, a), "index", 0);
    kiln_attrs_set_int(kiln_node_attrs_mut(g, b), "index", 1);
    kiln_node_id out = node(g, "net_output", "NetOutput", 2, 0, 1, d16);
    kiln_test_edge(g, a, 0, out, 0);
    kiln_test_edge(g, b, 0, out, 1);
    set_in_shape(g, out, 0, 1, dm1);
    CU_ASSERT_EQUAL_FATAL(run(&f, "DynamicShapePartitioner"), KILN_OK);
    CU_ASSERT_EQUAL(nsubs(g), 0);
    CU_ASSERT_EQUAL(kiln_graph_node_count(g), 3);
    CU_ASSERT(battr(kiln_node_attrs(g, a), "OwnerGraphIsUnknown"));
    CU_ASSERT(battr(kiln_graph_attrs(g), "_graph_unknown_flag"));
    teardown(&f);
}

static void neg_graph(fx *f, const char *limit)
{
    setup(f, "g1");
    kiln_graph *g = f->g;
    if (limit)
        kiln_ctx_set_option(f->ctx, "ge.exec.static_model_ops_lower_limit", limit);
    kiln_node_id a = node(g, "data1", "Data", 0, 1, 1, dm1);
    kiln_attrs_set_int(kiln_node_attrs_mut(g, a), "index", 0);
    kiln_node_id neg = node(g, "neg", "Neg", 1, 1, 1, dm1);
    kiln_attrs_set_string(kiln_node_attrs_mut(g, neg), "_stream_label", "aaa");
    kiln_node_id out = node(g, "net_output", "NetOutput", 1, 0, 1, d16);
    kiln_test_edge(g, a, 0, neg, 0);
    kiln_test_edge(g, neg, 0, out, 0);
    set_in_shape(g, out, 0, 1, d16);
}

/* PT13: ge.exec.static_model_ops_lower_limit = -1: whole graph unknown, no partition. */
static void test_pt13_lower_limit_minus_one(void)
{
    fx f;
    neg_graph(&f, "-1");
    CU_ASSERT_EQUAL_FATAL(run(&f, "DynamicShapePartitioner"), KILN_OK);
    CU_ASSERT_EQUAL(nsubs(f.g), 0);
    CU_ASSERT_EQUAL(kiln_graph_node_count(f.g), 3);
    CU_ASSERT(battr(kiln_node_attrs(f.g, kiln_graph_find_node(f.g, "neg")), "OwnerGraphIsUnknown"));
    CU_ASSERT(battr(kiln_graph_attrs(f.g), "_graph_unknown_flag"));
    teardown(&f);
}

/* PT15 and other bad values: the error names the option and the value. */
static void test_pt15_bad_lower_limit(void)
{
    static const char *const bad[] = {"", "abc", "-2", "4x", "99999999999999999999"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        fx f;
        neg_graph(&f, bad[i]);
        CU_ASSERT_NOT_EQUAL(run(&f, "DynamicShapePartitioner"), KILN_OK);
        const char *m = kiln_error_message(&f.err);
        char want[128];
        snprintf(want, sizeof(want), "'%s'", bad[i]);
        CU_ASSERT_PTR_NOT_NULL(strstr(m, "ge.exec.static_model_ops_lower_limit"));
        CU_ASSERT_PTR_NOT_NULL(strstr(m, want));
        CU_ASSERT_EQUAL(nsubs(f.g), 0); /* nothing changed */
        teardown(&f);
    }
    fx f;
    neg_graph(&f, NULL);
    kiln_ctx_set_option(f.ctx, "ge.exec.hostSchedulingMaxThreshold", "-5");
    CU_ASSERT_NOT_EQUAL(run(&f, "DynamicShapePartitioner"), KILN_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(kiln_error_message(&f.err), "ge.exec.hostSchedulingMaxThreshold"));
    teardown(&f);
}

/* PT16: _is_support_addr_refresh = false makes the node unknown and forced. */
static void test_pt16_support_addr_refresh(void)
{
    fx f;
    setup(&f, "g1");
    kiln_graph *g = f.g;
    static const int64_t d10[2] = {10, 10};
    kiln_node_id a = node(g, "data1", "Data", 0, 1, 2, d10);
    kiln_attrs_set_int(kiln_node_attrs_mut(g, a), "index", 0);
    kiln_node_id neg = node(g, "neg", "Neg", 1, 1, 2, d10);
    kiln_attrs_set_bool(kiln_node_attrs_mut(g, neg), "_is_support_addr_refresh", false);
    kiln_attrs_set_string(kiln_node_attrs_mut(g, neg), "_stream_label", "aaa");
    kiln_node_id neg1 = node(g, "neg1", "Neg", 1, 1, 2, d10);
    kiln_attrs_set_string(kiln_node_attrs_mut(g, neg1), "_stream_label", "aaa");
    kiln_node_id out = node(g, "net_output", "NetOutput", 1, 0, 2, d10);
    kiln_test_edge(g, a, 0, neg, 0);
    kiln_test_edge(g, neg, 0, neg1, 0);
    kiln_test_edge(g, neg1, 0, out, 0);
    CU_ASSERT_EQUAL_FATAL(run(&f, "DynamicShapePartitioner"), KILN_OK);
    CU_ASSERT_EQUAL(nsubs(g), 1);
    CU_ASSERT_EQUAL(kiln_graph_node_count(g), 3);
    kiln_graph *s = kiln_graph_all_subgraph(g, 0);
    CU_ASSERT(battr(kiln_node_attrs(s, kiln_graph_find_node(s, "neg")), "_force_unknown_shape"));
    CU_ASSERT(kiln_graph_topo_index(g, kiln_graph_find_node(g, "g1_sub_0_unknow_PartitionedCall_0")) == 1);
    CU_ASSERT(battr(kiln_node_attrs(g, kiln_graph_find_node(g, "g1_sub_0_unknow_PartitionedCall_0")),
                    "_is_unknown_shape"));
    teardown(&f);
}

/* PT17: all known; the host-scheduling threshold decides the graph's unknown flag. */
static void test_pt17_host_scheduling(void)
{
    static const char *const th[] = {"15", "0"};
    for (int i = 0; i < 2; i++) {
        fx f;
        setup(&f, "g1");
        kiln_graph *g = f.g;
        kiln_ctx_set_option(f.ctx, "ge.exec.hostSchedulingMaxThreshold", th[i]);
        static const int64_t st[4] = {1, 1, 224, 224};
        kiln_node_id c = node(g, "node1", "Const", 0, 1, 4, st);
        kiln_node_id a = node(g, "add_n_node", "AddN", 1, 1, 4, st);
        kiln_node_id r = node(g, "node2", "Relu", 1, 1, 4, st);
        kiln_test_edge(g, c, 0, a, 0);
        kiln_test_edge(g, a, 0, r, 0);
        CU_ASSERT_EQUAL_FATAL(run(&f, "DynamicShapePartitioner"), KILN_OK);
        CU_ASSERT_EQUAL(nsubs(g), 0);
        CU_ASSERT(has_battr(kiln_graph_attrs(g), "_graph_unknown_flag", i == 0));
        CU_ASSERT(has_battr(kiln_graph_attrs(g), "_dynamic_shape_partitioned", false));
        teardown(&f);
    }
}

/* Two known clusters joined directly and through an unknown node: merging them
 * would make a ring, so they stay apart (GE BaseCluster::TryMerge). */
static void test_ring_is_not_merged(void)
{
    fx f;
    setup(&f, "g");
    kiln_graph *g = f.g;
    kiln_node_id x = node(g, "x", "Data", 0, 1, 1, d16);
    kiln_attrs_set_int(kiln_node_attrs_mut(g, x), "index", 0);
    kiln_node_id prev = x, a_end, u;
    char nm[8];
    for (int i = 0; i < 4; i++) {
        snprintf(nm, sizeof(nm), "a%d", i);
        kiln_node_id n = node(g, nm, "Relu", 1, 1, 1, d16);
        kiln_test_edge(g, prev, 0, n, 0);
        prev = n;
    }
    a_end = prev;
    u = node(g, "u", "Relu", 1, 1, 1, dm1);
    kiln_test_edge(g, a_end, 0, u, 0);
    kiln_node_id b0 = node(g, "b0", "Add", 2, 1, 1, d16);
    kiln_test_edge(g, u, 0, b0, 0);
    kiln_test_edge(g, a_end, 0, b0, 1);
    set_in_shape(g, b0, 0, 1, d16);
    prev = b0;
    for (int i = 1; i < 4; i++) {
        snprintf(nm, sizeof(nm), "b%d", i);
        kiln_node_id n = node(g, nm, "Relu", 1, 1, 1, d16);
        kiln_test_edge(g, prev, 0, n, 0);
        prev = n;
    }
    kiln_node_id out = node(g, "out", "NetOutput", 1, 0, 1, d16);
    kiln_test_edge(g, prev, 0, out, 0);
    CU_ASSERT_EQUAL_FATAL(run(&f, "DynamicShapePartitioner"), KILN_OK);
    char buf[256];
    CU_ASSERT_EQUAL(nsubs(g), 3);
    CU_ASSERT_STRING_EQUAL(members(sub_named(g, "g_sub_0_know"), buf, sizeof(buf)), "a0,a1,a2,a3");
    CU_ASSERT_STRING_EQUAL(members(sub_named(g, "g_sub_1_unknow"), buf, sizeof(buf)), "u");
    CU_ASSERT_STRING_EQUAL(members(sub_named(g, "g_sub_2_know"), buf, sizeof(buf)), "b0,b1,b2,b3");
    teardown(&f);
}

/* Control edges crossing a cluster boundary move to the PartitionedCall. */
static void test_control_edges_move_to_call(void)
{
    fx f;
    setup(&f, "g");
    kiln_graph *g = f.g;
    kiln_node_id x = node(g, "x", "Data", 0, 1, 1, d16);
    kiln_attrs_set_int(kiln_node_attrs_mut(g, x), "index", 0);
    kiln_node_id u = node(g, "u", "Relu", 1, 1, 1, dm1);
    kiln_node_id k = node(g, "k", "Relu", 1, 1, 1, d16);
    kiln_node_id out = node(g, "out", "NetOutput", 2, 0, 1, d16);
    kiln_test_edge(g, x, 0, u, 0);
    kiln_test_edge(g, x, 0, k, 0);
    kiln_test_edge(g, u, 0, out, 0);
    kiln_test_edge(g, k, 0, out, 1);
    kiln_ctrl_add(g, k, u);
    kiln_ctrl_add(g, x, k);
    kiln_ctrl_add(g, k, out);
    kiln_ctx_set_option(f.ctx, "ge.exec.static_model_ops_lower_limit", "1");
    CU_ASSERT_EQUAL_FATAL(run(&f, "DynamicShapePartitioner"), KILN_OK);
    kiln_node_id ck = kiln_graph_find_node(g, "g_sub_0_know_PartitionedCall_0");
    kiln_node_id cu = kiln_graph_find_node(g, "g_sub_1_unknow_PartitionedCall_1");
    CU_ASSERT_FATAL(ck && cu);
    CU_ASSERT(kiln_ctrl_exists(g, ck, cu));
    CU_ASSERT(kiln_ctrl_exists(g, x, ck));
    CU_ASSERT(kiln_ctrl_exists(g, ck, out));
    teardown(&f);
}

/* Stack ops sharing _data_flow_handle in known and unknown clusters are all forced unknown. */
static void test_data_flow_handle(void)
{
    fx f;
    setup(&f, "g");
    kiln_graph *g = f.g;
    kiln_node_id x = node(g, "x", "Data", 0, 1, 1, d16);
    kiln_attrs_set_int(kiln_node_attrs_mut(g, x), "index", 0);
    kiln_node_id st = node(g, "stack", "Stack", 1, 1, 1, d16);
    kiln_attrs_set_int(kiln_node_attrs_mut(g, st), "_data_flow_handle", 7);
    kiln_test_edge(g, x, 0, st, 0);
    kiln_node_id prev = st;
    char nm[8];
    for (int i = 0; i < 4; i++) {
        snprintf(nm, sizeof(nm), "k%d", i);
        kiln_node_id n = node(g, nm, "Relu", 1, 1, 1, d16);
        kiln_test_edge(g, prev, 0, n, 0);
        prev = n;
    }
    kiln_node_id push = node(g, "push", "StackPush", 1, 1, 1, d16);
    kiln_attrs_set_int(kiln_node_attrs_mut(g, push), "_data_flow_handle", 7);
    kiln_attrs_set_bool(kiln_node_attrs_mut(g, push), "_force_unknown_shape", true);
    kiln_test_edge(g, prev, 0, push, 0);
    kiln_node_id out = node(g, "out", "NetOutput", 1, 0, 1, d16);
    kiln_test_edge(g, push, 0, out, 0);
    CU_ASSERT_EQUAL_FATAL(run(&f, "DynamicShapePartitioner"), KILN_OK);
    char buf[128];
    CU_ASSERT_EQUAL(nsubs(g), 3);
    CU_ASSERT_STRING_EQUAL(members(sub_named(g, "g_sub_0_unknow"), buf, sizeof(buf)), "stack");
    CU_ASSERT_STRING_EQUAL(members(sub_named(g, "g_sub_1_know"), buf, sizeof(buf)), "k0,k1,k2,k3");
    CU_ASSERT_STRING_EQUAL(members(sub_named(g, "g_sub_2_unknow"), buf, sizeof(buf)), "push");
    kiln_graph *s0 = sub_named(g, "g_sub_0_unknow");
    CU_ASSERT(s0 && battr(kiln_node_attrs(s0, kiln_graph_find_node(s0, "stack")),
                          "_force_unknown_shape"));
    teardown(&f);
}

/* Nodes sharing _control_flow_group merge with everything between them. */
static void test_control_flow_group(void)
{
    fx f;
    setup(&f, "g");
    kiln_graph *g = f.g;
    kiln_node_id x = node(g, "x", "Data", 0, 1, 1, d16);
    kiln_attrs_set_int(kiln_node_attrs_mut(g, x), "index", 0);
    kiln_node_id a = node(g, "a", "Relu", 1, 1, 1, dm1);
    kiln_node_id b = node(g, "b", "Relu", 1, 1, 1, d16);
    kiln_node_id c = node(g, "c", "Relu", 1, 1, 1, d16);
    kiln_node_id e = node(g, "e", "Relu", 1, 1, 1, d16);
    set_in_shape(g, b, 0, 1, d16);
    kiln_attrs_set_int(kiln_node_attrs_mut(g, a), "_control_flow_group", 3);
    kiln_attrs_set_int(kiln_node_attrs_mut(g, c), "_control_flow_group", 3);
    kiln_node_id out = node(g, "out", "NetOutput", 2, 0, 1, d16);
    kiln_test_edge(g, x, 0, a, 0);
    kiln_test_edge(g, a, 0, b, 0);
    kiln_test_edge(g, b, 0, c, 0);
    kiln_test_edge(g, x, 0, e, 0);
    kiln_test_edge(g, c, 0, out, 0);
    kiln_test_edge(g, e, 0, out, 1);
    CU_ASSERT_EQUAL_FATAL(run(&f, "DynamicShapePartitioner"), KILN_OK);
    char buf[128];
    /* {a, b, c} is one unknown cluster; e (1 node < 4) becomes unknown but has no unknown input */
    CU_ASSERT_EQUAL(nsubs(g), 2);
    CU_ASSERT_STRING_EQUAL(members(sub_named(g, "g_sub_0_unknow"), buf, sizeof(buf)), "e");
    CU_ASSERT_STRING_EQUAL(members(sub_named(g, "g_sub_1_unknow"), buf, sizeof(buf)), "a,b,c");
    teardown(&f);
}

/* PT19: three stages; each PartitionedCall is forced unknown and holds one Foo. */
static void test_pt19_three_stages(void)
{
    fx f;
    setup(&f, "g");
    kiln_graph *g = f.g;
    kiln_node_id data = node(g, "data", "Data", 0, 1, 1, d16);
    kiln_attrs_set_int(kiln_node_attrs_mut(g, data), "index", 0);
    kiln_node_id n1 = node(g, "node1", "Foo", 1, 1, 1, d16);
    kiln_node_id n2 = node(g, "node2", "Foo", 1, 1, 1, d16);
    kiln_node_id n3 = node(g, "node3", "Foo", 1, 1, 1, d16);
    kiln_node_id out = node(g, "output", "NetOutput", 1, 0, 1, d16);
    kiln_attrs_set_int(kiln_node_attrs_mut(g, n1), "_stage_level", 0);
    kiln_attrs_set_int(kiln_node_attrs_mut(g, n2), "_stage_level", 1);
    kiln_test_edge(g, data, 0, n1, 0);
    kiln_test_edge(g, n1, 0, n2, 0);
    kiln_test_edge(g, n2, 0, n3, 0);
    kiln_test_edge(g, n3, 0, out, 0);
    CU_ASSERT_EQUAL_FATAL(run(&f, "StagePartitioner"), KILN_OK);
    CU_ASSERT_EQUAL(kiln_graph_node_count(g), 5);
    CU_ASSERT_EQUAL(nsubs(g), 3);
    char buf[64];
    const char *want[3] = {"node1", "node2", "node3"};
    for (int lv = 0; lv < 3; lv++) {
        char nm[32];
        snprintf(nm, sizeof(nm), "Subgraph_Level_%d", lv);
        kiln_node_id c = kiln_graph_find_node(g, nm);
        CU_ASSERT_FATAL(c != 0);
        CU_ASSERT_STRING_EQUAL(kiln_node_op_str(g, c), "PartitionedCall");
        CU_ASSERT(battr(kiln_node_attrs(g, c), "_force_unknown_shape"));
        int64_t v = -1;
        CU_ASSERT(kiln_attrs_get_int(kiln_node_attrs(g, c), "_stage_level", &v) && v == lv);
        CU_ASSERT_EQUAL(kiln_node_subgraph_count(g, c), 1);
        CU_ASSERT_STRING_EQUAL(members(kiln_node_subgraph(g, c, 0, NULL), buf, sizeof(buf)),
                               want[lv]);
    }
    /* a second run changes nothing */
    CU_ASSERT_EQUAL_FATAL(run(&f, "StagePartitioner"), KILN_OK);
    CU_ASSERT_EQUAL(kiln_graph_node_count(g), 5);
    CU_ASSERT_EQUAL(nsubs(g), 3);
    /* the DynamicShapePartitioner leaves STAGE clusters alone */
    CU_ASSERT_EQUAL_FATAL(run(&f, "DynamicShapePartitioner"), KILN_OK);
    CU_ASSERT_EQUAL(kiln_graph_node_count(g), 5);
    teardown(&f);
}

/* After the StagePartitioner, the DynamicShapePartitioner partitions each stage
 * subgraph on its own (GE's independent compile graphs). */
static void test_stage_subgraphs_partitioned(void)
{
    fx f;
    setup(&f, "g");
    kiln_graph *g = f.g;
    kiln_node_id data = node(g, "data", "Data", 0, 1, 1, d16);
    kiln_attrs_set_int(kiln_node_attrs_mut(g, data), "index", 0);
    kiln_node_id a = node(g, "a", "Foo", 1, 1, 1, d16);
    kiln_attrs_set_int(kiln_node_attrs_mut(g, a), "_stage_level", 0);
    kiln_node_id u = node(g, "u", "Foo", 1, 1, 1, dm1);
    kiln_test_edge(g, data, 0, a, 0);
    kiln_test_edge(g, a, 0, u, 0);
    kiln_node_id prev = u;
    char nm[8];
    for (int i = 0; i < 4; i++) {
        snprintf(nm, sizeof(nm), "b%d", i);
        kiln_node_id n = node(g, nm, "Foo", 1, 1, 1, d16);
        if (i == 0)
            set_in_shape(g, n, 0, 1, d16);
        kiln_test_edge(g, prev, 0, n, 0);
        prev = n;
    }
    kiln_attrs_set_int(kiln_node_attrs_mut(g, prev), "_stage_level", 1);
    kiln_node_id out = node(g, "out", "NetOutput", 1, 0, 1, d16);
    kiln_test_edge(g, prev, 0, out, 0);
    CU_ASSERT_EQUAL_FATAL(run(&f, "StagePartitioner"), KILN_OK);
    CU_ASSERT_EQUAL_FATAL(run(&f, "DynamicShapePartitioner"), KILN_OK);
    char buf[128];
    CU_ASSERT_EQUAL(kiln_graph_node_count(g), 4); /* data, 2 stage calls, out */
    CU_ASSERT_STRING_EQUAL(members(sub_named(g, "Subgraph_Level_0"), buf, sizeof(buf)), "a");
    CU_ASSERT_STRING_EQUAL(members(sub_named(g, "Subgraph_Level_1_sub_0_unknow"), buf, sizeof(buf)),
                           "u");
    CU_ASSERT_STRING_EQUAL(members(sub_named(g, "Subgraph_Level_1_sub_1_know"), buf, sizeof(buf)),
                           "b0,b1,b2,b3");
    kiln_graph *s1 = sub_named(g, "Subgraph_Level_1");
    CU_ASSERT(s1 && battr(kiln_graph_attrs(s1), "_dynamic_shape_partitioned"));
    CU_ASSERT(!kiln_attrs_has(kiln_graph_attrs(g), "_dynamic_shape_partitioned"));
    teardown(&f);
}

/* A level grows backwards over unlevelled inputs; a second run finds calls only. */
static void test_stage_grows_backwards(void)
{
    fx f;
    setup(&f, "g");
    kiln_graph *g = f.g;
    kiln_node_id data = node(g, "data", "Data", 0, 1, 1, d16);
    kiln_attrs_set_int(kiln_node_attrs_mut(g, data), "index", 0);
    kiln_node_id p = node(g, "pre", "Foo", 1, 1, 1, d16);
    kiln_node_id n1 = node(g, "node1", "Foo", 1, 1, 1, d16);
    kiln_node_id out = node(g, "output", "NetOutput", 1, 0, 1, d16);
    kiln_attrs_set_int(kiln_node_attrs_mut(g, n1), "_stage_level", 0);
    kiln_test_edge(g, data, 0, p, 0);
    kiln_test_edge(g, p, 0, n1, 0);
    kiln_test_edge(g, n1, 0, out, 0);
    CU_ASSERT_EQUAL_FATAL(run(&f, "StagePartitioner"), KILN_OK);
    char buf[64];
    CU_ASSERT_EQUAL(nsubs(g), 1);
    CU_ASSERT_STRING_EQUAL(members(sub_named(g, "Subgraph_Level_0"), buf, sizeof(buf)),
                           "pre,node1");
    int64_t v = -1;
    CU_ASSERT(kiln_attrs_get_int(kiln_node_attrs(g, data), "_stage_level", &v) && v == 0);
    teardown(&f);
}

int main(void)
{
    static const kiln_test_case cases[] = {
        {"PT7 graph, normal merge order", test_pt7_normal_merge},
        {"PT7 stable RDFS (mode 3)", test_pt7_stable_rdfs},
        {"PT8 all unknown, one subgraph", test_pt8_all_unknown_one_subgraph},
        {"PT8 stable RDFS (mode 3)", test_pt8_stable_rdfs},
        {"PT9 stable RDFS, static centre", test_pt9_stable_rdfs_center_static},
        {"PT11 small known merged into unknown", test_pt11_merge_small_known_to_unknown},
        {"PT12 only Data and NetOutput", test_pt12_only_data_netoutput},
        {"PT13 lower limit -1", test_pt13_lower_limit_minus_one},
        {"PT15 bad option values", test_pt15_bad_lower_limit},
        {"PT16 support addr refresh", test_pt16_support_addr_refresh},
        {"PT17 host scheduling threshold", test_pt17_host_scheduling},
        {"ring is not merged", test_ring_is_not_merged},
        {"control edges move to the call", test_control_edges_move_to_call},
        {"data-flow handles", test_data_flow_handle},
        {"control-flow group", test_control_flow_group},
        {"PT19 three stages", test_pt19_three_stages},
        {"stage grows backwards", test_stage_grows_backwards},
        {"stage subgraphs partitioned", test_stage_subgraphs_partitioned},
        {NULL, NULL},
    };
    return kiln_test_run("dynamic_shape", cases);
}

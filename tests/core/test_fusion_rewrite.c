/*
 * test_fusion_rewrite.c - GE GraphFuseInspectorUtils (CanFuse, ReportFuse)
 * and SubgraphRewriter::Replace: GE_SEMANTICS §9.9 M11 and M13 (ports of
 * graph_fuse_inspector_utils_unittest.cc), stream-label / engine refusals,
 * replacement on the root and in a While body, pass-through outputs, control
 * edges, arity errors, atomicity (refusals and injected out-of-memory leave
 * the graph's JSON byte-identical), names, and the incremental cycle
 * detector against a brute-force search on random DAGs.
 */
#include "kiln_test.h"
#include "analysis_cycle.h"
#include "fusion_int.h"
#include "graph_dot.h"
#include "graph_json.h"
#include "passctx.h"
#include "stage.h"
#include <jansson.h>
#include <stdio.h>
#include <string.h>

/* ---- fixture: a pass context whose current pass is a fusion pass --------- */

static kiln_component comp_a, comp_b;
static kiln_error perr;
static kiln_pass_ctx pc;

static kiln_pass_ctx *pass_ctx(const kiln_component *comp)
{
    kiln__passctx_fini(&pc);
    kiln_error_clear(&perr);
    kiln__passctx_init(&pc, kiln_test_ctx(), NULL, &perr);
    comp_a.kind = KILN_COMP_PASS;
    comp_a.name = "TestFusionPass";
    comp_b.kind = KILN_COMP_PASS;
    comp_b.name = "OtherFusionPass";
    pc.comp = comp;
    pc.stage = "optimize_original";
    return &pc;
}

static kiln_node_id N(kiln_graph *g, const char *name)
{
    kiln_node_id n = kiln_graph_find_node(g, name);
    CU_ASSERT_FATAL(n != 0);
    return n;
}

static char *json_of(const kiln_graph *g)
{
    char *s = kiln_graph_to_json_string(g, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    return s;
}

/* The list_string attribute @p key of @p n joined with ',' into @p buf. */
static const char *list_attr(kiln_graph *g, kiln_node_id n, const char *key, char *buf, size_t size)
{
    const char *const *v = NULL;
    uint32_t cnt = 0;
    buf[0] = '\0';
    if (!kiln_attrs_get_list_string(kiln_node_attrs(g, n), key, &v, &cnt))
        return "<none>";
    size_t len = 0;
    for (uint32_t i = 0; i < cnt; i++)
        len += (size_t)snprintf(buf + len, size - len, "%s%s", i ? "," : "", v[i]);
    return buf;
}

static bool has_ctrl(kiln_graph *g, const char *a, const char *b)
{
    return kiln_ctrl_exists(g, N(g, a), N(g, b));
}

static kiln_anchor peer(kiln_graph *g, const char *n, uint32_t i)
{
    return kiln_node_input_peer(g, N(g, n), i);
}

/* ---- M11: CanFuse cycle with data + control edges ------------------------- */

static void test_can_fuse_cycle_m11(void)
{
    kiln_graph *g = kiln_test_graph("m11");
    kiln_node_id data = kiln_test_node(g, "data", "Data", 0, 1);
    kiln_node_id cast1 = kiln_test_node(g, "cast1", "Cast", 1, 1);
    kiln_node_id transdata = kiln_test_node(g, "transdata", "TransData", 1, 1);
    kiln_node_id cast2 = kiln_test_node(g, "cast2", "Cast", 1, 1);
    kiln_test_edge(g, data, 0, cast1, 0);
    kiln_test_edge(g, cast1, 0, transdata, 0);
    kiln_test_edge(g, data, 0, cast2, 0);
    CU_ASSERT_EQUAL(kiln_ctrl_add(g, transdata, cast2), KILN_OK);
    char reason[256];
    kiln_node_id set[] = {cast1, cast2};
    CU_ASSERT_FALSE(kiln_fusion_can_fuse(g, set, 2, reason, sizeof(reason)));
    CU_ASSERT_PTR_NOT_NULL(strstr(reason, "it will create cycle after fuse"));
    CU_ASSERT_PTR_NOT_NULL(strstr(reason, "cast1"));
    CU_ASSERT_PTR_NOT_NULL(strstr(reason, "cast2"));
    /* without the control edge there is no cycle */
    CU_ASSERT_EQUAL(kiln_ctrl_remove(g, transdata, cast2), KILN_OK);
    CU_ASSERT_TRUE(kiln_fusion_can_fuse(g, set, 2, reason, sizeof(reason)));
    CU_ASSERT_STRING_EQUAL(reason, "");
    /* data-only: a -> b -> c and a -> c: {a, c} would cycle through b */
    kiln_node_id set2[] = {cast1, transdata};
    CU_ASSERT_TRUE(kiln_fusion_can_fuse(g, set2, 2, reason, sizeof(reason)));
    kiln_node_id set3[] = {data, transdata};
    CU_ASSERT_FALSE(kiln_fusion_can_fuse(g, set3, 2, reason, sizeof(reason)));
    CU_ASSERT_PTR_NOT_NULL(strstr(reason, "cycle"));
    kiln_graph_destroy(g);
}

static void test_can_fuse_refusals(void)
{
    kiln_graph *g = kiln_test_graph("refuse");
    kiln_node_id a = kiln_test_node(g, "a", "Relu", 0, 1);
    kiln_node_id b = kiln_test_node(g, "b", "Relu", 1, 1);
    kiln_node_id c = kiln_test_node(g, "c", "Relu", 1, 1);
    kiln_test_edge(g, a, 0, b, 0);
    kiln_test_edge(g, b, 0, c, 0);
    char reason[256];
    CU_ASSERT_FALSE(kiln_fusion_can_fuse(g, NULL, 0, reason, sizeof(reason)));
    CU_ASSERT_STRING_EQUAL(reason, "nodes_before_fuse is empty");
    kiln_node_id bad[] = {a, 99};
    CU_ASSERT_FALSE(kiln_fusion_can_fuse(g, bad, 2, reason, sizeof(reason)));
    CU_ASSERT_PTR_NOT_NULL(strstr(reason, "not a live node"));
    /* one labelled node and one unlabelled: fine; two labels: refused */
    kiln_node_id ab[] = {a, b};
    CU_ASSERT_EQUAL(kiln_attrs_set_string(kiln_node_attrs_mut(g, a), "_user_stream_label", "s1"),
                    KILN_OK);
    CU_ASSERT_TRUE(kiln_fusion_can_fuse(g, ab, 2, reason, sizeof(reason)));
    CU_ASSERT_EQUAL(kiln_attrs_set_string(kiln_node_attrs_mut(g, b), "_user_stream_label", "s2"),
                    KILN_OK);
    CU_ASSERT_FALSE(kiln_fusion_can_fuse(g, ab, 2, reason, sizeof(reason)));
    CU_ASSERT_PTR_NOT_NULL(strstr(reason, "_user_stream_label"));
    CU_ASSERT_PTR_NOT_NULL(strstr(reason, "\"s1\" on node a"));
    CU_ASSERT_PTR_NOT_NULL(strstr(reason, "\"s2\" on node b"));
    kiln_attrs_remove(kiln_node_attrs_mut(g, b), "_user_stream_label");
    /* engines */
    kiln_node_id bc[] = {b, c};
    CU_ASSERT_EQUAL(kiln_attrs_set_string(kiln_node_attrs_mut(g, b), "_kiln_engine", "cpu"),
                    KILN_OK);
    CU_ASSERT_EQUAL(kiln_attrs_set_string(kiln_node_attrs_mut(g, c), "_kiln_engine", "cpu"),
                    KILN_OK);
    CU_ASSERT_TRUE(kiln_fusion_can_fuse(g, bc, 2, reason, sizeof(reason)));
    CU_ASSERT_EQUAL(kiln_attrs_set_string(kiln_node_attrs_mut(g, c), "_kiln_engine", "npu"),
                    KILN_OK);
    CU_ASSERT_FALSE(kiln_fusion_can_fuse(g, bc, 2, reason, sizeof(reason)));
    CU_ASSERT_PTR_NOT_NULL(strstr(reason, "_kiln_engine"));
    CU_ASSERT_PTR_NOT_NULL(strstr(reason, "npu"));
    /* a dead node */
    CU_ASSERT_EQUAL(kiln_graph_remove_node(g, a), KILN_OK);
    CU_ASSERT_FALSE(kiln_fusion_can_fuse(g, ab, 2, reason, sizeof(reason)));
    CU_ASSERT_PTR_NOT_NULL(strstr(reason, "not a live node"));
    /* truncation keeps a terminated string */
    char tiny[8];
    CU_ASSERT_FALSE(kiln_fusion_can_fuse(g, NULL, 0, tiny, sizeof(tiny)));
    CU_ASSERT_EQUAL(strlen(tiny), 7);
    kiln_graph_destroy(g);
}

/* ---- M13: ReportFuse ------------------------------------------------------ */

static void test_report_m13(void)
{
    kiln_graph *g = kiln_test_graph("m13");
    kiln_node_id mm = kiln_test_node(g, "matmul", "MatMul", 2, 1);
    kiln_node_id add = kiln_test_node(g, "add", "Add", 2, 1);
    kiln_node_id gemm = kiln_test_node(g, "gemm", "Gemm", 3, 1);
    kiln_node_id relu = kiln_test_node(g, "relu", "Relu", 1, 1);
    kiln_node_id fused = kiln_test_node(g, "gemm_relu", "GemmRelu", 3, 1);
    kiln_pass_ctx *ctx = pass_ctx(&comp_a);
    kiln_node_id before[] = {mm, add};
    /* errors */
    CU_ASSERT_EQUAL(kiln_fusion_report(ctx, g, NULL, 0, &gemm, 1), KILN_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(kiln_error_message(&perr), "nodes_before_fuse is empty"));
    CU_ASSERT_EQUAL(kiln_fusion_report(NULL, g, before, 2, &gemm, 1), KILN_ERR_INVALID);
    kiln_pass_ctx *noname = pass_ctx(NULL);
    CU_ASSERT_EQUAL(kiln_fusion_report(noname, g, before, 2, &gemm, 1), KILN_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(kiln_error_message(&perr), "outside a pass"));
    ctx = pass_ctx(&comp_a);
    kiln_node_id dead[] = {mm, 77};
    CU_ASSERT_EQUAL(kiln_fusion_report(ctx, g, dead, 2, &gemm, 1), KILN_ERR_INVALID);
    CU_ASSERT_FALSE(kiln_attrs_has(kiln_node_attrs(g, gemm), KILN_ATTR_ORIGIN_NAMES));
    CU_ASSERT_EQUAL(kiln__passctx_stat(ctx, NULL, "TestFusionPass", "effected"), 0);
    /* a pure deletion */
    CU_ASSERT_EQUAL(kiln_fusion_report(ctx, g, before, 2, NULL, 0), KILN_OK);
    CU_ASSERT_EQUAL(kiln__passctx_stat(ctx, NULL, "TestFusionPass", "matched"), 1);
    CU_ASSERT_EQUAL(kiln__passctx_stat(ctx, NULL, "TestFusionPass", "effected"), 1);
    /* after = [gemm] */
    char buf[256];
    CU_ASSERT_EQUAL(kiln_fusion_report(ctx, g, before, 2, &gemm, 1), KILN_OK);
    CU_ASSERT_STRING_EQUAL(list_attr(g, gemm, KILN_ATTR_ORIGIN_NAMES, buf, sizeof(buf)),
                           "matmul,add");
    CU_ASSERT_STRING_EQUAL(list_attr(g, gemm, KILN_ATTR_ORIGIN_TYPES, buf, sizeof(buf)),
                           "MatMul,Add");
    CU_ASSERT_STRING_EQUAL(list_attr(g, gemm, KILN_ATTR_FUSION_PASSES, buf, sizeof(buf)),
                           "TestFusionPass");
    CU_ASSERT_EQUAL(kiln__passctx_stat(ctx, NULL, "TestFusionPass", "effected"), 2);
    /* idempotent: the same report again gives the same records */
    CU_ASSERT_EQUAL(kiln_fusion_report(ctx, g, before, 2, &gemm, 1), KILN_OK);
    CU_ASSERT_STRING_EQUAL(list_attr(g, gemm, KILN_ATTR_ORIGIN_NAMES, buf, sizeof(buf)),
                           "matmul,add");
    CU_ASSERT_STRING_EQUAL(list_attr(g, gemm, KILN_ATTR_FUSION_PASSES, buf, sizeof(buf)),
                           "TestFusionPass");
    /* a second fusion by another pass keeps the originals */
    kiln_pass_ctx *ctx2 = pass_ctx(&comp_b);
    kiln_node_id before2[] = {gemm, relu};
    CU_ASSERT_EQUAL(kiln_fusion_report(ctx2, g, before2, 2, &fused, 1), KILN_OK);
    CU_ASSERT_STRING_EQUAL(list_attr(g, fused, KILN_ATTR_ORIGIN_NAMES, buf, sizeof(buf)),
                           "matmul,add,relu");
    CU_ASSERT_STRING_EQUAL(list_attr(g, fused, KILN_ATTR_ORIGIN_TYPES, buf, sizeof(buf)),
                           "MatMul,Add,Relu");
    CU_ASSERT_STRING_EQUAL(list_attr(g, fused, KILN_ATTR_FUSION_PASSES, buf, sizeof(buf)),
                           "TestFusionPass,OtherFusionPass");
    CU_ASSERT_EQUAL(kiln__passctx_stat(ctx2, NULL, "OtherFusionPass", "matched"), 1);
    kiln_graph_destroy(g);
}

/* ---- replacement ------------------------------------------------------------ */

/* data -> relu1 -> relu2 -> out (NetOutput); x => relu1, relu2 => y (control). */
static kiln_graph *chain_graph(const char *name)
{
    kiln_graph *g = kiln_test_graph(name);
    kiln_node_id data = kiln_test_node(g, "data", "Data", 0, 1);
    kiln_node_id r1 = kiln_test_node(g, "relu1", "Relu", 1, 1);
    kiln_node_id r2 = kiln_test_node(g, "relu2", "Relu", 1, 1);
    kiln_node_id out = kiln_test_node(g, "out", "NetOutput", 2, 0);
    kiln_node_id x = kiln_test_node(g, "x", "NoOp", 0, 0);
    kiln_node_id y = kiln_test_node(g, "y", "NoOp", 0, 0);
    kiln_test_edge(g, data, 0, r1, 0);
    kiln_test_edge(g, r1, 0, r2, 0);
    kiln_test_edge(g, r2, 0, out, 0);
    kiln_test_edge(g, r2, 0, out, 1);
    CU_ASSERT_EQUAL_FATAL(kiln_ctrl_add(g, x, r1), KILN_OK);
    CU_ASSERT_EQUAL_FATAL(kiln_ctrl_add(g, r2, y), KILN_OK);
    int64_t dims[2] = {2, 3};
    kiln_desc_set_shape(g, kiln_node_output_desc(g, data, 0), 2, dims);
    return g;
}

typedef struct bnd {
    kiln_node_id nodes[4];
    kiln_anchor in[4], out[4];
    kiln_fusion_boundary b;
} bnd;

static void chain_boundary(kiln_graph *g, bnd *s)
{
    s->nodes[0] = N(g, "relu1");
    s->nodes[1] = N(g, "relu2");
    s->in[0] = (kiln_anchor){N(g, "data"), 0};
    s->out[0] = (kiln_anchor){N(g, "relu2"), 0};
    s->b = (kiln_fusion_boundary){sizeof(kiln_fusion_boundary), s->nodes, 2, s->in, 1, s->out, 1};
}

/* A replacement in<0> -> <op> named @p name -> NetOutput. */
static kiln_graph *one_node_repl(kiln_graph *g, const kiln_fusion_boundary *b, const char *name,
                                 const char *op)
{
    kiln_graph *r = kiln_fusion_replacement_new(g, b);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    kiln_node_id d = kiln_fusion_replacement_input(r, 0);
    CU_ASSERT_FATAL(d != 0);
    kiln_node_id f = kiln_test_node(r, name, op, 1, 1);
    kiln_node_id o = kiln_test_node(r, "netout", "NetOutput", 1, 0);
    kiln_test_edge(r, d, 0, f, 0);
    kiln_test_edge(r, f, 0, o, 0);
    return r;
}

static void test_replacement_graph(void)
{
    kiln_graph *g = chain_graph("repl_new");
    bnd s;
    chain_boundary(g, &s);
    kiln_graph *r = kiln_fusion_replacement_new(g, &s.b);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL(kiln_graph_node_count(r), 1);
    kiln_node_id d = kiln_fusion_replacement_input(r, 0);
    CU_ASSERT_STRING_EQUAL(kiln_node_name_str(r, d), "in0");
    CU_ASSERT_STRING_EQUAL(kiln_node_op_str(r, d), "Data");
    int64_t idx = -1;
    CU_ASSERT_TRUE(kiln_attrs_get_int(kiln_node_attrs(r, d), "index", &idx));
    CU_ASSERT_EQUAL(idx, 0);
    CU_ASSERT_EQUAL(kiln_desc_rank(kiln_node_output_desc(r, d, 0)), 2);
    CU_ASSERT_EQUAL(kiln_desc_dims(kiln_node_output_desc(r, d, 0))[1], 3);
    CU_ASSERT_EQUAL(kiln_fusion_replacement_input(r, 1), 0);
    /* copy_node: attributes and descriptors, no edges */
    kiln_attrs_set_int(kiln_node_attrs_mut(g, N(g, "relu1")), "alpha", 7);
    kiln_node_id c = kiln_graph_copy_node(r, g, N(g, "relu1"), NULL);
    CU_ASSERT_FATAL(c != 0);
    CU_ASSERT_STRING_EQUAL(kiln_node_name_str(r, c), "relu1");
    int64_t alpha = 0;
    CU_ASSERT_TRUE(kiln_attrs_get_int(kiln_node_attrs(r, c), "alpha", &alpha));
    CU_ASSERT_EQUAL(alpha, 7);
    CU_ASSERT_EQUAL(kiln_node_input_count(r, c), 1);
    CU_ASSERT_EQUAL(kiln_node_input_peer(r, c, 0).node, 0);
    CU_ASSERT_EQUAL(kiln_graph_copy_node(r, g, N(g, "relu1"), NULL), 0); /* name taken */
    kiln_fusion_replacement_free(r);
    /* an invalid boundary input */
    s.in[0] = (kiln_anchor){N(g, "data"), 5};
    CU_ASSERT_PTR_NULL(kiln_fusion_replacement_new(g, &s.b));
    kiln_graph_destroy(g);
}

static void test_replace_root(void)
{
    kiln_graph *g = chain_graph("replace_root");
    kiln_pass_ctx *ctx = pass_ctx(&comp_a);
    bnd s;
    chain_boundary(g, &s);
    kiln_graph *r = one_node_repl(g, &s.b, "relu_fused", "FusedRelu");
    CU_ASSERT_EQUAL_FATAL(kiln_fusion_replace(ctx, g, &s.b, r), KILN_OK);
    CU_ASSERT_EQUAL(kiln_graph_find_node(g, "relu1"), 0);
    CU_ASSERT_EQUAL(kiln_graph_find_node(g, "relu2"), 0);
    kiln_node_id f = N(g, "relu_fused");
    CU_ASSERT_EQUAL(peer(g, "relu_fused", 0).node, N(g, "data"));
    CU_ASSERT_EQUAL(peer(g, "out", 0).node, f);
    CU_ASSERT_EQUAL(peer(g, "out", 1).node, f);
    /* control edges kept */
    CU_ASSERT_TRUE(has_ctrl(g, "x", "relu_fused"));
    CU_ASSERT_TRUE(has_ctrl(g, "relu_fused", "y"));
    char buf[256];
    CU_ASSERT_STRING_EQUAL(list_attr(g, f, KILN_ATTR_ORIGIN_NAMES, buf, sizeof(buf)),
                           "relu1,relu2");
    CU_ASSERT_STRING_EQUAL(list_attr(g, f, KILN_ATTR_FUSION_PASSES, buf, sizeof(buf)),
                           "TestFusionPass");
    CU_ASSERT_EQUAL(kiln__passctx_stat(ctx, NULL, "TestFusionPass", "matched"), 1);
    CU_ASSERT_EQUAL(kiln__passctx_stat(ctx, NULL, "TestFusionPass", "effected"), 1);
    kiln_test_verify_ok(g);
    /* the detector was updated, not rebuilt */
    const struct kiln_cycles *c = kiln__cycles_peek(g);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL(c->builds, 1);
    CU_ASSERT_EQUAL(c->updates, 1);
    CU_ASSERT_TRUE(kiln__cycles_check(g));
    kiln_graph_destroy(g);
}

/* A replacement node named like a replaced node keeps the name; one named
 * like a node outside the boundary is renamed "<name>_<N>". */
static void test_replace_names(void)
{
    kiln_graph *g = chain_graph("replace_names");
    kiln_pass_ctx *ctx = pass_ctx(&comp_a);
    bnd s;
    chain_boundary(g, &s);
    kiln_graph *r = one_node_repl(g, &s.b, "relu1", "FusedRelu");
    CU_ASSERT_EQUAL_FATAL(kiln_fusion_replace(ctx, g, &s.b, r), KILN_OK);
    CU_ASSERT_STRING_EQUAL(kiln_node_op_str(g, N(g, "relu1")), "FusedRelu");
    kiln_node_id nodes[] = {N(g, "relu1")};
    kiln_anchor in[] = {{N(g, "data"), 0}}, out[] = {{N(g, "relu1"), 0}};
    kiln_fusion_boundary b = {sizeof(b), nodes, 1, in, 1, out, 1};
    r = one_node_repl(g, &b, "x", "Relu");
    CU_ASSERT_EQUAL_FATAL(kiln_fusion_replace(ctx, g, &b, r), KILN_OK);
    CU_ASSERT_STRING_EQUAL(kiln_node_op_str(g, N(g, "x")), "NoOp");
    kiln_node_id f = kiln_node_input_peer(g, N(g, "out"), 0).node;
    CU_ASSERT_EQUAL(strncmp(kiln_node_name_str(g, f), "x_", 2), 0);
    CU_ASSERT_STRING_EQUAL(kiln_node_op_str(g, f), "Relu");
    kiln_test_verify_ok(g);
    kiln_graph_destroy(g);
}

/* Pass-through: NetOutput input 0 fed by the Data node: the consumers are
 * re-fed from the boundary input's producer. */
static void test_replace_pass_through(void)
{
    kiln_graph *g = chain_graph("pass_through");
    kiln_pass_ctx *ctx = pass_ctx(&comp_a);
    bnd s;
    chain_boundary(g, &s);
    kiln_graph *r = kiln_fusion_replacement_new(g, &s.b);
    kiln_node_id o = kiln_test_node(r, "netout", "NetOutput", 1, 0);
    kiln_test_edge(r, kiln_fusion_replacement_input(r, 0), 0, o, 0);
    CU_ASSERT_EQUAL_FATAL(kiln_fusion_replace(ctx, g, &s.b, r), KILN_OK);
    CU_ASSERT_EQUAL(kiln_graph_node_count(g), 4);
    CU_ASSERT_EQUAL(peer(g, "out", 0).node, N(g, "data"));
    CU_ASSERT_EQUAL(peer(g, "out", 1).node, N(g, "data"));
    /* with no new node the control order survives source -> destination */
    CU_ASSERT_TRUE(has_ctrl(g, "x", "y"));
    CU_ASSERT_EQUAL(kiln__passctx_stat(ctx, NULL, "TestFusionPass", "effected"), 1);
    CU_ASSERT_TRUE(kiln__cycles_check(g));
    kiln_test_verify_ok(g);
    kiln_graph_destroy(g);
}

/* Multi-node replacement (more new nodes than replaced ones) with an
 * internal control edge, on a While body. */
static void test_replace_while_body(void)
{
    kiln_graph *g = kiln_test_graph("while_root");
    kiln_node_id in = kiln_test_node(g, "in", "Data", 0, 1);
    kiln_node_id w = kiln_test_node(g, "while", "While", 1, 1);
    kiln_test_edge(g, in, 0, w, 0);
    kiln_graph *body = kiln_node_add_subgraph(g, w, "body", "while_body");
    CU_ASSERT_PTR_NOT_NULL_FATAL(body);
    kiln_node_id bd = kiln_test_node(body, "b_data", "Data", 0, 1);
    kiln_attrs_set_int(kiln_node_attrs_mut(body, bd), "_parent_node_index", 0);
    kiln_node_id mul = kiln_test_node(body, "b_mul", "Mul", 2, 1);
    kiln_node_id addn = kiln_test_node(body, "b_add", "Add", 2, 1);
    kiln_node_id bo = kiln_test_node(body, "b_out", "NetOutput", 1, 0);
    kiln_test_edge(body, bd, 0, mul, 0);
    kiln_test_edge(body, bd, 0, mul, 1);
    kiln_test_edge(body, mul, 0, addn, 0);
    kiln_test_edge(body, bd, 0, addn, 1);
    kiln_test_edge(body, addn, 0, bo, 0);
    kiln_pass_ctx *ctx = pass_ctx(&comp_a);
    kiln_node_id nodes[] = {mul, addn};
    kiln_anchor ins[] = {{bd, 0}}, outs[] = {{addn, 0}};
    kiln_fusion_boundary b = {sizeof(b), nodes, 2, ins, 1, outs, 1};
    char reason[128];
    CU_ASSERT_TRUE(kiln_fusion_can_fuse(body, nodes, 2, reason, sizeof(reason)));
    kiln_graph *r = kiln_fusion_replacement_new(body, &b);
    kiln_node_id d = kiln_fusion_replacement_input(r, 0);
    kiln_node_id sq = kiln_test_node(r, "sq", "Square", 1, 1);
    kiln_node_id id1 = kiln_test_node(r, "id1", "Identity", 1, 1);
    kiln_node_id fa = kiln_test_node(r, "fadd", "Add", 2, 1);
    kiln_node_id o = kiln_test_node(r, "o", "NetOutput", 1, 0);
    kiln_test_edge(r, d, 0, sq, 0);
    kiln_test_edge(r, d, 0, id1, 0);
    kiln_test_edge(r, sq, 0, fa, 0);
    kiln_test_edge(r, id1, 0, fa, 1);
    kiln_test_edge(r, fa, 0, o, 0);
    CU_ASSERT_EQUAL(kiln_ctrl_add(r, sq, id1), KILN_OK);
    CU_ASSERT_EQUAL_FATAL(kiln_fusion_replace(ctx, body, &b, r), KILN_OK);
    CU_ASSERT_EQUAL(kiln_graph_node_count(body), 5);
    CU_ASSERT_EQUAL(peer(body, "b_out", 0).node, N(body, "fadd"));
    CU_ASSERT_EQUAL(peer(body, "sq", 0).node, bd);
    CU_ASSERT_TRUE(has_ctrl(body, "sq", "id1"));
    char buf[128];
    CU_ASSERT_STRING_EQUAL(
        list_attr(body, N(body, "id1"), KILN_ATTR_ORIGIN_TYPES, buf, sizeof(buf)), "Mul,Add");
    CU_ASSERT_TRUE(kiln__cycles_check(body));
    CU_ASSERT_EQUAL(kiln__cycles_peek(body)->builds, 1);
    kiln_test_verify_ok(g);
    kiln_graph_destroy(g);
}

/* ---- errors and atomicity ---------------------------------------------------- */

static void expect_invalid(kiln_graph *g, bnd *s, kiln_graph *r, const char *needle)
{
    char *before = json_of(g);
    kiln_pass_ctx *ctx = pass_ctx(&comp_a);
    kiln_status st = kiln_fusion_replace(ctx, g, &s->b, r);
    CU_ASSERT_EQUAL(st, KILN_ERR_INVALID);
    const char *msg = kiln_error_message(&perr);
    if (!strstr(msg, needle))
        fprintf(stderr, "\nmessage: %s (wanted %s)\n", msg, needle);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, needle));
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "TestFusionPass"));
    char *after = json_of(g);
    CU_ASSERT_STRING_EQUAL(before, after);
    CU_ASSERT_EQUAL(kiln__passctx_stat(ctx, NULL, "TestFusionPass", "effected"), 0);
    free(before);
    free(after);
}

static void test_replace_arity_errors(void)
{
    kiln_graph *g = chain_graph("arity");
    bnd s;
    chain_boundary(g, &s);
    /* an extra Data node */
    kiln_graph *r = one_node_repl(g, &s.b, "f", "Relu");
    kiln_node_id d = kiln_test_node(r, "in1", "Data", 0, 1);
    kiln_attrs_set_int(kiln_node_attrs_mut(r, d), "index", 1);
    expect_invalid(g, &s, r, "Data node in1 has index 1");
    /* a Data node too many without a valid index */
    r = one_node_repl(g, &s.b, "f", "Relu");
    kiln_test_node(r, "stray", "Data", 0, 1);
    expect_invalid(g, &s, r, "Data node stray");
    /* NetOutput with the wrong input count */
    r = kiln_fusion_replacement_new(g, &s.b);
    kiln_node_id f = kiln_test_node(r, "f", "Relu", 1, 1);
    kiln_node_id o = kiln_test_node(r, "o", "NetOutput", 2, 0);
    kiln_test_edge(r, kiln_fusion_replacement_input(r, 0), 0, f, 0);
    kiln_test_edge(r, f, 0, o, 0);
    kiln_test_edge(r, f, 0, o, 1);
    expect_invalid(g, &s, r, "NetOutput o has 2 input(s), the boundary 1 output(s)");
    /* no NetOutput */
    r = kiln_fusion_replacement_new(g, &s.b);
    f = kiln_test_node(r, "f", "Relu", 1, 1);
    kiln_test_edge(r, kiln_fusion_replacement_input(r, 0), 0, f, 0);
    expect_invalid(g, &s, r, "0 NetOutput nodes");
    /* two NetOutputs */
    r = one_node_repl(g, &s.b, "f", "Relu");
    kiln_test_node(r, "o2", "NetOutput", 0, 0);
    expect_invalid(g, &s, r, "2 NetOutput nodes");
    /* an unconnected NetOutput input */
    r = kiln_fusion_replacement_new(g, &s.b);
    kiln_test_node(r, "o", "NetOutput", 1, 0);
    expect_invalid(g, &s, r, "input 0 of the replacement's NetOutput o is not connected");
    /* a boundary whose non-output node is used outside */
    r = one_node_repl(g, &s.b, "f", "Relu");
    kiln_node_id extra = kiln_test_node(g, "user", "Relu", 1, 1);
    kiln_test_edge(g, N(g, "relu1"), 0, extra, 0);
    expect_invalid(g, &s, r, "output 0 of relu1 feeds user outside the boundary");
    kiln_graph_destroy(g);
}

static void test_replace_conflict_unchanged(void)
{
    /* data -> a -> b -> c, a -> c: replacing {a, c} would create a cycle */
    kiln_graph *g = kiln_test_graph("conflict");
    kiln_node_id data = kiln_test_node(g, "data", "Data", 0, 1);
    kiln_node_id a = kiln_test_node(g, "a", "Relu", 1, 1);
    kiln_node_id b = kiln_test_node(g, "b", "Relu", 1, 1);
    kiln_node_id c = kiln_test_node(g, "c", "Add", 2, 1);
    kiln_node_id out = kiln_test_node(g, "out", "NetOutput", 1, 0);
    kiln_test_edge(g, data, 0, a, 0);
    kiln_test_edge(g, a, 0, b, 0);
    kiln_test_edge(g, a, 0, c, 0);
    kiln_test_edge(g, b, 0, c, 1);
    kiln_test_edge(g, c, 0, out, 0);
    char *before = json_of(g);
    kiln_pass_ctx *ctx = pass_ctx(&comp_a);
    kiln_node_id nodes[] = {a, c};
    kiln_anchor ins[] = {{data, 0}, {b, 0}}, outs[] = {{c, 0}, {a, 0}};
    kiln_fusion_boundary bd = {sizeof(bd), nodes, 2, ins, 2, outs, 2};
    kiln_graph *r = kiln_fusion_replacement_new(g, &bd);
    kiln_node_id f = kiln_test_node(r, "f", "Fused", 2, 2);
    kiln_node_id o = kiln_test_node(r, "o", "NetOutput", 2, 0);
    kiln_test_edge(r, kiln_fusion_replacement_input(r, 0), 0, f, 0);
    kiln_test_edge(r, kiln_fusion_replacement_input(r, 1), 0, f, 1);
    kiln_test_edge(r, f, 0, o, 0);
    kiln_test_edge(r, f, 1, o, 1);
    CU_ASSERT_EQUAL(kiln_fusion_replace(ctx, g, &bd, r), KILN_ERR_CONFLICT);
    CU_ASSERT_PTR_NOT_NULL(strstr(kiln_error_message(&perr), "it will create cycle after fuse"));
    char *after = json_of(g);
    CU_ASSERT_STRING_EQUAL(before, after);
    free(before);
    free(after);
    kiln_graph_destroy(g);
}

/* Out of memory at every allocation of a replacement: either it succeeds or
 * the graph's JSON is byte-identical to before. */
static void test_replace_oom_atomic(void)
{
    int failures = 0, successes = 0;
    for (long nth = 1; nth < 400; nth++) {
        kiln_graph *g = chain_graph("oom");
        bnd s;
        chain_boundary(g, &s);
        kiln_pass_ctx *ctx = pass_ctx(&comp_a);
        kiln_graph *r = kiln_fusion_replacement_new(g, &s.b);
        kiln_node_id f1 = kiln_test_node(r, "f1", "Relu", 1, 1);
        kiln_node_id f2 = kiln_test_node(r, "f2", "Relu", 1, 1);
        kiln_node_id f3 = kiln_test_node(r, "f3", "Relu", 1, 1);
        kiln_node_id o = kiln_test_node(r, "o", "NetOutput", 1, 0);
        kiln_attrs_set_string(kiln_node_attrs_mut(r, f2), "mode", "fast");
        kiln_test_edge(r, kiln_fusion_replacement_input(r, 0), 0, f1, 0);
        kiln_test_edge(r, f1, 0, f2, 0);
        kiln_test_edge(r, f2, 0, f3, 0);
        kiln_test_edge(r, f3, 0, o, 0);
        char *before = json_of(g);
        kiln__fault_set(nth);
        kiln_status st = kiln_fusion_replace(ctx, g, &s.b, r);
        kiln__fault_set(0);
        if (st == KILN_OK) {
            successes++;
            kiln_test_verify_ok(g);
        } else {
            failures++;
            if (st != KILN_ERR_NOMEM && st != KILN_ERR_CONFLICT)
                fprintf(stderr, "\nOOM at %ld: %s\n", nth, kiln_error_message(&perr));
            CU_ASSERT(st == KILN_ERR_NOMEM || st == KILN_ERR_CONFLICT);
            char *after = json_of(g);
            if (strcmp(before, after) != 0)
                fprintf(stderr, "\nOOM at allocation %ld changed the graph\n", nth);
            CU_ASSERT_STRING_EQUAL(before, after);
            free(after);
        }
        free(before);
        kiln_graph_destroy(g);
        if (st == KILN_OK && nth > 1 && successes > 3)
            break;
    }
    CU_ASSERT(failures > 5);
    CU_ASSERT(successes > 0);
}

/* ---- the detector against brute force ---------------------------------------- */

static uint32_t rng_state = 12345;
static uint32_t rnd(uint32_t n)
{
    rng_state = rng_state * 1103515245u + 12345u;
    return (rng_state >> 8) % n;
}

/* Brute force: does a path leave S and come back? (DFS from every external
 * successor of S over data + control edges.) */
static bool brute_cycle(kiln_graph *g, const kiln_node_id *s, uint32_t n)
{
    uint32_t lim = kiln_graph_id_limit(g);
    uint8_t *ins = calloc(lim, 1), *seen = calloc(lim, 1);
    kiln_node_id *stack = malloc((size_t)lim * 4 * sizeof(*stack));
    uint32_t sp = 0;
    for (uint32_t k = 0; k < n; k++)
        ins[s[k]] = 1;
    for (uint32_t k = 0; k < n; k++) {
        kiln_node_id v = s[k];
        for (uint32_t o = 0; o < kiln_node_output_count(g, v); o++)
            for (uint32_t u = kiln_use_first(g, v, o); u; u = kiln_use_next(g, u))
                stack[sp++] = kiln_use_dst(g, u).node;
        for (uint32_t c = kiln_ctrl_out_first(g, v); c; c = kiln_ctrl_out_next(g, c))
            stack[sp++] = kiln_ctrl_dst(g, c);
    }
    /* the direct successors inside S are not paths out */
    uint32_t w = 0;
    for (uint32_t i = 0; i < sp; i++)
        if (!ins[stack[i]])
            stack[w++] = stack[i];
    sp = w;
    bool found = false;
    while (sp && !found) {
        kiln_node_id v = stack[--sp];
        if (ins[v]) {
            found = true;
            break;
        }
        if (seen[v])
            continue;
        seen[v] = 1;
        for (uint32_t o = 0; o < kiln_node_output_count(g, v); o++)
            for (uint32_t u = kiln_use_first(g, v, o); u; u = kiln_use_next(g, u))
                stack[sp++] = kiln_use_dst(g, u).node;
        for (uint32_t c = kiln_ctrl_out_first(g, v); c; c = kiln_ctrl_out_next(g, c))
            stack[sp++] = kiln_ctrl_dst(g, c);
    }
    free(ins);
    free(seen);
    free(stack);
    return found;
}

/* Fuse @p s (a fusable set) into @p k new nodes (a chain; 0 = pass-through of
 * input 0 when there is one). */
static kiln_status fuse_random(kiln_pass_ctx *ctx, kiln_graph *g, const kiln_node_id *s, uint32_t n,
                               uint32_t k, uint32_t serial)
{
    kiln_anchor ins[64], outs[64];
    uint32_t ni = 0, no = 0;
    for (uint32_t a = 0; a < n; a++) {
        kiln_node_id v = s[a];
        for (uint32_t i = 0; i < kiln_node_input_count(g, v); i++) {
            kiln_anchor p = kiln_node_input_peer(g, v, i);
            bool inside = false, dup = false;
            for (uint32_t b = 0; b < n; b++)
                inside |= p.node == s[b];
            for (uint32_t b = 0; b < ni; b++)
                dup |= ins[b].node == p.node && ins[b].index == p.index;
            if (p.node && !inside && !dup && ni < 64)
                ins[ni++] = p;
        }
        for (uint32_t o = 0; o < kiln_node_output_count(g, v); o++) {
            bool used_out = false;
            for (uint32_t u = kiln_use_first(g, v, o); u; u = kiln_use_next(g, u)) {
                kiln_node_id d = kiln_use_dst(g, u).node;
                bool inside = false;
                for (uint32_t b = 0; b < n; b++)
                    inside |= d == s[b];
                used_out |= !inside;
            }
            if (used_out && no < 64)
                outs[no++] = (kiln_anchor){v, o};
        }
    }
    if (!ni)
        k = k ? k : 1;
    kiln_fusion_boundary b = {sizeof(b), s, n, ins, ni, outs, no};
    kiln_graph *r = kiln_fusion_replacement_new(g, &b);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    kiln_node_id o = kiln_test_node(r, "o", "NetOutput", no, 0);
    kiln_node_id prev = 0;
    for (uint32_t i = 0; i < k; i++) {
        char name[32];
        snprintf(name, sizeof(name), "f%u_%u", serial, i);
        kiln_node_id f = kiln_test_node(r, name, "Fused", i ? ni + 1 : ni, no ? no : 1);
        for (uint32_t j = 0; j < ni; j++)
            kiln_test_edge(r, kiln_fusion_replacement_input(r, j), 0, f, j);
        if (prev)
            kiln_test_edge(r, prev, 0, f, ni);
        prev = f;
    }
    for (uint32_t j = 0; j < no; j++)
        kiln_test_edge(r, prev ? prev : kiln_fusion_replacement_input(r, 0), prev ? j : 0, o, j);
    return kiln_fusion_replace(ctx, g, &b, r);
}

static void test_detector_random(void)
{
    kiln_pass_ctx *ctx = pass_ctx(&comp_a);
    int queries = 0, cycles = 0, fusions = 0;
    for (int round = 0; round < 12; round++) {
        kiln_graph *g = kiln_test_graph("random");
        uint32_t nn = 40 + rnd(40);
        kiln_node_id ids[128];
        for (uint32_t i = 0; i < nn; i++) {
            char name[16];
            snprintf(name, sizeof(name), "n%u", i);
            ids[i] = kiln_test_node(g, name, "Op", 3, 2);
        }
        /* edges only from lower to higher index: a DAG */
        for (uint32_t i = 1; i < nn; i++)
            for (uint32_t in = 0; in < 3; in++)
                if (rnd(3))
                    kiln_test_edge(g, ids[rnd(i)], rnd(2), ids[i], in);
        for (uint32_t e = 0; e < nn / 4; e++) {
            uint32_t a = rnd(nn - 1), b = a + 1 + rnd(nn - 1 - a);
            (void)kiln_ctrl_add(g, ids[a], ids[b]);
        }
        uint32_t serial = 0;
        for (int q = 0; q < 60; q++) {
            kiln_node_id s[3];
            uint32_t n = 2 + rnd(2), got = 0;
            for (int tries = 0; got < n && tries < 50; tries++) {
                kiln_node_id v = kiln_graph_next_node(g, 0);
                for (uint32_t skip = rnd(kiln_graph_node_count(g)); skip && v; skip--)
                    v = kiln_graph_next_node(g, v);
                bool dup = false;
                for (uint32_t k = 0; k < got; k++)
                    dup |= s[k] == v;
                if (v && !dup)
                    s[got++] = v;
            }
            if (got < 2)
                break;
            char reason[256];
            bool ok = kiln_fusion_can_fuse(g, s, got, reason, sizeof(reason));
            bool brute = brute_cycle(g, s, got);
            queries++;
            cycles += brute;
            CU_ASSERT_EQUAL(ok, !brute);
            if (ok != !brute)
                fprintf(stderr, "\nround %d query %d: can_fuse %d brute cycle %d (%s)\n", round, q,
                        ok, brute, reason);
            if (ok && rnd(2)) {
                uint32_t k = rnd(4); /* 0: pass-through, 1 contract, 2-3 expand */
                kiln_status st = fuse_random(ctx, g, s, got, k, serial++);
                CU_ASSERT_EQUAL(st, KILN_OK);
                if (st != KILN_OK)
                    fprintf(stderr, "\nfuse: %s\n", kiln_error_message(&perr));
                fusions++;
                CU_ASSERT_TRUE(kiln__cycles_check(g));
                const struct kiln_cycles *c = kiln__cycles_peek(g);
                CU_ASSERT(c && c->builds == 1);
            }
        }
        kiln_test_verify_ok(g);
        kiln_graph_destroy(g);
    }
    CU_ASSERT(queries > 300);
    CU_ASSERT(cycles > 10);
    CU_ASSERT(fusions > 50);
}

/* Order maintenance: many expansions at one spot exhaust the gaps and force
 * relabelling, which must keep the invariant. */
static void test_detector_relabel(void)
{
    kiln_pass_ctx *ctx = pass_ctx(&comp_a);
    kiln_graph *g = kiln_test_graph("relabel");
    kiln_node_id a = kiln_test_node(g, "a", "Data", 0, 1);
    kiln_node_id b = kiln_test_node(g, "b", "Op", 3, 2);
    kiln_node_id c = kiln_test_node(g, "c", "Op", 3, 2);
    kiln_test_edge(g, a, 0, b, 0);
    kiln_test_edge(g, b, 0, c, 0);
    char reason[64];
    CU_ASSERT_TRUE(kiln_fusion_can_fuse(g, &b, 1, reason, sizeof(reason)));
    for (uint32_t i = 0; i < 40; i++) {
        /* replace the node just before c by a chain of 3 */
        kiln_node_id v = kiln_node_input_peer(g, c, 0).node;
        CU_ASSERT_EQUAL_FATAL(fuse_random(ctx, g, &v, 1, 3, 1000 + i), KILN_OK);
        CU_ASSERT_TRUE(kiln__cycles_check(g));
    }
    const struct kiln_cycles *cy = kiln__cycles_peek(g);
    CU_ASSERT_PTR_NOT_NULL_FATAL(cy);
    CU_ASSERT_EQUAL(cy->builds, 1);
    CU_ASSERT(cy->relabels > 0);
    kiln_graph_destroy(g);
}

/* Any other edit makes the detector stale; the next query rebuilds it. */
static void test_detector_stale(void)
{
    kiln_graph *g = chain_graph("stale");
    kiln_node_id s[] = {N(g, "relu1"), N(g, "relu2")};
    char reason[64];
    CU_ASSERT_TRUE(kiln_fusion_can_fuse(g, s, 2, reason, sizeof(reason)));
    CU_ASSERT_PTR_NOT_NULL(kiln__cycles_peek(g));
    CU_ASSERT_EQUAL(kiln_ctrl_add(g, N(g, "relu1"), N(g, "y")), KILN_OK);
    CU_ASSERT_PTR_NULL(kiln__cycles_peek(g));
    kiln_node_id s2[] = {N(g, "x"), N(g, "y")};
    CU_ASSERT_EQUAL(kiln_fusion_can_fuse(g, s2, 2, reason, sizeof(reason)), !brute_cycle(g, s2, 2));
    CU_ASSERT_PTR_NOT_NULL_FATAL(kiln__cycles_peek(g));
    CU_ASSERT_EQUAL(kiln__cycles_peek(g)->builds, 2);
    kiln_graph_destroy(g);
}

/* ---- report and DOT display ------------------------------------------------- */

static void test_report_and_dot(void)
{
    kiln_graph *g = chain_graph("display");
    kiln_pass_ctx *ctx = pass_ctx(&comp_a);
    bnd s;
    chain_boundary(g, &s);
    CU_ASSERT_EQUAL_FATAL(
        kiln_fusion_replace(ctx, g, &s.b, one_node_repl(g, &s.b, "fr", "FusedRelu")), KILN_OK);
    /* a second fusion, in a subgraph, by another pass */
    kiln_node_id w = kiln_test_node(g, "loop", "While", 0, 0);
    kiln_graph *body = kiln_node_add_subgraph(g, w, "body", "loop_body");
    kiln_node_id bd = kiln_test_node(body, "bd", "Data", 0, 1);
    kiln_node_id sig = kiln_test_node(body, "sig", "Sigmoid", 1, 1);
    kiln_node_id bo = kiln_test_node(body, "bo", "NetOutput", 1, 0);
    kiln_test_edge(body, bd, 0, sig, 0);
    kiln_test_edge(body, sig, 0, bo, 0);
    kiln_pass_ctx pc2;
    kiln_error err2;
    kiln_error_clear(&err2);
    kiln__passctx_init(&pc2, kiln_test_ctx(), NULL, &err2);
    pc2.comp = &comp_b;
    kiln_anchor in = {bd, 0}, out = {sig, 0};
    kiln_fusion_boundary b = {sizeof(b), &sig, 1, &in, 1, &out, 1};
    CU_ASSERT_EQUAL_FATAL(
        kiln_fusion_replace(&pc2, body, &b, one_node_repl(body, &b, "hs", "HardSigmoid")), KILN_OK);
    CU_ASSERT_TRUE(kiln__passctx_merge(ctx, &pc2));
    kiln__passctx_fini(&pc2);

    json_t *j = kiln__fusions_report(g, ctx);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    json_t *pa = json_object_get(json_object_get(j, "passes"), "TestFusionPass");
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(pa, "matched")), 1);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(pa, "effected")), 1);
    json_t *pb = json_object_get(json_object_get(j, "passes"), "OtherFusionPass");
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(pb, "effected")), 1);
    json_t *nodes = json_object_get(j, "nodes");
    CU_ASSERT_EQUAL_FATAL(json_array_size(nodes), 2);
    json_t *n0 = json_array_get(nodes, 0), *n1 = json_array_get(nodes, 1);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(n0, "graph")), "display");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(n0, "node")), "fr");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(n0, "op")), "FusedRelu");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_array_get(json_object_get(n0, "sources"), 1)),
                           "relu2");
    CU_ASSERT_STRING_EQUAL(
        json_string_value(json_array_get(json_object_get(n0, "source_types"), 0)), "Relu");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_array_get(json_object_get(n0, "passes"), 0)),
                           "TestFusionPass");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(n1, "graph")), "loop_body");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(n1, "node")), "hs");
    json_decref(j);
    /* no pass context: the nodes still show, the counters are empty */
    j = kiln__fusions_report(g, NULL);
    CU_ASSERT_EQUAL(json_object_size(json_object_get(j, "passes")), 0);
    CU_ASSERT_EQUAL(json_array_size(json_object_get(j, "nodes")), 2);
    json_decref(j);

    char *dot = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&dot, &len);
    CU_ASSERT_EQUAL(kiln_graph_write_dot(g, f, NULL), KILN_OK);
    fclose(f);
    CU_ASSERT_PTR_NOT_NULL(
        strstr(dot, "fr\\nFusedRelu\\nfused from: relu1, relu2 (TestFusionPass)\", style=bold]"));
    CU_ASSERT_PTR_NOT_NULL(strstr(dot, "fused from: sig (OtherFusionPass)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(dot, "data\\nData\"]"));
    free(dot);
    kiln_graph_destroy(g);
}

static const kiln_test_case cases[] = {
    {"CanFuse cycle (M11)", test_can_fuse_cycle_m11},
    {"CanFuse refusals", test_can_fuse_refusals},
    {"ReportFuse (M13)", test_report_m13},
    {"replacement graph and copy_node", test_replacement_graph},
    {"replace on the root", test_replace_root},
    {"replace names", test_replace_names},
    {"replace pass-through", test_replace_pass_through},
    {"replace in a While body", test_replace_while_body},
    {"replace arity errors", test_replace_arity_errors},
    {"replace refused by CanFuse", test_replace_conflict_unchanged},
    {"replace atomic under OOM", test_replace_oom_atomic},
    {"detector vs brute force", test_detector_random},
    {"detector relabelling", test_detector_relabel},
    {"detector stale after edits", test_detector_stale},
    {"report and DOT display", test_report_and_dot},
    {NULL, NULL}};

int main(void)
{
    int rc = kiln_test_run("fusion_rewrite", cases);
    kiln__passctx_fini(&pc);
    return rc;
}

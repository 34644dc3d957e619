/*
 * test_infer_shapes.c - the InferShapes pass of libkiln_onnx_ops.so (with libkiln_cpu.so)
 * (docs/shape_inference.md): loaded with kiln_plugin_load and run by the pass
 * manager on small JSON graphs.  Covers broadcasting, Conv/pool arithmetic,
 * Reshape targets and a Shape->Gather->Concat->Reshape sub-graph folded to
 * constants, the kiln.input_shape.<name> session option, fold=false, errors
 * naming the node and both shapes, and an If whose condition comes from a
 * shape being inlined (and one whose condition is unknown keeping both
 * branches with their Data nodes bound from the parent).
 */
#include "kiln_test.h"
#include "ctx.h"
#include "graph_int.h"
#include "graph_json.h"
#include "options.h"
#include "passmgr.h"
#include "plugin.h"
#include <stdio.h>
#include <string.h>

typedef struct fixture {
    kiln_ctx *ctx;
    kiln_graph *g;
    kiln_passmgr *pm;
    kiln_options *opts;
    kiln_pass_inst pi; /* must outlive the pass manager */
    kiln_error err;
} fixture;

static void setup(fixture *f, const char *json)
{
    memset(f, 0, sizeof(*f));
    f->ctx = kiln_ctx_create();
    CU_ASSERT_PTR_NOT_NULL_FATAL(f->ctx);
    CU_ASSERT_EQUAL_FATAL(kiln_test_load_plugin(f->ctx, "libkiln_onnx_ops.so", &f->err), KILN_OK);
    CU_ASSERT_EQUAL_FATAL(kiln_test_load_plugin(f->ctx, "libkiln_cpu.so", &f->err), KILN_OK);
    kiln_status st =
        kiln_graph_read_json_string(f->ctx, json, strlen(json), "test", &f->g, &f->err);
    if (st != KILN_OK)
        fprintf(stderr, "%s\n", kiln_error_message(&f->err));
    CU_ASSERT_EQUAL_FATAL(st, KILN_OK);
}

/* Run InferShapes (with pass option fold=@p fold). */
static kiln_status run(fixture *f, bool fold)
{
    kiln_pass_inst *pi = &f->pi;
    memset(pi, 0, sizeof(*pi));
    pi->comp = kiln_registry_find(f->ctx, KILN_COMP_PASS, "InferShapes");
    CU_ASSERT_PTR_NOT_NULL_FATAL(pi->comp);
    pi->enabled = true;
    f->opts = kiln__options_create(pi->comp->d.pass.options, pi->comp->d.pass.option_count);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f->opts);
    CU_ASSERT_EQUAL(kiln__options_set_text(f->opts, "fold", fold ? "true" : "false", &f->err),
                    KILN_OK);
    pi->options = f->opts;
    kiln_error_clear(&f->err);
    CU_ASSERT_EQUAL_FATAL(kiln__passmgr_create(f->ctx, NULL, &f->pm, &f->err), KILN_OK);
    return kiln__passmgr_run_stage(f->pm, "prepare", pi, 1, f->g, &f->err);
}

static void teardown(fixture *f)
{
    if (f->pm)
        kiln__passmgr_destroy(f->pm);
    if (f->opts)
        kiln__options_destroy(f->opts);
    kiln_graph_destroy(f->g);
    kiln_ctx_destroy(f->ctx);
}

/* Output 0 of node @p name has dtype @p dt and shape @p want ("[1,2]"). */
static void expect(kiln_graph *g, const char *name, kiln_dtype dt, const char *want)
{
    kiln_node_id n = kiln_graph_find_node(g, name);
    CU_ASSERT_FATAL(n != 0);
    kiln_tensor_desc *d = kiln_node_output_desc(g, n, 0);
    char buf[256] = "[?]";
    int32_t r = kiln_desc_rank(d);
    if (r >= 0) {
        size_t k = (size_t)snprintf(buf, sizeof(buf), "[");
        for (int32_t i = 0; i < r; i++)
            k += (size_t)snprintf(buf + k, sizeof(buf) - k, "%s%lld", i ? "," : "",
                                  (long long)kiln_desc_dims(d)[i]);
        snprintf(buf + k, sizeof(buf) - k, "]");
    }
    if (strcmp(buf, want) != 0 || kiln_desc_dtype(d) != dt)
        fprintf(stderr, "\n%s: got %s %s, want %s %s\n", name, kiln_dtype_name(kiln_desc_dtype(d)),
                buf, kiln_dtype_name(dt), want);
    CU_ASSERT_STRING_EQUAL(buf, want);
    CU_ASSERT_EQUAL(kiln_desc_dtype(d), dt);
}

#define I64(name, dims, data)                                                                      \
    "{\"name\":\"" name                                                                            \
    "\",\"type\":\"Const\",\"outputs\":[{}],\"attrs\":{\"value\":{\"type\":\"tensor\","            \
    "\"value\":{\"dtype\":\"int64\",\"shape\":" dims ",\"data\":" data "}}}}"

static void test_infer_basic_ops(void)
{
    fixture f;
    setup(&f,
          "{\"kiln_graph\":1,\"name\":\"t\",\"nodes\":["
          "{\"name\":\"x\",\"type\":\"Data\",\"attrs\":{\"index\":0},"
          " \"outputs\":[{\"dtype\":\"float32\",\"shape\":[1,3,32,32]}]},"
          "{\"name\":\"w\",\"type\":\"Data\",\"attrs\":{\"index\":1},"
          " \"outputs\":[{\"dtype\":\"float32\",\"shape\":[8,3,3,3]}]},"
          "{\"name\":\"conv\",\"type\":\"Conv\",\"inputs\":[\"x:0\",\"w:0\"],\"outputs\":[{}],"
          "\"attrs\":{"
          " \"strides\":[2,2],\"pads\":[1,1,1,1]}},"
          "{\"name\":\"pool\",\"type\":\"MaxPool\",\"inputs\":[\"conv:0\"],\"outputs\":[{}],"
          "\"attrs\":{"
          " \"kernel_shape\":[3,3],\"strides\":[2,2],\"ceil_mode\":1}},"
          "{\"name\":\"gap\",\"type\":\"GlobalAveragePool\",\"inputs\":[\"pool:0\"],\"outputs\":[{}"
          "]},"
          "{\"name\":\"add\",\"type\":\"Add\",\"inputs\":[\"pool:0\",\"gap:0\"],\"outputs\":[{}]},"
          "{\"name\":\"eq\",\"type\":\"Equal\",\"inputs\":[\"add:0\",\"gap:0\"],\"outputs\":[{}]},"
          "{\"name\":\"flat\",\"type\":\"Flatten\",\"inputs\":[\"add:0\"],\"outputs\":[{}]},"
          "{\"name\":\"tr\",\"type\":\"Transpose\",\"inputs\":[\"conv:0\"],\"outputs\":[{}],"
          " \"attrs\":{\"perm\":[0,2,3,1]}},"
          "{\"name\":\"red\",\"type\":\"ReduceMean\",\"inputs\":[\"tr:0\"],\"outputs\":[{}],"
          " \"attrs\":{\"axes\":[-1],\"keepdims\":0}},"
          "{\"name\":\"sh\",\"type\":\"Shape\",\"inputs\":[\"x:0\"],\"outputs\":[{}]},"
          "{\"name\":\"out\",\"type\":\"NetOutput\",\"inputs\":[\"flat:0\",\"eq:0\",\"red:0\","
          " \"sh:0\"]}]}");
    CU_ASSERT_EQUAL(run(&f, false), KILN_OK);
    expect(f.g, "conv", KILN_DT_FLOAT32, "[1,8,16,16]");
    expect(f.g, "pool", KILN_DT_FLOAT32, "[1,8,8,8]");
    expect(f.g, "gap", KILN_DT_FLOAT32, "[1,8,1,1]");
    expect(f.g, "add", KILN_DT_FLOAT32, "[1,8,8,8]");
    expect(f.g, "eq", KILN_DT_BOOL, "[1,8,8,8]");
    expect(f.g, "flat", KILN_DT_FLOAT32, "[1,512]");
    expect(f.g, "red", KILN_DT_FLOAT32, "[1,16,16]");
    expect(f.g, "sh", KILN_DT_INT64, "[4]");
    /* fold=false: the Shape node stays a Shape */
    CU_ASSERT_STRING_EQUAL(kiln_node_op_str(f.g, kiln_graph_find_node(f.g, "sh")), "Shape");
    teardown(&f);
}

static const char *const shape_subgraph =
    "{\"kiln_graph\":1,\"name\":\"t\",\"nodes\":["
    "{\"name\":\"x\",\"type\":\"Data\",\"attrs\":{\"index\":0},"
    " \"outputs\":[{\"dtype\":\"float32\",\"shape\":[-1,6,-1],"
    "   "
    "\"attrs\":{\"_onnx_dim_params\":{\"type\":\"list_string\",\"value\":[\"N\",\"\",\"T\"]}}}]},"
    "{\"name\":\"sh\",\"type\":\"Shape\",\"inputs\":[\"x:0\"],\"outputs\":[{}]}," I64(
        "i0", "[1]",
        "[0]") ","
               "{\"name\":\"g\",\"type\":\"Gather\",\"inputs\":[\"sh:0\",\"i0:0\"],\"outputs\":[{}]"
               "}," I64("m1", "[1]", "[-1]") "," I64(
                   "three", "[1]",
                   "[3]") ","
                          "{\"name\":\"cat\",\"type\":\"Concat\",\"inputs\":[\"g:0\",\"three:0\","
                          "\"m1:0\"],\"outputs\":[{}],"
                          " \"attrs\":{\"axis\":0}},"
                          "{\"name\":\"r\",\"type\":\"Reshape\",\"inputs\":[\"x:0\",\"cat:0\"],"
                          "\"outputs\":[{}]},"
                          "{\"name\":\"out\",\"type\":\"NetOutput\",\"inputs\":[\"r:0\"]}]}";

static void test_infer_folds_shape_subgraph(void)
{
    fixture f;
    setup(&f, shape_subgraph);
    CU_ASSERT_EQUAL(kiln_ctx_set_option(f.ctx, "kiln.input_shape.x", "2,6,10"), KILN_OK);
    CU_ASSERT_EQUAL(run(&f, true), KILN_OK);
    expect(f.g, "x", KILN_DT_FLOAT32, "[2,6,10]");
    expect(f.g, "r", KILN_DT_FLOAT32, "[2,3,20]");
    /* the binding made the dims static: the dim names are gone */
    kiln_tensor_desc *d = kiln_node_output_desc(f.g, kiln_graph_find_node(f.g, "x"), 0);
    CU_ASSERT_FALSE(kiln_attrs_has(kiln_desc_attrs(d), "_onnx_dim_params"));
    /* the whole shape computation is one Const now; the rest is gone */
    kiln_node_id cat = kiln_graph_find_node(f.g, "cat");
    CU_ASSERT_STRING_EQUAL(kiln_node_op_str(f.g, cat), "Const");
    kiln_tensor_value t;
    CU_ASSERT_FATAL(kiln_attrs_get_tensor(kiln_node_attrs(f.g, cat), "value", &t));
    CU_ASSERT_EQUAL(t.dtype, KILN_DT_INT64);
    CU_ASSERT(t.nbytes == 24 && ((const int64_t *)t.data)[0] == 2 &&
              ((const int64_t *)t.data)[2] == -1);
    CU_ASSERT_EQUAL(kiln_graph_find_node(f.g, "sh"), 0);
    CU_ASSERT_EQUAL(kiln_graph_find_node(f.g, "g"), 0);
    CU_ASSERT_EQUAL(kiln_graph_node_count(f.g), 4); /* x, cat, r, out */
    teardown(&f);
}

static void test_infer_unbound_dims_stay_unknown(void)
{
    fixture f;
    setup(&f, shape_subgraph);
    CU_ASSERT_EQUAL(run(&f, true), KILN_OK);
    expect(f.g, "r", KILN_DT_FLOAT32, "[-1,-1,-1]"); /* rank from the target */
    CU_ASSERT_STRING_EQUAL(kiln_node_op_str(f.g, kiln_graph_find_node(f.g, "sh")), "Shape");
    teardown(&f);
}

static void test_infer_errors_name_node_and_shapes(void)
{
    fixture f;
    setup(&f,
          "{\"kiln_graph\":1,\"name\":\"t\",\"nodes\":["
          "{\"name\":\"a\",\"type\":\"Data\",\"attrs\":{\"index\":0},"
          " \"outputs\":[{\"dtype\":\"float32\",\"shape\":[2,3]}]},"
          "{\"name\":\"b\",\"type\":\"Data\",\"attrs\":{\"index\":1},"
          " \"outputs\":[{\"dtype\":\"float32\",\"shape\":[4,3]}]},"
          "{\"name\":\"bad_add\",\"type\":\"Add\",\"inputs\":[\"a:0\",\"b:0\"],\"outputs\":[{}]},"
          "{\"name\":\"out\",\"type\":\"NetOutput\",\"inputs\":[\"bad_add:0\"]}]}");
    CU_ASSERT_NOT_EQUAL(run(&f, true), KILN_OK);
    const char *m = kiln_error_message(&f.err);
    CU_ASSERT_PTR_NOT_NULL(strstr(m, "node bad_add (Add)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(m, "[2,3]"));
    CU_ASSERT_PTR_NOT_NULL(strstr(m, "[4,3]"));
    teardown(&f);

    setup(
        &f,
        "{\"kiln_graph\":1,\"name\":\"t\",\"nodes\":["
        "{\"name\":\"a\",\"type\":\"Data\",\"attrs\":{\"index\":0},"
        " \"outputs\":[{\"dtype\":\"float32\",\"shape\":[2,3]}]}," I64(
            "s", "[2]",
            "[4,2]") ","
                     "{\"name\":\"bad_reshape\",\"type\":\"Reshape\",\"inputs\":[\"a:0\",\"s:0\"],"
                     "\"outputs\":[{}]},"
                     "{\"name\":\"out\",\"type\":\"NetOutput\",\"inputs\":[\"bad_reshape:0\"]}]}");
    CU_ASSERT_NOT_EQUAL(run(&f, true), KILN_OK);
    m = kiln_error_message(&f.err);
    CU_ASSERT_PTR_NOT_NULL(strstr(m, "node bad_reshape (Reshape)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(m, "[2,3]"));
    CU_ASSERT_PTR_NOT_NULL(strstr(m, "[4,2]"));
    teardown(&f);
}

/* If (Shape(x)[1] == 6): then Neg(x) else Identity(y).  Parent input 1 = x, 2 = y. */
static const char *const if_graph =
    "{\"kiln_graph\":1,\"name\":\"t\",\"nodes\":["
    "{\"name\":\"x\",\"type\":\"Data\",\"attrs\":{\"index\":0},"
    " \"outputs\":[{\"dtype\":\"float32\",\"shape\":[2,6]}]},"
    "{\"name\":\"y\",\"type\":\"Data\",\"attrs\":{\"index\":1},"
    " \"outputs\":[{\"dtype\":\"float32\",\"shape\":[2,6]}]},"
    "{\"name\":\"c\",\"type\":\"Data\",\"attrs\":{\"index\":2},"
    " \"outputs\":[{\"dtype\":\"bool\",\"shape\":[]}]},"
    "{\"name\":\"sh\",\"type\":\"Shape\",\"inputs\":[\"x:0\"],\"outputs\":[{}]}," I64(
        "one", "[]",
        "[1]") ","
               "{\"name\":\"g\",\"type\":\"Gather\",\"inputs\":[\"sh:0\",\"one:0\"],\"outputs\":[{}"
               "]}," I64(
                   "six", "[]",
                   "[6]") ","
                          "{\"name\":\"eq\",\"type\":\"Equal\",\"inputs\":[\"g:0\",\"six:0\"],"
                          "\"outputs\":[{}]},"
                          "{\"name\":\"if\",\"type\":\"If\",\"inputs\":[\"COND:0\",\"x:0\",\"y:0\"]"
                          ","
                          " \"outputs\":[{\"attrs\":{\"_onnx_name\":{\"type\":\"string\",\"value\":"
                          "\"res\"}}}],"
                          " \"subgraphs\":{"
                          "  \"then_branch\":{\"name\":\"then\",\"nodes\":["
                          "   "
                          "{\"name\":\"tx\",\"type\":\"Data\",\"attrs\":{\"_parent_node_index\":1},"
                          "\"outputs\":[{}]},"
                          "   "
                          "{\"name\":\"neg\",\"type\":\"Neg\",\"inputs\":[\"tx:0\"],\"outputs\":[{}"
                          "]},"
                          "   {\"name\":\"tout\",\"type\":\"NetOutput\",\"inputs\":[\"neg:0\"]}]},"
                          "  \"else_branch\":{\"name\":\"else\",\"nodes\":["
                          "   "
                          "{\"name\":\"ey\",\"type\":\"Data\",\"attrs\":{\"_parent_node_index\":2},"
                          "\"outputs\":[{}]},"
                          "   "
                          "{\"name\":\"id\",\"type\":\"Identity\",\"inputs\":[\"ey:0\"],"
                          "\"outputs\":[{}]},"
                          "   {\"name\":\"eout\",\"type\":\"NetOutput\",\"inputs\":[\"id:0\"]}]}}},"
                          "{\"name\":\"out\",\"type\":\"NetOutput\",\"inputs\":[\"if:0\"]}]}";

static const char *if_json(char *buf, size_t size, const char *cond)
{
    const char *p = strstr(if_graph, "COND");
    snprintf(buf, size, "%.*s%s%s", (int)(p - if_graph), if_graph, cond, p + 4);
    return buf;
}

static void test_infer_inlines_shape_if(void)
{
    fixture f;
    char buf[4096];
    setup(&f, if_json(buf, sizeof(buf), "eq"));
    CU_ASSERT_EQUAL(run(&f, true), KILN_OK);
    CU_ASSERT_EQUAL(kiln_graph_find_node(f.g, "if"), 0);
    CU_ASSERT_EQUAL(kiln_graph_all_subgraph_count(f.g), 0);
    kiln_node_id neg = kiln_graph_find_node(f.g, "neg");
    CU_ASSERT_FATAL(neg != 0);
    expect(f.g, "neg", KILN_DT_FLOAT32, "[2,6]");
    kiln_anchor p = kiln_node_input_peer(f.g, neg, 0);
    CU_ASSERT_EQUAL(p.node, kiln_graph_find_node(f.g, "x"));
    kiln_node_id out = kiln_graph_find_node(f.g, "out");
    CU_ASSERT_EQUAL(kiln_node_input_peer(f.g, out, 0).node, neg);
    const char *vn = NULL;
    CU_ASSERT(kiln_attrs_get_string(kiln_desc_attrs(kiln_node_output_desc(f.g, neg, 0)),
                                    "_onnx_name", &vn));
    CU_ASSERT_STRING_EQUAL(vn ? vn : "", "res");
    CU_ASSERT_EQUAL(kiln_graph_find_node(f.g, "sh"), 0); /* condition folded away */
    teardown(&f);
}

static void test_infer_unknown_if_keeps_branches(void)
{
    fixture f;
    char buf[4096];
    setup(&f, if_json(buf, sizeof(buf), "c"));
    CU_ASSERT_EQUAL(run(&f, false), KILN_OK);
    CU_ASSERT_FATAL(kiln_graph_find_node(f.g, "if") != 0);
    expect(f.g, "if", KILN_DT_FLOAT32, "[2,6]");
    kiln_graph *then_g = kiln_graph_find_subgraph(f.g, "then");
    CU_ASSERT_PTR_NOT_NULL_FATAL(then_g);
    expect(then_g, "tx", KILN_DT_FLOAT32, "[2,6]");
    expect(then_g, "neg", KILN_DT_FLOAT32, "[2,6]");
    teardown(&f);
}

int main(void)
{
    static const kiln_test_case cases[] = {
        {"test_infer_basic_ops", test_infer_basic_ops},
        {"test_infer_folds_shape_subgraph", test_infer_folds_shape_subgraph},
        {"test_infer_unbound_dims_stay_unknown", test_infer_unbound_dims_stay_unknown},
        {"test_infer_errors_name_node_and_shapes", test_infer_errors_name_node_and_shapes},
        {"test_infer_inlines_shape_if", test_infer_inlines_shape_if},
        {"test_infer_unknown_if_keeps_branches", test_infer_unknown_if_keeps_branches},
        {NULL, NULL},
    };
    return kiln_test_run("infer_shapes", cases);
}

/*
 * test_opreg.c - the op registry (core/opreg.c, kiln_op.h, docs/ops.md):
 * registration through in-process plugins, O(1) lookup by symbol and by
 * name, flags, the refusal of a duplicate op type (naming both plugins) and
 * of malformed defs (naming the plugin), rollback of a failing plugin's ops,
 * the separate namespace of ops and other components, the ONNX op set of
 * libkiln_onnx_ops.so, and InferShapes calling a custom op's inference and
 * folding functions.
 */
#include "kiln_test.h"
#include "graph_int.h"
#include "graph_json.h"
#include "options.h"
#include "passmgr.h"
#include "plugin.h"
#include "kiln/kiln_embed.h"

#include <stdio.h>
#include <string.h>

static kiln_plugin_desc
plugin(const char *name, kiln_status (*init)(const kiln_host_api *, kiln_registrar *, kiln_error *))
{
    kiln_plugin_desc d = {sizeof(kiln_plugin_desc), KILN_ABI_MAJOR, KILN_ABI_MINOR, name, "1",
                          "MIT", "t", "t", init, NULL, {0}};
    return d;
}

/* ---- a custom op: AcmeDup repeats its input along the last axis ------------------- */

static kiln_status dup_infer(kiln_op_node *nd, kiln_error *err)
{
    if (!nd->in[0].present)
        return kiln_errorf(err, KILN_ERR_INVALID, "node %s: no input", nd->name);
    nd->out[0].dtype = nd->in[0].dtype;
    nd->out[0].s = nd->in[0].s;
    int32_t r = nd->out[0].s.rank;
    if (r > 0 && nd->out[0].s.d[r - 1] >= 0)
        nd->out[0].s.d[r - 1] *= 2;
    return KILN_OK;
}

static kiln_status dup_fold(const kiln_op_node *nd, kiln_op_value *out, kiln_error *err)
{
    (void)err;
    const kiln_op_value *v = nd->in[0].val;
    if (!v || v->s.rank < 1 || out[0].nbytes != 2 * v->nbytes)
        return KILN_ERR_UNSUPPORTED;
    int64_t last = v->s.d[v->s.rank - 1];
    size_t row = (size_t)last * kiln_dtype_size(v->dtype); /* bytes of one last-axis row */
    size_t rows = row ? v->nbytes / row : 0;
    for (size_t i = 0; i < rows; i++) {
        memcpy((char *)out[0].data + 2 * i * row, (const char *)v->data + i * row, row);
        memcpy((char *)out[0].data + (2 * i + 1) * row, (const char *)v->data + i * row, row);
    }
    return KILN_OK;
}

static const kiln_op_def acme_dup = {
    .struct_size = sizeof(kiln_op_def),
    .type = "AcmeDup",
    .domain = "com.acme",
    .summary = "repeat along the last axis",
    .flags = KILN_OP_ELEMENTWISE,
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 1,
    .infer = dup_infer,
    .fold = dup_fold,
};

static kiln_status acme_init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)h;
    (void)e;
    static const kiln_op_def src = {sizeof(kiln_op_def), "AcmeSource", "com.acme", NULL,
                                    KILN_OP_DATA_LIKE | KILN_OP_STATEFUL, 0, 0, 1, 1,
                                    NULL, NULL, NULL, {0}};
    kiln_status st = kiln_register_op(r, &acme_dup);
    return st != KILN_OK ? st : kiln_register_op(r, &src);
}

/* Registers a fresh op, then one AcmeDup again: the whole plugin fails. */
static kiln_status clash_init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)h;
    (void)e;
    static const kiln_op_def fresh = {sizeof(kiln_op_def), "ClashFresh", NULL, NULL, 0, 0, 1, 1,
                                      1, NULL, NULL, NULL, {0}};
    kiln_status st = kiln_register_op(r, &fresh);
    return st != KILN_OK ? st : kiln_register_op(r, &acme_dup);
}

static int bad_case;
static kiln_status bad_init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)h;
    (void)e;
    kiln_op_def d = {sizeof(kiln_op_def), "BadOp", NULL, NULL, 0, 1, 1, 1, 1,
                     NULL, NULL, NULL, {0}};
    if (bad_case == 0)
        d.type = NULL;
    else if (bad_case == 1)
        d.min_inputs = 3, d.max_inputs = 2;
    else if (bad_case == 2)
        d.struct_size = 8;
    else if (bad_case == 3)
        d.flags = KILN_OP_DATA_LIKE; /* data-like with a required input */
    return kiln_register_op(r, &d);
}

/* A pass named like an op: ops have a namespace of their own. */
static kiln_pass_result noop(void *inst, kiln_pass_ctx *ctx, kiln_graph *g)
{
    (void)inst;
    (void)ctx;
    (void)g;
    return KILN_PASS_NOT_CHANGED;
}
static kiln_status samename_init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)h;
    (void)e;
    static const kiln_pass_desc p = {.struct_size = sizeof(kiln_pass_desc),
                                     .kind = KILN_PASS_KIND_GRAPH,
                                     .name = "AcmeDup",
                                     .run_graph = noop};
    return kiln_register_pass(r, &p);
}

static void test_opreg_register_and_find(void)
{
    kiln_ctx *ctx = kiln_ctx_create();
    kiln_error err;
    kiln_error_clear(&err);
    kiln_plugin_desc p = plugin("com.acme.ops", acme_init);
    CU_ASSERT_EQUAL_FATAL(kiln_plugin_register_static(ctx, &p, NULL, &err), KILN_OK);
    kiln_graph *g = kiln_graph_create(ctx, "g");
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    kiln_sym s = kiln_sym_lookup(g, "AcmeDup");
    CU_ASSERT(s != 0); /* registration interned the type */
    const kiln_op_def *d = kiln_op_find(g, s);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    CU_ASSERT_STRING_EQUAL(d->type, "AcmeDup");
    CU_ASSERT_STRING_EQUAL(d->domain, "com.acme");
    CU_ASSERT_EQUAL(d->flags, KILN_OP_ELEMENTWISE);
    CU_ASSERT(d->infer == dup_infer && d->fold == dup_fold);
    CU_ASSERT_PTR_EQUAL(kiln_op_find_str(g, "AcmeDup"), d);
    CU_ASSERT_PTR_NULL(kiln_op_find_str(g, "NoSuchOp"));
    CU_ASSERT_PTR_NULL(kiln_op_find(g, 0));
    CU_ASSERT_PTR_NULL(kiln_op_find(g, 0xFFFFFFF0u));
    CU_ASSERT_PTR_NULL(kiln_op_find(g, kiln_intern(g, "InternedLater")));
    CU_ASSERT_STRING_EQUAL(kiln_op_plugin(g, s), "com.acme.ops");
    kiln_node_id a = kiln_graph_add_node(g, "a", "AcmeSource", 0, 1);
    kiln_node_id b = kiln_graph_add_node(g, "b", "AcmeDup", 1, 1);
    kiln_node_id c = kiln_graph_add_node(g, "c", "Unregistered", 1, 1);
    CU_ASSERT_PTR_EQUAL(kiln_node_op_def(g, b), d);
    CU_ASSERT_EQUAL(kiln_node_op_flags(g, a), KILN_OP_DATA_LIKE | KILN_OP_STATEFUL);
    CU_ASSERT_EQUAL(kiln_node_op_flags(g, c), 0u);
    CU_ASSERT_PTR_NULL(kiln_node_op_def(g, c));
    CU_ASSERT_PTR_NULL(kiln_node_op_def(g, 9999));
    /* the component listing shows ops as kind "op" */
    const kiln_component *comp = kiln_registry_find(ctx, KILN_COMP_OP, "AcmeDup");
    CU_ASSERT_PTR_NOT_NULL_FATAL(comp);
    CU_ASSERT_STRING_EQUAL(kiln_component_kind_name(comp->kind), "op");
    char buf[160];
    CU_ASSERT_STRING_EQUAL(kiln_op_describe(d, buf, sizeof(buf)),
                           "com.acme in 1 out 1 elementwise infer fold");
    /* a pass may be named like an op */
    kiln_plugin_desc p2 = plugin("com.acme.pass", samename_init);
    CU_ASSERT_EQUAL(kiln_plugin_register_static(ctx, &p2, NULL, &err), KILN_OK);
    CU_ASSERT_PTR_NOT_NULL(kiln_registry_find(ctx, KILN_COMP_PASS, "AcmeDup"));
    CU_ASSERT_PTR_EQUAL(kiln_op_find(g, s), d);
    kiln_graph_destroy(g);
    kiln_ctx_destroy(ctx);
}

static void test_opreg_duplicate_names_both(void)
{
    kiln_ctx *ctx = kiln_ctx_create();
    kiln_error err;
    kiln_error_clear(&err);
    kiln_plugin_desc p1 = plugin("com.acme.ops", acme_init), p2 = plugin("com.other.ops", clash_init);
    CU_ASSERT_EQUAL_FATAL(kiln_plugin_register_static(ctx, &p1, NULL, &err), KILN_OK);
    CU_ASSERT_EQUAL(kiln_plugin_register_static(ctx, &p2, NULL, &err), KILN_ERR_DUPLICATE);
    const char *msg = kiln_error_message(&err);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "plugin com.other.ops registers op AcmeDup"));
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "plugin com.acme.ops"));
    kiln_graph *g = kiln_graph_create(ctx, "g");
    /* the first registration stands; the failing plugin's other op is rolled back */
    CU_ASSERT_STRING_EQUAL(kiln_op_plugin(g, kiln_sym_lookup(g, "AcmeDup")), "com.acme.ops");
    CU_ASSERT_PTR_NULL(kiln_op_find_str(g, "ClashFresh"));
    CU_ASSERT_PTR_NULL(kiln_registry_find(ctx, KILN_COMP_OP, "ClashFresh"));
    kiln_graph_destroy(g);
    kiln_ctx_destroy(ctx);
}

static void test_opreg_malformed_defs(void)
{
    static const struct {
        kiln_status code;
        const char *frag;
    } want[] = {
        {KILN_ERR_INVALID, "plugin com.bad registers an op without a type"},
        {KILN_ERR_INVALID, "plugin com.bad: op BadOp has a bad arity range (inputs 3..2"},
        {KILN_ERR_VERSION, "op descriptor struct_size 8 is smaller than"},
        {KILN_ERR_INVALID, "op BadOp is data-like but requires 1 inputs"},
    };
    for (bad_case = 0; bad_case < 4; bad_case++) {
        kiln_ctx *ctx = kiln_ctx_create();
        kiln_error err;
        kiln_error_clear(&err);
        kiln_plugin_desc p = plugin("com.bad", bad_init);
        CU_ASSERT_EQUAL(kiln_plugin_register_static(ctx, &p, NULL, &err), want[bad_case].code);
        const char *msg = kiln_error_message(&err);
        if (!strstr(msg, want[bad_case].frag))
            fprintf(stderr, "\ncase %d: %s\n", bad_case, msg);
        CU_ASSERT_PTR_NOT_NULL(strstr(msg, want[bad_case].frag));
        CU_ASSERT_EQUAL(kiln_registry_plugin_count(ctx), 0u);
        kiln_ctx_destroy(ctx);
    }
}

/* The ONNX op set: every op type of the models, with flags and inference. */
static void test_opreg_onnx_opset(void)
{
    kiln_ctx *ctx = kiln_ctx_create();
    kiln_error err;
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(kiln_test_load_plugin(ctx, "libkiln_onnx_ops.so", &err), KILN_OK);
    kiln_graph *g = kiln_graph_create(ctx, "g");
    static const char *const with_infer[] = {
        "Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Sum", "Equal", "Greater", "Less",
        "GreaterOrEqual", "LessOrEqual", "Relu", "Sigmoid", "Sqrt", "Log", "Neg", "LeakyRelu",
        "HardSigmoid", "Clip", "Softmax", "Identity", "Exp", "Tanh", "Abs", "Not", "Cast",
        "ReduceMax", "ReduceMean", "ReduceMin", "ReduceSum", "Conv", "ConvTranspose", "MaxPool",
        "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "Gemm", "MatMul",
        "BatchNormalization", "LSTM", "Resize", "Upsample", "Const", "Constant",
        "ConstantOfShape", "Shape", "Size", "Reshape", "Flatten", "Gather", "Concat", "Slice",
        "Squeeze", "Unsqueeze", "Transpose", "Pad"};
    for (size_t i = 0; i < sizeof(with_infer) / sizeof(with_infer[0]); i++) {
        const kiln_op_def *d = kiln_op_find_str(g, with_infer[i]);
        if (!d || !d->infer)
            fprintf(stderr, "\nop %s: %s\n", with_infer[i], d ? "no inference" : "not registered");
        CU_ASSERT(d && d->infer);
    }
    CU_ASSERT_EQUAL(kiln_op_find_str(g, "Add")->flags, KILN_OP_ELEMENTWISE | KILN_OP_COMMUTATIVE);
    CU_ASSERT_EQUAL(kiln_op_find_str(g, "Sub")->flags & KILN_OP_COMMUTATIVE, 0u);
    CU_ASSERT(kiln_op_find_str(g, "Const")->flags & KILN_OP_DATA_LIKE);
    CU_ASSERT(kiln_op_find_str(g, "Constant")->flags & KILN_OP_CONSTANT);
    CU_ASSERT(kiln_op_find_str(g, "Data")->flags & KILN_OP_DATA_LIKE);
    CU_ASSERT(kiln_op_find_str(g, "Variable")->flags & KILN_OP_DATA_LIKE);
    CU_ASSERT(kiln_op_find_str(g, "Variable")->flags & KILN_OP_STATEFUL);
    CU_ASSERT(kiln_op_find_str(g, "Shape")->flags & KILN_OP_SHAPE_ONLY);
    CU_ASSERT(kiln_op_find_str(g, "If")->flags & KILN_OP_CONTROL_FLOW);
    CU_ASSERT(kiln_op_find_str(g, "While")->flags & KILN_OP_CONTROL_FLOW);
    CU_ASSERT(kiln_op_find_str(g, "Assign")->flags & KILN_OP_REFERENCE);
    CU_ASSERT(kiln_op_find_str(g, "LSTM")->flags & KILN_OP_NO_FOLD);
    CU_ASSERT(kiln_op_find_str(g, "NetOutput")->flags & KILN_OP_GRAPH_OUTPUT);
    CU_ASSERT_EQUAL(kiln_op_find_str(g, "Concat")->max_inputs, KILN_OP_VARIADIC);
    CU_ASSERT_PTR_NOT_NULL(kiln_op_find_str(g, "Add")->fold);
    CU_ASSERT_PTR_NULL(kiln_op_find_str(g, "LSTM")->fold);
    CU_ASSERT_STRING_EQUAL(kiln_op_find_str(g, "Add")->domain, "ai.onnx");
    CU_ASSERT_STRING_EQUAL(kiln_op_plugin(g, kiln_sym_lookup(g, "Add")), "kiln.onnx_ops");
    kiln_graph_destroy(g);
    kiln_ctx_destroy(ctx);
}

/* InferShapes (libkiln_onnx_ops.so) runs a custom op's inference and folding. */
static const char *const custom_graph =
    "{\"kiln_graph\":1,\"name\":\"t\",\"nodes\":["
    "{\"name\":\"x\",\"type\":\"Data\",\"attrs\":{\"index\":0},"
    " \"outputs\":[{\"dtype\":\"float32\",\"shape\":[2,3]}]},"
    "{\"name\":\"d\",\"type\":\"AcmeDup\",\"inputs\":[\"x:0\"],\"outputs\":[{}]},"
    "{\"name\":\"r\",\"type\":\"Relu\",\"inputs\":[\"d:0\"],\"outputs\":[{}]},"
    "{\"name\":\"k\",\"type\":\"Const\",\"outputs\":[{}],\"attrs\":{\"value\":{\"type\":"
    "\"tensor\",\"value\":{\"dtype\":\"int64\",\"shape\":[1,2],\"data\":[7,9]}}}},"
    "{\"name\":\"kd\",\"type\":\"AcmeDup\",\"inputs\":[\"k:0\"],\"outputs\":[{}]},"
    "{\"name\":\"bad\",\"type\":\"AcmeDup\",\"inputs\":[\"x:0\",\"x:0\"],\"outputs\":[{}]},"
    "{\"name\":\"out\",\"type\":\"NetOutput\",\"inputs\":[\"r:0\",\"kd:0\"]}]}";

static kiln_status run_infer(kiln_ctx *ctx, kiln_graph *g, kiln_error *err)
{
    kiln_pass_inst pi;
    memset(&pi, 0, sizeof(pi));
    pi.comp = kiln_registry_find(ctx, KILN_COMP_PASS, "InferShapes");
    CU_ASSERT_PTR_NOT_NULL_FATAL(pi.comp);
    pi.enabled = true;
    kiln_passmgr *pm = NULL;
    CU_ASSERT_EQUAL_FATAL(kiln__passmgr_create(ctx, NULL, &pm, err), KILN_OK);
    kiln_status st = kiln__passmgr_run_stage(pm, "prepare", &pi, 1, g, err);
    kiln__passmgr_destroy(pm);
    return st;
}

static void test_opreg_infer_custom_op(void)
{
    kiln_ctx *ctx = kiln_ctx_create();
    kiln_error err;
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(kiln_test_load_plugin(ctx, "libkiln_onnx_ops.so", &err), KILN_OK);
    kiln_plugin_desc p = plugin("com.acme.ops", acme_init);
    CU_ASSERT_EQUAL_FATAL(kiln_plugin_register_static(ctx, &p, NULL, &err), KILN_OK);
    kiln_graph *g = NULL;
    CU_ASSERT_EQUAL_FATAL(
        kiln_graph_read_json_string(ctx, custom_graph, strlen(custom_graph), "t", &g, &err),
        KILN_OK);
    /* node "bad" has 2 inputs: AcmeDup takes 1 */
    CU_ASSERT_EQUAL(run_infer(ctx, g, &err), KILN_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(kiln_error_message(&err),
                                  "node bad (AcmeDup): has 2 inputs, but op AcmeDup (registered "
                                  "by com.acme.ops) takes 1"));
    kiln_graph_remove_node(g, kiln_graph_find_node(g, "bad"));
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(run_infer(ctx, g, &err), KILN_OK);
    const kiln_tensor_desc *d = kiln_node_output_desc(g, kiln_graph_find_node(g, "d"), 0);
    CU_ASSERT_EQUAL(kiln_desc_rank(d), 2);
    CU_ASSERT_EQUAL(kiln_desc_dims(d)[0], 2);
    CU_ASSERT_EQUAL(kiln_desc_dims(d)[1], 6);
    d = kiln_node_output_desc(g, kiln_graph_find_node(g, "r"), 0);
    CU_ASSERT_EQUAL(kiln_desc_dims(d)[1], 6); /* flows on through Relu */
    /* kd had a known input and no engine kernel: folded by the op's fold function */
    kiln_node_id kd = kiln_graph_find_node(g, "kd");
    CU_ASSERT_STRING_EQUAL(kiln_node_op_str(g, kd), "Const");
    kiln_tensor_value t;
    CU_ASSERT_FATAL(kiln_attrs_get_tensor(kiln_node_attrs(g, kd), "value", &t));
    CU_ASSERT_EQUAL_FATAL(t.nbytes, 4 * sizeof(int64_t));
    const int64_t *v = t.data;
    CU_ASSERT(v[0] == 7 && v[1] == 9 && v[2] == 7 && v[3] == 9);
    kiln_graph_destroy(g);
    kiln_ctx_destroy(ctx);
}

/* An engine that owns AcmeDup: its kernel writes 42 everywhere. */
static kiln_status k42(void *state, const kiln_kernel_args *a, kiln_error *err)
{
    (void)state;
    (void)err;
    int64_t *o = a->outputs[0].data;
    for (size_t i = 0; i < a->outputs[0].nbytes / sizeof(int64_t); i++)
        o[i] = 42;
    return KILN_OK;
}
static int kernels_bound, kernels_released;
static kiln_status k42_create(void *inst, const kiln_graph *g, kiln_node_id n, kiln_kernel_fn *fn,
                              void **state, kiln_error *err)
{
    (void)inst;
    (void)g;
    (void)n;
    (void)err;
    *fn = k42;
    *state = &kernels_bound;
    kernels_bound++;
    return KILN_OK;
}
static void k42_destroy(void *inst, void *state)
{
    (void)inst;
    (void)state;
    kernels_released++;
}
static kiln_status engine_init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)h;
    (void)e;
    static const kiln_op_info ops[] = {{sizeof(kiln_op_info), "AcmeDup", 0, NULL, 0}};
    static const kiln_engine_desc d = {.struct_size = sizeof(kiln_engine_desc),
                                       .name = "acme_npu",
                                       .op_count = 1,
                                       .ops = ops,
                                       .kernel_create = k42_create,
                                       .kernel_destroy = k42_destroy};
    return kiln_register_engine(r, &d);
}

/* Folding binds the kernel of whichever engine owns the op (kiln_engine_kernel)
 * before the op's own fold function. */
static void test_opreg_fold_with_engine_kernel(void)
{
    kiln_ctx *ctx = kiln_ctx_create();
    kiln_error err;
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(kiln_test_load_plugin(ctx, "libkiln_onnx_ops.so", &err), KILN_OK);
    kiln_plugin_desc p = plugin("com.acme.ops", acme_init), e = plugin("com.acme.npu", engine_init);
    CU_ASSERT_EQUAL_FATAL(kiln_plugin_register_static(ctx, &p, NULL, &err), KILN_OK);
    CU_ASSERT_EQUAL_FATAL(kiln_plugin_register_static(ctx, &e, NULL, &err), KILN_OK);
    kiln_graph *g = NULL;
    CU_ASSERT_EQUAL_FATAL(
        kiln_graph_read_json_string(ctx, custom_graph, strlen(custom_graph), "t", &g, &err),
        KILN_OK);
    kiln_graph_remove_node(g, kiln_graph_find_node(g, "bad"));
    kernels_bound = kernels_released = 0;
    CU_ASSERT_EQUAL_FATAL(run_infer(ctx, g, &err), KILN_OK);
    kiln_node_id kd = kiln_graph_find_node(g, "kd");
    CU_ASSERT_STRING_EQUAL(kiln_node_op_str(g, kd), "Const");
    kiln_tensor_value t;
    CU_ASSERT_FATAL(kiln_attrs_get_tensor(kiln_node_attrs(g, kd), "value", &t));
    CU_ASSERT_EQUAL_FATAL(t.nbytes, 4 * sizeof(int64_t));
    const int64_t *v = t.data;
    CU_ASSERT(v[0] == 42 && v[1] == 42 && v[2] == 42 && v[3] == 42);
    CU_ASSERT_EQUAL(kernels_bound, 1);
    CU_ASSERT_EQUAL(kernels_released, 1);
    kiln_graph_destroy(g);
    kiln_ctx_destroy(ctx);
}

/* Lookups are O(1): a million by symbol cost about as much as a few hash probes. */
static void test_opreg_lookup_many(void)
{
    kiln_ctx *ctx = kiln_ctx_create();
    kiln_error err;
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(kiln_test_load_plugin(ctx, "libkiln_onnx_ops.so", &err), KILN_OK);
    kiln_graph *g = kiln_graph_create(ctx, "g");
    kiln_sym syms[4] = {kiln_sym_lookup(g, "Add"), kiln_sym_lookup(g, "Const"),
                        kiln_sym_lookup(g, "Data"), kiln_intern(g, "Nope")};
    uint32_t hits = 0;
    for (uint32_t i = 0; i < 1000000; i++)
        hits += kiln_op_find(g, syms[i & 3]) != NULL;
    CU_ASSERT_EQUAL(hits, 750000u);
    kiln_graph_destroy(g);
    kiln_ctx_destroy(ctx);
}

int main(void)
{
    static const kiln_test_case cases[] = {
        {"register and find", test_opreg_register_and_find},
        {"duplicate op names both plugins", test_opreg_duplicate_names_both},
        {"malformed defs", test_opreg_malformed_defs},
        {"onnx op set", test_opreg_onnx_opset},
        {"InferShapes runs a custom op", test_opreg_infer_custom_op},
        {"folding binds the owning engine's kernel", test_opreg_fold_with_engine_kernel},
        {"lookup by symbol", test_opreg_lookup_many},
        {NULL, NULL}};
    return kiln_test_run("opreg", cases);
}

/*
 * test_engine.c - binding kernels to nodes: engine choice by op table and
 * priority, the `_kiln_engine` placement attribute, supports(), instances,
 * and the errors for unsupported ops and unknown engines; the compiler hooks
 * (optimize_original_graph / optimize_subgraph / optimize_whole_graph in
 * priority order, calc_op_running_param and generate_task with the host's
 * checks) through tests/plugins/tp_engine.c; formats in the op table; and
 * malformed engine op tables refused at registration.
 */
#include "kiln_test.h"
#include "graph_int.h"
#include "plugin.h"

static int creates, destroys;

static kiln_status relu_kernel(void *state, const kiln_kernel_args *a, kiln_error *err)
{
    (void)err;
    const float *x = a->inputs[0].data;
    float *y = a->outputs[0].data;
    for (size_t i = 0; i < a->inputs[0].nbytes / 4; i++)
        y[i] = x[i] > 0 ? x[i] : 0;
    *(int *)state += 1;
    return KILN_OK;
}

static kiln_status e_create(const kiln_options *o, kiln_error *e, void **inst)
{
    (void)o;
    (void)e;
    creates++;
    *inst = &creates;
    return KILN_OK;
}
static void e_destroy(void *inst)
{
    CU_ASSERT_PTR_EQUAL(inst, &creates);
    destroys++;
}
static kiln_status k_create(void *inst, const kiln_graph *g, kiln_node_id n, kiln_kernel_fn *fn,
                            void **state, kiln_error *err)
{
    (void)g;
    (void)n;
    (void)err;
    CU_ASSERT_PTR_EQUAL(inst, &creates);
    *fn = relu_kernel;
    *state = calloc(1, sizeof(int));
    return KILN_OK;
}
static void k_destroy(void *inst, void *state)
{
    (void)inst;
    free(state);
}
static bool refuse_big(void *inst, const kiln_graph *g, kiln_node_id n)
{
    (void)inst;
    /* supports only nodes whose name does not start with "big" */
    return strncmp(kiln_node_name_str(g, n), "big", 3) != 0;
}

static const kiln_op_info ops[] = {{sizeof(kiln_op_info), "Relu", 1u << KILN_DT_FLOAT32, NULL, 0}};

static kiln_status init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)h;
    (void)e;
    static const kiln_engine_desc low = {.struct_size = sizeof(kiln_engine_desc),
                                         .name = "low", .priority = 1, .op_count = 1,
                                         .ops = ops, .create = e_create, .destroy = e_destroy,
                                         .kernel_create = k_create, .kernel_destroy = k_destroy};
    static const kiln_engine_desc high = {.struct_size = sizeof(kiln_engine_desc),
                                          .name = "high", .priority = 5, .op_count = 1,
                                          .ops = ops, .supports = refuse_big,
                                          .kernel_create = k_create,
                                          .kernel_destroy = k_destroy};
    kiln_status st = kiln_register_engine(r, &low);
    return st ? st : kiln_register_engine(r, &high);
}

static void test_engine_choice_and_kernels(void)
{
    creates = destroys = 0;
    kiln_ctx *ctx = kiln_ctx_create();
    kiln_error err;
    kiln_error_clear(&err);
    kiln_plugin_desc pd = {sizeof(pd), KILN_ABI_MAJOR, KILN_ABI_MINOR, "engines", "1", "MIT",
                           "t", "t", init, NULL, {0}};
    CU_ASSERT_EQUAL_FATAL(kiln_plugin_register_static(ctx, &pd, NULL, &err), KILN_OK);
    kiln_graph *g = kiln_graph_create(ctx, "g");
    kiln_node_id r = kiln_graph_add_node(g, "relu", "Relu", 1, 1);
    kiln_node_id big = kiln_graph_add_node(g, "big_relu", "Relu", 1, 1);
    kiln_node_id pinned = kiln_graph_add_node(g, "pinned", "Relu", 1, 1);
    kiln_node_id conv = kiln_graph_add_node(g, "conv", "Conv", 2, 1);
    kiln_node_id lost = kiln_graph_add_node(g, "lost", "Relu", 1, 1);
    kiln_attrs_set_string(kiln_node_attrs_mut(g, pinned), "_kiln_engine", "low");
    kiln_attrs_set_string(kiln_node_attrs_mut(g, lost), "_kiln_engine", "gpu");
    /* highest priority wins; supports() can decline; placement is honoured */
    CU_ASSERT_STRING_EQUAL(kiln_engine_for_node(g, r), "high");
    CU_ASSERT_STRING_EQUAL(kiln_engine_for_node(g, big), "low");
    CU_ASSERT_STRING_EQUAL(kiln_engine_for_node(g, pinned), "low");
    CU_ASSERT_PTR_NULL(kiln_engine_for_node(g, conv));
    /* a bound kernel really runs */
    kiln_kernel_fn fn;
    void *state;
    const char *engine;
    CU_ASSERT_EQUAL_FATAL(kiln_engine_kernel(g, pinned, &fn, &state, &engine, &err), KILN_OK);
    CU_ASSERT_STRING_EQUAL(engine, "low");
    CU_ASSERT_EQUAL(creates, 1); /* the low engine's instance, created on first use */
    float x[4] = {-1, 2, -3, 4}, y[4];
    int64_t dims[] = {4};
    kiln_tensor in = {KILN_DT_FLOAT32, 1, dims, x, sizeof(x)}, out = {KILN_DT_FLOAT32, 1, dims, y,
                                                                       sizeof(y)};
    kiln_kernel_args a = {sizeof(a), g, pinned, 1, 1, &in, &out, NULL, 0, 1};
    CU_ASSERT_EQUAL(fn(state, &a, &err), KILN_OK);
    CU_ASSERT(y[0] == 0 && y[1] == 2 && y[3] == 4);
    CU_ASSERT_EQUAL(*(int *)state, 1);
    kiln_engine_kernel_release(g, engine, state);
    /* errors name the node and the op / the engine */
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(kiln_engine_kernel(g, conv, &fn, &state, NULL, &err), KILN_ERR_UNSUPPORTED);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "node conv: no loaded engine supports op Conv"));
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(kiln_engine_kernel(g, lost, &fn, &state, NULL, &err), KILN_ERR_NOT_FOUND);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "engine 'gpu'"));
    kiln_graph_destroy(g);
    kiln_ctx_destroy(ctx);
    CU_ASSERT_EQUAL(destroys, 1);
}

/* ---- compiler hooks (tp_engine) ------------------------------------------------ */

static kiln_ctx *load_tp_engine(kiln_error *err)
{
    kiln_ctx *ctx = kiln_ctx_create();
    char path[1024];
    const char *dir = getenv("KILN_TEST_PLUGIN_DIR");
    snprintf(path, sizeof(path), "%s/libtp_engine.so", dir ? dir : "tests/plugins");
    CU_ASSERT_EQUAL_FATAL(kiln_plugin_load(ctx, path, NULL, err), KILN_OK);
    return ctx;
}

static const char *calls(kiln_graph *g)
{
    const char *s = "";
    kiln_attrs_get_string(kiln_graph_attrs(g), "tp_engine_calls", &s);
    return s;
}

static void test_engine_graph_hooks(void)
{
    kiln_error err;
    kiln_error_clear(&err);
    kiln_ctx *ctx = load_tp_engine(&err);
    kiln_graph *g = kiln_graph_create(ctx, "root");
    /* priority order, not registration order; engines without the hook skipped */
    CU_ASSERT_EQUAL(kiln_engines_optimize_original(NULL, g, &err), KILN_OK);
    CU_ASSERT_STRING_EQUAL(calls(g), "tp_first:original;tp_second:original;");
    CU_ASSERT_EQUAL(kiln_engines_optimize_whole(NULL, g, &err), KILN_OK);
    CU_ASSERT_STRING_EQUAL(calls(g), "tp_first:original;tp_second:original;tp_first:whole;"
                                     "tp_second:whole;");
    kiln_graph *sub = kiln_graph_create(ctx, "sub");
    CU_ASSERT_EQUAL(kiln_engine_optimize_subgraph("tp_first", NULL, sub, &err), KILN_OK);
    CU_ASSERT_EQUAL(kiln_engine_optimize_subgraph("tp_second", NULL, sub, &err), KILN_OK);
    CU_ASSERT_STRING_EQUAL(calls(sub), "tp_first:subgraph;"); /* tp_second has none */
    CU_ASSERT_EQUAL(kiln_engine_optimize_subgraph("gpu", NULL, sub, &err), KILN_ERR_NOT_FOUND);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "engine 'gpu'"));
    kiln_graph_destroy(sub);
    kiln_graph_destroy(g);
    kiln_ctx_destroy(ctx);
}

static void test_engine_running_param_and_task(void)
{
    kiln_error err;
    kiln_error_clear(&err);
    kiln_ctx *ctx = load_tp_engine(&err);
    kiln_graph *g = kiln_graph_create(ctx, "g");
    kiln_node_id r = kiln_graph_add_node(g, "r", "Relu", 1, 2);
    kiln_tensor_desc *d = kiln_node_output_desc(g, r, 0);
    static const int64_t dims[] = {2, 3};
    kiln_desc_set_dtype(g, d, KILN_DT_FLOAT32);
    kiln_desc_set_shape(g, d, 2, dims);
    kiln_desc_set_dtype(g, kiln_node_output_desc(g, r, 1), KILN_DT_FLOAT32);
    static const int64_t dyn[] = {-1};
    kiln_desc_set_shape(g, kiln_node_output_desc(g, r, 1), 1, dyn);
    int64_t sizes[2];
    kiln_running_param rp = {.struct_size = sizeof(rp), .output_sizes = sizes};
    const char *engine = NULL;
    CU_ASSERT_EQUAL_FATAL(kiln_engine_running_param(g, r, &rp, &engine, &err), KILN_OK);
    CU_ASSERT_STRING_EQUAL(engine, "tp_first");
    CU_ASSERT_EQUAL(rp.output_count, 2);
    CU_ASSERT_EQUAL(sizes[0], 6 * 4 + 32); /* descriptor size, raised by the engine */
    CU_ASSERT_EQUAL(sizes[1], -1);         /* dynamic */
    CU_ASSERT_EQUAL(rp.workspace_count, 1);
    CU_ASSERT_EQUAL(rp.workspace_sizes[0], 64);
    /* a kernel task with the engine's argument blob and the node's stream */
    kiln_attrs_set_int(kiln_node_attrs_mut(g, r), "_kiln_stream_id", 3);
    uint8_t args[16];
    kiln_task_desc t = {.struct_size = sizeof(t), .args = args, .args_capacity = sizeof(args)};
    CU_ASSERT_EQUAL_FATAL(kiln_engine_generate_task(g, r, &t, &engine, &err), KILN_OK);
    CU_ASSERT_EQUAL(t.kind, KILN_TASK_KERNEL);
    CU_ASSERT_STRING_EQUAL(t.kernel_name, "tp.Relu");
    CU_ASSERT_EQUAL(t.stream_id, 3);
    CU_ASSERT_EQUAL(t.args_size, 4);
    uint32_t nout;
    memcpy(&nout, args, 4);
    CU_ASSERT_EQUAL(nout, 2);
    /* placed on tp_second, which has neither hook: host defaults */
    kiln_attrs_set_string(kiln_node_attrs_mut(g, r), "_kiln_engine", "tp_second");
    CU_ASSERT_EQUAL(kiln_engine_running_param(g, r, &rp, &engine, &err), KILN_OK);
    CU_ASSERT_STRING_EQUAL(engine, "tp_second");
    CU_ASSERT_EQUAL(sizes[0], 24);
    CU_ASSERT_EQUAL(rp.workspace_count, 0);
    CU_ASSERT_EQUAL(kiln_engine_generate_task(g, r, &t, NULL, &err), KILN_OK);
    CU_ASSERT_EQUAL(t.kind, KILN_TASK_KERNEL);
    CU_ASSERT_STRING_EQUAL(t.kernel_name, "tp_second.Relu");
    CU_ASSERT_EQUAL(t.args_size, 0);
    /* what the engine returns is checked, errors name the engine and the node */
    kiln_attrs_set_string(kiln_node_attrs_mut(g, r), "_kiln_engine", "tp_first");
    kiln_attrs_set_int(kiln_node_attrs_mut(g, r), "tp_bad", 1);
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(kiln_engine_running_param(g, r, &rp, NULL, &err), KILN_ERR_INTERNAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "99 workspaces"));
    char text[1024];
    kiln_error_format(&err, text, sizeof(text));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "engine tp_first: calc_op_running_param of node r (Relu)"));
    kiln_attrs_set_int(kiln_node_attrs_mut(g, r), "tp_bad", 2);
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(kiln_engine_generate_task(g, r, &t, NULL, &err), KILN_ERR_INTERNAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "task kind 1000"));
    /* bad arguments */
    kiln_running_param small = {.struct_size = 4};
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(kiln_engine_running_param(g, r, &small, NULL, &err), KILN_ERR_INVALID);
    kiln_running_param nobuf = {.struct_size = sizeof(nobuf)};
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(kiln_engine_running_param(g, r, &nobuf, NULL, &err), KILN_ERR_INVALID);
    kiln_graph_destroy(g);
    kiln_ctx_destroy(ctx);
}

/* Formats: tp_first lists Add for ND and NCHW only. */
static void test_engine_formats(void)
{
    kiln_error err;
    kiln_error_clear(&err);
    kiln_ctx *ctx = load_tp_engine(&err);
    kiln_graph *g = kiln_graph_create(ctx, "g");
    kiln_node_id a = kiln_graph_add_node(g, "a", "Add", 2, 1);
    kiln_desc_set_dtype(g, kiln_node_output_desc(g, a, 0), KILN_DT_FLOAT32);
    CU_ASSERT_STRING_EQUAL(kiln_engine_for_node(g, a), "tp_first"); /* no format: any */
    kiln_desc_set_format(g, kiln_node_output_desc(g, a, 0), "NCHW");
    CU_ASSERT_STRING_EQUAL(kiln_engine_for_node(g, a), "tp_first");
    kiln_desc_set_format(g, kiln_node_output_desc(g, a, 0), "NHWC");
    CU_ASSERT_PTR_NULL(kiln_engine_for_node(g, a));
    kiln_desc_set_format(g, kiln_node_output_desc(g, a, 0), "NC");
    CU_ASSERT_PTR_NULL(kiln_engine_for_node(g, a)); /* a prefix of a listed format is not it */
    kiln_graph_destroy(g);
    kiln_ctx_destroy(ctx);
}

/* ---- malformed op tables ---------------------------------------------------------- */

static const kiln_op_info *bad_ops;
static uint32_t bad_count;

static kiln_status bad_init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)h;
    (void)e;
    const kiln_engine_desc d = {.struct_size = sizeof(kiln_engine_desc), .name = "bad",
                                .op_count = bad_count, .ops = bad_ops};
    return kiln_register_engine(r, &d);
}

/* Register engine "bad" with @p ops; the error message, or NULL when accepted. */
static const char *register_bad(const kiln_op_info *table, uint32_t n, kiln_status want)
{
    static char msg[512];
    bad_ops = table;
    bad_count = n;
    kiln_ctx *ctx = kiln_ctx_create();
    kiln_error err;
    kiln_error_clear(&err);
    kiln_plugin_desc pd = {sizeof(pd), KILN_ABI_MAJOR, KILN_ABI_MINOR, "vendor.bad", "1", "MIT",
                           "t", "t", bad_init, NULL, {0}};
    kiln_status st = kiln_plugin_register_static(ctx, &pd, NULL, &err);
    CU_ASSERT_EQUAL(st, want);
    snprintf(msg, sizeof(msg), "%s", st == KILN_OK ? "" : kiln_error_message(&err));
    CU_ASSERT_EQUAL(kiln_registry_find(ctx, KILN_COMP_ENGINE, "bad") != NULL, st == KILN_OK);
    kiln_ctx_destroy(ctx);
    return msg;
}

static void test_engine_bad_tables(void)
{
    const uint32_t f32 = 1u << KILN_DT_FLOAT32, sz = sizeof(kiln_op_info);
    const kiln_op_info good[] = {{sz, "Relu", f32, NULL, 0}, {sz, "Add", 0, "ND", 0}};
    CU_ASSERT_STRING_EQUAL(register_bad(good, 2, KILN_OK), "");
    const kiln_op_info null_type[] = {{sz, "Relu", f32, NULL, 0}, {sz, NULL, f32, NULL, 0}};
    const char *m = register_bad(null_type, 2, KILN_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(m, "engine bad"));
    CU_ASSERT_PTR_NOT_NULL(strstr(m, "plugin vendor.bad"));
    CU_ASSERT_PTR_NOT_NULL(strstr(m, "entry 1 has no op type"));
    const kiln_op_info empty_type[] = {{sz, "", f32, NULL, 0}};
    CU_ASSERT_PTR_NOT_NULL(strstr(register_bad(empty_type, 1, KILN_ERR_INVALID), "no op type"));
    const kiln_op_info small[] = {{8, "Relu", f32, NULL, 0}};
    m = register_bad(small, 1, KILN_ERR_VERSION);
    CU_ASSERT_PTR_NOT_NULL(strstr(m, "struct_size 8, smaller than the ABI 1.0 minimum"));
    const kiln_op_info mixed[] = {{sz, "Relu", f32, NULL, 0}, {sz + 8, "Add", f32, NULL, 0}};
    CU_ASSERT_PTR_NOT_NULL(strstr(register_bad(mixed, 2, KILN_ERR_INVALID), "entry 1 has struct_size"));
    const kiln_op_info dup[] = {{sz, "Relu", f32, NULL, 0}, {sz, "Add", f32, NULL, 0},
                                {sz, "Relu", 0, NULL, 0}};
    m = register_bad(dup, 3, KILN_ERR_DUPLICATE);
    CU_ASSERT_PTR_NOT_NULL(strstr(m, "op Relu is listed twice"));
    const kiln_op_info mask[] = {{sz, "Relu", 1u << 31, NULL, 0}};
    m = register_bad(mask, 1, KILN_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(m, "op Relu has dtype mask 0x80000000"));
    CU_ASSERT_PTR_NOT_NULL(strstr(register_bad(NULL, 3, KILN_ERR_INVALID), "ops is NULL"));
}

/* A table built against newer headers (bigger entries) is read with its own stride. */
typedef struct newer_op_info {
    kiln_op_info base;
    uint64_t future_field;
} newer_op_info;

static void test_engine_newer_table(void)
{
    static const newer_op_info newer[] = {
        {{sizeof(newer_op_info), "Relu", 1u << KILN_DT_FLOAT32, NULL, 0}, 77},
        {{sizeof(newer_op_info), "Add", 1u << KILN_DT_FLOAT32, NULL, 0}, 78},
    };
    bad_ops = &newer[0].base;
    bad_count = 2;
    kiln_ctx *ctx = kiln_ctx_create();
    kiln_error err;
    kiln_error_clear(&err);
    kiln_plugin_desc pd = {sizeof(pd), KILN_ABI_MAJOR, KILN_ABI_MINOR, "vendor.new", "1", "MIT",
                           "t", "t", bad_init, NULL, {0}};
    CU_ASSERT_EQUAL_FATAL(kiln_plugin_register_static(ctx, &pd, NULL, &err), KILN_OK);
    const kiln_component *c = kiln_registry_find(ctx, KILN_COMP_ENGINE, "bad");
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL(c->d.engine.op_count, 2);
    CU_ASSERT_STRING_EQUAL(c->d.engine.ops[1].op_type, "Add");
    CU_ASSERT_EQUAL(c->d.engine.ops[1].struct_size, sizeof(kiln_op_info));
    kiln_ctx_destroy(ctx);
}

int main(void)
{
    static const kiln_test_case cases[] = {
        {"test_engine_choice_and_kernels", test_engine_choice_and_kernels},
        {"test_engine_graph_hooks", test_engine_graph_hooks},
        {"test_engine_running_param_and_task", test_engine_running_param_and_task},
        {"test_engine_formats", test_engine_formats},
        {"test_engine_bad_tables", test_engine_bad_tables},
        {"test_engine_newer_table", test_engine_newer_table},
        {NULL, NULL},
    };
    return kiln_test_run("engine", cases);
}

/*
 * test_engine.c - binding kernels to nodes: engine choice by op table and
 * priority, the `_kiln_engine` placement attribute, supports(), instances,
 * and the errors for unsupported ops and unknown engines.
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

int main(void)
{
    static const kiln_test_case cases[] = {
        {"test_engine_choice_and_kernels", test_engine_choice_and_kernels},
        {NULL, NULL},
    };
    return kiln_test_run("engine", cases);
}

/*
 * test_engines_builtin.c - the built-in engines as a set (docs/engines.md):
 * libkiln_aicore.so, libkiln_vector.so, libkiln_hostcpu.so and
 * libkiln_rts.so loaded together.  Their op tables are disjoint, their
 * priorities ordered aicore > vector > rts > hostcpu, every op lands on the
 * engine the documentation says; the rts kernels copy (MemcpyAsync), do
 * nothing on one stream (Send, Recv, StreamActive) or refuse (StreamSwitch);
 * generate_task gives each engine's kernel tasks "<engine>.<op>" and the rts
 * nodes their copy / event / stream tasks with the ids of their attributes;
 * calc_op_running_param keeps the descriptor sizes.
 */
#include "kiln_test.h"
#include "graph_int.h"
#include "plugin.h"

static const char *const plugins[] = {"libkiln_aicore.so", "libkiln_vector.so",
                                      "libkiln_hostcpu.so", "libkiln_rts.so"};

static kiln_ctx *load_all(void)
{
    kiln_ctx *ctx = kiln_ctx_create();
    kiln_error err;
    kiln_error_clear(&err);
    for (unsigned i = 0; i < KILN_ARRAY_LEN(plugins); i++)
        CU_ASSERT_EQUAL_FATAL(kiln_test_load_plugin(ctx, plugins[i], &err), KILN_OK);
    return ctx;
}

static void test_builtin_tables(void)
{
    kiln_ctx *ctx = load_all();
    static const struct {
        const char *name;
        int32_t priority;
    } want[] = {{"aicore", 40}, {"vector", 30}, {"rts", 20}, {"hostcpu", 10}};
    const kiln_engine_desc *e[4];
    for (unsigned i = 0; i < 4; i++) {
        const kiln_component *c = kiln_registry_find(ctx, KILN_COMP_ENGINE, want[i].name);
        CU_ASSERT_PTR_NOT_NULL_FATAL(c);
        e[i] = &c->d.engine;
        CU_ASSERT_EQUAL(e[i]->priority, want[i].priority);
        CU_ASSERT(e[i]->op_count > 0);
        CU_ASSERT_PTR_NOT_NULL(e[i]->kernel_create);
        CU_ASSERT_PTR_NOT_NULL(e[i]->calc_op_running_param);
        CU_ASSERT_PTR_NOT_NULL(e[i]->generate_task);
    }
    /* disjoint: an op type has one owner */
    for (unsigned a = 0; a < 4; a++)
        for (unsigned b = a + 1; b < 4; b++)
            for (uint32_t i = 0; i < e[a]->op_count; i++)
                for (uint32_t j = 0; j < e[b]->op_count; j++)
                    if (strcmp(e[a]->ops[i].op_type, e[b]->ops[j].op_type) == 0) {
                        fprintf(stderr, "%s on %s and %s\n", e[a]->ops[i].op_type, want[a].name,
                                want[b].name);
                        CU_FAIL("an op type listed by two built-in engines");
                    }
    kiln_ctx_destroy(ctx);
}

static void test_builtin_placement(void)
{
    kiln_ctx *ctx = load_all();
    kiln_graph *g = kiln_graph_create(ctx, "g");
    static const struct {
        const char *op;
        kiln_dtype dt;
        const char *engine; /* NULL: no built-in engine */
    } cases[] = {
        {"Conv", KILN_DT_FLOAT32, "aicore"},      {"MatMul", KILN_DT_FLOAT32, "aicore"},
        {"Gemm", KILN_DT_FLOAT32, "aicore"},      {"LSTM", KILN_DT_FLOAT32, "aicore"},
        {"MaxPool", KILN_DT_FLOAT32, "aicore"},   {"BatchNormalization", KILN_DT_FLOAT32, "aicore"},
        {"MatMul", KILN_DT_INT32, NULL},          {"Add", KILN_DT_INT64, "vector"},
        {"Relu", KILN_DT_FLOAT32, "vector"},      {"Cast", KILN_DT_FLOAT16, "vector"},
        {"Softmax", KILN_DT_FLOAT32, "vector"},   {"ReduceMean", KILN_DT_FLOAT32, "vector"},
        {"Equal", KILN_DT_BOOL, "vector"},        {"Shape", KILN_DT_INT64, "hostcpu"},
        {"Reshape", KILN_DT_UINT8, "hostcpu"},    {"Gather", KILN_DT_FLOAT32, "hostcpu"},
        {"Concat", KILN_DT_INT64, "hostcpu"},     {"Identity", KILN_DT_BOOL, "hostcpu"},
        {"Pad", KILN_DT_FLOAT32, "hostcpu"},      {"MemcpyAsync", KILN_DT_FLOAT32, "rts"},
        {"MemcpyAddrAsync", KILN_DT_INT8, "rts"}, {"Send", KILN_DT_FLOAT32, "rts"},
        {"StreamSwitch", KILN_DT_FLOAT32, "rts"}, {"Frobnicate", KILN_DT_FLOAT32, NULL},
    };
    for (unsigned i = 0; i < KILN_ARRAY_LEN(cases); i++) {
        char name[32];
        snprintf(name, sizeof(name), "n%u", i);
        kiln_node_id n = kiln_graph_add_node(g, name, cases[i].op, 1, 1);
        kiln_desc_set_dtype(g, kiln_node_output_desc(g, n, 0), cases[i].dt);
        const char *got = kiln_engine_for_node(g, n);
        if (cases[i].engine ? !got || strcmp(got, cases[i].engine) != 0 : got != NULL) {
            fprintf(stderr, "%s %s: got %s, want %s\n", cases[i].op, kiln_dtype_name(cases[i].dt),
                    got ? got : "none", cases[i].engine ? cases[i].engine : "none");
            CU_FAIL("placement");
        }
    }
    kiln_graph_destroy(g);
    kiln_ctx_destroy(ctx);
}

/* Bind and run node @p n with one input and one output of 4 floats. */
static kiln_status run4(kiln_graph *g, kiln_node_id n, const float *x, float *y,
                        const char **engine, kiln_error *err)
{
    kiln_kernel_fn fn;
    void *state;
    kiln_status st = kiln_engine_kernel(g, n, &fn, &state, engine, err);
    if (st != KILN_OK)
        return st;
    static const int64_t dims[] = {4};
    kiln_tensor in = {KILN_DT_FLOAT32, 1, dims, (void *)(uintptr_t)x, 16};
    kiln_tensor out = {KILN_DT_FLOAT32, 1, dims, y, 16};
    kiln_kernel_args a = {sizeof(a), g, n, 1, 1, &in, &out, NULL, 0, 1};
    st = fn(state, &a, err);
    kiln_engine_kernel_release(g, *engine, state);
    return st;
}

static kiln_node_id node4(kiln_graph *g, const char *name, const char *op)
{
    kiln_node_id n = kiln_graph_add_node(g, name, op, 1, 1);
    static const int64_t dims[] = {4};
    kiln_desc_set_dtype(g, kiln_node_output_desc(g, n, 0), KILN_DT_FLOAT32);
    kiln_desc_set_shape(g, kiln_node_output_desc(g, n, 0), 1, dims);
    return n;
}

static void test_rts_kernels_and_tasks(void)
{
    kiln_ctx *ctx = load_all();
    kiln_graph *g = kiln_graph_create(ctx, "g");
    kiln_error err;
    kiln_error_clear(&err);
    const float x[4] = {1, -2, 3, -4};
    float y[4] = {0};
    const char *engine = NULL;
    /* MemcpyAsync copies */
    kiln_node_id cp = node4(g, "cp", "MemcpyAsync");
    CU_ASSERT_EQUAL(run4(g, cp, x, y, &engine, &err), KILN_OK);
    CU_ASSERT_STRING_EQUAL(engine, "rts");
    CU_ASSERT(memcmp(x, y, sizeof(x)) == 0);
    /* Send / Recv / StreamActive: nothing to do on one stream */
    static const char *const nops[] = {"Send", "Recv", "StreamActive"};
    for (unsigned i = 0; i < 3; i++) {
        float z[4] = {9, 9, 9, 9};
        kiln_node_id n = node4(g, nops[i], nops[i]);
        CU_ASSERT_EQUAL(run4(g, n, x, z, &engine, &err), KILN_OK);
        CU_ASSERT(z[0] == 9 && z[3] == 9);
    }
    /* StreamSwitch needs the multi-stream runtime: refused when bound */
    kiln_node_id sw = node4(g, "sw", "StreamSwitch");
    kiln_attrs_set_list_int(kiln_node_attrs_mut(g, sw), "active_stream_list", (const int64_t[]){5},
                            1);
    CU_ASSERT_EQUAL(run4(g, sw, x, y, &engine, &err), KILN_ERR_UNSUPPORTED);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "sequential runtime runs one stream"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "sw"));
    /* tasks */
    kiln_node_id snd = kiln_graph_find_node(g, "Send"), rcv = kiln_graph_find_node(g, "Recv");
    kiln_attrs_set_list_int(kiln_node_attrs_mut(g, snd), "send_event_ids", (const int64_t[]){7}, 1);
    kiln_attrs_set_list_int(kiln_node_attrs_mut(g, rcv), "recv_event_ids", (const int64_t[]){7}, 1);
    kiln_attrs_set_int(kiln_node_attrs_mut(g, rcv), "_kiln_stream_id", 2);
    static const struct {
        const char *node;
        uint32_t kind;
    } tasks[] = {{"cp", KILN_TASK_MEMCPY},
                 {"Send", KILN_TASK_EVENT_RECORD},
                 {"Recv", KILN_TASK_EVENT_WAIT},
                 {"StreamActive", KILN_TASK_STREAM_ACTIVE},
                 {"sw", KILN_TASK_STREAM_SWITCH}};
    for (unsigned i = 0; i < KILN_ARRAY_LEN(tasks); i++) {
        kiln_task_desc t = {.struct_size = sizeof(t)};
        kiln_error_clear(&err);
        CU_ASSERT_EQUAL(
            kiln_engine_generate_task(g, kiln_graph_find_node(g, tasks[i].node), &t, &engine, &err),
            KILN_OK);
        CU_ASSERT_EQUAL(t.kind, tasks[i].kind);
        CU_ASSERT_PTR_NULL(t.kernel_name);
    }
    kiln_task_desc t = {.struct_size = sizeof(t)};
    CU_ASSERT_EQUAL(kiln_engine_generate_task(g, rcv, &t, NULL, &err), KILN_OK);
    CU_ASSERT_EQUAL(t.event_id, 7);
    CU_ASSERT_EQUAL(t.stream_id, 2);
    CU_ASSERT_EQUAL(kiln_engine_generate_task(g, sw, &t, NULL, &err), KILN_OK);
    CU_ASSERT_EQUAL(t.target_stream_id, 5);
    /* kernel tasks of the other engines; running parameters */
    kiln_node_id relu = node4(g, "relu", "Relu"), id = node4(g, "id", "Identity");
    CU_ASSERT_EQUAL(kiln_engine_generate_task(g, relu, &t, &engine, &err), KILN_OK);
    CU_ASSERT_EQUAL(t.kind, KILN_TASK_KERNEL);
    CU_ASSERT_STRING_EQUAL(t.kernel_name, "vector.Relu");
    CU_ASSERT_EQUAL(kiln_engine_generate_task(g, id, &t, &engine, &err), KILN_OK);
    CU_ASSERT_STRING_EQUAL(t.kernel_name, "hostcpu.Identity");
    int64_t size = 0;
    kiln_running_param rp = {.struct_size = sizeof(rp), .output_sizes = &size};
    CU_ASSERT_EQUAL(kiln_engine_running_param(g, relu, &rp, &engine, &err), KILN_OK);
    CU_ASSERT_EQUAL(size, 16);
    CU_ASSERT_EQUAL(rp.workspace_count, 0);
    CU_ASSERT_STRING_EQUAL(engine, "vector");
    /* Identity runs on hostcpu */
    CU_ASSERT_EQUAL(run4(g, id, x, y, &engine, &err), KILN_OK);
    CU_ASSERT_STRING_EQUAL(engine, "hostcpu");
    kiln_graph_destroy(g);
    kiln_ctx_destroy(ctx);
}

int main(void)
{
    static const kiln_test_case cases[] = {
        {"test_builtin_tables", test_builtin_tables},
        {"test_builtin_placement", test_builtin_placement},
        {"test_rts_kernels_and_tasks", test_rts_kernels_and_tasks},
        {NULL, NULL},
    };
    return kiln_test_run("engines_builtin", cases);
}

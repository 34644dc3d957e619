/*
 * test_engine_opt.c - the aicore engine's fusion passes
 * (plugins/engines/aicore/nn_fusion.c: ConvBatchNormFusionPass,
 * MatMulBiasAddFusionPass, PostActivationFusionPass) run as the builtin
 * fusion stage (kiln_fusion_run_stage, what RunBuiltinFusionPasses does) on
 * graphs built here, with the built-in engines loaded: Conv +
 * BatchNormalization folded into new Const weights and bias of the expected
 * values, Conv + Relu fused as _kiln_fused_activation, MatMul + Add(Const)
 * turned into a Gemm; and the conditions that block each
 * (_cannot_be_deleted, a pin to another engine, a control edge, the
 * NetOutput, two consumers, a non-Const operand).  A fused node is a new node
 * with the head's name.  tests/e2e/engine_opt.sh runs the fused graphs
 * against the unfused ones.
 */
#include "kiln_test.h"
#include "graph_int.h"
#include "passctx.h"
#include "plugin.h"

#include <math.h>

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

/* The builtin fusion stage over @p g. */
static kiln_status run_builtin(kiln_ctx *ctx, kiln_graph *g)
{
    kiln_error err;
    kiln_error_clear(&err);
    FILE *log = tmpfile();
    kiln_pass_ctx pc;
    kiln__passctx_init(&pc, ctx, log, &err);
    pc.stage = "optimize_original";
    kiln_pass_result r = kiln_fusion_run_stage(&pc, g, KILN_FUSION_STAGE_BUILTIN);
    kiln__passctx_fini(&pc);
    if (log)
        fclose(log);
    return r == KILN_PASS_FAILED ? KILN_ERR_INVALID : KILN_OK;
}

static kiln_node_id named(const kiln_graph *g, const char *name)
{
    return kiln_graph_find_node(g, name);
}

static void set_f32(kiln_graph *g, kiln_node_id n, uint32_t o, int32_t rank, const int64_t *dims)
{
    kiln_tensor_desc *d = kiln_node_output_desc(g, n, o);
    kiln_desc_set_dtype(g, d, KILN_DT_FLOAT32);
    kiln_desc_set_shape(g, d, rank, dims);
}

static kiln_node_id cnst(kiln_graph *g, const char *name, uint32_t rank, const int64_t *dims,
                         const float *v, size_t n)
{
    kiln_node_id c = kiln_graph_add_node(g, name, "Const", 0, 1);
    kiln_tensor_value t = {KILN_DT_FLOAT32, rank, dims, v, n * sizeof(float)};
    CU_ASSERT_EQUAL(kiln_attrs_set_tensor(kiln_node_attrs_mut(g, c), "value", &t), KILN_OK);
    set_f32(g, c, 0, (int32_t)rank, dims);
    return c;
}

static kiln_node_id op(kiln_graph *g, const char *name, const char *type, uint32_t nin,
                       const kiln_node_id *ins, int32_t rank, const int64_t *dims)
{
    kiln_node_id n = kiln_graph_add_node(g, name, type, nin, 1);
    for (uint32_t i = 0; i < nin; i++)
        if (ins[i])
            CU_ASSERT_EQUAL(kiln_edge_add(g, ins[i], 0, n, i), KILN_OK);
    set_f32(g, n, 0, rank, dims);
    return n;
}

static const float *const_data(kiln_graph *g, kiln_node_id conv, uint32_t i, size_t *n)
{
    kiln_anchor p = kiln_node_input_peer(g, conv, i);
    kiln_tensor_value v;
    CU_ASSERT_FATAL(p.node != 0);
    CU_ASSERT_STRING_EQUAL(kiln_node_op_str(g, p.node), "Const");
    CU_ASSERT_FATAL(kiln_attrs_get_tensor(kiln_node_attrs(g, p.node), "value", &v));
    *n = v.nbytes / sizeof(float);
    return v.data;
}

/* x -> conv(w, b) -> bn -> relu -> flat -> out; options: mark/pin nodes */
typedef struct chain {
    kiln_graph *g;
    kiln_node_id conv, bn, relu, flat, w, b;
} chain;

static chain build_chain(kiln_ctx *ctx, bool bn_keep, bool relu_pin, bool relu_out)
{
    chain c;
    kiln_graph *g = c.g = kiln_graph_create(ctx, "chain");
    static const int64_t X[] = {1, 1, 1, 2}, W[] = {2, 1, 1, 1}, V[] = {2}, Y[] = {1, 2, 1, 2},
                         F[] = {1, 4};
    kiln_node_id x = kiln_graph_add_node(g, "x", "Data", 0, 1);
    kiln_attrs_set_int(kiln_node_attrs_mut(g, x), "index", 0);
    set_f32(g, x, 0, 4, X);
    static const float w[] = {2, 3}, b[] = {1, -1}, s[] = {1, 2}, bb[] = {0.5f, 0}, mean[] = {1, 0},
                       var[] = {3, 0.25f};
    c.w = cnst(g, "w", 4, W, w, 2);
    c.b = cnst(g, "b", 1, V, b, 2);
    kiln_node_id ins[5] = {x, c.w, c.b};
    c.conv = op(g, "conv", "Conv", 3, ins, 4, Y);
    static const int64_t ks[] = {1, 1};
    kiln_attrs_set_list_int(kiln_node_attrs_mut(g, c.conv), "kernel_shape", ks, 2);
    kiln_node_id bins[5] = {c.conv, cnst(g, "s", 1, V, s, 2), cnst(g, "bb", 1, V, bb, 2),
                            cnst(g, "mean", 1, V, mean, 2), cnst(g, "var", 1, V, var, 2)};
    c.bn = op(g, "bn", "BatchNormalization", 5, bins, 4, Y);
    kiln_attrs_set_float(kiln_node_attrs_mut(g, c.bn), "epsilon", 1.0);
    if (bn_keep)
        kiln_attrs_set_bool(kiln_node_attrs_mut(g, c.bn), "_cannot_be_deleted", true);
    c.relu = op(g, "relu", "Relu", 1, &c.bn, 4, Y);
    if (relu_pin)
        kiln_attrs_set_string(kiln_node_attrs_mut(g, c.relu), "_kiln_engine", "vector");
    c.flat = op(g, "flat", "Flatten", 1, &c.relu, 2, F);
    kiln_node_id out = kiln_graph_add_node(g, "out", "NetOutput", relu_out ? 2 : 1, 0);
    kiln_edge_add(g, c.flat, 0, out, 0);
    if (relu_out)
        kiln_edge_add(g, c.relu, 0, out, 1);
    return c;
}

static void test_conv_bn_relu_fused(void)
{
    kiln_ctx *ctx = load_all();
    kiln_error err;
    kiln_error_clear(&err);
    chain c = build_chain(ctx, false, false, false);
    kiln_graph *g = c.g;
    CU_ASSERT_EQUAL_FATAL(run_builtin(ctx, g), KILN_OK);
    CU_ASSERT(!kiln_node_is_live(g, c.bn));
    CU_ASSERT(!kiln_node_is_live(g, c.relu));
    CU_ASSERT(!kiln_node_is_live(g, c.conv)); /* replaced by a Conv of the same name */
    /* the old weights lose their consumer (PruneGraphPass removes them later) */
    CU_ASSERT_EQUAL(kiln_node_output_use_count(g, c.w, 0), 0);
    CU_ASSERT_EQUAL(kiln_node_output_use_count(g, c.b, 0), 0);
    CU_ASSERT_EQUAL(kiln_node_output_use_count(g, named(g, "var"), 0), 0);
    c.conv = named(g, "conv");
    CU_ASSERT_FATAL(c.conv != 0);
    CU_ASSERT_STRING_EQUAL(kiln_node_op_str(g, c.conv), "Conv");
    CU_ASSERT_EQUAL(kiln_node_input_peer(g, c.flat, 0).node, c.conv);
    const char *act = NULL;
    CU_ASSERT(kiln_attrs_get_string(kiln_node_attrs(g, c.conv), "_kiln_fused_activation", &act));
    CU_ASSERT_STRING_EQUAL(act ? act : "", "Relu");
    /* s = scale / sqrt(var + eps) = {1/2, 2/sqrt(1.25)} */
    const double s1 = 2.0 / sqrt(1.25);
    size_t n;
    const float *w = const_data(g, c.conv, 1, &n);
    CU_ASSERT_EQUAL_FATAL(n, 2);
    CU_ASSERT_DOUBLE_EQUAL(w[0], 1.0, 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(w[1], 3.0 * s1, 1e-6);
    const float *b = const_data(g, c.conv, 2, &n);
    CU_ASSERT_EQUAL_FATAL(n, 2);
    CU_ASSERT_DOUBLE_EQUAL(b[0], (1.0 - 1.0) * 0.5 + 0.5, 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(b[1], -1.0 * s1, 1e-6);
    kiln_graph_destroy(g);
    kiln_ctx_destroy(ctx);
}

static void test_conv_bn_relu_blocked(void)
{
    kiln_ctx *ctx = load_all();
    kiln_error err;
    kiln_error_clear(&err);
    /* BN _cannot_be_deleted: kept, and so is the Relu after it (its head is no Conv) */
    chain c = build_chain(ctx, true, false, false);
    CU_ASSERT_EQUAL_FATAL(run_builtin(ctx, c.g), KILN_OK);
    CU_ASSERT(kiln_node_is_live(c.g, c.bn));
    CU_ASSERT(kiln_node_is_live(c.g, c.relu));
    CU_ASSERT_EQUAL(kiln_node_input_peer(c.g, c.conv, 1).node, c.w);
    kiln_graph_destroy(c.g);
    /* Relu pinned to vector: BN folded, Relu kept */
    c = build_chain(ctx, false, true, false);
    CU_ASSERT_EQUAL_FATAL(run_builtin(ctx, c.g), KILN_OK);
    CU_ASSERT(!kiln_node_is_live(c.g, c.bn));
    CU_ASSERT(kiln_node_is_live(c.g, c.relu));
    c.conv = named(c.g, "conv");
    CU_ASSERT_EQUAL(kiln_node_input_peer(c.g, c.relu, 0).node, c.conv);
    CU_ASSERT(!kiln_attrs_get_string(kiln_node_attrs(c.g, c.conv), "_kiln_fused_activation",
                                     &(const char *){NULL}));
    kiln_graph_destroy(c.g);
    /* Relu with a control edge: kept */
    c = build_chain(ctx, false, false, false);
    CU_ASSERT_EQUAL(kiln_ctrl_add(c.g, c.relu, c.flat), KILN_OK);
    CU_ASSERT_EQUAL_FATAL(run_builtin(ctx, c.g), KILN_OK);
    CU_ASSERT(!kiln_node_is_live(c.g, c.bn));
    CU_ASSERT(kiln_node_is_live(c.g, c.relu));
    kiln_graph_destroy(c.g);
    /* Relu feeding the NetOutput: kept */
    c = build_chain(ctx, false, false, true);
    CU_ASSERT_EQUAL_FATAL(run_builtin(ctx, c.g), KILN_OK);
    CU_ASSERT(!kiln_node_is_live(c.g, c.bn));
    CU_ASSERT(kiln_node_is_live(c.g, c.relu));
    kiln_graph_destroy(c.g);
    kiln_ctx_destroy(ctx);
}

static void test_matmul_bias(void)
{
    kiln_ctx *ctx = load_all();
    kiln_error err;
    kiln_error_clear(&err);
    for (int variant = 0; variant < 3; variant++) {
        /* 0: fused; 1: the bias is no Const; 2: the MatMul has two consumers */
        kiln_graph *g = kiln_graph_create(ctx, "mm");
        static const int64_t A[] = {2, 3}, B[] = {3, 4}, C[] = {4}, Y[] = {2, 4};
        kiln_node_id a = kiln_graph_add_node(g, "a", "Data", 0, 1);
        kiln_attrs_set_int(kiln_node_attrs_mut(g, a), "index", 0);
        set_f32(g, a, 0, 2, A);
        static const float bv[12] = {1}, cv[4] = {1, 2, 3, 4};
        kiln_node_id ins[2] = {a, cnst(g, "bw", 2, B, bv, 12)};
        kiln_node_id mm = op(g, "mm", "MatMul", 2, ins, 2, Y);
        kiln_node_id c = cnst(g, "c", 1, C, cv, 4);
        if (variant == 1) {
            c = kiln_graph_add_node(g, "cd", "Data", 0, 1);
            kiln_attrs_set_int(kiln_node_attrs_mut(g, c), "index", 1);
            set_f32(g, c, 0, 1, C);
        }
        kiln_node_id ains[2] = {c, mm};
        kiln_node_id add = op(g, "add", "Add", 2, ains, 2, Y);
        kiln_node_id flat = op(g, "flat", "Flatten", 1, &add, 2, Y);
        kiln_node_id out = kiln_graph_add_node(g, "out", "NetOutput", variant == 2 ? 2 : 1, 0);
        kiln_edge_add(g, flat, 0, out, 0);
        if (variant == 2) {
            kiln_node_id f2 = op(g, "flat2", "Flatten", 1, &mm, 2, Y);
            kiln_edge_add(g, f2, 0, out, 1);
        }
        CU_ASSERT_EQUAL_FATAL(run_builtin(ctx, g), KILN_OK);
        if (variant == 0) {
            CU_ASSERT(!kiln_node_is_live(g, add));
            mm = named(g, "mm"); /* a new Gemm of the MatMul's name */
            CU_ASSERT_FATAL(mm != 0);
            CU_ASSERT_STRING_EQUAL(kiln_node_op_str(g, mm), "Gemm");
            CU_ASSERT_EQUAL(kiln_node_input_peer(g, mm, 2).node, c);
            CU_ASSERT_EQUAL(kiln_node_input_peer(g, flat, 0).node, mm);
        } else {
            CU_ASSERT(kiln_node_is_live(g, add));
            CU_ASSERT_STRING_EQUAL(kiln_node_op_str(g, mm), "MatMul");
        }
        kiln_graph_destroy(g);
    }
    kiln_ctx_destroy(ctx);
}

int main(void)
{
    static const kiln_test_case cases[] = {
        {"test_conv_bn_relu_fused", test_conv_bn_relu_fused},
        {"test_conv_bn_relu_blocked", test_conv_bn_relu_blocked},
        {"test_matmul_bias", test_matmul_bias},
        {NULL, NULL},
    };
    return kiln_test_run("engine_opt", cases);
}

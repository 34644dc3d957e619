/*
 * plugin.c - libkiln_cpu.so (plugin "kiln.cpu"): registers the engine "cpu".
 * Op definitions and shape inference belong to no engine: they are the op
 * registry's (plugins/opsets/onnx).
 *
 * The engine's op-info table (GE's ops kernel info store: op type, dtypes of
 * output 0, any format) is cpu_ops_basic[] followed by cpu_ops_nn[].  The
 * host keeps a pointer to it for as long as the plugin is loaded, so it lives
 * in static storage, written once (call_once) with the same contents on
 * every load, and read-only afterwards.
 *
 * cpu_ops_basic[] is defined here (its kernels are in basic_*.c); the NN
 * table is nn_table.c's.
 *
 * kernel_create finds the node's cpu_op by op type, runs its prepare() and
 * hands the runtime a small binding {op, state} with a trampoline kernel;
 * kernel_destroy calls the op's release() on the state and frees the
 * binding.  The trampoline costs one indirect call per kernel invocation.
 */
#include "basic_ops.h"

#include <string.h>
#include <threads.h>

/* ---- the basic op table -------------------------------------------------- */

/* Every dtype with a fixed element size (all but string). */
#define CPU_FIXED ((1u << KILN_DT_STRING) - 1u)
#define CPU_BOOL CPU_DT(BOOL)
#define CPU_SIGNED (CPU_FLOAT_ANY | CPU_DT(INT8) | CPU_DT(INT16) | CPU_DT(INT32) | CPU_DT(INT64))
#define CPU_POW (CPU_FLOAT_ANY | CPU_DT(INT32) | CPU_DT(INT64))

const cpu_op cpu_ops_basic[] = {
    /* elementwise binary / variadic (basic_binary.c) */
    {"Add", CPU_ALL_NUMERIC, NULL, cpu_add, NULL},
    {"Sub", CPU_ALL_NUMERIC, NULL, cpu_sub, NULL},
    {"Mul", CPU_ALL_NUMERIC, NULL, cpu_mul, NULL},
    {"Div", CPU_ALL_NUMERIC, NULL, cpu_div, NULL},
    {"Pow", CPU_POW, NULL, cpu_pow, NULL},
    {"Max", CPU_ALL_NUMERIC, NULL, cpu_max, NULL},
    {"Min", CPU_ALL_NUMERIC, NULL, cpu_min, NULL},
    {"Sum", CPU_ALL_NUMERIC, NULL, cpu_sum, NULL},
    {"Equal", CPU_BOOL, NULL, cpu_equal, NULL},
    {"GreaterOrEqual", CPU_BOOL, NULL, cpu_greater_or_equal, NULL},
    {"Greater", CPU_BOOL, NULL, cpu_greater, NULL},
    {"Less", CPU_BOOL, NULL, cpu_less, NULL},
    /* elementwise unary (basic_unary.c) */
    {"Neg", CPU_SIGNED, cpu_unary_prepare, cpu_unary, cpu_state_free},
    {"Sqrt", CPU_FLOAT_ANY, cpu_unary_prepare, cpu_unary, cpu_state_free},
    {"Log", CPU_FLOAT_ANY, cpu_unary_prepare, cpu_unary, cpu_state_free},
    {"Sigmoid", CPU_FLOAT_ANY, cpu_unary_prepare, cpu_unary, cpu_state_free},
    {"Relu", CPU_FLOAT_ANY, cpu_unary_prepare, cpu_unary, cpu_state_free},
    {"LeakyRelu", CPU_FLOAT_ANY, cpu_unary_prepare, cpu_unary, cpu_state_free},
    {"HardSigmoid", CPU_FLOAT_ANY, cpu_unary_prepare, cpu_unary, cpu_state_free},
    {"Clip", CPU_ALL_NUMERIC, cpu_clip_prepare, cpu_clip, cpu_state_free},
    {"Not", CPU_BOOL, NULL, cpu_not, NULL},
    {"Cast", CPU_CAST_TYPES, NULL, cpu_cast, NULL},
    {"Identity", CPU_FIXED, NULL, cpu_identity, NULL},
    /* shape ops (basic_shape.c) */
    {"Shape", CPU_DT(INT64), cpu_shape_prepare, cpu_shape, cpu_state_free},
    {"Size", CPU_DT(INT64), NULL, cpu_size, NULL},
    {"Reshape", CPU_FIXED, cpu_reshape_prepare, cpu_reshape, cpu_state_free},
    {"Flatten", CPU_FIXED, cpu_flatten_prepare, cpu_flatten, cpu_state_free},
    {"Squeeze", CPU_FIXED, cpu_squeeze_prepare, cpu_squeeze, cpu_state_free},
    {"Unsqueeze", CPU_FIXED, cpu_squeeze_prepare, cpu_unsqueeze, cpu_state_free},
    {"ConstantOfShape", CPU_FIXED, cpu_const_of_shape_prepare, cpu_const_of_shape, cpu_state_free},
    /* data movement (basic_movement.c, basic_pad.c) */
    {"Transpose", CPU_FIXED, cpu_transpose_prepare, cpu_transpose, cpu_state_free},
    {"Concat", CPU_FIXED, cpu_concat_prepare, cpu_concat, cpu_state_free},
    {"Gather", CPU_FIXED, cpu_gather_prepare, cpu_gather, cpu_state_free},
    {"Slice", CPU_FIXED, cpu_slice_prepare, cpu_slice, cpu_state_free},
    {"Pad", CPU_FIXED, cpu_pad_prepare, cpu_pad, cpu_state_free},
    /* reductions (basic_reduce.c) */
    {"ReduceMax", CPU_FLOATS, cpu_reduce_prepare, cpu_reduce_max, cpu_state_free},
    {"ReduceMean", CPU_FLOATS, cpu_reduce_prepare, cpu_reduce_mean, cpu_state_free},
    {"Softmax", CPU_FLOATS, cpu_softmax_prepare, cpu_softmax, cpu_state_free},
};

const uint32_t cpu_ops_basic_count = sizeof(cpu_ops_basic) / sizeof(cpu_ops_basic[0]);

/* ---- the engine ----------------------------------------------------------- */

#define CPU_MAX_OPS 192

typedef struct cpu_op_table {
    uint32_t count;
    kiln_op_info ops[CPU_MAX_OPS];
} cpu_op_table;

static cpu_op_table op_table;
static once_flag op_table_once = ONCE_FLAG_INIT;

static void fill_op_table(void)
{
    const cpu_op *tabs[2] = {cpu_ops_basic, cpu_ops_nn};
    const uint32_t counts[2] = {cpu_ops_basic_count, cpu_ops_nn_count};
    uint32_t k = 0;
    for (int t = 0; t < 2; t++) {
        for (uint32_t i = 0; i < counts[t] && k < CPU_MAX_OPS; i++) {
            const cpu_op *op = &tabs[t][i];
            if (cpu_find_op(op->op_type) != op) /* listed twice: the first wins */
                continue;
            op_table.ops[k++] = (kiln_op_info){sizeof(kiln_op_info), op->op_type,
                                               op->dtype_mask, NULL, 0};
        }
    }
    op_table.count = k;
}

const cpu_op *cpu_find_op(const char *op_type)
{
    if (!op_type)
        return NULL;
    for (uint32_t i = 0; i < cpu_ops_basic_count; i++)
        if (strcmp(cpu_ops_basic[i].op_type, op_type) == 0)
            return &cpu_ops_basic[i];
    for (uint32_t i = 0; i < cpu_ops_nn_count; i++)
        if (strcmp(cpu_ops_nn[i].op_type, op_type) == 0)
            return &cpu_ops_nn[i];
    return NULL;
}

typedef struct cpu_binding {
    const cpu_op *op;
    void *state;
} cpu_binding;

static kiln_status run_bound(void *kernel_state, const kiln_kernel_args *args, kiln_error *err)
{
    const cpu_binding *b = kernel_state;
    return b->op->run(b->state, args, err);
}

static kiln_status cpu_kernel_create(void *inst, const kiln_graph *g, kiln_node_id n,
                                     kiln_kernel_fn *fn, void **state, kiln_error *err)
{
    (void)inst;
    const char *type = kiln_node_op_str(g, n);
    const cpu_op *op = cpu_find_op(type);
    if (!op)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "node %s: the cpu engine has no kernel "
                           "for op %s", kiln_node_name_str(g, n), type);
    cpu_binding *b = kiln_alloc(sizeof(*b));
    if (!b)
        return kiln_errorf(err, KILN_ERR_NOMEM, "node %s: out of memory",
                           kiln_node_name_str(g, n));
    b->op = op;
    b->state = NULL;
    if (op->prepare) {
        kiln_status st = op->prepare(g, n, &b->state, err);
        if (st != KILN_OK) {
            if (op->release && b->state)
                op->release(b->state);
            kiln_free(b);
            return st;
        }
    }
    *fn = run_bound;
    *state = b;
    return KILN_OK;
}

static void cpu_kernel_destroy(void *inst, void *state)
{
    (void)inst;
    cpu_binding *b = state;
    if (!b)
        return;
    if (b->op->release && b->state)
        b->op->release(b->state);
    kiln_free(b);
}

static kiln_status init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)h;
    call_once(&op_table_once, fill_op_table);
    if (op_table.count < cpu_ops_basic_count + cpu_ops_nn_count &&
        op_table.count == CPU_MAX_OPS)
        return kiln_errorf(e, KILN_ERR_LIMIT, "cpu engine: more than %d op types",
                           CPU_MAX_OPS);
    const kiln_engine_desc engine = {
        .struct_size = sizeof(kiln_engine_desc),
        .name = "cpu",
        .summary = "CPU kernels: elementwise, shape, data movement, reductions, NN "
                   "(Conv/Gemm through OpenBLAS)",
        .priority = 0,
        .op_count = op_table.count,
        .ops = op_table.ops,
        .kernel_create = cpu_kernel_create,
        .kernel_destroy = cpu_kernel_destroy,
    };
    return kiln_register_engine(r, &engine);
}

KILN_PLUGIN_DEFINE("kiln.cpu", "0.1.0", "Apache-2.0",
                   "CPU engine (engine cpu)", init, NULL)

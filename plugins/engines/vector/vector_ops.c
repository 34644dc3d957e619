/*
 * vector_ops.c - the vector engine's op table (cpu_ops_vector[]): the
 * element-wise, Cast, reduction and Softmax kernels of basic_binary.c,
 * basic_unary.c and basic_reduce.c.  These are GE's VectorEngine ops: one
 * pass over the elements (or along an axis), no matrix unit, no data layout
 * of their own, so every format is accepted.
 */
#include "basic_ops.h"
#include "vec_fusion.h"

const cpu_op cpu_ops_vector[] = {
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
    {"Exp", CPU_FLOAT_ANY, cpu_unary_prepare, cpu_unary, cpu_state_free},
    {"Tanh", CPU_FLOAT_ANY, cpu_unary_prepare, cpu_unary, cpu_state_free},
    {"Sigmoid", CPU_FLOAT_ANY, cpu_unary_prepare, cpu_unary, cpu_state_free},
    {"Relu", CPU_FLOAT_ANY, cpu_unary_prepare, cpu_unary, cpu_state_free},
    {"LeakyRelu", CPU_FLOAT_ANY, cpu_unary_prepare, cpu_unary, cpu_state_free},
    {"HardSigmoid", CPU_FLOAT_ANY, cpu_unary_prepare, cpu_unary, cpu_state_free},
    {"HardSwish", CPU_FLOAT_ANY, cpu_unary_prepare, cpu_unary, cpu_state_free},
    {"Erf", CPU_FLOAT_ANY, cpu_unary_prepare, cpu_unary, cpu_state_free},
    {"Gelu", CPU_FLOAT_ANY, cpu_unary_prepare, cpu_unary, cpu_state_free},
    {"QuickGelu", CPU_FLOAT_ANY, cpu_unary_prepare, cpu_unary, cpu_state_free},
    {"Clip", CPU_ALL_NUMERIC, cpu_clip_prepare, cpu_clip, cpu_state_free},
    {"Not", CPU_BOOL, NULL, cpu_not, NULL},
    {"Cast", CPU_CAST_TYPES, NULL, cpu_cast, NULL},
    /* reductions and normalisation along an axis (basic_reduce.c) */
    {"ReduceMax", CPU_FLOATS, cpu_reduce_prepare, cpu_reduce_max, cpu_state_free},
    {"ReduceMean", CPU_FLOATS, cpu_reduce_prepare, cpu_reduce_mean, cpu_state_free},
    {"ReduceSum", CPU_DT(FLOAT32), cpu_reduce_prepare, cpu_reduce_sum, cpu_state_free},
    {"Softmax", CPU_FLOATS, cpu_softmax_prepare, cpu_softmax, cpu_state_free},
    {"LayerNormalization", CPU_DT(FLOAT32), cpu_layernorm_prepare, cpu_layernorm,
     cpu_state_free},
    /* fused element-wise chains (vec_fusion.c) */
    {"KilnFusedElementwise", CPU_DT(FLOAT32), cpu_fused_prepare, cpu_fused, cpu_state_free},
};

const uint32_t cpu_ops_vector_count = sizeof(cpu_ops_vector) / sizeof(cpu_ops_vector[0]);

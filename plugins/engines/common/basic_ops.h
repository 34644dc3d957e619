/*
 * basic_ops.h - the kernels of the vector engine (vector/basic_*.c, table
 * cpu_ops_vector[]) and of the host-CPU engine (hostcpu/basic_*.c, table
 * cpu_ops_host[]), the dtype masks of their tables and the C types of the
 * dtypes they handle (X-macros used to stamp out one tight loop per dtype).
 */
#ifndef KILN_CPU_BASIC_OPS_H
#define KILN_CPU_BASIC_OPS_H

#include "cpu_util.h"

/* X(KILN dtype suffix, C type) */
#define CPU_FLOAT_TYPES(X) X(FLOAT32, float) X(FLOAT64, double)
#define CPU_INT_TYPES(X)                                                                     \
    X(INT8, int8_t) X(INT16, int16_t) X(INT32, int32_t) X(INT64, int64_t) X(UINT8, uint8_t) \
    X(UINT16, uint16_t) X(UINT32, uint32_t) X(UINT64, uint64_t)
#define CPU_SIGNED_INT_TYPES(X) X(INT8, int8_t) X(INT16, int16_t) X(INT32, int32_t) X(INT64, int64_t)

#define CPU_INTS                                                                              \
    (CPU_DT(INT8) | CPU_DT(INT16) | CPU_DT(INT32) | CPU_DT(INT64) | CPU_DT(UINT8) |           \
     CPU_DT(UINT16) | CPU_DT(UINT32) | CPU_DT(UINT64))
#define CPU_ALL_NUMERIC (CPU_DT(FLOAT32) | CPU_DT(FLOAT64) | CPU_INTS)
#define CPU_FLOAT_ANY (CPU_DT(FLOAT32) | CPU_DT(FLOAT64))
/* What Cast converts between (basic_unary.c) and lists in the op table. */
#define CPU_CAST_TYPES (CPU_ALL_NUMERIC | CPU_DT(BOOL) | CPU_DT(FLOAT16) | CPU_DT(BFLOAT16))

/* Every dtype with a fixed element size (all but string). */
#define CPU_FIXED ((1u << KILN_DT_STRING) - 1u)
#define CPU_BOOL CPU_DT(BOOL)
#define CPU_SIGNED (CPU_FLOAT_ANY | CPU_DT(INT8) | CPU_DT(INT16) | CPU_DT(INT32) | CPU_DT(INT64))
#define CPU_POW (CPU_FLOAT_ANY | CPU_DT(INT32) | CPU_DT(INT64))

#define CPU_KERNEL(name) \
    kiln_status name(void *state, const kiln_kernel_args *a, kiln_error *err)
#define CPU_PREPARE(name) \
    kiln_status name(const kiln_graph *g, kiln_node_id n, void **state, kiln_error *err)

/* basic_binary.c */
CPU_KERNEL(cpu_add);
CPU_KERNEL(cpu_sub);
CPU_KERNEL(cpu_mul);
CPU_KERNEL(cpu_div);
CPU_KERNEL(cpu_pow);
CPU_KERNEL(cpu_equal);
CPU_KERNEL(cpu_greater_or_equal);
CPU_KERNEL(cpu_greater);
CPU_KERNEL(cpu_less);
CPU_KERNEL(cpu_max);
CPU_KERNEL(cpu_min);
CPU_KERNEL(cpu_sum);

/* basic_unary.c */
CPU_PREPARE(cpu_unary_prepare);
CPU_KERNEL(cpu_unary);
CPU_PREPARE(cpu_clip_prepare);
CPU_KERNEL(cpu_clip);
CPU_KERNEL(cpu_not);
CPU_KERNEL(cpu_cast);

/* hostcpu/host_ops.c */
CPU_KERNEL(cpu_identity);

/* basic_shape.c */
CPU_PREPARE(cpu_shape_prepare);
CPU_KERNEL(cpu_shape);
CPU_KERNEL(cpu_size);
CPU_PREPARE(cpu_reshape_prepare);
CPU_KERNEL(cpu_reshape);
CPU_PREPARE(cpu_flatten_prepare);
CPU_KERNEL(cpu_flatten);
CPU_PREPARE(cpu_squeeze_prepare);
CPU_KERNEL(cpu_squeeze);
CPU_KERNEL(cpu_unsqueeze);
CPU_PREPARE(cpu_const_of_shape_prepare);
CPU_KERNEL(cpu_const_of_shape);

/* basic_movement.c */
CPU_PREPARE(cpu_transpose_prepare);
CPU_KERNEL(cpu_transpose);
CPU_PREPARE(cpu_concat_prepare);
CPU_KERNEL(cpu_concat);
CPU_PREPARE(cpu_gather_prepare);
CPU_KERNEL(cpu_gather);
CPU_PREPARE(cpu_slice_prepare);
CPU_KERNEL(cpu_slice);

/* basic_pad.c */
CPU_PREPARE(cpu_pad_prepare);
CPU_KERNEL(cpu_pad);

/* basic_reduce.c */
CPU_PREPARE(cpu_reduce_prepare);
CPU_KERNEL(cpu_reduce_max);
CPU_KERNEL(cpu_reduce_mean);
CPU_KERNEL(cpu_reduce_sum);
CPU_PREPARE(cpu_softmax_prepare);
CPU_KERNEL(cpu_softmax);
CPU_PREPARE(cpu_layernorm_prepare);
CPU_KERNEL(cpu_layernorm);

#endif

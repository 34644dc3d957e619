/*
 * host_ops.c - the host-CPU engine's op table (cpu_ops_host[]): shape
 * computation (basic_shape.c), data movement (basic_movement.c,
 * basic_pad.c), Identity and Assign.  These are GE's host-CPU / GE-local ops: they
 * compute shapes and index arithmetic or move bytes without arithmetic on
 * them, whatever the dtype (every fixed-size dtype), so they need no vector
 * or matrix unit and run where the data is.
 */
#include "basic_ops.h"

#include <string.h>

CPU_KERNEL(cpu_identity)
{
    (void)state;
    return cpu_copy_through(a, err);
}

/* Assign(ref, value) (GE's Assign; output 0 refs input 0): the value is
 * written into the ref input's buffer, and the output, which aliases it when
 * the memory plan honours the reference, holds the same bytes. */
static CPU_KERNEL(cpu_assign)
{
    (void)state;
    if (a->input_count < 2 || !a->inputs[0].data || !a->inputs[1].data)
        return cpu_fail(a, err, KILN_ERR_INVALID, "Assign needs the ref input 0 and the value input 1");
    const kiln_tensor *ref = &a->inputs[0], *val = &a->inputs[1];
    if (ref->dtype != val->dtype || ref->nbytes != val->nbytes)
        return cpu_fail(a, err, KILN_ERR_INVALID,
                        "Assign: value (%s, %zu bytes) does not match the ref input (%s, %zu bytes)",
                        kiln_dtype_name(val->dtype), val->nbytes, kiln_dtype_name(ref->dtype),
                        ref->nbytes);
    kiln_status st = cpu_check_out_bytes(a, 0, ref->nbytes, err);
    if (st != KILN_OK)
        return st;
    if (ref->data != val->data && val->nbytes)
        memmove(ref->data, val->data, val->nbytes);
    if (a->outputs[0].data != ref->data && val->nbytes)
        memmove(a->outputs[0].data, val->data, val->nbytes);
    return KILN_OK;
}

const cpu_op cpu_ops_host[] = {
    /* shape computation (basic_shape.c) */
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
    {"Identity", CPU_FIXED, NULL, cpu_identity, NULL},
    /* state (GE's Assign): the value written into the ref input */
    {"Assign", CPU_FIXED, NULL, cpu_assign, NULL},
};

const uint32_t cpu_ops_host_count = sizeof(cpu_ops_host) / sizeof(cpu_ops_host[0]);

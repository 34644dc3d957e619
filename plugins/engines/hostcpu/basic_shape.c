/*
 * basic_shape.c - shape ops: Shape (start/end, opset 15), Size, and the
 * data-preserving reshapes Reshape (0 = copy dim unless allowzero, -1 =
 * inferred; opset < 5 `shape` attribute), Flatten (axis, default 1),
 * Squeeze / Unsqueeze (axes as attribute before opset 13, else input 1;
 * Squeeze without axes drops every 1), and ConstantOfShape (`value` tensor
 * attribute, default float32 0).
 *
 * Output shapes come from the node's descriptors (shape inference); the
 * reshape kernels recompute the shape the op defines from their inputs and
 * fail with both shapes when the two disagree, then copy the data.
 */
#include "basic_ops.h"

#include <string.h>

/* ---- Shape, Size --------------------------------------------------------- */

typedef struct shape_state {
    int64_t start, end;
    bool has_end;
} shape_state;

CPU_PREPARE(cpu_shape_prepare)
{
    kiln_status st = cpu_state_new(g, n, sizeof(shape_state), state, err);
    if (st != KILN_OK)
        return st;
    shape_state *s = *state;
    s->start = cpu_attr_int(g, n, "start", 0);
    s->has_end = kiln_attrs_has(kiln_node_attrs(g, n), "end");
    s->end = cpu_attr_int(g, n, "end", 0);
    return KILN_OK;
}

static int64_t clamp_dim_index(int64_t v, int64_t r)
{
    if (v < 0)
        v += r;
    return v < 0 ? 0 : v > r ? r : v;
}

CPU_KERNEL(cpu_shape)
{
    const shape_state *s = state;
    if (a->input_count < 1 || a->output_count < 1)
        return cpu_fail(a, err, KILN_ERR_INVALID, "input 0 or output 0 missing");
    const kiln_tensor *x = &a->inputs[0];
    int64_t r = x->rank;
    int64_t b = clamp_dim_index(s ? s->start : 0, r);
    int64_t e = s && s->has_end ? clamp_dim_index(s->end, r) : r;
    int64_t cnt = e > b ? e - b : 0;
    if (a->outputs[0].dtype != KILN_DT_INT64)
        return cpu_fail(a, err, KILN_ERR_INVALID, "output must be int64");
    kiln_status st = cpu_check_out_bytes(a, 0, (size_t)cnt * sizeof(int64_t), err);
    if (st != KILN_OK)
        return st;
    if (cnt)
        memcpy(a->outputs[0].data, x->dims + b, (size_t)cnt * sizeof(int64_t));
    return KILN_OK;
}

CPU_KERNEL(cpu_size)
{
    (void)state;
    if (a->input_count < 1 || a->output_count < 1)
        return cpu_fail(a, err, KILN_ERR_INVALID, "input 0 or output 0 missing");
    if (a->outputs[0].dtype != KILN_DT_INT64)
        return cpu_fail(a, err, KILN_ERR_INVALID, "output must be int64");
    kiln_status st = cpu_check_out_bytes(a, 0, sizeof(int64_t), err);
    if (st != KILN_OK)
        return st;
    int64_t v = cpu_numel(&a->inputs[0]);
    memcpy(a->outputs[0].data, &v, sizeof(v));
    return KILN_OK;
}

/* ---- Reshape ------------------------------------------------------------- */

typedef struct reshape_state {
    bool allowzero;
    uint32_t nshape; /* opset < 5: the `shape` attribute */
    int64_t shape[CPU_MAX_RANK];
} reshape_state;

CPU_PREPARE(cpu_reshape_prepare)
{
    kiln_status st = cpu_state_new(g, n, sizeof(reshape_state), state, err);
    if (st != KILN_OK)
        return st;
    reshape_state *s = *state;
    s->allowzero = cpu_attr_int(g, n, "allowzero", 0) != 0;
    const int64_t *v;
    uint32_t cnt;
    if (cpu_attr_ints(g, n, "shape", &v, &cnt)) {
        if (cnt > CPU_MAX_RANK)
            return cpu_fail_node(g, n, err, KILN_ERR_UNSUPPORTED, "shape of rank %u", cnt);
        memcpy(s->shape, v, cnt * sizeof(int64_t));
        s->nshape = cnt;
    }
    return KILN_OK;
}

CPU_KERNEL(cpu_reshape)
{
    const reshape_state *s = state;
    if (!cpu_has_input(a, 0))
        return cpu_fail(a, err, KILN_ERR_INVALID, "input 0 missing");
    const kiln_tensor *x = &a->inputs[0];
    int64_t dims[CPU_MAX_RANK];
    uint32_t r = 0;
    if (cpu_has_input(a, 1)) {
        if (!cpu_read_ints(&a->inputs[1], dims, CPU_MAX_RANK, &r))
            return cpu_fail(a, err, KILN_ERR_INVALID, "shape must be a 1-D int64 tensor of "
                                                      "at most %d values", CPU_MAX_RANK);
    } else if (s && s->nshape) {
        r = s->nshape;
        memcpy(dims, s->shape, r * sizeof(int64_t));
    } else {
        return cpu_fail(a, err, KILN_ERR_INVALID, "no shape input");
    }
    int64_t known = 1, infer = -1;
    for (uint32_t d = 0; d < r; d++) {
        if (dims[d] == 0 && !(s && s->allowzero)) {
            if (d >= x->rank)
                return cpu_fail(a, err, KILN_ERR_INVALID, "shape[%u] = 0 beyond the input rank",
                                d);
            dims[d] = x->dims[d];
        }
        if (dims[d] == -1) {
            if (infer >= 0)
                return cpu_fail(a, err, KILN_ERR_INVALID, "more than one -1 in the shape");
            infer = d;
        } else if (dims[d] < 0) {
            return cpu_fail(a, err, KILN_ERR_INVALID, "shape[%u] = %lld", d,
                            (long long)dims[d]);
        } else {
            known *= dims[d];
        }
    }
    int64_t total = cpu_numel(x);
    if (infer >= 0) {
        if (known == 0 || total % known)
            return cpu_fail(a, err, KILN_ERR_INVALID, "cannot infer -1: %lld elements into %lld",
                            (long long)total, (long long)known);
        dims[infer] = total / known;
    } else if (known != total) {
        return cpu_fail(a, err, KILN_ERR_INVALID, "shape holds %lld elements, input %lld",
                        (long long)known, (long long)total);
    }
    kiln_status st = cpu_check_out_dims(a, 0, r, dims, err);
    return st != KILN_OK ? st : cpu_copy_through(a, err);
}

/* ---- Flatten ------------------------------------------------------------- */

CPU_PREPARE(cpu_flatten_prepare)
{
    kiln_status st = cpu_state_new(g, n, sizeof(int64_t), state, err);
    if (st == KILN_OK)
        *(int64_t *)*state = cpu_attr_int(g, n, "axis", 1);
    return st;
}

CPU_KERNEL(cpu_flatten)
{
    int64_t axis = state ? *(const int64_t *)state : 1;
    if (!cpu_has_input(a, 0))
        return cpu_fail(a, err, KILN_ERR_INVALID, "input 0 missing");
    const kiln_tensor *x = &a->inputs[0];
    int64_t r = x->rank;
    if (axis < -r || axis > r)
        return cpu_fail(a, err, KILN_ERR_INVALID, "axis %lld out of range for rank %lld",
                        (long long)axis, (long long)r);
    if (axis < 0)
        axis += r;
    int64_t dims[2] = {1, 1};
    for (int64_t d = 0; d < r; d++)
        dims[d < axis ? 0 : 1] *= x->dims[d];
    kiln_status st = cpu_check_out_dims(a, 0, 2, dims, err);
    return st != KILN_OK ? st : cpu_copy_through(a, err);
}

/* ---- Squeeze, Unsqueeze -------------------------------------------------- */

/* The state is the `axes` attribute (opset < 13); input 1 from 13 on. */
CPU_PREPARE(cpu_squeeze_prepare)
{
    kiln_status st = cpu_state_new(g, n, sizeof(cpu_axes), state, err);
    return st != KILN_OK ? st : cpu_axes_attr(g, n, *state, err);
}

CPU_KERNEL(cpu_squeeze)
{
    if (!cpu_has_input(a, 0))
        return cpu_fail(a, err, KILN_ERR_INVALID, "input 0 missing");
    const kiln_tensor *x = &a->inputs[0];
    int64_t axes[CPU_MAX_AXES];
    uint32_t cnt;
    bool has;
    kiln_status st = cpu_axes_get(a, state, axes, &cnt, &has, err);
    if (st != KILN_OK)
        return st;
    if (x->rank > CPU_MAX_RANK)
        return cpu_fail(a, err, KILN_ERR_UNSUPPORTED, "rank %u", x->rank);
    bool drop[CPU_MAX_RANK] = {false};
    for (uint32_t i = 0; i < cnt; i++) {
        uint32_t ax;
        if (!cpu_axis(axes[i], x->rank, &ax))
            return cpu_fail(a, err, KILN_ERR_INVALID, "axis %lld out of range",
                            (long long)axes[i]);
        if (x->dims[ax] != 1)
            return cpu_fail(a, err, KILN_ERR_INVALID, "cannot squeeze dim %u of size %lld", ax,
                            (long long)x->dims[ax]);
        drop[ax] = true;
    }
    int64_t dims[CPU_MAX_RANK];
    uint32_t r = 0;
    for (uint32_t d = 0; d < x->rank; d++)
        if (!(has ? drop[d] : x->dims[d] == 1))
            dims[r++] = x->dims[d];
    st = cpu_check_out_dims(a, 0, r, dims, err);
    return st != KILN_OK ? st : cpu_copy_through(a, err);
}

CPU_KERNEL(cpu_unsqueeze)
{
    if (!cpu_has_input(a, 0))
        return cpu_fail(a, err, KILN_ERR_INVALID, "input 0 missing");
    const kiln_tensor *x = &a->inputs[0];
    int64_t axes[CPU_MAX_AXES];
    uint32_t cnt;
    bool has;
    kiln_status st = cpu_axes_get(a, state, axes, &cnt, &has, err);
    if (st != KILN_OK)
        return st;
    if (!has)
        return cpu_fail(a, err, KILN_ERR_INVALID, "no axes");
    uint32_t r = x->rank + cnt;
    if (r > CPU_MAX_RANK)
        return cpu_fail(a, err, KILN_ERR_UNSUPPORTED, "output rank %u", r);
    bool ins[CPU_MAX_RANK] = {false};
    for (uint32_t i = 0; i < cnt; i++) {
        uint32_t ax;
        if (!cpu_axis(axes[i], r, &ax) || ins[ax])
            return cpu_fail(a, err, KILN_ERR_INVALID, "axis %lld out of range or repeated",
                            (long long)axes[i]);
        ins[ax] = true;
    }
    int64_t dims[CPU_MAX_RANK];
    for (uint32_t d = 0, k = 0; d < r; d++)
        dims[d] = ins[d] ? 1 : x->dims[k++];
    st = cpu_check_out_dims(a, 0, r, dims, err);
    return st != KILN_OK ? st : cpu_copy_through(a, err);
}

/* ---- ConstantOfShape ----------------------------------------------------- */

typedef struct cos_state {
    kiln_dtype dtype;
    size_t size;
    unsigned char value[16];
} cos_state;

CPU_PREPARE(cpu_const_of_shape_prepare)
{
    kiln_status st = cpu_state_new(g, n, sizeof(cos_state), state, err);
    if (st != KILN_OK)
        return st;
    cos_state *s = *state;
    kiln_tensor_value v;
    s->dtype = KILN_DT_FLOAT32;
    s->size = 4; /* value is zero-filled: float 0 */
    if (kiln_attrs_get_tensor(kiln_node_attrs(g, n), "value", &v)) {
        size_t es = kiln_dtype_size(v.dtype);
        if (es == 0 || es > sizeof(s->value) || v.nbytes < es)
            return cpu_fail_node(g, n, err, KILN_ERR_INVALID,
                                 "value must hold one numeric element");
        s->dtype = v.dtype;
        s->size = es;
        memcpy(s->value, v.data, es);
    }
    return KILN_OK;
}

CPU_KERNEL(cpu_const_of_shape)
{
    const cos_state *s = state;
    if (!s || !cpu_has_input(a, 0) || a->output_count < 1)
        return cpu_fail(a, err, KILN_ERR_INVALID, "input 0 or output 0 missing");
    int64_t dims[CPU_MAX_RANK];
    uint32_t r;
    if (!cpu_read_ints(&a->inputs[0], dims, CPU_MAX_RANK, &r))
        return cpu_fail(a, err, KILN_ERR_INVALID, "input must be a 1-D int64 tensor");
    kiln_tensor *y = &a->outputs[0];
    if (y->dtype != s->dtype)
        return cpu_fail(a, err, KILN_ERR_INVALID, "output dtype %s, value is %s",
                        kiln_dtype_name(y->dtype), kiln_dtype_name(s->dtype));
    kiln_status st = cpu_check_out_dims(a, 0, r, dims, err);
    if (st != KILN_OK)
        return st;
    size_t total = (size_t)cpu_numel(y) * s->size;
    if ((st = cpu_check_out_bytes(a, 0, total, err)) != KILN_OK || total == 0)
        return st;
    unsigned char *p = y->data;
    memcpy(p, s->value, s->size);
    for (size_t done = s->size; done < total;) { /* doubling fill */
        size_t chunk = done < total - done ? done : total - done;
        memcpy(p + done, p, chunk);
        done += chunk;
    }
    return KILN_OK;
}

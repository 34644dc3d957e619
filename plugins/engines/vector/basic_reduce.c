/*
 * basic_reduce.c - reductions and Softmax on float32.
 *
 * ReduceMax / ReduceMean: keepdims (default 1), axes as attribute (opset < 18)
 * or input 1 (opset 18), negative axes; no axes = every axis unless
 * noop_with_empty_axes (then a copy).  The input's dims are grouped into runs
 * of reduced and kept dims (size-1 dims dropped, neighbours of the same kind
 * merged), so that e.g. a LayerNorm mean over the last axis is one dot-like
 * loop per row and a mean over axis 0 adds whole rows into the output.
 *
 * Softmax: before opset 13 the input is coerced to 2-D at `axis` (default 1)
 * and normalised over the trailing block; from 13 over the single `axis`
 * (default -1).  Max-subtracted, so large inputs do not overflow.
 *
 * LayerNormalization (opset 17; also what LayerNormFusionPass makes of the
 * spelled-out ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div/Mul/Add): per row of
 * the dims from `axis` (default -1) on, mean, d = x - mean, var = mean(d * d),
 * y = d / sqrt(var + epsilon) * Scale + B, in the order of the unfused chain;
 * Scale and B have the row's element count or one element.  Outputs Mean and
 * InvStdDev, when present, get the row's mean and 1 / sqrt(var + epsilon).
 */
#include "basic_ops.h"

#include <math.h>
#include <string.h>

typedef struct reduce_state {
    bool keepdims, noop_empty;
    cpu_axes axes; /* opset < 18 */
} reduce_state;

CPU_PREPARE(cpu_reduce_prepare)
{
    kiln_status st = cpu_state_new(g, n, sizeof(reduce_state), state, err);
    if (st != KILN_OK)
        return st;
    reduce_state *s = *state;
    s->keepdims = cpu_attr_int(g, n, "keepdims", 1) != 0;
    s->noop_empty = cpu_attr_int(g, n, "noop_with_empty_axes", 0) != 0;
    return cpu_axes_attr(g, n, &s->axes, err);
}

enum reduce_kind { R_MAX, R_MEAN };

static kiln_status reduce(const reduce_state *s, const kiln_kernel_args *a, kiln_error *err,
                          enum reduce_kind kind)
{
    if (!s || a->input_count < 1 || a->output_count < 1)
        return cpu_fail(a, err, KILN_ERR_INVALID, "input 0 or output 0 missing");
    const kiln_tensor *x = &a->inputs[0];
    uint32_t r = x->rank;
    if (x->dtype != KILN_DT_FLOAT32 || a->outputs[0].dtype != KILN_DT_FLOAT32)
        return cpu_fail(a, err, KILN_ERR_UNSUPPORTED, "dtype %s not supported",
                        kiln_dtype_name(x->dtype));
    if (r > CPU_MAX_RANK)
        return cpu_fail(a, err, KILN_ERR_UNSUPPORTED, "rank %u", r);
    int64_t axes[CPU_MAX_AXES];
    uint32_t na;
    kiln_status st = cpu_axes_get(a, &s->axes, axes, &na, NULL, err);
    if (st != KILN_OK)
        return st;
    if (na == 0 && s->noop_empty)
        return cpu_copy_through(a, err);
    bool red[CPU_MAX_RANK] = {false};
    for (uint32_t i = 0; i < na; i++) {
        uint32_t d;
        if (!cpu_axis(axes[i], r, &d))
            return cpu_fail(a, err, KILN_ERR_INVALID, "axis %lld out of range", (long long)axes[i]);
        red[d] = true;
    }
    int64_t od[CPU_MAX_RANK], count = 1;
    uint32_t orank = 0;
    for (uint32_t d = 0; d < r; d++) {
        if (na == 0)
            red[d] = true;
        if (red[d])
            count *= x->dims[d];
        if (!red[d] || s->keepdims)
            od[orank++] = red[d] ? 1 : x->dims[d];
    }
    if ((st = cpu_check_out_dims(a, 0, orank, od, err)) != KILN_OK)
        return st;
    float *y = a->outputs[0].data;
    const float *in = x->data;
    int64_t nout = cpu_numel(&a->outputs[0]);
    for (int64_t i = 0; i < nout; i++)
        y[i] = kind == R_MAX ? -INFINITY : 0.0f;
    if (cpu_numel(x) == 0)
        return KILN_OK;
    /* Group dims into runs of reduced / kept; output strides 0 on reduced. */
    int64_t gd[CPU_MAX_RANK], gs[CPU_MAX_RANK];
    bool gr[CPU_MAX_RANK];
    uint32_t ng = 0;
    for (uint32_t d = 0; d < r; d++) {
        if (x->dims[d] == 1)
            continue;
        if (ng && gr[ng - 1] == red[d]) {
            gd[ng - 1] *= x->dims[d];
        } else {
            gd[ng] = x->dims[d];
            gr[ng++] = red[d];
        }
    }
    if (ng == 0) {
        gd[0] = 1;
        gr[0] = true;
        ng = 1;
    }
    int64_t ostr = 1;
    for (int32_t k = (int32_t)ng - 1; k >= 0; k--) {
        gs[k] = gr[k] ? 0 : ostr;
        if (!gr[k])
            ostr *= gd[k];
    }
    const int64_t cols = gd[ng - 1];
    const bool inner_red = gr[ng - 1];
    int64_t rows = 1, idx[CPU_MAX_RANK] = {0}, off = 0;
    for (uint32_t k = 0; k + 1 < ng; k++)
        rows *= gd[k];
    for (int64_t row = 0; row < rows; row++, in += cols) {
        float *yo = y + off;
        if (inner_red) {
            if (kind == R_MAX) {
                float m = *yo;
                for (int64_t i = 0; i < cols; i++)
                    m = in[i] > m ? in[i] : m;
                *yo = m;
            } else {
                float acc = 0;
                for (int64_t i = 0; i < cols; i++)
                    acc += in[i];
                *yo += acc;
            }
        } else if (kind == R_MAX) {
            for (int64_t i = 0; i < cols; i++)
                yo[i] = in[i] > yo[i] ? in[i] : yo[i];
        } else {
            for (int64_t i = 0; i < cols; i++)
                yo[i] += in[i];
        }
        for (int32_t k = (int32_t)ng - 2; k >= 0; k--) {
            off += gs[k];
            if (++idx[k] < gd[k])
                break;
            off -= gs[k] * gd[k];
            idx[k] = 0;
        }
    }
    if (kind == R_MEAN) {
        float inv = 1.0f / (float)count;
        for (int64_t i = 0; i < nout; i++)
            y[i] *= inv;
    }
    return KILN_OK;
}

CPU_KERNEL(cpu_reduce_max) { return reduce(state, a, err, R_MAX); }

CPU_KERNEL(cpu_reduce_mean) { return reduce(state, a, err, R_MEAN); }

/* ---- Softmax ------------------------------------------------------------- */

typedef struct softmax_state {
    int64_t axis;
    bool coerce_2d; /* opset < 13 */
} softmax_state;

CPU_PREPARE(cpu_softmax_prepare)
{
    kiln_status st = cpu_state_new(g, n, sizeof(softmax_state), state, err);
    if (st != KILN_OK)
        return st;
    softmax_state *s = *state;
    s->coerce_2d = cpu_opset(g, 17) < 13;
    s->axis = cpu_attr_int(g, n, "axis", s->coerce_2d ? 1 : -1);
    return KILN_OK;
}

/* Softmax over @p n elements @p stride apart. */
static void softmax_strided(const float *x, float *y, int64_t n, int64_t stride)
{
    float m = -INFINITY;
    for (int64_t k = 0; k < n; k++)
        m = x[k * stride] > m ? x[k * stride] : m;
    float sum = 0;
    for (int64_t k = 0; k < n; k++) {
        float e = expf(x[k * stride] - m);
        y[k * stride] = e;
        sum += e;
    }
    float inv = 1.0f / sum;
    for (int64_t k = 0; k < n; k++)
        y[k * stride] *= inv;
}

/* The contiguous case, kept separate so the compiler vectorises it. */
static void softmax_row(const float *x, float *y, int64_t n)
{
    float m = -INFINITY;
    for (int64_t k = 0; k < n; k++)
        m = x[k] > m ? x[k] : m;
    float sum = 0;
    for (int64_t k = 0; k < n; k++) {
        y[k] = expf(x[k] - m);
        sum += y[k];
    }
    float inv = 1.0f / sum;
    for (int64_t k = 0; k < n; k++)
        y[k] *= inv;
}

CPU_KERNEL(cpu_softmax)
{
    const softmax_state *s = state;
    if (!s || !cpu_has_input(a, 0) || a->output_count < 1)
        return cpu_fail(a, err, KILN_ERR_INVALID, "input 0 or output 0 missing");
    const kiln_tensor *x = &a->inputs[0];
    if (x->dtype != KILN_DT_FLOAT32 || a->outputs[0].dtype != KILN_DT_FLOAT32)
        return cpu_fail(a, err, KILN_ERR_UNSUPPORTED, "dtype %s not supported",
                        kiln_dtype_name(x->dtype));
    kiln_status st = cpu_check_out_dims(a, 0, x->rank, x->dims, err);
    if (st != KILN_OK)
        return st;
    int64_t r = x->rank, axis = s->axis;
    if (r == 0 || axis < -r || axis >= r)
        return cpu_fail(a, err, KILN_ERR_INVALID, "axis %lld out of range for rank %lld",
                        (long long)axis, (long long)r);
    if (axis < 0)
        axis += r;
    int64_t outer = 1, n = 1, inner = 1;
    for (int64_t d = 0; d < r; d++) {
        if (d < axis)
            outer *= x->dims[d];
        else if (d == axis || s->coerce_2d)
            n *= x->dims[d];
        else
            inner *= x->dims[d];
    }
    const float *in = x->data;
    float *y = a->outputs[0].data;
    for (int64_t o = 0; o < outer; o++) {
        const float *xo = in + o * n * inner;
        float *yo = y + o * n * inner;
        if (inner == 1) {
            softmax_row(xo, yo, n);
        } else {
            for (int64_t j = 0; j < inner; j++)
                softmax_strided(xo + j, yo + j, n, inner);
        }
    }
    return KILN_OK;
}

/* ---- LayerNormalization ---------------------------------------------------- */

typedef struct layernorm_state {
    int64_t axis;
    float epsilon;
} layernorm_state;

CPU_PREPARE(cpu_layernorm_prepare)
{
    kiln_status st = cpu_state_new(g, n, sizeof(layernorm_state), state, err);
    if (st != KILN_OK)
        return st;
    layernorm_state *s = *state;
    s->axis = cpu_attr_int(g, n, "axis", -1);
    s->epsilon = (float)cpu_attr_float(g, n, "epsilon", 1e-5);
    return KILN_OK;
}

CPU_KERNEL(cpu_layernorm)
{
    const layernorm_state *s = state;
    if (!s || !cpu_has_input(a, 0) || !cpu_has_input(a, 1) || a->output_count < 1)
        return cpu_fail(a, err, KILN_ERR_INVALID, "input X, input Scale or output Y missing");
    const kiln_tensor *x = &a->inputs[0];
    if (x->dtype != KILN_DT_FLOAT32 || a->outputs[0].dtype != KILN_DT_FLOAT32)
        return cpu_fail(a, err, KILN_ERR_UNSUPPORTED, "dtype %s not supported",
                        kiln_dtype_name(x->dtype));
    kiln_status st = cpu_check_out_dims(a, 0, x->rank, x->dims, err);
    if (st != KILN_OK)
        return st;
    const int64_t r = x->rank;
    int64_t axis = s->axis;
    if (r == 0 || axis < -r || axis >= r)
        return cpu_fail(a, err, KILN_ERR_INVALID, "axis %lld out of range for rank %lld",
                        (long long)axis, (long long)r);
    if (axis < 0)
        axis += r;
    int64_t rows = 1, n = 1;
    for (int64_t d = 0; d < r; d++)
        *(d < axis ? &rows : &n) *= x->dims[d];
    const kiln_tensor *sc = &a->inputs[1];
    const kiln_tensor *bi = cpu_has_input(a, 2) ? &a->inputs[2] : NULL;
    const int64_t nsc = cpu_numel(sc), nbi = bi ? cpu_numel(bi) : 1;
    if (sc->dtype != KILN_DT_FLOAT32 || (nsc != n && nsc != 1) ||
        (bi && (bi->dtype != KILN_DT_FLOAT32 || (nbi != n && nbi != 1))))
        return cpu_fail(a, err, KILN_ERR_INVALID,
                        "Scale (%lld elements) and B (%lld) must be float32 of %lld elements "
                        "(the normalised shape) or one",
                        (long long)nsc, (long long)nbi, (long long)n);
    float *mean_out = NULL, *inv_out = NULL;
    for (uint32_t o = 1; o < a->output_count && o < 3; o++) {
        if (!a->outputs[o].data)
            continue;
        if (a->outputs[o].dtype != KILN_DT_FLOAT32 || cpu_numel(&a->outputs[o]) != rows)
            return cpu_fail(a, err, KILN_ERR_INVALID, "output %u must be float32 of %lld elements",
                            o, (long long)rows);
        *(o == 1 ? &mean_out : &inv_out) = a->outputs[o].data;
    }
    const float *in = x->data, *g = sc->data, *b = bi ? bi->data : NULL;
    const int64_t gs = nsc == n ? 1 : 0, bs = nbi == n ? 1 : 0;
    float *y = a->outputs[0].data;
    const float fn = (float)n;
    for (int64_t o = 0; o < rows; o++) {
        const float *xr = in + o * n;
        float *yr = y + o * n;
        float sum = 0.0f;
        for (int64_t k = 0; k < n; k++)
            sum += xr[k];
        const float mean = sum / fn;
        float sq = 0.0f;
        for (int64_t k = 0; k < n; k++) {
            const float d = xr[k] - mean;
            yr[k] = d;
            sq += d * d;
        }
        const float den = sqrtf(sq / fn + s->epsilon);
        for (int64_t k = 0; k < n; k++) {
            const float v = yr[k] / den * g[k * gs];
            yr[k] = b ? v + b[k * bs] : v;
        }
        if (mean_out)
            mean_out[o] = mean;
        if (inv_out)
            inv_out[o] = 1.0f / den;
    }
    return KILN_OK;
}

/*
 * basic_reduce.c - reductions and Softmax on float32.
 *
 * ReduceMax / ReduceMean / ReduceSum: keepdims (default 1), axes as attribute
 * (before opset 18; ReduceSum before 13) or input 1, negative axes; no axes = every axis unless
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
#include "cpu_vexp.h"
#include "cpu_par.h"

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

enum reduce_kind { R_MAX, R_MEAN, R_SUM };

typedef struct reduce_job {
    enum reduce_kind kind;
    const float *in;
    float *y;
    uint32_t ng;              /* groups of reduced / kept dims */
    int64_t gd[CPU_MAX_RANK]; /* group sizes */
    int64_t gs[CPU_MAX_RANK]; /* output strides of the groups (0: reduced) */
    int64_t rows, cols;       /* rows: product of all groups but the last */
    bool inner_red, col_split;
    int64_t rows_per; /* rows per index of group 0 (split on it) */
} reduce_job;

/* Rows [r0, r1), columns [c0, c1) of each, into the output. */
static void reduce_walk(const reduce_job *j, int64_t r0, int64_t r1, int64_t c0, int64_t c1)
{
    const int64_t cols = j->cols;
    const uint32_t ng = j->ng;
    int64_t idx[CPU_MAX_RANK] = {0}, off = 0;
    for (int64_t k = (int64_t)ng - 2, rem = r0; k >= 0; k--) {
        idx[k] = rem % j->gd[k];
        rem /= j->gd[k];
        off += idx[k] * j->gs[k];
    }
    const float *in = j->in + r0 * cols;
    for (int64_t row = r0; row < r1; row++, in += cols) {
        float *yo = j->y + off;
        if (j->inner_red) {
            if (j->kind == R_MAX) {
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
        } else if (j->kind == R_MAX) {
            for (int64_t i = c0; i < c1; i++)
                yo[i] = in[i] > yo[i] ? in[i] : yo[i];
        } else {
            for (int64_t i = c0; i < c1; i++)
                yo[i] += in[i];
        }
        for (int32_t k = (int32_t)ng - 2; k >= 0; k--) {
            off += j->gs[k];
            if (++idx[k] < j->gd[k])
                break;
            off -= j->gs[k] * j->gd[k];
            idx[k] = 0;
        }
    }
}

static void reduce_part(void *ctx, int64_t lo, int64_t hi)
{
    const reduce_job *j = ctx;
    if (j->col_split)
        reduce_walk(j, 0, j->rows, lo, hi);
    else
        reduce_walk(j, lo * j->rows_per, hi * j->rows_per, 0, j->cols);
}

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
    reduce_job j = {kind, x->data, y, ng, {0}, {0}, 1, gd[ng - 1], gr[ng - 1], 0, 0};
    for (uint32_t k = 0; k < ng; k++)
        j.gd[k] = gd[k], j.gs[k] = gs[k];
    for (uint32_t k = 0; k + 1 < ng; k++)
        j.rows *= gd[k];
    /* Shared out so that each output element is accumulated by one thread in
     * the serial order: whole slices of the first dim when it is kept (their
     * outputs are disjoint), else column ranges when the last dim is kept. */
    if (ng >= 2 && !gr[0] && gd[0] >= 2) {
        j.col_split = false;
        j.rows_per = j.rows / gd[0];
        cpu_par_for(gd[0], j.rows_per * j.cols, reduce_part, &j);
    } else if (!j.inner_red) {
        j.col_split = true;
        cpu_par_for(j.cols, j.rows, reduce_part, &j);
    } else {
        reduce_walk(&j, 0, j.rows, 0, j.cols);
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

CPU_KERNEL(cpu_reduce_sum) { return reduce(state, a, err, R_SUM); }

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
CPU_VEC_CLONES static void softmax_strided(const float *x, float *y, int64_t n, int64_t stride)
{
    float m = -INFINITY;
    for (int64_t k = 0; k < n; k++)
        m = x[k * stride] > m ? x[k * stride] : m;
    float sum = 0;
    for (int64_t k = 0; k < n; k++) {
        float e = cpu_expf(x[k * stride] - m);
        y[k * stride] = e;
        sum += e;
    }
    float inv = 1.0f / sum;
    for (int64_t k = 0; k < n; k++)
        y[k * stride] *= inv;
}

/* The contiguous case, kept separate so the compiler vectorises it: the max
 * and the sum over 16 interleaved lanes (lane j takes elements j, j + 16, ...),
 * combined in lane order, so every vector width (and the scalar build) adds in
 * the same order and gives the same bits. */
CPU_VEC_CLONES static void softmax_row(const float *x, float *y, int64_t n)
{
    enum { L = 16 };
    float lm[L], ls[L];
    for (int j = 0; j < L; j++)
        lm[j] = -INFINITY;
    int64_t k = 0;
    for (; k + L <= n; k += L)
        for (int j = 0; j < L; j++)
            lm[j] = x[k + j] > lm[j] ? x[k + j] : lm[j];
    float m = -INFINITY;
    for (int j = 0; j < L; j++)
        m = lm[j] > m ? lm[j] : m;
    for (; k < n; k++)
        m = x[k] > m ? x[k] : m;
    for (k = 0; k < n; k++) /* vectorised */
        y[k] = cpu_expf(x[k] - m);
    for (int j = 0; j < L; j++)
        ls[j] = 0.0f;
    for (k = 0; k + L <= n; k += L)
        for (int j = 0; j < L; j++)
            ls[j] += y[k + j];
    float sum = 0;
    for (int j = 0; j < L; j++)
        sum += ls[j];
    for (; k < n; k++)
        sum += y[k];
    float inv = 1.0f / sum;
    for (k = 0; k < n; k++)
        y[k] *= inv;
}

typedef struct softmax_job {
    const float *x;
    float *y;
    int64_t n, inner;
} softmax_job;

/* Lines [lo, hi) of (outer, inner): line q is outer q / inner, inner q % inner. */
static void softmax_lines(void *ctx, int64_t lo, int64_t hi)
{
    const softmax_job *j = ctx;
    for (int64_t q = lo; q < hi; q++) {
        const int64_t o = q / j->inner, i = q % j->inner;
        const float *xo = j->x + o * j->n * j->inner + i;
        float *yo = j->y + o * j->n * j->inner + i;
        if (j->inner == 1)
            softmax_row(xo, yo, j->n);
        else
            softmax_strided(xo, yo, j->n, j->inner);
    }
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
    /* Each (outer, inner) line is normalised alone, by one thread: the
     * lines are shared out, never a line's sum. */
    softmax_job j = {x->data, a->outputs[0].data, n, inner};
    cpu_par_for(outer * inner, n * 8, softmax_lines, &j);
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

typedef struct layernorm_job {
    const layernorm_state *s;
    const float *in, *g, *b;
    float *y, *mean_out, *inv_out;
    int64_t n, gs, bs;
} layernorm_job;

static void layernorm_rows(void *ctx, int64_t lo, int64_t hi)
{
    const layernorm_job *j = ctx;
    const int64_t n = j->n, gs = j->gs, bs = j->bs;
    const float *g = j->g, *b = j->b;
    const float fn = (float)n;
    for (int64_t o = lo; o < hi; o++) {
        const float *xr = j->in + o * n;
        float *yr = j->y + o * n;
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
        const float den = sqrtf(sq / fn + j->s->epsilon);
        for (int64_t k = 0; k < n; k++) {
            const float v = yr[k] / den * g[k * gs];
            yr[k] = b ? v + b[k * bs] : v;
        }
        if (j->mean_out)
            j->mean_out[o] = mean;
        if (j->inv_out)
            j->inv_out[o] = 1.0f / den;
    }
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
    layernorm_job j = {s,        x->data, sc->data, bi ? bi->data : NULL, a->outputs[0].data,
                       mean_out, inv_out, n,        nsc == n ? 1 : 0,     nbi == n ? 1 : 0};
    /* rows are independent: shared out whole, a row's sums stay serial */
    cpu_par_for(rows, n * 4, layernorm_rows, &j);
    return KILN_OK;
}

/*
 * nn_norm_pool.c - ONNX BatchNormalization, AveragePool, MaxPool,
 * GlobalAveragePool and GlobalMaxPool on the CPU (float32, NC + 1-3 spatial
 * dims).
 *
 * BatchNormalization: inference form Y = (X - mean) / sqrt(var + epsilon) *
 * scale + B, folded into one multiply-add per element; training_mode = 1
 * (opset 14+) normalises with the batch statistics and writes the running
 * mean/var (momentum) to outputs 1 and 2.
 *
 * Pools: windows per nn_geom_forward (kernel_shape, strides, dilations,
 * pads, auto_pad, ceil_mode).  AveragePool divides by the in-bounds count,
 * or with count_include_pad = 1 by the count inside the padded input (the
 * ceil_mode overhang past the end pad never counts).  MaxPool skips padding;
 * its optional Indices output (int64) is the flat index into X, row-major
 * (storage_order 0) or column-major over the spatial dims (storage_order 1).
 */
#include "nn_ops.h"

#include "cpu_par.h"

#include <math.h>
#include <string.h>

/* the OpenMP runtime stays loaded once this plugin is (cpu_par.h) */
CPU_PAR_KEEP_RUNTIME()

/* ---- BatchNormalization ----------------------------------------------------- */

typedef struct bn_state {
    float epsilon, momentum;
    bool training;
} bn_state;

NN_PREPARE(nn_batchnorm_prepare)
{
    bn_state *s;
    kiln_status st = cpu_state_new(g, n, sizeof(*s), state, err);
    if (st)
        return st;
    s = *state;
    s->epsilon = (float)cpu_attr_float(g, n, "epsilon", 1e-5);
    s->momentum = (float)cpu_attr_float(g, n, "momentum", 0.9);
    s->training = cpu_attr_int(g, n, "training_mode", 0) != 0;
    return KILN_OK;
}

/* Batch statistics of channel c over N and the spatial block (population variance). */
static void channel_stats(const float *x, int64_t N, int64_t C, int64_t S, int64_t c,
                          double *mean, double *var)
{
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < N; i++) {
        const float *xc = x + (i * C + c) * S;
        for (int64_t j = 0; j < S; j++)
            sum += xc[j];
    }
    const double cnt = (double)(N * S), m = cnt > 0 ? sum / cnt : 0;
    for (int64_t i = 0; i < N; i++) {
        const float *xc = x + (i * C + c) * S;
        for (int64_t j = 0; j < S; j++)
            sq += (xc[j] - m) * (xc[j] - m);
    }
    *mean = m;
    *var = cnt > 0 ? sq / cnt : 0;
}

/* Inference BatchNormalization of planes [lo, hi) of (N, C). */
typedef struct bn_job {
    const bn_state *s;
    const float *x;
    float *y;
    const float *scale, *bias, *mean, *var;
    int64_t C, S;
} bn_job;

static void bn_planes(void *ctx, int64_t lo, int64_t hi)
{
    const bn_job *j = ctx;
    for (int64_t p = lo; p < hi; p++) {
        const int64_t c = p % j->C;
        const double m = j->mean[c], v = j->var[c];
        const float k = (float)(j->scale[c] / sqrt(v + j->s->epsilon));
        const float b = (float)(j->bias[c] - m * k);
        const float *xc = j->x + p * j->S;
        float *yc = j->y + p * j->S;
        for (int64_t i = 0; i < j->S; i++)
            yc[i] = xc[i] * k + b;
    }
}

NN_KERNEL(nn_batchnorm_run)
{
    const bn_state *s = state;
    kiln_status st = nn_check_float_inputs(a, 0, 5, true, err);
    if (st)
        return st;
    for (uint32_t i = 0; i < 5; i++)
        if (!cpu_has_input(a, i))
            return cpu_fail(a, err, KILN_ERR_INVALID, "input %u is required", i);
    const kiln_tensor *X = &a->inputs[0];
    if (X->rank < 2)
        return cpu_fail(a, err, KILN_ERR_INVALID, "X must have rank >= 2");
    const int64_t N = X->dims[0], C = X->dims[1];
    int64_t S = 1;
    for (uint32_t d = 2; d < X->rank; d++)
        S *= X->dims[d];
    for (uint32_t i = 1; i < 5; i++)
        if (cpu_numel(&a->inputs[i]) != C)
            return cpu_fail(a, err, KILN_ERR_INVALID, "input %u has %lld values for %lld channels",
                            i, (long long)cpu_numel(&a->inputs[i]), (long long)C);
    if ((st = cpu_check_out_dims(a, 0, X->rank, X->dims, err)) != KILN_OK)
        return st;
    const float *x = X->data, *scale = a->inputs[1].data, *bias = a->inputs[2].data;
    const float *mean = a->inputs[3].data, *var = a->inputs[4].data;
    float *y = a->outputs[0].data;
    float *rm = NULL, *rv = NULL;
    for (uint32_t o = 1; o < 3 && o < a->output_count; o++)
        if (a->outputs[o].data && a->outputs[o].nbytes == (size_t)C * sizeof(float))
            *(o == 1 ? &rm : &rv) = a->outputs[o].data;
    if (!s->training) {
        if (rm)
            memmove(rm, mean, (size_t)C * sizeof(float));
        if (rv)
            memmove(rv, var, (size_t)C * sizeof(float));
        /* planes (n, c) are independent: shared out whole */
        bn_job j = {s, x, y, scale, bias, mean, var, C, S};
        cpu_par_for(N * C, S, bn_planes, &j);
        return KILN_OK;
    }
    for (int64_t c = 0; c < C; c++) {
        double m = mean[c], v = var[c];
        double bm, bv;
        channel_stats(x, N, C, S, c, &bm, &bv);
        if (rm)
            rm[c] = (float)(m * s->momentum + bm * (1.0 - s->momentum));
        if (rv)
            rv[c] = (float)(v * s->momentum + bv * (1.0 - s->momentum));
        m = bm;
        v = bv;
        const float k = (float)(scale[c] / sqrt(v + s->epsilon));
        const float b = (float)(bias[c] - m * k);
        for (int64_t i = 0; i < N; i++) {
            const float *xc = x + (i * C + c) * S;
            float *yc = y + (i * C + c) * S;
            for (int64_t j = 0; j < S; j++)
                yc[j] = xc[j] * k + b;
        }
    }
    return KILN_OK;
}

/* ---- AveragePool / MaxPool ---------------------------------------------------- */

typedef struct pool_state {
    nn_win win;
    bool count_include_pad;
    bool col_major; /* storage_order 1 */
} pool_state;

NN_PREPARE(nn_pool_prepare)
{
    pool_state *s;
    kiln_status st = cpu_state_new(g, n, sizeof(*s), state, err);
    if (st)
        return st;
    s = *state;
    if ((st = nn_win_read(g, n, &s->win, err)) != KILN_OK)
        return st;
    if (!s->win.nk)
        return cpu_fail_node(g, n, err, KILN_ERR_INVALID, "kernel_shape is required");
    s->count_include_pad = cpu_attr_int(g, n, "count_include_pad", 0) != 0;
    s->col_major = cpu_attr_int(g, n, "storage_order", 0) != 0;
    return KILN_OK;
}

/* Kernel taps [lo, hi) of a window starting at @p start that land in [0, len). */
static void taps(int64_t start, int64_t k, int64_t d, int64_t len, int64_t *lo, int64_t *hi)
{
    int64_t l = start >= 0 ? 0 : (-start + d - 1) / d;
    int64_t h = len - start <= 0 ? 0 : (len - start + d - 1) / d;
    if (h > k)
        h = k;
    *lo = l;
    *hi = h > l ? h : l;
}

static kiln_status pool_setup(const pool_state *s, const kiln_kernel_args *a, nn_geom *geo,
                              kiln_error *err)
{
    kiln_status st = nn_check_float_inputs(a, 0, 1, true, err);
    if (st)
        return st;
    if (!cpu_has_input(a, 0))
        return cpu_fail(a, err, KILN_ERR_INVALID, "X is required");
    const kiln_tensor *X = &a->inputs[0];
    if (X->rank < 3)
        return cpu_fail(a, err, KILN_ERR_INVALID, "X must have rank >= 3");
    if ((st = nn_geom_forward(&s->win, X->rank - 2, X->dims + 2, NULL, geo, a, err)) != KILN_OK)
        return st;
    return nn_check_out_geom(a, X->dims[0], X->dims[1], geo, err);
}

/* A pool over planes [lo, hi) of (N, C) (cpu_par_for: each plane's outputs
 * belong to it alone). */
typedef struct pool_job {
    const pool_state *s;
    const nn_geom *g;
    const float *x;
    float *y;
    int64_t *ind;
} pool_job;

static int64_t pool_out_size(const nn_geom *g) { return g->out[0] * g->out[1] * g->out[2]; }

static void avgpool_planes(void *ctx, int64_t lo, int64_t hi)
{
    const pool_job *j = ctx;
    const pool_state *s = j->s;
    const nn_geom g = *j->g;
    const int64_t IS = nn_geom_in_size(&g);
    float *y = j->y + lo * pool_out_size(&g);
    for (int64_t nc = lo; nc < hi; nc++) {
        const float *xc = j->x + nc * IS;
        for (int64_t od = 0; od < g.out[0]; od++) {
            const int64_t sd = od * g.s[0] - g.pb[0];
            int64_t d0, d1, dp0, dp1;
            taps(sd, g.k[0], g.d[0], g.in[0], &d0, &d1);
            taps(sd + g.pb[0], g.k[0], g.d[0], g.in[0] + g.pb[0] + g.pe[0], &dp0, &dp1);
            for (int64_t oh = 0; oh < g.out[1]; oh++) {
                const int64_t sh = oh * g.s[1] - g.pb[1];
                int64_t h0, h1, hp0, hp1;
                taps(sh, g.k[1], g.d[1], g.in[1], &h0, &h1);
                taps(sh + g.pb[1], g.k[1], g.d[1], g.in[1] + g.pb[1] + g.pe[1], &hp0, &hp1);
                for (int64_t ow = 0; ow < g.out[2]; ow++) {
                    const int64_t sw = ow * g.s[2] - g.pb[2];
                    int64_t w0, w1, wp0, wp1;
                    taps(sw, g.k[2], g.d[2], g.in[2], &w0, &w1);
                    taps(sw + g.pb[2], g.k[2], g.d[2], g.in[2] + g.pb[2] + g.pe[2], &wp0, &wp1);
                    float sum = 0;
                    for (int64_t kd = d0; kd < d1; kd++)
                        for (int64_t kh = h0; kh < h1; kh++) {
                            const float *xr =
                                xc + ((sd + kd * g.d[0]) * g.in[1] + sh + kh * g.d[1]) * g.in[2];
                            for (int64_t kw = w0; kw < w1; kw++)
                                sum += xr[sw + kw * g.d[2]];
                        }
                    const int64_t cnt = s->count_include_pad
                                            ? (dp1 - dp0) * (hp1 - hp0) * (wp1 - wp0)
                                            : (d1 - d0) * (h1 - h0) * (w1 - w0);
                    *y++ = cnt > 0 ? sum / (float)cnt : 0.0f;
                }
            }
        }
    }
}

/* Window taps per output element (the work of one, relative to an add). */
static int64_t pool_taps(const nn_geom *g) { return g->k[0] * g->k[1] * g->k[2]; }

NN_KERNEL(nn_avgpool_run)
{
    const pool_state *s = state;
    nn_geom g;
    kiln_status st = pool_setup(s, a, &g, err);
    if (st)
        return st;
    const kiln_tensor *X = &a->inputs[0];
    pool_job j = {s, &g, X->data, a->outputs[0].data, NULL};
    cpu_par_for(X->dims[0] * X->dims[1], pool_out_size(&g) * pool_taps(&g), avgpool_planes, &j);
    return KILN_OK;
}

static void maxpool_planes(void *ctx, int64_t lo, int64_t hi)
{
    const pool_job *j = ctx;
    const pool_state *s = j->s;
    const nn_geom g = *j->g;
    const int64_t IS = nn_geom_in_size(&g), OS = pool_out_size(&g);
    float *y = j->y + lo * OS;
    int64_t *ind = j->ind ? j->ind + lo * OS : NULL;
    for (int64_t nc = lo; nc < hi; nc++) {
        const float *xc = j->x + nc * IS;
        for (int64_t od = 0; od < g.out[0]; od++) {
            const int64_t sd = od * g.s[0] - g.pb[0];
            int64_t d0, d1;
            taps(sd, g.k[0], g.d[0], g.in[0], &d0, &d1);
            for (int64_t oh = 0; oh < g.out[1]; oh++) {
                const int64_t sh = oh * g.s[1] - g.pb[1];
                int64_t h0, h1;
                taps(sh, g.k[1], g.d[1], g.in[1], &h0, &h1);
                for (int64_t ow = 0; ow < g.out[2]; ow++) {
                    const int64_t sw = ow * g.s[2] - g.pb[2];
                    int64_t w0, w1;
                    taps(sw, g.k[2], g.d[2], g.in[2], &w0, &w1);
                    float best = -INFINITY;
                    int64_t bd = 0, bh = 0, bw = 0;
                    bool found = false;
                    for (int64_t kd = d0; kd < d1; kd++)
                        for (int64_t kh = h0; kh < h1; kh++) {
                            const int64_t id = sd + kd * g.d[0], ih = sh + kh * g.d[1];
                            const float *xr = xc + (id * g.in[1] + ih) * g.in[2];
                            for (int64_t kw = w0; kw < w1; kw++) {
                                const int64_t iw = sw + kw * g.d[2];
                                if (!found || xr[iw] > best) {
                                    found = true;
                                    best = xr[iw];
                                    bd = id, bh = ih, bw = iw;
                                }
                            }
                        }
                    *y++ = best;
                    if (ind)
                        *ind++ = nc * IS + (s->col_major
                                                ? bd + g.in[0] * (bh + g.in[1] * bw)
                                                : (bd * g.in[1] + bh) * g.in[2] + bw);
                }
            }
        }
    }
}

NN_KERNEL(nn_maxpool_run)
{
    const pool_state *s = state;
    nn_geom g;
    kiln_status st = pool_setup(s, a, &g, err);
    if (st)
        return st;
    const kiln_tensor *X = &a->inputs[0];
    int64_t *ind = NULL;
    if (a->output_count > 1 && a->outputs[1].data) {
        if (a->outputs[1].dtype != KILN_DT_INT64 ||
            a->outputs[1].nbytes != a->outputs[0].nbytes * 2)
            return cpu_fail(a, err, KILN_ERR_INVALID, "Indices must be int64 shaped like Y");
        ind = a->outputs[1].data;
    }
    pool_job j = {s, &g, X->data, a->outputs[0].data, ind};
    cpu_par_for(X->dims[0] * X->dims[1], pool_out_size(&g) * pool_taps(&g), maxpool_planes, &j);
    return KILN_OK;
}

/* ---- global pools ------------------------------------------------------------- */

/* Global pool of planes [lo, hi) of (N, C): one accumulator per plane. */
typedef struct gpool_job {
    const float *x;
    float *y;
    int64_t S;
    bool is_max;
} gpool_job;

static void gpool_planes(void *ctx, int64_t lo, int64_t hi)
{
    const gpool_job *j = ctx;
    const int64_t S = j->S;
    const bool is_max = j->is_max;
    const float *x = j->x + lo * S;
    for (int64_t nc = lo; nc < hi; nc++, x += S) {
        float acc = is_max ? -INFINITY : 0.0f;
        for (int64_t i = 0; i < S; i++)
            acc = is_max ? (x[i] > acc ? x[i] : acc) : acc + x[i];
        j->y[nc] = is_max ? acc : (S > 0 ? acc / (float)S : 0.0f);
    }
}

static kiln_status global_pool(const kiln_kernel_args *a, bool is_max, kiln_error *err)
{
    kiln_status st = nn_check_float_inputs(a, 0, 1, true, err);
    if (st)
        return st;
    if (!cpu_has_input(a, 0) || a->inputs[0].rank < 2 || a->inputs[0].rank > CPU_MAX_RANK)
        return cpu_fail(a, err, KILN_ERR_INVALID, "X must have rank 2 to %d", CPU_MAX_RANK);
    const kiln_tensor *X = &a->inputs[0];
    int64_t od[CPU_MAX_RANK];
    int64_t S = 1;
    for (uint32_t i = 0; i < X->rank; i++) {
        od[i] = i < 2 ? X->dims[i] : 1;
        if (i >= 2)
            S *= X->dims[i];
    }
    if ((st = cpu_check_out_dims(a, 0, X->rank, od, err)) != KILN_OK)
        return st;
    gpool_job j = {X->data, a->outputs[0].data, S, is_max};
    cpu_par_for(X->dims[0] * X->dims[1], S, gpool_planes, &j);
    return KILN_OK;
}

NN_KERNEL(nn_global_avgpool_run)
{
    (void)state;
    return global_pool(a, false, err);
}

NN_KERNEL(nn_global_maxpool_run)
{
    (void)state;
    return global_pool(a, true, err);
}

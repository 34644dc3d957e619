/*
 * nn_conv.c - ONNX Conv on the CPU: im2col + cblas_sgemm per (image, group).
 *
 * X [N, C, (D,) (H,) W], W [M, C/group, k...], optional B [M];
 * attributes kernel_shape, strides, dilations, pads (begin..., end...; may be
 * asymmetric), auto_pad (NOTSET, SAME_UPPER, SAME_LOWER, VALID) and group
 * (1, depthwise, or anything dividing C and M).  1-D, 2-D and 3-D convs share
 * one path: the geometry is normalised to (D, H, W) with leading 1s.
 *
 * Per image and group: col [Cg*kd*kh*kw, OD*OH*OW] = im2col(X_g), then
 * Y_g [Mg, OS] = W_g [Mg, K] * col (+ bias pre-filled into Y, beta = 1).
 * A 1x1 stride-1 unpadded conv skips im2col: X_g already is col.  The col
 * buffer is sized in prepare() when the descriptors are static.  A Conv the
 * engine fused with its activation (nn_fusion.c) applies it per (image,
 * group) right after the GEMM.
 *
 * That is the fallback: by default prepare() builds the node's oneDNN
 * convolution (nn_dnnl.c) and the calls run it; im2col + OpenBLAS serves the
 * nodes oneDNN refuses (dynamic shapes, dtypes, geometry), calls whose
 * shapes differ from the prepared ones, and every Conv under the session
 * option aicore.conv_backend=blas.  With KILN_AICORE_ONEDNN_STRICT=1 in the
 * environment a refusal is an error naming the node and oneDNN's reason
 * instead (tests use it to make sure the oneDNN path ran).
 */
#include "nn_ops.h"

#include "nn_blas.h"
#include <stdlib.h>
#include <string.h>

typedef struct conv_state {
    nn_win win;
    int64_t group;
    nn_act act;
    nn_buf col;
    nn_dnnl_conv *dnnl; /* NULL: the BLAS path */
    bool nhwc;          /* data_format NHWC: X and Y are [N, H, W, C] */
} conv_state;

bool nn_conv_wants_dnnl(const kiln_graph *g, kiln_node_id n)
{
    const char *b = cpu_attr_str(g, n, "_kiln_conv_backend", NULL);
    return !b || strcmp(b, "blas") != 0;
}

void nn_im2col(const float *x, int64_t c, const nn_geom *g, float *col)
{
    const int64_t ID = g->in[0], IH = g->in[1], IW = g->in[2];
    const int64_t OD = g->out[0], OH = g->out[1], OW = g->out[2];
    const int64_t KD = g->k[0], KH = g->k[1], KW = g->k[2];
    const int64_t IS = ID * IH * IW, OS = OD * OH * OW;
    float *row = col;
    for (int64_t ch = 0; ch < c; ch++) {
        const float *xc = x + ch * IS;
        for (int64_t kd = 0; kd < KD; kd++)
            for (int64_t kh = 0; kh < KH; kh++)
                for (int64_t kw = 0; kw < KW; kw++, row += OS) {
                    const int64_t offw = kw * g->d[2] - g->pb[2];
                    int64_t lo = nn_first_in_range(offw, g->s[2]);
                    if (lo > OW)
                        lo = OW;
                    const int64_t hi = nn_end_in_range(offw, g->s[2], IW, lo, OW);
                    float *r = row;
                    for (int64_t od = 0; od < OD; od++) {
                        const int64_t id = od * g->s[0] - g->pb[0] + kd * g->d[0];
                        for (int64_t oh = 0; oh < OH; oh++, r += OW) {
                            const int64_t ih = oh * g->s[1] - g->pb[1] + kh * g->d[1];
                            if (id < 0 || id >= ID || ih < 0 || ih >= IH) {
                                memset(r, 0, (size_t)OW * sizeof(float));
                                continue;
                            }
                            const float *xr = xc + (id * IH + ih) * IW;
                            if (lo > 0)
                                memset(r, 0, (size_t)lo * sizeof(float));
                            if (g->s[2] == 1) {
                                if (hi > lo)
                                    memcpy(r + lo, xr + lo + offw,
                                           (size_t)(hi - lo) * sizeof(float));
                            } else {
                                for (int64_t ow = lo; ow < hi; ow++)
                                    r[ow] = xr[ow * g->s[2] + offw];
                            }
                            if (hi < OW)
                                memset(r + hi, 0, (size_t)(OW - hi) * sizeof(float));
                        }
                    }
                }
    }
}

/*
 * A depthwise 1-D convolution (group = C, W [C * mult, 1, k]) by direct loops:
 * per output channel, each tap adds w[k] * x over the output positions it
 * reaches (contiguous for stride 1, so the loop vectorises).  oneDNN runs
 * this shape as one small GEMM per channel (silero's 258 channels x 24: about
 * 0.1 ms against a few microseconds here), and the BLAS path does the same.
 */
static bool is_dw1d(int64_t rank, int64_t C, int64_t G, int64_t Cg)
{
    return rank == 3 && G > 1 && G == C && Cg == 1;
}

static void conv_dw1d(const float *x, const float *w, const float *b, float *y, int64_t N,
                      int64_t C, int64_t Mg, const nn_geom *g, const nn_act *act)
{
    const int64_t IW = g->in[2], OW = g->out[2], K = g->k[2], st = g->s[2], dl = g->d[2];
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++) {
            const float *xc = x + (n * C + c) * IW;
            for (int64_t m = 0; m < Mg; m++) {
                const int64_t oc = c * Mg + m;
                const float *wk = w + oc * K;
                float *yo = y + (n * C * Mg + oc) * OW;
                const float bias = b ? b[oc] : 0.0f;
                for (int64_t o = 0; o < OW; o++)
                    yo[o] = bias;
                for (int64_t k = 0; k < K; k++) {
                    const int64_t off = k * dl - g->pb[2];
                    int64_t lo = nn_first_in_range(off, st);
                    if (lo > OW)
                        lo = OW;
                    const int64_t hi = nn_end_in_range(off, st, IW, lo, OW);
                    const float wv = wk[k];
                    if (st == 1) {
                        for (int64_t o = lo; o < hi; o++)
                            yo[o] += wv * xc[o + off];
                    } else {
                        for (int64_t o = lo; o < hi; o++)
                            yo[o] += wv * xc[o * st + off];
                    }
                }
                nn_act_apply(act, yo, OW);
            }
        }
}

static bool is_pointwise(const nn_geom *g)
{
    for (int i = 0; i < NN_SP; i++)
        if (g->k[i] != 1 || g->s[i] != 1 || g->pb[i] || g->pe[i])
            return false;
    return true;
}

/* Scratch floats of the im2col buffer for geometry @p geo and W dims @p w (0: pointwise). */
static size_t conv_col_size(const nn_geom *geo, const int64_t *w)
{
    if (is_pointwise(geo))
        return 0;
    return (size_t)(w[1] * geo->k[0] * geo->k[1] * geo->k[2] * nn_geom_out_size(geo));
}

NN_PREPARE(nn_conv_prepare)
{
    conv_state *s;
    kiln_status st = cpu_state_new(g, n, sizeof(*s), state, err);
    if (st)
        return st;
    s = *state;
    if ((st = nn_conv_attrs_read(g, n, &s->win, &s->group, &s->act, err)) != KILN_OK)
        return st;
    s->nhwc = nn_is_nhwc(g, n);
    int64_t x[8], w[8];
    int32_t rx = nn_input_dims(g, n, 0, x, 8), rw = nn_input_dims(g, n, 1, w, 8);
    /* a depthwise 1-D convolution runs on conv_dw1d: no oneDNN primitive */
    const bool dw1d = !s->nhwc && rx == 3 && rw == 3 && x[1] > 0 && w[1] > 0 &&
                      is_dw1d(rx, x[1], s->group, w[1]);
    if (!dw1d && nn_conv_wants_dnnl(g, n)) {
        char why[256];
        s->dnnl = nn_dnnl_conv_create(g, n, &s->win, s->group, &s->act, why, sizeof(why));
        if (s->dnnl)
            return KILN_OK;
        const char *strict = getenv("KILN_AICORE_ONEDNN_STRICT");
        if (strict && strcmp(strict, "1") == 0)
            return cpu_fail_node(g, n, err, KILN_ERR_UNSUPPORTED,
                                 "oneDNN refused the convolution (KILN_AICORE_ONEDNN_STRICT=1): %s",
                                 why);
    }
    if (s->nhwc && rx == 4)
        nn_nhwc_to_nchw_dims((int64_t[4]){x[0], x[1], x[2], x[3]}, x);
    nn_geom geo;
    if (rx >= 3 && rx == rw &&
        nn_geom_forward(&s->win, (uint32_t)rx - 2, x + 2, w + 2, &geo, NULL, NULL) == KILN_OK) {
        size_t need = dw1d ? 0 : conv_col_size(&geo, w);
        if (need && (st = nn_buf_alloc(&s->col, need, g, n, err)) != KILN_OK)
            return st;
    }
    return KILN_OK;
}

void nn_conv_release(void *state)
{
    conv_state *s = state;
    if (s) {
        nn_buf_free(&s->col);
        nn_dnnl_conv_destroy(s->dnnl);
    }
    cpu_state_free(state);
}

kiln_status nn_conv_attrs_read(const kiln_graph *g, kiln_node_id n, nn_win *w, int64_t *group,
                               nn_act *act, kiln_error *err)
{
    kiln_status st = nn_win_read(g, n, w, err);
    if (st != KILN_OK)
        return st;
    *group = cpu_attr_int(g, n, "group", 1);
    if (*group < 1)
        return cpu_fail_node(g, n, err, KILN_ERR_INVALID, "group must be >= 1");
    return nn_act_read(g, n, act, err);
}

kiln_status nn_conv_operands(const kiln_kernel_args *a, const kiln_tensor **X,
                             const kiln_tensor **W, const kiln_tensor **B, kiln_error *err)
{
    kiln_status st = nn_check_float_inputs(a, 0, 3, true, err);
    if (st)
        return st;
    if (!cpu_has_input(a, 0) || !cpu_has_input(a, 1))
        return cpu_fail(a, err, KILN_ERR_INVALID, "X and W are required");
    *X = &a->inputs[0];
    *W = &a->inputs[1];
    *B = cpu_has_input(a, 2) ? &a->inputs[2] : NULL;
    if ((*X)->rank < 3 || (*W)->rank != (*X)->rank)
        return cpu_fail(a, err, KILN_ERR_INVALID, "X has rank %u and W rank %u; expected equal, >= 3",
                        (*X)->rank, (*W)->rank);
    return KILN_OK;
}

static NN_KERNEL(conv_nchw);

NN_KERNEL(nn_conv_run)
{
    const conv_state *s = state;
    if (!s->nhwc)
        return conv_nchw(state, a, err);
    const kiln_tensor *X = NULL, *W = NULL, *B = NULL;
    kiln_status st = nn_conv_operands(a, &X, &W, &B, err);
    if (st)
        return st;
    if (s->dnnl && nn_dnnl_conv_matches(s->dnnl, X, W, B) && a->outputs[0].rank == 4)
        return nn_dnnl_conv_run(s->dnnl, a, X, W, B, err);
    /* channels-last without oneDNN (the format selection only makes a Conv
     * channels-last where oneDNN takes it): the NCHW path on transposed copies */
    conv_state t = *s;
    t.nhwc = false;
    t.dnnl = NULL;
    return nn_run_nchw_on_nhwc(conv_nchw, &t, a, err);
}

static NN_KERNEL(conv_nchw)
{
    const conv_state *s = state;
    const kiln_tensor *X, *W, *B;
    kiln_status st = nn_conv_operands(a, &X, &W, &B, err);
    if (st)
        return st;
    NN_BLAS_REQUIRE(a, err);
    const int64_t N = X->dims[0], C = X->dims[1], M = W->dims[0], Cg = W->dims[1];
    const int64_t G = s->group;
    if (Cg * G != C || M % G != 0)
        return cpu_fail(a, err, KILN_ERR_INVALID,
                        "X has %lld channels, W [%lld, %lld, ...], group %lld: inconsistent",
                        (long long)C, (long long)M, (long long)Cg, (long long)G);
    if (B && cpu_numel(B) != M)
        return cpu_fail(a, err, KILN_ERR_INVALID, "B has %lld values, expected %lld",
                        (long long)cpu_numel(B), (long long)M);
    nn_geom geo;
    st = nn_geom_forward(&s->win, X->rank - 2, X->dims + 2, W->dims + 2, &geo, a, err);
    if (st != KILN_OK)
        return st;
    if ((st = nn_check_out_geom(a, N, M, &geo, err)) != KILN_OK)
        return st;
    if (s->dnnl && nn_dnnl_conv_matches(s->dnnl, X, W, B))
        return nn_dnnl_conv_run(s->dnnl, a, X, W, B, err);
    if (is_dw1d(X->rank, C, G, Cg)) {
        conv_dw1d(X->data, W->data, B ? B->data : NULL, a->outputs[0].data, N, C, M / G, &geo,
                  &s->act);
        return KILN_OK;
    }

    const int64_t Mg = M / G, K = Cg * geo.k[0] * geo.k[1] * geo.k[2];
    const int64_t IS = nn_geom_in_size(&geo), OS = nn_geom_out_size(&geo);
    const bool pointwise = is_pointwise(&geo);
    float *owned = NULL, *col = NULL;
    if (!pointwise && OS > 0 && K > 0) {
        col = nn_scratch(&s->col, conv_col_size(&geo, W->dims), &owned);
        if (!col)
            return cpu_fail(a, err, KILN_ERR_NOMEM, "out of memory for the im2col buffer");
    }
    const float *x = X->data, *w = W->data, *b = B ? B->data : NULL;
    float *y = a->outputs[0].data;
    for (int64_t img = 0; img < N; img++) {
        for (int64_t grp = 0; grp < G; grp++) {
            const float *xg = x + (img * C + grp * Cg) * IS;
            float *yg = y + (img * M + grp * Mg) * OS;
            if (b)
                for (int64_t m = 0; m < Mg; m++)
                    for (int64_t o = 0; o < OS; o++)
                        yg[m * OS + o] = b[grp * Mg + m];
            if (OS == 0)
                continue;
            if (K == 0) {
                if (!b)
                    memset(yg, 0, (size_t)(Mg * OS) * sizeof(float));
                nn_act_apply(&s->act, yg, Mg * OS);
                continue;
            }
            const float *cm = xg;
            if (!pointwise) {
                nn_im2col(xg, Cg, &geo, col);
                cm = col;
            }
            nn_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)Mg, (blasint)OS,
                        (blasint)K, 1.0f, w + grp * Mg * K, (blasint)K, cm, (blasint)OS,
                        b ? 1.0f : 0.0f, yg, (blasint)OS);
            /* the fused activation, while the group's output is still warm */
            nn_act_apply(&s->act, yg, Mg * OS);
        }
    }
    kiln_free(owned);
    return KILN_OK;
}

/*
 * test_conv_backends.c - the aicore engine's two Conv backends side by side
 * (plugins/engines/aicore/nn_conv.c, nn_dnnl.c): oneDNN (the default) and
 * im2col + OpenBLAS (node attribute _kiln_conv_backend = "blas", what the
 * session option aicore.conv_backend=blas sets).
 *
 * Each case builds a graph (Data X, W and B as Const nodes or Data, one Conv
 * node, static descriptors), binds the kernel through the real plugin with
 * kiln_engine_kernel and runs it with each backend; the outputs must agree
 * within 1e-4 relative, and both must match a naive convolution (plus the
 * fused activation) written here.  KILN_AICORE_ONEDNN_STRICT=1 makes a
 * refusal by oneDNN an error, so the default run is the oneDNN path.
 * Variants: groups, depthwise, dilation, asymmetric pads, stride 2, 1-D,
 * depthwise 1-D (the direct loops, on both backends),
 * batch 2, no bias, W computed at run time (reordered per call), each
 * fused activation, the post-activation affine, and channels-last (data_format
 * NHWC: oneDNN on NHWC tensors, BLAS through its transposing fallback); the kernel runs twice per binding (the second call
 * reuses the primitive and the packed weights).
 */
#include "kiln_test.h"
#include "graph_int.h"
#include "plugin.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct cv {
    const char *label;
    int64_t N, C, H, W, M, KH, KW, G, sh, sw, dh, dw, pt, pl, pb, pr;
    bool one_d, no_bias, w_data; /* 1-D (H = KH = 1), no B, W from a Data node */
    const char *act;             /* _kiln_fused_activation or NULL */
    double alpha, beta;
    bool nhwc;                   /* data_format NHWC: X and Y channels-last */
    double post_scale, post_shift; /* _kiln_fused_post_*, when post_scale != 0 */
} cv;

/* NCHW [N, C, HW] <-> NHWC [N, HW, C] copies of a float tensor. */
static void to_nhwc(const float *x, float *y, int64_t N, int64_t C, int64_t HW, bool back)
{
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t p = 0; p < HW; p++) {
                const size_t a = (size_t)((n * C + c) * HW + p), b = (size_t)((n * HW + p) * C + c);
                if (back)
                    y[a] = x[b];
                else
                    y[b] = x[a];
            }
}

static void fill(float *p, size_t n, uint32_t seed)
{
    uint32_t s = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 17;
        s ^= s << 5;
        p[i] = (float)((double)(s & 0xffffff) / 8388608.0 - 1.0);
    }
}

static double act_kind_ref(const cv *c, double v);

static double act_ref(const cv *c, double v)
{
    v = act_kind_ref(c, v);
    return c->post_scale != 0.0 ? v * c->post_scale + c->post_shift : v;
}

static double act_kind_ref(const cv *c, double v)
{
    if (!c->act)
        return v;
    if (!strcmp(c->act, "Relu"))
        return v > 0 ? v : 0;
    if (!strcmp(c->act, "LeakyRelu"))
        return v >= 0 ? v : c->alpha * v;
    if (!strcmp(c->act, "Clip"))
        return v < c->alpha ? c->alpha : (v > c->beta ? c->beta : v);
    if (!strcmp(c->act, "HardSigmoid")) {
        double t = c->alpha * v + c->beta;
        return t < 0 ? 0 : (t > 1 ? 1 : t);
    }
    if (!strcmp(c->act, "HardSwish")) {
        double t = v / 6 + 0.5;
        return v * (t < 0 ? 0 : (t > 1 ? 1 : t));
    }
    if (!strcmp(c->act, "Sigmoid"))
        return 1 / (1 + exp(-v));
    return v / (1 + exp(-v)); /* Swish */
}

static void conv_ref(const cv *c, const float *x, const float *w, const float *b, float *y,
                     int64_t OH, int64_t OW)
{
    const int64_t Cg = c->C / c->G, Mg = c->M / c->G;
    for (int64_t n = 0; n < c->N; n++)
        for (int64_t m = 0; m < c->M; m++)
            for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t ow = 0; ow < OW; ow++) {
                    double acc = b ? b[m] : 0;
                    for (int64_t ci = 0; ci < Cg; ci++)
                        for (int64_t kh = 0; kh < c->KH; kh++)
                            for (int64_t kw = 0; kw < c->KW; kw++) {
                                int64_t ih = oh * c->sh - c->pt + kh * c->dh;
                                int64_t iw = ow * c->sw - c->pl + kw * c->dw;
                                if (ih < 0 || ih >= c->H || iw < 0 || iw >= c->W)
                                    continue;
                                int64_t cin = (m / Mg) * Cg + ci;
                                acc += (double)w[((m * Cg + ci) * c->KH + kh) * c->KW + kw] *
                                       x[((n * c->C + cin) * c->H + ih) * c->W + iw];
                            }
                    y[((n * c->M + m) * OH + oh) * OW + ow] = (float)act_ref(c, acc);
                }
}

static void set_ints(kiln_graph *g, kiln_node_id n, const char *key, const int64_t *v, uint32_t k)
{
    kiln_attrs_set_list_int(kiln_node_attrs_mut(g, n), key, v, k);
}

/* A producer of input @p i of @p conv: Const (value = @p data) or Data. */
static void add_input(kiln_graph *g, kiln_node_id conv, uint32_t i, bool as_const, uint32_t rank,
                      const int64_t *dims, const float *data, size_t count)
{
    char name[16];
    snprintf(name, sizeof(name), "in%u", i);
    kiln_node_id d = kiln_graph_add_node(g, name, as_const ? "Const" : "Data", 0, 1);
    kiln_tensor_desc *desc = kiln_node_output_desc(g, d, 0);
    kiln_desc_set_dtype(g, desc, KILN_DT_FLOAT32);
    kiln_desc_set_shape(g, desc, (int32_t)rank, dims);
    if (as_const) {
        kiln_tensor_value v = {KILN_DT_FLOAT32, rank, dims, data, count * sizeof(float)};
        CU_ASSERT_EQUAL(kiln_attrs_set_tensor(kiln_node_attrs_mut(g, d), "value", &v), KILN_OK);
    }
    CU_ASSERT_EQUAL(kiln_edge_add(g, d, 0, conv, i), KILN_OK);
}

/* Run case @p c with backend @p blas into @p y (two calls); false when binding or a call failed. */
static bool run_conv(kiln_ctx *ctx, const cv *c, bool blas, const float *x, const float *w,
                     const float *b, float *y, int64_t OH, int64_t OW)
{
    kiln_graph *g = kiln_graph_create(ctx, "g");
    const uint32_t nin = c->no_bias ? 2 : 3;
    kiln_node_id n = kiln_graph_add_node(g, "conv", "Conv", nin, 1);
    const uint32_t rank = c->one_d ? 3 : 4;
    int64_t xd[4] = {c->N, c->C, c->H, c->W}, wd[4] = {c->M, c->C / c->G, c->KH, c->KW};
    int64_t yd[4] = {c->N, c->M, OH, OW}, bd[1] = {c->M};
    if (c->one_d) {
        xd[2] = c->W;
        wd[2] = c->KW;
        yd[2] = OW;
    }
    kiln_attrs_set_int(kiln_node_attrs_mut(g, n), "group", c->G);
    if (c->one_d) {
        set_ints(g, n, "strides", (const int64_t[]){c->sw}, 1);
        set_ints(g, n, "dilations", (const int64_t[]){c->dw}, 1);
        set_ints(g, n, "pads", (const int64_t[]){c->pl, c->pr}, 2);
    } else {
        set_ints(g, n, "strides", (const int64_t[]){c->sh, c->sw}, 2);
        set_ints(g, n, "dilations", (const int64_t[]){c->dh, c->dw}, 2);
        set_ints(g, n, "pads", (const int64_t[]){c->pt, c->pl, c->pb, c->pr}, 4);
    }
    if (c->act) {
        kiln_attrs *a = kiln_node_attrs_mut(g, n);
        kiln_attrs_set_string(a, "_kiln_fused_activation", c->act);
        kiln_attrs_set_float(a, "_kiln_fused_alpha", c->alpha);
        kiln_attrs_set_float(a, "_kiln_fused_beta", c->beta);
    }
    if (c->post_scale != 0.0) {
        kiln_attrs *a = kiln_node_attrs_mut(g, n);
        kiln_attrs_set_float(a, "_kiln_fused_post_scale", c->post_scale);
        kiln_attrs_set_float(a, "_kiln_fused_post_shift", c->post_shift);
    }
    if (blas)
        kiln_attrs_set_string(kiln_node_attrs_mut(g, n), "_kiln_conv_backend", "blas");
    /* channels-last: the graph and the call see X and Y as [N, H, W, C] */
    float *xl = NULL, *yl = NULL;
    if (c->nhwc) {
        kiln_attrs_set_string(kiln_node_attrs_mut(g, n), "data_format", "NHWC");
        xl = malloc((size_t)(c->N * c->C * c->H * c->W) * 4);
        yl = malloc((size_t)(c->N * c->M * OH * OW) * 4);
        to_nhwc(x, xl, c->N, c->C, c->H * c->W, false);
        x = xl;
        const int64_t px[4] = {c->N, c->H, c->W, c->C}, py[4] = {c->N, OH, OW, c->M};
        memcpy(xd, px, sizeof(px));
        memcpy(yd, py, sizeof(py));
    }
    const size_t nx = (size_t)(c->N * c->C * c->H * c->W);
    const size_t nw = (size_t)(c->M * (c->C / c->G) * c->KH * c->KW);
    const size_t ny = (size_t)(c->N * c->M * OH * OW);
    add_input(g, n, 0, false, rank, xd, x, nx);
    add_input(g, n, 1, !c->w_data, rank, wd, w, nw);
    if (!c->no_bias)
        add_input(g, n, 2, true, 1, bd, b, (size_t)c->M);
    kiln_tensor_desc *od = kiln_node_output_desc(g, n, 0);
    kiln_desc_set_dtype(g, od, KILN_DT_FLOAT32);
    kiln_desc_set_shape(g, od, (int32_t)rank, yd);

    kiln_tensor ti[3] = {{KILN_DT_FLOAT32, rank, xd, (void *)x, nx * 4},
                         {KILN_DT_FLOAT32, rank, wd, (void *)w, nw * 4},
                         {KILN_DT_FLOAT32, 1, bd, (void *)b, (size_t)c->M * 4}};
    kiln_tensor to[1] = {{KILN_DT_FLOAT32, rank, yd, c->nhwc ? yl : y, ny * 4}};
    kiln_kernel_fn fn = NULL;
    void *state = NULL;
    const char *engine = NULL;
    kiln_error err;
    kiln_error_clear(&err);
    bool ok = kiln_engine_kernel(g, n, &fn, &state, &engine, &err) == KILN_OK;
    if (ok) {
        kiln_kernel_args a = {sizeof(a), g, n, nin, 1, ti, to, NULL, 0, 1};
        for (int k = 0; k < 2 && ok; k++) {
            memset(to[0].data, 0xff, ny * 4); /* NaNs: every value must be written */
            ok = fn(state, &a, &err) == KILN_OK;
        }
        kiln_engine_kernel_release(g, engine, state);
    }
    if (c->nhwc) {
        if (ok)
            to_nhwc(yl, y, c->N, c->M, OH * OW, true);
        free(xl);
        free(yl);
    }
    if (!ok)
        fprintf(stderr, "  %s (%s): %s\n", c->label, blas ? "blas" : "onednn",
                kiln_error_message(&err));
    kiln_graph_destroy(g);
    return ok;
}

/* Mismatches of @p got against @p want (relative 1e-4), the first few printed. */
static int compare(const char *label, const char *what, const float *got, const float *want,
                   size_t n)
{
    int bad = 0;
    for (size_t i = 0; i < n; i++)
        if (!(fabs((double)got[i] - want[i]) <= 1e-4 * fmax(1.0, fabs((double)want[i])))) {
            if (bad++ < 3)
                fprintf(stderr, "  %s: %s [%zu] = %.7g, expected %.7g\n", label, what, i, got[i],
                        want[i]);
        }
    return bad;
}

static int check_case(kiln_ctx *ctx, const cv *c)
{
    const int64_t OH = (c->H + c->pt + c->pb - ((c->KH - 1) * c->dh + 1)) / c->sh + 1;
    const int64_t OW = (c->W + c->pl + c->pr - ((c->KW - 1) * c->dw + 1)) / c->sw + 1;
    const size_t nx = (size_t)(c->N * c->C * c->H * c->W);
    const size_t nw = (size_t)(c->M * (c->C / c->G) * c->KH * c->KW);
    const size_t ny = (size_t)(c->N * c->M * OH * OW);
    float *x = malloc(nx * 4), *w = malloc(nw * 4), *b = malloc((size_t)c->M * 4);
    float *ref = malloc(ny * 4), *yd = malloc(ny * 4), *yb = malloc(ny * 4);
    fill(x, nx, 11);
    fill(w, nw, 12);
    fill(b, (size_t)c->M, 13);
    conv_ref(c, x, w, c->no_bias ? NULL : b, ref, OH, OW);
    int bad = -1;
    if (run_conv(ctx, c, false, x, w, b, yd, OH, OW) && run_conv(ctx, c, true, x, w, b, yb, OH, OW))
        bad = compare(c->label, "onednn vs blas", yd, yb, ny) +
              compare(c->label, "onednn vs reference", yd, ref, ny) +
              compare(c->label, "blas vs reference", yb, ref, ny);
    free(x);
    free(w);
    free(b);
    free(ref);
    free(yd);
    free(yb);
    return bad;
}

static void test_conv_backends_variants(void)
{
    setenv("KILN_AICORE_ONEDNN_STRICT", "1", 1);
    kiln_error err;
    kiln_error_clear(&err);
    kiln_ctx *ctx = kiln_ctx_create();
    CU_ASSERT_EQUAL_FATAL(kiln_test_load_plugin(ctx, "libkiln_aicore.so", &err), KILN_OK);
    /* label      N  C  H  W   M  KH KW G  sh sw dh dw pt pl pb pr */
    static const cv cases[] = {
        {"dense3x3", 1, 8, 9, 11, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, .act = NULL},
        {"stride2", 2, 3, 12, 10, 16, 3, 3, 1, 2, 2, 1, 1, 1, 1, 1, 1, .act = NULL},
        {"pointwise", 1, 24, 7, 5, 40, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, .act = NULL},
        {"grouped", 1, 12, 8, 8, 18, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, .act = NULL},
        {"depthwise3x3", 1, 32, 10, 9, 32, 3, 3, 32, 1, 1, 1, 1, 1, 1, 1, 1, .act = NULL},
        {"depthwise5x5_s2", 2, 48, 13, 12, 48, 5, 5, 48, 2, 2, 1, 1, 2, 2, 2, 2, .act = NULL},
        {"dilated", 1, 6, 14, 13, 10, 3, 3, 1, 1, 1, 2, 3, 2, 3, 2, 3, .act = NULL},
        {"asym_pads", 1, 5, 9, 10, 7, 3, 2, 1, 1, 2, 1, 1, 0, 1, 2, 0, .act = NULL},
        {"no_bias", 1, 4, 6, 6, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, .no_bias = true},
        {"w_runtime", 1, 16, 6, 7, 16, 3, 3, 4, 1, 1, 1, 1, 1, 1, 1, 1, .w_data = true},
        {"conv1d", 1, 4, 1, 40, 6, 1, 5, 2, 1, 3, 1, 2, 0, 2, 0, 1, .one_d = true},
        /* depthwise 1-D: the direct loops of nn_conv.c on both backends */
        {"dw1d_silero", 1, 258, 1, 24, 258, 1, 5, 258, 1, 1, 1, 1, 0, 2, 0, 2, .one_d = true,
         .act = "Relu"},
        {"dw1d_s2_dil2_mult2", 2, 12, 1, 31, 24, 1, 3, 12, 1, 2, 1, 2, 0, 1, 0, 3, .one_d = true,
         .no_bias = true},
        {"dw1d_wide_kernel", 1, 6, 1, 9, 6, 1, 7, 6, 1, 1, 1, 1, 0, 5, 0, 0, .one_d = true,
         .act = "LeakyRelu", .alpha = 0.1},
        {"relu", 1, 8, 9, 9, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, .act = "Relu"},
        {"leaky_relu", 1, 8, 9, 9, 16, 3, 3, 8, 1, 1, 1, 1, 1, 1, 1, 1, .act = "LeakyRelu",
         .alpha = 0.1},
        {"clip",        1,          8, 9, 9, 16, 3, 3, 1, 2, 2, 1, 1, 1, 1, 1, 1, .act = "Clip",
         .alpha = -0.2, .beta = 0.6},
        {"hard_sigmoid",
         1,
         8,
         9,
         9,
         16,
         1,
         1,
         1,
         1,
         1,
         1,
         1,
         0,
         0,
         0,
         0,
         .act = "HardSigmoid",
         .alpha = 0.2,
         .beta = 0.5},
        {"hard_swish", 1, 16, 9, 9, 16, 3, 3, 16, 1, 1, 1, 1, 1, 1, 1, 1, .act = "HardSwish"},
        {"sigmoid", 1, 8, 9, 9, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, .act = "Sigmoid"},
        {"swish", 1, 8, 9, 9, 16, 3, 3, 2, 1, 1, 1, 1, 1, 1, 1, 1, .act = "Swish"},
        /* the post-activation affine (PostActivationScaleFusionPass) */
        {"hard_swish_affine", 1, 8, 9, 9, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, .act = "HardSwish",
         .post_scale = 0.75, .post_shift = -0.125},
        /* channels-last (the aicore format selection): oneDNN on NHWC, and the
         * BLAS backend through its transposing fallback */
        {"nhwc_dense", 2, 8, 9, 11, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, .nhwc = true},
        {"nhwc_pointwise", 1, 24, 7, 5, 40, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, .nhwc = true,
         .act = "Relu"},
        {"nhwc_depthwise_s2", 1, 48, 13, 12, 48, 5, 5, 48, 2, 2, 1, 1, 2, 2, 2, 2, .nhwc = true,
         .act = "HardSwish", .post_scale = 1.5, .post_shift = 0.25},
        {"nhwc_grouped_no_bias", 1, 12, 8, 8, 18, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, .nhwc = true,
         .no_bias = true},
    };
    int failed = 0;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int bad = check_case(ctx, &cases[i]);
        if (bad) {
            failed++;
            fprintf(stderr, "FAIL %s (%d)\n", cases[i].label, bad);
        }
    }
    CU_ASSERT_EQUAL(failed, 0);
    kiln_ctx_destroy(ctx);
    unsetenv("KILN_AICORE_ONEDNN_STRICT");
}

/* Under strict mode a node oneDNN cannot take (dynamic shape) is an error naming it. */
static void test_conv_backends_strict_refusal(void)
{
    setenv("KILN_AICORE_ONEDNN_STRICT", "1", 1);
    kiln_error err;
    kiln_error_clear(&err);
    kiln_ctx *ctx = kiln_ctx_create();
    CU_ASSERT_EQUAL_FATAL(kiln_test_load_plugin(ctx, "libkiln_aicore.so", &err), KILN_OK);
    kiln_graph *g = kiln_graph_create(ctx, "g");
    kiln_node_id n = kiln_graph_add_node(g, "dyn_conv", "Conv", 2, 1);
    const int64_t xd[4] = {1, 2, -1, 4}, wd[4] = {3, 2, 1, 1};
    kiln_node_id d0 = kiln_graph_add_node(g, "x", "Data", 0, 1);
    kiln_node_id d1 = kiln_graph_add_node(g, "w", "Data", 0, 1);
    kiln_desc_set_dtype(g, kiln_node_output_desc(g, d0, 0), KILN_DT_FLOAT32);
    kiln_desc_set_shape(g, kiln_node_output_desc(g, d0, 0), 4, xd);
    kiln_desc_set_dtype(g, kiln_node_output_desc(g, d1, 0), KILN_DT_FLOAT32);
    kiln_desc_set_shape(g, kiln_node_output_desc(g, d1, 0), 4, wd);
    kiln_edge_add(g, d0, 0, n, 0);
    kiln_edge_add(g, d1, 0, n, 1);
    kiln_kernel_fn fn = NULL;
    void *state = NULL;
    const char *engine = NULL;
    CU_ASSERT_NOT_EQUAL(kiln_engine_kernel(g, n, &fn, &state, &engine, &err), KILN_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(kiln_error_message(&err), "dyn_conv"));
    CU_ASSERT_PTR_NOT_NULL(strstr(kiln_error_message(&err), "oneDNN refused"));
    unsetenv("KILN_AICORE_ONEDNN_STRICT");
    /* without strict mode the same node binds (im2col + OpenBLAS) */
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(kiln_engine_kernel(g, n, &fn, &state, &engine, &err), KILN_OK);
    if (state)
        kiln_engine_kernel_release(g, engine, state);
    kiln_graph_destroy(g);
    kiln_ctx_destroy(ctx);
}

int main(void)
{
    static const kiln_test_case cases[] = {
        {"test_conv_backends_variants", test_conv_backends_variants},
        {"test_conv_backends_strict_refusal", test_conv_backends_strict_refusal},
        {NULL, NULL},
    };
    return kiln_test_run("conv_backends", cases);
}

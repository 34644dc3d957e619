/*
 * test_convt_backends.c - the aicore engine's two ConvTranspose backends side
 * by side (plugins/engines/aicore/nn_conv_transpose.c, nn_dnnl_deconv.c):
 * oneDNN's deconvolution (the default) and sgemm + col2im on OpenBLAS (node
 * attribute _kiln_conv_backend = "blas", what the session option
 * aicore.conv_backend=blas sets).
 *
 * Each case builds a graph (Data X, W and B as Const nodes or Data, one
 * ConvTranspose node, static descriptors), binds the kernel through the
 * real plugin with kiln_engine_kernel and runs it with each backend; the
 * outputs must agree within 1e-4 relative, and both must match a naive
 * transposed convolution (scatter of every input pixel through the window,
 * plus bias and the fused activation) written here, with the output size
 * and pads computed here from the ONNX attributes.  KILN_AICORE_ONEDNN_STRICT=1
 * makes a refusal by oneDNN an error, so the default run is the oneDNN path.
 * Variants: stride 2 and 3, pads (asymmetric), output_padding (up to
 * stride - 1, beyond the end pad), groups, depthwise, dilation, no bias,
 * fewer than 8 output channels (oneDNN on the plain layouts),
 * batch 2, W computed at run time (reordered per call), 1-D, auto_pad
 * SAME_UPPER / SAME_LOWER with an odd total pad, output_shape, each fused
 * activation; the kernel runs twice per binding (the second call reuses the
 * primitive and the packed weights).  An output_shape oneDNN cannot express
 * is refused (an error naming the node under strict mode) and runs on
 * OpenBLAS otherwise.
 */
#include "kiln_test.h"
#include "graph_int.h"
#include "plugin.h"

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct ct {
    const char *label;
    int64_t N, C, H, W, M, KH, KW, G, sh, sw, dh, dw, pt, pl, pb, pr, oph, opw;
    bool one_d, no_bias, w_data; /* 1-D (H = KH = 1), no B, W from a Data node */
    const char *auto_pad;        /* SAME_UPPER / SAME_LOWER, else explicit pads */
    int64_t osh, osw;            /* output_shape (0: none) */
    const char *act;             /* _kiln_fused_activation or NULL */
    double alpha, beta;
} ct;

/* The resolved geometry of a case: output sizes and begin pads. */
typedef struct ctgeo {
    int64_t OH, OW, ph, pw;
} ctgeo;

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

static double act_ref(const ct *c, double v)
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

/* ONNX ConvTranspose's output size and begin pad along one dim. */
static void dim_geo(int64_t in, int64_t k, int64_t s, int64_t d, int64_t pb, int64_t pe, int64_t op,
                    int64_t oshape, const char *auto_pad, int64_t *out, int64_t *begin)
{
    const int64_t full = s * (in - 1) + op + (k - 1) * d + 1;
    if (oshape || auto_pad) {
        *out = oshape ? oshape : in * s;
        const int64_t total = full > *out ? full - *out : 0;
        /* SAME_UPPER puts the odd pad at the end (as ONNX Runtime does) */
        *begin = auto_pad && !strcmp(auto_pad, "SAME_UPPER") ? total / 2 : total - total / 2;
    } else {
        *out = full - pb - pe;
        *begin = pb;
    }
}

static ctgeo case_geo(const ct *c)
{
    ctgeo g = {1, 1, 0, 0};
    if (!c->one_d)
        dim_geo(c->H, c->KH, c->sh, c->dh, c->pt, c->pb, c->oph, c->osh, c->auto_pad, &g.OH, &g.ph);
    dim_geo(c->W, c->KW, c->sw, c->dw, c->pl, c->pr, c->opw, c->osw, c->auto_pad, &g.OW, &g.pw);
    return g;
}

/* y = act(B + scatter of x through w); w is ONNX's [C, M/G, KH, KW]. */
static void convt_ref(const ct *c, const ctgeo *g, const float *x, const float *w, const float *b,
                      float *y)
{
    const int64_t Cg = c->C / c->G, Mg = c->M / c->G, OS = g->OH * g->OW;
    double *acc = calloc((size_t)(c->N * c->M * OS), sizeof(double));
    for (int64_t n = 0; n < c->N; n++)
        for (int64_t ci = 0; ci < c->C; ci++)
            for (int64_t ih = 0; ih < c->H; ih++)
                for (int64_t iw = 0; iw < c->W; iw++) {
                    const double xv = x[((n * c->C + ci) * c->H + ih) * c->W + iw];
                    const int64_t grp = ci / Cg;
                    for (int64_t m = 0; m < Mg; m++)
                        for (int64_t kh = 0; kh < c->KH; kh++)
                            for (int64_t kw = 0; kw < c->KW; kw++) {
                                const int64_t oh = ih * c->sh - g->ph + kh * c->dh;
                                const int64_t ow = iw * c->sw - g->pw + kw * c->dw;
                                if (oh < 0 || oh >= g->OH || ow < 0 || ow >= g->OW)
                                    continue;
                                const double wv = w[((ci * Mg + m) * c->KH + kh) * c->KW + kw];
                                acc[(n * c->M + grp * Mg + m) * OS + oh * g->OW + ow] += xv * wv;
                            }
                }
    for (int64_t n = 0; n < c->N; n++)
        for (int64_t m = 0; m < c->M; m++)
            for (int64_t o = 0; o < OS; o++) {
                const size_t i = (size_t)((n * c->M + m) * OS + o);
                y[i] = (float)act_ref(c, acc[i] + (b ? b[m] : 0.0));
            }
    free(acc);
}

static void set_ints(kiln_graph *g, kiln_node_id n, const char *key, const int64_t *v, uint32_t k)
{
    kiln_attrs_set_list_int(kiln_node_attrs_mut(g, n), key, v, k);
}

/* A producer of input @p i of @p node: Const (value = @p data) or Data. */
static void add_input(kiln_graph *g, kiln_node_id node, uint32_t i, bool as_const, uint32_t rank,
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
    CU_ASSERT_EQUAL(kiln_edge_add(g, d, 0, node, i), KILN_OK);
}

/* The ConvTranspose graph of case @p c (backend blas when @p blas); *node is the op. */
static kiln_graph *build(kiln_ctx *ctx, const ct *c, const ctgeo *geo, bool blas, const float *x,
                         const float *w, const float *b, kiln_node_id *node)
{
    kiln_graph *g = kiln_graph_create(ctx, "g");
    const uint32_t nin = c->no_bias ? 2 : 3;
    kiln_node_id n = kiln_graph_add_node(g, c->label, "ConvTranspose", nin, 1);
    const uint32_t rank = c->one_d ? 3 : 4;
    const int64_t Mg = c->M / c->G;
    int64_t xd[4] = {c->N, c->C, c->H, c->W}, wd[4] = {c->C, Mg, c->KH, c->KW};
    int64_t yd[4] = {c->N, c->M, geo->OH, geo->OW}, bd[1] = {c->M};
    if (c->one_d) {
        xd[2] = c->W;
        wd[2] = c->KW;
        yd[2] = geo->OW;
    }
    kiln_attrs *at = kiln_node_attrs_mut(g, n);
    kiln_attrs_set_int(at, "group", c->G);
    if (c->one_d) {
        set_ints(g, n, "strides", (const int64_t[]){c->sw}, 1);
        set_ints(g, n, "dilations", (const int64_t[]){c->dw}, 1);
        if (!c->auto_pad && !c->osw)
            set_ints(g, n, "pads", (const int64_t[]){c->pl, c->pr}, 2);
        if (c->opw)
            set_ints(g, n, "output_padding", (const int64_t[]){c->opw}, 1);
        if (c->osw)
            set_ints(g, n, "output_shape", (const int64_t[]){c->osw}, 1);
    } else {
        set_ints(g, n, "strides", (const int64_t[]){c->sh, c->sw}, 2);
        set_ints(g, n, "dilations", (const int64_t[]){c->dh, c->dw}, 2);
        if (!c->auto_pad && !c->osw)
            set_ints(g, n, "pads", (const int64_t[]){c->pt, c->pl, c->pb, c->pr}, 4);
        if (c->oph || c->opw)
            set_ints(g, n, "output_padding", (const int64_t[]){c->oph, c->opw}, 2);
        if (c->osw)
            set_ints(g, n, "output_shape", (const int64_t[]){c->osh, c->osw}, 2);
    }
    if (c->auto_pad)
        kiln_attrs_set_string(at, "auto_pad", c->auto_pad);
    if (c->act) {
        kiln_attrs_set_string(at, "_kiln_fused_activation", c->act);
        kiln_attrs_set_float(at, "_kiln_fused_alpha", c->alpha);
        kiln_attrs_set_float(at, "_kiln_fused_beta", c->beta);
    }
    if (blas)
        kiln_attrs_set_string(at, "_kiln_conv_backend", "blas");
    const size_t nx = (size_t)(c->N * c->C * c->H * c->W);
    const size_t nw = (size_t)(c->C * Mg * c->KH * c->KW);
    add_input(g, n, 0, false, rank, xd, x, nx);
    add_input(g, n, 1, !c->w_data, rank, wd, w, nw);
    if (!c->no_bias)
        add_input(g, n, 2, true, 1, bd, b, (size_t)c->M);
    kiln_tensor_desc *od = kiln_node_output_desc(g, n, 0);
    kiln_desc_set_dtype(g, od, KILN_DT_FLOAT32);
    kiln_desc_set_shape(g, od, (int32_t)rank, yd);
    *node = n;
    return g;
}

/* Run case @p c with backend @p blas into @p y (two calls); false when binding or a call failed. */
static bool run_convt(kiln_ctx *ctx, const ct *c, const ctgeo *geo, bool blas, const float *x,
                      const float *w, const float *b, float *y)
{
    kiln_node_id n;
    kiln_graph *g = build(ctx, c, geo, blas, x, w, b, &n);
    const uint32_t nin = c->no_bias ? 2 : 3, rank = c->one_d ? 3 : 4;
    const int64_t Mg = c->M / c->G;
    int64_t xd[4] = {c->N, c->C, c->H, c->W}, wd[4] = {c->C, Mg, c->KH, c->KW};
    int64_t yd[4] = {c->N, c->M, geo->OH, geo->OW}, bd[1] = {c->M};
    if (c->one_d) {
        xd[2] = c->W;
        wd[2] = c->KW;
        yd[2] = geo->OW;
    }
    const size_t nx = (size_t)(c->N * c->C * c->H * c->W);
    const size_t nw = (size_t)(c->C * Mg * c->KH * c->KW);
    const size_t ny = (size_t)(c->N * c->M * geo->OH * geo->OW);
    kiln_tensor ti[3] = {{KILN_DT_FLOAT32, rank, xd, (void *)x, nx * 4},
                         {KILN_DT_FLOAT32, rank, wd, (void *)w, nw * 4},
                         {KILN_DT_FLOAT32, 1, bd, (void *)b, (size_t)c->M * 4}};
    kiln_tensor to[1] = {{KILN_DT_FLOAT32, rank, yd, y, ny * 4}};
    kiln_kernel_fn fn = NULL;
    void *state = NULL;
    const char *engine = NULL;
    kiln_error err;
    kiln_error_clear(&err);
    bool ok = kiln_engine_kernel(g, n, &fn, &state, &engine, &err) == KILN_OK;
    if (ok) {
        kiln_kernel_args a = {sizeof(a), g, n, nin, 1, ti, to, NULL, 0, 1};
        for (int k = 0; k < 2 && ok; k++) {
            memset(y, 0xff, ny * 4); /* NaNs: every value must be written */
            ok = fn(state, &a, &err) == KILN_OK;
        }
        kiln_engine_kernel_release(g, engine, state);
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

/* The case's data: x, w, b filled, ref computed; NULL ref on allocation failure. */
typedef struct ctdata {
    float *x, *w, *b, *ref, *y0, *y1;
    size_t ny;
} ctdata;

static void data_make(const ct *c, const ctgeo *geo, ctdata *d)
{
    const size_t nx = (size_t)(c->N * c->C * c->H * c->W);
    const size_t nw = (size_t)(c->C * (c->M / c->G) * c->KH * c->KW);
    d->ny = (size_t)(c->N * c->M * geo->OH * geo->OW);
    d->x = malloc(nx * 4);
    d->w = malloc(nw * 4);
    d->b = malloc((size_t)c->M * 4);
    d->ref = malloc(d->ny * 4);
    d->y0 = malloc(d->ny * 4);
    d->y1 = malloc(d->ny * 4);
    fill(d->x, nx, 21);
    fill(d->w, nw, 22);
    fill(d->b, (size_t)c->M, 23);
    convt_ref(c, geo, d->x, d->w, c->no_bias ? NULL : d->b, d->ref);
}

static void data_free(ctdata *d)
{
    free(d->x);
    free(d->w);
    free(d->b);
    free(d->ref);
    free(d->y0);
    free(d->y1);
}

static int check_case(kiln_ctx *ctx, const ct *c)
{
    const ctgeo geo = case_geo(c);
    ctdata d;
    data_make(c, &geo, &d);
    int bad = -1;
    if (run_convt(ctx, c, &geo, false, d.x, d.w, d.b, d.y0) &&
        run_convt(ctx, c, &geo, true, d.x, d.w, d.b, d.y1))
        bad = compare(c->label, "onednn vs blas", d.y0, d.y1, d.ny) +
              compare(c->label, "onednn vs reference", d.y0, d.ref, d.ny) +
              compare(c->label, "blas vs reference", d.y1, d.ref, d.ny);
    data_free(&d);
    return bad;
}

static void test_convt_backends_variants(void)
{
    setenv("KILN_AICORE_ONEDNN_STRICT", "1", 1);
    kiln_error err;
    kiln_error_clear(&err);
    kiln_ctx *ctx = kiln_ctx_create();
    CU_ASSERT_EQUAL_FATAL(kiln_test_load_plugin(ctx, "libkiln_aicore.so", &err), KILN_OK);
    /* clang-format off */
    static const ct cases[] = {
        /* label          N  C  H   W   M  KH KW G  sh sw dh dw pt pl pb pr oph opw */
        {"dense3x3",      1, 8, 7,  9,  6, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, .act = NULL},
        {"stride2_k2",    1, 16, 6, 5,  8, 2, 2, 1, 2, 2, 1, 1, 0, 0, 0, 0, 0, 0, .act = NULL},
        {"stride2_k3_op", 2, 4, 5,  6,  6, 3, 3, 1, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, .act = NULL},
        {"stride3_op2",   1, 5, 4,  5,  3, 3, 3, 1, 3, 3, 1, 1, 0, 0, 0, 0, 2, 1, .act = NULL},
        {"stride2_k4",    1, 6, 6,  6,  4, 4, 4, 1, 2, 2, 1, 1, 1, 1, 1, 1, 0, 0, .act = NULL},
        {"asym_pads",     1, 5, 6,  7,  7, 3, 2, 1, 2, 1, 1, 1, 0, 1, 2, 0, 1, 0, .act = NULL},
        {"grouped",       1, 12, 5, 6, 9, 3, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0, 0, .act = NULL},
        {"depthwise",     1, 16, 6, 6, 16, 4, 4, 16, 2, 2, 1, 1, 1, 1, 1, 1, 0, 0, .act = NULL},
        {"dilated",       1, 6, 7,  8,  5, 3, 3, 1, 1, 2, 2, 3, 2, 1, 0, 3, 0, 1, .act = NULL},
        {"no_bias",       1, 4, 5,  5,  8, 3, 3, 1, 2, 2, 1, 1, 1, 1, 1, 1, 0, 0, .no_bias = true},
        {"w_runtime",     1, 8, 5,  6,  8, 3, 3, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, .w_data = true},
        {"convt1d",       1, 4, 1,  30, 6, 1, 5, 2, 1, 3, 1, 2, 0, 2, 0, 1, 0, 2, .one_d = true},
        {"same_upper",    1, 6, 5,  7,  4, 1, 4, 1, 1, 3, 1, 1, 0, 0, 0, 0, 0, 0,
         .auto_pad = "SAME_UPPER"},
        {"same_lower",    1, 6, 5,  7,  4, 3, 4, 1, 2, 3, 1, 1, 0, 0, 0, 0, 0, 0,
         .auto_pad = "SAME_LOWER"},
        {"same_upper_1d", 1, 3, 1,  9,  5, 1, 4, 1, 1, 2, 1, 1, 0, 0, 0, 0, 0, 0, .one_d = true,
         .auto_pad = "SAME_UPPER"},
        {"output_shape",  1, 4, 5,  5,  6, 3, 3, 1, 2, 2, 1, 1, 0, 0, 0, 0, 0, 0, .osh = 9,
         .osw = 10},
        {"narrow_m1",     1, 24, 8, 8,  1, 2, 2, 1, 2, 2, 1, 1, 0, 0, 0, 0, 0, 0, .act = "Sigmoid"},
        {"narrow_m3_op",  1, 6, 5,  6,  3, 3, 3, 1, 2, 2, 1, 1, 1, 0, 0, 1, 1, 1, .act = NULL},
        {"relu",          1, 8, 6,  6,  8, 2, 2, 1, 2, 2, 1, 1, 0, 0, 0, 0, 0, 0, .act = "Relu"},
        {"leaky_relu",    1, 8, 6,  6,  8, 3, 3, 4, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1,
         .act = "LeakyRelu", .alpha = 0.1},
        {"clip",          1, 8, 6,  6,  8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, .act = "Clip",
         .alpha = -0.2, .beta = 0.6},
        {"hard_sigmoid",  1, 8, 6,  6,  8, 2, 2, 1, 2, 2, 1, 1, 0, 0, 0, 0, 0, 0,
         .act = "HardSigmoid", .alpha = 0.2, .beta = 0.5},
        {"hard_swish",    1, 8, 6,  6,  8, 2, 2, 8, 2, 2, 1, 1, 0, 0, 0, 0, 0, 0,
         .act = "HardSwish"},
        {"sigmoid",       2, 8, 6,  6,  4, 2, 2, 1, 2, 2, 1, 1, 0, 0, 0, 0, 0, 0,
         .act = "Sigmoid"},
        {"swish",         1, 8, 6,  6,  8, 3, 3, 2, 2, 2, 1, 1, 1, 1, 1, 1, 0, 0, .act = "Swish"},
    };
    /* clang-format on */
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

/*
 * An output_shape larger than the window reaches by a stride or more leaves
 * oneDNN no padding_r to express it: under strict mode binding fails naming
 * the node and the reason; without it the node runs on OpenBLAS (the unreached
 * tail keeps the bias) and matches the reference.
 */
static void test_convt_backends_refusal(void)
{
    kiln_error err;
    kiln_error_clear(&err);
    kiln_ctx *ctx = kiln_ctx_create();
    CU_ASSERT_EQUAL_FATAL(kiln_test_load_plugin(ctx, "libkiln_aicore.so", &err), KILN_OK);
    /* full size 2 (5 - 1) + 3 = 11 per dim, output_shape 14: 3 past it at stride 2 */
    static const ct c = {"wide_out", 1, 3, 5, 5, 4, 3, 3, 1,         2,        2,
                         1,          1, 0, 0, 0, 0, 0, 0, .osh = 14, .osw = 14};
    const ctgeo geo = case_geo(&c);
    CU_ASSERT_EQUAL(geo.OH, 14);
    ctdata d;
    data_make(&c, &geo, &d);
    kiln_node_id n;
    kiln_graph *g = build(ctx, &c, &geo, false, d.x, d.w, d.b, &n);
    kiln_kernel_fn fn = NULL;
    void *state = NULL;
    const char *engine = NULL;
    setenv("KILN_AICORE_ONEDNN_STRICT", "1", 1);
    CU_ASSERT_NOT_EQUAL(kiln_engine_kernel(g, n, &fn, &state, &engine, &err), KILN_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(kiln_error_message(&err), "wide_out"));
    CU_ASSERT_PTR_NOT_NULL(strstr(kiln_error_message(&err), "oneDNN refused the deconvolution"));
    CU_ASSERT_PTR_NOT_NULL(strstr(kiln_error_message(&err), "output_shape too large"));
    unsetenv("KILN_AICORE_ONEDNN_STRICT");
    kiln_graph_destroy(g);
    CU_ASSERT_TRUE(run_convt(ctx, &c, &geo, false, d.x, d.w, d.b, d.y0));
    CU_ASSERT_EQUAL(compare(c.label, "fallback vs reference", d.y0, d.ref, d.ny), 0);
    data_free(&d);
    kiln_ctx_destroy(ctx);
}

/* NCHW <-> NHWC of an [N, C, S] / [N, S, C] block (S the spatial size). */
static void to_nhwc(const float *src, float *dst, int64_t N, int64_t C, int64_t S)
{
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t s = 0; s < S; s++)
                dst[(n * S + s) * C + c] = src[(n * C + c) * S + s];
}

typedef kiln_status (*nhwc_run_fn)(const kiln_graph *, kiln_node_id, const kiln_tensor *, uint32_t,
                                   kiln_tensor *, kiln_error *);

/*
 * Channels-last tensors (nn_dnnl_deconv_create's nhwc; data_format NHWC
 * selects it for rank-4 nodes, tests/e2e/layout.sh runs that): the test plugin tp_deconv_nhwc links the aicore
 * kernels and runs the oneDNN deconvolution of a node whose X and Y
 * descriptors are [N, H, W, C] / [N, OH, OW, M]; its output must be the
 * reference's, transposed.  2-D (stride 2, pads, output_padding, groups,
 * fused Relu) and 1-D.
 */
static void test_convt_backends_nhwc(void)
{
    kiln_error err;
    kiln_error_clear(&err);
    kiln_ctx *ctx = kiln_ctx_create();
    char path[1024];
    snprintf(path, sizeof(path), "%s/libtp_deconv_nhwc.so",
             getenv("KILN_TEST_PLUGIN_DIR") ? getenv("KILN_TEST_PLUGIN_DIR") : "tests/plugins");
    CU_ASSERT_EQUAL_FATAL(kiln_plugin_load(ctx, path, NULL, &err), KILN_OK);
    void *h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    nhwc_run_fn run = NULL;
    void *sym = dlsym(h, "tp_deconv_nhwc_run");
    memcpy(&run, &sym, sizeof(sym));
    CU_ASSERT_PTR_NOT_NULL_FATAL(run);
    /* clang-format off */
    static const ct cases[] = {
        /* label      N  C   H  W  M   KH KW G  sh sw dh dw pt pl pb pr oph opw */
        {"nhwc_2d",   2, 16, 5, 6, 24, 3, 3, 2, 2, 2, 1, 1, 1, 0, 1, 1, 1, 1, .act = "Relu"},
        {"nhwc_1d",   1, 8,  1, 9, 4,  1, 4, 1, 1, 2, 1, 1, 0, 1, 0, 1, 0, 1, .one_d = true},
    };
    /* clang-format on */
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        const ct *c = &cases[k];
        const ctgeo geo = case_geo(c);
        ctdata d;
        data_make(c, &geo, &d);
        const int64_t IS = c->H * c->W, OS = geo.OH * geo.OW, Mg = c->M / c->G;
        const size_t nx = (size_t)(c->N * c->C * IS);
        float *xt = malloc(nx * 4), *reft = malloc(d.ny * 4);
        to_nhwc(d.x, xt, c->N, c->C, IS);
        to_nhwc(d.ref, reft, c->N, c->M, OS);
        /* the graph: X and Y channels last, W and B as for NCHW */
        kiln_node_id n;
        kiln_graph *g = build(ctx, c, &geo, false, d.x, d.w, d.b, &n);
        const uint32_t rank = c->one_d ? 3 : 4;
        int64_t xd[4] = {c->N, c->H, c->W, c->C}, yd[4] = {c->N, geo.OH, geo.OW, c->M};
        int64_t wd[4] = {c->C, Mg, c->KH, c->KW}, bd[1] = {c->M};
        if (c->one_d) {
            xd[1] = c->W;
            xd[2] = c->C;
            yd[1] = geo.OW;
            yd[2] = c->M;
            wd[2] = c->KW;
        }
        kiln_anchor xa = kiln_node_input_peer(g, n, 0);
        kiln_desc_set_shape(g, kiln_node_output_desc(g, xa.node, 0), (int32_t)rank, xd);
        kiln_desc_set_shape(g, kiln_node_output_desc(g, n, 0), (int32_t)rank, yd);
        kiln_tensor ti[3] = {
            {KILN_DT_FLOAT32, rank, xd, xt, nx * 4},
            {KILN_DT_FLOAT32, rank, wd, d.w, (size_t)(c->C * Mg * c->KH * c->KW) * 4},
            {KILN_DT_FLOAT32, 1, bd, d.b, (size_t)c->M * 4}};
        kiln_tensor to[1] = {{KILN_DT_FLOAT32, rank, yd, d.y0, d.ny * 4}};
        memset(d.y0, 0xff, d.ny * 4);
        kiln_error_clear(&err);
        kiln_status st = run(g, n, ti, 3, to, &err);
        if (st != KILN_OK)
            fprintf(stderr, "  %s: %s\n", c->label, kiln_error_message(&err));
        CU_ASSERT_EQUAL(st, KILN_OK);
        if (st == KILN_OK)
            CU_ASSERT_EQUAL(compare(c->label, "nhwc vs reference", d.y0, reft, d.ny), 0);
        kiln_graph_destroy(g);
        free(xt);
        free(reft);
        data_free(&d);
    }
    kiln_ctx_destroy(ctx);
}

int main(void)
{
    static const kiln_test_case cases[] = {
        {"test_convt_backends_variants", test_convt_backends_variants},
        {"test_convt_backends_refusal", test_convt_backends_refusal},
        {"test_convt_backends_nhwc", test_convt_backends_nhwc},
        {NULL, NULL},
    };
    return kiln_test_run("convt_backends", cases);
}

/*
 * test_cpu_nn.c - the aicore engine's NN kernels (plugins/engines/aicore/nn_*.c)
 * through the real plugin: each case builds a graph (Data producers with
 * static descriptors feeding one op node), loads $KILN_PLUGIN_DIR/libkiln_aicore.so,
 * binds the node's kernel with kiln_engine_kernel and runs it.
 *
 *   - every ONNX node test of Conv, ConvTranspose, pools, BatchNormalization,
 *     Gemm, MatMul, LSTM, Resize, Upsample small enough to embed
 *     (test_cpu_nn_onnx.inc, generated from libonnx-testdata), tolerance 1e-5;
 *   - the attribute forms the node tests miss, against naive loops written
 *     here: grouped/depthwise/dilated/asymmetric/auto_pad/1-D Conv, grouped
 *     ConvTranspose with stride 2 and output_padding, broadcast MatMul, Gemm
 *     bias forms, det-style nearest Resize, bidirectional LSTM with
 *     sequence_lens and layout 1;
 *   - errors name the node.
 */
#include "kiln_test.h"
#include "graph_int.h"
#include "plugin.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

typedef enum { NA_INT, NA_FLOAT, NA_STRING, NA_INTS, NA_FLOATS, NA_STRINGS } na_kind;
typedef struct nn_attr {
    const char *key;
    na_kind kind;
    int64_t i;
    double f;
    const char *s;
    const int64_t *ints;
    const double *floats;
    const char *const *strs;
    uint32_t n;
} nn_attr;
typedef struct nn_data {
    int present;
    kiln_dtype dt;
    uint32_t rank;
    int64_t dims[6];
    const void *data;
} nn_data;
typedef struct nn_onnx_case {
    const char *name, *op;
    uint32_t nin, nout;
    nn_data in[8], out[3];
    const nn_attr *attrs;
    uint32_t nattrs;
} nn_onnx_case;

#include "test_cpu_nn_onnx.inc"

#define TOL 1e-5

static kiln_ctx *load_cpu(void)
{
    kiln_error err;
    kiln_error_clear(&err);
    kiln_ctx *ctx = kiln_ctx_create();
    if (kiln_test_load_plugin(ctx, "libkiln_aicore.so", &err) != KILN_OK) {
        kiln_ctx_destroy(ctx);
        return NULL;
    }
    return ctx;
}

static int64_t numel(const nn_data *d)
{
    int64_t n = 1;
    for (uint32_t i = 0; i < d->rank; i++)
        n *= d->dims[i];
    return n;
}

static void set_attrs(kiln_graph *g, kiln_node_id n, const nn_attr *at, uint32_t count)
{
    kiln_attrs *a = kiln_node_attrs_mut(g, n);
    for (uint32_t i = 0; i < count; i++) {
        const nn_attr *x = &at[i];
        switch (x->kind) {
        case NA_INT:
            kiln_attrs_set_int(a, x->key, x->i);
            break;
        case NA_FLOAT:
            kiln_attrs_set_float(a, x->key, x->f);
            break;
        case NA_STRING:
            kiln_attrs_set_string(a, x->key, x->s);
            break;
        case NA_INTS:
            kiln_attrs_set_list_int(a, x->key, x->ints, x->n);
            break;
        case NA_FLOATS:
            kiln_attrs_set_list_float(a, x->key, x->floats, x->n);
            break;
        default:
            kiln_attrs_set_list_string(a, x->key, x->strs, x->n);
            break;
        }
    }
}

/*
 * Run @p op on the inputs and compare with the expected outputs; returns
 * the number of mismatching values (-1: the kernel failed; its message goes
 * to *msg when given).
 */
static int run_op(kiln_ctx *ctx, const char *label, const char *op, const nn_attr *attrs,
                  uint32_t nattrs, uint32_t nin, const nn_data *in, uint32_t nout,
                  const nn_data *out, char *msg, size_t msgsz)
{
    kiln_graph *g = kiln_graph_create(ctx, "g");
    kiln_node_id n = kiln_graph_add_node(g, "node", op, nin, nout);
    set_attrs(g, n, attrs, nattrs);
    kiln_tensor ti[8], to[3];
    memset(ti, 0, sizeof(ti));
    memset(to, 0, sizeof(to));
    for (uint32_t i = 0; i < nin; i++) {
        if (!in[i].present)
            continue;
        char name[16];
        snprintf(name, sizeof(name), "in%u", i);
        kiln_node_id d = kiln_graph_add_node(g, name, "Data", 0, 1);
        kiln_tensor_desc *desc = kiln_node_output_desc(g, d, 0);
        kiln_desc_set_dtype(g, desc, in[i].dt);
        kiln_desc_set_shape(g, desc, (int32_t)in[i].rank, in[i].dims);
        kiln_edge_add(g, d, 0, n, i);
        ti[i] = (kiln_tensor){in[i].dt, in[i].rank, in[i].dims, (void *)in[i].data,
                              (size_t)numel(&in[i]) * kiln_dtype_size(in[i].dt)};
    }
    for (uint32_t o = 0; o < nout; o++) {
        if (!out[o].present)
            continue;
        kiln_tensor_desc *desc = kiln_node_output_desc(g, n, o);
        kiln_desc_set_dtype(g, desc, out[o].dt);
        kiln_desc_set_shape(g, desc, (int32_t)out[o].rank, out[o].dims);
        size_t nb = (size_t)numel(&out[o]) * kiln_dtype_size(out[o].dt);
        /* all bits set: NaN as float, -1 as int64.  A kernel writes every
         * output value; a planned buffer holds its previous tensor. */
        to[o] = (kiln_tensor){out[o].dt, out[o].rank, out[o].dims, malloc(nb ? nb : 1), nb};
        if (to[o].data)
            memset(to[o].data, 0xff, nb);
    }
    kiln_kernel_fn fn = NULL;
    void *state = NULL;
    const char *engine = NULL;
    kiln_error err;
    kiln_error_clear(&err);
    int bad = -1;
    if (kiln_engine_kernel(g, n, &fn, &state, &engine, &err) == KILN_OK) {
        kiln_kernel_args a = {sizeof(a), g, n, nin, nout, ti, to, NULL, 0, 1};
        if (fn(state, &a, &err) == KILN_OK) {
            bad = 0;
            for (uint32_t o = 0; o < nout; o++) {
                if (!out[o].present)
                    continue;
                for (int64_t k = 0; k < numel(&out[o]); k++) {
                    double got, want;
                    if (out[o].dt == KILN_DT_INT64) {
                        got = (double)((const int64_t *)to[o].data)[k];
                        want = (double)((const int64_t *)out[o].data)[k];
                    } else {
                        got = ((const float *)to[o].data)[k];
                        want = ((const float *)out[o].data)[k];
                    }
                    if (!(fabs(got - want) <= TOL * (1 + fabs(want)))) {
                        if (bad++ < 4)
                            fprintf(stderr, "  %s: output %u [%lld] = %.7g, expected %.7g\n", label,
                                    o, (long long)k, got, want);
                    }
                }
            }
        }
        kiln_engine_kernel_release(g, engine, state);
    }
    if (bad < 0) {
        if (msg)
            snprintf(msg, msgsz, "%s", kiln_error_message(&err));
        else
            fprintf(stderr, "  %s: %s\n", label, kiln_error_message(&err));
    }
    for (uint32_t o = 0; o < nout; o++)
        free(to[o].data);
    kiln_graph_destroy(g);
    return bad;
}

/* ---- ONNX node tests ------------------------------------------------------ */

static void test_cpu_nn_onnx_node_tests(void)
{
    kiln_ctx *ctx = load_cpu();
    CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
    const size_t count = sizeof(onnx_cases) / sizeof(onnx_cases[0]);
    size_t failed = 0;
    for (size_t i = 0; i < count; i++) {
        const nn_onnx_case *c = &onnx_cases[i];
        int bad = run_op(ctx, c->name, c->op, c->attrs, c->nattrs, c->nin, c->in, c->nout, c->out,
                         NULL, 0);
        if (bad != 0) {
            failed++;
            fprintf(stderr, "FAIL %s (%d values)\n", c->name, bad);
        }
    }
    printf("\n  %zu ONNX node tests, %zu failed\n", count, failed);
    CU_ASSERT_EQUAL(failed, 0);
    CU_ASSERT(count >= 70);
    kiln_ctx_destroy(ctx);
}

/* ---- naive references --------------------------------------------------- */

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

#define D4(n, c, h, w)                                                                             \
    {                                                                                              \
        1, KILN_DT_FLOAT32, 4, {n, c, h, w}, NULL                                                  \
    }

typedef struct conv_p {
    int64_t N, C, H, W, M, KH, KW, G, sh, sw, dh, dw, pt, pl, pbm, pr;
} conv_p;

static int64_t conv_out(int64_t in, int64_t k, int64_t s, int64_t d, int64_t p0, int64_t p1)
{
    return (in + p0 + p1 - ((k - 1) * d + 1)) / s + 1;
}

/* Direct Conv (transpose = 0) or ConvTranspose (transpose = 1) into y (zeroed). */
static void conv_ref(const conv_p *p, bool transpose, const float *x, const float *w,
                     const float *b, float *y, int64_t OH, int64_t OW)
{
    const int64_t Cg = p->C / p->G, Mg = p->M / p->G;
    for (int64_t n = 0; n < p->N; n++)
        for (int64_t m = 0; m < p->M; m++) {
            const int64_t g = m / Mg;
            for (int64_t i = 0; i < OH * OW; i++)
                y[(n * p->M + m) * OH * OW + i] = b ? b[m] : 0;
            for (int64_t c = 0; c < Cg; c++)
                for (int64_t kh = 0; kh < p->KH; kh++)
                    for (int64_t kw = 0; kw < p->KW; kw++) {
                        const int64_t ci = g * Cg + c;
                        const float wv = transpose
                                             ? w[((ci * Mg + m % Mg) * p->KH + kh) * p->KW + kw]
                                             : w[((m * Cg + c) * p->KH + kh) * p->KW + kw];
                        const int64_t AH = transpose ? p->H : OH, AW = transpose ? p->W : OW;
                        for (int64_t ah = 0; ah < AH; ah++)
                            for (int64_t aw = 0; aw < AW; aw++) {
                                /* conv: a = output pos; transpose: a = input pos */
                                const int64_t bh = ah * p->sh - p->pt + kh * p->dh;
                                const int64_t bw = aw * p->sw - p->pl + kw * p->dw;
                                if (transpose) {
                                    if (bh < 0 || bh >= OH || bw < 0 || bw >= OW)
                                        continue;
                                    y[((n * p->M + m) * OH + bh) * OW + bw] +=
                                        wv * x[((n * p->C + ci) * p->H + ah) * p->W + aw];
                                } else {
                                    if (bh < 0 || bh >= p->H || bw < 0 || bw >= p->W)
                                        continue;
                                    y[((n * p->M + m) * OH + ah) * OW + aw] +=
                                        wv * x[((n * p->C + ci) * p->H + bh) * p->W + bw];
                                }
                            }
                    }
        }
}

/* Conv (or ConvTranspose) with @p attrs on random data against conv_ref. */
static int check_conv(kiln_ctx *ctx, const char *label, const conv_p *p, bool transpose,
                      const nn_attr *attrs, uint32_t nattrs, int64_t oh_extra, int64_t ow_extra,
                      bool one_d)
{
    int64_t OH, OW;
    if (transpose) {
        OH = p->sh * (p->H - 1) + (p->KH - 1) * p->dh + 1 - p->pt - p->pbm + oh_extra;
        OW = p->sw * (p->W - 1) + (p->KW - 1) * p->dw + 1 - p->pl - p->pr + ow_extra;
    } else {
        OH = conv_out(p->H, p->KH, p->sh, p->dh, p->pt, p->pbm);
        OW = conv_out(p->W, p->KW, p->sw, p->dw, p->pl, p->pr);
    }
    const int64_t Cw = transpose ? p->C : p->M, Mw = transpose ? p->M / p->G : p->C / p->G;
    size_t nx = (size_t)(p->N * p->C * p->H * p->W), nw = (size_t)(Cw * Mw * p->KH * p->KW);
    size_t ny = (size_t)(p->N * p->M * OH * OW);
    float *x = malloc(nx * 4), *w = malloc(nw * 4), *b = malloc((size_t)p->M * 4);
    float *y = calloc(ny, 4);
    fill(x, nx, 1);
    fill(w, nw, 2);
    fill(b, (size_t)p->M, 3);
    conv_ref(p, transpose, x, w, b, y, OH, OW);
    nn_data in[3] = {
        D4(p->N, p->C, p->H, p->W), D4(Cw, Mw, p->KH, p->KW), {1, KILN_DT_FLOAT32, 1, {p->M}, b}};
    nn_data out[1] = {D4(p->N, p->M, OH, OW)};
    in[0].data = x;
    in[1].data = w;
    out[0].data = y;
    if (one_d) { /* drop the H dim (H == KH == 1) */
        in[0].rank = in[1].rank = out[0].rank = 3;
        in[0].dims[2] = p->W;
        in[1].dims[2] = p->KW;
        out[0].dims[2] = OW;
    }
    int bad = run_op(ctx, label, transpose ? "ConvTranspose" : "Conv", attrs, nattrs, 3, in, 1, out,
                     NULL, 0);
    free(x);
    free(w);
    free(b);
    free(y);
    return bad;
}

#define INTS(...)                                                                                  \
    (const int64_t[]){__VA_ARGS__}, NULL, NULL, sizeof((const int64_t[]){__VA_ARGS__}) / 8
#define DIMS(...)                                                                                  \
    (const int64_t[]) { __VA_ARGS__ }
#define A_INTS(k, ...)                                                                             \
    {                                                                                              \
        k, NA_INTS, 0, 0, NULL, INTS(__VA_ARGS__)                                                  \
    }
#define A_INT(k, v)                                                                                \
    {                                                                                              \
        k, NA_INT, v, 0, NULL, NULL, NULL, NULL, 0                                                 \
    }
#define A_STR(k, v)                                                                                \
    {                                                                                              \
        k, NA_STRING, 0, 0, v, NULL, NULL, NULL, 0                                                 \
    }
#define A_FLOAT(k, v)                                                                              \
    {                                                                                              \
        k, NA_FLOAT, 0, v, NULL, NULL, NULL, NULL, 0                                               \
    }

static void test_cpu_nn_conv_forms(void)
{
    kiln_ctx *ctx = load_cpu();
    CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
    /* depthwise 3x3, stride 2, symmetric pads, bias, batch 2 */
    conv_p dw = {2, 4, 7, 6, 4, 3, 3, 4, 2, 2, 1, 1, 1, 1, 1, 1};
    const nn_attr a_dw[] = {A_INT("group", 4), A_INTS("strides", 2, 2), A_INTS("pads", 1, 1, 1, 1)};
    CU_ASSERT_EQUAL(check_conv(ctx, "depthwise", &dw, false, a_dw, 3, 0, 0, false), 0);
    /* group 2, channel multiplier 3, dilation 2, asymmetric pads */
    conv_p gr = {1, 4, 9, 8, 6, 3, 2, 2, 1, 2, 2, 3, 0, 2, 1, 0};
    const nn_attr a_gr[] = {A_INT("group", 2), A_INTS("strides", 1, 2), A_INTS("dilations", 2, 3),
                            A_INTS("pads", 0, 2, 1, 0), A_INTS("kernel_shape", 3, 2)};
    CU_ASSERT_EQUAL(check_conv(ctx, "group_dilated", &gr, false, a_gr, 5, 0, 0, false), 0);
    /* auto_pad: k (2, 4) on 5x7, stride 1 -> totals 1 and 3 */
    conv_p up = {1, 3, 5, 7, 2, 2, 4, 1, 1, 1, 1, 1, 0, 1, 1, 2};
    const nn_attr a_up[] = {A_STR("auto_pad", "SAME_UPPER")};
    CU_ASSERT_EQUAL(check_conv(ctx, "same_upper", &up, false, a_up, 1, 0, 0, false), 0);
    conv_p lo = {1, 3, 5, 7, 2, 2, 4, 1, 1, 1, 1, 1, 1, 2, 0, 1};
    const nn_attr a_lo[] = {A_STR("auto_pad", "SAME_LOWER")};
    CU_ASSERT_EQUAL(check_conv(ctx, "same_lower", &lo, false, a_lo, 1, 0, 0, false), 0);
    conv_p va = {1, 2, 6, 7, 3, 3, 3, 1, 2, 2, 1, 1, 0, 0, 0, 0};
    const nn_attr a_va[] = {A_STR("auto_pad", "VALID"), A_INTS("strides", 2, 2)};
    CU_ASSERT_EQUAL(check_conv(ctx, "valid", &va, false, a_va, 2, 0, 0, false), 0);
    /* 1x1 pointwise (no im2col) and 1-D conv with a large stride (STFT-like) */
    conv_p pw = {2, 5, 3, 4, 6, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0};
    CU_ASSERT_EQUAL(check_conv(ctx, "pointwise", &pw, false, NULL, 0, 0, 0, false), 0);
    conv_p od = {1, 1, 1, 50, 6, 1, 8, 1, 1, 5, 1, 1, 0, 2, 0, 3};
    const nn_attr a_od[] = {A_INTS("strides", 5), A_INTS("pads", 2, 3)};
    CU_ASSERT_EQUAL(check_conv(ctx, "conv1d", &od, false, a_od, 2, 0, 0, true), 0);
    /* ConvTranspose: stride 2, output_padding 1, group 2, pads, bias */
    conv_p t1 = {2, 4, 3, 4, 6, 3, 3, 2, 2, 2, 1, 1, 1, 0, 1, 0};
    const nn_attr a_t1[] = {A_INTS("strides", 2, 2), A_INTS("pads", 1, 0, 1, 0),
                            A_INTS("output_padding", 1, 1), A_INT("group", 2)};
    CU_ASSERT_EQUAL(check_conv(ctx, "convt_s2_group", &t1, true, a_t1, 4, 1, 1, false), 0);
    conv_p t2 = {1, 3, 4, 5, 2, 2, 3, 1, 2, 1, 2, 2, 0, 1, 0, 1};
    const nn_attr a_t2[] = {A_INTS("strides", 2, 1), A_INTS("dilations", 2, 2),
                            A_INTS("pads", 0, 1, 0, 1)};
    CU_ASSERT_EQUAL(check_conv(ctx, "convt_dilated", &t2, true, a_t2, 3, 0, 0, false), 0);
    conv_p t3 = {1, 2, 1, 9, 3, 1, 4, 1, 1, 2, 1, 1, 0, 1, 0, 1};
    const nn_attr a_t3[] = {A_INTS("strides", 2), A_INTS("pads", 1, 1)};
    CU_ASSERT_EQUAL(check_conv(ctx, "convt_1d", &t3, true, a_t3, 2, 0, 0, true), 0);
    kiln_ctx_destroy(ctx);
}

/* ---- MatMul / Gemm -------------------------------------------------------- */

/* A [.., M, K] x B [.., K, N] with numpy broadcasting, written for the shapes below. */
static int check_matmul(kiln_ctx *ctx, const char *label, uint32_t ra, const int64_t *da,
                        uint32_t rb, const int64_t *db, uint32_t ro, const int64_t *dout)
{
    nn_data in[2] = {{1, KILN_DT_FLOAT32, ra, {0}, NULL}, {1, KILN_DT_FLOAT32, rb, {0}, NULL}};
    nn_data out[1] = {{1, KILN_DT_FLOAT32, ro, {0}, NULL}};
    memcpy(in[0].dims, da, ra * 8);
    memcpy(in[1].dims, db, rb * 8);
    memcpy(out[0].dims, dout, ro * 8);
    const int64_t na = numel(&in[0]), nb = numel(&in[1]), no = numel(&out[0]);
    float *a = malloc((size_t)na * 4), *b = malloc((size_t)nb * 4), *y = calloc((size_t)no, 4);
    fill(a, (size_t)na, 4);
    fill(b, (size_t)nb, 5);
    /* 4-D padded view: A [a0, a1, M, K], B [b0, b1, K, N] */
    int64_t A4[4] = {1, 1, 1, 1}, B4[4] = {1, 1, 1, 1};
    for (uint32_t i = 0; i < ra; i++)
        A4[4 - ra + i] = da[i];
    for (uint32_t i = 0; i < rb; i++)
        B4[4 - rb + i] = db[i];
    if (rb == 1) { /* [K] -> [K, 1] */
        B4[2] = db[0];
        B4[3] = 1;
    }
    const int64_t M = A4[2], K = A4[3], N = B4[3];
    const int64_t o0 = A4[0] > B4[0] ? A4[0] : B4[0], o1 = A4[1] > B4[1] ? A4[1] : B4[1];
    for (int64_t i0 = 0; i0 < o0; i0++)
        for (int64_t i1 = 0; i1 < o1; i1++)
            for (int64_t m = 0; m < M; m++)
                for (int64_t n = 0; n < N; n++) {
                    double s = 0;
                    const float *pa =
                        a + (((A4[0] > 1 ? i0 : 0) * A4[1] + (A4[1] > 1 ? i1 : 0)) * M + m) * K;
                    const float *pb =
                        b + ((B4[0] > 1 ? i0 : 0) * B4[1] + (B4[1] > 1 ? i1 : 0)) * K * N;
                    for (int64_t k = 0; k < K; k++)
                        s += (double)pa[k] * pb[k * N + n];
                    y[((i0 * o1 + i1) * M + m) * N + n] = (float)s;
                }
    in[0].data = a;
    in[1].data = b;
    out[0].data = y;
    int bad = run_op(ctx, label, "MatMul", NULL, 0, 2, in, 1, out, NULL, 0);
    free(a);
    free(b);
    free(y);
    return bad;
}

/* Gemm Y [M, N] = alpha op(A) op(B) + beta C against a naive loop; C is
 * [M, N] when @p with_c (else absent), the output starts as NaN (run_op). */
static int check_gemm(kiln_ctx *ctx, const char *label, int64_t M, int64_t K, int64_t N, int ta,
                      int tb, double alpha, double beta, bool with_c)
{
    float *a = malloc((size_t)(M * K) * 4), *b = malloc((size_t)(K * N) * 4);
    float *c = malloc((size_t)(M * N) * 4), *y = malloc((size_t)(M * N) * 4);
    fill(a, (size_t)(M * K), 7);
    fill(b, (size_t)(K * N), 8);
    fill(c, (size_t)(M * N), 9);
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            double sum = 0;
            for (int64_t k = 0; k < K; k++)
                sum += (double)a[ta ? k * M + m : m * K + k] * b[tb ? n * K + k : k * N + n];
            y[m * N + n] = (float)(alpha * sum + (with_c ? beta * c[m * N + n] : 0));
        }
    const nn_attr ga[] = {A_INT("transA", ta), A_INT("transB", tb), A_FLOAT("alpha", alpha),
                          A_FLOAT("beta", beta)};
    nn_data in[3] = {{1, KILN_DT_FLOAT32, 2, {ta ? K : M, ta ? M : K}, a},
                     {1, KILN_DT_FLOAT32, 2, {tb ? N : K, tb ? K : N}, b},
                     {with_c, KILN_DT_FLOAT32, 2, {M, N}, c}};
    nn_data out[1] = {{1, KILN_DT_FLOAT32, 2, {M, N}, y}};
    int bad = run_op(ctx, label, "Gemm", ga, 4, with_c ? 3 : 2, in, 1, out, NULL, 0);
    free(a);
    free(b);
    free(c);
    free(y);
    return bad;
}

static void test_cpu_nn_matmul_gemm(void)
{
    kiln_ctx *ctx = load_cpu();
    CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
    CU_ASSERT_EQUAL(
        check_matmul(ctx, "bcast", 4, DIMS(2, 1, 3, 4), 3, DIMS(3, 4, 5), 4, DIMS(2, 3, 3, 5)), 0);
    CU_ASSERT_EQUAL(check_matmul(ctx, "fold", 3, DIMS(2, 3, 4), 2, DIMS(4, 5), 3, DIMS(2, 3, 5)),
                    0);
    CU_ASSERT_EQUAL(check_matmul(ctx, "a_bcast", 2, DIMS(3, 4), 3, DIMS(2, 4, 5), 3, DIMS(2, 3, 5)),
                    0);
    CU_ASSERT_EQUAL(check_matmul(ctx, "vec_b", 3, DIMS(2, 3, 4), 1, DIMS(4), 2, DIMS(2, 3)), 0);
    CU_ASSERT_EQUAL(check_matmul(ctx, "vec_a", 1, DIMS(4), 3, DIMS(2, 4, 3), 2, DIMS(2, 3)), 0);
    /* Gemm, transA + transB, alpha, beta, C [M, 1] and C [N] (hand-computed) */
    static const float A[] = {1, 4, 2, 5, 3, 6}; /* A^T = [[1,2,3],[4,5,6]] */
    static const float B[] = {1, 0, 2, 0, 1, 1}; /* B^T = [[1,0],[0,1],[2,1]] */
    static const float Cm[] = {10, 20}, Cn[] = {1, -1};
    /* A^T B^T = [[7, 5], [16, 11]]; alpha 2, beta 0.5 */
    static const float Ym[] = {19, 15, 42, 32}, Yn[] = {14.5f, 9.5f, 32.5f, 21.5f};
    const nn_attr ga[] = {A_INT("transA", 1), A_INT("transB", 1), A_FLOAT("alpha", 2.0),
                          A_FLOAT("beta", 0.5)};
    nn_data in[3] = {{1, KILN_DT_FLOAT32, 2, {3, 2}, A},
                     {1, KILN_DT_FLOAT32, 2, {2, 3}, B},
                     {1, KILN_DT_FLOAT32, 2, {2, 1}, Cm}};
    nn_data out[1] = {{1, KILN_DT_FLOAT32, 2, {2, 2}, Ym}};
    CU_ASSERT_EQUAL(run_op(ctx, "gemm_cm", "Gemm", ga, 4, 3, in, 1, out, NULL, 0), 0);
    in[2] = (nn_data){1, KILN_DT_FLOAT32, 1, {2}, Cn};
    out[0].data = Yn;
    CU_ASSERT_EQUAL(run_op(ctx, "gemm_cn", "Gemm", ga, 4, 3, in, 1, out, NULL, 0), 0);
    /* one row or one column (the sgemv path, nn_blas.c), every transpose,
     * with and without C, beta 0 over a NaN output; then a full product */
    static const int64_t shapes[][3] = {{1, 37, 23}, {19, 41, 1}, {1, 5, 1}, {6, 9, 7}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int t = 0; t < 4; t++)
            for (int wc = 0; wc < 2; wc++) {
                char label[64];
                snprintf(label, sizeof label, "gemm %lldx%lldx%lld ta%d tb%d c%d",
                         (long long)shapes[i][0], (long long)shapes[i][1],
                         (long long)shapes[i][2], t & 1, t >> 1, wc);
                CU_ASSERT_EQUAL(check_gemm(ctx, label, shapes[i][0], shapes[i][1], shapes[i][2],
                                           t & 1, t >> 1, 1.5, wc ? 0.75 : 0.0, wc),
                                0);
            }
    /* MatMul by a vector on either side: [1, K] x [K, N] and [M, K] x [K] */
    CU_ASSERT_EQUAL(check_matmul(ctx, "row", 2, DIMS(1, 33), 2, DIMS(33, 17), 2, DIMS(1, 17)), 0);
    CU_ASSERT_EQUAL(check_matmul(ctx, "col", 2, DIMS(13, 33), 1, DIMS(33), 1, DIMS(13)), 0);
    kiln_ctx_destroy(ctx);
}

/* ---- Resize (det: nearest, asymmetric, floor, scales) and pools ----------- */

static void test_cpu_nn_resize_pool_forms(void)
{
    kiln_ctx *ctx = load_cpu();
    CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
    static const float x[] = {1, 2, 3, 4, 5, 6};
    static const float sc[] = {1, 1, 2, 2}, roi[] = {0};
    static const float y[] = {1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3,
                              4, 4, 5, 5, 6, 6, 4, 4, 5, 5, 6, 6};
    const nn_attr ra[] = {A_STR("mode", "nearest"),
                          A_STR("coordinate_transformation_mode", "asymmetric"),
                          A_STR("nearest_mode", "floor")};
    nn_data in[3] = {{1, KILN_DT_FLOAT32, 4, {1, 1, 2, 3}, x},
                     {1, KILN_DT_FLOAT32, 1, {0}, roi},
                     {1, KILN_DT_FLOAT32, 1, {4}, sc}};
    nn_data out[1] = {{1, KILN_DT_FLOAT32, 4, {1, 1, 4, 6}, y}};
    CU_ASSERT_EQUAL(run_op(ctx, "resize_det", "Resize", ra, 3, 3, in, 1, out, NULL, 0), 0);
    /* pytorch_half_pixel linear 3 -> 2 on W: x = (o + .5) * 1.5 - .5 = .25, 1.75 */
    static const float sz[] = {0};
    static const int64_t sizes[] = {1, 1, 2, 2};
    static const float yl[] = {1.25f, 2.75f, 4.25f, 5.75f};
    const nn_attr la[] = {A_STR("mode", "linear"),
                          A_STR("coordinate_transformation_mode", "pytorch_half_pixel")};
    nn_data in4[4] = {
        in[0], {0}, {1, KILN_DT_FLOAT32, 1, {0}, sz}, {1, KILN_DT_INT64, 1, {4}, sizes}};
    nn_data outl[1] = {{1, KILN_DT_FLOAT32, 4, {1, 1, 2, 2}, yl}};
    CU_ASSERT_EQUAL(run_op(ctx, "resize_pt_linear", "Resize", la, 2, 4, in4, 1, outl, NULL, 0), 0);
    /* AveragePool 1-D, k 3, s 2, pads 1/1, ceil_mode, count_include_pad:
       x = 1..6 padded [0 1 2 3 4 5 6 0]; windows [-1..1] [1..3] [3..5] [5..7]: 6 is the end pad, 7
       the ceil overhang */
    static const float px[] = {1, 2, 3, 4, 5, 6};
    static const float py_inc[] = {1, 3, 5, 3}, py_exc[] = {1.5f, 3, 5, 6};
    const nn_attr pa[] = {A_INTS("kernel_shape", 3), A_INTS("strides", 2), A_INTS("pads", 1, 1),
                          A_INT("ceil_mode", 1), A_INT("count_include_pad", 1)};
    nn_data pin[1] = {{1, KILN_DT_FLOAT32, 3, {1, 1, 6}, px}};
    nn_data pout[1] = {{1, KILN_DT_FLOAT32, 3, {1, 1, 4}, py_inc}};
    CU_ASSERT_EQUAL(run_op(ctx, "avgpool_inc", "AveragePool", pa, 5, 1, pin, 1, pout, NULL, 0), 0);
    pout[0].data = py_exc;
    CU_ASSERT_EQUAL(run_op(ctx, "avgpool_exc", "AveragePool", pa, 4, 1, pin, 1, pout, NULL, 0), 0);
    kiln_ctx_destroy(ctx);
}

/* ---- LSTM: bidirectional, sequence_lens, B, P, initial state, layout ------ */

enum { LS = 3, LB = 2, LI = 3, LH = 2, LD = 2 };

static double sigm(double v) { return 1 / (1 + exp(-v)); }

/* Reference LSTM, layout 0: Y [LS, LD, LB, LH], Yh/Yc [LD, LB, LH]. */
static void lstm_ref(const float *x, const float *w, const float *r, const float *bias,
                     const int32_t *lens, const float *h0, const float *c0, const float *p,
                     float *y, float *yh, float *yc)
{
    for (int d = 0; d < LD; d++)
        for (int b = 0; b < LB; b++) {
            double h[LH], c[LH];
            for (int j = 0; j < LH; j++)
                h[j] = h0[(d * LB + b) * LH + j], c[j] = c0[(d * LB + b) * LH + j];
            for (int s = 0; s < lens[b]; s++) {
                const int t = d ? lens[b] - 1 - s : s;
                double gt[4 * LH];
                for (int k = 0; k < 4 * LH; k++) {
                    double v = bias[d * 8 * LH + k] + bias[d * 8 * LH + 4 * LH + k];
                    for (int i = 0; i < LI; i++)
                        v += x[(t * LB + b) * LI + i] * w[(d * 4 * LH + k) * LI + i];
                    for (int i = 0; i < LH; i++)
                        v += h[i] * r[(d * 4 * LH + k) * LH + i];
                    gt[k] = v;
                }
                for (int j = 0; j < LH; j++) {
                    const float *pd = p + d * 3 * LH;
                    double it = sigm(gt[j] + pd[j] * c[j]);
                    double ft = sigm(gt[2 * LH + j] + pd[2 * LH + j] * c[j]);
                    c[j] = ft * c[j] + it * tanh(gt[3 * LH + j]);
                    double ot = sigm(gt[LH + j] + pd[LH + j] * c[j]);
                    h[j] = ot * tanh(c[j]);
                    y[((t * LD + d) * LB + b) * LH + j] = (float)h[j];
                }
            }
            for (int j = 0; j < LH; j++)
                yh[(d * LB + b) * LH + j] = (float)h[j], yc[(d * LB + b) * LH + j] = (float)c[j];
        }
}

static void test_cpu_nn_lstm_forms(void)
{
    kiln_ctx *ctx = load_cpu();
    CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
    float x[LS * LB * LI], w[LD * 4 * LH * LI], r[LD * 4 * LH * LH], bias[LD * 8 * LH];
    float h0[LD * LB * LH], c0[LD * LB * LH], p[LD * 3 * LH];
    float y[LS * LD * LB * LH] = {0}, yh[LD * LB * LH], yc[LD * LB * LH];
    static const int32_t lens[LB] = {3, 1};
    fill(x, sizeof(x) / 4, 11);
    fill(w, sizeof(w) / 4, 12);
    fill(r, sizeof(r) / 4, 13);
    fill(bias, sizeof(bias) / 4, 14);
    fill(h0, sizeof(h0) / 4, 15);
    fill(c0, sizeof(c0) / 4, 16);
    fill(p, sizeof(p) / 4, 17);
    lstm_ref(x, w, r, bias, lens, h0, c0, p, y, yh, yc);
    const nn_attr at[] = {A_INT("hidden_size", LH), A_STR("direction", "bidirectional")};
    nn_data in[8] = {{1, KILN_DT_FLOAT32, 3, {LS, LB, LI}, x},
                     {1, KILN_DT_FLOAT32, 3, {LD, 4 * LH, LI}, w},
                     {1, KILN_DT_FLOAT32, 3, {LD, 4 * LH, LH}, r},
                     {1, KILN_DT_FLOAT32, 2, {LD, 8 * LH}, bias},
                     {1, KILN_DT_INT32, 1, {LB}, lens},
                     {1, KILN_DT_FLOAT32, 3, {LD, LB, LH}, h0},
                     {1, KILN_DT_FLOAT32, 3, {LD, LB, LH}, c0},
                     {1, KILN_DT_FLOAT32, 2, {LD, 3 * LH}, p}};
    nn_data out[3] = {{1, KILN_DT_FLOAT32, 4, {LS, LD, LB, LH}, y},
                      {1, KILN_DT_FLOAT32, 3, {LD, LB, LH}, yh},
                      {1, KILN_DT_FLOAT32, 3, {LD, LB, LH}, yc}};
    CU_ASSERT_EQUAL(run_op(ctx, "lstm_bidi", "LSTM", at, 2, 8, in, 3, out, NULL, 0), 0);
    /* layout 1: X [B, S, I], states [B, D, H], Y [B, S, D, H] */
    float x1[LS * LB * LI], h1[LD * LB * LH], c1[LD * LB * LH];
    float y1[LS * LD * LB * LH], yh1[LD * LB * LH], yc1[LD * LB * LH];
    for (int s = 0; s < LS; s++)
        for (int b = 0; b < LB; b++) {
            memcpy(x1 + (b * LS + s) * LI, x + (s * LB + b) * LI, LI * 4);
            for (int d = 0; d < LD; d++)
                memcpy(y1 + ((b * LS + s) * LD + d) * LH, y + ((s * LD + d) * LB + b) * LH, LH * 4);
        }
    for (int d = 0; d < LD; d++)
        for (int b = 0; b < LB; b++) {
            memcpy(h1 + (b * LD + d) * LH, h0 + (d * LB + b) * LH, LH * 4);
            memcpy(c1 + (b * LD + d) * LH, c0 + (d * LB + b) * LH, LH * 4);
            memcpy(yh1 + (b * LD + d) * LH, yh + (d * LB + b) * LH, LH * 4);
            memcpy(yc1 + (b * LD + d) * LH, yc + (d * LB + b) * LH, LH * 4);
        }
    const nn_attr at1[] = {A_INT("hidden_size", LH), A_STR("direction", "bidirectional"),
                           A_INT("layout", 1)};
    in[0] = (nn_data){1, KILN_DT_FLOAT32, 3, {LB, LS, LI}, x1};
    in[5] = (nn_data){1, KILN_DT_FLOAT32, 3, {LB, LD, LH}, h1};
    in[6] = (nn_data){1, KILN_DT_FLOAT32, 3, {LB, LD, LH}, c1};
    out[0] = (nn_data){1, KILN_DT_FLOAT32, 4, {LB, LS, LD, LH}, y1};
    out[1] = (nn_data){1, KILN_DT_FLOAT32, 3, {LB, LD, LH}, yh1};
    out[2] = (nn_data){1, KILN_DT_FLOAT32, 3, {LB, LD, LH}, yc1};
    CU_ASSERT_EQUAL(run_op(ctx, "lstm_layout1", "LSTM", at1, 3, 8, in, 3, out, NULL, 0), 0);
    kiln_ctx_destroy(ctx);
}

/* ---- errors ---------------------------------------------------------------- */

static void test_cpu_nn_errors(void)
{
    kiln_ctx *ctx = load_cpu();
    CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
    static const float x[2 * 3 * 3], w[4 * 3 * 1 * 1], y[4 * 3 * 3];
    char msg[256] = "";
    const nn_attr g2[] = {A_INT("group", 2)};
    nn_data in[2] = {{1, KILN_DT_FLOAT32, 4, {1, 2, 3, 3}, x},
                     {1, KILN_DT_FLOAT32, 4, {4, 3, 1, 1}, w}};
    nn_data out[1] = {{1, KILN_DT_FLOAT32, 4, {1, 4, 3, 3}, y}};
    CU_ASSERT_EQUAL(run_op(ctx, "bad_conv", "Conv", g2, 1, 2, in, 1, out, msg, sizeof(msg)), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "node"));
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "channels"));
    in[1].dims[1] = 1; /* now consistent, but the output shape is wrong */
    out[0].dims[1] = 5;
    CU_ASSERT_EQUAL(run_op(ctx, "bad_out", "Conv", g2, 1, 2, in, 1, out, msg, sizeof(msg)), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "shape"));
    const nn_attr bad_mode[] = {A_STR("mode", "lanczos")};
    CU_ASSERT_EQUAL(run_op(ctx, "bad_mode", "Resize", bad_mode, 1, 2, in, 1, out, msg, sizeof(msg)),
                    -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "lanczos"));
    kiln_ctx_destroy(ctx);
}

int main(void)
{
    static const kiln_test_case cases[] = {
        {"test_cpu_nn_onnx_node_tests", test_cpu_nn_onnx_node_tests},
        {"test_cpu_nn_conv_forms", test_cpu_nn_conv_forms},
        {"test_cpu_nn_matmul_gemm", test_cpu_nn_matmul_gemm},
        {"test_cpu_nn_resize_pool_forms", test_cpu_nn_resize_pool_forms},
        {"test_cpu_nn_lstm_forms", test_cpu_nn_lstm_forms},
        {"test_cpu_nn_errors", test_cpu_nn_errors},
        {NULL, NULL},
    };
    return kiln_test_run("cpu_nn", cases);
}

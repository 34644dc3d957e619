/*
 * nn_conv_transpose.c - ONNX ConvTranspose on the CPU: sgemm + col2im.
 *
 * X [N, C, (D,) (H,) W], W [C, M/group, k...], optional B [M]; attributes
 * kernel_shape, strides, dilations, pads, output_padding, output_shape,
 * auto_pad and group.  Output spatial size (ONNX):
 *   total = stride * (in - 1) + output_padding + (k - 1) * dilation + 1
 *   out   = total - pad_begin - pad_end                (explicit pads)
 *   out   = output_shape[i], or in * stride for SAME_*  (pads derived:
 *           SAME_UPPER puts the odd pad at the end, otherwise at the begin)
 *
 * Per image and group: col [Mg*kprod, IS] = W_g^T [Mg*kprod, Cg] * X_g
 * [Cg, IS] (one sgemm), then col2im scatters-adds col into Y_g (pre-filled
 * with the bias).  Output positions no input reaches keep the bias.
 *
 * That is the fallback: by default prepare() resolves the geometry for the
 * node's static shapes and builds its oneDNN deconvolution
 * (nn_dnnl_deconv.c) and the calls run it; sgemm + col2im serves the nodes
 * oneDNN refuses (dynamic shapes, dtypes, pads it cannot express), calls
 * whose shapes differ from the prepared ones, and every ConvTranspose under
 * the session option aicore.conv_backend=blas (node attribute
 * _kiln_conv_backend = "blas").  KILN_AICORE_ONEDNN_STRICT=1 in the
 * environment makes a refusal an error naming the node, as for Conv.
 */
#include "nn_ops.h"

#include "nn_blas.h"
#include <stdlib.h>
#include <string.h>

typedef struct convt_state {
    nn_win win;
    int64_t group;
    uint32_t nop, nos;
    int64_t opad[NN_SP], oshape[NN_SP + 2];
    nn_act act; /* fused activation (nn_fusion.c) */
    nn_buf col;
    nn_dnnl_deconv *dnnl; /* NULL: the BLAS path */
    bool nhwc;            /* data_format NHWC (the aicore format selection) */
} convt_state;

/* Geometry of the transposed window: geo->in = X spatial, geo->out = Y spatial. */
static kiln_status convt_geom(const convt_state *s, uint32_t nsp, const int64_t *in,
                              const int64_t *kernel, nn_geom *geo, const kiln_kernel_args *a,
                              kiln_error *err)
{
    const nn_win *w = &s->win;
    if (nsp < 1 || nsp > NN_SP)
        return cpu_fail(a, err, KILN_ERR_UNSUPPORTED, "%u spatial dims (1 to %d supported)", nsp,
                        NN_SP);
    if ((w->nk && w->nk != nsp) || (w->ns && w->ns != nsp) || (w->nd && w->nd != nsp) ||
        (w->np && w->np != 2 * nsp) || (s->nop && s->nop != nsp) ||
        (s->nos && s->nos != nsp && s->nos != nsp + 2))
        return cpu_fail(a, err, KILN_ERR_INVALID,
                        "kernel_shape/strides/dilations/pads/output_padding/output_shape do not "
                        "match %u spatial dims",
                        nsp);
    const uint32_t off = NN_SP - nsp;
    nn_geom_init(geo, nsp);
    for (uint32_t i = 0; i < nsp; i++) {
        const uint32_t j = off + i;
        const int64_t k = kernel[i];
        if (w->nk && w->k[i] != k)
            return cpu_fail(a, err, KILN_ERR_INVALID,
                            "kernel_shape %lld differs from the weight's %lld", (long long)w->k[i],
                            (long long)k);
        const int64_t st = w->ns ? w->s[i] : 1, dl = w->nd ? w->d[i] : 1;
        const int64_t op = s->nop ? s->opad[i] : 0;
        const int64_t total = st * (in[i] - 1) + op + (k - 1) * dl + 1;
        int64_t out, pb, pe;
        const bool same = w->auto_pad == NN_PAD_SAME_UPPER || w->auto_pad == NN_PAD_SAME_LOWER;
        if (s->nos || same) {
            out = s->nos ? s->oshape[s->nos - nsp + i] : in[i] * st;
            /* a larger output_shape leaves the extra at the end (ONNX Runtime, node tests) */
            const int64_t tp = total > out ? total - out : 0;
            if (w->auto_pad == NN_PAD_SAME_UPPER) {
                pb = tp / 2;
                pe = tp - tp / 2;
            } else {
                pb = tp - tp / 2;
                pe = tp / 2;
            }
        } else {
            pb = (w->np && w->auto_pad == NN_PAD_NOTSET) ? w->pads[i] : 0;
            pe = (w->np && w->auto_pad == NN_PAD_NOTSET) ? w->pads[nsp + i] : 0;
            out = total - pb - pe;
        }
        if (out < 0)
            return cpu_fail(a, err, KILN_ERR_INVALID, "negative output size %lld", (long long)out);
        geo->in[j] = in[i];
        geo->out[j] = out;
        geo->k[j] = k;
        geo->s[j] = st;
        geo->d[j] = dl;
        geo->pb[j] = pb;
        geo->pe[j] = pe;
    }
    return KILN_OK;
}

/* Y [Mg, OS] += col2im(col [Mg*kprod, IS]). */
static void col2im(const float *col, int64_t mg, const nn_geom *g, float *y)
{
    const int64_t ID = g->in[0], IH = g->in[1], IW = g->in[2];
    const int64_t OD = g->out[0], OH = g->out[1], OW = g->out[2];
    const int64_t IS = ID * IH * IW, OS = OD * OH * OW;
    const float *row = col;
    for (int64_t m = 0; m < mg; m++) {
        float *ym = y + m * OS;
        for (int64_t kd = 0; kd < g->k[0]; kd++)
            for (int64_t kh = 0; kh < g->k[1]; kh++)
                for (int64_t kw = 0; kw < g->k[2]; kw++, row += IS) {
                    const int64_t offw = kw * g->d[2] - g->pb[2];
                    int64_t lo = nn_first_in_range(offw, g->s[2]);
                    if (lo > IW)
                        lo = IW;
                    const int64_t hi = nn_end_in_range(offw, g->s[2], OW, lo, IW);
                    for (int64_t id = 0; id < ID; id++) {
                        const int64_t od = id * g->s[0] - g->pb[0] + kd * g->d[0];
                        if (od < 0 || od >= OD)
                            continue;
                        for (int64_t ih = 0; ih < IH; ih++) {
                            const int64_t oh = ih * g->s[1] - g->pb[1] + kh * g->d[1];
                            if (oh < 0 || oh >= OH)
                                continue;
                            const float *r = row + (id * IH + ih) * IW;
                            float *yr = ym + (od * OH + oh) * OW;
                            const int64_t sw = g->s[2];
                            for (int64_t iw = lo; iw < hi; iw++)
                                yr[iw * sw + offw] += r[iw];
                        }
                    }
                }
    }
}

NN_PREPARE(nn_convt_prepare)
{
    convt_state *s;
    kiln_status st = cpu_state_new(g, n, sizeof(*s), state, err);
    if (st)
        return st;
    s = *state;
    if ((st = nn_conv_attrs_read(g, n, &s->win, &s->group, &s->act, err)) != KILN_OK)
        return st;
    const int64_t *v;
    uint32_t c;
    if (cpu_attr_ints(g, n, "output_padding", &v, &c)) {
        if (c > NN_SP)
            return cpu_fail_node(g, n, err, KILN_ERR_UNSUPPORTED, "output_padding too long");
        memcpy(s->opad, v, c * sizeof(int64_t));
        s->nop = c;
    }
    if (cpu_attr_ints(g, n, "output_shape", &v, &c) && c > 0) {
        if (c > NN_SP + 2)
            return cpu_fail_node(g, n, err, KILN_ERR_UNSUPPORTED, "output_shape too long");
        memcpy(s->oshape, v, c * sizeof(int64_t));
        s->nos = c;
    }
    int64_t x[8], w[8];
    int32_t rx = nn_input_dims(g, n, 0, x, 8), rw = nn_input_dims(g, n, 1, w, 8);
    s->nhwc = nn_is_nhwc(g, n);
    if (s->nhwc && rx == 4) /* the geometry from X's NCHW dims */
        nn_nhwc_to_nchw_dims((int64_t[4]){x[0], x[1], x[2], x[3]}, x);
    nn_geom geo;
    const bool geo_ok = rx >= 3 && rx == rw &&
                        convt_geom(s, (uint32_t)rx - 2, x + 2, w + 2, &geo, NULL, NULL) == KILN_OK;
    if (nn_conv_wants_dnnl(g, n)) {
        char why[256] = "X and W need static shapes of rank 3 to 5 and a valid window";
        if (geo_ok)
            s->dnnl =
                nn_dnnl_deconv_create(g, n, &geo, s->group, &s->act, s->nhwc, why, sizeof(why));
        if (s->dnnl)
            return KILN_OK;
        const char *strict = getenv("KILN_AICORE_ONEDNN_STRICT");
        if (strict && strcmp(strict, "1") == 0)
            return cpu_fail_node(
                g, n, err, KILN_ERR_UNSUPPORTED,
                "oneDNN refused the deconvolution (KILN_AICORE_ONEDNN_STRICT=1): %s", why);
    }
    if (geo_ok) {
        size_t need = (size_t)(w[1] * geo.k[0] * geo.k[1] * geo.k[2] * nn_geom_in_size(&geo));
        if ((st = nn_buf_alloc(&s->col, need, g, n, err)) != KILN_OK)
            return st;
    }
    return KILN_OK;
}

void nn_convt_release(void *state)
{
    convt_state *s = state;
    if (s) {
        nn_buf_free(&s->col);
        nn_dnnl_deconv_destroy(s->dnnl);
    }
    cpu_state_free(state);
}

static NN_KERNEL(convt_nchw);

NN_KERNEL(nn_convt_run)
{
    convt_state *s = state;
    if (!s->nhwc)
        return convt_nchw(state, a, err);
    const kiln_tensor *X = NULL, *W = NULL, *B = NULL;
    kiln_status st = nn_conv_operands(a, &X, &W, &B, err);
    if (st)
        return st;
    if (s->dnnl && nn_dnnl_deconv_matches(s->dnnl, X, W, B))
        return nn_dnnl_deconv_run(s->dnnl, a, X, W, B, err);
    /* channels-last without oneDNN: the NCHW path on transposed copies */
    convt_state t = *s;
    t.nhwc = false;
    t.dnnl = NULL;
    return nn_run_nchw_on_nhwc(convt_nchw, &t, a, err);
}

static NN_KERNEL(convt_nchw)
{
    const convt_state *s = state;
    const kiln_tensor *X, *W, *B;
    kiln_status st = nn_conv_operands(a, &X, &W, &B, err);
    if (st)
        return st;
    NN_BLAS_REQUIRE(a, err);
    const int64_t N = X->dims[0], C = X->dims[1], G = s->group, Mg = W->dims[1];
    const int64_t M = Mg * G;
    if (W->dims[0] != C || C % G != 0)
        return cpu_fail(a, err, KILN_ERR_INVALID,
                        "X has %lld channels, W [%lld, %lld, ...], group %lld: inconsistent",
                        (long long)C, (long long)W->dims[0], (long long)Mg, (long long)G);
    if (B && cpu_numel(B) != M)
        return cpu_fail(a, err, KILN_ERR_INVALID, "B has %lld values, expected %lld",
                        (long long)cpu_numel(B), (long long)M);
    nn_geom geo;
    if ((st = convt_geom(s, X->rank - 2, X->dims + 2, W->dims + 2, &geo, a, err)) != KILN_OK)
        return st;
    if ((st = nn_check_out_geom(a, N, M, &geo, err)) != KILN_OK)
        return st;
    if (s->dnnl && nn_dnnl_deconv_matches(s->dnnl, X, W, B))
        return nn_dnnl_deconv_run(s->dnnl, a, X, W, B, err);

    const int64_t Cg = C / G, K = Mg * geo.k[0] * geo.k[1] * geo.k[2];
    const int64_t IS = nn_geom_in_size(&geo), OS = nn_geom_out_size(&geo);
    float *owned = NULL, *col = nn_scratch(&s->col, (size_t)(K * IS), &owned);
    if (!col)
        return cpu_fail(a, err, KILN_ERR_NOMEM, "out of memory for the col2im buffer");
    const float *x = X->data, *w = W->data, *b = B ? B->data : NULL;
    float *y = a->outputs[0].data;
    for (int64_t img = 0; img < N; img++) {
        for (int64_t grp = 0; grp < G; grp++) {
            float *yg = y + (img * M + grp * Mg) * OS;
            for (int64_t m = 0; m < Mg; m++) {
                const float bv = b ? b[grp * Mg + m] : 0.0f;
                for (int64_t o = 0; o < OS; o++)
                    yg[m * OS + o] = bv;
            }
            if (IS == 0 || K == 0 || Cg == 0) {
                nn_act_apply(&s->act, yg, Mg * OS);
                continue;
            }
            nn_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (blasint)K, (blasint)IS,
                        (blasint)Cg, 1.0f, w + grp * Cg * K, (blasint)K,
                        x + (img * C + grp * Cg) * IS, (blasint)IS, 0.0f, col, (blasint)IS);
            col2im(col, Mg, &geo, yg);
            nn_act_apply(&s->act, yg, Mg * OS);
        }
    }
    kiln_free(owned);
    return KILN_OK;
}

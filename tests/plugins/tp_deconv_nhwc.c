/*
 * tp_deconv_nhwc.c - a test plugin linking the aicore engine's kernels
 * (kiln_aicore_kernels) to reach oneDNN's deconvolution with channels-last
 * tensors (nn_dnnl_deconv_create's nhwc) in 1-D and 2-D (the node attribute
 * data_format NHWC selects it for rank-4 nodes only): test_convt_backends.c loads it, finds tp_deconv_nhwc_run
 * with dlsym and compares its output with a reference.
 *
 * tp_deconv_nhwc_run(g, n, inputs, nin, out, err): ConvTranspose node @p n
 * of @p g (explicit pads, strides, dilations, output_padding; X [N,
 * spatial..., C], Y [N, spatial..., M] in the descriptors) made and run once
 * on oneDNN; KILN_OK, or an error in @p err.
 */
#include "nn_ops.h"

#include <string.h>

static kiln_status init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)h;
    (void)r;
    (void)e;
    return KILN_OK;
}

static void fini(void) { nn_dnnl_shutdown(); }

KILN_PLUGIN_DEFINE("tp.deconv_nhwc", "0.1.0", "Apache-2.0",
                   "test: oneDNN deconvolution on channels-last tensors", init, fini)

KILN_PLUGIN_EXPORT kiln_status tp_deconv_nhwc_run(const kiln_graph *g, kiln_node_id n,
                                                  const kiln_tensor *in, uint32_t nin,
                                                  kiln_tensor *out, kiln_error *err);

KILN_PLUGIN_EXPORT kiln_status tp_deconv_nhwc_run(const kiln_graph *g, kiln_node_id n,
                                                  const kiln_tensor *in, uint32_t nin,
                                                  kiln_tensor *out, kiln_error *err)
{
    nn_win win;
    int64_t group;
    nn_act act;
    kiln_status st = nn_conv_attrs_read(g, n, &win, &group, &act, err);
    if (st != KILN_OK)
        return st;
    /* the transposed window along each spatial dim, ONNX's explicit-pads form */
    const uint32_t nsp = in[0].rank - 2, off = NN_SP - nsp;
    const int64_t *op = NULL;
    uint32_t nop = 0;
    cpu_attr_ints(g, n, "output_padding", &op, &nop);
    nn_geom geo;
    nn_geom_init(&geo, nsp);
    for (uint32_t i = 0; i < nsp; i++) {
        const uint32_t j = off + i;
        geo.in[j] = in[0].dims[1 + i]; /* X [N, spatial..., C] */
        geo.k[j] = in[1].dims[2 + i];
        geo.s[j] = win.ns ? win.s[i] : 1;
        geo.d[j] = win.nd ? win.d[i] : 1;
        geo.pb[j] = win.np ? win.pads[i] : 0;
        geo.pe[j] = win.np ? win.pads[nsp + i] : 0;
        geo.out[j] = geo.s[j] * (geo.in[j] - 1) + (i < nop ? op[i] : 0) +
                     (geo.k[j] - 1) * geo.d[j] + 1 - geo.pb[j] - geo.pe[j];
    }
    char why[256];
    nn_dnnl_deconv *c = nn_dnnl_deconv_create(g, n, &geo, group, &act, true, why, sizeof(why));
    if (!c)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "oneDNN refused: %s", why);
    const kiln_tensor *B = nin > 2 ? &in[2] : NULL;
    if (nn_dnnl_deconv_matches(c, &in[0], &in[1], B)) {
        kiln_kernel_args a = {sizeof(a), g, n, nin, 1, in, out, NULL, 0, 1};
        st = nn_dnnl_deconv_run(c, &a, &in[0], &in[1], B, err);
    } else {
        st = kiln_errorf(err, KILN_ERR_INVALID, "the tensors differ from the node's descriptors");
    }
    nn_dnnl_deconv_destroy(c);
    return st;
}

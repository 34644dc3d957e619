/*
 * nn_table.c - the CPU engine's NN op table (cpu_ops_nn[]) and the helpers
 * the nn_*.c kernels share: conv/pool window attributes and their geometry
 * (ONNX output-size and auto_pad rules, the output shape check), scratch
 * buffers, descriptor dims.
 *
 * Every entry handles float32 (output 0).  prepare() reads the node's
 * attributes once and, when the input descriptors are static, sizes the
 * scratch memory; run() checks the runtime shapes and falls back to a
 * per-call scratch when they differ from what prepare() saw.
 */
#include "nn_ops.h"

#include <string.h>

/* ---- window attributes ---------------------------------------------------- */

static kiln_status read_list(const kiln_graph *g, kiln_node_id n, const char *key, int64_t *out,
                             uint32_t cap, uint32_t *count, kiln_error *err)
{
    const int64_t *v;
    uint32_t c;
    *count = 0;
    if (!cpu_attr_ints(g, n, key, &v, &c))
        return KILN_OK;
    if (c > cap)
        return cpu_fail_node(g, n, err, KILN_ERR_UNSUPPORTED,
                             "%s has %u values; at most %u spatial dims are supported", key, c,
                             cap);
    memcpy(out, v, c * sizeof(int64_t));
    *count = c;
    return KILN_OK;
}

kiln_status nn_win_read(const kiln_graph *g, kiln_node_id n, nn_win *w, kiln_error *err)
{
    memset(w, 0, sizeof(*w));
    kiln_status st = read_list(g, n, "kernel_shape", w->k, NN_SP, &w->nk, err);
    if (!st)
        st = read_list(g, n, "strides", w->s, NN_SP, &w->ns, err);
    if (!st)
        st = read_list(g, n, "dilations", w->d, NN_SP, &w->nd, err);
    if (!st)
        st = read_list(g, n, "pads", w->pads, 2 * NN_SP, &w->np, err);
    if (st)
        return st;
    const char *ap = cpu_attr_str(g, n, "auto_pad", "NOTSET");
    if (strcmp(ap, "NOTSET") == 0 || ap[0] == '\0')
        w->auto_pad = NN_PAD_NOTSET;
    else if (strcmp(ap, "SAME_UPPER") == 0)
        w->auto_pad = NN_PAD_SAME_UPPER;
    else if (strcmp(ap, "SAME_LOWER") == 0)
        w->auto_pad = NN_PAD_SAME_LOWER;
    else if (strcmp(ap, "VALID") == 0)
        w->auto_pad = NN_PAD_VALID;
    else
        return cpu_fail_node(g, n, err, KILN_ERR_INVALID, "unknown auto_pad '%s'", ap);
    w->ceil_mode = cpu_attr_int(g, n, "ceil_mode", 0) != 0;
    for (uint32_t i = 0; i < w->ns; i++)
        if (w->s[i] <= 0)
            return cpu_fail_node(g, n, err, KILN_ERR_INVALID, "strides must be positive");
    for (uint32_t i = 0; i < w->nd; i++)
        if (w->d[i] <= 0)
            return cpu_fail_node(g, n, err, KILN_ERR_INVALID, "dilations must be positive");
    for (uint32_t i = 0; i < w->nk; i++)
        if (w->k[i] <= 0)
            return cpu_fail_node(g, n, err, KILN_ERR_INVALID, "kernel_shape must be positive");
    for (uint32_t i = 0; i < w->np; i++)
        if (w->pads[i] < 0)
            return cpu_fail_node(g, n, err, KILN_ERR_UNSUPPORTED, "negative pads");
    return KILN_OK;
}

static int64_t ceil_div(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

void nn_geom_init(nn_geom *geo, uint32_t nsp)
{
    geo->nsp = nsp;
    for (uint32_t j = 0; j < NN_SP; j++) {
        geo->in[j] = geo->out[j] = geo->k[j] = geo->s[j] = geo->d[j] = 1;
        geo->pb[j] = geo->pe[j] = 0;
    }
}

kiln_status nn_check_out_geom(const kiln_kernel_args *a, int64_t n, int64_t c, const nn_geom *geo,
                              kiln_error *err)
{
    int64_t od[2 + NN_SP] = {n, c};
    for (uint32_t i = 0; i < geo->nsp; i++)
        od[2 + i] = geo->out[NN_SP - geo->nsp + i];
    return cpu_check_out_dims(a, 0, 2 + geo->nsp, od, err);
}

kiln_status nn_geom_forward(const nn_win *w, uint32_t nsp, const int64_t *in,
                            const int64_t *kernel, nn_geom *geo, const kiln_kernel_args *a,
                            kiln_error *err)
{
    if (nsp < 1 || nsp > NN_SP)
        return cpu_fail(a, err, KILN_ERR_UNSUPPORTED, "%u spatial dims (1 to %d supported)", nsp,
                        NN_SP);
    if (w->nk && w->nk != nsp)
        return cpu_fail(a, err, KILN_ERR_INVALID, "kernel_shape has %u dims, input has %u",
                        w->nk, nsp);
    if (!w->nk && !kernel)
        return cpu_fail(a, err, KILN_ERR_INVALID, "kernel_shape is missing");
    if ((w->ns && w->ns != nsp) || (w->nd && w->nd != nsp) || (w->np && w->np != 2 * nsp))
        return cpu_fail(a, err, KILN_ERR_INVALID,
                        "strides/dilations/pads do not match %u spatial dims", nsp);
    uint32_t off = NN_SP - nsp;
    nn_geom_init(geo, nsp);
    for (uint32_t i = 0; i < nsp; i++) {
        uint32_t j = off + i;
        int64_t k = w->nk ? w->k[i] : kernel[i];
        if (kernel && kernel[i] != k)
            return cpu_fail(a, err, KILN_ERR_INVALID,
                            "kernel_shape %lld differs from the weight's %lld", (long long)k,
                            (long long)kernel[i]);
        int64_t s = w->ns ? w->s[i] : 1, d = w->nd ? w->d[i] : 1;
        int64_t ext = (k - 1) * d + 1, pb = 0, pe = 0, out;
        if (w->auto_pad == NN_PAD_SAME_UPPER || w->auto_pad == NN_PAD_SAME_LOWER) {
            out = ceil_div(in[i], s);
            int64_t total = (out - 1) * s + ext - in[i];
            if (total < 0)
                total = 0;
            pb = w->auto_pad == NN_PAD_SAME_UPPER ? total / 2 : total - total / 2;
            pe = total - pb;
        } else {
            if (w->auto_pad == NN_PAD_NOTSET && w->np) {
                pb = w->pads[i];
                pe = w->pads[nsp + i];
            }
            int64_t num = in[i] + pb + pe - ext;
            if (num < 0)
                out = 0;
            else if (w->ceil_mode) {
                out = ceil_div(num, s) + 1;
                if ((out - 1) * s >= in[i] + pb) /* last window starts in the end pad */
                    out--;
            } else
                out = num / s + 1;
        }
        geo->in[j] = in[i];
        geo->out[j] = out;
        geo->k[j] = k;
        geo->s[j] = s;
        geo->d[j] = d;
        geo->pb[j] = pb;
        geo->pe[j] = pe;
    }
    return KILN_OK;
}

/* ---- scratch and descriptors ---------------------------------------------- */

float *nn_scratch(const nn_buf *cached, size_t n, float **owned)
{
    *owned = NULL;
    if (n == 0)
        n = 1;
    if (cached && cached->p && cached->n >= n)
        return cached->p;
    *owned = kiln_alloc(n * sizeof(float));
    return *owned;
}

kiln_status nn_buf_alloc(nn_buf *b, size_t n, const kiln_graph *g, kiln_node_id nd,
                         kiln_error *err)
{
    b->p = kiln_alloc((n ? n : 1) * sizeof(float));
    b->n = b->p ? n : 0;
    if (!b->p)
        return cpu_fail_node(g, nd, err, KILN_ERR_NOMEM, "out of memory for %zu scratch floats",
                             n);
    return KILN_OK;
}

void nn_buf_free(nn_buf *b)
{
    kiln_free(b->p);
    b->p = NULL;
    b->n = 0;
}

int32_t nn_input_dims(const kiln_graph *g, kiln_node_id n, uint32_t i, int64_t *dims,
                      uint32_t cap)
{
    if (i >= kiln_node_input_count(g, n) || kiln_node_input_peer(g, n, i).node == 0)
        return -1;
    const kiln_tensor_desc *d = kiln_node_input_desc(g, n, i);
    int32_t r = d ? kiln_desc_rank(d) : -1;
    if (r < 0 || (uint32_t)r > cap)
        return -1;
    const int64_t *v = kiln_desc_dims(d);
    for (int32_t k = 0; k < r; k++) {
        if (v[k] < 0)
            return -1;
        dims[k] = v[k];
    }
    return r;
}

kiln_status nn_check_float_inputs(const kiln_kernel_args *a, uint32_t lo, uint32_t hi,
                                  bool out0, kiln_error *err)
{
    for (uint32_t i = lo; i < hi && i < a->input_count; i++)
        if (cpu_has_input(a, i) && a->inputs[i].dtype != KILN_DT_FLOAT32)
            return cpu_fail(a, err, KILN_ERR_UNSUPPORTED, "input %u is %s; float32 expected", i,
                            kiln_dtype_name(a->inputs[i].dtype));
    if (out0 && (a->output_count < 1 || a->outputs[0].dtype != KILN_DT_FLOAT32 ||
                 !a->outputs[0].data))
        return cpu_fail(a, err, KILN_ERR_INVALID, "output 0 must be a float32 buffer");
    return KILN_OK;
}

/* ---- the table ------------------------------------------------------------ */

const cpu_op cpu_ops_nn[] = {
    {"Conv", CPU_FLOATS, nn_conv_prepare, nn_conv_run, nn_conv_release},
    {"ConvTranspose", CPU_FLOATS, nn_convt_prepare, nn_convt_run, nn_convt_release},
    {"MatMul", CPU_FLOATS, NULL, nn_matmul_run, NULL},
    {"FusedMatMul", CPU_FLOATS, nn_fused_matmul_prepare, nn_fused_matmul_run, cpu_state_free},
    {"Gemm", CPU_FLOATS, nn_gemm_prepare, nn_gemm_run, cpu_state_free},
    {"BatchNormalization", CPU_FLOATS, nn_batchnorm_prepare, nn_batchnorm_run, cpu_state_free},
    {"AveragePool", CPU_FLOATS, nn_pool_any_prepare, nn_avgpool_any_run, nn_pool_any_release},
    {"MaxPool", CPU_FLOATS, nn_pool_any_prepare, nn_maxpool_any_run, nn_pool_any_release},
    {"GlobalAveragePool", CPU_FLOATS, NULL, nn_global_avgpool_run, NULL},
    {"GlobalMaxPool", CPU_FLOATS, NULL, nn_global_maxpool_run, NULL},
    {"Resize", CPU_FLOATS, nn_resize_prepare, nn_resize_run, cpu_state_free},
    {"Upsample", CPU_FLOATS, nn_resize_prepare, nn_resize_run, cpu_state_free},
    {"LSTM", CPU_FLOATS, nn_lstm_prepare, nn_lstm_run, nn_lstm_release},
    {"TransData", 0, nn_transdata_prepare, nn_transdata_run, cpu_state_free},
};
const uint32_t cpu_ops_nn_count = sizeof(cpu_ops_nn) / sizeof(cpu_ops_nn[0]);

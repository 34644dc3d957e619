/*
 * infer_ops_nn.c - shape/dtype inference of the NN ops: Conv, ConvTranspose,
 * MaxPool, AveragePool, GlobalAveragePool, Gemm, MatMul, FusedMatMul, BatchNormalization,
 * LSTM and Resize (ONNX semantics, every attribute the real models use:
 * auto_pad, pads, strides, dilations, group, ceil_mode, output_padding,
 * output_shape, transA/B, layout, sizes/scales).
 */
#include "infer.h"

#include <math.h>
#include <string.h>

/* Spatial attributes of a conv/pool node over @p ns spatial dims. */
typedef struct spatial {
    int64_t k[INFER_MAX_RANK], s[INFER_MAX_RANK], d[INFER_MAX_RANK];
    int64_t pb[INFER_MAX_RANK], pe[INFER_MAX_RANK];
    const char *auto_pad;
} spatial;

static kiln_status read_spatial(const infer_node *nd, int32_t ns, const int64_t *kernel,
                                spatial *sp, kiln_error *err)
{
    int64_t v[2 * INFER_MAX_RANK];
    uint32_t n;
    for (int32_t i = 0; i < ns; i++) {
        sp->k[i] = kernel ? kernel[i] : -1;
        sp->s[i] = sp->d[i] = 1;
        sp->pb[i] = sp->pe[i] = 0;
    }
    if (infer_ints(nd, "kernel_shape", UINT32_MAX, v, 2 * INFER_MAX_RANK, &n)) {
        if (n != (uint32_t)ns)
            return infer_fail(nd, err, KILN_ERR_INVALID, "kernel_shape has %u dims, expected %d", n,
                              (int)ns);
        memcpy(sp->k, v, n * sizeof(int64_t));
    }
    if (infer_ints(nd, "strides", UINT32_MAX, v, 2 * INFER_MAX_RANK, &n) && n == (uint32_t)ns)
        memcpy(sp->s, v, n * sizeof(int64_t));
    if (infer_ints(nd, "dilations", UINT32_MAX, v, 2 * INFER_MAX_RANK, &n) && n == (uint32_t)ns)
        memcpy(sp->d, v, n * sizeof(int64_t));
    if (infer_ints(nd, "pads", UINT32_MAX, v, 2 * INFER_MAX_RANK, &n)) {
        if (n != 2u * (uint32_t)ns)
            return infer_fail(nd, err, KILN_ERR_INVALID, "pads has %u values, expected %d", n,
                              (int)(2 * ns));
        memcpy(sp->pb, v, (size_t)ns * sizeof(int64_t));
        memcpy(sp->pe, v + ns, (size_t)ns * sizeof(int64_t));
    }
    sp->auto_pad = "NOTSET";
    kiln_attrs_get_string(nd->attrs, "auto_pad", &sp->auto_pad);
    for (int32_t i = 0; i < ns; i++)
        if (sp->s[i] <= 0 || sp->d[i] <= 0)
            return infer_fail(nd, err, KILN_ERR_INVALID, "non-positive stride or dilation");
    return KILN_OK;
}

/* Output size of a conv/pool window over one dim (-1 when unknown). */
static int64_t window_out(const spatial *sp, int32_t i, int64_t in, bool ceil_mode)
{
    if (in < 0 || sp->k[i] < 0)
        return -1;
    if (strcmp(sp->auto_pad, "SAME_UPPER") == 0 || strcmp(sp->auto_pad, "SAME_LOWER") == 0)
        return (in + sp->s[i] - 1) / sp->s[i];
    int64_t pads = strcmp(sp->auto_pad, "VALID") == 0 ? 0 : sp->pb[i] + sp->pe[i];
    int64_t ext = (sp->k[i] - 1) * sp->d[i] + 1;
    int64_t num = in + pads - ext;
    if (num < 0)
        return 0;
    int64_t o = ceil_mode ? (num + sp->s[i] - 1) / sp->s[i] + 1 : num / sp->s[i] + 1; /* num >= 0 */
    if (ceil_mode && (o - 1) * sp->s[i] >= in + sp->pb[i])
        o--;
    return o;
}

/*
 * The start of Conv / ConvTranspose: X and W connected, output 0 takes X's
 * dtype, *rank is X's (else W's) rank; below 3 the output shape is left
 * unknown and nothing else is read, else *group and the window attributes.
 */
static kiln_status conv_start(infer_node *nd, int32_t *rank, int64_t *group, spatial *sp,
                              kiln_error *err)
{
    kiln_status st = infer_need_input(nd, 0, err);
    if (st || (st = infer_need_input(nd, 1, err)))
        return st;
    const infer_shape *x = &nd->in[0].s, *w = &nd->in[1].s;
    nd->out[0].dtype = nd->in[0].dtype;
    *rank = x->rank >= 0 ? x->rank : w->rank;
    if (*rank < 3) {
        infer_shape_unknown(&nd->out[0].s);
        return KILN_OK;
    }
    *group = infer_attr_int(nd, "group", 1);
    return read_spatial(nd, *rank - 2, w->rank == *rank ? w->d + 2 : NULL, sp, err);
}

static kiln_status infer_conv_nchw(infer_node *nd, kiln_error *err);

/* GE's Conv2D attribute data_format "NHWC" (the aicore engine's channels-last
 * Conv): X and Y are [N, H, W, C]; W stays [M, C/group, kH, kW]. */
static bool nhwc(const infer_node *nd)
{
    const char *f;
    return kiln_attrs_get_string(nd->attrs, "data_format", &f) && strcmp(f, "NHWC") == 0;
}

static void nhwc_to_nchw(infer_shape *s)
{
    if (s->rank == 4) {
        const int64_t t[4] = {s->d[0], s->d[3], s->d[1], s->d[2]};
        memcpy(s->d, t, sizeof(t));
    }
}

static void nchw_to_nhwc(infer_shape *s)
{
    if (s->rank == 4) {
        const int64_t t[4] = {s->d[0], s->d[2], s->d[3], s->d[1]};
        memcpy(s->d, t, sizeof(t));
    }
}

/* Infer @p nchw's node under data_format NHWC: X seen as NCHW, Y turned back. */
static kiln_status infer_as_nchw(infer_node *nd, kiln_error *err,
                                 kiln_status (*nchw)(infer_node *, kiln_error *))
{
    if (!nhwc(nd))
        return nchw(nd, err);
    kiln_status st = infer_need_input(nd, 0, err);
    if (st)
        return st;
    if (nd->in[0].s.rank >= 0 && nd->in[0].s.rank != 4)
        return infer_fail(nd, err, KILN_ERR_INVALID, "data_format NHWC needs a rank-4 X");
    infer_shape saved = nd->in[0].s;
    nhwc_to_nchw(&nd->in[0].s);
    st = nchw(nd, err);
    nd->in[0].s = saved;
    if (st == KILN_OK)
        nchw_to_nhwc(&nd->out[0].s);
    return st;
}

static kiln_status infer_conv(infer_node *nd, kiln_error *err)
{
    return infer_as_nchw(nd, err, infer_conv_nchw);
}

static kiln_status infer_conv_nchw(infer_node *nd, kiln_error *err)
{
    int32_t rank = 0;
    int64_t group = 1;
    spatial sp;
    kiln_status st = conv_start(nd, &rank, &group, &sp, err);
    if (st != KILN_OK || rank < 3)
        return st;
    const infer_shape *x = &nd->in[0].s, *w = &nd->in[1].s;
    const int32_t ns = rank - 2;
    int64_t wc;
    if (w->rank >= 0 && w->d[1] >= 0 && !kiln_mul_i64(w->d[1], group, &wc))
        return infer_fail(nd, err, KILN_ERR_INVALID,
                          "group %lld times %lld weight channels "
                          "overflows",
                          (long long)group, (long long)w->d[1]);
    if (x->rank >= 0 && w->rank >= 0 && x->d[1] >= 0 && w->d[1] >= 0 && x->d[1] != wc) {
        char a[160], b[160];
        return infer_fail(nd, err, KILN_ERR_INVALID,
                          "input %s has %lld channels but weight %s with group %lld expects %lld",
                          infer_shape_str(x, a, sizeof(a)), (long long)x->d[1],
                          infer_shape_str(w, b, sizeof(b)), (long long)group, (long long)wc);
    }
    infer_shape o;
    o.rank = rank;
    o.d[0] = x->rank >= 0 ? x->d[0] : -1;
    o.d[1] = w->rank >= 0 ? w->d[0] : -1;
    for (int32_t i = 0; i < ns; i++)
        o.d[2 + i] = window_out(&sp, i, x->rank >= 0 ? x->d[2 + i] : -1, false);
    nd->out[0].s = o;
    return KILN_OK;
}

static kiln_status infer_conv_transpose_nchw(infer_node *nd, kiln_error *err);

/* ConvTranspose with data_format NHWC (the aicore engine's channels-last regions). */
static kiln_status infer_conv_transpose(infer_node *nd, kiln_error *err)
{
    return infer_as_nchw(nd, err, infer_conv_transpose_nchw);
}

static kiln_status infer_conv_transpose_nchw(infer_node *nd, kiln_error *err)
{
    int32_t rank = 0;
    int64_t group = 1;
    spatial sp;
    kiln_status st = conv_start(nd, &rank, &group, &sp, err);
    if (st != KILN_OK || rank < 3)
        return st;
    const infer_shape *x = &nd->in[0].s, *w = &nd->in[1].s;
    const int32_t ns = rank - 2;
    int64_t opad[INFER_MAX_RANK] = {0}, oshape[INFER_MAX_RANK];
    uint32_t n = 0, nos = 0;
    infer_ints(nd, "output_padding", UINT32_MAX, opad, INFER_MAX_RANK, &n);
    bool has_os = infer_ints(nd, "output_shape", UINT32_MAX, oshape, INFER_MAX_RANK, &nos);
    infer_shape o;
    o.rank = rank;
    o.d[0] = x->rank >= 0 ? x->d[0] : -1;
    o.d[1] = -1;
    if (w->rank >= 0 && w->d[1] >= 0 && !kiln_mul_i64(w->d[1], group, &o.d[1]))
        return infer_fail(nd, err, KILN_ERR_INVALID,
                          "group %lld times %lld weight channels "
                          "overflows",
                          (long long)group, (long long)w->d[1]);
    for (int32_t i = 0; i < ns; i++) {
        int64_t in = x->rank >= 0 ? x->d[2 + i] : -1;
        if (has_os && nos >= (uint32_t)ns)
            o.d[2 + i] = oshape[nos - (uint32_t)ns + (uint32_t)i];
        else if (in < 0 || sp.k[i] < 0)
            o.d[2 + i] = -1;
        else if (strcmp(sp.auto_pad, "SAME_UPPER") == 0 || strcmp(sp.auto_pad, "SAME_LOWER") == 0)
            o.d[2 + i] = in * sp.s[i];
        else
            o.d[2 + i] = sp.s[i] * (in - 1) + opad[i] + (sp.k[i] - 1) * sp.d[i] + 1 -
                         (strcmp(sp.auto_pad, "VALID") == 0 ? 0 : sp.pb[i] + sp.pe[i]);
    }
    nd->out[0].s = o;
    return KILN_OK;
}

static kiln_status infer_pool_nchw(infer_node *nd, kiln_error *err);

/* MaxPool / AveragePool with data_format NHWC (the aicore engine's channels-last pools). */
static kiln_status infer_pool(infer_node *nd, kiln_error *err)
{
    return infer_as_nchw(nd, err, infer_pool_nchw);
}

static kiln_status infer_pool_nchw(infer_node *nd, kiln_error *err)
{
    kiln_status st = infer_need_input(nd, 0, err);
    if (st)
        return st;
    const infer_shape *x = &nd->in[0].s;
    nd->out[0].dtype = nd->in[0].dtype;
    if (nd->nout > 1)
        nd->out[1].dtype = KILN_DT_INT64;
    if (x->rank < 3) {
        infer_shape_unknown(&nd->out[0].s);
        if (nd->nout > 1)
            infer_shape_unknown(&nd->out[1].s);
        return KILN_OK;
    }
    int32_t ns = x->rank - 2;
    spatial sp;
    if ((st = read_spatial(nd, ns, NULL, &sp, err)) != KILN_OK)
        return st;
    bool ceil_mode = infer_attr_int(nd, "ceil_mode", 0) != 0;
    infer_shape o = *x;
    for (int32_t i = 0; i < ns; i++)
        o.d[2 + i] = window_out(&sp, i, x->d[2 + i], ceil_mode);
    nd->out[0].s = o;
    if (nd->nout > 1)
        nd->out[1].s = o;
    return KILN_OK;
}

static kiln_status infer_global_pool(infer_node *nd, kiln_error *err)
{
    kiln_status st = infer_need_input(nd, 0, err);
    if (st)
        return st;
    nd->out[0].dtype = nd->in[0].dtype;
    nd->out[0].s = nd->in[0].s;
    for (int32_t i = 2; i < nd->out[0].s.rank; i++)
        nd->out[0].s.d[i] = 1;
    return KILN_OK;
}

static kiln_status infer_gemm(infer_node *nd, kiln_error *err)
{
    kiln_status st = infer_need_input(nd, 0, err);
    if (st || (st = infer_need_input(nd, 1, err)))
        return st;
    const infer_shape *a = &nd->in[0].s, *b = &nd->in[1].s;
    nd->out[0].dtype = nd->in[0].dtype;
    bool ta = infer_attr_int(nd, "transA", 0) != 0, tb = infer_attr_int(nd, "transB", 0) != 0;
    if ((a->rank >= 0 && a->rank != 2) || (b->rank >= 0 && b->rank != 2)) {
        char sa[160], sb[160];
        return infer_fail(nd, err, KILN_ERR_INVALID, "Gemm needs 2-D inputs, got %s and %s",
                          infer_shape_str(a, sa, sizeof(sa)), infer_shape_str(b, sb, sizeof(sb)));
    }
    int64_t m = a->rank == 2 ? a->d[ta ? 1 : 0] : -1, ka = a->rank == 2 ? a->d[ta ? 0 : 1] : -1;
    int64_t kb = b->rank == 2 ? b->d[tb ? 1 : 0] : -1, nn = b->rank == 2 ? b->d[tb ? 0 : 1] : -1;
    if (ka >= 0 && kb >= 0 && ka != kb) {
        char sa[160], sb[160];
        return infer_fail(nd, err, KILN_ERR_INVALID, "inner dims differ: %s and %s",
                          infer_shape_str(a, sa, sizeof(sa)), infer_shape_str(b, sb, sizeof(sb)));
    }
    nd->out[0].s.rank = 2;
    nd->out[0].s.d[0] = m;
    nd->out[0].s.d[1] = nn;
    return KILN_OK;
}

/* MatMul, and FusedMatMul (transA / transB swap the last two dims of A / B). */
static kiln_status infer_matmul(infer_node *nd, kiln_error *err)
{
    kiln_status st = infer_need_input(nd, 0, err);
    if (st || (st = infer_need_input(nd, 1, err)))
        return st;
    infer_shape a = nd->in[0].s, b = nd->in[1].s;
    if (infer_attr_int(nd, "transA", 0) != 0 && a.rank >= 2) {
        int64_t t = a.d[a.rank - 1];
        a.d[a.rank - 1] = a.d[a.rank - 2];
        a.d[a.rank - 2] = t;
    }
    if (infer_attr_int(nd, "transB", 0) != 0 && b.rank >= 2) {
        int64_t t = b.d[b.rank - 1];
        b.d[b.rank - 1] = b.d[b.rank - 2];
        b.d[b.rank - 2] = t;
    }
    nd->out[0].dtype = nd->in[0].dtype;
    if (a.rank < 0 || b.rank < 0 || a.rank == 0 || b.rank == 0) {
        infer_shape_unknown(&nd->out[0].s);
        return KILN_OK;
    }
    bool a1 = a.rank == 1, b1 = b.rank == 1;
    if (a1) {
        a.rank = 2;
        a.d[1] = a.d[0];
        a.d[0] = 1;
    }
    if (b1) {
        b.rank = 2;
        b.d[1] = 1;
    }
    int64_t ka = a.d[a.rank - 1], kb = b.d[b.rank - 2];
    if (ka >= 0 && kb >= 0 && ka != kb) {
        char sa[160], sb[160];
        return infer_fail(nd, err, KILN_ERR_INVALID, "inner dims differ: %s and %s",
                          infer_shape_str(&nd->in[0].s, sa, sizeof(sa)),
                          infer_shape_str(&nd->in[1].s, sb, sizeof(sb)));
    }
    infer_shape ba = a, bb = b, o;
    ba.rank -= 2;
    bb.rank -= 2;
    if ((st = infer_broadcast(nd, &ba, &bb, &o, err)) != KILN_OK)
        return st;
    if (!a1)
        o.d[o.rank++] = a.d[a.rank - 2];
    if (!b1)
        o.d[o.rank++] = b.d[b.rank - 1];
    nd->out[0].s = o;
    return KILN_OK;
}

static kiln_status infer_batchnorm(infer_node *nd, kiln_error *err)
{
    kiln_status st = infer_need_input(nd, 0, err);
    if (st)
        return st;
    nd->out[0].dtype = nd->in[0].dtype;
    nd->out[0].s = nd->in[0].s;
    for (uint32_t o = 1; o < nd->nout; o++) { /* training outputs: running mean/var */
        nd->out[o].dtype = nd->in[0].dtype;
        nd->out[o].s.rank = 1;
        nd->out[o].s.d[0] = nd->in[0].s.rank >= 2 ? nd->in[0].s.d[1] : -1;
    }
    return KILN_OK;
}

/* LayerNormalization: Y as X; Mean and InvStdDev (training outputs) keep the
 * dims before `axis` and have 1 from it on. */
static kiln_status infer_layernorm(infer_node *nd, kiln_error *err)
{
    kiln_status st = infer_need_input(nd, 0, err);
    if (st)
        return st;
    const infer_shape *x = &nd->in[0].s;
    nd->out[0].dtype = nd->in[0].dtype;
    nd->out[0].s = *x;
    int64_t axis = infer_attr_int(nd, "axis", -1);
    if (x->rank >= 0 && (axis < -x->rank || axis >= x->rank))
        return infer_fail(nd, err, KILN_ERR_INVALID, "axis %lld out of range for rank %d",
                          (long long)axis, (int)x->rank);
    if (x->rank >= 0 && axis < 0)
        axis += x->rank;
    for (uint32_t o = 1; o < nd->nout; o++) {
        nd->out[o].dtype = KILN_DT_FLOAT32; /* stash_type 1 */
        nd->out[o].s = *x;
        for (int32_t d = (int32_t)axis; x->rank >= 0 && d < x->rank; d++)
            nd->out[o].s.d[d] = 1;
    }
    return KILN_OK;
}

static kiln_status infer_lstm(infer_node *nd, kiln_error *err)
{
    kiln_status st = infer_need_input(nd, 0, err);
    if (st || (st = infer_need_input(nd, 1, err)))
        return st;
    const infer_shape *x = &nd->in[0].s, *w = &nd->in[1].s;
    int64_t layout = infer_attr_int(nd, "layout", 0);
    int64_t hidden = infer_attr_int(nd, "hidden_size", -1);
    if (hidden < 0 && w->rank == 3 && w->d[1] >= 0)
        hidden = w->d[1] / 4;
    const char *dir = "forward";
    kiln_attrs_get_string(nd->attrs, "direction", &dir);
    int64_t ndir = strcmp(dir, "bidirectional") == 0 ? 2 : 1;
    int64_t seq = -1, batch = -1;
    if (x->rank >= 0 && x->rank != 3) {
        char b[160];
        return infer_fail(nd, err, KILN_ERR_INVALID, "X must have rank 3, got %s",
                          infer_shape_str(x, b, sizeof(b)));
    }
    if (x->rank == 3) {
        seq = x->d[layout ? 1 : 0];
        batch = x->d[layout ? 0 : 1];
    }
    for (uint32_t o = 0; o < nd->nout; o++) {
        infer_shape *s = &nd->out[o].s;
        nd->out[o].dtype = nd->in[0].dtype;
        if (o == 0) {
            s->rank = 4;
            if (layout) {
                s->d[0] = batch, s->d[1] = seq, s->d[2] = ndir, s->d[3] = hidden;
            } else {
                s->d[0] = seq, s->d[1] = ndir, s->d[2] = batch, s->d[3] = hidden;
            }
        } else {
            s->rank = 3;
            if (layout) {
                s->d[0] = batch, s->d[1] = ndir, s->d[2] = hidden;
            } else {
                s->d[0] = ndir, s->d[1] = batch, s->d[2] = hidden;
            }
        }
    }
    return KILN_OK;
}

/* Resize: opset 10 (X, scales) or 11+ (X, roi, scales, sizes). */
static kiln_status infer_resize(infer_node *nd, kiln_error *err)
{
    kiln_status st = infer_need_input(nd, 0, err);
    if (st)
        return st;
    const infer_shape *x = &nd->in[0].s;
    nd->out[0].dtype = nd->in[0].dtype;
    uint32_t si = nd->nin == 2 ? 1 : 2, zi = 3;
    infer_shape o = *x;
    const infer_val *sizes = zi < nd->nin && nd->in[zi].present ? nd->in[zi].val : NULL;
    const infer_val *scales = si < nd->nin && nd->in[si].present ? nd->in[si].val : NULL;
    if (sizes && infer_val_numel(sizes) > 0) {
        size_t n = infer_val_numel(sizes);
        if (x->rank >= 0 && n != (size_t)x->rank)
            return infer_fail(nd, err, KILN_ERR_INVALID, "sizes has %zu values for rank %d", n,
                              (int)x->rank);
        o.rank = (int32_t)n;
        for (size_t i = 0; i < n; i++)
            o.d[i] = infer_val_int(sizes, i);
    } else if (scales && infer_val_numel(scales) > 0 && x->rank >= 0) {
        size_t n = infer_val_numel(scales);
        if (n != (size_t)x->rank)
            return infer_fail(nd, err, KILN_ERR_INVALID, "scales has %zu values for rank %d", n,
                              (int)x->rank);
        for (size_t i = 0; i < n; i++) {
            double v = x->d[i] < 0 ? -1 : floor((double)x->d[i] * infer_val_f64(scales, i));
            if (!(v >= -1 && v < 0x1p62)) /* also NaN */
                return infer_fail(nd, err, KILN_ERR_INVALID, "scales[%zu] = %g gives dim %g", i,
                                  infer_val_f64(scales, i), v);
            o.d[i] = (int64_t)v;
        }
    } else if (x->rank >= 0) {
        for (int32_t i = 0; i < o.rank; i++)
            o.d[i] = -1; /* data-dependent */
    }
    nd->out[0].s = o;
    return KILN_OK;
}

const infer_op infer_ops_nn[] = {
    {"Conv", infer_conv},
    {"ConvTranspose", infer_conv_transpose},
    {"MaxPool", infer_pool},
    {"AveragePool", infer_pool},
    {"GlobalAveragePool", infer_global_pool},
    {"GlobalMaxPool", infer_global_pool},
    {"Gemm", infer_gemm},
    {"MatMul", infer_matmul},
    {"FusedMatMul", infer_matmul},
    {"BatchNormalization", infer_batchnorm},
    {"LayerNormalization", infer_layernorm},
    {"LSTM", infer_lstm},
    {"Resize", infer_resize},
    {"Upsample", infer_resize}, /* X, scales: the opset-10 form of Resize */
};
const uint32_t infer_ops_nn_count = sizeof(infer_ops_nn) / sizeof(infer_ops_nn[0]);

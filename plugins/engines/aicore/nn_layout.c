/*
 * nn_layout.c - the aicore engine's format selection: channels-last (NHWC)
 * tensors between its convolutions, TransData at the boundaries, and the
 * TransData kernel.
 *
 * oneDNN's convolutions run fastest on channels-last tensors (its brgemm
 * kernels, dense, 1x1 and depthwise, read and write NHWC natively), while an
 * ONNX model's tensors are NCHW.  Reordering around every Conv costs as much
 * as a third of the convolution time on the OCR models, so the engine keeps
 * whole regions of the graph channels-last, the way GE's AI-core engine keeps
 * its own NC1HWC0 format between its ops and converts with TransData only
 * where the format changes.
 *
 * nn_layout_select (the engine's optimize_original_graph, GE FE's format
 * selection and TransData insertion at OptimizeOriginalGraph) works per graph
 * in topological order:
 *
 *  1. choose: a float32 rank-4 Conv or ConvTranspose with static shapes, on the oneDNN backend
 *     and not pinned to another engine, is NHWC.  A format-agnostic node is
 *     NHWC when one of its inputs comes from an NHWC node and every other
 *     data input does too or is a Const it can permute at compile time:
 *       element-wise unary ops (Relu, Sigmoid, HardSwish, Clip with constant
 *       bounds, ...) and binary/variadic ones (Add, Sub, Mul, Div, Pow, Max,
 *       Min, Sum) with numpy broadcasting: permuting every operand the same
 *       way keeps broadcasting exact once a lower-rank Const is expanded to
 *       rank 4;
 *       Concat (its axis is remapped);
 *       MaxPool (without a used Indices output) and AveragePool, which get
 *       data_format NHWC (oneDNN pooling, nn_dnnl_pool.c);
 *       Resize without `axes` (separable per dim: roi, scales and sizes are
 *       permuted);
 *       GlobalAveragePool, which becomes ReduceMean over axes 1 and 2.
 *  2. rewrite: an NHWC node's rank-4 outputs get the NHWC shape and format
 *     "NHWC"; a Conv or pool gets data_format "NHWC" (GE's Conv2D attribute); Const
 *     operands are replaced by permuted copies.
 *  3. TransData (src_format, dst_format: GE's attributes) NCHW -> NHWC on
 *     every NCHW tensor an NHWC node reads (one per tensor, shared by its
 *     NHWC readers) and NHWC -> NCHW on every NHWC tensor a non-NHWC node
 *     reads (one per tensor, shared), so the model's inputs and outputs and
 *     every op that is not channels-last aware see NCHW.  (A tensor of one
 *     channel or one pixel is the same bytes in both formats: its TransData
 *     is a copy.  Aliasing it, ref_input 0, would hand the sequential
 *     runtime's readers the input's dims.)  By construction no
 *     two inverse TransData nodes are adjacent and none is duplicated: the
 *     clean-up GE leaves to TransOpBreadthFusionPass and
 *     SameTransdataBreadthFusionPass has nothing to do.
 *
 * The session option aicore.layout selects it: "nhwc" (the default) or
 * "nchw" (off).  aicore.conv_backend=blas turns it off as well (the im2col
 * kernel is NCHW).  A channels-last Conv that oneDNN refuses at run time still
 * runs, on transposed copies (nn_conv.c).
 */
#include "nn_ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NHWC_ATTR "data_format"

bool nn_is_nhwc(const kiln_graph *g, kiln_node_id n)
{
    const char *f = cpu_attr_str(g, n, NHWC_ATTR, NULL);
    return f && strcmp(f, "NHWC") == 0;
}

void nn_nhwc_to_nchw_dims(const int64_t *in, int64_t *out)
{
    const int64_t t[4] = {in[0], in[3], in[1], in[2]};
    memcpy(out, t, sizeof(t));
}

static void nchw_to_nhwc_dims(const int64_t *in, int64_t *out)
{
    const int64_t t[4] = {in[0], in[2], in[3], in[1]};
    memcpy(out, t, sizeof(t));
}

/* ---- the transpose (TransData's kernel, the Conv fallback, Const permutes) -- */

/* y[c][r] = x[r][c] for an R x C matrix of @p es-byte elements, in 32 x 32 tiles. */
static void transpose_2d(const char *x, char *y, int64_t R, int64_t C, size_t es)
{
    enum { T = 32 };
    for (int64_t r0 = 0; r0 < R; r0 += T)
        for (int64_t c0 = 0; c0 < C; c0 += T) {
            const int64_t r1 = r0 + T < R ? r0 + T : R, c1 = c0 + T < C ? c0 + T : C;
            if (es == 4) {
                const float *xf = (const float *)(const void *)x;
                float *yf = (float *)(void *)y;
                for (int64_t c = c0; c < c1; c++)
                    for (int64_t r = r0; r < r1; r++)
                        yf[c * R + r] = xf[r * C + c];
            } else {
                for (int64_t c = c0; c < c1; c++)
                    for (int64_t r = r0; r < r1; r++)
                        memcpy(y + (size_t)(c * R + r) * es, x + (size_t)(r * C + c) * es, es);
            }
        }
}

void nn_transpose_4d(const void *x, void *y, const int64_t *src_dims, size_t esize, bool to_nhwc)
{
    /* NCHW -> NHWC: per image, [C, HW] -> [HW, C]; NHWC -> NCHW: [HW, C] -> [C, HW] */
    const int64_t N = src_dims[0];
    const int64_t rows = to_nhwc ? src_dims[1] : src_dims[1] * src_dims[2];
    const int64_t cols = to_nhwc ? src_dims[2] * src_dims[3] : src_dims[3];
    const size_t img = (size_t)(rows * cols) * esize;
    if (rows == 1 || cols == 1) { /* one channel or one pixel: the same bytes */
        memcpy(y, x, (size_t)N * img);
        return;
    }
    if (rows <= 8 && esize == 4) { /* few rows (an RGB input): one pass over the columns */
        for (int64_t i = 0; i < N; i++) {
            const float *xi = (const float *)x + (size_t)(i * rows * cols);
            float *yi = (float *)y + (size_t)(i * rows * cols);
            for (int64_t c = 0; c < cols; c++)
                for (int64_t r = 0; r < rows; r++)
                    yi[c * rows + r] = xi[r * cols + c];
        }
        return;
    }
    for (int64_t i = 0; i < N; i++)
        transpose_2d((const char *)x + (size_t)i * img, (char *)y + (size_t)i * img, rows, cols,
                     esize);
}

/* ---- TransData ------------------------------------------------------------- */

typedef struct transdata_state {
    bool to_nhwc;
} transdata_state;

NN_PREPARE(nn_transdata_prepare)
{
    transdata_state *s;
    kiln_status st = cpu_state_new(g, n, sizeof(*s), state, err);
    if (st)
        return st;
    s = *state;
    const char *src = cpu_attr_str(g, n, "src_format", ""),
               *dst = cpu_attr_str(g, n, "dst_format", "");
    if (strcmp(src, "NCHW") == 0 && strcmp(dst, "NHWC") == 0)
        s->to_nhwc = true;
    else if (!(strcmp(src, "NHWC") == 0 && strcmp(dst, "NCHW") == 0))
        return cpu_fail_node(g, n, err, KILN_ERR_UNSUPPORTED,
                             "TransData from '%s' to '%s': only NCHW <-> NHWC is supported", src,
                             dst);
    return KILN_OK;
}

NN_KERNEL(nn_transdata_run)
{
    const transdata_state *s = state;
    if (a->input_count < 1 || !cpu_has_input(a, 0) || a->output_count < 1)
        return cpu_fail(a, err, KILN_ERR_INVALID, "TransData needs one input and one output");
    const kiln_tensor *X = &a->inputs[0];
    kiln_tensor *Y = &a->outputs[0];
    if (X->rank != 4 || Y->rank != 4 || X->dtype != Y->dtype)
        return cpu_fail(a, err, KILN_ERR_INVALID, "TransData needs rank-4 tensors of one dtype");
    int64_t want[4];
    if (s->to_nhwc)
        nchw_to_nhwc_dims(X->dims, want);
    else
        nn_nhwc_to_nchw_dims(X->dims, want);
    kiln_status st = cpu_check_out_dims(a, 0, 4, want, err);
    if (st != KILN_OK)
        return st;
    nn_transpose_4d(X->data, Y->data, X->dims, kiln_dtype_size(X->dtype), s->to_nhwc);
    return KILN_OK;
}

/* ---- format selection ------------------------------------------------------ */

enum { F_NCHW = 0, F_NHWC = 1 };

typedef struct layout_ctx {
    kiln_pass_ctx *pctx;
    kiln_graph *g;
    uint8_t *fmt;        /* per node id below lim */
    uint32_t lim;        /* the id limit when the walk started */
    kiln_node_id *td_in; /* NCHW -> NHWC TransData per producer's output 0, 0 = none
                          * (a later output of a multi-output producer gets one per reader) */
    uint32_t serial;     /* for node names */
} layout_ctx;

static bool op_is(const kiln_graph *g, kiln_node_id n, const char *op)
{
    return strcmp(kiln_node_op_str(g, n), op) == 0;
}

static bool in_set(const char *op, const char *const *set)
{
    for (; *set; set++)
        if (strcmp(op, *set) == 0)
            return true;
    return false;
}

static const char *const unary_ops[] = {
    "Relu", "Sigmoid", "Tanh", "HardSwish", "HardSigmoid", "LeakyRelu", "Abs",  "Neg",
    "Exp",  "Sqrt",    "Erf",  "Gelu",      "QuickGelu",   "Identity",  "Clip", NULL};
static const char *const nary_ops[] = {"Add", "Sub", "Mul", "Div", "Pow",
                                       "Max", "Min", "Sum", NULL};

static bool is_nhwc(const layout_ctx *c, kiln_node_id n)
{
    return n < c->lim && c->fmt[n] == F_NHWC;
}

static bool is_const(const kiln_graph *g, kiln_node_id n)
{
    return op_is(g, n, "Const") || op_is(g, n, "Constant");
}

static bool static_rank4_f32(const kiln_tensor_desc *d)
{
    if (!d || kiln_desc_rank(d) != 4 || kiln_desc_dtype(d) != KILN_DT_FLOAT32)
        return false;
    const int64_t *v = kiln_desc_dims(d);
    for (int i = 0; i < 4; i++)
        if (v[i] < 0)
            return false;
    return true;
}

/* A node pinned to an engine other than aicore or vector keeps its format. */
static bool foreign_pin(const kiln_graph *g, kiln_node_id n)
{
    const char *e = cpu_attr_str(g, n, "_kiln_engine", NULL);
    return e && e[0] && strcmp(e, "aicore") != 0 && strcmp(e, "vector") != 0;
}

static bool conv_eligible(const kiln_graph *g, kiln_node_id n)
{
    if (!(op_is(g, n, "Conv") || op_is(g, n, "ConvTranspose")) || nn_is_nhwc(g, n) ||
        !nn_conv_wants_dnnl(g, n) || foreign_pin(g, n) || kiln_node_output_count(g, n) != 1)
        return false;
    return static_rank4_f32(kiln_node_input_desc(g, n, 0)) &&
           static_rank4_f32(kiln_node_output_desc((kiln_graph *)g, n, 0)) &&
           kiln_node_input_peer(g, n, 1).node;
}

/* A Const of at most rank 4 that an NHWC node can read permuted. */
static bool const_permutable(const kiln_graph *g, kiln_node_id p)
{
    kiln_tensor_value v;
    return is_const(g, p) && kiln_attrs_get_tensor(kiln_node_attrs(g, p), "value", &v) &&
           v.rank <= 4;
}

/* Inputs @p from.. of @p n are unconnected or Const (Clip's bounds, Resize's
 * roi / scales / sizes). */
static bool consts_from(const kiln_graph *g, kiln_node_id n, uint32_t from)
{
    for (uint32_t i = from; i < kiln_node_input_count(g, n); i++) {
        kiln_node_id p = kiln_node_input_peer(g, n, i).node;
        if (p && !is_const(g, p))
            return false;
    }
    return true;
}

static bool choose_agnostic(const layout_ctx *c, kiln_node_id n)
{
    const kiln_graph *g = c->g;
    const char *op = kiln_node_op_str(g, n);
    const uint32_t nin = kiln_node_input_count(g, n), nout = kiln_node_output_count(g, n);
    const bool pool = op_is(g, n, "MaxPool") || op_is(g, n, "AveragePool");
    /* one output in use: a MaxPool's Indices (NCHW flat indices) keep it NCHW */
    const bool one_out = nout == 1 || (pool && nout == 2 && !kiln_node_output_use_count(g, n, 1));
    if (foreign_pin(g, n) || !one_out || nin == 0 || kiln_node_ctrl_in_count(g, n) ||
        !static_rank4_f32(kiln_node_output_desc((kiln_graph *)g, n, 0)))
        return false;
    const bool from_nhwc = is_nhwc(c, kiln_node_input_peer(g, n, 0).node);
    if (in_set(op, unary_ops))
        return from_nhwc && consts_from(g, n, 1);
    if (in_set(op, nary_ops)) {
        bool any = false;
        for (uint32_t i = 0; i < nin; i++) {
            kiln_node_id p = kiln_node_input_peer(g, n, i).node;
            if (!p)
                return false;
            if (is_nhwc(c, p))
                any = true;
            else if (!const_permutable(g, p))
                return false;
        }
        return any;
    }
    if (op_is(g, n, "Concat")) {
        for (uint32_t i = 0; i < nin; i++)
            if (!is_nhwc(c, kiln_node_input_peer(g, n, i).node))
                return false;
        return true;
    }
    if (op_is(g, n, "GlobalAveragePool"))
        return from_nhwc;
    if (pool)
        return from_nhwc && nin == 1;
    if (op_is(g, n, "Resize"))
        return from_nhwc && !kiln_attrs_has(kiln_node_attrs(g, n), "axes") && consts_from(g, n, 1);
    return false;
}

/* A new name "<base>_<tag>_<k>" not in use in @p g. */
static void fresh_name(layout_ctx *c, const char *base, const char *tag, char *buf, size_t sz)
{
    do
        snprintf(buf, sz, "%.180s_%s_%u", base, tag, c->serial++);
    while (kiln_graph_find_node(c->g, buf));
}

static kiln_status set_nhwc_desc(kiln_graph *g, kiln_tensor_desc *d)
{
    if (!d || kiln_desc_rank(d) != 4)
        return KILN_OK;
    int64_t t[4];
    nchw_to_nhwc_dims(kiln_desc_dims(d), t);
    kiln_status st = kiln_desc_set_shape(g, d, 4, t);
    if (st == KILN_OK)
        kiln_desc_set_format(g, d, "NHWC");
    return st;
}

/*
 * Input @p i of NHWC node @p n reads Const @p p: feed it a new Const holding
 * the value expanded to rank 4 and permuted to NHWC (a 1-element value is
 * left alone).  For Resize, roi / scales / sizes are permuted as vectors.
 */
static kiln_status permute_const_input(layout_ctx *c, kiln_node_id n, uint32_t i, kiln_node_id p,
                                       bool as_vector)
{
    kiln_graph *g = c->g;
    kiln_tensor_value v;
    if (!kiln_attrs_get_tensor(kiln_node_attrs(g, p), "value", &v))
        return KILN_OK;
    int64_t numel = 1;
    for (uint32_t k = 0; k < v.rank; k++)
        numel *= v.dims[k];
    if (numel <= 1)
        return KILN_OK;
    const size_t es = kiln_dtype_size(v.dtype);
    if (!es || v.nbytes != (size_t)numel * es)
        return KILN_OK;
    int64_t dims4[4] = {1, 1, 1, 1}, nd[4];
    uint32_t rank = 4;
    char *buf = kiln_alloc(v.nbytes);
    if (!buf)
        return KILN_ERR_NOMEM;
    if (as_vector) {
        /* a vector of 4 (scales, sizes) or 8 (roi: begins then ends) values per dim */
        if (v.rank != 1 || (numel != 4 && numel != 8)) {
            kiln_free(buf);
            return KILN_ERR_UNSUPPORTED;
        }
        static const int perm[4] = {0, 2, 3, 1};
        for (int64_t h = 0; h < numel / 4; h++)
            for (int k = 0; k < 4; k++)
                memcpy(buf + (size_t)(h * 4 + k) * es,
                       (const char *)v.data + (size_t)(h * 4 + perm[k]) * es, es);
        rank = 1;
        nd[0] = numel;
    } else {
        for (uint32_t k = 0; k < v.rank; k++)
            dims4[4 - v.rank + k] = v.dims[k];
        nn_transpose_4d(v.data, buf, dims4, es, true);
        nchw_to_nhwc_dims(dims4, nd);
    }
    char name[256];
    fresh_name(c, kiln_node_name_str(g, p), "nhwc", name, sizeof(name));
    kiln_node_id q = kiln_graph_add_node(g, name, "Const", 0, 1);
    kiln_status st = q ? KILN_OK : KILN_ERR_NOMEM;
    kiln_tensor_value nv = {v.dtype, rank, nd, buf, v.nbytes};
    if (st == KILN_OK)
        st = kiln_attrs_set_tensor(kiln_node_attrs_mut(g, q), "value", &nv);
    kiln_free(buf);
    kiln_tensor_desc *d = q ? kiln_node_output_desc(g, q, 0) : NULL;
    if (st == KILN_OK)
        st = kiln_desc_set_dtype(g, d, v.dtype);
    if (st == KILN_OK)
        st = kiln_desc_set_shape(g, d, (int32_t)rank, nd);
    if (st == KILN_OK && rank == 4)
        kiln_desc_set_format(g, d, "NHWC");
    if (st == KILN_OK)
        st = kiln_edge_remove(g, n, i);
    if (st == KILN_OK)
        st = kiln_edge_add(g, q, 0, n, i);
    if (st == KILN_OK && kiln_node_input_has_desc(g, n, i))
        st = kiln_desc_copy(g, kiln_node_input_desc_mut(g, n, i), d);
    return st;
}

/* A TransData node fed by (src, so), its output descriptor @p like permuted. */
static kiln_node_id add_transdata(layout_ctx *c, kiln_node_id src, uint32_t so, bool to_nhwc)
{
    kiln_graph *g = c->g;
    char name[256];
    fresh_name(c, kiln_node_name_str(g, src), to_nhwc ? "to_nhwc" : "to_nchw", name, sizeof(name));
    kiln_node_id t = kiln_graph_add_node(g, name, "TransData", 1, 1);
    if (!t)
        return 0;
    kiln_attrs *a = kiln_node_attrs_mut(g, t);
    const kiln_tensor_desc *sd = kiln_node_output_desc(g, src, so);
    kiln_tensor_desc *d = kiln_node_output_desc(g, t, 0);
    int64_t dims[4];
    if (to_nhwc)
        nchw_to_nhwc_dims(kiln_desc_dims(sd), dims);
    else
        nn_nhwc_to_nchw_dims(kiln_desc_dims(sd), dims);
    if (kiln_attrs_set_string(a, "src_format", to_nhwc ? "NCHW" : "NHWC") != KILN_OK ||
        kiln_attrs_set_string(a, "dst_format", to_nhwc ? "NHWC" : "NCHW") != KILN_OK ||
        kiln_desc_set_dtype(g, d, kiln_desc_dtype(sd)) != KILN_OK ||
        kiln_desc_set_shape(g, d, 4, dims) != KILN_OK || kiln_edge_add(g, src, so, t, 0) != KILN_OK)
        return 0;
    kiln_desc_set_format(g, d, to_nhwc ? "NHWC" : "NCHW");
    kiln_pass_explain(c->pctx, g, t, "aicore format selection: %s",
                      to_nhwc ? "NCHW -> NHWC before channels-last nodes"
                              : "NHWC -> NCHW after channels-last nodes");
    return t;
}

static kiln_status rewrite_node(layout_ctx *c, kiln_node_id n)
{
    kiln_graph *g = c->g;
    kiln_attrs *a = kiln_node_attrs_mut(g, n);
    kiln_status st = KILN_OK;
    const bool resize = op_is(g, n, "Resize");
    if (op_is(g, n, "Conv") || op_is(g, n, "ConvTranspose") || op_is(g, n, "MaxPool") ||
        op_is(g, n, "AveragePool")) {
        st = kiln_attrs_set_string(a, NHWC_ATTR, "NHWC");
    } else if (op_is(g, n, "Concat")) {
        int64_t axis = cpu_attr_int(g, n, "axis", 0);
        if (axis < 0)
            axis += 4;
        static const int64_t to_nhwc_axis[4] = {0, 3, 1, 2};
        st = kiln_attrs_set_int(a, "axis", axis >= 0 && axis < 4 ? to_nhwc_axis[axis] : axis);
    } else if (op_is(g, n, "GlobalAveragePool")) {
        const int64_t axes[2] = {1, 2};
        st = kiln_node_set_op(g, n, "ReduceMean");
        if (st == KILN_OK)
            st = kiln_attrs_set_list_int(a, "axes", axes, 2);
        if (st == KILN_OK)
            st = kiln_attrs_set_int(a, "keepdims", 1);
    } else if (!in_set(kiln_node_op_str(g, n), unary_ops)) {
        /* n-ary element-wise and Resize: permute the Const operands */
        const uint32_t nin = kiln_node_input_count(g, n);
        for (uint32_t i = resize ? 1 : 0; i < nin && st == KILN_OK; i++) {
            kiln_node_id p = kiln_node_input_peer(g, n, i).node;
            if (p && !is_nhwc(c, p) && is_const(g, p))
                st = permute_const_input(c, n, i, p, resize);
        }
    }
    if (st == KILN_OK)
        st = set_nhwc_desc(g, kiln_node_output_desc(g, n, 0));
    return st;
}

/* Feed every NCHW activation input of NHWC node @p n through a shared TransData. */
static kiln_status transdata_in(layout_ctx *c, kiln_node_id n)
{
    kiln_graph *g = c->g;
    const bool params_const = op_is(g, n, "Resize") || in_set(kiln_node_op_str(g, n), unary_ops);
    const uint32_t nin = op_is(g, n, "Conv") || op_is(g, n, "ConvTranspose") || params_const
                             ? 1
                             : kiln_node_input_count(g, n);
    /* (pools have one input; MaxPool's unused Indices output keeps its NCHW descriptor) */
    for (uint32_t i = 0; i < nin; i++) {
        kiln_anchor p = kiln_node_input_peer(g, n, i);
        if (!p.node || is_nhwc(c, p.node) || p.node >= c->lim || is_const(g, p.node))
            continue;
        kiln_node_id t = p.index == 0 ? c->td_in[p.node] : 0;
        if (!t) {
            if (!(t = add_transdata(c, p.node, p.index, true)))
                return KILN_ERR_NOMEM;
            if (p.index == 0)
                c->td_in[p.node] = t;
        }
        kiln_status st = kiln_edge_remove(g, n, i);
        if (st == KILN_OK)
            st = kiln_edge_add(g, t, 0, n, i);
        if (st == KILN_OK && kiln_node_input_has_desc(g, n, i))
            st = kiln_desc_copy(g, kiln_node_input_desc_mut(g, n, i),
                                kiln_node_output_desc(g, t, 0));
        if (st != KILN_OK)
            return st;
    }
    /* inputs from NHWC producers whose own descriptors still say NCHW */
    for (uint32_t i = 0; i < kiln_node_input_count(g, n); i++) {
        kiln_anchor p = kiln_node_input_peer(g, n, i);
        if (p.node && is_nhwc(c, p.node) && kiln_node_input_has_desc(g, n, i)) {
            kiln_status st = kiln_desc_copy(g, kiln_node_input_desc_mut(g, n, i),
                                            kiln_node_output_desc(g, p.node, p.index));
            if (st != KILN_OK)
                return st;
        }
    }
    return KILN_OK;
}

/* Re-feed every non-NHWC reader of NHWC node @p n's output through one TransData. */
static kiln_status transdata_out(layout_ctx *c, kiln_node_id n)
{
    kiln_graph *g = c->g;
    kiln_anchor readers[64];
    kiln_node_id t = 0;
    for (;;) {
        uint32_t k = 0;
        for (uint32_t u = kiln_use_first(g, n, 0); u && k < 64; u = kiln_use_next(g, u)) {
            kiln_anchor d = kiln_use_dst(g, u);
            if (d.node != t && !is_nhwc(c, d.node))
                readers[k++] = d;
        }
        if (!k)
            return KILN_OK;
        if (!t && !(t = add_transdata(c, n, 0, false)))
            return KILN_ERR_NOMEM;
        for (uint32_t i = 0; i < k; i++) {
            kiln_status st = kiln_edge_remove(g, readers[i].node, readers[i].index);
            if (st == KILN_OK)
                st = kiln_edge_add(g, t, 0, readers[i].node, readers[i].index);
            if (st != KILN_OK)
                return st;
        }
    }
}

static kiln_status select_graph(kiln_pass_ctx *pctx, kiln_graph *g)
{
    const kiln_node_id *order;
    uint32_t count;
    kiln_status st = kiln_graph_topo_order(g, &order, &count, kiln_pass_error(pctx));
    if (st != KILN_OK)
        return st;
    layout_ctx c = {pctx, g, NULL, kiln_graph_id_limit(g), NULL, 0};
    kiln_node_id *nodes = NULL;
    uint32_t nn = 0;
    c.fmt = calloc(c.lim, 1);
    c.td_in = calloc(c.lim, sizeof(kiln_node_id));
    nodes = malloc((size_t)count * sizeof(kiln_node_id) + 1);
    if (!c.fmt || !c.td_in || !nodes) {
        st = KILN_ERR_NOMEM;
        goto done;
    }
    for (uint32_t i = 0; i < count; i++) {
        kiln_node_id n = order[i];
        if (conv_eligible(g, n) || (nn && choose_agnostic(&c, n))) {
            c.fmt[n] = F_NHWC;
            nodes[nn++] = n;
        }
    }
    /* the topological order is invalidated by the edits below: use the copy */
    for (uint32_t i = 0; i < nn && st == KILN_OK; i++)
        st = rewrite_node(&c, nodes[i]);
    for (uint32_t i = 0; i < nn && st == KILN_OK; i++)
        st = transdata_in(&c, nodes[i]);
    for (uint32_t i = 0; i < nn && st == KILN_OK; i++)
        st = transdata_out(&c, nodes[i]);
    if (st == KILN_OK && nn)
        kiln_pass_stat_add(pctx, "nhwc_nodes", nn);
done:
    free(c.fmt);
    free(c.td_in);
    free(nodes);
    if (st != KILN_OK && kiln_error_code(kiln_pass_error(pctx)) == KILN_OK)
        kiln_errorf(kiln_pass_error(pctx), st, "aicore format selection in graph %s failed",
                    kiln_graph_name(g));
    return st;
}

kiln_status nn_layout_select(kiln_pass_ctx *ctx, kiln_graph *root)
{
    const char *v = ctx ? kiln_pass_session_option(ctx, "aicore.layout") : NULL;
    if (v && *v && strcmp(v, "nchw") == 0)
        return KILN_OK;
    if (v && *v && strcmp(v, "nhwc") != 0)
        return kiln_errorf(kiln_pass_error(ctx), KILN_ERR_INVALID,
                           "session option aicore.layout=%s: expected nhwc or nchw", v);
    const uint32_t nsub = kiln_graph_all_subgraph_count(root);
    for (uint32_t i = 0; i <= nsub; i++) {
        kiln_graph *g = i ? kiln_graph_all_subgraph(root, i - 1) : root;
        kiln_status st = g ? select_graph(ctx, g) : KILN_OK;
        if (st != KILN_OK)
            return st;
    }
    return KILN_OK;
}

/* ---- the NCHW fallback of channels-last kernels ------------------------------ */

kiln_status nn_run_nchw_on_nhwc(kiln_kernel_fn fn, void *state, const kiln_kernel_args *a,
                                kiln_error *err)
{
    if (a->input_count < 1 || a->output_count < 1 || a->inputs[0].rank != 4 ||
        a->outputs[0].rank != 4)
        return cpu_fail(a, err, KILN_ERR_INVALID, "data_format NHWC needs rank-4 X and Y");
    const kiln_tensor *X = &a->inputs[0];
    const size_t es = kiln_dtype_size(X->dtype), eo = kiln_dtype_size(a->outputs[0].dtype);
    int64_t xd[4], yd[4];
    nn_nhwc_to_nchw_dims(X->dims, xd);
    nn_nhwc_to_nchw_dims(a->outputs[0].dims, yd);
    const size_t nx = (size_t)cpu_numel(X) * es, ny = (size_t)cpu_numel(&a->outputs[0]) * eo;
    char *buf = kiln_alloc(nx + ny + 1);
    kiln_tensor *in = kiln_alloc(a->input_count * sizeof(kiln_tensor));
    if (!buf || !in) {
        kiln_free(buf);
        kiln_free(in);
        return cpu_fail(a, err, KILN_ERR_NOMEM, "out of memory for the NHWC transposes");
    }
    nn_transpose_4d(X->data, buf, X->dims, es, false);
    memcpy(in, a->inputs, a->input_count * sizeof(kiln_tensor));
    in[0].dims = xd;
    in[0].data = buf;
    kiln_tensor out = a->outputs[0];
    out.dims = yd;
    out.data = buf + nx;
    kiln_kernel_args b = *a;
    b.inputs = in;
    b.outputs = &out;
    b.output_count = 1;
    kiln_status st = fn(state, &b, err);
    if (st == KILN_OK)
        nn_transpose_4d(out.data, a->outputs[0].data, yd, eo, true);
    kiln_free(buf);
    kiln_free(in);
    return st;
}

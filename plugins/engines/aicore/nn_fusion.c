/*
 * nn_fusion.c - the aicore engine's graph fusions (its
 * optimize_original_graph; GE's FE graph fusions at OptimizeOriginalGraph)
 * and the fused activation its Conv and Gemm kernels apply.
 *
 *   conv_bn      Conv or ConvTranspose + BatchNormalization (inference: Const
 *                scale, B, mean, var; training_mode 0) -> Conv with W' = W * s[m]
 *                (s of W's output channel m) and
 *                B' = (B - mean) * s + bias, s = scale / sqrt(var + eps).
 *                W' and B' are new Const nodes (the old W may be shared).
 *   matmul_bias  Gemm without C (or 2-D MatMul, which becomes a Gemm) + Add of
 *                a Const [N] / [1, N] bias -> Gemm with C = the bias.
 *   activation   Conv / ConvTranspose / Gemm + Relu, LeakyRelu, Clip (Const or attribute
 *                bounds), HardSigmoid, HardSwish, Sigmoid, or x * Sigmoid(x)
 *                (Mul of the output and its Sigmoid) -> the attribute
 *                _kiln_fused_activation (the op's name; "Swish" for the Mul
 *                form) with _kiln_fused_alpha / _kiln_fused_beta (LeakyRelu
 *                alpha; Clip min and max; HardSigmoid alpha and beta) on the
 *                Conv / Gemm, whose kernel applies it in its output loop.
 *
 * Safety: the head (Conv, ConvTranspose, Gemm, MatMul) is on engine aicore
 * and applies no fused activation yet; the absorbed node is on aicore, the
 * built-in vector engine or none (no engine lists HardSwish: fused, it
 * runs), has no `_kiln_engine` pin to another engine, no control edges, is
 * not `_cannot_be_deleted` and does not feed the NetOutput (the model's
 * output keeps its producer's name); the head's output has exactly the
 * absorbed node(s) as consumers; outputs are float32 (the absorbed ops keep
 * the head's shape by their semantics) and folded operands are Const.  Root
 * graph only; one pass
 * over the nodes, O(nodes + folded weights).
 *
 * The session option aicore.fusion selects the fusions: "on" (default),
 * "off", or a comma list of conv_bn, matmul_bias, activation.  The session
 * option aicore.conv_backend (onednn, the default, or blas) is applied here
 * too: it marks the Conv nodes whose kernels use im2col + OpenBLAS.
 */
#include "nn_ops.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- the fused activation (kernels) --------------------------------------- */

static const struct {
    const char *name;
    nn_act_kind kind;
} act_names[] = {
    {"Relu", NN_ACT_RELU},         {"LeakyRelu", NN_ACT_LEAKY_RELU},
    {"Clip", NN_ACT_CLIP},         {"HardSigmoid", NN_ACT_HARD_SIGMOID},
    {"HardSwish", NN_ACT_HARD_SWISH}, {"Sigmoid", NN_ACT_SIGMOID},
    {"Swish", NN_ACT_SWISH},
};

static nn_act_kind act_kind(const char *name)
{
    for (size_t i = 0; i < sizeof(act_names) / sizeof(act_names[0]); i++)
        if (strcmp(act_names[i].name, name) == 0)
            return act_names[i].kind;
    return NN_ACT_NONE;
}

kiln_status nn_act_read(const kiln_graph *g, kiln_node_id n, nn_act *act, kiln_error *err)
{
    act->kind = NN_ACT_NONE;
    act->alpha = act->beta = 0.0f;
    const char *name = cpu_attr_str(g, n, "_kiln_fused_activation", NULL);
    if (!name || !*name)
        return KILN_OK;
    act->kind = act_kind(name);
    if (act->kind == NN_ACT_NONE)
        return cpu_fail_node(g, n, err, KILN_ERR_INVALID,
                             "_kiln_fused_activation '%s' is not one of Relu, LeakyRelu, Clip, "
                             "HardSigmoid, HardSwish, Sigmoid, Swish",
                             name);
    act->alpha = (float)cpu_attr_float(g, n, "_kiln_fused_alpha", 0.0);
    act->beta = (float)cpu_attr_float(g, n, "_kiln_fused_beta", 0.0);
    return KILN_OK;
}

void nn_act_apply(const nn_act *act, float *y, int64_t count)
{
    const float a = act->alpha, b = act->beta;
    switch (act->kind) {
    case NN_ACT_NONE:
        return;
    case NN_ACT_RELU:
        for (int64_t i = 0; i < count; i++)
            y[i] = y[i] > 0.0f ? y[i] : 0.0f;
        return;
    case NN_ACT_LEAKY_RELU:
        for (int64_t i = 0; i < count; i++)
            y[i] = y[i] >= 0.0f ? y[i] : a * y[i];
        return;
    case NN_ACT_CLIP:
        for (int64_t i = 0; i < count; i++)
            y[i] = y[i] < a ? a : (y[i] > b ? b : y[i]);
        return;
    case NN_ACT_HARD_SIGMOID:
        for (int64_t i = 0; i < count; i++) {
            float v = a * y[i] + b;
            y[i] = v < 0.0f ? 0.0f : (v > 1.0f ? 1.0f : v);
        }
        return;
    case NN_ACT_HARD_SWISH:
        for (int64_t i = 0; i < count; i++) {
            float v = y[i] / 6.0f + 0.5f;
            y[i] *= v < 0.0f ? 0.0f : (v > 1.0f ? 1.0f : v);
        }
        return;
    case NN_ACT_SIGMOID:
        for (int64_t i = 0; i < count; i++)
            y[i] = 1.0f / (1.0f + expf(-y[i]));
        return;
    case NN_ACT_SWISH:
        for (int64_t i = 0; i < count; i++)
            y[i] = y[i] / (1.0f + expf(-y[i]));
        return;
    }
}

/* ---- graph helpers --------------------------------------------------------- */

enum { FUSE_CONV_BN = 1, FUSE_MATMUL_BIAS = 2, FUSE_ACTIVATION = 4, FUSE_ALL = 7 };

typedef struct fuse_run {
    kiln_pass_ctx *ctx;
    kiln_graph *g;
    int64_t conv_bn, matmul_bias, activation;
} fuse_run;

static bool op_is(const kiln_graph *g, kiln_node_id n, const char *op)
{
    return strcmp(kiln_node_op_str(g, n), op) == 0;
}

static bool engine_is(kiln_graph *g, kiln_node_id n, const char *engine)
{
    const char *e = kiln_engine_for_node(g, n);
    return e && strcmp(e, engine) == 0;
}

/* A node the aicore engine may absorb: on aicore, the built-in vector engine or
 * no engine, not pinned (_kiln_engine) to another engine, not
 * _cannot_be_deleted, without control edges. */
static bool absorbable(kiln_graph *g, kiln_node_id n)
{
    bool keep = false;
    if (kiln_attrs_get_bool(kiln_node_attrs(g, n), "_cannot_be_deleted", &keep) && keep)
        return false;
    /* a control edge orders the node itself, which would no longer exist */
    if (kiln_node_ctrl_in_count(g, n) || kiln_node_ctrl_out_count(g, n))
        return false;
    const char *pin = NULL;
    if (kiln_attrs_get_string(kiln_node_attrs(g, n), "_kiln_engine", &pin) && pin &&
        strcmp(pin, "aicore") != 0)
        return false;
    const char *e = kiln_engine_for_node(g, n);
    /* no engine at all (HardSwish): the fused Conv / Gemm is what runs it */
    return !e || strcmp(e, "aicore") == 0 || strcmp(e, "vector") == 0;
}

/* The single consumer of output 0 of @p n (and its input index), or 0. */
static kiln_node_id sole_consumer(const kiln_graph *g, kiln_node_id n, uint32_t *di)
{
    if (kiln_node_output_use_count(g, n, 0) != 1)
        return 0;
    kiln_anchor d = kiln_use_dst(g, kiln_use_first(g, n, 0));
    if (di)
        *di = d.index;
    return d.node;
}

static bool feeds_netoutput(const kiln_graph *g, kiln_node_id n)
{
    uint32_t nout = kiln_node_output_count(g, n);
    for (uint32_t o = 0; o < nout; o++)
        for (uint32_t u = kiln_use_first(g, n, o); u; u = kiln_use_next(g, u))
            if (op_is(g, kiln_use_dst(g, u).node, "NetOutput"))
                return true;
    return false;
}

/* Only output 0 of @p n is used. */
static bool only_output0_used(const kiln_graph *g, kiln_node_id n)
{
    uint32_t nout = kiln_node_output_count(g, n);
    for (uint32_t o = 1; o < nout; o++)
        if (kiln_node_output_use_count(g, n, o))
            return false;
    return true;
}

/* Float32 descriptors (the absorbed ops keep their input's shape: unary
 * activations, BatchNormalization, x * Sigmoid(x), a bias Add of [N] onto
 * [M, N]); ranks, when both are known, equal. */
static bool both_f32(const kiln_tensor_desc *a, const kiln_tensor_desc *b)
{
    if (!a || !b || kiln_desc_dtype(a) != KILN_DT_FLOAT32 || kiln_desc_dtype(b) != KILN_DT_FLOAT32)
        return false;
    int32_t ra = kiln_desc_rank(a), rb = kiln_desc_rank(b);
    return ra < 0 || rb < 0 || ra == rb;
}

/* The float32 value of the Const feeding input @p i of @p n; false otherwise. */
static bool const_input(const kiln_graph *g, kiln_node_id n, uint32_t i, kiln_tensor_value *v,
                        int64_t *numel)
{
    if (i >= kiln_node_input_count(g, n))
        return false;
    kiln_anchor p = kiln_node_input_peer(g, n, i);
    if (!p.node || !(op_is(g, p.node, "Const") || op_is(g, p.node, "Constant")))
        return false;
    if (!kiln_attrs_get_tensor(kiln_node_attrs(g, p.node), "value", v) ||
        v->dtype != KILN_DT_FLOAT32)
        return false;
    int64_t c = 1;
    for (uint32_t d = 0; d < v->rank; d++)
        c *= v->dims[d];
    if (c < 0 || v->nbytes != (size_t)c * sizeof(float))
        return false;
    *numel = c;
    return true;
}

/* Remove the Const @p c when nothing reads it any more. */
static kiln_status drop_if_dead(kiln_graph *g, kiln_node_id c)
{
    if (!c || !kiln_node_is_live(g, c) ||
        !(op_is(g, c, "Const") || op_is(g, c, "Constant")) ||
        kiln_node_output_use_count(g, c, 0) || kiln_node_ctrl_out_count(g, c) ||
        kiln_node_ctrl_in_count(g, c))
        return KILN_OK;
    bool keep = false;
    if (kiln_attrs_get_bool(kiln_node_attrs(g, c), "_cannot_be_deleted", &keep) && keep)
        return KILN_OK;
    return kiln_graph_remove_node(g, c);
}

/* Remove @p n, its consumers re-fed from the producer of its input @p in. */
static kiln_status bypass(kiln_graph *g, kiln_node_id n, int32_t in)
{
    uint32_t nin = kiln_node_input_count(g, n);
    kiln_node_id feeds[8];
    uint32_t nf = 0;
    for (uint32_t i = 0; i < nin && nf < 8; i++)
        feeds[nf++] = kiln_node_input_peer(g, n, i).node;
    const int32_t io_map[1] = {in};
    kiln_status st = kiln_graph_isolate_node(g, n, io_map, 1);
    if (st == KILN_OK)
        st = kiln_graph_remove_node(g, n);
    for (uint32_t i = 0; i < nf && st == KILN_OK; i++)
        st = drop_if_dead(g, feeds[i]);
    return st;
}

/* A unique node name "<base><suffix>[_k]" in @p buf. */
static const char *fresh_name(kiln_graph *g, const char *base, const char *suffix, char *buf,
                              size_t size)
{
    snprintf(buf, size, "%s%s", base, suffix);
    for (uint32_t k = 1; kiln_graph_find_node(g, buf); k++)
        snprintf(buf, size, "%s%s_%u", base, suffix, k);
    return buf;
}

/* A new Const [dims] of float32 @p data feeding input @p di of @p dst (which
 * it disconnects first). */
static kiln_status feed_const(kiln_graph *g, kiln_node_id dst, uint32_t di, const char *suffix,
                              const int64_t *dims, uint32_t rank, const float *data, int64_t numel)
{
    char name[256];
    fresh_name(g, kiln_node_name_str(g, dst), suffix, name, sizeof(name));
    kiln_node_id c = kiln_graph_add_node(g, name, "Const", 0, 1);
    if (!c)
        return KILN_ERR_NOMEM;
    kiln_tensor_value v = {KILN_DT_FLOAT32, rank, dims, data, (size_t)numel * sizeof(float)};
    kiln_status st = kiln_attrs_set_tensor(kiln_node_attrs_mut(g, c), "value", &v);
    kiln_tensor_desc *d = kiln_node_output_desc(g, c, 0);
    if (st == KILN_OK)
        st = kiln_desc_set_dtype(g, d, KILN_DT_FLOAT32);
    if (st == KILN_OK)
        st = kiln_desc_set_shape(g, d, (int32_t)rank, dims);
    if (st == KILN_OK && di >= kiln_node_input_count(g, dst))
        st = kiln_node_set_input_count(g, dst, di + 1);
    if (st == KILN_OK)
        st = kiln_edge_remove(g, dst, di);
    if (st == KILN_OK)
        st = kiln_edge_add(g, c, 0, dst, di);
    return st;
}

/* ---- Conv + BatchNormalization --------------------------------------------- */

static kiln_status fuse_conv_bn(fuse_run *r, kiln_node_id conv, bool *done)
{
    kiln_graph *g = r->g;
    *done = false;
    uint32_t di = 1;
    kiln_node_id bn = sole_consumer(g, conv, &di);
    if (!bn || di != 0 || !op_is(g, bn, "BatchNormalization") || !absorbable(g, bn) ||
        feeds_netoutput(g, bn) || !only_output0_used(g, bn) ||
        cpu_attr_int(g, bn, "training_mode", 0) != 0)
        return KILN_OK;
    if (!both_f32(kiln_node_output_desc(g, conv, 0), kiln_node_output_desc(g, bn, 0)))
        return KILN_OK;
    kiln_tensor_value w, b, sc, bi, mean, var;
    int64_t nw, nb = 0, nsc, nbi, nmean, nvar;
    if (!const_input(g, conv, 1, &w, &nw) || w.rank < 3 ||
        strlen(kiln_node_name_str(g, conv)) > 200) /* room for the new Consts' names */
        return KILN_OK;
    const bool has_b = kiln_node_input_count(g, conv) > 2 && kiln_node_input_peer(g, conv, 2).node;
    /* Conv W [M, C/group, k...]; ConvTranspose W [C, M/group, k...] */
    const bool transposed = op_is(g, conv, "ConvTranspose");
    const int64_t group = cpu_attr_int(g, conv, "group", 1);
    if (group < 1 || (transposed && w.dims[0] % group != 0))
        return KILN_OK;
    const int64_t M = transposed ? w.dims[1] * group : w.dims[0];
    if (has_b && (!const_input(g, conv, 2, &b, &nb) || nb != M))
        return KILN_OK;
    if (!const_input(g, bn, 1, &sc, &nsc) || !const_input(g, bn, 2, &bi, &nbi) ||
        !const_input(g, bn, 3, &mean, &nmean) || !const_input(g, bn, 4, &var, &nvar) ||
        nsc != M || nbi != M || nmean != M || nvar != M || M <= 0)
        return KILN_OK;
    const double eps = cpu_attr_float(g, bn, "epsilon", 1e-5);
    float *nwv = kiln_alloc((size_t)nw * sizeof(float));
    float *nbv = kiln_alloc((size_t)M * sizeof(float));
    if (!nwv || !nbv) {
        kiln_free(nwv);
        kiln_free(nbv);
        return KILN_ERR_NOMEM;
    }
    const float *wv = w.data, *bv = has_b ? b.data : NULL;
    const float *scv = sc.data, *biv = bi.data, *mv = mean.data, *vv = var.data;
    double *sv = kiln_alloc((size_t)M * sizeof(double));
    if (!sv) {
        kiln_free(nwv);
        kiln_free(nbv);
        return KILN_ERR_NOMEM;
    }
    for (int64_t m = 0; m < M; m++) {
        sv[m] = (double)scv[m] / sqrt((double)vv[m] + eps);
        nbv[m] = (float)(((bv ? (double)bv[m] : 0.0) - (double)mv[m]) * sv[m] + (double)biv[m]);
    }
    if (!transposed) {
        const int64_t per = nw / M;
        for (int64_t m = 0; m < M; m++)
            for (int64_t k = 0; k < per; k++)
                nwv[m * per + k] = (float)((double)wv[m * per + k] * sv[m]);
    } else {
        /* row c of W belongs to group c / (C / group); its column j is
         * output channel group_index * Mg + j */
        const int64_t C = w.dims[0], Mg = w.dims[1], Cg = C / group, ks = nw / (C * Mg);
        for (int64_t c = 0; c < C; c++)
            for (int64_t j = 0; j < Mg; j++) {
                const double s = sv[(c / Cg) * Mg + j];
                const int64_t at = (c * Mg + j) * ks;
                for (int64_t k = 0; k < ks; k++)
                    nwv[at + k] = (float)((double)wv[at + k] * s);
            }
    }
    kiln_free(sv);
    kiln_node_id old_w = kiln_node_input_peer(g, conv, 1).node;
    kiln_node_id old_b = has_b ? kiln_node_input_peer(g, conv, 2).node : 0;
    if (r->ctx)
        kiln_pass_explain(r->ctx, g, bn, "folded by engine aicore into %s %s (conv_bn)",
                          kiln_node_op_str(g, conv), kiln_node_name_str(g, conv));
    const int64_t bdims[1] = {M};
    kiln_status st = feed_const(g, conv, 1, "_bn_w", w.dims, w.rank, nwv, nw);
    if (st == KILN_OK)
        st = feed_const(g, conv, 2, "_bn_b", bdims, 1, nbv, M);
    kiln_free(nwv);
    kiln_free(nbv);
    if (st == KILN_OK)
        st = bypass(g, bn, 0);
    if (st == KILN_OK)
        st = drop_if_dead(g, old_w);
    if (st == KILN_OK)
        st = drop_if_dead(g, old_b);
    if (st == KILN_OK) {
        r->conv_bn++;
        *done = true;
    }
    return st;
}

/* ---- MatMul / Gemm + Add(Const bias) ----------------------------------------- */

static kiln_status fuse_matmul_bias(fuse_run *r, kiln_node_id mm)
{
    kiln_graph *g = r->g;
    const bool gemm = op_is(g, mm, "Gemm");
    if (gemm && kiln_node_input_count(g, mm) > 2 && kiln_node_input_peer(g, mm, 2).node)
        return KILN_OK; /* already has C */
    uint32_t di = 1;
    kiln_node_id add = sole_consumer(g, mm, &di);
    if (!add || !op_is(g, add, "Add") || kiln_node_input_count(g, add) != 2 ||
        !absorbable(g, add) || feeds_netoutput(g, add))
        return KILN_OK;
    const kiln_tensor_desc *out = kiln_node_output_desc(g, mm, 0);
    if (!both_f32(out, kiln_node_output_desc(g, add, 0)) || kiln_desc_rank(out) != 2 ||
        kiln_desc_dims(out)[1] < 0)
        return KILN_OK;
    if (!gemm) {
        const kiln_tensor_desc *a = kiln_node_input_desc(g, mm, 0), *b = kiln_node_input_desc(g, mm, 1);
        if (!a || !b || kiln_desc_rank(a) != 2 || kiln_desc_rank(b) != 2)
            return KILN_OK;
    }
    kiln_tensor_value c;
    int64_t nc;
    if (!const_input(g, add, 1 - di, &c, &nc))
        return KILN_OK;
    const int64_t N = kiln_desc_dims(out)[1];
    if (!((c.rank == 1 && c.dims[0] == N) || (c.rank == 2 && c.dims[0] == 1 && c.dims[1] == N)))
        return KILN_OK;
    kiln_node_id cnode = kiln_node_input_peer(g, add, 1 - di).node;
    if (r->ctx)
        kiln_pass_explain(r->ctx, g, add, "fused by engine aicore into %s %s as C (matmul_bias)",
                          gemm ? "Gemm" : "MatMul", kiln_node_name_str(g, mm));
    kiln_status st = KILN_OK;
    if (!gemm)
        st = kiln_node_set_op(g, mm, "Gemm");
    else /* beta scales only C, which had none */
        st = kiln_attrs_set_float(kiln_node_attrs_mut(g, mm), "beta", 1.0);
    if (st == KILN_OK && kiln_node_input_count(g, mm) < 3)
        st = kiln_node_set_input_count(g, mm, 3);
    if (st == KILN_OK)
        st = kiln_edge_add(g, cnode, 0, mm, 2);
    if (st == KILN_OK)
        st = bypass(g, add, (int32_t)di);
    if (st == KILN_OK)
        r->matmul_bias++;
    return st;
}

/* ---- activations -------------------------------------------------------------- */

/* A scalar float Const at input @p i of @p n into *out; true also when unconnected. */
static bool clip_bound(const kiln_graph *g, kiln_node_id n, uint32_t i, float *out)
{
    if (i >= kiln_node_input_count(g, n) || !kiln_node_input_peer(g, n, i).node)
        return true;
    kiln_tensor_value v;
    int64_t c;
    if (!const_input(g, n, i, &v, &c) || c != 1)
        return false;
    *out = ((const float *)v.data)[0];
    return true;
}

static kiln_status fuse_activation(fuse_run *r, kiln_node_id head)
{
    kiln_graph *g = r->g;
    if (cpu_attr_str(g, head, "_kiln_fused_activation", NULL))
        return KILN_OK;
    kiln_node_id act = 0, sig = 0;
    const char *kind = NULL;
    float alpha = 0.0f, beta = 0.0f;
    uint32_t uses = kiln_node_output_use_count(g, head, 0);
    if (uses == 1) {
        uint32_t di = 1;
        act = sole_consumer(g, head, &di);
        if (!act || di != 0)
            return KILN_OK;
        kind = kiln_node_op_str(g, act);
        if (strcmp(kind, "LeakyRelu") == 0) {
            alpha = (float)cpu_attr_float(g, act, "alpha", 0.01);
        } else if (strcmp(kind, "HardSigmoid") == 0) {
            alpha = (float)cpu_attr_float(g, act, "alpha", 0.2);
            beta = (float)cpu_attr_float(g, act, "beta", 0.5);
        } else if (strcmp(kind, "Clip") == 0) {
            alpha = (float)cpu_attr_float(g, act, "min", -FLT_MAX);
            beta = (float)cpu_attr_float(g, act, "max", FLT_MAX);
            if (!clip_bound(g, act, 1, &alpha) || !clip_bound(g, act, 2, &beta))
                return KILN_OK;
        } else if (strcmp(kind, "Relu") != 0 && strcmp(kind, "HardSwish") != 0 &&
                   strcmp(kind, "Sigmoid") != 0) {
            return KILN_OK;
        }
    } else if (uses == 2) {
        /* x * Sigmoid(x): the head feeds a Sigmoid and the Mul that reads both */
        uint32_t u = kiln_use_first(g, head, 0);
        kiln_anchor d0 = kiln_use_dst(g, u), d1 = kiln_use_dst(g, kiln_use_next(g, u));
        sig = op_is(g, d0.node, "Sigmoid") ? d0.node : op_is(g, d1.node, "Sigmoid") ? d1.node : 0;
        act = sig == d0.node ? d1.node : d0.node;
        uint32_t sdi = 0;
        if (!sig || !op_is(g, act, "Mul") || kiln_node_input_count(g, act) != 2 ||
            sole_consumer(g, sig, &sdi) != act || !absorbable(g, sig) ||
            !both_f32(kiln_node_output_desc(g, head, 0), kiln_node_output_desc(g, sig, 0)))
            return KILN_OK;
        kind = "Swish";
    } else {
        return KILN_OK;
    }
    if (!absorbable(g, act) || feeds_netoutput(g, act) || kiln_node_output_count(g, act) != 1 ||
        !both_f32(kiln_node_output_desc(g, head, 0), kiln_node_output_desc(g, act, 0)))
        return KILN_OK;
    if (r->ctx)
        kiln_pass_explain(r->ctx, g, act, "fused by engine aicore into %s %s as its activation %s",
                          kiln_node_op_str(g, head), kiln_node_name_str(g, head), kind);
    kiln_attrs *at = kiln_node_attrs_mut(g, head);
    kiln_status st = at ? kiln_attrs_set_string(at, "_kiln_fused_activation", kind) : KILN_ERR_NOMEM;
    if (st == KILN_OK && (alpha != 0.0f || strcmp(kind, "Clip") == 0))
        st = kiln_attrs_set_float(at, "_kiln_fused_alpha", alpha);
    if (st == KILN_OK && (beta != 0.0f || strcmp(kind, "Clip") == 0))
        st = kiln_attrs_set_float(at, "_kiln_fused_beta", beta);
    if (sig) {
        /* the Mul's consumers read the head; the Sigmoid then has no consumer */
        uint32_t hin = kiln_node_input_peer(g, act, 0).node == head ? 0 : 1;
        if (st == KILN_OK)
            st = bypass(g, act, (int32_t)hin);
        if (st == KILN_OK)
            st = kiln_graph_remove_node(g, sig);
    } else if (st == KILN_OK) {
        st = bypass(g, act, 0);
    }
    if (st == KILN_OK)
        r->activation++;
    return st;
}

/* ---- the hook ------------------------------------------------------------------ */

static kiln_status fusion_mask(kiln_pass_ctx *ctx, unsigned *mask)
{
    const char *v = ctx ? kiln_pass_session_option(ctx, "aicore.fusion") : NULL;
    *mask = FUSE_ALL;
    if (!v || !*v || strcmp(v, "on") == 0 || strcmp(v, "all") == 0)
        return KILN_OK;
    *mask = 0;
    if (strcmp(v, "off") == 0 || strcmp(v, "none") == 0)
        return KILN_OK;
    const char *p = v;
    while (*p) {
        size_t len = strcspn(p, ",");
        if (len == 7 && strncmp(p, "conv_bn", len) == 0)
            *mask |= FUSE_CONV_BN;
        else if (len == 11 && strncmp(p, "matmul_bias", len) == 0)
            *mask |= FUSE_MATMUL_BIAS;
        else if (len == 10 && strncmp(p, "activation", len) == 0)
            *mask |= FUSE_ACTIVATION;
        else
            return kiln_errorf(kiln_pass_error(ctx), KILN_ERR_INVALID,
                               "session option aicore.fusion=%s: unknown fusion '%.*s' (expected "
                               "on, off or a comma list of conv_bn, matmul_bias, activation)",
                               v, (int)len, p);
        p += len;
        if (*p == ',')
            p++;
    }
    return KILN_OK;
}

/*
 * The session option aicore.conv_backend: "onednn" (default) or "blas".
 * Under "blas" every Conv of @p root and its subgraphs gets
 * _kiln_conv_backend = "blas", which the aicore kernel reads when the
 * runtime binds it (nn_conv.c); other engines ignore it.
 */
static kiln_status conv_backend(kiln_pass_ctx *ctx, kiln_graph *root)
{
    const char *v = ctx ? kiln_pass_session_option(ctx, "aicore.conv_backend") : NULL;
    if (!v || !*v || strcmp(v, "onednn") == 0)
        return KILN_OK;
    if (strcmp(v, "blas") != 0)
        return kiln_errorf(kiln_pass_error(ctx), KILN_ERR_INVALID,
                           "session option aicore.conv_backend=%s: expected onednn or blas", v);
    const uint32_t nsub = kiln_graph_all_subgraph_count(root);
    for (uint32_t i = 0; i <= nsub; i++) {
        kiln_graph *g = i ? kiln_graph_all_subgraph(root, i - 1) : root;
        for (kiln_node_id n = kiln_graph_next_node(g, 0); g && n; n = kiln_graph_next_node(g, n)) {
            if (!op_is(g, n, "Conv"))
                continue;
            kiln_status st =
                kiln_attrs_set_string(kiln_node_attrs_mut(g, n), "_kiln_conv_backend", "blas");
            if (st != KILN_OK)
                return kiln_errorf(kiln_pass_error(ctx), st, "node %s: setting _kiln_conv_backend",
                                   kiln_node_name_str(g, n));
        }
    }
    return KILN_OK;
}

kiln_status nn_aicore_optimize_original(void *inst, kiln_pass_ctx *ctx, kiln_graph *root)
{
    (void)inst;
    unsigned mask;
    kiln_status st = conv_backend(ctx, root);
    if (st != KILN_OK)
        return st;
    st = fusion_mask(ctx, &mask);
    if (st != KILN_OK || !mask)
        return st;
    fuse_run r = {ctx, root, 0, 0, 0};
    const uint32_t limit = kiln_graph_id_limit(root); /* nodes added here are Consts */
    for (kiln_node_id n = kiln_graph_next_node(root, 0); n && n < limit && st == KILN_OK;
         n = kiln_graph_next_node(root, n)) {
        const bool conv = op_is(root, n, "Conv") || op_is(root, n, "ConvTranspose");
        const bool mm = op_is(root, n, "MatMul") || op_is(root, n, "Gemm");
        if ((!conv && !mm) || !engine_is(root, n, "aicore"))
            continue;
        if (kiln_desc_dtype(kiln_node_output_desc(root, n, 0)) != KILN_DT_FLOAT32)
            continue;
        /* a head that already applies an activation (a compiled graph compiled
         * again) takes no BatchNormalization or bias after it */
        const bool has_act = cpu_attr_str(root, n, "_kiln_fused_activation", NULL) != NULL;
        bool folded;
        if (conv && (mask & FUSE_CONV_BN) && !has_act)
            st = fuse_conv_bn(&r, n, &folded);
        if (mm && (mask & FUSE_MATMUL_BIAS) && st == KILN_OK && !has_act)
            st = fuse_matmul_bias(&r, n);
        if ((mask & FUSE_ACTIVATION) && st == KILN_OK && !op_is(root, n, "MatMul"))
            st = fuse_activation(&r, n);
    }
    if (st != KILN_OK && ctx)
        return kiln_errorf(kiln_pass_error(ctx), st, "aicore fusion failed on graph %s",
                           kiln_graph_name(root));
    if (ctx) {
        if (r.conv_bn)
            kiln_pass_stat_add(ctx, "conv_bn_folded", r.conv_bn);
        if (r.matmul_bias)
            kiln_pass_stat_add(ctx, "matmul_bias_fused", r.matmul_bias);
        if (r.activation)
            kiln_pass_stat_add(ctx, "activations_fused", r.activation);
    }
    return st;
}

/*
 * nn_fusion.c - the aicore engine's built-in fusion passes (GE's FE graph
 * fusions, run by RunBuiltinFusionPasses at OptimizeOriginalGraph as pattern
 * fusion passes of stage builtin, in name order) and the fused activation its
 * Conv and Gemm kernels apply.
 *
 *   ConvBatchNormFusionPass   Conv or ConvTranspose + BatchNormalization
 *                (inference: Const scale, B, mean, var; training_mode 0) ->
 *                Conv with W' = W * s[m] (s of W's output channel m) and
 *                B' = (B - mean) * s + bias, s = scale / sqrt(var + eps).
 *                W' and B' are new Const nodes (the old W may be shared).
 *   MatMulBiasAddFusionPass   Gemm without C (or 2-D MatMul, which becomes a
 *                Gemm) + Add of a Const [N] / [1, N] bias -> Gemm with C = the bias.
 *   PostActivationFusionPass  Conv / ConvTranspose / Gemm + Relu, LeakyRelu,
 *                Clip (Const or attribute bounds), HardSigmoid, HardSwish,
 *                Sigmoid, or x * Sigmoid(x) (Mul of the output and its Sigmoid)
 *                -> the attribute _kiln_fused_activation (the op's name;
 *                "Swish" for the Mul form) with _kiln_fused_alpha /
 *                _kiln_fused_beta (LeakyRelu alpha; Clip min and max;
 *                HardSigmoid alpha and beta) on the Conv / Gemm, whose kernel
 *                applies it in its output loop.  Its name sorts after the
 *                other builtin fusions (the executor runs them in name order),
 *                so it sees the Conv that ConvBatchNormFusionPass made of
 *                Conv + BatchNormalization and the HardSwish that the vector
 *                engine's HardSwishFusionPass made of Add/Clip/Mul/Div.
 *
 * Each pattern spells every input of the head (Data nodes, so shared weights
 * stay outside the match); meet_requirements checks the rest.  Safety: the
 * head (Conv, ConvTranspose, Gemm, MatMul) is on engine aicore and applies no
 * fused activation yet; the absorbed node is on aicore, the built-in vector
 * engine or none, has no `_kiln_engine` pin to another engine, no control
 * edges, is not `_cannot_be_deleted` and does not feed the NetOutput (the
 * model's output keeps its producer's name); the head's output has exactly
 * the absorbed node(s) as consumers; outputs are float32 (the absorbed ops
 * keep the head's shape by their semantics) and folded operands are Const.
 *
 * The session option aicore.fusion selects the fusions: "on" (default),
 * "off", or a comma list of conv_bn, matmul_bias, activation (a fusion left
 * out declines its matches); ge.optimizationSwitch switches a pass off by name.
 * The session option aicore.conv_backend (onednn, the default, or blas) is
 * the engine's optimize_original_graph: it marks the Conv nodes whose kernels
 * use im2col + OpenBLAS.
 */
#include "nn_ops.h"
#include "cpu_vexp.h"

#include "kiln/kiln_plugin.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- the fused activation (kernels) --------------------------------------- */

static const struct {
    const char *name;
    nn_act_kind kind;
} act_names[] = {
    {"Relu", NN_ACT_RELU},
    {"LeakyRelu", NN_ACT_LEAKY_RELU},
    {"Clip", NN_ACT_CLIP},
    {"HardSigmoid", NN_ACT_HARD_SIGMOID},
    {"HardSwish", NN_ACT_HARD_SWISH},
    {"Sigmoid", NN_ACT_SIGMOID},
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
    act->has_post = false;
    act->post_scale = 1.0f;
    act->post_shift = 0.0f;
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
    act->post_scale = (float)cpu_attr_float(g, n, "_kiln_fused_post_scale", 1.0);
    act->post_shift = (float)cpu_attr_float(g, n, "_kiln_fused_post_shift", 0.0);
    act->has_post = act->post_scale != 1.0f || act->post_shift != 0.0f;
    return KILN_OK;
}

CPU_VEC_CLONES static void act_apply(const nn_act *act, float *y, int64_t count);

void nn_act_apply(const nn_act *act, float *y, int64_t count)
{
    act_apply(act, y, count);
    if (act->has_post) {
        const float s = act->post_scale, t = act->post_shift;
        for (int64_t i = 0; i < count; i++)
            y[i] = y[i] * s + t;
    }
}

CPU_VEC_CLONES static void act_apply(const nn_act *act, float *y, int64_t count)
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
            y[i] = 1.0f / (1.0f + cpu_expf(-y[i]));
        return;
    case NN_ACT_SWISH:
        for (int64_t i = 0; i < count; i++)
            y[i] = y[i] / (1.0f + cpu_expf(-y[i]));
        return;
    }
}

/* ---- graph helpers --------------------------------------------------------- */

enum { FUSE_CONV_BN = 1, FUSE_MATMUL_BIAS = 2, FUSE_ACTIVATION = 4, FUSE_ALL = 127 };

static bool op_is(const kiln_graph *g, kiln_node_id n, const char *op)
{
    return strcmp(kiln_node_op_str(g, n), op) == 0;
}

/* Descriptors of a graph the match hooks see as const (read only here). */
static const kiln_tensor_desc *out_desc(const kiln_graph *g, kiln_node_id n, uint32_t o)
{
    return kiln_node_output_desc((kiln_graph *)g, n, o);
}

static const kiln_tensor_desc *in_desc(const kiln_graph *g, kiln_node_id n, uint32_t i)
{
    return kiln_node_input_desc((kiln_graph *)g, n, i);
}

/* The engine kiln places @p n on (the lookup does not change the graph). */
static const char *engine_of(const kiln_graph *g, kiln_node_id n)
{
    return kiln_engine_for_node((kiln_graph *)g, n);
}

/* A node a fusion may delete into an aicore node: not pinned (_kiln_engine) to
 * another engine, not _cannot_be_deleted, without control edges. */
bool nn_fx_deletable(const kiln_graph *g, kiln_node_id n)
{
    bool keep = false;
    if (kiln_attrs_get_bool(kiln_node_attrs(g, n), "_cannot_be_deleted", &keep) && keep)
        return false;
    /* a control edge orders the node itself, which would no longer exist */
    if (kiln_node_ctrl_in_count(g, n) || kiln_node_ctrl_out_count(g, n))
        return false;
    const char *pin = NULL;
    return !(kiln_attrs_get_string(kiln_node_attrs(g, n), "_kiln_engine", &pin) && pin &&
             strcmp(pin, "aicore") != 0);
}

/* A node the aicore engine may absorb: deletable, and on aicore, the built-in
 * vector engine or no engine. */
bool nn_fx_absorbable(const kiln_graph *g, kiln_node_id n)
{
    if (!nn_fx_deletable(g, n))
        return false;
    const char *e = engine_of(g, n);
    /* no engine at all: the fused Conv / Gemm is what runs it */
    return !e || strcmp(e, "aicore") == 0 || strcmp(e, "vector") == 0;
}

bool nn_fx_feeds_netoutput(const kiln_graph *g, kiln_node_id n)
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

/* The number of connected inputs of @p n, or UINT32_MAX when one before the
 * last connected one is missing (a hole the patterns do not describe). */
static uint32_t connected_inputs(const kiln_graph *g, kiln_node_id n)
{
    uint32_t nin = kiln_node_input_count(g, n), last = 0, count = 0;
    for (uint32_t i = 0; i < nin; i++)
        if (kiln_node_input_peer(g, n, i).node) {
            count++;
            last = i + 1;
        }
    return count == last ? count : UINT32_MAX;
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
bool nn_fx_const_input(const kiln_graph *g, kiln_node_id n, uint32_t i, kiln_tensor_value *v,
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

/* A scalar float Const at input @p i of @p n into *out; true also when unconnected. */
static bool clip_bound(const kiln_graph *g, kiln_node_id n, uint32_t i, float *out)
{
    if (i >= kiln_node_input_count(g, n) || !kiln_node_input_peer(g, n, i).node)
        return true;
    kiln_tensor_value v;
    int64_t c;
    if (!nn_fx_const_input(g, n, i, &v, &c) || c != 1)
        return false;
    *out = ((const float *)v.data)[0];
    return true;
}

/* ---- the passes' shared machinery ------------------------------------------------ */

/* One alternative pattern: head -> tail (-> for Swish, the Mul reading head
 * and Sigmoid(head)).  Data pattern nodes: the head's inputs, then the tail's
 * other inputs, in input order (= the boundary inputs). */
typedef struct fx_alt {
    const char *head, *tail;
    uint32_t head_in, tail_in;
    bool swish;
    int32_t n_head, n_tail, n_sig;
} fx_alt;

#define FX_MAX_ALTS 64

typedef struct fx_pass {
    unsigned which; /* FUSE_* */
    uint32_t nalt;
    fx_alt alt[FX_MAX_ALTS];
} fx_pass;

static void fx_add_alt(fx_pass *p, const char *head, uint32_t head_in, const char *tail,
                       uint32_t tail_in, bool swish)
{
    if (p->nalt < FX_MAX_ALTS)
        p->alt[p->nalt++] = (fx_alt){head, tail, head_in, tail_in, swish, -1, -1, -1};
}

static kiln_status fx_create(unsigned which, void **inst, kiln_error *err)
{
    fx_pass *p = kiln_alloc(sizeof(fx_pass));
    if (!p)
        return kiln_errorf(err, KILN_ERR_NOMEM, "aicore fusion pass: out of memory");
    memset(p, 0, sizeof(*p));
    p->which = which;
    static const char *const conv_heads[] = {"Conv", "ConvTranspose"};
    static const char *const act_heads[] = {"Conv", "ConvTranspose", "Gemm"};
    static const char *const acts[] = {"Relu", "LeakyRelu", "HardSigmoid", "HardSwish", "Sigmoid"};
    if (which == FUSE_CONV_BN) {
        for (int h = 0; h < 2; h++)
            for (uint32_t k = 2; k <= 3; k++)
                fx_add_alt(p, conv_heads[h], k, "BatchNormalization", 5, false);
    } else if (which == FUSE_MATMUL_BIAS) {
        fx_add_alt(p, "MatMul", 2, "Add", 2, false);
        fx_add_alt(p, "Gemm", 2, "Add", 2, false);
    } else {
        for (int h = 0; h < 3; h++)
            for (uint32_t k = 2; k <= 3; k++) {
                for (size_t a = 0; a < sizeof(acts) / sizeof(acts[0]); a++)
                    fx_add_alt(p, act_heads[h], k, acts[a], 1, false);
                for (uint32_t c = 1; c <= 3; c++)
                    fx_add_alt(p, act_heads[h], k, "Clip", c, false);
                fx_add_alt(p, act_heads[h], k, "Mul", 2, true);
            }
    }
    *inst = p;
    return KILN_OK;
}

static void fx_destroy(void *inst) { kiln_free(inst); }

static kiln_status conv_bn_create(const kiln_options *o, kiln_error *e, void **inst)
{
    (void)o;
    return fx_create(FUSE_CONV_BN, inst, e);
}
static kiln_status matmul_bias_create(const kiln_options *o, kiln_error *e, void **inst)
{
    (void)o;
    return fx_create(FUSE_MATMUL_BIAS, inst, e);
}
static kiln_status activation_create(const kiln_options *o, kiln_error *e, void **inst)
{
    (void)o;
    return fx_create(FUSE_ACTIVATION, inst, e);
}

static kiln_status fx_patterns(void *inst, kiln_pattern *pt, kiln_error *err)
{
    fx_pass *p = inst;
    kiln_status st = KILN_OK;
    char name[32];
    for (uint32_t a = 0; a < p->nalt && st == KILN_OK; a++) {
        fx_alt *al = &p->alt[a];
        if (a > 0 && (st = kiln_pattern_next(pt)) != KILN_OK)
            break;
        int32_t ins[3];
        for (uint32_t i = 0; i < al->head_in; i++) {
            snprintf(name, sizeof(name), "in%u", i);
            ins[i] = kiln_pattern_node(pt, name, "Data");
        }
        al->n_head = kiln_pattern_node(pt, "head", al->head);
        int32_t extra[4] = {-1, -1, -1, -1};
        for (uint32_t i = 1; i < al->tail_in && !al->swish; i++) {
            snprintf(name, sizeof(name), "operand%u", i);
            extra[i - 1] = kiln_pattern_node(pt, name, "Data");
        }
        if (al->swish)
            al->n_sig = kiln_pattern_node(pt, "sigmoid", "Sigmoid");
        al->n_tail = kiln_pattern_node(pt, "tail", al->tail);
        if (al->n_head < 0 || al->n_tail < 0 || (al->swish && al->n_sig < 0))
            st = KILN_ERR_NOMEM;
        for (uint32_t i = 0; i < al->head_in && st == KILN_OK; i++)
            st = ins[i] < 0 ? KILN_ERR_NOMEM : kiln_pattern_edge(pt, ins[i], 0, al->n_head, i);
        if (st == KILN_OK)
            st = kiln_pattern_edge(pt, al->n_head, 0, al->n_tail, 0);
        if (al->swish) {
            if (st == KILN_OK)
                st = kiln_pattern_edge(pt, al->n_head, 0, al->n_sig, 0);
            if (st == KILN_OK)
                st = kiln_pattern_edge(pt, al->n_sig, 0, al->n_tail, 1);
            if (st == KILN_OK)
                st = kiln_pattern_set_flags(pt, KILN_PATTERN_COMMUTATIVE);
        } else {
            for (uint32_t i = 1; i < al->tail_in && st == KILN_OK; i++)
                st = extra[i - 1] < 0 ? KILN_ERR_NOMEM
                                      : kiln_pattern_edge(pt, extra[i - 1], 0, al->n_tail, i);
            if (st == KILN_OK && strcmp(al->tail, "Add") == 0)
                st = kiln_pattern_set_flags(pt, KILN_PATTERN_COMMUTATIVE);
        }
        if (st == KILN_OK)
            st = kiln_pattern_output(pt, al->n_tail, 0);
    }
    if (st != KILN_OK)
        return kiln_errorf(err, st, "aicore fusion pass: building its patterns failed");
    return KILN_OK;
}

/* The checks every aicore fusion shares (nn_fusion.c's header, "Safety"). */
static const fx_alt *fx_common(const fx_pass *p, const kiln_graph *g, const kiln_match *m,
                               kiln_node_id *head, kiln_node_id *tail, kiln_node_id *sig)
{
    uint32_t ai = kiln_match_pattern_index(m);
    if (ai >= p->nalt)
        return NULL;
    const fx_alt *al = &p->alt[ai];
    *head = kiln_match_node(m, al->n_head);
    *tail = kiln_match_node(m, al->n_tail);
    *sig = al->swish ? kiln_match_node(m, al->n_sig) : 0;
    if (!*head || !*tail || (al->swish && !*sig))
        return NULL;
    const char *e = engine_of(g, *head);
    if (!e || strcmp(e, "aicore") != 0 || connected_inputs(g, *head) != al->head_in ||
        kiln_desc_dtype(out_desc(g, *head, 0)) != KILN_DT_FLOAT32 || !only_output0_used(g, *head))
        return NULL;
    /* the head's output has exactly the absorbed node(s) as consumers */
    if (kiln_node_output_use_count(g, *head, 0) != (al->swish ? 2u : 1u))
        return NULL;
    if (!al->swish && connected_inputs(g, *tail) != al->tail_in)
        return NULL;
    if (!nn_fx_absorbable(g, *tail) || nn_fx_feeds_netoutput(g, *tail) || !only_output0_used(g, *tail) ||
        !both_f32(out_desc(g, *head, 0), out_desc(g, *tail, 0)))
        return NULL;
    if (*sig && (!nn_fx_absorbable(g, *sig) || kiln_node_output_use_count(g, *sig, 0) != 1 ||
                 !both_f32(out_desc(g, *head, 0), out_desc(g, *sig, 0))))
        return NULL;
    return al;
}

/* The session option aicore.fusion: which fusions run. */
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
        else if (len == 12 && strncmp(p, "matmul_scale", len) == 0)
            *mask |= NN_FUSE_MATMUL_SCALE;
        else if (len == 16 && strncmp(p, "matmul_transpose", len) == 0)
            *mask |= NN_FUSE_MATMUL_TRANSPOSE;
        else if (len == 11 && strncmp(p, "conv_affine", len) == 0)
            *mask |= NN_FUSE_CONV_AFFINE;
        else if (len == 10 && strncmp(p, "post_scale", len) == 0)
            *mask |= NN_FUSE_POST_SCALE;
        else
            return kiln_errorf(kiln_pass_error(ctx), KILN_ERR_INVALID,
                               "session option aicore.fusion=%s: unknown fusion '%.*s' (expected "
                               "on, off or a comma list of conv_bn, matmul_bias, activation, "
                               "matmul_scale, matmul_transpose, conv_affine, post_scale)",
                               v, (int)len, p);
        p += len;
        if (*p == ',')
            p++;
    }
    return KILN_OK;
}

/*
 * The session option aicore.conv_backend: "onednn" (default) or "blas".
 * Under "blas" every Conv and ConvTranspose of @p root and its subgraphs gets
 * _kiln_conv_backend = "blas", which the aicore kernel reads when the
 * runtime binds it (nn_conv.c, nn_conv_transpose.c); other engines ignore it.
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
            if (!op_is(g, n, "Conv") && !op_is(g, n, "ConvTranspose"))
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

/* aicore's optimize_original_graph: the Conv backend, then the format
 * selection (nn_layout.c); the fusions are passes. */
kiln_status nn_aicore_optimize_original(void *inst, kiln_pass_ctx *ctx, kiln_graph *root)
{
    (void)inst;
    kiln_status st = conv_backend(ctx, root);
    return st == KILN_OK ? nn_layout_select(ctx, root) : st;
}

/* KILN_OK when the fusion @p which is switched on; KILN_ERR_NOT_FOUND (decline
 * the match) when aicore.fusion leaves it out; an error for a bad value. */
kiln_status nn_fx_enabled(kiln_pass_ctx *ctx, unsigned which)
{
    unsigned mask;
    kiln_status st = fusion_mask(ctx, &mask);
    if (st != KILN_OK)
        return st;
    return (mask & which) ? KILN_OK : KILN_ERR_NOT_FOUND;
}

/* True when the rewriter will take the match (CanFuse on its nodes): only
 * then is the fusion explained (`kiln compile -v`). */
bool nn_fx_will_fuse(const kiln_graph *g, const kiln_match *m)
{
    kiln_node_id nodes[8];
    uint32_t k = kiln_match_node_count(m);
    if (k > 8)
        return false;
    for (uint32_t i = 0; i < k; i++)
        nodes[i] = kiln_match_node_at(m, i);
    char reason[8];
    return kiln_fusion_can_fuse(g, nodes, k, reason, sizeof(reason));
}

/* Copy @p head of @p g into @p repl with its first @p k inputs fed from the
 * replacement's Data nodes 0..k-1; 0 on failure. */
kiln_node_id nn_fx_copy_head(kiln_graph *repl, const kiln_graph *g, kiln_node_id head,
                             uint32_t k)
{
    kiln_node_id n = kiln_graph_copy_node(repl, g, head, NULL);
    if (!n)
        return 0;
    for (uint32_t i = 0; i < k; i++) {
        kiln_node_id d = kiln_fusion_replacement_input(repl, i);
        if (!d || kiln_edge_add(repl, d, 0, n, i) != KILN_OK)
            return 0;
    }
    return n;
}

/* The replacement's NetOutput, reading output 0 of @p n. */
kiln_status nn_fx_finish(kiln_graph *repl, kiln_node_id n)
{
    kiln_node_id out = kiln_graph_add_node(repl, "fused_output", "NetOutput", 1, 0);
    if (!out)
        return KILN_ERR_NOMEM;
    return kiln_edge_add(repl, n, 0, out, 0);
}

/* A new Const [dims] of float32 @p data in @p repl feeding input @p di of @p dst. */
kiln_status nn_fx_const(kiln_graph *repl, kiln_node_id dst, uint32_t di, const char *name,
                        const int64_t *dims, uint32_t rank, const float *data, int64_t numel)
{
    kiln_node_id c = kiln_graph_add_node(repl, name, "Const", 0, 1);
    if (!c)
        return KILN_ERR_NOMEM;
    kiln_tensor_value v = {KILN_DT_FLOAT32, rank, dims, data, (size_t)numel * sizeof(float)};
    kiln_status st = kiln_attrs_set_tensor(kiln_node_attrs_mut(repl, c), "value", &v);
    kiln_tensor_desc *d = kiln_node_output_desc(repl, c, 0);
    if (st == KILN_OK)
        st = kiln_desc_set_dtype(repl, d, KILN_DT_FLOAT32);
    if (st == KILN_OK)
        st = kiln_desc_set_shape(repl, d, (int32_t)rank, dims);
    if (st == KILN_OK && di >= kiln_node_input_count(repl, dst))
        st = kiln_node_set_input_count(repl, dst, di + 1);
    if (st == KILN_OK)
        st = kiln_edge_add(repl, c, 0, dst, di);
    return st;
}

/* ---- ConvBatchNormFusionPass: Conv / ConvTranspose + BatchNormalization ------------ */

/* The folding's operands, read from the graph. */
typedef struct bn_fold {
    kiln_tensor_value w, b, sc, bi, mean, var;
    int64_t nw, M;
    bool has_b, transposed;
    int64_t group;
} bn_fold;

static bool bn_read(const kiln_graph *g, kiln_node_id conv, kiln_node_id bn, bn_fold *f)
{
    int64_t nb = 0, nsc, nbi, nmean, nvar;
    if (cpu_attr_int(g, bn, "training_mode", 0) != 0 ||
        cpu_attr_str(g, conv, "_kiln_fused_activation", NULL))
        return false;
    if (!nn_fx_const_input(g, conv, 1, &f->w, &f->nw) || f->w.rank < 3 ||
        strlen(kiln_node_name_str(g, conv)) > 200) /* room for the new Consts' names */
        return false;
    f->has_b = kiln_node_input_count(g, conv) > 2 && kiln_node_input_peer(g, conv, 2).node;
    /* Conv W [M, C/group, k...]; ConvTranspose W [C, M/group, k...] */
    f->transposed = op_is(g, conv, "ConvTranspose");
    f->group = cpu_attr_int(g, conv, "group", 1);
    if (f->group < 1 || (f->transposed && f->w.dims[0] % f->group != 0))
        return false;
    f->M = f->transposed ? f->w.dims[1] * f->group : f->w.dims[0];
    const int64_t M = f->M;
    if (f->has_b && (!nn_fx_const_input(g, conv, 2, &f->b, &nb) || nb != M))
        return false;
    return nn_fx_const_input(g, bn, 1, &f->sc, &nsc) && nn_fx_const_input(g, bn, 2, &f->bi, &nbi) &&
           nn_fx_const_input(g, bn, 3, &f->mean, &nmean) && nn_fx_const_input(g, bn, 4, &f->var, &nvar) &&
           nsc == M && nbi == M && nmean == M && nvar == M && M > 0;
}

static bool conv_bn_meet(void *inst, const kiln_graph *g, const kiln_match *m)
{
    kiln_node_id conv, bn, sig;
    bn_fold f;
    return fx_common(inst, g, m, &conv, &bn, &sig) && bn_read(g, conv, bn, &f);
}

static kiln_status conv_bn_replace(void *inst, kiln_pass_ctx *ctx, const kiln_graph *g,
                                   const kiln_match *m, kiln_graph *repl)
{
    kiln_node_id conv, bn, sig;
    bn_fold f;
    kiln_status st = nn_fx_enabled(ctx, FUSE_CONV_BN);
    if (st != KILN_OK)
        return st;
    if (!fx_common(inst, g, m, &conv, &bn, &sig) || !bn_read(g, conv, bn, &f))
        return KILN_ERR_NOT_FOUND;
    const int64_t M = f.M, nw = f.nw;
    const double eps = cpu_attr_float(g, bn, "epsilon", 1e-5);
    float *nwv = kiln_alloc((size_t)nw * sizeof(float));
    float *nbv = kiln_alloc((size_t)M * sizeof(float));
    double *sv = kiln_alloc((size_t)M * sizeof(double));
    if (!nwv || !nbv || !sv) {
        kiln_free(nwv);
        kiln_free(nbv);
        kiln_free(sv);
        return KILN_ERR_NOMEM;
    }
    const float *wv = f.w.data, *bv = f.has_b ? f.b.data : NULL;
    const float *scv = f.sc.data, *biv = f.bi.data, *mv = f.mean.data, *vv = f.var.data;
    for (int64_t k = 0; k < M; k++) {
        sv[k] = (double)scv[k] / sqrt((double)vv[k] + eps);
        nbv[k] = (float)(((bv ? (double)bv[k] : 0.0) - (double)mv[k]) * sv[k] + (double)biv[k]);
    }
    if (!f.transposed) {
        const int64_t per = nw / M;
        for (int64_t k = 0; k < M; k++)
            for (int64_t j = 0; j < per; j++)
                nwv[k * per + j] = (float)((double)wv[k * per + j] * sv[k]);
    } else {
        /* row c of W belongs to group c / (C / group); its column j is
         * output channel group_index * Mg + j */
        const int64_t C = f.w.dims[0], Mg = f.w.dims[1], Cg = C / f.group, ks = nw / (C * Mg);
        for (int64_t c = 0; c < C; c++)
            for (int64_t j = 0; j < Mg; j++) {
                const double s = sv[(c / Cg) * Mg + j];
                const int64_t at = (c * Mg + j) * ks;
                for (int64_t k = 0; k < ks; k++)
                    nwv[at + k] = (float)((double)wv[at + k] * s);
            }
    }
    kiln_free(sv);
    if (nn_fx_will_fuse(g, m))
        kiln_pass_explain(ctx, (kiln_graph *)g, bn, "folded by engine aicore into %s %s (conv_bn)",
                          kiln_node_op_str(g, conv), kiln_node_name_str(g, conv));
    /* the Conv reads x from Data 0; W and B are the new Consts (the old ones,
     * boundary inputs 1 and 2, lose this consumer) */
    kiln_node_id n = nn_fx_copy_head(repl, g, conv, 1);
    char wname[256], bname[256];
    snprintf(wname, sizeof(wname), "%s_bn_w", kiln_node_name_str(g, conv));
    snprintf(bname, sizeof(bname), "%s_bn_b", kiln_node_name_str(g, conv));
    const int64_t bdims[1] = {M};
    st = n ? KILN_OK : KILN_ERR_NOMEM;
    if (st == KILN_OK && kiln_node_input_count(repl, n) < 3)
        st = kiln_node_set_input_count(repl, n, 3);
    if (st == KILN_OK)
        st = nn_fx_const(repl, n, 1, wname, f.w.dims, f.w.rank, nwv, nw);
    if (st == KILN_OK)
        st = nn_fx_const(repl, n, 2, bname, bdims, 1, nbv, M);
    kiln_free(nwv);
    kiln_free(nbv);
    if (st == KILN_OK)
        st = nn_fx_finish(repl, n);
    return st;
}

/* ---- MatMulBiasAddFusionPass: MatMul / Gemm + Add(Const bias) -> Gemm ------------------ */

static bool matmul_bias_ok(const kiln_graph *g, kiln_node_id mm, kiln_node_id add)
{
    if (cpu_attr_str(g, mm, "_kiln_fused_activation", NULL))
        return false;
    const kiln_tensor_desc *out = out_desc(g, mm, 0);
    if (kiln_desc_rank(out) != 2 || kiln_desc_dims(out)[1] < 0)
        return false;
    if (op_is(g, mm, "MatMul")) {
        const kiln_tensor_desc *a = in_desc(g, mm, 0), *b = in_desc(g, mm, 1);
        if (!a || !b || kiln_desc_rank(a) != 2 || kiln_desc_rank(b) != 2)
            return false;
    }
    /* the bias: the Add's input that is not the head */
    const uint32_t bi = kiln_node_input_peer(g, add, 0).node == mm ? 1 : 0;
    kiln_tensor_value c;
    int64_t nc;
    if (!nn_fx_const_input(g, add, bi, &c, &nc))
        return false;
    const int64_t N = kiln_desc_dims(out)[1];
    return (c.rank == 1 && c.dims[0] == N) || (c.rank == 2 && c.dims[0] == 1 && c.dims[1] == N);
}

static bool matmul_bias_meet(void *inst, const kiln_graph *g, const kiln_match *m)
{
    kiln_node_id mm, add, sig;
    return fx_common(inst, g, m, &mm, &add, &sig) && matmul_bias_ok(g, mm, add);
}

static kiln_status matmul_bias_replace(void *inst, kiln_pass_ctx *ctx, const kiln_graph *g,
                                       const kiln_match *m, kiln_graph *repl)
{
    kiln_node_id mm, add, sig;
    kiln_status st = nn_fx_enabled(ctx, FUSE_MATMUL_BIAS);
    if (st != KILN_OK)
        return st;
    if (!fx_common(inst, g, m, &mm, &add, &sig) || !matmul_bias_ok(g, mm, add))
        return KILN_ERR_NOT_FOUND;
    if (nn_fx_will_fuse(g, m))
        kiln_pass_explain(ctx, (kiln_graph *)g, add,
                          "fused by engine aicore into %s %s as C (matmul_bias)",
                          kiln_node_op_str(g, mm), kiln_node_name_str(g, mm));
    kiln_node_id n = nn_fx_copy_head(repl, g, mm, 2);
    if (!n)
        return KILN_ERR_NOMEM;
    if (op_is(g, mm, "MatMul"))
        st = kiln_node_set_op(repl, n, "Gemm");
    else /* beta scales only C, which had none */
        st = kiln_attrs_set_float(kiln_node_attrs_mut(repl, n), "beta", 1.0);
    if (st == KILN_OK && kiln_node_input_count(repl, n) < 3)
        st = kiln_node_set_input_count(repl, n, 3);
    kiln_node_id bias = kiln_fusion_replacement_input(repl, 2);
    if (st == KILN_OK)
        st = bias ? kiln_edge_add(repl, bias, 0, n, 2) : KILN_ERR_INVALID;
    if (st == KILN_OK)
        st = nn_fx_finish(repl, n);
    return st;
}

/* ---- the activation fusion: Conv / ConvTranspose / Gemm + activation ------------------- */

/* The fused activation of the match: kind, alpha, beta; false when it cannot fuse. */
static bool act_read(const kiln_graph *g, const fx_alt *al, kiln_node_id head, kiln_node_id act,
                     const char **kind, float *alpha, float *beta)
{
    if (cpu_attr_str(g, head, "_kiln_fused_activation", NULL))
        return false;
    *alpha = *beta = 0.0f;
    if (al->swish) {
        *kind = "Swish";
        return kiln_node_input_count(g, act) == 2;
    }
    *kind = al->tail;
    if (strcmp(*kind, "LeakyRelu") == 0) {
        *alpha = (float)cpu_attr_float(g, act, "alpha", 0.01);
    } else if (strcmp(*kind, "HardSigmoid") == 0) {
        *alpha = (float)cpu_attr_float(g, act, "alpha", 0.2);
        *beta = (float)cpu_attr_float(g, act, "beta", 0.5);
    } else if (strcmp(*kind, "Clip") == 0) {
        *alpha = (float)cpu_attr_float(g, act, "min", -FLT_MAX);
        *beta = (float)cpu_attr_float(g, act, "max", FLT_MAX);
        if (!clip_bound(g, act, 1, alpha) || !clip_bound(g, act, 2, beta))
            return false;
    }
    return kiln_node_output_count(g, act) == 1;
}

static bool activation_meet(void *inst, const kiln_graph *g, const kiln_match *m)
{
    kiln_node_id head, act, sig;
    const char *kind;
    float al, be;
    const fx_alt *a = fx_common(inst, g, m, &head, &act, &sig);
    return a && act_read(g, a, head, act, &kind, &al, &be);
}

static kiln_status activation_replace(void *inst, kiln_pass_ctx *ctx, const kiln_graph *g,
                                      const kiln_match *m, kiln_graph *repl)
{
    kiln_node_id head, act, sig;
    const char *kind;
    float alpha, beta;
    kiln_status st = nn_fx_enabled(ctx, FUSE_ACTIVATION);
    if (st != KILN_OK)
        return st;
    const fx_alt *al = fx_common(inst, g, m, &head, &act, &sig);
    if (!al || !act_read(g, al, head, act, &kind, &alpha, &beta))
        return KILN_ERR_NOT_FOUND;
    if (nn_fx_will_fuse(g, m))
        kiln_pass_explain(ctx, (kiln_graph *)g, act,
                          "fused by engine aicore into %s %s as its activation %s",
                          kiln_node_op_str(g, head), kiln_node_name_str(g, head), kind);
    kiln_node_id n = nn_fx_copy_head(repl, g, head, al->head_in);
    if (!n)
        return KILN_ERR_NOMEM;
    kiln_attrs *at = kiln_node_attrs_mut(repl, n);
    st = at ? kiln_attrs_set_string(at, "_kiln_fused_activation", kind) : KILN_ERR_NOMEM;
    if (st == KILN_OK && (alpha != 0.0f || strcmp(kind, "Clip") == 0))
        st = kiln_attrs_set_float(at, "_kiln_fused_alpha", alpha);
    if (st == KILN_OK && (beta != 0.0f || strcmp(kind, "Clip") == 0))
        st = kiln_attrs_set_float(at, "_kiln_fused_beta", beta);
    if (st == KILN_OK)
        st = nn_fx_finish(repl, n);
    return st;
}

/* ---- registration ------------------------------------------------------------------- */

kiln_status nn_register_fusion_passes(kiln_registrar *r, kiln_error *err)
{
    (void)err;
    static const kiln_fusion_pass_desc passes[] = {
        {
            .struct_size = sizeof(kiln_fusion_pass_desc),
            .name = "ConvBatchNormFusionPass",
            .summary = "aicore: fold an inference BatchNormalization into the Conv / "
                       "ConvTranspose before it (new Const W and B)",
            .create = conv_bn_create,
            .destroy = fx_destroy,
            .kind = KILN_FUSION_PATTERN,
            .stage = KILN_FUSION_STAGE_BUILTIN,
            .patterns = fx_patterns,
            .meet_requirements = conv_bn_meet,
            .replacement = conv_bn_replace,
        },
        {
            .struct_size = sizeof(kiln_fusion_pass_desc),
            .name = "MatMulBiasAddFusionPass",
            .summary = "aicore: MatMul (2-D) or Gemm + Add of a Const [N] bias -> Gemm with C",
            .create = matmul_bias_create,
            .destroy = fx_destroy,
            .kind = KILN_FUSION_PATTERN,
            .stage = KILN_FUSION_STAGE_BUILTIN,
            .patterns = fx_patterns,
            .meet_requirements = matmul_bias_meet,
            .replacement = matmul_bias_replace,
        },
        {
            .struct_size = sizeof(kiln_fusion_pass_desc),
            .name = "PostActivationFusionPass",
            .summary = "aicore: Conv / ConvTranspose / Gemm + Relu, LeakyRelu, Clip, HardSigmoid, "
                       "HardSwish, Sigmoid or x*Sigmoid(x) -> _kiln_fused_activation",
            .create = activation_create,
            .destroy = fx_destroy,
            .kind = KILN_FUSION_PATTERN,
            .stage = KILN_FUSION_STAGE_BUILTIN,
            .patterns = fx_patterns,
            .meet_requirements = activation_meet,
            .replacement = activation_replace,
        },
    };
    kiln_status st = KILN_OK;
    for (size_t i = 0; i < sizeof(passes) / sizeof(passes[0]) && st == KILN_OK; i++)
        st = kiln_register_fusion_pass(r, &passes[i]);
    if (st == KILN_OK)
        st = nn_register_matmul_fusion_passes(r, err);
    if (st == KILN_OK)
        st = nn_register_affine_fusion_passes(r, err);
    return st;
}

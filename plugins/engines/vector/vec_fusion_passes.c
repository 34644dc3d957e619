/*
 * vec_fusion_passes.c - the vector engine's built-in pattern fusion passes
 * (stage builtin: run by RunBuiltinFusionPasses at OptimizeOriginalGraph, in
 * name order, before the aicore engine's PostActivationFusionPass):
 *
 *   HardSwishFusionPass  HardSwish written out, x * Clip(x + 3, 0, 6) / 6
 *                (Add(x, 3) -> Clip(0, 6) -> Mul(x, .) -> Div(., 6), or Mul
 *                by 1/6 in place of the Div; Clip bounds as attributes or
 *                scalar Const inputs; either operand order of Add and Mul)
 *                -> one HardSwish node (vector kernel, or fused into the
 *                Conv before it by the aicore engine).
 *   QuickGeluFusionPass  x * Sigmoid(x * alpha) (the Muls in either order,
 *                alpha a float32 scalar Const) -> QuickGelu (ONNX Runtime's
 *                com.microsoft op; CLIP's alpha 1.702).
 *   GeluFusionPass  x * (Erf(x / sqrt 2) + 1) * 0.5 spelled out (Div by
 *                sqrt 2 or Mul by 1 / sqrt 2; Add and Mul operands in either
 *                order) -> one Gelu node (vector kernel, approximate none).
 *   LayerNormFusionPass  LayerNorm written out over the last axis:
 *                ReduceMean(x) -> Sub(x, mean) -> Pow(d, 2) -> ReduceMean ->
 *                Add(var, eps) -> Sqrt -> Div(d, std) -> Mul(., gamma) ->
 *                Add(., beta) -> LayerNormalization(x, gamma, beta; axis,
 *                epsilon) (vector kernel, basic_reduce.c).
 *
 * The constants (3, 0, 6, 1/6, 2, eps, gamma, beta) are Data pattern nodes
 * (shared Consts stay outside the match) whose values meet_requirements
 * checks.  Every absorbed node is float32, has no control edges, is not
 * `_cannot_be_deleted`, carries no `_kiln_engine` pin to another engine, and
 * only the last one may have a consumer outside the match (never the
 * NetOutput: the model's output keeps its producer's name).
 */
#include "basic_ops.h"
#include "vec_fusion.h"

#include "kiln/kiln_plugin.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static bool op_is(const kiln_graph *g, kiln_node_id n, const char *op)
{
    return strcmp(kiln_node_op_str(g, n), op) == 0;
}

static const kiln_tensor_desc *out_desc(const kiln_graph *g, kiln_node_id n, uint32_t o)
{
    return kiln_node_output_desc((kiln_graph *)g, n, o);
}

/* The one-element float32 Const value of anchor @p a. */
static bool scalar_at(const kiln_graph *g, kiln_anchor a, float *v)
{
    if (!a.node || !(op_is(g, a.node, "Const") || op_is(g, a.node, "Constant")))
        return false;
    kiln_tensor_value t;
    if (!kiln_attrs_get_tensor(kiln_node_attrs(g, a.node), "value", &t) ||
        t.dtype != KILN_DT_FLOAT32 || t.nbytes != sizeof(float))
        return false;
    *v = ((const float *)t.data)[0];
    return true;
}

static bool near(float v, double want)
{
    return fabs((double)v - want) <= 1e-6 * fabs(want) + 1e-7;
}

/* A node a vector fusion may absorb (see the header). */
static bool absorbable(const kiln_graph *g, kiln_node_id n, bool last)
{
    bool keep = false;
    if (kiln_attrs_get_bool(kiln_node_attrs(g, n), "_cannot_be_deleted", &keep) && keep)
        return false;
    if (kiln_node_ctrl_in_count(g, n) || kiln_node_ctrl_out_count(g, n))
        return false;
    const char *pin = NULL;
    if (kiln_attrs_get_string(kiln_node_attrs(g, n), "_kiln_engine", &pin) && pin &&
        strcmp(pin, "vector") != 0)
        return false;
    if (kiln_node_output_count(g, n) != 1 || kiln_desc_dtype(out_desc(g, n, 0)) != KILN_DT_FLOAT32)
        return false;
    for (uint32_t u = kiln_use_first(g, n, 0); last && u; u = kiln_use_next(g, u))
        if (op_is(g, kiln_use_dst(g, u).node, "NetOutput"))
            return false;
    return true;
}

static bool all_absorbable(const kiln_graph *g, const kiln_match *m, kiln_node_id last)
{
    uint32_t k = kiln_match_node_count(m);
    for (uint32_t i = 0; i < k; i++) {
        kiln_node_id n = kiln_match_node_at(m, i);
        if (!absorbable(g, n, n == last))
            return false;
    }
    return true;
}

/* The replacement: one node @p op copied from @p tail (its name, output
 * descriptor), inputs from the replacement's Data nodes @p ins. */
static kiln_status one_node(const kiln_graph *g, kiln_node_id tail, kiln_graph *repl,
                            const char *op, const uint32_t *ins, uint32_t nin, kiln_node_id *out)
{
    kiln_node_id n = kiln_graph_copy_node(repl, g, tail, NULL);
    if (!n)
        return KILN_ERR_NOMEM;
    kiln_status st = kiln_node_set_op(repl, n, op);
    if (st == KILN_OK)
        st = kiln_node_set_input_count(repl, n, nin);
    for (uint32_t i = 0; i < nin && st == KILN_OK; i++) {
        kiln_node_id d = kiln_fusion_replacement_input(repl, ins[i]);
        st = d ? kiln_edge_add(repl, d, 0, n, i) : KILN_ERR_INVALID;
    }
    kiln_node_id no =
        st == KILN_OK ? kiln_graph_add_node(repl, "fused_output", "NetOutput", 1, 0) : 0;
    if (st == KILN_OK && !no)
        st = KILN_ERR_NOMEM;
    if (st == KILN_OK)
        st = kiln_edge_add(repl, n, 0, no, 0);
    *out = n;
    return st;
}

/* ---- HardSwishFusionPass ------------------------------------------------------ */

/* Alternatives: Clip with 1 or 3 inputs x (Div by 6, Mul by 1/6).  Pattern
 * nodes of each, in order: x, c3, add, [lo, hi,] clip, mul, c6, tail. */
typedef struct hs_alt {
    int32_t x, c3, add, lo, hi, clip, mul, c6, tail;
    bool clip3, div;
} hs_alt;

typedef struct hs_pass {
    hs_alt alt[4];
} hs_pass;

static kiln_status hs_create(const kiln_options *o, kiln_error *err, void **inst)
{
    (void)o;
    hs_pass *p = kiln_alloc(sizeof(hs_pass));
    if (!p)
        return kiln_errorf(err, KILN_ERR_NOMEM, "HardSwishFusionPass: out of memory");
    memset(p, 0, sizeof(*p));
    *inst = p;
    return KILN_OK;
}

static void pass_destroy(void *inst) { kiln_free(inst); }

static kiln_status hs_patterns(void *inst, kiln_pattern *pt, kiln_error *err)
{
    hs_pass *p = inst;
    kiln_status st = KILN_OK;
    for (int a = 0; a < 4 && st == KILN_OK; a++) {
        hs_alt *h = &p->alt[a];
        h->clip3 = a & 1;
        h->div = !(a & 2);
        if (a > 0)
            st = kiln_pattern_next(pt);
        if (st != KILN_OK)
            break;
        h->x = kiln_pattern_node(pt, "x", "Data");
        h->c3 = kiln_pattern_node(pt, "three", "Data");
        h->add = kiln_pattern_node(pt, "add", "Add");
        h->lo = h->clip3 ? kiln_pattern_node(pt, "lo", "Data") : 0;
        h->hi = h->clip3 ? kiln_pattern_node(pt, "hi", "Data") : 0;
        h->clip = kiln_pattern_node(pt, "clip", "Clip");
        h->mul = kiln_pattern_node(pt, "mul", "Mul");
        h->c6 = kiln_pattern_node(pt, "six", "Data");
        h->tail = kiln_pattern_node(pt, "tail", h->div ? "Div" : "Mul");
        if (h->x < 0 || h->c3 < 0 || h->add < 0 || h->lo < 0 || h->hi < 0 || h->clip < 0 ||
            h->mul < 0 || h->c6 < 0 || h->tail < 0)
            st = KILN_ERR_NOMEM;
        if (st == KILN_OK)
            st = kiln_pattern_edge(pt, h->x, 0, h->add, 0);
        if (st == KILN_OK)
            st = kiln_pattern_edge(pt, h->c3, 0, h->add, 1);
        if (st == KILN_OK)
            st = kiln_pattern_edge(pt, h->add, 0, h->clip, 0);
        if (st == KILN_OK && h->clip3)
            st = kiln_pattern_edge(pt, h->lo, 0, h->clip, 1);
        if (st == KILN_OK && h->clip3)
            st = kiln_pattern_edge(pt, h->hi, 0, h->clip, 2);
        if (st == KILN_OK)
            st = kiln_pattern_edge(pt, h->x, 0, h->mul, 0);
        if (st == KILN_OK)
            st = kiln_pattern_edge(pt, h->clip, 0, h->mul, 1);
        if (st == KILN_OK)
            st = kiln_pattern_edge(pt, h->mul, 0, h->tail, 0);
        if (st == KILN_OK)
            st = kiln_pattern_edge(pt, h->c6, 0, h->tail, 1);
        if (st == KILN_OK)
            st = kiln_pattern_set_flags(pt, KILN_PATTERN_COMMUTATIVE);
        if (st == KILN_OK)
            st = kiln_pattern_output(pt, h->tail, 0);
    }
    if (st != KILN_OK)
        return kiln_errorf(err, st, "HardSwishFusionPass: building its patterns failed");
    return KILN_OK;
}

/* The constant input of binary @p n that is not @p other's output. */
static kiln_anchor other_input(const kiln_graph *g, kiln_node_id n, kiln_node_id other)
{
    uint32_t i = kiln_node_input_peer(g, n, 0).node == other ? 1 : 0;
    return kiln_node_input_peer(g, n, i);
}

static const hs_alt *hs_check(const hs_pass *p, const kiln_graph *g, const kiln_match *m,
                              kiln_node_id *tail)
{
    uint32_t ai = kiln_match_pattern_index(m);
    if (ai >= 4)
        return NULL;
    const hs_alt *h = &p->alt[ai];
    kiln_node_id add = kiln_match_node(m, h->add), clip = kiln_match_node(m, h->clip),
                 mul = kiln_match_node(m, h->mul);
    *tail = kiln_match_node(m, h->tail);
    if (!add || !clip || !mul || !*tail || kiln_node_output_use_count(g, add, 0) != 1 ||
        kiln_node_output_use_count(g, clip, 0) != 1 || kiln_node_output_use_count(g, mul, 0) != 1)
        return NULL;
    /* x is the Mul's other input (the Data binding makes it the Add's too) */
    kiln_anchor x = other_input(g, mul, clip);
    if (!x.node || kiln_desc_dtype(out_desc(g, x.node, x.index)) != KILN_DT_FLOAT32)
        return NULL;
    float c3, lo = -1, hi = -1, c6;
    if (!scalar_at(g, other_input(g, add, x.node), &c3) || !near(c3, 3.0) ||
        !scalar_at(g, other_input(g, *tail, mul), &c6) || !near(c6, h->div ? 6.0 : 1.0 / 6.0))
        return NULL;
    if (h->clip3) {
        if (!scalar_at(g, kiln_node_input_peer(g, clip, 1), &lo) ||
            !scalar_at(g, kiln_node_input_peer(g, clip, 2), &hi))
            return NULL;
    } else {
        if (kiln_node_input_count(g, clip) > 1 &&
            (kiln_node_input_peer(g, clip, 1).node ||
             (kiln_node_input_count(g, clip) > 2 && kiln_node_input_peer(g, clip, 2).node)))
            return NULL;
        lo = (float)cpu_attr_float(g, clip, "min", -1.0);
        hi = (float)cpu_attr_float(g, clip, "max", -1.0);
    }
    /* the tail's divisor is its input 1 (Div is not commutative) */
    if (h->div && kiln_node_input_peer(g, *tail, 0).node != mul)
        return NULL;
    if (lo != 0.0f || hi != 6.0f || !all_absorbable(g, m, *tail))
        return NULL;
    const kiln_tensor_desc *xd = out_desc(g, x.node, x.index), *td = out_desc(g, *tail, 0);
    /* the output has x's shape (the constants are scalars) */
    if (kiln_desc_rank(xd) != kiln_desc_rank(td))
        return NULL;
    return h;
}

static bool hs_meet(void *inst, const kiln_graph *g, const kiln_match *m)
{
    kiln_node_id tail;
    return hs_check(inst, g, m, &tail) != NULL;
}

static kiln_status hs_replace(void *inst, kiln_pass_ctx *ctx, const kiln_graph *g,
                              const kiln_match *m, kiln_graph *repl)
{
    (void)ctx;
    kiln_node_id tail, n;
    if (!hs_check(inst, g, m, &tail))
        return KILN_ERR_NOT_FOUND;
    const uint32_t ins[1] = {0}; /* Data x is the first pattern node */
    return one_node(g, tail, repl, "HardSwish", ins, 1, &n);
}

/* ---- LayerNormFusionPass ---------------------------------------------------------- */

enum {
    LN_X,
    LN_RM1,
    LN_SUB,
    LN_TWO,
    LN_POW,
    LN_RM2,
    LN_EPS,
    LN_ADD,
    LN_SQRT,
    LN_DIV,
    LN_GAMMA,
    LN_MUL,
    LN_BETA,
    LN_TAIL,
    LN_COUNT
};

typedef struct ln_pass {
    int32_t idx[LN_COUNT];
} ln_pass;

static kiln_status ln_create(const kiln_options *o, kiln_error *err, void **inst)
{
    (void)o;
    ln_pass *p = kiln_alloc(sizeof(ln_pass));
    if (!p)
        return kiln_errorf(err, KILN_ERR_NOMEM, "LayerNormFusionPass: out of memory");
    memset(p, 0, sizeof(*p));
    *inst = p;
    return KILN_OK;
}

static kiln_status ln_patterns(void *inst, kiln_pattern *pt, kiln_error *err)
{
    ln_pass *p = inst;
    static const struct {
        const char *name, *op;
    } nodes[LN_COUNT] = {
        [LN_X] = {"x", "Data"},         [LN_RM1] = {"mean", "ReduceMean"},
        [LN_SUB] = {"diff", "Sub"},     [LN_TWO] = {"two", "Data"},
        [LN_POW] = {"square", "Pow"},   [LN_RM2] = {"var", "ReduceMean"},
        [LN_EPS] = {"eps", "Data"},     [LN_ADD] = {"var_eps", "Add"},
        [LN_SQRT] = {"std", "Sqrt"},    [LN_DIV] = {"norm", "Div"},
        [LN_GAMMA] = {"gamma", "Data"}, [LN_MUL] = {"scaled", "Mul"},
        [LN_BETA] = {"beta", "Data"},   [LN_TAIL] = {"shifted", "Add"},
    };
    static const int edges[][3] = {
        {LN_X, LN_RM1, 0},     {LN_X, LN_SUB, 0},    {LN_RM1, LN_SUB, 1},   {LN_SUB, LN_POW, 0},
        {LN_TWO, LN_POW, 1},   {LN_POW, LN_RM2, 0},  {LN_RM2, LN_ADD, 0},   {LN_EPS, LN_ADD, 1},
        {LN_ADD, LN_SQRT, 0},  {LN_SUB, LN_DIV, 0},  {LN_SQRT, LN_DIV, 1},  {LN_DIV, LN_MUL, 0},
        {LN_GAMMA, LN_MUL, 1}, {LN_MUL, LN_TAIL, 0}, {LN_BETA, LN_TAIL, 1},
    };
    kiln_status st = KILN_OK;
    for (int i = 0; i < LN_COUNT && st == KILN_OK; i++)
        if ((p->idx[i] = kiln_pattern_node(pt, nodes[i].name, nodes[i].op)) < 0)
            st = KILN_ERR_NOMEM;
    for (size_t e = 0; e < sizeof(edges) / sizeof(edges[0]) && st == KILN_OK; e++)
        st = kiln_pattern_edge(pt, p->idx[edges[e][0]], 0, p->idx[edges[e][1]],
                               (uint32_t)edges[e][2]);
    if (st == KILN_OK)
        st = kiln_pattern_set_flags(pt, KILN_PATTERN_COMMUTATIVE);
    if (st == KILN_OK)
        st = kiln_pattern_output(pt, p->idx[LN_TAIL], 0);
    if (st != KILN_OK)
        return kiln_errorf(err, st, "LayerNormFusionPass: building its pattern failed");
    return KILN_OK;
}

/* A ReduceMean over the last axis of a rank-@p rank input, keepdims. */
static bool mean_last(const kiln_graph *g, kiln_node_id n, int32_t rank)
{
    const int64_t *ax = NULL;
    uint32_t na = 0;
    if (kiln_node_input_count(g, n) > 1 && kiln_node_input_peer(g, n, 1).node)
        return false; /* opset 18 axes input: not described */
    if (!cpu_attr_ints(g, n, "axes", &ax, &na) || na != 1 || cpu_attr_int(g, n, "keepdims", 1) != 1)
        return false;
    return ax[0] == -1 || ax[0] == rank - 1;
}

/* A float32 Const of @p d elements (rank 1, or all leading dims 1) at @p a. */
static bool vector_at(const kiln_graph *g, kiln_anchor a, int64_t d)
{
    if (!a.node || !(op_is(g, a.node, "Const") || op_is(g, a.node, "Constant")))
        return false;
    kiln_tensor_value t;
    if (!kiln_attrs_get_tensor(kiln_node_attrs(g, a.node), "value", &t) ||
        t.dtype != KILN_DT_FLOAT32 || t.rank < 1 || t.dims[t.rank - 1] != d ||
        t.nbytes != (size_t)d * sizeof(float))
        return false;
    return true;
}

static bool ln_check(const ln_pass *p, const kiln_graph *g, const kiln_match *m, float *eps)
{
    kiln_node_id n[LN_COUNT];
    for (int i = 0; i < LN_COUNT; i++) {
        n[i] = kiln_match_node(m, p->idx[i]);
        if (!n[i] && i != LN_X && i != LN_TWO && i != LN_EPS && i != LN_GAMMA && i != LN_BETA)
            return false;
    }
    /* the commutative flag also lets Sub, Div and Pow keep their order: they are not */
    if (kiln_node_input_peer(g, n[LN_SUB], 1).node != n[LN_RM1] ||
        kiln_node_input_peer(g, n[LN_DIV], 0).node != n[LN_SUB] ||
        kiln_node_input_peer(g, n[LN_DIV], 1).node != n[LN_SQRT] ||
        kiln_node_input_peer(g, n[LN_POW], 0).node != n[LN_SUB])
        return false;
    kiln_anchor x = kiln_node_input_peer(g, n[LN_SUB], 0);
    const kiln_tensor_desc *xd = out_desc(g, x.node, x.index);
    const int32_t rank = kiln_desc_rank(xd);
    if (kiln_desc_dtype(xd) != KILN_DT_FLOAT32 || rank < 1 || kiln_desc_dims(xd)[rank - 1] <= 0)
        return false;
    const int64_t d = kiln_desc_dims(xd)[rank - 1];
    float two;
    if (!mean_last(g, n[LN_RM1], rank) || !mean_last(g, n[LN_RM2], rank) ||
        !scalar_at(g, kiln_node_input_peer(g, n[LN_POW], 1), &two) || two != 2.0f)
        return false;
    kiln_anchor e = other_input(g, n[LN_ADD], n[LN_RM2]);
    if (!scalar_at(g, e, eps) || !(*eps >= 0.0f))
        return false;
    if (!vector_at(g, other_input(g, n[LN_MUL], n[LN_DIV]), d) ||
        !vector_at(g, other_input(g, n[LN_TAIL], n[LN_MUL]), d))
        return false;
    const kiln_tensor_desc *td = out_desc(g, n[LN_TAIL], 0);
    if (kiln_desc_rank(td) != rank)
        return false;
    return all_absorbable(g, m, n[LN_TAIL]);
}

static bool ln_meet(void *inst, const kiln_graph *g, const kiln_match *m)
{
    float eps;
    return ln_check(inst, g, m, &eps);
}

static kiln_status ln_replace(void *inst, kiln_pass_ctx *ctx, const kiln_graph *g,
                              const kiln_match *m, kiln_graph *repl)
{
    (void)ctx;
    const ln_pass *p = inst;
    float eps;
    if (!ln_check(p, g, m, &eps))
        return KILN_ERR_NOT_FOUND;
    /* boundary inputs in pattern order: x, two, eps, gamma, beta */
    const uint32_t ins[3] = {0, 3, 4};
    kiln_node_id n;
    kiln_status st =
        one_node(g, kiln_match_node(m, p->idx[LN_TAIL]), repl, "LayerNormalization", ins, 3, &n);
    kiln_attrs *at = st == KILN_OK ? kiln_node_attrs_mut(repl, n) : NULL;
    if (st == KILN_OK && !at)
        st = KILN_ERR_NOMEM;
    if (st == KILN_OK)
        st = kiln_attrs_set_int(at, "axis", -1);
    if (st == KILN_OK)
        st = kiln_attrs_set_float(at, "epsilon", (double)eps);
    return st;
}

/* ---- GeluFusionPass ------------------------------------------------------------------ */

/* Alternatives: x / sqrt(2) (Div) or x * (1 / sqrt(2)) (Mul).  Pattern nodes:
 * x, c, scale, erf, one, add, mul, half, tail. */
typedef struct gelu_alt {
    int32_t x, c, scale, erf, one, add, mul, half, tail;
    bool div;
} gelu_alt;

typedef struct gelu_pass {
    gelu_alt alt[2];
} gelu_pass;

static kiln_status gelu_create(const kiln_options *o, kiln_error *err, void **inst)
{
    (void)o;
    gelu_pass *p = kiln_alloc(sizeof(gelu_pass));
    if (!p)
        return kiln_errorf(err, KILN_ERR_NOMEM, "GeluFusionPass: out of memory");
    memset(p, 0, sizeof(*p));
    *inst = p;
    return KILN_OK;
}

static kiln_status gelu_patterns(void *inst, kiln_pattern *pt, kiln_error *err)
{
    gelu_pass *p = inst;
    kiln_status st = KILN_OK;
    for (int a = 0; a < 2 && st == KILN_OK; a++) {
        gelu_alt *h = &p->alt[a];
        h->div = a == 0;
        if (a > 0 && (st = kiln_pattern_next(pt)) != KILN_OK)
            break;
        h->x = kiln_pattern_node(pt, "x", "Data");
        h->c = kiln_pattern_node(pt, "sqrt2", "Data");
        h->scale = kiln_pattern_node(pt, "scale", h->div ? "Div" : "Mul");
        h->erf = kiln_pattern_node(pt, "erf", "Erf");
        h->one = kiln_pattern_node(pt, "one", "Data");
        h->add = kiln_pattern_node(pt, "add", "Add");
        h->mul = kiln_pattern_node(pt, "mul", "Mul");
        h->half = kiln_pattern_node(pt, "half", "Data");
        h->tail = kiln_pattern_node(pt, "tail", "Mul");
        if (h->x < 0 || h->c < 0 || h->scale < 0 || h->erf < 0 || h->one < 0 || h->add < 0 ||
            h->mul < 0 || h->half < 0 || h->tail < 0)
            st = KILN_ERR_NOMEM;
        const int32_t e[][3] = {{h->x, h->scale, 0}, {h->c, h->scale, 1},  {h->scale, h->erf, 0},
                                {h->erf, h->add, 0}, {h->one, h->add, 1},  {h->x, h->mul, 0},
                                {h->add, h->mul, 1}, {h->mul, h->tail, 0}, {h->half, h->tail, 1}};
        for (size_t k = 0; k < sizeof(e) / sizeof(e[0]) && st == KILN_OK; k++)
            st = kiln_pattern_edge(pt, e[k][0], 0, e[k][1], (uint32_t)e[k][2]);
        if (st == KILN_OK)
            st = kiln_pattern_set_flags(pt, KILN_PATTERN_COMMUTATIVE);
        if (st == KILN_OK)
            st = kiln_pattern_output(pt, h->tail, 0);
    }
    if (st != KILN_OK)
        return kiln_errorf(err, st, "GeluFusionPass: building its patterns failed");
    return KILN_OK;
}

static bool gelu_check(const gelu_pass *p, const kiln_graph *g, const kiln_match *m,
                       kiln_node_id *tail)
{
    uint32_t ai = kiln_match_pattern_index(m);
    if (ai >= 2)
        return false;
    const gelu_alt *h = &p->alt[ai];
    kiln_node_id scale = kiln_match_node(m, h->scale), erf = kiln_match_node(m, h->erf),
                 add = kiln_match_node(m, h->add), mul = kiln_match_node(m, h->mul);
    *tail = kiln_match_node(m, h->tail);
    if (!scale || !erf || !add || !mul || !*tail)
        return false;
    /* x: the Mul's other input; the scaling node reads x (a Div as its input 0) */
    kiln_anchor x = other_input(g, mul, add);
    if (!x.node || kiln_desc_dtype(out_desc(g, x.node, x.index)) != KILN_DT_FLOAT32)
        return false;
    kiln_anchor s0 = kiln_node_input_peer(g, scale, 0);
    if (h->div && (s0.node != x.node || s0.index != x.index))
        return false;
    float c, one, half;
    if (!scalar_at(g, other_input(g, scale, x.node), &c) ||
        !near(c, h->div ? 1.4142135623730951 : 0.7071067811865476) ||
        !scalar_at(g, other_input(g, add, erf), &one) || one != 1.0f ||
        !scalar_at(g, other_input(g, *tail, mul), &half) || half != 0.5f)
        return false;
    if (kiln_desc_rank(out_desc(g, x.node, x.index)) != kiln_desc_rank(out_desc(g, *tail, 0)))
        return false;
    return all_absorbable(g, m, *tail);
}

static bool gelu_meet(void *inst, const kiln_graph *g, const kiln_match *m)
{
    kiln_node_id tail;
    return gelu_check(inst, g, m, &tail);
}

static kiln_status gelu_replace(void *inst, kiln_pass_ctx *ctx, const kiln_graph *g,
                                const kiln_match *m, kiln_graph *repl)
{
    (void)ctx;
    kiln_node_id tail, n;
    if (!gelu_check(inst, g, m, &tail))
        return KILN_ERR_NOT_FOUND;
    const uint32_t ins[1] = {0}; /* Data x is the first pattern node */
    return one_node(g, tail, repl, "Gelu", ins, 1, &n);
}

/* ---- QuickGeluFusionPass ---------------------------------------------------------------- */

/* x * Sigmoid(x * alpha), both Muls commutative.  Pattern nodes: x, a, m1, sig,
 * tail (the one Data x binds both reads of x to one tensor). */
static kiln_status qgelu_patterns(void *inst, kiln_pattern *pt, kiln_error *err)
{
    (void)inst;
    int32_t x = kiln_pattern_node(pt, "x", "Data"), a = kiln_pattern_node(pt, "alpha", "Data");
    int32_t m1 = kiln_pattern_node(pt, "scale", "Mul"), sg = kiln_pattern_node(pt, "sig", "Sigmoid");
    int32_t tail = kiln_pattern_node(pt, "tail", "Mul");
    kiln_status st = x < 0 || a < 0 || m1 < 0 || sg < 0 || tail < 0 ? KILN_ERR_NOMEM : KILN_OK;
    const int32_t e[][3] = {{x, m1, 0}, {a, m1, 1}, {m1, sg, 0}, {x, tail, 0}, {sg, tail, 1}};
    for (size_t k = 0; k < sizeof(e) / sizeof(e[0]) && st == KILN_OK; k++)
        st = kiln_pattern_edge(pt, e[k][0], 0, e[k][1], (uint32_t)e[k][2]);
    if (st == KILN_OK)
        st = kiln_pattern_set_flags(pt, KILN_PATTERN_COMMUTATIVE);
    if (st == KILN_OK)
        st = kiln_pattern_output(pt, tail, 0);
    if (st != KILN_OK)
        return kiln_errorf(err, st, "QuickGeluFusionPass: building its patterns failed");
    return KILN_OK;
}

/* The match's alpha (input 1, a float32 scalar Const) and tail (pattern node 4). */
static bool qgelu_check(const kiln_graph *g, const kiln_match *m, float *alpha,
                        kiln_node_id *tail)
{
    *tail = kiln_match_node(m, 4);
    kiln_anchor x = kiln_match_input(m, 0);
    if (!*tail || !x.node || kiln_desc_dtype(out_desc(g, x.node, x.index)) != KILN_DT_FLOAT32 ||
        !scalar_at(g, kiln_match_input(m, 1), alpha))
        return false;
    if (kiln_desc_rank(out_desc(g, x.node, x.index)) != kiln_desc_rank(out_desc(g, *tail, 0)))
        return false;
    return all_absorbable(g, m, *tail);
}

static bool qgelu_meet(void *inst, const kiln_graph *g, const kiln_match *m)
{
    (void)inst;
    float alpha;
    kiln_node_id tail;
    return qgelu_check(g, m, &alpha, &tail);
}

static kiln_status qgelu_replace(void *inst, kiln_pass_ctx *ctx, const kiln_graph *g,
                                 const kiln_match *m, kiln_graph *repl)
{
    (void)inst;
    (void)ctx;
    float alpha;
    kiln_node_id tail, n;
    if (!qgelu_check(g, m, &alpha, &tail))
        return KILN_ERR_NOT_FOUND;
    const uint32_t ins[1] = {0};
    kiln_status st = one_node(g, tail, repl, "QuickGelu", ins, 1, &n);
    if (st == KILN_OK)
        st = kiln_attrs_set_float(kiln_node_attrs_mut(repl, n), "alpha", (double)alpha);
    return st;
}

kiln_status vec_register_fusion_passes(kiln_registrar *r, kiln_error *err)
{
    (void)err;
    static const kiln_fusion_pass_desc passes[] = {
        {
            .struct_size = sizeof(kiln_fusion_pass_desc),
            .name = "GeluFusionPass",
            .summary = "vector: x * (Erf(x / sqrt 2) + 1) * 0.5 (Div/Erf/Add/Mul/Mul) -> Gelu",
            .create = gelu_create,
            .destroy = pass_destroy,
            .kind = KILN_FUSION_PATTERN,
            .stage = KILN_FUSION_STAGE_BUILTIN,
            .patterns = gelu_patterns,
            .meet_requirements = gelu_meet,
            .replacement = gelu_replace,
        },
        {
            .struct_size = sizeof(kiln_fusion_pass_desc),
            .name = "QuickGeluFusionPass",
            .summary = "vector: x * Sigmoid(x * alpha) (Mul/Sigmoid/Mul) -> QuickGelu",
            .kind = KILN_FUSION_PATTERN,
            .stage = KILN_FUSION_STAGE_BUILTIN,
            .patterns = qgelu_patterns,
            .meet_requirements = qgelu_meet,
            .replacement = qgelu_replace,
        },
        {
            .struct_size = sizeof(kiln_fusion_pass_desc),
            .name = "HardSwishFusionPass",
            .summary = "vector: x * Clip(x + 3, 0, 6) / 6 (Add/Clip/Mul/Div) -> HardSwish",
            .create = hs_create,
            .destroy = pass_destroy,
            .kind = KILN_FUSION_PATTERN,
            .stage = KILN_FUSION_STAGE_BUILTIN,
            .patterns = hs_patterns,
            .meet_requirements = hs_meet,
            .replacement = hs_replace,
        },
        {
            .struct_size = sizeof(kiln_fusion_pass_desc),
            .name = "LayerNormFusionPass",
            .summary = "vector: ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div/Mul/Add over the "
                       "last axis -> LayerNormalization",
            .create = ln_create,
            .destroy = pass_destroy,
            .kind = KILN_FUSION_PATTERN,
            .stage = KILN_FUSION_STAGE_BUILTIN,
            .patterns = ln_patterns,
            .meet_requirements = ln_meet,
            .replacement = ln_replace,
        },
    };
    kiln_status st = KILN_OK;
    for (size_t i = 0; i < sizeof(passes) / sizeof(passes[0]) && st == KILN_OK; i++)
        st = kiln_register_fusion_pass(r, &passes[i]);
    return st;
}

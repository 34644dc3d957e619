/*
 * nn_fusion_matmul.c - the aicore engine's MatMul fusions (stage builtin),
 * both making FusedMatMul = alpha * MatMul(op(A), op(B)) (ONNX Runtime's
 * com.microsoft FusedMatMul; its kernel in nn_matmul.c hands the transposes
 * and alpha to sgemm):
 *
 *   MatMulScaleFusionPass      MatMul or FusedMatMul, then Mul by a scalar
 *                              float32 Const (either operand order) or Div by
 *                              one, or a Mul by one on either operand before
 *                              it -> FusedMatMul with alpha times (or divided
 *                              by) the scalar; attention's (Q s) K^T or
 *                              Q K^T / sqrt(d).
 *   MatMulTransposeFusionPass  a Transpose that swaps the last two dims (the
 *                              others in place) feeding input 0 or 1 of a
 *                              MatMul or FusedMatMul -> FusedMatMul with
 *                              transA / transB flipped; attention's K^T.
 *
 * The scalar and the operands stay outside the match (pattern inputs), so a
 * shared Const is never taken.  Rules, as for the other aicore fusions
 * (nn_fusion.c): the absorbed node is deletable (nn_fx_deletable: not pinned
 * to another engine, not _cannot_be_deleted, no control edges; it may run on
 * any engine, a Transpose is the host engine's: what it did becomes an operand
 * of sgemm) and does not feed the NetOutput; the head runs on aicore or has no engine yet; float32.  The
 * matcher's boundary check keeps a head or Transpose read elsewhere out.
 * aicore.fusion names them matmul_scale and matmul_transpose.
 */
#include "nn_ops.h"

#include <string.h>

static bool op_is(const kiln_graph *g, kiln_node_id n, const char *op)
{
    return strcmp(kiln_node_op_str(g, n), op) == 0;
}

static bool f32_out(const kiln_graph *g, kiln_node_id n)
{
    return kiln_desc_dtype(kiln_node_output_desc((kiln_graph *)g, n, 0)) == KILN_DT_FLOAT32;
}

/* The head (MatMul / FusedMatMul) may become a FusedMatMul on aicore. */
static bool head_ok(const kiln_graph *g, kiln_node_id mm)
{
    const char *pin = NULL;
    if (kiln_attrs_get_string(kiln_node_attrs(g, mm), "_kiln_engine", &pin) && pin &&
        strcmp(pin, "aicore") != 0)
        return false;
    bool keep = false;
    if (kiln_attrs_get_bool(kiln_node_attrs(g, mm), "_cannot_be_deleted", &keep) && keep)
        return false;
    return f32_out(g, mm);
}

/* Two alternatives per head op: MatMul, FusedMatMul. */
static const char *const heads[2] = {"MatMul", "FusedMatMul"};

/* ---- MatMulScaleFusionPass ---------------------------------------------------------------- */

/*
 * Alternatives: (MatMul | FusedMatMul) x the four places of the scale: after
 * the head (Mul, commutative; Div), or a Mul before its input 0 or 1.
 * Pattern nodes per alternative, in this order: 0, 1 the head's operands
 * (Data; for a scale before the head, 0 is the scaled operand, 1 the other),
 * 2 the scalar (Data), 3 the head, 4 the Mul / Div.
 */
enum { SC_POST_MUL, SC_POST_DIV, SC_PRE_A, SC_PRE_B, SC_KINDS };

static kiln_status scale_patterns(void *inst, kiln_pattern *p, kiln_error *err)
{
    (void)inst;
    (void)err;
    for (int h = 0; h < 2; h++)
        for (int k = 0; k < SC_KINDS; k++) {
            if ((h || k) && kiln_pattern_next(p) != KILN_OK)
                return KILN_ERR_NOMEM;
            int32_t a = kiln_pattern_node(p, "a", "Data"), b = kiln_pattern_node(p, "b", "Data");
            int32_t sc = kiln_pattern_node(p, "s", "Data");
            int32_t mm = kiln_pattern_node(p, "mm", heads[h]);
            int32_t op = kiln_pattern_node(p, "scale", k == SC_POST_DIV ? "Div" : "Mul");
            if (a < 0 || b < 0 || sc < 0 || mm < 0 || op < 0)
                return KILN_ERR_NOMEM;
            kiln_status st;
            if (k == SC_POST_MUL || k == SC_POST_DIV) {
                if ((st = kiln_pattern_edge(p, a, 0, mm, 0)) || (st = kiln_pattern_edge(p, b, 0, mm, 1)) ||
                    (st = kiln_pattern_edge(p, mm, 0, op, 0)) || (st = kiln_pattern_edge(p, sc, 0, op, 1)) ||
                    (st = kiln_pattern_output(p, op, 0)))
                    return st;
            } else {
                uint32_t side = k == SC_PRE_A ? 0 : 1;
                if ((st = kiln_pattern_edge(p, a, 0, op, 0)) || (st = kiln_pattern_edge(p, sc, 0, op, 1)) ||
                    (st = kiln_pattern_edge(p, op, 0, mm, side)) ||
                    (st = kiln_pattern_edge(p, b, 0, mm, 1 - side)) ||
                    (st = kiln_pattern_output(p, mm, 0)))
                    return st;
            }
            if (k != SC_POST_DIV && (st = kiln_pattern_set_flags(p, KILN_PATTERN_COMMUTATIVE)))
                return st;
        }
    return KILN_OK;
}

/* The scalar of input 2 of the match (a float32 Const of one element). */
static bool scalar_of(const kiln_graph *g, const kiln_match *m, float *v)
{
    kiln_anchor s = kiln_match_input(m, 2);
    if (!s.node || !(op_is(g, s.node, "Const") || op_is(g, s.node, "Constant")))
        return false;
    kiln_tensor_value t;
    if (!kiln_attrs_get_tensor(kiln_node_attrs(g, s.node), "value", &t) ||
        t.dtype != KILN_DT_FLOAT32 || t.nbytes != sizeof(float))
        return false;
    memcpy(v, t.data, sizeof(float));
    return true;
}

/* The match's head and scale nodes (pattern nodes 3 and 4) and its kind. */
static int scale_nodes(const kiln_match *m, kiln_node_id *mm, kiln_node_id *op)
{
    uint32_t alt = kiln_match_pattern_index(m);
    int32_t base = (int32_t)alt * 5;
    *mm = kiln_match_node(m, base + 3);
    *op = kiln_match_node(m, base + 4);
    return (int)(alt % SC_KINDS);
}

static bool scale_meet(void *inst, const kiln_graph *g, const kiln_match *m)
{
    (void)inst;
    kiln_node_id mm, op;
    scale_nodes(m, &mm, &op);
    float v;
    if (!mm || !op || !scalar_of(g, m, &v) || !head_ok(g, mm) || !f32_out(g, op))
        return false;
    if (op_is(g, op, "Div") && v == 0.0f)
        return false;
    return nn_fx_deletable(g, op) && !nn_fx_feeds_netoutput(g, op) &&
           !nn_fx_feeds_netoutput(g, mm);
}

static kiln_status scale_replace(void *inst, kiln_pass_ctx *ctx, const kiln_graph *g,
                                 const kiln_match *m, kiln_graph *repl)
{
    kiln_status st = nn_fx_enabled(ctx, NN_FUSE_MATMUL_SCALE);
    if (st != KILN_OK)
        return st;
    kiln_node_id mm, op;
    int kind = scale_nodes(m, &mm, &op);
    float v;
    if (!scale_meet(inst, g, m) || !scalar_of(g, m, &v))
        return KILN_ERR_NOT_FOUND;
    double alpha = cpu_attr_float(g, mm, "alpha", 1.0);
    alpha = op_is(g, op, "Div") ? alpha / v : alpha * v;
    if (nn_fx_will_fuse(g, m))
        kiln_pass_explain(ctx, (kiln_graph *)g, op,
                          "fused by engine aicore into %s %s as alpha %g (matmul_scale)",
                          kiln_node_op_str(g, mm), kiln_node_name_str(g, mm), alpha);
    /* boundary inputs: 0, 1 the operands (0 the scaled one before the head), 2 the scalar */
    kiln_node_id n = kiln_graph_copy_node(repl, g, mm, NULL);
    kiln_node_id a = kiln_fusion_replacement_input(repl, 0);
    kiln_node_id b = kiln_fusion_replacement_input(repl, 1);
    if (!n || !a || !b)
        return KILN_ERR_NOMEM;
    uint32_t ia = kind == SC_PRE_B ? 1 : 0;
    st = kiln_edge_add(repl, a, 0, n, ia);
    if (st == KILN_OK)
        st = kiln_edge_add(repl, b, 0, n, 1 - ia);
    if (st == KILN_OK)
        st = kiln_node_set_op(repl, n, "FusedMatMul");
    if (st == KILN_OK)
        st = kiln_attrs_set_float(kiln_node_attrs_mut(repl, n), "alpha", alpha);
    if (st == KILN_OK && (kind == SC_POST_MUL || kind == SC_POST_DIV))
        st = kiln_desc_copy(repl, kiln_node_output_desc(repl, n, 0),
                            kiln_node_output_desc((kiln_graph *)g, op, 0));
    if (st == KILN_OK && (kind == SC_PRE_A || kind == SC_PRE_B)) {
        kiln_tensor_desc *d = kiln_node_input_desc_mut(repl, n, ia);
        st = d ? kiln_desc_copy(repl, d, kiln_node_output_desc(repl, a, 0)) : KILN_ERR_NOMEM;
    }
    return st == KILN_OK ? nn_fx_finish(repl, n) : st;
}

/* ---- MatMulTransposeFusionPass -------------------------------------------------------------- */

/* Alternatives: (MatMul | FusedMatMul) x (Transpose on input 0 | 1). Pattern
 * nodes per alternative: X (Data, the Transpose's input), O (Data, the other
 * operand), tr, mm. */
static kiln_status transpose_patterns(void *inst, kiln_pattern *p, kiln_error *err)
{
    (void)inst;
    (void)err;
    for (int h = 0; h < 2; h++)
        for (int side = 0; side < 2; side++) {
            if ((h || side) && kiln_pattern_next(p) != KILN_OK)
                return KILN_ERR_NOMEM;
            int32_t x = kiln_pattern_node(p, "x", "Data"), o = kiln_pattern_node(p, "o", "Data");
            int32_t tr = kiln_pattern_node(p, "tr", "Transpose");
            int32_t mm = kiln_pattern_node(p, "mm", heads[h]);
            if (x < 0 || o < 0 || tr < 0 || mm < 0 ||
                kiln_pattern_edge(p, x, 0, tr, 0) != KILN_OK ||
                kiln_pattern_edge(p, tr, 0, mm, (uint32_t)side) != KILN_OK ||
                kiln_pattern_edge(p, o, 0, mm, (uint32_t)(1 - side)) != KILN_OK ||
                kiln_pattern_output(p, mm, 0) != KILN_OK)
                return KILN_ERR_NOMEM;
        }
    return KILN_OK;
}

static void transpose_nodes(const kiln_match *m, kiln_node_id *tr, kiln_node_id *mm, int *side)
{
    uint32_t alt = kiln_match_pattern_index(m);
    *side = (int)(alt & 1);
    *tr = kiln_match_node(m, (int32_t)alt * 4 + 2);
    *mm = kiln_match_node(m, (int32_t)alt * 4 + 3);
}

/* @p tr swaps the last two of its rank >= 2 dims and keeps the others. */
static bool swaps_last_two(const kiln_graph *g, kiln_node_id tr)
{
    const int64_t *perm = NULL;
    uint32_t n = 0;
    if (!kiln_attrs_get_list_int(kiln_node_attrs(g, tr), "perm", &perm, &n) || n < 2)
        return false; /* no perm: a full reversal, the same only for rank 2 (not known here) */
    for (uint32_t i = 0; i + 2 < n; i++)
        if (perm[i] != (int64_t)i)
            return false;
    return perm[n - 2] == (int64_t)n - 1 && perm[n - 1] == (int64_t)n - 2;
}

static bool transpose_meet(void *inst, const kiln_graph *g, const kiln_match *m)
{
    (void)inst;
    kiln_node_id tr, mm;
    int side;
    transpose_nodes(m, &tr, &mm, &side);
    return tr && mm && head_ok(g, mm) && f32_out(g, tr) && swaps_last_two(g, tr) &&
           nn_fx_deletable(g, tr) && !nn_fx_feeds_netoutput(g, tr);
}

static kiln_status transpose_replace(void *inst, kiln_pass_ctx *ctx, const kiln_graph *g,
                                     const kiln_match *m, kiln_graph *repl)
{
    kiln_status st = nn_fx_enabled(ctx, NN_FUSE_MATMUL_TRANSPOSE);
    if (st != KILN_OK)
        return st;
    kiln_node_id tr, mm;
    int side;
    transpose_nodes(m, &tr, &mm, &side);
    if (!transpose_meet(inst, g, m))
        return KILN_ERR_NOT_FOUND;
    const char *key = side ? "transB" : "transA";
    if (nn_fx_will_fuse(g, m))
        kiln_pass_explain(ctx, (kiln_graph *)g, tr,
                          "fused by engine aicore into %s %s as %s (matmul_transpose)",
                          kiln_node_op_str(g, mm), kiln_node_name_str(g, mm), key);
    /* boundary inputs: 0 = the Transpose's input, 1 = the other operand */
    kiln_node_id n = kiln_graph_copy_node(repl, g, mm, NULL);
    kiln_node_id x = kiln_fusion_replacement_input(repl, 0);
    kiln_node_id o = kiln_fusion_replacement_input(repl, 1);
    if (!n || !x || !o)
        return KILN_ERR_NOMEM;
    st = kiln_edge_add(repl, x, 0, n, (uint32_t)side);
    if (st == KILN_OK)
        st = kiln_edge_add(repl, o, 0, n, (uint32_t)(1 - side));
    if (st == KILN_OK)
        st = kiln_node_set_op(repl, n, "FusedMatMul");
    if (st == KILN_OK)
        st = kiln_attrs_set_int(kiln_node_attrs_mut(repl, n), key,
                                cpu_attr_int(g, mm, key, 0) ? 0 : 1);
    /* the operand's descriptor is now the Transpose's input's */
    if (st == KILN_OK) {
        kiln_tensor_desc *d = kiln_node_input_desc_mut(repl, n, (uint32_t)side);
        st = d ? kiln_desc_copy(repl, d, kiln_node_output_desc(repl, x, 0)) : KILN_ERR_NOMEM;
    }
    return st == KILN_OK ? nn_fx_finish(repl, n) : st;
}

kiln_status nn_register_matmul_fusion_passes(kiln_registrar *r, kiln_error *err)
{
    (void)err;
    static const kiln_fusion_pass_desc passes[] = {
        {
            .struct_size = sizeof(kiln_fusion_pass_desc),
            .name = "MatMulScaleFusionPass",
            .summary = "aicore: MatMul / FusedMatMul then Mul or Div by a scalar Const -> "
                       "FusedMatMul with alpha",
            .kind = KILN_FUSION_PATTERN,
            .stage = KILN_FUSION_STAGE_BUILTIN,
            .patterns = scale_patterns,
            .meet_requirements = scale_meet,
            .replacement = scale_replace,
        },
        {
            .struct_size = sizeof(kiln_fusion_pass_desc),
            .name = "MatMulTransposeFusionPass",
            .summary = "aicore: a Transpose of the last two dims into a MatMul / FusedMatMul "
                       "operand -> FusedMatMul with transA / transB",
            .kind = KILN_FUSION_PATTERN,
            .stage = KILN_FUSION_STAGE_BUILTIN,
            .patterns = transpose_patterns,
            .meet_requirements = transpose_meet,
            .replacement = transpose_replace,
        },
    };
    kiln_status st = KILN_OK;
    for (size_t i = 0; i < sizeof(passes) / sizeof(passes[0]) && st == KILN_OK; i++)
        st = kiln_register_fusion_pass(r, &passes[i]);
    return st;
}

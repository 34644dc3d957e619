/*
 * vec_fusion.c - the vector engine's optimize_subgraph (GE OptimizeFusedGraph):
 * element-wise chains of a vector partition become one KilnFusedElementwise
 * node, and its kernel evaluates the chain in one pass over the output.
 *
 * A chain is a run of float32 element-wise nodes n1 -> n2 -> ... -> nk (k >= 2)
 * where each intermediate output has exactly one consumer (the next node of
 * the chain; so it feeds no End of the partition), no node has control edges
 * or `_cannot_be_deleted`, and every other operand is either a scalar float32
 * Const of the partition (its value goes into the program) or a tensor of the
 * output's shape (an input of the fused node).  Ops: Relu Sigmoid Neg Sqrt Log
 * LeakyRelu HardSigmoid HardSwish (five instructions) Clip (min/max from
 * attributes or scalar Consts) and the two-input Add Sub Mul Div Max Min.  The last node keeps its
 * name (its consumers, End included, are untouched) and becomes the fused node; the other nodes are
 * removed.
 *
 * Program encoding (docs/engines.md): attribute `fused_program`, a list of
 * ints, 4 per instruction {opcode, dst, a, b}; registers 0..nin-1 hold the
 * inputs, the others are temporaries (at most VF_MAX_REGS); an operand v >= 0
 * is register v, v < 0 is constant -v-1 of `fused_consts` (list of floats).
 * The result is the dst register of the last instruction.  `fused_ops` lists
 * the absorbed nodes' op types.
 *
 * Session option vector.fusion: "on" (default) or "off".
 */
#include "basic_ops.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <threads.h>

#include "cpu_par.h"
#include "vec_fusion.h"
#include "cpu_vexp.h"

/* the OpenMP runtime stays loaded once this plugin is (cpu_par.h) */
CPU_PAR_KEEP_RUNTIME()

#define VF_MAX_CHAIN 32
#define VF_MAX_CONSTS 64
#define VF_BLOCK 256

static const char *const op_names[VF_OP_COUNT] = {
    [VF_ADD] = "Add",          [VF_SUB] = "Sub",     [VF_MUL] = "Mul",
    [VF_DIV] = "Div",          [VF_MAX] = "Max",     [VF_MIN] = "Min",
    [VF_NEG] = "Neg",          [VF_SQRT] = "Sqrt",   [VF_LOG] = "Log",
    [VF_SIGMOID] = "Sigmoid",  [VF_RELU] = "Relu",   [VF_LEAKY] = "LeakyRelu",
    [VF_HSIG] = "HardSigmoid", [VF_CLIPLO] = "Clip", [VF_CLIPHI] = NULL,
};

/* HardSwish joins chains as five instructions of the opcodes above (no
 * opcode of its own): t = x / 6; t += 0.5; t = max(t, 0); t = min(t, 1);
 * x * t, the vector kernel's formula in the same order, so the same bytes. */
#define VF_HSWISH_NODE 100

static int op_code(const kiln_graph *g, kiln_node_id n)
{
    const char *op = kiln_node_op_str(g, n);
    if (strcmp(op, "HardSwish") == 0)
        return VF_HSWISH_NODE;
    for (int i = 0; i < VF_OP_COUNT; i++)
        if (op_names[i] && strcmp(op, op_names[i]) == 0)
            return i;
    return -1;
}

static bool is_binary(int code) { return code >= VF_ADD && code <= VF_MIN; }

/* The value of a scalar float32 Const feeding input i of n, if it is one. */
static bool scalar_const(kiln_graph *g, kiln_node_id n, uint32_t i, double *v)
{
    kiln_anchor p = kiln_node_input_peer(g, n, i);
    if (!p.node)
        return false;
    const char *op = kiln_node_op_str(g, p.node);
    if (strcmp(op, "Const") != 0 && strcmp(op, "Constant") != 0)
        return false;
    kiln_tensor_value t;
    if (!kiln_attrs_get_tensor(kiln_node_attrs(g, p.node), "value", &t) ||
        t.dtype != KILN_DT_FLOAT32 || t.nbytes != sizeof(float) || !t.data)
        return false;
    float f;
    memcpy(&f, t.data, sizeof(f));
    *v = f;
    return true;
}

static bool same_shape(const kiln_tensor_desc *a, const kiln_tensor_desc *b)
{
    int32_t r = kiln_desc_rank(a);
    if (r != kiln_desc_rank(b) || r < 0)
        return false;
    const int64_t *da = kiln_desc_dims(a), *db = kiln_desc_dims(b);
    for (int32_t i = 0; i < r; i++)
        if (da[i] != db[i] || da[i] < 0)
            return false;
    return true;
}

/* A tensor operand the fused node can take: float32, the output's shape, or one
 * element of a rank not above the output's (read by the kernel, broadcast). */
static bool full_operand(kiln_graph *g, kiln_node_id n, uint32_t i)
{
    kiln_anchor p = kiln_node_input_peer(g, n, i);
    if (!p.node)
        return false;
    const kiln_tensor_desc *d = kiln_node_output_desc(g, p.node, p.index);
    const kiln_tensor_desc *o = kiln_node_output_desc(g, n, 0);
    if (kiln_desc_dtype(d) != KILN_DT_FLOAT32)
        return false;
    if (same_shape(d, o))
        return true;
    return kiln_desc_rank(d) >= 0 && kiln_desc_rank(d) <= kiln_desc_rank(o) &&
           kiln_desc_numel(d) == 1;
}

/* Input i of n is a one-element operand. */
static bool scalar_operand(kiln_graph *g, kiln_node_id n, uint32_t i)
{
    kiln_anchor p = kiln_node_input_peer(g, n, i);
    double v;
    return p.node && (scalar_const(g, n, i, &v) ||
                      (full_operand(g, n, i) &&
                       kiln_desc_numel(kiln_node_output_desc(g, p.node, p.index)) == 1));
}

/* Operand i of n: a scalar Const or an output-shaped tensor. */
static bool operand_ok(kiln_graph *g, kiln_node_id n, uint32_t i)
{
    double v;
    return scalar_const(g, n, i, &v) || full_operand(g, n, i);
}

static bool node_ok(kiln_graph *g, kiln_node_id n)
{
    int code = op_code(g, n);
    if (code < 0 || kiln_node_output_count(g, n) != 1)
        return false;
    const kiln_tensor_desc *o = kiln_node_output_desc(g, n, 0);
    if (kiln_desc_dtype(o) != KILN_DT_FLOAT32 || !same_shape(o, o))
        return false;
    if (kiln_node_ctrl_in_count(g, n) || kiln_node_ctrl_out_count(g, n))
        return false;
    bool keep = false;
    if (kiln_attrs_get_bool(kiln_node_attrs(g, n), "_cannot_be_deleted", &keep) && keep)
        return false;
    /* a node pinned to a memory type keeps its tensors where it says
     * (PlacedLowering copies between the types) */
    if (kiln_attrs_has(kiln_node_attrs(g, n), "_input_memory_type") ||
        kiln_attrs_has(kiln_node_attrs(g, n), "_output_memory_type"))
        return false;
    uint32_t nin = kiln_node_input_count(g, n);
    if (is_binary(code))
        return nin == 2 && operand_ok(g, n, 0) && operand_ok(g, n, 1);
    kiln_anchor x = kiln_node_input_peer(g, n, 0);
    if (nin < 1 || !x.node ||
        !same_shape(kiln_node_output_desc(g, x.node, x.index), kiln_node_output_desc(g, n, 0)))
        return false;
    if (code == VF_CLIPLO) {
        for (uint32_t i = 1; i < nin && i < 3; i++)
            if (kiln_node_input_peer(g, n, i).node && !scalar_operand(g, n, i))
                return false;
        return nin <= 3;
    }
    return nin == 1;
}

/* The chain's next node after n: n's only consumer, when it is fusible, has
 * n's output shape and reads n as a main operand (input 0, or input 1 of a
 * binary op; never a Clip bound). */
static kiln_node_id chain_next(kiln_graph *g, kiln_node_id n)
{
    if (kiln_node_output_use_count(g, n, 0) != 1)
        return 0;
    kiln_anchor u = kiln_use_dst(g, kiln_use_first(g, n, 0));
    kiln_node_id m = u.node;
    if (!m || !node_ok(g, m) ||
        !same_shape(kiln_node_output_desc(g, n, 0), kiln_node_output_desc(g, m, 0)))
        return 0;
    return u.index == 0 || (u.index == 1 && is_binary(op_code(g, m))) ? m : 0;
}

typedef struct prog {
    int64_t ins[VF_MAX_CHAIN * 2 * 4];
    uint32_t nins;
    double consts[VF_MAX_CONSTS];
    uint32_t nconsts;
    kiln_anchor inputs[VF_MAX_REGS];
    uint32_t ninputs;
    uint32_t ntemps;
} prog;

static int64_t add_const(prog *p, double v)
{
    if (p->nconsts >= VF_MAX_CONSTS)
        return INT64_MIN;
    p->consts[p->nconsts] = v;
    return -(int64_t)(++p->nconsts);
}

/* Two anchors carrying the same tensor: the same output, or two boundary
 * PlaceHolders of the same producer output of another partition. */
static bool same_tensor(kiln_graph *g, kiln_anchor a, kiln_anchor b)
{
    if (a.node == b.node)
        return a.index == b.index;
    if (strcmp(kiln_node_op_str(g, a.node), "PlaceHolder") != 0 ||
        strcmp(kiln_node_op_str(g, b.node), "PlaceHolder") != 0)
        return false;
    const kiln_attrs *x = kiln_node_attrs(g, a.node), *y = kiln_node_attrs(g, b.node);
    const char *px = NULL, *py = NULL;
    int64_t ix = -1, iy = -2;
    return kiln_attrs_get_string(x, "_parentNodeName", &px) &&
           kiln_attrs_get_string(y, "_parentNodeName", &py) && px && py && strcmp(px, py) == 0 &&
           kiln_attrs_get_int(x, "anchorIndex", &ix) && kiln_attrs_get_int(y, "anchorIndex", &iy) &&
           ix == iy && ix >= 0;
}

static int64_t add_input(prog *p, kiln_graph *g, kiln_anchor a)
{
    for (uint32_t i = 0; i < p->ninputs; i++)
        if (same_tensor(g, p->inputs[i], a))
            return i;
    if (p->ninputs >= VF_MAX_REGS)
        return INT64_MIN;
    p->inputs[p->ninputs] = a;
    return p->ninputs++;
}

static bool emit(prog *p, int code, int64_t dst, int64_t a, int64_t b)
{
    if (a == INT64_MIN || b == INT64_MIN || p->nins + 1 > VF_MAX_CHAIN * 2)
        return false;
    int64_t *q = &p->ins[p->nins++ * 4];
    q[0] = code, q[1] = dst, q[2] = a, q[3] = b;
    return true;
}

/* The operand for input i of n: prev's register, a constant or a new input. */
static int64_t operand(prog *p, kiln_graph *g, kiln_node_id n, uint32_t i, kiln_node_id prev,
                       int64_t prev_reg)
{
    kiln_anchor a = kiln_node_input_peer(g, n, i);
    if (prev && a.node == prev)
        return prev_reg;
    double v;
    if (scalar_const(g, n, i, &v))
        return add_const(p, v);
    return add_input(p, g, a);
}

/* Build the program of chain c[0..k-1]; false when it does not fit. */
static bool build(prog *p, kiln_graph *g, const kiln_node_id *c, uint32_t k)
{
    memset(p, 0, sizeof(*p));
    int64_t prev_reg = -1;
    int64_t dst[VF_MAX_CHAIN];
    /* operands first (inputs take the low registers), then the temporaries */
    int64_t opa[VF_MAX_CHAIN], opb[VF_MAX_CHAIN];
    int64_t lo[VF_MAX_CHAIN], hi[VF_MAX_CHAIN];
    for (uint32_t j = 0; j < k; j++) {
        kiln_node_id n = c[j], prev = j ? c[j - 1] : 0;
        int code = op_code(g, n);
        opa[j] = operand(p, g, n, 0, prev, -1000 - (int64_t)j);
        opb[j] = 0;
        lo[j] = hi[j] = INT64_MAX;
        if (is_binary(code))
            opb[j] = operand(p, g, n, 1, prev, -1000 - (int64_t)j);
        else if (code == VF_LEAKY)
            opb[j] = add_const(p, cpu_attr_float(g, n, "alpha", 0.01));
        else if (code == VF_HSIG) {
            opb[j] = add_const(p, cpu_attr_float(g, n, "alpha", 0.2));
            (void)add_const(p, cpu_attr_float(g, n, "beta", 0.5));
        } else if (code == VF_CLIPLO) {
            const kiln_attrs *at = kiln_node_attrs(g, n);
            uint32_t nin = kiln_node_input_count(g, n);
            if (nin > 1 && kiln_node_input_peer(g, n, 1).node)
                lo[j] = operand(p, g, n, 1, 0, 0);
            else if (kiln_attrs_has(at, "min"))
                lo[j] = add_const(p, (float)cpu_attr_float(g, n, "min", 0));
            if (nin > 2 && kiln_node_input_peer(g, n, 2).node)
                hi[j] = operand(p, g, n, 2, 0, 0);
            else if (kiln_attrs_has(at, "max"))
                hi[j] = add_const(p, (float)cpu_attr_float(g, n, "max", 0));
        }
        if (opa[j] == INT64_MIN || opb[j] == INT64_MIN || lo[j] == INT64_MIN || hi[j] == INT64_MIN)
            return false;
    }
    /* registers: the inputs, then one temporary that every instruction
     * updates in place (element-wise, so a destination may be an operand); the
     * previous node's result is marked -1000-j above and resolved here */
    uint32_t next = p->ninputs;
    for (uint32_t j = 0; j < k; j++) {
        kiln_node_id n = c[j];
        int code = op_code(g, n);
        if (next >= VF_MAX_REGS)
            return false;
        if (opa[j] <= -1000)
            opa[j] = prev_reg;
        if (opb[j] <= -1000)
            opb[j] = prev_reg;
        dst[j] = next;
        if (code == VF_CLIPLO) {
            int64_t cur = opa[j];
            const bool has_lo = lo[j] != INT64_MAX, has_hi = hi[j] != INT64_MAX;
            if (has_lo && !emit(p, VF_CLIPLO, dst[j], cur, lo[j]))
                return false;
            if (has_lo)
                cur = dst[j];
            if (has_hi && !emit(p, VF_CLIPHI, dst[j], cur, hi[j]))
                return false;
            if (!has_lo && !has_hi && !emit(p, VF_CLIPLO, dst[j], cur, add_const(p, -INFINITY)))
                return false;
        } else if (code == VF_HSWISH_NODE) {
            /* a second temporary: x (opa) is read again by the last step */
            const int64_t t = next + 1;
            if (t >= VF_MAX_REGS || !emit(p, VF_DIV, t, opa[j], add_const(p, 6.0)) ||
                !emit(p, VF_ADD, t, t, add_const(p, 0.5)) ||
                !emit(p, VF_CLIPLO, t, t, add_const(p, 0.0)) ||
                !emit(p, VF_CLIPHI, t, t, add_const(p, 1.0)) || !emit(p, VF_MUL, dst[j], opa[j], t))
                return false;
        } else if (!emit(p, code, dst[j], opa[j], opb[j])) {
            return false;
        }
        prev_reg = dst[j];
    }
    p->ntemps = 1;
    return true;
}

/* ---- the hook ------------------------------------------------------------------ */

static mtx_t report_mtx;
static once_flag report_once = ONCE_FLAG_INIT;
static void report_init(void) { mtx_init(&report_mtx, mtx_plain); }

static kiln_status fuse(kiln_pass_ctx *ctx, kiln_graph *g, const kiln_node_id *c, uint32_t k,
                        bool *done)
{
    *done = false;
    prog p; /* a few KiB; no thread-local: a plugin's TLS outlives its dlclose in
             * the threads that touched it, which LeakSanitizer's exit scan trips on */
    if (!build(&p, g, c, k))
        return KILN_OK;
    kiln_node_id last = c[k - 1];
    const char *ops[VF_MAX_CHAIN];
    for (uint32_t j = 0; j < k; j++)
        ops[j] = kiln_node_op_str(g, c[j]);
    char text[512];
    size_t len = (size_t)snprintf(text, sizeof(text), "%u element-wise nodes fused (", k);
    for (uint32_t j = 0; j < k && len < sizeof(text); j++)
        len += (size_t)snprintf(text + len, sizeof(text) - len, "%s%s", j ? " -> " : "", ops[j]);
    if (len < sizeof(text))
        snprintf(text + len, sizeof(text) - len, ") into KilnFusedElementwise");
    /* the attributes first: they point at strings of the nodes removed below */
    kiln_attrs *at = kiln_node_attrs_mut(g, last);
    if (!at)
        return KILN_ERR_NOMEM;
    kiln_status st = kiln_attrs_set_list_string(at, "fused_ops", ops, k);
    if (st == KILN_OK)
        st = kiln_attrs_set_list_int(at, "fused_program", p.ins, p.nins * 4);
    if (st == KILN_OK && p.nconsts) /* absent: no constants */
        st = kiln_attrs_set_list_float(at, "fused_consts", p.consts, p.nconsts);
    static const char *const drop[] = {"alpha", "beta", "min", "max"};
    for (size_t i = 0; i < sizeof(drop) / sizeof(drop[0]); i++)
        kiln_attrs_remove(at, drop[i]);
    /* rewire: the last node takes the chain's inputs */
    uint32_t nin = kiln_node_input_count(g, last);
    for (uint32_t i = 0; st == KILN_OK && i < nin; i++)
        if (kiln_node_input_peer(g, last, i).node)
            st = kiln_edge_remove(g, last, i);
    for (uint32_t j = 0; st == KILN_OK && j + 1 < k; j++)
        st = kiln_graph_remove_node(g, c[j]);
    if (st == KILN_OK)
        st = kiln_node_set_op(g, last, "KilnFusedElementwise");
    if (st == KILN_OK)
        st = kiln_node_set_input_count(g, last, p.ninputs);
    for (uint32_t i = 0; st == KILN_OK && i < p.ninputs; i++)
        st = kiln_edge_add(g, p.inputs[i].node, p.inputs[i].index, last, i);
    if (st != KILN_OK)
        return kiln_errorf(kiln_pass_error(ctx), st,
                           "fusing the chain ending at node %s (%s) failed",
                           kiln_node_name_str(g, last), text);
    *done = true;
    if (ctx) {
        call_once(&report_once, report_init);
        mtx_lock(&report_mtx);
        kiln_pass_explain(ctx, g, last, "%s", text);
        mtx_unlock(&report_mtx);
    }
    return KILN_OK;
}

/* A chain needs a fusible node whose one consumer is a fusible node of the same
 * partition (chain_next in the split graph: any other consumer is an End there). */
bool vec_optimize_subgraph_wanted(void *inst, kiln_pass_ctx *ctx, const kiln_graph *g,
                                  uint32_t rank, const kiln_node_id *nodes, uint32_t count)
{
    (void)inst;
    int on = cpu_switch_value(ctx, "vector.fusion");
    if (on <= 0)
        return on < 0; /* off: nothing to do; a bad value: the hook says so */
    for (uint32_t i = 0; i < count; i++) {
        kiln_node_id n = nodes[i];
        if (kiln_node_output_count(g, n) != 1 || kiln_node_output_use_count(g, n, 0) != 1 ||
            op_code(g, n) < 0)
            continue;
        kiln_node_id m = kiln_use_dst(g, kiln_use_first(g, n, 0)).node;
        if (kiln_node_partition(g, m) == (int32_t)rank && op_code(g, m) >= 0)
            return true;
    }
    return false;
}

kiln_status vec_optimize_subgraph(void *inst, kiln_pass_ctx *ctx, kiln_graph *g)
{
    (void)inst;
    bool on;
    kiln_status st = cpu_session_switch(ctx, "vector.fusion", &on);
    if (st != KILN_OK || !on)
        return st;
    const uint32_t limit = kiln_graph_id_limit(g);
    uint8_t *mark = calloc((size_t)limit + 1, 1); /* 1: has a chain predecessor, 2: used */
    if (!mark)
        return kiln_errorf(kiln_pass_error(ctx), KILN_ERR_NOMEM, "out of memory");
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n)) {
        kiln_node_id m;
        if (node_ok(g, n) && (m = chain_next(g, n)) != 0)
            mark[m] |= 1;
    }
    int64_t chains = 0, absorbed = 0;
    kiln_node_id c[VF_MAX_CHAIN];
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n && n < limit && st == KILN_OK;
         n = kiln_graph_next_node(g, n)) {
        if (mark[n] || !node_ok(g, n))
            continue;
        uint32_t k = 0;
        for (kiln_node_id m = n; m && k < VF_MAX_CHAIN && !(mark[m] & 2); m = chain_next(g, m)) {
            c[k++] = m;
            mark[m] |= 2;
        }
        if (k < 2)
            continue;
        bool done;
        st = fuse(ctx, g, c, k, &done);
        if (done) {
            chains++;
            absorbed += k;
        }
    }
    free(mark);
    if (st != KILN_OK)
        return kiln_error_push(kiln_pass_error(ctx), "vector fusion of partition %s",
                               kiln_graph_name(g));
    if (ctx && chains) {
        call_once(&report_once, report_init);
        mtx_lock(&report_mtx);
        kiln_pass_stat_add(ctx, "chains_fused", chains);
        kiln_pass_stat_add(ctx, "ops_absorbed", absorbed);
        mtx_unlock(&report_mtx);
    }
    return KILN_OK;
}

/* ---- the op and its kernel ----------------------------------------------------- */

static kiln_status fused_infer(kiln_op_node *nd, kiln_error *err)
{
    kiln_op_shape s = {.rank = 0};
    for (uint32_t i = 0; i < nd->nin; i++) {
        const kiln_op_shape *a = &nd->in[i].s;
        if (!nd->in[i].present)
            continue;
        if (a->rank < 0) {
            s.rank = -1;
            break;
        }
        kiln_op_shape r = {.rank = a->rank > s.rank ? a->rank : s.rank};
        for (int32_t d = 0; d < r.rank; d++) {
            int32_t ia = d - (r.rank - a->rank), is = d - (r.rank - s.rank);
            int64_t x = ia >= 0 ? a->d[ia] : 1, y = is >= 0 ? s.d[is] : 1;
            if (x == 1)
                r.d[d] = y;
            else if (y == 1 || x == y)
                r.d[d] = x;
            else if (x < 0 || y < 0)
                r.d[d] = -1;
            else
                return kiln_errorf(err, KILN_ERR_INVALID,
                                   "node %s (KilnFusedElementwise): input %u of shape dim %lld "
                                   "does not broadcast with %lld",
                                   nd->name, i, (long long)x, (long long)y);
        }
        s = r;
    }
    nd->out[0].dtype = nd->nin && nd->in[0].present ? nd->in[0].dtype : KILN_DT_FLOAT32;
    nd->out[0].s = s;
    return KILN_OK;
}

kiln_status vec_register_fused_op(kiln_registrar *r, kiln_error *err)
{
    (void)err;
    static const kiln_op_def d = {
        .struct_size = sizeof(kiln_op_def),
        .type = "KilnFusedElementwise",
        .domain = "ai.kiln",
        .summary = "a chain of float32 element-wise ops fused by the vector engine "
                   "(attributes fused_program, fused_consts)",
        .min_inputs = 1,
        .max_inputs = VF_MAX_REGS,
        .min_outputs = 1,
        .max_outputs = 1,
        .infer = fused_infer,
    };
    return kiln_register_op(r, &d);
}

typedef struct fused_state {
    uint32_t nins, nregs;
    int32_t ins[VF_MAX_CHAIN * 2][4];
    float consts[VF_MAX_CONSTS];
} fused_state;

CPU_PREPARE(cpu_fused_prepare)
{
    const int64_t *pr = NULL;
    const double *cv = NULL;
    uint32_t np = 0, nc = 0;
    const kiln_attrs *at = kiln_node_attrs(g, n);
    if (!kiln_attrs_get_list_int(at, "fused_program", &pr, &np) || np == 0 || np % 4 ||
        np / 4 > VF_MAX_CHAIN * 2)
        return cpu_fail_node(g, n, err, KILN_ERR_INVALID,
                             "fused_program missing or malformed (a list of 4-int instructions, "
                             "at most %d)",
                             VF_MAX_CHAIN * 2);
    if (kiln_attrs_has(at, "fused_consts") &&
        (!kiln_attrs_get_list_float(at, "fused_consts", &cv, &nc) || nc > VF_MAX_CONSTS))
        return cpu_fail_node(g, n, err, KILN_ERR_INVALID, "fused_consts malformed");
    const uint32_t nin = kiln_node_input_count(g, n);
    if (nin == 0 || nin > VF_MAX_REGS)
        return cpu_fail_node(g, n, err, KILN_ERR_INVALID, "%u inputs (1..%d)", nin, VF_MAX_REGS);
    kiln_status st = cpu_state_new(g, n, sizeof(fused_state), state, err);
    if (st != KILN_OK)
        return st;
    fused_state *s = *state;
    s->nins = np / 4;
    s->nregs = nin;
    for (uint32_t i = 0; i < nc; i++)
        s->consts[i] = (float)cv[i];
    for (uint32_t k = 0; k < s->nins; k++) {
        const int64_t *q = &pr[k * 4];
        bool ok = q[0] >= 0 && q[0] < VF_OP_COUNT && q[1] >= nin && q[1] < VF_MAX_REGS;
        for (int o = 2; o < 4 && ok; o++)
            ok = q[o] >= 0 ? q[o] < VF_MAX_REGS : -q[o] <= (int64_t)nc;
        if (ok && q[0] == VF_HSIG)
            ok = q[3] < 0 && -q[3] + 1 <= (int64_t)nc;
        if (!ok) {
            cpu_state_free(*state);
            *state = NULL;
            return cpu_fail_node(g, n, err, KILN_ERR_INVALID,
                                 "fused_program instruction %u {%lld, %lld, %lld, %lld} is invalid",
                                 k, (long long)q[0], (long long)q[1], (long long)q[2],
                                 (long long)q[3]);
        }
        for (int o = 0; o < 4; o++)
            s->ins[k][o] = (int32_t)q[o];
        if ((uint32_t)q[1] + 1 > s->nregs)
            s->nregs = (uint32_t)q[1] + 1;
    }
    return KILN_OK;
}

/* One block of m elements: every instruction a tight loop over the block.
 * src[v] / str[v]: register v's values in this block and their stride (0: one
 * value, broadcast).  Built for AVX-512, AVX2 and the baseline; the loader
 * picks the widest the CPU has (the build cannot assume -march).  The project
 * builds as ISO C, so no multiply-add is contracted: every version rounds
 * alike. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define VF_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define VF_CLONES
#endif
VF_CLONES static void run_block(const fused_state *s, float (*r)[VF_BLOCK], const float **src,
                      const int64_t *str, const float *cst, float *out, int64_t m)
{
    for (uint32_t k = 0; k < s->nins; k++) {
        const int32_t *q = s->ins[k];
        const float *a = q[2] >= 0 ? src[q[2]] : &cst[-q[2] - 1];
        const float *b = q[3] >= 0 ? src[q[3]] : &cst[-q[3] - 1];
        const bool unary = q[0] >= VF_NEG && q[0] <= VF_RELU;
        const int64_t sa = q[2] >= 0 ? str[q[2]] : 0, sb = q[3] >= 0 && !unary ? str[q[3]] : 0;
        /* the last instruction writes the output itself */
        float *d = k + 1 == s->nins ? out : r[q[1]];
        switch (q[0]) {
/* the stride patterns get their own loops: (1,1), (1,0) and (0,1) */
#define LOOP(EXPR)                                                                                 \
    if (sa && sb) {                                                                                \
        for (int64_t i = 0; i < m; i++) {                                                          \
            const float X = a[i], Y = b[i];                                                        \
            (void)Y;                                                                               \
            d[i] = (EXPR);                                                                         \
        }                                                                                          \
    } else if (sa) {                                                                               \
        const float Y = b[0];                                                                      \
        (void)Y;                                                                                   \
        for (int64_t i = 0; i < m; i++) {                                                          \
            const float X = a[i];                                                                  \
            d[i] = (EXPR);                                                                         \
        }                                                                                          \
    } else {                                                                                       \
        const float X = a[0];                                                                      \
        for (int64_t i = 0; i < m; i++) {                                                          \
            const float Y = b[i * sb];                                                             \
            (void)Y;                                                                               \
            d[i] = (EXPR);                                                                         \
        }                                                                                          \
    }                                                                                              \
    break;
        case VF_ADD:
            LOOP(X + Y)
        case VF_SUB:
            LOOP(X - Y)
        case VF_MUL:
            LOOP(X * Y)
        case VF_DIV:
            LOOP(X / Y)
        case VF_MAX:
            LOOP(X >= Y ? X : Y)
        case VF_MIN:
            LOOP(X <= Y ? X : Y)
        case VF_NEG:
            LOOP(-X)
        case VF_SQRT:
            LOOP(sqrtf(X))
        case VF_LOG:
            LOOP(logf(X))
        case VF_SIGMOID:
            LOOP(1.0f / (1.0f + cpu_expf(-X)))
        case VF_RELU:
            LOOP(X > 0 ? X : 0.0f)
        case VF_LEAKY:
            LOOP(X >= 0 ? X : X * Y)
        case VF_CLIPLO:
            LOOP(X < Y ? Y : X)
        case VF_CLIPHI:
            LOOP(X > Y ? Y : X)
        case VF_HSIG: {
            const float al = b[0], be = cst[-q[3]];
            for (int64_t i = 0; i < m; i++) {
                const float v = al * a[i * sa] + be;
                d[i] = v < 0 ? 0.0f : v > 1 ? 1.0f : v;
            }
            break;
        }
#undef LOOP
        default:
            break;
        }
    }
}

/* One thread's blocks [lo, hi) of a fused run (cpu_par_for). */
typedef struct fused_job {
    const fused_state *s;
    const kiln_kernel_args *a;
    const int64_t *str;
    int64_t total;
    float *y;
} fused_job;

static void fused_blocks(void *ctx, int64_t lo, int64_t hi)
{
    const fused_job *j = ctx;
    float r[VF_MAX_REGS][VF_BLOCK];
    const float *src[VF_MAX_REGS];
    for (uint32_t v = 0; v < VF_MAX_REGS; v++)
        src[v] = r[v];
    for (int64_t blk = lo; blk < hi; blk++) {
        const int64_t off = blk * VF_BLOCK;
        const int64_t m = j->total - off < VF_BLOCK ? j->total - off : VF_BLOCK;
        for (uint32_t i = 0; i < j->a->input_count; i++)
            src[i] = (const float *)j->a->inputs[i].data + off * j->str[i];
        run_block(j->s, r, src, j->str, j->s->consts, j->y + off, m);
    }
}

CPU_KERNEL(cpu_fused)
{
    const fused_state *s = state;
    const kiln_tensor *out = &a->outputs[0];
    const int64_t total = cpu_numel(out);
    if (a->input_count > VF_MAX_REGS)
        return cpu_fail_node(a->graph, a->node, err, KILN_ERR_INVALID, "%u inputs (at most %d)",
                             a->input_count, VF_MAX_REGS);
    int64_t str[VF_MAX_REGS];
    for (uint32_t v = 0; v < VF_MAX_REGS; v++)
        str[v] = 1;
    for (uint32_t i = 0; i < a->input_count; i++) {
        const int64_t ni = cpu_numel(&a->inputs[i]);
        if (a->inputs[i].dtype != KILN_DT_FLOAT32 || (ni != total && ni != 1) || !a->inputs[i].data)
            return cpu_fail_node(a->graph, a->node, err, KILN_ERR_INVALID,
                                 "input %u: %lld elements of %s, expected %lld (or 1) float32", i,
                                 (long long)ni, kiln_dtype_name(a->inputs[i].dtype),
                                 (long long)total);
        str[i] = ni == total ? 1 : 0;
    }
    /* Blocks are independent (every element is computed alone): shared out
     * whole, so each thread runs the same block code as the serial loop.  The
     * cost of a block: one pass over it per instruction. */
    fused_job j = {s, a, str, total, out->data};
    cpu_par_for((total + VF_BLOCK - 1) / VF_BLOCK, VF_BLOCK * (int64_t)s->nins, fused_blocks, &j);
    return KILN_OK;
}

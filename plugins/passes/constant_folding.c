/*
 * constant_folding.c - ConstantFoldingPass (GE's ConstantFoldingPass over
 * FoldingPass), a node pass run by GEPass, with the node-level shape
 * re-inference of GE's InferShapePass in the same visit, so that shape
 * inference and folding alternate to a fixpoint inside one GEPass walk.
 *
 * At every visit of a node n:
 *   1. Re-inference (option infer, default true): when the op registry holds
 *      an inference function for n's op, n's inputs are described from their
 *      producers (dtype, shape, and the value when the producer is a Const)
 *      and the function is called; output descriptors it refines (a dim or
 *      rank that was unknown, or a dtype/shape that changed) are written and
 *      n's consumers re-passed.  This is how a Reshape whose shape input was
 *      just folded gets a static output (Shape -> Gather -> Reshape).  A node
 *      the function refuses is left alone (counter infer_failed; InferShapes
 *      is the pass that reports such errors).
 *   2. Folding: n is computed when
 *        - its op is registered and foldable by its flags (not data-like,
 *          constant, graph output, control flow, stateful, reference, no-fold),
 *          it owns no subgraph and has outputs;
 *        - it has no attribute `no_need_constant_folding` (GE tests presence,
 *          whatever the value), `_cannot_be_deleted` is not true and
 *          `_do_not_constant_folding` is not true;
 *        - every connected input is produced by a Const (shape-only ops such as
 *          Shape and Size need only a known input shape), at least one input
 *          is connected, and not every output is empty (GE leaves potential
 *          empty constants alone);
 *        - every output shape is known and holds at most max_elements
 *          elements;
 *      with the kernel of the engine that would run it (kiln_engine_kernel),
 *      else the op's fold function.  n becomes a Const holding output 0 (same
 *      name, control inputs kept); outputs 1.. become new Const nodes
 *      <name>_<o> with n's control inputs.  Every new Const carries
 *      `_is_from_constant_folding` and n's `_stream_label`.  Const producers
 *      left without any consumer are removed; consumers are re-passed, so
 *      chains fold in one walk.
 *   3. Round 2 (option round=2; GE's second run, in OptimizeAfterMergeSubGraph)
 *      additionally removes, when the walk of the root graph drains, the
 *      Const nodes of every graph that have no edge at all (GE's
 *      RemoveIsolatedConst after that run).  Round 1 never removes a Const it
 *      did not orphan itself.
 *
 * Requires: nothing (better after InferShapes).  Preserves: nothing.
 * Counters: folded, folded_by_kernel, folded_by_fold_fn, outputs_folded,
 * shapes_refined, infer_failed, consts_removed, skipped_no_need_constant_folding,
 * skipped_too_large, isolated_consts_removed (round 2).
 */
#include "passes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct cf_inst {
    int64_t round;
    int64_t max_elements;
    bool infer;
} cf_inst;

static const kiln_option_def cf_options[] = {
    {sizeof(kiln_option_def), KILN_OPT_INT, "round", "1",
     "1: OptimizeStage1 run; 2: the run after merging (also removes isolated Const nodes)", 1, 2},
    {sizeof(kiln_option_def), KILN_OPT_INT, "max_elements", "1048576",
     "fold only nodes whose every output holds at most this many elements", 0, 1e15},
    {sizeof(kiln_option_def), KILN_OPT_BOOL, "infer", "true",
     "re-infer a node's output shapes from its (folded) inputs before folding", 0, 0},
};

static kiln_status cf_create(const kiln_options *opts, kiln_error *err, void **inst)
{
    cf_inst *p = calloc(1, sizeof(*p));
    if (!p)
        return kiln_errorf(err, KILN_ERR_NOMEM, "ConstantFoldingPass: out of memory");
    p->round = 1;
    p->max_elements = 1048576;
    p->infer = true;
    kiln_options_get_int(opts, "round", &p->round);
    kiln_options_get_int(opts, "max_elements", &p->max_elements);
    kiln_options_get_bool(opts, "infer", &p->infer);
    if (p->round != 1 && p->round != 2) {
        free(p);
        return kiln_errorf(err, KILN_ERR_PARAM, "ConstantFoldingPass: option round must be 1 or 2");
    }
    *inst = p;
    return KILN_OK;
}

static void cf_destroy(void *inst) { free(inst); }

static bool attr_true(const kiln_attrs *a, const char *key)
{
    bool v = false;
    return kiln_attrs_get_bool(a, key, &v) && v;
}

/* The Const producing @p a, as a value borrowed from its `value` attribute. */
static bool const_value(kiln_graph *g, kiln_anchor a, kiln_op_value *v)
{
    if (!a.node || a.index != 0 || !(kiln_node_op_flags(g, a.node) & KILN_OP_CONSTANT))
        return false;
    kiln_tensor_value t;
    if (!kiln_attrs_get_tensor(kiln_node_attrs(g, a.node), "value", &t) ||
        t.rank > KILN_OP_MAX_RANK || kiln_dtype_size(t.dtype) == 0)
        return false;
    int64_t n = 1;
    v->dtype = t.dtype;
    v->s.rank = (int32_t)t.rank;
    for (uint32_t i = 0; i < t.rank; i++) {
        v->s.d[i] = t.dims[i];
        if (t.dims[i] < 0 || !kiln_mul_i64(n, t.dims[i], &n))
            return false;
    }
    if ((size_t)n * kiln_dtype_size(t.dtype) != t.nbytes)
        return false;
    v->data = (void *)(uintptr_t)(t.data ? t.data : (const void *)"");
    v->nbytes = t.nbytes;
    v->borrowed = true;
    return true;
}

static void desc_shape(const kiln_tensor_desc *d, kiln_op_shape *s)
{
    s->rank = -1;
    int32_t r = d ? kiln_desc_rank(d) : -1;
    if (r < 0 || r > KILN_OP_MAX_RANK)
        return;
    s->rank = r;
    const int64_t *dims = kiln_desc_dims(d);
    for (int32_t i = 0; i < r; i++)
        s->d[i] = dims[i];
}

static int64_t shape_numel(const kiln_op_shape *s)
{
    if (s->rank < 0)
        return -1;
    int64_t n = 1;
    for (int32_t i = 0; i < s->rank; i++)
        if (s->d[i] < 0 || !kiln_mul_i64(n, s->d[i], &n))
            return -1;
    return n;
}

/* Write an inferred output into its descriptor; unknown inferred dims keep
 * known ones.  Returns whether the descriptor changed. */
static bool refine_desc(kiln_graph *g, kiln_tensor_desc *d, kiln_op_io *io)
{
    kiln_op_shape cur, s = io->s;
    desc_shape(d, &cur);
    if (s.rank < 0)
        s = cur;
    else if (cur.rank == s.rank)
        for (int32_t i = 0; i < s.rank; i++)
            if (s.d[i] < 0 && cur.d[i] >= 0)
                s.d[i] = cur.d[i];
    io->s = s;
    bool same = kiln_desc_dtype(d) == io->dtype && cur.rank == s.rank &&
                (s.rank <= 0 || memcmp(cur.d, s.d, (size_t)s.rank * sizeof(int64_t)) == 0);
    if (same)
        return false;
    kiln_desc_set_dtype(g, d, io->dtype);
    kiln_desc_set_shape(g, d, s.rank, s.rank > 0 ? s.d : NULL);
    return true;
}

static void free_outputs(kiln_op_value *out, uint32_t nout)
{
    for (uint32_t o = 0; o < nout; o++) {
        free(out[o].data);
        out[o].data = NULL;
    }
}

static bool alloc_outputs(const kiln_op_node *nd, kiln_op_value *out)
{
    for (uint32_t o = 0; o < nd->nout; o++) {
        int64_t n = shape_numel(&nd->out[o].s), nb;
        size_t es = kiln_dtype_size(nd->out[o].dtype);
        out[o].dtype = nd->out[o].dtype;
        out[o].s = nd->out[o].s;
        out[o].borrowed = false;
        if (n < 0 || es == 0 || !kiln_mul_i64(n, (int64_t)es, &nb))
            goto fail;
        out[o].nbytes = (size_t)nb;
        out[o].data = calloc(1, out[o].nbytes ? out[o].nbytes : 1);
        if (!out[o].data)
            goto fail;
    }
    return true;
fail:
    free_outputs(out, nd->nout);
    return false;
}

/* The kernel of the engine that would run the node, so the value is what
 * execution computes. */
static bool eval_kernel(const kiln_op_node *nd, kiln_op_value *out)
{
    kiln_kernel_fn fn = NULL;
    void *state = NULL;
    const char *engine = NULL;
    if (kiln_engine_kernel(nd->g, nd->n, &fn, &state, &engine, NULL) != KILN_OK || !fn)
        return false;
    kiln_tensor *tin = calloc(nd->nin + 1, sizeof(kiln_tensor));
    kiln_tensor *tout = calloc(nd->nout + 1, sizeof(kiln_tensor));
    bool ok = tin && tout && alloc_outputs(nd, out);
    for (uint32_t i = 0; ok && i < nd->nin; i++) {
        const kiln_op_value *v = nd->in[i].val;
        if (nd->in[i].present && v)
            tin[i] = (kiln_tensor){v->dtype, (uint32_t)v->s.rank, v->s.d, v->data, v->nbytes};
        else if (nd->in[i].present) /* shape-only op: the shape without data */
            tin[i] =
                (kiln_tensor){nd->in[i].dtype, (uint32_t)nd->in[i].s.rank, nd->in[i].s.d, NULL, 0};
    }
    for (uint32_t o = 0; ok && o < nd->nout; o++)
        tout[o] = (kiln_tensor){out[o].dtype, (uint32_t)out[o].s.rank, out[o].s.d, out[o].data,
                                out[o].nbytes};
    if (ok) {
        kiln_kernel_args a = {sizeof(a), nd->g, nd->n, nd->nin, nd->nout, tin, tout, NULL, 0, 1};
        if (fn(state, &a, NULL) != KILN_OK) {
            free_outputs(out, nd->nout);
            ok = false;
        }
    }
    kiln_engine_kernel_release(nd->g, engine, state);
    free(tin);
    free(tout);
    return ok;
}

static bool eval_fold_fn(const kiln_op_node *nd, kiln_op_value *out)
{
    if (!nd->def->fold || !alloc_outputs(nd, out))
        return false;
    if (nd->def->fold(nd, out, NULL) == KILN_OK)
        return true;
    free_outputs(out, nd->nout);
    return false;
}

/* A node name not used in @p g: base, else base_1, base_2, ... */
static void unique_name(kiln_graph *g, const char *base, char *buf, size_t size)
{
    snprintf(buf, size, "%s", base);
    for (uint32_t i = 1; kiln_graph_find_node(g, buf); i++)
        snprintf(buf, size, "%s_%u", base, i);
}

static kiln_status set_const(kiln_graph *g, kiln_node_id c, const kiln_op_value *v,
                             const char *stream_label)
{
    kiln_tensor_value t = {v->dtype, (uint32_t)v->s.rank, v->s.d, v->data, v->nbytes};
    kiln_attrs *a = kiln_node_attrs_mut(g, c);
    if (!a)
        return KILN_ERR_NOMEM;
    kiln_attrs_clear(a);
    kiln_status st = kiln_attrs_set_tensor(a, "value", &t);
    if (st == KILN_OK)
        st = kiln_attrs_set_bool(a, "_is_from_constant_folding", true);
    if (st == KILN_OK && stream_label)
        st = kiln_attrs_set_string(a, "_stream_label", stream_label);
    if (st == KILN_OK)
        st = kiln_node_set_op(g, c, "Const");
    return st;
}

/* Replace @p n by Const nodes holding @p vals. */
static kiln_status replace_by_consts(kiln_pass_ctx *ctx, kiln_graph *g, kiln_node_id n,
                                     const kiln_op_node *nd, const kiln_op_value *vals)
{
    kiln_error *err = kiln_pass_error(ctx);
    /* copies: interning the names of new nodes may move strings */
    char nbuf[512], obuf[64];
    snprintf(nbuf, sizeof(nbuf), "%s", nd->name);
    snprintf(obuf, sizeof(obuf), "%s", nd->op);
    char label_buf[256], *label = NULL;
    const char *sl = NULL;
    if (kiln_attrs_get_string(kiln_node_attrs(g, n), "_stream_label", &sl) && sl) {
        snprintf(label_buf, sizeof(label_buf), "%s", sl);
        label = label_buf;
    }
    /* producers, to remove the Consts folding orphans */
    kiln_node_id *prod = calloc(nd->nin + 1, sizeof(*prod));
    if (!prod)
        return kiln_errorf(err, KILN_ERR_NOMEM, "ConstantFoldingPass: out of memory");
    for (uint32_t i = 0; i < nd->nin; i++)
        prod[i] = kiln_node_input_peer(g, n, i).node;
    kiln_status st = KILN_OK;
    /* outputs 1..: new Const nodes with n's control inputs */
    for (uint32_t o = 1; o < nd->nout && st == KILN_OK; o++) {
        if (kiln_node_output_use_count(g, n, o) == 0)
            continue;
        char base[600], name[640];
        snprintf(base, sizeof(base), "%s_%u", nbuf, o);
        unique_name(g, base, name, sizeof(name));
        kiln_node_id c = kiln_graph_add_node(g, name, "Const", 0, 1);
        if (!c) {
            st = KILN_ERR_NOMEM;
            break;
        }
        if ((st = kiln_desc_copy(g, kiln_node_output_desc(g, c, 0),
                                 kiln_node_output_desc(g, n, o))) != KILN_OK ||
            (st = set_const(g, c, &vals[o], label)) != KILN_OK)
            break;
        for (uint32_t k = kiln_ctrl_in_first(g, n); k && st == KILN_OK; k = kiln_ctrl_in_next(g, k))
            st = kiln_ctrl_add(g, kiln_ctrl_src(g, k), c);
        uint32_t u = kiln_use_first(g, n, o);
        while (u && st == KILN_OK) {
            uint32_t next = kiln_use_next(g, u);
            kiln_anchor d = kiln_use_dst(g, u);
            kiln_edge_remove(g, d.node, d.index);
            st = kiln_edge_add(g, c, 0, d.node, d.index);
            kiln_pass_repass(ctx, g, d.node);
            u = next;
        }
        kiln_pass_explain(ctx, g, c, "inserted: output %u of %s (%s) folded to a constant", o, nbuf,
                          obuf);
    }
    /* output 0: n itself becomes the Const */
    if (st == KILN_OK && (st = kiln_node_set_input_count(g, n, 0)) == KILN_OK && nd->nout > 1)
        st = kiln_node_set_output_count(g, n, 1);
    if (st == KILN_OK)
        st = set_const(g, n, &vals[0], label);
    if (st != KILN_OK) {
        free(prod);
        return kiln_errorf(err, st,
                           "ConstantFoldingPass: node %s (%s): replacing it by constants "
                           "failed",
                           nbuf, obuf);
    }
    for (uint32_t u = kiln_use_first(g, n, 0); u; u = kiln_use_next(g, u))
        kiln_pass_repass(ctx, g, kiln_use_dst(g, u).node);
    /* Const producers nobody reads any more go (GE: FoldingPass::Folding) */
    for (uint32_t i = 0; i < nd->nin; i++) {
        kiln_node_id p = prod[i];
        if (!p || !kiln_node_is_live(g, p) || !(kiln_node_op_flags(g, p) & KILN_OP_CONSTANT))
            continue;
        if (kiln_node_output_use_count(g, p, 0) || kiln_node_ctrl_out_count(g, p) ||
            attr_true(kiln_node_attrs(g, p), "_cannot_be_deleted"))
            continue;
        kiln_pass_explain(ctx, g, p, "removed: constant input of folded %s has no consumer left",
                          nbuf);
        kiln_pass_node_deleted(ctx, g, p);
        if (kiln_graph_remove_node(g, p) == KILN_OK)
            kiln_pass_stat_add(ctx, "consts_removed", 1);
        for (uint32_t j = i + 1; j < nd->nin; j++)
            if (prod[j] == p)
                prod[j] = 0;
    }
    free(prod);
    return KILN_OK;
}

static kiln_status cf_run(void *inst, kiln_pass_ctx *ctx, kiln_graph *g, kiln_node_id n)
{
    const cf_inst *p = inst;
    if (kiln_pass_after_subgraph(ctx))
        return KILN_OK;
    const kiln_op_def *def = kiln_node_op_def(g, n);
    const uint32_t never = KILN_OP_DATA_LIKE | KILN_OP_CONSTANT | KILN_OP_GRAPH_OUTPUT |
                           KILN_OP_CONTROL_FLOW | KILN_OP_STATEFUL | KILN_OP_REFERENCE |
                           KILN_OP_NO_FOLD;
    if (!def || (def->flags & never) || kiln_node_subgraph_count(g, n))
        return KILN_OK;
    kiln_op_node nd = {g,
                       n,
                       kiln_node_attrs(g, n),
                       kiln_node_op_str(g, n),
                       kiln_node_name_str(g, n),
                       kiln_node_input_count(g, n),
                       kiln_node_output_count(g, n),
                       NULL,
                       NULL,
                       def};
    if (nd.nout == 0)
        return KILN_OK;
    kiln_error *err = kiln_pass_error(ctx);
    /* up to CF_SMALL inputs and outputs (most nodes) on the stack */
    enum { CF_SMALL = 8 };
    kiln_op_io in_buf[CF_SMALL + 1], out_buf[CF_SMALL + 1];
    kiln_op_value ival_buf[CF_SMALL + 1], oval_buf[CF_SMALL + 1];
    bool small_in = nd.nin <= CF_SMALL, small_out = nd.nout <= CF_SMALL;
    if (small_in) {
        memset(in_buf, 0, (nd.nin + 1) * sizeof(*in_buf));
        memset(ival_buf, 0, (nd.nin + 1) * sizeof(*ival_buf));
    }
    if (small_out) {
        memset(out_buf, 0, (nd.nout + 1) * sizeof(*out_buf));
        memset(oval_buf, 0, (nd.nout + 1) * sizeof(*oval_buf));
    }
    nd.in = small_in ? in_buf : calloc(nd.nin + 1, sizeof(kiln_op_io));
    nd.out = small_out ? out_buf : calloc(nd.nout + 1, sizeof(kiln_op_io));
    kiln_op_value *ivals = small_in ? ival_buf : calloc(nd.nin + 1, sizeof(kiln_op_value));
    kiln_op_value *ovals = small_out ? oval_buf : calloc(nd.nout + 1, sizeof(kiln_op_value));
    kiln_status st = KILN_OK;
    if (!nd.in || !nd.out || !ivals || !ovals) {
        st = kiln_errorf(err, KILN_ERR_NOMEM, "ConstantFoldingPass: out of memory");
        goto out;
    }
    bool all_const = true, any = false;
    for (uint32_t i = 0; i < nd.nin; i++) {
        kiln_anchor a = kiln_node_input_peer(g, n, i);
        nd.in[i].present = a.node != 0;
        if (!a.node)
            continue;
        any = true;
        const kiln_tensor_desc *d = kiln_node_output_desc(g, a.node, a.index);
        nd.in[i].dtype = kiln_desc_dtype(d);
        desc_shape(d, &nd.in[i].s);
        if (const_value(g, a, &ivals[i])) {
            nd.in[i].val = &ivals[i];
            nd.in[i].dtype = ivals[i].dtype;
            nd.in[i].s = ivals[i].s;
        } else {
            all_const = false;
        }
    }
    for (uint32_t o = 0; o < nd.nout; o++) {
        const kiln_tensor_desc *d = kiln_node_output_desc(g, n, o);
        nd.out[o].present = true;
        nd.out[o].dtype = kiln_desc_dtype(d);
        desc_shape(d, &nd.out[o].s);
    }
    /* 1. the InferShape half of the fixpoint */
    if (p->infer && def->infer) {
        /* InferShapes reports inputs no execution accepts; here such a node is
         * only left alone */
        if (def->infer(&nd, NULL) != KILN_OK) {
            kiln_pass_stat_add(ctx, "infer_failed", 1);
            goto out;
        }
        bool changed = false;
        for (uint32_t o = 0; o < nd.nout; o++)
            changed |= refine_desc(g, kiln_node_output_desc(g, n, o), &nd.out[o]);
        if (changed) {
            kiln_pass_stat_add(ctx, "shapes_refined", 1);
            for (uint32_t o = 0; o < nd.nout; o++)
                for (uint32_t u = kiln_use_first(g, n, o); u; u = kiln_use_next(g, u))
                    kiln_pass_repass(ctx, g, kiln_use_dst(g, u).node);
        }
    }
    /* 2. folding */
    bool shape_only = (def->flags & KILN_OP_SHAPE_ONLY) && nd.nin > 0 && nd.in[0].present &&
                      shape_numel(&nd.in[0].s) >= 0;
    if (!any || (!all_const && !shape_only))
        goto out;
    if (kiln_attrs_has(nd.attrs, "no_need_constant_folding")) {
        kiln_pass_stat_add(ctx, "skipped_no_need_constant_folding", 1);
        goto out;
    }
    if (attr_true(nd.attrs, "_cannot_be_deleted") ||
        attr_true(nd.attrs, "_do_not_constant_folding"))
        goto out;
    bool all_empty = true;
    for (uint32_t o = 0; o < nd.nout; o++) {
        int64_t k = shape_numel(&nd.out[o].s);
        if (k < 0)
            goto out;
        if (k > p->max_elements) {
            kiln_pass_stat_add(ctx, "skipped_too_large", 1);
            goto out;
        }
        all_empty &= k == 0;
    }
    if (all_empty)
        goto out;
    bool by_kernel = eval_kernel(&nd, ovals);
    if (!by_kernel && !eval_fold_fn(&nd, ovals))
        goto out;
    if ((st = replace_by_consts(ctx, g, n, &nd, ovals)) != KILN_OK)
        goto out;
    kiln_pass_stat_add(ctx, "folded", 1);
    kiln_pass_stat_add(ctx, by_kernel ? "folded_by_kernel" : "folded_by_fold_fn", 1);
    kiln_pass_stat_add(ctx, "outputs_folded", nd.nout);
out:
    if (ovals)
        free_outputs(ovals, nd.nout);
    if (!small_out) {
        free(ovals);
        free(nd.out);
    }
    if (!small_in) {
        free(ivals);
        free(nd.in);
    }
    return st;
}

static void remove_isolated(kiln_pass_ctx *ctx, kiln_graph *g)
{
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n;) {
        kiln_node_id next = kiln_graph_next_node(g, n);
        if ((kiln_node_op_flags(g, n) & KILN_OP_CONSTANT) && !kiln_node_ctrl_in_count(g, n) &&
            !kiln_node_ctrl_out_count(g, n) && kiln_node_output_count(g, n) == 1 &&
            !kiln_node_output_use_count(g, n, 0) &&
            !attr_true(kiln_node_attrs(g, n), "_cannot_be_deleted")) {
            kiln_pass_explain(ctx, g, n, "removed: isolated Const (round 2)");
            kiln_pass_node_deleted(ctx, g, n);
            if (kiln_graph_remove_node(g, n) == KILN_OK)
                kiln_pass_stat_add(ctx, "isolated_consts_removed", 1);
        }
        n = next;
    }
}

static kiln_status cf_finish(void *inst, kiln_pass_ctx *ctx, kiln_graph *root)
{
    const cf_inst *p = inst;
    if (p->round != 2)
        return KILN_OK;
    remove_isolated(ctx, root);
    uint32_t ns = kiln_graph_all_subgraph_count(root);
    for (uint32_t i = 0; i < ns; i++)
        remove_isolated(ctx, kiln_graph_all_subgraph(root, i));
    return KILN_OK;
}

const kiln_pass_desc kiln_constant_folding_pass = {
    .struct_size = sizeof(kiln_pass_desc),
    .kind = KILN_PASS_KIND_NODE,
    .name = "ConstantFoldingPass",
    .summary = "compute nodes whose inputs are constants (re-inferring shapes to a fixpoint)",
    .flags = KILN_PASS_AFTER_GRAPH,
    .option_count = sizeof(cf_options) / sizeof(cf_options[0]),
    .options = cf_options,
    .create = cf_create,
    .destroy = cf_destroy,
    .run_node = cf_run,
    .on_finish_graph = cf_finish,
};

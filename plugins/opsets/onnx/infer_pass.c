/*
 * infer_pass.c - the graph pass InferShapes (infer_shapes_pass): sets
 * every output descriptor's dtype and shape, in topological order, and
 * propagates constant values so that shape-computing sub-graphs
 * (Shape -> Gather -> ... -> Reshape) and If conditions become known.
 *
 *   - Engine- and op-set-independent: a node's op is looked up in the op
 *     registry (kiln_op_find, O(1) by symbol) and its inference function
 *     called, whichever plugin registered it; its arity ranges are checked;
 *     its flags say whether it may be folded (not data-like, constant,
 *     control-flow, stateful or no-fold; shape-only ops need only the input
 *     shape).  An op nobody registered keeps its declared outputs (warning).
 *
 *   - Root Data nodes keep their descriptors as given; the session option
 *     kiln.input_shape.<name>=d0,d1,... sets the shape of Data node <name>
 *     ("" = scalar).
 *   - A While with cond and body subgraphs (GE's form) is inferred to a
 *     fixpoint: the body is inferred again from the join of the loop
 *     variables' shapes and its results until two inferences agree (bounded,
 *     else an error naming the node).
 *   - Subgraphs are handled here (flag KILN_PASS_NO_SUBGRAPHS): a branch's
 *     Data nodes take the descriptor and known value of the parent's input
 *     _parent_node_index; an If whose condition value is known is inlined
 *     (infer_fold.c) and the walk restarts on the new order; otherwise both
 *     branches are inferred and the If's outputs merge their results.
 *   - A node whose inputs are all known and whose outputs hold at most
 *     INFER_FOLD_MAX_ELEMS elements is evaluated; with fold=true (default)
 *     it becomes a Const, and Consts left without consumers are removed.
 *   - Inferred dims that stay unknown (-1) keep a known dim the descriptor
 *     already had (ONNX value_info); errors name the node and the shapes.
 */
#include "infer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct pass_inst {
    bool fold;
} pass_inst;

/* What one run of the pass needs everywhere. */
typedef struct run_ctx {
    const pass_inst *opt;
    kiln_pass_ctx *pc;
    kiln_error *err;
    bool changed;
    int64_t folded, inlined;
    /* op-type symbols of the graph's context, looked up once per run (0 = no
     * node has that type) */
    kiln_sym s_data, s_netout, s_if, s_while;
} run_ctx;

static bool is_op(kiln_sym op, kiln_sym want) { return want && op == want; }

/* Per graph: known values per node output, and which nodes are done. */
typedef struct gstate {
    kiln_graph *g;
    uint32_t cap;
    infer_val **vals; /* [id] -> array of output values (NULL = none known) */
    uint32_t *nvals;  /* [id] -> length of vals[id] */
    uint8_t *done;
    const infer_io *pin; /* the parent node's inputs (subgraphs), else NULL */
    uint32_t npin;
    bool folded;
} gstate;

static kiln_status gs_grow(gstate *gs, kiln_error *err)
{
    uint32_t lim = kiln_graph_id_limit(gs->g);
    if (lim <= gs->cap)
        return KILN_OK;
    infer_val **v = realloc(gs->vals, lim * sizeof(*v));
    if (v)
        gs->vals = v;
    uint8_t *d = realloc(gs->done, lim);
    if (d)
        gs->done = d;
    uint32_t *nv = realloc(gs->nvals, lim * sizeof(*nv));
    if (nv)
        gs->nvals = nv;
    if (!v || !d || !nv)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    memset(gs->vals + gs->cap, 0, (lim - gs->cap) * sizeof(*v));
    memset(gs->nvals + gs->cap, 0, (lim - gs->cap) * sizeof(*nv));
    memset(gs->done + gs->cap, 0, lim - gs->cap);
    gs->cap = lim;
    return KILN_OK;
}

static void gs_free(gstate *gs)
{
    for (uint32_t i = 0; i < gs->cap; i++) {
        if (!gs->vals[i])
            continue;
        for (uint32_t o = 0; o < gs->nvals[i]; o++)
            infer_val_free(&gs->vals[i][o]);
        free(gs->vals[i]);
    }
    free(gs->vals);
    free(gs->nvals);
    free(gs->done);
}

static const infer_val *gs_val(const gstate *gs, kiln_anchor a)
{
    if (!a.node || a.node >= gs->cap || !gs->vals[a.node] || !gs->vals[a.node][a.index].data)
        return NULL;
    return &gs->vals[a.node][a.index];
}

static void desc_shape(const kiln_tensor_desc *d, infer_shape *s)
{
    infer_shape_unknown(s);
    int32_t r = d ? kiln_desc_rank(d) : -1;
    if (r < 0 || r > INFER_MAX_RANK)
        return;
    s->rank = r;
    const int64_t *dims = kiln_desc_dims(d);
    for (int32_t i = 0; i < r; i++)
        s->d[i] = dims[i];
}

/* Write dtype and shape into a descriptor; unknown inferred dims keep known ones. */
static void write_desc(run_ctx *rc, kiln_graph *g, kiln_tensor_desc *d, const infer_io *io)
{
    infer_shape cur, s = io->s;
    desc_shape(d, &cur);
    if (s.rank < 0)
        s = cur;
    else if (cur.rank == s.rank)
        for (int32_t i = 0; i < s.rank; i++)
            if (s.d[i] < 0 && cur.d[i] >= 0)
                s.d[i] = cur.d[i];
    bool same = kiln_desc_dtype(d) == io->dtype && cur.rank == s.rank &&
                (s.rank <= 0 || memcmp(cur.d, s.d, (size_t)s.rank * sizeof(int64_t)) == 0);
    if (same)
        return;
    rc->changed = true;
    kiln_desc_set_dtype(g, d, io->dtype);
    kiln_desc_set_shape(g, d, s.rank, s.rank > 0 ? s.d : NULL);
    const kiln_attrs *a = kiln_desc_attrs(d);
    const char *const *dp;
    uint32_t n;
    if (kiln_attrs_get_list_string(a, "_onnx_dim_params", &dp, &n) &&
        ((int32_t)n != s.rank || infer_shape_known(&s)))
        kiln_attrs_remove(kiln_desc_attrs_mut(g, d), "_onnx_dim_params");
}

/* kiln.input_shape.<name>=d0,d1,... for a root Data node. */
static kiln_status bind_input(run_ctx *rc, kiln_graph *g, kiln_node_id n)
{
    char key[600];
    snprintf(key, sizeof(key), "kiln.input_shape.%s", kiln_node_name_str(g, n));
    const char *v = kiln_pass_session_option(rc->pc, key);
    if (!v)
        return KILN_OK;
    infer_io io;
    io.s.rank = 0;
    const char *p = v;
    while (*p) {
        char *end;
        long long x = strtoll(p, &end, 10);
        if (end == p || x < 0 || io.s.rank >= INFER_MAX_RANK || (*end && *end != ','))
            return kiln_errorf(rc->err, KILN_ERR_PARAM,
                               "option %s=%s: expected comma-separated dims >= 0", key, v);
        io.s.d[io.s.rank++] = x;
        p = *end ? end + 1 : end;
    }
    kiln_tensor_desc *d = kiln_node_output_desc(g, n, 0);
    io.dtype = kiln_desc_dtype(d);
    kiln_desc_set_shape(g, d, -1, NULL); /* the option replaces the declared shape */
    write_desc(rc, g, d, &io);
    rc->changed = true;
    return KILN_OK;
}

/* kiln.input_value.<name>=v0,v1,... : a root Data node whose value is known. */
static kiln_status bind_value(run_ctx *rc, kiln_graph *g, kiln_node_id n, infer_val *val)
{
    char key[600];
    snprintf(key, sizeof(key), "kiln.input_value.%s", kiln_node_name_str(g, n));
    const char *v = kiln_pass_session_option(rc->pc, key);
    if (!v)
        return KILN_OK;
    double x[INFER_FOLD_MAX_ELEMS];
    size_t cnt = 0;
    for (const char *p = v; *p && cnt < INFER_FOLD_MAX_ELEMS;) {
        char *end;
        x[cnt++] = strtod(p, &end);
        if (end == p || (*end && *end != ','))
            return kiln_errorf(rc->err, KILN_ERR_PARAM, "option %s=%s: expected numbers", key, v);
        p = *end ? end + 1 : end;
    }
    kiln_tensor_desc *d = kiln_node_output_desc(g, n, 0);
    infer_shape s;
    desc_shape(d, &s);
    if (!infer_shape_known(&s)) {
        s.rank = cnt == 1 ? 0 : 1;
        s.d[0] = (int64_t)cnt;
    }
    char sb[160];
    if (infer_shape_numel(&s) != (int64_t)cnt)
        return kiln_errorf(rc->err, KILN_ERR_PARAM, "option %s: %zu values for input shape %s", key,
                           cnt, infer_shape_str(&s, sb, sizeof(sb)));
    infer_io io = {true, kiln_desc_dtype(d), s, NULL};
    write_desc(rc, g, d, &io);
    if (infer_val_alloc(val, io.dtype, &s) != KILN_OK)
        return kiln_errorf(rc->err, KILN_ERR_PARAM, "option %s: unsupported dtype", key);
    for (size_t i = 0; i < cnt; i++) {
        if (io.dtype == KILN_DT_FLOAT32)
            ((float *)val->data)[i] = (float)x[i];
        else if (io.dtype == KILN_DT_FLOAT64)
            ((double *)val->data)[i] = x[i];
        else if (io.dtype == KILN_DT_INT64)
            ((int64_t *)val->data)[i] = (int64_t)x[i];
        else if (io.dtype == KILN_DT_INT32)
            ((int32_t *)val->data)[i] = (int32_t)x[i];
        else if (io.dtype == KILN_DT_BOOL)
            ((uint8_t *)val->data)[i] = x[i] != 0;
        else
            return kiln_errorf(rc->err, KILN_ERR_PARAM, "option %s: unsupported dtype %s", key,
                               kiln_dtype_name(io.dtype));
    }
    return KILN_OK;
}

static kiln_status infer_graph(run_ctx *rc, kiln_graph *g, const infer_io *pin, uint32_t npin);

/* An If: inline when the condition is known, else infer both branches and merge. */
static kiln_status do_if(run_ctx *rc, gstate *gs, infer_node *nd, bool *restart)
{
    kiln_graph *g = gs->g, *br[2] = {NULL, NULL};
    for (uint32_t s = 0; s < kiln_node_subgraph_count(g, nd->n); s++) {
        const char *role = NULL;
        kiln_graph *sg = kiln_node_subgraph(g, nd->n, s, &role);
        if (role && strcmp(role, "then_branch") == 0)
            br[0] = sg;
        else if (role && strcmp(role, "else_branch") == 0)
            br[1] = sg;
    }
    if (!br[0] || !br[1])
        return infer_fail(nd, rc->err, KILN_ERR_INVALID, "needs then_branch and else_branch");
    const infer_val *c = nd->nin ? nd->in[0].val : NULL;
    if (c && infer_val_numel(c) == 1) {
        kiln_graph *take = infer_val_f64(c, 0) != 0 ? br[0] : br[1];
        kiln_pass_explain(rc->pc, g, nd->n, "If inlined: condition is %s, took %s",
                          take == br[0] ? "true" : "false", kiln_graph_name(take));
        kiln_status st = infer_inline_if(g, nd->n, take, rc->err);
        if (st == KILN_OK) {
            rc->inlined++;
            rc->changed = gs->folded = *restart = true;
        }
        return st;
    }
    /* A branch that cannot be inferred with these shapes cannot be taken at run
     * time either: it is reported, and the If's outputs come from the other. */
    kiln_error *saved = rc->err;
    bool ok[2];
    rc->err = NULL;
    for (int b = 0; b < 2; b++)
        ok[b] = infer_graph(rc, br[b], nd->in, nd->nin) == KILN_OK;
    rc->err = saved;
    if (!ok[0] && !ok[1]) {
        infer_graph(rc, br[0], nd->in, nd->nin); /* again, to record the cause */
        return kiln_error_push(rc->err, "subgraph %s", kiln_graph_name(br[0]));
    }
    for (int b = 0; b < 2; b++)
        if (!ok[b])
            kiln_diag(rc->pc, KILN_SEV_WARNING,
                      "node %s (If): branch %s is inconsistent with the bound "
                      "shapes (it cannot run); outputs taken from the other branch",
                      nd->name, kiln_graph_name(br[b]));
    bool seen[64] = {false};
    for (int b = 0; b < 2; b++) {
        if (!ok[b])
            continue;
        for (kiln_node_id m = kiln_graph_next_node(br[b], 0); m;
             m = kiln_graph_next_node(br[b], m)) {
            if (!is_op(kiln_node_op(br[b], m), rc->s_netout))
                continue;
            for (uint32_t i = 0; i < kiln_node_input_count(br[b], m); i++) {
                int64_t idx = i;
                const kiln_tensor_desc *d = kiln_node_input_desc(br[b], m, i);
                if (d)
                    kiln_attrs_get_int(kiln_desc_attrs(d), "_parent_node_index", &idx);
                if (idx < 0 || idx >= (int64_t)nd->nout || !d)
                    continue;
                infer_io io = {true, kiln_desc_dtype(d), {0, {0}}, NULL};
                desc_shape(d, &io.s);
                infer_io *o = &nd->out[idx];
                if (idx >= 64 || !seen[idx]) {
                    *o = io;
                    if (idx < 64)
                        seen[idx] = true;
                } else if (o->s.rank != io.s.rank) {
                    infer_shape_unknown(&o->s);
                } else {
                    for (int32_t k = 0; k < io.s.rank; k++)
                        if (o->s.d[k] != io.s.d[k])
                            o->s.d[k] = -1;
                }
            }
        }
    }
    return KILN_OK;
}

/* ---- While: body inferred until two inferences agree (GE's InferShape of While) ---- */

/* Each inference that disagrees turns at least one dim or one rank of a loop
 * variable unknown, so 2 + the sum of (rank + 1) inferences always suffice;
 * the bound is a safety net. */

/* One output descriptor of a loop subgraph as it was before the loop was inferred. */
typedef struct desc_snap {
    kiln_graph *g;
    kiln_node_id n;
    uint32_t o;
    kiln_dtype dt;
    infer_shape s;
} desc_snap;

static kiln_status snap_graph(kiln_graph *g, desc_snap **v, uint32_t *n, uint32_t *cap)
{
    for (kiln_node_id m = kiln_graph_next_node(g, 0); m; m = kiln_graph_next_node(g, m))
        for (uint32_t o = 0; o < kiln_node_output_count(g, m); o++) {
            if (*n == *cap) {
                uint32_t nc = *cap ? *cap * 2 : 32;
                desc_snap *nv = realloc(*v, nc * sizeof(*nv));
                if (!nv)
                    return KILN_ERR_NOMEM;
                *v = nv;
                *cap = nc;
            }
            const kiln_tensor_desc *d = kiln_node_output_desc(g, m, o);
            desc_snap *e = &(*v)[(*n)++];
            e->g = g, e->n = m, e->o = o, e->dt = kiln_desc_dtype(d);
            desc_shape(d, &e->s);
        }
    return KILN_OK;
}

static bool snap_same(const desc_snap *e, const kiln_tensor_desc *d)
{
    infer_shape s;
    desc_shape(d, &s);
    return kiln_desc_dtype(d) == e->dt && s.rank == e->s.rank &&
           (s.rank <= 0 || memcmp(s.d, e->s.d, (size_t)s.rank * sizeof(int64_t)) == 0);
}

/* Back to the declared descriptors, the Data nodes fed by the loop unknown so
 * they take exactly the loop variables' current shapes; with @p forget (the
 * inferences after the first) the outputs of every op with an inference
 * function unknown too, so no dim of an earlier iteration survives. */
static void snap_restore(const desc_snap *v, uint32_t n, kiln_sym s_data, bool forget)
{
    for (uint32_t i = 0; i < n; i++) {
        const desc_snap *e = &v[i];
        if (!kiln_node_is_live(e->g, e->n) || e->o >= kiln_node_output_count(e->g, e->n))
            continue;
        kiln_tensor_desc *d = kiln_node_output_desc(e->g, e->n, e->o);
        kiln_desc_set_dtype(e->g, d, e->dt);
        const kiln_op_def *def = kiln_node_op_def(e->g, e->n);
        if ((s_data && kiln_node_op(e->g, e->n) == s_data &&
             kiln_attrs_has(kiln_node_attrs(e->g, e->n), "_parent_node_index")) ||
            (forget && def && def->infer && !(def->flags & KILN_OP_CONSTANT)))
            kiln_desc_set_shape(e->g, d, -1, NULL);
        else
            kiln_desc_set_shape(e->g, d, e->s.rank, e->s.rank > 0 ? e->s.d : NULL);
    }
}

/* The loop-carried value @p i after one body run: the body NetOutput input
 * with _parent_node_index i (else position i); false when there is none. */
static bool body_result(run_ctx *rc, kiln_graph *body, uint32_t i, infer_io *io)
{
    for (kiln_node_id m = kiln_graph_next_node(body, 0); m; m = kiln_graph_next_node(body, m)) {
        if (!is_op(kiln_node_op(body, m), rc->s_netout))
            continue;
        for (uint32_t k = 0; k < kiln_node_input_count(body, m); k++) {
            int64_t idx = k;
            const kiln_tensor_desc *d = kiln_node_input_desc(body, m, k);
            if (d)
                kiln_attrs_get_int(kiln_desc_attrs(d), "_parent_node_index", &idx);
            kiln_anchor p = kiln_node_input_peer(body, m, k);
            if (idx != (int64_t)i || !p.node)
                continue;
            const kiln_tensor_desc *pd = kiln_node_output_desc(body, p.node, p.index);
            io->present = true;
            io->dtype = kiln_desc_dtype(pd);
            desc_shape(pd, &io->s);
            io->val = NULL;
            return true;
        }
    }
    return false;
}

/*
 * A While with `cond` and `body` subgraphs (GE's form: every input is a loop
 * variable, body output i is variable i's next value): infer cond and body
 * with the variables' shapes, join each body result with the variable (a dim
 * that differs becomes -1, a rank that differs unknown), and infer again from
 * the joined shapes until two inferences agree.  Values are not propagated
 * into the loop (they change from one iteration to the next).  The While's
 * outputs are the agreed shapes.  *handled is false for other While forms.
 */
static kiln_status do_while(run_ctx *rc, infer_node *nd, bool *handled)
{
    kiln_graph *cond = NULL, *body = NULL;
    for (uint32_t s = 0; s < kiln_node_subgraph_count(nd->g, nd->n); s++) {
        const char *role = NULL;
        kiln_graph *sg = kiln_node_subgraph(nd->g, nd->n, s, &role);
        if (role && strcmp(role, "cond") == 0)
            cond = sg;
        else if (role && strcmp(role, "body") == 0)
            body = sg;
    }
    *handled = cond && body;
    if (!*handled)
        return KILN_OK;
    uint32_t nv = nd->nin, nsnap = 0, capsnap = 0;
    infer_io *cur = calloc(nv + 1, sizeof(*cur));
    desc_snap *snap = NULL;
    kiln_status st = cur ? KILN_OK : KILN_ERR_NOMEM;
    if (st == KILN_OK && (st = snap_graph(cond, &snap, &nsnap, &capsnap)) == KILN_OK)
        st = snap_graph(body, &snap, &nsnap, &capsnap);
    if (st != KILN_OK) {
        free(cur);
        free(snap);
        return kiln_errorf(rc->err, KILN_ERR_NOMEM, "out of memory");
    }
    for (uint32_t i = 0; i < nv; i++) {
        cur[i] = nd->in[i];
        cur[i].val = NULL;
    }
    uint32_t limit = 2;
    for (uint32_t i = 0; i < nv; i++)
        limit += (uint32_t)(cur[i].s.rank > 0 ? cur[i].s.rank : 0) + 1;
    const bool changed_before = rc->changed;
    const kiln_sym s_data = kiln_sym_lookup(nd->g, "Data");
    bool agreed = false;
    uint32_t it;
    for (it = 0; it < limit && !agreed; it++) {
        snap_restore(snap, nsnap, s_data, it > 0);
        if ((st = infer_graph(rc, cond, cur, nv)) != KILN_OK ||
            (st = infer_graph(rc, body, cur, nv)) != KILN_OK) {
            kiln_error_push(rc->err, "node %s (While): inference %u of its subgraphs", nd->name,
                            it + 1);
            goto out;
        }
        agreed = true;
        for (uint32_t i = 0; i < nv; i++) {
            infer_io r;
            if (!body_result(rc, body, i, &r))
                continue; /* not carried: stays as given */
            if (r.dtype != cur[i].dtype) {
                st = infer_fail(nd, rc->err, KILN_ERR_INVALID,
                                "body turns loop variable %u from %s into %s", i,
                                kiln_dtype_name(cur[i].dtype), kiln_dtype_name(r.dtype));
                goto out;
            }
            infer_shape j = cur[i].s;
            if (j.rank >= 0 && r.s.rank != j.rank)
                infer_shape_unknown(&j);
            else
                for (int32_t k = 0; k < j.rank; k++)
                    if (j.d[k] != r.s.d[k])
                        j.d[k] = -1;
            if (j.rank != cur[i].s.rank ||
                (j.rank > 0 && memcmp(j.d, cur[i].s.d, (size_t)j.rank * sizeof(int64_t)) != 0)) {
                cur[i].s = j;
                agreed = false;
            }
        }
    }
    if (!agreed) {
        st = infer_fail(nd, rc->err, KILN_ERR_INVALID,
                        "body shapes did not converge after %u inferences", limit);
        goto out;
    }
    for (uint32_t o = 0; o < nd->nout && o < nv; o++) {
        nd->out[o] = cur[o];
        nd->out[o].val = NULL;
        /* a dim the loop makes unknown replaces the declared one */
        infer_shape ds;
        kiln_tensor_desc *od = kiln_node_output_desc(nd->g, nd->n, o);
        desc_shape(od, &ds);
        if (ds.rank != cur[o].s.rank ||
            (ds.rank > 0 && memcmp(ds.d, cur[o].s.d, (size_t)ds.rank * sizeof(int64_t)) != 0))
            kiln_desc_set_shape(nd->g, od, -1, NULL);
    }
    /* changed: only what differs from before the loop was inferred */
    bool changed = changed_before;
    for (uint32_t i = 0; i < nsnap && !changed; i++) {
        const desc_snap *e = &snap[i];
        changed = !kiln_node_is_live(e->g, e->n) || e->o >= kiln_node_output_count(e->g, e->n) ||
                  !snap_same(e, kiln_node_output_desc(e->g, e->n, e->o));
    }
    rc->changed = changed;
    kiln_pass_stat_add(rc->pc, "while_inferences", it);
out:
    free(cur);
    free(snap);
    return st;
}

/* Whether node @p nd can be evaluated now (its op registered, foldable by its flags). */
static bool foldable(const infer_node *nd)
{
    const uint32_t never = KILN_OP_DATA_LIKE | KILN_OP_CONSTANT | KILN_OP_GRAPH_OUTPUT |
                           KILN_OP_CONTROL_FLOW | KILN_OP_STATEFUL | KILN_OP_NO_FOLD;
    if (!nd->def || (nd->def->flags & never))
        return false;
    if (nd->nout == 0 || kiln_node_subgraph_count(nd->g, nd->n))
        return false;
    for (uint32_t o = 0; o < nd->nout; o++) {
        int64_t k = infer_shape_numel(&nd->out[o].s);
        if (k < 0 || k > INFER_FOLD_MAX_ELEMS)
            return false;
    }
    if (nd->def->flags & KILN_OP_SHAPE_ONLY) /* Shape, Size: the input's shape suffices */
        return nd->nin > 0 && infer_shape_known(&nd->in[0].s);
    bool any = false;
    for (uint32_t i = 0; i < nd->nin; i++) {
        if (nd->in[i].present && !nd->in[i].val)
            return false;
        any |= nd->in[i].present;
    }
    return any;
}

/* The node's anchor counts must fit its op's arity ranges. */
static kiln_status check_arity(const infer_node *nd, kiln_error *err)
{
    const kiln_op_def *d = nd->def;
    const char *what = NULL;
    uint32_t have = 0, lo = 0, hi = 0;
    if (nd->nin < d->min_inputs || nd->nin > d->max_inputs)
        what = "inputs", have = nd->nin, lo = d->min_inputs, hi = d->max_inputs;
    else if (nd->nout < d->min_outputs || nd->nout > d->max_outputs)
        what = "outputs", have = nd->nout, lo = d->min_outputs, hi = d->max_outputs;
    if (!what)
        return KILN_OK;
    char range[48];
    if (hi == KILN_OP_VARIADIC)
        snprintf(range, sizeof(range), "at least %u", lo);
    else if (lo == hi)
        snprintf(range, sizeof(range), "%u", lo);
    else
        snprintf(range, sizeof(range), "%u to %u", lo, hi);
    const char *plugin = kiln_op_plugin(nd->g, kiln_node_op(nd->g, nd->n));
    return kiln_errorf(err, KILN_ERR_INVALID,
                       "node %s (%s): has %u %s, but op %s (registered by %s) takes %s", nd->name,
                       nd->op, have, what, nd->op, plugin ? plugin : "?", range);
}

/* A shape whose known dims multiply past int64 (in elements, or in bytes of
 * @p dt) describes no tensor: refuse it before anything sizes a buffer or a
 * loop with it. */
static kiln_status check_extent(const infer_node *nd, const char *what, uint32_t i,
                                const infer_io *io, kiln_error *err)
{
    int64_t n = 1;
    bool ok = true;
    for (int32_t k = 0; k < io->s.rank && ok; k++)
        if (io->s.d[k] > 0)
            ok = kiln_mul_i64(n, io->s.d[k], &n);
    size_t es = kiln_dtype_size(io->dtype);
    if (ok && kiln_mul_i64(n, es ? (int64_t)es : 1, &n))
        return KILN_OK;
    char sb[160];
    return kiln_errorf(err, KILN_ERR_LIMIT,
                       "node %s (%s): %s %u: shape %s of %s has more elements or bytes than fit "
                       "in 64 bits",
                       nd->name, nd->op, what, i, infer_shape_str(&io->s, sb, sizeof(sb)),
                       kiln_dtype_name(io->dtype));
}

/* Keep the @p nout values of node @p n in @p gs when any is known (a node
 * whose outputs are all unknown keeps none: gs_val answers NULL for it
 * either way); @p vals is freed unless it is @p stack or kept. */
static kiln_status keep_values(gstate *gs, kiln_node_id n, infer_val *vals, uint32_t nout,
                               const infer_val *stack, kiln_error *err)
{
    bool any = false;
    for (uint32_t o = 0; o < nout && !any; o++)
        any = vals[o].data != NULL;
    if (gs->vals[n]) { /* an earlier try of this node (a restart) */
        for (uint32_t o = 0; o < gs->nvals[n]; o++)
            infer_val_free(&gs->vals[n][o]);
        free(gs->vals[n]);
        gs->vals[n] = NULL;
        gs->nvals[n] = 0;
    }
    if (!any) {
        if (vals != stack)
            free(vals);
        return KILN_OK;
    }
    if (vals == stack) {
        infer_val *v = malloc((nout + 1) * sizeof(*v));
        if (!v) {
            for (uint32_t o = 0; o < nout; o++)
                infer_val_free(&vals[o]);
            return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
        }
        memcpy(v, vals, nout * sizeof(*v));
        vals = v;
    }
    gs->vals[n] = vals;
    gs->nvals[n] = nout;
    return KILN_OK;
}

/* Inputs and outputs up to this count live on the stack (most ops). */
#define SMALL_IO 8

static kiln_status infer_one(run_ctx *rc, gstate *gs, kiln_node_id n, bool *restart)
{
    kiln_graph *g = gs->g;
    const kiln_sym op = kiln_node_op(g, n);
    bool loop = false; /* a While whose subgraphs do_while inferred */
    infer_node nd = {g,
                     n,
                     kiln_node_attrs(g, n),
                     kiln_node_op_str(g, n),
                     kiln_node_name_str(g, n),
                     kiln_node_input_count(g, n),
                     kiln_node_output_count(g, n),
                     NULL,
                     NULL,
                     kiln_op_find(g, op)};
    infer_io in_buf[SMALL_IO + 1], out_buf[SMALL_IO + 1];
    infer_val val_buf[SMALL_IO + 1];
    infer_val *vals = NULL;
    nd.in = nd.nin <= SMALL_IO ? in_buf : calloc(nd.nin + 1, sizeof(infer_io));
    nd.out = nd.nout <= SMALL_IO ? out_buf : calloc(nd.nout + 1, sizeof(infer_io));
    kiln_status st = KILN_OK;
    if (!nd.in || !nd.out) {
        st = kiln_errorf(rc->err, KILN_ERR_NOMEM, "out of memory");
        goto out;
    }
    if (nd.in == in_buf)
        memset(in_buf, 0, (nd.nin + 1) * sizeof(infer_io));
    if (nd.out == out_buf)
        memset(out_buf, 0, (nd.nout + 1) * sizeof(infer_io));
    for (uint32_t i = 0; i < nd.nin; i++) {
        kiln_anchor p = kiln_node_input_peer(g, n, i);
        nd.in[i].present = p.node != 0;
        const kiln_tensor_desc *d = p.node ? kiln_node_output_desc(g, p.node, p.index) : NULL;
        nd.in[i].dtype = d ? kiln_desc_dtype(d) : KILN_DT_FLOAT32;
        desc_shape(d, &nd.in[i].s);
        if ((st = check_extent(&nd, "input", i, &nd.in[i], rc->err)) != KILN_OK)
            goto out;
        nd.in[i].val = gs_val(gs, p);
        /* an input with a descriptor of its own follows its producer */
        if (d && kiln_node_input_has_desc(g, n, i))
            write_desc(rc, g, kiln_node_input_desc_mut(g, n, i), &nd.in[i]);
    }
    for (uint32_t o = 0; o < nd.nout; o++) {
        const kiln_tensor_desc *d = kiln_node_output_desc(g, n, o);
        nd.out[o].present = true;
        nd.out[o].dtype = kiln_desc_dtype(d);
        desc_shape(d, &nd.out[o].s);
    }
    vals = nd.nout <= SMALL_IO ? val_buf : calloc(nd.nout + 1, sizeof(infer_val));
    if (!vals) {
        st = kiln_errorf(rc->err, KILN_ERR_NOMEM, "out of memory");
        goto out;
    }
    if (vals == val_buf)
        memset(val_buf, 0, (nd.nout + 1) * sizeof(infer_val));
    if (nd.def && (st = check_arity(&nd, rc->err)) != KILN_OK)
        goto out;
    if (is_op(op, rc->s_data)) {
        int64_t k = -1;
        if (gs->pin && kiln_attrs_get_int(nd.attrs, "_parent_node_index", &k) && k >= 0 &&
            k < (int64_t)gs->npin && gs->pin[k].present && nd.nout) {
            nd.out[0] = gs->pin[k];
            if (gs->pin[k].val) {
                vals[0] = *gs->pin[k].val;
                vals[0].borrowed = true; /* owned by the parent's state */
            }
        } else if (!gs->pin && nd.nout) {
            if ((st = bind_input(rc, g, n)) == KILN_OK)
                st = bind_value(rc, g, n, &vals[0]);
            goto out;
        } else {
            goto out; /* as given */
        }
    } else if (is_op(op, rc->s_netout)) {
        goto out;
    } else if (is_op(op, rc->s_if)) {
        if ((st = do_if(rc, gs, &nd, restart)) != KILN_OK || *restart)
            goto out;
    } else if (is_op(op, rc->s_while) && (st = do_while(rc, &nd, &loop)) != KILN_OK) {
        goto out;
    } else if (loop) {
        /* outputs set by do_while */
    } else {
        infer_fn fn = nd.def ? nd.def->infer : NULL;
        if (!fn && kiln_node_subgraph_count(g, n)) {
            for (uint32_t s = 0; s < kiln_node_subgraph_count(g, n); s++)
                if ((st = infer_graph(rc, kiln_node_subgraph(g, n, s, NULL), nd.in, nd.nin)))
                    goto out;
        }
        if (!fn) {
            if (!nd.def) /* a registered op without inference declares its outputs */
                kiln_diag(rc->pc, KILN_SEV_WARNING,
                          "no inference for op %s (node %s): no loaded plugin registers the op; "
                          "outputs kept as declared",
                          nd.op, nd.name);
            goto out;
        }
        if ((st = fn(&nd, rc->err)) != KILN_OK)
            goto out;
    }
    for (uint32_t o = 0; o < nd.nout; o++)
        if ((st = check_extent(&nd, "output", o, &nd.out[o], rc->err)) != KILN_OK)
            goto out;
    for (uint32_t o = 0; o < nd.nout; o++)
        write_desc(rc, g, kiln_node_output_desc(g, n, o), &nd.out[o]);
    if (nd.def && (nd.def->flags & KILN_OP_CONSTANT)) {
        kiln_tensor_value t;
        if (nd.nout && kiln_attrs_get_tensor(nd.attrs, "value", &t))
            infer_val_from_tensor(&vals[0], &t);
    } else if (foldable(&nd) && infer_fold_eval(&nd, vals)) {
        if (rc->opt->fold && nd.nout == 1) {
            if ((st = infer_make_const(g, n, &vals[0], rc->err)) != KILN_OK)
                goto out;
            kiln_pass_explain(rc->pc, g, n, "folded %s to a constant", nd.op);
            rc->folded++;
            rc->changed = gs->folded = true;
        }
    }
out:
    if (vals) {
        kiln_status ks = keep_values(gs, n, vals, nd.nout, val_buf, rc->err);
        if (st == KILN_OK)
            st = ks;
    }
    if (nd.in != in_buf)
        free(nd.in);
    if (nd.out != out_buf)
        free(nd.out);
    return st;
}

/* Remove Const nodes nobody reads (left behind by folding and inlining). */
static void sweep_dead_consts(kiln_graph *g)
{
    bool again = true;
    while (again) {
        again = false;
        for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n)) {
            if (!(kiln_node_op_flags(g, n) & KILN_OP_CONSTANT) || kiln_node_ctrl_out_count(g, n) ||
                kiln_node_output_count(g, n) != 1 || kiln_node_output_use_count(g, n, 0))
                continue;
            kiln_graph_remove_node(g, n);
            again = true;
        }
    }
}

static kiln_status infer_graph(run_ctx *rc, kiln_graph *g, const infer_io *pin, uint32_t npin)
{
    gstate gs = {g, 0, NULL, NULL, NULL, pin, npin, false};
    kiln_node_id *order = NULL;
    kiln_status st;
    bool restart = true;
    while (restart) {
        restart = false;
        const kiln_node_id *o;
        uint32_t n;
        if ((st = kiln_graph_topo_order(g, &o, &n, rc->err)) != KILN_OK ||
            (st = gs_grow(&gs, rc->err)) != KILN_OK)
            goto out;
        free(order);
        order = malloc((n + 1) * sizeof(*order));
        if (!order) {
            st = kiln_errorf(rc->err, KILN_ERR_NOMEM, "out of memory");
            goto out;
        }
        memcpy(order, o, n * sizeof(*order));
        for (uint32_t i = 0; i < n && !restart; i++) {
            kiln_node_id id = order[i];
            if (gs.done[id] || !kiln_node_is_live(g, id))
                continue;
            if ((st = infer_one(rc, &gs, id, &restart)) != KILN_OK)
                goto out;
            gs.done[id] = 1;
        }
    }
    if (gs.folded)
        sweep_dead_consts(g);
out:
    free(order);
    gs_free(&gs);
    return st;
}

static const kiln_option_def infer_options[] = {
    {sizeof(kiln_option_def), KILN_OPT_BOOL, "fold", "true",
     "turn nodes whose value is computed (shape sub-graphs) into Const nodes", 0, 0},
};

static kiln_status infer_create(const kiln_options *opts, kiln_error *err, void **inst)
{
    pass_inst *p = calloc(1, sizeof(*p));
    if (!p)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    p->fold = true;
    kiln_options_get_bool(opts, "fold", &p->fold);
    *inst = p;
    return KILN_OK;
}

static void infer_destroy(void *inst) { free(inst); }

static kiln_pass_result infer_run(void *inst, kiln_pass_ctx *pc, kiln_graph *g)
{
    pass_inst dflt = {true};
    run_ctx rc = {inst ? (const pass_inst *)inst : &dflt,
                  pc,
                  kiln_pass_error(pc),
                  false,
                  0,
                  0,
                  kiln_sym_lookup(g, "Data"),
                  kiln_sym_lookup(g, "NetOutput"),
                  kiln_sym_lookup(g, "If"),
                  kiln_sym_lookup(g, "While")};
    if (infer_graph(&rc, g, NULL, 0) != KILN_OK)
        return KILN_PASS_FAILED;
    kiln_pass_stat_add(pc, "folded", rc.folded);
    kiln_pass_stat_add(pc, "if_inlined", rc.inlined);
    return rc.changed ? KILN_PASS_CHANGED : KILN_PASS_NOT_CHANGED;
}

const kiln_pass_desc infer_shapes_pass = {
    .struct_size = sizeof(kiln_pass_desc),
    .kind = KILN_PASS_KIND_GRAPH,
    .name = "InferShapes",
    .summary = "shape and dtype inference with constant folding of shape sub-graphs and If",
    .flags = KILN_PASS_NO_SUBGRAPHS,
    .option_count = sizeof(infer_options) / sizeof(infer_options[0]),
    .options = infer_options,
    .create = infer_create,
    .destroy = infer_destroy,
    .run_graph = infer_run,
};

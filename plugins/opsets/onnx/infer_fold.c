/*
 * infer_fold.c - value propagation for InferShapes: constant values
 * (infer_val), evaluation of a node whose inputs are known (the kernel of
 * the engine that runs it, through kiln_engine_kernel, else the op's fold
 * function, for the ONNX ops the built-in evaluator of infer_ops_eval.c), turning a computed node into a Const (fold=true), and
 * inlining an If whose condition is known: the taken branch's nodes are
 * copied into the parent graph (nested subgraphs deep-copied), its Data nodes
 * resolved to the If's inputs by _parent_node_index and its NetOutput inputs
 * wired to the If's consumers; the If (and with it both branches) is removed.
 */
#include "infer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- values ----------------------------------------------------------------- */

void infer_val_free(infer_val *v)
{
    if (!v->borrowed)
        free(v->data);
    v->data = NULL;
    v->nbytes = 0;
    v->borrowed = false;
}

kiln_status infer_val_alloc(infer_val *v, kiln_dtype dt, const infer_shape *s)
{
    int64_t n = infer_shape_numel(s);
    size_t es = kiln_dtype_size(dt);
    v->data = NULL;
    v->borrowed = false;
    int64_t nb;
    if (n < 0 || es == 0 || !kiln_mul_i64(n, (int64_t)es, &nb))
        return KILN_ERR_INVALID;
    v->dtype = dt;
    v->s = *s;
    v->nbytes = (size_t)nb;
    v->data = calloc(1, v->nbytes ? v->nbytes : 1);
    return v->data ? KILN_OK : KILN_ERR_NOMEM;
}

kiln_status infer_val_from_tensor(infer_val *v, const kiln_tensor_value *t)
{
    if (t->rank > INFER_MAX_RANK || kiln_dtype_size(t->dtype) == 0)
        return KILN_ERR_UNSUPPORTED;
    v->dtype = t->dtype;
    v->s.rank = (int32_t)t->rank;
    for (uint32_t i = 0; i < t->rank; i++)
        v->s.d[i] = t->dims[i];
    int64_t nb, n = infer_shape_numel(&v->s);
    if (n < 0 || !kiln_mul_i64(n, (int64_t)kiln_dtype_size(t->dtype), &nb) ||
        nb != (int64_t)t->nbytes)
        return KILN_ERR_INVALID;
    v->data = (void *)(uintptr_t)(t->data ? t->data : (const void *)"");
    v->nbytes = t->nbytes;
    v->borrowed = true;
    return KILN_OK;
}

/* ---- evaluation -------------------------------------------------------------- */

/*
 * Run the kernel of the engine that would execute the node (kiln_engine_kernel:
 * the node's placement, else the best engine listing the op), so a folded
 * value is what execution would compute; false when no engine has one or it
 * fails.
 */
static bool eval_kernel(const infer_node *nd, infer_val *out)
{
    kiln_kernel_fn fn = NULL;
    void *state = NULL;
    const char *engine = NULL;
    if (kiln_engine_kernel(nd->g, nd->n, &fn, &state, &engine, NULL) != KILN_OK || !fn)
        return false;
    kiln_tensor *tin = calloc(nd->nin + 1, sizeof(kiln_tensor));
    kiln_tensor *tout = calloc(nd->nout + 1, sizeof(kiln_tensor));
    bool ok = tin && tout;
    for (uint32_t i = 0; ok && i < nd->nin; i++) {
        const infer_val *v = nd->in[i].val;
        if (!nd->in[i].present)
            continue; /* optional input: data NULL, rank 0 */
        if (!v) {
            ok = false;
            break;
        }
        tin[i] = (kiln_tensor){v->dtype, (uint32_t)v->s.rank, v->s.d, v->data, v->nbytes};
    }
    for (uint32_t o = 0; ok && o < nd->nout; o++) {
        ok = infer_val_alloc(&out[o], nd->out[o].dtype, &nd->out[o].s) == KILN_OK;
        if (ok)
            tout[o] = (kiln_tensor){out[o].dtype, (uint32_t)out[o].s.rank, out[o].s.d,
                                    out[o].data, out[o].nbytes};
    }
    if (ok) {
        kiln_kernel_args a = {sizeof(a), nd->g, nd->n, nd->nin, nd->nout, tin, tout,
                              NULL, 0, 1};
        ok = fn(state, &a, NULL) == KILN_OK;
    }
    kiln_engine_kernel_release(nd->g, engine, state);
    free(tin);
    free(tout);
    if (!ok)
        for (uint32_t o = 0; o < nd->nout; o++)
            infer_val_free(&out[o]);
    return ok;
}

kiln_status infer_fold_builtin(const infer_node *nd, infer_val *out, kiln_error *err)
{
    (void)err;
    return infer_eval_builtin(nd, out) ? KILN_OK : KILN_ERR_UNSUPPORTED;
}

bool infer_fold_eval(const infer_node *nd, infer_val *out)
{
    if (eval_kernel(nd, out))
        return true;
    if (!nd->def || !nd->def->fold)
        return false;
    for (uint32_t o = 0; o < nd->nout; o++)
        if (infer_val_alloc(&out[o], nd->out[o].dtype, &nd->out[o].s) != KILN_OK) {
            for (uint32_t k = 0; k < o; k++)
                infer_val_free(&out[k]);
            return false;
        }
    if (nd->def->fold(nd, out, NULL) == KILN_OK)
        return true;
    for (uint32_t o = 0; o < nd->nout; o++)
        infer_val_free(&out[o]);
    return false;
}

kiln_status infer_make_const(kiln_graph *g, kiln_node_id n, const infer_val *v, kiln_error *err)
{
    kiln_tensor_value t = {v->dtype, (uint32_t)v->s.rank, v->s.d, v->data, v->nbytes};
    kiln_status st = kiln_node_set_input_count(g, n, 0);
    kiln_attrs *a = st == KILN_OK ? kiln_node_attrs_mut(g, n) : NULL;
    if (!a)
        return kiln_errorf(err, KILN_ERR_NOMEM, "node %s: folding failed",
                           kiln_node_name_str(g, n));
    kiln_attrs_clear(a);
    if ((st = kiln_attrs_set_tensor(a, "value", &t)) != KILN_OK ||
        (st = kiln_node_set_op(g, n, "Const")) != KILN_OK)
        return kiln_errorf(err, st, "node %s: folding failed", kiln_node_name_str(g, n));
    return KILN_OK;
}

/* ---- copying nodes between graphs ----------------------------------------------- */

/* A name not yet used in @p g: @p base, else base_1, base_2, ... */
static const char *unique_node_name(kiln_graph *g, const char *base, char *buf, size_t size)
{
    if (!kiln_graph_find_node(g, base))
        return base;
    for (uint32_t i = 1;; i++) {
        snprintf(buf, size, "%s_%u", base, i);
        if (!kiln_graph_find_node(g, buf))
            return buf;
    }
}

static bool subgraph_name_taken(kiln_graph *root, const char *name)
{
    if (strcmp(kiln_graph_name(root), name) == 0)
        return true;
    uint32_t n = kiln_graph_all_subgraph_count(root);
    for (uint32_t i = 0; i < n; i++)
        if (strcmp(kiln_graph_name(kiln_graph_all_subgraph(root, i)), name) == 0)
            return true;
    return false;
}

static kiln_status copy_graph(kiln_graph *dst, kiln_graph *src, kiln_error *err);

/* Copy node @p n of @p src into @p dst as @p name (attrs, descs, subgraphs; no edges). */
static kiln_node_id copy_node(kiln_graph *dst, kiln_graph *src, kiln_node_id n, const char *name,
                              kiln_error *err)
{
    uint32_t nin = kiln_node_input_count(src, n), nout = kiln_node_output_count(src, n);
    kiln_node_id c = kiln_graph_add_node(dst, name, kiln_node_op_str(src, n), nin, nout);
    if (!c) {
        kiln_errorf(err, KILN_ERR_NOMEM, "cannot copy node %s", name);
        return 0;
    }
    const kiln_attrs *a = kiln_node_attrs(src, n);
    if (a && kiln_attrs_copy(kiln_node_attrs_mut(dst, c), a) != KILN_OK)
        goto nomem;
    for (uint32_t o = 0; o < nout; o++)
        if (kiln_desc_copy(dst, kiln_node_output_desc(dst, c, o),
                           kiln_node_output_desc(src, n, o)) != KILN_OK)
            goto nomem;
    for (uint32_t i = 0; i < nin; i++)
        if (kiln_node_input_has_desc(src, n, i) &&
            kiln_desc_copy(dst, kiln_node_input_desc_mut(dst, c, i),
                           kiln_node_input_desc(src, n, i)) != KILN_OK)
            goto nomem;
    kiln_graph *root = kiln_graph_root(dst);
    for (uint32_t s = 0; s < kiln_node_subgraph_count(src, n); s++) {
        const char *role = NULL;
        kiln_graph *sg = kiln_node_subgraph(src, n, s, &role);
        char sname[512];
        snprintf(sname, sizeof(sname), "%s", kiln_graph_name(sg));
        for (uint32_t k = 1; subgraph_name_taken(root, sname); k++)
            snprintf(sname, sizeof(sname), "%s_%u", kiln_graph_name(sg), k);
        kiln_graph *ng = kiln_node_add_subgraph(dst, c, role, sname);
        if (!ng)
            goto nomem;
        if (copy_graph(ng, sg, err) != KILN_OK)
            return 0;
    }
    return c;
nomem:
    kiln_errorf(err, KILN_ERR_NOMEM, "cannot copy node %s", name);
    return 0;
}

/* Copy every node and edge of @p src into the empty @p dst (same names). */
static kiln_status copy_graph(kiln_graph *dst, kiln_graph *src, kiln_error *err)
{
    uint32_t lim = kiln_graph_id_limit(src);
    kiln_node_id *map = calloc(lim ? lim : 1, sizeof(kiln_node_id));
    if (!map)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    kiln_status st = KILN_OK;
    const kiln_attrs *ga = kiln_graph_attrs(src);
    if (ga && kiln_attrs_count(ga))
        kiln_attrs_copy(kiln_graph_attrs(dst), ga);
    for (kiln_node_id n = kiln_graph_next_node(src, 0); n; n = kiln_graph_next_node(src, n))
        if (!(map[n] = copy_node(dst, src, n, kiln_node_name_str(src, n), err))) {
            st = KILN_ERR_NOMEM;
            goto out;
        }
    for (kiln_node_id n = kiln_graph_next_node(src, 0); n; n = kiln_graph_next_node(src, n)) {
        for (uint32_t i = 0; i < kiln_node_input_count(src, n); i++) {
            kiln_anchor p = kiln_node_input_peer(src, n, i);
            if (p.node && (st = kiln_edge_add(dst, map[p.node], p.index, map[n], i)) != KILN_OK)
                goto out;
        }
        for (uint32_t c = kiln_ctrl_out_first(src, n); c; c = kiln_ctrl_out_next(src, c))
            if ((st = kiln_ctrl_add(dst, map[n], map[kiln_ctrl_dst(src, c)])) != KILN_OK)
                goto out;
    }
out:
    free(map);
    if (st != KILN_OK)
        return kiln_errorf(err, st, "copying subgraph %s failed", kiln_graph_name(src));
    return KILN_OK;
}

/* ---- If inlining ---------------------------------------------------------------- */

/* Where a value of the branch comes from once inlined into the parent. */
static kiln_anchor resolve(kiln_graph *g, kiln_node_id ifn, kiln_graph *br, const kiln_node_id *map,
                           kiln_sym s_data, kiln_anchor p)
{
    if (s_data && kiln_node_op(br, p.node) == s_data) {
        int64_t k = -1;
        kiln_attrs_get_int(kiln_node_attrs(br, p.node), "_parent_node_index", &k);
        if (k < 0 || k >= (int64_t)kiln_node_input_count(g, ifn))
            return (kiln_anchor){0, 0};
        return kiln_node_input_peer(g, ifn, (uint32_t)k);
    }
    return (kiln_anchor){map[p.node], p.index};
}

kiln_status infer_inline_if(kiln_graph *g, kiln_node_id ifn, kiln_graph *br, kiln_error *err)
{
    const char *ifname = kiln_node_name_str(g, ifn);
    uint32_t lim = kiln_graph_id_limit(br);
    kiln_node_id *map = calloc(lim ? lim : 1, sizeof(kiln_node_id));
    if (!map)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    kiln_status st = KILN_OK;
    kiln_node_id netout = 0;
    char buf[1024];
    /* symbols of the context, looked up once per inlining */
    const kiln_sym s_data = kiln_sym_lookup(br, "Data"), s_out = kiln_sym_lookup(br, "NetOutput");
    /* 1. copy the branch's compute nodes */
    for (kiln_node_id n = kiln_graph_next_node(br, 0); n; n = kiln_graph_next_node(br, n)) {
        kiln_sym op = kiln_node_op(br, n);
        if (s_out && op == s_out) {
            netout = n;
            continue;
        }
        if (s_data && op == s_data)
            continue;
        const char *name = unique_node_name(g, kiln_node_name_str(br, n), buf, sizeof(buf));
        if (!(map[n] = copy_node(g, br, n, name, err))) {
            st = KILN_ERR_NOMEM;
            goto out;
        }
    }
    if (!netout) {
        st = kiln_errorf(err, KILN_ERR_INVALID, "node %s (If): branch %s has no NetOutput", ifname,
                         kiln_graph_name(br));
        goto out;
    }
    /* 2. data and control edges of the copies */
    for (kiln_node_id n = kiln_graph_next_node(br, 0); n; n = kiln_graph_next_node(br, n)) {
        if (!map[n])
            continue;
        for (uint32_t i = 0; i < kiln_node_input_count(br, n); i++) {
            kiln_anchor p = kiln_node_input_peer(br, n, i);
            if (!p.node)
                continue;
            kiln_anchor s = resolve(g, ifn, br, map, s_data, p);
            if (s.node && (st = kiln_edge_add(g, s.node, s.index, map[n], i)) != KILN_OK)
                goto fail;
        }
        for (uint32_t c = kiln_ctrl_out_first(br, n); c; c = kiln_ctrl_out_next(br, c)) {
            kiln_node_id d = map[kiln_ctrl_dst(br, c)];
            if (d && (st = kiln_ctrl_add(g, map[n], d)) != KILN_OK)
                goto fail;
        }
        for (uint32_t c = kiln_ctrl_in_first(g, ifn); c; c = kiln_ctrl_in_next(g, c))
            if ((st = kiln_ctrl_add(g, kiln_ctrl_src(g, c), map[n])) != KILN_OK)
                goto fail;
        for (uint32_t c = kiln_ctrl_out_first(g, ifn); c; c = kiln_ctrl_out_next(g, c))
            if ((st = kiln_ctrl_add(g, map[n], kiln_ctrl_dst(g, c))) != KILN_OK)
                goto fail;
    }
    /* 3. the If's consumers read the branch's results */
    for (uint32_t i = 0; i < kiln_node_input_count(br, netout); i++) {
        int64_t idx = i;
        const kiln_tensor_desc *nd = kiln_node_input_desc(br, netout, i);
        if (nd)
            kiln_attrs_get_int(kiln_desc_attrs(nd), "_parent_node_index", &idx);
        if (idx < 0 || idx >= (int64_t)kiln_node_output_count(g, ifn))
            continue;
        kiln_anchor p = kiln_node_input_peer(br, netout, i);
        kiln_anchor s = p.node ? resolve(g, ifn, br, map, s_data, p) : (kiln_anchor){0, 0};
        if (!s.node) {
            if (kiln_node_output_use_count(g, ifn, (uint32_t)idx) == 0)
                continue;
            st = kiln_errorf(err, KILN_ERR_INVALID,
                             "node %s (If): output %lld of branch %s has no producer", ifname,
                             (long long)idx, kiln_graph_name(br));
            goto out;
        }
        if (map[p.node]) { /* keep the parent's value name on the new producer */
            const char *vn = NULL;
            kiln_tensor_desc *od = kiln_node_output_desc(g, ifn, (uint32_t)idx);
            if (kiln_attrs_get_string(kiln_desc_attrs(od), "_onnx_name", &vn) && vn) {
                char keep[1024];
                snprintf(keep, sizeof(keep), "%s", vn);
                kiln_attrs_set_string(kiln_desc_attrs_mut(g, kiln_node_output_desc(g, s.node,
                                                                                   s.index)),
                                      "_onnx_name", keep);
            }
        }
        uint32_t c = kiln_use_first(g, ifn, (uint32_t)idx);
        while (c) {
            uint32_t next = kiln_use_next(g, c);
            kiln_anchor d = kiln_use_dst(g, c);
            kiln_edge_remove(g, d.node, d.index);
            if ((st = kiln_edge_add(g, s.node, s.index, d.node, d.index)) != KILN_OK)
                goto fail;
            c = next;
        }
    }
    st = kiln_graph_remove_node(g, ifn);
    if (st != KILN_OK)
        goto fail;
    goto out;
fail:
    st = kiln_errorf(err, st, "node %s (If): inlining branch %s failed", ifname,
                     kiln_graph_name(br));
out:
    free(map);
    return st;
}

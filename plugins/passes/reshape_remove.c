/*
 * reshape_remove.c - ReshapeRemovePass (GE's ReshapeRemovePass), a node pass
 * run by GEPass, over the reshape-like ops Reshape, Flatten, Squeeze and
 * Unsqueeze.
 *
 * Two rules, both for static shapes only:
 *   1. A reshape-like node whose static output shape and dtype are its
 *      input's does nothing: it is removed (consumers re-fed from its
 *      producer), and its shape/axes Const goes with it when nothing else
 *      reads it (as GE deletes the shape const).
 *   2. A reshape-like node N fed by another reshape-like node P: N now reads
 *      P's input directly (the pair is one pure reshape of known shape).  When
 *      N is not a Reshape whose Const target is independent of its input (no 0
 *      entry to copy), N becomes a Reshape with a new Const target holding its
 *      static output shape.  P goes when nothing else reads it.  N is then
 *      passed again, so rule 1 removes it when the pair was an identity.
 * GE removes every Reshape of a static graph, because its tensors carry their
 * shapes in descriptors; kiln's kernels read their input shapes at run time,
 * so kiln removes the identity ones and collapses chains instead.  As in GE,
 * nothing is done on dynamic shapes.  Never touches a `_cannot_be_deleted`
 * node, never removes a node feeding a NetOutput (a model output keeps its
 * producer's name, a subgraph's output its Reshape as in GE), never bypasses
 * a reference output.
 * Counters: "reshapes removed", "reshape chains collapsed".  O(1) per visit.
 */
#include "passes.h"
#include "simplify.h"

#include <stdio.h>
#include <string.h>

typedef struct rr_inst {
    simp_syms s;
} rr_inst;

static kiln_status rr_create(const kiln_options *opts, kiln_error *err, void **inst)
{
    (void)opts;
    rr_inst *p = kiln_alloc(sizeof(*p));
    if (!p)
        return kiln_errorf(err, KILN_ERR_NOMEM, "ReshapeRemovePass: out of memory");
    memset(p, 0, sizeof(*p));
    *inst = p;
    return KILN_OK;
}

static void rr_destroy(void *inst) { kiln_free(inst); }

static void rr_start(void *inst, kiln_pass_ctx *ctx, kiln_graph *g)
{
    (void)ctx;
    simp_syms_init(&((rr_inst *)inst)->s, g);
}

static bool reshape_like(const kiln_graph *g, kiln_node_id n, const simp_syms *s)
{
    kiln_sym op = kiln_node_op(g, n);
    return op && (op == s->reshape || op == s->flatten || op == s->squeeze || op == s->unsqueeze);
}

/* N is a Reshape whose Const target does not depend on its input's shape. */
static bool target_independent(kiln_graph *g, kiln_node_id n, const simp_syms *s)
{
    if (!simp_op_is(g, n, s->reshape) || kiln_node_input_count(g, n) < 2)
        return false;
    int64_t t[SIMP_MAX_RANK];
    uint32_t k;
    if (!simp_const_ints(g, kiln_node_input_peer(g, n, 1), s, t, SIMP_MAX_RANK, &k))
        return false;
    int64_t allowzero = 0;
    (void)kiln_attrs_get_int(kiln_node_attrs(g, n), "allowzero", &allowzero);
    for (uint32_t i = 0; i < k; i++)
        if (t[i] == 0 && !allowzero)
            return false;
    return true;
}

/* Turn N into a Reshape to its static output shape, with a new Const target. */
static kiln_status make_reshape(kiln_pass_ctx *ctx, kiln_graph *g, kiln_node_id n,
                                const simp_syms *s)
{
    const kiln_tensor_desc *od = kiln_node_output_desc(g, n, 0);
    int64_t rank = kiln_desc_rank(od);
    char name[256];
    snprintf(name, sizeof(name), "%s_shape", kiln_node_name_str(g, n));
    for (uint32_t i = 1; kiln_graph_find_node(g, name); i++)
        snprintf(name, sizeof(name), "%s_shape_%u", kiln_node_name_str(g, n), i);
    kiln_node_id c = kiln_graph_add_node(g, name, "Const", 0, 1);
    if (!c)
        return kiln_errorf(kiln_pass_error(ctx), KILN_ERR_NOMEM, "cannot add node %s", name);
    kiln_tensor_value v = {KILN_DT_INT64, 1, &rank, kiln_desc_dims(od),
                           (size_t)rank * sizeof(int64_t)};
    kiln_tensor_desc *cd = kiln_node_output_desc(g, c, 0);
    kiln_status st = kiln_attrs_set_tensor(kiln_node_attrs_mut(g, c), "value", &v);
    if (st == KILN_OK)
        st = kiln_desc_set_dtype(g, cd, KILN_DT_INT64);
    if (st == KILN_OK)
        st = kiln_desc_set_shape(g, cd, 1, &rank);
    kiln_node_id old = kiln_node_input_count(g, n) > 1 ? kiln_node_input_peer(g, n, 1).node : 0;
    if (st == KILN_OK && old)
        st = kiln_edge_remove(g, n, 1);
    if (st == KILN_OK)
        st = kiln_node_set_input_count(g, n, 2);
    if (st == KILN_OK)
        st = kiln_node_set_op(g, n, "Reshape");
    if (st == KILN_OK)
        st = kiln_edge_add(g, c, 0, n, 1);
    if (st == KILN_OK && kiln_node_input_has_desc(g, n, 1)) {
        kiln_tensor_desc *id = kiln_node_input_desc_mut(g, n, 1);
        st = kiln_desc_set_dtype(g, id, KILN_DT_INT64);
        if (st == KILN_OK)
            st = kiln_desc_set_shape(g, id, 1, &rank);
    }
    if (st == KILN_OK)
        kiln_pass_explain(ctx, g, c, "inserted: the static target shape of %s",
                          kiln_node_name_str(g, n));
    if (st != KILN_OK)
        return kiln_errorf(kiln_pass_error(ctx), st, "cannot turn %s into a Reshape",
                           kiln_node_name_str(g, n));
    kiln_attrs *a = kiln_node_attrs_mut(g, n);
    static const char *const drop[] = {"axes", "axis", "shape", "allowzero"};
    for (size_t i = 0; a && i < sizeof(drop) / sizeof(drop[0]); i++)
        (void)kiln_attrs_remove(a, drop[i]);
    simp_remove_if_dead(ctx, g, old, s);
    return KILN_OK;
}

static kiln_status run(void *inst, kiln_pass_ctx *ctx, kiln_graph *g, kiln_node_id n)
{
    const simp_syms *s = &((const rr_inst *)inst)->s;
    if (!reshape_like(g, n, s) || kiln_node_output_count(g, n) != 1 ||
        kiln_node_input_count(g, n) < 1 || simp_pinned(g, n))
        return KILN_OK;
    kiln_anchor src = kiln_node_input_peer(g, n, 0);
    if (!src.node || simp_is_ref_output(g, src))
        return KILN_OK;
    const kiln_tensor_desc *out = kiln_node_output_desc(g, n, 0);
    /* Rule 1: an identity reshape. */
    if (simp_same_static(kiln_node_output_desc(g, src.node, src.index), out)) {
        if (simp_feeds_netoutput(g, n, 0, s))
            return KILN_OK;
        kiln_node_id shape =
            kiln_node_input_count(g, n) > 1 ? kiln_node_input_peer(g, n, 1).node : 0;
        kiln_pass_explain(ctx, g, n, "removed: %s keeps the shape of %s:%u", kiln_node_op_str(g, n),
                          kiln_node_name_str(g, src.node), src.index);
        kiln_pass_stat_add(ctx, "reshapes removed", 1);
        static const int32_t io_map[] = {0};
        kiln_status st = kiln_pass_isolate_and_delete(ctx, g, n, io_map, 1, false);
        if (st == KILN_OK)
            simp_remove_if_dead(ctx, g, shape, s);
        return st;
    }
    /* Rule 2: reshape of a reshape, static shapes at both ends. */
    kiln_node_id p = src.node;
    if (!reshape_like(g, p, s) || simp_pinned(g, p) || kiln_node_input_count(g, p) < 1)
        return KILN_OK;
    kiln_anchor x = kiln_node_input_peer(g, p, 0);
    const kiln_tensor_desc *xd = x.node ? kiln_node_output_desc(g, x.node, x.index) : NULL;
    if (!x.node || simp_is_ref_output(g, x) || !simp_static(xd) || !simp_static(out) ||
        kiln_desc_dtype(xd) != kiln_desc_dtype(out) ||
        kiln_desc_numel(xd) != kiln_desc_numel(out) || kiln_desc_rank(out) > SIMP_MAX_RANK)
        return KILN_OK;
    kiln_status st = kiln_edge_remove(g, n, 0);
    if (st == KILN_OK)
        st = kiln_edge_add(g, x.node, x.index, n, 0);
    if (st == KILN_OK && kiln_node_input_has_desc(g, n, 0))
        st = kiln_desc_copy(g, kiln_node_input_desc_mut(g, n, 0), xd);
    if (st != KILN_OK)
        return kiln_errorf(kiln_pass_error(ctx), st, "cannot re-feed %s from %s",
                           kiln_node_name_str(g, n), kiln_node_name_str(g, x.node));
    if (!target_independent(g, n, s) && (st = make_reshape(ctx, g, n, s)) != KILN_OK)
        return st;
    kiln_pass_explain(ctx, g, n, "now reads %s:%u: %s %s folded into it",
                      kiln_node_name_str(g, x.node), x.index, kiln_node_op_str(g, p),
                      kiln_node_name_str(g, p));
    kiln_pass_stat_add(ctx, "reshape chains collapsed", 1);
    simp_remove_if_dead(ctx, g, p, s);
    kiln_pass_repass(ctx, g, n);
    return KILN_OK;
}

const kiln_pass_desc kiln_reshape_remove_pass = {
    .struct_size = sizeof(kiln_pass_desc),
    .kind = KILN_PASS_KIND_NODE,
    .name = "ReshapeRemovePass",
    .summary = "remove identity reshapes and collapse reshape chains of static shape",
    .create = rr_create,
    .destroy = rr_destroy,
    .run_node = run,
    .on_start_graph = rr_start,
};

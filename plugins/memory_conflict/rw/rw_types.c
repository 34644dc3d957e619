/*
 * rw_types.c - RW-type analysis of GE's mem_rw_conflict_optimize
 * (GE_SEMANTICS 2.1-2.4): reference relations, the output and input RW types
 * of anchors, the input-type combination rule, the 4x3 decision matrix and
 * MarkRWTypeForAllSubgraph, which records the RW types of every subgraph's
 * Data and NetOutput nodes from the innermost subgraph outwards (and may
 * insert an Identity before a subgraph NetOutput, 2.1).
 *
 * Requires: a verified graph (subgraph Data nodes carry `_parent_node_index`).
 * Preserves: everything except that MarkRefRelations sets `reference`=true on
 * nodes with a ref output and marking may insert Identities.
 * Complexity: each type query is O(consumers + subgraphs of the node) plus
 * O(#subgraphs) to find a subgraph's record; a subgraph Data query walks the
 * chain of enclosing parents (at most the nesting depth).  Marking is
 * O(nodes + edges) over all subgraphs.
 */
#include "rw_conflict.h"
#include <string.h>

static const char *const in_names[] = {"ReadOnly", "Writeable", "ScopeWriteable", "InvalidRWType"};
static const char *const out_names[] = {"ReadOnlyConst", "ReadOnly", "SoftRead", "Writeable",
                                        "InvalidRWType"};

const char *rw_in_name(rw_in t) { return (unsigned)t <= RW_IN_INVALID ? in_names[t] : "?"; }
const char *rw_out_name(rw_out t) { return (unsigned)t <= RW_OUT_INVALID ? out_names[t] : "?"; }

static const char *const data_ops[] = {"Data", "RefData", "AippData", "AnnData", NULL};
static const char *const const_ops[] = {"Const", "Constant", "ConstPlaceHolder", NULL};

bool rw_is_data_like(const kiln_graph *g, kiln_node_id n) { return mc_op_in(g, n, data_ops); }
bool rw_has_subgraphs(const kiln_graph *g, kiln_node_id n)
{
    return kiln_node_subgraph_count(g, n) > 0;
}

bool rw_is_subgraph_data(const kiln_graph *g, kiln_node_id n)
{
    return kiln_graph_parent_node(g) != 0 && mc_op_is(g, n, "Data");
}

bool rw_is_subgraph_netoutput(const kiln_graph *g, kiln_node_id n)
{
    return kiln_graph_parent_node(g) != 0 && mc_op_is(g, n, "NetOutput");
}

uint32_t rw_data_out_count(const kiln_graph *g, kiln_node_id n)
{
    uint32_t k = 0;
    for (uint32_t o = 0; o < kiln_node_output_count(g, n); o++)
        k += kiln_node_output_use_count(g, n, o);
    return k;
}

int32_t rw_ref_input_of_output(kiln_graph *g, kiln_node_id n, uint32_t o)
{
    if (o >= kiln_node_output_count(g, n))
        return -1;
    int32_t k = kiln_desc_ref_input(kiln_node_output_desc(g, n, o));
    return k >= 0 && (uint32_t)k < kiln_node_input_count(g, n) ? k : -1;
}

int32_t rw_ref_output_of_input(kiln_graph *g, kiln_node_id n, uint32_t i)
{
    for (uint32_t o = 0; o < kiln_node_output_count(g, n); o++)
        if (rw_ref_input_of_output(g, n, o) == (int32_t)i)
            return (int32_t)o;
    return -1;
}

/* May node @p n of @p g have a ref output?  false only when known not to. */
static bool maybe_ref(const rw_ctx *c, const kiln_graph *g, kiln_node_id n)
{
    return !(c->refbits && g == c->root && n < c->ref_lim && !c->refbits[n]);
}

static bool is_refswitch(const rw_ctx *c, const kiln_graph *g, kiln_node_id n)
{
    const char *orig;
    return mc_is_sym(g, n, c->framework_op) &&
           kiln_attrs_get_string(kiln_node_attrs(g, n), "original_type", &orig) &&
           strcmp(orig, "RefSwitch") == 0;
}

uint32_t rw_sub_index(const rw_ctx *c, const kiln_graph *g)
{
    for (uint32_t i = 0; i < c->nsub; i++)
        if (kiln_graph_all_subgraph(c->root, i) == g)
            return i;
    return UINT32_MAX;
}

/* ---- context ------------------------------------------------------------ */

kiln_status rw_ctx_init(rw_ctx *c, kiln_graph *root, kiln_pass_ctx *pc)
{
    memset(c, 0, sizeof(*c));
    c->root = root;
    c->pc = pc;
    static const char *const var_like[] = {"Variable", "VariableV2", "VarHandleOp", "RefData",
                                           NULL};
    static const char *const whiles[] = {"While", "_While", "StatelessWhile", NULL};
    static const char *const identity_like[] = {"Identity", "ReadVariableOp", NULL};
    if (!mc_symset_init(&c->data_like, root, data_ops) ||
        !mc_symset_init(&c->var_like, root, var_like) ||
        !mc_symset_init(&c->const_ops, root, const_ops) ||
        !mc_symset_init(&c->whiles, root, whiles) ||
        !mc_symset_init(&c->identity_like, root, identity_like))
        return KILN_ERR_NOMEM;
    c->phony_concat = mc_sym(root, "PhonyConcat");
    c->phony_split = mc_sym(root, "PhonySplit");
    c->framework_op = mc_sym(root, "FrameworkOp");
    c->input_mutable = mc_sym(root, "_input_mutable");
    c->special_input_size = mc_sym(root, "_special_input_size");
    c->skip_rw_conflict = kiln_sym_lookup(root, "_skip_rw_conflict");
    c->cannot_be_deleted = kiln_sym_lookup(root, "_cannot_be_deleted");
    c->nsub = kiln_graph_all_subgraph_count(root);
    if (c->nsub) {
        c->subs = kiln_alloc((size_t)c->nsub * sizeof(*c->subs));
        if (!c->subs)
            return KILN_ERR_NOMEM;
        memset(c->subs, 0, (size_t)c->nsub * sizeof(*c->subs));
    }
    return KILN_OK;
}

void rw_ctx_fini(rw_ctx *c)
{
    for (uint32_t i = 0; i < c->nsub; i++) {
        kiln_free(c->subs[i].out_types);
        kiln_free(c->subs[i].data);
    }
    kiln_free(c->subs);
    c->subs = NULL;
    kiln_free(c->refbits);
    c->refbits = NULL;
}

kiln_pass_result rw_run_finish(rw_ctx *c, rw_list *l, kiln_status st)
{
    kiln_free(l->v);
    l->v = NULL;
    if (st != KILN_OK && kiln_error_code(kiln_pass_error(c->pc)) == KILN_OK)
        kiln_errorf(kiln_pass_error(c->pc), st, "out of memory");
    bool changed = c->changed;
    rw_ctx_fini(c);
    if (st != KILN_OK)
        return KILN_PASS_FAILED;
    return changed ? KILN_PASS_CHANGED : KILN_PASS_NOT_CHANGED;
}

static void mark_refs_in(rw_ctx *c, kiln_graph *g)
{
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n)) {
        bool is_ref = false;
        for (uint32_t o = 0; o < kiln_node_output_count(g, n) && !is_ref; o++)
            is_ref = rw_ref_input_of_output(g, n, o) >= 0;
        if (g == c->root && c->refbits && n < c->ref_lim)
            c->refbits[n] = is_ref;
        if (is_ref && !mc_node_bool(g, n, "reference")) {
            kiln_attrs_set_bool(kiln_node_attrs_mut(g, n), "reference", true);
            c->changed = true;
        }
    }
}

void rw_mark_ref_relations(rw_ctx *c)
{
    /* no bits (out of memory): every query reads the descriptors */
    c->ref_lim = kiln_graph_id_limit(c->root);
    kiln_free(c->refbits);
    c->refbits = kiln_alloc((size_t)c->ref_lim + 1);
    if (c->refbits)
        memset(c->refbits, 1, (size_t)c->ref_lim + 1);
    mark_refs_in(c, c->root);
    for (uint32_t i = 0; i < c->nsub; i++)
        mark_refs_in(c, kiln_graph_all_subgraph(c->root, i));
}

/* Pre-order: each node, then the nodes of its subgraphs (GE GetAllNodes). */
static void collect(rw_list *l, kiln_graph *g)
{
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n)) {
        if (l->count < l->cap)
            l->v[l->count++] = (rw_item){g, n};
        for (uint32_t k = 0; k < kiln_node_subgraph_count(g, n); k++)
            collect(l, kiln_node_subgraph(g, n, k, NULL));
    }
}

kiln_status rw_all_nodes(rw_ctx *c, rw_list *l)
{
    uint32_t total = kiln_graph_node_count(c->root);
    for (uint32_t i = 0; i < c->nsub; i++)
        total += kiln_graph_node_count(kiln_graph_all_subgraph(c->root, i));
    l->count = 0;
    l->cap = total;
    l->v = kiln_alloc((size_t)(total ? total : 1) * sizeof(*l->v));
    if (!l->v)
        return KILN_ERR_NOMEM;
    collect(l, c->root);
    return KILN_OK;
}

/* ---- types ---------------------------------------------------------------- */

rw_out rw_single_output_type(rw_ctx *c, kiln_graph *g, kiln_node_id n, uint32_t o)
{
    if (mc_symset_has(&c->var_like, g, n))
        return RW_OUT_WRITEABLE;
    const bool data_like = mc_symset_has(&c->data_like, g, n);
    bool has_pidx = data_like && kiln_attrs_has(kiln_node_attrs(g, n), "_parent_node_index");
    if (data_like && !has_pidx)
        return RW_OUT_WRITEABLE; /* root Data (GE: temporary, torchair feeds ref ops) */
    if (data_like) {
        /* Subgraph Data: the parent's producer for that input decides. */
        kiln_graph *pg = kiln_graph_parent(g);
        kiln_node_id pn = kiln_graph_parent_node(g);
        int64_t pidx = -1;
        kiln_attrs_get_int(kiln_node_attrs(g, n), "_parent_node_index", &pidx);
        if (!pg || !pn || pidx < 0 || pidx >= (int64_t)kiln_node_input_count(pg, pn))
            return RW_OUT_INVALID;
        kiln_anchor peer = kiln_node_input_peer(pg, pn, (uint32_t)pidx);
        if (!peer.node)
            return RW_OUT_INVALID;
        return rw_single_output_type(c, pg, peer.node, peer.index);
    }
    if ((maybe_ref(c, g, n) && rw_ref_input_of_output(g, n, o) >= 0) || is_refswitch(c, g, n))
        return RW_OUT_WRITEABLE;
    if (mc_symset_has(&c->const_ops, g, n))
        return RW_OUT_READ_ONLY_CONST;
    if (o >= kiln_node_output_count(g, n))
        return RW_OUT_INVALID;
    return kiln_node_output_use_count(g, n, o) > 1 ? RW_OUT_READ_ONLY : RW_OUT_SOFT_READ;
}

rw_out rw_output_type(rw_ctx *c, kiln_graph *g, kiln_node_id n, uint32_t o)
{
    if (mc_symset_has(&c->whiles, g, n))
        return RW_OUT_SOFT_READ;
    uint32_t nsub = kiln_node_subgraph_count(g, n);
    if (nsub == 0)
        return rw_single_output_type(c, g, n, o);
    rw_out t = RW_OUT_SOFT_READ;
    if (nsub == 1) {
        /* Exactly one subgraph NetOutput (PartitionedCall): its recorded type. */
        uint32_t si = rw_sub_index(c, kiln_node_subgraph(g, n, 0, NULL));
        const rw_sub *s = si == UINT32_MAX ? NULL : &c->subs[si];
        if (s && s->netoutput) {
            if (o >= s->nout_types)
                return RW_OUT_INVALID;
            t = s->out_types[o];
            if (t == RW_OUT_INVALID)
                return t;
        }
    }
    if (t == RW_OUT_WRITEABLE)
        return t;
    if (o >= kiln_node_output_count(g, n))
        return RW_OUT_INVALID;
    return kiln_node_output_use_count(g, n, o) > 1 ? RW_OUT_READ_ONLY : t;
}

rw_in rw_single_input_type(const rw_ctx *c, kiln_graph *g, kiln_node_id n, uint32_t i)
{
    if (c->input_mutable && mc_node_bool(g, n, "_input_mutable"))
        return RW_IN_SCOPE_WRITEABLE;
    /* PhonyConcat/PhonySplit declare shared in/out names but never write. */
    if (mc_is_sym(g, n, c->phony_concat) || mc_is_sym(g, n, c->phony_split))
        return RW_IN_READ_ONLY;
    if (maybe_ref(c, g, n) && rw_ref_output_of_input(g, n, i) >= 0)
        return RW_IN_WRITEABLE;
    if (i == 0 && is_refswitch(c, g, n))
        return RW_IN_WRITEABLE;
    return RW_IN_READ_ONLY;
}

rw_in rw_in_combine(rw_in acc, rw_in t)
{
    if (acc == RW_IN_INVALID || t == RW_IN_INVALID)
        return RW_IN_INVALID;
    if (acc == RW_IN_READ_ONLY)
        return t;
    if (t == RW_IN_READ_ONLY || t == acc)
        return acc;
    return RW_IN_INVALID; /* Writeable with ScopeWriteable */
}

/* Data of subgraph @p sg with `_parent_node_index` == @p idx (live scan). */
static bool sub_has_data_for(const kiln_graph *sg, int64_t idx)
{
    const kiln_sym data = mc_sym(sg, "Data");
    for (kiln_node_id d = kiln_graph_next_node(sg, 0); d; d = kiln_graph_next_node(sg, d)) {
        int64_t p;
        if (mc_is_sym(sg, d, data) &&
            kiln_attrs_get_int(kiln_node_attrs(sg, d), "_parent_node_index", &p) && p == idx)
            return true;
    }
    return false;
}

rw_in rw_input_type(rw_ctx *c, kiln_graph *g, kiln_node_id n, uint32_t i, bool strict)
{
    if (mc_symset_has(&c->whiles, g, n))
        return RW_IN_SCOPE_WRITEABLE;
    int64_t special = 0;
    if (c->special_input_size && i < kiln_node_input_count(g, n) &&
        kiln_node_input_has_desc(g, n, i) &&
        kiln_attrs_get_int(kiln_desc_attrs(kiln_node_input_desc(g, n, i)), "_special_input_size",
                           &special) &&
        special > 0)
        return RW_IN_SCOPE_WRITEABLE; /* input gets double memory: isolate it */
    uint32_t nsub = kiln_node_subgraph_count(g, n);
    if (nsub == 0)
        return rw_single_input_type(c, g, n, i);
    rw_in acc = RW_IN_READ_ONLY;
    for (uint32_t k = 0; k < nsub; k++) {
        kiln_graph *sg = kiln_node_subgraph(g, n, k, NULL);
        uint32_t si = rw_sub_index(c, sg);
        const rw_sub *s = si == UINT32_MAX ? NULL : &c->subs[si];
        if (!s || !s->marked) {
            /* GE's uncached lookup finds the Data but no recorded type. */
            if (strict && sub_has_data_for(sg, i))
                return RW_IN_INVALID;
            continue;
        }
        for (uint32_t d = 0; d < s->ndata; d++)
            if (s->data[d].parent_index == (int64_t)i)
                acc = rw_in_combine(acc, s->data[d].type);
    }
    return acc;
}

rw_result rw_matrix(rw_out o, rw_in i)
{
    static const unsigned char m[4][3] = {
        /*                 ReadOnly       Writeable           ScopeWriteable */
        /* ReadOnlyConst */ {RW_DO_NOTHING, RW_INSERT_IDENTITY, RW_INSERT_IDENTITY},
        /* ReadOnly      */ {RW_DO_NOTHING, RW_DO_NOTHING, RW_INSERT_IDENTITY},
        /* SoftRead      */ {RW_DO_NOTHING, RW_DO_NOTHING, RW_DO_NOTHING},
        /* Writeable     */ {RW_DO_NOTHING, RW_DO_NOTHING, RW_INSERT_IDENTITY},
    };
    if (o >= RW_OUT_INVALID || i >= RW_IN_INVALID)
        return RW_WRONG_GRAPH;
    return (rw_result)m[o][i];
}

/* ---- subgraph marking ---------------------------------------------------- */

/* GE IsOutputRwConfilctAmongSubGraph: some branch feeds NetOutput input
 * @p pidx (GE indexes the NetOutput by the parent index) from a ReadOnly output. */
static bool branches_conflict(rw_ctx *c, kiln_graph *pg, kiln_node_id pn, uint32_t pidx)
{
    for (uint32_t k = 0; k < kiln_node_subgraph_count(pg, pn); k++) {
        kiln_graph *sg = kiln_node_subgraph(pg, pn, k, NULL);
        kiln_node_id no = mc_find_netoutput(sg);
        if (!no || pidx >= kiln_node_input_count(sg, no))
            return false; /* GE: assertion fails, treated as "no conflict" */
        kiln_anchor peer = kiln_node_input_peer(sg, no, pidx);
        if (!peer.node)
            return false;
        if (rw_output_type(c, sg, peer.node, peer.index) == RW_OUT_READ_ONLY)
            return true;
    }
    return false;
}

/* GE JudgeOptimizableByParentNode. */
static bool optimizable_by_parent(rw_ctx *c, kiln_graph *pg, kiln_node_id pn, uint32_t pidx)
{
    if (mc_op_is(pg, pn, "PartitionedCall") || pidx >= kiln_node_output_count(pg, pn))
        return true;
    if (kiln_node_subgraph_count(pg, pn) > 1 && branches_conflict(c, pg, pn, pidx))
        return false;
    for (uint32_t u = kiln_use_first(pg, pn, pidx); u; u = kiln_use_next(pg, u)) {
        kiln_anchor dst = kiln_use_dst(pg, u);
        if (rw_has_subgraphs(pg, dst.node) ||
            rw_single_input_type(c, pg, dst.node, dst.index) != RW_IN_READ_ONLY)
            return false;
    }
    return true;
}

static kiln_status mark_data(rw_ctx *c, rw_sub *s, kiln_graph *sg, kiln_node_id d)
{
    rw_in t = RW_IN_READ_ONLY;
    for (uint32_t u = kiln_use_first(sg, d, 0); u; u = kiln_use_next(sg, u)) {
        kiln_anchor dst = kiln_use_dst(sg, u);
        t = rw_in_combine(t, rw_input_type(c, sg, dst.node, dst.index, true));
    }
    int64_t pidx;
    if (!kiln_attrs_get_int(kiln_node_attrs(sg, d), "_parent_node_index", &pidx))
        return kiln_errorf(kiln_pass_error(c->pc), KILN_ERR_INVALID,
                           "subgraph %s: input data %s has no attr _parent_node_index",
                           kiln_graph_name(sg), kiln_node_name_str(sg, d));
    for (uint32_t k = 0; k < s->ndata; k++)
        if (s->data[k].parent_index == pidx)
            return kiln_errorf(kiln_pass_error(c->pc), KILN_ERR_INVALID,
                               "subgraph %s: input data %s has the same _parent_node_index %lld "
                               "as %s",
                               kiln_graph_name(sg), kiln_node_name_str(sg, d), (long long)pidx,
                               kiln_node_name_str(sg, s->data[k].node));
    s->data[s->ndata++] = (rw_data_rec){.node = d, .parent_index = pidx, .type = t};
    return KILN_OK;
}

static kiln_status mark_netoutput(rw_ctx *c, rw_sub *s, kiln_graph *sg, kiln_node_id no)
{
    kiln_graph *pg = kiln_graph_parent(sg);
    kiln_node_id pn = kiln_graph_parent_node(sg);
    uint32_t nin = kiln_node_input_count(sg, no);
    s->out_types = kiln_alloc((size_t)(nin ? nin : 1) * sizeof(*s->out_types));
    if (!s->out_types)
        return kiln_errorf(kiln_pass_error(c->pc), KILN_ERR_NOMEM, "out of memory");
    s->nout_types = nin;
    for (uint32_t i = 0; i < nin; i++)
        s->out_types[i] = RW_OUT_INVALID;
    for (uint32_t i = 0; i < nin; i++) {
        int64_t pidx = i; /* GRAPH_FORMAT: no attr means output i */
        if (kiln_node_input_has_desc(sg, no, i))
            kiln_attrs_get_int(kiln_desc_attrs(kiln_node_input_desc(sg, no, i)),
                               "_parent_node_index", &pidx);
        kiln_anchor pre = kiln_node_input_peer(sg, no, i);
        if (!pre.node)
            return kiln_errorf(kiln_pass_error(c->pc), KILN_ERR_INVALID,
                               "subgraph %s: input %u of %s is not connected", kiln_graph_name(sg),
                               i, kiln_node_name_str(sg, no));
        rw_out t = rw_output_type(c, sg, pre.node, pre.index);
        if (t == RW_OUT_WRITEABLE && pidx >= 0 &&
            !optimizable_by_parent(c, pg, pn, (uint32_t)pidx)) {
            kiln_node_id id = rw_identity_after(c, sg, pre.node, pre.index, no, i);
            if (!id)
                return kiln_errorf(kiln_pass_error(c->pc), KILN_ERR_NOMEM,
                                   "cannot insert an Identity between %s:%u and %s:%u",
                                   kiln_node_name_str(sg, pre.node), pre.index,
                                   kiln_node_name_str(sg, no), i);
            kiln_pass_explain(c->pc, sg, id,
                              "RW conflict: %s:%u (%s, Writeable) leaves subgraph %s through "
                              "%s:%u, and output %lld of parent %s (%s) is not optimizable "
                              "(a branch yields ReadOnly there, or a consumer writes it or owns "
                              "subgraphs) -> Identity after %s:%u",
                              kiln_node_name_str(sg, pre.node), pre.index,
                              kiln_node_op_str(sg, pre.node), kiln_graph_name(sg),
                              kiln_node_name_str(sg, no), i, (long long)pidx,
                              kiln_node_name_str(pg, pn), kiln_node_op_str(pg, pn),
                              kiln_node_name_str(sg, pre.node), pre.index);
            t = RW_OUT_SOFT_READ;
        }
        s->out_types[i] = t;
    }
    s->netoutput = no;
    return KILN_OK;
}

static kiln_status mark_subgraph(rw_ctx *c, uint32_t si)
{
    kiln_graph *sg = kiln_graph_all_subgraph(c->root, si);
    rw_sub *s = &c->subs[si];
    uint32_t ndata = 0;
    const kiln_sym data = mc_sym(sg, "Data"), netoutput = mc_sym(sg, "NetOutput");
    for (kiln_node_id n = kiln_graph_next_node(sg, 0); n; n = kiln_graph_next_node(sg, n))
        ndata += mc_is_sym(sg, n, data);
    s->data = kiln_alloc((size_t)(ndata ? ndata : 1) * sizeof(*s->data));
    if (!s->data)
        return kiln_errorf(kiln_pass_error(c->pc), KILN_ERR_NOMEM, "out of memory");
    s->marked = true;
    /* Snapshot the id limit: Identities inserted before the NetOutput are not visited. */
    uint32_t lim = kiln_graph_id_limit(sg);
    for (kiln_node_id n = kiln_graph_next_node(sg, 0); n && n < lim;
         n = kiln_graph_next_node(sg, n)) {
        kiln_status st = KILN_OK;
        if (mc_is_sym(sg, n, data))
            st = mark_data(c, s, sg, n);
        else if (mc_is_sym(sg, n, netoutput) && !s->netoutput)
            st = mark_netoutput(c, s, sg, n);
        if (st != KILN_OK)
            return st;
    }
    return KILN_OK;
}

kiln_status rw_mark_all_subgraphs(rw_ctx *c)
{
    for (uint32_t k = c->nsub; k-- > 0;) {
        kiln_graph *sg = kiln_graph_all_subgraph(c->root, k);
        kiln_graph *pg = kiln_graph_parent(sg);
        kiln_node_id pn = kiln_graph_parent_node(sg);
        if (!pg || !pn || mc_is_while(pg, pn))
            continue;
        kiln_status st = mark_subgraph(c, k);
        if (st != KILN_OK)
            return st;
    }
    return KILN_OK;
}

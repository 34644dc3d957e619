/*
 * ctrl_node_conflict.c - GE CtrlNodeConflict (GE_SEMANTICS.md 3.8): before
 * the symbol processing, the subgraphs of If / StatelessIf (then, else),
 * Case / StatelessCase (every branch) and While / StatelessWhile (body only)
 * get their NetOutput inputs isolated where the subgraph would otherwise
 * hand out memory it does not own.
 *
 *   If/Case branch  for each NetOutput input: its symbol (within the
 *                   branch) holds an output of a Data of the branch, a
 *                   constant, a variable-like node or a node with
 *                   ref_var_src_var_name -> conflict; otherwise a symbol
 *                   already used by an earlier NetOutput input -> conflict.
 *                   All conflict inputs of one branch share ONE multi-I/O
 *                   Identity before the NetOutput.
 *   While body      body Data (with _parent_node_index) whose only consumer
 *                   is the NetOutput: same parent index on both sides is a
 *                   bypass, different ones are "exchanged".  Output
 *                   isolation is needed unless the NetOutput has one input,
 *                   the first Data one output, the body has != 2 symbols and
 *                   NetOutput input 0's symbol holds no (no-padding)
 *                   continuous input.  If needed, one multi-I/O Identity
 *                   before the NetOutput over every non-bypass input not
 *                   already isolated; then one multi-I/O Identity in front
 *                   of the consumers of all exchanged Data nodes.
 *
 * The symbols here are GE's GetRefMapping of the one subgraph (local_syms):
 * producer/consumer, Merge, ref-from-input, Data nodes standing for the same
 * parent producer, ref_var_src_var_name within the subgraph.  Nested
 * subgraphs of a branch are not looked into.
 */
#include "mlc_pass.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the symbols of one subgraph (union-find over its anchor slots) ------ */
typedef struct local_syms {
    kiln_graph *g;
    uint32_t *in_base, *out_base; /* per node id */
    uint32_t *parent;             /* union-find */
    uint32_t nslots;
} local_syms;

static uint32_t find(local_syms *s, uint32_t x)
{
    while (s->parent[x] != x) {
        s->parent[x] = s->parent[s->parent[x]];
        x = s->parent[x];
    }
    return x;
}

static void unite(local_syms *s, uint32_t a, uint32_t b)
{
    a = find(s, a);
    b = find(s, b);
    if (a != b)
        s->parent[a < b ? b : a] = a < b ? a : b;
}

static uint32_t in_slot(const local_syms *s, kiln_node_id n, uint32_t i)
{
    return s->in_base[n] + i;
}

static uint32_t out_slot(const local_syms *s, kiln_node_id n, uint32_t o)
{
    return s->out_base[n] + o;
}

static void local_unions(local_syms *s, kiln_node_id n)
{
    kiln_graph *g = s->g;
    uint32_t nin = kiln_node_input_count(g, n), nout = kiln_node_output_count(g, n);
    for (uint32_t i = 0; i < nin; i++) {
        kiln_anchor p = kiln_node_input_peer(g, n, i);
        if (p.node)
            unite(s, in_slot(s, n, i), out_slot(s, p.node, p.index));
        if ((mc_op_is(g, n, "Merge") || mc_op_is(g, n, "StreamMerge")) && nout && p.node)
            unite(s, in_slot(s, n, i), out_slot(s, n, 0));
    }
    for (uint32_t o = 0; o < nout; o++) {
        int32_t ri = mlc_ref_input(g, n, o);
        if (ri >= 0 && (uint32_t)ri < nin)
            unite(s, out_slot(s, n, o), in_slot(s, n, (uint32_t)ri));
        const char *var;
        if (kiln_attrs_get_string(kiln_desc_attrs(kiln_node_output_desc(g, n, o)),
                                  "ref_var_src_var_name", &var)) {
            kiln_node_id v = kiln_graph_find_node(g, var);
            if (v && kiln_node_output_count(g, v))
                unite(s, out_slot(s, n, o), out_slot(s, v, 0));
        }
    }
}

/* Parent producer a subgraph Data stands for ({0,0}: none). */
static kiln_anchor data_source(kiln_graph *g, kiln_node_id n)
{
    kiln_anchor none = {0, 0};
    int64_t pidx;
    kiln_graph *pg = kiln_graph_parent(g);
    if (!pg || !mc_op_is(g, n, "Data") ||
        !kiln_attrs_get_int(kiln_node_attrs(g, n), "_parent_node_index", &pidx) || pidx < 0)
        return none;
    kiln_node_id pn = kiln_graph_parent_node(g);
    if ((uint64_t)pidx >= kiln_node_input_count(pg, pn))
        return none;
    return kiln_node_input_peer(pg, pn, (uint32_t)pidx);
}

static void local_free(local_syms *s)
{
    free(s->in_base);
    free(s->out_base);
    free(s->parent);
}

/* Build the symbols of @p g; false (nothing left allocated) when memory runs out. */
static bool local_build(local_syms *s, kiln_graph *g)
{
    uint32_t lim = kiln_graph_id_limit(g);
    memset(s, 0, sizeof(*s));
    s->g = g;
    s->in_base = calloc(lim + 1, sizeof(uint32_t));
    s->out_base = calloc(lim + 1, sizeof(uint32_t));
    if (!s->in_base || !s->out_base) {
        local_free(s);
        return false;
    }
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n)) {
        s->in_base[n] = s->nslots;
        s->nslots += kiln_node_input_count(g, n);
        s->out_base[n] = s->nslots;
        s->nslots += kiln_node_output_count(g, n);
    }
    s->parent = malloc((s->nslots + 1) * sizeof(uint32_t));
    if (!s->parent) {
        local_free(s);
        return false;
    }
    for (uint32_t i = 0; i < s->nslots; i++)
        s->parent[i] = i;
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n))
        local_unions(s, n);
    /* Data nodes fed by the same parent producer share its symbol */
    for (kiln_node_id a = kiln_graph_next_node(g, 0); a; a = kiln_graph_next_node(g, a)) {
        kiln_anchor sa = data_source(g, a);
        if (!sa.node || !kiln_node_output_count(g, a))
            continue;
        for (kiln_node_id b = kiln_graph_next_node(g, a); b; b = kiln_graph_next_node(g, b)) {
            kiln_anchor sb = data_source(g, b);
            if (sb.node && mlc_kanchor_eq(sa, sb) && kiln_node_output_count(g, b))
                unite(s, out_slot(s, a, 0), out_slot(s, b, 0));
        }
    }
    return true;
}

static uint32_t local_count(local_syms *s)
{
    uint32_t c = 0;
    for (uint32_t i = 0; i < s->nslots; i++)
        c += find(s, i) == i;
    return c;
}

/* An out anchor that makes a NetOutput input conflict (GE CheckOneSubGraphConflict). */
static bool owned_elsewhere(kiln_graph *g, kiln_node_id n, uint32_t o)
{
    if (mc_op_is(g, n, "Data") || mlc_is_const(g, n) || mc_is_var_like(g, n))
        return true;
    if (kiln_attrs_has(kiln_node_attrs(g, n), "ref_var_src_var_name"))
        return true;
    const char *v;
    return kiln_attrs_get_string(kiln_desc_attrs(kiln_node_output_desc(g, n, o)),
                                 "ref_var_src_var_name", &v);
}

static kiln_status solve(mlc_run *run, kiln_graph *g, const kiln_anchor *dsts, uint32_t n,
                         kiln_graph *pg, kiln_node_id ctrl, const char *what)
{
    char why[320];
    snprintf(why, sizeof(why), "CtrlNodeConflict: %s of %s %s (subgraph %s)", what,
             kiln_node_op_str(pg, ctrl), kiln_node_name_str(pg, ctrl), kiln_graph_name(g));
    return mlc_insert_before_inputs(run, g, dsts, n, why);
}

static kiln_status branch_conflict(mlc_run *run, kiln_graph *pg, kiln_node_id ctrl, kiln_graph *g)
{
    kiln_node_id no = mc_find_netoutput(g);
    if (!no)
        return KILN_OK;
    local_syms s;
    uint32_t nin = kiln_node_input_count(g, no);
    kiln_anchor *dsts = malloc((nin + 1) * sizeof(*dsts));
    uint32_t *used = malloc((nin + 1) * sizeof(*used));
    kiln_status st = KILN_OK;
    if (!dsts || !used || !local_build(&s, g)) {
        st = kiln_errorf(run->err, KILN_ERR_NOMEM, "out of memory");
        goto out;
    }
    uint32_t k = 0, nused = 0;
    for (uint32_t i = 0; i < nin; i++) {
        kiln_anchor p = kiln_node_input_peer(g, no, i);
        if (!p.node)
            continue;
        uint32_t sym = find(&s, in_slot(&s, no, i));
        bool conflict = false;
        for (kiln_node_id n = kiln_graph_next_node(g, 0); n && !conflict;
             n = kiln_graph_next_node(g, n))
            for (uint32_t o = 0; o < kiln_node_output_count(g, n) && !conflict; o++)
                conflict = find(&s, out_slot(&s, n, o)) == sym && owned_elsewhere(g, n, o);
        if (!conflict) {
            for (uint32_t u = 0; u < nused && !conflict; u++)
                conflict = used[u] == sym;
            if (!conflict)
                used[nused++] = sym;
        }
        if (conflict)
            dsts[k++] = (kiln_anchor){no, i};
    }
    local_free(&s);
    st = solve(run, g, dsts, k, pg, ctrl, "branch output");
out:
    free(dsts);
    free(used);
    return st;
}

/* GE IsWhileNeedInsertIdentityAtOutput. */
static bool while_needs_output_copy(kiln_graph *body, kiln_node_id no, local_syms *s)
{
    if (kiln_node_input_count(body, no) != 1)
        return true;
    kiln_node_id data = 0;
    const kiln_sym s_data = mc_sym(body, "Data");
    for (kiln_node_id n = kiln_graph_next_node(body, 0); n && !data;
         n = kiln_graph_next_node(body, n))
        if (mc_is_sym(body, n, s_data))
            data = n;
    if (!data || kiln_node_output_count(body, data) != 1)
        return true;
    kiln_anchor p = kiln_node_input_peer(body, no, 0);
    if (!p.node)
        return false;
    if (local_count(s) == 2)
        return true;
    uint32_t sym = find(s, out_slot(s, p.node, p.index));
    for (kiln_node_id n = kiln_graph_next_node(body, 0); n; n = kiln_graph_next_node(body, n)) {
        if (!mlc_is_continuous_input(body, n) && !mlc_is_nopad_input(body, n))
            continue;
        for (uint32_t i = 0; i < kiln_node_input_count(body, n); i++)
            if (find(s, in_slot(s, n, i)) == sym)
                return true;
    }
    return false;
}

static kiln_status while_conflict(mlc_run *run, kiln_graph *pg, kiln_node_id ctrl, kiln_graph *body)
{
    kiln_node_id no = mc_find_netoutput(body);
    if (!no)
        return KILN_OK;
    uint32_t nin = kiln_node_input_count(body, no);
    uint32_t lim = kiln_graph_id_limit(body);
    uint8_t *bypass = calloc(nin + 1, 1);
    kiln_node_id *changed = calloc(lim + 1, sizeof(*changed));
    kiln_anchor *dsts = malloc((nin + lim + 1) * sizeof(*dsts));
    local_syms s;
    kiln_status st = KILN_OK;
    if (!bypass || !changed || !dsts || !local_build(&s, body)) {
        st = kiln_errorf(run->err, KILN_ERR_NOMEM, "out of memory");
        goto out;
    }
    uint32_t nchanged = 0;
    const kiln_sym s_data = mc_sym(body, "Data");
    for (kiln_node_id n = kiln_graph_next_node(body, 0); n; n = kiln_graph_next_node(body, n)) {
        int64_t in_idx, out_idx;
        if (!mc_is_sym(body, n, s_data) || kiln_node_output_count(body, n) == 0 ||
            !kiln_attrs_get_int(kiln_node_attrs(body, n), "_parent_node_index", &in_idx) ||
            kiln_node_output_use_count(body, n, 0) != 1)
            continue;
        kiln_anchor d = kiln_use_dst(body, kiln_use_first(body, n, 0));
        if (d.node != no ||
            !kiln_attrs_get_int(kiln_desc_attrs(kiln_node_input_desc(body, no, d.index)),
                                "_parent_node_index", &out_idx))
            continue;
        if (in_idx != out_idx)
            changed[nchanged++] = n;
        else
            bypass[d.index] = 1;
    }
    bool need = while_needs_output_copy(body, no, &s);
    local_free(&s);
    uint32_t k = 0;
    for (uint32_t i = 0; need && i < nin; i++)
        if (!bypass[i] && !mlc_skip_input(body, no, i))
            dsts[k++] = (kiln_anchor){no, i};
    st = solve(run, body, dsts, k, pg, ctrl, "loop body output");
    k = 0;
    for (uint32_t c = 0; c < nchanged && st == KILN_OK; c++)
        if (kiln_node_output_use_count(body, changed[c], 0) == 1)
            dsts[k++] = kiln_use_dst(body, kiln_use_first(body, changed[c], 0));
    if (st == KILN_OK)
        st = solve(run, body, dsts, k, pg, ctrl, "exchanged loop input");
out:
    free(bypass);
    free(changed);
    free(dsts);
    return st;
}

/* The control node's subgraph with role @p role, else number @p idx. */
static kiln_graph *subgraph(kiln_graph *g, kiln_node_id n, const char *role, uint32_t idx)
{
    uint32_t cnt = kiln_node_subgraph_count(g, n);
    for (uint32_t i = 0; i < cnt; i++) {
        const char *r = NULL;
        kiln_graph *sg = kiln_node_subgraph(g, n, i, &r);
        if (r && strcmp(r, role) == 0)
            return sg;
    }
    return idx < cnt ? kiln_node_subgraph(g, n, idx, NULL) : NULL;
}

static kiln_status ctrl_node(mlc_run *run, kiln_graph *g, kiln_node_id n)
{
    kiln_status st = KILN_OK;
    if (!kiln_node_subgraph_count(g, n))
        return KILN_OK; /* every case below works on the node's subgraphs */
    if (mc_op_is(g, n, "If") || mc_op_is(g, n, "StatelessIf")) {
        kiln_graph *t = subgraph(g, n, "then_branch", 0), *e = subgraph(g, n, "else_branch", 1);
        if (t)
            st = branch_conflict(run, g, n, t);
        if (e && st == KILN_OK)
            st = branch_conflict(run, g, n, e);
    } else if (mc_op_is(g, n, "Case") || mc_op_is(g, n, "StatelessCase")) {
        uint32_t cnt = kiln_node_subgraph_count(g, n);
        for (uint32_t i = 0; i < cnt && st == KILN_OK; i++)
            st = branch_conflict(run, g, n, kiln_node_subgraph(g, n, i, NULL));
    } else if (mc_op_is(g, n, "While") || mc_op_is(g, n, "StatelessWhile")) {
        kiln_graph *body = subgraph(g, n, "body", 1);
        if (body)
            st = while_conflict(run, g, n, body);
    }
    return st;
}

kiln_status mlc_ctrl_node_conflict(mlc_run *run)
{
    /* the target, then every subgraph of the root nested inside it */
    uint32_t total = kiln_graph_all_subgraph_count(run->root);
    kiln_status st = KILN_OK;
    for (uint32_t gi = 0; gi <= total && st == KILN_OK; gi++) {
        kiln_graph *g = gi == 0 ? run->root : kiln_graph_all_subgraph(run->root, gi - 1);
        if (!mlc_graph_within(g, run->target))
            continue;
        /* nodes added while solving are Identities: a snapshot bound is enough */
        uint32_t lim = kiln_graph_id_limit(g);
        for (kiln_node_id n = kiln_graph_next_node(g, 0); n && n < lim && st == KILN_OK;
             n = kiln_graph_next_node(g, n))
            st = ctrl_node(run, g, n);
    }
    return st;
}

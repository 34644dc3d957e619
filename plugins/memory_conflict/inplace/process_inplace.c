/*
 * process_inplace.c - ProcessInplace, a graph pass (GE mem_inplace.cc,
 * called by HybridMemAssigner::Assign before block assignment;
 * GE_SEMANTICS.md 5.2, seed ge-memory-conflict-handling.txt 3.4), and the
 * plugin libkiln_mem_inplace.so that registers it.
 *
 * On the root only (KILN_PASS_NO_SUBGRAPHS), over the nodes of the root and
 * of every subgraph (GE GetAllNodes), with the kernel's memory symbol table
 * (GE GetRefMapping) as it stands when the pass starts:
 *   1. read-only symbols: the symbols of every output of a Data-like
 *      (Data, RefData, AippData), variable (Variable, VariableV2,
 *      VarHandleOp) or constant (Const, Constant, FileConstant,
 *      ConstPlaceHolder) node;
 *   2. candidates: node attr _output_inplace_ability, a list_list_int of
 *      [out_idx, in_idx] pairs (any other entry, attribute type or an index
 *      out of range fails the pass naming the node), grouped by output in
 *      ascending order, inputs in attribute order (GE's map<out, vector<in>>);
 *      a pair survives GetSupportInplaceOutput when input in_idx has a
 *      producer P and, over every data consumer of every output of P: this
 *      node has the largest topological position; each consumer's stream
 *      (node attr _kiln_stream_id, JSON stream_id; -1 or absent = any)
 *      matches P's; no consumer has node attr reference = true;
 *   3. filters, in GE's order: byte size of the output == byte size of the
 *      input (dims x dtype size of the descriptors; an unknown dim drops
 *      the pair); the input's symbol is not read-only; the node has neither
 *      continuous_output nor _no_padding_continuous_output (all pairs
 *      dropped); outputs carrying ref_var_src_var_name are dropped; input
 *      and output already in one symbol -> dropped (nothing to do); the
 *      merged two-symbol layout check (inplace_conflict.c) -> dropped on a
 *      conflict;
 *   4. per output (ascending), the first surviving input not already claimed
 *      by another output of the node;
 *   5. reuse_input = true / reuse_input_index = k set tentatively on every
 *      chosen output descriptor, then the If/Case/While subgraph check of
 *      GE_SEMANTICS 3.8 on the whole graph: any conflict reverts ALL of them
 *      (global all-or-nothing, GE_SEMANTICS 11.11).  Otherwise the flags
 *      stay, and the kernel's symbol table, rebuilt on the next query,
 *      merges each output's symbol into its input producer's symbol (GE
 *      MergeSymbolTable: one symbol fewer per reuse).
 * Every reuse and every revert is explained (kiln_pass_explain); dropped
 * candidates are logged at debug level.  Counters: candidates, reused,
 * reverted.
 *
 * kiln differences, both for idempotence (GE runs ProcessInplace once per
 * build): an output whose descriptor already says reuse_input = true gets no
 * new input, and the input it reuses counts as claimed (GE, run again, would
 * let another output of the node claim that input too); a revert restores
 * each descriptor's previous reuse_input / reuse_input_index exactly (GE
 * leaves reuse_input = false behind), so a reverted run leaves the graph as
 * it was.
 */
#include "inplace.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ABILITY "_output_inplace_ability"

/** One [out, in] candidate of a node. */
typedef struct pair_ {
    uint32_t out, in;
} pair_;

/** A chosen reuse, with what the descriptor held before. */
typedef struct choice {
    kiln_graph *g;
    kiln_node_id n;
    uint32_t out, in;
    bool had_flag, old_flag, had_index;
    int64_t old_index;
    char why[256]; /* symbols merged, for the explanation */
} choice;

typedef struct pi_run {
    kiln_pass_ctx *ctx;
    kiln_graph *root;
    kiln_error *err;
    const kiln_symtab *st;
    uint8_t *read_only; /* per symbol */
    inplace_check check;
    choice *ch;
    uint32_t nch, cap;
    int64_t candidates;
} pi_run;

static void dropped(pi_run *r, kiln_graph *g, kiln_node_id n, const pair_ *p, const char *why)
{
    kiln_diag(r->ctx, KILN_SEV_DEBUG, "%s output %u cannot reuse input %u: %s",
              kiln_node_name_str(g, n), p->out, p->in, why);
}

/* ---- step 1 --------------------------------------------------------------- */

static kiln_status mark_read_only(pi_run *r)
{
    uint32_t nsyms = kiln_symtab_count(r->st);
    r->read_only = calloc((size_t)nsyms + 1, 1);
    if (!r->read_only)
        return KILN_ERR_NOMEM;
    uint32_t total = kiln_graph_all_subgraph_count(r->root);
    for (uint32_t gi = 0; gi <= total; gi++) {
        kiln_graph *g = gi == 0 ? r->root : kiln_graph_all_subgraph(r->root, gi - 1);
        for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n)) {
            if (!mc_is_data_like(g, n) && !mc_is_variable(g, n) && !mlc_is_const(g, n))
                continue;
            for (uint32_t o = 0; o < kiln_node_output_count(g, n); o++) {
                uint32_t s = kiln_symtab_symbol(r->st, g, n, o, true);
                if (s < nsyms)
                    r->read_only[s] = 1;
            }
        }
    }
    return KILN_OK;
}

/* ---- step 2 --------------------------------------------------------------- */

static int64_t stream_of(const kiln_graph *g, kiln_node_id n)
{
    int64_t s = -1;
    if (!kiln_attrs_get_int(kiln_node_attrs(g, n), "_kiln_stream_id", &s))
        s = -1;
    return s;
}

/* GE GetSupportInplaceOutput for input @p in of @p n; NULL = supported, else why not. */
static const char *support(kiln_graph *g, kiln_node_id n, uint32_t in)
{
    kiln_anchor p = kiln_node_input_peer(g, n, in);
    if (!p.node)
        return "the input has no producer";
    uint32_t me = kiln_graph_topo_index(g, n);
    int64_t ps = stream_of(g, p.node);
    for (uint32_t o = 0; o < kiln_node_output_count(g, p.node); o++)
        for (uint32_t c = kiln_use_first(g, p.node, o); c; c = kiln_use_next(g, c)) {
            kiln_node_id d = kiln_use_dst(g, c).node;
            if (d != n && kiln_graph_topo_index(g, d) > me)
                return "another consumer of the producer runs later";
            int64_t ds = stream_of(g, d);
            if (ps != -1 && ds != -1 && ds != ps)
                return "a consumer of the producer is on another stream";
            if (mc_node_bool(g, d, "reference"))
                return "a consumer of the producer has reference = true";
        }
    return NULL;
}

static int cmp_pair(const void *x, const void *y)
{
    const pair_ *a = x, *b = y;
    return (a->out > b->out) - (a->out < b->out);
}

/* Read the ability attribute: *np pairs into *pp (malloc'd), sorted stably by out. */
static kiln_status read_ability(pi_run *r, kiln_graph *g, kiln_node_id n, pair_ **pp, uint32_t *np)
{
    const kiln_attrs *a = kiln_node_attrs(g, n);
    uint32_t cnt = 0;
    *pp = NULL;
    *np = 0;
    if (!kiln_attrs_has(a, ABILITY))
        return KILN_OK;
    if (!kiln_attrs_get_list_list_int(a, ABILITY, &cnt))
        return kiln_errorf(r->err, KILN_ERR_INVALID,
                           "ProcessInplace: node %s: %s must be a list of [out_idx, in_idx] pairs",
                           kiln_node_name_str(g, n), ABILITY);
    pair_ *v = malloc(((size_t)cnt + 1) * sizeof(*v));
    if (!v)
        return KILN_ERR_NOMEM;
    uint32_t nin = kiln_node_input_count(g, n), nout = kiln_node_output_count(g, n);
    for (uint32_t i = 0; i < cnt; i++) {
        const int64_t *e = NULL;
        uint32_t len = 0;
        (void)kiln_attrs_get_list_list_int_at(a, ABILITY, i, &e, &len);
        if (len != 2) {
            free(v);
            return kiln_errorf(r->err, KILN_ERR_INVALID,
                               "ProcessInplace: node %s: %s entry %u has %u values, not an "
                               "[out_idx, in_idx] pair",
                               kiln_node_name_str(g, n), ABILITY, i, len);
        }
        if (e[0] < 0 || e[0] >= (int64_t)nout || e[1] < 0 || e[1] >= (int64_t)nin) {
            free(v);
            return kiln_errorf(r->err, KILN_ERR_INVALID,
                               "ProcessInplace: node %s: %s entry %u [%lld, %lld] is out of "
                               "range (%u outputs, %u inputs)",
                               kiln_node_name_str(g, n), ABILITY, i, (long long)e[0],
                               (long long)e[1], nout, nin);
        }
        v[i] = (pair_){(uint32_t)e[0], (uint32_t)e[1]};
    }
    /* stable sort by output (insertion sort: lists are tiny) */
    for (uint32_t i = 1; i < cnt; i++)
        for (uint32_t j = i; j > 0 && cmp_pair(&v[j - 1], &v[j]) > 0; j--) {
            pair_ t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    *pp = v;
    *np = cnt;
    return KILN_OK;
}

/* ---- step 3 --------------------------------------------------------------- */

static int64_t bytes_of(const kiln_tensor_desc *d)
{
    if (!d)
        return -1;
    int64_t numel = kiln_desc_numel(d);
    return numel < 0 ? -1 : numel * (int64_t)kiln_dtype_size(kiln_desc_dtype(d));
}

/* The filters of GE_SEMANTICS 5.2 step 3 for one pair; *keep receives the verdict. */
static kiln_status filter(pi_run *r, kiln_graph *g, kiln_node_id n, const pair_ *p, bool *keep,
                          char *merged, size_t merged_size)
{
    char why[400];
    *keep = false;
    int64_t ob = bytes_of(kiln_node_output_desc(g, n, p->out));
    int64_t ib = bytes_of(kiln_node_input_desc(g, n, p->in));
    if (ob < 0 || ib < 0 || ob != ib) {
        snprintf(why, sizeof(why), "byte sizes differ (output %lld, input %lld; -1 = unknown)",
                 (long long)ob, (long long)ib);
        dropped(r, g, n, p, why);
        return KILN_OK;
    }
    uint32_t si = kiln_symtab_symbol(r->st, g, n, p->in, false);
    uint32_t so = kiln_symtab_symbol(r->st, g, n, p->out, true);
    if (si == KILN_SYMTAB_NONE || so == KILN_SYMTAB_NONE) {
        dropped(r, g, n, p, "no symbol");
        return KILN_OK;
    }
    if (r->read_only[si]) {
        dropped(r, g, n, p, "the input's memory is read-only (data, variable or constant)");
        return KILN_OK;
    }
    if (mc_node_bool(g, n, "continuous_output") ||
        mc_node_bool(g, n, "_no_padding_continuous_output")) {
        dropped(r, g, n, p, "the node has (no-padding) continuous outputs");
        return KILN_OK;
    }
    const char *var;
    if (kiln_attrs_get_string(kiln_desc_attrs(kiln_node_output_desc(g, n, p->out)),
                              "ref_var_src_var_name", &var) &&
        var[0]) {
        dropped(r, g, n, p, "the output shares a variable's memory (ref_var_src_var_name)");
        return KILN_OK;
    }
    if (si == so) {
        dropped(r, g, n, p, "input and output already share one symbol");
        return KILN_OK;
    }
    bool conflict = false;
    kiln_status st = inplace_merged_conflict(&r->check, r->st, si, so, &conflict, why, sizeof(why));
    if (st != KILN_OK)
        return st;
    if (conflict) {
        char msg[480];
        snprintf(msg, sizeof(msg), "merging the two symbols conflicts: %s", why);
        dropped(r, g, n, p, msg);
        return KILN_OK;
    }
    char ni[96], no[96];
    kiln_symtab_symbol_name(r->st, si, ni, sizeof(ni));
    kiln_symtab_symbol_name(r->st, so, no, sizeof(no));
    snprintf(merged, merged_size, "symbol %s merged into %s", no, ni);
    *keep = true;
    return KILN_OK;
}

/* ---- steps 2-4 for one node ------------------------------------------------ */

static kiln_status add_choice(pi_run *r, kiln_graph *g, kiln_node_id n, const pair_ *p,
                              const char *merged)
{
    if (r->nch == r->cap) {
        uint32_t cap = r->cap ? 2 * r->cap : 16;
        choice *v = realloc(r->ch, (size_t)cap * sizeof(*v));
        if (!v)
            return KILN_ERR_NOMEM;
        r->ch = v;
        r->cap = cap;
    }
    choice *c = &r->ch[r->nch++];
    memset(c, 0, sizeof(*c));
    c->g = g;
    c->n = n;
    c->out = p->out;
    c->in = p->in;
    snprintf(c->why, sizeof(c->why), "%s", merged);
    return KILN_OK;
}

/* Input index output @p o already reuses (reuse_input = true), or -1. */
static int64_t reused_input(kiln_graph *g, kiln_node_id n, uint32_t o)
{
    const kiln_attrs *a = kiln_desc_attrs(kiln_node_output_desc(g, n, o));
    bool flag = false;
    int64_t k = -1;
    if (!kiln_attrs_get_bool(a, "reuse_input", &flag) || !flag ||
        !kiln_attrs_get_int(a, "reuse_input_index", &k))
        return -1;
    return k;
}

static kiln_status process_node(pi_run *r, kiln_graph *g, kiln_node_id n)
{
    pair_ *v;
    uint32_t np;
    kiln_status st = read_ability(r, g, n, &v, &np);
    if (st != KILN_OK || np == 0)
        return st;
    r->candidates += np;
    uint32_t nin = kiln_node_input_count(g, n);
    uint8_t *claimed = calloc((size_t)nin + 1, 1);
    if (!claimed) {
        free(v);
        return KILN_ERR_NOMEM;
    }
    /* inputs an output already reuses are claimed (kiln: keeps a re-run from
     * handing a second output the same input) */
    for (uint32_t o = 0; o < kiln_node_output_count(g, n); o++) {
        int64_t k = reused_input(g, n, o);
        if (k >= 0 && k < (int64_t)nin)
            claimed[k] = 1;
    }
    char merged[256];
    for (uint32_t i = 0; i < np && st == KILN_OK;) {
        uint32_t out = v[i].out;
        bool done = reused_input(g, n, out) >= 0; /* this output has its input */
        if (done)
            dropped(r, g, n, &v[i], "the output already reuses an input (reuse_input)");
        for (; i < np && v[i].out == out && st == KILN_OK; i++) {
            if (done)
                continue;
            const char *why = support(g, n, v[i].in);
            if (why) {
                dropped(r, g, n, &v[i], why);
                continue;
            }
            bool keep = false;
            st = filter(r, g, n, &v[i], &keep, merged, sizeof(merged));
            if (st != KILN_OK || !keep)
                continue;
            if (claimed[v[i].in]) {
                dropped(r, g, n, &v[i], "the input is claimed by another output of the node");
                continue;
            }
            claimed[v[i].in] = 1;
            done = true;
            st = add_choice(r, g, n, &v[i], merged);
        }
    }
    free(claimed);
    free(v);
    return st;
}

/* ---- step 5 --------------------------------------------------------------- */

static kiln_status set_flags(pi_run *r, choice *c)
{
    kiln_attrs *a = kiln_desc_attrs_mut(c->g, kiln_node_output_desc(c->g, c->n, c->out));
    if (!a)
        return kiln_errorf(r->err, KILN_ERR_NOMEM, "ProcessInplace: out of memory");
    c->had_flag = kiln_attrs_get_bool(a, "reuse_input", &c->old_flag);
    c->had_index = kiln_attrs_get_int(a, "reuse_input_index", &c->old_index);
    if (kiln_attrs_set_bool(a, "reuse_input", true) != KILN_OK ||
        kiln_attrs_set_int(a, "reuse_input_index", c->in) != KILN_OK)
        return kiln_errorf(r->err, KILN_ERR_NOMEM, "ProcessInplace: out of memory");
    return KILN_OK;
}

static void restore_flags(choice *c)
{
    kiln_attrs *a = kiln_desc_attrs_mut(c->g, kiln_node_output_desc(c->g, c->n, c->out));
    if (!a)
        return;
    if (c->had_flag)
        (void)kiln_attrs_set_bool(a, "reuse_input", c->old_flag);
    else
        (void)kiln_attrs_remove(a, "reuse_input");
    if (c->had_index)
        (void)kiln_attrs_set_int(a, "reuse_input_index", c->old_index);
    else
        (void)kiln_attrs_remove(a, "reuse_input_index");
}

/* Tentative reuse, subgraph check, keep or revert all.  *kept: reuses left. */
static kiln_status merge_all(pi_run *r, uint32_t *kept)
{
    kiln_status st = KILN_OK;
    uint32_t set = 0;
    *kept = 0;
    for (; set < r->nch && st == KILN_OK; set++)
        st = set_flags(r, &r->ch[set]);
    bool conflict = false;
    if (st == KILN_OK)
        st = inplace_ctrl_conflict(&r->check, &conflict);
    if (st != KILN_OK || conflict) {
        for (uint32_t i = 0; i < set; i++)
            restore_flags(&r->ch[i]);
        for (uint32_t i = 0; i < r->nch && st == KILN_OK; i++) {
            choice *c = &r->ch[i];
            kiln_pass_explain(r->ctx, c->g, c->n,
                              "reverted: output %u would reuse input %u, but "
                              "with all %u tentative reuses an If/Case/While subgraph conflicts "
                              "(%s); all-or-nothing",
                              c->out, c->in, r->nch, r->check.first_why);
        }
        if (st == KILN_OK)
            kiln_pass_stat_add(r->ctx, "reverted", r->nch);
        return st;
    }
    for (uint32_t i = 0; i < r->nch; i++) {
        choice *c = &r->ch[i];
        kiln_anchor p = kiln_node_input_peer(c->g, c->n, c->in);
        kiln_pass_explain(r->ctx, c->g, c->n,
                          "output %u reuses input %u (producer %s:%u; last "
                          "consumer, same stream, sizes equal, no layout conflict): %s",
                          c->out, c->in, kiln_node_name_str(c->g, p.node), p.index, c->why);
    }
    kiln_pass_stat_add(r->ctx, "reused", r->nch);
    *kept = r->nch;
    return KILN_OK;
}

/* ---- the pass -------------------------------------------------------------- */

static kiln_status process(pi_run *r, uint32_t *kept)
{
    kiln_status st = kiln_symtab_get(r->root, &r->st, r->err);
    if (st != KILN_OK)
        return st;
    const kiln_node_id *order;
    uint32_t norder;
    if ((st = kiln_graph_topo_order(r->root, &order, &norder, r->err)) != KILN_OK)
        return st;
    if ((st = mark_read_only(r)) != KILN_OK)
        return st;
    uint32_t total = kiln_graph_all_subgraph_count(r->root);
    for (uint32_t gi = 0; gi <= total && st == KILN_OK; gi++) {
        kiln_graph *g = gi == 0 ? r->root : kiln_graph_all_subgraph(r->root, gi - 1);
        for (kiln_node_id n = kiln_graph_next_node(g, 0); n && st == KILN_OK;
             n = kiln_graph_next_node(g, n))
            st = process_node(r, g, n);
    }
    if (st == KILN_OK)
        kiln_pass_stat_add(r->ctx, "candidates", r->candidates);
    if (st == KILN_OK && r->nch)
        st = merge_all(r, kept);
    return st;
}

static kiln_pass_result run_graph(void *inst, kiln_pass_ctx *ctx, kiln_graph *root)
{
    (void)inst;
    if (kiln_graph_parent(root))
        return KILN_PASS_NOT_CHANGED;
    pi_run r = {.ctx = ctx, .root = root, .err = kiln_pass_error(ctx)};
    uint32_t kept = 0;
    kiln_status st = inplace_check_init(&r.check, ctx, root);
    if (st == KILN_OK)
        st = process(&r, &kept);
    if (st == KILN_ERR_NOMEM)
        kiln_errorf(r.err, st, "ProcessInplace: out of memory");
    inplace_check_fini(&r.check);
    free(r.read_only);
    free(r.ch);
    if (st != KILN_OK)
        return KILN_PASS_FAILED;
    return kept ? KILN_PASS_CHANGED : KILN_PASS_NOT_CHANGED;
}

const kiln_pass_desc inplace_process_inplace_pass = {
    .struct_size = sizeof(kiln_pass_desc),
    .kind = KILN_PASS_KIND_GRAPH,
    .name = "ProcessInplace",
    .summary = "let outputs reuse an input's memory where GE's inplace rules allow "
               "(GE mem_inplace ProcessInplace)",
    .flags = KILN_PASS_NO_SUBGRAPHS | KILN_PASS_PRESERVES_CFG,
    .run_graph = run_graph,
};

static kiln_status init(const kiln_host_api *h, kiln_registrar *reg, kiln_error *e)
{
    (void)h;
    (void)e;
    return kiln_register_pass(reg, &inplace_process_inplace_pass);
}

KILN_PLUGIN_DEFINE("kiln.mem_inplace", "0.1.0", "Apache-2.0",
                   "ProcessInplace: GE's inplace memory reuse with its conflict checks", init, NULL)

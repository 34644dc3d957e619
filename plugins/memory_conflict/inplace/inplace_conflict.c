/*
 * inplace_conflict.c - the two conflict checks of ProcessInplace
 * (GE_SEMANTICS.md 5.2 steps 3 and 5).
 *
 * Merged two-symbol check (GE RemoveSymbolConflicts ->
 * ConstructSingleNodeSymbolTable + MemLayoutConflictUtil::
 * IsGraphExistMemConflictSymbol): the anchors of the input's symbol followed
 * by those of the output's symbol form ONE symbol; every anchor is marked
 * with its AnchorAttributes (GE MarkInTypes / MarkOutTypes, the layout
 * pass's anchor_attrs.c with the root as the graph being processed) and
 * every anchor pair (i < j) is checked as GE Checker::CheckConflict does:
 *   - skipped: both anchors on one node; two outputs, neither
 *     CONTINUOUS_OUTPUT, one referencing the other's node through
 *     ref_var_src_var_name (GE IsSkip);
 *   - per attribute pair, the kernel's unconditional class
 *     (kiln_checker_classify): NEVER - nothing; ALWAYS - conflict;
 *     CONDITIONAL - the registered checker (kiln_checker_find /
 *     kiln_checker_run; CALL_AS_SYMBOL checkers once per attribute pair),
 *     a conflict when it asks for any anchor to be isolated; no checker -
 *     no conflict.
 * The first conflict ends the check (GE returns at the first symbol with a
 * non-empty conflict set; the merged table has one symbol).  Nothing is
 * edited.  kiln difference: GE fails the whole build when an absolute
 * conflict joins two outputs ("not supported"); here it simply forbids the
 * reuse.
 *
 * If/Case/While check (GE IsCtrlNodeSubgraphExistMemConflictSymbol): the
 * layout pass's ctrl_node_conflict.c is compiled into this plugin, and this
 * file defines the mlc_* functions it calls.  mlc_insert_before_inputs
 * RECORDS the anchors the rules would isolate instead of inserting an
 * Identity, so one walk over the root and every subgraph answers whether
 * any control-node subgraph conflicts.  The local symbol tables of that file
 * follow reuse_input / reuse_input_index, so the tentative flags set by
 * process_inplace.c are seen, as in GE.
 *
 * The other helpers the layout sources call (mlc_graph_static,
 * mlc_graph_fm_refreshable, mlc_graph_within, mlc_skip_input, and the graph
 * info and checker call used here) come from ../layout/mlc_graph.c, which
 * this plugin compiles as the layout pass does.
 */
#include "inplace.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- what the layout sources need ---------------------------------------- */

/* Check mode: record what CtrlNodeConflict would isolate, edit nothing. */
kiln_status mlc_insert_before_inputs(mlc_run *run, kiln_graph *g, const kiln_anchor *dsts,
                                     uint32_t n, const char *why)
{
    inplace_check *c = (inplace_check *)run; /* run is the first member */
    if (n == 0)
        return KILN_OK;
    if (c->conflicts == 0)
        snprintf(c->first_why, sizeof(c->first_why), "%s: input %u of %s", why, dsts[0].index,
                 kiln_node_name_str(g, dsts[0].node));
    c->conflicts += n;
    return KILN_OK;
}

/* ---- set-up --------------------------------------------------------------- */

kiln_status inplace_check_init(inplace_check *c, kiln_pass_ctx *ctx, kiln_graph *root)
{
    memset(c, 0, sizeof(*c));
    mlc_run *run = &c->run;
    run->ctx = ctx;
    run->root = root;
    run->target = root;
    run->err = kiln_pass_error(ctx);
    mc_opsyms_init(&run->ops, root);
    run->fm_option = mlc_option_is(ctx, "ge.featureBaseRefreshable", "1");
    run->root_static = mlc_graph_static(root);
    /* GE GraphInfo of the graph handed to IsGraphExistMemConflictSymbol (the root) */
    run->graph_info = mlc_graph_info(run);
    run->res = kiln_checker_result_create();
    return run->res ? KILN_OK : KILN_ERR_NOMEM;
}

void inplace_check_fini(inplace_check *c)
{
    kiln_checker_result_destroy(c->run.res);
    c->run.res = NULL;
}

/* ---- the merged two-symbol check ------------------------------------------ */

typedef struct merged {
    kiln_mem_anchor *a;
    mlc_attrs *t;
    uint32_t n;
} merged;

/* Copy and mark the anchors of @p sym; @p other is the symbol merged with it. */
static void add_symbol(inplace_check *c, const kiln_symtab *st, uint32_t sym, uint32_t other,
                       merged *m)
{
    uint32_t cnt = 0;
    const kiln_symtab_anchor *sa = kiln_symtab_anchors(st, sym, &cnt);
    for (uint32_t i = 0; i < cnt; i++) {
        kiln_graph *g = kiln_symtab_graph(st, sa[i].graph);
        if (!g)
            continue;
        kiln_mem_anchor *a = &m->a[m->n];
        mlc_attrs *t = &m->t[m->n];
        *a = (kiln_mem_anchor){g, sa[i].node, sa[i].index, sa[i].is_output};
        if (a->is_output) {
            mlc_mark_output(&c->run, st, sym, g, a->node, a->index, t);
            /* GE IsRefFromVar looks the var up in the merged table: it may be
             * in the other half */
            mlc_attrs alt;
            if (!t->ref_node) {
                mlc_mark_output(&c->run, st, other, g, a->node, a->index, &alt);
                if (alt.ref_node)
                    *t = alt;
            }
        } else {
            mlc_mark_input(&c->run, g, a->node, a->index, t);
        }
        m->n++;
    }
}

static void describe(char *buf, size_t size, kiln_anchor_attr ta, kiln_anchor_attr tb,
                     const char *rule, const char *reason, const kiln_mem_anchor *a,
                     const kiln_mem_anchor *b)
{
    char ka[160], kb[160];
    mlc_anchor_key(a, ka, sizeof(ka));
    mlc_anchor_key(b, kb, sizeof(kb));
    snprintf(buf, size, "pair (%s, %s), %s%s%s; anchors %s, %s", kiln_anchor_attr_name(ta),
             kiln_anchor_attr_name(tb), rule, reason[0] ? ": " : "", reason, ka, kb);
}

/* One attribute pair of one anchor pair; *hit on conflict. */
static kiln_status check_types(inplace_check *c, const merged *m, uint32_t i, uint32_t j,
                               kiln_anchor_attr ta, kiln_anchor_attr tb,
                               bool visit[KILN_AA_COUNT][KILN_AA_COUNT], bool *hit, char *why,
                               size_t why_size)
{
    mlc_run *run = &c->run;
    const kiln_mem_anchor *a = &m->a[i], *b = &m->a[j];
    kiln_conflict_class cls = kiln_checker_classify(run->root, ta, tb);
    if (cls == KILN_CONFLICT_NEVER)
        return KILN_OK;
    if (cls == KILN_CONFLICT_ALWAYS) {
        describe(why, why_size, ta, tb, "absolute conflict", "", a, b);
        *hit = true;
        return KILN_OK;
    }
    const char *name = NULL;
    kiln_status st = mlc_run_checker(run, a, b, ta, tb, m->a, m->n, visit, &name);
    if (st != KILN_OK || !name)
        return st;
    if (kiln_checker_result_count(run->res) > 0) {
        describe(why, why_size, ta, tb, name, kiln_checker_result_reason(run->res), a, b);
        *hit = true;
    }
    return KILN_OK;
}

static kiln_status find_conflict(inplace_check *c, const merged *m, bool *hit, char *why,
                                 size_t why_size)
{
    bool visit[KILN_AA_COUNT][KILN_AA_COUNT];
    memset(visit, 0, sizeof(visit));
    for (uint32_t i = 0; i < m->n; i++)
        for (uint32_t j = i + 1; j < m->n; j++) {
            const mlc_attrs *ta = &m->t[i], *tb = &m->t[j];
            if (mlc_skip_pair(&m->a[i], ta, &m->a[j], tb))
                continue;
            for (uint8_t x = 0; x < ta->n; x++)
                for (uint8_t y = 0; y < tb->n; y++) {
                    kiln_status st =
                        check_types(c, m, i, j, (kiln_anchor_attr)ta->t[x],
                                    (kiln_anchor_attr)tb->t[y], visit, hit, why, why_size);
                    if (st != KILN_OK || *hit)
                        return st;
                }
        }
    return KILN_OK;
}

kiln_status inplace_merged_conflict(inplace_check *c, const kiln_symtab *st, uint32_t sym_in,
                                    uint32_t sym_out, bool *conflict, char *why, size_t why_size)
{
    uint32_t nin = 0, nout = 0;
    (void)kiln_symtab_anchors(st, sym_in, &nin);
    (void)kiln_symtab_anchors(st, sym_out, &nout);
    merged m = {0};
    m.a = malloc(((size_t)nin + nout + 1) * sizeof(*m.a));
    m.t = malloc(((size_t)nin + nout + 1) * sizeof(*m.t));
    *conflict = false;
    if (why_size)
        why[0] = 0;
    kiln_status rc = KILN_OK;
    if (!m.a || !m.t) {
        rc = kiln_errorf(c->run.err, KILN_ERR_NOMEM, "ProcessInplace: out of memory");
    } else {
        add_symbol(c, st, sym_in, sym_out, &m);
        add_symbol(c, st, sym_out, sym_in, &m);
        rc = find_conflict(c, &m, conflict, why, why_size);
    }
    free(m.a);
    free(m.t);
    return rc;
}

/* ---- the If/Case/While check ---------------------------------------------- */

kiln_status inplace_ctrl_conflict(inplace_check *c, bool *conflict)
{
    c->conflicts = 0;
    c->first_why[0] = 0;
    c->run.target = c->run.root;
    kiln_status st = mlc_ctrl_node_conflict(&c->run);
    *conflict = c->conflicts > 0;
    return st;
}

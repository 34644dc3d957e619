/*
 * handle_memory_layout_conflict.c - HandleMemoryLayoutConflict, a graph pass
 * (GE GraphOptimize::HandleMemoryLayoutConflict / MemLayoutConflictOptimizer,
 * GE_SEMANTICS.md 3; seed ge-memory-conflict-handling.txt 3.3).
 *
 * Driver (3.1), on the root only (KILN_PASS_NO_SUBGRAPHS):
 *   1. targets: the root when it is static, else every static subgraph
 *      whose parent node's graph is not static ("top static graphs"); a
 *      graph is static unless its attr _dynamic_shape_partitioned or
 *      _graph_unknown_flag is true.  None: nothing to do.
 *   2. CtrlNodeConflict (ctrl_node_conflict.c) for every target;
 *   3. Process every target: graph info (3.3), the kernel's memory symbol
 *      table (GetRefMapping, restricted to anchors of the target and the
 *      graphs nested in it), AnchorAttribute marking of every anchor
 *      (anchor_attrs.c), then per symbol in strcmp order of its name: the
 *      conflict anchors (3.5, below) and SolveConflict (solve_conflict.c).
 *      A symbol whose anchors' attributes pair only as NEVER or as
 *      CONDITIONAL without a checker cannot conflict: it is counted in the
 *      statistic and skipped before naming and sorting (collect).
 *
 * Graph info of a target: ROOT_GRAPH_STATIC; FEATURE_MAP_REFRESHABLE when
 * session option ge.featureBaseRefreshable is "1" or the root is dynamic and
 * the target static; USER_INPUT_NOPADDING_OUTPUT_OK unless ge.buildGraphMode
 * is "offline" or the target has graph attr _single_op_scene = true;
 * PHYSICAL_MEMORY_REFRESHABLE when ge.exec.staticMemoryPolicy is "4" (GE's
 * "extend-size memory full" policy).
 *
 * Conflict finding (GE FindConflictNodes / Checker::CheckConflict), for every
 * anchor pair (i < j, symbol order) of a symbol:
 *   - skip a pair on one node, and two outputs (neither CONTINUOUS_OUTPUT)
 *     one of which references the other's node through ref_var_src_var_name;
 *   - for every attribute pair: the kernel's unconditional class
 *     (kiln_checker_classify) -- NEVER: nothing; ALWAYS: isolate an input (of
 *     two inputs, the one whose node comes first topologically unless its
 *     own output is in the symbol, then the other); CONDITIONAL: run the
 *     registered checker (kiln_checker_run; a checker flagged
 *     CALL_AS_SYMBOL runs once per symbol per attribute pair), no checker =
 *     no conflict.
 * Every inserted Identity is explained (kiln_pass_explain) with its symbol,
 * attribute pair, checker and anchors.
 */
#include "mlc_pass.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- one symbol's anchors, marked ---------------------------------------- */
typedef struct sym_rec {
    const char *name;  /* in collected.names */
    uint64_t pre;      /* the name's first 8 bytes, big-endian (the sort's first key) */
    uint32_t first, n; /* slice of the anchor arrays */
} sym_rec;

typedef struct collected {
    kiln_mem_anchor *anchors;
    mlc_attrs *attrs;
    sym_rec *syms;
    uint32_t nsyms;
    char *names; /* every symbol's name, NUL-terminated, one after another */
    size_t names_len, names_cap;
} collected;

/* A growing set of conflict anchors. */
typedef struct conflicts {
    mlc_conflict *v;
    uint32_t n, cap;
} conflicts;

static kiln_status add_conflict(conflicts *c, const kiln_mem_anchor *a, const char *why)
{
    for (uint32_t i = 0; i < c->n; i++)
        if (mlc_anchor_eq(&c->v[i].anchor, a))
            return KILN_OK;
    if (c->n == c->cap) {
        uint32_t cap = c->cap ? 2 * c->cap : 8;
        mlc_conflict *v = realloc(c->v, cap * sizeof(*v));
        if (!v)
            return KILN_ERR_NOMEM;
        c->v = v;
        c->cap = cap;
    }
    c->v[c->n].anchor = *a;
    snprintf(c->v[c->n].why, sizeof(c->v[c->n].why), "%s", why);
    c->n++;
    return KILN_OK;
}

/* GE CheckAbsoluteConflict: which in-anchor to isolate; NULL for two outputs. */
static const kiln_mem_anchor *absolute_pick(const kiln_mem_anchor *a, const kiln_mem_anchor *b,
                                            const kiln_mem_anchor *sym, uint32_t n)
{
    if (!a->is_output && !b->is_output)
        return mlc_topo(a) < mlc_topo(b) && !mlc_node_out_in_symbol(sym, n, a->graph, a->node) ? a
                                                                                               : b;
    if (!a->is_output)
        return a;
    return b->is_output ? NULL : b;
}

static void describe(char *buf, size_t size, const char *sym, kiln_anchor_attr ta,
                     kiln_anchor_attr tb, const char *checker, const char *reason,
                     const kiln_mem_anchor *a, const kiln_mem_anchor *b)
{
    char ka[160], kb[160];
    mlc_anchor_key(a, ka, sizeof(ka));
    mlc_anchor_key(b, kb, sizeof(kb));
    /* Truncating an over-long explanation is fine; the check silences the warning. */
    int n =
        snprintf(buf, size, "MemLayoutConflict: symbol %s, pair (%s, %s), %s%s%s; anchors %s, %s",
                 sym, kiln_anchor_attr_name(ta), kiln_anchor_attr_name(tb), checker,
                 reason[0] ? ": " : "", reason, ka, kb);
    if (n < 0 && size)
        buf[0] = 0;
}

static kiln_status check_pair(mlc_run *run, const sym_rec *s, const collected *c, uint32_t i,
                              uint32_t j, kiln_anchor_attr ta, kiln_anchor_attr tb,
                              bool visit[KILN_AA_COUNT][KILN_AA_COUNT], conflicts *out)
{
    const kiln_mem_anchor *a = &c->anchors[s->first + i], *b = &c->anchors[s->first + j];
    const kiln_mem_anchor *sym = &c->anchors[s->first];
    char why[320];
    kiln_conflict_class cls = kiln_checker_classify(run->root, ta, tb);
    if (cls == KILN_CONFLICT_NEVER)
        return KILN_OK;
    if (cls == KILN_CONFLICT_ALWAYS) {
        const kiln_mem_anchor *x = absolute_pick(a, b, sym, s->n);
        if (!x)
            return kiln_errorf(run->err, KILN_ERR_UNSUPPORTED,
                               "symbol %s: absolute conflict (%s, %s) between two outputs", s->name,
                               kiln_anchor_attr_name(ta), kiln_anchor_attr_name(tb));
        describe(why, sizeof(why), s->name, ta, tb, "absolute conflict", "", a, b);
        return add_conflict(out, x, why) == KILN_OK ? KILN_OK : KILN_ERR_NOMEM;
    }
    const char *name = NULL;
    kiln_status st = mlc_run_checker(run, a, b, ta, tb, sym, s->n, visit, &name);
    if (st != KILN_OK || !name)
        return st;
    describe(why, sizeof(why), s->name, ta, tb, name, kiln_checker_result_reason(run->res), a, b);
    for (uint32_t k = 0; k < kiln_checker_result_count(run->res); k++)
        if (add_conflict(out, kiln_checker_result_anchor(run->res, k), why) != KILN_OK)
            return KILN_ERR_NOMEM;
    return KILN_OK;
}

/*
 * Every anchor pair (i < j) in symbol order, as GE's FindConflictNodes.  A
 * pair on one node is skipped, so a run of consecutive anchors on one node
 * (a Sum reading one tensor n times: n inputs in a row) is stepped over in
 * one jump: run_end[j] is the end of j's run.  The pairs checked and their
 * order are GE's; the work is O(pairs on distinct nodes + anchors x runs),
 * linear for a wide node instead of quadratic.  The number of pairs looked
 * at is the pass statistic "anchor pairs examined".
 */
static kiln_status find_conflicts(mlc_run *run, const sym_rec *s, const collected *c,
                                  uint32_t *run_end, conflicts *out)
{
    bool visit[KILN_AA_COUNT][KILN_AA_COUNT];
    memset(visit, 0, sizeof(visit));
    const kiln_mem_anchor *an = &c->anchors[s->first];
    for (uint32_t j = s->n; j-- > 0;)
        run_end[j] = j + 1 < s->n && an[j + 1].graph == an[j].graph && an[j + 1].node == an[j].node
                         ? run_end[j + 1]
                         : j + 1;
    uint64_t examined = 0;
    for (uint32_t i = 0; i < s->n; i++)
        for (uint32_t j = i + 1; j < s->n; j++) {
            examined++;
            if (an[j].graph == an[i].graph && an[j].node == an[i].node) {
                j = run_end[j] - 1; /* the rest of j's run is on i's node too */
                continue;
            }
            const mlc_attrs *ta = &c->attrs[s->first + i], *tb = &c->attrs[s->first + j];
            if (mlc_skip_pair(&an[i], ta, &an[j], tb))
                continue;
            for (uint8_t x = 0; x < ta->n; x++)
                for (uint8_t y = 0; y < tb->n; y++) {
                    kiln_status st = check_pair(run, s, c, i, j, (kiln_anchor_attr)ta->t[x],
                                                (kiln_anchor_attr)tb->t[y], visit, out);
                    if (st != KILN_OK)
                        return st;
                }
        }
    run->pairs_examined += examined;
    return KILN_OK;
}

static void collected_free(collected *c)
{
    free(c->names);
    free(c->syms);
    free(c->anchors);
    free(c->attrs);
}

/* Name order (strcmp), then anchor position: the 8-byte prefixes decide
 * unless two names share them. */
static int cmp_sym(const void *x, const void *y)
{
    const sym_rec *a = x, *b = y;
    if (a->pre != b->pre)
        return a->pre < b->pre ? -1 : 1;
    int d = strcmp(a->name, b->name);
    return d ? d : (a->first > b->first) - (a->first < b->first);
}

/* Append symbol @p sym's name to c->names; its offset in *at.  false on OOM. */
static bool add_name(collected *c, const kiln_symtab *st, uint32_t sym, size_t *at)
{
    if (!c->names) {
        if (!(c->names = malloc(1 << 16)))
            return false;
        c->names_cap = 1 << 16;
    }
    for (;;) {
        size_t room = c->names_cap - c->names_len;
        size_t len = kiln_symtab_symbol_name(st, sym, c->names + c->names_len, room);
        if (len < room) {
            *at = c->names_len;
            c->names_len += len + 1;
            return true;
        }
        size_t cap = 2 * c->names_cap;
        while (cap - c->names_len <= len)
            cap *= 2;
        char *v = realloc(c->names, cap);
        if (!v)
            return false;
        c->names = v;
        c->names_cap = cap;
    }
}

/* Grow c->anchors / c->attrs to hold @p need entries; false on OOM. */
static bool reserve(collected *c, size_t *cap, size_t need)
{
    if (need <= *cap)
        return true;
    size_t n = *cap ? *cap : 1024;
    while (n < need)
        n *= 2;
    kiln_mem_anchor *a = realloc(c->anchors, n * sizeof(*a));
    if (a)
        c->anchors = a;
    mlc_attrs *t = a ? realloc(c->attrs, n * sizeof(*t)) : NULL;
    if (t)
        c->attrs = t;
    if (!a || !t)
        return false;
    *cap = n;
    return true;
}

/* The pairs find_conflicts would look at in anchors @p an[0..n) (its loop,
 * without the checks): the statistic of a symbol that needs no checks. */
static uint64_t pairs_examined(const kiln_mem_anchor *an, uint32_t n, uint32_t *run_end)
{
    for (uint32_t j = n; j-- > 0;)
        run_end[j] = j + 1 < n && an[j + 1].graph == an[j].graph && an[j + 1].node == an[j].node
                         ? run_end[j + 1]
                         : j + 1;
    uint64_t examined = 0;
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t j = i + 1; j < n; j++) {
            examined++;
            if (an[j].graph == an[i].graph && an[j].node == an[i].node)
                j = run_end[j] - 1;
        }
    return examined;
}

/*
 * Copy and mark the anchors of every symbol with >= 2 anchors in the target.
 * A symbol whose anchors carry only attributes every pair of which the
 * kernel classifies NEVER cannot conflict (find_conflicts would check
 * nothing): it is counted in the statistic and dropped here, so only the
 * few symbols that need checking are kept, named and sorted.  *@p run_end
 * receives scratch of the largest symbol's size for find_conflicts.
 */
static kiln_status collect(mlc_run *run, const kiln_symtab *st, collected *c, uint32_t **run_end)
{
    uint32_t nsyms = kiln_symtab_count(st);
    memset(c, 0, sizeof(*c));
    *run_end = NULL;
    /* never[x]: bit y set when the pair (x, y) cannot conflict: class NEVER,
     * or CONDITIONAL without a registered checker (check_pair does nothing) */
    uint32_t never[KILN_AA_COUNT];
    for (uint32_t x = 0; x < KILN_AA_COUNT; x++) {
        never[x] = 0;
        for (uint32_t y = 0; y < KILN_AA_COUNT; y++) {
            kiln_anchor_attr ax = (kiln_anchor_attr)x, ay = (kiln_anchor_attr)y;
            kiln_conflict_class cls = kiln_checker_classify(run->root, ax, ay);
            if (cls == KILN_CONFLICT_NEVER ||
                (cls == KILN_CONFLICT_CONDITIONAL && !kiln_checker_find(run->root, ax, ay, NULL)))
                never[x] |= 1u << y;
        }
    }
    size_t cap = 0, end_cap = 0;
    uint32_t pos = 0, maxn = 0;
    kiln_status rc = KILN_OK;
    for (uint32_t sym = 0; sym < nsyms && rc == KILN_OK; sym++) {
        uint32_t cnt = 0, k = 0;
        const kiln_symtab_anchor *sa = kiln_symtab_anchors(st, sym, &cnt);
        if (cnt < 2)
            continue;
        /* marked after the kept ones: a dropped symbol's slots are reused */
        if (!reserve(c, &cap, (size_t)pos + cnt)) {
            rc = KILN_ERR_NOMEM;
            break;
        }
        uint32_t mask = 0;
        for (uint32_t i = 0; i < cnt; i++) {
            kiln_graph *g = kiln_symtab_graph(st, sa[i].graph);
            if (!g || !mlc_graph_within(g, run->target))
                continue;
            kiln_mem_anchor *a = &c->anchors[pos + k];
            mlc_attrs *t = &c->attrs[pos + k];
            *a = (kiln_mem_anchor){g, sa[i].node, sa[i].index, sa[i].is_output};
            if (a->is_output)
                mlc_mark_output(run, st, sym, g, a->node, a->index, t);
            else
                mlc_mark_input(run, g, a->node, a->index, t);
            for (uint8_t x = 0; x < t->n; x++)
                mask |= 1u << t->t[x];
            k++;
        }
        if (k < 2)
            continue;
        bool check = false;
        for (uint32_t x = 0; x < KILN_AA_COUNT && !check; x++)
            check = (mask >> x & 1) && (mask & ~never[x]) != 0;
        if (k > end_cap) {
            size_t n = end_cap ? end_cap : 64;
            while (n < k)
                n *= 2;
            uint32_t *v = realloc(*run_end, n * sizeof(*v));
            if (!v) {
                rc = KILN_ERR_NOMEM;
                break;
            }
            *run_end = v;
            end_cap = n;
        }
        if (!check) {
            run->pairs_examined += pairs_examined(&c->anchors[pos], k, *run_end);
            continue;
        }
        if (k > maxn)
            maxn = k;
        size_t at;
        if (!(c->nsyms % 256)) {
            sym_rec *v = realloc(c->syms, ((size_t)c->nsyms + 256) * sizeof(*v));
            if (!v) {
                rc = KILN_ERR_NOMEM;
                break;
            }
            c->syms = v;
        }
        if (!add_name(c, st, sym, &at)) {
            rc = KILN_ERR_NOMEM;
            break;
        }
        /* the offset for now: the buffer may still move */
        c->syms[c->nsyms++] = (sym_rec){(const char *)(uintptr_t)at, 0, pos, k};
        pos += k;
    }
    if (rc != KILN_OK)
        return rc;
    if (!*run_end && !(*run_end = malloc(sizeof(uint32_t))))
        return KILN_ERR_NOMEM;
    for (uint32_t i = 0; i < c->nsyms; i++) {
        const char *name = c->names + (size_t)(uintptr_t)c->syms[i].name;
        uint64_t p = 0;
        uint32_t j = 0;
        for (; j < 8 && name[j]; j++)
            p = p << 8 | (unsigned char)name[j];
        c->syms[i].name = name;
        c->syms[i].pre = j ? p << (8 * (8 - j)) : 0;
    }
    if (c->nsyms > 1)
        qsort(c->syms, c->nsyms, sizeof(*c->syms), cmp_sym);
    return KILN_OK;
}

/* GE MemLayoutConflictOptimizer::Process for run->target. */
static kiln_status process(mlc_run *run)
{
    const kiln_symtab *st = NULL;
    kiln_status rc = kiln_symtab_get(run->root, &st, run->err);
    if (rc != KILN_OK)
        return rc;
    run->graph_info = mlc_graph_info(run);
    collected c;
    conflicts cf = {0};
    uint32_t *run_end = NULL;
    rc = collect(run, st, &c, &run_end);
    if (rc != KILN_OK)
        rc = kiln_errorf(run->err, rc, "HandleMemoryLayoutConflict: out of memory");
    for (uint32_t i = 0; i < c.nsyms && rc == KILN_OK; i++) {
        cf.n = 0;
        rc = find_conflicts(run, &c.syms[i], &c, run_end, &cf);
        if (rc == KILN_OK)
            rc = mlc_solve_conflicts(run, cf.v, cf.n);
    }
    free(cf.v);
    free(run_end);
    collected_free(&c);
    return rc;
}

static kiln_pass_result run_graph(void *inst, kiln_pass_ctx *ctx, kiln_graph *root)
{
    (void)inst;
    if (kiln_graph_parent(root))
        return KILN_PASS_NOT_CHANGED;
    mlc_run run = {.ctx = ctx, .root = root, .err = kiln_pass_error(ctx)};
    mc_opsyms_init(&run.ops, root);
    /* none of the keys it resolves is written by the pass (solve_conflict.c
     * sets labels and flags of other names), so they hold for the run */
    mlc_keys_init(&run, root);
    run.fm_option = mlc_option_is(ctx, "ge.featureBaseRefreshable", "1");
    run.root_static = mlc_graph_static(root);
    uint32_t nsub = kiln_graph_all_subgraph_count(root), ntargets = 0;
    kiln_graph **targets = malloc((nsub + 1) * sizeof(*targets));
    run.res = kiln_checker_result_create();
    kiln_status st = targets && run.res ? KILN_OK : KILN_ERR_NOMEM;
    if (st == KILN_OK && run.root_static) {
        targets[ntargets++] = root;
    } else if (st == KILN_OK) {
        for (uint32_t i = 0; i < nsub; i++) {
            kiln_graph *g = kiln_graph_all_subgraph(root, i);
            if (mlc_graph_static(g) && !mlc_graph_static(kiln_graph_parent(g)))
                targets[ntargets++] = g;
        }
    }
    const kiln_node_id *order;
    uint32_t norder;
    if (st == KILN_OK && ntargets)
        st = kiln_graph_topo_order(root, &order, &norder, run.err);
    for (uint32_t i = 0; i < ntargets && st == KILN_OK; i++) {
        run.target = targets[i];
        st = mlc_ctrl_node_conflict(&run);
    }
    for (uint32_t i = 0; i < ntargets && st == KILN_OK; i++) {
        run.target = targets[i];
        st = process(&run);
    }
    if (st == KILN_ERR_NOMEM)
        kiln_errorf(run.err, st, "HandleMemoryLayoutConflict: out of memory");
    kiln_pass_stat_add(ctx, "anchor pairs examined", (int64_t)run.pairs_examined);
    free(targets);
    kiln_checker_result_destroy(run.res);
    if (st != KILN_OK)
        return KILN_PASS_FAILED;
    return run.inserted ? KILN_PASS_CHANGED : KILN_PASS_NOT_CHANGED;
}

const kiln_pass_desc mlc_handle_memory_layout_conflict_pass = {
    .struct_size = sizeof(kiln_pass_desc),
    .kind = KILN_PASS_KIND_GRAPH,
    .name = "HandleMemoryLayoutConflict",
    .summary = "isolate anchors whose memory-layout constraints conflict (GE mem_layout_conflict)",
    .flags = KILN_PASS_NO_SUBGRAPHS,
    .run_graph = run_graph,
};

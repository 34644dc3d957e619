/*
 * graph_lint.c - GraphLint (GE compiler/graph/preprocess/checker/graph_lint.cc,
 * warning W18888): warn about memory that one node writes while another node
 * reads or writes it, with no path of data/control edges between the two, so
 * their execution order -- and the value read -- is undefined.
 *
 * What is checked (docs/graph_lint.md has the user-facing description):
 *   1. Input RW types (GE MarkAllNodesInputRwType).  A node of type "Cmo":
 *      every input ignorable.  Another node without subgraphs: input i is
 *      writable when one of its outputs references it (descriptor ref_input
 *      = i, kiln's spelling of GE's "input name equals an output name"),
 *      except on _no_padding_continuous_output nodes (views, not writes);
 *      every other input reads.  A node owning subgraphs takes, for input
 *      k, the types of the consumers of its subgraphs' Data nodes with
 *      _parent_node_index k: writable if any writes, else read if any reads,
 *      else ignorable if all ignore, else read.  Nested owners recurse.
 *   2. Candidate sets.  For every symbol of the memory symbol table (GE
 *      GetRefMapping) and every graph, the connected in anchors of that
 *      symbol in that graph; with option scope=output, only the consumers
 *      of one out anchor (GE's exact set).  Ignorable anchors drop out; a
 *      node with a writable anchor is a writer, else a reader.
 *   3. Every writer/writer and writer/reader pair of one set with no path
 *      either way (kiln_graph_reachable; a node reaches itself) is reported
 *      as W18888 -- all of them, where GE stops at the first.
 *
 * Pair enumeration without an n x n matrix or a per-pair allocation: the
 * writers of a set, in topological order, are split greedily into chains
 * (each member reaches the next).  Along a chain, the members a node x
 * reaches form a suffix and the members that reach x a prefix, so two
 * binary searches give the members unordered with x.  Each chain beyond
 * the first witnesses unordered writer pairs, so on a clean graph there is
 * one chain and a set costs O((W + R) log W) reachability queries.
 *
 * Requires: an acyclic graph (a cycle is reported and the lint skipped).
 * Preserves: everything (diagnostic only; returns NOT_CHANGED, never edits).
 * Complexity: O(A) over the A anchors of the symbol table, plus sorting of
 * the symbols that have a writer, plus O((W + R) C log W) queries per set
 * with C chains (C = 1 without warnings) plus one step per warning.
 * Memory: O(largest symbol) of scratch reused for every set, plus two
 * records per input of the (few) nodes owning subgraphs.
 */
#include "graph_lint.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { RW_READ = 0, RW_WRITE = 1, RW_IGNORE = 2 };

typedef struct owner {   /* a node owning subgraphs, with its input types */
    uint32_t graph;      /* symbol-table graph number */
    kiln_node_id node;
    uint32_t off, nin;   /* slice of lint.otype / lint.owhy */
    uint8_t state;       /* 0 new, 1 in progress, 2 done */
} owner;

typedef struct inner {   /* the subgraph input that made an owner slot writable */
    uint32_t graph;
    kiln_node_id node;
    uint32_t index;
} inner;

typedef struct gref {
    const kiln_graph *g;
    uint32_t idx;
} gref;

typedef struct entry {   /* one connected in anchor of the current symbol */
    uint64_t group;      /* 0, or the producer out anchor (scope=output) */
    uint32_t graph, topo;
    kiln_node_id node;
    uint32_t index;
    uint8_t type;
} entry;

typedef struct lint_opts {
    bool by_output;
    int64_t max_warnings; /* 0 = unlimited */
} lint_opts;

typedef struct lint {
    kiln_pass_ctx *ctx;
    const lint_opts *opt;
    const kiln_symtab *st;
    uint32_t ngraphs;
    gref *gsorted;
    kiln_sym cmo, data;
    kiln_sym nopad; /* _no_padding_continuous_output, 0 when no node has it */
    owner *owners;
    uint32_t nowners;
    uint8_t *otype;
    inner *owhy;
    entry *ents;                  /* scratch, grown as needed */
    size_t ents_cap;
    uint32_t *wr, *rd, *chain, *tail, *cstart, *flat; /* scratch, ents_cap each */
    int64_t reported;
    bool stop;
} lint;

/* ---- graphs and owners -------------------------------------------------- */

static kiln_graph *graph_at(const lint *L, uint32_t gi) { return kiln_symtab_graph(L->st, gi); }

static int cmp_gref(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)((const gref *)a)->g, y = (uintptr_t)((const gref *)b)->g;
    return x < y ? -1 : x > y;
}

static uint32_t graph_index(const lint *L, const kiln_graph *g)
{
    uint32_t lo = 0, hi = L->ngraphs;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if ((uintptr_t)L->gsorted[mid].g < (uintptr_t)g)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < L->ngraphs && L->gsorted[lo].g == g ? L->gsorted[lo].idx : UINT32_MAX;
}

static int cmp_owner(const void *a, const void *b)
{
    const owner *x = a, *y = b;
    if (x->graph != y->graph)
        return x->graph < y->graph ? -1 : 1;
    return x->node < y->node ? -1 : x->node > y->node;
}

static owner *find_owner(const lint *L, uint32_t gi, kiln_node_id n)
{
    owner key = {.graph = gi, .node = n};
    return bsearch(&key, L->owners, L->nowners, sizeof(owner), cmp_owner);
}

/* Graph index table and one owner record per node that owns subgraphs. */
static kiln_status setup_graphs(lint *L, kiln_graph *root)
{
    uint32_t nsub = kiln_graph_all_subgraph_count(root);
    L->ngraphs = nsub + 1;
    L->gsorted = calloc(L->ngraphs, sizeof(gref));
    L->owners = calloc(nsub ? nsub : 1, sizeof(owner));
    if (!L->gsorted || !L->owners)
        return KILN_ERR_NOMEM;
    for (uint32_t i = 0; i < L->ngraphs; i++)
        L->gsorted[i] = (gref){graph_at(L, i), i};
    qsort(L->gsorted, L->ngraphs, sizeof(gref), cmp_gref);
    for (uint32_t i = 0; i < nsub; i++) {
        kiln_graph *s = graph_at(L, i + 1);
        uint32_t pg = graph_index(L, kiln_graph_parent(s));
        if (pg != UINT32_MAX)
            L->owners[L->nowners++] = (owner){.graph = pg, .node = kiln_graph_parent_node(s)};
    }
    qsort(L->owners, L->nowners, sizeof(owner), cmp_owner);
    uint32_t u = 0, total = 0;
    for (uint32_t i = 0; i < L->nowners; i++) {
        if (u && cmp_owner(&L->owners[u - 1], &L->owners[i]) == 0)
            continue;
        owner *o = &L->owners[u++];
        *o = L->owners[i];
        o->nin = kiln_node_input_count(graph_at(L, o->graph), o->node);
        o->off = total;
        total += o->nin;
    }
    L->nowners = u;
    L->otype = calloc(total ? total : 1, 1);
    L->owhy = calloc(total ? total : 1, sizeof(inner));
    return L->otype && L->owhy ? KILN_OK : KILN_ERR_NOMEM;
}

static bool no_padding_view(const lint *L, const kiln_graph *g, kiln_node_id n)
{
    bool v = false;
    return L->nopad &&
           kiln_attrs_get_bool(kiln_node_attrs(g, n), "_no_padding_continuous_output", &v) && v;
}

/* Output of @p n that references input @p i, or -1. */
static int32_t ref_output(kiln_graph *g, kiln_node_id n, uint32_t i)
{
    uint32_t nout = kiln_node_output_count(g, n);
    for (uint32_t o = 0; o < nout; o++) {
        const kiln_tensor_desc *d = kiln_node_output_desc(g, n, o);
        if (d && kiln_desc_ref_input(d) == (int32_t)i)
            return (int32_t)o;
    }
    return -1;
}

static uint8_t input_type(lint *L, uint32_t gi, kiln_node_id n, uint32_t i);

/* GE RefreshParentNodeIfNeed, gathered per owner: see the header, step 1. */
static void owner_compute(lint *L, owner *o)
{
    if (o->state)
        return; /* done, or a (impossible) recursion through the subgraph tree */
    o->state = 1;
    kiln_graph *g = graph_at(L, o->graph);
    uint8_t *flags = &L->otype[o->off];
    uint32_t nsub = kiln_node_subgraph_count(g, o->node);
    for (uint32_t j = 0; j < nsub; j++) {
        kiln_graph *s = kiln_node_subgraph(g, o->node, j, NULL);
        uint32_t si = graph_index(L, s);
        if (si == UINT32_MAX)
            continue;
        for (kiln_node_id d = kiln_graph_next_node(s, 0); d; d = kiln_graph_next_node(s, d)) {
            int64_t k;
            if (kiln_node_op(s, d) != L->data ||
                !kiln_attrs_get_int(kiln_node_attrs(s, d), "_parent_node_index", &k) || k < 0 ||
                k >= (int64_t)o->nin)
                continue;
            for (uint32_t out = 0; out < kiln_node_output_count(s, d); out++)
                for (uint32_t c = kiln_use_first(s, d, out); c; c = kiln_use_next(s, c)) {
                    kiln_anchor dst = kiln_use_dst(s, c);
                    uint8_t t = input_type(L, si, dst.node, dst.index);
                    flags[k] |= (uint8_t)(1u << t);
                    if (t == RW_WRITE && !L->owhy[o->off + k].node)
                        L->owhy[o->off + k] = (inner){si, dst.node, dst.index};
                }
        }
    }
    for (uint32_t k = 0; k < o->nin; k++) {
        uint8_t f = flags[k];
        flags[k] = (f & (1u << RW_WRITE))    ? RW_WRITE
                   : (f & (1u << RW_READ))   ? RW_READ
                   : (f & (1u << RW_IGNORE)) ? RW_IGNORE
                                             : RW_READ;
    }
    o->state = 2;
}

/* RW type of input @p i of node @p n in graph number @p gi (header, step 1). */
static uint8_t input_type(lint *L, uint32_t gi, kiln_node_id n, uint32_t i)
{
    kiln_graph *g = graph_at(L, gi);
    if (kiln_node_subgraph_count(g, n)) {
        owner *o = find_owner(L, gi, n);
        if (!o || i >= o->nin)
            return RW_READ;
        owner_compute(L, o);
        return L->otype[o->off + i];
    }
    if (L->cmo && kiln_node_op(g, n) == L->cmo)
        return RW_IGNORE;
    if (no_padding_view(L, g, n))
        return RW_READ;
    return ref_output(g, n, i) >= 0 ? RW_WRITE : RW_READ;
}

/* ---- reporting ---------------------------------------------------------- */

/* "writes it through input 0, which its output 0 references" and the like. */
static void describe(lint *L, const entry *e, char *buf, size_t size)
{
    kiln_graph *g = graph_at(L, e->graph);
    const char *name = kiln_node_name_str(g, e->node);
    if (e->type != RW_WRITE) {
        snprintf(buf, size, "%s reads it through input %u", name, e->index);
        return;
    }
    owner *o = kiln_node_subgraph_count(g, e->node) ? find_owner(L, e->graph, e->node) : NULL;
    if (o && e->index < o->nin && L->owhy[o->off + e->index].node) {
        const inner *w = &L->owhy[o->off + e->index];
        kiln_graph *s = graph_at(L, w->graph);
        snprintf(buf, size, "%s writes it through input %u (in subgraph '%s', %s writes its "
                            "input %u)", name, e->index, kiln_graph_name(s),
                 kiln_node_name_str(s, w->node), w->index);
        return;
    }
    snprintf(buf, size, "%s writes it through input %u, which its output %d references", name,
             e->index, (int)ref_output(g, e->node, e->index));
}

static void report(lint *L, uint32_t sym, const entry *w, const entry *o)
{
    if (L->stop)
        return;
    if (L->opt->max_warnings > 0 && L->reported >= L->opt->max_warnings) {
        L->stop = true;
        kiln_diag(L->ctx, KILN_SEV_WARNING, "W18888: stopped after %lld warnings (option "
                  "max_warnings); further unordered pairs are not listed",
                  (long long)L->reported);
        return;
    }
    kiln_graph *g = graph_at(L, w->graph);
    char sname[256], where[400], dw[400], dother[400];
    kiln_symtab_symbol_name(L->st, sym, sname, sizeof(sname));
    if (L->opt->by_output) {
        kiln_anchor p = kiln_node_input_peer(g, w->node, w->index);
        snprintf(where, sizeof(where), "output %s:%u (symbol %s)", kiln_node_name_str(g, p.node),
                 p.index, sname);
    } else {
        snprintf(where, sizeof(where), "symbol %s", sname);
    }
    describe(L, w, dw, sizeof(dw));
    describe(L, o, dother, sizeof(dother));
    kiln_diag(L->ctx, KILN_SEV_WARNING,
              "W18888: graph '%s', %s: no control relation between write node [%s] and %s "
              "node [%s]: %s; %s. Their order is undefined, which may cause a precision "
              "problem; add a control edge",
              kiln_graph_name(g), where, kiln_node_name_str(g, w->node),
              o->type == RW_WRITE ? "other write" : "read", kiln_node_name_str(g, o->node), dw,
              dother);
    L->reported++;
}

/* ---- pair enumeration ---------------------------------------------------- */

/* Members [p, s) of the chain m[0..len) are unordered with node x. */
static void unordered_range(kiln_graph *g, const entry *e, const uint32_t *m, uint32_t len,
                            kiln_node_id x, uint32_t *p, uint32_t *s)
{
    uint32_t lo = 0, hi = len;
    while (lo < hi) { /* prefix of members that reach x */
        uint32_t mid = lo + (hi - lo) / 2;
        if (kiln_graph_reachable(g, e[m[mid]].node, x))
            lo = mid + 1;
        else
            hi = mid;
    }
    *p = lo;
    hi = len;
    while (lo < hi) { /* suffix of members x reaches */
        uint32_t mid = lo + (hi - lo) / 2;
        if (kiln_graph_reachable(g, x, e[m[mid]].node))
            hi = mid;
        else
            lo = mid + 1;
    }
    *s = lo;
}

/* One candidate set: entries e[0..n) of one graph and group, in topo order. */
static void check_set(lint *L, uint32_t sym, const entry *e, uint32_t n)
{
    uint32_t nw = 0, nr = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (i && e[i].node == e[i - 1].node)
            continue; /* sorted writes first: the first entry of a node decides */
        if (e[i].type == RW_WRITE)
            L->wr[nw++] = i;
        else
            L->rd[nr++] = i;
    }
    if (nw == 0 || (nw == 1 && nr == 0))
        return;
    kiln_graph *g = graph_at(L, e[0].graph);
    /* Greedy chain cover of the writers, in topological order. */
    uint32_t nc = 0;
    for (uint32_t k = 0; k < nw; k++) {
        uint32_t c = 0;
        while (c < nc && !kiln_graph_reachable(g, e[L->tail[c]].node, e[L->wr[k]].node))
            c++;
        if (c == nc)
            L->cstart[nc++] = 0;
        L->chain[k] = c;
        L->tail[c] = L->wr[k];
        L->cstart[c]++;
    }
    /* Counting sort into flat[]: chain c is flat[cstart[c] .. cstart[c + 1]). */
    uint32_t sum = 0;
    for (uint32_t c = 0; c < nc; c++) {
        uint32_t len = L->cstart[c];
        L->cstart[c] = sum;
        sum += len;
    }
    L->cstart[nc] = sum;
    for (uint32_t k = 0; k < nw; k++)
        L->flat[L->cstart[L->chain[k]]++] = L->wr[k];
    for (uint32_t c = nc; c > 0; c--)
        L->cstart[c] = L->cstart[c - 1];
    L->cstart[0] = 0;

    /* Writer/writer pairs, each once (the partner comes later in topo order). */
    for (uint32_t k = 0; k < nw && nc > 1 && !L->stop; k++) {
        const entry *x = &e[L->wr[k]];
        for (uint32_t c = 0; c < nc && !L->stop; c++) {
            if (c == L->chain[k])
                continue;
            const uint32_t *m = &L->flat[L->cstart[c]];
            uint32_t p, s;
            unordered_range(g, e, m, L->cstart[c + 1] - L->cstart[c], x->node, &p, &s);
            for (uint32_t j = p; j < s && !L->stop; j++)
                if (e[m[j]].topo > x->topo)
                    report(L, sym, x, &e[m[j]]);
        }
    }
    /* Writer/reader pairs. */
    for (uint32_t k = 0; k < nr && !L->stop; k++) {
        const entry *r = &e[L->rd[k]];
        for (uint32_t c = 0; c < nc && !L->stop; c++) {
            const uint32_t *m = &L->flat[L->cstart[c]];
            uint32_t p, s;
            unordered_range(g, e, m, L->cstart[c + 1] - L->cstart[c], r->node, &p, &s);
            for (uint32_t j = p; j < s && !L->stop; j++)
                report(L, sym, &e[m[j]], r);
        }
    }
}

static int cmp_entry(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    if (x->graph != y->graph)
        return x->graph < y->graph ? -1 : 1;
    if (x->group != y->group)
        return x->group < y->group ? -1 : 1;
    if (x->topo != y->topo)
        return x->topo < y->topo ? -1 : 1;
    if (x->type != y->type) /* RW_WRITE (1) before RW_READ (0) */
        return x->type == RW_WRITE ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

static bool grow(lint *L, size_t need)
{
    if (need <= L->ents_cap)
        return true;
    size_t cap = L->ents_cap ? L->ents_cap : 64;
    while (cap < need)
        cap *= 2;
    entry *e = realloc(L->ents, cap * sizeof(entry));
    if (!e)
        return false;
    L->ents = e;
    uint32_t **bufs[] = {&L->wr, &L->rd, &L->chain, &L->tail, &L->cstart, &L->flat};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++) {
        uint32_t *p = realloc(*bufs[i], (cap + 1) * sizeof(uint32_t));
        if (!p)
            return false;
        *bufs[i] = p;
    }
    L->ents_cap = cap;
    return true;
}

/* Collect the symbol's candidate anchors and check each (graph, group) set. */
static kiln_status check_symbol(lint *L, uint32_t sym)
{
    uint32_t cnt;
    const kiln_symtab_anchor *a = kiln_symtab_anchors(L->st, sym, &cnt);
    if (cnt < 3) /* a pair needs two consumers of one out anchor */
        return KILN_OK;
    uint32_t n = 0;
    bool writer = false;
    for (uint32_t i = 0; i < cnt; i++) {
        if (a[i].is_output)
            continue;
        kiln_graph *g = graph_at(L, a[i].graph);
        kiln_anchor p = kiln_node_input_peer(g, a[i].node, a[i].index);
        if (!p.node)
            continue;
        uint8_t t = input_type(L, a[i].graph, a[i].node, a[i].index);
        if (t == RW_IGNORE)
            continue;
        if (!grow(L, (size_t)n + 1))
            return KILN_ERR_NOMEM;
        L->ents[n++] = (entry){
            .group = L->opt->by_output ? ((uint64_t)p.node << 32 | p.index) : 0,
            .graph = a[i].graph, .topo = kiln_graph_topo_index(g, a[i].node),
            .node = a[i].node, .index = a[i].index, .type = t};
        writer |= t == RW_WRITE;
    }
    if (!writer || n < 2)
        return KILN_OK;
    qsort(L->ents, n, sizeof(entry), cmp_entry);
    for (uint32_t b = 0, e; b < n && !L->stop; b = e) {
        for (e = b + 1; e < n && L->ents[e].graph == L->ents[b].graph &&
                        L->ents[e].group == L->ents[b].group; e++)
            ;
        if (e - b >= 2)
            check_set(L, sym, &L->ents[b], e - b);
    }
    return KILN_OK;
}

/* ---- the pass --------------------------------------------------------------- */

static const kiln_option_def lint_options[] = {
    {sizeof(kiln_option_def), KILN_OPT_STRING, "scope", "symbol",
     "candidate sets: 'symbol' (all consumers of one memory symbol per graph) or 'output' "
     "(the consumers of one out anchor, GE's exact sets)", 0, 0},
    {sizeof(kiln_option_def), KILN_OPT_INT, "max_warnings", "0",
     "stop after this many W18888 warnings (0 = report every pair)", 0, 1e9},
};

static kiln_status lint_create(const kiln_options *o, kiln_error *err, void **inst)
{
    lint_opts *p = kiln_alloc(sizeof(*p));
    if (!p)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    p->by_output = false;
    p->max_warnings = 0;
    const char *scope = NULL;
    if (kiln_options_get_string(o, "scope", &scope) && scope && strcmp(scope, "symbol") != 0) {
        if (strcmp(scope, "output") != 0) {
            kiln_free(p);
            return kiln_errorf(err, KILN_ERR_PARAM,
                               "GraphLint: option scope must be 'symbol' or 'output', not '%s'",
                               scope);
        }
        p->by_output = true;
    }
    kiln_options_get_int(o, "max_warnings", &p->max_warnings);
    *inst = p;
    return KILN_OK;
}

static void lint_destroy(void *inst) { kiln_free(inst); }

static void lint_free(lint *L)
{
    free(L->gsorted);
    free(L->owners);
    free(L->otype);
    free(L->owhy);
    free(L->ents);
    free(L->wr);
    free(L->rd);
    free(L->chain);
    free(L->tail);
    free(L->cstart);
    free(L->flat);
}

static kiln_pass_result lint_run(void *inst, kiln_pass_ctx *ctx, kiln_graph *g)
{
    static const lint_opts defaults = {false, 0};
    if (kiln_graph_parent(g)) { /* GE: "Only support verify on root graph" */
        kiln_diag(ctx, KILN_SEV_DEBUG, "graph '%s' is a subgraph: not verified on its own "
                  "(its root's run covers it)", kiln_graph_name(g));
        return KILN_PASS_NOT_CHANGED;
    }
    lint L;
    memset(&L, 0, sizeof(L));
    L.ctx = ctx;
    L.opt = inst ? inst : &defaults;
    kiln_status st = kiln_symtab_get(g, &L.st, kiln_pass_error(ctx));
    if (st != KILN_OK)
        return KILN_PASS_FAILED;
    L.cmo = kiln_sym_lookup(g, "Cmo");
    L.data = kiln_sym_lookup(g, "Data");
    L.nopad = kiln_sym_lookup(g, "_no_padding_continuous_output"); /* 0: on no node */
    if ((st = setup_graphs(&L, g)) != KILN_OK)
        goto fail;
    for (uint32_t i = 0; i < L.ngraphs; i++) {
        const kiln_node_id *order;
        uint32_t cnt;
        kiln_graph *sg = graph_at(&L, i);
        if (kiln_graph_topo_order(sg, &order, &cnt, NULL) != KILN_OK) {
            kiln_diag(ctx, KILN_SEV_WARNING, "graph '%s' has a cycle (or memory ran out): "
                      "W18888 verification skipped", kiln_graph_name(sg));
            lint_free(&L);
            return KILN_PASS_NOT_CHANGED;
        }
    }
    uint32_t nsym = kiln_symtab_count(L.st);
    for (uint32_t s = 0; s < nsym && !L.stop; s++)
        if ((st = check_symbol(&L, s)) != KILN_OK)
            goto fail;
    kiln_pass_stat_add(ctx, "symbols", nsym);
    kiln_pass_stat_add(ctx, "W18888 warnings", L.reported);
    lint_free(&L);
    return KILN_PASS_NOT_CHANGED;
fail:
    lint_free(&L);
    kiln_errorf(kiln_pass_error(ctx), st, "GraphLint: out of memory");
    return KILN_PASS_FAILED;
}

const kiln_pass_desc kiln_graph_lint_pass = {
    .struct_size = sizeof(kiln_pass_desc),
    .kind = KILN_PASS_KIND_GRAPH,
    .name = "GraphLint",
    .summary = "W18888: warn about memory written and read/written by nodes with no order",
    .flags = KILN_PASS_PRESERVES_CFG,
    .option_count = sizeof(lint_options) / sizeof(lint_options[0]),
    .options = lint_options,
    .create = lint_create,
    .destroy = lint_destroy,
    .run_graph = lint_run,
};

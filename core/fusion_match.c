/*
 * fusion_match.c - the pattern matcher (GE pattern_matcher.cc, GE_SEMANTICS
 * 8.4).
 *
 * Validation: every alternative needs an output, no cycle, edges inside the
 * alternative, Data nodes without inputs, the inputs of a node numbered
 * 0..k-1, every node on a path to an output.
 *
 * Candidates: the live nodes whose op symbol is an output's op type ("Const"
 * also takes "Constant"), gathered in one walk over the graph when the
 * matcher is created (one per pass run and graph), in node-id order (GE's
 * direct-node order).  Nodes created later (replacements) are not matched
 * and deleted ones are skipped: the matches of one pass run never overlap.
 *
 * MatchNext: for each output-0 candidate T (resuming after the last one
 * tried), map pattern output 0 to T and match its branch backwards
 * (MatchBranchByOutTensor): a queue of (pattern node, target node) pairs;
 * for each pair the input counts must be equal; for each input the target's
 * producer is compared with the pattern's: a pattern Data binds one producer
 * anchor (a second, different one fails: M3); any other producer must have
 * the same out-anchor index, pass the node matcher, and be mapped to the
 * same target node if it was mapped already.  A two-input commutative node
 * (KILN_PATTERN_COMMUTATIVE) tries its inputs as given, then swapped, so the
 * queue walk is a recursion with an undo trail.  When a branch is done, the
 * next pattern output tries every candidate in turn (a snapshot per try);
 * after the last output the boundary must hold (InnerSubgraphBoundary): the
 * consumers of every matched out-anchor that is not a pattern output are
 * matched nodes, and no Data binds an output of a matched node.
 */
#include "pattern.h"
#include "graph_int.h"

enum { PK_OP = 0, PK_DATA = 1, PK_CONST = 2 };

typedef struct trail_ent {
    uint32_t pn;
    uint8_t data; /* 1: dmap[pn] was bound; 0: map[pn] */
} trail_ent;

typedef struct qpair {
    uint32_t pn;
    kiln_node_id tn;
} qpair;

/* What a candidate's first match step reads of the graph (cand_rec): its
 * input and output counts and the producers of inputs 0 and 1 (op symbol,
 * output index; op 0 when the producer is a node created after the matcher,
 * which never maps).  Kept beside the candidate list, so that the
 * alternatives after the first reject a candidate without touching the graph
 * (a graph of a million nodes is far out of cache, and a pass has tens of
 * alternatives over the same candidates).  kiln__matcher_touch marks the
 * records a replacement invalidates. */
enum { CR_STALE = 0, CR_LIVE = 1, CR_DEAD = 2 };
typedef struct cand_rec {
    kiln_sym op[2];
    uint32_t so[2];
    uint32_t nin, nout;
    uint8_t has[2]; /* input i is connected */
    uint8_t state;  /* CR_* */
} cand_rec;

typedef struct cand_list {
    kiln_sym sym, sym2; /* op symbols it takes (sym2: Constant for Const) */
    kiln_node_id *ids;  /* ascending */
    cand_rec *rec;
    uint32_t n, cap;
} cand_list;

struct kiln_matcher {
    const kiln_pattern *p;
    kiln_graph *g;
    uint32_t limit0;
    /* per pattern node */
    uint8_t *kind;
    bool *comm;
    kiln_sym *sym;
    kiln_sym s_const, s_constant;
    uint64_t *touched; /* node id (< limit0) -> its candidate records are stale */
    uint32_t *in_off, *nin; /* CSR of pattern inputs by input index */
    int32_t *in_src;
    uint32_t *in_so;
    uint32_t *out_key; /* per global output: candidate list */
    cand_list *keys;
    uint32_t nkeys;
    /* state */
    kiln_node_id *map;
    kiln_anchor *dmap;
    trail_ent *trail;
    uint32_t ntrail, trail_cap;
    qpair *q;
    uint32_t qlen;
    /* the current alternative */
    uint32_t alt;
    uint32_t *aouts; /* global output indices of the alternative */
    uint32_t naouts;
    uint32_t cursor;
    bool dirty;
    /* result */
    kiln_node_id *rnodes, *rmatched;
    kiln_anchor *rin, *rout;
    kiln_match m;
};

/* ---- validation ------------------------------------------------------------ */

static uint32_t alt_count(const kiln_pattern *p) { return p->alt + 1; }

uint32_t kiln__pattern_alt_count(const kiln_pattern *p) { return alt_count(p); }

static uint32_t alt_flags(const kiln_pattern *p, uint32_t alt)
{
    return alt < p->alt_flags_cap && p->alt_flags ? p->alt_flags[alt] : 0;
}

/* Linear in nodes + edges over all alternatives: per-node and per-alternative
 * facts are gathered in single passes, then the alternatives are checked in
 * order so the first error reported is the one an alternative-by-alternative
 * check would report. */
typedef struct pv_alt {
    uint32_t nodes, outs, done;
    int32_t data_out;  /* first output that is a Data node, or -1 */
    int32_t bad_input; /* first node with bad inputs, or -1 */
    int32_t unreached; /* first node on no path to an output, or -1 */
} pv_alt;

kiln_status kiln__pattern_validate(const kiln_pattern *p, const char *pass, kiln_error *err)
{
    if (!p->nnodes)
        return kiln_errorf(err, KILN_ERR_INVALID, "fusion pass %s declares no pattern", pass);
    uint32_t n = p->nnodes, ne = p->nedges, na = alt_count(p);
    uint32_t *cnt = kiln__calloc(n, sizeof(uint32_t));
    uint32_t *maxdi = kiln__calloc(n, sizeof(uint32_t));
    uint32_t *indeg = kiln__calloc(n, sizeof(uint32_t));
    uint32_t *stack = kiln__calloc(n, sizeof(uint32_t));
    uint32_t *out_off = kiln__calloc(n + 1, sizeof(uint32_t)); /* edges by src */
    uint32_t *in_off = kiln__calloc(n + 1, sizeof(uint32_t));  /* edges by dst */
    uint32_t *out_e = kiln__calloc(ne ? ne : 1, sizeof(uint32_t));
    uint32_t *in_e = kiln__calloc(ne ? ne : 1, sizeof(uint32_t));
    bool *seen = kiln__calloc(n, sizeof(bool));
    pv_alt *al = kiln__calloc(na, sizeof(pv_alt));
    kiln_status st = KILN_OK;
    if (!cnt || !maxdi || !indeg || !stack || !out_off || !in_off || !out_e || !in_e || !seen ||
        !al) {
        st = kiln_errorf(err, KILN_ERR_NOMEM, "fusion pass %s: out of memory", pass);
        goto out;
    }
    int64_t join = -1; /* the first edge joining two alternatives */
    for (uint32_t e = 0; e < ne; e++) {
        const kpat_edge *ed = &p->edges[e];
        if (join < 0 && p->nodes[ed->src].alt != p->nodes[ed->dst].alt)
            join = e;
        uint32_t d = (uint32_t)ed->dst;
        if (cnt[d]++ == 0 || ed->di > maxdi[d])
            maxdi[d] = ed->di;
        out_off[ed->src + 1]++;
        in_off[d + 1]++;
    }
    for (uint32_t i = 0; i < n; i++) {
        out_off[i + 1] += out_off[i];
        in_off[i + 1] += in_off[i];
    }
    for (uint32_t e = 0; e < ne; e++) { /* stack and indeg as fill cursors */
        out_e[out_off[p->edges[e].src] + stack[p->edges[e].src]++] = e;
        in_e[in_off[p->edges[e].dst] + indeg[p->edges[e].dst]++] = e;
    }
    for (uint32_t a = 0; a < na; a++)
        al[a].data_out = al[a].bad_input = al[a].unreached = -1;
    for (uint32_t i = 0; i < n; i++) {
        pv_alt *x = &al[p->nodes[i].alt];
        x->nodes++;
        bool bad = cnt[i] && (strcmp(p->nodes[i].op, "Data") == 0 || maxdi[i] + 1 != cnt[i]);
        if (bad && x->bad_input < 0)
            x->bad_input = (int32_t)i;
    }
    for (uint32_t i = 0; i < p->nouts; i++) {
        pv_alt *x = &al[p->nodes[p->outs[i].node].alt];
        x->outs++;
        if (x->data_out < 0 && strcmp(p->nodes[p->outs[i].node].op, "Data") == 0)
            x->data_out = (int32_t)i;
    }
    /* acyclic (Kahn over every alternative at once; nodes popped per alternative) */
    uint32_t sp = 0;
    for (uint32_t i = 0; i < n; i++) {
        indeg[i] = cnt[i];
        if (!indeg[i])
            stack[sp++] = i;
    }
    while (sp) {
        uint32_t v = stack[--sp];
        al[p->nodes[v].alt].done++;
        for (uint32_t k = out_off[v]; k < out_off[v + 1]; k++) {
            uint32_t d = (uint32_t)p->edges[out_e[k]].dst;
            if (!--indeg[d])
                stack[sp++] = d;
        }
    }
    /* every node on a path to an output */
    for (uint32_t i = 0; i < p->nouts; i++) {
        uint32_t v = (uint32_t)p->outs[i].node;
        if (!seen[v]) {
            seen[v] = true;
            stack[sp++] = v;
        }
    }
    while (sp) {
        uint32_t v = stack[--sp];
        for (uint32_t k = in_off[v]; k < in_off[v + 1]; k++) {
            uint32_t s = (uint32_t)p->edges[in_e[k]].src;
            if (!seen[s]) {
                seen[s] = true;
                stack[sp++] = s;
            }
        }
    }
    for (uint32_t i = 0; i < n; i++)
        if (!seen[i] && al[p->nodes[i].alt].unreached < 0)
            al[p->nodes[i].alt].unreached = (int32_t)i;
    for (uint32_t a = 0; a < na && st == KILN_OK; a++) {
        const pv_alt *x = &al[a];
        if (!x->nodes)
            st = kiln_errorf(err, KILN_ERR_INVALID, "pattern %u of %s has no node", a, pass);
        else if (!x->outs)
            st = kiln_errorf(err, KILN_ERR_INVALID, "pattern %u of %s has no output", a, pass);
        else if (x->data_out >= 0)
            st = kiln_errorf(err, KILN_ERR_INVALID, "pattern %u of %s: output '%s' is a Data node",
                             a, pass, p->nodes[p->outs[x->data_out].node].name);
        else if (join >= 0)
            st = kiln_errorf(err, KILN_ERR_INVALID,
                             "pattern %u of %s: edge %s -> %s joins two patterns", a, pass,
                             p->nodes[p->edges[join].src].name, p->nodes[p->edges[join].dst].name);
        else if (x->bad_input >= 0) {
            const kpat_node *pn = &p->nodes[x->bad_input];
            uint32_t i = (uint32_t)x->bad_input;
            if (strcmp(pn->op, "Data") == 0)
                st = kiln_errorf(err, KILN_ERR_INVALID,
                                 "pattern %u of %s: Data node '%s' has an input", a, pass,
                                 pn->name);
            else
                st = kiln_errorf(err, KILN_ERR_INVALID,
                                 "pattern %u of %s: node '%s' has %u inputs but input %u is "
                                 "connected (inputs are numbered from 0 without holes)",
                                 a, pass, pn->name, cnt[i], maxdi[i]);
        } else if (x->done != x->nodes)
            st = kiln_errorf(err, KILN_ERR_INVALID, "pattern %u of %s has a cycle", a, pass);
        else if (x->unreached >= 0)
            st = kiln_errorf(err, KILN_ERR_INVALID,
                             "pattern %u of %s: node '%s' is on no path to an output", a, pass,
                             p->nodes[x->unreached].name);
    }
out:
    kiln__free(cnt);
    kiln__free(maxdi);
    kiln__free(indeg);
    kiln__free(stack);
    kiln__free(out_off);
    kiln__free(in_off);
    kiln__free(out_e);
    kiln__free(in_e);
    kiln__free(seen);
    kiln__free(al);
    return st;
}

/* ---- creation ------------------------------------------------------------- */

static bool is_commutative_op(const char *op)
{
    static const char *const ops[] = {"Add", "Mul", "Max",   "Min", "And",
                                      "Or",  "Xor", "Equal", "Sum"};
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
        if (strcmp(op, ops[i]) == 0)
            return true;
    return false;
}

void kiln__matcher_destroy(kiln_matcher *mt)
{
    if (!mt)
        return;
    for (uint32_t i = 0; i < mt->nkeys; i++) {
        kiln__free(mt->keys[i].ids);
        kiln__free(mt->keys[i].rec);
    }
    kiln__free(mt->keys);
    kiln__free(mt->touched);
    kiln__free(mt->kind);
    kiln__free(mt->comm);
    kiln__free(mt->sym);
    kiln__free(mt->in_off);
    kiln__free(mt->nin);
    kiln__free(mt->in_src);
    kiln__free(mt->in_so);
    kiln__free(mt->out_key);
    kiln__free(mt->map);
    kiln__free(mt->dmap);
    kiln__free(mt->trail);
    kiln__free(mt->q);
    kiln__free(mt->aouts);
    kiln__free(mt->rnodes);
    kiln__free(mt->rmatched);
    kiln__free(mt->rin);
    kiln__free(mt->rout);
    kiln__free(mt);
}

/* ---- the op index ----------------------------------------------------------- */

struct kiln_op_index {
    const kiln_graph *g;
    uint32_t limit;     /* node ids indexed: below it */
    kiln_sym *sym;      /* per slot: an op symbol (0 = empty), open addressing */
    uint32_t *start;    /* per slot: its nodes are ids[start .. start + cnt) */
    uint32_t *cnt;
    uint32_t cap;       /* slots, a power of two */
    kiln_node_id *ids;  /* grouped by op, ascending within an op */
};

static uint32_t ix_slot(const kiln_op_index *ix, kiln_sym op)
{
    uint32_t mask = ix->cap - 1;
    for (uint32_t j = (op * 2654435761u) >> 7 & mask;; j = (j + 1) & mask)
        if (ix->sym[j] == op || !ix->sym[j])
            return j;
}

void kiln__op_index_free(kiln_op_index *ix)
{
    if (!ix)
        return;
    kiln__free(ix->sym);
    kiln__free(ix->start);
    kiln__free(ix->cnt);
    kiln__free(ix->ids);
    kiln__free(ix);
}

static bool ix_alloc(kiln_op_index *ix, uint32_t cap)
{
    ix->cap = cap;
    ix->sym = kiln__calloc(cap, sizeof(kiln_sym));
    ix->start = kiln__calloc(cap, sizeof(uint32_t));
    ix->cnt = kiln__calloc(cap, sizeof(uint32_t));
    return ix->sym && ix->start && ix->cnt;
}

kiln_op_index *kiln__op_index_build(kiln_graph *g)
{
    kiln_op_index *ix = kiln__calloc(1, sizeof(*ix));
    if (!ix || !ix_alloc(ix, 64))
        goto oom;
    ix->g = g;
    ix->limit = g->node_limit;
    uint32_t used = 0, live = 0;
    for (kiln_node_id v = 1; v < ix->limit; v++) {
        if (g->nodes[v].flags & KILN_NODEF_DEAD)
            continue;
        live++;
        uint32_t j = ix_slot(ix, g->nodes[v].op);
        if (!ix->sym[j]) {
            if (2 * (used + 1) > ix->cap) { /* rehash into twice the slots */
                kiln_op_index old = *ix;
                if (!ix_alloc(ix, 2 * old.cap)) {
                    kiln__free(old.sym), kiln__free(old.start), kiln__free(old.cnt);
                    goto oom;
                }
                for (uint32_t k = 0; k < old.cap; k++)
                    if (old.sym[k]) {
                        uint32_t m = ix_slot(ix, old.sym[k]);
                        ix->sym[m] = old.sym[k];
                        ix->cnt[m] = old.cnt[k];
                    }
                kiln__free(old.sym), kiln__free(old.start), kiln__free(old.cnt);
                j = ix_slot(ix, g->nodes[v].op);
            }
            ix->sym[j] = g->nodes[v].op;
            used++;
        }
        ix->cnt[j]++;
    }
    uint32_t off = 0;
    for (uint32_t j = 0; j < ix->cap; j++) {
        ix->start[j] = off;
        off += ix->cnt[j];
        ix->cnt[j] = 0;
    }
    if (!(ix->ids = kiln__malloc(((size_t)live + 1) * sizeof(kiln_node_id))))
        goto oom;
    for (kiln_node_id v = 1; v < ix->limit; v++)
        if (!(g->nodes[v].flags & KILN_NODEF_DEAD)) {
            uint32_t j = ix_slot(ix, g->nodes[v].op);
            ix->ids[ix->start[j] + ix->cnt[j]++] = v;
        }
    return ix;
oom:
    kiln__op_index_free(ix);
    return NULL;
}

/* The live nodes of op @p sym or @p sym2 (0: none) in id order into @p c: from
 * the index below its limit, from the graph above it (nodes made since). */
static bool ix_gather(const kiln_op_index *ix, const kiln_graph *g, uint32_t limit0,
                      cand_list *c)
{
    const kiln_node_id *a = NULL, *b = NULL;
    uint32_t na = 0, nb = 0;
    if (c->sym) {
        uint32_t j = ix_slot(ix, c->sym);
        a = ix->ids + ix->start[j];
        na = ix->sym[j] ? ix->cnt[j] : 0;
    }
    if (c->sym2) {
        uint32_t j = ix_slot(ix, c->sym2);
        b = ix->ids + ix->start[j];
        nb = ix->sym[j] ? ix->cnt[j] : 0;
    }
    for (uint32_t i = 0, k = 0; i < na || k < nb;) {
        kiln_node_id v = k == nb || (i < na && a[i] < b[k]) ? a[i++] : b[k++];
        if (v >= limit0 || (g->nodes[v].flags & KILN_NODEF_DEAD))
            continue;
        if (!KILN_GROW(c->ids, c->cap, c->n + 1))
            return false;
        c->ids[c->n++] = v;
    }
    for (kiln_node_id v = ix->limit; v < limit0; v++) {
        kiln_sym op = g->nodes[v].op;
        if ((g->nodes[v].flags & KILN_NODEF_DEAD) || !op || (op != c->sym && op != c->sym2))
            continue;
        if (!KILN_GROW(c->ids, c->cap, c->n + 1))
            return false;
        c->ids[c->n++] = v;
    }
    return true;
}

kiln_matcher *kiln__matcher_create(const kiln_pattern *p, kiln_graph *g)
{
    return kiln__matcher_create_ix(p, g, NULL);
}

kiln_matcher *kiln__matcher_create_ix(const kiln_pattern *p, kiln_graph *g,
                                      const kiln_op_index *ix)
{
    kiln_matcher *mt = kiln__calloc(1, sizeof(*mt));
    if (!mt)
        return NULL;
    uint32_t n = p->nnodes, ne = p->nedges, no = p->nouts ? p->nouts : 1;
    mt->p = p;
    mt->g = g;
    mt->limit0 = g->node_limit;
    mt->kind = kiln__calloc(n, 1);
    mt->comm = kiln__calloc(n, sizeof(bool));
    mt->sym = kiln__calloc(n, sizeof(kiln_sym));
    mt->in_off = kiln__calloc(n + 1, sizeof(uint32_t));
    mt->nin = kiln__calloc(n, sizeof(uint32_t));
    mt->in_src = kiln__calloc(ne ? ne : 1, sizeof(int32_t));
    mt->in_so = kiln__calloc(ne ? ne : 1, sizeof(uint32_t));
    mt->out_key = kiln__calloc(no, sizeof(uint32_t));
    mt->keys = kiln__calloc(no, sizeof(cand_list));
    mt->map = kiln__calloc(n, sizeof(kiln_node_id));
    mt->dmap = kiln__calloc(n, sizeof(kiln_anchor));
    mt->touched = kiln__calloc(mt->limit0 / 64 + 1, sizeof(uint64_t));
    mt->q = kiln__calloc(n, sizeof(qpair));
    mt->aouts = kiln__calloc(no, sizeof(uint32_t));
    mt->rnodes = kiln__calloc(n, sizeof(kiln_node_id));
    mt->rmatched = kiln__calloc(n, sizeof(kiln_node_id));
    mt->rin = kiln__calloc(n, sizeof(kiln_anchor));
    mt->rout = kiln__calloc(no, sizeof(kiln_anchor));
    if (!mt->kind || !mt->comm || !mt->sym || !mt->in_off || !mt->nin || !mt->in_src ||
        !mt->in_so || !mt->out_key || !mt->keys || !mt->map || !mt->dmap || !mt->q ||
        !mt->aouts || !mt->rnodes || !mt->rmatched || !mt->rin || !mt->rout || !mt->touched)
        goto oom;
    kiln_sym s_const = kiln_sym_lookup(g, "Const"), s_constant = kiln_sym_lookup(g, "Constant");
    mt->s_const = s_const;
    mt->s_constant = s_constant;
    for (uint32_t i = 0; i < n; i++) {
        const char *op = p->nodes[i].op;
        mt->kind[i] = strcmp(op, "Data") == 0    ? PK_DATA
                      : strcmp(op, "Const") == 0 ? PK_CONST
                                                 : PK_OP;
        mt->sym[i] = kiln_sym_lookup(g, op);
        mt->comm[i] =
            (alt_flags(p, p->nodes[i].alt) & KILN_PATTERN_COMMUTATIVE) && is_commutative_op(op);
    }
    /* CSR of pattern inputs (validated: numbered 0..k-1) */
    for (uint32_t e = 0; e < ne; e++)
        mt->nin[p->edges[e].dst]++;
    for (uint32_t i = 0; i < n; i++)
        mt->in_off[i + 1] = mt->in_off[i] + mt->nin[i];
    for (uint32_t e = 0; e < ne; e++) {
        uint32_t d = (uint32_t)p->edges[e].dst, k = mt->in_off[d] + p->edges[e].di;
        if (p->edges[e].di >= mt->nin[d])
            continue; /* not validated; never matched */
        mt->in_src[k] = p->edges[e].src;
        mt->in_so[k] = p->edges[e].so;
    }
    for (uint32_t i = 0; i < n; i++)
        if (mt->comm[i] && mt->nin[i] != 2)
            mt->comm[i] = false;
    /* candidate lists: one per distinct output op */
    for (uint32_t o = 0; o < p->nouts; o++) {
        uint32_t pn = (uint32_t)p->outs[o].node;
        kiln_sym s = mt->kind[pn] == PK_CONST ? s_const : mt->sym[pn];
        kiln_sym s2 = mt->kind[pn] == PK_CONST ? s_constant : 0;
        uint32_t k = 0;
        while (k < mt->nkeys && !(mt->keys[k].sym == s && mt->keys[k].sym2 == s2))
            k++;
        if (k == mt->nkeys) {
            mt->keys[k].sym = s;
            mt->keys[k].sym2 = s2;
            mt->nkeys++;
        }
        mt->out_key[o] = k;
    }
    if (ix && ix->g == g && ix->limit <= mt->limit0) {
        for (uint32_t k = 0; k < mt->nkeys; k++)
            if (!ix_gather(ix, g, mt->limit0, &mt->keys[k]))
                goto oom;
    } else {
        for (kiln_node_id v = 1; v < mt->limit0; v++) {
            if (g->nodes[v].flags & KILN_NODEF_DEAD)
                continue;
            kiln_sym op = g->nodes[v].op;
            for (uint32_t k = 0; k < mt->nkeys; k++) {
                cand_list *c = &mt->keys[k];
                if (!op || (op != c->sym && op != c->sym2))
                    continue;
                if (!KILN_GROW(c->ids, c->cap, c->n + 1))
                    goto oom;
                c->ids[c->n++] = v;
            }
        }
    }
    for (uint32_t k = 0; k < mt->nkeys; k++)
        if (!(mt->keys[k].rec = kiln__calloc(mt->keys[k].n + 1, sizeof(cand_rec))))
            goto oom;
    return mt;
oom:
    kiln__matcher_destroy(mt);
    return NULL;
}

/* ---- matching --------------------------------------------------------------- */

static bool push_trail(kiln_matcher *mt, uint32_t pn, uint8_t data)
{
    if (!KILN_GROW(mt->trail, mt->trail_cap, mt->ntrail + 1))
        return false;
    mt->trail[mt->ntrail++] = (trail_ent){pn, data};
    return true;
}

/* Whether target node @p tn is mapped in the match being built: a scan of the
 * trail (a match maps a handful of nodes), instead of an array over the
 * graph's ids allocated per matcher. */
static bool owned(const kiln_matcher *mt, kiln_node_id tn)
{
    for (uint32_t i = 0; i < mt->ntrail; i++)
        if (!mt->trail[i].data && mt->map[mt->trail[i].pn] == tn)
            return true;
    return false;
}

static void undo(kiln_matcher *mt, uint32_t mark)
{
    while (mt->ntrail > mark) {
        trail_ent t = mt->trail[--mt->ntrail];
        if (t.data) {
            mt->dmap[t.pn] = (kiln_anchor){0, 0};
        } else {
            mt->map[t.pn] = 0;
        }
    }
}

static bool const_value_equal(const kiln_matcher *mt, uint32_t pn, kiln_node_id tn)
{
    const kpat_node *n = &mt->p->nodes[pn];
    kiln_tensor_value tv;
    if (!kiln_attrs_get_tensor(kiln_node_attrs(mt->g, tn), "value", &tv))
        return false;
    if (tv.dtype != n->vdtype || tv.rank != n->vrank || tv.nbytes != n->vbytes)
        return false;
    if (n->vrank && memcmp(tv.dims, n->vdims, n->vrank * sizeof(int64_t)) != 0)
        return false;
    return !n->vbytes || memcmp(tv.data, n->vdata, n->vbytes) == 0;
}

/* GE's node matchers (Data is handled by the caller). */
static bool node_match(const kiln_matcher *mt, uint32_t pn, kiln_node_id tn)
{
    kiln_sym op = mt->g->nodes[tn].op;
    if (mt->kind[pn] == PK_CONST) {
        const char *s = kiln_sym_str(mt->g, op);
        if (strcmp(s, "Const") != 0 && strcmp(s, "Constant") != 0)
            return false;
        if (mt->p->nodes[pn].has_value &&
            (alt_flags(mt->p, mt->p->nodes[pn].alt) & KILN_PATTERN_CONST_VALUE))
            return const_value_equal(mt, pn, tn);
        return true;
    }
    return mt->sym[pn] && op == mt->sym[pn];
}

/* Map non-Data pattern node @p pn to @p tn if it may. */
static int try_map(kiln_matcher *mt, uint32_t pn, kiln_node_id tn)
{
    if (tn == 0 || tn >= mt->limit0 || (mt->g->nodes[tn].flags & KILN_NODEF_DEAD) ||
        owned(mt, tn) || !node_match(mt, pn, tn) || kiln_node_input_count(mt->g, tn) != mt->nin[pn])
        return 0;
    if (!push_trail(mt, pn, 0))
        return -1;
    mt->map[pn] = tn;
    mt->q[mt->qlen++] = (qpair){pn, tn};
    return 1;
}

/* Bind the inputs of (pn, tn); @p swap exchanges the two pattern inputs. */
static int bind_inputs(kiln_matcher *mt, uint32_t pn, kiln_node_id tn, bool swap)
{
    for (uint32_t i = 0; i < mt->nin[pn]; i++) {
        uint32_t k = mt->in_off[pn] + (swap ? 1 - i : i);
        uint32_t pp = (uint32_t)mt->in_src[k], pso = mt->in_so[k];
        kiln_anchor t = kiln_node_input_peer(mt->g, tn, i);
        if (!t.node)
            return 0;
        if (mt->kind[pp] == PK_DATA) {
            if (!mt->dmap[pp].node) {
                if (!push_trail(mt, pp, 1))
                    return -1;
                mt->dmap[pp] = t;
            } else if (mt->dmap[pp].node != t.node || mt->dmap[pp].index != t.index) {
                return 0; /* one pattern Data binds one producer anchor */
            }
            continue;
        }
        if (pso != t.index)
            return 0;
        if (mt->map[pp]) {
            if (mt->map[pp] != t.node)
                return 0;
            continue;
        }
        int r = try_map(mt, pp, t.node);
        if (r <= 0)
            return r;
    }
    return 1;
}

static int match_outputs(kiln_matcher *mt, uint32_t j);

/* Drain the queue from @p qi, then go on with output @p j + 1.  1 = full
 * match (state kept), 0 = none (state as on entry), -1 = OOM. */
static int solve(kiln_matcher *mt, uint32_t qi, uint32_t j)
{
    uint32_t mark = mt->ntrail, qmark = mt->qlen;
    while (qi < mt->qlen) {
        qpair pr = mt->q[qi];
        if (mt->comm[pr.pn]) {
            uint32_t m2 = mt->ntrail, q2 = mt->qlen;
            for (int sw = 0; sw < 2; sw++) {
                int r = bind_inputs(mt, pr.pn, pr.tn, sw != 0);
                if (r > 0)
                    r = solve(mt, qi + 1, j);
                if (r != 0)
                    return r;
                undo(mt, m2);
                mt->qlen = q2;
            }
            undo(mt, mark);
            mt->qlen = qmark;
            return 0;
        }
        int r = bind_inputs(mt, pr.pn, pr.tn, false);
        if (r <= 0) {
            if (r == 0) {
                undo(mt, mark);
                mt->qlen = qmark;
            }
            return r;
        }
        qi++;
    }
    int r = match_outputs(mt, j + 1);
    if (r == 0) {
        undo(mt, mark);
        mt->qlen = qmark;
    }
    return r;
}

static bool is_pattern_output(const kiln_matcher *mt, kiln_node_id tn, uint32_t o)
{
    for (uint32_t j = 0; j < mt->naouts; j++) {
        const kpat_out *po = &mt->p->outs[mt->aouts[j]];
        if (mt->map[po->node] == tn && po->so == o)
            return true;
    }
    return false;
}

/* InnerSubgraphBoundary: self-contained (see the file comment). */
static bool boundary_ok(const kiln_matcher *mt)
{
    const kiln_pattern *p = mt->p;
    const kiln_graph *g = mt->g;
    for (uint32_t i = 0; i < p->nnodes; i++) {
        if (p->nodes[i].alt != mt->alt)
            continue;
        if (mt->kind[i] == PK_DATA) {
            kiln_node_id s = mt->dmap[i].node;
            if (!s || owned(mt, s))
                return false;
            continue;
        }
        kiln_node_id tn = mt->map[i];
        if (!tn)
            return false;
        uint32_t nout = kiln_node_output_count(g, tn);
        for (uint32_t o = 0; o < nout; o++) {
            if (is_pattern_output(mt, tn, o))
                continue;
            for (uint32_t u = kiln_use_first(g, tn, o); u; u = kiln_use_next(g, u)) {
                kiln_node_id d = kiln_use_dst(g, u).node;
                if (!owned(mt, d))
                    return false;
            }
        }
    }
    return true;
}

/* The record of candidate @p i of @p c, read from the graph when stale. */
static const cand_rec *cand_get(const kiln_matcher *mt, cand_list *c, uint32_t i)
{
    cand_rec *r = &c->rec[i];
    kiln_node_id tn = c->ids[i];
    if (r->state != CR_STALE && !(mt->touched[tn / 64] >> (tn % 64) & 1))
        return r;
    const kiln_graph *g = mt->g;
    if (!kiln__live(g, tn)) {
        r->state = CR_DEAD;
        return r;
    }
    const knode *k = &g->nodes[tn];
    r->nin = k->nin;
    r->nout = k->nout;
    for (uint32_t j = 0; j < 2; j++) {
        const kuse *u = j < k->nin ? &g->in[k->in_off + j] : NULL;
        r->has[j] = u && u->src;
        r->op[j] = u && u->src && u->src < mt->limit0 && kiln__live(g, u->src)
                       ? g->nodes[u->src].op : 0;
        r->so[j] = u ? u->src_idx : 0;
    }
    r->state = CR_LIVE;
    return r;
}

/* Input @p j of the candidate against pattern input @p k of its node: what
 * bind_inputs and try_map would check first. */
static bool rec_input_ok(const kiln_matcher *mt, const cand_rec *r, uint32_t j, uint32_t k)
{
    uint32_t pp = (uint32_t)mt->in_src[k];
    if (!r->has[j])
        return false;
    if (mt->kind[pp] == PK_DATA)
        return true;
    if (r->so[j] != mt->in_so[k] || !r->op[j])
        return false;
    if (mt->kind[pp] == PK_CONST)
        return r->op[j] == mt->s_const || r->op[j] == mt->s_constant;
    return r->op[j] == mt->sym[pp];
}

/* False when candidate @p i of @p c certainly does not map pattern output
 * node @p pn at output @p so (a necessary condition of try_map + the first
 * bind_inputs; the full match decides the rest). */
static bool cand_may_match(const kiln_matcher *mt, cand_list *c, uint32_t i, uint32_t pn,
                           uint32_t so)
{
    const cand_rec *r = cand_get(mt, c, i);
    if (r->state != CR_LIVE || so >= r->nout || r->nin != mt->nin[pn])
        return false;
    uint32_t n = r->nin < 2 ? r->nin : 2, k0 = mt->in_off[pn];
    bool ok = true;
    for (uint32_t j = 0; j < n && ok; j++)
        ok = rec_input_ok(mt, r, j, k0 + j);
    if (!ok && mt->comm[pn]) /* two inputs, tried swapped too */
        ok = rec_input_ok(mt, r, 0, k0 + 1) && rec_input_ok(mt, r, 1, k0);
    return ok;
}

void kiln__matcher_touch(kiln_matcher *mt, kiln_node_id n)
{
    /* a touched node's records stay stale for good: it was matched (and is
     * gone or kept) or re-fed, and reading it again is cheap */
    if (mt && n < mt->limit0)
        mt->touched[n / 64] |= 1ull << (n % 64);
}

/* Output @p j of the alternative: every candidate in turn (j > 0). */
static int match_outputs(kiln_matcher *mt, uint32_t j)
{
    if (j >= mt->naouts)
        return boundary_ok(mt) ? 1 : 0;
    const kpat_out *po = &mt->p->outs[mt->aouts[j]];
    uint32_t pn = (uint32_t)po->node;
    if (mt->map[pn]) {
        if (po->so >= kiln_node_output_count(mt->g, mt->map[pn]))
            return 0;
        return match_outputs(mt, j + 1);
    }
    cand_list *c = &mt->keys[mt->out_key[mt->aouts[j]]];
    for (uint32_t i = 0; i < c->n; i++) {
        kiln_node_id tn = c->ids[i];
        if (!cand_may_match(mt, c, i, pn, po->so))
            continue;
        uint32_t mark = mt->ntrail, qmark = mt->qlen;
        int r = try_map(mt, pn, tn);
        if (r > 0)
            r = solve(mt, qmark, j);
        if (r < 0)
            return r;
        if (r > 0)
            return 1;
        undo(mt, mark);
        mt->qlen = qmark;
    }
    return 0;
}

void kiln__matcher_begin(kiln_matcher *mt, uint32_t alt)
{
    undo(mt, 0);
    mt->qlen = 0;
    mt->alt = alt;
    mt->cursor = 0;
    mt->naouts = 0;
    for (uint32_t o = 0; o < mt->p->nouts; o++)
        if (mt->p->nodes[mt->p->outs[o].node].alt == alt)
            mt->aouts[mt->naouts++] = o;
}

static const kiln_match *fill_result(kiln_matcher *mt)
{
    const kiln_pattern *p = mt->p;
    uint32_t ni = 0, nm = 0;
    for (uint32_t i = 0; i < p->nnodes; i++) {
        mt->rnodes[i] = 0;
        if (p->nodes[i].alt != mt->alt)
            continue;
        if (mt->kind[i] == PK_DATA) {
            mt->rin[ni++] = mt->dmap[i];
        } else {
            mt->rnodes[i] = mt->map[i];
            mt->rmatched[nm++] = mt->map[i];
        }
    }
    for (uint32_t j = 0; j < mt->naouts; j++) {
        const kpat_out *po = &p->outs[mt->aouts[j]];
        mt->rout[j] = (kiln_anchor){mt->map[po->node], po->so};
    }
    kiln_match *m = &mt->m;
    m->pattern_index = mt->alt;
    m->nodes = mt->rnodes;
    m->nnodes = p->nnodes;
    m->inputs = mt->rin;
    m->ninputs = ni;
    m->outputs = mt->rout;
    m->noutputs = mt->naouts;
    m->matched = mt->rmatched;
    m->nmatched = nm;
    m->boundary = (kiln_fusion_boundary){
        sizeof(kiln_fusion_boundary), mt->rmatched, nm, mt->rin, ni, mt->rout, mt->naouts};
    return m;
}

const kiln_match *kiln__matcher_next(kiln_matcher *mt)
{
    undo(mt, 0);
    mt->qlen = 0;
    if (!mt->naouts)
        return NULL;
    const kpat_out *po = &mt->p->outs[mt->aouts[0]];
    uint32_t pn = (uint32_t)po->node;
    cand_list *c = &mt->keys[mt->out_key[mt->aouts[0]]];
    while (mt->cursor < c->n) {
        uint32_t i = mt->cursor++;
        kiln_node_id tn = c->ids[i];
        if (!cand_may_match(mt, c, i, pn, po->so))
            continue;
        int r = try_map(mt, pn, tn);
        if (r > 0)
            r = solve(mt, 0, 0);
        if (r < 0) {
            mt->g->oom = true;
            return NULL;
        }
        if (r > 0)
            return fill_result(mt);
        undo(mt, 0);
        mt->qlen = 0;
    }
    return NULL;
}

/*
 * analysis_cycle.c - the incremental cycle detector (see analysis_cycle.h for
 * the invariant, the query and the Pearce-Kelly style update).
 *
 * Build: the cached topological order (analysis_topo.c) gives label(i-th
 * node) = (i + 1) * KILN_CYC_SPACING and the list in that order: O(n + e),
 * 32 bytes per node (label, prev, next, mark, stack).
 *
 * Query kiln__cycles_would_form: a depth-first search from the successors of
 * S outside S that never enters a node labelled >= hi = max label(S).
 * Visited marks are generation stamps, so a query never clears anything.
 * Cost: O(|S| + the nodes and edges reachable from S inside its label
 * window); for the adjacent pairs a pattern fusion fuses that window is a
 * handful of nodes whatever the graph's size.
 *
 * Update: kiln__cycles_plan finds F (forward, labels < hi) and B (backward
 * from S's predecessors, labels > lo) before the edit; kiln__cycles_commit
 * deals the pooled labels of B, S and F out to B, the new nodes, then F, and
 * relinks the list so it stays in label order.  Why it is sound: every label
 * a node of B receives is <= its old one, every label of F >= its old one;
 * a predecessor of S outside B is labelled below lo, a successor outside F
 * above hi; and no F node reaches a B node (that path would be the cycle
 * CanFuse refused).  Cost O((|B| + |S| + |F|) log) per fusion.  New nodes
 * beyond |S| are inserted after the last one with order-maintenance
 * labelling: the midpoint of the gap, or when the gap is used up, the
 * following run of j nodes whose label span exceeds 2 (j + 1)^2 is spread
 * evenly (amortised O(1) with the initial spacing).
 */
#include "analysis_cycle.h"

#define KILN_CYC_SPACING ((uint64_t)1 << 20)

void kiln__cycles_free(struct kiln_cycles *c)
{
    if (!c)
        return;
    kiln__free(c->label);
    kiln__free(c->prev);
    kiln__free(c->next);
    kiln__free(c->mark);
    kiln__free(c->stack);
    kiln__free(c->origin);
    kiln__free(c);
}

static bool cyc_valid(const kiln_graph *g, const struct kiln_cycles *c)
{
    return c && c->at == g->struct_mutation + 1 && c->cap >= g->node_limit;
}

const struct kiln_cycles *kiln__cycles_peek(const kiln_graph *g)
{
    const struct kiln_cycles *c = g->analyses ? g->analyses->cycles : NULL;
    return cyc_valid(g, c) ? c : NULL;
}

/* Grow the per-node arrays to @p need entries, new entries zeroed. */
static bool cyc_grow(struct kiln_cycles *c, uint32_t need)
{
    if (need <= c->cap)
        return true;
    uint32_t cap = kiln__grow_cap(c->cap, need);
    uint64_t *l = kiln__realloc(c->label, (size_t)cap * sizeof(*l));
    if (!l)
        return false;
    c->label = l;
    kiln_node_id *p = kiln__realloc(c->prev, (size_t)cap * sizeof(*p));
    if (!p)
        return false;
    c->prev = p;
    kiln_node_id *n = kiln__realloc(c->next, (size_t)cap * sizeof(*n));
    if (!n)
        return false;
    c->next = n;
    uint32_t *m = kiln__realloc(c->mark, (size_t)cap * sizeof(*m));
    if (!m)
        return false;
    c->mark = m;
    size_t add = cap - c->cap;
    memset(c->label + c->cap, 0, add * sizeof(*l));
    memset(c->prev + c->cap, 0, add * sizeof(*p));
    memset(c->next + c->cap, 0, add * sizeof(*n));
    memset(c->mark + c->cap, 0, add * sizeof(*m));
    c->cap = cap;
    return true;
}

/* A fresh generation: gen = member of S, gen + 1 = visited forward, gen + 2 =
 * visited backward. */
static uint32_t cyc_gen(struct kiln_cycles *c)
{
    if (c->gen > UINT32_MAX - 8) {
        memset(c->mark, 0, (size_t)c->cap * sizeof(*c->mark));
        c->gen = 0;
    }
    c->gen += 4;
    return c->gen;
}

static bool cyc_push(struct kiln_cycles *c, uint32_t *sp, kiln_node_id v, kiln_node_id from)
{
    if (*sp >= c->stack_cap) {
        uint32_t cap = c->stack_cap;
        if (!KILN_GROW(c->stack, cap, *sp + 1))
            return false;
        cap = c->stack_cap;
        if (!KILN_GROW(c->origin, cap, *sp + 1))
            return false;
        c->stack_cap = cap;
    }
    c->stack[*sp] = v;
    c->origin[*sp] = from;
    (*sp)++;
    return true;
}

static bool cyc_build(kiln_graph *g, struct kiln_cycles *c)
{
    if (kiln__topo_ensure(g, NULL) != KILN_OK)
        return false;
    if (!cyc_grow(c, g->node_limit))
        return false;
    memset(c->label, 0, (size_t)c->cap * sizeof(*c->label));
    const struct kiln_analysis_cache *a = g->analyses;
    kiln_node_id last = 0;
    c->head = 0;
    for (uint32_t i = 0; i < a->norder; i++) {
        kiln_node_id n = a->order[i];
        c->label[n] = (uint64_t)(i + 1) * KILN_CYC_SPACING;
        c->prev[n] = last;
        c->next[n] = 0;
        if (last)
            c->next[last] = n;
        else
            c->head = n;
        last = n;
    }
    c->at = g->struct_mutation + 1;
    c->builds++;
    return true;
}

/* The valid analysis of @p g, built when stale; NULL on a cyclic graph or OOM. */
static struct kiln_cycles *cyc_ensure(kiln_graph *g)
{
    struct kiln_analysis_cache *a = kiln__analyses(g);
    if (!a)
        return NULL;
    if (!a->cycles && !(a->cycles = kiln__calloc(1, sizeof(*a->cycles))))
        return NULL;
    if (cyc_valid(g, a->cycles))
        return a->cycles;
    return cyc_build(g, a->cycles) ? a->cycles : NULL;
}

/* The state of one forward search (cyc_forward). */
typedef struct cyc_walk {
    struct kiln_cycles *c;
    uint32_t gen, sp;
    uint64_t hi;
    bool bounded;
    kiln_node_id *exit_from, *enter_at;
    kiln_node_id **out;
    uint32_t *nout, *outcap;
} cyc_walk;

/* Edge from @p v (reached from S's node @p from) to @p d: 1 when it re-enters
 * S, -1 on OOM, else 0 (d queued when new and below the bound). */
static int cyc_step(cyc_walk *w, bool in_set, kiln_node_id from, kiln_node_id d)
{
    struct kiln_cycles *c = w->c;
    uint32_t m = c->mark[d];
    if (m == w->gen) {
        if (in_set)
            return 0;
        *w->exit_from = from;
        *w->enter_at = d;
        return 1;
    }
    if (m == w->gen + 1 || (w->bounded && c->label[d] >= w->hi))
        return 0;
    c->mark[d] = w->gen + 1;
    c->visited++;
    if (w->out && !KILN_GROW(*w->out, *w->outcap, *w->nout + 1))
        return -1;
    if (w->out)
        (*w->out)[(*w->nout)++] = d;
    return cyc_push(c, &w->sp, d, from) ? 0 : -1;
}

/*
 * Forward search from S's external successors through nodes labelled < hi
 * (all nodes when @p bounded is false).  Returns 1 when S is re-entered
 * (*exit_from, *enter_at set), 0 when not, -1 on OOM.  Leaves the visited
 * nodes marked gen + 1; when @p out is non-NULL they are appended to it.
 */
static int cyc_forward(const kiln_graph *g, struct kiln_cycles *c, uint32_t gen,
                       const kiln_node_id *s, uint32_t n, uint64_t hi, bool bounded,
                       kiln_node_id *exit_from, kiln_node_id *enter_at, kiln_node_id **out,
                       uint32_t *nout, uint32_t *outcap)
{
    cyc_walk w = {c, gen, 0, hi, bounded, exit_from, enter_at, out, nout, outcap};
    for (uint32_t k = 0; k < n; k++) {
        if (!cyc_push(c, &w.sp, s[k], s[k]))
            return -1;
    }
    while (w.sp) {
        w.sp--;
        kiln_node_id v = c->stack[w.sp], from = c->origin[w.sp];
        bool in_set = c->mark[v] == gen;
        const knode *kn = &g->nodes[v];
        int r = 0;
        for (uint32_t o = 0; o < kn->nout && !r; o++)
            for (uint32_t u = g->out_head[kn->out_off + o]; u && !r; u = g->in[u].next)
                r = cyc_step(&w, in_set, from, g->in[u].dst);
        for (uint32_t e = kn->ctrl_out; e && !r; e = g->ctrl[e].out_next)
            r = cyc_step(&w, in_set, from, g->ctrl[e].dst);
        if (r)
            return r;
    }
    return 0;
}

/* The uncached check for a graph without a valid analysis (cyclic, or OOM
 * while building): the same search, unbounded, over a private mark array. */
static bool plain_would_form(kiln_graph *g, const kiln_node_id *s, uint32_t n,
                             kiln_node_id *exit_from, kiln_node_id *enter_at)
{
    struct kiln_cycles tmp = {0};
    bool res = true; /* out of memory: refuse */
    if (cyc_grow(&tmp, g->node_limit)) {
        uint32_t gen = cyc_gen(&tmp);
        for (uint32_t k = 0; k < n; k++)
            tmp.mark[s[k]] = gen;
        int r = cyc_forward(g, &tmp, gen, s, n, 0, false, exit_from, enter_at, NULL, NULL, NULL);
        res = r != 0;
    }
    kiln__free(tmp.label);
    kiln__free(tmp.prev);
    kiln__free(tmp.next);
    kiln__free(tmp.mark);
    kiln__free(tmp.stack);
    kiln__free(tmp.origin);
    return res;
}

bool kiln__cycles_would_form(kiln_graph *g, const kiln_node_id *s, uint32_t n,
                             kiln_node_id *exit_from, kiln_node_id *enter_at)
{
    *exit_from = *enter_at = 0;
    struct kiln_cycles *c = cyc_ensure(g);
    if (!c)
        return plain_would_form(g, s, n, exit_from, enter_at);
    uint32_t gen = cyc_gen(c);
    uint64_t hi = 0;
    for (uint32_t k = 0; k < n; k++) {
        c->mark[s[k]] = gen;
        if (c->label[s[k]] > hi)
            hi = c->label[s[k]];
    }
    int r = cyc_forward(g, c, gen, s, n, hi, true, exit_from, enter_at, NULL, NULL, NULL);
    if (r < 0)
        return plain_would_form(g, s, n, exit_from, enter_at);
    return r == 1;
}

/* ---- update ---------------------------------------------------------------- */

typedef struct lab_node {
    uint64_t l;
    kiln_node_id n;
} lab_node;

static int lab_cmp(const void *a, const void *b)
{
    uint64_t x = ((const lab_node *)a)->l, y = ((const lab_node *)b)->l;
    return x < y ? -1 : x > y;
}

void kiln__cycles_plan_free(kiln_cycle_plan *p)
{
    kiln__free(p->set);
    kiln__free(p->back);
    kiln__free(p->fwd);
    memset(p, 0, sizeof(*p));
}

void kiln__cycles_plan(kiln_graph *g, const kiln_node_id *s, uint32_t n, kiln_cycle_plan *p)
{
    memset(p, 0, sizeof(*p));
    struct kiln_analysis_cache *a = g->analyses;
    struct kiln_cycles *c = a ? a->cycles : NULL;
    if (!cyc_valid(g, c) || !n)
        return;
    uint32_t gen = cyc_gen(c);
    uint64_t lo = UINT64_MAX, hi = 0;
    p->set = kiln__malloc((size_t)n * sizeof(*p->set));
    if (!p->set)
        goto fail;
    for (uint32_t k = 0; k < n; k++) {
        c->mark[s[k]] = gen;
        p->set[k] = s[k];
        uint64_t l = c->label[s[k]];
        lo = l < lo ? l : lo;
        hi = l > hi ? l : hi;
    }
    p->nset = n;
    uint32_t fcap = 0, bcap = 0;
    kiln_node_id ex, en;
    if (cyc_forward(g, c, gen, s, n, hi, true, &ex, &en, &p->fwd, &p->nfwd, &fcap) != 0)
        goto fail; /* OOM, or a cycle (the caller asked CanFuse first) */
    /* Backward from S's predecessors through nodes labelled > lo. */
    uint32_t sp = 0;
    for (uint32_t k = 0; k < n; k++)
        if (!cyc_push(c, &sp, s[k], s[k]))
            goto fail;
    while (sp) {
        kiln_node_id v = c->stack[--sp];
        const knode *kn = &g->nodes[v];
        for (uint32_t i = 0; i < kn->nin; i++) {
            kiln_node_id d = g->in[kn->in_off + i].src;
            if (!d || c->mark[d] == gen || c->mark[d] == gen + 2 || c->label[d] <= lo)
                continue;
            c->mark[d] = gen + 2;
            if (!KILN_GROW(p->back, bcap, p->nback + 1) || !cyc_push(c, &sp, d, d))
                goto fail;
            p->back[p->nback++] = d;
        }
        for (uint32_t e = kn->ctrl_in; e; e = g->ctrl[e].in_next) {
            kiln_node_id d = g->ctrl[e].src;
            if (c->mark[d] == gen || c->mark[d] == gen + 2 || c->label[d] <= lo)
                continue;
            c->mark[d] = gen + 2;
            if (!KILN_GROW(p->back, bcap, p->nback + 1) || !cyc_push(c, &sp, d, d))
                goto fail;
            p->back[p->nback++] = d;
        }
    }
    p->ok = true;
    return;
fail:
    kiln__cycles_plan_free(p);
    c->at = 0; /* stale: the next query rebuilds */
}

static void om_unlink(struct kiln_cycles *c, kiln_node_id x)
{
    kiln_node_id p = c->prev[x], n = c->next[x];
    if (p)
        c->next[p] = n;
    else
        c->head = n;
    if (n)
        c->prev[n] = p;
    c->prev[x] = c->next[x] = 0;
}

/* Link @p x after @p after (0: at the head); labels are the caller's. */
static void om_link_after(struct kiln_cycles *c, kiln_node_id after, kiln_node_id x)
{
    kiln_node_id n = after ? c->next[after] : c->head;
    c->prev[x] = after;
    c->next[x] = n;
    if (after)
        c->next[after] = x;
    else
        c->head = x;
    if (n)
        c->prev[n] = x;
}

/* Order-maintenance insert of @p y right after @p x, choosing its label. */
static void om_insert_after(struct kiln_cycles *c, kiln_node_id x, kiln_node_id y)
{
    uint64_t lx = c->label[x];
    kiln_node_id nx = c->next[x];
    if (!nx) {
        c->label[y] = lx + KILN_CYC_SPACING;
    } else if (c->label[nx] - lx >= 2) {
        c->label[y] = lx + (c->label[nx] - lx) / 2;
    } else {
        /* Spread the run x < nx .. (j nodes) < z whose span is wide enough. */
        kiln_node_id z = nx;
        uint64_t j = 0;
        while (z && c->label[z] - lx <= 2 * (j + 2) * (j + 2)) {
            z = c->next[z];
            j++;
        }
        uint64_t lz = z ? c->label[z] : lx + (j + 2) * KILN_CYC_SPACING;
        uint64_t step = (lz - lx) / (j + 2);
        c->label[y] = lx + step;
        uint64_t t = 2;
        for (kiln_node_id w = nx; w != z; w = c->next[w])
            c->label[w] = lx + step * t++;
        c->relabels++;
    }
    om_link_after(c, x, y);
}

void kiln__cycles_commit(kiln_graph *g, kiln_cycle_plan *p, const kiln_node_id *added, uint32_t k)
{
    struct kiln_analysis_cache *a = g->analyses;
    struct kiln_cycles *c = a ? a->cycles : NULL;
    if (!p->ok || !c)
        return;
    uint32_t m = p->nback + p->nset + p->nfwd;
    lab_node *slots = kiln__malloc((size_t)m * sizeof(*slots));
    lab_node *bs = kiln__malloc((size_t)(p->nback + p->nfwd + 1) * sizeof(*bs));
    kiln_node_id *owner = kiln__malloc((size_t)m * sizeof(*owner));
    kiln_node_id *anchor = kiln__malloc((size_t)m * sizeof(*anchor));
    uint8_t *same = kiln__malloc((size_t)m);
    if (!slots || !bs || !owner || !anchor || !same || !cyc_grow(c, g->node_limit))
        goto stale;
    uint32_t j = 0;
    for (uint32_t i = 0; i < p->nback; i++)
        slots[j++] = (lab_node){c->label[p->back[i]], p->back[i]};
    for (uint32_t i = 0; i < p->nset; i++)
        slots[j++] = (lab_node){c->label[p->set[i]], p->set[i]};
    for (uint32_t i = 0; i < p->nfwd; i++)
        slots[j++] = (lab_node){c->label[p->fwd[i]], p->fwd[i]};
    qsort(slots, m, sizeof(*slots), lab_cmp);
    /* Owners: B in old order, the new nodes (at most |S|), empty slots, F. */
    j = 0;
    for (uint32_t i = 0; i < p->nback; i++)
        bs[i] = (lab_node){c->label[p->back[i]], p->back[i]};
    qsort(bs, p->nback, sizeof(*bs), lab_cmp);
    for (uint32_t i = 0; i < p->nback; i++)
        owner[j++] = bs[i].n;
    uint32_t placed = k < p->nset ? k : p->nset;
    for (uint32_t i = 0; i < p->nset; i++)
        owner[j++] = i < placed ? added[i] : 0;
    for (uint32_t i = 0; i < p->nfwd; i++)
        bs[i] = (lab_node){c->label[p->fwd[i]], p->fwd[i]};
    qsort(bs, p->nfwd, sizeof(*bs), lab_cmp);
    for (uint32_t i = 0; i < p->nfwd; i++)
        owner[j++] = bs[i].n;
    /* Where each slot sits: after a node outside the region (its anchor),
     * possibly in a run of slots that follow each other directly. */
    for (uint32_t i = 0; i < m; i++) {
        kiln_node_id pv = c->prev[slots[i].n];
        same[i] = i > 0 && pv == slots[i - 1].n;
        anchor[i] = same[i] ? anchor[i - 1] : pv;
    }
    for (uint32_t i = 0; i < m; i++)
        om_unlink(c, slots[i].n);
    for (uint32_t i = 0; i < p->nset; i++)
        c->label[p->set[i]] = 0;
    kiln_node_id cursor = 0;
    for (uint32_t i = 0; i < m; i++) {
        if (!same[i])
            cursor = anchor[i];
        if (!owner[i])
            continue;
        c->label[owner[i]] = slots[i].l;
        om_link_after(c, cursor, owner[i]);
        cursor = owner[i];
    }
    for (uint32_t i = placed; i < k; i++) {
        if (i == 0) /* |S| = 0 cannot happen: the plan has a set */
            goto stale;
        om_insert_after(c, added[i - 1], added[i]);
    }
    c->at = g->struct_mutation + 1;
    c->updates++;
    goto done;
stale:
    c->at = 0;
done:
    kiln__free(slots);
    kiln__free(bs);
    kiln__free(owner);
    kiln__free(anchor);
    kiln__free(same);
}

bool kiln__cycles_check(const kiln_graph *g)
{
    const struct kiln_cycles *c = kiln__cycles_peek(g);
    if (!c)
        return false;
    uint32_t count = 0;
    uint64_t last = 0;
    for (kiln_node_id v = c->head; v; v = c->next[v]) {
        if (!kiln__live(g, v) || c->label[v] <= last)
            return false;
        last = c->label[v];
        if (++count > g->live)
            return false;
    }
    if (count != g->live)
        return false;
    for (kiln_node_id v = 1; v < g->node_limit; v++) {
        if (!kiln__live(g, v))
            continue;
        const knode *kn = &g->nodes[v];
        for (uint32_t o = 0; o < kn->nout; o++)
            for (uint32_t u = g->out_head[kn->out_off + o]; u; u = g->in[u].next)
                if (c->label[v] >= c->label[g->in[u].dst])
                    return false;
        for (uint32_t e = kn->ctrl_out; e; e = g->ctrl[e].out_next)
            if (c->label[v] >= c->label[g->ctrl[e].dst])
                return false;
    }
    return true;
}

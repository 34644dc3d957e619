/*
 * gepass.c - GEPass, GE's node-pass re-traversal driver (GE_SEMANTICS §1.2).
 *
 * Design.  One "walk" per graph (the root, then a nested walk per subgraph of
 * every visited node, depth + 1, at most 25 deep).  A walk keeps GE's
 * GraphLevelState in dense per-node arrays indexed by node id (one flag byte
 * per node: seen / passed / deleted / suspended / deferred / in-repass-set /
 * mark) and an array deque of node ids, so a sweep is O(nodes + edges) with
 * no hashing; arrays grow when passes add nodes (ids are never reused within
 * a pass, so they stay valid).
 *
 *   walk(g):  on_start_graph(g) for every pass
 *             seeds = nodes without data/control in-nodes, in id order
 *                     (nodes with > 1000 in-nodes are deferred to "last")
 *             do {
 *               if something is suspended: on_suspend_nodes_leaked + resumes;
 *                 still nothing queued -> KILN_ERR_INTERNAL
 *               repass loop: do { re-pass set -> queue back;
 *                                 drain: pop, skip deleted, visit(node),
 *                                        root only: global re-pass -> front,
 *                                        ready successors -> back;
 *                                 deferred nodes whose in-nodes are seen -> back
 *                               } while re-pass list or queue non-empty
 *               nothing suspended: after-graph passes (root only)
 *             } while (suspended or queued) and visits < 10 x direct nodes
 *   visit(n): every pass's run_node in order (stop early when a pass reports n
 *             deleted); harvest requests; for each subgraph of n: walk(sub);
 *             if it had one: on_start_graph + all passes on n again with
 *             kiln_pass_after_subgraph() true.
 *
 * "Seen" means enqueued or popped (a re-pass request for a queued node is
 * absorbed).  A node is *ready* when it is live, not deleted, deferred or
 * suspended, and every data/control in-node is seen and not suspended; an
 * unseen NextIteration/RefNextIteration in-node counts as seen (While loops).
 * Harvest after a visit, per GE: re-pass requests are accepted when the
 * target is seen or all its in-nodes are; immediate requests (name order)
 * go to the queue front when the target was already passed; resumes (name
 * order) un-suspend and, if seen or all in-nodes seen, go to the back.
 * Requests act on the walk's state, so they name nodes of the walk's graph
 * (GE keeps them in the GraphLevelState of the running GEPass, where a node
 * of another graph is never seen or passed).  passctx.c refuses the others
 * when the request is made: re-pass, immediate re-pass and resume of such a
 * node are ignored with a warning, a suspend fails the walk (KILN_ERR_PARAM;
 * in GE it leaks and the walk fails with "suspended nodes leaked").  Global
 * immediate re-passes name root graph nodes and are applied by the root walk;
 * deletions may name any graph and mark the node in whichever enclosing walk
 * owns it.  After-graph hooks may name nodes of any graph.
 *
 * A walk counts itself in its graph's `walking`; removing a node that owns
 * such a graph at any depth (the While node, from a visit of its body) fails
 * instead of freeing the graph under the walk (graph.c, passctx.c).
 */
#include "gepass.h"
#include "graph_int.h"
#include "crash.h"
#include <time.h>
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#include <x86intrin.h>
#endif

enum {
    F_SEEN = 0x01,
    F_PASSED = 0x02,
    F_DELETED = 0x04,
    F_SUSPEND = 0x08,
    F_LAST = 0x10,
    F_REPASS = 0x20, /* in the re-pass set */
    F_GLOBAL = 0x40, /* root walk: in the global immediate list */
    F_MARK = 0x80    /* scratch: out-node snapshot, after-graph dedupe */
};

typedef struct idvec {
    kiln_node_id *v;
    uint32_t n, cap;
} idvec;

typedef struct refvec {
    kiln_noderef *v;
    uint32_t n, cap;
} refvec;

struct run;

typedef struct walk {
    struct run *run;
    struct walk *parent; /* walk of the parent graph, NULL for the outermost */
    kiln_graph *g;
    uint32_t depth;
    uint8_t *flags;
    uint32_t flags_cap;
    kiln_node_id *q; /* ring buffer deque */
    uint32_t qcap, qhead, qlen;
    idvec rp;   /* re-pass list (entries still in the set have F_REPASS) */
    idvec last; /* deferred nodes (F_LAST) */
    idvec snap; /* out-node snapshot of the node being visited */
    refvec tmp; /* sorting scratch */
    uint32_t nsuspend;
    uint64_t passed, max_pass;
    bool warned;
} walk;

typedef struct run {
    kiln_pass_ctx *pc;
    kiln_error *err;
    kiln_graph *root;
    const kiln_gepass_item *items;
    uint32_t count;
    bool has_after;
    bool timed;      /* some item has perf: the run is timed */
    bool split;      /* two or more timed items: their calls are timed too */
    uint32_t sample; /* calls are timed on one visit in sample + 1 (see pass_node) */
    uint32_t visits;
    uint64_t *ticks; /* per item: counter ticks of its calls (ticks()) */
    kiln_sym sym_next, sym_refnext;
    walk *root_walk;
    refvec global; /* global immediate re-pass list (root graph nodes) */
} run;

/* ---- small containers --------------------------------------------------- */

static bool id_push(idvec *v, kiln_node_id n)
{
    if (!KILN_GROW(v->v, v->cap, v->n + 1))
        return false;
    v->v[v->n++] = n;
    return true;
}

static bool ref_push(refvec *v, kiln_graph *g, kiln_node_id n)
{
    if (!KILN_GROW(v->v, v->cap, v->n + 1))
        return false;
    v->v[v->n].g = g;
    v->v[v->n].n = n;
    v->n++;
    return true;
}

/* Sort @p v by name and drop duplicates (GE's ordered sets). */
static bool ref_sort_unique(walk *w, refvec *v)
{
    if (v->n < 2)
        return true;
    if (!KILN_GROW(w->tmp.v, w->tmp.cap, v->n))
        return false;
    kiln__noderef_sort(v->v, w->tmp.v, v->n);
    uint32_t k = 1;
    for (uint32_t i = 1; i < v->n; i++)
        if (v->v[i].g != v->v[k - 1].g || v->v[i].n != v->v[k - 1].n)
            v->v[k++] = v->v[i];
    v->n = k;
    return true;
}

/* ---- walk state --------------------------------------------------------- */

/* Grow the flag array to the graph's current id limit (passes add nodes). */
static bool sync(walk *w)
{
    uint32_t need = kiln_graph_id_limit(w->g);
    if (need <= w->flags_cap)
        return true;
    uint32_t cap = w->flags_cap ? w->flags_cap : 16;
    while (cap < need)
        cap = cap * 2 > cap ? cap * 2 : need;
    uint8_t *f = kiln__realloc(w->flags, cap);
    if (!f)
        return false;
    memset(f + w->flags_cap, 0, cap - w->flags_cap);
    w->flags = f;
    w->flags_cap = cap;
    return true;
}

static bool q_reserve(walk *w)
{
    if (w->qlen < w->qcap)
        return true;
    uint32_t cap = w->qcap ? w->qcap * 2 : 64;
    kiln_node_id *q = kiln__malloc(cap * sizeof(*q));
    if (!q)
        return false;
    for (uint32_t i = 0; i < w->qlen; i++)
        q[i] = w->q[(w->qhead + i) % w->qcap];
    kiln__free(w->q);
    w->q = q;
    w->qcap = cap;
    w->qhead = 0;
    return true;
}

/* GE AddNodeToQueue (mark seen) / nodes.push_back (resume: no mark). */
static bool q_back(walk *w, kiln_node_id n, bool mark_seen)
{
    if (!q_reserve(w))
        return false;
    w->q[(w->qhead + w->qlen) % w->qcap] = n;
    w->qlen++;
    if (mark_seen)
        w->flags[n] |= F_SEEN;
    return true;
}

static bool q_front(walk *w, kiln_node_id n)
{
    if (!q_reserve(w))
        return false;
    w->qhead = (w->qhead + w->qcap - 1) % w->qcap;
    w->q[w->qhead] = n;
    w->qlen++;
    w->flags[n] |= F_SEEN;
    return true;
}

static kiln_node_id q_pop(walk *w)
{
    kiln_node_id n = w->q[w->qhead];
    w->qhead = (w->qhead + 1) % w->qcap;
    w->qlen--;
    return n;
}

static void walk_free(walk *w)
{
    kiln__free(w->flags);
    kiln__free(w->q);
    kiln__free(w->rp.v);
    kiln__free(w->last.v);
    kiln__free(w->snap.v);
    kiln__free(w->tmp.v);
}

/* ---- readiness ---------------------------------------------------------- */

static bool in_ready(const walk *w, kiln_node_id p)
{
    uint8_t f = w->flags[p];
    if (f & F_SUSPEND)
        return false;
    if (!(f & F_SEEN)) {
        kiln_sym op = w->g->nodes[p].op;
        return op && (op == w->run->sym_next || op == w->run->sym_refnext);
    }
    return true;
}

/* Every data/control in-node ready (strict = seen, GE IsAllInNodesSeen). */
static bool all_in(const walk *w, kiln_node_id n, bool strict)
{
    const kiln_graph *g = w->g;
    const knode *k = &g->nodes[n];
    for (uint32_t i = 0; i < k->nin; i++) {
        kiln_node_id p = g->in[k->in_off + i].src;
        if (p && (strict ? !(w->flags[p] & F_SEEN) : !in_ready(w, p)))
            return false;
    }
    for (uint32_t c = kiln_ctrl_in_first(g, n); c; c = kiln_ctrl_in_next(g, c)) {
        kiln_node_id p = kiln_ctrl_src(g, c);
        if (strict ? !(w->flags[p] & F_SEEN) : !in_ready(w, p))
            return false;
    }
    return true;
}

static bool ready(const walk *w, kiln_node_id n)
{
    if (!kiln__live(w->g, n) || (w->flags[n] & (F_DELETED | F_LAST | F_SUSPEND)))
        return false;
    return all_in(w, n, false);
}

/* ---- calls into passes -------------------------------------------------- */

typedef enum hook { H_START, H_LEAKED, H_FINISH } hook;

static kiln_status call_hook(run *r, const kiln_gepass_item *it, hook h, kiln_graph *g)
{
    const kiln_pass_desc *d = &it->comp->d.pass;
    kiln_pass_ctx *pc = r->pc;
    kiln_activity a = KILN_ACTIVITY(kiln__comp_plugin(it->comp), it->comp->name, pc->stage, g, 0);
    const kiln_component *saved = pc->comp;
    kiln_activity *prev = kiln__activity_enter(&a);
    pc->comp = it->comp;
    kiln_status st = KILN_OK;
    if (h == H_START && d->on_start_graph) {
        d->on_start_graph(it->inst, pc, g);
    } else if (h == H_LEAKED && d->on_suspend_nodes_leaked) {
        kiln_graph *walking = pc->walking;
        pc->walking = g;
        d->on_suspend_nodes_leaked(it->inst, pc);
        pc->walking = walking;
    } else if (h == H_FINISH && d->on_finish_graph) {
        pc->in_finish_graph = true;
        st = d->on_finish_graph(it->inst, pc, g);
        pc->in_finish_graph = false;
    }
    pc->comp = saved;
    kiln__activity_leave(prev);
    if (st != KILN_OK) {
        kiln_errorf(r->err, st, "on_finish_graph of pass %s failed (%s)", it->comp->name,
                    kiln_status_str(st));
        kiln_error_push(r->err, "pass %s", it->comp->name);
    }
    return st;
}

static void start_graph(run *r, kiln_graph *g)
{
    for (uint32_t i = 0; i < r->count; i++)
        call_hook(r, &r->items[i], H_START, g);
}

/* Timing of the calls in a run of two or more passes: on a graph of
 * KILN_GEPASS_SAMPLE_FROM nodes and more, one visit in KILN_GEPASS_SAMPLE
 * (a power of two), in visit order, else every visit. */
#define KILN_GEPASS_SAMPLE 16u
#define KILN_GEPASS_SAMPLE_FROM 16384u

/* The counter the calls are timed with: the time-stamp counter where the
 * compiler exposes it (about 25 ns a read in a VM where the vDSO clock took
 * 60), else the pass clock.  Only ratios of counts are used (share_time). */
static uint64_t ticks(void)
{
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
    return __rdtsc();
#else
    return kiln__pass_clock_ns();
#endif
}

/* Run pass @p i on node @p n.  Timing (@p t non-NULL): *@p t is the counter
 * when the call began (the end of the previous pass's call on the node), so
 * each call costs one counter read, not two. */
static kiln_status call_run_node(run *r, uint32_t i, kiln_graph *g, kiln_node_id n, uint64_t *t)
{
    const kiln_gepass_item *it = &r->items[i];
    kiln_pass_ctx *pc = r->pc;
    kiln_activity a = KILN_ACTIVITY(kiln__comp_plugin(it->comp), it->comp->name, pc->stage, g, n);
    const kiln_component *saved = pc->comp;
    kiln_activity *prev = kiln__activity_enter(&a);
    kiln_graph *walking = pc->walking;
    pc->comp = it->comp;
    pc->walking = g;
    kiln_status st = it->comp->d.pass.run_node(it->inst, pc, g, n);
    if (it->perf)
        it->perf->calls++;
    if (t) {
        uint64_t t1 = ticks();
        r->ticks[i] += t1 - *t;
        *t = t1;
    }
    pc->walking = walking;
    pc->comp = saved;
    kiln__activity_leave(prev);
    if (st != KILN_OK) {
        kiln_errorf(r->err, st, "pass %s failed on node %s (%s)", it->comp->name,
                    kiln_node_name_str(g, n), kiln_status_str(st));
        kiln_error_push(r->err, "node %s", kiln_node_name_str(g, n));
        kiln_error_push(r->err, "pass %s", it->comp->name);
    }
    return st;
}

static kiln_status nomem(run *r)
{
    return kiln_errorf(r->err, KILN_ERR_NOMEM, "GEPass: out of memory");
}

/* A request refused when it was made (passctx.c recorded why in pc->err). */
static kiln_status refused(walk *w, kiln_node_id cur)
{
    kiln_status st = w->run->pc->req_status;
    kiln_errorf(w->run->err, st, "GEPass: a pass made a request it may not make");
    if (cur)
        kiln_error_push(w->run->err, "node %s", kiln_node_name_str(w->g, cur));
    return st;
}

/* ---- harvesting requests ------------------------------------------------ */

/* Collect the requests of list @p k naming live nodes of w's graph, name-ordered. */
static bool collect_ordered(walk *w, int k, refvec *out)
{
    const kiln_reqlist *l = &w->run->pc->req[k];
    out->n = 0;
    for (uint32_t i = 0; i < l->count; i++)
        if (l->v[i].g == w->g && kiln__live(w->g, l->v[i].n) && !ref_push(out, w->g, l->v[i].n))
            return false;
    return ref_sort_unique(w, out);
}

/* GE AddResumeNodesToQueue. */
static bool apply_resumes(walk *w, const refvec *res)
{
    for (uint32_t i = 0; i < res->n; i++) {
        kiln_node_id n = res->v[i].n;
        if (!(w->flags[n] & F_SUSPEND))
            continue;
        w->flags[n] &= (uint8_t)~F_SUSPEND;
        w->nsuspend--;
        if (((w->flags[n] & F_SEEN) || all_in(w, n, true)) && !q_back(w, n, false))
            return false;
    }
    return true;
}

static void mark_deleted(walk *w, kiln_graph *g, kiln_node_id n)
{
    for (walk *o = w; o; o = o->parent) {
        if (o->g == g) {
            if (sync(o) && n < o->flags_cap)
                o->flags[n] |= F_DELETED;
            return;
        }
    }
}

/* Everything GE does after the passes ran on one node (RunPassesOnNode tail). */
static kiln_status harvest(walk *w, kiln_node_id cur)
{
    run *r = w->run;
    kiln_pass_ctx *pc = r->pc;
    if (pc->oom || !sync(w))
        return nomem(r);
    if (pc->req_status != KILN_OK)
        return refused(w, cur);
    w->flags[cur] |= F_PASSED;
    const kiln_reqlist *l = &pc->req[KILN_REQ_REPASS];
    for (uint32_t i = 0; i < l->count; i++) {
        kiln_node_id n = l->v[i].n;
        if (l->v[i].g != w->g || !kiln__live(w->g, n) || (w->flags[n] & F_REPASS))
            continue;
        if ((w->flags[n] & F_SEEN) || all_in(w, n, true)) {
            if (!id_push(&w->rp, n))
                return nomem(r);
            w->flags[n] |= F_REPASS;
        }
    }
    l = &pc->req[KILN_REQ_SUSPEND];
    for (uint32_t i = 0; i < l->count; i++) {
        kiln_node_id n = l->v[i].n;
        if (l->v[i].g == w->g && !(w->flags[n] & F_SUSPEND)) {
            w->flags[n] |= F_SUSPEND;
            w->nsuspend++;
        }
    }
    l = &pc->req[KILN_REQ_DELETED];
    for (uint32_t i = 0; i < l->count; i++)
        mark_deleted(w, l->v[i].g, l->v[i].n);
    l = &pc->req[KILN_REQ_GLOBAL];
    walk *rw = r->root_walk;
    for (uint32_t i = 0; i < l->count; i++) {
        kiln_node_id n = l->v[i].n;
        if (l->v[i].g != rw->g || !sync(rw) || (rw->flags[n] & F_GLOBAL))
            continue;
        if (!ref_push(&r->global, rw->g, n))
            return nomem(r);
        rw->flags[n] |= F_GLOBAL;
    }
    refvec imm = {0}, res = {0};
    kiln_status st = KILN_OK;
    if (!collect_ordered(w, KILN_REQ_IMMEDIATE, &imm) ||
        !collect_ordered(w, KILN_REQ_RESUME, &res)) {
        st = nomem(r);
        goto done;
    }
    kiln__passctx_clear_requests(pc);
    for (uint32_t i = 0; i < imm.n; i++)
        if ((w->flags[imm.v[i].n] & F_PASSED) && !q_front(w, imm.v[i].n)) {
            st = nomem(r);
            goto done;
        }
    if (!apply_resumes(w, &res))
        st = nomem(r);
done:
    kiln__free(imm.v);
    kiln__free(res.v);
    return st;
}

/* GE RunPassesOnNode: every pass once on @p n, then harvest. */
static kiln_status pass_node(walk *w, kiln_node_id n)
{
    run *r = w->run;
    kiln_pass_ctx *pc = r->pc;
    kiln__passctx_clear_requests(pc);
    /* The run's time is split among its passes by the counter ticks of their
     * calls (share_time): only the ratios matter, so on a large graph one
     * visit in KILN_GEPASS_SAMPLE is timed (a counter read costs about 25 ns
     * in a VM, as much as a no-op call), and a run of one timed pass needs
     * no split at all. */
    bool tm = r->split && (r->visits++ & r->sample) == 0;
    uint64_t t = tm ? ticks() : 0;
    for (uint32_t i = 0; i < r->count; i++) {
        if (!kiln__live(w->g, n))
            break; /* removed by an earlier pass of this visit */
        uint32_t ndel = pc->req[KILN_REQ_DELETED].count;
        kiln_status st = call_run_node(r, i, w->g, n, tm ? &t : NULL);
        if (st != KILN_OK)
            return st;
        bool self_deleted = false;
        for (uint32_t k = ndel; k < pc->req[KILN_REQ_DELETED].count; k++)
            if (pc->req[KILN_REQ_DELETED].v[k].g == w->g && pc->req[KILN_REQ_DELETED].v[k].n == n)
                self_deleted = true;
        if (self_deleted)
            break;
    }
    return harvest(w, n);
}

static kiln_status walk_graph(run *r, walk *parent, kiln_graph *g, uint32_t depth);

/* GE RunPassesNodeOnce: passes, subgraphs, second visit, count the visit. */
static kiln_status visit(walk *w, kiln_node_id n)
{
    run *r = w->run;
    kiln_status st = pass_node(w, n);
    if (st != KILN_OK)
        return st;
    bool has_sub = false;
    for (uint32_t i = 0; i < kiln_node_subgraph_count(w->g, n); i++) {
        kiln_graph *sg = kiln_node_subgraph(w->g, n, i, NULL);
        if (!sg)
            continue;
        has_sub = true;
        st = walk_graph(r, w, sg, w->depth + 1);
        if (st != KILN_OK) {
            kiln_error_push(r->err, "subgraph %s of node %s", kiln_graph_name(sg),
                            kiln_node_name_str(w->g, n));
            return st;
        }
    }
    if (has_sub) {
        start_graph(r, w->g);
        r->pc->after_subgraph = true;
        st = pass_node(w, n);
        r->pc->after_subgraph = false;
        if (st != KILN_OK)
            return st;
    }
    w->passed++;
    return KILN_OK;
}

/* ---- successors, deferred nodes, leaks, after-graph passes -------------- */

static bool snapshot_out(walk *w, kiln_node_id n)
{
    kiln_graph *g = w->g;
    w->snap.n = 0;
    uint32_t nout = g->nodes[n].nout;
    for (uint32_t o = 0; o < nout; o++)
        for (uint32_t c = kiln_use_first(g, n, o); c; c = kiln_use_next(g, c)) {
            kiln_node_id d = kiln_use_dst(g, c).node;
            if (!(w->flags[d] & F_MARK)) {
                w->flags[d] |= F_MARK;
                if (!id_push(&w->snap, d))
                    return false;
            }
        }
    for (uint32_t c = kiln_ctrl_out_first(g, n); c; c = kiln_ctrl_out_next(g, c)) {
        kiln_node_id d = kiln_ctrl_dst(g, c);
        if (!(w->flags[d] & F_MARK)) {
            w->flags[d] |= F_MARK;
            if (!id_push(&w->snap, d))
                return false;
        }
    }
    return true;
}

static bool try_enqueue(walk *w, kiln_node_id d)
{
    if (!(w->flags[d] & F_SEEN) && ready(w, d))
        return q_back(w, d, true);
    return true;
}

/* GE AddNextIterNodes: current out-nodes (data, then control), then the
 * snapshot nodes that are no longer successors, in name order. */
static bool next_nodes(walk *w, kiln_node_id n)
{
    kiln_graph *g = w->g;
    if (kiln__live(g, n)) {
        uint32_t nout = g->nodes[n].nout;
        for (uint32_t o = 0; o < nout; o++)
            for (uint32_t c = kiln_use_first(g, n, o); c; c = kiln_use_next(g, c)) {
                kiln_node_id d = kiln_use_dst(g, c).node;
                w->flags[d] &= (uint8_t)~F_MARK;
                if (!try_enqueue(w, d))
                    return false;
            }
        for (uint32_t c = kiln_ctrl_out_first(g, n); c; c = kiln_ctrl_out_next(g, c)) {
            kiln_node_id d = kiln_ctrl_dst(g, c);
            w->flags[d] &= (uint8_t)~F_MARK;
            if (!try_enqueue(w, d))
                return false;
        }
    }
    refvec lost = {0};
    bool ok = true;
    for (uint32_t i = 0; i < w->snap.n; i++) {
        kiln_node_id d = w->snap.v[i];
        if (w->flags[d] & F_MARK) {
            w->flags[d] &= (uint8_t)~F_MARK;
            if (kiln__live(g, d) && !ref_push(&lost, g, d))
                ok = false;
        }
    }
    ok = ok && ref_sort_unique(w, &lost);
    for (uint32_t i = 0; ok && i < lost.n; i++)
        ok = try_enqueue(w, lost.v[i].n);
    kiln__free(lost.v);
    return ok;
}

/* GE AddLastNodesToQueue (name order). */
static bool add_last(walk *w)
{
    if (!w->last.n)
        return true;
    refvec v = {0};
    bool ok = true;
    for (uint32_t i = 0; i < w->last.n; i++) {
        w->flags[w->last.v[i]] &= (uint8_t)~F_LAST;
        if (kiln__live(w->g, w->last.v[i]) && !ref_push(&v, w->g, w->last.v[i]))
            ok = false;
    }
    w->last.n = 0;
    ok = ok && ref_sort_unique(w, &v);
    for (uint32_t i = 0; ok && i < v.n; i++)
        if (all_in(w, v.v[i].n, true) && !(w->flags[v.v[i].n] & F_SEEN))
            ok = q_back(w, v.v[i].n, true);
    kiln__free(v.v);
    return ok;
}

/* GE HandleLeakedSuspendNodes. */
static kiln_status leaked(walk *w)
{
    run *r = w->run;
    refvec res = {0}, all = {0};
    kiln_status st = KILN_OK;
    for (uint32_t i = 0; i < r->count; i++) {
        kiln__passctx_clear_requests(r->pc);
        call_hook(r, &r->items[i], H_LEAKED, w->g);
        if (r->pc->req_status != KILN_OK) {
            st = refused(w, 0);
            goto done;
        }
        if (r->pc->oom || !sync(w) || !collect_ordered(w, KILN_REQ_RESUME, &res)) {
            st = nomem(r);
            goto done;
        }
        for (uint32_t k = 0; k < res.n; k++)
            if (!ref_push(&all, res.v[k].g, res.v[k].n)) {
                st = nomem(r);
                goto done;
            }
    }
    kiln__passctx_clear_requests(r->pc);
    if (!ref_sort_unique(w, &all) || !apply_resumes(w, &all))
        st = nomem(r);
done:
    kiln__free(res.v);
    kiln__free(all.v);
    return st;
}

static bool graph_alive(const run *r, const kiln_graph *g)
{
    if (g == r->root)
        return true;
    for (uint32_t i = 0; i < r->root->nsubgraphs; i++)
        if (r->root->subgraphs[i] == g)
            return true;
    return false;
}

/* GE RunPassesAfterFinishGraph: only on the outermost graph when it has no parent. */
static kiln_status after_graph(walk *w)
{
    run *r = w->run;
    kiln_pass_ctx *pc = r->pc;
    if (!r->has_after || w->parent || kiln_graph_parent(w->g))
        return KILN_OK;
    refvec out = {0};
    kiln_status st = KILN_OK;
    for (uint32_t i = 0; i < r->count; i++) {
        const kiln_gepass_item *it = &r->items[i];
        if (!(it->comp->d.pass.flags & KILN_PASS_AFTER_GRAPH))
            continue;
        kiln__passctx_clear_requests(pc);
        st = call_hook(r, it, H_FINISH, w->g);
        if (st != KILN_OK)
            goto done;
        if (pc->oom || !sync(w)) {
            st = nomem(r);
            goto done;
        }
        const kiln_reqlist *l = &pc->req[KILN_REQ_DELETED];
        for (uint32_t k = 0; k < l->count; k++)
            mark_deleted(w, l->v[k].g, l->v[k].n);
        for (int kind = KILN_REQ_REPASS; kind <= KILN_REQ_IMMEDIATE; kind++) {
            l = &pc->req[kind];
            for (uint32_t k = 0; k < l->count; k++)
                if (!ref_push(&out, l->v[k].g, l->v[k].n)) {
                    st = nomem(r);
                    goto done;
                }
        }
    }
    kiln__passctx_clear_requests(pc);
    /* Map each node to its top-level ancestor on the root (GetParentNodeOnRootGraph).
     * A graph freed by a removal in the hook (its owner was deleted) is skipped. */
    uint32_t k = 0;
    for (uint32_t i = 0; i < out.n; i++) {
        kiln_graph *g = out.v[i].g;
        kiln_node_id n = out.v[i].n;
        if (!graph_alive(r, g))
            continue;
        while (g->parent) {
            n = g->parent_node;
            g = g->parent;
        }
        if (g != w->g || (w->flags[n] & F_MARK))
            continue;
        w->flags[n] |= F_MARK;
        out.v[k++].n = n;
    }
    for (uint32_t i = 0; i < k; i++) {
        w->flags[out.v[i].n] &= (uint8_t)~F_MARK;
        if (!q_back(w, out.v[i].n, true)) {
            st = nomem(r);
            goto done;
        }
    }
done:
    kiln__passctx_clear_requests(pc);
    kiln__free(out.v);
    return st;
}

/* ---- the loops ---------------------------------------------------------- */

static void limit_warning(walk *w)
{
    if (w->warned)
        return;
    w->warned = true;
    if (w->run->pc->ctx && w->run->pc->ctx->verbosity < -1)
        return; /* -q: errors only */
    FILE *log = kiln__passctx_log(w->run->pc);
    fprintf(log,
            "kiln: warning: GEPass: graph %s: stopped after %llu node visits "
            "(limit %u x %u direct nodes)\n",
            kiln_graph_name(w->g), (unsigned long long)w->passed, KILN_GEPASS_MAX_PASS_MULTIPLE,
            (unsigned)(w->max_pass / KILN_GEPASS_MAX_PASS_MULTIPLE));
}

static void rp_clear(walk *w)
{
    for (uint32_t i = 0; i < w->rp.n; i++)
        w->flags[w->rp.v[i]] &= (uint8_t)~F_REPASS;
    w->rp.n = 0;
}

/* GE RunPassesGraphRepass. */
static kiln_status repass_loop(walk *w)
{
    run *r = w->run;
    kiln_status st = KILN_OK;
    rp_clear(w);
    do {
        for (uint32_t i = 0; i < w->rp.n; i++)
            if ((w->flags[w->rp.v[i]] & F_REPASS) && !q_back(w, w->rp.v[i], true))
                return nomem(r);
        rp_clear(w);
        while (w->qlen && w->passed < w->max_pass) {
            kiln_node_id n = q_pop(w);
            if ((w->flags[n] & F_DELETED) || !kiln__live(w->g, n))
                continue;
            w->flags[n] &= (uint8_t)~F_REPASS;
            w->flags[n] |= F_SEEN;
            if (!snapshot_out(w, n))
                return nomem(r);
            st = visit(w, n);
            if (st != KILN_OK)
                return st;
            if (!sync(w))
                return nomem(r);
            if (w == r->root_walk && r->global.n) {
                for (uint32_t i = 0; i < r->global.n; i++) {
                    kiln_node_id m = r->global.v[i].n;
                    w->flags[m] &= (uint8_t)~F_GLOBAL;
                    if (ready(w, m) && !q_front(w, m))
                        return nomem(r);
                }
                r->global.n = 0;
            }
            if (!next_nodes(w, n))
                return nomem(r);
        }
        if (!add_last(w))
            return nomem(r);
    } while ((w->rp.n || w->qlen) && w->passed < w->max_pass);
    if (w->passed >= w->max_pass)
        limit_warning(w);
    rp_clear(w);
    return KILN_OK;
}

/* GE RunPassesOneGraph (a nested GEPass for subgraphs). */
static kiln_status walk_graph(run *r, walk *parent, kiln_graph *g, uint32_t depth)
{
    if (depth > KILN_GEPASS_MAX_DEPTH)
        return kiln_errorf(r->err, KILN_ERR_PARAM,
                           "GEPass: graph %s is nested %u levels deep (at most %d)",
                           kiln_graph_name(g), depth, KILN_GEPASS_MAX_DEPTH);
    walk w = {0};
    w.run = r;
    w.parent = parent;
    w.g = g;
    w.depth = depth;
    if (!parent)
        r->root_walk = &w;
    g->walking++;
    kiln_status st = KILN_OK;
    start_graph(r, g);
    if (!sync(&w)) {
        st = nomem(r);
        goto done;
    }
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n)) {
        uint32_t nin = 0;
        const knode *k = &g->nodes[n];
        for (uint32_t i = 0; i < k->nin; i++)
            nin += g->in[k->in_off + i].src != 0;
        nin += kiln_node_ctrl_in_count(g, n);
        bool ok = true;
        if (nin == 0 && !(w.flags[n] & F_SEEN))
            ok = q_back(&w, n, true);
        else if (nin > KILN_GEPASS_MAX_ONE_IN_NODES) {
            w.flags[n] |= F_LAST;
            ok = id_push(&w.last, n);
        }
        if (!ok) {
            st = nomem(r);
            goto done;
        }
    }
    w.max_pass = (uint64_t)kiln_graph_node_count(g) * KILN_GEPASS_MAX_PASS_MULTIPLE;
    do {
        if (w.nsuspend) {
            st = leaked(&w);
            if (st != KILN_OK)
                goto done;
            if (!w.qlen) {
                st = kiln_errorf(r->err, KILN_ERR_INTERNAL,
                                 "GEPass: graph %s: %u suspended node(s) leaked and no pass "
                                 "resumed them",
                                 kiln_graph_name(g), w.nsuspend);
                goto done;
            }
        }
        st = repass_loop(&w);
        if (st != KILN_OK)
            goto done;
        if (!w.nsuspend) {
            st = after_graph(&w);
            if (st != KILN_OK)
                goto done;
        }
    } while ((w.nsuspend || w.qlen) && w.passed < w.max_pass);
done:
    g->walking--;
    if (!parent)
        r->root_walk = NULL;
    walk_free(&w);
    return st;
}

/* ---- entry -------------------------------------------------------------- */

/* Split the run's time @p total (pass clock) among the timed items by the
 * ticks of their calls (evenly when the counter did not move). */
static void share_time(run *r, uint64_t total)
{
    uint64_t sum = 0;
    uint32_t ntimed = 0;
    for (uint32_t i = 0; i < r->count; i++)
        if (r->items[i].perf) {
            sum += r->ticks[i];
            ntimed++;
        }
    uint64_t left = total;
    for (uint32_t i = 0, k = 0; i < r->count; i++) {
        kiln_pass_perf *p = r->items[i].perf;
        if (!p)
            continue;
        uint64_t ns = ++k == ntimed ? left
                      : sum        ? (uint64_t)((double)total * (double)r->ticks[i] / (double)sum)
                                   : total / ntimed;
        if (ns > left)
            ns = left;
        p->wall_ns += ns;
        left -= ns;
    }
}

kiln_status kiln__gepass_run(kiln_pass_ctx *pc, kiln_graph *root, const kiln_gepass_item *items,
                             uint32_t count, kiln_error *err)
{
    if (!pc || !root)
        return kiln_errorf(err, KILN_ERR_INTERNAL, "GEPass: no graph");
    if (!count || !items)
        return kiln_errorf(err, KILN_ERR_INTERNAL, "GEPass: no passes to run");
    for (uint32_t i = 0; i < count; i++)
        if (!items[i].comp || items[i].comp->kind != KILN_COMP_PASS ||
            !items[i].comp->d.pass.run_node)
            return kiln_errorf(err, KILN_ERR_INTERNAL, "GEPass: entry %u is not a node pass", i);
    kiln_gepass_item *kept = kiln__malloc(count * sizeof(*kept));
    uint64_t *tick_sum = kiln__calloc(count, sizeof(*tick_sum));
    if (!kept || !tick_sum) {
        kiln__free(kept);
        kiln__free(tick_sum);
        return kiln_errorf(err, KILN_ERR_NOMEM, "GEPass: out of memory");
    }
    run r = {0};
    uint32_t ntimed = 0; /* kept items with perf */
    r.pc = pc;
    r.err = err;
    r.root = root;
    r.items = kept;
    r.ticks = tick_sum;
    for (uint32_t i = 0; i < count; i++) {
        if (kiln__pass_disabled(pc, items[i].comp->name)) {
            kiln_diag(pc, KILN_SEV_INFO, "pass %s is disabled, skipping it", items[i].comp->name);
            continue;
        }
        kept[r.count++] = items[i];
        ntimed += items[i].perf != NULL;
        if (items[i].comp->d.pass.flags & KILN_PASS_AFTER_GRAPH)
            r.has_after = true;
    }
    r.timed = ntimed > 0;
    r.split = ntimed > 1;
    r.sample = kiln_graph_node_count(root) >= KILN_GEPASS_SAMPLE_FROM ? KILN_GEPASS_SAMPLE - 1 : 0;
    kiln_status st = KILN_OK;
    uint64_t t0 = r.timed ? kiln__pass_clock_ns() : 0;
    if (r.count) {
        r.sym_next = kiln_sym_lookup(root, "NextIteration");
        r.sym_refnext = kiln_sym_lookup(root, "RefNextIteration");
        kiln__passctx_clear_requests(pc);
        st = walk_graph(&r, NULL, root, 1);
        kiln__passctx_clear_requests(pc);
        pc->after_subgraph = false;
    }
    if (r.timed)
        share_time(&r, kiln__pass_clock_ns() - t0);
    kiln__free(r.global.v);
    kiln__free(kept);
    kiln__free(tick_sum);
    return st;
}

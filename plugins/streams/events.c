/*
 * events.c - events between streams (GE StreamAllocator: InsertSyncEvents,
 * OptimizeSyncEvents, SplitStreams, RefreshContinuousEvents, ReuseEvent;
 * GE_SEMANTICS_BUILD.md 3.2; docs/streams.md).
 *
 * 1. One event per pair (producer, consumer) of a data or control edge whose
 *    ends are on different streams.  A producer without a stream (a node with
 *    no task) is looked through: its own producers on a stream are what the
 *    consumer must wait for.
 * 2. GE's OptimizeBySendEvents (a sender that already signalled an earlier
 *    node of the receiving stream: the later event goes) and
 *    OptimizeByRecvEvents (a receiver waiting for two senders of one stream:
 *    the earlier goes), option ge_event_opt.
 * 3. kiln's exact removal, option reduce_events: in the global order, a
 *    receiver keeps an event only when its sender does not already happen
 *    before it through stream order and the events kept so far (vector
 *    clocks); senders are tried latest first, so one kept event covers the
 *    earlier ones.  Every event GE's two rules remove is removed here too.
 * 4. SplitStreams: a stream whose task count (node tasks, `_kiln_task_num`,
 *    default 1, plus one per event wait) would pass max_task - 27 continues on
 *    a new stream, joined to the previous part by one event.
 * 5. RefreshContinuousEvents, then reuse: events e1, e2 may share an id when
 *    e1's receiver happens before e2's sender (a wait pairs with the latest
 *    record of its id at an earlier step, core/schedule.c).  This order is
 *    transitive, so the fewest ids is the minimum chain cover (Dilworth),
 *    found exactly by a maximum bipartite matching (Hopcroft-Karp) up to
 *    SA_EXACT_REUSE events, greedily beyond.  The lower bound printed is the
 *    largest number of events outstanding at one step of the global order
 *    (pairwise overlapping events are pairwise incomparable: an antichain).
 *
 * Complexity: O(edges) for 1 and 2 (plus the look-through of stream-less
 * nodes), O(nodes x streams) for the clocks, O(E^2) pairs and
 * O(E^2.5) worst case for the exact reuse (E = events).
 */
#include "streams.h"

#include <stdlib.h>
#include <string.h>

#define SA_EXACT_REUSE 3000u
/* Past this many nodes x streams, no exact removal, and past this many nodes x
 * streams after splitting no reuse (whose clocks take only nodes x logical
 * streams words: the limit stays as it was, so the ids do not change). */
#define SA_CLOCK_WORDS (16u << 20)

static kiln_status add_event(sa_state *st, kiln_node_id s, kiln_node_id r)
{
    if (st->nev == st->evcap) {
        uint32_t c = st->evcap ? 2 * st->evcap : 64;
        sa_event *p = realloc(st->ev, c * sizeof(sa_event));
        if (!p)
            return sa_nomem(st);
        st->ev = p, st->evcap = c;
    }
    st->ev[st->nev++] = (sa_event){s, r, false};
    return KILN_OK;
}

/* Producers on a stream that node @p v waits for, looking through stream-less nodes. */
static kiln_status effective_producers(sa_state *st, kiln_node_id v, uint32_t *stamp,
                                       uint32_t epoch, kiln_node_id *stack, uint32_t first_ev)
{
    uint32_t sp = 0;
    for (uint32_t k = st->in_start[v]; k < st->in_start[v + 1]; k++) {
        kiln_node_id u = st->in_adj[k];
        if (stamp[u] != epoch)
            stamp[u] = epoch, stack[sp++] = u;
        while (sp) {
            kiln_node_id w = stack[--sp];
            if (st->stream[w] >= 0) {
                if (st->stream[w] != st->stream[v]) {
                    bool dup = false;
                    for (uint32_t e = first_ev; e < st->nev && !dup; e++)
                        dup = st->ev[e].sender == w;
                    if (!dup && add_event(st, w, v) != KILN_OK)
                        return KILN_ERR_NOMEM;
                }
                continue;
            }
            for (uint32_t j = st->in_start[w]; j < st->in_start[w + 1]; j++)
                if (stamp[st->in_adj[j]] != epoch)
                    stamp[st->in_adj[j]] = epoch, stack[sp++] = st->in_adj[j];
        }
    }
    return KILN_OK;
}

void sa_ev_index_free(sa_ev_index *x)
{
    free(x->rs), free(x->ra), free(x->ss), free(x->sa);
    memset(x, 0, sizeof(*x));
}

kiln_status sa_ev_index_build(sa_state *st, sa_ev_index *x)
{
    x->rs = calloc(st->limit + 2, sizeof(uint32_t));
    x->ss = calloc(st->limit + 2, sizeof(uint32_t));
    x->ra = malloc((st->nev + 1) * sizeof(uint32_t));
    x->sa = malloc((st->nev + 1) * sizeof(uint32_t));
    if (!x->rs || !x->ss || !x->ra || !x->sa) {
        sa_ev_index_free(x);
        return sa_nomem(st);
    }
    for (uint32_t e = 0; e < st->nev; e++)
        x->rs[st->ev[e].receiver + 1]++, x->ss[st->ev[e].sender + 1]++;
    for (uint32_t v = 0; v < st->limit; v++)
        x->rs[v + 1] += x->rs[v], x->ss[v + 1] += x->ss[v];
    /* fill with rs[v] / ss[v] as v's cursor, which ends at v + 1's start */
    for (uint32_t e = 0; e < st->nev; e++)
        x->ra[x->rs[st->ev[e].receiver]++] = e, x->sa[x->ss[st->ev[e].sender]++] = e;
    for (uint32_t v = st->limit; v > 0; v--)
        x->rs[v] = x->rs[v - 1], x->ss[v] = x->ss[v - 1];
    x->rs[0] = x->ss[0] = 0;
    return KILN_OK;
}

/* Positions of the nodes in their chains @p chain (by node, -1 none; @p nchains). */
static kiln_status stream_positions(sa_state *st, const int32_t *chain, uint32_t **spos_out,
                                    uint32_t nchains)
{
    uint32_t *spos = calloc(st->limit + 1, sizeof(uint32_t));
    uint32_t *len = calloc(nchains + 1, sizeof(uint32_t));
    if (!spos || !len) {
        free(spos), free(len);
        return sa_nomem(st);
    }
    for (uint32_t i = 0; i < st->n; i++) {
        kiln_node_id v = st->order[i];
        if (chain[v] >= 0)
            spos[v] = len[chain[v]]++;
    }
    free(len);
    *spos_out = spos;
    return KILN_OK;
}

/* The nodes of each stream in global order (CSR over @p ns streams, of st->stream). */
static kiln_status stream_members(sa_state *st, uint32_t ns, uint32_t **start, kiln_node_id **mem)
{
    uint32_t *ms = calloc(ns + 2, sizeof(uint32_t));
    kiln_node_id *m = malloc(((size_t)st->n + 1) * sizeof(kiln_node_id));
    if (!ms || !m) {
        free(ms), free(m);
        return sa_nomem(st);
    }
    for (uint32_t i = 0; i < st->n; i++)
        if (st->stream[st->order[i]] >= 0)
            ms[st->stream[st->order[i]] + 1]++;
    for (uint32_t s = 0; s < ns; s++)
        ms[s + 1] += ms[s];
    uint32_t *fill = malloc((ns + 1) * sizeof(uint32_t));
    if (!fill) {
        free(ms), free(m);
        return sa_nomem(st);
    }
    memcpy(fill, ms, (ns + 1) * sizeof(uint32_t));
    for (uint32_t i = 0; i < st->n; i++)
        if (st->stream[st->order[i]] >= 0)
            m[fill[st->stream[st->order[i]]]++] = st->order[i];
    free(fill);
    *start = ms;
    *mem = m;
    return KILN_OK;
}

/* ---- GE's two optimisations -------------------------------------------- */

static kiln_status ge_optimize(sa_state *st)
{
    sa_ev_index x = {0};
    kiln_status rc = sa_ev_index_build(st, &x);
    if (rc != KILN_OK)
        return rc;
    uint32_t *mark = malloc((st->limit + 1) * sizeof(uint32_t)); /* stream, UINT32_MAX none */
    uint32_t *last = malloc((st->limit + 1) * sizeof(uint32_t));
    uint32_t *ms = NULL;
    kiln_node_id *mem = NULL;
    if (!mark || !last || stream_members(st, st->nstreams, &ms, &mem) != KILN_OK) {
        free(mark), free(last), sa_ev_index_free(&x);
        return sa_nomem(st);
    }
    /* OptimizeBySendEvents: per stream, keep a sender's first event into it. */
    memset(mark, 0xff, (st->limit + 1) * sizeof(uint32_t));
    for (uint32_t s = 0; s < st->nstreams; s++)
        for (uint32_t i = ms[s]; i < ms[s + 1]; i++) {
            kiln_node_id r = mem[i];
            for (uint32_t k = x.rs[r]; k < x.rs[r + 1]; k++) {
                sa_event *e = &st->ev[x.ra[k]];
                if (e->dead)
                    continue;
                if (mark[e->sender] == s) {
                    e->dead = true;
                    st->ge_removed++;
                } else {
                    mark[e->sender] = s;
                }
            }
        }
    /* OptimizeByRecvEvents: per stream, a receiver keeps the latest sender's event. */
    memset(mark, 0xff, (st->limit + 1) * sizeof(uint32_t));
    for (uint32_t s = 0; s < st->nstreams; s++)
        for (uint32_t i = ms[s]; i < ms[s + 1]; i++) {
            kiln_node_id snd = mem[i];
            for (uint32_t k = x.ss[snd]; k < x.ss[snd + 1]; k++) {
                sa_event *e = &st->ev[x.sa[k]];
                if (e->dead)
                    continue;
                if (mark[e->receiver] == s && !st->ev[last[e->receiver]].dead) {
                    st->ev[last[e->receiver]].dead = true;
                    st->ge_removed++;
                }
                mark[e->receiver] = s;
                last[e->receiver] = x.sa[k];
            }
        }
    free(mark), free(last), free(ms), free(mem);
    sa_ev_index_free(&x);
    return KILN_OK;
}

/* ---- vector clocks ---------------------------------------------------------- */

/*
 * clock[v * S + t] = 1 + the position on chain t of the latest node of chain
 * t that happens before or is v (0: none), over the live events.  A chain is
 * a stream (@p chain = st->stream), or after SplitStreams a logical stream
 * (@p chain = st->logic): its parts run one after the other, each part's
 * first node waiting for the previous part's last, so happens-before is the
 * same on S = the logical streams' words per node.  When @p prune is set,
 * events whose sender is already covered are killed first.
 */
static kiln_status clocks(sa_state *st, const int32_t *chain, uint32_t S, bool prune,
                          uint32_t **out, uint32_t **spos_out)
{
    uint32_t *spos = NULL;
    kiln_status rc = stream_positions(st, chain, &spos, S);
    if (rc != KILN_OK)
        return rc;
    sa_ev_index x = {0};
    rc = sa_ev_index_build(st, &x);
    uint32_t *clk = rc == KILN_OK ? calloc((size_t)(st->limit + 1) * (S ? S : 1), sizeof(uint32_t)) : NULL;
    kiln_node_id *prev = calloc(S + 1, sizeof(kiln_node_id));
    uint32_t *tmp = malloc((st->nev + 1) * sizeof(uint32_t));
    if (!clk || !prev || !tmp) {
        free(spos), free(clk), free(prev), free(tmp), sa_ev_index_free(&x);
        return rc == KILN_OK ? sa_nomem(st) : rc;
    }
    for (uint32_t i = 0; i < st->n; i++) {
        kiln_node_id v = st->order[i];
        int32_t s = chain[v];
        if (s < 0)
            continue;
        uint32_t *c = clk + (size_t)v * S;
        if (prev[s])
            memcpy(c, clk + (size_t)prev[s] * S, S * sizeof(uint32_t));
        c[s] = spos[v] + 1;
        prev[s] = v;
        /* receivers' events, latest sender first */
        uint32_t m = 0;
        for (uint32_t k = x.rs[v]; k < x.rs[v + 1]; k++)
            if (!st->ev[x.ra[k]].dead)
                tmp[m++] = x.ra[k];
        for (uint32_t a = 1; a < m; a++) { /* insertion sort: few events per node */
            uint32_t e = tmp[a], b = a;
            while (b > 0 && st->pos[st->ev[tmp[b - 1]].sender] < st->pos[st->ev[e].sender]) {
                tmp[b] = tmp[b - 1];
                b--;
            }
            tmp[b] = e;
        }
        for (uint32_t a = 0; a < m; a++) {
            sa_event *e = &st->ev[tmp[a]];
            kiln_node_id u = e->sender;
            if (prune && c[chain[u]] >= spos[u] + 1) {
                e->dead = true;
                st->kiln_removed++;
                continue;
            }
            const uint32_t *cu = clk + (size_t)u * S;
            for (uint32_t t = 0; t < S; t++)
                if (cu[t] > c[t])
                    c[t] = cu[t];
        }
    }
    free(prev), free(tmp);
    sa_ev_index_free(&x);
    if (out)
        *out = clk;
    else
        free(clk);
    if (spos_out)
        *spos_out = spos;
    else
        free(spos);
    return KILN_OK;
}

kiln_status sa_make_events(sa_state *st)
{
    uint32_t *stamp = calloc(st->limit + 1, sizeof(uint32_t));
    kiln_node_id *stack = malloc((st->limit + 1) * sizeof(kiln_node_id));
    if (!stamp || !stack) {
        free(stamp), free(stack);
        return sa_nomem(st);
    }
    kiln_status rc = KILN_OK;
    uint32_t epoch = 0;
    for (uint32_t i = 0; i < st->n && rc == KILN_OK; i++) {
        kiln_node_id v = st->order[i];
        if (st->stream[v] < 0)
            continue;
        rc = effective_producers(st, v, stamp, ++epoch, stack, st->nev);
    }
    free(stamp), free(stack);
    /* the last use of the adjacency: its memory serves the steps after */
    free(st->in_start), free(st->in_adj), free(st->out_start), free(st->out_adj);
    st->in_start = st->in_adj = st->out_start = st->out_adj = NULL;
    if (rc != KILN_OK)
        return rc;
    kiln_pass_stat_add(st->ctx, "events_inserted", st->nev);
    if (st->o->ge_event_opt && (rc = ge_optimize(st)) != KILN_OK)
        return rc;
    /* the clocks need O(nodes x streams) words: skip the exact pass past 16M (64 MB) */
    if (st->o->reduce_events && (uint64_t)st->limit * st->nstreams <= SA_CLOCK_WORDS)
        rc = clocks(st, st->stream, st->nstreams, true, NULL, NULL);
    kiln_pass_stat_add(st->ctx, "events_removed_ge", st->ge_removed);
    kiln_pass_stat_add(st->ctx, "events_removed_kiln", st->kiln_removed);
    return rc;
}

/* ---- SplitStreams ------------------------------------------------------------- */

static int64_t node_tasks(sa_state *st, kiln_node_id v, const uint32_t *recv_count)
{
    int64_t t = 1;
    if (st->nm.task_num)
        (void)kiln_attrs_get_int(kiln_node_attrs(st->g, v), SA_ATTR_TASK_NUM, &t);
    return (t < 0 ? 0 : t) + recv_count[v];
}

static bool no_split_at(sa_state *st, kiln_node_id v)
{
    const char *op = kiln_node_op_str(st->g, v);
    return kiln_node_subgraph_count(st->g, v) > 0 ||
           kiln_attrs_has(kiln_node_attrs(st->g, v), "_subgraph_first_active") ||
           strcmp(op, "LabelSet") == 0 || strcmp(op, "LabelGotoEx") == 0 ||
           strcmp(op, "LabelSwitchByIndex") == 0;
}

kiln_status sa_split_streams(sa_state *st)
{
    uint32_t L = st->nstreams;
    st->nlogical = L;
    int64_t max_task = st->o->max_task;
    if (max_task == 0) {
        const char *ss = kiln_pass_session_option(st->ctx, "ge.enableSingleStream");
        max_task = ss && strcmp(ss, "true") == 0 ? 8192 : 1024;
    }
    for (uint32_t i = 0; i < st->n; i++)
        st->logic[st->order[i]] = st->stream[st->order[i]];
    if (L == 0)
        return KILN_OK;
    uint32_t *recv_count = calloc(st->limit + 1, sizeof(uint32_t));
    uint32_t *ms = NULL;
    kiln_node_id *all = NULL;
    if (!recv_count || stream_members(st, L, &ms, &all) != KILN_OK) {
        free(recv_count);
        return sa_nomem(st);
    }
    for (uint32_t e = 0; e < st->nev; e++)
        if (!st->ev[e].dead)
            recv_count[st->ev[e].receiver]++;
    kiln_status rc = KILN_OK;
    for (uint32_t s = 0; s < L && rc == KILN_OK; s++) {
        kiln_node_id *members = all + ms[s];
        uint32_t m = ms[s + 1] - ms[s];
        int64_t count = 0, part = s, prev_part = s;
        uint32_t first = 0; /* index in members of the part's first node */
        for (uint32_t i = 0; i < m && rc == KILN_OK; i++) {
            kiln_node_id v = members[i];
            count += node_tasks(st, v, recv_count);
            if (count + SA_TASK_RESERVE > max_task && i > first && !no_split_at(st, v)) {
                uint32_t at = i;
                const char *cl = sa_node_str(st->g, v, SA_ATTR_CONT_LABEL);
                if (cl[0]) /* the whole labelled run moves to the new part */
                    while (at > first + 1 &&
                           strcmp(sa_node_str(st->g, members[at - 1], SA_ATTR_CONT_LABEL), cl) == 0)
                        at--;
                if (at == first + 1 &&
                    cl[0] && strcmp(sa_node_str(st->g, members[first], SA_ATTR_CONT_LABEL), cl) == 0)
                    at = i; /* the run fills the part: split where the count says */
                part = st->nstreams++;
                st->split_parts++;
                count = 0;
                for (uint32_t j = at; j <= i; j++)
                    count += node_tasks(st, members[j], recv_count);
                /* members[first, at) keep the previous part: label them now,
                 * once each (the rest are labelled by a later split or below) */
                for (uint32_t j = first; j < at; j++)
                    st->stream[members[j]] = prev_part;
                prev_part = part;
                rc = add_event(st, members[at - 1], members[at]);
                first = at;
            }
        }
        for (uint32_t j = first; j < m; j++)
            st->stream[members[j]] = prev_part;
    }
    free(recv_count), free(ms), free(all);
    kiln_pass_stat_add(st->ctx, "stream_split_parts", st->split_parts);
    return rc;
}

/* ---- RefreshContinuousEvents and reuse ---------------------------------------- */

/* Hopcroft-Karp on the comparability pairs adj (CSR over events). */
typedef struct hk {
    uint32_t n, *as, *adj, *ml, *mr, *dist, *queue;
} hk;

#define HK_NIL UINT32_MAX

static bool hk_bfs(hk *h)
{
    uint32_t qh = 0, qt = 0;
    bool found = false;
    for (uint32_t u = 0; u < h->n; u++) {
        if (h->ml[u] == HK_NIL) {
            h->dist[u] = 0;
            h->queue[qt++] = u;
        } else {
            h->dist[u] = HK_NIL;
        }
    }
    while (qh < qt) {
        uint32_t u = h->queue[qh++];
        for (uint32_t k = h->as[u]; k < h->as[u + 1]; k++) {
            uint32_t w = h->mr[h->adj[k]];
            if (w == HK_NIL)
                found = true;
            else if (h->dist[w] == HK_NIL) {
                h->dist[w] = h->dist[u] + 1;
                h->queue[qt++] = w;
            }
        }
    }
    return found;
}

static bool hk_dfs(hk *h, uint32_t u)
{
    for (uint32_t k = h->as[u]; k < h->as[u + 1]; k++) {
        uint32_t v = h->adj[k], w = h->mr[v];
        if (w == HK_NIL || (h->dist[w] == h->dist[u] + 1 && hk_dfs(h, w))) {
            h->ml[u] = v;
            h->mr[v] = u;
            return true;
        }
    }
    h->dist[u] = HK_NIL;
    return false;
}

static int cmp_u32p(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Largest number of events outstanding at one step: sender step <= t < receiver step. */
static uint32_t outstanding_bound(sa_state *st)
{
    uint32_t E = st->nev, *starts = malloc((E + 1) * sizeof(uint32_t)),
             *ends = malloc((E + 1) * sizeof(uint32_t));
    if (!starts || !ends) {
        free(starts), free(ends);
        return 0;
    }
    for (uint32_t e = 0; e < E; e++)
        starts[e] = st->pos[st->ev[e].sender], ends[e] = st->pos[st->ev[e].receiver];
    qsort(starts, E, sizeof(uint32_t), cmp_u32p);
    qsort(ends, E, sizeof(uint32_t), cmp_u32p);
    uint32_t best = 0, cur = 0, j = 0;
    for (uint32_t i = 0; i < E; i++) {
        while (j < E && ends[j] <= starts[i])
            j++, cur--;
        cur++;
        if (cur > best)
            best = cur;
    }
    free(starts), free(ends);
    return best;
}

static kiln_status reuse(sa_state *st)
{
    uint32_t E = st->nev, S = st->nlogical;
    st->phys = calloc(E + 1, sizeof(uint32_t));
    if (!st->phys)
        return sa_nomem(st);
    st->lower_bound = outstanding_bound(st);
    uint32_t *clk = NULL, *spos = NULL;
    kiln_status rc = clocks(st, st->logic, S, false, &clk, &spos);
    if (rc != KILN_OK)
        return rc;
#define BEFORE(a, b) /* receiver of a happens before sender of b (another node) */     \
    (st->ev[a].receiver != st->ev[b].sender &&                                         \
     clk[(size_t)st->ev[b].sender * S + st->logic[st->ev[a].receiver]] >=              \
         spos[st->ev[a].receiver] + 1)
    if (E <= SA_EXACT_REUSE) {
        hk h = {E, calloc(E + 1, sizeof(uint32_t)), NULL, malloc((E + 1) * sizeof(uint32_t)),
                malloc((E + 1) * sizeof(uint32_t)), malloc((E + 1) * sizeof(uint32_t)),
                malloc((E + 1) * sizeof(uint32_t))};
        size_t np = 0;
        for (uint32_t a = 0; a < E; a++)
            for (uint32_t b = 0; b < E; b++)
                if (a != b && BEFORE(a, b))
                    np++;
        h.adj = malloc((np + 1) * sizeof(uint32_t));
        if (!h.as || !h.adj || !h.ml || !h.mr || !h.dist || !h.queue) {
            rc = sa_nomem(st);
        } else {
            np = 0;
            for (uint32_t a = 0; a < E; a++) {
                h.as[a] = (uint32_t)np;
                for (uint32_t b = 0; b < E; b++)
                    if (a != b && BEFORE(a, b))
                        h.adj[np++] = b;
            }
            h.as[E] = (uint32_t)np;
            for (uint32_t u = 0; u < E; u++)
                h.ml[u] = h.mr[u] = HK_NIL;
            while (hk_bfs(&h))
                for (uint32_t u = 0; u < E; u++)
                    if (h.ml[u] == HK_NIL)
                        hk_dfs(&h, u);
            /* chains: heads are events nothing precedes in the matching */
            uint32_t next = 0;
            for (uint32_t e = 0; e < E; e++)
                if (h.mr[e] == HK_NIL) {
                    for (uint32_t c = e; c != HK_NIL; c = h.ml[c])
                        st->phys[c] = next;
                    next++;
                }
            st->nphys = next;
            st->phys_exact = true;
        }
        free(h.as), free(h.adj), free(h.ml), free(h.mr), free(h.dist), free(h.queue);
    } else {
        /* greedy first fit in sender order (events are numbered in it) */
        uint32_t *last = malloc((E + 1) * sizeof(uint32_t));
        if (!last) {
            rc = sa_nomem(st);
        } else {
            for (uint32_t e = 0; e < E; e++) {
                uint32_t id = 0;
                while (id < st->nphys && !BEFORE(last[id], e))
                    id++;
                if (id == st->nphys)
                    st->nphys++;
                st->phys[e] = id;
                last[id] = e;
            }
            free(last);
            /* meeting the outstanding-events bound proves the greedy minimal */
            st->phys_exact = st->nphys == st->lower_bound;
        }
    }
#undef BEFORE
    free(clk), free(spos);
    return rc;
}

kiln_status sa_finish_events(sa_state *st)
{
    /* RefreshContinuousEvents: survivors renumbered by sender order. */
    sa_ev_index x = {0};
    kiln_status rc = sa_ev_index_build(st, &x);
    if (rc != KILN_OK)
        return rc;
    sa_event *nv = malloc((st->nev + 1) * sizeof(sa_event));
    if (!nv) {
        sa_ev_index_free(&x);
        return sa_nomem(st);
    }
    uint32_t m = 0;
    for (uint32_t i = 0; i < st->n; i++) {
        kiln_node_id v = st->order[i];
        for (uint32_t k = x.ss[v]; k < x.ss[v + 1]; k++)
            if (!st->ev[x.sa[k]].dead)
                nv[m++] = st->ev[x.sa[k]];
    }
    sa_ev_index_free(&x);
    free(st->ev);
    st->ev = nv;
    st->nev = st->evcap = m;
    if (!st->evcap)
        st->evcap = 0;
    if (st->o->reuse_events && st->nev &&
        (uint64_t)st->limit * st->nstreams <= SA_CLOCK_WORDS)
        return reuse(st);
    return KILN_OK;
}

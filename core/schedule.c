/*
 * schedule.c - the build schedule analysis (kiln_analysis.h, docs/build.md):
 * the global execution order, the streams, the events, and happens-before as
 * a multi-stream runtime enforces it.
 *
 * Sources, all on the root graph: `_kiln_id` (order; when some live node
 * lacks it, the topological order that takes the ready node of the lowest id
 * first: it depends on the nodes' relative id order only, which a JSON round
 * trip keeps, not on the order edges were made, so a resumed build gets the
 * uninterrupted build's schedule; kiln_graph_topo_order's FIFO order does
 * not have that property), `_kiln_stream_id` (-1/absent = no stream),
 * `_send_event_ids` / `_recv_event_ids`.  When no node carries a stream the
 * schedule is sequential: every node on stream 0, in the global order.
 *
 * Events may be reused (GE ReuseEvent): a wait pairs with the latest record
 * of the same id at an earlier step.  A wait with no earlier record is an
 * error.
 *
 * Happens-before uses vector clocks over chains.  A chain is a run of streams
 * each totally ordered after the one before (StreamAllocator's split of a
 * stream past max_task: the last task of a part records an event the first
 * task of the next part waits for, which is how a chain is recognised); every
 * other stream is a chain of its own.  Nodes of a chain are numbered along it.
 * For each node n, clk[n] has one entry per chain: clk[n][s] = how many nodes
 * of chain s are known finished
 * when n starts (for a node with a stream) or finishes (for a node without
 * one, which does no work).  A node with a stream starts after its
 * predecessor on the stream and after the senders of the events it waits
 * for; a stream-less node finishes when its producers have.  Then
 *   a (stream s, position i) before b  <=>  clk[b][s] > i,
 *   a without stream before b          <=>  clk[a] <= clk[b] entrywise
 * (for b with a stream, clk[b] is its start; for b without, its finish, and
 * a stream-less b starts when it finishes).
 *
 * Complexity: O((n + e) * C) time and n * C words of memory for C chains
 * (a graph's streams split at 1024 tasks stay C = its unsplit streams, so a
 * million-node graph does not get n * n / 1024 words); happens-before O(1)
 * (O(C) from a stream-less node); release_step O(C * (log n + log d * |uses|)) for
 * d the distance on each chain from the latest use to the first node after all
 * uses (usually one happens-before test per chain).
 */
#include "analysis.h"
#include "sort.h"

#include <stdlib.h>
#include <string.h>

#define ATTR_ORDER "_kiln_id"
#define ATTR_STREAM "_kiln_stream_id"
#define ATTR_SEND "_send_event_ids"
#define ATTR_RECV "_recv_event_ids"

struct kiln_schedule {
    uint64_t at;          /* root struct_mutation + 1 at build */
    uint64_t at_attrs;    /* root sched_mutation at build */
    uint32_t nsteps;
    kiln_node_id *node;   /* step -> node */
    uint32_t limit;       /* node_limit at build */
    uint32_t *step;       /* node -> step (UINT32_MAX: dead) */
    int32_t *stream;      /* node -> stream or -1 */
    uint32_t *spos;       /* node -> position on its stream */
    uint32_t nstreams;
    uint32_t *soff;       /* nstreams + 1: CSR offsets into ssteps */
    uint32_t *ssteps;     /* steps of each stream, ascending */
    kiln_sched_event *ev; /* record/wait pairs, by id then receiver step */
    uint32_t nev;
    /* chains: streams totally ordered one after another (a stream split by
     * StreamAllocator's max_task: the last task of each part records an event
     * the first task of the next part waits for) share one clock entry */
    uint32_t nchains;
    uint32_t *chain;      /* stream -> chain */
    uint32_t *cbase;      /* stream -> position of its first node in its chain */
    uint32_t *coff;       /* nchains + 1: CSR offsets into csteps */
    uint32_t *csteps;     /* steps of each chain, ascending */
    uint32_t *clk;        /* nsteps * nchains, indexed by step */
    uint8_t *evf;         /* while building: node -> EVF_* (gather) */
};

void kiln__schedule_free(kiln_schedule *s)
{
    if (!s)
        return;
    kiln__free(s->node);
    kiln__free(s->step);
    kiln__free(s->stream);
    kiln__free(s->spos);
    kiln__free(s->soff);
    kiln__free(s->ssteps);
    kiln__free(s->ev);
    kiln__free(s->chain);
    kiln__free(s->cbase);
    kiln__free(s->coff);
    kiln__free(s->csteps);
    kiln__free(s->clk);
    kiln__free(s->evf);
    kiln__free(s);
}

static const uint32_t *clock_of(const kiln_schedule *s, uint32_t step)
{
    return s->clk + (size_t)step * s->nchains;
}

/* Position of @p n (on a stream) in its chain. */
static uint32_t cpos(const kiln_schedule *s, kiln_node_id n)
{
    return s->cbase[s->stream[n]] + s->spos[n];
}

/* ---- order --------------------------------------------------------------- */

/* An int64 as a uint64 that sorts the same way. */
static uint64_t ukey(int64_t v)
{
    return (uint64_t)v ^ ((uint64_t)1 << 63);
}

/* Min-heap of node ids (the ready set of lowest_id_order). */
static void heap_push(kiln_node_id *h, uint32_t *n, kiln_node_id v)
{
    uint32_t i = (*n)++;
    while (i && h[(i - 1) / 2] > v) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = v;
}

static kiln_node_id heap_pop(kiln_node_id *h, uint32_t *n)
{
    kiln_node_id top = h[0], v = h[--*n];
    uint32_t i = 0;
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && h[c + 1] < h[c])
            c++;
        if (h[c] >= v)
            break;
        h[i] = h[c];
        i = c;
    }
    if (*n)
        h[i] = v;
    return top;
}

/* Kahn's algorithm taking the ready node of the lowest id first into
 * @p out (the @p n live nodes @p topo lists).  O((n + e) log n). */
static kiln_status lowest_id_order(kiln_graph *g, const kiln_node_id *topo, uint32_t n,
                                   kiln_node_id *out, kiln_error *err)
{
    uint32_t lim = g->node_limit, nh = 0, k = 0;
    uint32_t *indeg = kiln__calloc(lim + 1, sizeof(*indeg));
    kiln_node_id *heap = kiln__malloc(((size_t)n + 1) * sizeof(*heap));
    if (!indeg || !heap) {
        kiln__free(indeg);
        kiln__free(heap);
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory scheduling graph %s",
                           kiln_graph_name(g));
    }
    for (uint32_t i = 0; i < n; i++) {
        kiln_node_id v = topo[i];
        for (uint32_t j = 0; j < kiln_node_input_count(g, v); j++)
            indeg[v] += kiln_node_input_peer(g, v, j).node != 0;
        for (uint32_t c = kiln_ctrl_in_first(g, v); c; c = kiln_ctrl_in_next(g, c))
            indeg[v]++;
    }
    for (uint32_t i = 0; i < n; i++)
        if (!indeg[topo[i]])
            heap_push(heap, &nh, topo[i]);
    while (nh) {
        kiln_node_id v = heap_pop(heap, &nh);
        out[k++] = v;
        for (uint32_t o = 0; o < kiln_node_output_count(g, v); o++)
            for (uint32_t u = kiln_use_first(g, v, o); u; u = kiln_use_next(g, u)) {
                kiln_node_id d = kiln_use_dst(g, u).node;
                if (--indeg[d] == 0)
                    heap_push(heap, &nh, d);
            }
        for (uint32_t c = kiln_ctrl_out_first(g, v); c; c = kiln_ctrl_out_next(g, c)) {
            kiln_node_id d = kiln_ctrl_dst(g, c);
            if (--indeg[d] == 0)
                heap_push(heap, &nh, d);
        }
    }
    kiln__free(indeg);
    kiln__free(heap);
    if (k != n) /* cannot happen: topo is a valid order of the same graph */
        return kiln_errorf(err, KILN_ERR_INTERNAL, "schedule of graph %s: %u of %u nodes ordered",
                           kiln_graph_name(g), k, n);
    return KILN_OK;
}

/* Stream value of a node whose _kiln_stream_id is past INT32_MAX - 1 (the
 * error is reported in step order, by build_streams). */
#define STREAM_RANGE INT32_MAX
/* s->evf: the node has _send_event_ids or _recv_event_ids. */
#define EVF_SEND 1u
#define EVF_RECV 2u

/*
 * One read of each node's attribute set for every key the schedule uses (the
 * keys resolved to symbols once; sets scanned with the next ones prefetched:
 * a million nodes' sets are a million cache misses, four string-keyed lookups
 * each were four times that): keys[i] = the order key of topo[i] (when
 * every node has one: the return value), s->stream by node (-1: none,
 * STREAM_RANGE: out of range), s->evf the nodes with event lists.
 */
static bool gather(kiln_graph *g, kiln_schedule *s, const kiln_node_id *topo, uint32_t n,
                   uint64_t *keys)
{
    const kiln_sym korder = kiln_sym_lookup(g, ATTR_ORDER);
    const kiln_sym kstream = kiln_sym_lookup(g, ATTR_STREAM);
    const kiln_sym ksend = kiln_sym_lookup(g, ATTR_SEND);
    const kiln_sym krecv = kiln_sym_lookup(g, ATTR_RECV);
    bool all = korder != 0;
    enum { AHEAD = 16 };
    for (uint32_t i = 0; i < n; i++) {
        kiln_node_id v = topo[i];
        s->node[i] = v;
        if (i + AHEAD < n) {
            const kiln_attrs *p = g->cold[topo[i + AHEAD]].attrs;
            if (p)
                __builtin_prefetch(p);
        }
        if (i + AHEAD / 2 < n) {
            const kiln_attrs *p = g->cold[topo[i + AHEAD / 2]].attrs;
            if (p)
                __builtin_prefetch(p->v);
        }
        const kiln_attrs *a = g->cold[v].attrs;
        bool has_id = false;
        int64_t id = 0;
        int32_t st = -1;
        if (a)
            for (uint32_t k = 0; k < a->n; k++) {
                const kattr *e = &a->v[k];
                if (!e->key)
                    continue;
                if (e->key == korder) {
                    if (e->type == KILN_ATTR_INT) {
                        has_id = true;
                        id = e->v.i;
                    }
                } else if (e->key == kstream) {
                    if (e->type == KILN_ATTR_INT && e->v.i >= 0)
                        st = e->v.i > INT32_MAX - 1 ? STREAM_RANGE : (int32_t)e->v.i;
                } else if (e->key == ksend) {
                    if (e->type == KILN_ATTR_LIST_INT)
                        s->evf[v] |= EVF_SEND;
                } else if (e->key == krecv) {
                    if (e->type == KILN_ATTR_LIST_INT)
                        s->evf[v] |= EVF_RECV;
                }
            }
        s->stream[v] = st;
        all = all && has_id;
        keys[i] = ukey(id);
    }
    return all;
}

/* The global order: by _kiln_id when every live node has one, else topological
 * (lowest id first, see the file comment). */
static kiln_status build_order(kiln_graph *g, kiln_schedule *s, kiln_error *err)
{
    const kiln_node_id *topo;
    uint32_t n;
    kiln_status st = kiln_graph_topo_order(g, &topo, &n, err);
    if (st != KILN_OK)
        return st;
    s->nsteps = n;
    s->node = kiln__malloc(((size_t)n + 1) * sizeof(*s->node));
    uint64_t *keys = kiln__malloc(((size_t)n + 1) * sizeof(*keys));
    if (!s->node || !keys) {
        kiln__free(keys);
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory scheduling graph %s",
                           kiln_graph_name(g));
    }
    s->limit = g->node_limit;
    s->stream = kiln__malloc(((size_t)s->limit + 1) * sizeof(*s->stream));
    s->evf = kiln__calloc((size_t)s->limit + 1, 1);
    if (!s->stream || !s->evf) {
        kiln__free(keys);
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory scheduling graph %s",
                           kiln_graph_name(g));
    }
    bool all = gather(g, s, topo, n, keys);
    if (all) {
        /* stable: nodes sharing an id stay in topological order */
        if (!kiln__sort_pairs_u64(keys, s->node, n)) {
            kiln__free(keys);
            return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory scheduling graph %s",
                               kiln_graph_name(g));
        }
        for (uint32_t i = 1; i < n; i++)
            if (keys[i] == keys[i - 1]) {
                kiln_status e = kiln_errorf(err, KILN_ERR_INVALID,
                                            "schedule of graph %s: nodes %s and %s share %s %lld",
                                            kiln_graph_name(g), kiln_node_name_str(g, s->node[i - 1]),
                                            kiln_node_name_str(g, s->node[i]), ATTR_ORDER,
                                            (long long)ukey((int64_t)keys[i]));
                kiln__free(keys);
                return e;
            }
    } else if ((st = lowest_id_order(g, topo, n, s->node, err)) != KILN_OK) {
        kiln__free(keys);
        return st;
    }
    kiln__free(keys);
    s->step = kiln__malloc((size_t)s->limit * sizeof(*s->step));
    if (!s->step)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory scheduling graph %s",
                           kiln_graph_name(g));
    memset(s->step, 0xff, (size_t)s->limit * sizeof(*s->step));
    for (uint32_t i = 0; i < n; i++)
        s->step[s->node[i]] = i;
    if (!all)
        return KILN_OK;
    /* A given order must respect every data and control edge. */
    for (uint32_t i = 0; i < n; i++) {
        kiln_node_id v = s->node[i];
        for (uint32_t k = 0; k < kiln_node_input_count(g, v); k++) {
            kiln_anchor p = kiln_node_input_peer(g, v, k);
            if (p.node && s->step[p.node] > i)
                return kiln_errorf(err, KILN_ERR_INVALID,
                                   "schedule of graph %s: %s of %s comes after its consumer %s",
                                   kiln_graph_name(g), ATTR_ORDER,
                                   kiln_node_name_str(g, p.node), kiln_node_name_str(g, v));
        }
        for (uint32_t c = kiln_ctrl_in_first(g, v); c; c = kiln_ctrl_in_next(g, c))
            if (s->step[kiln_ctrl_src(g, c)] > i)
                return kiln_errorf(err, KILN_ERR_INVALID,
                                   "schedule of graph %s: %s of %s comes after its control "
                                   "successor %s",
                                   kiln_graph_name(g), ATTR_ORDER,
                                   kiln_node_name_str(g, kiln_ctrl_src(g, c)),
                                   kiln_node_name_str(g, v));
    }
    return KILN_OK;
}

/* ---- streams --------------------------------------------------------------- */

static kiln_status build_streams(kiln_graph *g, kiln_schedule *s, kiln_error *err)
{
    uint32_t n = s->nsteps;
    s->spos = kiln__malloc((size_t)s->limit * sizeof(*s->spos));
    if (!s->spos)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory scheduling graph %s",
                           kiln_graph_name(g));
    /* s->stream was read by gather() */
    bool any = false;
    int64_t maxs = -1;
    for (uint32_t i = 0; i < n; i++) {
        kiln_node_id x = s->node[i];
        int32_t v = s->stream[x];
        if (v < 0)
            continue;
        if (v == STREAM_RANGE) {
            int64_t big = 0;
            kiln_attrs_get_int(kiln_node_attrs(g, x), ATTR_STREAM, &big);
            return kiln_errorf(err, KILN_ERR_INVALID, "schedule of graph %s: node %s: %s %lld "
                               "out of range", kiln_graph_name(g), kiln_node_name_str(g, x),
                               ATTR_STREAM, (long long)big);
        }
        any = true;
        if (v > maxs)
            maxs = v;
    }
    if (!any) /* sequential: one implicit stream */
        for (uint32_t i = 0; i < n; i++)
            s->stream[s->node[i]] = 0, maxs = 0;
    s->nstreams = (uint32_t)(maxs + 1);
    s->soff = kiln__calloc((size_t)s->nstreams + 1, sizeof(*s->soff));
    s->ssteps = kiln__malloc(((size_t)n + 1) * sizeof(*s->ssteps));
    if (!s->soff || !s->ssteps)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory scheduling graph %s",
                           kiln_graph_name(g));
    for (uint32_t i = 0; i < n; i++)
        if (s->stream[s->node[i]] >= 0)
            s->soff[s->stream[s->node[i]] + 1]++;
    for (uint32_t k = 0; k < s->nstreams; k++)
        s->soff[k + 1] += s->soff[k];
    uint32_t *fill = kiln__malloc(((size_t)s->nstreams + 1) * sizeof(*fill));
    if (!fill)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory scheduling graph %s",
                           kiln_graph_name(g));
    memcpy(fill, s->soff, ((size_t)s->nstreams + 1) * sizeof(*fill));
    for (uint32_t i = 0; i < n; i++) {
        int32_t st = s->stream[s->node[i]];
        if (st < 0)
            continue;
        s->spos[s->node[i]] = fill[st] - s->soff[st];
        s->ssteps[fill[st]++] = i;
    }
    kiln__free(fill);
    return KILN_OK;
}

/* ---- events ----------------------------------------------------------------- */

typedef struct ev_use {
    int64_t id;
    uint32_t step;
    uint32_t is_wait; /* records sort before waits at one step: a node cannot wait for itself */
} ev_use;

/* Sort @p u by (id, step, is_wait): it was made in (step, is_wait) order, so
 * a stable sort by id does it.  false on out of memory. */
static bool sort_uses(ev_use *u, size_t len)
{
    uint64_t *k = kiln__malloc((len + 1) * sizeof(*k));
    uint32_t *ix = kiln__malloc((len + 1) * sizeof(*ix));
    ev_use *t = kiln__malloc((len + 1) * sizeof(*t));
    bool ok = k && ix && t && len <= UINT32_MAX;
    for (size_t i = 0; ok && i < len; i++) {
        k[i] = (uint64_t)u[i].id;
        ix[i] = (uint32_t)i;
    }
    ok = ok && kiln__sort_pairs_u64(k, ix, len);
    for (size_t i = 0; ok && i < len; i++)
        t[i] = u[ix[i]];
    if (ok)
        memcpy(u, t, len * sizeof(*u));
    kiln__free(k);
    kiln__free(ix);
    kiln__free(t);
    return ok;
}

static kiln_status build_events(kiln_graph *g, kiln_schedule *s, kiln_error *err)
{
    size_t cap = 0, len = 0;
    ev_use *u = NULL;
    for (uint32_t i = 0; i < s->nsteps; i++) {
        const uint8_t f = s->evf[s->node[i]];
        if (!f)
            continue;
        const kiln_attrs *a = kiln_node_attrs(g, s->node[i]);
        for (int w = 0; w < 2; w++) {
            const int64_t *ids;
            uint32_t cnt;
            if (!(f & (w ? EVF_RECV : EVF_SEND)) ||
                !kiln_attrs_get_list_int(a, w ? ATTR_RECV : ATTR_SEND, &ids, &cnt))
                continue;
            for (uint32_t k = 0; k < cnt; k++) {
                if (ids[k] < 0 || ids[k] > UINT32_MAX) {
                    kiln__free(u);
                    return kiln_errorf(err, KILN_ERR_INVALID, "schedule of graph %s: node %s: "
                                       "event id %lld out of range", kiln_graph_name(g),
                                       kiln_node_name_str(g, s->node[i]), (long long)ids[k]);
                }
                if (len == cap) {
                    cap = cap ? cap * 2 : 64;
                    ev_use *nu = kiln__realloc(u, cap * sizeof(*u));
                    if (!nu) {
                        kiln__free(u);
                        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory scheduling "
                                           "graph %s", kiln_graph_name(g));
                    }
                    u = nu;
                }
                u[len++] = (ev_use){ids[k], i, (uint32_t)w};
            }
        }
    }
    s->ev = kiln__malloc((len + 1) * sizeof(*s->ev));
    if (!s->ev || (len && !sort_uses(u, len))) {
        kiln__free(u);
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory scheduling graph %s",
                           kiln_graph_name(g));
    }
    kiln_status st = KILN_OK;
    uint32_t last_record = UINT32_MAX;
    for (size_t k = 0; k < len && st == KILN_OK; k++) {
        if (k && u[k].id != u[k - 1].id)
            last_record = UINT32_MAX;
        if (!u[k].is_wait) {
            last_record = u[k].step;
            continue;
        }
        kiln_node_id recv = s->node[u[k].step];
        if (last_record == UINT32_MAX)
            st = kiln_errorf(err, KILN_ERR_INVALID, "schedule of graph %s: node %s waits for "
                             "event %lld that no earlier node records", kiln_graph_name(g),
                             kiln_node_name_str(g, recv), (long long)u[k].id);
        else if (s->stream[recv] < 0 || s->stream[s->node[last_record]] < 0)
            st = kiln_errorf(err, KILN_ERR_INVALID, "schedule of graph %s: event %lld between "
                             "%s and %s: both ends need a stream", kiln_graph_name(g),
                             (long long)u[k].id, kiln_node_name_str(g, s->node[last_record]),
                             kiln_node_name_str(g, recv));
        else
            s->ev[s->nev++] = (kiln_sched_event){(uint32_t)u[k].id, s->node[last_record], recv};
    }
    kiln__free(u);
    return st;
}

/* ---- clocks ----------------------------------------------------------------- */

static void join(uint32_t *dst, const uint32_t *src, uint32_t ns)
{
    for (uint32_t k = 0; k < ns; k++)
        if (src[k] > dst[k])
            dst[k] = src[k];
}

/* The clock a node's completion carries (its finish clock). */
static void finish_clock(const kiln_schedule *s, kiln_node_id n, uint32_t *out)
{
    memcpy(out, clock_of(s, s->step[n]), (size_t)s->nchains * sizeof(*out));
    if (s->stream[n] >= 0)
        out[s->chain[s->stream[n]]] = cpos(s, n) + 1;
}

/* @p byr: the events by receiver step, ties in event order (stable).
 * false on out of memory. */
static bool events_by_receiver(const kiln_schedule *s, kiln_sched_event *byr)
{
    uint64_t *k = kiln__malloc(((size_t)s->nev + 1) * sizeof(*k));
    uint32_t *ix = kiln__malloc(((size_t)s->nev + 1) * sizeof(*ix));
    bool ok = k && ix;
    for (uint32_t i = 0; ok && i < s->nev; i++) {
        k[i] = s->step[s->ev[i].receiver];
        ix[i] = i;
    }
    ok = ok && kiln__sort_pairs_u64(k, ix, s->nev);
    for (uint32_t i = 0; ok && i < s->nev; i++)
        byr[i] = s->ev[ix[i]];
    kiln__free(k);
    kiln__free(ix);
    return ok;
}

/*
 * The chains: stream b continues the chain of stream a when the first node of
 * b waits for an event the last node of a records, and no stream continued a
 * yet.  Then every node of a happens before every node of b, and b's steps
 * all come after a's (the global order extends happens-before), so a chain's
 * steps, part after part, are ascending.
 */
static kiln_status build_chains(kiln_graph *g, kiln_schedule *s, kiln_error *err)
{
    const uint32_t ns = s->nstreams;
    uint32_t *prev = kiln__malloc(((size_t)ns + 1) * sizeof(*prev)); /* stream before, or -1 */
    uint32_t *next = kiln__malloc(((size_t)ns + 1) * sizeof(*next)); /* stream after, or -1 */
    uint8_t *followed = kiln__calloc((size_t)ns + 1, 1);
    s->chain = kiln__malloc(((size_t)ns + 1) * sizeof(*s->chain));
    s->cbase = kiln__malloc(((size_t)ns + 1) * sizeof(*s->cbase));
    s->coff = kiln__calloc((size_t)ns + 2, sizeof(*s->coff));
    s->csteps = kiln__malloc(((size_t)s->soff[ns] + 1) * sizeof(*s->csteps));
    if (!prev || !next || !followed || !s->chain || !s->cbase || !s->coff || !s->csteps) {
        kiln__free(prev);
        kiln__free(next);
        kiln__free(followed);
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory scheduling graph %s",
                           kiln_graph_name(g));
    }
    memset(prev, 0xff, ((size_t)ns + 1) * sizeof(*prev));
    memset(next, 0xff, ((size_t)ns + 1) * sizeof(*next));
    for (uint32_t k = 0; k < s->nev; k++) {
        kiln_node_id a = s->ev[k].sender, b = s->ev[k].receiver;
        int32_t sa = s->stream[a], sb = s->stream[b];
        if (sa < 0 || sb < 0 || sa == sb || followed[sa] || prev[sb] != UINT32_MAX)
            continue;
        const uint32_t la = s->soff[sa + 1] - s->soff[sa];
        if (s->spos[b] != 0 || s->spos[a] + 1 != la)
            continue; /* not the last of a to the first of b */
        prev[sb] = (uint32_t)sa;
        next[sa] = (uint32_t)sb;
        followed[sa] = 1;
    }
    /* number the chains by their head streams, in stream order */
    s->nchains = 0;
    for (uint32_t k = 0; k < ns; k++)
        if (prev[k] == UINT32_MAX) {
            uint32_t c = s->nchains++, base = 0;
            for (uint32_t t = k;;) {
                s->chain[t] = c;
                s->cbase[t] = base;
                base += s->soff[t + 1] - s->soff[t];
                if (next[t] == UINT32_MAX) /* the stream that continues t, if any */
                    break;
                t = next[t];
            }
            s->coff[c + 1] = base;
        }
    kiln__free(prev);
    kiln__free(next);
    kiln__free(followed);
    for (uint32_t c = 0; c < s->nchains; c++)
        s->coff[c + 1] += s->coff[c];
    for (uint32_t i = 0; i < s->nsteps; i++) {
        int32_t st = s->stream[s->node[i]];
        if (st >= 0)
            s->csteps[s->coff[s->chain[st]] + cpos(s, s->node[i])] = i;
    }
    return KILN_OK;
}

static kiln_status build_clocks(kiln_graph *g, kiln_schedule *s, kiln_error *err)
{
    kiln_status cs = build_chains(g, s, err);
    if (cs != KILN_OK)
        return cs;
    uint32_t ns = s->nchains, n = s->nsteps;
    if (n && (uint64_t)n * ns > UINT32_MAX / 2)
        return kiln_errorf(err, KILN_ERR_LIMIT, "schedule of graph %s: %u nodes x %u stream "
                           "chains is too large", kiln_graph_name(g), n, ns);
    s->clk = kiln__calloc((size_t)n * ns + 1, sizeof(*s->clk));
    uint32_t *tmp = kiln__malloc(((size_t)ns + 1) * sizeof(*tmp));
    /* last step per stream */
    uint32_t *last = kiln__malloc(((size_t)s->nstreams + 1) * sizeof(*last));
    /* waits by receiver step: a sorted copy of the events */
    kiln_sched_event *byr = kiln__malloc(((size_t)s->nev + 1) * sizeof(*byr));
    if (!s->clk || !tmp || !last || !byr || !events_by_receiver(s, byr)) {
        kiln__free(tmp);
        kiln__free(last);
        kiln__free(byr);
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory scheduling graph %s",
                           kiln_graph_name(g));
    }
    memset(last, 0xff, ((size_t)s->nstreams + 1) * sizeof(*last));
    uint32_t e = 0;
    for (uint32_t i = 0; i < n; i++) {
        kiln_node_id v = s->node[i];
        uint32_t *c = s->clk + (size_t)i * ns;
        int32_t st = s->stream[v];
        if (st >= 0) {
            if (last[st] != UINT32_MAX) {
                finish_clock(s, s->node[last[st]], tmp);
                join(c, tmp, ns);
            }
            last[st] = i;
            for (; e < s->nev && s->step[byr[e].receiver] == i; e++) {
                finish_clock(s, byr[e].sender, tmp);
                join(c, tmp, ns);
            }
        } else {
            for (uint32_t k = 0; k < kiln_node_input_count(g, v); k++) {
                kiln_anchor p = kiln_node_input_peer(g, v, k);
                if (p.node) {
                    finish_clock(s, p.node, tmp);
                    join(c, tmp, ns);
                }
            }
            for (uint32_t e2 = kiln_ctrl_in_first(g, v); e2; e2 = kiln_ctrl_in_next(g, e2)) {
                finish_clock(s, kiln_ctrl_src(g, e2), tmp);
                join(c, tmp, ns);
            }
        }
    }
    kiln__free(tmp);
    kiln__free(last);
    kiln__free(byr);
    return KILN_OK;
}

/* ---- cache and queries -------------------------------------------------------- */

kiln_status kiln_schedule_get(kiln_graph *root, const kiln_schedule **out, kiln_error *err)
{
    if (out)
        *out = NULL;
    if (!root || !out)
        return kiln_errorf(err, KILN_ERR_INVALID, "kiln_schedule_get: NULL argument");
    struct kiln_analysis_cache *c = kiln__analyses(root);
    if (!c)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory scheduling graph %s",
                           kiln_graph_name(root));
    if (c->sched && c->sched->at == root->struct_mutation + 1 &&
        c->sched->at_attrs == root->sched_mutation) {
        *out = c->sched;
        return KILN_OK;
    }
    kiln__schedule_free(c->sched);
    c->sched = NULL;
    kiln_schedule *s = kiln__calloc(1, sizeof(*s));
    if (!s)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory scheduling graph %s",
                           kiln_graph_name(root));
    kiln_status st = build_order(root, s, err);
    if (st == KILN_OK)
        st = build_streams(root, s, err);
    if (st == KILN_OK)
        st = build_events(root, s, err);
    if (st == KILN_OK)
        st = build_clocks(root, s, err);
    if (st != KILN_OK) {
        kiln__schedule_free(s);
        return st;
    }
    kiln__free(s->evf);
    s->evf = NULL;
    /* building read attributes only: the counters are what they were */
    s->at = root->struct_mutation + 1;
    s->at_attrs = root->sched_mutation;
    c->sched = s;
    *out = s;
    return KILN_OK;
}

uint32_t kiln_schedule_step_count(const kiln_schedule *s)
{
    return s ? s->nsteps : 0;
}

kiln_node_id kiln_schedule_node(const kiln_schedule *s, uint32_t step)
{
    return s && step < s->nsteps ? s->node[step] : 0;
}

uint32_t kiln_schedule_step(const kiln_schedule *s, kiln_node_id n)
{
    return s && n < s->limit ? s->step[n] : UINT32_MAX;
}

uint32_t kiln_schedule_stream_count(const kiln_schedule *s)
{
    return s ? s->nstreams : 0;
}

int32_t kiln_schedule_stream(const kiln_schedule *s, kiln_node_id n)
{
    return s && n < s->limit && s->step[n] != UINT32_MAX ? s->stream[n] : -1;
}

const uint32_t *kiln_schedule_stream_steps(const kiln_schedule *s, uint32_t stream,
                                           uint32_t *count)
{
    if (!s || stream >= s->nstreams) {
        if (count)
            *count = 0;
        return NULL;
    }
    if (count)
        *count = s->soff[stream + 1] - s->soff[stream];
    return s->ssteps + s->soff[stream];
}

const kiln_sched_event *kiln_schedule_events(const kiln_schedule *s, uint32_t *count)
{
    if (count)
        *count = s ? s->nev : 0;
    return s ? s->ev : NULL;
}

/* a before the node at step @p sb (whose clock is its start, or its finish when stream-less) */
static bool before_step(const kiln_schedule *s, kiln_node_id a, uint32_t sb)
{
    const uint32_t *cb = clock_of(s, sb);
    if (s->stream[a] >= 0)
        return cb[s->chain[s->stream[a]]] > cpos(s, a);
    const uint32_t *ca = clock_of(s, s->step[a]);
    for (uint32_t k = 0; k < s->nchains; k++)
        if (ca[k] > cb[k])
            return false;
    return true;
}

bool kiln_schedule_happens_before(const kiln_schedule *s, kiln_node_id a, kiln_node_id b)
{
    if (!s || a == b || a >= s->limit || b >= s->limit || s->step[a] == UINT32_MAX ||
        s->step[b] == UINT32_MAX)
        return false;
    if (s->step[a] > s->step[b])
        return false; /* the global order is a linear extension of happens-before */
    return before_step(s, a, s->step[b]);
}

uint32_t kiln_schedule_latest_before(const kiln_schedule *s, uint32_t step, uint32_t stream)
{
    if (!s || step >= s->nsteps || stream >= s->nstreams)
        return UINT32_MAX;
    /* the chain's count, as a count of this stream's nodes */
    const uint32_t len = s->soff[stream + 1] - s->soff[stream];
    uint32_t c = clock_of(s, step)[s->chain[stream]];
    c = c <= s->cbase[stream] ? 0 : c - s->cbase[stream];
    if (c > len)
        c = len;
    return c ? s->ssteps[s->soff[stream] + c - 1] : UINT32_MAX;
}

/* Whether the node at @p step happens after every node of @p uses. */
static bool after_all(const kiln_schedule *s, uint32_t step, const kiln_node_id *uses, uint32_t n)
{
    kiln_node_id b = s->node[step];
    for (uint32_t k = 0; k < n; k++)
        if (uses[k] == b || s->step[uses[k]] > step || !before_step(s, uses[k], step))
            return false;
    return true;
}

uint32_t kiln_schedule_release_step(const kiln_schedule *s, const kiln_node_id *uses, uint32_t n)
{
    if (!s || !s->nsteps)
        return 0;
    uint32_t r = 0;
    for (uint32_t k = 0; k < n; k++) {
        if (uses[k] >= s->limit || s->step[uses[k]] == UINT32_MAX)
            return s->nsteps - 1; /* unknown use: keep the buffer for the whole run */
        if (s->step[uses[k]] > r)
            r = s->step[uses[k]];
    }
    const uint32_t r0 = r;
    for (uint32_t ch = 0; ch < s->nchains; ch++) {
        const uint32_t *steps = s->csteps + s->coff[ch];
        const uint32_t len = s->coff[ch + 1] - s->coff[ch];
        /* The positions whose node happens after all uses are a suffix of the
         * chain, and none is at or before the latest use's step r0: only a
         * suffix start past p0 (the first position after r0) can raise r.
         * Find p0 by its step, then the suffix start from p0 outwards (one
         * test when the node after the uses already follows them all). */
        uint32_t lo = 0, hi = len;
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo) / 2;
            if (steps[mid] <= r0)
                lo = mid + 1;
            else
                hi = mid;
        }
        const uint32_t p0 = lo;
        if (p0 == len || after_all(s, steps[p0], uses, n))
            continue;
        /* after_all is false at p0: gallop to a position where it holds (or
         * the end), then bisect (lo, hi] */
        lo = p0;
        uint32_t d = 1;
        hi = len;
        while (lo + d < len) {
            if (after_all(s, steps[lo + d], uses, n)) {
                hi = lo + d;
                break;
            }
            lo += d;
            d *= 2;
        }
        /* after_all false at lo, true at hi (or hi == len) */
        lo++;
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo) / 2;
            if (after_all(s, steps[mid], uses, n))
                hi = mid;
            else
                lo = mid + 1;
        }
        if (steps[lo - 1] > r)
            r = steps[lo - 1];
    }
    return r;
}

kiln_status kiln_schedule_check(kiln_graph *root, const kiln_schedule *s, kiln_error *err)
{
    if (!root || !s)
        return kiln_errorf(err, KILN_ERR_INVALID, "kiln_schedule_check: NULL argument");
    for (uint32_t i = 0; i < s->nsteps; i++) {
        kiln_node_id v = s->node[i];
        for (uint32_t k = 0; k < kiln_node_input_count(root, v); k++) {
            kiln_anchor p = kiln_node_input_peer(root, v, k);
            if (p.node && s->stream[p.node] != s->stream[v] &&
                !kiln_schedule_happens_before(s, p.node, v))
                return kiln_errorf(err, KILN_ERR_INVALID,
                                   "schedule of graph %s: data edge %s:%u -> %s:%u crosses from "
                                   "stream %d to %d with no event ordering it",
                                   kiln_graph_name(root), kiln_node_name_str(root, p.node),
                                   p.index, kiln_node_name_str(root, v), k, s->stream[p.node],
                                   s->stream[v]);
        }
        for (uint32_t c = kiln_ctrl_in_first(root, v); c; c = kiln_ctrl_in_next(root, c)) {
            kiln_node_id src = kiln_ctrl_src(root, c);
            if (s->stream[src] != s->stream[v] && !kiln_schedule_happens_before(s, src, v))
                return kiln_errorf(err, KILN_ERR_INVALID,
                                   "schedule of graph %s: control edge %s -> %s crosses from "
                                   "stream %d to %d with no event ordering it",
                                   kiln_graph_name(root), kiln_node_name_str(root, src),
                                   kiln_node_name_str(root, v), s->stream[src], s->stream[v]);
        }
    }
    /* A reused event id: each record after the previous wait of that id. */
    for (uint32_t k = 1; k < s->nev; k++)
        if (s->ev[k].id == s->ev[k - 1].id && s->ev[k].sender != s->ev[k - 1].sender &&
            !kiln_schedule_happens_before(s, s->ev[k - 1].receiver, s->ev[k].sender))
            return kiln_errorf(err, KILN_ERR_INVALID,
                               "schedule of graph %s: event %u is recorded again by %s before "
                               "%s has waited for its previous record",
                               kiln_graph_name(root), s->ev[k].id,
                               kiln_node_name_str(root, s->ev[k].sender),
                               kiln_node_name_str(root, s->ev[k - 1].receiver));
    return KILN_OK;
}

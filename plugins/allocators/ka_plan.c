/*
 * ka_plan.c - learned plans replayed on later runs (docs/allocators.md#replay).
 *
 * An inference makes the same requests every run, and no online placement
 * (best, first or address-ordered fit) packs such a sequence close to its live
 * peak: the first run is what it is.  So the requests of a run are recorded,
 * each stream's in its own order, with their lifetimes on the stack's clock
 * (every call is serialised); at the end of a clean run the lifetimes are
 * placed offline in one arena, and the later runs replay the placement,
 * request by request.
 *
 * Safety.  The plan comes from one interleaving of the streams; another run
 * may interleave them otherwise, so the recorded order is never trusted.  For
 * every planned block b and every byte of b, the block that held that byte
 * last before b in the plan is one of b's predecessors (found by a sweep over
 * the plan in time order with a map of "last holder" per range).  b is served
 * from the arena only when each predecessor was served from the arena in this
 * run and has been freed by all its holders since.  By induction over each
 * byte's chain of holders, the blocks of a chain are served in the chain's
 * order, each after the one before it was freed: two live planned blocks never
 * share a byte, whatever the streams do.  Any request the plan cannot serve
 * (another size, one more than recorded, a predecessor not freed yet) takes
 * the normal path, and so do its successors in the run.  A run may use the
 * plan only when no arena block of an earlier run is still held.
 */
#include "ka.h"

#include <stdlib.h>
#include <string.h>

ka_rp *ka_rp_create(uint32_t streams)
{
    ka_rp *rp = calloc(1, sizeof(*rp));
    if (!rp)
        return NULL;
    rp->streams = streams;
    rp->run = 1;
    if (!(rp->s = calloc(streams, sizeof(*rp->s)))) {
        free(rp);
        return NULL;
    }
    return rp;
}

static void drop_plan(ka_rp *rp, ka_l1 *l1)
{
    if (rp->arena && l1)
        ka_l1_free(l1, rp->arena);
    rp->arena = NULL;
    rp->extent = 0;
    free(rp->req);
    free(rp->dep);
    rp->req = NULL;
    rp->dep = NULL;
    rp->nreq = 0;
    for (uint32_t s = 0; s < rp->streams; s++)
        rp->s[s].first = rp->s[s].nreq = 0;
}

void ka_rp_destroy(ka_rp *rp, ka_l1 *l1)
{
    if (!rp)
        return;
    drop_plan(rp, l1);
    for (uint32_t s = 0; s < rp->streams; s++)
        free(rp->s[s].rec);
    free(rp->s);
    free(rp);
}

static ka_rp_req *recorded(ka_rp *rp, uint32_t s, uint32_t idx, uint32_t epoch)
{
    if (epoch != rp->epoch || s >= rp->streams || idx >= rp->s[s].nrec)
        return NULL; /* of an earlier run, or past the recording's limit */
    return &rp->s[s].rec[idx];
}

static ka_rp_req *planned(ka_rp *rp, uint32_t s, uint32_t idx)
{
    if (s >= rp->streams || idx >= rp->s[s].nreq)
        return NULL;
    return &rp->req[rp->s[s].first + idx];
}

void *ka_rp_alloc(ka_rp *rp, uint32_t s, size_t size, uint32_t *idx)
{
    ka_rp_stream *p = &rp->s[s];
    uint32_t i = p->nalloc < KA_RP_NONE ? p->nalloc++ : KA_RP_NONE;
    *idx = i;
    /* record it */
    if (i == p->nrec && i < KA_RP_MAX_REQS) {
        if (p->nrec == p->caprec) {
            uint32_t cap = p->caprec ? p->caprec * 2 : 256;
            ka_rp_req *r = realloc(p->rec, (size_t)cap * sizeof(*r));
            if (r) {
                p->rec = r;
                p->caprec = cap;
            }
        }
        if (p->nrec < p->caprec)
            p->rec[p->nrec++] = (ka_rp_req){
                .size = size, .t_alloc = rp->clock++, .t_free = KA_RP_NONE, .holders = 1};
    }
    if (i >= p->nrec)
        rp->overflow = true; /* not all of the run is known: it is not learned */
    /* replay it */
    if (!rp->have_plan)
        return NULL;
    ka_rp_req *q = planned(rp, s, i);
    if (!q || q->size != size) {
        rp->mismatch = true;
        goto fallback;
    }
    if (!q->planned || !rp->on)
        return NULL; /* no place (the plan did not fit), or not this run */
    for (uint32_t k = 0; k < q->ndep; k++)
        if (rp->req[rp->dep[q->dep + k]].done != rp->run)
            goto fallback;
    q->served = rp->run;
    q->holders = 1;
    rp->live++;
    rp->st.hits++;
    return (char *)rp->arena->addr + q->off;
fallback:
    rp->fell_back = true;
    rp->st.fallbacks++;
    return NULL;
}

bool ka_rp_free(ka_rp *rp, uint32_t s, uint32_t idx, uint32_t epoch, bool planned_block)
{
    ka_rp_req *r = recorded(rp, s, idx, epoch);
    if (r && r->holders && --r->holders == 0)
        r->t_free = rp->clock++;
    ka_rp_req *q = planned_block ? planned(rp, s, idx) : NULL;
    if (!q || !q->holders)
        return false; /* not handed out: a second free */
    if (--q->holders)
        return false;
    q->done = q->served; /* freed in the run that served it (or later: never a match) */
    rp->live--;
    return true;
}

void ka_rp_access(ka_rp *rp, uint32_t s, uint32_t idx, uint32_t epoch, bool planned_block)
{
    ka_rp_req *r = recorded(rp, s, idx, epoch);
    if (r && r->holders)
        r->holders++;
    ka_rp_req *q = planned_block ? planned(rp, s, idx) : NULL;
    if (q && q->holders)
        q->holders++;
}

/* ---- the offline placement ------------------------------------------------------- */

typedef struct span {
    size_t off, end;
} span;

static int cmp_span(const void *a, const void *b)
{
    const span *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

/* The sort's context (the caller holds the stack's lock; the test calls it alone). */
static const ka_rp_req *g_req;
static const size_t *g_breadth;

/* Largest first; of one size, the earliest first (a chain of same-sized blocks
 * then takes its slots in turn, as the run reuses them). */
static int cmp_size(const void *a, const void *b)
{
    const ka_rp_req *x = &g_req[*(const uint32_t *)a], *y = &g_req[*(const uint32_t *)b];
    if (x->size != y->size)
        return x->size > y->size ? -1 : 1;
    return x->t_alloc < y->t_alloc ? -1 : x->t_alloc > y->t_alloc;
}

/* The blocks of the busiest moments first (the largest live bytes during their
 * lifetime: those moments pack first, tightly), then as cmp_size. */
static int cmp_breadth(const void *a, const void *b)
{
    uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;
    if (g_breadth[i] != g_breadth[j])
        return g_breadth[i] > g_breadth[j] ? -1 : 1;
    return cmp_size(a, b);
}

static size_t round_up(size_t n) { return (n + KA_RP_ALIGN - 1) & ~(size_t)(KA_RP_ALIGN - 1); }

/* Place the blocks in @p order, each at the lowest offset clear of every
 * time-overlapping block placed before it (its list in adj[start[i]..end[i]));
 * offsets into @p off.  The extent. */
static size_t greedy(const ka_rp_req *r, const uint32_t *order, uint32_t np, const uint32_t *adj,
                     const uint32_t *end, bool *placed, span *sp, size_t *off, uint32_t n)
{
    size_t extent = 0;
    memset(placed, 0, n * sizeof(*placed));
    for (uint32_t o = 0; o < np; o++) {
        uint32_t i = order[o];
        uint32_t from = i ? end[i - 1] : 0, to = end[i], m = 0;
        for (uint32_t a = from; a < to; a++)
            if (placed[adj[a]])
                sp[m++] = (span){off[adj[a]], off[adj[a]] + round_up(r[adj[a]].size)};
        qsort(sp, m, sizeof(*sp), cmp_span);
        size_t size = round_up(r[i].size), at = 0;
        for (uint32_t a = 0; a < m && sp[a].off < at + size; a++)
            if (sp[a].end > at)
                at = sp[a].end;
        off[i] = at;
        placed[i] = true;
        if (at + size > extent)
            extent = at + size;
    }
    return extent;
}

size_t ka_rp_place(ka_rp_req *r, uint32_t n)
{
    /* planned requests in time order of their events (t values are distinct) */
    uint32_t np = 0, tmax = 0;
    for (uint32_t i = 0; i < n; i++)
        if (r[i].planned) {
            np++;
            if (r[i].t_free + 1 > tmax)
                tmax = r[i].t_free + 1;
        }
    if (!np)
        return 0;
    uint32_t *at = malloc(sizeof(uint32_t) * tmax), *order = malloc(sizeof(uint32_t) * np);
    uint32_t *deg = calloc(n + 1, sizeof(uint32_t)), *active = malloc(sizeof(uint32_t) * np);
    uint32_t *pos = malloc(sizeof(uint32_t) * n);
    size_t *breadth = calloc(n, sizeof(size_t)), *off = calloc(n, sizeof(size_t));
    bool *placed = calloc(n, sizeof(bool));
    uint32_t *adj = NULL;
    span *sp = NULL;
    size_t extent = SIZE_MAX;
    if (!at || !order || !deg || !active || !pos || !breadth || !off || !placed)
        goto out;
    for (uint32_t t = 0; t < tmax; t++)
        at[t] = UINT32_MAX;
    for (uint32_t i = 0; i < n; i++)
        if (r[i].planned) {
            at[r[i].t_alloc] = i << 1;
            at[r[i].t_free] = i << 1 | 1u;
        }
    /* pairs live at once: a sweep over time, counted, then listed (CSR); the
     * first pass also finds each block's busiest moment (live bytes peak
     * right after an alloc) */
    uint64_t pairs = 0;
    for (int pass = 0; pass < 2; pass++) {
        uint32_t na = 0;
        size_t now = 0;
        for (uint32_t t = 0; t < tmax; t++) {
            uint32_t e = at[t];
            if (e == UINT32_MAX)
                continue;
            uint32_t i = e >> 1;
            if (e & 1u) {
                uint32_t k = pos[i];
                active[k] = active[--na];
                pos[active[k]] = k;
                now -= round_up(r[i].size);
                continue;
            }
            now += round_up(r[i].size);
            if (pass == 0) {
                deg[i] += na;
                breadth[i] = now;
                for (uint32_t k = 0; k < na; k++) {
                    deg[active[k]]++;
                    if (now > breadth[active[k]])
                        breadth[active[k]] = now;
                }
                pairs += na;
            } else {
                for (uint32_t k = 0; k < na; k++) {
                    adj[deg[i]++] = active[k];
                    adj[deg[active[k]]++] = i;
                }
            }
            pos[i] = na;
            active[na++] = i;
        }
        if (pass == 0) {
            if (pairs > KA_RP_MAX_PAIRS)
                goto out;
            /* deg -> start offsets (exclusive prefix), filled by pass 1 */
            uint32_t sum = 0;
            for (uint32_t i = 0; i <= n; i++) {
                uint32_t d = deg[i];
                deg[i] = sum;
                sum += d;
            }
            if (!(adj = malloc(sizeof(uint32_t) * (pairs ? 2 * pairs : 1))) ||
                !(sp = malloc(sizeof(span) * (np + 1))))
                goto out;
        }
    }
    /* after pass 1, deg[i] is the end of i's list and deg[i-1] its start.
     * Two orders (neither wins on every trace), the better placement kept. */
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++)
        if (r[i].planned)
            order[k++] = i;
    g_req = r;
    g_breadth = breadth;
    qsort(order, np, sizeof(*order), cmp_size);
    extent = greedy(r, order, np, adj, deg, placed, sp, off, n);
    for (uint32_t i = 0; i < n; i++)
        r[i].off = off[i];
    qsort(order, np, sizeof(*order), cmp_breadth);
    size_t e2 = greedy(r, order, np, adj, deg, placed, sp, off, n);
    if (e2 < extent) {
        extent = e2;
        for (uint32_t i = 0; i < n; i++)
            r[i].off = off[i];
    }
out:
    free(at);
    free(order);
    free(deg);
    free(active);
    free(pos);
    free(breadth);
    free(off);
    free(placed);
    free(adj);
    free(sp);
    return extent;
}

/* ---- learning --------------------------------------------------------------------- */

typedef struct seg {
    size_t start;
    uint32_t owner; /* UINT32_MAX: no block held it yet */
} seg;

/* Each planned block's predecessors: in time order, a map of the arena's
 * ranges to the block that held them last; a block's predecessors are the
 * holders of its range before it takes the range.  false on OOM. */
static bool predecessors(ka_rp *rp, uint32_t tmax)
{
    uint32_t n = rp->nreq, *at = malloc(sizeof(uint32_t) * (tmax ? tmax : 1));
    seg *m = malloc(sizeof(seg) * (2 * (size_t)n + 2)),
        *tmp = malloc(sizeof(seg) * (2 * (size_t)n + 2));
    uint32_t *seen = calloc(n ? n : 1, sizeof(uint32_t));
    ka_vec dep = {0};
    bool ok = at && m && tmp && seen;
    if (!ok)
        goto out;
    for (uint32_t t = 0; t < tmax; t++)
        at[t] = UINT32_MAX;
    for (uint32_t i = 0; i < n; i++)
        if (rp->req[i].planned)
            at[rp->req[i].t_alloc] = i;
    uint32_t nm = 1;
    m[0] = (seg){0, UINT32_MAX};
    for (uint32_t t = 0; t < tmax && ok; t++) {
        uint32_t b = at[t];
        if (b == UINT32_MAX)
            continue;
        ka_rp_req *q = &rp->req[b];
        size_t lo = q->off,
               hi = q->off + ((q->size + KA_RP_ALIGN - 1) & ~(size_t)(KA_RP_ALIGN - 1));
        /* the segment holding lo: the last with start <= lo */
        uint32_t a = 0, z = nm;
        while (z - a > 1) {
            uint32_t mid = (a + z) / 2;
            if (m[mid].start <= lo)
                a = mid;
            else
                z = mid;
        }
        q->dep = dep.n;
        q->ndep = 0;
        uint32_t e = a;
        for (; e < nm && m[e].start < hi; e++) {
            uint32_t o = m[e].owner;
            if (o != UINT32_MAX && seen[o] != b + 1) {
                seen[o] = b + 1;
                if (!(ok = ka_vec_push(&dep, &o, sizeof(o))))
                    break;
                q->ndep++;
            }
        }
        /* segments a..e-1 overlap [lo, hi): keep their part below lo and the
         * last one's part from hi, b holds [lo, hi) */
        uint32_t w = 0;
        if (m[a].start < lo)
            tmp[w++] = m[a];
        tmp[w++] = (seg){lo, b};
        if (e == nm || m[e].start > hi)
            tmp[w++] = (seg){hi, m[e - 1].owner};
        memmove(m + a + w, m + e, sizeof(seg) * (nm - e));
        memcpy(m + a, tmp, sizeof(seg) * w);
        nm = a + w + (nm - e);
    }
    if (ok) {
        rp->dep = dep.p;
        dep.p = NULL;
    }
out:
    ka_vec_free(&dep);
    free(at);
    free(m);
    free(tmp);
    free(seen);
    return ok;
}

/* The plan of the run just recorded; false on OOM (the old plan is kept). */
static bool adopt(ka_rp *rp, ka_l1 *l1)
{
    uint32_t n = 0;
    for (uint32_t s = 0; s < rp->streams; s++)
        n += rp->s[s].nrec;
    ka_rp_req *req = malloc(sizeof(*req) * (n ? n : 1));
    if (!req)
        return false;
    uint32_t k = 0;
    for (uint32_t s = 0; s < rp->streams; s++)
        for (uint32_t i = 0; i < rp->s[s].nrec; i++) {
            ka_rp_req q = rp->s[s].rec[i];
            q.planned = q.t_free != KA_RP_NONE;
            q.holders = q.served = q.done = 0;
            q.off = 0;
            q.dep = q.ndep = 0;
            req[k++] = q;
        }
    size_t extent = ka_rp_place(req, n);
    if (extent == SIZE_MAX) { /* too large to place: all on the normal path */
        for (uint32_t i = 0; i < n; i++)
            req[i].planned = false;
        extent = 0;
    }
    /* nothing is live: the old arena goes, the heap's free top goes back to
     * the system but for what the new arena takes, from the bottom */
    drop_plan(rp, l1);
    rp->req = req;
    rp->nreq = n;
    k = 0;
    for (uint32_t s = 0; s < rp->streams; s++) {
        rp->s[s].first = k;
        rp->s[s].nreq = rp->s[s].nrec;
        k += rp->s[s].nrec;
    }
    if (!predecessors(rp, rp->clock))
        extent = 0;
    ka_l1_trim(l1, ka_size_class(extent));
    if (extent && !(rp->arena = ka_l1_alloc(l1, extent)))
        extent = 0;
    if (!extent)
        for (uint32_t i = 0; i < n; i++) /* no room: the normal path serves all */
            req[i].planned = false;
    rp->extent = extent;
    rp->st.arena = rp->arena ? rp->arena->size : 0;
    l1->st.steady_peak_reserved = l1->st.reserved;
    rp->have_plan = true;
    rp->st.plans++;
    return true;
}

bool ka_rp_end_run(ka_rp *rp, ka_l1 *l1, bool clean)
{
    if (rp->live)
        clean = false;
    for (uint32_t s = 0; s < rp->streams; s++)
        if (rp->s[s].nalloc != rp->s[s].nreq)
            rp->mismatch = true; /* more or fewer requests than planned */
    rp->fallback_runs = rp->fell_back ? rp->fallback_runs + 1 : 0;
    bool learn = !rp->have_plan || rp->mismatch || rp->fallback_runs >= 2;
    bool adopted = clean && !rp->overflow && learn && adopt(rp, l1);
    if (adopted)
        rp->fallback_runs = 0;
    for (uint32_t s = 0; s < rp->streams; s++)
        rp->s[s].nrec = rp->s[s].nalloc = 0;
    rp->clock = 0;
    rp->epoch++;
    if (++rp->run == 0) { /* the stamps wrapped: none may match a new run */
        for (uint32_t i = 0; i < rp->nreq; i++)
            rp->req[i].served = rp->req[i].done = 0;
        rp->run = 1;
    }
    rp->mismatch = rp->fell_back = rp->overflow = false;
    rp->on = rp->have_plan && rp->live == 0; /* an arena block still held: not this run */
    return adopted;
}

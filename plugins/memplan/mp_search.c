/*
 * mp_search.c - the planner's exact search (a decision procedure: does a plan
 * with peak <= cap exist?), after the canonical-solution idea of MiniMalloc
 * (Moffitt, ASPLOS 2023), written for kiln.
 *
 * Canonical placements: push every block of a plan down as far as it goes;
 * then each block sits at 0 or on top of a block it overlaps in time, and
 * taking blocks by increasing offset (ties by a static preorder) each one's
 * offset is the top of the already placed blocks it overlaps ("its lowest
 * offset", kept incrementally in lowoff[]).  So the search places, at each
 * node, one block at its lowest offset, with (offset, preorder) never
 * decreasing along a branch.  Pruning:
 *   - section bound: in every section, the floor (the top of the placed blocks
 *     there, and at least the last placed offset) plus the sizes still to
 *     place there must fit under cap;
 *   - dominance: placing a block at or above the top that some unplaced block
 *     would have at its lowest offset leaves a hole that block could fill, so
 *     such a branch is skipped;
 *   - FIXED blocks are placed before the search starts.
 * Candidates at a node are tried by (lowest offset, preorder).  Undo is a
 * trail of old values.  Depth <= n; each node costs O(n log n + sections).
 */
#include "mp.h"

#include <stdlib.h>
#include <string.h>

typedef struct cand {
    int64_t off;
    uint32_t pidx, blk;
} cand;

typedef struct trail {
    uint32_t idx;
    int64_t old;
} trail;

typedef struct sstate {
    const mp_prob *mp;
    int64_t cap;
    uint32_t *pidx;             /* [n] position in the preorder */
    uint32_t *adj_start, *adj;  /* CSR of time overlaps (non-fixed blocks only) */
    int64_t *lowoff;            /* [n] lowest offset of an unplaced block */
    bool *placed;               /* [n] */
    int64_t *off;               /* [n] current offsets */
    int64_t *floor, *rem;       /* [nsec] */
    cand *cands;                /* [n * (n + 1)]: one row per depth */
    trail *mtr, *ftr;           /* trails of lowoff and floor changes */
    size_t nmtr, nftr;
    uint32_t left;              /* blocks still to place */
    uint64_t nodes, node_limit, deadline;
    int timed_out;
} sstate;

static int cmp_cand(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    if (x->off != y->off)
        return x->off < y->off ? -1 : 1;
    return (x->pidx > y->pidx) - (x->pidx < y->pidx);
}

/* Build the overlap lists by a sweep over section starts.  O(n log n + pairs). */
static bool build_adj(sstate *s)
{
    const mp_prob *mp = s->mp;
    uint32_t n = mp->n;
    uint32_t *deg = calloc(n + 1, sizeof(uint32_t));
    if (!deg)
        return false;
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t j = i + 1; j < n; j++)
            if (mp->lo[i] < mp->hi[j] && mp->lo[j] < mp->hi[i]) {
                deg[i]++;
                deg[j]++;
            }
    s->adj_start = malloc((n + 1) * sizeof(uint32_t));
    if (!s->adj_start) {
        free(deg);
        return false;
    }
    s->adj_start[0] = 0;
    for (uint32_t i = 0; i < n; i++)
        s->adj_start[i + 1] = s->adj_start[i] + deg[i];
    s->adj = malloc(((size_t)s->adj_start[n] + 1) * sizeof(uint32_t));
    if (!s->adj) {
        free(deg);
        return false;
    }
    memset(deg, 0, (n + 1) * sizeof(uint32_t));
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t j = i + 1; j < n; j++)
            if (mp->lo[i] < mp->hi[j] && mp->lo[j] < mp->hi[i]) {
                s->adj[s->adj_start[i] + deg[i]++] = j;
                s->adj[s->adj_start[j] + deg[j]++] = i;
            }
    free(deg);
    return true;
}

/* Place block @p b at @p o: raise its neighbours' lowest offsets and its
 * sections' floors, recording old values on the trails. */
static void place(sstate *s, uint32_t b, int64_t o)
{
    const mp_prob *mp = s->mp;
    int64_t top = o + mp->size[b];
    s->placed[b] = true;
    s->off[b] = o;
    s->left--;
    for (uint32_t k = s->adj_start[b]; k < s->adj_start[b + 1]; k++) {
        uint32_t x = s->adj[k];
        if (s->placed[x])
            continue;
        int64_t want = mp_align_up(top, mp->align[x]);
        if (s->lowoff[x] < want) {
            s->mtr[s->nmtr++] = (trail){x, s->lowoff[x]};
            s->lowoff[x] = want;
        }
    }
    for (uint32_t q = mp->lo[b]; q < mp->hi[b]; q++) {
        s->ftr[s->nftr++] = (trail){q, s->floor[q]};
        s->floor[q] = top;
        s->rem[q] -= mp->size[b];
    }
}

static void unplace(sstate *s, uint32_t b, size_t mtr0, size_t ftr0)
{
    const mp_prob *mp = s->mp;
    while (s->nmtr > mtr0) {
        trail t = s->mtr[--s->nmtr];
        s->lowoff[t.idx] = t.old;
    }
    while (s->nftr > ftr0) {
        trail t = s->ftr[--s->nftr];
        s->floor[t.idx] = t.old;
    }
    for (uint32_t q = mp->lo[b]; q < mp->hi[b]; q++)
        s->rem[q] += mp->size[b];
    s->placed[b] = false;
    s->left++;
}

/* Section bound: every section's floor (at least @p o) plus what is left there fits. */
static bool sections_fit(const sstate *s, int64_t o)
{
    for (uint32_t q = 0; q < s->mp->nsec; q++) {
        if (s->rem[q] == 0)
            continue;
        int64_t f = s->floor[q] > o ? s->floor[q] : o;
        if (f + s->rem[q] > s->cap)
            return false;
    }
    return true;
}

/* 1 found, 0 none below this node, -1 out of time/nodes. */
static int dfs(sstate *s, uint32_t depth, int64_t last_off, uint32_t last_pidx)
{
    const mp_prob *mp = s->mp;
    if (s->left == 0)
        return 1;
    if (++s->nodes > s->node_limit)
        return -1;
    if ((s->nodes & 1023) == 0 && mp_now_ns() > s->deadline) {
        s->timed_out = 1;
        return -1;
    }
    cand *c = s->cands + (size_t)depth * (mp->n + 1);
    uint32_t nc = 0;
    int64_t min_top = INT64_MAX;
    for (uint32_t b = 0; b < mp->n; b++) {
        if (s->placed[b])
            continue;
        int64_t lo = s->lowoff[b];
        if (lo + mp->size[b] < min_top)
            min_top = lo + mp->size[b];
        if (lo < last_off || (lo == last_off && s->pidx[b] < last_pidx))
            continue; /* not canonical here */
        c[nc++] = (cand){lo, s->pidx[b], b};
    }
    if (nc > 1)
        qsort(c, nc, sizeof(cand), cmp_cand);
    for (uint32_t i = 0; i < nc; i++) {
        uint32_t b = c[i].blk;
        int64_t o = c[i].off;
        if (o >= min_top)
            break; /* dominated, and so is every later candidate (sorted by offset) */
        if (o + mp->size[b] > s->cap)
            continue;
        size_t m0 = s->nmtr, f0 = s->nftr;
        place(s, b, o);
        int r = 0;
        if (sections_fit(s, o))
            r = dfs(s, depth + 1, o, c[i].pidx);
        if (r != 0)
            return r; /* found (offsets stay) or out of budget */
        unplace(s, b, m0, f0);
    }
    return 0;
}

int mp_search(const mp_prob *mp, const uint32_t *perm, int64_t cap, uint64_t deadline_ns,
              uint64_t node_limit, int64_t *off, uint64_t *nodes)
{
    uint32_t n = mp->n, S = mp->nsec;
    sstate s;
    memset(&s, 0, sizeof(s));
    s.mp = mp;
    s.cap = cap;
    s.node_limit = node_limit;
    s.deadline = deadline_ns;
    int ret = -2;
    s.pidx = malloc((n + 1) * sizeof(uint32_t));
    s.lowoff = calloc(n + 1, sizeof(int64_t));
    s.placed = calloc(n + 1, sizeof(bool));
    s.off = calloc(n + 1, sizeof(int64_t));
    s.floor = calloc(S + 1, sizeof(int64_t));
    s.rem = calloc(S + 1, sizeof(int64_t));
    s.cands = malloc((size_t)(n + 1) * (n + 1) * sizeof(cand));
    if (!s.pidx || !s.lowoff || !s.placed || !s.off || !s.floor || !s.rem || !s.cands ||
        !build_adj(&s))
        goto out;
    size_t span = 0;
    for (uint32_t i = 0; i < n; i++)
        span += mp->hi[i] - mp->lo[i];
    s.mtr = malloc(((size_t)s.adj_start[n] + 1) * sizeof(trail));
    s.ftr = malloc((span + 1) * sizeof(trail));
    if (!s.mtr || !s.ftr)
        goto out;
    for (uint32_t i = 0; i < n; i++) {
        s.pidx[perm[i]] = i;
        s.lowoff[i] = 0;
        for (uint32_t q = mp->lo[i]; q < mp->hi[i]; q++)
            s.rem[q] += mp->size[i];
    }
    s.left = n;
    for (uint32_t i = 0; i < n; i++)
        if (mp->fixed[i] >= 0) {
            if (mp->fixed[i] + mp->size[i] > cap) {
                ret = 0;
                goto out;
            }
            place(&s, i, mp->fixed[i]);
        }
    s.nmtr = s.nftr = 0; /* fixed placements are never undone */
    if (!sections_fit(&s, 0)) {
        ret = 0;
        goto out;
    }
    int r = dfs(&s, 0, 0, 0);
    if (r == 1)
        memcpy(off, s.off, n * sizeof(int64_t));
    ret = r;
out:
    if (nodes)
        *nodes = s.nodes;
    free(s.pidx);
    free(s.lowoff);
    free(s.placed);
    free(s.off);
    free(s.floor);
    free(s.rem);
    free(s.cands);
    free(s.adj_start);
    free(s.adj);
    free(s.mtr);
    free(s.ftr);
    return ret;
}

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
 * decreasing along a branch; candidates are tried by (lowest offset,
 * preorder), the "dynamic ordering".  Pruning and inference:
 *   - section bound: in every section the unplaced blocks must all fit above
 *     the section's floor, the larger of the last placed offset (offsets never
 *     decrease) and the smallest lowest offset of an unplaced block there
 *     (MiniMalloc's "unallocated floor"; it covers the tops of the placed
 *     blocks, since every unplaced block of the section sits above them);
 *   - a block whose lowest offset already leaves no room for it ends a branch;
 *   - dominance: placing a block at or above the top that some unplaced block
 *     would have at its lowest offset leaves a hole that block could fill, so
 *     such a branch is skipped;
 *   - decomposition: once no unplaced block spans the boundary between two
 *     sections (cuts[] counts them), the blocks on either side no longer
 *     interact and are solved one part after the other; a part that has no
 *     plan fails the node without trying the others' alternatives.  Under
 *     some preorders each part is re-sorted by the preorder's keys with the
 *     section totals of its still unplaced blocks (MiniMalloc's
 *     per-partition preorder): the static totals describe the whole problem,
 *     not what is left of a part.
 * FIXED blocks are placed before the search starts.  Undo: a stack of placed
 * blocks and a trail of lowest-offset changes.  Depth <= n; a node costs
 * O(k log k + span) for the k unplaced blocks of its part and their sections.
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

typedef struct pkey {
    int64_t k[3]; /* descending */
    uint32_t idx;
} pkey;

/* A part: blocks arena[b0 .. b0 + nb) (some may be placed meanwhile), sections [slo, shi). */
typedef struct part {
    size_t b0;
    uint32_t nb, slo, shi;
} part;

struct mp_search {
    const mp_prob *mp;
    uint32_t n, S;
    uint32_t *adj_start, *adj;   /* CSR of time overlaps */
    uint32_t *pre[MP_SEARCH_ORDERS + 1]; /* preorders (block indices); the last: a perturbed copy */
    uint32_t *pidx;              /* [n] position in the preorder of this run */
    int64_t *lowoff;             /* [n] lowest offset of an unplaced block */
    bool *placed;                /* [n] */
    int64_t *off;                /* [n] current offsets */
    int64_t *rem;                /* [S] sizes still to place per section */
    int64_t *fl;                 /* [S] unallocated floor: least lowoff of an unplaced block */
    uint32_t *sec_start, *sec_blk; /* CSR: the blocks live in each section */
    uint32_t *dirty, *stamp;     /* [S] sections whose floor may have risen; a mark */
    uint32_t ndirty, gen;
    uint32_t *cuts;              /* [S] unplaced blocks spanning boundary s | s+1 */
    cand *cands;                 /* [(n + 1) * (n + 1)]: one row per depth */
    trail *mtr;                  /* lowoff trail */
    size_t nmtr;
    trail *ftr;                  /* floor trail (grows) */
    size_t nftr, cftr;
    uint32_t *stk;               /* [n] placed blocks in order */
    size_t *stk_m, *stk_f;       /* [n] trail marks before each placement */
    uint32_t nstk;
    uint32_t *arena;             /* part block lists and cut points, a stack */
    size_t atop, acap;
    int64_t cap;
    uint64_t nodes, node_limit, deadline, next_clock;
    int order;                   /* preorder of this run (its keys re-sort each part) */
    uint64_t seed, rng;          /* perturbation of this run (0: none) and its state */
    uint32_t window;
    int64_t *tot;                /* [n] scratch: a block's largest remaining section total */
    pkey *keys;                  /* [n] scratch: sort keys of a part */
};

static int cmp_cand(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    if (x->off != y->off)
        return x->off < y->off ? -1 : 1;
    return (x->pidx > y->pidx) - (x->pidx < y->pidx);
}

/* Build the overlap lists (pairwise test).  O(n^2). */
static bool build_adj(mp_search *s)
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
    s->mtr = malloc(((size_t)s->adj_start[n] + 1) * sizeof(trail));
    if (!s->adj || !s->mtr) {
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

/* ---- preorders ------------------------------------------------------------ */

static int cmp_pkey(const void *a, const void *b)
{
    const pkey *x = a, *y = b;
    for (int i = 0; i < 3; i++)
        if (x->k[i] != y->k[i])
            return x->k[i] > y->k[i] ? -1 : 1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

/* The preorders: keys, most significant first, each descending (W width,
 * the lifetime in steps; A area, width x size; Z size; C sections spanned;
 * T the largest section total over the block's sections), and whether each
 * part the decomposition splits off is re-sorted with the section totals of
 * its still unplaced blocks (MiniMalloc's per-partition preorder; otherwise
 * the static totals of the whole problem order every part).  MiniMalloc's
 * W-A-T, T-A-W, T-W-A, kept static: re-sorted, they lose the perfect
 * packings of test_memplan_kiln (one from 1.05 to 1.23 x); T-C-W re-sorted
 * packs MiniMalloc's E at LOAD in about 4,400 nodes (no static preorder does
 * in 2 million); A-W-T re-sorted (its randomized restarts help B and H). */
static const struct {
    const char *keys;
    bool per_part;
} pre_def[MP_SEARCH_ORDERS] = {
    {"WAT", false}, {"TAW", false}, {"TWA", false}, {"TCW", true}, {"AWT", true}};

/* Fill @p k with block @p i's keys under preorder @p o, its section total
 * being @p tot.  O(1). */
static void key_of(const mp_prob *mp, int o, uint32_t i, int64_t tot, pkey *k)
{
    int64_t w = (int64_t)(mp->sec_t[mp->hi[i]] - mp->sec_t[mp->lo[i]]);
    k->idx = i;
    for (int j = 0; j < 3; j++) {
        char c = pre_def[o].keys[j];
        k->k[j] = c == 'W'   ? w
                  : c == 'A' ? w * mp->size[i]
                  : c == 'Z' ? mp->size[i]
                  : c == 'C' ? (int64_t)(mp->hi[i] - mp->lo[i])
                             : tot;
    }
}

/* The static preorders (section totals of the whole problem).
 * O(n log n + S log S). */
static bool build_preorders(mp_search *s)
{
    const mp_prob *mp = s->mp;
    uint32_t n = mp->n;
    int64_t *tot = s->tot;
    pkey *k = s->keys;
    bool ok = mp_max_totals(mp, tot);
    for (int o = 0; ok && o < MP_SEARCH_ORDERS; o++) {
        for (uint32_t i = 0; i < n; i++)
            key_of(mp, o, i, tot[i], &k[i]);
        if (n > 1) /* qsort(NULL, 0) is undefined */
            qsort(k, n, sizeof(pkey), cmp_pkey);
        s->pre[o] = malloc((n + 1) * sizeof(uint32_t));
        if (!s->pre[o]) {
            ok = false;
            break;
        }
        for (uint32_t i = 0; i < n; i++)
            s->pre[o][i] = k[i].idx;
    }
    s->pre[MP_SEARCH_ORDERS] = malloc((n + 1) * sizeof(uint32_t));
    return ok && s->pre[MP_SEARCH_ORDERS];
}

/* Perturb the @p n entries of @p p: each position swaps with one of the
 * next @p window ones (xorshift state @p x), so the order stays close to a
 * heuristic's but the search starts elsewhere.  O(n). */
static void shuffle_window(uint32_t *p, uint32_t n, uint64_t *x, uint32_t window)
{
    for (uint32_t i = 0; i + 1 < n; i++) {
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
        uint32_t j = i + (uint32_t)(*x % (window + 1));
        uint32_t t = p[i];
        if (j >= n)
            j = n - 1;
        p[i] = p[j];
        p[j] = t;
    }
}

/* Copy preorder @p o into the scratch preorder and perturb it from @p seed
 * (the run's perturbation state starts there).  O(n). */
static const uint32_t *perturbed(mp_search *s, int o, uint64_t seed, uint32_t window)
{
    uint32_t *p = s->pre[MP_SEARCH_ORDERS], n = s->n;
    memcpy(p, s->pre[o], n * sizeof(uint32_t));
    s->rng = seed * 0x9E3779B97F4A7C15ull + 1;
    shuffle_window(p, n, &s->rng, window);
    return p;
}

/* The blocks live in each section (CSR).  O(n + span). */
static bool build_sections(mp_search *s)
{
    const mp_prob *mp = s->mp;
    uint32_t S = s->S;
    s->sec_start = calloc(S + 2, sizeof(uint32_t));
    if (!s->sec_start)
        return false;
    for (uint32_t i = 0; i < s->n; i++)
        for (uint32_t q = mp->lo[i]; q < mp->hi[i]; q++)
            s->sec_start[q + 2]++;
    for (uint32_t q = 0; q < S; q++)
        s->sec_start[q + 2] += s->sec_start[q + 1];
    s->sec_blk = malloc(((size_t)s->sec_start[S + 1] + 1) * sizeof(uint32_t));
    if (!s->sec_blk)
        return false;
    for (uint32_t i = 0; i < s->n; i++)
        for (uint32_t q = mp->lo[i]; q < mp->hi[i]; q++)
            s->sec_blk[s->sec_start[q + 1]++] = i;
    return true;
}

void mp_search_free(mp_search *s)
{
    if (!s)
        return;
    free(s->adj_start);
    free(s->adj);
    for (int o = 0; o <= MP_SEARCH_ORDERS; o++)
        free(s->pre[o]);
    free(s->pidx);
    free(s->lowoff);
    free(s->placed);
    free(s->off);
    free(s->rem);
    free(s->fl);
    free(s->cuts);
    free(s->cands);
    free(s->mtr);
    free(s->stk);
    free(s->stk_m);
    free(s->stk_f);
    free(s->arena);
    free(s->ftr);
    free(s->sec_start);
    free(s->sec_blk);
    free(s->dirty);
    free(s->stamp);
    free(s->tot);
    free(s->keys);
    free(s);
}

mp_search *mp_search_new(const mp_prob *mp)
{
    mp_search *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    uint32_t n = mp->n, S = mp->nsec;
    s->mp = mp;
    s->n = n;
    s->S = S;
    s->pidx = malloc((n + 1) * sizeof(uint32_t));
    s->lowoff = calloc(n + 1, sizeof(int64_t));
    s->placed = calloc(n + 1, sizeof(bool));
    s->off = calloc(n + 1, sizeof(int64_t));
    s->rem = calloc(S + 1, sizeof(int64_t));
    s->fl = calloc(S + 1, sizeof(int64_t));
    s->cuts = calloc(S + 1, sizeof(uint32_t));
    s->cands = malloc((size_t)(n + 1) * (n + 1) * sizeof(cand));
    s->stk = malloc((n + 1) * sizeof(uint32_t));
    s->stk_m = malloc((n + 1) * sizeof(size_t));
    s->stk_f = malloc((n + 1) * sizeof(size_t));
    s->dirty = malloc((S + 1) * sizeof(uint32_t));
    s->stamp = calloc(S + 1, sizeof(uint32_t));
    s->cftr = 4 * (size_t)(S + 1);
    s->ftr = malloc(s->cftr * sizeof(trail));
    s->acap = 4 * (size_t)(n + S) + 64;
    s->arena = malloc(s->acap * sizeof(uint32_t));
    s->tot = malloc((n + 1) * sizeof(int64_t));
    s->keys = malloc((n + 1) * sizeof(pkey));
    if (!s->pidx || !s->lowoff || !s->placed || !s->off || !s->rem || !s->fl || !s->cuts ||
        !s->tot || !s->keys || !s->cands || !s->stk || !s->stk_m || !s->stk_f || !s->dirty || !s->stamp || !s->ftr ||
        !s->arena || !build_adj(s) || !build_preorders(s) || !build_sections(s)) {
        mp_search_free(s);
        return NULL;
    }
    return s;
}

/* Reserve @p k entries on the arena; returns their start or SIZE_MAX. */
static size_t arena_push(mp_search *s, size_t k)
{
    if (s->atop + k > s->acap) {
        size_t cap = 2 * (s->atop + k);
        uint32_t *a = realloc(s->arena, cap * sizeof(uint32_t));
        if (!a)
            return SIZE_MAX;
        s->arena = a;
        s->acap = cap;
    }
    size_t at = s->atop;
    s->atop += k;
    return at;
}

/* Mark section @p q's floor as possibly risen. */
static void mark_dirty(mp_search *s, uint32_t q)
{
    if (s->stamp[q] != s->gen) {
        s->stamp[q] = s->gen;
        s->dirty[s->ndirty++] = q;
    }
}

/* Place block @p b at @p o: raise its unplaced neighbours' lowest offsets
 * (trailed), take its size out of its sections and mark the sections whose
 * floor was the lowest offset of a block that changed.  Returns false when a
 * neighbour no longer fits under cap. */
static bool place(mp_search *s, uint32_t b, int64_t o)
{
    const mp_prob *mp = s->mp;
    int64_t top = o + mp->size[b];
    bool ok = true;
    s->stk[s->nstk] = b;
    s->stk_f[s->nstk] = s->nftr;
    s->stk_m[s->nstk++] = s->nmtr;
    s->placed[b] = true;
    s->off[b] = o;
    s->gen++;
    s->ndirty = 0;
    for (uint32_t k = s->adj_start[b]; k < s->adj_start[b + 1]; k++) {
        uint32_t x = s->adj[k];
        if (s->placed[x])
            continue;
        int64_t want = mp_align_up(top, mp->align[x]), old = s->lowoff[x];
        if (old < want) {
            s->mtr[s->nmtr++] = (trail){x, old};
            s->lowoff[x] = want;
            if (want + mp->size[x] > s->cap)
                ok = false;
            for (uint32_t q = mp->lo[x]; q < mp->hi[x]; q++)
                if (s->fl[q] == old)
                    mark_dirty(s, q);
        }
    }
    for (uint32_t q = mp->lo[b]; q < mp->hi[b]; q++) {
        s->rem[q] -= mp->size[b];
        if (s->fl[q] == s->lowoff[b])
            mark_dirty(s, q);
    }
    return ok;
}

/* Undo placements down to @p mark entries on the stack. */
static void unplace_to(mp_search *s, uint32_t mark)
{
    const mp_prob *mp = s->mp;
    while (s->nstk > mark) {
        uint32_t b = s->stk[--s->nstk];
        size_t m0 = s->stk_m[s->nstk], f0 = s->stk_f[s->nstk];
        while (s->nmtr > m0) {
            trail t = s->mtr[--s->nmtr];
            s->lowoff[t.idx] = t.old;
        }
        while (s->nftr > f0) {
            trail t = s->ftr[--s->nftr];
            s->fl[t.idx] = t.old;
        }
        for (uint32_t q = mp->lo[b]; q < mp->hi[b]; q++)
            s->rem[q] += mp->size[b];
        s->placed[b] = false;
    }
}

/* Recompute the floors of the dirty sections (trailed) and check the
 * section bound there: the unplaced sizes of a section fit above its floor.
 * Returns 0 pruned, 1 fine, -2 out of memory.  O(occupancy of the dirty
 * sections). */
static int infer(mp_search *s)
{
    for (uint32_t i = 0; i < s->ndirty; i++) {
        uint32_t q = s->dirty[i];
        int64_t f = INT64_MAX;
        for (uint32_t k = s->sec_start[q]; k < s->sec_start[q + 1]; k++) {
            uint32_t x = s->sec_blk[k];
            if (!s->placed[x] && s->lowoff[x] < f)
                f = s->lowoff[x];
        }
        if (f == s->fl[q])
            continue;
        if (s->nftr == s->cftr) {
            trail *t = realloc(s->ftr, 2 * s->cftr * sizeof(trail));
            if (!t)
                return -2;
            s->ftr = t;
            s->cftr *= 2;
        }
        s->ftr[s->nftr++] = (trail){q, s->fl[q]};
        s->fl[q] = f;
        if (s->rem[q] > 0 && f + s->rem[q] > s->cap)
            return 0;
    }
    return 1;
}

/* The monotonic floor of part @p p: every section still holding unplaced
 * blocks has room for them above @p o, the last placed offset.  O(sections). */
static bool check(mp_search *s, const part *p, int64_t o)
{
    for (uint32_t q = p->slo; q < p->shi; q++)
        if (s->rem[q] > 0 && o + s->rem[q] > s->cap)
            return false;
    return true;
}

static int dfs(mp_search *s, const part *p, int64_t last_off, uint32_t last_pidx);

/* MiniMalloc's per-partition preorder (for the preorders that ask for it):
 * sort the blocks of part @p p (all unplaced) by the run's preorder keys, the section total now being the
 * largest remaining (unplaced) total over the block's sections, perturbed
 * like the run's preorder when it has a seed; give them preorder positions
 * 0 .. nb-1.  The blocks and their old positions go onto the arena as
 * pairs (returned: their start; SIZE_MAX out of memory) for the caller to
 * restore.  O(k log k + span). */
static size_t reorder_part(mp_search *s, const part *p)
{
    const mp_prob *mp = s->mp;
    size_t saved = arena_push(s, 2 * (size_t)p->nb + 1);
    if (saved == SIZE_MAX)
        return SIZE_MAX;
    for (uint32_t k = 0; k < p->nb; k++) {
        uint32_t x = s->arena[p->b0 + k];
        int64_t tot = 0;
        for (uint32_t q = mp->lo[x]; q < mp->hi[x]; q++)
            if (s->rem[q] > tot)
                tot = s->rem[q];
        s->arena[saved + 2 * k] = x;
        s->arena[saved + 2 * k + 1] = s->pidx[x];
        key_of(mp, s->order, x, tot, &s->keys[k]);
    }
    if (p->nb > 1)
        qsort(s->keys, p->nb, sizeof(pkey), cmp_pkey);
    for (uint32_t k = 0; k < p->nb; k++)
        s->arena[p->b0 + k] = s->keys[k].idx;
    if (s->seed)
        shuffle_window(s->arena + p->b0, p->nb, &s->rng, s->window);
    for (uint32_t k = 0; k < p->nb; k++)
        s->pidx[s->arena[p->b0 + k]] = k;
    return saved;
}

/* Solve the unplaced blocks of @p p split at the sorted section boundaries
 * arena[c0 .. c0 + nc) (each a zero-cut boundary inside p): the parts one
 * after the other.  1 all solved (placements kept), 0 one has no plan, -1
 * budget, -2 out of memory. */
static int solve_split(mp_search *s, const part *p, size_t c0, uint32_t nc)
{
    const mp_prob *mp = s->mp;
    size_t top0 = s->atop;
    size_t cnt = arena_push(s, (size_t)nc + 2);
    if (cnt == SIZE_MAX)
        return -2;
    memset(s->arena + cnt, 0, ((size_t)nc + 2) * sizeof(uint32_t));
    /* which part a block falls in: the number of cut points <= its first section */
    uint32_t total = 0;
    for (uint32_t k = 0; k < p->nb; k++) {
        uint32_t x = s->arena[p->b0 + k];
        if (s->placed[x])
            continue;
        uint32_t lo = 0, hi = nc;
        while (lo < hi) {
            uint32_t mid = (lo + hi) / 2;
            if (s->arena[c0 + mid] <= mp->lo[x])
                lo = mid + 1;
            else
                hi = mid;
        }
        s->arena[cnt + lo + 1]++;
        total++;
    }
    size_t lists = arena_push(s, total + 1);
    if (lists == SIZE_MAX)
        return -2;
    for (uint32_t j = 1; j <= nc + 1; j++)
        s->arena[cnt + j] += s->arena[cnt + j - 1];
    /* fill (a counting sort keeps each part's blocks in their original order) */
    for (uint32_t k = 0; k < p->nb; k++) {
        uint32_t x = s->arena[p->b0 + k];
        if (s->placed[x])
            continue;
        uint32_t lo = 0, hi = nc;
        while (lo < hi) {
            uint32_t mid = (lo + hi) / 2;
            if (s->arena[c0 + mid] <= mp->lo[x])
                lo = mid + 1;
            else
                hi = mid;
        }
        s->arena[lists + s->arena[cnt + lo]++] = x;
    }
    int r = 1;
    uint32_t start = 0;
    for (uint32_t j = 0; j <= nc && r == 1; j++) {
        uint32_t end = s->arena[cnt + j];
        if (end == start)
            continue;
        part sub = {lists + start, end - start, j == 0 ? p->slo : s->arena[c0 + j - 1],
                    j == nc ? p->shi : s->arena[c0 + j]};
        start = end;
        size_t saved = pre_def[s->order].per_part ? reorder_part(s, &sub) : 0;
        if (saved == SIZE_MAX) {
            r = -2;
            break;
        }
        r = dfs(s, &sub, 0, 0);
        if (pre_def[s->order].per_part)
            for (uint32_t k = 0; k < sub.nb; k++)
                s->pidx[s->arena[saved + 2 * k]] = s->arena[saved + 2 * k + 1];
    }
    s->atop = top0;
    return r;
}

/* After block @p b went to @p o in part @p p: split p where b was the last
 * unplaced block spanning a boundary, else go on in p. */
static int descend(mp_search *s, const part *p, uint32_t b, int64_t o, uint32_t pidx)
{
    const mp_prob *mp = s->mp;
    size_t top0 = s->atop;
    uint32_t nc = 0;
    size_t c0 = s->atop;
    for (uint32_t q = mp->lo[b]; q + 1 < mp->hi[b]; q++)
        if (--s->cuts[q] == 0) {
            size_t at = arena_push(s, 1);
            if (at == SIZE_MAX) {
                for (uint32_t r = mp->lo[b]; r + 1 < mp->hi[b]; r++)
                    s->cuts[r]++;
                return -2;
            }
            s->arena[at] = q + 1;
            nc++;
        }
    int r = nc == 0 ? dfs(s, p, o, pidx) : solve_split(s, p, c0, nc);
    for (uint32_t q = mp->lo[b]; q + 1 < mp->hi[b]; q++)
        s->cuts[q]++;
    s->atop = top0;
    return r;
}

/* 1 found (placements kept), 0 none below this node, -1 budget, -2 out of memory. */
static int dfs(mp_search *s, const part *p, int64_t last_off, uint32_t last_pidx)
{
    const mp_prob *mp = s->mp;
    cand *c = s->cands + (size_t)s->nstk * (s->n + 1);
    uint32_t nc = 0, left = 0;
    int64_t min_top = INT64_MAX;
    for (uint32_t k = 0; k < p->nb; k++) {
        uint32_t x = s->arena[p->b0 + k];
        if (s->placed[x])
            continue;
        left++;
        if (s->lowoff[x] + mp->size[x] < min_top)
            min_top = s->lowoff[x] + mp->size[x];
    }
    if (left == 0)
        return 1;
    if (++s->nodes > s->node_limit)
        return -1;
    if (s->nodes >= s->next_clock) {
        if (mp_now_ns() > s->deadline)
            return -1;
        s->next_clock = s->nodes + 4096;
    }
    /* the candidates: canonical here and below min_top (dominance), by
     * (offset, preorder); an insertion sort, as they are few */
    for (uint32_t k = 0; k < p->nb; k++) {
        uint32_t x = s->arena[p->b0 + k];
        int64_t lo = s->lowoff[x];
        if (s->placed[x] || lo >= min_top || lo < last_off ||
            (lo == last_off && s->pidx[x] < last_pidx))
            continue;
        cand e = {lo, s->pidx[x], x};
        uint32_t j = nc++;
        while (j > 0 && cmp_cand(&e, &c[j - 1]) < 0) {
            c[j] = c[j - 1];
            j--;
        }
        c[j] = e;
    }
    for (uint32_t i = 0; i < nc; i++) {
        uint32_t b = c[i].blk;
        int64_t o = c[i].off;
        if (o >= min_top)
            break; /* dominated, and so is every later candidate (sorted by offset) */
        if (o + mp->size[b] > s->cap)
            continue;
        if (++s->nodes > s->node_limit)
            return -1; /* a placement counts as a node: the budget follows the work */
        uint32_t mark = s->nstk;
        int r = place(s, b, o) && check(s, p, o) ? infer(s) : 0;
        if (r == 1)
            r = descend(s, p, b, o, c[i].pidx);
        if (r != 0)
            return r; /* found (placements stay) or out of budget */
        unplace_to(s, mark);
    }
    return 0;
}

int mp_search_run(mp_search *s, int preorder, uint64_t seed, uint32_t window, int64_t cap,
                  uint64_t node_limit, uint64_t deadline_ns, int64_t *off, uint64_t *nodes)
{
    const mp_prob *mp = s->mp;
    const uint32_t *pre = seed ? perturbed(s, preorder, seed, window) : s->pre[preorder];
    uint32_t n = s->n, S = s->S;
    s->cap = cap;
    s->order = preorder;
    s->seed = seed;
    s->window = window;
    s->node_limit = node_limit;
    s->deadline = deadline_ns;
    s->nodes = 0;
    s->next_clock = 0;
    s->nmtr = 0;
    s->nftr = 0;
    s->nstk = 0;
    s->atop = 0;
    memset(s->placed, 0, (n + 1) * sizeof(bool));
    memset(s->lowoff, 0, (n + 1) * sizeof(int64_t));
    memset(s->rem, 0, (S + 1) * sizeof(int64_t));
    memset(s->cuts, 0, (S + 1) * sizeof(uint32_t));
    for (uint32_t i = 0; i < n; i++) {
        s->pidx[pre[i]] = i;
        for (uint32_t q = mp->lo[i]; q < mp->hi[i]; q++)
            s->rem[q] += mp->size[i];
        if (mp->fixed[i] < 0)
            for (uint32_t q = mp->lo[i]; q + 1 < mp->hi[i]; q++)
                s->cuts[q]++;
    }
    int r = 0;
    for (uint32_t q = 0; q < S; q++)
        s->fl[q] = INT64_MAX;
    for (uint32_t i = 0; i < n; i++)
        if (mp->fixed[i] >= 0) {
            if (mp->fixed[i] + mp->size[i] > cap || !place(s, i, mp->fixed[i]))
                goto out;
        }
    /* the floors and the section bound with the FIXED blocks in place */
    for (uint32_t i = 0; i < n; i++)
        if (!s->placed[i]) {
            if (s->lowoff[i] + mp->size[i] > cap)
                goto out;
            for (uint32_t q = mp->lo[i]; q < mp->hi[i]; q++)
                if (s->lowoff[i] < s->fl[q])
                    s->fl[q] = s->lowoff[i];
        }
    for (uint32_t q = 0; q < S; q++)
        if (s->rem[q] > 0 && s->fl[q] + s->rem[q] > cap)
            goto out;
    s->nftr = 0;
    /* the whole problem as one part in preorder, split at its zero cuts */
    part all = {0, 0, 0, S};
    all.b0 = arena_push(s, n + 1);
    r = -2;
    if (all.b0 == SIZE_MAX)
        goto out;
    for (uint32_t i = 0; i < n; i++)
        if (!s->placed[pre[i]])
            s->arena[all.b0 + all.nb++] = pre[i];
    size_t c0 = s->atop;
    uint32_t nc = 0;
    for (uint32_t q = 0; q + 1 < S; q++)
        if (s->cuts[q] == 0) {
            size_t at = arena_push(s, 1);
            if (at == SIZE_MAX)
                goto out;
            s->arena[at] = q + 1;
            nc++;
        }
    r = solve_split(s, &all, c0, nc);
    if (r == 1)
        memcpy(off, s->off, n * sizeof(int64_t));
out:
    if (nodes)
        *nodes = s->nodes;
    return r;
}


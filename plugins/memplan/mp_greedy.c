/*
 * mp_greedy.c - the planner's fast placements.
 *
 * Skyline: every section keeps a floor (the top of the blocks placed in it);
 * a block's lowest offset is the largest floor over its sections.  The block
 * whose lowest offset is smallest goes next (ties: a rank order), which fills
 * the lowest valley first: the first descent of the exact search's canonical
 * placements.  A segment tree answers "largest floor over [lo, hi)" and raises
 * a range; a heap keyed by (lowest offset, rank) is re-keyed lazily (keys only
 * grow: a popped block whose key went stale goes back in).  A block goes back
 * at most rekey_limit times, then takes its current lowest offset: on traces
 * where thousands of blocks are live at once, exact keys cost tens of millions
 * of re-keys (5 s at 62k blocks), the limit keeps it near O(n log n).
 *
 * Best fit: blocks in a given order, each into the smallest gap (between the
 * placed blocks it overlaps in time) that holds it, else on top.  The placed
 * blocks a block overlaps come from an interval index (a segment tree over
 * sections with "covers this node" and "lies inside this node" lists).
 */
#include "mp.h"

#include <stdlib.h>
#include <string.h>

/* ---- a max segment tree with range chmax -------------------------------- */

typedef struct segtree {
    uint32_t P;      /* leaves (power of two >= sections) */
    int64_t *mx, *tg; /* subtree max (tags included); value applied to the whole node */
} segtree;

static bool seg_init(segtree *t, uint32_t nsec)
{
    t->P = 1;
    while (t->P < nsec)
        t->P <<= 1;
    t->mx = calloc(2 * (size_t)t->P, sizeof(int64_t));
    t->tg = calloc(2 * (size_t)t->P, sizeof(int64_t));
    return t->mx && t->tg;
}

static void seg_free(segtree *t)
{
    free(t->mx);
    free(t->tg);
}

static int64_t max64(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

/* Max over sections [l, r), bottom-up: the canonical nodes' maxima and the
 * tags of every node above them (the two boundary paths).  O(log P). */
static int64_t seg_query(const segtree *t, uint32_t l, uint32_t r)
{
    int64_t m = 0;
    uint32_t a = (l + t->P) >> 1, b = (r - 1 + t->P) >> 1;
    for (l += t->P, r += t->P; l < r; l >>= 1, r >>= 1) {
        if (l & 1)
            m = max64(m, t->mx[l++]);
        if (r & 1)
            m = max64(m, t->mx[--r]);
    }
    for (; a; a >>= 1)
        m = max64(m, t->tg[a]);
    for (; b; b >>= 1)
        m = max64(m, t->tg[b]);
    return m;
}

/* Raise sections [l, r) to at least @p val: tag the canonical nodes, raise
 * the maxima on the two boundary paths (a maximum raised below a tagged node
 * is harmless: queries see that node's tag anyway).  O(log P). */
static void seg_raise(segtree *t, uint32_t l, uint32_t r, int64_t val)
{
    uint32_t a = (l + t->P) >> 1, b = (r - 1 + t->P) >> 1;
    for (l += t->P, r += t->P; l < r; l >>= 1, r >>= 1) {
        if (l & 1) {
            t->tg[l] = max64(t->tg[l], val);
            t->mx[l] = max64(t->mx[l], val);
            l++;
        }
        if (r & 1) {
            --r;
            t->tg[r] = max64(t->tg[r], val);
            t->mx[r] = max64(t->mx[r], val);
        }
    }
    for (; a; a >>= 1)
        t->mx[a] = max64(t->mx[a], val);
    for (; b; b >>= 1)
        t->mx[b] = max64(t->mx[b], val);
}

/* ---- a binary heap of (key, rank, block) -------------------------------- */

typedef struct hent {
    int64_t key;
    uint32_t rank, blk;
} hent;

static bool hless(const hent *a, const hent *b)
{
    return a->key != b->key ? a->key < b->key : a->rank < b->rank;
}

static void heap_push(hent *h, uint32_t *n, hent e)
{
    uint32_t i = (*n)++;
    while (i > 0) {
        uint32_t p = (i - 1) / 2;
        if (!hless(&e, &h[p]))
            break;
        h[i] = h[p];
        i = p;
    }
    h[i] = e;
}

static hent heap_pop(hent *h, uint32_t *n)
{
    hent top = h[0], last = h[--(*n)];
    uint32_t i = 0;
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && hless(&h[c + 1], &h[c]))
            c++;
        if (!hless(&h[c], &last))
            break;
        h[i] = h[c];
        i = c;
    }
    if (*n)
        h[i] = last;
    return top;
}

int64_t mp_greedy_skyline(const mp_prob *mp, const uint32_t *rank, uint32_t rekey_limit,
                          int64_t *off)
{
    uint32_t n = mp->n;
    segtree t;
    hent *h = malloc((n ? n : 1) * sizeof(hent));
    uint32_t *repushes = calloc(n ? n : 1, sizeof(uint32_t));
    if (!seg_init(&t, mp->nsec ? mp->nsec : 1) || !h || !repushes) {
        free(repushes);
        seg_free(&t);
        free(h);
        return -1;
    }
    uint32_t hn = 0;
    int64_t peak = 0;
    for (uint32_t i = 0; i < n; i++)
        if (mp->fixed[i] >= 0) {
            off[i] = mp->fixed[i];
            seg_raise(&t, mp->lo[i], mp->hi[i], off[i] + mp->size[i]);
            peak = max64(peak, off[i] + mp->size[i]);
        }
    for (uint32_t i = 0; i < n; i++)
        if (mp->fixed[i] < 0) {
            int64_t k = mp_align_up(seg_query(&t, mp->lo[i], mp->hi[i]), mp->align[i]);
            heap_push(h, &hn, (hent){k, rank[i], i});
        }
    while (hn) {
        hent e = heap_pop(h, &hn);
        uint32_t b = e.blk;
        int64_t k = mp_align_up(seg_query(&t, mp->lo[b], mp->hi[b]), mp->align[b]);
        if (k > e.key && repushes[b] < rekey_limit) {
            repushes[b]++;
            e.key = k;
            heap_push(h, &hn, e);
            continue;
        }
        off[b] = k;
        seg_raise(&t, mp->lo[b], mp->hi[b], k + mp->size[b]);
        peak = max64(peak, k + mp->size[b]);
    }
    seg_free(&t);
    free(h);
    free(repushes);
    return peak;
}

/* ---- interval index for best fit ------------------------------------------ */

typedef struct ulist {
    uint32_t *v;
    uint32_t n, cap;
} ulist;

static bool ul_push(ulist *l, uint32_t x)
{
    if (l->n == l->cap) {
        uint32_t cap = l->cap ? 2 * l->cap : 4;
        uint32_t *v = realloc(l->v, cap * sizeof(uint32_t));
        if (!v)
            return false;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = x;
    return true;
}

typedef struct ivindex {
    uint32_t P;
    ulist *cover;  /* [2P] blocks whose canonical node this is */
    ulist *inside; /* [2P] blocks with a canonical node strictly below this one */
    uint32_t *nstamp; /* [2P] node visited in this query */
    uint32_t *bstamp; /* [n] block reported in this query */
    uint32_t stamp;
} ivindex;

static bool iv_add(ivindex *x, uint32_t v, uint32_t nl, uint32_t nr, uint32_t l, uint32_t r,
                   uint32_t b)
{
    if (l <= nl && nr <= r) {
        if (!ul_push(&x->cover[v], b))
            return false;
        for (uint32_t u = v / 2; u >= 1; u /= 2) {
            /* the same block may reach an ancestor from two canonical nodes */
            ulist *in = &x->inside[u];
            if (in->n && in->v[in->n - 1] == b)
                break;
            if (!ul_push(in, b))
                return false;
        }
        return true;
    }
    uint32_t mid = nl + (nr - nl) / 2;
    if (l < mid && !iv_add(x, 2 * v, nl, mid, l, r, b))
        return false;
    if (r > mid && !iv_add(x, 2 * v + 1, mid, nr, l, r, b))
        return false;
    return true;
}

typedef struct seg2 {
    int64_t off, end;
} seg2;

static int cmp_seg2(const void *a, const void *b)
{
    const seg2 *x = a, *y = b;
    return (x->off > y->off) - (x->off < y->off);
}

typedef struct qbuf {
    seg2 *v;
    uint32_t n, cap;
} qbuf;

static bool q_report(ivindex *x, qbuf *q, const ulist *l, const mp_prob *mp, const int64_t *off)
{
    for (uint32_t i = 0; i < l->n; i++) {
        uint32_t b = l->v[i];
        if (x->bstamp[b] == x->stamp)
            continue;
        x->bstamp[b] = x->stamp;
        if (q->n == q->cap) {
            uint32_t cap = q->cap ? 2 * q->cap : 64;
            seg2 *v = realloc(q->v, cap * sizeof(seg2));
            if (!v)
                return false;
            q->v = v;
            q->cap = cap;
        }
        q->v[q->n++] = (seg2){off[b], off[b] + mp->size[b]};
    }
    return true;
}

static bool iv_query(ivindex *x, uint32_t v, uint32_t nl, uint32_t nr, uint32_t l, uint32_t r,
                     qbuf *q, const mp_prob *mp, const int64_t *off)
{
    if (l <= nl && nr <= r) {
        if (!q_report(x, q, &x->inside[v], mp, off))
            return false;
        for (uint32_t u = v; u >= 1; u /= 2) {
            if (x->nstamp[u] == x->stamp)
                break;
            x->nstamp[u] = x->stamp;
            if (!q_report(x, q, &x->cover[u], mp, off))
                return false;
        }
        return true;
    }
    uint32_t mid = nl + (nr - nl) / 2;
    if (l < mid && !iv_query(x, 2 * v, nl, mid, l, r, q, mp, off))
        return false;
    if (r > mid && !iv_query(x, 2 * v + 1, mid, nr, l, r, q, mp, off))
        return false;
    return true;
}

/* Best-fit offset for block @p b among the sorted placed segments @p s. */
static int64_t best_gap(const mp_prob *mp, uint32_t b, seg2 *s, uint32_t k, bool first)
{
    if (k > 1) /* qsort(NULL, 0) is undefined */
        qsort(s, k, sizeof(seg2), cmp_seg2);
    int64_t cur = 0, best = -1, best_gap = INT64_MAX, a = mp->align[b], sz = mp->size[b];
    for (uint32_t i = 0; i < k; i++) {
        if (s[i].off > cur) {
            int64_t start = mp_align_up(cur, a);
            if (start + sz <= s[i].off && s[i].off - cur < best_gap) {
                best_gap = s[i].off - cur;
                best = start;
                if (first)
                    return best;
            }
        }
        cur = max64(cur, s[i].end);
    }
    return best >= 0 ? best : mp_align_up(cur, a);
}

int64_t mp_greedy_bestfit(const mp_prob *mp, const uint32_t *perm, bool first_fit, int64_t *off)
{
    uint32_t n = mp->n;
    ivindex x;
    memset(&x, 0, sizeof(x));
    qbuf q = {0};
    int64_t peak = -1;
    x.P = 1;
    while (x.P < mp->nsec)
        x.P <<= 1;
    x.cover = calloc(2 * (size_t)x.P, sizeof(ulist));
    x.inside = calloc(2 * (size_t)x.P, sizeof(ulist));
    x.nstamp = calloc(2 * (size_t)x.P, sizeof(uint32_t));
    x.bstamp = calloc(n ? n : 1, sizeof(uint32_t));
    if (!x.cover || !x.inside || !x.nstamp || !x.bstamp)
        goto out;
    peak = 0;
    for (uint32_t i = 0; i < n; i++)
        if (mp->fixed[i] >= 0) {
            off[i] = mp->fixed[i];
            peak = max64(peak, off[i] + mp->size[i]);
            if (!iv_add(&x, 1, 0, x.P, mp->lo[i], mp->hi[i], i))
                goto oom;
        }
    for (uint32_t j = 0; j < n; j++) {
        uint32_t b = perm[j];
        if (mp->fixed[b] >= 0)
            continue;
        x.stamp++;
        q.n = 0;
        if (!iv_query(&x, 1, 0, x.P, mp->lo[b], mp->hi[b], &q, mp, off))
            goto oom;
        off[b] = best_gap(mp, b, q.v, q.n, first_fit);
        peak = max64(peak, off[b] + mp->size[b]);
        if (!iv_add(&x, 1, 0, x.P, mp->lo[b], mp->hi[b], b))
            goto oom;
    }
    goto out;
oom:
    peak = -1;
out:
    if (x.cover)
        for (uint32_t v = 0; v < 2 * x.P; v++) {
            free(x.cover[v].v);
            free(x.inside[v].v);
        }
    free(x.cover);
    free(x.inside);
    free(x.nstamp);
    free(x.bstamp);
    free(q.v);
    return peak;
}

/* ---- repair: blocks above LOAD into lower gaps ---------------------------- */

/* Work bound of one repair pass: candidates x blocks scanned; a plan with
 * more blocks above LOAD than MP_REPAIR_MAX is not repaired (its excess is
 * spread out, not a few misplaced blocks). */
#define MP_REPAIR_WORK 4000000u
#define MP_REPAIR_MAX 1024u

typedef struct tkey {
    int64_t top;
    uint32_t idx;
} tkey;

static int cmp_tkey(const void *a, const void *b)
{
    const tkey *x = a, *y = b;
    if (x->top != y->top)
        return x->top > y->top ? -1 : 1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

int64_t mp_repair(const mp_prob *mp, int64_t *off, uint32_t max_passes)
{
    uint32_t n = mp->n;
    int64_t peak = mp_peak(mp, off);
    if (peak <= mp->load || n == 0)
        return peak;
    seg2 *s = malloc(n * sizeof(seg2));
    tkey *c = malloc(n * sizeof(tkey));
    if (!s || !c) {
        free(s);
        free(c);
        return -1;
    }
    for (uint32_t pass = 0; pass < max_passes; pass++) {
        uint32_t nc = 0, moved = 0;
        for (uint32_t i = 0; i < n; i++)
            if (mp->fixed[i] < 0 && off[i] + mp->size[i] > mp->load)
                c[nc++] = (tkey){off[i] + mp->size[i], i};
        if (nc > MP_REPAIR_MAX)
            break;
        if (nc > 1)
            qsort(c, nc, sizeof(tkey), cmp_tkey);
        if ((uint64_t)nc * n > MP_REPAIR_WORK)
            nc = MP_REPAIR_WORK / n > 0 ? MP_REPAIR_WORK / n : 1;
        for (uint32_t j = 0; j < nc; j++) {
            uint32_t b = c[j].idx, k = 0;
            for (uint32_t x = 0; x < n; x++)
                if (x != b && mp->lo[x] < mp->hi[b] && mp->lo[b] < mp->hi[x])
                    s[k++] = (seg2){off[x], off[x] + mp->size[x]};
            int64_t o = best_gap(mp, b, s, k, true);
            if (o < off[b]) {
                off[b] = o;
                moved++;
            }
        }
        int64_t pk = mp_peak(mp, off);
        if (!moved || pk >= peak)
            break;
        peak = pk;
    }
    free(s);
    free(c);
    return mp_peak(mp, off);
}

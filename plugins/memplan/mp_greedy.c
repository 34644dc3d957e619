/*
 * mp_greedy.c - the planner's fast placements.
 *
 * Skyline: every section keeps a floor (the top of the blocks placed in it);
 * a block's lowest offset is the largest floor over its sections.  The block
 * whose lowest offset is smallest goes next (ties: a rank order), which fills
 * the lowest valley first: the first descent of the exact search's canonical
 * placements.  A 64-ary max tree answers "largest floor over [lo, hi)" and
 * raises a range; a heap keyed by (lowest offset, rank) is re-keyed lazily (keys only
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

/* ---- a 64-ary max tree with range chmax --------------------------------
 * Level 0 holds every section's floor; a node of level i >= 1 covers 64
 * nodes of level i - 1 and keeps the value applied to its whole range (tag)
 * and its subtree maximum (tags included).  A value of a section is the
 * largest of its own and its ancestors' tags.  8 bytes a section plus 1/4 of
 * that above (a binary tree over a power of two took 32 to 64): the tree is
 * the skyline's largest array on a big graph.  A query or raise scans at
 * most two partial groups of 64 per level (contiguous) and the tags on the
 * paths of its two end sections (4 levels up to 16M sections). */

#define MT_BITS 6
#define MT_B (1u << MT_BITS)
#define MT_MAXLV 7

typedef struct mtree {
    uint32_t levels;          /* levels above the sections, the top one has one node */
    int64_t *leaf;            /* [nsec] */
    int64_t *mx[MT_MAXLV + 1]; /* [1..levels]: subtree maximum */
    int64_t *tg[MT_MAXLV + 1]; /* [1..levels]: value applied to the node's range */
    uint32_t cnt[MT_MAXLV + 1];
} mtree;

static inline int64_t max64(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

static bool mt_init(mtree *t, uint32_t nsec)
{
    memset(t, 0, sizeof(*t));
    t->cnt[0] = nsec ? nsec : 1;
    t->leaf = calloc(t->cnt[0], sizeof(int64_t));
    if (!t->leaf)
        return false;
    uint32_t c = t->cnt[0];
    while (c > 1 && t->levels < MT_MAXLV) {
        c = (c + MT_B - 1) >> MT_BITS;
        uint32_t lv = ++t->levels;
        t->cnt[lv] = c;
        t->mx[lv] = calloc(c, sizeof(int64_t));
        t->tg[lv] = calloc(c, sizeof(int64_t));
        if (!t->mx[lv] || !t->tg[lv])
            return false;
    }
    return true;
}

static void mt_free(mtree *t)
{
    free(t->leaf);
    for (uint32_t lv = 1; lv <= t->levels; lv++) {
        free(t->mx[lv]);
        free(t->tg[lv]);
    }
}

static inline int64_t mt_scan(const mtree *t, uint32_t lv, uint32_t l, uint32_t r, int64_t m)
{
    const int64_t *v = lv ? t->mx[lv] : t->leaf;
    for (uint32_t i = l; i < r; i++)
        m = max64(m, v[i]);
    return m;
}

/* Max over sections [l, r) (l < r): the nodes of a maximal decomposition,
 * level by level, and the tags of the ancestors of sections l and r - 1
 * (every ancestor of a decomposition node is one of them).  */
static int64_t mt_query(const mtree *t, uint32_t l, uint32_t r)
{
    int64_t m = 0;
    uint32_t a = l, b = r - 1;
    for (uint32_t lv = 1; lv <= t->levels; lv++) {
        a >>= MT_BITS;
        b >>= MT_BITS;
        m = max64(m, max64(t->tg[lv][a], t->tg[lv][b]));
    }
    for (uint32_t lv = 0;; lv++) {
        uint32_t lb = (l + MT_B - 1) & ~(MT_B - 1), rb = r & ~(MT_B - 1);
        if (lv == t->levels || lb >= rb)
            return mt_scan(t, lv, l, r, m);
        m = mt_scan(t, lv, l, lb, m);
        m = mt_scan(t, lv, rb, r, m);
        l = lb >> MT_BITS;
        r = rb >> MT_BITS;
    }
}

static inline void mt_tag(mtree *t, uint32_t lv, uint32_t l, uint32_t r, int64_t val)
{
    if (!lv) {
        for (uint32_t i = l; i < r; i++)
            t->leaf[i] = max64(t->leaf[i], val);
        return;
    }
    for (uint32_t i = l; i < r; i++) {
        t->tg[lv][i] = max64(t->tg[lv][i], val);
        t->mx[lv][i] = max64(t->mx[lv][i], val);
    }
}

/* Raise sections [l, r) (l < r) to at least @p val: tag the decomposition
 * nodes, raise the maxima of the ancestors of sections l and r - 1 (the
 * ancestors of every decomposition node; one fully inside the range is
 * raised rightly too). */
static void mt_raise(mtree *t, uint32_t l, uint32_t r, int64_t val)
{
    uint32_t a = l, b = r - 1;
    for (uint32_t lv = 1; lv <= t->levels; lv++) {
        a >>= MT_BITS;
        b >>= MT_BITS;
        t->mx[lv][a] = max64(t->mx[lv][a], val);
        t->mx[lv][b] = max64(t->mx[lv][b], val);
    }
    for (uint32_t lv = 0;; lv++) {
        uint32_t lb = (l + MT_B - 1) & ~(MT_B - 1), rb = r & ~(MT_B - 1);
        if (lv == t->levels || lb >= rb) {
            mt_tag(t, lv, l, r, val);
            return;
        }
        mt_tag(t, lv, l, lb, val);
        mt_tag(t, lv, rb, r, val);
        l = lb >> MT_BITS;
        r = rb >> MT_BITS;
    }
}

/* ---- a 4-ary heap of (key, rank, block) ----------------------------------
 * Ranks are distinct, so the pop order is fixed by (key, rank) whatever the
 * heap's shape; four children of 16 bytes share a cache line. */

typedef struct hent {
    int64_t key;
    uint32_t rank, blk;
} hent;

static inline bool hless(const hent *a, const hent *b)
{
    return a->key != b->key ? a->key < b->key : a->rank < b->rank;
}

static void heap_push(hent *h, uint32_t *n, hent e)
{
    uint32_t i = (*n)++;
    while (i > 0) {
        uint32_t p = (i - 1) / 4;
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
    uint32_t i = 0, cnt = *n;
    for (;;) {
        uint32_t c = 4 * i + 1;
        if (c >= cnt)
            break;
        uint32_t best = c, end = c + 4 < cnt ? c + 4 : cnt;
        for (uint32_t j = c + 1; j < end; j++)
            if (hless(&h[j], &h[best]))
                best = j;
        if (!hless(&h[best], &last))
            break;
        h[i] = h[best];
        i = best;
    }
    if (cnt)
        h[i] = last;
    return top;
}

/* Pop the heap's entries and place each at its lowest offset, re-keying a
 * stale one (see mp_greedy_skyline).  Returns the peak (>= @p peak). */
static int64_t skyline_drain(const mp_prob *mp, mtree *t, hent *h, uint32_t hn,
                             uint32_t *repushes, uint32_t rekey_limit, int64_t peak, int64_t *off)
{
    while (hn) {
        hent e = heap_pop(h, &hn);
        uint32_t b = e.blk;
        int64_t k = mp_align_up(mt_query(t, mp->lo[b], mp->hi[b]), mp->align[b]);
        if (k > e.key && repushes[b] < rekey_limit) {
            repushes[b]++;
            e.key = k;
            heap_push(h, &hn, e);
            continue;
        }
        off[b] = k;
        mt_raise(t, mp->lo[b], mp->hi[b], k + mp->size[b]);
        peak = max64(peak, k + mp->size[b]);
    }
    return peak;
}

/* The heap's array at base + 3: each group of four children, h[4i+1..4i+4],
 * is one 64-byte line.  Grown as blocks are re-keyed (on a large trace few
 * are: the whole array would cost 16 bytes a block). */
typedef struct hbuf {
    hent *base, *h;
    uint32_t cap;
} hbuf;

static bool heap_reserve(hbuf *hb, uint32_t need)
{
    if (need <= hb->cap)
        return true;
    uint32_t cap = hb->cap ? hb->cap : 64;
    while (cap < need)
        cap = cap > UINT32_MAX / 2 ? need : 2 * cap;
    hent *nb = aligned_alloc(64, ((size_t)cap + 4 + 3) / 4 * 4 * sizeof(hent));
    if (!nb)
        return false;
    if (hb->cap)
        memcpy(nb + 3, hb->h, (size_t)hb->cap * sizeof(hent));
    free(hb->base);
    hb->base = nb;
    hb->h = nb + 3;
    hb->cap = cap;
    return true;
}

int64_t mp_greedy_skyline(const mp_prob *mp, const uint32_t *perm, const uint32_t *rank,
                          uint32_t rekey_limit, int64_t *off)
{
    uint32_t n = mp->n;
    mtree t;
    /* fixed[] rather than nfixed: a seeded problem (mp_plan.c) pins blocks
     * through fixed[] alone */
    bool any_fixed = false;
    for (uint32_t i = 0; i < n && !any_fixed; i++)
        any_fixed = mp->fixed[i] >= 0;
    hbuf hb = {0};
    uint32_t *repushes = calloc(n ? n : 1, sizeof(uint32_t));
    bool ok = mt_init(&t, mp->nsec) && repushes &&
              heap_reserve(&hb, any_fixed ? n + 1 : 64);
    uint32_t hn = 0;
    int64_t peak = 0;
    if (ok && !any_fixed) {
        /* Every block starts with key 0 (nothing is placed), so the heap
         * would pop them all in rank order before any re-keyed one (a re-key
         * only raises a key): take them in rank order without the heap, and
         * heap only the re-keyed ones.  The same placements, in the same
         * order, as the heap alone. */
        for (uint32_t r = 0; r < n && ok; r++) {
            uint32_t b = perm[r];
            int64_t k = mp_align_up(mt_query(&t, mp->lo[b], mp->hi[b]), mp->align[b]);
            if (k > 0 && rekey_limit > 0) {
                repushes[b] = 1;
                ok = heap_reserve(&hb, hn + 1);
                if (ok)
                    heap_push(hb.h, &hn, (hent){k, r, b});
                continue;
            }
            off[b] = k;
            mt_raise(&t, mp->lo[b], mp->hi[b], k + mp->size[b]);
            peak = max64(peak, k + mp->size[b]);
        }
    } else if (ok) {
        for (uint32_t i = 0; i < n; i++)
            if (mp->fixed[i] >= 0) {
                off[i] = mp->fixed[i];
                mt_raise(&t, mp->lo[i], mp->hi[i], off[i] + mp->size[i]);
                peak = max64(peak, off[i] + mp->size[i]);
            }
        for (uint32_t i = 0; i < n; i++)
            if (mp->fixed[i] < 0) {
                int64_t k = mp_align_up(mt_query(&t, mp->lo[i], mp->hi[i]), mp->align[i]);
                heap_push(hb.h, &hn, (hent){k, rank[i], i});
            }
    }
    if (ok)
        peak = skyline_drain(mp, &t, hb.h, hn, repushes, rekey_limit, peak, off);
    mt_free(&t);
    free(hb.base);
    free(repushes);
    return ok ? peak : -1;
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

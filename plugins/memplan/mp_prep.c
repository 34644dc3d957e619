/*
 * mp_prep.c - the planner's problem over compressed time: sections, LOAD,
 * orders of blocks, and small helpers shared by the placements.
 */
#include "mp.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

uint64_t mp_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

bool mp_sort_pairs(uint64_t *keys, uint32_t *vals, size_t n)
{
    enum { BITS = 16, D = 1 << BITS };
    if (n < 256) { /* insertion sort */
        for (size_t i = 1; i < n; i++) {
            uint64_t x = keys[i];
            uint32_t y = vals[i];
            size_t j = i;
            for (; j > 0 && keys[j - 1] > x; j--) {
                keys[j] = keys[j - 1];
                vals[j] = vals[j - 1];
            }
            keys[j] = x;
            vals[j] = y;
        }
        return true;
    }
    uint64_t all_or = 0, all_and = ~(uint64_t)0;
    for (size_t i = 0; i < n; i++) {
        all_or |= keys[i];
        all_and &= keys[i];
    }
    uint64_t varies = all_or ^ all_and;
    if (!varies)
        return true;
    uint64_t *tk = malloc(n * sizeof(*tk));
    uint32_t *tv = malloc(n * sizeof(*tv));
    size_t *cnt = malloc(D * sizeof(*cnt));
    if (!tk || !tv || !cnt) {
        free(tk);
        free(tv);
        free(cnt);
        return false;
    }
    uint64_t *sk = keys, *dk = tk;
    uint32_t *sv = vals, *dv = tv;
    for (unsigned sh = 0; sh < 64; sh += BITS) {
        if (!((varies >> sh) & (D - 1)))
            continue;
        memset(cnt, 0, D * sizeof(*cnt));
        for (size_t i = 0; i < n; i++)
            cnt[(sk[i] >> sh) & (D - 1)]++;
        size_t sum = 0;
        for (size_t d = 0; d < D; d++) {
            size_t c = cnt[d];
            cnt[d] = sum;
            sum += c;
        }
        for (size_t i = 0; i < n; i++) {
            size_t at = cnt[(sk[i] >> sh) & (D - 1)]++;
            dk[at] = sk[i];
            dv[at] = sv[i];
        }
        uint64_t *t = sk;
        sk = dk;
        dk = t;
        uint32_t *u = sv;
        sv = dv;
        dv = u;
    }
    if (sk != keys) {
        memcpy(keys, sk, n * sizeof(*keys));
        memcpy(vals, sv, n * sizeof(*vals));
    }
    free(tk);
    free(tv);
    free(cnt);
    return true;
}

void mp_prob_free(mp_prob *mp)
{
    free(mp->size);
    free(mp->align);
    free(mp->lo);
    free(mp->hi);
    free(mp->fixed);
    free(mp->sec_total);
    free(mp->sec_t);
    memset(mp, 0, sizeof(*mp));
}

bool mp_prob_alloc(mp_prob *mp, uint32_t n, int64_t capacity)
{
    memset(mp, 0, sizeof(*mp));
    mp->n = n;
    mp->capacity = capacity;
    size_t nn = n ? n : 1;
    mp->size = malloc(nn * sizeof(int64_t));
    mp->align = malloc(nn * sizeof(uint32_t));
    mp->lo = malloc(nn * sizeof(uint32_t));
    mp->hi = malloc(nn * sizeof(uint32_t));
    mp->fixed = malloc(nn * sizeof(int64_t));
    if (!mp->size || !mp->align || !mp->lo || !mp->hi || !mp->fixed) {
        mp_prob_free(mp);
        return false;
    }
    return true;
}

/* Sections from a bitmap over the steps: a boundary is a set bit, a block's
 * lo / hi the rank of its bits.  O(n + steps / 64), 12 bytes per 64 steps. */
static bool sections_bitmap(mp_prob *mp, uint64_t maxv, bool times)
{
    uint32_t n = mp->n;
    size_t nw = (size_t)(maxv >> 6) + 1;
    uint64_t *bits = calloc(nw, sizeof(uint64_t));
    uint32_t *pre = malloc(nw * sizeof(uint32_t));
    if (!bits || !pre) {
        free(bits);
        free(pre);
        return false;
    }
    for (uint32_t i = 0; i < n; i++) {
        uint64_t a = mp->lo[i], b = (uint64_t)mp->hi[i] + 1;
        bits[a >> 6] |= 1ull << (a & 63);
        bits[b >> 6] |= 1ull << (b & 63);
    }
    uint32_t npts = 0;
    for (size_t w = 0; w < nw; w++) {
        pre[w] = npts;
        npts += (uint32_t)__builtin_popcountll(bits[w]);
    }
    mp->sec_t = times ? malloc((size_t)(npts ? npts : 1) * sizeof(uint64_t)) : NULL;
    if (times && !mp->sec_t) {
        free(bits);
        free(pre);
        return false;
    }
    for (size_t w = 0, k = 0; times && w < nw; w++)
        for (uint64_t x = bits[w]; x; x &= x - 1)
            mp->sec_t[k++] = (uint64_t)w << 6 | (uint64_t)__builtin_ctzll(x);
    for (uint32_t i = 0; i < n; i++) {
        uint64_t a = mp->lo[i], b = (uint64_t)mp->hi[i] + 1;
        mp->lo[i] = pre[a >> 6] +
                    (uint32_t)__builtin_popcountll(bits[a >> 6] & ((1ull << (a & 63)) - 1));
        mp->hi[i] = pre[b >> 6] +
                    (uint32_t)__builtin_popcountll(bits[b >> 6] & ((1ull << (b & 63)) - 1));
    }
    free(bits);
    free(pre);
    mp->nsec = npts ? npts - 1 : 0;
    return true;
}

/* Sections by sorting the boundaries (steps far apart). O(n) radix passes. */
static bool sections_sort(mp_prob *mp, bool times)
{
    uint32_t n = mp->n;
    size_t nn = n ? n : 1;
    uint64_t *pts = malloc(2 * nn * sizeof(uint64_t));
    uint32_t *who = malloc(2 * nn * sizeof(uint32_t));
    if (!pts || !who)
        goto fail;
    for (uint32_t i = 0; i < n; i++) {
        pts[2 * i] = mp->lo[i];
        who[2 * i] = 2 * i;
        pts[2 * i + 1] = (uint64_t)mp->hi[i] + 1;
        who[2 * i + 1] = 2 * i + 1;
    }
    if (n && !mp_sort_pairs(pts, who, 2 * (size_t)n))
        goto fail;
    uint32_t npts = 0;
    for (uint32_t i = 0; i < 2 * n; i++) {
        if (npts == 0 || pts[npts - 1] != pts[i])
            pts[npts++] = pts[i];
        uint32_t b = who[i] >> 1;
        if (who[i] & 1)
            mp->hi[b] = npts - 1;
        else
            mp->lo[b] = npts - 1;
    }
    free(who);
    who = NULL;
    mp->nsec = npts ? npts - 1 : 0;
    if (times) {
        mp->sec_t = malloc((size_t)(npts ? npts : 1) * sizeof(uint64_t));
        if (!mp->sec_t)
            goto fail;
        memcpy(mp->sec_t, pts, npts * sizeof(uint64_t));
    }
    free(pts);
    return true;
fail:
    free(pts);
    free(who);
    return false;
}

bool mp_prob_sections(mp_prob *mp, bool times)
{
    uint32_t n = mp->n;
    /* the section boundaries: every first use and every end (last + 1),
     * sorted and unique; each block's lo/hi is its boundaries' rank */
    uint64_t maxv = 0;
    mp->nfixed = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (mp->fixed[i] >= 0)
            mp->nfixed++;
        maxv = (uint64_t)mp->hi[i] + 1 > maxv ? (uint64_t)mp->hi[i] + 1 : maxv;
    }
    bool ok = maxv <= 64 * (uint64_t)n + 65536 ? sections_bitmap(mp, maxv, times) : sections_sort(mp, times);
    if (!ok)
        goto fail;
    mp->sec_total = calloc(mp->nsec + 1, sizeof(int64_t));
    if (!mp->sec_total)
        goto fail;
    for (uint32_t i = 0; i < n; i++) {
        int64_t s = mp_align_up(mp->size[i], mp->align[i]);
        mp->sec_total[mp->lo[i]] += s;
        mp->sec_total[mp->hi[i]] -= s;
    }
    int64_t run = 0;
    for (uint32_t s = 0; s < mp->nsec; s++) {
        run += mp->sec_total[s];
        mp->sec_total[s] = run;
        if (run > mp->load)
            mp->load = run;
    }
    return true;
fail:
    mp_prob_free(mp);
    return false;
}

bool mp_prob_init(mp_prob *mp, uint32_t n, const int64_t *size, const uint32_t *first,
                  const uint32_t *last, const uint32_t *align, const int64_t *fixed,
                  uint32_t defalign, int64_t capacity)
{
    if (!mp_prob_alloc(mp, n, capacity))
        return false;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t a = align && align[i] ? align[i] : defalign;
        mp->align[i] = a ? a : 1;
        mp->size[i] = size[i];
        mp->fixed[i] = fixed ? fixed[i] : -1;
        mp->lo[i] = first[i];
        mp->hi[i] = last[i];
    }
    return mp_prob_sections(mp, true);
}

int64_t mp_peak(const mp_prob *mp, const int64_t *off)
{
    int64_t peak = 0;
    for (uint32_t i = 0; i < mp->n; i++)
        if (off[i] + mp->size[i] > peak)
            peak = off[i] + mp->size[i];
    return peak;
}

bool mp_valid(const mp_prob *mp, const int64_t *off)
{
    for (uint32_t i = 0; i < mp->n; i++) {
        if (off[i] < 0 || off[i] % mp->align[i] != 0)
            return false;
        if (mp->fixed[i] >= 0 && off[i] != mp->fixed[i])
            return false;
        for (uint32_t j = i + 1; j < mp->n; j++)
            if (mp->lo[i] < mp->hi[j] && mp->lo[j] < mp->hi[i] &&
                off[i] < off[j] + mp->size[j] && off[j] < off[i] + mp->size[i])
                return false;
    }
    return true;
}

/* ---- orders --------------------------------------------------------------- */

const char *const mp_order_name[MP_ORDER_COUNT] = {"area", "size", "length", "total"};

/* The largest section total over block @p i's sections, via a sparse table
 * would be faster; a sweep per block is O(length), fine for the search sizes
 * and done with a segment-free running max for the large ones (see caller). */
bool mp_max_totals(const mp_prob *mp, int64_t *out)
{
    /* sparse table for range max over sec_total: O(S log S) */
    uint32_t S = mp->nsec, lg = 1;
    while ((1u << lg) <= S)
        lg++;
    int64_t *t = malloc((size_t)lg * (S ? S : 1) * sizeof(int64_t));
    if (!t)
        return false;
    for (uint32_t s = 0; s < S; s++)
        t[s] = mp->sec_total[s];
    for (uint32_t k = 1; k < lg; k++)
        for (uint32_t s = 0; s + (1u << k) <= S; s++) {
            int64_t a = t[(size_t)(k - 1) * S + s], b = t[(size_t)(k - 1) * S + s + (1u << (k - 1))];
            t[(size_t)k * S + s] = a > b ? a : b;
        }
    for (uint32_t i = 0; i < mp->n; i++) {
        uint32_t l = mp->lo[i], r = mp->hi[i], len = r - l, k = 0;
        while ((2u << k) <= len)
            k++;
        int64_t a = t[(size_t)k * S + l], b = t[(size_t)k * S + r - (1u << k)];
        out[i] = a > b ? a : b;
    }
    free(t);
    return true;
}

/* An int64 as a uint64 key that sorts descending. */
static uint64_t desc_key(int64_t v)
{
    return ~((uint64_t)v ^ ((uint64_t)1 << 63));
}

/* Block @p i's first (@p first) or second key under @p order. */
static int64_t order_key(const mp_prob *mp, mp_order order, const int64_t *tot, uint32_t i,
                         bool first)
{
    int64_t len = (int64_t)(mp->hi[i] - mp->lo[i]);
    /* section counts stand in for lifetimes: compressed, but order-preserving
     * enough for a heuristic and independent of the step numbering */
    int64_t area = mp->size[i] * len;
    switch (order) {
    case MP_ORDER_SIZE: return first ? mp->size[i] : len;
    case MP_ORDER_AREA: return first ? area : mp->size[i];
    case MP_ORDER_LENGTH: return first ? len : mp->size[i];
    default: return first ? tot[i] : area;
    }
}

bool mp_order_blocks(const mp_prob *mp, mp_order order, uint32_t *perm)
{
    /* (k1 desc, k2 desc, index asc): from the index order, a stable sort by
     * k2, then a stable sort by k1 */
    uint32_t n = mp->n;
    uint64_t *key = malloc((n ? n : 1) * sizeof(uint64_t));
    int64_t *tot = order == MP_ORDER_TOTAL ? malloc((n ? n : 1) * sizeof(int64_t)) : NULL;
    bool ok = key && (order != MP_ORDER_TOTAL || (tot && mp_max_totals(mp, tot)));
    for (uint32_t i = 0; ok && i < n; i++) {
        key[i] = desc_key(order_key(mp, order, tot, i, false));
        perm[i] = i;
    }
    ok = ok && mp_sort_pairs(key, perm, n);
    /* the first key again (recomputed: one array less on a big problem) */
    for (uint32_t i = 0; ok && i < n; i++)
        key[i] = desc_key(order_key(mp, order, tot, perm[i], true));
    ok = ok && mp_sort_pairs(key, perm, n);
    free(key);
    free(tot);
    return ok;
}

uint64_t mp_overlap_pairs(const mp_prob *mp)
{
    /* live count per section start: pairs = sum over blocks of the blocks
     * already live when it starts (starts at the same section count once) */
    uint32_t S = mp->nsec;
    uint32_t *starts = calloc(S + 1, sizeof(uint32_t)), *ends = calloc(S + 1, sizeof(uint32_t));
    if (!starts || !ends) {
        free(starts);
        free(ends);
        return UINT64_MAX;
    }
    for (uint32_t i = 0; i < mp->n; i++) {
        starts[mp->lo[i]]++;
        ends[mp->hi[i]]++;
    }
    uint64_t pairs = 0;
    int64_t live = 0;
    for (uint32_t s = 0; s < S; s++) {
        live -= ends[s];
        pairs += (uint64_t)live * (uint64_t)starts[s] +
                 (uint64_t)starts[s] * (uint64_t)(starts[s] - 1) / 2;
        live += starts[s];
    }
    free(starts);
    free(ends);
    return pairs;
}

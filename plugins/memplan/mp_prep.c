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

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Index of @p v in the sorted unique array @p pts (it is there).  O(log n). */
static uint32_t find_point(const uint64_t *pts, uint32_t npts, uint64_t v)
{
    uint32_t lo = 0, hi = npts;
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (pts[mid] <= v)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
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

bool mp_prob_init(mp_prob *mp, uint32_t n, const int64_t *size, const uint32_t *first,
                  const uint32_t *last, const uint32_t *align, const int64_t *fixed,
                  uint32_t defalign, int64_t capacity)
{
    memset(mp, 0, sizeof(*mp));
    mp->n = n;
    mp->capacity = capacity;
    size_t nn = n ? n : 1;
    mp->size = malloc(nn * sizeof(int64_t));
    mp->align = malloc(nn * sizeof(int64_t));
    mp->lo = malloc(nn * sizeof(uint32_t));
    mp->hi = malloc(nn * sizeof(uint32_t));
    mp->fixed = malloc(nn * sizeof(int64_t));
    uint64_t *pts = malloc(2 * nn * sizeof(uint64_t));
    if (!mp->size || !mp->align || !mp->lo || !mp->hi || !mp->fixed || !pts)
        goto fail;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t a = align && align[i] ? align[i] : defalign;
        mp->align[i] = a ? a : 1;
        mp->size[i] = size[i];
        mp->fixed[i] = fixed ? fixed[i] : -1;
        if (mp->fixed[i] >= 0)
            mp->nfixed++;
        pts[2 * i] = first[i];
        pts[2 * i + 1] = (uint64_t)last[i] + 1;
    }
    if (n)
        qsort(pts, 2 * (size_t)n, sizeof(uint64_t), cmp_u64);
    uint32_t npts = 0;
    for (uint32_t i = 0; i < 2 * n; i++)
        if (npts == 0 || pts[npts - 1] != pts[i])
            pts[npts++] = pts[i];
    mp->nsec = npts ? npts - 1 : 0;
    for (uint32_t i = 0; i < n; i++) {
        mp->lo[i] = find_point(pts, npts, first[i]);
        mp->hi[i] = find_point(pts, npts, (uint64_t)last[i] + 1);
    }
    mp->sec_t = malloc((size_t)(npts ? npts : 1) * sizeof(uint64_t));
    if (!mp->sec_t)
        goto fail;
    memcpy(mp->sec_t, pts, npts * sizeof(uint64_t));
    free(pts);
    pts = NULL;
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
    free(pts);
    mp_prob_free(mp);
    return false;
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

typedef struct okey {
    int64_t k1, k2; /* descending */
    uint32_t idx;   /* ascending tie break: deterministic */
} okey;

static int cmp_okey(const void *a, const void *b)
{
    const okey *x = a, *y = b;
    if (x->k1 != y->k1)
        return x->k1 > y->k1 ? -1 : 1;
    if (x->k2 != y->k2)
        return x->k2 > y->k2 ? -1 : 1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

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

bool mp_order_blocks(const mp_prob *mp, mp_order order, uint32_t *perm)
{
    uint32_t n = mp->n;
    okey *k = malloc((n ? n : 1) * sizeof(okey));
    int64_t *tot = order == MP_ORDER_TOTAL ? malloc((n ? n : 1) * sizeof(int64_t)) : NULL;
    if (!k || (order == MP_ORDER_TOTAL && (!tot || !mp_max_totals(mp, tot)))) {
        free(k);
        free(tot);
        return false;
    }
    for (uint32_t i = 0; i < n; i++) {
        int64_t len = (int64_t)(mp->hi[i] - mp->lo[i]);
        /* section counts stand in for lifetimes: compressed, but order-preserving
         * enough for a heuristic and independent of the step numbering */
        int64_t area = mp->size[i] * len;
        k[i].idx = i;
        switch (order) {
        case MP_ORDER_SIZE: k[i].k1 = mp->size[i]; k[i].k2 = len; break;
        case MP_ORDER_AREA: k[i].k1 = area; k[i].k2 = mp->size[i]; break;
        case MP_ORDER_LENGTH: k[i].k1 = len; k[i].k2 = mp->size[i]; break;
        default: k[i].k1 = tot[i]; k[i].k2 = area; break;
        }
    }
    if (n > 1)
        qsort(k, n, sizeof(okey), cmp_okey);
    for (uint32_t i = 0; i < n; i++)
        perm[i] = k[i].idx;
    free(k);
    free(tot);
    return true;
}

uint64_t mp_overlap_pairs(const mp_prob *mp)
{
    /* live count per section start: pairs = sum over blocks of the blocks
     * already live when it starts (starts at the same section count once) */
    uint32_t S = mp->nsec;
    int64_t *starts = calloc(S + 1, sizeof(int64_t)), *ends = calloc(S + 1, sizeof(int64_t));
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

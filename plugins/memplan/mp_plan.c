/*
 * mp_plan.c - the planner's strategy: greedy placements under several orders
 * and peak-first seeds, each repaired when above LOAD (keep the lowest peak),
 * then, for a problem not yet at LOAD and small enough, decision searches at
 * capacities from the lower bound upwards, then a bisection.
 *
 * Determinism: the search is bounded by a node budget (the `search_nodes`
 * option), so a plan depends only on the problem and the options; a time
 * budget (`time_budget_ms`, off by default, or the problem's own) cuts the
 * search short by the clock (the plan is then still valid, maybe worse).
 */
#include "mp.h"

#include <stdlib.h>
#include <string.h>

/* Bounds on the work of one greedy best-fit run (overlapping pairs it visits). */
#define MP_BESTFIT_MAX_PAIRS 3000000u

static void keep(const mp_prob *mp, int64_t peak, const int64_t *off, int64_t *best_peak,
                 int64_t *best, mp_stats *st, const char *method)
{
    if (peak >= 0 && (*best_peak < 0 || peak < *best_peak)) {
        *best_peak = peak;
        memcpy(best, off, mp->n * sizeof(int64_t));
        st->method = method;
    }
}

/* A plan the search found. */
static void keep_plan(const mp_prob *mp, const int64_t *off, int64_t *best_peak, int64_t *best,
                      mp_stats *st)
{
    int64_t pk = mp_peak(mp, off);
    if (!st->search_peak || pk < st->search_peak)
        st->search_peak = pk;
    keep(mp, pk, off, best_peak, best, st, "search");
}

/* Seeds of the greedy placements: none, or the blocks live at the section of
 * LOAD stacked from 0 without gaps (the "peak first" seeds: that section is
 * the binding one, and a greedy placement that reaches it last leaves holes
 * there), latest end at the bottom (suits a trace whose buffers are freed in
 * reverse order of allocation, as training traces are) or largest first. */
enum { SEED_NONE, SEED_PEAK_END, SEED_PEAK_SIZE, SEED_COUNT };

static const char *const skyline_names[SEED_COUNT][MP_ORDER_COUNT] = {
    {"skyline/area", "skyline/size", "skyline/length", "skyline/total"},
    {"peak-end+skyline/area", "peak-end+skyline/size", "peak-end+skyline/length",
     "peak-end+skyline/total"},
    {"peak-size+skyline/area", "peak-size+skyline/size", "peak-size+skyline/length",
     "peak-size+skyline/total"},
};
static const char *const bestfit_names[MP_ORDER_COUNT] = {"bestfit/area", "bestfit/size",
                                                          "bestfit/length", "bestfit/total"};

typedef struct skey {
    int64_t k;
    uint32_t idx;
} skey;

static int cmp_skey(const void *a, const void *b)
{
    const skey *x = a, *y = b;
    if (x->k != y->k)
        return x->k > y->k ? -1 : 1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

/* Fill @p fixed (n entries, -1 = free) with seed @p seed: the blocks live at
 * the first section of LOAD stacked from 0 by descending end (or size).
 * Only for problems without FIXED blocks.  false on out of memory.  O(n log n). */
static bool seed_peak(const mp_prob *mp, int seed, int64_t *fixed)
{
    uint32_t qs = 0, nb = 0;
    for (uint32_t q = 0; q < mp->nsec; q++)
        if (mp->sec_total[q] > mp->sec_total[qs])
            qs = q;
    skey *k = malloc((mp->n + 1) * sizeof(skey));
    if (!k)
        return false;
    for (uint32_t i = 0; i < mp->n; i++) {
        fixed[i] = -1;
        if (mp->lo[i] <= qs && qs < mp->hi[i])
            k[nb++] = (skey){seed == SEED_PEAK_END ? (int64_t)mp->hi[i] : mp->size[i], i};
    }
    if (nb > 1)
        qsort(k, nb, sizeof(skey), cmp_skey);
    int64_t at = 0;
    for (uint32_t j = 0; j < nb; j++) {
        uint32_t b = k[j].idx;
        at = mp_align_up(at, mp->align[b]);
        fixed[b] = at;
        at += mp->size[b];
    }
    free(k);
    return true;
}

/* The greedy placements until one reaches LOAD: the skyline under every seed
 * and order, best fit (unseeded) under every order, each plan above LOAD
 * repaired (effort 0: the area order's skyline alone).  Returns false on
 * out of memory. */
static bool run_greedy(const mp_prob *mp, const mp_params *prm, int64_t *best,
                       int64_t *best_peak, mp_stats *st, uint32_t *perm, uint32_t *rank,
                       int64_t *tmp)
{
    int norders = prm->effort <= 0 ? 1 : MP_ORDER_COUNT;
    int nseeds = prm->effort <= 0 || mp->nfixed > 0 ? 1 : SEED_COUNT;
    bool bestfit = prm->effort > 0 && mp_overlap_pairs(mp) <= MP_BESTFIT_MAX_PAIRS;
    mp_prob seeded = *mp;
    int64_t *fixed = nseeds > 1 ? malloc((mp->n + 1) * sizeof(int64_t)) : NULL;
    if (nseeds > 1 && !fixed)
        return false;
    bool ok = false;
    for (int sd = 0; sd < nseeds && *best_peak != mp->load; sd++) {
        if (sd > 0) {
            if (!seed_peak(mp, sd, fixed))
                goto out;
            seeded.fixed = fixed;
        }
        for (int o = 0; o < norders && *best_peak != mp->load; o++) {
            if (!mp_order_blocks(mp, (mp_order)o, perm))
                goto out;
            for (uint32_t i = 0; i < mp->n; i++)
                rank[perm[i]] = i;
            int64_t pk = mp_greedy_skyline(&seeded, perm, rank, prm->rekey_limit, tmp);
            if (pk > mp->load && prm->effort > 0)
                pk = mp_repair(mp, tmp, 4);
            if (pk < 0)
                goto out;
            keep(mp, pk, tmp, best_peak, best, st, skyline_names[sd][o]);
            if (bestfit && sd == SEED_NONE && *best_peak != mp->load) {
                pk = mp_greedy_bestfit(mp, perm, false, tmp);
                if (pk > mp->load)
                    pk = mp_repair(mp, tmp, 4);
                if (pk < 0)
                    goto out;
                keep(mp, pk, tmp, best_peak, best, st, bestfit_names[o]);
            }
        }
    }
    ok = true;
out:
    free(fixed);
    return ok;
}

/* One decision attempt at @p cap, in rounds: MiniMalloc's round robin (the
 * preorders in turn, node limits doubling from n), then as much work again
 * in short randomized restarts (perturbed preorders, windows 2, 4, 8; a
 * chronological search that went wrong early rarely recovers, a restart
 * does).  Within @p budget nodes and the deadline.  1 found (in @p tmp), 0
 * proved none, -1 budget spent, -2 out of memory. */
static int attempt(mp_search *srch, const mp_prob *mp, int64_t cap, uint64_t budget,
                   uint64_t deadline, int64_t *tmp, mp_stats *st)
{
    static const uint32_t windows[3] = {2, 4, 8};
    uint64_t limit = mp->n > 64 ? mp->n : 64, seed = 0;
    uint64_t short_limit = 10 * (uint64_t)mp->n;
    short_limit = short_limit < 2000 ? 2000 : short_limit > 20000 ? 20000 : short_limit;
    for (;;) {
        uint64_t plain = 0;
        for (int k = 0; k < 2 * MP_SEARCH_ORDERS; k++) {
            bool restart = k >= MP_SEARCH_ORDERS;
            int o = k % MP_SEARCH_ORDERS;
            uint64_t reps = restart ? (plain + short_limit - 1) / short_limit / MP_SEARCH_ORDERS : 1;
            for (uint64_t j = 0; j < (reps ? reps : 1); j++) {
                uint64_t want = restart ? short_limit : limit;
                uint64_t lim = want < budget ? want : budget;
                if (lim == 0 || mp_now_ns() > deadline)
                    return -1;
                uint64_t used = 0;
                if (restart)
                    seed++;
                int r = mp_search_run(srch, o, restart ? seed : 0, windows[seed % 3], cap, lim,
                                      deadline, tmp, &used);
                st->nodes += used;
                budget -= used < budget ? used : budget;
                if (!restart)
                    plain += used;
                if (r == 1 || r == -2 || (r == 0 && !restart))
                    return r;
            }
        }
        limit *= 2;
    }
}

/* The search between the lower bound and the best peak so far, on decision
 * problems at a fixed capacity: first the lower bound itself (a tight
 * capacity prunes hardest, and most hard instances are solvable there),
 * then capacities 1 %, 2 %, ... above it until one succeeds, then a bisection
 * between the highest capacity that failed and the best peak.  The first
 * attempt gets a third of the node budget, each later one an eighth of what
 * is left.  Returns false on out of memory. */
static bool run_search(const mp_prob *mp, const mp_params *prm, int64_t *best,
                       int64_t *best_peak, mp_stats *st, int64_t *tmp)
{
    mp_search *srch = mp_search_new(mp);
    if (!srch)
        return false;
    uint64_t deadline = prm->time_budget_ms > 0
                            ? mp_now_ns() + (uint64_t)(prm->time_budget_ms * 1e6)
                            : UINT64_MAX;
    uint64_t left = prm->search_nodes;
    int64_t lo = mp->load;
    for (uint32_t i = 0; i < mp->n; i++)
        if (mp->fixed[i] >= 0 && mp->fixed[i] + mp->size[i] > lo)
            lo = mp->fixed[i] + mp->size[i];
    if (mp->capacity > 0 && mp->capacity < lo) {
        mp_search_free(srch);
        return true; /* no plan fits the capacity: nothing to search for */
    }
    int64_t fail_hi = lo - 1; /* highest capacity known or assumed infeasible */
    uint64_t share = left / 3;
    bool ok = true, found = false;
    for (int k = 0; !found && left > 0 && mp_now_ns() < deadline; k++) {
        int64_t cap = lo + lo / 100 * k + lo % 100 * k / 100;
        if (cap >= *best_peak)
            break;
        uint64_t b = share < left ? share : left;
        uint64_t before = st->nodes;
        int r = attempt(srch, mp, cap, b, deadline, tmp, st);
        left -= st->nodes - before < left ? st->nodes - before : left;
        if (r == -2) {
            ok = false;
            goto out;
        }
        if (r == 1) {
            found = true;
            keep_plan(mp, tmp, best_peak, best, st);
        } else {
            fail_hi = cap;
            if (r == 0 && k == 0)
                st->lower_bound = cap + 1;
        }
        if (k == 0)
            share = left / 8; /* the steps above get smaller shares */
    }
    /* bisect between what failed and what was found */
    while (found && left > 0 && *best_peak - fail_hi > 1 && mp_now_ns() < deadline) {
        int64_t cap = fail_hi + (*best_peak - fail_hi) / 2;
        uint64_t b = share < left ? share : left, before = st->nodes;
        int r = attempt(srch, mp, cap, b, deadline, tmp, st);
        left -= st->nodes - before < left ? st->nodes - before : left;
        if (r == -2) {
            ok = false;
            goto out;
        }
        if (r == 1)
            keep_plan(mp, tmp, best_peak, best, st);
        else
            fail_hi = cap;
    }
out:
    mp_search_free(srch);
    return ok;
}

int64_t mp_plan(const mp_prob *mp, const mp_params *prm, int64_t *off, mp_stats *st)
{
    memset(st, 0, sizeof(*st));
    int64_t best_peak = -1;
    uint32_t n1 = mp->n + 1;
    uint32_t *perm = malloc(n1 * sizeof(uint32_t)), *rank = malloc(n1 * sizeof(uint32_t));
    int64_t *tmp = malloc(n1 * sizeof(int64_t));
    if (!perm || !rank || !tmp)
        goto fail;
    if (mp->n == 0) {
        st->optimal = true;
        st->method = "empty";
        best_peak = 0;
        goto done;
    }
    if (!run_greedy(mp, prm, off, &best_peak, st, perm, rank, tmp))
        goto fail;
    st->greedy_peak = best_peak;
    if (prm->effort >= 2 && best_peak > mp->load && mp->n <= prm->search_max_blocks &&
        prm->search_nodes > 0 &&
        !run_search(mp, prm, off, &best_peak, st, tmp))
        goto fail;
    if (best_peak == mp->load)
        st->optimal = true;
done:
    free(perm);
    free(rank);
    free(tmp);
    return best_peak;
fail:
    free(perm);
    free(rank);
    free(tmp);
    return -1;
}

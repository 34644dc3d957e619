/*
 * mp_plan.c - the planner's strategy: greedy placements under several orders
 * (keep the lowest peak), then, for a problem not yet at LOAD and small enough,
 * the exact search on a shrinking capacity between LOAD and the best peak.
 *
 * Determinism: the search is bounded by a node budget (the `search_nodes`
 * option), so a plan depends only on the problem and the options; the time
 * budget is a safety stop that cuts the search short only on a machine much
 * slower than the budget assumes (the plan is then still valid, maybe worse).
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

static const char *const method_names[2][MP_ORDER_COUNT] = {
    {"skyline/area", "skyline/size", "skyline/length", "skyline/total"},
    {"bestfit/area", "bestfit/size", "bestfit/length", "bestfit/total"},
};

/* The greedy placements; returns false on out of memory. */
static bool run_greedy(const mp_prob *mp, const mp_params *prm, int64_t *best,
                       int64_t *best_peak, mp_stats *st, uint32_t *perm, uint32_t *rank,
                       int64_t *tmp)
{
    int norders = prm->effort <= 0 ? 1 : MP_ORDER_COUNT;
    bool bestfit = prm->effort > 0 && mp_overlap_pairs(mp) <= MP_BESTFIT_MAX_PAIRS;
    for (int o = 0; o < norders && *best_peak != mp->load; o++) {
        if (!mp_order_blocks(mp, (mp_order)o, perm))
            return false;
        for (uint32_t i = 0; i < mp->n; i++)
            rank[perm[i]] = i;
        int64_t pk = mp_greedy_skyline(mp, rank, prm->rekey_limit, tmp);
        if (pk < 0)
            return false;
        keep(mp, pk, tmp, best_peak, best, st, method_names[0][o]);
        if (bestfit && *best_peak != mp->load) {
            pk = mp_greedy_bestfit(mp, perm, tmp);
            if (pk < 0)
                return false;
            keep(mp, pk, tmp, best_peak, best, st, method_names[1][o]);
        }
    }
    return true;
}

/* One decision attempt at @p cap: the orders in turn with doubling node
 * limits, within @p nodes_left and the deadline.  1 found, 0 proved none,
 * -1 budget spent, -2 out of memory. */
static int attempt(const mp_prob *mp, int64_t cap, uint32_t **perms, uint64_t *nodes_left,
                   uint64_t deadline, int64_t *tmp, mp_stats *st)
{
    uint64_t limit = mp->n > 64 ? mp->n : 64;
    for (;;) {
        for (int o = 0; o < MP_ORDER_COUNT; o++) {
            uint64_t lim = limit < *nodes_left ? limit : *nodes_left;
            if (lim == 0 || mp_now_ns() > deadline)
                return -1;
            uint64_t used = 0;
            int r = mp_search(mp, perms[o], cap, deadline, lim, tmp, &used);
            st->nodes += used;
            *nodes_left -= used < *nodes_left ? used : *nodes_left;
            if (r != -1)
                return r;
        }
        limit *= 2;
    }
}

/* The search between LOAD and the best peak so far. */
static bool run_search(const mp_prob *mp, const mp_params *prm, int64_t *best,
                       int64_t *best_peak, mp_stats *st, int64_t *tmp)
{
    uint32_t *perms[MP_ORDER_COUNT] = {0};
    bool ok = false;
    for (int o = 0; o < MP_ORDER_COUNT; o++) {
        perms[o] = malloc((mp->n + 1) * sizeof(uint32_t));
        if (!perms[o] || !mp_order_blocks(mp, (mp_order)o, perms[o]))
            goto out;
    }
    /* the section order first: MiniMalloc found it the strongest preorder */
    uint32_t *t = perms[0];
    perms[0] = perms[MP_ORDER_TOTAL];
    perms[MP_ORDER_TOTAL] = t;
    uint64_t deadline = mp_now_ns() + (uint64_t)(prm->time_budget_ms * 1e6);
    uint64_t nodes_left = prm->search_nodes;
    int64_t lo = mp->load;
    for (uint32_t i = 0; i < mp->n; i++)
        if (mp->fixed[i] >= 0 && mp->fixed[i] + mp->size[i] > lo)
            lo = mp->fixed[i] + mp->size[i];
    /* shrink the gap to LOAD: aim at best - gap/2; a failed attempt halves
     * the ambition, a found plan becomes the new best.  LOAD itself is tried
     * only when the gap is that small (a plan at LOAD is optimal). */
    int64_t div = 2;
    while (lo < *best_peak && nodes_left > 0 && mp_now_ns() < deadline && div <= 256) {
        int64_t gap = *best_peak - lo;
        int64_t cap = *best_peak - (gap / div > 0 ? gap / div : 1);
        uint64_t budget = nodes_left / 4 > 0 ? nodes_left / 4 : nodes_left;
        uint64_t before = budget;
        int r = attempt(mp, cap, perms, &budget, deadline, tmp, st);
        nodes_left -= before - budget;
        if (r == -2)
            goto out;
        if (r == 1) {
            int64_t pk = mp_peak(mp, tmp);
            st->search_peak = pk;
            keep(mp, pk, tmp, best_peak, best, st, "search");
        } else {
            if (r == 0 && cap == *best_peak - 1)
                st->optimal = true;
            if (r == 0)
                lo = cap + 1;
            div *= 2;
        }
    }
    ok = true;
out:
    for (int o = 0; o < MP_ORDER_COUNT; o++)
        free(perms[o]);
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
        prm->time_budget_ms > 0 && prm->search_nodes > 0 &&
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

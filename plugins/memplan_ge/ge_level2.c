/*
 * ge_level2.c - level-2 reuse of GE's BlockMemAssigner (ReuseBlocksByLifeTime,
 * MemoryBlock::AddLifeReuseBlock), the resize and the final layout
 * (ResizeMemoryBlocks, AddBlockMemOffset).  GE_SEMANTICS_BUILD 4.1.
 *
 * The groups of the walk are sorted by aligned size, largest first (ties:
 * ascending mode: fewer blocks first, then earlier life begin; descending
 * mode: later life begin first; then, for a deterministic result where GE's
 * std::sort leaves the order open, creation order).  Each group that is not
 * hosted yet tries to host every later group:
 *
 *  - the two lives must not cross: on one stream the later group begins
 *    after the earlier one's end; across streams the later group's "depend
 *    life begin" (problem->latest_before: the latest step of the earlier
 *    group's stream ordered before the later group's first step) must be
 *    >= the earlier group's tail (the step that produced its last block),
 *    that tail not 0, and > its end; both orders are tried;
 *  - failing that, on one stream, the blocks of the later group that cross
 *    no block of the host are kept and the crossing ones split off into a
 *    clone group, inserted right after it (re-sorting the rest when the clone
 *    is smaller than the next group, or always in memory-priority mode);
 *  - the guest first tries to nest into one of the host's children, then
 *    sits side by side after them, from the host's head, if the children's
 *    sizes plus its own stay within the host's aligned size (+512 slack when
 *    the guest is not exactly 512).
 *
 * Then every top-level group is resized (max of its children's sum and its
 * own largest block, 512-aligned) and placed back to back; children are laid
 * out from their host's head.  Each kiln block gets its group's head offset.
 */
#include "gemem.h"
#include <stdlib.h>
#include <string.h>

/* ---- ordering (CompareLifeInterval) -------------------------------------- */

/* <0 when group a comes before group b. */
static int cmp_groups(ge_plan *pl, uint32_t a, uint32_t b)
{
    int64_t sa = ge_group_align(pl, a), sb = ge_group_align(pl, b);
    if (sa != sb)
        return sa > sb ? -1 : 1;
    uint32_t ba = pl->h[a].begin, bb = pl->h[b].begin;
    if (!pl->s.ascending) {
        if (ba != bb)
            return ba > bb ? -1 : 1;
    } else {
        uint32_t na = pl->g[a].members.n, nb = pl->g[b].members.n;
        if (na != nb)
            return na < nb ? -1 : 1;
        if (ba != bb)
            return ba < bb ? -1 : 1;
    }
    return a < b ? -1 : (a > b);
}

/*
 * Natural merge sort: the ascending runs already in @p ids are merged
 * pairwise until one is left.  The order is total (ties end on the group id),
 * so the result is the unique sorted order, the same as any sort's; but a
 * nearly sorted tail (the usual case when memory-priority mode re-sorts after
 * every split) costs O(n) comparisons instead of O(n log n).
 */
kiln_status ge_sort_groups(ge_plan *pl, uint32_t *ids, uint32_t n)
{
    if (n < 2)
        return KILN_OK;
    uint32_t *tmp = malloc((size_t)n * sizeof(*tmp));
    uint32_t *runs = malloc(((size_t)n + 1) * sizeof(*runs)); /* run starts, then n */
    if (!tmp || !runs) {
        free(tmp);
        free(runs);
        return KILN_ERR_NOMEM;
    }
    uint32_t nr = 0;
    runs[nr++] = 0;
    for (uint32_t i = 1; i < n; i++)
        if (cmp_groups(pl, ids[i], ids[i - 1]) < 0)
            runs[nr++] = i;
    runs[nr] = n;
    while (nr > 1) {
        uint32_t k = 0;
        for (uint32_t r = 0; r < nr; r += 2) {
            uint32_t lo = runs[r], mid = runs[r + 1], hi = r + 2 <= nr ? runs[r + 2] : mid;
            if (r + 1 < nr) {
                uint32_t i = lo, j = mid, o = lo;
                while (i < mid && j < hi)
                    tmp[o++] = cmp_groups(pl, ids[j], ids[i]) < 0 ? ids[j++] : ids[i++];
                while (i < mid)
                    tmp[o++] = ids[i++];
                while (j < hi)
                    tmp[o++] = ids[j++];
                memcpy(ids + lo, tmp + lo, (size_t)(hi - lo) * sizeof(*ids));
            }
            runs[k++] = lo;
        }
        runs[k] = n;
        nr = k;
    }
    free(tmp);
    free(runs);
    return KILN_OK;
}

/* ---- life rules ---------------------------------------------------------- */

/* GE CanBlockLifeReuse: may group @p out come after group @p in? */
static bool life_reuse(const ge_plan *pl, uint32_t in, uint32_t out)
{
    const ge_hot *gi = &pl->h[in], *go = &pl->h[out];
    uint32_t out_begin = go->begin, in_end = gi->end;
    if (gi->stream == go->stream)
        return out_begin > in_end;
    if (!pl->p->latest_before)
        return false; /* GE: no recorded cross-stream edge, no reuse */
    uint32_t depend = pl->p->latest_before(pl->p->latest_before_ctx, out_begin, gi->stream);
    if (depend == UINT32_MAX)
        return false;
    uint32_t tail = gi->tail;
    return tail != 0 && depend >= tail && depend > in_end;
}

/* Does block @p m cross any block of group @p gi?  Members are disjoint and
 * sorted, so the first member ending at or after m's begin decides. */
static bool crosses(const ge_plan *pl, uint32_t gi, const kiln_mem_block *m)
{
    const ge_group *g = &pl->g[gi];
    const kiln_mem_block *bl = pl->p->blocks;
    uint32_t lo = 0, hi = g->members.n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (bl[g->members.v[mid]].last_use < m->first_use)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < g->members.n && bl[g->members.v[lo]].first_use <= m->last_use;
}

/*
 * GE CanIntervalLifeReuse (same stream only): keep in @p child the blocks
 * that cross no block of @p parent, move the crossing ones to a clone group
 * appended to @p clones.  When every block crosses, nothing changes.  Returns
 * whether some block stayed; *nomem on allocation failure.
 */
static bool interval_reuse(ge_plan *pl, uint32_t parent, uint32_t child, ge_ids *clones,
                           bool *nomem)
{
    if (pl->h[parent].stream != pl->h[child].stream)
        return false;
    const ge_group *c = &pl->g[child];
    uint32_t ncross = 0;
    for (uint32_t i = 0; i < c->members.n; i++)
        ncross += crosses(pl, parent, &pl->p->blocks[c->members.v[i]]);
    if (ncross == 0 || ncross == c->members.n)
        return ncross == 0; /* nothing crosses: reusable as is; all cross: no */
    ge_ids keep = {0}, cross = {0};
    for (uint32_t i = 0; i < c->members.n; i++) {
        uint32_t b = c->members.v[i];
        if (!ge_ids_push(crosses(pl, parent, &pl->p->blocks[b]) ? &cross : &keep, b))
            goto oom;
    }
    uint32_t ci = ge_group_new(pl, pl->g[child].block_size, pl->h[child].stream);
    if (ci == GE_NONE || !ge_ids_push(clones, ci))
        goto oom;
    ge_ids_free(&pl->g[child].members);
    pl->g[child].members = keep; /* GE DelNode keeps the stale AlignSize cache */
    pl->g[ci].members = cross;
    for (uint32_t i = 0; i < cross.n; i++)
        pl->group_of[cross.v[i]] = ci;
    ge_group_bounds(pl, child);
    ge_group_bounds(pl, ci);
    return true;
oom:
    ge_ids_free(&keep);
    ge_ids_free(&cross);
    *nomem = true;
    return false;
}

/* GE MemoryBlock::AddLifeReuseBlock: host group @p guest inside @p host. */
static bool add_life_reuse(ge_plan *pl, uint32_t host, uint32_t guest, ge_ids *clones,
                           uint32_t depth, bool child_reuse, bool *nomem)
{
    if (++depth > GE_MAX_DEPTH || (!child_reuse && pl->h[host].is_child) ||
        pl->h[guest].is_child || pl->h[guest].has_children)
        return false;
    bool can = life_reuse(pl, host, guest) || life_reuse(pl, guest, host);
    if (!can && !interval_reuse(pl, host, guest, clones, nomem))
        return false;
    for (uint32_t i = 0; i < pl->g[host].children.n && !*nomem; i++)
        if (add_life_reuse(pl, pl->g[host].children.v[i], guest, clones, depth, true, nomem))
            return true;
    if (*nomem)
        return false;
    int64_t a = ge_group_align(pl, guest), room = ge_group_align(pl, host);
    if (a != pl->unit)
        room += pl->unit; /* 802816 * 2 fits 1606144 only with the slack */
    if (pl->g[host].child_offset + a > room)
        return false;
    if (!ge_ids_push(&pl->g[host].children, guest)) {
        *nomem = true;
        return false;
    }
    pl->g[host].child_offset += a;
    pl->h[guest].is_child = true;
    pl->h[host].has_children = true;
    return true;
}

/* GE ReuseBlocksByLifeTime over pl->order. */
static kiln_status level2(ge_plan *pl)
{
    kiln_status rc = ge_sort_groups(pl, pl->order.v, pl->order.n);
    ge_ids clones = {0};
    bool nomem = rc != KILN_OK;
    for (uint32_t i = 0; i < pl->order.n && !nomem; i++) {
        uint32_t parent = pl->order.v[i];
        if (pl->h[parent].is_child)
            continue;
        for (uint32_t j = i + 1; j < pl->order.n && !nomem; j++) {
            clones.n = 0;
            add_life_reuse(pl, parent, pl->order.v[j], &clones, 0, false, &nomem);
            if (nomem || clones.n == 0)
                continue;
            if (!ge_ids_insert(&pl->order, j + 1, clones.v, clones.n)) {
                nomem = true;
                break;
            }
            int64_t min = ge_group_align(pl, parent);
            for (uint32_t k = 0; k < clones.n; k++)
                if (ge_group_align(pl, clones.v[k]) < min)
                    min = ge_group_align(pl, clones.v[k]);
            uint32_t next = j + 1 + clones.n;
            bool resort = pl->s.memory_priority ||
                          (next < pl->order.n && min < ge_group_align(pl, pl->order.v[next]));
            if (resort && ge_sort_groups(pl, pl->order.v + j + 1, pl->order.n - j - 1))
                nomem = true;
        }
    }
    ge_ids_free(&clones);
    return nomem ? KILN_ERR_NOMEM : KILN_OK;
}

/* ---- resize and layout --------------------------------------------------- */

/* GE MemoryBlock::Resize: max(children's sum, own largest block), aligned. */
static int64_t resize(ge_plan *pl, uint32_t gi)
{
    int64_t sum = 0, own = 0;
    for (uint32_t i = 0; i < pl->g[gi].children.n; i++)
        sum += resize(pl, pl->g[gi].children.v[i]);
    ge_group *g = &pl->g[gi];
    for (uint32_t i = 0; i < g->members.n; i++)
        if (pl->p->blocks[g->members.v[i]].size > own)
            own = pl->p->blocks[g->members.v[i]].size;
    g->size = ge_align_up(sum > own ? sum : own, pl->unit);
    return g->size;
}

/* GE SetHeadOffset: the group at @p off, its children side by side. */
static void place(ge_plan *pl, uint32_t gi, int64_t off)
{
    pl->g[gi].head = off;
    for (uint32_t i = 0; i < pl->g[gi].children.n; i++) {
        uint32_t c = pl->g[gi].children.v[i];
        place(pl, c, off);
        off += pl->g[c].size;
    }
}

kiln_status ge_level2_and_layout(ge_plan *pl, kiln_error *err)
{
    if (pl->s.reuse && pl->s.level2 && level2(pl) != KILN_OK)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory in level-2 reuse");
    int64_t off = 0;
    for (uint32_t i = 0; i < pl->order.n; i++) {
        uint32_t gi = pl->order.v[i];
        if (pl->h[gi].is_child)
            continue;
        resize(pl, gi);
        place(pl, gi, off);
        off += pl->g[gi].size;
    }
    pl->total = off;
    return KILN_OK;
}

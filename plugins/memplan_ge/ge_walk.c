/*
 * ge_walk.c - level-1 reuse of GE's BlockMemAssigner: the walk over the
 * schedule (AssignMemoryWithReuse -> ApplyMemory / ReleaseMemory).
 *
 * GE visits the nodes in topological order: a node's outputs, then its
 * workspaces, get memory, then the inputs whose last consumer it is are
 * released into a pool; its workspaces (and unused outputs) go to the pool
 * when the next node starts.  Over blocks: at step s, every block whose
 * first_use is s takes memory (in block order), then the blocks whose
 * last_use is s are released: the ones that began earlier first, then the
 * one-step blocks, so that "last released" is GE's.
 *
 * A request reuses a released group only from the pool of its own stream
 * (GE keys pools by memory type and memory stream: level 1 never crosses
 * streams), only with the same block size (the request rounded to 512, or its
 * range ceiling), and takes the last released such group (or the first, with
 * first-release-first-reuse).  GE's other level-1 conditions (batch label,
 * no-align/real-size blocks, block type, diff_stream_prior, zero copy,
 * continuous, _op_no_reuse_mem) have no field in the block ABI; see
 * docs/memory_planning.md for how the assigner expresses them.  The life
 * rule (life begin > the group's end on its stream) always holds here: a
 * group enters a pool only once its last block ended, before the current
 * step.
 *
 * Pools live in a hash table keyed by (stream, block size); each is a stack
 * (last released first) or a queue, so the walk is O(n + steps) expected.
 */
#include "gemem.h"
#include <stdlib.h>
#include <string.h>

int64_t ge_group_align(ge_plan *pl, uint32_t gi)
{
    ge_group *g = &pl->g[gi];
    if (g->align_cache == 0) {
        int64_t m = 0;
        for (uint32_t i = 0; i < g->members.n; i++)
            if (pl->p->blocks[g->members.v[i]].size > m)
                m = pl->p->blocks[g->members.v[i]].size;
        g->align_cache = ge_align_up(m, pl->unit);
    }
    return g->align_cache;
}

void ge_group_bounds(ge_plan *pl, uint32_t gi)
{
    const ge_group *g = &pl->g[gi];
    const kiln_mem_block *first = &pl->p->blocks[g->members.v[0]];
    const kiln_mem_block *last = &pl->p->blocks[g->members.v[g->members.n - 1]];
    pl->h[gi].begin = first->first_use;
    pl->h[gi].end = last->last_use;
    pl->h[gi].tail = last->first_use;
}

uint32_t ge_group_new(ge_plan *pl, int64_t block_size, uint32_t stream)
{
    if (pl->ng == pl->capg) {
        uint32_t cap = pl->capg ? pl->capg * 2 : 64;
        ge_group *g = realloc(pl->g, (size_t)cap * sizeof(*g));
        if (g)
            pl->g = g;
        ge_hot *h = realloc(pl->h, (size_t)cap * sizeof(*h));
        if (h)
            pl->h = h;
        if (!g || !h)
            return GE_NONE;
        pl->capg = cap;
    }
    ge_group *g = &pl->g[pl->ng];
    memset(g, 0, sizeof(*g));
    g->block_size = block_size;
    memset(&pl->h[pl->ng], 0, sizeof(pl->h[0]));
    pl->h[pl->ng].stream = stream;
    return pl->ng++;
}

/* GE's GetBlockSize: 512-rounded, or the first ceiling that holds the size
 * (the size itself when none does). */
static int64_t block_size(const ge_plan *pl, int64_t size)
{
    if (!pl->s.use_range)
        return ge_align_up(size, pl->unit);
    for (uint32_t i = 0; i < pl->nceils; i++)
        if (size <= pl->ceils[i])
            return pl->ceils[i];
    return size;
}

/* ---- pools -------------------------------------------------------------- */

typedef struct pool {
    uint32_t stream;
    int64_t size;
    ge_ids ids;    /* released groups, in release order */
    uint32_t head; /* first not yet taken (queue use) */
} pool;

typedef struct pools {
    pool *v;
    uint32_t n, cap;
    uint32_t *slot; /* hash -> pool index + 1 (0 = empty) */
    uint32_t nslot; /* power of two */
} pools;

static uint64_t pool_hash(uint32_t stream, int64_t size)
{
    uint64_t h = (uint64_t)size * 0x9E3779B97F4A7C15ull ^ ((uint64_t)stream << 32 | stream);
    h ^= h >> 29;
    return h * 0xBF58476D1CE4E5B9ull;
}

static bool pools_rehash(pools *ps, uint32_t nslot)
{
    uint32_t *slot = calloc(nslot, sizeof(*slot));
    if (!slot)
        return false;
    for (uint32_t i = 0; i < ps->n; i++) {
        uint64_t h = pool_hash(ps->v[i].stream, ps->v[i].size) & (nslot - 1);
        while (slot[h])
            h = (h + 1) & (nslot - 1);
        slot[h] = i + 1;
    }
    free(ps->slot);
    ps->slot = slot;
    ps->nslot = nslot;
    return true;
}

/* The pool of (stream, size); created when @p create.  NULL: none / no memory. */
static pool *pools_get(pools *ps, uint32_t stream, int64_t size, bool create)
{
    if (ps->nslot) {
        uint64_t h = pool_hash(stream, size) & (ps->nslot - 1);
        for (; ps->slot[h]; h = (h + 1) & (ps->nslot - 1)) {
            pool *p = &ps->v[ps->slot[h] - 1];
            if (p->stream == stream && p->size == size)
                return p;
        }
    }
    if (!create)
        return NULL;
    if (ps->n == ps->cap) {
        uint32_t cap = ps->cap ? ps->cap * 2 : 16;
        pool *v = realloc(ps->v, (size_t)cap * sizeof(*v));
        if (!v)
            return NULL;
        ps->v = v;
        ps->cap = cap;
    }
    if ((ps->n + 1) * 2 > ps->nslot && !pools_rehash(ps, ps->nslot ? ps->nslot * 2 : 64))
        return NULL;
    pool *p = &ps->v[ps->n];
    memset(p, 0, sizeof(*p));
    p->stream = stream;
    p->size = size;
    uint64_t h = pool_hash(stream, size) & (ps->nslot - 1);
    while (ps->slot[h])
        h = (h + 1) & (ps->nslot - 1);
    ps->slot[h] = ++ps->n;
    return p;
}

static void pools_free(pools *ps)
{
    for (uint32_t i = 0; i < ps->n; i++)
        ge_ids_free(&ps->v[i].ids);
    free(ps->v);
    free(ps->slot);
}

/* Take a released group from @p p: the last released, or the first. */
static uint32_t pool_take(pool *p, bool first)
{
    if (!p || p->head == p->ids.n)
        return GE_NONE;
    uint32_t g = first ? p->ids.v[p->head++] : p->ids.v[--p->ids.n];
    if (p->head == p->ids.n)
        p->head = p->ids.n = 0;
    return g;
}

/* ---- the walk ----------------------------------------------------------- */

/* Step s: the blocks that start take memory. */
static bool apply(ge_plan *pl, pools *ps, uint32_t s)
{
    const ge_steps *st = pl->steps;
    for (uint32_t k = st->start_off[s]; k < st->start_off[s + 1]; k++) {
        uint32_t b = st->start_ids[k];
        const kiln_mem_block *kb = &pl->p->blocks[b];
        if (kb->flags & KILN_MEM_BLOCK_FIXED)
            continue;
        int64_t bs = block_size(pl, kb->size);
        uint32_t gi = GE_NONE;
        if (pl->s.reuse)
            gi = pool_take(pools_get(ps, kb->stream, bs, false), pl->s.first_release_first_reuse);
        if (gi == GE_NONE) {
            if ((gi = ge_group_new(pl, bs, kb->stream)) == GE_NONE ||
                !ge_ids_push(&pl->order, gi))
                return false;
        }
        if (!ge_ids_push(&pl->g[gi].members, b))
            return false;
        pl->g[gi].align_cache = 0; /* GE AddNodeTypeIndex: recompute */
        ge_group_bounds(pl, gi);
        pl->group_of[b] = gi;
    }
    return true;
}

/* Step s: the blocks that end release their groups to their stream's pool. */
static bool release(ge_plan *pl, pools *ps, uint32_t s)
{
    const ge_steps *st = pl->steps;
    for (uint32_t k = st->end_off[s]; k < st->end_off[s + 1]; k++) {
        uint32_t b = st->end_ids[k];
        if (pl->p->blocks[b].flags & KILN_MEM_BLOCK_FIXED)
            continue;
        uint32_t gi = pl->group_of[b];
        pool *p = pools_get(ps, pl->h[gi].stream, pl->g[gi].block_size, true);
        if (!p || !ge_ids_push(&p->ids, pl->group_of[b]))
            return false;
    }
    return true;
}

kiln_status ge_walk(ge_plan *pl, kiln_error *err)
{
    pools ps = {0};
    bool ok = true;
    for (uint32_t s = 0; ok && s < pl->steps->count; s++) {
        ok = apply(pl, &ps, s);
        if (ok && pl->s.reuse)
            ok = release(pl, &ps, s);
    }
    pools_free(&ps);
    if (!ok)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory in the level-1 walk");
    return KILN_OK;
}

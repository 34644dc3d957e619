/*
 * memplan.c - the kernel's side of memory planning (kiln_component.h,
 * docs/memory_planning.md): LOAD, the plan checker, and running a planner
 * component by name.
 *
 * The checker sweeps the blocks by first_use (events radix-sorted, sort.h); the blocks live at a step are
 * kept in an interval set ordered by offset (a sorted array: insertions are
 * O(k) for k live blocks, fine for the thousands a step holds).  A new
 * block must not overlap its neighbours in that set, which is enough: the
 * set never holds two overlapping blocks.
 */
#include "base.h"
#include "ctx.h"
#include "graph_int.h"
#include "crash.h"
#include "plugin.h"
#include "sort.h"

#include <stdlib.h>
#include <string.h>

static int64_t aligned_size(const kiln_mem_problem *p, const kiln_mem_block *b)
{
    uint64_t a = b->alignment ? b->alignment : (p->alignment ? p->alignment : 1);
    uint64_t s = (uint64_t)b->size;
    return (int64_t)((s + a - 1) / a * a);
}

/* The events of @p p in order: a start at first_use and an end at
 * last_use + 1, ends before starts at one step, else in block order (a
 * stable sort of key step << 1 | is_start).  Returns false on OOM. */
typedef struct evs {
    uint64_t *key; /* step << 1 | 1 for a start */
    uint32_t *block;
} evs;

static bool events(const kiln_mem_problem *p, evs *e)
{
    size_t n = (size_t)p->block_count * 2;
    e->key = malloc((n + 1) * sizeof(*e->key));
    e->block = malloc((n + 1) * sizeof(*e->block));
    if (!e->key || !e->block) {
        free(e->key);
        free(e->block);
        return false;
    }
    for (uint32_t i = 0; i < p->block_count; i++) {
        e->key[2 * i] = (uint64_t)p->blocks[i].first_use << 1 | 1;
        e->block[2 * i] = i;
        e->key[2 * i + 1] = (uint64_t)(uint32_t)(p->blocks[i].last_use + 1u) << 1;
        e->block[2 * i + 1] = i;
    }
    if (!kiln__sort_pairs_u64(e->key, e->block, n)) {
        free(e->key);
        free(e->block);
        return false;
    }
    return true;
}

static void events_free(evs *e)
{
    free(e->key);
    free(e->block);
}

int64_t kiln_mem_problem_load(const kiln_mem_problem *p)
{
    if (!p || !p->blocks || !p->block_count)
        return 0;
    evs e;
    if (!events(p, &e))
        return -1;
    int64_t live = 0, best = 0;
    for (size_t i = 0; i < (size_t)p->block_count * 2; i++) {
        int64_t sz = aligned_size(p, &p->blocks[e.block[i]]);
        live += (e.key[i] & 1) ? sz : -sz;
        if (live > best)
            best = live;
    }
    events_free(&e);
    return best;
}

/* The live set, ordered by offset. */
typedef struct live_set {
    uint32_t *b;
    uint32_t n;
} live_set;

static uint32_t live_lower(const kiln_mem_problem *p, const live_set *s, int64_t off)
{
    uint32_t lo = 0, hi = s->n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (p->blocks[s->b[mid]].offset < off)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static kiln_status check_block(const kiln_mem_problem *p, uint32_t i, int64_t peak,
                               kiln_error *err)
{
    const kiln_mem_block *b = &p->blocks[i];
    uint64_t a = b->alignment ? b->alignment : (p->alignment ? p->alignment : 1);
    if (b->size <= 0)
        return kiln_errorf(err, KILN_ERR_INVALID, "memory plan (%s): block %u has size %lld",
                           p->memory_type ? p->memory_type : "?", b->id, (long long)b->size);
    if (b->last_use < b->first_use)
        return kiln_errorf(err, KILN_ERR_INVALID, "memory plan (%s): block %u ends (step %u) "
                           "before it starts (step %u)", p->memory_type ? p->memory_type : "?",
                           b->id, b->last_use, b->first_use);
    if (a & (a - 1))
        return kiln_errorf(err, KILN_ERR_INVALID, "memory plan (%s): block %u: alignment %llu "
                           "is not a power of two", p->memory_type ? p->memory_type : "?",
                           b->id, (unsigned long long)a);
    if (b->offset < 0 || (uint64_t)b->offset % a)
        return kiln_errorf(err, KILN_ERR_INVALID, "memory plan (%s): block %u at offset %lld: "
                           "not a non-negative multiple of its alignment %llu",
                           p->memory_type ? p->memory_type : "?", b->id, (long long)b->offset,
                           (unsigned long long)a);
    if (b->offset > peak - b->size)
        return kiln_errorf(err, KILN_ERR_INVALID, "memory plan (%s): block %u [%lld, %lld) "
                           "ends past the reported size %lld",
                           p->memory_type ? p->memory_type : "?", b->id, (long long)b->offset,
                           (long long)(b->offset + b->size), (long long)peak);
    return KILN_OK;
}

kiln_status kiln_mem_plan_check(const kiln_mem_problem *p, int64_t peak, kiln_error *err)
{
    if (!p || (p->block_count && !p->blocks))
        return kiln_errorf(err, KILN_ERR_INVALID, "kiln_mem_plan_check: NULL problem");
    const char *mt = p->memory_type ? p->memory_type : "?";
    if (peak < 0 || (p->capacity > 0 && peak > p->capacity))
        return kiln_errorf(err, KILN_ERR_INVALID, "memory plan (%s): size %lld exceeds the "
                           "capacity %lld", mt, (long long)peak, (long long)p->capacity);
    for (uint32_t i = 0; i < p->block_count; i++) {
        kiln_status st = check_block(p, i, peak, err);
        if (st != KILN_OK)
            return st;
    }
    evs e;
    bool have = events(p, &e);
    live_set s = {malloc(((size_t)p->block_count + 1) * sizeof(uint32_t)), 0};
    if (!have || !s.b) {
        if (have)
            events_free(&e);
        free(s.b);
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory checking a memory plan");
    }
    kiln_status st = KILN_OK;
    for (size_t k = 0; k < (size_t)p->block_count * 2 && st == KILN_OK; k++) {
        uint32_t i = e.block[k];
        const kiln_mem_block *b = &p->blocks[i];
        uint32_t at = live_lower(p, &s, b->offset);
        if (!(e.key[k] & 1)) { /* remove i: find it among equal offsets */
            while (at < s.n && s.b[at] != i)
                at++;
            if (at < s.n) {
                memmove(s.b + at, s.b + at + 1, (size_t)(s.n - at - 1) * sizeof(*s.b));
                s.n--;
            }
            continue;
        }
        const kiln_mem_block *nb = at < s.n ? &p->blocks[s.b[at]] : NULL;
        const kiln_mem_block *pb = at > 0 ? &p->blocks[s.b[at - 1]] : NULL;
        const kiln_mem_block *hit = NULL;
        if (nb && nb->offset < b->offset + b->size)
            hit = nb;
        else if (pb && pb->offset + pb->size > b->offset)
            hit = pb;
        if (hit) {
            st = kiln_errorf(err, KILN_ERR_INVALID,
                             "memory plan (%s): blocks %u [%lld, %lld) steps %u..%u and %u "
                             "[%lld, %lld) steps %u..%u are live at once and overlap", mt,
                             hit->id, (long long)hit->offset, (long long)(hit->offset + hit->size),
                             hit->first_use, hit->last_use, b->id, (long long)b->offset,
                             (long long)(b->offset + b->size), b->first_use, b->last_use);
            break;
        }
        memmove(s.b + at + 1, s.b + at, (size_t)(s.n - at) * sizeof(*s.b));
        s.b[at] = i;
        s.n++;
    }
    events_free(&e);
    free(s.b);
    return st;
}

kiln_status kiln_mem_plan_run(kiln_graph *g, const char *planner, const kiln_options *opts,
                              kiln_mem_problem *p, int64_t *peak, kiln_error *err)
{
    if (!g || !p || !peak)
        return kiln_errorf(err, KILN_ERR_INVALID, "kiln_mem_plan_run: NULL argument");
    *peak = 0;
    if (!planner)
        planner = kiln_ctx_option(g->ctx, "kiln.memory_planner");
    if (!planner || !planner[0])
        planner = "kiln";
    const kiln_component *c = NULL;
    kiln_status st = kiln__registry_find_loading(g->ctx, KILN_COMP_MEM_PLANNER, planner, &c, err);
    if (st != KILN_OK)
        return kiln_error_push(err, "memory planner %s", planner);
    if (!c)
        return kiln_errorf(err, KILN_ERR_NOT_FOUND, "no loaded plugin provides memory planner "
                           "%s (kiln plugins lists the planners)", planner);
    /* FIXED blocks: remember where they were */
    bool any_fixed = false;
    for (uint32_t i = 0; i < p->block_count && !any_fixed; i++)
        any_fixed = (p->blocks[i].flags & KILN_MEM_BLOCK_FIXED) != 0;
    int64_t *fixed = any_fixed ? malloc((size_t)p->block_count * sizeof(*fixed)) : NULL;
    if (any_fixed && !fixed)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory checking memory planner %s",
                           c->name);
    for (uint32_t i = 0; fixed && i < p->block_count; i++)
        fixed[i] = p->blocks[i].offset;
    void *inst = NULL;
    kiln_activity act = KILN_ACTIVITY(kiln__comp_plugin(c), c->name, "memory planner", g, 0);
    kiln_activity *prev = kiln__activity_enter(&act);
    if (c->d.planner.create)
        st = c->d.planner.create(opts, err, &inst);
    if (st == KILN_OK)
        st = c->d.planner.plan(inst, p, peak, err);
    if (c->d.planner.destroy && inst)
        c->d.planner.destroy(inst);
    kiln__activity_leave(prev);
    if (st == KILN_OK && fixed)
        for (uint32_t i = 0; i < p->block_count && st == KILN_OK; i++)
            if ((p->blocks[i].flags & KILN_MEM_BLOCK_FIXED) && p->blocks[i].offset != fixed[i])
                st = kiln_errorf(err, KILN_ERR_INVALID, "memory plan (%s): fixed block %u moved "
                                 "from offset %lld to %lld",
                                 p->memory_type ? p->memory_type : "?", p->blocks[i].id,
                                 (long long)fixed[i], (long long)p->blocks[i].offset);
    free(fixed);
    if (st == KILN_OK)
        st = kiln_mem_plan_check(p, *peak, err);
    if (st != KILN_OK)
        kiln_error_push(err, "memory planner %s", c->name);
    return st;
}

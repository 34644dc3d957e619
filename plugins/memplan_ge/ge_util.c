/*
 * ge_util.c - small helpers of the GE planners: id arrays, alignment, the
 * validation of a problem and its step lists (which blocks start and end at
 * each step of the schedule).
 */
#include "gemem.h"
#include <stdlib.h>
#include <string.h>

bool ge_ids_push(ge_ids *a, uint32_t x)
{
    return ge_ids_insert(a, a->n, &x, 1);
}

/* Insert @p n ids at position @p at (<= a->n).  false when out of memory. */
bool ge_ids_insert(ge_ids *a, uint32_t at, const uint32_t *x, uint32_t n)
{
    if (a->n + n > a->cap) {
        uint32_t cap = a->cap ? a->cap : 4;
        while (cap < a->n + n)
            cap *= 2;
        uint32_t *v = realloc(a->v, (size_t)cap * sizeof(*v));
        if (!v)
            return false;
        a->v = v;
        a->cap = cap;
    }
    memmove(a->v + at + n, a->v + at, (size_t)(a->n - at) * sizeof(*a->v));
    memcpy(a->v + at, x, (size_t)n * sizeof(*x));
    a->n += n;
    return true;
}

void ge_ids_free(ge_ids *a)
{
    free(a->v);
    memset(a, 0, sizeof(*a));
}

/* GE's AlignMemOffset with a unit: 0 stays 0, else round up. */
int64_t ge_align_up(int64_t v, int64_t unit)
{
    if (v <= 0)
        return v;
    return (v + unit - 1) / unit * unit;
}

static uint32_t block_align(const kiln_mem_problem *p, const kiln_mem_block *b)
{
    return b->alignment ? b->alignment : p->alignment;
}

int64_t ge_unit(const kiln_mem_problem *p)
{
    int64_t unit = GE_ALIGN;
    if ((int64_t)p->alignment > unit)
        unit = p->alignment;
    for (uint32_t i = 0; i < p->block_count; i++)
        if ((int64_t)p->blocks[i].alignment > unit)
            unit = p->blocks[i].alignment;
    return unit;
}

int64_t ge_fixed_base(const kiln_mem_problem *p, int64_t unit)
{
    int64_t end = 0;
    for (uint32_t i = 0; i < p->block_count; i++) {
        const kiln_mem_block *b = &p->blocks[i];
        if ((b->flags & KILN_MEM_BLOCK_FIXED) && b->offset + b->size > end)
            end = b->offset + b->size;
    }
    return ge_align_up(end, unit);
}

static kiln_status check_block(const kiln_mem_problem *p, uint32_t i, kiln_error *err)
{
    const kiln_mem_block *b = &p->blocks[i];
    uint32_t a = block_align(p, b);
    if (b->size <= 0)
        return kiln_errorf(err, KILN_ERR_INVALID, "block %u (id %u): size %lld is not positive",
                           i, b->id, (long long)b->size);
    if (b->last_use < b->first_use)
        return kiln_errorf(err, KILN_ERR_INVALID,
                           "block %u (id %u): last_use %u before first_use %u", i, b->id,
                           b->last_use, b->first_use);
    if (b->last_use == UINT32_MAX)
        return kiln_errorf(err, KILN_ERR_INVALID, "block %u (id %u): last_use %u out of range",
                           i, b->id, b->last_use);
    if (p->step_count && b->last_use >= p->step_count)
        return kiln_errorf(err, KILN_ERR_INVALID,
                           "block %u (id %u): last_use %u beyond the %u steps", i, b->id,
                           b->last_use, p->step_count);
    if (a & (a - 1))
        return kiln_errorf(err, KILN_ERR_INVALID,
                           "block %u (id %u): alignment %u is not a power of two", i, b->id, a);
    if ((b->flags & KILN_MEM_BLOCK_FIXED) && (b->offset < 0 || (a && b->offset % a)))
        return kiln_errorf(err, KILN_ERR_INVALID,
                           "block %u (id %u): fixed offset %lld is negative or unaligned", i,
                           b->id, (long long)b->offset);
    return KILN_OK;
}

/* Counting sort of the blocks by @p key into off[0..steps] / ids. */
static bool bucket(const kiln_mem_problem *p, uint32_t steps, bool by_end, uint32_t **off_out,
                   uint32_t **ids_out)
{
    uint32_t *off = calloc((size_t)steps + 1, sizeof(*off));
    uint32_t *ids = malloc((size_t)(p->block_count ? p->block_count : 1) * sizeof(*ids));
    uint32_t *fill = calloc((size_t)steps + 1, sizeof(*fill));
    if (!off || !ids || !fill) {
        free(off), free(ids), free(fill);
        return false;
    }
    for (uint32_t i = 0; i < p->block_count; i++)
        off[(by_end ? p->blocks[i].last_use : p->blocks[i].first_use) + 1]++;
    for (uint32_t s = 0; s < steps; s++)
        off[s + 1] += off[s];
    /* Ends: blocks that began earlier (GE releases inputs after the node's
     * outputs and workspaces), then the one-step blocks (GE's workspaces and
     * unused outputs, released when the next node starts). */
    for (int pass = 0; pass < (by_end ? 2 : 1); pass++)
        for (uint32_t i = 0; i < p->block_count; i++) {
            const kiln_mem_block *b = &p->blocks[i];
            if (by_end && (pass == 0) != (b->first_use < b->last_use))
                continue;
            uint32_t s = by_end ? b->last_use : b->first_use;
            ids[off[s] + fill[s]++] = i;
        }
    free(fill);
    *off_out = off;
    *ids_out = ids;
    return true;
}

kiln_status ge_steps_build(const kiln_mem_problem *p, ge_steps *st, kiln_error *err)
{
    memset(st, 0, sizeof(*st));
    uint32_t steps = p->step_count;
    for (uint32_t i = 0; i < p->block_count; i++) {
        kiln_status rc = check_block(p, i, err);
        if (rc != KILN_OK)
            return rc;
        if (p->blocks[i].last_use >= steps)
            steps = p->blocks[i].last_use + 1;
    }
    st->count = steps;
    if (!bucket(p, steps, false, &st->start_off, &st->start_ids) ||
        !bucket(p, steps, true, &st->end_off, &st->end_ids)) {
        ge_steps_free(st);
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory (%u blocks, %u steps)",
                           p->block_count, steps);
    }
    return KILN_OK;
}

void ge_steps_free(ge_steps *st)
{
    free(st->start_off);
    free(st->start_ids);
    free(st->end_off);
    free(st->end_ids);
    memset(st, 0, sizeof(*st));
}

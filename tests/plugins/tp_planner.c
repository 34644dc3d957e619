/*
 * tp_planner.c - memory planners for MemoryAssigner's tests (never shipped):
 *   TestFirstFit  blocks by first use (larger first on a tie), each at the
 *                 lowest aligned offset clear of every placed block whose life
 *                 intersects its own: reuse across lives, O(n^2 log n)
 *   TestBroken    every non-fixed block at offset 0 (a planner that breaks
 *                 the no-overlap rule, for the checks' error paths)
 */
#include <kiln/kiln.h>
#include <stdlib.h>
#include <string.h>

typedef struct span {
    int64_t off, end;
} span;

static int cmp_span(const void *a, const void *b)
{
    const span *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

static const kiln_mem_problem *sort_p;
static int cmp_block(const void *a, const void *b)
{
    const kiln_mem_block *x = &sort_p->blocks[*(const uint32_t *)a];
    const kiln_mem_block *y = &sort_p->blocks[*(const uint32_t *)b];
    if ((x->flags & KILN_MEM_BLOCK_FIXED) != (y->flags & KILN_MEM_BLOCK_FIXED))
        return (x->flags & KILN_MEM_BLOCK_FIXED) ? -1 : 1;
    if (x->first_use != y->first_use)
        return x->first_use < y->first_use ? -1 : 1;
    return x->size > y->size ? -1 : x->size < y->size;
}

static int64_t align_up(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

static kiln_status ff_plan(void *inst, kiln_mem_problem *p, int64_t *peak, kiln_error *err)
{
    (void)inst;
    uint32_t n = p->block_count;
    uint32_t *order = malloc((n + 1) * sizeof(*order));
    span *sp = malloc((n + 1) * sizeof(*sp));
    char *placed = calloc(n + 1, 1);
    if (!order || !sp || !placed) {
        free(order);
        free(sp);
        free(placed);
        return kiln_errorf(err, KILN_ERR_NOMEM, "TestFirstFit: out of memory");
    }
    for (uint32_t i = 0; i < n; i++)
        order[i] = i;
    sort_p = p;
    qsort(order, n, sizeof(*order), cmp_block);
    *peak = 0;
    for (uint32_t k = 0; k < n; k++) {
        kiln_mem_block *b = &p->blocks[order[k]];
        int64_t a = b->alignment ? b->alignment : (p->alignment ? p->alignment : 1);
        if (!(b->flags & KILN_MEM_BLOCK_FIXED)) {
            uint32_t ns = 0;
            for (uint32_t j = 0; j < n; j++) {
                const kiln_mem_block *c = &p->blocks[j];
                if (placed[j] && c->first_use <= b->last_use && b->first_use <= c->last_use)
                    sp[ns++] = (span){c->offset, c->offset + align_up(c->size, a)};
            }
            qsort(sp, ns, sizeof(*sp), cmp_span);
            int64_t off = 0;
            for (uint32_t j = 0; j < ns; j++) {
                if (sp[j].off >= off + b->size)
                    break;
                if (sp[j].end > off)
                    off = align_up(sp[j].end, a);
            }
            b->offset = off;
        }
        placed[order[k]] = 1;
        if (b->offset + align_up(b->size, a) > *peak)
            *peak = b->offset + align_up(b->size, a);
    }
    free(order);
    free(sp);
    free(placed);
    return KILN_OK;
}

static kiln_status broken_plan(void *inst, kiln_mem_problem *p, int64_t *peak, kiln_error *err)
{
    (void)inst;
    (void)err;
    *peak = 0;
    for (uint32_t i = 0; i < p->block_count; i++) {
        kiln_mem_block *b = &p->blocks[i];
        if (!(b->flags & KILN_MEM_BLOCK_FIXED))
            b->offset = 0;
        if (b->offset + b->size > *peak)
            *peak = b->offset + b->size;
    }
    return KILN_OK;
}

static kiln_status init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)h;
    (void)e;
    static const kiln_mem_planner_desc ff = {.struct_size = sizeof(kiln_mem_planner_desc),
                                             .name = "TestFirstFit",
                                             .summary = "first fit by first use (tests)",
                                             .plan = ff_plan};
    static const kiln_mem_planner_desc bad = {.struct_size = sizeof(kiln_mem_planner_desc),
                                              .name = "TestBroken",
                                              .summary = "everything at offset 0 (tests)",
                                              .plan = broken_plan};
    kiln_status st = kiln_register_mem_planner(r, &ff);
    if (st == KILN_OK)
        st = kiln_register_mem_planner(r, &bad);
    return st;
}

KILN_PLUGIN_DEFINE("kiln.test.planner", "1.0.0", "MIT", "memory planners for tests", init, NULL)

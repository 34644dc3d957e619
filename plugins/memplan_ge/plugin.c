/*
 * plugin.c - libkiln_memplan_ge.so: GE's memory planners as kiln memory-
 * planner components (GE_SEMANTICS 8.8, GE_SEMANTICS_BUILD 4.1;
 * docs/memory_planning.md "GE's planners").
 *
 *   ge_binary_block  BinaryBlockMemAssigner: requests rounded to 512, level-1
 *                    reuse in the walk, level-2 ReuseBlocksByLifeTime
 *   ge_max_block     MaxBlockMemAssigner: one range (the largest request), so
 *                    level 1 reuses any released group of the stream; no
 *                    level 2
 *   ge_hybrid        HybridMemAssigner: runs both (and, with memory_priority,
 *                    the four range-binary variants) and keeps the smallest
 *                    total; ties go to the first in that order (binary-block)
 *
 * Options (each planner): first_release_first_reuse (GE's graph attribute
 * _mem_release_first_reuse_first; when set it overrides every variant, as in
 * GE), disable_reuse (ge.exec.disableReuseMemory="1"); ge_hybrid also
 * memory_priority (ge.exec.memoryOptimizationPolicy="MemoryPriority").
 */
#include "gemem.h"
#include <stdlib.h>
#include <string.h>

typedef enum ge_kind { GE_BINARY, GE_MAX, GE_HYBRID } ge_kind;

typedef struct ge_inst {
    ge_kind kind;
    bool has_frfr, frfr; /* first_release_first_reuse given, its value */
    bool disable_reuse;
    bool memory_priority;
} ge_inst;

kiln_status ge_assign(const kiln_mem_problem *p, const ge_steps *st, ge_strategy s,
                      int64_t *off, int64_t *peak, kiln_error *err)
{
    ge_plan pl;
    memset(&pl, 0, sizeof(pl));
    pl.p = p;
    pl.steps = st;
    pl.s = s;
    pl.unit = ge_unit(p);
    int64_t *ceils = NULL;
    kiln_status rc = KILN_OK;
    if (s.use_range) {
        rc = s.level2 ? ge_ranges_binary(p, &ceils, &pl.nceils)
                      : ge_ranges_max(p, &ceils, &pl.nceils);
        if (rc != KILN_OK) {
            rc = kiln_errorf(err, rc, "out of memory building the size ranges");
            goto done;
        }
        pl.ceils = ceils;
    }
    pl.group_of = malloc(((size_t)p->block_count + 1) * sizeof(*pl.group_of));
    if (!pl.group_of) {
        rc = kiln_errorf(err, KILN_ERR_NOMEM, "out of memory (%u blocks)", p->block_count);
        goto done;
    }
    if ((rc = ge_walk(&pl, err)) != KILN_OK || (rc = ge_level2_and_layout(&pl, err)) != KILN_OK)
        goto done;
    int64_t base = ge_fixed_base(p, pl.unit);
    for (uint32_t i = 0; i < p->block_count; i++)
        off[i] = (p->blocks[i].flags & KILN_MEM_BLOCK_FIXED) ? p->blocks[i].offset
                                                            : base + pl.g[pl.group_of[i]].head;
    *peak = base + pl.total;
done:
    for (uint32_t i = 0; i < pl.ng; i++) {
        ge_ids_free(&pl.g[i].members);
        ge_ids_free(&pl.g[i].children);
    }
    free(pl.g);
    free(pl.h);
    free(pl.group_of);
    ge_ids_free(&pl.order);
    free(ceils);
    return rc;
}

/* The variants a planner runs, in GE's order (HybridMemAssigner::Assign). */
static uint32_t variants(const ge_inst *in, ge_strategy *v)
{
    static const ge_strategy binary = {false, true, false, false, true, true};
    static const ge_strategy maxb = {true, true, false, false, false, true};
    uint32_t n = 0;
    if (in->kind != GE_MAX)
        v[n++] = binary;
    if (in->kind != GE_BINARY)
        v[n++] = maxb;
    if (in->kind == GE_HYBRID && in->memory_priority) {
        v[0].memory_priority = true; /* the binary assigner runs in the mode too */
        /* range-binary: descending frfr, ascending frfr, descending frlr, ascending frlr */
        for (int k = 0; k < 4; k++)
            v[n++] = (ge_strategy){true, (k & 1) != 0, k < 2, true, true, true};
    }
    for (uint32_t i = 0; i < n; i++) {
        if (in->has_frfr)
            v[i].first_release_first_reuse = in->frfr;
        if (in->disable_reuse)
            v[i].reuse = false;
    }
    return n;
}

static const char *kind_name(ge_kind k)
{
    return k == GE_BINARY ? "ge_binary_block" : k == GE_MAX ? "ge_max_block" : "ge_hybrid";
}

static kiln_status ge_plan_run(void *inst, kiln_mem_problem *p, int64_t *peak, kiln_error *err)
{
    const ge_inst *in = inst;
    ge_strategy v[6];
    uint32_t nv = variants(in, v);
    ge_steps st;
    kiln_status rc = ge_steps_build(p, &st, err);
    if (rc != KILN_OK)
        return rc;
    size_t bytes = ((size_t)p->block_count + 1) * sizeof(int64_t);
    int64_t *best = malloc(bytes), *cur = malloc(bytes), best_peak = -1;
    if (!best || !cur) {
        rc = kiln_errorf(err, KILN_ERR_NOMEM, "out of memory (%u blocks)", p->block_count);
        goto done;
    }
    for (uint32_t i = 0; i < nv; i++) {
        int64_t pk = 0;
        if ((rc = ge_assign(p, &st, v[i], cur, &pk, err)) != KILN_OK)
            goto done;
        if (best_peak < 0 || pk < best_peak) { /* ties: the earlier variant */
            int64_t *t = best;
            best = cur;
            cur = t;
            best_peak = pk;
        }
    }
    if (p->capacity > 0 && best_peak > p->capacity) {
        rc = kiln_errorf(err, KILN_ERR_LIMIT,
                         "%s: the plan needs %lld bytes of %s, above the capacity %lld",
                         kind_name(in->kind), (long long)best_peak,
                         p->memory_type ? p->memory_type : "memory", (long long)p->capacity);
        goto done;
    }
    for (uint32_t i = 0; i < p->block_count; i++)
        p->blocks[i].offset = best[i];
    *peak = best_peak;
done:
    free(best);
    free(cur);
    ge_steps_free(&st);
    return rc;
}

static kiln_status ge_create(ge_kind kind, const kiln_options *opts, kiln_error *err,
                             void **inst)
{
    ge_inst *in = calloc(1, sizeof(*in));
    if (!in)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    in->kind = kind;
    if (opts) {
        in->has_frfr = kiln_options_get_bool(opts, "first_release_first_reuse", &in->frfr);
        (void)kiln_options_get_bool(opts, "disable_reuse", &in->disable_reuse);
        (void)kiln_options_get_bool(opts, "memory_priority", &in->memory_priority);
    }
    *inst = in;
    return KILN_OK;
}

static kiln_status create_binary(const kiln_options *o, kiln_error *e, void **inst)
{
    return ge_create(GE_BINARY, o, e, inst);
}

static kiln_status create_max(const kiln_options *o, kiln_error *e, void **inst)
{
    return ge_create(GE_MAX, o, e, inst);
}

static kiln_status create_hybrid(const kiln_options *o, kiln_error *e, void **inst)
{
    return ge_create(GE_HYBRID, o, e, inst);
}

static void ge_destroy(void *inst)
{
    free(inst);
}

#define GE_COMMON_OPTIONS                                                                   \
    {sizeof(kiln_option_def), KILN_OPT_BOOL, "first_release_first_reuse", NULL,             \
     "level 1 takes the first released block instead of the last (GE's graph attribute "    \
     "_mem_release_first_reuse_first); when given it applies to every variant",             \
     0, 0},                                                                                 \
    {sizeof(kiln_option_def), KILN_OPT_BOOL, "disable_reuse", "false",                      \
     "no reuse at all: every block its own memory (GE ge.exec.disableReuseMemory=1)", 0, 0}

static const kiln_option_def single_options[] = {GE_COMMON_OPTIONS};
static const kiln_option_def hybrid_options[] = {
    GE_COMMON_OPTIONS,
    {sizeof(kiln_option_def), KILN_OPT_BOOL, "memory_priority", "false",
     "also run GE's four range-binary variants (ge.exec.memoryOptimizationPolicy="
     "MemoryPriority)",
     0, 0},
};

#define N_OPTS(a) ((uint32_t)(sizeof(a) / sizeof((a)[0])))

static const kiln_mem_planner_desc planners[] = {
    {sizeof(kiln_mem_planner_desc), "ge_binary_block",
     "GE BinaryBlockMemAssigner: 512-rounded level-1 reuse per stream, then level-2 "
     "lifetime nesting",
     0, N_OPTS(single_options), single_options, create_binary, ge_destroy, ge_plan_run, {0}},
    {sizeof(kiln_mem_planner_desc), "ge_max_block",
     "GE MaxBlockMemAssigner: one size range (the largest request), level-1 reuse only", 0,
     N_OPTS(single_options), single_options, create_max, ge_destroy, ge_plan_run, {0}},
    {sizeof(kiln_mem_planner_desc), "ge_hybrid",
     "GE HybridMemAssigner: binary-block and max-block (and the range-binary variants in "
     "memory-priority mode), the smaller total wins",
     0, N_OPTS(hybrid_options), hybrid_options, create_hybrid, ge_destroy, ge_plan_run, {0}},
};

static kiln_status init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)h;
    (void)e;
    kiln_status st = KILN_OK;
    for (uint32_t i = 0; st == KILN_OK && i < N_OPTS(planners); i++)
        st = kiln_register_mem_planner(r, &planners[i]);
    return st;
}

KILN_PLUGIN_DEFINE("kiln.memplan_ge", "0.1.0", "Apache-2.0",
                   "GE's memory planners: binary-block, max-block, hybrid", init, NULL)

/*
 * plugin.c - libkiln_memplan.so: kiln's own memory planner, component "kiln"
 * of kind memory-planner (docs/memory_planning.md).
 *
 * The planner copies the kiln_mem_problem into its compressed-time form
 * (mp_prep.c), plans it (mp_plan.c: greedy placements, then an exact search
 * for small problems not yet at LOAD) and writes the offsets back.  FIXED
 * blocks keep their offset; a plan above a nonzero capacity is an error naming
 * the memory type, the peak, the capacity and LOAD.
 */
#include "mp.h"

#include <kiln/kiln.h>
#include <stdlib.h>

typedef struct mp_inst {
    mp_params prm;
} mp_inst;

static const kiln_option_def planner_options[] = {
    {sizeof(kiln_option_def), KILN_OPT_INT, "effort", "2",
     "0: one greedy placement; 1: several greedy orders, peak-first seeds and best fit, the "
     "lowest peak kept; 2: also the exact search on problems not at LOAD (within search_nodes)",
     0, 2},
    {sizeof(kiln_option_def), KILN_OPT_FLOAT, "time_budget_ms", "0",
     "wall-clock stop of the exact search in milliseconds, 0 = none (a problem's own "
     "time_budget_ms wins); plans then depend on the machine's speed",
     0, 1e9},
    {sizeof(kiln_option_def), KILN_OPT_INT, "search_nodes", "2000000",
     "node budget of the exact search: placements tried (keeps plans deterministic)", 0, 1e12},
    {sizeof(kiln_option_def), KILN_OPT_INT, "search_max_blocks", "1000",
     "problems with more blocks skip the exact search", 0, 1e7},
    {sizeof(kiln_option_def), KILN_OPT_INT, "rekey_limit", "64",
     "skyline placement: times a block is re-keyed before it takes its current lowest offset",
     1, 1e9},
};

static int64_t opt_int(const kiln_options *o, const char *key, int64_t def)
{
    int64_t v;
    return o && kiln_options_get_int(o, key, &v) ? v : def;
}

static kiln_status planner_create(const kiln_options *opts, kiln_error *err, void **inst)
{
    mp_inst *m = kiln_alloc(sizeof(*m));
    if (!m)
        return kiln_errorf(err, KILN_ERR_NOMEM, "memory planner kiln: out of memory");
    double tb = 0;
    if (opts)
        (void)kiln_options_get_float(opts, "time_budget_ms", &tb);
    m->prm.time_budget_ms = tb;
    m->prm.effort = (int)opt_int(opts, "effort", 2);
    m->prm.search_nodes = (uint64_t)opt_int(opts, "search_nodes", 2000000);
    m->prm.search_max_blocks = (uint32_t)opt_int(opts, "search_max_blocks", 1000);
    m->prm.rekey_limit = (uint32_t)opt_int(opts, "rekey_limit", 64);
    *inst = m;
    return KILN_OK;
}

static void planner_destroy(void *inst)
{
    kiln_free(inst);
}

/* Read the problem's blocks straight into the planner's arrays and build the
 * mp_prob (no copy in between: a big graph has a million blocks). */
static kiln_status load_problem(const kiln_mem_problem *p, const mp_params *prm, mp_prob *mp,
                                kiln_error *err)
{
    uint32_t n = p->block_count;
    if (!mp_prob_alloc(mp, n, p->capacity))
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    for (uint32_t i = 0; i < n; i++) {
        const kiln_mem_block *b = &p->blocks[i];
        uint32_t a = b->alignment ? b->alignment : p->alignment;
        if (b->size <= 0 || b->last_use < b->first_use || (a & (a - 1)) != 0) {
            mp_prob_free(mp);
            return kiln_errorf(err, KILN_ERR_INVALID, "block %u: %s", b->id,
                               b->size <= 0 ? "size is not positive"
                               : b->last_use < b->first_use ? "last_use before first_use"
                                                            : "alignment is not a power of two");
        }
        if ((b->flags & KILN_MEM_BLOCK_FIXED) && b->offset < 0) {
            mp_prob_free(mp);
            return kiln_errorf(err, KILN_ERR_INVALID, "fixed block %u: negative offset %lld",
                               b->id, (long long)b->offset);
        }
        mp->size[i] = b->size;
        mp->lo[i] = b->first_use;
        mp->hi[i] = b->last_use;
        mp->align[i] = a ? a : 1;
        mp->fixed[i] = (b->flags & KILN_MEM_BLOCK_FIXED) ? b->offset : -1;
    }
    /* the section times serve the search alone (mp_plan's condition) */
    bool search = prm->effort >= 2 && n <= prm->search_max_blocks && prm->search_nodes > 0;
    if (!mp_prob_sections(mp, search))
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    return KILN_OK;
}

static kiln_status planner_plan(void *inst, kiln_mem_problem *p, int64_t *peak, kiln_error *err)
{
    mp_inst *m = inst;
    mp_params prm = m->prm;
    if (p->time_budget_ms > 0)
        prm.time_budget_ms = p->time_budget_ms;
    mp_prob mp;
    kiln_status st = load_problem(p, &prm, &mp, err);
    if (st != KILN_OK)
        return st;
    int64_t *off = malloc((mp.n ? mp.n : 1) * sizeof(int64_t));
    mp_stats stats;
    int64_t pk = off ? mp_plan(&mp, &prm, off, &stats) : -1;
    if (pk < 0) {
        st = kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    } else if (p->capacity > 0 && pk > p->capacity) {
        st = kiln_errorf(err, KILN_ERR_LIMIT,
                         "%s: the best plan found needs %lld bytes, above the capacity %lld "
                         "(LOAD, the least any plan needs, is %lld)",
                         p->memory_type ? p->memory_type : "memory", (long long)pk,
                         (long long)p->capacity, (long long)mp.load);
    } else {
        for (uint32_t i = 0; i < mp.n; i++)
            p->blocks[i].offset = off[i];
        *peak = pk;
    }
    free(off);
    mp_prob_free(&mp);
    return st;
}

static const kiln_mem_planner_desc kiln_planner = {
    .struct_size = sizeof(kiln_mem_planner_desc),
    .name = "kiln",
    .summary = "kiln's planner: skyline and best-fit placements under several orders and "
               "peak-first seeds, then MiniMalloc-style decision searches for small problems "
               "not yet at LOAD",
    .option_count = sizeof(planner_options) / sizeof(planner_options[0]),
    .options = planner_options,
    .create = planner_create,
    .destroy = planner_destroy,
    .plan = planner_plan,
};

static kiln_status init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)h;
    (void)e;
    return kiln_register_mem_planner(r, &kiln_planner);
}

KILN_PLUGIN_DEFINE("kiln.memplan", "0.1.0", "Apache-2.0",
                   "kiln's memory planner (memory-planner component kiln)", init, NULL)

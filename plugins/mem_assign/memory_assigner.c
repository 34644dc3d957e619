/*
 * memory_assigner.c - MemoryAssigner, a graph pass of the build stage (GE
 * GraphMemoryAssigner / MemoryAssigner::AssignMemory; GE_SEMANTICS 8.8,
 * GE_SEMANTICS_BUILD 4; docs/memory_planning.md "MemoryAssigner").
 *
 * On the root only (KILN_PASS_NO_SUBGRAPHS), after ProcessInplace and
 * StreamAllocator: builds one kiln_mem_problem per memory type from the
 * memory symbols, continuous groups and workspaces (ma_buffers.c), runs the
 * memory planner through kiln_mem_plan_run (pass option `planner`, else the
 * session's kiln.memory_planner, else "kiln"; the kernel checks every plan),
 * writes offsets, sizes and memory types back (ma_write.c), then checks the
 * plan from the graph alone with kiln_memory_plan_verify.  Any failure names
 * the planner, the memory type or the anchors and fails the pass.
 *
 * Then every subgraph with static sizes gets a plan of its own
 * (ma_subgraphs.c), which the runtimes lay out in a region per subgraph.
 *
 * Options: `planner` (string), `alignment` (int, power of two, default 512),
 * `report_buffers` (bool: the report lists every buffer; also session option
 * kiln.report_buffers=true, `kiln compile --report-buffers`), `subgraphs`
 * (bool, default true: plan the subgraphs).
 * Requires: the schedule (any; none = topological order on one stream).
 * Preserves: the CFG (attributes only).
 * Complexity: O(anchors + nodes) plus the planner plus the O(n log n) check.
 */
#include "mem_assign.h"
#include <stdio.h>
#include <string.h>

typedef struct ma_opts {
    const char *planner;
    int64_t alignment;
    bool report_buffers;
    bool subgraphs;
} ma_opts;

static const kiln_option_def options[] = {
    {sizeof(kiln_option_def), KILN_OPT_STRING, "planner", NULL,
     "memory planner component (default: the session's kiln.memory_planner, else kiln)", 0, 0},
    {sizeof(kiln_option_def), KILN_OPT_INT, "alignment", "512",
     "block alignment in bytes (a power of two)", 1, 1 << 30},
    {sizeof(kiln_option_def), KILN_OPT_BOOL, "report_buffers", "false",
     "list every buffer with its offset in the report's memory_plan", 0, 0},
    {sizeof(kiln_option_def), KILN_OPT_BOOL, "subgraphs", "true",
     "plan the tensors of every subgraph with static sizes (a region per subgraph)", 0, 0},
};

static kiln_status create(const kiln_options *opts, kiln_error *err, void **inst)
{
    ma_opts *o = kiln_alloc(sizeof(*o));
    if (!o)
        return kiln_errorf(err, KILN_ERR_NOMEM, "MemoryAssigner: out of memory");
    memset(o, 0, sizeof(*o));
    o->alignment = 512;
    o->subgraphs = true;
    const char *p = NULL;
    if (kiln_options_get_string(opts, "planner", &p) && p && p[0])
        o->planner = p;
    kiln_options_get_int(opts, "alignment", &o->alignment);
    kiln_options_get_bool(opts, "report_buffers", &o->report_buffers);
    kiln_options_get_bool(opts, "subgraphs", &o->subgraphs);
    if (o->alignment <= 0 || (o->alignment & (o->alignment - 1)) != 0) {
        kiln_free(o);
        return kiln_errorf(err, KILN_ERR_PARAM,
                           "MemoryAssigner: option alignment must be a power of two");
    }
    *inst = o;
    return KILN_OK;
}

static void destroy(void *inst) { kiln_free(inst); }

typedef struct lb_ctx {
    const kiln_schedule *s;
} lb_ctx;

static uint32_t latest_before(void *ctx, uint32_t step, uint32_t stream)
{
    return kiln_schedule_latest_before(((lb_ctx *)ctx)->s, step, stream);
}

static kiln_status plan_types(ma_state *m, const char *planner)
{
    lb_ctx lb = {m->s};
    /* every type is planned, an empty one too: a missing planner is an error
     * on any graph, not only on one that happens to need memory */
    if (!m->ntypes && ma_type_index(m, "HBM") == MA_NONE)
        return kiln_errorf(m->err, KILN_ERR_INTERNAL, "MemoryAssigner: no memory type");
    for (uint32_t t = 0; t < m->ntypes; t++) {
        ma_type *ty = &m->types[t];
        kiln_mem_problem p = {
            .struct_size = sizeof(p),
            .block_count = ty->nblocks,
            .blocks = ty->blocks,
            .alignment = (uint32_t)m->align,
            .step_count = m->steps,
            .stream_count = m->streams ? m->streams : 1,
            .memory_type = ty->name,
            .latest_before = latest_before,
            .latest_before_ctx = &lb,
        };
        kiln_status st = kiln_mem_plan_run(m->root, planner, NULL, &p, &ty->peak, m->err);
        if (st != KILN_OK)
            return kiln_error_push(m->err, "%s memory (%u blocks)", ty->name,
                                   ty->nblocks);
        ty->load = kiln_mem_problem_load(&p);
        kiln_pass_stat_add(m->ctx, "blocks", ty->nblocks);

    }
    return KILN_OK;
}

static kiln_pass_result run(void *inst, kiln_pass_ctx *ctx, kiln_graph *g)
{
    const ma_opts *o = inst;
    ma_state m;
    memset(&m, 0, sizeof(m));
    m.ctx = ctx;
    m.root = g;
    m.err = kiln_pass_error(ctx);
    m.align = o ? o->alignment : 512;
    const char *planner = o ? o->planner : NULL;
    if (!planner)
        planner = kiln_pass_session_option(ctx, "kiln.memory_planner");
    if (!planner || !planner[0])
        planner = "kiln";
    const char *rb = kiln_pass_session_option(ctx, "kiln.report_buffers");
    bool report = (o && o->report_buffers) || (rb && strcmp(rb, "true") == 0);
    kiln_status st = ma_collect(&m);
    if (st == KILN_OK)
        st = ma_build_problems(&m);
    if (st == KILN_OK)
        st = plan_types(&m, planner);
    if (st == KILN_OK)
        st = ma_write(&m, planner, report);
    /* the plan is on the graph: free its working set before the check reads
     * the graph again (the pass's memory peak) */
    ma_free(&m);
    if (st == KILN_OK && (st = kiln_memory_plan_verify(g, m.err)) != KILN_OK)
        kiln_error_push(m.err, "the plan of planner %s fails the check",
                        planner);
    if (st == KILN_OK)
        st = ma_plan_subgraphs(&m, planner, o ? o->subgraphs : true);
    ma_free(&m);
    return st == KILN_OK ? KILN_PASS_CHANGED : KILN_PASS_FAILED;
}

const kiln_pass_desc kiln_memory_assigner_pass = {
    .struct_size = sizeof(kiln_pass_desc),
    .kind = KILN_PASS_KIND_GRAPH,
    .name = "MemoryAssigner",
    .summary = "plan feature-map memory: offsets per memory symbol, workspaces, checked",
    .flags = KILN_PASS_PRESERVES_CFG | KILN_PASS_NO_SUBGRAPHS,
    .option_count = sizeof(options) / sizeof(options[0]),
    .options = options,
    .create = create,
    .destroy = destroy,
    .run_graph = run,
};

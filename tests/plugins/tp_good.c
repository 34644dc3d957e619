/*
 * tp_good.c - a well-behaved plugin registering one component of every kind.
 * Each does real, observable work so tests can check it ran:
 *   TestGraphPass   sets graph attr "test_graph_pass_runs" += option "count"
 *   TestNodePass    sets node attr "visited" = true on every node
 *   TestCorruptPass creates a data cycle (for --verify-each tests)
 *   TestFusionPass  pattern Relu->Relu, replacement removes the second Relu
 *   test_engine     supports Relu and Add (float32)
 *   TestChecker     CONTINUOUS_INPUT x CONTINUOUS_INPUT: isolates anchor b
 *   TestPlanner     bump allocation (offset = running sum)
 *   TestAllocator   malloc-backed
 *   test_frontend   exports a line per node "name type"
 *   TestTuner       sets graph attr "tuned_<step>" = true
 *   TestInstrument  appends "before_stage S", "before_pass S P", ... lines to the
 *                   file named by $KILN_TEST_INSTRUMENT_LOG (when set)
 */
#define KILN_EXPERIMENTAL /* registers the experimental kinds too */
#include <kiln/kiln.h>
#include <stdio.h>
#include <stdlib.h>

static const kiln_option_def graph_opts[] = {
    {sizeof(kiln_option_def), KILN_OPT_INT, "count", "1", "how much to add", 0, 100},
    {sizeof(kiln_option_def), KILN_OPT_STRING, "label", NULL, "a label", 0, 0},
};

typedef struct gp_inst {
    int64_t count;
} gp_inst;

static kiln_status gp_create(const kiln_options *o, kiln_error *err, void **inst)
{
    (void)err;
    gp_inst *p = kiln_alloc(sizeof(*p));
    if (!p)
        return KILN_ERR_NOMEM;
    p->count = 1;
    kiln_options_get_int(o, "count", &p->count);
    *inst = p;
    return KILN_OK;
}

static void gp_destroy(void *inst)
{
    kiln_free(inst);
}

static kiln_pass_result gp_run(void *inst, kiln_pass_ctx *ctx, kiln_graph *g)
{
    (void)ctx;
    if (kiln_graph_parent(g))
        return KILN_PASS_NOT_CHANGED;
    kiln_attrs *a = kiln_graph_attrs(g);
    int64_t v = 0;
    kiln_attrs_get_int(a, "test_graph_pass_runs", &v);
    kiln_attrs_set_int(a, "test_graph_pass_runs", v + ((gp_inst *)inst)->count);
    return KILN_PASS_CHANGED;
}

static kiln_status np_run(void *inst, kiln_pass_ctx *ctx, kiln_graph *g, kiln_node_id n)
{
    (void)inst;
    (void)ctx;
    return kiln_attrs_set_bool(kiln_node_attrs_mut(g, n), "visited", true);
}

static kiln_pass_result corrupt_run(void *inst, kiln_pass_ctx *ctx, kiln_graph *g)
{
    (void)inst;
    (void)ctx;
    /* Feed the first node's first free input from the last node that has an
     * output: on a chain this closes a cycle. */
    kiln_node_id first = kiln_graph_next_node(g, 0), last = 0;
    for (kiln_node_id n = first; n; n = kiln_graph_next_node(g, n))
        if (kiln_node_output_count(g, n))
            last = n;
    if (!first || !last)
        return KILN_PASS_NOT_CHANGED;
    kiln_node_set_input_count(g, first, kiln_node_input_count(g, first) + 1);
    kiln_edge_add(g, last, 0, first, kiln_node_input_count(g, first) - 1);
    return KILN_PASS_CHANGED;
}

static kiln_status fu_patterns(void *inst, kiln_pattern *p, kiln_error *err)
{
    (void)inst;
    (void)err;
    int32_t d = kiln_pattern_node(p, "x", "Data");
    int32_t a = kiln_pattern_node(p, "r1", "Relu"), b = kiln_pattern_node(p, "r2", "Relu");
    if (kiln_pattern_edge(p, d, 0, a, 0) != KILN_OK || kiln_pattern_edge(p, a, 0, b, 0) != KILN_OK)
        return KILN_ERR_INVALID;
    return kiln_pattern_output(p, b, 0);
}

/* Relu(Relu(x)) -> Relu(x): the replacement is a copy of the outer Relu. */
static kiln_status fu_replace(void *inst, kiln_pass_ctx *ctx, const kiln_graph *g,
                              const kiln_match *m, kiln_graph *repl)
{
    (void)inst;
    (void)ctx;
    kiln_node_id r = kiln_graph_copy_node(repl, g, kiln_match_node(m, 2), NULL);
    kiln_node_id out = kiln_graph_add_node(repl, "out", "NetOutput", 1, 0);
    if (!r || !out)
        return KILN_ERR_NOMEM;
    if (kiln_edge_add(repl, kiln_fusion_replacement_input(repl, 0), 0, r, 0) != KILN_OK)
        return KILN_ERR_NOMEM;
    return kiln_edge_add(repl, r, 0, out, 0);
}

static kiln_status ck_check(const kiln_checker_query *q, kiln_checker_result *r)
{
    kiln_checker_reason(r, "test: isolate b");
    return kiln_checker_isolate(r, &q->b);
}

static kiln_status pl_plan(void *inst, kiln_mem_problem *p, int64_t *peak, kiln_error *err)
{
    (void)inst;
    (void)err;
    int64_t off = 0;
    for (uint32_t i = 0; i < p->block_count; i++) {
        p->blocks[i].offset = off;
        off += p->blocks[i].size;
    }
    *peak = off;
    return KILN_OK;
}

static void *al_alloc(void *inst, size_t size, uint32_t stream)
{
    (void)inst;
    (void)stream;
    return kiln_alloc(size);
}

static void al_free(void *inst, void *ptr, uint32_t stream)
{
    (void)inst;
    (void)stream;
    kiln_free(ptr);
}

static kiln_status fe_export(kiln_graph *g, const char *path, kiln_error *err)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return kiln_errorf(err, KILN_ERR_IO, "cannot write %s", path);
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n))
        fprintf(f, "%s %s\n", kiln_node_name_str(g, n), kiln_node_op_str(g, n));
    return fclose(f) == 0 ? KILN_OK : KILN_ERR_IO;
}

static kiln_status tu_step(void *inst, kiln_pass_ctx *ctx, const char *step, kiln_graph *root)
{
    (void)inst;
    (void)ctx;
    char key[64];
    snprintf(key, sizeof(key), "tuned_%s", step);
    return kiln_attrs_set_bool(kiln_graph_attrs(root), key, true);
}

static void trace(const char *what, const char *stage, const char *pass)
{
    const char *path = getenv("KILN_TEST_INSTRUMENT_LOG");
    FILE *f = path ? fopen(path, "a") : NULL;
    if (f) {
        fprintf(f, "%s %s%s%s\n", what, stage, pass ? " " : "", pass ? pass : "");
        fclose(f);
    }
}

static void in_before_stage(void *inst, const char *stage, const kiln_graph *g)
{
    (void)inst;
    (void)g;
    trace("before_stage", stage, NULL);
}

static void in_after_stage(void *inst, const char *stage, const kiln_graph *g)
{
    (void)inst;
    (void)g;
    trace("after_stage", stage, NULL);
}

static void in_before_pass(void *inst, const char *stage, const char *pass, const kiln_graph *g)
{
    (void)inst;
    (void)g;
    trace("before_pass", stage, pass);
}

static void in_after_pass(void *inst, const char *stage, const char *pass, const kiln_graph *g,
                          kiln_pass_result r)
{
    (void)inst;
    (void)g;
    (void)r;
    trace("after_pass", stage, pass);
}

static const kiln_op_info engine_ops[] = {
    {sizeof(kiln_op_info), "Relu", 1u << KILN_DT_FLOAT32, NULL, 0},
    {sizeof(kiln_op_info), "Add", 1u << KILN_DT_FLOAT32, NULL, 0},
};

static const kiln_attr_pair ck_pairs[] = {{KILN_AA_CONTINUOUS_INPUT, KILN_AA_CONTINUOUS_INPUT}};

static kiln_status init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)h;
    (void)e;
    static const kiln_pass_desc gp = {
        .struct_size = sizeof(kiln_pass_desc), .kind = KILN_PASS_KIND_GRAPH,
        .name = "TestGraphPass", .summary = "counts its runs in a graph attribute",
        .option_count = 2, .options = graph_opts, .create = gp_create, .destroy = gp_destroy,
        .run_graph = gp_run};
    static const kiln_pass_desc np = {
        .struct_size = sizeof(kiln_pass_desc), .kind = KILN_PASS_KIND_NODE,
        .name = "TestNodePass", .summary = "marks every node visited", .run_node = np_run};
    static const kiln_pass_desc cp = {
        .struct_size = sizeof(kiln_pass_desc), .kind = KILN_PASS_KIND_GRAPH,
        .name = "TestCorruptPass", .summary = "creates a cycle", .run_graph = corrupt_run};
    static const kiln_fusion_pass_desc fp = {
        .struct_size = sizeof(kiln_fusion_pass_desc), .name = "TestFusionPass",
        .summary = "Relu->Relu to Relu", .kind = KILN_FUSION_PATTERN,
        .stage = KILN_FUSION_STAGE_AFTER_ORIGIN_GRAPH_OPTIMIZE, .patterns = fu_patterns,
        .replacement = fu_replace};
    static const kiln_engine_desc en = {
        .struct_size = sizeof(kiln_engine_desc), .name = "test_engine", .summary = "test",
        .op_count = 2, .ops = engine_ops};
    static const kiln_checker_desc ck = {
        .struct_size = sizeof(kiln_checker_desc), .name = "TestChecker", .summary = "test",
        .pair_count = 1, .pairs = ck_pairs, .check = ck_check};
    static const kiln_mem_planner_desc pl = {
        .struct_size = sizeof(kiln_mem_planner_desc), .name = "TestPlanner", .plan = pl_plan};
    static const kiln_allocator_desc al = {
        .struct_size = sizeof(kiln_allocator_desc), .name = "TestAllocator", .alloc = al_alloc,
        .free = al_free};
    static const kiln_frontend_desc fe = {
        .struct_size = sizeof(kiln_frontend_desc), .name = "test_frontend",
        .extensions = ".tlist", .export_file = fe_export};
    static const kiln_tuner_desc tu = {
        .struct_size = sizeof(kiln_tuner_desc), .name = "TestTuner", .on_build_step = tu_step};
    static const kiln_instrument_desc in = {
        .struct_size = sizeof(kiln_instrument_desc), .name = "TestInstrument",
        .before_stage = in_before_stage, .after_stage = in_after_stage,
        .before_pass = in_before_pass, .after_pass = in_after_pass};
    kiln_status st;
    if ((st = kiln_register_pass(r, &gp)) || (st = kiln_register_pass(r, &np)) ||
        (st = kiln_register_pass(r, &cp)) || (st = kiln_register_fusion_pass(r, &fp)) ||
        (st = kiln_register_engine(r, &en)) || (st = kiln_register_checker(r, &ck)) ||
        (st = kiln_register_mem_planner(r, &pl)) || (st = kiln_register_allocator(r, &al)) ||
        (st = kiln_register_frontend(r, &fe)) || (st = kiln_register_tuner(r, &tu)) ||
        (st = kiln_register_instrument(r, &in)))
        return st;
    return KILN_OK;
}

KILN_PLUGIN_DEFINE("kiln.test.good", "1.0.0", "MIT", "every component kind", init, NULL)

/*
 * test_passmgr.c - the pass manager: GE PassManager semantics (P33/P34/P36
 * equivalents), failure reporting, GEPass grouping of node passes, instance
 * lifetime, instrument hooks and the instrumentation options (verify-each,
 * bisect-limit, time-passes, print-after + dump-dir).
 */
#include "kiln_test.h"
#include "passmgr.h"
#include "graph_int.h"
#include "verify.h"
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Test state: the passes append "<pass>@<graph>" or "<pass>:<node>" here. */
static char trace[4096];
static int created, destroyed, instr_before, instr_after, instr_failed;
static char instr_order[256];

static void note(const char *fmt, const char *a, const char *b)
{
    size_t len = strlen(trace);
    snprintf(trace + len, sizeof(trace) - len, fmt, a, b);
}

static kiln_status t_create(const kiln_options *o, kiln_error *e, void **inst)
{
    (void)o, (void)e;
    created++;
    *inst = &created;
    return KILN_OK;
}

static void t_destroy(void *inst)
{
    CU_ASSERT_PTR_EQUAL(inst, &created);
    destroyed++;
}

static kiln_pass_ctx *last_pc;

static kiln_pass_result g_record(void *inst, kiln_pass_ctx *pc, kiln_graph *g)
{
    (void)inst;
    last_pc = pc;
    /* which pass am I?  The context names it. */
    note("%s@%s ", kiln__passctx_pass_name(pc), kiln_graph_name(g));
    return KILN_PASS_NOT_CHANGED;
}

static kiln_pass_result g_add(void *inst, kiln_pass_ctx *pc, kiln_graph *g)
{
    (void)inst;
    note("%s@%s ", kiln__passctx_pass_name(pc), kiln_graph_name(g));
    if (kiln_graph_parent(g))
        return KILN_PASS_NOT_CHANGED;
    char buf[32];
    kiln_graph_add_node(g, kiln_graph_unique_name(g, "added", buf, sizeof(buf)), "Relu", 0, 0);
    kiln_pass_stat_add(pc, "added", 1);
    return KILN_PASS_CHANGED;
}

static kiln_pass_result g_fail(void *inst, kiln_pass_ctx *pc, kiln_graph *g)
{
    (void)inst;
    note("%s@%s ", kiln__passctx_pass_name(pc), kiln_graph_name(g));
    return KILN_PASS_FAILED;
}

static kiln_pass_result g_corrupt(void *inst, kiln_pass_ctx *pc, kiln_graph *g)
{
    (void)inst, (void)pc;
    if (kiln_graph_parent(g))
        return KILN_PASS_NOT_CHANGED;
    /* Re-point add1's input 1 at data1 without threading it into data1's consumer list. */
    kiln_node_id add = kiln_graph_find_node(g, "add1"), d = kiln_graph_find_node(g, "data1");
    g->in[g->nodes[add].in_off + 1].src = d;
    return KILN_PASS_CHANGED;
}

static kiln_pass_result g_oom(void *inst, kiln_pass_ctx *pc, kiln_graph *g)
{
    (void)inst, (void)pc;
    g->oom = true;
    return KILN_PASS_CHANGED;
}

static kiln_status n_record(void *inst, kiln_pass_ctx *pc, kiln_graph *g, kiln_node_id n)
{
    (void)inst;
    note("%s:%s ", kiln__passctx_pass_name(pc), kiln_node_name_str(g, n));
    return KILN_OK;
}

static kiln_status n_fail(void *inst, kiln_pass_ctx *pc, kiln_graph *g, kiln_node_id n)
{
    (void)inst, (void)pc, (void)g, (void)n;
    return KILN_ERR_PASS;
}

static void i_before(void *inst, const char *stage, const char *pass, const kiln_graph *g)
{
    (void)inst, (void)stage, (void)g;
    instr_before++;
    size_t len = strlen(instr_order);
    snprintf(instr_order + len, sizeof(instr_order) - len, "<%s", pass);
}

static void i_after(void *inst, const char *stage, const char *pass, const kiln_graph *g,
                    kiln_pass_result res)
{
    (void)inst, (void)stage, (void)g, (void)res;
    instr_after++;
    size_t len = strlen(instr_order);
    snprintf(instr_order + len, sizeof(instr_order) - len, ">%s", pass);
}

static void i_failed(void *inst, const char *stage, const char *pass, const kiln_graph *g)
{
    (void)inst, (void)stage, (void)pass, (void)g;
    instr_failed++;
}

#define GP(nm, fn, fl)                                                                             \
    {                                                                                              \
        .struct_size = sizeof(kiln_pass_desc), .kind = KILN_PASS_KIND_GRAPH, .name = nm,           \
        .flags = fl, .create = t_create, .destroy = t_destroy, .run_graph = fn                     \
    }
#define NP(nm, fn, fl)                                                                             \
    {                                                                                              \
        .struct_size = sizeof(kiln_pass_desc), .kind = KILN_PASS_KIND_NODE, .name = nm,            \
        .flags = fl, .create = t_create, .destroy = t_destroy, .run_node = fn                      \
    }

static const kiln_pass_desc descs[] = {
    GP("GRecord", g_record, 0),
    GP("GRecord2", g_record, 0),
    GP("GNoSub", g_record, KILN_PASS_NO_SUBGRAPHS),
    GP("GRequired", g_record, KILN_PASS_REQUIRED),
    GP("GAdd", g_add, 0),
    GP("GAddClaimsCfg", g_add, KILN_PASS_PRESERVES_CFG),
    GP("GRecordCfg", g_record, KILN_PASS_PRESERVES_CFG),
    GP("GFail", g_fail, 0),
    GP("GCorrupt", g_corrupt, 0),
    GP("GOom", g_oom, 0),
    GP("OptimizeStage::RemoveSameConstPass", g_record, 0),
    GP("RemoveSameConstPass", g_record, 0),
    GP("DisableButNotInWhiteList", g_record, 0),
    NP("NodeA", n_record, 0),
    NP("NodeB", n_record, 0),
    NP("NodeFail", n_fail, 0),
};

static const kiln_instrument_desc instrument = {.struct_size = sizeof(kiln_instrument_desc),
                                                .name = "TestInstr",
                                                .before_pass = i_before,
                                                .after_pass = i_after,
                                                .after_pass_failed = i_failed};

static kiln_status reg_init(const kiln_host_api *host, kiln_registrar *reg, kiln_error *err)
{
    (void)host, (void)err;
    for (size_t i = 0; i < KILN_ARRAY_LEN(descs); i++)
        if (kiln_register_pass(reg, &descs[i]) != KILN_OK)
            return KILN_ERR_PLUGIN_INIT;
    return kiln_register_instrument(reg, &instrument);
}

static const kiln_plugin_desc plugin = {.struct_size = sizeof(kiln_plugin_desc),
                                        .abi_major = KILN_ABI_MAJOR,
                                        .abi_minor = KILN_ABI_MINOR,
                                        .name = "kiln.test.passmgr",
                                        .version = "1",
                                        .init = reg_init};

/* ---- fixture --------------------------------------------------------------- */

static kiln_ctx *ctx;
static kiln_error err;
static FILE *logf_;
static kiln_instrumentation instr;

static void setup(void)
{
    trace[0] = instr_order[0] = 0;
    created = destroyed = instr_before = instr_after = instr_failed = 0;
    ctx = kiln_ctx_create();
    CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(kiln_plugin_register_static(ctx, &plugin, NULL, &err), KILN_OK);
    logf_ = tmpfile();
    memset(&instr, 0, sizeof(instr));
    instr.bisect_limit = -1;
    instr.log = logf_;
}

static void teardown(kiln_graph *g)
{
    if (g)
        kiln_graph_destroy(g);
    kiln_ctx_destroy(ctx);
    fclose(logf_);
}

static char *log_text(void)
{
    static char buf[16384];
    fflush(logf_);
    rewind(logf_);
    size_t n = fread(buf, 1, sizeof(buf) - 1, logf_);
    buf[n] = 0;
    return buf;
}

/* G1 of the GEPass tests with a subgraph "sub" under reshape1. */
static kiln_graph *build(void)
{
    kiln_graph *g = kiln_graph_create(ctx, "root");
    kiln_node_id d = kiln_graph_add_node(g, "data1", "Data", 0, 1);
    kiln_node_id a = kiln_graph_add_node(g, "add1", "Add", 2, 1);
    kiln_node_id c = kiln_graph_add_node(g, "const1", "Constant", 0, 1);
    kiln_node_id r = kiln_graph_add_node(g, "call1", "PartitionedCall", 1, 1);
    kiln_edge_add(g, d, 0, a, 0);
    kiln_edge_add(g, c, 0, a, 1);
    kiln_edge_add(g, a, 0, r, 0);
    kiln_graph *sub = kiln_node_add_subgraph(g, r, "f", "sub");
    CU_ASSERT_PTR_NOT_NULL_FATAL(sub);
    kiln_node_id arg = kiln_graph_add_node(sub, "arg", "Data", 0, 1);
    kiln_node_id in = kiln_graph_add_node(sub, "inner", "Relu", 1, 1);
    kiln_node_id out = kiln_graph_add_node(sub, "out", "NetOutput", 1, 0);
    kiln_attrs_set_int(kiln_node_attrs_mut(sub, arg), "_parent_node_index", 0);
    kiln_edge_add(sub, arg, 0, in, 0);
    kiln_edge_add(sub, in, 0, out, 0);
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(kiln_graph_verify(g, &err), KILN_OK);
    return g;
}

/* Fill @p out with instances of the named passes (enabled, optional). */
static uint32_t insts(kiln_pass_inst *out, const char *const *names, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        memset(&out[i], 0, sizeof(out[i]));
        out[i].comp = kiln_registry_find(ctx, KILN_COMP_PASS, names[i]);
        out[i].enabled = true;
        CU_ASSERT_PTR_NOT_NULL_FATAL(out[i].comp);
    }
    return n;
}

#define PASSES(arr, ...)                                                                           \
    static const char *const arr##_names[] = {__VA_ARGS__};                                        \
    kiln_pass_inst arr[KILN_ARRAY_LEN(arr##_names)];                                               \
    uint32_t arr##_n = insts(arr, arr##_names, KILN_ARRAY_LEN(arr##_names))

static kiln_status run(kiln_passmgr **pm, kiln_graph *g, const kiln_pass_inst *p, uint32_t n)
{
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(kiln__passmgr_create(ctx, &instr, pm, &err), KILN_OK);
    return kiln__passmgr_run_stage(*pm, "optimize_original", p, n, g, &err);
}

/* ---- GE PassManager semantics ---------------------------------------------- */

static void test_passmgr_graph_pass_runs_on_root_then_subgraphs(void)
{
    setup();
    kiln_graph *g = build();
    PASSES(p, "GRecord", "GRecord2", "GNoSub", "GAdd");
    p[1].enabled = false;
    kiln_passmgr *pm;
    CU_ASSERT_EQUAL(run(&pm, g, p, p_n), KILN_OK);
    CU_ASSERT_STRING_EQUAL(trace, "GRecord@root GRecord@sub GNoSub@root GAdd@root GAdd@sub ");
    /* lazy instances: the disabled pass was never created */
    CU_ASSERT_EQUAL(created, 3);
    CU_ASSERT_EQUAL(destroyed, 0);
    CU_ASSERT_EQUAL(kiln__passmgr_record_count(pm), 3);
    const kiln_pass_record *r = kiln__passmgr_record(pm, 2);
    CU_ASSERT_STRING_EQUAL(r->name, "GAdd");
    CU_ASSERT_STRING_EQUAL(r->stage, "optimize_original");
    CU_ASSERT_EQUAL(r->calls, 2);
    CU_ASSERT_EQUAL(r->runs, 1);
    CU_ASSERT_EQUAL(r->nodes_before, 7);
    CU_ASSERT_EQUAL(r->nodes_after, 8);
    CU_ASSERT_EQUAL(r->nodes_added, 1);
    CU_ASSERT_EQUAL(r->changed, 1);
    CU_ASSERT_EQUAL(kiln__passmgr_record(pm, 0)->changed, 0);
    CU_ASSERT_EQUAL(kiln__passctx_stat(kiln__passmgr_ctx(pm), "optimize_original", "GAdd", "added"),
                    1);
    /* instrument hooks, one pair per execution */
    CU_ASSERT_STRING_EQUAL(instr_order, "<GRecord>GRecord<GNoSub>GNoSub<GAdd>GAdd");
    kiln__passmgr_destroy(pm);
    CU_ASSERT_EQUAL(destroyed, 3);
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(kiln_graph_verify(g, &err), KILN_OK);
    teardown(g);
}

/* P36: NOT_CHANGED is success; ge.disableOptimizations filters by suffix. */
static void test_passmgr_p36_not_changed_and_disable_filter(void)
{
    setup();
    kiln_graph *g = build();
    PASSES(p, "OptimizeStage::RemoveSameConstPass", "RemoveSameConstPass",
           "DisableButNotInWhiteList");
    kiln_ctx_set_option(ctx, "ge.disableOptimizations",
                        "RemoveSameConstPass, DisableButNotInWhiteList");
    kiln_passmgr *pm;
    CU_ASSERT_EQUAL(run(&pm, g, p, p_n), KILN_OK);
    CU_ASSERT_STRING_EQUAL(trace, "DisableButNotInWhiteList@root DisableButNotInWhiteList@sub ");
    CU_ASSERT_PTR_NOT_NULL(strstr(log_text(), "DisableButNotInWhiteList is not allowed"));
    kiln__passmgr_destroy(pm);
    /* options restored: everything runs */
    trace[0] = 0;
    kiln_ctx_set_option(ctx, "ge.disableOptimizations", "");
    CU_ASSERT_EQUAL(run(&pm, g, p, p_n), KILN_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(trace, "OptimizeStage::RemoveSameConstPass@root"));
    CU_ASSERT_PTR_NOT_NULL(strstr(trace, "RemoveSameConstPass@sub"));
    kiln__passmgr_destroy(pm);
    teardown(g);
}

static void test_passmgr_node_passes_form_one_gepass_group(void)
{
    setup();
    kiln_graph *g = build();
    PASSES(p, "NodeA", "NodeB", "GRecord", "NodeA");
    kiln_passmgr *pm;
    CU_ASSERT_EQUAL(run(&pm, g, p, p_n), KILN_OK);
    /* A and B interleave per node (one group); the walk enters the subgraph */
    CU_ASSERT_PTR_NOT_NULL(strstr(trace, "NodeA:data1 NodeB:data1 NodeA:const1 NodeB:const1 "
                                         "NodeA:add1 NodeB:add1 NodeA:call1 NodeB:call1 "
                                         "NodeA:arg NodeB:arg NodeA:inner NodeB:inner "
                                         "NodeA:out NodeB:out NodeA:call1 NodeB:call1 "
                                         "GRecord@root GRecord@sub NodeA:data1 "));
    CU_ASSERT_EQUAL(kiln__passmgr_record(pm, 0)->calls, 8);
    CU_ASSERT_EQUAL(kiln__passmgr_record_count(pm), 4);
    CU_ASSERT_EQUAL(created, 4);
    kiln__passmgr_destroy(pm);
    CU_ASSERT_EQUAL(destroyed, 4);
    teardown(g);
}

/* P34 equivalent: a failing pass stops the stage and the message names it. */
static void test_passmgr_failing_pass_stops_and_is_named(void)
{
    setup();
    kiln_graph *g = build();
    PASSES(p, "GRecord", "GFail", "GRecord2");
    kiln_passmgr *pm;
    CU_ASSERT_EQUAL(run(&pm, g, p, p_n), KILN_ERR_PASS);
    CU_ASSERT_STRING_EQUAL(trace, "GRecord@root GRecord@sub GFail@root ");
    char buf[1024];
    kiln_error_format(&err, buf, sizeof(buf));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "stage optimize_original: pass GFail: "));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "pass GFail failed on graph root"));
    CU_ASSERT_EQUAL(instr_failed, 1);
    kiln__passmgr_destroy(pm);
    /* node pass failure: GEPass names pass and node */
    PASSES(q, "NodeA", "NodeFail");
    CU_ASSERT_EQUAL(run(&pm, g, q, q_n), KILN_ERR_PASS);
    kiln_error_format(&err, buf, sizeof(buf));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "stage optimize_original: pass NodeFail: node data1"));
    kiln__passmgr_destroy(pm);
    teardown(g);
}

/* A pass declaring KILN_PASS_PRESERVES_CFG may not add nodes or edges. */
static void test_passmgr_preserves_cfg_is_enforced(void)
{
    setup();
    kiln_graph *g = build();
    PASSES(p, "GRecordCfg", "GAddClaimsCfg", "GRecord");
    kiln_passmgr *pm;
    CU_ASSERT_EQUAL(run(&pm, g, p, p_n), KILN_ERR_PASS);
    CU_ASSERT_STRING_EQUAL(trace, "GRecordCfg@root GRecordCfg@sub GAddClaimsCfg@root ");
    char buf[1024];
    kiln_error_format(&err, buf, sizeof(buf));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "pass GAddClaimsCfg declares KILN_PASS_PRESERVES_CFG"));
    kiln__passmgr_destroy(pm);
    teardown(g);
}

static void test_passmgr_oom_flag_fails_with_nomem(void)
{
    setup();
    kiln_graph *g = build();
    PASSES(p, "GOom", "GRecord");
    kiln_passmgr *pm;
    CU_ASSERT_EQUAL(run(&pm, g, p, p_n), KILN_ERR_NOMEM);
    CU_ASSERT_PTR_NOT_NULL(strstr(kiln_error_message(&err), "GOom"));
    CU_ASSERT_STRING_EQUAL(trace, "");
    kiln__passmgr_destroy(pm);
    g->oom = false;
    teardown(g);
}

/* ---- instrumentation ----------------------------------------------------------- */

static void test_passmgr_verify_each_names_the_breaking_pass(void)
{
    setup();
    kiln_graph *g = build();
    PASSES(p, "GRecord", "GCorrupt", "GRecord2");
    kiln_passmgr *pm;
    CU_ASSERT_EQUAL(run(&pm, g, p, p_n), KILN_OK); /* unnoticed without verify-each */
    kiln__passmgr_destroy(pm);
    kiln_graph_destroy(g);
    g = build();
    trace[0] = 0;
    instr.verify_each = true;
    CU_ASSERT_EQUAL(run(&pm, g, p, p_n), KILN_ERR_VERIFY);
    CU_ASSERT_PTR_NOT_NULL(strstr(kiln_error_message(&err), "pass GCorrupt broke the IR: "));
    CU_ASSERT_STRING_EQUAL(trace, "GRecord@root GRecord@sub ");
    kiln__passmgr_destroy(pm);
    teardown(g);
}

static void test_passmgr_bisect_limit_skips_optional_after_n(void)
{
    setup();
    kiln_graph *g = build();
    PASSES(p, "GRecord", "GRequired", "GRecord2", "NodeA", "GAdd", "GNoSub");
    p[4].required = true; /* manifest "required": true */
    instr.bisect_limit = 2;
    kiln_passmgr *pm;
    CU_ASSERT_EQUAL(run(&pm, g, p, p_n), KILN_OK);
    CU_ASSERT_STRING_EQUAL(trace, "GRecord@root GRecord@sub GRequired@root GRequired@sub "
                                  "GRecord2@root GRecord2@sub GAdd@root GAdd@sub ");
    const char *log = log_text();
    CU_ASSERT_PTR_NOT_NULL(strstr(log, "BISECT: running pass (1) GRecord on root\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(log, "BISECT: running pass (2) GRecord2 on root\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(log, "BISECT: NOT running pass (3) NodeA on root\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(log, "BISECT: NOT running pass (4) GNoSub on root\n"));
    CU_ASSERT_PTR_NULL(strstr(log, "GRequired on"));
    CU_ASSERT_PTR_NULL(strstr(log, "GAdd on"));
    CU_ASSERT_EQUAL(kiln__passmgr_record(pm, 3)->skipped, 1);
    kiln__passmgr_destroy(pm);
    teardown(g);
}

static void test_passmgr_time_passes_table(void)
{
    setup();
    kiln_graph *g = build();
    PASSES(p, "GRecord", "NodeA", "GAdd");
    instr.time_passes = true;
    kiln_passmgr *pm;
    CU_ASSERT_EQUAL(run(&pm, g, p, p_n), KILN_OK);
    FILE *out = tmpfile();
    kiln__passmgr_print_timing(pm, out);
    char buf[4096];
    rewind(out);
    buf[fread(buf, 1, sizeof(buf) - 1, out)] = 0;
    fclose(out);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "GRecord"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "NodeA"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "GAdd"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "optimize_original"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "wall ms"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "total"));
    CU_ASSERT_PTR_NULL(strstr(log_text(), "timing report"));
    kiln__passmgr_destroy(pm); /* prints the table on the log at the end */
    CU_ASSERT_PTR_NOT_NULL(strstr(log_text(), "kiln pass execution timing report"));
    CU_ASSERT_PTR_NOT_NULL(strstr(log_text(), "GAdd"));
    teardown(g);
}

static bool exists(const char *dir, const char *name)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    return access(path, F_OK) == 0;
}

static void test_passmgr_print_after_writes_dumps(void)
{
    setup();
    kiln_graph *g = build();
    char dir[] = "/tmp/kiln_passmgr_XXXXXX";
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
    instr.print_after = (char *)"^G(Add|Record)$";
    instr.dump_dir = dir;
    PASSES(p, "GRecord", "GNoSub", "NodeA", "GAdd");
    kiln_passmgr *pm;
    CU_ASSERT_EQUAL(run(&pm, g, p, p_n), KILN_OK);
    CU_ASSERT_TRUE(exists(dir, "001-optimize_original-GRecord.json"));
    CU_ASSERT_TRUE(exists(dir, "002-optimize_original-GAdd.json"));
    CU_ASSERT_FALSE(exists(dir, "002-optimize_original-GNoSub.json"));
    CU_ASSERT_TRUE(exists(dir, "001-optimize_original-GRecord.dot"));
    CU_ASSERT_TRUE(exists(dir, "002-optimize_original-GAdd.dot"));
    kiln__passmgr_destroy(pm);
    DIR *d = opendir(dir);
    int files = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        unlink(path);
        files++;
    }
    if (d)
        closedir(d);
    rmdir(dir);
    CU_ASSERT_EQUAL(files, 4);
    /* a bad pattern is reported at creation */
    instr.print_after = (char *)"G(";
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(kiln__passmgr_create(ctx, &instr, &pm, &err), KILN_ERR_INVALID);
    CU_ASSERT_PTR_NULL(pm);
    CU_ASSERT_PTR_NOT_NULL(strstr(kiln_error_message(&err), "--print-after"));
    teardown(g);
}

int main(void)
{
    static const kiln_test_case cases[] = {
        {"test_passmgr_graph_pass_runs_on_root_then_subgraphs",
         test_passmgr_graph_pass_runs_on_root_then_subgraphs},
        {"test_passmgr_p36_not_changed_and_disable_filter",
         test_passmgr_p36_not_changed_and_disable_filter},
        {"test_passmgr_node_passes_form_one_gepass_group",
         test_passmgr_node_passes_form_one_gepass_group},
        {"test_passmgr_failing_pass_stops_and_is_named",
         test_passmgr_failing_pass_stops_and_is_named},
        {"test_passmgr_oom_flag_fails_with_nomem", test_passmgr_oom_flag_fails_with_nomem},
        {"test_passmgr_preserves_cfg_is_enforced", test_passmgr_preserves_cfg_is_enforced},
        {"test_passmgr_verify_each_names_the_breaking_pass",
         test_passmgr_verify_each_names_the_breaking_pass},
        {"test_passmgr_bisect_limit_skips_optional_after_n",
         test_passmgr_bisect_limit_skips_optional_after_n},
        {"test_passmgr_time_passes_table", test_passmgr_time_passes_table},
        {"test_passmgr_print_after_writes_dumps", test_passmgr_print_after_writes_dumps},
        {NULL, NULL}};
    return kiln_test_run("passmgr", cases);
}

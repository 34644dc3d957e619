/*
 * test_manifest.c - the manifest loader and the textual pipeline
 * (core/manifest.c, core/manifest_pipeline.c): stages and typed options,
 * `extends` with overrides and cycles, PCRE2 selectors (last match wins,
 * required passes, unmatched warnings, bad patterns), plugin resolution
 * (relative, KILN_PLUGIN_PATH, missing, optional, provides mismatch), every
 * error naming the file and the JSON path, the text form's parse/print round
 * trip, --pass-opt, the human print and allocation failure.
 *
 * Manifests are written at run time into a fresh temp directory (so relative
 * plugin paths mean something); in the JSON strings below ' stands for ".
 * Passes come from an in-process plugin; path tests use libtp_good.so from
 * $KILN_TEST_PLUGIN_DIR.
 */
#include "kiln_test.h"
#include "manifest.h"
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmpdir[256];
static kiln_ctx *ctx;
static kiln_error err;
static char errbuf[2048];

/* ---- the in-process plugin ------------------------------------------------------ */

static const kiln_option_def prune_opts[] = {
    {sizeof(kiln_option_def), KILN_OPT_INT, "max", "2", "limit", 0, 5},
    {sizeof(kiln_option_def), KILN_OPT_FLOAT, "ratio", "0.5", "ratio", 0, 1},
    {sizeof(kiln_option_def), KILN_OPT_STRING, "mode", NULL, "mode", 0, 0},
    {sizeof(kiln_option_def), KILN_OPT_BOOL, "verbose", "false", "chatty", 0, 0},
};

static kiln_pass_result run_graph(void *inst, kiln_pass_ctx *c, kiln_graph *g)
{
    (void)inst, (void)c, (void)g;
    return KILN_PASS_NOT_CHANGED;
}

static kiln_status run_node(void *inst, kiln_pass_ctx *c, kiln_graph *g, kiln_node_id n)
{
    (void)inst, (void)c, (void)g, (void)n;
    return KILN_OK;
}

static kiln_status fu_patterns(void *inst, kiln_pattern *p, kiln_error *e)
{
    (void)inst, (void)p, (void)e;
    return KILN_OK;
}

static kiln_status fu_replace(void *inst, kiln_pass_ctx *c, const kiln_graph *g,
                              const kiln_match *m, kiln_graph *repl)
{
    (void)inst, (void)c, (void)g, (void)m, (void)repl;
    return KILN_OK;
}

static kiln_status tu_step(void *inst, kiln_pass_ctx *c, const char *step, kiln_graph *g)
{
    (void)inst, (void)c, (void)step, (void)g;
    return KILN_OK;
}

static kiln_status pl_plan(void *inst, kiln_mem_problem *p, int64_t *peak, kiln_error *e)
{
    (void)inst, (void)p, (void)e;
    *peak = 0;
    return KILN_OK;
}

static void *al_alloc(void *inst, size_t size, uint32_t stream)
{
    (void)inst, (void)stream;
    return malloc(size);
}

static void al_free(void *inst, void *ptr, uint32_t stream)
{
    (void)inst, (void)stream;
    free(ptr);
}

static kiln_status static_init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)h, (void)e;
#define GRAPH_PASS(var, nm, fl, opts, nopts)                                                       \
    static const kiln_pass_desc var = {.struct_size = sizeof(kiln_pass_desc),                      \
                                       .kind = KILN_PASS_KIND_GRAPH,                               \
                                       .name = nm,                                                 \
                                       .flags = fl,                                                \
                                       .option_count = nopts,                                      \
                                       .options = opts,                                            \
                                       .run_graph = run_graph}
    GRAPH_PASS(prune, "PruneGraphPass", 0, prune_opts, 4);
    GRAPH_PASS(fold, "ConstFoldPass", KILN_PASS_REQUIRED, NULL, 0);
    GRAPH_PASS(cse, "CsePass", 0, NULL, 0);
    GRAPH_PASS(hccl, "HcclMemcpyPass", 0, NULL, 0);
#undef GRAPH_PASS
    static const kiln_pass_desc ident = {.struct_size = sizeof(kiln_pass_desc),
                                         .kind = KILN_PASS_KIND_NODE,
                                         .name = "IdentityRemovePass",
                                         .run_node = run_node};
    static const kiln_fusion_pass_desc fuse = {.struct_size = sizeof(kiln_fusion_pass_desc),
                                               .name = "FuseReluPass",
                                               .option_count = 4,
                                               .options = prune_opts,
                                               .kind = KILN_FUSION_PATTERN,
                                               .patterns = fu_patterns,
                                               .replacement = fu_replace};
    static const kiln_tuner_desc tuner = {
        .struct_size = sizeof(kiln_tuner_desc), .name = "ExampleTuner", .on_build_step = tu_step};
    static const kiln_engine_desc cpu = {.struct_size = sizeof(kiln_engine_desc), .name = "cpu"};
    static const kiln_mem_planner_desc planner = {
        .struct_size = sizeof(kiln_mem_planner_desc), .name = "BumpPlanner", .plan = pl_plan};
    static const kiln_allocator_desc alloc = {.struct_size = sizeof(kiln_allocator_desc),
                                              .name = "SimpleAllocator",
                                              .alloc = al_alloc,
                                              .free = al_free};
    kiln_status st;
    if ((st = kiln_register_pass(r, &prune)) || (st = kiln_register_pass(r, &fold)) ||
        (st = kiln_register_pass(r, &cse)) || (st = kiln_register_pass(r, &hccl)) ||
        (st = kiln_register_pass(r, &ident)) || (st = kiln_register_fusion_pass(r, &fuse)) ||
        (st = kiln_register_tuner(r, &tuner)) || (st = kiln_register_engine(r, &cpu)) ||
        (st = kiln_register_mem_planner(r, &planner)) || (st = kiln_register_allocator(r, &alloc)))
        return st;
    return KILN_OK;
}

static const kiln_plugin_desc static_desc = {sizeof(kiln_plugin_desc),
                                             KILN_ABI_MAJOR,
                                             KILN_ABI_MINOR,
                                             "test.manifest.static",
                                             "1.0",
                                             "MIT",
                                             "manifest test passes",
                                             "test",
                                             static_init,
                                             NULL,
                                             {NULL}};

/* ---- fixtures ---------------------------------------------------------------------- */

static void fresh_ctx(void)
{
    if (ctx)
        kiln_ctx_destroy(ctx);
    ctx = kiln_ctx_create();
    CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
    kiln_error e = {0};
    CU_ASSERT_EQUAL_FATAL(kiln_plugin_register_static(ctx, &static_desc, NULL, &e), KILN_OK);
    kiln_error_clear(&err);
}

static const char *tmp_path(const char *name)
{
    static char buf[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof(buf[k]), "%s/%s", tmpdir, name);
    return buf[k];
}

/* Write @p json (with ' for ") to tmpdir/name, creating one level of subdirectory. */
static void put(const char *name, const char *json)
{
    const char *path = tmp_path(name);
    const char *slash = strrchr(name, '/');
    if (slash) {
        char dir[512];
        snprintf(dir, sizeof(dir), "%s/%.*s", tmpdir, (int)(slash - name), name);
        mkdir(dir, 0700);
    }
    FILE *f = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    for (const char *c = json; *c; c++)
        fputc(*c == '\'' ? '"' : *c, f);
    fclose(f);
}

static kiln_status load(const char *name, kiln_pipeline *p)
{
    kiln_error_clear(&err);
    kiln_status st = kiln_manifest_load(ctx, tmp_path(name), p, &err);
    kiln_error_format(&err, errbuf, sizeof(errbuf));
    return st;
}

/* The formatted error ("frames: message") must contain every needle. */
static void expect_error(kiln_status got, kiln_status want, const char *const *needles)
{
    CU_ASSERT_EQUAL(got, want);
    for (const char *const *n = needles; *n; n++) {
        bool found = strstr(errbuf, *n) != NULL;
        CU_ASSERT_TRUE(found);
        if (!found)
            fprintf(stderr, "\n  error: %s\n  missing: %s\n", errbuf, *n);
    }
}

#define EXPECT_ERROR(got, want, ...)                                                               \
    do {                                                                                           \
        const char *const needles_[] = {__VA_ARGS__, NULL};                                        \
        expect_error((got), (want), needles_);                                                     \
    } while (0)

/* Capture warnings written to the pipeline's log. */
typedef struct capture {
    char *buf;
    size_t len;
} capture;

static void capture_start(kiln_pipeline *p, capture *c)
{
    memset(c, 0, sizeof(*c));
    p->instr.log = open_memstream(&c->buf, &c->len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p->instr.log);
}

static const char *capture_text(kiln_pipeline *p, capture *c)
{
    fflush(p->instr.log);
    return c->buf ? c->buf : "";
}

static void capture_end(kiln_pipeline *p, capture *c)
{
    fclose(p->instr.log);
    p->instr.log = NULL;
    free(c->buf);
}

static const kiln_pass_inst *pass_at(const kiln_pipeline *p, kiln_stage_id s, uint32_t i)
{
    CU_ASSERT_FATAL(i < p->stages[s].npasses);
    return &p->stages[s].passes[i];
}

static const char *name_at(const kiln_pipeline *p, kiln_stage_id s, uint32_t i)
{
    return pass_at(p, s, i)->comp->name;
}

static const char *test_plugin(void)
{
    static char path[1024];
    snprintf(path, sizeof(path), "%s/libtp_good.so",
             kiln_test_env("KILN_TEST_PLUGIN_DIR", "tests/plugins"));
    return path;
}

/* ---- loading ------------------------------------------------------------------------- */

static const char *full_manifest =
    "{'kiln_manifest': 1, 'description': 'everything',\n"
    " 'x-note': 'ignored',\n"
    " 'options': {'ge.exec.atomicCleanPolicy': '1', 'ge.n': 3, 'ge.b': true},\n"
    " 'stages': {\n"
    "   'prepare': ['ConstFoldPass', {'pass': 'PruneGraphPass',\n"
    "               'options': {'max': 3, 'ratio': 1, 'mode': 'fast', 'verbose': true}}],\n"
    "   'optimize_original': ['IdentityRemovePass', {'pass': 'FuseReluPass', 'required': true},\n"
    "                         {'pass': 'CsePass', 'enabled': false}],\n"
    "   'build': ['HcclMemcpyPass']},\n"
    " 'tuners': ['ExampleTuner'], 'breakpoints': ['after_build', 'before_ub_match'],\n"
    " 'engines': ['cpu'], 'memory_planner': 'BumpPlanner', 'allocator': 'SimpleAllocator',\n"
    " 'instrumentation': {'verify_each': true, 'time_passes': true, 'print_after': 'Prune',\n"
    "                     'dump_dir': 'dumps', 'bisect_limit': 7}}\n";

static void test_manifest_load_everything(void)
{
    fresh_ctx();
    put("full.json", full_manifest);
    kiln_pipeline p = {0};
    CU_ASSERT_EQUAL_FATAL(load("full.json", &p), KILN_OK);
    CU_ASSERT_EQUAL(p.stages[KILN_STAGE_PREPARE].npasses, 2);
    CU_ASSERT_STRING_EQUAL(name_at(&p, KILN_STAGE_PREPARE, 0), "ConstFoldPass");
    CU_ASSERT_TRUE(pass_at(&p, KILN_STAGE_PREPARE, 0)->required); /* flag */
    const kiln_pass_inst *pr = pass_at(&p, KILN_STAGE_PREPARE, 1);
    int64_t max = 0;
    double ratio = 0;
    const char *mode = NULL;
    bool verbose = false;
    CU_ASSERT_TRUE(kiln_options_get_int(pr->options, "max", &max));
    CU_ASSERT_EQUAL(max, 3);
    CU_ASSERT_TRUE(kiln_options_get_float(pr->options, "ratio", &ratio));
    CU_ASSERT_DOUBLE_EQUAL(ratio, 1.0, 0);
    CU_ASSERT_TRUE(kiln_options_get_string(pr->options, "mode", &mode));
    CU_ASSERT_STRING_EQUAL(mode, "fast");
    CU_ASSERT_TRUE(kiln_options_get_bool(pr->options, "verbose", &verbose));
    CU_ASSERT_TRUE(verbose);
    CU_ASSERT_EQUAL(p.stages[KILN_STAGE_OPTIMIZE_ORIGINAL].npasses, 3);
    CU_ASSERT_EQUAL(pass_at(&p, KILN_STAGE_OPTIMIZE_ORIGINAL, 1)->comp->kind, KILN_COMP_FUSION);
    CU_ASSERT_TRUE(pass_at(&p, KILN_STAGE_OPTIMIZE_ORIGINAL, 1)->required);
    CU_ASSERT_FALSE(pass_at(&p, KILN_STAGE_OPTIMIZE_ORIGINAL, 2)->enabled);
    CU_ASSERT_TRUE(pass_at(&p, KILN_STAGE_OPTIMIZE_ORIGINAL, 0)->enabled);
    CU_ASSERT_EQUAL(p.stages[KILN_STAGE_PARTITION].npasses, 0);
    CU_ASSERT_STRING_EQUAL(name_at(&p, KILN_STAGE_BUILD, 0), "HcclMemcpyPass");
    CU_ASSERT_EQUAL(p.ntuners, 1);
    CU_ASSERT_STRING_EQUAL(p.tuners[0], "ExampleTuner");
    CU_ASSERT_EQUAL(p.nbreakpoints, 2);
    CU_ASSERT_STRING_EQUAL(p.breakpoints[1], "before_ub_match");
    CU_ASSERT_EQUAL(p.nengines, 1);
    CU_ASSERT_STRING_EQUAL(p.memory_planner, "BumpPlanner");
    CU_ASSERT_STRING_EQUAL(p.allocator, "SimpleAllocator");
    CU_ASSERT_TRUE(p.instr.verify_each);
    CU_ASSERT_TRUE(p.instr.time_passes);
    CU_ASSERT_STRING_EQUAL(p.instr.print_after, "Prune");
    CU_ASSERT_STRING_EQUAL(p.instr.dump_dir, "dumps");
    CU_ASSERT_EQUAL(p.instr.bisect_limit, 7);
    CU_ASSERT_STRING_EQUAL(kiln_ctx_option(ctx, "ge.exec.atomicCleanPolicy"), "1");
    CU_ASSERT_STRING_EQUAL(kiln_ctx_option(ctx, "ge.n"), "3");
    CU_ASSERT_STRING_EQUAL(kiln_ctx_option(ctx, "ge.b"), "true");
    kiln_pipeline_clear(&p);
    CU_ASSERT_EQUAL(p.stages[KILN_STAGE_PREPARE].npasses, 0);
    CU_ASSERT_EQUAL(p.instr.bisect_limit, -1);
}

static void test_manifest_minimal_defaults(void)
{
    fresh_ctx();
    put("min.json", "{'kiln_manifest': 1}");
    kiln_pipeline p = {0};
    CU_ASSERT_EQUAL_FATAL(load("min.json", &p), KILN_OK);
    for (int s = 0; s < KILN_STAGE_COUNT; s++)
        CU_ASSERT_EQUAL(p.stages[s].npasses, 0);
    CU_ASSERT_EQUAL(p.instr.bisect_limit, -1);
    CU_ASSERT_PTR_NULL(p.memory_planner);
    /* options left at their defaults */
    put("def.json", "{'kiln_manifest': 1, 'stages': {'lint': ['PruneGraphPass']}}");
    CU_ASSERT_EQUAL_FATAL(load("def.json", &p), KILN_OK); /* reuses (clears) p */
    int64_t max = 0;
    CU_ASSERT_TRUE(kiln_options_get_int(pass_at(&p, KILN_STAGE_LINT, 0)->options, "max", &max));
    CU_ASSERT_EQUAL(max, 2);
    kiln_pipeline_clear(&p);
}

static void test_manifest_extends_overrides(void)
{
    fresh_ctx();
    put("base.json",
        "{'kiln_manifest': 1, 'options': {'a': 'base', 'b': 'base'},\n"
        " 'stages': {'prepare': ['PruneGraphPass', 'CsePass'],\n"
        "            'optimize_original': ['IdentityRemovePass', 'HcclMemcpyPass']},\n"
        " 'disable': ['^Hccl'], 'tuners': ['ExampleTuner'], 'memory_planner': 'BumpPlanner',\n"
        " 'instrumentation': {'time_passes': true, 'bisect_limit': 3}}");
    put("child.json",
        "{'kiln_manifest': 1, 'extends': 'base.json', 'options': {'b': 'child'},\n"
        " 'stages': {'prepare': [{'pass': 'PruneGraphPass', 'options': {'max': 4}}]},\n"
        " 'enable': ['Hccl'], 'disable': ['Identity'], 'memory_planner': null,\n"
        " 'instrumentation': {'bisect_limit': 5}}");
    kiln_pipeline p = {0};
    CU_ASSERT_EQUAL_FATAL(load("child.json", &p), KILN_OK);
    /* prepare replaced by the child, optimize_original inherited */
    CU_ASSERT_EQUAL(p.stages[KILN_STAGE_PREPARE].npasses, 1);
    int64_t max = 0;
    kiln_options_get_int(pass_at(&p, KILN_STAGE_PREPARE, 0)->options, "max", &max);
    CU_ASSERT_EQUAL(max, 4);
    CU_ASSERT_EQUAL(p.stages[KILN_STAGE_OPTIMIZE_ORIGINAL].npasses, 2);
    /* base disables Hccl, child re-enables it (applied later) and disables Identity */
    CU_ASSERT_FALSE(pass_at(&p, KILN_STAGE_OPTIMIZE_ORIGINAL, 0)->enabled);
    CU_ASSERT_TRUE(pass_at(&p, KILN_STAGE_OPTIMIZE_ORIGINAL, 1)->enabled);
    CU_ASSERT_PTR_NOT_NULL(strstr(pass_at(&p, KILN_STAGE_OPTIMIZE_ORIGINAL, 0)->disabled_by,
                                  "child.json: $.disable[0]"));
    /* options merged, child wins */
    CU_ASSERT_STRING_EQUAL(kiln_ctx_option(ctx, "a"), "base");
    CU_ASSERT_STRING_EQUAL(kiln_ctx_option(ctx, "b"), "child");
    CU_ASSERT_EQUAL(p.ntuners, 1);            /* inherited */
    CU_ASSERT_PTR_NULL(p.memory_planner);     /* reset by null */
    CU_ASSERT_TRUE(p.instr.time_passes);      /* inherited key */
    CU_ASSERT_EQUAL(p.instr.bisect_limit, 5); /* overridden key */
    kiln_pipeline_clear(&p);
}

static void test_manifest_extends_cycle(void)
{
    fresh_ctx();
    put("a.json", "{'kiln_manifest': 1, 'extends': 'b.json'}");
    put("b.json", "{'kiln_manifest': 1, 'extends': 'a.json'}");
    kiln_pipeline p = {0};
    EXPECT_ERROR(load("a.json", &p), KILN_ERR_INVALID, "extends cycle: ", "a.json -> ",
                 "b.json -> ", "$.extends");
    put("self.json", "{'kiln_manifest': 1, 'extends': 'self.json'}");
    EXPECT_ERROR(load("self.json", &p), KILN_ERR_INVALID, "extends cycle", "self.json -> ");
    put("orphan.json", "{'kiln_manifest': 1, 'extends': 'nowhere.json'}");
    EXPECT_ERROR(load("orphan.json", &p), KILN_ERR_NOT_FOUND,
                 "orphan.json: $.extends: ", "cannot find base manifest nowhere.json");
    /* an error inside the base names the base file, reached through $.extends */
    put("badbase.json", "{'kiln_manifest': 1, 'stages': {'prepare': ['Nope']}}");
    put("kid.json", "{'kiln_manifest': 1, 'extends': 'badbase.json'}");
    EXPECT_ERROR(load("kid.json", &p), KILN_ERR_NOT_FOUND, "badbase.json: $.stages.prepare[0]");
    kiln_pipeline_clear(&p);
}

/* ---- errors name the file and the JSON path --------------------------------------- */

static void test_manifest_unknown_pass_suggests(void)
{
    fresh_ctx();
    put("typo.json", "{'kiln_manifest': 1, 'stages': {'prepare': ['CsePass', 'PrunGraphPass']}}");
    kiln_pipeline p = {0};
    EXPECT_ERROR(load("typo.json", &p), KILN_ERR_NOT_FOUND, "typo.json: $.stages.prepare[1]: ",
                 "unknown pass PrunGraphPass (did you mean PruneGraphPass?)");
    CU_ASSERT_EQUAL(p.stages[KILN_STAGE_PREPARE].npasses, 0); /* cleared on failure */
    put("far.json", "{'kiln_manifest': 1, 'stages': {'build': [{'pass': 'Zzzzzzzz'}]}}");
    EXPECT_ERROR(load("far.json", &p), KILN_ERR_NOT_FOUND, "$.stages.build[0].pass",
                 "no loaded plugin registers it");
    put("kind.json", "{'kiln_manifest': 1, 'stages': {'build': ['ExampleTuner']}}");
    EXPECT_ERROR(load("kind.json", &p), KILN_ERR_INVALID, "ExampleTuner is a tuner, not a pass");
}

static void test_manifest_option_errors(void)
{
    fresh_ctx();
    kiln_pipeline p = {0};
    put("o1.json", "{'kiln_manifest': 1, 'stages': {'prepare': ['CsePass',\n"
                   " {'pass': 'PruneGraphPass', 'options': {'max': '3'}}]}}");
    EXPECT_ERROR(load("o1.json", &p), KILN_ERR_INVALID,
                 "o1.json: $.stages.prepare[1].options.max: ",
                 "option 'max' of PruneGraphPass expects int, got string");
    put("o2.json", "{'kiln_manifest': 1, 'stages': {'prepare': [\n"
                   " {'pass': 'PruneGraphPass', 'options': {'max': 9}}]}}");
    EXPECT_ERROR(load("o2.json", &p), KILN_ERR_INVALID, "$.stages.prepare[0].options.max: ",
                 "pass PruneGraphPass: ", "out of range [0, 5]");
    put("o3.json", "{'kiln_manifest': 1, 'stages': {'prepare': [\n"
                   " {'pass': 'PruneGraphPass', 'options': {'maxx': 1}}]}}");
    EXPECT_ERROR(load("o3.json", &p), KILN_ERR_NOT_FOUND, "$.stages.prepare[0].options.maxx",
                 "unknown option 'maxx' (declared: max, ratio, mode, verbose)");
    put("o4.json", "{'kiln_manifest': 1, 'stages': {'prepare': [\n"
                   " {'pass': 'PruneGraphPass', 'options': {'verbose': 1}}]}}");
    EXPECT_ERROR(load("o4.json", &p), KILN_ERR_INVALID, "expects bool, got integer");
    put("o5.json", "{'kiln_manifest': 1, 'stages': {'prepare': [\n"
                   " {'pass': 'PruneGraphPass', 'options': {'ratio': 1.5}}]}}");
    EXPECT_ERROR(load("o5.json", &p), KILN_ERR_INVALID, "options.ratio", "out of range");
    put("o6.json", "{'kiln_manifest': 1, 'stages': {'prepare': [\n"
                   " {'pass': 'PruneGraphPass', 'option': {}}]}}");
    EXPECT_ERROR(load("o6.json", &p), KILN_ERR_INVALID,
                 "$.stages.prepare[0].option: ", "unknown key \"option\"");
}

static void test_manifest_structure_errors(void)
{
    fresh_ctx();
    kiln_pipeline p = {0};
    put("s1.json", "{'kiln_manifest': 1, 'stagez': {}}");
    EXPECT_ERROR(load("s1.json", &p), KILN_ERR_INVALID, "s1.json: $.stagez: unknown key");
    put("s2.json", "{'kiln_manifest': 1, 'stages': {'fusion': []}}");
    EXPECT_ERROR(load("s2.json", &p), KILN_ERR_INVALID,
                 "$.stages.fusion: ", "unknown stage \"fusion\"");
    put("s3.json", "{'kiln_manifest': 2}");
    EXPECT_ERROR(load("s3.json", &p), KILN_ERR_VERSION, "$.kiln_manifest",
                 "manifest format 2 is not supported");
    put("s4.json", "{'stages': {}}");
    EXPECT_ERROR(load("s4.json", &p), KILN_ERR_INVALID, "$.kiln_manifest: missing");
    put("s5.json", "{'kiln_manifest': 1,\n 'stages': {]}");
    EXPECT_ERROR(load("s5.json", &p), KILN_ERR_PARSE, "s5.json: line 2 column");
    EXPECT_ERROR(load("absent.json", &p), KILN_ERR_NOT_FOUND, "absent.json: cannot open manifest");
    put("s6.json", "{'kiln_manifest': 1, 'stages': {'prepare': 'CsePass'}}");
    EXPECT_ERROR(load("s6.json", &p), KILN_ERR_INVALID, "$.stages.prepare: expected array");
    put("s7.json", "{'kiln_manifest': 1, 'tuners': ['ExampleTunr']}");
    EXPECT_ERROR(load("s7.json", &p), KILN_ERR_NOT_FOUND,
                 "$.tuners[0]: ", "unknown tuner ExampleTunr (did you mean ExampleTuner?)");
    put("s8.json", "{'kiln_manifest': 1, 'breakpoints': ['after_partition']}");
    EXPECT_ERROR(load("s8.json", &p), KILN_ERR_INVALID, "$.breakpoints[0]",
                 "unknown build step \"after_partition\"");
    put("s9.json", "{'kiln_manifest': 1, 'instrumentation': {'bisect_limit': 'x'}}");
    EXPECT_ERROR(load("s9.json", &p), KILN_ERR_INVALID, "$.instrumentation.bisect_limit");
    put("s10.json", "{'kiln_manifest': 1, 'options': {'ge.x': [1]}}");
    EXPECT_ERROR(load("s10.json", &p), KILN_ERR_INVALID, "$.options[\"ge.x\"]");
    put("s11.json", "{'kiln_manifest': 1, 'allocator': 'NoSuch'}");
    EXPECT_ERROR(load("s11.json", &p), KILN_ERR_NOT_FOUND, "$.allocator: unknown allocator");
    put("s12.json", "{'kiln_manifest': 1, 'engines': 'cpu'}");
    EXPECT_ERROR(load("s12.json", &p), KILN_ERR_INVALID, "$.engines: expected array");
    put("s13.json", "{'kiln_manifest': 1, 'instrumentation': {'print_after': '(('}}");
    EXPECT_ERROR(load("s13.json", &p), KILN_ERR_PARSE, "$.instrumentation.print_after",
                 "bad regex");
}

/* ---- selectors ----------------------------------------------------------------------- */

static const char *sel_base =
    "{'kiln_manifest': 1, 'stages': {\n"
    " 'prepare': ['PruneGraphPass', 'IdentityRemovePass', 'CsePass', 'ConstFoldPass'],\n"
    " 'optimize_original': ['CsePass', 'HcclMemcpyPass']}";

static void test_manifest_regex_last_match_wins(void)
{
    fresh_ctx();
    char json[1024];
    /* enable then disable within a file: Cse ends disabled; Pass$ is an unanchored search */
    snprintf(json, sizeof(json), "%s, 'enable': ['Cse'], 'disable': ['^(Cse|Prune)']}", sel_base);
    put("r1.json", json);
    kiln_pipeline p = {0};
    CU_ASSERT_EQUAL_FATAL(load("r1.json", &p), KILN_OK);
    CU_ASSERT_FALSE(pass_at(&p, KILN_STAGE_PREPARE, 0)->enabled);
    CU_ASSERT_TRUE(pass_at(&p, KILN_STAGE_PREPARE, 1)->enabled);
    CU_ASSERT_FALSE(pass_at(&p, KILN_STAGE_PREPARE, 2)->enabled);
    CU_ASSERT_FALSE(pass_at(&p, KILN_STAGE_OPTIMIZE_ORIGINAL, 0)->enabled); /* every instance */
    /* command line comes last, in order, last match wins */
    const char *sel[] = {"Graph", "^Prune", "Cse"};
    const bool en[] = {true, false, true};
    CU_ASSERT_EQUAL(kiln_manifest_apply_selectors(&p, sel, en, 3, &err), KILN_OK);
    CU_ASSERT_FALSE(pass_at(&p, KILN_STAGE_PREPARE, 0)->enabled);
    CU_ASSERT_STRING_EQUAL(pass_at(&p, KILN_STAGE_PREPARE, 0)->disabled_by,
                           "--disable-pass \"^Prune\"");
    CU_ASSERT_TRUE(pass_at(&p, KILN_STAGE_PREPARE, 2)->enabled);
    CU_ASSERT_PTR_NULL(pass_at(&p, KILN_STAGE_PREPARE, 2)->disabled_by);
    CU_ASSERT_TRUE(pass_at(&p, KILN_STAGE_OPTIMIZE_ORIGINAL, 0)->enabled);
    /* anchored: ^Pass$ matches nothing */
    capture c;
    capture_start(&p, &c);
    const char *anch[] = {"^Pass$"};
    const bool off[] = {false};
    CU_ASSERT_EQUAL(kiln_manifest_apply_selectors(&p, anch, off, 1, &err), KILN_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(capture_text(&p, &c),
                                  "kiln: warning: --disable-pass: selector \"^Pass$\" "
                                  "matches no pass"));
    capture_end(&p, &c);
    kiln_pipeline_clear(&p);
}

static void test_manifest_required_cannot_be_disabled(void)
{
    fresh_ctx();
    kiln_pipeline p = {0};
    char json[1024];
    snprintf(json, sizeof(json), "%s, 'disable': ['Fold']}", sel_base);
    put("q1.json", json);
    EXPECT_ERROR(load("q1.json", &p), KILN_ERR_INVALID, "q1.json: $.disable[0]: ",
                 "would disable required pass ConstFoldPass (stage prepare)");
    /* required in the manifest */
    put("q2.json", "{'kiln_manifest': 1, 'stages': {'build': [{'pass': 'CsePass', "
                   "'required': true}]}, 'disable': ['.']}");
    EXPECT_ERROR(load("q2.json", &p), KILN_ERR_INVALID, "required pass CsePass");
    put("q3.json", "{'kiln_manifest': 1, 'stages': {'build': [{'pass': 'ConstFoldPass', "
                   "'enabled': false}]}}");
    EXPECT_ERROR(load("q3.json", &p), KILN_ERR_INVALID, "$.stages.build[0].enabled",
                 "cannot disable required pass ConstFoldPass");
    /* from the command line: refused, nothing changed by that selector */
    snprintf(json, sizeof(json), "%s}", sel_base);
    put("q4.json", json);
    CU_ASSERT_EQUAL_FATAL(load("q4.json", &p), KILN_OK);
    const char *sel[] = {"Pass$"};
    const bool en[] = {false};
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(kiln_manifest_apply_selectors(&p, sel, en, 1, &err), KILN_ERR_INVALID);
    kiln_error_format(&err, errbuf, sizeof(errbuf));
    CU_ASSERT_PTR_NOT_NULL(strstr(errbuf, "--disable-pass Pass$: "));
    CU_ASSERT_TRUE(pass_at(&p, KILN_STAGE_PREPARE, 0)->enabled);
    /* enabling a required pass is fine */
    const bool on[] = {true};
    CU_ASSERT_EQUAL(kiln_manifest_apply_selectors(&p, sel, on, 1, &err), KILN_OK);
    kiln_pipeline_clear(&p);
}

static void test_manifest_unmatched_selector_warns(void)
{
    fresh_ctx();
    char json[1024];
    snprintf(json, sizeof(json), "%s, 'enable': ['NoSuchPass'], 'disable': ['Cse']}", sel_base);
    put("w.json", json);
    kiln_pipeline p = {0};
    capture c;
    capture_start(&p, &c);
    CU_ASSERT_EQUAL(load("w.json", &p), KILN_OK);
    const char *w = capture_text(&p, &c);
    CU_ASSERT_PTR_NOT_NULL(strstr(w, "kiln: warning: "));
    CU_ASSERT_PTR_NOT_NULL(
        strstr(w, "w.json: $.enable[0]: selector \"NoSuchPass\" matches no pass"));
    CU_ASSERT_PTR_NULL(strstr(w, "Cse")); /* the matching one is silent */
    CU_ASSERT_PTR_NOT_NULL(p.instr.log);  /* kept across the load */
    capture_end(&p, &c);
    kiln_pipeline_clear(&p);
}

static void test_manifest_bad_regex(void)
{
    fresh_ctx();
    char json[1024];
    snprintf(json, sizeof(json), "%s, 'disable': ['Cse', 'Prune(']}", sel_base);
    put("re.json", json);
    kiln_pipeline p = {0};
    EXPECT_ERROR(load("re.json", &p), KILN_ERR_PARSE, "re.json: $.disable[1]: ",
                 "bad regex \"Prune(\" at offset 6: ", "missing closing parenthesis");
    snprintf(json, sizeof(json), "%s, 'enable': [3]}", sel_base);
    put("re2.json", json);
    EXPECT_ERROR(load("re2.json", &p), KILN_ERR_INVALID, "$.enable[0]", "PCRE2 pattern string");
    /* the same for the command line */
    snprintf(json, sizeof(json), "%s}", sel_base);
    put("re3.json", json);
    CU_ASSERT_EQUAL_FATAL(load("re3.json", &p), KILN_OK);
    const char *sel[] = {"[a-"};
    const bool en[] = {true};
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(kiln_manifest_apply_selectors(&p, sel, en, 1, &err), KILN_ERR_PARSE);
    kiln_error_format(&err, errbuf, sizeof(errbuf));
    CU_ASSERT_PTR_NOT_NULL(strstr(errbuf, "--enable-pass [a-: bad regex"));
    kiln_pipeline_clear(&p);
}

/* ---- plugins -------------------------------------------------------------------------- */

static bool have_test_plugin(void)
{
    if (access(test_plugin(), R_OK) == 0)
        return true;
    fprintf(stderr, "\n  %s not built: cannot run this test\n", test_plugin());
    CU_FAIL("libtp_good.so missing");
    return false;
}

static void test_manifest_missing_plugin(void)
{
    fresh_ctx();
    kiln_pipeline p = {0};
    put("mp.json", "{'kiln_manifest': 1, 'plugins': [{'path': 'libnope.so', 'required': false},\n"
                   " {'path': 'libnope2.so'}]}");
    capture c;
    capture_start(&p, &c);
    kiln_status st = load("mp.json", &p);
    const char *w = capture_text(&p, &c);
    CU_ASSERT_PTR_NOT_NULL(strstr(w, "$.plugins[0].path: optional plugin libnope.so not found"));
    capture_end(&p, &c);
    EXPECT_ERROR(st, KILN_ERR_NOT_FOUND,
                 "mp.json: $.plugins[1].path: ", "plugin libnope2.so not found; searched: ", tmpdir,
                 "/lib/kiln/plugins/libnope2.so");
    put("mp2.json", "{'kiln_manifest': 1, 'plugins': [{'path': '/no/such/libx.so'}]}");
    EXPECT_ERROR(load("mp2.json", &p), KILN_ERR_NOT_FOUND, "searched: /no/such/libx.so");
    put("mp3.json", "{'kiln_manifest': 1, 'plugins': ['libx.so']}");
    EXPECT_ERROR(load("mp3.json", &p), KILN_ERR_INVALID, "$.plugins[0]", "is an object");
    /* a file that is not a plugin */
    put("notaplugin.so", "garbage");
    put("mp4.json", "{'kiln_manifest': 1, 'plugins': [{'path': 'notaplugin.so'}]}");
    EXPECT_ERROR(load("mp4.json", &p), KILN_ERR_IO, "mp4.json: $.plugins[0].path: cannot open");
}

/* A plugin entry's "config" reaches the plugin's init (kiln_plugin_config) with the
 * manifest file and the JSON path; its errors name them; a plugin reads it once. */
static void test_manifest_plugin_config(void)
{
    if (!have_test_plugin())
        return;
    char m[2048];
    const char *dir = kiln_test_env("KILN_TEST_PLUGIN_DIR", "tests/plugins");
    fresh_ctx();
    kiln_pipeline p = {0};
    /* the op set listed before it is loaded when its init asks about AcmeDup */
    snprintf(m, sizeof(m),
             "{'kiln_manifest': 1, 'plugins': [{'path': '%s/libtp_custom_op.so'},\n"
             " {'path': '%s/libtp_config.so', 'config': 'CfgPass'}]}",
             dir, dir);
    put("cfg.json", m);
    CU_ASSERT_EQUAL_FATAL(load("cfg.json", &p), KILN_OK);
    const kiln_component *c = kiln_registry_find(ctx, KILN_COMP_PASS, "CfgPass");
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    char want[1024];
    snprintf(want, sizeof(want), "%s|$.plugins[1].config|\"CfgPass\"|100", tmp_path("cfg.json"));
    CU_ASSERT_STRING_EQUAL(c->d.pass.summary, want);
    kiln_pipeline_clear(&p);

    /* without the op set, AcmeDup is unknown */
    fresh_ctx();
    snprintf(m, sizeof(m),
             "{'kiln_manifest': 1, 'plugins': [{'path': '%s/libtp_config.so', 'config': 'Cfg2'}]}",
             dir);
    put("cfg2.json", m);
    CU_ASSERT_EQUAL_FATAL(load("cfg2.json", &p), KILN_OK);
    c = kiln_registry_find(ctx, KILN_COMP_PASS, "Cfg2");
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_PTR_NOT_NULL(strstr(c->d.pass.summary, "|\"Cfg2\"|000"));
    kiln_pipeline_clear(&p);

    /* an engine-only plugin listed before it would be deferred; the config entry
     * loads it first, so the engine's op table counts (FakeOpVec) */
    fresh_ctx();
    snprintf(m, sizeof(m),
             "{'kiln_manifest': 1, 'plugins': [{'path': '%s/libtp_engine_fake.so',\n"
             "  'provides': {'engines': ['aicore', 'rts', 'vector']}},\n"
             " {'path': '%s/libtp_config.so', 'config': 'Cfg3'}]}",
             dir, dir);
    put("cfg3.json", m);
    CU_ASSERT_EQUAL_FATAL(load("cfg3.json", &p), KILN_OK);
    c = kiln_registry_find(ctx, KILN_COMP_PASS, "Cfg3");
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_PTR_NOT_NULL(strstr(c->d.pass.summary, "|\"Cfg3\"|001"));
    kiln_pipeline_clear(&p);

    /* the plugin's own error names the manifest and the path */
    fresh_ctx();
    snprintf(
        m, sizeof(m),
        "{'kiln_manifest': 1, 'plugins': [{'path': '%s/libtp_config.so', 'config': {'a': 1}}]}",
        dir);
    put("cfg_bad.json", m);
    EXPECT_ERROR(load("cfg_bad.json", &p), KILN_ERR_PLUGIN_INIT, "cfg_bad.json: $.plugins[0].path",
                 "init failed", "cfg_bad.json: $.plugins[0].config: expected a pass name",
                 "{\"a\":1}");

    /* listed twice, the config on the second entry: refused */
    fresh_ctx();
    snprintf(m, sizeof(m),
             "{'kiln_manifest': 1, 'plugins': [{'path': '%s/libtp_config.so'},\n"
             " {'path': '%s/libtp_config.so', 'config': 'Late'}]}",
             dir, dir);
    put("cfg_twice.json", m);
    EXPECT_ERROR(load("cfg_twice.json", &p), KILN_ERR_INVALID,
                 "cfg_twice.json: $.plugins[1].config: plugin test.config is already loaded");

    /* no config: NULL, nothing registered */
    fresh_ctx();
    snprintf(m, sizeof(m), "{'kiln_manifest': 1, 'plugins': [{'path': '%s/libtp_config.so'}]}",
             dir);
    put("cfg_none.json", m);
    CU_ASSERT_EQUAL(load("cfg_none.json", &p), KILN_OK);
    CU_ASSERT_PTR_NULL(kiln_registry_find(ctx, KILN_COMP_PASS, "CfgPass"));
    kiln_pipeline_clear(&p);
}

static void test_manifest_plugin_relative_path(void)
{
    if (!have_test_plugin())
        return;
    fresh_ctx();
    put("sub/placeholder", "");
    CU_ASSERT_EQUAL_FATAL(symlink(test_plugin(), tmp_path("sub/libtp_good.so")), 0);
    put("sub/rel.json", "{'kiln_manifest': 1, 'plugins': [{'path': 'libtp_good.so'}],\n"
                        " 'stages': {'prepare': [{'pass': 'TestGraphPass', 'options': "
                        "{'count': 7}}, 'TestNodePass', 'TestFusionPass']},\n"
                        " 'tuners': ['TestTuner'], 'memory_planner': 'TestPlanner'}");
    kiln_pipeline p = {0};
    CU_ASSERT_EQUAL_FATAL(load("sub/rel.json", &p), KILN_OK);
    CU_ASSERT_EQUAL(p.stages[KILN_STAGE_PREPARE].npasses, 3);
    int64_t count = 0;
    CU_ASSERT_TRUE(
        kiln_options_get_int(pass_at(&p, KILN_STAGE_PREPARE, 0)->options, "count", &count));
    CU_ASSERT_EQUAL(count, 7);
    CU_ASSERT_PTR_NOT_NULL(pass_at(&p, KILN_STAGE_PREPARE, 0)->comp->plugin->handle);
    /* listed again by a second manifest: loaded once */
    uint32_t nplugins = kiln_registry_plugin_count(ctx);
    CU_ASSERT_EQUAL_FATAL(load("sub/rel.json", &p), KILN_OK);
    CU_ASSERT_EQUAL(kiln_registry_plugin_count(ctx), nplugins);
    kiln_pipeline_clear(&p);
}

/* Copy file @p from to @p to; false on any error. */
static bool copy_file(const char *from, const char *to)
{
    FILE *in = fopen(from, "rb"), *out = in ? fopen(to, "wb") : NULL;
    bool ok = in && out;
    char buf[65536];
    size_t n;
    while (ok && (n = fread(buf, 1, sizeof(buf), in)) > 0)
        ok = fwrite(buf, 1, n, out) == n;
    if (in)
        ok = !ferror(in) && fclose(in) == 0 && ok;
    if (out)
        ok = fclose(out) == 0 && ok;
    return ok;
}

static void test_manifest_plugin_search_path(void)
{
    if (!have_test_plugin())
        return;
    /* A plugin file no default place holds: a copy of libtp_good.so under
     * another name, in a directory of its own. */
    char dir[1024], so[1200], env[2200];
    snprintf(dir, sizeof(dir), "%s/spdir", tmpdir);
    mkdir(dir, 0700);
    snprintf(so, sizeof(so), "%s/libtp_search.so", dir);
    CU_ASSERT_TRUE_FATAL(copy_file(test_plugin(), so));
    snprintf(env, sizeof(env), "/nonexistent::%s", dir);
    put("sp.json", "{'kiln_manifest': 1, 'plugins': [{'path': 'libtp_search.so'}],\n"
                   " 'stages': {'build': ['TestNodePass']}}");
    kiln_pipeline p = {0};
    fresh_ctx();
    unsetenv("KILN_PLUGIN_PATH");
    EXPECT_ERROR(load("sp.json", &p), KILN_ERR_NOT_FOUND, "plugin libtp_search.so not found");
    setenv("KILN_PLUGIN_PATH", env, 1);
    kiln_status st = load("sp.json", &p);
    unsetenv("KILN_PLUGIN_PATH");
    CU_ASSERT_EQUAL(st, KILN_OK);
    if (st != KILN_OK)
        fprintf(stderr, "\n  error: %s\n", errbuf);
    CU_ASSERT_EQUAL(p.stages[KILN_STAGE_BUILD].npasses, 1);
    kiln_pipeline_clear(&p);

    /* Run from a build tree (this executable's parent directory holds
     * CMakeCache.txt), kiln also looks in <build>/tests/plugins, so the test
     * plugins load by bare name without KILN_PLUGIN_PATH. */
    fresh_ctx();
    put("bt.json", "{'kiln_manifest': 1, 'plugins': [{'path': 'libtp_good.so'}],\n"
                   " 'stages': {'build': ['TestNodePass']}}");
    st = load("bt.json", &p);
    CU_ASSERT_EQUAL(st, KILN_OK);
    if (st != KILN_OK)
        fprintf(stderr, "\n  error: %s\n", errbuf);
    kiln_pipeline_clear(&p);
    remove(so);
    rmdir(dir);
}

static void test_manifest_provides_mismatch(void)
{
    if (!have_test_plugin())
        return;
    fresh_ctx();
    char json[2048];
    const char *all = "'passes': ['TestGraphPass', 'TestNodePass', 'TestCorruptPass', "
                      "'TestFusionPass'], 'engines': ['test_engine'], 'checkers': ['TestChecker'],"
                      " 'memory_planners': ['TestPlanner'], 'allocators': ['TestAllocator'],"
                      " 'frontends': ['test_frontend'], 'tuners': ['TestTuner'],"
                      " 'instruments': ['TestInstrument']";
    snprintf(json, sizeof(json),
             "{'kiln_manifest': 1, 'plugins': [{'path': '%s', 'provides': {%s}}]}", test_plugin(),
             all);
    put("pv_ok.json", json);
    kiln_pipeline p = {0};
    CU_ASSERT_EQUAL(load("pv_ok.json", &p), KILN_OK);
    if (kiln_error_code(&err))
        fprintf(stderr, "\n  error: %s\n", errbuf);
    /* declares a component the plugin does not register */
    snprintf(json, sizeof(json),
             "{'kiln_manifest': 1, 'plugins': [{'path': '%s', 'provides': {%s,"
             " 'x-later': 1}}]}",
             test_plugin(), "'passes': ['TestGraphPass', 'GhostPass']");
    put("pv1.json", json);
    EXPECT_ERROR(load("pv1.json", &p), KILN_ERR_INVALID,
                 "pv1.json: $.plugins[0].provides.passes[1]: declared-vs-registered mismatch: "
                 "plugin kiln.test.good declares GhostPass but does not register it");
    /* registers components the manifest does not declare */
    snprintf(json, sizeof(json),
             "{'kiln_manifest': 1, 'plugins': [{'path': '%s', 'provides': {'passes': "
             "['TestGraphPass', 'TestNodePass', 'TestCorruptPass', 'TestFusionPass']}}]}",
             test_plugin());
    put("pv2.json", json);
    EXPECT_ERROR(load("pv2.json", &p), KILN_ERR_INVALID,
                 "$.plugins[0].provides: ", "declared-vs-registered mismatch",
                 "registers engine test_engine", "under \"engines\"");
    /* right name, wrong kind */
    snprintf(json, sizeof(json),
             "{'kiln_manifest': 1, 'plugins': [{'path': '%s', 'provides': {'engines': "
             "['TestTuner']}}]}",
             test_plugin());
    put("pv3.json", json);
    EXPECT_ERROR(load("pv3.json", &p), KILN_ERR_INVALID, "$.plugins[0].provides.engines[0]",
                 "registers TestTuner as a tuner");
    put("pv4.json",
        "{'kiln_manifest': 1, 'plugins': [{'path': 'x.so', 'provides': {'pases': []}}]}");
    put("x.so", "");
    /* not-a-plugin fails first; unknown provides keys are checked after loading */
    CU_ASSERT_NOT_EQUAL(load("pv4.json", &p), KILN_OK);
    kiln_pipeline_clear(&p);
}

/* ---- textual pipeline -------------------------------------------------------------------- */

static char *print_text(const kiln_pipeline *p)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    kiln__pipeline_print_text(p, f);
    fclose(f);
    return buf;
}

static void test_manifest_text_round_trip(void)
{
    fresh_ctx();
    put("rt.json",
        "{'kiln_manifest': 1, 'stages': {\n"
        " 'prepare': ['ConstFoldPass', {'pass': 'PruneGraphPass', 'options': {'max': 3,\n"
        "             'mode': 'a, b {c}=\\'q\\'\\\\', 'ratio': 0.25}}],\n"
        " 'optimize_original': [{'pass': 'CsePass', 'required': true}, 'IdentityRemovePass',\n"
        "                       {'pass': 'FuseReluPass', 'options': {'verbose': true}}],\n"
        " 'lint': ['HcclMemcpyPass', 'CsePass']}, 'disable': ['Identity']}");
    kiln_pipeline p = {0}, q = {0};
    CU_ASSERT_EQUAL_FATAL(load("rt.json", &p), KILN_OK);
    char *text = print_text(&p);
    CU_ASSERT_STRING_EQUAL(text, "prepare(ConstFoldPass,PruneGraphPass{max=3,ratio=0.25,"
                                 "mode=\"a, b {c}=\\\"q\\\"\\\\\"}),"
                                 "optimize_original(CsePass!,-IdentityRemovePass,"
                                 "FuseReluPass{verbose=true}),lint(HcclMemcpyPass,CsePass)");
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(kiln__pipeline_parse_text(ctx, text, &q, &err), KILN_OK);
    CU_ASSERT_TRUE(kiln__pipeline_equal(&p, &q));
    char *again = print_text(&q);
    CU_ASSERT_STRING_EQUAL(again, text);
    /* and the equality is not trivially true */
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(kiln_manifest_set_pass_option(&q, "PruneGraphPass", "max", "4", &err), KILN_OK);
    CU_ASSERT_FALSE(kiln__pipeline_equal(&p, &q));
    free(text);
    free(again);
    kiln_pipeline_clear(&p);
    kiln_pipeline_clear(&q);
}

static void test_manifest_text_bare_list(void)
{
    fresh_ctx();
    kiln_pipeline p = {0};
    CU_ASSERT_EQUAL_FATAL(
        kiln__pipeline_parse_text(ctx,
                                  " CsePass , PruneGraphPass{ max = 1 , mode = x y },"
                                  "-IdentityRemovePass",
                                  &p, &err),
        KILN_OK);
    CU_ASSERT_EQUAL(p.stages[KILN_STAGE_OPTIMIZE_ORIGINAL].npasses, 3);
    const char *mode = NULL;
    kiln_options_get_string(pass_at(&p, KILN_STAGE_OPTIMIZE_ORIGINAL, 1)->options, "mode", &mode);
    CU_ASSERT_STRING_EQUAL(mode, "x y");
    CU_ASSERT_FALSE(pass_at(&p, KILN_STAGE_OPTIMIZE_ORIGINAL, 2)->enabled);
    char *text = print_text(&p);
    CU_ASSERT_STRING_EQUAL(text, "optimize_original(CsePass,PruneGraphPass{max=1,mode=\"x y\"},"
                                 "-IdentityRemovePass)");
    free(text);
    /* parsing replaces every stage */
    CU_ASSERT_EQUAL(kiln__pipeline_parse_text(ctx, "build(CsePass),prepare()", &p, &err), KILN_OK);
    CU_ASSERT_EQUAL(p.stages[KILN_STAGE_OPTIMIZE_ORIGINAL].npasses, 0);
    CU_ASSERT_EQUAL(p.stages[KILN_STAGE_BUILD].npasses, 1);
    CU_ASSERT_EQUAL(kiln__pipeline_parse_text(ctx, "", &p, &err), KILN_OK);
    CU_ASSERT_EQUAL(p.stages[KILN_STAGE_BUILD].npasses, 0);
    kiln_pipeline_clear(&p);
}

static void expect_text_error(const char *text, kiln_status code, const char *needle)
{
    kiln_pipeline p = {0};
    CU_ASSERT_EQUAL_FATAL(kiln__pipeline_parse_text(ctx, "prepare(CsePass)", &p, &err), KILN_OK);
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(kiln__pipeline_parse_text(ctx, text, &p, &err), code);
    kiln_error_format(&err, errbuf, sizeof(errbuf));
    if (!strstr(errbuf, needle))
        fprintf(stderr, "\n  text: %s\n  error: %s\n  missing: %s\n", text, errbuf, needle);
    CU_ASSERT_PTR_NOT_NULL(strstr(errbuf, needle));
    CU_ASSERT_EQUAL(p.stages[KILN_STAGE_PREPARE].npasses, 1); /* unchanged on failure */
    kiln_pipeline_clear(&p);
}

static void test_manifest_text_errors(void)
{
    fresh_ctx();
    expect_text_error("prepare(CsePas)", KILN_ERR_NOT_FOUND,
                      "pipeline text, column 9: unknown pass CsePas (did you mean CsePass?)");
    expect_text_error("fusion(CsePass)", KILN_ERR_PARSE, "column 1: unknown stage fusion");
    expect_text_error("prepare(CsePass),prepare()", KILN_ERR_PARSE, "stage prepare given twice");
    expect_text_error("prepare(CsePass", KILN_ERR_PARSE, "expected ',' or ')', found end of text");
    expect_text_error("CsePass,", KILN_ERR_PARSE, "expected a pass or stage name");
    expect_text_error("CsePass,build(CsePass)", KILN_ERR_PARSE, "in a bare pass list");
    expect_text_error("build(CsePass),CsePass", KILN_ERR_PARSE, "pass CsePass outside a stage");
    expect_text_error("PruneGraphPass{max=9}", KILN_ERR_INVALID,
                      "pipeline text, column 16: pass PruneGraphPass: option 'max' = 9 is out");
    expect_text_error("PruneGraphPass{max}", KILN_ERR_PARSE, "expected '='");
    expect_text_error("PruneGraphPass{mode=\"x}", KILN_ERR_PARSE, "closing '\"'");
    expect_text_error("PruneGraphPass{bogus=1}", KILN_ERR_NOT_FOUND, "unknown option 'bogus'");
    expect_text_error("-ConstFoldPass", KILN_ERR_INVALID, "cannot disable required pass");
    expect_text_error("-CsePass!", KILN_ERR_INVALID, "cannot disable required pass CsePass");
    expect_text_error("CsePass CsePass", KILN_ERR_PARSE, "column 9: expected ','");
}

static void test_manifest_set_pass_option(void)
{
    fresh_ctx();
    kiln_pipeline p = {0};
    CU_ASSERT_EQUAL_FATAL(kiln__pipeline_parse_text(ctx,
                                                    "prepare(PruneGraphPass),"
                                                    "build(PruneGraphPass{max=1})",
                                                    &p, &err),
                          KILN_OK);
    CU_ASSERT_EQUAL(kiln_manifest_set_pass_option(&p, "PruneGraphPass", "max", "5", &err), KILN_OK);
    int64_t v = 0;
    kiln_options_get_int(pass_at(&p, KILN_STAGE_BUILD, 0)->options, "max", &v);
    CU_ASSERT_EQUAL(v, 5); /* every instance */
    kiln_options_get_int(pass_at(&p, KILN_STAGE_PREPARE, 0)->options, "max", &v);
    CU_ASSERT_EQUAL(v, 5);
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(kiln_manifest_set_pass_option(&p, "PruneGraphPass", "max", "x", &err),
                    KILN_ERR_INVALID);
    kiln_error_format(&err, errbuf, sizeof(errbuf));
    CU_ASSERT_PTR_NOT_NULL(strstr(errbuf, "pass PruneGraphPass: option 'max' expects int"));
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(kiln_manifest_set_pass_option(&p, "CsePass", "max", "1", &err),
                    KILN_ERR_NOT_FOUND);
    CU_ASSERT_PTR_NOT_NULL(strstr(kiln_error_message(&err), "no pass CsePass in the pipeline"));
    kiln_pipeline_clear(&p);
}

static void test_manifest_print_resolved(void)
{
    fresh_ctx();
    put("pr.json", full_manifest);
    kiln_pipeline p = {0};
    CU_ASSERT_EQUAL_FATAL(load("pr.json", &p), KILN_OK);
    const char *sel[] = {"Identity"};
    const bool en[] = {false};
    CU_ASSERT_EQUAL(kiln_manifest_apply_selectors(&p, sel, en, 1, &err), KILN_OK);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    kiln__pipeline_print(&p, f);
    fclose(f);
    const char *want[] = {
        "pipeline: 6 passes (2 disabled) in 8 stages",
        "stage 1 prepare:",
        "ConstFoldPass",
        "enabled, required  [test.manifest.static]",
        "max = 3\n",
        "verbose = true\n",
        "stage 3 partition: (no passes)",
        "FuseReluPass                     fusion pass enabled, required",
        "max = 2  (default)",
        "IdentityRemovePass               node pass   DISABLED",
        "disabled by --disable-pass \"Identity\"",
        "disabled by ",
        "pr.json: $.stages.optimize_original[2].enabled",
        "tuners: ExampleTuner",
        "breakpoints: after_build, before_ub_match",
        "memory planner: BumpPlanner",
        "allocator: SimpleAllocator",
        "engines: cpu",
        "verify_each=true time_passes=true print_after=Prune dump_dir=dumps bisect_limit=7",
        NULL};
    for (const char **w = want; *w; w++) {
        if (!strstr(buf, *w))
            fprintf(stderr, "\n  missing '%s' in:\n%s\n", *w, buf);
        CU_ASSERT_PTR_NOT_NULL(strstr(buf, *w));
    }
    free(buf);
    kiln_pipeline_clear(&p);
}

static void test_manifest_data_example(void)
{
    /* tests/data/manifests/example.json is the docs/manifest.md example */
    if (!have_test_plugin())
        return;
    fresh_ctx();
    char path[1024], dir[1024];
    snprintf(path, sizeof(path), "%s/tests/data/manifests/example.json",
             kiln_test_env("KILN_SOURCE_DIR", ".."));
    snprintf(dir, sizeof(dir), "%s", test_plugin());
    *strrchr(dir, '/') = 0;
    setenv("KILN_PLUGIN_PATH", dir, 1);
    kiln_pipeline p = {0};
    capture c;
    capture_start(&p, &c);
    kiln_error_clear(&err);
    kiln_status st = kiln_manifest_load(ctx, path, &p, &err);
    unsetenv("KILN_PLUGIN_PATH");
    kiln_error_format(&err, errbuf, sizeof(errbuf));
    if (st != KILN_OK)
        fprintf(stderr, "\n  error: %s\n", errbuf);
    CU_ASSERT_EQUAL(st, KILN_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(capture_text(&p, &c), "matches no pass"));
    capture_end(&p, &c);
    CU_ASSERT_STRING_EQUAL(kiln_ctx_option(ctx, "ge.exec.atomicCleanPolicy"), "1");
    CU_ASSERT_EQUAL(p.ntuners, 1);
    CU_ASSERT_TRUE(p.stages[KILN_STAGE_OPTIMIZE_ORIGINAL].npasses >= 1);
    kiln_pipeline_clear(&p);
}

static void test_manifest_allocation_failure(void)
{
    fresh_ctx();
    put("oom.json", full_manifest);
    put("oom_child.json", "{'kiln_manifest': 1, 'extends': 'oom.json', 'disable': ['Cse']}");
    int completed = 0, faulted = 0;
    for (long n = 1; n < 400 && !completed; n++) {
        kiln_pipeline p = {0};
        kiln_error_clear(&err);
        kiln__fault_set(n);
        kiln_status st = kiln_manifest_load(ctx, tmp_path("oom_child.json"), &p, &err);
        long hits = kiln__fault_hits();
        kiln__fault_set(0);
        CU_ASSERT(st == KILN_OK || st == KILN_ERR_NOMEM);
        if (st != KILN_OK && st != KILN_ERR_NOMEM) {
            kiln_error_format(&err, errbuf, sizeof(errbuf));
            fprintf(stderr, "\n  fault %ld: %s\n", n, errbuf);
        }
        if (st == KILN_OK && hits == 0)
            completed = 1;
        faulted += hits != 0;
        kiln_pipeline_clear(&p);
    }
    CU_ASSERT_TRUE(completed);
    CU_ASSERT_TRUE(faulted > 0); /* the injection reached the loader at all */
}

int main(void)
{
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/kiln_manifest_XXXXXX");
    if (!mkdtemp(tmpdir))
        return 2;
    static const kiln_test_case cases[] = {
        {"test_manifest_load_everything", test_manifest_load_everything},
        {"test_manifest_minimal_defaults", test_manifest_minimal_defaults},
        {"test_manifest_extends_overrides", test_manifest_extends_overrides},
        {"test_manifest_extends_cycle", test_manifest_extends_cycle},
        {"test_manifest_unknown_pass_suggests", test_manifest_unknown_pass_suggests},
        {"test_manifest_option_errors", test_manifest_option_errors},
        {"test_manifest_structure_errors", test_manifest_structure_errors},
        {"test_manifest_regex_last_match_wins", test_manifest_regex_last_match_wins},
        {"test_manifest_required_cannot_be_disabled", test_manifest_required_cannot_be_disabled},
        {"test_manifest_unmatched_selector_warns", test_manifest_unmatched_selector_warns},
        {"test_manifest_bad_regex", test_manifest_bad_regex},
        {"test_manifest_missing_plugin", test_manifest_missing_plugin},
        {"test_manifest_plugin_config", test_manifest_plugin_config},
        {"test_manifest_plugin_relative_path", test_manifest_plugin_relative_path},
        {"test_manifest_plugin_search_path", test_manifest_plugin_search_path},
        {"test_manifest_provides_mismatch", test_manifest_provides_mismatch},
        {"test_manifest_text_round_trip", test_manifest_text_round_trip},
        {"test_manifest_text_bare_list", test_manifest_text_bare_list},
        {"test_manifest_text_errors", test_manifest_text_errors},
        {"test_manifest_set_pass_option", test_manifest_set_pass_option},
        {"test_manifest_print_resolved", test_manifest_print_resolved},
        {"test_manifest_data_example", test_manifest_data_example},
        {"test_manifest_allocation_failure", test_manifest_allocation_failure},
        {NULL, NULL},
    };
    int rc = kiln_test_run("manifest", cases);
    kiln_ctx_destroy(ctx);
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmpdir);
    return rc;
}

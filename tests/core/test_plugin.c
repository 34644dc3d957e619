/*
 * test_plugin.c - the plugin loader: every distinct error, rollback, ABI
 * compatibility with older minors, refusal of newer ones, KILN_HOST_HAS
 * probes, and each component kind registered by a real .so built only
 * against plugin-api/.
 */
#include "kiln_test.h"
#include "plugin.h"
#include "checker.h"
#include "graph_int.h"
#include <stdio.h>
#include <string.h>

static char path[4096];

static const char *tp(const char *name)
{
    snprintf(path, sizeof(path), "%s/lib%s.so",
             kiln_test_env("KILN_TEST_PLUGIN_DIR", "tests/plugins"), name);
    return path;
}

/* Load @p name into a fresh context; returns status, message in err. */
static kiln_status load(kiln_ctx *ctx, const char *name, kiln_error *err)
{
    kiln_error_clear(err);
    return kiln_plugin_load(ctx, tp(name), NULL, err);
}

static void test_plugin_good_registers_every_kind(void)
{
    kiln_ctx *ctx = kiln_ctx_create();
    kiln_error err;
    CU_ASSERT_EQUAL_FATAL(load(ctx, "tp_good", &err), KILN_OK);
    static const struct {
        kiln_component_kind kind;
        const char *name;
    } want[] = {{KILN_COMP_PASS, "TestGraphPass"},      {KILN_COMP_PASS, "TestNodePass"},
                {KILN_COMP_FUSION, "TestFusionPass"},   {KILN_COMP_ENGINE, "test_engine"},
                {KILN_COMP_CHECKER, "TestChecker"},     {KILN_COMP_MEM_PLANNER, "TestPlanner"},
                {KILN_COMP_ALLOCATOR, "TestAllocator"}, {KILN_COMP_FRONTEND, "test_frontend"},
                {KILN_COMP_TUNER, "TestTuner"},         {KILN_COMP_INSTRUMENT, "TestInstrument"}};
    for (unsigned i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        const kiln_component *c = kiln_registry_find(ctx, want[i].kind, want[i].name);
        CU_ASSERT_PTR_NOT_NULL(c);
        if (c)
            CU_ASSERT_STRING_EQUAL(c->plugin->desc.name, "kiln.test.good");
    }
    /* the checker landed in the registry table, symmetric */
    const kiln_component *ck = kiln_registry_find(ctx, KILN_COMP_CHECKER, "TestChecker");
    CU_ASSERT_PTR_EQUAL(
        kiln_checker_lookup(ctx, KILN_AA_CONTINUOUS_INPUT, KILN_AA_CONTINUOUS_INPUT), ck);
    /* the planner works through its descriptor */
    const kiln_component *pl = kiln_registry_find(ctx, KILN_COMP_MEM_PLANNER, "TestPlanner");
    kiln_mem_block blocks[2] = {{.size = 16}, {.size = 32}};
    kiln_mem_problem prob = {.struct_size = sizeof(prob), .block_count = 2, .blocks = blocks};
    int64_t peak = 0;
    CU_ASSERT_EQUAL(pl->d.planner.plan(NULL, &prob, &peak, &err), KILN_OK);
    CU_ASSERT_EQUAL(blocks[1].offset, 16);
    CU_ASSERT_EQUAL(peak, 48);
    /* a graph pass runs through the host table */
    const kiln_component *gp = kiln_registry_find(ctx, KILN_COMP_PASS, "TestGraphPass");
    kiln_graph *g = kiln_graph_create(ctx, "g");
    CU_ASSERT_EQUAL(gp->d.pass.run_graph(&(int64_t){3}, NULL, g), KILN_PASS_CHANGED);
    int64_t runs = 0;
    CU_ASSERT(kiln_attrs_get_int(kiln_graph_attrs(g), "test_graph_pass_runs", &runs));
    CU_ASSERT_EQUAL(runs, 3);
    /* loading the same file twice is a no-op */
    CU_ASSERT_EQUAL(load(ctx, "tp_good", &err), KILN_OK);
    CU_ASSERT_EQUAL(kiln_registry_plugin_count(ctx), 1);
    kiln_graph_destroy(g);
    kiln_ctx_destroy(ctx);
}

static void expect_error(const char *plugin, kiln_status code, const char *fragment)
{
    kiln_ctx *ctx = kiln_ctx_create();
    kiln_error err;
    CU_ASSERT_EQUAL(load(ctx, plugin, &err), code);
    if (!strstr(err.msg, fragment)) {
        fprintf(stderr, "\n%s: got '%s', want '%s'\n", plugin, err.msg, fragment);
        CU_FAIL("message");
    }
    CU_ASSERT(strstr(err.msg, "lib") != NULL || strstr(err.msg, "component") != NULL);
    CU_ASSERT_EQUAL(kiln_registry_count(ctx), 0);
    CU_ASSERT_EQUAL(kiln_registry_plugin_count(ctx), 0);
    kiln_ctx_destroy(ctx);
}

static void test_plugin_missing_file(void)
{
    expect_error("tp_does_not_exist", KILN_ERR_NOT_FOUND, "cannot open");
}
static void test_plugin_missing_entry(void)
{
    expect_error("tp_no_entry", KILN_ERR_NOT_FOUND, "no entry point kiln_plugin_entry in");
}
static void test_plugin_wrong_major(void)
{
    expect_error("tp_wrong_major", KILN_ERR_VERSION, "ABI 2.0 but host is 1.");
}
static void test_plugin_short_struct_size(void)
{
    expect_error("tp_short_size", KILN_ERR_VERSION, "struct_size 8 is smaller than");
}
static void test_plugin_init_failure(void)
{
    expect_error("tp_init_fail", KILN_ERR_PLUGIN_INIT,
                 "init failed: device /dev/acme0 not present");
}
static void test_plugin_partial_rolls_back(void)
{
    expect_error("tp_partial", KILN_ERR_PLUGIN_INIT, "init failed: second half failed");
}
static void test_plugin_unresolved_symbol(void)
{
    expect_error("tp_unresolved", KILN_ERR_IO, "kiln_test_symbol_that_does_not_exist");
}

static void test_plugin_duplicate_component(void)
{
    kiln_ctx *ctx = kiln_ctx_create();
    kiln_error err;
    CU_ASSERT_EQUAL_FATAL(load(ctx, "tp_good", &err), KILN_OK);
    uint32_t before = kiln_registry_count(ctx);
    CU_ASSERT_EQUAL(load(ctx, "tp_dup", &err), KILN_ERR_DUPLICATE);
    CU_ASSERT(strstr(err.msg, "component TestGraphPass is already registered by") != NULL);
    CU_ASSERT(strstr(err.msg, "libtp_good.so") != NULL);
    CU_ASSERT(strstr(err.msg, "libtp_dup.so: ") != NULL); /* the plugin being loaded comes first */
    /* DupFirstPass, registered before the clash, was rolled back */
    CU_ASSERT_EQUAL(kiln_registry_count(ctx), before);
    CU_ASSERT_PTR_NULL(kiln_registry_find(ctx, 0, "DupFirstPass"));
    /* the find index after the rollback: every component still found, as itself */
    for (uint32_t i = 0; i < kiln_registry_count(ctx); i++) {
        const kiln_component *c = kiln_registry_at(ctx, i);
        CU_ASSERT_PTR_EQUAL(kiln_registry_find(ctx, c->kind, c->name), c);
    }
    kiln_ctx_destroy(ctx);
}

/* kiln_registry_find over the default plugins (hundreds of components and ops,
 * the index grown several times): each component found by kind and name is
 * the first registered of that kind and name; kind 0 never answers an op. */
static void test_registry_find_index(void)
{
    kiln_ctx *ctx = kiln_ctx_create();
    kiln_error err;
    static const char *const plugins[] = {"libkiln_onnx_ops.so", "libkiln_passes.so",
                                          "libkiln_streams.so", "libkiln_mem_assign.so"};
    for (size_t k = 0; k < sizeof(plugins) / sizeof(plugins[0]); k++)
        CU_ASSERT_EQUAL_FATAL(kiln_test_load_plugin(ctx, plugins[k], &err), KILN_OK);
    uint32_t n = kiln_registry_count(ctx), ops = 0;
    CU_ASSERT(n > 128); /* past the index's first size (256 slots, grown at half) */
    for (uint32_t i = 0; i < n; i++) {
        const kiln_component *c = kiln_registry_at(ctx, i);
        const kiln_component *f = kiln_registry_find(ctx, c->kind, c->name);
        bool first = true;
        for (uint32_t j = 0; j < i; j++) {
            const kiln_component *e = kiln_registry_at(ctx, j);
            first &= !(e->kind == c->kind && strcmp(e->name, c->name) == 0);
        }
        CU_ASSERT(first ? f == c : f != NULL && f != c);
        if (c->kind == KILN_COMP_OP) {
            ops++;
            const kiln_component *any = kiln_registry_find(ctx, 0, c->name);
            CU_ASSERT(!any || any->kind != KILN_COMP_OP);
        }
    }
    CU_ASSERT(ops > 100);
    CU_ASSERT_PTR_NULL(kiln_registry_find(ctx, 0, "NoSuchComponentAnywhere"));
    CU_ASSERT_PTR_NULL(kiln_registry_find(ctx, KILN_COMP_PASS, "Relu"));
    kiln_ctx_destroy(ctx);
}

static void run_flag_pass(const char *plugin, const char *pass, const char *flag)
{
    kiln_ctx *ctx = kiln_ctx_create();
    kiln_error err;
    CU_ASSERT_EQUAL_FATAL(load(ctx, plugin, &err), KILN_OK);
    const kiln_component *c = kiln_registry_find(ctx, KILN_COMP_PASS, pass);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL(c->d.pass.struct_size, sizeof(kiln_pass_desc));
    CU_ASSERT_PTR_NULL(c->d.pass.reserved[0]); /* zero-filled, never read from the plugin */
    kiln_graph *g = kiln_graph_create(ctx, "g");
    CU_ASSERT_EQUAL(c->d.pass.run_graph(NULL, NULL, g), KILN_PASS_CHANGED);
    bool v = false;
    CU_ASSERT(kiln_attrs_get_bool(kiln_graph_attrs(g), flag, &v) && v);
    kiln_graph_destroy(g);
    kiln_ctx_destroy(ctx);
}

static void test_plugin_older_minor_loads(void)
{
    run_flag_pass("tp_older_minor", "OlderMinorPass", "older_minor_ran");
}
/* GStreamer's rule: a plugin that requires a newer minor than the host is
 * refused, with its name and both versions in the message. */
static void test_plugin_newer_minor_refused(void)
{
    char want[256];
    snprintf(want, sizeof(want),
             "plugin kiln.test.newer requires kiln ABI %d.%d but this host provides %d.%d",
             KILN_ABI_MAJOR, KILN_ABI_MINOR + 1, KILN_ABI_MAJOR, KILN_ABI_MINOR);
    expect_error("tp_newer_minor", KILN_ERR_VERSION, want);
    snprintf(want, sizeof(want),
             "plugin kiln.test.future_required requires kiln ABI %d.%d but this host provides "
             "%d.%d",
             KILN_ABI_MAJOR, KILN_ABI_MINOR + 1, KILN_ABI_MAJOR, KILN_ABI_MINOR);
    expect_error("tp_future_required", KILN_ERR_VERSION, want);
}

/* Run graph pass @p pass of plugin @p plugin once on an empty graph; returns
 * the graph (caller destroys it and @p *ctx). */
static kiln_graph *run_probe(const char *plugin, const char *pass, kiln_ctx **ctx)
{
    kiln_error err;
    *ctx = kiln_ctx_create();
    if (load(*ctx, plugin, &err) != KILN_OK) {
        fprintf(stderr, "\n%s: %s\n", plugin, err.msg);
        return NULL;
    }
    const kiln_component *c = kiln_registry_find(*ctx, KILN_COMP_PASS, pass);
    if (!c)
        return NULL;
    kiln_graph *g = kiln_graph_create(*ctx, "g");
    kiln_graph_add_node(g, "n", "Relu", 0, 1);
    CU_ASSERT_EQUAL(c->d.pass.run_graph(NULL, NULL, g), KILN_PASS_CHANGED);
    return g;
}

/* Built against the next minor's headers, requiring only this one: it loads,
 * KILN_HOST_HAS(kiln_future_probe) is false here, and it takes its fallback. */
static void test_plugin_probe_missing_host_function(void)
{
    kiln_ctx *ctx;
    kiln_graph *g = run_probe("tp_future_probe", "FutureProbePass", &ctx);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    const char *v = NULL;
    CU_ASSERT(kiln_attrs_get_string(kiln_graph_attrs(g), "future_probe", &v));
    CU_ASSERT(v && strcmp(v, "fallback") == 0);
    const kiln_plugin_rec *p = kiln_registry_plugin_at(ctx, 0);
    CU_ASSERT_EQUAL(p->desc.abi_minor, 0);
    kiln_graph_destroy(g);
    kiln_ctx_destroy(ctx);
}

/* KILN_HOST_HAS compiles in a plugin and answers yes for a function the host
 * has, no for one past the end of a (shortened) table. */
static void test_plugin_host_has(void)
{
    kiln_ctx *ctx;
    kiln_graph *g = run_probe("tp_host_has", "HostHasPass", &ctx);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    bool has = false, short_has = true, short_first = false;
    const kiln_attrs *a = kiln_graph_attrs(g);
    CU_ASSERT(kiln_attrs_get_bool(a, "host_has_engine_for_node", &has) && has);
    CU_ASSERT(kiln_attrs_get_bool(a, "short_table_has_it", &short_has) && !short_has);
    CU_ASSERT(kiln_attrs_get_bool(a, "short_table_has_first", &short_first) && short_first);
    kiln_graph_destroy(g);
    kiln_ctx_destroy(ctx);
}

/* Fault injection over loading: every allocation failure gives a clean error. */
static void test_plugin_load_fault_injection(void)
{
    long faulted = 0; /* loads that met an injected failure */
    for (long nth = 1; nth < 100; nth++) {
        kiln_ctx *ctx = kiln_ctx_create();
        CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
        kiln_error err;
        kiln_error_clear(&err);
        kiln__fault_set(nth);
        kiln_status st = kiln_plugin_load(ctx, tp("tp_good"), NULL, &err);
        long hits = kiln__fault_hits();
        kiln__fault_set(0);
        if (hits)
            CU_ASSERT(st != KILN_OK && kiln_registry_count(ctx) == 0);
        kiln_ctx_destroy(ctx);
        if (!hits)
            break;
        faulted++;
    }
    CU_ASSERT(faulted > 0); /* the injection reached the loader at all */
}

int main(void)
{
    static const kiln_test_case cases[] = {
        {"test_plugin_good_registers_every_kind", test_plugin_good_registers_every_kind},
        {"test_plugin_missing_file", test_plugin_missing_file},
        {"test_plugin_missing_entry", test_plugin_missing_entry},
        {"test_plugin_wrong_major", test_plugin_wrong_major},
        {"test_plugin_short_struct_size", test_plugin_short_struct_size},
        {"test_plugin_init_failure", test_plugin_init_failure},
        {"test_plugin_partial_rolls_back", test_plugin_partial_rolls_back},
        {"test_plugin_unresolved_symbol", test_plugin_unresolved_symbol},
        {"test_plugin_duplicate_component", test_plugin_duplicate_component},
        {"test_registry_find_index", test_registry_find_index},
        {"test_plugin_older_minor_loads", test_plugin_older_minor_loads},
        {"test_plugin_newer_minor_refused", test_plugin_newer_minor_refused},
        {"test_plugin_probe_missing_host_function", test_plugin_probe_missing_host_function},
        {"test_plugin_host_has", test_plugin_host_has},
        {"test_plugin_load_fault_injection", test_plugin_load_fault_injection},
        {NULL, NULL},
    };
    return kiln_test_run("plugin", cases);
}

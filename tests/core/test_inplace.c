/*
 * test_inplace.c - ProcessInplace (libkiln_mem_inplace.so, GE_SEMANTICS 5.2)
 * seen from the kernel: the plugin is loaded with kiln_plugin_load, run by
 * the pass manager on the golden inputs of tests/data/passes/ProcessInplace,
 * and the kernel's memory symbol table is compared before and after (GE
 * hybrid_mem_assigner_unittest: "symbol count - 1, the inplace output's
 * symbol disappears, the producer's symbol gains 2 anchors"), as are the
 * explanations and the error for a malformed _output_inplace_ability.
 */
#include "kiln_test.h"
#include "graph_int.h"
#include "graph_json.h"
#include "passctx.h"
#include "passmgr.h"
#include "plugin.h"
#include <stdio.h>
#include <string.h>

typedef struct fixture {
    kiln_ctx *ctx;
    kiln_graph *g;
    kiln_passmgr *pm;
    kiln_pass_inst pi; /* borrowed by the pass manager: must outlive it */
    kiln_error err;
} fixture;

/* Context with the plugins and the golden input @p name (NULL: @p json text). */
static void setup(fixture *f, const char *name, const char *json)
{
    memset(f, 0, sizeof(*f));
    f->ctx = kiln_ctx_create();
    CU_ASSERT_PTR_NOT_NULL_FATAL(f->ctx);
    CU_ASSERT_EQUAL_FATAL(kiln_test_load_plugin(f->ctx, "libkiln_mem_inplace.so", &f->err),
                          KILN_OK);
    CU_ASSERT_EQUAL_FATAL(
        kiln_test_load_plugin(f->ctx, "libkiln_mem_conflict_checkers.so", &f->err), KILN_OK);
    kiln_status st;
    if (name) {
        char path[1024];
        snprintf(path, sizeof(path), "%s/tests/data/passes/ProcessInplace/%s.in.json",
                 kiln_test_env("KILN_SOURCE_DIR", ".."), name);
        st = kiln_graph_read_json_file(f->ctx, path, &f->g, &f->err);
    } else {
        st = kiln_graph_read_json_string(f->ctx, json, strlen(json), "test", &f->g, &f->err);
    }
    if (st != KILN_OK)
        fprintf(stderr, "%s\n", kiln_error_message(&f->err));
    CU_ASSERT_EQUAL_FATAL(st, KILN_OK);
}

static kiln_status run_pass(fixture *f)
{
    memset(&f->pi, 0, sizeof(f->pi));
    f->pi.comp = kiln_registry_find(f->ctx, KILN_COMP_PASS, "ProcessInplace");
    f->pi.enabled = true;
    CU_ASSERT_PTR_NOT_NULL_FATAL(f->pi.comp);
    kiln_error_clear(&f->err);
    CU_ASSERT_EQUAL_FATAL(kiln__passmgr_create(f->ctx, NULL, &f->pm, &f->err), KILN_OK);
    return kiln__passmgr_run_stage(f->pm, "build", &f->pi, 1, f->g, &f->err);
}

static void teardown(fixture *f)
{
    kiln__passmgr_destroy(f->pm);
    kiln_graph_destroy(f->g);
    kiln_ctx_destroy(f->ctx);
}

static uint32_t symbol_count(kiln_graph *g)
{
    const kiln_symtab *st = NULL;
    kiln_error err;
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(kiln_symtab_get(g, &st, &err), KILN_OK);
    return kiln_symtab_count(st);
}

/* Symbol of output/input @p idx of the node named @p name, and its anchor count. */
static uint32_t symbol_of(kiln_graph *g, const char *name, uint32_t idx, bool out,
                          uint32_t *anchors)
{
    const kiln_symtab *st = NULL;
    kiln_error err;
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(kiln_symtab_get(g, &st, &err), KILN_OK);
    kiln_node_id n = kiln_graph_find_node(g, name);
    CU_ASSERT_FATAL(n != 0);
    uint32_t s = kiln_symtab_symbol(st, g, n, idx, out);
    CU_ASSERT_FATAL(s != KILN_SYMTAB_NONE);
    if (anchors)
        (void)kiln_symtab_anchors(st, s, anchors);
    return s;
}

static bool symbol_named(kiln_graph *g, const char *want)
{
    const kiln_symtab *st = NULL;
    kiln_error err;
    char buf[128];
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(kiln_symtab_get(g, &st, &err), KILN_OK);
    for (uint32_t s = 0; s < kiln_symtab_count(st); s++) {
        kiln_symtab_symbol_name(st, s, buf, sizeof(buf));
        if (strcmp(buf, want) == 0)
            return true;
    }
    return false;
}

static int64_t reuse_index(kiln_graph *g, const char *name, uint32_t o)
{
    kiln_node_id n = kiln_graph_find_node(g, name);
    const kiln_attrs *a = kiln_desc_attrs(kiln_node_output_desc(g, n, o));
    bool flag = false;
    int64_t k = -1;
    if (!kiln_attrs_get_bool(a, "reuse_input", &flag) || !flag)
        return -1;
    return kiln_attrs_get_int(a, "reuse_input_index", &k) ? k : -2;
}

/* The explanations of the run; *count receives their number. */
static const kiln_explanation *explanations(fixture *f, uint32_t *count)
{
    return kiln__passctx_explanations(kiln__passmgr_ctx(f->pm), count);
}

/* GE I1: one symbol fewer; add2's output symbol is gone, add1's gains 2 anchors. */
static void test_inplace_symbol_merge(void)
{
    fixture f;
    setup(&f, "I1_two_adds", NULL);
    uint32_t before = symbol_count(f.g), add1_before = 0, add1_after = 0;
    (void)symbol_of(f.g, "add1", 0, true, &add1_before);
    CU_ASSERT(symbol_named(f.g, "add2_out_0"));
    CU_ASSERT_NOT_EQUAL(symbol_of(f.g, "add2", 0, true, NULL),
                        symbol_of(f.g, "add1", 0, true, NULL));
    CU_ASSERT_EQUAL(run_pass(&f), KILN_OK);
    CU_ASSERT_EQUAL(reuse_index(f.g, "add2", 0), 1);
    CU_ASSERT_EQUAL(symbol_count(f.g), before - 1);
    CU_ASSERT_FALSE(symbol_named(f.g, "add2_out_0"));
    CU_ASSERT(symbol_named(f.g, "add1_out_0"));
    uint32_t s = symbol_of(f.g, "add1", 0, true, &add1_after);
    CU_ASSERT_EQUAL(add1_after, add1_before + 2);
    CU_ASSERT_EQUAL(symbol_of(f.g, "add2", 0, true, NULL), s);
    CU_ASSERT_EQUAL(symbol_of(f.g, "netoutput", 0, false, NULL), s);
    uint32_t n = 0;
    const kiln_explanation *e = explanations(&f, &n);
    CU_ASSERT_EQUAL_FATAL(n, 1);
    CU_ASSERT_STRING_EQUAL(e[0].node, "add2");
    CU_ASSERT_PTR_NOT_NULL(strstr(e[0].text, "output 0 reuses input 1"));
    CU_ASSERT_PTR_NOT_NULL(strstr(e[0].text, "add2_out_0 merged into add1_out_0"));
    teardown(&f);
}

/* A second run finds nothing to do: same symbols, no explanation. */
static void test_inplace_rerun_changes_nothing(void)
{
    fixture f;
    setup(&f, "claimed_input", NULL);
    uint32_t before = symbol_count(f.g);
    CU_ASSERT_EQUAL(run_pass(&f), KILN_OK);
    CU_ASSERT_EQUAL(reuse_index(f.g, "two", 0), 0);
    CU_ASSERT_EQUAL(reuse_index(f.g, "two", 1), 1);
    CU_ASSERT_EQUAL(symbol_count(f.g), before - 2);
    kiln__passmgr_destroy(f.pm);
    f.pm = NULL;
    uint64_t mut = kiln_graph_mutation(f.g);
    CU_ASSERT_EQUAL(run_pass(&f), KILN_OK);
    CU_ASSERT_EQUAL(kiln_graph_mutation(f.g), mut);
    uint32_t n = 0;
    (void)explanations(&f, &n);
    CU_ASSERT_EQUAL(n, 0);
    teardown(&f);
}

/* All-or-nothing: both tentative reuses reverted, symbols as before, 2 explanations. */
static void test_inplace_revert_all(void)
{
    fixture f;
    setup(&f, "revert_all_while", NULL);
    uint32_t before = symbol_count(f.g);
    CU_ASSERT_EQUAL(run_pass(&f), KILN_OK);
    CU_ASSERT_EQUAL(symbol_count(f.g), before);
    CU_ASSERT_EQUAL(reuse_index(f.g, "r2", 0), -1);
    kiln_node_id w = kiln_graph_find_node(f.g, "while");
    kiln_graph *body = NULL;
    for (uint32_t i = 0; i < kiln_node_subgraph_count(f.g, w); i++) {
        const char *role = NULL;
        kiln_graph *sg = kiln_node_subgraph(f.g, w, i, &role);
        if (strcmp(role, "body") == 0)
            body = sg;
    }
    CU_ASSERT_PTR_NOT_NULL_FATAL(body);
    CU_ASSERT_EQUAL(reuse_index(body, "cast2", 0), -1);
    CU_ASSERT_FALSE(kiln_attrs_has(
        kiln_desc_attrs(kiln_node_output_desc(body, kiln_graph_find_node(body, "cast2"), 0)),
        "reuse_input"));
    uint32_t n = 0;
    const kiln_explanation *e = explanations(&f, &n);
    CU_ASSERT_EQUAL_FATAL(n, 2);
    for (uint32_t i = 0; i < n; i++) {
        CU_ASSERT_PTR_NOT_NULL(strstr(e[i].text, "reverted"));
        CU_ASSERT_PTR_NOT_NULL(strstr(e[i].text, "While while"));
    }
    teardown(&f);
}

/* Filters that leave the symbol table alone. */
static void test_inplace_no_merge_cases(void)
{
    static const char *const cases[] = {"I3_variable_split",
                                        "I5_continuous_output",
                                        "reference_consumer",
                                        "not_last_consumer",
                                        "merge_conflict_continuous_out",
                                        "readonly_input",
                                        "ref_var_output",
                                        "already_shared"};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        fixture f;
        setup(&f, cases[i], NULL);
        uint32_t before = symbol_count(f.g);
        CU_ASSERT_EQUAL(run_pass(&f), KILN_OK);
        CU_ASSERT_EQUAL(symbol_count(f.g), before);
        uint32_t n = 0;
        (void)explanations(&f, &n);
        CU_ASSERT_EQUAL(n, 0);
        teardown(&f);
    }
}

static const char bad_pair[] =
    "{\"kiln_graph\": 1, \"name\": \"bad\", \"nodes\": ["
    "{\"name\": \"data\", \"type\": \"Data\", \"attrs\": {\"index\": 0}, "
    "\"outputs\": [{\"shape\": [4]}]},"
    "{\"name\": \"r0\", \"type\": \"Relu\", \"inputs\": [\"data\"], \"outputs\": [{\"shape\": "
    "[4]}]},"
    "{\"name\": \"odd\", \"type\": \"Relu\", \"inputs\": [\"r0\"], \"outputs\": [{\"shape\": [4]}],"
    " \"attrs\": {\"_output_inplace_ability\": [[0, 0], [0]]}},"
    "{\"name\": \"netoutput\", \"type\": \"NetOutput\", \"inputs\": [\"odd\"]}]}";

/* A non-pair entry fails the pass, naming the node; nothing is changed. */
static void test_inplace_non_pair_is_an_error(void)
{
    fixture f;
    setup(&f, NULL, bad_pair);
    CU_ASSERT_NOT_EQUAL(run_pass(&f), KILN_OK);
    const char *msg = kiln_error_message(&f.err);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "node odd"));
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "_output_inplace_ability entry 1"));
    CU_ASSERT_EQUAL(reuse_index(f.g, "odd", 0), -1);
    teardown(&f);
}

int main(void)
{
    static const kiln_test_case cases[] = {
        {"test_inplace_symbol_merge", test_inplace_symbol_merge},
        {"test_inplace_rerun_changes_nothing", test_inplace_rerun_changes_nothing},
        {"test_inplace_revert_all", test_inplace_revert_all},
        {"test_inplace_no_merge_cases", test_inplace_no_merge_cases},
        {"test_inplace_non_pair_is_an_error", test_inplace_non_pair_is_an_error},
        {NULL, NULL},
    };
    return kiln_test_run("inplace", cases);
}

/*
 * test_checkers_coverage.c - GE's conditional memory-layout-conflict checkers
 * (libkiln_mem_conflict_checkers.so, GE_SEMANTICS.md 3.6) decided on small
 * graphs whose symbols come from the kernel's symbol table, in the cases a
 * golden HandleMemoryLayoutConflict test cannot reach:
 *
 *   - the decision depends on graph-info bits a golden case cannot set
 *     (feature map refreshable: ge.featureBaseRefreshable; physical refresh:
 *     ge.exec.staticMemoryPolicy = 4; dynamic root / offline build);
 *   - the pass would hide the decision (UserInputAndNotSupportedAddress-
 *     RefreshOutput's Assign rule isolates the same anchor as the absolute
 *     conflict USER_MEMORY_INPUT x UNSUPPORTED_..._INPUT);
 *   - a kiln-only fallback no GE graph shape in the golden set exercises.
 *
 * Each assertion states the anchor the rule must isolate, or none.  The
 * table "Checker coverage" in docs/memory_layout_conflict.md maps every
 * checker to these tests and to the golden cases.
 */
#include "kiln_test.h"
#include "graph_int.h"
#include "graph_json.h"
#include "plugin.h"
#include <stdio.h>
#include <string.h>

#define AA(x) KILN_AA_##x
#define UIN AA(UNSUPPORTED_ADDRESS_REFRESH_OPERATOR_INPUT)
#define UOUT AA(UNSUPPORTED_ADDRESS_REFRESH_OPERATOR_OUTPUT)
#define GI_FM KILN_GI_FEATURE_MAP_REFRESHABLE
#define GI_PHYS KILN_GI_PHYSICAL_MEMORY_REFRESHABLE
#define GI_STATIC KILN_GI_ROOT_GRAPH_STATIC
#define GI_NOPAD_OK KILN_GI_USER_INPUT_NOPADDING_OUTPUT_OK

typedef struct fixture {
    kiln_ctx *ctx;
    kiln_graph *g;
    const kiln_symtab *st;
    kiln_checker_result *r;
    kiln_error err;
    kiln_mem_anchor sym[64];
} fixture;

/* Load the checker plugin and the graph @p json, and build its symbol table. */
static bool setup(fixture *f, const char *json)
{
    memset(f, 0, sizeof(*f));
    kiln_error_clear(&f->err);
    f->ctx = kiln_ctx_create();
    if (!f->ctx ||
        kiln_test_load_plugin(f->ctx, "libkiln_mem_conflict_checkers.so", &f->err) != KILN_OK)
        return false;
    if (kiln_graph_read_json_string(f->ctx, json, strlen(json), "test", &f->g, &f->err) != KILN_OK)
        return false;
    f->r = kiln_checker_result_create();
    return f->r && kiln_symtab_get(f->g, &f->st, &f->err) == KILN_OK;
}

static void teardown(fixture *f)
{
    kiln_checker_result_destroy(f->r);
    kiln_graph_destroy(f->g);
    kiln_ctx_destroy(f->ctx);
}

/* Anchor "<node>" output/input @p index of the root graph. */
static kiln_mem_anchor out_(fixture *f, const char *node, uint32_t index)
{
    kiln_node_id n = kiln_graph_find_node(f->g, node);
    CU_ASSERT_FATAL(n != 0);
    return (kiln_mem_anchor){f->g, n, index, 1};
}

static kiln_mem_anchor in_(fixture *f, const char *node, uint32_t index)
{
    kiln_node_id n = kiln_graph_find_node(f->g, node);
    CU_ASSERT_FATAL(n != 0);
    return (kiln_mem_anchor){f->g, n, index, 0};
}

/*
 * Run the checker of (ta, tb) on anchors a, b with graph info @p gi; the
 * symbol is a's symbol of the kernel's table (b must be in it, as in the
 * pass).  Returns the number of anchors isolated, -1 on error.
 */
static int run(fixture *f, uint32_t gi, kiln_mem_anchor a, kiln_anchor_attr ta, kiln_mem_anchor b,
               kiln_anchor_attr tb)
{
    uint32_t sa = kiln_symtab_symbol(f->st, a.graph, a.node, a.index, a.is_output != 0);
    uint32_t sb = kiln_symtab_symbol(f->st, b.graph, b.node, b.index, b.is_output != 0);
    CU_ASSERT_EQUAL(sa, sb);
    uint32_t cnt = 0, k = 0;
    const kiln_symtab_anchor *sym = kiln_symtab_anchors(f->st, sa, &cnt);
    for (uint32_t i = 0; i < cnt && k < 64; i++)
        f->sym[k++] = (kiln_mem_anchor){kiln_symtab_graph(f->st, sym[i].graph), sym[i].node,
                                        sym[i].index, sym[i].is_output};
    kiln_checker_query q = {sizeof(q), gi, f->g, a, b, ta, tb, f->sym, k};
    kiln_status st = kiln_checker_run(f->g, &q, f->r, &f->err);
    CU_ASSERT_EQUAL(st, KILN_OK);
    return st == KILN_OK ? (int)kiln_checker_result_count(f->r) : -1;
}

/* The result holds exactly @p want. */
static bool isolated(const fixture *f, kiln_mem_anchor want)
{
    const kiln_mem_anchor *x = kiln_checker_result_anchor(f->r, 0);
    return kiln_checker_result_count(f->r) == 1 && x && x->graph == want.graph &&
           x->node == want.node && x->index == want.index && x->is_output == want.is_output;
}

#define S4 "{\"shape\":[4]}"
#define R4 "{\"shape\":[4],\"ref_input\":0}"

/* data -> swt (StreamSwitch, out refs in 0) -> a -> netoutput; swt -> netoutput too. */
static const char *const g_switch =
    "{\"kiln_graph\":1,\"name\":\"sw\",\"nodes\":["
    "{\"name\":\"data\",\"type\":\"Data\",\"outputs\":[" S4 "],\"attrs\":{\"index\":0}},"
    "{\"name\":\"swt\",\"type\":\"StreamSwitch\",\"inputs\":[\"data\"],\"outputs\":[" R4 "]},"
    "{\"name\":\"a\",\"type\":\"Relu\",\"inputs\":[\"swt\"],\"outputs\":[" S4 "]},"
    "{\"name\":\"netoutput\",\"type\":\"NetOutput\",\"inputs\":[\"a\",\"swt\"],\"outputs\":[]}]}";

/* x -> hb (HcomBroadcast, out refs in 0) -> a */
static const char *const g_hcom =
    "{\"kiln_graph\":1,\"name\":\"hb\",\"nodes\":["
    "{\"name\":\"data\",\"type\":\"Data\",\"outputs\":[" S4 "],\"attrs\":{\"index\":0}},"
    "{\"name\":\"x\",\"type\":\"Relu\",\"inputs\":[\"data\"],\"outputs\":[" S4 "]},"
    "{\"name\":\"hb\",\"type\":\"HcomBroadcast\",\"inputs\":[\"x\"],\"outputs\":[" R4 "]},"
    "{\"name\":\"a\",\"type\":\"Relu\",\"inputs\":[\"hb\"],\"outputs\":[" S4 "]},"
    "{\"name\":\"netoutput\",\"type\":\"NetOutput\",\"inputs\":[\"a\"],\"outputs\":[]}]}";

/* NotSupportRefreshInput: gate (FM not refreshable, no physical problem) -> none; else the
 * unrefreshable input. */
static void test_not_support_refresh_input(void)
{
    fixture f;
    CU_ASSERT_FATAL(setup(&f, g_switch));
    kiln_mem_anchor d = out_(&f, "data", 0), sw_in = in_(&f, "swt", 0);
    kiln_mem_anchor a_in = in_(&f, "a", 0);
    /* no conflict: fixed feature map, no physical-refresh policy */
    CU_ASSERT_EQUAL(run(&f, GI_STATIC, d, AA(NORMAL_OUTPUT), sw_in, UIN), 0);
    CU_ASSERT_EQUAL(run(&f, GI_STATIC, sw_in, UIN, a_in, AA(NORMAL_INPUT)), 0);
    /* conflict: feature map refreshable -> Identity before the StreamSwitch input */
    CU_ASSERT_EQUAL(run(&f, GI_STATIC | GI_FM, d, AA(NORMAL_OUTPUT), sw_in, UIN), 1);
    CU_ASSERT(isolated(&f, sw_in));
    /* conflict: physical policy + StreamSwitch (no physical refresh) */
    CU_ASSERT_EQUAL(run(&f, GI_STATIC | GI_PHYS, sw_in, UIN, a_in, AA(NORMAL_INPUT)), 1);
    CU_ASSERT(isolated(&f, sw_in));
    teardown(&f);

    /* HcomBroadcast can refresh physical addresses: the physical policy alone is no conflict */
    CU_ASSERT_FATAL(setup(&f, g_hcom));
    kiln_mem_anchor x = out_(&f, "x", 0), hb_in = in_(&f, "hb", 0);
    CU_ASSERT_EQUAL(run(&f, GI_STATIC | GI_PHYS, x, AA(NORMAL_OUTPUT), hb_in, UIN), 0);
    CU_ASSERT_EQUAL(run(&f, GI_STATIC | GI_FM, x, AA(NORMAL_OUTPUT), hb_in, UIN), 1);
    CU_ASSERT(isolated(&f, hb_in));
    teardown(&f);
}

/* NotsupportedRefreshOutput: same gate; else the unrefreshable output. */
static void test_not_supported_refresh_output(void)
{
    fixture f;
    CU_ASSERT_FATAL(setup(&f, g_switch));
    kiln_mem_anchor sw_out = out_(&f, "swt", 0), a_in = in_(&f, "a", 0);
    CU_ASSERT_EQUAL(run(&f, GI_STATIC, sw_out, UOUT, a_in, AA(NORMAL_INPUT)), 0);
    CU_ASSERT_EQUAL(run(&f, GI_STATIC | GI_FM, a_in, AA(NORMAL_INPUT), sw_out, UOUT), 1);
    CU_ASSERT(isolated(&f, sw_out));
    CU_ASSERT_EQUAL(run(&f, GI_STATIC | GI_PHYS, sw_out, UOUT, a_in, AA(NORMAL_INPUT)), 1);
    CU_ASSERT(isolated(&f, sw_out));
    teardown(&f);

    CU_ASSERT_FATAL(setup(&f, g_hcom));
    kiln_mem_anchor hb_out = out_(&f, "hb", 0), ha_in = in_(&f, "a", 0);
    CU_ASSERT_EQUAL(run(&f, GI_STATIC | GI_PHYS, hb_out, UOUT, ha_in, AA(NORMAL_INPUT)), 0);
    teardown(&f);
}

/* UserInputAndNotSupportedAddressRefreshOutput: Assign rule; else refreshable/physical ->
 * the unrefreshable output; else the Data's output.  (No no-conflict outcome.) */
static void test_user_in_unrefresh_out(void)
{
    fixture f;
    CU_ASSERT_FATAL(setup(&f, g_switch));
    kiln_mem_anchor d = out_(&f, "data", 0), sw_out = out_(&f, "swt", 0);
    CU_ASSERT_EQUAL(run(&f, GI_STATIC, d, AA(USER_MEMORY_INPUT), sw_out, UOUT), 1);
    CU_ASSERT(isolated(&f, d));
    CU_ASSERT_EQUAL(run(&f, GI_STATIC | GI_PHYS, sw_out, UOUT, d, AA(USER_MEMORY_INPUT)), 1);
    CU_ASSERT(isolated(&f, sw_out));
    teardown(&f);

    /* refdata -> assign -> swt: insert after the Assign (swt_in_0), whatever the graph info */
    static const char *const g_assign =
        "{\"kiln_graph\":1,\"name\":\"as\",\"nodes\":["
        "{\"name\":\"refdata\",\"type\":\"RefData\",\"outputs\":[" S4 "],\"attrs\":{\"index\":0}},"
        "{\"name\":\"const\",\"type\":\"Const\",\"outputs\":[" S4 "]},"
        "{\"name\":\"assign\",\"type\":\"Assign\",\"inputs\":[\"refdata\",\"const\"],"
        "\"outputs\":[" R4 "]},"
        "{\"name\":\"swt\",\"type\":\"StreamSwitch\",\"inputs\":[\"assign\"],\"outputs\":[" R4 "]},"
        "{\"name\":\"a\",\"type\":\"Relu\",\"inputs\":[\"swt\"],\"outputs\":[" S4 "]},"
        "{\"name\":\"netoutput\",\"type\":\"NetOutput\",\"inputs\":[\"a\"],\"outputs\":[]}]}";
    CU_ASSERT_FATAL(setup(&f, g_assign));
    kiln_mem_anchor rd = out_(&f, "refdata", 0), s_out = out_(&f, "swt", 0);
    kiln_mem_anchor s_in = in_(&f, "swt", 0);
    CU_ASSERT_EQUAL(run(&f, GI_STATIC, rd, AA(USER_MEMORY_INPUT), s_out, UOUT), 1);
    CU_ASSERT(isolated(&f, s_in));
    CU_ASSERT_EQUAL(run(&f, GI_STATIC | GI_FM, s_out, UOUT, rd, AA(USER_MEMORY_INPUT)), 1);
    CU_ASSERT(isolated(&f, s_in));
    teardown(&f);
}

/* UserOutputAndNotSupportedAddressRefreshInput / Output: refreshable or physical -> the
 * unrefreshable anchor; else the NetOutput input.  (No no-conflict outcome.) */
static void test_user_out_unrefresh(void)
{
    fixture f;
    CU_ASSERT_FATAL(setup(&f, g_switch));
    kiln_mem_anchor sw_in = in_(&f, "swt", 0), sw_out = out_(&f, "swt", 0);
    kiln_mem_anchor no_in = in_(&f, "netoutput", 1);
    CU_ASSERT_EQUAL(run(&f, GI_STATIC, sw_in, UIN, no_in, AA(USER_MEMORY_OUTPUT)), 1);
    CU_ASSERT(isolated(&f, no_in));
    CU_ASSERT_EQUAL(run(&f, GI_STATIC | GI_PHYS, no_in, AA(USER_MEMORY_OUTPUT), sw_in, UIN), 1);
    CU_ASSERT(isolated(&f, sw_in));
    CU_ASSERT_EQUAL(run(&f, GI_STATIC, sw_out, UOUT, no_in, AA(USER_MEMORY_OUTPUT)), 1);
    CU_ASSERT(isolated(&f, no_in));
    CU_ASSERT_EQUAL(run(&f, GI_STATIC | GI_PHYS, sw_out, UOUT, no_in, AA(USER_MEMORY_OUTPUT)), 1);
    CU_ASSERT(isolated(&f, sw_out));
    CU_ASSERT_EQUAL(run(&f, GI_STATIC | GI_FM, sw_out, UOUT, no_in, AA(USER_MEMORY_OUTPUT)), 1);
    CU_ASSERT(isolated(&f, sw_out));
    teardown(&f);
}

/* UserInputAndNoPaddingContinuousOutput: supported (online, not single-op) -> none; else
 * the Assign rule or the Data's output.  The offline build (ge.buildGraphMode=offline) is
 * the graph-info bit cleared with no graph attr. */
static void test_user_in_nopad_out(void)
{
    static const char *const g_ps =
        "{\"kiln_graph\":1,\"name\":\"ps\",\"nodes\":["
        "{\"name\":\"data\",\"type\":\"Data\",\"outputs\":[" S4 "],\"attrs\":{\"index\":0}},"
        "{\"name\":\"ps\",\"type\":\"PhonySplit\",\"inputs\":[\"data\"],\"outputs\":[" S4 "," S4
        "],\"attrs\":{\"_no_padding_continuous_output\":true}},"
        "{\"name\":\"a\",\"type\":\"Add\",\"inputs\":[\"ps:0\",\"ps:1\"],\"outputs\":[" S4 "]},"
        "{\"name\":\"netoutput\",\"type\":\"NetOutput\",\"inputs\":[\"a\"],\"outputs\":[]}]}";
    fixture f;
    CU_ASSERT_FATAL(setup(&f, g_ps));
    kiln_mem_anchor d = out_(&f, "data", 0), ps1 = out_(&f, "ps", 1);
    CU_ASSERT_EQUAL(run(&f, GI_STATIC | GI_NOPAD_OK, d, AA(USER_MEMORY_INPUT), ps1,
                        AA(NOPADDING_CONTINUOUS_OUTPUT)),
                    0);
    CU_ASSERT_EQUAL(
        run(&f, GI_STATIC, ps1, AA(NOPADDING_CONTINUOUS_OUTPUT), d, AA(USER_MEMORY_INPUT)), 1);
    CU_ASSERT(isolated(&f, d));
    teardown(&f);
}

/* UserMemoryOutputAndImmutableOutput: only a static root can conflict; a variable-like
 * producer never does. */
static void test_user_out_immutable(void)
{
    static const char *const g_c =
        "{\"kiln_graph\":1,\"name\":\"c\",\"nodes\":["
        "{\"name\":\"const\",\"type\":\"Const\",\"outputs\":[" S4 "]},"
        "{\"name\":\"var\",\"type\":\"Variable\",\"outputs\":[" S4 "]},"
        "{\"name\":\"netoutput\",\"type\":\"NetOutput\",\"inputs\":[\"const\",\"var\"],"
        "\"outputs\":[]}]}";
    fixture f;
    CU_ASSERT_FATAL(setup(&f, g_c));
    kiln_mem_anchor c = out_(&f, "const", 0), v = out_(&f, "var", 0);
    kiln_mem_anchor n0 = in_(&f, "netoutput", 0), n1 = in_(&f, "netoutput", 1);
    const kiln_anchor_attr IMM = AA(IMMUTABLE_ADDRESS_OUTPUT), UO = AA(USER_MEMORY_OUTPUT);
    CU_ASSERT_EQUAL(run(&f, GI_FM, c, IMM, n0, UO), 0); /* dynamic root */
    CU_ASSERT_EQUAL(run(&f, GI_STATIC, c, IMM, n0, UO), 1);
    CU_ASSERT(isolated(&f, n0));
    CU_ASSERT_EQUAL(run(&f, GI_STATIC, n1, UO, v, IMM), 0);
    teardown(&f);
}

/* ImmutableOutputAndContinuousOutput, kiln's fallback: the continuous-output node shares
 * the variable's memory through ref_var_src_var_name, not through an input of the symbol,
 * so there is no ref-node input to copy into: the variable's output is isolated. */
static void test_immutable_cont_out_fallback(void)
{
    static const char *const g_v =
        "{\"kiln_graph\":1,\"name\":\"v\",\"nodes\":["
        "{\"name\":\"var\",\"type\":\"Variable\",\"outputs\":[" S4 "]},"
        "{\"name\":\"data\",\"type\":\"Data\",\"outputs\":[" S4 "],\"attrs\":{\"index\":0}},"
        "{\"name\":\"x\",\"type\":\"Relu\",\"inputs\":[\"data\"],\"outputs\":[" S4 "]},"
        "{\"name\":\"split\",\"type\":\"Split\",\"inputs\":[\"x\"],\"outputs\":["
        "{\"shape\":[4],\"attrs\":{\"ref_var_src_var_name\":\"var\"}}," S4
        "],\"attrs\":{\"continuous_output\":true}},"
        "{\"name\":\"a\",\"type\":\"Add\",\"inputs\":[\"split:0\",\"split:1\",\"var\"],"
        "\"outputs\":[" S4 "]},"
        "{\"name\":\"netoutput\",\"type\":\"NetOutput\",\"inputs\":[\"a\"],\"outputs\":[]}]}";
    fixture f;
    CU_ASSERT_FATAL(setup(&f, g_v));
    kiln_mem_anchor v = out_(&f, "var", 0), s0 = out_(&f, "split", 0);
    CU_ASSERT_EQUAL(run(&f, GI_STATIC, v, AA(IMMUTABLE_ADDRESS_OUTPUT), s0, AA(CONTINUOUS_OUTPUT)),
                    1);
    CU_ASSERT(isolated(&f, v));
    teardown(&f);
}

int main(void)
{
    static const kiln_test_case cases[] = {
        {"test_not_support_refresh_input", test_not_support_refresh_input},
        {"test_not_supported_refresh_output", test_not_supported_refresh_output},
        {"test_user_in_unrefresh_out", test_user_in_unrefresh_out},
        {"test_user_out_unrefresh", test_user_out_unrefresh},
        {"test_user_in_nopad_out", test_user_in_nopad_out},
        {"test_user_out_immutable", test_user_out_immutable},
        {"test_immutable_cont_out_fallback", test_immutable_cont_out_fallback},
        {NULL, NULL},
    };
    return kiln_test_run("checkers_coverage", cases);
}

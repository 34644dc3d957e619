/*
 * test_checker.c - the checker registry: every row of GE's absolutely-no-
 * conflict and absolutely-conflict tables (seed ge-memory-conflict-handling
 * 3.3.2), symmetry, and registration of conditional checkers by plugins.
 */
#include "kiln_test.h"
#include "checker.h"
#include "plugin.h"

#define AA(x) KILN_AA_##x

static void test_checker_never_table(void)
{
    kiln_ctx *ctx = kiln_ctx_create();
    static const kiln_anchor_attr rows[][2] = {
        {AA(RTS_SPECIAL_TYPE_INPUT), AA(NORMAL_OUTPUT)},
        {AA(USER_MEMORY_OUTPUT), AA(USER_MEMORY_OUTPUT)},
        {AA(USER_MEMORY_INPUT), AA(USER_MEMORY_OUTPUT)},
    };
    for (unsigned i = 0; i < KILN_ARRAY_LEN(rows); i++) {
        CU_ASSERT_EQUAL(kiln_checker_class(ctx, rows[i][0], rows[i][1]), KILN_CONFLICT_NEVER);
        CU_ASSERT_EQUAL(kiln_checker_class(ctx, rows[i][1], rows[i][0]), KILN_CONFLICT_NEVER);
    }
    /* REFERENCE_OUTPUT never conflicts, with anything, on either side */
    for (unsigned t = 0; t < KILN_AA_COUNT; t++) {
        CU_ASSERT_EQUAL(kiln_checker_class(ctx, AA(REFERENCE_OUTPUT), t), KILN_CONFLICT_NEVER);
        CU_ASSERT_EQUAL(kiln_checker_class(ctx, t, AA(REFERENCE_OUTPUT)), KILN_CONFLICT_NEVER);
    }
    kiln_ctx_destroy(ctx);
}

static void test_checker_always_table(void)
{
    kiln_ctx *ctx = kiln_ctx_create();
    static const kiln_anchor_attr rows[][2] = {
        {AA(USER_MEMORY_INPUT), AA(UNSUPPORTED_ADDRESS_REFRESH_OPERATOR_INPUT)},
        {AA(USER_MEMORY_INPUT), AA(RTS_SPECIAL_TYPE_INPUT)},
        {AA(USER_MEMORY_OUTPUT), AA(RTS_SPECIAL_TYPE_INPUT)},
        {AA(USER_MEMORY_OUTPUT), AA(RTS_SPECIAL_TYPE_OUTPUT)},
        {AA(USER_MEMORY_OUTPUT), AA(CONTINUOUS_OUTPUT)},
        {AA(USER_MEMORY_OUTPUT), AA(NOPADDING_CONTINUOUS_OUTPUT)},
        {AA(IMMUTABLE_ADDRESS_OUTPUT), AA(RTS_SPECIAL_TYPE_INPUT)},
        {AA(IMMUTABLE_ADDRESS_OUTPUT), AA(CONTINUOUS_INPUT)},
        {AA(CONTINUOUS_INPUT), AA(NOPADDING_CONTINUOUS_OUTPUT)},
        {AA(CONTINUOUS_OUTPUT), AA(NOPADDING_CONTINUOUS_INPUT)},
    };
    unsigned always = 0, never = 0;
    for (unsigned i = 0; i < KILN_ARRAY_LEN(rows); i++) {
        CU_ASSERT_EQUAL(kiln_checker_class(ctx, rows[i][0], rows[i][1]), KILN_CONFLICT_ALWAYS);
        CU_ASSERT_EQUAL(kiln_checker_class(ctx, rows[i][1], rows[i][0]), KILN_CONFLICT_ALWAYS);
    }
    /* nothing else is unconditional: 10 symmetric pairs, 3 + REFERENCE row/col */
    for (unsigned a = 0; a < KILN_AA_COUNT; a++)
        for (unsigned b = 0; b < KILN_AA_COUNT; b++) {
            kiln_conflict_class c = kiln_checker_class(ctx, a, b);
            always += c == KILN_CONFLICT_ALWAYS;
            never += c == KILN_CONFLICT_NEVER;
            CU_ASSERT_EQUAL(c, kiln_checker_class(ctx, b, a));
        }
    CU_ASSERT_EQUAL(always, 20);
    CU_ASSERT_EQUAL(
        never, 27 + 5); /* reference row+col (27) + {RTS_IN,NORMAL_OUT}x2, {UO,UO}, {UI,UO}x2 */
    CU_ASSERT_STRING_EQUAL(kiln_anchor_attr_name(AA(NOPADDING_CONTINUOUS_INPUT)),
                           "NOPADDING_CONTINUOUS_INPUT");
    kiln_ctx_destroy(ctx);
}

static kiln_status isolate_a(const kiln_checker_query *q, kiln_checker_result *r)
{
    kiln_checker_reason(r, "test");
    return kiln_checker_isolate(r, &q->a);
}

static const kiln_attr_pair cont_pairs[] = {{AA(CONTINUOUS_INPUT), AA(CONTINUOUS_OUTPUT)},
                                            {AA(CONTINUOUS_OUTPUT), AA(CONTINUOUS_OUTPUT)}};
static const kiln_attr_pair clash_pairs[] = {{AA(CONTINUOUS_OUTPUT), AA(CONTINUOUS_INPUT)}};
static const kiln_attr_pair bad_pairs[] = {{AA(USER_MEMORY_OUTPUT), AA(CONTINUOUS_OUTPUT)}};

static kiln_status reg_init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)h;
    (void)e;
    static const kiln_checker_desc d = {
        sizeof(kiln_checker_desc), "ContTest", "t", 0, 2, cont_pairs, isolate_a, {0}};
    return kiln_register_checker(r, &d);
}
static kiln_status clash_init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)h;
    (void)e;
    static const kiln_checker_desc d = {
        sizeof(kiln_checker_desc), "ClashTest", "t", 0, 1, clash_pairs, isolate_a, {0}};
    return kiln_register_checker(r, &d);
}
static kiln_status bad_init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)h;
    (void)e;
    static const kiln_checker_desc d = {
        sizeof(kiln_checker_desc), "BadTest", "t", 0, 1, bad_pairs, isolate_a, {0}};
    return kiln_register_checker(r, &d);
}

static kiln_plugin_desc
plugin(const char *name, kiln_status (*init)(const kiln_host_api *, kiln_registrar *, kiln_error *))
{
    kiln_plugin_desc d = {sizeof(kiln_plugin_desc),
                          KILN_ABI_MAJOR,
                          KILN_ABI_MINOR,
                          name,
                          "1",
                          "MIT",
                          "t",
                          "t",
                          init,
                          NULL,
                          {0}};
    return d;
}

static void test_checker_conditional_registration(void)
{
    kiln_ctx *ctx = kiln_ctx_create();
    kiln_error err;
    kiln_error_clear(&err);
    kiln_plugin_desc p1 = plugin("p1", reg_init), p2 = plugin("p2", clash_init),
                     p3 = plugin("p3", bad_init);
    CU_ASSERT_PTR_NULL(kiln_checker_lookup(ctx, AA(CONTINUOUS_OUTPUT), AA(CONTINUOUS_INPUT)));
    CU_ASSERT_EQUAL_FATAL(kiln_plugin_register_static(ctx, &p1, NULL, &err), KILN_OK);
    const kiln_component *c = kiln_registry_find(ctx, KILN_COMP_CHECKER, "ContTest");
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    /* registered symmetrically for both declared pairs */
    CU_ASSERT_PTR_EQUAL(kiln_checker_lookup(ctx, AA(CONTINUOUS_OUTPUT), AA(CONTINUOUS_INPUT)), c);
    CU_ASSERT_PTR_EQUAL(kiln_checker_lookup(ctx, AA(CONTINUOUS_INPUT), AA(CONTINUOUS_OUTPUT)), c);
    CU_ASSERT_PTR_EQUAL(kiln_checker_lookup(ctx, AA(CONTINUOUS_OUTPUT), AA(CONTINUOUS_OUTPUT)), c);
    CU_ASSERT_EQUAL(kiln_checker_class(ctx, AA(CONTINUOUS_OUTPUT), AA(CONTINUOUS_INPUT)),
                    KILN_CONFLICT_CONDITIONAL);
    /* the checker decides through the public result API */
    kiln_checker_query q = {sizeof(q),
                            0,
                            NULL,
                            {NULL, 3, 1, 1},
                            {NULL, 4, 0, 0},
                            AA(CONTINUOUS_OUTPUT),
                            AA(CONTINUOUS_INPUT),
                            NULL,
                            0};
    kiln_checker_result r = {0};
    CU_ASSERT_EQUAL(c->d.checker.check(&q, &r), KILN_OK);
    CU_ASSERT_EQUAL(r.count, 1);
    CU_ASSERT_EQUAL(r.anchors[0].node, 3);
    CU_ASSERT_STRING_EQUAL(r.reason, "test");
    kiln__checker_result_free(&r);
    /* a second checker for the same (swapped) pair is a duplicate */
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(kiln_plugin_register_static(ctx, &p2, NULL, &err), KILN_ERR_DUPLICATE);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "already has checker ContTest"));
    CU_ASSERT_PTR_NULL(kiln_registry_find(ctx, 0, "ClashTest"));
    /* unconditional pairs cannot get a checker */
    kiln_error_clear(&err);
    CU_ASSERT_NOT_EQUAL(kiln_plugin_register_static(ctx, &p3, NULL, &err), KILN_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "unconditional"));
    CU_ASSERT_EQUAL(kiln_checker_class(ctx, AA(USER_MEMORY_OUTPUT), AA(CONTINUOUS_OUTPUT)),
                    KILN_CONFLICT_ALWAYS);
    kiln_ctx_destroy(ctx);
}

int main(void)
{
    static const kiln_test_case cases[] = {
        {"test_checker_never_table", test_checker_never_table},
        {"test_checker_always_table", test_checker_always_table},
        {"test_checker_conditional_registration", test_checker_conditional_registration},
        {NULL, NULL},
    };
    return kiln_test_run("checker", cases);
}

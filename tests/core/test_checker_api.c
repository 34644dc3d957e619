/*
 * test_checker_api.c - the public checker lookups passes use
 * (kiln_component.h: kiln_checker_classify / _find / _run / _result_*), and
 * GE's conditional checkers of libkiln_mem_conflict_checkers.so run through
 * them on small graphs under the graph-info bits the golden tests cannot
 * set (feature map refreshable, dynamic root, physical refresh).
 */
#include "kiln_test.h"
#include "checker.h"
#include "graph_int.h"
#include "plugin.h"
#include <stdio.h>

#define AA(x) KILN_AA_##x

static kiln_status isolate_b(const kiln_checker_query *q, kiln_checker_result *r)
{
    kiln_checker_reason(r, "rule %u", (unsigned)q->type_a);
    return kiln_checker_isolate(r, &q->b);
}

static kiln_status failing(const kiln_checker_query *q, kiln_checker_result *r)
{
    (void)q;
    (void)r;
    return KILN_ERR_INVALID;
}

static const kiln_attr_pair t_pairs[] = {{AA(CONTINUOUS_INPUT), AA(CONTINUOUS_INPUT)}};
static const kiln_attr_pair f_pairs[] = {{AA(RTS_SPECIAL_TYPE_INPUT), AA(RTS_SPECIAL_TYPE_INPUT)}};

static kiln_status t_init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)h;
    (void)e;
    static const kiln_checker_desc d = {sizeof(kiln_checker_desc),
                                        "ApiTest",
                                        "t",
                                        KILN_CHECKER_CALL_AS_SYMBOL,
                                        1,
                                        t_pairs,
                                        isolate_b,
                                        {0}};
    static const kiln_checker_desc f = {
        sizeof(kiln_checker_desc), "ApiFail", "t", 0, 1, f_pairs, failing, {0}};
    kiln_status st = kiln_register_checker(r, &d);
    return st == KILN_OK ? kiln_register_checker(r, &f) : st;
}

static void test_checker_api_lookups(void)
{
    kiln_ctx *ctx = kiln_ctx_create();
    kiln_graph *g = kiln_graph_create(ctx, "g");
    kiln_error err_obj, *err = &err_obj;
    kiln_error_clear(err);
    /* classify mirrors the kernel table, symmetric, NEVER out of range */
    for (unsigned a = 0; a < KILN_AA_COUNT; a++)
        for (unsigned b = 0; b < KILN_AA_COUNT; b++) {
            CU_ASSERT_EQUAL(kiln_checker_classify(g, a, b), kiln_checker_class(ctx, a, b));
            CU_ASSERT_EQUAL(kiln_checker_classify(g, a, b), kiln_checker_classify(g, b, a));
        }
    CU_ASSERT_EQUAL(kiln_checker_classify(g, AA(USER_MEMORY_OUTPUT), AA(CONTINUOUS_OUTPUT)),
                    KILN_CONFLICT_ALWAYS);
    CU_ASSERT_EQUAL(kiln_checker_classify(g, (kiln_anchor_attr)99, AA(NORMAL_INPUT)),
                    KILN_CONFLICT_NEVER);
    CU_ASSERT_EQUAL(kiln_checker_classify(NULL, AA(CONTINUOUS_INPUT), AA(CONTINUOUS_INPUT)),
                    KILN_CONFLICT_NEVER);
    CU_ASSERT_STRING_EQUAL(kiln_anchor_attr_name(AA(REFERENCE_OUTPUT)), "REFERENCE_OUTPUT");
    uint32_t flags = 7;
    CU_ASSERT_PTR_NULL(kiln_checker_find(g, AA(CONTINUOUS_INPUT), AA(CONTINUOUS_INPUT), &flags));
    CU_ASSERT_EQUAL(flags, 0);

    kiln_plugin_desc p = {sizeof(kiln_plugin_desc),
                          KILN_ABI_MAJOR,
                          KILN_ABI_MINOR,
                          "api",
                          "1",
                          "MIT",
                          "t",
                          "t",
                          t_init,
                          NULL,
                          {0}};
    CU_ASSERT_EQUAL_FATAL(kiln_plugin_register_static(ctx, &p, NULL, err), KILN_OK);
    CU_ASSERT_STRING_EQUAL(kiln_checker_find(g, AA(CONTINUOUS_INPUT), AA(CONTINUOUS_INPUT), &flags),
                           "ApiTest");
    CU_ASSERT_EQUAL(flags, KILN_CHECKER_CALL_AS_SYMBOL);

    kiln_checker_result *r = kiln_checker_result_create();
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    kiln_mem_anchor sym[2] = {{g, 1, 0, 1}, {g, 2, 1, 0}};
    kiln_checker_query q = {
        sizeof(q), 0, g, sym[0], sym[1], AA(CONTINUOUS_INPUT), AA(CONTINUOUS_INPUT), sym, 2};
    CU_ASSERT_EQUAL(kiln_checker_run(g, &q, r, err), KILN_OK);
    CU_ASSERT_EQUAL(kiln_checker_result_count(r), 1);
    CU_ASSERT_EQUAL(kiln_checker_result_anchor(r, 0)->node, 2);
    CU_ASSERT_PTR_NULL(kiln_checker_result_anchor(r, 1));
    CU_ASSERT_STRING_EQUAL(kiln_checker_result_reason(r), "rule 5");
    /* no checker for a conditional pair: NOT_FOUND, result cleared */
    q.type_a = q.type_b = AA(NORMAL_INPUT);
    CU_ASSERT_EQUAL(kiln_checker_run(g, &q, r, err), KILN_ERR_NOT_FOUND);
    CU_ASSERT_EQUAL(kiln_checker_result_count(r), 0);
    CU_ASSERT_STRING_EQUAL(kiln_checker_result_reason(r), "");
    /* unconditional pair, short query, NULLs */
    q.type_a = AA(USER_MEMORY_INPUT);
    q.type_b = AA(RTS_SPECIAL_TYPE_INPUT);
    CU_ASSERT_EQUAL(kiln_checker_run(g, &q, r, err), KILN_ERR_INVALID);
    q.type_a = q.type_b = AA(CONTINUOUS_INPUT);
    q.struct_size = 8;
    CU_ASSERT_EQUAL(kiln_checker_run(g, &q, r, err), KILN_ERR_INVALID);
    q.struct_size = sizeof(q);
    CU_ASSERT_EQUAL(kiln_checker_run(g, NULL, r, err), KILN_ERR_INVALID);
    CU_ASSERT_EQUAL(kiln_checker_run(g, &q, NULL, err), KILN_ERR_INVALID);
    /* a failing checker: its status, the error names it */
    kiln_error_clear(err);
    q.type_a = q.type_b = AA(RTS_SPECIAL_TYPE_INPUT);
    CU_ASSERT_EQUAL(kiln_checker_run(g, &q, r, err), KILN_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(kiln_error_message(err), "ApiFail"));
    CU_ASSERT_EQUAL(kiln_checker_result_count(NULL), 0);
    CU_ASSERT_STRING_EQUAL(kiln_checker_result_reason(NULL), "");
    kiln_checker_result_destroy(r);
    kiln_checker_result_destroy(NULL);
    kiln_graph_destroy(g);
    kiln_ctx_destroy(ctx);
}

/* ---- GE's checkers (libkiln_mem_conflict_checkers.so) -------------------- */

typedef struct fixture {
    kiln_ctx *ctx;
    kiln_graph *g;
    kiln_checker_result *r;
    kiln_error *err;
    kiln_error err_obj;
} fixture;

static bool load(fixture *f)
{
    f->ctx = kiln_ctx_create();
    f->err = &f->err_obj;
    kiln_error_clear(f->err);
    if (kiln_test_load_plugin(f->ctx, "libkiln_mem_conflict_checkers.so", f->err) != KILN_OK)
        return false;
    f->g = kiln_graph_create(f->ctx, "g");
    f->r = kiln_checker_result_create();
    return f->g && f->r;
}

static void unload(fixture *f)
{
    kiln_checker_result_destroy(f->r);
    kiln_graph_destroy(f->g);
    kiln_ctx_destroy(f->ctx);
}

static bool mlc_eq(const kiln_mem_anchor *x, const kiln_mem_anchor *y)
{
    return x && x->graph == y->graph && x->node == y->node && x->index == y->index &&
           x->is_output == y->is_output;
}

/* Run the checker of (ta, tb) on anchors a, b (the whole symbol); the count isolated. */
static int run2(fixture *f, uint32_t gi, kiln_mem_anchor a, kiln_anchor_attr ta, kiln_mem_anchor b,
                kiln_anchor_attr tb)
{
    kiln_mem_anchor sym[2] = {a, b};
    kiln_checker_query q = {sizeof(q), gi, f->g, a, b, ta, tb, sym, 2};
    kiln_status st = kiln_checker_run(f->g, &q, f->r, f->err);
    CU_ASSERT_EQUAL(st, KILN_OK);
    return st == KILN_OK ? (int)kiln_checker_result_count(f->r) : -1;
}

static void test_checker_api_ge_checkers(void)
{
    fixture f;
    CU_ASSERT_FATAL(load(&f));
    kiln_graph *g = f.g;
    /* all 24 conditional checker functions registered, one per GE name */
    static const kiln_anchor_attr probe[][2] = {
        {AA(UNSUPPORTED_ADDRESS_REFRESH_OPERATOR_INPUT), AA(NORMAL_OUTPUT)},
        {AA(UNSUPPORTED_ADDRESS_REFRESH_OPERATOR_OUTPUT), AA(NORMAL_INPUT)},
        {AA(USER_MEMORY_INPUT), AA(CONTINUOUS_INPUT)},
        {AA(USER_MEMORY_INPUT), AA(NOPADDING_CONTINUOUS_OUTPUT)},
        {AA(USER_MEMORY_INPUT), AA(NOPADDING_CONTINUOUS_INPUT)},
        {AA(USER_MEMORY_INPUT), AA(RTS_SPECIAL_TYPE_OUTPUT)},
        {AA(USER_MEMORY_INPUT), AA(UNSUPPORTED_ADDRESS_REFRESH_OPERATOR_OUTPUT)},
        {AA(USER_MEMORY_OUTPUT), AA(CONTINUOUS_INPUT)},
        {AA(USER_MEMORY_OUTPUT), AA(IMMUTABLE_ADDRESS_OUTPUT)},
        {AA(USER_MEMORY_OUTPUT), AA(UNSUPPORTED_ADDRESS_REFRESH_OPERATOR_INPUT)},
        {AA(USER_MEMORY_OUTPUT), AA(UNSUPPORTED_ADDRESS_REFRESH_OPERATOR_OUTPUT)},
        {AA(IMMUTABLE_ADDRESS_OUTPUT), AA(CONTINUOUS_OUTPUT)},
        {AA(IMMUTABLE_ADDRESS_OUTPUT), AA(NOPADDING_CONTINUOUS_INPUT)},
        {AA(IMMUTABLE_ADDRESS_OUTPUT), AA(RTS_SPECIAL_TYPE_OUTPUT)},
        {AA(CONTINUOUS_INPUT), AA(CONTINUOUS_INPUT)},
        {AA(CONTINUOUS_OUTPUT), AA(CONTINUOUS_OUTPUT)},
        {AA(NOPADDING_CONTINUOUS_OUTPUT), AA(NOPADDING_CONTINUOUS_OUTPUT)},
        {AA(NOPADDING_CONTINUOUS_INPUT), AA(NOPADDING_CONTINUOUS_INPUT)},
        {AA(CONTINUOUS_INPUT), AA(CONTINUOUS_OUTPUT)},
        {AA(NOPADDING_CONTINUOUS_INPUT), AA(NOPADDING_CONTINUOUS_OUTPUT)},
        {AA(CONTINUOUS_OUTPUT), AA(RTS_SPECIAL_TYPE_INPUT)},
        {AA(RTS_SPECIAL_TYPE_INPUT), AA(RTS_SPECIAL_TYPE_INPUT)},
        {AA(RTS_SPECIAL_TYPE_INPUT), AA(RTS_SPECIAL_TYPE_OUTPUT)},
        {AA(RTS_SPECIAL_TYPE_OUTPUT), AA(RTS_SPECIAL_TYPE_OUTPUT)},
    };
    const char *names[24];
    for (unsigned i = 0; i < 24; i++) {
        names[i] = kiln_checker_find(g, probe[i][0], probe[i][1], NULL);
        CU_ASSERT_PTR_NOT_NULL_FATAL(names[i]);
        for (unsigned j = 0; j < i; j++)
            CU_ASSERT(strcmp(names[i], names[j]) != 0);
    }
    /* a -> StreamSwitch -> NetOutput */
    kiln_node_id a = kiln_test_node(g, "a", "Relu", 0, 1),
                 sw = kiln_test_node(g, "sw", "StreamSwitch", 1, 1);
    kiln_node_id no = kiln_test_node(g, "no", "NetOutput", 1, 0);
    kiln_edge_add(g, a, 0, sw, 0);
    kiln_edge_add(g, sw, 0, no, 0);
    kiln_mem_anchor a_out = {g, a, 0, 1}, sw_in = {g, sw, 0, 0}, sw_out = {g, sw, 0, 1};
    kiln_mem_anchor no_in = {g, no, 0, 0};
    const kiln_anchor_attr UIN = AA(UNSUPPORTED_ADDRESS_REFRESH_OPERATOR_INPUT);
    const kiln_anchor_attr UOUT = AA(UNSUPPORTED_ADDRESS_REFRESH_OPERATOR_OUTPUT);
    /* NotSupportRefreshInput: fixed feature map -> none; refreshable -> the input */
    CU_ASSERT_EQUAL(run2(&f, 0, a_out, AA(NORMAL_OUTPUT), sw_in, UIN), 0);
    CU_ASSERT_EQUAL(run2(&f, KILN_GI_FEATURE_MAP_REFRESHABLE, a_out, AA(NORMAL_OUTPUT), sw_in, UIN),
                    1);
    CU_ASSERT(mlc_eq(kiln_checker_result_anchor(f.r, 0), &sw_in));
    /* physical refresh problem (StreamSwitch) forces isolation too */
    CU_ASSERT_EQUAL(
        run2(&f, KILN_GI_PHYSICAL_MEMORY_REFRESHABLE, a_out, AA(NORMAL_OUTPUT), sw_in, UIN), 1);
    /* NotsupportedRefreshOutput */
    CU_ASSERT_EQUAL(run2(&f, 0, sw_out, UOUT, no_in, AA(NORMAL_INPUT)), 0);
    CU_ASSERT_EQUAL(
        run2(&f, KILN_GI_FEATURE_MAP_REFRESHABLE, sw_out, UOUT, no_in, AA(NORMAL_INPUT)), 1);
    CU_ASSERT(mlc_eq(kiln_checker_result_anchor(f.r, 0), &sw_out));
    /* UserOutputAndNotSupportedAddressRefreshInput / Output */
    CU_ASSERT_EQUAL(run2(&f, 0, sw_in, UIN, no_in, AA(USER_MEMORY_OUTPUT)), 1);
    CU_ASSERT(mlc_eq(kiln_checker_result_anchor(f.r, 0), &no_in));
    CU_ASSERT_EQUAL(
        run2(&f, KILN_GI_FEATURE_MAP_REFRESHABLE, sw_in, UIN, no_in, AA(USER_MEMORY_OUTPUT)), 1);
    CU_ASSERT(mlc_eq(kiln_checker_result_anchor(f.r, 0), &sw_in));
    CU_ASSERT_EQUAL(
        run2(&f, KILN_GI_FEATURE_MAP_REFRESHABLE, sw_out, UOUT, no_in, AA(USER_MEMORY_OUTPUT)), 1);
    CU_ASSERT(mlc_eq(kiln_checker_result_anchor(f.r, 0), &sw_out));
    /* UserInputAndNotSupportedAddressRefreshOutput: Data copied unless refreshable */
    kiln_node_id d = kiln_test_node(g, "d", "Data", 0, 1);
    kiln_mem_anchor d_out = {g, d, 0, 1};
    CU_ASSERT_EQUAL(run2(&f, 0, d_out, AA(USER_MEMORY_INPUT), sw_out, UOUT), 1);
    CU_ASSERT(mlc_eq(kiln_checker_result_anchor(f.r, 0), &d_out));
    CU_ASSERT_EQUAL(
        run2(&f, KILN_GI_FEATURE_MAP_REFRESHABLE, d_out, AA(USER_MEMORY_INPUT), sw_out, UOUT), 1);
    CU_ASSERT(mlc_eq(kiln_checker_result_anchor(f.r, 0), &sw_out));
    /* UserMemoryOutputAndImmutableOutput: dynamic root none; const copied; variable none */
    kiln_node_id c = kiln_test_node(g, "c", "Const", 0, 1),
                 v = kiln_test_node(g, "v", "Variable", 0, 1);
    kiln_mem_anchor c_out = {g, c, 0, 1}, v_out = {g, v, 0, 1};
    CU_ASSERT_EQUAL(run2(&f, 0, c_out, AA(IMMUTABLE_ADDRESS_OUTPUT), no_in, AA(USER_MEMORY_OUTPUT)),
                    0);
    CU_ASSERT_EQUAL(run2(&f, KILN_GI_ROOT_GRAPH_STATIC, c_out, AA(IMMUTABLE_ADDRESS_OUTPUT), no_in,
                         AA(USER_MEMORY_OUTPUT)),
                    1);
    CU_ASSERT_EQUAL(run2(&f, KILN_GI_ROOT_GRAPH_STATIC, v_out, AA(IMMUTABLE_ADDRESS_OUTPUT), no_in,
                         AA(USER_MEMORY_OUTPUT)),
                    0);
    /* UserInputAndNoPaddingContinuousOutput: online none, offline copies the Data */
    kiln_node_id ps = kiln_test_node(g, "ps", "PhonySplit", 1, 2);
    kiln_attrs_set_bool(kiln_node_attrs_mut(g, ps), "_no_padding_continuous_output", true);
    kiln_mem_anchor ps_out = {g, ps, 0, 1};
    CU_ASSERT_EQUAL(run2(&f, KILN_GI_USER_INPUT_NOPADDING_OUTPUT_OK, d_out, AA(USER_MEMORY_INPUT),
                         ps_out, AA(NOPADDING_CONTINUOUS_OUTPUT)),
                    0);
    CU_ASSERT_EQUAL(
        run2(&f, 0, d_out, AA(USER_MEMORY_INPUT), ps_out, AA(NOPADDING_CONTINUOUS_OUTPUT)), 1);
    CU_ASSERT(mlc_eq(kiln_checker_result_anchor(f.r, 0), &d_out));
    /* RTS pairs: same memory type none, different isolates */
    kiln_node_id p1 = kiln_test_node(g, "p1", "Relu", 1, 1),
                 p2 = kiln_test_node(g, "p2", "Relu", 1, 1);
    int64_t p2p = 17, ts = 64;
    kiln_attrs_set_list_int(kiln_node_attrs_mut(g, p1), "_input_memory_type", &p2p, 1);
    kiln_attrs_set_list_int(kiln_node_attrs_mut(g, p2), "_input_memory_type", &p2p, 1);
    kiln_attrs_set_list_int(kiln_node_attrs_mut(g, p1), "_output_memory_type", &p2p, 1);
    kiln_attrs_set_list_int(kiln_node_attrs_mut(g, p2), "_output_memory_type", &ts, 1);
    kiln_mem_anchor p1_in = {g, p1, 0, 0}, p2_in = {g, p2, 0, 0};
    kiln_mem_anchor p1_out = {g, p1, 0, 1}, p2_out = {g, p2, 0, 1};
    const kiln_anchor_attr RIN = AA(RTS_SPECIAL_TYPE_INPUT), ROUT = AA(RTS_SPECIAL_TYPE_OUTPUT);
    CU_ASSERT_EQUAL(run2(&f, 0, p1_in, RIN, p2_in, RIN), 0);
    CU_ASSERT_EQUAL(run2(&f, 0, p1_in, RIN, p2_out, ROUT), 1);
    CU_ASSERT(mlc_eq(kiln_checker_result_anchor(f.r, 0), &p2_out));
    CU_ASSERT_EQUAL(run2(&f, 0, p2_in, RIN, p1_out, ROUT), 0);
    CU_ASSERT_EQUAL(run2(&f, 0, p1_out, ROUT, p2_out, ROUT), 1);
    kiln_attrs_set_list_int(kiln_node_attrs_mut(g, p2), "_input_memory_type", &ts, 1);
    CU_ASSERT_EQUAL(run2(&f, 0, p1_in, RIN, p2_in, RIN), 1);
    unload(&f);
}

int main(void)
{
    static const kiln_test_case cases[] = {
        {"test_checker_api_lookups", test_checker_api_lookups},
        {"test_checker_api_ge_checkers", test_checker_api_ge_checkers},
        {NULL, NULL},
    };
    return kiln_test_run("checker_api", cases);
}

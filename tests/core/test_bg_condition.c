/*
 * test_bg_condition.c - the runtime graph build of If/Case
 * (plugins/runtime/common/bg_condition.c, GE bg_condition_unittest): the
 * PointFromInputs policy (B1-B3), ToAllBit (B5), and the BC scenarios: result
 * arity, cond graph, branch graphs, empty branches, guarder moves,
 * guarded-from-outside InnerData, placements.
 */
#include "kiln_test.h"
#include "graph_json.h"
#include "bg_condition.h"
#include "graph_int.h"

#include <string.h>

/* GE ToAllBit, in the allocators' core (plugins/allocators/ka.h) */
uint64_t ka_to_all_bit(uint32_t n, uint32_t s);

static kiln_error err;

/* "dK" = root Data K (float [2]); the If/Case node is "c". */
#define D(k)                                                                                       \
    "{\"name\": \"d" #k "\", \"type\": \"Data\", \"attrs\": {\"index\": " #k "}, "                 \
    "\"outputs\": [{\"shape\": [2]}]}"
#define BD(name, p)                                                                                \
    "{\"name\": \"" name "\", \"type\": \"Data\", \"attrs\": "                                     \
    "{\"_parent_node_index\": " #p "}, \"outputs\": [{\"shape\": [2]}]}"
#define OP(name, type, ins)                                                                        \
    "{\"name\": \"" name "\", \"type\": \"" type "\", \"inputs\": " ins                            \
    ", \"outputs\": [{\"shape\": [2]}]}"
#define G(name, type, in)                                                                          \
    "{\"name\": \"" name "\", \"type\": \"" type "\", \"inputs\": [\"" in                          \
    "\"], \"outputs\": [], \"attrs\": {\"ReleaseResourceIndex\": 0}}"
#define OUT(ins) "{\"name\": \"no\", \"type\": \"NetOutput\", \"inputs\": " ins "}"
#define BR(role, ...) "\"" role "\": {\"name\": \"" role "\", \"nodes\": [" __VA_ARGS__ "]}"
#define BRN(role, name, ...) "\"" role "\": {\"name\": \"" name "\", \"nodes\": [" __VA_ARGS__ "]}"

static kiln_graph *read(const char *json)
{
    kiln_graph *g = NULL;
    memset(&err, 0, sizeof(err));
    kiln_status st =
        kiln_graph_read_json_string(kiln_test_ctx(), json, strlen(json), "t", &g, &err);
    if (st != KILN_OK)
        fprintf(stderr, "%s\n", kiln_error_message(&err));
    CU_ASSERT_EQUAL_FATAL(st, KILN_OK);
    return g;
}

static kiln_status lower(kiln_graph *g, kiln_bg_cond_result *r)
{
    kiln_error_clear(&err);
    kiln_status st = kiln_bg_lower_cond(g, kiln_graph_find_node(g, "c"), r, &err);
    if (st == KILN_OK)
        kiln_test_verify_ok(g);
    return st;
}

static kiln_graph *sub(kiln_graph *g, kiln_node_id n, const char *role)
{
    for (uint32_t i = 0; i < kiln_node_subgraph_count(g, n); i++) {
        const char *r = NULL;
        kiln_graph *s = kiln_node_subgraph(g, n, i, &r);
        if (strcmp(r, role) == 0)
            return s;
    }
    CU_FAIL_FATAL("no such subgraph");
    return NULL;
}

static uint32_t count(kiln_graph *s, const char *op)
{
    uint32_t k = 0;
    for (kiln_node_id n = kiln_graph_next_node(s, 0); n; n = kiln_graph_next_node(s, n))
        k += strcmp(kiln_node_op_str(s, n), op) == 0;
    return k;
}

static kiln_node_id first(kiln_graph *s, const char *op)
{
    for (kiln_node_id n = kiln_graph_next_node(s, 0); n; n = kiln_graph_next_node(s, n))
        if (strcmp(kiln_node_op_str(s, n), op) == 0)
            return n;
    return 0;
}

static const char *src_op(kiln_graph *s, kiln_node_id n, uint32_t i)
{
    kiln_anchor a = kiln_node_input_peer(s, n, i);
    return a.node ? kiln_node_op_str(s, a.node) : "";
}

/* The root Data a branch InnerData stands for. */
static const char *outer_of(kiln_graph *g, kiln_node_id c, kiln_graph *s, kiln_node_id inner)
{
    int64_t idx = -1;
    CU_ASSERT_FATAL(kiln_attrs_get_int(kiln_node_attrs(s, inner), "index", &idx));
    kiln_anchor a = kiln_node_input_peer(g, c, (uint32_t)idx);
    return a.node ? kiln_node_name_str(g, a.node) : "";
}

static uint32_t uses(kiln_graph *s, const char *name)
{
    return kiln_node_output_use_count(s, kiln_graph_find_node(s, name), 0);
}

#define IF2(nout, then_nodes, else_nodes)                                                          \
    "{\"kiln_graph\": 1, \"name\": \"r\", \"nodes\": [" D(0) "," D(1) "," D(                       \
        2) ", {\"name\": \"c\", \"type\": \"If\", \"inputs\": [\"d0:0\", \"d0:0\", \"d1:0\", "     \
           "\"d2:0\"], \"outputs\": " nout ", \"subgraphs\": {" BR(                                \
               "then_branch", then_nodes) "," BR("else_branch", else_nodes) "}}]}"
#define O2 "[{\"shape\": [2]}, {\"shape\": [2]}]"

/* B1: output 0 comes from data1 in then, data0 in else: one PointFromInputs per branch */
static void test_b1(void)
{
    kiln_graph *g = read(IF2(O2,
                             BD("a", 2) "," BD("b", 3) "," OP(
                                 "foo", "Foo1", "[\"a\", \"b\"]") "," OUT("[\"a\", \"foo\"]"),
                             BD("a", 1) "," BD("b", 2) "," OP(
                                 "foo", "Foo1", "[\"a\", \"b\"]") "," OUT("[\"a\", \"foo\"]")));
    kiln_bg_cond_result r;
    CU_ASSERT_EQUAL_FATAL(lower(g, &r), KILN_OK);
    CU_ASSERT_EQUAL(r.conflict_count, 1);
    const char *roles[] = {"then_branch", "else_branch"};
    for (int b = 0; b < 2; b++) {
        kiln_graph *s = sub(g, r.node, roles[b]);
        CU_ASSERT_EQUAL(count(s, "InnerData"), 2);
        CU_ASSERT_EQUAL(count(s, "Foo1"), 1);
        CU_ASSERT_EQUAL(count(s, "PointFromInputs"), 1);
        CU_ASSERT_EQUAL(count(s, "InnerNetOutput"), 1);
        kiln_node_id no = first(s, "InnerNetOutput"), pf = first(s, "PointFromInputs");
        CU_ASSERT_STRING_EQUAL(src_op(s, no, 0), "PointFromInputs");
        CU_ASSERT_STRING_EQUAL(src_op(s, no, 1), "Foo1");
        CU_ASSERT_EQUAL(kiln_node_input_count(s, pf), 1);
        CU_ASSERT_STRING_EQUAL(src_op(s, pf, 0), "InnerData");
        char nm[64];
        snprintf(nm, sizeof(nm), "c_PointFrom_%d", b);
        CU_ASSERT_STRING_EQUAL(kiln_node_name_str(s, pf), nm);
    }
    kiln_graph_destroy(g);
}

/* B2: the same source in both branches: no PointFromInputs */
static void test_b2(void)
{
    kiln_graph *g = read(IF2(O2,
                             BD("a", 2) "," BD("b", 3) "," OP(
                                 "foo", "Foo1", "[\"a\", \"b\"]") "," OUT("[\"a\", \"foo\"]"),
                             BD("a", 2) "," BD("b", 1) "," OP(
                                 "foo", "Foo1", "[\"b\", \"a\"]") "," OUT("[\"a\", \"foo\"]")));
    kiln_bg_cond_result r;
    CU_ASSERT_EQUAL_FATAL(lower(g, &r), KILN_OK);
    CU_ASSERT_EQUAL(r.conflict_count, 0);
    kiln_graph *s = sub(g, r.node, "else_branch");
    CU_ASSERT_EQUAL(count(s, "PointFromInputs"), 0);
    kiln_node_id no = first(s, "InnerNetOutput");
    CU_ASSERT_STRING_EQUAL(src_op(s, no, 0), "InnerData");
    CU_ASSERT_STRING_EQUAL(src_op(s, no, 1), "Foo1");
    kiln_graph_destroy(g);
}

#define CASE3(b0, b1, b2)                                                                          \
    "{\"kiln_graph\": 1, \"name\": \"r\", \"nodes\": [" D(0) "," D(1) "," D(                       \
        2) ", {\"name\": \"c\", \"type\": \"Case\", \"inputs\": [\"d0:0\", \"d1:0\", \"d2:0\"], "  \
           "\"outputs\": " O2 ", \"subgraphs\": {" BR("branch_0", b0) "," BR(                      \
               "branch_1", b1) "," BR("branch_2", b2) "}}]}"

/* B3: Case {foo1,foo1}, {data1,foo2}, {bar,bar}: one PointFromInputs on output 0 */
static void test_b3(void)
{
    kiln_graph *g =
        read(CASE3(BD("a", 1) "," OP("foo1", "Foo1", "[\"a\"]") "," OUT("[\"foo1\", \"foo1\"]"),
                   BD("a", 1) "," OP("foo2", "Foo2", "[\"a\"]") "," OUT("[\"a\", \"foo2\"]"),
                   BD("a", 2) "," OP("bar", "Bar", "[\"a\"]") "," OUT("[\"bar\", \"bar\"]")));
    kiln_bg_cond_result r;
    CU_ASSERT_EQUAL_FATAL(lower(g, &r), KILN_OK);
    CU_ASSERT_EQUAL(r.branch_count, 3);
    CU_ASSERT_EQUAL(r.conflict_count, 1);
    const char *roles[] = {"branch_0", "branch_1", "branch_2"};
    for (int b = 0; b < 3; b++) {
        kiln_graph *s = sub(g, r.node, roles[b]);
        CU_ASSERT_EQUAL(count(s, "PointFromInputs"), 1);
        kiln_node_id no = first(s, "InnerNetOutput");
        CU_ASSERT_STRING_EQUAL(src_op(s, no, 0), "PointFromInputs");
        CU_ASSERT_STRING_NOT_EQUAL(src_op(s, no, 1), "PointFromInputs");
        CU_ASSERT_EQUAL(kiln_node_input_count(s, first(s, "PointFromInputs")), 1);
    }
    kiln_graph_destroy(g);
}

/* B5: ToAllBit */
static void test_b5(void)
{
    CU_ASSERT_EQUAL(ka_to_all_bit(4, 0), 0xEu); /* bits {1,2,3} */
    CU_ASSERT_EQUAL(ka_to_all_bit(4, 1), 0xDu); /* bits {0,2,3} */
}

/* BC1: two outputs, two holders */
static void test_bc1(void)
{
    kiln_graph *g = read(IF2(O2,
                             BD("a", 1) "," BD("b", 2) "," OP(
                                 "foo", "Foo1", "[\"a\", \"b\"]") "," OUT("[\"foo\", \"b\"]"),
                             BD("a", 1) "," BD("b", 2) "," OP(
                                 "foo", "Foo2", "[\"a\", \"b\"]") "," OUT("[\"a\", \"foo\"]")));
    kiln_bg_cond_result r;
    CU_ASSERT_EQUAL_FATAL(lower(g, &r), KILN_OK);
    CU_ASSERT_EQUAL(r.holder_count, 2);
    CU_ASSERT_EQUAL(kiln_node_output_count(g, r.node), 2);
    /* the inputs are exactly the distinct outer values used: d0 (cond and used), d1 */
    CU_ASSERT_EQUAL_FATAL(kiln_node_input_count(g, r.node), 2);
    CU_ASSERT_STRING_EQUAL(kiln_node_name_str(g, kiln_node_input_peer(g, r.node, 0).node), "d0");
    CU_ASSERT_STRING_EQUAL(kiln_node_name_str(g, kiln_node_input_peer(g, r.node, 1).node), "d1");
    kiln_graph_destroy(g);
}

static void check_cond_graph(kiln_graph *g, kiln_node_id c, uint32_t n, const char *cond_data)
{
    kiln_graph *s = sub(g, c, "cond");
    CU_ASSERT_EQUAL(kiln_node_subgraph_count(g, c), n + 1);
    CU_ASSERT_EQUAL(count(s, "InnerData"), 1);
    CU_ASSERT_EQUAL(count(s, "SwitchNotify"), 1);
    CU_ASSERT_EQUAL(count(s, "WatcherPlaceholder"), 1);
    CU_ASSERT_EQUAL(count(s, "BranchPivot"), n);
    CU_ASSERT_EQUAL(count(s, "BranchDone"), n);
    CU_ASSERT_EQUAL(count(s, "WaitAnyone"), 1);
    kiln_node_id sn = first(s, "SwitchNotify"), wa = first(s, "WaitAnyone");
    CU_ASSERT_EQUAL(kiln_node_output_count(s, sn), n + 1);
    CU_ASSERT_STRING_EQUAL(src_op(s, sn, 0), "InnerData");
    CU_ASSERT_STRING_EQUAL(outer_of(g, c, s, kiln_node_input_peer(s, sn, 0).node), cond_data);
    CU_ASSERT_EQUAL(kiln_node_output_use_count(s, sn, 0), 1);
    CU_ASSERT_STRING_EQUAL(kiln_node_op_str(s, kiln_use_dst(s, kiln_use_first(s, sn, 0)).node),
                           "WatcherPlaceholder");
    uint32_t seen_pivot = 0, seen_done = 0;
    for (kiln_node_id x = kiln_graph_next_node(s, 0); x; x = kiln_graph_next_node(s, x)) {
        int64_t b = 0;
        bool pivot = strcmp(kiln_node_op_str(s, x), "BranchPivot") == 0;
        bool done = strcmp(kiln_node_op_str(s, x), "BranchDone") == 0;
        if (!pivot && !done)
            continue;
        CU_ASSERT_FATAL(kiln_attrs_get_int(kiln_node_attrs(s, x), "branch", &b));
        CU_ASSERT_FATAL(b >= 1 && b <= (int64_t)n);
        if (pivot) {
            seen_pivot |= 1u << b;
            kiln_anchor a = kiln_node_input_peer(s, x, 0);
            CU_ASSERT(a.node == sn && a.index == (uint32_t)b);
            /* pivot => its BranchDone => WaitAnyone */
            bool to_done = false;
            for (uint32_t cur = kiln_ctrl_out_first(s, x); cur; cur = kiln_ctrl_out_next(s, cur)) {
                kiln_node_id d = kiln_ctrl_dst(s, cur);
                int64_t db = 0;
                kiln_attrs_get_int(kiln_node_attrs(s, d), "branch", &db);
                to_done |= strcmp(kiln_node_op_str(s, d), "BranchDone") == 0 && db == b &&
                           kiln_ctrl_exists(s, d, wa);
            }
            CU_ASSERT(to_done);
        } else {
            seen_done |= 1u << b;
        }
    }
    CU_ASSERT_EQUAL(seen_pivot, ((1u << (n + 1)) - 2));
    CU_ASSERT_EQUAL(seen_done, ((1u << (n + 1)) - 2));
}

/* BC2: the cond graph of an If */
static void test_bc2(void)
{
    kiln_graph *g = read(IF2(
        O2,
        BD("a", 1) "," BD("b", 2) "," BD("cc", 3) "," OP("bar", "Bar1", "[\"a\", \"b\"]") "," OP(
            "f2", "Foo1",
            "[\"b\", \"cc\"]") "," OP("foo", "Foo1",
                                      "[\"bar\", \"f2\"]") "," OUT("[\"foo\", \"b\"]"),
        BD("a", 1) "," BD("cc", 3) "," OP("foo", "Foo2",
                                          "[\"a\", \"cc\"]") "," OUT("[\"a\", \"foo\"]")));
    kiln_bg_cond_result r;
    CU_ASSERT_EQUAL_FATAL(lower(g, &r), KILN_OK);
    check_cond_graph(g, r.node, 2, "d0");
    kiln_graph_destroy(g);
}

/* BC3: the branch graphs */
static void test_bc3(void)
{
    kiln_graph *g = read(IF2(
        O2,
        BD("a", 1) "," BD("b", 2) "," BD("cc", 3) "," OP("bar1", "Bar1", "[\"a\", \"b\"]") "," OP(
            "f2", "Foo1",
            "[\"b\", \"cc\"]") "," OP("foo3", "Foo1",
                                      "[\"bar1\", \"f2\"]") "," OUT("[\"foo3\", \"bar1\"]"),
        BD("a", 1) "," BD("cc", 3) "," OP("foo", "Foo2",
                                          "[\"a\", \"cc\"]") "," OUT("[\"foo\", \"foo\"]")));
    kiln_bg_cond_result r;
    CU_ASSERT_EQUAL_FATAL(lower(g, &r), KILN_OK);
    kiln_graph *t = sub(g, r.node, "then_branch"), *e = sub(g, r.node, "else_branch");
    CU_ASSERT_EQUAL(count(t, "InnerData"), 3);
    CU_ASSERT_EQUAL(count(t, "Foo1"), 2);
    CU_ASSERT_EQUAL(count(t, "Bar1"), 1);
    CU_ASSERT_EQUAL(count(t, "InnerNetOutput"), 1);
    kiln_node_id no = first(t, "InnerNetOutput");
    CU_ASSERT_STRING_EQUAL(src_op(t, no, 0), "Foo1");
    CU_ASSERT_STRING_EQUAL(src_op(t, no, 1), "Bar1");
    CU_ASSERT_EQUAL(count(e, "InnerData"), 2);
    CU_ASSERT_EQUAL(count(e, "Foo2"), 1);
    CU_ASSERT_EQUAL(count(e, "InnerNetOutput"), 1);
    no = first(e, "InnerNetOutput");
    kiln_node_id foo = first(e, "Foo2");
    CU_ASSERT(kiln_node_input_peer(e, no, 0).node == foo &&
              kiln_node_input_peer(e, no, 1).node == foo);
    CU_ASSERT_STRING_EQUAL(outer_of(g, r.node, e, kiln_node_input_peer(e, foo, 0).node), "d0");
    CU_ASSERT_STRING_EQUAL(outer_of(g, r.node, e, kiln_node_input_peer(e, foo, 1).node), "d2");
    kiln_graph_destroy(g);
}

/* BC4: only a then branch, returning nothing */
static void test_bc4(void)
{
    const char *json = "{\"kiln_graph\": 1, \"name\": \"r\", \"nodes\": [" D(0) "," D(1) "," D(
        2) ", {\"name\": \"c\", \"type\": \"If\", \"inputs\": [\"d0:0\", \"d0:0\", \"d2:0\"], "
           "\"outputs\": [], \"subgraphs\": {" BR(
               "then_branch",
               BD("a", 1) "," BD("b", 2) "," OP(
                   "foo1", "Foo1",
                   "[\"a\"]") ", {\"name\": \"foo2\", \"type\": \"Foo2\", \"inputs\": "
                              "[\"foo1\", \"b\"], \"outputs\": []}," OUT("[]")) "}}]}";
    kiln_graph *g = read(json);
    kiln_bg_cond_result r;
    CU_ASSERT_EQUAL_FATAL(lower(g, &r), KILN_OK);
    CU_ASSERT_EQUAL(r.output_count, 0);
    CU_ASSERT_EQUAL(r.holder_count, 1);
    CU_ASSERT_EQUAL(kiln_graph_node_count(g), 4);
    CU_ASSERT_EQUAL(count(g, "Data"), 3);
    CU_ASSERT_EQUAL(count(g, "If"), 1);
    check_cond_graph(g, r.node, 2, "d0");
    kiln_graph *t = sub(g, r.node, "then_branch"), *e = sub(g, r.node, "else_branch");
    CU_ASSERT_EQUAL(count(t, "InnerData"), 2);
    CU_ASSERT_EQUAL(count(t, "Foo1"), 1);
    CU_ASSERT_EQUAL(count(t, "Foo2"), 1);
    CU_ASSERT_EQUAL(count(t, "InnerNetOutput"), 1);
    CU_ASSERT_EQUAL(kiln_graph_node_count(e), 1);
    CU_ASSERT_EQUAL(count(e, "InnerNetOutput"), 1);
    kiln_graph_destroy(g);
}

/* BC6: different output counts: an error naming the node, the graph unchanged */
static void test_bc6(void)
{
    kiln_graph *g = read(IF2(O2, BD("a", 1) "," BD("b", 2) "," OUT("[\"a\", \"b\"]"),
                             BD("a", 1) "," OUT("[\"a\"]")));
    uint32_t before = kiln_graph_node_count(g), subs = kiln_graph_all_subgraph_count(g);
    kiln_bg_cond_result r;
    CU_ASSERT_EQUAL(lower(g, &r), KILN_ERR_INVALID);
    CU_ASSERT_EQUAL(r.holder_count, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(kiln_error_message(&err), "node c"));
    CU_ASSERT_PTR_NOT_NULL(strstr(kiln_error_message(&err), "returns 1 outputs"));
    CU_ASSERT_EQUAL(kiln_graph_node_count(g), before);
    CU_ASSERT_EQUAL(kiln_graph_all_subgraph_count(g), subs);
    kiln_node_id c = kiln_graph_find_node(g, "c");
    CU_ASSERT_FATAL(c != 0);
    CU_ASSERT(!kiln_attrs_has(kiln_node_attrs(g, c), "_bg_lowered"));
    kiln_test_verify_ok(g);
    kiln_graph_destroy(g);
}

/* BC7: a Case of three branches */
static void test_bc7(void)
{
    kiln_graph *g =
        read(CASE3(BD("a", 1) "," OP("f", "Foo1", "[\"a\"]") "," OUT("[\"f\", \"a\"]"),
                   BD("a", 1) "," OP("f", "Foo2", "[\"a\"]") "," OUT("[\"f\", \"a\"]"),
                   BD("a", 2) "," OP("f", "Foo3", "[\"a\"]") "," OUT("[\"f\", \"a\"]")));
    kiln_bg_cond_result r;
    CU_ASSERT_EQUAL_FATAL(lower(g, &r), KILN_OK);
    check_cond_graph(g, r.node, 3, "d0");
    /* output 1 is d1 in two branches and d2 in the third: a conflict */
    CU_ASSERT_EQUAL(r.conflict_count, 1);
    kiln_graph_destroy(g);
}

/* BC8: every branch guards output 0: the guarders move out */
static void test_bc8(void)
{
    kiln_graph *g = read(IF2(
        O2,
        BD("a", 1) "," BD("b", 2) "," BD("cc", 3) "," OP("foo2", "Foo1", "[\"b\", \"cc\"]") "," G(
            "g2", "FreeMemory",
            "foo2") "," OP("bar1", "Bar1",
                           "[\"a\", \"b\"]") "," OP("foo3", "Foo1",
                                                    "[\"bar1\", \"foo2\"]") "," G("g3",
                                                                                  "FreeMemory",
                                                                                  "foo3") "," OUT("[\"foo3\", \"b\"]"),
        BD("a", 1) "," BD("b", 2) "," BD("cc", 3) "," OP("foo4", "Foo1", "[\"a\", \"cc\"]") "," G(
            "g4", "FreeMemory", "foo4") "," OUT("[\"foo4\", \"b\"]")));
    kiln_bg_cond_result r;
    CU_ASSERT_EQUAL_FATAL(lower(g, &r), KILN_OK);
    CU_ASSERT_EQUAL(r.guarded_count, 1);
    CU_ASSERT_EQUAL(kiln_node_output_use_count(g, r.node, 0), 1);
    kiln_node_id pg = kiln_use_dst(g, kiln_use_first(g, r.node, 0)).node;
    CU_ASSERT_STRING_EQUAL(kiln_node_op_str(g, pg), "FreeMemory");
    CU_ASSERT_EQUAL(kiln_node_output_use_count(g, r.node, 1), 0);
    kiln_graph *t = sub(g, r.node, "then_branch"), *e = sub(g, r.node, "else_branch");
    CU_ASSERT_EQUAL(count(t, "InnerData"), 3);
    CU_ASSERT_EQUAL(count(t, "Foo1"), 2);
    CU_ASSERT_EQUAL(count(t, "Bar1"), 1);
    CU_ASSERT_EQUAL(count(t, "FreeMemory"), 1);
    CU_ASSERT_EQUAL(count(t, "InnerNetOutput"), 1);
    CU_ASSERT_EQUAL(count(t, "IdentityAddr"), 0);
    CU_ASSERT_EQUAL(uses(t, "foo2"), 2); /* FreeMemory and foo3 */
    CU_ASSERT_PTR_NOT_NULL(kiln_graph_find_node(t, "g2"));
    CU_ASSERT_EQUAL(uses(t, "foo3"), 1);
    CU_ASSERT_STRING_EQUAL(
        kiln_node_op_str(
            t, kiln_use_dst(t, kiln_use_first(t, kiln_graph_find_node(t, "foo3"), 0)).node),
        "InnerNetOutput");
    CU_ASSERT_EQUAL(count(e, "InnerData"), 3);
    CU_ASSERT_EQUAL(count(e, "Foo1"), 1);
    CU_ASSERT_EQUAL(count(e, "InnerNetOutput"), 1);
    CU_ASSERT_EQUAL(count(e, "FreeMemory"), 0);
    CU_ASSERT_EQUAL(uses(e, "foo4"), 1);
    kiln_graph_destroy(g);
}

/* BC8 variant: only one branch guards: the other gets one IdentityAddr (+1 reference) */
static void test_bc8_align(void)
{
    kiln_graph *g = read(IF2(O2,
                             BD("a", 1) "," OP("f", "Foo1", "[\"a\"]") "," G(
                                 "gf", "FreeFftsMem", "f") "," OUT("[\"f\", \"f\"]"),
                             BD("a", 1) "," OP("h", "Foo2", "[\"a\"]") "," OUT("[\"h\", \"a\"]")));
    kiln_bg_cond_result r;
    CU_ASSERT_EQUAL_FATAL(lower(g, &r), KILN_OK);
    CU_ASSERT_EQUAL(r.guarded_count, 2);
    for (uint32_t o = 0; o < 2; o++) {
        CU_ASSERT_EQUAL_FATAL(kiln_node_output_use_count(g, r.node, o), 1);
        CU_ASSERT_STRING_EQUAL(
            kiln_node_op_str(g, kiln_use_dst(g, kiln_use_first(g, r.node, o)).node), "FreeFftsMem");
    }
    kiln_graph *t = sub(g, r.node, "then_branch"), *e = sub(g, r.node, "else_branch");
    /* then: the guarder goes; f feeds two outputs, the repeat is +1 */
    CU_ASSERT_EQUAL(count(t, "FreeFftsMem"), 0);
    CU_ASSERT_EQUAL(count(t, "IdentityAddr"), 1);
    kiln_node_id ia = first(t, "IdentityAddr");
    CU_ASSERT_STRING_EQUAL(kiln_node_name_str(t, ia), "c_Subgraph_0_AddResRef_");
    CU_ASSERT_EQUAL(kiln_node_input_count(t, ia), 1);
    CU_ASSERT_STRING_EQUAL(src_op(t, first(t, "InnerNetOutput"), 1), "IdentityAddr");
    CU_ASSERT_STRING_EQUAL(src_op(t, first(t, "InnerNetOutput"), 0), "Foo1");
    /* else: no guarder for outputs 0 and 1: one IdentityAddr with two pairs, in output order */
    CU_ASSERT_EQUAL(count(e, "IdentityAddr"), 1);
    ia = first(e, "IdentityAddr");
    CU_ASSERT_STRING_EQUAL(kiln_node_name_str(e, ia), "c_Subgraph_1_AddResRef_");
    CU_ASSERT_EQUAL_FATAL(kiln_node_input_count(e, ia), 2);
    CU_ASSERT_STRING_EQUAL(src_op(e, ia, 0), "Foo2");
    CU_ASSERT_STRING_EQUAL(src_op(e, ia, 1), "InnerData");
    kiln_node_id no = first(e, "InnerNetOutput");
    CU_ASSERT(kiln_node_input_peer(e, no, 0).node == ia &&
              kiln_node_input_peer(e, no, 0).index == 0);
    CU_ASSERT(kiln_node_input_peer(e, no, 1).node == ia &&
              kiln_node_input_peer(e, no, 1).index == 1);
    kiln_graph_destroy(g);
}

static void bc10(const char *type)
{
    char json[4096];
    snprintf(
        json, sizeof(json),
        "{\"kiln_graph\": 1, \"name\": \"r\", \"nodes\": [" D(0) "," D(
            1) ", {\"name\": \"gd\", \"type\": \"%s\", \"inputs\": [\"d1\"], \"outputs\": [], "
               "\"attrs\": {\"ReleaseResourceIndex\": 0}}"
               ", {\"name\": \"c\", \"type\": \"If\", \"inputs\": [\"d0:0\", \"d1:0\"], "
               "\"outputs\": " O2 ", \"subgraphs\": {" BR(
                   "then_branch",
                   BD("a", 1) "," OP("f", "Foo", "[\"a\"]") "," OUT(
                       "[\"f\", \"a\"]")) "," BR("else_branch",
                                                 BD("a", 1) "," OP("f", "Bar", "[\"a\"]") "," OUT(
                                                     "[\"f\", \"a\"]")) "}}]}",
        type);
    kiln_graph *g = read(json);
    kiln_bg_cond_result r;
    CU_ASSERT_EQUAL_FATAL(lower(g, &r), KILN_OK);
    kiln_graph *e = sub(g, r.node, "else_branch");
    CU_ASSERT_EQUAL(kiln_graph_node_count(e), 4);
    CU_ASSERT_EQUAL(count(e, "InnerData"), 1);
    CU_ASSERT_EQUAL(count(e, "Bar"), 1);
    CU_ASSERT_EQUAL(count(e, "IdentityAddr"), 1);
    CU_ASSERT_EQUAL(count(e, "InnerNetOutput"), 1);
    const char *v = NULL;
    CU_ASSERT(kiln_attrs_get_string(kiln_node_attrs(e, first(e, "InnerData")),
                                    "NodeWithGuarderOutside", &v));
    CU_ASSERT_STRING_EQUAL(v ? v : "", type);
    CU_ASSERT_EQUAL(r.conflict_count, 0);
    /* the parent guards output 1 with the same type */
    CU_ASSERT_EQUAL_FATAL(kiln_node_output_use_count(g, r.node, 1), 1);
    CU_ASSERT_STRING_EQUAL(kiln_node_op_str(g, kiln_use_dst(g, kiln_use_first(g, r.node, 1)).node),
                           type);
    CU_ASSERT_EQUAL(kiln_node_output_use_count(g, r.node, 0), 0);
    kiln_graph_destroy(g);
}

/* BC10: an InnerData guarded outside */
static void test_bc10(void)
{
    bc10("FreeMemory");
    bc10("FreeFixedFeatureMemory");
}

/* An outer consumer with ReleaseResourceIndex that is not a Free type guards nothing */
static void test_bad_guarder(void)
{
    const char *json = "{\"kiln_graph\": 1, \"name\": \"r\", \"nodes\": [" D(0) "," D(
        1) ", {\"name\": \"gd\", \"type\": \"Identity\", \"inputs\": [\"d1\"], \"outputs\": [{}], "
           "\"attrs\": {\"ReleaseResourceIndex\": 0}}"
           ", {\"name\": \"c\", \"type\": \"If\", \"inputs\": [\"d0:0\", \"d1:0\"], \"outputs\": "
           "[{}], \"subgraphs\": {" BR("then_branch", BD("a", 1) "," OUT("[\"a\"]")) "," BR(
               "else_branch", BD("a", 1) "," OUT("[\"a\"]")) "}}]}";
    kiln_graph *g = read(json);
    kiln_bg_cond_result r;
    CU_ASSERT_EQUAL_FATAL(lower(g, &r), KILN_OK);
    CU_ASSERT_EQUAL(r.guarded_count, 0);
    kiln_graph *t = sub(g, r.node, "then_branch");
    CU_ASSERT(!kiln_attrs_has(kiln_node_attrs(t, first(t, "InnerData")), "NodeWithGuarderOutside"));
    kiln_graph_destroy(g);
}

/* BC11: placements */
static void test_bc11(void)
{
#define PD(name, p, mt)                                                                            \
    "{\"name\": \"" name "\", \"type\": \"Data\", \"attrs\": "                                     \
    "{\"_parent_node_index\": " #p "}, \"outputs\": [{\"shape\": [2], "                            \
    "\"memory_type\": \"" mt "\"}]}"
    kiln_graph *g =
        read(IF2("[{\"shape\": [2]}, {\"shape\": [2]}, {\"shape\": [2]}]",
                 PD("a", 2, "HOST") "," PD("b", 3, "HBM") "," OUT("[\"a\", \"b\", \"a\"]"),
                 PD("a", 2, "HOST") "," PD("b", 3, "HBM") "," OUT("[\"a\", \"b\", \"b\"]")));
    kiln_bg_cond_result r;
    CU_ASSERT_EQUAL_FATAL(lower(g, &r), KILN_OK);
    const char *want[] = {"host", "HBM", "end"};
    for (uint32_t o = 0; o < 3; o++) {
        const char *p = NULL;
        CU_ASSERT(kiln_attrs_get_string(kiln_desc_attrs(kiln_node_output_desc(g, r.node, o)),
                                        "_placement", &p));
        CU_ASSERT_STRING_EQUAL(p ? p : "", want[o]);
    }
    kiln_graph_destroy(g);
}

/* The whole-graph driver: a nested If is lowered first, outer copies keep it */
static void test_lower_graph(void)
{
    const char *json = "{\"kiln_graph\": 1, \"name\": \"r\", \"nodes\": [" D(0) "," D(
        1) ", {\"name\": \"c\", \"type\": \"If\", \"inputs\": [\"d0:0\", \"d1:0\"], \"outputs\": "
           "[{\"shape\": [2]}], \"subgraphs\": {" BR(
               "then_branch",
               BD("a", 1) "," OP("f", "Relu", "[\"a\"]") "," OUT(
                   "[\"f\"]")) "," BR("else_branch",
                                      BD("a", 1) "," BD(
                                          "k",
                                          0) ","
                                             "{\"name\": \"c\", \"type\": \"If\", \"inputs\": "
                                             "[\"k\", \"a\"], \"outputs\": [{\"shape\": [2]}], "
                                             "\"subgraphs\": {" BRN("then_branch", "in_then", BD("x", 1) "," OUT("[\"x\"]")) "," BRN(
                                                 "else_branch", "in_else",
                                                 BD("x", 1) "," OP("n", "Neg", "[\"x\"]") "," OUT(
                                                     "[\"n\"]")) "}}," OUT("[\"c\"]")) "}}, "
                                                                                       "{\"name\": "
                                                                                       "\"out\", "
                                                                                       "\"type\": "
                                                                                       "\"NetOutput"
                                                                                       "\", "
                                                                                       "\"inputs\":"
                                                                                       " [\"c\"]}]"
                                                                                       "}";
    kiln_graph *g = read(json);
    uint32_t n = 0;
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(kiln_bg_lower_graph(g, true, &n, &err), KILN_OK);
    CU_ASSERT_EQUAL(n, 2);
    kiln_test_verify_ok(g);
    kiln_node_id c = kiln_graph_find_node(g, "c");
    kiln_graph *e = sub(g, c, "else_branch");
    kiln_node_id inner = first(e, "If");
    CU_ASSERT_FATAL(inner != 0);
    CU_ASSERT_EQUAL(kiln_node_subgraph_count(e, inner), 3);
    /* auto guards: Relu in then, the inner If's result in else: moved to the root */
    CU_ASSERT_EQUAL(count(g, "FreeMemory"), 1);
    CU_ASSERT_STRING_EQUAL(
        kiln_node_op_str(g, kiln_node_input_peer(g, kiln_graph_find_node(g, "out"), 0).node), "If");
    kiln_graph_destroy(g);
}

/* Not an If/Case; a Case without branches */
static void test_errors(void)
{
    kiln_graph *g = read("{\"kiln_graph\": 1, \"name\": \"r\", \"nodes\": [" D(
        0) ","
           "{\"name\": \"c\", \"type\": \"Relu\", \"inputs\": [\"d0\"], \"outputs\": [{}]}]}");
    kiln_bg_cond_result r;
    CU_ASSERT_EQUAL(lower(g, &r), KILN_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(kiln_error_message(&err), "is not an If or Case"));
    kiln_graph_destroy(g);
    g = read("{\"kiln_graph\": 1, \"name\": \"r\", \"nodes\": [" D(
        0) ","
           "{\"name\": \"c\", \"type\": \"Case\", \"inputs\": [\"d0\"], \"outputs\": []}]}");
    CU_ASSERT_EQUAL(lower(g, &r), KILN_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(kiln_error_message(&err), "no branch_* subgraph"));
    kiln_graph_destroy(g);
}

int main(void)
{
    static const kiln_test_case cases[] = {
        {"B1 PointFromInputs on a conflict", test_b1},
        {"B2 no conflict", test_b2},
        {"B3 Case conflict on output 0 only", test_b3},
        {"B5 ToAllBit", test_b5},
        {"BC1 result arity", test_bc1},
        {"BC2 cond graph", test_bc2},
        {"BC3 branch graphs", test_bc3},
        {"BC4 only a then branch", test_bc4},
        {"BC6 different output counts", test_bc6},
        {"BC7 Case of three branches", test_bc7},
        {"BC8 guarders move out", test_bc8},
        {"BC8 +1 references align the branches", test_bc8_align},
        {"BC10 guarded outside", test_bc10},
        {"non-Free outer guarder", test_bad_guarder},
        {"BC11 placements", test_bc11},
        {"whole graph, nested", test_lower_graph},
        {"errors", test_errors},
        {NULL, NULL},
    };
    return kiln_test_run("bg_condition", cases);
}

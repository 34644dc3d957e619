/*
 * test_fusion_match.c - the pattern matcher (GE pattern_matcher_unittest.cc
 * scenarios M1-M4, M6, M8) and its kiln options: commutative inputs, const
 * values, alternatives, the match accessors and boundary, pattern validation.
 */
#include "kiln_test.h"
#include "graph_int.h"
#include "pattern.h"
#include <stdio.h>
#include <string.h>

static kiln_error err;

/* Target T1: data1->abs1; abs1->exp; abs1->relu; exp->add(0); relu->add(1);
 * add->NetOutput. */
static kiln_graph *t1(void)
{
    kiln_graph *g = kiln_test_graph("t1");
    kiln_node_id d = kiln_test_node(g, "data1", "Data", 0, 1);
    kiln_node_id a = kiln_test_node(g, "abs1", "Abs", 1, 1);
    kiln_node_id e = kiln_test_node(g, "exp", "Exp", 1, 1);
    kiln_node_id r = kiln_test_node(g, "relu", "Relu", 1, 1);
    kiln_node_id add = kiln_test_node(g, "add", "Add", 2, 1);
    kiln_node_id o = kiln_test_node(g, "out", "NetOutput", 1, 0);
    kiln_test_edge(g, d, 0, a, 0);
    kiln_test_edge(g, a, 0, e, 0);
    kiln_test_edge(g, a, 0, r, 0);
    kiln_test_edge(g, e, 0, add, 0);
    kiln_test_edge(g, r, 0, add, 1);
    kiln_test_edge(g, add, 0, o, 0);
    return g;
}

/* Every match of every alternative, as "name,name;" (matched nodes in
 * pattern-node order) into @p buf; returns the number of matches. */
static int all_matches(kiln_pattern *p, kiln_graph *g, char *buf, size_t size)
{
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(kiln__pattern_validate(p, "TestPass", &err), KILN_OK);
    kiln_matcher *mt = kiln__matcher_create(p, g);
    CU_ASSERT_PTR_NOT_NULL_FATAL(mt);
    buf[0] = 0;
    int n = 0;
    for (uint32_t a = 0; a < kiln__pattern_alt_count(p); a++) {
        kiln__matcher_begin(mt, a);
        const kiln_match *m;
        while ((m = kiln__matcher_next(mt)) != NULL) {
            n++;
            for (uint32_t k = 0; k < kiln_match_node_count(m); k++) {
                size_t len = strlen(buf);
                snprintf(buf + len, size - len, "%s%s", k ? "," : "",
                         kiln_node_name_str(g, kiln_match_node_at(m, k)));
            }
            size_t len = strlen(buf);
            snprintf(buf + len, size - len, ";");
        }
    }
    kiln__matcher_destroy(mt);
    return n;
}

static void test_match_m1_multi_output_from_shared_producer(void)
{
    kiln_graph *g = t1();
    kiln_pattern p;
    kiln__pattern_init(&p);
    int32_t d = kiln_pattern_node(&p, "data", "Data"), a = kiln_pattern_node(&p, "abs", "Abs");
    int32_t e = kiln_pattern_node(&p, "exp", "Exp"), r = kiln_pattern_node(&p, "relu", "Relu");
    CU_ASSERT_EQUAL(kiln_pattern_edge(&p, d, 0, a, 0), KILN_OK);
    CU_ASSERT_EQUAL(kiln_pattern_edge(&p, a, 0, e, 0), KILN_OK);
    CU_ASSERT_EQUAL(kiln_pattern_edge(&p, a, 0, r, 0), KILN_OK);
    CU_ASSERT_EQUAL(kiln_pattern_output(&p, e, 0), KILN_OK);
    CU_ASSERT_EQUAL(kiln_pattern_output(&p, r, 0), KILN_OK);
    char buf[256];
    CU_ASSERT_EQUAL(all_matches(&p, g, buf, sizeof(buf)), 1);
    CU_ASSERT_STRING_EQUAL(buf, "abs1,exp,relu;");
    kiln__pattern_free(&p);
    kiln_graph_destroy(g);
}

static void test_match_m2_data_binds_shared_producer_and_accessors(void)
{
    kiln_graph *g = t1();
    kiln_pattern p;
    kiln__pattern_init(&p);
    int32_t d = kiln_pattern_node(&p, "data", "Data");
    int32_t e = kiln_pattern_node(&p, "exp", "Exp"), r = kiln_pattern_node(&p, "relu", "Relu");
    kiln_pattern_edge(&p, d, 0, e, 0);
    kiln_pattern_edge(&p, d, 0, r, 0);
    kiln_pattern_output(&p, e, 0);
    kiln_pattern_output(&p, r, 0);
    char buf[256];
    CU_ASSERT_EQUAL(all_matches(&p, g, buf, sizeof(buf)), 1);
    CU_ASSERT_STRING_EQUAL(buf, "exp,relu;");
    /* the accessors and the boundary */
    kiln_matcher *mt = kiln__matcher_create(&p, g);
    kiln__matcher_begin(mt, 0);
    const kiln_match *m = kiln__matcher_next(mt);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_EQUAL(kiln_match_pattern_index(m), 0);
    CU_ASSERT_EQUAL(kiln_match_node(m, d), 0); /* Data */
    CU_ASSERT_EQUAL(kiln_match_node(m, e), kiln_graph_find_node(g, "exp"));
    CU_ASSERT_EQUAL(kiln_match_node(m, 9), 0);
    CU_ASSERT_EQUAL(kiln_match_input_count(m), 1);
    CU_ASSERT_EQUAL(kiln_match_input(m, 0).node, kiln_graph_find_node(g, "abs1"));
    CU_ASSERT_EQUAL(kiln_match_input(m, 0).index, 0);
    CU_ASSERT_EQUAL(kiln_match_input(m, 1).node, 0);
    CU_ASSERT_EQUAL(kiln_match_output_count(m), 2);
    CU_ASSERT_EQUAL(kiln_match_output(m, 1).node, kiln_graph_find_node(g, "relu"));
    const kiln_fusion_boundary *b = kiln_match_boundary(m);
    CU_ASSERT_EQUAL(b->node_count, 2);
    CU_ASSERT_EQUAL(b->input_count, 1);
    CU_ASSERT_EQUAL(b->output_count, 2);
    CU_ASSERT_EQUAL(b->outputs[0].node, kiln_graph_find_node(g, "exp"));
    CU_ASSERT_PTR_NULL(kiln__matcher_next(mt));
    kiln__matcher_destroy(mt);
    kiln__pattern_free(&p);
    kiln_graph_destroy(g);
}

static void test_match_m3_one_data_binds_one_producer(void)
{
    kiln_graph *g = kiln_test_graph("t3");
    kiln_node_id d = kiln_test_node(g, "data", "Data", 0, 1);
    kiln_node_id a1 = kiln_test_node(g, "abs1", "Abs", 1, 1);
    kiln_node_id a2 = kiln_test_node(g, "abs2", "Abs", 1, 1);
    kiln_node_id e = kiln_test_node(g, "exp", "Exp", 1, 1);
    kiln_node_id r = kiln_test_node(g, "relu", "Relu", 1, 1);
    kiln_node_id o = kiln_test_node(g, "out", "NetOutput", 2, 0);
    kiln_test_edge(g, d, 0, a1, 0);
    kiln_test_edge(g, d, 0, a2, 0);
    kiln_test_edge(g, a1, 0, e, 0);
    kiln_test_edge(g, a2, 0, r, 0);
    kiln_test_edge(g, e, 0, o, 0);
    kiln_test_edge(g, r, 0, o, 1);
    kiln_pattern p;
    kiln__pattern_init(&p);
    int32_t pd = kiln_pattern_node(&p, "data", "Data");
    int32_t pe = kiln_pattern_node(&p, "exp", "Exp"), pr = kiln_pattern_node(&p, "relu", "Relu");
    kiln_pattern_edge(&p, pd, 0, pe, 0);
    kiln_pattern_edge(&p, pd, 0, pr, 0);
    kiln_pattern_output(&p, pe, 0);
    kiln_pattern_output(&p, pr, 0);
    char buf[256];
    CU_ASSERT_EQUAL(all_matches(&p, g, buf, sizeof(buf)), 0);
    kiln__pattern_free(&p);
    kiln_graph_destroy(g);
}

static void test_match_m4_branch_through_other_producer_fails(void)
{
    kiln_graph *g = t1();
    kiln_pattern p;
    kiln__pattern_init(&p);
    int32_t d = kiln_pattern_node(&p, "data", "Data"), a = kiln_pattern_node(&p, "abs", "Abs");
    int32_t e = kiln_pattern_node(&p, "exp", "Exp"), r = kiln_pattern_node(&p, "relu", "Relu");
    kiln_pattern_edge(&p, d, 0, a, 0);
    kiln_pattern_edge(&p, a, 0, e, 0);
    kiln_pattern_edge(&p, d, 0, r, 0);
    kiln_pattern_output(&p, e, 0);
    kiln_pattern_output(&p, r, 0);
    char buf[256];
    CU_ASSERT_EQUAL(all_matches(&p, g, buf, sizeof(buf)), 0);
    kiln__pattern_free(&p);
    kiln_graph_destroy(g);
}

static void test_match_m6_inner_node_as_output_keeps_boundary(void)
{
    kiln_graph *g = t1();
    char buf[256];
    for (int with_abs_output = 0; with_abs_output < 2; with_abs_output++) {
        kiln_pattern p;
        kiln__pattern_init(&p);
        int32_t d = kiln_pattern_node(&p, "data", "Data"), a = kiln_pattern_node(&p, "abs", "Abs");
        int32_t r = kiln_pattern_node(&p, "relu", "Relu");
        kiln_pattern_edge(&p, d, 0, a, 0);
        kiln_pattern_edge(&p, a, 0, r, 0);
        kiln_pattern_output(&p, r, 0);
        if (with_abs_output)
            kiln_pattern_output(&p, a, 0);
        /* abs1 also feeds exp: only self-contained when abs1 is an output */
        CU_ASSERT_EQUAL(all_matches(&p, g, buf, sizeof(buf)), with_abs_output ? 1 : 0);
        if (with_abs_output)
            CU_ASSERT_STRING_EQUAL(buf, "abs1,relu;");
        kiln__pattern_free(&p);
    }
    kiln_graph_destroy(g);
}

/* Validate @p p and expect ERR_INVALID with @p msg. */
static void expect_invalid(kiln_pattern *p, const char *msg)
{
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(kiln__pattern_validate(p, "FooPass", &err), KILN_ERR_INVALID);
    const char *got = kiln_error_message(&err);
    if (!got || !strstr(got, msg)) {
        fprintf(stderr, "expected '%s', got '%s'\n", msg, got ? got : "(null)");
        CU_FAIL("wrong message");
    }
    kiln__pattern_free(p);
}

static void test_match_m8_invalid_patterns_are_rejected(void)
{
    kiln_pattern p;
    kiln__pattern_init(&p);
    expect_invalid(&p, "fusion pass FooPass declares no pattern");

    kiln__pattern_init(&p);
    int32_t d = kiln_pattern_node(&p, "x", "Data"), r = kiln_pattern_node(&p, "r", "Relu");
    kiln_pattern_edge(&p, d, 0, r, 0);
    expect_invalid(&p, "pattern 0 of FooPass has no output");

    /* the second alternative lacks an output */
    kiln__pattern_init(&p);
    d = kiln_pattern_node(&p, "x", "Data"), r = kiln_pattern_node(&p, "r", "Relu");
    kiln_pattern_edge(&p, d, 0, r, 0);
    kiln_pattern_output(&p, r, 0);
    CU_ASSERT_EQUAL(kiln_pattern_next(&p), KILN_OK);
    kiln_pattern_node(&p, "y", "Exp");
    expect_invalid(&p, "pattern 1 of FooPass has no output");

    kiln__pattern_init(&p);
    int32_t a = kiln_pattern_node(&p, "a", "Relu"), b = kiln_pattern_node(&p, "b", "Relu");
    kiln_pattern_edge(&p, a, 0, b, 0);
    kiln_pattern_edge(&p, b, 0, a, 0);
    kiln_pattern_output(&p, b, 0);
    expect_invalid(&p, "pattern 0 of FooPass has a cycle");

    kiln__pattern_init(&p);
    a = kiln_pattern_node(&p, "a", "Relu"), d = kiln_pattern_node(&p, "x", "Data");
    kiln_pattern_edge(&p, a, 0, d, 0);
    kiln_pattern_output(&p, a, 0);
    expect_invalid(&p, "Data node 'x' has an input");

    kiln__pattern_init(&p);
    d = kiln_pattern_node(&p, "x", "Data");
    kiln_pattern_output(&p, d, 0);
    expect_invalid(&p, "output 'x' is a Data node");

    kiln__pattern_init(&p);
    d = kiln_pattern_node(&p, "x", "Data"), a = kiln_pattern_node(&p, "add", "Add");
    kiln_pattern_edge(&p, d, 0, a, 1);
    kiln_pattern_output(&p, a, 0);
    expect_invalid(&p, "node 'add' has 1 inputs but input 1 is connected");

    kiln__pattern_init(&p);
    a = kiln_pattern_node(&p, "a", "Relu");
    kiln_pattern_node(&p, "stray", "Exp");
    kiln_pattern_output(&p, a, 0);
    expect_invalid(&p, "node 'stray' is on no path to an output");

    /* the builders refuse what they can see at once */
    kiln__pattern_init(&p);
    a = kiln_pattern_node(&p, "a", "Relu");
    CU_ASSERT_EQUAL(kiln_pattern_next(&p), KILN_OK);
    b = kiln_pattern_node(&p, "b", "Relu");
    CU_ASSERT_EQUAL(kiln_pattern_edge(&p, a, 0, b, 0), KILN_ERR_INVALID); /* two alternatives */
    CU_ASSERT_EQUAL(kiln_pattern_output(&p, a, 0), KILN_ERR_INVALID);     /* not current */
    CU_ASSERT_EQUAL(kiln_pattern_output(&p, 7, 0), KILN_ERR_INVALID);
    CU_ASSERT_EQUAL(kiln_pattern_set_flags(&p, 0x80), KILN_ERR_INVALID);
    float v = 1;
    kiln_tensor_value tv = {KILN_DT_FLOAT32, 0, NULL, &v, sizeof(v)};
    CU_ASSERT_EQUAL(kiln_pattern_const_value(&p, b, &tv), KILN_ERR_INVALID); /* not a Const */
    kiln__pattern_free(&p);
}

/* add(c, relu(d)): the pattern has Relu on input 0 of Add. */
static void test_match_commutative_on_and_off(void)
{
    kiln_graph *g = kiln_test_graph("comm");
    kiln_node_id c = kiln_test_node(g, "c", "Data", 0, 1);
    kiln_node_id d = kiln_test_node(g, "d", "Data", 0, 1);
    kiln_node_id r = kiln_test_node(g, "relu", "Relu", 1, 1);
    kiln_node_id add = kiln_test_node(g, "add", "Add", 2, 1);
    kiln_node_id sub = kiln_test_node(g, "sub", "Sub", 2, 1);
    kiln_node_id r2 = kiln_test_node(g, "relu2", "Relu", 1, 1);
    kiln_node_id o = kiln_test_node(g, "out", "NetOutput", 2, 0);
    kiln_test_edge(g, d, 0, r, 0);
    kiln_test_edge(g, c, 0, add, 0);
    kiln_test_edge(g, r, 0, add, 1);
    kiln_test_edge(g, d, 0, r2, 0);
    kiln_test_edge(g, c, 0, sub, 0);
    kiln_test_edge(g, r2, 0, sub, 1);
    kiln_test_edge(g, add, 0, o, 0);
    kiln_test_edge(g, sub, 0, o, 1);
    char buf[256];
    for (int comm = 0; comm < 2; comm++) {
        for (int opi = 0; opi < 2; opi++) {
            const char *op = opi ? "Sub" : "Add"; /* Sub is not commutative */
            kiln_pattern p;
            kiln__pattern_init(&p);
            if (comm)
                CU_ASSERT_EQUAL(kiln_pattern_set_flags(&p, KILN_PATTERN_COMMUTATIVE), KILN_OK);
            int32_t x = kiln_pattern_node(&p, "x", "Data"), y = kiln_pattern_node(&p, "y", "Data");
            int32_t pr = kiln_pattern_node(&p, "r", "Relu"), pa = kiln_pattern_node(&p, "a", op);
            kiln_pattern_edge(&p, x, 0, pr, 0);
            kiln_pattern_edge(&p, pr, 0, pa, 0);
            kiln_pattern_edge(&p, y, 0, pa, 1);
            kiln_pattern_output(&p, pa, 0);
            int n = all_matches(&p, g, buf, sizeof(buf));
            CU_ASSERT_EQUAL(n, comm && !opi ? 1 : 0);
            if (n == 1) {
                CU_ASSERT_STRING_EQUAL(buf, "relu,add;");
                kiln_matcher *mt = kiln__matcher_create(&p, g);
                kiln__matcher_begin(mt, 0);
                const kiln_match *m = kiln__matcher_next(mt);
                CU_ASSERT_PTR_NOT_NULL_FATAL(m);
                /* inputs in pattern-node order: x binds d, y binds c */
                CU_ASSERT_EQUAL(kiln_match_input(m, 0).node, d);
                CU_ASSERT_EQUAL(kiln_match_input(m, 1).node, c);
                kiln__matcher_destroy(mt);
            }
            kiln__pattern_free(&p);
        }
    }
    kiln_graph_destroy(g);
}

static kiln_node_id add_const(kiln_graph *g, const char *name, const char *op, float v)
{
    kiln_node_id c = kiln_test_node(g, name, op, 0, 1);
    int64_t dims[1] = {1};
    kiln_tensor_value tv = {KILN_DT_FLOAT32, 1, dims, &v, sizeof(v)};
    CU_ASSERT_EQUAL_FATAL(kiln_attrs_set_tensor(kiln_node_attrs_mut(g, c), "value", &tv), KILN_OK);
    return c;
}

static void test_match_const_and_const_value(void)
{
    kiln_graph *g = kiln_test_graph("cv");
    kiln_node_id x = kiln_test_node(g, "x", "Data", 0, 1);
    kiln_node_id c2 = add_const(g, "c2", "Const", 2.0f);
    kiln_node_id c3 = add_const(g, "c3", "Const", 3.0f);
    kiln_node_id k2 = add_const(g, "k2", "Constant", 2.0f);
    kiln_node_id m1 = kiln_test_node(g, "mul1", "Mul", 2, 1);
    kiln_node_id m2 = kiln_test_node(g, "mul2", "Mul", 2, 1);
    kiln_node_id m3 = kiln_test_node(g, "mul3", "Mul", 2, 1);
    kiln_node_id m4 = kiln_test_node(g, "mul4", "Mul", 2, 1);
    kiln_node_id o = kiln_test_node(g, "out", "NetOutput", 4, 0);
    kiln_test_edge(g, x, 0, m1, 0);
    kiln_test_edge(g, c2, 0, m1, 1);
    kiln_test_edge(g, x, 0, m2, 0);
    kiln_test_edge(g, c3, 0, m2, 1);
    kiln_test_edge(g, x, 0, m3, 0);
    kiln_test_edge(g, k2, 0, m3, 1);
    kiln_test_edge(g, x, 0, m4, 0);
    kiln_test_edge(g, x, 0, m4, 1); /* no constant at all */
    kiln_test_edge(g, m1, 0, o, 0);
    kiln_test_edge(g, m2, 0, o, 1);
    kiln_test_edge(g, m3, 0, o, 2);
    kiln_test_edge(g, m4, 0, o, 3);
    char buf[256];
    for (int byvalue = 0; byvalue < 2; byvalue++) {
        kiln_pattern p;
        kiln__pattern_init(&p);
        if (byvalue)
            kiln_pattern_set_flags(&p, KILN_PATTERN_CONST_VALUE);
        int32_t pd = kiln_pattern_node(&p, "x", "Data"), pc = kiln_pattern_node(&p, "c", "Const");
        int32_t pm = kiln_pattern_node(&p, "m", "Mul");
        float two = 2.0f;
        int64_t dims[1] = {1};
        kiln_tensor_value tv = {KILN_DT_FLOAT32, 1, dims, &two, sizeof(two)};
        CU_ASSERT_EQUAL(kiln_pattern_const_value(&p, pc, &tv), KILN_OK);
        kiln_pattern_edge(&p, pd, 0, pm, 0);
        kiln_pattern_edge(&p, pc, 0, pm, 1);
        kiln_pattern_output(&p, pm, 0);
        CU_ASSERT_EQUAL(all_matches(&p, g, buf, sizeof(buf)), byvalue ? 2 : 3);
        CU_ASSERT_STRING_EQUAL(buf, byvalue ? "c2,mul1;k2,mul3;" : "c2,mul1;c3,mul2;k2,mul3;");
        kiln__pattern_free(&p);
    }
    kiln_graph_destroy(g);
}

static void test_match_alternatives_and_unknown_ops(void)
{
    kiln_graph *g = t1();
    kiln_pattern p;
    kiln__pattern_init(&p);
    /* alternative 0: Relu->Add input 1 ... uses an op the graph never saw */
    int32_t x = kiln_pattern_node(&p, "x", "Data"), w = kiln_pattern_node(&p, "w", "NoSuchOp");
    kiln_pattern_edge(&p, x, 0, w, 0);
    kiln_pattern_output(&p, w, 0);
    CU_ASSERT_EQUAL(kiln_pattern_next(&p), KILN_OK);
    /* alternative 1: Abs -> Exp */
    int32_t y = kiln_pattern_node(&p, "y", "Data"), a = kiln_pattern_node(&p, "a", "Abs");
    int32_t e = kiln_pattern_node(&p, "e", "Exp");
    kiln_pattern_edge(&p, y, 0, a, 0);
    kiln_pattern_edge(&p, a, 0, e, 0);
    kiln_pattern_output(&p, e, 0);
    CU_ASSERT_EQUAL(kiln_pattern_next(&p), KILN_OK);
    /* alternative 2: Exp -> Add(0), Relu -> Add(1), the Add's whole input side */
    int32_t z1 = kiln_pattern_node(&p, "z1", "Data"), z2 = kiln_pattern_node(&p, "z2", "Data");
    int32_t e2 = kiln_pattern_node(&p, "e2", "Exp"), r2 = kiln_pattern_node(&p, "r2", "Relu");
    int32_t s = kiln_pattern_node(&p, "s", "Add");
    kiln_pattern_edge(&p, z1, 0, e2, 0);
    kiln_pattern_edge(&p, z2, 0, r2, 0);
    kiln_pattern_edge(&p, e2, 0, s, 0);
    kiln_pattern_edge(&p, r2, 0, s, 1);
    kiln_pattern_output(&p, s, 0);
    char buf[256];
    /* alternative 1 fails the boundary (abs1 also feeds relu) */
    CU_ASSERT_EQUAL(all_matches(&p, g, buf, sizeof(buf)), 1);
    CU_ASSERT_STRING_EQUAL(buf, "exp,relu,add;");
    kiln_matcher *mt = kiln__matcher_create(&p, g);
    kiln__matcher_begin(mt, 2);
    const kiln_match *m = kiln__matcher_next(mt);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_EQUAL(kiln_match_pattern_index(m), 2);
    CU_ASSERT_EQUAL(kiln_match_node(m, a), 0); /* another alternative */
    CU_ASSERT_EQUAL(kiln_match_node(m, s), kiln_graph_find_node(g, "add"));
    CU_ASSERT_EQUAL(kiln_match_input_count(m), 2); /* both bind abs1:0 */
    CU_ASSERT_EQUAL(kiln_match_input(m, 0).node, kiln_match_input(m, 1).node);
    kiln__matcher_destroy(mt);
    kiln__pattern_free(&p);
    kiln_graph_destroy(g);
}

/* A node removed after the matcher was created is skipped; a node created
 * after it is never matched. */
static void test_match_skips_dead_and_new_nodes(void)
{
    kiln_graph *g = kiln_test_graph("chain");
    kiln_node_id x = kiln_test_node(g, "x", "Data", 0, 1);
    kiln_node_id r1 = kiln_test_node(g, "r1", "Relu", 1, 1);
    kiln_node_id r2 = kiln_test_node(g, "r2", "Relu", 1, 1);
    kiln_node_id r3 = kiln_test_node(g, "r3", "Relu", 1, 1);
    kiln_node_id o = kiln_test_node(g, "out", "NetOutput", 1, 0);
    kiln_test_edge(g, x, 0, r1, 0);
    kiln_test_edge(g, r1, 0, r2, 0);
    kiln_test_edge(g, r2, 0, r3, 0);
    kiln_test_edge(g, r3, 0, o, 0);
    kiln_pattern p;
    kiln__pattern_init(&p);
    int32_t d = kiln_pattern_node(&p, "x", "Data"), a = kiln_pattern_node(&p, "a", "Relu");
    int32_t b = kiln_pattern_node(&p, "b", "Relu");
    kiln_pattern_edge(&p, d, 0, a, 0);
    kiln_pattern_edge(&p, a, 0, b, 0);
    kiln_pattern_output(&p, b, 0);
    CU_ASSERT_EQUAL_FATAL(kiln__pattern_validate(&p, "T", &err), KILN_OK);
    kiln_matcher *mt = kiln__matcher_create(&p, g);
    kiln__matcher_begin(mt, 0);
    const kiln_match *m = kiln__matcher_next(mt);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_EQUAL(kiln_match_node(m, b), r2);
    /* replace r1,r2 by a new node n by hand */
    kiln_node_id n = kiln_test_node(g, "n", "Relu", 1, 1);
    kiln_edge_remove(g, r3, 0);
    kiln_test_edge(g, x, 0, n, 0);
    kiln_test_edge(g, n, 0, r3, 0);
    CU_ASSERT_EQUAL(kiln_graph_remove_node(g, r2), KILN_OK);
    CU_ASSERT_EQUAL(kiln_graph_remove_node(g, r1), KILN_OK);
    /* r3(n(x)) would match, but n is newer than the matcher */
    CU_ASSERT_PTR_NULL(kiln__matcher_next(mt));
    kiln__matcher_destroy(mt);
    kiln__pattern_free(&p);
    kiln_graph_destroy(g);
}

int main(void)
{
    static const kiln_test_case cases[] = {
        {"test_match_m1_multi_output_from_shared_producer",
         test_match_m1_multi_output_from_shared_producer},
        {"test_match_m2_data_binds_shared_producer_and_accessors",
         test_match_m2_data_binds_shared_producer_and_accessors},
        {"test_match_m3_one_data_binds_one_producer", test_match_m3_one_data_binds_one_producer},
        {"test_match_m4_branch_through_other_producer_fails",
         test_match_m4_branch_through_other_producer_fails},
        {"test_match_m6_inner_node_as_output_keeps_boundary",
         test_match_m6_inner_node_as_output_keeps_boundary},
        {"test_match_m8_invalid_patterns_are_rejected",
         test_match_m8_invalid_patterns_are_rejected},
        {"test_match_commutative_on_and_off", test_match_commutative_on_and_off},
        {"test_match_const_and_const_value", test_match_const_and_const_value},
        {"test_match_alternatives_and_unknown_ops", test_match_alternatives_and_unknown_ops},
        {"test_match_skips_dead_and_new_nodes", test_match_skips_dead_and_new_nodes},
        {NULL, NULL}};
    return kiln_test_run("fusion_match", cases);
}

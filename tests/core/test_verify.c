/*
 * test_verify.c - the IR verifier.  Broken IR is made by poking graph_int.h
 * internals (or through edits the API allows but the verifier rejects, such
 * as cycles); each test checks that the message names the graph, the node
 * and the broken rule.  Also: subgraph rules, verify_one vs verify, and a
 * million-node chain (no recursion, linear time).
 */
#include "kiln_test.h"
#include "graph_int.h"
#include "verify.h"

/* Expect verification of @p g to fail with every fragment in the message. */
static void expect_fail(const kiln_graph *g, const char *f1, const char *f2, const char *f3)
{
    kiln_error err = {0};
    kiln_status st = kiln_graph_verify(g, &err);
    const char *msg = kiln_error_message(&err);
    bool ok = st == KILN_ERR_VERIFY && strstr(msg, f1) && (!f2 || strstr(msg, f2)) &&
              (!f3 || strstr(msg, f3));
    if (!ok)
        fprintf(stderr, "\nstatus %s, message \"%s\"; wanted \"%s\", \"%s\", \"%s\"\n",
                kiln_status_name(st), msg, f1, f2 ? f2 : "", f3 ? f3 : "");
    CU_ASSERT(ok);
}

/* d -> a -> b, d -> b; c -ctrl-> b; out NetOutput. */
static kiln_graph *small(kiln_node_id *ids)
{
    kiln_graph *g = kiln_test_graph("main");
    ids[0] = kiln_test_node(g, "d", "Data", 0, 1);
    ids[1] = kiln_test_node(g, "a", "Relu", 1, 2);
    ids[2] = kiln_test_node(g, "b", "Add", 2, 1);
    ids[3] = kiln_test_node(g, "c", "NoOp", 0, 0);
    ids[4] = kiln_test_node(g, "out", "NetOutput", 1, 0);
    kiln_edge_add(g, ids[0], 0, ids[1], 0);
    kiln_edge_add(g, ids[1], 0, ids[2], 0);
    kiln_edge_add(g, ids[0], 0, ids[2], 1);
    kiln_edge_add(g, ids[2], 0, ids[4], 0);
    kiln_ctrl_add(g, ids[3], ids[2]);
    kiln_test_verify_ok(g);
    return g;
}

static void test_verify_accepts_valid_graph(void)
{
    kiln_node_id n[5];
    kiln_graph *g = small(n);
    kiln_graph_remove_node(g, n[1]); /* tombstones are fine */
    kiln_test_verify_ok(g);
    kiln_graph_destroy(g);
}

static void test_verify_input_missing_from_consumer_list(void)
{
    kiln_node_id n[5];
    kiln_graph *g = small(n);
    g->out_head[g->nodes[n[1]].out_off] = 0; /* a:0, consumed by b */
    expect_fail(g, "graph \"main\": node \"b\"", "edge symmetry", "missing from the producer");
    kiln_graph_destroy(g);
}

static void test_verify_consumer_points_elsewhere(void)
{
    kiln_node_id n[5];
    kiln_graph *g = small(n);
    g->in[g->nodes[n[2]].in_off].src_idx = 1; /* b:0 claims a:1 but sits in a:0's list */
    expect_fail(g, "node \"a\"", "edge symmetry", "output 0 lists input 0 of \"b\"");
    kiln_graph_destroy(g);
}

static void test_verify_broken_record(void)
{
    kiln_node_id n[5];
    kiln_graph *g = small(n);
    g->in[g->nodes[n[4]].in_off].dst = n[3];
    expect_fail(g, "node \"out\"", "input record", NULL);
    kiln_graph_destroy(g);
}

static void test_verify_dead_reference(void)
{
    kiln_node_id n[5];
    kiln_graph *g = small(n);
    /* Tombstone "a" without dropping its edges: d's consumer list points at it. */
    g->nodes[n[1]].flags |= KILN_NODEF_DEAD;
    g->live--;
    expect_fail(g, "node \"d\"", "dead reference", "output 0 is consumed by dead node id 2");
    kiln_graph_destroy(g);
    /* Tombstone the producer "d": its consumers' inputs point at it. */
    g = small(n);
    g->nodes[n[0]].flags |= KILN_NODEF_DEAD;
    g->live--;
    expect_fail(g, "node \"a\"", "dead reference", "input 0 is fed by dead node id 1");
    kiln_graph_destroy(g);
}

static void test_verify_control_asymmetric(void)
{
    kiln_node_id n[5];
    kiln_graph *g = small(n);
    g->nodes[n[2]].ctrl_in = 0; /* b forgets its control input from c */
    expect_fail(g, "node \"c\"", "control symmetry", "missing from its in-list");
    kiln_graph_destroy(g);
}

static void test_verify_control_self_loop(void)
{
    kiln_node_id n[5];
    kiln_graph *g = small(n);
    uint32_t c = g->nodes[n[3]].ctrl_out;
    g->ctrl[c].dst = n[3];
    expect_fail(g, "node \"c\"", "control symmetry", "control edge to itself");
    kiln_graph_destroy(g);
}

static void test_verify_duplicate_name(void)
{
    kiln_node_id n[5];
    kiln_graph *g = small(n);
    g->cold[n[3]].name = g->cold[n[1]].name; /* "c" renamed "a" behind the index */
    expect_fail(g, "names", "duplicate name", NULL);
    kiln_graph_destroy(g);
}

static void test_verify_data_cycle_names_node_on_it(void)
{
    kiln_graph *g = kiln_test_graph("cyc");
    /* z (downstream of the cycle, lowest id) must not be the one reported. */
    kiln_node_id z = kiln_test_node(g, "z", "Neg", 1, 1);
    kiln_node_id d = kiln_test_node(g, "d", "Data", 0, 1);
    kiln_node_id x = kiln_test_node(g, "x", "Add", 2, 1);
    kiln_node_id y = kiln_test_node(g, "y", "Relu", 1, 1);
    kiln_edge_add(g, d, 0, x, 0);
    kiln_edge_add(g, x, 0, y, 0);
    kiln_edge_add(g, y, 0, x, 1);
    kiln_edge_add(g, y, 0, z, 0);
    expect_fail(g, "graph \"cyc\": node \"y\"", "cycle", "\"y\" <- \"x\" <- \"y\"");
    kiln_error err = {0};
    kiln_graph_verify(g, &err);
    CU_ASSERT_PTR_NULL(strstr(kiln_error_message(&err), "node \"z\""));
    CU_ASSERT_PTR_NULL(strstr(kiln_error_message(&err), "node \"d\""));
    kiln_graph_destroy(g);
}

static void test_verify_control_cycle(void)
{
    kiln_node_id n[5];
    kiln_graph *g = small(n);
    kiln_ctrl_add(g, n[4], n[1]); /* out => a, and a -> b -> out */
    expect_fail(g, "cycle", "\"out\"", "\"a\"");
    kiln_graph_destroy(g);
}

/* Root with an If whose branches are built by the caller. */
static kiln_graph *with_if(kiln_graph **then_g, kiln_node_id *ifn)
{
    kiln_graph *g = kiln_test_graph("root");
    kiln_node_id p = kiln_test_node(g, "p", "Data", 0, 1);
    *ifn = kiln_test_node(g, "if", "If", 2, 1);
    kiln_edge_add(g, p, 0, *ifn, 0);
    kiln_edge_add(g, p, 0, *ifn, 1);
    kiln_graph *t = kiln_node_add_subgraph(g, *ifn, "then_branch", "then");
    CU_ASSERT_FATAL(t != NULL);
    kiln_node_id td = kiln_test_node(t, "td", "Data", 0, 1);
    kiln_node_id to = kiln_test_node(t, "to", "NetOutput", 1, 0);
    kiln_attrs_set_int(kiln_node_attrs_mut(t, td), "_parent_node_index", 1);
    kiln_edge_add(t, td, 0, to, 0);
    *then_g = t;
    kiln_test_verify_ok(g);
    return g;
}

static void test_verify_parent_node_index_range(void)
{
    kiln_graph *t;
    kiln_node_id ifn;
    kiln_graph *g = with_if(&t, &ifn);
    kiln_attrs_set_int(kiln_node_attrs_mut(t, kiln_graph_find_node(t, "td")), "_parent_node_index",
                       2);
    expect_fail(g, "graph \"then\": node \"td\"", "Data: _parent_node_index 2 out of range",
                "parent node \"if\" has 2 inputs");
    kiln_attrs_remove(kiln_node_attrs_mut(t, kiln_graph_find_node(t, "td")), "_parent_node_index");
    expect_fail(g, "node \"td\"", "without int _parent_node_index", NULL);
    kiln_graph_destroy(g);
}

static void test_verify_netoutput_rules(void)
{
    kiln_graph *t;
    kiln_node_id ifn;
    kiln_graph *g = with_if(&t, &ifn);
    kiln_node_id to = kiln_graph_find_node(t, "to");
    kiln_tensor_desc *d = kiln_node_input_desc_mut(t, to, 0);
    kiln_attrs_set_int(kiln_desc_attrs_mut(t, d), "_parent_node_index", 1);
    expect_fail(g, "node \"to\"", "NetOutput: input 0 maps to parent output 1",
                "parent node \"if\" has 1 outputs");
    kiln_attrs_set_int(kiln_desc_attrs_mut(t, d), "_parent_node_index", 0);
    kiln_test_verify_ok(g);
    kiln_node_id to2 = kiln_test_node(t, "to2", "NetOutput", 0, 1);
    expect_fail(g, "node \"to2\"", "second NetOutput", NULL);
    kiln_graph_remove_node(t, to2);
    kiln_graph_remove_node(t, to);
    expect_fail(g, "graph \"then\"", "subgraph has no NetOutput", NULL);
    /* Root: at most one NetOutput; NetOutput outputs are not consumed. */
    kiln_graph_destroy(g);
    g = kiln_test_graph("r");
    kiln_node_id o1 = kiln_test_node(g, "o1", "NetOutput", 0, 1);
    kiln_node_id u = kiln_test_node(g, "u", "Neg", 1, 1);
    kiln_edge_add(g, o1, 0, u, 0);
    expect_fail(g, "node \"o1\"", "NetOutput: output 0 is consumed", NULL);
    kiln_graph_destroy(g);
}

static void test_verify_while_cond_maps_no_output(void)
{
    kiln_graph *g = kiln_test_graph("w");
    kiln_node_id x = kiln_test_node(g, "x", "Data", 0, 1);
    kiln_node_id w = kiln_test_node(g, "loop", "While", 1, 1);
    kiln_edge_add(g, x, 0, w, 0);
    kiln_graph *c = kiln_node_add_subgraph(g, w, "cond", "cond");
    kiln_node_id cd = kiln_test_node(c, "cd", "Data", 0, 1);
    kiln_node_id k = kiln_test_node(c, "k", "Const", 0, 1);
    kiln_node_id co = kiln_test_node(c, "co", "NetOutput", 2, 0); /* 2 inputs > 1 parent output */
    kiln_attrs_set_int(kiln_node_attrs_mut(c, cd), "_parent_node_index", 0);
    kiln_edge_add(c, k, 0, co, 0);
    kiln_edge_add(c, cd, 0, co, 1);
    kiln_test_verify_ok(g);
    kiln_graph *b = kiln_node_add_subgraph(g, w, "body", "body");
    kiln_test_node(b, "bo", "NetOutput", 2, 0);
    expect_fail(g, "graph \"body\": node \"bo\"", "input 1 maps to parent output 1", NULL);
    kiln_graph_destroy(g);
}

static void test_verify_subgraph_links(void)
{
    kiln_graph *t;
    kiln_node_id ifn;
    kiln_graph *g = with_if(&t, &ifn);
    t->depth = 5;
    expect_fail(g, "graph \"then\"", "subgraph: depth 5 but parent depth 1", NULL);
    t->depth = 2;
    kiln_node_id other = kiln_test_node(g, "other", "NoOp", 0, 0);
    t->parent_node = other;
    expect_fail(g, "node \"if\"", "subgraph 0 (\"then\") does not link back", NULL);
    t->parent_node = ifn;
    g->nodes[ifn].flags &= ~KILN_NODEF_HAS_SUBGRAPH;
    expect_fail(g, "node \"if\"", "subgraph flag", NULL);
    g->nodes[ifn].flags |= KILN_NODEF_HAS_SUBGRAPH;
    kiln_test_verify_ok(g);
    kiln_graph_destroy(g);
}

static void test_verify_one_skips_subgraphs(void)
{
    kiln_graph *t;
    kiln_node_id ifn;
    kiln_graph *g = with_if(&t, &ifn);
    kiln_attrs_set_int(kiln_node_attrs_mut(t, kiln_graph_find_node(t, "td")), "_parent_node_index",
                       9);
    kiln_error err = {0};
    CU_ASSERT_EQUAL(kiln_graph_verify_one(g, &err), KILN_OK);
    CU_ASSERT_EQUAL(kiln_graph_verify(g, &err), KILN_ERR_VERIFY);
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(kiln_graph_verify(t, &err), KILN_ERR_VERIFY);
    kiln_graph_destroy(g);
}

/* A pass may set any ref_input the descriptor holds (up to INT16_MAX); the
 * verifier must refuse one that names no input of the node. */
static void test_verify_ref_input_range(void)
{
    kiln_node_id n[5];
    kiln_graph *g = small(n);
    kiln_tensor_desc *d = kiln_node_output_desc(g, n[2], 0); /* b: Add, 2 inputs */
    CU_ASSERT_EQUAL(kiln_desc_set_ref_input(g, d, 1), KILN_OK);
    kiln_test_verify_ok(g);
    CU_ASSERT_EQUAL(kiln_desc_set_ref_input(g, d, 300), KILN_OK);
    expect_fail(g, "node \"b\"", "ref_input: output 0: ref_input 300 out of range",
                "the node has 2 inputs");
    CU_ASSERT_EQUAL(kiln_desc_set_ref_input(g, d, 2), KILN_OK);
    expect_fail(g, "node \"b\"", "ref_input 2 out of range", NULL);
    kiln_desc_set_ref_input(g, d, -1);
    kiln_test_verify_ok(g);
    kiln_graph_destroy(g);
}

/* The typed-attribute table: node, descriptor and graph attributes, and the
 * op filter (`index` is fixed on Data nodes only). */
static void test_verify_attribute_types(void)
{
    kiln_node_id n[5];
    kiln_graph *g = small(n);
    kiln_attrs *da = kiln_node_attrs_mut(g, n[0]);
    kiln_attrs_set_string(da, "index", "zero");
    expect_fail(g, "node \"d\"", "attribute type: attribute \"index\" must be int, found string",
                NULL);
    kiln_attrs_set_int(da, "index", 0);
    kiln_test_verify_ok(g);
    /* "index" on another op is not the Data input position: any type */
    kiln_attrs_set_string(kiln_node_attrs_mut(g, n[1]), "index", "whatever");
    kiln_test_verify_ok(g);

    kiln_attrs *ba = kiln_node_attrs_mut(g, n[2]);
    kiln_attrs_set_int(ba, "_input_mutable", 1);
    expect_fail(g, "node \"b\"", "\"_input_mutable\" must be bool, found int", NULL);
    kiln_attrs_set_bool(ba, "_input_mutable", true);
    kiln_test_verify_ok(g);
    int64_t mt[] = {17};
    kiln_attrs_set_int(ba, "_input_memory_type", 17);
    expect_fail(g, "node \"b\"", "\"_input_memory_type\" must be list_int, found int", NULL);
    kiln_attrs_set_list_int(ba, "_input_memory_type", mt, 1);
    kiln_test_verify_ok(g);

    kiln_attrs *oa = kiln_desc_attrs_mut(g, kiln_node_output_desc(g, n[1], 1));
    kiln_attrs_set_string(oa, "reuse_input_index", "0");
    expect_fail(g, "node \"a\"", "output 1: attribute \"reuse_input_index\" must be int",
                "found string");
    kiln_attrs_set_int(oa, "reuse_input_index", 0);
    kiln_test_verify_ok(g);

    kiln_attrs_set_int(kiln_graph_attrs(g), "_single_op_scene", 1);
    expect_fail(g, "graph \"main\": attribute type",
                "graph attribute \"_single_op_scene\" must be bool", NULL);
    kiln_attrs_set_bool(kiln_graph_attrs(g), "_single_op_scene", false);
    kiln_test_verify_ok(g);
    kiln_graph_destroy(g);
}

static void test_verify_million_node_chain(void)
{
    const uint32_t N = 1000000;
    kiln_graph *g = kiln_test_graph("chain");
    CU_ASSERT_FATAL(kiln_graph_reserve(g, N, N, N));
    char name[24];
    kiln_node_id prev = 0, first = 0;
    for (uint32_t i = 0; i < N; i++) {
        snprintf(name, sizeof(name), "n%u", i);
        kiln_node_id n = kiln_graph_add_node(g, name, "Op", 1, 1);
        CU_ASSERT_FATAL(n != 0);
        if (prev)
            kiln_edge_add(g, prev, 0, n, 0);
        else
            first = n;
        prev = n;
    }
    kiln_test_verify_ok(g);
    kiln_edge_add(g, prev, 0, first, 0); /* close the loop: one big cycle */
    expect_fail(g, "cycle", "node \"n", NULL);
    kiln_graph_destroy(g);
}

int main(void)
{
    static const kiln_test_case cases[] = {
        {"test_verify_accepts_valid_graph", test_verify_accepts_valid_graph},
        {"test_verify_input_missing_from_consumer_list",
         test_verify_input_missing_from_consumer_list},
        {"test_verify_consumer_points_elsewhere", test_verify_consumer_points_elsewhere},
        {"test_verify_broken_record", test_verify_broken_record},
        {"test_verify_dead_reference", test_verify_dead_reference},
        {"test_verify_control_asymmetric", test_verify_control_asymmetric},
        {"test_verify_control_self_loop", test_verify_control_self_loop},
        {"test_verify_duplicate_name", test_verify_duplicate_name},
        {"test_verify_data_cycle_names_node_on_it", test_verify_data_cycle_names_node_on_it},
        {"test_verify_control_cycle", test_verify_control_cycle},
        {"test_verify_parent_node_index_range", test_verify_parent_node_index_range},
        {"test_verify_netoutput_rules", test_verify_netoutput_rules},
        {"test_verify_while_cond_maps_no_output", test_verify_while_cond_maps_no_output},
        {"test_verify_subgraph_links", test_verify_subgraph_links},
        {"test_verify_one_skips_subgraphs", test_verify_one_skips_subgraphs},
        {"test_verify_ref_input_range", test_verify_ref_input_range},
        {"test_verify_attribute_types", test_verify_attribute_types},
        {"test_verify_million_node_chain", test_verify_million_node_chain},
        {NULL, NULL},
    };
    return kiln_test_run("verify", cases);
}

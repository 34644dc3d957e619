/*
 * test_graph.c - the IR: nodes, edges, control edges, descriptors,
 * attributes, subgraphs, GE graph edits, compaction, OOM behaviour.
 */
#include "kiln_test.h"
#include "ctx.h"
#include "graph_int.h"
#include "verify.h"
#include <string.h>

static void test_graph_nodes_and_names(void)
{
    kiln_graph *g = kiln_test_graph("g");
    kiln_node_id a = kiln_test_node(g, "a", "Data", 0, 1);
    kiln_node_id b = kiln_test_node(g, "b", "Relu", 1, 1);
    CU_ASSERT_EQUAL(kiln_graph_node_count(g), 2);
    CU_ASSERT_EQUAL(kiln_graph_add_node(g, "a", "Data", 0, 1), 0); /* duplicate name */
    CU_ASSERT_EQUAL(kiln_graph_find_node(g, "b"), b);
    CU_ASSERT_STRING_EQUAL(kiln_node_op_str(g, a), "Data");
    CU_ASSERT_EQUAL(kiln_node_set_name(g, b, "a"), KILN_ERR_DUPLICATE);
    CU_ASSERT_EQUAL(kiln_node_set_name(g, b, "relu"), KILN_OK);
    CU_ASSERT_EQUAL(kiln_graph_find_node(g, "b"), 0);
    CU_ASSERT_EQUAL(kiln_graph_find_node(g, "relu"), b);
    uint64_t m = kiln_graph_mutation(g);
    CU_ASSERT_EQUAL(kiln_graph_remove_node(g, a), KILN_OK);
    CU_ASSERT(kiln_graph_mutation(g) > m);
    CU_ASSERT_FALSE(kiln_node_is_live(g, a));
    CU_ASSERT_EQUAL(kiln_graph_find_node(g, "a"), 0);
    CU_ASSERT_EQUAL(kiln_graph_next_node(g, 0), b);
    /* the name is free again */
    CU_ASSERT(kiln_graph_add_node(g, "a", "Data", 0, 1) != 0);
    kiln_graph_destroy(g);
}

static void test_graph_edges_and_use_order(void)
{
    kiln_graph *g = kiln_test_graph("g");
    kiln_node_id s = kiln_test_node(g, "s", "Data", 0, 1);
    kiln_node_id c[4];
    char name[8];
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof(name), "c%d", i);
        c[i] = kiln_test_node(g, name, "Relu", 1, 1);
        CU_ASSERT_EQUAL(kiln_edge_add(g, s, 0, c[i], 0), KILN_OK);
    }
    CU_ASSERT_EQUAL(kiln_edge_add(g, s, 0, c[0], 0), KILN_ERR_INVALID); /* already fed */
    CU_ASSERT_EQUAL(kiln_edge_add(g, s, 1, c[0], 0), KILN_ERR_INVALID); /* no output 1 */
    CU_ASSERT_EQUAL(kiln_node_output_use_count(g, s, 0), 4);
    /* remove the middle and the tail, order is creation order */
    kiln_edge_remove(g, c[1], 0);
    kiln_edge_remove(g, c[3], 0);
    kiln_node_id seen[4];
    int k = 0;
    for (uint32_t u = kiln_use_first(g, s, 0); u; u = kiln_use_next(g, u))
        seen[k++] = kiln_use_dst(g, u).node;
    CU_ASSERT_EQUAL(k, 2);
    CU_ASSERT_EQUAL(seen[0], c[0]);
    CU_ASSERT_EQUAL(seen[1], c[2]);
    kiln_edge_add(g, s, 0, c[3], 0);
    k = 0;
    for (uint32_t u = kiln_use_first(g, s, 0); u; u = kiln_use_next(g, u))
        seen[k++] = kiln_use_dst(g, u).node;
    CU_ASSERT_EQUAL(k, 3);
    CU_ASSERT_EQUAL(seen[2], c[3]);
    kiln_anchor p = kiln_node_input_peer(g, c[2], 0);
    CU_ASSERT_EQUAL(p.node, s);
    /* growing a node's inputs relocates its records and keeps the lists intact */
    CU_ASSERT_EQUAL(kiln_node_set_input_count(g, c[0], 3), KILN_OK);
    CU_ASSERT_EQUAL(kiln_node_input_peer(g, c[0], 0).node, s);
    CU_ASSERT_EQUAL(kiln_node_output_use_count(g, s, 0), 3);
    k = 0;
    for (uint32_t u = kiln_use_first(g, s, 0); u; u = kiln_use_next(g, u))
        seen[k++] = kiln_use_dst(g, u).node;
    CU_ASSERT_EQUAL(seen[0], c[0]);
    CU_ASSERT_EQUAL(kiln_edge_add(g, c[2], 0, c[0], 2), KILN_OK);
    /* removing a node drops its consumers' edges */
    kiln_graph_remove_node(g, s);
    CU_ASSERT_EQUAL(kiln_node_input_peer(g, c[2], 0).node, 0);
    CU_ASSERT_EQUAL(kiln_node_input_peer(g, c[0], 2).node, c[2]);
    kiln_graph_destroy(g);
}

static void test_graph_control_edges(void)
{
    kiln_graph *g = kiln_test_graph("g");
    kiln_node_id a = kiln_test_node(g, "a", "X", 0, 0), b = kiln_test_node(g, "b", "X", 0, 0),
                 c = kiln_test_node(g, "c", "X", 0, 0);
    CU_ASSERT_EQUAL(kiln_ctrl_add(g, a, b), KILN_OK);
    CU_ASSERT_EQUAL(kiln_ctrl_add(g, a, b), KILN_OK); /* idempotent */
    CU_ASSERT_EQUAL(kiln_ctrl_add(g, a, a), KILN_ERR_INVALID);
    kiln_ctrl_add(g, a, c);
    kiln_ctrl_add(g, c, b);
    CU_ASSERT_EQUAL(kiln_node_ctrl_out_count(g, a), 2);
    CU_ASSERT_EQUAL(kiln_node_ctrl_in_count(g, b), 2);
    CU_ASSERT(kiln_ctrl_exists(g, c, b));
    CU_ASSERT_EQUAL(kiln_ctrl_remove(g, a, b), KILN_OK);
    CU_ASSERT_EQUAL(kiln_ctrl_remove(g, a, b), KILN_ERR_NOT_FOUND);
    CU_ASSERT_FALSE(kiln_ctrl_exists(g, a, b));
    CU_ASSERT_EQUAL(kiln_node_ctrl_in_count(g, b), 1);
    kiln_graph_remove_node(g, c);
    CU_ASSERT_EQUAL(kiln_node_ctrl_out_count(g, a), 0);
    CU_ASSERT_EQUAL(kiln_node_ctrl_in_count(g, b), 0);
    /* freed records are reused */
    uint32_t before = g->ctrl_len;
    kiln_ctrl_add(g, a, b);
    CU_ASSERT_EQUAL(g->ctrl_len, before);
    kiln_graph_destroy(g);
}

static void test_graph_descs_and_attrs(void)
{
    kiln_graph *g = kiln_test_graph("g");
    kiln_node_id a = kiln_test_node(g, "a", "Data", 0, 1), b = kiln_test_node(g, "b", "Relu", 1, 1);
    kiln_edge_add(g, a, 0, b, 0);
    kiln_tensor_desc *d = kiln_node_output_desc(g, a, 0);
    CU_ASSERT_EQUAL(kiln_desc_rank(d), -1);
    int64_t dims[] = {2, -1, 4};
    kiln_desc_set_shape(g, d, 3, dims);
    kiln_desc_set_dtype(g, d, KILN_DT_FLOAT16);
    kiln_desc_set_format(g, d, "NCHW");
    CU_ASSERT_EQUAL(kiln_desc_numel(d), -1);
    /* every descriptor edit is visible to cached analyses */
    uint64_t m0 = kiln_graph_mutation(g);
    CU_ASSERT_EQUAL(kiln_desc_set_ref_input(g, d, 0), KILN_OK);
    CU_ASSERT(kiln_graph_mutation(g) > m0);
    m0 = kiln_graph_mutation(g);
    kiln_desc_set_size(g, d, 64);
    CU_ASSERT(kiln_graph_mutation(g) > m0);
    CU_ASSERT_EQUAL(kiln_desc_set_ref_input(g, d, 40000), KILN_ERR_INVALID);
    CU_ASSERT_EQUAL(kiln_desc_set_dtype(g, d, (kiln_dtype)99), KILN_ERR_INVALID);
    kiln_desc_set_ref_input(g, d, -1);
    /* an input without its own desc reads the producer's */
    CU_ASSERT_PTR_EQUAL(kiln_node_input_desc(g, b, 0), d);
    CU_ASSERT_FALSE(kiln_node_input_has_desc(g, b, 0));
    kiln_tensor_desc *in = kiln_node_input_desc_mut(g, b, 0);
    CU_ASSERT_PTR_NOT_EQUAL(in, d);
    CU_ASSERT(kiln_node_input_has_desc(g, b, 0));
    CU_ASSERT_EQUAL(kiln_desc_dtype(in), KILN_DT_FLOAT16);
    CU_ASSERT_EQUAL(kiln_desc_dims(in)[2], 4);
    CU_ASSERT_STRING_EQUAL(kiln_desc_format(g, in), "NCHW");
    /* attributes: typed, sorted, replaceable */
    kiln_attrs *at = kiln_node_attrs_mut(g, b);
    CU_ASSERT_EQUAL(kiln_attrs_set_int(at, "zeta", 7), KILN_OK);
    CU_ASSERT_EQUAL(kiln_attrs_set_string(at, "alpha", "x"), KILN_OK);
    int64_t li[] = {1, 2, 3};
    kiln_attrs_set_list_int(at, "mid", li, 3);
    kiln_attr_type t;
    CU_ASSERT_STRING_EQUAL(kiln_attrs_key_at(at, 0, &t), "alpha");
    CU_ASSERT_EQUAL(t, KILN_ATTR_STRING);
    CU_ASSERT_STRING_EQUAL(kiln_attrs_key_at(at, 2, &t), "zeta");
    int64_t v;
    CU_ASSERT(kiln_attrs_get_int(at, "zeta", &v) && v == 7);
    bool bv;
    CU_ASSERT_FALSE(kiln_attrs_get_bool(at, "zeta", &bv)); /* wrong type */
    kiln_attrs_set_bool(at, "zeta", true);
    CU_ASSERT(kiln_attrs_get_bool(at, "zeta", &bv) && bv);
    const int64_t *lv;
    uint32_t n;
    CU_ASSERT(kiln_attrs_get_list_int(at, "mid", &lv, &n) && n == 3 && lv[2] == 3);
    int64_t r0[] = {1}, r1[] = {2, 3};
    const int64_t *rows[] = {r0, r1};
    uint32_t lens[] = {1, 2};
    kiln_attrs_set_list_list_int(at, "ll", rows, lens, 2);
    CU_ASSERT(kiln_attrs_get_list_list_int_at(at, "ll", 1, &lv, &n) && n == 2 && lv[1] == 3);
    float data[] = {1, 2, 3, 4};
    int64_t tdims[] = {2, 2};
    kiln_tensor_value tv = {KILN_DT_FLOAT32, 2, tdims, data, sizeof(data)};
    kiln_attrs_set_tensor(at, "value", &tv);
    kiln_tensor_value out;
    CU_ASSERT(kiln_attrs_get_tensor(at, "value", &out) && out.nbytes == 16 &&
              ((const float *)out.data)[3] == 4.0f);
    CU_ASSERT(kiln_attrs_remove(at, "alpha"));
    CU_ASSERT_FALSE(kiln_attrs_has(at, "alpha"));
    /* desc attributes are copied by desc_copy */
    kiln_attrs_set_bool(kiln_desc_attrs_mut(g, d), "reuse_input", true);
    kiln_tensor_desc *bo = kiln_node_output_desc(g, b, 0);
    kiln_desc_copy(g, bo, d);
    CU_ASSERT(kiln_attrs_get_bool(kiln_desc_attrs(bo), "reuse_input", &bv) && bv);
    kiln_graph_destroy(g);
}

/* p -> dst with ctrl edges x => dst and clean => dst */
static void test_graph_insert_before_moves_ctrl(void)
{
    kiln_graph *g = kiln_test_graph("g");
    kiln_node_id p = kiln_test_node(g, "p", "Data", 0, 1),
                 dst = kiln_test_node(g, "dst", "Assign", 1, 1);
    kiln_node_id x = kiln_test_node(g, "x", "Relu", 0, 0),
                 clean = kiln_test_node(g, "clean", "AtomicAddrClean", 0, 0);
    kiln_edge_add(g, p, 0, dst, 0);
    kiln_ctrl_add(g, x, dst);
    kiln_ctrl_add(g, clean, dst);
    kiln_attrs_set_string(kiln_node_attrs_mut(g, dst), "_user_stream_label", "s1");
    kiln_node_id id = kiln_graph_insert_before(g, dst, 0, "p_Identity0", "Identity");
    CU_ASSERT_FATAL(id != 0);
    CU_ASSERT_EQUAL(kiln_node_input_peer(g, dst, 0).node, id);
    CU_ASSERT_EQUAL(kiln_node_input_peer(g, id, 0).node, p);
    CU_ASSERT(kiln_ctrl_exists(g, x, id));
    CU_ASSERT_FALSE(kiln_ctrl_exists(g, x, dst));
    CU_ASSERT(kiln_ctrl_exists(g, clean, dst)); /* AtomicAddrClean stays */
    const char *s;
    CU_ASSERT(kiln_attrs_get_string(kiln_node_attrs(g, id), "_user_stream_label", &s) &&
              strcmp(s, "s1") == 0);
    CU_ASSERT_EQUAL(kiln_graph_insert_before(g, x, 0, "nope", "Identity"), 0);
    kiln_graph_destroy(g);
}

static void test_graph_insert_after_moves_ctrl(void)
{
    kiln_graph *g = kiln_test_graph("g");
    kiln_node_id src = kiln_test_node(g, "src", "Relu", 0, 1),
                 a = kiln_test_node(g, "a", "X", 1, 0), b = kiln_test_node(g, "b", "X", 1, 0),
                 y = kiln_test_node(g, "y", "X", 0, 0);
    kiln_edge_add(g, src, 0, a, 0);
    kiln_edge_add(g, src, 0, b, 0);
    kiln_ctrl_add(g, src, y);
    kiln_anchor only_a = {a, 0};
    kiln_node_id id = kiln_graph_insert_after(g, src, 0, &only_a, 1, "id0", "Identity");
    CU_ASSERT_FATAL(id != 0);
    CU_ASSERT_EQUAL(kiln_node_input_peer(g, a, 0).node, id);
    CU_ASSERT_EQUAL(kiln_node_input_peer(g, b, 0).node, src);
    CU_ASSERT(kiln_ctrl_exists(g, id, y));
    CU_ASSERT_FALSE(kiln_ctrl_exists(g, src, y));
    /* all consumers when none listed; Switch keeps its control edges */
    kiln_node_id sw = kiln_test_node(g, "sw", "Switch", 0, 1),
                 c = kiln_test_node(g, "c", "X", 1, 0);
    kiln_edge_add(g, sw, 0, c, 0);
    kiln_ctrl_add(g, sw, y);
    kiln_node_id id2 = kiln_graph_insert_after(g, sw, 0, NULL, 0, "id1", "Identity");
    CU_ASSERT_EQUAL(kiln_node_input_peer(g, c, 0).node, id2);
    CU_ASSERT(kiln_ctrl_exists(g, sw, y));
    kiln_graph_destroy(g);
}

/* P35's shape: Op1 -> Merge -> {Op2, Op3} */
static void test_graph_isolate_io_map(void)
{
    kiln_graph *g = kiln_test_graph("g");
    kiln_node_id op1 = kiln_test_node(g, "op1", "X", 0, 1),
                 m = kiln_test_node(g, "merge", "Merge", 1, 2),
                 op2 = kiln_test_node(g, "op2", "X", 1, 0),
                 op3 = kiln_test_node(g, "op3", "X", 1, 0),
                 pre = kiln_test_node(g, "pre", "X", 0, 0);
    kiln_edge_add(g, op1, 0, m, 0);
    kiln_edge_add(g, m, 0, op2, 0);
    kiln_edge_add(g, m, 1, op3, 0);
    kiln_ctrl_add(g, pre, m);
    int32_t too_long[] = {0, -1, 0};
    CU_ASSERT_EQUAL(kiln_graph_isolate_node(g, m, too_long, 3), KILN_ERR_PARAM);
    int32_t map[] = {0, -1};
    CU_ASSERT_EQUAL(kiln_graph_isolate_node(g, m, map, 2), KILN_OK);
    CU_ASSERT_EQUAL(kiln_node_input_peer(g, op2, 0).node, op1);
    CU_ASSERT_EQUAL(kiln_node_input_peer(g, op3, 0).node, 0);
    CU_ASSERT(kiln_ctrl_exists(g, pre, op2)); /* ordering kept */
    CU_ASSERT_EQUAL(kiln_node_ctrl_in_count(g, m), 0);
    CU_ASSERT_EQUAL(kiln_node_input_peer(g, m, 0).node, 0);
    kiln_graph_destroy(g);
}

static void test_graph_replace(void)
{
    kiln_graph *g = kiln_test_graph("g");
    kiln_node_id a = kiln_test_node(g, "a", "X", 0, 1),
                 old = kiln_test_node(g, "old", "Relu", 1, 1),
                 c = kiln_test_node(g, "c", "X", 1, 0),
                 repl = kiln_test_node(g, "new", "Gelu", 1, 1);
    kiln_edge_add(g, a, 0, old, 0);
    kiln_edge_add(g, old, 0, c, 0);
    kiln_ctrl_add(g, a, old);
    CU_ASSERT_EQUAL(kiln_graph_replace_node(g, old, repl), KILN_OK);
    CU_ASSERT_FALSE(kiln_node_is_live(g, old));
    CU_ASSERT_EQUAL(kiln_node_input_peer(g, repl, 0).node, a);
    CU_ASSERT_EQUAL(kiln_node_input_peer(g, c, 0).node, repl);
    CU_ASSERT(kiln_ctrl_exists(g, a, repl));
    kiln_graph_destroy(g);
}

static void test_graph_compact_topo(void)
{
    kiln_graph *g = kiln_test_graph("g");
    /* ids deliberately against topological order */
    kiln_node_id out = kiln_test_node(g, "out", "NetOutput", 2, 0),
                 add1 = kiln_test_node(g, "add", "Add", 2, 1),
                 dead = kiln_test_node(g, "dead", "X", 0, 1),
                 x = kiln_test_node(g, "x", "Data", 0, 1), y = kiln_test_node(g, "y", "Data", 0, 1);
    kiln_edge_add(g, x, 0, add1, 0);
    kiln_edge_add(g, y, 0, add1, 1);
    kiln_edge_add(g, add1, 0, out, 0);
    kiln_edge_add(g, x, 0, out, 1);
    kiln_ctrl_add(g, y, x);
    kiln_graph_remove_node(g, dead);
    uint32_t *map = NULL;
    kiln_error err;
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(kiln_graph_compact(g, true, &map, &err), KILN_OK);
    CU_ASSERT_EQUAL(map[dead], 0);
    CU_ASSERT_EQUAL(kiln_graph_id_limit(g), 5);
    kiln_node_id nx = kiln_graph_find_node(g, "x"), ny = kiln_graph_find_node(g, "y"),
                 na = kiln_graph_find_node(g, "add"), no = kiln_graph_find_node(g, "out");
    CU_ASSERT_EQUAL(map[x], nx);
    CU_ASSERT(ny < nx && nx < na && na < no); /* ids follow topological order */
    CU_ASSERT_EQUAL(kiln_node_input_peer(g, na, 0).node, nx);
    CU_ASSERT_EQUAL(kiln_node_input_peer(g, no, 1).node, nx);
    CU_ASSERT_EQUAL(kiln_node_output_use_count(g, nx, 0), 2);
    /* consumer order survives: add was fed first */
    CU_ASSERT_EQUAL(kiln_use_dst(g, kiln_use_first(g, nx, 0)).node, na);
    CU_ASSERT(kiln_ctrl_exists(g, ny, nx));
    kiln__free(map);
    /* a cycle is reported with a node name */
    kiln_edge_remove(g, na, 1);
    kiln_ctrl_add(g, no, ny);
    kiln_ctrl_add(g, na, ny);
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(kiln_graph_compact(g, true, NULL, &err), KILN_ERR_INVALID);
    CU_ASSERT(strstr(err.msg, "cycle") != NULL);
    kiln_graph_destroy(g);
}

static void test_graph_subgraphs(void)
{
    kiln_graph *g = kiln_test_graph("g");
    kiln_node_id w = kiln_test_node(g, "while", "While", 1, 1);
    kiln_graph *body = kiln_node_add_subgraph(g, w, "body", "while_body");
    kiln_graph *cond = kiln_node_add_subgraph(g, w, "cond", "while_cond");
    CU_ASSERT_PTR_NOT_NULL_FATAL(body);
    CU_ASSERT_PTR_NOT_NULL_FATAL(cond);
    CU_ASSERT_PTR_NULL(kiln_node_add_subgraph(g, w, "x", "while_body")); /* name taken */
    CU_ASSERT_EQUAL(kiln_graph_depth(body), 2);
    CU_ASSERT_PTR_EQUAL(kiln_graph_parent(body), g);
    CU_ASSERT_EQUAL(kiln_graph_parent_node(body), w);
    CU_ASSERT_PTR_EQUAL(kiln_graph_root(body), g);
    kiln_node_id inner = kiln_graph_add_node(body, "inner_if", "If", 1, 1);
    kiln_graph *then_g = kiln_node_add_subgraph(body, inner, "then_branch", "then");
    CU_ASSERT_EQUAL(kiln_graph_depth(then_g), 3);
    CU_ASSERT_EQUAL(kiln_graph_all_subgraph_count(g), 3);
    const char *role;
    CU_ASSERT_PTR_EQUAL(kiln_node_subgraph(g, w, 1, &role), cond);
    CU_ASSERT_STRING_EQUAL(role, "cond");
    CU_ASSERT_PTR_EQUAL(kiln_graph_find_subgraph(g, "then"), then_g);
    /* removing the owner drops its subgraphs recursively, names become free */
    kiln_graph_remove_node(g, w);
    CU_ASSERT_EQUAL(kiln_graph_all_subgraph_count(g), 0);
    CU_ASSERT_PTR_NULL(kiln_graph_find_subgraph(g, "then"));
    CU_ASSERT_PTR_NULL(kiln_graph_find_subgraph(g, "while_body"));
    kiln_node_id w2 = kiln_test_node(g, "while2", "While", 1, 1);
    char name[32];
    for (int i = 0; i < 300; i++) { /* many subgraphs: the name map rehashes */
        snprintf(name, sizeof(name), "sg%d", i);
        CU_ASSERT_PTR_NOT_NULL(kiln_node_add_subgraph(g, w2, "body", name));
    }
    CU_ASSERT_PTR_NOT_NULL(kiln_node_add_subgraph(g, w2, "body", "while_body"));
    CU_ASSERT_PTR_NULL(kiln_node_add_subgraph(g, w2, "body", "sg299"));
    CU_ASSERT_STRING_EQUAL(kiln_graph_name(kiln_graph_find_subgraph(g, "sg150")), "sg150");
    CU_ASSERT_EQUAL(kiln_graph_all_subgraph_count(g), 301);
    kiln_graph_destroy(g);
}

/* Many owner nodes: the node -> subgraph map grows, loses entries in every
 * order (backward-shift deletion keeps later probes reachable), and follows
 * compaction's renumbering; the verifier agrees after every step. */
static void test_graph_subgraph_owner_map(void)
{
    enum { N = 2000 };
    kiln_graph *g = kiln_test_graph("g");
    kiln_node_id ifs[N];
    char name[32];
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof(name), "if%d", i);
        ifs[i] = kiln_test_node(g, name, "If", 1, 1);
        snprintf(name, sizeof(name), "plain%d", i); /* non-owners between the owners */
        kiln_test_node(g, name, "Relu", 1, 1);
        snprintf(name, sizeof(name), "then%d", i);
        kiln_graph *sg = kiln_node_add_subgraph(g, ifs[i], "then_branch", name);
        CU_ASSERT_PTR_NOT_NULL_FATAL(sg);
        CU_ASSERT(kiln_graph_add_node(sg, "out", "NetOutput", 0, 0) != 0);
    }
    kiln_error err;
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(kiln_graph_verify(g, &err), KILN_OK);
    if (err.code)
        fprintf(stderr, "%s\n", err.msg);
    /* remove every third owner, from the back, then every fifth from the front */
    for (int i = N - 1; i >= 0; i--)
        if (i % 3 == 0)
            CU_ASSERT_EQUAL(kiln_graph_remove_node(g, ifs[i]), KILN_OK);
    for (int i = 0; i < N; i++)
        if (i % 5 == 1 && i % 3 != 0)
            CU_ASSERT_EQUAL(kiln_graph_remove_node(g, ifs[i]), KILN_OK);
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(kiln_graph_verify(g, &err), KILN_OK);
    for (int i = 0; i < N; i++) {
        bool gone = i % 3 == 0 || i % 5 == 1;
        snprintf(name, sizeof(name), "then%d", i);
        kiln_graph *sg = kiln_graph_find_subgraph(g, name);
        CU_ASSERT_EQUAL(sg == NULL, gone);
        if (!gone) {
            CU_ASSERT_EQUAL(kiln_node_subgraph_count(g, ifs[i]), 1);
            CU_ASSERT_PTR_EQUAL(kiln_node_subgraph(g, ifs[i], 0, NULL), sg);
        }
    }
    CU_ASSERT_EQUAL(kiln_node_subgraph_count(g, kiln_graph_find_node(g, "plain7")), 0);
    uint32_t *map = NULL;
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(kiln_graph_compact(g, false, &map, &err), KILN_OK);
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(kiln_graph_verify(g, &err), KILN_OK);
    for (int i = 0; i < N; i++) {
        if (i % 3 == 0 || i % 5 == 1)
            continue;
        snprintf(name, sizeof(name), "then%d", i);
        kiln_graph *sg = kiln_graph_find_subgraph(g, name);
        CU_ASSERT_EQUAL(kiln_graph_parent_node(sg), map[ifs[i]]);
        CU_ASSERT_PTR_EQUAL(kiln_node_subgraph(g, map[ifs[i]], 0, NULL), sg);
    }
    kiln__free(map);
    kiln_graph_destroy(g);
}

/* Every allocation failure point of a small build is survived: the edit
 * returns failure (or sets the sticky oom flag), nothing crashes or leaks. */
static void test_graph_fault_injection(void)
{
    long faulted = 0; /* builds that met an injected failure */
    for (long nth = 1; nth < 200; nth++) {
        kiln_graph *g = kiln_test_graph("g");
        kiln__fault_set(nth);
        bool failed = false;
        kiln_node_id prev = 0;
        char name[16];
        for (int i = 0; i < 40 && !failed; i++) {
            snprintf(name, sizeof(name), "n%d", i);
            kiln_node_id n = kiln_graph_add_node(g, name, "Relu", 1, 1);
            if (!n) {
                failed = true;
                break;
            }
            if (prev && kiln_edge_add(g, prev, 0, n, 0) != KILN_OK)
                failed = true;
            if (kiln_attrs_set_int(kiln_node_attrs_mut(g, n), "k", i) != KILN_OK)
                failed = true;
            prev = n;
        }
        long hits = kiln__fault_hits();
        kiln__fault_set(0);
        CU_ASSERT(!hits || failed || kiln_graph_oom(g));
        kiln_graph_destroy(g);
        if (!hits)
            break; /* the build needed fewer than nth allocations */
        faulted++;
    }
    CU_ASSERT(faulted > 0); /* the injection reached the build at all */
}

/* A value that cannot be stored (its arena block fails to allocate) sets the
 * graph's sticky OOM flag for every attribute type, so a plugin that ignores
 * the status is still caught by the pass manager. */
static void test_graph_attr_oom_sets_flag(void)
{
    enum { BIG = 1 << 17 }; /* large values get their own arena block (a malloc) */
    static int64_t ints[BIG];
    static const char *strs[BIG];
    for (uint32_t i = 0; i < BIG; i++)
        strs[i] = "s";
    const int64_t *lists[1] = {ints};
    uint32_t lens[1] = {BIG};
    int64_t dims[1] = {BIG};
    kiln_tensor_value t = {KILN_DT_INT64, 1, dims, ints, sizeof(ints)};
    for (int which = 0; which < 4; which++) {
        kiln_graph *g = kiln_test_graph("g");
        kiln_node_id n = kiln_test_node(g, "n", "X", 0, 0);
        kiln_attrs *a = kiln_node_attrs_mut(g, n);
        CU_ASSERT_PTR_NOT_NULL_FATAL(a);
        kiln__fault_set(1);
        kiln_status st = which == 0   ? kiln_attrs_set_list_int(a, "v", ints, BIG)
                         : which == 1 ? kiln_attrs_set_list_string(a, "v", strs, BIG)
                         : which == 2 ? kiln_attrs_set_list_list_int(a, "v", lists, lens, 1)
                                      : kiln_attrs_set_tensor(a, "v", &t);
        kiln__fault_set(0);
        CU_ASSERT_EQUAL(st, KILN_ERR_NOMEM);
        CU_ASSERT(kiln_graph_oom(g));
        kiln_graph_destroy(g);
    }
}

/* Strings handed out stay valid while the table grows (chunks never move). */
static void test_graph_interned_strings_are_stable(void)
{
    kiln_graph *g = kiln_test_graph("g");
    kiln_node_id a = kiln_test_node(g, "first", "Relu", 0, 0);
    const char *name = kiln_node_name_str(g, a);
    const char *list[] = {"alpha", "beta"};
    kiln_attrs_set_list_string(kiln_node_attrs_mut(g, a), "l", list, 2);
    char buf[32];
    for (int i = 0; i < 200000; i++) {
        snprintf(buf, sizeof(buf), "s%d", i);
        kiln_intern(g, buf);
    }
    CU_ASSERT_STRING_EQUAL(name, "first");
    const char *const *v;
    uint32_t n;
    CU_ASSERT(kiln_attrs_get_list_string(kiln_node_attrs(g, a), "l", &v, &n) && n == 2);
    CU_ASSERT_STRING_EQUAL(v[1], "beta");
    CU_ASSERT_EQUAL(kiln_sym_lookup(g, "s199999"), kiln_intern(g, "s199999"));
    kiln_graph_destroy(g);
}

/* Attribute keys and looked-up strings go through a per-thread cache keyed by
 * the string's address: a buffer reused for another key must not hit, an
 * absent key that is interned later must be found, and two contexts must not
 * share answers. */
static void test_graph_key_cache(void)
{
    kiln_graph *g = kiln_test_graph("g");
    kiln_node_id a = kiln_test_node(g, "a", "Relu", 0, 0);
    kiln_attrs *at = kiln_node_attrs_mut(g, a);
    char key[64];
    for (int i = 0; i < 40; i++) {
        snprintf(key, sizeof key, "key_cache_%d", i);
        CU_ASSERT_FALSE(kiln_attrs_has(at, key));
        CU_ASSERT_EQUAL(kiln_sym_lookup(g, key), 0);
        CU_ASSERT_EQUAL(kiln_attrs_set_int(at, key, i), KILN_OK);
    }
    for (int i = 39; i >= 0; i--) {
        int64_t v = -1;
        snprintf(key, sizeof key, "key_cache_%d", i);
        CU_ASSERT(kiln_attrs_get_int(at, key, &v) && v == i);
        CU_ASSERT_NOT_EQUAL(kiln_sym_lookup(g, key), 0);
    }
    /* a long key (no copy in the cache), absent and then present */
    snprintf(key, sizeof key, "a_rather_long_attribute_key_that_is_absent_%d", 1);
    CU_ASSERT_FALSE(kiln_attrs_has(at, key));
    CU_ASSERT_EQUAL(kiln_attrs_set_bool(at, key, true), KILN_OK);
    CU_ASSERT(kiln_attrs_has(at, key));
    /* one literal, two contexts */
    kiln_ctx *ctx2 = kiln_ctx_create();
    kiln_graph *h = kiln_graph_create(ctx2, "h");
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    kiln_node_id b = kiln_test_node(h, "b", "Relu", 0, 0);
    CU_ASSERT_EQUAL(kiln_attrs_set_int(kiln_node_attrs_mut(g, a), "shared_key", 1), KILN_OK);
    CU_ASSERT(kiln_attrs_has(kiln_node_attrs(g, a), "shared_key"));
    CU_ASSERT_FALSE(kiln_attrs_has(kiln_node_attrs(h, b), "shared_key"));
    CU_ASSERT_EQUAL(kiln_attrs_set_int(kiln_node_attrs_mut(h, b), "shared_key", 2), KILN_OK);
    int64_t v = 0;
    CU_ASSERT(kiln_attrs_get_int(kiln_node_attrs(h, b), "shared_key", &v) && v == 2);
    CU_ASSERT(kiln_attrs_get_int(kiln_node_attrs(g, a), "shared_key", &v) && v == 1);
    kiln_graph_destroy(h);
    kiln_ctx_destroy(ctx2);
    kiln_graph_destroy(g);
}

/* A hub with many control successors: duplicate checks stay cheap and correct. */
static void test_graph_ctrl_hub(void)
{
    kiln_graph *g = kiln_test_graph("g");
    kiln_node_id hub = kiln_test_node(g, "hub", "X", 0, 0);
    char buf[32];
    kiln_node_id last = 0;
    for (int i = 0; i < 20000; i++) {
        snprintf(buf, sizeof(buf), "leaf%d", i);
        last = kiln_test_node(g, buf, "X", 0, 0);
        CU_ASSERT_EQUAL(kiln_ctrl_add(g, hub, last), KILN_OK);
    }
    CU_ASSERT_EQUAL(kiln_ctrl_add(g, hub, last), KILN_OK); /* duplicate: no-op */
    CU_ASSERT_EQUAL(kiln_node_ctrl_out_count(g, hub), 20000);
    CU_ASSERT(kiln_ctrl_exists(g, hub, last));
    CU_ASSERT_FALSE(kiln_ctrl_exists(g, last, hub));
    /* compaction rebuilds both lists of every record (linear, not per-pair) */
    kiln_error err;
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(kiln_graph_compact(g, true, NULL, &err), KILN_OK);
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(kiln_graph_verify(g, &err), KILN_OK);
    hub = kiln_graph_find_node(g, "hub");
    last = kiln_graph_find_node(g, "leaf19999");
    CU_ASSERT_EQUAL(kiln_node_ctrl_out_count(g, hub), 20000);
    CU_ASSERT_EQUAL(kiln_ctrl_src(g, kiln_ctrl_in_first(g, last)), hub);
    kiln_graph_destroy(g);
}

/* Large tensor bytes are shared between graphs by kiln_attrs_copy (a
 * reference, not a copy) and outlive the graph they were set in; small ones
 * are copied; the bytes read back the same either way. */
static void test_graph_shared_tensors(void)
{
    enum { BIG = KILN_SHARED_MIN / 4 + 16, SMALL = 64 };
    float *big = malloc(BIG * sizeof(float)), small[SMALL];
    CU_ASSERT_PTR_NOT_NULL_FATAL(big);
    for (int i = 0; i < BIG; i++)
        big[i] = (float)i * 0.5f;
    for (int i = 0; i < SMALL; i++)
        small[i] = (float)-i;
    int64_t dbig[1] = {BIG}, dsmall[1] = {SMALL};
    kiln_tensor_value vb = {KILN_DT_FLOAT32, 1, dbig, big, sizeof(float) * BIG};
    kiln_tensor_value vs = {KILN_DT_FLOAT32, 1, dsmall, small, sizeof small};
    kiln_graph *g1 = kiln_test_graph("g1"), *g2 = kiln_test_graph("g2"),
               *g3 = kiln_test_graph("g3");
    kiln_node_id a = kiln_test_node(g1, "a", "Const", 0, 1);
    kiln_attrs *aa = kiln_node_attrs_mut(g1, a);
    CU_ASSERT_EQUAL(kiln_attrs_set_tensor(aa, "value", &vb), KILN_OK);
    CU_ASSERT_EQUAL(kiln_attrs_set_tensor(aa, "small", &vs), KILN_OK);
    memset(big, 0, BIG * sizeof(float)); /* the graph holds its own bytes */
    kiln_node_id b = kiln_test_node(g2, "b", "Const", 0, 1);
    kiln_node_id c = kiln_test_node(g3, "c", "Const", 0, 1);
    CU_ASSERT_EQUAL(kiln_attrs_copy(kiln_node_attrs_mut(g2, b), aa), KILN_OK);
    CU_ASSERT_EQUAL(kiln_attrs_copy(kiln_node_attrs_mut(g3, c), kiln_node_attrs(g2, b)), KILN_OK);
    kiln_tensor_value t1, t2, t3, s1, s2;
    CU_ASSERT_TRUE(kiln_attrs_get_tensor(aa, "value", &t1));
    CU_ASSERT_TRUE(kiln_attrs_get_tensor(kiln_node_attrs(g2, b), "value", &t2));
    CU_ASSERT_TRUE(kiln_attrs_get_tensor(aa, "small", &s1));
    CU_ASSERT_TRUE(kiln_attrs_get_tensor(kiln_node_attrs(g2, b), "small", &s2));
    CU_ASSERT_PTR_EQUAL(t1.data, t2.data); /* shared */
    CU_ASSERT_PTR_NOT_EQUAL(s1.data, s2.data); /* copied */
    CU_ASSERT_PTR_NOT_EQUAL(t1.dims, t2.dims);
    CU_ASSERT_EQUAL(g1->nshared, 1);
    CU_ASSERT_EQUAL(g2->nshared, 1);
    kiln_graph_destroy(g1); /* g2 and g3 still hold the bytes */
    kiln_graph_destroy(g2);
    CU_ASSERT_TRUE_FATAL(kiln_attrs_get_tensor(kiln_node_attrs(g3, c), "value", &t3));
    CU_ASSERT_EQUAL(t3.nbytes, sizeof(float) * BIG);
    CU_ASSERT_EQUAL(t3.rank, 1);
    CU_ASSERT_EQUAL(t3.dims[0], BIG);
    bool same = true;
    for (int i = 0; i < BIG; i++)
        same &= ((const float *)t3.data)[i] == (float)i * 0.5f;
    CU_ASSERT_TRUE(same);
    CU_ASSERT_EQUAL(((uintptr_t)t3.data) % 16, 0);
    kiln_graph_destroy(g3);
    free(big);
}

/* Tensor blocks: an attribute set from a block shares its bytes at their
 * offset in it (no copy), copies of the attribute share them too, the block
 * lives until the caller and every graph released it, and data outside the
 * block is refused. */
static void test_graph_tensor_blocks(void)
{
    enum { N = 1000, OFF = 16 };
    unsigned char *blk = kiln_tensor_block_new(OFF + N * sizeof(float));
    CU_ASSERT_PTR_NOT_NULL_FATAL(blk);
    CU_ASSERT_EQUAL((uintptr_t)blk % 16, 0);
    float *w = (float *)(void *)(blk + OFF);
    for (int i = 0; i < N; i++)
        w[i] = (float)i + 0.25f;
    int64_t dims[1] = {N};
    kiln_tensor_value v = {KILN_DT_FLOAT32, 1, dims, w, N * sizeof(float)};
    kiln_graph *g1 = kiln_test_graph("g1"), *g2 = kiln_test_graph("g2");
    kiln_node_id a = kiln_test_node(g1, "a", "Const", 0, 1);
    kiln_node_id b = kiln_test_node(g2, "b", "Const", 0, 1);
    kiln_attrs *aa = kiln_node_attrs_mut(g1, a);
    CU_ASSERT_EQUAL(kiln_attrs_set_tensor_block(aa, "value", &v, blk), KILN_OK);
    CU_ASSERT_EQUAL(kiln_attrs_copy(kiln_node_attrs_mut(g2, b), aa), KILN_OK);
    kiln_tensor_value t1, t2;
    CU_ASSERT_TRUE_FATAL(kiln_attrs_get_tensor(aa, "value", &t1));
    CU_ASSERT_TRUE_FATAL(kiln_attrs_get_tensor(kiln_node_attrs(g2, b), "value", &t2));
    CU_ASSERT_PTR_EQUAL(t1.data, w); /* not copied: the block's bytes at their offset */
    CU_ASSERT_PTR_EQUAL(t2.data, w);
    CU_ASSERT_EQUAL(t2.nbytes, N * sizeof(float));
    /* refused: data that starts before the block or runs past its end */
    kiln_tensor_value bad = v;
    bad.nbytes = N * sizeof(float) + 1;
    CU_ASSERT_EQUAL(kiln_attrs_set_tensor_block(aa, "bad", &bad, blk), KILN_ERR_INVALID);
    float other[4] = {0};
    kiln_tensor_value out = {KILN_DT_FLOAT32, 1, (int64_t[]){4}, other, sizeof other};
    CU_ASSERT_EQUAL(kiln_attrs_set_tensor_block(aa, "bad", &out, blk), KILN_ERR_INVALID);
    CU_ASSERT_FALSE(kiln_attrs_has(aa, "bad"));
    /* no block: copied as kiln_attrs_set_tensor does */
    CU_ASSERT_EQUAL(kiln_attrs_set_tensor_block(aa, "copy", &out, NULL), KILN_OK);
    kiln_tensor_value t3;
    CU_ASSERT_TRUE(kiln_attrs_get_tensor(aa, "copy", &t3));
    CU_ASSERT_PTR_NOT_EQUAL(t3.data, other);
    kiln_tensor_block_release(blk);  /* the graphs still hold it (ASan: no use after free) */
    kiln_graph_destroy(g1);
    CU_ASSERT_TRUE_FATAL(kiln_attrs_get_tensor(kiln_node_attrs(g2, b), "value", &t2));
    bool same = true;
    for (int i = 0; i < N; i++)
        same &= ((const float *)t2.data)[i] == (float)i + 0.25f;
    CU_ASSERT_TRUE(same);
    kiln_graph_destroy(g2); /* the last reference: freed (ASan/LSan: no leak) */
    kiln_tensor_block_release(NULL);
}

int main(void)
{
    static const kiln_test_case cases[] = {
        {"test_graph_tensor_blocks", test_graph_tensor_blocks},
        {"test_graph_nodes_and_names", test_graph_nodes_and_names},
        {"test_graph_edges_and_use_order", test_graph_edges_and_use_order},
        {"test_graph_control_edges", test_graph_control_edges},
        {"test_graph_descs_and_attrs", test_graph_descs_and_attrs},
        {"test_graph_insert_before_moves_ctrl", test_graph_insert_before_moves_ctrl},
        {"test_graph_insert_after_moves_ctrl", test_graph_insert_after_moves_ctrl},
        {"test_graph_isolate_io_map", test_graph_isolate_io_map},
        {"test_graph_replace", test_graph_replace},
        {"test_graph_compact_topo", test_graph_compact_topo},
        {"test_graph_subgraphs", test_graph_subgraphs},
        {"test_graph_subgraph_owner_map", test_graph_subgraph_owner_map},
        {"test_graph_fault_injection", test_graph_fault_injection},
        {"test_graph_attr_oom_sets_flag", test_graph_attr_oom_sets_flag},
        {"test_graph_interned_strings_are_stable", test_graph_interned_strings_are_stable},
        {"test_graph_key_cache", test_graph_key_cache},
        {"test_graph_ctrl_hub", test_graph_ctrl_hub},
        {"test_graph_shared_tensors", test_graph_shared_tensors},
        {NULL, NULL},
    };
    return kiln_test_run("graph", cases);
}

/*
 * test_symtab.c - the memory symbol table (GE GetRefMapping, GE_SEMANTICS.md
 * 3.2): producer/consumer classes, unconnected inputs, Merge, Reshape,
 * reference outputs (ref_input), reuse_input (the I1 inplace scenario of
 * 9.8), no-padding continuous outputs, ref_var_src_var_name, While and If
 * pass-through across subgraphs, symbol names and walk order, CSR slices and
 * cache invalidation by attribute edits.
 */
#include "kiln_test.h"
#include "ctx.h"
#include "symtab.h"
#include <string.h>

static const kiln_symtab *table(kiln_graph *g)
{
    const kiln_symtab *st = NULL;
    kiln_error err = {0};
    CU_ASSERT_EQUAL_FATAL(kiln_symtab_get(g, &st, &err), KILN_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(st);
    return st;
}

static uint32_t sym_out(const kiln_symtab *st, const kiln_graph *g, kiln_node_id n, uint32_t o)
{
    uint32_t s = kiln_symtab_symbol(st, g, n, o, true);
    CU_ASSERT(s != KILN_SYMTAB_NONE);
    return s;
}

static uint32_t sym_in(const kiln_symtab *st, const kiln_graph *g, kiln_node_id n, uint32_t i)
{
    uint32_t s = kiln_symtab_symbol(st, g, n, i, false);
    CU_ASSERT(s != KILN_SYMTAB_NONE);
    return s;
}

static void check_name(const kiln_symtab *st, uint32_t sym, const char *want)
{
    char buf[128];
    size_t len = kiln_symtab_symbol_name(st, sym, buf, sizeof(buf));
    CU_ASSERT_EQUAL(len, strlen(want));
    CU_ASSERT_STRING_EQUAL(buf, want);
}

static uint32_t size_of(const kiln_symtab *st, uint32_t sym)
{
    uint32_t n = 0;
    CU_ASSERT_PTR_NOT_NULL(kiln_symtab_anchors(st, sym, &n));
    return n;
}

/* data -> relu -> NetOutput, plus an Add with one unconnected input. */
static void test_symtab_basic_classes_and_names(void)
{
    kiln_graph *g = kiln_test_graph("basic");
    kiln_node_id out = kiln_test_node(g, "out", "NetOutput", 2, 0);
    kiln_node_id relu = kiln_test_node(g, "relu", "Relu", 1, 1);
    kiln_node_id data = kiln_test_node(g, "data", "Data", 0, 1);
    kiln_node_id addn = kiln_test_node(g, "add", "Add", 2, 1);
    kiln_test_edge(g, data, 0, relu, 0);
    kiln_test_edge(g, relu, 0, out, 0);
    kiln_test_edge(g, data, 0, addn, 0);
    kiln_test_edge(g, addn, 0, out, 1);
    const kiln_symtab *st = table(g);
    /* {data_out_0, relu_in_0, add_in_0} {relu_out_0, out_in_0} {add_in_1}
     * {add_out_0, out_in_1} */
    CU_ASSERT_EQUAL(kiln_symtab_count(st), 4);
    CU_ASSERT_EQUAL(kiln_symtab_anchor_total(st), 8);
    uint32_t sd = sym_out(st, g, data, 0);
    CU_ASSERT_EQUAL(sd, 0); /* first in walk order: data is first in topo order */
    CU_ASSERT_EQUAL(sym_in(st, g, relu, 0), sd);
    CU_ASSERT_EQUAL(sym_in(st, g, addn, 0), sd);
    check_name(st, sd, "data_out_0");
    CU_ASSERT_EQUAL(size_of(st, sd), 3);
    uint32_t sr = sym_out(st, g, relu, 0);
    CU_ASSERT_EQUAL(sym_in(st, g, out, 0), sr);
    check_name(st, sr, "relu_out_0");
    uint32_t su = sym_in(st, g, addn, 1);
    CU_ASSERT_EQUAL(size_of(st, su), 1);
    check_name(st, su, "add_in_1");
    CU_ASSERT_EQUAL(sym_in(st, g, out, 1), sym_out(st, g, addn, 0));
    /* the anchors of a symbol are in walk order: data, relu, add */
    uint32_t n;
    const kiln_symtab_anchor *a = kiln_symtab_anchors(st, sd, &n);
    CU_ASSERT_EQUAL(a[0].node, data);
    CU_ASSERT_EQUAL(a[0].is_output, 1);
    CU_ASSERT_EQUAL(a[1].node, relu);
    CU_ASSERT_EQUAL(a[2].node, addn);
    CU_ASSERT_EQUAL(a[2].is_output, 0);
    char key[64];
    CU_ASSERT_EQUAL(kiln_symtab_anchor_key(st, &a[2], key, sizeof(key)), 8);
    CU_ASSERT_STRING_EQUAL(key, "add_in_0");
    /* bad queries */
    CU_ASSERT_EQUAL(kiln_symtab_symbol(st, g, relu, 1, false), KILN_SYMTAB_NONE);
    CU_ASSERT_EQUAL(kiln_symtab_symbol(st, g, 0, 0, true), KILN_SYMTAB_NONE);
    CU_ASSERT_PTR_NULL(kiln_symtab_anchors(st, 1000, &n));
    CU_ASSERT_EQUAL(n, 0);
    /* cached until an edit */
    CU_ASSERT_PTR_EQUAL(table(g), st);
    kiln_test_verify_ok(g);
    kiln_graph_destroy(g);
}

/* GE_SEMANTICS 9.8 I1: add2 out 0 reuses input 1 -> one symbol fewer, add2's
 * output symbol disappears and add1's gains add2_out_0 and out_in_0. */
static void test_symtab_reuse_input(void)
{
    kiln_graph *g = kiln_test_graph("i1");
    kiln_node_id d1 = kiln_test_node(g, "data1", "Data", 0, 1);
    kiln_node_id d2 = kiln_test_node(g, "data2", "Data", 0, 1);
    kiln_node_id a1 = kiln_test_node(g, "add1", "Add", 2, 1);
    kiln_node_id a2 = kiln_test_node(g, "add2", "Add", 2, 1);
    kiln_node_id out = kiln_test_node(g, "out", "NetOutput", 1, 0);
    kiln_test_edge(g, d1, 0, a1, 0);
    kiln_test_edge(g, d2, 0, a1, 1);
    kiln_test_edge(g, d1, 0, a2, 0);
    kiln_test_edge(g, a1, 0, a2, 1);
    kiln_test_edge(g, a2, 0, out, 0);
    const kiln_symtab *st = table(g);
    uint32_t before = kiln_symtab_count(st);
    CU_ASSERT_EQUAL(before, 4);
    uint32_t s1 = sym_out(st, g, a1, 0);
    CU_ASSERT_EQUAL(size_of(st, s1), 2);
    CU_ASSERT_NOT_EQUAL(sym_out(st, g, a2, 0), s1);

    kiln_attrs *da = kiln_desc_attrs_mut(g, kiln_node_output_desc(g, a2, 0));
    CU_ASSERT_EQUAL(kiln_attrs_set_bool(da, "reuse_input", true), KILN_OK);
    CU_ASSERT_EQUAL(kiln_attrs_set_int(da, "reuse_input_index", 1), KILN_OK);
    st = table(g); /* an attribute edit invalidates the table */
    CU_ASSERT_EQUAL(kiln_symtab_count(st), before - 1);
    s1 = sym_out(st, g, a1, 0);
    CU_ASSERT_EQUAL(sym_out(st, g, a2, 0), s1);
    CU_ASSERT_EQUAL(sym_in(st, g, out, 0), s1);
    CU_ASSERT_EQUAL(size_of(st, s1), 4);
    check_name(st, s1, "add1_out_0");
    /* reuse_input=false is ignored */
    CU_ASSERT_EQUAL(kiln_attrs_set_bool(da, "reuse_input", false), KILN_OK);
    st = table(g);
    CU_ASSERT_EQUAL(kiln_symtab_count(st), before);
    kiln_test_verify_ok(g);
    kiln_graph_destroy(g);
}

/* The table is kept across the edits a memory plan makes (offsets, sizes,
 * memory types, attributes it does not read) and rebuilt by any edit of what
 * it reads: a key it reads set for the first time in the context (never
 * interned before), a ref_input, an op type, a node. */
static void test_symtab_cache_kept_and_invalidated(void)
{
    kiln_ctx *ctx = kiln_ctx_create();
    kiln_graph *g = kiln_graph_create(ctx, "cache");
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    kiln_node_id d1 = kiln_test_node(g, "data1", "Data", 0, 1);
    kiln_node_id d2 = kiln_test_node(g, "data2", "Data", 0, 1);
    kiln_node_id a1 = kiln_test_node(g, "add1", "Add", 2, 1);
    kiln_node_id a2 = kiln_test_node(g, "add2", "Add", 2, 1);
    kiln_node_id out = kiln_test_node(g, "out", "NetOutput", 1, 0);
    kiln_test_edge(g, d1, 0, a1, 0);
    kiln_test_edge(g, d2, 0, a1, 1);
    kiln_test_edge(g, d1, 0, a2, 0);
    kiln_test_edge(g, a1, 0, a2, 1);
    kiln_test_edge(g, a2, 0, out, 0);
    CU_ASSERT_EQUAL(kiln_sym_lookup(g, "reuse_input"), 0);
    const kiln_symtab *st = table(g);
    uint32_t before = kiln_symtab_count(st);
    kiln_tensor_desc *o2 = kiln_node_output_desc(g, a2, 0);
    kiln_desc_set_offset(g, o2, 1024);
    kiln_desc_set_size(g, o2, 512);
    kiln_desc_set_memory_type(g, o2, "HBM");
    CU_ASSERT_EQUAL(kiln_attrs_set_int(kiln_desc_attrs_mut(g, o2), "_inner_offset", 0), KILN_OK);
    CU_ASSERT_EQUAL(kiln_attrs_set_int(kiln_node_attrs_mut(g, a2), "_kiln_task_kind", 1), KILN_OK);
    CU_ASSERT_EQUAL(kiln_attrs_set_int(kiln_graph_attrs(g), "_kiln_memory_alignment", 512),
                    KILN_OK);
    CU_ASSERT_PTR_EQUAL(table(g), st);
    /* reuse_input, interned by this very edit */
    kiln_attrs *da = kiln_desc_attrs_mut(g, o2);
    CU_ASSERT_EQUAL(kiln_attrs_set_int(da, "reuse_input_index", 1), KILN_OK);
    CU_ASSERT_EQUAL(kiln_attrs_set_bool(da, "reuse_input", true), KILN_OK);
    st = table(g);
    CU_ASSERT_EQUAL(kiln_symtab_count(st), before - 1);
    CU_ASSERT_EQUAL(sym_out(st, g, a2, 0), sym_out(st, g, a1, 0));
    kiln_attrs_remove(da, "reuse_input");
    st = table(g);
    CU_ASSERT_EQUAL(kiln_symtab_count(st), before);
    /* ref_input */
    CU_ASSERT_EQUAL(kiln_desc_set_ref_input(g, o2, 0), KILN_OK);
    st = table(g);
    CU_ASSERT_EQUAL(sym_out(st, g, a2, 0), sym_out(st, g, d1, 0));
    CU_ASSERT_EQUAL(kiln_desc_set_ref_input(g, o2, -1), KILN_OK);
    /* an op type: a Reshape's output 0 is its input 0 */
    CU_ASSERT_EQUAL(kiln_node_set_op(g, a2, "Reshape"), KILN_OK);
    st = table(g);
    CU_ASSERT_EQUAL(sym_out(st, g, a2, 0), sym_out(st, g, d1, 0));
    kiln_graph_destroy(g);
    kiln_ctx_destroy(ctx);
}

/* Assign(ref, value) whose output refs input 0 shares the variable's symbol;
 * a second variable reference via ref_var_src_var_name joins it as well. */
static void test_symtab_ref_input_and_ref_var(void)
{
    kiln_graph *g = kiln_test_graph("assign");
    kiln_node_id var = kiln_test_node(g, "var", "Variable", 0, 1);
    kiln_node_id c = kiln_test_node(g, "c", "Const", 0, 1);
    kiln_node_id as = kiln_test_node(g, "assign", "Assign", 2, 1);
    kiln_node_id v2 = kiln_test_node(g, "var_ref", "Variable", 0, 1);
    kiln_node_id out = kiln_test_node(g, "out", "NetOutput", 2, 0);
    kiln_desc_set_ref_input(g, kiln_node_output_desc(g, as, 0), 0);
    CU_ASSERT_EQUAL(kiln_attrs_set_string(kiln_desc_attrs_mut(g, kiln_node_output_desc(g, v2, 0)),
                                          "ref_var_src_var_name", "var"),
                    KILN_OK);
    kiln_test_edge(g, var, 0, as, 0);
    kiln_test_edge(g, c, 0, as, 1);
    kiln_test_edge(g, as, 0, out, 0);
    kiln_test_edge(g, v2, 0, out, 1);
    const kiln_symtab *st = table(g);
    uint32_t sv = sym_out(st, g, var, 0);
    check_name(st, sv, "var_out_0");
    CU_ASSERT_EQUAL(sym_in(st, g, as, 0), sv);
    CU_ASSERT_EQUAL(sym_out(st, g, as, 0), sv);
    CU_ASSERT_EQUAL(sym_in(st, g, out, 0), sv);
    CU_ASSERT_EQUAL(sym_out(st, g, v2, 0), sv);
    CU_ASSERT_EQUAL(sym_in(st, g, out, 1), sv);
    CU_ASSERT_NOT_EQUAL(sym_out(st, g, c, 0), sv);
    CU_ASSERT_EQUAL(sym_in(st, g, as, 1), sym_out(st, g, c, 0));
    CU_ASSERT_EQUAL(kiln_symtab_count(st), 2);
    kiln_test_verify_ok(g);
    kiln_graph_destroy(g);
}

/* Merge unions its connected inputs and output 0 (not output 1); Reshape
 * output 0 refs input 0; a no-padding continuous output node's outputs all
 * ref input 0. */
static void test_symtab_merge_reshape_nopadding(void)
{
    kiln_graph *g = kiln_test_graph("merge");
    kiln_node_id a = kiln_test_node(g, "a", "Data", 0, 1);
    kiln_node_id b = kiln_test_node(g, "b", "Data", 0, 1);
    kiln_node_id m = kiln_test_node(g, "merge", "Merge", 3, 2);
    kiln_node_id r = kiln_test_node(g, "reshape", "Reshape", 2, 1);
    kiln_node_id shp = kiln_test_node(g, "shape", "Const", 0, 1);
    kiln_node_id ps = kiln_test_node(g, "split", "PhonySplit", 1, 2);
    kiln_node_id out = kiln_test_node(g, "out", "NetOutput", 3, 0);
    kiln_test_edge(g, a, 0, m, 0);
    kiln_test_edge(g, b, 0, m, 1); /* merge input 2 stays unconnected */
    kiln_test_edge(g, m, 0, r, 0);
    kiln_test_edge(g, shp, 0, r, 1);
    kiln_test_edge(g, r, 0, ps, 0);
    kiln_test_edge(g, ps, 0, out, 0);
    kiln_test_edge(g, ps, 1, out, 1);
    kiln_test_edge(g, m, 1, out, 2);
    CU_ASSERT_EQUAL(
        kiln_attrs_set_bool(kiln_node_attrs_mut(g, ps), "_no_padding_continuous_output", true),
        KILN_OK);
    const kiln_symtab *st = table(g);
    uint32_t s = sym_out(st, g, a, 0);
    check_name(st, s, "a_out_0");
    CU_ASSERT_EQUAL(sym_out(st, g, b, 0), s);
    CU_ASSERT_EQUAL(sym_in(st, g, m, 1), s);
    CU_ASSERT_EQUAL(sym_out(st, g, m, 0), s);
    CU_ASSERT_EQUAL(sym_out(st, g, r, 0), s);
    CU_ASSERT_EQUAL(sym_out(st, g, ps, 0), s);
    CU_ASSERT_EQUAL(sym_out(st, g, ps, 1), s);
    CU_ASSERT_EQUAL(sym_in(st, g, out, 1), s);
    CU_ASSERT_NOT_EQUAL(sym_in(st, g, m, 2), s);  /* unconnected Merge input */
    CU_ASSERT_NOT_EQUAL(sym_out(st, g, m, 1), s); /* value_index */
    CU_ASSERT_EQUAL(sym_in(st, g, out, 2), sym_out(st, g, m, 1));
    CU_ASSERT_NOT_EQUAL(sym_out(st, g, shp, 0), s);
    /* {a,b,merge in0/in1/out0, reshape in0/out0, split in0/out0/out1, out in0/in1},
     * {merge_in_2}, {shape_out_0, reshape_in_1}, {merge_out_1, out_in_2} */
    CU_ASSERT_EQUAL(kiln_symtab_count(st), 4);
    CU_ASSERT_EQUAL(size_of(st, s), 12);
    kiln_test_verify_ok(g);
    kiln_graph_destroy(g);
}

/* While with cond and body: the parent input producer, both subgraph Datas'
 * outputs, the body's result (through the body NetOutput) and the While
 * outputs share one symbol; the cond result does not. */
static void test_symtab_while_passthrough(void)
{
    kiln_graph *g = kiln_test_graph("root");
    kiln_node_id x = kiln_test_node(g, "x", "Data", 0, 1);
    kiln_node_id w = kiln_test_node(g, "while", "While", 1, 1);
    kiln_node_id out = kiln_test_node(g, "out", "NetOutput", 1, 0);
    kiln_test_edge(g, x, 0, w, 0);
    kiln_test_edge(g, w, 0, out, 0);
    kiln_graph *cond = kiln_node_add_subgraph(g, w, "cond", "while_cond");
    kiln_graph *body = kiln_node_add_subgraph(g, w, "body", "while_body");
    CU_ASSERT_PTR_NOT_NULL_FATAL(cond);
    CU_ASSERT_PTR_NOT_NULL_FATAL(body);
    kiln_node_id cd = kiln_test_node(cond, "cond_data", "Data", 0, 1);
    kiln_node_id lt = kiln_test_node(cond, "less", "Less", 1, 1);
    kiln_node_id cno = kiln_test_node(cond, "cond_out", "NetOutput", 1, 0);
    CU_ASSERT_EQUAL(kiln_attrs_set_int(kiln_node_attrs_mut(cond, cd), "_parent_node_index", 0),
                    KILN_OK);
    kiln_test_edge(cond, cd, 0, lt, 0);
    kiln_test_edge(cond, lt, 0, cno, 0);
    kiln_node_id bd = kiln_test_node(body, "body_data", "Data", 0, 1);
    kiln_node_id one = kiln_test_node(body, "one", "Const", 0, 1);
    kiln_node_id ad = kiln_test_node(body, "body_add", "Add", 2, 1);
    kiln_node_id bno = kiln_test_node(body, "body_out", "NetOutput", 1, 0);
    CU_ASSERT_EQUAL(kiln_attrs_set_int(kiln_node_attrs_mut(body, bd), "_parent_node_index", 0),
                    KILN_OK);
    kiln_test_edge(body, bd, 0, ad, 0);
    kiln_test_edge(body, one, 0, ad, 1);
    kiln_test_edge(body, ad, 0, bno, 0);
    CU_ASSERT_EQUAL(
        kiln_attrs_set_int(kiln_desc_attrs_mut(body, kiln_node_input_desc_mut(body, bno, 0)),
                           "_parent_node_index", 0),
        KILN_OK);

    const kiln_symtab *st = table(g);
    uint32_t s = sym_out(st, g, x, 0);
    check_name(st, s, "x_out_0");
    CU_ASSERT_EQUAL(sym_in(st, g, w, 0), s);
    CU_ASSERT_EQUAL(sym_out(st, g, w, 0), s);
    CU_ASSERT_EQUAL(sym_in(st, g, out, 0), s);
    CU_ASSERT_EQUAL(sym_out(st, cond, cd, 0), s);
    CU_ASSERT_EQUAL(sym_in(st, cond, lt, 0), s);
    CU_ASSERT_EQUAL(sym_out(st, body, bd, 0), s);
    CU_ASSERT_EQUAL(sym_in(st, body, ad, 0), s);
    CU_ASSERT_EQUAL(sym_out(st, body, ad, 0), s);
    CU_ASSERT_EQUAL(sym_in(st, body, bno, 0), s);
    uint32_t sc = sym_out(st, cond, lt, 0);
    CU_ASSERT_NOT_EQUAL(sc, s);
    CU_ASSERT_EQUAL(sym_in(st, cond, cno, 0), sc);
    check_name(st, sc, "less_out_0");
    CU_ASSERT_NOT_EQUAL(sym_out(st, body, one, 0), s);
    /* anchors of other graphs carry their graph number */
    uint32_t n;
    const kiln_symtab_anchor *a = kiln_symtab_anchors(st, sc, &n);
    CU_ASSERT_EQUAL(n, 2);
    CU_ASSERT_PTR_EQUAL(kiln_symtab_graph(st, a[0].graph), cond);
    CU_ASSERT_PTR_NULL(kiln_symtab_graph(st, 3));
    /* walk order: root graph first, so x_out_0 ... out_in_0, then cond, body */
    a = kiln_symtab_anchors(st, s, &n);
    CU_ASSERT_EQUAL(n, 10);
    CU_ASSERT_EQUAL(a[0].graph, 0);
    CU_ASSERT_EQUAL(a[n - 1].graph, 2);

    /* an edit inside a subgraph invalidates the root's table */
    CU_ASSERT_EQUAL(kiln_edge_remove(body, bno, 0), KILN_OK);
    kiln_test_edge(body, one, 0, bno, 0);
    st = table(g);
    s = sym_out(st, g, x, 0);
    CU_ASSERT_NOT_EQUAL(sym_out(st, body, ad, 0), s);
    CU_ASSERT_EQUAL(sym_out(st, body, one, 0), s); /* now the loop-carried value */
    kiln_test_verify_ok(g);
    kiln_graph_destroy(g);
}

/* If: each branch's NetOutput input i joins the If's output i (default
 * mapping), each branch Data joins the If input named by _parent_node_index. */
static void test_symtab_if_passthrough(void)
{
    kiln_graph *g = kiln_test_graph("root");
    kiln_node_id p = kiln_test_node(g, "pred", "Data", 0, 1);
    kiln_node_id x = kiln_test_node(g, "x", "Data", 0, 1);
    kiln_node_id iff = kiln_test_node(g, "if", "If", 2, 1);
    kiln_node_id out = kiln_test_node(g, "out", "NetOutput", 1, 0);
    kiln_test_edge(g, p, 0, iff, 0);
    kiln_test_edge(g, x, 0, iff, 1);
    kiln_test_edge(g, iff, 0, out, 0);
    kiln_graph *th = kiln_node_add_subgraph(g, iff, "then_branch", "if_then");
    kiln_graph *el = kiln_node_add_subgraph(g, iff, "else_branch", "if_else");
    kiln_node_id td = kiln_test_node(th, "then_data", "Data", 0, 1);
    kiln_node_id tno = kiln_test_node(th, "then_out", "NetOutput", 1, 0);
    CU_ASSERT_EQUAL(kiln_attrs_set_int(kiln_node_attrs_mut(th, td), "_parent_node_index", 1),
                    KILN_OK);
    kiln_test_edge(th, td, 0, tno, 0);
    kiln_node_id ed = kiln_test_node(el, "else_data", "Data", 0, 1);
    kiln_node_id neg = kiln_test_node(el, "neg", "Neg", 1, 1);
    kiln_node_id eno = kiln_test_node(el, "else_out", "NetOutput", 1, 0);
    CU_ASSERT_EQUAL(kiln_attrs_set_int(kiln_node_attrs_mut(el, ed), "_parent_node_index", 1),
                    KILN_OK);
    kiln_test_edge(el, ed, 0, neg, 0);
    kiln_test_edge(el, neg, 0, eno, 0);
    const kiln_symtab *st = table(g);
    uint32_t s = sym_out(st, g, x, 0);
    CU_ASSERT_EQUAL(sym_out(st, th, td, 0), s);
    CU_ASSERT_EQUAL(sym_in(st, th, tno, 0), s);
    CU_ASSERT_EQUAL(sym_out(st, g, iff, 0), s); /* then returns its input */
    CU_ASSERT_EQUAL(sym_out(st, el, ed, 0), s);
    CU_ASSERT_EQUAL(sym_out(st, el, neg, 0), s); /* joined through if_out_0 */
    CU_ASSERT_NOT_EQUAL(sym_out(st, g, p, 0), s);
    CU_ASSERT_EQUAL(sym_in(st, g, iff, 0), sym_out(st, g, p, 0));
    CU_ASSERT_EQUAL(kiln_symtab_count(st), 2);
    kiln_test_verify_ok(g);
    kiln_graph_destroy(g);
}

int main(void)
{
    static const kiln_test_case cases[] = {
        {"test_symtab_basic_classes_and_names", test_symtab_basic_classes_and_names},
        {"test_symtab_reuse_input", test_symtab_reuse_input},
        {"test_symtab_cache_kept_and_invalidated", test_symtab_cache_kept_and_invalidated},
        {"test_symtab_ref_input_and_ref_var", test_symtab_ref_input_and_ref_var},
        {"test_symtab_merge_reshape_nopadding", test_symtab_merge_reshape_nopadding},
        {"test_symtab_while_passthrough", test_symtab_while_passthrough},
        {"test_symtab_if_passthrough", test_symtab_if_passthrough},
        {NULL, NULL},
    };
    return kiln_test_run("symtab", cases);
}

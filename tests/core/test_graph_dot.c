/*
 * test_graph_dot.c - the Graphviz writer: structure of the output (clusters
 * for subgraphs, solid labelled data edges, dashed control edges, escaped
 * labels, balanced braces), validity with `dot -Tsvg` when Graphviz is
 * installed, and atomic file output.
 */
#include "kiln_test.h"
#include "ctx.h"
#include "graph_dot.h"
#include "graph_int.h"

#include <unistd.h>

static kiln_ctx *ctx;

static kiln_graph *build(void)
{
    kiln_graph *g = kiln_graph_create(ctx, "net \"1\"");
    kiln_node_id x = kiln_graph_add_node(g, "x", "Data", 0, 1);
    kiln_node_id w = kiln_graph_add_node(g, "loop", "While", 1, 1);
    kiln_node_id o = kiln_graph_add_node(g, "out", "NetOutput", 1, 0);
    kiln_node_id n = kiln_graph_add_node(g, "q\"uote\\", "NoOp", 0, 0);
    kiln_edge_add(g, x, 0, w, 0);
    kiln_edge_add(g, w, 0, o, 0);
    kiln_ctrl_add(g, n, o);
    kiln_graph *body = kiln_node_add_subgraph(g, w, "body", "loop_body");
    kiln_node_id bd = kiln_graph_add_node(body, "bd", "Data", 0, 1);
    kiln_node_id bo = kiln_graph_add_node(body, "bo", "NetOutput", 1, 0);
    kiln_edge_add(body, bd, 0, bo, 0);
    kiln_graph *cond = kiln_node_add_subgraph(g, w, "cond", "loop_cond");
    kiln_graph_add_node(cond, "cn", "NetOutput", 0, 0);
    return g;
}

static char *to_string(const kiln_graph *g)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    kiln_error err = {0};
    CU_ASSERT_EQUAL(kiln_graph_write_dot(g, f, &err), KILN_OK);
    fclose(f);
    return buf;
}

static void test_graph_dot_structure(void)
{
    kiln_graph *g = build();
    char *s = to_string(g);
    CU_ASSERT(strncmp(s, "digraph \"net \\\"1\\\"\" {\n", 22) == 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(s, "g0_n1 [label=\"x\\nData\"];"));
    CU_ASSERT_PTR_NOT_NULL(strstr(s, "[label=\"q\\\"uote\\\\\\nNoOp\"]"));
    CU_ASSERT_PTR_NOT_NULL(strstr(s, "subgraph cluster_1 {\n    label=\"body: loop_body\";"));
    CU_ASSERT_PTR_NOT_NULL(strstr(s, "subgraph cluster_2 {\n    label=\"cond: loop_cond\";"));
    CU_ASSERT_PTR_NOT_NULL(strstr(s, "g1_n1 -> g1_n2 [label=\"0\xe2\x86\x92" "0\"];"));
    CU_ASSERT_PTR_NOT_NULL(strstr(s, "g0_n1 -> g0_n2 [label=\"0\xe2\x86\x92" "0\"];"));
    CU_ASSERT_PTR_NOT_NULL(strstr(s, "g0_n4 -> g0_n3 [style=dashed];"));
    CU_ASSERT_PTR_NOT_NULL(strstr(s, "g0_n2 -> g1_n1 [style=dotted, lhead=cluster_1];"));
    int depth = 0, min = 0;
    bool in_str = false;
    for (const char *p = s; *p; p++) {
        if (*p == '\\' && in_str) {
            p++;
            continue;
        }
        if (*p == '"')
            in_str = !in_str;
        else if (!in_str && *p == '{')
            depth++;
        else if (!in_str && *p == '}' && --depth < min)
            min = depth;
    }
    CU_ASSERT_EQUAL(depth, 0);
    CU_ASSERT_EQUAL(min, 0);
    CU_ASSERT_FALSE(in_str);
    free(s);
    kiln_graph_destroy(g);
}

static void test_graph_dot_file_and_graphviz(void)
{
    kiln_graph *g = build();
    char dir[] = "/tmp/kiln_dot_XXXXXX";
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
    char path[256], cmd[600];
    snprintf(path, sizeof(path), "%s/g.dot", dir);
    kiln_error err = {0};
    CU_ASSERT_EQUAL(kiln_graph_write_dot_file(g, path, &err), KILN_OK);
    CU_ASSERT_EQUAL(access(path, R_OK), 0);
    if (system("command -v dot >/dev/null 2>&1") == 0) {
        snprintf(cmd, sizeof(cmd), "dot -Tsvg '%s' -o '%s/g.svg'", path, dir);
        CU_ASSERT_EQUAL(system(cmd), 0);
        snprintf(cmd, sizeof(cmd), "%s/g.svg", dir);
        unlink(cmd);
    } else {
        fprintf(stderr, "[dot not installed: structure checked only] ");
    }
    unlink(path);
    CU_ASSERT_EQUAL(rmdir(dir), 0);
    /* Unwritable destination: error names the path. */
    CU_ASSERT_EQUAL(kiln_graph_write_dot_file(g, "/nonexistent-dir/g.dot", &err), KILN_ERR_IO);
    CU_ASSERT_PTR_NOT_NULL(strstr(kiln_error_message(&err), "/nonexistent-dir/g.dot"));
    kiln_graph_destroy(g);
}

static void test_graph_dot_empty_graph(void)
{
    kiln_graph *g = kiln_graph_create(ctx, "e");
    char *s = to_string(g);
    CU_ASSERT_STRING_EQUAL(s, "digraph \"e\" {\n  compound=true;\n  node [shape=box];\n}\n");
    free(s);
    kiln_graph_destroy(g);
}

int main(void)
{
    static const kiln_test_case cases[] = {
        {"test_graph_dot_structure", test_graph_dot_structure},
        {"test_graph_dot_file_and_graphviz", test_graph_dot_file_and_graphviz},
        {"test_graph_dot_empty_graph", test_graph_dot_empty_graph},
        {NULL, NULL},
    };
    ctx = kiln_ctx_create();
    if (!ctx)
        return 1;
    int rc = kiln_test_run("graph_dot", cases);
    kiln_ctx_destroy(ctx);
    return rc;
}

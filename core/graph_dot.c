/*
 * graph_dot.c - Graphviz DOT writer (see graph_dot.h).
 *
 * Layout of the output:
 *   digraph "<root>" {
 *     compound=true; node [shape=box];
 *     g0_n<id> [label="name\ntype"];            one per live node, id order
 *       a node a fusion produced (ReportFuse's records) gets a third line
 *       "fused from: a, b (PassName)" and style=bold
 *     subgraph cluster_<k> { label="role: name"; ...nodes, nested clusters,
 *                            edges of that subgraph... }
 *     g0_n<a> -> g0_n<b> [label="o→i"];          data edges, solid
 *     g0_n<a> -> g0_n<b> [style=dashed];         control edges
 *     g0_n<p> -> gk_n<first> [style=dotted, lhead=cluster_k];  owner -> subgraph
 *   }
 * A graph the partition stage partitioned (kiln_graph_partition_count > 0)
 * draws each partition as a filled cluster, coloured by engine:
 *     subgraph cluster_p<k>_<rank> { label="<partition name>\n<engine>";
 *       style=filled; fillcolor="<colour>"; ...its nodes... }
 * Graph k is the root (0) or the k-th entry (1-based) of the root's subgraph
 * list, so DOT identifiers are unique across nesting.  Strings are quoted with
 * '"' and '\' escaped.  Nesting is handled by recursion on subgraph depth
 * (small); nodes and edges are iterated (partition clusters through a bucket
 * sort by rank).  O(nodes + edges + subgraphs^2).
 */
#include "graph_dot.h"
#include "fusion_int.h"
#include "graph_int.h"
#include "fileio.h"

#include <errno.h>

/* @p s with '"' and '\\' escaped and newlines as \n, for a quoted DOT string. */
static void put_escaped(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fputc('\\', f);
        if (*s == '\n')
            fputs("\\n", f);
        else
            fputc(*s, f);
    }
}

static void put_quoted(FILE *f, const char *s)
{
    fputc('"', f);
    put_escaped(f, s);
    fputc('"', f);
}

static uint32_t graph_index(const kiln_graph *g)
{
    const kiln_graph *root = g->root;
    for (uint32_t i = 0; i < root->nsubgraphs; i++)
        if (root->subgraphs[i] == g)
            return i + 1;
    return 0;
}

static void indent(FILE *f, int depth)
{
    for (int i = 0; i < depth; i++)
        fputs("  ", f);
}

static void write_node(FILE *f, const kiln_graph *g, uint32_t gi, kiln_node_id n, int depth)
{
    indent(f, depth);
    fprintf(f, "g%u_n%u [label=\"", gi, n);
    put_escaped(f, kiln_node_name_str(g, n));
    fputs("\\n", f);
    put_escaped(f, kiln_node_op_str(g, n));
    const kiln_attrs *a = kiln_node_attrs(g, n);
    const char *const *src = NULL, *const *pass = NULL;
    uint32_t ns = 0, np = 0;
    bool fused = kiln_attrs_get_list_string(a, KILN_ATTR_FUSION_PASSES, &pass, &np) && np;
    if (fused) {
        (void)kiln_attrs_get_list_string(a, KILN_ATTR_ORIGIN_NAMES, &src, &ns);
        fputs("\\nfused from: ", f);
        for (uint32_t i = 0; i < ns; i++) {
            if (i)
                fputs(", ", f);
            put_escaped(f, src[i]);
        }
        fputs(" (", f);
        for (uint32_t i = 0; i < np; i++) {
            if (i)
                fputs(", ", f);
            put_escaped(f, pass[i]);
        }
        fputs(")", f);
    }
    fputs(fused ? "\", style=bold];\n" : "\"];\n", f);
}

/* A light fill colour for an engine name (stable: a hash into a palette). */
static const char *engine_colour(const char *engine)
{
    static const char *const palette[] = {"#cfe2ff", "#d1e7dd", "#fff3cd", "#f8d7da",
                                          "#e2d9f3", "#d2f4ea", "#ffe5d0", "#e9ecef"};
    if (strcmp(engine, "inputNodesSubGraph") == 0)
        return "#f8f9fa";
    uint32_t h = 2166136261u;
    for (const char *p = engine; *p; p++)
        h = (h ^ (uint8_t)*p) * 16777619u;
    return palette[h % KILN_ARRAY_LEN(palette)];
}

/* The nodes of a partitioned graph, one filled cluster per partition. */
static bool write_partitions(FILE *f, const kiln_graph *g, uint32_t gi, int depth)
{
    uint32_t np = kiln_graph_partition_count(g);
    uint32_t *start = kiln__calloc((size_t)np + 2, sizeof(uint32_t));
    kiln_node_id *by_rank = kiln__calloc((size_t)g->live + 1, sizeof(kiln_node_id));
    if (!start || !by_rank) {
        kiln__free(start);
        kiln__free(by_rank);
        return false;
    }
    /* bucket sort by rank + 1 (bucket 0: nodes of no partition) */
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n))
        start[kiln_node_partition(g, n) + 2]++;
    for (uint32_t b = 1; b < np + 2; b++)
        start[b] += start[b - 1];
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n))
        by_rank[start[kiln_node_partition(g, n) + 1]++] = n;
    /* start[b] is now the end of bucket b */
    for (uint32_t i = 0; i < start[0]; i++)
        write_node(f, g, gi, by_rank[i], depth);
    for (uint32_t r = 0; r < np; r++) {
        const char *engine = kiln_graph_partition_engine(g, r);
        indent(f, depth);
        fprintf(f, "subgraph cluster_p%u_%u {\n", gi, r);
        indent(f, depth + 1);
        fputs("label=\"", f);
        put_escaped(f, kiln_graph_partition_name(g, r));
        fputs("\\n", f);
        put_escaped(f, engine);
        fprintf(f, "\"; style=filled; fillcolor=\"%s\";\n", engine_colour(engine));
        for (uint32_t i = start[r]; i < start[r + 1]; i++)
            write_node(f, g, gi, by_rank[i], depth + 1);
        indent(f, depth);
        fputs("}\n", f);
    }
    kiln__free(start);
    kiln__free(by_rank);
    return true;
}

static void write_body(FILE *f, const kiln_graph *g, uint32_t gi, int depth)
{
    /* Nodes: in partition clusters when the graph is partitioned. */
    if (!kiln_graph_partition_count(g) || !write_partitions(f, g, gi, depth))
        for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n))
            write_node(f, g, gi, n, depth);
    /* Subgraph clusters, nested. */
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n)) {
        for (uint32_t i = 0; i < kiln_node_subgraph_count(g, n); i++) {
            const char *role;
            const kiln_graph *sg = kiln_node_subgraph(g, n, i, &role);
            uint32_t si = graph_index(sg);
            indent(f, depth);
            fprintf(f, "subgraph cluster_%u {\n", si);
            indent(f, depth + 1);
            fputs("label=", f);
            char label[320];
            snprintf(label, sizeof(label), "%s: %s", role, kiln_graph_name(sg));
            put_quoted(f, label);
            fputs(";\n", f);
            write_body(f, sg, si, depth + 1);
            indent(f, depth);
            fputs("}\n", f);
            kiln_node_id first = kiln_graph_next_node(sg, 0);
            if (first) {
                indent(f, depth);
                fprintf(f, "g%u_n%u -> g%u_n%u [style=dotted, lhead=cluster_%u];\n", gi, n, si,
                        first, si);
            }
        }
    }
    /* Data edges (by consumer, input order) and control edges. */
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n)) {
        for (uint32_t i = 0; i < kiln_node_input_count(g, n); i++) {
            kiln_anchor src = kiln_node_input_peer(g, n, i);
            if (!src.node)
                continue;
            indent(f, depth);
            fprintf(f, "g%u_n%u -> g%u_n%u [label=\"%u\xe2\x86\x92%u\"];\n", gi, src.node, gi, n,
                    src.index, i);
        }
        for (uint32_t c = kiln_ctrl_in_first(g, n); c; c = kiln_ctrl_in_next(g, c)) {
            indent(f, depth);
            fprintf(f, "g%u_n%u -> g%u_n%u [style=dashed];\n", gi, kiln_ctrl_src(g, c), gi, n);
        }
    }
}

kiln_status kiln_graph_write_dot(const kiln_graph *g, FILE *f, kiln_error *err)
{
    fputs("digraph ", f);
    put_quoted(f, kiln_graph_name(g));
    fputs(" {\n  compound=true;\n  node [shape=box];\n", f);
    write_body(f, g, graph_index(g), 1);
    fputs("}\n", f);
    if (ferror(f) || fflush(f) != 0)
        return kiln_errorf(err, KILN_ERR_IO, "cannot write DOT output: %s", strerror(errno));
    return KILN_OK;
}

static kiln_status write_cb(FILE *f, void *ud, kiln_error *err)
{
    return kiln_graph_write_dot(ud, f, err);
}

kiln_status kiln_graph_write_dot_file(const kiln_graph *g, const char *path, kiln_error *err)
{
    kiln_status st = kiln_file_write_atomic(path, write_cb, (void *)g, err);
    if (st != KILN_OK)
        kiln_error_push(err, "%s", path);
    return st;
}

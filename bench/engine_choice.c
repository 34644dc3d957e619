/*
 * engine_choice.c - placement queries against the built-in engines.
 *
 * Loads libkiln_aicore.so, libkiln_vector.so, libkiln_hostcpu.so and
 * libkiln_rts.so ($KILN_PLUGIN_DIR, else <exe>/../lib/kiln/plugins), builds
 * graphs of 10k, 100k and 1M one-output nodes whose op types cycle over 24
 * types (Conv .. Frobnicate, one listed by no engine; dtypes float32 / int64
 * / bool as the ops produce) and times kiln_engine_for_node on every node:
 *
 *   indexed   the host's op-symbol index (core/engine.c)
 *   scan      the same choice by scanning every engine's op table with
 *             strcmp (what the host did before the index), for the ratio
 *
 * Prints ns per node for both, scan/indexed, and t(1M)/t(100k) (linear = 10).
 * Usage: bench_engine_choice [max_nodes]
 */
#include "bench_util.h"
#include "graph_int.h"
#include "plugin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *op;
    kiln_dtype dt;
} ops[] = {
    {"Conv", KILN_DT_FLOAT32},        {"Relu", KILN_DT_FLOAT32},
    {"Add", KILN_DT_FLOAT32},         {"MatMul", KILN_DT_FLOAT32},
    {"Reshape", KILN_DT_FLOAT32},     {"Shape", KILN_DT_INT64},
    {"Gather", KILN_DT_INT64},        {"Concat", KILN_DT_INT64},
    {"Mul", KILN_DT_FLOAT32},         {"Sigmoid", KILN_DT_FLOAT32},
    {"Softmax", KILN_DT_FLOAT32},     {"Transpose", KILN_DT_FLOAT32},
    {"MaxPool", KILN_DT_FLOAT32},     {"Gemm", KILN_DT_FLOAT32},
    {"Equal", KILN_DT_BOOL},          {"Cast", KILN_DT_FLOAT32},
    {"Slice", KILN_DT_INT64},         {"Unsqueeze", KILN_DT_INT64},
    {"ReduceMean", KILN_DT_FLOAT32},  {"Identity", KILN_DT_FLOAT32},
    {"MemcpyAsync", KILN_DT_FLOAT32}, {"LSTM", KILN_DT_FLOAT32},
    {"Pad", KILN_DT_FLOAT32},         {"Frobnicate", KILN_DT_FLOAT32},
};
#define NOPS (sizeof(ops) / sizeof(ops[0]))

/* The old choice: every engine's table scanned with strcmp. */
static const char *scan_choice(kiln_ctx *ctx, kiln_graph *g, kiln_node_id n)
{
    const char *op = kiln_node_op_str(g, n);
    kiln_dtype dt = kiln_desc_dtype(kiln_node_output_desc(g, n, 0));
    const kiln_component *best = NULL;
    for (uint32_t i = 0; i < kiln_registry_count(ctx); i++) {
        const kiln_component *c = kiln_registry_at(ctx, i);
        if (c->kind != KILN_COMP_ENGINE ||
            (best && best->d.engine.priority >= c->d.engine.priority))
            continue;
        for (uint32_t o = 0; o < c->d.engine.op_count; o++) {
            const kiln_op_info *oi = &c->d.engine.ops[o];
            if (strcmp(oi->op_type, op) == 0) {
                if (oi->dtype_mask == 0 || (oi->dtype_mask & (1u << dt)))
                    best = c;
                break;
            }
        }
    }
    return best ? best->name : NULL;
}

int main(int argc, char **argv)
{
    long max = argc > 1 ? atol(argv[1]) : 1000000;
    const char *dir = getenv("KILN_PLUGIN_DIR");
    char dflt[1024];
    if (!dir) {
        snprintf(dflt, sizeof(dflt), "%s/../lib/kiln/plugins", kiln_exe_dir());
        dir = dflt;
    }
    kiln_ctx *ctx = kiln_ctx_create();
    kiln_error err;
    kiln_error_clear(&err);
    static const char *const plugins[] = {"libkiln_aicore.so", "libkiln_vector.so",
                                          "libkiln_hostcpu.so", "libkiln_rts.so"};
    for (unsigned i = 0; i < 4; i++) {
        char path[1200];
        snprintf(path, sizeof(path), "%s/%s", dir, plugins[i]);
        if (kiln_plugin_load(ctx, path, NULL, &err) != KILN_OK) {
            fprintf(stderr, "bench_engine_choice: %s\n", kiln_error_message(&err));
            return 1;
        }
    }
    printf("%-8s %12s %12s %10s\n", "nodes", "indexed ns", "scan ns", "scan/idx");
    double t100k = 0, t1m = 0;
    for (long nodes = 10000; nodes <= max; nodes *= 10) {
        kiln_graph *g = kiln_graph_create(ctx, "g");
        for (long i = 0; i < nodes; i++) {
            char name[32];
            snprintf(name, sizeof(name), "n%ld", i);
            kiln_node_id n = kiln_graph_add_node(g, name, ops[i % NOPS].op, 0, 1);
            kiln_desc_set_dtype(g, kiln_node_output_desc(g, n, 0), ops[i % NOPS].dt);
        }
        kiln_engine_for_node(g, 1); /* builds the index */
        size_t hits = 0, hits2 = 0;
        double t0 = now();
        for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n))
            hits += kiln_engine_for_node(g, n) != NULL;
        double t1 = now();
        for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n))
            hits2 += scan_choice(ctx, g, n) != NULL;
        double t2 = now();
        if (hits != hits2) {
            fprintf(stderr, "bench_engine_choice: indexed placed %zu nodes, scan %zu\n", hits,
                    hits2);
            return 1;
        }
        double idx = (t1 - t0) * 1e9 / (double)nodes, scan = (t2 - t1) * 1e9 / (double)nodes;
        printf("%-8ld %12.1f %12.1f %10.2f\n", nodes, idx, scan, scan / idx);
        if (nodes == 100000)
            t100k = t1 - t0;
        if (nodes == 1000000)
            t1m = t1 - t0;
        kiln_graph_destroy(g);
    }
    if (t100k > 0 && t1m > 0)
        printf("indexed t(1M)/t(100k) = %.2f (linear: 10)\n", t1m / t100k);
    kiln_ctx_destroy(ctx);
    return 0;
}

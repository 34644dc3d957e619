/*
 * opreg.c - op registry benchmark (a program, not a test).
 *
 * 1. Lookup: 10M op-type queries over the node ops of a model-like mix
 *    (Conv, Relu, Add, Const, Data, Reshape, an unregistered type, ...) with
 *    the ONNX op set loaded (libkiln_onnx_ops.so): kiln_op_find by interned
 *    symbol, kiln_op_find_str by name, and the string compare against a list
 *    of 8 type names that it replaces ("is this op data-like?").  Printed:
 *    ns per query and the ratios.
 * 2. InferShapes on chains of about 10k, 100k and 1M nodes (Data, then
 *    blocks of Add(x, Const) -> Relu -> Mul(x, x) -> Reshape(x, Const shape),
 *    float32 [4, 64]; every node's op looked up in the registry, its inference
 *    run, nothing folds since x is unknown): wall time and t(1M)/t(100k)
 *    (linear scaling gives about 10).
 *
 * Plugins come from $KILN_PLUGIN_DIR or <exe>/../lib/kiln/plugins.  Usage:
 * bench_opreg [max_nodes] (default 1000000).  Build in Release:
 * cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release.
 */
#include "bench_util.h"
#include "ctx.h"
#include "graph_int.h"
#include "passmgr.h"
#include "plugin.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die(const char *what, const kiln_error *err)
{
    fprintf(stderr, "bench_opreg: %s: %s\n", what, err ? kiln_error_message(err) : "failed");
    exit(1);
}

static void load(kiln_ctx *ctx, const char *file)
{
    const char *dir = getenv("KILN_PLUGIN_DIR");
    char def[1024], path[1200];
    if (!dir || !*dir) {
        snprintf(def, sizeof(def), "%s/../lib/kiln/plugins", kiln_exe_dir());
        dir = def;
    }
    snprintf(path, sizeof(path), "%s/%s", dir, file);
    kiln_error err;
    kiln_error_clear(&err);
    if (kiln_plugin_load(ctx, path, NULL, &err) != KILN_OK)
        die("plugin load", &err);
}

static volatile uintptr_t sink;

static void bench_lookup(kiln_ctx *ctx)
{
    static const char *const mix[] = {"Conv", "Relu", "Add", "Const", "Data",
                                      "Reshape", "AcmeUnregistered", "MatMul"};
    static const char *const data_like[] = {"Data", "RefData", "AippData", "AnnData",
                                            "Const", "Constant", "Variable", "VarHandleOp"};
    enum { NMIX = 8, N = 10000000 };
    kiln_graph *g = kiln_graph_create(ctx, "lookup");
    kiln_sym syms[NMIX];
    for (int i = 0; i < NMIX; i++)
        syms[i] = kiln_intern(g, mix[i]);
    double t0 = now();
    uintptr_t acc = 0;
    for (uint32_t i = 0; i < N; i++)
        acc += (uintptr_t)kiln_op_find(g, syms[i & (NMIX - 1)]);
    double t_sym = now() - t0;
    t0 = now();
    for (uint32_t i = 0; i < N; i++)
        acc += (uintptr_t)kiln_op_find_str(g, mix[i & (NMIX - 1)]);
    double t_str = now() - t0;
    t0 = now();
    for (uint32_t i = 0; i < N; i++) {
        const char *t = kiln_sym_str(g, syms[i & (NMIX - 1)]);
        for (int k = 0; k < 8; k++)
            if (strcmp(t, data_like[k]) == 0) {
                acc++;
                break;
            }
    }
    double t_cmp = now() - t0;
    t0 = now();
    for (uint32_t i = 0; i < N; i++) {
        const kiln_op_def *d = kiln_op_find(g, syms[i & (NMIX - 1)]);
        acc += d && (d->flags & KILN_OP_DATA_LIKE);
    }
    double t_flag = now() - t0;
    sink = acc;
    printf("op lookup, %d queries (ns/query):\n", N);
    printf("  kiln_op_find (symbol)         %7.2f\n", t_sym * 1e9 / N);
    printf("  kiln_op_find_str (name)       %7.2f   %.1fx the symbol lookup\n", t_str * 1e9 / N,
           t_str / t_sym);
    printf("  data-like by flag (symbol)    %7.2f\n", t_flag * 1e9 / N);
    printf("  data-like by 8 strcmp         %7.2f   %.1fx the flag test\n", t_cmp * 1e9 / N,
           t_cmp / t_flag);
    kiln_graph_destroy(g);
}

/* Data, then blocks of 6 nodes until about @p target nodes, then NetOutput. */
static kiln_graph *chain(kiln_ctx *ctx, uint32_t target)
{
    kiln_graph *g = kiln_graph_create(ctx, "chain");
    kiln_node_id x = kiln_graph_add_node(g, "x", "Data", 0, 1);
    int64_t dims[2] = {4, 64};
    kiln_desc_set_dtype(g, kiln_node_output_desc(g, x, 0), KILN_DT_FLOAT32);
    kiln_desc_set_shape(g, kiln_node_output_desc(g, x, 0), 2, dims);
    kiln_attrs_set_int(kiln_node_attrs_mut(g, x), "index", 0);
    float one[64];
    for (int i = 0; i < 64; i++)
        one[i] = 1.0f;
    int64_t cdims[1] = {64}, sdims[1] = {2}, shape[2] = {4, 64};
    kiln_tensor_value cv = {KILN_DT_FLOAT32, 1, cdims, one, sizeof(one)};
    kiln_tensor_value sv = {KILN_DT_INT64, 1, sdims, shape, sizeof(shape)};
    char name[64];
    kiln_node_id cur = x;
    for (uint32_t b = 0; kiln_graph_node_count(g) + 6 < target; b++) {
        snprintf(name, sizeof name, "c%u", b);
        kiln_node_id c = kiln_graph_add_node(g, name, "Const", 0, 1);
        kiln_attrs_set_tensor(kiln_node_attrs_mut(g, c), "value", &cv);
        kiln_desc_set_dtype(g, kiln_node_output_desc(g, c, 0), KILN_DT_FLOAT32);
        kiln_desc_set_shape(g, kiln_node_output_desc(g, c, 0), 1, cdims);
        snprintf(name, sizeof name, "s%u", b);
        kiln_node_id s = kiln_graph_add_node(g, name, "Const", 0, 1);
        kiln_attrs_set_tensor(kiln_node_attrs_mut(g, s), "value", &sv);
        kiln_desc_set_dtype(g, kiln_node_output_desc(g, s, 0), KILN_DT_INT64);
        kiln_desc_set_shape(g, kiln_node_output_desc(g, s, 0), 1, sdims);
        const char *ops[4] = {"Add", "Relu", "Mul", "Reshape"};
        const uint32_t nin[4] = {2, 1, 2, 2};
        for (int k = 0; k < 4; k++) {
            snprintf(name, sizeof name, "n%u_%d", b, k);
            kiln_node_id n = kiln_graph_add_node(g, name, ops[k], nin[k], 1);
            kiln_edge_add(g, cur, 0, n, 0);
            if (k == 0)
                kiln_edge_add(g, c, 0, n, 1);
            else if (k == 2)
                kiln_edge_add(g, cur, 0, n, 1);
            else if (k == 3)
                kiln_edge_add(g, s, 0, n, 1);
            cur = n;
        }
    }
    kiln_node_id out = kiln_graph_add_node(g, "out", "NetOutput", 1, 0);
    kiln_edge_add(g, cur, 0, out, 0);
    if (kiln_graph_oom(g))
        die("graph build (out of memory)", NULL);
    return g;
}

static double bench_infer(kiln_ctx *ctx, uint32_t target, uint32_t *nodes)
{
    kiln_graph *g = chain(ctx, target);
    *nodes = kiln_graph_node_count(g);
    kiln_error err;
    kiln_error_clear(&err);
    kiln_pass_inst pi;
    memset(&pi, 0, sizeof(pi));
    pi.comp = kiln_registry_find(ctx, KILN_COMP_PASS, "InferShapes");
    pi.enabled = true;
    if (!pi.comp)
        die("InferShapes not registered", NULL);
    kiln_passmgr *pm = NULL;
    if (kiln__passmgr_create(ctx, NULL, &pm, &err) != KILN_OK)
        die("passmgr_create", &err);
    double t0 = now();
    if (kiln__passmgr_run_stage(pm, "prepare", &pi, 1, g, &err) != KILN_OK)
        die("InferShapes", &err);
    double t = now() - t0;
    const int64_t *d = kiln_desc_dims(kiln_node_output_desc(g, kiln_node_input_peer(
                                                                   g, kiln_graph_find_node(g, "out"), 0).node, 0));
    if (!d || d[0] != 4 || d[1] != 64)
        die("InferShapes left the output unknown", NULL);
    kiln__passmgr_destroy(pm);
    kiln_graph_destroy(g);
    return t;
}

int main(int argc, char **argv)
{
    uint32_t max = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 1000000u;
    kiln_ctx *ctx = kiln_ctx_create();
    if (!ctx)
        die("context", NULL);
    kiln_ctx_set_option(ctx, "kiln.log", "quiet");
    load(ctx, "libkiln_onnx_ops.so");
    load(ctx, "libkiln_cpu.so");
    bench_lookup(ctx);
    printf("InferShapes on a chain (Add, Relu, Mul, Reshape per block; nothing folds):\n");
    printf("  %10s %10s %12s\n", "nodes", "seconds", "us/node");
    double t100k = 0, t1m = 0;
    for (uint32_t target = 10000; target <= max; target *= 10) {
        uint32_t n;
        double t = bench_infer(ctx, target, &n);
        printf("  %10u %10.3f %12.3f\n", n, t, t * 1e6 / n);
        if (target == 100000)
            t100k = t;
        if (target == 1000000)
            t1m = t;
    }
    if (t100k > 0 && t1m > 0)
        printf("  t(1M)/t(100k) = %.1f (linear: 10)\n", t1m / t100k);
    kiln_ctx_destroy(ctx);
    return 0;
}

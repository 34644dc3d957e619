/*
 * dynamic_shape_scale.c - DynamicShapePartitioner scaling benchmark (a
 * program, not a test).
 *
 * Generates graphs of about 10k, 100k and 1M nodes made of 10-node blocks
 * (x = the previous block's output, every tensor float32 [8] and static):
 *     k1 = Relu(x), k2 = Relu(k1), k3 = Relu(k2),
 *     u  = Relu(k3) with _force_unknown_shape,
 *     k4 = Add(u, k3), k5 = Relu(k4), k6 = Add(k5, x), k7, k8 = Relu chain,
 *     and a Const c feeding k4's block every 8th block through k5 = Add
 * so every block has a known cluster whose merge with the next one would make
 * a ring through u (k3 -> u -> k4 and k3 -> k4): each such merge needs a ring
 * search, the pass's worst common case.  A control edge joins every 16th
 * block's u to the next block's k1.
 *
 * Runs DynamicShapePartitioner once per size through the kernel's pass
 * manager (plugin from $KILN_PLUGIN_DIR or <exe>/../lib/kiln/plugins) and
 * prints: nodes, the pass's wall time, the PartitionedCalls built, the
 * cluster merges, the ring searches and the clusters they visited (the
 * pass's statistics), and t(1M)/t(100k) of the wall and the CPU time
 * (linear scaling gives 10; the CPU ratio is the one a shared machine does
 * not distort).
 *
 * Usage: bench_dynamic_shape_scale [max_nodes]   (default 1000000); build
 * in Release (cmake -DCMAKE_BUILD_TYPE=Release).
 */
#include "bench_util.h"
#include "ctx.h"
#include "graph_int.h"
#include "passctx.h"
#include "passmgr.h"
#include "plugin.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* CPU seconds of this process (user + system), to tell scaling from a busy machine. */
static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *what, const kiln_error *err)
{
    fprintf(stderr, "bench_dynamic_shape_scale: %s failed: %s\n", what, err ? err->msg : "");
    exit(1);
}

static kiln_node_id add(kiln_graph *g, const char *op, uint32_t nin, uint32_t *seq)
{
    char name[32];
    snprintf(name, sizeof(name), "n%u", (*seq)++);
    kiln_node_id n = kiln_graph_add_node(g, name, op, nin, 1);
    if (!n)
        die("add_node", NULL);
    static const int64_t dims[1] = {8};
    kiln_desc_set_shape(g, kiln_node_output_desc(g, n, 0), 1, dims);
    return n;
}

static void edge(kiln_graph *g, kiln_node_id s, kiln_node_id d, uint32_t i)
{
    if (kiln_edge_add(g, s, 0, d, i) != KILN_OK)
        die("edge_add", NULL);
}

static kiln_graph *generate(kiln_ctx *ctx, uint32_t target)
{
    kiln_graph *g = kiln_graph_create(ctx, "bench");
    if (!g)
        die("graph_create", NULL);
    uint32_t seq = 0;
    kiln_node_id x = add(g, "Data", 0, &seq);
    kiln_attrs_set_int(kiln_node_attrs_mut(g, x), "index", 0);
    kiln_node_id prev_u = 0;
    for (uint32_t b = 0; seq + 12 < target; b++) {
        kiln_node_id k1 = add(g, "Relu", 1, &seq), k2 = add(g, "Relu", 1, &seq);
        kiln_node_id k3 = add(g, "Relu", 1, &seq), u = add(g, "Relu", 1, &seq);
        kiln_node_id k4 = add(g, "Add", 2, &seq);
        kiln_node_id k5 = add(g, b % 8 == 0 ? "Add" : "Relu", b % 8 == 0 ? 2 : 1, &seq);
        kiln_node_id k6 = add(g, "Add", 2, &seq), k7 = add(g, "Relu", 1, &seq);
        kiln_node_id k8 = add(g, "Relu", 1, &seq);
        kiln_attrs_set_bool(kiln_node_attrs_mut(g, u), "_force_unknown_shape", true);
        edge(g, x, k1, 0);
        edge(g, k1, k2, 0);
        edge(g, k2, k3, 0);
        edge(g, k3, u, 0);
        edge(g, u, k4, 0);
        edge(g, k3, k4, 1);
        edge(g, k4, k5, 0);
        if (b % 8 == 0)
            edge(g, add(g, "Const", 0, &seq), k5, 1);
        edge(g, k5, k6, 0);
        edge(g, x, k6, 1);
        edge(g, k6, k7, 0);
        edge(g, k7, k8, 0);
        if (prev_u && b % 16 == 0)
            kiln_ctrl_add(g, prev_u, k1);
        prev_u = u;
        x = k8;
    }
    kiln_node_id out = kiln_graph_add_node(g, "out", "NetOutput", 1, 0);
    edge(g, x, out, 0);
    if (kiln_graph_oom(g))
        die("generate (out of memory)", NULL);
    return g;
}

int main(int argc, char **argv)
{
    uint32_t max = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 1000000u;
    static const uint32_t sizes[] = {10000, 100000, 1000000};
    double t100k = 0, t1m = 0, c100k = 0, c1m = 0;
    printf("DynamicShapePartitioner scaling (10-node blocks, one forced-unknown node and one "
           "ring check each)\n");
    printf("%10s %10s %10s %10s %10s %12s %12s\n", "nodes", "wall s", "cpu s", "calls", "merges",
           "ring search", "ring steps");
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]) && sizes[s] <= max; s++) {
        kiln_ctx *ctx = kiln_ctx_create();
        kiln_error err;
        kiln_error_clear(&err);
        const char *dir = getenv("KILN_PLUGIN_DIR");
        char def[1024], path[1200];
        if (!dir || !*dir) {
            snprintf(def, sizeof(def), "%s/../lib/kiln/plugins", kiln_exe_dir());
            dir = def;
        }
        snprintf(path, sizeof(path), "%s/libkiln_dynamic_shape.so", dir);
        if (!ctx || kiln_plugin_load(ctx, path, NULL, &err) != KILN_OK)
            die("plugin load", &err);
        kiln_graph *g = generate(ctx, sizes[s]);
        uint32_t nodes = kiln_graph_node_count(g);
        kiln_pass_inst pi;
        memset(&pi, 0, sizeof(pi));
        pi.comp = kiln_registry_find(ctx, KILN_COMP_PASS, "DynamicShapePartitioner");
        pi.enabled = true;
        if (!pi.comp)
            die("DynamicShapePartitioner lookup", NULL);
        FILE *devnull = fopen("/dev/null", "w");
        kiln_instrumentation instr = {.bisect_limit = -1, .log = devnull};
        kiln_passmgr *pm = NULL;
        if (kiln__passmgr_create(ctx, &instr, &pm, &err) != KILN_OK)
            die("passmgr_create", &err);
        double t0 = now(), c0 = cpu_now();
        if (kiln__passmgr_run_stage(pm, "partition", &pi, 1, g, &err) != KILN_OK)
            die("DynamicShapePartitioner", &err);
        double t = now() - t0, c = cpu_now() - c0;
        kiln_pass_ctx *pc = kiln__passmgr_ctx(pm);
#define STAT(k) (long long)kiln__passctx_stat(pc, "partition", "DynamicShapePartitioner", k)
        printf("%10u %10.3f %10.3f %10lld %10lld %12lld %12lld\n", nodes, t, c, STAT("ds_partitioned_calls"),
               STAT("ds_merges"), STAT("ds_ring_searches"), STAT("ds_ring_steps"));
        fflush(stdout);
        if (sizes[s] == 100000)
            t100k = t, c100k = c;
        if (sizes[s] == 1000000)
            t1m = t, c1m = c;
        kiln__passmgr_destroy(pm);
        if (devnull)
            fclose(devnull);
        kiln_graph_destroy(g);
        kiln_ctx_destroy(ctx);
    }
    if (t100k > 0 && t1m > 0)
        printf("t(1M)/t(100k) = %.1f wall, %.1f cpu (linear: 10)\n", t1m / t100k, c1m / c100k);
    return 0;
}

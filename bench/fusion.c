/*
 * fusion.c - fusion executor scaling benchmark (a program, not a test).
 *
 * Builds a transformer-like synthetic graph of about 10k, 100k and 1M nodes:
 * a chain of blocks, each
 *
 *     c = Const;  a = Add(h, c);  r = Relu(a);  h' = Mul(r, h)
 *
 * (h feeds both the Add and the Mul, like a residual), and runs one pattern
 * fusion pass over it through kiln_fusion_run_stage, the path the executor
 * passes take:
 *
 *   match only   pattern Data, Data -> Add -> Relu; meet_requirements vetoes
 *                every match (candidate index + MatchNext per Relu)
 *   match+fuse   the same pattern replaced by one node "AddRelu" per block
 *                (CanFuse with the incremental cycle detector, the rewrite,
 *                ReportFuse, deleting the matched nodes)
 *
 * It prints the time per size and the ratio t(1M)/t(100k) for each (linear
 * scaling gives 10).  Each figure is the best of 3 runs on a fresh graph,
 * measured as the process's CPU time (the pass is single-threaded; CPU time
 * does not count the waits of a loaded machine, wall time does).  Before
 * each run a 64 MiB buffer is streamed through the cache so every size
 * starts from memory (the 100k graph would otherwise stay in L3 after being
 * built and the 1M graph could not, and the ratio would measure the cache).
 *
 * Usage: bench_fusion [max_nodes]   (default 1000000).  Build in Release:
 * cmake -DCMAKE_BUILD_TYPE=Release.
 */
#include "bench_util.h"
#include "ctx.h"
#include "graph_int.h"
#include "passctx.h"
#include "plugin.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REPEAT 3
#define FLUSH_BYTES (64u << 20)

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static volatile unsigned char flush_sink;

static void flush_cache(void)
{
    static unsigned char *buf;
    if (!buf && !(buf = malloc(FLUSH_BYTES)))
        return;
    unsigned char acc = 0;
    for (size_t i = 0; i < FLUSH_BYTES; i += 64) {
        buf[i] = (unsigned char)(buf[i] + 1);
        acc ^= buf[i];
    }
    flush_sink = acc;
}

static bool veto;

static kiln_status ar_patterns(void *inst, kiln_pattern *p, kiln_error *err)
{
    (void)inst, (void)err;
    int32_t x = kiln_pattern_node(p, "x", "Data"), y = kiln_pattern_node(p, "y", "Data");
    int32_t a = kiln_pattern_node(p, "add", "Add"), r = kiln_pattern_node(p, "relu", "Relu");
    if (kiln_pattern_edge(p, x, 0, a, 0) || kiln_pattern_edge(p, y, 0, a, 1) ||
        kiln_pattern_edge(p, a, 0, r, 0))
        return KILN_ERR_INVALID;
    return kiln_pattern_output(p, r, 0);
}

static bool ar_meet(void *inst, const kiln_graph *g, const kiln_match *m)
{
    (void)inst, (void)g, (void)m;
    return !veto;
}

static kiln_status ar_replace(void *inst, kiln_pass_ctx *ctx, const kiln_graph *g,
                              const kiln_match *m, kiln_graph *repl)
{
    (void)inst, (void)ctx, (void)g, (void)m;
    kiln_node_id f = kiln_graph_add_node(repl, "add_relu", "AddRelu", 2, 1);
    kiln_node_id out = kiln_graph_add_node(repl, "out", "NetOutput", 1, 0);
    if (!f || !out || kiln_edge_add(repl, kiln_fusion_replacement_input(repl, 0), 0, f, 0) ||
        kiln_edge_add(repl, kiln_fusion_replacement_input(repl, 1), 0, f, 1))
        return KILN_ERR_NOMEM;
    return kiln_edge_add(repl, f, 0, out, 0);
}

static const kiln_fusion_pass_desc pass = {.struct_size = sizeof(kiln_fusion_pass_desc),
                                           .name = "AddReluFusionPass",
                                           .kind = KILN_FUSION_PATTERN,
                                           .stage = KILN_FUSION_STAGE_BUILTIN,
                                           .patterns = ar_patterns,
                                           .meet_requirements = ar_meet,
                                           .replacement = ar_replace};

static kiln_status reg(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)h, (void)e;
    return kiln_register_fusion_pass(r, &pass);
}

static const kiln_plugin_desc plugin = {.struct_size = sizeof(kiln_plugin_desc),
                                        .abi_major = KILN_ABI_MAJOR,
                                        .abi_minor = KILN_ABI_MINOR,
                                        .name = "kiln.bench.fusion",
                                        .version = "1",
                                        .init = reg};

static kiln_graph *build(kiln_ctx *ctx, uint32_t blocks)
{
    kiln_graph *g = kiln_graph_create(ctx, "bench");
    if (!g || !kiln_graph_reserve(g, blocks * 4 + 2, blocks * 4 + 1, blocks * 4 + 1))
        return NULL;
    char name[32];
    kiln_node_id h = kiln_graph_add_node(g, "x", "Data", 0, 1);
    for (uint32_t b = 0; b < blocks; b++) {
        snprintf(name, sizeof(name), "c%u", b);
        kiln_node_id c = kiln_graph_add_node(g, name, "Const", 0, 1);
        snprintf(name, sizeof(name), "add%u", b);
        kiln_node_id a = kiln_graph_add_node(g, name, "Add", 2, 1);
        snprintf(name, sizeof(name), "relu%u", b);
        kiln_node_id r = kiln_graph_add_node(g, name, "Relu", 1, 1);
        snprintf(name, sizeof(name), "mul%u", b);
        kiln_node_id m = kiln_graph_add_node(g, name, "Mul", 2, 1);
        if (!c || !a || !r || !m || kiln_edge_add(g, h, 0, a, 0) || kiln_edge_add(g, c, 0, a, 1) ||
            kiln_edge_add(g, a, 0, r, 0) || kiln_edge_add(g, r, 0, m, 0) ||
            kiln_edge_add(g, h, 0, m, 1))
            return NULL;
        h = m;
    }
    kiln_node_id o = kiln_graph_add_node(g, "out", "NetOutput", 1, 0);
    if (!o || kiln_edge_add(g, h, 0, o, 0))
        return NULL;
    return g;
}

/* Best-of-REPEAT seconds for one mode on a graph of @p blocks blocks. */
static double time_mode(kiln_ctx *ctx, uint32_t blocks, bool match_only, uint32_t *nodes_after)
{
    double best = 1e30;
    veto = match_only;
    for (int rep = 0; rep < REPEAT; rep++) {
        kiln_graph *g = build(ctx, blocks);
        if (!g) {
            fprintf(stderr, "bench_fusion: out of memory building %u blocks\n", blocks);
            exit(1);
        }
        kiln_error *err = kiln_error_create();
        kiln_pass_ctx pc;
        kiln__passctx_init(&pc, ctx, stderr, err);
        pc.stage = "optimize_original";
        flush_cache();
        double t0 = cpu_now();
        kiln_pass_result r = kiln_fusion_run_stage(&pc, g, KILN_FUSION_STAGE_BUILTIN);
        double dt = cpu_now() - t0;
        if (r == KILN_PASS_FAILED) {
            char buf[512];
            kiln_error_format(err, buf, sizeof(buf));
            fprintf(stderr, "bench_fusion: %s\n", buf);
            exit(1);
        }
        int64_t eff = kiln__passctx_stat(&pc, NULL, "AddReluFusionPass", "effected");
        if ((match_only && eff != 0) || (!match_only && eff != (int64_t)blocks)) {
            fprintf(stderr, "bench_fusion: %lld fusions for %u blocks\n", (long long)eff, blocks);
            exit(1);
        }
        *nodes_after = kiln_graph_node_count(g);
        kiln__passctx_fini(&pc);
        kiln_error_destroy(err);
        kiln_graph_destroy(g);
        if (dt < best)
            best = dt;
    }
    return best;
}

int main(int argc, char **argv)
{
    uint32_t max_nodes = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 1000000u;
    static const uint32_t sizes[] = {10000, 100000, 1000000};
    kiln_ctx *ctx = kiln_ctx_create();
    kiln_error *err = kiln_error_create();
    if (!ctx || kiln_plugin_register_static(ctx, &plugin, NULL, err) != KILN_OK) {
        fprintf(stderr, "bench_fusion: cannot register the pass\n");
        return 1;
    }
    double t[3][2] = {{0}};
    printf("CPU ms, best of %d, cold cache\n", REPEAT);
    printf("%-10s %10s %14s %14s %12s\n", "nodes", "matches", "match only ms", "match+fuse ms",
           "nodes after");
    for (int i = 0; i < 3 && sizes[i] <= max_nodes; i++) {
        uint32_t blocks = (sizes[i] - 2) / 4, after = 0;
        t[i][0] = time_mode(ctx, blocks, true, &after);
        t[i][1] = time_mode(ctx, blocks, false, &after);
        printf("%-10u %10u %14.2f %14.2f %12u\n", blocks * 4 + 2, blocks, t[i][0] * 1e3,
               t[i][1] * 1e3, after);
    }
    if (t[2][0] > 0 && t[1][0] > 0)
        printf("ratio 1M/100k: match only %.2f, match+fuse %.2f (linear = 10)\n", t[2][0] / t[1][0],
               t[2][1] / t[1][1]);
    kiln_error_destroy(err);
    kiln_ctx_destroy(ctx);
    return 0;
}

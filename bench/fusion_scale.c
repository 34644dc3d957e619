/*
 * fusion_scale.c - scaling of CanFuse + SubgraphRewriter::Replace (a
 * program, not a test).
 *
 * For 10k, 100k and 1M pairs it builds a chain data -> relu_0 -> ... ->
 * relu_{2P-1} -> NetOutput, with a control edge from every 64th node to the
 * node 3 further on (so the detector's searches have something to cross), and
 * fuses every Relu -> Relu pair into one FusedRelu through
 * kiln_fusion_can_fuse and kiln_fusion_replace, as a fusion pass does: one
 * boundary, one replacement graph, CanFuse, replace per pair.  It prints the
 * CPU and wall time of the fusion loop, CPU time per fusion, how often the cycle detector was
 * built (once: the fusions update it instead of rebuilding), and the ratio
 * t(1M)/t(100k) (linear scaling gives 10).  A check at the end verifies the
 * graph has P + 2 nodes and the detector's invariant holds.
 *
 * Usage: bench_fusion_scale [max_pairs]   (default 1000000).  Build in
 * Release: cmake -DCMAKE_BUILD_TYPE=Release.
 */
#include "analysis_cycle.h"
#include "bench_util.h"
#include "ctx.h"
#include "passctx.h"
#include "plugin.h"
#include <stdio.h>
#include <stdlib.h>

/* CPU time of this process, in seconds: the machine may be shared, and the
 * wall clock then measures the other processes too. */
static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double run(kiln_ctx *ctx, uint32_t pairs, uint64_t *builds, uint64_t *relabels, double *wall)
{
    kiln_graph *g = kiln_graph_create(ctx, "chain");
    uint32_t n = 2 * pairs;
    kiln_graph_reserve(g, n + 2, n + 2, n + 2);
    kiln_node_id *r = malloc((size_t)n * sizeof(*r));
    kiln_node_id prev = kiln_graph_add_node(g, "data", "Data", 0, 1);
    char name[32];
    for (uint32_t i = 0; i < n; i++) {
        snprintf(name, sizeof(name), "relu_%u", i);
        r[i] = kiln_graph_add_node(g, name, "Relu", 1, 1);
        kiln_edge_add(g, prev, 0, r[i], 0);
        prev = r[i];
        if (i >= 3 && i % 64 == 0)
            kiln_ctrl_add(g, r[i - 3], r[i]);
    }
    kiln_node_id out = kiln_graph_add_node(g, "out", "NetOutput", 1, 0);
    kiln_edge_add(g, prev, 0, out, 0);

    static kiln_component comp = {.kind = KILN_COMP_PASS, .name = "ReluReluFusionPass"};
    kiln_error err;
    kiln_error_clear(&err);
    kiln_pass_ctx pc;
    kiln__passctx_init(&pc, ctx, NULL, &err);
    pc.comp = &comp;

    double t0 = cpu_now(), w0 = now();
    uint32_t fused = 0;
    char reason[256];
    for (uint32_t p = 0; p < pairs; p++) {
        kiln_node_id set[2] = {r[2 * p], r[2 * p + 1]};
        kiln_anchor in = kiln_node_input_peer(g, set[0], 0), outa = {set[1], 0};
        kiln_fusion_boundary b = {sizeof(b), set, 2, &in, 1, &outa, 1};
        if (!kiln_fusion_can_fuse(g, set, 2, reason, sizeof(reason))) {
            fprintf(stderr, "pair %u refused: %s\n", p, reason);
            break;
        }
        kiln_graph *repl = kiln_fusion_replacement_new(g, &b);
        snprintf(name, sizeof(name), "fused_%u", p);
        kiln_node_id f = kiln_graph_add_node(repl, name, "FusedRelu", 1, 1);
        kiln_node_id o = kiln_graph_add_node(repl, "o", "NetOutput", 1, 0);
        kiln_edge_add(repl, kiln_fusion_replacement_input(repl, 0), 0, f, 0);
        kiln_edge_add(repl, f, 0, o, 0);
        if (kiln_fusion_replace(&pc, g, &b, repl) != KILN_OK) {
            fprintf(stderr, "pair %u: %s\n", p, kiln_error_message(&err));
            break;
        }
        fused++;
    }
    double t = cpu_now() - t0;
    *wall = now() - w0;
    const struct kiln_cycles *c = kiln__cycles_peek(g);
    *builds = c ? c->builds : 0;
    *relabels = c ? c->relabels : 0;
    bool ok = fused == pairs && kiln_graph_node_count(g) == pairs + 2 && kiln__cycles_check(g) &&
              kiln__passctx_stat(&pc, NULL, "ReluReluFusionPass", "effected") == pairs;
    if (!ok)
        fprintf(stderr, "check failed at %u pairs (fused %u, nodes %u)\n", pairs, fused,
                kiln_graph_node_count(g));
    kiln__passctx_fini(&pc);
    kiln_graph_destroy(g);
    free(r);
    return ok ? t : -1;
}

int main(int argc, char **argv)
{
    uint32_t max = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 1000000;
    kiln_ctx *ctx = kiln_ctx_create();
    double t100k = 0, t1m = 0;
    printf("%-10s %10s %10s %14s %8s %9s\n", "pairs", "cpu_s", "wall_s", "us_per_fusion", "builds",
           "relabels");
    for (uint32_t pairs = 10000; pairs <= max; pairs *= 10) {
        uint64_t builds = 0, relabels = 0;
        double wall = 0, t = run(ctx, pairs, &builds, &relabels, &wall);
        if (t < 0)
            return 1;
        printf("%-10u %10.3f %10.3f %14.3f %8llu %9llu\n", pairs, t, wall, t * 1e6 / pairs,
               (unsigned long long)builds, (unsigned long long)relabels);
        if (pairs == 100000)
            t100k = t;
        if (pairs == 1000000)
            t1m = t;
    }
    if (t100k > 0 && t1m > 0)
        printf("ratio cpu t(1M)/t(100k) = %.2f (linear = 10)\n", t1m / t100k);
    printf("peak RSS %ld kB\n", peak_rss_kb());
    kiln_ctx_destroy(ctx);
    return 0;
}

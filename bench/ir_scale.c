/*
 * ir_scale.c - IR scaling benchmark (a program, not a test).
 *
 * Builds layered transformer-like DAGs of 10k, 100k and 1M nodes and times
 * the whole-graph operations on each: build, JSON write/read, topological
 * sort, verify, the reachability index and 100k random queries, a GEPass
 * sweep with a trivial node pass, and the memory symbol table.  It prints
 * each time, the ratio t(1M)/t(100k) (linear scaling gives 10; the target is
 * <= 12), bytes per node, and peak RSS.  A second, minimal graph (every node
 * exactly 2 inputs and 1 output, no attributes, reserved up front) measures
 * the IR's own footprint, which must stay <= 200 bytes/node.  Topo sort,
 * verify, the reachability index, the symbol table and the GEPass sweep are
 * timed as the best of 5 runs (analysis caches made stale between runs);
 * build, JSON and the query loops run once.  The JSON rows are the calling
 * thread's CPU time (user + system), the others wall time.
 *
 * Cold CPU caches: before each timed analysis run the benchmark streams a
 * buffer of max(64 MiB, 4 x L3) through the cache, so every size starts from
 * memory.  Otherwise the 100k graph (~15 MB) stays resident in a 16 MiB L3
 * across the repetitions while the 1M graph (~190 MB) cannot, and the ratio
 * measures the cache size rather than the algorithm; in a compiler the graph
 * is not cache-resident between two analyses either (the passes in between
 * touch other memory).  The warm-cache ratio is printed beside it.
 *
 * Usage: bench_ir_scale [max_nodes]   (default 1000000; sizes 10k, 100k, 1M
 * up to max_nodes).  Build in Release: cmake -DCMAKE_BUILD_TYPE=Release.
 * The generator is deterministic (fixed xorshift seed).
 */
#include "analysis.h"
#include "bench_util.h"
#include "ctx.h"
#include "gepass.h"
#include "graph_json.h"
#include "intern.h"
#include "passctx.h"
#include "plugin.h"
#include "symtab.h"
#include "verify.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define NQUERIES 100000u
#define REPEAT 5

enum { OP_BUILD, OP_WRITE, OP_READ, OP_TOPO, OP_VERIFY, OP_REACH_BUILD, OP_REACH_Q,
       OP_REACH_FWD, OP_GEPASS, OP_SYMTAB, OP_COUNT };
/* Operations the <= 12 scaling target applies to (the list: JSON,
 * topo, verify, reachability, GEPass sweep, symbol table).  Building the
 * graph is shown for information: it is two hash-table insertions per node
 * (string intern, name index) whose tables outgrow the cache at 1M. */
static const bool op_target[OP_COUNT] = {false, true, true, true, true, true,
                                         true,  true, true, true};
static const char *const op_names[OP_COUNT] = {
    "build", "json write", "json read", "topo sort", "verify", "reach index",
    "reach 100k rand", "reach 100k fwd", "gepass sweep", "symtab build",
};

typedef struct result {
    uint32_t nodes;
    double t[OP_COUNT];    /* seconds; < 0 = not run; analyses: cold caches */
    double warm[OP_COUNT]; /* analyses with warm caches; < 0 = not measured */
    double bytes_per_node, str_per_node, min_bytes_per_node, min_str_per_node, min_exact;
    long rss_kb;
    uint64_t fallbacks;
    uint32_t reach_true, reach_fwd_true, symbols;
} result;

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint32_t rnd(uint32_t n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng % n);
}

static void die(const char *what, const kiln_error *err)
{
    fprintf(stderr, "bench_ir_scale: %s failed: %s\n", what, err ? err->msg : "");
    exit(1);
}

/* ---- graph generators ----------------------------------------------------- */

typedef struct builder {
    kiln_graph *g;
    uint32_t layer;
    char name[48];
} builder;

static kiln_node_id node(builder *b, const char *op, const char *what, uint32_t nin)
{
    snprintf(b->name, sizeof(b->name), "L%u/%s", b->layer, what);
    kiln_node_id n = kiln_graph_add_node(b->g, b->name, op, nin, 1);
    if (!n)
        die("add_node", NULL);
    static const int64_t dims[3] = {8, 128, 1024};
    kiln_desc_set_shape(b->g, kiln_node_output_desc(b->g, n, 0), 3, dims);
    return n;
}

static kiln_node_id op1(builder *b, const char *op, const char *what, kiln_node_id x)
{
    kiln_node_id n = node(b, op, what, 1);
    kiln_edge_add(b->g, x, 0, n, 0);
    return n;
}

static kiln_node_id op2(builder *b, const char *op, const char *what, kiln_node_id x,
                        kiln_node_id y)
{
    kiln_node_id n = node(b, op, what, 2);
    kiln_edge_add(b->g, x, 0, n, 0);
    kiln_edge_add(b->g, y, 0, n, 1);
    return n;
}

/* One pre-norm transformer block: 25 nodes; ln1 has 3 consumers, the
 * residual inputs 2; a control edge every other layer (~1 per 50 nodes). */
static kiln_node_id layer(builder *b, kiln_node_id x, kiln_node_id *prev_sm)
{
    kiln_node_id ln1 = op2(b, "LayerNorm", "ln1", x, node(b, "Const", "g1", 0));
    kiln_node_id wq = node(b, "Const", "wq", 0);
    kiln_node_id q = op2(b, "MatMul", "q", ln1, wq);
    kiln_node_id k = op2(b, "MatMul", "k", ln1, node(b, "Const", "wk", 0));
    kiln_node_id v = op2(b, "MatMul", "v", ln1, node(b, "Const", "wv", 0));
    kiln_node_id kt = op1(b, "Transpose", "kt", k);
    kiln_node_id s = op2(b, "BatchMatMul", "s", q, kt);
    kiln_node_id sc = op2(b, "Mul", "scale", s, node(b, "Const", "c", 0));
    kiln_node_id sm = op1(b, "Softmax", "softmax", sc);
    kiln_node_id a = op2(b, "BatchMatMul", "attn", sm, v);
    kiln_node_id o = op2(b, "MatMul", "o", a, node(b, "Const", "wo", 0));
    kiln_node_id r1 = op2(b, "Add", "res1", x, o);
    kiln_node_id ln2 = op2(b, "LayerNorm", "ln2", r1, node(b, "Const", "g2", 0));
    kiln_node_id h = op2(b, "MatMul", "ffn1", ln2, node(b, "Const", "w1", 0));
    kiln_node_id ge = op1(b, "Gelu", "gelu", h);
    kiln_node_id f = op2(b, "MatMul", "ffn2", ge, node(b, "Const", "w2", 0));
    kiln_node_id r2 = op2(b, "Add", "res2", r1, f);
    if (*prev_sm && (b->layer & 1))
        kiln_ctrl_add(b->g, *prev_sm, wq);
    *prev_sm = sm;
    return r2;
}

static kiln_graph *build_transformer(kiln_ctx *ctx, uint32_t nodes)
{
    builder b = {kiln_graph_create(ctx, "transformer"), 0, {0}};
    kiln_node_id x = kiln_graph_add_node(b.g, "input", "Data", 0, 1);
    kiln_node_id prev_sm = 0;
    while (kiln_graph_node_count(b.g) + 26 <= nodes) {
        x = layer(&b, x, &prev_sm);
        b.layer++;
    }
    kiln_node_id out = kiln_graph_add_node(b.g, "output", "NetOutput", 1, 0);
    kiln_edge_add(b.g, x, 0, out, 0);
    if (kiln_graph_oom(b.g))
        die("build (oom)", NULL);
    return b.g;
}

/* Minimal IR: node i reads nodes i-1 and i-2; no attributes, shapes unknown. */
static kiln_graph *build_minimal(kiln_ctx *ctx, uint32_t nodes)
{
    kiln_graph *g = kiln_graph_create(ctx, "minimal");
    kiln_graph_reserve(g, nodes, 2 * nodes, nodes);
    char name[24];
    for (uint32_t i = 1; i <= nodes; i++) {
        snprintf(name, sizeof(name), "m%u", i);
        kiln_node_id n = kiln_graph_add_node(g, name, "Add", 2, 1);
        if (n > 1)
            kiln_edge_add(g, n - 1, 0, n, 0);
        if (n > 2)
            kiln_edge_add(g, n - 2, 0, n, 1);
    }
    if (kiln_graph_oom(g))
        die("build minimal (oom)", NULL);
    return g;
}

/* ---- trivial node pass for the GEPass sweep ------------------------------ */

static kiln_status count_node(void *inst, kiln_pass_ctx *pc, kiln_graph *g, kiln_node_id n)
{
    (void)pc;
    (void)g;
    (void)n;
    (*(uint64_t *)inst)++;
    return KILN_OK;
}

static double time_gepass(kiln_ctx *ctx, kiln_graph *g)
{
    kiln_component comp;
    memset(&comp, 0, sizeof(comp));
    comp.kind = KILN_COMP_PASS;
    comp.name = "BenchCountPass";
    comp.d.pass.struct_size = sizeof(comp.d.pass);
    comp.d.pass.kind = KILN_PASS_KIND_NODE;
    comp.d.pass.name = comp.name;
    comp.d.pass.run_node = count_node;
    uint64_t visits = 0;
    kiln_gepass_item item = {&comp, &visits, NULL};
    kiln_error err = {0};
    kiln_pass_ctx pc;
    kiln__passctx_init(&pc, ctx, stderr, &err);
    double t0 = now();
    kiln_status st = kiln__gepass_run(&pc, g, &item, 1, &err);
    double t = now() - t0;
    kiln__passctx_fini(&pc);
    if (st != KILN_OK)
        die("gepass", &err);
    if (visits != kiln_graph_node_count(g))
        fprintf(stderr, "bench_ir_scale: gepass visited %llu of %u nodes\n",
                (unsigned long long)visits, kiln_graph_node_count(g));
    return t;
}

/* ---- cache eviction ------------------------------------------------------ */

static unsigned char *evict_buf;
static size_t evict_size;
static volatile unsigned evict_sink;

/* Size of the last-level cache: sysfs (what lscpu shows; glibc's sysconf can
 * report the host's total on a VM), else sysconf, else unknown (-1). */
static long l3_bytes(void)
{
    FILE *f = fopen("/sys/devices/system/cpu/cpu0/cache/index3/size", "r");
    if (f) {
        long v = -1;
        char unit = 0;
        int got = fscanf(f, "%ld%c", &v, &unit);
        fclose(f);
        if (got >= 1 && v > 0)
            return unit == 'K' ? v << 10 : unit == 'M' ? v << 20 : v;
    }
#ifdef _SC_LEVEL3_CACHE_SIZE
    return sysconf(_SC_LEVEL3_CACHE_SIZE);
#else
    return -1;
#endif
}

static void evict_init(void)
{
    long l3 = l3_bytes();
    evict_size = (size_t)64 << 20;
    if (l3 > 0 && (size_t)l3 * 4 > evict_size)
        evict_size = (size_t)l3 * 4;
    if (evict_size > (size_t)512 << 20)
        evict_size = (size_t)512 << 20;
    evict_buf = malloc(evict_size);
    if (!evict_buf)
        die("evict buffer", NULL);
    memset(evict_buf, 1, evict_size);
}

/* Stream the eviction buffer through the caches (read + write a byte per line). */
static void evict(void)
{
    unsigned acc = 0;
    for (size_t i = 0; i < evict_size; i += 64) {
        acc += evict_buf[i];
        evict_buf[i] = (unsigned char)acc;
    }
    evict_sink = acc;
}

/* ---- one size ------------------------------------------------------------- */

static void keep_min(double *slot, double t)
{
    if (*slot < 0 || t < *slot)
        *slot = t;
}

/* A no-op structural edit: every cached analysis of @p g becomes stale. */
static void invalidate(kiln_graph *g)
{
    kiln_node_id a = kiln_graph_next_node(g, 0), b = kiln_graph_id_limit(g) - 1;
    kiln_ctrl_add(g, a, b);
    kiln_ctrl_remove(g, a, b);
}

/* Bytes/node the minimal graph would take with arrays sized exactly (no
 * power-of-two slack): what an exact kiln_graph_reserve would give. */
static double exact_bytes_per_node(const kiln_graph *g)
{
    size_t b = (size_t)g->node_limit * (sizeof(knode) + sizeof(knode_cold)) +
               (size_t)g->in_len * sizeof(kuse) + (size_t)g->out_len * (sizeof(void *) + sizeof(uint32_t)) +
               (size_t)g->ctrl_len * sizeof(kctrl) + (size_t)g->name_cap * 4 + g->arena.total;
    return (double)b / kiln_graph_node_count(g);
}

/* One timed run of analysis @p op on @p g (the cache made stale first); with
 * @p cold the CPU caches are flushed after the set-up, right before the clock
 * starts (the reachability index's set-up computes the topological order,
 * which would otherwise leave the graph cached). */
static double time_analysis(kiln_ctx *ctx, kiln_graph *g, int op, int rep, bool cold)
{
    kiln_error err = {0};
    const kiln_node_id *order = NULL;
    uint32_t norder = 0;
    const kiln_symtab *st;
    double t0;
    switch (op) {
    case OP_TOPO:
        invalidate(g);
        if (cold)
            evict();
        t0 = now();
        if (kiln_graph_topo_order(g, &order, &norder, &err) != KILN_OK)
            die("topo", &err);
        return now() - t0;
    case OP_VERIFY:
        if (cold)
            evict();
        t0 = now();
        if (kiln_graph_verify(g, &err) != KILN_OK)
            die("verify", &err);
        return now() - t0;
    case OP_REACH_BUILD:
        invalidate(g);
        kiln_graph_topo_order(g, &order, &norder, &err); /* not part of the index time */
        if (cold)
            evict();
        t0 = now();
        (void)kiln_graph_reachable(g, order[0], order[norder - 1]); /* builds the index */
        return now() - t0;
    case OP_SYMTAB:
        /* attribute edit: stales the symbol table only */
        kiln_attrs_set_int(kiln_graph_attrs(g), "bench_rep", rep);
        if (cold)
            evict();
        t0 = now();
        if (kiln_symtab_get(g, &st, &err) != KILN_OK)
            die("symtab", &err);
        return now() - t0;
    default:
        if (cold)
            evict();
        return time_gepass(ctx, g);
    }
}

static void run_size(kiln_ctx *ctx, uint32_t target, bool json_read, result *r)
{
    kiln_error err = {0};
    memset(r, 0, sizeof(*r));
    for (int i = 0; i < OP_COUNT; i++)
        r->t[i] = r->warm[i] = -1;

    size_t s0 = kiln__intern_memory(&ctx->strings);
    double t0 = now();
    kiln_graph *g = build_transformer(ctx, target);
    r->t[OP_BUILD] = now() - t0;
    uint32_t n = kiln_graph_node_count(g);
    r->nodes = n;
    r->bytes_per_node = (double)kiln_graph_memory(g) / n;
    r->str_per_node = (double)(kiln__intern_memory(&ctx->strings) - s0) / n;

    /* The analyses are cheap, so each is timed as the best of REPEAT runs,
     * each run once with cold caches (evict() first) and once warm, right
     * after; a no-op structural edit (add + remove a control edge) or an
     * attribute edit makes the analysis cache stale between runs. */
    static const int timed_ops[] = {OP_TOPO, OP_VERIFY, OP_REACH_BUILD, OP_SYMTAB, OP_GEPASS};
    for (size_t i = 0; i < sizeof(timed_ops) / sizeof(timed_ops[0]); i++) {
        int op = timed_ops[i];
        for (int rep = 0; rep < 2 * REPEAT; rep++) {
            bool cold = (rep & 1) == 0;
            keep_min(cold ? &r->t[op] : &r->warm[op], time_analysis(ctx, g, op, rep, cold));
        }
    }
    const kiln_node_id *order = NULL;
    uint32_t norder = 0;
    if (kiln_graph_topo_order(g, &order, &norder, &err) != KILN_OK || norder != n)
        die("topo", &err);
    uint32_t lim = kiln_graph_id_limit(g);
    rng = 0x2545f4914f6cdd1dull;
    t0 = now();
    for (uint32_t q = 0; q < NQUERIES; q++)
        r->reach_true += kiln_graph_reachable(g, 1 + rnd(lim - 1), 1 + rnd(lim - 1));
    r->t[OP_REACH_Q] = now() - t0;
    /* forward pairs: u before v in topo order, so the O(1) filter never decides */
    kiln_node_id *pu = malloc(NQUERIES * sizeof(*pu)), *pv = malloc(NQUERIES * sizeof(*pv));
    for (uint32_t q = 0; q < NQUERIES; q++) {
        uint32_t a = rnd(n), b = rnd(n);
        if (a > b) {
            uint32_t t = a;
            a = b;
            b = t;
        }
        pu[q] = order[a];
        pv[q] = order[b];
    }
    uint64_t fb0 = g->analyses->fallbacks;
    t0 = now();
    for (uint32_t q = 0; q < NQUERIES; q++)
        r->reach_fwd_true += kiln_graph_reachable(g, pu[q], pv[q]);
    r->t[OP_REACH_FWD] = now() - t0;
    r->fallbacks = g->analyses->fallbacks - fb0;
    free(pu);
    free(pv);

    const kiln_symtab *st;
    if (kiln_symtab_get(g, &st, &err) != KILN_OK)
        die("symtab", &err);
    r->symbols = kiln_symtab_count(st);

    char path[64];
    snprintf(path, sizeof(path), "/tmp/kiln_ir_scale_%ld.json", (long)getpid());
    /* the JSON rows are CPU time: the wall time of writing 200 MB depends on
     * the write-back of everything else the machine's page cache holds */
    t0 = thread_cpu();
    if (kiln_graph_write_json_file(g, path, &err) != KILN_OK)
        die("json write", &err);
    r->t[OP_WRITE] = thread_cpu() - t0;
    kiln_graph *back = NULL;
    if (!json_read)
        goto skip_read;
    t0 = thread_cpu();
    if (kiln_graph_read_json_file(ctx, path, &back, &err) != KILN_OK)
        die("json read", &err);
    r->t[OP_READ] = thread_cpu() - t0;
    if (kiln_graph_node_count(back) != n)
        fprintf(stderr, "bench_ir_scale: json round trip lost nodes\n");
    kiln_graph_destroy(back);
skip_read:
    unlink(path);
    kiln_graph_destroy(g);

    size_t m0 = kiln__intern_memory(&ctx->strings);
    kiln_graph *mg = build_minimal(ctx, target);
    r->min_bytes_per_node = (double)kiln_graph_memory(mg) / kiln_graph_node_count(mg);
    r->min_str_per_node = (double)(kiln__intern_memory(&ctx->strings) - m0) /
                          kiln_graph_node_count(mg);
    r->min_exact = exact_bytes_per_node(mg);
    kiln_graph_destroy(mg);
    r->rss_kb = peak_rss_kb();
}

int main(int argc, char **argv)
{
    uint32_t max_nodes = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 1000000u;
    static const uint32_t sizes[] = {10000, 100000, 1000000};
    result res[3];
    uint32_t nres = 0;
    bool json_read = true, read_skipped = false;
    evict_init();
    for (uint32_t i = 0; i < 3 && sizes[i] <= max_nodes; i++) {
        /* a fresh context per size, so the string share is not amortised */
        kiln_ctx *ctx = kiln_ctx_create();
        run_size(ctx, sizes[i], json_read, &res[nres++]);
        kiln_ctx_destroy(ctx);
        /* a reader that scaled worse than 20x over the last 10x step would take
         * too long at the next size: skip it there and say so */
        if (nres >= 2 && res[nres - 2].t[OP_READ] > 0 &&
            res[nres - 1].t[OP_READ] / res[nres - 2].t[OP_READ] > 20) {
            json_read = false;
            read_skipped = i + 1 < 3 && sizes[i + 1] <= max_nodes;
        }
    }

    printf("%-18s", "operation");
    for (uint32_t i = 0; i < nres; i++)
        printf(" %11u n", res[i].nodes);
    printf(" %12s %8s\n", "1M/100k", "(warm)");
    for (int op = 0; op < OP_COUNT; op++) {
        printf("%-18s", op_names[op]);
        for (uint32_t i = 0; i < nres; i++) {
            if (res[i].t[op] < 0)
                printf(" %13s", "n/a");
            else
                printf(" %11.4f s", res[i].t[op]);
        }
        if (nres == 3 && res[1].t[op] > 0 && res[2].t[op] >= 0) {
            double ratio = res[2].t[op] / res[1].t[op];
            printf(" %11.2f%s", ratio, !op_target[op] ? " i" : ratio > 12 ? " !" : "  ");
            if (res[1].warm[op] > 0 && res[2].warm[op] >= 0)
                printf(" %7.2f", res[2].warm[op] / res[1].warm[op]);
        }
        printf("\n");
    }
    printf("json write/read: CPU time (user + system) of one run.\n"
           "topo sort .. gepass sweep: best of %d runs, each from cold CPU caches (%zu MiB\n"
           "streamed first); (warm): the same runs repeated with the graph still cached.\n"
           "target: ratio <= 12 (! = missed); i = informational, not a target\n",
           REPEAT, evict_size >> 20);
    for (uint32_t i = 0; i < nres; i++) {
        const result *r = &res[i];
        printf("\n%u nodes (transformer-like):\n", r->nodes);
        printf("  graph memory    %7.1f B/node + strings %5.1f B/node = %7.1f B/node\n",
               r->bytes_per_node, r->str_per_node, r->bytes_per_node + r->str_per_node);
        printf("  minimal 2-in/1-out graph: %7.1f B/node%s + strings %5.1f = %7.1f B/node%s\n",
               r->min_bytes_per_node, r->min_bytes_per_node > 200 ? " (over 200!)" : "",
               r->min_str_per_node, r->min_bytes_per_node + r->min_str_per_node,
               r->min_bytes_per_node + r->min_str_per_node > 200 ? "  (total over 200)" : "");
        printf("  minimal graph with exactly sized arrays: %7.1f B/node (+ strings %7.1f)\n",
               r->min_exact, r->min_exact + r->min_str_per_node);
        printf("  reachable: %u/%u random, %u/%u forward (%llu needed the search)\n",
               r->reach_true, NQUERIES, r->reach_fwd_true, NQUERIES,
               (unsigned long long)r->fallbacks);
        printf("  symbols %u; peak RSS so far %.1f MiB (with the %zu MiB eviction buffer)\n",
               r->symbols, r->rss_kb / 1024.0, evict_size >> 20);
    }
    if (read_skipped)
        printf("\njson read: skipped at the largest size (superlinear at the previous one)\n");
    return 0;
}

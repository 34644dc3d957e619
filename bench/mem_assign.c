/*
 * mem_assign.c - MemoryAssigner and the plan checker at scale (a program,
 * not a test; docs/memory_planning.md).
 *
 * Generates a residual chain of N nodes on two streams (each block: a -> b
 * -> c -> add(a, c), the b's on stream 1 with an event each way), outputs of
 * 1..64 KiB, and runs MemoryAssigner (libkiln_mem_assign.so, from
 * $KILN_PLUGIN_DIR or <exe>/../lib/kiln/plugins) through the pass manager
 * with an in-process planner, "BenchSweep": blocks by first use, each at the
 * end of the arena unless a freed block of the same aligned size is free
 * (O(n log n); a baseline, not a good planner: the shipped planners are
 * measured by bench/memplan).  Printed per size: buffers, pass wall time,
 * planner time, one more kiln_memory_plan_verify alone, the arena size and
 * LOAD.  The checker's time is the figure of interest: it must grow as
 * n log n (t(250k)/t(62k) about 4.3).
 *
 * Usage: bench_mem_assign [max_nodes]   (default 250000).  Build in Release.
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
    fprintf(stderr, "bench_mem_assign: %s: %s\n", what, kiln_error_message(err));
    exit(1);
}

/* ---- BenchSweep: reuse a freed block of the same size, else grow ----------- */

typedef struct fb {
    int64_t size, offset;
    uint32_t free_at; /* first step it is free */
} fb;

static const kiln_mem_problem *sp;
static double plan_ms; /* the last sweep_plan call's time */
static int by_first(const void *a, const void *b)
{
    uint32_t x = sp->blocks[*(const uint32_t *)a].first_use;
    uint32_t y = sp->blocks[*(const uint32_t *)b].first_use;
    return x < y ? -1 : x > y;
}

static kiln_status sweep_plan(void *inst, kiln_mem_problem *p, int64_t *peak, kiln_error *err)
{
    (void)inst;
    double t0 = now();
    uint32_t n = p->block_count;
    uint32_t *ord = malloc((n + 1) * sizeof(*ord));
    fb *pool = malloc((n + 1) * sizeof(*pool));
    if (!ord || !pool) {
        free(ord);
        free(pool);
        return kiln_errorf(err, KILN_ERR_NOMEM, "BenchSweep: out of memory");
    }
    for (uint32_t i = 0; i < n; i++)
        ord[i] = i;
    sp = p;
    qsort(ord, n, sizeof(*ord), by_first);
    uint32_t np = 0;
    int64_t a = p->alignment ? p->alignment : 1, end = 0;
    for (uint32_t k = 0; k < n; k++) {
        kiln_mem_block *b = &p->blocks[ord[k]];
        int64_t size = (b->size + a - 1) / a * a;
        uint32_t pick = UINT32_MAX;
        /* the pool is short in practice (sizes repeat): a linear scan */
        for (uint32_t j = 0; j < np && j < 64; j++)
            if (pool[np - 1 - j].size == size && pool[np - 1 - j].free_at <= b->first_use) {
                pick = np - 1 - j;
                break;
            }
        if (pick == UINT32_MAX) {
            b->offset = end;
            end += size;
            pick = np++;
            pool[pick].size = size;
            pool[pick].offset = b->offset;
        } else {
            b->offset = pool[pick].offset;
        }
        pool[pick].free_at = b->last_use + 1;
    }
    *peak = end;
    free(ord);
    free(pool);
    plan_ms = (now() - t0) * 1e3;
    return KILN_OK;
}

static kiln_status static_init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)h;
    (void)e;
    static const kiln_mem_planner_desc pl = {.struct_size = sizeof(kiln_mem_planner_desc),
                                             .name = "BenchSweep",
                                             .plan = sweep_plan};
    return kiln_register_mem_planner(r, &pl);
}

static const kiln_plugin_desc static_desc = {sizeof(kiln_plugin_desc), KILN_ABI_MAJOR,
                                             KILN_ABI_MINOR, "bench.mem_assign", "1.0", "MIT",
                                             "bench planner", "bench", static_init, NULL, {NULL}};

/* ---- graph ------------------------------------------------------------------- */

static kiln_node_id node(kiln_graph *g, const char *op, uint32_t nin, uint32_t i, int stream)
{
    char name[32];
    snprintf(name, sizeof name, "n%u", i);
    kiln_node_id n = kiln_graph_add_node(g, name, op, nin, 1);
    int64_t dims[1] = {256 * (1 + (int64_t)(i * 2654435761u % 64))};
    kiln_desc_set_shape(g, kiln_node_output_desc(g, n, 0), 1, dims);
    kiln_attrs_set_int(kiln_node_attrs_mut(g, n), "_kiln_stream_id", stream);
    return n;
}

static void events(kiln_graph *g, kiln_node_id s, kiln_node_id r, int64_t id)
{
    kiln_attrs_set_list_int(kiln_node_attrs_mut(g, s), "_send_event_ids", &id, 1);
    kiln_attrs_set_list_int(kiln_node_attrs_mut(g, r), "_recv_event_ids", &id, 1);
}

static kiln_graph *build(kiln_ctx *ctx, uint32_t n)
{
    kiln_graph *g = kiln_graph_create(ctx, "bench");
    kiln_node_id x = kiln_graph_add_node(g, "data", "Data", 0, 1);
    int64_t dims[1] = {256};
    kiln_desc_set_shape(g, kiln_node_output_desc(g, x, 0), 1, dims);
    uint32_t i = 0;
    int64_t ev = 0;
    while (i + 4 <= n) {
        kiln_node_id a = node(g, "Relu", 1, i++, 0), b = node(g, "Relu", 1, i++, 1);
        kiln_node_id c = node(g, "Relu", 1, i++, 0), add = node(g, "Add", 2, i++, 0);
        kiln_edge_add(g, x, 0, a, 0);
        kiln_edge_add(g, a, 0, b, 0);
        kiln_edge_add(g, b, 0, c, 0);
        kiln_edge_add(g, a, 0, add, 0);
        kiln_edge_add(g, c, 0, add, 1);
        /* b on stream 1: an event each way; a node sends and receives one each */
        events(g, a, b, ev++);
        events(g, b, c, ev++);
        x = add;
    }
    kiln_node_id out = kiln_graph_add_node(g, "out", "NetOutput", 1, 0);
    kiln_edge_add(g, x, 0, out, 0);
    return g;
}

static void run(uint32_t n)
{
    kiln_ctx *ctx = kiln_ctx_create();
    kiln_error err;
    kiln_error_clear(&err);
    const char *dir = getenv("KILN_PLUGIN_DIR");
    char def[1024], path[1200];
    if (!dir || !*dir) {
        snprintf(def, sizeof(def), "%s/../lib/kiln/plugins", kiln_exe_dir());
        dir = def;
    }
    snprintf(path, sizeof(path), "%s/libkiln_mem_assign.so", dir);
    if (kiln_plugin_load(ctx, path, NULL, &err) != KILN_OK)
        die(path, &err);
    if (kiln_plugin_register_static(ctx, &static_desc, NULL, &err) != KILN_OK)
        die("register BenchSweep", &err);
    kiln_ctx_set_option(ctx, "kiln.memory_planner", "BenchSweep");
    kiln_graph *g = build(ctx, n);
    kiln_pass_inst pi = {.comp = kiln_registry_find(ctx, KILN_COMP_PASS, "MemoryAssigner"),
                         .enabled = true};
    kiln_passmgr *pm = NULL;
    if (!pi.comp || kiln__passmgr_create(ctx, NULL, &pm, &err) != KILN_OK)
        die("pass manager", &err);
    double t0 = now();
    if (kiln__passmgr_run_stage(pm, "build", &pi, 1, g, &err) != KILN_OK)
        die("MemoryAssigner", &err);
    double t1 = now();
    if (kiln_memory_plan_verify(g, &err) != KILN_OK)
        die("kiln_memory_plan_verify", &err);
    double t2 = now();
    const kiln_attrs *ra = kiln_graph_attrs(g);
    const int64_t *v = NULL;
    uint32_t c = 0;
    int64_t size = 0, load = 0, bufs = 0;
    if (kiln_attrs_get_list_int(ra, "_kiln_memory_sizes", &v, &c) && c)
        size = v[0];
    if (kiln_attrs_get_list_int(ra, "_kiln_memory_loads", &v, &c) && c)
        load = v[0];
    if (kiln_attrs_get_list_int(ra, "_kiln_memory_buffers", &v, &c) && c)
        bufs = v[0];
    double pms = plan_ms;
    printf("%8u %8lld %10.1f %10.1f %10.1f %12lld %12lld %6.3f\n", n, (long long)bufs,
           (t1 - t0) * 1e3, pms, (t2 - t1) * 1e3, (long long)size, (long long)load,
           load ? (double)size / (double)load : 1.0);
    kiln__passmgr_destroy(pm);
    kiln_graph_destroy(g);
    kiln_ctx_destroy(ctx);
}

int main(int argc, char **argv)
{
    uint32_t max = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 250000;
    printf("MemoryAssigner with the BenchSweep planner (two streams, residual chain)\n");
    printf("%8s %8s %10s %10s %10s %12s %12s %6s\n", "nodes", "buffers", "pass_ms",
           "planner_ms", "check_ms", "size", "load", "ratio");
    static const uint32_t sizes[] = {10000, 62000, 250000, 1000000};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]) && sizes[i] <= max; i++)
        run(sizes[i]);
    return 0;
}

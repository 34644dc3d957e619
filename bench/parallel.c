/*
 * parallel.c - parallel subgraph optimisation benchmark (a program, not a
 * test; docs/threads.md).
 *
 * 1. Interning, the context-wide table every task shares: ns per kiln__intern
 *    of a new string, of an existing one, and per kiln__intern_str, on one
 *    thread; then the same inserts split over 2 and 4 threads (contention on
 *    the table's lock; the ratio to one thread is printed).
 * 2. Stage runs from parallel tasks: 64 generated graphs of ~8k nodes each
 *    (a chain of blocks Relu -> Identity -> Add, with multi-consumer outputs)
 *    in one context, run through IdentityRemovePass, PruneGraphPass,
 *    HandleMemoryRWConflict and HandleMemoryLayoutConflict by one pass
 *    manager from kiln__parallel_run tasks at 1, 2 and 4 threads: wall time
 *    and the speedup over 1 thread (bounded by the machine's cores: nproc is
 *    printed).  The outputs of the runs are compared (graph JSON), so the
 *    figures are for identical work.
 *
 * Plugins are loaded from $KILN_PLUGIN_DIR or <exe>/../lib/kiln/plugins.
 */
#include "bench_util.h"
#include "ctx.h"
#include "graph_int.h"
#include "graph_json.h"
#include "parallel.h"
#include "passmgr.h"
#include "plugin.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void die(const char *what, const kiln_error *err)
{
    fprintf(stderr, "bench_parallel: %s failed: %s\n", what, err ? err->msg : "");
    exit(1);
}

/* ---- 1. interning ----------------------------------------------------------- */

#define NSTR 1000000u

typedef struct ijob {
    kiln_ctx *ctx;
    uint32_t per_task;
} ijob;

static kiln_status intern_task(void *arg, uint32_t i, kiln_error *err)
{
    ijob *j = arg;
    char s[48];
    for (uint32_t k = 0; k < j->per_task; k++) {
        int n = snprintf(s, sizeof(s), "tensor/%u/%u", i, k);
        if (!kiln__intern(&j->ctx->strings, s, (size_t)n))
            return kiln_errorf(err, KILN_ERR_NOMEM, "intern");
    }
    return KILN_OK;
}

static double intern_run(uint32_t threads)
{
    kiln_ctx *ctx = kiln_ctx_create();
    ijob j = {ctx, NSTR / 4};
    kiln_error err;
    kiln_error_clear(&err);
    double t0 = now();
    if (kiln__parallel_run(ctx, 4, threads, intern_task, &j, &err) != KILN_OK)
        die("intern run", &err);
    double t = now() - t0;
    kiln_ctx_destroy(ctx);
    return t;
}

static void bench_intern(void)
{
    kiln_ctx *ctx = kiln_ctx_create();
    char s[48];
    uint32_t *syms = malloc(NSTR * sizeof(*syms));
    double t0 = now();
    for (uint32_t k = 0; k < NSTR; k++) {
        int n = snprintf(s, sizeof(s), "tensor/%u", k);
        syms[k] = kiln__intern(&ctx->strings, s, (size_t)n);
    }
    double t_new = now() - t0;
    t0 = now();
    uint64_t sum = 0;
    for (uint32_t k = 0; k < NSTR; k++) {
        int n = snprintf(s, sizeof(s), "tensor/%u", k);
        sum += kiln__intern(&ctx->strings, s, (size_t)n);
    }
    double t_old = now() - t0;
    t0 = now();
    for (uint32_t r = 0; r < 10; r++)
        for (uint32_t k = 0; k < NSTR; k++)
            sum += (uint64_t)kiln__intern_str(&ctx->strings, syms[k])[7];
    double t_str = now() - t0;
    printf("interning, 1 thread, %u strings (snprintf included):\n", NSTR);
    printf("  new string      %7.1f ns\n", t_new * 1e9 / NSTR);
    printf("  existing string %7.1f ns\n", t_old * 1e9 / NSTR);
    printf("  kiln__intern_str %6.2f ns   (checksum %llu)\n", t_str * 1e9 / (10.0 * NSTR),
           (unsigned long long)sum);
    free(syms);
    kiln_ctx_destroy(ctx);
    double t1 = intern_run(1), t2 = intern_run(2), t4 = intern_run(4);
    printf("interning %u new strings from 4 tasks: 1 thread %.3f s, 2 threads %.3f s (x%.2f), "
           "4 threads %.3f s (x%.2f)\n",
           NSTR, t1, t2, t1 / t2, t4, t1 / t4);
}

/* ---- 2. stages from tasks ------------------------------------------------------ */

#define NGRAPHS 64u
#define BLOCKS 2700u /* 3 nodes a block: ~8k nodes a graph */

static const char *const plugin_files[] = {"libkiln_passes.so", "libkiln_mem_rw_conflict.so",
                                           "libkiln_mem_layout_conflict.so",
                                           "libkiln_mem_conflict_checkers.so"};
static const char *const pass_names[] = {"IdentityRemovePass", "PruneGraphPass",
                                         "HandleMemoryRWConflict", "HandleMemoryLayoutConflict"};
#define NPASS (sizeof(pass_names) / sizeof(pass_names[0]))

static void load_plugins(kiln_ctx *ctx)
{
    const char *dir = getenv("KILN_PLUGIN_DIR");
    char def[4096];
    if (!dir) {
        snprintf(def, sizeof(def), "%s/../lib/kiln/plugins", kiln_exe_dir());
        dir = def;
    }
    for (size_t i = 0; i < sizeof(plugin_files) / sizeof(plugin_files[0]); i++) {
        kiln_error err;
        kiln_error_clear(&err);
        char path[4200];
        snprintf(path, sizeof(path), "%s/%s", dir, plugin_files[i]);
        if (kiln_plugin_load(ctx, path, NULL, &err) != KILN_OK)
            die("plugin load", &err);
    }
}

static kiln_node_id add(kiln_graph *g, const char *op, uint32_t gi, uint32_t b, const char *what,
                        uint32_t nin, uint32_t nout)
{
    static const int64_t dims[2] = {8, 64};
    char name[64];
    snprintf(name, sizeof(name), "g%u/b%u/%s", gi, b, what);
    kiln_node_id n = kiln_graph_add_node(g, name, op, nin, nout);
    if (!n)
        die("add_node", NULL);
    for (uint32_t o = 0; o < nout; o++)
        kiln_desc_set_shape(g, kiln_node_output_desc(g, n, o), 2, dims);
    return n;
}

static kiln_graph *generate(kiln_ctx *ctx, uint32_t gi)
{
    char js[96];
    snprintf(js, sizeof(js), "{\"kiln_graph\": 1, \"name\": \"part%u\", \"nodes\": []}", gi);
    kiln_graph *g = NULL;
    kiln_error err;
    kiln_error_clear(&err);
    if (kiln_graph_read_json_string(ctx, js, strlen(js), "gen", &g, &err) != KILN_OK)
        die("graph create", &err);
    kiln_node_id x = add(g, "Data", gi, 0, "data", 0, 1);
    for (uint32_t b = 1; b <= BLOCKS; b++) {
        kiln_node_id r = add(g, "Relu", gi, b, "relu", 1, 1);
        kiln_edge_add(g, x, 0, r, 0);
        kiln_node_id id = add(g, "Identity", gi, b, "id", 1, 1);
        kiln_edge_add(g, r, 0, id, 0);
        kiln_node_id a = add(g, "Add", gi, b, "add", 2, 1);
        kiln_edge_add(g, id, 0, a, 0);
        kiln_edge_add(g, x, 0, a, 1);
        x = a;
    }
    kiln_node_id out = add(g, "NetOutput", gi, BLOCKS + 1, "out", 1, 0);
    kiln_edge_add(g, x, 0, out, 0);
    return g;
}

typedef struct sjob {
    kiln_passmgr *pm;
    kiln_graph **g;
    kiln_pass_inst *pi;
} sjob;

static kiln_status stage_task(void *arg, uint32_t i, kiln_error *err)
{
    sjob *j = arg;
    return kiln__passmgr_run_stage(j->pm, "optimize_subgraph", j->pi, NPASS, j->g[i], err);
}

/* Run the passes over fresh graphs on @p threads; returns the wall time and
 * the graphs' JSON in *json. */
static double stage_run(kiln_ctx *ctx, kiln_pass_inst *pi, uint32_t threads, char **json)
{
    kiln_graph *g[NGRAPHS];
    for (uint32_t i = 0; i < NGRAPHS; i++)
        g[i] = generate(ctx, i);
    FILE *devnull = fopen("/dev/null", "w");
    kiln_instrumentation instr = {.bisect_limit = -1, .log = devnull};
    kiln_passmgr *pm = NULL;
    kiln_error err;
    kiln_error_clear(&err);
    if (kiln__passmgr_create(ctx, &instr, &pm, &err) != KILN_OK)
        die("passmgr_create", &err);
    sjob j = {pm, g, pi};
    double t0 = now();
    if (kiln__parallel_run(ctx, NGRAPHS, threads, stage_task, &j, &err) != KILN_OK)
        die("stage run", &err);
    double t = now() - t0;
    size_t len = 0;
    FILE *o = open_memstream(json, &len);
    for (uint32_t i = 0; i < NGRAPHS; i++) {
        char *s = kiln_graph_to_json_string(g[i], &err);
        fputs(s ? s : "", o);
        kiln_free(s);
        kiln_graph_destroy(g[i]);
    }
    fclose(o);
    kiln__passmgr_destroy(pm);
    fclose(devnull);
    return t;
}

static void bench_stages(void)
{
    kiln_ctx *ctx = kiln_ctx_create();
    load_plugins(ctx);
    kiln_pass_inst pi[NPASS];
    memset(pi, 0, sizeof(pi));
    for (size_t i = 0; i < NPASS; i++) {
        pi[i].comp = kiln_registry_find(ctx, KILN_COMP_PASS, pass_names[i]);
        pi[i].enabled = true;
        if (!pi[i].comp)
            die(pass_names[i], NULL);
    }
    static const uint32_t counts[] = {1, 2, 4};
    double t[3];
    char *json[3];
    for (int k = 0; k < 3; k++)
        t[k] = stage_run(ctx, pi, counts[k], &json[k]);
    printf("stages from tasks: %u graphs of %u nodes, %zu passes (nproc %ld):\n", NGRAPHS,
           3 * BLOCKS + 2, NPASS, sysconf(_SC_NPROCESSORS_ONLN));
    for (int k = 0; k < 3; k++)
        printf("  %u thread%s %8.3f s  speedup x%.2f  output %s\n", counts[k],
               counts[k] > 1 ? "s" : " ", t[k], t[0] / t[k],
               strcmp(json[k], json[0]) == 0 ? "identical" : "DIFFERENT");
    int rc = 0;
    for (int k = 1; k < 3; k++)
        if (strcmp(json[k], json[0]) != 0)
            rc = 1;
    for (int k = 0; k < 3; k++)
        free(json[k]);
    kiln_ctx_destroy(ctx);
    if (rc)
        die("outputs differ between thread counts", NULL);
}

int main(void)
{
    bench_intern();
    bench_stages();
    return 0;
}

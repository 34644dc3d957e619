/*
 * memconflict.c - memory-conflict benchmark (a program, not a test).
 *
 * Generates graphs of about 10k, 100k and 1M nodes that are dense in what the
 * memory-conflict passes look at, and runs HandleMemoryRWConflict,
 * HandleMemoryLayoutConflict (the mem_conflict stage) and GraphLint (the lint
 * stage) through the kernel's pass manager, loading the plugins with
 * kiln_plugin_load from $KILN_PLUGIN_DIR or <exe>/../lib/kiln/plugins.
 *
 * One block of the generated graph (32 nodes; x is the previous block's
 * output, every tensor float32 [8, 256]):
 *   multi-consumer outputs  x feeds 5 nodes, a and b 3 each
 *   HCCL-like               HcomAllReduce(a) and HcomBroadcast(p) with
 *                           _input_mutable = true, siblings reading a / p
 *   ref ops                 Assign(var, b) and AssignAdd(var2, c) (output
 *                           ref_input 0), var also read by a Mul
 *   continuous input        Concat(c, d) and Concat(c, e) with
 *                           continuous_input = true (c feeds both: a
 *                           ContinuousInput x ContinuousInput conflict)
 *   plus elementwise filler, a control edge every other block from the
 *   previous block's HCCL node, and a NetOutput fed by the last block and
 *   by every 64th block's Assign.
 * The generator is deterministic.
 *
 * Each size runs in its own child process (fork), so the peak RSS figures
 * are per size: "peak RSS" is the child's getrusage maximum; "pass peak" is
 * the high-water mark while one pass ran (VmHWM after resetting it through
 * /proc/self/clear_refs before the pass; the whole-process figure when the
 * reset is not available; the reset also lowers ru_maxrss, so the whole-run
 * peak is the largest mark read before each reset).  Printed per pass: wall
 * time, nodes the pass added, its counter (Identities inserted, W18888
 * warnings), pass peak; per size: graph build time, live nodes, graph memory
 * (kiln_graph_memory) and peak RSS; and t(1M)/t(100k) per pass (linear
 * scaling gives about 10; the target is <= 15).
 *
 * Then one wide node: Sum reading one Data output 20k, 200k and 2M times (one
 * memory symbol with n + 1 anchors, n of them on one node), through
 * HandleMemoryLayoutConflict alone: wall time and the pass's "anchor pairs
 * examined" statistic, which must grow linearly (2n), not as n^2 / 2.
 *
 * Usage: bench_memconflict [max_nodes]   (default 1000000).  Build in
 * Release: cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release.
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
#include <sys/wait.h>
#include <unistd.h>

#define NPASS 3
#define BLOCK_NODES 32u

static const char *const pass_names[NPASS] = {"HandleMemoryRWConflict",
                                              "HandleMemoryLayoutConflict", "GraphLint"};
static const char *const pass_stage[NPASS] = {"mem_conflict", "mem_conflict", "lint"};
/* The counter each pass reports (kiln_pass_stat_add), NULL = none. */
static const char *const pass_stat[NPASS] = {NULL, "identities inserted", "W18888 warnings"};
static const char *const plugin_files[] = {
    "libkiln_mem_rw_conflict.so", "libkiln_mem_layout_conflict.so",
    "libkiln_mem_conflict_checkers.so", "libkiln_graph_lint.so"};

/** What one size measured (sent from the child through a pipe). */
typedef struct result {
    uint32_t target, nodes_before, nodes_after;
    double build_s, t[NPASS];
    int64_t added[NPASS];
    long pass_peak_kb[NPASS], peak_kb;
    int64_t stat[NPASS]; /* identities inserted / W18888 warnings (-1: none) */
    double graph_mb;
    int ok;
} result;

/* VmHWM in kB, or -1. */
static long vm_hwm_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    if (!f)
        return -1;
    while (fgets(line, sizeof(line), f))
        if (strncmp(line, "VmHWM:", 6) == 0)
            kb = strtol(line + 6, NULL, 10);
    fclose(f);
    return kb;
}

/* Reset the high-water mark (Linux clear_refs "5"); false when not possible. */
static bool reset_hwm(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f)
        return false;
    bool ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok;
}

static void die(const char *what, const kiln_error *err)
{
    fprintf(stderr, "bench_memconflict: %s failed: %s\n", what, err ? err->msg : "");
    exit(1);
}

/* ---- the generator -------------------------------------------------------- */

typedef struct gen {
    kiln_graph *g;
    uint32_t block;
    char name[48];
} gen;

static kiln_node_id node(gen *b, const char *op, const char *what, uint32_t nin)
{
    static const int64_t dims[2] = {8, 256};
    snprintf(b->name, sizeof(b->name), "B%u/%s", b->block, what);
    kiln_node_id n = kiln_graph_add_node(b->g, b->name, op, nin, 1);
    if (!n)
        die("add_node", NULL);
    kiln_desc_set_shape(b->g, kiln_node_output_desc(b->g, n, 0), 2, dims);
    return n;
}

static kiln_node_id op1(gen *b, const char *op, const char *what, kiln_node_id x)
{
    kiln_node_id n = node(b, op, what, 1);
    kiln_edge_add(b->g, x, 0, n, 0);
    return n;
}

static kiln_node_id op2(gen *b, const char *op, const char *what, kiln_node_id x, kiln_node_id y)
{
    kiln_node_id n = node(b, op, what, 2);
    kiln_edge_add(b->g, x, 0, n, 0);
    kiln_edge_add(b->g, y, 0, n, 1);
    return n;
}

static void set_true(gen *b, kiln_node_id n, const char *key)
{
    kiln_attrs_set_bool(kiln_node_attrs_mut(b->g, n), key, true);
}

/* Assign-like ref op: out 0 references input 0 (the variable). */
static kiln_node_id ref_op(gen *b, const char *op, const char *what, kiln_node_id var,
                           kiln_node_id value)
{
    kiln_node_id n = op2(b, op, what, var, value);
    kiln_desc_set_ref_input(b->g, kiln_node_output_desc(b->g, n, 0), 0);
    return n;
}

/* One block of BLOCK_NODES nodes; returns its output, *hccl its AllReduce,
 * *assign its Assign. */
static kiln_node_id block(gen *b, kiln_node_id x, kiln_node_id prev_hccl, kiln_node_id *hccl,
                          kiln_node_id *assign)
{
    kiln_node_id a = op1(b, "Relu", "a", x);                  /* 1 */
    kiln_node_id bb = op1(b, "Sigmoid", "b", x);              /* 2 */
    kiln_node_id c = op2(b, "Mul", "c", x, a);                /* 3 */
    kiln_node_id d = op1(b, "Neg", "d", a);                   /* 4 */
    kiln_node_id e = op2(b, "Add", "e", x, bb);               /* 5 */
    kiln_node_id h = op1(b, "HcomAllReduce", "allreduce", a); /* 6 */
    set_true(b, h, "_input_mutable");
    kiln_node_id var = node(b, "Variable", "var", 0);         /* 7 */
    kiln_node_id as = ref_op(b, "Assign", "assign", var, bb); /* 8 */
    kiln_node_id rv = op2(b, "Mul", "read_var", var, e);      /* 9 */
    kiln_node_id cat1 = op2(b, "Concat", "concat1", c, d);    /* 10 */
    set_true(b, cat1, "continuous_input");
    kiln_node_id cat2 = op2(b, "Concat", "concat2", c, e); /* 11 */
    set_true(b, cat2, "continuous_input");
    kiln_node_id s1 = op2(b, "Add", "s1", cat1, cat2);         /* 12 */
    kiln_node_id s2 = op2(b, "Add", "s2", s1, h);              /* 13 */
    kiln_node_id s3 = op2(b, "Add", "s3", s2, rv);             /* 14 */
    kiln_node_id p = op1(b, "Tanh", "p", s3);                  /* 15 */
    kiln_node_id bc = op1(b, "HcomBroadcast", "broadcast", p); /* 16 */
    set_true(b, bc, "_input_mutable");
    kiln_node_id p1 = op1(b, "Exp", "p1", p);                        /* 17 */
    kiln_node_id p2 = op1(b, "Abs", "p2", p);                        /* 18 */
    kiln_node_id var2 = node(b, "Variable", "var2", 0);              /* 19 */
    kiln_node_id aa = ref_op(b, "AssignAdd", "assign_add", var2, c); /* 20 */
    kiln_node_id q = op2(b, "Add", "q", p1, p2);                     /* 21 */
    kiln_node_id q1 = op2(b, "Add", "q1", q, bc);                    /* 22 */
    kiln_node_id q2 = op2(b, "Mul", "q2", q1, aa);                   /* 23 */
    kiln_node_id q3 = op2(b, "Sub", "q3", q2, x);                    /* 24 */
    kiln_node_id r = op1(b, "Relu", "r", q3);                        /* 25 */
    kiln_node_id r1 = op1(b, "Sqrt", "r1", r);                       /* 26 */
    kiln_node_id r2 = op1(b, "Square", "r2", r);                     /* 27 */
    kiln_node_id r3 = op2(b, "Add", "r3", r1, r2);                   /* 28 */
    kiln_node_id r4 = op2(b, "Mul", "r4", r3, r);                    /* 29 */
    kiln_node_id r5 = op1(b, "Gelu", "r5", r4);                      /* 30 */
    kiln_node_id r6 = op2(b, "Add", "r6", r5, as);                   /* 31 */
    kiln_node_id y = op1(b, "LayerNorm", "y", r6);                   /* 32 */
    if (prev_hccl && (b->block & 1))
        kiln_ctrl_add(b->g, prev_hccl, a);
    *hccl = h;
    *assign = as;
    return y;
}

static kiln_graph *generate(kiln_ctx *ctx, uint32_t target)
{
    gen b = {.g = kiln_graph_create(ctx, "memconflict")};
    if (!b.g)
        die("graph_create", NULL);
    uint32_t blocks = target / BLOCK_NODES;
    if (blocks == 0)
        blocks = 1;
    uint32_t nouts = 1 + blocks / 64;
    kiln_graph_reserve(b.g, blocks * BLOCK_NODES + 2, blocks * 40 + nouts,
                       blocks * BLOCK_NODES + 1);
    kiln_node_id x = node(&b, "Data", "data", 0);
    kiln_attrs_set_int(kiln_node_attrs_mut(b.g, x), "index", 0);
    kiln_node_id hccl = 0, assign = 0, *outs = malloc((size_t)nouts * sizeof(*outs));
    uint32_t k = 0;
    if (!outs)
        die("malloc", NULL);
    for (b.block = 0; b.block < blocks; b.block++) {
        kiln_node_id prev = hccl;
        x = block(&b, x, prev, &hccl, &assign);
        if (b.block % 64 == 63 && k + 1 < nouts)
            outs[k++] = assign;
    }
    outs[k++] = x;
    kiln_node_id no = kiln_graph_add_node(b.g, "netoutput", "NetOutput", k, 0);
    for (uint32_t i = 0; i < k; i++)
        kiln_edge_add(b.g, outs[i], 0, no, i);
    free(outs);
    if (kiln_graph_oom(b.g))
        die("generate (out of memory)", NULL);
    return b.g;
}

/* ---- one size, in a child process ----------------------------------------- */

static void load_plugins(kiln_ctx *ctx)
{
    const char *dir = getenv("KILN_PLUGIN_DIR");
    char def[1024], path[1200];
    if (!dir || !*dir) {
        snprintf(def, sizeof(def), "%s/../lib/kiln/plugins", kiln_exe_dir());
        dir = def;
    }
    for (size_t i = 0; i < sizeof(plugin_files) / sizeof(plugin_files[0]); i++) {
        kiln_error err;
        kiln_error_clear(&err);
        snprintf(path, sizeof(path), "%s/%s", dir, plugin_files[i]);
        if (kiln_plugin_load(ctx, path, NULL, &err) != KILN_OK)
            die("plugin load", &err);
    }
}


/* A pass manager whose log goes to /dev/null (*devnull, closed by the caller). */
static kiln_passmgr *quiet_passmgr(kiln_ctx *ctx, FILE **devnull)
{
    *devnull = fopen("/dev/null", "w");
    kiln_instrumentation instr = {.bisect_limit = -1, .log = *devnull};
    kiln_passmgr *pm = NULL;
    kiln_error err;
    kiln_error_clear(&err);
    if (kiln__passmgr_create(ctx, &instr, &pm, &err) != KILN_OK)
        die("passmgr_create", &err);
    return pm;
}
static void measure(uint32_t target, result *r)
{
    memset(r, 0, sizeof(*r));
    r->target = target;
    kiln_ctx *ctx = kiln_ctx_create();
    if (!ctx)
        die("ctx_create", NULL);
    load_plugins(ctx);
    double t0 = now();
    kiln_graph *g = generate(ctx, target);
    r->build_s = now() - t0;
    r->nodes_before = kiln_graph_node_count(g);
    kiln_pass_inst pi[NPASS];
    memset(pi, 0, sizeof(pi));
    for (int i = 0; i < NPASS; i++) {
        pi[i].comp = kiln_registry_find(ctx, KILN_COMP_PASS, pass_names[i]);
        pi[i].enabled = true;
        if (!pi[i].comp)
            die(pass_names[i], NULL);
    }
    FILE *devnull;
    kiln_passmgr *pm = quiet_passmgr(ctx, &devnull);
    kiln_error err;
    kiln_error_clear(&err);
    long hwm = vm_hwm_kb();
    for (int i = 0; i < NPASS; i++) {
        long cur = vm_hwm_kb();
        if (cur > hwm)
            hwm = cur;
        bool reset = reset_hwm();
        uint32_t before = kiln_graph_node_count(g);
        t0 = now();
        if (kiln__passmgr_run_stage(pm, pass_stage[i], &pi[i], 1, g, &err) != KILN_OK)
            die(pass_names[i], &err);
        r->t[i] = now() - t0;
        r->added[i] = (int64_t)kiln_graph_node_count(g) - (int64_t)before;
        r->pass_peak_kb[i] = reset ? vm_hwm_kb() : -1;
        r->stat[i] = pass_stat[i] ? kiln__passctx_stat(kiln__passmgr_ctx(pm), pass_stage[i],
                                                       pass_names[i], pass_stat[i])
                                  : -1;
    }
    long last = vm_hwm_kb();
    if (last > hwm)
        hwm = last;
    r->nodes_after = kiln_graph_node_count(g);
    r->graph_mb = (double)kiln_graph_memory(g) / (1024.0 * 1024.0);
    kiln__passmgr_destroy(pm);
    if (devnull)
        fclose(devnull);
    kiln_graph_destroy(g);
    kiln_ctx_destroy(ctx);
    /* clear_refs also resets ru_maxrss: keep the largest high-water mark seen */
    long peak = peak_rss_kb();
    r->peak_kb = peak > hwm ? peak : hwm;
    r->ok = 1;
}

static bool run_child(uint32_t target, result *r)
{
    int fd[2];
    if (pipe(fd) != 0)
        return false;
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        return false;
    if (pid == 0) {
        close(fd[0]);
        result mine;
        measure(target, &mine);
        ssize_t w = write(fd[1], &mine, sizeof(mine));
        _exit(w == (ssize_t)sizeof(mine) ? 0 : 1);
    }
    close(fd[1]);
    ssize_t got = read(fd[0], r, sizeof(*r));
    close(fd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    return got == (ssize_t)sizeof(*r) && WIFEXITED(status) && WEXITSTATUS(status) == 0 && r->ok;
}

/* ---- report ---------------------------------------------------------------- */

static void print_results(const result *res, int n)
{
    printf("%-28s", "size (target)");
    for (int i = 0; i < n; i++)
        printf(" %14u", res[i].target);
    printf("     1M/100k\n%-28s", "live nodes before/after");
    for (int i = 0; i < n; i++)
        printf(" %7u/%-7u", res[i].nodes_before, res[i].nodes_after);
    printf("\n%-28s", "generate");
    for (int i = 0; i < n; i++)
        printf(" %12.4f s", res[i].build_s);
    printf("\n");
    for (int p = 0; p < NPASS; p++) {
        printf("%-28s", pass_names[p]);
        for (int i = 0; i < n; i++)
            printf(" %12.4f s", res[i].t[p]);
        if (n >= 3 && res[1].t[p] > 0) {
            double ratio = res[2].t[p] / res[1].t[p];
            printf("  %8.2f%s", ratio, ratio > 15.0 ? " !" : "");
        }
        printf("\n%-28s", "  nodes added");
        for (int i = 0; i < n; i++)
            printf(" %14lld", (long long)res[i].added[p]);
        if (pass_stat[p]) {
            printf("\n  %-26s", pass_stat[p]);
            for (int i = 0; i < n; i++)
                printf(" %14lld", (long long)res[i].stat[p]);
        }
        printf("\n%-28s", "  pass peak RSS");
        for (int i = 0; i < n; i++)
            printf(" %11.1f MiB", res[i].pass_peak_kb[p] / 1024.0);
        printf("\n");
    }
    printf("%-28s", "graph memory (after)");
    for (int i = 0; i < n; i++)
        printf(" %10.1f MiB", res[i].graph_mb);
    printf("\n%-28s", "peak RSS (whole child)");
    for (int i = 0; i < n; i++)
        printf(" %10.1f MiB", res[i].peak_kb / 1024.0);
    printf("\n");
}

/* HandleMemoryLayoutConflict on Sum(x, x, ..., x) with @p n inputs. */
static void wide_sum(uint32_t n)
{
    kiln_ctx *ctx = kiln_ctx_create();
    if (!ctx)
        die("ctx_create", NULL);
    load_plugins(ctx);
    kiln_graph *g = kiln_graph_create(ctx, "wide");
    kiln_node_id x = kiln_graph_add_node(g, "x", "Data", 0, 1);
    kiln_attrs_set_int(kiln_node_attrs_mut(g, x), "index", 0);
    kiln_node_id s = kiln_graph_add_node(g, "s", "Sum", n, 1);
    kiln_node_id o = kiln_graph_add_node(g, "out", "NetOutput", 1, 0);
    for (uint32_t i = 0; i < n; i++)
        kiln_edge_add(g, x, 0, s, i);
    kiln_edge_add(g, s, 0, o, 0);
    kiln_pass_inst pi = {.comp = kiln_registry_find(ctx, KILN_COMP_PASS, pass_names[1]),
                         .enabled = true};
    if (!pi.comp)
        die(pass_names[1], NULL);
    FILE *devnull;
    kiln_passmgr *pm = quiet_passmgr(ctx, &devnull);
    kiln_error err;
    kiln_error_clear(&err);
    double t0 = now();
    if (kiln__passmgr_run_stage(pm, pass_stage[1], &pi, 1, g, &err) != KILN_OK)
        die(pass_names[1], &err);
    double t = now() - t0;
    int64_t pairs = kiln__passctx_stat(kiln__passmgr_ctx(pm), pass_stage[1], pass_names[1],
                                       "anchor pairs examined");
    printf("%-28s %10u inputs %12.4f s %14lld pairs examined\n",
           "HandleMemoryLayoutConflict", n, t, (long long)pairs);
    kiln__passmgr_destroy(pm);
    if (devnull)
        fclose(devnull);
    kiln_graph_destroy(g);
    kiln_ctx_destroy(ctx);
}

int main(int argc, char **argv)
{
    uint32_t max_nodes = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 1000000u;
    static const uint32_t sizes[] = {10000u, 100000u, 1000000u};
    result res[3];
    int n = 0;
    for (int i = 0; i < 3 && sizes[i] <= max_nodes; i++) {
        fprintf(stderr, "bench_memconflict: %u nodes...\n", sizes[i]);
        if (!run_child(sizes[i], &res[n])) {
            fprintf(stderr, "bench_memconflict: the %u-node run failed\n", sizes[i]);
            return 1;
        }
        n++;
    }
    print_results(res, n);
    printf("\nwide node: Sum reading one tensor n times\n");
    static const uint32_t wide[] = {20000u, 200000u, 2000000u};
    for (int i = 0; i < 3 && wide[i] <= 2 * max_nodes; i++)
        wide_sum(wide[i]);
    return 0;
}

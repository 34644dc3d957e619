/*
 * memplan_ge.c - GE's memory planners (libkiln_memplan_ge.so) on buffer
 * traces: for each file, buffers, LOAD, and per planner (ge_binary_block,
 * ge_max_block, ge_hybrid) the planned size, size / LOAD and the time.
 *
 *   bench_memplan_ge [--hash] [--mp] [FILE.csv ...]
 *
 * --mp adds ge_hybrid with memory_priority=true (GE's range-binary variants).
 * --hash adds a column per planner: an FNV-1a hash of the offsets, to compare
 * plans across builds (the planners are deterministic).
 * Files are `id,lower,upper,size` with the buffer live over [lower, upper)
 * (the format of ../shared/memplan, README.md there).  Without arguments the
 * instances under $KILN_MEMPLAN_DIR (else /work/shared/memplan) are run; a
 * missing file prints "skipped: <file> absent".  Times are the thread's CPU time
 * (a loaded machine inflates wall time, not this).  One stream, no events: GE's
 * level 1 and level 2 on a single-stream schedule.  Every plan is checked
 * with kiln_mem_plan_check.  Plugins from $KILN_PLUGIN_DIR or
 * <exe>/../lib/kiln/plugins.
 */
#include "bench_util.h"
#include "ctx.h"
#include "options.h"
#include "plugin.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const default_files[] = {
    "minimalloc/A.1048576.csv", "minimalloc/B.1048576.csv", "minimalloc/C.1048576.csv",
    "minimalloc/D.1048576.csv", "minimalloc/E.1048576.csv", "minimalloc/F.1048576.csv",
    "minimalloc/G.1048576.csv", "minimalloc/H.1048576.csv", "minimalloc/I.1048576.csv",
    "minimalloc/J.1048576.csv", "minimalloc/K.1048576.csv", "somas/resnet50.csv",
    "somas/pangu_2.6B.csv",     "iopddl/G_1.csv",           "iopddl/S_1.csv",
    "iopddl/Y_1.csv"};

static const char *const planners[] = {"ge_binary_block", "ge_max_block", "ge_hybrid",
                                       "ge_hybrid"};
static int print_hash, nplanners = 3;

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t plan_hash(const kiln_mem_block *b, uint32_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (uint32_t i = 0; i < n; i++)
        for (int k = 0; k < 8; k++)
            h = (h ^ (uint8_t)((uint64_t)b[i].offset >> (8 * k))) * 1099511628211ull;
    return h;
}

/* Read @p path into blocks (caller frees); 0 blocks when absent/unreadable. */
static kiln_mem_block *read_trace(const char *path, uint32_t *n, uint32_t *steps)
{
    FILE *f = fopen(path, "r");
    *n = 0;
    *steps = 0;
    if (!f)
        return NULL;
    size_t cap = 1024;
    kiln_mem_block *b = malloc(cap * sizeof(*b));
    char line[256];
    while (b && fgets(line, sizeof(line), f)) {
        long long id, lo, up, size;
        if (sscanf(line, "%lld,%lld,%lld,%lld", &id, &lo, &up, &size) != 4 || up <= lo ||
            size <= 0)
            continue; /* the header */
        if (*n == cap) {
            kiln_mem_block *nb = realloc(b, 2 * cap * sizeof(*b));
            if (!nb) {
                free(b);
                b = NULL;
                break;
            }
            b = nb;
            cap *= 2;
        }
        b[*n] = (kiln_mem_block){.size = size, .offset = -1, .first_use = (uint32_t)lo,
                                 .last_use = (uint32_t)(up - 1), .id = (uint32_t)id};
        if ((uint32_t)up > *steps)
            *steps = (uint32_t)up;
        (*n)++;
    }
    fclose(f);
    return b;
}

static void run_file(kiln_ctx *ctx, const char *path, const char *label)
{
    uint32_t n, steps;
    kiln_mem_block *b = read_trace(path, &n, &steps);
    if (!b || !n) {
        printf("skipped: %s absent\n", path);
        free(b);
        return;
    }
    kiln_mem_problem p = {.struct_size = sizeof(p), .block_count = n, .blocks = b,
                          .alignment = 512, .step_count = steps, .stream_count = 1,
                          .memory_type = "HBM"};
    int64_t load = kiln_mem_problem_load(&p);
    printf("%-26s %6u %14lld", label, n, (long long)load);
    for (int k = 0; k < nplanners; k++) {
        const kiln_component *c = kiln_registry_find(ctx, KILN_COMP_MEM_PLANNER, planners[k]);
        kiln_error err;
        kiln_error_clear(&err);
        void *inst = NULL;
        int64_t peak = 0;
        kiln_options *o = NULL;
        if (c && k == 3) { /* ge_hybrid, memory-priority mode */
            o = kiln__options_create(c->d.planner.options, c->d.planner.option_count);
            if (o)
                (void)kiln__options_set_text(o, "memory_priority", "true", &err);
        }
        double t0 = cpu_now();
        kiln_status st = c ? c->d.planner.create(o, &err, &inst) : KILN_ERR_NOT_FOUND;
        if (st == KILN_OK)
            st = c->d.planner.plan(inst, &p, &peak, &err);
        double t = cpu_now() - t0;
        if (inst)
            c->d.planner.destroy(inst);
        kiln__options_destroy(o);
        if (st == KILN_OK)
            st = kiln_mem_plan_check(&p, peak, &err);
        if (st != KILN_OK)
            printf(" | %s: %s", planners[k], kiln_error_message(&err));
        else
            printf(" | %14lld %6.3f %8.1f", (long long)peak, load ? (double)peak / load : 0.0,
                   t * 1e3);
        if (st == KILN_OK && print_hash)
            printf(" %016llx", (unsigned long long)plan_hash(b, n));
    }
    printf("\n");
    free(b);
}

int main(int argc, char **argv)
{
    kiln_ctx *ctx = kiln_ctx_create();
    const char *dir = getenv("KILN_PLUGIN_DIR");
    char def[1024], path[1200];
    if (!dir || !*dir) {
        snprintf(def, sizeof(def), "%s/../lib/kiln/plugins", kiln_exe_dir());
        dir = def;
    }
    snprintf(path, sizeof(path), "%s/libkiln_memplan_ge.so", dir);
    kiln_error err;
    kiln_error_clear(&err);
    if (!ctx || kiln_plugin_load(ctx, path, NULL, &err) != KILN_OK) {
        fprintf(stderr, "bench_memplan_ge: %s: %s\n", path, kiln_error_message(&err));
        return 1;
    }
    printf("%-26s %6s %14s | %-29s | %-29s | %-29s%s\n", "file", "blocks", "LOAD",
           "binary-block  size  /LOAD  cpu ms", "max-block  size  /LOAD  cpu ms",
           "hybrid  size  /LOAD  cpu ms", nplanners > 3 ? " | hybrid-mp  size  /LOAD  cpu ms" : "");
    int first = 1;
    for (; first < argc && argv[first][0] == '-'; first++) {
        if (!strcmp(argv[first], "--hash"))
            print_hash = 1;
        else if (!strcmp(argv[first], "--mp"))
            nplanners = 4;
    }
    if (argc > first) {
        for (int i = first; i < argc; i++)
            run_file(ctx, argv[i], argv[i]);
    } else {
        const char *base = getenv("KILN_MEMPLAN_DIR");
        if (!base || !*base)
            base = "/work/shared/memplan";
        for (size_t i = 0; i < sizeof(default_files) / sizeof(default_files[0]); i++) {
            snprintf(path, sizeof(path), "%s/%s", base, default_files[i]);
            run_file(ctx, path, default_files[i]);
        }
    }
    kiln_ctx_destroy(ctx);
    return 0;
}

/*
 * allocators.c - the runtime allocator stacks (libkiln_allocators.so,
 * docs/allocators.md) against glibc malloc on the real models' allocation
 * traces.
 *
 * A trace is bench/data/memplan/models/<model>.<memory type>.csv (committed;
 * `kiln compile --report-buffers` writes them): id,lower,upper,size, a buffer
 * allocated at step `lower` and freed after step `upper`.  One run replays
 * every step in order (frees of the buffers that died, then allocations of
 * the ones born), as an inference does; a model is run repeatedly and the
 * time per alloc+free pair is the mean over the runs.  Memory is not
 * touched: this times the allocators, not page faults.
 *
 * Printed per model and in total: ns per alloc+free for glibc, "caching"
 * (L1 alone) and "three_layer" (1 stream, and 2 streams with buffers
 * alternating between them, each freed on its own stream); the speed-up over
 * glibc (goal >= 2x) and reserved/allocated, the stack's peak bytes held from
 * the system over its peak bytes of live requests (goal <= 1.10), twice: over
 * the whole replay ("1st": the first run sets it) and in the steady state
 * ("st": since the stack last adopted a learned plan, docs/allocators.md#replay).
 * A run ends with last_wait, as the multistream runtime's do.  Each time is
 * the best of 5 measurements (the machine may be shared).
 *
 *   bench_allocators [runs] [option ...]   (default 200 runs per model;
 *                                           options for every stack, e.g. replay=false)
 */
#include "bench_util.h"
#include <kiln/kiln_embed.h>

#include <dirent.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct op {
    uint32_t buf;   /* buffer index */
    uint32_t alloc; /* 1 = alloc, 0 = free */
} op;

typedef struct trace {
    char name[128];
    uint32_t nbuf;
    size_t *size;
    op *ops;
    uint32_t nops;
} trace;

typedef struct raw {
    uint32_t lower, upper;
    size_t size;
} raw;

static int cmp_ev(const void *a, const void *b)
{
    const uint64_t *x = a, *y = b;
    return *x < *y ? -1 : *x > *y;
}

/* Read one CSV into a replay order: per step, frees (of buffers whose upper is
 * the step before) first, then allocations.  false when unreadable. */
static bool load(const char *path, trace *t)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    char line[256];
    raw *r = NULL;
    uint32_t n = 0, cap = 0;
    while (fgets(line, sizeof(line), f)) {
        unsigned id, lo, up;
        unsigned long long sz;
        if (sscanf(line, "%u,%u,%u,%llu", &id, &lo, &up, &sz) != 4)
            continue; /* the header */
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            r = realloc(r, cap * sizeof(*r));
        }
        r[n++] = (raw){lo, up, (size_t)sz};
    }
    fclose(f);
    if (!n) {
        free(r);
        return false;
    }
    /* key: time << 33 | kind << 32 | buffer (free at upper+1 sorts before alloc) */
    uint64_t *ev = malloc(2 * (size_t)n * sizeof(*ev));
    for (uint32_t i = 0; i < n; i++) {
        ev[2 * i] = ((uint64_t)r[i].lower << 33) | (1ull << 32) | i;
        ev[2 * i + 1] = ((uint64_t)(r[i].upper + 1) << 33) | i;
    }
    qsort(ev, 2 * (size_t)n, sizeof(*ev), cmp_ev);
    t->nbuf = n;
    t->size = malloc(n * sizeof(*t->size));
    for (uint32_t i = 0; i < n; i++)
        t->size[i] = r[i].size;
    t->nops = 2 * n;
    t->ops = malloc(t->nops * sizeof(*t->ops));
    for (uint32_t i = 0; i < t->nops; i++)
        t->ops[i] = (op){(uint32_t)(ev[i] & 0xffffffffu), (uint32_t)((ev[i] >> 32) & 1)};
    free(ev);
    free(r);
    return true;
}

/* The directory of the committed traces (as bench/memplan.c finds its data). */
static void trace_dir(char *out, size_t size)
{
    char cand[4][PATH_MAX + 64], src[PATH_MAX], exe[PATH_MAX];
    const char *env = getenv("KILN_SOURCE_DIR");
    snprintf(cand[0], sizeof(cand[0]), "%s/bench/data/memplan/models", env ? env : "/nonexistent");
    snprintf(src, sizeof(src), "%s", __FILE__);
    snprintf(cand[1], sizeof(cand[1]), "%s/data/memplan/models", dirname(src));
    ssize_t k = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    exe[k > 0 ? k : 0] = 0;
    snprintf(cand[2], sizeof(cand[2]), "%s/../../bench/data/memplan/models", dirname(exe));
    snprintf(cand[3], sizeof(cand[3]), "bench/data/memplan/models");
    for (int i = 0; i < 4; i++)
        if (access(cand[i], R_OK) == 0) {
            snprintf(out, size, "%.4000s", cand[i]);
            return;
        }
    snprintf(out, size, "%s", cand[3]);
}

#define REPS 5
static volatile uintptr_t sink;

/* ns per alloc+free pair of @p runs replays with glibc. */
static double run_glibc(const trace *t, uint32_t runs)
{
    void **live = calloc(t->nbuf, sizeof(void *));
    double t0 = now();
    for (uint32_t r = 0; r < runs; r++)
        for (uint32_t i = 0; i < t->nops; i++) {
            const op *o = &t->ops[i];
            if (o->alloc) {
                live[o->buf] = malloc(t->size[o->buf]);
                sink ^= (uintptr_t)live[o->buf];
            } else {
                free(live[o->buf]);
            }
        }
    double ns = (now() - t0) * 1e9 / ((double)runs * t->nbuf);
    free(live);
    return ns;
}

/* ns per pair with stack @p a; @p streams: buffer i lives on stream i % streams. */
static double run_stack(kiln_alloc_stack *a, const trace *t, uint32_t runs, uint32_t streams,
                        bool *failed)
{
    void **live = calloc(t->nbuf, sizeof(void *));
    double t0 = now();
    for (uint32_t r = 0; r < runs; r++) {
        for (uint32_t i = 0; i < t->nops; i++) {
            const op *o = &t->ops[i];
            uint32_t s = o->buf % streams;
            if (o->alloc) {
                live[o->buf] = kiln_alloc_stack_alloc(a, t->size[o->buf], s);
                if (!live[o->buf])
                    *failed = true;
            } else {
                kiln_alloc_stack_free(a, live[o->buf], s);
            }
        }
        kiln_alloc_stack_last_wait(a); /* the run's end: every stream done */
    }
    double ns = (now() - t0) * 1e9 / ((double)runs * t->nbuf);
    free(live);
    return ns;
}

typedef struct result {
    double ns;
    double ratio;  /* peak reserved / peak allocated, the whole replay */
    double steady; /* the same since the last plan was adopted */
} result;

static const char *const *g_opts;
static uint32_t g_nopts;

static result measure(kiln_session *s, kiln_error *err, const char *name, uint32_t streams,
                      const trace *t, uint32_t runs)
{
    kiln_alloc_config cfg = {sizeof(cfg), streams, 0, NULL, 0};
    kiln_alloc_stack *a = NULL;
    result res = {-1, -1, -1};
    if (kiln_session_alloc_stack_create(s, name, g_opts, g_nopts, &cfg, &a, err) != KILN_OK) {
        char m[512];
        kiln_error_format(err, m, sizeof(m));
        fprintf(stderr, "bench_allocators: %s\n", m);
        exit(1);
    }
    bool failed = false;
    res.ns = run_stack(a, t, runs, streams, &failed);
    kiln_alloc_stats st;
    memset(&st, 0, sizeof(st));
    st.struct_size = sizeof(st);
    kiln_alloc_stack_stats(a, &st);
    res.ratio = st.peak_allocated ? (double)st.peak_reserved / (double)st.peak_allocated : 0;
    res.steady = st.steady_peak_allocated
                     ? (double)st.steady_peak_reserved / (double)st.steady_peak_allocated
                     : 0;
    if (failed)
        res.ns = -1;
    kiln_alloc_stack_destroy(a);
    return res;
}

int main(int argc, char **argv)
{
    uint32_t runs = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 200;
    if (!runs)
        runs = 1;
    g_opts = (const char *const *)(argv + (argc > 2 ? 2 : argc));
    g_nopts = argc > 2 ? (uint32_t)(argc - 2) : 0;
    kiln_error *err = kiln_error_create();
    kiln_session *s = kiln_session_create();
    if (!s || !err || kiln_session_load_manifest(s, NULL, err) != KILN_OK ||
        kiln_session_load_deferred(s, err) != KILN_OK) {
        char m[512];
        kiln_error_format(err, m, sizeof(m));
        fprintf(stderr, "bench_allocators: %s\n", m);
        return 1;
    }
    if (!kiln_session_has_component(s, "allocator", "three_layer")) {
        printf("skipped: libkiln_allocators.so absent\n");
        return 0;
    }
    char dir[PATH_MAX + 64];
    trace_dir(dir, sizeof(dir));
    DIR *d = opendir(dir);
    if (!d) {
        printf("skipped: %s absent\n", dir);
        return 0;
    }
    char *names[256];
    uint32_t nn = 0;
    struct dirent *e;
    while ((e = readdir(d)) && nn < 256)
        if (strstr(e->d_name, ".csv"))
            names[nn++] = strdup(e->d_name);
    closedir(d);
    for (uint32_t i = 1; i < nn; i++)
        for (uint32_t j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
            char *x = names[j];
            names[j] = names[j - 1];
            names[j - 1] = x;
        }
    printf("allocation traces: %s, %u runs each; ns per alloc+free pair, memory untouched\n",
           dir, runs);
    printf("%-30s %5s %7s %7s %6s %5s %5s %7s %6s %5s %5s %7s %6s %5s %5s\n", "trace", "bufs",
           "glibc", "caching", "x", "r/a1", "r/as", "3L(1)", "x", "r/a1", "r/as", "3L(2)", "x",
           "r/a1", "r/as");
    double tot[4] = {0}, wsum = 0, worst_ratio[3] = {0}, worst_steady[3] = {0};
    double worst_x[3] = {1e9, 1e9, 1e9};
    for (uint32_t i = 0; i < nn; i++) {
        char path[sizeof(dir) + 300];
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        trace t;
        memset(&t, 0, sizeof(t));
        if (!load(path, &t)) {
            printf("%-34s skipped: unreadable\n", names[i]);
            continue;
        }
        /* best of REPS (the machine is shared); a fresh stack each time */
        run_glibc(&t, runs > 10 ? 10 : runs); /* warm glibc's thresholds too */
        double g = 1e300;
        result r[3] = {{1e300, 0, 0}, {1e300, 0, 0}, {1e300, 0, 0}};
        static const char *const comp[3] = {"caching", "three_layer", "three_layer"};
        for (int rep = 0; rep < REPS; rep++) {
            double x = run_glibc(&t, runs);
            if (x < g)
                g = x;
            for (int k = 0; k < 3; k++) {
                result y = measure(s, err, comp[k], k == 2 ? 2 : 1, &t, runs);
                if (y.ns < 0 || r[k].ns < 0)
                    r[k].ns = -1;
                else if (y.ns < r[k].ns)
                    r[k].ns = y.ns;
                r[k].ratio = y.ratio; /* the same every time: the replay is deterministic */
                r[k].steady = y.steady;
            }
        }
        char nm[31];
        snprintf(nm, sizeof(nm), "%.30s", names[i]);
        printf("%-30s %5u %7.1f", nm, t.nbuf, g);
        for (int k = 0; k < 3; k++) {
            if (r[k].ns < 0)
                printf(" %7s %6s %5s %5s", "FAIL", "-", "-", "-");
            else
                printf(" %7.1f %5.2fx %5.3f %5.3f", r[k].ns, g / r[k].ns, r[k].ratio,
                       r[k].steady);
            if (r[k].ratio > worst_ratio[k])
                worst_ratio[k] = r[k].ratio;
            if (r[k].steady > worst_steady[k])
                worst_steady[k] = r[k].steady;
            if (r[k].ns > 0 && g / r[k].ns < worst_x[k])
                worst_x[k] = g / r[k].ns;
            tot[k + 1] += r[k].ns * t.nbuf;
        }
        printf("\n");
        tot[0] += g * t.nbuf;
        wsum += t.nbuf;
        free(t.size);
        free(t.ops);
    }
    if (wsum > 0) {
        printf("%-30s %5.0f %7.1f", "all (weighted by buffers)", wsum, tot[0] / wsum);
        for (int k = 0; k < 3; k++)
            printf(" %7.1f %5.2fx %5s %5s", tot[k + 1] / wsum, tot[0] / tot[k + 1], "", "");
        printf("\n");
        const char *lbl[3] = {"caching", "three_layer, 1 stream", "three_layer, 2 streams"};
        for (int k = 0; k < 3; k++)
            printf("%-24s speed-up over glibc %.2fx overall (worst trace %.2fx; goal >= 2x), "
                   "worst reserved/allocated %.3f first run, %.3f steady (goal <= 1.10)\n",
                   lbl[k], tot[0] / tot[k + 1], worst_x[k], worst_ratio[k], worst_steady[k]);
    }
    for (uint32_t i = 0; i < nn; i++)
        free(names[i]);
    kiln_session_destroy(s);
    kiln_error_destroy(err);
    return 0;
}

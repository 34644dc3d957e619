/*
 * memplan.c - every memory-planning instance x every loaded memory planner:
 * buffers, LOAD, the optimum bound, peak, peak/LOAD, peak/bound and time
 * (bench/README.md, docs/memory_planning.md).
 *
 * Instances: the MiniMalloc challenging set A-K committed in
 * bench/data/memplan/minimalloc/ (each fits in 1,048,576 bytes: the bound);
 * the SOMAS and IOPDDL traces from $KILN_MEMPLAN_DIR (else ../shared/memplan
 * from the working directory, else /work/shared/memplan) when present, else
 * "skipped: <file> absent".  Planners: every memory-planner component of the
 * default manifest's plugins, plus libkiln_memplan_ge.so from the plugin
 * directory ($KILN_PLUGIN_DIR, else <exe>/../lib/kiln/plugins) when it is
 * there and the manifest does not load it.  Each plan is checked
 * (kiln_session_mem_plan runs kiln_mem_plan_check); a failure prints FAIL
 * and the program exits 1.
 *
 *   bench_memplan                 every instance
 *   bench_memplan A.1048576 Y_1   instances whose file name contains a word
 */
#include "bench_util.h"

#include <kiln/kiln.h>
#include <kiln/kiln_embed.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_PLANNERS 16

typedef struct inst {
    const char *set, *file;
    int64_t bound; /* optimum bound, 0 = none known (LOAD is the bound) */
} inst;

static const inst instances[] = {
    {"minimalloc", "A.1048576.csv", 1048576}, {"minimalloc", "B.1048576.csv", 1048576},
    {"minimalloc", "C.1048576.csv", 1048576}, {"minimalloc", "D.1048576.csv", 1048576},
    {"minimalloc", "E.1048576.csv", 1048576}, {"minimalloc", "F.1048576.csv", 1048576},
    {"minimalloc", "G.1048576.csv", 1048576}, {"minimalloc", "H.1048576.csv", 1048576},
    {"minimalloc", "I.1048576.csv", 1048576}, {"minimalloc", "J.1048576.csv", 1048576},
    {"minimalloc", "K.1048576.csv", 1048576}, {"somas", "resnet50.csv", 0},
    {"somas", "pangu_2.6B.csv", 0},           {"iopddl", "G_1.csv", 0},
    {"iopddl", "S_1.csv", 0},                 {"iopddl", "Y_1.csv", 0},
    /* the real models' buffers, as kiln's MemoryAssigner sees them (static input
     * shapes of the reference cases, sizes rounded to 512): committed */
    {"models", "ch_PP-OCRv4_det_infer.HBM.csv", 0},
    {"models", "ch_PP-OCRv4_rec_infer.HBM.csv", 0},
    {"models", "ch_ppocr_mobile_v2.0_cls_infer.HBM.csv", 0},
    {"models", "embedding_model.HBM.csv", 0},
    {"models", "hello_deepa.HBM.csv", 0},
    {"models", "hello_deepa_old.HBM.csv", 0},
    {"models", "hey_jarvis_v0.1.HBM.csv", 0},
    {"models", "melspectrogram.HBM.csv", 0},
    {"models", "namaste_deepa.HBM.csv", 0},
};

/* Read `id,lower,upper,size` lines (header optional) into blocks; NULL when
 * the file is absent; exits on a malformed line (committed data). */
static kiln_mem_block *read_trace(const char *path, uint32_t *n)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    uint32_t cap = 1024;
    kiln_mem_block *b = malloc(cap * sizeof(*b));
    char line[512];
    *n = 0;
    for (uint32_t ln = 1; b && fgets(line, sizeof(line), f); ln++) {
        long long id, lo, up, sz;
        if (ln == 1 && strncmp(line, "id,", 3) == 0)
            continue;
        if (sscanf(line, "%lld,%lld,%lld,%lld", &id, &lo, &up, &sz) != 4 || up <= lo || sz <= 0) {
            fprintf(stderr, "bench_memplan: %s:%u: malformed line\n", path, ln);
            exit(1);
        }
        if (*n == cap) {
            kiln_mem_block *nb = realloc(b, 2 * cap * sizeof(*b));
            if (!nb)
                break;
            b = nb;
            cap *= 2;
        }
        memset(&b[*n], 0, sizeof(b[*n]));
        b[*n].size = sz;
        b[*n].first_use = (uint32_t)lo;
        b[*n].last_use = (uint32_t)(up - 1);
        b[*n].id = *n;
        (*n)++;
    }
    fclose(f);
    if (!b) {
        fprintf(stderr, "bench_memplan: out of memory\n");
        exit(1);
    }
    return b;
}

/* The directory of a committed set (minimalloc, models): $KILN_SOURCE_DIR/bench/...,
 * beside this source (__FILE__ when absolute), <exe>/../../bench/... (a build
 * directory inside the source tree), ./bench/... */
#define DIRLEN (PATH_MAX + 64)

static void committed_dir(const char *set, char *out, size_t size)
{
    char cand[4][DIRLEN], src[PATH_MAX], exe[PATH_MAX];
    const char *env = getenv("KILN_SOURCE_DIR");
    snprintf(cand[0], sizeof(cand[0]), "%s/bench/data/memplan/%s", env ? env : "/nonexistent", set);
    snprintf(src, sizeof(src), "%s", __FILE__);
    snprintf(cand[1], sizeof(cand[1]), "%s/data/memplan/%s", dirname(src), set);
    ssize_t k = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    exe[k > 0 ? k : 0] = 0;
    snprintf(cand[2], sizeof(cand[2]), "%s/../../bench/data/memplan/%s", dirname(exe), set);
    snprintf(cand[3], sizeof(cand[3]), "bench/data/memplan/%s", set);
    for (int i = 0; i < 4; i++)
        if (access(cand[i], R_OK) == 0) {
            if (snprintf(out, size, "%s", cand[i]) >= (int)size)
                break; /* too long for @p out: fall back to the relative path */
            return;
        }
    (void)!snprintf(out, size, "%s", cand[3]);
}

/* The directory holding a set. */
static void set_dir(const char *set, char *out, size_t size)
{
    if (strcmp(set, "minimalloc") == 0 || strcmp(set, "models") == 0) {
        committed_dir(set, out, size);
        return;
    }
    const char *env = getenv("KILN_MEMPLAN_DIR");
    if (env && *env) {
        snprintf(out, size, "%s/%s", env, set);
        return;
    }
    snprintf(out, size, "../shared/memplan/%s", set);
    if (access(out, R_OK) != 0)
        snprintf(out, size, "/work/shared/memplan/%s", set);
}

/* Load libkiln_memplan_ge.so when the manifest did not and it is built. */
static void load_ge_planners(kiln_session *s, const char *argv0)
{
    if (kiln_session_has_component(s, "memory-planner", "ge_hybrid"))
        return;
    char dir[PATH_MAX], path[PATH_MAX + 64];
    const char *env = getenv("KILN_PLUGIN_DIR");
    if (env && *env) {
        snprintf(dir, sizeof(dir), "%s", env);
    } else {
        char exe[PATH_MAX];
        ssize_t k = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
        exe[k > 0 ? k : 0] = 0;
        if (k <= 0)
            snprintf(exe, sizeof(exe), "%s", argv0);
        snprintf(dir, sizeof(dir), "%s/../lib/kiln/plugins", dirname(exe));
    }
    snprintf(path, sizeof(path), "%s/libkiln_memplan_ge.so", dir);
    if (access(path, R_OK) != 0)
        return;
    kiln_error *err = kiln_error_create();
    if (kiln_session_load_plugin(s, path, err) != KILN_OK) {
        char msg[512];
        kiln_error_format(err, msg, sizeof(msg));
        fprintf(stderr, "bench_memplan: %s not loaded: %s\n", path, msg);
    }
    kiln_error_destroy(err);
}

static bool wanted(const char *file, int argc, char **argv)
{
    if (argc < 2)
        return true;
    for (int i = 1; i < argc; i++)
        if (strstr(file, argv[i]))
            return true;
    return false;
}

int main(int argc, char **argv)
{
    kiln_session *s = kiln_session_create();
    kiln_error *err = kiln_error_create();
    char msg[1024];
    if (!s || !err || kiln_session_load_manifest(s, NULL, err) != KILN_OK ||
        kiln_session_load_deferred(s, err) != KILN_OK) {
        kiln_error_format(err, msg, sizeof(msg));
        fprintf(stderr, "bench_memplan: %s\n", msg);
        return 1;
    }
    load_ge_planners(s, argv[0]);
    const char *planners[MAX_PLANNERS];
    uint32_t np = 0;
    for (uint32_t i = 0; i < kiln_session_component_count(s) && np < MAX_PLANNERS; i++) {
        kiln_component_info ci = {.struct_size = sizeof(ci)};
        if (kiln_session_component(s, i, &ci) && strcmp(ci.kind, "memory-planner") == 0)
            planners[np++] = ci.name;
    }
    if (np == 0) {
        fprintf(stderr, "bench_memplan: no memory planner loaded\n");
        return 1;
    }
    int failed = 0;
    printf("%-44s %7s %14s %14s  %-16s %14s %9s %9s %10s\n", "instance", "buffers", "LOAD",
           "bound", "planner", "peak", "peak/LOAD", "peak/bnd", "time ms");
    for (size_t k = 0; k < sizeof(instances) / sizeof(instances[0]); k++) {
        const inst *in = &instances[k];
        if (!wanted(in->file, argc, argv))
            continue;
        char dir[DIRLEN], path[DIRLEN + 128], name[128];
        set_dir(in->set, dir, sizeof(dir));
        snprintf(path, sizeof(path), "%s/%s", dir, in->file);
        snprintf(name, sizeof(name), "%s/%s", in->set, in->file);
        uint32_t n = 0;
        kiln_mem_block *orig = read_trace(path, &n);
        if (!orig) {
            printf("%-44s skipped: %s absent\n", name, path);
            continue;
        }
        kiln_mem_block *b = malloc((n ? n : 1) * sizeof(*b));
        for (uint32_t j = 0; j < np; j++) {
            memcpy(b, orig, n * sizeof(*b));
            kiln_mem_problem p = {.struct_size = sizeof(p), .block_count = n, .blocks = b,
                                  .alignment = 1, .stream_count = 1, .memory_type = name};
            int64_t load = kiln_mem_problem_load(&p), peak = 0;
            int64_t bound = in->bound ? in->bound : load;
            kiln_error_clear(err);
            double t0 = now();
            kiln_status st = kiln_session_mem_plan(s, planners[j], NULL, 0, &p, &peak, err);
            double ms = (now() - t0) * 1e3;
            if (st != KILN_OK) {
                kiln_error_format(err, msg, sizeof(msg));
                printf("%-44s %7u %14lld %14lld  %-16s FAIL %s\n", name, n, (long long)load,
                       (long long)bound, planners[j], msg);
                failed = 1;
                continue;
            }
            printf("%-44s %7u %14lld %14lld  %-16s %14lld %9.4f %9.4f %10.1f\n", name, n,
                   (long long)load, (long long)bound, planners[j], (long long)peak,
                   (double)peak / (double)load, (double)peak / (double)bound, ms);
            fflush(stdout);
        }
        free(b);
        free(orig);
    }
    kiln_error_destroy(err);
    kiln_session_destroy(s);
    return failed;
}

/*
 * test_parallel.c - kiln__parallel_run (core/parallel.h) and the kernel used
 * from its tasks: many graphs of one context run through the stages of the
 * default manifest (InferShapes, PruneGraphPass, the memory-conflict passes,
 * ProcessInplace, ...) by one pass manager from parallel tasks, at 1, 2 and
 * 16 threads; the graphs (JSON), the log (verify-each,
 * print-after dumps, diagnostics), the pass records, the --time-passes rows,
 * stats and explanations must be the same byte for byte.  Also: bisect
 * numbering and --dump-dir files across thread counts, interning and
 * allocation (fault injection) from many threads, lowest-index error
 * reporting, kiln.threads parsing.  The "threads" label runs this suite under
 * ThreadSanitizer (make test-tsan).
 */
#include "kiln_test.h"
#include "crash.h"
#include "ctx.h"
#include "graph_int.h"
#include "graph_json.h"
#include "manifest.h"
#include "parallel.h"
#include "passctx.h"
#include "passmgr.h"
#include "plugin.h"
#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- the fixture: default manifest, the golden pass inputs ---------------- */

static kiln_ctx *ctx;
static kiln_pipeline pipe_;
static char **files; /* graph files every stage below accepts */
static uint32_t nfiles;
static char *failing_file; /* one the stages refuse (for the failure test) */
/* Graphs serialised into an outcome: those of tasks below this index (tasks
 * after a failed one may or may not have run: their graphs are not compared) */
static uint32_t graph_limit = UINT32_MAX;

/* The stages a task runs, in order, on its graph. */
static const kiln_stage_id stages[] = {KILN_STAGE_PREPARE, KILN_STAGE_OPTIMIZE_ORIGINAL,
                                       KILN_STAGE_OPTIMIZE_AFTER_SUBGRAPH,
                                       KILN_STAGE_MEM_CONFLICT, KILN_STAGE_BUILD};

static kiln_status run_stages(kiln_passmgr *pm, kiln_graph *g, kiln_error *err)
{
    for (size_t s = 0; s < KILN_ARRAY_LEN(stages); s++) {
        const kiln_stage *st = &pipe_.stages[stages[s]];
        kiln_status r = kiln__passmgr_run_stage(pm, kiln_stage_name(stages[s]), st->passes,
                                                st->npasses, g, err);
        if (r != KILN_OK)
            return r;
    }
    return KILN_OK;
}

static const char *const data_dirs[] = {"HandleMemoryRWConflict", "HandleMemoryLayoutConflict",
                                        "PruneGraphPass",         "ProcessInplace",
                                        "MarkSameAddrPass",       "SubgraphPass",
                                        "AtomicAddrCleanPass",    "IdentityRemovePass"};

static kiln_status read_graph(const char *path, kiln_graph **g)
{
    kiln_error err;
    kiln_error_clear(&err);
    return kiln_graph_read_json_file(ctx, path, g, &err);
}

/* Keep the input files the whole stage list runs on without error (one run
 * of a throwaway manager each, on the calling thread). */
static void collect_files(void)
{
    char dir[1024];
    for (size_t d = 0; d < KILN_ARRAY_LEN(data_dirs); d++) {
        snprintf(dir, sizeof(dir), "%s/tests/data/passes/%s",
                 kiln_test_env("KILN_SOURCE_DIR", ".."), data_dirs[d]);
        struct dirent **ents;
        int n = scandir(dir, &ents, NULL, alphasort);
        for (int i = 0; i < n; i++) {
            const char *nm = ents[i]->d_name;
            size_t len = strlen(nm);
            char path[2048];
            snprintf(path, sizeof(path), "%s/%s", dir, nm);
            kiln_graph *g = NULL;
            if (len > 8 && strcmp(nm + len - 8, ".in.json") == 0 && read_graph(path, &g) == KILN_OK) {
                kiln_passmgr *pm = NULL;
                kiln_error err;
                kiln_error_clear(&err);
                kiln_instrumentation in = {.bisect_limit = -1, .log = fopen("/dev/null", "w")};
                if (kiln__passmgr_create(ctx, &in, &pm, &err) == KILN_OK &&
                    run_stages(pm, g, &err) == KILN_OK) {
                    files = realloc(files, (nfiles + 1) * sizeof(*files));
                    files[nfiles++] = strdup(path);
                } else if (!failing_file) {
                    failing_file = strdup(path);
                }
                kiln__passmgr_destroy(pm);
                fclose(in.log);
            }
            kiln_graph_destroy(g);
            free(ents[i]);
        }
        if (n > 0)
            free(ents);
    }
}

static int suite_init(void)
{
    ctx = kiln_ctx_create();
    if (!ctx)
        return 1;
    setenv("KILN_PLUGIN_PATH", kiln_test_env("KILN_PLUGIN_DIR", "lib/kiln/plugins"), 1);
    char path[1024];
    snprintf(path, sizeof(path), "%s/manifests/default.json",
             kiln_test_env("KILN_SOURCE_DIR", ".."));
    kiln_error err;
    kiln_error_clear(&err);
    memset(&pipe_, 0, sizeof(pipe_));
    pipe_.instr.log = stderr;
    if (kiln_manifest_load(ctx, path, &pipe_, &err) != KILN_OK) {
        fprintf(stderr, "manifest %s: %s\n", path, kiln_error_message(&err));
        return 1;
    }
    collect_files();
    fprintf(stderr, "\n  %u graphs run by every stage\n", nfiles);
    return nfiles < 20; /* the golden inputs hold far more */
}

static int suite_clean(void)
{
    for (uint32_t i = 0; i < nfiles; i++)
        free(files[i]);
    free(files);
    free(failing_file);
    kiln_pipeline_clear(&pipe_);
    kiln_ctx_destroy(ctx);
    return 0;
}

/* ---- one whole run, serialised ------------------------------------------- */

typedef struct run_job {
    kiln_passmgr *pm;
    kiln_graph **graphs;
} run_job;

static kiln_status stage_task(void *arg, uint32_t i, kiln_error *err)
{
    run_job *j = arg;
    /* what the partitioner's task does: the pass context, then the stages */
    if (!kiln__passmgr_ctx(j->pm))
        return kiln_errorf(err, KILN_ERR_NOMEM, "no pass context");
    kiln_diag(kiln__passmgr_ctx(j->pm), KILN_SEV_WARNING, "task %u on graph %s", i,
              kiln_graph_name(j->graphs[i]));
    return run_stages(j->pm, j->graphs[i], err);
}

/* Everything a run produces that must not depend on the thread count. */
typedef struct outcome {
    char *text;
    size_t len;
} outcome;

static kiln_status run_files(char **fl, uint32_t nf, uint32_t threads,
                             kiln_instrumentation in, outcome *out);

/*
 * Load every graph, run the stages in parallel tasks on @p threads and instrumentation @p in (its log is replaced by a buffer),
 * and serialise graphs, log, records, timing rows, stats and explanations.
 */
static kiln_status run_all(uint32_t threads, kiln_instrumentation in, outcome *out)
{
    return run_files(files, nfiles, threads, in, out);
}

static kiln_status run_files(char **fl, uint32_t nf, uint32_t threads,
                             kiln_instrumentation in, outcome *out)
{
    char *logbuf = NULL;
    size_t loglen = 0;
    in.log = open_memstream(&logbuf, &loglen);
    kiln_graph **graphs = calloc(nf, sizeof(*graphs));
    for (uint32_t i = 0; i < nf; i++)
        CU_ASSERT_EQUAL_FATAL(read_graph(fl[i], &graphs[i]), KILN_OK);
    kiln_passmgr *pm = NULL;
    kiln_error err;
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(kiln__passmgr_create(ctx, &in, &pm, &err), KILN_OK);
    run_job job = {pm, graphs};
    kiln_status st = kiln__parallel_run(ctx, nf, threads, stage_task, &job, &err);
    FILE *o = open_memstream(&out->text, &out->len);
    fprintf(o, "status %s\n", kiln_status_name(st));
    if (st != KILN_OK) {
        char buf[KILN_ERROR_TEXT_SIZE];
        kiln_error_format(&err, buf, sizeof(buf));
        fprintf(o, "error %s\n", buf);
    }
    fflush(in.log);
    fprintf(o, "---- log\n%s", logbuf ? logbuf : "");
    fprintf(o, "---- records\n");
    for (uint32_t i = 0; i < kiln__passmgr_record_count(pm); i++) {
        const kiln_pass_record *r = kiln__passmgr_record(pm, i);
        fprintf(o, "%s %s runs=%llu calls=%llu before=%lld after=%lld +%lld -%lld changed=%u "
                   "skipped=%u perf=%llu\n",
                r->name, r->stage, (unsigned long long)r->runs, (unsigned long long)r->calls,
                (long long)r->nodes_before, (long long)r->nodes_after, (long long)r->nodes_added,
                (long long)r->nodes_removed, r->changed, r->skipped,
                (unsigned long long)r->perf.calls);
    }
    /* --time-passes: rows in the same order with the same counts (times differ) */
    char *tbuf = NULL;
    size_t tlen = 0;
    FILE *t = open_memstream(&tbuf, &tlen);
    kiln__passmgr_print_timing(pm, t);
    fclose(t);
    fprintf(o, "---- timing rows\n");
    for (char *line = strtok(tbuf, "\n"); line; line = strtok(NULL, "\n")) {
        char pass[128], stage[128];
        unsigned long long calls;
        if (sscanf(line, " %127s %127s %llu", pass, stage, &calls) == 3 &&
            strcmp(pass, "total") != 0)
            fprintf(o, "%s %s %llu\n", pass, stage, calls);
    }
    free(tbuf);
    uint32_t n;
    const kiln_pass_stat *ps = kiln__passctx_stats(kiln__passmgr_ctx(pm), &n);
    fprintf(o, "---- stats\n");
    for (uint32_t i = 0; i < n; i++)
        fprintf(o, "%s %s %s %lld\n", ps[i].stage, ps[i].pass, ps[i].counter,
                (long long)ps[i].value);
    const kiln_explanation *ex = kiln__passctx_explanations(kiln__passmgr_ctx(pm), &n);
    fprintf(o, "---- explanations\n");
    for (uint32_t i = 0; i < n; i++)
        fprintf(o, "%s %s %s %s: %s\n", ex[i].stage, ex[i].pass, ex[i].graph, ex[i].node,
                ex[i].text);
    fprintf(o, "---- graphs\n");
    for (uint32_t i = 0; i < nf; i++) {
        if (i < graph_limit) {
            char *js = kiln_graph_to_json_string(graphs[i], &err);
            CU_ASSERT_PTR_NOT_NULL(js);
            fprintf(o, "%s\n", js ? js : "");
            kiln_free(js);
        }
        kiln_graph_destroy(graphs[i]);
    }
    fclose(o);
    kiln__passmgr_destroy(pm);
    fclose(in.log);
    free(logbuf);
    free(graphs);
    return st;
}

/* Report the first differing line of two outcomes. */
static void expect_same(const outcome *a, const outcome *b, const char *what)
{
    if (a->len == b->len && memcmp(a->text, b->text, a->len) == 0) {
        CU_PASS("same");
        return;
    }
    size_t i = 0, line = 1, start = 0;
    while (i < a->len && i < b->len && a->text[i] == b->text[i]) {
        if (a->text[i] == '\n') {
            line++;
            start = i + 1;
        }
        i++;
    }
    fprintf(stderr, "\n  %s: outputs differ at line %zu:\n  < %.200s\n  > %.200s\n", what, line,
            a->text + start, b->text + start);
    CU_FAIL("outputs differ");
}

/* Run at 1, 2 and 16 threads and compare; @p must: text the outcome holds. */
static void run_compare_files(char **fl, uint32_t nf, kiln_instrumentation in, const char *what,
                              kiln_status want, const char *const *must)
{
    static const uint32_t counts[] = {1, 2, 16};
    outcome res[3];
    for (int k = 0; k < 3; k++) {
        kiln_status st = run_files(fl, nf, counts[k], in, &res[k]);
        CU_ASSERT_EQUAL(st, want);
        if (st != want)
            fprintf(stderr, "\n  %s: %.300s\n", what, res[k].text);
        for (int m = 0; must && must[m]; m++)
            if (!strstr(res[k].text, must[m])) {
                fprintf(stderr, "\n  %s: no '%s' in the outcome\n", what, must[m]);
                CU_FAIL("expected text missing");
            }
    }
    for (int k = 1; k < 3; k++) {
        char label[128];
        snprintf(label, sizeof(label), "%s, %u threads vs 1", what, counts[k]);
        expect_same(&res[0], &res[k], label);
    }
    for (int k = 0; k < 3; k++)
        free(res[k].text);
}

static void run_compare(kiln_instrumentation in, const char *what, const char *const *must)
{
    run_compare_files(files, nfiles, in, what, KILN_OK, must);
}

static void test_stages_same_for_any_thread_count(void)
{
    kiln_instrumentation in = {.bisect_limit = -1, .verify_each = true, .time_passes = false,
                               .print_after = (char *)"PruneGraphPass|HandleMemoryRWConflict|InferShapes"};
    static const char *const must[] = {
        "*** IR Dump After HandleMemoryRWConflict (stage mem_conflict)",
        "warning: kiln: task 1 on graph", "AtomicAddrCleanPass: one clean node",
        "HcclMemcpyPass identities inserted", NULL};
    run_compare(in, "stages", must);
}

static void test_bisect_same_for_any_thread_count(void)
{
    /* optional executions: numbered across tasks in task order */
    kiln_instrumentation in = {.bisect_limit = 3 * (int64_t)nfiles};
    static const char *const must[] = {"BISECT: NOT running pass", "BISECT: running pass (1) ",
                                       NULL};
    run_compare(in, "bisect", must);
}

static void test_disable_warning_once(void)
{
    /* the once-per-context ge.disableOptimizations warning: in the first task only */
    kiln_ctx_set_option(ctx, "ge.disableOptimizations", "NoSuchPass, ConstantFoldingPass");
    kiln_instrumentation in = {.bisect_limit = -1};
    outcome o;
    run_all(16, in, &o);
    const char *w = strstr(o.text, "NoSuchPass is not allowed");
    CU_ASSERT_PTR_NOT_NULL(w);
    CU_ASSERT_PTR_NULL(w ? strstr(w + 1, "NoSuchPass is not allowed") : NULL);
    free(o.text);
    static const char *const must[] = {"optimization NoSuchPass is not allowed", NULL};
    run_compare(in, "disable warning", must);
    kiln_ctx_set_option(ctx, "ge.disableOptimizations", "");
}

/* A graph the stages refuse, in the middle of the task list: the run fails
 * with that task's error, and the log and records are those of the tasks up
 * to it, whatever the thread count. */
static void test_failing_task_in_stages(void)
{
    CU_ASSERT_PTR_NOT_NULL_FATAL(failing_file);
    uint32_t nf = nfiles + 1, mid = nfiles / 2;
    char **fl = malloc(nf * sizeof(*fl));
    for (uint32_t i = 0, k = 0; i < nf; i++)
        fl[i] = i == mid ? failing_file : files[k++];
    kiln_instrumentation in = {.bisect_limit = -1, .verify_each = true};
    char must[1200];
    snprintf(must, sizeof(must), "warning: kiln: task %u on graph", mid);
    const char *const musts[] = {must, NULL};
    graph_limit = mid + 1;
    run_compare_files(fl, nf, in, "failing task", KILN_ERR_INVALID, musts);
    /* ... and nothing of a later task */
    outcome o;
    run_files(fl, nf, 16, in, &o);
    snprintf(must, sizeof(must), "warning: kiln: task %u on graph", mid + 1);
    CU_ASSERT_PTR_NULL(strstr(o.text, must));
    CU_ASSERT_PTR_NOT_NULL(strstr(o.text, "error "));
    graph_limit = UINT32_MAX;
    free(o.text);
    free(fl);
}

/* Instrument callbacks (tests/plugins/tp_good's TestInstrument appends to
 * $KILN_TEST_INSTRUMENT_LOG) come in the same order as on one thread, never
 * interleaved between tasks. */
typedef struct instr_job {
    kiln_passmgr *pm;
    kiln_graph **g;
    kiln_pass_inst *pi;
} instr_job;

static kiln_status instr_task(void *arg, uint32_t i, kiln_error *err)
{
    instr_job *j = arg;
    return kiln__passmgr_run_stage(j->pm, "optimize_subgraph", j->pi, 2, j->g[i], err);
}

static char *instrument_trace(kiln_ctx *c, kiln_pass_inst *pi, uint32_t threads)
{
    char path[] = "/tmp/kiln_par_trace_XXXXXX";
    int fd = mkstemp(path);
    CU_ASSERT_FATAL(fd >= 0);
    close(fd);
    setenv("KILN_TEST_INSTRUMENT_LOG", path, 1);
    enum { N = 100 };
    kiln_graph *g[N];
    for (uint32_t i = 0; i < N; i++) {
        kiln_error e;
        kiln_error_clear(&e);
        CU_ASSERT_EQUAL_FATAL(kiln_graph_read_json_file(c, files[i % nfiles], &g[i], &e), KILN_OK);
    }
    FILE *devnull = fopen("/dev/null", "w");
    kiln_instrumentation in = {.bisect_limit = -1, .log = devnull};
    kiln_passmgr *pm = NULL;
    kiln_error err;
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(kiln__passmgr_create(c, &in, &pm, &err), KILN_OK);
    instr_job j = {pm, g, pi};
    CU_ASSERT_EQUAL(kiln__parallel_run(c, N, threads, instr_task, &j, &err), KILN_OK);
    kiln__passmgr_destroy(pm);
    fclose(devnull);
    for (uint32_t i = 0; i < N; i++)
        kiln_graph_destroy(g[i]);
    unsetenv("KILN_TEST_INSTRUMENT_LOG");
    FILE *f = fopen(path, "r");
    static char buf[3][1 << 16];
    static int slot;
    char *b = buf[slot++ % 3];
    size_t len = f ? fread(b, 1, sizeof(buf[0]) - 1, f) : 0;
    b[len] = 0;
    if (f)
        fclose(f);
    unlink(path);
    return b;
}

static void test_instrument_order(void)
{
    kiln_ctx *c = kiln_ctx_create();
    char path[1024];
    snprintf(path, sizeof(path), "%s/libtp_good.so",
             kiln_test_env("KILN_TEST_PLUGIN_DIR", "tests/plugins"));
    kiln_error err;
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(kiln_plugin_load(c, path, NULL, &err), KILN_OK);
    CU_ASSERT_EQUAL_FATAL(kiln_test_load_plugin(c, "libkiln_passes.so", &err), KILN_OK);
    kiln_pass_inst pi[2];
    memset(pi, 0, sizeof(pi));
    pi[0].comp = kiln_registry_find(c, KILN_COMP_PASS, "TestGraphPass");
    pi[1].comp = kiln_registry_find(c, KILN_COMP_PASS, "PruneGraphPass");
    pi[0].enabled = pi[1].enabled = true;
    CU_ASSERT_PTR_NOT_NULL_FATAL(pi[0].comp);
    CU_ASSERT_PTR_NOT_NULL_FATAL(pi[1].comp);
    const char *t1 = instrument_trace(c, pi, 1);
    const char *t16 = instrument_trace(c, pi, 16);
    CU_ASSERT_PTR_NOT_NULL(strstr(t1, "before_pass optimize_subgraph TestGraphPass\n"
                                      "after_pass optimize_subgraph TestGraphPass\n"
                                      "before_pass optimize_subgraph PruneGraphPass\n"
                                      "after_pass optimize_subgraph PruneGraphPass\n"
                                      "before_pass optimize_subgraph TestGraphPass\n"));
    CU_ASSERT(strlen(t1) > 100 * 4 * 20);
    CU_ASSERT_STRING_EQUAL(t1, t16);
    kiln_ctx_destroy(c);
}

static int dir_listing(const char *dir, char *buf, size_t size)
{
    struct dirent **ents;
    int n = scandir(dir, &ents, NULL, alphasort);
    size_t len = 0;
    buf[0] = 0;
    for (int i = 0; i < n; i++) {
        if (ents[i]->d_name[0] != '.') {
            char path[2048];
            snprintf(path, sizeof(path), "%s/%s", dir, ents[i]->d_name);
            struct stat sb;
            stat(path, &sb);
            len += (size_t)snprintf(buf + len, len < size ? size - len : 0, "%s %lld\n",
                                    ents[i]->d_name, (long long)sb.st_size);
            unlink(path);
        }
        free(ents[i]);
    }
    if (n > 0)
        free(ents);
    return n;
}

static void test_dump_dir_same_for_any_thread_count(void)
{
    char d1[] = "/tmp/kiln_par_XXXXXX", d16[] = "/tmp/kiln_par_XXXXXX";
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(d1));
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(d16));
    kiln_instrumentation in = {.bisect_limit = -1, .print_after = (char *)"HandleMemoryLayoutConflict"};
    outcome o1, o16;
    in.dump_dir = d1;
    CU_ASSERT_EQUAL(run_all(1, in, &o1), KILN_OK);
    in.dump_dir = d16;
    CU_ASSERT_EQUAL(run_all(16, in, &o16), KILN_OK);
    expect_same(&o1, &o16, "dump-dir run");
    static char l1[1 << 16], l16[1 << 16];
    int n1 = dir_listing(d1, l1, sizeof(l1));
    dir_listing(d16, l16, sizeof(l16));
    CU_ASSERT(n1 > 2);
    CU_ASSERT_STRING_EQUAL(l1, l16);
    rmdir(d1);
    rmdir(d16);
    free(o1.text);
    free(o16.text);
}

/* ---- the pool itself -------------------------------------------------------- */

typedef struct fail_job {
    atomic_uint ran;
    uint32_t fail_a, fail_b;
    atomic_uint mask[4]; /* which tasks ran, 128 bits */
} fail_job;

static kiln_status failing_task(void *arg, uint32_t i, kiln_error *err)
{
    fail_job *j = arg;
    atomic_fetch_add(&j->ran, 1);
    atomic_fetch_or(&j->mask[i / 32], 1u << (i % 32));
    usleep(i % 7 == 0 ? 200 : 0);
    if (i == j->fail_a || i == j->fail_b)
        return kiln_errorf(err, KILN_ERR_PASS, "task %u failed on purpose", i);
    return KILN_OK;
}

static void test_lowest_index_error(void)
{
    static const uint32_t counts[] = {1, 2, 16};
    for (size_t k = 0; k < KILN_ARRAY_LEN(counts); k++) {
        for (int rep = 0; rep < 5; rep++) {
            fail_job j = {.fail_a = 97, .fail_b = 41};
            kiln_error err;
            kiln_error_clear(&err);
            kiln_status st = kiln__parallel_run(ctx, 128, counts[k], failing_task, &j, &err);
            CU_ASSERT_EQUAL(st, KILN_ERR_PASS);
            CU_ASSERT_STRING_EQUAL(kiln_error_message(&err), "task 41 failed on purpose");
            /* every task below the failure ran */
            for (uint32_t i = 0; i <= 41; i++)
                CU_ASSERT(atomic_load(&j.mask[i / 32]) & (1u << (i % 32)));
            if (counts[k] == 1)
                CU_ASSERT_EQUAL(atomic_load(&j.ran), 42);
        }
    }
}

static kiln_status status_only_task(void *arg, uint32_t i, kiln_error *err)
{
    (void)arg;
    (void)err;
    return i == 3 ? KILN_ERR_LIMIT : KILN_OK; /* an error it did not record */
}

static void test_unrecorded_error(void)
{
    kiln_error err;
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(kiln__parallel_run(ctx, 8, 4, status_only_task, NULL, &err), KILN_ERR_LIMIT);
    CU_ASSERT_PTR_NOT_NULL(strstr(kiln_error_message(&err), "task 3"));
}

typedef struct thread_job {
    pthread_t caller;
    atomic_uint foreign; /* tasks that ran on another thread */
    atomic_uint max_worker;
} thread_job;

static kiln_status where_task(void *arg, uint32_t i, kiln_error *err)
{
    (void)i;
    (void)err;
    thread_job *j = arg;
    if (!pthread_equal(pthread_self(), j->caller))
        atomic_fetch_add(&j->foreign, 1);
    uint32_t w = kiln__worker_index(), m = atomic_load(&j->max_worker);
    while (w > m && !atomic_compare_exchange_weak(&j->max_worker, &m, w))
        ;
    uint32_t idx;
    CU_ASSERT(kiln__task_current(&idx) && idx == i);
    usleep(100);
    return KILN_OK;
}

static void test_no_thread_when_serial(void)
{
    kiln_error err;
    kiln_error_clear(&err);
    thread_job j = {.caller = pthread_self()};
    CU_ASSERT_EQUAL(kiln__parallel_run(ctx, 50, 1, where_task, &j, &err), KILN_OK);
    CU_ASSERT_EQUAL(kiln__parallel_run(ctx, 1, 16, where_task, &j, &err), KILN_OK);
    CU_ASSERT_EQUAL(atomic_load(&j.foreign), 0);
    CU_ASSERT_EQUAL(atomic_load(&j.max_worker), 0);
    CU_ASSERT_EQUAL(kiln__parallel_run(ctx, 0, 16, where_task, &j, &err), KILN_OK);
    CU_ASSERT_FALSE(kiln__task_current(NULL));
    /* with 4 threads the workers are numbered 1..3 (which of them get work varies) */
    CU_ASSERT_EQUAL(kiln__parallel_run(ctx, 64, 4, where_task, &j, &err), KILN_OK);
    CU_ASSERT(atomic_load(&j.max_worker) <= 3);
    CU_ASSERT_EQUAL(kiln__worker_index(), 0);
}

static void test_threads_option(void)
{
    kiln_ctx *c = kiln_ctx_create();
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    uint32_t def = cores < 1 ? 1 : cores < 16 ? (uint32_t)cores : 16;
    CU_ASSERT_EQUAL(kiln__parallel_threads(c), def);
    kiln_ctx_set_option(c, "kiln.threads", "0");
    CU_ASSERT_EQUAL(kiln__parallel_threads(c), def);
    kiln_ctx_set_option(c, "kiln.threads", "3");
    CU_ASSERT_EQUAL(kiln__parallel_threads(c), 3);
    kiln_error err;
    kiln_error_clear(&err);
    thread_job j = {.caller = pthread_self()};
    CU_ASSERT_EQUAL(kiln__parallel_run(c, 20, 0, where_task, &j, &err), KILN_OK);
    CU_ASSERT(atomic_load(&j.max_worker) <= 2);
    const char *bad[] = {"abc", "-1", "3x", "100000"};
    for (size_t i = 0; i < KILN_ARRAY_LEN(bad); i++) {
        kiln_ctx_set_option(c, "kiln.threads", bad[i]);
        kiln_error_clear(&err);
        CU_ASSERT_EQUAL(kiln__parallel_run(c, 4, 0, where_task, &j, &err), KILN_ERR_INVALID);
        CU_ASSERT_PTR_NOT_NULL(strstr(kiln_error_message(&err), "kiln.threads"));
        CU_ASSERT_EQUAL(kiln__parallel_threads(c), def);
    }
    kiln_ctx_destroy(c);
}

typedef struct turn_job {
    atomic_uint next; /* the index expected to take its turn next */
    atomic_uint bad;
} turn_job;

static kiln_status turn_task(void *arg, uint32_t i, kiln_error *err)
{
    (void)err;
    turn_job *j = arg;
    usleep((i * 37) % 5 * 100);
    CU_ASSERT_TRUE(kiln__task_wait_turn());
    if (atomic_load(&j->next) != i)
        atomic_fetch_add(&j->bad, 1);
    atomic_store(&j->next, i + 1);
    return KILN_OK;
}

static void test_wait_turn_order(void)
{
    turn_job j = {0};
    kiln_error err;
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(kiln__parallel_run(ctx, 100, 16, turn_task, &j, &err), KILN_OK);
    CU_ASSERT_EQUAL(atomic_load(&j.bad), 0);
    CU_ASSERT_EQUAL(atomic_load(&j.next), 100);
}

/* ---- crash attribution in a worker ----------------------------------------- */

/* The sanitizers' own SIGSEGV handling gets in the way of a forked crash. */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define KILN_CRASH_TEST 0
#else
#define KILN_CRASH_TEST 1
#endif

#if KILN_CRASH_TEST

typedef struct crash_job {
    atomic_uint crashed;
    bool own_activity; /* the crashing task enters an activity of its own */
    kiln_graph *g;
} crash_job;

static kiln_status crash_task(void *arg, uint32_t i, kiln_error *err)
{
    (void)err;
    (void)i;
    crash_job *j = arg;
    /* the first task on a started worker (not the calling thread) crashes */
    if (kiln__worker_index() == 0 || atomic_exchange(&j->crashed, 1)) {
        usleep(50000);
        return KILN_OK;
    }
    kiln_activity a = KILN_ACTIVITY("taskplugin", "TaskPass", "optimize_subgraph", j->g, 0);
    if (j->own_activity)
        kiln__activity_enter(&a);
    raise(SIGSEGV);
    return KILN_OK;
}

/* Fork; the child crashes in a task on a worker thread; returns its stderr. */
static char *crash_child(bool own_activity)
{
    int fds[2];
    CU_ASSERT_EQUAL_FATAL(pipe(fds), 0);
    fflush(stderr);
    pid_t pid = fork();
    CU_ASSERT_FATAL(pid >= 0);
    if (pid == 0) {
        dup2(fds[1], STDERR_FILENO);
        close(fds[0]);
        kiln_crash_handlers_install();
        kiln_ctx *c = kiln_ctx_create();
        kiln_graph *g = NULL;
        kiln_error err;
        kiln_error_clear(&err);
        const char *js = "{\"kiln_graph\": 1, \"name\": \"subgraph_7\", \"nodes\": []}";
        if (kiln_graph_read_json_string(c, js, strlen(js), "t", &g, &err) != KILN_OK)
            _exit(3);
        kiln_activity outer = KILN_ACTIVITY(NULL, "partition", "optimize_subgraph", g, 0);
        outer.doing = "optimising subgraphs";
        kiln__activity_enter(&outer);
        crash_job j = {.own_activity = own_activity, .g = g};
        kiln__parallel_run(c, 8, 4, crash_task, &j, &err);
        _exit(0); /* not reached */
    }
    close(fds[1]);
    static char buf[4096];
    size_t len = 0;
    ssize_t k;
    while ((k = read(fds[0], buf + len, sizeof(buf) - 1 - len)) > 0)
        len += (size_t)k;
    buf[len] = 0;
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    CU_ASSERT(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV);
    return buf;
}

#endif /* KILN_CRASH_TEST */

static void test_crash_attribution_in_task(void)
{
#if !KILN_CRASH_TEST
    CU_PASS("skipped under a sanitizer");
#else
    char *out = crash_child(true);
    if (!strstr(out, "SIGSEGV in plugin taskplugin, pass TaskPass (stage optimize_subgraph, graph "
                     "subgraph_7)"))
        fprintf(stderr, "\n  crash output: %s\n", out);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "SIGSEGV in plugin taskplugin, pass TaskPass (stage "
                                       "optimize_subgraph, graph subgraph_7)"));
    /* a task that entered nothing: the record of the code that started the run */
    out = crash_child(false);
    if (!strstr(out, "while optimising subgraphs, component partition"))
        fprintf(stderr, "\n  crash output: %s\n", out);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "while optimising subgraphs, component partition"));
#endif
}

/* ---- interning and allocation from many threads ----------------------------- */

#define STRS_PER_TASK 4000u

typedef struct intern_job {
    kiln_ctx *c;
    uint32_t *shared_sym; /* sym of "shared-<k>" as each task saw it: [task][k] */
} intern_job;

static kiln_status intern_task(void *arg, uint32_t i, kiln_error *err)
{
    intern_job *j = arg;
    char s[64];
    for (uint32_t k = 0; k < STRS_PER_TASK; k++) {
        /* half shared by every task (in a different order each), half its own */
        uint32_t sk = (k * 7919u + i * 104729u) % STRS_PER_TASK;
        int n = snprintf(s, sizeof(s), "shared-%u", sk);
        uint32_t sym = kiln__intern(&j->c->strings, s, (size_t)n);
        if (!sym || strcmp(kiln__intern_str(&j->c->strings, sym), s) != 0)
            return kiln_errorf(err, KILN_ERR_INTERNAL, "task %u: %s interned wrong", i, s);
        j->shared_sym[i * STRS_PER_TASK + sk] = sym;
        n = snprintf(s, sizeof(s), "own-%u-%u", i, k);
        sym = kiln__intern(&j->c->strings, s, (size_t)n);
        if (!sym || strcmp(kiln__intern_str(&j->c->strings, sym), s) != 0)
            return kiln_errorf(err, KILN_ERR_INTERNAL, "task %u: %s interned wrong", i, s);
        if (kiln__intern_find(&j->c->strings, s, (size_t)n) != sym)
            return kiln_errorf(err, KILN_ERR_INTERNAL, "task %u: %s not found", i, s);
    }
    return KILN_OK;
}

static void test_intern_stress(void)
{
    enum { TASKS = 32 };
    kiln_ctx *c = kiln_ctx_create();
    /* a new context already holds "" and the keys it interns at creation */
    uint32_t base = c ? atomic_load(&c->strings.count) : 0;
    intern_job j = {c, calloc((size_t)TASKS * STRS_PER_TASK, sizeof(uint32_t))};
    kiln_error err;
    kiln_error_clear(&err);
    CU_ASSERT_EQUAL(kiln__parallel_run(c, TASKS, 16, intern_task, &j, &err), KILN_OK);
    /* one symbol per distinct string: every task saw the same one */
    for (uint32_t k = 0; k < STRS_PER_TASK; k++)
        for (uint32_t i = 1; i < TASKS; i++)
            if (j.shared_sym[i * STRS_PER_TASK + k] != j.shared_sym[k]) {
                CU_FAIL("a shared string got two symbols");
                i = TASKS, k = STRS_PER_TASK;
            }
    uint32_t expect = base + STRS_PER_TASK + TASKS * STRS_PER_TASK;
    CU_ASSERT_EQUAL(atomic_load(&c->strings.count), expect);
    free(j.shared_sym);
    kiln_ctx_destroy(c);
}

#define ALLOCS_PER_TASK 500u

static atomic_uint alloc_failures;

static kiln_status alloc_task(void *arg, uint32_t i, kiln_error *err)
{
    (void)arg;
    (void)i;
    (void)err;
    for (uint32_t k = 0; k < ALLOCS_PER_TASK; k++) {
        void *p = kiln__malloc(16 + k % 64);
        if (!p)
            atomic_fetch_add(&alloc_failures, 1);
        kiln__free(p);
    }
    return KILN_OK;
}

static void test_fault_injection_threads(void)
{
    /* the Nth allocation of all threads together fails, and every one after */
    enum { TASKS = 16 };
    kiln_ctx *c = kiln_ctx_create();
    kiln_error err;
    kiln_error_clear(&err);
    atomic_store(&alloc_failures, 0);
    long total = (long)TASKS * ALLOCS_PER_TASK;
    /* the run's own allocations come before any task's */
    kiln__fault_set(0);
    kiln__fault_set(total / 2);
    kiln_status st = kiln__parallel_run(c, TASKS, 8, alloc_task, NULL, &err);
    long hits = kiln__fault_hits();
    kiln__fault_set(0);
    CU_ASSERT_EQUAL(st, KILN_OK);
    /* every failing allocation was a task's and counted once; the run's own
     * few allocations come before the tasks' and succeed */
    long failures = (long)atomic_load(&alloc_failures);
    CU_ASSERT_EQUAL(failures, hits);
    CU_ASSERT(failures >= total - total / 2 + 1 && failures <= total - total / 2 + 1 + 8);
    kiln_ctx_destroy(c);
}

int main(void)
{
    static const kiln_test_case pool[] = {
        {"lowest index error", test_lowest_index_error},
        {"unrecorded error", test_unrecorded_error},
        {"no thread when serial", test_no_thread_when_serial},
        {"kiln.threads", test_threads_option},
        {"wait turn order", test_wait_turn_order},
        {"intern stress", test_intern_stress},
        {"fault injection from threads", test_fault_injection_threads},
        {"crash attribution in a task", test_crash_attribution_in_task},
        {NULL, NULL}};
    CU_initialize_registry();
    CU_pSuite s1 = CU_add_suite("parallel pool", NULL, NULL);
    for (const kiln_test_case *t = pool; t->name; t++)
        CU_add_test(s1, t->name, t->fn);
    CU_pSuite s2 = CU_add_suite("parallel stages", suite_init, suite_clean);
    CU_add_test(s2, "stages same for 1, 2, 16 threads", test_stages_same_for_any_thread_count);
    CU_add_test(s2, "bisect same for 1, 2, 16 threads", test_bisect_same_for_any_thread_count);
    CU_add_test(s2, "disable warning once", test_disable_warning_once);
    CU_add_test(s2, "failing task in the stages", test_failing_task_in_stages);
    CU_add_test(s2, "instrument callbacks in task order", test_instrument_order);
    CU_add_test(s2, "dump-dir same for 1 and 16 threads", test_dump_dir_same_for_any_thread_count);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failed = CU_get_number_of_failures(), ran = CU_get_number_of_tests_run();
    unsigned bad_suites = CU_get_number_of_suites_failed();
    CU_cleanup_registry();
    return failed || bad_suites || ran == 0 ? 1 : 0;
}

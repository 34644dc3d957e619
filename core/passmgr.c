/*
 * passmgr.c - the pass manager (GE PassManager, GE_SEMANTICS §1.4) and pass
 * instrumentation.
 *
 * One stage runs like this:
 *
 *   for each kiln_pass_inst in list order:
 *     skip when disabled (manifest/CLI) or by ge.disableOptimizations
 *     graph pass:  [bisect?] before_pass hooks
 *                  run_graph(root); then run_graph(s) for every subgraph s of
 *                  the root (all levels, creation order) unless NO_SUBGRAPHS;
 *                  FAILED (or any value but CHANGED / NOT_CHANGED) stops
 *     node passes: the maximal run of consecutive node passes (minus the ones
 *                  skipped) is one GEPass group: kiln__gepass_run
 *     fusion pass: the installed fusion runner
 *     afterwards:  graph OOM flag -> KILN_ERR_NOMEM; --verify-each;
 *                  --print-after dumps; after_pass / after_pass_failed hooks;
 *                  record calls, wall time, live node counts
 *
 * Bisect (LLVM OptBisect): every execution of an *optional* pass gets the
 * next number k (a graph pass execution covers the root and its subgraphs;
 * each member of a node-pass group is one execution); the log gets
 * "BISECT: running pass (k) <name> on <graph>" or "BISECT: NOT running ...",
 * and executions with k > limit are skipped.  Required passes
 * (kiln_pass_inst.required or KILN_PASS_REQUIRED) are never numbered and
 * always run.
 *
 * Instrument components (KILN_COMP_INSTRUMENT) are instantiated on the first
 * stage run; before_pass hooks run in registration order, after hooks in
 * reverse order (stack order, like LLVM/MLIR instrumentation).  Every call
 * into plugin code is bracketed by kiln__activity_enter/leave.
 *
 * Concurrent stage runs (docs/threads.md).  kiln__passmgr_run_stage may be
 * called from kiln__parallel_run tasks at once, on distinct root graphs, with
 * one manager.  Inside a task the run uses a task shard (kiln__task_local)
 * instead of the manager's own state: a pass context of its own (requests,
 * stats, explanations), a log buffered in memory, records of its own, a
 * pcre2 match block of its own.  When the parallel run ends the shards are
 * merged in task-index order: log bytes appended to the log, records created
 * in that order and their counts added, stats added and explanations
 * appended.  So the log, the records, --time-passes, --stats and --report
 * come out the same for any thread count (timings differ in value only).
 * What needs one global order - bisect numbering, --dump-dir file numbers,
 * instrument callbacks - is done after kiln__task_wait_turn, which runs the
 * tasks that need it one after the other in index order.  Pass instances
 * are per task: a task creates the instances it runs (on first use, like a
 * direct run) and they are destroyed when its shard is merged, so an instance
 * is never called from two threads at once and never carries state from one
 * task's graph to another's (GE builds its pass objects per graph, too).
 */
#include "passmgr.h"
#include "crash.h"
#include "parallel.h"
#include "graph_int.h"
#include "graph_dot.h"
#include "graph_json.h"
#include "verify.h"
#include <ctype.h>
#include <pcre2.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

/* The clock of a pass's recorded time: monotonic wall time, or with
 * KILN_PASS_CLOCK=cpu the process's CPU time (every thread's), which a loaded,
 * shared machine does not inflate (a benchmarking aid; bench/README.md). */
uint64_t kiln__pass_clock_ns(void)
{
    static atomic_int cpu = -1;
    int c = atomic_load_explicit(&cpu, memory_order_relaxed);
    if (c < 0) {
        const char *e = getenv("KILN_PASS_CLOCK");
        c = e && strcmp(e, "cpu") == 0;
        atomic_store_explicit(&cpu, c, memory_order_relaxed);
    }
    if (!c)
        return kiln__now_ns();
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

typedef struct instr_rec {
    const kiln_component *comp;
    void *inst;
} instr_rec;

/* One task's share of the stage runs it made (see the file comment). */
typedef struct pm_task {
    kiln_passmgr *pm;
    kiln_pass_ctx pc;
    FILE *log; /* open_memstream over buf/len, opened on first use (task_log_open) */
    char *buf;
    size_t len;
    size_t warn_off, warn_len; /* the ge.disableOptimizations warning in buf */
    bool warned;
    pcre2_match_data *md;
    kiln_pass_record **recs; /* this task's records, first-run order */
    uint32_t nrecs, recs_cap;
    uint64_t total_ns;
} pm_task;

/* Where one stage run keeps its state: the manager's own (direct call) or a
 * task shard. */
typedef struct run_scope {
    kiln_passmgr *pm;
    pm_task *task; /* NULL = direct */
    kiln_pass_ctx *pc;
    FILE *log;
    pcre2_match_data *md;
    uint64_t *total_ns;
} run_scope;

/* The scope's log: a task's is opened on its first write. */
static FILE *scope_log(run_scope *rs)
{
    return rs->log ? rs->log : kiln__passctx_log(rs->pc);
}

struct kiln_passmgr {
    kiln_ctx *ctx;
    kiln_instrumentation instr; /* strings and log borrowed */
    FILE *log;
    pcre2_code *print_re;
    pcre2_match_data *md;
    kiln_pass_ctx pc;
    kiln_pass_record **recs; /* pointers: GEPass items hold &rec->perf */
    uint32_t nrecs, recs_cap;
    instr_rec *instruments;
    uint32_t ninstruments;
    bool instruments_ready;
    int64_t bisect_count;
    uint32_t dump_seq;
    uint64_t total_ns;
    kiln_fusion_runner fusion;
    void *fusion_user;
    pthread_mutex_t lock; /* instruments_init inside tasks */
};

static void destroy_instance(kiln_pass_record *r);

/* ---- creation / destruction --------------------------------------------- */

kiln_status kiln__passmgr_create(kiln_ctx *ctx, const kiln_instrumentation *instr,
                                 kiln_passmgr **out, kiln_error *err)
{
    *out = NULL;
    kiln_passmgr *pm = kiln__calloc(1, sizeof(*pm));
    if (!pm)
        return kiln_errorf(err, KILN_ERR_NOMEM, "pass manager: out of memory");
    pm->ctx = ctx;
    pm->fusion = kiln__fusion_run_pass;
    pthread_mutex_init(&pm->lock, NULL);
    if (instr)
        pm->instr = *instr;
    else
        pm->instr.bisect_limit = -1;
    pm->log = pm->instr.log ? pm->instr.log : stderr;
    kiln__passctx_init(&pm->pc, ctx, pm->log, NULL);
    if (pm->instr.print_after) {
        int code;
        PCRE2_SIZE off;
        pm->print_re = pcre2_compile((PCRE2_SPTR)pm->instr.print_after, PCRE2_ZERO_TERMINATED, 0,
                                     &code, &off, NULL);
        if (!pm->print_re) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(code, msg, sizeof(msg));
            kiln_errorf(err, KILN_ERR_INVALID, "--print-after: bad regex '%s' at offset %zu: %s",
                        pm->instr.print_after, (size_t)off, (const char *)msg);
            kiln__passmgr_destroy(pm);
            return KILN_ERR_INVALID;
        }
        pm->md = pcre2_match_data_create_from_pattern(pm->print_re, NULL);
        if (!pm->md) {
            kiln__passmgr_destroy(pm);
            return kiln_errorf(err, KILN_ERR_NOMEM, "pass manager: out of memory");
        }
    }
    *out = pm;
    return KILN_OK;
}

void kiln__passmgr_destroy(kiln_passmgr *pm)
{
    if (!pm)
        return;
    if (pm->instr.time_passes && pm->nrecs)
        kiln__passmgr_print_timing(pm, pm->log);
    for (uint32_t i = 0; i < pm->nrecs; i++) {
        kiln_pass_record *r = pm->recs[i];
        destroy_instance(r);
        kiln__free(r->stage);
        kiln__free(r);
    }
    kiln__free(pm->recs);
    for (uint32_t i = 0; i < pm->ninstruments; i++) {
        const kiln_component *c = pm->instruments[i].comp;
        if (pm->instruments[i].inst && c->d.instrument.destroy) {
            kiln_activity a = KILN_ACTIVITY(kiln__comp_plugin(c), c->name, "instrument", NULL, 0);
            kiln_activity *prev = kiln__activity_enter(&a);
            c->d.instrument.destroy(pm->instruments[i].inst);
            kiln__activity_leave(prev);
        }
    }
    kiln__free(pm->instruments);
    if (pm->md)
        pcre2_match_data_free(pm->md);
    if (pm->print_re)
        pcre2_code_free(pm->print_re);
    kiln__passctx_fini(&pm->pc);
    pthread_mutex_destroy(&pm->lock);
    kiln__free(pm);
}

void kiln__passmgr_set_fusion_runner(kiln_passmgr *pm, kiln_fusion_runner fn, void *user)
{
    pm->fusion = fn;
    pm->fusion_user = user;
}

uint32_t kiln__passmgr_record_count(const kiln_passmgr *pm) { return pm ? pm->nrecs : 0; }

const kiln_pass_record *kiln__passmgr_record(const kiln_passmgr *pm, uint32_t i)
{
    return (pm && i < pm->nrecs) ? pm->recs[i] : NULL;
}

uint64_t kiln__passmgr_total_ns(const kiln_passmgr *pm) { return pm ? pm->total_ns : 0; }

/* ---- records and instances ---------------------------------------------- */

static kiln_pass_record *new_record(const kiln_pass_inst *pi, const char *stage)
{
    kiln_pass_record *r = kiln__calloc(1, sizeof(*r));
    char *st = kiln__strdup(stage ? stage : "");
    if (!r || !st) {
        kiln__free(r);
        kiln__free(st);
        return NULL;
    }
    r->pi = pi;
    r->name = pi->comp->name;
    r->plugin = kiln__comp_plugin(pi->comp);
    r->stage = st;
    r->nodes_before = r->nodes_after = -1;
    return r;
}

/* The record of @p pi in @p recs, appended when missing; NULL on OOM. */
static kiln_pass_record *find_or_add(kiln_pass_record ***recs, uint32_t *nrecs, uint32_t *cap,
                                     const kiln_pass_inst *pi, const char *stage)
{
    for (uint32_t i = 0; i < *nrecs; i++)
        if ((*recs)[i]->pi == pi)
            return (*recs)[i];
    if (!KILN_GROW(*recs, *cap, *nrecs + 1))
        return NULL;
    kiln_pass_record *r = new_record(pi, stage);
    if (r)
        (*recs)[(*nrecs)++] = r;
    return r;
}

static kiln_pass_record *record_for(run_scope *rs, const kiln_pass_inst *pi, const char *stage,
                                    kiln_error *err)
{
    kiln_pass_record *r =
        rs->task ? find_or_add(&rs->task->recs, &rs->task->nrecs, &rs->task->recs_cap, pi, stage)
                 : find_or_add(&rs->pm->recs, &rs->pm->nrecs, &rs->pm->recs_cap, pi, stage);
    if (!r)
        kiln_errorf(err, KILN_ERR_NOMEM, "pass manager: out of memory");
    return r;
}

/* Create the instance the first time the pass is about to run (in a task:
 * the first time in this task, @p r being the task's record). */
static kiln_status ensure_instance(run_scope *rs, kiln_pass_record *r, kiln_error *err)
{
    if (r->created)
        return KILN_OK;
    (void)rs;
    const kiln_component *c = r->pi->comp;
    kiln_status (*create)(const kiln_options *, kiln_error *, void **) =
        c->kind == KILN_COMP_FUSION ? c->d.fusion.create : c->d.pass.create;
    kiln_status st = KILN_OK;
    if (create) {
        kiln_activity a = KILN_ACTIVITY(kiln__comp_plugin(c), c->name, r->stage, NULL, 0);
        kiln_activity *prev = kiln__activity_enter(&a);
        st = create(r->pi->options, err, &r->inst);
        kiln__activity_leave(prev);
    }
    if (st != KILN_OK) {
        r->inst = NULL;
        kiln_errorf(err, st, "cannot create pass %s (%s)", c->name, kiln_status_str(st));
        return kiln_error_push(err, "pass %s", c->name);
    }
    r->created = true;
    return KILN_OK;
}

/* ---- task shards ---------------------------------------------------------- */

static void destroy_instance(kiln_pass_record *r)
{
    const kiln_component *c = r->pi->comp;
    void (*destroy)(void *) = c->kind == KILN_COMP_FUSION ? c->d.fusion.destroy : c->d.pass.destroy;
    if (r->created && r->inst && destroy) {
        kiln_activity a = KILN_ACTIVITY(kiln__comp_plugin(c), c->name, r->stage, NULL, 0);
        kiln_activity *prev = kiln__activity_enter(&a);
        destroy(r->inst);
        kiln__activity_leave(prev);
    }
    r->inst = NULL;
    r->created = false;
}

static void task_free(pm_task *t)
{
    if (t->log)
        fclose(t->log);
    free(t->buf); /* open_memstream's buffer comes from malloc */
    if (t->md)
        pcre2_match_data_free(t->md);
    for (uint32_t i = 0; i < t->nrecs; i++) {
        destroy_instance(t->recs[i]);
        kiln__free(t->recs[i]->stage);
        kiln__free(t->recs[i]);
    }
    kiln__free(t->recs);
    kiln__passctx_fini(&t->pc);
    kiln__free(t);
}

/* A partitioned graph's stage runs a task per partition, hundreds of
 * thousands on a large graph, and nearly all of them log nothing: the log
 * (8 KiB of open_memstream buffer) is opened on the first write. */
static FILE *task_log_open(void *user)
{
    pm_task *t = user;
    if (!t->log)
        t->log = open_memstream(&t->buf, &t->len);
    return t->log;
}

static void *task_create(void *key)
{
    kiln_passmgr *pm = key;
    pm_task *t = kiln__calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    t->pm = pm;
    if (pm->print_re)
        t->md = pcre2_match_data_create_from_pattern(pm->print_re, NULL);
    kiln__passctx_init(&t->pc, pm->ctx, NULL, NULL);
    t->pc.log_open = task_log_open;
    t->pc.log_user = t;
    /* read only during the parallel run: no shard is merged before its end */
    t->pc.disable_warned = pm->pc.disable_warned;
    if (pm->print_re && !t->md) {
        task_free(t);
        return NULL;
    }
    return t;
}

static void merge_record(kiln_pass_record *d, const kiln_pass_record *s)
{
    if (d->nodes_before < 0)
        d->nodes_before = s->nodes_before;
    if (s->nodes_after >= 0)
        d->nodes_after = s->nodes_after;
    d->runs += s->runs;
    d->calls += s->calls;
    d->wall_ns += s->wall_ns;
    d->nodes_added += s->nodes_added;
    d->nodes_removed += s->nodes_removed;
    d->changed += s->changed;
    d->skipped += s->skipped;
    d->perf.calls += s->perf.calls;
    d->perf.wall_ns += s->perf.wall_ns;
}

/* The end of the parallel run, task by task in index order (calling thread). */
static void task_finish(void *key, void *obj, uint32_t index, bool keep)
{
    (void)index;
    kiln_passmgr *pm = key;
    pm_task *t = obj;
    if (keep) {
        if (t->log)
            fflush(t->log);
        size_t cut_off = t->len, cut_len = 0;
        if (t->warned) {
            if (pm->pc.disable_warned) {
                cut_off = t->warn_off; /* printed by an earlier task already */
                cut_len = t->warn_len;
            }
            pm->pc.disable_warned = true;
        }
        if (cut_off > 0)
            fwrite(t->buf, 1, cut_off, pm->log);
        if (t->len > cut_off + cut_len)
            fwrite(t->buf + cut_off + cut_len, 1, t->len - cut_off - cut_len, pm->log);
        fflush(pm->log);
        for (uint32_t i = 0; i < t->nrecs; i++) {
            const kiln_pass_record *s = t->recs[i];
            kiln_pass_record *d =
                find_or_add(&pm->recs, &pm->nrecs, &pm->recs_cap, s->pi, s->stage);
            if (!d) {
                pm->pc.oom = true;
                continue;
            }
            merge_record(d, s);
        }
        pm->total_ns += t->total_ns;
        if (!kiln__passctx_merge(&pm->pc, &t->pc))
            pm->pc.oom = true;
    }
    task_free(t);
}

/* The running task's shard of @p pm (NULL outside tasks or on OOM). */
static pm_task *task_shard(kiln_passmgr *pm)
{
    return kiln__task_local(pm, task_create, task_finish);
}

kiln_pass_ctx *kiln__passmgr_ctx(kiln_passmgr *pm)
{
    if (kiln__task_current(NULL)) {
        pm_task *t = task_shard(pm);
        return t ? &t->pc : NULL;
    }
    return &pm->pc;
}

/* ge.disableOptimizations through the scope's pass context; a task remembers
 * where its once-per-context warning sits in its log so the merge keeps only
 * the first one. */
static bool pass_disabled(run_scope *rs, const char *name)
{
    pm_task *t = rs->task;
    if (!t || t->pc.disable_warned)
        return kiln__pass_disabled(rs->pc, name);
    if (t->log)
        fflush(t->log);
    size_t off = t->len;
    bool d = kiln__pass_disabled(rs->pc, name);
    if (t->log)
        fflush(t->log);
    if (t->pc.disable_warned) {
        t->warned = true;
        t->warn_off = off;
        t->warn_len = t->len - off;
    }
    return d;
}

static void instruments_init(kiln_passmgr *pm)
{
    if (pm->instruments_ready)
        return;
    pm->instruments_ready = true;
    uint32_t n = kiln_registry_count(pm->ctx), cap = 0;
    for (uint32_t i = 0; i < n; i++) {
        const kiln_component *c = kiln_registry_at(pm->ctx, i);
        if (!c || c->kind != KILN_COMP_INSTRUMENT)
            continue;
        void *inst = NULL;
        if (c->d.instrument.create) {
            kiln_error e;
            kiln_error_clear(&e);
            kiln_activity a = KILN_ACTIVITY(kiln__comp_plugin(c), c->name, "instrument", NULL, 0);
            kiln_activity *prev = kiln__activity_enter(&a);
            kiln_status st = c->d.instrument.create(NULL, &e, &inst);
            kiln__activity_leave(prev);
            if (st != KILN_OK) {
                if (pm->ctx->verbosity >= -1) /* -q: errors only */
                    fprintf(pm->log, "kiln: warning: instrument %s: create failed: %s\n", c->name,
                            e.msg[0] ? e.msg : kiln_status_str(st));
                continue;
            }
        }
        if (!KILN_GROW(pm->instruments, cap, pm->ninstruments + 1)) {
            if (inst && c->d.instrument.destroy)
                c->d.instrument.destroy(inst);
            continue;
        }
        pm->instruments[pm->ninstruments].comp = c;
        pm->instruments[pm->ninstruments].inst = inst;
        pm->ninstruments++;
    }
}

typedef enum { HOOK_BEFORE, HOOK_AFTER, HOOK_FAILED } hook_kind;

static void instr_hook(kiln_passmgr *pm, hook_kind h, const char *stage, const char *pass,
                       const kiln_graph *g, kiln_pass_result res)
{
    for (uint32_t k = 0; k < pm->ninstruments; k++) {
        uint32_t i = h == HOOK_BEFORE ? k : pm->ninstruments - 1 - k;
        const kiln_component *c = pm->instruments[i].comp;
        const kiln_instrument_desc *d = &c->d.instrument;
        kiln_activity a = KILN_ACTIVITY(kiln__comp_plugin(c), c->name, stage, g, 0);
        kiln_activity *prev = kiln__activity_enter(&a);
        if (h == HOOK_BEFORE && d->before_pass)
            d->before_pass(pm->instruments[i].inst, stage, pass, g);
        else if (h == HOOK_AFTER && d->after_pass)
            d->after_pass(pm->instruments[i].inst, stage, pass, g, res);
        else if (h == HOOK_FAILED && d->after_pass_failed)
            d->after_pass_failed(pm->instruments[i].inst, stage, pass, g);
        kiln__activity_leave(prev);
    }
}

void kiln__passmgr_stage_hook(kiln_passmgr *pm, const char *stage, const kiln_graph *g,
                              bool after)
{
    instruments_init(pm);
    for (uint32_t k = 0; k < pm->ninstruments; k++) {
        uint32_t i = after ? pm->ninstruments - 1 - k : k;
        const kiln_component *c = pm->instruments[i].comp;
        const kiln_instrument_desc *d = &c->d.instrument;
        void (*fn)(void *, const char *, const kiln_graph *) =
            after ? d->after_stage : d->before_stage;
        if (!fn)
            continue;
        kiln_activity a = KILN_ACTIVITY(kiln__comp_plugin(c), c->name, stage, g, 0);
        kiln_activity *prev = kiln__activity_enter(&a);
        fn(pm->instruments[i].inst, stage, g);
        kiln__activity_leave(prev);
    }
}

static bool is_required(const kiln_pass_inst *pi)
{
    uint32_t flags =
        pi->comp->kind == KILN_COMP_FUSION ? pi->comp->d.fusion.flags : pi->comp->d.pass.flags;
    return pi->required || (flags & KILN_PASS_REQUIRED);
}

/* LLVM OptBisect: number optional executions; false = skip this one. */
static bool bisect_allows(run_scope *rs, const kiln_pass_inst *pi, const kiln_graph *g)
{
    kiln_passmgr *pm = rs->pm;
    if (pm->instr.bisect_limit < 0 || is_required(pi))
        return true;
    int64_t k = ++pm->bisect_count;
    bool run = k <= pm->instr.bisect_limit;
    fprintf(scope_log(rs), "BISECT: %srunning pass (%lld) %s on %s\n", run ? "" : "NOT ", (long long)k,
            pi->comp->name, kiln_graph_name(g));
    return run;
}

int64_t kiln__passmgr_bisect_count(const kiln_passmgr *pm)
{
    return pm->bisect_count;
}

void kiln__passmgr_set_bisect_count(kiln_passmgr *pm, int64_t count)
{
    pm->bisect_count = count;
}

/* ---- after each execution: OOM, verify, dumps ---------------------------- */

static void sanitize(char *dst, size_t size, const char *src)
{
    size_t i = 0;
    for (; src && *src && i + 1 < size; src++)
        dst[i++] = (isalnum((unsigned char)*src) || *src == '.' || *src == '_' || *src == '-')
                       ? *src
                       : '_';
    dst[i] = 0;
}

static bool print_matches(run_scope *rs, const char *name)
{
    if (!rs->pm->print_re)
        return false;
    return pcre2_match(rs->pm->print_re, (PCRE2_SPTR)name, strlen(name), 0, 0, rs->md, NULL) >= 0;
}

static kiln_status dump_graph(run_scope *rs, const char *stage, const char *pass,
                              const kiln_graph *root, kiln_error *err)
{
    kiln_passmgr *pm = rs->pm;
    if (!pm->instr.dump_dir) {
        FILE *log = scope_log(rs);
        fprintf(log, "*** IR Dump After %s (stage %s) ***\n", pass, stage);
        return kiln_graph_write_json(root, log, err);
    }
    unsigned seq = ++pm->dump_seq; /* in a task: its turn (kiln__passmgr_run_stage) */
    char s[96], p[160], path[4096];
    sanitize(s, sizeof(s), stage);
    sanitize(p, sizeof(p), pass);
    snprintf(path, sizeof(path), "%s/%03u-%s-%s.json", pm->instr.dump_dir, seq, s, p);
    kiln_status st = kiln_graph_write_json_file(root, path, err);
    if (st == KILN_OK) {
        snprintf(path, sizeof(path), "%s/%03u-%s-%s.dot", pm->instr.dump_dir, seq, s, p);
        st = kiln_graph_write_dot_file(root, path, err);
    }
    return st;
}

/*
 * Checks after one execution of @p names (one pass, or a node-pass group
 * joined with '+').  @p dump_name: the pass to name the dump after, NULL =
 * no dump.
 */
static kiln_status after_execution(run_scope *rs, const char *stage, const char *names,
                                   const char *dump_name, kiln_graph *root, kiln_error *err)
{
    kiln_passmgr *pm = rs->pm;
    if (kiln_graph_oom(root) || rs->pc->oom)
        return kiln_errorf(err, KILN_ERR_NOMEM, "pass %s ran out of memory editing graph %s", names,
                           kiln_graph_name(root));
    if (pm->instr.verify_each) {
        kiln_error ve;
        kiln_error_clear(&ve);
        if (kiln_graph_verify(root, &ve) != KILN_OK) {
            char buf[KILN_ERROR_TEXT_SIZE];
            kiln_error_format(&ve, buf, sizeof(buf));
            return kiln_errorf(err, KILN_ERR_VERIFY, "pass %s broke the IR: %s", names, buf);
        }
        if (kiln__graph_verify_plan(root, &ve) != KILN_OK) {
            char buf[KILN_ERROR_TEXT_SIZE];
            kiln_error_format(&ve, buf, sizeof(buf));
            return kiln_errorf(err, KILN_ERR_VERIFY, "pass %s broke the memory plan: %s", names,
                               buf);
        }
    }
    if (dump_name) {
        kiln_status st = dump_graph(rs, stage, dump_name, root, err);
        if (st != KILN_OK)
            return kiln_error_push(err, "print-after %s", dump_name);
    }
    return KILN_OK;
}

static void record_counts(kiln_pass_record *r, int64_t before, int64_t after, bool changed)
{
    if (r->nodes_before < 0)
        r->nodes_before = before;
    r->nodes_after = after;
    if (after > before)
        r->nodes_added += after - before;
    else
        r->nodes_removed += before - after;
    r->runs++;
    if (changed)
        r->changed++;
}

/* ---- executions ---------------------------------------------------------- */

/* One graph pass (or fusion pass): root, then every subgraph. */
static kiln_status run_one(run_scope *rs, const char *stage, kiln_pass_record *r,
                           kiln_graph *root, kiln_error *err)
{
    kiln_passmgr *pm = rs->pm;
    kiln_pass_ctx *pc = rs->pc;
    const kiln_pass_inst *pi = r->pi;
    const kiln_component *c = pi->comp;
    bool fusion = c->kind == KILN_COMP_FUSION;
    uint32_t flags = fusion ? c->d.fusion.flags : c->d.pass.flags;
    kiln_status st = ensure_instance(rs, r, err);
    if (st != KILN_OK)
        return st;
    int64_t before = (int64_t)kiln__graph_live_total(root);
    uint64_t mut0 = kiln_graph_mutation(root);
    bool changed = false;
    instr_hook(pm, HOOK_BEFORE, stage, c->name, root, KILN_PASS_NOT_CHANGED);
    /* GE GetAllSubgraphs is a snapshot: subgraphs a pass adds are not visited. */
    uint32_t nsub = (flags & KILN_PASS_NO_SUBGRAPHS) ? 0 : kiln_graph_all_subgraph_count(root);
    for (uint32_t i = 0; i <= nsub; i++) {
        kiln_graph *g = root;
        if (i > 0) {
            if (i - 1 >= kiln_graph_all_subgraph_count(root))
                break;
            g = kiln_graph_all_subgraph(root, i - 1);
        }
        kiln_activity a = KILN_ACTIVITY(kiln__comp_plugin(c), c->name, stage, g, 0);
        kiln_activity *prev = kiln__activity_enter(&a);
        const kiln_component *saved = pc->comp;
        pc->comp = c;
        uint64_t t0 = kiln__pass_clock_ns(), smut = g->struct_mutation;
        kiln_pass_result res = KILN_PASS_FAILED;
        if (fusion) {
            bool ch = false;
            if (!pm->fusion)
                st = kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                                 "fusion pass %s: no fusion executor is installed",
                                 c->name);
            else
                st = pm->fusion(pm->fusion_user, pc, c, r->inst, g, &ch, err);
            res =
                st == KILN_OK ? (ch ? KILN_PASS_CHANGED : KILN_PASS_NOT_CHANGED) : KILN_PASS_FAILED;
        } else {
            res = c->d.pass.run_graph(r->inst, pc, g);
        }
        uint64_t dt = kiln__pass_clock_ns() - t0;
        pc->comp = saved;
        kiln__activity_leave(prev);
        r->calls++;
        r->wall_ns += dt;
        *rs->total_ns += dt;
        /* A pass that declares it keeps the structure (so cached topological
         * order and reachability survive it) is held to that. */
        if ((res == KILN_PASS_CHANGED || res == KILN_PASS_NOT_CHANGED) &&
            (flags & KILN_PASS_PRESERVES_CFG) && g->struct_mutation != smut) {
            st = kiln_errorf(err, KILN_ERR_PASS,
                             "pass %s declares KILN_PASS_PRESERVES_CFG but changed the nodes or "
                             "edges of graph %s",
                             c->name, kiln_graph_name(g));
            res = KILN_PASS_FAILED;
        }
        if (res == KILN_PASS_CHANGED)
            changed = true;
        else if (res != KILN_PASS_NOT_CHANGED) {
            if (st == KILN_OK)
                st = kiln_errorf(err, KILN_ERR_PASS, "pass %s failed on graph %s", c->name,
                                 kiln_graph_name(g));
            else
                kiln_error_push(err, "graph %s", kiln_graph_name(g));
            instr_hook(pm, HOOK_FAILED, stage, c->name, root, KILN_PASS_FAILED);
            return kiln_error_push(err, "pass %s", c->name);
        }
        if (kiln_graph_oom(root) || pc->oom)
            break;
    }
    changed = changed || kiln_graph_mutation(root) != mut0;
    int64_t after = (int64_t)kiln__graph_live_total(root);
    record_counts(r, before, after, changed);
    st =
        after_execution(rs, stage, c->name, print_matches(rs, c->name) ? c->name : NULL, root, err);
    if (st != KILN_OK) {
        instr_hook(pm, HOOK_FAILED, stage, c->name, root, KILN_PASS_FAILED);
        return kiln_error_push(err, "pass %s", c->name);
    }
    instr_hook(pm, HOOK_AFTER, stage, c->name, root,
               changed ? KILN_PASS_CHANGED : KILN_PASS_NOT_CHANGED);
    return KILN_OK;
}

/* One GEPass group: records @p recs (already filtered, instances created). */
static kiln_status run_group(run_scope *rs, const char *stage, kiln_pass_record **recs,
                             uint32_t n, kiln_graph *root, kiln_error *err)
{
    kiln_passmgr *pm = rs->pm;
    kiln_gepass_item *items = kiln__calloc(n, sizeof(*items));
    size_t nlen = 1;
    for (uint32_t i = 0; i < n; i++)
        nlen += strlen(recs[i]->name) + 1;
    char *names = kiln__malloc(nlen);
    if (!items || !names) {
        kiln__free(items);
        kiln__free(names);
        return kiln_errorf(err, KILN_ERR_NOMEM, "pass manager: out of memory");
    }
    names[0] = 0;
    const char *dump = NULL;
    for (uint32_t i = 0; i < n; i++) {
        items[i].comp = recs[i]->pi->comp;
        items[i].inst = recs[i]->inst;
        items[i].perf = &recs[i]->perf;
        if (i)
            strcat(names, "+");
        strcat(names, recs[i]->name);
        if (!dump && print_matches(rs, recs[i]->name))
            dump = recs[i]->name;
        instr_hook(pm, HOOK_BEFORE, stage, recs[i]->name, root, KILN_PASS_NOT_CHANGED);
    }
    int64_t before = (int64_t)kiln__graph_live_total(root);
    uint64_t mut0 = kiln_graph_mutation(root), ns0 = 0, ns1 = 0;
    for (uint32_t i = 0; i < n; i++)
        ns0 += recs[i]->perf.wall_ns;
    uint32_t frames0 = err ? err->frame_count : 0;
    kiln_status st = kiln__gepass_run(rs->pc, root, items, n, err);
    for (uint32_t i = 0; i < n; i++) {
        ns1 += recs[i]->perf.wall_ns;
        recs[i]->calls = recs[i]->perf.calls;
        recs[i]->wall_ns = recs[i]->perf.wall_ns;
    }
    *rs->total_ns += ns1 - ns0;
    if (st == KILN_OK) {
        bool changed = kiln_graph_mutation(root) != mut0;
        int64_t after = (int64_t)kiln__graph_live_total(root);
        for (uint32_t i = 0; i < n; i++)
            record_counts(recs[i], before, after, changed);
        st = after_execution(rs, stage, names, dump, root, err);
        if (st == KILN_OK)
            for (uint32_t k = n; k-- > 0;)
                instr_hook(pm, HOOK_AFTER, stage, recs[k]->name, root,
                           changed ? KILN_PASS_CHANGED : KILN_PASS_NOT_CHANGED);
    }
    if (st != KILN_OK) {
        /* GEPass names the failing pass itself; other failures get the group. */
        if (err && err->frame_count == frames0)
            kiln_error_push(err, "pass %s", names);
        for (uint32_t k = n; k-- > 0;)
            instr_hook(pm, HOOK_FAILED, stage, recs[k]->name, root, KILN_PASS_FAILED);
    }
    kiln__free(items);
    kiln__free(names);
    return st;
}

static bool is_node_pass(const kiln_pass_inst *pi)
{
    return pi->comp->kind == KILN_COMP_PASS && pi->comp->d.pass.kind == KILN_PASS_KIND_NODE;
}

/* The stage loop proper, in scope @p rs. */
static kiln_status run_stage(run_scope *rs, const char *stage, const kiln_pass_inst *passes,
                             uint32_t count, kiln_graph *root, kiln_error *err)
{
    kiln_pass_ctx *pc = rs->pc;
    pc->stage = stage;
    pc->err = err;
    kiln_pass_record **group = count ? kiln__calloc(count, sizeof(*group)) : NULL;
    kiln_status st = KILN_OK;
    if (count && !group) {
        st = kiln_errorf(err, KILN_ERR_NOMEM, "pass manager: out of memory");
        goto fail;
    }
    for (uint32_t i = 0; i < count;) {
        const kiln_pass_inst *pi = &passes[i];
        if (!pi->comp) {
            st = kiln_errorf(err, KILN_ERR_INTERNAL, "pass manager: entry %u has no component", i);
            goto fail;
        }
        if (!is_node_pass(pi)) {
            i++;
            if (!pi->enabled)
                continue;
            if (pi->comp->kind != KILN_COMP_FUSION && pass_disabled(rs, pi->comp->name))
                continue;
            kiln_pass_record *r = record_for(rs, pi, stage, err);
            if (!r) {
                st = KILN_ERR_NOMEM;
                goto fail;
            }
            if (!bisect_allows(rs, pi, root)) {
                r->skipped++;
                continue;
            }
            st = run_one(rs, stage, r, root, err);
            if (st != KILN_OK)
                goto fail;
            continue;
        }
        uint32_t n = 0;
        for (; i < count && passes[i].comp && is_node_pass(&passes[i]); i++) {
            const kiln_pass_inst *q = &passes[i];
            if (!q->enabled || pass_disabled(rs, q->comp->name))
                continue;
            kiln_pass_record *r = record_for(rs, q, stage, err);
            if (!r) {
                st = KILN_ERR_NOMEM;
                goto fail;
            }
            if (!bisect_allows(rs, q, root)) {
                r->skipped++;
                continue;
            }
            st = ensure_instance(rs, r, err);
            if (st != KILN_OK)
                goto fail;
            group[n++] = r;
        }
        if (n) {
            st = run_group(rs, stage, group, n, root, err);
            if (st != KILN_OK)
                goto fail;
        }
    }
fail:
    if (st != KILN_OK)
        kiln_error_push(err, "stage %s", stage);
    kiln__free(group);
    pc->stage = NULL;
    pc->err = NULL;
    return st;
}

kiln_status kiln__passmgr_run_stage(kiln_passmgr *pm, const char *stage,
                                    const kiln_pass_inst *passes, uint32_t count, kiln_graph *root,
                                    kiln_error *err)
{
    if (!pm || !root || (count && !passes))
        return kiln_errorf(err, KILN_ERR_INTERNAL, "pass manager: no graph or pass list");
    stage = stage ? stage : "";
    run_scope rs = {.pm = pm, .pc = &pm->pc, .log = pm->log, .md = pm->md,
                    .total_ns = &pm->total_ns};
    if (!kiln__task_current(NULL)) {
        instruments_init(pm);
        return run_stage(&rs, stage, passes, count, root, err);
    }
    /* Inside a kiln__parallel_run task. */
    pthread_mutex_lock(&pm->lock);
    instruments_init(pm);
    pthread_mutex_unlock(&pm->lock);
    pm_task *t = task_shard(pm);
    if (!t)
        return kiln_errorf(err, KILN_ERR_NOMEM, "pass manager: out of memory (stage %s)", stage);
    /* Bisect numbers, --dump-dir file numbers and instrument callbacks follow
     * one global order: such runs take their turn, in task-index order. */
    if ((pm->instr.bisect_limit >= 0 || pm->ninstruments || (pm->print_re && pm->instr.dump_dir)) &&
        !kiln__task_wait_turn())
        return kiln_errorf(err, KILN_ERR_INTERNAL,
                           "stage %s not run: a task before this one failed", stage);
    rs.task = t;
    rs.pc = &t->pc;
    rs.log = NULL; /* scope_log(): opened on first use */
    rs.md = t->md;
    rs.total_ns = &t->total_ns;
    return run_stage(&rs, stage, passes, count, root, err);
}

/* ---- --time-passes --------------------------------------------------------- */

void kiln__passmgr_print_timing(const kiln_passmgr *pm, FILE *out)
{
    if (!pm)
        return;
    if (!out)
        out = pm->log;
    double total = (double)pm->total_ns / 1e6;
    fprintf(out, "===------------------------------------------------------------------===\n");
    fprintf(out, "                    kiln pass execution timing report\n");
    fprintf(out, "===------------------------------------------------------------------===\n");
    fprintf(out, "  Total wall time: %.3f ms\n\n", total);
    fprintf(out, "  %-36s %-24s %8s %10s %6s %12s %12s\n", "pass", "stage", "calls", "wall ms", "%",
            "nodes before", "nodes after");
    uint64_t calls = 0;
    for (uint32_t i = 0; i < pm->nrecs; i++) {
        const kiln_pass_record *r = pm->recs[i];
        if (!r->runs)
            continue;
        double ms = (double)r->wall_ns / 1e6;
        double pct = pm->total_ns ? 100.0 * (double)r->wall_ns / (double)pm->total_ns : 0.0;
        fprintf(out, "  %-36s %-24s %8llu %10.3f %5.1f%% %12lld %12lld\n", r->name, r->stage,
                (unsigned long long)r->calls, ms, pct, (long long)r->nodes_before,
                (long long)r->nodes_after);
        calls += r->calls;
    }
    fprintf(out, "  %-36s %-24s %8llu %10.3f %5.1f%%\n", "total", "", (unsigned long long)calls,
            total, pm->total_ns ? 100.0 : 0.0);
    fflush(out);
}

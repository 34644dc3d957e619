/*
 * stage.c - the stage driver.
 *
 *   prepare -> optimize_original -> partition -> [before_ub_match]
 *   optimize_subgraph -> [after_ub_match] -> optimize_after_subgraph ->
 *   mem_conflict -> build -> [after_build] -> lint
 *
 * At each build step reached, every tuner (manifest "tuners" plus --tuner)
 * gets on_build_step(step, graph) and may edit the graph.  When the step is
 * the requested stop step (tuning mode) the driver returns KILN_PAUSED with
 * the first stage still to run; the CLI serialises the graph and that stage
 * (kiln_paused_state_write) and `kiln compile --resume` continues from it.
 * Because the paused state is the graph in GRAPH_FORMAT.md (which round-trips
 * byte for byte) plus the stage index, a resumed build produces exactly what
 * an uninterrupted one does; tests/e2e checks that.
 */
#include "stage.h"
#include "passmgr.h"
#include "passctx.h"
#include "crash.h"
#include "fileio.h"
#include "graph_json.h"
#include "graph_int.h"
#include <jansson.h>

static const struct {
    const char *step;
    kiln_stage_id stage;
    bool after;
} steps[] = {
    {KILN_STEP_BEFORE_UB_MATCH, KILN_STAGE_OPTIMIZE_SUBGRAPH, false},
    {KILN_STEP_AFTER_UB_MATCH, KILN_STAGE_OPTIMIZE_SUBGRAPH, true},
    {KILN_STEP_AFTER_BUILD, KILN_STAGE_BUILD, true},
};

bool kiln_build_step_lookup(const char *step, kiln_stage_id *stage, bool *after)
{
    for (unsigned i = 0; i < KILN_ARRAY_LEN(steps); i++)
        if (strcmp(steps[i].step, step) == 0) {
            *stage = steps[i].stage;
            *after = steps[i].after;
            return true;
        }
    return false;
}

static kiln_status fire_tuner(kiln_ctx *ctx, kiln_passmgr *pm, const char *name,
                              const char *step, kiln_graph *root, kiln_error *err)
{
    const kiln_component *t = kiln_registry_find(ctx, KILN_COMP_TUNER, name);
    if (!t)
        return kiln_errorf(err, KILN_ERR_NOT_FOUND, "tuner %s: no loaded plugin provides it",
                           name);
    void *inst = NULL;
    kiln_status st = KILN_OK;
    if (t->d.tuner.create && (st = t->d.tuner.create(NULL, err, &inst)) != KILN_OK)
        return kiln_error_push(err, "tuner %s", name);
    kiln_activity act = {kiln__comp_plugin(t), name, step, root, 0};
    kiln_activity *prev = kiln__activity_enter(&act);
    st = t->d.tuner.on_build_step(inst, kiln__passmgr_ctx(pm), step, root);
    kiln__activity_leave(prev);
    if (t->d.tuner.destroy)
        t->d.tuner.destroy(inst);
    if (st != KILN_OK) {
        kiln_errorf(err, st, "failed at build step %s", step);
        return kiln_error_push(err, "tuner %s", name);
    }
    return KILN_OK;
}

/* Fire the tuners for @p step; returns KILN_PAUSED when it is the stop step. */
static kiln_status reach_step(kiln_ctx *ctx, kiln_pipeline *p, kiln_passmgr *pm,
                              kiln_stage_run *run, const char *step, kiln_stage_id next,
                              kiln_graph *root, kiln_error *err)
{
    kiln_status st;
    for (uint32_t i = 0; i < p->ntuners; i++)
        if ((st = fire_tuner(ctx, pm, p->tuners[i], step, root, err)) != KILN_OK)
            return st;
    if (run->tuner && (st = fire_tuner(ctx, pm, run->tuner, step, root, err)) != KILN_OK)
        return st;
    bool stop = run->stop_step && strcmp(run->stop_step, step) == 0;
    for (uint32_t i = 0; i < p->nbreakpoints && !run->stop_step; i++)
        stop |= strcmp(p->breakpoints[i], step) == 0;
    if (stop) {
        run->paused_step = step;
        run->next = next;
        return KILN_PAUSED;
    }
    return KILN_OK;
}

kiln_status kiln_stage_run_pipeline(kiln_ctx *ctx, kiln_pipeline *p, kiln_graph *root,
                                    kiln_stage_run *run, kiln_error *err)
{
    kiln_passmgr *pm = NULL;
    kiln_status st = kiln__passmgr_create(ctx, &p->instr, &pm, err);
    if (st != KILN_OK)
        return st;
    run->report = pm;
    run->paused_step = NULL;
    for (kiln_stage_id s = run->first; s < KILN_STAGE_COUNT; s++) {
        for (unsigned i = 0; i < KILN_ARRAY_LEN(steps); i++)
            /* s == run->first: a resumed build already passed this before-step. */
            if (steps[i].stage == s && !steps[i].after && (s != run->first || s == 0) &&
                (st = reach_step(ctx, p, pm, run, steps[i].step, s, root, err)) != KILN_OK)
                return st;
        const kiln_stage *stg = &p->stages[s];
        kiln__passmgr_stage_hook(pm, kiln_stage_name(s), root, false);
        if (stg->npasses &&
            (st = kiln__passmgr_run_stage(pm, kiln_stage_name(s), stg->passes, stg->npasses, root,
                                          err)) != KILN_OK)
            return st;
        kiln__passmgr_stage_hook(pm, kiln_stage_name(s), root, true);
        for (unsigned i = 0; i < KILN_ARRAY_LEN(steps); i++)
            if (steps[i].stage == s && steps[i].after &&
                (st = reach_step(ctx, p, pm, run, steps[i].step, (kiln_stage_id)(s + 1), root,
                                 err)) != KILN_OK)
                return st;
    }
    /* The --time-passes table is printed when the manager is destroyed; the
     * pass counters (kiln_pass_stat_add) are printed under -v or --stats. */
    if (ctx->verbosity > 0 || p->instr.stats) {
        uint32_t ns = 0;
        const kiln_pass_stat *ps = kiln__passctx_stats(kiln__passmgr_ctx(pm), &ns);
        for (uint32_t i = 0; i < ns; i++)
            fprintf(p->instr.log ? p->instr.log : stderr, "kiln: stat: %s: %s: %s = %lld\n",
                    ps[i].stage, ps[i].pass, ps[i].counter, (long long)ps[i].value);
    }
    if (ctx->verbosity > 0) {
        uint32_t n = 0;
        const kiln_explanation *ex = kiln__passctx_explanations(kiln__passmgr_ctx(pm), &n);
        for (uint32_t i = 0; i < n; i++)
            fprintf(p->instr.log ? p->instr.log : stderr, "kiln: %s: %s: %s: %s\n", ex[i].stage,
                    ex[i].pass, ex[i].node, ex[i].text);
    }
    return KILN_OK;
}

void kiln_stage_run_fini(kiln_stage_run *run)
{
    if (run->report)
        kiln__passmgr_destroy(run->report);
    run->report = NULL;
}

/* ---- report ------------------------------------------------------------- */

static kiln_status write_report(FILE *f, void *ud, kiln_error *err)
{
    json_t *doc = ud;
    if (json_dumpf(doc, f, JSON_INDENT(2) | JSON_PRESERVE_ORDER) != 0)
        return kiln_errorf(err, KILN_ERR_IO, "cannot write report");
    fputc('\n', f);
    return KILN_OK;
}

kiln_status kiln_stage_write_report(const kiln_stage_run *run, const kiln_graph *root,
                                    const char *path, kiln_error *err)
{
    kiln_passmgr *pm = run->report;
    json_t *doc = json_object(), *passes = json_array(), *expl = json_array();
    uint64_t live = kiln__graph_live_total(root);
    for (uint32_t i = 0; pm && i < kiln__passmgr_record_count(pm); i++) {
        const kiln_pass_record *r = kiln__passmgr_record(pm, i);
        json_t *o = json_object();
        json_object_set_new(o, "pass", json_string(r->name));
        json_object_set_new(o, "plugin", json_string(r->plugin ? r->plugin : ""));
        json_object_set_new(o, "stage", json_string(r->stage ? r->stage : ""));
        json_object_set_new(o, "runs", json_integer((json_int_t)r->runs));
        json_object_set_new(o, "calls", json_integer((json_int_t)r->calls));
        json_object_set_new(o, "wall_ms", json_real((double)r->wall_ns / 1e6));
        json_object_set_new(o, "nodes_added", json_integer(r->nodes_added));
        json_object_set_new(o, "nodes_removed", json_integer(r->nodes_removed));
        json_object_set_new(o, "changed", json_integer(r->changed));
        json_object_set_new(o, "skipped", json_integer(r->skipped));
        /* Counters the pass kept with kiln_pass_stat_add. */
        json_t *stats = json_object();
        uint32_t ns = 0;
        const kiln_pass_stat *ps = kiln__passctx_stats(kiln__passmgr_ctx(pm), &ns);
        for (uint32_t k = 0; k < ns; k++)
            if (strcmp(ps[k].pass, r->name) == 0 && r->stage && strcmp(ps[k].stage, r->stage) == 0)
                json_object_set_new(stats, ps[k].counter, json_integer(ps[k].value));
        json_object_set_new(o, "stats", stats);
        json_array_append_new(passes, o);
    }
    uint32_t n = 0;
    const kiln_explanation *ex = pm ? kiln__passctx_explanations(kiln__passmgr_ctx(pm), &n) : NULL;
    for (uint32_t i = 0; i < n; i++) {
        json_t *o = json_object();
        json_object_set_new(o, "stage", json_string(ex[i].stage));
        json_object_set_new(o, "pass", json_string(ex[i].pass));
        json_object_set_new(o, "graph", json_string(ex[i].graph));
        json_object_set_new(o, "node", json_string(ex[i].node));
        json_object_set_new(o, "why", json_string(ex[i].text));
        json_array_append_new(expl, o);
    }
    json_object_set_new(doc, "kiln_report", json_integer(1));
    json_object_set_new(doc, "graph", json_string(kiln_graph_name(root)));
    json_object_set_new(doc, "paused_at", run->paused_step ? json_string(run->paused_step)
                                                           : json_null());
    json_object_set_new(doc, "total_pass_ms",
                        json_real(pm ? (double)kiln__passmgr_total_ns(pm) / 1e6 : 0.0));
    json_object_set_new(doc, "nodes", json_integer(live));
    json_object_set_new(doc, "passes", passes);
    json_object_set_new(doc, "explanations", expl);
    /* no memory planner component exists yet: null says none ran (docs/pipeline.md) */
    json_object_set_new(doc, "memory_plan", json_null());
    kiln_status st = kiln_file_write_atomic(path, write_report, doc, err);
    json_decref(doc);
    return st;
}

/* ---- paused state --------------------------------------------------------- */

typedef struct state_ud {
    const kiln_graph *root;
    const char *step, *manifest;
    kiln_stage_id next;
    const kiln_ctx *ctx;
} state_ud;

static kiln_status write_state(FILE *f, void *ud, kiln_error *err)
{
    const state_ud *s = ud;
    char *graph = kiln_graph_to_json_string(s->root, err);
    if (!graph)
        return kiln_error_code(err) ? kiln_error_code(err) : KILN_ERR_NOMEM;
    json_t *doc = json_object(), *opts = json_object();
    json_object_set_new(doc, "kiln_paused_state", json_integer(1));
    json_object_set_new(doc, "step", json_string(s->step));
    json_object_set_new(doc, "next_stage",
                        json_string(kiln_stage_name(s->next < KILN_STAGE_COUNT
                                                        ? s->next
                                                        : KILN_STAGE_COUNT - 1)));
    json_object_set_new(doc, "finished", json_boolean(s->next >= KILN_STAGE_COUNT));
    json_object_set_new(doc, "manifest", json_string(s->manifest ? s->manifest : ""));
    for (uint32_t i = 0; i < s->ctx->nsession_options; i++)
        json_object_set_new(opts, s->ctx->session_options[i].key,
                            json_string(s->ctx->session_options[i].value));
    json_object_set_new(doc, "session_options", opts);
    json_object_set_new(doc, "graph", json_string(graph));
    kiln__free(graph);
    int rc = json_dumpf(doc, f, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
    json_decref(doc);
    return rc == 0 ? KILN_OK : kiln_errorf(err, KILN_ERR_IO, "cannot write paused state");
}

kiln_status kiln_paused_state_write(const char *path, const kiln_graph *root, const char *step,
                                    kiln_stage_id next, const char *manifest, const kiln_ctx *ctx,
                                    kiln_error *err)
{
    state_ud s = {root, step, manifest, next, ctx};
    return kiln_file_write_atomic(path, write_state, &s, err);
}

kiln_status kiln_paused_state_read(kiln_ctx *ctx, const char *path, kiln_graph **root,
                                   kiln_stage_id *next, char **manifest, kiln_error *err)
{
    json_error_t je;
    json_t *doc = json_load_file(path, 0, &je);
    if (!doc)
        return kiln_errorf(err, KILN_ERR_PARSE, "%s:%d:%d: %s", path, je.line, je.column,
                           je.text);
    kiln_status st = KILN_OK;
    const char *stage = json_string_value(json_object_get(doc, "next_stage"));
    const char *graph = json_string_value(json_object_get(doc, "graph"));
    const char *m = json_string_value(json_object_get(doc, "manifest"));
    if (json_integer_value(json_object_get(doc, "kiln_paused_state")) != 1 || !stage || !graph) {
        st = kiln_errorf(err, KILN_ERR_PARSE, "%s: not a kiln paused state (version 1)", path);
        goto done;
    }
    *next = kiln_stage_lookup(stage);
    if (json_is_true(json_object_get(doc, "finished")))
        *next = KILN_STAGE_COUNT;
    else if (*next == KILN_STAGE_COUNT) {
        st = kiln_errorf(err, KILN_ERR_PARSE, "%s: unknown stage '%s'", path, stage);
        goto done;
    }
    const char *key;
    json_t *val;
    json_object_foreach(json_object_get(doc, "session_options"), key, val)
    {
        if (json_is_string(val))
            kiln_ctx_set_option(ctx, key, json_string_value(val));
    }
    if ((st = kiln_graph_read_json_string(ctx, graph, strlen(graph), path, root, err)) != KILN_OK)
        goto done;
    *manifest = kiln__strdup(m ? m : "");
done:
    json_decref(doc);
    return st;
}

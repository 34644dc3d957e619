/*
 * stage.c - the stage driver.
 *
 *   prepare -> optimize_original -> partition -> [before_ub_match]
 *   optimize_subgraph -> [after_ub_match] -> optimize_after_subgraph ->
 *   mem_conflict -> build -> [after_build] -> lint
 *
 * At each build step reached, every tuner (manifest "tuners" plus --tuner)
 * gets on_build_step(step, graph) and may edit the graph; a tuner instance
 * lives for one call, so whatever it wants to pass on goes into the graph.
 * When the step is the requested stop step (tuning mode) or a manifest
 * breakpoint, the driver returns KILN_PAUSED with the first stage still to
 * run, and the CLI writes the paused state (kiln_paused_state_write):
 *
 *   - the graph, as a graph JSON object (GRAPH_FORMAT round-trips byte for
 *     byte), streamed in and out like a graph file;
 *   - everything else that decides the result: the command line's selectors,
 *     pass options, session options, --passes, --tuner and bisect limit; what
 *     the manifest resolved to (pipeline, session options, tuners,
 *     breakpoints, bisect count); the real path and SHA-256 of every manifest
 *     of the extends chain and of every plugin file loaded.
 *
 * `kiln compile --resume` reads it back (refusing other format versions and
 * changed files before it loads anything), replays the same command line
 * over the same manifest, checks that it resolves to what was recorded and
 * runs the remaining stages: the result is the uninterrupted build's, byte
 * for byte (tests/e2e/tuning.sh).  docs/tuning.md documents the format.
 */
#include "stage.h"
#include "partition_graph.h"
#include "passmgr.h"
#include "passctx.h"
#include "fusion_int.h"
#include "crash.h"
#include "fileio.h"
#include "graph_json.h"
#include "json_dump.h"
#include "graph_int.h"
#include "digest.h"
#include "manifest.h"
#include "memgraph.h"
#include "options.h"
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdlib.h>

/* Graphs of this many nodes and more trim the heap after each stage. */
#define KILN_TRIM_NODES 65536u

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

bool kiln_build_step_reachable(const char *step, kiln_stage_id first)
{
    kiln_stage_id stage;
    bool after;
    if (!kiln_build_step_lookup(step, &stage, &after))
        return false;
    /* a run starting at @p first skips the before-step of that stage */
    return stage > first || (stage == first && after);
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
    /* A tuner's options are its schema's defaults (no manifest key sets them yet). */
    kiln_options *opts = kiln__options_create(t->d.tuner.options, t->d.tuner.option_count);
    if (!opts)
        return kiln_errorf(err, KILN_ERR_NOMEM, "tuner %s: out of memory", name);
    if (t->d.tuner.create && (st = t->d.tuner.create(opts, err, &inst)) != KILN_OK) {
        kiln__options_destroy(opts);
        return kiln_error_push(err, "tuner %s", name);
    }
    kiln_activity act = KILN_ACTIVITY(kiln__comp_plugin(t), name, step, root, 0);
    kiln_activity *prev = kiln__activity_enter(&act);
    if (t->d.tuner.create && (st = t->d.tuner.create(NULL, err, &inst)) != KILN_OK) {
        kiln__activity_leave(prev);
        return kiln_error_push(err, "tuner %s", name);
    }
    st = t->d.tuner.on_build_step(inst, kiln__passmgr_ctx(pm), step, root);
    if (t->d.tuner.destroy)
        t->d.tuner.destroy(inst);
    kiln__activity_leave(prev);
    kiln__options_destroy(opts);
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
        run->bisect_count = kiln__passmgr_bisect_count(pm);
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
    kiln__passmgr_set_bisect_count(pm, run->bisect_count);
    for (kiln_stage_id s = run->first; s < KILN_STAGE_COUNT; s++) {
        for (unsigned i = 0; i < KILN_ARRAY_LEN(steps); i++)
            /* s == run->first: a resumed build already passed this before-step. */
            if (steps[i].stage == s && !steps[i].after && (s != run->first || s == 0) &&
                (st = reach_step(ctx, p, pm, run, steps[i].step, s, root, err)) != KILN_OK)
                return st;
        const kiln_stage *stg = &p->stages[s];
        kiln__passmgr_stage_hook(pm, kiln_stage_name(s), root, false);
        bool handled = false;
        /* optimize_subgraph: partition by partition when the graph is partitioned */
        if (s == KILN_STAGE_OPTIMIZE_SUBGRAPH &&
            (st = kiln__optimize_subgraph_stage(ctx, pm, stg, root, &handled, err)) != KILN_OK)
            return kiln_error_push(err, "stage %s", kiln_stage_name(s));
        if (!handled && stg->npasses &&
            (st = kiln__passmgr_run_stage(pm, kiln_stage_name(s), stg->passes, stg->npasses, root,
                                          err)) != KILN_OK)
            return st;
        /* GE OptimizeOriginalGraph: each engine, in priority order (docs/engines.md). */
        if (s == KILN_STAGE_OPTIMIZE_ORIGINAL &&
            (st = kiln_engines_optimize_original(kiln__passmgr_ctx(pm), root, err)) != KILN_OK)
            return st;
        kiln__passmgr_stage_hook(pm, kiln_stage_name(s), root, true);
        /* A large graph's stage leaves megabytes of freed transients in the
         * middle of the heap, resident until reused: back to the kernel, so
         * the next stage's peak does not stand on them (a few ms at 1M nodes). */
        if (kiln_graph_node_count(root) >= KILN_TRIM_NODES)
            kiln__heap_trim();
        for (unsigned i = 0; i < KILN_ARRAY_LEN(steps); i++)
            if (steps[i].stage == s && steps[i].after &&
                (st = reach_step(ctx, p, pm, run, steps[i].step, (kiln_stage_id)(s + 1), root,
                                 err)) != KILN_OK)
                return st;
    }
    run->bisect_count = kiln__passmgr_bisect_count(pm);
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

/*
 * The report is written section by section, and its long arrays (partitions,
 * boundaries, streams, events, explanations) element by element, in jansson's
 * JSON_INDENT(2) format (json_dump.c): what is held at once is one element's
 * tree, not the document's, which at a million nodes is hundreds of MB of
 * text and several GB as a tree.
 */
static bool put_str(kiln_jbuf *b, const char *s) { return kiln__jbuf_put(b, s, strlen(s)); }

/* A newline and @p n spaces (n <= 32). */
static bool put_indent(kiln_jbuf *b, int n)
{
    static const char nl[] = "\n                                ";
    return kiln__jbuf_put(b, nl, (size_t)n + 1);
}

/* An array written element by element; its elements are at indent @p base. */
typedef struct jsink {
    kiln_jbuf *b;
    int base;
    bool any;
} jsink;

static void sink_open(jsink *s, kiln_jbuf *b, int base)
{
    *s = (jsink){b, base, false};
    kiln__jbuf_put(b, "[", 1);
}

/* Append @p e (consumed; NULL = out of memory). */
static void sink_push(jsink *s, json_t *e)
{
    if (!s)
        goto done;
    if (!e) {
        s->b->oom = true;
        return;
    }
    kiln_json_fmt fmt = {.step = 2, .base = s->base};
    if (s->any)
        kiln__jbuf_put(s->b, ",", 1);
    put_indent(s->b, s->base);
    kiln__json_dump(s->b, e, &fmt);
    s->any = true;
done:
    json_decref(e);
}

static void sink_close(jsink *s)
{
    if (s->any)
        put_indent(s->b, s->base - 2);
    kiln__jbuf_put(s->b, "]", 1);
}

/* The next top-level key of the report ("key": ). */
static void report_key(kiln_jbuf *b, const char *key, bool first)
{
    put_str(b, first ? "{" : ",");
    put_indent(b, 2);
    kiln__jbuf_put(b, "\"", 1);
    put_str(b, key);
    put_str(b, "\": ");
}

/* A top-level value (consumed; NULL = out of memory). */
static void report_value(kiln_jbuf *b, json_t *v)
{
    kiln_json_fmt fmt = {.step = 2, .base = 2};
    if (!v)
        b->oom = true;
    else
        kiln__json_dump(b, v, &fmt);
    json_decref(v);
}

/* ---- report: placement and partitions (docs/partition.md) ---------------- */

/* Why the edge between partitions @p a and @p b of @p g is a boundary. */
static const char *boundary_reason(const kiln_graph *g, int32_t a, int32_t b)
{
    const char *ea = kiln_graph_partition_engine(g, (uint32_t)a);
    const char *eb = kiln_graph_partition_engine(g, (uint32_t)b);
    if (strcmp(ea, "inputNodesSubGraph") == 0 || strcmp(eb, "inputNodesSubGraph") == 0)
        return "input_nodes";
    if (strcmp(ea, eb) != 0)
        return "engine";
    const char *la = kiln_graph_partition_stream_label(g, (uint32_t)a);
    const char *lb = kiln_graph_partition_stream_label(g, (uint32_t)b);
    if (strcmp(la, lb) != 0)
        return "stream_label";
    return "second_path";
}

static json_t *boundary_json(const kiln_graph *g, kiln_node_id src, int32_t so, kiln_node_id dst,
                             int32_t di, int32_t a, int32_t b)
{
    json_t *o = json_object();
    json_object_set_new(o, "graph", json_string(kiln_graph_name(g)));
    json_object_set_new(o, "from", json_string(kiln_node_name_str(g, src)));
    json_object_set_new(o, "from_output", json_integer(so));
    json_object_set_new(o, "to", json_string(kiln_node_name_str(g, dst)));
    json_object_set_new(o, "to_input", json_integer(di));
    json_object_set_new(o, "from_rank", json_integer(a));
    json_object_set_new(o, "to_rank", json_integer(b));
    json_object_set_new(o, "reason", json_string(boundary_reason(g, a, b)));
    return o;
}

/* The composite level of @p g's @p np partitions (KILN_PART_COMPOSITE_*), when
 * it was partitioned composite-then-atomic. */
static bool composite_record(kiln_graph *g, uint32_t np, const int64_t **groups,
                             const char *const **engines)
{
    uint32_t ng = 0, ne = 0;
    const kiln_attrs *a = kiln_graph_attrs(g);
    return a && kiln_attrs_get_list_int(a, KILN_PART_COMPOSITE_GROUPS, groups, &ng) &&
           kiln_attrs_get_list_string(a, KILN_PART_COMPOSITE_ENGINES, engines, &ne) && ng == np &&
           ne == np;
}

/* The composite partitions of @p g into @p sk: per composite partition (in
 * its number's order) its engine, the ranks of the atomic partitions inside
 * it and its node count. */
static void report_composites(kiln_graph *g, jsink *sk)
{
    uint32_t np = kiln_graph_partition_count(g);
    const int64_t *groups;
    const char *const *engines;
    if (!np || !composite_record(g, np, &groups, &engines))
        return;
    int64_t ng = 0;
    for (uint32_t r = 0; r < np; r++)
        ng = groups[r] + 1 > ng ? groups[r] + 1 : ng;
    int64_t *count = calloc((size_t)np, sizeof(int64_t));
    if (!count) {
        sk->b->oom = true;
        return;
    }
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n)) {
        int32_t b = kiln_node_partition(g, n);
        if (b >= 0 && (uint32_t)b < np)
            count[b]++;
    }
    for (int64_t c = 0; c < ng; c++) {
        json_t *o = json_object(), *ranks = json_array();
        const char *engine = "";
        int64_t nodes = 0;
        for (uint32_t r = 0; r < np; r++)
            if (groups[r] == c) {
                json_array_append_new(ranks, json_integer(r));
                engine = engines[r];
                nodes += count[r];
            }
        json_object_set_new(o, "graph", json_string(kiln_graph_name(g)));
        json_object_set_new(o, "composite", json_integer(c));
        json_object_set_new(o, "engine", json_string(engine));
        json_object_set_new(o, "ranks", ranks);
        json_object_set_new(o, "nodes", json_integer(nodes));
        sink_push(sk, o);
    }
    free(count);
}

/* Partitions of @p g (if partitioned) into @p parts, or its boundaries into
 * @p bounds (the two sections are written one after the other). */
static void report_partitions(kiln_graph *g, jsink *parts, jsink *bounds)
{
    uint32_t np = kiln_graph_partition_count(g);
    if (!np)
        return;
    int64_t *ins = calloc(np, sizeof(int64_t)), *outs = calloc(np, sizeof(int64_t));
    uint32_t *start = calloc((size_t)np + 1, sizeof(uint32_t));
    if (!ins || !outs || !start) {
        (parts ? parts : bounds)->b->oom = true;
        goto done;
    }
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n)) {
        int32_t b = kiln_node_partition(g, n);
        if (b < 0)
            continue;
        start[b + 1]++;
        for (uint32_t i = 0; i < kiln_node_input_count(g, n); i++) {
            kiln_anchor p = kiln_node_input_peer(g, n, i);
            int32_t a = p.node ? kiln_node_partition(g, p.node) : -1;
            if (a < 0 || a == b)
                continue;
            outs[a]++;
            ins[b]++;
            if (bounds)
                sink_push(bounds, boundary_json(g, p.node, (int32_t)p.index, n, (int32_t)i, a, b));
        }
        for (uint32_t c = kiln_ctrl_in_first(g, n); c; c = kiln_ctrl_in_next(g, c)) {
            kiln_node_id s = kiln_ctrl_src(g, c);
            int32_t a = kiln_node_partition(g, s);
            if (a < 0 || a == b)
                continue;
            outs[a]++;
            ins[b]++;
            if (bounds)
                sink_push(bounds, boundary_json(g, s, -1, n, -1, a, b));
        }
    }
    if (!parts)
        goto done;
    /* each partition's nodes in graph order: counting sort of the node ids */
    for (uint32_t r = 0; r < np; r++)
        start[r + 1] += start[r];
    kiln_node_id *members = malloc(((size_t)start[np] + 1) * sizeof(kiln_node_id));
    uint32_t *fill = calloc(np, sizeof(uint32_t));
    if (!members || !fill) {
        free(members);
        free(fill);
        parts->b->oom = true;
        goto done;
    }
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n)) {
        int32_t b = kiln_node_partition(g, n);
        if (b >= 0)
            members[start[b] + fill[b]++] = n;
    }
    const int64_t *cgroups = NULL;
    const char *const *cengines = NULL;
    if (!composite_record(g, np, &cgroups, &cengines))
        cgroups = NULL;
    for (uint32_t r = 0; r < np; r++) {
        json_t *o = json_object(), *nodes = json_array();
        for (uint32_t k = start[r]; k < start[r + 1]; k++)
            json_array_append_new(nodes, json_string(kiln_node_name_str(g, members[k])));
        json_object_set_new(o, "graph", json_string(kiln_graph_name(g)));
        json_object_set_new(o, "name", json_string(kiln_graph_partition_name(g, r)));
        json_object_set_new(o, "rank", json_integer(r));
        json_object_set_new(o, "engine", json_string(kiln_graph_partition_engine(g, r)));
        json_object_set_new(o, "stream_label",
                            json_string(kiln_graph_partition_stream_label(g, r)));
        json_object_set_new(o, "inputs", json_integer(ins[r]));
        json_object_set_new(o, "outputs", json_integer(outs[r]));
        if (cgroups) { /* composite-then-atomic partitioning */
            json_object_set_new(o, "composite", json_integer(cgroups[r]));
            json_object_set_new(o, "composite_engine", json_string(cengines[r]));
        }
        json_object_set_new(o, "nodes", nodes);
        sink_push(parts, o);
    }
    free(members);
    free(fill);
done:
    free(ins);
    free(outs);
    free(start);
}

/* Nodes per engine (`_kiln_engine`), over the root and every subgraph. */
static void report_placement(kiln_graph *g, json_t *placement)
{
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n)) {
        const char *e;
        if (!kiln_attrs_get_string(kiln_node_attrs(g, n), KILN_ATTR_ENGINE, &e) || !e[0])
            continue;
        json_t *v = json_object_get(placement, e);
        json_object_set_new(placement, e, json_integer(v ? json_integer_value(v) + 1 : 1));
    }
}

/*
 * The schedule of @p g (docs/streams.md) when StreamAllocator ran on it (root
 * attribute _kiln_stream_num): one entry per stream {graph, id, logical,
 * nodes} and per event {graph, id, sender, receiver}, read from the schedule
 * analysis.  Returns false when no allocation is recorded on @p g.
 */
static bool report_schedule(kiln_graph *g, jsink *streams, jsink *events)
{
    int64_t num = 0;
    if (!kiln_attrs_get_int(kiln_graph_attrs(g), "_kiln_stream_num", &num))
        return false;
    if (num == 0) /* no node with a task: nothing runs on a stream */
        return true;
    const kiln_schedule *s = NULL;
    kiln_error err;
    kiln_error_clear(&err);
    if (kiln_schedule_get(g, &s, &err) != KILN_OK)
        return false;
    for (uint32_t k = 0; streams && k < kiln_schedule_stream_count(s); k++) {
        uint32_t cnt = 0;
        const uint32_t *ssteps = kiln_schedule_stream_steps(s, k, &cnt);
        json_t *o = json_object(), *nodes = json_array();
        int64_t logical = k;
        for (uint32_t i = 0; i < cnt; i++) {
            kiln_node_id v = kiln_schedule_node(s, ssteps[i]);
            if (i == 0)
                (void)kiln_attrs_get_int(kiln_node_attrs(g, v), "_logic_stream_id", &logical);
            json_array_append_new(nodes, json_string(kiln_node_name_str(g, v)));
        }
        json_object_set_new(o, "graph", json_string(kiln_graph_name(g)));
        json_object_set_new(o, "id", json_integer(k));
        json_object_set_new(o, "logical", json_integer(logical));
        json_object_set_new(o, "nodes", nodes);
        sink_push(streams, o);
    }
    uint32_t ne = 0;
    const kiln_sched_event *ev = kiln_schedule_events(s, &ne);
    for (uint32_t i = 0; events && i < ne; i++) {
        json_t *o = json_object();
        json_object_set_new(o, "graph", json_string(kiln_graph_name(g)));
        json_object_set_new(o, "id", json_integer(ev[i].id));
        json_object_set_new(o, "sender", json_string(kiln_node_name_str(g, ev[i].sender)));
        json_object_set_new(o, "receiver", json_string(kiln_node_name_str(g, ev[i].receiver)));
        sink_push(events, o);
    }
    return true;
}

/*
 * Tasks of @p g (TaskGenerator's `_kiln_task_kind`), added into @p o: `total`,
 * `kinds` (count per kiln_task_kind name, KERNEL, MEMCPY, ... plus the event
 * RECORD/WAIT tasks the streams' sequences hold) and `kernels` (count per
 * `_kiln_kernel`).  False when no node of @p g has a task kind.
 */
static bool report_tasks(kiln_graph *g, json_t *o)
{
    static const char *const kind_names[KILN_TASK_KIND_COUNT] = {
        "NONE", "KERNEL", "MEMCPY", "EVENT_RECORD", "EVENT_WAIT", "STREAM_ACTIVE",
        "STREAM_SWITCH"};
    json_t *kinds = json_object_get(o, "kinds"), *kernels = json_object_get(o, "kernels");
    bool any = false;
    json_int_t total = json_integer_value(json_object_get(o, "total"));
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n)) {
        const kiln_attrs *a = kiln_node_attrs(g, n);
        int64_t k;
        if (!kiln_attrs_get_int(a, "_kiln_task_kind", &k) || k < 0 || k >= KILN_TASK_KIND_COUNT)
            continue;
        any = true;
        const char *name;
        if (k != KILN_TASK_NONE) {
            total++;
            json_t *v = json_object_get(kinds, kind_names[k]);
            json_object_set_new(kinds, kind_names[k], json_integer(v ? json_integer_value(v) + 1 : 1));
            if (kiln_attrs_get_string(a, "_kiln_kernel", &name) && name[0]) {
                v = json_object_get(kernels, name);
                json_object_set_new(kernels, name, json_integer(v ? json_integer_value(v) + 1 : 1));
            }
        }
        const int64_t *ids;
        uint32_t c = 0;
        for (int w = 0; w < 2; w++)
            if (kiln_attrs_get_list_int(a, w ? "_recv_event_ids" : "_send_event_ids", &ids, &c) && c) {
                const char *kn = kind_names[w ? KILN_TASK_EVENT_WAIT : KILN_TASK_EVENT_RECORD];
                json_t *v = json_object_get(kinds, kn);
                json_object_set_new(kinds, kn, json_integer((v ? json_integer_value(v) : 0) + c));
                total += c;
            }
    }
    json_object_set_new(o, "total", json_integer(total));
    return any;
}

/* The nodes of @p g that ReportFuse recorded, appended to @p nodes. */
static void report_fused_nodes(const kiln_graph *g, json_t *nodes)
{
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n)) {
        const kiln_attrs *a = kiln_node_attrs(g, n);
        const char *const *v = NULL;
        uint32_t cnt = 0;
        if (!kiln_attrs_get_list_string(a, KILN_ATTR_FUSION_PASSES, &v, &cnt) || !cnt)
            continue;
        json_t *o = json_object(), *passes = json_array(), *names = json_array(),
               *types = json_array();
        for (uint32_t i = 0; i < cnt; i++)
            json_array_append_new(passes, json_string(v[i]));
        if (kiln_attrs_get_list_string(a, KILN_ATTR_ORIGIN_NAMES, &v, &cnt))
            for (uint32_t i = 0; i < cnt; i++)
                json_array_append_new(names, json_string(v[i]));
        if (kiln_attrs_get_list_string(a, KILN_ATTR_ORIGIN_TYPES, &v, &cnt))
            for (uint32_t i = 0; i < cnt; i++)
                json_array_append_new(types, json_string(v[i]));
        json_object_set_new(o, "graph", json_string(kiln_graph_name(g)));
        json_object_set_new(o, "node", json_string(kiln_node_name_str(g, n)));
        json_object_set_new(o, "op", json_string(kiln_node_op_str(g, n)));
        json_object_set_new(o, "passes", passes);
        json_object_set_new(o, "sources", names);
        json_object_set_new(o, "source_types", types);
        json_array_append_new(nodes, o);
    }
}

void *kiln__fusions_report(const kiln_graph *root, const kiln_pass_ctx *pc)
{
    json_t *doc = json_object(), *passes = json_object(), *nodes = json_array();
    uint32_t ns = 0;
    const kiln_pass_stat *ps = pc ? kiln__passctx_stats(pc, &ns) : NULL;
    for (uint32_t k = 0; k < ns; k++) {
        if (strcmp(ps[k].counter, "matched") != 0 && strcmp(ps[k].counter, "effected") != 0)
            continue;
        json_t *p = json_object_get(passes, ps[k].pass);
        if (!p) {
            p = json_object();
            json_object_set_new(p, "matched", json_integer(0));
            json_object_set_new(p, "effected", json_integer(0));
            json_object_set_new(passes, ps[k].pass, p);
        }
        json_t *v = json_object_get(p, ps[k].counter);
        json_object_set_new(p, ps[k].counter, json_integer(json_integer_value(v) + ps[k].value));
    }
    kiln_graph *rg = (kiln_graph *)root;
    if (rg) {
        report_fused_nodes(rg, nodes);
        for (uint32_t i = 0; i < kiln_graph_all_subgraph_count(rg); i++)
            report_fused_nodes(kiln_graph_all_subgraph(rg, i), nodes);
    }
    json_object_set_new(doc, "passes", passes);
    json_object_set_new(doc, "nodes", nodes);
    return doc;
}

typedef struct report_ud {
    const kiln_stage_run *run;
    kiln_graph *root;
} report_ud;

/* Whether the report has a schedule: StreamAllocator ran on the root. */
static bool has_schedule(kiln_graph *g)
{
    int64_t num = 0;
    if (!kiln_attrs_get_int(kiln_graph_attrs(g), "_kiln_stream_num", &num))
        return false;
    const kiln_schedule *s = NULL;
    kiln_error err;
    kiln_error_clear(&err);
    return num == 0 || kiln_schedule_get(g, &s, &err) == KILN_OK;
}

static kiln_status write_report(FILE *f, void *arg, kiln_error *err)
{
    const report_ud *u = arg;
    const kiln_stage_run *run = u->run;
    kiln_graph *rg = u->root;
    kiln_passmgr *pm = run->report;
    uint32_t nsub = kiln_graph_all_subgraph_count(rg);
    kiln_jbuf b = {.f = f};
    jsink sk;

    report_key(&b, "kiln_report", true);
    report_value(&b, json_integer(1));
    report_key(&b, "graph", false);
    report_value(&b, json_string(kiln_graph_name(rg)));
    report_key(&b, "paused_at", false);
    report_value(&b, run->paused_step ? json_string(run->paused_step) : json_null());
    report_key(&b, "total_pass_ms", false);
    report_value(&b, json_real(pm ? (double)kiln__passmgr_total_ns(pm) / 1e6 : 0.0));
    report_key(&b, "nodes", false);
    report_value(&b, json_integer((json_int_t)kiln__graph_live_total(rg)));

    report_key(&b, "passes", false);
    sink_open(&sk, &b, 4);
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
        sink_push(&sk, o);
    }
    sink_close(&sk);

    report_key(&b, "explanations", false);
    sink_open(&sk, &b, 4);
    uint32_t n = 0;
    const kiln_explanation *ex = pm ? kiln__passctx_explanations(kiln__passmgr_ctx(pm), &n) : NULL;
    for (uint32_t i = 0; i < n; i++) {
        json_t *o = json_object();
        json_object_set_new(o, "stage", json_string(ex[i].stage));
        json_object_set_new(o, "pass", json_string(ex[i].pass));
        json_object_set_new(o, "graph", json_string(ex[i].graph));
        json_object_set_new(o, "node", json_string(ex[i].node));
        json_object_set_new(o, "why", json_string(ex[i].text));
        sink_push(&sk, o);
    }
    sink_close(&sk);

    report_key(&b, "fusions", false);
    report_value(&b, kiln__fusions_report(rg, pm ? kiln__passmgr_ctx(pm) : NULL));

    report_key(&b, "placement", false);
    json_t *placement = json_object();
    for (uint32_t i = 0; i <= nsub; i++)
        report_placement(i ? kiln_graph_all_subgraph(rg, i - 1) : rg, placement);
    report_value(&b, placement);

    report_key(&b, "partitions", false);
    sink_open(&sk, &b, 4);
    for (uint32_t i = 0; i <= nsub; i++)
        report_partitions(i ? kiln_graph_all_subgraph(rg, i - 1) : rg, &sk, NULL);
    sink_close(&sk);
    report_key(&b, "partition_boundaries", false);
    sink_open(&sk, &b, 4);
    for (uint32_t i = 0; i <= nsub; i++)
        report_partitions(i ? kiln_graph_all_subgraph(rg, i - 1) : rg, NULL, &sk);
    sink_close(&sk);
    report_key(&b, "composite_partitions", false);
    sink_open(&sk, &b, 4);
    for (uint32_t i = 0; i <= nsub; i++)
        report_composites(i ? kiln_graph_all_subgraph(rg, i - 1) : rg, &sk);
    sink_close(&sk);

    /* tasks: null when no TaskGenerator ran */
    json_t *tasks = json_object();
    json_object_set_new(tasks, "total", json_integer(0));
    json_object_set_new(tasks, "kinds", json_object());
    json_object_set_new(tasks, "kernels", json_object());
    bool have_tasks = false;
    for (uint32_t i = 0; i <= nsub; i++)
        have_tasks |= report_tasks(i ? kiln_graph_all_subgraph(rg, i - 1) : rg, tasks);
    report_key(&b, "tasks", false);
    if (!have_tasks) {
        json_decref(tasks);
        tasks = json_null();
    }
    report_value(&b, tasks);

    /* streams and events: null when no StreamAllocator ran on the root */
    bool sched = has_schedule(rg);
    for (int pass = 0; pass < 2; pass++) {
        report_key(&b, pass ? "events" : "streams", false);
        if (!sched) {
            report_value(&b, json_null());
            continue;
        }
        sink_open(&sk, &b, 4);
        for (uint32_t i = 0; i <= nsub; i++)
            (void)report_schedule(i ? kiln_graph_all_subgraph(rg, i - 1) : rg,
                                  pass ? NULL : &sk, pass ? &sk : NULL);
        sink_close(&sk);
    }

    json_t *mc = json_object();
    const kiln_cache_report *cr = run->cache;
    json_object_set_new(mc, "status", json_string(cr && cr->status ? cr->status : "disabled"));
    json_object_set_new(mc, "key", cr && cr->key ? json_string(cr->key) : json_null());
    json_object_set_new(mc, "entry", cr && cr->entry ? json_string(cr->entry) : json_null());
    json_object_set_new(mc, "ms", json_real(cr ? cr->ms : 0.0));
    report_key(&b, "model_cache", false);
    report_value(&b, mc);
    /* MemoryAssigner's plan, read from the graph; null when none ran (docs/outputs.md).
     * The graph holds no timing: time_ms is the pass's wall time. */
    double ma_ms = 0;
    for (uint32_t i = 0; pm && i < kiln__passmgr_record_count(pm); i++) {
        const kiln_pass_record *r = kiln__passmgr_record(pm, i);
        if (strcmp(r->name, "MemoryAssigner") == 0)
            ma_ms += (double)r->wall_ns / 1e6;
    }
    report_key(&b, "memory_plan", false);
    report_value(&b, kiln__memgraph_report(rg, ma_ms));
    /* kiln run: per-op times and memory of the runs (docs/outputs.md); null otherwise */
    report_key(&b, "run", false);
    report_value(&b, run->run_json ? json_incref((json_t *)run->run_json) : json_null());
    put_indent(&b, 0);
    put_str(&b, "}\n");
    bool ok = kiln__jbuf_flush(&b) && !b.oom && !b.io_fail;
    bool oom = b.oom;
    kiln__jbuf_free(&b);
    if (!ok)
        return oom ? kiln_errorf(err, KILN_ERR_NOMEM, "out of memory writing the report")
                   : kiln_errorf(err, KILN_ERR_IO, "cannot write report: %s", strerror(errno));
    return KILN_OK;
}

kiln_status kiln_stage_write_report(const kiln_stage_run *run, const kiln_graph *root,
                                    const char *path, kiln_error *err)
{
    report_ud u = {run, (kiln_graph *)root};
    return kiln_file_write_atomic(path, write_report, &u, err);
}


/* ---- paused state: what decided the build --------------------------------- */

/* A string for the state; NULL (recorded in *bad) when it is not UTF-8. */
static json_t *jstr(const char *s, const char **bad)
{
    if (!s)
        return json_null();
    json_t *j = json_string(s);
    if (!j && !*bad)
        *bad = s;
    return j;
}

static json_t *jstr_array(const char *const *v, uint32_t n, const char **bad)
{
    json_t *a = json_array();
    for (uint32_t i = 0; i < n; i++)
        json_array_append_new(a, jstr(v[i], bad));
    return a;
}

/* @p p's pipeline in the textual form (kiln__pipeline_print_text); free() it. */
static char *pipeline_text(const kiln_pipeline *p)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return NULL;
    kiln__pipeline_print_text(p, f);
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

/* The command line's part: kiln_build_inputs as JSON. */
static json_t *build_json(const kiln_build_inputs *in, const char *manifest, const char **bad)
{
    json_t *b = json_object(), *sel = json_array();
    json_object_set_new(b, "mode", json_string(in->build_mode ? in->build_mode : "normal"));
    json_object_set_new(b, "step", jstr(in->build_step, bad));
    json_object_set_new(b, "manifest", jstr(manifest, bad));
    for (uint32_t i = 0; i < in->nselectors; i++) {
        json_t *o = json_object();
        json_object_set_new(o, "action", json_string(in->selector_enable[i] ? "enable" : "disable"));
        json_object_set_new(o, "pattern", jstr(in->selectors[i], bad));
        json_array_append_new(sel, o);
    }
    json_object_set_new(b, "selectors", sel);
    json_object_set_new(b, "pass_opts", jstr_array(in->pass_opts, in->npass_opts, bad));
    json_object_set_new(b, "options", jstr_array(in->options, in->noptions, bad));
    json_object_set_new(b, "passes", jstr(in->passes, bad));
    json_object_set_new(b, "tuner", jstr(in->tuner, bad));
    json_object_set_new(b, "bisect_limit",
                        in->has_bisect ? json_integer(in->bisect_limit) : json_null());
    return b;
}

/* What the manifest and the command line resolved to (compared on resume). */
static json_t *resolved_json(const kiln_ctx *ctx, const kiln_pipeline *p, const char **bad)
{
    json_t *r = json_object(), *opts = json_object();
    char *text = pipeline_text(p);
    if (!text) {
        json_decref(r);
        json_decref(opts);
        return NULL;
    }
    json_object_set_new(r, "pipeline", jstr(text, bad));
    free(text);
    for (uint32_t i = 0; i < ctx->nsession_options; i++) {
        json_t *v = jstr(ctx->session_options[i].value, bad);
        if (!v || json_object_set_new(opts, ctx->session_options[i].key, v) != 0)
            *bad = *bad ? *bad : ctx->session_options[i].key;
    }
    json_object_set_new(r, "session_options", opts);
    json_object_set_new(r, "tuners", jstr_array((const char *const *)p->tuners, p->ntuners, bad));
    json_object_set_new(r, "breakpoints",
                        jstr_array((const char *const *)p->breakpoints, p->nbreakpoints, bad));
    json_object_set_new(r, "bisect_limit", json_integer(p->instr.bisect_limit));
    return r;
}

/* Real paths of the manifest chain and of the plugin files loaded, in order. */
static json_t *file_paths(const kiln_ctx *ctx, const kiln_pipeline *p, const char *which,
                          const char **bad)
{
    json_t *a = json_array();
    if (strcmp(which, "manifests") == 0) {
        for (uint32_t i = 0; i < p->nmanifests; i++)
            json_array_append_new(a, jstr(p->manifests[i], bad));
        return a;
    }
    for (uint32_t i = 0; i < kiln_registry_plugin_count(ctx); i++) {
        const kiln_plugin_rec *pl = kiln_registry_plugin_at(ctx, i);
        if (!pl->path)
            continue; /* built into kiln */
        char real[PATH_MAX];
        json_array_append_new(a, jstr(realpath(pl->path, real) ? real : pl->path, bad));
    }
    return a;
}

/* ---- paused state: writing ------------------------------------------------- */

/*
 * The graph goes into the state through a stream that indents every line it
 * writes by two spaces, so the embedded document lines up under "graph" while
 * the graph writer streams nodes as usual.  (No JSON string holds a raw
 * newline, so every newline it sees is structural.)
 */
typedef struct indent_out {
    FILE *f;
    bool bol; /* at the beginning of a line: indent before the next byte */
} indent_out;

static ssize_t indent_write(void *cookie, const char *buf, size_t size)
{
    indent_out *o = cookie;
    size_t done = 0;
    while (done < size) {
        if (o->bol && fputs("  ", o->f) == EOF)
            return -1;
        o->bol = false;
        const char *nl = memchr(buf + done, '\n', size - done);
        size_t chunk = nl ? (size_t)(nl - (buf + done)) + 1 : size - done;
        if (fwrite(buf + done, 1, chunk, o->f) != chunk)
            return -1;
        done += chunk;
        o->bol = nl != NULL;
    }
    return (ssize_t)size;
}

typedef struct state_ud {
    const char *meta; /* the state without its graph: "{ ... }" */
    const kiln_graph *root;
} state_ud;

static kiln_status write_state(FILE *f, void *ud, kiln_error *err)
{
    const state_ud *s = ud;
    /* "{...}" without the closing brace and the space before it, then the
     * graph as the last member */
    const char *end = strrchr(s->meta, '}');
    while (end && end > s->meta && strchr(" \n", end[-1]))
        end--;
    size_t n = end ? (size_t)(end - s->meta) : 0;
    if (n == 0 || fwrite(s->meta, 1, n, f) != n || fputs(",\n  \"graph\": ", f) == EOF)
        return kiln_errorf(err, KILN_ERR_IO, "cannot write paused state");
    indent_out io = {f, false};
    FILE *g = fopencookie(&io, "w", (cookie_io_functions_t){.write = indent_write});
    if (!g)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory writing paused state");
    kiln_status st = kiln_graph_write_json(s->root, g, err);
    if (fclose(g) != 0 && st == KILN_OK)
        st = kiln_errorf(err, KILN_ERR_IO, "cannot write paused state");
    if (st == KILN_OK && fputs("}\n", f) == EOF)
        st = kiln_errorf(err, KILN_ERR_IO, "cannot write paused state");
    return st;
}

kiln_status kiln_paused_state_write(const char *path, const kiln_ctx *ctx, const kiln_pipeline *p,
                                    const kiln_build_inputs *in, const kiln_stage_run *run,
                                    const kiln_graph *root, kiln_error *err)
{
    const char *bad = NULL;
    kiln_status st = KILN_OK;
    json_t *doc = json_object(), *files = json_object();
    json_object_set_new(doc, "kiln_paused_state", json_integer(KILN_PAUSED_STATE_VERSION));
    json_object_set_new(doc, "paused_at", json_string(run->paused_step));
    json_object_set_new(doc, "next_stage", run->next < KILN_STAGE_COUNT
                                               ? json_string(kiln_stage_name(run->next))
                                               : json_null());
    json_object_set_new(doc, "build",
                        build_json(in, p->nmanifests ? p->manifests[0] : NULL, &bad));
    json_t *res = resolved_json(ctx, p, &bad);
    if (!res) {
        st = kiln_errorf(err, KILN_ERR_NOMEM, "out of memory writing paused state");
        goto done;
    }
    json_object_set_new(res, "bisect_count", json_integer(run->bisect_count));
    json_object_set_new(doc, "resolved", res);
    static const char *const kinds[] = {"manifests", "plugins"};
    for (unsigned k = 0; k < 2; k++) {
        json_t *paths = file_paths(ctx, p, kinds[k], &bad), *entries = json_array(), *v;
        size_t i;
        json_array_foreach(paths, i, v) {
            char hex[KILN_SHA256_HEX_LEN + 1];
            if (!json_is_string(v) ||
                (st = kiln__sha256_file(json_string_value(v), hex, err)) != KILN_OK)
                break;
            json_t *e = json_object();
            json_object_set(e, "path", v);
            json_object_set_new(e, "sha256", json_string(hex));
            json_array_append_new(entries, e);
        }
        json_decref(paths);
        json_object_set_new(files, kinds[k], entries);
        if (st != KILN_OK)
            goto done;
    }
    json_object_set(doc, "files", files);
    if (bad) {
        st = kiln_errorf(err, KILN_ERR_INVALID,
                         "cannot record '%s' in the paused state: not valid UTF-8", bad);
        goto done;
    }
    char *meta = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (!meta) {
        st = kiln_errorf(err, KILN_ERR_NOMEM, "out of memory writing paused state");
        goto done;
    }
    state_ud ud = {meta, root};
    st = kiln_file_write_atomic(path, write_state, &ud, err);
    free(meta);
done:
    json_decref(files);
    json_decref(doc);
    if (st != KILN_OK)
        kiln_error_push(err, "paused state %s", path);
    return st;
}

/* ---- paused state: reading -------------------------------------------------- */

typedef struct state_priv {
    char *path;
    json_t *meta;             /* every member but "graph" */
    const char **sel, **popts, **opts;
    bool *sel_en;
} state_priv;

typedef struct scan {
    const char *path, *t;
    size_t len, pos;
    kiln_error *err;
} scan;

static void scan_ws(scan *s)
{
    while (s->pos < s->len && strchr(" \t\r\n", s->t[s->pos]) && s->t[s->pos])
        s->pos++;
}

static bool scan_eat(scan *s, char c)
{
    scan_ws(s);
    if (s->pos < s->len && s->t[s->pos] == c) {
        s->pos++;
        return true;
    }
    return false;
}

static kiln_status scan_syntax(scan *s, size_t off, const char *what)
{
    int line = 1, col = 1;
    for (size_t i = 0; i < off && i < s->len; i++) {
        col = s->t[i] == '\n' ? 1 : col + 1;
        line += s->t[i] == '\n';
    }
    return kiln_errorf(s->err, KILN_ERR_PARSE, "%s:%d:%d: syntax error: %s", s->path, line, col,
                       what);
}

static kiln_status scan_value(scan *s, json_t **out)
{
    json_error_t je;
    scan_ws(s);
    *out = json_loadb(s->t + s->pos, s->len - s->pos,
                      JSON_DECODE_ANY | JSON_DISABLE_EOF_CHECK | JSON_REJECT_DUPLICATES, &je);
    if (!*out)
        return scan_syntax(s, s->pos + (size_t)(je.position > 0 ? je.position - 1 : 0), je.text);
    s->pos += (size_t)je.position;
    return KILN_OK;
}

/* Step over one JSON value (strings and nesting followed; the graph reader
 * checks the rest of the graph's syntax); false when it does not end. */
static bool scan_skip(scan *s)
{
    size_t depth = 0;
    scan_ws(s);
    do {
        if (s->pos >= s->len)
            return false;
        char c = s->t[s->pos];
        if (c == '"') {
            for (s->pos++; s->pos < s->len && s->t[s->pos] != '"'; s->pos++)
                s->pos += s->t[s->pos] == '\\';
            if (s->pos >= s->len)
                return false;
            s->pos++;
        } else if (c == '{' || c == '[') {
            depth++;
            s->pos++;
        } else if (c == '}' || c == ']') {
            if (!depth)
                return false;
            depth--;
            s->pos++;
        } else if (!depth) {
            size_t start = s->pos;
            while (s->pos < s->len && !strchr(",}] \t\r\n", s->t[s->pos]))
                s->pos++;
            if (s->pos == start)
                return false;
        } else {
            s->pos++;
        }
    } while (depth);
    return true;
}

/*
 * The state's top-level object, by hand: every member but "graph" is parsed
 * into @p meta; "graph" is only stepped over (its byte range goes to the
 * streaming graph reader), so a large graph never becomes a jansson tree.
 */
static kiln_status scan_state(scan *s, json_t *meta, size_t *gstart, size_t *gend)
{
    kiln_status st;
    if (!scan_eat(s, '{'))
        return scan_syntax(s, s->pos, "a paused state is a JSON object");
    if (!scan_eat(s, '}'))
        for (;;) {
            json_t *key, *v;
            scan_ws(s);
            size_t kpos = s->pos;
            if ((st = scan_value(s, &key)) != KILN_OK)
                return st;
            char k[128];
            snprintf(k, sizeof(k), "%s", json_is_string(key) ? json_string_value(key) : "");
            bool is_key = json_is_string(key);
            json_decref(key);
            if (!is_key || !scan_eat(s, ':'))
                return scan_syntax(s, is_key ? s->pos : kpos,
                                   is_key ? "expected ':'" : "expected a key");
            if (json_object_get(meta, k) || (strcmp(k, "graph") == 0 && *gend))
                return kiln_errorf(s->err, KILN_ERR_INVALID, "%s: $.%s: duplicate key", s->path,
                                   k);
            if (strcmp(k, "graph") == 0) {
                scan_ws(s);
                *gstart = s->pos;
                if (!scan_skip(s))
                    return scan_syntax(s, *gstart, "the value of \"graph\" does not end");
                *gend = s->pos;
            } else {
                if ((st = scan_value(s, &v)) != KILN_OK)
                    return st;
                json_object_set_new(meta, k, v);
            }
            if (scan_eat(s, '}'))
                break;
            if (!scan_eat(s, ','))
                return scan_syntax(s, s->pos, "expected ',' or '}'");
        }
    scan_ws(s);
    if (s->pos != s->len)
        return scan_syntax(s, s->pos, "data after the paused state");
    return KILN_OK;
}

/* Typed member access with the error naming the state file and JSON path. */
typedef struct rd {
    const char *path;
    kiln_error *err;
    kiln_status st;
} rd;

static const char *jtype(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "?";
}

static const char *want_name(json_type t)
{
    return t == JSON_OBJECT    ? "an object"
           : t == JSON_ARRAY   ? "an array"
           : t == JSON_STRING  ? "a string"
           : t == JSON_INTEGER ? "an integer"
                               : "?";
}

/*
 * Member @p key of @p obj (at JSON path @p at), of type @p t (or null when
 * @p nullable; then NULL is returned).  Missing or mistyped: error, NULL.
 */
static json_t *member(rd *r, json_t *obj, const char *at, const char *key, json_type t,
                      bool nullable)
{
    if (r->st != KILN_OK)
        return NULL;
    json_t *v = json_object_get(obj, key);
    if (!v) {
        r->st = kiln_errorf(r->err, KILN_ERR_INVALID, "%s: %s.%s: missing", r->path, at, key);
        return NULL;
    }
    if (nullable && json_is_null(v))
        return NULL;
    if (json_typeof(v) != t) {
        r->st = kiln_errorf(r->err, KILN_ERR_INVALID, "%s: %s.%s: expected %s%s, got %s",
                            r->path, at, key, want_name(t), nullable ? " or null" : "",
                            jtype(v));
        return NULL;
    }
    return v;
}

/* Refuse members of @p obj not in @p keys. */
static void only_keys(rd *r, json_t *obj, const char *at, const char *const *keys, unsigned n)
{
    const char *k;
    json_t *v;
    json_object_foreach(obj, k, v) {
        unsigned i = 0;
        while (i < n && strcmp(keys[i], k) != 0)
            i++;
        if (i == n && r->st == KILN_OK)
            r->st = kiln_errorf(r->err, KILN_ERR_INVALID, "%s: %s.%s: unknown key", r->path, at,
                                k);
    }
}

/* An array of strings as a kiln__malloc'd vector pointing into @p a. */
static const char **str_vec(rd *r, json_t *a, const char *at)
{
    if (!a || r->st != KILN_OK)
        return NULL;
    const char **v = kiln__calloc(json_array_size(a) + 1, sizeof(char *));
    if (!v) {
        r->st = kiln_errorf(r->err, KILN_ERR_NOMEM, "out of memory");
        return NULL;
    }
    size_t i;
    json_t *e;
    json_array_foreach(a, i, e) {
        if (!json_is_string(e) && r->st == KILN_OK)
            r->st = kiln_errorf(r->err, KILN_ERR_INVALID, "%s: %s[%zu]: expected a string, got %s",
                                r->path, at, i, jtype(e));
        v[i] = json_string_value(e);
    }
    return v;
}

static const char *const top_keys[] = {"kiln_paused_state", "paused_at", "next_stage", "build",
                                       "resolved", "files", "graph"};
static const char *const build_keys[] = {"mode",    "step",   "manifest", "selectors",
                                         "pass_opts", "options", "passes", "tuner",
                                         "bisect_limit"};
static const char *const resolved_keys[] = {"pipeline",    "session_options", "tuners",
                                            "breakpoints", "bisect_limit",    "bisect_count"};

static void read_build(rd *r, kiln_paused_state *s, state_priv *pv)
{
    json_t *b = member(r, pv->meta, "$", "build", JSON_OBJECT, false);
    if (!b)
        return;
    only_keys(r, b, "$.build", build_keys, KILN_ARRAY_LEN(build_keys));
    json_t *mode = member(r, b, "$.build", "mode", JSON_STRING, false);
    json_t *step = member(r, b, "$.build", "step", JSON_STRING, true);
    json_t *man = member(r, b, "$.build", "manifest", JSON_STRING, false);
    json_t *sel = member(r, b, "$.build", "selectors", JSON_ARRAY, false);
    json_t *po = member(r, b, "$.build", "pass_opts", JSON_ARRAY, false);
    json_t *op = member(r, b, "$.build", "options", JSON_ARRAY, false);
    json_t *passes = member(r, b, "$.build", "passes", JSON_STRING, true);
    json_t *tuner = member(r, b, "$.build", "tuner", JSON_STRING, true);
    json_t *bl = member(r, b, "$.build", "bisect_limit", JSON_INTEGER, true);
    if (r->st != KILN_OK)
        return;
    s->in.build_mode = json_string_value(mode);
    s->in.build_step = step ? json_string_value(step) : NULL;
    s->manifest = json_string_value(man);
    s->in.passes = passes ? json_string_value(passes) : NULL;
    s->in.tuner = tuner ? json_string_value(tuner) : NULL;
    s->in.has_bisect = bl != NULL;
    s->in.bisect_limit = bl ? json_integer_value(bl) : -1;
    s->in.pass_opts = pv->popts = str_vec(r, po, "$.build.pass_opts");
    s->in.npass_opts = (uint32_t)json_array_size(po);
    s->in.options = pv->opts = str_vec(r, op, "$.build.options");
    s->in.noptions = (uint32_t)json_array_size(op);
    size_t n = json_array_size(sel);
    pv->sel = kiln__calloc(n + 1, sizeof(char *));
    pv->sel_en = kiln__calloc(n + 1, sizeof(bool));
    if (!pv->sel || !pv->sel_en) {
        r->st = kiln_errorf(r->err, KILN_ERR_NOMEM, "out of memory");
        return;
    }
    static const char *const sel_keys[] = {"action", "pattern"};
    for (size_t i = 0; i < n && r->st == KILN_OK; i++) {
        char at[64];
        snprintf(at, sizeof(at), "$.build.selectors[%zu]", i);
        json_t *e = json_array_get(sel, i);
        if (!json_is_object(e)) {
            r->st = kiln_errorf(r->err, KILN_ERR_INVALID, "%s: %s: expected an object, got %s",
                                r->path, at, jtype(e));
            break;
        }
        only_keys(r, e, at, sel_keys, 2);
        json_t *act = member(r, e, at, "action", JSON_STRING, false);
        json_t *pat = member(r, e, at, "pattern", JSON_STRING, false);
        if (r->st != KILN_OK)
            break;
        const char *a = json_string_value(act);
        if (strcmp(a, "enable") != 0 && strcmp(a, "disable") != 0)
            r->st = kiln_errorf(r->err, KILN_ERR_INVALID,
                                "%s: %s.action: expected \"enable\" or \"disable\", got \"%s\"",
                                r->path, at, a);
        pv->sel[i] = json_string_value(pat);
        pv->sel_en[i] = strcmp(a, "enable") == 0;
    }
    s->in.selectors = pv->sel;
    s->in.selector_enable = pv->sel_en;
    s->in.nselectors = (uint32_t)n;
}

/* Every recorded manifest and plugin file still has its recorded SHA-256. */
static void check_files(rd *r, json_t *files)
{
    static const char *const kinds[] = {"manifests", "plugins"};
    static const char *const entry_keys[] = {"path", "sha256"};
    only_keys(r, files, "$.files", kinds, 2);
    for (unsigned k = 0; k < 2 && r->st == KILN_OK; k++) {
        char at[64];
        snprintf(at, sizeof(at), "$.files.%s", kinds[k]);
        json_t *arr = member(r, files, "$.files", kinds[k], JSON_ARRAY, false);
        if (k == 0 && json_array_size(arr) == 0 && r->st == KILN_OK)
            r->st = kiln_errorf(r->err, KILN_ERR_INVALID, "%s: %s: no manifest recorded",
                                r->path, at);
        size_t i;
        json_t *e;
        json_array_foreach(arr, i, e) {
            if (r->st != KILN_OK)
                return;
            char eat[128];
            snprintf(eat, sizeof(eat), "%s[%zu]", at, i);
            if (!json_is_object(e)) {
                r->st = kiln_errorf(r->err, KILN_ERR_INVALID,
                                    "%s: %s: expected an object, got %s", r->path, eat, jtype(e));
                return;
            }
            only_keys(r, e, eat, entry_keys, 2);
            json_t *fp = member(r, e, eat, "path", JSON_STRING, false);
            json_t *sha = member(r, e, eat, "sha256", JSON_STRING, false);
            if (r->st != KILN_OK)
                return;
            const char *file = json_string_value(fp), *want = json_string_value(sha);
            const char *what = k == 0 ? "manifest" : "plugin";
            char now[KILN_SHA256_HEX_LEN + 1];
            kiln_error sub;
            kiln_error_clear(&sub);
            if (kiln__sha256_file(file, now, &sub) != KILN_OK) {
                char why[KILN_MSG_SIZE];
                kiln_error_format(&sub, why, sizeof(why));
                r->st = kiln_errorf(r->err, KILN_ERR_NOT_FOUND,
                                    "%s: the paused build's %s is gone (%s)", r->path, what, why);
                return;
            }
            if (strcmp(now, want) != 0) {
                r->st = kiln_errorf(r->err, KILN_ERR_INVALID,
                                    "%s: %s %s changed since the build was paused (SHA-256 then "
                                    "%s, now %s); pause the build again",
                                    r->path, what, file, want, now);
                return;
            }
        }
    }
}

kiln_status kiln_paused_state_read(kiln_ctx *ctx, const char *path, kiln_paused_state *s,
                                   kiln_error *err)
{
    memset(s, 0, sizeof(*s));
    state_priv *pv = kiln__calloc(1, sizeof(*pv));
    if (!pv || !(pv->path = kiln__strdup(path)) || !(pv->meta = json_object())) {
        s->priv = pv;
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    }
    s->priv = pv;
    char *text = NULL;
    size_t len = 0, gstart = 0, gend = 0;
    rd r = {path, err, KILN_OK};
    if ((r.st = kiln_file_read_all(path, &text, &len, err)) != KILN_OK)
        return r.st;
    scan sc = {path, text, len, 0, err};
    if ((r.st = scan_state(&sc, pv->meta, &gstart, &gend)) != KILN_OK)
        goto done;
    /* The version first: a state of another version is refused as such. */
    json_t *ver = json_object_get(pv->meta, "kiln_paused_state");
    if (!ver) {
        r.st = kiln_errorf(err, KILN_ERR_INVALID,
                           "%s: $.kiln_paused_state: missing (not a kiln paused state)", path);
        goto done;
    }
    if (!json_is_integer(ver) || json_integer_value(ver) != KILN_PAUSED_STATE_VERSION) {
        char got[64];
        if (json_is_integer(ver))
            snprintf(got, sizeof(got), "format %" JSON_INTEGER_FORMAT, json_integer_value(ver));
        else
            snprintf(got, sizeof(got), "%s", jtype(ver));
        r.st = kiln_errorf(err, KILN_ERR_VERSION,
                           "%s: $.kiln_paused_state: paused state %s is not supported (this kiln "
                           "reads format %d); pause the build again",
                           path, got, KILN_PAUSED_STATE_VERSION);
        goto done;
    }
    only_keys(&r, pv->meta, "$", top_keys, KILN_ARRAY_LEN(top_keys));
    json_t *at = member(&r, pv->meta, "$", "paused_at", JSON_STRING, false);
    json_t *next = member(&r, pv->meta, "$", "next_stage", JSON_STRING, true);
    if (r.st != KILN_OK)
        goto done;
    kiln_stage_id stage;
    bool after;
    s->step = json_string_value(at);
    if (!kiln_build_step_lookup(s->step, &stage, &after)) {
        r.st = kiln_errorf(err, KILN_ERR_INVALID, "%s: $.paused_at: unknown build step \"%s\"",
                           path, s->step);
        goto done;
    }
    s->next = after ? (kiln_stage_id)(stage + 1) : stage;
    const char *want = s->next < KILN_STAGE_COUNT ? kiln_stage_name(s->next) : NULL;
    const char *have = next ? json_string_value(next) : NULL;
    if (!want != !have || (want && strcmp(want, have) != 0)) {
        r.st = kiln_errorf(err, KILN_ERR_INVALID,
                           "%s: $.next_stage: \"%s\" does not follow build step %s (expected %s)",
                           path, have ? have : "null", s->step, want ? want : "null");
        goto done;
    }
    read_build(&r, s, pv);
    json_t *res = member(&r, pv->meta, "$", "resolved", JSON_OBJECT, false);
    if (res) {
        only_keys(&r, res, "$.resolved", resolved_keys, KILN_ARRAY_LEN(resolved_keys));
        member(&r, res, "$.resolved", "pipeline", JSON_STRING, false);
        member(&r, res, "$.resolved", "session_options", JSON_OBJECT, false);
        member(&r, res, "$.resolved", "tuners", JSON_ARRAY, false);
        member(&r, res, "$.resolved", "breakpoints", JSON_ARRAY, false);
        member(&r, res, "$.resolved", "bisect_limit", JSON_INTEGER, false);
        json_t *bc = member(&r, res, "$.resolved", "bisect_count", JSON_INTEGER, false);
        s->bisect_count = bc ? json_integer_value(bc) : 0;
    }
    json_t *files = member(&r, pv->meta, "$", "files", JSON_OBJECT, false);
    if (r.st != KILN_OK)
        goto done;
    if (!gend) {
        r.st = kiln_errorf(err, KILN_ERR_INVALID, "%s: $.graph: missing", path);
        goto done;
    }
    if (text[gstart] != '{') {
        r.st = kiln_errorf(err, KILN_ERR_INVALID,
                           "%s: $.graph: expected a graph JSON object, got %s", path,
                           text[gstart] == '"' ? "a string" : "another value");
        goto done;
    }
    check_files(&r, files);
    if (r.st != KILN_OK)
        goto done;
    char src[PATH_MAX + 16];
    snprintf(src, sizeof(src), "%s: $.graph", path);
    r.st = kiln_graph_read_json_string(ctx, text + gstart, gend - gstart, src, &s->graph, err);
done:
    kiln__free(text);
    return r.st;
}

/* Whether what the pipeline resolves to now is what it resolved to then. */
static kiln_status same(const char *path, const char *what, json_t *then, json_t *now,
                        kiln_error *err)
{
    if (json_equal(then, now))
        return KILN_OK;
    if (json_is_string(then) && json_is_string(now)) {
        /* A pipeline text: show both from the pass where they part. */
        const char *a = json_string_value(then), *b = json_string_value(now);
        size_t i = 0;
        while (a[i] && a[i] == b[i])
            i++;
        while (i && !strchr(",(", a[i - 1]))
            i--;
        return kiln_errorf(err, KILN_ERR_INVALID,
                           "%s: the build resolves to other %s than when it was paused (then "
                           "%s\"%.80s\", now %s\"%.80s\")",
                           path, what, i ? "..." : "", a + i, i ? "..." : "", b + i);
    }
    char *a = json_dumps(then, JSON_ENCODE_ANY | JSON_COMPACT);
    char *b = json_dumps(now, JSON_ENCODE_ANY | JSON_COMPACT);
    kiln_status st = kiln_errorf(err, KILN_ERR_INVALID,
                                 "%s: the build resolves to other %s than when it was paused "
                                 "(then %s, now %s)",
                                 path, what, a ? a : "?", b ? b : "?");
    free(a);
    free(b);
    return st;
}

kiln_status kiln_paused_state_check(const kiln_paused_state *s, const kiln_ctx *ctx,
                                    const kiln_pipeline *p, kiln_error *err)
{
    const state_priv *pv = s->priv;
    const char *bad = NULL;
    kiln_status st = KILN_OK;
    json_t *files = json_object_get(pv->meta, "files");
    static const char *const kinds[] = {"manifests", "plugins"};
    for (unsigned k = 0; k < 2 && st == KILN_OK; k++) {
        json_t *then = json_array(), *now = file_paths(ctx, p, kinds[k], &bad), *e;
        size_t i;
        json_array_foreach(json_object_get(files, kinds[k]), i, e)
            json_array_append(then, json_object_get(e, "path"));
        st = same(pv->path, kinds[k] /* "manifests", "plugins" */, then, now, err);
        json_decref(then);
        json_decref(now);
    }
    if (st != KILN_OK)
        return st;
    json_t *now = resolved_json(ctx, p, &bad);
    if (!now)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    json_t *then = json_object_get(pv->meta, "resolved");
    static const struct {
        const char *key, *what;
    } parts[] = {{"pipeline", "passes"},
                 {"session_options", "session options"},
                 {"tuners", "tuners"},
                 {"breakpoints", "breakpoints"},
                 {"bisect_limit", "bisect limit"}};
    for (unsigned i = 0; i < KILN_ARRAY_LEN(parts) && st == KILN_OK; i++)
        st = same(pv->path, parts[i].what, json_object_get(then, parts[i].key),
                  json_object_get(now, parts[i].key), err);
    json_decref(now);
    return st;
}

void kiln_paused_state_fini(kiln_paused_state *s)
{
    state_priv *pv = s->priv;
    if (s->graph)
        kiln_graph_destroy(s->graph);
    if (pv) {
        json_decref(pv->meta);
        kiln__free(pv->path);
        kiln__free(pv->sel);
        kiln__free(pv->sel_en);
        kiln__free(pv->popts);
        kiln__free(pv->opts);
        kiln__free(pv);
    }
    memset(s, 0, sizeof(*s));
}

/*
 * runprof.c - what kiln makes of a runtime's run profile (kiln_runtime.h,
 * kiln_run_profile): the Chrome trace-event file of `kiln run --trace` and
 * the report's "run" section (`kiln run --report`; docs/outputs.md).
 */
#include "runprof.h"

#include "fileio.h"
#include <jansson.h>
#include <string.h>

/* ---- Chrome trace ----------------------------------------------------------------- */

static kiln_status write_json(FILE *f, void *ud, kiln_error *err)
{
    if (json_dumpf((json_t *)ud, f, JSON_COMPACT | JSON_PRESERVE_ORDER) != 0)
        return kiln_errorf(err, KILN_ERR_IO, "cannot write the trace");
    fputc('\n', f);
    return KILN_OK;
}

/* Microseconds since @p t0 (the trace's time unit). */
static double us(int64_t ns, int64_t t0)
{
    return (double)(ns - t0) / 1e3;
}

static json_t *metadata(const char *what, uint32_t tid, const char *name)
{
    json_t *e = json_object(), *a = json_object();
    json_object_set_new(e, "name", json_string(what));
    json_object_set_new(e, "ph", json_string("M"));
    json_object_set_new(e, "pid", json_integer(1));
    json_object_set_new(e, "tid", json_integer(tid));
    json_object_set_new(a, "name", json_string(name));
    json_object_set_new(e, "args", a);
    return e;
}

static json_t *slice(const kiln_prof_task *t, int64_t t0)
{
    kiln_graph *g = (kiln_graph *)(uintptr_t)t->graph;
    json_t *e = json_object(), *a = json_object();
    json_object_set_new(e, "name", json_string(kiln_node_name_str(g, t->node)));
    json_object_set_new(e, "cat", json_string(kiln_node_op_str(g, t->node)));
    json_object_set_new(e, "ph", json_string("X"));
    json_object_set_new(e, "pid", json_integer(1));
    json_object_set_new(e, "tid", json_integer(t->stream));
    json_object_set_new(e, "ts", json_real(us(t->start_ns, t0)));
    json_object_set_new(e, "dur", json_real(us(t->end_ns, t->start_ns)));
    json_object_set_new(a, "op", json_string(kiln_node_op_str(g, t->node)));
    json_object_set_new(a, "engine", t->engine ? json_string(t->engine) : json_null());
    json_object_set_new(a, "graph", json_string(kiln_graph_name(g)));
    json_object_set_new(a, "run", json_integer(t->run));
    json_object_set_new(a, "depth", json_integer(t->depth));
    json_object_set_new(e, "args", a);
    return e;
}

/* The start ("s", inside the sender's slice) or finish ("f", bound to the receiver's). */
static json_t *flow(const kiln_run_profile *p, uint32_t k, bool start, int64_t t0)
{
    const kiln_prof_flow *f = &p->flows[k];
    const kiln_prof_task *t = &p->tasks[start ? f->send : f->recv];
    json_t *e = json_object();
    char name[32];
    snprintf(name, sizeof(name), "event %u", f->event);
    json_object_set_new(e, "name", json_string(name));
    json_object_set_new(e, "cat", json_string("event"));
    json_object_set_new(e, "ph", json_string(start ? "s" : "f"));
    json_object_set_new(e, "id", json_integer(k));
    json_object_set_new(e, "pid", json_integer(1));
    json_object_set_new(e, "tid", json_integer(t->stream));
    /* the start inside the sender's slice, just before its end; the finish at the
     * receiver's start, bound to the slice that begins there ("bp":"e") */
    int64_t ts = start ? (t->end_ns > t->start_ns ? t->end_ns - 1 : t->start_ns) : t->start_ns;
    json_object_set_new(e, "ts", json_real(us(ts, t0)));
    if (!start)
        json_object_set_new(e, "bp", json_string("e"));
    return e;
}

kiln_status kiln__trace_write(const kiln_run_profile *p, const char *runtime, const char *path,
                              kiln_error *err)
{
    json_t *doc = json_array();
    if (!doc)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    int64_t t0 = p->task_count ? p->tasks[0].start_ns : 0;
    for (uint32_t i = 0; i < p->task_count; i++)
        if (p->tasks[i].start_ns < t0)
            t0 = p->tasks[i].start_ns;
    char name[96];
    snprintf(name, sizeof(name), "kiln run (%s runtime)", runtime ? runtime : "?");
    json_array_append_new(doc, metadata("process_name", 0, name));
    for (uint32_t s = 0; s < (p->stream_count ? p->stream_count : 1); s++) {
        snprintf(name, sizeof(name), "stream %u", s);
        json_array_append_new(doc, metadata("thread_name", s, name));
    }
    for (uint32_t i = 0; i < p->task_count; i++)
        json_array_append_new(doc, slice(&p->tasks[i], t0));
    for (uint32_t k = 0; k < p->flow_count; k++) {
        if (p->flows[k].send >= p->task_count || p->flows[k].recv >= p->task_count)
            continue;
        json_array_append_new(doc, flow(p, k, true, t0));
        json_array_append_new(doc, flow(p, k, false, t0));
    }
    kiln_status st = kiln_file_write_atomic(path, write_json, doc, err);
    json_decref(doc);
    return st;
}

/* ---- the report's "run" section ------------------------------------------------- */

/* Add one task's time to the entry @p key of @p obj ({"count", "total_ms"}). */
static json_t *add_time(json_t *obj, const char *key, double ms)
{
    json_t *e = json_object_get(obj, key);
    if (!e) {
        e = json_object();
        json_object_set_new(e, "count", json_integer(0));
        json_object_set_new(e, "total_ms", json_real(0));
        json_object_set_new(obj, key, e);
    }
    json_object_set_new(e, "count", json_integer(json_integer_value(json_object_get(e, "count")) + 1));
    json_object_set_new(e, "total_ms",
                        json_real(json_real_value(json_object_get(e, "total_ms")) + ms));
    return e;
}

json_t *kiln__run_report(const kiln_run_profile *p, const char *runtime)
{
    json_t *run = json_object(), *ops = json_object(), *nodes = json_object(),
           *mem = json_array();
    json_object_set_new(run, "runtime", json_string(runtime ? runtime : ""));
    json_object_set_new(run, "runs", json_integer(p->run_count));
    json_object_set_new(run, "streams", json_integer(p->stream_count));
    json_object_set_new(run, "tasks", json_integer(p->task_count));
    json_object_set_new(run, "truncated", json_boolean(p->truncated));
    int64_t first = INT64_MAX, last = INT64_MIN;
    for (uint32_t i = 0; i < p->task_count; i++) {
        const kiln_prof_task *t = &p->tasks[i];
        kiln_graph *g = (kiln_graph *)(uintptr_t)t->graph;
        double ms = (double)(t->end_ns - t->start_ns) / 1e6;
        add_time(ops, kiln_node_op_str(g, t->node), ms);
        char key[1024];
        snprintf(key, sizeof(key), "%s/%s", kiln_graph_name(g), kiln_node_name_str(g, t->node));
        json_t *e = add_time(nodes, key, ms);
        if (!json_object_get(e, "node")) {
            json_object_set_new(e, "node", json_string(kiln_node_name_str(g, t->node)));
            json_object_set_new(e, "graph", json_string(kiln_graph_name(g)));
            json_object_set_new(e, "op", json_string(kiln_node_op_str(g, t->node)));
            json_object_set_new(e, "engine", t->engine ? json_string(t->engine) : json_null());
            json_object_set_new(e, "stream", json_integer(t->stream));
            json_object_set_new(e, "depth", json_integer(t->depth));
        }
        if (t->depth == 0 && t->start_ns < first)
            first = t->start_ns;
        if (t->depth == 0 && t->end_ns > last)
            last = t->end_ns;
    }
    /* nodes as an array, in first-execution order */
    json_t *list = json_array();
    const char *k;
    json_t *v;
    json_object_foreach(nodes, k, v)
        json_array_append(list, v);
    json_decref(nodes);
    json_object_set_new(run, "span_ms", json_real(last > first ? (double)(last - first) / 1e6 : 0));
    json_object_set_new(run, "ops", ops);
    json_object_set_new(run, "nodes", list);
    for (uint32_t i = 0; i < p->memory_count; i++) {
        const kiln_prof_memory *m = &p->memory[i];
        json_t *o = json_object();
        json_object_set_new(o, "memory_type", json_string(m->memory_type ? m->memory_type : ""));
        json_object_set_new(o, "arena_bytes", json_integer(m->arena_bytes));
        json_object_set_new(o, "own_bytes", json_integer(m->own_bytes));
        json_object_set_new(o, "peak_bytes", json_integer(m->arena_bytes + m->own_bytes));
        json_array_append_new(mem, o);
    }
    json_object_set_new(run, "memory", mem);
    return run;
}

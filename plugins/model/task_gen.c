/*
 * task_gen.c - TaskGenerator (GE TaskGenerator, seed §5.5): the task of
 * every node from its engine (kiln_engine_generate_task), and the per-stream
 * task sequences the model file stores.
 *
 * Per node of the root graph (scheduled: kiln_schedule_*) and of each
 * subgraph, the pass writes
 *   _kiln_task_kind  int, a kiln_task_kind
 *   _kiln_kernel     string, the engine's kernel (KERNEL tasks)
 *   _kiln_task_args  uint8 tensor of rank 1, the engine's argument bytes
 *                    (only when the engine wrote any)
 *   _kiln_task_event_id / _kiln_task_target_stream_id  for the RTS kinds
 * Data, RefData, Const, Constant, Variable and NetOutput get no task, nor
 * does a node whose _kiln_stream_id is -1 once StreamAllocator has run.  A
 * node no engine claims (If, PartitionedCall, a copy or no-op the runtime
 * performs itself) gets no task attribute: `_kiln_task_kind` NONE means
 * "nothing to execute" to a runtime, which such a node is not.  The model
 * file still lists it in its stream's sequence, as a runtime task (kind NONE
 * with the models of its subgraphs, docs/model_format.md).
 *
 * Generation runs in parallel (kiln_pass_parallel_for, the kernel's pool)
 * for graphs of at least `parallel_min` nodes (option, default 2048; smaller
 * ones on the calling thread, which starts no thread for a small model):
 * each node's task is asked of its engine into a slot of its own, then the
 * slots are written on the graph in node-id order on the calling thread,
 * so the result is the same for every --threads value.  Node-id order (the
 * nodes' memory in address order) rather than the execution order: a node's
 * task attributes are its own, so the order of the writes changes nothing.
 */
#include "kmodel.h"

#include <stdlib.h>
#include <string.h>

int km_has_streams(const kiln_graph *g)
{
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n))
        if (kiln_attrs_type(kiln_node_attrs(g, n), KM_ATTR_STREAM) == KILN_ATTR_INT)
            return 1;
    return 0;
}

/* Stream of @p n: -1 = no task; 0 when streams were never assigned. */
static int64_t node_stream(const kiln_graph *g, kiln_node_id n, int streams)
{
    int64_t s = 0;
    if (!streams)
        return 0;
    if (!kiln_attrs_get_int(kiln_node_attrs(g, n), KM_ATTR_STREAM, &s))
        return -1;
    return s < 0 ? -1 : s;
}

/*
 * The nodes of @p g: for the root, the schedule analysis's (kiln_schedule_get:
 * `_kiln_id` when every node has one, else topological, checked against the
 * edges and the events: a schedule that fails fails the pass); for a
 * subgraph, its topological order.  *out is malloc'ed.  O(n) after the
 * analysis.
 */
static kiln_status graph_order(kiln_graph *g, kiln_node_id **out, uint32_t *count,
                               kiln_error *err)
{
    uint32_t n = 0;
    kiln_node_id *v;
    if (!kiln_graph_parent(g)) {
        const kiln_schedule *s = NULL;
        kiln_status st = kiln_schedule_get(g, &s, err);
        if (st != KILN_OK)
            return st;
        n = kiln_schedule_step_count(s);
        if (!(v = malloc(sizeof(*v) * (n + 1u))))
            return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
        for (uint32_t i = 0; i < n; i++)
            v[i] = kiln_schedule_node(s, i);
    } else {
        const kiln_node_id *order = NULL;
        kiln_status st = kiln_graph_topo_order(g, &order, &n, err);
        if (st != KILN_OK)
            return st;
        if (!(v = malloc(sizeof(*v) * (n + 1u))))
            return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
        memcpy(v, order, sizeof(*v) * n);
    }
    *out = v;
    *count = n;
    return KILN_OK;
}

static void clear_task(kiln_graph *g, kiln_node_id n)
{
    kiln_attrs *a = kiln_node_attrs_mut(g, n);
    if (!a)
        return;
    kiln_attrs_remove(a, KM_ATTR_TASK_KIND);
    kiln_attrs_remove(a, KM_ATTR_KERNEL);
    kiln_attrs_remove(a, KM_ATTR_TASK_ARGS);
    kiln_attrs_remove(a, KM_ATTR_TASK_EVENT);
    kiln_attrs_remove(a, KM_ATTR_TASK_TARGET);
}

typedef struct gen_stats {
    int64_t tasks, kernels, runtime, none, events;
} gen_stats;

/* One node's task, generated in a worker (no graph edit there). */
typedef struct gen_slot {
    kiln_node_id node;
    bool skip;        /* data-like or on no stream: no task, its task attributes cleared */
    bool engine;      /* an engine claims the node (else the runtime performs it) */
    kiln_task_desc t; /* the engine's task; t.args points into args below */
    uint8_t *args;    /* malloc'ed copy of the argument bytes, or NULL */
} gen_slot;

typedef struct gen_run {
    kiln_graph *g;
    gen_slot *slots;
    km_data_like dl;
    int streams;
} gen_run;

/* Worker: the task of slot @p i from its node's engine (reads the graph only). */
static kiln_status gen_task(void *arg, uint32_t i, kiln_error *err)
{
    gen_run *r = arg;
    gen_slot *sl = &r->slots[i];
    sl->skip =
        km_data_like_has(&r->dl, r->g, sl->node) || node_stream(r->g, sl->node, r->streams) < 0;
    if (sl->skip)
        return KILN_OK;
    sl->engine = kiln_engine_for_node(r->g, sl->node) != NULL;
    if (!sl->engine)
        return KILN_OK;
    uint8_t buf[KM_TASK_ARGS_CAP];
    memset(&sl->t, 0, sizeof(sl->t));
    sl->t.struct_size = sizeof(sl->t);
    sl->t.args = buf;
    sl->t.args_capacity = KM_TASK_ARGS_CAP;
    kiln_status st = kiln_engine_generate_task(r->g, sl->node, &sl->t, NULL, err);
    if (st != KILN_OK)
        return st;
    sl->t.args = NULL;
    if (sl->t.args_size) {
        if (!(sl->args = malloc(sl->t.args_size)))
            return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
        memcpy(sl->args, buf, sl->t.args_size);
    }
    return KILN_OK;
}

/* Record slot @p sl's task on its node (calling thread, graph order): each
 * task attribute is set, or removed when the task has none (what clearing
 * them all first and setting some gives, without the extra edits). */
static kiln_status apply_slot(kiln_graph *g, const gen_slot *sl, gen_stats *gs, kiln_error *err)
{
    kiln_node_id n = sl->node;
    gs->tasks++;
    if (!sl->engine) {
        clear_task(g, n);
        gs->runtime++; /* the runtime performs it: no engine task */
        return KILN_OK;
    }
    kiln_attrs *a = kiln_node_attrs_mut(g, n);
    if (!a)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    const kiln_task_desc *t = &sl->t;
    kiln_status st = kiln_attrs_set_int(a, KM_ATTR_TASK_KIND, t->kind);
    if (st == KILN_OK && t->kind == KILN_TASK_KERNEL) {
        gs->kernels++;
        st = kiln_attrs_set_string(a, KM_ATTR_KERNEL, t->kernel_name);
    } else {
        kiln_attrs_remove(a, KM_ATTR_KERNEL);
    }
    if (t->kind == KILN_TASK_NONE)
        gs->none++;
    if (st == KILN_OK && t->args_size) {
        int64_t dim = t->args_size;
        kiln_tensor_value v = {KILN_DT_UINT8, 1, &dim, sl->args, t->args_size};
        st = kiln_attrs_set_tensor(a, KM_ATTR_TASK_ARGS, &v);
    } else {
        kiln_attrs_remove(a, KM_ATTR_TASK_ARGS);
    }
    if (st == KILN_OK && (t->kind == KILN_TASK_EVENT_RECORD || t->kind == KILN_TASK_EVENT_WAIT))
        st = kiln_attrs_set_int(a, KM_ATTR_TASK_EVENT, t->event_id);
    else
        kiln_attrs_remove(a, KM_ATTR_TASK_EVENT);
    if (st == KILN_OK && t->kind == KILN_TASK_STREAM_SWITCH)
        st = kiln_attrs_set_int(a, KM_ATTR_TASK_TARGET, t->target_stream_id);
    else
        kiln_attrs_remove(a, KM_ATTR_TASK_TARGET);
    return st;
}

/* Events a node waits for / records: entries of a list_int attribute. */
static int64_t event_count(const kiln_graph *g, kiln_node_id n, const char *key)
{
    const int64_t *v;
    uint32_t c = 0;
    return kiln_attrs_get_list_int(kiln_node_attrs(g, n), key, &v, &c) ? c : 0;
}

/*
 * The nodes are visited in node-id order (the graph's memory in address
 * order, each node read once per sweep): each node's task and attributes are
 * its own, so the order changes no result.
 */
static kiln_status gen_graph(kiln_pass_ctx *ctx, kiln_graph *g, int streams, int64_t par_min,
                             gen_stats *gs, kiln_error *err)
{
    kiln_node_id *order = NULL;
    uint32_t count = 0, k = 0, limit = kiln_graph_id_limit(g);
    kiln_status st = graph_order(g, &order, &count, err);
    gen_run r = {g, st == KILN_OK ? calloc((size_t)count + 1, sizeof(gen_slot)) : NULL, {{0}},
                 streams};
    uint8_t *member = st == KILN_OK ? calloc((size_t)limit + 1, 1) : NULL;
    if (st == KILN_OK && (!r.slots || !member))
        st = kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    km_data_like_init(&r.dl, g);
    for (uint32_t i = 0; st == KILN_OK && i < count; i++)
        if (order[i] < limit)
            member[order[i]] = 1;
    for (kiln_node_id n = 0; st == KILN_OK && n < limit; n++)
        if (member[n])
            r.slots[k++].node = n;
    free(member);
    /* the engines are asked in parallel (from par_min nodes: below, threads
     * cost more than they save); the graph is written below */
    if (st == KILN_OK && k >= par_min)
        st = kiln_pass_parallel_for(ctx, k, gen_task, &r);
    for (uint32_t i = 0; st == KILN_OK && k < par_min && i < k; i++)
        st = gen_task(&r, i, err);
    for (uint32_t i = 0; st == KILN_OK && i < k; i++) {
        if (r.slots[i].skip) {
            clear_task(g, r.slots[i].node);
            continue;
        }
        st = apply_slot(g, &r.slots[i], gs, err);
        gs->events += event_count(g, r.slots[i].node, KM_ATTR_SEND) +
                      event_count(g, r.slots[i].node, KM_ATTR_RECV);
    }
    for (uint32_t i = 0; r.slots && i < k; i++)
        free(r.slots[i].args);
    free(r.slots);
    free(order);
    return st;
}

static const kiln_option_def task_gen_options[] = {
    {sizeof(kiln_option_def), KILN_OPT_INT, "parallel_min", "2048",
     "nodes of one graph from which the engines' tasks are generated on the thread pool "
     "(kiln.threads); smaller graphs are generated on the calling thread",
     1, 4294967295.0},
};

static kiln_status task_gen_create(const kiln_options *opts, kiln_error *err, void **inst)
{
    int64_t *m = malloc(sizeof(*m));
    if (!m)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    if (!opts || !kiln_options_get_int(opts, "parallel_min", m))
        *m = 2048;
    *inst = m;
    return KILN_OK;
}

static void task_gen_destroy(void *inst)
{
    free(inst);
}

static kiln_pass_result task_generator_run(void *inst, kiln_pass_ctx *ctx, kiln_graph *g)
{
    int64_t par_min = inst ? *(int64_t *)inst : 2048;
    kiln_error *err = kiln_pass_error(ctx);
    gen_stats gs = {0};
    kiln_status st = gen_graph(ctx, g, km_has_streams(g), par_min, &gs, err);
    for (uint32_t i = 0; st == KILN_OK && i < kiln_graph_all_subgraph_count(g); i++) {
        kiln_graph *sg = kiln_graph_all_subgraph(g, i);
        st = gen_graph(ctx, sg, km_has_streams(sg), par_min, &gs, err);
    }
    if (st != KILN_OK) {
        kiln_error_push(err, "TaskGenerator");
        return KILN_PASS_FAILED;
    }
    kiln_pass_stat_add(ctx, "tasks", gs.tasks);
    kiln_pass_stat_add(ctx, "kernel_tasks", gs.kernels);
    kiln_pass_stat_add(ctx, "runtime_tasks", gs.runtime);
    kiln_pass_stat_add(ctx, "event_tasks", gs.events);
    return KILN_PASS_CHANGED;
}

const kiln_pass_desc km_task_generator_pass = {
    .struct_size = sizeof(kiln_pass_desc),
    .kind = KILN_PASS_KIND_GRAPH,
    .name = "TaskGenerator",
    .summary = "the task of every node from its engine (kiln_engine_generate_task): "
               "_kiln_task_kind, _kiln_kernel, _kiln_task_args",
    .flags = KILN_PASS_PRESERVES_CFG | KILN_PASS_NO_SUBGRAPHS,
    .option_count = sizeof(task_gen_options) / sizeof(task_gen_options[0]),
    .options = task_gen_options,
    .create = task_gen_create,
    .destroy = task_gen_destroy,
    .run_graph = task_generator_run,
};

/* ---- per-stream sequences ------------------------------------------------ */

void km_sequences_free(km_sequences *s)
{
    for (uint32_t i = 0; s->streams && i < s->stream_count; i++)
        free(s->streams[i].tasks);
    free(s->streams);
    memset(s, 0, sizeof(*s));
}

static int push(km_stream_seq *q, uint32_t kind, kiln_node_id n, uint32_t ev)
{
    if (q->count == q->cap) {
        uint32_t nc = q->cap ? q->cap * 2 : 16;
        km_task *t = realloc(q->tasks, sizeof(*t) * nc);
        if (!t)
            return 0;
        q->tasks = t;
        q->cap = nc;
    }
    q->tasks[q->count++] = (km_task){kind, n, ev};
    return 1;
}

/* Add the events of list @p key of @p n as tasks of @p kind to @p q. */
static int push_events(kiln_graph *g, kiln_node_id n, const char *key, uint32_t kind,
                       km_stream_seq *q, km_sequences *s)
{
    const int64_t *v;
    uint32_t c = 0;
    if (!kiln_attrs_get_list_int(kiln_node_attrs(g, n), key, &v, &c))
        return 1;
    for (uint32_t k = 0; k < c; k++) {
        if (v[k] < 0 || v[k] >= UINT32_MAX)
            continue;
        if ((uint32_t)v[k] + 1 > s->event_count)
            s->event_count = (uint32_t)v[k] + 1;
        if (!push(q, kind, n, (uint32_t)v[k]))
            return 0;
    }
    return 1;
}

kiln_status km_sequences_build(kiln_graph *g, km_sequences *s, kiln_error *err)
{
    memset(s, 0, sizeof(*s));
    int streams = km_has_streams(g);
    kiln_node_id *order = NULL;
    uint32_t count = 0;
    kiln_status st = graph_order(g, &order, &count, err);
    if (st != KILN_OK)
        return st;
    uint32_t ns = 1;
    for (uint32_t i = 0; i < count; i++) {
        int64_t sid = node_stream(g, order[i], streams);
        if (sid >= 0 && sid < (int64_t)1 << 20 && (uint32_t)sid + 1 > ns)
            ns = (uint32_t)sid + 1;
    }
    int64_t declared;
    if (!kiln_graph_parent(g) &&
        kiln_attrs_get_int(kiln_graph_attrs(g), KM_ATTR_STREAM_NUM, &declared) && declared > ns &&
        declared < (int64_t)1 << 20)
        ns = (uint32_t)declared;
    if (!(s->streams = calloc(ns, sizeof(*s->streams)))) {
        free(order);
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    }
    s->stream_count = ns;
    km_data_like dl;
    km_data_like_init(&dl, g);
    int ok = 1;
    for (uint32_t i = 0; ok && i < count; i++) {
        kiln_node_id n = order[i];
        int64_t kind, sid = node_stream(g, n, streams);
        if (sid < 0 || sid >= ns || km_data_like_has(&dl, g, n))
            continue;
        if (!kiln_attrs_get_int(kiln_node_attrs(g, n), KM_ATTR_TASK_KIND, &kind))
            kind = KILN_TASK_NONE; /* the runtime performs it (no engine task) */
        if (kind < 0 || kind >= KILN_TASK_KIND_COUNT) {
            free(order);
            km_sequences_free(s);
            return kiln_errorf(err, KILN_ERR_INVALID,
                               "graph %s node %s: _kiln_task_kind %lld is not a kiln_task_kind",
                               kiln_graph_name(g), kiln_node_name_str(g, n), (long long)kind);
        }
        km_stream_seq *q = &s->streams[sid];
        ok = push_events(g, n, KM_ATTR_RECV, KILN_TASK_EVENT_WAIT, q, s) &&
             push(q, (uint32_t)kind, n, 0) &&
             push_events(g, n, KM_ATTR_SEND, KILN_TASK_EVENT_RECORD, q, s);
    }
    free(order);
    int64_t evn;
    if (!kiln_graph_parent(g) && kiln_attrs_get_int(kiln_graph_attrs(g), KM_ATTR_EVENT_NUM, &evn) &&
        evn > s->event_count && evn < UINT32_MAX)
        s->event_count = (uint32_t)evn;
    if (!ok) {
        km_sequences_free(s);
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    }
    return KILN_OK;
}

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
 * Each node's engine is asked once (kiln_engine_generate_task, which names
 * the engine it chose) and its task written at once, node after node in
 * node-id order (the nodes' memory in address order) rather than the
 * execution order: a node's task attributes are its own, so the order of the
 * writes changes nothing.  Removing a task attribute a node may still carry
 * is skipped for the keys no node had when the pass started (never
 * interned).  O(n) time; O(n) bytes of scratch (one flag per node id).
 *
 * On the thread pool (kiln_pass_parallel_for) for graphs of at least
 * `parallel_min` nodes (option; default 4294967295, i.e. never): blocks of
 * GEN_BLOCK nodes are generated in chunks on the pool, then written in
 * node-id order on the calling thread, so the result is the same for every
 * --threads value.  It costs more than it saves: each query takes the
 * engine index's lock and reads the node twice (1M nodes, 2 cores: 0.26 s
 * CPU and 0.30 s wall against 0.19 s and 0.24 s on the calling thread).
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
 * The order of @p g's nodes: for the root, the schedule analysis's
 * (kiln_schedule_get: `_kiln_id` when every node has one, else topological,
 * checked against the edges and the events: a schedule that fails fails the
 * pass); for a subgraph, its topological order.  Node i of it is
 * order_node(): the schedule's step i when *sched is set, else (*topo)[i].
 * O(n) after the analysis.
 */
static kiln_status order_view(kiln_graph *g, const kiln_schedule **sched,
                              const kiln_node_id **topo, uint32_t *count, kiln_error *err)
{
    *sched = NULL;
    *topo = NULL;
    if (kiln_graph_parent(g))
        return kiln_graph_topo_order(g, topo, count, err);
    kiln_status st = kiln_schedule_get(g, sched, err);
    *count = st == KILN_OK ? kiln_schedule_step_count(*sched) : 0;
    return st;
}

static kiln_node_id order_node(const kiln_schedule *sched, const kiln_node_id *topo, uint32_t i)
{
    return sched ? kiln_schedule_node(sched, i) : topo[i];
}

/* The nodes of @p g in order_view's order; *out is malloc'ed. */
static kiln_status graph_order(kiln_graph *g, kiln_node_id **out, uint32_t *count,
                               kiln_error *err)
{
    const kiln_schedule *s;
    const kiln_node_id *topo;
    uint32_t n = 0;
    kiln_status st = order_view(g, &s, &topo, &n, err);
    if (st != KILN_OK)
        return st;
    kiln_node_id *v = malloc(sizeof(*v) * (n + 1u));
    if (!v)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    for (uint32_t i = 0; i < n; i++)
        v[i] = order_node(s, topo, i);
    *out = v;
    *count = n;
    return KILN_OK;
}

/* The task attributes (bits of gen_run.had). */
enum { TK_KIND = 1, TK_KERNEL = 2, TK_ARGS = 4, TK_EVENT = 8, TK_TARGET = 16 };

static const char *const task_keys[] = {KM_ATTR_TASK_KIND, KM_ATTR_KERNEL, KM_ATTR_TASK_ARGS,
                                        KM_ATTR_TASK_EVENT, KM_ATTR_TASK_TARGET};

/* The task attributes some node may carry when the pass starts: a key never
 * interned is on no node (an attribute key is a symbol), and a key the pass
 * writes is on the nodes it wrote it to only, each visited once; so removing
 * the others is only ever needed for these. */
static unsigned task_keys_present(const kiln_graph *g)
{
    unsigned had = 0;
    for (unsigned i = 0; i < sizeof(task_keys) / sizeof(task_keys[0]); i++)
        if (kiln_sym_lookup(g, task_keys[i]))
            had |= 1u << i;
    return had;
}

/* Remove the task attributes of @p mask (bits TK_*) from @p n. */
static void clear_task(kiln_graph *g, kiln_node_id n, unsigned mask)
{
    if (!mask || !kiln_attrs_count(kiln_node_attrs(g, n)))
        return;
    kiln_attrs *a = kiln_node_attrs_mut(g, n);
    for (unsigned i = 0; a && i < sizeof(task_keys) / sizeof(task_keys[0]); i++)
        if (mask & (1u << i))
            kiln_attrs_remove(a, task_keys[i]);
}

typedef struct gen_stats {
    int64_t tasks, kernels, runtime, none, events;
} gen_stats;

enum { GEN_SKIP, GEN_RUNTIME, GEN_TASK };

/* One node's task as generated (no graph edit there): 32 bytes. */
typedef struct gen_slot {
    kiln_node_id node;
    uint8_t state;       /* GEN_*: SKIP data-like or on no stream (task attributes
                          * removed); RUNTIME no engine claims it; TASK below */
    uint8_t kind;        /* kiln_task_kind (checked < KILN_TASK_KIND_COUNT) */
    uint32_t extra;      /* event_id (EVENT_*) or target_stream_id (STREAM_SWITCH) */
    uint32_t args_size;  /* bytes at args */
    const char *kernel;  /* KERNEL: the engine's kernel name (lives with the context) */
    const uint8_t *args; /* the argument bytes: the caller's buffer, or malloc'ed */
} gen_slot;

typedef struct gen_run {
    kiln_graph *g;
    gen_slot *slots;
    uint32_t count; /* slots of the current block */
    km_data_like dl;
    int streams;
    unsigned had;        /* task_keys_present */
    bool send, recv;     /* some node may carry _send_event_ids / _recv_event_ids */
    kiln_error *scratch; /* serial generation: the first query's error (gen_node) */
} gen_run;

/*
 * The task of node sl->node from its engine (reads the graph only).  The
 * engine is asked once: its kiln_engine_generate_task names the engine it
 * chose, so the usual case is one query.  Only when that fails is the old
 * order replayed -- kiln_engine_for_node: no engine claims the node (a
 * runtime task), else the engine's failure reported into @p err by a second
 * kiln_engine_generate_task -- so @p err reads exactly as it always did.
 * @p scratch takes the first query's error (cleared after it).  With @p buf
 * (KM_TASK_ARGS_CAP bytes) the argument bytes stay there; without, they are
 * malloc'ed (sl->args, the caller frees).
 */
static kiln_status gen_node(const gen_run *r, gen_slot *sl, uint8_t *buf, kiln_error *scratch,
                            kiln_error *err)
{
    kiln_node_id n = sl->node;
    if (km_data_like_has(&r->dl, r->g, n) || node_stream(r->g, n, r->streams) < 0) {
        sl->state = GEN_SKIP;
        return KILN_OK;
    }
    uint8_t local[KM_TASK_ARGS_CAP];
    uint8_t *b = buf ? buf : local;
    kiln_task_desc t;
    memset(&t, 0, sizeof(t));
    t.struct_size = sizeof(t);
    t.args = b;
    t.args_capacity = KM_TASK_ARGS_CAP;
    const char *engine = NULL;
    kiln_status st = kiln_engine_generate_task(r->g, n, &t, &engine, scratch);
    if (st != KILN_OK) {
        kiln_error_clear(scratch);
        if (!kiln_engine_for_node(r->g, n)) {
            sl->state = GEN_RUNTIME;
            return KILN_OK;
        }
        memset(&t, 0, sizeof(t));
        t.struct_size = sizeof(t);
        t.args = b;
        t.args_capacity = KM_TASK_ARGS_CAP;
        if ((st = kiln_engine_generate_task(r->g, n, &t, NULL, err)) != KILN_OK)
            return st;
    }
    sl->state = GEN_TASK;
    sl->kind = (uint8_t)t.kind;
    sl->extra = t.kind == KILN_TASK_STREAM_SWITCH ? t.target_stream_id : t.event_id;
    sl->kernel = t.kernel_name;
    sl->args_size = t.args_size;
    sl->args = NULL;
    if (t.args_size && buf) {
        sl->args = buf;
    } else if (t.args_size) {
        uint8_t *copy = malloc(t.args_size);
        if (!copy)
            return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
        memcpy(copy, b, t.args_size);
        sl->args = copy;
    }
    return KILN_OK;
}

/* Events a node waits for / records: entries of a list_int attribute. */
static int64_t event_count(const kiln_graph *g, kiln_node_id n, const char *key)
{
    const int64_t *v;
    uint32_t c = 0;
    return kiln_attrs_get_list_int(kiln_node_attrs(g, n), key, &v, &c) ? c : 0;
}

/* Record slot @p sl on its node (calling thread, node-id order): each task
 * attribute is set, or removed when the task has none (what clearing them
 * all first and setting some gives, without the extra edits). */
static kiln_status apply_slot(gen_run *r, const gen_slot *sl, gen_stats *gs, kiln_error *err)
{
    kiln_graph *g = r->g;
    kiln_node_id n = sl->node;
    if (sl->state == GEN_SKIP) {
        clear_task(g, n, r->had);
        return KILN_OK;
    }
    gs->tasks++;
    gs->events += (r->send ? event_count(g, n, KM_ATTR_SEND) : 0) +
                  (r->recv ? event_count(g, n, KM_ATTR_RECV) : 0);
    if (sl->state == GEN_RUNTIME) {
        clear_task(g, n, r->had);
        gs->runtime++; /* the runtime performs it: no engine task */
        return KILN_OK;
    }
    kiln_attrs *a = kiln_node_attrs_mut(g, n);
    if (!a)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    unsigned drop = 0; /* attributes the task has not, removed when present */
    kiln_status st = kiln_attrs_set_int(a, KM_ATTR_TASK_KIND, sl->kind);
    if (st == KILN_OK && sl->kind == KILN_TASK_KERNEL) {
        gs->kernels++;
        st = kiln_attrs_set_string(a, KM_ATTR_KERNEL, sl->kernel);
    } else {
        drop |= TK_KERNEL;
    }
    if (sl->kind == KILN_TASK_NONE)
        gs->none++;
    if (st == KILN_OK && sl->args_size) {
        int64_t dim = sl->args_size;
        kiln_tensor_value v = {KILN_DT_UINT8, 1, &dim, sl->args, sl->args_size};
        st = kiln_attrs_set_tensor(a, KM_ATTR_TASK_ARGS, &v);
    } else {
        drop |= TK_ARGS;
    }
    if (st == KILN_OK && (sl->kind == KILN_TASK_EVENT_RECORD || sl->kind == KILN_TASK_EVENT_WAIT))
        st = kiln_attrs_set_int(a, KM_ATTR_TASK_EVENT, sl->extra);
    else
        drop |= TK_EVENT;
    if (st == KILN_OK && sl->kind == KILN_TASK_STREAM_SWITCH)
        st = kiln_attrs_set_int(a, KM_ATTR_TASK_TARGET, sl->extra);
    else
        drop |= TK_TARGET;
    clear_task(g, n, drop & r->had);
    return st;
}

/* Parallel generation: slots [i * GEN_CHUNK, (i + 1) * GEN_CHUNK) of the block. */
#define GEN_CHUNK 512u
/* Nodes per parallel round (generated on the pool, then applied): bounds the
 * slots (32 bytes each) to this many whatever the graph's size. */
#define GEN_BLOCK (32u * GEN_CHUNK)

static kiln_status gen_chunk(void *arg, uint32_t i, kiln_error *err)
{
    gen_run *r = arg;
    uint32_t end = (i + 1) * GEN_CHUNK < r->count ? (i + 1) * GEN_CHUNK : r->count;
    for (uint32_t k = i * GEN_CHUNK; k < end; k++) {
        kiln_status st = gen_node(r, &r->slots[k], NULL, err, err);
        if (st != KILN_OK)
            return st;
    }
    return KILN_OK;
}

/* The members of @p g's order (order_view) as flags by node id; *count of them. */
static kiln_status mark_members(kiln_graph *g, uint8_t *member, uint32_t limit, uint32_t *count,
                                kiln_error *err)
{
    const kiln_schedule *s;
    const kiln_node_id *topo;
    uint32_t n = 0;
    kiln_status st = order_view(g, &s, &topo, &n, err);
    *count = 0;
    for (uint32_t i = 0; st == KILN_OK && i < n; i++) {
        kiln_node_id v = order_node(s, topo, i);
        if (v < limit && !member[v]) {
            member[v] = 1;
            ++*count;
        }
    }
    return st;
}

/*
 * The nodes of the graph's order are visited in node-id order (the graph's
 * memory in address order, each node read once): each node's task and
 * attributes are its own, so the order changes no result.  Below
 * @p par_min nodes each node is generated and applied in turn on the calling
 * thread; from it, blocks of GEN_BLOCK nodes are generated on the pool and
 * then applied in order.
 */
static kiln_status gen_graph(kiln_pass_ctx *ctx, kiln_graph *g, int streams, int64_t par_min,
                             unsigned had, kiln_error *scratch, gen_stats *gs, kiln_error *err)
{
    uint32_t limit = kiln_graph_id_limit(g), count = 0;
    uint8_t *member = calloc((size_t)limit + 1, 1);
    if (!member)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    kiln_status st = mark_members(g, member, limit, &count, err);
    gen_run r = {.g = g, .streams = streams, .had = had, .scratch = scratch};
    km_data_like_init(&r.dl, g);
    r.send = kiln_sym_lookup(g, KM_ATTR_SEND) != 0;
    r.recv = kiln_sym_lookup(g, KM_ATTR_RECV) != 0;
    bool par = st == KILN_OK && count >= par_min;
    if (st == KILN_OK && par && !(r.slots = malloc(sizeof(gen_slot) * GEN_BLOCK)))
        st = kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    if (st == KILN_OK && !par) {
        uint8_t buf[KM_TASK_ARGS_CAP];
        for (kiln_node_id n = 0; st == KILN_OK && n < limit; n++) {
            if (!member[n])
                continue;
            gen_slot sl = {.node = n};
            if ((st = gen_node(&r, &sl, buf, r.scratch, err)) == KILN_OK)
                st = apply_slot(&r, &sl, gs, err);
        }
    }
    for (kiln_node_id next = 0; st == KILN_OK && par && next < limit;) {
        r.count = 0;
        for (; next < limit && r.count < GEN_BLOCK; next++)
            if (member[next])
                r.slots[r.count++] = (gen_slot){.node = next};
        if (!r.count)
            break;
        st = kiln_pass_parallel_for(ctx, (r.count + GEN_CHUNK - 1) / GEN_CHUNK, gen_chunk, &r);
        for (uint32_t i = 0; st == KILN_OK && i < r.count; i++)
            st = apply_slot(&r, &r.slots[i], gs, err);
        for (uint32_t i = 0; i < r.count; i++)
            if (r.slots[i].state == GEN_TASK)
                free((void *)r.slots[i].args);
    }
    free(r.slots);
    free(member);
    return st;
}

static const kiln_option_def task_gen_options[] = {
    {sizeof(kiln_option_def), KILN_OPT_INT, "parallel_min", "4294967295",
     "nodes of one graph from which the engines' tasks are generated on the thread pool "
     "(kiln.threads); smaller graphs are generated on the calling thread, by default every "
     "graph (less CPU and, on a few cores, less time)",
     1, 4294967295.0},
};

static kiln_status task_gen_create(const kiln_options *opts, kiln_error *err, void **inst)
{
    int64_t *m = malloc(sizeof(*m));
    if (!m)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    if (!opts || !kiln_options_get_int(opts, "parallel_min", m))
        *m = 4294967295;
    *inst = m;
    return KILN_OK;
}

static void task_gen_destroy(void *inst)
{
    free(inst);
}

static kiln_pass_result task_generator_run(void *inst, kiln_pass_ctx *ctx, kiln_graph *g)
{
    int64_t par_min = inst ? *(int64_t *)inst : 4294967295;
    kiln_error *err = kiln_pass_error(ctx);
    gen_stats gs = {0};
    unsigned had = task_keys_present(g); /* before any is written */
    kiln_error *scratch = kiln_error_create();
    kiln_status st = scratch ? gen_graph(ctx, g, km_has_streams(g), par_min, had, scratch, &gs, err)
                             : kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    for (uint32_t i = 0; st == KILN_OK && i < kiln_graph_all_subgraph_count(g); i++) {
        kiln_graph *sg = kiln_graph_all_subgraph(g, i);
        st = gen_graph(ctx, sg, km_has_streams(sg), par_min, had, scratch, &gs, err);
    }
    if (scratch)
        kiln_error_destroy(scratch);
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

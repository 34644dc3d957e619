/*
 * plugin.c - libkiln_streams.so: the build-stage pass StreamAllocator (GE
 * StreamAllocator::AssignLogicalStreams, InsertSyncEvents, SplitStreams;
 * docs/streams.md, docs/build.md).
 *
 * It runs on the root graph and then on every subgraph (the pass manager's
 * order), each graph getting a schedule of its own: a subgraph (a branch, a
 * PartitionedCall body of the dynamic-shape partitioner) runs as a nested
 * model when its parent node runs, with its own streams 0..k-1 and events,
 * as GE runs a known-shape subgraph of a dynamic graph as a model of its own.
 * It writes the schedule attributes of docs/build.md and then proves the
 * result with the kernel's schedule analysis: kiln_schedule_get and
 * kiln_schedule_check fail the pass naming the unordered edge.
 */
#include "streams.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool sa_list_has(const char *list, const char *name)
{
    size_t nl = strlen(name);
    for (const char *p = list; p && *p;) {
        const char *c = strchr(p, ',');
        size_t len = c ? (size_t)(c - p) : strlen(p);
        if (len == nl && strncmp(p, name, nl) == 0)
            return true;
        p = c ? c + 1 : p + len;
    }
    return false;
}

const char *sa_node_str(const kiln_graph *g, kiln_node_id n, const char *key)
{
    const char *s = NULL;
    return kiln_attrs_get_string(kiln_node_attrs(g, n), key, &s) && s ? s : "";
}

void sa_names_init(sa_state *st)
{
    static const char *const no_task[SA_NO_TASK_OPS] = {
        "Data",     "RefData",    "AippData",    "Const",     "Constant",    "Variable",
        "VariableV2", "VarHandleOp", "NetOutput", "NoOp", "PlaceHolder", "End"};
    static const char *const data_like[SA_DATA_LIKE_OPS] = {
        "Const", "Constant", "Data", "RefData", "AippData", "Variable", "VariableV2",
        "VarHandleOp"};
    const kiln_graph *g = st->g;
    sa_names *nm = &st->nm;
    for (int i = 0; i < SA_NO_TASK_OPS; i++)
        nm->no_task[i] = kiln_sym_lookup(g, no_task[i]);
    for (int i = 0; i < SA_DATA_LIKE_OPS; i++)
        nm->data_like[i] = kiln_sym_lookup(g, data_like[i]);
    nm->engine = kiln_sym_lookup(g, SA_ATTR_ENGINE);
    nm->stream_label = kiln_sym_lookup(g, SA_ATTR_STREAM_LABEL);
    nm->user_label = kiln_sym_lookup(g, SA_ATTR_USER_STREAM_LABEL);
    nm->force_attach = kiln_sym_lookup(g, SA_ATTR_FORCE_ATTACH);
    nm->rts_label = kiln_sym_lookup(g, SA_ATTR_RTS_LABEL_NODE);
    nm->parallel_group = kiln_sym_lookup(g, SA_ATTR_PARALLEL_GROUP);
    nm->new_stream_id = kiln_sym_lookup(g, "NewStreamId");
    nm->task_num = kiln_sym_lookup(g, SA_ATTR_TASK_NUM);
}

bool sa_op_in(const kiln_graph *g, kiln_node_id n, const kiln_sym *ops, uint32_t cnt)
{
    kiln_sym op = kiln_node_op(g, n);
    for (uint32_t i = 0; i < cnt; i++)
        if (ops[i] && ops[i] == op)
            return true;
    return false;
}

const char *sa_sub_name(const sa_state *st, const sa_sub *s)
{
    const char *p = s->rank != UINT32_MAX ? kiln_graph_partition_name(st->g, s->rank)
                                          : kiln_node_name_str(st->g, s->node);
    return p ? p : "?";
}

bool sa_no_task(const sa_state *st, kiln_node_id n, const char *engine)
{
    if (engine && engine[0] && strcmp(engine, SA_GE_LOCAL) != 0 &&
        strcmp(engine, SA_INPUT_NODES) != 0 && strcmp(engine, "ENGINE_DEFAULT_DATA") != 0)
        return false;
    return sa_op_in(st->g, n, st->nm.no_task, SA_NO_TASK_OPS);
}

kiln_status sa_nomem(sa_state *st)
{
    return kiln_errorf(kiln_pass_error(st->ctx), KILN_ERR_NOMEM, "StreamAllocator: out of memory");
}

/* ---- options ---------------------------------------------------------------- */

static const kiln_option_def sa_options[] = {
    {sizeof(kiln_option_def), KILN_OPT_STRING, "independent", "",
     "engines with streams of their own (GE EngineConf independent), comma-separated", 0, 0},
    {sizeof(kiln_option_def), KILN_OPT_STRING, "attach", SA_GE_LOCAL,
     "engines whose subgraphs reuse any predecessor's stream (GE attach)", 0, 0},
    {sizeof(kiln_option_def), KILN_OPT_STRING, "skip_assign_stream", SA_GE_LOCAL,
     "engines whose nodes take their neighbours' stream or none (GE skip_assign_stream)", 0, 0},
    {sizeof(kiln_option_def), KILN_OPT_STRING, "max_parallel", "",
     "streams per engine, ENGINE:N,... (GE max_parallel_num; default 1)", 0, 0},
    {sizeof(kiln_option_def), KILN_OPT_INT, "max_task", "0",
     "tasks per stream before it is split (27 of them reserved, GE); 0: 1024, or 8192 in "
     "single-stream mode (GE's huge stream)",
     0, 1e9},
    {sizeof(kiln_option_def), KILN_OPT_BOOL, "untasked_on_stream", "false",
     "keep GE's stream on nodes without a task (Data, Const, NetOutput, NoOp); "
     "default: stream -1", 0, 0},
    {sizeof(kiln_option_def), KILN_OPT_BOOL, "ge_event_opt", "true",
     "GE's OptimizeBySendEvents and OptimizeByRecvEvents", 0, 0},
    {sizeof(kiln_option_def), KILN_OPT_BOOL, "reduce_events", "true",
     "remove every event already implied by stream order and other events", 0, 0},
    {sizeof(kiln_option_def), KILN_OPT_BOOL, "reuse_events", "true",
     "events whose lifetimes do not overlap share an id (GE ReuseEvent)", 0, 0},
};

static kiln_status sa_create(const kiln_options *opts, kiln_error *err, void **inst)
{
    sa_opts *o = calloc(1, sizeof(*o));
    if (!o)
        return kiln_errorf(err, KILN_ERR_NOMEM, "StreamAllocator: out of memory");
    o->independent = "";
    o->attach = o->skip = SA_GE_LOCAL;
    o->max_parallel = "";
    o->max_task = 0;
    o->ge_event_opt = o->reduce_events = o->reuse_events = true;
    kiln_options_get_string(opts, "independent", &o->independent);
    kiln_options_get_string(opts, "attach", &o->attach);
    kiln_options_get_string(opts, "skip_assign_stream", &o->skip);
    kiln_options_get_string(opts, "max_parallel", &o->max_parallel);
    kiln_options_get_int(opts, "max_task", &o->max_task);
    kiln_options_get_bool(opts, "untasked_on_stream", &o->untasked_on_stream);
    kiln_options_get_bool(opts, "ge_event_opt", &o->ge_event_opt);
    kiln_options_get_bool(opts, "reduce_events", &o->reduce_events);
    kiln_options_get_bool(opts, "reuse_events", &o->reuse_events);
    if (o->max_task != 0 && o->max_task <= SA_TASK_RESERVE) {
        long long v = (long long)o->max_task;
        free(o);
        return kiln_errorf(err, KILN_ERR_PARAM,
                           "StreamAllocator: option max_task=%lld leaves no task after the %d "
                           "reserved (0 = the default, else at least %d)",
                           v, SA_TASK_RESERVE, SA_TASK_RESERVE + 1);
    }
    /* max_parallel must read ENGINE:N with N >= 1 */
    for (const char *p = o->max_parallel; *p;) {
        const char *c = strchr(p, ','), *colon = strchr(p, ':');
        size_t len = c ? (size_t)(c - p) : strlen(p);
        char *end = NULL;
        long long v = colon && colon < p + len ? strtoll(colon + 1, &end, 10) : 0;
        if (!colon || colon >= p + len || colon == p || end != p + len || v < 1) {
            free(o);
            return kiln_errorf(err, KILN_ERR_PARAM,
                               "StreamAllocator: option max_parallel entry '%.*s' is not "
                               "ENGINE:N with N >= 1",
                               (int)len, p);
        }
        p = c ? c + 1 : p + len;
    }
    *inst = o;
    return KILN_OK;
}

static void sa_destroy(void *inst)
{
    free(inst);
}

/* ---- the graph's order and adjacency --------------------------------------- */

static kiln_status build_graph(sa_state *st)
{
    kiln_graph *g = st->g;
    const kiln_node_id *ord = NULL;
    uint32_t n = 0;
    kiln_status rc = kiln_graph_topo_order(g, &ord, &n, kiln_pass_error(st->ctx));
    if (rc != KILN_OK)
        return rc;
    st->limit = kiln_graph_id_limit(g);
    st->n = n;
    size_t L = (size_t)st->limit + 2;
    st->order = malloc((n + 1) * sizeof(kiln_node_id));
    st->pos = calloc(L, sizeof(uint32_t));
    st->stream = malloc(L * sizeof(int32_t));
    st->logic = malloc(L * sizeof(int32_t));
    st->sub_of = malloc(L * sizeof(int32_t));
    st->in_start = calloc(L, sizeof(uint32_t));
    st->out_start = calloc(L, sizeof(uint32_t));
    if (!st->order || !st->pos || !st->stream || !st->logic || !st->sub_of || !st->in_start ||
        !st->out_start)
        return sa_nomem(st);
    memcpy(st->order, ord, n * sizeof(kiln_node_id));
    for (size_t v = 0; v < L; v++)
        st->stream[v] = st->logic[v] = -1, st->sub_of[v] = -1;
    for (uint32_t i = 0; i < n; i++)
        st->pos[st->order[i]] = i;
    /* producers (data inputs, then control sources) of each node, in node-id
     * order: one walk of the graph */
    uint32_t total = 0, cap = n + 16;
    st->in_adj = malloc(cap * sizeof(uint32_t));
    if (!st->in_adj)
        return sa_nomem(st);
    for (kiln_node_id v = 0; v < st->limit; v++) {
        st->in_start[v] = total;
        uint32_t i = st->pos[v];
        if (i >= n || st->order[i] != v)
            continue; /* not a node of this graph */
        uint32_t ni = kiln_node_input_count(g, v);
        if (total + ni + kiln_node_ctrl_in_count(g, v) > cap) {
            uint32_t c = cap + cap / 2 + ni + kiln_node_ctrl_in_count(g, v);
            uint32_t *p = realloc(st->in_adj, c * sizeof(uint32_t));
            if (!p)
                return sa_nomem(st);
            st->in_adj = p, cap = c;
        }
        for (uint32_t k = 0; k < ni; k++) {
            kiln_node_id u = kiln_node_input_peer(g, v, k).node;
            if (u)
                st->in_adj[total++] = u;
        }
        for (uint32_t c = kiln_ctrl_in_first(g, v); c; c = kiln_ctrl_in_next(g, c))
            st->in_adj[total++] = kiln_ctrl_src(g, c);
    }
    st->in_start[st->limit] = total;
    /* consumers: the transpose, each node's consumers in the topological order */
    st->out_adj = malloc((total + 1) * sizeof(uint32_t));
    if (!st->out_adj)
        return sa_nomem(st);
    for (uint32_t k = 0; k < total; k++)
        st->out_start[st->in_adj[k] + 1]++;
    for (uint32_t v = 0; v < st->limit; v++)
        st->out_start[v + 1] += st->out_start[v];
    for (uint32_t i = 0; i < n; i++) { /* out_start[u] is u's cursor */
        kiln_node_id v = st->order[i];
        for (uint32_t k = st->in_start[v]; k < st->in_start[v + 1]; k++)
            st->out_adj[st->out_start[st->in_adj[k]]++] = v;
    }
    for (uint32_t v = st->limit; v > 0; v--) /* the cursors end at the next start */
        st->out_start[v] = st->out_start[v - 1];
    st->out_start[0] = 0;
    return KILN_OK;
}

/* The heap's entries: a node, its name and the name's first 8 bytes as a
 * big-endian number (zero-padded), which orders as strcmp does whenever two
 * names differ in those bytes; only names sharing them compare in full.  The
 * heap holds the ready nodes only, so the keys take no array by node. */
typedef struct name_key {
    uint64_t pre;
    const char *name;
    kiln_node_id v;
} name_key;

static bool name_less(const name_key *a, const name_key *b)
{
    if (a->pre != b->pre)
        return a->pre < b->pre;
    return strcmp(a->name, b->name) < 0;
}

/* Min-heap of nodes ordered by node name. */
static void heap_push(const kiln_graph *g, name_key *h, uint32_t *n, kiln_node_id v)
{
    name_key k = {0, kiln_node_name_str(g, v), v};
    uint32_t j = 0;
    for (; j < 8 && k.name[j]; j++)
        k.pre = k.pre << 8 | (unsigned char)k.name[j];
    k.pre = j ? k.pre << (8 * (8 - j)) : 0;
    uint32_t i = (*n)++;
    while (i > 0 && name_less(&k, &h[(i - 1) / 2])) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = k;
}

static kiln_node_id heap_pop(name_key *h, uint32_t *n)
{
    kiln_node_id top = h[0].v;
    name_key last = h[--*n];
    uint32_t i = 0;
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && name_less(&h[c + 1], &h[c]))
            c++;
        if (!name_less(&h[c], &last))
            break;
        h[i] = h[c];
        i = c;
    }
    h[i] = last;
    return top;
}

/*
 * The global order: Kahn's algorithm over data and control edges, the ready
 * node with the smallest name first.  Names survive a JSON round trip and a
 * paused build's resume, node ids do not: the same graph gets the same order.
 * O((n + e) log n).  The in-degrees count down in st->logic (unused until
 * SplitStreams), which is all -1 again afterwards.
 */
static kiln_status canonical_order(sa_state *st)
{
    int32_t *deg = st->logic;
    name_key *heap = malloc(((size_t)st->n + 1) * sizeof(name_key));
    if (!heap)
        return sa_nomem(st);
    uint32_t hn = 0, k = 0;
    for (uint32_t i = 0; i < st->n; i++) {
        kiln_node_id v = st->order[i];
        deg[v] = (int32_t)(st->in_start[v + 1] - st->in_start[v]);
        if (!deg[v])
            heap_push(st->g, heap, &hn, v);
    }
    while (hn) {
        kiln_node_id v = heap_pop(heap, &hn);
        st->order[k++] = v;
        for (uint32_t j = st->out_start[v]; j < st->out_start[v + 1]; j++)
            if (--deg[st->out_adj[j]] == 0)
                heap_push(st->g, heap, &hn, st->out_adj[j]);
    }
    free(heap);
    for (uint32_t i = 0; i < st->n; i++) {
        st->pos[st->order[i]] = i;
        deg[st->order[i]] = -1; /* every in-degree counted down to 0 */
    }
    return KILN_OK; /* the graph is acyclic: kiln_graph_topo_order said so */
}

static void state_free(sa_state *st)
{
    free(st->order), free(st->pos), free(st->stream), free(st->logic), free(st->sub_of);
    free(st->in_start), free(st->in_adj), free(st->out_start), free(st->out_adj);
    free(st->subs), free(st->sub_pool), free(st->ev), free(st->phys);
}

/* ---- writing the schedule ----------------------------------------------------- */

/* List @p key of node @p v, removed when empty (@p had: some node may carry it). */
static kiln_status set_list(kiln_graph *g, kiln_node_id v, const char *key, bool had,
                            const int64_t *ids, uint32_t n)
{
    if (!n && !had)
        return KILN_OK;
    kiln_attrs *a = kiln_node_attrs_mut(g, v);
    if (!a)
        return KILN_ERR_NOMEM;
    if (!n) {
        kiln_attrs_remove(a, key);
        return KILN_OK;
    }
    return kiln_attrs_set_list_int(a, key, ids, n);
}

static kiln_status write_schedule(sa_state *st)
{
    kiln_graph *g = st->g;
    int64_t *snd = calloc(st->nev + 1, sizeof(int64_t)), *rcv = calloc(st->nev + 1, sizeof(int64_t));
    sa_ev_index x = {0};
    kiln_status rc = snd && rcv ? sa_ev_index_build(st, &x) : sa_nomem(st);
    if (rc != KILN_OK)
        goto out;
    /* keys no node carries yet (never interned) need no removal: each node
     * is written once */
    bool had_logic = kiln_sym_lookup(g, SA_ATTR_LOGIC_STREAM) != 0,
         had_send = kiln_sym_lookup(g, SA_ATTR_SEND) != 0,
         had_recv = kiln_sym_lookup(g, SA_ATTR_RECV) != 0;
    /* node-id order (each node's attributes are its own): the graph's memory
     * in address order rather than by name; `_kiln_id` is the node's step */
    for (kiln_node_id v = 0; v < st->limit && rc == KILN_OK; v++) {
        uint32_t i = st->pos[v];
        if (i >= st->n || st->order[i] != v)
            continue; /* not a node of this graph */
        kiln_attrs *a = kiln_node_attrs_mut(g, v);
        if (!a) {
            rc = sa_nomem(st);
            break;
        }
        rc = kiln_attrs_set_int(a, SA_ATTR_ID, i);
        if (rc == KILN_OK)
            rc = kiln_attrs_set_int(a, SA_ATTR_STREAM, st->stream[v]);
        if (rc == KILN_OK && st->stream[v] >= 0)
            rc = kiln_attrs_set_int(a, SA_ATTR_LOGIC_STREAM, st->logic[v]);
        else if (had_logic)
            kiln_attrs_remove(a, SA_ATTR_LOGIC_STREAM);
        uint32_t ns = 0, nr = 0;
        /* the index lists a node's events in event order: its own ids ascend */
        for (uint32_t k = x.ss[v]; k < x.ss[v + 1]; k++)
            snd[ns++] = st->phys ? st->phys[x.sa[k]] : x.sa[k];
        for (uint32_t k = x.rs[v]; k < x.rs[v + 1]; k++)
            rcv[nr++] = st->phys ? st->phys[x.ra[k]] : x.ra[k];
        if (rc == KILN_OK)
            rc = set_list(g, v, SA_ATTR_SEND, had_send, snd, ns);
        if (rc == KILN_OK)
            rc = set_list(g, v, SA_ATTR_RECV, had_recv, rcv, nr);
    }
    kiln_attrs *ra = kiln_graph_attrs(g);
    if (rc == KILN_OK)
        rc = kiln_attrs_set_int(ra, SA_ATTR_STREAM_NUM, st->nstreams);
    if (rc == KILN_OK)
        rc = kiln_attrs_set_int(ra, SA_ATTR_EVENT_NUM, st->phys ? st->nphys : st->nev);
    if (rc != KILN_OK && !kiln_error_message(kiln_pass_error(st->ctx))[0])
        rc = sa_nomem(st);
out:
    free(snd), free(rcv);
    sa_ev_index_free(&x);
    return rc;
}

static kiln_pass_result sa_run(void *inst, kiln_pass_ctx *ctx, kiln_graph *g)
{
    sa_state st;
    memset(&st, 0, sizeof(st));
    st.g = g;
    st.ctx = ctx;
    st.o = inst;
    sa_names_init(&st);
    kiln_status rc = build_graph(&st);
    if (rc == KILN_OK)
        rc = canonical_order(&st);
    if (rc == KILN_OK)
        rc = sa_assign_logical(&st);
    if (rc == KILN_OK)
        rc = sa_make_events(&st);
    if (rc == KILN_OK)
        rc = sa_split_streams(&st);
    if (rc == KILN_OK)
        rc = sa_finish_events(&st);
    if (rc == KILN_OK)
        rc = write_schedule(&st);
    if (rc == KILN_OK) {
        kiln_pass_stat_add(ctx, "streams", st.nstreams);
        kiln_pass_stat_add(ctx, "logical_streams", st.nlogical);
        kiln_pass_stat_add(ctx, "events", st.nev);
        if (st.phys) {
            kiln_pass_stat_add(ctx, "event_ids", st.nphys);
            kiln_pass_stat_add(ctx, "event_ids_lower_bound", st.lower_bound);
            kiln_pass_stat_add(ctx, "event_ids_exact", st.phys_exact);
        }
        kiln_diag(ctx, KILN_SEV_DEBUG,
                  "graph %s: %u streams (%u logical), %u events in %u ids (%s; at most %u "
                  "outstanding at one step)",
                  kiln_graph_name(g), st.nstreams, st.nlogical, st.nev,
                  st.phys ? st.nphys : st.nev,
                  st.phys_exact ? "the minimum for the schedule"
                                : (st.phys ? "greedy reuse" : "no reuse"),
                  st.lower_bound);
    }
    if (rc == KILN_OK) {
        const kiln_schedule *s = NULL;
        rc = kiln_schedule_get(g, &s, kiln_pass_error(ctx));
        if (rc == KILN_OK)
            rc = kiln_schedule_check(g, s, kiln_pass_error(ctx));
    }
    state_free(&st);
    return rc == KILN_OK ? KILN_PASS_CHANGED : KILN_PASS_FAILED;
}

static const kiln_pass_desc sa_pass = {
    .struct_size = sizeof(kiln_pass_desc),
    .kind = KILN_PASS_KIND_GRAPH,
    .name = "StreamAllocator",
    .summary = "logical streams by engine and label, events between streams, split streams "
               "(_kiln_id, _kiln_stream_id, _send_event_ids, _recv_event_ids)",
    .flags = KILN_PASS_PRESERVES_CFG,
    .option_count = sizeof(sa_options) / sizeof(sa_options[0]),
    .options = sa_options,
    .create = sa_create,
    .destroy = sa_destroy,
    .run_graph = sa_run,
};

static kiln_status init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)h;
    (void)e;
    return kiln_register_pass(r, &sa_pass);
}

KILN_PLUGIN_DEFINE("kiln.streams", "0.1.0", "Apache-2.0",
                   "GE's stream allocator: logical streams, events, stream splitting", init,
                   NULL)

/*
 * logical.c - GE's LogicalStreamAllocator on kiln's partitions
 * (GE_SEMANTICS_BUILD.md 3.1; docs/streams.md).
 *
 * The partitions EnginePartitioner recorded on the root graph are GE's
 * subgraphs, in rank order; the input-nodes partition (rank 0) is not one of
 * them, as in GE, so Data and Const nodes keep stream -1.  A graph without
 * partitions is treated as one subgraph per node (engine `_kiln_engine`, GE
 * local ops on ge_local, data-like nodes without inputs left out).
 *
 * Passes, in GE's order: AssignByLabel, IndependentStream, AssignByDependency
 * (per-engine temporaries, engines laid out in byte order of their names),
 * NodeStreamUpdate, UpdateForParallelGroup, AllReduceParallel (session option
 * ge.hcomParallel=1), UpdateForSkippedEngine, then
 * OptimizeIneffectiveMultiStream and the dense renumbering; single-stream mode
 * replaces the first four.  Not ported: UpdateForMdeGroup (it reads stream ids
 * set before any pass ran, which kiln's nodes do not carry), attached streams
 * (MC2 ops' named-attribute lists, no kiln engine has such ops) and the
 * compute-cost tie rule (kiln's engines declare no cost: the first
 * predecessor in rank order wins).
 *
 * Complexity: O(nodes + edges + subgraphs x engines) for the assignment;
 * OptimizeIneffectiveMultiStream is O(candidates x streams x stream length).
 */
#include "streams.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- subgraphs ------------------------------------------------------------ */

static const char *node_engine(const sa_state *st, kiln_node_id n)
{
    const char *e = st->nm.engine ? sa_node_str(st->g, n, SA_ATTR_ENGINE) : "";
    return e[0] ? e : (sa_no_task(st, n, SA_GE_LOCAL) ? SA_GE_LOCAL : "unplaced");
}

/* Node attribute @p key (symbol @p sym: 0 = on no node) is present. */
static bool node_has(const kiln_graph *g, kiln_node_id n, kiln_sym sym, const char *key)
{
    return sym && kiln_attrs_has(kiln_node_attrs(g, n), key);
}

/* String node attribute @p key (symbol @p sym), "" when absent. */
static const char *node_str(const kiln_graph *g, kiln_node_id n, kiln_sym sym, const char *key)
{
    return sym ? sa_node_str(g, n, key) : "";
}

/* max_parallel "engine:N,..." for @p engine; 1 when not listed. */
static int64_t max_parallel_of(const char *spec, const char *engine)
{
    size_t el = strlen(engine);
    for (const char *p = spec; p && *p;) {
        const char *c = strchr(p, ',');
        size_t len = c ? (size_t)(c - p) : strlen(p);
        if (len > el && strncmp(p, engine, el) == 0 && p[el] == ':')
            return strtoll(p + el + 1, NULL, 10);
        p = c ? c + 1 : p + len;
    }
    return 1;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Sort and deduplicate @p v[0..*n). */
static void uniq(uint32_t *v, uint32_t *n)
{
    qsort(v, *n, sizeof(uint32_t), cmp_u32);
    uint32_t k = 0;
    for (uint32_t i = 0; i < *n; i++)
        if (k == 0 || v[k - 1] != v[i])
            v[k++] = v[i];
    *n = k;
}

static bool is_data_like(const sa_state *st, kiln_node_id n)
{
    const kiln_graph *g = st->g;
    if (kiln_node_ctrl_in_count(g, n))
        return false;
    for (uint32_t i = 0; i < kiln_node_input_count(g, n); i++)
        if (kiln_node_input_peer(g, n, i).node)
            return false;
    return sa_op_in(g, n, st->nm.data_like, SA_DATA_LIKE_OPS);
}

/* kiln_node_partition of live node @p n for a graph of @p nparts partitions,
 * without reading the partition count off the graph's attributes per node. */
static int32_t node_partition(const kiln_graph *g, kiln_node_id n, uint32_t nparts)
{
    int64_t r;
    if (!kiln_attrs_get_int(kiln_node_attrs(g, n), KILN_PART_NODE, &r) || r < 0 ||
        r >= (int64_t)nparts)
        return -1;
    return (int32_t)r;
}

/* The subgraphs, node -> subgraph map and subgraph edges. */
static kiln_status build_subs(sa_state *st)
{
    kiln_graph *g = st->g;
    uint32_t nparts = kiln_graph_partition_count(g);
    /* the partition table read once (kiln_graph_partition_engine and
     * _stream_label look the lists up per call) */
    const char *const *engines = NULL, *const *labels = NULL;
    uint32_t nengines = 0, nlabels = 0;
    if (nparts) {
        (void)kiln_attrs_get_list_string(kiln_graph_attrs(g), KILN_PART_ENGINES, &engines,
                                         &nengines);
        (void)kiln_attrs_get_list_string(kiln_graph_attrs(g), KILN_PART_LABELS, &labels,
                                         &nlabels);
    }
    int32_t *by_rank = malloc((nparts ? nparts : 1) * sizeof(int32_t));
    if (!by_rank)
        return sa_nomem(st);
    uint32_t nsubs = 0;
    for (uint32_t r = 0; r < nparts; r++) {
        const char *e = r < nengines ? engines[r] : NULL;
        by_rank[r] = e && strcmp(e, SA_INPUT_NODES) == 0 ? -1 : (int32_t)nsubs++;
    }
    /* Without partitions, and for nodes added after partitioning (a copy a
     * memory-conflict pass inserted): one subgraph per node; data-like nodes
     * without inputs run nothing.  The nodes' partitions are read in node-id
     * order (the graph's memory in address order); sub_of -2 marks a node of
     * its own subgraph, numbered below in the global order. */
    uint32_t own = 0;
    for (kiln_node_id v = 0; v < st->limit; v++) {
        uint32_t i = st->pos[v];
        if (i >= st->n || st->order[i] != v)
            continue; /* not a node of this graph */
        int32_t r = nparts ? node_partition(g, v, nparts) : -1;
        if (r >= 0)
            st->sub_of[v] = by_rank[r];
        else if (is_data_like(st, v))
            st->sub_of[v] = -1;
        else
            st->sub_of[v] = -2, own++;
    }
    st->subs = calloc(nsubs + own + 1, sizeof(sa_sub));
    if (!st->subs) {
        free(by_rank);
        return sa_nomem(st);
    }
    for (uint32_t r = 0; r < nparts; r++) {
        if (by_rank[r] < 0)
            continue;
        const char *e = r < nengines ? engines[r] : NULL;
        const char *l = r < nlabels ? labels[r] : NULL;
        sa_sub *s = &st->subs[st->nsubs++];
        s->rank = r;
        s->engine = e ? e : "unplaced";
        s->label = l ? l : "";
    }
    free(by_rank);
    for (uint32_t i = 0; i < st->n && own; i++) {
        kiln_node_id v = st->order[i];
        if (st->sub_of[v] != -2)
            continue;
        sa_sub *s = &st->subs[st->nsubs];
        s->rank = UINT32_MAX;
        s->node = v;
        s->engine = node_engine(st, v);
        s->label = node_str(g, v, st->nm.stream_label, SA_ATTR_STREAM_LABEL);
        st->sub_of[v] = (int32_t)st->nsubs++;
    }
    /* the options per engine, worked out once per distinct engine name (the
     * last one first: subgraphs of one engine come in runs) */
    sa_sub *last = NULL;
    for (uint32_t i = 0; i < st->nsubs; i++) {
        sa_sub *s = &st->subs[i];
        s->stream = -1;
        s->reused = -1;
        if (last && (last->engine == s->engine || strcmp(last->engine, s->engine) == 0)) {
            s->independent = last->independent;
            s->attach = last->attach;
            s->skip = last->skip;
            s->max_parallel = last->max_parallel;
        } else {
            s->independent = sa_list_has(st->o->independent, s->engine);
            s->attach = sa_list_has(st->o->attach, s->engine);
            s->skip = sa_list_has(st->o->skip, s->engine);
            int64_t mp = max_parallel_of(st->o->max_parallel, s->engine);
            /* a stream id is below 2^31: larger limits all mean no limit */
            s->max_parallel = mp > INT32_MAX ? INT32_MAX : (int32_t)mp;
        }
        last = s;
    }
    /* Flags from the nodes, and the subgraph edges (GE's End -> PlaceHolder pairs). */
    uint32_t ne = st->in_start[st->limit];
    uint32_t *pc = calloc(st->nsubs + 1, sizeof(uint32_t)), *sc = calloc(st->nsubs + 1, sizeof(uint32_t));
    uint32_t *pool = malloc(2 * (size_t)(ne ? ne : 1) * sizeof(uint32_t));
    if (!pc || !sc || !pool) {
        free(pc), free(sc), free(pool);
        return sa_nomem(st);
    }
    for (uint32_t i = 0; i < st->n; i++) {
        kiln_node_id v = st->order[i];
        int32_t sv = st->sub_of[v];
        if (sv < 0)
            continue;
        if (node_str(g, v, st->nm.user_label, SA_ATTR_USER_STREAM_LABEL)[0])
            st->subs[sv].user_label = true;
        if (node_has(g, v, st->nm.force_attach, SA_ATTR_FORCE_ATTACH))
            st->subs[sv].force_attach = true;
        for (uint32_t k = st->in_start[v]; k < st->in_start[v + 1]; k++) {
            int32_t su = st->sub_of[st->in_adj[k]];
            if (su >= 0 && su != sv)
                pc[sv]++, sc[su]++;
        }
    }
    uint32_t off = 0;
    for (uint32_t i = 0; i < st->nsubs; i++) {
        st->subs[i].preds = pool + off, off += pc[i];
        st->subs[i].succs = pool + off, off += sc[i];
    }
    for (uint32_t i = 0; i < st->n; i++) {
        kiln_node_id v = st->order[i];
        int32_t sv = st->sub_of[v];
        if (sv < 0)
            continue;
        for (uint32_t k = st->in_start[v]; k < st->in_start[v + 1]; k++) {
            int32_t su = st->sub_of[st->in_adj[k]];
            if (su >= 0 && su != sv) {
                st->subs[sv].preds[st->subs[sv].npreds++] = (uint32_t)su;
                st->subs[su].succs[st->subs[su].nsuccs++] = (uint32_t)sv;
            }
        }
    }
    for (uint32_t i = 0; i < st->nsubs; i++) {
        uniq(st->subs[i].preds, &st->subs[i].npreds);
        uniq(st->subs[i].succs, &st->subs[i].nsuccs);
    }
    free(pc);
    free(sc);
    st->sub_pool = pool;
    return KILN_OK;
}

/* ---- AssignByLabel, IndependentStream ------------------------------------- */

static void assign_by_label(sa_state *st)
{
    for (uint32_t i = 0; i < st->nsubs; i++) {
        sa_sub *s = &st->subs[i];
        if (!s->label[0])
            continue;
        for (uint32_t j = 0; j < i; j++)
            if (st->subs[j].label[0] && strcmp(st->subs[j].label, s->label) == 0) {
                s->stream = st->subs[j].stream;
                break;
            }
        if (s->stream < 0)
            s->stream = st->next_stream++;
    }
}

static kiln_status independent_stream(sa_state *st)
{
    /* one stream per (engine, stream label) among the subgraphs this pass assigns */
    uint8_t *here = calloc(st->nsubs + 1, 1);
    if (!here)
        return sa_nomem(st);
    for (uint32_t i = 0; i < st->nsubs; i++) {
        sa_sub *s = &st->subs[i];
        if ((s->stream >= 0 && s->user_label) || !s->independent)
            continue;
        int64_t found = -1;
        for (uint32_t j = 0; j < i && found < 0; j++) {
            const sa_sub *t = &st->subs[j];
            if (here[j] && strcmp(t->engine, s->engine) == 0 && strcmp(t->label, s->label) == 0)
                found = t->stream;
        }
        s->stream = found >= 0 ? found : st->next_stream++;
        here[i] = 1;
    }
    free(here);
    return KILN_OK;
}

/* ---- AssignByDependency --------------------------------------------------- */

typedef struct eng_ctr {
    const char *engine;
    int64_t next, num, start;
} eng_ctr;

typedef struct dep_ctx {
    eng_ctr *e;
    uint32_t ne;
    bool memory_priority;
} dep_ctx;

static eng_ctr *ctr_of(dep_ctx *d, const char *engine)
{
    for (uint32_t i = 0; i < d->ne; i++)
        if (strcmp(d->e[i].engine, engine) == 0)
            return &d->e[i];
    d->e[d->ne] = (eng_ctr){engine, 0, 0, 0};
    return &d->e[d->ne++];
}

static int64_t assign_new_stream(dep_ctx *d, sa_sub *s)
{
    eng_ctr *c = ctr_of(d, s->engine);
    int64_t id = c->next;
    if (id >= s->max_parallel)
        id = 0;
    s->stream = id;
    s->temp = true;
    c->next = id + 1;
    if (id + 1 > c->num)
        c->num = id + 1;
    return id;
}

/* GE CouldReuse: whether predecessor @p p may lend its stream to @p s. */
static bool could_reuse(sa_state *st, dep_ctx *d, sa_sub *s, const sa_sub *p)
{
    if (p->independent || p->label[0])
        return false;
    if (!s->visited && s->force_attach)
        return true;
    s->visited = true;
    if (!d->memory_priority)
        for (uint32_t k = 0; k < p->nsuccs; k++) {
            const sa_sub *o = &st->subs[p->succs[k]];
            if (o != s && strcmp(o->engine, p->engine) == 0)
                return false;
        }
    if (strcmp(s->engine, p->engine) == 0 || s->attach)
        return true;
    return p->reused >= 0 && strcmp(st->subs[p->reused].engine, s->engine) == 0;
}

static int cmp_eng(const void *a, const void *b)
{
    return strcmp(((const eng_ctr *)a)->engine, ((const eng_ctr *)b)->engine);
}

static kiln_status assign_by_dependency(sa_state *st)
{
    dep_ctx d = {calloc(st->nsubs + 1, sizeof(eng_ctr)), 0, false};
    if (!d.e)
        return sa_nomem(st);
    const char *pol = kiln_pass_session_option(st->ctx, "ge.exec.memoryOptimizationPolicy");
    d.memory_priority = pol && strcmp(pol, "MemoryPriority") == 0;
    for (uint32_t i = 0; i < st->nsubs; i++) {
        sa_sub *s = &st->subs[i];
        if (s->stream >= 0)
            continue;
        /* Every predecessor is checked in GE; with equal compute costs the first
         * reusable one (lowest rank) wins. */
        int32_t best = -1;
        for (uint32_t k = 0; k < s->npreds && best < 0; k++)
            if (could_reuse(st, &d, s, &st->subs[s->preds[k]]))
                best = (int32_t)s->preds[k];
        if (best < 0) {
            assign_new_stream(&d, s);
            continue;
        }
        sa_sub *p = &st->subs[best];
        if (p->stream < 0)
            assign_new_stream(&d, p);
        s->stream = p->stream;
        s->reused = p->reused >= 0 ? p->reused : best;
    }
    /* Engines in byte order of their names, each a block of its temporaries. */
    qsort(d.e, d.ne, sizeof(eng_ctr), cmp_eng);
    for (uint32_t i = 0; i < d.ne; i++) {
        d.e[i].start = st->next_stream;
        st->next_stream += d.e[i].num;
    }
    for (uint32_t i = 0; i < st->nsubs; i++) {
        sa_sub *s = &st->subs[i];
        if (s->temp)
            s->stream += ctr_of(&d, s->engine)->start;
    }
    for (uint32_t i = 0; i < st->nsubs; i++) {
        sa_sub *s = &st->subs[i];
        if (s->reused >= 0 && !s->temp)
            s->stream = st->subs[s->reused].stream;
    }
    free(d.e);
    return KILN_OK;
}

/* ---- NodeStreamUpdate, UpdateForSkippedEngine ----------------------------- */

static kiln_status node_stream_update(sa_state *st)
{
    for (uint32_t i = 0; i < st->nsubs; i++) {
        const sa_sub *s = &st->subs[i];
        if (!s->skip && s->stream < 0)
            return kiln_errorf(kiln_pass_error(st->ctx), KILN_ERR_INTERNAL,
                               "subgraph %s has not been assigned a stream (engine %s)",
                               sa_sub_name(st, s), s->engine);
    }
    for (uint32_t i = 0; i < st->n; i++) {
        kiln_node_id v = st->order[i];
        int32_t s = st->sub_of[v];
        st->stream[v] = -1;
        if (s >= 0 && !node_has(st->g, v, st->nm.rts_label, SA_ATTR_RTS_LABEL_NODE))
            st->stream[v] = st->subs[s].stream;
    }
    return KILN_OK;
}

static void update_for_skipped_engine(sa_state *st)
{
    kiln_graph *g = st->g;
    uint8_t *cand = calloc(st->limit ? st->limit : 1, 1);
    if (!cand)
        return;
    for (uint32_t i = 0; i < st->n; i++) {
        kiln_node_id v = st->order[i];
        int32_t s = st->sub_of[v];
        if (s >= 0 && st->subs[s].skip && !st->subs[s].label[0] && st->stream[v] != -1)
            cand[v] = 1;
    }
    for (uint32_t i = 0; i < st->n; i++) {
        kiln_node_id v = st->order[i];
        if (!cand[v])
            continue;
        bool all_invalid = true;
        for (uint32_t k = st->in_start[v]; k < st->in_start[v + 1]; k++)
            if (st->stream[st->in_adj[k]] != -1)
                all_invalid = false;
        if (kiln_node_subgraph_count(g, v) == 0 && all_invalid) {
            st->stream[v] = -1;
        } else if (st->out_start[v + 1] > st->out_start[v]) {
            int64_t one = -1;
            bool several = false;
            for (uint32_t k = st->in_start[v]; k < st->in_start[v + 1]; k++) {
                int64_t s = st->stream[st->in_adj[k]];
                if (s != -1 && one != -1 && s != one)
                    several = true;
                if (s != -1)
                    one = s;
            }
            for (uint32_t k = st->out_start[v]; k < st->out_start[v + 1]; k++) {
                int64_t s = st->stream[st->out_adj[k]];
                if (s != -1 && one != -1 && s != one)
                    several = true;
                if (s != -1)
                    one = s;
            }
            if (one != -1 && !several)
                st->stream[v] = one;
        }
    }
    free(cand);
}

/* ---- UpdateForParallelGroup, AllReduceParallel ------------------------------ */

/*
 * GE UpdateForParallelGroupPass: nodes carrying `_parallel_group` and no user
 * stream label are grouped by the stream they have now (stream -1 is left
 * alone); within each such stream, ascending, every distinct group name gets
 * a new stream (next_stream++), shared by the group's nodes there.  Group
 * "-1" (GE's HCCL group) first tries its single data input's stream: when the
 * node has exactly one connected data input whose producer has a stream, the
 * node takes that stream instead.  GE walks the subgraphs' nodes; kiln walks
 * the topological order, which decides which group of a stream is numbered
 * first.  O(nodes + groups x log groups).
 */
typedef struct pg_item {
    int64_t stream;
    uint32_t pos; /* in st->order */
    kiln_node_id v;
    const char *group;
} pg_item;

static int cmp_pg(const void *a, const void *b)
{
    const pg_item *x = a, *y = b;
    if (x->stream != y->stream)
        return x->stream < y->stream ? -1 : 1;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* A node UpdateForParallelGroup regroups: a group, no user label, a stream. */
static bool in_parallel_group(const sa_state *st, kiln_node_id v)
{
    return node_has(st->g, v, st->nm.parallel_group, SA_ATTR_PARALLEL_GROUP) &&
           !node_str(st->g, v, st->nm.user_label, SA_ATTR_USER_STREAM_LABEL)[0] &&
           st->stream[v] != -1;
}

static kiln_status update_for_parallel_group(sa_state *st)
{
    kiln_graph *g = st->g;
    uint32_t n = 0;
    for (uint32_t i = 0; i < st->n; i++)
        n += in_parallel_group(st, st->order[i]);
    if (!n)
        return KILN_OK;
    pg_item *it = malloc(n * sizeof(*it));
    if (!it)
        return sa_nomem(st);
    n = 0;
    for (uint32_t i = 0; i < st->n; i++) {
        kiln_node_id v = st->order[i];
        if (in_parallel_group(st, v))
            it[n++] = (pg_item){st->stream[v], i, v, sa_node_str(g, v, SA_ATTR_PARALLEL_GROUP)};
    }
    qsort(it, n, sizeof(*it), cmp_pg);
    /* per current stream: group name -> new stream, first come first numbered */
    const char **names = malloc(n * sizeof(*names));
    int64_t *ids = malloc(n * sizeof(*ids));
    if (!names || !ids) {
        free(it), free(names), free(ids);
        return sa_nomem(st);
    }
    uint32_t ng = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (i == 0 || it[i].stream != it[i - 1].stream)
            ng = 0;
        kiln_node_id v = it[i].v;
        if (strcmp(it[i].group, SA_HCOM_PARALLEL_GROUP) == 0) {
            kiln_node_id pre = 0;
            uint32_t nin = 0;
            for (uint32_t k = 0; k < kiln_node_input_count(g, v); k++) {
                kiln_anchor p = kiln_node_input_peer(g, v, k);
                if (p.node)
                    nin++, pre = p.node;
            }
            if (nin == 1 && st->stream[pre] != -1) {
                st->stream[v] = st->stream[pre];
                kiln_pass_stat_add(st->ctx, "parallel_group_reused_input_stream", 1);
                continue;
            }
        }
        uint32_t k = 0;
        while (k < ng && strcmp(names[k], it[i].group) != 0)
            k++;
        if (k == ng) {
            names[ng] = it[i].group;
            ids[ng++] = st->next_stream++;
            kiln_pass_stat_add(st->ctx, "parallel_group_streams", 1);
        }
        st->stream[v] = ids[k];
    }
    free(it), free(names), free(ids);
    return KILN_OK;
}

static bool is_hcom_reduce(const kiln_graph *g, kiln_node_id v)
{
    const char *op = kiln_node_op_str(g, v);
    return strcmp(op, "HcomAllReduce") == 0 || strcmp(op, "HvdCallbackAllReduce") == 0;
}

/*
 * GE AllReduceParallelPass, with session option ge.hcomParallel=1 only: from
 * every HcomAllReduce / HvdCallbackAllReduce with `fusion` > 0 and no user
 * stream label, the data successors whose `_stream_label` equals the
 * reduce's (or is empty under a labelled reduce) are followed transitively;
 * every such successor with a stream moves to a new stream, one per old
 * stream, except the reduces themselves.  GE visits the successors in
 * pointer order; kiln in topological order, so the numbering is
 * deterministic.  O(nodes + edges).
 */
static kiln_status all_reduce_parallel(sa_state *st)
{
    const char *on = kiln_pass_session_option(st->ctx, "ge.hcomParallel");
    if (!on || strcmp(on, "1") != 0)
        return KILN_OK;
    kiln_graph *g = st->g;
    uint8_t *succ = calloc(st->limit ? st->limit : 1, 1);
    kiln_node_id *stack = malloc(((size_t)st->n + 1) * sizeof(kiln_node_id));
    if (!succ || !stack) {
        free(succ), free(stack);
        return sa_nomem(st);
    }
    bool any = false;
    for (uint32_t i = 0; i < st->n; i++) {
        kiln_node_id r = st->order[i];
        int64_t fusion = -1;
        if (!is_hcom_reduce(g, r) || sa_node_str(g, r, SA_ATTR_USER_STREAM_LABEL)[0] ||
            !kiln_attrs_get_int(kiln_node_attrs(g, r), "fusion", &fusion) || fusion <= 0)
            continue;
        const char *label = sa_node_str(g, r, SA_ATTR_STREAM_LABEL);
        uint32_t top = 0;
        stack[top++] = r;
        while (top) {
            kiln_node_id u = stack[--top];
            for (uint32_t o = 0; o < kiln_node_output_count(g, u); o++) {
                for (uint32_t c = kiln_use_first(g, u, o); c; c = kiln_use_next(g, c)) {
                    kiln_node_id w = kiln_use_dst(g, c).node;
                    const char *wl = sa_node_str(g, w, SA_ATTR_STREAM_LABEL);
                    if (succ[w] || !(strcmp(wl, label) == 0 || (label[0] && !wl[0])))
                        continue;
                    succ[w] = 1;
                    any = true;
                    if (top < st->n)
                        stack[top++] = w;
                }
            }
        }
    }
    if (any) {
        int64_t old_max = st->next_stream;
        int64_t *map = malloc(((size_t)old_max + 1) * sizeof(int64_t));
        if (!map) {
            free(succ), free(stack);
            return sa_nomem(st);
        }
        for (int64_t s = 0; s <= old_max; s++)
            map[s] = -1;
        for (uint32_t i = 0; i < st->n; i++) {
            kiln_node_id w = st->order[i];
            int64_t old = st->stream[w];
            if (!succ[w] || old < 0 || old > old_max)
                continue;
            if (map[old] < 0) {
                map[old] = st->next_stream++;
                kiln_pass_stat_add(st->ctx, "all_reduce_parallel_streams", 1);
            }
            if (!is_hcom_reduce(g, w))
                st->stream[w] = map[old];
        }
        free(map);
    }
    free(succ), free(stack);
    return KILN_OK;
}

/* ---- OptimizeIneffectiveMultiStream --------------------------------------- */

/* Each stream's members as a list in schedule order: nxt[i] / prv[i] are the
 * positions of the member after / before position i in its stream
 * (UINT32_MAX: none).  A node only moves between two adjacent members of
 * the stream it joins, so every move is O(1). */
typedef struct pos_lists {
    uint32_t *nxt, *prv;
} pos_lists;

static void list_unlink(pos_lists *l, uint32_t i)
{
    if (l->prv[i] != UINT32_MAX)
        l->nxt[l->prv[i]] = l->nxt[i];
    if (l->nxt[i] != UINT32_MAX)
        l->prv[l->nxt[i]] = l->prv[i];
    l->nxt[i] = l->prv[i] = UINT32_MAX;
}

/* Put position @p i between the adjacent members @p a < i < @p b. */
static void list_link_between(pos_lists *l, uint32_t a, uint32_t i, uint32_t b)
{
    l->prv[i] = a, l->nxt[i] = b;
    l->nxt[a] = i, l->prv[b] = i;
}

static bool has_label(const sa_state *st, kiln_node_id v)
{
    return node_has(st->g, v, st->nm.stream_label, SA_ATTR_STREAM_LABEL) ||
           node_has(st->g, v, st->nm.user_label, SA_ATTR_USER_STREAM_LABEL);
}

static kiln_status optimize_ineffective(sa_state *st)
{
    kiln_graph *g = st->g;
    uint32_t ns = (uint32_t)st->next_stream;
    pos_lists L = {malloc(((size_t)st->n + 1) * sizeof(uint32_t)),
                   malloc(((size_t)st->n + 1) * sizeof(uint32_t))};
    uint32_t *tail = malloc((ns + 1) * sizeof(uint32_t));
    uint8_t *labelled = calloc(ns + 1, 1);
    int64_t *in_best = malloc((ns + 1) * sizeof(int64_t)), *out_best = malloc((ns + 1) * sizeof(int64_t));
    uint32_t *touched = malloc(((size_t)st->in_start[st->limit] * 2 + 1) * sizeof(uint32_t));
    kiln_status rc = KILN_OK;
    int64_t merged = 0; /* one stat_add: it looks its name up */
    if (!L.nxt || !L.prv || !tail || !labelled || !in_best || !out_best || !touched) {
        rc = sa_nomem(st);
        goto done;
    }
    for (uint32_t s = 0; s <= ns; s++) {
        in_best[s] = out_best[s] = -1;
        tail[s] = UINT32_MAX;
    }
    for (uint32_t i = 0; i < st->n; i++) {
        L.nxt[i] = L.prv[i] = UINT32_MAX;
        kiln_node_id v = st->order[i];
        int64_t s = st->stream[v];
        if (s < 0 || s >= ns)
            continue;
        if (has_label(st, v))
            labelled[s] = 1;
        if (tail[s] != UINT32_MAX) {
            L.nxt[tail[s]] = i;
            L.prv[i] = tail[s];
        }
        tail[s] = i;
    }
    for (uint32_t i = 0; i < st->n; i++) {
        kiln_node_id v = st->order[i];
        int64_t cur = st->stream[v];
        if (cur < 0 || cur >= ns || has_label(st, v) ||
            node_has(g, v, st->nm.new_stream_id, "NewStreamId") ||
            node_has(g, v, st->nm.parallel_group, SA_ATTR_PARALLEL_GROUP))
            continue;
        bool same = false;
        for (uint32_t k = st->in_start[v]; k < st->in_start[v + 1]; k++)
            same |= st->stream[st->in_adj[k]] == cur;
        for (uint32_t k = st->out_start[v]; k < st->out_start[v + 1]; k++)
            same |= st->stream[st->out_adj[k]] == cur;
        if (same)
            continue;
        for (uint32_t k = st->in_start[v]; k < st->in_start[v + 1]; k++) {
            int64_t s = st->stream[st->in_adj[k]];
            if (s >= 0 && s < ns && (int64_t)st->pos[st->in_adj[k]] > in_best[s])
                in_best[s] = st->pos[st->in_adj[k]];
        }
        for (uint32_t k = st->out_start[v]; k < st->out_start[v + 1]; k++) {
            int64_t s = st->stream[st->out_adj[k]];
            uint32_t p = st->pos[st->out_adj[k]];
            if (s >= 0 && s < ns && (out_best[s] < 0 || p < out_best[s]))
                out_best[s] = p;
        }
        /* the neighbours' streams, ascending (GE's map order) */
        uint32_t nt = 0;
        for (uint32_t k = st->in_start[v]; k < st->in_start[v + 1]; k++)
            if (st->stream[st->in_adj[k]] >= 0)
                touched[nt++] = (uint32_t)st->stream[st->in_adj[k]];
        for (uint32_t k = st->out_start[v]; k < st->out_start[v + 1]; k++)
            if (st->stream[st->out_adj[k]] >= 0)
                touched[nt++] = (uint32_t)st->stream[st->out_adj[k]];
        qsort(touched, nt, sizeof(uint32_t), cmp_u32);
        for (uint32_t ti = 0; ti < nt; ti++) {
            uint32_t s = touched[ti];
            if (ti > 0 && touched[ti - 1] == s)
                continue;
            if (labelled[s] || in_best[s] < 0 || out_best[s] < 0)
                continue;
            /* no member of s between v's last producer and first consumer on s */
            uint32_t lo = (uint32_t)in_best[s], hi = (uint32_t)out_best[s];
            if (st->stream[st->order[lo]] != (int64_t)s || L.nxt[lo] != hi)
                continue;
            list_unlink(&L, i);
            st->stream[v] = s;
            list_link_between(&L, lo, i, hi);
            merged++;
        }
        for (uint32_t ti = 0; ti < nt; ti++)
            in_best[touched[ti]] = out_best[touched[ti]] = -1;
    }
    if (merged)
        kiln_pass_stat_add(st->ctx, "ineffective_streams_merged", merged);
done:
    free(L.nxt);
    free(L.prv);
    free(tail);
    free(labelled);
    free(in_best);
    free(out_best);
    free(touched);
    return rc;
}

/* ---- renumbering, max streams ---------------------------------------------- */

/* RefreshContinuousStreams: dense ids in ascending old id. */
static kiln_status renumber(sa_state *st)
{
    int64_t max = -1;
    for (uint32_t i = 0; i < st->n; i++)
        if (st->stream[st->order[i]] > max)
            max = st->stream[st->order[i]];
    int64_t *map = malloc((size_t)(max + 2) * sizeof(int64_t));
    if (!map)
        return sa_nomem(st);
    for (int64_t s = 0; s <= max; s++)
        map[s] = -1;
    for (uint32_t i = 0; i < st->n; i++)
        if (st->stream[st->order[i]] >= 0)
            map[st->stream[st->order[i]]] = 0;
    uint32_t next = 0;
    for (int64_t s = 0; s <= max; s++)
        if (map[s] == 0)
            map[s] = next++;
    for (uint32_t i = 0; i < st->n; i++)
        if (st->stream[st->order[i]] >= 0)
            st->stream[st->order[i]] = map[st->stream[st->order[i]]];
    free(map);
    st->nstreams = next;
    return KILN_OK;
}

/*
 * --max-streams: each stream s >= cap, in ascending order, joins the stream
 * below cap it shares the most data and control edges with (ties: the lowest
 * id), so that the fewest edges need events.  Any merge is valid: a stream is
 * a subsequence of the global order.  O(streams x (nodes + edges)).
 */
static kiln_status fold_streams(sa_state *st, uint32_t cap)
{
    uint64_t *w = calloc(cap, sizeof(uint64_t));
    if (!w)
        return sa_nomem(st);
    for (uint32_t s = cap; s < st->nstreams; s++) {
        memset(w, 0, cap * sizeof(uint64_t));
        for (uint32_t i = 0; i < st->n; i++) {
            kiln_node_id v = st->order[i];
            if (st->stream[v] != (int64_t)s)
                continue;
            for (uint32_t k = st->in_start[v]; k < st->in_start[v + 1]; k++)
                if (st->stream[st->in_adj[k]] >= 0 && st->stream[st->in_adj[k]] < (int64_t)cap)
                    w[st->stream[st->in_adj[k]]]++;
            for (uint32_t k = st->out_start[v]; k < st->out_start[v + 1]; k++)
                if (st->stream[st->out_adj[k]] >= 0 && st->stream[st->out_adj[k]] < (int64_t)cap)
                    w[st->stream[st->out_adj[k]]]++;
        }
        uint32_t best = 0;
        for (uint32_t t = 1; t < cap; t++)
            if (w[t] > w[best])
                best = t;
        for (uint32_t i = 0; i < st->n; i++)
            if (st->stream[st->order[i]] == (int64_t)s)
                st->stream[st->order[i]] = (int32_t)best;
    }
    free(w);
    st->nstreams = cap;
    return KILN_OK;
}

/* ---- single-stream mode ----------------------------------------------------- */

static kiln_status single_stream(sa_state *st)
{
    for (uint32_t i = 0; i < st->nsubs; i++) {
        sa_sub *s = &st->subs[i];
        if (s->label[0])
            return kiln_errorf(kiln_pass_error(st->ctx), KILN_ERR_PARAM,
                               "E10055: Option ge.enableSingleStream=true conflicts with stream "
                               "label \"%s\" (subgraph %s); set ge.enableSingleStream to false",
                               s->label, s->rank != UINT32_MAX || kiln_node_name_str(st->g, s->node)
                                             ? sa_sub_name(st, s)
                                             : s->engine);
        s->stream = 0;
    }
    st->next_stream = 1;
    return KILN_OK;
}

static bool single_stream_on(sa_state *st)
{
    const char *v = kiln_pass_session_option(st->ctx, "ge.enableSingleStream");
    return v && strcmp(v, "true") == 0;
}

kiln_status sa_assign_logical(sa_state *st)
{
    kiln_status rc = build_subs(st);
    if (rc != KILN_OK)
        return rc;
    st->next_stream = 0;
    if (single_stream_on(st)) {
        const char *m = kiln_pass_session_option(st->ctx, "ge.autoMultistreamParallelMode");
        const char *ga = NULL;
        (void)kiln_attrs_get_string(kiln_graph_attrs(st->g), "ge.autoMultistreamParallelMode", &ga);
        if ((m && m[0]) || (ga && ga[0]))
            return kiln_errorf(kiln_pass_error(st->ctx), KILN_ERR_PARAM,
                               "E10056: Cannot configure both parameters "
                               "ge.autoMultistreamParallelMode and ge.enableSingleStream "
                               "simultaneously.");
        rc = single_stream(st);
        if (rc == KILN_OK)
            rc = node_stream_update(st);
        if (rc == KILN_OK)
            update_for_skipped_engine(st);
    } else {
        assign_by_label(st);
        rc = independent_stream(st);
        if (rc == KILN_OK)
            rc = assign_by_dependency(st);
        if (rc == KILN_OK)
            rc = node_stream_update(st);
        if (rc == KILN_OK)
            rc = update_for_parallel_group(st);
        if (rc == KILN_OK)
            rc = all_reduce_parallel(st);
        if (rc == KILN_OK) {
            update_for_skipped_engine(st);
            rc = optimize_ineffective(st);
        }
    }
    if (rc != KILN_OK)
        return rc;
    /* kiln: a node without a task (Data, Const, NetOutput, ...) runs on no
     * stream (in node-id order: the graph's memory in address order). */
    for (kiln_node_id v = 0; v < st->limit && !st->o->untasked_on_stream; v++) {
        uint32_t i = st->pos[v];
        if (i >= st->n || st->order[i] != v)
            continue; /* not a node of this graph */
        int32_t s = st->sub_of[v];
        /* sa_no_task needs a no-task op first: the engine only for those */
        if (!sa_op_in(st->g, v, st->nm.no_task, SA_NO_TASK_OPS))
            continue;
        const char *eng = s >= 0 ? st->subs[s].engine : node_engine(st, v);
        if (sa_no_task(st, v, eng))
            st->stream[v] = -1;
    }
    rc = renumber(st);
    if (rc != KILN_OK)
        return rc;
    /* --max-streams N (session option kiln.max_streams) */
    const char *mx = kiln_pass_session_option(st->ctx, "kiln.max_streams");
    if (mx && mx[0]) {
        char *end = NULL;
        long long cap = strtoll(mx, &end, 10);
        if (!end || *end || cap < 1)
            return kiln_errorf(kiln_pass_error(st->ctx), KILN_ERR_PARAM,
                               "session option kiln.max_streams='%s' is not a positive integer",
                               mx);
        if ((long long)st->nstreams > cap) {
            kiln_pass_stat_add(st->ctx, "streams_merged_by_max_streams",
                               (int64_t)st->nstreams - cap);
            rc = fold_streams(st, (uint32_t)cap);
        }
    }
    /* the subgraphs are done with: their memory serves the event steps */
    free(st->subs), free(st->sub_pool), free(st->sub_of);
    st->subs = NULL, st->sub_pool = NULL, st->sub_of = NULL;
    st->nsubs = 0;
    return rc;
}

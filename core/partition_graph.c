/*
 * partition_graph.c - the optimize_subgraph stage over partitions
 * (docs/partition.md).
 *
 * When the graphs carry partitions (the partition stage recorded them), each
 * engine partition (every rank but the input-nodes partition) becomes a
 * standalone graph named after the partition, built as GE's SplitSubGraphs
 * builds it: copies of the partition's nodes (attributes and descriptors; an
 * owner node is copied without its subgraphs) and, for every data or control
 * edge that crosses partitions, an End in the source partition and a
 * PlaceHolder in the destination one, named <partition>_End<n> and
 * <partition>_PlaceHolder<n> with n a running counter per partitioned graph,
 * carrying GE's attributes:
 *   PlaceHolder  peerIndex, parentOpType, _parentNodeName, parentId
 *                ("<source partition>:<source topo id>"), anchorIndex (the
 *                source output, -1 for control), _peerNodeName (the consumer),
 *                pld_front_node_engine_name
 *   End          peerIndex, parentOpType (the consumer's type),
 *                end_rear_node_engine_name
 * Each partition is then one task of kiln__parallel_run: its split, its
 * engine's optimize_subgraph hook, then the stage's passes, on that graph only.
 * Merging back (GE MergeSubGraph) copies every node's attributes, output and
 * input descriptors and op type back to the node of the same name; a partition
 * whose structure a task changed (added, removed or rewired nodes) is merged
 * node by node and its edges rebuilt, the crossing edges from its boundary
 * End (the producer) and PlaceHolder (the consumers): merge_graph().
 * Without partitions the stage runs its passes on the whole graph as before;
 * with partitions but no stage pass and no engine hook, nothing is split, and
 * without stage passes only the partitions of engines with a hook are.
 *
 * Memory: the partitions are split, run and merged in batches of about
 * BATCH_UNITS nodes and crossings, so the partition graphs alive at once are
 * one batch's plus those whose structure changed (their structural merge
 * needs them all, at the end).  What a partition's split reads of the owner
 * graph is fixed before the first batch: the crossings (with the op type,
 * engine and topological index of both ends, which an earlier batch's merge
 * may change) and the nodes of each rank; a partition's own nodes change only
 * in its own merge, and the owner's structure only in the structural merge
 * at the end.  Cost: O(nodes + edges) to split and merge, plus what the hooks
 * and passes do.
 */
#include "partition_graph.h"
#include "crash.h"
#include "graph_int.h"
#include "graph_json.h"
#include "parallel.h"
#include "passctx.h"
#include "plugin.h"

#include <stdio.h>
#include <stdlib.h>

/* Partition graphs of about this many nodes and crossings are alive at once
 * (plus the changed ones); KILN_TEST_SUBGRAPH_BATCH overrides it (tests: a
 * batch per partition). */
#define BATCH_UNITS 32768u

static uint64_t batch_units(void)
{
    const char *e = getenv("KILN_TEST_SUBGRAPH_BATCH");
    long v = e ? strtol(e, NULL, 10) : 0;
    return v > 0 ? (uint64_t)v : BATCH_UNITS;
}

struct pgraph;

typedef struct ptask {
    struct pgraph *G;    /* the partitioned graph */
    uint32_t rank;
    kiln_graph *pg;      /* the partition as a graph, while it is needed */
    const kiln_component *engine; /* NULL: no loaded engine (ge_local, unplaced, ...) */
    uint64_t shape;      /* pg->struct_mutation after the split */
    uint64_t mut;        /* pg->mutation after the split: unchanged, nothing to merge */
    bool split;          /* a hook or stage pass runs on it */
    bool changed;        /* ... and changed its structure */
    uint32_t nb;         /* id limit of pg when bnd and map were made */
    uint32_t *bnd;       /* pg node -> crossing + 1 for its PlaceHolders and Ends */
    kiln_node_id *map;   /* pg node -> node of the owner graph (structural merge) */
} ptask;

/* One data or control edge that crosses partitions, (src, so) -> (dst, di),
 * so = di = -1 for control, with what a split reads of its ends (fixed when the
 * stage starts); end / pld its End and PlaceHolder (0: none).  Only the
 * crossings of split partitions are recorded; k numbers them all. */
typedef struct xing {
    uint32_t k;
    kiln_node_id src, dst, end, pld;
    int32_t so, di;
    uint32_t rs, rd;
    uint32_t topo;             /* src's topological index */
    kiln_sym sop, dop;         /* the op types of src and dst */
    const char *seng, *deng;   /* their engines (interned) */
} xing;

/* A partitioned graph: its partitions by rank, their nodes and crossings. */
typedef struct pgraph {
    kiln_graph *g;
    ptask *byrank;
    uint32_t np, nx;
    xing *x;
    int32_t *part;        /* node -> rank */
    uint32_t *nstart;     /* np + 1: rank r's nodes are nodes[nstart[r] .. nstart[r + 1]) */
    kiln_node_id *nodes;  /* by rank, in id order */
    uint32_t *xstart;     /* np + 1: split rank r's crossings are xl[xstart[r] ..) */
    uint32_t *xl;         /* indices into x, in k order */
    int64_t seq;          /* T of the partition names */
    const int64_t *sub;   /* k of new_sub_graph<k> by rank */
} pgraph;

typedef struct pstate {
    kiln_passmgr *pm;
    const kiln_stage *stage;
    ptask **t;
} pstate;

static kiln_status set_str(kiln_graph *g, kiln_node_id n, const char *k, const char *v)
{
    return kiln_attrs_set_string(kiln_node_attrs_mut(g, n), k, v);
}
static kiln_status set_int(kiln_graph *g, kiln_node_id n, const char *k, int64_t v)
{
    return kiln_attrs_set_int(kiln_node_attrs_mut(g, n), k, v);
}

static const char *engine_of(const kiln_graph *g, kiln_node_id n)
{
    const char *e = "";
    kiln_attrs_get_string(kiln_node_attrs(g, n), KILN_ATTR_ENGINE, &e);
    return e;
}

static void part_name(const pgraph *G, uint32_t r, char *buf, size_t size)
{
    kiln__partition_name_format(buf, size, G->seq, r, G->sub[r]);
}

/* Copy node @p n of @p g into @p pg (same name, op, attributes, descriptors). */
static kiln_node_id copy_node(kiln_graph *pg, kiln_graph *g, kiln_node_id n)
{
    uint32_t nin = kiln_node_input_count(g, n), nout = kiln_node_output_count(g, n);
    kiln_node_id m = kiln_graph_add_node(pg, kiln_node_name_str(g, n), kiln_node_op_str(g, n), nin,
                                         nout);
    if (!m)
        return 0;
    if (kiln_node_attrs(g, n) && kiln_attrs_copy(kiln_node_attrs_mut(pg, m),
                                                 kiln_node_attrs(g, n)) != KILN_OK)
        return 0;
    for (uint32_t o = 0; o < nout; o++)
        if (kiln_desc_copy(pg, kiln_node_output_desc(pg, m, o), kiln_node_output_desc(g, n, o)) !=
            KILN_OK)
            return 0;
    for (uint32_t i = 0; i < nin; i++)
        if (kiln_node_input_has_desc(g, n, i) &&
            kiln_desc_copy(pg, kiln_node_input_desc_mut(pg, m, i), kiln_node_input_desc(g, n, i)) !=
                KILN_OK)
            return 0;
    return m;
}

/*
 * What the splits read, fixed before any task runs: every node's rank (a node
 * without one is an error), which ranks are split (every engine partition when
 * the stage has passes, else those whose engine has an optimize_subgraph hook;
 * the input-nodes partition never), the nodes of each rank, and the crossings
 * of the split ranks, numbered over all crossings in the order the nodes and
 * their inputs (data, then control) come.
 */
static kiln_status prepare(pgraph *G, kiln_pass_ctx *pc, bool stage_passes, kiln_error *err)
{
    kiln_graph *g = G->g;
    uint32_t np = G->np, lim = kiln_graph_id_limit(g);
    const char *const *eng = NULL;
    uint32_t ne = 0, nsub = 0;
    kiln_attrs_get_list_string(g->attrs, KILN_PART_ENGINES, &eng, &ne);
    if (!kiln_attrs_get_list_int(g->attrs, KILN_PART_SUBGRAPHS, &G->sub, &nsub) || nsub < np)
        return kiln_errorf(err, KILN_ERR_INVALID, "graph %s: %s has %u entries for %u partitions",
                           kiln_graph_name(g), KILN_PART_SUBGRAPHS, nsub, np);
    G->seq = 0;
    kiln_attrs_get_int(g->attrs, KILN_PART_SEQ, &G->seq);
    G->part = kiln__malloc(((size_t)lim + 1) * sizeof(int32_t));
    G->nstart = kiln__calloc((size_t)np + 1, sizeof(uint32_t));
    G->xstart = kiln__calloc((size_t)np + 1, sizeof(uint32_t));
    if (!G->part || !G->nstart || !G->xstart)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    const char *last = NULL; /* engine names are interned: equal names, equal pointers */
    const kiln_component *lastc = NULL;
    for (uint32_t r = 0; r < np; r++) {
        G->byrank[r].G = G;
        G->byrank[r].rank = r;
        const char *e = eng[r];
        if (strcmp(e, "inputNodesSubGraph") == 0)
            continue;
        if (e != last) {
            last = e;
            lastc = kiln_registry_find(g->ctx, KILN_COMP_ENGINE, e);
        }
        G->byrank[r].engine = lastc;
        G->byrank[r].split = stage_passes || (lastc && lastc->d.engine.optimize_subgraph);
    }
    /* ranks; nodes by rank (a counting sort, id order kept) */
    uint32_t total = 0;
    for (kiln_node_id n = 0; n <= lim; n++)
        G->part[n] = -1;
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n)) {
        int64_t r;
        if (!kiln_attrs_get_int(kiln_node_attrs(g, n), KILN_PART_NODE, &r) || r < 0 ||
            r >= (int64_t)np)
            return kiln_errorf(err, KILN_ERR_INVALID,
                               "graph %s: node %s has no partition (_kiln_partition) although "
                               "the graph is partitioned",
                               kiln_graph_name(g), kiln_node_name_str(g, n));
        G->part[n] = (int32_t)r;
        G->nstart[r + 1]++;
        total++;
    }
    for (uint32_t r = 0; r < np; r++)
        G->nstart[r + 1] += G->nstart[r];
    G->nodes = kiln__malloc(((size_t)total + 1) * sizeof(kiln_node_id));
    if (!G->nodes)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n))
        G->nodes[G->nstart[G->part[n]]++] = n;
    for (uint32_t r = np; r > 0; r--)
        G->nstart[r] = G->nstart[r - 1];
    G->nstart[0] = 0;
    /* an engine that says its hook would leave a partition as it is: not split */
    for (uint32_t r = 0; r < np && !stage_passes; r++) {
        const kiln_component *c = G->byrank[r].engine;
        if (!G->byrank[r].split || !c->d.engine.optimize_subgraph_wanted)
            continue;
        void *inst = NULL;
        kiln_status st = kiln__engine_instance(c, &inst, err);
        if (st != KILN_OK)
            return st;
        kiln_activity act =
            KILN_ACTIVITY(kiln__comp_plugin(c), c->name, "optimize_subgraph_wanted", g, 0);
        kiln_activity *prev = kiln__activity_enter(&act);
        G->byrank[r].split = c->d.engine.optimize_subgraph_wanted(
            inst, pc, g, r, G->nodes + G->nstart[r], G->nstart[r + 1] - G->nstart[r]);
        kiln__activity_leave(prev);
    }
    /* the crossings */
    uint32_t k = 0, cap = 0;
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n)) {
        uint32_t r = (uint32_t)G->part[n], nin = kiln_node_input_count(g, n);
        for (uint32_t i = 0, c = 0;; i++) {
            kiln_node_id s;
            int32_t so, di;
            if (i < nin) {
                kiln_anchor p = kiln_node_input_peer(g, n, i);
                if (!(s = p.node))
                    continue;
                so = (int32_t)p.index;
                di = (int32_t)i;
            } else {
                c = i == nin ? kiln_ctrl_in_first(g, n) : kiln_ctrl_in_next(g, c);
                if (!c)
                    break;
                s = kiln_ctrl_src(g, c);
                so = di = -1;
            }
            uint32_t rs = (uint32_t)G->part[s];
            if (rs == r)
                continue;
            uint32_t kk = k++;
            if (!G->byrank[rs].split && !G->byrank[r].split)
                continue;
            if (G->nx == cap) {
                cap = cap ? 2 * cap : 256;
                xing *nx = kiln__realloc(G->x, (size_t)cap * sizeof(xing));
                if (!nx)
                    return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
                G->x = nx;
            }
            G->x[G->nx++] = (xing){.k = kk, .src = s, .dst = n, .so = so, .di = di, .rs = rs,
                                   .rd = r, .topo = kiln_graph_topo_index(g, s),
                                   .sop = kiln_node_op(g, s), .dop = kiln_node_op(g, n),
                                   .seng = engine_of(g, s), .deng = engine_of(g, n)};
            G->xstart[rs + 1] += G->byrank[rs].split;
            G->xstart[r + 1] += G->byrank[r].split;
        }
    }
    for (uint32_t r = 0; r < np; r++)
        G->xstart[r + 1] += G->xstart[r];
    G->xl = kiln__malloc(((size_t)G->xstart[np] + 1) * sizeof(uint32_t));
    if (!G->xl)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    for (uint32_t i = 0; i < G->nx; i++) {
        if (G->byrank[G->x[i].rs].split)
            G->xl[G->xstart[G->x[i].rs]++] = i;
        if (G->byrank[G->x[i].rd].split)
            G->xl[G->xstart[G->x[i].rd]++] = i;
    }
    for (uint32_t r = np; r > 0; r--)
        G->xstart[r] = G->xstart[r - 1];
    G->xstart[0] = 0;
    return KILN_OK;
}

/* The node of partition graph @p t for owner node @p n of its rank (1 + its
 * position among the rank's nodes: they were copied first, in id order). */
static kiln_node_id local(const ptask *t, kiln_node_id n)
{
    const pgraph *G = t->G;
    const kiln_node_id *own = G->nodes + G->nstart[t->rank];
    uint32_t lo = 0, hi = G->nstart[t->rank + 1] - G->nstart[t->rank];
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (own[mid] < n)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo + 1;
}

/* The End of crossing @p x in its source partition's graph. */
static kiln_status add_end(ptask *t, xing *x)
{
    kiln_graph *eg = t->pg;
    char name[512];
    snprintf(name, sizeof(name), "%s_End%u", kiln_graph_name(eg), x->k);
    kiln_node_id e = kiln_graph_add_node(eg, name, "End", x->so >= 0 ? 1 : 0, 0);
    kiln_node_id s = local(t, x->src);
    if (!e || (x->so >= 0 ? kiln_edge_add(eg, s, (uint32_t)x->so, e, 0) : kiln_ctrl_add(eg, s, e)) !=
                  KILN_OK ||
        set_int(eg, e, "peerIndex", x->k) ||
        set_str(eg, e, "parentOpType", kiln_sym_str(eg, x->dop)) ||
        set_str(eg, e, "end_rear_node_engine_name", x->deng))
        return KILN_ERR_NOMEM;
    x->end = e;
    return KILN_OK;
}

/* The PlaceHolder of crossing @p x in its destination partition's graph. */
static kiln_status add_pld(ptask *t, xing *x)
{
    const pgraph *G = t->G;
    kiln_graph *g = G->g, *pg = t->pg;
    char name[512], pid[160];
    snprintf(name, sizeof(name), "%s_PlaceHolder%u", kiln_graph_name(pg), x->k);
    kiln_node_id p = kiln_graph_add_node(pg, name, "PlaceHolder", 0, x->so >= 0 ? 1 : 0);
    part_name(G, x->rs, pid, sizeof(pid) - 16);
    snprintf(pid + strlen(pid), 16, ":%u", x->topo);
    kiln_node_id d = local(t, x->dst);
    if (!p ||
        (x->so >= 0 ? kiln_desc_copy(pg, kiln_node_output_desc(pg, p, 0),
                                     kiln_node_input_desc(g, x->dst, (uint32_t)x->di))
                    : KILN_OK) != KILN_OK ||
        (x->so >= 0 ? kiln_edge_add(pg, p, 0, d, (uint32_t)x->di) : kiln_ctrl_add(pg, p, d)) !=
            KILN_OK ||
        set_int(pg, p, "peerIndex", x->k) ||
        set_str(pg, p, "parentOpType", kiln_sym_str(pg, x->sop)) ||
        set_str(pg, p, "_parentNodeName", kiln_node_name_str(g, x->src)) ||
        set_str(pg, p, "parentId", pid) || set_int(pg, p, "anchorIndex", x->so) ||
        set_str(pg, p, "_peerNodeName", kiln_node_name_str(g, x->dst)) ||
        set_str(pg, p, "pld_front_node_engine_name", x->seng))
        return KILN_ERR_NOMEM;
    x->pld = p;
    return KILN_OK;
}

/*
 * Split partition @p t into t->pg (GE SplitSubGraphs): its nodes, in id order,
 * then its edges and boundary nodes in the order the owner graph's nodes and
 * their inputs (data, then control) come, as a walk of the whole graph would
 * add them: an edge inside the partition, or a crossing's End (a consumer in
 * another partition) or PlaceHolder (a producer in another partition).  Reads
 * the owner graph only (tasks of one batch run this at once).
 */
static kiln_status build(ptask *t)
{
    pgraph *G = t->G;
    kiln_graph *g = G->g;
    uint32_t r = t->rank;
    const kiln_node_id *own = G->nodes + G->nstart[r];
    const uint32_t *xl = G->xl + G->xstart[r];
    uint32_t cnt = G->nstart[r + 1] - G->nstart[r], nxl = G->xstart[r + 1] - G->xstart[r];
    char name[160];
    part_name(G, r, name, sizeof(name));
    if (!(t->pg = kiln_graph_create(g->ctx, name)))
        return KILN_ERR_NOMEM;
    kiln_graph *pg = t->pg;
    uint32_t nin = 0, nout = 0;
    for (uint32_t i = 0; i < cnt; i++) {
        nin += kiln_node_input_count(g, own[i]);
        nout += kiln_node_output_count(g, own[i]);
    }
    for (uint32_t j = 0; j < nxl; j++) {
        const xing *x = &G->x[xl[j]];
        if (x->so >= 0)
            *(x->rs == r ? &nin : &nout) += 1;
    }
    if (!kiln_graph_reserve(pg, cnt + nxl, nin, nout))
        return KILN_ERR_NOMEM;
    for (uint32_t i = 0; i < cnt; i++)
        if (copy_node(pg, g, own[i]) != i + 1)
            return KILN_ERR_NOMEM;
    kiln_status st = KILN_OK;
    uint32_t j = 0;
    for (uint32_t i = 0; i < cnt && st == KILN_OK; i++) {
        kiln_node_id n = own[i], m = i + 1;
        while (j < nxl && G->x[xl[j]].rs == r && G->x[xl[j]].dst < n && st == KILN_OK)
            st = add_end(t, &G->x[xl[j++]]);
        for (uint32_t k = 0; k < kiln_node_input_count(g, n) && st == KILN_OK; k++) {
            kiln_anchor p = kiln_node_input_peer(g, n, k);
            if (!p.node)
                continue;
            if ((uint32_t)G->part[p.node] == r)
                st = kiln_edge_add(pg, local(t, p.node), p.index, m, k);
            else if (j < nxl && G->x[xl[j]].dst == n)
                st = add_pld(t, &G->x[xl[j++]]);
            else
                st = KILN_ERR_INVALID;
        }
        for (uint32_t c = kiln_ctrl_in_first(g, n); c && st == KILN_OK;
             c = kiln_ctrl_in_next(g, c)) {
            kiln_node_id s = kiln_ctrl_src(g, c);
            if ((uint32_t)G->part[s] == r)
                st = kiln_ctrl_add(pg, local(t, s), m);
            else if (j < nxl && G->x[xl[j]].dst == n)
                st = add_pld(t, &G->x[xl[j++]]);
            else
                st = KILN_ERR_INVALID;
        }
    }
    while (j < nxl && st == KILN_OK)
        st = G->x[xl[j]].rs == r ? add_end(t, &G->x[xl[j++]]) : KILN_ERR_INVALID;
    t->shape = pg->struct_mutation;
    t->mut = pg->mutation;
    return st;
}

static kiln_status task(void *arg, uint32_t i, kiln_error *err)
{
    pstate *s = arg;
    ptask *t = s->t[i];
    kiln_status st = build(t);
    if (st != KILN_OK)
        return kiln_errorf(err, st, "graph %s: splitting partition %u failed",
                           kiln_graph_name(t->G->g), t->rank);
    const kiln_component *c = t->engine;
    if (c && c->d.engine.optimize_subgraph) {
        void *inst = NULL;
        if ((st = kiln__engine_instance(c, &inst, err)) != KILN_OK)
            return st;
        kiln_activity act =
            KILN_ACTIVITY(kiln__comp_plugin(c), c->name, "optimize_subgraph", t->pg, 0);
        kiln_activity *prev = kiln__activity_enter(&act);
        /* the hook reports through kiln_pass_error(ctx): the task's error object.
         * Inside a task the pass context is the task's own (its stats and
         * explanations are merged in task order, docs/threads.md); its counters
         * read "optimize_subgraph: <engine>: ...". */
        kiln_pass_ctx *pc = kiln__passmgr_ctx(s->pm);
        if (!pc)
            return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
        kiln_error *saved = pc->err;
        const char *saved_stage = pc->stage;
        const kiln_component *saved_comp = pc->comp;
        pc->err = err;
        pc->stage = kiln_stage_name(KILN_STAGE_OPTIMIZE_SUBGRAPH);
        pc->comp = c;
        st = c->d.engine.optimize_subgraph(inst, pc, t->pg);
        pc->err = saved;
        pc->stage = saved_stage;
        pc->comp = saved_comp;
        kiln__activity_leave(prev);
        if (st != KILN_OK) {
            if (!kiln_error_code(err))
                kiln_errorf(err, st, "failed");
            return kiln_error_push(err, "engine %s: optimize_subgraph of partition %s", c->name,
                                   kiln_graph_name(t->pg));
        }
    }
    if (s->stage->npasses &&
        (st = kiln__passmgr_run_stage(s->pm, kiln_stage_name(KILN_STAGE_OPTIMIZE_SUBGRAPH),
                                      s->stage->passes, s->stage->npasses, t->pg, err)) !=
            KILN_OK)
        return kiln_error_push(err, "partition %s", kiln_graph_name(t->pg));
    return KILN_OK;
}

/* Copy op type, attributes, anchor counts and descriptors of pg node m onto g node n. */
static kiln_status update_node(kiln_graph *g, kiln_node_id n, kiln_graph *pg, kiln_node_id m)
{
    kiln_status st = KILN_OK;
    const char *op = kiln_node_op_str(pg, m);
    if (strcmp(op, kiln_node_op_str(g, n)) != 0)
        st = kiln_node_set_op(g, n, op);
    kiln_attrs *a = kiln_node_attrs_mut(g, n);
    if (st == KILN_OK && a) {
        kiln_attrs_clear(a);
        st = kiln_attrs_copy(a, kiln_node_attrs(pg, m));
    }
    uint32_t nin = kiln_node_input_count(pg, m), nout = kiln_node_output_count(pg, m);
    if (st == KILN_OK && nin != kiln_node_input_count(g, n))
        st = kiln_node_set_input_count(g, n, nin);
    if (st == KILN_OK && nout != kiln_node_output_count(g, n))
        st = kiln_node_set_output_count(g, n, nout);
    for (uint32_t o = 0; st == KILN_OK && o < nout; o++)
        st = kiln_desc_copy(g, kiln_node_output_desc(g, n, o), kiln_node_output_desc(pg, m, o));
    for (uint32_t i = 0; st == KILN_OK && i < nin; i++)
        if (kiln_node_input_has_desc(pg, m, i))
            st = kiln_desc_copy(g, kiln_node_input_desc_mut(g, n, i), kiln_node_input_desc(pg, m, i));
    return st;
}

/* GE MergeSubGraph, for attribute and descriptor edits. */
static kiln_status merge(ptask *t, kiln_error *err)
{
    kiln_graph *g = t->G->g, *pg = t->pg;
    for (kiln_node_id m = kiln_graph_next_node(pg, 0); m; m = kiln_graph_next_node(pg, m)) {
        kiln_node_id n = kiln_graph_find_node(g, kiln_node_name_str(pg, m));
        if (!n || kiln_node_partition(g, n) != (int32_t)t->rank)
            continue; /* a PlaceHolder or End */
        kiln_status st = update_node(g, n, pg, m);
        if (st != KILN_OK)
            return kiln_errorf(err, st, "merging partition %s back into graph %s failed at node %s",
                               kiln_graph_name(pg), kiln_graph_name(g), kiln_node_name_str(g, n));
    }
    return KILN_OK;
}

static bool is_bnd(const ptask *t, kiln_node_id m)
{
    return m <= t->nb && t->bnd[m];
}

/* The producer (a node of the owner graph and its output) feeding data crossing k
 * after the tasks: the End's producer in the source partition, followed through
 * PlaceHolders the task connected straight to the End. */
static kiln_status data_src(pgraph *G, uint32_t k, kiln_anchor *out, kiln_error *err)
{
    for (uint32_t step = 0; step <= G->nx; step++) {
        const xing *x = &G->x[k];
        const ptask *ts = &G->byrank[x->rs];
        if (!ts->changed) {
            *out = (kiln_anchor){x->src, (uint32_t)x->so};
            return KILN_OK;
        }
        kiln_anchor p = kiln_node_input_peer(ts->pg, x->end, 0);
        if (!p.node)
            return kiln_errorf(err, KILN_ERR_INVALID,
                               "partition %s: optimize_subgraph left boundary node %s without a "
                               "producer (it feeds %s of another partition)",
                               kiln_graph_name(ts->pg), kiln_node_name_str(ts->pg, x->end),
                               kiln_node_name_str(G->g, x->dst));
        if (!is_bnd(ts, p.node)) {
            *out = (kiln_anchor){ts->map[p.node], p.index};
            return KILN_OK;
        }
        k = ts->bnd[p.node] - 1;
        if (G->x[k].so < 0)
            return kiln_errorf(err, KILN_ERR_INVALID, "partition %s: boundary node %s feeds %s",
                               kiln_graph_name(ts->pg), kiln_node_name_str(ts->pg, p.node),
                               kiln_node_name_str(ts->pg, x->end));
    }
    return kiln_errorf(err, KILN_ERR_INVALID, "graph %s: PlaceHolder/End chain does not end",
                       kiln_graph_name(G->g));
}

/* Control edges from every source of crossing k (after the tasks) to @p dst. */
static kiln_status ctrl_to(pgraph *G, uint32_t k, kiln_node_id dst, uint32_t depth,
                           kiln_error *err)
{
    const xing *x = &G->x[k];
    const ptask *ts = &G->byrank[x->rs];
    if (depth > G->nx)
        return kiln_errorf(err, KILN_ERR_INVALID, "graph %s: PlaceHolder/End chain does not end",
                           kiln_graph_name(G->g));
    kiln_status st;
    if (x->so >= 0) {
        kiln_anchor s;
        if ((st = data_src(G, k, &s, err)) != KILN_OK)
            return st;
        return s.node == dst ? KILN_OK : kiln_ctrl_add(G->g, s.node, dst);
    }
    if (!ts->changed)
        return kiln_ctrl_add(G->g, x->src, dst);
    for (uint32_t c = kiln_ctrl_in_first(ts->pg, x->end); c; c = kiln_ctrl_in_next(ts->pg, c)) {
        kiln_node_id s = kiln_ctrl_src(ts->pg, c);
        st = is_bnd(ts, s) ? ctrl_to(G, ts->bnd[s] - 1, dst, depth + 1, err)
                           : kiln_ctrl_add(G->g, ts->map[s], dst);
        if (st != KILN_OK)
            return st;
    }
    return KILN_OK;
}

static kiln_status merge_fail(kiln_status st, kiln_graph *g, kiln_error *err)
{
    if (!kiln_error_code(err))
        kiln_errorf(err, st, "merging structural edits back into graph %s failed",
                    kiln_graph_name(g));
    return st;
}

/*
 * GE MergeSubGraph with structural edits: the partitions whose structure a task
 * changed are put back node by node (kept nodes updated, new nodes added to the
 * partition, missing nodes removed) and their edges rebuilt from the partition
 * graphs; each crossing edge is rebuilt from its End (the producer) and its
 * PlaceHolder (the consumers).  Boundary PlaceHolders and Ends must survive.
 */
static kiln_status merge_graph(pgraph *G, kiln_error *err)
{
    kiln_graph *g = G->g;
    kiln_status st = KILN_OK;
    bool any = false;
    for (uint32_t r = 0; r < G->np; r++)
        any |= G->byrank[r].changed;
    if (!any)
        return KILN_OK;
    for (uint32_t r = 0; r < G->np; r++) {
        ptask *t = &G->byrank[r];
        if (!t->changed)
            continue;
        t->nb = kiln_graph_id_limit(t->pg);
        t->bnd = kiln__calloc(t->nb + 1, sizeof(uint32_t));
        t->map = kiln__calloc(t->nb + 1, sizeof(kiln_node_id));
        if (!t->bnd || !t->map)
            return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    }
    /* the boundary nodes: they must have survived */
    for (uint32_t k = 0; k < G->nx; k++) {
        const xing *x = &G->x[k];
        const ptask *side[2] = {&G->byrank[x->rs], &G->byrank[x->rd]};
        kiln_node_id id[2] = {x->end, x->pld};
        const char *op[2] = {"End", "PlaceHolder"};
        for (int s = 0; s < 2; s++) {
            if (!side[s]->changed)
                continue;
            if (!kiln_node_is_live(side[s]->pg, id[s]) ||
                strcmp(kiln_node_op_str(side[s]->pg, id[s]), op[s]) != 0)
                return kiln_errorf(err, KILN_ERR_INVALID,
                                   "partition %s (engine %s) of graph %s: optimize_subgraph "
                                   "removed or replaced a boundary %s (edge %s -> %s); "
                                   "PlaceHolders and Ends must stay",
                                   kiln_graph_name(side[s]->pg),
                                   kiln_graph_partition_engine(g, s ? x->rd : x->rs),
                                   kiln_graph_name(g), op[s], kiln_node_name_str(g, x->src),
                                   kiln_node_name_str(g, x->dst));
            side[s]->bnd[id[s]] = k + 1;
        }
    }
    /* nodes: update the kept, add the new */
    for (uint32_t r = 0; r < G->np; r++) {
        ptask *t = &G->byrank[r];
        if (!t->changed)
            continue;
        for (kiln_node_id m = kiln_graph_next_node(t->pg, 0); m; m = kiln_graph_next_node(t->pg, m)) {
            if (is_bnd(t, m))
                continue;
            const char *name = kiln_node_name_str(t->pg, m);
            kiln_node_id n = kiln_graph_find_node(g, name);
            if (n && kiln_node_partition(g, n) != (int32_t)r)
                return kiln_errorf(err, KILN_ERR_DUPLICATE,
                                   "partition %s (engine %s) of graph %s: optimize_subgraph added "
                                   "node %s, a name another partition's node has",
                                   kiln_graph_name(t->pg), kiln_graph_partition_engine(g, r),
                                   kiln_graph_name(g), name);
            if (n)
                st = update_node(g, n, t->pg, m);
            else if (!(n = copy_node(g, t->pg, m)))
                st = KILN_ERR_NOMEM;
            else {
                kiln_attrs *a = kiln_node_attrs_mut(g, n);
                const char *e;
                st = kiln_attrs_set_int(a, KILN_PART_NODE, r);
                if (st == KILN_OK && !kiln_attrs_get_string(a, KILN_ATTR_ENGINE, &e))
                    st = kiln_attrs_set_string(a, KILN_ATTR_ENGINE,
                                               kiln_graph_partition_engine(g, r));
            }
            if (st != KILN_OK)
                return kiln_errorf(err, st, "merging partition %s back into graph %s failed at "
                                   "node %s", kiln_graph_name(t->pg), kiln_graph_name(g), name);
            if (m <= t->nb)
                t->map[m] = n;
        }
    }
    /* edges: drop every input of the changed partitions' nodes and the crossings out of
     * them; drop the nodes the tasks removed */
    uint32_t lim = kiln_graph_id_limit(g);
    uint8_t *keep = kiln__calloc(lim + 1, 1);
    if (!keep)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    for (uint32_t r = 0; r < G->np; r++) {
        ptask *t = &G->byrank[r];
        for (kiln_node_id m = 1; t->changed && m <= t->nb; m++)
            if (t->map[m])
                keep[t->map[m]] = 1;
    }
    for (uint32_t k = 0; k < G->nx && st == KILN_OK; k++) {
        const xing *x = &G->x[k];
        if (G->byrank[x->rs].changed && !G->byrank[x->rd].changed)
            st = x->so >= 0 ? kiln_edge_remove(g, x->dst, (uint32_t)x->di)
                            : kiln_ctrl_remove(g, x->src, x->dst);
    }
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n && st == KILN_OK;
         n = kiln_graph_next_node(g, n)) {
        int32_t r = kiln_node_partition(g, n);
        if (r < 0 || !G->byrank[r].changed)
            continue;
        for (uint32_t i = 0; i < kiln_node_input_count(g, n) && st == KILN_OK; i++)
            st = kiln_edge_remove(g, n, i);
        for (uint32_t c = kiln_ctrl_in_first(g, n), nc; c && st == KILN_OK; c = nc) {
            nc = kiln_ctrl_in_next(g, c);
            st = kiln_ctrl_remove(g, kiln_ctrl_src(g, c), n);
        }
    }
    for (kiln_node_id n = kiln_graph_next_node(g, 0), nn; n && st == KILN_OK; n = nn) {
        nn = kiln_graph_next_node(g, n);
        int32_t r = kiln_node_partition(g, n);
        if (r < 0 || !G->byrank[r].changed || keep[n])
            continue;
        if (kiln_node_subgraph_count(g, n)) {
            st = kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                             "partition %s (engine %s) of graph %s: optimize_subgraph removed "
                             "node %s, which owns subgraphs (not merged back)",
                             kiln_graph_name(G->byrank[r].pg), kiln_graph_partition_engine(g, r),
                             kiln_graph_name(g), kiln_node_name_str(g, n));
            break;
        }
        st = kiln_graph_remove_node(g, n);
    }
    kiln__free(keep);
    if (st != KILN_OK)
        return merge_fail(st, g, err);
    /* edges inside the changed partitions */
    for (uint32_t r = 0; r < G->np && st == KILN_OK; r++) {
        ptask *t = &G->byrank[r];
        if (!t->changed)
            continue;
        kiln_graph *pg = t->pg;
        for (kiln_node_id m = kiln_graph_next_node(pg, 0); m && st == KILN_OK;
             m = kiln_graph_next_node(pg, m)) {
            if (is_bnd(t, m))
                continue;
            for (uint32_t i = 0; i < kiln_node_input_count(pg, m) && st == KILN_OK; i++) {
                kiln_anchor p = kiln_node_input_peer(pg, m, i);
                if (p.node && !is_bnd(t, p.node))
                    st = kiln_edge_add(g, t->map[p.node], p.index, t->map[m], i);
            }
            for (uint32_t c = kiln_ctrl_in_first(pg, m); c && st == KILN_OK;
                 c = kiln_ctrl_in_next(pg, c)) {
                kiln_node_id s = kiln_ctrl_src(pg, c);
                if (!is_bnd(t, s))
                    st = kiln_ctrl_add(g, t->map[s], t->map[m]);
            }
        }
    }
    /* the crossings: producer from the End, consumers from the PlaceHolder */
    for (uint32_t k = 0; k < G->nx && st == KILN_OK; k++) {
        const xing *x = &G->x[k];
        const ptask *td = &G->byrank[x->rd];
        if (!G->byrank[x->rs].changed && !td->changed)
            continue;
        kiln_anchor s = {0, 0};
        if (x->so >= 0 && (st = data_src(G, k, &s, err)) != KILN_OK)
            return st;
        if (!td->changed) {
            st = x->so >= 0 ? kiln_edge_add(g, s.node, s.index, x->dst, (uint32_t)x->di)
                            : ctrl_to(G, k, x->dst, 0, err);
            continue;
        }
        kiln_graph *pg = td->pg;
        for (uint32_t c = x->so >= 0 ? kiln_use_first(pg, x->pld, 0) : 0; c && st == KILN_OK;
             c = kiln_use_next(pg, c)) {
            kiln_anchor d = kiln_use_dst(pg, c);
            if (!is_bnd(td, d.node))
                st = kiln_edge_add(g, s.node, s.index, td->map[d.node], d.index);
        }
        for (uint32_t c = kiln_ctrl_out_first(pg, x->pld); c && st == KILN_OK;
             c = kiln_ctrl_out_next(pg, c)) {
            kiln_node_id d = kiln_ctrl_dst(pg, c);
            if (!is_bnd(td, d))
                st = ctrl_to(G, k, td->map[d], 0, err);
        }
    }
    if (st != KILN_OK)
        return merge_fail(st, g, err);
    /* rewired crossings may close a cycle through other partitions */
    const kiln_node_id *order;
    uint32_t cnt;
    kiln_error terr;
    kiln_error_clear(&terr);
    if (kiln_graph_topo_order(g, &order, &cnt, &terr) != KILN_OK)
        return kiln_errorf(err, KILN_ERR_INVALID,
                           "graph %s: the structural edits of optimize_subgraph, merged back, "
                           "make a cycle: %s",
                           kiln_graph_name(g), kiln_error_message(&terr));
    return KILN_OK;
}

/* After a batch's tasks, in task order: a partition whose structure is unchanged
 * has its attribute and descriptor edits merged back and its graph freed; a
 * changed one is kept for the structural merge at the end. */
static kiln_status settle(ptask **t, uint32_t n, kiln_error *err)
{
    for (uint32_t i = 0; i < n; i++) {
        kiln_graph *pg = t[i]->pg;
        t[i]->changed = pg->struct_mutation != t[i]->shape;
        if (t[i]->changed)
            continue;
        kiln_status st = pg->mutation != t[i]->mut ? merge(t[i], err) : KILN_OK;
        kiln_graph_destroy(pg);
        t[i]->pg = NULL;
        if (st != KILN_OK)
            return st;
    }
    return KILN_OK;
}

static void pgraph_free(pgraph *G)
{
    for (uint32_t r = 0; r < G->np; r++) {
        ptask *t = &G->byrank[r];
        if (t->pg)
            kiln_graph_destroy(t->pg);
        kiln__free(t->bnd);
        kiln__free(t->map);
    }
    kiln__free(G->x);
    kiln__free(G->part);
    kiln__free(G->nstart);
    kiln__free(G->nodes);
    kiln__free(G->xstart);
    kiln__free(G->xl);
}

kiln_status kiln__optimize_subgraph_stage(kiln_ctx *ctx, kiln_passmgr *pm, const kiln_stage *stg,
                                          kiln_graph *root, bool *handled, kiln_error *err)
{
    *handled = false;
    uint32_t ng = 1 + kiln_graph_all_subgraph_count(root), total = 0;
    for (uint32_t k = 0; k < ng; k++)
        total += kiln_graph_partition_count(k ? kiln_graph_all_subgraph(root, k - 1) : root);
    if (!total)
        return KILN_OK; /* not partitioned: the stage runs on the whole graph */
    *handled = true;
    /* nothing to run (no stage pass, no engine hook for any partition): no split */
    bool work_exists = stg->npasses > 0;
    const char *last = NULL; /* engine names are interned: equal names, equal pointers */
    for (uint32_t k = 0; k < ng && !work_exists; k++) {
        kiln_graph *g = k ? kiln_graph_all_subgraph(root, k - 1) : root;
        for (uint32_t r = 0; r < kiln_graph_partition_count(g) && !work_exists; r++) {
            const char *e = kiln_graph_partition_engine(g, r);
            if (e == last)
                continue;
            last = e;
            const kiln_component *c = kiln_registry_find(ctx, KILN_COMP_ENGINE, e);
            work_exists = c && c->d.engine.optimize_subgraph;
        }
    }
    if (!work_exists)
        return KILN_OK;
    ptask *all = kiln__calloc(total, sizeof(ptask));
    pgraph *gs = kiln__calloc(ng, sizeof(pgraph));
    ptask **work = kiln__calloc(total, sizeof(ptask *));
    if (!all || !gs || !work) {
        kiln__free(all);
        kiln__free(gs);
        kiln__free(work);
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    }
    kiln_status st = KILN_OK;
    uint32_t off = 0, nwork = 0;
    for (uint32_t k = 0; k < ng && st == KILN_OK; k++) {
        kiln_graph *g = k ? kiln_graph_all_subgraph(root, k - 1) : root;
        gs[k] = (pgraph){.g = g, .byrank = all + off, .np = kiln_graph_partition_count(g)};
        if (gs[k].np)
            st = prepare(&gs[k], kiln__passmgr_ctx(pm), stg->npasses > 0, err);
        off += gs[k].np;
    }
    /* the tasks, in graph order: partitions with an engine hook to run or stage passes */
    for (uint32_t i = 0; st == KILN_OK && i < total; i++)
        if (all[i].split)
            work[nwork++] = &all[i];
    /* in batches: split, run, merge what can be merged, free */
    uint32_t threads = kiln__parallel_threads(ctx);
    uint64_t budget = batch_units();
    for (uint32_t i = 0, j; st == KILN_OK && i < nwork; i = j) {
        uint64_t units = 0;
        for (j = i; j < nwork && (j == i || units < budget); j++) {
            const pgraph *G = work[j]->G;
            uint32_t r = work[j]->rank;
            units += 1u + G->nstart[r + 1] - G->nstart[r] + G->xstart[r + 1] - G->xstart[r];
        }
        pstate s = {pm, stg, work + i};
        st = kiln__parallel_run(ctx, j - i, threads, task, &s, err);
        if (st == KILN_OK)
            st = settle(work + i, j - i, err);
    }
    /* the structural edits, merged in graph order (root, then subgraphs) */
    for (uint32_t k = 0; k < ng && st == KILN_OK; k++)
        if (gs[k].np)
            st = merge_graph(&gs[k], err);
    for (uint32_t k = 0; k < ng; k++)
        pgraph_free(&gs[k]);
    kiln__free(all);
    kiln__free(gs);
    kiln__free(work);
    return st;
}

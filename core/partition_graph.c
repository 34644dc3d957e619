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
 * Each partition is then one task of kiln__parallel_run: its engine's
 * optimize_subgraph hook, then the stage's passes, on that graph only.
 * Merging back (GE MergeSubGraph) copies every node's attributes, output and
 * input descriptors and op type back to the node of the same name; a task that
 * changed the structure of its partition (added, removed or rewired a node) is
 * an error naming the partition, since structural merging is not built.
 * Without partitions the stage runs its passes on the whole graph as before;
 * with partitions but no stage pass and no engine hook, nothing is split.
 * Cost: O(nodes + edges) to split and merge, plus what the hooks and passes do.
 */
#include "partition_graph.h"
#include "crash.h"
#include "graph_int.h"
#include "graph_json.h"
#include "parallel.h"
#include "passctx.h"
#include "plugin.h"

#include <stdio.h>

typedef struct ptask {
    kiln_graph *owner;   /* the partitioned graph */
    uint32_t rank;
    kiln_graph *pg;      /* the partition as a graph */
    const kiln_component *engine; /* NULL: no loaded engine (ge_local, unplaced, ...) */
    uint64_t shape;      /* pg->struct_mutation after the split */
} ptask;

typedef struct pstate {
    kiln_passmgr *pm;
    const kiln_stage *stage;
    ptask *t;
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

/* One crossing edge (src, so) -> (dst, di) (di = so = -1: control) as End + PlaceHolder. */
static kiln_status cross(kiln_graph *g, ptask *byrank, const uint32_t *map, uint32_t *counter,
                         kiln_node_id src, int32_t so, kiln_node_id dst, int32_t di)
{
    int32_t rs = kiln_node_partition(g, src), rd = kiln_node_partition(g, dst);
    uint32_t k = (*counter)++;
    char name[512];
    if (byrank[rs].pg) {
        kiln_graph *eg = byrank[rs].pg;
        snprintf(name, sizeof(name), "%s_End%u", kiln_graph_name(eg), k);
        kiln_node_id e = kiln_graph_add_node(eg, name, "End", so >= 0 ? 1 : 0, 0);
        if (!e || (so >= 0 ? kiln_edge_add(eg, map[src], (uint32_t)so, e, 0)
                           : kiln_ctrl_add(eg, map[src], e)) != KILN_OK ||
            set_int(eg, e, "peerIndex", k) || set_str(eg, e, "parentOpType", kiln_node_op_str(g, dst)) ||
            set_str(eg, e, "end_rear_node_engine_name", engine_of(g, dst)))
            return KILN_ERR_NOMEM;
    }
    if (byrank[rd].pg) {
        kiln_graph *pg = byrank[rd].pg;
        snprintf(name, sizeof(name), "%s_PlaceHolder%u", kiln_graph_name(pg), k);
        kiln_node_id p = kiln_graph_add_node(pg, name, "PlaceHolder", 0, so >= 0 ? 1 : 0);
        char pid[512];
        snprintf(pid, sizeof(pid), "%s:%u", kiln_graph_partition_name(g, (uint32_t)rs),
                 kiln_graph_topo_index(g, src));
        if (!p ||
            (so >= 0 ? kiln_desc_copy(pg, kiln_node_output_desc(pg, p, 0),
                                      kiln_node_input_desc(g, dst, (uint32_t)di))
                     : KILN_OK) != KILN_OK ||
            (so >= 0 ? kiln_edge_add(pg, p, 0, map[dst], (uint32_t)di)
                     : kiln_ctrl_add(pg, p, map[dst])) != KILN_OK ||
            set_int(pg, p, "peerIndex", k) || set_str(pg, p, "parentOpType", kiln_node_op_str(g, src)) ||
            set_str(pg, p, "_parentNodeName", kiln_node_name_str(g, src)) ||
            set_str(pg, p, "parentId", pid) || set_int(pg, p, "anchorIndex", so) ||
            set_str(pg, p, "_peerNodeName", kiln_node_name_str(g, dst)) ||
            set_str(pg, p, "pld_front_node_engine_name", engine_of(g, src)))
            return KILN_ERR_NOMEM;
    }
    return KILN_OK;
}

/* Split the engine partitions of @p g into byrank[r].pg (input-nodes partition: none). */
static kiln_status split(kiln_graph *g, ptask *byrank, kiln_error *err)
{
    uint32_t np = kiln_graph_partition_count(g);
    for (uint32_t r = 0; r < np; r++) {
        byrank[r].owner = g;
        byrank[r].rank = r;
        const char *e = kiln_graph_partition_engine(g, r);
        if (strcmp(e, "inputNodesSubGraph") == 0)
            continue;
        byrank[r].engine = kiln_registry_find(g->ctx, KILN_COMP_ENGINE, e);
        if (!(byrank[r].pg = kiln_graph_create(g->ctx, kiln_graph_partition_name(g, r))))
            return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    }
    uint32_t *map = kiln__calloc(kiln_graph_id_limit(g) + 1, sizeof(uint32_t));
    if (!map)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    kiln_status st = KILN_OK;
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n && st == KILN_OK;
         n = kiln_graph_next_node(g, n)) {
        int32_t r = kiln_node_partition(g, n);
        if (r < 0)
            st = kiln_errorf(err, KILN_ERR_INVALID,
                             "graph %s: node %s has no partition (_kiln_partition) although the "
                             "graph is partitioned",
                             kiln_graph_name(g), kiln_node_name_str(g, n));
        else if (byrank[r].pg && !(map[n] = copy_node(byrank[r].pg, g, n)))
            st = kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    }
    uint32_t counter = 0;
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n && st == KILN_OK;
         n = kiln_graph_next_node(g, n)) {
        int32_t r = kiln_node_partition(g, n);
        for (uint32_t i = 0; i < kiln_node_input_count(g, n) && st == KILN_OK; i++) {
            kiln_anchor p = kiln_node_input_peer(g, n, i);
            if (!p.node)
                continue;
            if (kiln_node_partition(g, p.node) == r)
                st = byrank[r].pg ? kiln_edge_add(byrank[r].pg, map[p.node], p.index, map[n], i)
                                  : KILN_OK;
            else
                st = cross(g, byrank, map, &counter, p.node, (int32_t)p.index, n, (int32_t)i);
        }
        for (uint32_t c = kiln_ctrl_in_first(g, n); c && st == KILN_OK;
             c = kiln_ctrl_in_next(g, c)) {
            kiln_node_id s = kiln_ctrl_src(g, c);
            if (kiln_node_partition(g, s) == r)
                st = byrank[r].pg ? kiln_ctrl_add(byrank[r].pg, map[s], map[n]) : KILN_OK;
            else
                st = cross(g, byrank, map, &counter, s, -1, n, -1);
        }
    }
    kiln__free(map);
    if (st != KILN_OK && !kiln_error_code(err))
        kiln_errorf(err, st, "graph %s: splitting the partitions failed", kiln_graph_name(g));
    for (uint32_t r = 0; r < np; r++)
        if (byrank[r].pg)
            byrank[r].shape = byrank[r].pg->struct_mutation;
    return st;
}

static kiln_status task(void *arg, uint32_t i, kiln_error *err)
{
    pstate *s = arg;
    ptask *t = &s->t[i];
    kiln_status st = KILN_OK;
    const kiln_component *c = t->engine;
    if (c && c->d.engine.optimize_subgraph) {
        void *inst = NULL;
        if ((st = kiln__engine_instance(c, &inst, err)) != KILN_OK)
            return st;
        kiln_activity act =
            KILN_ACTIVITY(kiln__comp_plugin(c), c->name, "optimize_subgraph", t->pg, 0);
        kiln_activity *prev = kiln__activity_enter(&act);
        /* the hook reports through kiln_pass_error(ctx): the task's error object.
         * The pass context is shared by the tasks: a thread pool needs one per task. */
        kiln_pass_ctx *pc = kiln__passmgr_ctx(s->pm);
        kiln_error *saved = pc->err;
        pc->err = err;
        st = c->d.engine.optimize_subgraph(inst, pc, t->pg);
        pc->err = saved;
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

/* GE MergeSubGraph, for attribute and descriptor edits. */
static kiln_status merge(ptask *t, kiln_error *err)
{
    kiln_graph *g = t->owner, *pg = t->pg;
    if (pg->struct_mutation != t->shape)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                           "partition %s (engine %s) of graph %s: optimize_subgraph changed its "
                           "structure (nodes or edges); kiln merges attribute and descriptor "
                           "edits only",
                           kiln_graph_name(pg), kiln_graph_partition_engine(g, t->rank),
                           kiln_graph_name(g));
    for (kiln_node_id m = kiln_graph_next_node(pg, 0); m; m = kiln_graph_next_node(pg, m)) {
        const char *op = kiln_node_op_str(pg, m);
        kiln_node_id n = kiln_graph_find_node(g, kiln_node_name_str(pg, m));
        if (!n || kiln_node_partition(g, n) != (int32_t)t->rank)
            continue; /* a PlaceHolder or End */
        kiln_status st = KILN_OK;
        if (strcmp(op, kiln_node_op_str(g, n)) != 0)
            st = kiln_node_set_op(g, n, op);
        kiln_attrs *a = kiln_node_attrs_mut(g, n);
        if (st == KILN_OK && a) {
            kiln_attrs_clear(a);
            st = kiln_attrs_copy(a, kiln_node_attrs(pg, m));
        }
        for (uint32_t o = 0; st == KILN_OK && o < kiln_node_output_count(g, n); o++)
            st = kiln_desc_copy(g, kiln_node_output_desc(g, n, o), kiln_node_output_desc(pg, m, o));
        for (uint32_t i = 0; st == KILN_OK && i < kiln_node_input_count(g, n); i++)
            if (kiln_node_input_has_desc(pg, m, i))
                st = kiln_desc_copy(g, kiln_node_input_desc_mut(g, n, i),
                                    kiln_node_input_desc(pg, m, i));
        if (st != KILN_OK)
            return kiln_errorf(err, st, "merging partition %s back into graph %s failed at node %s",
                               kiln_graph_name(pg), kiln_graph_name(g), kiln_node_name_str(g, n));
    }
    return KILN_OK;
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
    if (!all)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    kiln_status st = KILN_OK;
    uint32_t off = 0;
    for (uint32_t k = 0; k < ng && st == KILN_OK; k++) {
        kiln_graph *g = k ? kiln_graph_all_subgraph(root, k - 1) : root;
        uint32_t np = kiln_graph_partition_count(g);
        if (np)
            st = split(g, all + off, err);
        off += np;
    }
    /* the tasks: partitions with an engine hook to run or stage passes */
    ptask *work = kiln__calloc(total, sizeof(ptask));
    uint32_t nwork = 0;
    if (!work && st == KILN_OK)
        st = kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    for (uint32_t i = 0; st == KILN_OK && i < total; i++)
        if (all[i].pg && (stg->npasses || (all[i].engine && all[i].engine->d.engine.optimize_subgraph)))
            work[nwork++] = all[i];
    if (st == KILN_OK && nwork) {
        pstate s = {pm, stg, work};
        st = kiln__parallel_run(ctx, nwork, kiln__parallel_threads(ctx), task, &s, err);
    }
    for (uint32_t i = 0; st == KILN_OK && i < nwork; i++)
        st = merge(&work[i], err);
    for (uint32_t i = 0; i < total; i++)
        if (all[i].pg)
            kiln_graph_destroy(all[i].pg);
    kiln__free(all);
    kiln__free(work);
    return st;
}

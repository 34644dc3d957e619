/*
 * cse.c - CommonSubexpressionEliminationPass (GE's
 * CommonSubexpressionEliminationPass), a graph pass: run by the pass manager
 * on the root graph and on every subgraph.
 *
 * Two nodes are the same expression when they have the same op type, the same
 * data inputs (producer anchor per input index, unconnected ones included),
 * the same set of control inputs, the same attributes (every key, type and
 * value) and the same output dtypes and shapes; GE's key is that too (type,
 * data inputs with their descs, sorted control inputs, all attributes).  The
 * later one (in topological order) is removed: its consumers read the earlier
 * one's outputs, its control successors follow the earlier one.
 *
 * Never merged (GE skips the nodes it cannot prove pure, and the ones it
 * inserted itself, which carry `no_need_constant_folding`):
 *   - ops that are not registered, or are stateful, reference, control-flow,
 *     data-like, constant (ConstantFuseSamePass handles Consts) or the graph
 *     output; nodes owning subgraphs; nodes with no data input;
 *   - nodes with the attribute `no_need_constant_folding` or with
 *     `_cannot_be_deleted` true (isolation copies of the memory-conflict
 *     passes carry both);
 *   - outputs that alias an input (ref_input on an output descriptor);
 *   - a pair that both feed the graph's NetOutput: merging would make two
 *     graph outputs one buffer.
 *
 * Visiting in topological order and rewiring at once makes chains collapse in
 * one run (Relu(x), Relu(x) merged, then Add(r1,c), Add(r2,c) merge too).
 * One hash table probe per node: O(N) expected, plus the attribute bytes.  The
 * table has 8-byte slots and each node's home slot is prefetched AHEAD nodes
 * before it is probed (its hash taken then, and again if a merge rewired it).
 * Counters: nodes_merged.  Requires: nothing.  Preserves: nothing.
 */
#include "attr_key.h"
#include "passes.h"

#include <stdlib.h>
#include <string.h>

/* One slot: the node (0 = empty) and the high half of its hash (the low half
 * picked the home slot); 8 bytes, so a probe is one cache line. */
typedef struct cse_ent {
    kiln_node_id id;
    uint32_t h;
} cse_ent;

typedef struct cse_tab {
    cse_ent *e;
    uint32_t cap; /* power of two */
} cse_tab;

/* Nodes are hashed this far ahead of the one being looked up, and their home
 * slots prefetched: at a million nodes the table is far out of cache and the
 * probes were most of the pass. */
#define AHEAD 64

static bool attr_true(const kiln_attrs *a, const char *key)
{
    bool v = false;
    return kiln_attrs_get_bool(a, key, &v) && v;
}

static bool eligible(kiln_graph *g, kiln_node_id n)
{
    const uint32_t never = KILN_OP_STATEFUL | KILN_OP_REFERENCE | KILN_OP_CONTROL_FLOW |
                           KILN_OP_DATA_LIKE | KILN_OP_CONSTANT | KILN_OP_GRAPH_OUTPUT;
    if (!kiln_node_op_def(g, n) || (kiln_node_op_flags(g, n) & never) ||
        kiln_node_subgraph_count(g, n))
        return false;
    const kiln_attrs *a = kiln_node_attrs(g, n);
    if (kiln_attrs_has(a, "no_need_constant_folding") || attr_true(a, "_cannot_be_deleted"))
        return false;
    bool any = false;
    for (uint32_t i = 0; i < kiln_node_input_count(g, n); i++)
        any |= kiln_node_input_peer(g, n, i).node != 0;
    if (!any)
        return false;
    for (uint32_t o = 0; o < kiln_node_output_count(g, n); o++)
        if (kiln_desc_ref_input(kiln_node_output_desc(g, n, o)) >= 0)
            return false;
    return true;
}

static int cmp_id(const void *a, const void *b)
{
    kiln_node_id x = *(const kiln_node_id *)a, y = *(const kiln_node_id *)b;
    return x < y ? -1 : x > y;
}

/* Control inputs of @p n, sorted, into @p buf (grown as needed). */
static uint32_t ctrl_ins(kiln_graph *g, kiln_node_id n, kiln_node_id **buf, uint32_t *cap)
{
    uint32_t k = 0;
    for (uint32_t c = kiln_ctrl_in_first(g, n); c; c = kiln_ctrl_in_next(g, c)) {
        if (k == *cap) {
            uint32_t nc = *cap ? *cap * 2 : 8;
            kiln_node_id *nb = realloc(*buf, nc * sizeof(*nb));
            if (!nb)
                return UINT32_MAX;
            *buf = nb;
            *cap = nc;
        }
        (*buf)[k++] = kiln_ctrl_src(g, c);
    }
    if (k > 1)
        qsort(*buf, k, sizeof(**buf), cmp_id);
    return k;
}

static uint64_t node_hash(kiln_graph *g, kiln_node_id n, const kiln_node_id *ci, uint32_t nci)
{
    uint64_t h = 1469598103934665603ull;
    kiln_sym op = kiln_node_op(g, n);
    uint32_t nin = kiln_node_input_count(g, n), nout = kiln_node_output_count(g, n);
    h = ak_bytes(h, &op, sizeof(op));
    h = ak_bytes(h, &nin, sizeof(nin));
    h = ak_bytes(h, &nout, sizeof(nout));
    for (uint32_t i = 0; i < nin; i++) {
        kiln_anchor a = kiln_node_input_peer(g, n, i);
        h = ak_bytes(h, &a, sizeof(a));
    }
    h = ak_bytes(h, &nci, sizeof(nci));
    if (nci)
        h = ak_bytes(h, ci, nci * sizeof(*ci));
    for (uint32_t o = 0; o < nout; o++)
        h = ak_desc_hash(h, kiln_node_output_desc(g, n, o));
    return ak_attrs_hash(h, kiln_node_attrs(g, n));
}

static bool same_ctrl_ins(kiln_graph *g, kiln_node_id a, kiln_node_id b)
{
    if (kiln_node_ctrl_in_count(g, a) != kiln_node_ctrl_in_count(g, b))
        return false;
    for (uint32_t c = kiln_ctrl_in_first(g, a); c; c = kiln_ctrl_in_next(g, c))
        if (!kiln_ctrl_exists(g, kiln_ctrl_src(g, c), b))
            return false;
    return true;
}

static bool same_expr(kiln_graph *g, kiln_node_id a, kiln_node_id b)
{
    uint32_t nin = kiln_node_input_count(g, a), nout = kiln_node_output_count(g, a);
    if (kiln_node_op(g, a) != kiln_node_op(g, b) || nin != kiln_node_input_count(g, b) ||
        nout != kiln_node_output_count(g, b))
        return false;
    for (uint32_t i = 0; i < nin; i++) {
        kiln_anchor x = kiln_node_input_peer(g, a, i), y = kiln_node_input_peer(g, b, i);
        if (x.node != y.node || x.index != y.index)
            return false;
    }
    for (uint32_t o = 0; o < nout; o++)
        if (!ak_desc_equal(kiln_node_output_desc(g, a, o), kiln_node_output_desc(g, b, o)))
            return false;
    return same_ctrl_ins(g, a, b) && ak_attrs_equal(kiln_node_attrs(g, a), kiln_node_attrs(g, b));
}

/* feeds_netoutput of a kept node, cached in @p mark (0 unknown, 1 no, 2 yes):
 * a kept node gathers the consumers of every node merged into it, so
 * walking its uses at every probe would make the pass quadratic. */
static bool feeds_netoutput(kiln_graph *g, kiln_node_id n);
static bool feeds_out(kiln_graph *g, uint8_t *mark, kiln_node_id n)
{
    if (!mark[n])
        mark[n] = feeds_netoutput(g, n) ? 2 : 1;
    return mark[n] == 2;
}

static bool feeds_netoutput(kiln_graph *g, kiln_node_id n)
{
    for (uint32_t o = 0; o < kiln_node_output_count(g, n); o++)
        for (uint32_t u = kiln_use_first(g, n, o); u; u = kiln_use_next(g, u))
            if (kiln_node_op_flags(g, kiln_use_dst(g, u).node) & KILN_OP_GRAPH_OUTPUT)
                return true;
    return false;
}

/* @p dup's consumers and control successors move to @p keep; @p dup goes. */
static kiln_status merge_into(kiln_pass_ctx *ctx, kiln_graph *g, kiln_node_id keep,
                              kiln_node_id dup)
{
    kiln_status st = KILN_OK;
    for (uint32_t o = 0; o < kiln_node_output_count(g, dup) && st == KILN_OK; o++) {
        uint32_t u = kiln_use_first(g, dup, o);
        while (u && st == KILN_OK) {
            uint32_t next = kiln_use_next(g, u);
            kiln_anchor d = kiln_use_dst(g, u);
            kiln_edge_remove(g, d.node, d.index);
            st = kiln_edge_add(g, keep, o, d.node, d.index);
            u = next;
        }
    }
    for (uint32_t c = kiln_ctrl_out_first(g, dup); c && st == KILN_OK; c = kiln_ctrl_out_next(g, c))
        st = kiln_ctrl_add(g, keep, kiln_ctrl_dst(g, c));
    if (st != KILN_OK)
        return st;
    kiln_pass_explain(ctx, g, dup, "removed: same expression as %s", kiln_node_name_str(g, keep));
    return kiln_graph_remove_node(g, dup);
}

/* The lookahead: node order[k]'s eligibility and hash, computed AHEAD nodes early
 * (and again when a merge rewired the node's inputs or control inputs since). */
typedef struct ahead {
    uint64_t h;
    bool ok;
} ahead;

/* Look node @p id up (its hash in @p a, taken earlier) and merge it into an
 * earlier node of the same expression, or enter it in the table. */
static kiln_status lookup(kiln_pass_ctx *ctx, kiln_graph *g, cse_tab *t, kiln_node_id id,
                          ahead *a, uint8_t *out_mark, uint8_t *dirty, kiln_node_id **ci,
                          uint32_t *cicap, int64_t *merged)
{
    kiln_error *err = kiln_pass_error(ctx);
    if (!a->ok || !kiln_node_is_live(g, id))
        return KILN_OK;
    if (dirty[id]) {
        uint32_t nci = ctrl_ins(g, id, ci, cicap);
        if (nci == UINT32_MAX)
            return kiln_errorf(err, KILN_ERR_NOMEM,
                               "CommonSubexpressionEliminationPass: out of memory");
        a->h = node_hash(g, id, *ci, nci);
    }
    uint32_t mask = t->cap - 1, s = (uint32_t)a->h & mask, hi = (uint32_t)(a->h >> 32);
    kiln_node_id keep = 0;
    for (; t->e[s].id; s = (s + 1) & mask)
        if (t->e[s].h == hi && kiln_node_is_live(g, t->e[s].id) && same_expr(g, t->e[s].id, id) &&
            !(feeds_netoutput(g, id) && feeds_out(g, out_mark, t->e[s].id))) {
            keep = t->e[s].id;
            break;
        }
    if (!keep) {
        /* s is the first empty slot after the probe chain */
        while (t->e[s].id)
            s = (s + 1) & mask;
        t->e[s] = (cse_ent){id, hi};
        return KILN_OK;
    }
    if (out_mark[keep] && feeds_netoutput(g, id))
        out_mark[keep] = 2;
    /* what the merge rewires: the consumers and control successors of id */
    for (uint32_t o = 0; o < kiln_node_output_count(g, id); o++)
        for (uint32_t u = kiln_use_first(g, id, o); u; u = kiln_use_next(g, u))
            dirty[kiln_use_dst(g, u).node] = 1;
    for (uint32_t c = kiln_ctrl_out_first(g, id); c; c = kiln_ctrl_out_next(g, c))
        dirty[kiln_ctrl_dst(g, c)] = 1;
    kiln_status st = merge_into(ctx, g, keep, id);
    if (st != KILN_OK)
        return kiln_errorf(err, st, "CommonSubexpressionEliminationPass: merging %s into %s failed",
                           kiln_node_name_str(g, id), kiln_node_name_str(g, keep));
    (*merged)++;
    return KILN_OK;
}

static kiln_pass_result cse_run(void *inst, kiln_pass_ctx *ctx, kiln_graph *g)
{
    (void)inst;
    kiln_error *err = kiln_pass_error(ctx);
    const kiln_node_id *o;
    uint32_t n;
    if (kiln_graph_topo_order(g, &o, &n, err) != KILN_OK)
        return KILN_PASS_FAILED;
    kiln_node_id *order = malloc((n + 1) * sizeof(*order));
    cse_tab t = {NULL, 16};
    while (t.cap < 2 * n + 2)
        t.cap *= 2;
    /* kiln_alloc: large blocks get huge pages, and a probe no TLB miss */
    t.e = kiln_alloc((size_t)t.cap * sizeof(*t.e));
    if (t.e)
        memset(t.e, 0, (size_t)t.cap * sizeof(*t.e));
    kiln_node_id *ci = NULL;
    uint32_t cicap = 0;
    uint32_t limit = kiln_graph_id_limit(g);
    uint8_t *out_mark = calloc(limit + 1, 1);
    uint8_t *dirty = calloc(limit + 1, 1); /* inputs rewired after its hash was taken */
    ahead ring[AHEAD];
    kiln_pass_result res = KILN_PASS_NOT_CHANGED;
    if (!order || !t.e || !out_mark || !dirty) {
        kiln_errorf(err, KILN_ERR_NOMEM, "CommonSubexpressionEliminationPass: out of memory");
        res = KILN_PASS_FAILED;
        goto out;
    }
    memcpy(order, o, n * sizeof(*order));
    int64_t merged = 0;
    for (uint32_t k = 0; k < n + AHEAD; k++) {
        /* node k - AHEAD: its lookup, then node k's hash into the slot it frees */
        if (k >= AHEAD) {
            kiln_status st = lookup(ctx, g, &t, order[k - AHEAD], &ring[k % AHEAD], out_mark,
                                    dirty, &ci, &cicap, &merged);
            if (st != KILN_OK) {
                res = KILN_PASS_FAILED;
                goto out;
            }
        }
        if (k < n) {
            kiln_node_id id = order[k];
            ahead *a = &ring[k % AHEAD];
            a->ok = kiln_node_is_live(g, id) && eligible(g, id);
            if (a->ok) {
                uint32_t nci = ctrl_ins(g, id, &ci, &cicap);
                if (nci == UINT32_MAX) {
                    kiln_errorf(err, KILN_ERR_NOMEM,
                                "CommonSubexpressionEliminationPass: out of memory");
                    res = KILN_PASS_FAILED;
                    goto out;
                }
                a->h = node_hash(g, id, ci, nci);
                __builtin_prefetch(&t.e[(uint32_t)a->h & (t.cap - 1)]);
            }
        }
    }
    if (merged)
        res = KILN_PASS_CHANGED;
    kiln_pass_stat_add(ctx, "nodes_merged", merged);
out:
    free(ci);
    free(out_mark);
    free(dirty);
    free(order);
    kiln_free(t.e);
    return res;
}

const kiln_pass_desc kiln_cse_pass = {
    .struct_size = sizeof(kiln_pass_desc),
    .kind = KILN_PASS_KIND_GRAPH,
    .name = "CommonSubexpressionEliminationPass",
    .summary = "merge nodes computing the same expression (same op, inputs, attributes)",
    .run_graph = cse_run,
};

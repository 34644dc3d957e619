/*
 * verify.c - the IR verifier (libFirm irverify analogue).
 *
 * Rules checked per graph, each reported as
 *   graph "<g>": node "<n>" (id N): <rule>: <detail>
 * and named in brackets below as they appear in messages:
 *   [layout]          counts and slices inside the dense arrays, live count
 *   [input record]    in[in_off+i] belongs to (n, i)
 *   [dead reference]  a connected input's producer, a control edge's peer, a
 *                     name-index entry, a subgraph parent node is live
 *   [edge symmetry]   every connected input appears exactly once in its
 *                     producer output's consumer list and every list entry
 *                     points back at that output; prev/next links agree
 *   [control symmetry] a control record is in its src's out-list iff it is in
 *                     its dst's in-list; no duplicate edge, no self loop
 *   [names]           names are non-empty and unique; the name index maps each
 *                     live node's name to it and holds nothing else
 *   [cycle]           data + control edges form a DAG (Kahn); the reported
 *                     node lies on a cycle
 *   [subgraph]        parent graph/node links, depth = parent depth + 1,
 *                     the parent node lists the subgraph exactly once
 *   [Data], [NetOutput] subgraph Data `_parent_node_index` in range of the
 *                     parent node's inputs; exactly one NetOutput per subgraph
 *                     (at most one in a root); NetOutput outputs unconsumed;
 *                     NetOutput input i's `_parent_node_index` (default i) in
 *                     range of the parent's outputs (not for a While `cond`)
 *   [ref_input]       an output's `ref_input` names one of the node's inputs
 *   [attribute type]  the attributes whose type the graph format or GE fixes
 *                     (typed_attrs[] below: `index`, `_parent_node_index`, the
 *                     memory-conflict flags, ...) have that type, on nodes, on
 *                     tensor descriptors and on the graph
 *   [memory plan]     (--verify-each only, kiln__graph_verify_plan) a root
 *                     with a memory plan passes kiln_memory_plan_verify:
 *                     anchors of one symbol at one offset, continuous groups
 *                     adjacent, no two live buffers overlapping, in-place
 *                     writes after the readers of what they overwrite
 * The checks read graph_int.h directly and bounds-check every index before
 * dereferencing, so corrupted IR yields a message rather than a crash.
 *
 * Order: the graph's own subgraph links first (the Data/NetOutput rules read
 * the parent node), then three fused sweeps over the nodes -- layout, owner
 * flag, names and Data/NetOutput rules; consumer lists and control out-lists;
 * input records, control in-lists and in-degrees -- then the name index, the
 * owner map and Kahn's DAG check.  A million-node graph does not fit in the cache,
 * so each sweep costs a pass over memory: the checks share them.
 *
 * Complexity: O(nodes + edges + control edges) per graph, O(subgraphs) for
 * the subgraph registry cross-checks; scratch arrays of id_limit / in_len /
 * ctrl_len entries.  No recursion.
 */
#include "verify.h"
#include "analysis.h"
#include "graph_int.h"
#include "graph_json.h"
#include "memgraph.h"

#include <stdarg.h>

/* Where a typed attribute lives. */
enum { TA_NODE = 1, TA_IN = 2, TA_OUT = 4, TA_DESC = TA_IN | TA_OUT, TA_GRAPH = 8 };

/*
 * Attributes whose type the graph format or GE fixes, and that kiln's passes,
 * engines and runtime read.  A value of another type would be read as absent
 * (a `Data` with `"index": "zero"` ran as input 0), so it is an error.  `ops`
 * restricts the rule to nodes of those types (NULL: every node).
 */
typedef struct typed_attr {
    const char *name;
    kiln_attr_type type;
    uint8_t where;
    const char *const *ops;
} typed_attr;

static const char *const data_ops[] = {"Data", "RefData", "AippData", NULL};

static const typed_attr typed_attrs[] = {
    {"index", KILN_ATTR_INT, TA_NODE, data_ops},
    {"_parent_node_index", KILN_ATTR_INT, TA_NODE | TA_IN, NULL},
    {"_input_mutable", KILN_ATTR_BOOL, TA_NODE, NULL},
    {"_skip_rw_conflict", KILN_ATTR_BOOL, TA_NODE, NULL},
    {"continuous_input", KILN_ATTR_BOOL, TA_NODE, NULL},
    {"continuous_output", KILN_ATTR_BOOL, TA_NODE, NULL},
    {"_no_padding_continuous_input", KILN_ATTR_BOOL, TA_NODE, NULL},
    {"_no_padding_continuous_output", KILN_ATTR_BOOL, TA_NODE, NULL},
    {"reference", KILN_ATTR_BOOL, TA_NODE, NULL},
    {"_cannot_be_deleted", KILN_ATTR_BOOL, TA_NODE, NULL},
    {"_no_task", KILN_ATTR_BOOL, TA_NODE, NULL},
    {"_unsupported_address_refresh", KILN_ATTR_BOOL, TA_NODE, NULL},
    {"is_atomic_node", KILN_ATTR_BOOL, TA_NODE, NULL},
    {"need_gentask_atomic", KILN_ATTR_BOOL, TA_NODE, NULL},
    {"_rts_label_node", KILN_ATTR_BOOL, TA_NODE, NULL},
    {"_kiln_stream_id", KILN_ATTR_INT, TA_NODE, NULL},
    {"_input_memory_type", KILN_ATTR_LIST_INT, TA_NODE, NULL},
    {"_output_memory_type", KILN_ATTR_LIST_INT, TA_NODE, NULL},
    {"atomic_output_index", KILN_ATTR_LIST_INT, TA_NODE, NULL},
    {"_batch_label", KILN_ATTR_STRING, TA_NODE, NULL},
    {"_stream_label", KILN_ATTR_STRING, TA_NODE, NULL},
    {"reuse_input", KILN_ATTR_BOOL, TA_OUT, NULL},
    {"reuse_input_index", KILN_ATTR_INT, TA_OUT, NULL},
    {"_inplace_support_input_index", KILN_ATTR_INT, TA_OUT, NULL},
    {"ref_var_src_var_name", KILN_ATTR_STRING, TA_DESC, NULL},
    {"_dynamic_shape_partitioned", KILN_ATTR_BOOL, TA_GRAPH, NULL},
    {"_single_op_scene", KILN_ATTR_BOOL, TA_GRAPH, NULL},
    {"_ffts_plus_sub_graph", KILN_ATTR_BOOL, TA_GRAPH, NULL},
};
#define N_TYPED (sizeof(typed_attrs) / sizeof(typed_attrs[0]))

/* A typed_attrs[] entry whose key is interned in the graph being verified
 * (an attribute never interned cannot be set on any of its nodes). */
typedef struct active_attr {
    kiln_sym key;
    const typed_attr *t;
    kiln_sym ops[4]; /* node types the rule is for; ops[0] == 0 with t->ops: none interned */
} active_attr;

typedef struct vstate {
    const kiln_graph *g;
    kiln_error *err;
    uint32_t *mark;    /* node_limit entries: control duplicate check */
    uint32_t *deg;     /* node_limit entries: remaining in-degree (Kahn) */
    uint32_t *queue;   /* node_limit entries: Kahn queue, seeded by sweep_inputs */
    uint32_t qt;       /* queue length */
    uint8_t *seen_in;  /* in_len entries: record met in a consumer list */
    uint8_t *seen_ctl; /* ctrl_len entries: bit 0 in an out-list, bit 1 in an in-list */
    uint32_t ctl_out, ctl_in; /* control records met in out-lists / in-lists */
    uint64_t name_sum;        /* sum of pair_hash(id, name) over live nodes (sweep 1) */
    /* [Data]/[NetOutput] context: the parent node of a subgraph */
    const kiln_graph *p;
    kiln_node_id pn;
    uint32_t p_nin, p_nout;
    bool while_cond;
    kiln_sym data_sym, netout_sym;
    kiln_node_id netout;
    /* [attribute type]: the typed attributes present in this graph's strings */
    active_attr act[N_TYPED];
    uint32_t nact;
    uint8_t act_where; /* union of act[].t->where */
} vstate;

static const char *gname(const kiln_graph *g)
{
    return kiln_sym_str(g, g->name);
}

static const char *nname(const kiln_graph *g, kiln_node_id n)
{
    return n && n < g->node_limit ? kiln_sym_str(g, g->cold[n].name) : "?";
}

static kiln_status vfail(vstate *s, kiln_node_id n, const char *rule, const char *fmt, ...)
    KILN_PRINTF(4, 5);

static kiln_status vfail(vstate *s, kiln_node_id n, const char *rule, const char *fmt, ...)
{
    char detail[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof(detail), fmt, ap);
    va_end(ap);
    if (n)
        return kiln_errorf(s->err, KILN_ERR_VERIFY, "graph \"%s\": node \"%s\" (id %u): %s: %s",
                           gname(s->g), nname(s->g, n), n, rule, detail);
    return kiln_errorf(s->err, KILN_ERR_VERIFY, "graph \"%s\": %s: %s", gname(s->g), rule,
                       detail);
}

/* ---- typed attributes ----------------------------------------------------- */

static void setup_typed(vstate *s)
{
    const kiln_graph *g = s->g;
    s->nact = 0;
    s->act_where = 0;
    for (uint32_t i = 0; i < N_TYPED; i++) {
        const typed_attr *t = &typed_attrs[i];
        kiln_sym key = kiln_sym_lookup(g, t->name);
        if (!key)
            continue;
        active_attr *a = &s->act[s->nact];
        memset(a, 0, sizeof(*a));
        a->key = key;
        a->t = t;
        uint32_t no = 0;
        for (uint32_t j = 0; t->ops && t->ops[j] && no < 4; j++) {
            kiln_sym o = kiln_sym_lookup(g, t->ops[j]);
            if (o)
                a->ops[no++] = o;
        }
        if (t->ops && !no)
            continue; /* none of its node types occurs in this graph */
        s->nact++;
        s->act_where |= t->where;
    }
}

/* The rule for @p key in scope @p where, for a node of type @p op, or NULL. */
static const typed_attr *typed_rule(const vstate *s, kiln_sym key, uint8_t where, kiln_sym op)
{
    for (uint32_t i = 0; i < s->nact; i++) {
        const active_attr *a = &s->act[i];
        if (a->key != key || !(a->t->where & where))
            continue;
        if (!a->t->ops)
            return a->t;
        for (uint32_t j = 0; j < 4 && a->ops[j]; j++)
            if (a->ops[j] == op)
                return a->t;
    }
    return NULL;
}

/* Every attribute of @p a with a fixed type has it.  @p what and @p idx name
 * the anchor in the message ("output", 1), NULL for the node or the graph. */
static kiln_status check_typed(vstate *s, kiln_node_id n, const kiln_attrs *a, uint8_t where,
                               kiln_sym op, const char *what, uint32_t idx)
{
    for (uint32_t i = 0; a && i < a->n; i++) {
        const kattr *e = &a->v[i];
        const typed_attr *t = typed_rule(s, e->key, where, op);
        if (!t || e->type == t->type)
            continue;
        char anchor[40] = "";
        if (what)
            snprintf(anchor, sizeof(anchor), "%s %u: ", what, idx);
        else if (where == TA_GRAPH)
            snprintf(anchor, sizeof(anchor), "graph ");
        return vfail(s, n, "attribute type", "%sattribute \"%s\" must be %s, found %s", anchor,
                     t->name, kiln__json_attr_type_name(t->type),
                     kiln__json_attr_type_name((kiln_attr_type)e->type));
    }
    return KILN_OK;
}

/* ref_input of every output, and the descriptors' typed attributes. */
static kiln_status check_descs(vstate *s, kiln_node_id n, const knode *k)
{
    const kiln_graph *g = s->g;
    kiln_status st;
    for (uint32_t o = 0; o < k->nout; o++) {
        const kiln_tensor_desc *d = g->out[k->out_off + o];
        if (d->ref_input >= 0 && (uint32_t)d->ref_input >= k->nin)
            return vfail(s, n, "ref_input",
                         "output %u: ref_input %d out of range: the node has %u input%s", o,
                         d->ref_input, k->nin, k->nin == 1 ? "" : "s");
        const kiln_attrs *a = d->ext ? d->ext->attrs : NULL;
        if (!a || !a->n)
            continue;
        if ((s->act_where & TA_OUT) &&
            (st = check_typed(s, n, a, TA_OUT, k->op, "output", o)) != KILN_OK)
            return st;
    }
    if (!(s->act_where & TA_IN) || !g->in_desc)
        return KILN_OK;
    for (uint32_t i = 0; i < k->nin; i++) {
        const kiln_tensor_desc *d = g->in_desc[k->in_off + i];
        const kiln_attrs *a = d && d->ext ? d->ext->attrs : NULL;
        if (!a || !a->n)
            continue;
        if ((st = check_typed(s, n, a, TA_IN, k->op, "input", i)) != KILN_OK)
            return st;
    }
    return KILN_OK;
}

/* ---- subgraph header: parent links (before any per-node sweep) ----------- */

/* Is @p sg one of the root's registered subgraphs?  O(1) through the name map. */
static bool registered(const kiln_graph *root, const kiln_graph *sg)
{
    if (sg == root)
        return true;
    return kiln_graph_find_subgraph(root, kiln_graph_name(sg)) == sg;
}

/* The graph's own links; also sets up the [Data]/[NetOutput] context, which
 * reads the parent node and so needs these links sound first. */
static kiln_status check_graph_links(vstate *s)
{
    const kiln_graph *g = s->g;
    const kiln_graph *root = g->root;
    if (g->node_limit > g->node_cap || g->in_len > g->in_cap || g->out_len > g->out_cap ||
        g->ctrl_len > (g->ctrl_cap ? g->ctrl_cap : 1))
        return vfail(s, 0, "layout", "array length exceeds capacity");
    if (!root || !registered(root, g))
        return vfail(s, 0, "subgraph", "graph is not registered with its root");
    if (g == root) {
        if (g->parent || g->parent_node || g->depth != 1)
            return vfail(s, 0, "subgraph", "root graph with a parent or depth %u", g->depth);
    } else {
        const kiln_graph *p = g->parent;
        if (!p || p->root != root || !registered(root, p))
            return vfail(s, 0, "subgraph", "parent graph is not part of the same root");
        if (!kiln__live(p, g->parent_node))
            return vfail(s, 0, "dead reference", "parent node id %u of graph \"%s\" is dead",
                         g->parent_node, gname(p));
        if (g->depth != p->depth + 1)
            return vfail(s, 0, "subgraph", "depth %u but parent depth %u", g->depth, p->depth);
        const kowner *c = kiln__owner(p, g->parent_node);
        uint32_t times = 0;
        for (uint32_t i = 0; c && i < c->nsub; i++)
            times += c->subs[i].graph == g;
        if (times != 1)
            return vfail(s, 0, "subgraph", "parent node \"%s\" of graph \"%s\" lists it %u times",
                         nname(p, g->parent_node), gname(p), times);
        s->p = p;
        s->pn = g->parent_node;
        s->p_nin = p->nodes[s->pn].nin;
        s->p_nout = p->nodes[s->pn].nout;
        for (uint32_t i = 0; i < c->nsub; i++)
            if (c->subs[i].graph == g)
                s->while_cond = strcmp(kiln_sym_str(p, c->subs[i].role), "cond") == 0 &&
                                strstr(kiln_sym_str(p, p->nodes[s->pn].op), "While") != NULL;
    }
    s->data_sym = kiln_sym_lookup(g, "Data");
    s->netout_sym = kiln_sym_lookup(g, "NetOutput");
    setup_typed(s);
    if (s->act_where & TA_GRAPH)
        return check_typed(s, 0, g->attrs, TA_GRAPH, 0, NULL, 0);
    return KILN_OK;
}

/* A 64-bit mix of (node id, name): summed over the index and over the nodes. */
static uint64_t pair_hash(uint32_t id, uint32_t name)
{
    uint64_t x = ((uint64_t)id << 32 | name) + 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* ---- sweep 1: per-node layout, owner flag, Data/NetOutput rules ---------- */

static kiln_status node_io_rules(vstate *s, kiln_node_id n, const knode *k)
{
    const kiln_graph *g = s->g;
    /* symbols, not strings: 0 when the op name was never interned, and then
     * no node can have it */
    if (s->p && s->data_sym && k->op == s->data_sym) {
        int64_t idx;
        if (!kiln_attrs_get_int(g->cold[n].attrs, "_parent_node_index", &idx))
            return vfail(s, n, "Data", "subgraph Data node without int _parent_node_index");
        if (idx < 0 || idx >= s->p_nin)
            return vfail(s, n, "Data",
                         "_parent_node_index %lld out of range: parent node \"%s\" has %u "
                         "inputs",
                         (long long)idx, nname(s->p, s->pn), s->p_nin);
    }
    if (!s->netout_sym || k->op != s->netout_sym)
        return KILN_OK;
    if (s->netout)
        return vfail(s, n, "NetOutput", "second NetOutput (first is \"%s\")",
                     nname(g, s->netout));
    s->netout = n;
    for (uint32_t o = 0; o < k->nout; o++)
        if (g->out_head[k->out_off + o])
            return vfail(s, n, "NetOutput", "output %u is consumed", o);
    if (!s->p || s->while_cond)
        return KILN_OK;
    for (uint32_t i = 0; i < k->nin; i++) {
        int64_t idx = i;
        const kiln_tensor_desc *d = g->in_desc ? g->in_desc[k->in_off + i] : NULL;
        const kiln_attrs *a = d && d->ext ? d->ext->attrs : NULL;
        if (kiln_attrs_has(a, "_parent_node_index") &&
            !kiln_attrs_get_int(a, "_parent_node_index", &idx))
            return vfail(s, n, "NetOutput", "input %u: _parent_node_index is not an int", i);
        if (idx < 0 || idx >= s->p_nout)
            return vfail(s, n, "NetOutput",
                         "input %u maps to parent output %lld, out of range: parent node "
                         "\"%s\" has %u outputs",
                         i, (long long)idx, nname(s->p, s->pn), s->p_nout);
    }
    return KILN_OK;
}

/*
 * Prefetch what sweep_nodes reads of the node @p ahead nodes on, one level
 * per distance: a million nodes' attribute sets and output descriptors
 * (each behind a pointer, the descriptors' attributes behind two) are a
 * million cache misses each, which the sweep otherwise waits for in turn.
 * Only reads the pointers of nodes whose slices are in range (a prefetch
 * itself never faults).
 */
enum { PF_AHEAD = 16, PF_OUTS = 4 };

static void prefetch_node(const vstate *s, kiln_node_id m, int level)
{
    const kiln_graph *g = s->g;
    if (m >= g->node_limit)
        return;
    const knode *k = &g->nodes[m];
    const kiln_attrs *a = g->cold[m].attrs;
    uint32_t nout = k->nout < PF_OUTS ? k->nout : PF_OUTS;
    if ((uint64_t)k->out_off + nout > g->out_len)
        nout = 0;
    if (level == 0) {
        if (a)
            __builtin_prefetch(a);
        for (uint32_t o = 0; o < nout; o++)
            __builtin_prefetch(g->out[k->out_off + o]);
        return;
    }
    if (level == 1 && a && (s->act_where & TA_NODE))
        __builtin_prefetch(a->v);
    for (uint32_t o = 0; (s->act_where & TA_OUT) && o < nout; o++) {
        const kiln_tensor_desc *d = g->out[k->out_off + o];
        const kdesc_ext *x = d ? d->ext : NULL;
        if (x && level == 1)
            __builtin_prefetch(x);
        else if (x && x->attrs && level == 2)
            __builtin_prefetch(x->attrs);
    }
}

static kiln_status sweep_nodes(vstate *s)
{
    const kiln_graph *g = s->g;
    uint32_t live = 0, owners = 0;
    kiln_status st;
    for (kiln_node_id n = 1; n < g->node_limit; n++) {
        prefetch_node(s, n + PF_AHEAD, 0);
        prefetch_node(s, n + PF_AHEAD / 2, 1);
        prefetch_node(s, n + PF_AHEAD / 4, 2);
        const knode *k = &g->nodes[n];
        if (k->flags & KILN_NODEF_DEAD)
            continue;
        live++;
        if (!k->op)
            return vfail(s, n, "layout", "live node without op type");
        if ((uint64_t)k->in_off + k->nin > g->in_len || (k->nin && k->in_off == 0))
            return vfail(s, n, "layout", "input slice [%u, +%u) outside the record array",
                         k->in_off, k->nin);
        if ((uint64_t)k->out_off + k->nout > g->out_len || (k->nout && k->out_off == 0))
            return vfail(s, n, "layout", "output slice [%u, +%u) outside the output array",
                         k->out_off, k->nout);
        for (uint32_t o = 0; o < k->nout; o++)
            if (!g->out[k->out_off + o])
                return vfail(s, n, "layout", "output %u has no descriptor", o);
        if (!g->cold[n].name)
            return vfail(s, n, "names", "node without a name");
        s->name_sum += pair_hash(n, g->cold[n].name);
        bool has_sub = (k->flags & KILN_NODEF_HAS_SUBGRAPH) != 0;
        const kowner *ow = kiln__owner_lookup(g, n); /* NULL at once with no owners */
        uint32_t nsub = ow ? ow->nsub : 0;
        owners += ow != NULL;
        if (has_sub != (nsub != 0))
            return vfail(s, n, "subgraph", "subgraph flag disagrees with %u listed subgraphs",
                         nsub);
        if ((st = node_io_rules(s, n, k)) != KILN_OK)
            return st;
        const kiln_attrs *na = g->cold[n].attrs;
        if (na && na->n && (s->act_where & TA_NODE) &&
            (st = check_typed(s, n, na, TA_NODE, k->op, NULL, 0)) != KILN_OK)
            return st;
        if ((st = check_descs(s, n, k)) != KILN_OK)
            return st;
    }
    if (live != g->live)
        return vfail(s, 0, "layout", "live count %u but %u live nodes", g->live, live);
    if (owners != g->owner_used)
        return vfail(s, 0, "subgraph", "%u live nodes own subgraphs but the owner map lists %u",
                     owners, g->owner_used);
    /* the subgraphs of an If/Case in GE's lowered form (BgConditionLowering,
     * docs/control_flow_lowering.md) end in an InnerNetOutput, the cond graph in none */
    bool lowered = false;
    if (s->p && !s->netout &&
        !(kiln_attrs_get_bool(kiln_node_attrs(s->p, s->pn), "_bg_lowered", &lowered) && lowered))
        return vfail(s, 0, "NetOutput", "subgraph has no NetOutput node");
    return KILN_OK;
}

/* ---- sweep 2: consumer lists and control out-lists ----------------------- */

static kiln_status node_consumers(vstate *s, kiln_node_id n, const knode *k)
{
    const kiln_graph *g = s->g;
    for (uint32_t o = 0; o < k->nout; o++) {
        uint32_t head = g->out_head[k->out_off + o];
        uint32_t prev = 0, tail = 0;
        for (uint32_t u = head; u; prev = u, u = g->in[u].next) {
            if (u >= g->in_len)
                return vfail(s, n, "edge symmetry",
                             "output %u: consumer record %u out of range", o, u);
            const kuse *r = &g->in[u];
            if (s->seen_in[u])
                return vfail(s, n, "edge symmetry",
                             "output %u: consumer record %u listed twice", o, u);
            s->seen_in[u] = 1;
            if (r->src != n || r->src_idx != o)
                return vfail(s, n, "edge symmetry",
                             "output %u lists input %u of \"%s\", which is fed by "
                             "\"%s\":%u",
                             o, r->dst < g->node_limit ? u - g->nodes[r->dst].in_off : 0,
                             nname(g, r->dst), nname(g, r->src), r->src_idx);
            if (!kiln__live(g, r->dst))
                return vfail(s, n, "dead reference",
                             "output %u is consumed by dead node id %u", o, r->dst);
            if (prev && r->prev != prev)
                return vfail(s, n, "edge symmetry",
                             "output %u: consumer list prev link broken at record %u", o, u);
            tail = u;
        }
        if (head && g->in[head].prev != tail)
            return vfail(s, n, "edge symmetry",
                         "output %u: consumer list head does not point to its tail", o);
    }
    return KILN_OK;
}

static kiln_status node_ctrl_out(vstate *s, kiln_node_id n, const knode *k)
{
    const kiln_graph *g = s->g;
    uint32_t prev = 0, tail = 0;
    for (uint32_t c = k->ctrl_out; c; prev = c, c = g->ctrl[c].out_next) {
        if (c >= g->ctrl_len || (s->seen_ctl[c] & 1))
            return vfail(s, n, "control symmetry", "control out-list broken at record %u", c);
        s->seen_ctl[c] |= 1;
        const kctrl *r = &g->ctrl[c];
        if (r->src != n)
            return vfail(s, n, "control symmetry",
                         "out-list holds record %u whose source is node id %u", c, r->src);
        if (!kiln__live(g, r->dst))
            return vfail(s, n, "dead reference", "control edge to dead node id %u", r->dst);
        if (r->dst == n)
            return vfail(s, n, "control symmetry", "control edge to itself");
        if (s->mark[r->dst] == n)
            return vfail(s, n, "control symmetry", "duplicate control edge to \"%s\"",
                         nname(g, r->dst));
        s->mark[r->dst] = n;
        if (prev && r->out_prev != prev)
            return vfail(s, n, "control symmetry", "out-list prev link broken at %u", c);
        tail = c;
        s->ctl_out++;
    }
    if (tail && g->ctrl[k->ctrl_out].out_prev != tail)
        return vfail(s, n, "control symmetry", "out-list head does not point to its tail");
    return KILN_OK;
}

static kiln_status sweep_outputs(vstate *s)
{
    const kiln_graph *g = s->g;
    kiln_status st;
    for (kiln_node_id n = 1; n < g->node_limit; n++) {
        const knode *k = &g->nodes[n];
        if (k->flags & KILN_NODEF_DEAD)
            continue;
        if ((st = node_consumers(s, n, k)) != KILN_OK || (st = node_ctrl_out(s, n, k)) != KILN_OK)
            return st;
    }
    return KILN_OK;
}

/* ---- sweep 3: input records, control in-lists, in-degrees ---------------- */

/* Sets deg[n] to the number of connected inputs. */
static kiln_status node_inputs(vstate *s, kiln_node_id n, const knode *k)
{
    const kiln_graph *g = s->g;
    uint32_t deg = 0;
    for (uint32_t i = 0; i < k->nin; i++) {
        uint32_t idx = k->in_off + i;
        const kuse *r = &g->in[idx];
        if (r->dst != n)
            return vfail(s, n, "input record", "input %u's record says it belongs to node id %u",
                         i, r->dst);
        if (!r->src) {
            if (s->seen_in[idx])
                return vfail(s, n, "edge symmetry",
                             "unconnected input %u appears in a consumer list", i);
            continue;
        }
        if (!kiln__live(g, r->src))
            return vfail(s, n, "dead reference", "input %u is fed by dead node id %u", i,
                         r->src);
        if (r->src_idx >= g->nodes[r->src].nout)
            return vfail(s, n, "edge symmetry",
                         "input %u is fed by output %u of \"%s\", which has %u outputs", i,
                         r->src_idx, nname(g, r->src), g->nodes[r->src].nout);
        if (!s->seen_in[idx])
            return vfail(s, n, "edge symmetry",
                         "input %u (from \"%s\":%u) is missing from the producer's "
                         "consumer list",
                         i, nname(g, r->src), r->src_idx);
        deg++;
    }
    s->deg[n] = deg;
    return KILN_OK;
}

/* Adds the control in-degree to deg[n]. */
static kiln_status node_ctrl_in(vstate *s, kiln_node_id n, const knode *k)
{
    const kiln_graph *g = s->g;
    uint32_t prev = 0, tail = 0;
    for (uint32_t c = k->ctrl_in; c; prev = c, c = g->ctrl[c].in_next) {
        if (c >= g->ctrl_len || (s->seen_ctl[c] & 2))
            return vfail(s, n, "control symmetry", "control in-list broken at record %u", c);
        s->seen_ctl[c] |= 2;
        const kctrl *r = &g->ctrl[c];
        if (r->dst != n)
            return vfail(s, n, "control symmetry",
                         "in-list holds record %u whose destination is node id %u", c, r->dst);
        if (!kiln__live(g, r->src))
            return vfail(s, n, "dead reference", "control edge from dead node id %u", r->src);
        if (!(s->seen_ctl[c] & 1))
            return vfail(s, n, "control symmetry",
                         "control input from \"%s\" is missing from its out-list",
                         nname(g, r->src));
        if (prev && r->in_prev != prev)
            return vfail(s, n, "control symmetry", "in-list prev link broken at %u", c);
        tail = c;
        s->ctl_in++;
        s->deg[n]++;
    }
    if (tail && g->ctrl[k->ctrl_in].in_prev != tail)
        return vfail(s, n, "control symmetry", "in-list head does not point to its tail");
    return KILN_OK;
}

/* Also seeds the Kahn queue with the sources, in id order. */
static kiln_status sweep_inputs(vstate *s)
{
    const kiln_graph *g = s->g;
    kiln_status st;
    for (kiln_node_id n = 1; n < g->node_limit; n++) {
        const knode *k = &g->nodes[n];
        s->deg[n] = 0;
        if (k->flags & KILN_NODEF_DEAD)
            continue;
        if ((st = node_inputs(s, n, k)) != KILN_OK || (st = node_ctrl_in(s, n, k)) != KILN_OK)
            return st;
        if (!s->deg[n])
            s->queue[s->qt++] = n;
    }
    if (s->ctl_in != s->ctl_out) {
        /* Some out-list record is in no in-list: name its source. */
        for (uint32_t c = 1; c < g->ctrl_len; c++)
            if (s->seen_ctl[c] == 1)
                return vfail(s, g->ctrl[c].src, "control symmetry",
                             "control edge to \"%s\" is missing from its in-list",
                             nname(g, g->ctrl[c].dst));
    }
    return KILN_OK;
}

/* ---- names -------------------------------------------------------------- */

/* Precise diagnosis once the fast check found a mismatch: a lookup per node. */
static kiln_status names_diagnose(vstate *s)
{
    const kiln_graph *g = s->g;
    for (uint32_t j = 0; j < g->name_cap; j++) {
        const kname_slot *e = &g->name_slots[j];
        if (e->id == 0 || e->id == KILN_NAME_TOMB)
            continue;
        if (!kiln__live(g, e->id))
            return vfail(s, 0, "dead reference", "name index holds dead node id %u", e->id);
        if (e->name != g->cold[e->id].name)
            return vfail(s, e->id, "names",
                         "name index entry is stale (renamed behind the index, or a duplicate "
                         "name)");
    }
    for (kiln_node_id n = 1; n < g->node_limit; n++) {
        if (g->nodes[n].flags & KILN_NODEF_DEAD)
            continue;
        kiln_node_id found = kiln__name_lookup(g, g->cold[n].name);
        if (found != n)
            return vfail(s, n, "names", "name lookup yields node id %u (duplicate name?)", found);
    }
    return vfail(s, 0, "names", "name index does not match the nodes");
}

/*
 * The name index must hold every live node exactly once under its current
 * name, findable by lookup, with no name twice.  A lookup per node costs a
 * cache miss each at a million nodes, so the check is two sequential scans:
 * over the slots, linear probing's invariant is checked locally (an entry is
 * found iff no empty slot lies between its home and it; an equal name earlier
 * in that stretch would shadow it) and sum(pair_hash(id, name)) is taken;
 * over the nodes (in sweep_nodes), the same sum of (id, current name).
 * Equal counts and sums mean the index holds exactly the live nodes under
 * their names (a false match needs a 64-bit collision); on a mismatch
 * names_diagnose finds the culprit.
 */
static kiln_status check_names(vstate *s)
{
    const kiln_graph *g = s->g;
    uint32_t cap = g->name_cap, mask = cap - 1, indexed = 0;
    uint64_t sum_index = 0;
    uint32_t start = 0;
    if (cap) {
        while (start < cap && g->name_slots[start].id != 0)
            start++;
        if (start == cap)
            return vfail(s, 0, "names", "name index has no empty slot");
        start = (start + 1) & mask;
    }
    uint32_t run_start = start;
    for (uint32_t k = 0; k < cap; k++) {
        uint32_t j = (start + k) & mask;
        const kname_slot *e = &g->name_slots[j];
        if (e->id == 0) {
            run_start = (j + 1) & mask;
            continue;
        }
        if (e->id == KILN_NAME_TOMB)
            continue;
        if (e->id >= g->node_limit)
            return vfail(s, 0, "dead reference", "name index holds unknown node id %u", e->id);
        uint32_t home = kiln__name_hash(e->name) & mask;
        if (((j - home) & mask) > ((j - run_start) & mask))
            return vfail(s, e->id, "names", "name index entry cannot be found by lookup");
        for (uint32_t t = home; t != j; t = (t + 1) & mask)
            if (g->name_slots[t].id != KILN_NAME_TOMB && g->name_slots[t].name == e->name)
                return vfail(s, e->id, "names", "duplicate name: node \"%s\" (id %u) has it too",
                             nname(g, g->name_slots[t].id), g->name_slots[t].id);
        sum_index += pair_hash(e->id, e->name);
        indexed++;
    }
    /* sweep_nodes counted the live nodes (== g->live) and summed their names */
    if (indexed != g->live)
        return vfail(s, 0, "names", "name index holds %u nodes, graph has %u", indexed, g->live);
    return sum_index == s->name_sum ? KILN_OK : names_diagnose(s);
}

/* ---- cycles ------------------------------------------------------------- */

/* Kahn's algorithm over data + control edges.  On failure every node left
 * with a positive in-degree has a predecessor that is also left, so walking
 * predecessors from any of them must revisit a node: that node is on a cycle. */
static kiln_status check_acyclic(vstate *s)
{
    const kiln_graph *g = s->g;
    /* deg[] and the sources in q[] come from sweep_inputs */
    uint32_t *deg = s->deg, *q = s->queue;
    if (kiln__kahn(g, deg, q, s->qt, NULL) == g->live)
        return KILN_OK;

    kiln_node_id start = 0;
    for (kiln_node_id n = 1; n < g->node_limit && !start; n++)
        if (!(g->nodes[n].flags & KILN_NODEF_DEAD) && deg[n])
            start = n;
    /* q is free now: reuse it as a "visited during the walk" stamp array. */
    memset(q, 0, (size_t)g->node_limit * sizeof(*q));
    kiln_node_id n = start;
    while (!q[n]) {
        q[n] = 1;
        kiln_node_id pred = 0;
        const knode *k = &g->nodes[n];
        for (uint32_t i = 0; i < k->nin && !pred; i++) {
            kiln_node_id p = g->in[k->in_off + i].src;
            if (p && deg[p])
                pred = p;
        }
        for (uint32_t c = g->nodes[n].ctrl_in; c && !pred; c = g->ctrl[c].in_next)
            if (deg[g->ctrl[c].src])
                pred = g->ctrl[c].src;
        if (!pred)
            break; /* cannot happen after the checks above; stay safe */
        n = pred;
    }
    /* n is on the cycle; list its members (walking back) for the message. */
    char path[200];
    size_t len = 0;
    kiln_node_id m = n;
    path[0] = 0;
    do {
        int k = snprintf(path + len, sizeof(path) - len, "%s\"%s\"", len ? " <- " : "",
                         nname(g, m));
        if (k < 0 || (size_t)k >= sizeof(path) - len) {
            len = sizeof(path) - 1;
            break;
        }
        len += (size_t)k;
        q[m] = 2;
        kiln_node_id pred = 0;
        const knode *km = &g->nodes[m];
        for (uint32_t i = 0; i < km->nin && !pred; i++) {
            kiln_node_id p = g->in[km->in_off + i].src;
            if (p && deg[p] && q[p])
                pred = p;
        }
        for (uint32_t c = g->nodes[m].ctrl_in; c && !pred; c = g->ctrl[c].in_next)
            if (deg[g->ctrl[c].src] && q[g->ctrl[c].src])
                pred = g->ctrl[c].src;
        m = pred;
    } while (m && q[m] != 2);
    /* Closed loop: repeat the first name; otherwise the path was truncated. */
    return vfail(s, n, "cycle", "node is on a cycle of data/control edges: %s <- %s%s%s", path,
                 m == n ? "\"" : "", m == n ? nname(g, n) : "...", m == n ? "\"" : "");
}

/* ---- subgraph owners -------------------------------------------------------- */

/* Every subgraph listed by an owner node links back to it (the owner map's
 * entries, not a sweep over all nodes: owners are few). */
static kiln_status check_owned_subgraphs(vstate *s)
{
    const kiln_graph *g = s->g;
    for (uint32_t j = 0; j < g->owner_cap; j++) {
        const kowner *c = &g->owners[j];
        kiln_node_id n = c->node;
        if (!n)
            continue;
        if (!kiln__live(g, n))
            return vfail(s, 0, "dead reference", "owner map holds dead node id %u", n);
        for (uint32_t i = 0; i < c->nsub; i++) {
            const kiln_graph *sg = c->subs[i].graph;
            if (!sg || sg->parent != g || sg->parent_node != n || !registered(g->root, sg))
                return vfail(s, n, "subgraph", "subgraph %u (\"%s\") does not link back", i,
                             sg ? gname(sg) : "?");
        }
    }
    return KILN_OK;
}

/* ---- driver ------------------------------------------------------------- */

static kiln_status verify_graph(const kiln_graph *g, kiln_error *err)
{
    vstate s = {.g = g, .err = err};
    kiln_status st;
    if (g->node_limit == 0 || g->node_limit > g->node_cap)
        return vfail(&s, 0, "layout", "array length exceeds capacity");
    if ((st = check_graph_links(&s)) != KILN_OK)
        return st;
    s.mark = kiln__calloc(g->node_limit, sizeof(uint32_t));
    s.deg = kiln__malloc((size_t)g->node_limit * sizeof(uint32_t));
    s.queue = kiln__malloc((size_t)g->node_limit * sizeof(uint32_t));
    s.seen_in = kiln__calloc(g->in_len, 1);
    s.seen_ctl = kiln__calloc(g->ctrl_len ? g->ctrl_len : 1, 1);
    if (!s.mark || !s.deg || !s.queue || !s.seen_in || !s.seen_ctl) {
        st = kiln_errorf(err, KILN_ERR_NOMEM, "out of memory verifying graph \"%s\"", gname(g));
        goto done;
    }
    /* Three fused sweeps over the nodes (a million-node graph is read from
     * memory once per sweep), then the name index, owners and the DAG check. */
    if ((st = sweep_nodes(&s)) != KILN_OK || (st = sweep_outputs(&s)) != KILN_OK ||
        (st = sweep_inputs(&s)) != KILN_OK || (st = check_names(&s)) != KILN_OK ||
        (st = check_owned_subgraphs(&s)) != KILN_OK || (st = check_acyclic(&s)) != KILN_OK)
        goto done;
done:
    kiln__free(s.mark);
    kiln__free(s.deg);
    kiln__free(s.queue);
    kiln__free(s.seen_in);
    kiln__free(s.seen_ctl);
    return st;
}

kiln_status kiln_graph_verify_one(const kiln_graph *g, kiln_error *err)
{
    if (!g)
        return kiln_errorf(err, KILN_ERR_PARAM, "kiln_graph_verify: NULL graph");
    return verify_graph(g, err);
}

/* True when @p g is @p anc or nested below it. */
static bool below(const kiln_graph *g, const kiln_graph *anc)
{
    for (uint32_t guard = 0; g && guard < 4096; g = g->parent, guard++)
        if (g == anc)
            return true;
    return false;
}

kiln_status kiln_graph_verify(const kiln_graph *g, kiln_error *err)
{
    kiln_status st = kiln_graph_verify_one(g, err);
    if (st != KILN_OK)
        return st;
    const kiln_graph *root = g->root;
    for (uint32_t i = 0; i < root->nsubgraphs; i++) {
        const kiln_graph *sg = root->subgraphs[i];
        if (sg == g || !below(sg, g))
            continue;
        if ((st = verify_graph(sg, err)) != KILN_OK)
            return st;
    }
    return KILN_OK;
}

kiln_status kiln__graph_verify_plan(kiln_graph *g, kiln_error *err)
{
    if (!g || g != g->root || !kiln__memgraph_planned(g))
        return KILN_OK;
    return kiln_memory_plan_verify(g, err);
}

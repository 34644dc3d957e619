/*
 * dynamic_shape_partition.c - DynamicShapePartitioner (GE
 * compiler/graph/partition/dynamic_shape_partition.cc; docs/dynamic_shape.md).
 *
 * The nodes of the root graph (or of each stage subgraph, when the
 * StagePartitioner made them) are split into known-shape and unknown-shape
 * clusters, and every KNOWN, UNKNOWN and INPUT_NODE cluster becomes a
 * PartitionedCall with a subgraph `<graph>_sub_<u>_know|_unknow|_input`.
 *
 * Clusters: one per node at first, numbered by the node's topological index
 * (kiln_graph_topo_order; with ge.topoSortingMode = 3 the stable depth-first
 * order of stable_order); merging is union-find, the surviving cluster keeps
 * its number.  A cluster records the smallest and largest topological index
 * of its nodes (min, max), its node list and its input/output cluster lists
 * (compacted and deduplicated lazily through the union-find).
 *
 * Ring (cycle) checks.  Merging input cluster B into A makes a ring exactly
 * when another cluster lies on a path B -> ... -> A.  Two O(1) certificates
 * decide most merges: B's only output cluster is A, or A's only input cluster
 * is B.  Otherwise a search from B's outputs visits only clusters whose min is
 * below A's max (a cluster starting at or after A's last node cannot reach
 * A), as GE's BaseCluster::TryMerge bounds it; MergeAllPathFrom bounds its
 * forward and backward searches the same way.  The "ds_ring_searches" and
 * "ds_ring_steps" statistics (--time-passes, reports) count the searches that
 * were needed and the clusters they visited; bench/dynamic_shape_scale
 * reports them with the time.
 */
#include "dynshape.h"

#include <errno.h>

typedef enum ctype { CT_DATA, CT_INPUT, CT_NETOUTPUT, CT_STAGE, CT_UNKNOWN, CT_KNOWN } ctype;

static const char *const ctype_name[] = {"DATA", "INPUT_NODE", "NETOUTPUT",
                                         "STAGE", "UNKNOWN", "KNOWN"};

typedef struct idvec {
    uint32_t *p;
    uint32_t n, cap;
} idvec;

typedef struct dsp {
    kiln_graph *g;
    kiln_pass_ctx *ctx;
    kiln_error *err;
    uint32_t nn;         /* nodes of the root */
    kiln_node_id *order; /* topo index -> node */
    uint32_t *tidx;      /* node id -> topo index */
    uint8_t *unknown;    /* per topo index */
    uint32_t *parent;    /* union-find over clusters (topo indices) */
    uint8_t *type;
    uint32_t *min, *max, *size;
    uint32_t *head, *tail, *next; /* node lists, by topo index */
    idvec *in, *out;
    uint32_t *stamp, *stamp2, gen, gen2; /* stamp: compact + backward; stamp2: searches */
    uint32_t *queue;
    idvec snap;
    int64_t limit;
    int64_t ring_searches, ring_steps, merges;
    const char *force_ops; /* pass option: comma-separated op types forced unknown */
    bool stable;           /* ge.topoSortingMode = 3: stable order, consistent-id merge */
    /* the attribute keys (and the engine value) node_unknown tests, as symbols
     * of the context (dsp_keys_init): a string never interned is on no node,
     * so its lookup is skipped */
    kiln_sym k_refresh, k_is_unknown, k_force, k_engine, v_host_cpu, k_no_tiling;
    kiln_sym op_data, op_netoutput;
    /* root nodes (id < outs_lim) whose output descriptors node_unknown found
     * all known: an input reading one of them (no descriptor of its own) is
     * known without reading it again; NULL outside that loop */
    uint8_t *outs_known;
    uint32_t outs_lim;
} dsp;

static void dsp_keys_init(dsp *d)
{
    const kiln_graph *g = d->g;
    d->k_refresh = kiln_sym_lookup(g, "_is_support_addr_refresh");
    d->k_is_unknown = kiln_sym_lookup(g, DS_ATTR_IS_UNKNOWN);
    d->k_force = kiln_sym_lookup(g, DS_ATTR_FORCE_UNKNOWN);
    d->k_engine = kiln_sym_lookup(g, "_kiln_engine");
    d->v_host_cpu = kiln_sym_lookup(g, "DNN_VM_HOST_CPU");
    d->k_no_tiling = kiln_sym_lookup(g, "_op_no_tiling");
    d->op_data = kiln_sym_lookup(g, "Data");
    d->op_netoutput = kiln_sym_lookup(g, "NetOutput");
}

static void *zalloc(size_t n)
{
    void *p = kiln_alloc(n ? n : 1);
    if (p)
        memset(p, 0, n ? n : 1);
    return p;
}

static bool vpush(idvec *v, uint32_t x)
{
    if (v->n == v->cap) {
        uint32_t nc = v->cap ? v->cap * 2 : 4;
        uint32_t *np = kiln_alloc(sizeof(uint32_t) * nc);
        if (!np)
            return false;
        if (v->n)
            memcpy(np, v->p, sizeof(uint32_t) * v->n);
        kiln_free(v->p);
        v->p = np;
        v->cap = nc;
    }
    v->p[v->n++] = x;
    return true;
}

static uint32_t find(dsp *d, uint32_t c)
{
    while (d->parent[c] != c) {
        d->parent[c] = d->parent[d->parent[c]];
        c = d->parent[c];
    }
    return c;
}

/* Resolve, deduplicate and drop self-references in @p v (owned by cluster c). */
static void compact(dsp *d, idvec *v, uint32_t c)
{
    uint32_t gen = ++d->gen, k = 0;
    for (uint32_t i = 0; i < v->n; i++) {
        uint32_t r = find(d, v->p[i]);
        if (r == c || d->stamp[r] == gen)
            continue;
        d->stamp[r] = gen;
        v->p[k++] = r;
    }
    v->n = k;
}

static bool append(idvec *dst, idvec *src)
{
    if (src->n > dst->n) { /* keep the bigger array, copy the smaller */
        idvec t = *dst;
        *dst = *src;
        *src = t;
    }
    for (uint32_t i = 0; i < src->n; i++)
        if (!vpush(dst, src->p[i]))
            return false;
    kiln_free(src->p);
    memset(src, 0, sizeof(*src));
    return true;
}

/* Merge cluster b into a (both roots). */
static bool merge(dsp *d, uint32_t a, uint32_t b)
{
    if (a == b)
        return true;
    d->parent[b] = a;
    if (d->min[b] < d->min[a])
        d->min[a] = d->min[b];
    if (d->max[b] > d->max[a])
        d->max[a] = d->max[b];
    d->size[a] += d->size[b];
    d->next[d->tail[a]] = d->head[b];
    d->tail[a] = d->tail[b];
    d->merges++;
    return append(&d->in[a], &d->in[b]) && append(&d->out[a], &d->out[b]);
}

/* A snapshot of cluster c's inputs (the merges below change the list). */
static bool snapshot_inputs(dsp *d, uint32_t c)
{
    compact(d, &d->in[c], c);
    d->snap.n = 0;
    for (uint32_t i = 0; i < d->in[c].n; i++)
        if (!vpush(&d->snap, d->in[c].p[i]))
            return false;
    return true;
}

/* GE BaseCluster::TryMerge: merge input cluster b into a unless that makes a ring. */
static bool try_merge(dsp *d, uint32_t a, uint32_t b, bool *merged)
{
    *merged = false;
    compact(d, &d->out[b], b);
    compact(d, &d->in[a], a);
    bool safe = (d->out[b].n == 1 && d->out[b].p[0] == a) ||
                (d->in[a].n == 1 && d->in[a].p[0] == b);
    if (!safe) {
        d->ring_searches++;
        uint32_t g2 = ++d->gen2, qh = 0, qt = 0;
        d->stamp2[b] = g2;
        for (uint32_t i = 0; i < d->out[b].n; i++) {
            uint32_t x = d->out[b].p[i];
            if (x != a && d->min[x] < d->max[a] && d->stamp2[x] != g2) {
                d->stamp2[x] = g2;
                d->queue[qt++] = x;
            }
        }
        while (qh < qt) {
            uint32_t c = d->queue[qh++];
            d->ring_steps++;
            compact(d, &d->out[c], c);
            for (uint32_t i = 0; i < d->out[c].n; i++) {
                uint32_t x = d->out[c].p[i];
                if (x == a)
                    return true; /* a second path b -> c -> a: not merged */
                if (d->min[x] < d->max[a] && d->stamp2[x] != g2) {
                    d->stamp2[x] = g2;
                    d->queue[qt++] = x;
                }
            }
        }
    }
    *merged = merge(d, a, b);
    return *merged;
}

/* GE Cluster::MergeAllPathFrom: merge into a every cluster on a path from b (an input of a). */
static bool merge_all_path_from(dsp *d, uint32_t a, uint32_t b)
{
    compact(d, &d->out[b], b);
    if (d->out[b].n == 1 && d->out[b].p[0] == a)
        return merge(d, a, b); /* b's only way out is a: the path is b alone */
    uint32_t fgen = ++d->gen2, qh = 0, qt = 0;
    /* forward from b: clusters that may lie before a */
    d->queue[qt++] = b;
    d->stamp2[b] = fgen;
    while (qh < qt) {
        uint32_t c = d->queue[qh++];
        idvec *v = &d->out[c];
        for (uint32_t i = 0; i < v->n; i++) {
            uint32_t x = find(d, v->p[i]);
            if (x != a && x != c && d->min[x] < d->max[a] && d->stamp2[x] != fgen) {
                d->stamp2[x] = fgen;
                d->queue[qt++] = x;
            }
        }
    }
    /* backward from a: clusters that may lie after b; the ones in both are on a path */
    uint32_t bgen = ++d->gen;
    uint32_t npath = 0;
    qh = qt = 0;
    d->queue[qt++] = a;
    d->stamp[a] = bgen;
    uint32_t *path = d->queue + d->nn; /* second half of the queue buffer */
    path[npath++] = b;
    while (qh < qt) {
        uint32_t c = d->queue[qh++];
        idvec *v = &d->in[c];
        for (uint32_t i = 0; i < v->n; i++) {
            uint32_t x = find(d, v->p[i]);
            if (x != b && x != c && d->max[x] > d->min[b] && d->stamp[x] != bgen) {
                d->stamp[x] = bgen;
                d->queue[qt++] = x;
                if (d->stamp2[x] == fgen)
                    path[npath++] = x;
            }
        }
    }
    for (uint32_t i = 0; i < npath; i++) {
        uint32_t x = find(d, path[i]);
        if (x != a && !merge(d, a, x))
            return false;
    }
    return true;
}

/* ---- unknown nodes ------------------------------------------------------- */

static bool attr_true(const kiln_attrs *a, const char *key)
{
    bool v = false;
    return kiln_attrs_get_bool(a, key, &v) && v;
}

static bool op_listed(const char *list, const char *op)
{
    size_t n = strlen(op);
    for (const char *p = list; p && *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && strncmp(p, op, n) == 0)
            return true;
        p = e ? e + 1 : NULL;
    }
    return false;
}

static bool graph_has_unknown(dsp *d, kiln_graph *g);

/* GE DynamicShapePartitioner::IsUnknownShapeNode (the rules kiln can evaluate). */
static bool node_unknown(dsp *d, kiln_graph *g, kiln_node_id n)
{
    const kiln_attrs *a = kiln_node_attrs(g, n);
    bool refresh = true;
    if (d->k_refresh && kiln_attrs_get_bool(a, "_is_support_addr_refresh", &refresh) &&
        !refresh) {
        ds_set_bool(g, n, DS_ATTR_FORCE_UNKNOWN, true);
        return true;
    }
    /* _force_unknown_shape may appear as the rule above marks */
    if ((d->k_is_unknown && attr_true(a, DS_ATTR_IS_UNKNOWN)) ||
        ((d->k_force || d->k_refresh) && attr_true(a, DS_ATTR_FORCE_UNKNOWN)))
        return true;
    const char *engine = NULL;
    if (d->k_engine && d->v_host_cpu && kiln_attrs_get_string(a, "_kiln_engine", &engine) &&
        strcmp(engine, "DNN_VM_HOST_CPU") == 0)
        return true;
    if (d->force_ops && op_listed(d->force_ops, kiln_node_op_str(g, n)))
        return true;
    if (!(d->k_no_tiling && attr_true(a, "_op_no_tiling"))) {
        bool root = d->outs_known && g == d->g;
        for (uint32_t i = 0; i < kiln_node_input_count(g, n); i++) {
            kiln_node_id p = kiln_node_input_peer(g, n, i).node;
            bool own = kiln_node_input_has_desc(g, n, i);
            if (!p && !own)
                continue;
            if (!own && root && p < d->outs_lim && d->outs_known[p])
                continue; /* the producer's output descriptor, found known */
            if (ds_desc_unknown(kiln_node_input_desc(g, n, i)))
                return true;
        }
        for (uint32_t o = 0; o < kiln_node_output_count(g, n); o++)
            if (ds_desc_unknown(kiln_node_output_desc(g, n, o)))
                return true;
        if (root && n < d->outs_lim)
            d->outs_known[n] = 1;
    }
    for (uint32_t s = 0; s < kiln_node_subgraph_count(g, n); s++)
        if (graph_has_unknown(d, kiln_node_subgraph(g, n, s, NULL)))
            return true;
    return false;
}

static bool graph_has_unknown(dsp *d, kiln_graph *g)
{
    bool any = false;
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n))
        any |= node_unknown(d, g, n); /* every node: the addr-refresh rule marks as it goes */
    return any;
}

static bool op_is(const kiln_graph *g, kiln_node_id n, const char *op)
{
    return strcmp(kiln_node_op_str(g, n), op) == 0;
}

static bool has_data_input(const kiln_graph *g, kiln_node_id n)
{
    for (uint32_t i = 0; i < kiln_node_input_count(g, n); i++)
        if (kiln_node_input_peer(g, n, i).node)
            return true;
    return false;
}

static bool is_data(const kiln_graph *g, kiln_node_id n)
{
    return (op_is(g, n, "Data") || op_is(g, n, "RefData") || op_is(g, n, "AippData")) &&
           !has_data_input(g, n);
}

static bool is_const(const kiln_graph *g, kiln_node_id n)
{
    return (op_is(g, n, "Const") || op_is(g, n, "Constant")) && !has_data_input(g, n);
}

static ctype node_type(dsp *d, uint32_t i)
{
    kiln_graph *g = d->g;
    kiln_node_id n = d->order[i];
    if (is_data(g, n))
        return CT_DATA;
    if (is_const(g, n))
        return CT_INPUT;
    if (op_is(g, n, "NetOutput"))
        return CT_NETOUTPUT;
    if (op_is(g, n, "PartitionedCall") && kiln_attrs_has(kiln_node_attrs(g, n), DS_ATTR_STAGE_LEVEL))
        return CT_STAGE;
    return d->unknown[i] ? CT_UNKNOWN : CT_KNOWN;
}

/* ---- clustering ---------------------------------------------------------- */

static bool is_ref_var(const kiln_graph *g, kiln_node_id n)
{
    return kiln_attrs_has(kiln_node_attrs(g, n), "ref_var_src_var_name");
}

static kiln_status nomem(dsp *d)
{
    return kiln_errorf(d->err, KILN_ERR_NOMEM, "out of memory");
}

/* Nodes sharing `_control_flow_group` merge with everything on the paths between them. */
static bool merge_control_flow(dsp *d)
{
    /* (group, topo index) pairs, sorted; groups are rare, so a plain sort */
    uint32_t cnt = 0;
    for (uint32_t i = 0; i < d->nn; i++)
        if (kiln_attrs_has(kiln_node_attrs(d->g, d->order[i]), "_control_flow_group"))
            cnt++;
    if (!cnt)
        return true;
    int64_t *key = kiln_alloc(sizeof(int64_t) * 2 * cnt);
    if (!key)
        return false;
    uint32_t k = 0;
    for (uint32_t i = 0; i < d->nn; i++) {
        const kiln_attrs *a = kiln_node_attrs(d->g, d->order[i]);
        int64_t grp;
        const char *s;
        if (kiln_attrs_get_int(a, "_control_flow_group", &grp)) {
        } else if (kiln_attrs_get_string(a, "_control_flow_group", &s)) {
            grp = (int64_t)kiln_intern(d->g, s) | (INT64_C(1) << 40);
        } else
            continue;
        key[2 * k] = grp;
        key[2 * k + 1] = i;
        k++;
    }
    /* insertion sort by (group, index): stable and fine for the few grouped nodes */
    for (uint32_t x = 1; x < k; x++)
        for (uint32_t y = x; y > 0 && (key[2 * y - 2] > key[2 * y] ||
                                       (key[2 * y - 2] == key[2 * y] &&
                                        key[2 * y - 1] > key[2 * y + 1]));
             y--) {
            int64_t t0 = key[2 * y], t1 = key[2 * y + 1];
            key[2 * y] = key[2 * y - 2];
            key[2 * y + 1] = key[2 * y - 1];
            key[2 * y - 2] = t0;
            key[2 * y - 1] = t1;
        }
    bool ok = true;
    for (uint32_t s = 0; s < k && ok;) {
        uint32_t e = s;
        while (e + 1 < k && key[2 * (e + 1)] == key[2 * s])
            e++;
        uint32_t last = (uint32_t)key[2 * e + 1];
        for (uint32_t x = s; x < e && ok; x++) {
            uint32_t a = find(d, last), b = find(d, (uint32_t)key[2 * x + 1]);
            bool unk = d->type[a] == CT_UNKNOWN || d->type[b] == CT_UNKNOWN;
            ok = merge_all_path_from(d, a, b);
            d->type[find(d, a)] = unk ? CT_UNKNOWN : d->type[find(d, a)];
        }
        s = e + 1;
    }
    kiln_free(key);
    return ok;
}

/* A single-node cluster of a var-like node with `ref_var_src_var_name` and one input cluster. */
static bool is_ref_cluster(dsp *d, uint32_t c)
{
    if (d->size[c] != 1 || !is_ref_var(d->g, d->order[c]))
        return false;
    compact(d, &d->in[c], c);
    return d->in[c].n == 1;
}

/*
 * GE MergeClustersWithConsistantId (ge.topoSortingMode = 3): the KNOWN and
 * UNKNOWN clusters in order (ref-variable clusters excluded) merge in runs of
 * equal type; a known run shorter than the lower limit (a trailing known
 * cluster counts one more) becomes unknown, absorbing the cluster after it,
 * and is glued to the unknown run before it.  Then ref-variable clusters merge
 * into their input and the INPUT_NODE clusters into one.  The order is the
 * stable depth-first topological order (stable_order), so the runs are
 * contiguous in a topological order; the frames are checked for a ring after.
 */
static bool merge_stable(dsp *d)
{
    uint32_t nn = d->nn, m = 0;
    uint32_t *u = d->queue; /* the unique clusters, in order */
    for (uint32_t c = 0; c < nn; c++)
        if (find(d, c) == c && (d->type[c] == CT_KNOWN || d->type[c] == CT_UNKNOWN) &&
            !is_ref_cluster(d, c))
            u[m++] = c;
    uint32_t last_num = 0, num = 1;
    for (uint32_t i = 1; i < m; i++) {
        uint32_t cur = find(d, u[i]), last = find(d, u[i - 1]);
        if (d->type[last] != d->type[cur] || i == m - 1) {
            uint32_t stat = d->type[cur] != CT_UNKNOWN ? num + 1 : num;
            if (d->type[last] == CT_KNOWN && (int64_t)stat < d->limit) {
                if (!merge(d, last, cur))
                    return false;
                d->type[last] = CT_UNKNOWN;
                u[i] = last;
                num++;
                if (i >= num) {
                    uint32_t dyn = find(d, u[i - num]);
                    if (dyn != last && !merge(d, dyn, last))
                        return false;
                    u[i] = dyn;
                    num += last_num;
                }
                continue;
            }
        }
        if (d->type[last] == d->type[cur]) {
            if (!merge(d, last, cur))
                return false;
            u[i] = last;
            num++;
            continue;
        }
        last_num = num;
        num = 1;
    }
    /* ref-variable clusters merge into their input, whatever its type */
    for (uint32_t c = 0; c < nn; c++)
        if (find(d, c) == c && is_ref_cluster(d, c) && !merge(d, find(d, d->in[c].p[0]), c))
            return false;
    uint32_t first_input = UINT32_MAX;
    for (uint32_t c = 0; c < nn; c++) {
        if (find(d, c) != c || d->type[c] != CT_INPUT)
            continue;
        if (first_input == UINT32_MAX)
            first_input = c;
        else if (!merge(d, first_input, c))
            return false;
    }
    return true;
}

static bool merge_normal(dsp *d);

static bool cluster(dsp *d)
{
    uint32_t nn = d->nn;
    for (uint32_t i = 0; i < nn; i++) {
        d->parent[i] = i;
        d->type[i] = (uint8_t)node_type(d, i);
        d->min[i] = d->max[i] = i;
        d->size[i] = 1;
        d->head[i] = d->tail[i] = i;
        d->next[i] = UINT32_MAX;
        d->in[i].n = d->out[i].n = 0;
    }
    for (uint32_t i = 0; i < nn; i++) {
        kiln_node_id n = d->order[i];
        for (uint32_t k = 0; k < kiln_node_input_count(d->g, n); k++) {
            kiln_anchor p = kiln_node_input_peer(d->g, n, k);
            if (p.node && (!vpush(&d->in[i], d->tidx[p.node]) ||
                           !vpush(&d->out[d->tidx[p.node]], i)))
                return false;
        }
        for (uint32_t c = kiln_ctrl_in_first(d->g, n); c; c = kiln_ctrl_in_next(d->g, c)) {
            uint32_t s = d->tidx[kiln_ctrl_src(d->g, c)];
            if (!vpush(&d->in[i], s) || !vpush(&d->out[s], i))
                return false;
        }
    }
    if (!merge_control_flow(d))
        return false;
    return d->stable ? merge_stable(d) : merge_normal(d);
}

/* Steps 2 and 5 of the normal merge: each root cluster of @p type merges with
 * its inputs of the same type when that makes no ring; a single-input
 * ref-variable cluster (GE) merges into its input instead. */
static bool merge_with_inputs(dsp *d, uint32_t nn, int type, bool *merged)
{
    for (uint32_t c = 0; c < nn; c++) {
        if (find(d, c) != c || d->type[c] != type)
            continue;
        if (!snapshot_inputs(d, c))
            return false;
        if (d->size[c] == 1 && d->snap.n == 1 && is_ref_var(d->g, d->order[c])) {
            if (!merge(d, find(d, d->snap.p[0]), c))
                return false;
            continue;
        }
        for (uint32_t i = 0; i < d->snap.n; i++) {
            uint32_t b = find(d, d->snap.p[i]), a = find(d, c);
            if (b != a && d->type[b] == type)
                try_merge(d, a, b, merged);
        }
    }
    return true;
}

/* GE MergeClustersNormal (without the "merge known first" strategy). */
static bool merge_normal(dsp *d)
{
    uint32_t nn = d->nn;
    bool merged;
    /* 1. unknown clusters absorb every cluster on a path from an unknown input */
    for (uint32_t c = 0; c < nn; c++) {
        if (find(d, c) != c || d->type[c] != CT_UNKNOWN)
            continue;
        if (!snapshot_inputs(d, c))
            return false;
        for (uint32_t i = 0; i < d->snap.n; i++) {
            uint32_t b = find(d, d->snap.p[i]);
            if (b != c && d->type[b] == CT_UNKNOWN && !merge_all_path_from(d, c, b))
                return false;
        }
    }
    /* 2. known clusters merge with known inputs when that makes no ring; a
     *    single-input ref-variable cluster merges into its input */
    if (!merge_with_inputs(d, nn, CT_KNOWN, &merged))
        return false;
    /* 3. every INPUT_NODE cluster merges into one */
    uint32_t first_input = UINT32_MAX;
    for (uint32_t c = 0; c < nn; c++) {
        if (find(d, c) != c || d->type[c] != CT_INPUT)
            continue;
        if (first_input == UINT32_MAX)
            first_input = c;
        else if (!merge(d, first_input, c))
            return false;
    }
    /* 4. small known clusters become unknown */
    for (uint32_t c = 0; c < nn; c++)
        if (find(d, c) == c && d->type[c] == CT_KNOWN && (int64_t)d->size[c] < d->limit)
            d->type[c] = CT_UNKNOWN;
    /* 5. unknown clusters merge with unknown inputs when that makes no ring */
    return merge_with_inputs(d, nn, CT_UNKNOWN, &merged);
}

/* ---- data-flow handles ---------------------------------------------------- */

static int cmp_handle(const void *x, const void *y)
{
    const int64_t *a = x, *b = y;
    return a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : (a[1] > b[1]) - (a[1] < b[1]);
}

/*
 * Stack ops sharing `_data_flow_handle` whose clusters disagree on known /
 * unknown all get `_force_unknown_shape`; returns the number of nodes newly
 * forced (the caller clusters again), or -1 on OOM.
 */
static int64_t fix_data_flow(dsp *d)
{
    uint32_t cnt = 0;
    for (uint32_t i = 0; i < d->nn; i++)
        if (kiln_attrs_has(kiln_node_attrs(d->g, d->order[i]), "_data_flow_handle"))
            cnt++;
    if (!cnt)
        return 0;
    int64_t *key = kiln_alloc(sizeof(int64_t) * 2 * cnt);
    if (!key)
        return -1;
    uint32_t k = 0;
    for (uint32_t i = 0; i < d->nn; i++) {
        kiln_node_id n = d->order[i];
        const kiln_attrs *a = kiln_node_attrs(d->g, n);
        const char *op = kiln_node_op_str(d->g, n);
        if (strcmp(op, "Stack") && strcmp(op, "StackPush") && strcmp(op, "StackPop") &&
            strcmp(op, "StackClose"))
            continue;
        int64_t h;
        const char *s;
        if (kiln_attrs_get_int(a, "_data_flow_handle", &h)) {
        } else if (kiln_attrs_get_string(a, "_data_flow_handle", &s)) {
            h = (int64_t)kiln_intern(d->g, s) | (INT64_C(1) << 40);
        } else
            continue;
        key[2 * k] = h;
        key[2 * k + 1] = i;
        k++;
    }
    qsort(key, k, sizeof(int64_t) * 2, cmp_handle);
    int64_t forced = 0;
    for (uint32_t s = 0; s < k;) {
        uint32_t e = s;
        bool unk = false, kn = false;
        while (e < k && key[2 * e] == key[2 * s]) {
            uint32_t c = find(d, (uint32_t)key[2 * e + 1]);
            if (d->type[c] == CT_UNKNOWN)
                unk = true;
            else
                kn = true;
            e++;
        }
        if (unk && kn)
            for (uint32_t x = s; x < e; x++) {
                uint32_t i = (uint32_t)key[2 * x + 1];
                if (!d->unknown[i]) {
                    d->unknown[i] = 1;
                    forced++;
                }
                ds_set_bool(d->g, d->order[i], DS_ATTR_FORCE_UNKNOWN, true);
            }
        s = e;
    }
    kiln_free(key);
    return forced;
}

/* ---- the stable depth-first topological order ------------------------------ */

/*
 * Kahn's algorithm with a stack: the sources are taken in id order, and a node
 * that becomes ready is emitted next, its ready consumers in output order, so
 * every chain stays contiguous (the order GE's stable RDFS sort gives the
 * PT7-PT9 graphs).  O(n + e).  Fills d->order; false on OOM or a cycle.
 */
static bool stable_order(dsp *d, kiln_error *err)
{
    kiln_graph *g = d->g;
    uint32_t lim = kiln_graph_id_limit(g), k = 0, sp = 0;
    uint32_t *indeg = zalloc(sizeof(uint32_t) * ((size_t)lim + 1));
    kiln_node_id *stack = kiln_alloc(sizeof(kiln_node_id) * ((size_t)d->nn + 1));
    kiln_node_id *ready = kiln_alloc(sizeof(kiln_node_id) * ((size_t)d->nn + 1));
    bool ok = indeg && stack && ready;
    for (kiln_node_id n = ok ? kiln_graph_next_node(g, 0) : 0; n; n = kiln_graph_next_node(g, n)) {
        for (uint32_t i = 0; i < kiln_node_input_count(g, n); i++)
            if (kiln_node_input_peer(g, n, i).node)
                indeg[n]++;
        indeg[n] += kiln_node_ctrl_in_count(g, n);
    }
    /* the sources pushed in reverse id order: the smallest id is on top */
    uint32_t nsrc = 0;
    for (kiln_node_id n = ok ? kiln_graph_next_node(g, 0) : 0; n; n = kiln_graph_next_node(g, n))
        if (!indeg[n])
            ready[nsrc++] = n;
    while (nsrc)
        stack[sp++] = ready[--nsrc];
    while (ok && sp) {
        kiln_node_id n = stack[--sp];
        d->order[k++] = n;
        uint32_t nr = 0;
        for (uint32_t o = 0; o < kiln_node_output_count(g, n); o++)
            for (uint32_t c = kiln_use_first(g, n, o); c; c = kiln_use_next(g, c)) {
                kiln_node_id v = kiln_use_dst(g, c).node;
                if (--indeg[v] == 0)
                    ready[nr++] = v;
            }
        for (uint32_t c = kiln_ctrl_out_first(g, n); c; c = kiln_ctrl_out_next(g, c)) {
            kiln_node_id v = kiln_ctrl_dst(g, c);
            if (--indeg[v] == 0)
                ready[nr++] = v;
        }
        while (nr)
            stack[sp++] = ready[--nr];
    }
    if (!ok)
        kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    else if (k != d->nn)
        ok = (kiln_errorf(err, KILN_ERR_INVALID, "graph %s has a cycle", kiln_graph_name(g)),
              false);
    kiln_free(indeg);
    kiln_free(stack);
    kiln_free(ready);
    return ok;
}

/* ---- options ------------------------------------------------------------- */

static kiln_status int_option(kiln_pass_ctx *ctx, kiln_error *err, const char *key, int64_t def,
                              int64_t lo, int64_t *out)
{
    const char *v = kiln_pass_session_option(ctx, key);
    *out = def;
    if (!v)
        return KILN_OK;
    char *end = NULL;
    long long x = 0;
    if (*v) {
        errno = 0;
        x = strtoll(v, &end, 10);
    }
    if (!*v || *end || errno || x < lo)
        return kiln_errorf(err, KILN_ERR_PARAM,
                           "option %s = '%s' is invalid: it must be an "
                           "integer >= %lld",
                           key, v, (long long)lo);
    *out = x;
    return KILN_OK;
}

/* ---- the pass ------------------------------------------------------------ */

typedef struct dsp_inst {
    char *force_ops;
} dsp_inst;

static const kiln_option_def dsp_options[] = {
    {sizeof(kiln_option_def), KILN_OPT_STRING, "force_unknown_ops", "",
     "comma-separated op types treated as unknown-shape nodes (as if they carried "
     "_force_unknown_shape); for testing the partition and the runtime on static models",
     0, 0},
};

static kiln_status dsp_create(const kiln_options *opts, kiln_error *err, void **inst)
{
    dsp_inst *p = kiln_alloc(sizeof(*p));
    if (!p)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    memset(p, 0, sizeof(*p));
    const char *s = NULL;
    if (opts && kiln_options_get_string(opts, "force_unknown_ops", &s) && s && *s) {
        size_t n = strlen(s);
        p->force_ops = kiln_alloc(n + 1);
        if (!p->force_ops) {
            kiln_free(p);
            return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
        }
        memcpy(p->force_ops, s, n + 1);
    }
    *inst = p;
    return KILN_OK;
}

static void dsp_destroy(void *inst)
{
    dsp_inst *p = inst;
    if (p)
        kiln_free(p->force_ops);
    kiln_free(p);
}

static void dsp_free(dsp *d)
{
    for (uint32_t i = 0; d->in && i < d->nn; i++) {
        kiln_free(d->in[i].p);
        kiln_free(d->out[i].p);
    }
    void *bufs[] = {d->order, d->tidx, d->unknown, d->parent, d->type, d->min, d->max, d->size,
                    d->head, d->tail, d->next, d->in, d->out, d->stamp, d->stamp2, d->queue,
                    d->snap.p};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
        kiln_free(bufs[i]);
}

/* Every subgraph of the root (at any depth) gets the unknown flag. */
static kiln_status mark_whole_unknown(kiln_graph *g)
{
    kiln_status st = ds_graph_set_bool(g, DS_ATTR_GRAPH_UNKNOWN, true);
    for (uint32_t i = 0; st == KILN_OK && !kiln_graph_parent(g) &&
                         i < kiln_graph_all_subgraph_count(g);
         i++)
        st = ds_graph_set_bool(kiln_graph_all_subgraph(g, i), DS_ATTR_GRAPH_UNKNOWN, true);
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n && st == KILN_OK;
         n = kiln_graph_next_node(g, n))
        st = ds_set_bool(g, n, DS_ATTR_OWNER_UNKNOWN, true);
    if (st == KILN_OK)
        st = ds_graph_set_bool(g, DS_ATTR_PARTITIONED, false);
    return st;
}

static int cmp_u32(const void *x, const void *y)
{
    uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
    return (a > b) - (a < b);
}

/* Build the PartitionedCall of every KNOWN, UNKNOWN and INPUT_NODE cluster. */
static kiln_status build_frames(dsp *d, uint32_t *built)
{
    kiln_graph *g = d->g;
    uint32_t lim = kiln_graph_id_limit(g);
    uint32_t *mark = zalloc(sizeof(uint32_t) * ((size_t)lim + 1));
    uint32_t *idx = kiln_alloc(sizeof(uint32_t) * ((size_t)d->nn + 1));
    kiln_node_id *nodes = kiln_alloc(sizeof(kiln_node_id) * ((size_t)d->nn + 1));
    kiln_status st = KILN_OK;
    if (!mark || !idx || !nodes) {
        st = nomem(d);
        goto out;
    }
    uint32_t u = 0;
    for (uint32_t c = 0; c < d->nn && st == KILN_OK; c++) {
        if (find(d, c) != c)
            continue;
        ctype t = d->type[c];
        if (t != CT_KNOWN && t != CT_UNKNOWN && t != CT_INPUT)
            continue;
        uint32_t n = 0;
        for (uint32_t i = d->head[c]; i != UINT32_MAX; i = d->next[i])
            idx[n++] = i;
        qsort(idx, n, sizeof(uint32_t), cmp_u32);
        for (uint32_t i = 0; i < n; i++)
            nodes[i] = d->order[idx[i]];
        char sub[512], call[600];
        snprintf(sub, sizeof(sub), "%s_sub_%u_%s", kiln_graph_name(g), u,
                 t == CT_UNKNOWN ? "unknow" : t == CT_KNOWN ? "know" : "input");
        snprintf(call, sizeof(call), "%s_PartitionedCall_%u", sub, u);
        kiln_node_id cn = 0;
        kiln_graph *sg = NULL;
        st = ds_build_call(g, nodes, n, sub, call, true, mark, lim + 1, &cn, &sg, d->err);
        if (st != KILN_OK)
            break;
        bool unk = t == CT_UNKNOWN;
        st = ds_set_bool(g, cn, DS_ATTR_IS_UNKNOWN, unk);
        if (st == KILN_OK)
            st = ds_set_bool(g, cn, DS_ATTR_OWNER_UNKNOWN, unk);
        for (kiln_node_id x = kiln_graph_next_node(sg, 0); x && st == KILN_OK;
             x = kiln_graph_next_node(sg, x)) {
            st = ds_set_bool(sg, x, DS_ATTR_IS_UNKNOWN, unk);
            if (st == KILN_OK)
                st = ds_set_bool(sg, x, DS_ATTR_OWNER_UNKNOWN, unk);
        }
        if (st == KILN_OK)
            st = ds_graph_set_bool(sg, DS_ATTR_GRAPH_UNKNOWN, unk);
        if (st == KILN_OK && unk)
            st = ds_graph_set_bool(sg, DS_ATTR_DISCONTIGUOUS, true);
        if (st != KILN_OK) {
            if (kiln_error_code(d->err) == KILN_OK)
                nomem(d);
            break;
        }
        kiln_pass_explain(d->ctx, g, cn, "%s cluster %u of %u node(s) (%s)", ctype_name[t], c, n,
                          sub);
        u++;
    }
    *built = u;
out:
    kiln_free(mark);
    kiln_free(idx);
    kiln_free(nodes);
    return st;
}

/*
 * Partition one independent graph @p g: the root, or one stage subgraph when
 * the StagePartitioner ran (GE GraphUtils::GetIndependentCompileGraphs).
 */
static kiln_pass_result partition_graph(dsp_inst *pi, kiln_pass_ctx *ctx, kiln_graph *g,
                                        int64_t limit, int64_t threshold, bool stable)
{
    kiln_error *err = kiln_pass_error(ctx);
    dsp d;
    memset(&d, 0, sizeof(d));
    d.g = g;
    d.ctx = ctx;
    d.err = err;
    d.force_ops = pi ? pi->force_ops : NULL;
    d.limit = limit;
    d.stable = stable;
    bool done = false;
    if (kiln_attrs_get_bool(kiln_graph_attrs(g), DS_ATTR_PARTITIONED, &done) && done) {
        kiln_diag(ctx, KILN_SEV_INFO,
                  "graph %s is partitioned already (%s); not again",
                  kiln_graph_name(g), DS_ATTR_PARTITIONED);
        return KILN_PASS_NOT_CHANGED;
    }
    const kiln_node_id *order;
    uint32_t nn;
    if (kiln_graph_topo_order(g, &order, &nn, err) != KILN_OK) {
        kiln_error_push(err, "graph %s", kiln_graph_name(g));
        return KILN_PASS_FAILED;
    }
    uint32_t lim = kiln_graph_id_limit(g);
    d.nn = nn;
    d.order = kiln_alloc(sizeof(kiln_node_id) * ((size_t)nn + 1));
    d.tidx = zalloc(sizeof(uint32_t) * ((size_t)lim + 1));
    d.unknown = zalloc((size_t)nn + 1);
    if (!d.order || !d.tidx || !d.unknown)
        goto oom;
    memcpy(d.order, order, sizeof(kiln_node_id) * nn);
    if (d.stable && !stable_order(&d, err)) {
        dsp_free(&d);
        kiln_error_push(err, "graph %s", kiln_graph_name(g));
        return KILN_PASS_FAILED;
    }
    for (uint32_t i = 0; i < nn; i++)
        d.tidx[d.order[i]] = i;
    dsp_keys_init(&d);

    /* unknown nodes; Data and NetOutput count only for the "only Data and NetOutput" rule */
    uint32_t n_unknown = 0, n_io = 0, n_io_unknown = 0, n_ctrlflow = 0;
    d.outs_lim = lim;
    d.outs_known = zalloc((size_t)lim + 1); /* none (out of memory): every input is read */
    for (uint32_t i = 0; i < nn; i++) {
        kiln_node_id n = d.order[i];
        kiln_sym op = kiln_node_op(g, n);
        bool io = op && (op == d.op_data || op == d.op_netoutput);
        d.unknown[i] = node_unknown(&d, g, n);
        if (io) {
            n_io++;
            n_io_unknown += d.unknown[i];
        } else {
            n_unknown += d.unknown[i];
        }
        if (kiln_node_subgraph_count(g, n))
            n_ctrlflow++;
    }
    kiln_free(d.outs_known);
    d.outs_known = NULL;
    /* Constants feeding an unknown node are unknown too. */
    for (uint32_t i = 0; i < nn; i++) {
        kiln_node_id n = d.order[i];
        if (!d.unknown[i] || op_is(g, n, "NetOutput"))
            continue;
        for (uint32_t k = 0; k < kiln_node_input_count(g, n); k++) {
            kiln_anchor p = kiln_node_input_peer(g, n, k);
            if (p.node && is_const(g, p.node))
                d.unknown[d.tidx[p.node]] = 1;
        }
    }
    kiln_pass_stat_add(ctx, "ds_unknown_nodes", n_unknown);

    kiln_status st = KILN_OK;
    bool only_io = nn > 0 && n_io == nn && n_io_unknown > 0;
    if (only_io) {
        st = mark_whole_unknown(g);
        kiln_diag(ctx, KILN_SEV_INFO,
                  "graph %s is unknown as a whole (only Data and NetOutput, with an unknown "
                  "shape); not partitioned",
                  kiln_graph_name(g));
        dsp_free(&d);
        if (st != KILN_OK)
            goto oom_freed;
        return KILN_PASS_CHANGED;
    }
    if (n_unknown == 0) {
        bool host = (int64_t)nn < threshold && n_ctrlflow == 0;
        st = ds_graph_set_bool(g, DS_ATTR_PARTITIONED, false);
        if (st == KILN_OK)
            st = ds_graph_set_bool(g, DS_ATTR_GRAPH_UNKNOWN, host);
        dsp_free(&d);
        if (st != KILN_OK)
            goto oom_freed;
        return KILN_PASS_CHANGED;
    }

    d.parent = kiln_alloc(sizeof(uint32_t) * ((size_t)nn + 1));
    d.type = kiln_alloc((size_t)nn + 1);
    d.min = kiln_alloc(sizeof(uint32_t) * ((size_t)nn + 1));
    d.max = kiln_alloc(sizeof(uint32_t) * ((size_t)nn + 1));
    d.size = kiln_alloc(sizeof(uint32_t) * ((size_t)nn + 1));
    d.head = kiln_alloc(sizeof(uint32_t) * ((size_t)nn + 1));
    d.tail = kiln_alloc(sizeof(uint32_t) * ((size_t)nn + 1));
    d.next = kiln_alloc(sizeof(uint32_t) * ((size_t)nn + 1));
    d.in = zalloc(sizeof(idvec) * ((size_t)nn + 1));
    d.out = zalloc(sizeof(idvec) * ((size_t)nn + 1));
    d.stamp = zalloc(sizeof(uint32_t) * ((size_t)nn + 1));
    d.stamp2 = zalloc(sizeof(uint32_t) * ((size_t)nn + 1));
    d.queue = kiln_alloc(sizeof(uint32_t) * (2 * (size_t)nn + 2));
    if (!d.parent || !d.type || !d.min || !d.max || !d.size || !d.head || !d.tail || !d.next ||
        !d.in || !d.out || !d.stamp || !d.stamp2 || !d.queue)
        goto oom;
    /* GE IsGraphNeedUnknownShapePartition: every direct node of a graph that is
     * partitioned gets OwnerGraphIsUnknown (the calls get theirs from the cluster) */
    for (uint32_t i = 0; i < nn; i++)
        if (ds_set_bool(g, d.order[i], DS_ATTR_OWNER_UNKNOWN, true) != KILN_OK)
            goto oom;
    for (int round = 0;; round++) {
        if (!cluster(&d))
            goto oom;
        int64_t forced = fix_data_flow(&d);
        if (forced < 0)
            goto oom;
        if (forced == 0)
            break;
        if (round > 64) {
            kiln_errorf(err, KILN_ERR_INTERNAL,
                        "graph %s: the data-flow handle fix-up did not "
                        "converge", kiln_graph_name(g));
            dsp_free(&d);
            return KILN_PASS_FAILED;
        }
    }
    kiln_pass_stat_add(ctx, "ds_merges", d.merges);
    kiln_pass_stat_add(ctx, "ds_ring_searches", d.ring_searches);
    kiln_pass_stat_add(ctx, "ds_ring_steps", d.ring_steps);
    uint32_t built = 0;
    st = build_frames(&d, &built);
    dsp_free(&d);
    if (st != KILN_OK) {
        kiln_error_push(err, "graph %s", kiln_graph_name(g));
        return KILN_PASS_FAILED;
    }
    kiln_pass_stat_add(ctx, "ds_partitioned_calls", built);
    {
        /* the merges never make a ring; this checks it (O(n) on the smaller root) */
        const kiln_node_id *o2;
        uint32_t n2;
        if (kiln_graph_topo_order(g, &o2, &n2, err) != KILN_OK) {
            kiln_error_push(err, "graph %s: the PartitionedCalls depend on each other in a "
                            "cycle (a STAGE call between merged clusters?)", kiln_graph_name(g));
            return KILN_PASS_FAILED;
        }
    }
    /* no call when every cluster is DATA, NETOUTPUT or STAGE */
    st = ds_graph_set_bool(g, DS_ATTR_PARTITIONED, built > 0);
    if (st == KILN_OK)
        st = ds_graph_set_bool(g, DS_ATTR_GRAPH_UNKNOWN, true);
    if (st != KILN_OK)
        goto oom_freed;
    return KILN_PASS_CHANGED;
oom:
    dsp_free(&d);
oom_freed:
    kiln_errorf(err, KILN_ERR_NOMEM, "graph %s: out of memory",
                kiln_graph_name(g));
    return KILN_PASS_FAILED;
}

static kiln_pass_result dsp_run(void *inst, kiln_pass_ctx *ctx, kiln_graph *g)
{
    kiln_error *err = kiln_pass_error(ctx);
    if (kiln_graph_parent(g))
        return KILN_PASS_NOT_CHANGED; /* the root's partition covers its subgraphs */
    int64_t limit, threshold;
    if (int_option(ctx, err, "ge.exec.static_model_ops_lower_limit", 4, -1, &limit) != KILN_OK ||
        int_option(ctx, err, "ge.exec.hostSchedulingMaxThreshold", 0, 0, &threshold) != KILN_OK)
        return KILN_PASS_FAILED;
    const char *mode = kiln_pass_session_option(ctx, "ge.topoSortingMode");
    bool stable = mode && strcmp(mode, "3") == 0;
    if (limit == -1) {
        kiln_diag(ctx, KILN_SEV_INFO,
                  "graph %s is unknown as a whole (ge.exec.static_model_ops_lower_limit = -1); "
                  "not partitioned",
                  kiln_graph_name(g));
        if (mark_whole_unknown(g) != KILN_OK) {
            kiln_errorf(err, KILN_ERR_NOMEM, "graph %s: out of memory", kiln_graph_name(g));
            return KILN_PASS_FAILED;
        }
        return KILN_PASS_CHANGED;
    }
    /* the independent graphs: the stage subgraphs when the StagePartitioner made them */
    uint32_t nstage = 0;
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n))
        if (strcmp(kiln_node_op_str(g, n), "PartitionedCall") == 0 &&
            kiln_attrs_has(kiln_node_attrs(g, n), DS_ATTR_STAGE_LEVEL) &&
            kiln_node_subgraph_count(g, n) == 1)
            nstage++;
    if (nstage == 0)
        return partition_graph(inst, ctx, g, limit, threshold, stable);
    kiln_graph **stages = kiln_alloc(sizeof(kiln_graph *) * nstage);
    if (!stages) {
        kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
        return KILN_PASS_FAILED;
    }
    uint32_t k = 0;
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n))
        if (strcmp(kiln_node_op_str(g, n), "PartitionedCall") == 0 &&
            kiln_attrs_has(kiln_node_attrs(g, n), DS_ATTR_STAGE_LEVEL) &&
            kiln_node_subgraph_count(g, n) == 1)
            stages[k++] = kiln_node_subgraph(g, n, 0, NULL);
    kiln_pass_result res = KILN_PASS_NOT_CHANGED;
    for (uint32_t i = 0; i < k && res != KILN_PASS_FAILED; i++) {
        kiln_pass_result r = partition_graph(inst, ctx, stages[i], limit, threshold, stable);
        if (r != KILN_PASS_NOT_CHANGED)
            res = r;
    }
    kiln_free(stages);
    return res;
}

const kiln_pass_desc kiln_dynamic_shape_partition_pass = {
    .struct_size = sizeof(kiln_pass_desc),
    .kind = KILN_PASS_KIND_GRAPH,
    .name = "DynamicShapePartitioner",
    .summary = "wrap known-shape and unknown-shape clusters of the root graph into "
               "PartitionedCall subgraphs (GE DynamicShapePartitioner)",
    .flags = KILN_PASS_NO_SUBGRAPHS,
    .option_count = sizeof(dsp_options) / sizeof(dsp_options[0]),
    .options = dsp_options,
    .create = dsp_create,
    .destroy = dsp_destroy,
    .run_graph = dsp_run,
};

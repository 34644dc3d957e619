/*
 * partitioner.c - EnginePartitioner (GE compiler/graph/partition/
 * engine_partitioner.cc): clusters of nodes that share an engine and a stream
 * label, merged along edges when no second path forbids it, numbered into
 * ranked partitions (docs/partition.md).
 *
 * Per graph (the pass manager runs it on the root and then every subgraph):
 *   1. topological order; one cluster per node, index = position;
 *   2. a data-like node (is_data_like: GE's rule) gets engine
 *      ENGINE_DEFAULT_DATA and its `_user_stream_label` is cleared on the node;
 *      other clusters take the node's `_kiln_engine`, `_stream_label` and
 *      `_user_stream_label`;
 *   3. cluster edges from every data and control producer;
 *   4. MarkClusters: for each child in index order, its parents sorted by
 *      ascending out-degree (ties: ascending index) are merged into it when
 *      IsMergeable: mode "second" and equal non-empty user stream labels, or
 *      the same engine and stream label and, with the direct edge removed, no
 *      other path parent -> child through clusters of index below the child's
 *      (HasSecondPath).  A merge keeps the smaller index.  With session option
 *      ge.topoSortingMode=3 MarkClustersWithConsistantId runs instead: the
 *      non-data clusters in index order, from the back, each tried against
 *      its predecessor in that list (no direct edge needed);
 *   5. partitions: in topological order a new cluster opens new_sub_graph<k>;
 *      rank 0 gathers every data-like partition (engine inputNodesSubGraph)
 *      and the others get ranks 1, 2, ... in order of first appearance, named
 *      partition<T>_rank<r>_new_sub_graph<k> (T = graphs this pass instance
 *      partitioned before);
 *   6. the result is recorded (kiln_graph.h partition accessors) and, as GE's
 *      MergeSubGraph does, a node without `_stream_label` inherits its
 *      partition's label.
 *
 * Implementation: the data-like nodes are left out of the cluster graph (no
 * input, so no path runs through one and none merges; each is a partition
 * of its own): the clusters are the other nodes, in topological order, and
 * their sources are collected in the walk that numbers them.
 * HasSecondPath is GE's bounded DFS over the cluster graph; cluster edge sets
 * are a hash set of (from, to) pairs plus per-cluster lists cleaned lazily, a
 * visited mark is an epoch stamp (no per-call clearing), so one check costs
 * what it visits.  Because a path can only leave the clusters below the
 * child's index forward in topological order, the DFS visits only clusters
 * between the parent and the child; on graphs whose edges are local (all the
 * real models, the benchmark) partitioning is linear (bench/partition.c).
 */
#include "partition.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- a vector of uint32 ------------------------------------------------- */

typedef struct vec {
    uint32_t *v;
    uint32_t n;
    uint32_t cap : 31;
    uint32_t owned : 1; /* v is a heap block of its own (else a slice of the pool, or NULL) */
} vec; /* 16 bytes: two per cluster */

static bool vec_push(vec *a, uint32_t x)
{
    if (a->n == a->cap) {
        uint32_t cap = a->cap ? a->cap * 2 : 4;
        uint32_t *nv = kiln_alloc((size_t)cap * sizeof(uint32_t));
        if (!nv)
            return false;
        if (a->n)
            memcpy(nv, a->v, (size_t)a->n * sizeof(uint32_t));
        if (a->owned)
            kiln_free(a->v);
        a->v = nv;
        a->cap = cap;
        a->owned = 1;
    }
    a->v[a->n++] = x;
    return true;
}

/* ---- the cluster graph ---------------------------------------------------- */

#define EMPTY UINT64_MAX
#define TOMB (UINT64_MAX - 1)

typedef struct cgraph {
    uint32_t n;           /* clusters (= the non-data-like nodes of the graph) */
    uint32_t *alias;      /* representative cluster (GE clusters_[big] = clusters_[small]) */
    kiln_sym *engine, *label, *ulabel;
    uint32_t *group;      /* atomic level under a composite one: the node's composite
                             partition (clusters of two never merge); NULL: none */
    uint8_t *dirty;       /* bit 0: out list may hold stale entries, bit 1: in list,
                             bit 2: edges of this source in the overflow table */
    uint32_t *home;       /* HOME edge targets per cluster (see set_has) */
    vec *out, *in;        /* lists, cleaned lazily: an entry counts when the edge is in the set */
    uint32_t *outdeg, *indeg;
    uint32_t *pool;       /* initial list storage, 2 x the graph's edges (lists outgrow it into the heap) */
    uint64_t *set;        /* open addressing over (from << 32 | to) */
    uint32_t set_cap, set_used, set_tomb;
    uint32_t *stamp;      /* epoch stamps: visited marks and de-duplication */
    uint32_t epoch;
    vec stack;
    bool oom;
    int64_t checks, found, merges;
} cgraph;

static uint32_t hash64(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return (uint32_t)k;
}

/*
 * The edge set.  Each cluster a has HOME slots of its own holding the targets
 * of up to HOME edges a -> b (UINT32_MAX = free): the common case is one cache
 * line next to its neighbours' (edges are local in index space, so are the
 * accesses).  The edges that do not fit go to one open-addressing table over
 * (a << 32 | b) with tombstones, and a's overflow flag says to look there.
 */
#define HOME 4
#define FREE UINT32_MAX

static bool ovf_has(const cgraph *c, uint64_t k)
{
    uint32_t mask = c->set_cap - 1;
    for (uint32_t j = hash64(k) & mask;; j = (j + 1) & mask) {
        if (c->set[j] == k)
            return true;
        if (c->set[j] == EMPTY)
            return false;
    }
}

static bool set_has(const cgraph *c, uint32_t a, uint32_t b)
{
    const uint32_t *h = &c->home[(size_t)a * HOME];
    for (int i = 0; i < HOME; i++)
        if (h[i] == b)
            return true;
    return (c->dirty[a] & 4) && ovf_has(c, (uint64_t)a << 32 | b);
}

static bool set_grow(cgraph *c)
{
    uint32_t cap = c->set_cap * 2;
    if (c->set_used * 4 < c->set_cap)
        cap = c->set_cap; /* mostly tombstones: rehash in place size */
    uint64_t *ns = kiln_alloc((size_t)cap * sizeof(uint64_t));
    if (!ns)
        return false;
    memset(ns, 0xff, (size_t)cap * sizeof(uint64_t));
    for (uint32_t i = 0; i < c->set_cap; i++) {
        uint64_t k = c->set[i];
        if (k == EMPTY || k == TOMB)
            continue;
        uint32_t j = hash64(k) & (cap - 1);
        while (ns[j] != EMPTY)
            j = (j + 1) & (cap - 1);
        ns[j] = k;
    }
    kiln_free(c->set);
    c->set = ns;
    c->set_cap = cap;
    c->set_tomb = 0;
    return true;
}

/* Add (a, b) to the overflow table (not there yet); false on OOM. */
static bool ovf_insert(cgraph *c, uint32_t a, uint32_t b)
{
    if ((c->set_used + c->set_tomb + 1) * 2 > c->set_cap && !set_grow(c))
        return false;
    uint64_t k = (uint64_t)a << 32 | b;
    uint32_t mask = c->set_cap - 1, j = hash64(k) & mask;
    while (c->set[j] != EMPTY && c->set[j] != TOMB)
        j = (j + 1) & mask;
    if (c->set[j] == TOMB)
        c->set_tomb--;
    c->set[j] = k;
    c->set_used++;
    c->dirty[a] |= 4;
    return true;
}

/* GE InsertEdge: no self edge; an existing edge is left alone. */
static void edge_insert(cgraph *c, uint32_t a, uint32_t b)
{
    if (a == b || c->oom || set_has(c, a, b))
        return;
    uint32_t *h = &c->home[(size_t)a * HOME];
    int i = 0;
    while (i < HOME && h[i] != FREE)
        i++;
    if (i < HOME)
        h[i] = b;
    else if (!ovf_insert(c, a, b)) {
        c->oom = true;
        return;
    }
    c->outdeg[a]++;
    c->indeg[b]++;
    if (!vec_push(&c->out[a], b) || !vec_push(&c->in[b], a))
        c->oom = true;
}

/* GE RemoveEdge. */
static void edge_erase(cgraph *c, uint32_t a, uint32_t b)
{
    uint32_t *h = &c->home[(size_t)a * HOME];
    bool found = false;
    for (int i = 0; i < HOME && !found; i++)
        if (h[i] == b) {
            h[i] = FREE;
            found = true;
        }
    if (!found && (c->dirty[a] & 4)) {
        uint64_t k = (uint64_t)a << 32 | b;
        uint32_t mask = c->set_cap - 1;
        for (uint32_t j = hash64(k) & mask; c->set[j] != EMPTY; j = (j + 1) & mask)
            if (c->set[j] == k) {
                c->set[j] = TOMB;
                c->set_used--;
                c->set_tomb++;
                found = true;
                break;
            }
    }
    if (!found)
        return;
    c->outdeg[a]--;
    c->indeg[b]--;
    c->dirty[a] |= 1;
    c->dirty[b] |= 2;
}

/* Drop stale and duplicate entries of cluster @p x's out (or in) list. */
static vec *clean(cgraph *c, uint32_t x, bool out)
{
    vec *l = out ? &c->out[x] : &c->in[x];
    uint8_t bit = out ? 1 : 2;
    if (!(c->dirty[x] & bit))
        return l; /* no erase touched it: exact, no duplicates */
    c->dirty[x] &= (uint8_t)~bit;
    uint32_t e = ++c->epoch, w = 0;
    for (uint32_t i = 0; i < l->n; i++) {
        uint32_t y = l->v[i];
        if (c->stamp[y] == e || !(out ? set_has(c, x, y) : set_has(c, y, x)))
            continue;
        c->stamp[y] = e;
        l->v[w++] = y;
    }
    l->n = w;
    return l;
}

static bool second_path(cgraph *c, uint32_t src, uint32_t dst, uint32_t upper);

/* HasSecondPath when there is no direct edge src -> dst to remove. */
static bool second_path_noedge(cgraph *c, uint32_t src, uint32_t dst, uint32_t upper)
{
    if (!c->outdeg[src] || !c->indeg[dst]) {
        c->checks++;
        return false;
    }
    /* one extra count on both ends makes second_path's "<= 1" exits "== 0" */
    c->outdeg[src]++;
    c->indeg[dst]++;
    bool has = second_path(c, src, dst, upper);
    c->outdeg[src]--;
    c->indeg[dst]--;
    return has;
}

/*
 * GE HasSecondPath, with GE's removal of the direct edge src -> dst folded in:
 * the edge is skipped instead of erased and re-inserted (the early exits read
 * the degrees without it).
 */
static bool second_path(cgraph *c, uint32_t src, uint32_t dst, uint32_t upper)
{
    c->checks++;
    if (c->outdeg[src] <= 1 || c->indeg[dst] <= 1)
        return false;
    uint32_t e = ++c->epoch;
    c->stack.n = 0;
    if (!vec_push(&c->stack, src)) {
        c->oom = true;
        return true;
    }
    while (c->stack.n) {
        uint32_t x = c->stack.v[--c->stack.n];
        if (c->stamp[x] == e)
            continue;
        c->stamp[x] = e;
        const vec *l = &c->out[x];
        bool exact = !(c->dirty[x] & 1);
        for (uint32_t i = 0; i < l->n; i++) {
            uint32_t y = l->v[i];
            if ((x == src && y == dst) || (!exact && !set_has(c, x, y)))
                continue;
            if (y == dst) {
                c->found++;
                return true;
            }
            if (y < upper && c->stamp[y] != e && !vec_push(&c->stack, y)) {
                c->oom = true;
                return true;
            }
        }
    }
    return false;
}

/* GE IsMergeable (called with an existing edge parent -> child). */
static bool mergeable(cgraph *c, uint32_t parent, uint32_t child, uint32_t upper, bool second)
{
    if (second && c->ulabel[parent] && c->ulabel[parent] == c->ulabel[child])
        return true;
    if (c->engine[parent] != c->engine[child] || c->label[parent] != c->label[child] ||
        (c->group && c->group[parent] != c->group[child]))
        return false;
    if (!set_has(c, parent, child)) {
        /* Stable-RDFS pairs need no edge: GE removes nothing and inserts one */
        bool has = second_path_noedge(c, parent, child, upper);
        edge_insert(c, parent, child);
        return !has;
    }
    return !second_path(c, parent, child, upper);
}

/* GE MergeTwoClusters: the smaller index survives; *child follows it. */
static void merge(cgraph *c, uint32_t parent, uint32_t *child)
{
    uint32_t orig = *child, small, big;
    if (parent > *child) {
        small = *child;
        big = parent;
    } else {
        small = parent;
        big = *child;
        *child = small;
    }
    c->merges++;
    c->alias[big] = small;
    edge_erase(c, parent, orig);
    vec *in = clean(c, big, false);
    for (uint32_t i = 0; i < in->n; i++) {
        uint32_t x = in->v[i];
        edge_insert(c, x, small);
        edge_erase(c, x, big);
    }
    vec *out = clean(c, big, true);
    for (uint32_t i = 0; i < out->n; i++) {
        uint32_t y = out->v[i];
        edge_insert(c, small, y);
        edge_erase(c, big, y);
    }
}

static uint32_t find(cgraph *c, uint32_t x)
{
    uint32_t r = x;
    while (c->alias[r] != r)
        r = c->alias[r];
    while (c->alias[x] != r) {
        uint32_t nx = c->alias[x];
        c->alias[x] = r;
        x = nx;
    }
    return r;
}

/* qsort_r comparator over the cgraph in @p ctx (no global: graphs may be
 * partitioned in parallel). */
static int by_outdeg(const void *a, const void *b, void *ctx)
{
    const cgraph *c = ctx;
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    if (c->outdeg[x] != c->outdeg[y])
        return c->outdeg[x] < c->outdeg[y] ? -1 : 1;
    return x < y ? -1 : x > y;
}

static void mark_clusters(cgraph *c, bool second)
{
    vec parents = {0};
    for (uint32_t child = 0; child < c->n && !c->oom; child++) {
        vec *in = clean(c, child, false);
        parents.n = 0;
        for (uint32_t i = 0; i < in->n; i++)
            if (!vec_push(&parents, in->v[i]))
                c->oom = true;
        if (parents.n > 1)
            qsort_r(parents.v, parents.n, sizeof(uint32_t), by_outdeg, c);
        uint32_t merged = child;
        for (uint32_t i = 0; i < parents.n && !c->oom; i++)
            if (parents.v[i] != merged && mergeable(c, parents.v[i], merged, child, second))
                merge(c, parents.v[i], &merged);
    }
    kiln_free(parents.v);
}

static void mark_clusters_consistent(cgraph *c, bool second)
{
    vec ids = {0};
    for (uint32_t i = 0; i < c->n; i++) /* the clusters are the non-data-like nodes */
        if (!vec_push(&ids, i))
            c->oom = true;
    for (uint32_t i = ids.n; i > 1 && !c->oom; i--) {
        uint32_t cur = ids.v[i - 1], prev = ids.v[i - 2], merged = cur;
        if (mergeable(c, prev, merged, merged, second))
            merge(c, prev, &merged);
    }
    kiln_free(ids.v);
}

/* ---- GE's data-like rule ---------------------------------------------------- */

/*
 * GE (engine_partitioner.cc, GE_SEMANTICS_BUILD 2.1): a Constant, Const, any
 * Data-type node (Data, RefData, AippData) or var-like node (Variable,
 * VariableV2, VarHandleOp), with no inputs at all.  The op registry's
 * KILN_OP_DATA_LIKE flag says it for registered ops; GE's list covers the
 * op types no plugin registers.
 */
static bool is_data_like(kiln_graph *g, kiln_node_id n)
{
    static const char *const types[] = {"Const",    "Constant",   "Data",       "RefData",
                                        "AippData", "Variable",   "VariableV2", "VarHandleOp"};
    /* the inputs first: most nodes have one, and the type tests cost more */
    if (kiln_node_ctrl_in_count(g, n))
        return false;
    for (uint32_t i = 0; i < kiln_node_input_count(g, n); i++)
        if (kiln_node_input_peer(g, n, i).node)
            return false;
    bool hit = (kiln_node_op_flags(g, n) & KILN_OP_DATA_LIKE) != 0;
    const char *op = kiln_node_op_str(g, n);
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]) && !hit; i++)
        hit = strcmp(types[i], op) == 0;
    return hit;
}

/* ---- the pass ------------------------------------------------------------------ */

typedef struct part_inst {
    uint32_t graphs;  /* GE's T: graphs partitioned by this instance so far */
    const char *mode; /* option mode ("" = session option kiln.partition_mode) */
    const char *composite; /* option composite ("" = no composite engines) */
} part_inst;

static const kiln_option_def part_options[] = {
    {sizeof(kiln_option_def), KILN_OPT_STRING, "mode", "",
     "atomic (GE kAtomicEnginePartitioning), second (kSecondPartitioning: equal user "
     "stream labels merge) or composite (kCompositeEnginePartitioning: the composite level "
     "only); default: session option kiln.partition_mode, else atomic",
     0, 0},
    {sizeof(kiln_option_def), KILN_OPT_STRING, "composite", "",
     "composite engines, 'NAME:ENGINE+ENGINE,...': atomic mode partitions by composite "
     "engine first, then each composite partition by atomic engine; default: session option "
     "kiln.composite_engines, else none",
     0, 0},
};

/* ---- composite engines ---------------------------------------------------------- */

typedef struct comp_map {
    uint32_t n;
    kiln_sym atomic[64], comp[64];
} comp_map;

/* Parse 'NAME:ENGINE+ENGINE,...' into @p m; false (error set) when malformed. */
static bool comp_parse(kiln_graph *g, const char *spec, const char *what, comp_map *m,
                       kiln_error *err)
{
    m->n = 0;
    const char *p = spec;
    while (p && *p) {
        const char *end = strchr(p, ','), *colon = strchr(p, ':');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (!colon || colon >= p + len || colon == p || colon + 1 == p + len) {
            kiln_errorf(err, KILN_ERR_PARAM,
                        "%s '%s': group '%.*s' is not NAME:ENGINE+ENGINE", what, spec, (int)len, p);
            return false;
        }
        char name[256], eng[256];
        snprintf(name, sizeof(name), "%.*s", (int)(colon - p), p);
        kiln_sym cs = kiln_intern(g, name);
        const char *q = colon + 1, *qe = p + len;
        while (q < qe) {
            const char *plus = memchr(q, '+', (size_t)(qe - q));
            size_t el = plus ? (size_t)(plus - q) : (size_t)(qe - q);
            if (!el) {
                kiln_errorf(err, KILN_ERR_PARAM, "%s '%s': empty engine name in group %s", what,
                            spec, name);
                return false;
            }
            snprintf(eng, sizeof(eng), "%.*s", (int)el, q);
            kiln_sym as = kiln_intern(g, eng);
            for (uint32_t i = 0; i < m->n; i++)
                if (m->atomic[i] == as) {
                    kiln_errorf(err, KILN_ERR_PARAM,
                                "%s '%s': engine %s is in two composite engines (%s and %s)", what,
                                spec, eng, kiln_sym_str(g, m->comp[i]), name);
                    return false;
                }
            if (m->n == 64) {
                kiln_errorf(err, KILN_ERR_PARAM, "%s: more than 64 engines", what);
                return false;
            }
            m->atomic[m->n] = as;
            m->comp[m->n++] = cs;
            q += el + (plus ? 1 : 0);
            if (plus && q == qe) {
                kiln_errorf(err, KILN_ERR_PARAM, "%s '%s': empty engine name in group %s", what,
                            spec, name);
                return false;
            }
        }
        p = end ? end + 1 : NULL;
    }
    return true;
}

/* The composite engine of atomic engine @p e: itself when no group names it. */
static kiln_sym comp_of(const comp_map *m, kiln_sym e)
{
    for (uint32_t i = 0; i < m->n; i++)
        if (m->atomic[i] == e)
            return m->comp[i];
    return e;
}

static kiln_status part_create(const kiln_options *opts, kiln_error *err, void **inst)
{
    part_inst *p = kiln_alloc(sizeof(*p));
    if (!p)
        return kiln_errorf(err, KILN_ERR_NOMEM, "EnginePartitioner: out of memory");
    p->graphs = 0;
    p->mode = "";
    p->composite = "";
    kiln_options_get_string(opts, "mode", &p->mode);
    kiln_options_get_string(opts, "composite", &p->composite);
    *inst = p;
    return KILN_OK;
}

static void part_destroy(void *inst)
{
    kiln_free(inst);
}

/* Free the cluster graph's edges and merge state once the clusters are known
 * (the engines, labels, data flags and groups stay): the attribute writes that
 * follow reuse the memory. */
static void cg_release_edges(cgraph *c)
{
    for (uint32_t i = 0; c->out && c->in && i < c->n; i++) {
        if (c->out[i].owned)
            kiln_free(c->out[i].v);
        if (c->in[i].owned)
            kiln_free(c->in[i].v);
    }
    void **arrays[] = {(void **)&c->alias, (void **)&c->dirty,  (void **)&c->out,
                       (void **)&c->in,    (void **)&c->outdeg, (void **)&c->indeg,
                       (void **)&c->pool,  (void **)&c->set,    (void **)&c->home,
                       (void **)&c->stamp, (void **)&c->stack.v};
    for (size_t i = 0; i < sizeof(arrays) / sizeof(arrays[0]); i++) {
        kiln_free(*arrays[i]);
        *arrays[i] = NULL;
    }
    c->stack.n = c->stack.cap = 0;
    c->stack.owned = 0;
}

static void cg_free(cgraph *c)
{
    cg_release_edges(c); /* idempotent: the arrays it frees are NULL after */
    void *arrays[] = {c->group, c->engine, c->label, c->ulabel};
    for (size_t i = 0; i < sizeof(arrays) / sizeof(arrays[0]); i++)
        kiln_free(arrays[i]);
}

/* An array every element of which is written before it is read (no zeroing). */
static void *walloc(size_t n, size_t size, bool *oom)
{
    void *p = kiln_alloc(n ? n * size : 1);
    if (!p)
        *oom = true;
    return p;
}

static void *zalloc(size_t n, size_t size, bool *oom)
{
    void *p = kiln_alloc(n ? n * size : 1);
    if (!p)
        *oom = true;
    else
        memset(p, 0, n ? n * size : 1);
    return p;
}

/* A string attribute as a symbol.  Attribute strings are interned, so equal
 * values share a pointer: the last few pointers seen skip the re-interning. */
typedef struct sym_cache {
    const char *ptr[4];
    kiln_sym sym[4];
    uint32_t next;
    bool absent; /* the key was never interned: no node has it, no lookup */
} sym_cache;

static void sym_cache_init(sym_cache *sc, const kiln_graph *g, const char *key)
{
    memset(sc, 0, sizeof(*sc));
    sc->absent = kiln_sym_lookup(g, key) == 0;
}

static kiln_sym attr_sym(kiln_graph *g, const kiln_attrs *a, const char *key, sym_cache *sc)
{
    const char *s;
    if (sc->absent || !kiln_attrs_get_string(a, key, &s) || !s[0])
        return 0;
    for (int i = 0; i < 4; i++)
        if (sc->ptr[i] == s)
            return sc->sym[i];
    kiln_sym y = kiln_intern(g, s);
    sc->ptr[sc->next & 3] = s;
    sc->sym[sc->next++ & 3] = y;
    return y;
}

static kiln_pass_result fail(kiln_pass_ctx *ctx, cgraph *c, kiln_status st, const char *msg,
                             kiln_graph *g)
{
    kiln_errorf(kiln_pass_error(ctx), st, "graph %s: %s", kiln_graph_name(g),
                msg);
    cg_free(c);
    return KILN_PASS_FAILED;
}

/* pos of a data-like node: no cluster (see part_run) */
#define NO_CLUSTER UINT32_MAX

/* The cluster edges of the graph (@p nodes: cluster -> node; edges from
 * data-like producers left out): lists start as pool slices sized by degree. */
/* The sources of cluster @p i (node @p nd) appended to @p src, counted in
 * in[i].cap and their out[].cap (producers come first in topological order,
 * so their clusters are known); false on OOM. */
static bool cg_sources(cgraph *c, kiln_graph *g, kiln_node_id nd, uint32_t i, const uint32_t *pos,
                       vec *src)
{
    uint32_t before = src->n;
    for (uint32_t k = 0; k < kiln_node_input_count(g, nd); k++) {
        kiln_anchor p = kiln_node_input_peer(g, nd, k);
        if (p.node && pos[p.node] != NO_CLUSTER) {
            if (!vec_push(src, pos[p.node]))
                return false;
            c->out[pos[p.node]].cap++;
        }
    }
    for (uint32_t cur = kiln_ctrl_in_first(g, nd); cur; cur = kiln_ctrl_in_next(g, cur)) {
        uint32_t s = pos[kiln_ctrl_src(g, cur)];
        if (s == NO_CLUSTER)
            continue;
        if (!vec_push(src, s))
            return false;
        c->out[s].cap++;
    }
    c->in[i].cap = src->n - before;
    return true;
}

/* The cluster graph from the sources @p src of every cluster, in order, and
 * the list capacities cg_sources counted; frees @p src.  false on OOM. */
static bool cg_build(cgraph *c, vec *src)
{
    uint32_t n = c->n;
    /* the pool: the in-lists first (the sources, as collected), then the out-lists */
    size_t nedge = src->n;
    c->pool = kiln_alloc((2 * nedge + 1) * sizeof(uint32_t));
    if (c->pool && nedge)
        memcpy(c->pool, src->v, nedge * sizeof(uint32_t));
    if (src->owned)
        kiln_free(src->v);
    *src = (vec){0};
    if (!c->pool)
        return false;
    for (uint32_t i = 0, in_off = 0, out_off = (uint32_t)nedge; i < n; i++) {
        c->in[i].v = c->pool + in_off;
        in_off += c->in[i].cap;
        c->out[i].v = c->pool + out_off;
        out_off += c->out[i].cap;
    }
    /* cluster edges from every data and control producer, read from the in-list
     * slices themselves: edge_insert appends to in[i] at most where the reading is */
    for (uint32_t i = 0; i < n && !c->oom; i++) {
        const uint32_t *sv = c->in[i].v;
        uint32_t m = c->in[i].cap;
        for (uint32_t k = 0; k < m && !c->oom; k++)
            edge_insert(c, sv[k], i);
    }
    return !c->oom;
}

static bool cg_edges(cgraph *c, kiln_graph *g, const kiln_node_id *nodes, const uint32_t *pos)
{
    vec src = {0};
    for (uint32_t i = 0; i < c->n; i++)
        if (!cg_sources(c, g, nodes[i], i, pos, &src)) {
            if (src.owned)
                kiln_free(src.v);
            return false;
        }
    return cg_build(c, &src);
}

/* Back to one cluster per node and no edges (the atomic level after the composite one). */
static void cg_reset(cgraph *c)
{
    for (uint32_t i = 0; i < c->n; i++) {
        if (c->out[i].owned)
            kiln_free(c->out[i].v);
        if (c->in[i].owned)
            kiln_free(c->in[i].v);
        c->alias[i] = i;
    }
    memset(c->out, 0, (size_t)c->n * sizeof(vec));
    memset(c->in, 0, (size_t)c->n * sizeof(vec));
    kiln_free(c->pool);
    c->pool = NULL;
    memset(c->dirty, 0, c->n ? c->n : 1);
    memset(c->outdeg, 0, (size_t)c->n * sizeof(uint32_t));
    memset(c->indeg, 0, (size_t)c->n * sizeof(uint32_t));
    memset(c->home, 0xff, ((size_t)c->n + 1) * HOME * sizeof(uint32_t));
    memset(c->set, 0xff, (size_t)c->set_cap * sizeof(uint64_t));
    c->set_used = c->set_tomb = 0;
}

static kiln_pass_result part_run(void *inst, kiln_pass_ctx *ctx, kiln_graph *g)
{
    part_inst *pi = inst;
    const kiln_node_id *order = NULL;
    uint32_t n = 0;
    kiln_error *err = kiln_pass_error(ctx);
    if (kiln_graph_topo_order(g, &order, &n, err) != KILN_OK) {
        kiln_error_push(err, "graph %s", kiln_graph_name(g));
        return KILN_PASS_FAILED;
    }
    const char *mode = pi->mode, *what = "option mode";
    if (!mode || !mode[0]) {
        mode = kiln_pass_session_option(ctx, "kiln.partition_mode");
        what = "session option kiln.partition_mode";
    }
    bool second = mode && strcmp(mode, "second") == 0;
    bool composite_only = mode && strcmp(mode, "composite") == 0;
    if (mode && mode[0] && !second && !composite_only && strcmp(mode, "atomic") != 0) {
        kiln_errorf(err, KILN_ERR_PARAM, "%s is '%s' (expected atomic, second or composite)",
                    what, mode);
        return KILN_PASS_FAILED;
    }
    const char *cspec = pi->composite, *cwhat = "EnginePartitioner option composite";
    if (!cspec || !cspec[0]) {
        cspec = kiln_pass_session_option(ctx, "kiln.composite_engines");
        cwhat = "session option kiln.composite_engines";
    }
    comp_map cm;
    if (!comp_parse(g, second ? NULL : cspec, cwhat, &cm, err))
        return KILN_PASS_FAILED;
    if (composite_only && !cm.n) {
        kiln_errorf(err, KILN_ERR_PARAM,
                    "graph %s: mode composite needs composite engines (EnginePartitioner "
                    "option composite or session option kiln.composite_engines)",
                    kiln_graph_name(g));
        return KILN_PASS_FAILED;
    }
    const char *topo_mode = kiln_pass_session_option(ctx, "ge.topoSortingMode");
    bool stable = topo_mode && strcmp(topo_mode, "3") == 0;

    /*
     * Clusters are the non-data-like nodes only, numbered in topological order
     * (cluster index = position among them): a data-like node has no inputs,
     * so no path runs through it and it never merges (its engine is its own,
     * and no edge leads into it); it is a partition of its own, ranked 0.
     * Leaving the data-like nodes (a third of a model: the weights) and their
     * edges out of the cluster graph changes no merge and no second-path
     * answer: a child's in-degree then counts its non-data parents, and
     * second_path's "indeg <= 1" exit fires only where the walk it skips
     * could not reach the child either.
     */
    cgraph cg = {0}, *c = &cg;
    bool oom = false;
    uint32_t limit = kiln_graph_id_limit(g);
    /* pos: node -> cluster (NO_CLUSTER: data-like), read for the ordered nodes only */
    uint32_t *pos = walloc(limit, sizeof(uint32_t), &oom);
    /* the graph's cached order: attribute edits (all this pass makes) keep it valid */
    const kiln_node_id *nodes = order;
    uint8_t *tdata = zalloc(n, 1, &oom); /* by topological position: data-like */
    /* sized for every node, filled for the clusters (untouched pages cost nothing) */
    kiln_node_id *cnodes = walloc(n, sizeof(kiln_node_id), &oom); /* cluster -> node */
    c->engine = walloc(n, sizeof(kiln_sym), &oom);
    c->label = walloc(n, sizeof(kiln_sym), &oom);
    /* user stream labels matter in mode second only */
    c->ulabel = second ? walloc(n, sizeof(kiln_sym), &oom) : NULL;
    c->out = walloc(n, sizeof(vec), &oom); /* each cluster's zeroed as it is numbered */
    c->in = walloc(n, sizeof(vec), &oom);
    vec src = {0}; /* the clusters' sources, collected in the same walk */
    if (oom) {
        kiln_free(pos);
        kiln_free(tdata);
        kiln_free(cnodes);
        return fail(ctx, c, KILN_ERR_NOMEM, "out of memory", g);
    }
    /* interned as before (the data-like engine is no cluster's now): the
     * context's symbol numbering stays what it was */
    (void)kiln_intern(g, KP_ENGINE_DEFAULT_DATA);
    int64_t cleared = 0;
    /* a key never interned is on no node: its lookups are skipped (the loop
     * sets _user_stream_label only where a node has it already) */
    sym_cache sc_engine, sc_label, sc_ulabel;
    sym_cache_init(&sc_engine, g, KP_ATTR_ENGINE);
    sym_cache_init(&sc_label, g, KP_ATTR_STREAM_LABEL);
    sym_cache_init(&sc_ulabel, g, KP_ATTR_USER_STREAM_LABEL);
    uint32_t m = 0;
    for (uint32_t i = 0; i < n; i++) {
        kiln_node_id nd = nodes[i];
        const kiln_attrs *a = kiln_node_attrs(g, nd);
        if (is_data_like(g, nd)) {
            pos[nd] = NO_CLUSTER;
            tdata[i] = 1;
            const char *ul;
            if (!sc_ulabel.absent && kiln_attrs_get_string(a, KP_ATTR_USER_STREAM_LABEL, &ul) &&
                ul[0]) {
                kiln_attrs_set_string(kiln_node_attrs_mut(g, nd), KP_ATTR_USER_STREAM_LABEL, "");
                cleared++;
            }
            continue;
        }
        uint32_t j = m++;
        pos[nd] = j;
        cnodes[j] = nd;
        c->out[j] = c->in[j] = (vec){0};
        if (!oom && !cg_sources(c, g, nd, j, pos, &src))
            oom = true;
        /* a node EnginePlacer left unplaced (unsupported=warn), or made after
         * it ran: the frames of DynamicShapePartitioner (PartitionedCall,
         * the subgraphs' NetOutput) are GE-local, as EnginePlacer would say */
        c->engine[j] = attr_sym(g, a, KP_ATTR_ENGINE, &sc_engine);
        if (!c->engine[j])
            c->engine[j] = kiln_intern(g, kp_is_ge_local_op(kiln_node_op_str(g, nd))
                                              ? KP_GE_LOCAL
                                              : KP_UNPLACED);
        if (second)
            c->ulabel[j] = attr_sym(g, a, KP_ATTR_USER_STREAM_LABEL, &sc_ulabel);
        c->label[j] = attr_sym(g, a, KP_ATTR_STREAM_LABEL, &sc_label);
    }
    c->n = m;
    c->alias = walloc(m, sizeof(uint32_t), &oom);
    c->dirty = zalloc(m, 1, &oom);
    c->outdeg = zalloc(m, sizeof(uint32_t), &oom);
    c->indeg = zalloc(m, sizeof(uint32_t), &oom);
    c->stamp = zalloc(m, sizeof(uint32_t), &oom);
    c->set_cap = 1024;
    c->set = kiln_alloc((size_t)c->set_cap * sizeof(uint64_t));
    c->home = kiln_alloc(((size_t)m + 1) * HOME * sizeof(uint32_t));
    if (!c->set || !c->home)
        oom = true;
    if (oom) {
        if (src.owned)
            kiln_free(src.v);
        kiln_free(pos);
        kiln_free(tdata);
        kiln_free(cnodes);
        return fail(ctx, c, KILN_ERR_NOMEM, "out of memory", g);
    }
    for (uint32_t j = 0; j < m; j++)
        c->alias[j] = j;
    memset(c->home, 0xff, ((size_t)m + 1) * HOME * sizeof(uint32_t));
    memset(c->set, 0xff, (size_t)c->set_cap * sizeof(uint64_t));
    if (!cg_build(c, &src)) {
        kiln_free(pos);
        kiln_free(tdata);
        kiln_free(cnodes);
        return fail(ctx, c, KILN_ERR_NOMEM, "out of memory", g);
    }
    /* GE kCompositeEnginePartitioning first: clusters by composite engine; then
     * kAtomicEnginePartitioning inside each composite partition (group) */
    int64_t comp_parts = 0;
    kiln_sym *comp_eng = NULL; /* composite engine by cluster, when the atomic level follows */
    if (cm.n) {
        kiln_sym *atomic = zalloc(m, sizeof(kiln_sym), &oom);
        if (!oom)
            c->group = zalloc(m, sizeof(uint32_t), &oom);
        if (oom) {
            kiln_free(atomic);
            kiln_free(pos);
            kiln_free(tdata);
            kiln_free(cnodes);
            return fail(ctx, c, KILN_ERR_NOMEM, "out of memory", g);
        }
        for (uint32_t i = 0; i < m; i++) {
            atomic[i] = c->engine[i];
            c->engine[i] = comp_of(&cm, c->engine[i]);
        }
        uint32_t *group = c->group;
        c->group = NULL;
        if (stable)
            mark_clusters_consistent(c, second);
        else
            mark_clusters(c, second);
        for (uint32_t i = 0; i < m; i++) {
            group[i] = find(c, i);
            comp_parts += group[i] == i;
        }
        kiln_pass_stat_add(ctx, "composite_partitions", comp_parts);
        kiln_pass_stat_add(ctx, "composite_merges", c->merges);
        c->group = group;
        if (composite_only || c->oom) {
            kiln_free(atomic);
        } else {
            comp_eng = c->engine;
            c->engine = atomic;
            cg_reset(c);
            if (!cg_edges(c, g, cnodes, pos)) {
                kiln_free(comp_eng);
                kiln_free(pos);
                kiln_free(tdata);
                kiln_free(cnodes);
                return fail(ctx, c, KILN_ERR_NOMEM, "out of memory", g);
            }
        }
    }
    if (cm.n && composite_only)
        ; /* the composite level is the result */
    else if (stable)
        mark_clusters_consistent(c, second);
    else
        mark_clusters(c, second);
    kiln_free(cnodes);
    cnodes = NULL;
    if (c->oom) {
        kiln_free(pos);
        kiln_free(tdata);
        return fail(ctx, c, KILN_ERR_NOMEM, "out of memory", g);
    }

    /* partitions in order of first appearance (k), then ranks; a data-like
     * node is a partition of its own (k_rep NO_CLUSTER) */
    uint32_t *kof = pos; /* reuse: cluster representative -> k + 1 */
    memset(kof, 0, (size_t)m * sizeof(uint32_t)); /* indexed by cluster (< m <= limit) */
    uint32_t nk = 0, ndata = 0;
    uint32_t *k_rep = walloc(n + 1, sizeof(uint32_t), &oom);
    uint32_t *rank_of_k = walloc(n + 1, sizeof(uint32_t), &oom);
    uint32_t *node_k = walloc(n + 1, sizeof(uint32_t), &oom);
    if (oom) {
        kiln_free(k_rep);
        kiln_free(rank_of_k);
        kiln_free(node_k);
        kiln_free(pos);
        kiln_free(tdata);
        return fail(ctx, c, KILN_ERR_NOMEM, "out of memory", g);
    }
    for (uint32_t i = 0, j = 0; i < n; i++) {
        if (tdata[i]) {
            k_rep[nk] = NO_CLUSTER;
            node_k[i] = nk++;
            ndata++;
            continue;
        }
        uint32_t r = find(c, j++);
        if (!kof[r]) {
            kof[r] = ++nk;
            k_rep[nk - 1] = r;
        }
        node_k[i] = kof[r] - 1;
    }
    cg_release_edges(c);
    kiln_free(pos);
    pos = NULL;
    uint32_t base = ndata ? 1 : 0, nranks = base;
    for (uint32_t k = 0; k < nk; k++)
        rank_of_k[k] = k_rep[k] == NO_CLUSTER ? 0 : nranks++;
    /* the record: sub-graph numbers (names are formed from them on demand, so
     * that a million partitions cost no interned strings), engines and stream
     * labels by rank */
    int64_t *subs = zalloc(nranks + 1, sizeof(int64_t), &oom);
    int64_t *cgroups = cm.n ? zalloc(nranks + 1, sizeof(int64_t), &oom) : NULL;
    const char **cengines = cm.n ? zalloc(nranks + 1, sizeof(char *), &oom) : NULL;
    uint32_t *gid = cm.n ? zalloc(n + 1, sizeof(uint32_t), &oom) : NULL;
    const char **engines = zalloc(nranks + 1, sizeof(char *), &oom);
    const char **labels = zalloc(nranks + 1, sizeof(char *), &oom);
    kiln_pass_result res = KILN_PASS_CHANGED;
    if (!oom) {
        if (ndata) {
            subs[0] = -1;
            engines[0] = KP_INPUT_NODES_ENGINE;
            labels[0] = "";
        }
        for (uint32_t k = 0; k < nk; k++) {
            uint32_t r = rank_of_k[k];
            if (k_rep[k] == NO_CLUSTER)
                continue;
            subs[r] = k;
            engines[r] = kiln_sym_str(g, c->engine[k_rep[k]]);
            labels[r] = NULL; /* the first node's, below */
        }
        /* the composite level: each rank's composite partition (numbered in rank
         * order) and composite engine */
        for (uint32_t r = 0, ng = 0; cm.n && r < nranks; r++) {
            if (r < base) {
                cgroups[r] = -1;
                cengines[r] = "";
                continue;
            }
            uint32_t rep = k_rep[subs[r]], grp = c->group[rep];
            if (!gid[grp])
                gid[grp] = ++ng;
            cgroups[r] = gid[grp] - 1;
            cengines[r] = kiln_sym_str(g, comp_eng ? comp_eng[grp] : c->engine[grp]);
        }
        for (uint32_t i = 0, j = 0; i < n; i++) {
            if (tdata[i])
                continue; /* rank 0, labelled "" */
            uint32_t r = rank_of_k[node_k[i]];
            if (!labels[r])
                labels[r] = kiln_sym_str(g, c->label[j]);
            j++;
        }
        kiln_attrs *ga = kiln_graph_attrs(g);
        oom = !ga ||
              kiln_attrs_set_int(ga, KILN_PART_SEQ, pi->graphs) != KILN_OK ||
              kiln_attrs_set_list_int(ga, KILN_PART_SUBGRAPHS, subs, nranks) != KILN_OK ||
              kiln_attrs_set_list_string(ga, KILN_PART_ENGINES, engines, nranks) != KILN_OK ||
              kiln_attrs_set_list_string(ga, KILN_PART_LABELS, labels, nranks) != KILN_OK ||
              (cm.n && (kiln_attrs_set_list_int(ga, KP_PART_COMPOSITE_GROUPS, cgroups, nranks) !=
                            KILN_OK ||
                        kiln_attrs_set_list_string(ga, KP_PART_COMPOSITE_ENGINES, cengines,
                                                   nranks) != KILN_OK));
        for (uint32_t i = 0; i < n && !oom; i++) {
            kiln_node_id nd = nodes[i];
            uint32_t r = rank_of_k[node_k[i]];
            kiln_attrs *na = kiln_node_attrs_mut(g, nd);
            if (!na || kiln_attrs_set_int(na, KILN_PART_NODE, r) != KILN_OK)
                oom = true;
            /* GE MergeAllSubGraph: a node without _stream_label inherits its partition's */
            else if (r >= base && labels[r][0] && !kiln_attrs_has(na, KP_ATTR_STREAM_LABEL) &&
                     kiln_attrs_set_string(na, KP_ATTR_STREAM_LABEL, labels[r]) != KILN_OK)
                oom = true;
        }
    }
    if (oom) {
        kiln_errorf(err, KILN_ERR_NOMEM, "graph %s: out of memory",
                    kiln_graph_name(g));
        res = KILN_PASS_FAILED;
    } else {
        kiln_pass_stat_add(ctx, "partitions", nranks);
        kiln_pass_stat_add(ctx, "merges", c->merges);
        kiln_pass_stat_add(ctx, "second_path_checks", c->checks);
        kiln_pass_stat_add(ctx, "second_paths_found", c->found);
        kiln_pass_stat_add(ctx, "user_stream_labels_cleared", cleared);
        pi->graphs++;
    }
    kiln_free(subs);
    kiln_free(cgroups);
    kiln_free(cengines);
    kiln_free(gid);
    kiln_free(comp_eng);
    kiln_free(engines);
    kiln_free(labels);
    kiln_free(k_rep);
    kiln_free(rank_of_k);
    kiln_free(node_k);
    kiln_free(pos);
    kiln_free(tdata);
    cg_free(c);
    return res;
}

const kiln_pass_desc kp_engine_partitioner = {
    .struct_size = sizeof(kiln_pass_desc),
    .kind = KILN_PASS_KIND_GRAPH,
    .name = "EnginePartitioner",
    .summary = "GE's engine cluster partitioning: ranked partitions by engine and stream label",
    .flags = KILN_PASS_PRESERVES_CFG,
    .option_count = 2,
    .options = part_options,
    .create = part_create,
    .destroy = part_destroy,
    .run_graph = part_run,
};

/*
 * symtab.c - the memory symbol table (GE GetRefMapping); semantics, walk
 * order and layout are described in symtab.h.
 *
 * Build, in four linear steps over A anchor slots (graph g's input record r
 * is slot in_base[g] + r, its output slot o is out_base[g] + o; garbage
 * records left by arity changes are slots no walk visits and are never
 * reported):
 *   1. union-find over the slots, one union per rule (union by rank, path
 *      halving: near-constant amortised time per operation);
 *   2. a walk in GE order numbers each class by its first anchor and counts
 *      its members;
 *   3. prefix sums give the CSR offsets;
 *   4. a second walk fills each symbol's slice in walk order.
 * The union-find arrays are freed after the build; the table keeps the slot
 * -> symbol array, the CSR offsets and the anchor records.
 */
#include "symtab.h"

typedef struct gref {
    const kiln_graph *g;
    uint32_t idx; /* position in graphs[] */
} gref;

struct kiln_symtab {
    kiln_graph *root;
    uint32_t ngraphs;
    kiln_graph **graphs;  /* walk order: root, then root->subgraphs[] */
    uint64_t *muts;       /* g->sym_mutation of each graph at build time */
    gref *sorted;         /* graph pointers sorted, for pointer -> index */
    uint32_t *in_base;    /* per graph: slot of input record 0 */
    uint32_t *out_base;   /* per graph: slot of output slot 0 */
    uint32_t nslots;
    uint32_t *sym_of;     /* per slot: symbol, KILN_SYMTAB_NONE for garbage */
    uint32_t nsyms;
    uint32_t *sym_off;    /* nsyms + 1 CSR offsets into anchors */
    kiln_symtab_anchor *anchors;
};

/* Interned op and attribute names used by the rules (0 = never interned: no
 * node has that op, no attribute set has that key, so the rule is skipped
 * without a per-node lookup). */
typedef struct names {
    kiln_sym merge, stream_merge, reshape, netoutput, data;
    kiln_sym while_, while2, stateless_while, cond;
    kiln_sym reuse_input, nopad, ref_var;
} names;

void kiln__symtab_free(kiln_symtab *st)
{
    if (!st)
        return;
    kiln__free(st->graphs);
    kiln__free(st->muts);
    kiln__free(st->sorted);
    kiln__free(st->in_base);
    kiln__free(st->out_base);
    kiln__free(st->sym_of);
    kiln__free(st->sym_off);
    kiln__free(st->anchors);
    kiln__free(st);
}

/* ---- graph index -------------------------------------------------------- */

static int cmp_graph_ptr(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)((const gref *)a)->g, y = (uintptr_t)((const gref *)b)->g;
    return x < y ? -1 : x > y;
}

static uint32_t graph_index(const kiln_symtab *st, const kiln_graph *g)
{
    if (g == st->root)
        return 0;
    uint32_t lo = 0, hi = st->ngraphs;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if ((uintptr_t)st->sorted[mid].g < (uintptr_t)g)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < st->ngraphs && st->sorted[lo].g == g ? st->sorted[lo].idx : UINT32_MAX;
}

/* ---- union-find ----------------------------------------------------------- */

typedef struct uf {
    uint32_t *parent;
    uint8_t *rank;
} uf;

static inline uint32_t uf_find(uf *u, uint32_t x)
{
    while (u->parent[x] != x) {
        u->parent[x] = u->parent[u->parent[x]];
        x = u->parent[x];
    }
    return x;
}

static inline void uf_union(uf *u, uint32_t a, uint32_t b)
{
    a = uf_find(u, a);
    b = uf_find(u, b);
    if (a == b)
        return;
    if (u->rank[a] < u->rank[b]) {
        uint32_t t = a;
        a = b;
        b = t;
    }
    u->parent[b] = a;
    if (u->rank[a] == u->rank[b])
        u->rank[a]++;
}

/* ---- rules ---------------------------------------------------------------- */

static inline uint32_t in_slot(const kiln_symtab *st, uint32_t gi, kiln_node_id n, uint32_t i)
{
    return st->in_base[gi] + st->graphs[gi]->nodes[n].in_off + i;
}
static inline uint32_t out_slot(const kiln_symtab *st, uint32_t gi, kiln_node_id n, uint32_t o)
{
    return st->out_base[gi] + st->graphs[gi]->nodes[n].out_off + o;
}

static bool attr_true(const kiln_attrs *a, const char *key)
{
    bool b = false;
    return a && kiln_attrs_get_bool(a, key, &b) && b;
}

/* Role of subgraph @p g under its parent node (0 if not found). */
static kiln_sym sub_role(const kiln_graph *g)
{
    const kowner *pc = kiln__owner(g->parent, g->parent_node);
    for (uint32_t i = 0; pc && i < pc->nsub; i++)
        if (pc->subs[i].graph == g)
            return pc->subs[i].role;
    return 0;
}

/* Input index an output refs (GE IsRefFromInput, first rule wins), or -1. */
static int64_t ref_input(const kiln_graph *g, const names *nm, kiln_node_id n, uint32_t o,
                         bool passthrough)
{
    kiln_sym op = g->nodes[n].op;
    if (passthrough)
        return o;
    if ((op == nm->merge || op == nm->reshape) && o == 0)
        return 0;
    const kiln_tensor_desc *d = g->out[g->nodes[n].out_off + o];
    if (d->ref_input >= 0)
        return d->ref_input;
    const kiln_attrs *a = kiln_desc_attrs(d);
    int64_t k;
    if (nm->reuse_input && attr_true(a, "reuse_input") &&
        kiln_attrs_get_int(a, "reuse_input_index", &k))
        return k;
    return -1;
}

/*
 * The input output @p o of a While imported from an ONNX Loop (attr
 * `_onnx_op` "Loop", docs/onnx.md) passes through: inputs [M, cond, v_1..v_N,
 * captures], outputs [cond, v_1..v_N, scans]; the condition is input 1, v_i
 * input 1 + i, a scan output none (-1).
 */
static int64_t onnx_loop_ref(const kiln_attrs *a, uint32_t o)
{
    int64_t carried = 0;
    kiln_attrs_get_int(a, "_onnx_loop_carried", &carried);
    return o == 0 ? 1 : (int64_t)o <= carried ? (int64_t)o + 1 : -1;
}

/* Node named @p name in @p g, else in the root; graph index in *gi. */
static kiln_node_id find_var(const kiln_symtab *st, uint32_t gi, const char *name,
                             uint32_t *vgi)
{
    kiln_node_id v = kiln_graph_find_node(st->graphs[gi], name);
    *vgi = gi;
    if (!v && gi != 0) {
        v = kiln_graph_find_node(st->root, name);
        *vgi = 0;
    }
    return v;
}

static void node_unions(const kiln_symtab *st, uf *u, const names *nm, uint32_t gi,
                        uint32_t pgi, kiln_node_id n)
{
    const kiln_graph *g = st->graphs[gi];
    const knode *k = &g->nodes[n];
    const kiln_attrs *na = g->cold[n].attrs;
    kiln_sym op = k->op;
    bool sub = g->parent != NULL;

    /* producer -> consumer links are made up front by link_consumers() */
    if ((op == nm->merge || op == nm->stream_merge) && k->nout > 0) {
        for (uint32_t i = 0; i < k->nin; i++)
            if (g->in[k->in_off + i].src)
                uf_union(u, in_slot(st, gi, n, i), out_slot(st, gi, n, 0));
    }
    bool passthrough = op == nm->netoutput || op == nm->while_ || op == nm->while2 ||
                       op == nm->stateless_while;
    int64_t pidx;
    if (sub && op == nm->data && na && kiln_attrs_get_int(na, "_parent_node_index", &pidx)) {
        const kiln_graph *p = g->parent;
        kiln_node_id pn = g->parent_node;
        if (pidx >= 0 && (uint64_t)pidx < p->nodes[pn].nin) {
            uint32_t ps = in_slot(st, pgi, pn, (uint32_t)pidx);
            for (uint32_t o = 0; o < k->nout; o++)
                uf_union(u, out_slot(st, gi, n, o), ps);
            if (k->nin)
                uf_union(u, in_slot(st, gi, n, 0), ps);
        }
        passthrough = true; /* GE: subgraph inputs are pass-through */
    }
    if (sub && op == nm->netoutput) {
        const kiln_graph *p = g->parent;
        kiln_node_id pn = g->parent_node;
        kiln_sym pop = p->nodes[pn].op;
        bool is_cond = (pop == nm->while_ || pop == nm->while2 || pop == nm->stateless_while) &&
                       sub_role(g) == nm->cond;
        for (uint32_t i = 0; i < k->nin; i++) {
            const kiln_tensor_desc *d = g->in_desc ? g->in_desc[k->in_off + i] : NULL;
            int64_t j = is_cond ? -1 : (int64_t)i;
            if (d && kiln_attrs_get_int(kiln_desc_attrs(d), "_parent_node_index", &pidx))
                j = pidx;
            if (j >= 0 && (uint64_t)j < p->nodes[pn].nout)
                uf_union(u, in_slot(st, gi, n, i), out_slot(st, pgi, pn, (uint32_t)j));
        }
    }
    bool nopad = nm->nopad && attr_true(na, "_no_padding_continuous_output");
    const char *onnx_op = NULL;
    bool onnx_loop = op == nm->while_ && na && kiln_attrs_get_string(na, "_onnx_op", &onnx_op) &&
                     strcmp(onnx_op, "Loop") == 0;
    for (uint32_t o = 0; o < k->nout; o++) {
        uint32_t os = out_slot(st, gi, n, o);
        int64_t ri = onnx_loop ? onnx_loop_ref(na, o) : ref_input(g, nm, n, o, passthrough);
        if (ri >= 0 && (uint64_t)ri < k->nin)
            uf_union(u, os, in_slot(st, gi, n, (uint32_t)ri));
        if (nopad && k->nin)
            uf_union(u, os, in_slot(st, gi, n, 0));
        const char *var;
        if (nm->ref_var && kiln_attrs_get_string(kiln_desc_attrs(g->out[k->out_off + o]),
                                                 "ref_var_src_var_name", &var)) {
            uint32_t vgi;
            kiln_node_id v = find_var(st, gi, var, &vgi);
            if (v && st->graphs[vgi]->nodes[v].nout)
                uf_union(u, os, out_slot(st, vgi, v, 0));
        }
    }
}

/*
 * The most common rule, an input anchor joins its producer's output, as one
 * sequential scan of the input records: each input slot is still a singleton
 * and has exactly one producer, so it is linked straight under the producer's
 * output slot without two finds.  (Leaf attachment keeps the forest valid;
 * path halving in uf_find keeps the later finds short.)
 */
static void link_consumers(const kiln_symtab *st, uf *u, uint32_t gi)
{
    const kiln_graph *g = st->graphs[gi];
    for (uint32_t r = 1; r < g->in_len; r++) {
        const kuse *e = &g->in[r];
        if (e->src)
            u->parent[st->in_base[gi] + r] = out_slot(st, gi, e->src, e->src_idx);
    }
}

/* ---- walk ----------------------------------------------------------------- */

/* Calls visit(slot, gi, n, index, is_output) for every anchor in walk order. */
#define WALK(st, VISIT)                                                                    \
    for (uint32_t gi = 0; gi < (st)->ngraphs; gi++) {                                     \
        kiln_graph *wg = (st)->graphs[gi];                                                \
        const kiln_node_id *ord = wg->analyses ? wg->analyses->order : NULL;              \
        uint32_t cnt = ord ? wg->analyses->norder : wg->node_limit;                       \
        for (uint32_t w = 0; w < cnt; w++) {                                              \
            kiln_node_id n = ord ? ord[w] : w;                                            \
            if (!kiln__live(wg, n))                                                       \
                continue;                                                                 \
            const knode *wk = &wg->nodes[n];                                              \
            for (uint32_t i = 0; i < wk->nin; i++)                                        \
                VISIT(st->in_base[gi] + wk->in_off + i, gi, n, i, 0);                     \
            for (uint32_t o = 0; o < wk->nout; o++)                                       \
                VISIT(st->out_base[gi] + wk->out_off + o, gi, n, o, 1);                   \
        }                                                                                 \
    }

static kiln_status build(kiln_graph *root, kiln_symtab *st, kiln_error *err)
{
    names nm = {
        .merge = kiln_sym_lookup(root, "Merge"),
        .stream_merge = kiln_sym_lookup(root, "StreamMerge"),
        .reshape = kiln_sym_lookup(root, "Reshape"),
        .netoutput = kiln_sym_lookup(root, "NetOutput"),
        .data = kiln_sym_lookup(root, "Data"),
        .while_ = kiln_sym_lookup(root, "While"),
        .while2 = kiln_sym_lookup(root, "_While"),
        .stateless_while = kiln_sym_lookup(root, "StatelessWhile"),
        .cond = kiln_sym_lookup(root, "cond"),
        .reuse_input = kiln_sym_lookup(root, "reuse_input"),
        .nopad = kiln_sym_lookup(root, "_no_padding_continuous_output"),
        .ref_var = kiln_sym_lookup(root, "ref_var_src_var_name"),
    };
    uint32_t ng = st->ngraphs;
    uint64_t total = 0;
    for (uint32_t gi = 0; gi < ng; gi++) {
        kiln_graph *g = st->graphs[gi];
        kiln_status ts = kiln__topo_ensure(g, NULL);
        if (ts == KILN_ERR_NOMEM)
            return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory building symbols");
        if (ts != KILN_OK && g->analyses) /* cyclic: walk in id order */
            kiln__topo_free(g->analyses);
        st->in_base[gi] = (uint32_t)total;
        total += g->in_len;
        st->out_base[gi] = (uint32_t)total;
        total += g->out_len;
        if (total >= UINT32_MAX)
            return kiln_errorf(err, KILN_ERR_LIMIT, "too many anchors for the symbol table");
    }
    st->nslots = (uint32_t)total;
    uf u = {kiln__malloc(total * sizeof(uint32_t)), kiln__calloc(total, 1)};
    st->sym_of = kiln__malloc(total * sizeof(uint32_t));
    uint32_t *cursor = NULL;
    kiln_status rc = KILN_OK;
    if (!u.parent || !u.rank || !st->sym_of)
        goto nomem;
    for (uint32_t s = 0; s < total; s++) {
        u.parent[s] = s;
        st->sym_of[s] = KILN_SYMTAB_NONE;
    }
    for (uint32_t gi = 0; gi < ng; gi++)
        link_consumers(st, &u, gi);
    for (uint32_t gi = 0; gi < ng; gi++) {
        const kiln_graph *g = st->graphs[gi];
        uint32_t pgi = g->parent ? graph_index(st, g->parent) : 0;
        for (kiln_node_id n = 1; n < g->node_limit; n++)
            if (kiln__live(g, n))
                node_unions(st, &u, &nm, gi, pgi, n);
    }
    /* Step 2: number classes by first anchor; sym_of[rep] holds the class id
     * until the walk reaches the slot itself, which then gets the same id. */
    uint32_t nsyms = 0;
#define NUMBER(slot, gi_, n_, i_, out_)                 \
    do {                                                \
        uint32_t r_ = uf_find(&u, (slot));              \
        if (st->sym_of[r_] == KILN_SYMTAB_NONE)         \
            st->sym_of[r_] = nsyms++;                   \
        st->sym_of[(slot)] = st->sym_of[r_];            \
    } while (0)
    WALK(st, NUMBER)
#undef NUMBER
    kiln__free(u.parent);
    kiln__free(u.rank);
    u.parent = NULL;
    u.rank = NULL;
    /* Step 3: CSR offsets. */
    st->nsyms = nsyms;
    st->sym_off = kiln__calloc((size_t)nsyms + 1, sizeof(uint32_t));
    cursor = kiln__malloc(((size_t)nsyms + 1) * sizeof(uint32_t));
    if (!st->sym_off || !cursor)
        goto nomem;
#define COUNT(slot, gi_, n_, i_, out_) st->sym_off[st->sym_of[(slot)] + 1]++;
    WALK(st, COUNT)
#undef COUNT
    for (uint32_t s = 0; s < nsyms; s++) {
        st->sym_off[s + 1] += st->sym_off[s];
        cursor[s] = st->sym_off[s];
    }
    st->anchors = kiln__malloc(((size_t)st->sym_off[nsyms] + 1) * sizeof(kiln_symtab_anchor));
    if (!st->anchors)
        goto nomem;
    /* Step 4: fill in walk order. */
#define FILL(slot, gi_, n_, i_, out_)                                              \
    do {                                                                           \
        kiln_symtab_anchor *a_ = &st->anchors[cursor[st->sym_of[(slot)]]++];       \
        a_->graph = (gi_);                                                         \
        a_->node = (n_);                                                           \
        a_->index = (i_);                                                          \
        a_->is_output = (out_);                                                    \
    } while (0)
    WALK(st, FILL)
#undef FILL
    goto done;
nomem:
    rc = kiln_errorf(err, KILN_ERR_NOMEM, "out of memory building symbols");
done:
    kiln__free(u.parent);
    kiln__free(u.rank);
    kiln__free(cursor);
    return rc;
}

/* ---- cache ---------------------------------------------------------------- */

static bool fresh(const kiln_symtab *st, const kiln_graph *root)
{
    if (st->ngraphs != root->nsubgraphs + 1 || st->muts[0] != root->sym_mutation)
        return false;
    for (uint32_t i = 0; i < root->nsubgraphs; i++)
        if (st->graphs[i + 1] != root->subgraphs[i] ||
            st->muts[i + 1] != root->subgraphs[i]->sym_mutation)
            return false;
    return true;
}

kiln_status kiln_symtab_get(kiln_graph *g, const kiln_symtab **out, kiln_error *err)
{
    kiln_graph *root = g->root;
    struct kiln_analysis_cache *c = kiln__analyses(root);
    *out = NULL;
    if (!c)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory building symbols");
    if (c->symtab && fresh(c->symtab, root)) {
        *out = c->symtab;
        return KILN_OK;
    }
    kiln__symtab_free(c->symtab);
    c->symtab = NULL;
    kiln_symtab *st = kiln__calloc(1, sizeof(*st));
    uint32_t ng = root->nsubgraphs + 1;
    if (!st)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory building symbols");
    st->root = root;
    st->ngraphs = ng;
    st->graphs = kiln__malloc(ng * sizeof(*st->graphs));
    st->muts = kiln__malloc(ng * sizeof(*st->muts));
    st->sorted = kiln__malloc(ng * sizeof(*st->sorted));
    st->in_base = kiln__malloc(ng * sizeof(uint32_t));
    st->out_base = kiln__malloc(ng * sizeof(uint32_t));
    if (!st->graphs || !st->muts || !st->sorted || !st->in_base ||
        !st->out_base) {
        kiln__symtab_free(st);
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory building symbols");
    }
    st->graphs[0] = root;
    for (uint32_t i = 0; i < root->nsubgraphs; i++)
        st->graphs[i + 1] = root->subgraphs[i];
    for (uint32_t i = 0; i < ng; i++) {
        st->muts[i] = st->graphs[i]->sym_mutation;
        st->sorted[i].g = st->graphs[i];
        st->sorted[i].idx = i;
    }
    qsort(st->sorted, ng, sizeof(*st->sorted), cmp_graph_ptr);
    kiln_status rc = build(root, st, err);
    if (rc != KILN_OK) {
        kiln__symtab_free(st);
        return rc;
    }
    c->symtab = st;
    *out = st;
    return KILN_OK;
}

/* ---- queries -------------------------------------------------------------- */

uint32_t kiln_symtab_count(const kiln_symtab *st)
{
    return st->nsyms;
}

uint32_t kiln_symtab_anchor_total(const kiln_symtab *st)
{
    return st->sym_off[st->nsyms];
}

uint32_t kiln_symtab_symbol(const kiln_symtab *st, const kiln_graph *g, kiln_node_id n,
                            uint32_t index, bool is_output)
{
    uint32_t gi = graph_index(st, g);
    if (gi == UINT32_MAX || !kiln__live(g, n))
        return KILN_SYMTAB_NONE;
    const knode *k = &g->nodes[n];
    if (is_output)
        return index < k->nout ? st->sym_of[st->out_base[gi] + k->out_off + index]
                               : KILN_SYMTAB_NONE;
    return index < k->nin ? st->sym_of[st->in_base[gi] + k->in_off + index] : KILN_SYMTAB_NONE;
}

const kiln_symtab_anchor *kiln_symtab_anchors(const kiln_symtab *st, uint32_t sym,
                                              uint32_t *count)
{
    if (sym >= st->nsyms) {
        if (count)
            *count = 0;
        return NULL;
    }
    if (count)
        *count = st->sym_off[sym + 1] - st->sym_off[sym];
    return &st->anchors[st->sym_off[sym]];
}

kiln_graph *kiln_symtab_graph(const kiln_symtab *st, uint32_t i)
{
    return i < st->ngraphs ? st->graphs[i] : NULL;
}

size_t kiln_symtab_anchor_key(const kiln_symtab *st, const kiln_symtab_anchor *a, char *buf,
                              size_t size)
{
    const kiln_graph *g = kiln_symtab_graph(st, a->graph);
    int len = snprintf(buf, size, "%s_%s_%u", g ? kiln_node_name_str(g, a->node) : "?",
                       a->is_output ? "out" : "in", (unsigned)a->index);
    return len < 0 ? 0 : (size_t)len;
}

size_t kiln_symtab_symbol_name(const kiln_symtab *st, uint32_t sym, char *buf, size_t size)
{
    uint32_t cnt;
    const kiln_symtab_anchor *a = kiln_symtab_anchors(st, sym, &cnt);
    if (!a || !cnt) {
        if (size)
            buf[0] = '\0';
        return 0;
    }
    return kiln_symtab_anchor_key(st, a, buf, size);
}

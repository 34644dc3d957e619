/*
 * graph.c - the graph IR: graph lifetime, nodes, the name index and data
 * edges.  Control edges are in graph_ctrl.c, descriptors in graph_desc.c,
 * subgraphs in graph_subgraph.c, GE's edits in graph_edit.c.  Layout and
 * invariants in graph_int.h.
 *
 * Complexity: add node O(1) amortised; add/remove data or control edge O(1)
 * (control add checks for duplicates in O(min degree)); remove node
 * O(degree); find by name O(1) expected.  Every edit bumps g->mutation;
 * edits of edges or nodes also bump g->struct_mutation.
 *
 * OOM inside an edit sets the sticky g->oom flag and returns 0 / an error;
 * the pass manager checks the flag after each pass.
 */
#include "graph_int.h"
#include "ctx.h"
#include "analysis.h"

#define NAME_TOMB KILN_NAME_TOMB

/* ---- context strings ---------------------------------------------------- */

kiln_sym kiln_intern(kiln_graph *g, const char *str)
{
    kiln_sym s = kiln__intern_cached(&g->ctx->strings, str);
    if (!s && str[0])
        g->oom = true;
    return s;
}

kiln_sym kiln_sym_lookup(const kiln_graph *g, const char *str)
{
    return kiln__intern_find_cached(&g->ctx->strings, str);
}

const char *kiln_sym_str(const kiln_graph *g, kiln_sym s)
{
    return kiln__intern_str(&g->ctx->strings, s);
}

/* ---- graph lifetime ----------------------------------------------------- */

/*
 * The dense arrays grow in parallel groups: nodes[] with cold[], in[] with
 * in_desc[] (when present, new entries NULL), out[] with out_head[].  Growth
 * doubles (kiln__grow_cap); a reservation (@p exact) sizes to @p need.  If
 * the second array of a group cannot grow, the first keeps its larger block
 * and the recorded capacity stays the old one: harmless.
 */
static uint32_t new_cap(uint32_t cap, uint32_t need, bool exact)
{
    return exact ? need : kiln__grow_cap(cap, need);
}

static bool grow_nodes(kiln_graph *g, uint32_t need, bool exact)
{
    if (need <= g->node_cap)
        return true;
    uint32_t cap = new_cap(g->node_cap, need, exact);
    knode *n = kiln__realloc(g->nodes, (size_t)cap * sizeof(*n));
    if (!n)
        return false;
    g->nodes = n;
    knode_cold *c = kiln__realloc(g->cold, (size_t)cap * sizeof(*c));
    if (!c)
        return false;
    g->cold = c;
    g->node_cap = cap;
    return true;
}

static bool grow_in(kiln_graph *g, uint32_t need, bool exact)
{
    if (need <= g->in_cap)
        return true;
    uint32_t cap = new_cap(g->in_cap, need, exact);
    kuse *in = kiln__realloc(g->in, (size_t)cap * sizeof(*in));
    if (!in)
        return false;
    g->in = in;
    if (g->in_desc) {
        kiln_tensor_desc **d = kiln__realloc(g->in_desc, (size_t)cap * sizeof(*d));
        if (!d)
            return false;
        memset(d + g->in_cap, 0, (size_t)(cap - g->in_cap) * sizeof(*d));
        g->in_desc = d;
    }
    g->in_cap = cap;
    return true;
}

static bool grow_out(kiln_graph *g, uint32_t need, bool exact)
{
    if (need <= g->out_cap)
        return true;
    uint32_t cap = new_cap(g->out_cap, need, exact);
    kiln_tensor_desc **o = kiln__realloc(g->out, (size_t)cap * sizeof(*o));
    if (!o)
        return false;
    g->out = o;
    uint32_t *h = kiln__realloc(g->out_head, (size_t)cap * sizeof(*h));
    if (!h)
        return false;
    g->out_head = h;
    g->out_cap = cap;
    return true;
}

kiln_graph *kiln__graph_new(kiln_ctx *ctx, const char *name)
{
    kiln_graph *g = kiln__calloc(1, sizeof(*g));
    if (!g)
        return NULL;
    g->ctx = ctx;
    g->root = g;
    g->depth = 1;
    kiln__arena_init(&g->arena);
    g->name = kiln__intern(&ctx->strings, name, strlen(name));
    /* id 0 and record 0 are reserved as "none" */
    /* small first arrays: a partitioned graph is thousands of graphs of a few
     * nodes each (they grow geometrically) */
    if ((name[0] && !g->name) || !grow_nodes(g, 8, false) || !grow_in(g, 8, false) ||
        !grow_out(g, 8, false)) {
        kiln__free(g->nodes);
        kiln__free(g->in);
        kiln__free(g->out);
        kiln__free(g->out_head);
        kiln__free(g->cold);
        kiln__free(g);
        return NULL;
    }
    memset(&g->nodes[0], 0, sizeof(knode));
    g->nodes[0].flags = KILN_NODEF_DEAD;
    memset(&g->cold[0], 0, sizeof(knode_cold));
    memset(&g->in[0], 0, sizeof(kuse));
    g->out[0] = NULL;
    g->out_head[0] = 0;
    g->node_limit = 1;
    g->in_len = 1;
    g->out_len = 1;
    g->ctrl_len = 1;
    return g;
}

kiln_graph *kiln_graph_create(kiln_ctx *ctx, const char *name)
{
    return kiln__graph_new(ctx, name ? name : "");
}

void kiln__graph_free_one(kiln_graph *g)
{
    if (g->analyses)
        kiln__analyses_free(g);
    kiln__free(g->nodes);
    kiln__free(g->cold);
    kiln__free(g->in);
    kiln__free(g->in_desc);
    kiln__free(g->out);
    kiln__free(g->out_head);
    kiln__free(g->ctrl);
    kiln__free(g->name_slots);
    kiln__free(g->owners);
    kiln__free(g->subgraphs);
    kiln__free(g->sub_slots);
    kiln__attrs_free_all(g);
    kiln__arena_free(&g->arena);
    for (uint32_t i = 0; i < g->nshared; i++)
        if (atomic_fetch_sub_explicit(&g->shared[i]->refs, 1, memory_order_acq_rel) == 1)
            kiln__free(g->shared[i]);
    kiln__free(g->shared);
    kiln__free(g);
}

void kiln_graph_destroy(kiln_graph *g)
{
    if (!g)
        return;
    KILN_ASSERT(g->root == g);
    for (uint32_t i = 0; i < g->nsubgraphs; i++)
        kiln__graph_free_one(g->subgraphs[i]);
    kiln__graph_free_one(g);
}

kiln_ctx *kiln_graph_ctx(const kiln_graph *g)
{
    return g->ctx;
}

static bool name_rehash(kiln_graph *g, uint32_t cap);

/* The name index's size for @p live live nodes: load at most 1/2 with room
 * for two more (a power of two, at least 64). */
static uint32_t name_cap_for(uint64_t live)
{
    uint32_t cap = 64;
    while ((live + 2) * 2 > cap && cap < (1u << 31))
        cap *= 2;
    return cap;
}

bool kiln_graph_reserve(kiln_graph *g, uint32_t nodes, uint32_t inputs, uint32_t outputs)
{
    if (!grow_nodes(g, g->node_limit + nodes, true) || !grow_in(g, g->in_len + inputs, true) ||
        !grow_out(g, g->out_len + outputs, true))
        return false;
    /* the name index: the size name_insert would grow to for that many live
     * nodes, so it is not rehashed on the way */
    uint32_t cap = name_cap_for((uint64_t)g->live + nodes);
    return cap <= g->name_cap || name_rehash(g, cap);
}

size_t kiln_graph_memory(const kiln_graph *g)
{
    return (size_t)g->node_cap * (sizeof(knode) + sizeof(knode_cold)) +
           (size_t)g->in_cap * sizeof(kuse) + (g->in_desc ? (size_t)g->in_cap * 8 : 0) +
           (size_t)g->out_cap * (sizeof(void *) + sizeof(uint32_t)) +
           (size_t)g->ctrl_cap * sizeof(kctrl) +
           (size_t)g->name_cap * sizeof(kname_slot) + g->arena.total;
}

/* ---- graph queries ------------------------------------------------------ */

const char *kiln_graph_name(const kiln_graph *g)
{
    return kiln_sym_str(g, g->name);
}
uint32_t kiln_graph_node_count(const kiln_graph *g)
{
    return g->live;
}
uint32_t kiln_graph_id_limit(const kiln_graph *g)
{
    return g->node_limit;
}
kiln_node_id kiln_graph_next_node(const kiln_graph *g, kiln_node_id prev)
{
    for (kiln_node_id n = prev + 1; n < g->node_limit; n++)
        if (!(g->nodes[n].flags & KILN_NODEF_DEAD))
            return n;
    return 0;
}
uint64_t kiln_graph_mutation(const kiln_graph *g)
{
    return g->mutation;
}
kiln_graph *kiln_graph_parent(const kiln_graph *g)
{
    return g->parent;
}
kiln_node_id kiln_graph_parent_node(const kiln_graph *g)
{
    return g->parent_node;
}
kiln_graph *kiln_graph_root(kiln_graph *g)
{
    return g->root;
}
uint32_t kiln_graph_depth(const kiln_graph *g)
{
    return g->depth;
}
bool kiln_graph_oom(const kiln_graph *g)
{
    return g->oom || g->root->oom;
}
uint32_t kiln_graph_all_subgraph_count(const kiln_graph *root)
{
    return root->root->nsubgraphs;
}
kiln_graph *kiln_graph_all_subgraph(const kiln_graph *root, uint32_t i)
{
    const kiln_graph *r = root->root;
    return i < r->nsubgraphs ? r->subgraphs[i] : NULL;
}

kiln_attrs *kiln_graph_attrs(kiln_graph *g)
{
    if (!g->attrs) {
        g->attrs = kiln__attrs_new(g, 0);
        if (!g->attrs) {
            g->oom = true;
            return NULL;
        }
    }
    return g->attrs;
}

/* ---- name index --------------------------------------------------------- */

#define sym_hash kiln__name_hash

/* Slots hold {id, name}: a probe compares names without touching cold[].
 * id 0 = empty, NAME_TOMB = deleted.  Load factor (live + tombstones) <= 1/2. */
static bool name_rehash(kiln_graph *g, uint32_t cap)
{
    kname_slot *slots = kiln__calloc(cap, sizeof(*slots));
    if (!slots)
        return false;
    uint32_t used = 0;
    for (uint32_t i = 0; i < g->name_cap; i++) {
        kname_slot e = g->name_slots[i];
        if (e.id == 0 || e.id == NAME_TOMB)
            continue;
        uint32_t j = sym_hash(e.name) & (cap - 1);
        while (slots[j].id)
            j = (j + 1) & (cap - 1);
        slots[j] = e;
        used++;
    }
    kiln__free(g->name_slots);
    g->name_slots = slots;
    g->name_cap = cap;
    g->name_used = used;
    return true;
}

static kiln_node_id name_find(const kiln_graph *g, kiln_sym name, uint32_t *slot)
{
    if (!g->name_cap || !name)
        return 0;
    uint32_t mask = g->name_cap - 1;
    for (uint32_t j = sym_hash(name) & mask;; j = (j + 1) & mask) {
        const kname_slot *e = &g->name_slots[j];
        if (e->id == 0)
            return 0;
        if (e->name == name && e->id != NAME_TOMB) {
            if (slot)
                *slot = j;
            return e->id;
        }
    }
}

static bool name_insert(kiln_graph *g, kiln_node_id id)
{
    if ((g->name_used + 1) * 2 > g->name_cap) {
        /* Size for the live nodes (tombstones are dropped by the rehash). */
        uint32_t cap = name_cap_for(g->live);
        if (cap <= g->name_cap && (g->name_used + 1) * 2 > cap)
            cap *= 2;
        if (!name_rehash(g, cap))
            return false;
    }
    kiln_sym name = g->cold[id].name;
    uint32_t mask = g->name_cap - 1;
    uint32_t j = sym_hash(name) & mask;
    while (g->name_slots[j].id != 0 && g->name_slots[j].id != NAME_TOMB)
        j = (j + 1) & mask;
    if (g->name_slots[j].id == 0)
        g->name_used++;
    g->name_slots[j].id = id;
    g->name_slots[j].name = name;
    return true;
}

static void name_erase(kiln_graph *g, kiln_node_id id)
{
    uint32_t slot;
    if (name_find(g, g->cold[id].name, &slot) == id)
        g->name_slots[slot].id = NAME_TOMB;
}

kiln_node_id kiln__name_lookup(const kiln_graph *g, kiln_sym name)
{
    return name_find(g, name, NULL);
}

bool kiln__name_index_rebuild(kiln_graph *g)
{
    kiln__free(g->name_slots);
    g->name_slots = NULL;
    g->name_cap = g->name_used = 0;
    uint32_t cap = 64;
    while (cap < (g->live + 1) * 2)
        cap *= 2;
    g->name_slots = kiln__calloc(cap, sizeof(*g->name_slots));
    if (!g->name_slots) {
        g->oom = true;
        return false;
    }
    g->name_cap = cap;
    for (kiln_node_id n = 1; n < g->node_limit; n++)
        if (kiln__live(g, n) && !name_insert(g, n))
            return false;
    return true;
}

kiln_node_id kiln_graph_find_node(const kiln_graph *g, const char *name)
{
    kiln_sym s = kiln__intern_find(&g->ctx->strings, name, strlen(name));
    return s ? name_find(g, s, NULL) : 0;
}

const char *kiln_graph_unique_name(kiln_graph *g, const char *base, char *buf, size_t size)
{
    for (;;) {
        snprintf(buf, size, "%s%u", base, g->root->name_counter++);
        if (!kiln_graph_find_node(g, buf))
            return buf;
    }
}

/* ---- nodes -------------------------------------------------------------- */

static bool alloc_outputs(kiln_graph *g, uint32_t count, uint32_t *off)
{
    if (!grow_out(g, g->out_len + count, false))
        return false;
    kiln_tensor_desc *block = NULL;
    if (count) {
        block = kiln__arena_alloc(&g->arena, (size_t)count * sizeof(*block));
        if (!block)
            return false;
    }
    *off = g->out_len;
    for (uint32_t i = 0; i < count; i++) {
        block[i].rank = -1;
        block[i].ref_input = -1;
        block[i].dtype = KILN_DT_FLOAT32;
        g->out_head[g->out_len] = 0;
        g->out[g->out_len++] = &block[i];
    }
    return true;
}

kiln_node_id kiln_graph_add_node(kiln_graph *g, const char *name, const char *op, uint32_t nin,
                                 uint32_t nout)
{
    if (!name || !name[0] || !op || !op[0])
        return 0;
    kiln_sym nsym = kiln_intern(g, name), osym = kiln_intern(g, op);
    if (!nsym || !osym)
        return 0;
    if (name_find(g, nsym, NULL))
        return 0;
    if (g->node_limit == UINT32_MAX - 1 || !grow_nodes(g, g->node_limit + 1, false) ||
        !grow_in(g, g->in_len + nin, false)) {
        g->oom = true;
        return 0;
    }
    uint32_t out_off;
    if (!alloc_outputs(g, nout, &out_off)) {
        g->oom = true;
        return 0;
    }
    kiln_node_id id = g->node_limit;
    knode *n = &g->nodes[id];
    *n = (knode){.op = osym, .in_off = g->in_len, .nin = nin, .out_off = out_off, .nout = nout};
    memset(&g->in[g->in_len], 0, (size_t)nin * sizeof(kuse));
    for (uint32_t i = 0; i < nin; i++) {
        g->in[g->in_len + i].dst = id;
    }
    if (g->in_desc)
        memset(&g->in_desc[g->in_len], 0, (size_t)nin * sizeof(void *));
    g->in_len += nin;
    g->cold[id] = (knode_cold){.name = nsym};
    g->node_limit++;
    if (!name_insert(g, id)) {
        g->node_limit--;
        g->oom = true;
        return 0;
    }
    g->live++;
    kiln__mutated(g, true);
    return id;
}

bool kiln_node_is_live(const kiln_graph *g, kiln_node_id n)
{
    return kiln__live(g, n);
}
kiln_sym kiln_node_op(const kiln_graph *g, kiln_node_id n)
{
    return kiln__live(g, n) ? g->nodes[n].op : 0;
}
const char *kiln_node_op_str(const kiln_graph *g, kiln_node_id n)
{
    return kiln_sym_str(g, kiln_node_op(g, n));
}
kiln_sym kiln_node_name(const kiln_graph *g, kiln_node_id n)
{
    return n && n < g->node_limit ? g->cold[n].name : 0;
}
const char *kiln_node_name_str(const kiln_graph *g, kiln_node_id n)
{
    return kiln_sym_str(g, kiln_node_name(g, n));
}

kiln_status kiln_node_set_name(kiln_graph *g, kiln_node_id n, const char *name)
{
    if (!kiln__live(g, n) || !name || !name[0])
        return KILN_ERR_INVALID;
    kiln_sym s = kiln_intern(g, name);
    if (!s)
        return KILN_ERR_NOMEM;
    if (s == g->cold[n].name)
        return KILN_OK;
    if (name_find(g, s, NULL))
        return KILN_ERR_DUPLICATE;
    name_erase(g, n);
    g->cold[n].name = s;
    if (!name_insert(g, n)) {
        g->oom = true;
        return KILN_ERR_NOMEM;
    }
    kiln__mutated(g, false);
    return KILN_OK;
}

kiln_status kiln_node_set_op(kiln_graph *g, kiln_node_id n, const char *op)
{
    if (!kiln__live(g, n) || !op || !op[0])
        return KILN_ERR_INVALID;
    kiln_sym s = kiln_intern(g, op);
    if (!s)
        return KILN_ERR_NOMEM;
    g->nodes[n].op = s;
    kiln__mutated(g, false);
    return KILN_OK;
}

uint32_t kiln_node_input_count(const kiln_graph *g, kiln_node_id n)
{
    return kiln__live(g, n) ? g->nodes[n].nin : 0;
}
uint32_t kiln_node_output_count(const kiln_graph *g, kiln_node_id n)
{
    return kiln__live(g, n) ? g->nodes[n].nout : 0;
}

const kiln_attrs *kiln_node_attrs(const kiln_graph *g, kiln_node_id n)
{
    return n && n < g->node_limit ? g->cold[n].attrs : NULL;
}

kiln_attrs *kiln_node_attrs_mut(kiln_graph *g, kiln_node_id n)
{
    if (!kiln__live(g, n))
        return NULL;
    if (!g->cold[n].attrs) {
        kiln_attrs *a = kiln__attrs_new(g, 0);
        if (!a) {
            g->oom = true;
            return NULL;
        }
        g->cold[n].attrs = a;
    }
    return g->cold[n].attrs;
}

uint32_t kiln_node_link(const kiln_graph *g, kiln_node_id n)
{
    return n < g->node_limit ? g->cold[n].link : 0;
}
void kiln_node_set_link(kiln_graph *g, kiln_node_id n, uint32_t v)
{
    if (n < g->node_limit)
        g->cold[n].link = v;
}

/* ---- consumer lists (data edges) ---------------------------------------- */

static void use_unlink(kiln_graph *g, uint32_t *head, uint32_t idx)
{
    kuse *r = &g->in[idx];
    if (*head == idx) {
        *head = r->next;
        if (*head)
            g->in[*head].prev = r->prev;
    } else {
        g->in[r->prev].next = r->next;
        if (r->next)
            g->in[r->next].prev = r->prev;
        else
            g->in[*head].prev = r->prev;
    }
    r->prev = r->next = 0;
}

/* The record at @p old was copied to @p nw: repoint its list neighbours. */
static void use_moved(kiln_graph *g, uint32_t old, uint32_t nw)
{
    kuse *r = &g->in[nw];
    if (!r->src)
        return;
    uint32_t *head = kiln__out_head(g, r->src, r->src_idx);
    if (r->prev == old)
        r->prev = nw; /* single-element list */
    if (*head == old)
        *head = nw;
    else
        g->in[r->prev].next = nw;
    if (r->next)
        g->in[r->next].prev = nw;
    else
        g->in[*head].prev = nw;
}

kiln_anchor kiln_node_input_peer(const kiln_graph *g, kiln_node_id n, uint32_t i)
{
    kiln_anchor a = {0, 0};
    if (kiln__live(g, n) && i < g->nodes[n].nin) {
        const kuse *r = &g->in[g->nodes[n].in_off + i];
        a.node = r->src;
        a.index = r->src_idx;
    }
    return a;
}

uint32_t kiln_node_output_use_count(const kiln_graph *g, kiln_node_id n, uint32_t o)
{
    uint32_t c = 0;
    for (uint32_t u = kiln_use_first(g, n, o); u; u = g->in[u].next)
        c++;
    return c;
}

uint32_t kiln_use_first(const kiln_graph *g, kiln_node_id n, uint32_t o)
{
    if (!kiln__live(g, n) || o >= g->nodes[n].nout)
        return 0;
    return *kiln__out_head(g, n, o);
}
uint32_t kiln_use_next(const kiln_graph *g, uint32_t cursor)
{
    return cursor && cursor < g->in_len ? g->in[cursor].next : 0;
}
kiln_anchor kiln_use_dst(const kiln_graph *g, uint32_t cursor)
{
    kiln_anchor a = {0, 0};
    if (cursor && cursor < g->in_len) {
        a.node = g->in[cursor].dst;
        a.index = cursor - g->nodes[a.node].in_off;
    }
    return a;
}

kiln_status kiln_edge_add(kiln_graph *g, kiln_node_id src, uint32_t so, kiln_node_id dst,
                          uint32_t di)
{
    if (!kiln__live(g, src) || !kiln__live(g, dst) || so >= g->nodes[src].nout ||
        di >= g->nodes[dst].nin)
        return KILN_ERR_INVALID;
    uint32_t idx = g->nodes[dst].in_off + di;
    kuse *r = &g->in[idx];
    if (r->src)
        return KILN_ERR_INVALID;
    r->src = src;
    r->src_idx = so;
    kiln__use_append(g->in, kiln__out_head(g, src, so), idx);
    kiln__mutated(g, true);
    return KILN_OK;
}

kiln_status kiln_edge_remove(kiln_graph *g, kiln_node_id dst, uint32_t di)
{
    if (!kiln__live(g, dst) || di >= g->nodes[dst].nin)
        return KILN_ERR_INVALID;
    uint32_t idx = g->nodes[dst].in_off + di;
    kuse *r = &g->in[idx];
    if (!r->src)
        return KILN_OK;
    use_unlink(g, kiln__out_head(g, r->src, r->src_idx), idx);
    r->src = 0;
    r->src_idx = 0;
    kiln__mutated(g, true);
    return KILN_OK;
}

/* Disconnect every consumer of output o of n. */
static void drop_consumers(kiln_graph *g, kiln_node_id n, uint32_t o)
{
    uint32_t *head = kiln__out_head(g, n, o);
    uint32_t u = *head;
    while (u) {
        uint32_t next = g->in[u].next;
        g->in[u].src = 0;
        g->in[u].src_idx = 0;
        g->in[u].prev = g->in[u].next = 0;
        u = next;
    }
    *head = 0;
}

kiln_status kiln_node_set_input_count(kiln_graph *g, kiln_node_id n, uint32_t nin)
{
    if (!kiln__live(g, n))
        return KILN_ERR_INVALID;
    knode *k = &g->nodes[n];
    if (nin <= k->nin) {
        for (uint32_t i = nin; i < k->nin; i++)
            kiln_edge_remove(g, n, i);
        k->nin = nin;
        kiln__mutated(g, true);
        return KILN_OK;
    }
    if (!grow_in(g, g->in_len + nin, false)) {
        g->oom = true;
        return KILN_ERR_NOMEM;
    }
    k = &g->nodes[n];
    uint32_t off = g->in_len;
    memcpy(&g->in[off], &g->in[k->in_off], (size_t)k->nin * sizeof(kuse));
    if (g->in_desc)
        memcpy(&g->in_desc[off], &g->in_desc[k->in_off], (size_t)k->nin * sizeof(void *));
    for (uint32_t i = 0; i < k->nin; i++)
        use_moved(g, k->in_off + i, off + i);
    for (uint32_t i = k->nin; i < nin; i++) {
        g->in[off + i] = (kuse){.dst = n};
        if (g->in_desc)
            g->in_desc[off + i] = NULL;
    }
    /* The old slice is garbage until compaction; clear it so nothing points in. */
    memset(&g->in[k->in_off], 0, (size_t)k->nin * sizeof(kuse));
    k->in_off = off;
    k->nin = nin;
    g->in_len += nin;
    kiln__mutated(g, true);
    return KILN_OK;
}

kiln_status kiln_node_set_output_count(kiln_graph *g, kiln_node_id n, uint32_t nout)
{
    if (!kiln__live(g, n))
        return KILN_ERR_INVALID;
    knode *k = &g->nodes[n];
    if (nout <= k->nout) {
        for (uint32_t o = nout; o < k->nout; o++)
            drop_consumers(g, n, o);
        k->nout = nout;
        kiln__mutated(g, true);
        return KILN_OK;
    }
    uint32_t off;
    uint32_t old_off = k->out_off, old_n = k->nout;
    if (!alloc_outputs(g, nout, &off)) {
        g->oom = true;
        return KILN_ERR_NOMEM;
    }
    /* Keep the existing descriptors and consumer lists; the old slice becomes
     * garbage (its heads cleared so nothing is listed twice). */
    for (uint32_t o = 0; o < old_n; o++) {
        g->out[off + o] = g->out[old_off + o];
        g->out_head[off + o] = g->out_head[old_off + o];
        g->out_head[old_off + o] = 0;
    }
    k = &g->nodes[n];
    k->out_off = off;
    k->nout = nout;
    kiln__mutated(g, true);
    return KILN_OK;
}

/* ---- node removal ------------------------------------------------------- */

kiln_status kiln_graph_remove_node(kiln_graph *g, kiln_node_id n)
{
    if (!kiln__live(g, n))
        return KILN_ERR_INVALID;
    /* Its subgraphs go with it: never free a graph a GEPass walk is inside. */
    if (kiln__graph_walked_below(g, n))
        return KILN_ERR_INVALID;
    knode *k = &g->nodes[n];
    for (uint32_t i = 0; i < k->nin; i++)
        kiln_edge_remove(g, n, i);
    for (uint32_t o = 0; o < k->nout; o++)
        drop_consumers(g, n, o);
    while (g->nodes[n].ctrl_in)
        kiln__ctrl_free_rec(g, g->nodes[n].ctrl_in);
    while (g->nodes[n].ctrl_out)
        kiln__ctrl_free_rec(g, g->nodes[n].ctrl_out);
    if (k->flags & KILN_NODEF_HAS_SUBGRAPH)
        kiln__graph_drop_subgraphs(g, n);
    name_erase(g, n);
    k->flags |= KILN_NODEF_DEAD;
    g->live--;
    kiln__mutated(g, true);
    return KILN_OK;
}

/*
 * graph_subgraph.c - subgraphs: the root owns every subgraph at every level
 * (creation order, GE GetAllSubgraphs) and keeps an open-addressing map from
 * subgraph name to graph so name checks are O(1); each owner node lists its
 * subgraphs with their roles in the graph's owner map (node id -> list, open
 * addressing with linear probing, load <= 1/2, backward-shift deletion: no
 * tombstones).  Removing an owner drops its subgraphs recursively.
 */
#include "graph_int.h"
#include "ctx.h"

/* ---- subgraphs ---------------------------------------------------------- */

#define SUB_TOMB ((kiln_graph *)&sub_tomb_marker)
static const char sub_tomb_marker; /* address only: marks a removed slot */

static ksub_slot *sub_find_slot(const kiln_graph *r, kiln_sym name)
{
    if (!r->sub_cap || !name)
        return NULL;
    uint32_t mask = r->sub_cap - 1;
    for (uint32_t j = kiln__name_hash(name) & mask;; j = (j + 1) & mask) {
        ksub_slot *e = &r->sub_slots[j];
        if (!e->graph)
            return NULL;
        if (e->graph != SUB_TOMB && e->name == name)
            return e;
    }
}

/* Rebuild the name map for the root's live subgraphs with room for @p extra more. */
static bool sub_rehash(kiln_graph *r, uint32_t extra)
{
    uint32_t cap = 16;
    while (cap < (r->nsubgraphs + extra + 1) * 2)
        cap *= 2;
    ksub_slot *slots = kiln__calloc(cap, sizeof(*slots));
    if (!slots)
        return false;
    for (uint32_t i = 0; i < r->nsubgraphs; i++) {
        kiln_graph *sg = r->subgraphs[i];
        uint32_t j = kiln__name_hash(sg->name) & (cap - 1);
        while (slots[j].graph)
            j = (j + 1) & (cap - 1);
        slots[j].name = sg->name;
        slots[j].graph = sg;
    }
    kiln__free(r->sub_slots);
    r->sub_slots = slots;
    r->sub_cap = cap;
    r->sub_used = r->nsubgraphs;
    return true;
}

static bool sub_insert(kiln_graph *r, kiln_graph *sg)
{
    if ((r->sub_used + 1) * 2 > r->sub_cap && !sub_rehash(r, 1))
        return false;
    uint32_t mask = r->sub_cap - 1;
    uint32_t j = kiln__name_hash(sg->name) & mask;
    while (r->sub_slots[j].graph && r->sub_slots[j].graph != SUB_TOMB)
        j = (j + 1) & mask;
    if (!r->sub_slots[j].graph)
        r->sub_used++;
    r->sub_slots[j].name = sg->name;
    r->sub_slots[j].graph = sg;
    return true;
}

kiln_graph *kiln_graph_find_subgraph(const kiln_graph *root, const char *name)
{
    const kiln_graph *r = root->root;
    kiln_sym s = kiln__intern_find(&r->ctx->strings, name, strlen(name));
    ksub_slot *e = sub_find_slot(r, s);
    return e ? e->graph : NULL;
}

/* ---- owner map ------------------------------------------------------------ */

/* Place @p e (node != 0) into @p slots (cap a power of two, room guaranteed). */
static void owner_place(kowner *slots, uint32_t cap, const kowner *e)
{
    uint32_t j = kiln__name_hash(e->node) & (cap - 1);
    while (slots[j].node)
        j = (j + 1) & (cap - 1);
    slots[j] = *e;
}

/* The entry of @p n, created empty if missing; NULL on OOM. */
static kowner *owner_get(kiln_graph *g, kiln_node_id n)
{
    if (g->owner_cap) {
        uint32_t mask = g->owner_cap - 1;
        for (uint32_t j = kiln__name_hash(n) & mask; g->owners[j].node; j = (j + 1) & mask)
            if (g->owners[j].node == n)
                return &g->owners[j];
    }
    if ((g->owner_used + 1) * 2 > g->owner_cap) {
        uint32_t cap = g->owner_cap ? g->owner_cap * 2 : 8;
        kowner *slots = kiln__calloc(cap, sizeof(*slots));
        if (!slots)
            return NULL;
        for (uint32_t j = 0; j < g->owner_cap; j++)
            if (g->owners[j].node)
                owner_place(slots, cap, &g->owners[j]);
        kiln__free(g->owners);
        g->owners = slots;
        g->owner_cap = cap;
    }
    uint32_t mask = g->owner_cap - 1;
    uint32_t j = kiln__name_hash(n) & mask;
    while (g->owners[j].node)
        j = (j + 1) & mask;
    g->owners[j] = (kowner){.node = n};
    g->owner_used++;
    return &g->owners[j];
}

/* Remove the entry of @p n (backward-shift: later entries of the probe run
 * move up so lookups never need tombstones). */
static void owner_remove(kiln_graph *g, kiln_node_id n)
{
    if (!g->owner_cap)
        return;
    uint32_t mask = g->owner_cap - 1;
    uint32_t j = kiln__name_hash(n) & mask;
    while (g->owners[j].node != n) {
        if (!g->owners[j].node)
            return;
        j = (j + 1) & mask;
    }
    for (uint32_t k = (j + 1) & mask; g->owners[k].node; k = (k + 1) & mask) {
        uint32_t home = kiln__name_hash(g->owners[k].node) & mask;
        /* k's entry may fill hole j unless its home lies cyclically in (j, k] */
        if (((k - home) & mask) >= ((k - j) & mask)) {
            g->owners[j] = g->owners[k];
            j = k;
        }
    }
    g->owners[j] = (kowner){0};
    g->owner_used--;
}

bool kiln__owners_renumber(kiln_graph *g, const uint32_t *map)
{
    if (!g->owner_used)
        return true;
    uint32_t cap = g->owner_cap;
    kowner *slots = kiln__calloc(cap, sizeof(*slots));
    if (!slots)
        return false;
    for (uint32_t j = 0; j < g->owner_cap; j++) {
        kowner e = g->owners[j];
        if (!e.node)
            continue;
        e.node = map[e.node];
        for (uint32_t s = 0; s < e.nsub; s++)
            e.subs[s].graph->parent_node = e.node;
        owner_place(slots, cap, &e);
    }
    kiln__free(g->owners);
    g->owners = slots;
    return true;
}

kiln_graph *kiln_node_add_subgraph(kiln_graph *g, kiln_node_id n, const char *role,
                                   const char *name)
{
    if (!kiln__live(g, n) || !role || !name || !name[0])
        return NULL;
    kiln_graph *root = g->root;
    if (kiln_graph_find_subgraph(root, name) || strcmp(kiln_graph_name(root), name) == 0)
        return NULL;
    if (!KILN_GROW(root->subgraphs, root->subgraphs_cap, root->nsubgraphs + 1) ||
        ((root->sub_used + 1) * 2 > root->sub_cap && !sub_rehash(root, 1))) {
        g->oom = true;
        return NULL;
    }
    kowner *c = owner_get(g, n);
    ksubref *subs = c ? kiln__arena_alloc(&g->arena, (c->nsub + 1) * sizeof(ksubref)) : NULL;
    kiln_graph *sg = subs ? kiln__graph_new(g->ctx, name) : NULL;
    if (!subs || !sg) {
        if (c && !c->nsub)
            owner_remove(g, n);
        if (sg)
            kiln__graph_free_one(sg);
        g->oom = true;
        return NULL;
    }
    sg->root = root;
    sg->parent = g;
    sg->parent_node = n;
    sg->depth = g->depth + 1;
    if (c->nsub)
        memcpy(subs, c->subs, c->nsub * sizeof(ksubref));
    subs[c->nsub].role = kiln_intern(g, role);
    subs[c->nsub].graph = sg;
    c->subs = subs;
    c->nsub++;
    g->nodes[n].flags |= KILN_NODEF_HAS_SUBGRAPH;
    root->subgraphs[root->nsubgraphs++] = sg;
    sub_insert(root, sg); /* cannot fail: room was made above */
    kiln__mutated(g, true);
    return sg;
}

uint64_t kiln__graph_live_total(const kiln_graph *g)
{
    const kiln_graph *r = g->root;
    uint64_t n = r->live;
    for (uint32_t i = 0; i < r->nsubgraphs; i++)
        n += r->subgraphs[i]->live;
    return n;
}

uint32_t kiln_node_subgraph_count(const kiln_graph *g, kiln_node_id n)
{
    const kowner *c = kiln__live(g, n) ? kiln__owner(g, n) : NULL;
    return c ? c->nsub : 0;
}

kiln_graph *kiln_node_subgraph(const kiln_graph *g, kiln_node_id n, uint32_t i, const char **role)
{
    const kowner *c = kiln__live(g, n) ? kiln__owner(g, n) : NULL;
    if (!c || i >= c->nsub)
        return NULL;
    if (role)
        *role = kiln_sym_str(g, c->subs[i].role);
    return c->subs[i].graph;
}

static void unregister_subgraph(kiln_graph *root, kiln_graph *sg)
{
    ksub_slot *e = sub_find_slot(root, sg->name);
    if (e && e->graph == sg)
        e->graph = SUB_TOMB;
    for (uint32_t i = 0; i < root->nsubgraphs; i++) {
        if (root->subgraphs[i] == sg) {
            memmove(&root->subgraphs[i], &root->subgraphs[i + 1],
                    (root->nsubgraphs - i - 1) * sizeof(kiln_graph *));
            root->nsubgraphs--;
            return;
        }
    }
}

kiln_graph *kiln__graph_walked_below(const kiln_graph *g, kiln_node_id n)
{
    if (!(g->nodes[n].flags & KILN_NODEF_HAS_SUBGRAPH))
        return NULL;
    const kowner *c = kiln__owner(g, n);
    for (uint32_t i = 0; c && i < c->nsub; i++) {
        kiln_graph *sg = c->subs[i].graph;
        if (sg->walking)
            return sg;
        for (kiln_node_id m = 1; m < sg->node_limit; m++) {
            kiln_graph *w;
            if (!(sg->nodes[m].flags & KILN_NODEF_DEAD) && (w = kiln__graph_walked_below(sg, m)))
                return w;
        }
    }
    return NULL;
}

void kiln__graph_drop_subgraphs(kiln_graph *g, kiln_node_id n)
{
    const kowner *c = kiln__owner(g, n);
    for (uint32_t i = 0; c && i < c->nsub; i++) {
        kiln_graph *sg = c->subs[i].graph;
        for (kiln_node_id m = 1; m < sg->node_limit; m++)
            if (!(sg->nodes[m].flags & KILN_NODEF_DEAD) &&
                (sg->nodes[m].flags & KILN_NODEF_HAS_SUBGRAPH))
                kiln__graph_drop_subgraphs(sg, m);
        unregister_subgraph(g->root, sg);
        kiln__graph_free_one(sg);
    }
    owner_remove(g, n);
    g->nodes[n].flags &= ~KILN_NODEF_HAS_SUBGRAPH;
}

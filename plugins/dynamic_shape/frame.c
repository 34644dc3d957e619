/*
 * frame.c - wrapping a set of nodes into a PartitionedCall with a subgraph
 * (GE DynamicShapePartitioner::Cluster::BuildFrame / BuildPartitionFrame /
 * CombinePartitionFrame, and the StagePartitioner's frame), dynshape.h.
 *
 * The kernel has no "move node to another graph" edit, so a node is moved by
 * creating its copy in the subgraph (name, op, anchors, attributes,
 * descriptors, subgraphs deep-copied) and removing the original once every
 * boundary edge is recorded.  Boundary producers are deduplicated with an open
 * addressing table keyed by (node, output), so the whole build is linear in
 * the set and its boundary.
 */
#include "dynshape.h"

bool ds_desc_unknown(const kiln_tensor_desc *d)
{
    if (!d)
        return false;
    int32_t r = kiln_desc_rank(d);
    if (r < 0)
        return true;
    const int64_t *dims = kiln_desc_dims(d);
    for (int32_t i = 0; i < r; i++)
        if (dims[i] < 0)
            return true;
    return false;
}

kiln_status ds_set_bool(kiln_graph *g, kiln_node_id n, const char *key, bool v)
{
    kiln_attrs *a = kiln_node_attrs_mut(g, n);
    return a ? kiln_attrs_set_bool(a, key, v) : KILN_ERR_NOMEM;
}

kiln_status ds_graph_set_bool(kiln_graph *g, const char *key, bool v)
{
    kiln_attrs *a = kiln_graph_attrs(g);
    return a ? kiln_attrs_set_bool(a, key, v) : KILN_ERR_NOMEM;
}

/* ---- deep copy ------------------------------------------------------------ */

/*
 * Subgraph names are unique per root, and the originals keep theirs until they
 * are removed, so a moved node's subgraphs are first copied under the names
 * "<name><tag>" (@p strip false) and, once the originals are gone, copied
 * again under their own names (@p strip true removes the tag).
 */
static kiln_status copy_graph(kiln_graph *src, kiln_graph *dst, const char *tag, bool strip,
                              kiln_error *err);

static kiln_node_id copy_node(kiln_graph *src, kiln_node_id n, kiln_graph *dst, const char *name,
                              const char *tag, bool strip, kiln_error *err)
{
    if (!name)
        name = kiln_node_name_str(src, n);
    kiln_node_id c = kiln_graph_add_node(dst, name, kiln_node_op_str(src, n),
                                         kiln_node_input_count(src, n),
                                         kiln_node_output_count(src, n));
    if (!c) {
        kiln_errorf(err, KILN_ERR_DUPLICATE, "graph %s: cannot add node %s (name taken or out of "
                    "memory)", kiln_graph_name(dst), name);
        return 0;
    }
    kiln_status st = KILN_OK;
    const kiln_attrs *a = kiln_node_attrs(src, n);
    if (a && kiln_attrs_count(a)) {
        kiln_attrs *ca = kiln_node_attrs_mut(dst, c);
        st = ca ? kiln_attrs_copy(ca, a) : KILN_ERR_NOMEM;
    }
    for (uint32_t o = 0; st == KILN_OK && o < kiln_node_output_count(src, n); o++)
        st = kiln_desc_copy(dst, kiln_node_output_desc(dst, c, o), kiln_node_output_desc(src, n, o));
    for (uint32_t i = 0; st == KILN_OK && i < kiln_node_input_count(src, n); i++)
        if (kiln_node_input_has_desc(src, n, i)) {
            kiln_tensor_desc *d = kiln_node_input_desc_mut(dst, c, i);
            st = d ? kiln_desc_copy(dst, d, kiln_node_input_desc(src, n, i)) : KILN_ERR_NOMEM;
        }
    for (uint32_t s = 0; st == KILN_OK && s < kiln_node_subgraph_count(src, n); s++) {
        const char *role = NULL;
        kiln_graph *sg = kiln_node_subgraph(src, n, s, &role);
        char nm[1024];
        const char *sn = kiln_graph_name(sg);
        size_t len = strlen(sn), tl = strlen(tag);
        if (strip && len > tl && strcmp(sn + len - tl, tag) == 0)
            snprintf(nm, sizeof(nm), "%.*s", (int)(len - tl), sn);
        else if (strip)
            snprintf(nm, sizeof(nm), "%s", sn);
        else
            snprintf(nm, sizeof(nm), "%s%s", sn, tag);
        kiln_graph *csg = kiln_node_add_subgraph(dst, c, role ? role : "f", nm);
        if (!csg) {
            kiln_errorf(err, KILN_ERR_DUPLICATE, "node %s: cannot create subgraph %s", name, nm);
            return 0;
        }
        if (copy_graph(sg, csg, tag, strip, err) != KILN_OK)
            return 0;
    }
    if (st != KILN_OK) {
        kiln_errorf(err, st, "node %s: copying its attributes or descriptors failed", name);
        return 0;
    }
    return c;
}

static kiln_status copy_graph(kiln_graph *src, kiln_graph *dst, const char *tag, bool strip,
                              kiln_error *err)
{
    uint32_t lim = kiln_graph_id_limit(src);
    kiln_node_id *map = kiln_alloc(sizeof(*map) * ((size_t)lim + 1));
    if (!map)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    memset(map, 0, sizeof(*map) * ((size_t)lim + 1));
    kiln_status st = KILN_OK;
    const kiln_attrs *ga = kiln_graph_attrs(src);
    if (ga && kiln_attrs_count(ga))
        kiln_attrs_copy(kiln_graph_attrs(dst), ga);
    for (kiln_node_id n = kiln_graph_next_node(src, 0); n; n = kiln_graph_next_node(src, n))
        if (!(map[n] = copy_node(src, n, dst, NULL, tag, strip, err))) {
            st = kiln_error_code(err) != KILN_OK ? kiln_error_code(err) : KILN_ERR_NOMEM;
            goto out;
        }
    for (kiln_node_id n = kiln_graph_next_node(src, 0); n && st == KILN_OK;
         n = kiln_graph_next_node(src, n)) {
        for (uint32_t i = 0; st == KILN_OK && i < kiln_node_input_count(src, n); i++) {
            kiln_anchor p = kiln_node_input_peer(src, n, i);
            if (p.node)
                st = kiln_edge_add(dst, map[p.node], p.index, map[n], i);
        }
        for (uint32_t c = kiln_ctrl_out_first(src, n); c && st == KILN_OK;
             c = kiln_ctrl_out_next(src, c))
            st = kiln_ctrl_add(dst, map[n], map[kiln_ctrl_dst(src, c)]);
    }
    if (st != KILN_OK)
        kiln_errorf(err, st, "copying subgraph %s failed", kiln_graph_name(src));
out:
    kiln_free(map);
    return st;
}

/* ---- (node, output) -> index table ----------------------------------------- */

typedef struct anchor_map {
    uint64_t *key; /* (node << 32 | index) + 1; 0 = empty */
    uint32_t *val;
    uint32_t cap;  /* power of two */
} anchor_map;

static bool amap_init(anchor_map *m, uint32_t expect)
{
    m->cap = 16;
    while (m->cap < expect * 2u + 2u)
        m->cap <<= 1;
    m->key = kiln_alloc(sizeof(uint64_t) * m->cap);
    m->val = kiln_alloc(sizeof(uint32_t) * m->cap);
    if (!m->key || !m->val)
        return false;
    memset(m->key, 0, sizeof(uint64_t) * m->cap);
    return true;
}

static void amap_free(anchor_map *m)
{
    kiln_free(m->key);
    kiln_free(m->val);
}

/* Index of @p a, inserting @p next when absent (*added says which). */
static uint32_t amap_get(anchor_map *m, kiln_anchor a, uint32_t next, bool *added)
{
    uint64_t k = (((uint64_t)a.node << 32) | a.index) + 1;
    uint64_t h = k * 0x9E3779B97F4A7C15ull;
    uint32_t i = (uint32_t)(h >> 32) & (m->cap - 1);
    while (m->key[i] && m->key[i] != k)
        i = (i + 1) & (m->cap - 1);
    *added = !m->key[i];
    if (*added) {
        m->key[i] = k;
        m->val[i] = next;
    }
    return m->val[i];
}

/* ---- the frame ------------------------------------------------------------- */

typedef struct out_use {
    uint32_t out;     /* call output */
    kiln_anchor dst;  /* consumer input outside the set */
} out_use;

typedef struct vec {
    void *p;
    uint32_t n, cap;
    size_t esz;
} vec;

static void *vec_push(vec *v)
{
    if (v->n == v->cap) {
        uint32_t nc = v->cap ? v->cap * 2 : 16;
        void *np = kiln_alloc(v->esz * nc);
        if (!np)
            return NULL;
        if (v->n)
            memcpy(np, v->p, v->esz * v->n);
        kiln_free(v->p);
        v->p = np;
        v->cap = nc;
    }
    return (char *)v->p + v->esz * v->n++;
}

kiln_status ds_build_call(kiln_graph *g, const kiln_node_id *nodes, uint32_t n,
                          const char *sub_name, const char *call_name, bool share_inputs,
                          uint32_t *mark_buf, uint32_t mark_len, kiln_node_id *call_out,
                          kiln_graph **sub_out, kiln_error *err)
{
    /* ids past mark_len (nodes added after the caller sized it) are never in the set */
#define mark(id) ((id) < mark_len ? mark_buf[id] : 0u)
    kiln_status st = KILN_OK;
    anchor_map in_map = {0}, out_map = {0};
    vec ins = {.esz = sizeof(kiln_anchor)};   /* call input i <- producer */
    vec outs = {.esz = sizeof(kiln_anchor)};  /* call output j <- (set node, output) */
    vec uses = {.esz = sizeof(out_use)};
    vec cin = {.esz = sizeof(kiln_node_id)}, cout = {.esz = sizeof(kiln_node_id)};
    kiln_node_id *newid = kiln_alloc(sizeof(kiln_node_id) * ((size_t)n + 1));
    kiln_node_id *data = NULL;
    char nm[2048];
    uint32_t edges = 0;
    for (uint32_t k = 0; k < n; k++) {
        mark_buf[nodes[k]] = k + 1;
        edges += kiln_node_input_count(g, nodes[k]) + kiln_node_output_count(g, nodes[k]);
    }
    if (!newid || !amap_init(&in_map, edges) || !amap_init(&out_map, edges)) {
        st = kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
        goto out;
    }
    /* 1. the boundary, recorded before anything moves */
    for (uint32_t k = 0; k < n; k++) {
        kiln_node_id v = nodes[k];
        for (uint32_t i = 0; i < kiln_node_input_count(g, v); i++) {
            kiln_anchor p = kiln_node_input_peer(g, v, i);
            bool added;
            if (p.node && !mark(p.node)) {
                if (share_inputs)
                    amap_get(&in_map, p, ins.n, &added);
                else
                    added = true;
                if (added) {
                    kiln_anchor *slot = vec_push(&ins);
                    if (!slot)
                        goto nomem;
                    *slot = p;
                }
            }
        }
        for (uint32_t o = 0; o < kiln_node_output_count(g, v); o++)
            for (uint32_t c = kiln_use_first(g, v, o); c; c = kiln_use_next(g, c)) {
                kiln_anchor d = kiln_use_dst(g, c);
                if (mark(d.node))
                    continue;
                bool added;
                kiln_anchor me = {v, o};
                uint32_t j = amap_get(&out_map, me, outs.n, &added);
                if (added) {
                    kiln_anchor *slot = vec_push(&outs);
                    if (!slot)
                        goto nomem;
                    *slot = me;
                }
                out_use *u = vec_push(&uses);
                if (!u)
                    goto nomem;
                u->out = j;
                u->dst = d;
            }
        for (uint32_t c = kiln_ctrl_in_first(g, v); c; c = kiln_ctrl_in_next(g, c)) {
            kiln_node_id s = kiln_ctrl_src(g, c);
            if (!mark(s)) {
                kiln_node_id *slot = vec_push(&cin);
                if (!slot)
                    goto nomem;
                *slot = s;
            }
        }
        for (uint32_t c = kiln_ctrl_out_first(g, v); c; c = kiln_ctrl_out_next(g, c)) {
            kiln_node_id d = kiln_ctrl_dst(g, c);
            if (!mark(d)) {
                kiln_node_id *slot = vec_push(&cout);
                if (!slot)
                    goto nomem;
                *slot = d;
            }
        }
    }
    /* 2. the call node and its subgraph */
    kiln_node_id call = kiln_graph_add_node(g, call_name, "PartitionedCall", ins.n, outs.n);
    if (!call) {
        st = kiln_errorf(err, KILN_ERR_DUPLICATE,
                         "graph %s: cannot add node %s (the name is taken)", kiln_graph_name(g),
                         call_name);
        goto out;
    }
    kiln_graph *sub = kiln_node_add_subgraph(g, call, DS_CALL_ROLE, sub_name);
    if (!sub) {
        st = kiln_errorf(err, KILN_ERR_DUPLICATE,
                         "graph %s: cannot create subgraph %s of %s (the name is taken)",
                         kiln_graph_name(g), sub_name, call_name);
        goto out;
    }
    data = kiln_alloc(sizeof(kiln_node_id) * ((size_t)ins.n + 1));
    if (!data)
        goto nomem;
    for (uint32_t i = 0; i < ins.n; i++) {
        kiln_anchor p = ((kiln_anchor *)ins.p)[i];
        snprintf(nm, sizeof(nm), "%s_Data_%u", sub_name, i);
        data[i] = kiln_graph_add_node(sub, nm, "Data", 0, 1);
        if (!data[i]) {
            st = kiln_errorf(err, KILN_ERR_DUPLICATE, "subgraph %s: cannot add node %s", sub_name,
                             nm);
            goto out;
        }
        kiln_attrs *a = kiln_node_attrs_mut(sub, data[i]);
        if (!a || kiln_attrs_set_int(a, DS_ATTR_PARENT_INDEX, i) != KILN_OK ||
            kiln_desc_copy(sub, kiln_node_output_desc(sub, data[i], 0),
                           kiln_node_output_desc(g, p.node, p.index)) != KILN_OK)
            goto nomem;
    }
    char tag[600];
    snprintf(tag, sizeof(tag), "__moving_%s", sub_name);
    for (uint32_t k = 0; k < n; k++)
        if (!(newid[k] = copy_node(g, nodes[k], sub, NULL, tag, false, err))) {
            st = kiln_error_code(err) != KILN_OK ? kiln_error_code(err) : KILN_ERR_NOMEM;
            goto out;
        }
    uint32_t next_in = 0; /* per-edge inputs are numbered in the walk order of step 1 */
    for (uint32_t k = 0; k < n && st == KILN_OK; k++) {
        kiln_node_id v = nodes[k];
        for (uint32_t i = 0; st == KILN_OK && i < kiln_node_input_count(g, v); i++) {
            kiln_anchor p = kiln_node_input_peer(g, v, i);
            bool added;
            if (!p.node)
                continue;
            if (!share_inputs && !mark(p.node))
                st = kiln_edge_add(sub, data[next_in++], 0, newid[k], i);
            else if (mark(p.node))
                st = kiln_edge_add(sub, newid[mark(p.node) - 1], p.index, newid[k], i);
            else
                st = kiln_edge_add(sub, data[amap_get(&in_map, p, 0, &added)], 0, newid[k], i);
        }
        for (uint32_t c = kiln_ctrl_out_first(g, v); c && st == KILN_OK;
             c = kiln_ctrl_out_next(g, c)) {
            kiln_node_id d = kiln_ctrl_dst(g, c);
            if (mark(d))
                st = kiln_ctrl_add(sub, newid[k], newid[mark(d) - 1]);
        }
    }
    if (st != KILN_OK) {
        kiln_errorf(err, st, "subgraph %s: wiring the moved nodes failed", sub_name);
        goto out;
    }
    snprintf(nm, sizeof(nm), "%s_NetOutput", sub_name);
    kiln_node_id no = kiln_graph_add_node(sub, nm, "NetOutput", outs.n, 0);
    if (!no) {
        st = kiln_errorf(err, KILN_ERR_DUPLICATE, "subgraph %s: cannot add node %s", sub_name, nm);
        goto out;
    }
    for (uint32_t j = 0; j < outs.n; j++) {
        kiln_anchor s = ((kiln_anchor *)outs.p)[j];
        if (kiln_edge_add(sub, newid[mark(s.node) - 1], s.index, no, j) != KILN_OK)
            goto nomem;
        kiln_tensor_desc *d = kiln_node_input_desc_mut(sub, no, j);
        kiln_attrs *a = d ? kiln_desc_attrs_mut(sub, d) : NULL;
        if (!a || kiln_attrs_set_int(a, DS_ATTR_PARENT_INDEX, j) != KILN_OK ||
            kiln_desc_copy(g, kiln_node_output_desc(g, call, j),
                           kiln_node_output_desc(g, s.node, s.index)) != KILN_OK)
            goto nomem;
    }
    /* 3. the originals go, the call takes their boundary */
    for (uint32_t k = 0; k < n; k++) {
        mark_buf[nodes[k]] = 0;
        if (kiln_graph_remove_node(g, nodes[k]) != KILN_OK) {
            st = kiln_errorf(err, KILN_ERR_INVALID, "graph %s: cannot remove node %s",
                             kiln_graph_name(g), kiln_node_name_str(g, nodes[k]));
            goto out;
        }
    }
    for (uint32_t i = 0; st == KILN_OK && i < ins.n; i++) {
        kiln_anchor p = ((kiln_anchor *)ins.p)[i];
        st = kiln_edge_add(g, p.node, p.index, call, i);
    }
    for (uint32_t u = 0; st == KILN_OK && u < uses.n; u++) {
        out_use *x = &((out_use *)uses.p)[u];
        st = kiln_edge_add(g, call, x->out, x->dst.node, x->dst.index);
    }
    for (uint32_t i = 0; st == KILN_OK && i < cin.n; i++)
        st = kiln_ctrl_add(g, ((kiln_node_id *)cin.p)[i], call);
    for (uint32_t i = 0; st == KILN_OK && i < cout.n; i++)
        st = kiln_ctrl_add(g, call, ((kiln_node_id *)cout.p)[i]);
    if (st != KILN_OK) {
        kiln_errorf(err, st, "graph %s: wiring %s failed", kiln_graph_name(g), call_name);
        goto out;
    }
    /* 4. moved nodes with subgraphs: their subgraphs get their own names back */
    for (uint32_t k = 0; k < n; k++) {
        kiln_node_id t = newid[k];
        if (!kiln_node_subgraph_count(sub, t))
            continue;
        char name[1024];
        snprintf(name, sizeof(name), "%s", kiln_node_name_str(sub, t));
        snprintf(nm, sizeof(nm), "%s%s", name, tag);
        kiln_node_id r;
        if (kiln_node_set_name(sub, t, nm) != KILN_OK ||
            !(r = copy_node(sub, t, sub, name, tag, true, err)) ||
            kiln_graph_replace_node(sub, t, r) != KILN_OK) {
            st = kiln_errorf(err, KILN_ERR_INVALID,
                             "subgraph %s: restoring the subgraphs of moved node %s failed",
                             sub_name, name);
            goto out;
        }
    }
    *call_out = call;
    *sub_out = sub;
    goto out;
nomem:
    st = kiln_errorf(err, KILN_ERR_NOMEM, "out of memory building %s", sub_name);
out:
    for (uint32_t k = 0; k < n; k++)
        mark_buf[nodes[k]] = 0;
    amap_free(&in_map);
    amap_free(&out_map);
    kiln_free(ins.p);
    kiln_free(outs.p);
    kiln_free(uses.p);
    kiln_free(cin.p);
    kiln_free(cout.p);
    kiln_free(newid);
    kiln_free(data);
    return st;
#undef mark
}

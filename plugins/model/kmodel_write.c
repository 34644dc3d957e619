/*
 * kmodel_write.c - write a built graph as an executable model file
 * (docs/model_format.md): header, section table, META (a ModelDef: I/O,
 * memory, streams, per-model task sequences), GRAPH (a GraphDef: the graph
 * without the weight bytes) and WEIGHTS (the MergeWeights blob, page-aligned
 * so a loader can mmap it).
 *
 * The weights are laid out by km_weights_plan, the function MergeWeights
 * runs, so the offsets on the graph and in the file agree; a graph that did
 * not go through MergeWeights (kiln convert x.json y.kmodel) is laid out
 * here the same way.  Task sequences come from the TaskGenerator attributes
 * (km_sequences_build); a graph without them has no tasks.  The writer only
 * reads the graph.  O(graph + weights).
 */
#include "kmodel.h"
#include "kmodel.pb-c.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef KILN_VERSION_STRING
#define KILN_VERSION_STRING "unknown"
#endif

typedef struct wctx {
    km_arena ar;
    kiln_graph *root;
    km_weights w;
    uint32_t wcur; /* next weight of the plan (graphs and nodes in plan order) */
    kiln_error *err;
} wctx;

#define NEW(c, T, INIT) ((T *)new_msg((c), sizeof(T), &(T)INIT))
#define ARR(c, T, n) ((T *)km_arena_alloc(&(c)->ar, sizeof(T) * ((n) ? (n) : 1)))
#define STR(s) ((void *)(uintptr_t)(s))

static void *new_msg(wctx *c, size_t n, const void *init)
{
    void *p = km_arena_alloc(&c->ar, n);
    if (p)
        memcpy(p, init, n);
    return p;
}

/* Position of @p n among @p g's live nodes in id order (the GraphDef order). */
static uint32_t node_pos(const kiln_graph *g, kiln_node_id n)
{
    uint32_t k = 0;
    for (kiln_node_id v = kiln_graph_next_node(g, 0); v && v != n; v = kiln_graph_next_node(g, v))
        k++;
    return k;
}

/* Index of @p g in the GraphDef: 0 = root, i + 1 = kiln_graph_all_subgraph(root, i). */
static int32_t graph_index(const kiln_graph *root, const kiln_graph *g)
{
    if (g == root)
        return 0;
    for (uint32_t i = 0; i < kiln_graph_all_subgraph_count(root); i++)
        if (kiln_graph_all_subgraph(root, i) == g)
            return (int32_t)i + 1;
    return -1;
}

static int skipped_attr(const char *key)
{
    return strncmp(key, KM_INFO_PREFIX, strlen(KM_INFO_PREFIX)) == 0 ||
           strcmp(key, KM_ATTR_BUILT) == 0;
}

static Kiln__Kmodel__TensorValue *enc_tensor(wctx *c, const kiln_tensor_value *v,
                                             const km_weight *wt)
{
    Kiln__Kmodel__TensorValue *t = NEW(c, Kiln__Kmodel__TensorValue,
                                       KILN__KMODEL__TENSOR_VALUE__INIT);
    if (!t)
        return NULL;
    t->has_dtype = 1;
    t->dtype = (int32_t)v->dtype;
    t->n_dims = v->rank;
    t->dims = STR(v->dims);
    t->has_nbytes = 1;
    t->nbytes = (int64_t)v->nbytes;
    if (wt) {
        t->has_weight_offset = 1;
        t->weight_offset = wt->offset;
    } else if (v->nbytes) {
        t->has_data = 1;
        t->data.len = v->nbytes;
        t->data.data = STR(v->data);
    }
    return t;
}

/* One attribute; @p wt (may be NULL) places a Const's `value` in the weights. */
static Kiln__Kmodel__Attr *enc_attr(wctx *c, const kiln_attrs *a, const char *key,
                                    kiln_attr_type type, const km_weight *wt)
{
    Kiln__Kmodel__Attr *m = NEW(c, Kiln__Kmodel__Attr, KILN__KMODEL__ATTR__INIT);
    if (!m)
        return NULL;
    m->key = STR(key);
    m->has_type = 1;
    m->type = type;
    switch (type) {
    case KILN_ATTR_BOOL: {
        bool b = false;
        kiln_attrs_get_bool(a, key, &b);
        m->has_b = 1;
        m->b = b;
        break;
    }
    case KILN_ATTR_INT:
        m->has_i = kiln_attrs_get_int(a, key, &m->i);
        break;
    case KILN_ATTR_DTYPE: {
        kiln_dtype dt = KILN_DT_FLOAT32;
        kiln_attrs_get_dtype(a, key, &dt);
        m->has_i = 1;
        m->i = dt;
        break;
    }
    case KILN_ATTR_FLOAT:
        m->has_f = kiln_attrs_get_float(a, key, &m->f);
        break;
    case KILN_ATTR_STRING: {
        const char *s = "";
        kiln_attrs_get_string(a, key, &s);
        m->s = STR(s);
        break;
    }
    case KILN_ATTR_LIST_INT: {
        const int64_t *v;
        uint32_t n = 0;
        if (kiln_attrs_get_list_int(a, key, &v, &n)) {
            m->n_ints = n;
            m->ints = STR(v);
        }
        break;
    }
    case KILN_ATTR_LIST_FLOAT: {
        const double *v;
        uint32_t n = 0;
        if (kiln_attrs_get_list_float(a, key, &v, &n)) {
            m->n_floats = n;
            m->floats = STR(v);
        }
        break;
    }
    case KILN_ATTR_LIST_STRING: {
        const char *const *v;
        uint32_t n = 0;
        if (kiln_attrs_get_list_string(a, key, &v, &n)) {
            m->n_strs = n;
            m->strs = (char **)(uintptr_t)v;
        }
        break;
    }
    case KILN_ATTR_LIST_BOOL: {
        const uint8_t *v;
        uint32_t n = 0;
        if (kiln_attrs_get_list_bool(a, key, &v, &n)) {
            m->has_bools = 1;
            m->bools.len = n;
            m->bools.data = STR(v);
        }
        break;
    }
    case KILN_ATTR_LIST_LIST_INT: {
        uint32_t n = 0;
        kiln_attrs_get_list_list_int(a, key, &n);
        m->n_lists = n;
        m->lists = ARR(c, Kiln__Kmodel__IntList *, n);
        if (!m->lists)
            return NULL;
        for (uint32_t i = 0; i < n; i++) {
            const int64_t *v = NULL;
            uint32_t len = 0;
            kiln_attrs_get_list_list_int_at(a, key, i, &v, &len);
            Kiln__Kmodel__IntList *l = NEW(c, Kiln__Kmodel__IntList, KILN__KMODEL__INT_LIST__INIT);
            if (!l)
                return NULL;
            l->n_v = len;
            l->v = STR(v);
            m->lists[i] = l;
        }
        break;
    }
    case KILN_ATTR_TENSOR: {
        kiln_tensor_value v;
        if (kiln_attrs_get_tensor(a, key, &v) && !(m->tensor = enc_tensor(c, &v, wt)))
            return NULL;
        break;
    }
    case KILN_ATTR_NONE:
        break;
    }
    return m;
}

/* All attributes of @p a into *out / *n; @p wt places a Const's `value`. */
static int enc_attrs(wctx *c, const kiln_attrs *a, const km_weight *wt, Kiln__Kmodel__Attr ***out,
                     size_t *n)
{
    uint32_t count = kiln_attrs_count(a);
    Kiln__Kmodel__Attr **v = ARR(c, Kiln__Kmodel__Attr *, count);
    if (!v)
        return 0;
    size_t k = 0;
    for (uint32_t i = 0; i < count; i++) {
        kiln_attr_type type;
        const char *key = kiln_attrs_key_at(a, i, &type);
        if (!key || skipped_attr(key))
            continue;
        const km_weight *w = wt && strcmp(key, "value") == 0 ? wt : NULL;
        if (!(v[k++] = enc_attr(c, a, key, type, w)))
            return 0;
    }
    *out = v;
    *n = k;
    return 1;
}

static Kiln__Kmodel__TensorDesc *enc_desc(wctx *c, const kiln_graph *g, const kiln_tensor_desc *d)
{
    Kiln__Kmodel__TensorDesc *m = NEW(c, Kiln__Kmodel__TensorDesc, KILN__KMODEL__TENSOR_DESC__INIT);
    if (!m)
        return NULL;
    m->has_dtype = 1;
    m->dtype = (int32_t)kiln_desc_dtype(d);
    m->has_rank = 1;
    m->rank = kiln_desc_rank(d);
    if (m->rank > 0) {
        m->n_dims = (size_t)m->rank;
        m->dims = STR(kiln_desc_dims(d));
    }
    const char *fmt = kiln_desc_format(g, d);
    if (fmt && strcmp(fmt, "ND") != 0)
        m->format = STR(fmt);
    if (kiln_desc_ref_input(d) >= 0) {
        m->has_ref_input = 1;
        m->ref_input = kiln_desc_ref_input(d);
    }
    if (kiln_desc_size(d) != -1) {
        m->has_size = 1;
        m->size = kiln_desc_size(d);
    }
    if (kiln_desc_offset(d) != -1) {
        m->has_offset = 1;
        m->offset = kiln_desc_offset(d);
    }
    const char *mt = kiln_desc_memory_type(g, d);
    if (mt)
        m->memory_type = STR(mt);
    if (!enc_attrs(c, kiln_desc_attrs(d), NULL, &m->attrs, &m->n_attrs))
        return NULL;
    return m;
}

static Kiln__Kmodel__Node *enc_node(wctx *c, kiln_graph *g, kiln_node_id n, const uint32_t *pos)
{
    Kiln__Kmodel__Node *m = NEW(c, Kiln__Kmodel__Node, KILN__KMODEL__NODE__INIT);
    if (!m)
        return NULL;
    m->name = STR(kiln_node_name_str(g, n));
    m->op = STR(kiln_node_op_str(g, n));
    uint32_t nin = kiln_node_input_count(g, n), nout = kiln_node_output_count(g, n);
    m->n_src_nodes = m->n_src_outputs = nin;
    m->src_nodes = ARR(c, uint32_t, nin);
    m->src_outputs = ARR(c, uint32_t, nin);
    uint32_t nctrl = kiln_node_ctrl_in_count(g, n);
    m->control_inputs = ARR(c, uint32_t, nctrl);
    m->outputs = ARR(c, Kiln__Kmodel__TensorDesc *, nout);
    m->input_descs = ARR(c, Kiln__Kmodel__InputDesc *, nin);
    if (!m->src_nodes || !m->src_outputs || !m->control_inputs || !m->outputs || !m->input_descs)
        return NULL;
    for (uint32_t i = 0; i < nin; i++) {
        kiln_anchor a = kiln_node_input_peer(g, n, i);
        m->src_nodes[i] = a.node ? pos[a.node] + 1 : 0;
        m->src_outputs[i] = a.node ? a.index : 0;
        if (kiln_node_input_has_desc(g, n, i)) {
            Kiln__Kmodel__InputDesc *in = NEW(c, Kiln__Kmodel__InputDesc,
                                              KILN__KMODEL__INPUT_DESC__INIT);
            if (!in || !(in->desc = enc_desc(c, g, kiln_node_input_desc(g, n, i))))
                return NULL;
            in->has_index = 1;
            in->index = i;
            m->input_descs[m->n_input_descs++] = in;
        }
    }
    for (uint32_t cur = kiln_ctrl_in_first(g, n); cur && m->n_control_inputs < nctrl;
         cur = kiln_ctrl_in_next(g, cur))
        m->control_inputs[m->n_control_inputs++] = pos[kiln_ctrl_src(g, cur)];
    m->n_outputs = nout;
    for (uint32_t o = 0; o < nout; o++)
        if (!(m->outputs[o] = enc_desc(c, g, kiln_node_output_desc(g, n, o))))
            return NULL;
    const km_weight *wt = NULL;
    if (c->wcur < c->w.count && c->w.items[c->wcur].graph == g && c->w.items[c->wcur].node == n)
        wt = &c->w.items[c->wcur++];
    if (!enc_attrs(c, kiln_node_attrs(g, n), wt, &m->attrs, &m->n_attrs))
        return NULL;
    return m;
}

static Kiln__Kmodel__Graph *enc_graph(wctx *c, kiln_graph *g)
{
    Kiln__Kmodel__Graph *m = NEW(c, Kiln__Kmodel__Graph, KILN__KMODEL__GRAPH__INIT);
    if (!m)
        return NULL;
    m->name = STR(kiln_graph_name(g));
    kiln_graph *parent = kiln_graph_parent(g);
    if (parent) {
        kiln_node_id owner = kiln_graph_parent_node(g);
        m->has_parent_graph = m->has_parent_node = 1;
        m->parent_graph = graph_index(c->root, parent);
        m->parent_node = node_pos(parent, owner);
        for (uint32_t k = 0; k < kiln_node_subgraph_count(parent, owner); k++) {
            const char *role = NULL;
            if (kiln_node_subgraph(parent, owner, k, &role) == g)
                m->role = STR(role ? role : "");
        }
    }
    if (!enc_attrs(c, kiln_graph_attrs(g), NULL, &m->attrs, &m->n_attrs))
        return NULL;
    uint32_t limit = kiln_graph_id_limit(g), count = kiln_graph_node_count(g);
    uint32_t *pos = calloc(limit + 1u, sizeof(*pos));
    if (!pos || !(m->nodes = ARR(c, Kiln__Kmodel__Node *, count))) {
        free(pos);
        return NULL;
    }
    uint32_t k = 0;
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n))
        pos[n] = k++;
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n))
        if (!(m->nodes[m->n_nodes++] = enc_node(c, g, n, pos))) {
            free(pos);
            return NULL;
        }
    free(pos);
    return m;
}

/* ---- META ---------------------------------------------------------------- */

static const char *value_name(wctx *c, kiln_graph *g, kiln_node_id n, uint32_t o)
{
    const char *s;
    if (o < kiln_node_output_count(g, n) &&
        kiln_attrs_get_string(kiln_desc_attrs(kiln_node_output_desc(g, n, o)), "_onnx_name", &s))
        return s;
    if (o == 0)
        return kiln_node_name_str(g, n);
    char buf[600];
    snprintf(buf, sizeof(buf), "%s:%u", kiln_node_name_str(g, n), o);
    char *r = km_arena_alloc(&c->ar, strlen(buf) + 1);
    if (r)
        strcpy(r, buf);
    return r;
}

static Kiln__Kmodel__IoDesc *enc_io(wctx *c, uint32_t index, const char *name, const char *node,
                                    const kiln_tensor_desc *d)
{
    Kiln__Kmodel__IoDesc *m = NEW(c, Kiln__Kmodel__IoDesc, KILN__KMODEL__IO_DESC__INIT);
    if (!m)
        return NULL;
    m->has_index = 1;
    m->index = index;
    m->name = STR(name ? name : "");
    m->node = STR(node);
    m->has_dtype = m->has_rank = 1;
    m->dtype = d ? (int32_t)kiln_desc_dtype(d) : 0;
    m->rank = d ? kiln_desc_rank(d) : -1;
    if (m->rank > 0) {
        m->n_dims = (size_t)m->rank;
        m->dims = STR(kiln_desc_dims(d));
    }
    return m;
}

/* Root Data nodes by `index`, and the NetOutput's inputs. */
static int enc_model_io(wctx *c, Kiln__Kmodel__ModelDef *md)
{
    kiln_graph *g = c->root;
    uint32_t nd = 0;
    kiln_node_id no = 0;
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n)) {
        nd += strcmp(kiln_node_op_str(g, n), "Data") == 0;
        if (strcmp(kiln_node_op_str(g, n), "NetOutput") == 0)
            no = n;
    }
    md->inputs = ARR(c, Kiln__Kmodel__IoDesc *, nd);
    if (!md->inputs)
        return 0;
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n)) {
        int64_t idx = -1;
        if (strcmp(kiln_node_op_str(g, n), "Data") != 0)
            continue;
        kiln_attrs_get_int(kiln_node_attrs(g, n), "index", &idx);
        const kiln_tensor_desc *d =
            kiln_node_output_count(g, n) ? kiln_node_output_desc(g, n, 0) : NULL;
        if (!(md->inputs[md->n_inputs++] =
                  enc_io(c, idx < 0 ? 0 : (uint32_t)idx, value_name(c, g, n, 0),
                         kiln_node_name_str(g, n), d)))
            return 0;
    }
    uint32_t nout = no ? kiln_node_input_count(g, no) : 0;
    md->outputs = ARR(c, Kiln__Kmodel__IoDesc *, nout);
    if (!md->outputs)
        return 0;
    for (uint32_t j = 0; j < nout; j++) {
        kiln_anchor a = kiln_node_input_peer(g, no, j);
        const char *name = NULL;
        if (kiln_node_input_has_desc(g, no, j))
            kiln_attrs_get_string(kiln_desc_attrs(kiln_node_input_desc(g, no, j)), "_onnx_name",
                                  &name);
        if (!name && a.node)
            name = value_name(c, g, a.node, a.index);
        const kiln_tensor_desc *d = kiln_node_input_desc(g, no, j);
        if (!(md->outputs[md->n_outputs++] =
                  enc_io(c, j, name, a.node ? kiln_node_name_str(g, a.node) : "", d)))
            return 0;
    }
    return 1;
}

/* int64 values of a list_int (or int) attribute, copied into the arena. */
static int64_t *list_or_int(wctx *c, const kiln_attrs *a, const char *key, size_t *n)
{
    const int64_t *v;
    uint32_t k = 0;
    int64_t one;
    *n = 0;
    if (kiln_attrs_get_list_int(a, key, &v, &k)) {
        *n = k;
        return STR(v);
    }
    if (kiln_attrs_get_int(a, key, &one)) {
        int64_t *p = ARR(c, int64_t, 1);
        if (p) {
            *p = one;
            *n = 1;
        }
        return p;
    }
    return NULL;
}

static Kiln__Kmodel__TaskDef *enc_task(wctx *c, kiln_graph *g, const km_task *t,
                                       const uint32_t *pos)
{
    Kiln__Kmodel__TaskDef *m = NEW(c, Kiln__Kmodel__TaskDef, KILN__KMODEL__TASK_DEF__INIT);
    if (!m)
        return NULL;
    kiln_node_id n = t->node;
    m->has_kind = 1;
    m->kind = t->kind;
    m->node = STR(kiln_node_name_str(g, n));
    m->has_node_index = 1;
    m->node_index = pos[n];
    if (t->kind == KILN_TASK_EVENT_RECORD || t->kind == KILN_TASK_EVENT_WAIT) {
        m->has_event_id = 1;
        m->event_id = t->event_id;
        return m;
    }
    const kiln_attrs *a = kiln_node_attrs(g, n);
    const char *s;
    if (kiln_attrs_get_string(a, KM_ATTR_KERNEL, &s))
        m->kernel = STR(s);
    const char *eng = kiln_engine_for_node(g, n);
    if (eng)
        m->engine = STR(eng);
    kiln_tensor_value args;
    if (kiln_attrs_get_tensor(a, KM_ATTR_TASK_ARGS, &args) && args.nbytes) {
        m->has_args = 1;
        m->args.len = args.nbytes;
        m->args.data = STR(args.data);
    }
    int64_t v;
    if (kiln_attrs_get_int(a, KM_ATTR_TASK_EVENT, &v) && v >= 0 && v <= UINT32_MAX) {
        m->has_event_id = 1;
        m->event_id = (uint32_t)v;
    }
    if (kiln_attrs_get_int(a, KM_ATTR_TASK_TARGET, &v) && v >= 0 && v <= UINT32_MAX) {
        m->has_target_stream_id = 1;
        m->target_stream_id = (uint32_t)v;
    }
    uint32_t nsub = kiln_node_subgraph_count(g, n);
    if (nsub) {
        if (!(m->subgraph_models = ARR(c, uint32_t, nsub)))
            return NULL;
        for (uint32_t k = 0; k < nsub; k++) {
            int32_t gi = graph_index(c->root, kiln_node_subgraph(g, n, k, NULL));
            m->subgraph_models[m->n_subgraph_models++] = gi < 0 ? 0 : (uint32_t)gi;
        }
    }
    uint32_t nin = kiln_node_input_count(g, n), nout = kiln_node_output_count(g, n);
    m->input_offsets = ARR(c, int64_t, nin);
    m->input_memory_types = ARR(c, char *, nin);
    m->output_offsets = ARR(c, int64_t, nout);
    m->output_memory_types = ARR(c, char *, nout);
    if (!m->input_offsets || !m->input_memory_types || !m->output_offsets ||
        !m->output_memory_types)
        return NULL;
    m->n_input_offsets = m->n_input_memory_types = nin;
    for (uint32_t i = 0; i < nin; i++) {
        const kiln_tensor_desc *d = kiln_node_input_desc(g, n, i);
        const char *mt = d ? kiln_desc_memory_type(g, d) : NULL;
        m->input_offsets[i] = d ? kiln_desc_offset(d) : -1;
        m->input_memory_types[i] = STR(mt ? mt : "");
    }
    m->n_output_offsets = m->n_output_memory_types = nout;
    for (uint32_t o = 0; o < nout; o++) {
        const kiln_tensor_desc *d = kiln_node_output_desc(g, n, o);
        const char *mt = kiln_desc_memory_type(g, d);
        m->output_offsets[o] = kiln_desc_offset(d);
        m->output_memory_types[o] = STR(mt ? mt : "");
    }
    m->workspace_offsets = list_or_int(c, a, "_kiln_workspace_offsets", &m->n_workspace_offsets);
    m->workspace_sizes = list_or_int(c, a, "_kiln_workspace_bytes", &m->n_workspace_sizes);
    return c->ar.oom ? NULL : m;
}

static Kiln__Kmodel__SubModel *enc_submodel(wctx *c, kiln_graph *g, uint32_t gi)
{
    Kiln__Kmodel__SubModel *m = NEW(c, Kiln__Kmodel__SubModel, KILN__KMODEL__SUB_MODEL__INIT);
    if (!m)
        return NULL;
    m->graph = STR(kiln_graph_name(g));
    m->has_graph_index = 1;
    m->graph_index = gi;
    kiln_graph *parent = kiln_graph_parent(g);
    if (parent) {
        kiln_node_id owner = kiln_graph_parent_node(g);
        m->owner = STR(kiln_node_name_str(parent, owner));
        m->owner_op = STR(kiln_node_op_str(parent, owner));
        for (uint32_t k = 0; k < kiln_node_subgraph_count(parent, owner); k++) {
            const char *role = NULL;
            if (kiln_node_subgraph(parent, owner, k, &role) == g)
                m->role = STR(role ? role : "");
        }
    }
    km_sequences s;
    if (km_sequences_build(g, &s, c->err) != KILN_OK)
        return NULL;
    m->has_stream_num = m->has_event_num = 1;
    m->stream_num = s.stream_count;
    m->event_num = s.event_count;
    uint32_t limit = kiln_graph_id_limit(g);
    uint32_t *pos = calloc(limit + 1u, sizeof(*pos));
    m->streams = ARR(c, Kiln__Kmodel__StreamTasks *, s.stream_count);
    int ok = pos && m->streams;
    uint32_t k = 0;
    for (kiln_node_id n = kiln_graph_next_node(g, 0); ok && n; n = kiln_graph_next_node(g, n))
        pos[n] = k++;
    for (uint32_t i = 0; ok && i < s.stream_count; i++) {
        Kiln__Kmodel__StreamTasks *st =
            NEW(c, Kiln__Kmodel__StreamTasks, KILN__KMODEL__STREAM_TASKS__INIT);
        ok = st && (st->tasks = ARR(c, Kiln__Kmodel__TaskDef *, s.streams[i].count));
        if (!ok)
            break;
        st->has_stream_id = 1;
        st->stream_id = i;
        for (uint32_t t = 0; ok && t < s.streams[i].count; t++)
            ok = (st->tasks[st->n_tasks++] = enc_task(c, g, &s.streams[i].tasks[t], pos)) != NULL;
        m->streams[m->n_streams++] = st;
    }
    free(pos);
    km_sequences_free(&s);
    if (!ok && kiln_error_code(c->err) == KILN_OK)
        kiln_errorf(c->err, KILN_ERR_NOMEM, "out of memory");
    return ok ? m : NULL;
}

static uint32_t live_nodes(kiln_graph *root)
{
    uint32_t n = kiln_graph_node_count(root);
    for (uint32_t i = 0; i < kiln_graph_all_subgraph_count(root); i++)
        n += kiln_graph_node_count(kiln_graph_all_subgraph(root, i));
    return n;
}

static Kiln__Kmodel__ModelDef *enc_meta(wctx *c)
{
    kiln_graph *g = c->root;
    Kiln__Kmodel__ModelDef *md = NEW(c, Kiln__Kmodel__ModelDef, KILN__KMODEL__MODEL_DEF__INIT);
    if (!md)
        return NULL;
    const char *name = kiln_graph_name(g);
    kiln_attrs_get_string(kiln_graph_attrs(g), KM_INFO_PREFIX "name", &name);
    md->name = STR(name);
    md->producer = STR("kiln " KILN_VERSION_STRING);
    md->has_weight_size = md->has_weight_constants = md->has_weight_deduplicated = 1;
    md->weight_size = c->w.blob_size;
    md->weight_constants = c->w.count;
    md->weight_deduplicated = c->w.deduplicated;
    md->has_node_count = 1;
    md->node_count = live_nodes(g);
    const kiln_attrs *ra = kiln_graph_attrs(g);
    const char *const *types;
    uint32_t nt = 0, ns = 0, nl = 0;
    const int64_t *sizes = NULL, *loads = NULL;
    if (kiln_attrs_get_list_string(ra, "_kiln_memory_types", &types, &nt)) {
        kiln_attrs_get_list_int(ra, "_kiln_memory_sizes", &sizes, &ns);
        kiln_attrs_get_list_int(ra, "_kiln_memory_loads", &loads, &nl);
        if (!(md->memory = ARR(c, Kiln__Kmodel__MemoryType *, nt)))
            return NULL;
        for (uint32_t i = 0; i < nt; i++) {
            Kiln__Kmodel__MemoryType *mt =
                NEW(c, Kiln__Kmodel__MemoryType, KILN__KMODEL__MEMORY_TYPE__INIT);
            if (!mt)
                return NULL;
            mt->type = STR(types[i]);
            mt->has_size = mt->has_load = 1;
            mt->size = i < ns ? sizes[i] : -1;
            mt->load = i < nl ? loads[i] : -1;
            md->memory[md->n_memory++] = mt;
        }
    }
    const char *planner;
    if (kiln_attrs_get_string(ra, "_kiln_memory_planner", &planner))
        md->memory_planner = STR(planner);
    if (!enc_model_io(c, md))
        return NULL;
    uint32_t nsub = kiln_graph_all_subgraph_count(g);
    if (!(md->models = ARR(c, Kiln__Kmodel__SubModel *, nsub + 1u)))
        return NULL;
    for (uint32_t i = 0; i <= nsub; i++) {
        kiln_graph *sg = i ? kiln_graph_all_subgraph(g, i - 1) : g;
        if (!(md->models[md->n_models++] = enc_submodel(c, sg, i)))
            return NULL;
    }
    md->has_stream_num = md->has_event_num = 1;
    md->stream_num = md->models[0]->stream_num;
    md->event_num = md->models[0]->event_num;
    return md;
}

/* ---- the file --------------------------------------------------------------- */

static uint64_t align_u64(uint64_t v, uint64_t a)
{
    return (v + a - 1) / a * a;
}

static kiln_status write_all(FILE *f, const void *p, size_t n, kiln_error *err)
{
    if (n && fwrite(p, 1, n, f) != n)
        return kiln_errorf(err, KILN_ERR_IO, "write error: %s", strerror(errno));
    return KILN_OK;
}

static kiln_status write_zeros(FILE *f, uint64_t n, kiln_error *err)
{
    static const uint8_t zeros[512];
    while (n) {
        size_t k = n < sizeof(zeros) ? (size_t)n : sizeof(zeros);
        kiln_status st = write_all(f, zeros, k, err);
        if (st != KILN_OK)
            return st;
        n -= k;
    }
    return KILN_OK;
}

/* The blob of the plan: every first occurrence at its offset, zero padding. */
static uint8_t *weight_blob(const km_weights *w)
{
    uint8_t *b = calloc(w->blob_size ? (size_t)w->blob_size : 1, 1);
    for (uint32_t i = 0; b && i < w->count; i++)
        if (!w->items[i].dedup && w->items[i].size)
            memcpy(b + w->items[i].offset, w->items[i].data, (size_t)w->items[i].size);
    return b;
}

kiln_status km_export_file(kiln_graph *g, const char *path, kiln_error *err)
{
    wctx c;
    memset(&c, 0, sizeof(c));
    c.root = g;
    c.err = err;
    kiln_status st = km_weights_plan(g, &c.w, err);
    if (st != KILN_OK)
        return st;
    Kiln__Kmodel__GraphDef gd = KILN__KMODEL__GRAPH_DEF__INIT;
    Kiln__Kmodel__ModelDef *md = NULL;
    uint8_t *meta = NULL, *graph = NULL, *blob = NULL;
    uint32_t nsub = kiln_graph_all_subgraph_count(g);
    gd.graphs = ARR(&c, Kiln__Kmodel__Graph *, nsub + 1u);
    for (uint32_t i = 0; gd.graphs && i <= nsub; i++) {
        if (!(gd.graphs[gd.n_graphs] = enc_graph(&c, i ? kiln_graph_all_subgraph(g, i - 1) : g)))
            break;
        gd.n_graphs++;
    }
    if (!gd.graphs || gd.n_graphs != nsub + 1u || c.wcur != c.w.count)
        st = c.wcur != c.w.count && !c.ar.oom
                 ? kiln_errorf(err, KILN_ERR_INTERNAL, "GRAPH: %u of %u constants placed", c.wcur,
                               c.w.count)
                 : kiln_errorf(err, KILN_ERR_NOMEM, "out of memory encoding GRAPH");
    if (st == KILN_OK && !(md = enc_meta(&c)))
        st = kiln_error_code(err) != KILN_OK
                 ? kiln_error_push(err, "META")
                 : kiln_errorf(err, KILN_ERR_NOMEM, "out of memory encoding META");
    size_t meta_len = 0, graph_len = 0;
    if (st == KILN_OK) {
        meta_len = kiln__kmodel__model_def__get_packed_size(md);
        graph_len = kiln__kmodel__graph_def__get_packed_size(&gd);
        if (meta_len > INT32_MAX || graph_len > INT32_MAX)
            st = kiln_errorf(err, KILN_ERR_LIMIT, "%s section larger than 2 GiB (protobuf limit)",
                             meta_len > INT32_MAX ? "META" : "GRAPH");
        else if (!(meta = malloc(meta_len + 1)) || !(graph = malloc(graph_len + 1)) ||
                 !(blob = weight_blob(&c.w)))
            st = kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    }
    if (st == KILN_OK) {
        kiln__kmodel__model_def__pack(md, meta);
        kiln__kmodel__graph_def__pack(&gd, graph);
        km_section sec[3] = {{KM_SEC_META, 0, 0, meta_len, {0}},
                             {KM_SEC_GRAPH, 0, 0, graph_len, {0}},
                             {KM_SEC_WEIGHTS, 0, 0, (uint64_t)c.w.blob_size, {0}}};
        sec[0].offset = KM_HEADER_SIZE + 3 * KM_SECTION_ENTRY_SIZE;
        sec[1].offset = align_u64(sec[0].offset + sec[0].size, 8);
        sec[2].offset = align_u64(sec[1].offset + sec[1].size, KM_PAGE);
        const uint8_t *data[3] = {meta, graph, blob};
        for (int i = 0; i < 3 && st == KILN_OK; i++)
            if (!km_sha256(data[i], (size_t)sec[i].size, sec[i].sha256))
                st = kiln_errorf(err, KILN_ERR_INTERNAL, "SHA-256 failed");
        uint8_t head[KM_HEADER_SIZE + 3 * KM_SECTION_ENTRY_SIZE];
        memset(head, 0, sizeof(head));
        memcpy(head, KM_MAGIC, 8);
        km_put_u16(head + 8, KM_FORMAT_MAJOR);
        km_put_u16(head + 10, KM_FORMAT_MINOR);
        km_put_u32(head + 12, KM_HEADER_SIZE);
        km_put_u32(head + 16, 3);
        km_put_u32(head + 20, KM_SECTION_ENTRY_SIZE);
        km_put_u64(head + 24, sec[2].offset + sec[2].size);
        for (int i = 0; i < 3; i++) {
            uint8_t *e = head + KM_HEADER_SIZE + i * KM_SECTION_ENTRY_SIZE;
            km_put_u32(e, sec[i].kind);
            km_put_u32(e + 4, sec[i].flags);
            km_put_u64(e + 8, sec[i].offset);
            km_put_u64(e + 16, sec[i].size);
            memcpy(e + 24, sec[i].sha256, 32);
        }
        FILE *f = st == KILN_OK ? fopen(path, "wb") : NULL;
        if (st == KILN_OK && !f)
            st = kiln_errorf(err, KILN_ERR_IO, "cannot create %s: %s", path, strerror(errno));
        if (f) {
            st = write_all(f, head, sizeof(head), err);
            if (st == KILN_OK)
                st = write_all(f, meta, meta_len, err);
            if (st == KILN_OK)
                st = write_zeros(f, sec[1].offset - (sec[0].offset + sec[0].size), err);
            if (st == KILN_OK)
                st = write_all(f, graph, graph_len, err);
            if (st == KILN_OK)
                st = write_zeros(f, sec[2].offset - (sec[1].offset + sec[1].size), err);
            if (st == KILN_OK)
                st = write_all(f, blob, (size_t)c.w.blob_size, err);
            if (fclose(f) != 0 && st == KILN_OK)
                st = kiln_errorf(err, KILN_ERR_IO, "write error: %s", strerror(errno));
        }
    }
    free(meta);
    free(graph);
    free(blob);
    km_arena_free(&c.ar);
    km_weights_free(&c.w);
    return st;
}

/*
 * kmodel_read.c - load an executable model file (docs/model_format.md) into
 * a kiln graph carrying every build attribute, so that a runtime can run it
 * without compiling again (the root gets _kiln_built_model = true).
 *
 * Checks, in order, each failure a KILN_ERR_PARSE (KILN_ERR_VERSION for a
 * newer major format) naming the file and the section:
 *   magic; format version (a newer major is refused, a newer minor read);
 *   header and section table inside the file; the header's file size equals
 *   the file's; every section inside the file, after the table, not
 *   overlapping another; META, GRAPH and WEIGHTS present once each, WEIGHTS
 *   page-aligned; each section's SHA-256; protobuf decoding of META and
 *   GRAPH, with no unknown field and only UTF-8 strings; then every
 *   reference inside GRAPH (node positions, output indices, parents, dtypes,
 *   shapes, tensor sizes, weight ranges), the build attributes a runtime
 *   relies on (task kinds, the schedule) and META's agreement with it.
 * The file is mapped read-only; the constants are copied into the graph.
 * O(file size).
 */
#include "kmodel.h"
#include "kmodel.pb-c.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_RANK 64
#define MAX_ANCHORS (1u << 20)

/* ---- protobuf checks ------------------------------------------------------ */

static int utf8_ok(const unsigned char *s)
{
    while (*s) {
        unsigned c = *s++, n = c < 0x80 ? 0 : (c >> 5) == 6 ? 1 : (c >> 4) == 14 ? 2
                                           : (c >> 3) == 30                     ? 3
                                                                                : 9;
        if (n == 9 || (n && c < 0xc2 && n == 1))
            return 0;
        for (unsigned k = 0; k < n; k++, s++)
            if ((*s & 0xc0) != 0x80)
                return 0;
    }
    return 1;
}

/* Fail on an unknown field or a non-UTF-8 string anywhere in @p m. */
static kiln_status check_msg(const ProtobufCMessage *m, const char *sec, kiln_error *err)
{
    const ProtobufCMessageDescriptor *d = m->descriptor;
    if (m->n_unknown_fields)
        return kiln_errorf(err, KILN_ERR_PARSE,
                           "section %s: unknown field %u in %s (a newer kiln's file, or corrupt)",
                           sec, m->unknown_fields[0].tag, d->name);
    const char *base = (const char *)m;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        if (f->type != PROTOBUF_C_TYPE_MESSAGE && f->type != PROTOBUF_C_TYPE_STRING)
            continue;
        size_t count = 1;
        void *const *items;
        void *single;
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            memcpy(&count, base + f->quantifier_offset, sizeof(count));
            memcpy(&items, base + f->offset, sizeof(items));
        } else {
            memcpy(&single, base + f->offset, sizeof(single));
            items = &single;
        }
        for (size_t k = 0; k < count; k++) {
            if (!items[k])
                continue;
            kiln_status st = KILN_OK;
            if (f->type == PROTOBUF_C_TYPE_MESSAGE)
                st = check_msg(items[k], sec, err);
            else if (!utf8_ok(items[k]))
                st = kiln_errorf(err, KILN_ERR_PARSE, "section %s: %s.%s is not UTF-8", sec,
                                 d->name, f->name);
            if (st != KILN_OK)
                return st;
        }
    }
    return KILN_OK;
}

/* ---- building the graph ---------------------------------------------------- */

typedef struct rctx {
    const uint8_t *weights;
    uint64_t weight_size;
    kiln_error *err;
    kiln_graph **graphs; /* per GraphDef graph */
    kiln_node_id **ids;  /* per graph: node position -> id */
} rctx;

static kiln_status bad(rctx *c, kiln_graph *g, const char *node, const char *fmt, const char *what)
{
    return kiln_errorf(c->err, KILN_ERR_PARSE, "section GRAPH: graph %s%s%s: %s %s",
                       g ? kiln_graph_name(g) : "?", node ? " node " : "", node ? node : "", fmt,
                       what ? what : "");
}

static int dims_ok(const int64_t *dims, size_t n, int64_t lo)
{
    for (size_t i = 0; i < n; i++)
        if (dims[i] < lo)
            return 0;
    return 1;
}

static kiln_status set_tensor(rctx *c, kiln_attrs *a, const char *key,
                              const Kiln__Kmodel__TensorValue *t, kiln_graph *g, const char *node)
{
    if (!t || t->dtype < 0 || t->dtype >= KILN_DT_COUNT || t->n_dims > MAX_RANK ||
        !dims_ok(t->dims, t->n_dims, 0) || t->nbytes < 0)
        return bad(c, g, node, "a malformed tensor in attribute", key);
    int64_t numel = 1, bytes;
    if (kiln_dims_numel(t->dims, (uint32_t)t->n_dims, &numel) != KILN_OK ||
        (kiln_dtype_size(t->dtype) &&
         (!kiln_mul_i64(numel, (int64_t)kiln_dtype_size(t->dtype), &bytes) || bytes != t->nbytes)))
        return bad(c, g, node, "a tensor whose size does not match its shape in attribute", key);
    const void *data;
    if (t->has_weight_offset && t->weight_offset >= 0) {
        if ((uint64_t)t->weight_offset > c->weight_size ||
            (uint64_t)t->nbytes > c->weight_size - (uint64_t)t->weight_offset)
            return bad(c, g, node, "a weight range outside the WEIGHTS section in attribute", key);
        data = c->weights + t->weight_offset;
    } else {
        if ((int64_t)t->data.len != t->nbytes)
            return bad(c, g, node, "inline tensor bytes that do not match its size in attribute",
                       key);
        data = t->data.data;
    }
    kiln_tensor_value v = {(kiln_dtype)t->dtype, (uint32_t)t->n_dims, t->dims, data,
                           (size_t)t->nbytes};
    return kiln_attrs_set_tensor(a, key, &v);
}

static kiln_status set_attrs(rctx *c, kiln_attrs *a, Kiln__Kmodel__Attr *const *v, size_t n,
                             kiln_graph *g, const char *node)
{
    if (n && !a)
        return kiln_errorf(c->err, KILN_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const Kiln__Kmodel__Attr *m = v[i];
        const char *key = m->key;
        if (!key || !key[0])
            return bad(c, g, node, "an attribute without a key", NULL);
        kiln_status st;
        switch (m->type) {
        case KILN_ATTR_BOOL: st = kiln_attrs_set_bool(a, key, m->b); break;
        case KILN_ATTR_INT: st = kiln_attrs_set_int(a, key, m->i); break;
        case KILN_ATTR_FLOAT: st = kiln_attrs_set_float(a, key, m->f); break;
        case KILN_ATTR_STRING: st = kiln_attrs_set_string(a, key, m->s ? m->s : ""); break;
        case KILN_ATTR_DTYPE:
            if (m->i < 0 || m->i >= KILN_DT_COUNT)
                return bad(c, g, node, "a bad dtype in attribute", key);
            st = kiln_attrs_set_dtype(a, key, (kiln_dtype)m->i);
            break;
        case KILN_ATTR_LIST_INT:
            st = kiln_attrs_set_list_int(a, key, m->ints, (uint32_t)m->n_ints);
            break;
        case KILN_ATTR_LIST_FLOAT:
            st = kiln_attrs_set_list_float(a, key, m->floats, (uint32_t)m->n_floats);
            break;
        case KILN_ATTR_LIST_STRING:
            for (size_t k = 0; k < m->n_strs; k++)
                if (!m->strs[k])
                    return bad(c, g, node, "a missing string in attribute", key);
            st = kiln_attrs_set_list_string(a, key, (const char *const *)m->strs,
                                            (uint32_t)m->n_strs);
            break;
        case KILN_ATTR_LIST_BOOL:
            st = kiln_attrs_set_list_bool(a, key, m->bools.data, (uint32_t)m->bools.len);
            break;
        case KILN_ATTR_LIST_LIST_INT: {
            const int64_t **lists = calloc(m->n_lists + 1, sizeof(*lists));
            uint32_t *lens = calloc(m->n_lists + 1, sizeof(*lens));
            st = lists && lens ? KILN_OK : KILN_ERR_NOMEM;
            for (size_t k = 0; st == KILN_OK && k < m->n_lists; k++) {
                lists[k] = m->lists[k]->v;
                lens[k] = (uint32_t)m->lists[k]->n_v;
            }
            if (st == KILN_OK)
                st = kiln_attrs_set_list_list_int(a, key, lists, lens, (uint32_t)m->n_lists);
            free(lists);
            free(lens);
            break;
        }
        case KILN_ATTR_TENSOR:
            st = set_tensor(c, a, key, m->tensor, g, node);
            if (st != KILN_OK && kiln_error_code(c->err) != KILN_OK)
                return st;
            break;
        default: return bad(c, g, node, "an unknown attribute type in attribute", key);
        }
        if (st != KILN_OK)
            return kiln_errorf(c->err, st == KILN_ERR_NOMEM ? st : KILN_ERR_PARSE,
                               "section GRAPH: graph %s: cannot set attribute %s", kiln_graph_name(g),
                               key);
    }
    return KILN_OK;
}

static kiln_status set_desc(rctx *c, kiln_graph *g, kiln_tensor_desc *d,
                            const Kiln__Kmodel__TensorDesc *m, const char *node)
{
    if (!m || m->dtype < 0 || m->dtype >= KILN_DT_COUNT || m->rank < -1 || m->rank > MAX_RANK ||
        (m->rank >= 0 ? (size_t)m->rank != m->n_dims : m->n_dims != 0) ||
        !dims_ok(m->dims, m->n_dims, -1) || m->ref_input < -1 || m->ref_input > 32767)
        return bad(c, g, node, "a malformed tensor descriptor", NULL);
    kiln_status st = kiln_desc_set_dtype(g, d, (kiln_dtype)m->dtype);
    if (st == KILN_OK)
        st = kiln_desc_set_shape(g, d, m->rank, m->dims);
    if (st == KILN_OK)
        st = kiln_desc_set_ref_input(g, d, m->ref_input);
    if (st != KILN_OK)
        return kiln_errorf(c->err, st, "section GRAPH: graph %s node %s: cannot set a descriptor",
                           kiln_graph_name(g), node);
    const kiln_attrs *cur = kiln_desc_attrs(d); /* an input's copy of its producer's */
    if (cur && kiln_attrs_count(cur))
        kiln_attrs_clear(kiln_desc_attrs_mut(g, d));
    kiln_desc_set_format(g, d, m->format ? m->format : "ND");
    kiln_desc_set_size(g, d, m->size);
    kiln_desc_set_offset(g, d, m->offset);
    kiln_desc_set_memory_type(g, d, m->memory_type);
    return set_attrs(c, m->n_attrs ? kiln_desc_attrs_mut(g, d) : NULL, m->attrs, m->n_attrs, g,
                     node);
}

/* Nodes of graph @p gi (created), then edges, descriptors and attributes. */
static kiln_status build_graph(rctx *c, const Kiln__Kmodel__Graph *m, uint32_t gi)
{
    kiln_graph *g = c->graphs[gi];
    kiln_node_id *ids = c->ids[gi] = calloc(m->n_nodes + 1, sizeof(*ids));
    if (!ids)
        return kiln_errorf(c->err, KILN_ERR_NOMEM, "out of memory");
    for (size_t k = 0; k < m->n_nodes; k++) {
        const Kiln__Kmodel__Node *nm = m->nodes[k];
        if (!nm->name || !nm->name[0] || !nm->op || !nm->op[0] ||
            nm->n_src_nodes != nm->n_src_outputs || nm->n_src_nodes > MAX_ANCHORS ||
            nm->n_outputs > MAX_ANCHORS)
            return bad(c, g, nm->name, "a malformed node", NULL);
        if (!(ids[k] = kiln_graph_add_node(g, nm->name, nm->op, (uint32_t)nm->n_src_nodes,
                                           (uint32_t)nm->n_outputs)))
            return kiln_graph_find_node(g, nm->name)
                       ? bad(c, g, nm->name, "a second node with this name", NULL)
                       : kiln_errorf(c->err, KILN_ERR_NOMEM, "out of memory");
    }
    for (size_t k = 0; k < m->n_nodes; k++) {
        const Kiln__Kmodel__Node *nm = m->nodes[k];
        kiln_node_id n = ids[k];
        for (size_t i = 0; i < nm->n_src_nodes; i++) {
            uint32_t s = nm->src_nodes[i];
            if (!s)
                continue;
            if (s > m->n_nodes || nm->src_outputs[i] >= kiln_node_output_count(g, ids[s - 1]))
                return bad(c, g, nm->name, "an input from a node or output that does not exist",
                           NULL);
            if (kiln_edge_add(g, ids[s - 1], nm->src_outputs[i], n, (uint32_t)i) != KILN_OK)
                return kiln_errorf(c->err, KILN_ERR_NOMEM, "out of memory");
        }
        for (size_t i = 0; i < nm->n_control_inputs; i++) {
            uint32_t s = nm->control_inputs[i];
            if (s >= m->n_nodes || ids[s] == n)
                return bad(c, g, nm->name, "a control input that does not exist", NULL);
            if (kiln_ctrl_add(g, ids[s], n) != KILN_OK)
                return kiln_errorf(c->err, KILN_ERR_NOMEM, "out of memory");
        }
    }
    for (size_t k = 0; k < m->n_nodes; k++) {
        const Kiln__Kmodel__Node *nm = m->nodes[k];
        kiln_node_id n = ids[k];
        kiln_status st = KILN_OK;
        for (size_t o = 0; st == KILN_OK && o < nm->n_outputs; o++)
            st = set_desc(c, g, kiln_node_output_desc(g, n, (uint32_t)o), nm->outputs[o], nm->name);
        for (size_t i = 0; st == KILN_OK && i < nm->n_input_descs; i++) {
            const Kiln__Kmodel__InputDesc *in = nm->input_descs[i];
            if (in->index >= nm->n_src_nodes)
                return bad(c, g, nm->name, "a descriptor of an input that does not exist", NULL);
            kiln_tensor_desc *d = kiln_node_input_desc_mut(g, n, in->index);
            st = d ? set_desc(c, g, d, in->desc, nm->name)
                   : kiln_errorf(c->err, KILN_ERR_NOMEM, "out of memory");
        }
        if (st == KILN_OK && nm->n_attrs)
            st = set_attrs(c, kiln_node_attrs_mut(g, n), nm->attrs, nm->n_attrs, g, nm->name);
        if (st != KILN_OK)
            return st;
    }
    kiln_status st = set_attrs(c, m->n_attrs ? kiln_graph_attrs(g) : NULL, m->attrs, m->n_attrs,
                               g, NULL);
    const kiln_node_id *order;
    uint32_t count;
    if (st == KILN_OK && (st = kiln_graph_topo_order(g, &order, &count, c->err)) != KILN_OK)
        kiln_error_push(c->err, "section GRAPH: graph %s", kiln_graph_name(g));
    return st;
}

/*
 * The build attributes a runtime relies on: every `_kiln_task_kind` a
 * kiln_task_kind, and the root's schedule valid (kiln_schedule_get: order,
 * streams, events).  O(n x streams).
 */
static kiln_status check_build_attrs(rctx *c, kiln_graph *root, uint32_t ngraphs)
{
    for (uint32_t gi = 0; gi < ngraphs; gi++) {
        kiln_graph *g = c->graphs[gi];
        for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n)) {
            const kiln_attrs *a = kiln_node_attrs(g, n);
            int64_t kind;
            if (kiln_attrs_has(a, "_kiln_task_kind") &&
                (!kiln_attrs_get_int(a, "_kiln_task_kind", &kind) || kind < 0 ||
                 kind >= KILN_TASK_KIND_COUNT))
                return bad(c, g, kiln_node_name_str(g, n),
                           "_kiln_task_kind is not a kiln_task_kind", NULL);
        }
    }
    const kiln_schedule *s;
    kiln_status st = kiln_schedule_get(root, &s, c->err);
    if (st != KILN_OK)
        kiln_error_push(c->err, "section GRAPH: the schedule");
    return st;
}

static kiln_status build(rctx *c, kiln_graph *root, const Kiln__Kmodel__GraphDef *gd)
{
    if (gd->n_graphs == 0 || gd->n_graphs > MAX_ANCHORS)
        return kiln_errorf(c->err, KILN_ERR_PARSE, "section GRAPH: %zu graphs", gd->n_graphs);
    c->graphs = calloc(gd->n_graphs, sizeof(*c->graphs));
    c->ids = calloc(gd->n_graphs, sizeof(*c->ids));
    if (!c->graphs || !c->ids)
        return kiln_errorf(c->err, KILN_ERR_NOMEM, "out of memory");
    c->graphs[0] = root;
    if (gd->graphs[0]->parent_graph != -1)
        return kiln_errorf(c->err, KILN_ERR_PARSE, "section GRAPH: graph 0 is not the root");
    for (size_t gi = 0; gi < gd->n_graphs; gi++) {
        const Kiln__Kmodel__Graph *m = gd->graphs[gi];
        if (gi) {
            int32_t p = m->parent_graph;
            if (p < 0 || (size_t)p >= gi || m->parent_node >= gd->graphs[p]->n_nodes || !m->name ||
                !m->name[0] || !m->role || !m->role[0])
                return kiln_errorf(c->err, KILN_ERR_PARSE,
                                   "section GRAPH: subgraph %zu (%s) has no valid parent node, "
                                   "name or role",
                                   gi, m->name ? m->name : "");
            if (!(c->graphs[gi] = kiln_node_add_subgraph(c->graphs[p], c->ids[p][m->parent_node],
                                                         m->role, m->name)))
                return kiln_errorf(c->err, KILN_ERR_PARSE,
                                   "section GRAPH: cannot add subgraph %s (a duplicate name?)",
                                   m->name);
        }
        kiln_status st = build_graph(c, m, (uint32_t)gi);
        if (st != KILN_OK)
            return st;
    }
    return check_build_attrs(c, root, (uint32_t)gd->n_graphs);
}

/* ---- META into the root's info attributes ---------------------------------- */

static kiln_status set_info(kiln_graph *g, const Kiln__Kmodel__ModelDef *md, const km_section *sec,
                            uint32_t nsec, uint16_t major, uint16_t minor, kiln_error *err)
{
    kiln_attrs *a = kiln_graph_attrs(g);
    if (!a)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    char ver[32];
    snprintf(ver, sizeof(ver), "%u.%u", major, minor);
    const char *names[KM_MAX_SECTIONS];
    char hex[KM_MAX_SECTIONS][65];
    const char *hexp[KM_MAX_SECTIONS];
    int64_t sizes[KM_MAX_SECTIONS], offs[KM_MAX_SECTIONS];
    char unk[KM_MAX_SECTIONS][16];
    for (uint32_t i = 0; i < nsec; i++) {
        names[i] = km_section_name(sec[i].kind, unk[i], sizeof(unk[i]));
        sizes[i] = (int64_t)sec[i].size;
        offs[i] = (int64_t)sec[i].offset;
        for (int k = 0; k < 32; k++)
            snprintf(hex[i] + 2 * k, 3, "%02x", sec[i].sha256[k]);
        hexp[i] = hex[i];
    }
    const Kiln__Kmodel__SubModel *rm = md->n_models ? md->models[0] : NULL;
    int64_t tasks[1024];
    uint32_t nst = rm && rm->n_streams < 1024 ? (uint32_t)rm->n_streams : 0;
    for (uint32_t i = 0; i < nst; i++)
        tasks[i] = (int64_t)rm->streams[i]->n_tasks;
    int64_t all_tasks = 0;
    for (size_t m = 0; m < md->n_models; m++)
        for (size_t i = 0; i < md->models[m]->n_streams; i++)
            all_tasks += (int64_t)md->models[m]->streams[i]->n_tasks;
    int64_t events = 0;
    for (uint32_t i = 0; i < nst; i++)
        for (size_t t = 0; t < rm->streams[i]->n_tasks; t++)
            events += rm->streams[i]->tasks[t]->kind == KILN_TASK_EVENT_RECORD ||
                      rm->streams[i]->tasks[t]->kind == KILN_TASK_EVENT_WAIT;
    const char *mtypes[64];
    int64_t msizes[64], mloads[64];
    uint32_t nm = md->n_memory < 64 ? (uint32_t)md->n_memory : 64;
    for (uint32_t i = 0; i < nm; i++) {
        mtypes[i] = md->memory[i]->type ? md->memory[i]->type : "";
        msizes[i] = md->memory[i]->size;
        mloads[i] = md->memory[i]->load;
    }
    kiln_status st = kiln_attrs_set_bool(a, KM_ATTR_BUILT, true);
#define SET(call)                                                                                  \
    if (st == KILN_OK)                                                                             \
    st = (call)
    SET(kiln_attrs_set_string(a, KM_INFO_PREFIX "format", ver));
    SET(kiln_attrs_set_string(a, KM_INFO_PREFIX "name", md->name ? md->name : ""));
    SET(kiln_attrs_set_string(a, KM_INFO_PREFIX "producer", md->producer ? md->producer : ""));
    SET(kiln_attrs_set_list_string(a, KM_INFO_PREFIX "sections", names, nsec));
    SET(kiln_attrs_set_list_int(a, KM_INFO_PREFIX "section_offsets", offs, nsec));
    SET(kiln_attrs_set_list_int(a, KM_INFO_PREFIX "section_sizes", sizes, nsec));
    SET(kiln_attrs_set_list_string(a, KM_INFO_PREFIX "section_sha256", hexp, nsec));
    SET(kiln_attrs_set_int(a, KM_INFO_PREFIX "streams", md->stream_num));
    SET(kiln_attrs_set_int(a, KM_INFO_PREFIX "events", md->event_num));
    SET(kiln_attrs_set_int(a, KM_INFO_PREFIX "event_tasks", events));
    SET(kiln_attrs_set_list_int(a, KM_INFO_PREFIX "stream_tasks", tasks, nst));
    SET(kiln_attrs_set_int(a, KM_INFO_PREFIX "models", (int64_t)md->n_models));
    SET(kiln_attrs_set_int(a, KM_INFO_PREFIX "tasks", all_tasks));
    SET(kiln_attrs_set_int(a, KM_INFO_PREFIX "nodes", md->node_count));
    SET(kiln_attrs_set_int(a, KM_INFO_PREFIX "weight_size", md->weight_size));
    SET(kiln_attrs_set_int(a, KM_INFO_PREFIX "weight_constants", md->weight_constants));
    SET(kiln_attrs_set_int(a, KM_INFO_PREFIX "weight_deduplicated", md->weight_deduplicated));
    SET(kiln_attrs_set_list_string(a, KM_INFO_PREFIX "memory_types", mtypes, nm));
    SET(kiln_attrs_set_list_int(a, KM_INFO_PREFIX "memory_sizes", msizes, nm));
    SET(kiln_attrs_set_list_int(a, KM_INFO_PREFIX "memory_loads", mloads, nm));
#undef SET
    return st == KILN_OK ? st : kiln_errorf(err, st, "out of memory");
}

/* META's models against GRAPH: one per graph in order, every task's kind
 * known and its node the one at its position.  O(tasks). */
static kiln_status check_models(const Kiln__Kmodel__ModelDef *md,
                                const Kiln__Kmodel__GraphDef *gd, kiln_error *err)
{
    for (size_t i = 0; i < md->n_models; i++) {
        const Kiln__Kmodel__SubModel *sm = md->models[i];
        const Kiln__Kmodel__Graph *gm = gd->graphs[i];
        if (sm->graph_index != i)
            return kiln_errorf(err, KILN_ERR_PARSE, "section META: model %zu is for graph %u", i,
                               sm->graph_index);
        for (size_t k = 0; k < sm->n_streams; k++)
            for (size_t t = 0; t < sm->streams[k]->n_tasks; t++) {
                const Kiln__Kmodel__TaskDef *td = sm->streams[k]->tasks[t];
                if (td->kind >= KILN_TASK_KIND_COUNT || td->node_index >= gm->n_nodes ||
                    !td->node || !gm->nodes[td->node_index]->name ||
                    strcmp(td->node, gm->nodes[td->node_index]->name) != 0)
                    return kiln_errorf(err, KILN_ERR_PARSE,
                                       "section META: model %zu stream %zu task %zu: a bad kind "
                                       "or a node that is not in graph %s",
                                       i, k, t, gm->name ? gm->name : "?");
                for (size_t q = 0; q < td->n_subgraph_models; q++)
                    if (td->subgraph_models[q] == 0 || td->subgraph_models[q] >= md->n_models)
                        return kiln_errorf(err, KILN_ERR_PARSE,
                                           "section META: model %zu stream %zu task %zu names "
                                           "model %u, which does not exist",
                                           i, k, t, td->subgraph_models[q]);
            }
    }
    return KILN_OK;
}

/* ---- the file ----------------------------------------------------------------- */

static kiln_status load(kiln_graph *g, const uint8_t *buf, size_t len, kiln_error *err)
{
    if (len < KM_HEADER_SIZE)
        return kiln_errorf(err, KILN_ERR_PARSE,
                           "truncated: %zu bytes, less than the %d-byte header of a model file",
                           len, KM_HEADER_SIZE);
    if (memcmp(buf, KM_MAGIC, 8) != 0)
        return kiln_errorf(err, KILN_ERR_PARSE, "not a kiln model file (bad magic)");
    uint16_t major = km_get_u16(buf + 8), minor = km_get_u16(buf + 10);
    if (major > KM_FORMAT_MAJOR)
        return kiln_errorf(err, KILN_ERR_VERSION,
                           "model format %u.%u is newer than this kiln reads (%d.x): rebuild the "
                           "model with this kiln",
                           major, minor, KM_FORMAT_MAJOR);
    if (major == 0)
        return kiln_errorf(err, KILN_ERR_PARSE, "header: model format 0.%u does not exist", minor);
    uint32_t hsize = km_get_u32(buf + 12), nsec = km_get_u32(buf + 16),
             esize = km_get_u32(buf + 20);
    uint64_t fsize = km_get_u64(buf + 24);
    if (hsize < KM_HEADER_SIZE || hsize > len || esize < KM_SECTION_ENTRY_SIZE || esize > 4096 ||
        nsec == 0 || nsec > KM_MAX_SECTIONS)
        return kiln_errorf(err, KILN_ERR_PARSE,
                           "header: bad header size %u, section entry size %u or section count %u",
                           hsize, esize, nsec);
    uint64_t table_end = (uint64_t)hsize + (uint64_t)nsec * esize;
    if (table_end > len)
        return kiln_errorf(err, KILN_ERR_PARSE,
                           "truncated: the section table ends at byte %llu, the file has %zu",
                           (unsigned long long)table_end, len);
    if (fsize != len)
        return kiln_errorf(err, KILN_ERR_PARSE,
                           "%s: the header says %llu bytes, the file has %zu",
                           fsize > len ? "truncated" : "trailing bytes", (unsigned long long)fsize,
                           len);
    km_section sec[KM_MAX_SECTIONS];
    int have[4] = {-1, -1, -1, -1};
    char nb[16];
    for (uint32_t i = 0; i < nsec; i++) {
        const uint8_t *e = buf + hsize + (size_t)i * esize;
        sec[i].kind = km_get_u32(e);
        sec[i].flags = km_get_u32(e + 4);
        sec[i].offset = km_get_u64(e + 8);
        sec[i].size = km_get_u64(e + 16);
        memcpy(sec[i].sha256, e + 24, 32);
        const char *name = km_section_name(sec[i].kind, nb, sizeof(nb));
        if (sec[i].offset < table_end || sec[i].offset > len || sec[i].size > len - sec[i].offset)
            return kiln_errorf(err, KILN_ERR_PARSE,
                               "section %s: bytes [%llu, +%llu) are outside the file's data "
                               "(%llu..%zu)",
                               name, (unsigned long long)sec[i].offset,
                               (unsigned long long)sec[i].size, (unsigned long long)table_end, len);
        for (uint32_t k = 0; k < i; k++)
            if (sec[i].size && sec[k].size && sec[i].offset < sec[k].offset + sec[k].size &&
                sec[k].offset < sec[i].offset + sec[i].size) {
                char nb2[16];
                return kiln_errorf(err, KILN_ERR_PARSE, "section %s overlaps section %s", name,
                                   km_section_name(sec[k].kind, nb2, sizeof(nb2)));
            }
        if (sec[i].kind >= KM_SEC_META && sec[i].kind <= KM_SEC_WEIGHTS) {
            if (have[sec[i].kind] >= 0)
                return kiln_errorf(err, KILN_ERR_PARSE, "section %s appears twice", name);
            have[sec[i].kind] = (int)i;
        }
        uint8_t d[32];
        if (!km_sha256(buf + sec[i].offset, (size_t)sec[i].size, d))
            return kiln_errorf(err, KILN_ERR_INTERNAL, "SHA-256 failed");
        if (memcmp(d, sec[i].sha256, 32) != 0)
            return kiln_errorf(err, KILN_ERR_PARSE,
                               "section %s: SHA-256 mismatch (the file is corrupt)", name);
    }
    for (int k = KM_SEC_META; k <= KM_SEC_WEIGHTS; k++)
        if (have[k] < 0)
            return kiln_errorf(err, KILN_ERR_PARSE, "section %s is missing",
                               km_section_name((uint32_t)k, nb, sizeof(nb)));
    const km_section *ws = &sec[have[KM_SEC_WEIGHTS]], *ms = &sec[have[KM_SEC_META]],
                     *gs = &sec[have[KM_SEC_GRAPH]];
    if (ws->offset % KM_PAGE)
        return kiln_errorf(err, KILN_ERR_PARSE, "section WEIGHTS: offset %llu is not page-aligned",
                           (unsigned long long)ws->offset);
    Kiln__Kmodel__ModelDef *md =
        kiln__kmodel__model_def__unpack(NULL, (size_t)ms->size, buf + ms->offset);
    if (!md)
        return kiln_errorf(err, KILN_ERR_PARSE, "section META: protobuf decoding failed");
    Kiln__Kmodel__GraphDef *gd =
        kiln__kmodel__graph_def__unpack(NULL, (size_t)gs->size, buf + gs->offset);
    kiln_status st = KILN_OK;
    if (!gd)
        st = kiln_errorf(err, KILN_ERR_PARSE, "section GRAPH: protobuf decoding failed");
    if (st == KILN_OK)
        st = check_msg(&md->base, "META", err);
    if (st == KILN_OK)
        st = check_msg(&gd->base, "GRAPH", err);
    if (st == KILN_OK && (md->weight_size < 0 || (uint64_t)md->weight_size != ws->size))
        st = kiln_errorf(err, KILN_ERR_PARSE,
                         "section META: weight size %lld, the WEIGHTS section has %llu bytes",
                         (long long)md->weight_size, (unsigned long long)ws->size);
    if (st == KILN_OK && md->n_models != gd->n_graphs)
        st = kiln_errorf(err, KILN_ERR_PARSE,
                         "section META: %zu models for the %zu graphs of section GRAPH",
                         md->n_models, gd->n_graphs);
    if (st == KILN_OK)
        st = check_models(md, gd, err);
    rctx c = {buf + ws->offset, ws->size, err, NULL, NULL};
    if (st == KILN_OK)
        st = build(&c, g, gd);
    if (st == KILN_OK)
        st = set_info(g, md, sec, nsec, major, minor, err);
    for (size_t i = 0; c.ids && gd && i < gd->n_graphs; i++)
        free(c.ids[i]);
    free(c.ids);
    free(c.graphs);
    if (gd)
        kiln__kmodel__graph_def__free_unpacked(gd, NULL);
    kiln__kmodel__model_def__free_unpacked(md, NULL);
    return st;
}

kiln_status km_import_buffer(kiln_graph *g, const uint8_t *buf, size_t len, const char *name,
                             kiln_error *err)
{
    kiln_status st = load(g, buf, len, err);
    if (st != KILN_OK)
        kiln_error_push(err, "%s", name);
    return st;
}

kiln_status km_import_file(kiln_graph *g, const char *path, kiln_error *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        kiln_errorf(err, KILN_ERR_IO, "cannot open: %s", strerror(errno));
        return kiln_error_push(err, "%s", path);
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        kiln_errorf(err, KILN_ERR_IO, "not a regular file");
        return kiln_error_push(err, "%s", path);
    }
    size_t len = (size_t)sb.st_size;
    if (len == 0) {
        close(fd);
        return km_import_buffer(g, (const uint8_t *)"", 0, path, err);
    }
    void *p = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        kiln_errorf(err, KILN_ERR_IO, "cannot map: %s", strerror(errno));
        return kiln_error_push(err, "%s", path);
    }
    kiln_status st = km_import_buffer(g, p, len, path, err);
    munmap(p, len);
    return st;
}

/*
 * onnx_export.c - kiln graph -> ONNX ModelProto (the inverse of onnx_import.c).
 *
 * Per graph, first every output anchor gets its ONNX value name (the desc
 * attribute _onnx_name when present, else the node name, else "node:k"; made
 * unique across the whole model, as ONNX requires), then the GraphProto is
 * filled: Data nodes -> graph inputs (root: ordered by `index`), Const nodes
 * -> initializers (or Constant nodes when they carry _onnx_constant), the
 * NetOutput inputs -> graph outputs, everything else -> NodeProto in id order
 * when that order is topological (it is for imported graphs, which keeps
 * round trips exact), otherwise in kiln's topological order.  Subgraph Data
 * nodes that stand for captured outer values are not written: the subgraph
 * refers to the outer value by name.  While nodes with _onnx_op "Loop" become
 * Loop again.  Control edges have no ONNX equivalent and only constrain the
 * order.  Everything is allocated in one arena; tensor data is borrowed from
 * the graph.
 */
#include "onnx_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct gexp gexp;
struct gexp {
    kiln_graph *g;
    gexp *parent;
    kiln_node_id owner;
    uint32_t loop_formals; /* 2 + N for a Loop body, 0 otherwise */
    bool is_body;
    const char ***names; /* [node id][output] */
};

typedef struct exporter {
    ox_arena *a;
    kiln_error *err;
    ox_map used; /* every value name of the model */
} exporter;

static kiln_status emit_graph(exporter *ex, gexp *ge, Onnx__GraphProto *gp);

static kiln_status oom(exporter *ex)
{
    return kiln_errorf(ex->err, KILN_ERR_NOMEM, "out of memory");
}

static bool op_is(const kiln_graph *g, kiln_node_id n, const char *op)
{
    return strcmp(kiln_node_op_str(g, n), op) == 0;
}

static bool is_constant_node(const kiln_graph *g, kiln_node_id n)
{
    bool b = false;
    return op_is(g, n, "Const") && kiln_attrs_get_bool(kiln_node_attrs(g, n), OX_ATTR_CONSTANT, &b) && b;
}

/* Written as a NodeProto (not an input, initializer or output). */
static bool is_exported_node(const kiln_graph *g, kiln_node_id n)
{
    if (op_is(g, n, "Data") || op_is(g, n, "NetOutput"))
        return false;
    return !op_is(g, n, "Const") || is_constant_node(g, n);
}

static int64_t int_attr(const kiln_graph *g, kiln_node_id n, const char *key, int64_t dflt)
{
    int64_t v = dflt;
    kiln_attrs_get_int(kiln_node_attrs(g, n), key, &v);
    return v;
}

/* A model-unique copy of @p want (want, want_1, want_2, ...). */
static const char *claim_name(exporter *ex, const char *want)
{
    char *name = ox_arena_strdup(ex->a, want);
    for (uint32_t k = 1; name && ox_map_get(&ex->used, name, NULL); k++)
        name = ox_arena_printf(ex->a, "%s_%u", want, k);
    if (!name || !ox_map_put(&ex->used, name, 1))
        return NULL;
    return name;
}

/* ---- value names ------------------------------------------------------------- */

static kiln_status assign_names(exporter *ex, gexp *ge)
{
    kiln_graph *g = ge->g;
    uint32_t limit = kiln_graph_id_limit(g);
    ge->names = ox_arena_alloc(ex->a, (size_t)limit * sizeof(*ge->names));
    if (!ge->names)
        return oom(ex);
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n)) {
        uint32_t nout = kiln_node_output_count(g, n);
        const char **arr = ox_arena_alloc(ex->a, (nout ? nout : 1) * sizeof(*arr));
        if (!arr)
            return oom(ex);
        ge->names[n] = arr;
        const char *nn = kiln_node_name_str(g, n);
        bool data = op_is(g, n, "Data");
        if (data && ge->parent) {
            int64_t idx = int_attr(g, n, OX_ATTR_PARENT, -1);
            if (!(ge->is_body && idx >= 0 && idx < (int64_t)ge->loop_formals)) {
                kiln_anchor p = idx >= 0 ? kiln_node_input_peer(ge->parent->g, ge->owner,
                                                                (uint32_t)idx)
                                         : (kiln_anchor){0, 0};
                if (!p.node)
                    return kiln_errorf(ex->err, KILN_ERR_INVALID,
                                       "subgraph Data node '%s' maps to input %lld of '%s', "
                                       "which is not connected",
                                       nn, (long long)idx,
                                       kiln_node_name_str(ge->parent->g, ge->owner));
                arr[0] = ge->parent->names[p.node][p.index];
                continue;
            }
        }
        for (uint32_t k = 0; k < nout; k++) {
            const char *want = NULL;
            kiln_attrs_get_string(kiln_desc_attrs(kiln_node_output_desc(g, n, k)), OX_ATTR_NAME,
                                  &want);
            bool used = kiln_node_output_use_count(g, n, k) > 0;
            if (want && !want[0] && !used) {
                arr[k] = "";
                continue;
            }
            if (!want || !want[0])
                want = nout == 1 ? nn : ox_arena_printf(ex->a, "%s:%u", nn, k);
            if (!want || !(arr[k] = claim_name(ex, want)))
                return oom(ex);
        }
    }
    return KILN_OK;
}

static const char *value_of(const gexp *ge, kiln_node_id n, uint32_t i)
{
    kiln_anchor p = kiln_node_input_peer(ge->g, n, i);
    return p.node ? ge->names[p.node][p.index] : "";
}

/* ---- helpers building messages ----------------------------------------------- */

static Onnx__ValueInfoProto *value_info(exporter *ex, const char *name,
                                        const kiln_tensor_desc *d, bool with_type)
{
    Onnx__ValueInfoProto *vi = ox_arena_alloc(ex->a, sizeof(*vi));
    if (!vi)
        return NULL;
    onnx__value_info_proto__init(vi);
    vi->name = (char *)(uintptr_t)name;
    if (with_type && d && !(vi->type = ox_type_make(ex->a, d)))
        return NULL;
    return vi;
}

static Onnx__AttributeProto *graph_attr(exporter *ex, const char *name, Onnx__GraphProto *sub)
{
    Onnx__AttributeProto *ap = ox_arena_alloc(ex->a, sizeof(*ap));
    if (!ap)
        return NULL;
    onnx__attribute_proto__init(ap);
    ap->name = (char *)(uintptr_t)name;
    ap->has_type = 1;
    ap->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH;
    ap->g = sub;
    return ap;
}

/* Export subgraph @p role of node @p n as an attribute of @p np. */
static kiln_status sub_attr(exporter *ex, gexp *ge, kiln_node_id n, const char *role,
                            Onnx__NodeProto *np)
{
    kiln_graph *sg = NULL;
    for (uint32_t i = 0; i < kiln_node_subgraph_count(ge->g, n); i++) {
        const char *r = NULL;
        kiln_graph *c = kiln_node_subgraph(ge->g, n, i, &r);
        if (r && strcmp(r, role) == 0)
            sg = c;
    }
    if (!sg)
        return kiln_errorf(ex->err, KILN_ERR_INVALID, "node '%s' (%s) has no %s subgraph",
                           kiln_node_name_str(ge->g, n), kiln_node_op_str(ge->g, n), role);
    gexp child = {.g = sg, .parent = ge, .owner = n};
    if (op_is(ge->g, n, "While")) {
        child.is_body = true;
        child.loop_formals = (uint32_t)(2 + int_attr(ge->g, n, OX_ATTR_LOOP_CARRIED, 0));
    }
    Onnx__GraphProto *sub = ox_arena_alloc(ex->a, sizeof(*sub));
    if (!sub)
        return oom(ex);
    onnx__graph_proto__init(sub);
    kiln_status st = assign_names(ex, &child);
    if (st == KILN_OK)
        st = emit_graph(ex, &child, sub);
    if (st != KILN_OK)
        return st;
    Onnx__AttributeProto *ap = graph_attr(ex, role, sub);
    if (!ap)
        return oom(ex);
    np->attribute[np->n_attribute++] = ap;
    return KILN_OK;
}

/* ---- nodes ------------------------------------------------------------------- */

static kiln_status emit_node(exporter *ex, gexp *ge, kiln_node_id n, Onnx__NodeProto *np)
{
    kiln_graph *g = ge->g;
    const char *nn = kiln_node_name_str(g, n);
    const char *op = kiln_node_op_str(g, n);
    const kiln_attrs *attrs = kiln_node_attrs(g, n);
    bool is_if = strcmp(op, "If") == 0, is_loop = false, is_const = is_constant_node(g, n);
    uint32_t nin = kiln_node_input_count(g, n), nout = kiln_node_output_count(g, n);
    uint32_t first_out = 0;
    if (strcmp(op, "While") == 0) {
        const char *orig = NULL;
        if (!kiln_attrs_get_string(attrs, OX_ATTR_OP, &orig) || strcmp(orig, "Loop") != 0)
            return kiln_errorf(ex->err, KILN_ERR_UNSUPPORTED,
                               "node '%s' (While): only While nodes imported from ONNX Loop "
                               "(attr _onnx_op \"Loop\") can be written to ONNX",
                               nn);
        is_loop = true;
        nin = (uint32_t)(2 + int_attr(g, n, OX_ATTR_LOOP_CARRIED, 0));
        first_out = 1;
        if (nout < 1 || nin > kiln_node_input_count(g, n))
            return kiln_errorf(ex->err, KILN_ERR_INVALID, "node '%s' (While): malformed Loop", nn);
        if (kiln_node_output_use_count(g, n, 0))
            return kiln_errorf(ex->err, KILN_ERR_UNSUPPORTED,
                               "node '%s' (While): its final-condition output 0 is used, which "
                               "ONNX Loop cannot express",
                               nn);
    } else if (is_if) {
        nin = nin ? 1 : 0;
    } else if (kiln_node_subgraph_count(g, n)) {
        return kiln_errorf(ex->err, KILN_ERR_UNSUPPORTED,
                           "node '%s' (%s): subgraphs are written to ONNX only for If and Loop",
                           nn, op);
    }
    np->name = (char *)(uintptr_t)nn;
    np->op_type = (char *)(uintptr_t)(is_const ? "Constant" : is_loop ? "Loop" : op);
    const char *dom = NULL;
    if (kiln_attrs_get_string(attrs, OX_ATTR_DOMAIN, &dom))
        np->domain = (char *)(uintptr_t)dom;
    np->n_input = nin;
    np->n_output = nout - first_out;
    np->input = ox_arena_alloc(ex->a, (nin + 1) * sizeof(char *));
    np->output = ox_arena_alloc(ex->a, (nout + 1) * sizeof(char *));
    if (!np->input || !np->output)
        return oom(ex);
    for (uint32_t i = 0; i < nin; i++)
        np->input[i] = (char *)(uintptr_t)value_of(ge, n, i);
    for (uint32_t o = first_out; o < nout; o++)
        np->output[o - first_out] = (char *)(uintptr_t)ge->names[n][o];
    Onnx__AttributeProto **list = NULL;
    size_t count = 0;
    kiln_status st;
    if (is_const) {
        kiln_tensor_value v;
        if (!kiln_attrs_get_tensor(attrs, "value", &v))
            return kiln_errorf(ex->err, KILN_ERR_INVALID, "node '%s' (Const) has no tensor 'value'",
                               nn);
    }
    if ((st = ox_attrs_export(ex->a, attrs, NULL, nn, &list, &count, ex->err)) != KILN_OK)
        return st;
    np->attribute = ox_arena_alloc(ex->a, (count + 2) * sizeof(*np->attribute));
    if (!np->attribute)
        return oom(ex);
    if (count)
        memcpy(np->attribute, list, count * sizeof(*list));
    np->n_attribute = count;
    if (is_if && ((st = sub_attr(ex, ge, n, "then_branch", np)) != KILN_OK ||
                  (st = sub_attr(ex, ge, n, "else_branch", np)) != KILN_OK))
        return st;
    if (is_loop && (st = sub_attr(ex, ge, n, "body", np)) != KILN_OK)
        return st;
    return KILN_OK;
}

/* Node order: id order when it is topological, else kiln's topological order. */
static kiln_status node_order(exporter *ex, gexp *ge, const kiln_node_id **order, uint32_t *n,
                              kiln_node_id **owned)
{
    kiln_graph *g = ge->g;
    bool id_order_ok = true;
    for (kiln_node_id v = kiln_graph_next_node(g, 0); v && id_order_ok;
         v = kiln_graph_next_node(g, v)) {
        if (!is_exported_node(g, v))
            continue;
        for (uint32_t i = 0; i < kiln_node_input_count(g, v); i++) {
            kiln_anchor p = kiln_node_input_peer(g, v, i);
            if (p.node >= v && is_exported_node(g, p.node))
                id_order_ok = false;
        }
        for (uint32_t c = kiln_ctrl_in_first(g, v); c; c = kiln_ctrl_in_next(g, c))
            if (kiln_ctrl_src(g, c) >= v && is_exported_node(g, kiln_ctrl_src(g, c)))
                id_order_ok = false;
    }
    if (!id_order_ok)
        return kiln_graph_topo_order(g, order, n, ex->err);
    uint32_t count = kiln_graph_node_count(g), k = 0;
    kiln_node_id *ids = malloc((count + 1) * sizeof(*ids));
    if (!ids)
        return oom(ex);
    for (kiln_node_id v = kiln_graph_next_node(g, 0); v; v = kiln_graph_next_node(g, v))
        ids[k++] = v;
    *owned = ids;
    *order = ids;
    *n = k;
    return KILN_OK;
}

/* ---- graph inputs and outputs ------------------------------------------------ */

static int cmp_index(const void *a, const void *b)
{
    const int64_t *x = a, *y = b; /* pairs (index, id) */
    if (x[0] != y[0])
        return x[0] < y[0] ? -1 : 1;
    return x[1] < y[1] ? -1 : x[1] > y[1];
}

static kiln_status emit_inputs(exporter *ex, gexp *ge, Onnx__GraphProto *gp)
{
    kiln_graph *g = ge->g;
    uint32_t count = kiln_graph_node_count(g);
    int64_t *pairs = malloc(((size_t)count + 1) * 2 * sizeof(int64_t));
    gp->input = ox_arena_alloc(ex->a, ((size_t)count + ge->loop_formals + 1) * sizeof(*gp->input));
    if (!pairs || !gp->input) {
        free(pairs);
        return oom(ex);
    }
    size_t k = 0;
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n)) {
        if (!op_is(g, n, "Data"))
            continue;
        int64_t idx = ge->parent ? int_attr(g, n, OX_ATTR_PARENT, -1)
                                 : int_attr(g, n, "index", INT64_MAX);
        if (ge->parent && !(ge->is_body && idx >= 0 && idx < (int64_t)ge->loop_formals))
            continue; /* a captured outer value */
        pairs[2 * k] = idx;
        pairs[2 * k + 1] = n;
        k++;
    }
    qsort(pairs, k, 2 * sizeof(int64_t), cmp_index);
    kiln_status st = KILN_OK;
    size_t j = 0;
    if (ge->is_body) {
        /* Every formal input of a Loop body, in order, even if unused. */
        for (uint32_t f = 0; f < ge->loop_formals && st == KILN_OK; f++) {
            const char *name = NULL;
            const kiln_tensor_desc *d = NULL;
            for (size_t i = 0; i < k; i++)
                if (pairs[2 * i] == f) {
                    kiln_node_id n = (kiln_node_id)pairs[2 * i + 1];
                    name = ge->names[n][0];
                    d = kiln_node_output_desc(g, n, 0);
                    break;
                }
            if (!name)
                name = claim_name(ex, ox_arena_printf(ex->a, "%s_body_in%u",
                                                      kiln_node_name_str(ge->parent->g, ge->owner), f));
            if (!name || !(gp->input[j++] = value_info(ex, name, d, d && ox_desc_informative(d))))
                st = oom(ex);
        }
    } else {
        for (size_t i = 0; i < k && st == KILN_OK; i++) {
            kiln_node_id n = (kiln_node_id)pairs[2 * i + 1];
            if (!(gp->input[j++] = value_info(ex, ge->names[n][0], kiln_node_output_desc(g, n, 0), true)))
                st = oom(ex);
        }
    }
    gp->n_input = j;
    free(pairs);
    return st;
}

static kiln_status emit_outputs(exporter *ex, gexp *ge, Onnx__GraphProto *gp, kiln_node_id netout,
                                Onnx__NodeProto ***extra, size_t *nextra)
{
    kiln_graph *g = ge->g;
    uint32_t nin = kiln_node_input_count(g, netout);
    gp->output = ox_arena_alloc(ex->a, ((size_t)nin + 1) * sizeof(*gp->output));
    *extra = ox_arena_alloc(ex->a, ((size_t)nin + 1) * sizeof(**extra));
    if (!gp->output || !*extra)
        return oom(ex);
    ox_map seen = {0};
    kiln_status st = KILN_OK;
    for (uint32_t i = 0; i < nin && st == KILN_OK; i++) {
        int64_t pos = i;
        if (ge->parent && kiln_node_input_has_desc(g, netout, i))
            kiln_attrs_get_int(kiln_desc_attrs(kiln_node_input_desc(g, netout, i)), OX_ATTR_PARENT,
                               &pos);
        kiln_anchor p = kiln_node_input_peer(g, netout, i);
        if (pos < 0 || pos >= nin || gp->output[pos] || !p.node) {
            st = kiln_errorf(ex->err, KILN_ERR_INVALID,
                             "NetOutput '%s': input %u is unconnected or maps to a bad or "
                             "repeated output position %lld",
                             kiln_node_name_str(g, netout), i, (long long)pos);
            break;
        }
        const char *name = ge->names[p.node][p.index];
        const kiln_tensor_desc *d = kiln_node_output_desc(g, p.node, p.index);
        if (ox_map_get(&seen, name, NULL)) {
            /* The same value twice: ONNX output names are unique, add an Identity. */
            Onnx__NodeProto *id = ox_arena_alloc(ex->a, sizeof(*id));
            const char *out = claim_name(ex, ox_arena_printf(ex->a, "%s_output%lld", name, (long long)pos));
            if (!id || !out) {
                st = oom(ex);
                break;
            }
            onnx__node_proto__init(id);
            id->input = ox_arena_alloc(ex->a, sizeof(char *));
            id->output = ox_arena_alloc(ex->a, sizeof(char *));
            if (!id->input || !id->output) {
                st = oom(ex);
                break;
            }
            id->name = (char *)(uintptr_t)out;
            id->op_type = (char *)"Identity";
            id->n_input = id->n_output = 1;
            id->input[0] = (char *)(uintptr_t)name;
            id->output[0] = (char *)(uintptr_t)out;
            (*extra)[(*nextra)++] = id;
            name = out;
        } else if (!ox_map_put(&seen, name, 1)) {
            st = oom(ex);
            break;
        }
        bool typed = !ge->parent || ox_desc_informative(d);
        if (!(gp->output[pos] = value_info(ex, name, d, typed)))
            st = oom(ex);
    }
    gp->n_output = nin;
    ox_map_free(&seen);
    return st;
}

/* ---- one graph --------------------------------------------------------------- */

static kiln_status emit_graph(exporter *ex, gexp *ge, Onnx__GraphProto *gp)
{
    kiln_graph *g = ge->g;
    kiln_status st;
    const char *gname = kiln_graph_name(g);
    if (!ge->parent)
        kiln_attrs_get_string(kiln_graph_attrs(g), OX_G_GRAPH_NAME, &gname);
    gp->name = (char *)(uintptr_t)gname;
    if ((st = emit_inputs(ex, ge, gp)) != KILN_OK)
        return st;
    uint32_t count = kiln_graph_node_count(g);
    gp->initializer = ox_arena_alloc(ex->a, ((size_t)count + 1) * sizeof(*gp->initializer));
    gp->node = ox_arena_alloc(ex->a, ((size_t)count + 1) * sizeof(*gp->node));
    gp->value_info = ox_arena_alloc(ex->a, ((size_t)count + 1) * sizeof(*gp->value_info));
    if (!gp->initializer || !gp->node || !gp->value_info)
        return oom(ex);
    kiln_node_id netout = 0;
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n)) {
        if (op_is(g, n, "NetOutput")) {
            if (netout)
                return kiln_errorf(ex->err, KILN_ERR_INVALID, "graph '%s' has two NetOutput nodes",
                                   kiln_graph_name(g));
            netout = n;
        }
        if (!op_is(g, n, "Const") || is_constant_node(g, n))
            continue;
        kiln_tensor_value v;
        if (!kiln_attrs_get_tensor(kiln_node_attrs(g, n), "value", &v))
            return kiln_errorf(ex->err, KILN_ERR_INVALID, "node '%s' (Const) has no tensor 'value'",
                               kiln_node_name_str(g, n));
        Onnx__TensorProto *t = ox_arena_alloc(ex->a, sizeof(*t));
        if (!t)
            return oom(ex);
        onnx__tensor_proto__init(t);
        t->name = (char *)(uintptr_t)ge->names[n][0];
        if ((st = ox_tensor_encode(ex->a, &v, t, ex->err)) != KILN_OK)
            return kiln_error_push(ex->err, "node '%s'", kiln_node_name_str(g, n));
        gp->initializer[gp->n_initializer++] = t;
    }
    if (!netout)
        return kiln_errorf(ex->err, KILN_ERR_INVALID, "graph '%s' has no NetOutput node",
                           kiln_graph_name(g));
    const kiln_node_id *order = NULL;
    kiln_node_id *owned = NULL;
    uint32_t norder = 0;
    if ((st = node_order(ex, ge, &order, &norder, &owned)) != KILN_OK)
        return st;
    for (uint32_t i = 0; i < norder && st == KILN_OK; i++) {
        kiln_node_id n = order[i];
        if (!is_exported_node(g, n))
            continue;
        Onnx__NodeProto *np = ox_arena_alloc(ex->a, sizeof(*np));
        if (!np) {
            st = oom(ex);
            break;
        }
        onnx__node_proto__init(np);
        if ((st = emit_node(ex, ge, n, np)) == KILN_OK)
            gp->node[gp->n_node++] = np;
    }
    free(owned);
    if (st != KILN_OK)
        return st;
    Onnx__NodeProto **extra = NULL;
    size_t nextra = 0;
    if ((st = emit_outputs(ex, ge, gp, netout, &extra, &nextra)) != KILN_OK)
        return st;
    for (size_t i = 0; i < nextra; i++)
        gp->node[gp->n_node++] = extra[i];
    /* value_info: typed intermediate values that are not graph outputs. */
    ox_map outs = {0};
    for (size_t i = 0; i < gp->n_output; i++)
        if (!ox_map_put(&outs, gp->output[i]->name, 1)) {
            ox_map_free(&outs);
            return oom(ex);
        }
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n && st == KILN_OK;
         n = kiln_graph_next_node(g, n)) {
        if (!is_exported_node(g, n))
            continue;
        for (uint32_t o = 0; o < kiln_node_output_count(g, n); o++) {
            const char *name = ge->names[n][o];
            const kiln_tensor_desc *d = kiln_node_output_desc(g, n, o);
            if (!name[0] || ox_map_get(&outs, name, NULL) || !ox_desc_informative(d) ||
                (o == 0 && op_is(g, n, "While")))
                continue;
            if (!(gp->value_info[gp->n_value_info++] = value_info(ex, name, d, true))) {
                st = oom(ex);
                break;
            }
        }
    }
    ox_map_free(&outs);
    return st;
}

/* ---- the model ------------------------------------------------------------- */

static kiln_status model_fields(exporter *ex, kiln_graph *g, Onnx__ModelProto *m)
{
    const kiln_attrs *ga = kiln_graph_attrs(g);
    const char *s = NULL;
    m->has_ir_version = 1;
    m->ir_version = 8;
    kiln_attrs_get_int(ga, OX_G_IR, &m->ir_version);
    if (kiln_attrs_get_string(ga, OX_G_PRODUCER, &s))
        m->producer_name = (char *)(uintptr_t)s;
    if (kiln_attrs_get_string(ga, OX_G_PRODUCER_VERSION, &s))
        m->producer_version = (char *)(uintptr_t)s;
    if (kiln_attrs_get_string(ga, OX_G_DOMAIN, &s))
        m->domain = (char *)(uintptr_t)s;
    if (kiln_attrs_get_int(ga, OX_G_MODEL_VERSION, &m->model_version))
        m->has_model_version = 1;
    const char *const *ops = NULL;
    uint32_t nops = 0;
    static const char *const default_opset[] = {"ai.onnx:17"};
    if (!kiln_attrs_get_list_string(ga, OX_G_OPSETS, &ops, &nops) || nops == 0) {
        ops = default_opset;
        nops = 1;
    }
    m->opset_import = ox_arena_alloc(ex->a, nops * sizeof(*m->opset_import));
    if (!m->opset_import)
        return oom(ex);
    for (uint32_t i = 0; i < nops; i++) {
        const char *colon = strrchr(ops[i], ':');
        char *end = NULL;
        long long ver = colon ? strtoll(colon + 1, &end, 10) : 0;
        if (!colon || !end || *end || end == colon + 1)
            return kiln_errorf(ex->err, KILN_ERR_INVALID,
                               "graph attribute %s: entry '%s' is not DOMAIN:VERSION", OX_G_OPSETS,
                               ops[i]);
        Onnx__OperatorSetIdProto *o = ox_arena_alloc(ex->a, sizeof(*o));
        char *dom = ox_arena_alloc(ex->a, (size_t)(colon - ops[i]) + 1);
        if (!o || !dom)
            return oom(ex);
        onnx__operator_set_id_proto__init(o);
        memcpy(dom, ops[i], (size_t)(colon - ops[i]));
        o->domain = strcmp(dom, "ai.onnx") == 0 ? (char *)"" : dom;
        o->has_version = 1;
        o->version = ver;
        m->opset_import[m->n_opset_import++] = o;
    }
    const char *const *kv = NULL;
    uint32_t nkv = 0;
    if (kiln_attrs_get_list_string(ga, OX_G_METADATA, &kv, &nkv) && nkv) {
        m->metadata_props = ox_arena_alloc(ex->a, nkv * sizeof(*m->metadata_props));
        if (!m->metadata_props)
            return oom(ex);
        for (uint32_t i = 0; i < nkv; i++) {
            Onnx__StringStringEntryProto *e = ox_arena_alloc(ex->a, sizeof(*e));
            const char *eq = strchr(kv[i], '=');
            if (!e)
                return oom(ex);
            onnx__string_string_entry_proto__init(e);
            e->key = ox_arena_strdup(ex->a, kv[i]);
            if (!e->key)
                return oom(ex);
            if (eq) {
                e->key[eq - kv[i]] = 0;
                e->value = (char *)(uintptr_t)(eq + 1);
            }
            m->metadata_props[m->n_metadata_props++] = e;
        }
    }
    return KILN_OK;
}

kiln_status ox_export_model(kiln_graph *g, ox_arena *a, Onnx__ModelProto **out, kiln_error *err)
{
    exporter ex = {.a = a, .err = err};
    Onnx__ModelProto *m = ox_arena_alloc(a, sizeof(*m));
    Onnx__GraphProto *gp = ox_arena_alloc(a, sizeof(*gp));
    if (!m || !gp)
        return oom(&ex);
    onnx__model_proto__init(m);
    onnx__graph_proto__init(gp);
    m->graph = gp;
    gexp root = {.g = g};
    kiln_status st = model_fields(&ex, g, m);
    if (st == KILN_OK)
        st = assign_names(&ex, &root);
    if (st == KILN_OK)
        st = emit_graph(&ex, &root, gp);
    ox_map_free(&ex.used);
    if (st == KILN_OK)
        *out = m;
    return st;
}

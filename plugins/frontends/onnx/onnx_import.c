/*
 * onnx_import.c - ONNX ModelProto -> kiln graph.
 *
 * One scope per ONNX graph (the main graph, each If branch, each Loop body).
 * A scope maps ONNX value names to kiln output anchors of its own kiln graph.
 * Each scope is built in five steps, so that node ids follow the file order
 * (the exporter relies on it for exact round trips):
 *   1. Data nodes for graph inputs (root: attr `index`; Loop body: attr
 *      `_parent_node_index`), Const nodes for initializers, one kiln node per
 *      ONNX node (Constant -> Const, Loop -> While), then one NetOutput;
 *   2. value_info and graph output types onto the producers' descriptors;
 *   3. data edges, node by node, then the NetOutput inputs;
 *   4. the subgraphs of If / Loop nodes, recursively;
 *   5. a check that the data edges (captures included) form no cycle.
 * A name a subgraph reads but does not define is resolved in the enclosing
 * scopes and becomes an explicit subgraph input: a new input of the parent
 * node (fed by the outer value) and a Data node with `_parent_node_index` in
 * the subgraph.  Both branches of an If share the parent inputs they capture.
 * Nested captures chain through every level.
 */
#include "onnx_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME_MAX_LEN 4096
#define MAX_DEPTH 64 /* subgraph nesting levels */

typedef struct scope scope;
struct scope {
    kiln_graph *g;
    scope *parent;
    kiln_node_id owner;  /* node of parent->g that owns g (0 for the root) */
    ox_map *captures;    /* outer value name -> owner input index (shared by siblings) */
    ox_map values;       /* value name -> packed anchor in g */
    ox_map suffixes;     /* node name base -> next _k suffix to try (see add_node) */
};

typedef struct importer {
    kiln_graph *root;
    kiln_error *err;
    ox_map subgraph_names; /* names handed to kiln_node_add_subgraph -> next suffix */
    char **owned_names;    /* strings the name maps borrow (subgraph names, suffixes) */
    size_t nowned, capowned;
    bool blocks;           /* the message's large arrays are tensor blocks (ox_pb_block) */
} importer;

typedef enum graph_kind { GK_ROOT, GK_BRANCH, GK_LOOP_BODY } graph_kind;

static kiln_status build_graph(importer *im, scope *s, const Onnx__GraphProto *gp,
                               graph_kind kind);

static kiln_status oom(importer *im)
{
    return kiln_errorf(im->err, KILN_ERR_NOMEM, "out of memory");
}

/* A copy of @p str owned by the importer (freed at the end of the import). */
static char *own_copy(importer *im, const char *str)
{
    if (im->nowned == im->capowned) {
        size_t nc = im->capowned ? im->capowned * 2 : 16;
        char **p = realloc(im->owned_names, nc * sizeof(*p));
        if (!p)
            return NULL;
        im->owned_names = p;
        im->capowned = nc;
    }
    char *copy = strdup(str);
    if (copy)
        im->owned_names[im->nowned++] = copy;
    return copy;
}

/*
 * Add a node named after @p base (deduplicated within the graph).  The scope
 * remembers, per base, the first suffix not yet tried, so that N nodes sharing
 * one name cost O(N) lookups, not O(N^2) (the names are the same as a search
 * from _1 each time: import adds nodes and never removes any).
 */
static kiln_node_id add_node(importer *im, scope *s, const char *base, const char *op,
                             uint32_t nin, uint32_t nout)
{
    char name[NAME_MAX_LEN];
    uint64_t next = 1;
    bool known = ox_map_get(&s->suffixes, base, &next);
    uint32_t nx = (uint32_t)next;
    if (!ox_unique_node_name(s->g, base, &nx, name, sizeof(name))) {
        kiln_errorf(im->err, KILN_ERR_LIMIT, "name '%.64s...' is too long", base);
        return 0;
    }
    if (nx != next) {
        /* ox_map_put keeps the stored key when @p base is already known. */
        const char *key = known ? base : own_copy(im, base);
        if (!key || !ox_map_put(&s->suffixes, key, nx)) {
            oom(im);
            return 0;
        }
    }
    kiln_node_id n = kiln_graph_add_node(s->g, name, op, nin, nout);
    if (!n)
        oom(im);
    return n;
}

static kiln_status define_value(importer *im, scope *s, const char *name, kiln_node_id n,
                                uint32_t idx)
{
    if (!name[0])
        return KILN_OK;
    if (ox_map_get(&s->values, name, NULL))
        return kiln_errorf(im->err, KILN_ERR_PARSE,
                           "value '%s' is defined twice in graph '%s' (ONNX values are SSA)",
                           name, kiln_graph_name(s->g));
    return ox_map_put(&s->values, name, ox_pack_anchor(n, idx)) ? KILN_OK : oom(im);
}

/* Remember the ONNX value name of an output when it differs from the node name. */
static kiln_status name_output(importer *im, kiln_graph *g, kiln_node_id n, uint32_t o,
                               const char *value, bool always)
{
    if (!always && strcmp(value, kiln_node_name_str(g, n)) == 0)
        return KILN_OK;
    kiln_attrs *a = kiln_desc_attrs_mut(g, kiln_node_output_desc(g, n, o));
    if (!a || kiln_attrs_set_string(a, OX_ATTR_NAME, value) != KILN_OK)
        return oom(im);
    return KILN_OK;
}

/* ---- name resolution through scopes -------------------------------------- */

static kiln_status resolve(importer *im, scope *s, const char *name, kiln_anchor *out,
                           const char *user)
{
    uint64_t v;
    if (ox_map_get(&s->values, name, &v)) {
        *out = ox_unpack_anchor(v);
        return KILN_OK;
    }
    if (!s->parent)
        return kiln_errorf(im->err, KILN_ERR_PARSE,
                           "node '%s': input '%s' is not produced by any node, initializer or "
                           "graph input",
                           user, name);
    /* A capture: one parent input per outer value, shared by sibling branches. */
    scope *p = s->parent;
    kiln_anchor outer;
    uint64_t idx;
    kiln_status st;
    if (ox_map_get(s->captures, name, &idx)) {
        outer = kiln_node_input_peer(p->g, s->owner, (uint32_t)idx);
    } else {
        if ((st = resolve(im, p, name, &outer, user)) != KILN_OK)
            return st;
        idx = kiln_node_input_count(p->g, s->owner);
        if (kiln_node_set_input_count(p->g, s->owner, (uint32_t)idx + 1) != KILN_OK ||
            kiln_edge_add(p->g, outer.node, outer.index, s->owner, (uint32_t)idx) != KILN_OK ||
            !ox_map_put(s->captures, name, idx))
            return oom(im);
    }
    kiln_node_id d = add_node(im, s, name, "Data", 0, 1);
    if (!d)
        return kiln_error_code(im->err);
    kiln_tensor_desc *dd = kiln_node_output_desc(s->g, d, 0);
    if (kiln_attrs_set_int(kiln_node_attrs_mut(s->g, d), OX_ATTR_PARENT, (int64_t)idx) != KILN_OK ||
        kiln_desc_copy(s->g, dd, kiln_node_output_desc(p->g, outer.node, outer.index)) != KILN_OK)
        return oom(im);
    kiln_attrs_remove(kiln_desc_attrs_mut(s->g, dd), OX_ATTR_NAME);
    if ((st = name_output(im, s->g, d, 0, name, false)) != KILN_OK ||
        (st = define_value(im, s, name, d, 0)) != KILN_OK)
        return st;
    out->node = d;
    out->index = 0;
    return KILN_OK;
}

/* ---- step 1: nodes --------------------------------------------------------- */

static const Onnx__AttributeProto *find_attr(const Onnx__NodeProto *np, const char *name)
{
    for (size_t i = 0; i < np->n_attribute; i++)
        if (strcmp(OX_STR(np->attribute[i]->name), name) == 0)
            return np->attribute[i];
    return NULL;
}

/* The tensor block holding the bytes of @p t as ox_tensor_decode gave them
 * (@p owned: a converted copy), to share them instead of copying; NULL: copy. */
static void *value_block(const importer *im, const Onnx__TensorProto *t, const void *owned,
                         const kiln_tensor_value *v)
{
    if (!im->blocks || owned || !t->has_raw_data || v->nbytes < OX_BLOCK_MIN ||
        v->data != t->raw_data.data)
        return NULL;
    return ox_pb_block(t->raw_data.data);
}

/* Set the `value` of Const node @p n (its bytes shared from @p block when
 * given) and its output's dtype and shape; false on OOM. */
static bool set_const_value(kiln_graph *g, kiln_node_id n, const kiln_tensor_value *v, void *block)
{
    kiln_tensor_desc *d = kiln_node_output_desc(g, n, 0);
    return kiln_attrs_set_tensor_block(kiln_node_attrs_mut(g, n), "value", v, block) == KILN_OK &&
           kiln_desc_set_dtype(g, d, v->dtype) == KILN_OK &&
           kiln_desc_set_shape(g, d, (int32_t)v->rank, v->dims) == KILN_OK;
}

/* The tensor of a Constant node (value, value_float(s), value_int(s)). */
static kiln_status constant_value(importer *im, kiln_graph *g, kiln_node_id n,
                                  const Onnx__NodeProto *np, const char *nn)
{
    if (np->n_attribute != 1)
        return kiln_errorf(im->err, KILN_ERR_PARSE,
                           "node '%s' (Constant): expected exactly one value attribute, found %zu",
                           nn, np->n_attribute);
    const Onnx__AttributeProto *ap = np->attribute[0];
    const char *an = OX_STR(ap->name);
    kiln_tensor_value v = {.dtype = KILN_DT_FLOAT32};
    int64_t dim = 0;
    float f;
    void *owned = NULL;
    kiln_status st;
    if (strcmp(an, "value") == 0 && ap->t) {
        char what[NAME_MAX_LEN + 64];
        snprintf(what, sizeof(what), "node '%s' (Constant)", nn);
        if ((st = ox_tensor_decode(ap->t, what, &v, &owned, im->err)) != KILN_OK)
            return st;
    } else if (strcmp(an, "value_float") == 0) {
        f = ap->f;
        v.data = &f;
        v.nbytes = sizeof(f);
    } else if (strcmp(an, "value_floats") == 0) {
        v.rank = 1;
        dim = (int64_t)ap->n_floats;
        v.dims = &dim;
        v.data = ap->floats;
        v.nbytes = ap->n_floats * sizeof(float);
    } else if (strcmp(an, "value_int") == 0) {
        v.dtype = KILN_DT_INT64;
        v.data = &ap->i;
        v.nbytes = sizeof(int64_t);
    } else if (strcmp(an, "value_ints") == 0) {
        v.dtype = KILN_DT_INT64;
        v.rank = 1;
        dim = (int64_t)ap->n_ints;
        v.dims = &dim;
        v.data = ap->ints;
        v.nbytes = ap->n_ints * sizeof(int64_t);
    } else {
        return kiln_errorf(im->err, KILN_ERR_UNSUPPORTED,
                           "node '%s' (Constant): attribute '%s' is not supported (value, "
                           "value_float(s) and value_int(s) are)",
                           nn, an);
    }
    bool ok = set_const_value(g, n, &v,
                              strcmp(an, "value") == 0 ? value_block(im, ap->t, owned, &v) : NULL) &&
              kiln_attrs_set_bool(kiln_node_attrs_mut(g, n), OX_ATTR_CONSTANT, true) == KILN_OK;
    free(owned);
    return ok ? KILN_OK : oom(im);
}

/* Create the kiln node of ONNX node @p np (index @p j in its graph). */
static kiln_status create_node(importer *im, scope *s, const Onnx__NodeProto *np, size_t j,
                               kiln_node_id *out)
{
    const char *op = OX_STR(np->op_type);
    char base[NAME_MAX_LEN];
    if (np->name && np->name[0])
        snprintf(base, sizeof(base), "%s", np->name);
    else
        snprintf(base, sizeof(base), "%s_%zu", op[0] ? op : "node", j);
    if (!op[0])
        return kiln_errorf(im->err, KILN_ERR_PARSE, "node '%s' has no op_type", base);
    const char *domain = OX_STR(np->domain);
    bool std_domain = !domain[0] || strcmp(domain, "ai.onnx") == 0;
    bool is_const = std_domain && strcmp(op, "Constant") == 0;
    bool is_loop = std_domain && strcmp(op, "Loop") == 0;
    bool is_if = std_domain && strcmp(op, "If") == 0;
    uint32_t nout = (uint32_t)np->n_output + (is_loop ? 1u : 0u);
    if (is_if && np->n_input != 1)
        return kiln_errorf(im->err, KILN_ERR_PARSE, "node '%s' (If) must have one input, the "
                           "condition (it has %zu)", base, np->n_input);
    if (is_const && np->n_output != 1)
        return kiln_errorf(im->err, KILN_ERR_PARSE, "node '%s' (Constant) must have one output",
                           base);
    kiln_node_id n = add_node(im, s, base, is_const ? "Const" : is_loop ? "While" : op,
                              (uint32_t)np->n_input, nout);
    if (!n)
        return kiln_error_code(im->err);
    const char *nn = kiln_node_name_str(s->g, n);
    kiln_status st;
    kiln_attrs *attrs = kiln_node_attrs_mut(s->g, n);
    if (!attrs)
        return oom(im);
    if (is_const) {
        if ((st = constant_value(im, s->g, n, np, nn)) != KILN_OK)
            return st;
    } else {
        for (size_t i = 0; i < np->n_attribute; i++) {
            const Onnx__AttributeProto *ap = np->attribute[i];
            Onnx__AttributeProto__AttributeType t = ox_attr_type(ap);
            const char *an = OX_STR(ap->name);
            if (t == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH &&
                ((is_if && (strcmp(an, "then_branch") == 0 || strcmp(an, "else_branch") == 0)) ||
                 (is_loop && strcmp(an, "body") == 0)))
                continue; /* step 4 */
            if ((st = ox_attr_import(attrs, ap, nn, im->err)) != KILN_OK)
                return st;
        }
    }
    if (domain[0] && kiln_attrs_set_string(attrs, OX_ATTR_DOMAIN, domain) != KILN_OK)
        return oom(im);
    if (is_loop) {
        if (np->n_input < 2)
            return kiln_errorf(im->err, KILN_ERR_PARSE,
                               "node '%s' (Loop): needs inputs M and cond (may be empty names)",
                               nn);
        /* Output 0 is the final loop condition (no ONNX output): a bool scalar. */
        kiln_tensor_desc *c = kiln_node_output_desc(s->g, n, 0);
        if (kiln_desc_set_dtype(s->g, c, KILN_DT_BOOL) != KILN_OK ||
            kiln_desc_set_shape(s->g, c, 0, NULL) != KILN_OK ||
            kiln_attrs_set_string(attrs, OX_ATTR_OP, "Loop") != KILN_OK ||
            kiln_attrs_set_int(attrs, OX_ATTR_LOOP_CARRIED, (int64_t)np->n_input - 2) != KILN_OK)
            return oom(im);
    }
    uint32_t shift = is_loop ? 1u : 0u;
    for (size_t o = 0; o < np->n_output; o++) {
        const char *vn = OX_STR(np->output[o]);
        if ((st = name_output(im, s->g, n, (uint32_t)o + shift, vn, true)) != KILN_OK ||
            (st = define_value(im, s, vn, n, (uint32_t)o + shift)) != KILN_OK)
            return st;
    }
    *out = n;
    return KILN_OK;
}

/* ---- step 4: subgraphs ------------------------------------------------------ */

static kiln_graph *new_subgraph(importer *im, kiln_graph *g, kiln_node_id n, const char *role,
                                const char *want)
{
    char base[NAME_MAX_LEN], name[NAME_MAX_LEN + 16];
    if (want && want[0])
        snprintf(base, sizeof(base), "%s", want);
    else
        snprintf(base, sizeof(base), "%s_%s", kiln_node_name_str(g, n), role);
    snprintf(name, sizeof(name), "%s", base);
    /* A taken name maps to the next suffix to try with it as the base, so many
     * branches with one name cost O(N), not O(N^2) (same names as probing from 1). */
    uint64_t next;
    if (ox_map_get(&im->subgraph_names, base, &next)) {
        uint32_t k = next ? (uint32_t)next : 1;
        do
            snprintf(name, sizeof(name), "%s_%u", base, k++);
        while (ox_map_get(&im->subgraph_names, name, NULL));
        if (!ox_map_put(&im->subgraph_names, base, k)) /* keeps the stored key */
            return NULL;
    }
    char *copy = own_copy(im, name);
    if (!copy || !ox_map_put(&im->subgraph_names, copy, 1))
        return NULL;
    return kiln_node_add_subgraph(g, n, role, copy);
}

static kiln_status build_sub(importer *im, scope *s, kiln_node_id n, const char *role,
                             const Onnx__GraphProto *gp, graph_kind kind, ox_map *captures)
{
    kiln_graph *sg = new_subgraph(im, s->g, n, role, gp->name);
    if (!sg)
        return oom(im);
    scope child = {.g = sg, .parent = s, .owner = n, .captures = captures};
    kiln_status st = build_graph(im, &child, gp, kind);
    ox_map_free(&child.values);
    ox_map_free(&child.suffixes);
    if (st != KILN_OK)
        kiln_error_push(im->err, "node '%s' (%s): %s", kiln_node_name_str(s->g, n),
                        kiln_node_op_str(s->g, n), role);
    return st;
}

static kiln_status build_control_flow(importer *im, scope *s, const Onnx__NodeProto *np,
                                      kiln_node_id n)
{
    const char *nn = kiln_node_name_str(s->g, n);
    bool is_loop = strcmp(kiln_node_op_str(s->g, n), "While") == 0;
    ox_map captures = {0};
    kiln_status st = KILN_OK;
    if (!is_loop) {
        const Onnx__AttributeProto *t = find_attr(np, "then_branch");
        const Onnx__AttributeProto *e = find_attr(np, "else_branch");
        if (!t || !t->g || !e || !e->g)
            return kiln_errorf(im->err, KILN_ERR_PARSE,
                               "node '%s' (If): then_branch and else_branch graphs are required",
                               nn);
        if (t->g->n_output != np->n_output || e->g->n_output != np->n_output)
            return kiln_errorf(im->err, KILN_ERR_PARSE,
                               "node '%s' (If): %zu outputs but the branches yield %zu and %zu",
                               nn, np->n_output, t->g->n_output, e->g->n_output);
        st = build_sub(im, s, n, "then_branch", t->g, GK_BRANCH, &captures);
        if (st == KILN_OK)
            st = build_sub(im, s, n, "else_branch", e->g, GK_BRANCH, &captures);
    } else {
        const Onnx__AttributeProto *b = find_attr(np, "body");
        if (!b || !b->g)
            return kiln_errorf(im->err, KILN_ERR_PARSE, "node '%s' (Loop): body graph required",
                               nn);
        size_t carried = np->n_input - 2;
        if (b->g->n_input != np->n_input || b->g->n_output < 1 + carried ||
            b->g->n_output - 1 != np->n_output)
            return kiln_errorf(im->err, KILN_ERR_PARSE,
                               "node '%s' (Loop): body has %zu inputs and %zu outputs, the node "
                               "%zu inputs and %zu outputs",
                               nn, b->g->n_input, b->g->n_output, np->n_input, np->n_output);
        st = build_sub(im, s, n, "body", b->g, GK_LOOP_BODY, &captures);
    }
    ox_map_free(&captures);
    return st;
}

/* ---- one graph ------------------------------------------------------------- */

static kiln_status apply_types(importer *im, scope *s, Onnx__ValueInfoProto *const *vi, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t v;
        const char *name = OX_STR(vi[i]->name);
        if (!ox_map_get(&s->values, name, &v))
            continue;
        kiln_anchor a = ox_unpack_anchor(v);
        kiln_status st = ox_type_apply(s->g, kiln_node_output_desc(s->g, a.node, a.index),
                                       vi[i]->type, name, im->err);
        if (st != KILN_OK)
            return st;
    }
    return KILN_OK;
}

static kiln_status build_inputs(importer *im, scope *s, const Onnx__GraphProto *gp,
                                graph_kind kind, const ox_map *inits)
{
    int64_t index = 0;
    kiln_status st;
    if (kind == GK_BRANCH && gp->n_input)
        return kiln_errorf(im->err, KILN_ERR_PARSE, "an If branch must not declare inputs");
    for (size_t i = 0; i < gp->n_input; i++) {
        const char *name = OX_STR(gp->input[i]->name);
        if (kind == GK_ROOT && ox_map_get(inits, name, NULL))
            continue; /* an initializer listed as input (IR < 4): a Const */
        if (!name[0])
            return kiln_errorf(im->err, KILN_ERR_PARSE, "graph input %zu has no name", i);
        kiln_node_id n = add_node(im, s, name, "Data", 0, 1);
        if (!n)
            return kiln_error_code(im->err);
        int64_t v = kind == GK_ROOT ? index++ : (int64_t)i;
        if (kiln_attrs_set_int(kiln_node_attrs_mut(s->g, n),
                               kind == GK_ROOT ? "index" : OX_ATTR_PARENT, v) != KILN_OK)
            return oom(im);
        if ((st = name_output(im, s->g, n, 0, name, false)) != KILN_OK ||
            (st = define_value(im, s, name, n, 0)) != KILN_OK ||
            (st = ox_type_apply(s->g, kiln_node_output_desc(s->g, n, 0), gp->input[i]->type,
                                name, im->err)) != KILN_OK)
            return st;
    }
    return KILN_OK;
}

static kiln_status build_initializers(importer *im, scope *s, const Onnx__GraphProto *gp)
{
    for (size_t i = 0; i < gp->n_initializer; i++) {
        const Onnx__TensorProto *t = gp->initializer[i];
        const char *name = OX_STR(t->name);
        if (!name[0])
            return kiln_errorf(im->err, KILN_ERR_PARSE, "initializer %zu has no name", i);
        char what[NAME_MAX_LEN + 32];
        snprintf(what, sizeof(what), "initializer '%s'", name);
        kiln_tensor_value v;
        void *owned = NULL;
        kiln_status st = ox_tensor_decode(t, what, &v, &owned, im->err);
        if (st != KILN_OK)
            return st;
        kiln_node_id n = add_node(im, s, name, "Const", 0, 1);
        if (!n)
            st = kiln_error_code(im->err);
        else if (!set_const_value(s->g, n, &v, value_block(im, t, owned, &v)))
            st = oom(im);
        free(owned);
        if (st == KILN_OK && (st = name_output(im, s->g, n, 0, name, false)) == KILN_OK)
            st = define_value(im, s, name, n, 0);
        if (st != KILN_OK)
            return st;
    }
    return KILN_OK;
}

static kiln_status build_graph(importer *im, scope *s, const Onnx__GraphProto *gp,
                               graph_kind kind)
{
    if (kiln_graph_depth(s->g) > MAX_DEPTH)
        return kiln_errorf(im->err, KILN_ERR_LIMIT, "subgraphs nested deeper than %d levels",
                           MAX_DEPTH);
    kiln_status st = KILN_OK;
    ox_map inits = {0};
    kiln_node_id *ids = calloc(gp->n_node + 1, sizeof(*ids));
    if (!ids)
        return oom(im);
    if (gp->n_sparse_initializer) {
        st = kiln_errorf(im->err, KILN_ERR_UNSUPPORTED, "sparse initializers are not supported");
        goto out;
    }
    for (size_t i = 0; i < gp->n_initializer; i++)
        if (!ox_map_put(&inits, OX_STR(gp->initializer[i]->name), i)) {
            st = oom(im);
            goto out;
        }
    /* 1. nodes */
    if ((st = build_inputs(im, s, gp, kind, &inits)) != KILN_OK ||
        (st = build_initializers(im, s, gp)) != KILN_OK)
        goto out;
    for (size_t j = 0; j < gp->n_node; j++)
        if ((st = create_node(im, s, gp->node[j], j, &ids[j])) != KILN_OK)
            goto out;
    kiln_node_id netout = add_node(im, s, "NetOutput", "NetOutput", (uint32_t)gp->n_output, 0);
    if (!netout) {
        st = kiln_error_code(im->err);
        goto out;
    }
    /* 2. types */
    if ((st = apply_types(im, s, gp->value_info, gp->n_value_info)) != KILN_OK ||
        (st = apply_types(im, s, gp->output, gp->n_output)) != KILN_OK)
        goto out;
    /* 3. edges */
    for (size_t j = 0; j < gp->n_node; j++) {
        const Onnx__NodeProto *np = gp->node[j];
        const char *nn = kiln_node_name_str(s->g, ids[j]);
        for (size_t i = 0; i < np->n_input; i++) {
            const char *vn = OX_STR(np->input[i]);
            kiln_anchor a;
            if (!vn[0])
                continue;
            if ((st = resolve(im, s, vn, &a, nn)) != KILN_OK)
                goto out;
            if (kiln_edge_add(s->g, a.node, a.index, ids[j], (uint32_t)i) != KILN_OK) {
                st = oom(im);
                goto out;
            }
        }
    }
    for (size_t i = 0; i < gp->n_output; i++) {
        kiln_anchor a;
        const char *vn = OX_STR(gp->output[i]->name);
        if ((st = resolve(im, s, vn, &a, "NetOutput")) != KILN_OK)
            goto out;
        if (kiln_edge_add(s->g, a.node, a.index, netout, (uint32_t)i) != KILN_OK) {
            st = oom(im);
            goto out;
        }
    }
    /* 4. subgraphs */
    for (size_t j = 0; j < gp->n_node; j++) {
        const char *op = kiln_node_op_str(s->g, ids[j]);
        if ((strcmp(op, "If") == 0 || strcmp(op, "While") == 0) &&
            (st = build_control_flow(im, s, gp->node[j], ids[j])) != KILN_OK)
            goto out;
    }
    /* 5. no cycles: ONNX values are SSA, but a node may name its own output, a
     * later node's output, or (through a subgraph capture) a value computed
     * from the node's own outputs.  Checked once the captures are wired. */
    const kiln_node_id *order;
    uint32_t norder;
    st = kiln_graph_topo_order(s->g, &order, &norder, im->err);
out:
    ox_map_free(&inits);
    free(ids);
    return st;
}

/* ---- model-level attributes ------------------------------------------------- */

static kiln_status model_attrs(importer *im, const Onnx__ModelProto *m)
{
    kiln_attrs *ga = kiln_graph_attrs(im->root);
    if (!ga)
        return oom(im);
    size_t n = m->n_opset_import;
    char **ops = calloc(n ? n : 1, sizeof(*ops));
    if (!ops)
        return oom(im);
    kiln_status st = KILN_OK;
    for (size_t i = 0; i < n && st == KILN_OK; i++) {
        const char *d = OX_STR(m->opset_import[i]->domain);
        ops[i] = malloc(strlen(d) + 32);
        if (!ops[i])
            st = oom(im);
        else
            sprintf(ops[i], "%s:%lld", d[0] ? d : "ai.onnx",
                    (long long)m->opset_import[i]->version);
    }
    if (st == KILN_OK &&
        kiln_attrs_set_list_string(ga, OX_G_OPSETS, (const char *const *)ops, (uint32_t)n) != KILN_OK)
        st = oom(im);
    for (size_t i = 0; i < n; i++)
        free(ops[i]);
    free(ops);
    if (st != KILN_OK)
        return st;
    bool ok = true;
    if (m->has_ir_version)
        ok &= kiln_attrs_set_int(ga, OX_G_IR, m->ir_version) == KILN_OK;
    if (m->producer_name && m->producer_name[0])
        ok &= kiln_attrs_set_string(ga, OX_G_PRODUCER, m->producer_name) == KILN_OK;
    if (m->producer_version && m->producer_version[0])
        ok &= kiln_attrs_set_string(ga, OX_G_PRODUCER_VERSION, m->producer_version) == KILN_OK;
    if (m->domain && m->domain[0])
        ok &= kiln_attrs_set_string(ga, OX_G_DOMAIN, m->domain) == KILN_OK;
    if (m->has_model_version)
        ok &= kiln_attrs_set_int(ga, OX_G_MODEL_VERSION, m->model_version) == KILN_OK;
    if (m->graph->name && m->graph->name[0])
        ok &= kiln_attrs_set_string(ga, OX_G_GRAPH_NAME, m->graph->name) == KILN_OK;
    if (m->n_metadata_props) {
        char **kv = calloc(m->n_metadata_props, sizeof(*kv));
        for (size_t i = 0; kv && i < m->n_metadata_props; i++) {
            const char *k = OX_STR(m->metadata_props[i]->key);
            const char *v = OX_STR(m->metadata_props[i]->value);
            if ((kv[i] = malloc(strlen(k) + strlen(v) + 2)))
                sprintf(kv[i], "%s=%s", k, v);
            else
                ok = false;
        }
        ok &= kv && ok &&
              kiln_attrs_set_list_string(ga, OX_G_METADATA, (const char *const *)kv,
                                         (uint32_t)m->n_metadata_props) == KILN_OK;
        for (size_t i = 0; kv && i < m->n_metadata_props; i++)
            free(kv[i]);
        free(kv);
    }
    return ok ? KILN_OK : oom(im);
}

kiln_status ox_import_model(kiln_graph *g, const Onnx__ModelProto *m, bool blocks,
                            kiln_error *err)
{
    importer im = {.root = g, .err = err, .blocks = blocks};
    if (!m->graph)
        return kiln_errorf(err, KILN_ERR_PARSE, "the model has no graph");
    if (m->n_functions)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                           "the model defines %zu local functions (first '%s'); ONNX functions "
                           "are not supported",
                           m->n_functions, OX_STR(m->functions[0]->name));
    /* ONNX (IR version >= 3) requires every model to name the operator sets
     * it uses: without them an op's semantics (which opset version) is unknown. */
    if (!m->n_opset_import)
        return kiln_errorf(err, KILN_ERR_PARSE,
                           "the model has no opset_import: an ONNX model must name the operator "
                           "set versions it uses (e.g. domain \"\" version 17)");
    for (size_t i = 0; i < m->n_opset_import; i++)
        if (m->opset_import[i]->version < 1)
            return kiln_errorf(err, KILN_ERR_PARSE,
                               "opset_import[%zu]: domain \"%s\" version %lld; operator set "
                               "versions start at 1",
                               i, OX_STR(m->opset_import[i]->domain),
                               (long long)m->opset_import[i]->version);
    scope root = {.g = g};
    kiln_status st = model_attrs(&im, m);
    if (st == KILN_OK)
        st = build_graph(&im, &root, m->graph, GK_ROOT);
    ox_map_free(&root.values);
    ox_map_free(&root.suffixes);
    ox_map_free(&im.subgraph_names);
    for (size_t i = 0; i < im.nowned; i++)
        free(im.owned_names[i]);
    free(im.owned_names);
    if (st == KILN_OK && kiln_graph_oom(g))
        st = kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    return st;
}

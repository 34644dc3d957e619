/*
 * decl_run.c - the pattern-fusion hooks of a declarative fusion: patterns()
 * turns the definition into a kiln_pattern, meet_requirements() checks the
 * "requires" list on a match, replacement() builds the "replacement" graph.
 *
 * The instance is the (immutable) dfusion, so the hooks keep no state.
 */
#include "decl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

kiln_status decl_patterns(void *inst, kiln_pattern *p, kiln_error *err)
{
    const dfusion *f = inst;
    int32_t first = -1;
    for (uint32_t i = 0; i < f->npnodes; i++) {
        int32_t idx = kiln_pattern_node(p, f->pnodes[i].name, f->pnodes[i].op);
        if (idx < 0)
            return kiln_errorf(err, KILN_ERR_NOMEM, "%s: cannot add pattern node %s", f->name,
                               f->pnodes[i].name);
        if (i == 0)
            first = idx;
        if (idx != first + (int32_t)i) /* kiln_match_node is indexed by these */
            return kiln_errorf(err, KILN_ERR_INTERNAL,
                               "%s: pattern node indices are not consecutive", f->name);
    }
    kiln_status st;
    for (uint32_t e = 0; e < f->npedges; e++) {
        const dpedge *d = &f->pedges[e];
        if ((st = kiln_pattern_edge(p, first + d->src, d->so, first + d->dst, d->di)) != KILN_OK)
            return kiln_errorf(err, st, "%s: pattern edge %s:%u -> %s:%u refused", f->name,
                               f->pnodes[d->src].name, d->so, f->pnodes[d->dst].name, d->di);
    }
    for (uint32_t o = 0; o < f->noutputs; o++)
        if ((st = kiln_pattern_output(p, first + f->outputs[o].cap, f->outputs[o].out)) != KILN_OK)
            return kiln_errorf(err, st, "%s: pattern output %u refused", f->name, o);
    if (f->commutative && (st = kiln_pattern_set_flags(p, KILN_PATTERN_COMMUTATIVE)) != KILN_OK)
        return kiln_errorf(err, st, "%s: commutative flag refused", f->name);
    return KILN_OK;
}

/* ---- requirements --------------------------------------------------------------- */

/* The matched node of capture @p cap (0 for a pattern input). */
static kiln_node_id cap_node(const dfusion *f, const kiln_match *m, int32_t cap)
{
    (void)f;
    return kiln_match_node(m, cap);
}

static const kiln_tensor_desc *tensor_of(const dfusion *f, const kiln_graph *g, const kiln_match *m,
                                         dref r, kiln_anchor *where)
{
    kiln_graph *mg = (kiln_graph *)(uintptr_t)g; /* read only: output_desc takes no const */
    kiln_anchor a;
    if (f->pnodes[r.cap].is_input)
        a = kiln_match_input(m, (uint32_t)f->pnodes[r.cap].input_index);
    else
        a = (kiln_anchor){cap_node(f, m, r.cap), r.out};
    if (where)
        *where = a;
    if (!a.node || a.index >= kiln_node_output_count(g, a.node))
        return NULL;
    return kiln_node_output_desc(mg, a.node, a.index);
}

static bool num_eq(double a, double b)
{
    return a == b || fabs(a - b) <= 1e-6 * fmax(1.0, fabs(b));
}

/* Attribute @p key of @p a equals JSON literal @p v. */
static bool attr_eq_literal(const kiln_attrs *a, const char *key, const json_t *v)
{
    bool b;
    int64_t i;
    double d;
    const char *s;
    kiln_dtype dt;
    uint32_t n;
    switch (kiln_attrs_type(a, key)) {
    case KILN_ATTR_BOOL:
        return kiln_attrs_get_bool(a, key, &b) && json_is_boolean(v) && b == json_is_true(v);
    case KILN_ATTR_INT:
        return kiln_attrs_get_int(a, key, &i) && json_is_number(v) &&
               (double)i == json_number_value(v);
    case KILN_ATTR_FLOAT:
        return kiln_attrs_get_float(a, key, &d) && json_is_number(v) &&
               num_eq(d, json_number_value(v));
    case KILN_ATTR_STRING:
        return kiln_attrs_get_string(a, key, &s) && json_is_string(v) &&
               strcmp(s, json_string_value(v)) == 0;
    case KILN_ATTR_DTYPE:
        return kiln_attrs_get_dtype(a, key, &dt) && json_is_string(v) &&
               strcmp(kiln_dtype_name(dt), json_string_value(v)) == 0;
    case KILN_ATTR_LIST_INT: {
        const int64_t *l;
        if (!kiln_attrs_get_list_int(a, key, &l, &n) || !json_is_array(v) ||
            json_array_size(v) != n)
            return false;
        for (uint32_t k = 0; k < n; k++)
            if (!json_is_number(json_array_get(v, k)) ||
                (double)l[k] != json_number_value(json_array_get(v, k)))
                return false;
        return true;
    }
    case KILN_ATTR_LIST_FLOAT: {
        const double *l;
        if (!kiln_attrs_get_list_float(a, key, &l, &n) || !json_is_array(v) ||
            json_array_size(v) != n)
            return false;
        for (uint32_t k = 0; k < n; k++)
            if (!json_is_number(json_array_get(v, k)) ||
                !num_eq(l[k], json_number_value(json_array_get(v, k))))
                return false;
        return true;
    }
    case KILN_ATTR_LIST_STRING: {
        const char *const *l;
        if (!kiln_attrs_get_list_string(a, key, &l, &n) || !json_is_array(v) ||
            json_array_size(v) != n)
            return false;
        for (uint32_t k = 0; k < n; k++)
            if (!json_is_string(json_array_get(v, k)) ||
                strcmp(l[k], json_string_value(json_array_get(v, k))) != 0)
                return false;
        return true;
    }
    default:
        return false;
    }
}

/* Two attributes of one type and value (lists element-wise; tensors byte-wise). */
static bool attr_eq_attr(const kiln_attrs *a, const char *ka, const kiln_attrs *b, const char *kb)
{
    kiln_attr_type t = kiln_attrs_type(a, ka);
    if (t == KILN_ATTR_NONE || t != kiln_attrs_type(b, kb))
        return false;
    switch (t) {
    case KILN_ATTR_BOOL: {
        bool x, y;
        return kiln_attrs_get_bool(a, ka, &x) && kiln_attrs_get_bool(b, kb, &y) && x == y;
    }
    case KILN_ATTR_INT: {
        int64_t x, y;
        return kiln_attrs_get_int(a, ka, &x) && kiln_attrs_get_int(b, kb, &y) && x == y;
    }
    case KILN_ATTR_FLOAT: {
        double x, y;
        return kiln_attrs_get_float(a, ka, &x) && kiln_attrs_get_float(b, kb, &y) && x == y;
    }
    case KILN_ATTR_STRING: {
        const char *x, *y;
        return kiln_attrs_get_string(a, ka, &x) && kiln_attrs_get_string(b, kb, &y) &&
               strcmp(x, y) == 0;
    }
    case KILN_ATTR_DTYPE: {
        kiln_dtype x, y;
        return kiln_attrs_get_dtype(a, ka, &x) && kiln_attrs_get_dtype(b, kb, &y) && x == y;
    }
    case KILN_ATTR_LIST_INT: {
        const int64_t *x, *y;
        uint32_t nx, ny;
        return kiln_attrs_get_list_int(a, ka, &x, &nx) && kiln_attrs_get_list_int(b, kb, &y, &ny) &&
               nx == ny && (nx == 0 || memcmp(x, y, nx * sizeof(*x)) == 0);
    }
    case KILN_ATTR_LIST_FLOAT: {
        const double *x, *y;
        uint32_t nx, ny;
        if (!kiln_attrs_get_list_float(a, ka, &x, &nx) ||
            !kiln_attrs_get_list_float(b, kb, &y, &ny) || nx != ny)
            return false;
        for (uint32_t k = 0; k < nx; k++)
            if (x[k] != y[k])
                return false;
        return true;
    }
    case KILN_ATTR_LIST_STRING: {
        const char *const *x, *const *y;
        uint32_t nx, ny;
        if (!kiln_attrs_get_list_string(a, ka, &x, &nx) ||
            !kiln_attrs_get_list_string(b, kb, &y, &ny) || nx != ny)
            return false;
        for (uint32_t k = 0; k < nx; k++)
            if (strcmp(x[k], y[k]) != 0)
                return false;
        return true;
    }
    case KILN_ATTR_TENSOR: {
        kiln_tensor_value x, y;
        return kiln_attrs_get_tensor(a, ka, &x) && kiln_attrs_get_tensor(b, kb, &y) &&
               x.dtype == y.dtype && x.rank == y.rank && x.nbytes == y.nbytes &&
               (x.rank == 0 || memcmp(x.dims, y.dims, x.rank * sizeof(int64_t)) == 0) &&
               (x.nbytes == 0 || memcmp(x.data, y.data, x.nbytes) == 0);
    }
    default:
        return false;
    }
}

/* Element @p i of a tensor value as double; false for dtypes without one. */
static bool elem(const kiln_tensor_value *t, size_t i, double *out)
{
    const unsigned char *p = t->data;
    size_t sz = kiln_dtype_size(t->dtype);
    if (!sz || (i + 1) * sz > t->nbytes)
        return false;
    p += i * sz;
    switch (t->dtype) {
#define E(DT, T)                                                                                   \
    case DT: {                                                                                     \
        T v;                                                                                       \
        memcpy(&v, p, sizeof(v));                                                                  \
        *out = (double)v;                                                                          \
        return true;                                                                               \
    }
        E(KILN_DT_FLOAT32, float)
        E(KILN_DT_FLOAT64, double)
        E(KILN_DT_INT8, int8_t)
        E(KILN_DT_INT16, int16_t)
        E(KILN_DT_INT32, int32_t)
        E(KILN_DT_INT64, int64_t)
        E(KILN_DT_UINT8, uint8_t)
        E(KILN_DT_UINT16, uint16_t)
        E(KILN_DT_UINT32, uint32_t)
        E(KILN_DT_UINT64, uint64_t)
        E(KILN_DT_BOOL, uint8_t)
#undef E
    default:
        return false;
    }
}

static bool const_value(const kiln_graph *g, kiln_node_id n, kiln_tensor_value *t)
{
    return n && kiln_attrs_get_tensor(kiln_node_attrs(g, n), "value", t) && t->data &&
           kiln_dtype_size(t->dtype) && t->nbytes >= kiln_dtype_size(t->dtype);
}

static bool req_ok(const dfusion *f, const kiln_graph *g, const kiln_match *m, const dreq *q)
{
    const kiln_tensor_desc *d = NULL, *d2 = NULL;
    if (q->kind <= DREQ_SAME_SHAPE) {
        if (!(d = tensor_of(f, g, m, q->t, NULL)))
            return false;
        if (q->kind >= DREQ_SAME_DTYPE && !(d2 = tensor_of(f, g, m, q->t2, NULL)))
            return false;
    }
    switch (q->kind) {
    case DREQ_DTYPE:
        return (q->dtype_mask >> kiln_desc_dtype(d)) & 1u;
    case DREQ_RANK:
        for (uint32_t i = 0; i < q->nlist; i++)
            if (kiln_desc_rank(d) == q->list[i])
                return true;
        return false;
    case DREQ_SHAPE: {
        if (kiln_desc_rank(d) != (int32_t)q->nlist)
            return false;
        const int64_t *dims = kiln_desc_dims(d);
        for (uint32_t i = 0; i < q->nlist; i++)
            if (q->list[i] != -2 && dims[i] != q->list[i])
                return false;
        return true;
    }
    case DREQ_SAME_DTYPE:
        return kiln_desc_dtype(d) == kiln_desc_dtype(d2);
    case DREQ_SAME_SHAPE: {
        int32_t r = kiln_desc_rank(d);
        if (r < 0 || r != kiln_desc_rank(d2))
            return false;
        for (int32_t i = 0; i < r; i++)
            if (kiln_desc_dims(d)[i] < 0 || kiln_desc_dims(d)[i] != kiln_desc_dims(d2)[i])
                return false;
        return true;
    }
    case DREQ_ATTR_EQ:
        return attr_eq_literal(kiln_node_attrs(g, cap_node(f, m, q->node)), q->attr, q->literal);
    case DREQ_ATTR_EQ_ATTR:
        return attr_eq_attr(kiln_node_attrs(g, cap_node(f, m, q->node)), q->attr,
                            kiln_node_attrs(g, cap_node(f, m, q->node2)), q->attr2);
    case DREQ_CONST_VALUE: {
        kiln_tensor_value t;
        if (!const_value(g, cap_node(f, m, q->t.cap), &t))
            return false;
        size_t n = t.nbytes / kiln_dtype_size(t.dtype);
        for (size_t i = 0; i < n; i++) {
            double v;
            if (!elem(&t, i, &v) || !(fabs(v - q->value) <= q->tolerance))
                return false;
        }
        return true;
    }
    }
    return false;
}

bool decl_meet(void *inst, const kiln_graph *g, const kiln_match *m)
{
    const dfusion *f = inst;
    for (uint32_t i = 0; i < f->nreqs; i++)
        if (!req_ok(f, g, m, &f->reqs[i]))
            return false;
    return true;
}

/* ---- replacement ----------------------------------------------------------------- */

/* Copy attribute @p sk of @p src into @p dst as @p dk; false when absent or of an odd type. */
static bool copy_attr(kiln_attrs *dst, const char *dk, const kiln_attrs *src, const char *sk)
{
    uint32_t n;
    switch (kiln_attrs_type(src, sk)) {
    case KILN_ATTR_BOOL: {
        bool v;
        return kiln_attrs_get_bool(src, sk, &v) && kiln_attrs_set_bool(dst, dk, v) == KILN_OK;
    }
    case KILN_ATTR_INT: {
        int64_t v;
        return kiln_attrs_get_int(src, sk, &v) && kiln_attrs_set_int(dst, dk, v) == KILN_OK;
    }
    case KILN_ATTR_FLOAT: {
        double v;
        return kiln_attrs_get_float(src, sk, &v) && kiln_attrs_set_float(dst, dk, v) == KILN_OK;
    }
    case KILN_ATTR_STRING: {
        const char *v;
        return kiln_attrs_get_string(src, sk, &v) && kiln_attrs_set_string(dst, dk, v) == KILN_OK;
    }
    case KILN_ATTR_DTYPE: {
        kiln_dtype v;
        return kiln_attrs_get_dtype(src, sk, &v) && kiln_attrs_set_dtype(dst, dk, v) == KILN_OK;
    }
    case KILN_ATTR_LIST_INT: {
        const int64_t *v;
        return kiln_attrs_get_list_int(src, sk, &v, &n) &&
               kiln_attrs_set_list_int(dst, dk, v, n) == KILN_OK;
    }
    case KILN_ATTR_LIST_FLOAT: {
        const double *v;
        return kiln_attrs_get_list_float(src, sk, &v, &n) &&
               kiln_attrs_set_list_float(dst, dk, v, n) == KILN_OK;
    }
    case KILN_ATTR_LIST_STRING: {
        const char *const *v;
        return kiln_attrs_get_list_string(src, sk, &v, &n) &&
               kiln_attrs_set_list_string(dst, dk, v, n) == KILN_OK;
    }
    case KILN_ATTR_LIST_BOOL: {
        const uint8_t *v;
        return kiln_attrs_get_list_bool(src, sk, &v, &n) &&
               kiln_attrs_set_list_bool(dst, dk, v, n) == KILN_OK;
    }
    case KILN_ATTR_LIST_LIST_INT: {
        if (!kiln_attrs_get_list_list_int(src, sk, &n))
            return false;
        const int64_t **lists = calloc(n ? n : 1, sizeof(*lists));
        uint32_t *lens = calloc(n ? n : 1, sizeof(*lens));
        bool ok = lists && lens;
        for (uint32_t i = 0; ok && i < n; i++)
            ok = kiln_attrs_get_list_list_int_at(src, sk, i, &lists[i], &lens[i]);
        ok = ok && kiln_attrs_set_list_list_int(dst, dk, lists, lens, n) == KILN_OK;
        free(lists);
        free(lens);
        return ok;
    }
    case KILN_ATTR_TENSOR: {
        kiln_tensor_value v;
        return kiln_attrs_get_tensor(src, sk, &v) && kiln_attrs_set_tensor(dst, dk, &v) == KILN_OK;
    }
    default:
        return false;
    }
}

static kiln_status set_literal(kiln_attrs *a, const char *key, const json_t *v)
{
    if (json_is_boolean(v))
        return kiln_attrs_set_bool(a, key, json_is_true(v));
    if (json_is_integer(v))
        return kiln_attrs_set_int(a, key, json_integer_value(v));
    if (json_is_real(v))
        return kiln_attrs_set_float(a, key, json_real_value(v));
    if (json_is_string(v))
        return kiln_attrs_set_string(a, key, json_string_value(v));
    size_t n = json_array_size(v), i;
    json_t *e;
    bool reals = false, strs = n > 0 && json_is_string(json_array_get(v, 0));
    bool bools = n > 0 && json_is_boolean(json_array_get(v, 0));
    json_array_foreach(v, i, e) reals |= json_is_real(e);
    kiln_status st = KILN_ERR_NOMEM;
    void *buf = calloc(n ? n : 1, 8);
    if (!buf)
        return st;
    json_array_foreach(v, i, e)
    {
        if (strs)
            ((const char **)buf)[i] = json_string_value(e);
        else if (bools)
            ((uint8_t *)buf)[i] = json_is_true(e);
        else if (reals)
            ((double *)buf)[i] = json_number_value(e);
        else
            ((int64_t *)buf)[i] = json_integer_value(e);
    }
    if (strs)
        st = kiln_attrs_set_list_string(a, key, buf, (uint32_t)n);
    else if (bools)
        st = kiln_attrs_set_list_bool(a, key, buf, (uint32_t)n);
    else if (reals)
        st = kiln_attrs_set_list_float(a, key, buf, (uint32_t)n);
    else
        st = kiln_attrs_set_list_int(a, key, buf, (uint32_t)n);
    free(buf);
    return st;
}

static void put_elem(kiln_dtype dt, unsigned char *p, double v)
{
    switch (dt) {
#define P(DT, T)                                                                                   \
    case DT: {                                                                                     \
        T x = (T)v;                                                                                \
        memcpy(p, &x, sizeof(x));                                                                  \
        break;                                                                                     \
    }
        P(KILN_DT_FLOAT32, float)
        P(KILN_DT_FLOAT64, double)
        P(KILN_DT_INT8, int8_t)
        P(KILN_DT_INT16, int16_t)
        P(KILN_DT_INT32, int32_t)
        P(KILN_DT_INT64, int64_t)
        P(KILN_DT_UINT8, uint8_t)
        P(KILN_DT_UINT16, uint16_t)
        P(KILN_DT_UINT32, uint32_t)
        P(KILN_DT_UINT64, uint64_t)
#undef P
    case KILN_DT_BOOL:
        *p = v != 0;
        break;
    default:
        break;
    }
}

static kiln_status set_tensor(kiln_attrs *a, const char *key, const json_t *t)
{
    kiln_tensor_value v;
    memset(&v, 0, sizeof(v));
    kiln_dtype_parse(json_string_value(json_object_get(t, "dtype")), &v.dtype);
    json_t *sh = json_object_get(t, "shape"), *data = json_object_get(t, "data");
    int64_t dims[64];
    v.rank = (uint32_t)json_array_size(sh);
    if (v.rank > 64)
        return KILN_ERR_LIMIT;
    for (uint32_t i = 0; i < v.rank; i++)
        dims[i] = json_integer_value(json_array_get(sh, i));
    v.dims = dims;
    size_t n = json_array_size(data), sz = kiln_dtype_size(v.dtype);
    unsigned char *buf = calloc(n ? n : 1, sz);
    if (!buf)
        return KILN_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(data, i);
        put_elem(v.dtype, buf + i * sz,
                 json_is_boolean(e) ? json_is_true(e) : json_number_value(e));
    }
    v.data = buf;
    v.nbytes = n * sz;
    kiln_status st = kiln_attrs_set_tensor(a, key, &v);
    free(buf);
    return st;
}

/* Decline the match (KILN_ERR_NOT_FOUND) with a debug note saying why. */
static kiln_status decline(kiln_pass_ctx *ctx, const dfusion *f, const kiln_graph *g,
                           const kiln_match *m, const char *why, const char *what)
{
    kiln_anchor o = kiln_match_output(m, 0);
    kiln_diag(ctx, KILN_SEV_DEBUG, "%s: match at %s declined: %s %s", f->name,
              kiln_node_name_str(g, o.node), why, what);
    return KILN_ERR_NOT_FOUND;
}

static kiln_status set_attrs(kiln_pass_ctx *ctx, const dfusion *f, const kiln_graph *g,
                             const kiln_match *m, const drnode *rn, kiln_attrs *a)
{
    kiln_error *err = kiln_pass_error(ctx);
    if (rn->copy_attrs >= 0) {
        const kiln_attrs *src = kiln_node_attrs(g, cap_node(f, m, rn->copy_attrs));
        for (uint32_t i = 0; i < kiln_attrs_count(src); i++) {
            const char *k = kiln_attrs_key_at(src, i, NULL);
            if (k[0] == '_' || strcmp(k, "pass_name") == 0)
                continue; /* kiln / GE bookkeeping: ReportFuse writes the new node's */
            if (!copy_attr(a, k, src, k))
                return kiln_errorf(err, KILN_ERR_NOMEM, "%s: cannot copy attribute %s", f->name, k);
        }
    }
    for (uint32_t i = 0; i < rn->nattrs; i++) {
        const dattr *d = &rn->attrs[i];
        kiln_status st = KILN_OK;
        switch (d->kind) {
        case DATTR_LITERAL:
            st = set_literal(a, d->key, d->literal);
            break;
        case DATTR_TENSOR:
            st = set_tensor(a, d->key, d->literal);
            break;
        case DATTR_DTYPE:
            st = kiln_attrs_set_dtype(a, d->key, d->dtype);
            break;
        case DATTR_FROM: {
            const kiln_attrs *src = kiln_node_attrs(g, cap_node(f, m, d->cap));
            if (!kiln_attrs_has(src, d->from_key)) {
                if (d->optional)
                    break;
                return decline(ctx, f, g, m, "the captured node has no attribute", d->from_key);
            }
            if (!copy_attr(a, d->key, src, d->from_key))
                return kiln_errorf(err, KILN_ERR_NOMEM, "%s: cannot copy attribute %s", f->name,
                                   d->from_key);
            break;
        }
        case DATTR_SCALAR: {
            kiln_tensor_value t;
            double v;
            kiln_node_id c = cap_node(f, m, d->cap);
            if (!const_value(g, c, &t) || t.nbytes != kiln_dtype_size(t.dtype) || !elem(&t, 0, &v))
                return decline(ctx, f, g, m,
                               "not a one-element numeric constant:", kiln_node_name_str(g, c));
            bool integral = t.dtype != KILN_DT_FLOAT32 && t.dtype != KILN_DT_FLOAT64;
            st = integral ? kiln_attrs_set_int(a, d->key, (int64_t)v)
                          : kiln_attrs_set_float(a, d->key, v);
            break;
        }
        }
        if (st != KILN_OK)
            return kiln_errorf(err, st, "%s: cannot set attribute %s", f->name, d->key);
    }
    return KILN_OK;
}

#define DECL_MAX_IO 16

/*
 * The dtype and shape of a new node's outputs, from its op's inference
 * function (the op registry's; kiln_op.h) over its inputs in @p repl: a
 * fusion that runs after InferShapes must leave inferred descriptors, and the
 * nodes of a replacement graph that produce no boundary output have no other
 * source.  Inputs fed by a replacement Const carry its value.  An op without
 * inference keeps the default descriptor.  KILN_ERR_NOT_FOUND (with @p why)
 * when inference refuses the inputs: the match is declined.
 */
static kiln_status infer_node(kiln_graph *repl, kiln_node_id n, char *why, size_t why_size)
{
    const kiln_op_def *def = kiln_node_op_def(repl, n);
    uint32_t nin = kiln_node_input_count(repl, n), nout = kiln_node_output_count(repl, n);
    if (!def || !def->infer || nin > DECL_MAX_IO || nout > DECL_MAX_IO)
        return KILN_OK;
    kiln_op_io in[DECL_MAX_IO], out[DECL_MAX_IO];
    kiln_op_value vals[DECL_MAX_IO];
    memset(in, 0, sizeof(in));
    memset(out, 0, sizeof(out));
    memset(vals, 0, sizeof(vals));
    for (uint32_t i = 0; i < nin + nout; i++) {
        bool is_in = i < nin;
        kiln_op_io *io = is_in ? &in[i] : &out[i - nin];
        const kiln_tensor_desc *d;
        kiln_anchor p = {n, i - nin};
        if (is_in) {
            p = kiln_node_input_peer(repl, n, i);
            if (!p.node)
                continue;
        }
        d = kiln_node_output_desc(repl, p.node, p.index);
        io->present = true;
        io->dtype = kiln_desc_dtype(d);
        int32_t r = kiln_desc_rank(d);
        io->s.rank = r > KILN_OP_MAX_RANK ? -1 : r;
        for (int32_t k = 0; k < io->s.rank; k++)
            io->s.d[k] = kiln_desc_dims(d)[k];
        kiln_tensor_value t;
        if (is_in && strcmp(kiln_node_op_str(repl, p.node), "Const") == 0 &&
            kiln_attrs_get_tensor(kiln_node_attrs(repl, p.node), "value", &t) && t.data &&
            t.rank <= KILN_OP_MAX_RANK) {
            vals[i] = (kiln_op_value){.dtype = t.dtype,
                                      .data = (void *)(uintptr_t)t.data,
                                      .nbytes = t.nbytes,
                                      .borrowed = true};
            vals[i].s.rank = (int32_t)t.rank;
            for (uint32_t k = 0; k < t.rank; k++)
                vals[i].s.d[k] = t.dims[k];
            io->val = &vals[i];
        }
    }
    kiln_op_node nd = {repl,
                       n,
                       kiln_node_attrs(repl, n),
                       kiln_node_op_str(repl, n),
                       kiln_node_name_str(repl, n),
                       nin,
                       nout,
                       in,
                       out,
                       def};
    kiln_error *e = kiln_error_create();
    if (!e)
        return KILN_ERR_NOMEM;
    kiln_status st = def->infer(&nd, e);
    if (st != KILN_OK)
        kiln_error_format(e, why, why_size);
    kiln_error_destroy(e);
    if (st != KILN_OK)
        return KILN_ERR_NOT_FOUND;
    for (uint32_t o = 0; o < nout; o++) {
        kiln_tensor_desc *d = kiln_node_output_desc(repl, n, o);
        if ((st = kiln_desc_set_dtype(repl, d, out[o].dtype)) != KILN_OK ||
            (st = kiln_desc_set_shape(repl, d, out[o].s.rank,
                                      out[o].s.rank > 0 ? out[o].s.d : NULL)) != KILN_OK)
            return st;
    }
    return KILN_OK;
}

kiln_status decl_replacement(void *inst, kiln_pass_ctx *ctx, const kiln_graph *g,
                             const kiln_match *m, kiln_graph *repl)
{
    const dfusion *f = inst;
    kiln_error *err = kiln_pass_error(ctx);
    kiln_graph *mg = (kiln_graph *)(uintptr_t)g; /* read only */
    if (kiln_match_output_count(m) != f->noutputs || kiln_match_input_count(m) != f->ninputs)
        return kiln_errorf(err, KILN_ERR_INTERNAL,
                           "%s: the match has %u inputs and %u outputs, the definition %u and %u",
                           f->name, kiln_match_input_count(m), kiln_match_output_count(m),
                           f->ninputs, f->noutputs);
    const char *base = kiln_node_name_str(g, kiln_match_output(m, 0).node);
    kiln_node_id ids[64];
    for (uint32_t i = 0; i < f->nrnodes; i++) {
        const drnode *rn = &f->rnodes[i];
        char name[512];
        snprintf(name, sizeof(name), "%s/%s", base, rn->name);
        kiln_node_id n = kiln_graph_add_node(repl, name, rn->op, rn->ninputs, rn->noutputs);
        if (!n)
            return kiln_errorf(err, KILN_ERR_NOMEM, "%s: cannot add node %s", f->name, name);
        ids[i] = n;
        for (uint32_t k = 0; k < rn->ninputs; k++) {
            const drin *r = &rn->inputs[k];
            kiln_node_id src =
                r->from_input ? kiln_fusion_replacement_input(repl, r->index) : ids[r->index];
            if (!src || kiln_edge_add(repl, src, r->out, n, k) != KILN_OK)
                return kiln_errorf(err, KILN_ERR_INTERNAL, "%s: cannot wire input %u of %s",
                                   f->name, k, name);
        }
        kiln_status st = set_attrs(ctx, f, g, m, rn, kiln_node_attrs_mut(repl, n));
        if (st != KILN_OK)
            return st;
        if (rn->like.cap >= 0) {
            const kiln_tensor_desc *d = tensor_of(f, g, m, rn->like, NULL);
            if (d && (st = kiln_desc_copy(repl, kiln_node_output_desc(repl, n, 0), d)) != KILN_OK)
                return kiln_errorf(err, st, "%s: cannot copy a descriptor", f->name);
        } else {
            char why[512] = "";
            st = infer_node(repl, n, why, sizeof(why));
            if (st == KILN_ERR_NOT_FOUND) {
                kiln_diag(ctx, KILN_SEV_WARNING, "%s: match at %s declined: node %s: %s", f->name,
                          base, rn->name, why);
                return st;
            }
            if (st != KILN_OK)
                return kiln_errorf(err, st, "%s: cannot set the descriptors of %s", f->name, name);
        }
    }
    kiln_node_id out = kiln_graph_add_node(repl, "decl_output", "NetOutput", f->noutputs, 0);
    if (!out)
        return kiln_errorf(err, KILN_ERR_NOMEM, "%s: cannot add the NetOutput", f->name);
    for (uint32_t j = 0; j < f->noutputs; j++) {
        const drin *r = &f->routputs[j];
        kiln_anchor bo = kiln_match_output(m, j);
        kiln_tensor_desc *dst = kiln_node_output_desc(repl, ids[r->index], r->out);
        kiln_status st;
        if (kiln_edge_add(repl, ids[r->index], r->out, out, j) != KILN_OK)
            return kiln_errorf(err, KILN_ERR_INTERNAL, "%s: cannot wire output %u", f->name, j);
        /* the new output takes the descriptor of the tensor it replaces */
        if (bo.node && dst &&
            (st = kiln_desc_copy(repl, dst, kiln_node_output_desc(mg, bo.node, bo.index))) !=
                KILN_OK)
            return kiln_errorf(err, st, "%s: cannot copy a descriptor", f->name);
    }
    return KILN_OK;
}

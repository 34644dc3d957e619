/*
 * infer_ops_elem.c - shape/dtype inference helpers and the elementwise ops:
 * broadcasting binaries (Add Sub Mul Div Pow Max Equal GreaterOrEqual),
 * unary activations (Relu Sigmoid Sqrt Log Neg LeakyRelu HardSigmoid Clip
 * Softmax Not Identity), Cast and the reductions (ReduceMax ReduceMean).
 */
#include "infer.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---- helpers --------------------------------------------------------------- */

kiln_status infer_fail(const infer_node *nd, kiln_error *err, kiln_status code, const char *fmt,
                       ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return kiln_errorf(err, code, "node %s (%s): %s", nd->name, nd->op, msg);
}

const char *infer_shape_str(const infer_shape *s, char *buf, size_t size)
{
    size_t k = 0;
    if (s->rank < 0) {
        snprintf(buf, size, "[?]");
        return buf;
    }
    k += (size_t)snprintf(buf, size, "[");
    for (int32_t i = 0; i < s->rank && k < size; i++)
        k += (size_t)snprintf(buf + k, size - k, "%s%lld", i ? "," : "", (long long)s->d[i]);
    if (k < size)
        snprintf(buf + k, size - k, "]");
    return buf;
}

void infer_shape_unknown(infer_shape *s)
{
    memset(s, 0, sizeof(*s));
    s->rank = -1;
}

void infer_shape_ranked_unknown(infer_shape *s, int32_t rank)
{
    if (rank < 0) {
        infer_shape_unknown(s);
        return;
    }
    s->rank = rank;
    for (int32_t i = 0; i < rank; i++)
        s->d[i] = -1;
}

bool infer_shape_known(const infer_shape *s)
{
    if (s->rank < 0)
        return false;
    for (int32_t i = 0; i < s->rank; i++)
        if (s->d[i] < 0)
            return false;
    return true;
}

int64_t infer_shape_numel(const infer_shape *s)
{
    int64_t n;
    if (s->rank < 0 || kiln_dims_numel(s->d, (uint32_t)s->rank, &n) != KILN_OK)
        return -1;
    return n;
}

kiln_status infer_need_input(const infer_node *nd, uint32_t i, kiln_error *err)
{
    if (i >= nd->nin || !nd->in[i].present)
        return infer_fail(nd, err, KILN_ERR_INVALID, "input %u is not connected", i);
    return KILN_OK;
}

kiln_status infer_broadcast(const infer_node *nd, const infer_shape *a, const infer_shape *b,
                            infer_shape *out, kiln_error *err)
{
    if (a->rank < 0 || b->rank < 0) {
        infer_shape_unknown(out);
        return KILN_OK;
    }
    int32_t r = a->rank > b->rank ? a->rank : b->rank;
    infer_shape o;
    o.rank = r;
    for (int32_t i = 0; i < r; i++) {
        int32_t ia = i - (r - a->rank), ib = i - (r - b->rank);
        int64_t da = ia >= 0 ? a->d[ia] : 1, db = ib >= 0 ? b->d[ib] : 1;
        if (da == db)
            o.d[i] = da;
        else if (da == 1)
            o.d[i] = db;
        else if (db == 1)
            o.d[i] = da;
        else if (da < 0)
            o.d[i] = db;
        else if (db < 0)
            o.d[i] = da;
        else {
            char sa[160], sb[160];
            return infer_fail(nd, err, KILN_ERR_INVALID,
                              "cannot broadcast shapes %s and %s (dim %d: %lld vs %lld)",
                              infer_shape_str(a, sa, sizeof(sa)), infer_shape_str(b, sb, sizeof(sb)),
                              (int)i, (long long)da, (long long)db);
        }
    }
    *out = o;
    return KILN_OK;
}

bool infer_axis(int64_t axis, int32_t rank, int64_t *out)
{
    if (axis < 0)
        axis += rank;
    if (axis < 0 || axis >= rank)
        return false;
    *out = axis;
    return true;
}

size_t infer_val_numel(const infer_val *v)
{
    int64_t n = infer_shape_numel(&v->s); /* a value's shape is known and fits */
    return n < 0 ? 0 : (size_t)n;
}

int64_t infer_val_int(const infer_val *v, size_t i)
{
    const void *p = v->data;
    switch (v->dtype) {
    case KILN_DT_INT64: return ((const int64_t *)p)[i];
    case KILN_DT_INT32: return ((const int32_t *)p)[i];
    case KILN_DT_INT16: return ((const int16_t *)p)[i];
    case KILN_DT_INT8: return ((const int8_t *)p)[i];
    case KILN_DT_UINT8:
    case KILN_DT_BOOL: return ((const uint8_t *)p)[i];
    case KILN_DT_UINT16: return ((const uint16_t *)p)[i];
    case KILN_DT_UINT32: return ((const uint32_t *)p)[i];
    case KILN_DT_UINT64: return (int64_t)((const uint64_t *)p)[i];
    case KILN_DT_FLOAT32: return (int64_t)((const float *)p)[i];
    case KILN_DT_FLOAT64: return (int64_t)((const double *)p)[i];
    default: return 0;
    }
}

double infer_val_f64(const infer_val *v, size_t i)
{
    if (v->dtype == KILN_DT_FLOAT32)
        return ((const float *)v->data)[i];
    if (v->dtype == KILN_DT_FLOAT64)
        return ((const double *)v->data)[i];
    return (double)infer_val_int(v, i);
}

bool infer_ints(const infer_node *nd, const char *attr, uint32_t idx, int64_t *out, uint32_t max,
                uint32_t *n)
{
    const int64_t *v;
    uint32_t k;
    if (attr && kiln_attrs_get_list_int(nd->attrs, attr, &v, &k)) {
        if (k > max)
            return false;
        memcpy(out, v, k * sizeof(int64_t));
        *n = k;
        return true;
    }
    if (idx < nd->nin && nd->in[idx].present && nd->in[idx].val) {
        const infer_val *iv = nd->in[idx].val;
        size_t cnt = infer_val_numel(iv);
        if (cnt > max)
            return false;
        for (size_t i = 0; i < cnt; i++)
            out[i] = infer_val_int(iv, i);
        *n = (uint32_t)cnt;
        return true;
    }
    return false;
}

int64_t infer_attr_int(const infer_node *nd, const char *key, int64_t dflt)
{
    int64_t v;
    return kiln_attrs_get_int(nd->attrs, key, &v) ? v : dflt;
}

bool infer_onnx_dtype(int64_t t, kiln_dtype *out)
{
    static const int map[17] = {-1, KILN_DT_FLOAT32, KILN_DT_UINT8, KILN_DT_INT8, KILN_DT_UINT16,
                                KILN_DT_INT16, KILN_DT_INT32, KILN_DT_INT64, KILN_DT_STRING,
                                KILN_DT_BOOL, KILN_DT_FLOAT16, KILN_DT_FLOAT64, KILN_DT_UINT32,
                                KILN_DT_UINT64, -1, -1, KILN_DT_BFLOAT16};
    if (t < 0 || t > 16 || map[t] < 0)
        return false;
    *out = (kiln_dtype)map[t];
    return true;
}

/* ---- elementwise ------------------------------------------------------------ */

/* Variadic numpy broadcast; output dtype = input 0's (or bool). */
static kiln_status broadcast_all(infer_node *nd, kiln_dtype dt, kiln_error *err)
{
    infer_shape s;
    bool first = true;
    for (uint32_t i = 0; i < nd->nin; i++) {
        if (!nd->in[i].present)
            continue;
        if (first) {
            s = nd->in[i].s;
            first = false;
            continue;
        }
        kiln_status st = infer_broadcast(nd, &s, &nd->in[i].s, &s, err);
        if (st != KILN_OK)
            return st;
    }
    if (first)
        return infer_fail(nd, err, KILN_ERR_INVALID, "no inputs");
    nd->out[0].s = s;
    nd->out[0].dtype = dt;
    return KILN_OK;
}

static kiln_status infer_binary(infer_node *nd, kiln_error *err)
{
    return broadcast_all(nd, nd->in[0].dtype, err);
}

static kiln_status infer_compare(infer_node *nd, kiln_error *err)
{
    return broadcast_all(nd, KILN_DT_BOOL, err);
}

/* Output 0 has input 0's dtype and shape. */
static kiln_status infer_unary(infer_node *nd, kiln_error *err)
{
    kiln_status st = infer_need_input(nd, 0, err);
    if (st != KILN_OK)
        return st;
    nd->out[0].s = nd->in[0].s;
    nd->out[0].dtype = nd->in[0].dtype;
    return KILN_OK;
}

/*
 * Assign, AssignAdd, AssignSub (GE's reference ops: input and output "ref"
 * share one name): output 0 is input 0, written in place.  Its descriptor
 * gets `ref_input` 0 when the graph did not say, so the symbol table, the
 * memory-conflict passes and the runtimes see the write into input 0's
 * memory (GE's RefRelations from the op definition).
 */
static kiln_status infer_assign(infer_node *nd, kiln_error *err)
{
    kiln_status st = infer_unary(nd, err);
    if (st != KILN_OK || !nd->nout)
        return st;
    kiln_tensor_desc *d = kiln_node_output_desc(nd->g, nd->n, 0);
    if (d && kiln_desc_ref_input(d) < 0)
        st = kiln_desc_set_ref_input(nd->g, d, 0);
    return st == KILN_OK ? KILN_OK : kiln_errorf(err, st, "node %s: cannot set ref_input", nd->name);
}

static kiln_status infer_not(infer_node *nd, kiln_error *err)
{
    kiln_status st = infer_unary(nd, err);
    nd->out[0].dtype = KILN_DT_BOOL;
    return st;
}

static kiln_status infer_cast(infer_node *nd, kiln_error *err)
{
    kiln_status st = infer_unary(nd, err);
    if (st != KILN_OK)
        return st;
    int64_t to;
    kiln_dtype dt;
    if (kiln_attrs_get_dtype(nd->attrs, "to", &dt))
        nd->out[0].dtype = dt;
    else if (kiln_attrs_get_int(nd->attrs, "to", &to) && infer_onnx_dtype(to, &dt))
        nd->out[0].dtype = dt;
    else
        return infer_fail(nd, err, KILN_ERR_INVALID, "attribute 'to' is missing or not a type");
    return KILN_OK;
}

/* ReduceMax / ReduceMean: axes from the attribute (opset < 18) or input 1. */
static kiln_status infer_reduce(infer_node *nd, kiln_error *err)
{
    kiln_status st = infer_unary(nd, err);
    if (st != KILN_OK)
        return st;
    const infer_shape *x = &nd->in[0].s;
    int64_t keep = infer_attr_int(nd, "keepdims", 1);
    int64_t noop = infer_attr_int(nd, "noop_with_empty_axes", 0);
    int64_t axes[INFER_MAX_RANK];
    uint32_t na = 0;
    bool have = infer_ints(nd, "axes", 1, axes, INFER_MAX_RANK, &na);
    if (!have && nd->nin > 1 && nd->in[1].present) {
        /* axes given by a tensor whose value is unknown */
        infer_shape_ranked_unknown(&nd->out[0].s, keep ? x->rank : -1);
        return KILN_OK;
    }
    if (x->rank < 0) {
        infer_shape_unknown(&nd->out[0].s);
        return KILN_OK;
    }
    bool red[INFER_MAX_RANK] = {false};
    if (na == 0) {
        for (int32_t i = 0; i < x->rank; i++)
            red[i] = !noop;
    }
    for (uint32_t i = 0; i < na; i++) {
        int64_t a;
        if (!infer_axis(axes[i], x->rank, &a))
            return infer_fail(nd, err, KILN_ERR_INVALID, "axis %lld out of range for rank %d",
                              (long long)axes[i], (int)x->rank);
        red[a] = true;
    }
    infer_shape o;
    o.rank = 0;
    for (int32_t i = 0; i < x->rank; i++) {
        if (!red[i])
            o.d[o.rank++] = x->d[i];
        else if (keep)
            o.d[o.rank++] = 1;
    }
    nd->out[0].s = o;
    return KILN_OK;
}

const infer_op infer_ops_elem[] = {
    {"Add", infer_binary},         {"Sub", infer_binary},         {"Mul", infer_binary},
    {"Div", infer_binary},         {"Pow", infer_binary},         {"Max", infer_binary},
    {"Min", infer_binary},         {"Sum", infer_binary},         {"Equal", infer_compare},      {"GreaterOrEqual", infer_compare},
    {"Greater", infer_compare},    {"Less", infer_compare},       {"LessOrEqual", infer_compare},
    {"Relu", infer_unary},         {"Sigmoid", infer_unary},      {"Sqrt", infer_unary},
    {"Log", infer_unary},          {"Neg", infer_unary},          {"LeakyRelu", infer_unary},
    {"HardSigmoid", infer_unary},  {"HardSwish", infer_unary},
    {"Erf", infer_unary},          {"Gelu", infer_unary},    {"QuickGelu", infer_unary},    {"Clip", infer_unary},         {"Softmax", infer_unary},
    {"Identity", infer_unary},     {"Exp", infer_unary},          {"Tanh", infer_unary},
    {"Abs", infer_unary},          {"Not", infer_not},            {"Cast", infer_cast},
    {"ReduceMax", infer_reduce},   {"ReduceMean", infer_reduce},  {"ReduceMin", infer_reduce},
    {"ReduceSum", infer_reduce},
};
const uint32_t infer_ops_elem_count = sizeof(infer_ops_elem) / sizeof(infer_ops_elem[0]);

/* GE's ops the op set registers (opset.c's GE rows) that have an inference. */
infer_fn infer_find_ge_op(const char *op_type)
{
    static const char *const assign[] = {"Assign", "AssignAdd", "AssignSub"};
    for (size_t i = 0; i < sizeof(assign) / sizeof(assign[0]); i++)
        if (strcmp(op_type, assign[i]) == 0)
            return infer_assign;
    return NULL;
}

infer_fn infer_find_op(const char *op_type)
{
    for (uint32_t i = 0; i < infer_ops_elem_count; i++)
        if (strcmp(infer_ops_elem[i].op_type, op_type) == 0)
            return infer_ops_elem[i].fn;
    for (uint32_t i = 0; i < infer_ops_nn_count; i++)
        if (strcmp(infer_ops_nn[i].op_type, op_type) == 0)
            return infer_ops_nn[i].fn;
    for (uint32_t i = 0; i < infer_ops_shape_count; i++)
        if (strcmp(infer_ops_shape[i].op_type, op_type) == 0)
            return infer_ops_shape[i].fn;
    return NULL;
}

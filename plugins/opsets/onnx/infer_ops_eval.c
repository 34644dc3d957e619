/*
 * infer_ops_eval.c - the built-in evaluator of value propagation: computes
 * small constant tensors of the shape arithmetic ops (Shape, Size, Gather,
 * Concat, Slice, Transpose, Squeeze, Unsqueeze, Reshape, Flatten, Identity, Cast,
 * ConstantOfShape, Equal, GreaterOrEqual, Not, Neg, Add, Sub, Mul, Div, Max,
 * Min) when the engine has no kernel for them (or declines the dtype).
 * Integers are computed in int64, floats in double, then stored in the
 * output dtype.  Outputs are at most INFER_FOLD_MAX_ELEMS elements.
 */
#include "infer.h"

#include <stdlib.h>
#include <string.h>

static bool is_float(kiln_dtype dt)
{
    return dt == KILN_DT_FLOAT32 || dt == KILN_DT_FLOAT64;
}

/* Store element @p i (integer @p iv or float @p fv per the dtype). */
static bool store(infer_val *v, size_t i, int64_t iv, double fv)
{
    void *p = v->data;
    switch (v->dtype) {
    case KILN_DT_FLOAT32: ((float *)p)[i] = (float)fv; return true;
    case KILN_DT_FLOAT64: ((double *)p)[i] = fv; return true;
    case KILN_DT_INT64: ((int64_t *)p)[i] = iv; return true;
    case KILN_DT_INT32: ((int32_t *)p)[i] = (int32_t)iv; return true;
    case KILN_DT_INT16: ((int16_t *)p)[i] = (int16_t)iv; return true;
    case KILN_DT_INT8: ((int8_t *)p)[i] = (int8_t)iv; return true;
    case KILN_DT_UINT8: ((uint8_t *)p)[i] = (uint8_t)iv; return true;
    case KILN_DT_BOOL: ((uint8_t *)p)[i] = iv != 0; return true;
    case KILN_DT_UINT16: ((uint16_t *)p)[i] = (uint16_t)iv; return true;
    case KILN_DT_UINT32: ((uint32_t *)p)[i] = (uint32_t)iv; return true;
    case KILN_DT_UINT64: ((uint64_t *)p)[i] = (uint64_t)iv; return true;
    default: return false;
    }
}

/* Copy element @p j of @p src into element @p i of @p dst (converting). */
static bool convert(infer_val *dst, size_t i, const infer_val *src, size_t j)
{
    if (is_float(src->dtype))
        return store(dst, i, (int64_t)infer_val_f64(src, j), infer_val_f64(src, j));
    if (dst->dtype == KILN_DT_BOOL)
        return store(dst, i, infer_val_int(src, j) != 0, 0);
    return store(dst, i, infer_val_int(src, j), (double)infer_val_int(src, j));
}

/* Flat index into @p in for the output multi-index of flat @p k (broadcast). */
static size_t bcast_index(const infer_shape *out, const infer_shape *in, size_t k)
{
    size_t idx = 0, stride = 1;
    for (int32_t d = out->rank - 1; d >= 0; d--) {
        size_t od = (size_t)out->d[d], c = k % od;
        k /= od;
        int32_t id = d - (out->rank - in->rank);
        if (id >= 0) {
            if (in->d[id] != 1)
                idx += c * stride;
            stride *= (size_t)in->d[id];
        }
    }
    return idx;
}

static bool eval_binary(const infer_node *nd, infer_val *o)
{
    const char *op = nd->op;
    size_t n = infer_val_numel(o);
    const infer_val *a = nd->in[0].val;
    for (uint32_t k = 1; k < nd->nin; k++) {
        const infer_val *b = nd->in[k].val;
        bool fl = is_float(a->dtype) || is_float(b->dtype);
        if (nd->nin > 2 && k > 1)
            a = o; /* variadic Max/Min: fold left over the output */
        for (size_t i = 0; i < n; i++) {
            size_t ia = a == o ? i : bcast_index(&o->s, &a->s, i);
            size_t ib = bcast_index(&o->s, &b->s, i);
            if (fl) {
                double x = infer_val_f64(a, ia), y = infer_val_f64(b, ib), r;
                if (strcmp(op, "Add") == 0) r = x + y;
                else if (strcmp(op, "Sub") == 0) r = x - y;
                else if (strcmp(op, "Mul") == 0) r = x * y;
                else if (strcmp(op, "Div") == 0) r = x / y;
                else if (strcmp(op, "Max") == 0) r = x > y ? x : y;
                else if (strcmp(op, "Min") == 0) r = x < y ? x : y;
                else if (strcmp(op, "Equal") == 0) r = x == y;
                else if (strcmp(op, "GreaterOrEqual") == 0) r = x >= y;
                else return false;
                if (!store(o, i, (int64_t)r, r))
                    return false;
            } else {
                /* the CPU kernels' integer semantics: wrap, never trap */
                int64_t x = infer_val_int(a, ia), y = infer_val_int(b, ib), r;
                if (strcmp(op, "Add") == 0) r = (int64_t)((uint64_t)x + (uint64_t)y);
                else if (strcmp(op, "Sub") == 0) r = (int64_t)((uint64_t)x - (uint64_t)y);
                else if (strcmp(op, "Mul") == 0) r = (int64_t)((uint64_t)x * (uint64_t)y);
                else if (strcmp(op, "Div") == 0) {
                    if (y == 0)
                        return false;
                    r = y == -1 ? (int64_t)(UINT64_C(0) - (uint64_t)x) : x / y;
                } else if (strcmp(op, "Max") == 0) r = x > y ? x : y;
                else if (strcmp(op, "Min") == 0) r = x < y ? x : y;
                else if (strcmp(op, "Equal") == 0) r = x == y;
                else if (strcmp(op, "GreaterOrEqual") == 0) r = x >= y;
                else return false;
                if (!store(o, i, r, (double)r))
                    return false;
            }
        }
    }
    return true;
}

static bool eval_gather(const infer_node *nd, infer_val *o)
{
    const infer_val *x = nd->in[0].val, *ix = nd->in[1].val;
    int64_t axis;
    if (!infer_axis(infer_attr_int(nd, "axis", 0), x->s.rank, &axis))
        return false;
    size_t outer = 1, inner = 1, nidx = infer_val_numel(ix), dim = (size_t)x->s.d[axis];
    for (int32_t i = 0; i < axis; i++)
        outer *= (size_t)x->s.d[i];
    for (int32_t i = (int32_t)axis + 1; i < x->s.rank; i++)
        inner *= (size_t)x->s.d[i];
    size_t es = kiln_dtype_size(x->dtype), k = 0;
    for (size_t a = 0; a < outer; a++)
        for (size_t j = 0; j < nidx; j++) {
            int64_t q = infer_val_int(ix, j);
            if (q < 0)
                q += (int64_t)dim;
            if (q < 0 || (size_t)q >= dim)
                return false;
            memcpy((char *)o->data + k * inner * es,
                   (const char *)x->data + ((a * dim) + (size_t)q) * inner * es, inner * es);
            k++;
        }
    return true;
}

static bool eval_concat(const infer_node *nd, infer_val *o)
{
    int64_t axis;
    if (!infer_axis(infer_attr_int(nd, "axis", 0), o->s.rank, &axis))
        return false;
    size_t outer = 1;
    for (int32_t i = 0; i < axis; i++)
        outer *= (size_t)o->s.d[i];
    size_t off = 0, orow = o->nbytes / (outer ? outer : 1);
    for (uint32_t k = 0; k < nd->nin; k++) {
        const infer_val *v = nd->in[k].val;
        if (!v)
            continue;
        if (v->dtype != o->dtype)
            return false;
        size_t row = outer ? v->nbytes / outer : 0;
        for (size_t a = 0; a < outer; a++)
            memcpy((char *)o->data + a * orow + off, (const char *)v->data + a * row, row);
        off += row;
    }
    return true;
}

static bool eval_slice(const infer_node *nd, infer_val *o)
{
    const infer_val *x = nd->in[0].val;
    int64_t st[INFER_MAX_RANK], en[INFER_MAX_RANK], ax[INFER_MAX_RANK], sp[INFER_MAX_RANK];
    uint32_t ns, ne, na, nst;
    if (!infer_ints(nd, "starts", 1, st, INFER_MAX_RANK, &ns) ||
        !infer_ints(nd, "ends", 2, en, INFER_MAX_RANK, &ne))
        return false;
    bool has_axes = infer_ints(nd, "axes", 3, ax, INFER_MAX_RANK, &na);
    bool has_steps = infer_ints(nd, "steps", 4, sp, INFER_MAX_RANK, &nst);
    int64_t start[INFER_MAX_RANK], step[INFER_MAX_RANK];
    for (int32_t d = 0; d < x->s.rank; d++)
        start[d] = 0, step[d] = 1;
    for (uint32_t i = 0; i < ns; i++) {
        int64_t a = has_axes ? ax[i] : (int64_t)i, s = st[i], dim;
        if (!infer_axis(a, x->s.rank, &a))
            return false;
        dim = x->s.d[a];
        step[a] = has_steps ? sp[i] : 1;
        if (s < 0)
            s += dim;
        if (step[a] > 0)
            s = s < 0 ? 0 : s > dim ? dim : s;
        else
            s = s < 0 ? 0 : s > dim - 1 ? dim - 1 : s;
        start[a] = s;
    }
    size_t n = infer_val_numel(o);
    for (size_t k = 0; k < n; k++) {
        size_t rem = k, src = 0, stride = 1;
        for (int32_t d = o->s.rank - 1; d >= 0; d--) {
            size_t c = rem % (size_t)o->s.d[d];
            rem /= (size_t)o->s.d[d];
            src += (size_t)(start[d] + (int64_t)c * step[d]) * stride;
            stride *= (size_t)x->s.d[d];
        }
        if (!convert(o, k, x, src))
            return false;
    }
    return true;
}

static bool eval_transpose(const infer_node *nd, infer_val *o)
{
    const infer_val *x = nd->in[0].val;
    int64_t perm[INFER_MAX_RANK];
    uint32_t np;
    int32_t r = x->s.rank;
    if (!infer_ints(nd, "perm", UINT32_MAX, perm, INFER_MAX_RANK, &np)) {
        np = (uint32_t)r;
        for (int32_t i = 0; i < r; i++)
            perm[i] = r - 1 - i;
    }
    if (np != (uint32_t)r || x->dtype != o->dtype)
        return false;
    size_t xs[INFER_MAX_RANK], es = kiln_dtype_size(x->dtype), n = infer_val_numel(o);
    for (int32_t d = r - 1, st = 1; d >= 0; d--) {
        xs[d] = (size_t)st;
        st *= (int32_t)x->s.d[d];
    }
    for (size_t k = 0; k < n; k++) {
        size_t rem = k, src = 0;
        for (int32_t d = r - 1; d >= 0; d--) {
            size_t c = rem % (size_t)o->s.d[d];
            rem /= (size_t)o->s.d[d];
            src += c * xs[perm[d]];
        }
        memcpy((char *)o->data + k * es, (const char *)x->data + src * es, es);
    }
    return true;
}

bool infer_eval_builtin(const infer_node *nd, infer_val *out)
{
    const char *op = nd->op;
    infer_val *o = &out[0];
    if (nd->nout != 1)
        return false;
    if (strcmp(op, "Shape") == 0) {
        int32_t r = nd->in[0].s.rank;
        int64_t s = infer_attr_int(nd, "start", 0);
        if (s < 0)
            s += r;
        s = s < 0 ? 0 : s;
        for (int64_t i = 0; i < o->s.d[0]; i++)
            ((int64_t *)o->data)[i] = nd->in[0].s.d[s + i];
        return true;
    }
    if (strcmp(op, "Size") == 0) {
        ((int64_t *)o->data)[0] = infer_shape_numel(&nd->in[0].s);
        return true;
    }
    if (strcmp(op, "ConstantOfShape") == 0) {
        kiln_tensor_value t;
        size_t n = infer_val_numel(o), es = kiln_dtype_size(o->dtype);
        bool has = kiln_attrs_get_tensor(nd->attrs, "value", &t) && t.nbytes >= es;
        for (size_t i = 0; i < n; i++) {
            if (has)
                memcpy((char *)o->data + i * es, t.data, es);
            else
                memset((char *)o->data + i * es, 0, es);
        }
        return true;
    }
    for (uint32_t i = 0; i < nd->nin; i++)
        if (nd->in[i].present && !nd->in[i].val)
            return false;
    const infer_val *x = nd->nin ? nd->in[0].val : NULL;
    if (!x)
        return false;
    if (strcmp(op, "Identity") == 0 || strcmp(op, "Reshape") == 0 ||
        strcmp(op, "Squeeze") == 0 || strcmp(op, "Unsqueeze") == 0 ||
        strcmp(op, "Flatten") == 0) {
        if (x->nbytes != o->nbytes || x->dtype != o->dtype)
            return false;
        memcpy(o->data, x->data, o->nbytes);
        return true;
    }
    if (strcmp(op, "Cast") == 0) {
        size_t n = infer_val_numel(o);
        for (size_t i = 0; i < n; i++)
            if (!convert(o, i, x, i))
                return false;
        return true;
    }
    if (strcmp(op, "Not") == 0 || strcmp(op, "Neg") == 0) {
        size_t n = infer_val_numel(o);
        bool neg = op[0] == 'N' && op[1] == 'e';
        for (size_t i = 0; i < n; i++) {
            double f = infer_val_f64(x, i);
            int64_t v = infer_val_int(x, i);
            if (!store(o, i, neg ? -v : !v, neg ? -f : (f == 0)))
                return false;
        }
        return true;
    }
    if (strcmp(op, "Gather") == 0)
        return eval_gather(nd, o);
    if (strcmp(op, "Concat") == 0)
        return eval_concat(nd, o);
    if (strcmp(op, "Slice") == 0)
        return eval_slice(nd, o);
    if (strcmp(op, "Transpose") == 0)
        return eval_transpose(nd, o);
    static const char *const bin[] = {"Add", "Sub", "Mul", "Div", "Max", "Min", "Equal",
                                      "GreaterOrEqual"};
    for (size_t i = 0; i < sizeof(bin) / sizeof(bin[0]); i++)
        if (strcmp(op, bin[i]) == 0)
            return nd->nin >= 2 && eval_binary(nd, o);
    return false;
}

/*
 * infer_ops_shape.c - shape/dtype inference of the constant, shape and
 * data-movement ops: Const/Constant, ConstantOfShape, Shape, Size, Reshape,
 * Flatten, Gather, Concat, Slice, Squeeze, Unsqueeze, Transpose, Pad.
 * Where an op reads a shape-like input (Reshape target, Slice bounds, Pad
 * pads, Squeeze/Unsqueeze axes, ConstantOfShape shape) its value comes from
 * value propagation (infer_io.val); both the attribute form of old opsets
 * and the input form of new ones are accepted.
 */
#include "infer.h"

#include <string.h>

static kiln_status infer_const(infer_node *nd, kiln_error *err)
{
    kiln_tensor_value t;
    if (kiln_attrs_get_tensor(nd->attrs, "value", &t)) {
        if (t.rank > INFER_MAX_RANK)
            return infer_fail(nd, err, KILN_ERR_UNSUPPORTED, "rank %u > %d", t.rank,
                              INFER_MAX_RANK);
        nd->out[0].dtype = t.dtype;
        nd->out[0].s.rank = (int32_t)t.rank;
        for (uint32_t i = 0; i < t.rank; i++)
            nd->out[0].s.d[i] = t.dims[i];
        return KILN_OK;
    }
    const int64_t *iv;
    const double *fv;
    uint32_t n;
    if (kiln_attrs_has(nd->attrs, "value_float") || kiln_attrs_has(nd->attrs, "value_int")) {
        nd->out[0].dtype = kiln_attrs_has(nd->attrs, "value_int") ? KILN_DT_INT64 : KILN_DT_FLOAT32;
        nd->out[0].s.rank = 0;
    } else if (kiln_attrs_get_list_int(nd->attrs, "value_ints", &iv, &n) ||
               kiln_attrs_get_list_float(nd->attrs, "value_floats", &fv, &n)) {
        nd->out[0].dtype = kiln_attrs_has(nd->attrs, "value_ints") ? KILN_DT_INT64 : KILN_DT_FLOAT32;
        nd->out[0].s.rank = 1;
        nd->out[0].s.d[0] = n;
    }
    /* else: keep the descriptor as given (a Const without a value attr) */
    return KILN_OK;
}

static kiln_status infer_constant_of_shape(infer_node *nd, kiln_error *err)
{
    kiln_status st = infer_need_input(nd, 0, err);
    if (st)
        return st;
    kiln_tensor_value t;
    nd->out[0].dtype = kiln_attrs_get_tensor(nd->attrs, "value", &t) ? t.dtype : KILN_DT_FLOAT32;
    const infer_val *v = nd->in[0].val;
    if (v) {
        size_t n = infer_val_numel(v);
        if (n > INFER_MAX_RANK)
            return infer_fail(nd, err, KILN_ERR_UNSUPPORTED, "rank %zu > %d", n, INFER_MAX_RANK);
        nd->out[0].s.rank = (int32_t)n;
        for (size_t i = 0; i < n; i++) {
            nd->out[0].s.d[i] = infer_val_int(v, i);
            if (nd->out[0].s.d[i] < 0)
                return infer_fail(nd, err, KILN_ERR_INVALID, "negative dim %lld in shape",
                                  (long long)nd->out[0].s.d[i]);
        }
    } else {
        const infer_shape *s = &nd->in[0].s;
        infer_shape_ranked_unknown(&nd->out[0].s, s->rank == 1 ? (int32_t)s->d[0] : -1);
    }
    return KILN_OK;
}

static kiln_status infer_shape_op(infer_node *nd, kiln_error *err)
{
    kiln_status st = infer_need_input(nd, 0, err);
    if (st)
        return st;
    int32_t r = nd->in[0].s.rank;
    nd->out[0].dtype = KILN_DT_INT64;
    nd->out[0].s.rank = 1;
    if (r < 0) {
        nd->out[0].s.d[0] = -1;
        return KILN_OK;
    }
    int64_t start = infer_attr_int(nd, "start", 0), end = infer_attr_int(nd, "end", r);
    if (start < 0)
        start += r;
    if (end < 0)
        end += r;
    start = start < 0 ? 0 : start > r ? r : start;
    end = end < 0 ? 0 : end > r ? r : end;
    nd->out[0].s.d[0] = end > start ? end - start : 0;
    return KILN_OK;
}

static kiln_status infer_size(infer_node *nd, kiln_error *err)
{
    kiln_status st = infer_need_input(nd, 0, err);
    nd->out[0].dtype = KILN_DT_INT64;
    nd->out[0].s.rank = 0;
    return st;
}

static kiln_status infer_reshape(infer_node *nd, kiln_error *err)
{
    kiln_status st = infer_need_input(nd, 0, err);
    if (st)
        return st;
    const infer_shape *x = &nd->in[0].s;
    nd->out[0].dtype = nd->in[0].dtype;
    int64_t t[INFER_MAX_RANK];
    uint32_t n;
    if (!infer_ints(nd, "shape", 1, t, INFER_MAX_RANK, &n)) {
        const infer_shape *ts = nd->nin > 1 ? &nd->in[1].s : NULL;
        infer_shape_ranked_unknown(&nd->out[0].s, ts && ts->rank == 1 ? (int32_t)ts->d[0] : -1);
        return KILN_OK;
    }
    bool allowzero = infer_attr_int(nd, "allowzero", 0) != 0;
    infer_shape o;
    o.rank = (int32_t)n;
    int infer_at = -1;
    int64_t known = 1;
    for (uint32_t i = 0; i < n; i++) {
        int64_t d = t[i];
        if (d == 0 && !allowzero)
            d = x->rank > (int32_t)i ? x->d[i] : (x->rank < 0 ? -1 : -2);
        if (d == -2)
            return infer_fail(nd, err, KILN_ERR_INVALID, "target dim %u is 0 but input rank is %d",
                              i, (int)x->rank);
        if (t[i] == -1) {
            if (infer_at >= 0)
                return infer_fail(nd, err, KILN_ERR_INVALID, "more than one -1 in target shape");
            infer_at = (int)i;
        } else if (d < -1) {
            return infer_fail(nd, err, KILN_ERR_INVALID, "invalid target dim %lld", (long long)d);
        }
        o.d[i] = d;
        if (t[i] != -1 && d >= 0) {
            if (known >= 0 && !kiln_mul_i64(known, d, &known))
                return infer_fail(nd, err, KILN_ERR_LIMIT,
                                  "target shape has more elements than fit in 64 bits");
        } else if (t[i] != -1) {
            known = -1; /* copied unknown dim */
        }
    }
    int64_t total = infer_shape_numel(x);
    if (infer_at >= 0)
        o.d[infer_at] = (total >= 0 && known > 0) ? total / known : -1;
    int64_t onum = infer_shape_numel(&o);
    if (total >= 0 && ((infer_at >= 0 && known > 0 && total % known != 0) ||
                       (onum >= 0 && onum != total))) {
        char a[160], b[160];
        infer_shape ts = {(int32_t)n, {0}};
        memcpy(ts.d, t, n * sizeof(int64_t));
        return infer_fail(nd, err, KILN_ERR_INVALID,
                          "cannot reshape %s (%lld elements) to %s", infer_shape_str(x, a, sizeof(a)),
                          (long long)total, infer_shape_str(&ts, b, sizeof(b)));
    }
    nd->out[0].s = o;
    return KILN_OK;
}

static kiln_status infer_flatten(infer_node *nd, kiln_error *err)
{
    kiln_status st = infer_need_input(nd, 0, err);
    if (st)
        return st;
    const infer_shape *x = &nd->in[0].s;
    nd->out[0].dtype = nd->in[0].dtype;
    nd->out[0].s.rank = 2;
    if (x->rank < 0) {
        nd->out[0].s.d[0] = nd->out[0].s.d[1] = -1;
        return KILN_OK;
    }
    int64_t axis = infer_attr_int(nd, "axis", 1);
    if (axis < 0)
        axis += x->rank;
    if (axis < 0 || axis > x->rank)
        return infer_fail(nd, err, KILN_ERR_INVALID, "axis out of range for rank %d", (int)x->rank);
    int64_t a = 1, b = 1;
    for (int32_t i = 0; i < x->rank; i++) {
        int64_t *p = i < axis ? &a : &b;
        *p = (*p < 0 || x->d[i] < 0) ? -1 : *p * x->d[i];
    }
    nd->out[0].s.d[0] = a;
    nd->out[0].s.d[1] = b;
    return KILN_OK;
}

static kiln_status infer_gather(infer_node *nd, kiln_error *err)
{
    kiln_status st = infer_need_input(nd, 0, err);
    if (st || (st = infer_need_input(nd, 1, err)))
        return st;
    const infer_shape *x = &nd->in[0].s, *ix = &nd->in[1].s;
    nd->out[0].dtype = nd->in[0].dtype;
    if (x->rank < 0 || ix->rank < 0) {
        infer_shape_unknown(&nd->out[0].s);
        return KILN_OK;
    }
    int64_t axis;
    if (!infer_axis(infer_attr_int(nd, "axis", 0), x->rank, &axis))
        return infer_fail(nd, err, KILN_ERR_INVALID, "axis out of range for rank %d", (int)x->rank);
    if (x->rank - 1 + ix->rank > INFER_MAX_RANK)
        return infer_fail(nd, err, KILN_ERR_UNSUPPORTED, "output rank > %d", INFER_MAX_RANK);
    infer_shape o;
    o.rank = 0;
    for (int32_t i = 0; i < x->rank; i++) {
        if (i == axis)
            for (int32_t j = 0; j < ix->rank; j++)
                o.d[o.rank++] = ix->d[j];
        else
            o.d[o.rank++] = x->d[i];
    }
    nd->out[0].s = o;
    return KILN_OK;
}

static kiln_status infer_concat(infer_node *nd, kiln_error *err)
{
    kiln_status st = infer_need_input(nd, 0, err);
    if (st)
        return st;
    nd->out[0].dtype = nd->in[0].dtype;
    int32_t rank = -1;
    for (uint32_t i = 0; i < nd->nin; i++)
        if (nd->in[i].present && nd->in[i].s.rank >= 0)
            rank = nd->in[i].s.rank;
    if (rank < 0) {
        infer_shape_unknown(&nd->out[0].s);
        return KILN_OK;
    }
    int64_t axis;
    if (!infer_axis(infer_attr_int(nd, "axis", 0), rank, &axis))
        return infer_fail(nd, err, KILN_ERR_INVALID, "axis out of range for rank %d", (int)rank);
    infer_shape o;
    infer_shape_ranked_unknown(&o, rank);
    o.d[axis] = 0;
    for (uint32_t i = 0; i < nd->nin; i++) {
        const infer_shape *s = &nd->in[i].s;
        if (!nd->in[i].present)
            continue;
        if (s->rank < 0) {
            o.d[axis] = -1;
            continue;
        }
        if (s->rank != rank) {
            char a[160], b[160];
            return infer_fail(nd, err, KILN_ERR_INVALID, "inputs of different ranks: %s and %s",
                              infer_shape_str(&nd->in[0].s, a, sizeof(a)),
                              infer_shape_str(s, b, sizeof(b)));
        }
        for (int32_t d = 0; d < rank; d++) {
            if (d == axis) {
                o.d[d] = (o.d[d] < 0 || s->d[d] < 0) ? -1 : o.d[d] + s->d[d];
            } else if (s->d[d] >= 0) {
                if (o.d[d] >= 0 && o.d[d] != s->d[d]) {
                    char a[160], b[160];
                    return infer_fail(nd, err, KILN_ERR_INVALID,
                                      "dim %d differs between inputs: %s and %s", (int)d,
                                      infer_shape_str(&nd->in[0].s, a, sizeof(a)),
                                      infer_shape_str(s, b, sizeof(b)));
                }
                o.d[d] = s->d[d];
            }
        }
    }
    nd->out[0].s = o;
    return KILN_OK;
}

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

static kiln_status infer_slice(infer_node *nd, kiln_error *err)
{
    kiln_status st = infer_need_input(nd, 0, err);
    if (st)
        return st;
    const infer_shape *x = &nd->in[0].s;
    nd->out[0].dtype = nd->in[0].dtype;
    int64_t starts[INFER_MAX_RANK], ends[INFER_MAX_RANK], axes[INFER_MAX_RANK],
        steps[INFER_MAX_RANK];
    uint32_t ns, ne, na, nst;
    if (x->rank < 0 || !infer_ints(nd, "starts", 1, starts, INFER_MAX_RANK, &ns) ||
        !infer_ints(nd, "ends", 2, ends, INFER_MAX_RANK, &ne)) {
        infer_shape_ranked_unknown(&nd->out[0].s, x->rank);
        return KILN_OK;
    }
    bool has_axes = infer_ints(nd, "axes", 3, axes, INFER_MAX_RANK, &na);
    bool has_steps = infer_ints(nd, "steps", 4, steps, INFER_MAX_RANK, &nst);
    bool axes_wired = nd->nin > 3 && nd->in[3].present, steps_wired = nd->nin > 4 && nd->in[4].present;
    if ((axes_wired && !has_axes) || (steps_wired && !has_steps)) {
        infer_shape_ranked_unknown(&nd->out[0].s, x->rank);
        return KILN_OK;
    }
    if (ns != ne || (has_axes && na != ns) || (has_steps && nst != ns))
        return infer_fail(nd, err, KILN_ERR_INVALID, "starts/ends/axes/steps lengths differ");
    infer_shape o = *x;
    for (uint32_t i = 0; i < ns; i++) {
        int64_t a = has_axes ? axes[i] : (int64_t)i, step = has_steps ? steps[i] : 1;
        if (!infer_axis(a, x->rank, &a))
            return infer_fail(nd, err, KILN_ERR_INVALID, "axis %lld out of range for rank %d",
                              (long long)(has_axes ? axes[i] : (int64_t)i), (int)x->rank);
        if (step == 0)
            return infer_fail(nd, err, KILN_ERR_INVALID, "step 0");
        int64_t dim = x->d[a];
        if (dim < 0) {
            o.d[a] = -1;
            continue;
        }
        int64_t s = starts[i], e = ends[i];
        if (s < 0)
            s += dim;
        if (e < 0)
            e += dim;
        if (step > 0) {
            s = clamp64(s, 0, dim);
            e = clamp64(e, 0, dim);
            o.d[a] = e > s ? (e - s + step - 1) / step : 0;
        } else {
            s = clamp64(s, 0, dim - 1);
            e = clamp64(e, -1, dim - 1);
            o.d[a] = s > e ? (s - e + (-step) - 1) / (-step) : 0;
        }
    }
    nd->out[0].s = o;
    return KILN_OK;
}

static kiln_status infer_squeeze(infer_node *nd, kiln_error *err)
{
    kiln_status st = infer_need_input(nd, 0, err);
    if (st)
        return st;
    const infer_shape *x = &nd->in[0].s;
    nd->out[0].dtype = nd->in[0].dtype;
    int64_t axes[INFER_MAX_RANK];
    uint32_t na = 0;
    bool has = infer_ints(nd, "axes", 1, axes, INFER_MAX_RANK, &na);
    if (x->rank < 0 || (!has && nd->nin > 1 && nd->in[1].present)) {
        infer_shape_unknown(&nd->out[0].s);
        return KILN_OK;
    }
    bool drop[INFER_MAX_RANK] = {false};
    for (uint32_t i = 0; i < na; i++) {
        int64_t a;
        if (!infer_axis(axes[i], x->rank, &a))
            return infer_fail(nd, err, KILN_ERR_INVALID, "axis %lld out of range for rank %d",
                              (long long)axes[i], (int)x->rank);
        if (x->d[a] > 1) {
            char b[160];
            return infer_fail(nd, err, KILN_ERR_INVALID, "cannot squeeze dim %lld of %s",
                              (long long)a, infer_shape_str(x, b, sizeof(b)));
        }
        drop[a] = true;
    }
    if (na == 0) {
        for (int32_t i = 0; i < x->rank; i++) {
            if (x->d[i] < 0) {
                infer_shape_unknown(&nd->out[0].s);
                return KILN_OK;
            }
            drop[i] = x->d[i] == 1;
        }
    }
    infer_shape o;
    o.rank = 0;
    for (int32_t i = 0; i < x->rank; i++)
        if (!drop[i])
            o.d[o.rank++] = x->d[i];
    nd->out[0].s = o;
    return KILN_OK;
}

static kiln_status infer_unsqueeze(infer_node *nd, kiln_error *err)
{
    kiln_status st = infer_need_input(nd, 0, err);
    if (st)
        return st;
    const infer_shape *x = &nd->in[0].s;
    nd->out[0].dtype = nd->in[0].dtype;
    int64_t axes[INFER_MAX_RANK];
    uint32_t na = 0;
    if (!infer_ints(nd, "axes", 1, axes, INFER_MAX_RANK, &na) || x->rank < 0) {
        infer_shape_unknown(&nd->out[0].s);
        return KILN_OK;
    }
    int32_t r = x->rank + (int32_t)na;
    if (r > INFER_MAX_RANK)
        return infer_fail(nd, err, KILN_ERR_UNSUPPORTED, "output rank > %d", INFER_MAX_RANK);
    bool ins[INFER_MAX_RANK] = {false};
    for (uint32_t i = 0; i < na; i++) {
        int64_t a;
        if (!infer_axis(axes[i], r, &a) || ins[a])
            return infer_fail(nd, err, KILN_ERR_INVALID, "bad axis %lld for output rank %d",
                              (long long)axes[i], (int)r);
        ins[a] = true;
    }
    infer_shape o;
    o.rank = r;
    for (int32_t i = 0, j = 0; i < r; i++)
        o.d[i] = ins[i] ? 1 : x->d[j++];
    nd->out[0].s = o;
    return KILN_OK;
}

static kiln_status infer_transpose(infer_node *nd, kiln_error *err)
{
    kiln_status st = infer_need_input(nd, 0, err);
    if (st)
        return st;
    const infer_shape *x = &nd->in[0].s;
    nd->out[0].dtype = nd->in[0].dtype;
    if (x->rank < 0) {
        infer_shape_unknown(&nd->out[0].s);
        return KILN_OK;
    }
    int64_t perm[INFER_MAX_RANK];
    uint32_t n;
    if (!infer_ints(nd, "perm", UINT32_MAX, perm, INFER_MAX_RANK, &n)) {
        n = (uint32_t)x->rank;
        for (uint32_t i = 0; i < n; i++)
            perm[i] = x->rank - 1 - (int64_t)i;
    }
    if (n != (uint32_t)x->rank)
        return infer_fail(nd, err, KILN_ERR_INVALID, "perm has %u entries for rank %d", n,
                          (int)x->rank);
    infer_shape o;
    o.rank = x->rank;
    for (uint32_t i = 0; i < n; i++) {
        if (perm[i] < 0 || perm[i] >= x->rank)
            return infer_fail(nd, err, KILN_ERR_INVALID, "perm entry %lld out of range",
                              (long long)perm[i]);
        o.d[i] = x->d[perm[i]];
    }
    nd->out[0].s = o;
    return KILN_OK;
}

/*
 * GE's TransData between NCHW and NHWC (attributes src_format, dst_format;
 * the aicore engine inserts it around its channels-last regions): a rank-4
 * transpose.
 */
static kiln_status infer_transdata(infer_node *nd, kiln_error *err)
{
    kiln_status st = infer_need_input(nd, 0, err);
    if (st)
        return st;
    const infer_shape *x = &nd->in[0].s;
    nd->out[0].dtype = nd->in[0].dtype;
    const char *src = "", *dst = "";
    kiln_attrs_get_string(nd->attrs, "src_format", &src);
    kiln_attrs_get_string(nd->attrs, "dst_format", &dst);
    static const int to_nhwc[4] = {0, 2, 3, 1}, to_nchw[4] = {0, 3, 1, 2};
    const int *perm;
    if (strcmp(src, "NCHW") == 0 && strcmp(dst, "NHWC") == 0)
        perm = to_nhwc;
    else if (strcmp(src, "NHWC") == 0 && strcmp(dst, "NCHW") == 0)
        perm = to_nchw;
    else
        return infer_fail(nd, err, KILN_ERR_UNSUPPORTED,
                          "TransData from '%s' to '%s': only NCHW <-> NHWC is supported", src, dst);
    if (x->rank < 0) {
        infer_shape_ranked_unknown(&nd->out[0].s, 4);
        return KILN_OK;
    }
    if (x->rank != 4)
        return infer_fail(nd, err, KILN_ERR_INVALID, "TransData needs a rank-4 input, not %d",
                          (int)x->rank);
    infer_shape o;
    o.rank = 4;
    for (int i = 0; i < 4; i++)
        o.d[i] = x->d[perm[i]];
    nd->out[0].s = o;
    return KILN_OK;
}

static kiln_status infer_pad(infer_node *nd, kiln_error *err)
{
    kiln_status st = infer_need_input(nd, 0, err);
    if (st)
        return st;
    const infer_shape *x = &nd->in[0].s;
    nd->out[0].dtype = nd->in[0].dtype;
    int64_t pads[2 * INFER_MAX_RANK], axes[INFER_MAX_RANK];
    uint32_t np, na = 0;
    if (x->rank < 0 || !infer_ints(nd, "pads", 1, pads, 2 * INFER_MAX_RANK, &np)) {
        infer_shape_ranked_unknown(&nd->out[0].s, x->rank);
        return KILN_OK;
    }
    bool has_axes = nd->nin > 3 && nd->in[3].present;
    if (has_axes && !infer_ints(nd, NULL, 3, axes, INFER_MAX_RANK, &na)) {
        infer_shape_ranked_unknown(&nd->out[0].s, x->rank);
        return KILN_OK;
    }
    if (!has_axes) {
        na = (uint32_t)x->rank;
        for (uint32_t i = 0; i < na; i++)
            axes[i] = (int64_t)i;
    }
    if (np != 2 * na) {
        char b[160];
        return infer_fail(nd, err, KILN_ERR_INVALID, "%u pads for %s", np,
                          infer_shape_str(x, b, sizeof(b)));
    }
    infer_shape o = *x;
    for (uint32_t i = 0; i < na; i++) {
        int64_t a;
        if (!infer_axis(axes[i], x->rank, &a))
            return infer_fail(nd, err, KILN_ERR_INVALID, "axis out of range");
        if (o.d[a] >= 0)
            o.d[a] += pads[i] + pads[i + na];
    }
    nd->out[0].s = o;
    return KILN_OK;
}

const infer_op infer_ops_shape[] = {
    {"Const", infer_const},        {"Constant", infer_const},
    {"ConstantOfShape", infer_constant_of_shape},
    {"Shape", infer_shape_op},     {"Size", infer_size},
    {"Reshape", infer_reshape},    {"Flatten", infer_flatten},
    {"Gather", infer_gather},      {"Concat", infer_concat},
    {"Slice", infer_slice},        {"Squeeze", infer_squeeze},
    {"Unsqueeze", infer_unsqueeze}, {"Transpose", infer_transpose},
    {"Pad", infer_pad},
    {"TransData", infer_transdata},
};
const uint32_t infer_ops_shape_count = sizeof(infer_ops_shape) / sizeof(infer_ops_shape[0]);

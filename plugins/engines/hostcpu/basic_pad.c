/*
 * basic_pad.c - Pad: modes constant (default), reflect and edge; pads as the
 * `pads` attribute (opset < 11, with the float `value` attribute) or input 1
 * (opset >= 11, with the optional scalar constant_value input 2 and the
 * opset-18 axes input 3).  pads = [x1_begin, x2_begin, ..., x1_end, ...];
 * negative pads crop.  Any dtype (elements are moved as bytes).
 *
 * Each output row (last dim) copies its in-range middle with one memcpy and
 * fills only the padded ends element by element.
 */
#include "basic_ops.h"

#include <string.h>

enum pad_mode { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE };

typedef struct pad_state {
    enum pad_mode mode;
    double value;   /* opset < 11 attribute */
    uint32_t npads; /* opset < 11 attribute */
    int64_t pads[2 * CPU_MAX_RANK];
} pad_state;

CPU_PREPARE(cpu_pad_prepare)
{
    const char *mode = cpu_attr_str(g, n, "mode", "constant");
    enum pad_mode m;
    if (strcmp(mode, "constant") == 0)
        m = PAD_CONSTANT;
    else if (strcmp(mode, "reflect") == 0)
        m = PAD_REFLECT;
    else if (strcmp(mode, "edge") == 0)
        m = PAD_EDGE;
    else
        return cpu_fail_node(g, n, err, KILN_ERR_UNSUPPORTED, "mode '%s' not supported", mode);
    kiln_status st = cpu_state_new(g, n, sizeof(pad_state), state, err);
    if (st != KILN_OK)
        return st;
    pad_state *s = *state;
    s->mode = m;
    s->value = cpu_attr_float(g, n, "value", 0.0);
    const int64_t *v;
    uint32_t cnt;
    if (cpu_attr_ints(g, n, "pads", &v, &cnt)) {
        if (cnt > 2 * CPU_MAX_RANK)
            return cpu_fail_node(g, n, err, KILN_ERR_UNSUPPORTED, "%u pads", cnt);
        memcpy(s->pads, v, cnt * sizeof(int64_t));
        s->npads = cnt;
    }
    return KILN_OK;
}

/* Source index of padded coordinate @p c (= out index - begin pad), -1 = value. */
static int64_t pad_map(int64_t c, int64_t len, enum pad_mode mode)
{
    if (c >= 0 && c < len)
        return c;
    if (mode == PAD_CONSTANT || len == 0)
        return -1;
    if (mode == PAD_EDGE || len == 1)
        return c < 0 ? 0 : len - 1;
    int64_t period = 2 * (len - 1);
    c %= period;
    if (c < 0)
        c += period;
    return c >= len ? period - c : c;
}

/* The constant as one element of @p dt, from a double. */
static void scalar_bytes(kiln_dtype dt, double v, unsigned char *out)
{
    switch (dt) {
#define CASE(DT, T)                                                                        \
    case KILN_DT_##DT: {                                                                   \
        T t = (T)v;                                                                        \
        memcpy(out, &t, sizeof(t));                                                        \
        break;                                                                             \
    }
        CPU_FLOAT_TYPES(CASE)
        CPU_INT_TYPES(CASE)
#undef CASE
    case KILN_DT_BOOL: out[0] = v != 0; break;
    default: memset(out, 0, 8); break;
    }
}

/* Begin/end pads per dim from input 1 (+ axes input 3) or the attribute. */
static kiln_status get_pads(const kiln_kernel_args *a, const pad_state *s, uint32_t r,
                            int64_t *pb, int64_t *pe, kiln_error *err)
{
    int64_t p[2 * CPU_MAX_RANK], ax[CPU_MAX_RANK];
    uint32_t np = 0, na = r;
    if (cpu_has_input(a, 1)) {
        if (!cpu_read_ints(&a->inputs[1], p, 2 * CPU_MAX_RANK, &np))
            return cpu_fail(a, err, KILN_ERR_INVALID, "pads must be a 1-D int64 tensor");
    } else {
        np = s->npads;
        memcpy(p, s->pads, np * sizeof(int64_t));
    }
    if (cpu_has_input(a, 3)) {
        if (!cpu_read_ints(&a->inputs[3], ax, CPU_MAX_RANK, &na))
            return cpu_fail(a, err, KILN_ERR_INVALID, "axes must be a 1-D int64 tensor");
    } else {
        for (uint32_t d = 0; d < r; d++)
            ax[d] = d;
    }
    if (np != 2 * na)
        return cpu_fail(a, err, KILN_ERR_INVALID, "%u pads for %u axes", np, na);
    for (uint32_t d = 0; d < r; d++)
        pb[d] = pe[d] = 0;
    for (uint32_t i = 0; i < na; i++) {
        uint32_t d;
        if (!cpu_axis(ax[i], r, &d))
            return cpu_fail(a, err, KILN_ERR_INVALID, "axis %lld out of range",
                            (long long)ax[i]);
        pb[d] = p[i];
        pe[d] = p[na + i];
    }
    return KILN_OK;
}

CPU_KERNEL(cpu_pad)
{
    const pad_state *s = state;
    if (!s || a->input_count < 1 || a->output_count < 1)
        return cpu_fail(a, err, KILN_ERR_INVALID, "input 0 or output 0 missing");
    const kiln_tensor *x = &a->inputs[0];
    kiln_tensor *y = &a->outputs[0];
    uint32_t r = x->rank;
    if (r > CPU_MAX_RANK || r == 0)
        return cpu_fail(a, err, KILN_ERR_UNSUPPORTED, "rank %u", r);
    int64_t pb[CPU_MAX_RANK], pe[CPU_MAX_RANK], od[CPU_MAX_RANK], istr[CPU_MAX_RANK];
    kiln_status st = get_pads(a, s, r, pb, pe, err);
    if (st != KILN_OK)
        return st;
    int64_t total = 1, str = 1;
    for (int32_t d = (int32_t)r - 1; d >= 0; d--) {
        od[d] = x->dims[d] + pb[d] + pe[d];
        if (od[d] < 0)
            return cpu_fail(a, err, KILN_ERR_INVALID, "pads crop dim %d below 0", d);
        if (s->mode == PAD_REFLECT && (pb[d] >= x->dims[d] || pe[d] >= x->dims[d]) &&
            (pb[d] > 0 || pe[d] > 0))
            return cpu_fail(a, err, KILN_ERR_INVALID, "reflect pads of dim %d exceed its "
                                                      "size - 1", d);
        total *= od[d];
        istr[d] = str;
        str *= x->dims[d];
    }
    if (s->mode != PAD_CONSTANT && str == 0 && total > 0)
        return cpu_fail(a, err, KILN_ERR_INVALID, "cannot %s-pad an empty tensor",
                        s->mode == PAD_EDGE ? "edge" : "reflect");
    size_t es = kiln_dtype_size(x->dtype);
    if (y->dtype != x->dtype)
        return cpu_fail(a, err, KILN_ERR_INVALID, "output dtype differs from input");
    if ((st = cpu_check_out_dims(a, 0, r, od, err)) != KILN_OK ||
        (st = cpu_check_out_bytes(a, 0, (size_t)total * es, err)) != KILN_OK || total == 0)
        return st;
    unsigned char val[16] = {0};
    if (cpu_has_input(a, 2) && cpu_numel(&a->inputs[2]) >= 1) {
        if (a->inputs[2].dtype != x->dtype || es > sizeof(val))
            return cpu_fail(a, err, KILN_ERR_INVALID, "constant_value dtype differs");
        memcpy(val, a->inputs[2].data, es);
    } else {
        scalar_bytes(x->dtype, s->value, val);
    }
    const char *in = x->data;
    char *out = y->data;
    const uint32_t L = r - 1;
    const int64_t cols = od[L], len = x->dims[L], b = pb[L];
    /* Output columns [i0, i1) come straight from source columns [i0-b, i1-b). */
    int64_t i0 = b > 0 ? b : 0, i1 = b + len < cols ? b + len : cols;
    if (i0 > cols)
        i0 = cols;
    if (i1 < i0)
        i1 = i0;
    int64_t rows = total / (cols ? cols : 1), idx[CPU_MAX_RANK] = {0};
    for (int64_t row = 0; row < rows; row++, out += (size_t)cols * es) {
        int64_t off = 0;
        bool constant_row = false;
        for (uint32_t d = 0; d < L; d++) {
            int64_t c = pad_map(idx[d] - pb[d], x->dims[d], s->mode);
            if (c < 0) {
                constant_row = true;
                break;
            }
            off += c * istr[d];
        }
        if (constant_row) {
            for (int64_t i = 0; i < cols; i++)
                memcpy(out + (size_t)i * es, val, es);
        } else {
            const char *src = in + (size_t)off * es;
            if (i1 > i0)
                memcpy(out + (size_t)i0 * es, src + (size_t)(i0 - b) * es, (size_t)(i1 - i0) * es);
            for (int64_t i = 0; i < cols; i++) { /* only the padded ends */
                if (i == i0)
                    i = i1;
                if (i >= cols)
                    break;
                int64_t c = pad_map(i - b, len, s->mode);
                memcpy(out + (size_t)i * es, c < 0 ? (const char *)val : src + (size_t)c * es, es);
            }
        }
        for (int32_t d = (int32_t)L - 1; d >= 0; d--) {
            if (++idx[d] < od[d])
                break;
            idx[d] = 0;
        }
    }
    return KILN_OK;
}

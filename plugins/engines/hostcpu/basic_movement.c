/*
 * basic_movement.c - data-movement kernels, dtype-agnostic (they move
 * elements of kiln_dtype_size bytes): Transpose (perm, default reversed),
 * Concat (axis, negative allowed), Gather (axis; int64/int32 indices, negative
 * indices count from the end; out of range is an error) and Slice (opset < 10:
 * starts/ends/axes attributes; >= 10: inputs starts, ends, axes, steps;
 * negative and out-of-range indices clamped as ONNX defines, negative steps).
 *
 * Each kernel copies the largest contiguous block it can with memcpy: the
 * dims a Transpose keeps in order are merged, Slice copies the trailing
 * unsliced dims as one block, Concat and Gather copy whole inner blocks.
 */
#include "basic_ops.h"

#include <string.h>

#define MAX_SLICE 16

/* Copy one element of @p es bytes. */
static inline void copy_elem(char *dst, const char *src, size_t es)
{
    switch (es) {
    case 1: *dst = *src; break;
    case 2: memcpy(dst, src, 2); break;
    case 4: memcpy(dst, src, 4); break;
    case 8: memcpy(dst, src, 8); break;
    default: memcpy(dst, src, es); break;
    }
}

/* ---- Transpose ----------------------------------------------------------- */

typedef struct perm_state {
    uint32_t n; /* 0 = reverse */
    int64_t perm[CPU_MAX_RANK];
} perm_state;

CPU_PREPARE(cpu_transpose_prepare)
{
    kiln_status st = cpu_state_new(g, n, sizeof(perm_state), state, err);
    if (st != KILN_OK)
        return st;
    perm_state *s = *state;
    const int64_t *v;
    uint32_t cnt;
    if (cpu_attr_ints(g, n, "perm", &v, &cnt)) {
        if (cnt > CPU_MAX_RANK)
            return cpu_fail_node(g, n, err, KILN_ERR_UNSUPPORTED, "perm of rank %u", cnt);
        memcpy(s->perm, v, cnt * sizeof(int64_t));
        s->n = cnt;
    }
    return KILN_OK;
}

CPU_KERNEL(cpu_transpose)
{
    const perm_state *s = state;
    if (!cpu_has_input(a, 0) && !(a->input_count && a->inputs[0].nbytes == 0))
        return cpu_fail(a, err, KILN_ERR_INVALID, "input 0 missing");
    const kiln_tensor *x = &a->inputs[0];
    uint32_t r = x->rank;
    if (r > CPU_MAX_RANK)
        return cpu_fail(a, err, KILN_ERR_UNSUPPORTED, "rank %u", r);
    int64_t perm[CPU_MAX_RANK], odims[CPU_MAX_RANK], istr[CPU_MAX_RANK];
    bool seen[CPU_MAX_RANK] = {false};
    if (s && s->n && s->n != r)
        return cpu_fail(a, err, KILN_ERR_INVALID, "perm has %u entries, input rank %u", s->n, r);
    for (uint32_t d = 0; d < r; d++) {
        perm[d] = s && s->n ? s->perm[d] : (int64_t)(r - 1 - d);
        if (perm[d] < 0 || perm[d] >= (int64_t)r || seen[perm[d]])
            return cpu_fail(a, err, KILN_ERR_INVALID, "perm is not a permutation");
        seen[perm[d]] = true;
    }
    int64_t stride = 1;
    for (int32_t d = (int32_t)r - 1; d >= 0; d--) {
        istr[d] = stride;
        stride *= x->dims[d];
    }
    for (uint32_t d = 0; d < r; d++)
        odims[d] = x->dims[perm[d]];
    kiln_status st = cpu_check_out_dims(a, 0, r, odims, err);
    size_t es = kiln_dtype_size(x->dtype);
    if (st == KILN_OK)
        st = cpu_check_out_bytes(a, 0, (size_t)cpu_numel(x) * es, err);
    if (st != KILN_OK || cpu_numel(x) == 0)
        return st;
    /* Collapse: drop size-1 dims, merge neighbours contiguous in the input. */
    int64_t cd[CPU_MAX_RANK], cs[CPU_MAX_RANK];
    uint32_t cr = 0;
    for (uint32_t d = 0; d < r; d++) {
        if (odims[d] == 1)
            continue;
        int64_t sd = istr[perm[d]];
        if (cr && cs[cr - 1] == sd * odims[d]) {
            cd[cr - 1] *= odims[d];
            cs[cr - 1] = sd;
        } else {
            cd[cr] = odims[d];
            cs[cr++] = sd;
        }
    }
    if (cr == 0) {
        cd[0] = 1;
        cs[0] = 1;
        cr = 1;
    }
    const char *in = x->data;
    char *out = a->outputs[0].data;
    int64_t cols = cd[cr - 1], cstr = cs[cr - 1], rows = 1, idx[CPU_MAX_RANK] = {0}, off = 0;
    for (uint32_t d = 0; d + 1 < cr; d++)
        rows *= cd[d];
    for (int64_t row = 0; row < rows; row++) {
        if (cstr == 1) {
            memcpy(out, in + (size_t)off * es, (size_t)cols * es);
            out += (size_t)cols * es;
        } else {
            const char *p = in + (size_t)off * es;
            for (int64_t i = 0; i < cols; i++, out += es)
                copy_elem(out, p + (size_t)(i * cstr) * es, es);
        }
        for (int32_t d = (int32_t)cr - 2; d >= 0; d--) {
            off += cs[d];
            if (++idx[d] < cd[d])
                break;
            off -= cs[d] * cd[d];
            idx[d] = 0;
        }
    }
    return KILN_OK;
}

/* ---- Concat -------------------------------------------------------------- */

CPU_PREPARE(cpu_concat_prepare)
{
    const kiln_attrs *at = kiln_node_attrs(g, n);
    if (!kiln_attrs_has(at, "axis"))
        return cpu_fail_node(g, n, err, KILN_ERR_INVALID, "attribute axis missing");
    kiln_status st = cpu_state_new(g, n, sizeof(int64_t), state, err);
    if (st == KILN_OK)
        *(int64_t *)*state = cpu_attr_int(g, n, "axis", 0);
    return st;
}

CPU_KERNEL(cpu_concat)
{
    if (!state || a->input_count < 1 || a->output_count < 1)
        return cpu_fail(a, err, KILN_ERR_INVALID, "needs inputs and an output");
    kiln_tensor *y = &a->outputs[0];
    uint32_t r = y->rank, axis;
    if (!cpu_axis(*(const int64_t *)state, r, &axis))
        return cpu_fail(a, err, KILN_ERR_INVALID, "axis %lld out of range for rank %u",
                        (long long)*(const int64_t *)state, r);
    size_t es = kiln_dtype_size(y->dtype);
    int64_t outer = 1, inner = 1, sum = 0;
    for (uint32_t d = 0; d < axis; d++)
        outer *= y->dims[d];
    for (uint32_t d = axis + 1; d < r; d++)
        inner *= y->dims[d];
    for (uint32_t k = 0; k < a->input_count; k++) {
        const kiln_tensor *t = &a->inputs[k];
        bool ok = t->dtype == y->dtype && t->rank == r && (t->data || cpu_numel(t) == 0);
        for (uint32_t d = 0; ok && d < r; d++)
            ok = d == axis || t->dims[d] == y->dims[d];
        if (!ok)
            return cpu_fail(a, err, KILN_ERR_INVALID,
                            "input %u does not match the output's dtype, rank or dims", k);
        sum += t->dims[axis];
    }
    if (sum != y->dims[axis])
        return cpu_fail(a, err, KILN_ERR_INVALID, "inputs give %lld along axis %u, output %lld",
                        (long long)sum, axis, (long long)y->dims[axis]);
    kiln_status st = cpu_check_out_bytes(a, 0, (size_t)cpu_numel(y) * es, err);
    if (st != KILN_OK)
        return st;
    char *out = y->data;
    for (int64_t o = 0; o < outer; o++) {
        for (uint32_t k = 0; k < a->input_count; k++) {
            size_t blk = (size_t)(a->inputs[k].dims[axis] * inner) * es;
            if (!blk)
                continue;
            memcpy(out, (const char *)a->inputs[k].data + (size_t)o * blk, blk);
            out += blk;
        }
    }
    return KILN_OK;
}

/* ---- Gather -------------------------------------------------------------- */

CPU_PREPARE(cpu_gather_prepare)
{
    kiln_status st = cpu_state_new(g, n, sizeof(int64_t), state, err);
    if (st == KILN_OK)
        *(int64_t *)*state = cpu_attr_int(g, n, "axis", 0);
    return st;
}

CPU_KERNEL(cpu_gather)
{
    if (a->input_count < 2 || a->output_count < 1)
        return cpu_fail(a, err, KILN_ERR_INVALID, "needs data, indices and an output");
    const kiln_tensor *x = &a->inputs[0], *ix = &a->inputs[1];
    uint32_t axis;
    int64_t ax = state ? *(const int64_t *)state : 0;
    if (!cpu_axis(ax, x->rank, &axis))
        return cpu_fail(a, err, KILN_ERR_INVALID, "axis %lld out of range for rank %u",
                        (long long)ax, x->rank);
    if (ix->dtype != KILN_DT_INT64 && ix->dtype != KILN_DT_INT32)
        return cpu_fail(a, err, KILN_ERR_INVALID, "indices must be int64 or int32");
    uint32_t r = x->rank - 1 + ix->rank;
    if (r > CPU_MAX_RANK)
        return cpu_fail(a, err, KILN_ERR_UNSUPPORTED, "output rank %u", r);
    int64_t dims[CPU_MAX_RANK], outer = 1, inner = 1, nidx = cpu_numel(ix);
    int64_t len = x->dims[axis];
    uint32_t k = 0;
    for (uint32_t d = 0; d < axis; d++)
        outer *= dims[k++] = x->dims[d];
    for (uint32_t d = 0; d < ix->rank; d++)
        dims[k++] = ix->dims[d];
    for (uint32_t d = axis + 1; d < x->rank; d++)
        inner *= dims[k++] = x->dims[d];
    kiln_status st = cpu_check_out_dims(a, 0, r, dims, err);
    size_t es = kiln_dtype_size(x->dtype), blk = (size_t)inner * es;
    if (st == KILN_OK)
        st = cpu_check_out_bytes(a, 0, (size_t)(outer * nidx) * blk, err);
    if (st != KILN_OK)
        return st;
    char *out = a->outputs[0].data;
    const char *in = x->data;
    for (int64_t j = 0; j < nidx; j++) { /* validate once */
        int64_t v = ix->dtype == KILN_DT_INT64 ? ((const int64_t *)ix->data)[j]
                                               : ((const int32_t *)ix->data)[j];
        if (v < -len || v >= len)
            return cpu_fail(a, err, KILN_ERR_INVALID, "index %lld out of range [-%lld, %lld)",
                            (long long)v, (long long)len, (long long)len);
    }
    for (int64_t o = 0; o < outer; o++) {
        const char *base = in + (size_t)(o * len) * blk;
        for (int64_t j = 0; j < nidx; j++, out += blk) {
            int64_t v = ix->dtype == KILN_DT_INT64 ? ((const int64_t *)ix->data)[j]
                                                   : ((const int32_t *)ix->data)[j];
            if (v < 0)
                v += len;
            if (blk == es)
                copy_elem(out, base + (size_t)v * es, es);
            else
                memcpy(out, base + (size_t)v * blk, blk);
        }
    }
    return KILN_OK;
}

/* ---- Slice --------------------------------------------------------------- */

typedef struct slice_attrs {
    uint32_t n, naxes; /* opset < 10 */
    int64_t starts[MAX_SLICE], ends[MAX_SLICE], axes[MAX_SLICE];
} slice_attrs;

CPU_PREPARE(cpu_slice_prepare)
{
    kiln_status st = cpu_state_new(g, n, sizeof(slice_attrs), state, err);
    if (st != KILN_OK)
        return st;
    slice_attrs *s = *state;
    const int64_t *b, *e, *ax;
    uint32_t nb, ne, na;
    if (!cpu_attr_ints(g, n, "starts", &b, &nb))
        return KILN_OK;
    if (!cpu_attr_ints(g, n, "ends", &e, &ne) || ne != nb || nb > MAX_SLICE)
        return cpu_fail_node(g, n, err, KILN_ERR_INVALID, "starts and ends differ or too long");
    memcpy(s->starts, b, nb * sizeof(int64_t));
    memcpy(s->ends, e, nb * sizeof(int64_t));
    s->n = nb;
    if (cpu_attr_ints(g, n, "axes", &ax, &na)) {
        if (na != nb)
            return cpu_fail_node(g, n, err, KILN_ERR_INVALID, "axes and starts differ");
        memcpy(s->axes, ax, na * sizeof(int64_t));
        s->naxes = na;
    }
    return KILN_OK;
}

/* Resolve start/step/count per input dim (ONNX clamping rules). */
static kiln_status slice_plan(const kiln_kernel_args *a, const slice_attrs *s, int64_t *start,
                              int64_t *step, int64_t *count, kiln_error *err)
{
    const kiln_tensor *x = &a->inputs[0];
    int64_t b[MAX_SLICE], e[MAX_SLICE], ax[MAX_SLICE], st[MAX_SLICE];
    uint32_t nb = 0, ne = 0, na = 0, ns = 0;
    if (cpu_has_input(a, 1)) {
        if (!cpu_read_ints(&a->inputs[1], b, MAX_SLICE, &nb) ||
            !cpu_has_input(a, 2) || !cpu_read_ints(&a->inputs[2], e, MAX_SLICE, &ne) ||
            (cpu_has_input(a, 3) && !cpu_read_ints(&a->inputs[3], ax, MAX_SLICE, &na)) ||
            (cpu_has_input(a, 4) && !cpu_read_ints(&a->inputs[4], st, MAX_SLICE, &ns)))
            return cpu_fail(a, err, KILN_ERR_INVALID, "starts/ends/axes/steps must be 1-D "
                                                      "int64 or int32 tensors");
        if (ne != nb || (cpu_has_input(a, 3) && na != nb) || (cpu_has_input(a, 4) && ns != nb))
            return cpu_fail(a, err, KILN_ERR_INVALID, "starts/ends/axes/steps lengths differ");
    } else if (s && s->n) {
        nb = ne = s->n;
        memcpy(b, s->starts, nb * sizeof(int64_t));
        memcpy(e, s->ends, nb * sizeof(int64_t));
        na = s->naxes;
        memcpy(ax, s->axes, na * sizeof(int64_t));
    } else {
        return cpu_fail(a, err, KILN_ERR_INVALID, "no starts/ends");
    }
    for (uint32_t d = 0; d < x->rank; d++) {
        start[d] = 0;
        step[d] = 1;
        count[d] = x->dims[d];
    }
    bool seen[CPU_MAX_RANK] = {false};
    for (uint32_t i = 0; i < nb; i++) {
        uint32_t d;
        if (!cpu_axis(na ? ax[i] : (int64_t)i, x->rank, &d) || seen[d])
            return cpu_fail(a, err, KILN_ERR_INVALID, "axis %lld out of range or repeated",
                            (long long)(na ? ax[i] : (int64_t)i));
        seen[d] = true;
        int64_t dim = x->dims[d], sp = ns ? st[i] : 1, lo = b[i], hi = e[i];
        if (sp == 0 || sp == INT64_MIN)
            return cpu_fail(a, err, KILN_ERR_INVALID, "step %lld", (long long)sp);
        if (lo < 0)
            lo += dim;
        if (hi < 0)
            hi += dim;
        if (sp > 0) {
            lo = lo < 0 ? 0 : lo > dim ? dim : lo;
            hi = hi < 0 ? 0 : hi > dim ? dim : hi;
            count[d] = hi > lo ? (hi - lo - 1) / sp + 1 : 0;
        } else {
            lo = lo < 0 ? 0 : lo > dim - 1 ? dim - 1 : lo;
            hi = hi < -1 ? -1 : hi > dim - 1 ? dim - 1 : hi;
            count[d] = lo > hi ? (lo - hi - 1) / -sp + 1 : 0;
        }
        start[d] = lo;
        step[d] = sp;
    }
    return KILN_OK;
}

CPU_KERNEL(cpu_slice)
{
    if (a->input_count < 1 || a->output_count < 1)
        return cpu_fail(a, err, KILN_ERR_INVALID, "input 0 or output 0 missing");
    const kiln_tensor *x = &a->inputs[0];
    uint32_t r = x->rank;
    if (r > CPU_MAX_RANK)
        return cpu_fail(a, err, KILN_ERR_UNSUPPORTED, "rank %u", r);
    int64_t start[CPU_MAX_RANK], step[CPU_MAX_RANK], count[CPU_MAX_RANK], istr[CPU_MAX_RANK];
    kiln_status st = slice_plan(a, state, start, step, count, err);
    if (st == KILN_OK)
        st = cpu_check_out_dims(a, 0, r, count, err);
    size_t es = kiln_dtype_size(x->dtype);
    int64_t total = 1;
    for (uint32_t d = 0; d < r; d++)
        total *= count[d];
    if (st == KILN_OK)
        st = cpu_check_out_bytes(a, 0, (size_t)total * es, err);
    if (st != KILN_OK || total == 0)
        return st;
    int64_t s = 1;
    for (int32_t d = (int32_t)r - 1; d >= 0; d--) {
        istr[d] = s;
        s *= x->dims[d];
    }
    /* Trailing dims taken whole form one contiguous block of blk elements. */
    uint32_t k = r;
    int64_t blk = 1;
    while (k > 0 && step[k - 1] == 1 && start[k - 1] == 0 && count[k - 1] == x->dims[k - 1])
        blk *= count[--k];
    const char *in = x->data;
    char *out = a->outputs[0].data;
    if (k == 0) {
        memcpy(out, in, (size_t)total * es);
        return KILN_OK;
    }
    size_t bb = (size_t)blk * es;
    int64_t idx[CPU_MAX_RANK] = {0}, off = 0, rows = 1;
    for (uint32_t d = 0; d < k; d++)
        off += start[d] * istr[d];
    for (uint32_t d = 0; d + 1 < k; d++)
        rows *= count[d];
    const int64_t cols = count[k - 1], cstep = step[k - 1] * istr[k - 1];
    for (int64_t row = 0; row < rows; row++) {
        if (cstep == blk) {
            memcpy(out, in + (size_t)off * es, (size_t)cols * bb);
            out += (size_t)cols * bb;
        } else {
            for (int64_t i = 0; i < cols; i++, out += bb)
                memcpy(out, in + (size_t)(off + i * cstep) * es, bb);
        }
        for (int32_t d = (int32_t)k - 2; d >= 0; d--) {
            off += step[d] * istr[d];
            if (++idx[d] < count[d])
                break;
            off -= step[d] * istr[d] * count[d];
            idx[d] = 0;
        }
    }
    return KILN_OK;
}

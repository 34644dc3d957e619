/*
 * nn_resize.c - ONNX Resize (opset 10, 11, 13+) and Upsample on the CPU.
 *
 * Inputs: opset 10 / Upsample-9 (X, scales); opset 11+ (X, roi, scales,
 * sizes) with roi/scales optional or empty; Upsample-7 takes the scales
 * attribute.  Output sizes are the output tensor's dims (checked against
 * sizes, or floor(in * scale)); `axes` (opset 18) maps scales/sizes/roi to
 * a subset of the dims.
 *
 * Attributes: mode nearest/linear/cubic; coordinate_transformation_mode
 * half_pixel (default), pytorch_half_pixel, align_corners, asymmetric,
 * tf_half_pixel_for_nearest, tf_crop_and_resize (roi, extrapolation_value);
 * nearest_mode round_prefer_floor (default), round_prefer_ceil, floor, ceil;
 * cubic_coeff_a, exclude_outside.  Opset 10 and Upsample use asymmetric
 * coordinates and, for nearest, floor when upsampling / ceil when
 * downsampling (ONNX Runtime's behaviour for those opsets).
 *
 * Method: the interpolation is separable, so each dim gets a table of taps
 * per output index (1 for nearest, 2 for linear, 4 for cubic; an index of -1
 * marks a crop-and-resize position outside the input).  Dims whose table is
 * the identity collapse to one tap.  Each output row (all dims but the last)
 * expands the taps of the leading dims into (offset, weight) combinations,
 * then the last dim is interpolated along the row.  Coordinates and weights
 * follow the ONNX reference implementation (float64 coordinates, edge
 * clamping, ratio 1 on integer positions).
 */
#include "nn_ops.h"

#include "cpu_par.h"

#include <math.h>
#include <string.h>

enum { RZ_NEAREST, RZ_LINEAR, RZ_CUBIC };
enum { CT_HALF_PIXEL, CT_PYTORCH, CT_ALIGN, CT_ASYM, CT_TF_NEAREST, CT_TF_CROP };
enum { NM_PREFER_FLOOR, NM_PREFER_CEIL, NM_FLOOR, NM_CEIL, NM_SIMPLE };

#define RZ_MAX_COMBOS 64

typedef struct resize_state {
    int mode, ctm, nearest;
    bool legacy; /* opset 10 Resize / Upsample: (X, scales) */
    bool exclude_outside;
    float cubic_a, extrapolation;
    uint32_t naxes, nattr_scales;
    int64_t axes[CPU_MAX_RANK];
    double attr_scales[CPU_MAX_RANK];
} resize_state;

static int lookup(const char *v, const char *const *names, int count)
{
    for (int i = 0; i < count; i++)
        if (strcmp(v, names[i]) == 0)
            return i;
    return -1;
}

NN_PREPARE(nn_resize_prepare)
{
    resize_state *s;
    kiln_status st = cpu_state_new(g, n, sizeof(*s), state, err);
    if (st)
        return st;
    s = *state;
    static const char *const modes[] = {"nearest", "linear", "cubic", "bilinear"};
    static const char *const ctms[] = {"half_pixel", "pytorch_half_pixel", "align_corners",
                                       "asymmetric", "tf_half_pixel_for_nearest",
                                       "tf_crop_and_resize", "tf_half_pixel_for_nn"};
    static const char *const nms[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
    const bool upsample = strcmp(kiln_node_op_str(g, n), "Upsample") == 0;
    const char *m = cpu_attr_str(g, n, "mode", "nearest");
    const char *c = cpu_attr_str(g, n, "coordinate_transformation_mode", "half_pixel");
    const char *nm = cpu_attr_str(g, n, "nearest_mode", "round_prefer_floor");
    s->mode = lookup(m, modes, 4);
    s->ctm = lookup(c, ctms, 7);
    if (s->ctm == 6) /* the name ONNX 1.12's node tests use */
        s->ctm = CT_TF_NEAREST;
    s->nearest = lookup(nm, nms, 4);
    if (s->mode == 3)
        s->mode = RZ_LINEAR;
    if (s->mode < 0 || s->ctm < 0 || s->nearest < 0)
        return cpu_fail_node(g, n, err, KILN_ERR_UNSUPPORTED,
                             "unsupported mode '%s', coordinate_transformation_mode '%s' or "
                             "nearest_mode '%s'",
                             m, c, nm);
    s->legacy = upsample || kiln_node_input_count(g, n) == 2;
    if (s->legacy) {
        s->ctm = CT_ASYM;
        s->nearest = NM_SIMPLE;
    }
    s->exclude_outside = cpu_attr_int(g, n, "exclude_outside", 0) != 0;
    s->cubic_a = (float)cpu_attr_float(g, n, "cubic_coeff_a", -0.75);
    s->extrapolation = (float)cpu_attr_float(g, n, "extrapolation_value", 0.0);
    if (cpu_attr_int(g, n, "antialias", 0) != 0)
        return cpu_fail_node(g, n, err, KILN_ERR_UNSUPPORTED, "antialias is not supported");
    const int64_t *ax;
    uint32_t na;
    if (cpu_attr_ints(g, n, "axes", &ax, &na)) {
        if (na > CPU_MAX_RANK)
            return cpu_fail_node(g, n, err, KILN_ERR_UNSUPPORTED, "too many axes");
        memcpy(s->axes, ax, na * sizeof(int64_t));
        s->naxes = na;
    }
    const double *sc;
    uint32_t ns;
    if (upsample && kiln_attrs_get_list_float(kiln_node_attrs(g, n), "scales", &sc, &ns)) {
        if (ns > CPU_MAX_RANK)
            return cpu_fail_node(g, n, err, KILN_ERR_UNSUPPORTED, "too many scales");
        memcpy(s->attr_scales, sc, ns * sizeof(double));
        s->nattr_scales = ns;
    }
    return KILN_OK;
}

/* Per-dim parameters resolved for one call. */
typedef struct rz_dim {
    int64_t in, out;
    double scale, out_f, roi0, roi1;
    int taps;      /* taps in the table (1 when the dim is the identity) */
    int64_t *idx;  /* [out * taps]; -1 = extrapolate */
    float *w;      /* [out * taps] */
} rz_dim;

static double source_coord(const resize_state *s, const rz_dim *d, int64_t o, bool *outside)
{
    double x, in1 = (double)(d->in - 1);
    *outside = false;
    switch (s->ctm) {
    case CT_PYTORCH:
        return d->out_f > 1 ? ((double)o + 0.5) / d->scale - 0.5 : -0.5;
    case CT_ALIGN:
        return d->out_f == 1 ? 0 : (double)o * in1 / (d->out_f - 1);
    case CT_ASYM:
        return (double)o / d->scale;
    case CT_TF_NEAREST:
        return ((double)o + 0.5) / d->scale;
    case CT_TF_CROP:
        x = d->out_f == 1 ? (d->roi1 - d->roi0) * in1 / 2
                          : (double)o * (d->roi1 - d->roi0) * in1 / (d->out_f - 1);
        x += d->roi0 * in1;
        *outside = x < 0 || x > in1;
        return x;
    default:
        return ((double)o + 0.5) / d->scale - 0.5;
    }
}

static int64_t clampi(int64_t v, int64_t n)
{
    return v < 0 ? 0 : v >= n ? n - 1 : v;
}

/* Fill the tap table of one dim. */
static void build_dim(const resize_state *s, rz_dim *d, int taps)
{
    for (int64_t o = 0; o < d->out; o++) {
        int64_t *ix = d->idx + o * taps;
        float *w = d->w + o * taps;
        bool outside;
        const double x = source_coord(s, d, o, &outside);
        if (outside) {
            for (int t = 0; t < taps; t++)
                ix[t] = -1, w[t] = 0;
            continue;
        }
        if (s->mode == RZ_NEAREST) {
            double r;
            switch (s->nearest) {
            case NM_PREFER_CEIL: r = floor(x + 0.5); break;
            case NM_FLOOR: r = floor(x); break;
            case NM_CEIL: r = ceil(x); break;
            case NM_SIMPLE: r = d->scale < 1 ? ceil(x) : floor(x); break;
            default: r = ceil(x - 0.5); break;
            }
            ix[0] = clampi((int64_t)r, d->in);
            w[0] = 1;
            continue;
        }
        const double base = ceil(x) - 1, ratio = x - base; /* ratio in (0, 1] */
        double c[4];
        if (s->mode == RZ_LINEAR) {
            c[0] = 1 - ratio;
            c[1] = ratio;
        } else {
            const double A = s->cubic_a, r1 = ratio + 1, q = 1 - ratio, q1 = q + 1;
            c[0] = ((A * r1 - 5 * A) * r1 + 8 * A) * r1 - 4 * A;
            c[1] = ((A + 2) * ratio - (A + 3)) * ratio * ratio + 1;
            c[2] = ((A + 2) * q - (A + 3)) * q * q + 1;
            c[3] = ((A * q1 - 5 * A) * q1 + 8 * A) * q1 - 4 * A;
        }
        const int64_t first = (int64_t)base - (taps == 4 ? 1 : 0);
        double sum = 0;
        for (int t = 0; t < taps; t++) {
            const int64_t p = first + t;
            if (s->exclude_outside && (p < 0 || p >= d->in))
                c[t] = 0;
            sum += c[t];
        }
        for (int t = 0; t < taps; t++) {
            ix[t] = clampi(first + t, d->in);
            w[t] = (float)(s->exclude_outside && sum != 0 ? c[t] / sum : c[t]);
        }
    }
}

/* Collapse a dim whose table maps each o to o with weight 1 (taps 0 or 1). */
static void collapse_identity(rz_dim *d, int taps)
{
    if (d->in != d->out || taps == 1)
        return;
    for (int64_t o = 0; o < d->out; o++) {
        const int64_t *ix = d->idx + o * taps;
        const float *w = d->w + o * taps;
        float rest = 0;
        int hit = -1;
        for (int t = 0; t < taps; t++) {
            if (ix[t] == o && w[t] == 1.0f && hit < 0)
                hit = t;
            else
                rest += w[t] < 0 ? -w[t] : w[t];
        }
        if (hit < 0 || rest != 0)
            return;
    }
    for (int64_t o = 0; o < d->out; o++) {
        d->idx[o] = o;
        d->w[o] = 1;
    }
    d->taps = 1;
}

/* Resolve scales/sizes/roi into per-dim parameters; errors name the node. */
static kiln_status resolve_dims(const resize_state *s, const kiln_kernel_args *a, rz_dim *dims,
                                uint32_t r, kiln_error *err)
{
    const kiln_tensor *X = &a->inputs[0], *Y = &a->outputs[0];
    const uint32_t si = s->legacy ? 1 : 2;
    const kiln_tensor *sc = cpu_has_input(a, si) && cpu_numel(&a->inputs[si]) > 0
                                ? &a->inputs[si] : NULL;
    const kiln_tensor *sz = !s->legacy && cpu_has_input(a, 3) && cpu_numel(&a->inputs[3]) > 0
                                ? &a->inputs[3] : NULL;
    const kiln_tensor *roi = !s->legacy && cpu_has_input(a, 1) && cpu_numel(&a->inputs[1]) > 0
                                 ? &a->inputs[1] : NULL;
    const uint32_t nax = s->naxes ? s->naxes : r;
    int64_t axes[CPU_MAX_RANK];
    for (uint32_t i = 0; i < nax; i++) {
        uint32_t ax = i;
        if (s->naxes && !cpu_axis(s->axes[i], r, &ax))
            return cpu_fail(a, err, KILN_ERR_INVALID, "axis %lld out of range",
                            (long long)s->axes[i]);
        axes[i] = ax;
    }
    if (sc && (sc->dtype != KILN_DT_FLOAT32 || cpu_numel(sc) != nax))
        return cpu_fail(a, err, KILN_ERR_INVALID, "scales must be %u float32 values", nax);
    if (sz && (sz->dtype != KILN_DT_INT64 || cpu_numel(sz) != nax))
        return cpu_fail(a, err, KILN_ERR_INVALID, "sizes must be %u int64 values", nax);
    if (roi && (roi->dtype != KILN_DT_FLOAT32 || cpu_numel(roi) != 2 * nax))
        return cpu_fail(a, err, KILN_ERR_INVALID, "roi must be %u float32 values", 2 * nax);
    if (!sc && !sz && !(s->nattr_scales == r))
        return cpu_fail(a, err, KILN_ERR_INVALID, "one of scales and sizes is required");
    for (uint32_t d = 0; d < r; d++) {
        dims[d].in = X->dims[d];
        dims[d].out = Y->dims[d];
        dims[d].scale = 1;
        dims[d].roi0 = 0;
        dims[d].roi1 = 1;
        if (s->nattr_scales == r && !sc)
            dims[d].scale = s->attr_scales[d];
    }
    for (uint32_t i = 0; i < nax; i++) {
        rz_dim *d = &dims[axes[i]];
        if (sc)
            d->scale = ((const float *)sc->data)[i];
        if (roi) {
            d->roi0 = ((const float *)roi->data)[i];
            d->roi1 = ((const float *)roi->data)[nax + i];
        }
        if (sz && ((const int64_t *)sz->data)[i] != d->out)
            return cpu_fail(a, err, KILN_ERR_INVALID, "output dim %lld differs from sizes %lld",
                            (long long)d->out, (long long)((const int64_t *)sz->data)[i]);
    }
    for (uint32_t i = 0; i < r; i++) {
        rz_dim *d = &dims[i];
        if (d->scale <= 0)
            return cpu_fail(a, err, KILN_ERR_INVALID, "scale %g must be positive", d->scale);
        if (!sz && (int64_t)floor((double)d->in * d->scale) != d->out)
            return cpu_fail(a, err, KILN_ERR_INVALID, "output dim %u is %lld, scale gives %lld",
                            i, (long long)d->out, (long long)floor((double)d->in * d->scale));
        if (sz)
            d->scale = d->in ? (double)d->out / (double)d->in : 1;
        d->out_f = sz ? (double)d->out : d->scale * (double)d->in;
    }
    return KILN_OK;
}

/* Output rows [lo, hi) of a resize (cpu_par_for). */
typedef struct resize_job {
    const resize_state *s;
    const rz_dim *dims;
    const int64_t *xstr;
    uint32_t r;
    int taps;
    const float *x;
    float *y;
} resize_job;

static void resize_rows(void *ctx, int64_t lo, int64_t hi)
{
    const resize_job *j = ctx;
    const resize_state *s = j->s;
    const rz_dim *dims = j->dims;
    const int64_t *xstr = j->xstr;
    const uint32_t r = j->r;
    const int taps = j->taps;
    const rz_dim *last = &dims[r - 1];
    const float *x = j->x;
    float *y = j->y + lo * last->out;
    int64_t o[CPU_MAX_RANK] = {0};
    int64_t rem = lo; /* the odometer at row lo */
    for (int32_t d = (int32_t)r - 2; d >= 0; d--) {
        o[d] = rem % dims[d].out;
        rem /= dims[d].out;
    }
    int64_t prev_off = -1;
    for (int64_t row = lo; row < hi; row++) {
        int64_t coff[RZ_MAX_COMBOS];
        float cw[RZ_MAX_COMBOS];
        size_t nc = 1;
        bool extrap = false;
        coff[0] = 0;
        cw[0] = 1;
        for (uint32_t d = 0; d + 1 < r; d++) {
            const rz_dim *dd = &dims[d];
            const int64_t *ix = dd->idx + o[d] * dd->taps;
            const float *w = dd->w + o[d] * dd->taps;
            if (ix[0] < 0)
                extrap = true;
            for (size_t c = nc; c-- > 0;)
                for (int t = dd->taps - 1; t >= 0; t--) {
                    coff[c * (size_t)dd->taps + (size_t)t] = coff[c] + ix[t] * xstr[d];
                    cw[c * (size_t)dd->taps + (size_t)t] = cw[c] * w[t];
                }
            nc *= (size_t)dd->taps;
        }
        if (taps == 1 && !extrap && nc == 1) {
            /* nearest: a gather from one source row; the rows an upsampling
             * repeats are copies of the one before */
            if (row > lo && coff[0] == prev_off) {
                memcpy(y, y - last->out, (size_t)last->out * sizeof(float));
            } else {
                const float *xr = x + coff[0];
                for (int64_t ow = 0; ow < last->out; ow++) {
                    const int64_t ix = last->idx[ow];
                    y[ow] = ix < 0 ? s->extrapolation : xr[ix];
                }
            }
            prev_off = coff[0];
            y += last->out;
        } else
        for (int64_t ow = 0; ow < last->out; ow++, y++) {
            const int64_t *ix = last->idx + ow * last->taps;
            const float *w = last->w + ow * last->taps;
            if (extrap || ix[0] < 0) {
                *y = s->extrapolation;
                continue;
            }
            float acc = 0;
            for (size_t c = 0; c < nc; c++) {
                const float *xc = x + coff[c];
                float part = 0;
                for (int t = 0; t < last->taps; t++)
                    part += w[t] * xc[ix[t]];
                acc += cw[c] * part;
            }
            *y = acc;
        }
        for (int32_t d = (int32_t)r - 2; d >= 0; d--) { /* odometer over the leading dims */
            if (++o[d] < dims[d].out)
                break;
            o[d] = 0;
        }
    }
}

NN_KERNEL(nn_resize_run)
{
    const resize_state *s = state;
    kiln_status st = nn_check_float_inputs(a, 0, 1, true, err);
    if (st)
        return st;
    if (!cpu_has_input(a, 0))
        return cpu_fail(a, err, KILN_ERR_INVALID, "X is required");
    const kiln_tensor *X = &a->inputs[0], *Y = &a->outputs[0];
    const uint32_t r = X->rank;
    if (r < 1 || r > CPU_MAX_RANK || Y->rank != r)
        return cpu_fail(a, err, KILN_ERR_INVALID, "X rank %u and Y rank %u must be equal, 1 to %d",
                        r, Y->rank, CPU_MAX_RANK);
    rz_dim dims[CPU_MAX_RANK];
    if ((st = resolve_dims(s, a, dims, r, err)) != KILN_OK)
        return st;
    const int taps = s->mode == RZ_NEAREST ? 1 : s->mode == RZ_LINEAR ? 2 : 4;
    size_t total = 0;
    for (uint32_t d = 0; d < r; d++) {
        if (dims[d].in <= 0 && dims[d].out > 0)
            return cpu_fail(a, err, KILN_ERR_INVALID, "cannot resize an empty dim");
        total += (size_t)dims[d].out * (size_t)taps;
    }
    if (cpu_numel(Y) == 0)
        return KILN_OK;
    char *buf = kiln_alloc(total * (sizeof(int64_t) + sizeof(float)) + 1);
    if (!buf)
        return cpu_fail(a, err, KILN_ERR_NOMEM, "out of memory for the resize tables");
    int64_t *ip = (int64_t *)(void *)buf;
    float *wp = (float *)(void *)(buf + total * sizeof(int64_t));
    for (uint32_t d = 0; d < r; d++) {
        dims[d].idx = ip;
        dims[d].w = wp;
        dims[d].taps = taps;
        ip += dims[d].out * taps;
        wp += dims[d].out * taps;
        build_dim(s, &dims[d], taps);
        collapse_identity(&dims[d], taps);
    }
    /* combinations of the leading dims' taps per output row */
    size_t combos_max = 1;
    int64_t xstr[CPU_MAX_RANK];
    int64_t xs = 1;
    for (int32_t d = (int32_t)r - 1; d >= 0; d--) {
        xstr[d] = xs;
        xs *= dims[d].in;
        if (d < (int32_t)r - 1)
            combos_max *= (size_t)dims[d].taps;
    }
    if (combos_max > RZ_MAX_COMBOS) {
        kiln_free(buf);
        return cpu_fail(a, err, KILN_ERR_UNSUPPORTED, "too many interpolated dims");
    }
    /* output rows are independent: shared out whole */
    resize_job j = {s, dims, xstr, r, taps, X->data, Y->data};
    const int64_t rows = cpu_numel(Y) / dims[r - 1].out;
    cpu_par_for(rows, dims[r - 1].out * (int64_t)combos_max * taps, resize_rows, &j);
    kiln_free(buf);
    return KILN_OK;
}

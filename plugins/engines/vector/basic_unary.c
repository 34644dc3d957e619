/*
 * basic_unary.c - one-input elementwise kernels: Neg Sqrt Log Exp Tanh Sigmoid Relu
 * LeakyRelu (alpha 0.01) HardSigmoid (alpha 0.2, beta 0.5), HardSwish
 * (x * clamp(x / 6 + 0.5, 0, 1), the formula of aicore's fused HardSwish), Erf,
 * QuickGelu (x * sigmoid(alpha x), alpha 1.702 by default),
 * Gelu (approximate none: x * (erf(x / sqrt 2) + 1) * 0.5, the order of its
 * spelled-out form; tanh: the tanh approximation), Clip (opset < 11:
 * min/max attributes; >= 11: optional scalar inputs 1 and 2), Not, Cast (to
 * the output's dtype; every numeric type, bool, float16 and bfloat16).
 * Inputs and outputs have the same shape (the runtime allocates
 * outputs from the descriptors; sizes are checked).
 */
#include "basic_ops.h"
#include "cpu_vexp.h"
#include "cpu_par.h"

#include <float.h>
#include <math.h>
#include <string.h>

enum unary_kind {
    U_NEG, U_SQRT, U_LOG, U_SIGMOID, U_RELU, U_LEAKY, U_HSIG, U_HSWISH, U_ERF, U_GELU, U_GELU_TANH,
    U_QGELU, U_EXP, U_TANH
};

typedef struct unary_state {
    enum unary_kind kind;
    double alpha, beta;
} unary_state;

CPU_PREPARE(cpu_unary_prepare)
{
    static const struct {
        const char *op;
        enum unary_kind kind;
    } kinds[] = {{"Neg", U_NEG},         {"Sqrt", U_SQRT},           {"Log", U_LOG},
                 {"Sigmoid", U_SIGMOID}, {"Relu", U_RELU},           {"LeakyRelu", U_LEAKY},
                 {"HardSigmoid", U_HSIG}, {"HardSwish", U_HSWISH}, {"Erf", U_ERF},
                 {"Gelu", U_GELU},       {"QuickGelu", U_QGELU},     {"Exp", U_EXP},
                 {"Tanh", U_TANH}};
    const char *op = kiln_node_op_str(g, n);
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        if (strcmp(op, kinds[i].op) != 0)
            continue;
        kiln_status st = cpu_state_new(g, n, sizeof(unary_state), state, err);
        if (st != KILN_OK)
            return st;
        unary_state *s = *state;
        s->kind = kinds[i].kind;
        if (s->kind == U_GELU) {
            const char *ap = cpu_attr_str(g, n, "approximate", "none");
            if (strcmp(ap, "tanh") == 0) {
                s->kind = U_GELU_TANH;
            } else if (strcmp(ap, "none") != 0) {
                cpu_state_free(*state);
                *state = NULL;
                return cpu_fail_node(g, n, err, KILN_ERR_INVALID,
                                     "Gelu approximate '%s' (expected none or tanh)", ap);
            }
        }
        s->alpha = cpu_attr_float(g, n, "alpha",
                                  s->kind == U_LEAKY ? 0.01 : s->kind == U_QGELU ? 1.702 : 0.2);
        s->beta = cpu_attr_float(g, n, "beta", 0.5);
        return KILN_OK;
    }
    return cpu_fail_node(g, n, err, KILN_ERR_UNSUPPORTED, "not a unary op of this table");
}

#define UNARY_FLOAT(DT, T, SQRT, LOG, EXP, ERF, TANH)                                     \
    CPU_VEC_CLONES static void unary_##DT(const unary_state *s, const T *x, T *y, int64_t n)              \
    {                                                                                      \
        const T al = (T)s->alpha, be = (T)s->beta;                                         \
        switch (s->kind) {                                                                 \
        case U_NEG:                                                                        \
            for (int64_t i = 0; i < n; i++)                                                \
                y[i] = -x[i];                                                              \
            break;                                                                         \
        case U_SQRT:                                                                       \
            for (int64_t i = 0; i < n; i++)                                                \
                y[i] = SQRT(x[i]);                                                         \
            break;                                                                         \
        case U_LOG:                                                                        \
            for (int64_t i = 0; i < n; i++)                                                \
                y[i] = LOG(x[i]);                                                          \
            break;                                                                         \
        case U_SIGMOID:                                                                    \
            for (int64_t i = 0; i < n; i++)                                                \
                y[i] = (T)1 / ((T)1 + EXP(-x[i]));                                         \
            break;                                                                         \
        case U_RELU:                                                                       \
            for (int64_t i = 0; i < n; i++)                                                \
                y[i] = x[i] > 0 ? x[i] : (T)0;                                             \
            break;                                                                         \
        case U_LEAKY:                                                                      \
            for (int64_t i = 0; i < n; i++)                                                \
                y[i] = x[i] >= 0 ? x[i] : x[i] * al;                                       \
            break;                                                                         \
        case U_HSIG:                                                                       \
            for (int64_t i = 0; i < n; i++) {                                              \
                T v = al * x[i] + be;                                                      \
                y[i] = v < 0 ? (T)0 : v > 1 ? (T)1 : v;                                    \
            }                                                                              \
            break;                                                                         \
        case U_ERF:                                                                        \
            for (int64_t i = 0; i < n; i++)                                                \
                y[i] = ERF(x[i]);                                                          \
            break;                                                                         \
        case U_EXP:                                                                        \
            for (int64_t i = 0; i < n; i++)                                                \
                y[i] = EXP(x[i]);                                                          \
            break;                                                                         \
        case U_TANH:                                                                       \
            for (int64_t i = 0; i < n; i++)                                                \
                y[i] = TANH(x[i]);                                                         \
            break;                                                                         \
        case U_GELU: /* the order of x * (erf(x / sqrt 2) + 1) * 0.5 spelled out */        \
            for (int64_t i = 0; i < n; i++)                                                \
                y[i] = x[i] * (ERF(x[i] / (T)1.41421356237309504880) + (T)1) * (T)0.5;     \
            break;                                                                         \
        case U_GELU_TANH:                                                                  \
            for (int64_t i = 0; i < n; i++) {                                              \
                const T v = x[i];                                                          \
                const T in = (T)0.79788456080286535588 * (v + (T)0.044715 * v * v * v);    \
                y[i] = (T)0.5 * v * ((T)1 + TANH(in));                                     \
            }                                                                              \
            break;                                                                         \
        case U_QGELU: /* x * Sigmoid(x * alpha), the order of its spelled-out form */     \
            for (int64_t i = 0; i < n; i++)                                                \
                y[i] = x[i] * ((T)1 / ((T)1 + EXP(-(x[i] * al))));                         \
            break;                                                                         \
        case U_HSWISH:                                                                     \
            for (int64_t i = 0; i < n; i++) {                                              \
                T v = x[i] / (T)6 + (T)0.5;                                                \
                y[i] = x[i] * (v < 0 ? (T)0 : v > 1 ? (T)1 : v);                           \
            }                                                                              \
            break;                                                                         \
        }                                                                                  \
    }

UNARY_FLOAT(FLOAT32, float, sqrtf, logf, cpu_expf, erff, tanhf)
UNARY_FLOAT(FLOAT64, double, sqrt, log, exp, erf, tanh)

#define NEG_INT(DT, T)                                                                     \
    static void neg_##DT(const void *vx, void *vy, int64_t n)                              \
    {                                                                                      \
        const T *x = vx;                                                                   \
        T *y = vy;                                                                         \
        for (int64_t i = 0; i < n; i++)                                                    \
            y[i] = (T)(UINT64_C(0) - (uint64_t)x[i]); /* -INT_MIN wraps to INT_MIN */      \
    }
CPU_SIGNED_INT_TYPES(NEG_INT)

/* Shared checks: input 0 present, output 0 same dtype (or @p out_dt) and numel. */
static kiln_status same_shape(const kiln_kernel_args *a, kiln_dtype out_dt, kiln_error *err)
{
    if (!cpu_has_input(a, 0))
        return cpu_fail(a, err, KILN_ERR_INVALID, "input 0 missing");
    if (a->output_count < 1 || !a->outputs[0].data)
        return cpu_fail(a, err, KILN_ERR_INVALID, "output 0 missing");
    if (a->outputs[0].dtype != out_dt)
        return cpu_fail(a, err, KILN_ERR_INVALID, "output dtype %s, expected %s",
                        kiln_dtype_name(a->outputs[0].dtype), kiln_dtype_name(out_dt));
    if (cpu_numel(&a->outputs[0]) != cpu_numel(&a->inputs[0]))
        return cpu_fail(a, err, KILN_ERR_INVALID, "output has %lld elements, input %lld",
                        (long long)cpu_numel(&a->outputs[0]),
                        (long long)cpu_numel(&a->inputs[0]));
    return cpu_check_out_bytes(a, 0, (size_t)cpu_numel(&a->inputs[0]) * kiln_dtype_size(out_dt),
                               err);
}

/* A unary op over elements [lo, hi) (cpu_par_for: every element alone, so
 * any split gives the serial bytes). */
typedef struct unary_job {
    const unary_state *s;
    kiln_dtype dt;
    const void *x;
    void *y;
} unary_job;

static void unary_range(void *ctx, int64_t lo, int64_t hi)
{
    const unary_job *j = ctx;
    switch (j->dt) {
    case KILN_DT_FLOAT32:
        unary_FLOAT32(j->s, (const float *)j->x + lo, (float *)j->y + lo, hi - lo);
        break;
    case KILN_DT_FLOAT64:
        unary_FLOAT64(j->s, (const double *)j->x + lo, (double *)j->y + lo, hi - lo);
        break;
    default:
        break;
    }
}

/* Work per element relative to an add (cpu_par_for's grain). */
static int64_t unary_cost(enum unary_kind k)
{
    switch (k) {
    case U_NEG:
    case U_RELU:
    case U_LEAKY:
    case U_HSIG:
    case U_HSWISH:
        return 1;
    case U_SQRT:
        return 2;
    default:
        return 8; /* a libm call (exp, log, erf, tanh) per element */
    }
}

CPU_KERNEL(cpu_unary)
{
    const unary_state *s = state;
    kiln_dtype dt = cpu_has_input(a, 0) ? a->inputs[0].dtype : KILN_DT_FLOAT32;
    kiln_status st = same_shape(a, dt, err);
    if (st != KILN_OK)
        return st;
    int64_t n = cpu_numel(&a->inputs[0]);
    const void *x = a->inputs[0].data;
    void *y = a->outputs[0].data;
    if (dt == KILN_DT_FLOAT32 || dt == KILN_DT_FLOAT64) {
        unary_job j = {s, dt, x, y};
        cpu_par_for(n, unary_cost(s->kind), unary_range, &j);
        return KILN_OK;
    }
    if (s->kind == U_NEG) {
        switch (dt) {
#define CASE(DT, T)                                                                        \
    case KILN_DT_##DT: neg_##DT(x, y, n); return KILN_OK;
            CPU_SIGNED_INT_TYPES(CASE)
#undef CASE
        default: break;
        }
    }
    return cpu_fail(a, err, KILN_ERR_UNSUPPORTED, "dtype %s not supported",
                    kiln_dtype_name(dt));
}

/* ---- Clip ---------------------------------------------------------------- */

typedef struct clip_state {
    bool has_min, has_max; /* opset < 11 attributes */
    double min, max;
} clip_state;

CPU_PREPARE(cpu_clip_prepare)
{
    kiln_status st = cpu_state_new(g, n, sizeof(clip_state), state, err);
    if (st != KILN_OK)
        return st;
    clip_state *s = *state;
    const kiln_attrs *at = kiln_node_attrs(g, n);
    s->has_min = kiln_attrs_has(at, "min");
    s->has_max = kiln_attrs_has(at, "max");
    s->min = cpu_attr_float(g, n, "min", -HUGE_VAL);
    s->max = cpu_attr_float(g, n, "max", HUGE_VAL);
    return KILN_OK;
}

#define CLIP_LOOP(DT, T, LO, HI)                                                           \
    static void clip_##DT(const kiln_kernel_args *a, const clip_state *s, int64_t i0,      \
                          int64_t i1)                                                      \
    {                                                                                      \
        T lo = LO, hi = HI;                                                                \
        if (cpu_has_input(a, 1) && cpu_numel(&a->inputs[1]) >= 1)                          \
            lo = *(const T *)a->inputs[1].data;                                            \
        else if (s->has_min)                                                               \
            lo = (T)s->min;                                                                \
        if (cpu_has_input(a, 2) && cpu_numel(&a->inputs[2]) >= 1)                          \
            hi = *(const T *)a->inputs[2].data;                                            \
        else if (s->has_max)                                                               \
            hi = (T)s->max;                                                                \
        const T *x = a->inputs[0].data;                                                    \
        T *y = a->outputs[0].data;                                                         \
        for (int64_t i = i0; i < i1; i++) {                                                \
            T v = x[i] < lo ? lo : x[i];                                                   \
            y[i] = v > hi ? hi : v;                                                        \
        }                                                                                  \
    }

CLIP_LOOP(FLOAT32, float, -INFINITY, INFINITY)
CLIP_LOOP(FLOAT64, double, -INFINITY, INFINITY)
CLIP_LOOP(INT8, int8_t, INT8_MIN, INT8_MAX)
CLIP_LOOP(INT16, int16_t, INT16_MIN, INT16_MAX)
CLIP_LOOP(INT32, int32_t, INT32_MIN, INT32_MAX)
CLIP_LOOP(INT64, int64_t, INT64_MIN, INT64_MAX)
CLIP_LOOP(UINT8, uint8_t, 0, UINT8_MAX)
CLIP_LOOP(UINT16, uint16_t, 0, UINT16_MAX)
CLIP_LOOP(UINT32, uint32_t, 0, UINT32_MAX)
CLIP_LOOP(UINT64, uint64_t, 0, UINT64_MAX)

typedef struct clip_job {
    const kiln_kernel_args *a;
    const clip_state *s;
    kiln_dtype dt;
} clip_job;

static void clip_range(void *ctx, int64_t lo, int64_t hi)
{
    const clip_job *j = ctx;
    switch (j->dt) {
#define CASE(DT, T)                                                                                \
    case KILN_DT_##DT:                                                                             \
        clip_##DT(j->a, j->s, lo, hi);                                                             \
        break;
        CPU_FLOAT_TYPES(CASE)
        CPU_INT_TYPES(CASE)
#undef CASE
    default:
        break;
    }
}

CPU_KERNEL(cpu_clip)
{
    const clip_state *s = state;
    kiln_dtype dt = cpu_has_input(a, 0) ? a->inputs[0].dtype : KILN_DT_FLOAT32;
    kiln_status st = same_shape(a, dt, err);
    if (st != KILN_OK)
        return st;
    for (uint32_t k = 1; k < 3; k++)
        if (cpu_has_input(a, k) && a->inputs[k].dtype != dt)
            return cpu_fail(a, err, KILN_ERR_INVALID, "bound %u is %s, input %s", k,
                            kiln_dtype_name(a->inputs[k].dtype), kiln_dtype_name(dt));
    if ((unsigned)dt >= KILN_DT_COUNT || !((CPU_FLOAT_ANY | CPU_INTS) & (1u << dt)))
        return cpu_fail(a, err, KILN_ERR_UNSUPPORTED, "dtype %s not supported",
                        kiln_dtype_name(dt));
    clip_job j = {a, s, dt};
    cpu_par_for(cpu_numel(&a->inputs[0]), 1, clip_range, &j);
    return KILN_OK;
}

/* ---- Not ------------------------------------------------------------- */

CPU_KERNEL(cpu_not)
{
    (void)state;
    kiln_status st = same_shape(a, KILN_DT_BOOL, err);
    if (st != KILN_OK)
        return st;
    if (a->inputs[0].dtype != KILN_DT_BOOL)
        return cpu_fail(a, err, KILN_ERR_INVALID, "input is %s, not bool",
                        kiln_dtype_name(a->inputs[0].dtype));
    const uint8_t *x = a->inputs[0].data;
    uint8_t *y = a->outputs[0].data;
    int64_t n = cpu_numel(&a->inputs[0]);
    for (int64_t i = 0; i < n; i++)
        y[i] = !x[i];
    return KILN_OK;
}


/* ---- Cast ---------------------------------------------------------------- */

static float f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, x;
    if (e == 0) {
        float v = ldexpf((float)m, -24);
        return sign ? -v : v;
    }
    if (e == 31)
        x = sign | 0x7f800000u | (m << 13);
    else
        x = sign | ((e - 15 + 127) << 23) | (m << 13);
    float f;
    memcpy(&f, &x, 4);
    return f;
}

static uint16_t f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u, exp = (x >> 23) & 0xffu, m = x & 0x7fffffu;
    if (exp == 0xff)
        return (uint16_t)(sign | 0x7c00u | (m ? 0x200u : 0));
    int32_t e = (int32_t)exp - 127 + 15;
    if (e >= 31)
        return (uint16_t)(sign | 0x7c00u);
    if (e <= 0) { /* subnormal half, round to nearest even */
        if (e < -10)
            return (uint16_t)sign;
        m |= 0x800000u;
        uint32_t shift = (uint32_t)(14 - e), h = m >> shift, rem = m & ((1u << shift) - 1);
        uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1)))
            h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h = ((uint32_t)e << 10) | (m >> 13), rem = m & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1)))
        h++; /* a carry into the exponent gives the right result, up to inf */
    return (uint16_t)(sign | h);
}

static float bf16_to_f32(uint16_t h)
{
    uint32_t x = (uint32_t)h << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}

static uint16_t f32_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if (isnan(f))
        return (uint16_t)((x >> 16) | 0x40u);
    return (uint16_t)(x >> 16); /* truncation, as ONNX's reference (node tests) does */
}

#define CAST_CHUNK 256

/* Load elements [off, off+n) of @p t as doubles into @p d, or as int64 into @p l when given. */
static void load_chunk(const kiln_tensor *t, int64_t off, int64_t n, double *d, int64_t *l)
{
    switch (t->dtype) {
#define CASE(DT, T)                                                                        \
    case KILN_DT_##DT: {                                                                   \
        const T *p = (const T *)t->data + off;                                             \
        if (l)                                                                             \
            for (int64_t i = 0; i < n; i++)                                                \
                l[i] = (int64_t)p[i];                                                      \
        else                                                                               \
            for (int64_t i = 0; i < n; i++)                                                \
                d[i] = (double)p[i];                                                       \
        return;                                                                            \
    }
        CPU_FLOAT_TYPES(CASE)
        CPU_INT_TYPES(CASE)
        CASE(BOOL, uint8_t)
#undef CASE
    case KILN_DT_FLOAT16:
        for (int64_t i = 0; i < n; i++)
            d[i] = f16_to_f32(((const uint16_t *)t->data)[off + i]);
        return;
    case KILN_DT_BFLOAT16:
        for (int64_t i = 0; i < n; i++)
            d[i] = bf16_to_f32(((const uint16_t *)t->data)[off + i]);
        return;
    default: return;
    }
}

static void store_chunk(kiln_tensor *t, int64_t off, int64_t n, const double *d,
                        const int64_t *l)
{
    switch (t->dtype) {
#define CASE(DT, T)                                                                        \
    case KILN_DT_##DT: {                                                                   \
        T *p = (T *)t->data + off;                                                         \
        if (l)                                                                             \
            for (int64_t i = 0; i < n; i++)                                                \
                p[i] = (T)l[i];                                                            \
        else                                                                               \
            for (int64_t i = 0; i < n; i++)                                                \
                p[i] = (T)d[i];                                                            \
        return;                                                                            \
    }
        CPU_FLOAT_TYPES(CASE)
        CPU_INT_TYPES(CASE)
#undef CASE
    case KILN_DT_BOOL: {
        uint8_t *p = (uint8_t *)t->data + off;
        for (int64_t i = 0; i < n; i++)
            p[i] = l ? l[i] != 0 : d[i] != 0;
        return;
    }
    case KILN_DT_FLOAT16:
        for (int64_t i = 0; i < n; i++)
            ((uint16_t *)t->data)[off + i] = f32_to_f16((float)d[i]);
        return;
    case KILN_DT_BFLOAT16:
        for (int64_t i = 0; i < n; i++)
            ((uint16_t *)t->data)[off + i] = f32_to_bf16((float)d[i]);
        return;
    default: return;
    }
}

#define CAST_INTS (CPU_INTS | CPU_DT(BOOL))

CPU_KERNEL(cpu_cast)
{
    (void)state;
    if (!cpu_has_input(a, 0) || a->output_count < 1)
        return cpu_fail(a, err, KILN_ERR_INVALID, "input 0 or output 0 missing");
    const kiln_tensor *x = &a->inputs[0];
    kiln_tensor *y = &a->outputs[0];
    kiln_status st = same_shape(a, y->dtype, err);
    if (st != KILN_OK)
        return st;
    bool known = (unsigned)x->dtype < KILN_DT_COUNT && (unsigned)y->dtype < KILN_DT_COUNT;
    uint32_t from = known ? 1u << x->dtype : 0, to = known ? 1u << y->dtype : 0;
    if (!(from & CPU_CAST_TYPES) || !(to & CPU_CAST_TYPES))
        return cpu_fail(a, err, KILN_ERR_UNSUPPORTED, "cast %s -> %s not supported",
                        kiln_dtype_name(x->dtype), kiln_dtype_name(y->dtype));
    int64_t n = cpu_numel(x);
    if (x->dtype == y->dtype) {
        if (y->data != x->data && n)
            memmove(y->data, x->data, (size_t)n * kiln_dtype_size(x->dtype));
        return KILN_OK;
    }
    bool ints = (from & CAST_INTS) && (to & CAST_INTS);
    double d[CAST_CHUNK];
    int64_t l[CAST_CHUNK];
    for (int64_t off = 0; off < n; off += CAST_CHUNK) {
        int64_t m = n - off < CAST_CHUNK ? n - off : CAST_CHUNK;
        load_chunk(x, off, m, d, ints ? l : NULL);
        store_chunk(y, off, m, d, ints ? l : NULL);
    }
    return KILN_OK;
}

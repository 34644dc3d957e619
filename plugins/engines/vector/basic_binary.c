/*
 * basic_binary.c - binary and variadic elementwise kernels with numpy
 * multidirectional broadcasting: Add Sub Mul Div Pow, the comparisons Equal
 * GreaterOrEqual Greater Less (bool output), and the variadic Max Min Sum.
 *
 * One loop per op and dtype is stamped out by BIN_LOOP; each walks the
 * collapsed broadcast (cpu_iter) row by row, with branch-free inner loops for
 * the stride patterns (1,1), (1,0) and (0,1) and a strided fallback.
 * Integer arithmetic is two's complement and never traps (docs/cpu_engine.md):
 * Add, Sub, Mul (and Sum) wrap on overflow, as C's unsigned arithmetic and
 * ONNX Runtime on x86 do; Div truncates toward zero, x / 0 is 0 and
 * INT_MIN / -1 wraps to INT_MIN (the hardware would raise SIGFPE).  Pow takes any
 * numeric exponent type (ONNX T1); a scalar float exponent of 2, 0.5 or 1 on
 * float32 runs as a multiply, sqrtf or copy.
 */
#include "basic_ops.h"
#include "cpu_par.h"
#include "cpu_vexp.h"

#include <math.h>
#include <string.h>

typedef void (*bin_loop)(const cpu_iter *it, const void *a, const void *b, void *c, int64_t lo,
                         int64_t hi);

/* Position @p p on row @p row of the walk (what @p row calls of
 * cpu_iter_next() from row 0 would give). */
static void iter_seek(const cpu_iter *it, cpu_pos *p, int64_t row)
{
    memset(p, 0, sizeof(*p));
    for (int32_t d = (int32_t)it->rank - 2; d >= 0 && row > 0; d--) {
        p->idx[d] = row % it->dims[d];
        row /= it->dims[d];
        for (uint32_t k = 0; k < it->nin; k++)
            p->off[k] += p->idx[d] * it->str[k][d];
    }
}

#define BIN_LOOP_A(ATTR, fname, TA, TB, TO, EXPR)                                                  \
    ATTR static void fname(const cpu_iter *it, const void *va, const void *vb, void *vc, int64_t lo,    \
                      int64_t hi)                                                                  \
    {                                                                                              \
        const TA *a = va;                                                                          \
        const TB *b = vb;                                                                          \
        TO *c = (TO *)vc + lo;                                                                     \
        const int64_t n = it->cols;                                                                \
        const int64_t sa = it->str[0][it->rank - 1], sb = it->str[1][it->rank - 1];                \
        cpu_pos p;                                                                                 \
        iter_seek(it, &p, lo / n);                                                                 \
        for (int64_t i0 = lo % n; lo < hi; lo += n - i0, i0 = 0) {                                 \
            const int64_t i1 = hi - lo < n - i0 ? i0 + (hi - lo) : n;                              \
            const TA *xa = a + p.off[0];                                                           \
            const TB *xb = b + p.off[1];                                                           \
            c -= i0;                                                                               \
            if (sa == 1 && sb == 1) {                                                              \
                for (int64_t i = i0; i < i1; i++) {                                                \
                    TA X = xa[i];                                                                  \
                    TB Y = xb[i];                                                                  \
                    c[i] = (TO)(EXPR);                                                             \
                }                                                                                  \
            } else if (sa == 1 && sb == 0) {                                                       \
                const TB Y = xb[0];                                                                \
                for (int64_t i = i0; i < i1; i++) {                                                \
                    TA X = xa[i];                                                                  \
                    c[i] = (TO)(EXPR);                                                             \
                }                                                                                  \
            } else if (sa == 0 && sb == 1) {                                                       \
                const TA X = xa[0];                                                                \
                for (int64_t i = i0; i < i1; i++) {                                                \
                    TB Y = xb[i];                                                                  \
                    c[i] = (TO)(EXPR);                                                             \
                }                                                                                  \
            } else {                                                                               \
                for (int64_t i = i0; i < i1; i++) {                                                \
                    TA X = xa[i * sa];                                                             \
                    TB Y = xb[i * sb];                                                             \
                    c[i] = (TO)(EXPR);                                                             \
                }                                                                                  \
            }                                                                                      \
            c += i1;                                                                               \
            cpu_iter_next(it, &p);                                                                 \
        }                                                                                          \
    }

#define BIN_LOOP(fname, TA, TB, TO, EXPR) BIN_LOOP_A(, fname, TA, TB, TO, EXPR)

/* One binary walk shared out over the output's elements (cpu_par_for): each
 * element is computed alone, so any split gives the serial bytes. */
typedef struct bin_job {
    bin_loop loop;
    const cpu_iter *it;
    const void *a, *b;
    void *c;
} bin_job;

static void bin_range(void *ctx, int64_t lo, int64_t hi)
{
    const bin_job *j = ctx;
    j->loop(j->it, j->a, j->b, j->c, lo, hi);
}

static void bin_run(bin_loop loop, const cpu_iter *it, const void *a, const void *b, void *c,
                    int64_t cost)
{
    bin_job j = {loop, it, a, b, c};
    cpu_par_for(it->rows * it->cols, cost, bin_range, &j);
}

#define E_ADD (X + Y)
#define E_SUB (X - Y)
#define E_MUL (X * Y)
#define E_FDIV (X / Y)
/* integers: computed in uint64_t, so overflow wraps instead of being undefined */
#define E_IADD ((uint64_t)X + (uint64_t)Y)
#define E_ISUB ((uint64_t)X - (uint64_t)Y)
#define E_IMUL ((uint64_t)X * (uint64_t)Y)
#define E_SDIV (Y == 0 ? 0 : Y == -1 ? UINT64_C(0) - (uint64_t)X : (uint64_t)(X / Y))
#define E_UDIV (Y == 0 ? 0 : X / Y)
#define E_MAX (X >= Y ? X : Y)
#define E_MIN (X <= Y ? X : Y)
#define E_EQ (X == Y)
#define E_GE (X >= Y)
#define E_GT (X > Y)
#define E_LT (X < Y)

/* Same-type arithmetic loops: op_<DT>. */
#define ARITH(op, DT, T, EXPR) BIN_LOOP(op##_##DT, T, T, T, EXPR)
/* float arithmetic: one clone per SIMD width, the widest the CPU has picked
 * at load (CPU_VEC_CLONES, cpu_vexp.h); the same IEEE operations in every
 * clone, so the bytes do not depend on the machine */
#define F_ARITH1(op, DT, T, EXPR) BIN_LOOP_A(CPU_VEC_CLONES, op##_##DT, T, T, T, EXPR)
#define CMP(op, DT, T, EXPR) BIN_LOOP(op##_##DT, T, T, uint8_t, EXPR)

#define F_ARITH(DT, T)                                                                     \
    F_ARITH1(add, DT, T, E_ADD)                                                            \
    F_ARITH1(sub, DT, T, E_SUB)                                                            \
    F_ARITH1(mul, DT, T, E_MUL)                                                            \
    F_ARITH1(div, DT, T, E_FDIV)                                                           \
    F_ARITH1(max, DT, T, E_MAX)                                                            \
    F_ARITH1(min, DT, T, E_MIN)
#define I_ARITH(DT, T)                                                                     \
    ARITH(add, DT, T, E_IADD)                                                              \
    ARITH(sub, DT, T, E_ISUB)                                                              \
    ARITH(mul, DT, T, E_IMUL)                                                              \
    ARITH(max, DT, T, E_MAX)                                                               \
    ARITH(min, DT, T, E_MIN)
#define S_DIV(DT, T) ARITH(div, DT, T, E_SDIV)
#define U_DIV(DT, T) ARITH(div, DT, T, E_UDIV)
#define CPU_UNSIGNED_INT_TYPES(X)                                                          \
    X(UINT8, uint8_t) X(UINT16, uint16_t) X(UINT32, uint32_t) X(UINT64, uint64_t)
#define ALL_CMP(DT, T)                                                                     \
    CMP(eq, DT, T, E_EQ)                                                                   \
    CMP(ge, DT, T, E_GE)                                                                   \
    CMP(gt, DT, T, E_GT)                                                                   \
    CMP(lt, DT, T, E_LT)

CPU_FLOAT_TYPES(F_ARITH)
CPU_INT_TYPES(I_ARITH)
CPU_SIGNED_INT_TYPES(S_DIV)
CPU_UNSIGNED_INT_TYPES(U_DIV)
CPU_FLOAT_TYPES(ALL_CMP)
CPU_INT_TYPES(ALL_CMP)
CMP(eq, BOOL, uint8_t, E_EQ)

#define ENTRY(op, DT) [KILN_DT_##DT] = op##_##DT,
#define TABLE(op)                                                                          \
    static const bin_loop op##_loops[KILN_DT_COUNT] = {                                    \
        ENTRY(op, FLOAT32) ENTRY(op, FLOAT64) ENTRY(op, INT8) ENTRY(op, INT16)             \
            ENTRY(op, INT32) ENTRY(op, INT64) ENTRY(op, UINT8) ENTRY(op, UINT16)           \
                ENTRY(op, UINT32) ENTRY(op, UINT64)};

TABLE(add)
TABLE(sub)
TABLE(mul)
TABLE(div)
TABLE(max)
TABLE(min)
TABLE(ge)
TABLE(gt)
TABLE(lt)
static const bin_loop eq_loops[KILN_DT_COUNT] = {
    ENTRY(eq, FLOAT32) ENTRY(eq, FLOAT64) ENTRY(eq, INT8) ENTRY(eq, INT16) ENTRY(eq, INT32)
        ENTRY(eq, INT64) ENTRY(eq, UINT8) ENTRY(eq, UINT16) ENTRY(eq, UINT32) ENTRY(eq, UINT64)
            ENTRY(eq, BOOL)};

static kiln_status check_output(const kiln_kernel_args *a, kiln_dtype want, kiln_error *err)
{
    if (a->output_count < 1 || !a->outputs[0].data)
        return cpu_fail(a, err, KILN_ERR_INVALID, "output 0 missing");
    const kiln_tensor *o = &a->outputs[0];
    if (o->dtype != want)
        return cpu_fail(a, err, KILN_ERR_INVALID, "output dtype %s, expected %s",
                        kiln_dtype_name(o->dtype), kiln_dtype_name(want));
    if (o->rank > CPU_MAX_RANK)
        return cpu_fail(a, err, KILN_ERR_UNSUPPORTED, "rank %u above %d", o->rank,
                        CPU_MAX_RANK);
    return cpu_check_out_bytes(a, 0, (size_t)cpu_numel(o) * kiln_dtype_size(want), err);
}

static kiln_status binary(const kiln_kernel_args *a, kiln_error *err, const bin_loop *loops,
                          bool to_bool)
{
    if (!cpu_has_input(a, 0) || !cpu_has_input(a, 1))
        return cpu_fail(a, err, KILN_ERR_INVALID, "needs 2 inputs");
    const kiln_tensor *x = &a->inputs[0], *y = &a->inputs[1];
    if (x->dtype != y->dtype)
        return cpu_fail(a, err, KILN_ERR_INVALID, "input dtypes differ (%s, %s)",
                        kiln_dtype_name(x->dtype), kiln_dtype_name(y->dtype));
    bin_loop loop = (unsigned)x->dtype < KILN_DT_COUNT ? loops[x->dtype] : NULL;
    if (!loop)
        return cpu_fail(a, err, KILN_ERR_UNSUPPORTED, "dtype %s not supported",
                        kiln_dtype_name(x->dtype));
    kiln_status st = check_output(a, to_bool ? KILN_DT_BOOL : x->dtype, err);
    if (st != KILN_OK)
        return st;
    cpu_iter it;
    const kiln_tensor *ins[2] = {x, y};
    if ((st = cpu_iter_init(&it, ins, 2, &a->outputs[0], a, err)) != KILN_OK)
        return st;
    bin_run(loop, &it, x->data, y->data, a->outputs[0].data, 1);
    return KILN_OK;
}

/* Broadcast-copy @p src into @p dst (elements of @p es bytes). */
static void bcast_copy(const cpu_iter *it, const void *src, void *dst, size_t es)
{
    cpu_pos p;
    memset(&p, 0, sizeof(p));
    const int64_t n = it->cols, s = it->str[0][it->rank - 1];
    const char *in = src;
    char *out = dst;
    for (int64_t r = 0; r < it->rows; r++, out += (size_t)n * es) {
        const char *row = in + (size_t)p.off[0] * es;
        if (s == 1) {
            memcpy(out, row, (size_t)n * es);
        } else {
            for (int64_t i = 0; i < n; i++)
                memcpy(out + (size_t)i * es, row + (size_t)(i * s) * es, es);
        }
        cpu_iter_next(it, &p);
    }
}

/* Max/Min/Sum: fold the inputs pairwise into the output. */
static kiln_status variadic(const kiln_kernel_args *a, kiln_error *err, const bin_loop *loops)
{
    if (!cpu_has_input(a, 0))
        return cpu_fail(a, err, KILN_ERR_INVALID, "needs at least 1 input");
    kiln_dtype dt = a->inputs[0].dtype;
    for (uint32_t k = 1; k < a->input_count; k++)
        if (!cpu_has_input(a, k) || a->inputs[k].dtype != dt)
            return cpu_fail(a, err, KILN_ERR_INVALID, "input %u missing or not %s", k,
                            kiln_dtype_name(dt));
    if (a->input_count == 2)
        return binary(a, err, loops, false);
    bin_loop loop = (unsigned)dt < KILN_DT_COUNT ? loops[dt] : NULL;
    if (!loop)
        return cpu_fail(a, err, KILN_ERR_UNSUPPORTED, "dtype %s not supported",
                        kiln_dtype_name(dt));
    kiln_status st = check_output(a, dt, err);
    if (st != KILN_OK)
        return st;
    kiln_tensor *out = &a->outputs[0];
    cpu_iter it;
    const kiln_tensor *first[1] = {&a->inputs[0]};
    if ((st = cpu_iter_init(&it, first, 1, out, a, err)) != KILN_OK)
        return st;
    if (out->data != a->inputs[0].data)
        bcast_copy(&it, a->inputs[0].data, out->data, kiln_dtype_size(dt));
    for (uint32_t k = 1; k < a->input_count; k++) {
        const kiln_tensor *pair[2] = {out, &a->inputs[k]};
        if ((st = cpu_iter_init(&it, pair, 2, out, a, err)) != KILN_OK)
            return st;
        bin_run(loop, &it, out->data, a->inputs[k].data, out->data, 1);
    }
    return KILN_OK;
}

CPU_KERNEL(cpu_add)
{
    (void)state;
    return binary(a, err, add_loops, false);
}

CPU_KERNEL(cpu_sub)
{
    (void)state;
    return binary(a, err, sub_loops, false);
}

CPU_KERNEL(cpu_mul)
{
    (void)state;
    return binary(a, err, mul_loops, false);
}

CPU_KERNEL(cpu_div)
{
    (void)state;
    return binary(a, err, div_loops, false);
}

CPU_KERNEL(cpu_equal)
{
    (void)state;
    return binary(a, err, eq_loops, true);
}

CPU_KERNEL(cpu_greater_or_equal)
{
    (void)state;
    return binary(a, err, ge_loops, true);
}

CPU_KERNEL(cpu_greater)
{
    (void)state;
    return binary(a, err, gt_loops, true);
}

CPU_KERNEL(cpu_less)
{
    (void)state;
    return binary(a, err, lt_loops, true);
}

CPU_KERNEL(cpu_max)
{
    (void)state;
    return variadic(a, err, max_loops);
}

CPU_KERNEL(cpu_min)
{
    (void)state;
    return variadic(a, err, min_loops);
}

CPU_KERNEL(cpu_sum)
{
    (void)state;
    return variadic(a, err, add_loops);
}

/* ---- Pow ----------------------------------------------------------------- */

BIN_LOOP(pow_ff, float, float, float, powf(X, Y))
BIN_LOOP(pow_f32, float, double, float, pow((double)X, Y))
BIN_LOOP(pow_f64, double, double, double, pow(X, Y))
BIN_LOOP(pow_i32, int32_t, double, int32_t, pow((double)X, Y))
BIN_LOOP(pow_i64, int64_t, double, int64_t, pow((double)X, Y))

/* Element @p i of a numeric tensor as a double. */
static double as_double(const kiln_tensor *t, int64_t i)
{
    switch (t->dtype) {
#define CASE(DT, T) \
    case KILN_DT_##DT: return (double)((const T *)t->data)[i];
        CPU_FLOAT_TYPES(CASE)
        CPU_INT_TYPES(CASE)
#undef CASE
    default: return NAN;
    }
}

/* float32 base, one float exponent: the common x^2 / sqrt forms. */
static void pow_scalar_f32(const float *x, float *y, int64_t n, double e)
{
    if (e == 2.0) {
        for (int64_t i = 0; i < n; i++)
            y[i] = x[i] * x[i];
    } else if (e == 0.5) {
        for (int64_t i = 0; i < n; i++)
            y[i] = sqrtf(x[i]);
    } else if (e == 1.0) {
        if (x != y)
            memmove(y, x, (size_t)n * sizeof(float));
    } else {
        float fe = (float)e;
        for (int64_t i = 0; i < n; i++)
            y[i] = powf(x[i], fe);
    }
}

CPU_KERNEL(cpu_pow)
{
    (void)state;
    if (!cpu_has_input(a, 0) || !cpu_has_input(a, 1))
        return cpu_fail(a, err, KILN_ERR_INVALID, "needs 2 inputs");
    const kiln_tensor *x = &a->inputs[0], *y = &a->inputs[1];
    bin_loop loop = NULL;
    switch (x->dtype) {
    case KILN_DT_FLOAT32: loop = y->dtype == KILN_DT_FLOAT32 ? pow_ff : pow_f32; break;
    case KILN_DT_FLOAT64: loop = pow_f64; break;
    case KILN_DT_INT32: loop = pow_i32; break;
    case KILN_DT_INT64: loop = pow_i64; break;
    default:
        return cpu_fail(a, err, KILN_ERR_UNSUPPORTED, "base dtype %s not supported",
                        kiln_dtype_name(x->dtype));
    }
    if ((unsigned)y->dtype >= KILN_DT_COUNT || !((CPU_FLOAT_ANY | CPU_INTS) & (1u << y->dtype)))
        return cpu_fail(a, err, KILN_ERR_UNSUPPORTED, "exponent dtype %s not supported",
                        kiln_dtype_name(y->dtype));
    kiln_status st = check_output(a, x->dtype, err);
    if (st != KILN_OK)
        return st;
    kiln_tensor *out = &a->outputs[0];
    int64_t ny = cpu_numel(y), nout = cpu_numel(out);
    if (x->dtype == KILN_DT_FLOAT32 && ny == 1 && cpu_numel(x) == nout) {
        pow_scalar_f32(x->data, out->data, nout, as_double(y, 0));
        return KILN_OK;
    }
    cpu_iter it;
    const kiln_tensor *ins[2] = {x, y};
    if ((st = cpu_iter_init(&it, ins, 2, out, a, err)) != KILN_OK)
        return st;
    if (loop == pow_ff || y->dtype == KILN_DT_FLOAT64) {
        bin_run(loop, &it, x->data, y->data, out->data, 8);
        return KILN_OK;
    }
    /* Other exponent types: widen them once to double (scratch per call). */
    double *yd = kiln_alloc((size_t)(ny ? ny : 1) * sizeof(double));
    if (!yd)
        return cpu_fail(a, err, KILN_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < ny; i++)
        yd[i] = as_double(y, i);
    bin_run(loop, &it, x->data, yd, out->data, 8);
    kiln_free(yd);
    return KILN_OK;
}

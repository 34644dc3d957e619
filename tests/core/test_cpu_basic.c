/*
 * test_cpu_basic.c - the basic kernels of the vector and host-CPU engines
 * (plugins/engines/vector/basic_*.c, hostcpu/basic_*.c) through the real
 * plugins: libkiln_vector.so, libkiln_hostcpu.so and libkiln_rts.so are
 * loaded, kernels are bound to one-node graphs with kiln_engine_kernel (engine
 * choice by op table and output dtype, checked against the owning engine) and run on hand-made tensors.  Expected values are exact
 * (computed by hand or by an obvious loop), per attribute form and opset:
 * elementwise with broadcasting, activations, Clip, Cast, reductions and
 * Softmax; then the shape and data-movement ops (Shape Size Reshape Flatten
 * Squeeze Unsqueeze ConstantOfShape Transpose Concat Gather Slice Pad), plus
 * the errors a wrong output shape or an out-of-range index gives.
 */
#include "kiln_test.h"
#include "graph_int.h"
#include "plugin.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct cpu_fx {
    kiln_ctx *ctx;
    kiln_graph *g;
    kiln_error err;
    uint32_t seq;
} cpu_fx;

#define ASSERT_F32(got, want, count, tol)                                                          \
    do {                                                                                           \
        for (size_t i_ = 0; i_ < (size_t)(count); i_++)                                            \
            if (!(fabs((double)(got)[i_] - (double)(want)[i_]) <= (tol))) { /* NaN fails */        \
                fprintf(stderr, "  [%zu] got %.9g want %.9g\n", i_, (double)(got)[i_],             \
                        (double)(want)[i_]);                                                       \
                CU_FAIL("value mismatch");                                                         \
                break;                                                                             \
            }                                                                                      \
    } while (0)
/* Compare @p got with the array (or compound literal) @p want, all its bytes. */
#define ASSERT_MEM(got, want) CU_ASSERT(memcmp((got), (want), sizeof(want)) == 0)

static void cpu_fx_open(cpu_fx *f, const char *opset)
{
    memset(f, 0, sizeof(*f));
    kiln_error_clear(&f->err);
    f->ctx = kiln_ctx_create();
    static const char *const engines[] = {"libkiln_vector.so", "libkiln_hostcpu.so",
                                          "libkiln_rts.so"};
    for (unsigned i = 0; i < sizeof(engines) / sizeof(engines[0]); i++)
        CU_ASSERT_EQUAL_FATAL(kiln_test_load_plugin(f->ctx, engines[i], &f->err), KILN_OK);
    f->g = kiln_graph_create(f->ctx, "g");
    if (opset) {
        const char *v[1] = {opset};
        kiln_attrs_set_list_string(kiln_graph_attrs(f->g), "onnx_opset_import", v, 1);
    }
}

static void cpu_fx_close(cpu_fx *f)
{
    kiln_graph_destroy(f->g);
    kiln_ctx_destroy(f->ctx);
}

static kiln_node_id cpu_fx_node(cpu_fx *f, const char *op, uint32_t nin, kiln_dtype dt)
{
    char name[64];
    snprintf(name, sizeof(name), "%s_%u", op, ++f->seq);
    kiln_node_id n = kiln_graph_add_node(f->g, name, op, nin, 1);
    kiln_desc_set_dtype(f->g, kiln_node_output_desc(f->g, n, 0), dt);
    return n;
}

static kiln_attrs *cpu_fx_attrs(cpu_fx *f, kiln_node_id n) { return kiln_node_attrs_mut(f->g, n); }

static kiln_tensor cpu_fx_tensor(kiln_dtype dt, uint32_t rank, const int64_t *dims, void *data)
{
    size_t n = 1;
    for (uint32_t d = 0; d < rank; d++)
        n *= (size_t)dims[d];
    kiln_tensor t = {dt, rank, dims, data, n * kiln_dtype_size(dt)};
    return t;
}

/* The engine that owns @p op (docs/engines.md): shape and data movement on the
 * host CPU, copies on rts, the rest (element-wise, reductions) on vector. */
static const char *want_engine(const char *op)
{
    static const char *const host[] = {"Shape", "Size", "Reshape", "Flatten", "Squeeze",
                                       "Unsqueeze", "ConstantOfShape", "Transpose", "Concat",
                                       "Gather", "Slice", "Pad", "Identity"};
    for (unsigned i = 0; i < sizeof(host) / sizeof(host[0]); i++)
        if (strcmp(op, host[i]) == 0)
            return "hostcpu";
    return strncmp(op, "Memcpy", 6) == 0 ? "rts" : "vector";
}

static kiln_status cpu_fx_run(cpu_fx *f, kiln_node_id n, const kiln_tensor *ins, uint32_t nin,
                              kiln_tensor *out)
{
    kiln_kernel_fn fn;
    void *state;
    const char *engine = NULL;
    kiln_error_clear(&f->err);
    kiln_status st = kiln_engine_kernel(f->g, n, &fn, &state, &engine, &f->err);
    if (st != KILN_OK)
        return st;
    CU_ASSERT_STRING_EQUAL(engine, want_engine(kiln_node_op_str(f->g, n)));
    kiln_kernel_args a = {sizeof(a), f->g, n, nin, 1, ins, out, NULL, 0, 1};
    st = fn(state, &a, &f->err);
    kiln_engine_kernel_release(f->g, engine, state);
    return st;
}

/* One binary float op on [2,3] and an input of shape @p bd. */
static void check_binary_f32(cpu_fx *f, const char *op, const int64_t *bd, uint32_t br, float *b,
                             const float *want)
{
    static const int64_t ad[] = {2, 3};
    float av[] = {1, 2, 3, 4, 5, 6}, y[6];
    kiln_tensor in[2] = {cpu_fx_tensor(KILN_DT_FLOAT32, 2, ad, av),
                         cpu_fx_tensor(KILN_DT_FLOAT32, br, bd, b)};
    kiln_tensor out = cpu_fx_tensor(KILN_DT_FLOAT32, 2, ad, y);
    CU_ASSERT_EQUAL(cpu_fx_run(f, cpu_fx_node(f, op, 2, KILN_DT_FLOAT32), in, 2, &out), KILN_OK);
    ASSERT_F32(y, want, 6, 0);
}

static void test_binary_broadcast(void)
{
    cpu_fx f;
    cpu_fx_open(&f, NULL);
    float row[] = {10, 20, 30}, col[] = {100, 200}, sc[] = {2};
    static const int64_t d3[] = {3}, d21[] = {2, 1}, d0[] = {1};
    check_binary_f32(&f, "Add", d3, 1, row, (float[]){11, 22, 33, 14, 25, 36});
    check_binary_f32(&f, "Sub", d21, 2, col, (float[]){-99, -98, -97, -196, -195, -194});
    check_binary_f32(&f, "Mul", d0, 0, sc, (float[]){2, 4, 6, 8, 10, 12});
    check_binary_f32(&f, "Div", d0, 1, sc, (float[]){0.5f, 1, 1.5f, 2, 2.5f, 3});
    check_binary_f32(&f, "Max", d3, 1, (float[]){2, 0, 5}, (float[]){2, 2, 5, 4, 5, 6});
    /* [2,1,3] + [4,1]: both sides broadcast -> [2,4,3], checked by a loop */
    static const int64_t ad[] = {2, 1, 3}, bd[] = {4, 1}, od[] = {2, 4, 3};
    float a[6] = {1, 2, 3, 4, 5, 6}, b[4] = {10, 20, 30, 40}, y[24], want[24];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 4; j++)
            for (int k = 0; k < 3; k++)
                want[(i * 4 + j) * 3 + k] = a[i * 3 + k] + b[j];
    kiln_tensor in[2] = {cpu_fx_tensor(KILN_DT_FLOAT32, 3, ad, a),
                         cpu_fx_tensor(KILN_DT_FLOAT32, 2, bd, b)};
    kiln_tensor out = cpu_fx_tensor(KILN_DT_FLOAT32, 3, od, y);
    CU_ASSERT_EQUAL(cpu_fx_run(&f, cpu_fx_node(&f, "Add", 2, KILN_DT_FLOAT32), in, 2, &out),
                    KILN_OK);
    ASSERT_F32(y, want, 24, 0);
    /* transposed-stride case: [3,1] op [1,3] -> [3,3] */
    static const int64_t c31[] = {3, 1}, c13[] = {1, 3}, c33[] = {3, 3};
    float p[3] = {1, 2, 3}, q[3] = {10, 20, 30}, z[9];
    kiln_tensor in2[2] = {cpu_fx_tensor(KILN_DT_FLOAT32, 2, c31, p),
                          cpu_fx_tensor(KILN_DT_FLOAT32, 2, c13, q)};
    kiln_tensor out2 = cpu_fx_tensor(KILN_DT_FLOAT32, 2, c33, z);
    CU_ASSERT_EQUAL(cpu_fx_run(&f, cpu_fx_node(&f, "Sub", 2, KILN_DT_FLOAT32), in2, 2, &out2),
                    KILN_OK);
    ASSERT_F32(z, ((float[]){-9, -19, -29, -8, -18, -28, -7, -17, -27}), 9, 0);
    /* shapes that do not broadcast, dtypes that differ */
    static const int64_t d2[] = {2};
    kiln_tensor bad[2] = {cpu_fx_tensor(KILN_DT_FLOAT32, 2, c33, z),
                          cpu_fx_tensor(KILN_DT_FLOAT32, 1, d2, p)};
    CU_ASSERT_EQUAL(cpu_fx_run(&f, cpu_fx_node(&f, "Add", 2, KILN_DT_FLOAT32), bad, 2, &out2),
                    KILN_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(f.err.msg, "does not broadcast"));
    cpu_fx_close(&f);
}

static void test_binary_ints_and_compare(void)
{
    cpu_fx f;
    cpu_fx_open(&f, NULL);
    static const int64_t d4[] = {4}, d1[] = {1};
    int64_t a[4] = {7, -7, 9, 0}, b[1] = {2}, y[4];
    kiln_tensor in[2] = {cpu_fx_tensor(KILN_DT_INT64, 1, d4, a),
                         cpu_fx_tensor(KILN_DT_INT64, 1, d1, b)};
    kiln_tensor out = cpu_fx_tensor(KILN_DT_INT64, 1, d4, y);
    CU_ASSERT_EQUAL(cpu_fx_run(&f, cpu_fx_node(&f, "Div", 2, KILN_DT_INT64), in, 2, &out), KILN_OK);
    ASSERT_MEM(y, ((int64_t[]){3, -3, 4, 0}));
    CU_ASSERT_EQUAL(cpu_fx_run(&f, cpu_fx_node(&f, "Sub", 2, KILN_DT_INT64), in, 2, &out), KILN_OK);
    ASSERT_MEM(y, ((int64_t[]){5, -9, 7, -2}));
    int32_t ia[4] = {5, 6, 7, 8}, ib[4] = {0, 2, -1, 3}, iy[4];
    kiln_tensor in32[2] = {cpu_fx_tensor(KILN_DT_INT32, 1, d4, ia),
                           cpu_fx_tensor(KILN_DT_INT32, 1, d4, ib)};
    kiln_tensor out32 = cpu_fx_tensor(KILN_DT_INT32, 1, d4, iy);
    CU_ASSERT_EQUAL(cpu_fx_run(&f, cpu_fx_node(&f, "Div", 2, KILN_DT_INT32), in32, 2, &out32),
                    KILN_OK);
    ASSERT_MEM(iy, ((int32_t[]){0, 3, -7, 2})); /* x/0 gives 0, never a trap */
    uint8_t bo[4];
    kiln_tensor outb = cpu_fx_tensor(KILN_DT_BOOL, 1, d4, bo);
    int64_t e[1] = {-7};
    kiln_tensor ineq[2] = {cpu_fx_tensor(KILN_DT_INT64, 1, d4, a),
                           cpu_fx_tensor(KILN_DT_INT64, 1, d1, e)};
    CU_ASSERT_EQUAL(cpu_fx_run(&f, cpu_fx_node(&f, "Equal", 2, KILN_DT_BOOL), ineq, 2, &outb),
                    KILN_OK);
    ASSERT_MEM(bo, ((uint8_t[]){0, 1, 0, 0}));
    float fa[4] = {1, 2, 3, 4}, fb[1] = {3};
    kiln_tensor inge[2] = {cpu_fx_tensor(KILN_DT_FLOAT32, 1, d4, fa),
                           cpu_fx_tensor(KILN_DT_FLOAT32, 1, d1, fb)};
    CU_ASSERT_EQUAL(
        cpu_fx_run(&f, cpu_fx_node(&f, "GreaterOrEqual", 2, KILN_DT_BOOL), inge, 2, &outb),
        KILN_OK);
    ASSERT_MEM(bo, ((uint8_t[]){0, 0, 1, 1}));
    uint8_t ba[4] = {1, 0, 1, 0}, bb[4] = {1, 1, 0, 0};
    kiln_tensor inbb[2] = {cpu_fx_tensor(KILN_DT_BOOL, 1, d4, ba),
                           cpu_fx_tensor(KILN_DT_BOOL, 1, d4, bb)};
    CU_ASSERT_EQUAL(cpu_fx_run(&f, cpu_fx_node(&f, "Equal", 2, KILN_DT_BOOL), inbb, 2, &outb),
                    KILN_OK);
    ASSERT_MEM(bo, ((uint8_t[]){1, 0, 0, 1}));
    /* mixed dtypes are refused with the node named */
    kiln_tensor mixed[2] = {cpu_fx_tensor(KILN_DT_FLOAT32, 1, d4, fa),
                            cpu_fx_tensor(KILN_DT_INT64, 1, d1, b)};
    kiln_tensor outf = cpu_fx_tensor(KILN_DT_FLOAT32, 1, d4, fa);
    CU_ASSERT_EQUAL(cpu_fx_run(&f, cpu_fx_node(&f, "Add", 2, KILN_DT_FLOAT32), mixed, 2, &outf),
                    KILN_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(f.err.msg, "Add node Add_"));
    cpu_fx_close(&f);
}

/* Integer edge cases have defined results and never trap (docs/cpu_engine.md):
 * INT_MIN / -1 and -INT_MIN wrap to INT_MIN (x86 idiv raises SIGFPE on the
 * former), x / 0 is 0, Add/Sub/Mul wrap modulo 2^N (signed overflow is
 * undefined in C: the sanitizer build reports it). */
static void test_integer_edge_cases(void)
{
    cpu_fx f;
    cpu_fx_open(&f, NULL);
    static const int64_t d4[] = {4};
    int32_t a[4] = {INT32_MIN, INT32_MIN, INT32_MAX, -7}, b[4] = {-1, 0, 1, -1}, y[4];
    kiln_tensor in[2] = {cpu_fx_tensor(KILN_DT_INT32, 1, d4, a),
                         cpu_fx_tensor(KILN_DT_INT32, 1, d4, b)};
    kiln_tensor out = cpu_fx_tensor(KILN_DT_INT32, 1, d4, y);
    CU_ASSERT_EQUAL(cpu_fx_run(&f, cpu_fx_node(&f, "Div", 2, KILN_DT_INT32), in, 2, &out), KILN_OK);
    ASSERT_MEM(y, ((int32_t[]){INT32_MIN, 0, INT32_MAX, 7}));
    CU_ASSERT_EQUAL(cpu_fx_run(&f, cpu_fx_node(&f, "Add", 2, KILN_DT_INT32), in, 2, &out), KILN_OK);
    ASSERT_MEM(y, ((int32_t[]){INT32_MAX, INT32_MIN, INT32_MIN, -8}));
    CU_ASSERT_EQUAL(cpu_fx_run(&f, cpu_fx_node(&f, "Sub", 2, KILN_DT_INT32), in, 2, &out), KILN_OK);
    ASSERT_MEM(y, ((int32_t[]){INT32_MIN + 1, INT32_MIN, INT32_MAX - 1, -6}));
    CU_ASSERT_EQUAL(cpu_fx_run(&f, cpu_fx_node(&f, "Mul", 2, KILN_DT_INT32), in, 2, &out), KILN_OK);
    ASSERT_MEM(y, ((int32_t[]){INT32_MIN, 0, INT32_MAX, 7}));
    kiln_tensor neg_in = cpu_fx_tensor(KILN_DT_INT32, 1, d4, a);
    CU_ASSERT_EQUAL(cpu_fx_run(&f, cpu_fx_node(&f, "Neg", 1, KILN_DT_INT32), &neg_in, 1, &out),
                    KILN_OK);
    ASSERT_MEM(y, ((int32_t[]){INT32_MIN, INT32_MIN, -INT32_MAX, 7}));
    int64_t la[2] = {INT64_MIN, INT64_MAX}, lb[2] = {-1, 2}, ly[2];
    static const int64_t d2[] = {2};
    kiln_tensor in64[2] = {cpu_fx_tensor(KILN_DT_INT64, 1, d2, la),
                           cpu_fx_tensor(KILN_DT_INT64, 1, d2, lb)};
    kiln_tensor out64 = cpu_fx_tensor(KILN_DT_INT64, 1, d2, ly);
    CU_ASSERT_EQUAL(cpu_fx_run(&f, cpu_fx_node(&f, "Div", 2, KILN_DT_INT64), in64, 2, &out64),
                    KILN_OK);
    ASSERT_MEM(ly, ((int64_t[]){INT64_MIN, INT64_MAX / 2}));
    CU_ASSERT_EQUAL(cpu_fx_run(&f, cpu_fx_node(&f, "Mul", 2, KILN_DT_INT64), in64, 2, &out64),
                    KILN_OK);
    ASSERT_MEM(ly, ((int64_t[]){INT64_MIN, -2}));
    int8_t ca[2] = {INT8_MIN, 5}, cb[2] = {-1, -1}, cy[2];
    kiln_tensor in8[2] = {cpu_fx_tensor(KILN_DT_INT8, 1, d2, ca),
                          cpu_fx_tensor(KILN_DT_INT8, 1, d2, cb)};
    kiln_tensor out8 = cpu_fx_tensor(KILN_DT_INT8, 1, d2, cy);
    CU_ASSERT_EQUAL(cpu_fx_run(&f, cpu_fx_node(&f, "Div", 2, KILN_DT_INT8), in8, 2, &out8),
                    KILN_OK);
    ASSERT_MEM(cy, ((int8_t[]){INT8_MIN, -5}));
    uint32_t ua[2] = {UINT32_MAX, 7}, ub[2] = {UINT32_MAX, 0}, uy[2];
    kiln_tensor inu[2] = {cpu_fx_tensor(KILN_DT_UINT32, 1, d2, ua),
                          cpu_fx_tensor(KILN_DT_UINT32, 1, d2, ub)};
    kiln_tensor outu = cpu_fx_tensor(KILN_DT_UINT32, 1, d2, uy);
    CU_ASSERT_EQUAL(cpu_fx_run(&f, cpu_fx_node(&f, "Div", 2, KILN_DT_UINT32), inu, 2, &outu),
                    KILN_OK);
    ASSERT_MEM(uy, ((uint32_t[]){1, 0}));
    cpu_fx_close(&f);
}

static void test_variadic_max_and_pow(void)
{
    cpu_fx f;
    cpu_fx_open(&f, NULL);
    static const int64_t d3[] = {3}, d1[] = {1}, d23[] = {2, 3};
    float a[3] = {1, 5, 3}, b[1] = {2}, c[6] = {0, 0, 4, 9, 1, 1}, y[6];
    kiln_tensor in[3] = {cpu_fx_tensor(KILN_DT_FLOAT32, 1, d3, a),
                         cpu_fx_tensor(KILN_DT_FLOAT32, 1, d1, b),
                         cpu_fx_tensor(KILN_DT_FLOAT32, 2, d23, c)};
    kiln_tensor out = cpu_fx_tensor(KILN_DT_FLOAT32, 2, d23, y);
    CU_ASSERT_EQUAL(cpu_fx_run(&f, cpu_fx_node(&f, "Max", 3, KILN_DT_FLOAT32), in, 3, &out),
                    KILN_OK);
    ASSERT_F32(y, ((float[]){2, 5, 4, 9, 5, 3}), 6, 0);
    CU_ASSERT_EQUAL(cpu_fx_run(&f, cpu_fx_node(&f, "Sum", 3, KILN_DT_FLOAT32), in, 3, &out),
                    KILN_OK);
    ASSERT_F32(y, ((float[]){3, 7, 9, 12, 8, 6}), 6, 0);
    kiln_tensor one[1] = {cpu_fx_tensor(KILN_DT_FLOAT32, 2, d23, c)};
    CU_ASSERT_EQUAL(cpu_fx_run(&f, cpu_fx_node(&f, "Max", 1, KILN_DT_FLOAT32), one, 1, &out),
                    KILN_OK);
    ASSERT_F32(y, c, 6, 0);
    /* Pow: scalar exponents 2 and 0.5 (fast paths), 3, tensor and int exponents */
    float x[3] = {4, 9, 2}, e2[1] = {2}, eh[1] = {0.5f}, e3[1] = {3}, ev[3] = {0, 1, -1}, p[3];
    float *exps[4] = {e2, eh, e3, ev};
    const float want[4][3] = {{16, 81, 4}, {2, 3, 1.41421356f}, {64, 729, 8}, {1, 9, 0.5f}};
    kiln_tensor outp = cpu_fx_tensor(KILN_DT_FLOAT32, 1, d3, p);
    for (int k = 0; k < 4; k++) {
        kiln_tensor pin[2] = {cpu_fx_tensor(KILN_DT_FLOAT32, 1, d3, x),
                              cpu_fx_tensor(KILN_DT_FLOAT32, 1, k == 3 ? d3 : d1, exps[k])};
        CU_ASSERT_EQUAL(cpu_fx_run(&f, cpu_fx_node(&f, "Pow", 2, KILN_DT_FLOAT32), pin, 2, &outp),
                        KILN_OK);
        ASSERT_F32(p, want[k], 3, 1e-6);
    }
    int64_t ie[3] = {2, 3, 1};
    kiln_tensor pint[2] = {cpu_fx_tensor(KILN_DT_FLOAT32, 1, d3, x),
                           cpu_fx_tensor(KILN_DT_INT64, 1, d3, ie)};
    CU_ASSERT_EQUAL(cpu_fx_run(&f, cpu_fx_node(&f, "Pow", 2, KILN_DT_FLOAT32), pint, 2, &outp),
                    KILN_OK);
    ASSERT_F32(p, ((float[]){16, 729, 2}), 3, 0);
    int64_t ix[3] = {2, 3, -2}, iy[3];
    kiln_tensor pii[2] = {cpu_fx_tensor(KILN_DT_INT64, 1, d3, ix),
                          cpu_fx_tensor(KILN_DT_INT64, 1, d3, ie)};
    kiln_tensor outi = cpu_fx_tensor(KILN_DT_INT64, 1, d3, iy);
    CU_ASSERT_EQUAL(cpu_fx_run(&f, cpu_fx_node(&f, "Pow", 2, KILN_DT_INT64), pii, 2, &outi),
                    KILN_OK);
    ASSERT_MEM(iy, ((int64_t[]){4, 27, -2}));
    cpu_fx_close(&f);
}

static void test_unary_activations(void)
{
    cpu_fx f;
    cpu_fx_open(&f, NULL);
    static const int64_t d5[] = {5};
    float x[5] = {-3, -1, 0, 1, 4}, y[5];
    kiln_tensor in = cpu_fx_tensor(KILN_DT_FLOAT32, 1, d5, x),
                out = cpu_fx_tensor(KILN_DT_FLOAT32, 1, d5, y);
    struct {
        const char *op;
        const char *attr;
        double v;
        float want[5];
    } cases[] = {
        {"Neg", NULL, 0, {3, 1, 0, -1, -4}},
        {"Relu", NULL, 0, {0, 0, 0, 1, 4}},
        {"LeakyRelu", NULL, 0, {-0.03f, -0.01f, 0, 1, 4}},
        {"LeakyRelu", "alpha", 0.5, {-1.5f, -0.5f, 0, 1, 4}},
        {"HardSigmoid", NULL, 0, {0, 0.3f, 0.5f, 0.7f, 1}},
        {"HardSigmoid", "alpha", 0.5, {0, 0, 0.5f, 1, 1}},
        {"Sigmoid", NULL, 0, {0.04742587f, 0.26894142f, 0.5f, 0.73105858f, 0.98201379f}},
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        kiln_node_id n = cpu_fx_node(&f, cases[k].op, 1, KILN_DT_FLOAT32);
        if (cases[k].attr)
            kiln_attrs_set_float(cpu_fx_attrs(&f, n), cases[k].attr, cases[k].v);
        CU_ASSERT_EQUAL(cpu_fx_run(&f, n, &in, 1, &out), KILN_OK);
        ASSERT_F32(y, cases[k].want, 5, 1e-6);
    }
    float s[3] = {4, 1, 0.25f}, t[3];
    static const int64_t d3[] = {3};
    kiln_tensor sin_ = cpu_fx_tensor(KILN_DT_FLOAT32, 1, d3, s),
                sout = cpu_fx_tensor(KILN_DT_FLOAT32, 1, d3, t);
    CU_ASSERT_EQUAL(cpu_fx_run(&f, cpu_fx_node(&f, "Sqrt", 1, KILN_DT_FLOAT32), &sin_, 1, &sout),
                    KILN_OK);
    ASSERT_F32(t, ((float[]){2, 1, 0.5f}), 3, 0);
    CU_ASSERT_EQUAL(cpu_fx_run(&f, cpu_fx_node(&f, "Log", 1, KILN_DT_FLOAT32), &sin_, 1, &sout),
                    KILN_OK);
    ASSERT_F32(t, ((float[]){1.38629436f, 0, -1.38629436f}), 3, 1e-6);
    int64_t ni[3] = {1, -2, 0}, no[3];
    kiln_tensor nin = cpu_fx_tensor(KILN_DT_INT64, 1, d3, ni),
                nout = cpu_fx_tensor(KILN_DT_INT64, 1, d3, no);
    CU_ASSERT_EQUAL(cpu_fx_run(&f, cpu_fx_node(&f, "Neg", 1, KILN_DT_INT64), &nin, 1, &nout),
                    KILN_OK);
    ASSERT_MEM(no, ((int64_t[]){-1, 2, 0}));
    uint8_t b[3] = {1, 0, 1}, nb[3];
    kiln_tensor bin = cpu_fx_tensor(KILN_DT_BOOL, 1, d3, b),
                bout = cpu_fx_tensor(KILN_DT_BOOL, 1, d3, nb);
    CU_ASSERT_EQUAL(cpu_fx_run(&f, cpu_fx_node(&f, "Not", 1, KILN_DT_BOOL), &bin, 1, &bout),
                    KILN_OK);
    ASSERT_MEM(nb, ((uint8_t[]){0, 1, 0}));
    CU_ASSERT_EQUAL(cpu_fx_run(&f, cpu_fx_node(&f, "Identity", 1, KILN_DT_BOOL), &bin, 1, &bout),
                    KILN_OK);
    ASSERT_MEM(nb, b);
    /* no kernel for Sqrt on int32: the engine's dtype mask refuses it */
    kiln_tensor i32 = cpu_fx_tensor(KILN_DT_INT32, 1, d3, ni);
    CU_ASSERT_EQUAL(cpu_fx_run(&f, cpu_fx_node(&f, "Sqrt", 1, KILN_DT_INT32), &i32, 1, &i32),
                    KILN_ERR_UNSUPPORTED);
    cpu_fx_close(&f);
}

static void test_clip_forms(void)
{
    cpu_fx f;
    cpu_fx_open(&f, NULL);
    static const int64_t d5[] = {5};
    float x[5] = {-3, -1, 0, 3, 9}, y[5], lo[1] = {-1.5f}, hi[1] = {6};
    kiln_tensor out = cpu_fx_tensor(KILN_DT_FLOAT32, 1, d5, y);
    /* opset < 11: attributes (HardSwish's Clip(0, 6)) */
    kiln_node_id n = cpu_fx_node(&f, "Clip", 1, KILN_DT_FLOAT32);
    kiln_attrs_set_float(cpu_fx_attrs(&f, n), "min", 0);
    kiln_attrs_set_float(cpu_fx_attrs(&f, n), "max", 6);
    kiln_tensor in1 = cpu_fx_tensor(KILN_DT_FLOAT32, 1, d5, x);
    CU_ASSERT_EQUAL(cpu_fx_run(&f, n, &in1, 1, &out), KILN_OK);
    ASSERT_F32(y, ((float[]){0, 0, 0, 3, 6}), 5, 0);
    /* opset >= 11: inputs, each optional */
    kiln_tensor in3[3] = {in1, cpu_fx_tensor(KILN_DT_FLOAT32, 0, NULL, lo),
                          cpu_fx_tensor(KILN_DT_FLOAT32, 0, NULL, hi)};
    CU_ASSERT_EQUAL(cpu_fx_run(&f, cpu_fx_node(&f, "Clip", 3, KILN_DT_FLOAT32), in3, 3, &out),
                    KILN_OK);
    ASSERT_F32(y, ((float[]){-1.5f, -1, 0, 3, 6}), 5, 0);
    in3[1] = (kiln_tensor){KILN_DT_FLOAT32, 0, NULL, NULL, 0}; /* min unconnected */
    CU_ASSERT_EQUAL(cpu_fx_run(&f, cpu_fx_node(&f, "Clip", 3, KILN_DT_FLOAT32), in3, 3, &out),
                    KILN_OK);
    ASSERT_F32(y, ((float[]){-3, -1, 0, 3, 6}), 5, 0);
    CU_ASSERT_EQUAL(cpu_fx_run(&f, cpu_fx_node(&f, "Clip", 1, KILN_DT_FLOAT32), &in1, 1, &out),
                    KILN_OK);
    ASSERT_F32(y, x, 5, 0);
    int64_t ix[5] = {-9, 0, 5, 100, 7}, il[1] = {0}, ih[1] = {6}, iy[5];
    kiln_tensor iin[3] = {cpu_fx_tensor(KILN_DT_INT64, 1, d5, ix),
                          cpu_fx_tensor(KILN_DT_INT64, 0, NULL, il),
                          cpu_fx_tensor(KILN_DT_INT64, 0, NULL, ih)};
    kiln_tensor iout = cpu_fx_tensor(KILN_DT_INT64, 1, d5, iy);
    CU_ASSERT_EQUAL(cpu_fx_run(&f, cpu_fx_node(&f, "Clip", 3, KILN_DT_INT64), iin, 3, &iout),
                    KILN_OK);
    ASSERT_MEM(iy, ((int64_t[]){0, 0, 5, 6, 6}));
    cpu_fx_close(&f);
}

static void test_cast(void)
{
    cpu_fx f;
    cpu_fx_open(&f, NULL);
    static const int64_t d4[] = {4};
    float x[4] = {1.7f, -1.7f, 0, 65504};
    int64_t l[4];
    uint8_t b[4];
    uint16_t h[4];
    float back[4];
    kiln_tensor in = cpu_fx_tensor(KILN_DT_FLOAT32, 1, d4, x);
    kiln_tensor ol = cpu_fx_tensor(KILN_DT_INT64, 1, d4, l),
                ob = cpu_fx_tensor(KILN_DT_BOOL, 1, d4, b);
    kiln_tensor oh = cpu_fx_tensor(KILN_DT_FLOAT16, 1, d4, h),
                of = cpu_fx_tensor(KILN_DT_FLOAT32, 1, d4, back);
    CU_ASSERT_EQUAL(cpu_fx_run(&f, cpu_fx_node(&f, "Cast", 1, KILN_DT_INT64), &in, 1, &ol),
                    KILN_OK);
    ASSERT_MEM(l, ((int64_t[]){1, -1, 0, 65504}));
    CU_ASSERT_EQUAL(cpu_fx_run(&f, cpu_fx_node(&f, "Cast", 1, KILN_DT_BOOL), &in, 1, &ob), KILN_OK);
    ASSERT_MEM(b, ((uint8_t[]){1, 1, 0, 1}));
    CU_ASSERT_EQUAL(cpu_fx_run(&f, cpu_fx_node(&f, "Cast", 1, KILN_DT_FLOAT16), &in, 1, &oh),
                    KILN_OK);
    ASSERT_MEM(h, ((uint16_t[]){0x3ECD, 0xBECD, 0x0000, 0x7BFF}));
    kiln_tensor hin = cpu_fx_tensor(KILN_DT_FLOAT16, 1, d4, h);
    CU_ASSERT_EQUAL(cpu_fx_run(&f, cpu_fx_node(&f, "Cast", 1, KILN_DT_FLOAT32), &hin, 1, &of),
                    KILN_OK);
    ASSERT_F32(back, ((float[]){1.7001953f, -1.7001953f, 0, 65504}), 4, 0);
    kiln_tensor lin = cpu_fx_tensor(KILN_DT_INT64, 1, d4, l);
    int32_t i32[4];
    kiln_tensor oi = cpu_fx_tensor(KILN_DT_INT32, 1, d4, i32);
    CU_ASSERT_EQUAL(cpu_fx_run(&f, cpu_fx_node(&f, "Cast", 1, KILN_DT_INT32), &lin, 1, &oi),
                    KILN_OK);
    ASSERT_MEM(i32, ((int32_t[]){1, -1, 0, 65504}));
    kiln_tensor bin = cpu_fx_tensor(KILN_DT_BOOL, 1, d4, b);
    CU_ASSERT_EQUAL(cpu_fx_run(&f, cpu_fx_node(&f, "Cast", 1, KILN_DT_FLOAT32), &bin, 1, &of),
                    KILN_OK);
    ASSERT_F32(back, ((float[]){1, 1, 0, 1}), 4, 0);
    cpu_fx_close(&f);
}

static void test_reduce(void)
{
    cpu_fx f;
    cpu_fx_open(&f, NULL);
    static const int64_t d[] = {2, 3, 2}, k1[] = {2, 1, 2}, k02[] = {3}, all[] = {1, 1, 1};
    float x[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, y[12];
    kiln_tensor in = cpu_fx_tensor(KILN_DT_FLOAT32, 3, d, x);
    /* axes attribute, keepdims default 1 */
    kiln_node_id n = cpu_fx_node(&f, "ReduceMean", 1, KILN_DT_FLOAT32);
    kiln_attrs_set_list_int(cpu_fx_attrs(&f, n), "axes", (int64_t[]){1}, 1);
    kiln_tensor out = cpu_fx_tensor(KILN_DT_FLOAT32, 3, k1, y);
    CU_ASSERT_EQUAL(cpu_fx_run(&f, n, &in, 1, &out), KILN_OK);
    ASSERT_F32(y, ((float[]){3, 4, 9, 10}), 4, 0);
    /* axes {0, -1} without keepdims */
    n = cpu_fx_node(&f, "ReduceMax", 1, KILN_DT_FLOAT32);
    kiln_attrs_set_list_int(cpu_fx_attrs(&f, n), "axes", (int64_t[]){0, -1}, 2);
    kiln_attrs_set_int(cpu_fx_attrs(&f, n), "keepdims", 0);
    out = cpu_fx_tensor(KILN_DT_FLOAT32, 1, k02, y);
    CU_ASSERT_EQUAL(cpu_fx_run(&f, n, &in, 1, &out), KILN_OK);
    ASSERT_F32(y, ((float[]){8, 10, 12}), 3, 0);
    n = cpu_fx_node(&f, "ReduceMean", 1, KILN_DT_FLOAT32);
    kiln_attrs_set_list_int(cpu_fx_attrs(&f, n), "axes", (int64_t[]){0, -1}, 2);
    kiln_attrs_set_int(cpu_fx_attrs(&f, n), "keepdims", 0);
    CU_ASSERT_EQUAL(cpu_fx_run(&f, n, &in, 1, &out), KILN_OK);
    ASSERT_F32(y, ((float[]){4.5f, 6.5f, 8.5f}), 3, 0);
    /* no axes: everything */
    out = cpu_fx_tensor(KILN_DT_FLOAT32, 3, all, y);
    CU_ASSERT_EQUAL(cpu_fx_run(&f, cpu_fx_node(&f, "ReduceMax", 1, KILN_DT_FLOAT32), &in, 1, &out),
                    KILN_OK);
    CU_ASSERT_EQUAL(y[0], 12);
    /* axes as input 1 (opset 18), and the output shape checked */
    int64_t ax[1] = {-1};
    static const int64_t d1[] = {1}, k2[] = {2, 3, 1};
    kiln_tensor in2[2] = {in, cpu_fx_tensor(KILN_DT_INT64, 1, d1, ax)};
    out = cpu_fx_tensor(KILN_DT_FLOAT32, 3, k2, y);
    CU_ASSERT_EQUAL(cpu_fx_run(&f, cpu_fx_node(&f, "ReduceMean", 2, KILN_DT_FLOAT32), in2, 2, &out),
                    KILN_OK);
    ASSERT_F32(y, ((float[]){1.5f, 3.5f, 5.5f, 7.5f, 9.5f, 11.5f}), 6, 0);
    out = cpu_fx_tensor(KILN_DT_FLOAT32, 3, k1, y);
    CU_ASSERT_EQUAL(cpu_fx_run(&f, cpu_fx_node(&f, "ReduceMean", 2, KILN_DT_FLOAT32), in2, 2, &out),
                    KILN_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(f.err.msg, "the op gives [2,3,1]"));
    cpu_fx_close(&f);
}

static void softmax_want(const float *x, float *y, int n, int stride)
{
    float m = x[0], s = 0;
    for (int k = 1; k < n; k++)
        m = x[k * stride] > m ? x[k * stride] : m;
    for (int k = 0; k < n; k++)
        s += expf(x[k * stride] - m);
    for (int k = 0; k < n; k++)
        y[k * stride] = expf(x[k * stride] - m) / s;
}

static void test_softmax_opsets(void)
{
    static const int64_t d[] = {2, 2, 3};
    float x[12] = {1, 2, 3, 0, 0, 0, -1, 5, 1000, 1001, 1002, 7}, y[12], want[12];
    kiln_tensor in = cpu_fx_tensor(KILN_DT_FLOAT32, 3, d, x),
                out = cpu_fx_tensor(KILN_DT_FLOAT32, 3, d, y);
    cpu_fx f;
    /* opset 13: default axis -1, rows of 3; huge values do not overflow */
    cpu_fx_open(&f, "ai.onnx:13");
    for (int r = 0; r < 4; r++)
        softmax_want(x + 3 * r, want + 3 * r, 3, 1);
    CU_ASSERT_EQUAL(cpu_fx_run(&f, cpu_fx_node(&f, "Softmax", 1, KILN_DT_FLOAT32), &in, 1, &out),
                    KILN_OK);
    ASSERT_F32(y, want, 12, 1e-6);
    /* opset 13, axis 1: strided over the middle dim */
    kiln_node_id n = cpu_fx_node(&f, "Softmax", 1, KILN_DT_FLOAT32);
    kiln_attrs_set_int(cpu_fx_attrs(&f, n), "axis", 1);
    for (int o = 0; o < 2; o++)
        for (int j = 0; j < 3; j++)
            softmax_want(x + 6 * o + j, want + 6 * o + j, 2, 3);
    CU_ASSERT_EQUAL(cpu_fx_run(&f, n, &in, 1, &out), KILN_OK);
    ASSERT_F32(y, want, 12, 1e-6);
    cpu_fx_close(&f);
    /* opset 9: default axis 1 coerces to [2, 6] */
    cpu_fx_open(&f, "ai.onnx:9");
    for (int r = 0; r < 2; r++)
        softmax_want(x + 6 * r, want + 6 * r, 6, 1);
    CU_ASSERT_EQUAL(cpu_fx_run(&f, cpu_fx_node(&f, "Softmax", 1, KILN_DT_FLOAT32), &in, 1, &out),
                    KILN_OK);
    ASSERT_F32(y, want, 12, 1e-6);
    cpu_fx_close(&f);
}

#define F32 KILN_DT_FLOAT32
#define I64 KILN_DT_INT64
#define T cpu_fx_tensor
#define NODE cpu_fx_node
#define RUN cpu_fx_run
#define ATTRS cpu_fx_attrs

static const int64_t d234[] = {2, 3, 4};

static void iota(float *x, int n)
{
    for (int i = 0; i < n; i++)
        x[i] = (float)i;
}

/* Overwrite an output buffer with a value no expected result holds, so a kernel
 * that writes nothing cannot pass on what the previous run left there. */
static void poison(float *y, int n)
{
    for (int i = 0; i < n; i++)
        y[i] = -12345.0f;
}

static void test_shape_size(void)
{
    cpu_fx f;
    cpu_fx_open(&f, NULL);
    float x[24];
    int64_t y[3], sz;
    static const int64_t d3[] = {3}, d2[] = {2};
    kiln_tensor in = T(F32, 3, d234, x), out = T(I64, 1, d3, y);
    CU_ASSERT_EQUAL(RUN(&f, NODE(&f, "Shape", 1, I64), &in, 1, &out), KILN_OK);
    ASSERT_MEM(y, ((int64_t[]){2, 3, 4}));
    kiln_node_id n = NODE(&f, "Shape", 1, I64);
    kiln_attrs_set_int(ATTRS(&f, n), "start", 1);
    out = T(I64, 1, d2, y);
    CU_ASSERT_EQUAL(RUN(&f, n, &in, 1, &out), KILN_OK);
    ASSERT_MEM(y, ((int64_t[]){3, 4}));
    n = NODE(&f, "Shape", 1, I64);
    kiln_attrs_set_int(ATTRS(&f, n), "end", -1);
    CU_ASSERT_EQUAL(RUN(&f, n, &in, 1, &out), KILN_OK);
    ASSERT_MEM(y, ((int64_t[]){2, 3}));
    kiln_tensor os = T(I64, 0, NULL, &sz);
    CU_ASSERT_EQUAL(RUN(&f, NODE(&f, "Size", 1, I64), &in, 1, &os), KILN_OK);
    CU_ASSERT_EQUAL(sz, 24);
    cpu_fx_close(&f);
}

static void test_reshape_family(void)
{
    cpu_fx f;
    cpu_fx_open(&f, NULL);
    float x[24], y[24];
    iota(x, 24);
    kiln_tensor in = T(F32, 3, d234, x);
    /* Reshape: 0 copies the input dim, -1 is inferred */
    int64_t shp[2] = {0, -1};
    static const int64_t d2[] = {2}, o212[] = {2, 12}, o38[] = {3, 8};
    kiln_tensor rin[2] = {in, T(I64, 1, d2, shp)};
    kiln_tensor out = T(F32, 2, o212, y);
    poison(y, 24);
    CU_ASSERT_EQUAL(RUN(&f, NODE(&f, "Reshape", 2, F32), rin, 2, &out), KILN_OK);
    ASSERT_F32(y, x, 24, 0);
    /* a descriptor that disagrees with the op is an error naming both shapes */
    out = T(F32, 2, o38, y);
    CU_ASSERT_EQUAL(RUN(&f, NODE(&f, "Reshape", 2, F32), rin, 2, &out), KILN_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(f.err.msg, "output 0 has shape [3,8], the op gives [2,12]"));
    /* allowzero: a 0 is a real 0 (here: -1 with 0 elements is refused) */
    kiln_node_id n = NODE(&f, "Reshape", 2, F32);
    kiln_attrs_set_int(ATTRS(&f, n), "allowzero", 1);
    out = T(F32, 2, o212, y);
    CU_ASSERT_EQUAL(RUN(&f, n, rin, 2, &out), KILN_ERR_INVALID);
    /* Flatten: default axis 1, axis 0, negative axis */
    static const int64_t f1[] = {2, 12}, f0[] = {1, 24}, fm1[] = {6, 4};
    const int64_t *fd[3] = {f1, f0, fm1};
    const int64_t axes[3] = {1, 0, -1};
    for (int k = 0; k < 3; k++) {
        n = NODE(&f, "Flatten", 1, F32);
        if (k)
            kiln_attrs_set_int(ATTRS(&f, n), "axis", axes[k]);
        out = T(F32, 2, fd[k], y);
        poison(y, 24);
        CU_ASSERT_EQUAL(RUN(&f, n, &in, 1, &out), KILN_OK);
        ASSERT_F32(y, x, 24, 0);
    }
    /* Squeeze: axes attribute (opset < 13), axes input, no axes */
    static const int64_t s1[] = {1, 3, 1, 2}, s_a[] = {3, 1, 2}, s_all[] = {3, 2};
    kiln_tensor sq = T(F32, 4, s1, x);
    n = NODE(&f, "Squeeze", 1, F32);
    kiln_attrs_set_list_int(ATTRS(&f, n), "axes", (int64_t[]){0}, 1);
    out = T(F32, 3, s_a, y);
    CU_ASSERT_EQUAL(RUN(&f, n, &sq, 1, &out), KILN_OK);
    int64_t sax[2] = {0, -2};
    kiln_tensor sqin[2] = {sq, T(I64, 1, d2, sax)};
    out = T(F32, 2, s_all, y);
    CU_ASSERT_EQUAL(RUN(&f, NODE(&f, "Squeeze", 2, F32), sqin, 2, &out), KILN_OK);
    poison(y, 6);
    CU_ASSERT_EQUAL(RUN(&f, NODE(&f, "Squeeze", 1, F32), &sq, 1, &out), KILN_OK);
    ASSERT_F32(y, x, 6, 0);
    sax[1] = 1; /* dim 1 has size 3 */
    CU_ASSERT_EQUAL(RUN(&f, NODE(&f, "Squeeze", 2, F32), sqin, 2, &out), KILN_ERR_INVALID);
    /* Unsqueeze: axes attribute, axes input with negative and unsorted axes */
    static const int64_t u_a[] = {3, 1, 2}, u_b[] = {1, 3, 2, 1};
    kiln_tensor us = T(F32, 2, s_all, x);
    n = NODE(&f, "Unsqueeze", 1, F32);
    kiln_attrs_set_list_int(ATTRS(&f, n), "axes", (int64_t[]){1}, 1);
    out = T(F32, 3, u_a, y);
    CU_ASSERT_EQUAL(RUN(&f, n, &us, 1, &out), KILN_OK);
    int64_t uax[2] = {-1, 0};
    kiln_tensor usin[2] = {us, T(I64, 1, d2, uax)};
    out = T(F32, 4, u_b, y);
    poison(y, 6);
    CU_ASSERT_EQUAL(RUN(&f, NODE(&f, "Unsqueeze", 2, F32), usin, 2, &out), KILN_OK);
    ASSERT_F32(y, x, 6, 0);
    cpu_fx_close(&f);
}

static void test_constant_of_shape(void)
{
    cpu_fx f;
    cpu_fx_open(&f, NULL);
    int64_t shp[2] = {2, 3}, y[6];
    static const int64_t d2[] = {2}, d1[] = {1};
    kiln_tensor in = T(I64, 1, d2, shp), out = T(I64, 2, shp, y);
    kiln_node_id n = NODE(&f, "ConstantOfShape", 1, I64);
    int64_t seven = 7;
    kiln_tensor_value v = {I64, 1, d1, &seven, sizeof(seven)};
    kiln_attrs_set_tensor(ATTRS(&f, n), "value", &v);
    CU_ASSERT_EQUAL(RUN(&f, n, &in, 1, &out), KILN_OK);
    ASSERT_MEM(y, ((int64_t[]){7, 7, 7, 7, 7, 7}));
    float z[6] = {1, 1, 1, 1, 1, 1};
    kiln_tensor fo = T(F32, 2, shp, z);
    CU_ASSERT_EQUAL(RUN(&f, NODE(&f, "ConstantOfShape", 1, F32), &in, 1, &fo), KILN_OK);
    ASSERT_F32(z, ((float[]){0, 0, 0, 0, 0, 0}), 6, 0);
    cpu_fx_close(&f);
}

static void test_transpose(void)
{
    cpu_fx f;
    cpu_fx_open(&f, NULL);
    float x[24], y[24], want[24];
    iota(x, 24);
    /* perm {2, 0, 1}: out[k][i][j] = x[i][j][k] */
    static const int64_t o[] = {4, 2, 3}, rev[] = {4, 3, 2};
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 4; k++)
                want[(k * 2 + i) * 3 + j] = x[(i * 3 + j) * 4 + k];
    kiln_tensor in = T(F32, 3, d234, x), out = T(F32, 3, o, y);
    kiln_node_id n = NODE(&f, "Transpose", 1, F32);
    kiln_attrs_set_list_int(ATTRS(&f, n), "perm", (int64_t[]){2, 0, 1}, 3);
    CU_ASSERT_EQUAL(RUN(&f, n, &in, 1, &out), KILN_OK);
    ASSERT_F32(y, want, 24, 0);
    /* default: reversed dims */
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 4; k++)
                want[(k * 3 + j) * 2 + i] = x[(i * 3 + j) * 4 + k];
    out = T(F32, 3, rev, y);
    CU_ASSERT_EQUAL(RUN(&f, NODE(&f, "Transpose", 1, F32), &in, 1, &out), KILN_OK);
    ASSERT_F32(y, want, 24, 0);
    /* perm {1, 0, 2} keeps the last dim contiguous (block copies), int64 */
    int64_t li[24], lo[24], lw[24];
    static const int64_t o2[] = {3, 2, 4};
    for (int i = 0; i < 24; i++)
        li[i] = 100 + i;
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 4; k++)
                lw[(j * 2 + i) * 4 + k] = li[(i * 3 + j) * 4 + k];
    kiln_tensor lin = T(I64, 3, d234, li), lout = T(I64, 3, o2, lo);
    n = NODE(&f, "Transpose", 1, I64);
    kiln_attrs_set_list_int(ATTRS(&f, n), "perm", (int64_t[]){1, 0, 2}, 3);
    CU_ASSERT_EQUAL(RUN(&f, n, &lin, 1, &lout), KILN_OK);
    ASSERT_MEM(lo, lw);
    cpu_fx_close(&f);
}

static void test_concat_gather(void)
{
    cpu_fx f;
    cpu_fx_open(&f, NULL);
    static const int64_t a21[] = {2, 1}, a22[] = {2, 2}, o23[] = {2, 3};
    float a[2] = {1, 2}, b[4] = {3, 4, 5, 6}, y[6];
    kiln_tensor in[2] = {T(F32, 2, a21, a), T(F32, 2, a22, b)}, out = T(F32, 2, o23, y);
    kiln_node_id n = NODE(&f, "Concat", 2, F32);
    kiln_attrs_set_int(ATTRS(&f, n), "axis", -1);
    CU_ASSERT_EQUAL(RUN(&f, n, in, 2, &out), KILN_OK);
    ASSERT_F32(y, ((float[]){1, 3, 4, 2, 5, 6}), 6, 0);
    /* int64 shape vectors, with an empty one */
    static const int64_t l1[] = {1}, l0[] = {0}, l2[] = {2}, l3[] = {3};
    int64_t p[1] = {-1}, q[2] = {7, 8}, r[3];
    kiln_tensor li[3] = {T(I64, 1, l1, p), T(I64, 1, l0, NULL), T(I64, 1, l2, q)};
    kiln_tensor lo = T(I64, 1, l3, r);
    n = NODE(&f, "Concat", 3, I64);
    kiln_attrs_set_int(ATTRS(&f, n), "axis", 0);
    CU_ASSERT_EQUAL(RUN(&f, n, li, 3, &lo), KILN_OK);
    ASSERT_MEM(r, ((int64_t[]){-1, 7, 8}));
    /* Gather axis 0 with a scalar and negative index (the Shape->Gather idiom) */
    int64_t dims[3] = {5, 6, 7}, idx0 = -1, g0;
    kiln_tensor gin[2] = {T(I64, 1, l3, dims), T(I64, 0, NULL, &idx0)};
    kiln_tensor gout = T(I64, 0, NULL, &g0);
    CU_ASSERT_EQUAL(RUN(&f, NODE(&f, "Gather", 2, I64), gin, 2, &gout), KILN_OK);
    CU_ASSERT_EQUAL(g0, 7);
    /* axis 1 with 2-D int32 indices: [2,3] x [2,2] -> [2,2,2] */
    float x[6] = {0, 1, 2, 10, 11, 12}, z[8];
    int32_t ix[4] = {2, 0, -1, 1};
    static const int64_t o222[] = {2, 2, 2};
    kiln_tensor g1[2] = {T(F32, 2, o23, x), T(KILN_DT_INT32, 2, a22, ix)};
    kiln_tensor g1o = T(F32, 3, o222, z);
    n = NODE(&f, "Gather", 2, F32);
    kiln_attrs_set_int(ATTRS(&f, n), "axis", 1);
    CU_ASSERT_EQUAL(RUN(&f, n, g1, 2, &g1o), KILN_OK);
    ASSERT_F32(z, ((float[]){2, 0, 2, 1, 12, 10, 12, 11}), 8, 0);
    ix[0] = 3;
    CU_ASSERT_EQUAL(RUN(&f, n, g1, 2, &g1o), KILN_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(f.err.msg, "index 3 out of range"));
    cpu_fx_close(&f);
}

static void test_slice(void)
{
    cpu_fx f;
    cpu_fx_open(&f, NULL);
    float x[24], y[24];
    iota(x, 24);
    kiln_tensor in = T(F32, 3, d234, x);
    /* opset < 10: attributes, ends beyond the dim clamp */
    kiln_node_id n = NODE(&f, "Slice", 1, F32);
    kiln_attrs_set_list_int(ATTRS(&f, n), "starts", (int64_t[]){1, -2}, 2);
    kiln_attrs_set_list_int(ATTRS(&f, n), "ends", (int64_t[]){INT64_MAX, 1000}, 2);
    kiln_attrs_set_list_int(ATTRS(&f, n), "axes", (int64_t[]){1, 2}, 2);
    static const int64_t o1[] = {2, 2, 2};
    kiln_tensor out = T(F32, 3, o1, y);
    CU_ASSERT_EQUAL(RUN(&f, n, &in, 1, &out), KILN_OK);
    ASSERT_F32(y, ((float[]){6, 7, 10, 11, 18, 19, 22, 23}), 8, 0);
    /* opset >= 10: inputs; negative steps run backwards from the clamped start */
    static const int64_t d1[] = {1}, d3[] = {3}, o2[] = {2, 3, 2};
    int64_t st[3] = {-1, 0, 3}, en[3] = {-3, 3, INT64_MIN}, ax[3] = {0, 1, -1}, sp[3] = {-1, 1, -2};
    kiln_tensor sin[5] = {in, T(I64, 1, d3, st), T(I64, 1, d3, en), T(I64, 1, d3, ax),
                          T(I64, 1, d3, sp)};
    out = T(F32, 3, o2, y);
    CU_ASSERT_EQUAL(RUN(&f, NODE(&f, "Slice", 5, F32), sin, 5, &out), KILN_OK);
    ASSERT_F32(y, ((float[]){15, 13, 19, 17, 23, 21, 3, 1, 7, 5, 11, 9}), 12, 0);
    /* starts/ends only (axes = 0.., steps 1): whole trailing rows in one copy */
    int64_t s1[1] = {1}, e1[1] = {2};
    static const int64_t o3[] = {1, 3, 4};
    kiln_tensor s3[3] = {in, T(I64, 1, d1, s1), T(I64, 1, d1, e1)};
    out = T(F32, 3, o3, y);
    CU_ASSERT_EQUAL(RUN(&f, NODE(&f, "Slice", 3, F32), s3, 3, &out), KILN_OK);
    ASSERT_F32(y, x + 12, 12, 0);
    /* start beyond the dim: empty */
    int64_t s4[1] = {10}, e4[1] = {20};
    static const int64_t o4[] = {0, 3, 4};
    kiln_tensor s4in[3] = {in, T(I64, 1, d1, s4), T(I64, 1, d1, e4)};
    out = T(F32, 3, o4, y);
    CU_ASSERT_EQUAL(RUN(&f, NODE(&f, "Slice", 3, F32), s4in, 3, &out), KILN_OK);
    cpu_fx_close(&f);
}

static void test_pad(void)
{
    cpu_fx f;
    cpu_fx_open(&f, NULL);
    static const int64_t d23[] = {2, 3}, d4[] = {4}, o36[] = {3, 6}, o25[] = {2, 5};
    float x[6] = {1, 2, 3, 4, 5, 6}, y[18], cv[1] = {9};
    int64_t pads[4] = {1, 2, 0, 1}; /* rows: 1 before; cols: 2 before, 1 after */
    kiln_tensor in[3] = {T(F32, 2, d23, x), T(I64, 1, d4, pads), T(F32, 0, NULL, cv)};
    kiln_tensor out = T(F32, 2, o36, y);
    CU_ASSERT_EQUAL(RUN(&f, NODE(&f, "Pad", 3, F32), in, 3, &out), KILN_OK);
    ASSERT_F32(y, ((float[]){9, 9, 9, 9, 9, 9, 9, 9, 1, 2, 3, 9, 9, 9, 4, 5, 6, 9}), 18, 0);
    kiln_node_id n = NODE(&f, "Pad", 2, F32);
    kiln_attrs_set_string(ATTRS(&f, n), "mode", "reflect");
    CU_ASSERT_EQUAL(RUN(&f, n, in, 2, &out), KILN_OK);
    ASSERT_F32(y, ((float[]){6, 5, 4, 5, 6, 5, 3, 2, 1, 2, 3, 2, 6, 5, 4, 5, 6, 5}), 18, 0);
    n = NODE(&f, "Pad", 2, F32);
    kiln_attrs_set_string(ATTRS(&f, n), "mode", "edge");
    CU_ASSERT_EQUAL(RUN(&f, n, in, 2, &out), KILN_OK);
    ASSERT_F32(y, ((float[]){1, 1, 1, 2, 3, 3, 1, 1, 1, 2, 3, 3, 4, 4, 4, 5, 6, 6}), 18, 0);
    /* opset < 11: pads and value attributes; a negative pad crops */
    n = NODE(&f, "Pad", 1, F32);
    kiln_attrs_set_list_int(ATTRS(&f, n), "pads", (int64_t[]){0, -1, 0, 3}, 4);
    kiln_attrs_set_float(ATTRS(&f, n), "value", -0.5);
    out = T(F32, 2, o25, y);
    CU_ASSERT_EQUAL(RUN(&f, n, in, 1, &out), KILN_OK);
    ASSERT_F32(y, ((float[]){2, 3, -0.5f, -0.5f, -0.5f, 5, 6, -0.5f, -0.5f, -0.5f}), 10, 0);
    /* the models' [0,1,0,1]-style asymmetric pad on NHWC-like data, default zeros */
    static const int64_t d1x3[] = {1, 3}, p4[] = {4}, o1x4[] = {1, 4};
    int64_t pz[4] = {0, 0, 0, 1};
    kiln_tensor zin[2] = {T(F32, 2, d1x3, x), T(I64, 1, p4, pz)};
    out = T(F32, 2, o1x4, y);
    CU_ASSERT_EQUAL(RUN(&f, NODE(&f, "Pad", 2, F32), zin, 2, &out), KILN_OK);
    ASSERT_F32(y, ((float[]){1, 2, 3, 0}), 4, 0);
    cpu_fx_close(&f);
}

int main(void)
{
    static const kiln_test_case cases[] = {
        {"test_binary_broadcast", test_binary_broadcast},
        {"test_binary_ints_and_compare", test_binary_ints_and_compare},
        {"test_integer_edge_cases", test_integer_edge_cases},
        {"test_variadic_max_and_pow", test_variadic_max_and_pow},
        {"test_unary_activations", test_unary_activations},
        {"test_clip_forms", test_clip_forms},
        {"test_cast", test_cast},
        {"test_reduce", test_reduce},
        {"test_softmax_opsets", test_softmax_opsets},
        {"test_shape_size", test_shape_size},
        {"test_reshape_family", test_reshape_family},
        {"test_constant_of_shape", test_constant_of_shape},
        {"test_transpose", test_transpose},
        {"test_concat_gather", test_concat_gather},
        {"test_slice", test_slice},
        {"test_pad", test_pad},
        {NULL, NULL},
    };
    return kiln_test_run("cpu_basic", cases);
}

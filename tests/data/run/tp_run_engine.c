/*
 * tp_run_engine.c - a tiny test engine for tests/e2e/run.sh, so that the
 * sequential runtime and `kiln run` are tested on their own, whatever state
 * the CPU engine is in.  run.sh compiles it against plugin-api/ only:
 *
 *   cc -shared -fPIC -DKILN_PLUGIN -I plugin-api tp_run_engine.c -o libtp_run_engine.so
 *
 * Engine "runtest" (priority -100, below the CPU engine), float32 only:
 *   Add    elementwise, or with a one-element second operand
 *   Relu   elementwise
 *   MatMul [M,K] x [K,N]
 *   Fail   always fails with "injected kernel failure" (error propagation)
 * Kernels check what the runtime hands them (non-NULL buffers of the
 * descriptor's size), so a runtime bug shows as a kernel error, not garbage.
 */
#include <kiln/kiln.h>
#include <string.h>

static size_t numel(const kiln_tensor *t)
{
    size_t n = 1;
    for (uint32_t i = 0; i < t->rank; i++)
        n *= (size_t)t->dims[i];
    return n;
}

static kiln_status check(const kiln_kernel_args *a, uint32_t nin, kiln_error *err)
{
    if (a->struct_size < sizeof(*a) || a->input_count != nin || a->output_count != 1)
        return kiln_errorf(err, KILN_ERR_INVALID, "runtest: bad argument counts");
    for (uint32_t i = 0; i < nin; i++)
        if (!a->inputs[i].data || a->inputs[i].dtype != KILN_DT_FLOAT32 ||
            a->inputs[i].nbytes != numel(&a->inputs[i]) * 4)
            return kiln_errorf(err, KILN_ERR_INVALID,
                               "runtest: input %u is not a float32 "
                               "tensor of its dims",
                               i);
    const kiln_tensor *o = &a->outputs[0];
    if (!o->data || o->nbytes != numel(o) * 4)
        return kiln_errorf(err, KILN_ERR_INVALID, "runtest: output buffer missing or wrong size");
    return KILN_OK;
}

static kiln_status k_add(void *st, const kiln_kernel_args *a, kiln_error *err)
{
    (void)st;
    kiln_status s = check(a, 2, err);
    if (s != KILN_OK)
        return s;
    const float *x = a->inputs[0].data, *y = a->inputs[1].data;
    float *o = a->outputs[0].data;
    size_t n = numel(&a->outputs[0]), ny = numel(&a->inputs[1]);
    if (numel(&a->inputs[0]) != n || (ny != n && ny != 1))
        return kiln_errorf(err, KILN_ERR_INVALID, "runtest Add: shapes do not match");
    for (size_t i = 0; i < n; i++)
        o[i] = x[i] + y[ny == 1 ? 0 : i];
    return KILN_OK;
}

static kiln_status k_relu(void *st, const kiln_kernel_args *a, kiln_error *err)
{
    (void)st;
    kiln_status s = check(a, 1, err);
    if (s != KILN_OK)
        return s;
    const float *x = a->inputs[0].data;
    float *o = a->outputs[0].data;
    size_t n = numel(&a->outputs[0]);
    if (numel(&a->inputs[0]) != n)
        return kiln_errorf(err, KILN_ERR_INVALID, "runtest Relu: shapes do not match");
    for (size_t i = 0; i < n; i++)
        o[i] = x[i] > 0 ? x[i] : 0;
    return KILN_OK;
}

static kiln_status k_matmul(void *st, const kiln_kernel_args *a, kiln_error *err)
{
    (void)st;
    kiln_status s = check(a, 2, err);
    if (s != KILN_OK)
        return s;
    const kiln_tensor *x = &a->inputs[0], *w = &a->inputs[1], *o = &a->outputs[0];
    if (x->rank != 2 || w->rank != 2 || o->rank != 2 || x->dims[1] != w->dims[0] ||
        o->dims[0] != x->dims[0] || o->dims[1] != w->dims[1])
        return kiln_errorf(err, KILN_ERR_INVALID, "runtest MatMul: needs [M,K] x [K,N]");
    int64_t m = x->dims[0], k = x->dims[1], n = w->dims[1];
    const float *xp = x->data, *wp = w->data;
    float *op = o->data;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            float acc = 0;
            for (int64_t q = 0; q < k; q++)
                acc += xp[i * k + q] * wp[q * n + j];
            op[i * n + j] = acc;
        }
    return KILN_OK;
}

static kiln_status k_fail(void *st, const kiln_kernel_args *a, kiln_error *err)
{
    (void)st;
    (void)a;
    return kiln_errorf(err, KILN_ERR_INVALID, "injected kernel failure");
}

static const struct {
    const char *op;
    kiln_kernel_fn fn;
} kernels[] = {{"Add", k_add}, {"Relu", k_relu}, {"MatMul", k_matmul}, {"Fail", k_fail}};

#define F32 (1u << KILN_DT_FLOAT32)
static const kiln_op_info ops[] = {
    {sizeof(kiln_op_info), "Add", F32, NULL, 0},
    {sizeof(kiln_op_info), "Relu", F32, NULL, 0},
    {sizeof(kiln_op_info), "MatMul", F32, NULL, 0},
    {sizeof(kiln_op_info), "Fail", F32, NULL, 0},
};

static kiln_status kernel_create(void *inst, const kiln_graph *g, kiln_node_id n,
                                 kiln_kernel_fn *fn, void **state, kiln_error *err)
{
    (void)inst;
    const char *op = kiln_node_op_str(g, n);
    for (size_t i = 0; i < sizeof(kernels) / sizeof(kernels[0]); i++)
        if (strcmp(op, kernels[i].op) == 0) {
            *fn = kernels[i].fn;
            *state = NULL;
            return KILN_OK;
        }
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "runtest has no kernel for %s", op);
}

static const kiln_engine_desc engine = {
    .struct_size = sizeof(kiln_engine_desc),
    .name = "runtest",
    .summary = "test kernels for tests/e2e/run.sh",
    .priority = -100,
    .op_count = sizeof(ops) / sizeof(ops[0]),
    .ops = ops,
    .kernel_create = kernel_create,
};

static kiln_status init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)h;
    (void)e;
    return kiln_register_engine(r, &engine);
}

KILN_PLUGIN_DEFINE("kiln.test.run_engine", "0.1.0", "Apache-2.0",
                   "test kernels for the runtime tests", init, NULL)

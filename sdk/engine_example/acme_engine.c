/*
 * acme_engine.c - an out-of-tree kiln ENGINE: "acme_npu", a vendor engine
 * that claims Relu and Add for float32 with its own kernels and a priority
 * (100) above kiln's built-in engines (aicore 40, vector 30, rts 20,
 * hostcpu 10), so the nodes it lists run on it and everything else stays on
 * the built-in engines (docs/engines.md).
 *
 * What an engine provides, and when kiln calls it:
 *   ops[]                    its op table (GE's ops kernel info store): op
 *                            type, dtypes of output 0, formats (NULL = any)
 *   optimize_original_graph  end of stage optimize_original, whole graph:
 *                            here it counts the nodes it will execute into
 *                            the graph attribute acme_claimed (and a stat)
 *   calc_op_running_param    build stage, per node: sizes and workspaces
 *   generate_task            build stage, per node: the task a runtime runs
 *   kernel_create / destroy  when a runtime loads the graph, per node
 *
 * With ACME_ENGINE_TRACE set in the environment, kernel_create names every
 * node it binds on stderr (tests use it to see which engine ran what).
 */
#include <kiln/kiln.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ACME_ENGINE "acme_npu"
#define ACME_MAX_RANK 8

/* ---- kernels ---------------------------------------------------------------- */

static kiln_status acme_relu(void *state, const kiln_kernel_args *a, kiln_error *err)
{
    (void)state;
    if (a->input_count < 1 || a->output_count < 1 || a->inputs[0].nbytes != a->outputs[0].nbytes)
        return kiln_errorf(err, KILN_ERR_INVALID, "acme Relu: input and output sizes differ");
    const float *x = a->inputs[0].data;
    float *y = a->outputs[0].data;
    size_t n = a->outputs[0].nbytes / sizeof(float);
    for (size_t i = 0; i < n; i++)
        y[i] = x[i] > 0.0f ? x[i] : (x[i] != x[i] ? x[i] : 0.0f); /* NaN stays NaN */
    return KILN_OK;
}

/* Element strides of @p t walking an output of rank @p r and dims @p od (numpy broadcasting). */
static bool broadcast_strides(const kiln_tensor *t, uint32_t r, const int64_t *od, int64_t *str)
{
    if (t->rank > r)
        return false;
    int64_t s = 1;
    for (uint32_t k = 0; k < r; k++) {
        uint32_t d = r - 1 - k;
        if (k >= t->rank) {
            str[d] = 0;
            continue;
        }
        int64_t dim = t->dims[t->rank - 1 - k];
        if (dim != od[d] && dim != 1)
            return false;
        str[d] = dim == 1 ? 0 : s;
        s *= dim;
    }
    return true;
}

/* Add, and with @p relu the fused AcmeAddRelu: Relu(a + b) in one pass. */
static kiln_status add_kernel(const kiln_kernel_args *a, bool relu, kiln_error *err)
{
    const char *what = relu ? "acme AcmeAddRelu" : "acme Add";
    if (a->input_count != 2 || a->output_count != 1)
        return kiln_errorf(err, KILN_ERR_INVALID, "%s: needs 2 inputs and 1 output", what);
    const kiln_tensor *A = &a->inputs[0], *B = &a->inputs[1], *Y = &a->outputs[0];
    uint32_t r = Y->rank;
    int64_t sa[ACME_MAX_RANK], sb[ACME_MAX_RANK], idx[ACME_MAX_RANK] = {0};
    if (r > ACME_MAX_RANK || !broadcast_strides(A, r, Y->dims, sa) ||
        !broadcast_strides(B, r, Y->dims, sb))
        return kiln_errorf(err, KILN_ERR_INVALID,
                           "%s: inputs of rank %u and %u do not broadcast to the output", what,
                           A->rank, B->rank);
    const float *pa = A->data, *pb = B->data;
    float *py = Y->data;
    size_t n = Y->nbytes / sizeof(float);
    int64_t oa = 0, ob = 0;
    for (size_t i = 0; i < n; i++) {
        float v = pa[oa] + pb[ob];
        py[i] = relu && v <= 0.0f ? 0.0f : v;           /* NaN stays NaN */
        for (int32_t d = (int32_t)r - 1; d >= 0; d--) { /* odometer over the output */
            oa += sa[d];
            ob += sb[d];
            if (++idx[d] < Y->dims[d])
                break;
            oa -= sa[d] * Y->dims[d];
            ob -= sb[d] * Y->dims[d];
            idx[d] = 0;
        }
    }
    return KILN_OK;
}

static kiln_status acme_add(void *state, const kiln_kernel_args *a, kiln_error *err)
{
    (void)state;
    return add_kernel(a, false, err);
}

static kiln_status acme_add_relu(void *state, const kiln_kernel_args *a, kiln_error *err)
{
    (void)state;
    return add_kernel(a, true, err);
}

/* ---- the engine ---------------------------------------------------------------- */

static const kiln_op_info acme_ops[] = {
    {sizeof(kiln_op_info), "Relu", 1u << KILN_DT_FLOAT32, NULL, 0},
    {sizeof(kiln_op_info), "Add", 1u << KILN_DT_FLOAT32, NULL, 0},
    {sizeof(kiln_op_info), "AcmeAddRelu", 1u << KILN_DT_FLOAT32, NULL, 0},
};

static kiln_status kernel_create(void *inst, const kiln_graph *g, kiln_node_id n,
                                 kiln_kernel_fn *fn, void **state, kiln_error *err)
{
    (void)inst;
    const char *op = kiln_node_op_str(g, n);
    if (strcmp(op, "Relu") == 0)
        *fn = acme_relu;
    else if (strcmp(op, "Add") == 0)
        *fn = acme_add;
    else if (strcmp(op, "AcmeAddRelu") == 0)
        *fn = acme_add_relu;
    else
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "node %s: acme_npu has no kernel for %s",
                           kiln_node_name_str(g, n), op);
    *state = NULL;
    if (getenv("ACME_ENGINE_TRACE"))
        fprintf(stderr, "acme_npu: node %s (%s)\n", kiln_node_name_str(g, n), op);
    return KILN_OK;
}

static kiln_status optimize_original_graph(void *inst, kiln_pass_ctx *ctx, kiln_graph *root)
{
    (void)inst;
    int64_t claimed = 0;
    /* the root and every subgraph (control-flow bodies, PartitionedCall) */
    for (uint32_t i = 0; i <= kiln_graph_all_subgraph_count(root); i++) {
        kiln_graph *g = i ? kiln_graph_all_subgraph(root, i - 1) : root;
        for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n)) {
            const char *e = kiln_engine_for_node(g, n);
            claimed += e && strcmp(e, ACME_ENGINE) == 0;
        }
    }
    kiln_attrs_set_int(kiln_graph_attrs(root), "acme_claimed", claimed);
    if (ctx)
        kiln_pass_stat_add(ctx, "claimed_nodes", claimed);
    return KILN_OK;
}

static kiln_status running_param(void *inst, const kiln_graph *g, kiln_node_id n,
                                 kiln_running_param *rp, kiln_error *err)
{
    (void)inst;
    (void)g;
    (void)n;
    (void)err;
    rp->workspace_count = 0; /* the kernels need no scratch */
    return KILN_OK;
}

static kiln_status generate_task(void *inst, const kiln_graph *g, kiln_node_id n,
                                 kiln_task_desc *task, kiln_error *err)
{
    (void)inst;
    (void)err;
    task->kind = KILN_TASK_KERNEL;
    const char *op = kiln_node_op_str(g, n);
    task->kernel_name = strcmp(op, "Add") == 0           ? "acme.add_f32"
                        : strcmp(op, "AcmeAddRelu") == 0 ? "acme.add_relu_f32"
                                                         : "acme.relu_f32";
    return KILN_OK;
}

static kiln_status init(const kiln_host_api *host, kiln_registrar *r, kiln_error *err)
{
    (void)host;
    (void)err;
    static const kiln_engine_desc engine = {
        .struct_size = sizeof(kiln_engine_desc),
        .name = ACME_ENGINE,
        .summary = "ACME NPU (example): Relu, Add and AcmeAddRelu for float32",
        .priority = 100,
        .op_count = sizeof(acme_ops) / sizeof(acme_ops[0]),
        .ops = acme_ops,
        .kernel_create = kernel_create,
        .optimize_original_graph = optimize_original_graph,
        .calc_op_running_param = running_param,
        .generate_task = generate_task,
    };
    /* The fused op is a new op type: its def tells kiln its arity (the
     * fusion that creates it copies the replaced Relu's output descriptor, so
     * no inference function is needed). */
    static const kiln_op_def add_relu = {
        .struct_size = sizeof(kiln_op_def),
        .type = "AcmeAddRelu",
        .domain = "com.acme",
        .summary = "Relu(a + b), numpy broadcasting",
        .min_inputs = 2,
        .max_inputs = 2,
        .min_outputs = 1,
        .max_outputs = 1,
    };
    kiln_status st = kiln_register_op(r, &add_relu);
    return st != KILN_OK ? st : kiln_register_engine(r, &engine);
}

KILN_PLUGIN_DEFINE("acme.engine", "0.1.0", "Apache-2.0", "ACME NPU engine (example)", init, NULL)

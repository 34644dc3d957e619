/*
 * tp_custom_op.c - a vendor's custom op (docs/ops.md): AcmeDup repeats its
 * input along the last axis.  It registers the op with its own inference
 * (the last dim doubles) and folding (the rows written twice), and an engine
 * "acme_ops" with its kernel (the same rows), so InferShapes fills its outputs
 * and folds it when its input is constant, and the node left runs on the
 * engine.  tests/e2e/custom_op.sh uses it in a graph JSON.
 */
#include <kiln/kiln.h>
#include <string.h>

static kiln_status dup_infer(kiln_op_node *nd, kiln_error *err)
{
    if (!nd->in[0].present)
        return kiln_errorf(err, KILN_ERR_INVALID, "node %s (AcmeDup): input 0 is not connected",
                           nd->name);
    nd->out[0].dtype = nd->in[0].dtype;
    nd->out[0].s = nd->in[0].s;
    int32_t r = nd->out[0].s.rank;
    if (r < 1)
        return kiln_errorf(err, KILN_ERR_INVALID, "node %s (AcmeDup): needs rank >= 1, got %d",
                           nd->name, (int)r);
    if (nd->out[0].s.d[r - 1] >= 0)
        nd->out[0].s.d[r - 1] *= 2;
    return KILN_OK;
}

/* Each row of @p n bytes of @p in written twice into @p out. */
static void dup_rows(char *out, const char *in, size_t row, size_t nbytes)
{
    size_t rows = row ? nbytes / row : 0;
    for (size_t i = 0; i < rows; i++) {
        memcpy(out + 2 * i * row, in + i * row, row);
        memcpy(out + (2 * i + 1) * row, in + i * row, row);
    }
}

static kiln_status dup_fold(const kiln_op_node *nd, kiln_op_value *out, kiln_error *err)
{
    (void)err;
    const kiln_op_value *v = nd->in[0].val;
    if (!v || v->s.rank < 1 || out[0].nbytes != 2 * v->nbytes)
        return KILN_ERR_UNSUPPORTED;
    dup_rows(out[0].data, v->data, (size_t)v->s.d[v->s.rank - 1] * kiln_dtype_size(v->dtype),
             v->nbytes);
    return KILN_OK;
}

static kiln_status dup_kernel(void *state, const kiln_kernel_args *a, kiln_error *err)
{
    (void)state;
    const kiln_tensor *x = &a->inputs[0], *y = &a->outputs[0];
    if (a->input_count != 1 || a->output_count != 1 || x->rank < 1 ||
        y->nbytes != 2 * x->nbytes)
        return kiln_errorf(err, KILN_ERR_INVALID, "node %s (AcmeDup): bad operands",
                           kiln_node_name_str(a->graph, a->node));
    dup_rows(y->data, x->data, (size_t)x->dims[x->rank - 1] * kiln_dtype_size(x->dtype),
             x->nbytes);
    return KILN_OK;
}

static kiln_status dup_kernel_create(void *inst, const kiln_graph *g, kiln_node_id n,
                                     kiln_kernel_fn *fn, void **state, kiln_error *err)
{
    (void)inst;
    if (strcmp(kiln_node_op_str(g, n), "AcmeDup") != 0)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "node %s: acme_ops has no kernel for %s",
                           kiln_node_name_str(g, n), kiln_node_op_str(g, n));
    *fn = dup_kernel;
    *state = NULL;
    return KILN_OK;
}

static kiln_status init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)h;
    (void)e;
    static const kiln_op_def dup = {
        .struct_size = sizeof(kiln_op_def),
        .type = "AcmeDup",
        .domain = "com.acme",
        .summary = "repeat the input along its last axis",
        .min_inputs = 1,
        .max_inputs = 1,
        .min_outputs = 1,
        .max_outputs = 1,
        .infer = dup_infer,
        .fold = dup_fold,
    };
    static const kiln_op_info ops[] = {{sizeof(kiln_op_info), "AcmeDup", 0, NULL, 0}};
    static const kiln_engine_desc engine = {
        .struct_size = sizeof(kiln_engine_desc),
        .name = "acme_ops",
        .summary = "the kernel of AcmeDup",
        .priority = 50,
        .op_count = 1,
        .ops = ops,
        .kernel_create = dup_kernel_create,
    };
    kiln_status st = kiln_register_op(r, &dup);
    return st == KILN_OK ? kiln_register_engine(r, &engine) : st;
}

KILN_PLUGIN_DEFINE("com.acme.ops", "1.0.0", "MIT", "a custom op with inference and folding",
                   init, NULL)

/*
 * tp_custom_op.c - a vendor's custom op (docs/ops.md): AcmeDup repeats its
 * input along the last axis.  It registers the op with its own inference
 * (the last dim doubles) and folding (the rows written twice), and no engine
 * kernel, so InferShapes fills its outputs and folds it when its input is
 * constant.  tests/e2e/custom_op.sh uses it in a graph JSON.
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

static kiln_status dup_fold(const kiln_op_node *nd, kiln_op_value *out, kiln_error *err)
{
    (void)err;
    const kiln_op_value *v = nd->in[0].val;
    if (!v || v->s.rank < 1 || out[0].nbytes != 2 * v->nbytes)
        return KILN_ERR_UNSUPPORTED;
    size_t row = (size_t)v->s.d[v->s.rank - 1] * kiln_dtype_size(v->dtype);
    size_t rows = row ? v->nbytes / row : 0;
    for (size_t i = 0; i < rows; i++) {
        memcpy((char *)out[0].data + 2 * i * row, (const char *)v->data + i * row, row);
        memcpy((char *)out[0].data + (2 * i + 1) * row, (const char *)v->data + i * row, row);
    }
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
    return kiln_register_op(r, &dup);
}

KILN_PLUGIN_DEFINE("com.acme.ops", "1.0.0", "MIT", "a custom op with inference and folding",
                   init, NULL)

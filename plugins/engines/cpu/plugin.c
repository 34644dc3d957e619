/*
 * plugin.c - libkiln_cpu.so (plugin "kiln.cpu"): the shape-inference pass
 * (cpu_infer_shapes_pass, infer_*.c).
 *
 * The kernels that used to form the single "cpu" engine are now the engines
 * aicore, vector, hostcpu and rts (their own plugins, docs/engines.md).  This
 * plugin links their kernel libraries so that constant folding can evaluate
 * a node with its kernel (cpu_find_op, infer_fold.c), whichever engine owns
 * the op; it registers no engine.
 */
#include "cpu_engine.h"

const cpu_op *cpu_find_op(const char *op_type)
{
    const cpu_op *const tabs[] = {cpu_ops_nn, cpu_ops_vector, cpu_ops_host, cpu_ops_rts};
    const uint32_t counts[] = {cpu_ops_nn_count, cpu_ops_vector_count, cpu_ops_host_count,
                               cpu_ops_rts_count};
    for (unsigned t = 0; t < sizeof(tabs) / sizeof(tabs[0]); t++) {
        const cpu_op *op = cpu_table_find(tabs[t], counts[t], op_type);
        if (op)
            return op;
    }
    return NULL;
}

static kiln_status init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)h;
    (void)e;
    return kiln_register_pass(r, &cpu_infer_shapes_pass);
}

KILN_PLUGIN_DEFINE("kiln.cpu", "0.1.0", "Apache-2.0", "shape inference (pass InferShapes)", init,
                   NULL)

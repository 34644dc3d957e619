/*
 * plugin.c - libkiln_vector.so (plugin "kiln.vector"): the engine "vector",
 * GE's VectorEngine: element-wise, Cast, reductions and Softmax
 * (vector_ops.c).  Priority 30: below aicore, above rts and hostcpu.
 */
#include "basic_ops.h"

CPU_ENGINE(
    vector_engine,
    {
        .name = "vector",
        .summary = "vector kernels: element-wise arithmetic and activations, Cast, reductions, "
                   "Softmax",
        .priority = 30,
        .table = cpu_ops_vector,
        .count = &cpu_ops_vector_count,
        .optimize_original_graph = cpu_vector_optimize_original,
    })

static kiln_status init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)h;
    return vector_engine_register(r, e);
}

KILN_PLUGIN_DEFINE("kiln.vector", "0.1.0", "Apache-2.0",
                   "vector engine (engine vector): element-wise, reductions, Softmax", init, NULL)

/*
 * plugin.c - libkiln_vector.so (plugin "kiln.vector"): the engine "vector",
 * GE's VectorEngine: element-wise, Cast, reductions and Softmax
 * (vector_ops.c).  Priority 30: below aicore, above rts and hostcpu.  Its
 * optimize_subgraph (vec_fusion.c) fuses element-wise chains of its partitions
 * into KilnFusedElementwise nodes; its built-in fusion passes
 * (vec_fusion_passes.c) make HardSwish and LayerNormalization of their
 * spelled-out forms.
 */
#include "basic_ops.h"
#include "vec_fusion.h"

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
        .optimize_subgraph = vec_optimize_subgraph,
        .optimize_subgraph_wanted = vec_optimize_subgraph_wanted,
    })

static kiln_status init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)h;
    kiln_status st = vec_register_fused_op(r, e);
    if (st == KILN_OK)
        st = vector_engine_register(r, e);
    return st == KILN_OK ? vec_register_fusion_passes(r, e) : st;
}

KILN_PLUGIN_DEFINE("kiln.vector", "0.1.0", "Apache-2.0",
                   "vector engine (engine vector): element-wise, reductions, Softmax", init, NULL)

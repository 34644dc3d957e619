/*
 * plugin.c - libkiln_aicore.so (plugin "kiln.aicore"): the engine "aicore",
 * GE's AIcoreEngine: the dense math of nn_*.c (table cpu_ops_nn[] in
 * nn_table.c) on oneDNN (Conv, nn_dnnl.c) and OpenBLAS, the stand-ins for
 * the cube unit.  Priority 40, the
 * highest of the built-in engines.  Formats: ND and the channel-first
 * layouts the kernels index (NCHW, NCDHW).  Its built-in fusion passes
 * (nn_fusion.c: ConvBatchNormFusionPass, MatMulBiasAddFusionPass,
 * PostActivationFusionPass) fold BatchNormalization and bias Adds into Conv /
 * Gemm and fuse their activations.
 */
#include "nn_ops.h"

CPU_ENGINE(aicore_engine,
           {
               .name = "aicore",
               .summary = "dense math on oneDNN and OpenBLAS: Conv, ConvTranspose, MatMul, Gemm, LSTM, "
                          "BatchNormalization, pooling, Resize",
               .priority = 40,
               .table = cpu_ops_nn,
               .count = &cpu_ops_nn_count,
               .formats = "ND,NCHW,NCDHW,NHWC",
               .optimize_original_graph = nn_aicore_optimize_original,
           })

static kiln_status init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)h;
    kiln_status st = aicore_engine_register(r, e);
    return st == KILN_OK ? nn_register_fusion_passes(r, e) : st;
}

/* The oneDNN engine and scratch, made by the first Conv binding (nn_dnnl.c). */
static void fini(void)
{
    nn_dnnl_shutdown();
}

KILN_PLUGIN_DEFINE("kiln.aicore", "0.1.0", "Apache-2.0",
                   "AI-core-like engine (engine aicore): Conv on oneDNN; MatMul, Gemm, LSTM "
                   "on OpenBLAS",
                   init, fini)

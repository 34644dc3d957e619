/*
 * executor.c - libkiln_fusion.so: GE's FusionPassExecutor call sites as graph
 * passes.  Each runs every loaded fusion pass of one GE stage over the graph
 * (root, then every subgraph: kiln_fusion_run_stage walks the subgraphs
 * itself, hence KILN_PASS_NO_SUBGRAPHS), in alphabetical order of name,
 * honouring ge.optimizationSwitch and ge.fusionSwitchFile (docs/fusion.md).
 *
 *   RunCustomPassBeforeInferShape          stage 0  (prepare, before InferShapes)
 *   RunCustomPassAfterInferShape           stage 1  (prepare, after InferShapes)
 *   RunBuiltinFusionPasses                 stage 16 (optimize_original: engines' fusions)
 *   RunCustomPassAfterBuiltinFusion        stage 3  (optimize_original)
 *   RunCustomPassAfterOriginGraphOptimize  stage 4  (end of optimize_original)
 */
#include <kiln/kiln.h>

#define STAGE_PASS(fn, stage)                                                                      \
    static kiln_pass_result fn(void *inst, kiln_pass_ctx *ctx, kiln_graph *g)                      \
    {                                                                                              \
        (void)inst;                                                                                \
        return kiln_fusion_run_stage(ctx, g, stage);                                               \
    }

STAGE_PASS(run_before_infer_shape, KILN_FUSION_STAGE_BEFORE_INFER_SHAPE)
STAGE_PASS(run_after_infer_shape, KILN_FUSION_STAGE_AFTER_INFER_SHAPE)
STAGE_PASS(run_builtin, KILN_FUSION_STAGE_BUILTIN)
STAGE_PASS(run_after_builtin, KILN_FUSION_STAGE_AFTER_BUILTIN_FUSION)
STAGE_PASS(run_after_origin_optimize, KILN_FUSION_STAGE_AFTER_ORIGIN_GRAPH_OPTIMIZE)

#define DESC(nm, sum, fn)                                                                          \
    {                                                                                              \
        .struct_size = sizeof(kiln_pass_desc), .kind = KILN_PASS_KIND_GRAPH, .name = nm,           \
        .summary = sum, .flags = KILN_PASS_NO_SUBGRAPHS, .run_graph = fn                           \
    }

static const kiln_pass_desc passes[] = {
    DESC("RunCustomPassBeforeInferShape",
         "run the fusion passes of stage BeforeInferShape (GE kBeforeInferShape)",
         run_before_infer_shape),
    DESC("RunCustomPassAfterInferShape",
         "run the fusion passes of stage AfterInferShape (GE kAfterInferShape)",
         run_after_infer_shape),
    DESC("RunBuiltinFusionPasses", "run the engines' built-in fusion passes", run_builtin),
    DESC("RunCustomPassAfterBuiltinFusion",
         "run the fusion passes of stage AfterBuiltinFusion (GE kAfterBuiltinFusionPass)",
         run_after_builtin),
    DESC("RunCustomPassAfterOriginGraphOptimize",
         "run the fusion passes of stage AfterOriginGraphOptimize (GE "
         "kAfterOriginGraphOptimize)",
         run_after_origin_optimize),
};

static kiln_status init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)h;
    (void)e;
    for (size_t i = 0; i < sizeof(passes) / sizeof(passes[0]); i++) {
        kiln_status st = kiln_register_pass(r, &passes[i]);
        if (st != KILN_OK)
            return st;
    }
    return KILN_OK;
}

KILN_PLUGIN_DEFINE("kiln.fusion", "0.1.0", "Apache-2.0",
                   "FusionPassExecutor: runs the loaded fusion passes of each GE stage", init, NULL)

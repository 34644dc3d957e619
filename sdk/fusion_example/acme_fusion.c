/*
 * acme_fusion.c - an out-of-tree kiln PATTERN FUSION pass:
 * AcmeAddReluFusionPass rewrites Relu(Add(a, b)) into the vendor engine's
 * fused op AcmeAddRelu(a, b) (sdk/engine_example registers the op and runs
 * it), for float32 tensors.
 *
 * A pattern fusion pass gives kiln three hooks (docs/fusion.md):
 *   patterns           the small graph to look for: pattern nodes by op type,
 *                      "Data" nodes for the boundary inputs, edges, and the
 *                      pattern outputs; the kernel's matcher finds every
 *                      non-overlapping occurrence whose inner tensors are not
 *                      used outside the match
 *   meet_requirements  veto a match (here: dtypes)
 *   replacement        build the graph that takes the match's place: kiln
 *                      hands a graph holding one Data node per boundary
 *                      input; add the new nodes and one NetOutput whose
 *                      input j is boundary output j
 * kiln then checks the fusion is legal (no cycle, one stream label, one
 * engine), splices the replacement in, records the fused node's origins
 * (_datadump_origin_op_names, _kiln_fusion_passes) and deletes the match.
 *
 * The pass declares stage AFTER_INFER_SHAPE (GE kAfterInferShape): kiln's
 * FusionPassExecutor runs it with the other custom fusion passes of that
 * stage; a manifest may also list it by name in a stage.
 */
#include <kiln/kiln.h>

#include <stdio.h>
#include <string.h>

/* Pattern node indices, as kiln_pattern_node returned them. */
typedef struct acme_fusion {
    int32_t a, b, add, relu;
} acme_fusion;

static kiln_status create(const kiln_options *opts, kiln_error *err, void **inst)
{
    (void)opts;
    acme_fusion *f = kiln_alloc(sizeof(*f));
    if (!f)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    memset(f, 0, sizeof(*f));
    *inst = f;
    return KILN_OK;
}

static void destroy(void *inst) { kiln_free(inst); }

static kiln_status patterns(void *inst, kiln_pattern *p, kiln_error *err)
{
    acme_fusion *f = inst;
    f->a = kiln_pattern_node(p, "a", "Data");
    f->b = kiln_pattern_node(p, "b", "Data");
    f->add = kiln_pattern_node(p, "add", "Add");
    f->relu = kiln_pattern_node(p, "relu", "Relu");
    if (f->a < 0 || f->b < 0 || f->add < 0 || f->relu < 0 ||
        kiln_pattern_edge(p, f->a, 0, f->add, 0) != KILN_OK ||
        kiln_pattern_edge(p, f->b, 0, f->add, 1) != KILN_OK ||
        kiln_pattern_edge(p, f->add, 0, f->relu, 0) != KILN_OK ||
        kiln_pattern_output(p, f->relu, 0) != KILN_OK)
        return kiln_errorf(err, KILN_ERR_NOMEM, "AcmeAddReluFusionPass: cannot build the pattern");
    return KILN_OK;
}

static bool is_f32(const kiln_graph *g, kiln_anchor a)
{
    kiln_graph *mg = (kiln_graph *)(uintptr_t)g; /* read only */
    const kiln_tensor_desc *d = a.node ? kiln_node_output_desc(mg, a.node, a.index) : NULL;
    return d && kiln_desc_dtype(d) == KILN_DT_FLOAT32;
}

/* The engine's kernel is float32 only. */
static bool meet_requirements(void *inst, const kiln_graph *g, const kiln_match *m)
{
    acme_fusion *f = inst;
    kiln_node_id relu = kiln_match_node(m, f->relu);
    return is_f32(g, kiln_match_input(m, 0)) && is_f32(g, kiln_match_input(m, 1)) &&
           is_f32(g, (kiln_anchor){relu, 0});
}

static kiln_status replacement(void *inst, kiln_pass_ctx *ctx, const kiln_graph *g,
                               const kiln_match *m, kiln_graph *repl)
{
    acme_fusion *f = inst;
    kiln_error *err = kiln_pass_error(ctx);
    kiln_node_id relu = kiln_match_node(m, f->relu);
    char name[256];
    snprintf(name, sizeof(name), "%s_acme_add_relu", kiln_node_name_str(g, relu));
    kiln_node_id fused = kiln_graph_add_node(repl, name, "AcmeAddRelu", 2, 1);
    kiln_node_id out = kiln_graph_add_node(repl, "acme_out", "NetOutput", 1, 0);
    if (!fused || !out ||
        kiln_edge_add(repl, kiln_fusion_replacement_input(repl, 0), 0, fused, 0) != KILN_OK ||
        kiln_edge_add(repl, kiln_fusion_replacement_input(repl, 1), 0, fused, 1) != KILN_OK ||
        kiln_edge_add(repl, fused, 0, out, 0) != KILN_OK)
        return kiln_errorf(err, KILN_ERR_NOMEM, "AcmeAddReluFusionPass: cannot build %s", name);
    /* the fused output is the Relu's tensor: same dtype and shape */
    kiln_graph *mg = (kiln_graph *)(uintptr_t)g;
    kiln_status st = kiln_desc_copy(repl, kiln_node_output_desc(repl, fused, 0),
                                    kiln_node_output_desc(mg, relu, 0));
    if (st != KILN_OK)
        return kiln_errorf(err, st, "AcmeAddReluFusionPass: cannot copy a descriptor");
    kiln_attrs_set_string(kiln_node_attrs_mut(repl, fused), "acme_fused_from", "Add,Relu");
    return KILN_OK;
}

static kiln_status init(const kiln_host_api *host, kiln_registrar *r, kiln_error *err)
{
    (void)host;
    (void)err;
    static const kiln_fusion_pass_desc pass = {
        .struct_size = sizeof(kiln_fusion_pass_desc),
        .name = "AcmeAddReluFusionPass",
        .summary = "Relu(Add(a, b)) -> AcmeAddRelu(a, b), float32 (acme_npu's fused kernel)",
        .create = create,
        .destroy = destroy,
        .kind = KILN_FUSION_PATTERN,
        .stage = KILN_FUSION_STAGE_AFTER_INFER_SHAPE,
        .patterns = patterns,
        .meet_requirements = meet_requirements,
        .replacement = replacement,
    };
    return kiln_register_fusion_pass(r, &pass);
}

KILN_PLUGIN_DEFINE("acme.fusion", "0.1.0", "Apache-2.0", "ACME Add+Relu fusion (example)", init,
                   NULL)

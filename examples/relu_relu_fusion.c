/*
 * relu_relu_fusion.c - an example pattern fusion pass (docs/fusion.md):
 * Relu(Relu(x)) -> Relu(x), run by RunCustomPassAfterOriginGraphOptimize.
 *
 *   cc -std=c11 -shared -fPIC -DKILN_PLUGIN -Iplugin-api \
 *      -o libexample_fusion.so examples/relu_relu_fusion.c
 */
#include <kiln/kiln.h>

/* The pattern: x (any producer) -> Relu -> Relu, whose output is the match's. */
static kiln_status patterns(void *inst, kiln_pattern *p, kiln_error *err)
{
    (void)inst;
    int32_t x = kiln_pattern_node(p, "x", "Data");
    int32_t r1 = kiln_pattern_node(p, "r1", "Relu");
    int32_t r2 = kiln_pattern_node(p, "r2", "Relu");
    if (kiln_pattern_edge(p, x, 0, r1, 0) != KILN_OK ||
        kiln_pattern_edge(p, r1, 0, r2, 0) != KILN_OK)
        return kiln_errorf(err, KILN_ERR_NOMEM, "ReluReluFusionPass: out of memory");
    return kiln_pattern_output(p, r2, 0);
}

/* The replacement: Data 0 (the match's input) -> a copy of r2 -> NetOutput. */
static kiln_status replacement(void *inst, kiln_pass_ctx *ctx, const kiln_graph *g,
                               const kiln_match *m, kiln_graph *repl)
{
    (void)inst;
    (void)ctx;
    kiln_node_id r = kiln_graph_copy_node(repl, g, kiln_match_node(m, 2), NULL);
    kiln_node_id out = kiln_graph_add_node(repl, "out", "NetOutput", 1, 0);
    if (!r || !out || kiln_edge_add(repl, kiln_fusion_replacement_input(repl, 0), 0, r, 0))
        return KILN_ERR_NOMEM;
    return kiln_edge_add(repl, r, 0, out, 0);
}

static const kiln_fusion_pass_desc relu_relu = {.struct_size = sizeof(kiln_fusion_pass_desc),
                                                .name = "ReluReluFusionPass",
                                                .summary = "Relu(Relu(x)) -> Relu(x)",
                                                .kind = KILN_FUSION_PATTERN,
                                                .stage =
                                                    KILN_FUSION_STAGE_AFTER_ORIGIN_GRAPH_OPTIMIZE,
                                                .patterns = patterns,
                                                .replacement = replacement};

static kiln_status init(const kiln_host_api *host, kiln_registrar *reg, kiln_error *err)
{
    (void)host;
    (void)err;
    return kiln_register_fusion_pass(reg, &relu_relu);
}

KILN_PLUGIN_DEFINE("example.fusion", "1.0", "Apache-2.0", "Relu(Relu(x)) -> Relu(x)", init, NULL)

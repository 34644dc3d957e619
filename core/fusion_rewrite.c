/*
 * fusion_rewrite.c - PLACEHOLDER: replacement graphs, kiln_graph_copy_node,
 * kiln_fusion_replace, kiln_fusion_can_fuse, kiln_fusion_report.  Being built
 * (issue 12); every call fails with KILN_ERR_UNSUPPORTED until then.
 */
#include "base.h"

#include "kiln/kiln.h"

bool kiln_fusion_can_fuse(const kiln_graph *g, const kiln_node_id *nodes, uint32_t n, char *reason,
                          size_t reason_size)
{
    (void)g, (void)nodes, (void)n;
    if (reason && reason_size)
        snprintf(reason, reason_size, "CanFuse is not built yet");
    return false;
}

kiln_status kiln_fusion_report(kiln_pass_ctx *ctx, kiln_graph *g, const kiln_node_id *before,
                               uint32_t nb, const kiln_node_id *after, uint32_t na)
{
    (void)ctx, (void)g, (void)before, (void)nb, (void)after, (void)na;
    return KILN_ERR_UNSUPPORTED;
}

kiln_graph *kiln_fusion_replacement_new(const kiln_graph *g, const kiln_fusion_boundary *b)
{
    (void)g, (void)b;
    return NULL;
}

kiln_node_id kiln_fusion_replacement_input(const kiln_graph *repl, uint32_t i)
{
    (void)repl, (void)i;
    return 0;
}

void kiln_fusion_replacement_free(kiln_graph *repl)
{
    (void)repl;
}

kiln_node_id kiln_graph_copy_node(kiln_graph *dst, const kiln_graph *src, kiln_node_id n,
                                  const char *name)
{
    (void)dst, (void)src, (void)n, (void)name;
    return 0;
}

kiln_status kiln_fusion_replace(kiln_pass_ctx *ctx, kiln_graph *g, const kiln_fusion_boundary *b,
                                kiln_graph *repl)
{
    (void)ctx, (void)g, (void)b, (void)repl;
    return KILN_ERR_UNSUPPORTED;
}

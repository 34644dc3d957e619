/*
 * fusion_exec.c - PLACEHOLDER: the pattern-match accessors and the fusion
 * executor (issue 12).  Every call fails until the matcher lands.
 */
#include "base.h"
#include "pattern.h"

#include "kiln/kiln.h"

kiln_status kiln_pattern_output(kiln_pattern *p, int32_t node, uint32_t so)
{
    (void)p, (void)node, (void)so;
    return KILN_ERR_UNSUPPORTED;
}

kiln_status kiln_pattern_set_flags(kiln_pattern *p, uint32_t flags)
{
    (void)p, (void)flags;
    return KILN_ERR_UNSUPPORTED;
}

kiln_status kiln_pattern_const_value(kiln_pattern *p, int32_t node, const kiln_tensor_value *value)
{
    (void)p, (void)node, (void)value;
    return KILN_ERR_UNSUPPORTED;
}

uint32_t kiln_match_input_count(const kiln_match *m)
{
    (void)m;
    return 0;
}

kiln_anchor kiln_match_input(const kiln_match *m, uint32_t i)
{
    (void)m, (void)i;
    return (kiln_anchor){0, 0};
}

uint32_t kiln_match_output_count(const kiln_match *m)
{
    (void)m;
    return 0;
}

kiln_anchor kiln_match_output(const kiln_match *m, uint32_t j)
{
    (void)m, (void)j;
    return (kiln_anchor){0, 0};
}

uint32_t kiln_match_node_count(const kiln_match *m)
{
    (void)m;
    return 0;
}

kiln_node_id kiln_match_node_at(const kiln_match *m, uint32_t k)
{
    (void)m, (void)k;
    return 0;
}

const kiln_fusion_boundary *kiln_match_boundary(const kiln_match *m)
{
    (void)m;
    return NULL;
}

kiln_pass_result kiln_fusion_run_stage(kiln_pass_ctx *ctx, kiln_graph *g, int32_t stage)
{
    (void)ctx, (void)g, (void)stage;
    return KILN_PASS_FAILED;
}

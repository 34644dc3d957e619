/*
 * fusion_int.h - internals shared by the fusion rewriter (fusion_rewrite.c),
 * the inspector (fusion_inspect.c) and the report / DOT writers.  Only core/
 * includes this header.
 */
#ifndef KILN_CORE_FUSION_INT_H
#define KILN_CORE_FUSION_INT_H

#include "base.h"

/* GE ATTR_NAME_DATA_DUMP_ORIGIN_OP_NAMES / _TYPES (list_string). */
#define KILN_ATTR_ORIGIN_NAMES "_datadump_origin_op_names"
#define KILN_ATTR_ORIGIN_TYPES "_datadump_origin_op_types"
/* GE GraphPassUtil's pass-name record (list_string): the fusion passes that
 * produced the node, oldest first. */
#define KILN_ATTR_FUSION_PASSES "pass_name"

/** Name of the pass running in @p ctx, NULL when none (outside a pass). */
const char *kiln__fusion_pass_name(const kiln_pass_ctx *ctx);
/** ReportFuse's argument checks (errors recorded in kiln_pass_error). */
kiln_status kiln__fusion_report_check(kiln_pass_ctx *ctx, const kiln_graph *g,
                                      const kiln_node_id *before, uint32_t nb,
                                      const kiln_node_id *after, uint32_t na);
/** ReportFuse's attribute records on the after-nodes (may fail with NOMEM). */
kiln_status kiln__fusion_report_attrs(kiln_pass_ctx *ctx, kiln_graph *g, const kiln_node_id *before,
                                      uint32_t nb, const kiln_node_id *after, uint32_t na);
/** ReportFuse's counters ("matched", "effected"). */
void kiln__fusion_report_count(kiln_pass_ctx *ctx);

#endif

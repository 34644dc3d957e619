/* TEMPORARY placeholders until gepass.c / passctx.c land (owner: GEPass work). Delete when done. */
#include "base.h"
void kiln_diag(kiln_pass_ctx *ctx, kiln_severity sev, const char *fmt, ...) { (void)ctx; (void)sev; (void)fmt; }
kiln_error *kiln_pass_error(kiln_pass_ctx *ctx) { (void)ctx; return NULL; }
const char *kiln_pass_session_option(const kiln_pass_ctx *ctx, const char *key) { (void)ctx; (void)key; return NULL; }
bool kiln_pass_after_subgraph(const kiln_pass_ctx *ctx) { (void)ctx; return false; }
void kiln_pass_stat_add(kiln_pass_ctx *ctx, const char *counter, int64_t delta) { (void)ctx; (void)counter; (void)delta; }
void kiln_pass_explain(kiln_pass_ctx *ctx, kiln_graph *g, kiln_node_id n, const char *fmt, ...) { (void)ctx; (void)g; (void)n; (void)fmt; }
void kiln_pass_repass(kiln_pass_ctx *ctx, kiln_graph *g, kiln_node_id n) { (void)ctx; (void)g; (void)n; }
void kiln_pass_repass_immediate(kiln_pass_ctx *ctx, kiln_graph *g, kiln_node_id n) { (void)ctx; (void)g; (void)n; }
void kiln_pass_repass_global_immediate(kiln_pass_ctx *ctx, kiln_graph *g, kiln_node_id n) { (void)ctx; (void)g; (void)n; }
void kiln_pass_node_deleted(kiln_pass_ctx *ctx, kiln_graph *g, kiln_node_id n) { (void)ctx; (void)g; (void)n; }
void kiln_pass_suspend(kiln_pass_ctx *ctx, kiln_graph *g, kiln_node_id n) { (void)ctx; (void)g; (void)n; }
void kiln_pass_resume(kiln_pass_ctx *ctx, kiln_graph *g, kiln_node_id n) { (void)ctx; (void)g; (void)n; }
void kiln_pass_repass_with_inout(kiln_pass_ctx *ctx, kiln_graph *g, kiln_node_id n, bool immediate) { (void)ctx; (void)g; (void)n; (void)immediate; }
kiln_status kiln_pass_isolate_and_delete(kiln_pass_ctx *ctx, kiln_graph *g, kiln_node_id n, const int32_t *io_map, uint32_t nmap, bool immediate) { (void)ctx; (void)g; (void)n; (void)io_map; (void)nmap; (void)immediate; return KILN_ERR_UNSUPPORTED; }

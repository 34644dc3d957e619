/* TEMPORARY placeholders until graph_edit.c / pattern.c land (owner: lead). */
#include "base.h"
kiln_node_id kiln_graph_insert_before(kiln_graph *g, kiln_node_id dst, uint32_t di, const char *name, const char *op) { (void)g; (void)dst; (void)di; (void)name; (void)op; return 0; }
kiln_node_id kiln_graph_insert_after(kiln_graph *g, kiln_node_id src, uint32_t so, const kiln_anchor *dsts, uint32_t ndst, const char *name, const char *op) { (void)g; (void)src; (void)so; (void)dsts; (void)ndst; (void)name; (void)op; return 0; }
kiln_status kiln_graph_isolate_node(kiln_graph *g, kiln_node_id n, const int32_t *io_map, uint32_t nmap) { (void)g; (void)n; (void)io_map; (void)nmap; return KILN_ERR_UNSUPPORTED; }
kiln_status kiln_graph_replace_node(kiln_graph *g, kiln_node_id old, kiln_node_id repl) { (void)g; (void)old; (void)repl; return KILN_ERR_UNSUPPORTED; }
int32_t kiln_pattern_node(kiln_pattern *p, const char *name, const char *op) { (void)p; (void)name; (void)op; return -1; }
kiln_status kiln_pattern_edge(kiln_pattern *p, int32_t src, uint32_t so, int32_t dst, uint32_t di) { (void)p; (void)src; (void)so; (void)dst; (void)di; return KILN_ERR_UNSUPPORTED; }
kiln_status kiln_pattern_next(kiln_pattern *p) { (void)p; return KILN_ERR_UNSUPPORTED; }
kiln_node_id kiln_match_node(const kiln_match *m, int32_t index) { (void)m; (void)index; return 0; }
uint32_t kiln_match_pattern_index(const kiln_match *m) { (void)m; return 0; }

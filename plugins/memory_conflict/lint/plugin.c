/*
 * plugin.c - registers GraphLint, the W18888 read/write-order lint
 * (graph_lint.c, docs/graph_lint.md), as plugin "kiln.graph_lint".
 */
#include "graph_lint.h"

static kiln_status init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)h;
    (void)e;
    return kiln_register_pass(r, &kiln_graph_lint_pass);
}

KILN_PLUGIN_DEFINE("kiln.graph_lint", "0.1.0", "Apache-2.0",
                   "GraphLint: W18888 unordered writer/reader warnings", init, NULL)

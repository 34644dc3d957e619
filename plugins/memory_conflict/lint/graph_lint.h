/* graph_lint.h - the pass descriptor of libkiln_graph_lint.so (docs/graph_lint.md). */
#ifndef KILN_PLUGIN_GRAPH_LINT_H
#define KILN_PLUGIN_GRAPH_LINT_H

#include <kiln/kiln.h>

extern const kiln_pass_desc kiln_graph_lint_pass;

#endif

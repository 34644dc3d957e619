/*
 * graph_json_ref.h - the reference graph JSON writer of the tests (the
 * jansson-tree writer core/graph_json_write.c used to be), for byte-for-byte
 * comparisons with the direct writer.
 */
#ifndef KILN_TEST_GRAPH_JSON_REF_H
#define KILN_TEST_GRAPH_JSON_REF_H

#include "graph_json.h"

/** The document the tree writer wrote for @p g (kiln__free it); NULL on failure. */
char *kiln_test_graph_json_ref(const kiln_graph *g, kiln_error *err);

#endif

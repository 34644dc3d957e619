/*
 * plugin.c - registers the passes of libkiln_passes.so.
 */
#include "passes.h"

static kiln_status init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)h;
    (void)e;
    kiln_status st = kiln_register_pass(r, &kiln_prune_graph_pass);
    if (st == KILN_OK)
        st = kiln_register_pass(r, &kiln_identity_remove_pass);
    return st;
}

KILN_PLUGIN_DEFINE("kiln.passes", "0.1.0", "Apache-2.0",
                   "graph pruning and Identity removal", init, NULL)

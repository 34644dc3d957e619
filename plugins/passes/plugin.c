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
    /* constant folding and CSE */
    static const kiln_pass_desc *const fold_passes[] = {&kiln_constant_folding_pass, &kiln_cse_pass,
                                                        &kiln_constant_fuse_same_pass,
                                                        &kiln_cond_remove_pass};
    for (size_t i = 0; st == KILN_OK && i < sizeof(fold_passes) / sizeof(fold_passes[0]); i++)
        st = kiln_register_pass(r, fold_passes[i]);
    /* Simplification passes */
    static const kiln_pass_desc *const simplify[] = {
        &kiln_cast_remove_pass,
        &kiln_reshape_remove_pass,
        &kiln_unchanged_transpose_remove_pass,
        &kiln_transpose_merge_pass,
        &kiln_transop_symmetry_elimination_pass,
        &kiln_inner_identity_delete_pass,
        &kiln_assign_remove_pass,
    };
    for (size_t i = 0; st == KILN_OK && i < sizeof(simplify) / sizeof(simplify[0]); i++)
        st = kiln_register_pass(r, simplify[i]);
    return st;
}

KILN_PLUGIN_DEFINE("kiln.passes", "0.1.0", "Apache-2.0",
                   "graph pruning, Identity removal, constant folding, CSE and graph "
                   "simplification", init, NULL)

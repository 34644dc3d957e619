/* passes.h - descriptors of the passes in this plugin (one pass per file). */
#ifndef KILN_PLUGIN_PASSES_H
#define KILN_PLUGIN_PASSES_H

#include <kiln/kiln.h>

extern const kiln_pass_desc kiln_prune_graph_pass;
extern const kiln_pass_desc kiln_identity_remove_pass;

/* constant folding and CSE */
extern const kiln_pass_desc kiln_constant_folding_pass;
extern const kiln_pass_desc kiln_cse_pass;
extern const kiln_pass_desc kiln_constant_fuse_same_pass;
extern const kiln_pass_desc kiln_cond_remove_pass;

/* Simplification passes (docs/optimizer.md, "Simplification passes"). */
extern const kiln_pass_desc kiln_cast_remove_pass;
extern const kiln_pass_desc kiln_reshape_remove_pass;
extern const kiln_pass_desc kiln_unchanged_transpose_remove_pass;
extern const kiln_pass_desc kiln_transpose_merge_pass;
extern const kiln_pass_desc kiln_transop_symmetry_elimination_pass;
extern const kiln_pass_desc kiln_inner_identity_delete_pass;
extern const kiln_pass_desc kiln_assign_remove_pass;

#endif

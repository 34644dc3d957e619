/* host_opt.h - the host-CPU engine's graph optimisation (host_fold.c). */
#ifndef KILN_HOST_OPT_H
#define KILN_HOST_OPT_H

#include <kiln/kiln.h>

/** Gather(Shape(x), const indices) whose picked dims of x are static -> Const. */
kiln_status host_fold_shape_dims(kiln_pass_ctx *ctx, kiln_graph *root);

/** hostcpu's optimize_original_graph: same-shape reshape-likes removed
 *  (cpu_remove_noops), then host_fold_shape_dims; root and every subgraph. */
kiln_status host_optimize_original(void *inst, kiln_pass_ctx *ctx, kiln_graph *root);

#endif

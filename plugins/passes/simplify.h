/*
 * simplify.h - helpers shared by the simplification passes of this plugin
 * (CastRemovePass, ReshapeRemovePass, UnchangedTransposeRemovePass,
 * TransposeMergePass, TransOpSymmetryEliminationPass, InnerIdentityDeletePass,
 * AssignRemovePass).  See docs/optimizer.md, "Simplification passes".
 *
 * Common safety rules of these passes, checked through these helpers:
 *   - a node marked `_cannot_be_deleted` (the isolation copies of the
 *     memory-conflict passes, anything a user pins) is never removed, rewired
 *     or retyped;
 *   - a node feeding a NetOutput is never removed (a model output keeps the
 *     name of its producer);
 *   - a producer output that is a reference (`ref_input`) is never bypassed.
 */
#ifndef KILN_PASSES_SIMPLIFY_H
#define KILN_PASSES_SIMPLIFY_H

#include <kiln/kiln.h>

#define SIMP_MAX_RANK 32

/* Op type symbols of one context, interned once per graph walk. */
typedef struct simp_syms {
    kiln_sym cast, reshape, flatten, squeeze, unsqueeze, transpose, identity, netoutput, cnst,
        constant, data, refdata, variable, variablev2, assign;
} simp_syms;

void simp_syms_init(simp_syms *s, kiln_graph *g);
bool simp_op_is(const kiln_graph *g, kiln_node_id n, kiln_sym op);
/* Marked `_cannot_be_deleted`. */
bool simp_pinned(const kiln_graph *g, kiln_node_id n);
/* Some consumer of output @p o is a NetOutput. */
bool simp_feeds_netoutput(const kiln_graph *g, kiln_node_id n, uint32_t o, const simp_syms *s);
/* The producer output is a reference output (GE reference ops). */
bool simp_is_ref_output(kiln_graph *g, kiln_anchor a);
/* Static shape (known rank, every dim >= 0). */
bool simp_static(const kiln_tensor_desc *d);
/* Same dtype and the same static shape. */
bool simp_same_static(const kiln_tensor_desc *a, const kiln_tensor_desc *b);
/* Integers of a Const/Constant producer's `value` (int32/int64, rank <= 1). */
bool simp_const_ints(kiln_graph *g, kiln_anchor a, const simp_syms *s, int64_t *out, uint32_t cap,
                     uint32_t *n);
/* Integer list attribute @p key of @p n, else the constant input @p in
 * (when in < input count and connected).  *present is false when neither is
 * given (the op's default applies); the result is false when an input is
 * given but is not a constant. */
bool simp_node_ints(kiln_graph *g, kiln_node_id n, const char *key, uint32_t in, const simp_syms *s,
                    int64_t *out, uint32_t cap, uint32_t *cnt, bool *present);
/* Target dtype of a Cast (`to` as a dtype or an ONNX TensorProto code). */
bool simp_cast_to(const kiln_graph *g, kiln_node_id n, kiln_dtype *out);
/* Remove @p n when nothing reads it any more (no data or control
 * successor, not pinned, not a Data/NetOutput), then the same for the
 * constant inputs it fed. Reports deletions to the walk.  Returns the number
 * of nodes removed. */
uint32_t simp_remove_if_dead(kiln_pass_ctx *ctx, kiln_graph *g, kiln_node_id n, const simp_syms *s);
/* Every value of @p from is exactly representable in @p to. */
bool simp_dtype_holds(kiln_dtype to, kiln_dtype from);

#endif

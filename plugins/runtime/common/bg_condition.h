/*
 * bg_condition.h - the runtime graph build of If/Case (GE runtime/v2
 * graph_builder/bg_condition): lowering a condition node of a kiln graph
 * into GE's lowered form, with the two policies that keep branch outputs
 * correct at run time (docs/control_flow_lowering.md).
 *
 * The lowered node keeps its name and op type (`If` or `Case`) and gets N+1
 * subgraphs:
 *
 *   subgraph 0, role "cond" (GE CondGraph): the control frame
 *       InnerData(index 0) -> SwitchNotify (N+1 outputs, _request_watcher)
 *       SwitchNotify:0 -> WatcherPlaceholder
 *       SwitchNotify:i -> BranchPivot(branch=i) => BranchDone(branch=i) => WaitAnyone
 *   subgraphs 1..N, the branches in order, roles kept: one InnerData per
 *       distinct outer value the branch uses or returns (attr `index`: the
 *       lowered node's input), the branch's nodes, and an InnerNetOutput in
 *       place of the NetOutput.
 *
 * Its inputs are exactly the distinct outer values used: input 0 the
 * condition (or Case index), then every other value a branch uses, in branch
 * order.  Then, as GE does:
 *   - CalcSubgraphGuardersPolicy / EnsureResourceLifeCycleExtended: guarders
 *     (FreeMemory, FreeFftsMem, FreeFixedFeatureMemory, ...: a node whose attr
 *     ReleaseResourceIndex names the input it releases) of values a branch
 *     returns move out of the branch to one guarder per guarded output of the
 *     lowered node; each branch gets one IdentityAddr
 *     (`<node>_Subgraph_<i>_AddResRef_`) with one I/O pair per "+1 reference"
 *     edge before its InnerNetOutput.  An InnerData standing for an outer
 *     value with a guarder records `NodeWithGuarderOutside`=<guarder type>.
 *   - CalcChainConflictSolvePolicy / EnsureChainConflictSolved: an output
 *     whose source differs between branches (the InnerData's `index`, or -1
 *     for a computed value) is a conflict index; then every branch gets one
 *     PointFromInputs (`<node>_PointFrom_<i>`) with one I/O pair per conflict
 *     index, in increasing index order, before its InnerNetOutput.
 *   - UpdatePlacement: each output's descriptor attr `_placement` is the
 *     placement common to all branches (`following` counts as `host`), or
 *     `end` (GE kTensorPlacementEnd) when they differ.
 */
#ifndef KILN_BG_CONDITION_H
#define KILN_BG_CONDITION_H

#include <kiln/kiln.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KILN_BG_MAX_OUTPUTS 4096

/** Outcome of lowering one condition node. */
typedef struct kiln_bg_cond_result {
    kiln_node_id node;       /* the lowered node (the original is removed) */
    uint32_t branch_count;   /* N */
    uint32_t output_count;   /* data outputs of every branch */
    uint32_t holder_count;   /* GE's result size: output_count, or 1 (a control holder) when 0 */
    uint32_t conflict_count; /* PointFromInputs pairs per branch (0: none inserted) */
    uint32_t guarded_count;  /* guarders created on the lowered node */
} kiln_bg_cond_result;

/** Whether @p op is a guarder (a Free-type node of GE's IsFreeNode list). */
bool kiln_bg_is_free_type(const char *op);

/**
 * Lower the If/Case node @p n of @p g in place (see above).  An If has the
 * roles then_branch and else_branch (either may be missing: an empty
 * branch); a Case has its branch_* subgraphs.  Errors (nothing lowered, the
 * graph unchanged), naming the node: not If/Case, no branch, a branch with
 * more than one NetOutput, branches returning different output counts (an
 * empty branch returns 0), a Data without a valid `_parent_node_index`, a
 * guarded InnerData whose guarder is not a Free type.
 */
kiln_status kiln_bg_lower_cond(kiln_graph *g, kiln_node_id n, kiln_bg_cond_result *res,
                               kiln_error *err);

/**
 * Lower every If/Case of @p g and of its subgraphs, innermost first.
 * @p auto_guard: first give every computed value a branch returns a
 * FreeMemory guarder (GE's lowering guards each allocated output), so the
 * guarder policy has something to move.  *count (optional) receives the
 * number of nodes lowered.
 */
kiln_status kiln_bg_lower_graph(kiln_graph *g, bool auto_guard, uint32_t *count, kiln_error *err);

#ifdef __cplusplus
}
#endif
#endif /* KILN_BG_CONDITION_H */

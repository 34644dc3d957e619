/*
 * inplace.h - internals of ProcessInplace (GE mem_inplace.cc,
 * GE_SEMANTICS.md 5.2; seed ge-memory-conflict-handling.txt 3.4), shared by
 * the files of libkiln_mem_inplace.so:
 *
 *   process_inplace.c   the pass and the plugin: read-only symbols,
 *                       candidates (_output_inplace_ability +
 *                       GetSupportInplaceOutput), the filters, the claim of
 *                       inputs, tentative reuse and the all-or-nothing revert
 *   inplace_conflict.c  the conflict checks: the merged two-symbol layout
 *                       check (GE IsGraphExistMemConflictSymbol) through the
 *                       kernel's checker API, and the If/Case/While subgraph
 *                       check (GE IsCtrlNodeSubgraphExistMemConflictSymbol)
 *
 * The anchor marking (../layout/anchor_attrs.c), the If/Case/While
 * subgraph rules (../layout/ctrl_node_conflict.c) and the graph predicates
 * (../checkers/mlc_util.c) are compiled into this plugin unchanged;
 * inplace_conflict.c supplies the few mlc_* functions they call so that
 * ctrl_node_conflict.c *reports* a conflict instead of inserting an
 * Identity (see that file's header).
 */
#ifndef KILN_INPLACE_H
#define KILN_INPLACE_H

#include "../layout/mlc_pass.h"

/** A conflict check run: the mlc_run the layout sources expect, plus what we record. */
typedef struct inplace_check {
    mlc_run run;          /* first member: ctrl_node_conflict.c sees &check->run */
    uint32_t conflicts;   /* If/Case/While inputs that would need isolation */
    char first_why[320];  /* the first such rule, for the revert explanation */
} inplace_check;

/**
 * Prepare @p c for the root @p root of pass context @p ctx: graph info of
 * the root (GE GraphInfo for IsGraphExistMemConflictSymbol) and a checker
 * result.  Returns KILN_ERR_NOMEM when the result cannot be created.
 */
kiln_status inplace_check_init(inplace_check *c, kiln_pass_ctx *ctx, kiln_graph *root);
void inplace_check_fini(inplace_check *c);

/**
 * GE ConstructSingleNodeSymbolTable + IsGraphExistMemConflictSymbol: the
 * anchors of symbols @p sym_in and @p sym_out of @p st as ONE symbol, each
 * anchor marked (AnchorAttribute) and every anchor pair checked with the
 * kernel's unconditional tables and conditional checkers.  *conflict
 * receives the verdict; @p why (size @p why_size) the deciding rule.
 * Errors: KILN_ERR_NOMEM; a checker's own failure.
 */
kiln_status inplace_merged_conflict(inplace_check *c, const kiln_symtab *st, uint32_t sym_in,
                                    uint32_t sym_out, bool *conflict, char *why,
                                    size_t why_size);

/**
 * GE IsCtrlNodeSubgraphExistMemConflictSymbol on the whole root: the
 * If/Case/While rules of GE_SEMANTICS 3.8, reporting instead of isolating.
 * *conflict receives the verdict; c->first_why the first rule that fired.
 */
kiln_status inplace_ctrl_conflict(inplace_check *c, bool *conflict);

extern const kiln_pass_desc inplace_process_inplace_pass;

#endif /* KILN_INPLACE_H */

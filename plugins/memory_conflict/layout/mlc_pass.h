/*
 * mlc_pass.h - internals of HandleMemoryLayoutConflict (GE
 * MemLayoutConflictOptimizer, GE_SEMANTICS.md 3), shared by the files of
 * libkiln_mem_layout_conflict.so:
 *
 *   handle_memory_layout_conflict.c  the pass, driver (3.1), graph info (3.3),
 *                                    conflict finding per symbol (3.5)
 *   anchor_attrs.c                   AnchorAttribute marking (3.4)
 *   solve_conflict.c                 where the Identity goes (3.7)
 *   ctrl_node_conflict.c             If / Case / While subgraphs (3.8)
 *   ../checkers/mlc_util.c           graph predicates shared with the checkers
 */
#ifndef KILN_MLC_PASS_H
#define KILN_MLC_PASS_H

#include "../checkers/mlc_util.h"

#define MLC_MAX_ATTRS 8 /* attributes one anchor can carry */

/* The attribute keys and op types the anchor marking tests, as symbols of
 * the run's context (mlc_keys_init at a run's start; ok = false: not
 * initialised, the marking then tests strings).  A key of symbol 0 was
 * never interned, so no node carries it and its lookup is skipped. */
typedef struct mlc_keys {
    bool ok;
    kiln_sym cont_in, cont_out, nopad_in, nopad_out, in_mt, out_mt, unsup_refresh, ref_var,
        reuse_input;
    kiln_sym stream_switch, label_switch, hcom_broadcast, merge, reshape, data;
    kiln_sym passthrough[4]; /* NetOutput, While, _While, StatelessWhile */
} mlc_keys;

/** State of one run of the pass over one root graph. */
typedef struct mlc_run {
    kiln_pass_ctx *ctx;
    kiln_graph *root;
    kiln_graph *target;  /* the static graph being processed */
    uint32_t graph_info; /* KILN_GI_* of the target */
    bool fm_option;      /* ge.featureBaseRefreshable == "1" */
    bool root_static;
    uint32_t counter;  /* next Identity number (name suffix) */
    uint32_t inserted; /* Identities inserted in this run */
    uint64_t pairs_examined; /* anchor pairs find_conflicts looked at (statistic) */
    kiln_checker_result *res;
    kiln_error *err;
    mc_opsyms ops; /* op-class symbols of this run (mc_opsyms_init at its start) */
    mlc_keys keys; /* mlc_keys_init at its start */
} mlc_run;

/** The attributes of one anchor, in GE's marking order. */
typedef struct mlc_attrs {
    uint8_t n;
    uint8_t t[MLC_MAX_ATTRS];
    kiln_graph *ref_graph; /* REFERENCE_OUTPUT through ref_var_src_var_name: the var */
    kiln_node_id ref_node; /* (GE Checker ref map); 0 = none */
} mlc_attrs;

/* ---- mlc_graph.c (shared with ProcessInplace) ---------------------------- */
/** Graph attribute @p key is a true bool. */
bool mlc_graph_flag(kiln_graph *g, const char *key);
/** A descriptor with unknown rank or any unknown dim. */
bool mlc_desc_unknown(const kiln_tensor_desc *d);
/** Session option @p key equals @p value. */
bool mlc_option_is(const kiln_pass_ctx *ctx, const char *key, const char *value);
/** Anchor attribute list @p a contains @p t. */
bool mlc_attrs_has(const mlc_attrs *a, kiln_anchor_attr t);
/** GE Checker::IsSkip: same node, or two outputs one of which references the other. */
bool mlc_skip_pair(const kiln_mem_anchor *a, const mlc_attrs *ta, const kiln_mem_anchor *b,
                   const mlc_attrs *tb);
/** GE IsStaticGraph: not _dynamic_shape_partitioned and not _graph_unknown_flag. */
bool mlc_graph_static(kiln_graph *g);
/** GE IsGraphFeatureMapRefreshable for graph @p g. */
bool mlc_graph_fm_refreshable(const mlc_run *run, kiln_graph *g);
/** @p g is @p top or nested inside it. */
bool mlc_graph_within(kiln_graph *g, const kiln_graph *top);
/** GE GraphInfo of @p run->target (3.3): the KILN_GI_* flags the checkers see. */
uint32_t mlc_graph_info(const mlc_run *run);
/**
 * The CONDITIONAL branch of GE Checker::CheckConflict for attribute pair
 * (@p ta, @p tb) of anchors @p a, @p b of the symbol @p sym[0..n): run the
 * registered checker into @p run->res (a CALL_AS_SYMBOL checker only once
 * per attribute pair, recorded in @p visit).  *name receives the checker's
 * name, or NULL when nothing ran (no checker, or already run for the
 * symbol).  Errors: the checker's own failure.
 */
kiln_status mlc_run_checker(mlc_run *run, const kiln_mem_anchor *a, const kiln_mem_anchor *b,
                            kiln_anchor_attr ta, kiln_anchor_attr tb, const kiln_mem_anchor *sym,
                            uint32_t n, bool visit[KILN_AA_COUNT][KILN_AA_COUNT],
                            const char **name);

/* ---- anchor_attrs.c ------------------------------------------------------ */
/** Resolve @p run->keys in @p g's context (a run's start). */
void mlc_keys_init(mlc_run *run, const kiln_graph *g);
/** MarkInTypes for input @p i of @p n in graph @p g. */
void mlc_mark_input(const mlc_run *run, kiln_graph *g, kiln_node_id n, uint32_t i, mlc_attrs *out);
/** MarkOutTypes for output @p o; @p st / @p sym: the symbol of the anchor. */
void mlc_mark_output(const mlc_run *run, const kiln_symtab *st, uint32_t sym, kiln_graph *g,
                     kiln_node_id n, uint32_t o, mlc_attrs *out);
/** "USER_MEMORY_INPUT|REFERENCE_OUTPUT" for explanations. */
void mlc_attrs_str(const mlc_attrs *a, char *buf, size_t size);

/* ---- solve_conflict.c ---------------------------------------------------- */
/** One anchor to isolate with the reason found for it. */
typedef struct mlc_conflict {
    kiln_mem_anchor anchor;
    char why[320];
} mlc_conflict;

/** GE SolveConflict: sort by key, skip already-isolated anchors, insert Identities. */
kiln_status mlc_solve_conflicts(mlc_run *run, mlc_conflict *c, uint32_t n);
/**
 * Insert one Identity with @p n inputs/outputs in front of the inputs
 * @p dsts[i] (node, input index) of graph @p g: the multi-anchor Identity of
 * 3.8, wired index by index; n == 1 is GE InsertNodeBefore.  @p why goes to
 * kiln_pass_explain.
 */
kiln_status mlc_insert_before_inputs(mlc_run *run, kiln_graph *g, const kiln_anchor *dsts,
                                     uint32_t n, const char *why);
/** GE IsSkipInsert for input @p i of @p n (unknown shape, or already fed by a copy). */
bool mlc_skip_input(kiln_graph *g, kiln_node_id n, uint32_t i);

/* ---- ctrl_node_conflict.c ------------------------------------------------ */
/** GE CtrlNodeConflict::SolveCtrlNodeSubGraphConflict over @p run->target and its subgraphs. */
kiln_status mlc_ctrl_node_conflict(mlc_run *run);

extern const kiln_pass_desc mlc_handle_memory_layout_conflict_pass;

#endif

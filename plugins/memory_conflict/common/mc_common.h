/*
 * mc_common.h - graph predicates shared by every memory-conflict plugin
 * (../checkers, ../layout, ../inplace, ../passes, ../rw): GE's OpTypeUtils
 * op classes that all of them spell the same way, the node-bool shortcut and
 * the NetOutput lookup, written against the public kiln API only.
 *
 * mc_common.c is compiled into each plugin (each .so has its own copy; the
 * functions are hidden), so it keeps no state.  Op classes whose member list
 * differs between GE components stay with their component (mlc_is_const,
 * mc_is_const, rw_is_data_like).
 */
#ifndef KILN_MC_COMMON_H
#define KILN_MC_COMMON_H

#include <kiln/kiln.h>

/* ---- op classes (GE OpTypeUtils) ---------------------------------------- */
/*
 * Op types compare as symbols of the graph's context: a loop over nodes looks
 * its types up once (mc_sym) and tests each node with mc_is_sym.  Symbols are
 * per context: look them up per run, never keep them in a static.
 */
/** The symbol of op type @p op in @p g's context; 0 when no node has that type. */
static inline kiln_sym mc_sym(const kiln_graph *g, const char *op)
{
    return kiln_sym_lookup(g, op);
}
/** Node @p n has op type @p op (a symbol from mc_sym; 0 never matches). */
static inline bool mc_is_sym(const kiln_graph *g, kiln_node_id n, kiln_sym op)
{
    return op && kiln_node_op(g, n) == op;
}
/**
 * The op types of GE's op classes as symbols of one context, interned once
 * per pass run (mc_opsyms_init) and kept in the run's state, so the per-anchor
 * class tests of a run compare symbols.  A zeroed set (not initialised) makes
 * the mc_opsyms_* tests fall back to the string predicates.
 */
typedef struct mc_opsyms {
    kiln_sym netoutput; /* nonzero once initialised */
    kiln_sym data, ref_data, aipp_data;
    kiln_sym variable, variable_v2, var_handle_op;
    kiln_sym const_, constant, file_constant, const_placeholder;
} mc_opsyms;
/** Intern the class members' types in @p g's context (a run's start). */
void mc_opsyms_init(mc_opsyms *s, kiln_graph *g);
/** mc_is_data_like by symbols. */
bool mc_opsyms_data_like(const mc_opsyms *s, const kiln_graph *g, kiln_node_id n);
/** mc_is_variable by symbols. */
bool mc_opsyms_variable(const mc_opsyms *s, const kiln_graph *g, kiln_node_id n);
/** Const, Constant, FileConstant, ConstPlaceHolder (mlc_is_const) by symbols. */
bool mc_opsyms_const(const mc_opsyms *s, const kiln_graph *g, kiln_node_id n);
/** NetOutput by symbol. */
bool mc_opsyms_netoutput(const mc_opsyms *s, const kiln_graph *g, kiln_node_id n);
/** A small set of op types as symbols of one context (a run's op class). */
#define MC_SYMSET_MAX 8
typedef struct mc_symset {
    uint32_t n;
    kiln_sym s[MC_SYMSET_MAX];
} mc_symset;
/** Intern the NULL-terminated list @p ops (at most MC_SYMSET_MAX) in @p g's
 * context; false on OOM or a longer list (then the set must not be used). */
bool mc_symset_init(mc_symset *set, kiln_graph *g, const char *const *ops);
/** Node @p n's op type is in @p set. */
static inline bool mc_symset_has(const mc_symset *set, const kiln_graph *g, kiln_node_id n)
{
    kiln_sym t = kiln_node_op(g, n);
    for (uint32_t i = 0; i < set->n; i++)
        if (set->s[i] == t)
            return true;
    return false;
}
/** Node @p n has op type @p op (one string compare: for single tests, not loops). */
bool mc_op_is(const kiln_graph *g, kiln_node_id n, const char *op);
/** The op type of @p n is one of the NULL-terminated list @p ops. */
bool mc_op_in(const kiln_graph *g, kiln_node_id n, const char *const *ops);
/** Data, RefData, AippData (GE IsDataNode). */
bool mc_is_data_like(const kiln_graph *g, kiln_node_id n);
/** Variable, VariableV2, VarHandleOp (GE IsVariableNode). */
bool mc_is_variable(const kiln_graph *g, kiln_node_id n);
/** Variables and RefData (GE IsVarLikeNode). */
bool mc_is_var_like(const kiln_graph *g, kiln_node_id n);
/** While, _While, StatelessWhile. */
bool mc_is_while(const kiln_graph *g, kiln_node_id n);
/** Assign, AssignAdd, AssignSub and their *VariableOp forms (GE IsAssignLikeNode). */
bool mc_is_assign_like(const kiln_graph *g, kiln_node_id n);

/* ---- attributes and lookups ------------------------------------------------ */
/** Node attribute @p key is a true bool. */
bool mc_node_bool(const kiln_graph *g, kiln_node_id n, const char *key);
/** The first NetOutput of @p g in node-id order, or 0. */
kiln_node_id mc_find_netoutput(const kiln_graph *g);

#endif

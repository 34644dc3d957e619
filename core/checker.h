/*
 * checker.h - the memory-conflict checker registry (GE check_register).
 *
 * A 14x14 table indexed by kiln_anchor_attr.  Each cell holds the
 * unconditional class (seed ge-memory-conflict-handling.txt 3.3.2: absolutely
 * no conflict / absolutely conflict) or, for conditional pairs, the checker
 * component a plugin registered (GE REGISTER_FUNC writes [a][b] and [b][a]).
 * Only core/ includes this header.
 */
#ifndef KILN_CORE_CHECKER_H
#define KILN_CORE_CHECKER_H

#include "ctx.h"

struct kiln_component;

typedef struct kiln_checker_cell {
    kiln_conflict_class cls;
    const struct kiln_component *checker; /* conditional only; NULL = no conflict */
} kiln_checker_cell;

struct kiln_checker_table {
    kiln_checker_cell cell[KILN_AA_COUNT][KILN_AA_COUNT];
};

struct kiln_checker_table *kiln__checker_table_create(void);
void kiln__checker_table_destroy(struct kiln_checker_table *t);
/** Register a conditional checker for every pair of @p comp; ERR_DUPLICATE if a cell is taken,
 *  ERR_INVALID for an unconditional pair or an attribute out of range. */
kiln_status kiln__checker_register(kiln_ctx *ctx, const struct kiln_component *comp,
                                   kiln_error *err);
/** Remove every cell pointing at @p comp (plugin rollback). */
void kiln__checker_unregister(kiln_ctx *ctx, const struct kiln_component *comp);

/** Unconditional class of an attribute pair (symmetric). */
KILN_API kiln_conflict_class kiln_checker_class(const kiln_ctx *ctx, kiln_anchor_attr a,
                                                kiln_anchor_attr b);
/** The conditional checker component for a pair, or NULL. */
KILN_API const struct kiln_component *kiln_checker_lookup(const kiln_ctx *ctx, kiln_anchor_attr a,
                                                          kiln_anchor_attr b);
/** GE enum name of an anchor attribute ("CONTINUOUS_INPUT"). */
KILN_API const char *kiln_anchor_attr_name(kiln_anchor_attr a);



/** What a conditional checker returns: anchors to isolate plus the deciding rule. */
struct kiln_checker_result {
    kiln_mem_anchor *anchors;
    uint32_t count, cap;
    char reason[256];
};
void kiln__checker_result_reset(kiln_checker_result *r);
void kiln__checker_result_free(kiln_checker_result *r);
#endif

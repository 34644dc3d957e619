/*
 * checkers.h - the conditional memory-layout-conflict checkers of
 * libkiln_mem_conflict_checkers.so (GE mem_layout_conflict_optimize/checker/
 * funcs/), one descriptor per GE checker function, registered per
 * attribute pair (GE REGISTER_FUNC; the kernel writes [a][b] and [b][a]).
 * GE_SEMANTICS.md 3.6 gives each decision; docs/memory_layout_conflict.md
 * the table of pairs.
 */
#ifndef KILN_MLC_CHECKERS_H
#define KILN_MLC_CHECKERS_H

#include "mlc_util.h"

/** Descriptor boilerplate: name, summary, flags, pair array, check function. */
#define MLC_CHECKER(var, name_, summary_, flags_, pairs_, fn_)                                     \
    const kiln_checker_desc var = {.struct_size = sizeof(kiln_checker_desc),                       \
                                   .name = name_,                                                  \
                                   .summary = summary_,                                            \
                                   .flags = flags_,                                                \
                                   .pair_count = (uint32_t)(sizeof(pairs_) / sizeof(pairs_[0])),   \
                                   .pairs = pairs_,                                                \
                                   .check = fn_}

/* unrefresh_checkers.c */
extern const kiln_checker_desc mlc_not_support_refresh_input;
extern const kiln_checker_desc mlc_not_support_refresh_output;
extern const kiln_checker_desc mlc_user_in_and_unrefresh_output;
extern const kiln_checker_desc mlc_user_out_and_unrefresh_input;
extern const kiln_checker_desc mlc_user_out_and_unrefresh_output;
/* user_memory_checkers.c */
extern const kiln_checker_desc mlc_user_in_and_continuous;
extern const kiln_checker_desc mlc_user_in_and_nopad_output;
extern const kiln_checker_desc mlc_user_in_and_nopad_input;
extern const kiln_checker_desc mlc_user_in_and_rts_output;
extern const kiln_checker_desc mlc_user_out_and_continuous_input;
extern const kiln_checker_desc mlc_user_out_and_immutable_output;
/* immutable_out_checkers.c */
extern const kiln_checker_desc mlc_immutable_and_continuous_output;
extern const kiln_checker_desc mlc_immutable_and_nopad_input;
extern const kiln_checker_desc mlc_immutable_and_rts_output;
/* continuous_checkers.c */
extern const kiln_checker_desc mlc_cont_in_and_cont_in;
extern const kiln_checker_desc mlc_cont_out_and_cont_out;
extern const kiln_checker_desc mlc_nopad_out_and_nopad_out;
extern const kiln_checker_desc mlc_nopad_in_and_nopad_in;
extern const kiln_checker_desc mlc_cont_out_and_cont_in;
extern const kiln_checker_desc mlc_nopad_in_and_nopad_out;
/* rts_special_checkers.c */
extern const kiln_checker_desc mlc_continuous_and_rts;
extern const kiln_checker_desc mlc_rts_in_and_rts_in;
extern const kiln_checker_desc mlc_rts_in_and_rts_out;
extern const kiln_checker_desc mlc_rts_out_and_rts_out;

#endif

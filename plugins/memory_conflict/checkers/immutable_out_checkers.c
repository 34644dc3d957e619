/*
 * immutable_out_checkers.c - the checkers about constant/variable outputs
 * (IMMUTABLE_ADDRESS_OUTPUT: Const, Constant, FileConstant,
 * ConstPlaceHolder, Variable...) whose fixed address would have to satisfy a
 * layout constraint.  GE immutable_out_and_continuous_out_checker.cc,
 * immutable_out_and_nopadding_continuous_in_checker.cc,
 * immutable_out_and_rts_specail_out_checker.cc.
 *
 * ImmutableOutputAndContinuousOutput   IMMUTABLE_OUT x {CONT_OUT, NOPAD_CONT_OUT}
 *   var -> Assign -> ref node: isolate after the Assign; else isolate the
 *   inputs of the ref node (the continuous-output node whose output refs its
 *   input) that are in the symbol -- never right after the variable, so
 *   var -> ApplyMomentum style edges stay direct.
 * ImmutableOutputAndNoPaddingContinuousInput  IMMUTABLE_OUT x NOPAD_CONT_IN
 *   no conflict when every real input of the no-padding node is the same
 *   out anchor; else isolate the no-padding node's input.
 * ImmutableOutputAndRtsSpecialOutput   IMMUTABLE_OUT x RTS_OUT
 *   Assign rule; else isolate the constant/variable output.
 */
#include "checkers.h"

#define IMM_ MLC_AA(IMMUTABLE_ADDRESS_OUTPUT)

static const kiln_attr_pair cont_out_pairs[] = {{IMM_, MLC_AA(CONTINUOUS_OUTPUT)},
                                                {IMM_, MLC_AA(NOPADDING_CONTINUOUS_OUTPUT)}};
static const kiln_attr_pair nopad_in_pairs[] = {{IMM_, MLC_AA(NOPADDING_CONTINUOUS_INPUT)}};
static const kiln_attr_pair rts_out_pairs[] = {{IMM_, MLC_AA(RTS_SPECIAL_TYPE_OUTPUT)}};

static kiln_status check_cont_out(const kiln_checker_query *q, kiln_checker_result *r)
{
    kiln_status st;
    if (mlc_assign_rule(q, r, IMM_, &st))
        return st;
    const kiln_mem_anchor *imm = mlc_side(q, IMM_);
    const kiln_mem_anchor *ref = mlc_other(q, imm);
    bool any = false;
    for (uint32_t i = 0; i < q->symbol_count; i++) {
        const kiln_mem_anchor *s = &q->symbol[i];
        if (s->is_output || s->graph != ref->graph || s->node != ref->node)
            continue;
        st =
            mlc_isolate(r, s, "ImmutableOutputAndContinuousOutput: copy into the ref node's input");
        if (st != KILN_OK)
            return st;
        any = true;
    }
    if (any)
        return KILN_OK;
    /* the continuous node does not take the constant through an input of
     * the symbol (it is shared some other way): copy the constant itself */
    return mlc_isolate(r, imm, "ImmutableOutputAndContinuousOutput: copy the constant");
}

static kiln_status check_nopad_in(const kiln_checker_query *q, kiln_checker_result *r)
{
    if (mlc_nopad_inputs_one_anchor(q, r, "ImmutableOutputAndNoPaddingContinuousInput"))
        return KILN_OK;
    return mlc_isolate(r, mlc_side(q, MLC_AA(NOPADDING_CONTINUOUS_INPUT)),
                       "ImmutableOutputAndNoPaddingContinuousInput: copy into the no-padding "
                       "input");
}

static kiln_status check_rts_out(const kiln_checker_query *q, kiln_checker_result *r)
{
    kiln_status st;
    if (mlc_assign_rule(q, r, IMM_, &st))
        return st;
    return mlc_isolate(r, mlc_side(q, IMM_),
                       "ImmutableOutputAndRtsSpecialOutput: copy the constant/variable output");
}

MLC_CHECKER(mlc_immutable_and_continuous_output, "ImmutableOutputAndContinuousOutput",
            "constant/variable vs (no-padding) continuous output", 0, cont_out_pairs,
            check_cont_out);
MLC_CHECKER(mlc_immutable_and_nopad_input, "ImmutableOutputAndNoPaddingContinuousInput",
            "constant/variable vs no-padding continuous input", 0, nopad_in_pairs, check_nopad_in);
MLC_CHECKER(mlc_immutable_and_rts_output, "ImmutableOutputAndRtsSpecialOutput",
            "constant/variable vs special-memory output", 0, rts_out_pairs, check_rts_out);

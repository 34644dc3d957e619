/*
 * user_memory_checkers.c - the checkers about model inputs (root Data:
 * USER_MEMORY_INPUT) and model outputs (root NetOutput inputs:
 * USER_MEMORY_OUTPUT) sharing memory with constrained anchors.  GE
 * user_in_and_continuous_in_out_checker.cc, user_in_and_rts_special_out_checker.cc,
 * user_out_and_continuous_input.cc, user_out_and_immutable_out_checker.cc.
 *
 * UserInputAndContinuousInputOutput        USER_IN x {CONT_OUT, CONT_IN}
 *   var -> Assign -> ref node: isolate the ref node's inputs fed by the
 *   Assign ("insert after the Assign"); else isolate the Data's output.
 * UserInputAndNoPaddingContinuousOutput    USER_IN x NOPAD_CONT_OUT
 *   no conflict when a user input may feed a no-padding continuous output
 *   (graph info USER_INPUT_NOPADDING_OUTPUT_OK: online build, not a single-op
 *   scene); else as above.
 * UserInputAndNoPaddingContinuousInput     USER_IN x NOPAD_CONT_IN
 *   no conflict when every real (ref-followed) input of the no-padding node
 *   is the same out anchor; else as above.
 * UserInputAndRtsSpecialOutput             USER_IN x RTS_OUT
 *   Assign rule, else isolate the Data's output.
 * UserMemoryOutputAndContinuousInput       USER_OUT x {CONT_IN, NOPAD_CONT_IN}
 *   no conflict when the NetOutput input is fed directly by the continuous
 *   node (its output refs its input); else isolate the NetOutput input.
 * UserMemoryOutputAndImmutableOutput       USER_OUT x IMMUTABLE_OUT
 *   only in a static root graph: a variable-like producer is no conflict,
 *   anything else (a constant) isolates the NetOutput input.
 */
#include "checkers.h"

#define UIN_ MLC_AA(USER_MEMORY_INPUT)
#define UOUT_ MLC_AA(USER_MEMORY_OUTPUT)

static const kiln_attr_pair cont_pairs[] = {{UIN_, MLC_AA(CONTINUOUS_OUTPUT)},
                                            {UIN_, MLC_AA(CONTINUOUS_INPUT)}};
static const kiln_attr_pair nopad_out_pairs[] = {{UIN_, MLC_AA(NOPADDING_CONTINUOUS_OUTPUT)}};
static const kiln_attr_pair nopad_in_pairs[] = {{UIN_, MLC_AA(NOPADDING_CONTINUOUS_INPUT)}};
static const kiln_attr_pair rts_out_pairs[] = {{UIN_, MLC_AA(RTS_SPECIAL_TYPE_OUTPUT)}};
static const kiln_attr_pair out_cont_pairs[] = {{UOUT_, MLC_AA(CONTINUOUS_INPUT)},
                                                {UOUT_, MLC_AA(NOPADDING_CONTINUOUS_INPUT)}};
static const kiln_attr_pair out_imm_pairs[] = {{UOUT_, MLC_AA(IMMUTABLE_ADDRESS_OUTPUT)}};

/* Assign rule, else copy the user input (the Data's output). */
static kiln_status isolate_user_input(const kiln_checker_query *q, kiln_checker_result *r,
                                      const char *rule)
{
    kiln_status st;
    if (mlc_assign_rule(q, r, UIN_, &st))
        return st;
    return mlc_isolate(r, mlc_side(q, UIN_), rule);
}

static kiln_status check_user_in_continuous(const kiln_checker_query *q, kiln_checker_result *r)
{
    return isolate_user_input(q, r, "UserInputAndContinuousInputOutput: copy the user input");
}

static kiln_status check_user_in_nopad_out(const kiln_checker_query *q, kiln_checker_result *r)
{
    if (q->graph_info & KILN_GI_USER_INPUT_NOPADDING_OUTPUT_OK) {
        kiln_checker_reason(r, "UserInputAndNoPaddingContinuousOutput: supported online, "
                               "no conflict");
        return KILN_OK;
    }
    return isolate_user_input(q, r,
                              "UserInputAndNoPaddingContinuousOutput: offline/single-op, copy "
                              "the user input");
}

static kiln_status check_user_in_nopad_in(const kiln_checker_query *q, kiln_checker_result *r)
{
    if (mlc_nopad_inputs_one_anchor(q, r, "UserInputAndNoPaddingContinuousInput"))
        return KILN_OK;
    return isolate_user_input(q, r, "UserInputAndNoPaddingContinuousInput: copy the user input");
}

static kiln_status check_user_in_rts_out(const kiln_checker_query *q, kiln_checker_result *r)
{
    return isolate_user_input(q, r, "UserInputAndRtsSpecialOutput: copy the user input");
}

static kiln_status check_user_out_continuous(const kiln_checker_query *q, kiln_checker_result *r)
{
    const kiln_mem_anchor *no = mlc_side(q, UOUT_);
    const kiln_mem_anchor *c = mlc_other(q, no);
    kiln_anchor p = kiln_node_input_peer(no->graph, no->node, no->index);
    if (no->graph == c->graph && p.node == c->node &&
        mlc_ref_input(c->graph, p.node, p.index) >= 0) {
        kiln_checker_reason(r, "UserMemoryOutputAndContinuousInput: NetOutput fed directly by "
                               "the continuous node, no conflict");
        return KILN_OK;
    }
    return mlc_isolate(r, no, "UserMemoryOutputAndContinuousInput: copy into the NetOutput");
}

static kiln_status check_user_out_immutable(const kiln_checker_query *q, kiln_checker_result *r)
{
    if (!(q->graph_info & KILN_GI_ROOT_GRAPH_STATIC)) {
        kiln_checker_reason(r, "UserMemoryOutputAndImmutableOutput: dynamic root, no conflict");
        return KILN_OK;
    }
    const kiln_mem_anchor *imm = mlc_side(q, MLC_AA(IMMUTABLE_ADDRESS_OUTPUT));
    if (mc_is_var_like(imm->graph, imm->node)) {
        kiln_checker_reason(r, "UserMemoryOutputAndImmutableOutput: variable output, no conflict");
        return KILN_OK;
    }
    return mlc_isolate(r, mlc_side(q, UOUT_),
                       "UserMemoryOutputAndImmutableOutput: copy the constant into the NetOutput");
}

MLC_CHECKER(mlc_user_in_and_continuous, "UserInputAndContinuousInputOutput",
            "user input vs continuous input/output", 0, cont_pairs, check_user_in_continuous);
MLC_CHECKER(mlc_user_in_and_nopad_output, "UserInputAndNoPaddingContinuousOutput",
            "user input vs no-padding continuous output", 0, nopad_out_pairs,
            check_user_in_nopad_out);
MLC_CHECKER(mlc_user_in_and_nopad_input, "UserInputAndNoPaddingContinuousInput",
            "user input vs no-padding continuous input", 0, nopad_in_pairs, check_user_in_nopad_in);
MLC_CHECKER(mlc_user_in_and_rts_output, "UserInputAndRtsSpecialOutput",
            "user input vs special-memory output", 0, rts_out_pairs, check_user_in_rts_out);
MLC_CHECKER(mlc_user_out_and_continuous_input, "UserMemoryOutputAndContinuousInput",
            "user output vs (no-padding) continuous input", 0, out_cont_pairs,
            check_user_out_continuous);
MLC_CHECKER(mlc_user_out_and_immutable_output, "UserMemoryOutputAndImmutableOutput",
            "user output vs constant/variable output", 0, out_imm_pairs, check_user_out_immutable);

/*
 * unrefresh_checkers.c - the checkers about anchors of nodes that cannot
 * refresh their addresses (StreamSwitch, LabelSwitchByIndex, an HCOM node
 * without address refresh): GE unrefresh_in_checker.cc,
 * unrefresh_out_checker.cc, user_in_and_unrefresh_out_checker.cc,
 * user_out_and_unrefresh_in_checker.cc, user_out_and_unrefresh_out_checker.cc.
 *
 * NotSupportRefreshInput   UNREFRESH_IN  x {IMMUTABLE_OUT, UNREFRESH_IN,
 *                          UNREFRESH_OUT, CONT_IN, CONT_OUT, NOPAD_CONT_IN,
 *                          NOPAD_CONT_OUT, RTS_IN, RTS_OUT, NORMAL_IN, NORMAL_OUT}
 * NotsupportedRefreshOutput UNREFRESH_OUT x {IMMUTABLE_OUT, UNREFRESH_OUT,
 *                          CONT_IN, CONT_OUT, NOPAD_CONT_IN, NOPAD_CONT_OUT,
 *                          RTS_OUT, RTS_IN, NORMAL_IN, NORMAL_OUT}
 *
 * Rule (both): when the feature map is not refreshable and no node of the
 * pair has a physical-address refresh problem, the address never moves: no
 * conflict.  Otherwise the unrefreshable anchor is isolated: an Identity
 * before the input, or after the output.
 *
 * UserInputAndNotSupportedAddressRefreshOutput  USER_IN x UNREFRESH_OUT:
 *   var -> Assign -> ref node: isolate the ref node's inputs fed by the
 *   Assign; else, when the feature map is refreshable or a node has a
 *   physical refresh problem, isolate the unrefreshable output; else the
 *   Data's output (the user input is copied, the unrefreshable node keeps
 *   its fixed address).
 * UserOutputAndNotSupportedAddressRefreshInput  USER_OUT x UNREFRESH_IN and
 * UserOutputAndNotSupportedAddressRefreshOutput USER_OUT x UNREFRESH_OUT:
 *   feature map refreshable or physical problem: isolate the unrefreshable
 *   anchor; else isolate the NetOutput input.
 */
#include "checkers.h"
#include <stdio.h>

#define UIN MLC_AA(UNSUPPORTED_ADDRESS_REFRESH_OPERATOR_INPUT)
#define UOUT MLC_AA(UNSUPPORTED_ADDRESS_REFRESH_OPERATOR_OUTPUT)

static const kiln_attr_pair in_pairs[] = {
    {UIN, MLC_AA(IMMUTABLE_ADDRESS_OUTPUT)},
    {UIN, UIN},
    {UIN, UOUT},
    {UIN, MLC_AA(CONTINUOUS_INPUT)},
    {UIN, MLC_AA(CONTINUOUS_OUTPUT)},
    {UIN, MLC_AA(NOPADDING_CONTINUOUS_INPUT)},
    {UIN, MLC_AA(NOPADDING_CONTINUOUS_OUTPUT)},
    {UIN, MLC_AA(RTS_SPECIAL_TYPE_INPUT)},
    {UIN, MLC_AA(RTS_SPECIAL_TYPE_OUTPUT)},
    {UIN, MLC_AA(NORMAL_INPUT)},
    {UIN, MLC_AA(NORMAL_OUTPUT)},
};

static const kiln_attr_pair out_pairs[] = {
    {UOUT, MLC_AA(IMMUTABLE_ADDRESS_OUTPUT)},
    {UOUT, UOUT},
    {UOUT, MLC_AA(CONTINUOUS_INPUT)},
    {UOUT, MLC_AA(CONTINUOUS_OUTPUT)},
    {UOUT, MLC_AA(NOPADDING_CONTINUOUS_INPUT)},
    {UOUT, MLC_AA(NOPADDING_CONTINUOUS_OUTPUT)},
    {UOUT, MLC_AA(RTS_SPECIAL_TYPE_OUTPUT)},
    {UOUT, MLC_AA(RTS_SPECIAL_TYPE_INPUT)},
    {UOUT, MLC_AA(NORMAL_INPUT)},
    {UOUT, MLC_AA(NORMAL_OUTPUT)},
};

/* The shared gate: no conflict while addresses cannot move at all. */
static bool addresses_fixed(const kiln_checker_query *q, kiln_checker_result *r)
{
    if (!mlc_fm_refreshable(q) && !mlc_phys_problem(q)) {
        kiln_checker_reason(r, "feature map not refreshable and no physical refresh problem: "
                               "no conflict");
        return true;
    }
    return false;
}

static kiln_status check_input(const kiln_checker_query *q, kiln_checker_result *r)
{
    if (addresses_fixed(q, r))
        return KILN_OK;
    const kiln_mem_anchor *u = mlc_side(q, UIN);
    return mlc_isolate(r, u, "NotSupportRefreshInput: unrefreshable input");
}

static kiln_status check_output(const kiln_checker_query *q, kiln_checker_result *r)
{
    if (addresses_fixed(q, r))
        return KILN_OK;
    const kiln_mem_anchor *u = mlc_side(q, UOUT);
    return mlc_isolate(r, u, "NotsupportedRefreshOutput: unrefreshable output");
}

MLC_CHECKER(mlc_not_support_refresh_input, "NotSupportRefreshInput",
            "input that cannot refresh its address vs another anchor", 0, in_pairs, check_input);
MLC_CHECKER(mlc_not_support_refresh_output, "NotsupportedRefreshOutput",
            "output that cannot refresh its address vs another anchor", 0, out_pairs,
            check_output);

static const kiln_attr_pair user_in_pairs[] = {{MLC_AA(USER_MEMORY_INPUT), UOUT}};
static const kiln_attr_pair user_out_in_pairs[] = {{MLC_AA(USER_MEMORY_OUTPUT), UIN}};
static const kiln_attr_pair user_out_out_pairs[] = {{MLC_AA(USER_MEMORY_OUTPUT), UOUT}};

static bool refresh_needed(const kiln_checker_query *q)
{
    return mlc_fm_refreshable(q) || mlc_phys_problem(q);
}

static kiln_status check_user_in_unrefresh_out(const kiln_checker_query *q,
                                               kiln_checker_result *r)
{
    kiln_status st;
    if (mlc_assign_rule(q, r, MLC_AA(USER_MEMORY_INPUT), &st))
        return st;
    if (refresh_needed(q))
        return mlc_isolate(r, mlc_side(q, UOUT),
                           "UserInputAndNotSupportedAddressRefreshOutput: refreshable feature "
                           "map, copy the unrefreshable output");
    return mlc_isolate(r, mlc_side(q, MLC_AA(USER_MEMORY_INPUT)),
                       "UserInputAndNotSupportedAddressRefreshOutput: copy the user input");
}

static kiln_status user_out_vs(const kiln_checker_query *q, kiln_checker_result *r,
                               kiln_anchor_attr unrefresh, const char *name)
{
    char rule[160];
    if (refresh_needed(q)) {
        snprintf(rule, sizeof(rule), "%s: refreshable feature map, copy the unrefreshable anchor",
                 name);
        return mlc_isolate(r, mlc_side(q, unrefresh), rule);
    }
    snprintf(rule, sizeof(rule), "%s: copy into the NetOutput", name);
    return mlc_isolate(r, mlc_side(q, MLC_AA(USER_MEMORY_OUTPUT)), rule);
}

static kiln_status check_user_out_unrefresh_in(const kiln_checker_query *q,
                                               kiln_checker_result *r)
{
    return user_out_vs(q, r, UIN, "UserOutputAndNotSupportedAddressRefreshInput");
}

static kiln_status check_user_out_unrefresh_out(const kiln_checker_query *q,
                                                kiln_checker_result *r)
{
    return user_out_vs(q, r, UOUT, "UserOutputAndNotSupportedAddressRefreshOutput");
}

MLC_CHECKER(mlc_user_in_and_unrefresh_output, "UserInputAndNotSupportedAddressRefreshOutput",
            "user input vs output that cannot refresh its address", 0, user_in_pairs,
            check_user_in_unrefresh_out);
MLC_CHECKER(mlc_user_out_and_unrefresh_input, "UserOutputAndNotSupportedAddressRefreshInput",
            "user output vs input that cannot refresh its address", 0, user_out_in_pairs,
            check_user_out_unrefresh_in);
MLC_CHECKER(mlc_user_out_and_unrefresh_output, "UserOutputAndNotSupportedAddressRefreshOutput",
            "user output vs output that cannot refresh its address", 0, user_out_out_pairs,
            check_user_out_unrefresh_out);

/*
 * rts_special_checkers.c - the checkers about anchors with a special runtime
 * memory type (_input_memory_type / _output_memory_type: P2P DDR, TS).  GE
 * continuous_in_out_and_rts_special_mem_in_out.cc,
 * rts_special_in_and_rts_special_in_checker.cc,
 * rts_special_in_and_rts_special_out_checker.cc,
 * rts_special_out_and_rts_special_out_checker.cc.
 *
 * ContinuousInOutAndRtsSpecialMemType  {CONT_IN, CONT_OUT, NOPAD_CONT_IN,
 *                                       NOPAD_CONT_OUT} x {RTS_IN, RTS_OUT}
 *   the continuous anchor itself has a special memory type: no conflict;
 *   the continuous anchor is an input whose node's output refs it: isolate
 *   the special-memory anchor; otherwise isolate the continuous anchor.
 * RtsSpecialInputAndRtsSpecialInput    RTS_IN x RTS_IN
 *   same memory type: no conflict; else isolate the input whose node comes
 *   first in topological order -- unless that node's output refs its input
 *   (an Identity there would not separate anything), then the other.
 * RtsSpecialInputAndRtsSpecialOutput   RTS_IN x RTS_OUT
 *   same type: no conflict; else isolate the output.
 * RtsSpecialOutputAndRtsSpecialOutput  RTS_OUT x RTS_OUT
 *   same type: no conflict; else isolate the output that comes first.
 */
#include "checkers.h"

#define RIN MLC_AA(RTS_SPECIAL_TYPE_INPUT)
#define ROUT MLC_AA(RTS_SPECIAL_TYPE_OUTPUT)

static const kiln_attr_pair cont_pairs[] = {
    {MLC_AA(CONTINUOUS_INPUT), RIN},
    {MLC_AA(CONTINUOUS_INPUT), ROUT},
    {MLC_AA(CONTINUOUS_OUTPUT), RIN},
    {MLC_AA(CONTINUOUS_OUTPUT), ROUT},
    {MLC_AA(NOPADDING_CONTINUOUS_INPUT), RIN},
    {MLC_AA(NOPADDING_CONTINUOUS_INPUT), ROUT},
    {MLC_AA(NOPADDING_CONTINUOUS_OUTPUT), RIN},
    {MLC_AA(NOPADDING_CONTINUOUS_OUTPUT), ROUT},
};
static const kiln_attr_pair in_in_pairs[] = {{RIN, RIN}};
static const kiln_attr_pair in_out_pairs[] = {{RIN, ROUT}};
static const kiln_attr_pair out_out_pairs[] = {{ROUT, ROUT}};

static int64_t mem_type(const kiln_mem_anchor *a)
{
    return mlc_mem_type(a->graph, a->node, a->index, a->is_output != 0);
}

static bool same_type(const kiln_checker_query *q, kiln_checker_result *r, const char *name)
{
    if (mem_type(&q->a) == mem_type(&q->b)) {
        kiln_checker_reason(r, "%s: same memory type %lld, no conflict", name,
                            (long long)mem_type(&q->a));
        return true;
    }
    return false;
}

static kiln_status check_cont_rts(const kiln_checker_query *q, kiln_checker_result *r)
{
    bool a_is_rts = q->type_a == RIN || q->type_a == ROUT;
    const kiln_mem_anchor *s = a_is_rts ? &q->a : &q->b;
    const kiln_mem_anchor *c = mlc_other(q, s);
    if (mlc_mem_type_special(mem_type(c))) {
        kiln_checker_reason(r, "ContinuousInOutAndRtsSpecialMemType: continuous anchor has a "
                               "special memory type itself, no conflict");
        return KILN_OK;
    }
    if (!c->is_output && mlc_node_out_in_symbol(q->symbol, q->symbol_count, c->graph, c->node))
        return mlc_isolate(r, s,
                           "ContinuousInOutAndRtsSpecialMemType: continuous node refs "
                           "its input, copy the special-memory anchor");
    return mlc_isolate(r, c, "ContinuousInOutAndRtsSpecialMemType: copy the continuous anchor");
}

/* The anchor of the two whose node comes first (ties: a). */
static const kiln_mem_anchor *earlier(const kiln_checker_query *q)
{
    return mlc_topo(&q->b) < mlc_topo(&q->a) ? &q->b : &q->a;
}

static kiln_status check_in_in(const kiln_checker_query *q, kiln_checker_result *r)
{
    if (same_type(q, r, "RtsSpecialInputAndRtsSpecialInput"))
        return KILN_OK;
    const kiln_mem_anchor *x = earlier(q);
    if (mlc_node_out_in_symbol(q->symbol, q->symbol_count, x->graph, x->node))
        x = mlc_other(q, x);
    return mlc_isolate(r, x, "RtsSpecialInputAndRtsSpecialInput: memory types differ");
}

static kiln_status check_in_out(const kiln_checker_query *q, kiln_checker_result *r)
{
    if (same_type(q, r, "RtsSpecialInputAndRtsSpecialOutput"))
        return KILN_OK;
    return mlc_isolate(r, mlc_side(q, ROUT),
                       "RtsSpecialInputAndRtsSpecialOutput: memory types differ, copy the output");
}

static kiln_status check_out_out(const kiln_checker_query *q, kiln_checker_result *r)
{
    if (same_type(q, r, "RtsSpecialOutputAndRtsSpecialOutput"))
        return KILN_OK;
    return mlc_isolate(r, earlier(q), "RtsSpecialOutputAndRtsSpecialOutput: memory types differ");
}

MLC_CHECKER(mlc_continuous_and_rts, "ContinuousInOutAndRtsSpecialMemType",
            "continuous anchor vs special-memory anchor", 0, cont_pairs, check_cont_rts);
MLC_CHECKER(mlc_rts_in_and_rts_in, "RtsSpecialInputAndRtsSpecialInput", "two special-memory inputs",
            0, in_in_pairs, check_in_in);
MLC_CHECKER(mlc_rts_in_and_rts_out, "RtsSpecialInputAndRtsSpecialOutput",
            "special-memory input vs special-memory output", 0, in_out_pairs, check_in_out);
MLC_CHECKER(mlc_rts_out_and_rts_out, "RtsSpecialOutputAndRtsSpecialOutput",
            "two special-memory outputs", 0, out_out_pairs, check_out_out);

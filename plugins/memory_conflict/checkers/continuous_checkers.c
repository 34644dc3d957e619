/*
 * continuous_checkers.c - the checkers between continuous-memory anchors
 * (continuous_input / continuous_output and their no-padding forms).  GE
 * continuous_input_and_continuous_input.cc, continuous_out_and_continuous_out.cc,
 * continuous_output_and_continuous_input.cc,
 * nopadding_continuous_input_and_nopadding_continuous_input.cc,
 * nopadding_continuous_input_and_nopadding_continuous_out.cc,
 * nopadding_continuous_out_and_nopadding_continuous_out.cc.
 *
 * ContinuousInputAndContinuousInput (per symbol)  CONT_IN x {CONT_IN, NOPAD_CONT_IN}
 *   (a) an out anchor of the symbol feeding two or more continuous-input
 *   nodes: every such consumer input after the first is isolated; (b)
 *   cascade: a continuous-input node fed by another continuous-input node
 *   of the symbol: that consumer input is isolated.
 * ContinuousOutputAndContinuousOutput (per symbol) CONT_OUT x {CONT_OUT, NOPAD_CONT_OUT}
 *   a continuous-output node fed by another continuous-output node of the
 *   symbol: the producer's out anchor is isolated.
 * NoPaddingContinuousOutputAndNoPaddingContinuousOutput (per symbol)
 *   the same, restricted to no-padding nodes.
 * NoPaddingContinuousInputAndNoPaddingContinuousInput (per symbol)
 *   the two nodes' producer lists are disjoint, equal, or one a contiguous
 *   run of the other: no conflict; otherwise, for each out anchor of the
 *   symbol, every no-padding consumer input after the first is isolated.
 * ContinuousOutputAndContinuousInput  CONT_IN x CONT_OUT
 *   the producer's out-anchor list and the consumer's real producer list
 *   are the same, a contiguous subset, or overlap head-to-tail without
 *   crossing: no conflict; otherwise node a's anchor is isolated.
 * NoPaddingContinuousInputAndNoPaddingContinuousOutput  NOPAD_CONT_IN x NOPAD_CONT_OUT
 *   the no-padding-output node's input 0 is the no-padding-input node's
 *   output 0 (PhonyConcat -> PhonySplit): no conflict; else the no-padding
 *   input is isolated.
 */
#include "checkers.h"
#include <stdlib.h>

#define CIN MLC_AA(CONTINUOUS_INPUT)
#define COUT MLC_AA(CONTINUOUS_OUTPUT)
#define NIN MLC_AA(NOPADDING_CONTINUOUS_INPUT)
#define NOUT MLC_AA(NOPADDING_CONTINUOUS_OUTPUT)

static const kiln_attr_pair in_in_pairs[] = {{CIN, CIN}, {CIN, NIN}};
static const kiln_attr_pair out_out_pairs[] = {{COUT, COUT}, {COUT, NOUT}};
static const kiln_attr_pair nout_nout_pairs[] = {{NOUT, NOUT}};
static const kiln_attr_pair nin_nin_pairs[] = {{NIN, NIN}};
static const kiln_attr_pair in_out_pairs[] = {{CIN, COUT}};
static const kiln_attr_pair nin_nout_pairs[] = {{NIN, NOUT}};

static bool any_cont_input(const kiln_graph *g, kiln_node_id n)
{
    return mlc_is_continuous_input(g, n) || mlc_is_nopad_input(g, n);
}

static bool any_cont_output(const kiln_graph *g, kiln_node_id n)
{
    return mlc_is_continuous_output(g, n) || mlc_is_nopad_output(g, n);
}

/* For each out anchor of the symbol: isolate every consumer input accepted
 * by @p pred after the first one. */
static kiln_status isolate_later_consumers(const kiln_checker_query *q, kiln_checker_result *r,
                                           bool (*pred)(const kiln_graph *, kiln_node_id),
                                           const char *rule)
{
    for (uint32_t i = 0; i < q->symbol_count; i++) {
        const kiln_mem_anchor *s = &q->symbol[i];
        if (!s->is_output)
            continue;
        bool first = true;
        for (uint32_t u = kiln_use_first(s->graph, s->node, s->index); u;
             u = kiln_use_next(s->graph, u)) {
            kiln_anchor d = kiln_use_dst(s->graph, u);
            if (!pred(s->graph, d.node))
                continue;
            if (first) {
                first = false;
                continue;
            }
            kiln_mem_anchor in = {s->graph, d.node, d.index, 0};
            kiln_status st = mlc_isolate(r, &in, rule);
            if (st != KILN_OK)
                return st;
        }
    }
    return KILN_OK;
}

static kiln_status check_in_in(const kiln_checker_query *q, kiln_checker_result *r)
{
    kiln_status st = isolate_later_consumers(
        q, r, any_cont_input,
        "ContinuousInputAndContinuousInput: one output feeds several continuous inputs");
    for (uint32_t i = 0; i < q->symbol_count && st == KILN_OK; i++) {
        const kiln_mem_anchor *s = &q->symbol[i];
        if (s->is_output || !any_cont_input(s->graph, s->node))
            continue;
        kiln_anchor p = kiln_node_input_peer(s->graph, s->node, s->index);
        if (p.node && any_cont_input(s->graph, p.node) &&
            mlc_node_out_in_symbol(q->symbol, q->symbol_count, s->graph, p.node))
            st = mlc_isolate(r, s,
                             "ContinuousInputAndContinuousInput: cascaded continuous "
                             "inputs");
    }
    return st;
}

static kiln_status out_out(const kiln_checker_query *q, kiln_checker_result *r,
                           bool (*pred)(const kiln_graph *, kiln_node_id), const char *rule)
{
    for (uint32_t i = 0; i < q->symbol_count; i++) {
        const kiln_mem_anchor *s = &q->symbol[i];
        if (!s->is_output || !pred(s->graph, s->node))
            continue;
        for (uint32_t u = kiln_use_first(s->graph, s->node, s->index); u;
             u = kiln_use_next(s->graph, u)) {
            kiln_anchor d = kiln_use_dst(s->graph, u);
            if (d.node != s->node && pred(s->graph, d.node) &&
                mlc_node_out_in_symbol(q->symbol, q->symbol_count, s->graph, d.node)) {
                kiln_status st = mlc_isolate(r, s, rule);
                if (st != KILN_OK)
                    return st;
                break;
            }
        }
    }
    return KILN_OK;
}

static kiln_status check_out_out(const kiln_checker_query *q, kiln_checker_result *r)
{
    return out_out(q, r, any_cont_output,
                   "ContinuousOutputAndContinuousOutput: continuous output feeds a continuous "
                   "output");
}

static kiln_status check_nout_nout(const kiln_checker_query *q, kiln_checker_result *r)
{
    return out_out(q, r, mlc_is_nopad_output,
                   "NoPaddingContinuousOutputAndNoPaddingContinuousOutput: no-padding output "
                   "feeds a no-padding output");
}

/* A list of out anchors (producers or outputs) of one node. */
typedef struct alist {
    kiln_anchor *v;
    uint32_t n;
} alist;

static bool alist_peers(kiln_graph *g, kiln_node_id n, bool real, alist *out)
{
    out->n = real ? mlc_real_in_peers(g, n, NULL, 0) : mlc_in_peers(g, n, NULL, 0);
    out->v = malloc((out->n ? out->n : 1) * sizeof(kiln_anchor));
    if (!out->v)
        return false;
    if (real)
        mlc_real_in_peers(g, n, out->v, out->n);
    else
        mlc_in_peers(g, n, out->v, out->n);
    return true;
}

static bool alist_outputs(kiln_graph *g, kiln_node_id n, alist *out)
{
    out->n = kiln_node_output_count(g, n);
    out->v = malloc((out->n ? out->n : 1) * sizeof(kiln_anchor));
    if (!out->v)
        return false;
    for (uint32_t i = 0; i < out->n; i++)
        out->v[i] = (kiln_anchor){n, i};
    return true;
}

static bool alist_has(const alist *l, kiln_anchor a)
{
    for (uint32_t i = 0; i < l->n; i++)
        if (mlc_kanchor_eq(l->v[i], a))
            return true;
    return false;
}

/* First index of @p x whose anchor occurs in @p y (*iy: its first index in y); false if none. */
static bool first_same(const alist *x, const alist *y, uint32_t *ix, uint32_t *iy)
{
    for (uint32_t i = 0; i < x->n; i++)
        for (uint32_t j = 0; j < y->n; j++)
            if (mlc_kanchor_eq(x->v[i], y->v[j])) {
                *ix = i;
                *iy = j;
                return true;
            }
    return false;
}

/* @p sub is a contiguous run of @p vec starting where their first common anchor is. */
static bool is_sub_run(const alist *vec, const alist *sub)
{
    uint32_t j, unused;
    if (!first_same(vec, sub, &j, &unused))
        return sub->n == 0;
    uint32_t i = 0;
    for (; i < sub->n && j < vec->n; i++, j++)
        if (!mlc_kanchor_eq(sub->v[i], vec->v[j]))
            return false;
    return i == sub->n;
}

/* GE IsSameOrPartialSame: equal, contiguous subset, or head-to-tail overlap without crossing. */
static bool same_or_partial(const alist *lh, const alist *rh)
{
    uint32_t li, ri;
    if (!first_same(lh, rh, &li, &ri))
        return false;
    if (li != 0 && ri != 0)
        return false;
    for (; ri < rh->n && li < lh->n; ri++, li++)
        if (!mlc_kanchor_eq(rh->v[ri], lh->v[li]))
            return false;
    if (li != lh->n && ri != rh->n)
        return false;
    for (; li < lh->n; li++)
        if (alist_has(rh, lh->v[li]))
            return false;
    for (; ri < rh->n; ri++)
        if (alist_has(lh, rh->v[ri]))
            return false;
    return true;
}

static kiln_status check_nin_nin(const kiln_checker_query *q, kiln_checker_result *r)
{
    alist a = {0}, b = {0};
    bool conflict = false;
    if (alist_peers(q->a.graph, q->a.node, false, &a) &&
        alist_peers(q->b.graph, q->b.node, false, &b)) {
        uint32_t i, j;
        conflict = q->a.node != q->b.node && first_same(&a, &b, &i, &j) && !is_sub_run(&a, &b) &&
                   !is_sub_run(&b, &a);
    }
    free(a.v);
    free(b.v);
    if (!conflict) {
        kiln_checker_reason(r, "NoPaddingContinuousInputAndNoPaddingContinuousInput: disjoint, "
                               "equal or sub-run producers, no conflict");
        return KILN_OK;
    }
    return isolate_later_consumers(q, r, mlc_is_nopad_input,
                                   "NoPaddingContinuousInputAndNoPaddingContinuousInput: "
                                   "partially shared producers");
}

static kiln_status check_in_out(const kiln_checker_query *q, kiln_checker_result *r)
{
    const kiln_mem_anchor *co = mlc_side(q, COUT), *ci = mlc_side(q, CIN);
    alist lh = {0}, rh = {0};
    bool ok =
        alist_outputs(co->graph, co->node, &lh) && alist_peers(ci->graph, ci->node, true, &rh);
    bool same = ok && co->graph == ci->graph && same_or_partial(&lh, &rh);
    free(lh.v);
    free(rh.v);
    if (!ok)
        return KILN_ERR_NOMEM;
    if (same) {
        kiln_checker_reason(r, "ContinuousOutputAndContinuousInput: same or partially same "
                               "order, no conflict");
        return KILN_OK;
    }
    return mlc_isolate(r, &q->a, "ContinuousOutputAndContinuousInput: orders differ");
}

static kiln_status check_nin_nout(const kiln_checker_query *q, kiln_checker_result *r)
{
    const kiln_mem_anchor *ni = mlc_side(q, NIN), *no = mlc_side(q, NOUT);
    kiln_anchor p = kiln_node_input_peer(no->graph, no->node, 0);
    if (ni->graph == no->graph && p.node == ni->node && p.index == 0) {
        kiln_checker_reason(r, "NoPaddingContinuousInputAndNoPaddingContinuousOutput: "
                               "PhonyConcat -> PhonySplit, no conflict");
        return KILN_OK;
    }
    return mlc_isolate(r, ni,
                       "NoPaddingContinuousInputAndNoPaddingContinuousOutput: copy into "
                       "the no-padding input");
}

MLC_CHECKER(mlc_cont_in_and_cont_in, "ContinuousInputAndContinuousInput",
            "two continuous-input nodes share a producer", KILN_CHECKER_CALL_AS_SYMBOL, in_in_pairs,
            check_in_in);
MLC_CHECKER(mlc_cont_out_and_cont_out, "ContinuousOutputAndContinuousOutput",
            "continuous output feeding a continuous output", KILN_CHECKER_CALL_AS_SYMBOL,
            out_out_pairs, check_out_out);
MLC_CHECKER(mlc_nopad_out_and_nopad_out, "NoPaddingContinuousOutputAndNoPaddingContinuousOutput",
            "no-padding output feeding a no-padding output", KILN_CHECKER_CALL_AS_SYMBOL,
            nout_nout_pairs, check_nout_nout);
MLC_CHECKER(mlc_nopad_in_and_nopad_in, "NoPaddingContinuousInputAndNoPaddingContinuousInput",
            "two no-padding-input nodes share producers", KILN_CHECKER_CALL_AS_SYMBOL,
            nin_nin_pairs, check_nin_nin);
MLC_CHECKER(mlc_cont_out_and_cont_in, "ContinuousOutputAndContinuousInput",
            "continuous output consumed by a continuous input", 0, in_out_pairs, check_in_out);
MLC_CHECKER(mlc_nopad_in_and_nopad_out, "NoPaddingContinuousInputAndNoPaddingContinuousOutput",
            "no-padding input vs no-padding output", 0, nin_nout_pairs, check_nin_nout);

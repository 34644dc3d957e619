/*
 * inplace_support_check_pass.c - InplaceSupportCheckPass (GE
 * inplace_support_check_pass.cc; GE_SEMANTICS 5.1, seed 3.1.4), a node pass
 * run by GEPass.
 *
 * A node with exactly one output may compute in place over one of its inputs.
 * Inputs are tried in index order; an input qualifies when it is connected,
 * its producer is not a source node (Data-like, Const, Constant, var-like:
 * their memory must not be overwritten), the producer output has exactly one
 * consumer, and the input's dtype and dims equal output 0's.  The first
 * qualifying input's index is written as `_inplace_support_input_index` on
 * output 0's descriptor, for ProcessInplace (GE mem_inplace.cc) to use, and
 * the node is re-passed (GE AddRePassNode).
 *
 * GE runs this pass only when the host-exec flag is set; in kiln that choice is
 * the manifest's (list the pass only in host-exec pipelines).  GE re-passes the
 * node after every marking; kiln re-passes only when the mark changed, which
 * gives the same graph without spinning the GEPass loop to its limit.
 * Requires: nothing.  Preserves: the CFG (edits a descriptor attribute only).
 * Complexity: O(inputs) per node.
 */
#include "mc_passes.h"

static bool source_node(const kiln_graph *g, kiln_node_id n)
{
    return mc_is_data_like(g, n) || mc_is_const(g, n) || mc_is_var_like(g, n);
}

/* Index of the first input @p n can reuse in place, or -1. */
static int32_t inplace_input(kiln_graph *g, kiln_node_id n)
{
    const kiln_tensor_desc *out = kiln_node_output_desc(g, n, 0);
    for (uint32_t i = 0; i < kiln_node_input_count(g, n); i++) {
        /* the op-type test (string compares) last: the other tests are
         * cheaper and the conditions independent */
        kiln_anchor p = kiln_node_input_peer(g, n, i);
        if (!p.node || kiln_node_output_use_count(g, p.node, p.index) != 1)
            continue;
        const kiln_tensor_desc *in = kiln_node_input_desc(g, n, i);
        if (!mc_desc_same_shape(in, out))
            continue; /* dtype or shape mismatch */
        if (source_node(g, p.node))
            continue;
        return (int32_t)i;
    }
    return -1;
}

static kiln_status run(void *inst, kiln_pass_ctx *ctx, kiln_graph *g, kiln_node_id n)
{
    (void)inst;
    if (kiln_node_output_count(g, n) != 1)
        return KILN_OK;
    int32_t idx = inplace_input(g, n);
    if (idx < 0)
        return KILN_OK;
    kiln_tensor_desc *out = kiln_node_output_desc(g, n, 0);
    int64_t old = -1;
    if (kiln_attrs_get_int(kiln_desc_attrs(out), "_inplace_support_input_index", &old) &&
        old == idx)
        return KILN_OK;
    kiln_attrs *a = kiln_desc_attrs_mut(g, out);
    if (!a || kiln_attrs_set_int(a, "_inplace_support_input_index", idx) != KILN_OK)
        return kiln_errorf(kiln_pass_error(ctx), KILN_ERR_NOMEM,
                           "cannot set _inplace_support_input_index on %s",
                           kiln_node_name_str(g, n));
    kiln_diag(ctx, KILN_SEV_DEBUG, "%s: output 0 may reuse input %d in place",
              kiln_node_name_str(g, n), idx);
    kiln_pass_stat_add(ctx, "nodes marked", 1);
    kiln_pass_repass(ctx, g, n);
    return KILN_OK;
}

const kiln_pass_desc kiln_mc_inplace_support_check_pass = {
    .struct_size = sizeof(kiln_pass_desc),
    .kind = KILN_PASS_KIND_NODE,
    .name = "InplaceSupportCheckPass",
    .summary = "mark single-output nodes whose output may reuse an input (_inplace_support_input_index)",
    .flags = KILN_PASS_PRESERVES_CFG,
    .run_node = run,
};

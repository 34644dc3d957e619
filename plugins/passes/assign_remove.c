/*
 * assign_remove.c - AssignRemovePass (GE's AssignRemovePass), a node pass
 * run by GEPass.
 *
 * An Assign whose value (input 1) is the very tensor its reference input
 * (input 0) designates writes a variable with its own contents: it does
 * nothing and is removed, its consumers re-fed from the producer of the
 * reference input (GE's IsolateAndDeleteNode(assign, {0})).  "The same
 * tensor" follows reference outputs back to the memory they alias: an output
 * with `ref_input` k is the tensor of input k of its node (Assign(v, v),
 * Assign(v, Assign(v, x):0) with the inner one's output being v's memory,
 * Assign(v, RefIdentity-like(v))).
 *
 * GE's rule goes further: an Assign of a computed value (not a Data, Const or
 * Variable) into a Variable with no input, when both have no other consumer,
 * is removed by making the value node write the variable's memory directly
 * (the Variable gains the value as input 0 and the value's output the
 * attribute `_assign_var_name`, which GE's memory assigner honours).  kiln's
 * memory planner gives no output a variable's address from that attribute,
 * so that rewrite would drop the write; kiln does not do it.
 *
 * Never removes a `_cannot_be_deleted` Assign or one feeding a NetOutput.
 * Counter: "assigns removed".  O(alias chain) per Assign.
 */
#include "passes.h"
#include "simplify.h"

#include <string.h>

typedef struct ar_inst {
    simp_syms s;
} ar_inst;

static kiln_status ar_create(const kiln_options *opts, kiln_error *err, void **inst)
{
    (void)opts;
    ar_inst *p = kiln_alloc(sizeof(*p));
    if (!p)
        return kiln_errorf(err, KILN_ERR_NOMEM, "AssignRemovePass: out of memory");
    memset(p, 0, sizeof(*p));
    *inst = p;
    return KILN_OK;
}

static void ar_destroy(void *inst) { kiln_free(inst); }

static void ar_start(void *inst, kiln_pass_ctx *ctx, kiln_graph *g)
{
    (void)ctx;
    simp_syms_init(&((ar_inst *)inst)->s, g);
}

/* The tensor an output aliases: follow `ref_input` back (bounded). */
static kiln_anchor memory_of(kiln_graph *g, kiln_anchor a)
{
    for (uint32_t step = 0; a.node && step < 1024; step++) {
        int32_t k = kiln_desc_ref_input(kiln_node_output_desc(g, a.node, a.index));
        if (k < 0 || (uint32_t)k >= kiln_node_input_count(g, a.node))
            break;
        kiln_anchor up = kiln_node_input_peer(g, a.node, (uint32_t)k);
        if (!up.node)
            break;
        a = up;
    }
    return a;
}

static kiln_status run(void *inst, kiln_pass_ctx *ctx, kiln_graph *g, kiln_node_id n)
{
    const simp_syms *s = &((const ar_inst *)inst)->s;
    if (!simp_op_is(g, n, s->assign) || kiln_node_input_count(g, n) < 2 ||
        kiln_node_output_count(g, n) > 1 || simp_pinned(g, n) ||
        (kiln_node_output_count(g, n) == 1 && simp_feeds_netoutput(g, n, 0, s)))
        return KILN_OK;
    kiln_anchor ref = kiln_node_input_peer(g, n, 0), val = kiln_node_input_peer(g, n, 1);
    if (!ref.node || !val.node)
        return KILN_OK;
    kiln_anchor mr = memory_of(g, ref), mv = memory_of(g, val);
    if (mr.node != mv.node || mr.index != mv.index)
        return KILN_OK;
    kiln_pass_explain(ctx, g, n, "removed: writes %s:%u with its own value",
                      kiln_node_name_str(g, mr.node), mr.index);
    kiln_pass_stat_add(ctx, "assigns removed", 1);
    static const int32_t io_map[] = {0};
    return kiln_pass_isolate_and_delete(ctx, g, n, io_map, kiln_node_output_count(g, n), false);
}

const kiln_pass_desc kiln_assign_remove_pass = {
    .struct_size = sizeof(kiln_pass_desc),
    .kind = KILN_PASS_KIND_NODE,
    .name = "AssignRemovePass",
    .summary = "remove Assigns that write a variable with its own value",
    .create = ar_create,
    .destroy = ar_destroy,
    .run_node = run,
    .on_start_graph = ar_start,
};

/*
 * identity_remove.c - IdentityRemovePass (GE IdentityPass's deletion rule), a
 * node pass run by GEPass.
 *
 * An Identity node is removed, its consumers re-fed from its producer, when:
 *   - its input is connected and it has exactly one output;
 *   - it is not marked `_cannot_be_deleted` (isolation copies inserted by the
 *     memory-conflict passes carry that mark and must survive);
 *   - it does not feed a NetOutput directly while its producer is a Data node
 *     of the same graph (that copy is what keeps a model input and a model
 *     output apart);
 *   - its producer is not a reference/variable op whose write the copy
 *     isolates (ops with `ref_input` on the producing output).
 * Removal goes through kiln_pass_isolate_and_delete with io_map {0}, which
 * asks GEPass to re-pass the neighbours, so chains of Identities collapse in
 * one sweep.  Requires: nothing.  Preserves: nothing.
 *
 * Op types are compared as symbols of the graph's context, interned once per
 * graph walk (on_start_graph) into the pass instance (one per pipeline, so one
 * context).
 */
#include "passes.h"
#include <string.h>

typedef struct ir_inst {
    kiln_sym identity, data, netoutput;
} ir_inst;

static kiln_status ir_create(const kiln_options *opts, kiln_error *err, void **inst)
{
    (void)opts;
    ir_inst *p = kiln_alloc(sizeof(*p));
    if (!p)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    memset(p, 0, sizeof(*p));
    *inst = p;
    return KILN_OK;
}

static void ir_destroy(void *inst) { kiln_free(inst); }

static void ir_start(void *inst, kiln_pass_ctx *ctx, kiln_graph *g)
{
    (void)ctx;
    ir_inst *p = inst;
    p->identity = kiln_intern(g, "Identity");
    p->data = kiln_intern(g, "Data");
    p->netoutput = kiln_intern(g, "NetOutput");
}

static bool op_is(kiln_graph *g, kiln_node_id n, kiln_sym op)
{
    return op && kiln_node_op(g, n) == op;
}

static kiln_status run(void *inst, kiln_pass_ctx *ctx, kiln_graph *g, kiln_node_id n)
{
    const ir_inst *p = inst;
    if (!op_is(g, n, p->identity) || kiln_node_output_count(g, n) != 1 ||
        kiln_node_input_count(g, n) < 1)
        return KILN_OK;
    bool keep = false;
    if (kiln_attrs_get_bool(kiln_node_attrs(g, n), "_cannot_be_deleted", &keep) && keep)
        return KILN_OK;
    kiln_anchor src = kiln_node_input_peer(g, n, 0);
    if (!src.node)
        return KILN_OK;
    if (kiln_desc_ref_input(kiln_node_output_desc(g, src.node, src.index)) >= 0)
        return KILN_OK;
    if (op_is(g, src.node, p->data))
        for (uint32_t u = kiln_use_first(g, n, 0); u; u = kiln_use_next(g, u))
            if (op_is(g, kiln_use_dst(g, u).node, p->netoutput))
                return KILN_OK;
    kiln_pass_explain(ctx, g, n, "removed: Identity of %s:%u", kiln_node_name_str(g, src.node),
                      src.index);
    static const int32_t io_map[] = {0};
    kiln_pass_stat_add(ctx, "identities removed", 1);
    return kiln_pass_isolate_and_delete(ctx, g, n, io_map, 1, false);
}

const kiln_pass_desc kiln_identity_remove_pass = {
    .struct_size = sizeof(kiln_pass_desc),
    .kind = KILN_PASS_KIND_NODE,
    .name = "IdentityRemovePass",
    .summary = "delete removable Identity nodes (never _cannot_be_deleted ones)",
    .create = ir_create,
    .destroy = ir_destroy,
    .run_node = run,
    .on_start_graph = ir_start,
};

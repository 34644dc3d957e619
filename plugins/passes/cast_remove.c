/*
 * cast_remove.c - CastRemovePass (GE's CastRemovePass), a node pass run by
 * GEPass.
 *
 * Two rules:
 *   1. A Cast whose target dtype is its input's dtype (and whose output has
 *      that dtype) does nothing: it is removed, its consumers re-fed from its
 *      producer.
 *   2. GE's chain rule.  From a node that is not a transform op and has one
 *      output, follow the chain of transform ops (Cast, Transpose, Reshape,
 *      Flatten, Squeeze, Unsqueeze) in which every link has exactly one
 *      consumer, reading the transform's data input 0.  When a prefix of that
 *      chain ends with the start's dtype again and every dtype on the way
 *      holds every value of the start's dtype exactly, the Casts of the
 *      prefix are removed and the other transform ops of the prefix are
 *      retyped to the start's dtype:
 *          x(f16) -> Cast(f32) -> Transpose -> Cast(f16) -> y
 *          x(f16) -> Transpose(f16) -> y
 *      GE accepts any fp16/fp32 round trip that does not go through bool
 *      (it treats only float->bool and int64->bool as lossy), so it removes
 *      f32 -> f16 -> f32; kiln removes only round trips that are exact (the
 *      runtime's outputs stay bit-identical), for every dtype.
 * Never removes a `_cannot_be_deleted` node, a Cast feeding a NetOutput (a
 * model output keeps its producer's name), or a Cast of a reference output.
 * Counters: "casts removed", "transform ops retyped".  O(chain) per visit,
 * each chain walked from its start only, so O(N) per sweep.
 */
#include "passes.h"
#include "simplify.h"

#include <string.h>

#define CHAIN_MAX 64

typedef struct cr_inst {
    simp_syms s;
} cr_inst;

static kiln_status cr_create(const kiln_options *opts, kiln_error *err, void **inst)
{
    (void)opts;
    cr_inst *p = kiln_alloc(sizeof(*p));
    if (!p)
        return kiln_errorf(err, KILN_ERR_NOMEM, "CastRemovePass: out of memory");
    memset(p, 0, sizeof(*p));
    *inst = p;
    return KILN_OK;
}

static void cr_destroy(void *inst) { kiln_free(inst); }

static void cr_start(void *inst, kiln_pass_ctx *ctx, kiln_graph *g)
{
    (void)ctx;
    simp_syms_init(&((cr_inst *)inst)->s, g);
}

static bool is_transop(const kiln_graph *g, kiln_node_id n, const simp_syms *s)
{
    kiln_sym op = kiln_node_op(g, n);
    return op && (op == s->cast || op == s->transpose || op == s->reshape || op == s->flatten ||
                  op == s->squeeze || op == s->unsqueeze);
}

static kiln_status remove_cast(kiln_pass_ctx *ctx, kiln_graph *g, kiln_node_id n, const char *why)
{
    static const int32_t io_map[] = {0};
    kiln_pass_explain(ctx, g, n, "removed: %s", why);
    kiln_pass_stat_add(ctx, "casts removed", 1);
    return kiln_pass_isolate_and_delete(ctx, g, n, io_map, 1, false);
}

/* Rule 1: a Cast to the dtype it reads. */
static bool same_dtype_cast(kiln_graph *g, kiln_node_id n, const simp_syms *s)
{
    kiln_dtype to;
    if (!simp_op_is(g, n, s->cast) || kiln_node_input_count(g, n) < 1 ||
        kiln_node_output_count(g, n) != 1 || !simp_cast_to(g, n, &to))
        return false;
    kiln_anchor src = kiln_node_input_peer(g, n, 0);
    const kiln_tensor_desc *in = kiln_node_input_desc(g, n, 0);
    if (!src.node || !in || kiln_desc_dtype(in) != to ||
        kiln_desc_dtype(kiln_node_output_desc(g, n, 0)) != to)
        return false;
    return !simp_pinned(g, n) && !simp_feeds_netoutput(g, n, 0, s) && !simp_is_ref_output(g, src);
}

static kiln_status run(void *inst, kiln_pass_ctx *ctx, kiln_graph *g, kiln_node_id n)
{
    const simp_syms *s = &((const cr_inst *)inst)->s;
    if (same_dtype_cast(g, n, s))
        return remove_cast(ctx, g, n, "Cast to the dtype of its input");
    /* Rule 2 starts at a node that is not a transform op, with one output. */
    if (is_transop(g, n, s) || kiln_node_output_count(g, n) != 1 ||
        simp_op_is(g, n, s->netoutput) || simp_is_ref_output(g, (kiln_anchor){n, 0}))
        return KILN_OK;
    const kiln_dtype d = kiln_desc_dtype(kiln_node_output_desc(g, n, 0));
    kiln_node_id chain[CHAIN_MAX];
    uint32_t len = 0;
    for (kiln_node_id cur = n; len < CHAIN_MAX && kiln_node_output_use_count(g, cur, 0) == 1;) {
        kiln_anchor dst = kiln_use_dst(g, kiln_use_first(g, cur, 0));
        if (dst.index != 0 || !is_transop(g, dst.node, s) || simp_pinned(g, dst.node) ||
            kiln_node_output_count(g, dst.node) != 1)
            break;
        chain[len++] = cur = dst.node;
    }
    /* The longest exact round trip: every dtype on the way holds d. */
    int32_t end = -1;
    bool has_cast = false;
    for (uint32_t i = 0; i < len; i++) {
        kiln_dtype t = kiln_desc_dtype(kiln_node_output_desc(g, chain[i], 0));
        if (!simp_dtype_holds(t, d))
            break;
        has_cast = has_cast || simp_op_is(g, chain[i], s->cast);
        if (t == d && has_cast &&
            !(simp_op_is(g, chain[i], s->cast) && simp_feeds_netoutput(g, chain[i], 0, s)))
            end = (int32_t)i;
    }
    if (end < 0)
        return KILN_OK;
    for (int32_t i = 0; i <= end; i++) {
        kiln_node_id m = chain[i];
        if (simp_op_is(g, m, s->cast)) {
            kiln_status st = remove_cast(ctx, g, m, "Cast of an exact dtype round trip");
            if (st != KILN_OK)
                return st;
            continue;
        }
        if (kiln_desc_dtype(kiln_node_output_desc(g, m, 0)) == d)
            continue;
        kiln_desc_set_dtype(g, kiln_node_output_desc(g, m, 0), d);
        if (kiln_node_input_has_desc(g, m, 0))
            kiln_desc_set_dtype(g, kiln_node_input_desc_mut(g, m, 0), d);
        kiln_pass_explain(ctx, g, m, "retyped to %s: the Casts around it were removed",
                          kiln_dtype_name(d));
        kiln_pass_stat_add(ctx, "transform ops retyped", 1);
        kiln_pass_repass(ctx, g, m);
    }
    return KILN_OK;
}

const kiln_pass_desc kiln_cast_remove_pass = {
    .struct_size = sizeof(kiln_pass_desc),
    .kind = KILN_PASS_KIND_NODE,
    .name = "CastRemovePass",
    .summary = "remove Casts to the same dtype and exact Cast round trips",
    .create = cr_create,
    .destroy = cr_destroy,
    .run_node = run,
    .on_start_graph = cr_start,
};

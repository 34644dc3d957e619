/*
 * transpose_remove.c - two node passes over Transpose, run by GEPass.
 *
 * UnchangedTransposeRemovePass (GE's UnchangedTransposeRemovePass): a
 * Transpose whose output is its input, because every axis it moves has
 * extent 1 or it moves none (perm[i] == i or dim i of the input is 1, for
 * every i; GE's rule), is removed and its consumers re-fed from its
 * producer.  Its perm Const input, if any and unused, goes with it.
 *
 * TransposeMergePass (no pass of this name in GE; GE's
 * TransOpSymmetryEliminationPass removes the inverse pairs only): a
 * Transpose T2 fed by a Transpose T1 reads T1's input directly with the
 * composed permutation q[i] = p1[p2[i]]; when q is the identity T2 is
 * removed as well (GE's "back to raw" test).  T1 goes when nothing else
 * reads it.  Shapes need not be known (only the permutations).
 *
 * A missing perm means "reverse the axes" (ONNX) and needs a known input
 * rank.  Neither pass touches a `_cannot_be_deleted` node, removes a node
 * feeding a NetOutput, or bypasses a reference output.
 * Counters: "transposes removed", "transposes merged".  O(rank) per visit.
 */
#include "passes.h"
#include "simplify.h"

#include <string.h>

typedef struct tr_inst {
    simp_syms s;
} tr_inst;

static kiln_status tr_create(const kiln_options *opts, kiln_error *err, void **inst)
{
    (void)opts;
    tr_inst *p = kiln_alloc(sizeof(*p));
    if (!p)
        return kiln_errorf(err, KILN_ERR_NOMEM, "transpose pass: out of memory");
    memset(p, 0, sizeof(*p));
    *inst = p;
    return KILN_OK;
}

static void tr_destroy(void *inst) { kiln_free(inst); }

static void tr_start(void *inst, kiln_pass_ctx *ctx, kiln_graph *g)
{
    (void)ctx;
    simp_syms_init(&((tr_inst *)inst)->s, g);
}

/* The permutation of Transpose @p n (validated), its length in *rank. */
static bool get_perm(kiln_graph *g, kiln_node_id n, const simp_syms *s, int64_t *perm,
                     uint32_t *rank)
{
    bool present;
    if (!simp_node_ints(g, n, "perm", 1, s, perm, SIMP_MAX_RANK, rank, &present))
        return false;
    const kiln_tensor_desc *in = kiln_node_input_desc(g, n, 0);
    int32_t r = in ? kiln_desc_rank(in) : -1;
    if (!present) {
        if (r < 0 || r > SIMP_MAX_RANK)
            return false;
        *rank = (uint32_t)r;
        for (int32_t i = 0; i < r; i++)
            perm[i] = r - 1 - i;
    }
    if (r >= 0 && (uint32_t)r != *rank)
        return false;
    bool seen[SIMP_MAX_RANK] = {false};
    for (uint32_t i = 0; i < *rank; i++) {
        if (perm[i] < 0 || perm[i] >= (int64_t)*rank || seen[perm[i]])
            return false;
        seen[perm[i]] = true;
    }
    return true;
}

static bool removable(kiln_graph *g, kiln_node_id n, const simp_syms *s)
{
    return simp_op_is(g, n, s->transpose) && kiln_node_output_count(g, n) == 1 &&
           kiln_node_input_count(g, n) >= 1 && kiln_node_input_peer(g, n, 0).node &&
           !simp_pinned(g, n) && !simp_is_ref_output(g, kiln_node_input_peer(g, n, 0));
}

static kiln_status delete_transpose(kiln_pass_ctx *ctx, kiln_graph *g, kiln_node_id n,
                                    const simp_syms *s)
{
    kiln_node_id perm = kiln_node_input_count(g, n) > 1 ? kiln_node_input_peer(g, n, 1).node : 0;
    static const int32_t io_map[] = {0};
    kiln_pass_stat_add(ctx, "transposes removed", 1);
    kiln_status st = kiln_pass_isolate_and_delete(ctx, g, n, io_map, 1, false);
    if (st == KILN_OK)
        simp_remove_if_dead(ctx, g, perm, s);
    return st;
}

static kiln_status unchanged_run(void *inst, kiln_pass_ctx *ctx, kiln_graph *g, kiln_node_id n)
{
    const simp_syms *s = &((const tr_inst *)inst)->s;
    int64_t perm[SIMP_MAX_RANK];
    uint32_t rank;
    if (!removable(g, n, s) || simp_feeds_netoutput(g, n, 0, s) || !get_perm(g, n, s, perm, &rank))
        return KILN_OK;
    const kiln_tensor_desc *in = kiln_node_input_desc(g, n, 0);
    const int64_t *dims = in && kiln_desc_rank(in) > 0 ? kiln_desc_dims(in) : NULL;
    for (uint32_t i = 0; i < rank; i++)
        if (perm[i] != (int64_t)i && !(dims && dims[i] == 1))
            return KILN_OK;
    kiln_pass_explain(ctx, g, n, "removed: the Transpose moves no axis of extent > 1");
    return delete_transpose(ctx, g, n, s);
}

static kiln_status merge_run(void *inst, kiln_pass_ctx *ctx, kiln_graph *g, kiln_node_id n)
{
    const simp_syms *s = &((const tr_inst *)inst)->s;
    if (!removable(g, n, s) || kiln_node_input_count(g, n) != 1)
        return KILN_OK;
    kiln_anchor src = kiln_node_input_peer(g, n, 0);
    kiln_node_id p = src.node;
    if (!removable(g, p, s) || kiln_node_input_count(g, p) != 1)
        return KILN_OK;
    int64_t p1[SIMP_MAX_RANK], p2[SIMP_MAX_RANK], q[SIMP_MAX_RANK];
    uint32_t r1, r2;
    if (!get_perm(g, p, s, p1, &r1) || !get_perm(g, n, s, p2, &r2) || r1 != r2)
        return KILN_OK;
    bool identity = true;
    for (uint32_t i = 0; i < r2; i++) {
        q[i] = p1[p2[i]];
        identity = identity && q[i] == (int64_t)i;
    }
    kiln_anchor x = kiln_node_input_peer(g, p, 0);
    kiln_status st = kiln_edge_remove(g, n, 0);
    if (st == KILN_OK)
        st = kiln_edge_add(g, x.node, x.index, n, 0);
    if (st == KILN_OK && kiln_node_input_has_desc(g, n, 0))
        st = kiln_desc_copy(g, kiln_node_input_desc_mut(g, n, 0),
                            kiln_node_output_desc(g, x.node, x.index));
    if (st == KILN_OK)
        st = kiln_attrs_set_list_int(kiln_node_attrs_mut(g, n), "perm", q, r2);
    if (st != KILN_OK)
        return kiln_errorf(kiln_pass_error(ctx), st, "cannot merge Transpose %s into %s",
                           kiln_node_name_str(g, p), kiln_node_name_str(g, n));
    kiln_pass_stat_add(ctx, "transposes merged", 1);
    kiln_pass_explain(ctx, g, n, "now reads %s:%u: Transpose %s composed into it",
                      kiln_node_name_str(g, x.node), x.index, kiln_node_name_str(g, p));
    simp_remove_if_dead(ctx, g, p, s);
    if (identity && !simp_feeds_netoutput(g, n, 0, s)) {
        kiln_pass_explain(ctx, g, n, "removed: the composed permutation is the identity");
        return delete_transpose(ctx, g, n, s);
    }
    kiln_pass_repass(ctx, g, n);
    return KILN_OK;
}

const kiln_pass_desc kiln_unchanged_transpose_remove_pass = {
    .struct_size = sizeof(kiln_pass_desc),
    .kind = KILN_PASS_KIND_NODE,
    .name = "UnchangedTransposeRemovePass",
    .summary = "remove Transposes that move no axis of extent > 1",
    .create = tr_create,
    .destroy = tr_destroy,
    .run_node = unchanged_run,
    .on_start_graph = tr_start,
};

const kiln_pass_desc kiln_transpose_merge_pass = {
    .struct_size = sizeof(kiln_pass_desc),
    .kind = KILN_PASS_KIND_NODE,
    .name = "TransposeMergePass",
    .summary = "compose Transpose->Transpose into one (none when it is the identity)",
    .create = tr_create,
    .destroy = tr_destroy,
    .run_node = merge_run,
    .on_start_graph = tr_start,
};

/*
 * transop_symmetry.c - TransOpSymmetryEliminationPass (GE's
 * TransOpSymmetryEliminationPass), a node pass run by GEPass: a transform op
 * T1 followed by a transform op T2 that undoes it is eliminated: T2's
 * consumers read T1's input, T2 is removed, and T1 too when nothing else
 * reads it.
 *
 * Symmetric pairs (T1 -> T2, T2 reading T1's output 0 on its data input 0):
 *   Unsqueeze -> Squeeze, Squeeze -> Unsqueeze   the same axes (normalised
 *                                                against the larger rank),
 *                                                or static shapes back to
 *                                                T1's input;
 *   Reshape/Flatten -> Reshape/Flatten           static shapes back to T1's
 *                                                input (a reshape keeps the
 *                                                element order);
 *   Transpose -> Transpose                       perm1[perm2[i]] == i (GE's
 *                                                "back to raw" test);
 *   Cast -> Cast                                 back to T1's input dtype,
 *                                                through a dtype that holds
 *                                                it exactly (GE: no precision
 *                                                loss).
 * In every case T2's output dtype is T1's input dtype.  Axes and
 * permutations make the Squeeze/Unsqueeze and Transpose rules hold on
 * dynamic shapes too; the Reshape rule needs static shapes.  Never touches a
 * `_cannot_be_deleted` node (T1 or T2), never removes a node feeding a
 * NetOutput, never bypasses a reference output.
 * Counter: "symmetric pairs eliminated".  O(consumers x rank) per visit.
 */
#include "passes.h"
#include "simplify.h"

#include <string.h>

typedef struct ts_inst {
    simp_syms s;
} ts_inst;

static kiln_status ts_create(const kiln_options *opts, kiln_error *err, void **inst)
{
    (void)opts;
    ts_inst *p = kiln_alloc(sizeof(*p));
    if (!p)
        return kiln_errorf(err, KILN_ERR_NOMEM, "TransOpSymmetryEliminationPass: out of memory");
    memset(p, 0, sizeof(*p));
    *inst = p;
    return KILN_OK;
}

static void ts_destroy(void *inst) { kiln_free(inst); }

static void ts_start(void *inst, kiln_pass_ctx *ctx, kiln_graph *g)
{
    (void)ctx;
    simp_syms_init(&((ts_inst *)inst)->s, g);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Axes of a Squeeze/Unsqueeze, normalised against @p rank and sorted. */
static bool axes_of(kiln_graph *g, kiln_node_id n, const simp_syms *s, int32_t rank, int64_t *ax,
                    uint32_t *na)
{
    bool present;
    if (!simp_node_ints(g, n, "axes", 1, s, ax, SIMP_MAX_RANK, na, &present) || !present || !*na)
        return false;
    for (uint32_t i = 0; i < *na; i++) {
        if (ax[i] < 0) {
            if (rank < 0)
                return false;
            ax[i] += rank;
        }
        if (ax[i] < 0 || (rank >= 0 && ax[i] >= rank))
            return false;
    }
    /* insertion sort: at most SIMP_MAX_RANK entries */
    for (uint32_t i = 1; i < *na; i++)
        for (uint32_t j = i; j > 0 && cmp_i64(&ax[j - 1], &ax[j]) > 0; j--) {
            int64_t t = ax[j];
            ax[j] = ax[j - 1];
            ax[j - 1] = t;
        }
    return true;
}

static bool same_axes(kiln_graph *g, kiln_node_id t1, kiln_node_id t2, int32_t rank,
                      const simp_syms *s)
{
    int64_t a[SIMP_MAX_RANK], b[SIMP_MAX_RANK];
    uint32_t na, nb;
    return axes_of(g, t1, s, rank, a, &na) && axes_of(g, t2, s, rank, b, &nb) && na == nb &&
           memcmp(a, b, na * sizeof(int64_t)) == 0;
}

static bool get_perm(kiln_graph *g, kiln_node_id n, const simp_syms *s, int64_t *perm,
                     uint32_t *rank)
{
    bool present;
    if (!simp_node_ints(g, n, "perm", 1, s, perm, SIMP_MAX_RANK, rank, &present))
        return false;
    if (!present) {
        const kiln_tensor_desc *in = kiln_node_input_desc(g, n, 0);
        int32_t r = in ? kiln_desc_rank(in) : -1;
        if (r < 0 || r > SIMP_MAX_RANK)
            return false;
        *rank = (uint32_t)r;
        for (int32_t i = 0; i < r; i++)
            perm[i] = r - 1 - i;
    }
    return true;
}

static bool reshape_kind(kiln_sym op, const simp_syms *s)
{
    return op == s->reshape || op == s->flatten || op == s->squeeze || op == s->unsqueeze;
}

/* T2 undoes T1 (GE CheckCanBeEliminated + DescAreSymmetry). */
static bool symmetric(kiln_graph *g, kiln_node_id t1, kiln_node_id t2, const simp_syms *s)
{
    kiln_sym o1 = kiln_node_op(g, t1), o2 = kiln_node_op(g, t2);
    const kiln_tensor_desc *in = kiln_node_input_desc(g, t1, 0);
    const kiln_tensor_desc *out = kiln_node_output_desc(g, t2, 0);
    if (!in || kiln_desc_dtype(in) != kiln_desc_dtype(out))
        return false;
    if (o1 == s->cast || o2 == s->cast) {
        kiln_dtype mid = kiln_desc_dtype(kiln_node_output_desc(g, t1, 0));
        return o1 == s->cast && o2 == s->cast && simp_dtype_holds(mid, kiln_desc_dtype(in));
    }
    if (o1 == s->transpose || o2 == s->transpose) {
        int64_t p1[SIMP_MAX_RANK], p2[SIMP_MAX_RANK];
        uint32_t r1, r2;
        if (o1 != o2 || !get_perm(g, t1, s, p1, &r1) || !get_perm(g, t2, s, p2, &r2) || r1 != r2)
            return false;
        for (uint32_t i = 0; i < r2; i++)
            if (p2[i] < 0 || p2[i] >= (int64_t)r1 || p1[p2[i]] != (int64_t)i)
                return false;
        return true;
    }
    if (!reshape_kind(o1, s) || !reshape_kind(o2, s))
        return false;
    if (simp_same_static(in, out))
        return true;
    if (o1 == s->unsqueeze && o2 == s->squeeze) {
        const kiln_tensor_desc *mid = kiln_node_output_desc(g, t1, 0);
        return same_axes(g, t1, t2, kiln_desc_rank(mid), s);
    }
    if (o1 == s->squeeze && o2 == s->unsqueeze)
        return same_axes(g, t1, t2, kiln_desc_rank(in), s);
    return false;
}

static bool transop(const kiln_graph *g, kiln_node_id n, const simp_syms *s)
{
    kiln_sym op = kiln_node_op(g, n);
    return op && (op == s->cast || op == s->transpose || reshape_kind(op, s));
}

static kiln_status run(void *inst, kiln_pass_ctx *ctx, kiln_graph *g, kiln_node_id n)
{
    const simp_syms *s = &((const ts_inst *)inst)->s;
    if (!transop(g, n, s) || kiln_node_output_count(g, n) != 1 || kiln_node_input_count(g, n) < 1 ||
        simp_pinned(g, n))
        return KILN_OK;
    kiln_anchor x = kiln_node_input_peer(g, n, 0);
    if (!x.node || simp_is_ref_output(g, x))
        return KILN_OK;
    for (uint32_t u = kiln_use_first(g, n, 0), next; u; u = next) {
        next = kiln_use_next(g, u);
        kiln_anchor d = kiln_use_dst(g, u);
        if (d.index != 0 || !transop(g, d.node, s) || kiln_node_output_count(g, d.node) != 1 ||
            simp_pinned(g, d.node) || simp_feeds_netoutput(g, d.node, 0, s) ||
            !symmetric(g, n, d.node, s))
            continue;
        kiln_node_id t2 = d.node;
        kiln_node_id aux =
            kiln_node_input_count(g, t2) > 1 ? kiln_node_input_peer(g, t2, 1).node : 0;
        kiln_pass_explain(ctx, g, t2, "removed: undoes %s %s", kiln_node_op_str(g, n),
                          kiln_node_name_str(g, n));
        kiln_status st = kiln_edge_remove(g, t2, 0);
        if (st == KILN_OK)
            st = kiln_edge_add(g, x.node, x.index, t2, 0);
        static const int32_t io_map[] = {0};
        if (st == KILN_OK)
            st = kiln_pass_isolate_and_delete(ctx, g, t2, io_map, 1, false);
        if (st != KILN_OK)
            return kiln_errorf(kiln_pass_error(ctx), st, "cannot eliminate %s after %s",
                               kiln_node_name_str(g, t2), kiln_node_name_str(g, n));
        kiln_pass_stat_add(ctx, "symmetric pairs eliminated", 1);
        simp_remove_if_dead(ctx, g, aux, s);
        /* the edge list of n changed under the cursor: restart from the top */
        next = kiln_node_is_live(g, n) ? kiln_use_first(g, n, 0) : 0;
    }
    if (kiln_node_is_live(g, n) && !kiln_node_output_use_count(g, n, 0) &&
        !kiln_node_ctrl_out_count(g, n)) {
        kiln_pass_explain(ctx, g, n, "removed: its symmetric consumers were eliminated");
        simp_remove_if_dead(ctx, g, n, s);
    }
    return KILN_OK;
}

const kiln_pass_desc kiln_transop_symmetry_elimination_pass = {
    .struct_size = sizeof(kiln_pass_desc),
    .kind = KILN_PASS_KIND_NODE,
    .name = "TransOpSymmetryEliminationPass",
    .summary = "eliminate transform-op pairs that undo each other (Unsqueeze/Squeeze, ...)",
    .create = ts_create,
    .destroy = ts_destroy,
    .run_node = run,
    .on_start_graph = ts_start,
};

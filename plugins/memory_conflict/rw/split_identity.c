/*
 * split_identity.c - Identity handling of GE's mem_rw_conflict_optimize
 * (GE_SEMANTICS 2.6, 2.7):
 *
 *   rw_identity_before / rw_identity_after
 *       GE CreateIdentityOpDesc + GraphUtils::InsertNodeBefore/After: a node
 *       `<producer>_Identity<N>` of type Identity (N: one counter per run,
 *       GE's process-wide counter; names already taken are skipped), whose
 *       input and output descriptors are the producer's output descriptor
 *       rebuilt "through the public TensorDesc": attributes dropped (e.g.
 *       `ref_var_src_var_name`), no ref_input, `reuse_input`=false and
 *       `reuse_input_index`=0; `_batch_label` copied from the producer; marked
 *       `_cannot_be_deleted` as GRAPH_FORMAT.md requires (GE's code does not,
 *       GE_SEMANTICS 11.2).
 *   rw_split_identity       GE SplitIdentity.
 *   rw_remove_no_use_identity  GE RemoveNoUseIdentity (+ IsIdentityUsefulForRWControl).
 *
 * Requires: an rw_ctx whose subgraphs are marked (rw_types.c).
 * Preserves: nothing (inserts and removes nodes, moves data and control edges).
 * Complexity: O(degree) per Identity, plus the RW-type queries.
 */
#include "rw_conflict.h"
#include <stdio.h>
#include <string.h>

/* Clean copy of output (@p src, @p so) into @p d (GE GetCleanTensorDesc). */
static kiln_status clean_desc(kiln_graph *g, kiln_tensor_desc *d, kiln_graph *sg, kiln_node_id src,
                              uint32_t so)
{
    kiln_status st = kiln_desc_copy(g, d, kiln_node_output_desc(sg, src, so));
    if (st != KILN_OK)
        return st;
    kiln_desc_set_ref_input(g, d, -1);
    kiln_attrs *a = kiln_desc_attrs_mut(g, d);
    if (!a)
        return KILN_ERR_NOMEM;
    kiln_attrs_clear(a);
    st = kiln_attrs_set_bool(a, "reuse_input", false);
    if (st == KILN_OK)
        st = kiln_attrs_set_int(a, "reuse_input_index", 0);
    return st;
}

/* Fill the new Identity @p id of graph @p g like GE's CreateIdentityOpDesc. */
static kiln_status finish_identity(kiln_graph *g, kiln_node_id id, kiln_node_id src, uint32_t so)
{
    kiln_status st = clean_desc(g, kiln_node_output_desc(g, id, 0), g, src, so);
    if (st == KILN_OK)
        st = clean_desc(g, kiln_node_input_desc_mut(g, id, 0), g, src, so);
    const char *label;
    if (st == KILN_OK && kiln_attrs_get_string(kiln_node_attrs(g, src), "_batch_label", &label) &&
        label[0])
        st = kiln_attrs_set_string(kiln_node_attrs_mut(g, id), "_batch_label", label);
    /* The isolation copy must survive Identity removal: GRAPH_FORMAT.md's
     * const_to_assign contract (and the seed, 3.2.3) mark it; see
     * docs/memory_rw_conflict.md for why kiln departs from GE's code here. */
    if (st == KILN_OK)
        st = kiln_attrs_set_bool(kiln_node_attrs_mut(g, id), "_cannot_be_deleted", true);
    return st;
}

/* Next free name <src>_Identity<N>; caller frees with kiln_free. */
static char *identity_name(rw_ctx *c, kiln_graph *g, kiln_node_id src)
{
    const char *base = kiln_node_name_str(g, src);
    size_t cap = strlen(base) + 32;
    char *name = kiln_alloc(cap);
    if (!name)
        return NULL;
    do
        snprintf(name, cap, "%s_Identity%u", base, c->seq++);
    while (kiln_graph_find_node(g, name));
    return name;
}

kiln_node_id rw_identity_before(rw_ctx *c, kiln_graph *g, kiln_node_id dst, uint32_t di,
                                kiln_node_id desc_src, uint32_t desc_out)
{
    char *name = identity_name(c, g, desc_src);
    if (!name)
        return 0;
    kiln_node_id id = kiln_graph_insert_before(g, dst, di, name, "Identity");
    kiln_free(name);
    if (!id || finish_identity(g, id, desc_src, desc_out) != KILN_OK)
        return 0;
    c->inserted++;
    c->changed = true;
    return id;
}

kiln_node_id rw_identity_after(rw_ctx *c, kiln_graph *g, kiln_node_id src, uint32_t so,
                               kiln_node_id dst, uint32_t di)
{
    char *name = identity_name(c, g, src);
    if (!name)
        return 0;
    kiln_anchor only = {dst, di};
    kiln_node_id id = kiln_graph_insert_after(g, src, so, &only, 1, name, "Identity");
    kiln_free(name);
    if (!id || finish_identity(g, id, src, so) != KILN_OK)
        return 0;
    c->inserted++;
    c->changed = true;
    return id;
}

static uint32_t data_in_count(const kiln_graph *g, kiln_node_id n)
{
    uint32_t k = 0;
    for (uint32_t i = 0; i < kiln_node_input_count(g, n); i++)
        k += kiln_node_input_peer(g, n, i).node != 0;
    return k;
}

static kiln_status remove_isolated(rw_ctx *c, kiln_graph *g, kiln_node_id n, const int32_t *io_map,
                                   uint32_t nmap)
{
    kiln_status st = kiln_graph_isolate_node(g, n, io_map, nmap);
    if (st == KILN_OK)
        st = kiln_graph_remove_node(g, n);
    if (st != KILN_OK)
        return kiln_errorf(kiln_pass_error(c->pc), st, "cannot isolate and remove %s",
                           kiln_node_name_str(g, n));
    c->removed++;
    c->changed = true;
    return KILN_OK;
}

kiln_status rw_split_identity(rw_ctx *c, kiln_graph *g, kiln_node_id n)
{
    if (kiln_node_output_count(g, n) < 1 || kiln_node_output_use_count(g, n, 0) <= 1)
        return KILN_OK;
    kiln_anchor pre =
        kiln_node_input_count(g, n) ? kiln_node_input_peer(g, n, 0) : (kiln_anchor){0, 0};
    if (!pre.node)
        return kiln_errorf(kiln_pass_error(c->pc), KILN_ERR_INVALID,
                           "SplitIdentity: %s has consumers but no producer",
                           kiln_node_name_str(g, n));
    uint32_t cnt = kiln_node_output_use_count(g, n, 0), k = 0;
    kiln_anchor *uses = kiln_alloc((size_t)cnt * sizeof(*uses));
    if (!uses)
        return kiln_errorf(kiln_pass_error(c->pc), KILN_ERR_NOMEM, "out of memory");
    for (uint32_t u = kiln_use_first(g, n, 0); u && k < cnt; u = kiln_use_next(g, u))
        uses[k++] = kiln_use_dst(g, u);
    kiln_status st = KILN_OK;
    for (uint32_t j = 0; j < cnt && st == KILN_OK; j++) {
        kiln_anchor dst = uses[j];
        rw_in t = rw_input_type(c, g, dst.node, dst.index, false);
        if (t == RW_IN_SCOPE_WRITEABLE || t == RW_IN_WRITEABLE) {
            /* The writer keeps a private copy: a fresh Identity between n and it. */
            kiln_node_id id = rw_identity_before(c, g, dst.node, dst.index, pre.node, pre.index);
            if (!id) {
                st = kiln_errorf(kiln_pass_error(c->pc), KILN_ERR_NOMEM,
                                 "SplitIdentity: cannot insert an Identity before %s:%u",
                                 kiln_node_name_str(g, dst.node), dst.index);
                break;
            }
            kiln_pass_explain(c->pc, g, id,
                              "SplitIdentity: %s (%s) feeds %u consumers; %s:%u (%s) is %s -> "
                              "its own Identity before %s:%u",
                              kiln_node_name_str(g, n), kiln_node_op_str(g, n), cnt,
                              kiln_node_name_str(g, dst.node), dst.index,
                              kiln_node_op_str(g, dst.node), rw_in_name(t),
                              kiln_node_name_str(g, dst.node), dst.index);
            continue;
        }
        /* A reader: feed it from the Identity's producer, keeping the ordering. */
        kiln_edge_remove(g, dst.node, dst.index);
        for (uint32_t e = kiln_ctrl_in_first(g, n); e; e = kiln_ctrl_in_next(g, e))
            if (kiln_ctrl_src(g, e) != dst.node)
                kiln_ctrl_add(g, kiln_ctrl_src(g, e), dst.node);
        for (uint32_t e = kiln_ctrl_out_first(g, n); e; e = kiln_ctrl_out_next(g, e))
            if (kiln_ctrl_dst(g, e) != pre.node)
                kiln_ctrl_add(g, pre.node, kiln_ctrl_dst(g, e));
        st = kiln_edge_add(g, pre.node, pre.index, dst.node, dst.index);
        if (st != KILN_OK)
            st =
                kiln_errorf(kiln_pass_error(c->pc), st, "SplitIdentity: cannot link %s:%u to %s:%u",
                            kiln_node_name_str(g, pre.node), pre.index,
                            kiln_node_name_str(g, dst.node), dst.index);
        c->changed = true;
    }
    kiln_free(uses);
    if (st == KILN_OK && rw_data_out_count(g, n) == 0) {
        kiln_pass_explain(c->pc, g, n,
                          "SplitIdentity: every consumer of %s only reads (re-fed from %s:%u) "
                          "-> Identity removed",
                          kiln_node_name_str(g, n), kiln_node_name_str(g, pre.node), pre.index);
        st = remove_isolated(c, g, n, NULL, 0);
    }
    return st;
}

/* GE CheckIdentityIsNearSubgraph. */
static bool near_subgraph(const kiln_graph *g, kiln_node_id n)
{
    for (uint32_t i = 0; i < kiln_node_input_count(g, n); i++) {
        kiln_node_id p = kiln_node_input_peer(g, n, i).node;
        if (p && (rw_is_subgraph_data(g, p) || rw_has_subgraphs(g, p)))
            return true;
    }
    for (uint32_t o = 0; o < kiln_node_output_count(g, n); o++)
        for (uint32_t u = kiln_use_first(g, n, o); u; u = kiln_use_next(g, u)) {
            kiln_node_id d = kiln_use_dst(g, u).node;
            if (rw_is_subgraph_netoutput(g, d) || rw_has_subgraphs(g, d))
                return true;
        }
    return false;
}

/* GE NodeUtils::IsIdentityUsefulForRWControl: the Identity orders "read the
 * variable" before an Assign-like control successor that writes it. */
static bool useful_for_rw_control(kiln_graph *g, kiln_node_id n)
{
    if ((!mc_op_is(g, n, "Identity") && !mc_op_is(g, n, "ReadVariableOp")) ||
        kiln_node_ctrl_out_count(g, n) == 0 || data_in_count(g, n) != 1 ||
        rw_data_out_count(g, n) == 0 || kiln_node_input_count(g, n) < 1)
        return false;
    kiln_anchor pre = kiln_node_input_peer(g, n, 0);
    if (!pre.node)
        return false;
    for (uint32_t e = kiln_ctrl_out_first(g, n); e; e = kiln_ctrl_out_next(g, e)) {
        kiln_node_id w = kiln_ctrl_dst(g, e);
        for (uint32_t i = 0; i < kiln_node_input_count(g, w); i++) {
            kiln_anchor p = kiln_node_input_peer(g, w, i);
            if (p.node == pre.node && p.index == pre.index && mc_is_var_like(g, pre.node) &&
                mc_is_assign_like(g, w))
                return true;
        }
    }
    return false;
}

kiln_status rw_remove_no_use_identity(rw_ctx *c, kiln_graph *g, kiln_node_id n)
{
    if (data_in_count(g, n) == 0 || rw_data_out_count(g, n) > 1)
        return KILN_OK;
    kiln_anchor dst = {0, 0};
    if (kiln_node_output_count(g, n) > 0 && kiln_use_first(g, n, 0))
        dst = kiln_use_dst(g, kiln_use_first(g, n, 0));
    if (rw_data_out_count(g, n) == 1) {
        for (uint32_t o = 0; o < kiln_node_output_count(g, n); o++)
            if (kiln_use_first(g, n, o) &&
                mc_op_is(g, kiln_use_dst(g, kiln_use_first(g, n, o)).node, "StreamMerge"))
                return KILN_OK;
    }
    if (near_subgraph(g, n) || useful_for_rw_control(g, n))
        return KILN_OK;
    kiln_anchor pre =
        kiln_node_input_count(g, n) ? kiln_node_input_peer(g, n, 0) : (kiln_anchor){0, 0};
    if (!pre.node)
        return kiln_errorf(kiln_pass_error(c->pc), KILN_ERR_INVALID,
                           "RemoveNoUseIdentity: input 0 of %s is not connected",
                           kiln_node_name_str(g, n));
    rw_out ot = rw_output_type(c, g, pre.node, pre.index);
    rw_in it = RW_IN_READ_ONLY;
    rw_result r = RW_DO_NOTHING; /* no consumer: removable */
    if (dst.node) {
        it = rw_input_type(c, g, dst.node, dst.index, false);
        r = rw_matrix(ot, it);
    }
    if (r != RW_DO_NOTHING)
        return KILN_OK;
    if (dst.node)
        kiln_pass_explain(c->pc, g, n,
                          "RemoveNoUseIdentity: %s:%u (%s) -> %s:%u (%s) needs no copy "
                          "(matrix: nothing) -> Identity removed",
                          kiln_node_name_str(g, pre.node), pre.index, rw_out_name(ot),
                          kiln_node_name_str(g, dst.node), dst.index, rw_in_name(it));
    else
        kiln_pass_explain(c->pc, g, n, "RemoveNoUseIdentity: no consumer -> Identity removed");
    static const int32_t io_map[] = {0};
    return remove_isolated(c, g, n, io_map, kiln_node_output_count(g, n) ? 1 : 0);
}

/*
 * mlc_util.c - graph predicates of the memory-layout-conflict handling
 * (GE MemLayoutConflictUtil / OpTypeUtils), shared by the pass and the
 * checkers; declarations and conventions in mlc_util.h.  Stateless.
 */
#include "mlc_util.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool mlc_is_const(const kiln_graph *g, kiln_node_id n)
{
    static const char *const ops[] = {"Const", "Constant", "FileConstant", "ConstPlaceHolder",
                                      NULL};
    return mc_op_in(g, n, ops);
}

bool mlc_is_memcpy_like(const kiln_graph *g, kiln_node_id n)
{
    static const char *const ops[] = {"Identity", "MemcpyAsync", "MemcpyAddrAsync", NULL};
    return mc_op_in(g, n, ops);
}

bool mlc_is_netoutput(const kiln_graph *g, kiln_node_id n) { return mc_op_is(g, n, "NetOutput"); }

bool mlc_is_continuous_input(const kiln_graph *g, kiln_node_id n)
{
    return mc_node_bool(g, n, "continuous_input") && kiln_node_input_count(g, n) > 1;
}

bool mlc_is_continuous_output(const kiln_graph *g, kiln_node_id n)
{
    return mc_node_bool(g, n, "continuous_output") && kiln_node_output_count(g, n) > 1;
}

bool mlc_is_nopad_input(const kiln_graph *g, kiln_node_id n)
{
    return mc_node_bool(g, n, "_no_padding_continuous_input") && kiln_node_input_count(g, n) > 1;
}

bool mlc_is_nopad_output(const kiln_graph *g, kiln_node_id n)
{
    return mc_node_bool(g, n, "_no_padding_continuous_output") && kiln_node_output_count(g, n) > 1;
}

int64_t mlc_mem_type(const kiln_graph *g, kiln_node_id n, uint32_t index, bool is_output)
{
    const int64_t *v = NULL;
    uint32_t cnt = 0;
    const char *key = is_output ? "_output_memory_type" : "_input_memory_type";
    if (kiln_attrs_get_list_int(kiln_node_attrs(g, n), key, &v, &cnt) && index < cnt)
        return v[index];
    return MLC_MEM_DEFAULT;
}

bool mlc_mem_type_special(int64_t mt) { return mt == MLC_MEM_P2P_DDR || mt == MLC_MEM_TS; }

bool mlc_phys_refreshable(const kiln_graph *g, kiln_node_id n)
{
    return !mc_op_is(g, n, "StreamSwitch") && !mc_op_is(g, n, "LabelSwitchByIndex");
}

bool mlc_addr_refreshable(const kiln_graph *g, kiln_node_id n, bool fm_refreshable)
{
    if (!mlc_phys_refreshable(g, n))
        return false;
    bool hcom_no_refresh =
        mc_op_is(g, n, "HcomBroadcast") || mc_node_bool(g, n, "_unsupported_address_refresh");
    return !(hcom_no_refresh && !fm_refreshable);
}

int32_t mlc_ref_input(kiln_graph *g, kiln_node_id n, uint32_t o)
{
    static const char *const passthrough[] = {"NetOutput", "While", "_While", "StatelessWhile",
                                              NULL};
    if (o >= kiln_node_output_count(g, n))
        return -1;
    if (mc_op_in(g, n, passthrough))
        return (int32_t)o;
    if (mc_op_is(g, n, "Data") && kiln_graph_parent(g))
        return (int32_t)o;
    if ((mc_op_is(g, n, "Merge") || mc_op_is(g, n, "Reshape")) && o == 0)
        return 0;
    const kiln_tensor_desc *d = kiln_node_output_desc(g, n, o);
    if (kiln_desc_ref_input(d) >= 0)
        return kiln_desc_ref_input(d);
    bool reuse = false;
    int64_t k;
    const kiln_attrs *a = kiln_desc_attrs(d);
    if (kiln_attrs_get_bool(a, "reuse_input", &reuse) && reuse &&
        kiln_attrs_get_int(a, "reuse_input_index", &k) && k >= 0 && k < INT32_MAX)
        return (int32_t)k;
    if (mc_node_bool(g, n, "_no_padding_continuous_output"))
        return 0;
    return -1;
}

kiln_anchor mlc_real_out(kiln_graph *g, kiln_node_id n, uint32_t o)
{
    kiln_anchor cur = {n, o};
    uint32_t guard = kiln_graph_node_count(g) + 1;
    while (guard--) {
        int32_t ri = mlc_ref_input(g, cur.node, cur.index);
        if (ri < 0 || (uint32_t)ri >= kiln_node_input_count(g, cur.node))
            break;
        kiln_anchor p = kiln_node_input_peer(g, cur.node, (uint32_t)ri);
        if (!p.node)
            break;
        cur = p;
    }
    return cur;
}

bool mlc_anchor_eq(const kiln_mem_anchor *x, const kiln_mem_anchor *y)
{
    return x->graph == y->graph && x->node == y->node && x->index == y->index &&
           x->is_output == y->is_output;
}

bool mlc_kanchor_eq(kiln_anchor x, kiln_anchor y) { return x.node == y.node && x.index == y.index; }

int mlc_anchor_key(const kiln_mem_anchor *a, char *buf, size_t size)
{
    return snprintf(buf, size, "%s_%s_%u", kiln_node_name_str(a->graph, a->node),
                    a->is_output ? "out" : "in", a->index);
}

uint32_t mlc_topo(const kiln_mem_anchor *a) { return kiln_graph_topo_index(a->graph, a->node); }

const kiln_mem_anchor *mlc_side(const kiln_checker_query *q, kiln_anchor_attr t)
{
    if (q->type_a == t)
        return &q->a;
    if (q->type_b == t)
        return &q->b;
    return NULL;
}

const kiln_mem_anchor *mlc_other(const kiln_checker_query *q, const kiln_mem_anchor *s)
{
    return s == &q->a ? &q->b : &q->a;
}

bool mlc_node_out_in_symbol(const kiln_mem_anchor *sym, uint32_t count, const kiln_graph *g,
                            kiln_node_id n)
{
    for (uint32_t i = 0; i < count; i++)
        if (sym[i].is_output && sym[i].graph == g && sym[i].node == n)
            return true;
    return false;
}

bool mlc_phys_problem(const kiln_checker_query *q)
{
    if (!(q->graph_info & KILN_GI_PHYSICAL_MEMORY_REFRESHABLE))
        return false;
    return !mlc_phys_refreshable(q->a.graph, q->a.node) ||
           !mlc_phys_refreshable(q->b.graph, q->b.node);
}

bool mlc_fm_refreshable(const kiln_checker_query *q)
{
    return (q->graph_info & KILN_GI_FEATURE_MAP_REFRESHABLE) != 0;
}

kiln_status mlc_isolate(kiln_checker_result *r, const kiln_mem_anchor *a, const char *rule)
{
    char key[192];
    mlc_anchor_key(a, key, sizeof(key));
    kiln_checker_reason(r, "%s: isolate %s", rule, key);
    return kiln_checker_isolate(r, a);
}

bool mlc_assign_rule(const kiln_checker_query *q, kiln_checker_result *r, kiln_anchor_attr var_type,
                     kiln_status *st)
{
    const kiln_mem_anchor *ref = q->type_b == var_type ? &q->a : &q->b;
    bool done = false;
    *st = KILN_OK;
    for (uint32_t i = 0; i < q->symbol_count && *st == KILN_OK; i++) {
        const kiln_mem_anchor *s = &q->symbol[i];
        if (s->is_output || s->graph != ref->graph || s->node != ref->node)
            continue;
        kiln_anchor p = kiln_node_input_peer(s->graph, s->node, s->index);
        if (p.node && mc_is_assign_like(s->graph, p.node)) {
            *st = mlc_isolate(r, s, "var -> Assign -> ref node: insert after the Assign");
            done = true;
        }
    }
    return done;
}

static uint32_t peers(kiln_graph *g, kiln_node_id n, kiln_anchor *out, uint32_t cap, bool real)
{
    uint32_t k = 0, nin = kiln_node_input_count(g, n);
    for (uint32_t i = 0; i < nin; i++) {
        kiln_anchor p = kiln_node_input_peer(g, n, i);
        if (!p.node)
            continue;
        if (k < cap)
            out[k] = real ? mlc_real_out(g, p.node, p.index) : p;
        k++;
    }
    return k;
}

uint32_t mlc_real_in_peers(kiln_graph *g, kiln_node_id n, kiln_anchor *out, uint32_t cap)
{
    return peers(g, n, out, cap, true);
}

uint32_t mlc_in_peers(kiln_graph *g, kiln_node_id n, kiln_anchor *out, uint32_t cap)
{
    return peers(g, n, out, cap, false);
}

bool mlc_all_real_inputs_same(kiln_graph *g, kiln_node_id n)
{
    uint32_t cnt = mlc_real_in_peers(g, n, NULL, 0);
    if (cnt == 0)
        return false;
    kiln_anchor *v = malloc(cnt * sizeof(*v));
    if (!v)
        return false;
    mlc_real_in_peers(g, n, v, cnt);
    bool same = true;
    for (uint32_t i = 1; i < cnt && same; i++)
        same = mlc_kanchor_eq(v[0], v[i]);
    free(v);
    return same;
}

bool mlc_nopad_inputs_one_anchor(const kiln_checker_query *q, kiln_checker_result *r,
                                 const char *checker)
{
    const kiln_mem_anchor *c = mlc_side(q, MLC_AA(NOPADDING_CONTINUOUS_INPUT));
    if (!mlc_all_real_inputs_same(c->graph, c->node))
        return false;
    kiln_checker_reason(r, "%s: all real inputs are one anchor, no conflict", checker);
    return true;
}

/*
 * anchor_attrs.c - AnchorAttribute marking (GE MarkInTypes / MarkOutTypes,
 * GE_SEMANTICS.md 3.4).  An anchor carries a list of attributes, in the order
 * GE appends them; an anchor with none is NORMAL_INPUT / NORMAL_OUTPUT.
 *
 * In-anchors (node-level attributes first, then per anchor):
 *   USER_MEMORY_OUTPUT          NetOutput of the graph being processed
 *   UNSUPPORTED_..._INPUT       node not address-refreshable (mlc_addr_refreshable)
 *   NOPADDING_CONTINUOUS_INPUT  _no_padding_continuous_input and > 1 inputs
 *   CONTINUOUS_INPUT            continuous_input and > 1 inputs
 *   RTS_SPECIAL_TYPE_INPUT      _input_memory_type[i] is special (P2P DDR, TS)
 * Out-anchors:
 *   USER_MEMORY_INPUT           Data-like node of the graph being processed
 *   IMMUTABLE_ADDRESS_OUTPUT    constant or variable
 *   UNSUPPORTED_..._OUTPUT      node not address-refreshable
 *   NOPADDING_CONTINUOUS_OUTPUT / CONTINUOUS_OUTPUT  attribute and > 1 outputs
 *   REFERENCE_OUTPUT            (not for user inputs) ref_var_src_var_name
 *                               naming a var whose out 0 is in the same symbol
 *                               (remembered for IsSkip), or ref from input
 *   RTS_SPECIAL_TYPE_OUTPUT     _output_memory_type[o] is special
 *
 * Whether a node is address-refreshable depends on the feature map of its
 * own graph (GE IsGraphFeatureMapRefreshable(node's graph)).
 */
#include "mlc_pass.h"
#include <stdio.h>
#include <string.h>

static void push(mlc_attrs *a, kiln_anchor_attr t)
{
    if (a->n < MLC_MAX_ATTRS)
        a->t[a->n++] = (uint8_t)t;
}

void mlc_keys_init(mlc_run *run, const kiln_graph *g)
{
    static const char *const pass[4] = {"NetOutput", "While", "_While", "StatelessWhile"};
    mlc_keys *k = &run->keys;
    k->cont_in = kiln_sym_lookup(g, "continuous_input");
    k->cont_out = kiln_sym_lookup(g, "continuous_output");
    k->nopad_in = kiln_sym_lookup(g, "_no_padding_continuous_input");
    k->nopad_out = kiln_sym_lookup(g, "_no_padding_continuous_output");
    k->in_mt = kiln_sym_lookup(g, "_input_memory_type");
    k->out_mt = kiln_sym_lookup(g, "_output_memory_type");
    k->unsup_refresh = kiln_sym_lookup(g, "_unsupported_address_refresh");
    k->ref_var = kiln_sym_lookup(g, "ref_var_src_var_name");
    k->reuse_input = kiln_sym_lookup(g, "reuse_input");
    k->stream_switch = kiln_sym_lookup(g, "StreamSwitch");
    k->label_switch = kiln_sym_lookup(g, "LabelSwitchByIndex");
    k->hcom_broadcast = kiln_sym_lookup(g, "HcomBroadcast");
    k->merge = kiln_sym_lookup(g, "Merge");
    k->reshape = kiln_sym_lookup(g, "Reshape");
    k->data = kiln_sym_lookup(g, "Data");
    for (int i = 0; i < 4; i++)
        k->passthrough[i] = kiln_sym_lookup(g, pass[i]);
    k->ok = true;
}

/* The predicates of ../checkers/mlc_util.c, by the run's symbols: the same
 * answers, without a string compare per op test or a lookup of a key no node
 * has. */
static bool op_is(const kiln_graph *g, kiln_node_id n, kiln_sym op)
{
    return op && kiln_node_op(g, n) == op;
}

static bool refreshable(const mlc_run *run, kiln_graph *g, kiln_node_id n)
{
    bool fm = mlc_graph_fm_refreshable(run, g);
    const mlc_keys *k = &run->keys;
    if (!k->ok)
        return mlc_addr_refreshable(g, n, fm);
    /* mlc_addr_refreshable */
    if (op_is(g, n, k->stream_switch) || op_is(g, n, k->label_switch))
        return false;
    bool hcom_no_refresh = op_is(g, n, k->hcom_broadcast) ||
                           (k->unsup_refresh && mc_node_bool(g, n, "_unsupported_address_refresh"));
    return !(hcom_no_refresh && !fm);
}

static bool nopad_input(const mlc_run *run, const kiln_graph *g, kiln_node_id n)
{
    return (!run->keys.ok || run->keys.nopad_in) && mlc_is_nopad_input(g, n);
}
static bool continuous_input(const mlc_run *run, const kiln_graph *g, kiln_node_id n)
{
    return (!run->keys.ok || run->keys.cont_in) && mlc_is_continuous_input(g, n);
}
static bool nopad_output(const mlc_run *run, const kiln_graph *g, kiln_node_id n)
{
    return (!run->keys.ok || run->keys.nopad_out) && mlc_is_nopad_output(g, n);
}
static bool continuous_output(const mlc_run *run, const kiln_graph *g, kiln_node_id n)
{
    return (!run->keys.ok || run->keys.cont_out) && mlc_is_continuous_output(g, n);
}
static int64_t mem_type(const mlc_run *run, const kiln_graph *g, kiln_node_id n, uint32_t i,
                        bool is_output)
{
    if (run->keys.ok && !(is_output ? run->keys.out_mt : run->keys.in_mt))
        return MLC_MEM_DEFAULT;
    return mlc_mem_type(g, n, i, is_output);
}

/* mlc_ref_input by the run's symbols. */
static int32_t ref_input(const mlc_run *run, kiln_graph *g, kiln_node_id n, uint32_t o)
{
    const mlc_keys *k = &run->keys;
    if (!k->ok)
        return mlc_ref_input(g, n, o);
    if (o >= kiln_node_output_count(g, n))
        return -1;
    kiln_sym op = kiln_node_op(g, n);
    for (int i = 0; i < 4; i++)
        if (k->passthrough[i] && op == k->passthrough[i])
            return (int32_t)o;
    if (k->data && op == k->data && kiln_graph_parent(g))
        return (int32_t)o;
    if (((k->merge && op == k->merge) || (k->reshape && op == k->reshape)) && o == 0)
        return 0;
    const kiln_tensor_desc *d = kiln_node_output_desc(g, n, o);
    if (kiln_desc_ref_input(d) >= 0)
        return kiln_desc_ref_input(d);
    bool reuse = false;
    int64_t ri;
    if (k->reuse_input) {
        const kiln_attrs *a = kiln_desc_attrs(d);
        if (kiln_attrs_get_bool(a, "reuse_input", &reuse) && reuse &&
            kiln_attrs_get_int(a, "reuse_input_index", &ri) && ri >= 0 && ri < INT32_MAX)
            return (int32_t)ri;
    }
    if (k->nopad_out && mc_node_bool(g, n, "_no_padding_continuous_output"))
        return 0;
    return -1;
}

void mlc_mark_input(const mlc_run *run, kiln_graph *g, kiln_node_id n, uint32_t i, mlc_attrs *out)
{
    memset(out, 0, sizeof(*out));
    if (g == run->target && mc_opsyms_netoutput(&run->ops, g, n))
        push(out, MLC_AA(USER_MEMORY_OUTPUT));
    if (!refreshable(run, g, n))
        push(out, MLC_AA(UNSUPPORTED_ADDRESS_REFRESH_OPERATOR_INPUT));
    if (nopad_input(run, g, n))
        push(out, MLC_AA(NOPADDING_CONTINUOUS_INPUT));
    if (continuous_input(run, g, n))
        push(out, MLC_AA(CONTINUOUS_INPUT));
    if (mlc_mem_type_special(mem_type(run, g, n, i, false)))
        push(out, MLC_AA(RTS_SPECIAL_TYPE_INPUT));
    if (out->n == 0)
        push(out, MLC_AA(NORMAL_INPUT));
}

/* GE IsRefFromVar: the var node named by ref_var_src_var_name when its out 0
 * is in the same symbol as (g, n, o). */
static kiln_node_id ref_from_var(const mlc_run *run, const kiln_symtab *st, uint32_t sym,
                                 kiln_graph *g, kiln_node_id n, uint32_t o, kiln_graph **vg)
{
    const char *var;
    if (run->keys.ok && !run->keys.ref_var)
        return 0;
    const kiln_tensor_desc *d = kiln_node_output_desc(g, n, o);
    if (!kiln_attrs_get_string(kiln_desc_attrs(d), "ref_var_src_var_name", &var))
        return 0;
    kiln_graph *where = g;
    kiln_node_id v = kiln_graph_find_node(g, var);
    if (!v) {
        where = kiln_graph_root(g);
        v = kiln_graph_find_node(where, var);
    }
    if (!v || kiln_node_output_count(where, v) == 0)
        return 0;
    if (kiln_symtab_symbol(st, where, v, 0, true) != sym)
        return 0;
    *vg = where;
    return v;
}

void mlc_mark_output(const mlc_run *run, const kiln_symtab *st, uint32_t sym, kiln_graph *g,
                     kiln_node_id n, uint32_t o, mlc_attrs *out)
{
    memset(out, 0, sizeof(*out));
    bool user_input = g == run->target && mc_opsyms_data_like(&run->ops, g, n);
    if (user_input)
        push(out, MLC_AA(USER_MEMORY_INPUT));
    if (mc_opsyms_const(&run->ops, g, n) || mc_opsyms_variable(&run->ops, g, n))
        push(out, MLC_AA(IMMUTABLE_ADDRESS_OUTPUT));
    if (!refreshable(run, g, n))
        push(out, MLC_AA(UNSUPPORTED_ADDRESS_REFRESH_OPERATOR_OUTPUT));
    if (nopad_output(run, g, n))
        push(out, MLC_AA(NOPADDING_CONTINUOUS_OUTPUT));
    if (continuous_output(run, g, n))
        push(out, MLC_AA(CONTINUOUS_OUTPUT));
    if (!user_input) {
        kiln_graph *vg = NULL;
        kiln_node_id v = ref_from_var(run, st, sym, g, n, o, &vg);
        if (v) {
            push(out, MLC_AA(REFERENCE_OUTPUT));
            out->ref_graph = vg;
            out->ref_node = v;
        } else if (ref_input(run, g, n, o) >= 0) {
            push(out, MLC_AA(REFERENCE_OUTPUT));
        }
    }
    if (mlc_mem_type_special(mem_type(run, g, n, o, true)))
        push(out, MLC_AA(RTS_SPECIAL_TYPE_OUTPUT));
    if (out->n == 0)
        push(out, MLC_AA(NORMAL_OUTPUT));
}

void mlc_attrs_str(const mlc_attrs *a, char *buf, size_t size)
{
    size_t k = 0;
    if (size)
        buf[0] = 0;
    for (uint8_t i = 0; i < a->n && k < size; i++) {
        int w = snprintf(buf + k, size - k, "%s%s", i ? "|" : "",
                         kiln_anchor_attr_name((kiln_anchor_attr)a->t[i]));
        if (w < 0)
            break;
        k += (size_t)w;
    }
}

/*
 * mc_common.c - graph predicates shared by the memory-conflict plugins;
 * declarations in mc_common.h.  Stateless.
 *
 * Complexity: op classes O(list length) string compares; attribute lookups
 * O(log a); mc_find_netoutput O(n) symbol compares.
 */
#include "mc_common.h"
#include <string.h>

bool mc_op_is(const kiln_graph *g, kiln_node_id n, const char *op)
{
    return strcmp(kiln_node_op_str(g, n), op) == 0;
}

bool mc_op_in(const kiln_graph *g, kiln_node_id n, const char *const *ops)
{
    const char *t = kiln_node_op_str(g, n);
    for (; *ops; ops++)
        if (strcmp(t, *ops) == 0)
            return true;
    return false;
}

bool mc_is_data_like(const kiln_graph *g, kiln_node_id n)
{
    static const char *const ops[] = {"Data", "RefData", "AippData", NULL};
    return mc_op_in(g, n, ops);
}

bool mc_is_variable(const kiln_graph *g, kiln_node_id n)
{
    static const char *const ops[] = {"Variable", "VariableV2", "VarHandleOp", NULL};
    return mc_op_in(g, n, ops);
}

bool mc_is_var_like(const kiln_graph *g, kiln_node_id n)
{
    return mc_is_variable(g, n) || mc_op_is(g, n, "RefData");
}

bool mc_is_while(const kiln_graph *g, kiln_node_id n)
{
    static const char *const ops[] = {"While", "_While", "StatelessWhile", NULL};
    return mc_op_in(g, n, ops);
}

bool mc_is_assign_like(const kiln_graph *g, kiln_node_id n)
{
    static const char *const ops[] = {"Assign",
                                      "AssignAdd",
                                      "AssignSub",
                                      "AssignVariableOp",
                                      "AssignAddVariableOp",
                                      "AssignSubVariableOp",
                                      NULL};
    return mc_op_in(g, n, ops);
}

bool mc_symset_init(mc_symset *set, kiln_graph *g, const char *const *ops)
{
    set->n = 0;
    for (; *ops; ops++) {
        kiln_sym s = set->n < MC_SYMSET_MAX ? kiln_intern(g, *ops) : 0;
        if (!s)
            return false;
        set->s[set->n++] = s;
    }
    return true;
}

void mc_opsyms_init(mc_opsyms *s, kiln_graph *g)
{
    s->data = kiln_intern(g, "Data");
    s->ref_data = kiln_intern(g, "RefData");
    s->aipp_data = kiln_intern(g, "AippData");
    s->variable = kiln_intern(g, "Variable");
    s->variable_v2 = kiln_intern(g, "VariableV2");
    s->var_handle_op = kiln_intern(g, "VarHandleOp");
    s->const_ = kiln_intern(g, "Const");
    s->constant = kiln_intern(g, "Constant");
    s->file_constant = kiln_intern(g, "FileConstant");
    s->const_placeholder = kiln_intern(g, "ConstPlaceHolder");
    s->netoutput = kiln_intern(g, "NetOutput"); /* last: 0 on OOM keeps the fallback */
    if (!s->data || !s->ref_data || !s->aipp_data || !s->variable || !s->variable_v2 ||
        !s->var_handle_op || !s->const_ || !s->constant || !s->file_constant ||
        !s->const_placeholder)
        s->netoutput = 0;
}

bool mc_opsyms_data_like(const mc_opsyms *s, const kiln_graph *g, kiln_node_id n)
{
    if (!s || !s->netoutput)
        return mc_is_data_like(g, n);
    kiln_sym t = kiln_node_op(g, n);
    return t == s->data || t == s->ref_data || t == s->aipp_data;
}

bool mc_opsyms_variable(const mc_opsyms *s, const kiln_graph *g, kiln_node_id n)
{
    if (!s || !s->netoutput)
        return mc_is_variable(g, n);
    kiln_sym t = kiln_node_op(g, n);
    return t == s->variable || t == s->variable_v2 || t == s->var_handle_op;
}

bool mc_opsyms_const(const mc_opsyms *s, const kiln_graph *g, kiln_node_id n)
{
    if (!s || !s->netoutput) {
        static const char *const ops[] = {"Const", "Constant", "FileConstant",
                                          "ConstPlaceHolder", NULL};
        return mc_op_in(g, n, ops);
    }
    kiln_sym t = kiln_node_op(g, n);
    return t == s->const_ || t == s->constant || t == s->file_constant ||
           t == s->const_placeholder;
}

bool mc_opsyms_netoutput(const mc_opsyms *s, const kiln_graph *g, kiln_node_id n)
{
    if (!s || !s->netoutput)
        return mc_op_is(g, n, "NetOutput");
    return kiln_node_op(g, n) == s->netoutput;
}

bool mc_node_bool(const kiln_graph *g, kiln_node_id n, const char *key)
{
    bool v = false;
    return kiln_attrs_get_bool(kiln_node_attrs(g, n), key, &v) && v;
}

kiln_node_id mc_find_netoutput(const kiln_graph *g)
{
    const kiln_sym netoutput = mc_sym(g, "NetOutput");
    for (kiln_node_id n = kiln_graph_next_node(g, 0); n; n = kiln_graph_next_node(g, n))
        if (mc_is_sym(g, n, netoutput))
            return n;
    return 0;
}

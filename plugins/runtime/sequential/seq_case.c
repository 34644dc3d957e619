/*
 * seq_case.c - executing Case nodes for both runtimes (seq_runtime.h,
 * docs/run.md "Case").
 *
 * A Case (GE's multi-way branch) has subgraphs `branch_0` .. `branch_{N-1}`
 * (after the runtime graph build, seq_lower.c, also the control frame
 * `cond`, which the step does itself); input 0 is the branch index, the
 * others are what the branches' Data (InnerData) nodes stand for.  The taken
 * branch runs like an If branch (seq_sub_run); an index below 0 or from N on
 * takes the last branch (the default branch of TensorFlow's Case, whose
 * definition GE's op follows).  A branch whose shapes are static is planned at load, the others
 * when first taken.
 */
#include "seq_runtime.h"

#include <stdlib.h>

struct seq_cases {
    uint32_t n;
    kiln_graph **graph; /* branch_k, k = 0..n-1 */
    seq_plan **plan;    /* built at load (static shapes) or when first taken */
    char **role;
};

void seq_cases_free(seq_cases *c)
{
    if (!c)
        return;
    for (uint32_t k = 0; k < c->n; k++)
        seq_plan_free(c->plan[k]);
    kiln_free(c->graph);
    kiln_free(c->plan);
    kiln_free(c->role);
    kiln_free(c);
}

kiln_status seq_cases_prepare(kiln_graph *g, kiln_node_id n, seq_mem *mem, seq_cases **out,
                              kiln_error *err)
{
    *out = NULL;
    const char *name = kiln_node_name_str(g, n);
    uint32_t ns = kiln_node_subgraph_count(g, n), nb = 0;
    for (uint32_t i = 0; i < ns; i++) {
        const char *role = NULL;
        kiln_node_subgraph(g, n, i, &role);
        nb += role && strncmp(role, "branch_", 7) == 0;
    }
    if (!nb)
        return kiln_errorf(err, KILN_ERR_INVALID, "Case node %s has no branch_* subgraph", name);
    if (kiln_node_input_count(g, n) < 1 || !kiln_node_input_peer(g, n, 0).node)
        return kiln_errorf(err, KILN_ERR_INVALID, "Case node %s has no branch index input", name);
    seq_cases *c = kiln_alloc(sizeof(*c));
    if (c) {
        memset(c, 0, sizeof(*c));
        c->graph = kiln_alloc(sizeof(kiln_graph *) * nb);
        c->plan = kiln_alloc(sizeof(seq_plan *) * nb);
        c->role = kiln_alloc(sizeof(char *) * nb);
    }
    if (!c || !c->graph || !c->plan || !c->role) {
        if (c) {
            kiln_free(c->graph), kiln_free(c->plan), kiln_free(c->role);
            kiln_free(c);
        }
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    }
    c->n = nb;
    memset(c->graph, 0, sizeof(kiln_graph *) * nb);
    memset(c->plan, 0, sizeof(seq_plan *) * nb);
    kiln_status st = KILN_OK;
    for (uint32_t i = 0; i < ns && st == KILN_OK; i++) {
        const char *role = NULL;
        kiln_graph *s = kiln_node_subgraph(g, n, i, &role);
        if (!role || strncmp(role, "branch_", 7) != 0)
            continue; /* the control frame of the lowered form */
        char *end = NULL;
        long k = strtol(role + 7, &end, 10);
        if (k < 0 || (uint32_t)k >= nb || !end || *end || c->graph[k])
            st = kiln_errorf(err, KILN_ERR_INVALID,
                             "Case node %s: subgraph role '%s' is not branch_0..branch_%u, "
                             "each once",
                             name, role, nb - 1);
        else
            c->graph[k] = s, c->role[k] = (char *)role;
    }
    for (uint32_t k = 0; k < nb && st == KILN_OK; k++)
        if (seq_shapes_static(c->graph[k]) &&
            (st = seq_plan_build(c->graph[k], false, mem, &c->plan[k], err)) != KILN_OK)
            kiln_error_push(err, "Case node %s, %s", name, c->role[k]);
    if (st != KILN_OK) {
        seq_cases_free(c);
        return st;
    }
    *out = c;
    return KILN_OK;
}

/* The branch input 0 selects: its first element as an integer. */
static kiln_status pick(const kiln_graph *g, kiln_node_id n, const kiln_tensor *t, uint32_t nb,
                        uint32_t *k, kiln_error *err)
{
    size_t esz = kiln_dtype_size(t->dtype);
    if (!t->data || esz == 0 || t->nbytes < esz)
        return kiln_errorf(err, KILN_ERR_INVALID, "Case node %s: the branch index is empty",
                           kiln_node_name_str(g, n));
    int64_t v;
    switch (t->dtype) {
    case KILN_DT_INT32: {
        int32_t x;
        memcpy(&x, t->data, sizeof(x));
        v = x;
        break;
    }
    case KILN_DT_INT64:
        memcpy(&v, t->data, sizeof(v));
        break;
    case KILN_DT_UINT8:
    case KILN_DT_INT8:
    case KILN_DT_BOOL: {
        uint8_t x;
        memcpy(&x, t->data, 1);
        v = t->dtype == KILN_DT_INT8 ? (int8_t)x : x;
        break;
    }
    default:
        return kiln_errorf(err, KILN_ERR_INVALID,
                           "Case node %s: the branch index has dtype %s, not an integer",
                           kiln_node_name_str(g, n), kiln_dtype_name(t->dtype));
    }
    *k = v < 0 || v >= (int64_t)nb ? nb - 1 : (uint32_t)v;
    return KILN_OK;
}

kiln_status seq_cases_run(seq_cases *c, seq_mem *mem, const kiln_graph *g, kiln_node_id n,
                          const kiln_tensor *in, uint32_t nin, kiln_tensor *out, uint32_t nout,
                          kiln_error *err)
{
    uint32_t k = 0;
    kiln_status st = pick(g, n, &in[0], c->n, &k, err);
    if (st != KILN_OK)
        return st;
    if (!c->plan[k] && (st = seq_plan_build(c->graph[k], false, mem, &c->plan[k], err)) != KILN_OK)
        return kiln_error_push(err, "Case node %s, %s", kiln_node_name_str(g, n), c->role[k]);
    return seq_sub_run(c->plan[k], g, n, "Case", c->role[k], in, nin, out, nout, err);
}

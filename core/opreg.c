/*
 * opreg.c - the op registry (kiln_op.h): one kiln_op_def per op type,
 * registered by op-set plugins, looked up by interned symbol in O(1).
 *
 * Design
 *   An op is a component of kind KILN_COMP_OP whose name is its type, so it
 *   shares the loader's machinery (struct_size copy, rollback of a failing
 *   plugin, `kiln plugins` listing).  Op types form their own namespace: an op
 *   may share a name with a pass or an engine, never with another op.
 *
 *   The lookup table lives in the context's registry: op_by_sym[sym] is the
 *   component of the op type whose interned symbol is sym (symbols are per
 *   context, so is the table).  Registration interns the type and grows the
 *   table to cover it; a symbol interned later (a graph's op type nobody
 *   registered) is beyond the table or maps to NULL.
 *
 *   Thread rules: written only while plugins load; read-only afterwards, so
 *   lookups take no lock.
 */
#include "plugin.h"
#include "graph_int.h"
#include "kiln/kiln_embed.h"

static const char *op_plugin_name(const kiln_plugin_rec *p)
{
    if (!p)
        return "<built-in>";
    return p->path ? p->path : p->desc.name;
}

kiln_status kiln__op_register(kiln_registrar *reg, kiln_component *c, kiln_error *err)
{
    kiln_ctx *ctx = reg->ctx;
    const kiln_op_def *d = &c->d.op;
    const char *file = op_plugin_name(reg->plugin);
    const char *pname = reg->plugin ? reg->plugin->desc.name : "<built-in>";
    if (!d->type || !d->type[0])
        return kiln_errorf(err, KILN_ERR_INVALID, "%s: plugin %s registers an op without a type",
                           file, pname);
    if (d->min_inputs > d->max_inputs || d->min_outputs > d->max_outputs)
        return kiln_errorf(err, KILN_ERR_INVALID,
                           "%s: plugin %s: op %s has a bad arity range (inputs %u..%u, outputs "
                           "%u..%u: min above max)",
                           file, pname, d->type, d->min_inputs, d->max_inputs, d->min_outputs,
                           d->max_outputs);
    if ((d->flags & KILN_OP_DATA_LIKE) && d->min_inputs > 0)
        return kiln_errorf(err, KILN_ERR_INVALID,
                           "%s: plugin %s: op %s is data-like but requires %u inputs", file,
                           pname, d->type, d->min_inputs);
    kiln_sym s = kiln__intern(&ctx->strings, d->type, strlen(d->type));
    if (!s)
        return kiln_errorf(err, KILN_ERR_NOMEM, "%s: out of memory", file);
    struct kiln_registry *r = ctx->registry;
    const kiln_component *dup = s < r->op_cap ? r->op_by_sym[s] : NULL;
    if (dup) {
        const char *dn = dup->plugin ? dup->plugin->desc.name : "<built-in>";
        return kiln_errorf(err, KILN_ERR_DUPLICATE,
                           "%s: plugin %s registers op %s, which plugin %s (%s) already "
                           "registered",
                           file, pname, d->type, dn, op_plugin_name(dup->plugin));
    }
    if (s >= r->op_cap) {
        uint32_t old = r->op_cap;
        if (!KILN_GROW(r->op_by_sym, r->op_cap, s + 1))
            return kiln_errorf(err, KILN_ERR_NOMEM, "%s: out of memory", file);
        memset((void *)(r->op_by_sym + old), 0, (r->op_cap - old) * sizeof(*r->op_by_sym));
    }
    c->name = kiln__intern_str(&ctx->strings, s); /* the context's copy */
    r->op_by_sym[s] = c;
    return KILN_OK;
}

void kiln__op_unregister(kiln_ctx *ctx, const kiln_component *c)
{
    struct kiln_registry *r = ctx->registry;
    kiln_sym s = kiln__intern_find(&ctx->strings, c->name, strlen(c->name));
    if (s && s < r->op_cap && r->op_by_sym[s] == c)
        r->op_by_sym[s] = NULL;
}

const kiln_component *kiln__op_component(const kiln_ctx *ctx, kiln_sym type)
{
    const struct kiln_registry *r = ctx->registry;
    return type < r->op_cap ? r->op_by_sym[type] : NULL;
}

const kiln_op_def *kiln_op_find(const kiln_graph *g, kiln_sym type)
{
    if (!g)
        return NULL;
    const kiln_component *c = kiln__op_component(g->ctx, type);
    return c ? &c->d.op : NULL;
}

const kiln_op_def *kiln_op_find_str(const kiln_graph *g, const char *type)
{
    if (!g || !type)
        return NULL;
    return kiln_op_find(g, kiln__intern_find(&g->ctx->strings, type, strlen(type)));
}

const kiln_op_def *kiln_node_op_def(const kiln_graph *g, kiln_node_id n)
{
    if (!g || !kiln__live(g, n))
        return NULL;
    return kiln_op_find(g, g->nodes[n].op);
}

uint32_t kiln_node_op_flags(const kiln_graph *g, kiln_node_id n)
{
    const kiln_op_def *d = kiln_node_op_def(g, n);
    return d ? d->flags : 0;
}

const char *kiln_op_plugin(const kiln_graph *g, kiln_sym type)
{
    if (!g)
        return NULL;
    const kiln_component *c = kiln__op_component(g->ctx, type);
    if (!c)
        return NULL;
    return c->plugin ? c->plugin->desc.name : "<built-in>";
}

static const struct {
    uint32_t bit;
    const char *name;
} flag_names[] = {
    {KILN_OP_DATA_LIKE, "data-like"},       {KILN_OP_ELEMENTWISE, "elementwise"},
    {KILN_OP_COMMUTATIVE, "commutative"},   {KILN_OP_SHAPE_ONLY, "shape-only"},
    {KILN_OP_CONTROL_FLOW, "control-flow"}, {KILN_OP_STATEFUL, "stateful"},
    {KILN_OP_REFERENCE, "reference"},       {KILN_OP_NO_FOLD, "no-fold"},
    {KILN_OP_CONSTANT, "constant"},         {KILN_OP_GRAPH_OUTPUT, "graph-output"},
};

static size_t put_range(char *buf, size_t size, size_t at, const char *what, uint32_t lo,
                        uint32_t hi)
{
    if (at >= size)
        return at;
    int k;
    if (hi == KILN_OP_VARIADIC)
        k = snprintf(buf + at, size - at, " %s %u+", what, lo);
    else if (lo == hi)
        k = snprintf(buf + at, size - at, " %s %u", what, lo);
    else
        k = snprintf(buf + at, size - at, " %s %u..%u", what, lo, hi);
    return k > 0 ? at + (size_t)k : at;
}

const char *kiln_op_describe(const kiln_op_def *d, char *buf, size_t size)
{
    if (!buf || !size)
        return "";
    buf[0] = 0;
    if (!d)
        return buf;
    size_t at = 0;
    int k = snprintf(buf, size, "%s", d->domain && d->domain[0] ? d->domain : "-");
    at = k > 0 ? (size_t)k : 0;
    at = put_range(buf, size, at, "in", d->min_inputs, d->max_inputs);
    at = put_range(buf, size, at, "out", d->min_outputs, d->max_outputs);
    for (size_t i = 0; i < KILN_ARRAY_LEN(flag_names) && at < size; i++)
        if (d->flags & flag_names[i].bit) {
            k = snprintf(buf + at, size - at, " %s", flag_names[i].name);
            at = k > 0 ? at + (size_t)k : at;
        }
    if (at < size && d->infer) {
        k = snprintf(buf + at, size - at, " infer");
        at = k > 0 ? at + (size_t)k : at;
    }
    if (at < size && d->fold)
        snprintf(buf + at, size - at, " fold");
    return buf;
}

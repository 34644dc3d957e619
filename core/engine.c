/*
 * engine.c - binding engine kernels to nodes (the host side of
 * kiln_runtime.h).
 *
 * Engine choice for a node, in order:
 *   1. the engine named by the node attribute `_kiln_engine` (GRAPH_FORMAT's
 *      node `engine`): a placement decision already made is honoured, and an
 *      unknown name is an error;
 *   2. otherwise the engine with the highest priority (ties: registration
 *      order) whose op table lists the op type with a dtype mask that admits
 *      the node's first output dtype, and whose supports() callback (when
 *      present) accepts the node.
 * Every call into an engine is bracketed for crash attribution.
 * Complexity: O(engines x ops) per node; runtimes bind once per load.
 */
#include "plugin.h"
#include "crash.h"
#include "graph_int.h"
#include "graph_json.h"


static bool lists_op(const kiln_engine_desc *e, const char *op, kiln_dtype dt)
{
    for (uint32_t i = 0; i < e->op_count; i++) {
        const kiln_op_info *oi = &e->ops[i];
        if (oi->op_type && strcmp(oi->op_type, op) == 0)
            return oi->dtype_mask == 0 || (oi->dtype_mask & (1u << dt));
    }
    return false;
}

static const kiln_component *choose(kiln_graph *g, kiln_node_id n, kiln_error *err)
{
    kiln_ctx *ctx = g->ctx;
    const char *want;
    if (kiln_attrs_get_string(kiln_node_attrs(g, n), KILN_ATTR_ENGINE, &want) && want[0]) {
        const kiln_component *c = kiln_registry_find(ctx, KILN_COMP_ENGINE, want);
        if (!c)
            kiln_errorf(err, KILN_ERR_NOT_FOUND,
                        "node %s (%s) is placed on engine '%s', which no loaded plugin provides",
                        kiln_node_name_str(g, n), kiln_node_op_str(g, n), want);
        return c;
    }
    const char *op = kiln_node_op_str(g, n);
    kiln_dtype dt = KILN_DT_FLOAT32;
    if (kiln_node_output_count(g, n))
        dt = kiln_desc_dtype(kiln_node_output_desc(g, n, 0));
    const kiln_component *best = NULL;
    for (uint32_t i = 0; i < kiln_registry_count(ctx); i++) {
        const kiln_component *c = kiln_registry_at(ctx, i);
        if (c->kind != KILN_COMP_ENGINE || !lists_op(&c->d.engine, op, dt))
            continue;
        if (best && best->d.engine.priority >= c->d.engine.priority)
            continue;
        if (c->d.engine.supports) {
            void *inst = NULL;
            if (kiln__engine_instance(c, &inst, NULL) != KILN_OK)
                continue;
            kiln_activity act =
                KILN_ACTIVITY(kiln__comp_plugin(c), c->name, "engine supports", g, n);
            kiln_activity *prev = kiln__activity_enter(&act);
            bool ok = c->d.engine.supports(inst, g, n);
            kiln__activity_leave(prev);
            if (!ok)
                continue;
        }
        best = c;
    }
    if (!best)
        kiln_errorf(err, KILN_ERR_UNSUPPORTED, "node %s: no loaded engine supports op %s (%s)",
                    kiln_node_name_str(g, n), op, kiln_dtype_name(dt));
    return best;
}

const char *kiln_engine_for_node(kiln_graph *g, kiln_node_id n)
{
    if (!g || !kiln__live(g, n))
        return NULL;
    const kiln_component *c = choose(g, n, NULL);
    return c ? c->name : NULL;
}

kiln_status kiln_engine_kernel(kiln_graph *g, kiln_node_id n, kiln_kernel_fn *fn, void **state,
                               const char **engine, kiln_error *err)
{
    kiln_error local; /* a NULL err still gets the right status back */
    if (!err) {
        kiln_error_clear(&local);
        err = &local;
    }
    if (!g || !kiln__live(g, n) || !fn || !state)
        return kiln_errorf(err, KILN_ERR_INVALID, "kiln_engine_kernel: bad arguments");
    *fn = NULL;
    *state = NULL;
    const kiln_component *c = choose(g, n, err);
    if (!c)
        return kiln_error_code(err);
    if (engine)
        *engine = c->name;
    if (!c->d.engine.kernel_create)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "engine %s has no kernels (node %s, op %s)",
                           c->name, kiln_node_name_str(g, n), kiln_node_op_str(g, n));
    void *inst = NULL;
    kiln_status st = kiln__engine_instance(c, &inst, err);
    if (st != KILN_OK)
        return st;
    kiln_activity act = KILN_ACTIVITY(kiln__comp_plugin(c), c->name, "kernel_create", g, n);
    kiln_activity *prev = kiln__activity_enter(&act);
    st = c->d.engine.kernel_create(inst, g, n, fn, state, err);
    kiln__activity_leave(prev);
    if (st == KILN_OK && !*fn)
        st = kiln_errorf(err, KILN_ERR_INTERNAL, "engine %s returned no kernel for node %s",
                         c->name, kiln_node_name_str(g, n));
    if (st != KILN_OK)
        kiln_error_push(err, "engine %s", c->name);
    return st;
}

void kiln_engine_kernel_release(kiln_graph *g, const char *engine, void *state)
{
    if (!g || !engine)
        return;
    const kiln_component *c = kiln_registry_find(g->ctx, KILN_COMP_ENGINE, engine);
    if (c && c->d.engine.kernel_destroy) {
        kiln_activity act = {.plugin = kiln__comp_plugin(c),
                             .component = c->name,
                             .stage = "kernel release",
                             .graph = g,
                             .doing = "releasing a kernel"};
        kiln_activity *prev = kiln__activity_enter(&act);
        c->d.engine.kernel_destroy(c->inst, state);
        kiln__activity_leave(prev);
    }
}

/*
 * bg_plugin.c - libkiln_bg_condition.so (plugin kiln.bg_condition): the graph
 * pass BgConditionLowering, which replaces every If/Case by GE's lowered form
 * (bg_condition.h) so that the form can be written and checked:
 *
 *   kiln opt MODEL --passes BgConditionLowering -o lowered.json
 *
 * It is in no pipeline: the runtimes execute If/Case from the original form
 * (docs/control_flow_lowering.md).
 */
#include "bg_condition.h"

static const kiln_option_def options[] = {
    {sizeof(kiln_option_def), KILN_OPT_BOOL, "auto_guard", "true",
     "first give every computed value a branch returns (and every computed input of the node) "
     "a FreeMemory guarder, as GE's lowering guards each allocated output",
     0, 0},
};

typedef struct bg_opts {
    bool auto_guard;
} bg_opts;

static kiln_status create(const kiln_options *opts, kiln_error *err, void **inst)
{
    bg_opts *o = kiln_alloc(sizeof(*o));
    if (!o)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    o->auto_guard = true;
    kiln_options_get_bool(opts, "auto_guard", &o->auto_guard);
    *inst = o;
    return KILN_OK;
}

static void destroy(void *inst) { kiln_free(inst); }

static kiln_pass_result run(void *inst, kiln_pass_ctx *ctx, kiln_graph *g)
{
    const bg_opts *o = inst;
    uint32_t n = 0;
    kiln_status st = kiln_bg_lower_graph(g, o ? o->auto_guard : true, &n, kiln_pass_error(ctx));
    if (st != KILN_OK)
        return KILN_PASS_FAILED;
    kiln_pass_stat_add(ctx, "lowered", n);
    return n ? KILN_PASS_CHANGED : KILN_PASS_NOT_CHANGED;
}

static const kiln_pass_desc bg_pass = {
    .struct_size = sizeof(kiln_pass_desc),
    .kind = KILN_PASS_KIND_GRAPH,
    .name = "BgConditionLowering",
    .summary = "replace every If/Case by GE's lowered form (cond graph, InnerData, "
               "PointFromInputs, guarders, IdentityAddr) for inspection",
    .flags = KILN_PASS_NO_SUBGRAPHS,
    .option_count = sizeof(options) / sizeof(options[0]),
    .options = options,
    .create = create,
    .destroy = destroy,
    .run_graph = run,
};

static kiln_status init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)h;
    (void)e;
    return kiln_register_pass(r, &bg_pass);
}

KILN_PLUGIN_DEFINE("kiln.bg_condition", "0.1.0", "Apache-2.0",
                   "If/Case runtime graph build (GE bg_condition) as a pass", init, NULL)

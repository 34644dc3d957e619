/* tp_future_required.c - built against the headers of the next minor and
 * requiring it (the default KILN_ABI_MINOR_REQUIRED): the current host must
 * refuse it, naming the plugin and both versions. */
#include <kiln/kiln.h>

static kiln_pass_result run(void *inst, kiln_pass_ctx *ctx, kiln_graph *g)
{
    (void)inst;
    (void)ctx;
    kiln_attrs_set_int(kiln_graph_attrs(g), "future_probe", kiln_future_probe(1));
    return KILN_PASS_CHANGED;
}

static kiln_status init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)h;
    (void)e;
    static const kiln_pass_desc d = {.struct_size = sizeof(kiln_pass_desc),
                                     .kind = KILN_PASS_KIND_GRAPH, .name = "FutureRequiredPass",
                                     .run_graph = run};
    return kiln_register_pass(r, &d);
}

KILN_PLUGIN_DEFINE("kiln.test.future_required", "1", "MIT", "needs the next minor", init, NULL)

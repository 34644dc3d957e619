/* tp_future_probe.c - built against the headers of the next minor (see
 * make_future_api.py: one more host function, kiln_future_probe), but declares
 * that it runs on this minor too (KILN_ABI_MINOR_REQUIRED) and guards the new
 * call with KILN_HOST_HAS.  On the current host the probe says no and the pass
 * takes its fallback: graph attribute "future_probe" = "fallback". */
#define KILN_ABI_MINOR_REQUIRED 0
#include <kiln/kiln.h>

static kiln_pass_result run(void *inst, kiln_pass_ctx *ctx, kiln_graph *g)
{
    (void)inst;
    (void)ctx;
    if (KILN_HOST_HAS(kiln__host, kiln_future_probe))
        kiln_attrs_set_int(kiln_graph_attrs(g), "future_probe", kiln_future_probe(41));
    else
        kiln_attrs_set_string(kiln_graph_attrs(g), "future_probe", "fallback");
    return KILN_PASS_CHANGED;
}

static kiln_status init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)h;
    (void)e;
    static const kiln_pass_desc d = {.struct_size = sizeof(kiln_pass_desc),
                                     .kind = KILN_PASS_KIND_GRAPH, .name = "FutureProbePass",
                                     .run_graph = run};
    return kiln_register_pass(r, &d);
}

KILN_PLUGIN_DEFINE("kiln.test.future_probe", "1", "MIT", "probes a newer host function", init,
                   NULL)

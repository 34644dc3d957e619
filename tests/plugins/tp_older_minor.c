/* tp_older_minor.c - simulates a plugin built against an older minor: its
 * descriptors stop at the ABI 1.0 minimum (no reserved tail).  The host must
 * load it and zero-fill the fields it did not provide. */
#include <kiln/kiln.h>

KILN_PLUGIN_HIDDEN const kiln_host_api *kiln__host;

static kiln_pass_result run(void *inst, kiln_pass_ctx *ctx, kiln_graph *g)
{
    (void)inst;
    (void)ctx;
    kiln_attrs_set_bool(kiln_graph_attrs(g), "older_minor_ran", true);
    return KILN_PASS_CHANGED;
}

static kiln_status init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)e;
    kiln__host = h;
    static kiln_pass_desc d = {.kind = KILN_PASS_KIND_GRAPH, .name = "OlderMinorPass",
                               .run_graph = run};
    d.struct_size = (uint32_t)KILN_SIZE_THROUGH(kiln_pass_desc, on_finish_graph);
    d.reserved[0] = (void *)1; /* garbage past struct_size: the host must not read it */
    return kiln_register_pass(r, &d);
}

static kiln_plugin_desc desc = {0, KILN_ABI_MAJOR, 0, "kiln.test.older", "1", "MIT",
                                "older minor", "test", init, NULL, {(void *)1, 0, 0, 0}};

KILN_PLUGIN_EXPORT const kiln_plugin_desc *kiln_plugin_entry(void);
KILN_PLUGIN_EXPORT const kiln_plugin_desc *kiln_plugin_entry(void)
{
    desc.struct_size = (uint32_t)KILN_PLUGIN_DESC_MIN_SIZE;
    return &desc;
}

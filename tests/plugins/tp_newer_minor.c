/* tp_newer_minor.c - built against a newer minor that it requires: larger
 * descriptors with trailing fields this host does not know.  The host must
 * refuse it (GStreamer's rule), naming the plugin and both versions. */
#include <kiln/kiln.h>

typedef struct future_pass_desc {
    kiln_pass_desc base;
    void *future_hook; /* a field a later minor might add */
} future_pass_desc;

typedef struct future_plugin_desc {
    kiln_plugin_desc base;
    const char *future_field;
} future_plugin_desc;

KILN_PLUGIN_HIDDEN const kiln_host_api *kiln__host;

static kiln_pass_result run(void *inst, kiln_pass_ctx *ctx, kiln_graph *g)
{
    (void)inst;
    (void)ctx;
    kiln_attrs_set_bool(kiln_graph_attrs(g), "newer_minor_ran", true);
    return KILN_PASS_CHANGED;
}

static kiln_status init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)e;
    kiln__host = h;
    static future_pass_desc d = {{.struct_size = sizeof(future_pass_desc),
                                  .kind = KILN_PASS_KIND_GRAPH, .name = "NewerMinorPass",
                                  .run_graph = run},
                                 (void *)0};
    return kiln_register_pass(r, &d.base);
}

static const future_plugin_desc desc = {
    {sizeof(future_plugin_desc), KILN_ABI_MAJOR, KILN_ABI_MINOR + 1, "kiln.test.newer", "1",
     "MIT", "newer minor", "test", init, NULL, {0}},
    "future"};

KILN_PLUGIN_EXPORT const kiln_plugin_desc *kiln_plugin_entry(void);
KILN_PLUGIN_EXPORT const kiln_plugin_desc *kiln_plugin_entry(void)
{
    return &desc.base;
}

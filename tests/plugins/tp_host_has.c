/* tp_host_has.c - KILN_HOST_HAS in a plugin source, where every kiln_* name
 * is a macro: the current host has kiln_engine_for_node (the probe says yes
 * and the pass calls it); a copy of the table cut to the ABI 1.0 header plus
 * its first entry lacks it (the probe says no).  Graph attributes:
 *   host_has_engine_for_node  true
 *   short_table_has_it        false
 *   short_table_has_first     true */
#include <kiln/kiln.h>

static kiln_pass_result run(void *inst, kiln_pass_ctx *ctx, kiln_graph *g)
{
    (void)inst;
    (void)ctx;
    kiln_attrs *a = kiln_graph_attrs(g);
    bool has = KILN_HOST_HAS(kiln__host, kiln_engine_for_node);
    if (has) {
        kiln_node_id n = kiln_graph_next_node(g, 0);
        if (n)
            (void)kiln_engine_for_node(g, n); /* no engine loaded: NULL, but callable */
    }
    kiln_attrs_set_bool(a, "host_has_engine_for_node", has);
    kiln_host_api short_table = *kiln__host;
    short_table.struct_size = (uint32_t)KILN_SIZE_THROUGH(kiln_host_api, status_name);
    kiln_attrs_set_bool(a, "short_table_has_it", KILN_HOST_HAS(&short_table, kiln_engine_for_node));
    kiln_attrs_set_bool(a, "short_table_has_first", KILN_HOST_HAS(&short_table, kiln_status_name));
    return KILN_PASS_CHANGED;
}

static kiln_status init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)e;
    if (!KILN_HOST_HAS(h, kiln_register_pass))
        return KILN_ERR_VERSION;
    static const kiln_pass_desc d = {.struct_size = sizeof(kiln_pass_desc),
                                     .kind = KILN_PASS_KIND_GRAPH, .name = "HostHasPass",
                                     .run_graph = run};
    return kiln_register_pass(r, &d);
}

KILN_PLUGIN_DEFINE("kiln.test.host_has", "1", "MIT", "uses KILN_HOST_HAS", init, NULL)
